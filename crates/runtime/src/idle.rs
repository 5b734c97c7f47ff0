//! What a polling thread does when a pass found no work: spin (kernel-bypass
//! style, one core per thread), spin then yield, or spin then park until woken
//! (the default: behaves on machines with fewer cores than threads).
//!
//! Parking is guarded by a flag so that the waker pays for `unpark` (a syscall)
//! only when the other side is actually parked: the sleeper raises its flag,
//! re-checks for work, then parks with a timeout; the waker publishes work, then
//! checks the flag. Both sides fence (SeqCst), so a wake-up is never lost; the
//! timeout bounds the damage of any mistake anyway.
//!
//! A [`Wakeup`] is read by its owner thread (the sleeper) and by the threads that
//! publish work for it (the wakers); an [`Idler`] belongs to one thread. Built
//! with `--cfg loom`, the protocol's atomics, fences, park/unpark and eventfd come
//! from loom's model checker instead, so `tests/loom_idle.rs` checks this very
//! code (docs/verification.md).

#[cfg(not(loom))]
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use sync::{AtomicBool, Ordering, Thread, fence};

/// The primitives the wake-up protocol is built on: std's, or loom's models of
/// them under `--cfg loom`.
mod sync {
    use std::time::Duration;

    #[cfg(loom)]
    pub(super) use loom::{
        hint::spin_loop,
        sync::atomic::{AtomicBool, AtomicU64, Ordering, fence},
        thread::{Thread, current, park, yield_now},
    };
    #[cfg(not(loom))]
    pub(super) use std::{
        hint::spin_loop,
        sync::atomic::{AtomicBool, Ordering, fence},
        thread::{Thread, current, yield_now},
    };

    /// Parks the calling thread for at most `max` (or less: a stray unpark ends
    /// it early).
    #[cfg(not(loom))]
    #[inline]
    pub(super) fn park_timeout(max: Duration) {
        std::thread::park_timeout(max);
    }

    /// Loom has no time: a timed park is a park, and the models add a thread
    /// that unparks the sleeper once, at any point, standing for the timeout
    /// (to the sleeper, a spurious return).
    #[cfg(loom)]
    pub(super) fn park_timeout(_max: Duration) {
        park();
    }
}

/// The eventfd a thread that waits in `poll` is signalled through: a counter
/// producers add to, which the owner polls beside its sockets.
#[cfg(not(loom))]
#[derive(Debug)]
struct Event(OwnedFd);

#[cfg(not(loom))]
impl Event {
    /// A non-blocking eventfd (`_owner`: only loom's stand-in needs it).
    fn new(_owner: &Thread) -> std::io::Result<Self> {
        // SAFETY: eventfd takes plain integers and returns a new descriptor or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by eventfd, is valid and owned by no one else.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Makes the descriptor readable (wakes the owner's poll).
    fn signal(&self) {
        let one = 1u64;
        // SAFETY: writes 8 bytes from a live u64 to an eventfd this handle owns; a
        // failure (counter saturated) still leaves it readable.
        unsafe {
            libc::write(self.0.as_raw_fd(), (&raw const one).cast(), 8);
        }
    }

    /// Consumes a pending signal.
    fn clear(&self) {
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into a live u64 from a descriptor this handle owns;
        // a non-blocking eventfd with no signal fails with EAGAIN, which is the
        // expected "nothing pending".
        unsafe {
            libc::read(self.0.as_raw_fd(), (&raw mut v).cast(), 8);
        }
    }
}

/// Loom's stand-in for the eventfd: the kernel's counter is an atomic, and the
/// owner's poll on it parks until the counter is non-zero (a signal's unpark
/// ends the park) or until something else ends the poll ([`Wakeup::end_poll`]).
/// This assumes what the kernel guarantees (the counter's lock and the poll's
/// wait queue): a signal written after the poll checked the counter still wakes
/// it, and the writer's memory is visible to whoever reads the signal. The
/// loop makes a left-over unpark token, which an eventfd has no equivalent of,
/// end no poll.
#[cfg(loom)]
#[derive(Debug)]
struct Event {
    count: sync::AtomicU64,
    ended: AtomicBool,
    owner: Thread,
}

#[cfg(loom)]
impl Event {
    fn new(owner: &Thread) -> std::io::Result<Self> {
        Ok(Self {
            count: sync::AtomicU64::new(0),
            ended: AtomicBool::new(false),
            owner: owner.clone(),
        })
    }

    fn signal(&self) {
        self.count.fetch_add(1, Ordering::Release);
        self.owner.unpark();
    }

