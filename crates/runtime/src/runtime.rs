//! Starting and stopping a run: rings, threads, pinning, the start-up hand-off
//! of wake-up handles, and joining.

use std::sync::Arc;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use psp_core::{Classifier, PolicyContext, PolicySpec, TypeInfo};
use psp_workload::ArrivalSource;

use crate::clock::Clock;
use crate::control::RunControl;
use crate::dispatcher::{
    CoreParts, DispatchCore, DispatcherReport, FrontEnd, LoopEnd, StatsConfig, dispatch_loop,
};
use crate::executor::{self, PlanInput};
use crate::generator::Generator;
use crate::handler::{BodyEncoder, Handler};
use crate::idle::{IdleStrategy, PollYield, Wakeup};
use crate::local::LocalStats;
use crate::worker::{Done, Job, WorkerParts, WorkerThread};

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
        }
    }
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The policy cannot be built.
    #[error(transparent)]
    Policy(#[from] psp_core::PolicyError),
    /// A preemptive policy with a handler that cannot run on fibers.
    #[error(
        "policy '{0}' preempts requests, and this application's handler cannot be preempted (it does not run on fibers); use a non-preemptive policy or the simulator"
    )]
    Preemptive(String),
    /// A policy needing a mechanism the runtime does not have.
    #[error("{0}")]
    Unsupported(String),
    /// The green threads could not be set up.
    #[error("green threads: {0}")]
    Green(String),
    /// A bad core list.
    #[error("{0}")]
    Cores(String),
    /// A thread could not be spawned or panicked.
    #[error("runtime thread failed: {0}")]
    Thread(String),
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
    /// Whether threads were pinned.
    pub pinned: bool,
    /// Whether polling passes yielded the core (`PollYield`).
    pub polls_yield: bool,
    /// Wall time of the run.
    pub wall: Duration,
}

/// Asks the kernel for 1 ns timer slack on the calling thread, so short sleeps
/// end when asked rather than up to 50 µs later.
pub fn set_timer_slack_1ns() {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long and affects only the
    // calling thread; no memory is passed.
    #[cfg(target_os = "linux")]
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// Sets the calling thread's nice value (best effort: lowering it needs
/// privileges; failure is harmless and ignored).
pub fn set_thread_nice(nice: i32) {
    // SAFETY: setpriority takes plain integers; with PRIO_PROCESS and who = 0 it
    // affects only the calling thread on Linux.
    #[cfg(target_os = "linux")]
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, nice);
    }
}

/// Moves the calling thread to the real-time class (SCHED_FIFO, lowest
/// real-time priority), best effort: for threads that sleep almost always and
/// must run the moment they wake. Returns whether the kernel agreed.
pub fn set_thread_realtime() -> bool {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 1 };
        // SAFETY: sched_setscheduler reads a live sched_param; pid 0 is the
        // calling thread.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    false
}

/// Raises the dispatcher's CFS priority. It sleeps most of the time; when it
/// wakes it must preempt a worker at once, or every arrival it admits late counts
/// as latency.
fn raise_priority() {
    set_thread_nice(-15);
}

fn plan_cores(
    cfg: &RuntimeConfig,
) -> Result<Option<Vec<Option<core_affinity::CoreId>>>, RuntimeError> {
    // The calling thread's mask: read it once, before anything is pinned.
    let available = core_affinity::get_core_ids().unwrap_or_default();
    let needed = cfg.workers + 1;
    match &cfg.cores {
        Some(list) => {
            if list.len() < needed {
                return Err(RuntimeError::Cores(format!(
                    "--cores lists {} cores; the dispatcher and {} workers need {needed}",
                    list.len(),
                    cfg.workers
                )));
            }
            list.iter()
                .take(needed)
                .map(|&c| {
                    available
                        .iter()
                        .copied()
                        .find(|id| id.id == c)
                        .ok_or_else(|| {
                            RuntimeError::Cores(format!(
                                "core {c} is not available to this process"
                            ))
                        })
                })
                .map(|c| c.map(Some))
                .collect::<Result<Vec<_>, _>>()
                .map(Some)
        }
        None if available.len() >= needed => {
            Ok(Some(available[..needed].iter().map(|&c| Some(c)).collect()))
        }
        // A core per worker but none left for the dispatcher: pin the workers
        // (two of them sharing a core get time-sliced for milliseconds, mid-request)
        // and let the mostly sleeping dispatcher float.
        None if available.len() >= cfg.workers => Ok(Some(
            std::iter::once(None)
                .chain(available[..cfg.workers].iter().map(|&c| Some(c)))
                .collect(),
        )),
        None => Ok(None),
    }
}

