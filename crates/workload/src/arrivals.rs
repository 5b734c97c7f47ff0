//! Arrival sources: an open-loop Poisson process over a workload's mix, or a
//! fixed trace (tests, replays).

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp1};

use crate::workload::{ServiceSampler, Workload};
use psp_core::{Nanos, TypeId};

/// One request arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Arrival time.
    pub at_ns: Nanos,
    /// Request type.
    pub type_id: TypeId,
    /// Pure service time the request needs.
    pub service_ns: Nanos,
}

/// Produces arrivals in non-decreasing time order.
pub trait ArrivalSource {
    /// The next arrival, or `None` when the source is exhausted.
    fn next_arrival(&mut self) -> Option<Arrival>;
}

/// Poisson arrivals at `rate_rps` for `duration_ns`; types drawn by ratio, service
/// times from each type's distribution. Deterministic for a seed.
#[derive(Debug, Clone)]
pub struct PoissonArrivals {
    rng: SmallRng,
    mean_gap_ns: f64,
    t_ns: f64,
    end_ns: f64,
    cumulative: Vec<f64>,
    samplers: Vec<ServiceSampler>,
}

impl PoissonArrivals {
    /// Arrivals of `workload` at `rate_rps` during `duration_ns`.
    pub fn new(workload: &Workload, rate_rps: f64, duration_ns: Nanos, seed: u64) -> Self {
        let mut acc = 0.0;
        let mut cumulative: Vec<f64> = workload
            .types
            .iter()
            .map(|t| {
                acc += t.ratio;
                acc
            })
            .collect();
        if let Some(last) = cumulative.last_mut() {
            *last = f64::INFINITY; // rounding never leaves a draw unassigned
        }
        Self {
            rng: SmallRng::seed_from_u64(seed),
            mean_gap_ns: 1e9 / rate_rps,
            t_ns: 0.0,
            end_ns: duration_ns as f64,
            cumulative,
            samplers: workload.types.iter().map(|t| t.service.sampler()).collect(),
        }
    }
}

impl ArrivalSource for PoissonArrivals {
    #[inline]
    fn next_arrival(&mut self) -> Option<Arrival> {
        let gap: f64 = Exp1.sample(&mut self.rng);
        self.t_ns += gap * self.mean_gap_ns;
        if self.t_ns >= self.end_ns {
            return None;
        }
        let u: f64 = self.rng.random();
        let t = self.cumulative.iter().position(|&c| u < c).unwrap_or(0);
        let service_ns = self.samplers[t].sample(&mut self.rng);
        Some(Arrival {
            at_ns: self.t_ns as Nanos,
            type_id: t as TypeId,
            service_ns,
        })
    }
}

/// Consecutive phases, each its own workload (same type table) at its own rate
/// for its own duration: the workload-change experiment. Times run on across
/// phases.
#[derive(Debug, Clone)]
pub struct PhasedArrivals {
    phases: Vec<(PoissonArrivals, Nanos)>,
    current: usize,
    offset_ns: Nanos,
}

impl PhasedArrivals {
    /// Phases of `(workload, rate_rps, duration_ns)`; each phase gets its own
    /// stream derived from `seed`.
    ///
    /// # Panics
    /// If the phases' type counts differ (a phase changes the mix, not the types).
    pub fn new(phases: &[(&Workload, f64, Nanos)], seed: u64) -> Self {
        if let Some((first, _, _)) = phases.first() {
            assert!(
                phases
                    .iter()
                    .all(|(w, _, _)| w.types.len() == first.types.len()),
                "every phase must have the same types"
            );
        }
        Self {
            phases: phases
                .iter()
                .enumerate()
                .map(|(i, (w, rate, d))| {
                    (
                        PoissonArrivals::new(w, *rate, *d, seed.wrapping_add(i as u64)),
                        *d,
                    )
                })
                .collect(),
            current: 0,
            offset_ns: 0,
        }
    }
}

impl ArrivalSource for PhasedArrivals {
    fn next_arrival(&mut self) -> Option<Arrival> {
        while let Some((source, duration)) = self.phases.get_mut(self.current) {
            if let Some(mut a) = source.next_arrival() {
                a.at_ns += self.offset_ns;
                return Some(a);
            }
            self.offset_ns += *duration;
            self.current += 1;
        }
        None
    }
}

/// A fixed list of arrivals.
#[derive(Debug, Clone)]
pub struct TraceArrivals(std::vec::IntoIter<Arrival>);

impl TraceArrivals {
    /// Arrivals in the given order (must be sorted by time).
    pub fn new(mut arrivals: Vec<Arrival>) -> Self {
        arrivals.sort_by_key(|a| a.at_ns);
        Self(arrivals.into_iter())
    }
}

impl ArrivalSource for TraceArrivals {
    fn next_arrival(&mut self) -> Option<Arrival> {
        self.0.next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_follow_each_other_in_time_and_mix() {
        let a = Workload::fixed("a", &[("x", 1.0, 0.9), ("y", 10.0, 0.1)]);
        let b = Workload::fixed("b", &[("x", 10.0, 0.1), ("y", 1.0, 0.9)]);
        let mut p = PhasedArrivals::new(&[(&a, 1e6, 10_000_000), (&b, 1e6, 10_000_000)], 3);
        let all: Vec<Arrival> = std::iter::from_fn(|| p.next_arrival()).collect();
        assert!(all.windows(2).all(|w| w[0].at_ns <= w[1].at_ns));
        let (first, second): (Vec<_>, Vec<_>) = all.iter().partition(|x| x.at_ns < 10_000_000);
        let share_x =
            |v: &[&Arrival]| v.iter().filter(|a| a.type_id == 0).count() as f64 / v.len() as f64;
        assert!((share_x(&first) - 0.9).abs() < 0.03 && (share_x(&second) - 0.1).abs() < 0.03);
        assert!(second.iter().all(|a| a.at_ns < 20_000_000));
        assert!(
            second
                .iter()
                .filter(|a| a.type_id == 1)
                .all(|a| a.service_ns == 1_000)
        );
    }
}
