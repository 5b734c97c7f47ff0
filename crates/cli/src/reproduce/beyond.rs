//! This project's own figures: `darc-lend` against every policy by
//! preemption mechanism, its tails and its scaling, and closed-loop clients:
//! what each runs, and its section.

use std::fmt::Write as _;

use anyhow::Result;
use psp_metrics::{PointResult, SweepResult};
use psp_plot::{HeatMap, plot_heat_map};
use psp_plot::{Line, LineFigure};
use psp_sim::Workload;

use super::render::{
    Page, Section, commands_block, image, longest_type, ratio, sustained, verdict,
};
use super::runs::{ClosedLoop, Loads, Order, Period, Point, Run, Slo, Sweep};
use super::{Figure, Outcomes, Swept};

// ---------------------------------------------------------------- beyond

/// The grid's workloads.
const BEYOND_WORKLOADS: &[&str] = &[
    "extreme-bimodal",
    "high-bimodal",
    "zippydb",
    "leveldb",
    "rocksdb",
    "tpcc",
];
/// The grid's preemption mechanisms (`none`: handlers without preemption
/// points).
const BEYOND_MECHANISMS: &[&str] = &["ci", "uintr", "signal", "none"];
/// Policies that preempt, run once per mechanism; `darc-lend` first.
const BEYOND_PREEMPTIVE: &[&str] = &["darc-lend", "synergy", "ts", "concord", "tq"];
/// `psp serve`'s default, judged against every other policy of the grid
/// (`darc-lend` included), once per mechanism.
const BEYOND_DEFAULT: &str = "darc-fair";
/// Policies that never preempt, run once for every mechanism.
const BEYOND_FIXED: &[&str] = &["darc", "darc+", "c-fcfs"];
/// The SLO setups: (label, file-name key, system, SLO).
const BEYOND_SLOS: &[(&str, &str, &str, Slo)] = &[
    (
        "ideal, per type ≤ 10",
        "ideal-type",
        "ideal",
        Slo::PerType(10.0),
    ),
    (
        "ideal, overall ≤ 50",
        "ideal-overall",
        "ideal",
        Slo::Overall(50.0),
    ),
    (
        "own, overall ≤ 50",
        "own-overall",
        "own",
        Slo::Overall(50.0),
    ),
];
/// The grid's loads: from 30%, where DARC's first profiling window fits in
/// the warm-up.
const BEYOND_LOADS: Loads = Loads::new(0.3, 1.0, 0.05);

/// Per workload, the point length with half of it discarded as warm-up: DARC's
/// first profiling window (50,000 completions) fits in the warm-up from 30%
/// load up, and the measured half holds at least about 80,000 requests.
fn beyond_period(workload: &str) -> Period {
    match workload {
        "high-bimodal" | "leveldb" => Period::s(2),
        "rocksdb" => Period::s(8),
        _ => Period::s(1),
    }
}

fn with_mech(policy: &str, mech: &str) -> String {
    format!("{policy}:mech={mech}")
}

/// One cell of the grid: `darc-lend` against the others for one workload,
/// mechanism and SLO setup (rates in requests per second).
#[derive(serde::Serialize)]
struct BeyondCell {
    workload: &'static str,
    mechanism: &'static str,
    slo: &'static str,
    lend_rps: Option<f64>,
    /// The best other policy and its rate.
    best_other: Option<(String, f64)>,
    darc_rps: Option<f64>,
    synergy_rps: Option<f64>,
    /// `darc-lend` over the best other.
    vs_best: Option<f64>,
    /// `darc-fair` (`psp serve`'s default).
    default_rps: Option<f64>,
    /// `darc-fair` over the best of every other policy, `darc-lend` included.
    default_vs_best: Option<f64>,
    /// `darc-lend` over the better of `darc` and `synergy`.
    vs_darc_synergy: Option<f64>,
}

