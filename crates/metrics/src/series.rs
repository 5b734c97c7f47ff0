//! Per-type latency over time, window by window, with the reservation in force:
//! what the workload-change experiment plots (how fast a policy reacts when the
//! mix or the service times change).
//!
//! An executor owns one [`SeriesRecorder`] (one thread touches it). Time is cut
//! into windows of `window_ns` from 0. Each completion is [`record`]ed with its
//! completion time; **a request's latency belongs to the window in which it
//! completed** (not the one it arrived in). The executor calls
//! [`close_windows_until`] with the current time, and with the new reservation
//! whenever the reservation changes (it is in force from that time on), so that
//! windows close in time order and each closed window carries the reservation
//! in force at its end; a completion past the current window closes the
//! windows before it by itself. [`finish`] closes the rest and returns the
//! [`TimeSeries`] (JSON).
//!
//! Per window and type: completions, p50/p99/p99.9 latency (µs), p99.9 slowdown,
//! and the workers reserved for the type's group and the workers it may steal.
//! Recording is two histogram increments and never allocates; the histograms
//! (fixed bounds, 3 significant digits, as [`crate::Recorder`]'s) are cleared,
//! not reallocated, when a window closes. Nothing here knows about policies: the
//! reservation comes in as numbers and a text.
//!
//! [`record`]: SeriesRecorder::record
//! [`close_windows_until`]: SeriesRecorder::close_windows_until
//! [`finish`]: SeriesRecorder::finish

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::recorder::{SLOWDOWN_SCALE, new_histogram, slowdown_milli};

/// Shortest window, in ns (1 µs).
pub const MIN_WINDOW_NS: u64 = 1_000;
/// Longest window, in ns (1 hour).
pub const MAX_WINDOW_NS: u64 = 3_600_000_000_000;
/// Most windows one series may have: a closed window keeps a few numbers per
/// type (and the reservation's text), and closing one clears two histograms
/// per type (about 0.5 MB).
pub const MAX_WINDOWS: u64 = 100_000;

/// Whether a series of `window_ns` windows over `period_ns` is within bounds:
/// `window_ns` in [[`MIN_WINDOW_NS`], [`MAX_WINDOW_NS`]] and at most
/// [`MAX_WINDOWS`] windows.
///
/// # Errors
/// The message names the bound broken (for a one-line error).
pub fn check_window(window_ns: u64, period_ns: u64) -> Result<u64, String> {
    if !(MIN_WINDOW_NS..=MAX_WINDOW_NS).contains(&window_ns) {
        return Err(format!(
            "the series window must be in [{} us, {} s], not {} ns",
            MIN_WINDOW_NS / 1_000,
            MAX_WINDOW_NS / 1_000_000_000,
            window_ns
        ));
    }
    let n = period_ns.div_ceil(window_ns);
    if n > MAX_WINDOWS {
        return Err(format!(
            "a series window of {} ms cuts {} s into {n} windows; at most {MAX_WINDOWS} (widen the window)",
            window_ns as f64 / 1e6,
            period_ns as f64 / 1e9
        ));
    }
    Ok(window_ns)
}

/// The reservation in force, as the series keeps it: per type (index = type
/// id) `(reserved, stealable)`: the workers reserved for the type's group and
/// the workers it may steal; and a short text of the whole reservation.
#[derive(Debug, Clone, Copy)]
pub struct ReservationView<'a> {
    /// `(reserved, stealable)` worker counts, per type.
    pub per_type: &'a [(usize, usize)],
    /// The reservation as one line (e.g. its `Display`).
    pub text: &'a str,
}

/// One type in one window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowType {
    /// Requests of the type that completed in the window.
    pub completions: u64,
    /// Median latency, µs (`None`: no completion).
    pub p50_latency_us: Option<f64>,
    /// 99th percentile latency, µs.
    pub p99_latency_us: Option<f64>,
    /// 99.9th percentile latency, µs.
    pub p999_latency_us: Option<f64>,
    /// 99.9th percentile slowdown (latency / service time).
    pub p999_slowdown: Option<f64>,
    /// Workers reserved for the type's group at the window's close (`None`: no
    /// reservation given).
    pub reserved_workers: Option<usize>,
    /// Workers the type may steal at the window's close.
    pub stealable_workers: Option<usize>,
}

/// One window: `[start_s, end_s)` of the run's time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// Start, seconds.
    pub start_s: f64,
    /// End, seconds (the last window may be shorter).
    pub end_s: f64,
    /// Per type, in type-id order.
    pub types: Vec<WindowType>,
    /// The reservation at the window's close, as text (`None`: none given).
    pub reservation: Option<String>,
}

/// A run's time series (JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimeSeries {
    /// Window length, seconds.
    pub window_s: f64,
    /// Type names, in type-id order.
    pub types: Vec<String>,
    /// The windows, in time order.
    pub windows: Vec<Window>,
}

/// The current window's histograms of one type.
#[derive(Debug, Clone)]
struct Current {
    latency_ns: Histogram<u64>,
    slowdown_milli: Histogram<u64>,
}

