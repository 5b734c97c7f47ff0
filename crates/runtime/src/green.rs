//! Green threads for preemptible requests: a request runs on a stackful
//! coroutine (`corosensei`) with a pooled stack, so that it can stop at a
//! *preemption point* of its handler, let the worker serve something else, and
//! go on later, on the same worker or another one.
//!
//! - [`StackPool`]: stacks mapped at start-up (with a guard page), reused from
//!   request to request; a new one is mapped only while preempted requests
//!   hold theirs, up to a bound; past it a start is refused and counted.
//! - [`RequestFiber`]: one request's coroutine. [`RequestFiber::resume`] runs it
//!   until it finishes ([`Resumed::Finished`]) or yields at a preemption point
//!   ([`Resumed::Yielded`]). A suspended fiber is `Send`: any worker may
//!   resume it. Dropping one unwinds its stack (its destructors run, on the
//!   dropping thread) and its stack goes back to the pool.
//! - [`RequestSlot`] and [`RequestFiber::serve`]: a [`Handler`] invocation on a
//!   fiber. The slot owns everything the request touches while it may be
//!   suspended: its handler instance, its body and its response buffer.
//! - The points themselves ([`Preemption`], the
//!   [`RequestContext::preempt`] field; [`PreemptFlag`]; [`NoPreempt`]) are
//!   [`crate::point`]'s: a point yields when the worker's flag was raised or
//!   the run's deadline passed, never inside a guard, and off a fiber it is
//!   one branch.
//!
//! # Design choices
//!
//! - **The request owns its state.** A suspended request keeps `&mut` borrows
//!   of its handler and buffers; another request may run on the same worker
//!   meanwhile, and the suspended one may finish on another worker. So the
//!   handler instance and the buffers move *into* the fiber (a [`RequestSlot`],
//!   by value, onto the coroutine's stack) and come back out when it finishes
//!   ([`Served`]). A worker keeps a few slots (one handler instance each, made
//!   at start-up like the per-worker one) and reuses them: no allocation per
//!   request. The request body is copied into the slot (a few hundred bytes,
//!   tens of ns) rather than borrowed from the front end's buffer: no lifetime
//!   contract has to span a suspension and a change of thread.
//! - **A coroutine per request on a pooled stack** rather than long-lived green
//!   threads looping over requests: creating one writes the closure onto the
//!   stack (no heap allocation), and every request starts from a clean stack.
//! - **The stack pool is shared** (a bounded lock-free queue): a fiber that
//!   started on one worker and finished on another returns its stack from
//!   there.
//! - **No signals.** Preemption is cooperative: a handler that never reaches a
//!   point runs to completion (correctly, only unpreempted).
//!
//! `docs/green-threads.md` has the measured costs (a switch, a start, a
//! point, the preemption latency).
//!
//! # What it must not do
//!
//! Code on a fiber must hold nothing tied to its thread across a preemption
//! point, because the rest of the request may run on another thread: no
//! reference into a thread-local, no `Rc` shared with one, no `MutexGuard` (a
//! lock is also a priority inversion while suspended), no thread-id-keyed
//! state. Such code goes inside a [`NoPreempt`] guard. That is the contract
//! of [`RequestFiber::new`] and [`RequestFiber::serve`], which are `unsafe` for
//! it. The points themselves hold no thread-local across a suspension.
//!
//! Which thread touches what: a fiber, its slot and its [`Preemption`] belong
//! to whichever thread holds the [`RequestFiber`] (ownership moves it); a
//! [`PreemptFlag`] is raised by any thread and read and cleared by its worker;
//! the pool is shared by all.
//!
//! # A worker's use
//!
//! ```
//! use std::time::Duration;
//! use psp_runtime::{RequestFiber, RequestSlot, Resumed, RunLimits, StackPool};
//! use psp_runtime::{PreemptFlag, SpinHandler, Spinner, handler::synthetic};
//!
//! // At start-up: the pool, the worker's flag, a few slots (one handler each).
//! let pool = StackPool::with_defaults().unwrap();
//! let flag = PreemptFlag::new();
//! let spinner = Spinner::calibrate(Duration::from_millis(10));
//! let mut slot = RequestSlot::new(SpinHandler::new(spinner), 256, 4096);
//!
//! // Per request: load the slot, start a fiber on it, run it a quantum.
//! slot.load(0, 0, &synthetic::encode(0, 20_000));
//! // SAFETY: the spin handler holds nothing tied to its thread.
//! let mut fiber = unsafe { RequestFiber::serve(&pool, slot) }.unwrap();
//! flag.clear();
//! let served = loop {
//!     // A 5 us quantum; the spin handler's points are 1 us apart: read the
//!     // clock at each.
//!     let quantum = RunLimits::new(&flag).quantum_ns(5_000, &spinner).clock_every(1);
//!     match fiber.resume(&quantum) {
//!         Resumed::Finished(served) => break served,
//!         // Preempted: the dispatcher would requeue `fiber` (any worker may
//!         // resume it) and run something else here meanwhile.
//!         Resumed::Yielded(_cause) => {}
//!     }
//! };
//! assert!(fiber.yields() >= 1);
//! assert_eq!(served.slot.response, 20_000u64.to_le_bytes());
//! let slot = served.slot; // reused for the next request
//! # drop(slot);
//! ```
//!
//! [`PreemptFlag`]: crate::point::PreemptFlag
//! [`NoPreempt`]: crate::point::NoPreempt

