//! `psp profile`: each request type of an application run alone on this
//! machine (one handler, nothing else running, every call timed), printed as
//! mean and p50/p99/p99.9 service times, and written as a workload file whose
//! service times are the measured ones, so that experiments (the simulator's,
//! and the policy's seed means in `psp run`/`psp serve`) use measured, not
//! declared, service times.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use psp_apps::profile::TypeProfile;
use psp_sim::Workload;
use serde::Serialize;

use crate::app::{AppArgs, type_names};

/// How the written workload describes each type's measured service times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ProfileDist {
    /// A lognormal with the measured mean and the samples' log-space spread
    /// (keeps the dispersion within a type).
    Lognormal,
    /// The measured mean, always (the papers' convention).
    Fixed,
}

/// `--order`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Order {
    /// Types drawn from the mix, one request at a time.
    Mix,
    /// All requests of one type, then the next type's.
    PerType,
}

/// `psp profile` arguments.
#[derive(Args)]
pub struct ProfileArgs {
    #[command(flatten)]
    app: AppArgs,
    /// Types to measure, with their ratios, from a workload (built-in name or
    /// file) whose type names are the application's operations [default: the
    /// application's standard mix].
    #[arg(long)]
    workload: Option<String>,
    /// Timed requests per type (after a tenth as many untimed).
    #[arg(long, allow_hyphen_values = true, default_value_t = 10_000)]
    requests: u64,
    /// Random seed of the generated requests.
    #[arg(long, allow_hyphen_values = true, default_value_t = 1)]
    seed: u64,
    /// Order of the requests: mix (drawn from the workload's mix, one at a
    /// time: an application's state evolves as in a real run) or per-type (all
    /// of one type, then the next).
    #[arg(long, value_enum, default_value = "mix")]
    order: Order,
    /// Service-time distribution written for each type.
    #[arg(long, value_enum, default_value = "lognormal")]
    dist: ProfileDist,
    /// Where to write the workload [default: APP-measured.toml].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the measurements as JSON (the file is written all the same).
    #[arg(long)]
    json: bool,
    /// Print nothing on stdout (a profile measured at first use: the
    /// command that asked for it owns stdout).
    #[arg(skip)]
    quiet: bool,
}

#[derive(Serialize)]
struct FileType {
    name: String,
    ratio: f64,
    service: toml::Value,
}

#[derive(Serialize)]
struct File {
    name: String,
    description: String,
    app: String,
    /// What the measurement depends on (keys loaded, warehouses).
    #[serde(skip_serializing_if = "toml::Table::is_empty")]
    app_options: toml::Table,
    types: Vec<FileType>,
}

/// Runs `psp profile`.
pub fn run(a: ProfileArgs) -> Result<()> {
    psp_apps::profile::check_requests(a.requests)?;
    let workload = profiled_workload(&a)?;
    // --app, else the workload's `app` (checked to agree when both are given).
    let app = a.app.config(&workload, u64::MAX)?;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}-measured.toml", app.name())));
    // Before the measurement, which may take minutes.
    crate::check_writable("--out", &out)?;
    let names = type_names(&workload);
    eprintln!(
        "psp profile: app {} | {} types | {} timed requests each ({:?} order), one handler, one request at a time",
        app.name(),
        names.len(),
        a.requests,
        a.order
    );
    let types: Vec<(String, f64)> = workload
        .types
        .iter()
        .map(|t| (t.name.clone(), t.ratio))
        .collect();
    let order = match a.order {
        Order::Mix => psp_apps::profile::ProfileOrder::Mix,
        Order::PerType => psp_apps::profile::ProfileOrder::PerType,
    };
    let measured = psp_apps::profile::profile(&app, &types, a.requests, order, a.seed)?;
    let mut file = workload_file(
        &workload,
        app.name(),
        &measured,
        a.dist,
        a.requests,
        a.order,
    );
    // What the measured times depend on travels with them.
    for (name, value) in app.options() {
        file.app_options
            .insert(name.into(), toml::Value::Integer(value as i64));
    }
    let text = toml::to_string(&file).context("cannot write the workload as TOML")?;
    // What is written must read back as a valid workload.
    Workload::parse(&text, &out.display().to_string())?;
    std::fs::write(&out, &text).with_context(|| format!("cannot write '{}'", out.display()))?;
    print_profile(&a, app.name(), &out, &measured)?;
    eprintln!("wrote {}", out.display());
    if let Some(t) = measured.iter().find(|t| t.count == 0) {
        bail!(
            "every {} request failed ({} errors): nothing to profile",
            t.name,
            t.errors
        );
    }
    Ok(())
}

