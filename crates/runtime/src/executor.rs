//! The one executor a run builds from its policy's
//! [`psp_core::policy::Execution`]: the dispatcher's side
//! ([`CoreExecutor`], held by the [`DispatchCore`](crate::DispatchCore)) and
//! each worker's side ([`WorkerExec`]), made together by [`plan`] so that the
//! two always agree. A variant of each per execution shape, and nothing
//! else: an impossible mix (worker queues with a quantum watch, green threads
//! without stacks) cannot be built.
//!
//! | shape | dispatcher | workers |
//! |---|---|---|
//! | `central` | drives the policy, pushes jobs on rings | run each job to completion |
//! | `central-preemptive` | drives the policy, watches quanta, raises flags | run jobs on green threads, hand back preempted ones |
//! | `worker-queues` | steers jobs to flow queues, records completions | take and steal by the policy's rules |
//! | `local-preemptive` | steers jobs to worker queues, runs SYNERGY's timer | pick, run on green threads and preempt by the policy's rules |
//!
//! Front ends never see this: they admit and complete through the core.

use std::sync::Arc;

use crossbeam_queue::ArrayQueue;
use psp_core::policy::{CongestionDetector, Execution, LocalRules};
use rtrb::Consumer;

use crate::clock::Clock;
use crate::green::{PreemptFlag, RequestSlot, StackPool, StackPoolConfig};
use crate::handler::Handler;
use crate::local::LocalQueues;
use crate::preempt::{GreenWorker, QuantumMonitor, SegmentClock, SuspendedFibers};
use crate::runtime::RuntimeError;
use crate::worker::Job;
use crate::worker_queues::WorkerQueues;

/// Request slots (a handler instance and 4.3 KB of buffers each; a stack, up
/// to as many, is taken only while a request is started) per worker in a
/// preemptive run, at most (never more than the run's request slots): how
/// many requests may be started and unfinished (running or preempted) at once.
/// Time sharing starts every queued request in turn, so with 64 a queue of a
/// few hundred ran out under load. A request that finds none free is answered
/// with a handler error ("no request slot free for a fiber"), counted.
pub const FIBER_SLOTS_PER_WORKER: usize = 1024;

/// The dispatcher's side of the executor.
#[derive(Debug)]
pub enum CoreExecutor {
    /// The policy decides every dispatch; jobs go over the workers' rings.
    Central,
    /// The same, and the dispatcher watches each running request's quantum
    /// and raises its worker's flag; per token, the run time of the request's
    /// segments before the one running.
    CentralPreemptive {
        /// The quantum watch over the workers.
        quanta: QuantumMonitor,
        /// Per token: run time of the finished segments.
        served_ns: Vec<u64>,
        /// Requests that may be in flight at once: one request slot each
        /// once started (time sharing starts every queued request).
        fiber_slots: usize,
    },
    /// Admitted jobs go to their flow's worker queue; the policy is off the
    /// request path.
    WorkerQueues(Arc<WorkerQueues>),
    /// Admitted jobs go to SYNERGY's or Tiny Quanta's queues; the dispatcher
    /// thread is SYNERGY's timer and runs its congestion detector.
    LocalPreemptive {
        /// The workers' queues, timers and counters.
        queues: Arc<LocalQueues>,
        /// SYNERGY's congestion detector (period 0: off).
        detector: CongestionDetector,
        /// Requests that may be in flight at once (a request slot each
        /// once started).
        fiber_slots: usize,
    },
}

impl CoreExecutor {
    /// Whether workers take their jobs themselves (any worker may complete
    /// any job, and the policy is not told of completions).
    #[inline]
    pub fn decentralized(&self) -> bool {
        matches!(
            self,
            CoreExecutor::WorkerQueues(_) | CoreExecutor::LocalPreemptive { .. }
        )
    }

    /// How many requests may be in flight at once: a preemptive executor
    /// admits no more than it has request slots for fibers, so that an
    /// overload is shed at admission (OVERLOADED) rather than answered with
    /// a handler error when the request's turn to start comes.
    pub fn admission_bound(&self) -> usize {
        match self {
            CoreExecutor::CentralPreemptive { fiber_slots, .. }
            | CoreExecutor::LocalPreemptive { fiber_slots, .. } => *fiber_slots,
            CoreExecutor::Central | CoreExecutor::WorkerQueues(_) => usize::MAX,
        }
    }
}

/// A worker's side of the executor: where its jobs come from and how it runs
/// them.
pub enum WorkerExec<H> {
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

/// What [`plan`] builds: the dispatcher's executor and one worker executor
/// per worker, and for a preemptive run the flags the quantum watch shares.
pub struct Planned<H> {
    /// The dispatcher's side.
    pub core: CoreExecutor,
    /// Each worker's side, in worker order.
    pub workers: Vec<WorkerExec<H>>,
    /// For the local executors: their queues (counters at the end of a run,
    /// wake-up handles once the workers run).
    pub local: Option<Arc<LocalQueues>>,
    /// Completions a worker may have pending before the dispatcher takes them:
    /// decentralized workers complete back to back.
    pub done_capacity: usize,
}

/// Everything [`plan`] reads.
pub struct PlanInput<'a, H> {
    /// How the policy must run.
    pub execution: Execution,
    /// Workers.
    pub workers: usize,
    /// The run's request tokens (slab size).
    pub max_in_flight: usize,
    /// The policy's bound of each queue.
    pub queue_capacity: usize,
    /// The run's one clock.
    pub clock: Clock,
    /// The handler of instance `i`: one per worker, or per request slot for
    /// a preemptive run.
    pub make_handler: &'a mut dyn FnMut(usize) -> H,
}

