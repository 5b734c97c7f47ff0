//! The primitives of the executors' hand-written concurrent cells (SYNERGY's
//! [`Feedback`](crate::green::Feedback), the single-writer [`Counter`], the
//! [`SuspendedFibers`](crate::preempt::SuspendedFibers) hand-over): std's, or
//! loom's models of them under `--cfg loom`, so that `tests/loom_cells.rs`
//! checks this very code (docs/verification.md). The wake-up protocol keeps
//! its own shim in `idle.rs` (it also needs park/unpark and an eventfd).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::atomic::Ordering;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64};

/// A cell whose accesses the caller orders (std's `UnsafeCell`); under loom,
/// loom's, which reports two accesses that no happens-before orders.
#[cfg(not(loom))]
#[derive(Debug, Default)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    /// Runs `f` on a pointer to the value (loom's API, so both builds share
    /// the callers).
    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// A counter with one writer at a time: a load and a store, no
/// read-modify-write (no locked instruction on a worker's hot path). The
/// writer may change hands (a token's run time follows the token from worker
/// to worker) only through a release/acquire hand-over, which orders the last
/// writer's store before the next one's load; readers may read it any time
/// and see one of its values, never one that goes backwards.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// A counter at zero.
    pub fn new() -> Self {
        Self(AtomicU64::new(0))
    }

    /// Adds `n` (the writer only); returns the new total.
    #[inline]
    pub fn add(&self, n: u64) -> u64 {
        let total = self.0.load(Ordering::Relaxed) + n;
        self.0.store(total, Ordering::Relaxed);
        total
    }

    /// Raises the value to `v` if it is lower (the writer only): a maximum.
    #[inline]
    pub fn raise_to(&self, v: u64) {
        if v > self.0.load(Ordering::Relaxed) {
            self.0.store(v, Ordering::Relaxed);
        }
    }

    /// Back to zero (the writer only).
    #[inline]
    pub fn reset(&self) {
        self.0.store(0, Ordering::Relaxed);
    }

    /// The count so far (any thread).
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}
