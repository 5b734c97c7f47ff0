//! `psp`: Perséphone's command line. `sim` simulates one point, `run` measures one
//! on the real runtime, `serve` puts the runtime behind a network front end (UDP,
//! AF_XDP, or TCP with Redis's and memcached's protocols) and `load` drives it
//! open-loop, `sweep` runs many points (loads x policies) and finds each policy's
//! sustainable throughput at an SLO, `plot` draws figures from saved sweeps,
//! `reproduce` regenerates the papers' figures, `bench` and `netbench` measure
//! speed, `workloads` lists the built-in workloads, `completions` and `man` print
//! the shell completions and the man page.
//!
//! Every error is one line on stderr with exit code 2; `--json` prints one JSON
//! document on stdout and nothing else.

mod app;
mod limits;
mod net;
mod profile;
mod report;
mod reproduce;
mod run;
mod shell;
mod sweep;
mod system;
mod units;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use psp_core::PolicySpec;
use psp_sim::{SimConfig, Workload, simulate_point};

#[derive(Parser)]
#[command(
    name = "psp",
    version,
    about = "Perséphone: application-aware scheduling for microsecond-scale services"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate one point (a workload under a policy at one load).
    Sim(SimArgs),
    /// One point on the real runtime (dispatcher + workers) with the in-process generator.
    Run(run::RunArgs),
    /// Measure the synthetic handler's spin against the clock (requested vs actual).
    Calibrate,
    /// Measure an application's service time per request type, alone, and write
    /// it as a workload file.
    Profile(profile::ProfileArgs),
    /// Serve requests: the runtime behind a network front end (UDP, AF_XDP, or
    /// TCP speaking Redis's RESP or memcached's protocol).
    Serve(Box<net::ServeArgs>),
    /// Open-loop Poisson client against a server: one measured point.
    Load(net::LoadArgs),
    /// Live terminal view of a running `psp serve --metrics ADDR`: per type
    /// rate, latency, queue and sheds; per worker what it runs and for whom
    /// it is reserved or lent; reservation changes and preemptions.
    Top(TopArgs),
    /// A plain multi-threaded UDP echo server (the throughput baseline).
    Echo(net::EchoArgs),
    /// Highest sustained rate of trivial requests: psp serve beside the echo server.
    Netbench(net::NetbenchArgs),
    /// Run loads x policies and find each policy's sustainable throughput at an SLO.
    Sweep(sweep::SweepArgs),
    /// Draw p99.9 slowdown and short-request tail latency against load from a sweep.
    Plot(PlotArgs),
    /// Regenerate every simulated figure of docs/results.md (JSON, SVG/PNG and
    /// a markdown table each); `--list` names them.
    Reproduce(reproduce::ReproduceArgs),
    /// Measure the simulator's speed (simulated requests per second on one core).
    Bench(BenchArgs),
    /// List the built-in workloads.
    Workloads,
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(shell::CompletionsArgs),
    /// Print the man page (roff): `psp man > psp.1; man ./psp.1`.
    Man,
}

/// Where points are measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// The discrete-event simulator.
    Sim,
    /// The real runtime with the in-process generator.
    Run,
    /// The real runtime behind the network datapath.
    Net,
}

