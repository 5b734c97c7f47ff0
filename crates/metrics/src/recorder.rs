//! Per-type latency and slowdown recording for one point.
//!
//! An executor calls [`Recorder::record`] for each measured completion and
//! [`Recorder::record_drop`] for each measured drop; [`Recorder::overall`] and [`Recorder::type_stats`] turn the
//! histograms into the schema's statistics. Percentiles come from HDR histograms with
//! 3 significant digits (relative error at most 0.1%, well inside the 1% budget).
//! Histograms are allocated with fixed bounds up front: recording never allocates.
//! For a live exporter ([`Recorder::track_live_digests`]) it also keeps each
//! type's service-time histogram and coarse bucket counts, and reads a type's
//! distributions into a fixed-size [`Digest`] without allocating.

use hdrhistogram::Histogram;

use crate::schema::{OverallStats, TypeStats};

/// Slowdowns are stored as integers in thousandths.
pub(crate) const SLOWDOWN_SCALE: f64 = 1000.0;
const SIGFIG: u8 = 3;
/// Largest recordable value: 2^42 ns (73 minutes) of latency, or a slowdown of
/// 4.4e9; larger values are clamped (and would be absurd in any run).
const MAX_VALUE: u64 = 1 << 42;

pub(crate) fn new_histogram() -> Histogram<u64> {
    // Fixed bounds, allocated once: recording never resizes.
    Histogram::new_with_bounds(1, MAX_VALUE, SIGFIG).expect("valid HDR bounds and precision")
}

/// Latency and slowdown of one request type.
#[derive(Debug, Clone)]
pub struct TypeRecorder {
    /// Type name.
    pub name: String,
    latency_ns: Histogram<u64>,
    slowdown_milli: Histogram<u64>,
    service_sum_ns: u128,
    latency_sum_ns: u128,
    /// Measured completions.
    pub count: u64,
    /// Measured drops at a full queue.
    pub dropped: u64,
    /// Measured requests that got no answer in time (network client).
    pub timeouts: u64,
    /// Measured requests answered with an error (network client).
    pub errors: u64,
    /// What live digests need beyond the reports, kept only when asked for
    /// ([`Recorder::track_live_digests`]): a third histogram and two bucket
    /// increments per record cost memory and time the simulator does not pay.
    live: Option<Box<Live>>,
}

/// The live part of a [`TypeRecorder`].
#[derive(Debug, Clone)]
struct Live {
    service_ns: Histogram<u64>,
    /// Samples per bucket of [`DIGEST_BOUNDS_NS`], counted as they are recorded
    /// (reading them from the histograms would scan thousands of bins).
    latency_buckets: [u64; DIGEST_BUCKETS],
    service_buckets: [u64; DIGEST_BUCKETS],
}

impl TypeRecorder {
    fn new(name: String) -> Self {
        Self {
            name,
            latency_ns: new_histogram(),
            slowdown_milli: new_histogram(),
            live: None,
            service_sum_ns: 0,
            latency_sum_ns: 0,
            count: 0,
            dropped: 0,
            timeouts: 0,
            errors: 0,
        }
    }

    /// Sum of the measured latencies, in ns.
    pub fn latency_sum_ns(&self) -> u128 {
        self.latency_sum_ns
    }

    /// Sum of the measured service times, in ns.
    pub fn service_sum_ns(&self) -> u128 {
        self.service_sum_ns
    }

    /// The latency distribution into `out`, without allocating: count, sum and
    /// buckets always (a copy), the quantiles only with `quantiles` (a scan of
    /// the histogram: about 10 µs; without it `out` keeps the quantiles it
    /// had). `false`, and `out` untouched, unless live digests are tracked
    /// ([`Recorder::track_live_digests`]).
    pub fn latency_digest(&self, out: &mut Digest, quantiles: bool) -> bool {
        let Some(live) = &self.live else {
            return false;
        };
        out.count = self.count;
        out.sum_ns = self.latency_sum_ns;
        out.buckets = live.latency_buckets;
        if quantiles {
            out.read_quantiles(&self.latency_ns);
        }
        true
    }