/// The types to measure: `--workload`'s, else the standard mix of the
/// application `--app` (or the workload's `app`) names.
fn profiled_workload(a: &ProfileArgs) -> Result<Workload> {
    // An unknown --app is named as such, whatever else is missing.
    if let Some(name) = &a.app.app
        && psp_apps::find(name).is_none()
    {
        return Err(psp_apps::AppError::Unknown(name.clone()).into());
    }
    let given = a.workload.as_deref().map(Workload::resolve).transpose()?;
    // --app, else the workload file's `app` (as `psp profile` writes it).
    let Some(app_name) = a
        .app
        .app
        .clone()
        .or_else(|| given.as_ref().and_then(|w| w.app.clone()))
    else {
        // Those with a standard mix of their own first.
        let (mut names, rest) = apps_with_a_mix();
        names.extend(rest);
        bail!(
            "--app is required ({}), unless --workload names a workload whose `app` says which",
            psp_proto::or_list(&names)
        );
    };
    // The types: the given workload's, else the application's standard mix.
    Ok(match given {
        Some(w) => w,
        None => {
            let mix = psp_apps::default_mix(&app_name);
            if mix.is_empty() {
                bail!("app {app_name} has no operations of its own: give --workload");
            }
            let types: Vec<(&str, f64, f64)> = mix.iter().map(|&(n, r)| (n, 1.0, r)).collect();
            Workload::fixed(&format!("{app_name}-measured"), &types)
        }
    })
}

/// Prints the measurements: a table, JSON (`--json`), or only the means on
/// stderr (quiet).
fn print_profile(
    a: &ProfileArgs,
    app: &str,
    out: &std::path::Path,
    measured: &[TypeProfile],
) -> Result<()> {
    if a.quiet {
        let means: Vec<String> = measured
            .iter()
            .map(|t| format!("{} {:.2} us", t.name, t.mean_us))
            .collect();
        eprintln!("psp profile: measured means {}", means.join(", "));
    } else if a.json {
        let rows: Vec<_> = measured
            .iter()
            .map(|t| {
                serde_json::json!({
                    "name": t.name, "count": t.count, "errors": t.errors,
                    "mean_us": t.mean_us, "p50_us": t.p50_us, "p99_us": t.p99_us,
                    "p999_us": t.p999_us, "max_us": t.max_us, "log_sigma": t.log_sigma,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "app": app, "workload_file": out, "types": rows,
            }))?
        );
    } else {
        println!(
            "{:<12} {:>9} {:>7} {:>10} {:>10} {:>10} {:>11} {:>10}",
            "type", "count", "errors", "mean(us)", "p50(us)", "p99(us)", "p99.9(us)", "max(us)"
        );
        for t in measured {
            println!(
                "{:<12} {:>9} {:>7} {:>10.2} {:>10.2} {:>10.2} {:>11.2} {:>10.2}",
                t.name, t.count, t.errors, t.mean_us, t.p50_us, t.p99_us, t.p999_us, t.max_us
            );
        }
    }
    Ok(())
}

/// The registered applications with a standard mix of their own (what
/// `psp profile` measures without `--workload`), and the others.
fn apps_with_a_mix() -> (Vec<&'static str>, Vec<&'static str>) {
    let (with, without): (Vec<_>, Vec<_>) = psp_apps::APPS
        .iter()
        .partition(|e| !e.default_mix.is_empty());
    let names = |v: Vec<&psp_apps::AppEntry>| v.into_iter().map(|e| e.name).collect();
    (names(with), names(without))
}

/// The prefix of a workload measured on this machine at first use.
pub const MEASURED_PREFIX: &str = "measured:";

