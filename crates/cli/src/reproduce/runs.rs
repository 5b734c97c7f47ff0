//! What a figure of `psp reproduce` runs, as values: sweeps of the simulator,
//! single points, a point with its time series and closed-loop points, each
//! with every parameter typed. A figure lists them; the runner ([`super`])
//! measures them and applies `--quick` to them. Each also writes the command
//! that re-runs it alone, as shown beside the figure's table.
//!
//! Nothing here runs anything or writes files.

use std::fmt;
use std::path::Path;

/// A length of the arrival period, kept in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Period(u64);

impl Period {
    /// `ms` milliseconds.
    pub const fn ms(ms: u64) -> Self {
        Self(ms)
    }

    /// `s` seconds.
    pub const fn s(s: u64) -> Self {
        Self(s * 1000)
    }

    /// In milliseconds.
    pub const fn as_ms(self) -> u64 {
        self.0
    }

    /// A quick look's period: a tenth of this one, at least 20 ms.
    pub fn quick(self) -> Self {
        Self((self.0 / 10).max(20))
    }
}

impl fmt::Display for Period {
    /// As a command takes it: whole seconds as `6s`, else `300ms`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_multiple_of(1000) {
            write!(f, "{}s", self.0 / 1000)
        } else {
            write!(f, "{}ms", self.0)
        }
    }
}

/// A sweep's loads as fractions of the peak: `start` to `end` by `step`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Loads {
    /// The first load.
    pub start: f64,
    /// The last load (inclusive).
    pub end: f64,
    /// The step between two loads.
    pub step: f64,
}

impl Loads {
    /// `psp sweep`'s default grid.
    pub const DEFAULT: Loads = Loads::new(0.05, 1.0, 0.05);

    /// `start` to `end` by `step`.
    pub const fn new(start: f64, end: f64, step: f64) -> Self {
        Self { start, end, step }
    }

    /// A quick look's grid: 20% steps from 20% to the same end.
    pub fn quick(self) -> Self {
        Self::new(0.2, self.end, 0.2)
    }
}

impl fmt::Display for Loads {
    /// As `--loads` takes it, e.g. `0.05:1.0:0.05`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}:{:?}:{:?}", self.start, self.end, self.step)
    }
}

/// A sweep's SLO on the p99.9 slowdown.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Slo {
    /// `psp sweep`'s default: every type's ≤ 10, not named in the command.
    Default,
    /// Every type's ≤ the bound (`--slo-slowdown`).
    PerType(f64),
    /// Over all requests ≤ the bound (`--slo-overall`).
    Overall(f64),
}

/// Where a sweep's command names its policies, loads, refinement and SLO
/// (the order a reader has seen it in; it changes nothing measured). The
/// other flags come first, in one order: workload, workers, duration, warm-up,
/// system, classifier, SLO, flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// `--policies`, `--loads`, `--refine`.
    PoliciesLoadsRefine,
    /// `--loads`, `--policies`, `--refine`.
    LoadsPoliciesRefine,
    /// `--loads`, `--refine`, `--policies`.
    LoadsRefinePolicies,
    /// `--policies`, `--refine`, then the SLO (not among the first flags).
    PoliciesRefineSlo,
}

/// A sweep of the simulator, saved as `NAME.json` in the output directory.
#[derive(Clone, Debug)]
pub struct Sweep {
    /// The file stem of its JSON (and plot).
    pub name: String,
    /// The title of the sweep's own plot (`NAME.svg`, `NAME.png`); `None`:
    /// none drawn (the figure draws its own).
    pub title: Option<String>,
    /// A built-in workload's name or a workload file.
    pub workload: &'static str,
    /// Application workers.
    pub workers: usize,
    /// The arrival period of each point (`None`: `psp sweep`'s 1 s).
    pub period: Option<Period>,
    /// The fraction of each point discarded as warm-up (`None`: 10%).
    pub warmup: Option<f64>,
    /// The system cost model (`None`: `ideal`).
    pub system: Option<String>,
    /// The classifier (`None`: `header`).
    pub classifier: Option<&'static str>,
    /// The SLO at which each policy's sustainable throughput is found.
    pub slo: Slo,
    /// Client flows (`None`: 512).
    pub flows: Option<usize>,
    /// The grid (`None`: [`Loads::DEFAULT`]).
    pub loads: Option<Loads>,
    /// The policies compared, each as `psp sweep --policies` names it.
    pub policies: Vec<String>,
    /// Bisection steps past the grid.
    pub refine: usize,
    /// How its command is written.
    pub order: Order,
}

