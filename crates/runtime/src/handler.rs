//! The application interface: a handler with per-worker state that serves one
//! request (given as a [`RequestContext`]) and writes its response into a
//! reusable buffer; the encoder of generated request bodies; and the synthetic
//! application, which spins for the service time carried in the request.

use psp_core::TypeId;

use crate::clock::Spinner;

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
    /// The worker serving the request.
    pub worker: usize,
}

/// An application: one instance per worker (its state is the worker's own;
/// state shared between workers, such as a database, sits behind an `Arc`).
pub trait Handler: Send {
    /// Serves one request.
    ///
    /// # Errors
    /// When the request cannot be served; the worker answers it with the error
    /// and goes on.
    fn handle(&mut self, ctx: &mut RequestContext<'_>) -> Result<(), HandlerError>;
}

impl<H: Handler + ?Sized> Handler for Box<H> {
    #[inline]
    fn handle(&mut self, ctx: &mut RequestContext<'_>) -> Result<(), HandlerError> {
        (**self).handle(ctx)
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

/// Busy-spins for the service time in the payload (at most its cap); responds
/// with the 8-byte service time it spun.
#[derive(Debug, Clone, Copy)]
pub struct SpinHandler {
    spinner: Spinner,
    max_ns: u64,
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
        Self { spinner, max_ns }
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
        self.spinner.spin_ns(ns);
        ctx.response.extend_from_slice(&ns.to_le_bytes());
        Ok(())
    }
}
