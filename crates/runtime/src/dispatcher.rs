//! The dispatcher: classifies requests, drives the shared policy core (the same
//! objects the simulator drives), hands jobs to workers over their rings and
//! takes completions back.
//!
//! [`DispatchCore`] is the part every front end shares: the policy, the rings,
//! the request slab, per-type counters, the reservation log and the live
//! statistics. Front ends own the loop around it and decide where requests come
//! from: [`DispatcherThread`] runs the in-process open-loop generator; the network
//! server (crate `psp-net`) receives from a datapath. One pass of either loop
//! reads the clock once, then admits what is due (bounded batch), drains every
//! completion ring, drains the policy's decisions, and idles if nothing happened.
//! Nothing on this path allocates or locks; request state lives in a slab sized
//! at start-up. Only the dispatcher thread touches the core.

use std::sync::Arc;
use std::time::Duration;

use psp_core::{Action, Classifier, Policy, Request, TypeId, WorkerSet};
use psp_metrics::Recorder;
use psp_workload::ArrivalSource;
use rtrb::{Consumer, Producer};

use crate::clock::Clock;
use crate::handler::synthetic;
use crate::idle::{IdleStrategy, Idler, Wakeup};
use crate::worker::{Done, JOB_PAYLOAD, Job};

/// Arrivals admitted per pass at most, so completions are never starved.
pub const ARRIVAL_BATCH: usize = 64;
/// Wake this long before a scheduled arrival (the wake-up latency of a park).
const PARK_MARGIN_NS: u64 = 15_000;

/// A request's state while it is queued or running.
#[derive(Debug, Clone, Copy)]
pub struct Slot {
    /// The request as the policy sees it.
    pub req: Request,
    /// The type the request really is (differs from `req.type_id` under a
    /// misclassifying classifier); counters and latency are kept under it.
    pub true_type: TypeId,
    /// When the request was due (generator) or received (network): latency
    /// starts here.
    pub scheduled_ns: u64,
    /// Payload length.
    pub len: u16,
    /// The payload, inline (front ends that keep payloads elsewhere leave it
    /// empty and find it by token).
    pub payload: [u8; JOB_PAYLOAD],
}

impl Slot {
    /// An empty slot.
    pub const BLANK: Slot = Slot {
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
    /// Seconds since the dispatcher started.
    pub at_s: f64,
    /// The new reservation (cloned only when an update is applied: rare).
    pub reservation: psp_core::Reservation,
}

/// Counters and records of a finished run.
#[derive(Debug, Clone)]
pub struct DispatcherReport {
    /// Measured (after warm-up) latency and slowdown, and measured sheds.
    pub recorder: Recorder,
    /// Requests generated (or received and accepted), warm-up included.
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

/// What the core needs besides its rings: built once at start-up.
pub struct CoreParts {
    /// The scheduling policy.
    pub policy: Box<dyn Policy>,
    /// One job producer per worker.
    pub jobs: Vec<Producer<Job>>,
    /// One completion consumer per worker.
    pub done: Vec<Consumer<Done>>,
    /// The workers' wake-up handles.
    pub workers: Vec<Arc<Wakeup>>,
    /// Names of the types (the recorder's rows).
    pub type_names: Vec<String>,
    /// Slab size: requests that can be queued or running at once.
    pub max_in_flight: usize,
    /// Periodic statistics on stderr.
    pub stats: Option<StatsConfig>,
    /// Whether workers may park when idle: then every dispatch pays the wake-up
    /// protocol (a SeqCst fence and a flag check); workers that only spin or
    /// yield never need it.
    pub workers_park: bool,
}

/// The policy, rings, slab and counters every dispatcher front end shares.
pub struct DispatchCore {
    policy: Box<dyn Policy>,
    jobs: Vec<Producer<Job>>,
    done: Vec<Consumer<Done>>,
    workers: Vec<Arc<Wakeup>>,
    workers_park: bool,
    type_names: Vec<String>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    in_flight: usize,
    /// Jobs handed to each worker and not completed yet (at most one with the
    /// runtime's policies).
    outstanding: Vec<u32>,
    /// Workers with `outstanding > 0`: the only completion rings worth a look.
    busy: WorkerSet,
    /// Accepted arrivals (generated or received), per true type.
    generated_by_type: Vec<u64>,
    completed_by_type: Vec<u64>,
    shed_by_type: Vec<u64>,
    handler_errors: u64,
    last_updates: u64,
    reservation_log: Vec<ReservationEvent>,
    stats: Option<StatsConfig>,
    next_stats: Option<u64>,
    /// Time zero of the statistics and the reservation log.
    base: u64,
}

impl DispatchCore {
    /// A core; its front end sets the statistics' time zero with
    /// [`set_base`](Self::set_base) before the first request.
    pub fn new(parts: CoreParts) -> Self {
        let n = parts.type_names.len();
        let n_workers = parts.jobs.len();
        Self {
            policy: parts.policy,
            jobs: parts.jobs,
            done: parts.done,
            workers: parts.workers,
            workers_park: parts.workers_park,
            type_names: parts.type_names,
            slots: vec![Slot::BLANK; parts.max_in_flight],
            free: (0..parts.max_in_flight as u32).rev().collect(),
            in_flight: 0,
            outstanding: vec![0; n_workers],
            busy: WorkerSet::EMPTY,
            generated_by_type: vec![0; n],
            completed_by_type: vec![0; n],
            shed_by_type: vec![0; n],
            handler_errors: 0,
            last_updates: 0,
            reservation_log: Vec::with_capacity(64),
            next_stats: None,
            stats: parts.stats,
            base: 0,
        }
    }

