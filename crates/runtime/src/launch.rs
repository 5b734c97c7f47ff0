//! The threads of a run: where each is pinned, how it is tuned (timer slack,
//! priority), the workers' [`Crew`] (spawned, handed their wake-up handles,
//! released and joined with a bounded grace) and the dispatcher's thread
//! ([`run_dispatcher`]). [`crate::runtime::start`] strings them together.
//!
//! Everything here runs at start-up or shutdown, never on the request path.
//! It must not decide anything about requests: that is the dispatcher's and
//! the executor's.

use std::sync::Arc;
use std::sync::mpsc::{self, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use core_affinity::CoreId;
use rtrb::Producer;

use crate::clock::Clock;
use crate::control::RunControl;
use crate::dispatcher::{CoreParts, DispatchCore, FrontEnd, LoopEnd, dispatch_loop};
use crate::executor::{CoreExecutor, WorkerExec};
use crate::handler::Handler;
use crate::idle::{IdleStrategy, Wakeup};
use crate::local::LocalQueues;
use crate::message::{Done, RuntimeError};
use crate::worker::{InlineWorkerParts, JobIo as _, Worker0, WorkerParts, WorkerThread};

/// How long workers get to exit once released, beyond which a worker still
/// inside its handler is abandoned (left running, reported) instead of joined:
/// shutdown stays bounded whatever a handler does.
const WORKER_EXIT_GRACE: Duration = Duration::from_millis(500);

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

/// Where a run's threads are pinned: the dispatcher on the first core, worker
/// `i` on core `i + 1` (`None`: that thread floats); no list: nothing is
/// pinned.
pub(crate) struct Pinning(Option<Vec<Option<CoreId>>>);

impl Pinning {
    /// The cores of `workers` workers and the dispatcher: the `listed` ones
    /// (`--cores`), else every thread when the machine has a core per
    /// thread, else only the workers when it has a core per worker.
    ///
    /// # Errors
    /// A list too short, or naming a core this process may not use.
    pub(crate) fn plan(workers: usize, listed: Option<&[usize]>) -> Result<Self, RuntimeError> {
        // The calling thread's mask: read it once, before anything is pinned.
        let available = core_affinity::get_core_ids().unwrap_or_default();
        let needed = workers + 1;
        let cores = match listed {
            Some(list) => {
                if list.len() < needed {
                    return Err(RuntimeError::Cores(format!(
                        "--cores lists {} cores; the dispatcher and {workers} workers need {needed}",
                        list.len(),
                    )));
                }
                let find = |c: usize| {
                    available
                        .iter()
                        .copied()
                        .find(|id| id.id == c)
                        .ok_or_else(|| {
                            RuntimeError::Cores(format!(
                                "core {c} is not available to this process"
                            ))
                        })
                };
                Some(
                    list.iter()
                        .take(needed)
                        .map(|&c| find(c).map(Some))
                        .collect::<Result<Vec<_>, _>>()?,
                )
            }
            None if available.len() >= needed => {
                Some(available[..needed].iter().map(|&c| Some(c)).collect())
            }
            // A core per worker but none left for the dispatcher: pin the
            // workers (two of them sharing a core get time-sliced for
            // milliseconds, mid-request) and let the mostly sleeping
            // dispatcher float.
            None if available.len() >= workers => Some(
                std::iter::once(None)
                    .chain(available[..workers].iter().map(|&c| Some(c)))
                    .collect(),
            ),
            None => None,
        };
        Ok(Self(cores))
    }

    /// Each thread's core (dispatcher first; `None`: it floats), or `None`
    /// when nothing is pinned.
    pub(crate) fn cores(&self) -> Option<Vec<Option<usize>>> {
        self.0
            .as_ref()
            .map(|list| list.iter().map(|c| c.map(|c| c.id)).collect())
    }

    /// The core of the dispatcher's thread.
    fn dispatcher(&self) -> Option<CoreId> {
        self.0.as_ref().and_then(|c| c[0])
    }

    /// The core of worker `i`'s thread.
    fn worker(&self, i: usize) -> Option<CoreId> {
        self.0.as_ref().and_then(|c| c[i + 1])
    }

    /// How many cores the run's threads share: the distinct pinned ones when
    /// every thread is pinned, else every core this process may use.
    pub(crate) fn distinct_cores(&self) -> usize {
        match &self.0 {
            Some(list) if list.iter().all(Option::is_some) => {
                let mut ids: Vec<usize> = list.iter().flatten().map(|c| c.id).collect();
                ids.sort_unstable();
                ids.dedup();
                ids.len()
            }
            _ => core_affinity::get_core_ids().map_or(1, |c| c.len()),
        }
    }
}

/// Pins the calling thread to `core`, if any, and asks for 1 ns timer slack.
fn settle(core: Option<CoreId>) {
    if let Some(c) = core {
        core_affinity::set_for_current(c);
    }
    set_timer_slack_1ns();
}

/// What every worker thread of a run shares.
pub(crate) struct CrewSetup<'a> {
    /// The run's one clock.
    pub(crate) clock: Clock,
    /// How idle workers wait.
    pub(crate) idle: IdleStrategy,
    /// The run's flags and the workers' response gates.
    pub(crate) control: &'a Arc<RunControl>,
    /// Where threads are pinned.
    pub(crate) pinning: &'a Pinning,
    /// Whether the run's threads share their cores (worker 0 runs on the
    /// dispatcher's thread for that reason): workers then sleep as soon as
    /// they are idle, without polling first.
    pub(crate) cores_shared: bool,
}