/// A workload by name or path, as `Workload::resolve` reads it, or
/// `measured:APP` (kv, tpcc): the application's standard mix with service
/// times measured on this machine (`psp profile`), at first use, then read
/// from the cache (`$PSP_PROFILE_CACHE`, else `$XDG_CACHE_HOME/psp`, else
/// `~/.cache/psp`), one file per application, machine (CPU model and
/// cores) and psp version. So a load named against it is a load of this
/// machine's capacity, not of another's. `PSP_PROFILE_REQUESTS` sets the
/// timed requests per type of a first measurement (default 10,000).
///
/// # Errors
/// An unknown workload or application, or a measurement that fails.
pub fn resolve_workload(spec: &str) -> Result<Workload> {
    let Some(app) = spec.strip_prefix(MEASURED_PREFIX) else {
        return Ok(Workload::resolve(spec)?);
    };
    let app = app.to_ascii_lowercase();
    if psp_apps::default_mix(&app).is_empty() {
        bail!(
            "workload '{spec}': measured:APP takes an application with operations of its own ({})",
            psp_proto::or_list(&apps_with_a_mix().0)
        );
    }
    let path = profile_cache()?.join(format!("{app}-{}.toml", machine_key()));
    if !path.exists() {
        let requests = match std::env::var("PSP_PROFILE_REQUESTS") {
            Ok(v) => v
                .trim()
                .parse()
                .map_err(|_| anyhow::anyhow!("PSP_PROFILE_REQUESTS must be a count, not '{v}'"))?,
            Err(_) => 10_000,
        };
        psp_apps::profile::check_requests(requests)?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create '{}'", dir.display()))?;
        }
        eprintln!(
            "workload {spec}: not measured on this machine yet: measuring it now into {}",
            path.display()
        );
        // Measured into a file of this process's own, then renamed into
        // place: another psp reading the cache meanwhile sees either no
        // profile or a whole one.
        let part = path.with_extension(format!("toml.{}.part", std::process::id()));
        run(ProfileArgs {
            app: AppArgs {
                app: Some(app.clone()),
                ..AppArgs::default()
            },
            workload: None,
            requests,
            seed: 1,
            order: Order::Mix,
            dist: ProfileDist::Lognormal,
            out: Some(part.clone()),
            json: false,
            quiet: true,
        })?;
        std::fs::rename(&part, &path)
            .with_context(|| format!("cannot move '{}' to '{}'", part.display(), path.display()))?;
    } else {
        eprintln!(
            "workload {spec}: measured on this machine: {}",
            path.display()
        );
    }
    Workload::resolve(&path.display().to_string()).map_err(Into::into)
}

/// Where profiles measured at first use are kept.
fn profile_cache() -> Result<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("PSP_PROFILE_CACHE")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("psp")))
        .or_else(|| var("HOME").map(|d| d.join(".cache/psp")))
        .context("measured:APP needs a cache directory: set PSP_PROFILE_CACHE or HOME")
}

/// This machine as a profile depends on it: CPU model, cores, psp version
/// (FNV-1a of them, in hex).
fn machine_key() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let text = format!("{model}|{cores}|{}", env!("CARGO_PKG_VERSION"));
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    format!("{hash:016x}")
}

fn workload_file(
    workload: &Workload,
    app: &str,
    measured: &[TypeProfile],
    dist: ProfileDist,
    requests: u64,
    order: Order,
) -> File {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "this machine".into());
    let summary: Vec<String> = measured
        .iter()
        .map(|t| {
            format!(
                "{} mean {:.2} p50 {:.2} p99 {:.2} p99.9 {:.2} us",
                t.name, t.mean_us, t.p50_us, t.p99_us, t.p999_us
            )
        })
        .collect();
    let min_us = psp_workload::workload::MIN_SERVICE_US;
    let types = workload
        .types
        .iter()
        .zip(measured)
        .map(|(w, m)| {
            let mean_us = m.mean_us.max(min_us);
            let mut service = toml::Table::new();
            match dist {
                ProfileDist::Fixed => {
                    service.insert("dist".into(), "fixed".into());
                    service.insert("us".into(), round(mean_us).into());
                }
                ProfileDist::Lognormal => {
                    service.insert("dist".into(), "lognormal".into());
                    service.insert("mean_us".into(), round(mean_us).into());
                    service.insert(
                        "sigma".into(),
                        round(m.log_sigma.min(psp_workload::workload::MAX_SIGMA)).into(),
                    );
                }
            }
            FileType {
                name: w.name.clone(),
                ratio: w.ratio,
                service: toml::Value::Table(service),
            }
        })
        .collect();
    File {
        name: format!("{app}-measured"),
        description: format!(
            "measured by psp profile on {host} ({requests} requests per type, one at a time, {order:?} order): {}",
            summary.join("; ")
        ),
        app: app.to_string(),
        app_options: toml::Table::new(),
        types,
    }
}

/// Four significant digits: enough for a service time, short in a file.
fn round(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let scale = 10f64.powi(3 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}
