//! Pre-allocated per-request buffers indexed by the dispatcher's request token:
//! a front end writes a request into the buffer of a token it owns, the worker
//! that runs the request reads it (and may rewrite it) through the same token.
//! Nothing is copied between the front end and the handler, and the job ring
//! carries only the token.
//!
//! Ownership of a buffer follows its token: the dispatcher (front end) owns
//! free and queued tokens, a worker owns the token of the job it runs, from the
//! pop of its job (from its job ring, or from a worker queue of the
//! decentralized executor: each job is popped once) to the completion ring's
//! push. The rings' and queues' release/acquire ordering publishes the
//! buffer's contents with the token.

use std::cell::UnsafeCell;

/// The right to one request slot's buffers: in every pool indexed by the
/// dispatcher's tokens (the generator's bodies, the network's packets and
/// whatever else a front end keeps per slot).
/// Neither `Copy` nor `Clone`: made when a slot is taken (from the
/// dispatcher's free slots, or off a ring that hands one over), consumed
/// when it is handed on (admitted, put back, pushed onto a ring). Holding it
/// is what makes access to the slot's buffers exclusive.
///
/// ```compile_fail
/// // A token cannot be copied: two holders of one slot cannot exist.
/// fn copies<T: Clone>() {}
/// copies::<psp_runtime::pool::SlotToken>();
/// ```
#[repr(transparent)]
#[must_use = "a dropped token loses its request slot"]
pub struct SlotToken(u32);

impl SlotToken {
    /// The token of slot `raw`, as a ring or the dispatcher's free slots
    /// hand it over.
    ///
    /// # Safety
    /// The caller owns slot `raw`: no other `SlotToken` for it exists and
    /// no other thread touches its buffers, in every pool the token is used
    /// with, until this token is consumed.
    #[inline]
    pub unsafe fn from_raw(raw: u32) -> Self {
        Self(raw)
    }

    /// The token of slot `*raw`, borrowed where it stays (a worker's job,
    /// which the runtime hands back with its completion).
    ///
    /// # Safety
    /// As for [`from_raw`](Self::from_raw), for as long as the borrow lasts.
    #[inline]
    pub unsafe fn from_raw_ref(raw: &u32) -> &Self {
        // SAFETY: `SlotToken` is a transparent `u32`; the caller's
        // ownership of the slot is what the token stands for.
        unsafe { &*(raw as *const u32).cast::<Self>() }
    }

    /// Hands the slot over (onto a ring, to the dispatcher's core): the
    /// token is consumed, its index travels.
    #[inline]
    pub fn into_raw(self) -> u32 {
        self.0
    }

    /// The slot's index (a key for per-slot state; grants no access).
    #[inline]
    pub fn index(&self) -> u32 {
        self.0
    }
}

impl std::fmt::Debug for SlotToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SlotToken({})", self.0)
    }
}

/// A type for which all-zero bytes are a valid value (plain integers and byte
/// arrays), so that a pool of them can be allocated zeroed: untouched pages
/// then cost nothing.
///
/// # Safety
/// All-zero bytes must be a valid value of the type.
pub unsafe trait ZeroInit: Sized {}

/// A fixed set of buffers indexed by token.
pub struct TokenPool<T: ZeroInit> {
    items: Box<[UnsafeCell<T>]>,
}

// SAFETY: a buffer is only reached through `get_mut`/`as_ptr`, whose callers
// promise to own the token (module docs): no two threads touch one buffer at a
// time, and the hand-offs between owners go through release/acquire rings.
unsafe impl<T: ZeroInit + Send> Sync for TokenPool<T> {}

impl<T: ZeroInit> TokenPool<T> {
    /// `n` zeroed buffers (allocated lazily by the OS).
    pub fn new(n: usize) -> Self {
        let zeroed = Box::<[UnsafeCell<T>]>::new_zeroed_slice(n);
        // SAFETY: `T: ZeroInit` promises all-zero bytes are a valid `T`, and
        // `UnsafeCell<T>` has `T`'s layout.
        let items = unsafe { zeroed.assume_init() };
        Self { items }
    }

    /// Buffers in the pool.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the pool has no buffer.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The buffer of `token`, to read.
    ///
    /// # Safety
    /// The calling thread owns `token` (no other thread accesses this buffer
    /// until ownership is handed over through a ring).
    #[inline]
    pub unsafe fn get(&self, token: u32) -> &T {
        // SAFETY: no writer but the owner, which is the caller.
        unsafe { &*self.items[token as usize].get() }
    }

    /// The buffer of `token`.
    ///
    /// # Safety
    /// The calling thread owns `token` (no other thread accesses this buffer
    /// until ownership is handed over through a ring), and holds no other
    /// reference to this buffer.
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn get_mut(&self, token: u32) -> &mut T {
        // SAFETY: exclusive by the caller's ownership of the token.
        unsafe { &mut *self.items[token as usize].get() }
    }

    /// Raw pointer to the buffer of `token` (for batched receives that fill
    /// several buffers at once).
    #[inline]
    pub fn as_ptr(&self, token: u32) -> *mut T {
        self.items[token as usize].get()
    }
}

/// Longest body the in-process generator can hand a worker: an application's
/// generated requests must fit (the largest, a TPC-C NewOrder with 15 lines,
/// takes about 100 bytes).
pub const MAX_GENERATED_BODY: usize = 256;

/// One generated request's body, in the generator's pool.
#[repr(C, align(64))]
pub struct GeneratedBody {
    /// Bytes used.
    pub len: u16,
    /// The body (its first `len` bytes).
    pub data: [u8; MAX_GENERATED_BODY],
}

impl GeneratedBody {
    /// The body's bytes.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        &self.data[..usize::from(self.len).min(MAX_GENERATED_BODY)]
    }
}

// SAFETY: an integer and a byte array: all-zero bytes are a valid value (an
// empty body).
unsafe impl ZeroInit for GeneratedBody {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_pool_holds_empty_bodies() {
        let pool = TokenPool::<GeneratedBody>::new(3);
        assert_eq!(pool.len(), 3);
        // SAFETY: the pool is local to this test: this thread owns every token.
        let b = unsafe { pool.get_mut(2) };
        assert!(b.bytes().is_empty());
        b.data[..3].copy_from_slice(b"abc");
        b.len = 3;
        // SAFETY: as above; the previous borrow has ended.
        assert_eq!(unsafe { pool.get_mut(2) }.bytes(), b"abc");
    }
}