/// Records completions window by window (see the module's docs).
#[derive(Debug, Clone)]
pub struct SeriesRecorder {
    names: Vec<String>,
    window_ns: u64,
    /// Start of the current window.
    start_ns: u64,
    current: Vec<Current>,
    /// The last reservation given.
    per_type: Vec<(usize, usize)>,
    text: Option<String>,
    windows: Vec<Window>,
}

impl SeriesRecorder {
    /// A recorder for the given type names (index = type id), with windows of
    /// `window_ns` from time 0 (check it first with [`check_window`]).
    ///
    /// # Panics
    /// If `window_ns` is 0.
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(type_names: I, window_ns: u64) -> Self {
        assert!(window_ns > 0, "a series window must be positive");
        let names: Vec<String> = type_names.into_iter().map(Into::into).collect();
        Self {
            current: names
                .iter()
                .map(|_| Current {
                    latency_ns: new_histogram(),
                    slowdown_milli: new_histogram(),
                })
                .collect(),
            names,
            window_ns,
            start_ns: 0,
            per_type: Vec::new(),
            text: None,
            windows: Vec::new(),
        }
    }

    /// Where the current window ends, in ns: a completion at or after it (or a
    /// call of [`close_windows_until`](Self::close_windows_until)) closes it.
    #[inline]
    pub fn window_end_ns(&self) -> u64 {
        self.start_ns.saturating_add(self.window_ns)
    }

    /// Records one completion of type `type_idx` at `completion_ns` with its
    /// latency and service time. A completion before the current window (out of
    /// order) counts in the current window; one after it closes the windows
    /// before its own, with the last reservation given. Never allocates, except
    /// when it closes windows.
    #[inline]
    pub fn record(
        &mut self,
        type_idx: usize,
        completion_ns: u64,
        latency_ns: u64,
        service_ns: u64,
    ) {
        if completion_ns >= self.window_end_ns() {
            self.roll(completion_ns);
        }
        let c = &mut self.current[type_idx];
        let sd = slowdown_milli(latency_ns, service_ns);
        c.latency_ns.saturating_record(latency_ns.max(1));
        c.slowdown_milli.saturating_record(sd.max(1));
    }

    /// Closes every window that ends at or before `now_ns` (they carry the
    /// reservation given before); then `reservation`, when given, is the one in
    /// force from `now_ns` on, until another is given. Cheap when no window
    /// ends; reuses its buffers for the reservation.
    pub fn close_windows_until(&mut self, now_ns: u64, reservation: Option<ReservationView<'_>>) {
        if now_ns >= self.window_end_ns() {
            self.roll(now_ns);
        }
        if let Some(r) = reservation {
            self.per_type.clear();
            self.per_type.extend_from_slice(r.per_type);
            let text = self.text.get_or_insert_with(String::new);
            text.clear();
            text.push_str(r.text);
        }
    }

    /// Closes the windows before the one holding `now_ns`.
    #[cold]
    fn roll(&mut self, now_ns: u64) {
        while now_ns >= self.window_end_ns() {
            let end = self.window_end_ns();
            self.close_current(end);
            self.start_ns = end;
        }
    }

    /// Closes the current window at `end_ns` and clears its histograms.
    fn close_current(&mut self, end_ns: u64) {
        let types = self
            .current
            .iter_mut()
            .enumerate()
            .map(|(t, c)| {
                let h = &c.latency_ns;
                let at = |q: f64| (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1e3);
                let (reserved, stealable) = match self.per_type.get(t) {
                    Some(&(r, s)) => (Some(r), Some(s)),
                    None => (None, None),
                };
                let w = WindowType {
                    completions: h.len(),
                    p50_latency_us: at(0.5),
                    p99_latency_us: at(0.99),
                    p999_latency_us: at(0.999),
                    p999_slowdown: (!c.slowdown_milli.is_empty())
                        .then(|| c.slowdown_milli.value_at_quantile(0.999) as f64 / SLOWDOWN_SCALE),
                    reserved_workers: reserved,
                    stealable_workers: stealable,
                };
                if !c.latency_ns.is_empty() {
                    c.latency_ns.reset();
                    c.slowdown_milli.reset();
                }
                w
            })
            .collect();
        self.windows.push(Window {
            start_s: self.start_ns as f64 / 1e9,
            end_s: end_ns as f64 / 1e9,
            types,
            reservation: self.text.clone(),
        });
    }

