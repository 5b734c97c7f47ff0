//! An application worker: takes a job by its side of the run's executor
//! ([`WorkerExec`]: its ring from the dispatcher, its own worker queue and the
//! queues it steals from, or the local queues), runs the handler (to
//! completion, or a segment on a green thread), measures the service time and
//! pushes the completion back. One thread per worker, pinned when the machine
//! has the cores. Only this thread touches the handler, the job consumer, the
//! completion producer and its line of the [`RunControl`].
//!
//! A job is answered only through the worker's response gate: once the
//! dispatcher has abandoned it at the drain deadline, the worker drops the
//! answer and exits. A panic (in the handler or here) raises the run's failure
//! flag and wakes the dispatcher, which ends the run with an error.

use std::sync::Arc;
use std::time::Duration;

use rtrb::{Consumer, Producer};

use crate::clock;
use crate::clock::Clock;
use crate::control::RunControl;
use crate::executor::WorkerExec;
use crate::green::{RequestFiber, Resumed, Served};
use crate::handler::{Handler, HandlerError, RequestContext};
use crate::idle::{IdleStrategy, Idler, Wakeup};
use crate::local::{LocalMode, LocalQueues, short_average};
use crate::message::{Done, Job};
use crate::point::{Cause, RunLimits};
use crate::preempt::{GreenWorker, HandlerFiber};
use crate::worker_queues::WorkerQueues;
use psp_core::policy::ShortAverage;

/// How long a worker polls, instead of idling, for the dispatcher to take its
/// last completion: the dispatcher's answer (often the worker's next job)
/// follows within one of its passes, and parking first would cost a wake-up per
/// job whenever the dispatcher sleeps too (`park:0` at 25,000 requests/s: two
/// wake-ups per request, capacity below the load, latency in the tens of ms).
const AWAIT_PICKUP_NS: u64 = 200_000;
/// And then, once it took it, for the job it may dispatch in the same pass.
const AFTER_PICKUP_NS: u64 = 5_000;

/// The completion of a request whose handler returned `outcome`, run from
/// `t0` to `t1` (its last segment); `sent` is set once it is answered.
fn finished(token: u32, outcome: &Result<(), HandlerError>, t0: u64, t1: u64) -> Done {
    Done {
        token,
        ok: outcome.is_ok(),
        refused: matches!(outcome, Err(HandlerError::BadBody(_))),
        service_ns: t1 - t0,
        finished_ns: t1,
        sent: false,
        preempted: false,
        no_fiber: false,
        failed_in_job: (0, 0),
        expired: false,
    }
}

/// Why a job did not start.
#[derive(Debug, Clone, Copy)]
enum NotStarted {
    /// Its turn came after its deadline ([`Job::deadline_ns`]).
    Expired,
    /// No request slot or fiber stack was free (why).
    NoRoom(&'static str),
}

/// `outcome`, or a handler failure when the response is longer than the
/// datapath carries (counted as what the client receives).
fn fits(
    outcome: Result<(), HandlerError>,
    response: &[u8],
    max_response: usize,
) -> Result<(), HandlerError> {
    match outcome {
        Ok(()) if response.len() > max_response => Err(HandlerError::Failed(
            "response longer than the datapath carries",
        )),
        o => o,
    }
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

    /// The connection `job` came on ([`crate::RequestContext::session`]);
    /// 0 for front ends without connections.
    fn session(&self, _job: &Job) -> u64 {
        0
    }

    /// The length of the first request in `body`, the body of a job of
    /// several requests ([`Job::count`]): only a front end that makes such
    /// jobs (TCP, from a connection's pipeline) frames them; by default the
    /// body is one request.
    fn first_request_len(&self, body: &[u8]) -> usize {
        body.len()
    }

    /// Appends the answer to one request of a job of several whose handler
    /// returned `error` (the job's one response holds every request's
    /// answer, in order); by default nothing.
    fn append_refusal(&self, error: &HandlerError, response: &mut Vec<u8>) {
        let _ = (error, response);
    }

    /// Answers each request of `job` with the front end's OVERLOADED reply
    /// (the protocol's busy answer): the job's turn came after its deadline
    /// and it was not run. Returns whether the answer went out. By default a
    /// handler failure, for an I/O without a busy answer.
    fn refuse_expired(&mut self, job: &Job) -> bool {
        self.respond(
            job,
            Err(HandlerError::Failed("waited past its queueing bound")),
            &[],
        )
    }

    /// From now on, may hold answers until [`flush`](Self::flush): worker 0
    /// on the dispatcher's thread, whose answers of one pass of the loop
    /// can leave in one system call. By default each answer leaves at once.
    fn hold_answers(&mut self) {}

    /// Sends the answers held; one that cannot leave is the I/O's to count.
    /// The dispatch loop calls it at the end of each pass, before its input
    /// is read again. By default nothing is held.
    fn flush(&mut self) {}
}

/// Where the general worker loop takes its jobs.
enum Source {
    /// The dispatcher's ring to this worker.
    Ring(Consumer<Job>),
    /// Its own worker queue, and those it may steal from.
    Queues(Arc<WorkerQueues>),
}

impl Source {
    /// The next job for worker `me`, and whether it was stolen.
    #[inline]
    fn take(&mut self, me: usize) -> Option<(Job, bool)> {
        match self {
            Source::Ring(ring) => ring.pop().ok().map(|job| (job, false)),
            Source::Queues(q) => q.take(me as psp_core::WorkerId),
        }
    }