/// Parameters shared by every simulated point.
#[derive(Args, Clone, Debug)]
pub struct PointArgs {
    /// Built-in workload name or path to a workload TOML file.
    #[arg(long, default_value = "extreme-bimodal")]
    pub workload: String,
    /// Application workers (default: 16 in the simulator, the paper's setup; on
    /// the real runtime, one per core left after the dispatcher, or one per core
    /// on machines with fewer than 3).
    #[arg(long, allow_hyphen_values = true)]
    pub workers: Option<usize>,
    /// Length of the arrival period (e.g. 1s, 200ms).
    #[arg(long, default_value = "1s", allow_hyphen_values = true)]
    pub duration: String,
    /// Random seed.
    #[arg(long, allow_hyphen_values = true, default_value_t = 1)]
    pub seed: u64,
    /// Client flows. Simulator and `psp run`: each request comes on one of
    /// this many flows, at random; decentralized policies (d-fcfs, ws) steer a
    /// flow to a worker queue by hash, as RSS does [default: 512, at most
    /// 65536]. `psp load`: the client's sockets (source ports) [default: 16, at
    /// most 256].
    #[arg(long, allow_hyphen_values = true)]
    pub flows: Option<usize>,
    /// Fraction of the arrival period discarded as warm-up.
    #[arg(long, allow_hyphen_values = true, default_value_t = 0.1)]
    pub warmup: f64,
    /// Bound of each queue the policy keeps (typed, per-worker or central).
    #[arg(long, allow_hyphen_values = true, default_value_t = 4096)]
    pub queue_capacity: usize,
    /// Classifier: header (reads the request's type) or random (the
    /// misclassification experiment; latency is still reported per true type).
    #[arg(long, default_value = "header")]
    pub classifier: String,
    /// Simulator: the system cost model, a preset (ideal, psp, persephone,
    /// shinjuku, synergy) with optional overrides KEY=VALUE (arrival, dispatch,
    /// completion, preempt, request, network, ingress), e.g. `shinjuku:network=0`
    /// or `ideal:request=200ns`; or `own`: each policy on the preset of the
    /// system it models (ts on shinjuku, synergy/ws/d-fcfs on synergy, the
    /// others on persephone).
    #[arg(long, default_value = "ideal")]
    pub system: String,
}

impl PointArgs {
    /// Fills in the default worker count for `mode`.
    pub fn with_default_workers(mut self, mode: Mode) -> Self {
        self.workers.get_or_insert_with(|| match mode {
            Mode::Sim => 16,
            // The dispatcher gets a core of its own where there are 3 or more; on
            // smaller machines, one worker per core (pinned) while the mostly
            // sleeping dispatcher floats (docs/architecture.md).
            Mode::Run | Mode::Net => {
                let n = match std::thread::available_parallelism().map_or(1, |n| n.get()) {
                    n if n >= 3 => n - 1,
                    n => n,
                };
                n.min(psp_core::MAX_WORKERS)
            }
        });
        self
    }

    /// Application workers.
    pub fn workers(&self) -> usize {
        self.workers.unwrap_or(16)
    }

    /// A validated simulator config for `workload` at `rate_rps` (a rate
    /// [`limits::offered_rate`] accepted): every flag in range, and the requests
    /// and request slots the point needs within bounds.
    ///
    /// # Errors
    /// A flag out of range, or a point too large ([`limits`]).
    pub fn config(&self, workload: &Workload, rate_rps: f64) -> Result<SimConfig> {
        self.checked_config(workload, Some(rate_rps))
    }

    /// [`PointArgs::config`]; without a rate (closed-loop clients set it), the
    /// config's `rate_rps` is 0 and the work is left to the caller to bound.
    fn checked_config(&self, workload: &Workload, rate_rps: Option<f64>) -> Result<SimConfig> {
        let workers = limits::WORKERS.check(self.workers())?;
        let queue_capacity = limits::QUEUE_CAPACITY.check(self.queue_capacity)?;
        limits::slots(workload.types.len(), workers, queue_capacity)?;
        let warmup_fraction = limits::WARMUP.check(self.warmup)?;
        let duration_ns = limits::DURATION.parse_ns(&self.duration)?;
        if let Some(rate_rps) = rate_rps {
            limits::requests(rate_rps, duration_ns)?;
        }
        let flows = limits::ARRIVAL_FLOWS
            .check(self.flows.unwrap_or(psp_workload::DEFAULT_FLOWS as usize))?
            as u32;
        Ok(SimConfig {
            workers,
            rate_rps: rate_rps.unwrap_or(0.0),
            duration_ns,
            warmup_fraction,
            seed: self.seed,
            flows,
            queue_capacity,
            system: system::parse(&self.system)?,
            classifier: self.classifier_kind()?,
            series_window_ns: None,
            max_wait_ns: Vec::new(),
        })
    }

    /// The classifier; the random one's stream is derived from the seed.
    ///
    /// # Errors
    /// An unknown name.
    pub fn classifier_kind(&self) -> Result<psp_core::ClassifierKind> {
        psp_core::ClassifierKind::parse(&self.classifier, self.seed ^ 0x5eed)
            .map_err(anyhow::Error::msg)
    }
}

