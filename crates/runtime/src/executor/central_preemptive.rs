//! `central-preemptive`: the policy decides every dispatch, as in `central`,
//! and workers run their jobs on green threads; the dispatcher watches each
//! running request's quantum ([`QuantumMonitor`]) and raises its worker's
//! flag when the policy says so. A preempted request comes back as a
//! completion marked preempted and the policy queues it again under its
//! token; its service time is the sum of its segments (`ts`, `ts-block`,
//! `concord`, `darc-lend`).

use psp_core::{Policy, Request, WorkerId, WorkerSet};
use rtrb::Consumer;

use super::fibers::GreenSetup;
use super::shape::{Executor, PlanInput, Wakes, WorkerExec};
use crate::handler::Handler;
use crate::message::{Done, Job, RuntimeError, Slot};
use crate::preempt::{QuantumMonitor, ReclaimTimes};

/// The dispatcher's side of `central-preemptive`.
#[derive(Debug)]
pub(crate) struct CentralPreemptiveExec {
    /// The quantum watch over the workers.
    quanta: QuantumMonitor,
    /// Per token: run time of the request's finished segments.
    served_ns: Vec<u64>,
    /// Requests that may be in flight at once: one request slot each once
    /// started (time sharing starts every queued request).
    fiber_slots: usize,
}

impl CentralPreemptiveExec {
    /// Both sides: green threads (a handler per request slot), each worker
    /// reading its ring (`rings`, in worker order).
    ///
    /// # Errors
    /// A handler that cannot run on fibers, or stacks that cannot be mapped.
    pub(crate) fn plan<H: Handler + 'static>(
        mut input: PlanInput<'_, H>,
        rings: Vec<Consumer<Job>>,
    ) -> Result<(Self, Vec<WorkerExec<H>>), RuntimeError> {
        let green = GreenSetup::new(&mut input)?;
        let core = Self {
            quanta: QuantumMonitor::new(green.flags.clone(), green.segments.clone()),
            served_ns: vec![0; input.max_in_flight],
            fiber_slots: green.fiber_slots(),
        };
        let workers = rings
            .into_iter()
            .enumerate()
            .map(|(i, r)| WorkerExec::CentralPreemptive(r, green.worker(i)))
            .collect();
        Ok((core, workers))
    }
}

impl Executor for CentralPreemptiveExec {
    #[inline]
    fn decentralized(&self) -> bool {
        false
    }

    #[inline]
    fn admit(&mut self, policy: &mut dyn Policy, slot: &Slot, now: u64, _wakes: &Wakes) -> bool {
        self.served_ns[slot.req.token as usize] = 0;
        policy.on_arrival(slot.req, now).is_ok()
    }

    fn admission_bound(&self) -> usize {
        self.fiber_slots
    }

    #[inline]
    fn on_done(
        &mut self,
        policy: &mut dyn Policy,
        w: WorkerId,
        done: &Done,
        req: &Request,
        now: u64,
    ) -> Option<u64> {
        self.quanta.on_done(w, done.preempted, now);
        let before_ns = &mut self.served_ns[done.token as usize];
        if done.preempted {
            *before_ns += done.service_ns;
            policy.on_preempted(w, *req, now);
            return None;
        }
        Some(done.service_ns + *before_ns)
    }

    #[inline]
    fn on_dispatch(&mut self, worker: WorkerId, quantum_ns: Option<u64>, now: u64, idle: bool) {
        self.quanta.on_dispatch(worker, quantum_ns, now, idle);
    }

    #[inline]
    fn order_preemption(&mut self, worker: WorkerId, now: u64) {
        self.quanta.order(worker, now);
    }

    #[inline]
    fn next_deadline(&self, busy: WorkerSet) -> Option<u64> {
        self.quanta.next_check(busy)
    }

    #[inline]
    fn watch(&mut self, policy: &mut dyn Policy, busy: WorkerSet, now: u64) {
        self.quanta
            .check(busy, now, |w| policy.on_quantum_expired(w, now));
    }

    fn reclaims(&self) -> Option<ReclaimTimes> {
        Some(self.quanta.reclaims().clone())
    }
}
