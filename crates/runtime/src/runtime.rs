//! Starting and stopping a run: rings, threads, pinning, the start-up hand-off
//! of wake-up handles, and joining.

use std::sync::Arc;

use crossbeam_queue::ArrayQueue;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use psp_core::{Classifier, PolicyContext, PolicySpec, TypeInfo};
use psp_workload::ArrivalSource;

use crate::clock::Clock;
use crate::control::RunControl;
use crate::dispatcher::{
    CoreParts, DispatchCore, DispatcherReport, FrontEnd, LoopEnd, StatsConfig, dispatch_loop,
};
use crate::generator::Generator;
use crate::green::{PreemptFlag, RequestSlot, StackPool, StackPoolConfig};
use crate::handler::{BodyEncoder, Handler};
use crate::idle::{IdleStrategy, Wakeup};
use crate::local::{LocalMode, LocalQueues, LocalStats};
use crate::preempt::{GreenWorker, HandlerFiber, QuantumMonitor, SegmentClock, SuspendedFibers};
use crate::worker::{Done, Inbox, Job, JobIo, WorkerThread};
use crate::worker_queues::WorkerQueues;

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
    F: Fn(usize) -> H,
{
    let front = Generator::new(
        classifier,
        arrivals,
        encoder,
        max_in_flight(cfg, types.len()),
        warmup_ns,
        cfg.idle,
    );
    let io = front.worker_io();
    start(
        cfg,
        spec,
        types,
        |i| (make_handler(i), io.clone()),
        false,
        front,
    )
}

/// Request slots (a handler instance and 4.3 KB of buffers each; a stack, up
/// to as many, is taken only while a request is started) per worker in a
/// preemptive run, at most (never more than the run's request slots): how
/// many requests may be started and unfinished (running or preempted) at once.
/// Time sharing starts every queued request in turn, so with 64 a queue of a
/// few hundred ran out under load. A request that finds none free is answered
/// with a handler error ("no request slot free for a fiber"), counted.
pub const FIBER_SLOTS_PER_WORKER: usize = 1024;

/// The green threads of a preemptive run: stacks, request slots and parked
/// fibers shared by every worker; a flag and a segment clock per worker.
struct GreenSetup<H> {
    pool: Arc<StackPool>,
    flags: Vec<Arc<PreemptFlag>>,
    segments: Vec<Arc<SegmentClock>>,
    slots: Arc<ArrayQueue<RequestSlot<H>>>,
    suspended: Arc<SuspendedFibers<HandlerFiber<H>>>,
}

