//! Microbenchmark of the dispatcher's whole per-request path on one thread: the
//! runtime's own `DispatchCore` (slab, policy, job rings, completion rings),
//! with the workers replaced by a loopback. One iteration is one request: encode
//! a synthetic body into the pool buffer of its token (as the generator does),
//! classify it, admit it, dispatch the policy's decisions, then (loopback) pop
//! each job, read its body from the pool and push its completion, and drain the
//! completions into the policy. The policy is warmed up first so DARC has left
//! its c-FCFS warm-up.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use psp_core::{Classifier, HeaderClassifier, Nanos, PolicyContext, PolicySpec, Request, TypeInfo};
use psp_runtime::RunControl;
use psp_runtime::handler::synthetic;
use psp_runtime::idle::Wakeup;
use psp_runtime::pool::{GeneratedBody, TokenPool};
use psp_runtime::{CoreParts, DispatchCore, Slot};
use psp_runtime::{Done, Job};
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

/// The dispatcher's core with loopback workers.
struct Loopback {
    core: DispatchCore,
    classifier: HeaderClassifier,
    jobs_rx: Vec<Consumer<Job>>,
    done_tx: Vec<Producer<Done>>,
    bodies: TokenPool<GeneratedBody>,
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
    fn new(spec: &str, workers_park: bool) -> Self {
        let spec: PolicySpec = spec.parse().expect("policy spec");
        let ctx = context();
        let policy = spec.build(&ctx).expect("policy builds");
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
        // Never parked: notifying them is the flag check only, as for busy workers.
        let workers = (0..WORKERS)
            .map(|_| Arc::new(Wakeup::for_current()))
            .collect();
        let core = DispatchCore::new(CoreParts {
            policy,
            jobs: jobs_tx,
            done: done_rx,
            workers,
            control: Arc::new(RunControl::new(WORKERS)),
            type_names: ctx.types.iter().map(|t| t.name.clone()).collect(),
            max_in_flight: QUEUE_CAPACITY,
            stats: None,
            workers_park,
            max_wait_ns: Vec::new(),
        });
        Self {
            core,
            classifier: HeaderClassifier {
                offset: synthetic::TYPE_OFFSET,
                types: 2,
            },
            jobs_rx,
            done_tx,
            bodies: TokenPool::new(QUEUE_CAPACITY),
            next_id: 0,
            now: 0,
        }
    }

    /// One request through the whole path; returns whether anything completed.
    #[inline]
    fn request(&mut self) -> bool {
        self.now += STEP_NS;
        let now = self.now;
        let id = self.next_id;
        self.next_id += 1;
        let (true_type, service_ns) = if id % LONG_EVERY == LONG_EVERY - 1 {
            (1, LONG_NS)
        } else {
            (0, SHORT_NS)
        };

        // Arrival: body, classification, slot, policy.
        let p = synthetic::encode(black_box(true_type), black_box(service_ns));
        let type_id = self.classifier.classify(&p);
        let token = self.core.take_token().expect("one request in flight");
        // SAFETY: one thread plays dispatcher and workers: it owns every token.
        let body = unsafe { self.bodies.get_mut(token.index()) };
        body.data[..p.len()].copy_from_slice(&p);
        body.len = p.len() as u16;
        let slot = Slot {
            req: Request {
                id,
                token: token.index(),
                type_id,
                flow: 0,
                arrival_ns: now,
            },
            true_type,
            scheduled_ns: now,
            // Recorded, as every request of a real run after its warm-up.
            measured: true,
            len: p.len() as u16,
            count: 1,
            deadline_ns: psp_runtime::NO_DEADLINE,
        };
        assert!(
            self.core.admit(token, slot, now).is_ok(),
            "one request in flight: the queue cannot be full"
        );

        // Decisions: jobs onto the chosen workers' rings.
        let dispatched = self.core.dispatch(now);

        // Loopback workers (those that got a job), then the completions back to
        // the policy.
        for w in dispatched.iter() {
            let (jobs, done) = (&mut self.jobs_rx[w as usize], &mut self.done_tx[w as usize]);
            while let Ok(job) = jobs.pop() {
                // SAFETY: as above.
                let body = unsafe { self.bodies.get(job.token) };
                let service_ns = synthetic::service_ns(body.bytes()).expect("synthetic body");
                let d = Done {
                    token: job.token,
                    ok: true,
                    refused: false,
                    sent: true,
                    preempted: false,
                    no_fiber: false,
                    failed_in_job: (0, 0),
                    expired: false,
                    service_ns,
                    finished_ns: now,
                };
                assert!(done.push(d).is_ok(), "completion ring full");
            }
        }
        self.core.complete(now)
    }
}

fn dispatch_path(c: &mut Criterion) {
    let mut group = c.benchmark_group("dispatch_path");
    // Parking workers (the default idle strategy) cost a wake-up fence per
    // dispatch; spinning workers (`--idle spin`, the paper's set-up) do not.
    for (id, spec, park) in [
        ("c-fcfs", "c-fcfs", true),
        ("darc", "darc:samples=1000", true),
        ("c-fcfs-spinning-workers", "c-fcfs", false),
        ("darc-spinning-workers", "darc:samples=1000", false),
    ] {
        let mut lb = Loopback::new(spec, park);
        for _ in 0..WARMUP_REQUESTS {
            lb.request();
        }
        assert!(
            !lb.core.has_queued(),
            "{spec}: loopback left requests queued"
        );
        assert_eq!(
            lb.core.in_flight(),
            0,
            "{spec}: loopback left requests in flight"
        );
        if spec.starts_with("darc") {
            assert!(
                lb.core.policy().reservation().is_some(),
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
