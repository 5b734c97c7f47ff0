//! Pre-allocated packet buffers, one per dispatcher slot: the datapath receives
//! straight into them, the worker reads its request from the same buffer and
//! rewrites its header in place for the response. Nothing is copied between the
//! kernel's receive and the worker's send but the response body.
//!
//! Ownership of a buffer follows its token: the dispatcher owns free and queued
//! tokens, a worker owns the token of the job it runs, from the job ring's pop to
//! the completion ring's push. The rings' release/acquire ordering publishes the
//! buffer's contents with the token.

use std::cell::UnsafeCell;

use crate::datapath::PeerAddr;

/// Largest datagram a buffer holds; longer ones are truncated by the kernel and
/// then fail the protocol's length check (BAD_REQUEST).
pub const PACKET_BYTES: usize = 2048;

/// One received datagram and where it came from.
#[repr(C, align(64))]
pub struct Packet {
    /// The sender.
    pub peer: PeerAddr,
    /// Bytes received (at most [`PACKET_BYTES`]).
    pub len: usize,
    /// The datagram.
    pub data: [u8; PACKET_BYTES],
}

impl Packet {
    /// The received bytes.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        &self.data[..self.len.min(PACKET_BYTES)]
    }
}

/// A fixed set of packet buffers indexed by token.
pub struct PacketPool {
    packets: Box<[UnsafeCell<Packet>]>,
}

// SAFETY: a packet is only reached through `get`/`get_mut`, whose callers promise
// to own the token (module docs): no two threads touch one packet at a time, and
// the hand-offs between owners go through release/acquire rings.
unsafe impl Sync for PacketPool {}

impl PacketPool {
    /// `n` zeroed buffers (allocated lazily by the OS: untouched pages cost
    /// nothing).
    pub fn new(n: usize) -> Self {
        let zeroed = Box::<[UnsafeCell<Packet>]>::new_zeroed_slice(n);
        // SAFETY: Packet is plain data (integers, byte arrays and a
        // sockaddr_storage), for which all-zero bytes are a valid value, and
        // UnsafeCell<T> has T's layout.
        let packets = unsafe { zeroed.assume_init() };
        Self { packets }
    }

    /// The packet of `token`.
    ///
    /// # Safety
    /// The calling thread owns `token` (no other thread accesses this packet
    /// until ownership is handed over through a ring).
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn get_mut(&self, token: u32) -> &mut Packet {
        // SAFETY: exclusive by the caller's ownership of the token.
        unsafe { &mut *self.packets[token as usize].get() }
    }

    /// Raw pointer to the packet of `token` (for the datapath's batched receive).
    #[inline]
    pub fn as_ptr(&self, token: u32) -> *mut Packet {
        self.packets[token as usize].get()
    }
}