    /// Closes the windows up to `end_ns` (the last one, shorter, ends there)
    /// and returns the series.
    pub fn finish(mut self, end_ns: u64) -> TimeSeries {
        self.roll(end_ns);
        if end_ns > self.start_ns {
            self.close_current(end_ns);
        }
        TimeSeries {
            window_s: self.window_ns as f64 / 1e9,
            types: self.names,
            windows: self.windows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn windows_close_at_their_ends_and_completions_land_in_theirs() {
        let mut s = SeriesRecorder::new(["a", "b"], 100 * MS);
        assert_eq!(s.window_end_ns(), 100 * MS);
        s.record(0, 0, 1_000, 1_000);
        s.record(0, 100 * MS - 1, 2_000, 1_000);
        s.close_windows_until(100 * MS - 1, None);
        assert_eq!(s.windows.len(), 0);
        // At exactly 100 ms the first window closes.
        s.close_windows_until(100 * MS, None);
        assert_eq!(s.windows.len(), 1);
        assert_eq!(s.window_end_ns(), 200 * MS);
        // A completion at 350 ms closes [100, 200) and [200, 300), empty.
        s.record(1, 350 * MS, 5_000, 5_000);
        assert_eq!(s.windows.len(), 3);
        let t = s.finish(420 * MS);
        assert_eq!(t.windows.len(), 5);
        let spans: Vec<(f64, f64)> = t.windows.iter().map(|w| (w.start_s, w.end_s)).collect();
        assert_eq!(
            spans,
            vec![(0.0, 0.1), (0.1, 0.2), (0.2, 0.3), (0.3, 0.4), (0.4, 0.42)]
        );
        let counts: Vec<[u64; 2]> = t
            .windows
            .iter()
            .map(|w| [w.types[0].completions, w.types[1].completions])
            .collect();
        assert_eq!(counts, vec![[2, 0], [0, 0], [0, 0], [0, 1], [0, 0]]);
        assert_eq!(t.windows[1].types[0].p99_latency_us, None);
        // HDR's 3 significant digits: within 0.1%.
        let p50 = t.windows[3].types[1].p50_latency_us.unwrap();
        assert!((p50 / 5.0 - 1.0).abs() < 1e-3, "{p50}");
        assert_eq!(t.windows[3].types[1].p999_slowdown, Some(1.0));
        // Ends on a boundary: no empty last window.
        let t = SeriesRecorder::new(["a"], MS).finish(3 * MS);
        assert_eq!(t.windows.len(), 3);
    }

    #[test]
    fn percentiles_are_per_window() {
        let mut s = SeriesRecorder::new(["a"], 10 * MS);
        // Window 0: latencies 1..=1000 us; window 1: 1000 times 7 us.
        for i in 1..=1000u64 {
            s.record(0, i * 1_000, i * 1_000, 1_000);
        }
        for i in 0..1000u64 {
            s.record(0, 10 * MS + i, 7_000, 7_000);
        }
        let t = s.finish(20 * MS);
        let w0 = &t.windows[0].types[0];
        let near = |v: Option<f64>, x: f64| (v.unwrap() / x - 1.0).abs() < 2e-3;
        assert_eq!(w0.completions, 1000);
        assert!(near(w0.p50_latency_us, 500.0), "{w0:?}");
        assert!(near(w0.p99_latency_us, 990.0), "{w0:?}");
        assert!(near(w0.p999_latency_us, 999.0), "{w0:?}");
        assert!(near(w0.p999_slowdown, 999.0), "{w0:?}");
        // Nothing of window 0 leaks into window 1.
        let w1 = &t.windows[1].types[0];
        assert_eq!(w1.completions, 1000);
        assert!(near(w1.p50_latency_us, 7.0) && near(w1.p999_latency_us, 7.0));
        assert!(near(w1.p999_slowdown, 1.0));
    }

    #[test]
    fn each_window_carries_the_reservation_of_its_close() {
        let mut s = SeriesRecorder::new(["a", "b"], MS);
        s.close_windows_until(
            0,
            Some(ReservationView {
                per_type: &[(1, 3), (3, 3)],
                text: "first",
            }),
        );
        s.close_windows_until(
            2 * MS,
            Some(ReservationView {
                per_type: &[(2, 4), (2, 2)],
                text: "second",
            }),
        );
        s.record(0, 3 * MS + 5, 10, 10);
        let t = s.finish(4 * MS);
        let r: Vec<(Option<usize>, Option<usize>, Option<&str>)> = t
            .windows
            .iter()
            .map(|w| {
                (
                    w.types[0].reserved_workers,
                    w.types[1].stealable_workers,
                    w.reservation.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            r,
            vec![
                (Some(1), Some(3), Some("first")),
                (Some(1), Some(3), Some("first")),
                (Some(2), Some(2), Some("second")),
                (Some(2), Some(2), Some("second")),
            ]
        );
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<TimeSeries>(&json).unwrap(), t);
        let none = SeriesRecorder::new(["a"], MS).finish(MS);
        assert_eq!(none.windows[0].types[0].reserved_workers, None);
        assert_eq!(none.windows[0].reservation, None);
    }

    #[test]
    fn window_bounds() {
        assert!(check_window(100 * MS, 20_000 * MS).is_ok());
        assert!(check_window(0, MS).is_err());
        assert!(check_window(MAX_WINDOW_NS + 1, MS).is_err());
        let e = check_window(MIN_WINDOW_NS, 3_600_000 * MS).unwrap_err();
        assert!(e.contains("at most 100000"), "{e}");
    }
}