/// A worker's hand-off: its own wake-up handle and the dispatcher's.
type HandOff = (Arc<Wakeup>, Arc<Wakeup>);

/// The worker threads of a run. Not scoped threads: one stuck in its handler
/// past the drain deadline must not hold the caller (it is abandoned, see
/// [`Crew::release_and_join`]).
pub(crate) struct Crew {
    handles: Vec<JoinHandle<()>>,
    /// Each worker's hand-off channel and wake-up handle, in worker order.
    starts: Vec<(Sender<HandOff>, Arc<Wakeup>)>,
}

/// How the workers ended.
pub(crate) struct Joined {
    /// Workers still inside their handler after the grace: left running.
    pub(crate) abandoned: Vec<usize>,
    /// The first worker panic, as a message.
    pub(crate) panic: Option<String>,
}

impl Crew {
    /// Spawns a thread per worker (`workers`: its side of the executor and
    /// its completion producer, in worker order), each with its I/O from
    /// `front`; each waits for its hand-off ([`hand_off`](Self::hand_off))
    /// before it runs.
    ///
    /// # Errors
    /// A thread that could not be spawned (those already spawned are let go
    /// and joined).
    /// The first of them is worker `first` (1 when worker 0 runs on the
    /// dispatcher's thread).
    pub(crate) fn spawn<H: Handler + 'static, F: FrontEnd>(
        workers: Vec<(WorkerExec<H>, Producer<Done>)>,
        first: usize,
        front: &mut F,
        setup: &CrewSetup<'_>,
    ) -> Result<Self, RuntimeError> {
        let mut crew = Crew {
            handles: Vec::with_capacity(workers.len()),
            starts: Vec::with_capacity(workers.len()),
        };
        for (thread, (exec, done)) in workers.into_iter().enumerate() {
            let i = first + thread;
            let (tx, rx) = mpsc::channel::<HandOff>();
            let io = front.worker_io(i);
            let (clock, control) = (setup.clock, setup.control.clone());
            let idle = match setup.idle {
                IdleStrategy::SpinPark { park_us, .. } if setup.cores_shared => {
                    IdleStrategy::SpinPark {
                        spin_us: 0,
                        park_us,
                    }
                }
                idle => idle,
            };
            let await_pickup = !setup.cores_shared;
            let core = setup.pinning.worker(thread);
            let spawned = std::thread::Builder::new()
                .name(format!("psp-worker-{i}"))
                .spawn(move || {
                    settle(core);
                    let Ok((me, dispatcher)) = rx.recv() else {
                        return;
                    };
                    let parts = WorkerParts {
                        done,
                        io,
                        clock,
                        idle,
                        dispatcher,
                        control,
                        index: i,
                        await_pickup,
                    };
                    WorkerThread { exec, parts }.run(&me)
                });
            match spawned {
                Ok(h) => {
                    crew.starts
                        .push((tx, Arc::new(Wakeup::new(h.thread().clone()))));
                    crew.handles.push(h);
                }
                Err(e) => {
                    // Workers already started wait for their hand-off:
                    // dropping their senders lets them return.
                    drop(crew.starts);
                    for h in crew.handles {
                        let _ = h.join();
                    }
                    return Err(RuntimeError::Thread(e.to_string()));
                }
            }
        }
        Ok(crew)
    }

    /// The workers' wake-up handles, in worker order.
    pub(crate) fn wakes(&self) -> Vec<Arc<Wakeup>> {
        self.starts.iter().map(|(_, w)| w.clone()).collect()
    }

    /// Lets every worker run: its own wake-up handle and the dispatcher's.
    fn hand_off(&self, dispatcher: &Arc<Wakeup>) {
        for (tx, w) in &self.starts {
            let _ = tx.send((w.clone(), dispatcher.clone()));
        }
    }

    /// Releases the workers (stops the run and wakes each, whatever happened
    /// to the dispatcher), joins those that exit within the grace, and
    /// abandons the others.
    pub(crate) fn release_and_join(self, control: &RunControl) -> Joined {
        control.stop();
        for (_, w) in &self.starts {
            w.notify();
        }
        drop(self.starts);
        let grace_end = Instant::now() + WORKER_EXIT_GRACE;
        let mut joined = Joined {
            abandoned: Vec::new(),
            panic: None,
        };
        for (i, h) in self.handles.into_iter().enumerate() {
            while !h.is_finished() && Instant::now() < grace_end {
                std::thread::sleep(Duration::from_millis(1));
            }
            if !h.is_finished() {
                joined.abandoned.push(i);
                continue;
            }
            if let Err(p) = h.join() {
                joined
                    .panic
                    .get_or_insert_with(|| format!("worker {i} panicked: {}", panic_text(&*p)));
            }
        }
        joined
    }
}