    /// Whether a job is there for worker `me`.
    #[inline]
    fn has_job(&self, me: usize) -> bool {
        match self {
            Source::Ring(ring) => !ring.is_empty(),
            Source::Queues(q) => q.has_work_for(me as psp_core::WorkerId),
        }
    }
}

/// How the general worker loop runs a job.
enum Runner<H> {
    /// To completion, on this thread, with this worker's handler.
    Direct(H),
    /// On a green thread, for one segment.
    Fiber(GreenWorker<H>),
}

/// Everything a worker thread owns.
pub(crate) struct WorkerThread<H: Handler, IO: JobIo> {
    /// Where its jobs come from and how it runs them: the worker's side of
    /// the run's one executor ([`crate::executor::plan`]).
    pub(crate) exec: WorkerExec<H>,
    /// What every executor's worker shares.
    pub(crate) parts: WorkerParts<IO>,
}

/// The parts of a worker every executor uses.
pub(crate) struct WorkerParts<IO: JobIo> {
    /// Completions to the dispatcher.
    pub(crate) done: Producer<Done>,
    /// Request bytes and response delivery.
    pub(crate) io: IO,
    /// The run's one clock (the dispatcher stamps arrivals with it too).
    pub(crate) clock: Clock,
    /// How to wait for jobs.
    pub(crate) idle: IdleStrategy,
    /// Wakes the dispatcher after a completion.
    pub(crate) dispatcher: Arc<Wakeup>,
    /// Stop and failure flags, this worker's response gate and served counter.
    pub(crate) control: Arc<RunControl>,
    /// This worker's index.
    pub(crate) index: usize,
    /// Whether it polls for the dispatcher to take its completion (and
    /// hand it its next job) before it idles: only with a core of its own
    /// (where the threads share the cores, the poll takes the core from
    /// the thread it waits for).
    pub(crate) await_pickup: bool,
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

impl<H: Handler + 'static, IO: JobIo> WorkerThread<H, IO> {
    /// The worker loop; `me` is this thread's wake-up handle (already shared with
    /// the dispatcher). Returns when the run stops, or when the dispatcher
    /// abandoned the job this worker was serving.
    pub(crate) fn run(self, me: &Wakeup) {
        let WorkerThread { exec, mut parts } = self;
        let control = parts.control.clone();
        let dispatcher = parts.dispatcher.clone();
        let _guard = FailOnPanic {
            control: &control,
            dispatcher: &dispatcher,
        };
        match exec {
            WorkerExec::Central(ring, h) => {
                parts.run_general(me, Source::Ring(ring), Runner::Direct(h))
            }
            WorkerExec::CentralPreemptive(ring, g) => {
                parts.run_general(me, Source::Ring(ring), Runner::Fiber(g))
            }
            WorkerExec::WorkerQueues(q, h) => {
                parts.run_general(me, Source::Queues(q), Runner::Direct(h))
            }
            WorkerExec::LocalPreemptive(q, g) => parts.run_local(me, &q, &g),
        }
    }
}

/// Worker 0 when it runs on the dispatcher's thread
/// ([`crate::InlineWorker`]): the dispatcher serves its jobs between its
/// passes, with the worker's own handler and I/O, and no hand-off between
/// threads. Its jobs of an open-ended type
/// ([`RuntimeConfig::open_ended_types`](crate::RuntimeConfig::open_ended_types))
/// run on a spare thread instead ([`SpareThread`]).
pub(crate) struct InlineWorkerParts<H: Handler, IO: JobIo> {
    /// The dispatcher's ring to worker 0.
    pub(crate) ring: Consumer<Job>,
    /// Worker 0 itself; `None` while it serves a job on the spare thread.
    pub(crate) worker: Option<Worker0<H, IO>>,
    /// Per type id, whether its jobs run on the spare thread.
    pub(crate) open_ended: Vec<bool>,
    /// The spare thread, once a job needed it.
    pub(crate) spare: Option<SpareThread<H, IO>>,
}

/// What worker 0 serves with: moved to the spare thread with a job, and
/// back when it completed, so that one thread at a time has it.
pub(crate) struct Worker0<H: Handler, IO: JobIo> {
    /// Worker 0's handler.
    pub(crate) handler: H,
    /// Worker 0's completion producer, I/O and line of the run control.
    pub(crate) parts: WorkerParts<IO>,
    /// The response buffer, reused.
    pub(crate) response: Vec<u8>,
}

impl<H: Handler, IO: JobIo> Worker0<H, IO> {
    /// Serves `job` and pushes its completion (its answers sent first, so
    /// that a held answer's packet is not reused before it left). `None`:
    /// abandoned at the drain deadline, unanswered.
    fn serve(&mut self, job: &Job) -> Option<u64> {
        let p = &mut self.parts;
        let done = p.serve_direct(&mut self.handler, job, &mut self.response)?;
        let finished = done.finished_ns;
        // One job at a time, completed by the thread that has worker 0
        // before the next is dispatched: the ring always has room.
        if p.done.push(done).is_err() {
            panic!("worker 0's completion ring is full: its jobs run one at a time");
        }
        p.control.answered(p.index);
        Some(finished)
    }
}

/// A thread that serves worker 0's jobs of an open-ended type (a Lua
/// script runs until it ends or `SCRIPT KILL` stops it) while worker 0
/// runs on the dispatcher's thread: the dispatcher goes on reading the
/// input meanwhile (a `SCRIPT KILL` among it), and the policy sees worker 0
/// busy until the job completes, as it would on the dispatcher's thread.
/// It sleeps on a channel between jobs; a job it never finishes leaves it
/// running (abandoned, as a worker thread would be).
pub(crate) struct SpareThread<H: Handler, IO: JobIo> {
    to: std::sync::mpsc::Sender<(Job, Worker0<H, IO>)>,
    back: std::sync::mpsc::Receiver<Worker0<H, IO>>,
}

impl<H: Handler + 'static, IO: JobIo + 'static> SpareThread<H, IO> {
    fn spawn() -> std::io::Result<Self> {
        let (to, jobs) = std::sync::mpsc::channel::<(Job, Worker0<H, IO>)>();
        let (done, back) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("psp-worker-0-spare".into())
            .spawn(move || {
                for (job, mut w) in jobs {
                    let control = w.parts.control.clone();
                    let dispatcher = w.parts.dispatcher.clone();
                    let _guard = FailOnPanic {
                        control: &control,
                        dispatcher: &dispatcher,
                    };
                    if w.serve(&job).is_none() {
                        return; // abandoned at the drain deadline
                    }
                    w.parts.io.flush();
                    if done.send(w).is_err() {
                        return; // the dispatcher ended
                    }
                    dispatcher.notify();
                }
            })?;
        Ok(Self { to, back })
    }
}

/// What the dispatch loop asks of worker 0 on its own thread.
pub(crate) trait ServeInline {
    /// Serves the job waiting for worker 0, if any, and pushes its
    /// completion; returns when it finished (the run's clock), `None` if
    /// none waited.
    fn serve_pending(&mut self) -> Option<u64>;

