//! The result documents printed by `psp ... --json` and read by `psp plot`.
//!
//! Field names are a contract other tools rely on (the `psp` command contract, docs/architecture.md "Output"): fields may be added,
//! never renamed or removed.

use serde::{Deserialize, Serialize};

use crate::extra::Extra;

/// Overall (all types together) slowdown percentiles of one point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverallStats {
    /// Requests measured (after warm-up), all types.
    pub count: u64,
    /// Median slowdown.
    pub p50_slowdown: f64,
    /// 99th percentile slowdown.
    pub p99_slowdown: f64,
    /// 99.9th percentile slowdown.
    pub p999_slowdown: f64,
}

/// Per request type statistics of one point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TypeStats {
    /// Type name, as in the workload.
    pub name: String,
    /// Completed requests of this type measured (after warm-up).
    pub count: u64,
    /// Mean pure service time of the measured requests.
    pub mean_service_us: f64,
    /// Mean latency (queueing + service) of the measured requests.
    #[serde(default)]
    pub mean_latency_us: f64,
    /// Median latency.
    pub p50_latency_us: f64,
    /// 99th percentile latency.
    pub p99_latency_us: f64,
    /// 99.9th percentile latency.
    pub p999_latency_us: f64,
    /// Median slowdown.
    #[serde(default)]
    pub p50_slowdown: f64,
    /// 99th percentile slowdown.
    #[serde(default)]
    pub p99_slowdown: f64,
    /// 99.9th percentile slowdown.
    pub p999_slowdown: f64,
    /// Completed requests of this type per second of the measured window
    /// (`count` over its length).
    #[serde(default)]
    pub throughput_rps: f64,
    /// Requests of this type dropped at a full queue (simulator) or shed with an
    /// OVERLOADED reply (runtime), in the measured window.
    pub dropped: u64,
    /// Requests of this type that got no answer within the client's timeout
    /// (network mode).
    #[serde(default)]
    pub timeouts: u64,
    /// Requests of this type answered BAD_REQUEST, UNKNOWN_TYPE or HANDLER_ERROR
    /// (network mode), or whose handler failed (runtime).
    #[serde(default)]
    pub errors: u64,
}

/// One measured or simulated point: a workload under a policy at one offered load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    /// Workload name.
    pub workload: String,
    /// Policy, as given on the command line (with its parameters).
    pub policy: String,
    /// Number of application workers.
    pub workers: usize,
    /// Offered load as a fraction of the workload's peak on these workers
    /// (closed-loop clients, `extra.clients`: the workers' busy fraction).
    #[serde(default)]
    pub load: f64,
    /// Offered request rate.
    pub offered_rps: f64,
    /// Completed requests per second over the measurement window.
    pub achieved_rps: f64,
    /// Length of the arrival period (including warm-up).
    pub duration_s: f64,
    /// Random seed.
    #[serde(default)]
    pub seed: u64,
    /// Overall slowdown percentiles.
    pub overall: OverallStats,
    /// Per-type statistics, in workload order.
    pub types: Vec<TypeStats>,
    /// Requests dropped at a full queue in the measurement window.
    pub dropped: u64,
    /// Requests shed with an explicit OVERLOADED reply (runtime only).
    pub shed: u64,
    /// Requests that timed out at the client (network mode only).
    pub timeouts: u64,
    /// Requests answered with an error status (network mode only).
    #[serde(default)]
    pub errors: u64,
    /// Requests generated in the measurement window (after warm-up).
    #[serde(default)]
    pub measured_generated: u64,
    /// Fraction of measured requests lost (dropped + shed + timeouts).
    #[serde(default)]
    pub loss_fraction: f64,
    /// The mode (`sim`, `run` or `net`) and that executor's own figures
    /// (preemptions, reservation, simulator speed...): the `mode` and `extra`
    /// fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// What a point is, besides its measurements.
#[derive(Debug, Clone, PartialEq)]
pub struct PointMeta {
    /// `sim`, `run` or `net`.
    pub mode: &'static str,
    /// Workload name.
    pub workload: String,
    /// Policy name with parameters.
    pub policy: String,
    /// Application workers.
    pub workers: usize,
    /// Offered load as a fraction of peak.
    pub load: f64,
    /// Offered rate.
    pub offered_rps: f64,
    /// Arrival period, warm-up included.
    pub duration_s: f64,
    /// Length of the measured part of the arrival period.
    pub measured_s: f64,
    /// Random seed.
    pub seed: u64,
}