impl<H: Handler + 'static> GreenSetup<H> {
    /// Slots with handlers from `make_worker` (each must be fiber-safe), and
    /// as many stacks at most.
    fn new<IO>(
        workers: usize,
        max_in_flight: usize,
        make_worker: &mut impl FnMut(usize) -> (H, IO),
        spec: &PolicySpec,
    ) -> Result<Self, RuntimeError> {
        let n = (workers * FIBER_SLOTS_PER_WORKER)
            .min(max_in_flight)
            .max(workers);
        let slots = ArrayQueue::new(n);
        for i in 0..n {
            let (handler, _) = make_worker(i % workers);
            if !handler.fiber_safe() {
                return Err(RuntimeError::Preemptive(spec.to_string()));
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

    /// The dispatcher's watch over these workers.
    fn monitor(&self) -> QuantumMonitor {
        QuantumMonitor::new(self.flags.clone(), self.segments.clone())
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

/// The text of a panic's payload.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// Starts the workers (each with the handler and I/O from `make_worker`) and runs
/// the one dispatch loop with `front` on the dispatcher thread, around a
/// [`DispatchCore`] that drives `spec`. Every thread stamps time with one
/// [`Clock`]. Returns when the loop does, after releasing the workers and
/// joining them (a worker still inside its handler after a short grace is
/// abandoned and reported, so shutdown is bounded). With `event_fd`, workers
/// signal the dispatcher through an eventfd (for front ends that wait in
/// `poll`) instead of unparking it.
///
/// # Errors
/// A policy that cannot be built, a preemptive policy with a handler that
/// cannot be preempted ([`Handler::fiber_safe`]), a bad core list, a thread
/// that could not start, a thread that panicked (the run then ends at once:
/// workers are released and joined, nothing hangs).
pub fn start<H, IO, F>(
    cfg: &RuntimeConfig,
    spec: &PolicySpec,
    types: Vec<TypeInfo>,
    mut make_worker: impl FnMut(usize) -> (H, IO),
    event_fd: bool,
    front: F,
) -> Result<RunReport<F::Report>, RuntimeError>
where
    H: Handler + 'static,
    IO: JobIo + 'static,
    F: FrontEnd + Send,
{
    let type_names: Vec<String> = types.iter().map(|t| t.name.clone()).collect();
    let ctx = PolicyContext {
        workers: cfg.workers,
        types,
        queue_capacity: cfg.queue_capacity,
    };
    let policy = spec.build(&ctx)?;
    // A decentralized policy runs on worker queues fed by flow, without the
    // dispatcher deciding (crate::worker_queues).
    let worker_queues = policy
        .per_worker_rules()
        .map(|rules| Arc::new(WorkerQueues::new(rules, cfg.queue_capacity)));
    let cores = plan_cores(cfg)?;
    let max_in_flight = max_in_flight(cfg, ctx.types.len());
    // A preemptive policy's requests run on fibers: shared stacks, request
    // slots (a handler instance each) and parked fibers, a flag and a segment
    // clock per worker.
    // The run's one clock: arrivals, receive times and completions all read it.
    let clock = Clock::new();
    let local_mode = match (policy.synergy_rules(), spec) {
        (Some(rules), _) => Some(LocalMode::Synergy(rules)),
        (None, PolicySpec::Tq(c)) => {
            let spinner = crate::clock::Spinner::calibrate(Duration::from_millis(10));
            Some(LocalMode::Tq {
                quantum_ns: c.quantum_ns,
                quantum_ticks: spinner.ns_to_ticks(c.quantum_ns).max(1),
            })
        }
        _ => None,
    };
    let green = if spec.needs_preemption() {
        if worker_queues.is_some() {
            return Err(RuntimeError::Unsupported(format!(
                "policy '{spec}' preempts and runs on worker queues: the runtime cannot run both yet"
            )));
        }
        Some(GreenSetup::new(
            cfg.workers,
            max_in_flight,
            &mut make_worker,
            spec,
        )?)
    } else {
        None
    };
    // SYNERGY and Tiny Quanta: workers pick from their own queues and preempt
    // on green threads (crate::local).
    let local = match (local_mode, &green) {
        (Some(mode), Some(g)) => Some(Arc::new(LocalQueues::new(
            mode,
            g.flags.clone(),
            max_in_flight,
            cfg.queue_capacity,
            clock,
        ))),
        _ => None,
    };
    let control = Arc::new(RunControl::new(cfg.workers));
    // At most one job is outstanding per worker (policies dispatch only to free
    // workers); a little slack costs nothing.
    let (mut job_tx, mut job_rx, mut done_tx, mut done_rx) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // Workers of the decentralized executor complete jobs back to back,
    // without waiting for the dispatcher: their completion rings get room for
    // a burst (a full ring only makes the worker wait for the next pass).
    let done_capacity = if worker_queues.is_some() || local.is_some() {
        256
    } else {
        4
    };
    for _ in 0..cfg.workers {
        // Room for the policy's worker-local queue too (Concord's JBSQ).
        let (p, c) = rtrb::RingBuffer::<Job>::new(4 + policy.local_queue_depth());
        job_tx.push(p);
        job_rx.push(c);
        let (p, c) = rtrb::RingBuffer::<Done>::new(done_capacity);
        done_tx.push(p);
        done_rx.push(c);
    }
    let started = Instant::now();
    let parts = CoreParts {
        quanta: green
            .as_ref()
            .filter(|_| local.is_none())
            .map(GreenSetup::monitor),
        policy,
        jobs: job_tx,
        done: done_rx,
        workers: Vec::new(),
        control: control.clone(),
        type_names,
        max_in_flight,
        stats: cfg.stats,
        workers_park: matches!(cfg.idle, IdleStrategy::SpinPark { .. }),
        worker_queues: worker_queues.clone(),
        local: local.clone(),
    };
    let spawn_err = |e: std::io::Error| RuntimeError::Thread(e.to_string());

    // Workers are not scoped threads: one stuck in its handler past the drain
    // deadline must not hold the caller (it is abandoned, see below).
    let mut w_handles = Vec::with_capacity(cfg.workers);
    let mut w_starts = Vec::with_capacity(cfg.workers);
    for (i, (jobs, done)) in job_rx.into_iter().zip(done_tx).enumerate() {
        let (tx, rx) = mpsc::channel::<(Arc<Wakeup>, Arc<Wakeup>)>();
        let (handler, io) = make_worker(i);
        let green_worker = green.as_ref().map(|g| g.worker(i));
        let jobs = match (&worker_queues, &local) {
            (Some(q), _) => Inbox::Queues(q.clone()),
            (None, Some(l)) => Inbox::Local(l.clone()),
            (None, None) => Inbox::Ring(jobs),
        };
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
                    jobs,
                    done,
                    handler,
                    io,
                    clock,
                    idle,
                    dispatcher,
                    control,
                    index: i,
                    green: green_worker,
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
        for (tx, w) in &w_starts {
            let _ = tx.send((w.clone(), d_wake.clone()));
        }
        let _ = d_start_tx.send((d_wake, worker_wakes.clone()));
        Ok(d_handle.join())
    });
    // Whatever happened to the dispatcher (returned, panicked, never started),
    // release the workers before anything else.
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
