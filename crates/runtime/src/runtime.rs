//! Starting a run: what an embedder configures ([`RuntimeConfig`]), the one
//! entry point ([`start`], and [`run`] for the in-process generator), and
//! what a run reports ([`RunReport`]). `start` reads as its four steps:
//! plan (the policy, the cores, the rings, the one executor), spawn (the
//! workers), run (the dispatch loop on its own thread) and join; the threads
//! themselves are `launch.rs`'s.

use std::sync::Arc;
use std::time::{Duration, Instant};

use psp_core::{Classifier, PolicyContext, PolicySpec, TypeId, TypeInfo};
use psp_workload::ArrivalSource;
use rtrb::{Consumer, Producer, RingBuffer};

use crate::clock::Clock;
use crate::control::RunControl;
use crate::dispatcher::{CoreParts, FrontEnd, LoopEnd};
use crate::executor::{self, CoreExecutor, PlanInput, WorkerExec};
use crate::generator::Generator;
use crate::handler::{BodyEncoder, Handler};
use crate::idle::{IdleStrategy, PollYield};
use crate::launch::{Crew, CrewSetup, DispatcherSetup, InlineSetup, Pinning, run_dispatcher};
use crate::local::{LocalQueues, LocalStats};
use crate::message::{Done, RuntimeError};
use crate::observer::{DispatcherReport, StatsConfig};

pub use crate::launch::{set_thread_nice, set_thread_realtime, set_timer_slack_1ns};

/// How the runtime is laid out.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeConfig {
    /// Application workers.
    pub workers: usize,
    /// Cores to pin to: the dispatcher on the first, workers on the next ones.
    /// `None`: pin every thread when the machine has a core per thread, else only
    /// the workers when it has a core per worker.
    pub cores: Option<Vec<usize>>,
    /// How idle threads wait.
    pub idle: IdleStrategy,
    /// Bound of each queue the policy keeps.
    pub queue_capacity: usize,
    /// How long to wait for admitted requests once the input ends (last
    /// arrival, or a stop request); what is left is stranded, never answered.
    pub drain_timeout: Duration,
    /// Periodic live statistics.
    pub stats: Option<StatsConfig>,
    /// Raise the dispatcher's CPU priority (nice -15, best effort). Off when the
    /// load generator shares the machine's cores with the server: a favoured
    /// dispatcher would starve the client's threads.
    pub raise_priority: bool,
    /// Record a time series with windows of this length (`psp run --series`).
    pub series_window_ns: Option<u64>,
    /// Whether polling threads yield their core on each pass.
    pub poll_yield: PollYield,
    /// Whether worker 0 runs on the dispatcher's thread.
    pub inline_worker: InlineWorker,
    /// Per request type (in type order), the longest a request may wait
    /// from its arrival to its start (`None`: unbounded; types past the
    /// end: unbounded). A request whose turn comes later is answered
    /// OVERLOADED by the worker that took it, unrun, and counted shed
    /// ([`RequestCounts::expired`](crate::RequestCounts::expired)): under
    /// overload, work is not done for clients that have given up.
    pub max_wait: Vec<Option<Duration>>,
    /// Types whose requests may run without a bound the server sets (a Lua
    /// script runs until it ends or `SCRIPT KILL` stops it). With worker 0
    /// on the dispatcher's thread, worker 0's jobs of these types run on a
    /// spare thread, so that the input is read meanwhile (the policy still
    /// sees worker 0 busy until they complete).
    pub open_ended_types: Vec<TypeId>,
}

/// Whether worker 0 runs on the dispatcher's thread: the dispatcher then
/// serves the jobs the policy gives worker 0 itself, between its passes
/// ([`INLINE_PASS_NS`](crate::dispatcher::INLINE_PASS_NS) at most of them
/// per pass), with no hand-off between threads, and the run has one thread
/// fewer. Only for policies whose dispatcher decides every dispatch and
/// whose requests run to completion (c-FCFS, FP, EDF, the DARC family): the
/// policy still sees every worker, and DARC reserves worker 0 for the
/// shortest types as it reserves any worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InlineWorker {
    /// When the run's threads would take every core they may run on, or
    /// outnumber them (and the policy allows it): then no core is left for
    /// the kernel's network work and the clients, and a hand-off costs a
    /// wake-up.
    Auto,
    /// Always (a policy that does not allow it is refused).
    On,
    /// Never: every worker has its own thread (the paper's layout).
    #[default]
    Off,
}

impl std::str::FromStr for InlineWorker {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(InlineWorker::Auto),
            "on" => Ok(InlineWorker::On),
            "off" => Ok(InlineWorker::Off),
            _ => Err(format!("inline worker must be auto, on or off, not '{s}'")),
        }
    }
}

