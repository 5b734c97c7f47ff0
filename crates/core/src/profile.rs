//! Online service-time profiles: one profiling window of per-type counts and sums.

use crate::request::TypeId;

/// One profiling window: per type, the number of completions and the sum of
/// their service times (the mean is derived when a reservation is computed, so a
/// completion costs two integer additions). `R_i = count_i / total`. Never
/// allocates after construction.
#[derive(Debug, Clone)]
pub struct ProfileWindow {
    counts: Vec<u64>,
    sums_ns: Vec<u64>,
    total: u64,
}

impl ProfileWindow {
    /// An empty window for `types` request types.
    pub fn new(types: usize) -> Self {
        Self {
            counts: vec![0; types],
            sums_ns: vec![0; types],
            total: 0,
        }
    }

    /// Adds one measured service time of type `t`.
    #[inline]
    pub fn record(&mut self, t: TypeId, service_ns: u64) {
        let i = t as usize;
        self.counts[i] += 1;
        self.sums_ns[i] = self.sums_ns[i].saturating_add(service_ns);
        self.total += 1;
    }

    /// Completions in the window, all types.
    #[inline]
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Completions of type `t` in the window.
    #[inline]
    pub fn count(&self, t: TypeId) -> u64 {
        self.counts[t as usize]
    }

    /// Mean service time of type `t` in the window (0 when unseen).
    #[inline]
    pub fn mean_ns(&self, t: TypeId) -> f64 {
        let i = t as usize;
        if self.counts[i] == 0 {
            0.0
        } else {
            self.sums_ns[i] as f64 / self.counts[i] as f64
        }
    }

    /// Occurrence ratio of type `t` in the window.
    #[inline]
    pub fn ratio(&self, t: TypeId) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.counts[t as usize] as f64 / self.total as f64
        }
    }

    /// Starts a new window.
    pub fn reset(&mut self) {
        self.counts.fill(0);
        self.sums_ns.fill(0);
        self.total = 0;
    }

    /// Number of types.
    pub fn types(&self) -> usize {
        self.counts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_mean_and_ratio() {
        let mut w = ProfileWindow::new(2);
        w.record(0, 100);
        w.record(0, 300);
        w.record(1, 1000);
        assert_eq!(w.total(), 3);
        assert!((w.mean_ns(0) - 200.0).abs() < 1e-9);
        assert!((w.ratio(1) - 1.0 / 3.0).abs() < 1e-12);
        w.reset();
        assert_eq!(w.total(), 0);
        assert_eq!(w.ratio(0), 0.0);
    }
}
