//! `central`: the policy decides every dispatch; jobs go over the workers'
//! rings, and each worker runs its job to completion with its own handler.
//! The trait's defaults are this shape.

use psp_core::Policy;
use rtrb::Consumer;

use super::shape::{Executor, PlanInput, Wakes, WorkerExec};
use crate::message::{Job, Slot};

/// The dispatcher's side of `central`: the policy, and nothing else.
#[derive(Debug, Default)]
pub(crate) struct CentralExec;

impl CentralExec {
    /// Both sides: each worker reads its ring (`rings`, in worker order) and
    /// serves with its own handler.
    pub(crate) fn plan<H>(
        mut input: PlanInput<'_, H>,
        rings: Vec<Consumer<Job>>,
    ) -> (Self, Vec<WorkerExec<H>>) {
        let workers = rings
            .into_iter()
            .zip(input.handlers())
            .map(|(r, h)| WorkerExec::Central(r, h))
            .collect();
        (CentralExec, workers)
    }
}

impl Executor for CentralExec {
    #[inline]
    fn decentralized(&self) -> bool {
        false
    }

    #[inline]
    fn admit(&mut self, policy: &mut dyn Policy, slot: &Slot, now: u64, _wakes: &Wakes) -> bool {
        policy.on_arrival(slot.req, now).is_ok()
    }
}
