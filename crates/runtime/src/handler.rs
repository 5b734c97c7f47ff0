//! The application interface: a handler with per-worker state that serves one
//! request (given as a [`RequestContext`]) and writes its response into a
//! reusable buffer; the encoder of generated request bodies; and the synthetic
//! application, which spins for the service time carried in the request.
//!
//! A request may run on a green thread ([`RequestFiber`](crate::RequestFiber)): then its handler's
//! [`RequestContext::preemption_point`]s can suspend it, and it may finish on
//! another worker's thread. Off a green thread the points cost a branch.

use psp_core::TypeId;

use crate::clock::Spinner;
use crate::point::{NoPreempt, Preemption};

/// Why a handler could not serve a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HandlerError {
    /// The request's body is not one this application accepts (malformed,
    /// oversized, an unknown operation, a missing field): the client's fault,
    /// answered BAD_REQUEST.
    #[error("bad request body: {0}")]
    BadBody(&'static str),
    /// The application failed to serve a well-formed request: answered
    /// HANDLER_ERROR.
    #[error("handler error: {0}")]
    Failed(&'static str),
}

/// What a handler gets for one request: the request, where its response goes,
/// and who serves it. A struct, so that later mechanisms (preemption points,
/// application feedback to the scheduler) extend it without changing every
/// application.
#[derive(Debug)]
pub struct RequestContext<'a> {
    /// The request's type (as classified; the index of the workload's type).
    pub type_id: TypeId,
    /// The request's body (the application's encoding, without the protocol
    /// header).
    pub body: &'a [u8],
    /// Where the response body goes: empty on entry, reused across requests
    /// (do not shrink it).
    pub response: &'a mut Vec<u8>,
    /// The worker serving the request (that started it, for a request on a
    /// green thread: a resumed one may run on another).
    pub worker: usize,
    /// The request's preemption points: inert unless it runs on a green
    /// thread ([`crate::green::RequestFiber`]).
    pub preempt: Preemption<'a>,
    /// Who sent it, for protocols with per-connection state (Redis's
    /// `MULTI`, `HELLO 3`): the front end's id of the connection, unique
    /// among those open, with the connection slot's index (from 1) in the
    /// high 32 bits; 0 when the front end has no connections (datagrams, the
    /// in-process generator). One connection has one request executing at
    /// a time, so its state is never used by two workers at once.
    pub session: u64,
}

impl<'a> RequestContext<'a> {
    /// The context of a request run to completion (no green thread: its
    /// preemption points do nothing).
    pub fn new(type_id: TypeId, body: &'a [u8], response: &'a mut Vec<u8>, worker: usize) -> Self {
        Self {
            type_id,
            body,
            response,
            worker,
            preempt: Preemption::none(),
            session: 0,
        }
    }

    /// The same context for a request of connection `session`
    /// ([`RequestContext::session`]).
    pub fn with_session(mut self, session: u64) -> Self {
        self.session = session;
        self
    }

    /// A preemption point ([`Preemption::point`]): call it inside long loops,
    /// where nothing tied to the thread (a lock guard, a thread-local) is
    /// held. Yields if the worker was asked to or the run's quantum is over;
    /// one branch when the request is not on a green thread.
    #[inline]
    pub fn preemption_point(&self) {
        self.preempt.point();
    }

    /// SYNERGY's `feedback_start()`: the application recognised a long
    /// request. From now on the request may be preempted: its worker's timer
    /// is armed with the worker's quantum. Inert unless the request runs on a
    /// green thread of the SYNERGY executor.
    #[inline]
    pub fn feedback_start(&self) {
        self.preempt.feedback_start();
    }

    /// SYNERGY's `feedback_finished()`: the long part is over (the timer is
    /// disarmed). Inert outside the SYNERGY executor.
    #[inline]
    pub fn feedback_finished(&self) {
        self.preempt.feedback_finished();
    }

    /// Defers preemption until the guard drops ([`Preemption::no_preempt`]).
    #[inline]
    pub fn no_preempt(&self) -> NoPreempt<'a> {
        self.preempt.no_preempt()
    }
}