    fn clear(&self) {
        self.count.swap(0, Ordering::Acquire);
    }

    fn wait(&self) {
        while self.count.load(Ordering::Acquire) == 0 && !self.ended.swap(false, Ordering::Acquire)
        {
            sync::park();
        }
    }

    fn end_wait(&self) {
        self.ended.store(true, Ordering::Release);
        self.owner.unpark();
    }
}

/// How a thread waits for work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleStrategy {
    /// Busy-poll forever (needs a dedicated core per thread).
    Spin,
    /// Poll `spins` times, then `sched_yield` on each empty pass.
    SpinYield {
        /// Empty passes before yielding.
        spins: u32,
    },
    /// Poll for `spin_us`, then park until woken or `park_us` elapsed. Spinning
    /// first bridges the gap to the next job without paying a wake-up (tens of
    /// microseconds on a VM, where an idle vCPU halts).
    SpinPark {
        /// How long to poll before parking.
        spin_us: u32,
        /// Longest park.
        park_us: u32,
    },
}

impl Default for IdleStrategy {
    fn default() -> Self {
        IdleStrategy::SpinPark {
            spin_us: 100,
            park_us: 1_000,
        }
    }
}

impl std::str::FromStr for IdleStrategy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "spin" => Ok(IdleStrategy::Spin),
            "yield" => Ok(IdleStrategy::SpinYield { spins: 100 }),
            "park" => Ok(IdleStrategy::default()),
            _ => match s.strip_prefix("park:").map(str::parse::<u32>) {
                // park:SPIN_US: poll this long before parking (0: park at once).
                Some(Ok(spin_us)) => Ok(IdleStrategy::SpinPark {
                    spin_us,
                    park_us: 1_000,
                }),
                _ => Err(format!(
                    "idle strategy must be spin, yield, park or park:SPIN_US, not '{s}'"
                )),
            },
        }
    }
}

/// Whether a polling wait gives its core away on each pass (set at start by
/// the runtime, [`PollYield`]).
static POLLS_YIELD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// How a thread that polls for work (a worker spinning before it parks, a
/// dispatcher waiting for a completion) waits between two looks.
///
/// A spinning thread keeps its core until the kernel's scheduler takes it
/// away (a tick, milliseconds). When the runtime has more threads than cores
/// (3 threads on 2 cores, or a client sharing them), a thread that spins
/// while the one it waits for is runnable on the same core holds that one
/// off: each pass then yields the core instead (`sched_yield`, returning at
/// once when nothing else is runnable).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PollYield {
    /// Yield when the runtime's threads outnumber the cores it may run on.
    #[default]
    Auto,
    /// Always yield.
    On,
    /// Never yield (a pause instruction per pass).
    Off,
}

impl PollYield {
    /// Whether polling yields, for `threads` threads on `cores` cores.
    pub fn resolve(self, threads: usize, cores: usize) -> bool {
        match self {
            PollYield::Auto => threads > cores,
            PollYield::On => true,
            PollYield::Off => false,
        }
    }
}

impl std::str::FromStr for PollYield {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(PollYield::Auto),
            "on" => Ok(PollYield::On),
            "off" => Ok(PollYield::Off),
            _ => Err(format!("poll yield must be auto, on or off, not '{s}'")),
        }
    }
}

/// Sets, for the whole process, whether polling waits yield.
pub(crate) fn set_polls_yield(yes: bool) {
    POLLS_YIELD.store(yes, std::sync::atomic::Ordering::Relaxed);
}

/// Whether polling waits yield.
pub(crate) fn polls_yield() -> bool {
    POLLS_YIELD.load(std::sync::atomic::Ordering::Relaxed)
}

/// One pass of a polling wait: a pause, or a yield of the core
/// ([`PollYield`]).
#[inline]
pub fn pause() {
    if polls_yield() {
        sync::yield_now();
    } else {
        sync::spin_loop();
    }
}

/// A thread's parked flag and handle, shared with the threads that wake it.
///
/// A thread that must also wait on file descriptors (a network dispatcher in
/// `poll`) gets an eventfd: producers then write to it instead of unparking, and
/// the owner polls it beside its sockets.
#[derive(Debug)]
pub struct Wakeup {
    parked: CachePadded<AtomicBool>,
    thread: Thread,
    event: Option<Event>,
}

impl Wakeup {
    /// The wake-up handle of `thread`.
    pub fn new(thread: Thread) -> Self {
        Self {
            parked: CachePadded::new(AtomicBool::new(false)),
            thread,
            event: None,
        }
    }