impl BeyondCell {
    /// The cell of `mechanism` in sweep `r`.
    fn of(
        r: &SweepResult,
        workload: &'static str,
        mechanism: &'static str,
        slo: &'static str,
    ) -> Self {
        let rate = |p: &str| sustained(r, p);
        let lend = rate(&with_mech("darc-lend", mechanism));
        let others = BEYOND_PREEMPTIVE[1..]
            .iter()
            .map(|p| with_mech(p, mechanism))
            .chain(BEYOND_FIXED.iter().map(|p| p.to_string()));
        let best_other = others
            .filter_map(|p| rate(&p).map(|x| (p, x)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let darc = rate("darc");
        let synergy = rate(&with_mech("synergy", mechanism));
        let pair = darc.into_iter().chain(synergy).reduce(f64::max);
        let over_of = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            (Some(_), None) => Some(f64::INFINITY),
            _ => None,
        };
        let over = |b: Option<f64>| over_of(lend, b);
        // The default against every other policy, `darc-lend` too.
        let fair = rate(&with_mech(BEYOND_DEFAULT, mechanism));
        let best_for_fair = best_other.iter().map(|b| b.1).chain(lend).reduce(f64::max);
        BeyondCell {
            workload,
            mechanism,
            slo,
            lend_rps: lend,
            vs_best: over(best_other.as_ref().map(|b| b.1)),
            best_other,
            darc_rps: darc,
            synergy_rps: synergy,
            vs_darc_synergy: over(pair),
            default_rps: fair,
            default_vs_best: over_of(fair, best_for_fair),
        }
    }
}

pub(super) const BEYOND: Figure = Figure {
    id: "beyond",
    title: "Beyond DARC and SYNERGY: darc-lend against every policy, by preemption mechanism (14 workers)",
    claim: "(This project) `darc-lend` — DARC's reservations, with reserved workers lent \
            to longer types and reclaimed by preemption only where the mechanism's cost \
            allows — sustains at least 0.98x the best of darc, darc+, synergy, ts, \
            concord, tq and c-fcfs on every workload, mechanism and SLO, and at least \
            1.05x the better of darc and synergy in at least 10 cells.",
    inputs: &[],
    runs: || {
        let mut list: Vec<String> = Vec::new();
        for p in BEYOND_PREEMPTIVE.iter().chain([&BEYOND_DEFAULT]) {
            for m in BEYOND_MECHANISMS {
                list.push(with_mech(p, m));
            }
        }
        list.extend(BEYOND_FIXED.iter().map(|p| p.to_string()));
        let mut runs = Vec::new();
        for &w in BEYOND_WORKLOADS {
            for &(_, key, system, slo) in BEYOND_SLOS {
                runs.push(Run::Sweep(Sweep {
                    period: Some(beyond_period(w)),
                    warmup: Some(0.5),
                    system: Some(system.into()),
                    slo,
                    loads: Some(BEYOND_LOADS),
                    order: Order::LoadsPoliciesRefine,
                    ..Sweep::untitled(format!("beyond-{w}-{key}"), w, 14, &list)
                }));
            }
        }
        Ok(runs)
    },
    section: beyond,
};

fn beyond(page: &Page, mut o: Outcomes) -> Result<Section> {
    let mut cmds = Vec::new();
    let mut cells = Vec::new();
    for &w in BEYOND_WORKLOADS {
        for &(label, ..) in BEYOND_SLOS {
            let Swept { result: r, command } = o.sweep()?;
            cmds.push(command);
            for &mech in BEYOND_MECHANISMS {
                cells.push(BeyondCell::of(&r, w, mech, label));
            }
        }
    }
    let mut files = vec![page.json("beyond", &cells)?];
    let mut body = String::from(
        "**Setup.** 14 workers, open-loop Poisson arrivals over 512 flows, loads 30% to 100% \
         of the peak in 5% steps refined by 2 bisections (1.25% of the peak), sustainable \
         throughput at the SLO (p99.9 slowdown, ≤ 0.1% lost). Each point discards its first \
         half as warm-up, which holds DARC's first profiling window (50,000 completions) \
         from 30% load up: 1 s per point on extreme-bimodal, zippydb and tpcc, 2 s on \
         high-bimodal and leveldb, 8 s on rocksdb. Three SLO \
         setups: every type's p99.9 slowdown ≤ 10 on the `ideal` system, and the p99.9 \
         slowdown over all requests ≤ 50 on `ideal` and on `own` (each policy on the \
         costs of the system it models: `darc`, `darc+`, `darc-lend`, `c-fcfs`, `concord` \
         and `tq` pay Perséphone's 143 ns dispatcher per request, `ts` Shinjuku's, \
         `synergy` none; 10 µs of network). Four preemption mechanisms for every policy \
         that preempts: `ci` (compiler-inserted checks, 55 ns switch), `uintr` (0.84 µs \
         to reach the worker, 0.51 µs switch), `signal` (2.96 µs and 2.08 µs) and `none` \
         (handlers without preemption points: a preemption never lands, every request \
         runs to completion). `darc`, `darc+` and `c-fcfs` never preempt and count in \
         every column. `darc-lend` runs its defaults everywhere (`budget=5,gain=2,keep=0` \
         over `darc+`). Each cell: `darc-lend`'s sustainable throughput over the best of \
         all the others in that column (`darc-fair` aside: it is `darc-lend` grown). \
         `darc-fair`, `psp serve`'s default, runs its defaults too, and is judged against \
         every other policy, `darc-lend` included. **Goals, stated before the run:** in \
         every cell at least 0.98x the best other; in at least 10 cells at least 1.05x the \
         better of `darc` and `synergy` (same mechanism).\n\n",
    );
    body += &commands_block(&cmds);
    body += &beyond_tables(&cells);
    body += &beyond_verdict(&cells);
    files.extend(plot_heat_map(
        &beyond_map(&cells),
        &page.out.join("beyond"),
    )?);
    body += &image("beyond", "darc-lend over the best other policy");
    Ok(Section { body, files })
}

/// A rate in krps, or `none`.
fn krps(v: Option<f64>) -> String {
    v.map_or("none".to_string(), |x| format!("{:.0}", x / 1e3))
}

/// A ratio as `1.23x`, `only it` (the other sustains nothing) or `–`.
fn times(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.2}x"),
        Some(_) => "only it".into(),
        None => "–".into(),
    }
}