    /// Sends the answers its I/O holds ([`JobIo::flush`]).
    fn flush(&mut self);
}

impl<H: Handler + 'static, IO: JobIo + 'static> ServeInline for InlineWorkerParts<H, IO> {
    #[inline]
    fn serve_pending(&mut self) -> Option<u64> {
        if self.worker.is_none() {
            // On the spare thread: back once its job completed (its next
            // job waits in the ring meanwhile; the spare thread wakes the
            // dispatcher when it hands worker 0 back).
            self.worker = self.spare.as_ref()?.back.try_recv().ok();
        }
        let w = self.worker.as_mut()?;
        let job = self.ring.pop().ok()?;
        if self.open_ended.get(usize::from(job.type_id)) == Some(&true) {
            let spare = match self.spare.take() {
                Some(spare) => spare,
                None => SpareThread::spawn()
                    .unwrap_or_else(|e| panic!("worker 0's spare thread cannot start: {e}")),
            };
            let w = self.worker.take().expect("worker 0 is here");
            spare
                .to
                .send((job, w))
                .unwrap_or_else(|_| panic!("worker 0's spare thread ended"));
            self.spare = Some(spare);
            // Nothing completed here: the policy's worker 0 stays busy.
            return None;
        }
        // `None`: abandoned at the drain deadline, unanswered.
        Some(w.serve(&job).unwrap_or_else(|| w.parts.clock.now_ns()))
    }

