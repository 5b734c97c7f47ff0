//! The one executor a run builds: [`plan`] reads the policy's
//! [`Execution`] and has that shape build both its sides, and
//! [`CoreExecutor`] is the dispatcher's side as the core holds it.
//!
//! `CoreExecutor` is an enum over the four shapes rather than a boxed trait
//! object: the core calls it on every admission, completion and dispatch,
//! and a match the compiler can inline costs nothing there, where a virtual
//! call each time would. It adds no behaviour: each method forwards to the
//! shape's [`Executor`] implementation.

use std::sync::Arc;

use psp_core::policy::Execution;
use psp_core::{Policy, Request, WorkerId, WorkerSet};
use rtrb::Consumer;

use super::central::CentralExec;
use super::central_preemptive::CentralPreemptiveExec;
use super::local_preemptive::LocalPreemptiveExec;
use super::shape::{Executor, PlanInput, Wakes, WorkerExec};
use super::worker_queues::WorkerQueuesExec;
use crate::handler::Handler;
use crate::local::LocalQueues;
use crate::message::{Done, Job, RuntimeError, Slot};
use crate::preempt::ReclaimTimes;

/// The dispatcher's side of the run's one executor.
#[derive(Debug)]
pub(crate) enum CoreExecutor {
    /// `central`.
    Central(CentralExec),
    /// `central-preemptive`.
    CentralPreemptive(CentralPreemptiveExec),
    /// `worker-queues`.
    WorkerQueues(WorkerQueuesExec),
    /// `local-preemptive`.
    LocalPreemptive(LocalPreemptiveExec),
}

/// `$body` with `$e` bound to the shape `$self` holds.
macro_rules! each_shape {
    ($self:expr, $e:ident => $body:expr) => {
        match $self {
            CoreExecutor::Central($e) => $body,
            CoreExecutor::CentralPreemptive($e) => $body,
            CoreExecutor::WorkerQueues($e) => $body,
            CoreExecutor::LocalPreemptive($e) => $body,
        }
    };
}

impl Executor for CoreExecutor {
    #[inline]
    fn decentralized(&self) -> bool {
        each_shape!(self, e => e.decentralized())
    }

    #[inline]
    fn admit(&mut self, policy: &mut dyn Policy, slot: &Slot, now: u64, wakes: &Wakes) -> bool {
        each_shape!(self, e => e.admit(policy, slot, now, wakes))
    }

    fn admission_bound(&self) -> usize {
        each_shape!(self, e => e.admission_bound())
    }

    #[inline]
    fn queued(&self, policy: &dyn Policy) -> usize {
        each_shape!(self, e => e.queued(policy))
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
        each_shape!(self, e => e.on_done(policy, w, done, req, now))
    }

    #[inline]
    fn on_dispatch(&mut self, worker: WorkerId, quantum_ns: Option<u64>, now: u64, idle: bool) {
        each_shape!(self, e => e.on_dispatch(worker, quantum_ns, now, idle))
    }

    #[inline]
    fn order_preemption(&mut self, worker: WorkerId, now: u64) {
        each_shape!(self, e => e.order_preemption(worker, now))
    }

    #[inline]
    fn next_deadline(&self, busy: WorkerSet) -> Option<u64> {
        each_shape!(self, e => e.next_deadline(busy))
    }

    #[inline]
    fn watch(&mut self, policy: &mut dyn Policy, busy: WorkerSet, now: u64) {
        each_shape!(self, e => e.watch(policy, busy, now))
    }

    fn reclaims(&self) -> Option<ReclaimTimes> {
        each_shape!(self, e => e.reclaims())
    }
}

/// What [`plan`] builds: the dispatcher's executor and one worker executor
/// per worker.
pub(crate) struct Planned<H> {
    /// The dispatcher's side.
    pub(crate) core: CoreExecutor,
    /// Each worker's side, in worker order.
    pub(crate) workers: Vec<WorkerExec<H>>,
    /// For the local executors: their queues (counters at the end of a run,
    /// wake-up handles once the workers run).
    pub(crate) local: Option<Arc<LocalQueues>>,
    /// Completions a worker may have pending before the dispatcher takes them:
    /// decentralized workers complete back to back.
    pub(crate) done_capacity: usize,
}

/// Builds the one executor `execution` names, with each worker's job ring
/// (`rings`, in worker order; unused by the decentralized shapes).
///
/// # Errors
/// A preemptive policy with a handler that cannot run on fibers, or green
/// threads that cannot be set up.
pub(crate) fn plan<H: Handler + 'static>(
    execution: Execution,
    input: PlanInput<'_, H>,
    rings: Vec<Consumer<Job>>,
) -> Result<Planned<H>, RuntimeError> {
    let (core, workers) = match execution {
        Execution::Central => {
            let (core, workers) = CentralExec::plan(input, rings);
            (CoreExecutor::Central(core), workers)
        }
        Execution::CentralPreemptive => {
            let (core, workers) = CentralPreemptiveExec::plan(input, rings)?;
            (CoreExecutor::CentralPreemptive(core), workers)
        }
        Execution::WorkerQueues(rules) => {
            let (core, workers) = WorkerQueuesExec::plan(rules, input);
            (CoreExecutor::WorkerQueues(core), workers)
        }
        Execution::LocalPreemptive(rules) => {
            let (core, workers) = LocalPreemptiveExec::plan(rules, input)?;
            (CoreExecutor::LocalPreemptive(core), workers)
        }
    };
    let local = match &core {
        CoreExecutor::LocalPreemptive(l) => Some(l.queues().clone()),
        _ => None,
    };
    Ok(Planned {
        done_capacity: if core.decentralized() { 256 } else { 4 },
        core,
        workers,
        local,
    })
}