/// How long workers get to exit once released, beyond which a worker still
/// inside its handler is abandoned (left running, reported) instead of joined:
/// shutdown stays bounded whatever a handler does.
const WORKER_EXIT_GRACE: Duration = Duration::from_millis(500);

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

pub use crate::executor::FIBER_SLOTS_PER_WORKER;

/// The text of a panic's payload.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// Starts a run of `spec` with `front` as its front end: plans the one
/// executor the policy's [`Execution`](psp_core::policy::Execution) names
/// ([`crate::executor::plan`]), spawns the workers (each with its side of the
/// executor and its I/O from the front end), runs the one dispatch loop on
/// the dispatcher thread around a [`DispatchCore`], and joins. Handlers come
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
    // Plan: the policy, the cores, the executor.
    let type_names: Vec<String> = types.iter().map(|t| t.name.clone()).collect();
    let ctx = PolicyContext {
        workers: cfg.workers,
        types,
        queue_capacity: cfg.queue_capacity,
    };
    let policy = spec.build(&ctx)?;
    let cores = plan_cores(cfg)?;
    // Threads that poll hold off the ones they wait for when they outnumber
    // the cores they run on: then each polling pass yields (`PollYield`).
    let distinct_cores = match &cores {
        Some(list) if list.iter().all(Option::is_some) => {
            let mut ids: Vec<usize> = list.iter().flatten().map(|c| c.id).collect();
            ids.sort_unstable();
            ids.dedup();
            ids.len()
        }
        _ => core_affinity::get_core_ids().map_or(1, |c| c.len()),
    };
    let polls_yield = cfg.poll_yield.resolve(cfg.workers + 1, distinct_cores);
    crate::idle::set_polls_yield(polls_yield);
    let max_in_flight = max_in_flight(cfg, ctx.types.len());
    // The run's one clock: arrivals, receive times and completions all read it.
    let clock = Clock::new();
    let mut job_tx = Vec::with_capacity(cfg.workers);
    let mut job_rx = Vec::with_capacity(cfg.workers);
    for _ in 0..cfg.workers {
        // At most one job is outstanding per worker (policies dispatch only
        // to free workers), plus the policy's worker-local queue (Concord's
        // JBSQ); a little slack costs nothing.
        let (p, c) = rtrb::RingBuffer::<Job>::new(4 + policy.local_queue_depth());
        job_tx.push(p);
        job_rx.push(c);
    }
    let planned = executor::plan(
        PlanInput {
            execution: policy.execution(),
            workers: cfg.workers,
            max_in_flight,
            queue_capacity: cfg.queue_capacity,
            clock,
            make_handler: &mut make_handler,
        },
        &spec.to_string(),
        job_rx,
    )?;
    let local = planned.local.clone();
    let control = Arc::new(RunControl::new(cfg.workers));
    // Workers of the decentralized executors complete jobs back to back,
    // without waiting for the dispatcher: their completion rings get room for
    // a burst (a full ring only makes the worker wait for the next pass).
    let (mut done_tx, mut done_rx) = (Vec::new(), Vec::new());
    for _ in 0..cfg.workers {
        let (p, c) = rtrb::RingBuffer::<Done>::new(planned.done_capacity);
        done_tx.push(p);
        done_rx.push(c);
    }
    let event_fd = front.waits_on_event_fd();
    let started = Instant::now();
    let parts = CoreParts {
        executor: planned.core,
        policy,
        jobs: job_tx,
        done: done_rx,
        workers: Vec::new(),
        control: control.clone(),
        type_names,
        max_in_flight,
        stats: cfg.stats,
        workers_park: matches!(cfg.idle, IdleStrategy::SpinPark { .. }),
    };
    let spawn_err = |e: std::io::Error| RuntimeError::Thread(e.to_string());

    // Workers are not scoped threads: one stuck in its handler past the drain
    // deadline must not hold the caller (it is abandoned, see below).
    let mut w_handles = Vec::with_capacity(cfg.workers);
    let mut w_starts = Vec::with_capacity(cfg.workers);
    // Spawn: each worker with its side of the executor.
    for (i, (exec, done)) in planned.workers.into_iter().zip(done_tx).enumerate() {
        let (tx, rx) = mpsc::channel::<(Arc<Wakeup>, Arc<Wakeup>)>();
        let io = front.worker_io(i);
        let core = cores.as_ref().and_then(|c| c[i + 1]);
        let (control, idle) = (control.clone(), cfg.idle);
        let spawned = std::thread::Builder::new()
            .name(format!("psp-worker-{i}"))
            .spawn(move || {
                if let Some(c) = core {
                    core_affinity::set_for_current(c);
                }
                set_timer_slack_1ns();
                let Ok((me, dispatcher)) = rx.recv() else {
                    return;
                };
                WorkerThread {
                    exec,
                    parts: WorkerParts {
                        done,
                        io,
                        clock,
                        idle,
                        dispatcher,
                        control,
                        index: i,
                    },
                }
                .run(&me)
            });
        match spawned {
            Ok(h) => {
                w_starts.push((tx, Arc::new(Wakeup::new(h.thread().clone()))));
                w_handles.push(h);
            }
            Err(e) => {
                // Workers already started wait for their hand-off: dropping
                // their senders lets them return.
                drop(w_starts);
                for h in w_handles {
                    let _ = h.join();
                }
                return Err(spawn_err(e));
            }
        }
    }
    let worker_wakes: Vec<Arc<Wakeup>> = w_starts.iter().map(|(_, w)| w.clone()).collect();
    if let Some(l) = &local {
        l.set_wakeups(&worker_wakes);
    }

    // Run: the dispatch loop on its own thread, until the input ends and
    // everything is answered (or stranded at the drain deadline).
    let dispatched = std::thread::scope(|scope| -> Result<_, RuntimeError> {
        // The dispatcher waits for its own and the workers' wake-up handles.
        let (d_start_tx, d_start_rx) = mpsc::channel::<(Arc<Wakeup>, Vec<Arc<Wakeup>>)>();
        let d_core = cores.as_ref().and_then(|c| c[0]);
        let raise = cfg.raise_priority;
        let drain_timeout = cfg.drain_timeout;
        let series_window_ns = cfg.series_window_ns;
        let d_handle = std::thread::Builder::new()
            .name("psp-dispatcher".into())
            .spawn_scoped(scope, move || {
                if let Some(c) = d_core {
                    core_affinity::set_for_current(c);
                }
                set_timer_slack_1ns();
                if raise {
                    raise_priority();
                }
                let Ok((me, workers)) = d_start_rx.recv() else {
                    return None;
                };
                let mut core = DispatchCore::new(CoreParts { workers, ..parts });
                if let Some(window) = series_window_ns {
                    core.record_series(window);
                }
                Some(dispatch_loop(front, core, &me, clock, drain_timeout))
            })
            .map_err(spawn_err)?;
        let d_thread = d_handle.thread().clone();
        let d_wake = Arc::new(if event_fd {
            Wakeup::with_event_fd(d_thread).map_err(spawn_err)?
        } else {
            Wakeup::new(d_thread)
        });
        // SYNERGY's timer is the dispatcher thread: a worker arming a quantum
        // wakes it.
        if let Some(l) = &local {
            l.set_timer(&d_wake);
        }
        for (tx, w) in &w_starts {
            let _ = tx.send((w.clone(), d_wake.clone()));
        }
        let _ = d_start_tx.send((d_wake, worker_wakes.clone()));
        Ok(d_handle.join())
    });
    // Join. Whatever happened to the dispatcher (returned, panicked, never
    // started), release the workers before anything else.
    control.stop();
    for w in &worker_wakes {
        w.notify();
    }
    drop(w_starts);

    // Join the workers that exit within the grace; abandon the others.
    let grace_end = Instant::now() + WORKER_EXIT_GRACE;
    let mut abandoned = Vec::new();
    let mut worker_panic = None;
    for (i, h) in w_handles.into_iter().enumerate() {
        while !h.is_finished() && Instant::now() < grace_end {
            std::thread::sleep(Duration::from_millis(1));
        }
        if !h.is_finished() {
            abandoned.push(i);
            continue;
        }
        if let Err(p) = h.join() {
            worker_panic.get_or_insert_with(|| format!("worker {i} panicked: {}", panic_text(&*p)));
        }
    }
    let served = (0..cfg.workers).map(|w| control.served(w)).collect();
    let local_stats = local.as_ref().map(|l| l.stats());
    let steals = match &local_stats {
        Some(l) => l.steals.clone(),
        None => (0..cfg.workers).map(|w| control.stolen(w)).collect(),
    };

    let (report, end) = match dispatched? {
        Err(p) => {
            return Err(RuntimeError::Thread(format!(
                "the dispatcher panicked: {}",
                panic_text(&*p)
            )));
        }
        Ok(None) => return Err(RuntimeError::Thread("dispatcher never started".into())),
        Ok(Some(r)) => r,
    };
    if let Some(msg) = worker_panic {
        return Err(RuntimeError::Thread(msg));
    }
    if end == LoopEnd::WorkerFailed {
        return Err(RuntimeError::Thread("a worker failed".into()));
    }
    Ok(RunReport {
        dispatcher: report,
        served_per_worker: served,
        steals_per_worker: steals,
        abandoned_workers: abandoned,
        local: local_stats,
        pinned: cores.is_some(),
        polls_yield,
        wall: started.elapsed(),
    })
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