#[derive(Args)]
struct SimArgs {
    #[command(flatten)]
    target: PolicyPoint,
    /// Also record a time series (per-type latency percentiles and the
    /// reservation per window) and write it as STEM.json, STEM.svg and STEM.png.
    #[arg(long)]
    series: Option<PathBuf>,
    /// Window of the time series.
    #[arg(long, default_value = "100ms", allow_hyphen_values = true)]
    series_window: String,
    /// Closed-loop clients instead of open-loop arrivals: connections per
    /// request type, as NAME=N,... (the workload's type names; types not
    /// named get none) or one count per type in order, e.g. GET=16,SCAN=4 or
    /// 16,4 [each at most 4096, at least 1 in all]. A connection has one
    /// request out at a time and sends the next one of its type when the
    /// last is answered or refused, after --think. The clients set the load:
    /// --load, --rps and --flows do not apply (each connection is a flow).
    #[arg(long)]
    clients: Option<String>,
    /// With --clients: mean think time between a request's end and the
    /// connection's next request (exponential; 0: none) [default: 0us, at
    /// most 1s].
    #[arg(long, allow_hyphen_values = true)]
    think: Option<String>,
    /// Longest a request may wait from its arrival to its start, past
    /// which it is dropped unrun (counted in its type's drops and in
    /// `expired_total`) instead of served late, as `psp run --max-wait` and
    /// `psp serve --max-wait` do: DUR for every type, TYPE=DUR,... for the
    /// types named, DUR,TYPE=DUR,... for every type with exceptions
    /// (TYPE=none: unbounded); 1us to 1h [default: none].
    #[arg(long, allow_hyphen_values = true)]
    max_wait: Option<String>,
    /// Print the point as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct PlotArgs {
    /// A sweep result (JSON written by `psp sweep`).
    input: PathBuf,
    /// Output path without extension (writes .svg and .png); default: beside the input.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Figure title; default: workload, workers and SLO.
    #[arg(long)]
    title: Option<String>,
}

#[derive(Args)]
struct BenchArgs {
    /// Simulated arrival period per repetition.
    #[arg(long, allow_hyphen_values = true, default_value = "1s")]
    duration: String,
    /// Repetitions per policy (the median is reported).
    #[arg(long, allow_hyphen_values = true, default_value_t = 5)]
    reps: usize,
    /// Policies to time.
    #[arg(long, default_value = "c-fcfs,darc")]
    policies: String,
    /// System cost models to time each policy under (`;`-separated, see
    /// `--system` of `psp sim`).
    #[arg(long, default_value = "ideal;psp")]
    systems: String,
    /// Print the figures as JSON.
    #[arg(long)]
    json: bool,
}

/// [`PointArgs`] with every flag at its default.
pub fn default_point_args() -> PointArgs {
    PointArgs {
        workload: "extreme-bimodal".into(),
        workers: None,
        duration: "1s".into(),
        seed: 1,
        flows: None,
        warmup: 0.1,
        queue_capacity: 4096,
        classifier: "header".into(),
        system: "ideal".into(),
    }
}

/// `--policy`'s help: every registered policy, from the registry.
fn policy_help() -> String {
    format!(
        "Policy, one of {}, with parameters after a colon (e.g. darc:samples=1000, ts:sq,quantum=10, synergy:qf=1,wqd=10; docs/guide/reference.md lists every parameter)",
        psp_core::policy::known_policies()
    )
}

/// One point to measure: workload and machine parameters, policy, offered load.
#[derive(Args, Clone, Debug)]
pub struct PolicyPoint {
    #[command(flatten)]
    point: PointArgs,
    // The help lists the registry's policies (`policy_help`).
    #[arg(long, default_value = "darc", help = policy_help())]
    policy: String,
    #[command(flatten)]
    offered: OfferedLoad,
}

impl PolicyPoint {
    /// The workload, the policy and a validated config, with `mode`'s default
    /// number of workers.
    pub fn resolve(&self, mode: Mode) -> Result<(Workload, PolicySpec, SimConfig)> {
        self.resolve_with(
            crate::profile::resolve_workload(&self.point.workload)?,
            mode,
        )
    }