impl PointResult {
    /// A point from an executor's recorder and its own figures: `measured_generated`
    /// requests arrived after warm-up, of which the recorder's drops were dropped
    /// (`mode` sim) or shed (other modes), and its timeouts and errors were lost at
    /// the client.
    ///
    /// # Panics
    /// If `meta.mode` is not the mode of `extra`.
    pub fn new(
        meta: PointMeta,
        recorder: &crate::Recorder,
        measured_generated: u64,
        extra: Extra,
    ) -> Self {
        assert_eq!(
            meta.mode,
            extra.mode(),
            "a point's meta and figures disagree"
        );
        let lost = recorder.dropped();
        let (timeouts, errors) = (recorder.timeouts(), recorder.errors());
        let (dropped, shed) = match extra {
            Extra::Sim(_) => (lost, 0),
            _ => (0, lost),
        };
        PointResult {
            workload: meta.workload,
            policy: meta.policy,
            workers: meta.workers,
            load: meta.load,
            offered_rps: meta.offered_rps,
            achieved_rps: recorder.completed() as f64 / meta.measured_s.max(1e-12),
            duration_s: meta.duration_s,
            seed: meta.seed,
            overall: recorder.overall(),
            types: recorder
                .type_stats()
                .into_iter()
                .map(|t| TypeStats {
                    throughput_rps: t.count as f64 / meta.measured_s.max(1e-12),
                    ..t
                })
                .collect(),
            dropped,
            shed,
            timeouts,
            errors,
            measured_generated,
            loss_fraction: (lost + timeouts + errors) as f64 / measured_generated.max(1) as f64,
            extra,
        }
    }

    /// `sim`, `run` or `net`.
    pub fn mode(&self) -> &'static str {
        self.extra.mode()
    }
}

/// The service-level objective a sweep judges points against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    /// Bound on the p99.9 slowdown of every request type.
    pub per_type_p999_slowdown: Option<f64>,
    /// Bound on the p99.9 slowdown over all requests.
    pub overall_p999_slowdown: Option<f64>,
    /// Largest tolerated loss fraction (the experiments' rule: more than 0.1% loss fails).
    pub max_loss_fraction: f64,
}

impl Slo {
    /// Whether `point` meets this objective.
    pub fn is_met_by(&self, point: &PointResult) -> bool {
        if point.loss_fraction > self.max_loss_fraction {
            return false;
        }
        if let Some(bound) = self.overall_p999_slowdown
            && (point.overall.p999_slowdown.is_nan() || point.overall.p999_slowdown > bound)
        {
            return false;
        }
        if let Some(bound) = self.per_type_p999_slowdown {
            // A type with no measured request carries no evidence either way.
            return point
                .types
                .iter()
                .filter(|t| t.count > 0)
                .all(|t| t.p999_slowdown <= bound);
        }
        true
    }

    /// The sustainable throughput: the highest offered rate whose point meets the
    /// objective while every lower point does too. `None` when even the lowest fails.
    pub fn max_sustainable_rps(&self, points: &[PointResult]) -> Option<f64> {
        let mut sorted: Vec<&PointResult> = points.iter().collect();
        sorted.sort_by(|a, b| a.offered_rps.total_cmp(&b.offered_rps));
        let mut best = None;
        for p in sorted {
            if !self.is_met_by(p) {
                break;
            }
            best = Some(p.offered_rps);
        }
        best
    }
}

/// All points of one policy in a sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicySweep {
    /// Policy name with parameters.
    pub policy: String,
    /// Highest offered rate meeting the SLO (and every lower point meeting it).
    pub max_rps_within_slo: Option<f64>,
    /// Points in ascending offered load.
    pub points: Vec<PointResult>,
}

/// A sweep: loads x policies on one workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepResult {
    /// The objective the sweep judged against.
    pub slo: Slo,
    /// `sim`, `run` or `net`.
    #[serde(default)]
    pub mode: String,
    /// Workload name.
    #[serde(default)]
    pub workload: String,
    /// Number of workers.
    #[serde(default)]
    pub workers: usize,
    /// Peak rate of the workload on these workers (workers / mean service time).
    #[serde(default)]
    pub peak_rps: f64,
    /// One entry per policy, in the order given.
    pub policies: Vec<PolicySweep>,
}

/// A readable unit for request rates around `peak_rps`: (divisor, name), Mrps at
/// a million requests per second and above, krps below.
pub fn rate_unit(peak_rps: f64) -> (f64, &'static str) {
    if peak_rps >= 1e6 {
        (1e6, "Mrps")
    } else {
        (1e3, "krps")
    }
}
