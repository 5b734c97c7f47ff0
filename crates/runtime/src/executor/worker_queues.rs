//! `worker-queues`: the dispatcher steers each admitted request straight to
//! its flow's worker queue ([`WorkerQueues`]); workers take from their own
//! queue and steal by the policy's rules, and run each job to completion.
//! The policy is off the request path; the dispatcher only admits and records
//! completions (`d-fcfs`, `ws`).

use std::sync::Arc;

use psp_core::{PerWorkerRules, Policy};

use super::shape::{Executor, PlanInput, Wakes, WorkerExec};
use crate::message::Slot;
use crate::worker_queues::WorkerQueues;

/// The dispatcher's side of `worker-queues`: the queues it steers into.
#[derive(Debug)]
pub(crate) struct WorkerQueuesExec(Arc<WorkerQueues>);

impl WorkerQueuesExec {
    /// Both sides: queues under `rules`, shared by every worker (each with
    /// its own handler).
    pub(crate) fn plan<H>(
        rules: PerWorkerRules,
        mut input: PlanInput<'_, H>,
    ) -> (Self, Vec<WorkerExec<H>>) {
        let q = Arc::new(WorkerQueues::new(rules, input.queue_capacity));
        let workers = input
            .handlers()
            .into_iter()
            .map(|h| WorkerExec::WorkerQueues(q.clone(), h))
            .collect();
        (Self(q), workers)
    }
}

impl Executor for WorkerQueuesExec {
    #[inline]
    fn decentralized(&self) -> bool {
        true
    }

    /// The job goes to its flow's worker queue; with parking workers, that
    /// worker is woken, and so are the others when they may steal it (one
    /// parked meanwhile would not look before its timeout).
    #[inline]
    fn admit(&mut self, _policy: &mut dyn Policy, slot: &Slot, _now: u64, wakes: &Wakes) -> bool {
        let Ok(home) = self.0.steer(slot.req.flow, slot.job()) else {
            return false;
        };
        if wakes.parks() {
            wakes.notify(home as usize);
            if self.0.stealable(home) {
                wakes.notify_others(home as usize);
            }
        }
        true
    }

    #[inline]
    fn queued(&self, _policy: &dyn Policy) -> usize {
        self.0.len()
    }
}