impl InlineWorker {
    /// Whether worker 0 runs on the dispatcher's thread in a run of
    /// `workers` workers on `cores` cores under a policy executed as
    /// `execution`.
    ///
    /// # Errors
    /// `On` with a policy that does not run each request to completion under
    /// a central dispatcher (one line).
    pub fn resolve(
        self,
        execution: &psp_core::policy::Execution,
        workers: usize,
        cores: usize,
    ) -> Result<bool, String> {
        let central = matches!(execution, psp_core::policy::Execution::Central);
        match self {
            InlineWorker::Off => Ok(false),
            InlineWorker::Auto => Ok(central && workers + 1 >= cores),
            InlineWorker::On if central => Ok(true),
            InlineWorker::On => Err(
                "worker 0 can run on the dispatcher's thread only under a policy whose dispatcher decides every dispatch and runs each request to completion (c-fcfs, fp, edf, darc, ...; not a preemptive one such as darc-fair, darc-lend, ts or concord)".into(),
            ),
        }
    }
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            workers: 2,
            cores: None,
            idle: IdleStrategy::default(),
            queue_capacity: 4096,
            drain_timeout: Duration::from_secs(10),
            stats: None,
            raise_priority: true,
            series_window_ns: None,
            poll_yield: PollYield::Auto,
            inline_worker: InlineWorker::Off,
            max_wait: Vec::new(),
            open_ended_types: Vec::new(),
        }
    }
}

/// The outcome of a run.
#[derive(Debug, Clone)]
pub struct RunReport<R = DispatcherReport> {
    /// What the dispatcher's front end counted and recorded.
    pub dispatcher: R,
    /// Jobs answered per worker.
    pub served_per_worker: Vec<u64>,
    /// Jobs each worker took from another worker's queue (work stealing in
    /// the decentralized executor; zeros otherwise).
    pub steals_per_worker: Vec<u64>,
    /// Workers still inside their handler after the drain deadline and a short
    /// grace: left running (they answer nothing more), not joined.
    pub abandoned_workers: Vec<usize>,
    /// SYNERGY's or Tiny Quanta's counters (preemptions, renewals, steals,
    /// wait-queue passes, congestion episodes), for those executors.
    pub local: Option<LocalStats>,
    /// Whether every thread was pinned (a floating dispatcher: no;
    /// `threads` says which thread is where).
    pub pinned: bool,
    /// Whether polling passes yielded the core (`PollYield`).
    pub polls_yield: bool,
    /// Whether worker 0 ran on the dispatcher's thread ([`InlineWorker`]).
    pub inline_worker: bool,
    /// Each thread and its core, one line ([`describe_threads`]).
    pub threads: String,
    /// Wall time of the run.
    pub wall: Duration,
}

/// Runs an open-loop schedule through the policy `spec` on `cfg.workers` workers,
/// each with a handler from `make_handler`; `encoder` writes the requests'
/// bodies.
///
/// # Errors
/// A policy that cannot be built, a preemptive policy with a handler that
/// cannot be preempted ([`Handler::fiber_safe`]), a bad core list, a thread
/// that could not start or panicked.
#[allow(clippy::too_many_arguments)]
pub fn run<H, F>(
    cfg: &RuntimeConfig,
    spec: &PolicySpec,
    types: Vec<TypeInfo>,
    arrivals: Box<dyn ArrivalSource + Send>,
    encoder: Box<dyn BodyEncoder>,
    classifier: Box<dyn Classifier>,
    warmup_ns: u64,
    make_handler: F,
) -> Result<RunReport, RuntimeError>
where
    H: Handler + 'static,
    F: FnMut(usize) -> H,
{
    let front = Generator::new(
        classifier,
        arrivals,
        encoder,
        max_in_flight(cfg, types.len()),
        warmup_ns,
        cfg.idle,
    );
    start(cfg, spec, types, make_handler, front)
}

