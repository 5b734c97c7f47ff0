//! `psp sweep`: loads x policies in parallel, then bisection around each policy's
//! SLO boundary, the sustainable throughput, the JSON document and the plot.
//!
//! A sweep also splits for a batch engine of the user's (GNU parallel, Slurm
//! job arrays, Kubernetes jobs): `--emit-points DIR` writes one command per
//! grid point (the same sweep with `--run-point I --points-dir DIR`), each
//! writes `DIR/point-I.json`, and the same sweep with `--merge DIR` reads
//! them, runs the bisection steps (`--refine`, a few points per policy) and
//! writes the sweep as if it had run in one process. There is no scheduler
//! of our own for this.

use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use psp_core::PolicySpec;
use psp_metrics::{PointResult, PolicySweep, Slo, SweepResult};
use psp_sim::{Workload, simulate_point};
use rayon::prelude::*;

use crate::{Mode, PointArgs, limits, report};

/// `psp sweep` arguments.
#[derive(Args)]
pub struct SweepArgs {
    /// Where points are measured: the simulator (points in parallel), the real
    /// runtime with the in-process generator, or the runtime behind the UDP
    /// datapath driven by the open-loop client over loopback (one point at a time).
    #[arg(long, value_enum, default_value_t = Mode::Sim)]
    mode: Mode,
    #[command(flatten)]
    point: PointArgs,
    /// Policies to compare, comma-separated (parameters may follow each name:
    /// `ts:sq,quantum=5,darc` is two policies).
    #[arg(long, default_value = "d-fcfs,c-fcfs,ts,darc")]
    policies: String,
    /// Loads as fractions of peak: START:END:STEP or a list A,B,C.
    #[arg(long, default_value = "0.05:1.0:0.05", allow_hyphen_values = true)]
    loads: String,
    /// SLO: bound on every type's p99.9 slowdown (default 10 unless --slo-overall is given).
    #[arg(long, allow_hyphen_values = true)]
    slo_slowdown: Option<f64>,
    /// SLO: bound on the p99.9 slowdown over all requests.
    #[arg(long, allow_hyphen_values = true)]
    slo_overall: Option<f64>,
    /// SLO: largest tolerated fraction of lost requests.
    #[arg(long, allow_hyphen_values = true, default_value_t = 0.001)]
    max_loss: f64,
    /// Bisection steps between each policy's last passing and first failing load.
    #[arg(long, allow_hyphen_values = true, default_value_t = 2)]
    refine: usize,
    /// Where to write the sweep's JSON.
    #[arg(long, default_value = "results/sweep.json")]
    out: PathBuf,
    /// Plot path without extension (default: --out without extension).
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Do not draw the plot.
    #[arg(long)]
    no_plot: bool,
    /// Worker threads for the sweep (default: all cores).
    #[arg(long, allow_hyphen_values = true)]
    threads: Option<usize>,
    /// Print the sweep as JSON on stdout (instead of the table).
    #[arg(long)]
    json: bool,
    /// `--mode run|net`: cores to pin the runtime to, dispatcher first (e.g.
    /// 0-14); default: automatic.
    #[arg(long)]
    cores: Option<String>,
    /// `--mode run|net`: how idle runtime threads wait: spin, yield, park or
    /// park:SPIN_US.
    #[arg(long, default_value = "park")]
    idle: String,
    /// `--mode net`: measure this running server (its policy is the one in
    /// --policies) instead of starting one on loopback per point.
    #[arg(long)]
    server: Option<String>,
    #[command(flatten)]
    client: crate::net::ClientArgs,
    /// `--mode run|net`: the application served.
    #[command(flatten)]
    app: crate::app::AppArgs,
    /// Split the sweep: write one command per grid point to DIR/points.txt
    /// (and on stdout; with --json as `{"points": [...]}`), each the same
    /// sweep with `--run-point I --points-dir DIR`; run nothing.
    #[arg(long, conflicts_with_all = ["run_point", "merge"])]
    emit_points: Option<PathBuf>,
    /// Run grid point I of this sweep only and write it to
    /// `--points-dir`/point-I.json (with --json, also on stdout).
    #[arg(long, requires = "points_dir", conflicts_with = "merge")]
    run_point: Option<usize>,
    /// Where `--run-point` writes its point.
    #[arg(long, requires = "run_point")]
    points_dir: Option<PathBuf>,
    /// Finish a split sweep: read DIR/point-*.json (every grid point), then
    /// bisect and write the sweep as usual.
    #[arg(long)]
    merge: Option<PathBuf>,
    /// The sweep's own arguments as given, for `--emit-points`'s commands
    /// (set by [`run`], which has them).
    #[arg(skip)]
    argv: Vec<String>,
}

