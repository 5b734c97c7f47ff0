//! Arrival sources: an open-loop Poisson process over a workload's mix, its
//! phases one after the other, or a fixed trace (tests, replays). Closed-loop
//! clients are in [`crate::closed`].
//!
//! Executors build a point's arrivals with [`Arrivals::new`]: Poisson arrivals
//! of the workload, or of its phases when it has some. It is an enum, not a
//! trait object, so that the simulator's loop dispatches statically.

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp1};

use crate::closed::ClosedLoop;
use crate::workload::{ServiceSampler, Workload};
use psp_core::policy::ws::flow_hash;
use psp_core::{FlowId, Nanos, TypeId};

/// Client flows a point's arrivals come from unless set otherwise (SYNERGY's
/// load generator's default).
pub const DEFAULT_FLOWS: u32 = 512;
/// Most flows: a flow id is a [`FlowId`].
pub const MAX_FLOWS: u32 = 1 << 16;

/// Which of `flows` flows arrival number `n` of a stream keyed `key` comes
/// on: uniform and independent of everything else drawn (a hash, not the
/// stream's generator, so that flows never change the arrival times, types
/// or service times of a seed), as when each request picks a client
/// connection at random.
#[inline]
fn flow_of(key: u64, n: u64, flows: u32) -> FlowId {
    (flow_hash(key ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15)) % u64::from(flows.max(1))) as FlowId
}

/// One request arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Arrival time.
    pub at_ns: Nanos,
    /// Request type.
    pub type_id: TypeId,
    /// Pure service time the request needs.
    pub service_ns: Nanos,
    /// The client flow it comes on (RSS steering in decentralized policies).
    pub flow: FlowId,
}

/// Produces arrivals in non-decreasing time order.
///
/// Open-loop sources only implement [`ArrivalSource::next_arrival`]. A
/// closed-loop source ([`crate::ClosedLoop`]) also hears when each of its
/// requests ends ([`ArrivalSource::on_done`]), which may schedule an arrival
/// earlier than the one its executor holds.
pub trait ArrivalSource {
    /// The next arrival, or `None` when the source is exhausted (for now:
    /// a closed-loop source may have more after an [`ArrivalSource::on_done`]).
    fn next_arrival(&mut self) -> Option<Arrival>;

    /// Whether later arrivals depend on when earlier requests end: the
    /// executor must then call [`ArrivalSource::on_done`] for every request it
    /// was given. Open-loop sources: `false`.
    fn closed_loop(&self) -> bool {
        false
    }