    /// Rebases the statistics clock (before the first request).
    pub fn set_base(&mut self, base_ns: u64) {
        self.base = base_ns;
        self.next_stats = self.stats.map(|s| base_ns + s.interval.as_nanos() as u64);
    }

    /// The policy (read-only: statistics, reservation, queue lengths).
    pub fn policy(&self) -> &dyn Policy {
        &*self.policy
    }

    /// The request types' names.
    pub fn type_names(&self) -> &[String] {
        &self.type_names
    }

    /// Requests queued or running.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Whether requests wait in the policy's queues for a worker.
    pub fn has_queued(&self) -> bool {
        self.policy.queued() > 0
    }

    /// Whether a completion waits in some worker's ring.
    pub fn has_completions(&self) -> bool {
        self.busy.iter().any(|w| !self.done[w as usize].is_empty())
    }

    /// Takes a free slot; `None` when every slot is in flight.
    #[inline]
    pub fn take_token(&mut self) -> Option<u32> {
        self.free.pop()
    }

    /// Returns a slot taken with [`take_token`](Self::take_token) and not admitted
    /// (or not accepted by the policy).
    #[inline]
    pub fn put_token(&mut self, token: u32) {
        self.free.push(token);
    }

    /// Counts one arrival (generated or received and valid), before it is admitted
    /// or shed.
    #[inline]
    pub fn note_arrival(&mut self, true_type: TypeId) {
        self.generated_by_type[true_type as usize] += 1;
    }

    /// Counts one request shed before the policy saw it (no free slot) or refused
    /// by the policy (full queue): the front end answers it OVERLOADED.
    #[inline]
    pub fn note_shed(&mut self, true_type: TypeId) {
        self.shed_by_type[true_type as usize] += 1;
    }

    /// Hands the request in `slot` (held in `token`, taken by the caller) to the
    /// policy. `false`: the policy's queue is full; the caller still holds the
    /// token, answers the request OVERLOADED and puts the token back.
    #[inline]
    pub fn admit(&mut self, token: u32, mut slot: Slot, now: u64) -> bool {
        slot.req.token = token;
        self.slots[token as usize] = slot;
        if self.policy.on_arrival(slot.req, now).is_ok() {
            self.in_flight += 1;
            true
        } else {
            self.note_shed(slot.true_type);
            false
        }
    }