/// One grid point of a split sweep, as `--run-point` writes it.
#[derive(serde::Serialize, serde::Deserialize)]
struct GridPoint {
    index: usize,
    policy: String,
    load: f64,
    point: PointResult,
}

/// Where grid point `index` is kept.
fn point_path(dir: &std::path::Path, index: usize) -> PathBuf {
    dir.join(format!("point-{index}.json"))
}

/// The command that runs grid point `index` of the sweep `argv` (as given,
/// without the program's name).
fn point_command(argv: &[String], index: usize, dir: &std::path::Path) -> String {
    let mut words = vec!["psp".to_string()];
    let mut skip = false;
    for w in argv {
        if skip {
            skip = false;
            continue;
        }
        if w == "--emit-points" {
            skip = true;
            continue;
        }
        if w.starts_with("--emit-points=") {
            continue;
        }
        words.push(w.clone());
    }
    words.push("--run-point".into());
    words.push(index.to_string());
    words.push("--points-dir".into());
    words.push(dir.display().to_string());
    words
        .iter()
        .map(|w| shell_quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `w` as one shell word.
fn shell_quote(w: &str) -> String {
    let plain = !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.,:/=+@%".contains(c));
    if plain {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

struct Plan {
    workload: Workload,
    specs: Vec<PolicySpec>,
    slo: Slo,
    target: Target,
}

/// Where a plan's points are measured, with what the runtime needs there.
enum Target {
    /// The simulator.
    Sim,
    /// The runtime with the in-process generator, serving `app`.
    Run {
        app: psp_apps::AppConfig,
        net: crate::net::NetOptions,
    },
    /// The runtime behind the network datapath, serving `app`.
    Net {
        app: psp_apps::AppConfig,
        net: crate::net::NetOptions,
    },
}

impl Plan {
    fn point(&self, args: &PointArgs, spec: &PolicySpec, load: f64) -> Result<PointResult> {
        let cfg = args.config(
            &self.workload,
            load * self.workload.peak_rps(args.workers()),
        )?;
        match &self.target {
            Target::Sim => Ok(simulate_point(&self.workload, spec, &cfg)?),
            Target::Run { app, net } => crate::run::measure(
                &self.workload,
                app,
                spec,
                &cfg,
                &crate::run::RunOptions {
                    cores: net.cores.clone(),
                    idle: net.idle,
                    ..crate::run::RunOptions::default()
                },
            )
            .map(|(point, ..)| point),
            Target::Net { app, net } => crate::net::measure(&self.workload, app, spec, &cfg, net),
        }
    }
}

/// A sweep of the simulator with every value typed: what `psp sweep`'s flags
/// come to, and what `psp reproduce` builds directly.
pub struct SimSweep {
    /// The points' parameters (workload, workers, duration, system, ...).
    pub point: PointArgs,
    /// The policies compared, in order.
    pub policies: Vec<PolicySpec>,
    /// The grid's loads, as fractions of the peak.
    pub loads: Vec<f64>,
    /// Bound on every type's p99.9 slowdown (10 when neither bound is given).
    pub slo_slowdown: Option<f64>,
    /// Bound on the p99.9 slowdown over all requests.
    pub slo_overall: Option<f64>,
    /// Largest tolerated fraction of lost requests.
    pub max_loss: f64,
    /// Bisection steps between each policy's last passing and first failing load.
    pub refine: usize,
    /// Worker threads for the points (default: all cores).
    pub threads: Option<usize>,
    /// Where the sweep's JSON is written.
    pub out: PathBuf,
}

/// Runs a simulated sweep and writes its JSON to `s.out` (no plot).
///
/// # Errors
/// A value out of range, a point that cannot run, a file that cannot be written.
pub fn simulate(s: &SimSweep) -> Result<SweepResult> {
    let workload = crate::profile::resolve_workload(&s.point.workload)?;
    limits::POLICIES.check(s.policies.len())?;
    limits::LOAD_POINTS.check(s.loads.len())?;
    for &l in &s.loads {
        limits::SWEEP_LOAD.check(l)?;
    }
    let (slo, workers, _) = check(s, &workload, None)?;
    let plan = Plan {
        workload,
        specs: s.policies.clone(),
        slo,
        target: Target::Sim,
    };
    let pool = pool(Mode::Sim, s.threads)?;
    let bar = progress(&plan, s.loads.len() + s.refine, workers);
    let jobs = grid(&plan, &s.loads);
    let sweeps = measure(&plan, &s.point, &jobs, s.refine, &pool, &bar, None)?;
    bar.finish_and_clear();
    write_result(&plan, Mode::Sim, &s.point, sweeps, &s.out)
}

/// Checks a sweep's values against the workload, every policy at the grid's
/// top load (bisection stays below it) once, early; `client`, for `--mode
/// net`, is checked where its `--flows` range comes first. Returns the SLO,
/// the workers and the top load's config.
fn check(
    s: &SimSweep,
    workload: &Workload,
    client: Option<&crate::net::ClientArgs>,
) -> Result<(Slo, usize, psp_sim::SimConfig)> {
    let per_type = match (s.slo_slowdown, s.slo_overall) {
        (None, None) => Some(10.0),
        (s, _) => s,
    };
    per_type
        .map(|v| limits::SLO_SLOWDOWN.check(v))
        .transpose()?;
    s.slo_overall
        .map(|v| limits::SLO_OVERALL.check(v))
        .transpose()?;
    limits::MAX_LOSS.check(s.max_loss)?;
    limits::REFINE.check(s.refine)?;
    s.threads
        .map(|t| limits::SWEEP_THREADS.check(t))
        .transpose()?;
    let workers = limits::WORKERS.check(s.point.workers())?;
    let max_load = s.loads.iter().copied().fold(0.0, f64::max);
    let top = limits::load_rate("--loads", max_load, workload, workers)?;
    if let Some(client) = client {
        // --flows counts the client's sockets: their range first.
        client.clone().with_flows(s.point.flows).check()?;
    }
    let cfg = s.point.config(workload, top)?;
    let ctx = psp_core::PolicyContext {
        workers,
        types: workload.type_infos(),
        queue_capacity: cfg.queue_capacity,
    };
    for spec in &s.policies {
        spec.build(&ctx)?;
        limits::point_work(spec, workload, workers, top, cfg.duration_ns)?;
    }
    let slo = Slo {
        per_type_p999_slowdown: per_type,
        overall_p999_slowdown: s.slo_overall,
        max_loss_fraction: s.max_loss,
    };
    Ok((slo, workers, cfg))
}

/// The pool the points run on: one thread for the runtime (a point needs the
/// whole machine), else `threads` (default: all cores).
fn pool(mode: Mode, threads: Option<usize>) -> Result<rayon::ThreadPool> {
    let mut b = rayon::ThreadPoolBuilder::new();
    if mode != Mode::Sim {
        b = b.num_threads(1);
    } else if let Some(t) = threads {
        b = b.num_threads(t);
    }
    b.build().context("thread pool")
}

/// The progress bar of `per_policy` points for each policy.
fn progress(plan: &Plan, per_policy: usize, workers: usize) -> ProgressBar {
    let bar = ProgressBar::new((plan.specs.len() * per_policy) as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} points {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(format!("{} on {workers} workers", plan.workload.name));
    bar
}

/// The grid: every (policy, load), indexed for a split sweep.
fn grid(plan: &Plan, loads: &[f64]) -> Vec<(usize, f64)> {
    (0..plan.specs.len())
        .flat_map(|p| loads.iter().map(move |&l| (p, l)))
        .collect()
}

/// Measures the grid (or takes its points from `merged`, in grid order), then
/// bisects each policy's boundary `refine` times.
fn measure(
    plan: &Plan,
    point: &PointArgs,
    jobs: &[(usize, f64)],
    refine_steps: usize,
    pool: &rayon::ThreadPool,
    bar: &ProgressBar,
    merged: Option<Vec<PointResult>>,
) -> Result<Vec<PolicySweep>> {
    pool.install(|| -> Result<Vec<PolicySweep>> {
        // Grid: every (policy, load) in parallel, or read back.
        let grid: Vec<Mutex<Vec<PointResult>>> =
            plan.specs.iter().map(|_| Mutex::new(Vec::new())).collect();
        let keep = |p: usize, pt: PointResult| -> Result<()> {
            grid[p]
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?
                .push(pt);
            bar.inc(1);
            Ok(())
        };
        match merged {
            Some(points) => jobs
                .iter()
                .zip(points)
                .try_for_each(|(&(p, _), pt)| keep(p, pt))?,
            None => jobs
                .par_iter()
                .try_for_each(|&(p, load)| keep(p, plan.point(point, &plan.specs[p], load)?))?,
        }
        // Refinement: bisect each policy's boundary, policies in parallel.
        grid.into_par_iter()
            .enumerate()
            .map(|(p, points)| {
                let mut points = points
                    .into_inner()
                    .map_err(|_| anyhow::anyhow!("poisoned"))?;
                points.sort_by(|x, y| x.offered_rps.total_cmp(&y.offered_rps));
                refine(plan, point, p, &mut points, refine_steps, bar)?;
                Ok(PolicySweep {
                    policy: plan.specs[p].to_string(),
                    max_rps_within_slo: plan.slo.max_sustainable_rps(&points),
                    points,
                })
            })
            .collect()
    })
}

/// The sweep's result, written as JSON to `out`.
fn write_result(
    plan: &Plan,
    mode: Mode,
    point: &PointArgs,
    sweeps: Vec<PolicySweep>,
    out: &std::path::Path,
) -> Result<SweepResult> {
    let result = SweepResult {
        slo: plan.slo.clone(),
        mode: match mode {
            Mode::Sim => "sim",
            Mode::Run => "run",
            Mode::Net => "net",
        }
        .into(),
        workload: plan.workload.name.clone(),
        workers: point.workers(),
        peak_rps: plan.workload.peak_rps(point.workers()),
        policies: sweeps,
    };
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create '{}'", dir.display()))?;
    }
    std::fs::write(out, serde_json::to_string_pretty(&result)?)
        .with_context(|| format!("cannot write '{}'", out.display()))?;
    Ok(result)
}

/// Runs the sweep: prints its table (or JSON) and the files written.
pub fn run(mut a: SweepArgs) -> Result<()> {
    a.argv = std::env::args().skip(1).collect();
    let json = a.json;
    let split = a.emit_points.is_some() || a.run_point.is_some();
    let (result, written) = execute(a)?;
    if split {
        for w in written {
            eprintln!("wrote {}", w.display());
        }
        return Ok(());
    }
    for w in report::sweep_warmup_warnings(&result) {
        eprintln!("{w}");
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        print!("{}", report::sweep_table(&result));
    }
    for w in written {
        eprintln!("wrote {}", w.display());
    }
    Ok(())
}

/// Runs the sweep and writes its JSON (and plot): the result and the files
/// written.
///
/// # Errors
/// A flag out of range, a point that cannot run, a file that cannot be written.
pub fn execute(mut a: SweepArgs) -> Result<(SweepResult, Vec<std::path::PathBuf>)> {
    a.point = a.point.with_default_workers(a.mode);
    let server = a
        .server
        .as_deref()
        .map(|s| crate::net::parse_addr(s, "--server"))
        .transpose()?;
    if server.is_some() && a.mode != Mode::Net {
        bail!("--server is for --mode net");
    }
    let workload = crate::profile::resolve_workload(&a.point.workload)?;
    let policies = psp_core::policy::split_policy_list(&a.policies);
    limits::POLICIES.check(policies.len())?;
    let specs = policies
        .iter()
        .map(|p| workload.policy(p).map_err(anyhow::Error::from))
        .collect::<Result<Vec<_>>>()?;
    let typed = SimSweep {
        point: a.point.clone(),
        policies: specs,
        loads: limits::parse_loads(&a.loads)?,
        slo_slowdown: a.slo_slowdown,
        slo_overall: a.slo_overall,
        max_loss: a.max_loss,
        refine: a.refine,
        threads: a.threads,
        out: a.out.clone(),
    };
    let client = (a.mode == Mode::Net).then_some(&a.client);
    let (slo, workers, _) = check(&typed, &workload, client)?;
    let SimSweep {
        policies: specs,
        loads,
        ..
    } = typed;
    if server.is_some() && specs.len() != 1 {
        bail!("with --server, --policies names the one policy that server runs");
    }
    if a.mode != Mode::Sim {
        for s in &specs {
            limits::runtime_quantum(s)?;
        }
    }
    let app = a
        .app
        .config(&workload, crate::net::default_max_service_ns(&workload))?;
    let net = crate::net::NetOptions {
        server,
        client: a.client.clone().with_flows(a.point.flows),
        cores: a
            .cores
            .as_deref()
            .map(crate::run::parse_cores)
            .transpose()?,
        idle: limits::idle(&a.idle)?,
    };
    let plan = Plan {
        target: match a.mode {
            Mode::Sim => Target::Sim,
            Mode::Run => Target::Run { app, net },
            Mode::Net => Target::Net { app, net },
        },
        slo,
        workload,
        specs,
    };

    let pool = pool(a.mode, a.threads)?;
    let bar = progress(&plan, loads.len() + a.refine, a.point.workers());
    let jobs = grid(&plan, &loads);
    if let Some(dir) = &a.emit_points {
        bar.finish_and_clear();
        return emit_points(&plan, &a, jobs.len(), dir);
    }
    if let Some(index) = a.run_point {
        let written = run_point(&plan, &a, &pool, &jobs, index);
        bar.finish_and_clear();
        return written;
    }
    // A split sweep's grid points, read back, checked against this sweep's.
    let merged = a
        .merge
        .as_deref()
        .map(|dir| read_points(&plan, &jobs, dir))
        .transpose()?;
    let sweeps = measure(&plan, &a.point, &jobs, a.refine, &pool, &bar, merged)?;
    bar.finish_and_clear();
    // After the points: an error is still one line.
    if a.mode == Mode::Run
        && let Some(w) = crate::run::machine_warning(&plan.workload, workers)
    {
        eprintln!("{w}");
    }
    let result = write_result(&plan, a.mode, &a.point, sweeps, &a.out)?;
    let mut written = vec![a.out.clone()];
    if !a.no_plot {
        let stem = a.plot.clone().unwrap_or_else(|| a.out.with_extension(""));
        written.extend(psp_plot::plot_sweep(
            &result,
            &stem,
            &report::sweep_title(&result),
        )?);
    }
    Ok((result, written))
}

/// `--emit-points DIR`: writes the command of each of the `points` grid
/// points to DIR/points.txt (and stdout); runs nothing.
fn emit_points(
    plan: &Plan,
    a: &SweepArgs,
    points: usize,
    dir: &std::path::Path,
) -> Result<(SweepResult, Vec<PathBuf>)> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create '{}'", dir.display()))?;
    if a.argv.is_empty() {
        bail!("--emit-points needs the sweep's own command line (psp sweep)");
    }
    let commands: String = (0..points)
        .map(|i| point_command(&a.argv, i, dir) + "\n")
        .collect();
    let list = dir.join("points.txt");
    std::fs::write(&list, &commands)
        .with_context(|| format!("cannot write '{}'", list.display()))?;
    // With --json, stdout holds one JSON document: the commands' list.
    if a.json {
        let list: Vec<&str> = commands.lines().collect();
        println!("{}", serde_json::json!({ "points": list }));
    } else {
        print!("{commands}");
    }
    Ok((empty_result(plan, a), vec![list]))
}

/// `--run-point I`: runs grid point I of `jobs` alone and writes it to
/// `--points-dir`/point-I.json (with --json, also on stdout).
fn run_point(
    plan: &Plan,
    a: &SweepArgs,
    pool: &rayon::ThreadPool,
    jobs: &[(usize, f64)],
    index: usize,
) -> Result<(SweepResult, Vec<PathBuf>)> {
    let Some(&(p, load)) = jobs.get(index) else {
        bail!(
            "--run-point must be in [0, {}] for this sweep, not {index}",
            jobs.len().saturating_sub(1)
        );
    };
    let dir = a.points_dir.as_deref().expect("clap requires --points-dir");
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create '{}'", dir.display()))?;
    let point = pool.install(|| plan.point(&a.point, &plan.specs[p], load))?;
    let path = point_path(dir, index);
    let kept = GridPoint {
        index,
        policy: plan.specs[p].to_string(),
        load,
        point,
    };
    let text = serde_json::to_string_pretty(&kept)?;
    std::fs::write(&path, &text).with_context(|| format!("cannot write '{}'", path.display()))?;
    if a.json {
        println!("{text}");
    }
    Ok((empty_result(plan, a), vec![path]))
}

/// `--merge DIR`: every grid point of a split sweep, read back in grid order
/// and checked against this sweep's.
fn read_points(
    plan: &Plan,
    jobs: &[(usize, f64)],
    dir: &std::path::Path,
) -> Result<Vec<PointResult>> {
    jobs.iter()
        .enumerate()
        .map(|(i, &(p, load))| -> Result<PointResult> {
            let path = point_path(dir, i);
            let text = std::fs::read_to_string(&path).with_context(|| {
                format!(
                    "cannot read '{}' (grid point {i} of {}: run it with --run-point {i})",
                    path.display(),
                    jobs.len()
                )
            })?;
            let kept: GridPoint = serde_json::from_str(&text)
                .with_context(|| format!("'{}' is not a grid point", path.display()))?;
            if kept.index != i
                || kept.policy != plan.specs[p].to_string()
                || kept.load.to_bits() != load.to_bits()
            {
                bail!(
                    "'{}' is point {} ({} at load {}), not this sweep's point {i} ({} at load {load}): was it split from the same sweep?",
                    path.display(),
                    kept.index,
                    kept.policy,
                    kept.load,
                    plan.specs[p]
                );
            }
            Ok(kept.point)
        })
        .collect()
}

/// The sweep's frame with no points (what a split sweep's emit and point
/// steps return: their output is files).
fn empty_result(plan: &Plan, a: &SweepArgs) -> SweepResult {
    SweepResult {
        slo: plan.slo.clone(),
        mode: "split".into(),
        workload: plan.workload.name.clone(),
        workers: a.point.workers(),
        peak_rps: plan.workload.peak_rps(a.point.workers()),
        policies: Vec::new(),
    }
}

/// Bisects between the last load meeting the SLO (with every lower one) and the
/// next, `steps` times, adding the points.
fn refine(
    plan: &Plan,
    args: &PointArgs,
    p: usize,
    points: &mut Vec<PointResult>,
    steps: usize,
    bar: &ProgressBar,
) -> Result<()> {
    let passing = points
        .iter()
        .take_while(|pt| plan.slo.is_met_by(pt))
        .count();
    if passing == 0 || passing == points.len() {
        bar.inc(steps as u64);
        return Ok(());
    }
    let (mut lo, mut hi) = (points[passing - 1].load, points[passing].load);
    for _ in 0..steps {
        let mid = (lo + hi) / 2.0;
        let pt = plan.point(args, &plan.specs[p], mid)?;
        if plan.slo.is_met_by(&pt) {
            lo = mid;
        } else {
            hi = mid;
        }
        points.push(pt);
        bar.inc(1);
    }
    points.sort_by(|x, y| x.offered_rps.total_cmp(&y.offered_rps));
    Ok(())
}
