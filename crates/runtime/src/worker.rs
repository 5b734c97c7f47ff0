//! An application worker: pops a job from its ring, runs the handler, measures
//! the service time and pushes the completion back. One thread per worker, pinned
//! when the machine has the cores. Only this thread touches the handler, the job
//! consumer, the completion producer and its line of the [`RunControl`].
//!
//! A job is answered only through the worker's response gate: once the
//! dispatcher has abandoned it at the drain deadline, the worker drops the
//! answer and exits. A panic (in the handler or here) raises the run's failure
//! flag and wakes the dispatcher, which ends the run with an error.

use std::sync::Arc;
use std::time::Duration;

use psp_core::TypeId;
use rtrb::{Consumer, Producer};

use crate::clock::Clock;
use crate::control::RunControl;
use crate::handler::{Handler, HandlerError, RequestContext};
use crate::idle::{IdleStrategy, Idler, Wakeup};
use crate::pool::{GeneratedBody, TokenPool};

/// How long a worker polls, instead of idling, for the dispatcher to take its
/// last completion: the dispatcher's answer (often the worker's next job)
/// follows within one of its passes, and parking first would cost a wake-up per
/// job whenever the dispatcher sleeps too (`park:0` at 25,000 requests/s: two
/// wake-ups per request, capacity below the load, latency in the tens of ms).
const AWAIT_PICKUP_NS: u64 = 200_000;
/// And then, once it took it, for the job it may dispatch in the same pass.
const AFTER_PICKUP_NS: u64 = 5_000;

/// A request handed to a worker: its token (its body is in the front end's
/// pool, under the token) and type. One cache line, so that jobs of adjacent
/// ring slots never share one.
#[derive(Debug, Clone, Copy)]
#[repr(align(64))]
pub struct Job {
    /// The dispatcher's slot for the request.
    pub token: u32,
    /// The classified type.
    pub type_id: TypeId,
    /// Body length.
    pub len: u16,
}

/// A completion handed back to the dispatcher.
#[derive(Debug, Clone, Copy)]
pub struct Done {
    /// The job's token.
    pub token: u32,
    /// Whether the handler succeeded.
    pub ok: bool,
    /// Whether the handler refused the request's body
    /// ([`HandlerError::BadBody`]; then `ok` is false).
    pub refused: bool,
    /// Handler time.
    pub service_ns: u64,
    /// When the handler returned (the run's one clock).
    pub finished_ns: u64,
    /// Whether the answer went out (the `JobIo` could send it).
    pub sent: bool,
}

/// Where a worker finds a job's request body and where its response goes: the
/// in-process generator keeps bodies in its pool and sends nothing; a network
/// front end keeps the packet in its pool and transmits.
pub trait JobIo: Send {
    /// The request body of `job` that the handler serves.
    fn request<'a>(&'a self, job: &'a Job) -> &'a [u8];
    /// Delivers the outcome of `job` (`response` is what the handler wrote);
    /// returns whether the answer went out (the dispatcher counts those that did
    /// not). Must not block (e.g. send with `MSG_DONTWAIT`): at the drain
    /// deadline the dispatcher waits for an answer under way.
    fn respond(&mut self, job: &Job, outcome: Result<(), HandlerError>, response: &[u8]) -> bool;

    /// The longest response body this I/O can deliver; a longer one is a
    /// handler failure (the worker turns it into one before `respond`, so the
    /// dispatcher counts what the client receives).
    fn max_response(&self) -> usize {
        usize::MAX
    }
}

/// The in-process generator's I/O: bodies are in the generator's pool, nothing
/// is sent.
#[derive(Clone)]
pub struct GeneratedIo {
    bodies: Arc<TokenPool<GeneratedBody>>,
}

impl GeneratedIo {
    /// Reads the bodies the generator writes to `bodies`.
    pub fn new(bodies: Arc<TokenPool<GeneratedBody>>) -> Self {
        Self { bodies }
    }
}

impl JobIo for GeneratedIo {
    #[inline]
    fn request<'a>(&'a self, job: &'a Job) -> &'a [u8] {
        // SAFETY: this worker owns the job's token from the job ring's pop until
        // it pushes the completion (after the handler is done with the body).
        unsafe { self.bodies.get(job.token) }.bytes()
    }

    #[inline]
    fn respond(
        &mut self,
        _job: &Job,
        _outcome: Result<(), HandlerError>,
        _response: &[u8],
    ) -> bool {
        true
    }
}

