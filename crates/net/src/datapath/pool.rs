//! Pre-allocated packet buffers, one per dispatcher slot: the datapath receives
//! straight into them, the worker reads its request from the same buffer and
//! rewrites its header in place for the response. Nothing is copied between the
//! kernel's receive and the worker's send but the response body.
//!
//! A packet's bytes are its own buffer (kernel UDP: `recvmmsg` writes there)
//! or, under AF_XDP, the UMEM frame the kernel received it into: the
//! datapath points the packet at that frame ([`Packet::set_frame`]), so the
//! request is read where the kernel wrote it.
//!
//! Ownership of a buffer follows its token ([`psp_runtime::pool`]): the
//! dispatcher owns free and queued tokens, a worker owns the token of the job it
//! runs, from the pop of its job (job ring or worker queue) to the completion
//! ring's push. Their release/acquire ordering publishes the buffer's contents
//! with the token.

use psp_runtime::pool::{TokenPool, ZeroInit};

use crate::datapath::PeerAddr;
use crate::protocol::MAX_REQUEST_LEN;

/// Bytes a buffer holds: one more than the longest valid request, so that a
/// datagram too long for the protocol can never look valid. One that fits the
/// buffer is longer than [`MAX_REQUEST_LEN`] as received; one that does not is
/// cut by the kernel to the buffer's size, still longer. Either way
/// `protocol::parse_request(packet.bytes())` refuses it (BAD_REQUEST, with the
/// request's id: the header is there), and [`Packet::truncated`] tells which.
pub const PACKET_BYTES: usize = MAX_REQUEST_LEN + 1;

/// One received datagram and where it came from.
#[repr(C, align(64))]
pub struct Packet {
    /// The sender.
    pub peer: PeerAddr,
    /// The datagram's length as sent; more than [`PACKET_BYTES`] when it did not
    /// fit (then only the first [`PACKET_BYTES`] bytes are in `data`).
    pub len: usize,
    /// Where the datagram is, when not in `own`: a UMEM frame of at least
    /// [`PACKET_BYTES`] bytes from here (null: `own`).
    frame_data: *mut u8,
    /// The UMEM frame this packet's token holds (AF_XDP; 0 otherwise).
    pub frame: u64,
    /// The TCP connection the request came on, its generation (a reused
    /// connection slot has another) and its place in the connection's
    /// request order (TCP front end; unused otherwise).
    pub conn: u32,
    /// See `conn`.
    pub generation: u32,
    /// See `conn`.
    pub seq: u64,
    /// The packet's own buffer (the datagram's first [`PACKET_BYTES`] bytes).
    own: [u8; PACKET_BYTES],
}

// SAFETY: `frame_data` points into a UMEM that outlives the pool's users; the
// packet, its own buffer and its frame are accessed only by the thread that
// owns the packet's token (see the module doc), like every other field.
unsafe impl Send for Packet {}
// SAFETY: as above.
unsafe impl Sync for Packet {}

impl Packet {
    /// The received bytes: the whole datagram, or its first [`PACKET_BYTES`]
    /// bytes when it was truncated.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        &self.data()[..self.len.min(PACKET_BYTES)]
    }

    /// The buffer the datagram is in ([`PACKET_BYTES`] bytes).
    #[inline]
    pub fn data(&self) -> &[u8; PACKET_BYTES] {
        if self.frame_data.is_null() {
            &self.own
        } else {
            // SAFETY: `set_frame`'s caller guaranteed PACKET_BYTES bytes
            // there, owned with this packet's token.
            unsafe { &*self.frame_data.cast::<[u8; PACKET_BYTES]>() }
        }
    }

    /// The buffer the datagram is in, writable (a response header is
    /// rewritten in place).
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8; PACKET_BYTES] {
        if self.frame_data.is_null() {
            &mut self.own
        } else {
            // SAFETY: as in `data`; `&mut self` is the only access.
            unsafe { &mut *self.frame_data.cast::<[u8; PACKET_BYTES]>() }
        }
    }

    /// Where the kernel receives into the packet's own buffer
    /// ([`PACKET_BYTES`] bytes), taken without creating a reference.
    ///
    /// # Safety
    /// `p` points to a live packet.
    #[inline]
    pub unsafe fn own_buffer(p: *mut Packet) -> *mut u8 {
        // SAFETY: the caller guarantees `p` is live; taking a field's address
        // creates no reference.
        unsafe { (&raw mut (*p).own).cast() }
    }

    /// Points the packet at UMEM frame `frame`, whose datagram starts at
    /// `data` (null: back to the packet's own buffer).
    ///
    /// # Safety
    /// `data` is null or valid for reads and writes of [`PACKET_BYTES`]
    /// bytes for as long as the packet points there, and the memory belongs
    /// to whoever owns this packet's token.
    #[inline]
    pub unsafe fn set_frame(&mut self, frame: u64, data: *mut u8) {
        self.frame = frame;
        self.frame_data = data;
    }

    /// Whether the datagram was longer than the buffer (and cut by the kernel).
    #[inline]
    pub fn truncated(&self) -> bool {
        self.len > PACKET_BYTES
    }
}

// SAFETY: a packet is plain data (integers, byte arrays and a
// sockaddr_storage): all-zero bytes are a valid value.
unsafe impl ZeroInit for Packet {}

/// The packet buffers, one per dispatcher slot, indexed by token (the
/// runtime's token-owned pool).
pub type PacketPool = TokenPool<Packet>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{self, MAX_REQUEST_BODY, ParseError};

    #[test]
    fn a_datagram_longer_than_the_protocol_allows_never_parses() {
        let pool = PacketPool::new(1);
        // SAFETY: the pool is local to this test: this thread owns every token.
        let p = unsafe { pool.get_mut(0) };
        let mut dgram = Vec::new();
        protocol::encode_request(&mut dgram, 0, 77, &[1; MAX_REQUEST_BODY]);
        // What the datapath leaves in the packet for a datagram of `len` bytes
        // whose header claims the largest valid body.
        for len in [
            MAX_REQUEST_LEN,
            MAX_REQUEST_LEN + 1,
            PACKET_BYTES + 1,
            4096,
            65_507,
        ] {
            dgram.resize(len, 2);
            let stored = len.min(PACKET_BYTES);
            p.data_mut()[..stored].copy_from_slice(&dgram[..stored]);
            p.len = len;
            assert_eq!(p.truncated(), len > PACKET_BYTES, "{len}");
            assert_eq!(p.bytes().len(), stored);
            let parsed = protocol::parse_request(p.bytes());
            if len == MAX_REQUEST_LEN {
                assert_eq!(parsed.map(|h| h.id), Ok(77));
            } else {
                assert_eq!(parsed, Err(ParseError::TooLong(stored)), "{len}");
            }
        }
    }
}
