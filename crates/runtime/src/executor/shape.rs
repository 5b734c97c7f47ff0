//! What every execution shape is: its dispatcher's side, the [`Executor`]
//! trait the [`DispatchCore`](crate::DispatchCore) queries, and its workers'
//! side, a [`WorkerExec`] per worker.
//!
//! The trait's methods are the moments the dispatcher hands a shape: a
//! request admitted, a completion taken, a job dispatched, a preemption the
//! policy ordered, a pass of the loop (time), and how long an idle
//! dispatcher may sleep. Its defaults are the central shape's (the policy
//! decides, and queues again what was preempted); a shape overrides what it
//! does differently. The trait's methods run on the request path: they must
//! not allocate, lock or format (a shape's `plan` runs once, at start-up).

use std::sync::Arc;

use psp_core::{Policy, Request, WorkerId, WorkerSet};
use rtrb::Consumer;

use crate::clock::Clock;
use crate::idle::Wakeup;
use crate::local::LocalQueues;
use crate::message::{Done, Job, Slot};
use crate::preempt::{GreenWorker, ReclaimTimes};
use crate::worker_queues::WorkerQueues;

/// The dispatcher's side of an execution shape. Only the dispatcher thread
/// calls it; `policy` is the run's one policy, lent for the call.
pub(crate) trait Executor {
    /// Whether workers take their jobs themselves: any worker may complete
    /// any job, every completion ring is worth a look while requests are in
    /// flight, and the policy hears of no completion (the core tells a
    /// central shape's policy of each).
    fn decentralized(&self) -> bool;

    /// Takes the request in `slot` (its token set) at `now`: to the policy,
    /// or straight to a worker queue. `false`: full, the request is shed.
    fn admit(&mut self, policy: &mut dyn Policy, slot: &Slot, now: u64, wakes: &Wakes) -> bool;

    /// How many requests may be in flight at once: a preemptive shape admits
    /// no more than it has request slots for fibers, so that an overload is
    /// shed at admission (OVERLOADED) rather than answered with a handler
    /// error when the request's turn to start comes.
    fn admission_bound(&self) -> usize {
        usize::MAX
    }

    /// Requests waiting for a worker.
    #[inline]
    fn queued(&self, policy: &dyn Policy) -> usize {
        policy.queued()
    }

    /// Worker `w` handed back `done` for `req` at `now`. Returns the
    /// request's whole service time when it finished; `None` when it was
    /// preempted (still in flight under its token: the policy queues it
    /// again).
    #[inline]
    fn on_done(
        &mut self,
        policy: &mut dyn Policy,
        w: WorkerId,
        done: &Done,
        req: &Request,
        now: u64,
    ) -> Option<u64> {
        if done.preempted {
            policy.on_preempted(w, *req, now);
            return None;
        }
        Some(done.service_ns)
    }

    /// The policy dispatched a job to `worker` at `now`, to run in slices of
    /// `quantum_ns`; `outstanding`: the jobs each worker held before it (read
    /// only by a shape that needs it: nothing is loaded for the others).
    #[inline]
    fn on_dispatch(
        &mut self,
        worker: WorkerId,
        quantum_ns: Option<u64>,
        now: u64,
        outstanding: &[u32],
    ) {
        let _ = (worker, quantum_ns, now, outstanding);
    }

    /// The policy ordered `worker`'s running request preempted at `now`.
    ///
    /// # Panics
    /// In a shape that does not preempt (a policy bug).
    fn order_preemption(&mut self, worker: WorkerId, now: u64) {
        let _ = (worker, now);
        panic!("policy preempted in an executor that does not preempt");
    }

    /// When the dispatcher must look at the workers again even if nothing
    /// arrives or completes (a quantum end, a timer deadline), given the
    /// workers holding a job.
    #[inline]
    fn next_deadline(&self, busy: WorkerSet) -> Option<u64> {
        let _ = busy;
        None
    }

    /// Once per pass of the loop, at `now`: watches time (quanta, timers);
    /// the decisions it causes follow in the pass's dispatch.
    #[inline]
    fn watch(&mut self, policy: &mut dyn Policy, busy: WorkerSet, now: u64) {
        let _ = (policy, busy, now);
    }

    /// How the policy's ordered preemptions landed, for a shape that times
    /// them.
    fn reclaims(&self) -> Option<ReclaimTimes> {
        None
    }
}

/// The workers' wake-up handles, and whether they may park: then every
/// hand-off pays the wake-up protocol (a SeqCst fence and a flag check);
/// workers that only spin or yield never need it.
pub(crate) struct Wakes {
    handles: Vec<Arc<Wakeup>>,
    park: bool,
}

impl Wakes {
    /// `handles` in worker order.
    pub(crate) fn new(handles: Vec<Arc<Wakeup>>, park: bool) -> Self {
        Self { handles, park }
    }

    /// Whether workers may park (a hand-off must wake them).
    #[inline]
    pub(crate) fn parks(&self) -> bool {
        self.park
    }

    /// Wakes worker `w` if workers may park.
    #[inline]
    pub(crate) fn notify(&self, w: usize) {
        if self.park {
            self.handles[w].notify();
        }
    }

    /// Wakes every worker but `w`, if workers may park.
    #[inline]
    pub(crate) fn notify_others(&self, w: usize) {
        if self.park {
            for (i, wake) in self.handles.iter().enumerate() {
                if i != w {
                    wake.notify();
                }
            }
        }
    }
}

/// A worker's side of the executor: where its jobs come from and how it runs
/// them.
pub(crate) enum WorkerExec<H> {
    /// Jobs from the dispatcher's ring, run to completion by this worker's
    /// handler.
    Central(Consumer<Job>, H),
    /// Jobs from the dispatcher's ring, run on green threads (each request
    /// on a slot's handler); a preempted one goes back to the dispatcher.
    CentralPreemptive(Consumer<Job>, GreenWorker<H>),
    /// Jobs from its own worker queue or stolen, run to completion.
    WorkerQueues(Arc<WorkerQueues>, H),
    /// Jobs picked from the local queues, run and preempted on green threads.
    LocalPreemptive(Arc<LocalQueues>, GreenWorker<H>),
}

/// What a shape's `plan` reads to build both its sides.
pub(crate) struct PlanInput<'a, H> {
    /// Workers.
    pub(crate) workers: usize,
    /// The run's request tokens (slab size).
    pub(crate) max_in_flight: usize,
    /// The policy's bound of each queue.
    pub(crate) queue_capacity: usize,
    /// The run's one clock.
    pub(crate) clock: Clock,
    /// The handler of instance `i`: one per worker, or per request slot for
    /// a preemptive run.
    pub(crate) make_handler: &'a mut dyn FnMut(usize) -> H,
    /// The policy's name (for an error).
    pub(crate) policy_name: &'a str,
    /// The run's threads outnumber the cores they may run on.
    pub(crate) threads_outnumber_cores: bool,
}

impl<H> PlanInput<'_, H> {
    /// One handler per worker, in worker order.
    pub(crate) fn handlers(&mut self) -> Vec<H> {
        (0..self.workers).map(&mut *self.make_handler).collect()
    }
}