    /// Drains every completion ring into the policy; `on_done` sees each
    /// completion with its request's slot (before the slot is freed). Returns
    /// whether there was any.
    #[inline]
    pub fn complete(&mut self, now: u64, mut on_done: impl FnMut(&Slot, &Done)) -> bool {
        let mut worked = false;
        // Only workers holding a job can complete one: with mostly idle workers
        // this skips most rings (each look is a cache line another core writes).
        for w in self.busy.iter() {
            let ring = &mut self.done[w as usize];
            while let Ok(d) = ring.pop() {
                worked = true;
                self.outstanding[w as usize] -= 1;
                if self.outstanding[w as usize] == 0 {
                    self.busy.remove(w);
                }
                let slot = &self.slots[d.token as usize];
                self.completed_by_type[slot.true_type as usize] += 1;
                self.in_flight -= 1;
                self.handler_errors += u64::from(!d.ok);
                on_done(slot, &d);
                self.free.push(d.token);
                self.policy.on_completion(w, &slot.req, d.service_ns, now);
            }
        }
        worked
    }

    /// Drains the policy's decisions onto the workers' rings. Returns the workers
    /// it handed a job to (empty: nothing dispatched).
    #[inline]
    pub fn dispatch(&mut self, now: u64) -> WorkerSet {
        let mut dispatched = WorkerSet::EMPTY;
        while let Some(action) = self.policy.next_action(now) {
            match action {
                Action::Dispatch { worker, req, .. } => {
                    debug_assert!(
                        self.policy
                            .reservation()
                            .and_then(|r| r.dispatch_violation(req.type_id, worker))
                            .is_none(),
                        "reservation violated"
                    );
                    let slot = &self.slots[req.token as usize];
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
                    if self.workers_park {
                        self.workers[worker as usize].notify();
                    }
                    self.outstanding[worker as usize] += 1;
                    self.busy.insert(worker);
                    dispatched.insert(worker);
                }
                Action::Preempt { .. } => {
                    unreachable!("preemptive policies are rejected at start-up")
                }
            }
        }
        dispatched
    }

    /// End-of-pass bookkeeping: logs reservation changes (only passes that did
    /// work can change it) and prints the live statistics when due.
    pub fn observe(&mut self, now: u64, worked: bool) {
        if worked {
            let updates = self.policy.stats().reservation_updates;
            if updates != self.last_updates {
                self.last_updates = updates;
                self.log_reservation(now, updates);
            }
        }
        if let (Some(cfg), Some(at)) = (self.stats, self.next_stats)
            && now >= at
        {
            self.next_stats = Some(at + cfg.interval.as_nanos() as u64);
            self.print_stats(now, cfg);
        }
    }

    #[cold]
    fn log_reservation(&mut self, now: u64, updates: u64) {
        let Some(r) = self.policy.reservation() else {
            return;
        };
        let at_s = now.saturating_sub(self.base) as f64 / 1e9;
        // Updates are rare: reporting each one is not hot-path work.
        match self.stats {
            Some(StatsConfig { json: true, .. }) => eprintln!(
                "{{\"event\":\"reservation_update\",\"t_s\":{at_s:.3},\"reservation\":\"{r}\"}}"
            ),
            Some(_) => eprintln!("[{at_s:7.3}s] reservation update #{updates}: {r}"),
            None => {}
        }
        self.reservation_log.push(ReservationEvent {
            at_s,
            reservation: r.clone(),
        });
    }