/// Starts a run of `spec` with `front` as its front end: plans the one
/// executor the policy's [`Execution`](psp_core::policy::Execution) names,
/// spawns the workers (each with its side of the executor and its I/O from
/// the front end), runs the one dispatch loop on the dispatcher thread around
/// a [`DispatchCore`](crate::DispatchCore), and joins. Handlers come
/// from `make_handler`: one per worker, or for a preemptive policy one per
/// request slot (a request keeps its handler when it moves between workers).
/// Every thread stamps time with one [`Clock`]. Returns when the loop does,
/// after releasing the workers and joining them (a worker still inside its
/// handler after a short grace is abandoned and reported, so shutdown is
/// bounded).
///
/// # Errors
/// A policy that cannot be built, a preemptive policy with a handler that
/// cannot be preempted ([`Handler::fiber_safe`]), a bad core list, a thread
/// that could not start, a thread that panicked (the run then ends at once:
/// workers are released and joined, nothing hangs).
pub fn start<H, F>(
    cfg: &RuntimeConfig,
    spec: &PolicySpec,
    types: Vec<TypeInfo>,
    mut make_handler: impl FnMut(usize) -> H,
    mut front: F,
) -> Result<RunReport<F::Report>, RuntimeError>
where
    H: Handler + 'static,
    F: FrontEnd + Send,
{
    // Plan: the policy, the cores, the rings, the one executor.
    let Plan {
        pinning,
        polls_yield,
        inline,
        cores_shared,
        clock,
        control,
        core,
        executor,
        mut workers,
        local,
        threads,
    } = Plan::new(cfg, spec, types, &mut make_handler)?;
    let started = Instant::now();

    // Worker 0 on the dispatcher's thread: its side of the executor, its
    // completions and its I/O go there.
    let inline_worker = if inline {
        let (exec, done) = workers.remove(0);
        let WorkerExec::Central(ring, handler) = exec else {
            unreachable!("an inline worker is planned only for the central executor")
        };
        let mut open_ended = Vec::new();
        for &t in &cfg.open_ended_types {
            let t = usize::from(t);
            if t >= open_ended.len() {
                open_ended.resize(t + 1, false);
            }
            open_ended[t] = true;
        }
        Some(InlineSetup {
            ring,
            handler,
            done,
            io: front.worker_io(0),
            open_ended,
        })
    } else {
        None
    };

    // Spawn: each worker with its side of the executor, waiting for its
    // wake-up handles.
    let setup = CrewSetup {
        clock,
        idle: cfg.idle,
        control: &control,
        pinning: &pinning,
        cores_shared,
    };
    let crew = Crew::spawn(workers, usize::from(inline), &mut front, &setup)?;
    if let Some(l) = &local {
        l.set_wakeups(&crew.wakes());
    }

    // Run: the dispatch loop on its own thread, until the input ends and
    // everything is answered (or stranded at the drain deadline).
    let dispatcher = DispatcherSetup {
        parts: core,
        executor,
        clock,
        raise_priority: cfg.raise_priority,
        drain_timeout: cfg.drain_timeout,
        series_window_ns: cfg.series_window_ns,
    };
    let dispatched = run_dispatcher(
        dispatcher,
        front,
        inline_worker,
        &crew,
        local.as_deref(),
        &pinning,
    );

    // Join: whatever happened to the dispatcher, the workers are released
    // first.
    let joined = crew.release_and_join(&control);
    let (report, end) = dispatched?;
    if let Some(msg) = joined.panic {
        return Err(RuntimeError::Thread(msg));
    }
    if end == LoopEnd::WorkerFailed {
        return Err(RuntimeError::Thread("a worker failed".into()));
    }
    let local = local.as_ref().map(|l| l.stats());
    Ok(RunReport {
        dispatcher: report,
        served_per_worker: (0..cfg.workers).map(|w| control.served(w)).collect(),
        steals_per_worker: match &local {
            Some(l) => l.steals.clone(),
            None => (0..cfg.workers).map(|w| control.stolen(w)).collect(),
        },
        abandoned_workers: joined.abandoned,
        local,
        pinned: pinning
            .cores()
            .is_some_and(|c| c.iter().all(Option::is_some)),
        polls_yield,
        inline_worker: inline,
        threads,
        wall: started.elapsed(),
    })
}

/// A run laid out before any thread starts: [`start`]'s plan step.
struct Plan<H> {
    pinning: Pinning,
    /// Whether polling threads yield their core on each pass.
    polls_yield: bool,
    /// Whether worker 0 runs on the dispatcher's thread.
    inline: bool,
    /// Whether it does because the threads would otherwise take every core:
    /// the other workers then sleep as soon as they are idle.
    cores_shared: bool,
    /// The run's one clock: arrivals, receive times and completions all
    /// read it.
    clock: Clock,
    control: Arc<RunControl>,
    /// The dispatcher's parts but the workers' wake-up handles (known once
    /// the workers run).
    core: CoreParts,
    /// The dispatcher's side of the executor.
    executor: CoreExecutor,
    /// Each worker's side of the executor and its completion producer.
    workers: Vec<(WorkerExec<H>, Producer<Done>)>,
    /// The local executors' queues.
    local: Option<Arc<LocalQueues>>,
    /// Each thread and its core, one line.
    threads: String,
}

