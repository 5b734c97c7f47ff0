//! Time for the runtime: a monotonic nanosecond clock shared by all threads, and
//! a busy-spin calibrated against it (the synthetic handler's "work").
//!
//! On x86_64 the spin counts TSC cycles (one `rdtsc`, ~22 ns here, per check),
//! with the TSC rate measured against the monotonic clock at start-up; elsewhere
//! it polls the monotonic clock. [`ticks`] is the same counter, for deadlines
//! checked in hot loops (the green threads' preemption points); a calibrated
//! [`Spinner`] converts nanoseconds to ticks.

use std::time::{Duration, Instant};

/// Nanoseconds since a common origin, readable from any thread.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    origin: Instant,
}

impl Clock {
    /// A clock whose zero is now.
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }

    /// Nanoseconds since the origin.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// A cheap timestamp for deadlines checked in hot loops: TSC cycles on x86_64,
/// nanoseconds since a process-wide origin elsewhere ([`Spinner::ns_to_ticks`]
/// converts). Readable from any thread; compare only values of one machine.
#[inline]
pub fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        cycles()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        ORIGIN.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn cycles() -> u64 {
    // SAFETY: `rdtsc` has no preconditions and exists on every x86_64 CPU.
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
}

/// A calibrated busy-spin: burns CPU for a requested number of nanoseconds.
#[derive(Debug, Clone, Copy)]
pub struct Spinner {
    /// TSC cycles per nanosecond (0 when spinning on the monotonic clock).
    cycles_per_ns: f64,
    /// Fixed cost of one spin call beyond the requested time (entry, the final
    /// check), measured at calibration and subtracted from each request.
    overhead_ns: u64,
}

impl Spinner {
    /// Measures the cycle counter's rate against the monotonic clock over
    /// `window` (20 ms is plenty; longer is more precise).
    pub fn calibrate(window: Duration) -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            let t0 = Instant::now();
            let c0 = cycles();
            while t0.elapsed() < window {
                std::hint::spin_loop();
            }
            let c1 = cycles();
            let ns = t0.elapsed().as_nanos() as f64;
            let rate = (c1.wrapping_sub(c0)) as f64 / ns;
            if rate.is_finite() && rate > 0.01 {
                return Self {
                    cycles_per_ns: rate,
                    overhead_ns: 0,
                }
                .with_measured_overhead();
            }
        }
        let _ = window;
        Self {
            cycles_per_ns: 0.0,
            overhead_ns: 0,
        }
        .with_measured_overhead()
    }

    /// Measures the fixed excess of short spins (the best of a few batches, so a
    /// descheduling does not count) and keeps it to subtract.
    fn with_measured_overhead(self) -> Self {
        const NS: u64 = 1_000;
        const REPS: u32 = 2_000;
        let best = (0..5)
            .map(|_| {
                let t0 = Instant::now();
                for _ in 0..REPS {
                    self.spin_ns(NS);
                }
                t0.elapsed().as_nanos() as f64 / f64::from(REPS)
            })
            .fold(f64::INFINITY, f64::min);
        Self {
            overhead_ns: (best - NS as f64).clamp(0.0, 500.0) as u64,
            ..self
        }
    }

    /// The per-call overhead subtracted from every request, in ns.
    pub fn overhead_ns(&self) -> u64 {
        self.overhead_ns
    }

    /// Cycles per nanosecond of the counter the spin uses (0: the monotonic clock).
    pub fn cycles_per_ns(&self) -> f64 {
        self.cycles_per_ns
    }

    /// [`ticks`] in `ns` nanoseconds (TSC cycles at the calibrated rate on
    /// x86_64; on a spinner that fell back to the monotonic clock, one tick per
    /// nanosecond, exact off x86_64 and approximate on it).
    #[inline]
    pub fn ns_to_ticks(&self, ns: u64) -> u64 {
        if cfg!(target_arch = "x86_64") && self.cycles_per_ns > 0.0 {
            (ns as f64 * self.cycles_per_ns) as u64
        } else {
            ns
        }
    }

    /// Nanoseconds in `ticks` [`ticks`] (the inverse of [`Spinner::ns_to_ticks`]).
    #[inline]
    pub fn ticks_to_ns(&self, ticks: u64) -> u64 {
        if cfg!(target_arch = "x86_64") && self.cycles_per_ns > 0.0 {
            (ticks as f64 / self.cycles_per_ns) as u64
        } else {
            ticks
        }
    }

    /// Spins for `ns` nanoseconds of its own time in steps of `step_ns`,
    /// calling `between` after every step but the last. `between` returns
    /// whether the spinning thread was away in it (a preemption point that
    /// suspended the request): then the time away does not count as spun, and
    /// the remaining steps start afresh; otherwise step ends follow each other
    /// exactly, so an uninterrupted stepped spin lasts as long as
    /// [`Spinner::spin_ns`].
    #[inline]
    pub fn spin_ns_in_steps(&self, ns: u64, step_ns: u64, mut between: impl FnMut() -> bool) {
        let ns = ns.saturating_sub(self.overhead_ns);
        #[cfg(target_arch = "x86_64")]
        if self.cycles_per_ns > 0.0 {
            let total = (ns as f64 * self.cycles_per_ns) as u64;
            let step = (step_ns as f64 * self.cycles_per_ns) as u64;
            return spin_stepped(cycles, total, step, &mut between);
        }
        let t0 = Instant::now();
        let now = || t0.elapsed().as_nanos() as u64;
        spin_stepped(now, ns, step_ns, &mut between);
    }

    /// Spins for `ns` nanoseconds.
    #[inline]
    pub fn spin_ns(&self, ns: u64) {
        let ns = ns.saturating_sub(self.overhead_ns);
        #[cfg(target_arch = "x86_64")]
        if self.cycles_per_ns > 0.0 {
            let end = cycles() + (ns as f64 * self.cycles_per_ns) as u64;
            while cycles() < end {
                std::hint::spin_loop();
            }
            return;
        }
        let t0 = Instant::now();
        let d = Duration::from_nanos(ns);
        while t0.elapsed() < d {
            std::hint::spin_loop();
        }
    }
}