    #[inline]
    fn flush(&mut self) {
        if let Some(w) = self.worker.as_mut() {
            w.parts.io.flush();
        }
    }
}

impl<IO: JobIo> WorkerParts<IO> {
    /// The loop of the central executors and of the worker queues: take a
    /// job, run it (to completion, or one segment on a fiber), push its
    /// completion. Returns when the run stops, or when the dispatcher
    /// abandoned the job this worker was serving.
    fn run_general<H: Handler + 'static>(
        &mut self,
        me: &Wakeup,
        mut jobs: Source,
        mut runner: Runner<H>,
    ) {
        let control = self.control.clone();
        let dispatcher = self.dispatcher.clone();
        let mut idler = Idler::new(self.idle);
        let mut response = Vec::with_capacity(4096);
        let done_capacity = self.done.buffer().capacity();
        // Since when the last completion awaits the dispatcher, and when the
        // dispatcher took it.
        let mut awaiting: Option<u64> = None;
        let mut picked_up: Option<u64> = None;
        // Only a dispatcher that hands out the next job is worth waiting for.
        let centralized = matches!(jobs, Source::Ring(_));
        loop {
            let next = jobs.take(self.index);
            if let Some((_, true)) = next {
                control.stole(self.index);
            }
            let Some((job, _)) = next else {
                if control.stopping() && !jobs.has_job(self.index) {
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
                        crate::idle::pause();
                        continue;
                    }
                    (awaiting, picked_up) = (None, None);
                }
                let index = self.index;
                idler.idle(me, Duration::from_millis(1), || {
                    jobs.has_job(index) || control.stopping()
                });
                continue;
            };
            idler.reset();
            picked_up = None;
            let served = match &mut runner {
                Runner::Fiber(g) => self.serve_on_fiber(g, &job),
                Runner::Direct(handler) => self.serve_direct(handler, &job, &mut response),
            };
            let Some(mut done) = served else {
                return; // abandoned at the drain deadline
            };
            // The ring holds as many slots as jobs can be outstanding on this
            // worker, so this never spins in practice.
            while let Err(rtrb::PushError::Full(d)) = self.done.push(done) {
                done = d;
                std::hint::spin_loop();
            }
            if !done.preempted {
                control.answered(self.index);
            }
            // The central dispatcher may have this worker's next job; a
            // decentralized one only records, and is woken only before the
            // completion ring fills.
            if centralized || self.done.slots() < done_capacity / 2 {
                dispatcher.notify();
            }
            awaiting = (centralized && self.await_pickup).then_some(done.finished_ns);
        }
    }

    /// Runs `job` to completion with `handler` and answers it. `None`: the
    /// dispatcher abandoned it at the drain deadline (it stays unanswered).
    #[inline]
    fn serve_direct<H: Handler>(
        &mut self,
        handler: &mut H,
        job: &Job,
        response: &mut Vec<u8>,
    ) -> Option<Done> {
        response.clear();
        let t0 = self.clock.now_ns();
        if t0 > job.deadline_ns {
            return self.refuse_start(job, NotStarted::Expired);
        }
        let (answer, failed) = if job.count <= 1 {
            let o = handler.handle(
                &mut RequestContext::new(job.type_id, self.io.request(job), response, self.index)
                    .with_session(self.io.session(job)),
            );
            (o, None)
        } else {
            self.serve_batch(handler, job, response)
        };
        let t1 = self.clock.now_ns();
        let answer = fits(answer, response, self.io.max_response());
        let mut done = finished(
            job.token,
            &answer.and(failed.map_or(Ok(()), |f| f.0)),
            t0,
            t1,
        );
        if let Some((_, bad, errors)) = failed {
            // A response too long for the I/O: every request is answered
            // HANDLER_ERROR (`respond`).
            done.failed_in_job = if answer.is_err() {
                (0, job.count)
            } else {
                (bad, errors)
            };
        }
        if !self.control.begin_answer(self.index) {
            // Abandoned at the drain deadline: counted stranded, so it must
            // stay unanswered.
            return None;
        }
        // The response leaves before the completion is reported: the
        // dispatcher may reuse the job's buffer once it sees it.
        done.sent = self.io.respond(job, answer, response);
        Some(done)
    }

    /// Runs the requests of a job of several ([`Job::count`]) in order, each
    /// answer appended to `response` (a failed one's refusal in its place).
    /// Returns the outcome to deliver (`Ok`: every request has its answer in
    /// `response`) and, for the counters, the first failure and how many
    /// requests were answered BAD_REQUEST and HANDLER_ERROR.
    #[allow(clippy::type_complexity)]
    fn serve_batch<H: Handler>(
        &mut self,
        handler: &mut H,
        job: &Job,
        response: &mut Vec<u8>,
    ) -> (
        Result<(), HandlerError>,
        Option<(Result<(), HandlerError>, u16, u16)>,
    ) {
        let session = self.io.session(job);
        let mut rest = self.io.request(job);
        let (mut first_failure, mut bad, mut errors) = (Ok(()), 0u16, 0u16);
        while !rest.is_empty() {
            let n = self.io.first_request_len(rest).clamp(1, rest.len());
            let (one, after) = rest.split_at(n);
            rest = after;
            let r = handler.handle(
                &mut RequestContext::new(job.type_id, one, response, self.index)
                    .with_session(session),
            );
            if let Err(e) = r {
                self.io.append_refusal(&e, response);
                match e {
                    HandlerError::BadBody(_) => bad += 1,
                    HandlerError::Failed(_) => errors += 1,
                }
                first_failure = first_failure.and(Err(e));
            }
        }
        (Ok(()), Some((first_failure, bad, errors)))
    }

    /// The worker loop of SYNERGY and Tiny Quanta ([`crate::local`]): takes
    /// its next job itself, runs it on a fiber, and either answers it or
    /// requeues it preempted. Returns when the run stops, or when the
    /// dispatcher abandoned the job this worker was serving.
    fn run_local<H: Handler + 'static>(
        &mut self,
        me: &Wakeup,
        q: &LocalQueues,
        g: &GreenWorker<H>,
    ) {
        let mut idler = Idler::new(self.idle);
        let done_capacity = self.done.buffer().capacity();
        let mut average = match q.mode() {
            LocalMode::Synergy(r) => Some(short_average(&r)),
            LocalMode::Tq { .. } => None,
        };
        loop {
            let Some(job) = q.take(self.index) else {
                if self.control.stopping() && !q.has_work_for(self.index) {
                    return;
                }
                let (control, index) = (&self.control, self.index);
                idler.idle(me, Duration::from_millis(1), || {
                    q.has_work_for(index) || control.stopping()
                });
                continue;
            };
            idler.reset();
            q.set_running(self.index, true);
            let served = self.serve_local(q, g, &job, average.as_mut());
            q.set_running(self.index, false);
            let Some(done) = served else {
                return; // abandoned at the drain deadline
            };
            let Some(mut done) = done else {
                continue; // preempted, requeued
            };
            while let Err(rtrb::PushError::Full(d)) = self.done.push(done) {
                done = d;
                std::hint::spin_loop();
            }
            self.control.answered(self.index);
            // The dispatcher only records completions (workers go on by
            // themselves): woken only before the completion ring fills.
            if self.done.slots() < done_capacity / 2 {
                self.dispatcher.notify();
            }
        }
    }

    /// Starts (a free slot, a fiber) or resumes (parked under the token) the
    /// request of `job`; `Ok(fiber, resumed)`, or why it cannot start.
    fn fiber_for<H: Handler + 'static>(
        &mut self,
        g: &GreenWorker<H>,
        job: &Job,
    ) -> Result<(HandlerFiber<H>, bool), NotStarted> {
        // SAFETY: this worker owns the job's token from its pop (from the
        // dispatcher's ring or a queue) until it pushes the completion or
        // requeues the job.
        if let Some(f) = unsafe { g.suspended.take(job.token) } {
            return Ok((f, true));
        }
        // Only a start can be too late: a started request runs to its end.
        if self.clock.now_ns() > job.deadline_ns {
            return Err(NotStarted::Expired);
        }
        let Some(mut slot) = g.slots.pop() else {
            return Err(NotStarted::NoRoom("no request slot free for a fiber"));
        };
        slot.load(job.type_id, self.index, self.io.request(job));
        slot.session = self.io.session(job);
        // SAFETY: the run was started for a preemptive policy with handlers
        // that keep `RequestFiber::serve`'s contract (nothing tied to the
        // thread across a preemption point outside a `NoPreempt` guard).
        match unsafe { RequestFiber::serve(&g.pool, slot) } {
            Ok(f) => Ok((f, false)),
            Err(refused) => {
                // The slot came from the queue: there is room.
                let _ = g.slots.push(refused.work);
                Err(NotStarted::NoRoom("no fiber stack free"))
            }
        }
    }

    /// `job` did not start: its turn came after its deadline (answered
    /// OVERLOADED, counted shed) or no request slot or fiber stack was free
    /// (answered with a handler error, counted like any other). `None` when
    /// the run is abandoning answers.
    fn refuse_start(&mut self, job: &Job, why: NotStarted) -> Option<Done> {
        let t = self.clock.now_ns();
        let failed = match why {
            NotStarted::Expired => "expired",
            NotStarted::NoRoom(why) => why,
        };
        let mut done = finished(job.token, &Err(HandlerError::Failed(failed)), t, t);
        (done.expired, done.no_fiber) = (
            matches!(why, NotStarted::Expired),
            matches!(why, NotStarted::NoRoom(_)),
        );
        if !self.control.begin_answer(self.index) {
            return None;
        }
        done.sent = match why {
            NotStarted::Expired => self.io.refuse_expired(job),
            NotStarted::NoRoom(why) => self.io.respond(job, Err(HandlerError::Failed(why)), &[]),
        };
        Some(done)
    }

    /// The request on a fiber finished: answers it (through this worker's
    /// I/O, whichever worker started it: the request's bytes and its peer
    /// are under its token) and frees its slot. `None`: the run is
    /// abandoning answers.
    fn answer_served<H>(
        &mut self,
        g: &GreenWorker<H>,
        job: &Job,
        served: Served<H>,
        t0: u64,
        t1: u64,
        total_ns: u64,
    ) -> Option<Done> {
        let outcome = fits(
            served.outcome,
            &served.slot.response,
            self.io.max_response(),
        );
        let mut done = finished(job.token, &outcome, t0, t1);
        done.service_ns = total_ns;
        let answer = self.control.begin_answer(self.index);
        done.sent = answer && self.io.respond(job, outcome, &served.slot.response);
        // Back to the queue it came from: there is room.
        let _ = g.slots.push(served.slot);
        answer.then_some(done)
    }

    /// One turn of `job` on this worker ([`Self::run_local`]): `None`, the
    /// job was abandoned; `Some(None)`, it was preempted and requeued;
    /// `Some(Some(done))`, it finished (`done.service_ns` is the sum of its
    /// segments).
    fn serve_local<H: Handler + 'static>(
        &mut self,
        q: &LocalQueues,
        g: &GreenWorker<H>,
        job: &Job,
        average: Option<&mut ShortAverage>,
    ) -> Option<Option<Done>> {
        let (mut fiber, resumed) = match self.fiber_for(g, job) {
            Ok(f) => f,
            Err(why) => return self.refuse_start(job, why).map(Some),
        };
        let me = self.index;
        let t0 = self.clock.now_ns();
        let (r, long) = match q.mode() {
            LocalMode::Synergy(rules) => {
                let fb = q.feedback(me);
                let avg = average.as_ref().map_or(0.0, |a| a.value_ns());
                // A raise left from an earlier request is void; one that
                // lands late is ignored by a short request (green.rs).
                g.flag.clear();
                fb.begin(resumed, rules.quantum_ns(avg, q.congested()));
                let r = if q.worker_timer() {
                    // This worker checks its own quantum: an expiry yields
                    // here, and the timer's rule preempts or renews.
                    let limits = RunLimits::new(&g.flag).with_feedback_timer(fb);
                    loop {
                        match fiber.resume(&limits) {
                            Resumed::Yielded(Cause::Deadline)
                                if !q.expired_on_worker(me, self.clock.now_ns()) => {}
                            r => break r,
                        }
                    }
                } else {
                    fiber.resume(&RunLimits::new(&g.flag).with_feedback(fb))
                };
                (r, fb.end())
            }
            LocalMode::Tq {
                rules,
                quantum_ticks,
            } => loop {
                let limits = RunLimits::new(&g.flag)
                    .deadline_at(clock::ticks().saturating_add(quantum_ticks))
                    .clock_every(1);
                match fiber.resume(&limits) {
                    Resumed::Yielded(Cause::Deadline)
                        if !rules.yields_on_expiry(q.own_queued(me)) =>
                    {
                        q.note_renewal(me)
                    }
                    r => break (r, true),
                }
            },
        };
        let t1 = self.clock.now_ns();
        let total = q.add_served(job.token, t1 - t0);
        match r {
            Resumed::Yielded(_) => {
                // SAFETY: the token is still this worker's until the job is
                // requeued below.
                unsafe { g.suspended.put(job.token, fiber) };
                q.requeue_preempted(me, *job);
                Some(None)
            }
            Resumed::Finished(served) => {
                q.clear_served(job.token);
                if let (Some(a), false) = (average, long) {
                    a.record(total);
                }
                self.answer_served(g, job, served, t0, t1, total).map(Some)
            }
        }
    }

    /// Runs `job` on a fiber for one segment: resumes the request parked
    /// under its token, or starts it on a free slot. `None`: the dispatcher
    /// abandoned the job at the drain deadline (the worker exits without
    /// answering).
    fn serve_on_fiber<H: Handler + 'static>(
        &mut self,
        g: &GreenWorker<H>,
        job: &Job,
    ) -> Option<Done> {
        let mut fiber = match self.fiber_for(g, job) {
            Ok((f, _)) => f,
            Err(why) => return self.refuse_start(job, why),
        };
        // A flag raised before the segment begins is kept: the dispatcher
        // raised it for this job (it withdraws a stale one when it hands an
        // idle worker a job), which then yields at its first point.
        let t0 = self.clock.now_ns();
        g.segment.begin(t0);
        let r = fiber.resume(&RunLimits::new(&g.flag));
        let t1 = self.clock.now_ns();
        g.segment.end();
        // The segment is over: a raise for it that did not land is void (it
        // must not cut the next one). Lowered before the completion is
        // pushed, so a raise the dispatcher makes after seeing it is kept.
        g.flag.clear();
        match r {
            Resumed::Yielded(_) => {
                // SAFETY: as in `fiber_for`, the token is still this worker's.
                unsafe { g.suspended.put(job.token, fiber) };
                Some(Done {
                    preempted: true,
                    ..finished(job.token, &Ok(()), t0, t1)
                })
            }
            Resumed::Finished(served) => self.answer_served(g, job, served, t0, t1, t1 - t0),
        }
    }
}