impl<H: Handler + 'static> Plan<H> {
    /// Builds the policy `spec` names over `types`, picks the cores, makes
    /// the rings and has the policy's execution shape build both sides of
    /// the executor (handlers from `make_handler`).
    fn new(
        cfg: &RuntimeConfig,
        spec: &PolicySpec,
        types: Vec<TypeInfo>,
        make_handler: &mut dyn FnMut(usize) -> H,
    ) -> Result<Self, RuntimeError> {
        let type_names: Vec<String> = types.iter().map(|t| t.name.clone()).collect();
        let ctx = PolicyContext {
            workers: cfg.workers,
            types,
            queue_capacity: cfg.queue_capacity,
        };
        let policy = spec.build(&ctx)?;
        let layout = ThreadLayout::plan(cfg, &policy.execution())?;
        let threads = layout.describe(cfg.workers);
        let ThreadLayout {
            pinning,
            inline,
            cores_shared,
            polls_yield,
            threads_outnumber_cores,
        } = layout;
        crate::idle::set_polls_yield(polls_yield);
        let max_in_flight = max_in_flight(cfg, ctx.types.len());
        let clock = Clock::new();
        // At most one job is outstanding per worker (policies dispatch only
        // to free workers), plus the policy's worker-local queue (Concord's
        // JBSQ); a little slack costs nothing.
        let (jobs, job_rx) = rings(cfg.workers, 4 + policy.local_queue_depth());
        let input = PlanInput {
            workers: cfg.workers,
            max_in_flight,
            queue_capacity: cfg.queue_capacity,
            clock,
            make_handler,
            policy_name: &spec.to_string(),
            threads_outnumber_cores,
        };
        let planned = executor::plan(policy.execution(), input, job_rx)?;
        // Workers of the decentralized executors complete jobs back to back,
        // without waiting for the dispatcher: their completion rings get room
        // for a burst (a full ring only makes the worker wait for the next
        // pass).
        let (done_tx, done) = rings(cfg.workers, planned.done_capacity);
        let control = Arc::new(RunControl::new(cfg.workers));
        Ok(Self {
            pinning,
            polls_yield,
            inline,
            cores_shared,
            clock,
            core: CoreParts {
                policy,
                jobs,
                done,
                workers: Vec::new(),
                control: control.clone(),
                type_names,
                max_in_flight,
                stats: cfg.stats,
                workers_park: matches!(cfg.idle, IdleStrategy::SpinPark { .. }),
                max_wait_ns: cfg
                    .max_wait
                    .iter()
                    .map(|w| {
                        w.map_or(crate::NO_DEADLINE, |d| {
                            u64::try_from(d.as_nanos()).unwrap_or(crate::NO_DEADLINE)
                        })
                    })
                    .collect(),
            },
            control,
            executor: planned.core,
            workers: planned.workers.into_iter().zip(done_tx).collect(),
            local: planned.local,
            threads,
        })
    }
}

/// Where a run's threads go: their cores, whether worker 0 runs on the
/// dispatcher's thread, and whether polling passes yield.
struct ThreadLayout {
    pinning: Pinning,
    inline: bool,
    /// Whether worker 0 is inline because the threads would otherwise take
    /// every core.
    cores_shared: bool,
    polls_yield: bool,
    /// More threads than cores to run them (SYNERGY's timer then moves to
    /// the workers under `timer=auto`).
    threads_outnumber_cores: bool,
}

impl ThreadLayout {
    fn plan(
        cfg: &RuntimeConfig,
        execution: &psp_core::policy::Execution,
    ) -> Result<Self, RuntimeError> {
        let pinning = Pinning::plan(cfg.workers, cfg.cores.as_deref())?;
        let inline = cfg
            .inline_worker
            .resolve(execution, cfg.workers, pinning.distinct_cores())
            .map_err(RuntimeError::Unsupported)?;
        // With worker 0 on the dispatcher's thread, the other workers' threads
        // take the cores after the dispatcher's.
        let cores_shared = inline && cfg.workers + 1 >= pinning.distinct_cores();
        let pinning = if inline {
            Pinning::plan(cfg.workers - 1, cfg.cores.as_deref())?
        } else {
            pinning
        };
        let threads = cfg.workers + 1 - usize::from(inline);
        // Threads that poll hold off the ones they wait for when they
        // outnumber the cores they run on: then each polling pass yields
        // (`PollYield`).
        let polls_yield = cfg.poll_yield.resolve(threads, pinning.distinct_cores());
        let threads_outnumber_cores = threads > pinning.distinct_cores();
        Ok(Self {
            pinning,
            inline,
            cores_shared,
            polls_yield,
            threads_outnumber_cores,
        })
    }

