//! A random driver for policy unit tests: arrivals, completions, quantum expiries
//! and preemptions in random order, with invariants checked after every decision.
//! Pure like the policies: a tiny xorshift generator, time as a counter.

use super::{Action, Policy, PolicyContext, TypeInfo};
use crate::request::{Nanos, Request, TypeId};
use crate::workers::WorkerId;

/// A context with `workers` workers and one type per mean (in µs).
pub fn ctx(workers: usize, means_us: &[f64]) -> PolicyContext {
    PolicyContext {
        workers,
        types: means_us
            .iter()
            .enumerate()
            .map(|(i, &m)| TypeInfo {
                name: format!("t{i}"),
                mean_service_ns: Some(m * 1e3),
            })
            .collect(),
        queue_capacity: 64,
    }
}

pub struct Driver {
    pub policy: Box<dyn Policy>,
    rng: u64,
    pub now: Nanos,
    next_id: u64,
    running: Vec<Option<(Request, bool)>>,
    /// Jobs handed to a busy worker, started when it frees (local queues).
    local: Vec<std::collections::VecDeque<(Request, bool)>>,
    means_ns: Vec<f64>,
    pub completed: u64,
    pub dropped: u64,
    pub preempted: u64,
    /// Every preempted request, in order.
    pub preempted_reqs: Vec<Request>,
    pub dispatched: Vec<(WorkerId, Request)>,
    /// Worker time lost per preemption (the interrupt lands at once).
    pub switch_ns: Nanos,
}

impl Driver {
    pub fn new(policy: Box<dyn Policy>, seed: u64) -> Self {
        let workers = policy.idle_workers().len();
        Self {
            policy,
            rng: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
            now: 0,
            next_id: 0,
            running: vec![None; workers],
            local: vec![Default::default(); workers],
            means_ns: Vec::new(),
            completed: 0,
            dropped: 0,
            preempted: 0,
            preempted_reqs: Vec::new(),
            dispatched: Vec::new(),
            switch_ns: 0,
        }
    }

    /// Charges `switch_ns` of worker time per preemption.
    pub fn with_switch_ns(mut self, switch_ns: Nanos) -> Self {
        self.switch_ns = switch_ns;
        self
    }

    /// Types are drawn 80% type 0, the rest evenly; services are the means given.
    pub fn with_means(mut self, means_us: &[f64]) -> Self {
        self.means_ns = means_us.iter().map(|m| m * 1e3).collect();
        self
    }

    /// `w` freed: it starts its local head, if any.
    fn start_local(&mut self, w: usize) {
        self.running[w] = self.local[w].pop_front();
    }

    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn pick_type(&mut self) -> TypeId {
        let n = self.means_ns.len().max(1) as u64;
        if n == 1 || self.next() % 10 < 8 {
            0
        } else {
            (1 + self.next() % (n - 1)) as TypeId
        }
    }

    /// Runs `steps` random events; `check` sees the policy after each dispatch
    /// (`Some`) and once all decisions of an event are drained (`None`).
    pub fn run(
        &mut self,
        steps: usize,
        mut check: impl FnMut(&dyn Policy, Option<(WorkerId, Request)>),
    ) {
        if self.means_ns.is_empty() {
            self.means_ns = vec![1_000.0];
        }
        for _ in 0..steps {
            self.now += self.next() % 2_000;
            let busy: Vec<usize> = (0..self.running.len())
                .filter(|&w| self.running[w].is_some())
                .collect();
            let roll = self.next() % 100;
            if roll < 50 || busy.is_empty() {
                let t = self.pick_type();
                let req = Request {
                    id: self.next_id,
                    token: 0,
                    type_id: t,
                    // A few flows, so that some queues stay longer than others.
                    flow: (self.next() % 16) as u16,
                    arrival_ns: self.now,
                };
                self.next_id += 1;
                if self.policy.on_arrival(req, self.now).is_err() {
                    self.dropped += 1;
                }
            } else {
                let w = busy[(self.next() % busy.len() as u64) as usize];
                let (req, sliced) = self.running[w].expect("busy");
                if roll < 85 || !sliced {
                    self.running[w] = None;
                    let svc = self.means_ns[req.type_id as usize] as Nanos;
                    self.policy
                        .on_completion(w as WorkerId, &req, svc, self.now);
                    self.completed += 1;
                    self.start_local(w);
                } else if self.policy.on_quantum_expired(w as WorkerId, self.now) {
                    self.running[w] = None;
                    self.now += self.switch_ns;
                    self.policy.on_preempted(w as WorkerId, req, self.now);
                    self.preempted += 1;
                    self.preempted_reqs.push(req);
                    self.start_local(w);
                }
            }
            while let Some(action) = self.policy.next_action(self.now) {
                match action {
                    Action::Dispatch {
                        worker,
                        req,
                        quantum_ns,
                    } => {
                        let w = worker as usize;
                        let mut job = (req, quantum_ns.is_some());
                        if self.running[w].is_none() {
                            // A request that begins (no quantum yet) and is
                            // long by the application's rule declares itself.
                            let long = self
                                .policy
                                .execution()
                                .feedback_threshold_ns()
                                .is_some_and(|t| self.means_ns[req.type_id as usize] >= t as f64);
                            if !job.1 && long {
                                job.1 = self.policy.on_feedback_start(worker, self.now).is_some();
                            }
                            self.running[w] = Some(job);
                        } else {
                            assert!(
                                self.local[w].len() < self.policy.local_queue_depth(),
                                "dispatch to busy worker {worker} beyond its local queue"
                            );
                            self.local[w].push_back(job);
                        }
                        self.dispatched.push((worker, req));
                        check(&*self.policy, Some((worker, req)));
                    }
                    Action::Preempt { worker } => {
                        // Lands at once in this driver.
                        if let Some((req, _)) = self.running[worker as usize].take() {
                            self.now += self.switch_ns;
                            self.policy.on_preempted(worker, req, self.now);
                            self.preempted += 1;
                            self.preempted_reqs.push(req);
                            self.start_local(worker as usize);
                        }
                    }
                }
            }
            check(&*self.policy, None);
        }
    }

    /// Requests inside the policy or on a worker.
    pub fn in_flight(&self) -> u64 {
        self.policy.queued() as u64
            + self.running.iter().filter(|r| r.is_some()).count() as u64
            + self.local.iter().map(|q| q.len() as u64).sum::<u64>()
    }

    /// Requests generated so far.
    pub fn generated(&self) -> u64 {
        self.next_id
    }
}
