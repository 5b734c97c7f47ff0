//! `psp reproduce`: regenerates every simulated figure of docs/results.md.
//!
//! A figure is data ([`Figure`]): its claim, the runs it is made of (sweeps
//! of the simulator, single points, a time series, closed-loop points; see
//! [`runs`]) and the code that turns their results into its section (the
//! setup, the table, the verdict, its own plots). One runner, here, measures
//! every figure's runs and applies `--quick` to them (a tenth of each arrival
//! period, a coarser load grid), saves each sweep as JSON and draws it, then
//! writes the figure's markdown section beside them. The command that re-runs
//! each sweep alone is written beside its table. `--results FILE` replaces the
//! region between the reproduce markers of FILE with the sections. Figures
//! run one after the other; the points of a run in parallel on every core.
//!
//! This module only orchestrates: points come from the simulator, sweeps from
//! [`crate::sweep`], plots from psp-metrics; it parses no command line of its
//! own runs.

mod beyond;
mod paper;
mod render;
mod runs;
mod synergy;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use psp_metrics::PointResult;
use psp_sim::{SimConfig, Workload, simulate_point};
use rayon::prelude::*;

use crate::{PointArgs, limits, sweep};
use render::{Page, Section};
use runs::{ClosedLoop, Loads, Period, Point, Run, Series, Slo, Sweep};

/// The markers `--results` replaces between. A begin marker is found by
/// [`BEGIN_PREFIX`] whatever its comment says (files written when the
/// figures lived elsewhere name that place), and written anew as [`BEGIN`].
pub const BEGIN: &str = "<!-- psp reproduce: begin (generated; edit crates/cli/src/reproduce/) -->";
/// What every begin marker starts with, up to its closing `-->`.
const BEGIN_PREFIX: &str = "<!-- psp reproduce: begin";
/// See [`BEGIN`].
pub const END: &str = "<!-- psp reproduce: end -->";

/// `psp reproduce` arguments.
#[derive(Args)]
pub struct ReproduceArgs {
    /// Figures to regenerate (default: all of them; see --list).
    figures: Vec<String>,
    /// List the figures and exit.
    #[arg(long)]
    list: bool,
    /// Directory for the JSON, SVG, PNG and markdown of each figure.
    #[arg(long, default_value = "docs/figures/reproduce")]
    out: PathBuf,
    /// Also replace the generated region of this markdown file (between the
    /// reproduce markers) with the figures' sections, e.g. docs/results.md.
    #[arg(long)]
    results: Option<PathBuf>,
    /// A quick look: a tenth of each arrival period and a coarser load grid
    /// (for checking the pipeline, not for results).
    #[arg(long)]
    quick: bool,
    /// Worker threads for the points (default: all cores).
    #[arg(long, allow_hyphen_values = true)]
    threads: Option<usize>,
}

/// One figure: what it claims, what it runs and how its section reads.
pub struct Figure {
    /// Its name on the command line and its files' stem.
    pub id: &'static str,
    /// Its section's title.
    pub title: &'static str,
    /// The claim it reproduces.
    pub claim: &'static str,
    /// Files the figure reads (relative to the repository root), checked
    /// before any figure runs so a long run does not fail half-way.
    pub inputs: &'static [&'static str],
    /// Its runs, in order.
    pub runs: fn() -> Result<Vec<Run>>,
    /// Its section from the runs' outcomes (in the order of `runs`).
    pub section: fn(&Page, Outcomes) -> Result<Section>,
}

/// Every figure, in the order of the results.
const FIGURES: &[Figure] = &[
    paper::FIG1,
    paper::FIG1_ALTERNATIVES,
    paper::FIG3,
    paper::FIG4,
    paper::FIG6,
    paper::FIG7,
    paper::FIG9,
    paper::FIG10,
    paper::APPS_14W,
    synergy::SCALING,
    synergy::SYNERGY,
    synergy::ABLATION,
    synergy::KNOBS,
    synergy::MECHANISMS,
    synergy::IMBALANCE,
    synergy::DISPATCHER_OVERHEAD,
    beyond::BEYOND,
    beyond::TAILS,
    beyond::SCALING,
    beyond::CLOSED_LOOP,
];

