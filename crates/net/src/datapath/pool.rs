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
//! A buffer is reached only through its [`PacketToken`], a move-only value:
//! whoever holds the token owns the buffer, so [`PacketPool::get_mut`] needs
//! no `unsafe` at the call site. The dispatcher holds free and queued tokens,
//! a worker the token of the job it runs, from the pop of its job (job ring
//! or worker queue) to the completion ring's push. Only where a token
//! crosses threads (the runtime's rings carry slot indices) is it a `u32`:
//! [`PacketToken::into_raw`] on one side, [`PacketToken::from_raw`] right
//! after the pop on the other, whose `unsafe` states that the ring handed
//! the slot over. The rings' release/acquire ordering publishes the
//! buffer's contents with the token.
//!
//! What this module must not do: allocate or lock per packet (a token is a
//! `u32`; a [`TokenBatch`] lives on the stack).

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

    /// Gives the packet UMEM frame `frame` to hold while its datagram stays
    /// in the packet's own buffer (AF_XDP, before the first receive).
    #[inline]
    pub fn hold_frame(&mut self, frame: u64) {
        self.frame = frame;
        self.frame_data = std::ptr::null_mut();
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

/// The right to one request slot's buffers, as the dispatcher's core hands
/// it out ([`psp_runtime::pool::SlotToken`]): its packet here, and whatever
/// else a front end keeps per slot (the TCP front end's `TcpSlots`).
pub use psp_runtime::pool::SlotToken as PacketToken;

/// The packet buffers, one per dispatcher slot, each reached through its
/// slot's [`PacketToken`] (over the runtime's token-indexed pool).
pub struct PacketPool {
    slots: TokenPool<Packet>,
}

impl PacketPool {
    /// `n` zeroed packets (allocated lazily by the OS).
    pub fn new(n: usize) -> Self {
        Self {
            slots: TokenPool::new(n),
        }
    }

    /// Packets in the pool.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether the pool has no packet.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The packet of `token`, to read.
    #[inline]
    pub fn get<'a>(&'a self, token: &'a PacketToken) -> &'a Packet {
        // SAFETY: the token is unique (`PacketToken::from_raw`'s contract)
        // and borrowed shared for as long as this reference lives: nobody
        // holds, or can make, a `&mut` to this packet meanwhile.
        unsafe { self.slots.get(token.index()) }
    }

    /// The packet of `token`.
    #[inline]
    pub fn get_mut<'a>(&'a self, token: &'a mut PacketToken) -> &'a mut Packet {
        // SAFETY: the token is unique and borrowed exclusively for as long
        // as this reference lives: no other reference to this packet exists
        // or can be made meanwhile.
        unsafe { self.slots.get_mut(token.index()) }
    }

    /// A raw pointer to the packet of `token`, for a batched receive that
    /// fills several packets' fields without making references. Writing
    /// through it is the caller's `unsafe`, sound while it holds `token`.
    #[inline]
    pub fn as_ptr(&self, token: &mut PacketToken) -> *mut Packet {
        self.slots.as_ptr(token.index())
    }

    /// Every packet with its slot's index, while the pool is not shared
    /// (the AF_XDP datapath gives each its first frame).
    pub fn each_mut(&mut self) -> impl Iterator<Item = (u32, &mut Packet)> {
        let slots = &self.slots;
        (0..slots.len() as u32).map(move |t| {
            // SAFETY: `&mut self` excludes every token's access while this
            // iterator lives, and each index comes once: the references are
            // disjoint.
            (t, unsafe { &mut *slots.as_ptr(t) })
        })
    }
}

/// Up to `N` tokens held at once, on the stack (a receive batch, a chunk
/// of error replies): the slots, in the order pushed.
pub struct TokenBatch<const N: usize> {
    /// The tokens' indices; the first `len` are owned by the batch.
    raw: [u32; N],
    len: usize,
}

impl<const N: usize> Default for TokenBatch<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> TokenBatch<N> {
    /// An empty batch.
    #[inline]
    pub const fn new() -> Self {
        Self {
            raw: [0; N],
            len: 0,
        }
    }

    /// Tokens held.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch holds none.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the batch holds `N`.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.len == N
    }

    /// Adds `token` at the end.
    ///
    /// # Panics
    /// If the batch is full.
    #[inline]
    pub fn push(&mut self, token: PacketToken) {
        assert!(self.len < N, "a token batch holds {N}");
        self.raw[self.len] = token.into_raw();
        self.len += 1;
    }

    /// Takes the last token.
    #[inline]
    pub fn pop(&mut self) -> Option<PacketToken> {
        self.len = self.len.checked_sub(1)?;
        // SAFETY: the batch owned this slot (pushed as a token, taken out once).
        Some(unsafe { PacketToken::from_raw(self.raw[self.len]) })
    }

    /// The tokens held, in order (to receive into, to borrow each packet).
    #[inline]
    pub fn tokens_mut(&mut self) -> &mut [PacketToken] {
        let held: *mut [u32] = &raw mut self.raw[..self.len];
        // SAFETY: `PacketToken` is a transparent `u32`, and the batch owns
        // these slots: the exclusive borrow of the batch lends their tokens.
        unsafe { &mut *(held as *mut [PacketToken]) }
    }

    /// Takes every token out, in order; the batch is empty after.
    #[inline]
    pub fn drain(&mut self) -> impl Iterator<Item = PacketToken> + '_ {
        let n = std::mem::take(&mut self.len);
        self.raw[..n].iter().map(|&t| {
            // SAFETY: the batch owned these slots and gives each out once
            // (its length is already 0).
            unsafe { PacketToken::from_raw(t) }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{self, MAX_REQUEST_BODY, ParseError};

    #[test]
    fn a_datagram_longer_than_the_protocol_allows_never_parses() {
        let pool = PacketPool::new(1);
        // SAFETY: the pool is local to this test: this thread owns its slot.
        let mut token = unsafe { PacketToken::from_raw(0) };
        let p = pool.get_mut(&mut token);
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

    #[test]
    fn a_token_batch_gives_its_tokens_back_in_order() {
        let pool = PacketPool::new(4);
        let mut batch = TokenBatch::<3>::new();
        for t in 0..3 {
            // SAFETY: the pool is local to this test: each slot's token is
            // made once.
            batch.push(unsafe { PacketToken::from_raw(t) });
        }
        assert!(batch.is_full());
        for (i, t) in batch.tokens_mut().iter_mut().enumerate() {
            pool.get_mut(t).len = 10 + i;
        }
        let last = batch.pop().expect("three held");
        assert_eq!((last.index(), pool.get(&last).len), (2, 12));
        let rest: Vec<u32> = batch.drain().map(PacketToken::into_raw).collect();
        assert_eq!(rest, [0, 1]);
        assert!(batch.is_empty() && batch.pop().is_none());
    }
}