    /// The wake-up handle of `thread`, signalled through a non-blocking eventfd.
    ///
    /// # Errors
    /// When the kernel refuses an eventfd.
    pub fn with_event_fd(thread: Thread) -> std::io::Result<Self> {
        Ok(Self {
            event: Some(Event::new(&thread)?),
            ..Self::new(thread)
        })
    }

    /// The eventfd producers signal, if this handle has one.
    #[cfg(not(loom))]
    pub fn event_fd(&self) -> Option<BorrowedFd<'_>> {
        self.event.as_ref().map(|e| e.0.as_fd())
    }

    /// Under loom, in place of the owner's poll on [`event_fd`](Self::event_fd):
    /// returns once the eventfd is signalled, or once [`end_poll`](Self::end_poll)
    /// stood for the poll's other ways out.
    ///
    /// # Panics
    /// If this handle has no eventfd.
    #[cfg(loom)]
    pub fn wait_event(&self) {
        self.event
            .as_ref()
            .expect("a handle with an eventfd")
            .wait();
    }

    /// Under loom, what else ends the owner's poll (a datagram on its socket, its
    /// timeout): the poll now in progress, or the next one, returns.
    ///
    /// # Panics
    /// If this handle has no eventfd.
    #[cfg(loom)]
    pub fn end_poll(&self) {
        self.event
            .as_ref()
            .expect("a handle with an eventfd")
            .end_wait();
    }

    /// Consumes a pending eventfd signal (after the owner's poll returned).
    pub fn clear_event(&self) {
        if let Some(e) = &self.event {
            e.clear();
        }
    }

    /// Parks the calling thread (which must own this handle) by running `wait`
    /// (e.g. a poll on the event fd and sockets), unless `has_work` says work
    /// arrived after the flag went up. `wait` may return early (a timeout, a
    /// stray wake-up): callers re-check for work and park again.
    pub fn park_with(&self, has_work: impl Fn() -> bool, wait: impl FnOnce()) {
        self.parked.store(true, Ordering::Relaxed);
        // Pairs with the fence in `notify`: either this thread's `has_work` sees
        // the work, or the waker sees the flag up (store buffering is ruled out).
        fence(Ordering::SeqCst);
        if !has_work() {
            wait();
        }
        self.parked.store(false, Ordering::Relaxed);
    }

    /// The wake-up handle of the calling thread.
    pub fn for_current() -> Self {
        Self::new(sync::current())
    }

    /// Called by a producer after publishing work for this thread.
    #[inline]
    pub fn notify(&self) {
        // Pairs with the fence in `park_with`.
        fence(Ordering::SeqCst);
        if self.parked.load(Ordering::Relaxed) {
            match &self.event {
                Some(e) => e.signal(),
                None => self.thread.unpark(),
            }
        }
    }

    /// Sleeps the calling thread (which must own this handle) for at most `max`
    /// without raising the flag: producers do not wake it (a stray unpark still
    /// may, harmlessly).
    pub fn sleep(&self, max: Duration) {
        sync::park_timeout(max);
    }

    /// Parks the calling thread (which must own this handle) for at most `max`,
    /// unless `has_work` says work arrived after the flag went up.
    pub fn park(&self, max: Duration, has_work: impl Fn() -> bool) {
        self.park_with(has_work, || sync::park_timeout(max));
    }
}

/// Per-thread state of an [`IdleStrategy`]: counts consecutive empty passes.
#[derive(Debug)]
pub struct Idler {
    strategy: IdleStrategy,
    empty_passes: u32,
    idle_since: Option<Instant>,
}

impl Idler {
    /// An idler following `strategy`.
    pub fn new(strategy: IdleStrategy) -> Self {
        Self {
            strategy,
            empty_passes: 0,
            idle_since: None,
        }
    }

    /// A pass found work.
    #[inline]
    pub fn reset(&mut self) {
        self.empty_passes = 0;
        self.idle_since = None;
    }

    /// A pass found no work: wait a little, according to the strategy; `max_park`
    /// caps a park (e.g. until the next scheduled arrival).
    #[inline]
    pub fn idle(&mut self, me: &Wakeup, max_park: Duration, has_work: impl Fn() -> bool) {
        self.idle_with(me, max_park, has_work, sync::park_timeout);
    }