    /// The service-time distribution into `out`, as
    /// [`latency_digest`](Self::latency_digest) does.
    pub fn service_digest(&self, out: &mut Digest, quantiles: bool) -> bool {
        let Some(live) = &self.live else {
            return false;
        };
        out.count = self.count;
        out.sum_ns = self.service_sum_ns;
        out.buckets = live.service_buckets;
        if quantiles {
            out.read_quantiles(&live.service_ns);
        }
        true
    }
}

/// Quantiles a [`Digest`] holds.
pub const DIGEST_QUANTILES: [f64; 3] = [0.5, 0.99, 0.999];

/// Upper bounds (ns, inclusive) of a [`Digest`]'s buckets: 1, 2.5 and 5 per
/// decade from 1 µs to 10 s. One more bucket holds the values above the last.
pub const DIGEST_BOUNDS_NS: [u64; DIGEST_BUCKETS - 1] = [
    1_000,
    2_500,
    5_000,
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// Buckets of a [`Digest`]: one per bound of [`DIGEST_BOUNDS_NS`], and one
/// above them.
pub const DIGEST_BUCKETS: usize = 23;

/// The bucket of `v`: the first whose bound is at least `v`.
#[inline]
fn bucket_of(v: u64) -> usize {
    DIGEST_BOUNDS_NS.partition_point(|&b| b < v)
}

/// A fixed-size summary of one distribution of durations, for live export: the
/// count, the sum, the values at [`DIGEST_QUANTILES`] (as the HDR histogram
/// gives them: within 0.1%) and the exact counts per bucket of
/// [`DIGEST_BOUNDS_NS`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Digest {
    /// Values recorded.
    pub count: u64,
    /// Their sum, in ns.
    pub sum_ns: u128,
    /// Values (ns) at [`DIGEST_QUANTILES`]; 0 when nothing was recorded.
    pub quantiles_ns: [u64; DIGEST_QUANTILES.len()],
    /// Values per bucket (not cumulative): `buckets[i]` counts those at most
    /// `DIGEST_BOUNDS_NS[i]` and above the previous bound; the last one those
    /// above every bound.
    pub buckets: [u64; DIGEST_BUCKETS],
}

impl Digest {
    /// The values at [`DIGEST_QUANTILES`] from `h` (exactly
    /// `Histogram::value_at_quantile`'s, whose chunked scan is an order of
    /// magnitude faster than iterating the bins).
    fn read_quantiles(&mut self, h: &Histogram<u64>) {
        // An empty histogram would be scanned to its end for nothing.
        if h.is_empty() {
            self.quantiles_ns = [0; DIGEST_QUANTILES.len()];
            return;
        }
        for (v, &q) in self.quantiles_ns.iter_mut().zip(&DIGEST_QUANTILES) {
            *v = h.value_at_quantile(q);
        }
    }
}

/// Per-type and overall recording for one point.
#[derive(Debug, Clone)]
pub struct Recorder {
    types: Vec<TypeRecorder>,
}

/// Slowdown of a request: time in the server over its pure service time.
#[inline]
pub fn slowdown(latency_ns: u64, service_ns: u64) -> f64 {
    latency_ns as f64 / service_ns.max(1) as f64
}

/// `slowdown(latency_ns, service_ns)` in thousandths, rounded half away from
/// zero: `(slowdown * SLOWDOWN_SCALE).round() as u64`, exactly, without the
/// `round` library call (x86-64's baseline has no rounding instruction, and
/// this runs once per simulated request).
#[inline]
pub(crate) fn slowdown_milli(latency_ns: u64, service_ns: u64) -> u64 {
    let x = slowdown(latency_ns, service_ns) * SLOWDOWN_SCALE;
    let whole = x as u64; // truncates; x >= 0
    // Exact: for x >= 1 the truncation is at least x / 2 (Sterbenz), and for
    // x < 1 it is 0. Above 2^53 x is whole and the difference is 0.
    if x - whole as f64 >= 0.5 {
        whole.saturating_add(1)
    } else {
        whole
    }
}