use std::fmt;
use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use corosensei::stack::{DefaultStack, Stack, StackPointer};
use corosensei::{Coroutine, CoroutineResult, Yielder};
use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;
use psp_core::TypeId;

use crate::handler::{Handler, HandlerError, RequestContext};
use crate::point::{Cause, FiberCx, Preemption, Run, RunLimits};

/// Default bytes of a fiber stack (usable, without the guard page).
pub(crate) const DEFAULT_STACK_BYTES: usize = 64 * 1024;
/// Smallest stack a pool accepts.
pub(crate) const MIN_STACK_BYTES: usize = 16 * 1024;
/// Largest stack a pool accepts.
pub(crate) const MAX_STACK_BYTES: usize = 8 * 1024 * 1024;
/// Most stacks one pool may hold.
pub(crate) const MAX_STACKS: usize = 65_536;

/// A [`StackPool`]'s sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackPoolConfig {
    /// Usable bytes per stack (rounded up to pages; a guard page is added
    /// below): 16 KiB..=8 MiB. A handler that
    /// overflows it hits the guard page and kills the process (SIGSEGV).
    pub stack_bytes: usize,
    /// Stacks mapped at start-up, 0..=`max_stacks`: at least one per worker,
    /// plus the requests expected to be suspended at once, keeps mapping off
    /// the request path.
    pub preallocate: usize,
    /// Most stacks ever mapped, 1..=65,536: bounds the requests
    /// started (running or suspended) at once.
    pub max_stacks: usize,
    /// Whether to touch every page of the preallocated (and later mapped)
    /// stacks when they are mapped, so that no request takes their page
    /// faults (they then stay resident: `stack_bytes` each).
    pub prefault: bool,
}

impl Default for StackPoolConfig {
    fn default() -> Self {
        Self {
            stack_bytes: DEFAULT_STACK_BYTES,
            preallocate: 4,
            max_stacks: 1024,
            prefault: true,
        }
    }
}

impl StackPoolConfig {
    /// Checks every field against its range.
    ///
    /// # Errors
    /// [`GreenError::Range`] naming the first field out of range.
    pub fn validate(&self) -> Result<(), GreenError> {
        let check = |field, value, min, max| {
            if (min..=max).contains(&value) {
                Ok(())
            } else {
                Err(GreenError::Range {
                    field,
                    value,
                    min,
                    max,
                })
            }
        };
        check(
            "stack_bytes",
            self.stack_bytes,
            MIN_STACK_BYTES,
            MAX_STACK_BYTES,
        )?;
        check("max_stacks", self.max_stacks, 1, MAX_STACKS)?;
        check("preallocate", self.preallocate, 0, self.max_stacks)
    }
}