/// An application: one instance per worker (its state is the worker's own;
/// state shared between workers, such as a database, sits behind an `Arc`),
/// or, when requests run on green threads, one per
/// [`crate::green::RequestSlot`] (a suspended request keeps its instance).
///
/// Across a preemption point a handler holds nothing tied to its thread (a
/// `MutexGuard`, a reference into a thread-local): the request may go on on
/// another thread. Such sections go inside [`RequestContext::no_preempt`].
pub trait Handler: Send {
    /// Serves one request.
    ///
    /// # Errors
    /// When the request cannot be served; the worker answers it with the error
    /// and goes on.
    fn handle(&mut self, ctx: &mut RequestContext<'_>) -> Result<(), HandlerError>;

    /// Whether this handler may run on a fiber and be preempted at its points
    /// (a preemptive policy's requests run so): it holds nothing tied to its
    /// thread across a preemption point outside a `no_preempt` section. The
    /// runtime refuses a preemptive policy with a handler that does not say
    /// so. Answer `true` only after checking every point the handler reaches.
    fn fiber_safe(&self) -> bool {
        false
    }
}

impl<H: Handler + ?Sized> Handler for Box<H> {
    #[inline]
    fn handle(&mut self, ctx: &mut RequestContext<'_>) -> Result<(), HandlerError> {
        (**self).handle(ctx)
    }

    fn fiber_safe(&self) -> bool {
        (**self).fiber_safe()
    }
}

/// What a front end serves: handlers made on demand, one per worker, or one
/// per request slot under a preemptive policy (instance indices then run past
/// the number of workers). The caller wires it to an application; front ends
/// know nothing of applications.
pub trait HandlerFactory: Send + Sync {
    /// The handler of instance `instance` (its own state; shared state
    /// behind an `Arc`).
    fn handler(&self, instance: usize) -> Box<dyn Handler>;
}

impl<F: Fn(usize) -> Box<dyn Handler> + Send + Sync> HandlerFactory for F {
    fn handler(&self, instance: usize) -> Box<dyn Handler> {
        self(instance)
    }
}

/// Writes the bodies of generated requests (the in-process generator's and the
/// load client's): one instance per generating thread, with its own random
/// state. `service_ns` is the service time the workload drew for the request
/// (the synthetic application spins for it; real applications ignore it).
pub trait BodyEncoder: Send {
    /// Appends the body of a request of `type_id` to `out` (empty on entry), at
    /// most [`crate::pool::MAX_GENERATED_BODY`] bytes.
    fn encode(&mut self, type_id: TypeId, service_ns: u64, out: &mut Vec<u8>);
}

/// Makes a load generator's [`BodyEncoder`] from a seed: what a client sends,
/// wired to an application by the caller (front ends and clients know
/// nothing of applications).
#[derive(Clone)]
pub struct EncoderSource(std::sync::Arc<MakeEncoder>);

/// What an [`EncoderSource`] calls: a seed to an encoder, or why not.
type MakeEncoder = dyn Fn(u64) -> Result<Box<dyn BodyEncoder>, String> + Send + Sync;

impl EncoderSource {
    /// The encoders `make` builds (its error: why it cannot, one line).
    pub fn new(
        make: impl Fn(u64) -> Result<Box<dyn BodyEncoder>, String> + Send + Sync + 'static,
    ) -> Self {
        Self(std::sync::Arc::new(make))
    }

    /// The synthetic application's encoder, whatever the seed.
    pub fn synthetic() -> Self {
        Self::new(|_| Ok(Box::new(SyntheticEncoder)))
    }

    /// An encoder seeded with `seed`.
    ///
    /// # Errors
    /// The application cannot encode this workload's types.
    pub fn make(&self, seed: u64) -> Result<Box<dyn BodyEncoder>, String> {
        (self.0)(seed)
    }
}

impl std::fmt::Debug for EncoderSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EncoderSource")
    }
}

/// The synthetic application's bodies: [`synthetic::encode`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SyntheticEncoder;