impl Recorder {
    /// A recorder for the given type names (index = type id).
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(type_names: I) -> Self {
        Self {
            types: type_names
                .into_iter()
                .map(|n| TypeRecorder::new(n.into()))
                .collect(),
        }
    }

    /// Records one completed request of type `type_id`: its latency (arrival to
    /// completion) and its pure service time.
    ///
    /// # Panics
    /// If `type_id` is not a type of this recorder.
    #[inline]
    pub fn record(&mut self, type_id: usize, latency_ns: u64, service_ns: u64) {
        let t = &mut self.types[type_id];
        let sd = slowdown_milli(latency_ns, service_ns);
        // Values beyond MAX_VALUE are clamped rather than lost.
        t.latency_ns.saturating_record(latency_ns.max(1));
        t.slowdown_milli.saturating_record(sd.max(1));
        t.service_sum_ns += u128::from(service_ns);
        t.latency_sum_ns += u128::from(latency_ns);
        t.count += 1;
        if let Some(live) = &mut t.live {
            live.service_ns.saturating_record(service_ns.max(1));
            live.latency_buckets[bucket_of(latency_ns)] += 1;
            live.service_buckets[bucket_of(service_ns)] += 1;
        }
    }

    /// Keeps what live digests need from now on ([`TypeRecorder::latency_digest`],
    /// [`TypeRecorder::service_digest`]): allocates a histogram per type, once.
    /// Samples recorded before are in the counts, sums and latency quantiles
    /// only.
    pub fn track_live_digests(&mut self) {
        for t in &mut self.types {
            t.live.get_or_insert_with(|| {
                Box::new(Live {
                    service_ns: new_histogram(),
                    latency_buckets: [0; DIGEST_BUCKETS],
                    service_buckets: [0; DIGEST_BUCKETS],
                })
            });
        }
    }

    /// Records one request of type `type_id` dropped at a full queue.
    #[inline]
    pub fn record_drop(&mut self, type_id: usize) {
        self.types[type_id].dropped += 1;
    }

    /// Records one request of type `type_id` that got no answer in time.
    #[inline]
    pub fn record_timeout(&mut self, type_id: usize) {
        self.types[type_id].timeouts += 1;
    }

    /// Records one request of type `type_id` answered with an error.
    #[inline]
    pub fn record_error(&mut self, type_id: usize) {
        self.types[type_id].errors += 1;
    }

    /// Measured timeouts, all types.
    pub fn timeouts(&self) -> u64 {
        self.types.iter().map(|t| t.timeouts).sum()
    }

    /// Measured error answers, all types.
    pub fn errors(&self) -> u64 {
        self.types.iter().map(|t| t.errors).sum()
    }

    /// Per-type recorders, in type order.
    pub fn types(&self) -> &[TypeRecorder] {
        &self.types
    }

    /// Measured completions, all types.
    pub fn completed(&self) -> u64 {
        self.types.iter().map(|t| t.count).sum()
    }

    /// The smallest slowdown recorded, all types (`None` before the first
    /// completion). Below 1, some request's latency was shorter than its own
    /// service time: its two ends were stamped on different clocks.
    pub fn min_slowdown(&self) -> Option<f64> {
        self.types
            .iter()
            .filter(|t| t.count > 0)
            .map(|t| t.slowdown_milli.min() as f64 / SLOWDOWN_SCALE)
            .min_by(f64::total_cmp)
    }

    /// Measured drops, all types.
    pub fn dropped(&self) -> u64 {
        self.types.iter().map(|t| t.dropped).sum()
    }

    /// The overall slowdown percentiles: the per-type histograms merged (derived
    /// here rather than recorded twice on every completion).
    pub fn overall(&self) -> OverallStats {
        let mut h = new_histogram();
        for t in &self.types {
            // Same bounds and precision on both sides: merging cannot fail.
            h.add(&t.slowdown_milli)
                .expect("histograms share their bounds");
        }
        OverallStats {
            count: h.len(),
            p50_slowdown: slowdown_at(&h, 0.5),
            p99_slowdown: slowdown_at(&h, 0.99),
            p999_slowdown: slowdown_at(&h, 0.999),
        }
    }