/// Why a [`StackPool`] could not be built.
#[derive(Debug, thiserror::Error)]
pub enum GreenError {
    /// A [`StackPoolConfig`] field out of its range.
    #[error("{field} must be in [{min}, {max}], not {value}")]
    Range {
        /// The field.
        field: &'static str,
        /// The value given.
        value: usize,
        /// Smallest valid value.
        min: usize,
        /// Largest valid value.
        max: usize,
    },
    /// The OS refused to map a stack.
    #[error("cannot map a fiber stack: {0}")]
    Map(#[from] std::io::Error),
}

/// Why a fiber was not started; the work comes back in a [`Refused`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Every stack the pool may map is held by a started request.
    Exhausted,
    /// The pool was below its bound but the OS refused to map another stack.
    MapFailed,
}

/// A fiber start refused: the work handed back, and why.
pub struct Refused<T> {
    /// What was to run (a closure, or a [`RequestSlot`]).
    pub work: T,
    /// Why it did not start.
    pub reason: Refusal,
}

impl<T> fmt::Debug for Refused<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Refused")
            .field("reason", &self.reason)
            .finish_non_exhaustive()
    }
}

/// A [`StackPool`]'s counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackPoolStats {
    /// Usable bytes per stack (as configured).
    pub stack_bytes: usize,
    /// The bound on stacks.
    pub max_stacks: usize,
    /// Stacks mapped so far (start-up and growth), at most `max_stacks`.
    pub mapped: usize,
    /// Stacks mapped after start-up (a start found the pool empty).
    pub grown: u64,
    /// Stacks free in the pool.
    pub free: usize,
    /// Stacks held by fibers (started, suspended or running, or not yet
    /// dropped): `mapped - free`.
    pub in_use: usize,
    /// Fibers started (stacks taken).
    pub taken: u64,
    /// Starts refused: the pool was at its bound.
    pub refused: u64,
    /// Starts refused: the OS would not map another stack.
    pub map_failures: u64,
}

/// Fiber stacks, mapped once and reused; shared by every worker (a fiber
/// returns its stack to the pool from whichever thread finishes or drops it).
pub struct StackPool {
    free: ArrayQueue<DefaultStack>,
    stack_bytes: usize,
    max_stacks: usize,
    prefault: bool,
    preallocated: usize,
    mapped: CachePadded<AtomicUsize>,
    taken: CachePadded<AtomicU64>,
    refused: AtomicU64,
    map_failures: AtomicU64,
}

impl fmt::Debug for StackPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StackPool")
            .field("stats", &self.stats())
            .finish()
    }
}

impl StackPool {
    /// Maps `config.preallocate` stacks (touching their pages if
    /// `config.prefault`).
    ///
    /// # Errors
    /// A field out of range; the OS refusing a mapping.
    pub fn new(config: StackPoolConfig) -> Result<Arc<Self>, GreenError> {
        config.validate()?;
        let pool = Self {
            free: ArrayQueue::new(config.max_stacks),
            stack_bytes: config.stack_bytes,
            max_stacks: config.max_stacks,
            prefault: config.prefault,
            preallocated: config.preallocate,
            mapped: CachePadded::new(AtomicUsize::new(0)),
            taken: CachePadded::new(AtomicU64::new(0)),
            refused: AtomicU64::new(0),
            map_failures: AtomicU64::new(0),
        };
        for _ in 0..config.preallocate {
            let stack = pool.map()?;
            pool.mapped.fetch_add(1, Ordering::Relaxed);
            // Cannot fail: the queue holds `max_stacks >= preallocate`.
            let _ = pool.free.push(stack);
        }
        Ok(Arc::new(pool))
    }

    /// A pool of `config`'s defaults.
    ///
    /// # Errors
    /// As [`StackPool::new`].
    pub fn with_defaults() -> Result<Arc<Self>, GreenError> {
        Self::new(StackPoolConfig::default())
    }

    /// The counters.
    pub fn stats(&self) -> StackPoolStats {
        let mapped = self.mapped.load(Ordering::Relaxed);
        let free = self.free.len();
        StackPoolStats {
            stack_bytes: self.stack_bytes,
            max_stacks: self.max_stacks,
            mapped,
            grown: mapped.saturating_sub(self.preallocated) as u64,
            free,
            in_use: mapped.saturating_sub(free),
            taken: self.taken.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            map_failures: self.map_failures.load(Ordering::Relaxed),
        }
    }