impl Sweep {
    /// `policies` on `workload` at `workers`, everything else at `psp
    /// sweep`'s defaults, refined 2 steps, drawn with `title`.
    pub fn new<S: AsRef<str>>(
        name: impl Into<String>,
        title: impl Into<String>,
        workload: &'static str,
        workers: usize,
        policies: &[S],
    ) -> Self {
        Self {
            name: name.into(),
            title: Some(title.into()),
            workload,
            workers,
            period: None,
            warmup: None,
            system: None,
            classifier: None,
            slo: Slo::Default,
            flows: None,
            loads: None,
            policies: policies.iter().map(|p| p.as_ref().to_string()).collect(),
            refine: 2,
            order: Order::PoliciesLoadsRefine,
        }
    }

    /// [`Sweep::new`] without a plot of its own (the figure draws one from
    /// several sweeps).
    pub fn untitled<S: AsRef<str>>(
        name: impl Into<String>,
        workload: &'static str,
        workers: usize,
        policies: &[S],
    ) -> Self {
        Self {
            title: None,
            ..Self::new(name, "", workload, workers, policies)
        }
    }

    /// The command that re-runs it alone and writes `json`.
    pub fn command(&self, json: &Path) -> String {
        let mut flags: Vec<(&str, String)> = vec![
            ("--workload", self.workload.to_string()),
            ("--workers", self.workers.to_string()),
        ];
        let mut opt = |flag, value: Option<String>| {
            if let Some(v) = value {
                flags.push((flag, v));
            }
        };
        opt("--duration", self.period.map(|p| p.to_string()));
        opt("--warmup", self.warmup.map(|w| format!("{w:?}")));
        opt("--system", self.system.clone());
        opt("--classifier", self.classifier.map(str::to_string));
        let slo = match self.slo {
            Slo::Default => None,
            Slo::PerType(b) => Some(("--slo-slowdown", b.to_string())),
            Slo::Overall(b) => Some(("--slo-overall", b.to_string())),
        };
        let slo_last = self.order == Order::PoliciesRefineSlo;
        if !slo_last {
            flags.extend(slo.clone());
        }
        if let Some(n) = self.flows {
            flags.push(("--flows", n.to_string()));
        }
        let policies = ("--policies", self.policies.join(","));
        let loads = self.loads.map(|l| ("--loads", l.to_string()));
        let refine = ("--refine", self.refine.to_string());
        match self.order {
            Order::PoliciesLoadsRefine => {
                flags.push(policies);
                flags.extend(loads);
                flags.push(refine);
            }
            Order::LoadsPoliciesRefine => {
                flags.extend(loads);
                flags.push(policies);
                flags.push(refine);
            }
            Order::LoadsRefinePolicies => {
                flags.extend(loads);
                flags.push(refine);
                flags.push(policies);
            }
            Order::PoliciesRefineSlo => {
                flags.push(policies);
                flags.push(refine);
                flags.extend(slo);
            }
        }
        let mut cmd = String::from("psp sweep");
        for (flag, value) in flags {
            cmd.push_str(&format!(" {flag} {value}"));
        }
        format!("{cmd} --out {}", json.display())
    }
}

/// One simulated point with open-loop arrivals, seed 1.
#[derive(Clone, Debug)]
pub struct Point {
    /// A built-in workload's name.
    pub workload: &'static str,
    /// The policy, as `psp sim --policy` names it.
    pub policy: String,
    /// Application workers.
    pub workers: usize,
    /// The offered load as a fraction of the peak.
    pub load: f64,
    /// The arrival period.
    pub period: Period,
    /// The system cost model.
    pub system: String,
    /// Client flows (`None`: 512).
    pub flows: Option<usize>,
}