    /// Per-type statistics, in type order.
    pub fn type_stats(&self) -> Vec<TypeStats> {
        self.types
            .iter()
            .map(|t| {
                let n = t.count.max(1) as f64;
                TypeStats {
                    name: t.name.clone(),
                    count: t.count,
                    mean_service_us: t.service_sum_ns as f64 / n / 1e3,
                    mean_latency_us: t.latency_sum_ns as f64 / n / 1e3,
                    p50_latency_us: latency_us_at(&t.latency_ns, 0.5),
                    p99_latency_us: latency_us_at(&t.latency_ns, 0.99),
                    p999_latency_us: latency_us_at(&t.latency_ns, 0.999),
                    p50_slowdown: slowdown_at(&t.slowdown_milli, 0.5),
                    p99_slowdown: slowdown_at(&t.slowdown_milli, 0.99),
                    p999_slowdown: slowdown_at(&t.slowdown_milli, 0.999),
                    // Set by `PointResult::new`, which knows the window.
                    throughput_rps: 0.0,
                    dropped: t.dropped,
                    timeouts: t.timeouts,
                    errors: t.errors,
                }
            })
            .collect()
    }
}

fn slowdown_at(h: &Histogram<u64>, q: f64) -> f64 {
    if h.is_empty() {
        return 0.0;
    }
    h.value_at_quantile(q) as f64 / SLOWDOWN_SCALE
}