/// Runs `psp reproduce`.
pub fn run(a: ReproduceArgs) -> Result<()> {
    if a.list {
        for f in FIGURES {
            println!("{:<18} {}", f.id, f.title);
        }
        return Ok(());
    }
    a.threads
        .map(|t| limits::SWEEP_THREADS.check(t))
        .transpose()?;
    let chosen = choose(&a.figures)?;
    for f in &chosen {
        for input in f.inputs {
            if !Path::new(input).is_file() {
                bail!(
                    "figure {} reads '{input}', which is not here (run psp reproduce from the repository root)",
                    f.id
                );
            }
        }
    }
    if let Some(r) = &a.results {
        // Refuse before any work: the file must have the markers.
        marked_region(
            &std::fs::read_to_string(r)
                .with_context(|| format!("cannot read '{}'", r.display()))?,
        )
        .with_context(|| format!("'{}'", r.display()))?;
    }
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("cannot create '{}'", a.out.display()))?;
    let runner = Runner {
        page: Page {
            out: a.out.clone(),
            quick: a.quick,
        },
        threads: a.threads,
    };
    let started_all = std::time::Instant::now();
    for (i, f) in chosen.iter().enumerate() {
        eprintln!("[{}/{}] {}: {}", i + 1, chosen.len(), f.id, f.title);
        let started = std::time::Instant::now();
        let (md_path, files) = runner
            .figure(f)
            .with_context(|| format!("figure {}", f.id))?;
        eprintln!(
            "      {:.0} s; wrote {} and {files} more",
            started.elapsed().as_secs_f64(),
            md_path.display(),
        );
    }
    if let Some(r) = &a.results {
        paste_sections(r, &a.out)?;
        eprintln!("updated {}", r.display());
    }
    eprintln!(
        "psp reproduce: {} figure(s) in {:.0} s",
        chosen.len(),
        started_all.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The figures named (all of them when none is).
fn choose(ids: &[String]) -> Result<Vec<&'static Figure>> {
    if ids.is_empty() {
        return Ok(FIGURES.iter().collect());
    }
    ids.iter()
        .map(|id| {
            FIGURES.iter().find(|f| f.id == id).ok_or_else(|| {
                let ids: Vec<&str> = FIGURES.iter().map(|f| f.id).collect();
                anyhow::anyhow!("unknown figure '{id}' (known: {})", ids.join(", "))
            })
        })
        .collect()
}

/// Replaces the marked region of `results` with the section of every figure
/// found in `out`.
fn paste_sections(results: &Path, out: &Path) -> Result<()> {
    let text = std::fs::read_to_string(results)?;
    let (head, tail) = marked_region(&text)?;
    let prefix = render::link_prefix(results, out)?;
    let mut pasted = String::with_capacity(text.len());
    pasted.push_str(head);
    pasted.push_str(BEGIN);
    pasted.push_str("\n\n");
    // Sections of figures not run this time are kept from their own
    // markdown files, whose links do not depend on the options of the run
    // that wrote them.
    for f in FIGURES {
        let path = out.join(format!("{}.md", f.id));
        if let Ok(md) = std::fs::read_to_string(&path) {
            pasted.push_str(&render::rebase_links(&md, &prefix));
            pasted.push('\n');
        }
    }
    pasted.push_str(END);
    pasted.push_str(tail);
    std::fs::write(results, pasted).with_context(|| format!("cannot write '{}'", results.display()))
}

/// The text before the begin marker and after the end marker.
fn marked_region(text: &str) -> Result<(&str, &str)> {
    let (Some(b), Some(e)) = (text.find(BEGIN_PREFIX), text.find(END)) else {
        bail!("has no reproduce markers ({BEGIN} ... {END})");
    };
    if e < b {
        bail!("its reproduce markers are out of order");
    }
    Ok((&text[..b], &text[e + END.len()..]))
}

// ---------------------------------------------------------------- runner

/// A sweep measured: its result and the command that re-runs it alone.
pub struct Swept {
    /// The sweep.
    pub result: psp_metrics::SweepResult,
    /// `psp sweep ... --out NAME.json`.
    pub command: String,
}

/// A time series measured.
pub struct Traced {
    /// The series.
    pub series: psp_metrics::series::TimeSeries,
    /// The workload it ran (for its phases).
    pub workload: Workload,
    /// `psp sim ... --series STEM`.
    pub command: String,
}

/// What one run gave.
pub enum Outcome {
    /// A sweep's.
    Sweep(Swept),
    /// Points' (of [`Run::Points`] or [`Run::ClosedLoop`]), in the run's order.
    Points(Vec<PointResult>),
    /// A time series'.
    Series(Traced),
}

