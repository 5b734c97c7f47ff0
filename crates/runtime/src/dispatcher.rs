//! The dispatcher thread: runs the in-process open-loop generator, classifies
//! requests, drives the shared policy core (the same objects the simulator
//! drives), hands jobs to workers over their rings and takes completions back.
//!
//! One pass of the loop reads the clock once, then: admits the arrivals that are
//! due (bounded batch), drains every completion ring, drains the policy's
//! decisions, and idles if nothing happened. Nothing on this path allocates or
//! locks; request state lives in a slab sized at start-up. Only this thread
//! touches the policy, the slab, the job producers and the completion consumers.

use std::sync::Arc;
use std::time::Duration;

use psp_core::{Action, Classifier, Policy, Request, TypeId};
use psp_metrics::Recorder;
use psp_workload::ArrivalSource;
use rtrb::{Consumer, Producer};

use crate::clock::Clock;
use crate::handler::synthetic;
use crate::idle::{IdleStrategy, Idler, Wakeup};
use crate::worker::{Done, JOB_PAYLOAD, Job};

/// Arrivals admitted per pass at most, so completions are never starved.
const ARRIVAL_BATCH: usize = 64;
/// Wake this long before a scheduled arrival (the wake-up latency of a park).
const PARK_MARGIN_NS: u64 = 15_000;

#[derive(Debug, Clone, Copy)]
struct Slot {
    req: Request,
    /// The type the generator meant (differs from `req.type_id` under a
    /// misclassifying classifier); latency is recorded under it.
    true_type: TypeId,
    scheduled_ns: u64,
    len: u16,
    payload: [u8; JOB_PAYLOAD],
}

/// Periodic live statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatsConfig {
    /// Time between two lines.
    pub interval: Duration,
    /// JSON lines instead of human lines.
    pub json: bool,
}

/// A reservation change observed at run time.
#[derive(Debug, Clone, PartialEq)]
pub struct ReservationEvent {
    /// Seconds since the generator started.
    pub at_s: f64,
    /// The new reservation (cloned only when an update is applied: rare).
    pub reservation: psp_core::Reservation,
}

/// Counters and records of a finished run.
#[derive(Debug, Clone)]
pub struct DispatcherReport {
    /// Measured (after warm-up) latency and slowdown, and measured sheds.
    pub recorder: Recorder,
    /// Requests generated, warm-up included.
    pub generated: u64,
    /// Requests completed, warm-up included.
    pub completed: u64,
    /// Requests shed at a full queue (OVERLOADED), warm-up included.
    pub shed: u64,
    /// Requests generated after warm-up.
    pub measured_generated: u64,
    /// Completions whose handler failed.
    pub handler_errors: u64,
    /// Requests still queued or running when the drain timed out.
    pub stranded: u64,
    /// Reservation changes, in order.
    pub reservation_log: Vec<ReservationEvent>,
    /// The policy's counters.
    pub policy_stats: psp_core::policy::PolicyStats,
    /// The final reservation, if any.
    pub reservation: Option<String>,
}

/// Everything the dispatcher thread owns.
pub struct DispatcherThread {
    /// The scheduling policy.
    pub policy: Box<dyn Policy>,
    /// Payload to type.
    pub classifier: Box<dyn Classifier>,
    /// The open-loop schedule (times relative to the start).
    pub arrivals: Box<dyn ArrivalSource + Send>,
    /// One job producer per worker.
    pub jobs: Vec<Producer<Job>>,
    /// One completion consumer per worker.
    pub done: Vec<Consumer<Done>>,
    /// The workers' wake-up handles.
    pub workers: Vec<Arc<Wakeup>>,
    /// The shared clock.
    pub clock: Clock,
    /// Names of the types (the recorder's rows, by the generator's true type).
    pub type_names: Vec<String>,
    /// Requests scheduled before this (relative) time are not measured.
    pub warmup_ns: u64,
    /// How long to wait for in-flight requests after the last arrival.
    pub drain_timeout: Duration,
    /// How to wait when a pass found nothing.
    pub idle: IdleStrategy,
    /// Periodic statistics on stderr.
    pub stats: Option<StatsConfig>,
    /// Slab size: requests that can be queued or running at once.
    pub max_in_flight: usize,
}