impl Point {
    /// `policy` on `workload` at `workers` and `load`, on the ideal system.
    pub fn new(
        workload: &'static str,
        policy: impl Into<String>,
        workers: usize,
        load: f64,
        period: Period,
    ) -> Self {
        Self {
            workload,
            policy: policy.into(),
            workers,
            load,
            period,
            system: "ideal".into(),
            flows: None,
        }
    }

    /// This point on `system`.
    pub fn on(self, system: impl Into<String>) -> Self {
        Self {
            system: system.into(),
            ..self
        }
    }
}

/// One simulated point with its time series, written as `NAME.json` and
/// drawn as `NAME.svg` and `NAME.png`; no warm-up discarded. Its arrival
/// period is the workload's phases (a quick look keeps them; only the window
/// is coarser).
#[derive(Clone, Debug)]
pub struct Series {
    /// The file stem.
    pub name: String,
    /// A built-in workload's name.
    pub workload: &'static str,
    /// The policy.
    pub policy: &'static str,
    /// Application workers.
    pub workers: usize,
    /// The offered load as a fraction of the peak.
    pub load: f64,
    /// The series' window.
    pub window: Period,
    /// The window of a quick look.
    pub quick_window: Period,
}

impl Series {
    /// The command that re-runs it alone and writes `stem`'s files.
    pub fn command(&self, stem: &Path) -> String {
        format!(
            "psp sim --workload {} --workers {} --warmup 0 --policy {} --series {}",
            self.workload,
            self.workers,
            self.policy,
            stem.display()
        )
    }
}

/// Closed-loop points: every policy against every set of connections, seed 1,
/// no think time. Every point is checked before any runs.
#[derive(Clone, Debug)]
pub struct ClosedLoop {
    /// A built-in workload's name.
    pub workload: &'static str,
    /// Application workers.
    pub workers: usize,
    /// The period the clients send for.
    pub period: Period,
    /// The fraction of the period discarded as warm-up.
    pub warmup: f64,
    /// The policies, as `psp sim --policy` names them.
    pub policies: &'static [&'static str],
    /// Connections per request type (workload order), one set per point.
    pub connections: Vec<Vec<u32>>,
}

/// What a figure runs, in order.
#[derive(Clone, Debug)]
pub enum Run {
    /// A sweep.
    Sweep(Sweep),
    /// Points, run in parallel.
    Points(Vec<Point>),
    /// A point with its time series.
    Series(Series),
    /// Closed-loop points, policy by policy, each over every set of
    /// connections, run in parallel.
    ClosedLoop(ClosedLoop),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_and_loads_print_as_a_command_takes_them() {
        assert_eq!(Period::s(6).to_string(), "6s");
        assert_eq!(Period::ms(300).to_string(), "300ms");
        assert_eq!(Period::s(6).quick(), Period::ms(600));
        assert_eq!(Period::ms(100).quick(), Period::ms(20));
        assert_eq!(Loads::DEFAULT.to_string(), "0.05:1.0:0.05");
        assert_eq!(
            Loads::new(0.05, 0.9, 0.05).quick().to_string(),
            "0.2:0.9:0.2"
        );
    }

    #[test]
    fn a_sweep_command_names_its_flags_in_its_order() {
        let mut s = Sweep::new("x", "t", "zippydb", 14, &["c-fcfs", "darc"]);
        s.period = Some(Period::s(2));
        s.system = Some("own".into());
        s.slo = Slo::Overall(50.0);
        s.loads = Some(Loads::new(0.3, 1.0, 0.05));
        s.order = Order::LoadsPoliciesRefine;
        let json = Path::new("out/x.json");
        assert_eq!(
            s.command(json),
            "psp sweep --workload zippydb --workers 14 --duration 2s --system own --slo-overall 50 --loads 0.3:1.0:0.05 --policies c-fcfs,darc --refine 2 --out out/x.json"
        );
        s.order = Order::PoliciesRefineSlo;
        s.loads = None;
        assert_eq!(
            s.command(json),
            "psp sweep --workload zippydb --workers 14 --duration 2s --system own --policies c-fcfs,darc --refine 2 --slo-overall 50 --out out/x.json"
        );
    }
}
