//! Blocking commands (Redis's BLPOP, BRPOP, BLMOVE, BRPOPLPUSH) without a
//! blocked worker: a command that finds nothing to take answers with a
//! *block reply* instead of waiting, and the front end parks the connection
//! (its later commands wait behind it, as Redis's), keeps the command, and
//! admits it again as a new request, scheduled like any other, when a
//! write may have given it something ([`Protocol::wake_generation`]
//! changed), or answers the timeout reply at its deadline. A parked
//! connection holds no worker, no lock and no request slot.
//!
//! This module is the contract between the two sides: what a block reply
//! holds and how it reads. It must not know sockets or commands.
//!
//! [`Protocol::wake_generation`]: crate::Protocol::wake_generation

use std::sync::atomic::{AtomicU64, Ordering};

/// How a block reply starts: no RESP or memcached reply starts with a NUL.
const MARKER: &[u8] = b"\0psp-block\0";

/// Writes, as seen by parked commands: bumped by every command that adds an
/// element a blocked command could take (list pushes and moves).
static WAKES: AtomicU64 = AtomicU64::new(0);

/// A write that may unblock a parked command happened.
pub fn wake() {
    WAKES.fetch_add(1, Ordering::Release);
}

/// The writes counted so far ([`wake`]).
pub fn wakes() -> u64 {
    WAKES.load(Ordering::Acquire)
}

/// A parked command, as its block reply says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blocked<'a> {
    /// When to give up (Unix time, ms); 0: never.
    pub deadline_ms: u64,
    /// The reply at the deadline (Redis's null).
    pub timeout_reply: &'a [u8],
    /// The command, to run again.
    pub request: &'a [u8],
}

/// Appends the block reply for `request` to `out`.
pub fn write(out: &mut Vec<u8>, deadline_ms: u64, timeout_reply: &[u8], request: &[u8]) {
    out.extend_from_slice(MARKER);
    out.extend_from_slice(&deadline_ms.to_le_bytes());
    out.extend_from_slice(&(timeout_reply.len() as u32).to_le_bytes());
    out.extend_from_slice(timeout_reply);
    out.extend_from_slice(request);
}

/// The parked command in `reply`, if it is a block reply.
pub fn read(reply: &[u8]) -> Option<Blocked<'_>> {
    let rest = reply.strip_prefix(MARKER)?;
    let deadline_ms = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?);
    let len = u32::from_le_bytes(rest.get(8..12)?.try_into().ok()?) as usize;
    let timeout_reply = rest.get(12..12 + len)?;
    let request = rest.get(12 + len..)?;
    Some(Blocked {
        deadline_ms,
        timeout_reply,
        request,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_reply_reads_back_and_no_other_reply_is_one() {
        let mut out = Vec::new();
        write(&mut out, 1_234, b"*-1\r\n", b"*3\r\n$5\r\nBLPOP\r\n");
        assert_eq!(
            read(&out),
            Some(Blocked {
                deadline_ms: 1_234,
                timeout_reply: b"*-1\r\n",
                request: b"*3\r\n$5\r\nBLPOP\r\n",
            })
        );
        for other in [&b"*-1\r\n"[..], b"+OK\r\n", b"", b"\0psp-block\0\x01"] {
            assert_eq!(read(other), None);
        }
    }
}
