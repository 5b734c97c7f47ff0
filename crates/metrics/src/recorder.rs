//! Per-type latency and slowdown recording for one point.
//!
//! An executor calls [`Recorder::record`] for each measured completion and
//! [`Recorder::record_drop`] for each measured drop; [`Recorder::summarize`] turns the
//! histograms into the schema's statistics. Percentiles come from HDR histograms with
//! 3 significant digits (relative error at most 0.1%, well inside the 1% budget).
//! Histograms are allocated with fixed bounds up front: recording never allocates.

use hdrhistogram::Histogram;

use crate::schema::{OverallStats, TypeStats};

/// Slowdowns are stored as integers in thousandths.
const SLOWDOWN_SCALE: f64 = 1000.0;
const SIGFIG: u8 = 3;
/// Largest recordable value: 2^42 ns (73 minutes) of latency, or a slowdown of
/// 4.4e9; larger values are clamped (and would be absurd in any run).
const MAX_VALUE: u64 = 1 << 42;

fn new_histogram() -> Histogram<u64> {
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
}

impl TypeRecorder {
    fn new(name: String) -> Self {
        Self {
            name,
            latency_ns: new_histogram(),
            slowdown_milli: new_histogram(),
            service_sum_ns: 0,
            latency_sum_ns: 0,
            count: 0,
            dropped: 0,
            timeouts: 0,
            errors: 0,
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
        let sd = (slowdown(latency_ns, service_ns) * SLOWDOWN_SCALE).round() as u64;
        // Values beyond MAX_VALUE are clamped rather than lost.
        t.latency_ns.saturating_record(latency_ns.max(1));
        t.slowdown_milli.saturating_record(sd.max(1));
        t.service_sum_ns += u128::from(service_ns);
        t.latency_sum_ns += u128::from(latency_ns);
        t.count += 1;
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