/// Builds the one executor `input.execution` names, with each worker's job
/// ring (`rings`, in worker order; unused by the decentralized shapes).
///
/// # Errors
/// A preemptive policy with a handler that cannot run on fibers, or green
/// threads that cannot be set up.
pub fn plan<H: Handler + 'static>(
    input: PlanInput<'_, H>,
    policy_name: &str,
    rings: Vec<Consumer<Job>>,
) -> Result<Planned<H>, RuntimeError> {
    let PlanInput {
        execution,
        workers,
        max_in_flight,
        queue_capacity,
        clock,
        make_handler,
    } = input;
    let handlers = |make: &mut dyn FnMut(usize) -> H| (0..workers).map(make).collect::<Vec<_>>();
    Ok(match execution {
        Execution::Central => Planned {
            core: CoreExecutor::Central,
            workers: rings
                .into_iter()
                .zip(handlers(make_handler))
                .map(|(r, h)| WorkerExec::Central(r, h))
                .collect(),
            local: None,
            done_capacity: 4,
        },
        Execution::WorkerQueues(rules) => {
            let q = Arc::new(WorkerQueues::new(rules, queue_capacity));
            Planned {
                core: CoreExecutor::WorkerQueues(q.clone()),
                workers: handlers(make_handler)
                    .into_iter()
                    .map(|h| WorkerExec::WorkerQueues(q.clone(), h))
                    .collect(),
                local: None,
                done_capacity: 256,
            }
        }
        Execution::CentralPreemptive => {
            let green = GreenSetup::new(workers, max_in_flight, make_handler, policy_name)?;
            Planned {
                core: CoreExecutor::CentralPreemptive {
                    quanta: QuantumMonitor::new(green.flags.clone(), green.segments.clone()),
                    served_ns: vec![0; max_in_flight],
                    fiber_slots: green.slots.capacity(),
                },
                workers: rings
                    .into_iter()
                    .enumerate()
                    .map(|(i, r)| WorkerExec::CentralPreemptive(r, green.worker(i)))
                    .collect(),
                local: None,
                done_capacity: 4,
            }
        }
        Execution::LocalPreemptive(rules) => {
            let green = GreenSetup::new(workers, max_in_flight, make_handler, policy_name)?;
            let queues = Arc::new(LocalQueues::new(
                rules,
                green.flags.clone(),
                max_in_flight,
                queue_capacity,
                clock,
            ));
            let wqd_ns = match rules {
                LocalRules::Synergy(r) if r.config().wait_queue => r.config().wqd_ns,
                _ => 0,
            };
            Planned {
                core: CoreExecutor::LocalPreemptive {
                    queues: queues.clone(),
                    detector: CongestionDetector::new(wqd_ns),
                    fiber_slots: green.slots.capacity(),
                },
                workers: (0..workers)
                    .map(|i| WorkerExec::LocalPreemptive(queues.clone(), green.worker(i)))
                    .collect(),
                local: Some(queues),
                done_capacity: 256,
            }
        }
    })
}

/// The green threads of a preemptive run: stacks, request slots and parked
/// fibers shared by every worker; a flag and a segment clock per worker.
struct GreenSetup<H> {
    pool: Arc<StackPool>,
    flags: Vec<Arc<PreemptFlag>>,
    segments: Vec<Arc<SegmentClock>>,
    slots: Arc<ArrayQueue<RequestSlot<H>>>,
    suspended: Arc<SuspendedFibers<crate::preempt::HandlerFiber<H>>>,
}

impl<H: Handler + 'static> GreenSetup<H> {
    /// Slots with handlers from `make_handler` (each must be fiber-safe), and
    /// as many stacks at most.
    fn new(
        workers: usize,
        max_in_flight: usize,
        make_handler: &mut dyn FnMut(usize) -> H,
        policy_name: &str,
    ) -> Result<Self, RuntimeError> {
        let n = (workers * FIBER_SLOTS_PER_WORKER)
            .min(max_in_flight)
            .max(workers);
        let slots = ArrayQueue::new(n);
        for i in 0..n {
            let handler = make_handler(i);
            if !handler.fiber_safe() {
                return Err(RuntimeError::Preemptive(policy_name.to_string()));
            }
            let _ = slots.push(RequestSlot::new(handler, 256, 4096));
        }
        let pool = StackPool::new(StackPoolConfig {
            preallocate: (2 * workers).min(n),
            max_stacks: n,
            ..StackPoolConfig::default()
        })
        .map_err(|e| RuntimeError::Green(e.to_string()))?;
        Ok(Self {
            pool,
            flags: (0..workers).map(|_| Arc::new(PreemptFlag::new())).collect(),
            segments: (0..workers)
                .map(|_| Arc::new(SegmentClock::new()))
                .collect(),
            slots: Arc::new(slots),
            suspended: Arc::new(SuspendedFibers::new(max_in_flight)),
        })
    }

    /// Worker `i`'s share.
    fn worker(&self, i: usize) -> GreenWorker<H> {
        GreenWorker {
            pool: self.pool.clone(),
            flag: self.flags[i].clone(),
            segment: self.segments[i].clone(),
            slots: self.slots.clone(),
            suspended: self.suspended.clone(),
        }
    }
}
