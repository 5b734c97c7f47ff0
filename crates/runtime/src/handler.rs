//! The application interface: a handler with per-worker state that serves one
//! request and writes its response into a reusable buffer; and the synthetic
//! handler that spins for the service time carried in the request.

use psp_core::TypeId;

use crate::clock::Spinner;

/// Why a handler could not serve a request (reported as HANDLER_ERROR).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("handler error: {0}")]
pub struct HandlerError(pub &'static str);

/// An application: one instance per worker (its state is the worker's own).
pub trait Handler: Send {
    /// Serves one request of `type_id` with `payload`, writing the response into
    /// `response` (empty on entry, reused across requests: do not shrink it).
    ///
    /// # Errors
    /// When the request cannot be served; the worker reports it and goes on.
    fn handle(
        &mut self,
        type_id: TypeId,
        payload: &[u8],
        response: &mut Vec<u8>,
    ) -> Result<(), HandlerError>;
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
    fn handle(
        &mut self,
        _type_id: TypeId,
        payload: &[u8],
        response: &mut Vec<u8>,
    ) -> Result<(), HandlerError> {
        let ns = synthetic::service_ns(payload)
            .ok_or(HandlerError("synthetic payload shorter than 16 bytes"))?;
        if ns > self.max_ns {
            return Err(HandlerError("service time above the server's cap"));
        }
        self.spinner.spin_ns(ns);
        response.extend_from_slice(&ns.to_le_bytes());
        Ok(())
    }
}