impl DispatcherThread {
    /// The dispatcher loop, until every generated request is completed or shed
    /// (or the drain timed out). `me` is this thread's wake-up handle.
    pub fn run(mut self, me: &Wakeup) -> DispatcherReport {
        let mut recorder = Recorder::new(self.type_names.iter().cloned());
        let blank = Slot {
            req: Request {
                id: 0,
                token: 0,
                type_id: 0,
                arrival_ns: 0,
            },
            true_type: 0,
            scheduled_ns: 0,
            len: 0,
            payload: [0; JOB_PAYLOAD],
        };
        let mut slots = vec![blank; self.max_in_flight];
        let mut free: Vec<u32> = (0..self.max_in_flight as u32).rev().collect();
        let mut idler = Idler::new(self.idle);
        let (mut generated, mut completed, mut shed, mut measured_generated) =
            (0u64, 0u64, 0u64, 0u64);
        let mut handler_errors = 0u64;
        let mut in_flight = 0usize;
        let mut reservation_log = Vec::with_capacity(64);
        // Per-type counters for the live statistics (indexed by the true type).
        let n_types = self.type_names.len();
        let mut generated_by_type = vec![0u64; n_types];
        let mut completed_by_type = vec![0u64; n_types];
        let mut shed_by_type = vec![0u64; n_types];
        let mut last_updates = 0u64;
        // Start a little in the future so the first arrivals are not already late.
        let base = self.clock.now_ns() + 1_000_000;
        let mut next = self.arrivals.next_arrival();
        let mut drain_deadline: Option<u64> = None;
        let mut next_stats = self.stats.map(|s| base + s.interval.as_nanos() as u64);
        let mut stranded = 0u64;

        loop {
            let now = self.clock.now_ns();
            let mut worked = false;

            // 1. Arrivals that are due.
            let mut admitted = 0;
            while let Some(a) = next {
                let due = base + a.at_ns;
                if due > now || admitted == ARRIVAL_BATCH {
                    break;
                }
                admitted += 1;
                worked = true;
                generated += 1;
                generated_by_type[a.type_id as usize] += 1;
                let measured = a.at_ns >= self.warmup_ns;
                measured_generated += u64::from(measured);
                let payload = synthetic::encode(a.type_id, a.service_ns);
                let classified = self.classifier.classify(&payload);
                let shed_now = match free.pop() {
                    Some(token) => {
                        let req = Request {
                            id: generated,
                            token,
                            type_id: classified,
                            arrival_ns: now,
                        };
                        let mut slot = Slot {
                            req,
                            true_type: a.type_id,
                            scheduled_ns: due,
                            len: payload.len() as u16,
                            ..blank
                        };
                        slot.payload[..payload.len()].copy_from_slice(&payload);
                        slots[token as usize] = slot;
                        match self.policy.on_arrival(req, now) {
                            Ok(()) => {
                                in_flight += 1;
                                false
                            }
                            Err(_) => {
                                free.push(token);
                                true
                            }
                        }
                    }
                    None => true,
                };
                if shed_now {
                    // An explicit OVERLOADED outcome for the sender, counted per type.
                    shed += 1;
                    shed_by_type[a.type_id as usize] += 1;
                    if measured {
                        recorder.record_drop(a.type_id as usize);
                    }
                }
                next = self.arrivals.next_arrival();
            }

            // 2. Completions.
            for (w, ring) in self.done.iter_mut().enumerate() {
                while let Ok(d) = ring.pop() {
                    worked = true;
                    let slot = slots[d.token as usize];
                    completed += 1;
                    completed_by_type[slot.true_type as usize] += 1;
                    in_flight -= 1;
                    handler_errors += u64::from(!d.ok);
                    if slot.scheduled_ns - base >= self.warmup_ns {
                        let latency = d.finished_ns.saturating_sub(slot.scheduled_ns);
                        recorder.record(slot.true_type as usize, latency, d.service_ns);
                    }
                    free.push(d.token);
                    self.policy.on_completion(
                        w as psp_core::WorkerId,
                        &slot.req,
                        d.service_ns,
                        now,
                    );
                }
            }

            // 3. The policy's decisions.
            while let Some(action) = self.policy.next_action(now) {
                worked = true;
                match action {
                    Action::Dispatch { worker, req, .. } => {
                        debug_assert!(
                            self.policy
                                .reservation()
                                .and_then(|r| r.dispatch_violation(req.type_id, worker))
                                .is_none(),
                            "reservation violated"
                        );
                        let slot = &slots[req.token as usize];
                        let job = Job {
                            token: req.token,
                            type_id: req.type_id,
                            len: slot.len,
                            payload: slot.payload,
                        };
                        // Policies dispatch only to workers they consider free, so the
                        // worker's ring always has room.
                        if self.jobs[worker as usize].push(job).is_err() {
                            unreachable!(
                                "job ring of worker {worker} full: the policy dispatched to a busy worker"
                            );
                        }
                        self.workers[worker as usize].notify();
                    }
                    Action::Preempt { .. } => {
                        unreachable!("preemptive policies are rejected at start-up")
                    }
                }
            }
            // Updates happen only in passes that dispatched or completed something.
            let updates = if worked {
                self.policy.stats().reservation_updates
            } else {
                last_updates
            };
            if updates != last_updates {
                last_updates = updates;
                if let Some(r) = self.policy.reservation() {
                    let at_s = now.saturating_sub(base) as f64 / 1e9;
                    // Updates are rare: reporting each one is not hot-path work.
                    match self.stats {
                        Some(StatsConfig { json: true, .. }) => eprintln!(
                            "{{\"event\":\"reservation_update\",\"t_s\":{at_s:.3},\"reservation\":\"{r}\"}}"
                        ),
                        Some(_) => eprintln!("[{at_s:7.3}s] reservation update #{updates}: {r}"),
                        None => {}
                    }
                    reservation_log.push(ReservationEvent {
                        at_s,
                        reservation: r.clone(),
                    });
                }
            }

            // 4. Live statistics, at most once per interval.
            if let (Some(cfg), Some(at)) = (self.stats, next_stats)
                && now >= at
            {
                next_stats = Some(at + cfg.interval.as_nanos() as u64);
                let t = now.saturating_sub(base) as f64 / 1e9;
                let res = self
                    .policy
                    .reservation()
                    .map(|r| r.to_string())
                    .unwrap_or_else(|| "none (c-FCFS warm-up or not DARC)".into());
                let queued = self.policy.queued();
                let mut per_type = String::new();
                for (i, name) in self.type_names.iter().enumerate() {
                    let q = self.policy.queued_by_type(i as TypeId);
                    let (g, c, x) = (generated_by_type[i], completed_by_type[i], shed_by_type[i]);
                    if cfg.json {
                        let q = q.map_or("null".to_string(), |q| q.to_string());
                        let sep = if i > 0 { "," } else { "" };
                        per_type.push_str(&format!(
                            "{sep}{{\"name\":\"{name}\",\"generated\":{g},\"completed\":{c},\"shed\":{x},\"queued\":{q}}}"
                        ));
                    } else {
                        let q = q.map_or(String::new(), |q| format!(" queued {q}"));
                        per_type.push_str(&format!(" | {name} {g}/{c}/{x}{q}"));
                    }
                }
                if cfg.json {
                    eprintln!(
                        "{{\"t_s\":{t:.3},\"generated\":{generated},\"completed\":{completed},\"shed\":{shed},\"queued\":{queued},\"in_flight\":{in_flight},\"reservation_updates\":{updates},\"types\":[{per_type}],\"reservation\":\"{res}\"}}"
                    );
                } else {
                    eprintln!(
                        "[{t:7.3}s] generated/completed/shed {generated}/{completed}/{shed} queued {queued} in flight {in_flight} updates {updates}{per_type} || {res}"
                    );
                }
            }

            // 5. The end: every request done, or the drain timed out.
            if next.is_none() {
                if in_flight == 0 {
                    break;
                }
                let deadline =
                    *drain_deadline.get_or_insert(now + self.drain_timeout.as_nanos() as u64);
                if now >= deadline {
                    stranded = in_flight as u64;
                    break;
                }
            }

            if worked {
                idler.reset();
            } else {
                let done = &self.done;
                let has_work = || done.iter().any(|r| !r.is_empty());
                let until_next = next.map_or(Duration::from_millis(1), |a| {
                    Duration::from_nanos(
                        (base + a.at_ns)
                            .saturating_sub(now)
                            .saturating_sub(PARK_MARGIN_NS),
                    )
                });
                match self.idle {
                    // Nothing to do until the next arrival or, if requests wait for
                    // a worker, a completion: sleep, never spin. A spinning (or
                    // yield-spinning) dispatcher on a core it shares with a worker
                    // delays that worker's next request by milliseconds.
                    IdleStrategy::SpinPark { .. } => {
                        if until_next.is_zero() {
                            std::hint::spin_loop();
                        } else if self.policy.queued() > 0 || next.is_none() {
                            me.park(until_next, has_work);
                        } else {
                            // Workers stamp their own completions: those can wait.
                            me.sleep(until_next);
                        }
                    }
                    _ => idler.idle(me, until_next, has_work),
                }
            }
        }
        DispatcherReport {
            recorder,
            generated,
            completed,
            shed,
            measured_generated,
            handler_errors,
            stranded,
            reservation_log,
            policy_stats: self.policy.stats(),
            reservation: self.policy.reservation().map(|r| r.to_string()),
        }
    }
}