    #[cold]
    fn print_stats(&self, now: u64, cfg: StatsConfig) {
        let t = now.saturating_sub(self.base) as f64 / 1e9;
        let res = self
            .policy
            .reservation()
            .map(|r| r.to_string())
            .unwrap_or_else(|| "none (c-FCFS warm-up or not DARC)".into());
        let (generated, completed, shed) = (
            self.generated_by_type.iter().sum::<u64>(),
            self.completed_by_type.iter().sum::<u64>(),
            self.shed_by_type.iter().sum::<u64>(),
        );
        let (queued, in_flight, updates) =
            (self.policy.queued(), self.in_flight, self.last_updates);
        let mut per_type = String::new();
        for (i, name) in self.type_names.iter().enumerate() {
            let q = self.policy.queued_by_type(i as TypeId);
            let (g, c, x) = (
                self.generated_by_type[i],
                self.completed_by_type[i],
                self.shed_by_type[i],
            );
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

    /// The final counters. `recorder` holds what the front end measured.
    pub fn finish(
        self,
        recorder: Recorder,
        measured_generated: u64,
        stranded: u64,
    ) -> DispatcherReport {
        let shed = self.shed_by_type.iter().sum::<u64>();
        DispatcherReport {
            recorder,
            generated: self.generated_by_type.iter().sum(),
            completed: self.completed_by_type.iter().sum(),
            shed,
            measured_generated,
            handler_errors: self.handler_errors,
            stranded,
            reservation_log: self.reservation_log,
            policy_stats: self.policy.stats(),
            reservation: self.policy.reservation().map(|r| r.to_string()),
        }
    }
}

/// The in-process open-loop front end: generator and classifier.
pub struct DispatcherThread {
    /// Payload to type.
    pub classifier: Box<dyn Classifier>,
    /// The open-loop schedule (times relative to the start).
    pub arrivals: Box<dyn ArrivalSource + Send>,
    /// The shared clock.
    pub clock: Clock,
    /// Requests scheduled before this (relative) time are not measured.
    pub warmup_ns: u64,
    /// How long to wait for in-flight requests after the last arrival.
    pub drain_timeout: Duration,
    /// How to wait when a pass found nothing.
    pub idle: IdleStrategy,
}

impl DispatcherThread {
    /// The dispatcher loop, until every generated request is completed or shed
    /// (or the drain timed out). `me` is this thread's wake-up handle.
    pub fn run(mut self, mut core: DispatchCore, me: &Wakeup) -> DispatcherReport {
        let mut recorder = Recorder::new(core.type_names().iter().cloned());
        let mut idler = Idler::new(self.idle);
        let mut generated = 0u64;
        let mut measured_generated = 0u64;
        // Start a little in the future so the first arrivals are not already late.
        let base = self.clock.now_ns() + 1_000_000;
        core.set_base(base);
        let mut next = self.arrivals.next_arrival();
        let mut drain_deadline: Option<u64> = None;
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
                core.note_arrival(a.type_id);
                let measured = a.at_ns >= self.warmup_ns;
                measured_generated += u64::from(measured);
                let payload = synthetic::encode(a.type_id, a.service_ns);
                let classified = self.classifier.classify(&payload);
                let accepted = match core.take_token() {
                    Some(token) => {
                        let mut slot = Slot {
                            req: Request {
                                id: generated,
                                token,
                                type_id: classified,
                                arrival_ns: now,
                            },
                            true_type: a.type_id,
                            scheduled_ns: due,
                            len: payload.len() as u16,
                            ..Slot::BLANK
                        };
                        slot.payload[..payload.len()].copy_from_slice(&payload);
                        let ok = core.admit(token, slot, now);
                        if !ok {
                            core.put_token(token);
                        }
                        ok
                    }
                    None => {
                        core.note_shed(a.type_id);
                        false
                    }
                };
                // A shed request is an explicit OVERLOADED outcome, counted per type.
                if !accepted && measured {
                    recorder.record_drop(a.type_id as usize);
                }
                next = self.arrivals.next_arrival();
            }

            // 2. Completions.
            worked |= core.complete(now, |slot, d| {
                if slot.scheduled_ns - base >= self.warmup_ns {
                    let latency = d.finished_ns.saturating_sub(slot.scheduled_ns);
                    recorder.record(slot.true_type as usize, latency, d.service_ns);
                }
            });

            // 3. The policy's decisions.
            worked |= !core.dispatch(now).is_empty();

            // 4. Reservation log and live statistics.
            core.observe(now, worked);

            // 5. The end: every request done, or the drain timed out.
            if next.is_none() {
                if core.in_flight() == 0 {
                    break;
                }
                let deadline =
                    *drain_deadline.get_or_insert(now + self.drain_timeout.as_nanos() as u64);
                if now >= deadline {
                    stranded = core.in_flight() as u64;
                    break;
                }
            }

            if worked {
                idler.reset();
            } else {
                let has_work = || core.has_completions();
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
                        } else if core.has_queued() || next.is_none() {
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
        core.finish(recorder, measured_generated, stranded)
    }
}