/// Worker 0's parts when it runs on the dispatcher's thread.
pub(crate) struct InlineSetup<H, IO> {
    /// The dispatcher's ring to worker 0.
    pub(crate) ring: rtrb::Consumer<crate::message::Job>,
    /// Its handler.
    pub(crate) handler: H,
    /// Its completions.
    pub(crate) done: Producer<Done>,
    /// Its I/O, from the front end.
    pub(crate) io: IO,
    /// Per type id, whether its jobs run on a spare thread
    /// ([`crate::RuntimeConfig::open_ended_types`]).
    pub(crate) open_ended: Vec<bool>,
}

/// What the dispatcher's thread runs with.
pub(crate) struct DispatcherSetup {
    /// The core's parts, but the workers' wake-up handles.
    pub(crate) parts: CoreParts,
    /// The dispatcher's side of the run's executor.
    pub(crate) executor: CoreExecutor,
    /// The run's one clock.
    pub(crate) clock: Clock,
    /// Raise the thread's priority.
    pub(crate) raise_priority: bool,
    /// How long to drain once the input ends.
    pub(crate) drain_timeout: Duration,
    /// Record a time series with windows of this length.
    pub(crate) series_window_ns: Option<u64>,
}

/// Runs the dispatch loop of `front` on its own thread (pinned per
/// `pinning`) until the input ends and everything is answered (or stranded
/// at the drain deadline), after handing every worker of `crew` its wake-up
/// handles (and `local`'s timer, the dispatcher's). Returns what the loop
/// returned.
///
/// # Errors
/// A thread that could not start or that panicked, or a dispatcher that
/// never started.
pub(crate) fn run_dispatcher<H: Handler + 'static, F: FrontEnd + Send>(
    setup: DispatcherSetup,
    front: F,
    inline: Option<InlineSetup<H, F::Io>>,
    crew: &Crew,
    local: Option<&LocalQueues>,
    pinning: &Pinning,
) -> Result<(F::Report, LoopEnd), RuntimeError> {
    let spawn_err = |e: std::io::Error| RuntimeError::Thread(e.to_string());
    let event_fd = front.waits_on_event_fd();
    let core = pinning.dispatcher();
    let joined = std::thread::scope(|scope| -> Result<_, RuntimeError> {
        // The dispatcher waits for its own and the workers' wake-up handles.
        let (start_tx, start_rx) = mpsc::channel::<(Arc<Wakeup>, Vec<Arc<Wakeup>>)>();
        let handle = std::thread::Builder::new()
            .name("psp-dispatcher".into())
            .spawn_scoped(scope, move || {
                settle(core);
                if setup.raise_priority {
                    raise_priority();
                }
                let (me, mut workers) = start_rx.recv().ok()?;
                let control = setup.parts.control.clone();
                // Worker 0 on this thread: the dispatcher's own wake-up
                // handle is its (it never sleeps with a job of its own).
                let inline = inline.map(|mut w| {
                    workers.insert(0, me.clone());
                    w.io.hold_answers();
                    InlineWorkerParts {
                        ring: w.ring,
                        worker: Some(Worker0 {
                            handler: w.handler,
                            parts: WorkerParts {
                                done: w.done,
                                io: w.io,
                                clock: setup.clock,
                                idle: IdleStrategy::default(),
                                dispatcher: me.clone(),
                                control,
                                index: 0,
                                await_pickup: false,
                            },
                            response: Vec::with_capacity(4096),
                        }),
                        open_ended: w.open_ended,
                        spare: None,
                    }
                });
                let parts = CoreParts {
                    workers,
                    ..setup.parts
                };
                let mut core = DispatchCore::with_executor(parts, setup.executor);
                if let Some(w) = inline {
                    core.serve_worker_0_inline(Box::new(w));
                }
                if let Some(window) = setup.series_window_ns {
                    core.record_series(window);
                }
                Some(dispatch_loop(
                    front,
                    core,
                    &me,
                    setup.clock,
                    setup.drain_timeout,
                ))
            })
            .map_err(spawn_err)?;
        let thread = handle.thread().clone();
        let wake = Arc::new(if event_fd {
            Wakeup::with_event_fd(thread).map_err(spawn_err)?
        } else {
            Wakeup::new(thread)
        });
        // SYNERGY's timer is the dispatcher thread: a worker arming a
        // quantum wakes it.
        if let Some(l) = local {
            l.set_timer(&wake);
        }
        crew.hand_off(&wake);
        let _ = start_tx.send((wake, crew.wakes()));
        Ok(handle.join())
    })?;
    match joined {
        Err(p) => Err(RuntimeError::Thread(format!(
            "the dispatcher panicked: {}",
            panic_text(&*p)
        ))),
        Ok(None) => Err(RuntimeError::Thread("dispatcher never started".into())),
        Ok(Some(r)) => Ok(r),
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
