//! `local-preemptive`: the dispatcher steers each admitted request to
//! SYNERGY's or Tiny Quanta's per-worker queues ([`LocalQueues`]); each
//! worker picks its next request itself and runs and preempts it on a green
//! thread by the policy's rules. The dispatcher thread is SYNERGY's timer
//! and runs its congestion detector; the policy is off the request path.

use std::sync::Arc;

use psp_core::policy::{CongestionDetector, LocalRules};
use psp_core::{Policy, WorkerSet};

use super::fibers::GreenSetup;
use super::shape::{Executor, PlanInput, Wakes, WorkerExec};
use crate::handler::Handler;
use crate::local::LocalQueues;
use crate::message::{RuntimeError, Slot};

/// The dispatcher's side of `local-preemptive`.
#[derive(Debug)]
pub(crate) struct LocalPreemptiveExec {
    /// The workers' queues, timers and counters.
    queues: Arc<LocalQueues>,
    /// SYNERGY's congestion detector (period 0: off).
    detector: CongestionDetector,
    /// Requests that may be in flight at once (a request slot each once
    /// started).
    fiber_slots: usize,
}

impl LocalPreemptiveExec {
    /// Both sides: green threads and the local queues under `rules`, shared
    /// by every worker.
    ///
    /// # Errors
    /// A handler that cannot run on fibers, or stacks that cannot be mapped.
    pub(crate) fn plan<H: Handler + 'static>(
        rules: LocalRules,
        mut input: PlanInput<'_, H>,
    ) -> Result<(Self, Vec<WorkerExec<H>>), RuntimeError> {
        let green = GreenSetup::new(&mut input)?;
        let worker_timer = match rules {
            LocalRules::Synergy(r) => r.config().timer.on_worker(input.threads_outnumber_cores),
            LocalRules::Tq(_) => false,
        };
        let queues = Arc::new(
            LocalQueues::new(
                rules,
                green.flags.clone(),
                input.max_in_flight,
                input.queue_capacity,
                input.clock,
            )
            .with_worker_timer(worker_timer),
        );
        let wqd_ns = match rules {
            LocalRules::Synergy(r) if r.config().wait_queue => r.config().wqd_ns,
            _ => 0,
        };
        let core = Self {
            queues: queues.clone(),
            detector: CongestionDetector::new(wqd_ns),
            fiber_slots: green.fiber_slots(),
        };
        let workers = (0..input.workers)
            .map(|i| WorkerExec::LocalPreemptive(queues.clone(), green.worker(i)))
            .collect();
        Ok((core, workers))
    }

    /// The queues (the runtime hands them the threads' wake-up handles and
    /// reads their counters at the end).
    pub(crate) fn queues(&self) -> &Arc<LocalQueues> {
        &self.queues
    }
}

impl Executor for LocalPreemptiveExec {
    #[inline]
    fn decentralized(&self) -> bool {
        true
    }

    #[inline]
    fn admit(&mut self, _policy: &mut dyn Policy, slot: &Slot, _now: u64, _wakes: &Wakes) -> bool {
        self.queues.admit(slot.req.flow, slot.job()).is_ok()
    }

    fn admission_bound(&self) -> usize {
        self.fiber_slots
    }

    #[inline]
    fn queued(&self, _policy: &dyn Policy) -> usize {
        self.queues.len()
    }

    #[inline]
    fn next_deadline(&self, _busy: WorkerSet) -> Option<u64> {
        self.queues.next_deadline()
    }

    #[inline]
    fn watch(&mut self, _policy: &mut dyn Policy, _busy: WorkerSet, now: u64) {
        self.queues.timer_pass(now, &mut self.detector);
    }
}