    /// As [`PolicyPoint::resolve`], with the workload given.
    fn resolve_with(
        &self,
        workload: Workload,
        mode: Mode,
    ) -> Result<(Workload, PolicySpec, SimConfig)> {
        let spec = workload.policy(&self.policy)?;
        let args = self.point.clone().with_default_workers(mode);
        let workers = limits::WORKERS.check(args.workers())?;
        let rate = self.offered.rate(&workload, workers)?;
        let cfg = args.config(&workload, rate)?;
        limits::point_work(&spec, &workload, cfg.workers, cfg.rate_rps, cfg.duration_ns)?;
        Ok((workload, spec, cfg))
    }
}

impl PolicyPoint {
    /// The workload, the policy, a validated config and closed-loop clients
    /// from `--clients SPEC` and `--think THINK` (the simulator's default
    /// number of workers), with the point's work bounded; every value is
    /// checked before anything runs.
    ///
    /// # Errors
    /// A flag out of range, or `--load`, `--rps` or `--flows` given (the
    /// clients set the load, and each connection is a flow).
    pub fn resolve_clients(
        &self,
        spec: &str,
        think: &str,
    ) -> Result<(Workload, PolicySpec, SimConfig, psp_workload::Clients)> {
        for (given, flag) in [
            (self.offered.load.is_some(), "--load"),
            (self.offered.rps.is_some(), "--rps"),
            (self.point.flows.is_some(), "--flows"),
        ] {
            if given {
                bail!(
                    "{flag} does not apply with --clients: closed-loop clients set the load (each connection is a flow)"
                );
            }
        }
        let workload = crate::profile::resolve_workload(&self.point.workload)?;
        let policy = workload.policy(&self.policy)?;
        let args = self.point.clone().with_default_workers(Mode::Sim);
        let clients = limits::clients(spec, think, &workload)?;
        let cfg = args.checked_config(&workload, None)?;
        let system = cfg.system.for_policy(&policy);
        let receive = if system.has_dispatcher_cost() {
            cfg.queue_capacity.min(system.ingress_capacity)
        } else {
            cfg.queue_capacity
        };
        limits::closed_loop_work(
            &policy,
            &workload,
            &clients,
            cfg.workers,
            receive,
            cfg.duration_ns,
        )?;
        Ok((workload, policy, cfg, clients))
    }
}

/// The offered load of one point: `--load` (fraction of peak) or `--rps`.
#[derive(Args, Clone, Debug)]
pub struct OfferedLoad {
    /// Offered load as a fraction of the workload's peak on these workers.
    #[arg(long, allow_hyphen_values = true, conflicts_with = "rps")]
    load: Option<f64>,
    /// Offered load in requests per second.
    #[arg(long, allow_hyphen_values = true)]
    rps: Option<f64>,
}

impl OfferedLoad {
    /// The offered rate (80% of peak when neither flag is given), in range.
    ///
    /// # Errors
    /// See [`limits::offered_rate`].
    pub fn rate(&self, workload: &Workload, workers: usize) -> Result<f64> {
        limits::offered_rate(self.load, self.rps, workload, workers)
    }
}

fn cmd_sim(a: SimArgs) -> Result<()> {
    let (workload, spec, mut cfg, clients) = match &a.clients {
        None => {
            if a.think.is_some() {
                bail!("--think applies only with --clients (closed-loop clients)");
            }
            let (workload, spec, cfg) = a.target.resolve(Mode::Sim)?;
            (workload, spec, cfg, None)
        }
        Some(c) => {
            let think = a.think.as_deref().unwrap_or("0us");
            let (workload, spec, cfg, clients) = a.target.resolve_clients(c, think)?;
            (workload, spec, cfg, Some(clients))
        }
    };
    if let Some(s) = &a.max_wait {
        cfg.max_wait_ns = max_wait_ns(&limits::max_wait(s, &app::type_names(&workload))?);
    }
    let point = match (&a.series, &clients) {
        (None, None) => simulate_point(&workload, &spec, &cfg)?,
        (None, Some(clients)) => psp_sim::simulate_clients(&workload, &spec, &cfg, clients)?.0,
        (Some(stem), _) => {
            let window = limits::SERIES_WINDOW.parse_ns(&a.series_window)?;
            check_series_stem(stem)?;
            cfg.series_window_ns = Some(window);
            let (point, series) = match &clients {
                None => psp_sim::simulate_with_series(&workload, &spec, &cfg)?,
                Some(clients) => psp_sim::simulate_clients(&workload, &spec, &cfg, clients)?,
            };
            let series = series.context("the simulator recorded no series")?;
            write_series(&series, &workload, stem, &point.policy)?;
            point
        }
    };
    if let Some(w) = report::point_warmup_warning(&point) {
        eprintln!("{w}");
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&point)?);
    } else {
        print!("{}", report::point_table(&point));
    }
    Ok(())
}