/// One table per SLO setup, a row per workload and mechanism.
fn beyond_tables(cells: &[BeyondCell]) -> String {
    let mut body = String::new();
    for &(label, ..) in BEYOND_SLOS {
        let _ = writeln!(
            body,
            "**{label}** (krps)\n\n| workload | mech | darc-lend | best other | lend / best other | darc | synergy | lend / max(darc, synergy) | darc-fair | darc-fair / best other |\n|---|---|---|---|---|---|---|---|---|---|"
        );
        for c in cells.iter().filter(|c| c.slo == label) {
            let best = c
                .best_other
                .as_ref()
                .map_or("none".to_string(), |(p, r)| format!("{:.0} `{p}`", r / 1e3));
            let _ = writeln!(
                body,
                "| {} | {} | {} | {best} | {} | {} | {} | {} | {} | {} |",
                c.workload,
                c.mechanism,
                krps(c.lend_rps),
                times(c.vs_best),
                krps(c.darc_rps),
                krps(c.synergy_rps),
                times(c.vs_darc_synergy),
                krps(c.default_rps),
                times(c.default_vs_best)
            );
        }
        body.push('\n');
    }
    body
}

/// The grid's counts against its goals, and the verdict.
fn beyond_verdict(cells: &[BeyondCell]) -> String {
    let short: Vec<&BeyondCell> = cells
        .iter()
        .filter(|c| !c.vs_best.is_some_and(|v| v >= 0.98))
        .collect();
    let wins = cells
        .iter()
        .filter(|c| c.vs_darc_synergy.is_some_and(|v| v >= 1.05))
        .count();
    let default_short = cells
        .iter()
        .filter(|c| !c.default_vs_best.is_some_and(|v| v >= 0.98))
        .count();
    let mut body = String::new();
    let _ = writeln!(
        body,
        "Cells at least 0.98x the best other: {} of {}. Cells at least 1.05x the better of \
         `darc` and `synergy`: {wins}. `darc-fair` (`psp serve`'s default) at least 0.98x \
         the best of every other policy, `darc-lend` included: {} of {}.\n",
        cells.len() - short.len(),
        cells.len(),
        cells.len() - default_short,
        cells.len()
    );
    let why = format!(
        "The first goal is missed in {} cell(s): {}.",
        short.len(),
        short
            .iter()
            .map(|c| format!(
                "{} {} ({}) {}",
                c.workload,
                c.mechanism,
                c.slo,
                times(c.vs_best)
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
    body += &verdict(short.is_empty() && wins >= 10, &why);
    body
}

/// `darc-lend` over the best other policy, a row per workload and a column
/// per SLO setup and mechanism.
fn beyond_map(cells: &[BeyondCell]) -> HeatMap {
    HeatMap {
        title: "darc-lend / best other policy, sustainable throughput (14 workers)".into(),
        rows: BEYOND_WORKLOADS.iter().map(|w| w.to_string()).collect(),
        cols: BEYOND_SLOS
            .iter()
            .flat_map(|(_, key, ..)| BEYOND_MECHANISMS.iter().map(move |m| format!("{key}\n{m}")))
            .collect(),
        cells: BEYOND_WORKLOADS
            .iter()
            .map(|w| {
                BEYOND_SLOS
                    .iter()
                    .flat_map(|(label, ..)| BEYOND_MECHANISMS.iter().map(move |m| (*label, *m)))
                    .map(|(label, m)| {
                        cells
                            .iter()
                            .find(|c| c.workload == *w && c.slo == label && c.mechanism == m)
                            .and_then(|c| c.vs_best)
                            .map(|v| v.min(9.99))
                    })
                    .collect()
            })
            .collect(),
        reference: 1.0,
        span: 0.2,
    }
}

// ---------------------------------------------------------------- tails

/// The tails figure's loads, mechanisms and workloads.
const TAIL_LOADS: [f64; 3] = [0.5, 0.8, 0.9];
const TAIL_MECHANISMS: [&str; 3] = ["ci", "uintr", "signal"];
const TAIL_WORKLOADS: [&str; 2] = ["extreme-bimodal", "zippydb"];

/// The tails figure's policies: `darc`, then `darc-lend` and `synergy` per
/// mechanism.
fn tail_policies() -> Vec<String> {
    let mut policies = vec!["darc".to_string()];
    for m in TAIL_MECHANISMS {
        policies.push(with_mech("darc-lend", m));
        policies.push(with_mech("synergy", m));
    }
    policies
}

pub(super) const TAILS: Figure = Figure {
    id: "beyond-tails",
    title: "darc-lend's tail latency per type at 50%, 80% and 90% load (14 workers)",
    claim: "(This project) `darc-lend`'s throughput is not bought by starving long \
            requests: its slowest type's p99.9 latency stays within 2x the better of \
            darc's and synergy's.",
    inputs: &[],
    runs: || {
        let mut points = Vec::new();
        for w in TAIL_WORKLOADS {
            for load in TAIL_LOADS {
                for p in tail_policies() {
                    points.push(Point::new(w, p, 14, load, Period::s(2)));
                }
            }
        }
        Ok(vec![Run::Points(points)])
    },
    section: beyond_tails,
};

fn beyond_tails(page: &Page, mut o: Outcomes) -> Result<Section> {
    let pts = o.points()?;
    let policies = tail_policies();
    let mut body = String::from(
        "**Setup.** 14 workers, `ideal` system, open-loop Poisson arrivals over 512 flows, \
         2 s per point (first 10% discarded), seed 1, at 50%, 80% and 90% of the peak. \
         Per type, p99.9 latency in µs, shortest type first. **Goal, stated before the \
         run:** at every load and mechanism, `darc-lend`'s slowest type has a p99.9 \
         latency at most 2x the better of `darc`'s and `synergy`'s (same mechanism): its \
         throughput is not bought by starving long requests.\n\n",
    );
    body += &commands_block(&[format!(
        "for w in {}; do for l in 0.5 0.8 0.9; do for p in {}; do psp sim --workload $w --workers 14 --load $l --duration 2s --policy $p; done; done; done",
        TAIL_WORKLOADS.join(" "),
        policies.join(" ")
    )]);
    body += "| workload | load | mech | darc-lend | darc | synergy | darc-lend's slowest type / better of the two |\n|---|---|---|---|---|---|---|\n";
    let tails = |p: &PointResult| {
        p.types
            .iter()
            .map(|t| format!("{:.1}", t.p999_latency_us))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    let mut starved = Vec::new();
    let mut rows = pts.chunks(policies.len());
    for w in TAIL_WORKLOADS {
        for (load, row) in TAIL_LOADS.iter().zip(rows.by_ref()) {
            let darc = &row[0];
            for (mi, m) in TAIL_MECHANISMS.iter().enumerate() {
                let (lend, syn) = (&row[1 + 2 * mi], &row[2 + 2 * mi]);
                let better = longest_type(darc)
                    .p999_latency_us
                    .min(longest_type(syn).p999_latency_us);
                let r = longest_type(lend).p999_latency_us / better;
                if r > 2.0 {
                    starved.push(format!("{w} {:.0}% {m} ({r:.2}x)", load * 100.0));
                }
                let _ = writeln!(
                    body,
                    "| {w} | {:.0}% | {m} | {} | {} | {} | {r:.2}x |",
                    load * 100.0,
                    tails(lend),
                    tails(darc),
                    tails(syn)
                );
            }
        }
    }
    body.push('\n');
    let json = page.json("beyond-tails", &pts)?;
    body += &verdict(
        starved.is_empty(),
        &format!(
            "`darc-lend`'s slowest type exceeds 2x the better of the two at: {}.",
            starved.join("; ")
        ),
    );
    Ok(Section {
        body,
        files: vec![json],
    })
}

// ---------------------------------------------------------------- scaling

/// The scaling figure's worker counts and policies (`darc-lend` first).
const SCALING_WORKERS: [usize; 4] = [8, 14, 32, 64];
const SCALING_POLICIES: [&str; 4] = ["darc-lend", "darc", "synergy", "c-fcfs"];

pub(super) const SCALING: Figure = Figure {
    id: "beyond-scaling",
    title: "darc-lend at 8, 14, 32 and 64 workers with each system's dispatcher cost (zippydb)",
    claim: "(This project) A centralized dispatcher stops keeping up where a decentralized \
            one does not: `darc-lend` pays DARC's dispatcher, SYNERGY none.",
    inputs: &[],
    runs: || {
        Ok(SCALING_WORKERS
            .map(|n| {
                Run::Sweep(Sweep {
                    period: Some(Period::s(1)),
                    warmup: Some(0.5),
                    system: Some("own".into()),
                    slo: Slo::Overall(50.0),
                    loads: Some(BEYOND_LOADS),
                    order: Order::LoadsPoliciesRefine,
                    ..Sweep::untitled(
                        format!("beyond-scaling-{n}w"),
                        "zippydb",
                        n,
                        &SCALING_POLICIES,
                    )
                })
            })
            .to_vec())
    },
    section: beyond_scaling,
};

fn beyond_scaling(page: &Page, mut o: Outcomes) -> Result<Section> {
    let mut cmds = Vec::new();
    let mut lines: Vec<Line> = SCALING_POLICIES
        .iter()
        .map(|p| Line {
            name: p.to_string(),
            points: Vec::new(),
        })
        .collect();
    let mut table = String::from(
        "| workers | peak (krps) | darc-lend | darc | synergy | c-fcfs | darc-lend / best other |\n|---|---|---|---|---|---|---|\n",
    );
    for n in SCALING_WORKERS {
        let Swept { result: r, command } = o.sweep()?;
        cmds.push(command);
        let rates: Vec<Option<f64>> = SCALING_POLICIES.iter().map(|p| sustained(&r, p)).collect();
        for (line, x) in lines.iter_mut().zip(&rates) {
            line.points
                .push((n as f64, x.map_or(0.0, |x| x / r.peak_rps)));
        }
        let best_other = rates[1..].iter().flatten().copied().reduce(f64::max);
        let _ = writeln!(
            table,
            "| {n} | {:.0} | {} | {} |",
            r.peak_rps / 1e3,
            rates
                .iter()
                .map(|x| x.map_or("none".into(), |x| format!("{:.0}", x / 1e3)))
                .collect::<Vec<_>>()
                .join(" | "),
            ratio(rates[0], best_other)
        );
    }
    let fig = LineFigure {
        title: "zippydb, system own, overall p99.9 slowdown ≤ 50: sustainable share of the peak"
            .into(),
        x_label: "workers".into(),
        y_label: "sustainable throughput / peak".into(),
        log_y: false,
        lines,
        reference: None,
    };
    let files = page.lines("beyond-scaling", &fig)?;
    let mut body = String::from(
        "**Setup.** zippydb, system `own` (`darc-lend`, `darc` and `c-fcfs` pay \
         Perséphone's dispatcher, 143 ns per request, and saturate at about 7 M requests/s; \
         `synergy` has no dispatcher), 10 µs of network, p99.9 slowdown over all requests \
         ≤ 50, compiler-inserted checks for the preemptive policies, loads 30% to 100% in \
         5% steps refined by 2 bisections, 1 s per point with half of it warm-up.\n\n",
    );
    body += &commands_block(&cmds);
    body += &table;
    body.push('\n');
    body += &image("beyond-scaling", "beyond-scaling");
    Ok(Section { body, files })
}

// ---------------------------------------------------------- closed loop

/// The closed-loop figure's workload, workers and point length.
const CLOSED_LOOP_WORKLOAD: &str = "leveldb";
const CLOSED_LOOP_WORKERS: usize = 14;
const CLOSED_LOOP_PERIOD: Period = Period::s(1);
/// Its policies.
const CLOSED_LOOP_POLICIES: &[&str] = &["c-fcfs", "darc", "darc-lend", "synergy", "darc-fair"];
/// Its numbers of long (SCAN) connections.
const CLOSED_LOOP_LONG: &[u32] = &[0, 1, 2, 4, 8, 16, 32];
/// Its short (GET) connections: enough to keep 14 workers busy with GETs alone.
const CLOSED_LOOP_SHORT: u32 = 64;

/// One point of the closed-loop figure, per type in workload order.
#[derive(serde::Serialize)]
struct ClosedLoopCell {
    policy: String,
    long_clients: u32,
    throughput_rps: Vec<f64>,
    /// `None`: no request of the type completed in the measured window.
    p99_latency_us: Vec<Option<f64>>,
    p999_latency_us: Vec<Option<f64>>,
    point: PointResult,
}

pub(super) const CLOSED_LOOP: Figure = Figure {
    id: "closed-loop",
    title: "Closed-loop clients: 64 GET connections against 0 to 32 SCAN connections (leveldb, 14 workers)",
    claim: "(This project) Redis and memcached clients are closed loops: a connection \
            sends its next request when its last one is answered. A long type's arrivals \
            are then paced by its own completions, so what a policy serves slowly its \
            clients ask for slowly, and DARC, which reserves workers by the demand it \
            measures, leaves the long type a worker it shares with the short one: with 64 \
            short clients keeping every worker busy, the long clients starve. c-FCFS \
            serves both types in arrival order and gives each long connection a share.",
    inputs: &[],
    runs: || {
        Ok(vec![Run::ClosedLoop(ClosedLoop {
            workload: CLOSED_LOOP_WORKLOAD,
            workers: CLOSED_LOOP_WORKERS,
            period: CLOSED_LOOP_PERIOD,
            warmup: 0.2,
            policies: CLOSED_LOOP_POLICIES,
            connections: CLOSED_LOOP_LONG
                .iter()
                .map(|&n| vec![CLOSED_LOOP_SHORT, n])
                .collect(),
        })])
    },
    section: closed_loop,
};

fn closed_loop(page: &Page, mut o: Outcomes) -> Result<Section> {
    let w = Workload::resolve(CLOSED_LOOP_WORKLOAD)?;
    let (short, long) = (&w.types[0].name, &w.types[1].name);
    let measured = |t: &psp_metrics::TypeStats, v: f64| (t.count > 0).then_some(v);
    let jobs = CLOSED_LOOP_POLICIES
        .iter()
        .flat_map(|p| CLOSED_LOOP_LONG.iter().map(move |&n| (p, n)));
    let cells: Vec<ClosedLoopCell> = jobs
        .zip(o.points()?)
        .map(|((policy, n), point)| ClosedLoopCell {
            policy: policy.to_string(),
            long_clients: n,
            throughput_rps: point.types.iter().map(|t| t.throughput_rps).collect(),
            p99_latency_us: point
                .types
                .iter()
                .map(|t| measured(t, t.p99_latency_us))
                .collect(),
            p999_latency_us: point
                .types
                .iter()
                .map(|t| measured(t, t.p999_latency_us))
                .collect(),
            point,
        })
        .collect();
    let mut files = vec![page.json("closed-loop", &cells)?];
    let (images, plots) = closed_loop_plots(page, &cells, short, long)?;
    files.extend(plots);
    let period = page.period(CLOSED_LOOP_PERIOD).as_ms();
    let mut body = format!(
        "**Setup.** Workload `leveldb` (LevelDB over 1,000 keys: {short} 0.92 µs, {long} \
         94 µs — the built-in workload closest to Redis's GET against LRANGE/SCAN), \
         {CLOSED_LOOP_WORKERS} workers, `ideal` system, closed-loop clients: {CLOSED_LOOP_SHORT} \
         {short} connections (alone, enough to keep every worker busy) and 0 to 32 {long} \
         connections, each with one request out at a time and no think time; a refused \
         request comes back after 1 µs. {period} ms per point, the first 20% discarded: it \
         holds DARC's first profiling window (50,000 completions under c-FCFS, from \
         about 3 ms with no {long} connection to about 100 ms with 32), seed 1. \
         After the period the clients stop sending and what is left in the system \
         completes: a request starved until then is measured with that latency. A type \
         without a completed request in the window is `starved`. Throughput is completed \
         requests per second of the measured window; the offered rate of a closed loop is \
         what its clients sent.\n\n",
    );
    body += &commands_block(&[format!(
        "for p in {}; do for n in {}; do psp sim --workload leveldb --workers {CLOSED_LOOP_WORKERS} --clients {short}={CLOSED_LOOP_SHORT},{long}=$n --think 0us --duration {period}ms --warmup 0.2 --policy $p; done; done",
        CLOSED_LOOP_POLICIES.join(" "),
        CLOSED_LOOP_LONG
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(" "),
    )]);
    body += &closed_loop_table(&cells, short, long);
    body += &closed_loop_verdict(&cells, long);
    body += &images;
    Ok(Section { body, files })
}

/// One figure per metric and type, a line per policy (same colour in each):
/// their image links and files.
fn closed_loop_plots(
    page: &Page,
    cells: &[ClosedLoopCell],
    short: &str,
    long: &str,
) -> Result<(String, Vec<std::path::PathBuf>)> {
    let mut images = String::new();
    let mut files = Vec::new();
    for (t, name) in [short, long].into_iter().enumerate() {
        for (key, what, log_y) in [
            ("throughput", "completed requests/s", false),
            ("p999", "p99.9 latency (µs)", true),
        ] {
            let lines = CLOSED_LOOP_POLICIES
                .iter()
                .map(|p| Line {
                    name: p.to_string(),
                    points: cells
                        .iter()
                        .filter(|c| c.policy == *p)
                        .map(|c| {
                            let y = match key {
                                "throughput" => c.throughput_rps[t],
                                _ => c.p999_latency_us[t].unwrap_or(f64::NAN),
                            };
                            (f64::from(c.long_clients), y)
                        })
                        .collect(),
                })
                .collect();
            let stem = format!("closed-loop-{key}-{name}");
            let fig = LineFigure {
                title: format!(
                    "{name}: {what}, {CLOSED_LOOP_SHORT} {short} connections, {CLOSED_LOOP_WORKERS} workers, think 0"
                ),
                x_label: format!("{long} connections"),
                y_label: what.into(),
                log_y,
                lines,
                reference: None,
            };
            files.extend(page.lines(&stem, &fig)?);
            images += &image(&stem, &stem);
        }
    }
    Ok((images, files))
}

/// The closed-loop table: a row per number of long connections and policy.
fn closed_loop_table(cells: &[ClosedLoopCell], short: &str, long: &str) -> String {
    let mut body = String::new();
    let _ = writeln!(
        body,
        "| {long} connections | policy | {short} (Mrps) | {long} (krps) | {short} p99 / p99.9 (µs) | {long} p99 / p99.9 (µs) | workers busy |\n|---|---|---|---|---|---|---|"
    );
    let lat = |c: &ClosedLoopCell, t: usize| match (c.p99_latency_us[t], c.p999_latency_us[t]) {
        (Some(a), Some(b)) => format!("{a:.1} / {b:.1}"),
        _ => "starved".into(),
    };
    for &n in CLOSED_LOOP_LONG {
        for c in cells.iter().filter(|c| c.long_clients == n) {
            let _ = writeln!(
                body,
                "| {n} | `{}` | {:.2} | {} | {} | {} | {:.0}% |",
                c.policy,
                c.throughput_rps[0] / 1e6,
                if n == 0 {
                    "–".to_string()
                } else {
                    format!("{:.1}", c.throughput_rps[1] / 1e3)
                },
                lat(c, 0),
                if n == 0 { "–".to_string() } else { lat(c, 1) },
                c.point.load * 100.0
            );
        }
    }
    body.push('\n');
    body
}

/// The claim's test: with long clients, DARC completes far fewer long
/// requests than c-FCFS (less than a tenth) at every count.
fn closed_loop_verdict(cells: &[ClosedLoopCell], long: &str) -> String {
    let long_rate = |p: &str, n: u32| {
        cells
            .iter()
            .find(|c| c.policy == p && c.long_clients == n)
            .map_or(0.0, |c| c.throughput_rps[1])
    };
    let not_starved: Vec<String> = CLOSED_LOOP_LONG
        .iter()
        .filter(|&&n| n > 0 && long_rate("darc", n) >= 0.1 * long_rate("c-fcfs", n))
        .map(|n| {
            format!(
                "{n} ({:.1} krps against {:.1})",
                long_rate("darc", *n) / 1e3,
                long_rate("c-fcfs", *n) / 1e3
            )
        })
        .collect();
    let mut body = String::new();
    let _ = writeln!(
        body,
        "**Goal, stated before the run:** with 1 to 32 {long} connections, `darc` completes \
         less than a tenth of the {long} requests `c-fcfs` completes.\n"
    );
    body += &verdict(
        not_starved.is_empty(),
        &format!(
            "`darc` serves the {long} clients at least a tenth of `c-fcfs`'s rate with {} {long} connections.",
            not_starved.join(", ")
        ),
    );
    body
}