    /// As [`idle`](Self::idle), but a park runs `wait(max)` (e.g. a poll on the
    /// wake-up's event fd and sockets) instead of parking the thread.
    #[inline]
    pub fn idle_with(
        &mut self,
        me: &Wakeup,
        max_park: Duration,
        has_work: impl Fn() -> bool,
        wait: impl FnOnce(Duration),
    ) {
        self.empty_passes = self.empty_passes.saturating_add(1);
        match self.strategy {
            IdleStrategy::Spin => sync::spin_loop(),
            IdleStrategy::SpinYield { spins } => {
                if self.empty_passes < spins {
                    sync::spin_loop();
                } else {
                    sync::yield_now();
                }
            }
            IdleStrategy::SpinPark { spin_us, park_us } => {
                let since = *self.idle_since.get_or_insert_with(Instant::now);
                if since.elapsed() < Duration::from_micros(spin_us.into()) {
                    pause();
                } else {
                    let max = max_park.min(Duration::from_micros(park_us.into()));
                    me.park_with(has_work, || wait(max));
                }
            }
        }
    }
}

// The stress tests run on real threads; under loom, tests/loom_idle.rs checks.
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn polling_yields_only_when_threads_outnumber_cores_unless_told() {
        // 2 workers and a dispatcher on 2 cores yield; with a core each they
        // pause; `on` and `off` ignore the count.
        assert!(PollYield::Auto.resolve(3, 2));
        assert!(!PollYield::Auto.resolve(3, 3));
        assert!(!PollYield::Auto.resolve(15, 16));
        assert!(PollYield::On.resolve(1, 16));
        assert!(!PollYield::Off.resolve(64, 2));
        assert_eq!("auto".parse::<PollYield>(), Ok(PollYield::Auto));
        assert_eq!("on".parse::<PollYield>(), Ok(PollYield::On));
        assert_eq!("off".parse::<PollYield>(), Ok(PollYield::Off));
        let err = "sometimes".parse::<PollYield>().unwrap_err();
        assert_eq!(err, "poll yield must be auto, on or off, not 'sometimes'");
    }

    /// Stress: a producer hands 5,000 items one at a time to a parking consumer and
    /// waits for each acknowledgement, so every hand-off crosses the park path;
    /// none may wait out the 1 s park timeout (a lost wake-up). With `event_fd`,
    /// the consumer waits in `poll` on its eventfd, as the network dispatcher does.
    fn stress_handoffs(event_fd: bool) {
        const N: u64 = 5_000;
        let slot = Arc::new(AtomicU64::new(0));
        let ack = Arc::new(AtomicU64::new(0));
        let (tx, rx) = std::sync::mpsc::channel();
        let consumer = {
            let (slot, ack) = (slot.clone(), ack.clone());
            std::thread::spawn(move || {
                let me = Arc::new(if event_fd {
                    Wakeup::with_event_fd(std::thread::current()).unwrap()
                } else {
                    Wakeup::for_current()
                });
                tx.send(me.clone()).unwrap();
                let mut idler = Idler::new(IdleStrategy::SpinPark {
                    spin_us: 5,
                    park_us: 1_000_000,
                });
                let wait = |max: Duration| {
                    match me.event_fd() {
                        Some(fd) => {
                            let mut p = libc::pollfd {
                                fd: fd.as_raw_fd(),
                                events: libc::POLLIN,
                                revents: 0,
                            };
                            // SAFETY: one live pollfd for the duration of the call.
                            unsafe { libc::poll(&mut p, 1, max.as_millis() as i32) };
                        }
                        None => std::thread::park_timeout(max),
                    }
                    me.clear_event();
                };
                let mut worst = Duration::ZERO;
                for i in 1..=N {
                    let t0 = Instant::now();
                    while slot.load(Ordering::Acquire) < i {
                        idler.idle_with(
                            &me,
                            Duration::from_secs(1),
                            || slot.load(Ordering::Acquire) >= i,
                            wait,
                        );
                    }
                    idler.reset();
                    worst = worst.max(t0.elapsed());
                    ack.store(i, Ordering::Release);
                }
                worst
            })
        };
        let waker = rx.recv().unwrap();
        for i in 1..=N {
            // Give the consumer time to go to sleep now and then.
            if i % 16 == 0 {
                std::thread::sleep(Duration::from_micros(50));
            }
            slot.store(i, Ordering::Release);
            waker.notify();
            while ack.load(Ordering::Acquire) < i {
                std::thread::yield_now();
            }
        }
        let worst = consumer.join().unwrap();
        assert!(
            worst < Duration::from_millis(500),
            "a wake-up was lost (event fd: {event_fd}): waited {worst:?}"
        );
    }

    #[test]
    fn no_lost_wakeups() {
        stress_handoffs(false);
    }

    #[test]
    fn no_lost_wakeups_through_the_event_fd() {
        stress_handoffs(true);
    }
}