fn latency_us_at(h: &Histogram<u64>, q: f64) -> f64 {
    if h.is_empty() {
        return 0.0;
    }
    h.value_at_quantile(q) as f64 / 1e3
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Nearest-rank percentile of a sorted sample.
    fn brute(sorted: &[u64], q: f64) -> u64 {
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    }

    fn rounded_milli(latency_ns: u64, service_ns: u64) -> u64 {
        (slowdown(latency_ns, service_ns) * SLOWDOWN_SCALE).round() as u64
    }

    #[test]
    fn slowdown_milli_rounds_like_round_at_the_edges() {
        // Halves (x.5 thousandths) and values around them, tiny and huge ones.
        for (l, s) in [
            (1, 2000),
            (3, 2000),
            (1, 1),
            (0, 5),
            (1, 3),
            (2, 3),
            (u64::MAX, 1),
            (1 << 53, 1),
            ((1 << 53) + 1, 3),
            (1_000_000_000_007, 2_000),
        ] {
            assert_eq!(slowdown_milli(l, s), rounded_milli(l, s), "{l}/{s}");
        }
    }

    proptest! {
        #[test]
        fn slowdown_milli_is_round(l in 0u64..u64::MAX, s in 0u64..u64::MAX,
                                   small_l in 0u64..100_000, small_s in 0u64..100_000) {
            prop_assert_eq!(slowdown_milli(l, s), rounded_milli(l, s));
            prop_assert_eq!(slowdown_milli(small_l, small_s), rounded_milli(small_l, small_s));
            prop_assert_eq!(slowdown_milli(l >> 20, s >> 40), rounded_milli(l >> 20, s >> 40));
        }
    }

    fn within(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(1e-9)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(40))]
        /// Histogram percentiles agree with a brute-force sort within 1%.
        #[test]
        fn percentiles_match_brute_force(
            lat in proptest::collection::vec(1u64..50_000_000, 1..3000),
            svc in 1u64..100_000,
        ) {
            let mut r = Recorder::new(["t"]);
            for &l in &lat {
                r.record(0, l, svc);
            }
            let mut sorted = lat.clone();
            sorted.sort_unstable();
            let ts = &r.type_stats()[0];
            for (q, got) in [(0.5, ts.p50_latency_us), (0.99, ts.p99_latency_us), (0.999, ts.p999_latency_us)] {
                let want = brute(&sorted, q) as f64 / 1e3;
                prop_assert!(within(got, want, 0.01), "q={q} got={got} want={want}");
            }
            let want_sd = sorted.iter().map(|&l| slowdown(l, svc)).collect::<Vec<_>>();
            let ov = r.overall();
            let idx = ((0.999 * want_sd.len() as f64).ceil() as usize).clamp(1, want_sd.len()) - 1;
            prop_assert!(within(ov.p999_slowdown, want_sd[idx], 0.01));
            prop_assert_eq!(ov.count, lat.len() as u64);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(40))]
        /// A digest's quantiles are the histogram's own, and its buckets hold
        /// every value, each in the bucket its bound says.
        #[test]
        fn digests_agree_with_the_histogram(
            lat in proptest::collection::vec(1u64..20_000_000_000, 1..2000),
        ) {
            let mut r = Recorder::new(["t"]);
            r.track_live_digests();
            for &l in &lat {
                r.record(0, l, l / 2);
            }
            let t = &r.types()[0];
            let mut d = Digest::default();
            prop_assert!(t.latency_digest(&mut d, true));
            prop_assert_eq!(d.count, lat.len() as u64);
            prop_assert_eq!(d.sum_ns, lat.iter().map(|&l| u128::from(l)).sum::<u128>());
            for (i, &q) in DIGEST_QUANTILES.iter().enumerate() {
                prop_assert_eq!(d.quantiles_ns[i], t.latency_ns.value_at_quantile(q));
            }
            let mut below = 0;
            for (i, &bound) in DIGEST_BOUNDS_NS.iter().enumerate() {
                below += d.buckets[i];
                prop_assert_eq!(below, lat.iter().filter(|&&l| l <= bound).count() as u64);
            }
            prop_assert_eq!(d.buckets.iter().sum::<u64>(), lat.len() as u64);
            let mut s = Digest::default();
            prop_assert!(t.service_digest(&mut s, true));
            prop_assert_eq!(s.count, lat.len() as u64);
            let svc = &t.live.as_ref().unwrap().service_ns;
            prop_assert_eq!(s.quantiles_ns[2], svc.value_at_quantile(0.999));
            prop_assert_eq!(
                s.buckets[0],
                lat.iter().filter(|&&l| l / 2 <= DIGEST_BOUNDS_NS[0]).count() as u64
            );
        }
    }

    #[test]
    fn digests_are_opt_in_and_quantiles_read_on_request() {
        let mut r = Recorder::new(["t"]);
        let mut d = Digest::default();
        assert!(!r.types()[0].latency_digest(&mut d, true));
        assert!(!r.types()[0].service_digest(&mut d, true));
        r.track_live_digests();
        assert!(r.types()[0].latency_digest(&mut d, true));
        assert_eq!(d, Digest::default(), "empty");
        // (Exact below 2,048 ns: the HDR histogram's unit bins.)
        r.record(0, 1_500, 500);
        // Without quantiles, the rest is fresh and the quantiles are as they were.
        assert!(r.types()[0].latency_digest(&mut d, false));
        assert_eq!((d.count, d.sum_ns, d.quantiles_ns), (1, 1_500, [0; 3]));
        assert_eq!(d.buckets[1], 1, "in (1, 2.5] us");
        assert!(r.types()[0].latency_digest(&mut d, true));
        assert_eq!(d.quantiles_ns, [1_500; 3]);
    }

    #[test]
    fn means_and_drops_are_counted() {
        let mut r = Recorder::new(["a", "b"]);
        r.record(0, 2_000, 1_000);
        r.record(0, 4_000, 1_000);
        r.record_drop(1);
        let ts = r.type_stats();
        assert_eq!(ts[0].count, 2);
        assert!(within(ts[0].mean_latency_us, 3.0, 1e-9));
        assert!(within(ts[0].mean_service_us, 1.0, 1e-9));
        assert_eq!(ts[1].dropped, 1);
        assert_eq!(r.dropped(), 1);
        assert_eq!(r.completed(), 2);
    }
}