/// A per-type queueing bound ([`limits::max_wait`]) in the simulator's
/// nanoseconds.
pub fn max_wait_ns(bounds: &[Option<std::time::Duration>]) -> Vec<Option<u64>> {
    bounds
        .iter()
        .map(|b| b.map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)))
        .collect()
}

/// Refuses an output path (of option `flag`) that cannot be written (a directory, a missing
/// directory, no permission) without changing what is there: an existing
/// file is opened for appending, a new one created and removed.
pub fn check_writable(flag: &str, path: &Path) -> Result<()> {
    if path.is_dir() {
        bail!("{flag}: '{}' is a directory", path.display());
    }
    let opened = if path.exists() {
        std::fs::OpenOptions::new().append(true).open(path)
    } else {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .inspect(|_| {
                let _ = std::fs::remove_file(path);
            })
    };
    opened
        .map(drop)
        .with_context(|| format!("{flag}: cannot write '{}'", path.display()))
}

/// Refuses a `--series` stem whose files cannot be written, before the run.
pub fn check_series_stem(stem: &std::path::Path) -> Result<()> {
    if let Some(dir) = stem.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--series: cannot create '{}'", dir.display()))?;
    }
    check_writable("--series", &stem.with_extension("json"))
}

/// Writes a time series as `stem.json` and its figure, with the workload's
/// phase boundaries marked.
pub fn write_series(
    series: &psp_metrics::series::TimeSeries,
    workload: &Workload,
    stem: &std::path::Path,
    policy: &str,
) -> Result<Vec<PathBuf>> {
    if let Some(dir) = stem.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create '{}'", dir.display()))?;
    }
    let json = stem.with_extension("json");
    std::fs::write(&json, serde_json::to_string_pretty(series)?)
        .with_context(|| format!("cannot write '{}'", json.display()))?;
    let mut written = vec![json];
    written.extend(psp_plot::plot_series(
        series,
        &workload.phase_boundaries(),
        stem,
        &format!("{} under {policy}", workload.name),
    )?);
    for w in &written {
        eprintln!("wrote {}", w.display());
    }
    Ok(written)
}

/// Largest sweep result `psp plot` reads.
const MAX_SWEEP_BYTES: u64 = 256 << 20;

fn cmd_plot(a: PlotArgs) -> Result<()> {
    let text = psp_workload::read_text_file(&a.input, MAX_SWEEP_BYTES)
        .with_context(|| format!("cannot read '{}'", a.input.display()))?;
    let sweep: psp_metrics::SweepResult = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("'{}' is not a sweep result: {e}", a.input.display()))?;
    let stem = a.out.unwrap_or_else(|| a.input.with_extension(""));
    let title = a.title.unwrap_or_else(|| report::sweep_title(&sweep));
    for p in psp_plot::plot_sweep(&sweep, &stem, &title)? {
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}