/// Everything a worker thread owns.
pub struct WorkerThread<H: Handler, IO: JobIo = GeneratedIo> {
    /// Jobs from the dispatcher.
    pub jobs: Consumer<Job>,
    /// Completions to the dispatcher.
    pub done: Producer<Done>,
    /// The application state of this worker.
    pub handler: H,
    /// Request bytes and response delivery.
    pub io: IO,
    /// The run's one clock (the dispatcher stamps arrivals with it too).
    pub clock: Clock,
    /// How to wait for jobs.
    pub idle: IdleStrategy,
    /// Wakes the dispatcher after a completion.
    pub dispatcher: Arc<Wakeup>,
    /// Stop and failure flags, this worker's response gate and served counter.
    pub control: Arc<RunControl>,
    /// This worker's index.
    pub index: usize,
}

/// Raises the run's failure flag and wakes the dispatcher if the worker unwinds.
struct FailOnPanic<'a> {
    control: &'a RunControl,
    dispatcher: &'a Wakeup,
}

impl Drop for FailOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.control.fail();
            self.dispatcher.notify();
        }
    }
}

impl<H: Handler, IO: JobIo> WorkerThread<H, IO> {
    /// The worker loop; `me` is this thread's wake-up handle (already shared with
    /// the dispatcher). Returns when the run stops, or when the dispatcher
    /// abandoned the job this worker was serving.
    pub fn run(mut self, me: &Wakeup) {
        let control = self.control.clone();
        let dispatcher = self.dispatcher.clone();
        let _guard = FailOnPanic {
            control: &control,
            dispatcher: &dispatcher,
        };
        let mut idler = Idler::new(self.idle);
        let mut response = Vec::with_capacity(4096);
        let done_capacity = self.done.buffer().capacity();
        // Since when the last completion awaits the dispatcher, and when the
        // dispatcher took it.
        let mut awaiting: Option<u64> = None;
        let mut picked_up: Option<u64> = None;
        loop {
            match self.jobs.pop() {
                Ok(job) => {
                    idler.reset();
                    picked_up = None;
                    response.clear();
                    let t0 = self.clock.now_ns();
                    let outcome = self.handler.handle(&mut RequestContext::new(
                        job.type_id,
                        self.io.request(&job),
                        &mut response,
                        self.index,
                    ));
                    let t1 = self.clock.now_ns();
                    let outcome = match outcome {
                        Ok(()) if response.len() > self.io.max_response() => Err(
                            HandlerError::Failed("response longer than the datapath carries"),
                        ),
                        o => o,
                    };
                    let ok = outcome.is_ok();
                    let refused = matches!(outcome, Err(HandlerError::BadBody(_)));
                    if !control.begin_answer(self.index) {
                        // Abandoned at the drain deadline: counted stranded, so
                        // it must stay unanswered.
                        return;
                    }
                    // The response leaves before the completion is reported: the
                    // dispatcher may reuse the job's buffer once it sees it.
                    let sent = self.io.respond(&job, outcome, &response);
                    let mut done = Done {
                        token: job.token,
                        ok,
                        refused,
                        service_ns: t1 - t0,
                        finished_ns: t1,
                        sent,
                    };
                    // The ring holds as many slots as jobs can be outstanding on this
                    // worker, so this never spins in practice.
                    while let Err(rtrb::PushError::Full(d)) = self.done.push(done) {
                        done = d;
                        std::hint::spin_loop();
                    }
                    control.answered(self.index);
                    dispatcher.notify();
                    awaiting = Some(t1);
                }
                Err(_) => {
                    if control.stopping() && self.jobs.is_empty() {
                        return;
                    }
                    if let Some(since) = awaiting {
                        let now = self.clock.now_ns();
                        let poll = if self.done.slots() < done_capacity {
                            now.saturating_sub(since) < AWAIT_PICKUP_NS
                        } else {
                            now.saturating_sub(*picked_up.get_or_insert(now)) < AFTER_PICKUP_NS
                        };
                        if poll {
                            std::hint::spin_loop();
                            continue;
                        }
                        (awaiting, picked_up) = (None, None);
                    }
                    let jobs = &self.jobs;
                    idler.idle(me, Duration::from_millis(1), || {
                        !jobs.is_empty() || control.stopping()
                    });
                }
            }
        }
    }
}