/// A figure's outcomes, taken in the order of its runs.
pub struct Outcomes(std::vec::IntoIter<Outcome>);

impl Outcomes {
    /// The next run's, a sweep.
    pub fn sweep(&mut self) -> Result<Swept> {
        match self.0.next() {
            Some(Outcome::Sweep(s)) => Ok(s),
            _ => bail!("the figure's runs and its section disagree: a sweep expected"),
        }
    }

    /// The next run's, points.
    pub fn points(&mut self) -> Result<Vec<PointResult>> {
        match self.0.next() {
            Some(Outcome::Points(p)) => Ok(p),
            _ => bail!("the figure's runs and its section disagree: points expected"),
        }
    }

    /// The next run's, a time series.
    pub fn series(&mut self) -> Result<Traced> {
        match self.0.next() {
            Some(Outcome::Series(s)) => Ok(s),
            _ => bail!("the figure's runs and its section disagree: a series expected"),
        }
    }
}

/// Measures figures' runs and writes their sections.
struct Runner {
    page: Page,
    threads: Option<usize>,
}

impl Runner {
    /// Runs figure `f` and writes its section as `ID.md`; returns that path
    /// and how many other files the figure wrote.
    fn figure(&self, f: &Figure) -> Result<(PathBuf, usize)> {
        let mut files = Vec::new();
        let outcomes = (f.runs)()?
            .into_iter()
            .map(|r| self.measure(r, &mut files))
            .collect::<Result<Vec<_>>>()?;
        let s = (f.section)(&self.page, Outcomes(outcomes.into_iter()))?;
        files.extend(s.files);
        // A section's links are relative to its own file in `out`, so the file
        // reads alone; they are rebased when pasted into `--results`.
        let md = format!(
            "### {}\n\n<a id=\"{}\"></a>**The paper's claim.** {}\n\n{}",
            f.title, f.id, f.claim, s.body
        );
        let md_path = self.page.out.join(format!("{}.md", f.id));
        std::fs::write(&md_path, &md)
            .with_context(|| format!("cannot write '{}'", md_path.display()))?;
        Ok((md_path, files.len()))
    }

    /// Measures one run, adding the files it wrote to `files`.
    fn measure(&self, run: Run, files: &mut Vec<PathBuf>) -> Result<Outcome> {
        Ok(match run {
            Run::Sweep(s) => Outcome::Sweep(self.sweep(&s, files)?),
            Run::Points(p) => Outcome::Points(self.points(&p)?),
            Run::Series(s) => Outcome::Series(self.series(&s, files)?),
            Run::ClosedLoop(c) => Outcome::Points(self.closed_loop(&c)?),
        })
    }

    /// [`crate::default_point_args`] with `workload`, `workers` and `period`
    /// (as this run takes it).
    fn point_args(&self, workload: &str, workers: usize, period: Period) -> PointArgs {
        PointArgs {
            workload: workload.into(),
            workers: Some(workers),
            duration: format!("{}ms", self.page.period(period).as_ms()),
            ..crate::default_point_args()
        }
    }

    fn pool(&self) -> Result<rayon::ThreadPool> {
        let mut b = rayon::ThreadPoolBuilder::new();
        if let Some(t) = self.threads {
            b = b.num_threads(t);
        }
        b.build().context("thread pool")
    }

    /// Runs a sweep, saves it as `NAME.json` and draws it when titled. A
    /// quick look takes a tenth of the period, a 20% grid to the same top
    /// load and one bisection step.
    fn sweep(&self, s: &Sweep, files: &mut Vec<PathBuf>) -> Result<Swept> {
        let json = self.page.out.join(format!("{}.json", s.name));
        let loads = s.loads.unwrap_or(Loads::DEFAULT);
        let (loads, refine) = if self.page.quick {
            (loads.quick(), 1)
        } else {
            (loads, s.refine)
        };
        let period = s.period.unwrap_or(Period::s(1));
        let mut point = self.point_args(s.workload, s.workers, period);
        point.warmup = s.warmup.unwrap_or(point.warmup);
        point.system = s.system.clone().unwrap_or(point.system);
        point.classifier = s.classifier.map_or(point.classifier, str::to_string);
        point.flows = s.flows;
        let (slo_slowdown, slo_overall) = match s.slo {
            Slo::Default => (None, None),
            Slo::PerType(b) => (Some(b), None),
            Slo::Overall(b) => (None, Some(b)),
        };
        let result = sweep::simulate(&sweep::SimSweep {
            point,
            policies: s
                .policies
                .iter()
                .map(|p| Ok(Workload::resolve(s.workload)?.policy(p)?))
                .collect::<Result<_>>()?,
            loads: crate::limits::load_range(loads.start, loads.end, loads.step)?,
            slo_slowdown,
            slo_overall,
            max_loss: 0.001,
            refine,
            threads: self.threads,
            out: json.clone(),
        })?;
        files.push(json.clone());
        if let Some(title) = &s.title {
            let stem = self.page.out.join(&s.name);
            files.extend(psp_plot::plot_sweep(&result, &stem, title)?);
        }
        Ok(Swept {
            result,
            command: s.command(&json),
        })
    }