fn cmd_bench(a: BenchArgs) -> Result<()> {
    limits::REPS.check(a.reps)?;
    let workload = Workload::resolve("extreme-bimodal")?;
    let workers = 16;
    let point = PointArgs {
        workload: workload.name.clone(),
        workers: Some(workers),
        duration: a.duration.clone(),
        ..default_point_args()
    };
    let rate = 0.9 * workload.peak_rps(workers);
    let config = point.config(&workload, rate)?;
    let policies = psp_core::policy::split_policy_list(&a.policies);
    limits::POLICIES.check(policies.len())?;
    let specs = policies
        .iter()
        .map(|p| Ok(workload.policy(p)?))
        .collect::<Result<Vec<_>>>()?;
    for spec in &specs {
        limits::time_slices(spec, &workload, limits::requests(rate, config.duration_ns)?)?;
    }
    let names: Vec<&str> = a
        .systems
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    limits::SYSTEMS.check(names.len())?;
    let systems = names
        .into_iter()
        .map(|s| Ok((s.to_string(), system::parse(s)?)))
        .collect::<Result<Vec<_>>>()?;
    let mut rows = Vec::new();
    for (spec, (system_name, system)) in specs
        .iter()
        .flat_map(|p| systems.iter().map(move |s| (p, s)))
    {
        let mut rates: Vec<f64> = Vec::with_capacity(a.reps);
        for rep in 0..a.reps {
            let mut cfg = config.clone();
            cfg.seed = rep as u64 + 1;
            cfg.system = *system;
            let (_, stats) = psp_sim::simulate(&workload, spec, &cfg)?;
            rates.push(stats.sim_requests_per_s);
        }
        rates.sort_by(f64::total_cmp);
        let median = rates[rates.len() / 2];
        rows.push(serde_json::json!({
            "policy": spec.to_string(),
            "system": system_name,
            "workload": workload.name,
            "workers": workers,
            "load": 0.9,
            "reps": a.reps,
            "median_sim_requests_per_s": median,
            "min_sim_requests_per_s": rates[0],
            "max_sim_requests_per_s": rates[rates.len() - 1],
        }));
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        println!(
            "simulator speed, extreme-bimodal, 16 workers, 90% load, one core, {} reps:",
            a.reps
        );
        for r in &rows {
            println!(
                "  {:<12} {:<8} median {:>6.2} M simulated requests/s (min {:.2}, max {:.2})",
                r["policy"].as_str().unwrap_or(""),
                r["system"].as_str().unwrap_or(""),
                r["median_sim_requests_per_s"].as_f64().unwrap_or(0.0) / 1e6,
                r["min_sim_requests_per_s"].as_f64().unwrap_or(0.0) / 1e6,
                r["max_sim_requests_per_s"].as_f64().unwrap_or(0.0) / 1e6,
            );
        }
    }
    Ok(())
}

fn cmd_calibrate() -> Result<()> {
    let spinner = psp_runtime::Spinner::calibrate(std::time::Duration::from_millis(100));
    println!("spin counter: {:.4} cycles/ns", spinner.cycles_per_ns());
    println!("{:>12} {:>14} {:>9}", "requested", "measured", "error");
    let sizes = [
        500, 1_000, 5_000, 10_000, 50_000, 100_000, 1_000_000, 10_000_000,
    ];
    let rows = psp_runtime::clock::spin_accuracy(
        &spinner,
        &sizes,
        std::time::Duration::from_millis(50),
        5,
    );
    for (ns, got) in rows {
        println!(
            "{:>10}ns {:>12.1}ns {:>+8.2}%",
            ns,
            got,
            (got / ns as f64 - 1.0) * 100.0
        );
    }
    Ok(())
}

fn cmd_workloads() -> Result<()> {
    for (name, _) in psp_sim::workload::BUILTIN {
        let w = Workload::resolve(name)?;
        let types: Vec<String> = w
            .types
            .iter()
            .map(|t| {
                format!(
                    "{} {:.3}us {:.1}%",
                    t.name,
                    t.service.mean_us(),
                    t.ratio * 100.0
                )
            })
            .collect();
        println!("{:<16} {}", name, types.join(", "));
    }
    Ok(())
}

/// Answers what the argument parser refused: help and version as clap writes
/// them (exit 0); `psp` or `psp sweep`-like calls without a subcommand, clap's
/// help on stderr (exit 2); any other error, one line on stderr (exit 2).
fn parse_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if !e.use_stderr() || e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let _ = e.print();
        return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
    }
    eprintln!("{}", one_line(&e.render().to_string()));
    ExitCode::from(2)
}

/// clap's multi-line error as one line: the message and its tips, without
/// the usage block.
fn one_line(rendered: &str) -> String {
    let mut out = String::new();
    for line in rendered.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with("Usage:") {
            continue;
        }
        if !out.is_empty() {
            out.push_str(if out.ends_with(':') { " " } else { "; " });
        }
        out.push_str(line);
    }
    out
}

/// `psp top`'s arguments.
#[derive(Args, Debug)]
struct TopArgs {
    /// The server's metrics: the HOST:PORT given to `psp serve --metrics`, or
    /// a full http://HOST:PORT/metrics URL.
    addr: String,
    /// Time between two scrapes (e.g. 1s, 500ms).
    #[arg(long, default_value = "1s", allow_hyphen_values = true)]
    interval: String,
}