    /// One line: each thread and its core, e.g. "dispatcher and worker 0 on
    /// core 0, worker 1 on core 1 (2 threads, 2 cores)".
    fn describe(&self, workers: usize) -> String {
        let first = usize::from(self.inline);
        let mut names = vec![if self.inline {
            "dispatcher and worker 0".to_string()
        } else {
            "dispatcher".to_string()
        }];
        names.extend((first..workers).map(|w| format!("worker {w}")));
        let cores = self.pinning.cores();
        let mut parts = Vec::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            parts.push(
                match cores.as_ref().and_then(|c| c.get(i).copied().flatten()) {
                    Some(core) => format!("{name} on core {core}"),
                    None => format!("{name} floating"),
                },
            );
        }
        let mut line = format!(
            "{} ({} threads, {} cores",
            parts.join(", "),
            names.len(),
            self.pinning.distinct_cores()
        );
        if self.polls_yield {
            line.push_str("; polling passes yield");
        }
        line.push(')');
        line
    }
}

/// Where the threads of a run of `cfg` under `spec` would go, as one line
/// (the same plan [`start`] makes): each thread and its core, e.g.
/// "dispatcher and worker 0 on core 0, worker 1 on core 1 (2 threads, 2
/// cores)". What `psp serve`'s banner shows.
///
/// # Errors
/// A policy that cannot be built, a bad core list, an inline worker the
/// policy does not allow.
pub fn describe_threads(
    cfg: &RuntimeConfig,
    spec: &PolicySpec,
    types: Vec<TypeInfo>,
) -> Result<String, RuntimeError> {
    let ctx = PolicyContext {
        workers: cfg.workers,
        types,
        queue_capacity: cfg.queue_capacity,
    };
    let policy = spec.build(&ctx)?;
    Ok(ThreadLayout::plan(cfg, &policy.execution())?.describe(cfg.workers))
}

/// `n` single-producer, single-consumer rings of `capacity`, their two ends
/// apart.
fn rings<T>(n: usize, capacity: usize) -> (Vec<Producer<T>>, Vec<Consumer<T>>) {
    (0..n).map(|_| RingBuffer::new(capacity)).unzip()
}

/// Slab size of `cfg` with `types` request types: [`request_slots`].
pub fn max_in_flight(cfg: &RuntimeConfig, types: usize) -> usize {
    usize::try_from(request_slots(types, cfg.workers, cfg.queue_capacity)).unwrap_or(usize::MAX)
}

/// Request slots (and, behind a datapath, packet buffers) a run with these
/// numbers preallocates: every queue any policy keeps full (per type, central,
/// per worker) plus one running request per worker. Saturates instead of
/// overflowing, so a caller can check it against a bound before anything is
/// allocated.
pub fn request_slots(types: usize, workers: usize, queue_capacity: usize) -> u64 {
    (types as u64)
        .saturating_add(1)
        .saturating_add(workers as u64)
        .saturating_mul(queue_capacity as u64)
        .saturating_add(workers as u64)
}

#[cfg(test)]
mod tests {
    use super::InlineWorker;
    use psp_core::policy::Execution;

    #[test]
    fn worker_0_goes_on_the_dispatchers_thread_only_where_cores_are_short_or_asked() {
        let central = Execution::Central;
        let preemptive = Execution::CentralPreemptive;
        // Auto: when the dispatcher and the workers would take every core.
        assert_eq!(InlineWorker::Auto.resolve(&central, 2, 2), Ok(true));
        assert_eq!(InlineWorker::Auto.resolve(&central, 1, 2), Ok(true));
        assert_eq!(InlineWorker::Auto.resolve(&central, 1, 3), Ok(false));
        assert_eq!(InlineWorker::Auto.resolve(&central, 15, 16), Ok(true));
        assert_eq!(InlineWorker::Auto.resolve(&central, 14, 16), Ok(false));
        // Never for a policy that preempts, and `on` says why.
        assert_eq!(InlineWorker::Auto.resolve(&preemptive, 2, 2), Ok(false));
        assert!(InlineWorker::On.resolve(&preemptive, 2, 16).is_err());
        assert_eq!(InlineWorker::On.resolve(&central, 14, 16), Ok(true));
        assert_eq!(InlineWorker::Off.resolve(&central, 2, 1), Ok(false));
        assert_eq!("auto".parse(), Ok(InlineWorker::Auto));
        assert!("yes".parse::<InlineWorker>().is_err());
    }
}
