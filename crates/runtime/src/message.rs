//! What the runtime's parts hand each other: the request a front end admits
//! ([`Slot`]), the job a worker takes ([`Job`]), the completion it hands back
//! ([`Done`]), the outcome counters ([`RequestCounts`]) and why a run could not
//! start ([`RuntimeError`]).
//!
//! This module is the bottom of the crate: it must import nothing else from
//! it, so that every other module can use these types without an import
//! circle. Plain data only: no behaviour beyond building one from another.

use psp_core::{Request, TypeId};

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
    /// Requests in the body (1, or several consecutive ones of one TCP
    /// connection, run as one job: [`Slot::count`]).
    pub count: u16,
    /// The latest time (the run's one clock) at which the job may start
    /// ([`Slot::deadline_ns`]); a worker that takes it later answers it
    /// OVERLOADED without running it. [`NO_DEADLINE`]: none.
    pub deadline_ns: u64,
}

/// No deadline: the job starts whenever its turn comes.
pub const NO_DEADLINE: u64 = u64::MAX;

/// A completion handed back to the dispatcher.
#[derive(Debug, Clone, Copy)]
pub struct Done {
    /// The job's token.
    pub token: u32,
    /// Whether the handler succeeded.
    pub ok: bool,
    /// Whether the handler refused the request's body
    /// ([`HandlerError::BadBody`](crate::HandlerError::BadBody); then `ok` is
    /// false).
    pub refused: bool,
    /// Handler time.
    pub service_ns: u64,
    /// When the handler returned (the run's one clock).
    pub finished_ns: u64,
    /// Whether the answer went out (the `JobIo` could send it).
    pub sent: bool,
    /// The request yielded at a preemption point and waits, parked under its
    /// token, to be dispatched again (nothing was answered; `service_ns` is
    /// the segment's run time).
    pub preempted: bool,
    /// The request never started: no request slot or fiber stack was free
    /// (answered HANDLER_ERROR; `ok` is false).
    pub no_fiber: bool,
    /// Of a job of several requests ([`Job::count`]), those answered
    /// BAD_REQUEST and those answered HANDLER_ERROR (`ok` and `refused` then
    /// say only whether any failed, and whether the first was a bad body); 0
    /// for a job of one request.
    pub failed_in_job: (u16, u16),
    /// The job was not run: its turn came after its deadline
    /// ([`Job::deadline_ns`]), and each of its requests was answered
    /// OVERLOADED (`ok` is false, `service_ns` is 0).
    pub expired: bool,
}

/// A request's state while it is queued or running.
#[derive(Debug, Clone, Copy)]
pub struct Slot {
    /// The request as the policy sees it.
    pub req: Request,
    /// The type the request really is (differs from `req.type_id` under a
    /// misclassifying classifier); counters and latency are kept under it.
    pub true_type: TypeId,
    /// When the request was due (generator) or received (network), on the run's
    /// one clock: latency starts here.
    pub scheduled_ns: u64,
    /// Whether its outcome is measured (false during the warm-up).
    pub measured: bool,
    /// Body length (the body is in the front end's pool, under the token).
    pub len: u16,
    /// Requests the body carries, in order (1 but for a TCP connection's
    /// pipeline: consecutive commands of one type run as one job). The
    /// policy schedules and profiles the job; the counters and latencies
    /// count each request.
    pub count: u16,
    /// The latest time (the run's one clock) at which the request may start:
    /// past it, the client has given up or the answer is worthless, and the
    /// request is answered OVERLOADED instead of served late. A front end
    /// sets it from what the client says ([`NO_DEADLINE`]: nothing);
    /// admission lowers it to the type's queueing bound
    /// ([`crate::RuntimeConfig::max_wait`]).
    pub deadline_ns: u64,
}

impl Slot {
    /// The job that hands this request to a worker.
    #[inline]
    pub fn job(&self) -> Job {
        Job {
            token: self.req.token,
            type_id: self.req.type_id,
            len: self.len,
            count: self.count,
            deadline_ns: self.deadline_ns,
        }
    }

    /// An empty slot.
    pub const BLANK: Slot = Slot {
        req: Request {
            id: 0,
            token: 0,
            type_id: 0,
            flow: 0,
            arrival_ns: 0,
        },
        true_type: 0,
        scheduled_ns: 0,
        measured: false,
        len: 0,
        count: 1,
        deadline_ns: NO_DEADLINE,
    };
}

/// What became of the valid requests the dispatcher saw. Every one ends in
/// exactly one outcome: `arrived = shed + completed + stranded` once the run is
/// over (`admitted = completed + expired + stranded`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestCounts {
    /// Valid requests offered to the dispatcher (generated, or received and
    /// parsed as a request of a registered type), warm-up included.
    pub arrived: u64,
    /// Refused before running: no free slot or a full queue (the network front
    /// end answers them OVERLOADED or, past its reply budget, sheds them
    /// unanswered), or admitted and expired (below).
    pub shed: u64,
    /// Of `shed`, those admitted whose turn came after their deadline (their
    /// type's queueing bound, [`crate::RuntimeConfig::max_wait`]): answered
    /// OVERLOADED by the worker, never run.
    pub expired: u64,
    /// Taken by the policy (queued, then run).
    pub admitted: u64,
    /// Run and answered: the handler returned, with success or an error.
    pub completed: u64,
    /// Of `completed`, those whose handler failed (answered HANDLER_ERROR).
    pub handler_errors: u64,
    /// Of `handler_errors`, those that never started: a preemptive run had
    /// no request slot or fiber stack free for them (every slot held by a
    /// started, unfinished request).
    pub no_fiber: u64,
    /// Of `completed`, those whose body the application refused (answered
    /// BAD_REQUEST).
    pub bad_bodies: u64,
    /// Of `completed`, those whose answer could not be sent (the OS refused
    /// it): the client sees no answer.
    pub unsent: u64,
    /// Admitted but neither run nor answered by the drain deadline; never
    /// answered afterwards.
    pub stranded: u64,
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