/// `psp top`: checks the address and the first scrape before the screen is
/// taken over (a dead or wrong address is a one-line error); `q`, Esc or
/// Ctrl-C quits.
fn cmd_top(a: TopArgs) -> Result<()> {
    let interval = limits::TOP_INTERVAL.parse(&a.interval)?;
    psp_top::run(&a.addr, interval).map_err(anyhow::Error::from)
}

fn main() -> ExitCode {
    // Die quietly on a closed pipe (`psp workloads | head`), as command-line
    // tools do, instead of panicking in println!.
    // SAFETY: restoring the default disposition of SIGPIPE at start-up, before any
    // thread exists, passes no memory.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return parse_error(&e),
    };
    let result = match cli.command {
        Command::Sim(a) => cmd_sim(a),
        Command::Run(a) => run::run(a),
        Command::Calibrate => cmd_calibrate(),
        Command::Profile(a) => profile::run(a),
        Command::Serve(a) => net::serve(*a),
        Command::Load(a) => net::load(a),
        Command::Top(a) => cmd_top(a),
        Command::Echo(a) => net::echo(a),
        Command::Netbench(a) => net::netbench(a),
        Command::Sweep(a) => sweep::run(a),
        Command::Plot(a) => cmd_plot(a),
        Command::Bench(a) => cmd_bench(a),
        Command::Reproduce(a) => reproduce::run(a),
        Command::Workloads => cmd_workloads(),
        Command::Completions(a) => shell::completions::<Cli>(a),
        Command::Man => shell::man::<Cli>(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let msg = format!("{e:#}");
            eprintln!(
                "error: {}",
                msg.split_whitespace().collect::<Vec<_>>().join(" ")
            );
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// docs/guide/reference.md says it lists every command and option: each
    /// subcommand has a line `psp NAME`, and each long flag is named.
    #[test]
    fn the_reference_names_every_command_and_flag() {
        let reference = include_str!("../../../docs/guide/reference.md");
        let mut missing = Vec::new();
        for sub in super::Cli::command().get_subcommands() {
            let name = sub.get_name();
            if !reference.contains(&format!("psp {name}")) {
                missing.push(format!("psp {name}"));
            }
            for arg in sub.get_arguments() {
                if let Some(long) = arg.get_long()
                    && !matches!(long, "help" | "version")
                    && !reference.contains(&format!("--{long}"))
                {
                    missing.push(format!("psp {name} --{long}"));
                }
            }
        }
        assert!(
            missing.is_empty(),
            "docs/guide/reference.md lacks: {}",
            missing.join(", ")
        );
    }

    /// `psp serve`'s `--protocol` and `--app` helps name every registered
    /// protocol and application (made from the registries, not kept by
    /// hand).
    #[test]
    fn the_protocol_and_app_helps_name_every_registered_one() {
        let cmd = Cli::command();
        let serve = cmd.find_subcommand("serve").expect("psp serve");
        let help = |flag: &str| {
            serve
                .get_arguments()
                .find(|a| a.get_long() == Some(flag))
                .and_then(|a| a.get_help())
                .unwrap_or_else(|| panic!("--{flag} has a help"))
                .to_string()
        };
        let protocol = help("protocol");
        for e in psp_proto::PROTOCOLS {
            assert!(
                protocol.contains(&format!("{} ({}", e.name, e.about)),
                "{protocol}"
            );
        }
        let app = help("app");
        for e in psp_apps::APPS {
            assert!(app.contains(&format!("{} ({})", e.name, e.about)), "{app}");
        }
    }

    /// `--policy`'s help names every registered policy (it is made from the
    /// registry, not kept by hand).
    #[test]
    fn the_policy_help_names_every_registered_policy() {
        let cmd = Cli::command();
        let sim = cmd.find_subcommand("sim").expect("psp sim");
        let help = sim
            .get_arguments()
            .find(|a| a.get_long() == Some("policy"))
            .and_then(|a| a.get_help())
            .expect("--policy has a help")
            .to_string();
        for e in psp_core::policy::registry::POLICIES {
            assert!(
                help.contains(&format!(" {}", e.name)),
                "--policy's help lacks {}: {help}",
                e.name
            );
        }
    }
}