    /// Simulates points in parallel.
    fn points(&self, points: &[Point]) -> Result<Vec<PointResult>> {
        self.pool()?.install(|| {
            points
                .par_iter()
                .map(|p| {
                    let w = Workload::resolve(p.workload)?;
                    let spec = w.policy(&p.policy)?;
                    let mut a = self.point_args(p.workload, p.workers, p.period);
                    a.system = p.system.clone();
                    a.flows = p.flows;
                    let cfg = a.config(&w, p.load * w.peak_rps(p.workers))?;
                    Ok(simulate_point(&w, &spec, &cfg)?)
                })
                .collect()
        })
    }

    /// Simulates a point with its time series and writes it.
    fn series(&self, s: &Series, files: &mut Vec<PathBuf>) -> Result<Traced> {
        let w = Workload::resolve(s.workload)?;
        let mut a = crate::default_point_args();
        a.workload = w.name.clone();
        a.workers = Some(s.workers);
        a.warmup = 0.0;
        let spec = w.policy(s.policy)?;
        let mut cfg = a.config(&w, s.load * w.peak_rps(s.workers))?;
        let window = if self.page.quick {
            s.quick_window
        } else {
            s.window
        };
        cfg.series_window_ns = Some(window.as_ms() * 1_000_000);
        let (_, series) = psp_sim::simulate_with_series(&w, &spec, &cfg)?;
        let series = series.context("no series")?;
        let stem = self.page.out.join(&s.name);
        files.extend(crate::write_series(&series, &w, &stem, s.policy)?);
        Ok(Traced {
            series,
            workload: w,
            command: s.command(&stem),
        })
    }

    /// Simulates closed-loop points in parallel, every one checked first.
    fn closed_loop(&self, c: &ClosedLoop) -> Result<Vec<PointResult>> {
        let w = Workload::resolve(c.workload)?;
        let mut args = self.point_args(c.workload, c.workers, c.period);
        args.warmup = c.warmup;
        let cfg: SimConfig = args.checked_config(&w, None)?;
        let mut jobs = Vec::new();
        for p in c.policies {
            let spec = w.policy(p)?;
            for counts in &c.connections {
                for &n in counts {
                    limits::CLIENTS.check(n as usize)?;
                }
                limits::CLIENTS_TOTAL.check(counts.iter().map(|&n| n as usize).sum())?;
                let clients = psp_workload::Clients::new(counts.clone(), 0, &w)
                    .map_err(|e| anyhow::anyhow!("--clients: {e}"))?;
                limits::closed_loop_work(
                    &spec,
                    &w,
                    &clients,
                    c.workers,
                    cfg.queue_capacity,
                    cfg.duration_ns,
                )?;
                jobs.push((spec.clone(), clients));
            }
        }
        self.pool()?.install(|| {
            jobs.par_iter()
                .map(|(spec, clients)| Ok(psp_sim::simulate_clients(&w, spec, &cfg, clients)?.0))
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every sweep's policies are what `psp sweep --policies` makes of its
    /// command, so the command re-runs the same sweep.
    #[test]
    fn every_sweep_command_names_its_policies() {
        for f in FIGURES {
            for run in (f.runs)().unwrap() {
                if let Run::Sweep(s) = run {
                    let joined = s.policies.join(",");
                    assert_eq!(
                        psp_core::policy::split_policy_list(&joined),
                        s.policies,
                        "{}: {}",
                        f.id,
                        s.name
                    );
                    for p in &s.policies {
                        p.parse::<psp_core::PolicySpec>().unwrap();
                    }
                }
            }
        }
    }

    #[test]
    fn figures_have_unique_ids() {
        let mut ids: Vec<&str> = FIGURES.iter().map(|f| f.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), FIGURES.len());
    }
}