/// Spins `total` units of `now` in steps of `step` (see
/// [`Spinner::spin_ns_in_steps`]).
#[inline]
fn spin_stepped(now: impl Fn() -> u64, total: u64, step: u64, between: &mut impl FnMut() -> bool) {
    let step = step.max(1);
    let mut left = total;
    let mut chunk = left.min(step);
    let mut end = now().saturating_add(chunk);
    loop {
        while now() < end {
            std::hint::spin_loop();
        }
        left -= chunk;
        if left == 0 {
            return;
        }
        let away = between();
        chunk = left.min(step);
        let from = if away { now() } else { end };
        end = from.saturating_add(chunk);
    }
}

/// Requested against measured spin time: for each request, the smallest mean over
/// `batches` batches of back-to-back spins (~`batch` long each), so that one
/// descheduling does not count as the spin's error.
pub fn spin_accuracy(
    spinner: &Spinner,
    requests_ns: &[u64],
    batch: Duration,
    batches: usize,
) -> Vec<(u64, f64)> {
    requests_ns
        .iter()
        .map(|&ns| {
            let reps = (batch.as_nanos() as u64 / ns.max(1)).max(1);
            let best = (0..batches.max(1))
                .map(|_| {
                    let t0 = Instant::now();
                    for _ in 0..reps {
                        spinner.spin_ns(ns);
                    }
                    t0.elapsed().as_nanos() as f64 / reps as f64
                })
                .fold(f64::INFINITY, f64::min);
            (ns, best)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_is_monotonic_and_spin_is_roughly_right() {
        let c = Clock::new();
        let a = c.now_ns();
        let s = Spinner::calibrate(Duration::from_millis(20));
        s.spin_ns(200_000);
        let b = c.now_ns();
        // A loose sanity bound (the precise figure is `psp calibrate`'s job):
        // at least the requested time, and not wildly more.
        assert!(b - a >= 190_000, "spun {} ns for 200 us", b - a);
        // A spin descheduled midway overshoots by the time away, so on a
        // loaded machine any one measurement may: the best of up to ten must
        // be close (a miscalibrated spinner misses on every one).
        let mut best = f64::INFINITY;
        for _ in 0..10 {
            let acc = spin_accuracy(&s, &[50_000], Duration::from_millis(5), 3);
            assert!(acc[0].1 > 45_000.0, "{acc:?}");
            best = best.min(acc[0].1);
            if best < 100_000.0 {
                break;
            }
        }
        assert!(best < 100_000.0, "best of ten: {best} ns for 50 us");
    }

    #[test]
    fn stepped_spin_calls_between_steps_and_discounts_time_away() {
        let s = Spinner::calibrate(Duration::from_millis(20));
        let mut calls = 0;
        s.spin_ns_in_steps(10_000, 1_000, || {
            calls += 1;
            false
        });
        assert_eq!(calls, 9);
        // Time away (here: a sleep reported as such) is not spun time: the
        // spin still spins its full 200 us after it.
        let c = Clock::new();
        let mut away_ns = 0;
        s.spin_ns_in_steps(200_000, 100_000, || {
            let t = c.now_ns();
            std::thread::sleep(Duration::from_millis(2));
            away_ns = c.now_ns() - t;
            true
        });
        assert!(c.now_ns() - away_ns >= 190_000, "{} {away_ns}", c.now_ns());
        let back = s.ticks_to_ns(s.ns_to_ticks(1_000_000));
        assert!(back.abs_diff(1_000_000) < 1_000, "{back}");
    }
}