    /// A request that came on `flow` ended: answered, or refused (`refused`),
    /// and its client learns it at `at_ns` (not before the current event).
    /// `next` is the arrival the executor holds (the last one
    /// [`ArrivalSource::next_arrival`] gave, not yet arrived, or `None` when
    /// the source was exhausted); the source may replace it with an earlier
    /// one (taking it back) or fill it. Open-loop sources ignore the call.
    #[inline]
    fn on_done(&mut self, flow: FlowId, at_ns: Nanos, refused: bool, next: &mut Option<Arrival>) {
        let _ = (flow, at_ns, refused, next);
    }
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
    flows: u32,
    flow_key: u64,
    n: u64,
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
        // Rounding never leaves a draw unassigned: the last type that occurs
        // takes everything above (a type of ratio 0 after it is never drawn).
        if let Some(last) = workload.types.iter().rposition(|t| t.ratio > 0.0) {
            cumulative[last] = f64::INFINITY;
        }
        Self {
            rng: SmallRng::seed_from_u64(seed),
            mean_gap_ns: 1e9 / rate_rps,
            t_ns: 0.0,
            end_ns: duration_ns as f64,
            cumulative,
            samplers: workload.types.iter().map(|t| t.service.sampler()).collect(),
            flows: DEFAULT_FLOWS,
            flow_key: flow_hash(seed ^ 0xf10f),
            n: 0,
        }
    }

    /// The same arrivals, coming on `flows` (1..=[`MAX_FLOWS`], clamped) client
    /// flows instead of [`DEFAULT_FLOWS`].
    pub fn with_flows(mut self, flows: u32) -> Self {
        self.flows = flows.clamp(1, MAX_FLOWS);
        self
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
        self.n += 1;
        Some(Arrival {
            at_ns: self.t_ns as Nanos,
            type_id: t as TypeId,
            service_ns,
            flow: flow_of(self.flow_key, self.n, self.flows),
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

impl PhasedArrivals {
    /// Every phase's arrivals on `flows` client flows
    /// ([`PoissonArrivals::with_flows`]).
    pub fn with_flows(mut self, flows: u32) -> Self {
        for (p, _) in &mut self.phases {
            p.flows = flows.clamp(1, MAX_FLOWS);
        }
        self
    }
}

impl ArrivalSource for PhasedArrivals {
    #[inline]
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

/// A point's arrivals: [`PoissonArrivals`] of a workload without phases,
/// [`PhasedArrivals`] of its phases, or closed-loop clients. One type for
/// every kind, so that an executor's loop is compiled once.
#[derive(Debug, Clone)]
pub enum Arrivals {
    /// One stationary phase.
    Poisson(PoissonArrivals),
    /// The workload's phases, one after the other.
    Phased(PhasedArrivals),
    /// Closed-loop clients ([`ClosedLoop`]).
    Closed(ClosedLoop),
}

impl Arrivals {
    /// Arrivals of `workload` at a point offering `rate_rps` for `duration_ns`
    /// on `workers` workers, from `seed`.
    ///
    /// Without phases: `PoissonArrivals::new(workload, rate_rps, duration_ns,
    /// seed)`, the same stream. With phases: each phase
    /// ([`Workload::phase`]) at its rate ([`Workload::phase_rate_rps`]: its
    /// `rps`, its `load` of its own peak on `workers`, or `rate_rps`) for its
    /// duration; `duration_ns` is then not used, and the arrival period is
    /// [`Workload::arrival_period_ns`]. Phase `k` draws from stream `seed + k`
    /// (phase 0's is the stationary stream of `seed`).
    pub fn new(
        workload: &Workload,
        rate_rps: f64,
        duration_ns: Nanos,
        workers: usize,
        seed: u64,
    ) -> Self {
        if workload.phases.is_empty() {
            return Self::Poisson(PoissonArrivals::new(workload, rate_rps, duration_ns, seed));
        }
        let phases: Vec<Workload> = (0..workload.phases.len())
            .map(|k| workload.phase(k))
            .collect();
        let plan = workload.arrival_plan(rate_rps, duration_ns, workers);
        let spec: Vec<(&Workload, f64, Nanos)> = phases
            .iter()
            .zip(&plan)
            .map(|(w, &(rate, d))| (w, rate, d))
            .collect();
        Self::Phased(PhasedArrivals::new(&spec, seed))
    }
}

impl Arrivals {
    /// The same arrivals on `flows` client flows
    /// ([`PoissonArrivals::with_flows`]); closed-loop clients are left as they
    /// are (each connection is a flow).
    pub fn with_flows(self, flows: u32) -> Self {
        match self {
            Self::Poisson(p) => Self::Poisson(p.with_flows(flows)),
            Self::Phased(p) => Self::Phased(p.with_flows(flows)),
            Self::Closed(c) => Self::Closed(c),
        }
    }
}

impl ArrivalSource for Arrivals {
    #[inline]
    fn next_arrival(&mut self) -> Option<Arrival> {
        match self {
            Self::Poisson(p) => p.next_arrival(),
            Self::Phased(p) => p.next_arrival(),
            Self::Closed(c) => c.next_arrival(),
        }
    }

    fn closed_loop(&self) -> bool {
        matches!(self, Self::Closed(_))
    }

    #[inline]
    fn on_done(&mut self, flow: FlowId, at_ns: Nanos, refused: bool, next: &mut Option<Arrival>) {
        if let Self::Closed(c) = self {
            c.on_done(flow, at_ns, refused, next);
        }
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

    fn phased() -> Workload {
        Workload::parse(
            r#"
name = "p"
[[types]]
name = "a"
ratio = 0.5
service = { dist = "fixed", us = 1.0 }
[[types]]
name = "b"
ratio = 0.5
service = { dist = "fixed", us = 100.0 }
[[phases]]
duration_s = 0.01
[[phases]]
name = "swap"
duration_s = 0.02
rps = 2e5
[[phases.types]]
name = "a"
service = { dist = "fixed", us = 100.0 }
[[phases.types]]
name = "b"
service = { dist = "fixed", us = 1.0 }
[[phases]]
name = "a only"
duration_s = 0.005
load = 0.5
[[phases.types]]
name = "a"
ratio = 1
[[phases.types]]
name = "b"
ratio = 0
"#,
            "t",
        )
        .unwrap()
    }

    #[test]
    fn without_phases_the_stream_is_poisson_bit_for_bit() {
        let w = Workload::resolve("extreme-bimodal").unwrap();
        let mut a = Arrivals::new(&w, 1e6, 5_000_000, 16, 42);
        let mut p = PoissonArrivals::new(&w, 1e6, 5_000_000, 42);
        assert!(matches!(a, Arrivals::Poisson(_)));
        let mut n = 0;
        loop {
            let (x, y) = (a.next_arrival(), p.next_arrival());
            assert_eq!(x, y);
            if x.is_none() {
                break;
            }
            n += 1;
        }
        assert!(n > 4_000, "{n}");
    }

    #[test]
    fn arrivals_of_phase_k_lie_in_its_interval_with_its_mix_and_service() {
        let w = phased();
        let bounds = w.phase_boundaries();
        assert_eq!(
            bounds,
            vec![
                (0.0, "phase 0".to_string()),
                (0.01, "swap".to_string()),
                (0.03, "a only".to_string())
            ]
        );
        assert_eq!(w.arrival_period_ns(1), 35_000_000);
        // Point rate 1e6 (phase 0); phase 1 2e5; phase 2 half of 4 workers / 1 us.
        let rates = [1e6, 2e5, 0.5 * 4.0 / 1e-6];
        let plan = w.arrival_plan(1e6, 1, 4);
        for (k, &(r, _)) in plan.iter().enumerate() {
            assert!((r / rates[k] - 1.0).abs() < 1e-9, "{k}: {r}");
        }
        let ends = [10_000_000u64, 30_000_000, 35_000_000];
        let starts = [0u64, 10_000_000, 30_000_000];
        let all: Vec<Arrival> = {
            let mut a = Arrivals::new(&w, 1e6, 1, 4, 9);
            std::iter::from_fn(|| a.next_arrival()).collect()
        };
        assert!(all.windows(2).all(|p| p[0].at_ns <= p[1].at_ns));
        assert!(all.last().unwrap().at_ns < 35_000_000);
        let of = |k: usize| -> Vec<&Arrival> {
            all.iter()
                .filter(|a| a.at_ns >= starts[k] && a.at_ns < ends[k])
                .collect()
        };
        // Counts follow the rates (Poisson: within 5 sigma).
        for k in 0..3 {
            let expect = rates[k] * (ends[k] - starts[k]) as f64 / 1e9;
            let n = of(k).len() as f64;
            assert!(
                (n - expect).abs() < 5.0 * expect.sqrt(),
                "{k}: {n} vs {expect}"
            );
        }
        // Phase 0: base service times, half a.
        let p0 = of(0);
        assert!(
            p0.iter()
                .all(|a| a.service_ns == [1_000, 100_000][a.type_id as usize])
        );
        let share_a = p0.iter().filter(|a| a.type_id == 0).count() as f64 / p0.len() as f64;
        assert!((share_a - 0.5).abs() < 0.05, "{share_a}");
        // Phase 1: swapped service times.
        let p1 = of(1);
        assert!(
            p1.iter()
                .all(|a| a.service_ns == [100_000, 1_000][a.type_id as usize])
        );
        assert!(p1.iter().any(|a| a.type_id == 1));
        // Phase 2: only a, at its base service time.
        let p2 = of(2);
        assert!(!p2.is_empty());
        assert!(p2.iter().all(|a| a.type_id == 0 && a.service_ns == 1_000));
    }

    #[test]
    fn a_type_of_ratio_zero_is_never_drawn_even_last() {
        let w = phased().phase(2);
        assert_eq!(w.types[1].ratio, 0.0);
        let mut a = PoissonArrivals::new(&w, 1e7, 100_000_000, 1);
        assert!(std::iter::from_fn(|| a.next_arrival()).all(|a| a.type_id == 0));
    }

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