    /// Maps one stack, its pages touched if the pool prefaults.
    fn map(&self) -> Result<DefaultStack, std::io::Error> {
        let stack = DefaultStack::new(self.stack_bytes)?;
        if self.prefault {
            let base = stack.base().get();
            let low = base - self.stack_bytes;
            let mut byte = base - 1;
            while byte >= low {
                // SAFETY: `DefaultStack::new(n)` maps at least `n` bytes
                // read-write right below `base` (its guard page lies below
                // them), and no coroutine runs on this stack yet: nothing else
                // reads or writes these bytes.
                unsafe { std::ptr::write_volatile(byte as *mut u8, 0) };
                byte -= 4096;
            }
        }
        Ok(stack)
    }

    /// A stack for a new fiber: a free one, else a new mapping below the
    /// bound, else a refusal (counted).
    fn take(self: &Arc<Self>) -> Result<PooledStack, Refusal> {
        let stack = match self.free.pop() {
            Some(s) => s,
            None => {
                let reserved =
                    self.mapped
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |m| {
                            (m < self.max_stacks).then_some(m + 1)
                        });
                if reserved.is_err() {
                    self.refused.fetch_add(1, Ordering::Relaxed);
                    return Err(Refusal::Exhausted);
                }
                match self.map() {
                    Ok(s) => s,
                    Err(_) => {
                        self.mapped.fetch_sub(1, Ordering::Relaxed);
                        self.map_failures.fetch_add(1, Ordering::Relaxed);
                        return Err(Refusal::MapFailed);
                    }
                }
            }
        };
        self.taken.fetch_add(1, Ordering::Relaxed);
        Ok(PooledStack {
            stack: ManuallyDrop::new(stack),
            pool: self.clone(),
        })
    }

    /// Takes back a stack whose coroutine is over.
    fn give_back(&self, stack: DefaultStack) {
        if let Err(stack) = self.free.push(stack) {
            // Unreachable (the queue holds every stack the pool may map), but
            // if it were full the stack would be unmapped, not leaked.
            drop(stack);
            self.mapped.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A pool's stack lent to one coroutine; back to the pool when the coroutine
/// (finished, or unwound by its drop) drops it.
struct PooledStack {
    stack: ManuallyDrop<DefaultStack>,
    pool: Arc<StackPool>,
}

// SAFETY: delegates to `DefaultStack`, whose `base`/`limit` describe a mapping
// it owns for its whole life; `PooledStack` owns that `DefaultStack` until its
// drop, after the coroutine stopped using it.
unsafe impl Stack for PooledStack {
    #[inline]
    fn base(&self) -> StackPointer {
        self.stack.base()
    }

    #[inline]
    fn limit(&self) -> StackPointer {
        self.stack.limit()
    }
}

impl Drop for PooledStack {
    fn drop(&mut self) {
        // SAFETY: `self.stack` is taken exactly once, here, and `self` is not
        // used after.
        let stack = unsafe { ManuallyDrop::take(&mut self.stack) };
        self.pool.give_back(stack);
    }
}

/// What [`RequestFiber::resume`] came back with.
pub enum Resumed<R> {
    /// The request finished with this; its stack is back in the pool.
    Finished(R),
    /// The request yielded; resume the fiber later, on any thread.
    Yielded(Cause),
}

impl<R> fmt::Debug for Resumed<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resumed::Finished(_) => f.write_str("Finished(..)"),
            Resumed::Yielded(cause) => write!(f, "Yielded({cause:?})"),
        }
    }
}

/// One request on its own coroutine and pooled stack, producing `R`.
///
/// Not started until the first [`resume`](RequestFiber::resume); resumed in
/// place (moving a fiber costs more than a switch, ~30 ns against ~3 ns here:
/// keep it where it is while it runs). Its stack goes back to the pool as soon
/// as it finishes. Dropping a suspended fiber unwinds its stack (its
/// destructors run, on the dropping thread; its points do not yield
/// meanwhile) and returns the stack; a panic in the request propagates out of
/// `resume`, and the stack goes back too.
pub struct RequestFiber<R> {
    /// `None` once finished (the stack is back in the pool).
    co: Option<Coroutine<Run, Cause, R, PooledStack>>,
    yields: u32,
}

