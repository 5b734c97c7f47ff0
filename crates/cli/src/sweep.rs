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

use crate::{Mode, PointArgs, limits, report, units};

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
    app: psp_apps::AppConfig,
    specs: Vec<PolicySpec>,
    slo: Slo,
    mode: Mode,
    net: crate::net::NetOptions,
}

impl Plan {
    fn point(&self, args: &PointArgs, spec: &PolicySpec, load: f64) -> Result<PointResult> {
        let cfg = args.config(
            &self.workload,
            load * self.workload.peak_rps(args.workers()),
        )?;
        match self.mode {
            Mode::Sim => Ok(simulate_point(&self.workload, spec, &cfg)?),
            Mode::Run => crate::run::measure(
                &self.workload,
                &self.app,
                spec,
                &cfg,
                &crate::run::RunOptions {
                    cores: self.net.cores.clone(),
                    idle: self.net.idle,
                    ..crate::run::RunOptions::default()
                },
            )
            .map(|(point, ..)| point),
            Mode::Net => crate::net::measure(&self.workload, &self.app, spec, &cfg, &self.net),
        }
    }
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

/// A sweep given as `psp sweep`'s arguments (without the program and
/// subcommand names), for commands that run sweeps of their own (`psp
/// reproduce`).
///
/// # Errors
/// Arguments `psp sweep` would refuse.
pub fn args_from(argv: &[String]) -> Result<SweepArgs> {
    #[derive(clap::Parser)]
    struct Sweep {
        #[command(flatten)]
        args: SweepArgs,
    }
    use clap::Parser;
    let argv = std::iter::once("sweep".to_string()).chain(argv.iter().cloned());
    Ok(Sweep::try_parse_from(argv)
        .map_err(|e| anyhow::anyhow!("{}", crate::one_line(&e.render().to_string())))?
        .args)
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
        .map(|p| p.parse::<PolicySpec>().map_err(anyhow::Error::from))
        .collect::<Result<Vec<_>>>()?;
    let loads = units::parse_loads(&a.loads)?;
    let per_type = match (a.slo_slowdown, a.slo_overall) {
        (None, None) => Some(10.0),
        (s, _) => s,
    };
    per_type
        .map(|v| limits::SLO_SLOWDOWN.check(v))
        .transpose()?;
    a.slo_overall
        .map(|v| limits::SLO_OVERALL.check(v))
        .transpose()?;
    limits::MAX_LOSS.check(a.max_loss)?;
    limits::REFINE.check(a.refine)?;
    a.threads
        .map(|t| limits::SWEEP_THREADS.check(t))
        .transpose()?;
    // Validate the point parameters at the highest load (bisection stays below
    // it) and every policy on this workload once, early.
    let workers = limits::WORKERS.check(a.point.workers())?;
    let max_load = loads.iter().copied().fold(0.0, f64::max);
    let top = limits::load_rate("--loads", max_load, &workload, workers)?;
    if a.mode == Mode::Net {
        // --flows counts the client's sockets: their range first.
        a.client.clone().with_flows(a.point.flows).check()?;
    }
    let cfg = a.point.config(&workload, top)?;
    let ctx = psp_core::PolicyContext {
        workers,
        types: workload.type_infos(),
        queue_capacity: cfg.queue_capacity,
    };
    for s in &specs {
        s.build(&ctx)?;
        limits::point_work(s, &workload, workers, top, cfg.duration_ns)?;
    }
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
    let plan = Plan {
        app,
        mode: a.mode,
        slo: Slo {
            per_type_p999_slowdown: per_type,
            overall_p999_slowdown: a.slo_overall,
            max_loss_fraction: a.max_loss,
        },
        workload,
        specs,
        net: crate::net::NetOptions {
            server,
            client: a.client.clone().with_flows(a.point.flows),
            cores: a
                .cores
                .as_deref()
                .map(crate::run::parse_cores)
                .transpose()?,
            idle: limits::idle(&a.idle)?,
        },
    };

    let pool = {
        let mut b = rayon::ThreadPoolBuilder::new();
        if a.mode != Mode::Sim {
            // A runtime point needs the whole machine: one at a time.
            b = b.num_threads(1);
        } else if let Some(t) = a.threads {
            b = b.num_threads(t);
        }
        b.build().context("thread pool")?
    };
    let bar = ProgressBar::new((plan.specs.len() * (loads.len() + a.refine)) as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} points {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(format!(
        "{} on {} workers",
        plan.workload.name,
        a.point.workers()
    ));

    // The grid: every (policy, load), indexed for a split sweep.
    let jobs: Vec<(usize, f64)> = (0..plan.specs.len())
        .flat_map(|p| loads.iter().map(move |&l| (p, l)))
        .collect();
    if let Some(dir) = &a.emit_points {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create '{}'", dir.display()))?;
        if a.argv.is_empty() {
            bail!("--emit-points needs the sweep's own command line (psp sweep)");
        }
        let commands: String = (0..jobs.len())
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
        bar.finish_and_clear();
        return Ok((empty_result(&plan, &a), vec![list]));
    }
    if let Some(index) = a.run_point {
        let Some(&(p, load)) = jobs.get(index) else {
            bail!(
                "--run-point must be in [0, {}] for this sweep, not {index}",
                jobs.len().saturating_sub(1)
            );
        };
        let dir = a.points_dir.as_deref().expect("clap requires --points-dir");
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create '{}'", dir.display()))?;
        let point = pool.install(|| plan.point(&a.point, &plan.specs[p], load))?;
        let path = point_path(dir, index);
        let kept = GridPoint {
            index,
            policy: plan.specs[p].to_string(),
            load,
            point,
        };
        let text = serde_json::to_string_pretty(&kept)?;
        std::fs::write(&path, &text)
            .with_context(|| format!("cannot write '{}'", path.display()))?;
        if a.json {
            println!("{text}");
        }
        bar.finish_and_clear();
        return Ok((empty_result(&plan, &a), vec![path]));
    }
    // A split sweep's grid points, read back, checked against this sweep's.
    let merged: Option<Vec<PointResult>> = match &a.merge {
        None => None,
        Some(dir) => Some(
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
                .collect::<Result<_>>()?,
        ),
    };

    let sweeps = pool.install(|| -> Result<Vec<PolicySweep>> {
        // Grid: every (policy, load) in parallel, or read back.
        let grid: Vec<Mutex<Vec<PointResult>>> =
            plan.specs.iter().map(|_| Mutex::new(Vec::new())).collect();
        let keep = |p: usize, point: PointResult| -> Result<()> {
            grid[p]
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?
                .push(point);
            bar.inc(1);
            Ok(())
        };
        match merged {
            Some(points) => jobs
                .iter()
                .zip(points)
                .try_for_each(|(&(p, _), point)| keep(p, point))?,
            None => jobs
                .par_iter()
                .try_for_each(|&(p, load)| keep(p, plan.point(&a.point, &plan.specs[p], load)?))?,
        }
        // Refinement: bisect each policy's boundary, policies in parallel.
        grid.into_par_iter()
            .enumerate()
            .map(|(p, points)| {
                let mut points = points
                    .into_inner()
                    .map_err(|_| anyhow::anyhow!("poisoned"))?;
                points.sort_by(|x, y| x.offered_rps.total_cmp(&y.offered_rps));
                refine(&plan, &a.point, p, &mut points, a.refine, &bar)?;
                Ok(PolicySweep {
                    policy: plan.specs[p].to_string(),
                    max_rps_within_slo: plan.slo.max_sustainable_rps(&points),
                    points,
                })
            })
            .collect()
    })?;
    bar.finish_and_clear();
    // After the points: an error is still one line.
    if a.mode == Mode::Run
        && let Some(w) = crate::run::machine_warning(&plan.workload, workers)
    {
        eprintln!("{w}");
    }

    let result = SweepResult {
        slo: plan.slo.clone(),
        mode: match a.mode {
            Mode::Sim => "sim",
            Mode::Run => "run",
            Mode::Net => "net",
        }
        .into(),
        workload: plan.workload.name.clone(),
        workers: a.point.workers(),
        peak_rps: plan.workload.peak_rps(a.point.workers()),
        policies: sweeps,
    };
    if let Some(dir) = a.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create '{}'", dir.display()))?;
    }
    std::fs::write(&a.out, serde_json::to_string_pretty(&result)?)
        .with_context(|| format!("cannot write '{}'", a.out.display()))?;
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