impl BodyEncoder for SyntheticEncoder {
    #[inline]
    fn encode(&mut self, type_id: TypeId, service_ns: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(&synthetic::encode(type_id, service_ns));
    }
}

/// The synthetic request payload of the in-process generator: type (u16 LE) at
/// offset 0, service time in ns (u64 LE) at offset 8.
pub mod synthetic {
    /// Bytes of a synthetic payload.
    pub const LEN: usize = 16;
    /// Offset of the type field (read by the header classifier).
    pub const TYPE_OFFSET: usize = 0;

    /// Encodes a synthetic request.
    pub fn encode(type_id: u16, service_ns: u64) -> [u8; LEN] {
        let mut p = [0u8; LEN];
        p[0..2].copy_from_slice(&type_id.to_le_bytes());
        p[8..16].copy_from_slice(&service_ns.to_le_bytes());
        p
    }

    /// The service time of a synthetic payload.
    pub fn service_ns(payload: &[u8]) -> Option<u64> {
        Some(u64::from_le_bytes(payload.get(8..16)?.try_into().ok()?))
    }
}

/// How often [`SpinHandler`] reaches a preemption point by default: every
/// microsecond of spinning.
pub const DEFAULT_SPIN_POINT_NS: u64 = 1_000;

/// Busy-spins for the service time in the payload (at most its cap); responds
/// with the 8-byte service time it spun. On a green thread it reaches a
/// preemption point every [`DEFAULT_SPIN_POINT_NS`] (configurable) of
/// spinning, and time spent suspended does not count as spun. With a
/// feedback threshold it declares requests at least that long to SYNERGY.
#[derive(Debug, Clone, Copy)]
pub struct SpinHandler {
    spinner: Spinner,
    max_ns: u64,
    point_every_ns: u64,
    feedback_ns: u64,
}

impl SpinHandler {
    /// A handler spinning with `spinner` (calibrate once, copy to every worker)
    /// for whatever the payload asks: for trusted, generated payloads.
    pub fn new(spinner: Spinner) -> Self {
        Self::with_cap(spinner, u64::MAX)
    }

    /// A handler that refuses (with an error, at once) payloads asking for more
    /// than `max_ns`: for payloads from the network.
    pub fn with_cap(spinner: Spinner, max_ns: u64) -> Self {
        Self {
            spinner,
            max_ns,
            point_every_ns: DEFAULT_SPIN_POINT_NS,
            feedback_ns: u64::MAX,
        }
    }

    /// Calls `feedback_start()` before spinning (and `feedback_finished()`
    /// after) when the requested service time is at least `ns` (SYNERGY's
    /// synthetic application: 10 µs); `u64::MAX` (the default): never.
    pub fn with_feedback_threshold(self, ns: u64) -> Self {
        Self {
            feedback_ns: ns,
            ..self
        }
    }

    /// Reaches a preemption point every `ns` of spinning (0: never) when the
    /// request runs on a green thread.
    pub fn with_point_interval(self, ns: u64) -> Self {
        Self {
            point_every_ns: ns,
            ..self
        }
    }
}

impl Handler for SpinHandler {
    #[inline]
    fn handle(&mut self, ctx: &mut RequestContext<'_>) -> Result<(), HandlerError> {
        let ns = synthetic::service_ns(ctx.body).ok_or(HandlerError::BadBody(
            "synthetic body shorter than 16 bytes",
        ))?;
        if ns > self.max_ns {
            return Err(HandlerError::Failed("service time above the server's cap"));
        }
        let p = ctx.preempt;
        let long = ns >= self.feedback_ns;
        if long {
            p.feedback_start();
        }
        if p.is_active() && self.point_every_ns > 0 {
            self.spinner.spin_ns_in_steps(ns, self.point_every_ns, || {
                let before = p.yields();
                p.point();
                p.yields() != before
            });
        } else {
            self.spinner.spin_ns(ns);
        }
        if long {
            p.feedback_finished();
        }
        ctx.response.extend_from_slice(&ns.to_le_bytes());
        Ok(())
    }

    /// Spinning holds nothing; its points are between spin steps.
    fn fiber_safe(&self) -> bool {
        true
    }
}