// SAFETY: one thread at a time runs a `RequestFiber` (`resume` and drop take
// it by `&mut` or by value; through `&` only its counters are read), and
// moving it to another thread is synchronized by whatever moves it (a channel
// or a ring: release / acquire). What its suspended stack holds is `Send` or private to the fiber:
// the closure (or slot) it started from is `Send` (a bound of its
// constructors), its result `R: Send`, and the `!Send` values the fiber
// creates itself (its `FiberCx`, a `Preemption`, a guard) are reachable only
// from its own stack. What remains is state tied to a thread (thread-locals,
// `MutexGuard`s) held across a suspension: the constructors are `unsafe` and
// their callers promise there is none, and the points themselves read only the
// flag of the resume running them (never a thread-local) across a suspension.
unsafe impl<R: Send> Send for RequestFiber<R> {}

impl<R> fmt::Debug for RequestFiber<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestFiber")
            .field("started", &self.started())
            .field("finished", &self.is_finished())
            .field("yields", &self.yields)
            .finish()
    }
}

impl<R> RequestFiber<R> {
    /// Times the request yielded so far.
    pub fn yields(&self) -> u32 {
        self.yields
    }

    /// Whether it was ever resumed.
    pub fn started(&self) -> bool {
        self.co.as_ref().is_none_or(Coroutine::started)
    }

    /// Whether it finished (it cannot be resumed any more).
    pub fn is_finished(&self) -> bool {
        self.co.is_none()
    }
}

impl<R: Send + 'static> RequestFiber<R> {
    /// A fiber that will run `f` on a stack of `pool`; `f` gets the request's
    /// [`Preemption`] points.
    ///
    /// # Errors
    /// The pool had no stack to give ([`Refused`] hands `f` back).
    ///
    /// # Safety
    /// `f` holds nothing tied to its thread (a reference into or an `Rc`
    /// shared with a thread-local, a `MutexGuard`, a value keyed by thread
    /// identity) across a preemption point or [`Preemption::yield_now`]
    /// outside a [`NoPreempt`](crate::point::NoPreempt) guard: the fiber may be resumed on another
    /// thread.
    pub unsafe fn new<F>(pool: &Arc<StackPool>, f: F) -> Result<Self, Refused<F>>
    where
        F: FnOnce(Preemption<'_>) -> R + Send + 'static,
    {
        match pool.take() {
            Ok(stack) => Ok(Self::on_stack(stack, f)),
            Err(reason) => Err(Refused { work: f, reason }),
        }
    }

    fn on_stack<F>(stack: PooledStack, f: F) -> Self
    where
        F: FnOnce(Preemption<'_>) -> R + Send + 'static,
    {
        let co = Coroutine::with_stack(stack, move |yielder: &Yielder<Run, Cause>, run: Run| {
            let cx = FiberCx::new(yielder, run);
            f(Preemption::on_fiber(&cx))
        });
        Self {
            co: Some(co),
            yields: 0,
        }
    }

    /// Runs the request until it finishes or yields, under `limits` (the
    /// resuming worker's flag and deadline).
    ///
    /// # Panics
    /// If the fiber already finished. Propagates a panic of the request (the
    /// fiber is then finished, its stack back in the pool).
    pub fn resume(&mut self, limits: &RunLimits<'_>) -> Resumed<R> {
        let co = FreeWhenDone(&mut self.co);
        let r =
            co.0.as_mut()
                .expect("a finished request fiber cannot be resumed")
                .resume(Run::of(limits));
        // Frees a finished coroutine's stack (also when `resume` unwinds).
        drop(co);
        match r {
            CoroutineResult::Yield(cause) => {
                self.yields += 1;
                Resumed::Yielded(cause)
            }
            CoroutineResult::Return(r) => Resumed::Finished(r),
        }
    }
}

/// Drops a finished coroutine (its stack goes back to the pool) when it goes
/// out of scope, on return or unwinding.
struct FreeWhenDone<'a, R>(&'a mut Option<Coroutine<Run, Cause, R, PooledStack>>);

