//! Microbenchmark of the dispatcher's whole per-request path on one thread, with
//! the workers replaced by a loopback: encode a synthetic payload, classify it,
//! hand it to the policy, drain the policy's decisions onto the workers' job
//! rings, then (loopback) pop each job, push its completion on the worker's
//! completion ring, pop it and report it to the policy. One iteration is one
//! request; the policy is warmed up first so DARC has left its c-FCFS warm-up.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use psp_core::{
    Action, Classifier, HeaderClassifier, Nanos, Policy, PolicyContext, PolicySpec, Request,
    TypeInfo, WorkerId,
};
use psp_runtime::handler::synthetic;
use psp_runtime::worker::{Done, JOB_PAYLOAD, Job};
use rtrb::{Consumer, Producer, RingBuffer};

const WORKERS: usize = 14;
const QUEUE_CAPACITY: usize = 4096;
/// Slots per ring, as the runtime allocates them.
const RING_CAPACITY: usize = 4;
/// One long request every this many.
const LONG_EVERY: u64 = 200;
const SHORT_NS: u64 = 500;
const LONG_NS: u64 = 500_000;
/// Fake time between two arrivals.
const STEP_NS: Nanos = 300;
/// Requests run before measuring (DARC needs 1000 samples to leave warm-up).
const WARMUP_REQUESTS: u64 = 5_000;

#[derive(Clone, Copy)]
struct Slot {
    req: Request,
    len: u16,
    payload: [u8; JOB_PAYLOAD],
}

/// The dispatcher's state with loopback workers.
struct Loopback {
    policy: Box<dyn Policy>,
    classifier: HeaderClassifier,
    slots: Vec<Slot>,
    jobs_tx: Vec<Producer<Job>>,
    jobs_rx: Vec<Consumer<Job>>,
    done_tx: Vec<Producer<Done>>,
    done_rx: Vec<Consumer<Done>>,
    next_id: u64,
    now: Nanos,
}

fn context() -> PolicyContext {
    PolicyContext {
        workers: WORKERS,
        types: vec![
            TypeInfo {
                name: "short".into(),
                mean_service_ns: Some(SHORT_NS as f64),
            },
            TypeInfo {
                name: "long".into(),
                mean_service_ns: Some(LONG_NS as f64),
            },
        ],
        queue_capacity: QUEUE_CAPACITY,
    }
}

impl Loopback {
    fn new(spec: &str) -> Self {
        let spec: PolicySpec = spec.parse().expect("policy spec");
        let policy = spec.build(&context()).expect("policy builds");
        let blank = Slot {
            req: Request {
                id: 0,
                token: 0,
                type_id: 0,
                arrival_ns: 0,
            },
            len: 0,
            payload: [0; JOB_PAYLOAD],
        };
        let (mut jobs_tx, mut jobs_rx, mut done_tx, mut done_rx) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..WORKERS {
            let (p, c) = RingBuffer::<Job>::new(RING_CAPACITY);
            jobs_tx.push(p);
            jobs_rx.push(c);
            let (p, c) = RingBuffer::<Done>::new(RING_CAPACITY);
            done_tx.push(p);
            done_rx.push(c);
        }
        Self {
            policy,
            classifier: HeaderClassifier {
                offset: synthetic::TYPE_OFFSET,
                types: 2,
            },
            slots: vec![blank; QUEUE_CAPACITY],
            jobs_tx,
            jobs_rx,
            done_tx,
            done_rx,
            next_id: 0,
            now: 0,
        }
    }

    /// One request through the whole path; returns the number of dispatches.
    #[inline]
    fn request(&mut self) -> u32 {
        self.now += STEP_NS;
        let now = self.now;
        let id = self.next_id;
        self.next_id += 1;
        let (true_type, service_ns) = if id % LONG_EVERY == LONG_EVERY - 1 {
            (1, LONG_NS)
        } else {
            (0, SHORT_NS)
        };

        // Arrival: payload, classification, slot, policy.
        let p = synthetic::encode(black_box(true_type), black_box(service_ns));
        let type_id = self.classifier.classify(&p);
        let token = (id % QUEUE_CAPACITY as u64) as u32;
        let req = Request {
            id,
            token,
            type_id,
            arrival_ns: now,
        };
        let slot = &mut self.slots[token as usize];
        slot.req = req;
        slot.len = p.len() as u16;
        slot.payload[..p.len()].copy_from_slice(&p);
        if self.policy.on_arrival(req, now).is_err() {
            unreachable!("one request in flight: the queue cannot be full");
        }

        // Decisions: jobs onto the chosen workers' rings.
        let mut dispatched = 0u64;
        let mut count = 0;
        while let Some(action) = self.policy.next_action(now) {
            if let Action::Dispatch { worker, req, .. } = action {
                let slot = &self.slots[req.token as usize];
                let job = Job {
                    token: req.token,
                    type_id: req.type_id,
                    len: slot.len,
                    payload: slot.payload,
                };
                if self.jobs_tx[worker as usize].push(job).is_err() {
                    unreachable!("job ring of worker {worker} full");
                }
                dispatched |= 1 << worker;
                count += 1;
            }
        }

        // Loopback workers, then the completions back to the policy.
        while dispatched != 0 {
            let w = dispatched.trailing_zeros() as usize;
            dispatched &= dispatched - 1;
            while let Ok(job) = self.jobs_rx[w].pop() {
                let service_ns = synthetic::service_ns(&job.payload[..job.len as usize])
                    .expect("synthetic payload");
                let done = Done {
                    token: job.token,
                    ok: true,
                    service_ns,
                    finished_ns: now,
                };
                if self.done_tx[w].push(done).is_err() {
                    unreachable!("completion ring of worker {w} full");
                }
            }
            while let Ok(done) = self.done_rx[w].pop() {
                let req = self.slots[done.token as usize].req;
                self.policy
                    .on_completion(w as WorkerId, &req, done.service_ns, now);
            }
        }
        count
    }
}

fn dispatch_path(c: &mut Criterion) {
    let mut group = c.benchmark_group("dispatch_path");
    for (id, spec) in [("c-fcfs", "c-fcfs"), ("darc", "darc:samples=1000")] {
        let mut lb = Loopback::new(spec);
        for _ in 0..WARMUP_REQUESTS {
            lb.request();
        }
        assert_eq!(
            lb.policy.queued(),
            0,
            "{spec}: loopback left requests queued"
        );
        if spec.starts_with("darc") {
            assert!(
                lb.policy.reservation().is_some(),
                "DARC still in warm-up after {WARMUP_REQUESTS} requests"
            );
        }
        group.bench_function(BenchmarkId::from_parameter(id), |b| {
            b.iter(|| black_box(lb.request()))
        });
    }
    group.finish();
}

criterion_group!(benches, dispatch_path);
criterion_main!(benches);
