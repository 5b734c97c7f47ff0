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