impl<R> Drop for FreeWhenDone<'_, R> {
    #[inline]
    fn drop(&mut self) {
        if self.0.as_ref().is_some_and(Coroutine::done) {
            *self.0 = None;
        }
    }
}

/// Everything one request touches while it runs on a fiber, owned so that it
/// survives a suspension and a move to another worker: the handler instance
/// that serves it (one per slot, made at start-up), its request and its
/// response. Reused from request to request: clear and refill `body`, set
/// `type_id` and `worker`; the response is cleared when the request starts.
#[derive(Debug)]
pub struct RequestSlot<H> {
    /// The application state serving this slot's requests.
    pub handler: H,
    /// The request's type.
    pub type_id: TypeId,
    /// The worker that started the request ([`RequestContext::worker`]; a
    /// resumed request may run on another).
    pub worker: usize,
    /// The request's body (a copy of the front end's).
    pub body: Vec<u8>,
    /// The request's connection ([`RequestContext::session`]).
    pub session: u64,
    /// The response the handler wrote (empty when the request starts).
    pub response: Vec<u8>,
}

impl<H> RequestSlot<H> {
    /// A slot with buffers of these capacities (grown only by larger
    /// requests or responses).
    pub fn new(handler: H, body_capacity: usize, response_capacity: usize) -> Self {
        Self {
            handler,
            type_id: 0,
            worker: 0,
            body: Vec::with_capacity(body_capacity),
            session: 0,
            response: Vec::with_capacity(response_capacity),
        }
    }

    /// Loads the next request into the slot (copies `body`).
    pub fn load(&mut self, type_id: TypeId, worker: usize, body: &[u8]) {
        self.type_id = type_id;
        self.worker = worker;
        self.session = 0;
        self.body.clear();
        self.body.extend_from_slice(body);
    }
}

/// A request served on a fiber: the slot back, and the handler's outcome.
#[derive(Debug)]
pub struct Served<H> {
    /// The slot, with the response in it.
    pub slot: RequestSlot<H>,
    /// What the handler returned.
    pub outcome: Result<(), HandlerError>,
}

impl<H: Handler + 'static> RequestFiber<Served<H>> {
    /// A fiber that will serve `slot`'s request with `slot`'s handler
    /// (no allocation: the slot moves onto the fiber's stack).
    ///
    /// # Errors
    /// The pool had no stack to give ([`Refused`] hands the slot back).
    ///
    /// # Safety
    /// The handler keeps the contract of [`RequestFiber::new`]: nothing tied
    /// to its thread across a preemption point outside a [`NoPreempt`](crate::point::NoPreempt) guard.
    pub unsafe fn serve(
        pool: &Arc<StackPool>,
        slot: RequestSlot<H>,
    ) -> Result<Self, Refused<RequestSlot<H>>> {
        let stack = match pool.take() {
            Ok(s) => s,
            Err(reason) => return Err(Refused { work: slot, reason }),
        };
        Ok(Self::on_stack(stack, move |preempt| {
            let mut slot = slot;
            slot.response.clear();
            let mut ctx = RequestContext {
                type_id: slot.type_id,
                body: &slot.body,
                response: &mut slot.response,
                worker: slot.worker,
                preempt,
                session: slot.session,
            };
            let outcome = slot.handler.handle(&mut ctx);
            Served { slot, outcome }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_out_of_range_are_refused() {
        let ok = StackPoolConfig::default();
        assert!(ok.validate().is_ok());
        for bad in [
            StackPoolConfig {
                stack_bytes: 1024,
                ..ok
            },
            StackPoolConfig {
                stack_bytes: MAX_STACK_BYTES + 1,
                ..ok
            },
            StackPoolConfig {
                max_stacks: 0,
                preallocate: 0,
                ..ok
            },
            StackPoolConfig {
                max_stacks: 2,
                preallocate: 3,
                ..ok
            },
        ] {
            assert!(
                matches!(StackPool::new(bad), Err(GreenError::Range { .. })),
                "{bad:?}"
            );
        }
    }
}
