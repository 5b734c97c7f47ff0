//! Workloads as data: request types with occurrence ratios and service-time
//! distributions, read from TOML. Built-in workloads are the files of `workloads/`
//! embedded at build time; any other file is read by path, without recompiling.
//!
//! ```toml
//! name = "extreme-bimodal"
//! [[types]]
//! name = "short"
//! ratio = 0.995
//! service = { dist = "fixed", us = 0.5 }
//! ```
//!
//! Distributions: `fixed {us}`, `exponential {mean_us}`, `lognormal {mean_us,
//! sigma}`, `bimodal {short_us, long_us, p_long}`, `uniform {min_us, max_us}`.
//!
//! A workload may also change over time: a list of [`Phase`]s (`[[phases]]`),
//! run one after the other, each for its `duration_s`, at its own rate (`rps`),
//! or load (`load`: a fraction of the phase's own peak on the point's workers),
//! or the point's offered rate when it names neither; each may override the
//! base types' ratios (0 allowed) and service times by type name
//! (`[[phases.types]]`). The type table (names, ids) is the same in every phase.
//! Overrides apply to the base `[[types]]`, not to the previous phase. The
//! arrival period of a phased workload is the sum of its phases' durations
//! (the point's `--duration` is then not used).
//!
//! ```toml
//! [[phases]]
//! name = "swap"
//! duration_s = 5
//! load = 0.8
//! [[phases.types]]
//! name = "short"
//! service = { dist = "fixed", us = 100.0 }
//! [[phases.types]]
//! name = "long"
//! ratio = 0.0
//! ```
//!
//! Every field has a range, checked when the file is read ([`Workload::parse`]),
//! so that nothing downstream allocates or loops in proportion to an absurd
//! value: service-time parameters in [[`MIN_SERVICE_US`], [`MAX_SERVICE_US`]] µs,
//! `sigma` in [0, [`MAX_SIGMA`]], `p_long` in [0, 1], ratios in (0, 1] summing to
//! 1, at most [`MAX_TYPES`] types, names of 1 to [`MAX_NAME_CHARS`] printable
//! characters, files of at most [`MAX_FILE_BYTES`]; at most [`MAX_PHASES`]
//! phases, each of [`MIN_PHASE_S`] to [`MAX_PHASE_S`] seconds and together at
//! most [`MAX_PHASE_S`], a phase `rps` in (0, [`MAX_PHASE_RPS`]], a phase `load`
//! in (0, [`MAX_PHASE_LOAD`]], override ratios in [0, 1]; a `time_scale` in
//! [1, [`MAX_TIME_SCALE`]].

use std::path::Path;

use psp_core::{Nanos, PolicyError, PolicySpec, TypeInfo};
use rand::RngExt;
use rand::rngs::SmallRng;
use rand_distr::{Distribution, Exp1, StandardNormal};
use serde::Deserialize;

/// Most request types a workload may have. Every type costs a latency and a
/// slowdown histogram per point (about 0.5 MB) and a queue per policy; the
/// paper's workloads have at most 5.
pub const MAX_TYPES: usize = 64;
/// Largest `time_scale`: a 5 µs quantum scaled stays under a second.
pub const MAX_TIME_SCALE: f64 = 10_000.0;
/// Shortest service-time parameter, in µs (1 ns, the clock's resolution).
pub const MIN_SERVICE_US: f64 = 0.001;
/// Longest service-time parameter, in µs (1 s; the scheduler is for µs-scale
/// requests).
pub const MAX_SERVICE_US: f64 = 1e6;
/// Largest lognormal `sigma` (heavy enough for any measured service-time
/// distribution; a draw of a 1 s mean then reaches the sampler's 13-day clamp
/// only with a normal deviate above 6, probability 1e-9).
pub const MAX_SIGMA: f64 = 3.0;
/// Longest workload or type name, in characters.
pub const MAX_NAME_CHARS: usize = 64;
/// Largest workload file, in bytes.
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// Most phases a workload may have (each keeps an arrival stream of its own).
pub const MAX_PHASES: usize = 64;
/// Shortest phase, in seconds (1 µs, the shortest `--duration`).
pub const MIN_PHASE_S: f64 = 1e-6;
/// Longest phase, and longest sum of a workload's phases, in seconds (1 hour,
/// the longest `--duration`).
pub const MAX_PHASE_S: f64 = 3600.0;
/// Highest phase `rps` (one request per ns, as `--rps`).
pub const MAX_PHASE_RPS: f64 = 1e9;
/// Highest phase `load` (as `--load`).
pub const MAX_PHASE_LOAD: f64 = 10.0;
/// Longest service time a sampler draws, in ns (2^50 ns, 13 days): a guard
/// against overflowing time sums, far beyond any likely draw of a valid
/// distribution.
const MAX_DRAW_NS: f64 = (1u64 << 50) as f64;

/// The workloads shipped with the project (name, TOML text).
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "high-bimodal",
        include_str!("../../../workloads/high-bimodal.toml"),
    ),
    (
        "high-bimodal-x100",
        include_str!("../../../workloads/high-bimodal-x100.toml"),
    ),
    (
        "extreme-bimodal",
        include_str!("../../../workloads/extreme-bimodal.toml"),
    ),
    (
        "extreme-bimodal-x100",
        include_str!("../../../workloads/extreme-bimodal-x100.toml"),
    ),
    (
        "extreme-bimodal-x1000",
        include_str!("../../../workloads/extreme-bimodal-x1000.toml"),
    ),
    (
        "balanced-bimodal-x1000",
        include_str!("../../../workloads/balanced-bimodal-x1000.toml"),
    ),
    ("tpcc", include_str!("../../../workloads/tpcc.toml")),
    ("rocksdb", include_str!("../../../workloads/rocksdb.toml")),
    ("zippydb", include_str!("../../../workloads/zippydb.toml")),
    ("leveldb", include_str!("../../../workloads/leveldb.toml")),
    (
        "exponential",
        include_str!("../../../workloads/exponential.toml"),
    ),
    ("fixed", include_str!("../../../workloads/fixed.toml")),
    (
        "workload-change",
        include_str!("../../../workloads/workload-change.toml"),
    ),
    (
        "workload-change-x100",
        include_str!("../../../workloads/workload-change-x100.toml"),
    ),
];

/// Why a workload could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// Neither a file nor a built-in name.
    #[error("unknown workload '{0}' (built-in: {names}; or a path to a .toml file)", names = builtin_names())]
    Unknown(String),
    /// The file could not be read.
    #[error("cannot read workload file '{path}': {err}")]
    Io {
        /// The path.
        path: String,
        /// The I/O error.
        err: std::io::Error,
    },
    /// The TOML is malformed.
    #[error("malformed workload '{source_name}': {msg}")]
    Parse {
        /// File or built-in name.
        source_name: String,
        /// The parser's message, on one line.
        msg: String,
    },
    /// The TOML parses but describes no valid workload.
    #[error("invalid workload '{source_name}': {msg}")]
    Invalid {
        /// File or built-in name.
        source_name: String,
        /// What is wrong.
        msg: String,
    },
}

fn builtin_names() -> String {
    BUILTIN
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A service-time distribution, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(tag = "dist", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ServiceDist {
    /// Always `us`.
    Fixed {
        /// Service time.
        us: f64,
    },
    /// Exponential with mean `mean_us`.
    Exponential {
        /// Mean.
        mean_us: f64,
    },
    /// Lognormal with mean `mean_us` and shape `sigma` (of the underlying normal).
    Lognormal {
        /// Mean.
        mean_us: f64,
        /// Standard deviation of the underlying normal.
        sigma: f64,
    },
    /// `long_us` with probability `p_long`, else `short_us`.
    Bimodal {
        /// Short mode.
        short_us: f64,
        /// Long mode.
        long_us: f64,
        /// Probability of the long mode.
        p_long: f64,
    },
    /// Uniform on `[min_us, max_us]`.
    Uniform {
        /// Lower bound.
        min_us: f64,
        /// Upper bound.
        max_us: f64,
    },
}

impl ServiceDist {
    /// The mean, in microseconds.
    pub fn mean_us(&self) -> f64 {
        match *self {
            ServiceDist::Fixed { us } => us,
            ServiceDist::Exponential { mean_us } | ServiceDist::Lognormal { mean_us, .. } => {
                mean_us
            }
            ServiceDist::Bimodal {
                short_us,
                long_us,
                p_long,
            } => short_us * (1.0 - p_long) + long_us * p_long,
            ServiceDist::Uniform { min_us, max_us } => (min_us + max_us) / 2.0,
        }
    }

    fn validate(&self) -> Result<(), String> {
        let us = |name: &str, v: f64| {
            in_range(
                &format!("service.{name}"),
                v,
                MIN_SERVICE_US,
                MAX_SERVICE_US,
                " µs",
            )
        };
        match *self {
            ServiceDist::Fixed { us: v } => us("us", v),
            ServiceDist::Exponential { mean_us } => us("mean_us", mean_us),
            ServiceDist::Lognormal { mean_us, sigma } => {
                us("mean_us", mean_us)?;
                in_range("service.sigma", sigma, 0.0, MAX_SIGMA, "")
            }
            ServiceDist::Bimodal {
                short_us,
                long_us,
                p_long,
            } => {
                us("short_us", short_us)?;
                us("long_us", long_us)?;
                in_range("service.p_long", p_long, 0.0, 1.0, "")
            }
            ServiceDist::Uniform { min_us, max_us } => {
                us("min_us", min_us)?;
                us("max_us", max_us)?;
                if min_us <= max_us {
                    Ok(())
                } else {
                    Err(format!(
                        "service.min_us ({}) must not exceed service.max_us ({})",
                        short_float(min_us),
                        short_float(max_us)
                    ))
                }
            }
        }
    }

    /// A sampler producing nanoseconds.
    pub fn sampler(&self) -> ServiceSampler {
        ServiceSampler(match *self {
            ServiceDist::Fixed { us } => Sampler::Fixed(us_to_ns(us)),
            ServiceDist::Exponential { mean_us } => Sampler::Exp(mean_us * 1e3),
            ServiceDist::Lognormal { mean_us, sigma } => {
                // E[X] = exp(mu + sigma^2 / 2).
                Sampler::LogNormal {
                    mu: (mean_us * 1e3).ln() - sigma * sigma / 2.0,
                    sigma,
                }
            }
            ServiceDist::Bimodal {
                short_us,
                long_us,
                p_long,
            } => Sampler::Bimodal {
                short: us_to_ns(short_us),
                long: us_to_ns(long_us),
                p_long,
            },
            ServiceDist::Uniform { min_us, max_us } => Sampler::Uniform(min_us * 1e3, max_us * 1e3),
        })
    }
}

/// `v` in `[lo, hi]` (NaN is not), or an error naming `field` and the range.
fn in_range(field: &str, v: f64, lo: f64, hi: f64, unit: &str) -> Result<(), String> {
    if (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(format!(
            "{field} must be in [{lo}, {hi}]{unit}, not {}",
            short_float(v)
        ))
    }
}

/// `v` as written by hand: plain between 1e-3 and 1e7, else in exponent form
/// (`1e-300`, not 300 digits).
fn short_float(v: f64) -> String {
    if v == 0.0 || !v.is_finite() || (1e-3..1e7).contains(&v.abs()) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// A name of 1 to [`MAX_NAME_CHARS`] characters, none of them a control
/// character (names appear in one-line errors, tables and CSV).
fn check_name(field: &str, name: &str) -> Result<(), String> {
    let n = name.chars().count();
    if name.trim().is_empty() || n > MAX_NAME_CHARS {
        return Err(format!(
            "{field} must have 1 to {MAX_NAME_CHARS} characters, not {n}"
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(format!("{field} must not contain control characters"));
    }
    Ok(())
}

/// The text of a small regular file (`limit` bytes at most); a directory,
/// device, empty or oversized file is an error saying which.
///
/// # Errors
/// The path does not exist or cannot be read, is not a regular file, is empty
/// or is larger than `limit`.
pub fn read_text_file(path: &Path, limit: u64) -> std::io::Result<String> {
    use std::io::{Error, ErrorKind, Read};
    let meta = std::fs::metadata(path)?;
    if meta.is_dir() {
        return Err(Error::new(ErrorKind::IsADirectory, "is a directory"));
    }
    if !meta.is_file() {
        return Err(Error::new(ErrorKind::InvalidInput, "is not a regular file"));
    }
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(limit + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > limit {
        return Err(Error::new(
            ErrorKind::FileTooLarge,
            format!("is larger than {limit} bytes"),
        ));
    }
    if text.trim().is_empty() {
        return Err(Error::new(ErrorKind::InvalidData, "is empty"));
    }
    Ok(text)
}

fn us_to_ns(us: f64) -> u64 {
    ((us * 1e3).round() as u64).max(1)
}

#[derive(Debug, Clone, Copy)]
enum Sampler {
    Fixed(u64),
    Exp(f64),
    LogNormal { mu: f64, sigma: f64 },
    Bimodal { short: u64, long: u64, p_long: f64 },
    Uniform(f64, f64),
}

/// Draws service times in nanoseconds (at least 1).
#[derive(Debug, Clone, Copy)]
pub struct ServiceSampler(Sampler);

impl ServiceSampler {
    /// One service time.
    #[inline]
    pub fn sample(&self, rng: &mut SmallRng) -> u64 {
        let ns = match self.0 {
            Sampler::Fixed(ns) => return ns,
            Sampler::Exp(mean) => {
                let e: f64 = Exp1.sample(rng);
                e * mean
            }
            Sampler::LogNormal { mu, sigma } => {
                let z: f64 = StandardNormal.sample(rng);
                (mu + sigma * z).exp()
            }
            Sampler::Bimodal {
                short,
                long,
                p_long,
            } => {
                return if rng.random::<f64>() < p_long {
                    long
                } else {
                    short
                };
            }
            Sampler::Uniform(lo, hi) => lo + (hi - lo) * rng.random::<f64>(),
        };
        (ns.min(MAX_DRAW_NS).round() as u64).max(1)
    }
}

/// One request type of a workload.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadType {
    /// Name (unique in the workload).
    pub name: String,
    /// Occurrence ratio (the ratios of a workload sum to 1).
    pub ratio: f64,
    /// Service-time distribution.
    pub service: ServiceDist,
}

/// A workload: a mix of request types.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Name.
    pub name: String,
    /// Where it comes from, for humans.
    #[serde(default)]
    pub description: String,
    /// The application whose operations the types name (e.g. `kv`, `tpcc`),
    /// when the workload is for one (a measured profile); `None`: any
    /// application, the synthetic one by default.
    #[serde(default)]
    pub app: Option<String>,
    /// That application's options (e.g. `kv_keys = 1000`), as its command-line
    /// flags spell them with underscores; the command line reads them (its
    /// flags win) and checks them.
    #[serde(default)]
    pub app_options: Option<toml::Table>,
    /// The types, in type-id order.
    pub types: Vec<WorkloadType>,
    /// Phases run one after the other (empty: one stationary phase, the base
    /// mix at the point's rate for the point's duration).
    #[serde(default)]
    pub phases: Vec<Phase>,
    /// How many times slower this workload runs than the one it stands for
    /// (`extreme-bimodal-x1000`: 1000), in [1, [`MAX_TIME_SCALE`]]; `None`: 1.
    /// The policies' time constants (quanta, SYNERGY's `long`) default to
    /// their values times this ([`Workload::policy`]), so that a slowed-down
    /// experiment keeps the proportions of the one it stands for.
    #[serde(default)]
    pub time_scale: Option<f64>,
}

/// One phase of a workload that changes over time: how long it lasts, its
/// rate, and how its mix and service times differ from the base types.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phase {
    /// Name, for plots and reports (default: `phase N`, counted from 0).
    #[serde(default)]
    pub name: String,
    /// How long the phase's arrivals last, in seconds.
    pub duration_s: f64,
    /// Offered rate during the phase, in requests per second.
    #[serde(default)]
    pub rps: Option<f64>,
    /// Offered rate as a fraction of the phase's own peak (its mix's mean
    /// service time) on the point's workers. Neither `rps` nor `load`: the
    /// point's offered rate.
    #[serde(default)]
    pub load: Option<f64>,
    /// Overrides of the base types, by name.
    #[serde(default)]
    pub types: Vec<TypeOverride>,
}

/// A phase's change to one base type: its ratio (0 allowed: the type sends
/// nothing in the phase), its service-time distribution, or both.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TypeOverride {
    /// The base type's name.
    pub name: String,
    /// Occurrence ratio in the phase.
    #[serde(default)]
    pub ratio: Option<f64>,
    /// Service-time distribution in the phase.
    #[serde(default)]
    pub service: Option<ServiceDist>,
}

impl Workload {
    /// How many times slower this workload runs than the one it stands for
    /// (1 unless the file says `time_scale`).
    pub fn time_scale(&self) -> f64 {
        self.time_scale.unwrap_or(1.0)
    }

    /// The policy `s` names, its time constants scaled to this workload
    /// ([`PolicySpec::parse_for_time_scale`]).
    ///
    /// # Errors
    /// As [`PolicySpec::parse_for_time_scale`].
    pub fn policy(&self, s: &str) -> Result<PolicySpec, PolicyError> {
        PolicySpec::parse_for_time_scale(s, self.time_scale())
    }

    /// A built-in workload by name, or a TOML file by path.
    ///
    /// # Errors
    /// Unknown name, unreadable file, malformed or invalid TOML.
    pub fn resolve(name_or_path: &str) -> Result<Self, WorkloadError> {
        let path = Path::new(name_or_path);
        let io = |err| WorkloadError::Io {
            path: name_or_path.to_string(),
            err,
        };
        if path.is_file() {
            let text = read_text_file(path, MAX_FILE_BYTES).map_err(io)?;
            return Self::parse(&text, name_or_path);
        }
        if let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
            return Self::parse(text, name_or_path);
        }
        if path.exists() {
            // A directory, a device, a pipe: say what it is.
            return Err(io(read_text_file(path, MAX_FILE_BYTES)
                .err()
                .unwrap_or_else(|| std::io::Error::other("is not a regular file"))));
        }
        if name_or_path.ends_with(".toml") || name_or_path.contains('/') {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no such file",
            )));
        }
        Err(WorkloadError::Unknown(name_or_path.to_string()))
    }

    /// Parses and validates TOML; `source_name` names it in errors.
    ///
    /// # Errors
    /// Malformed TOML, or a workload that fails validation.
    pub fn parse(text: &str, source_name: &str) -> Result<Self, WorkloadError> {
        let mut w: Workload = toml::from_str(text).map_err(|e| WorkloadError::Parse {
            source_name: source_name.to_string(),
            msg: e
                .to_string()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        })?;
        w.validate().map_err(|msg| WorkloadError::Invalid {
            source_name: source_name.to_string(),
            msg,
        })?;
        Ok(w)
    }

    fn validate(&mut self) -> Result<(), String> {
        check_name("name", &self.name)?;
        if let Some(t) = self.time_scale
            && !(1.0..=MAX_TIME_SCALE).contains(&t)
        {
            return Err(format!(
                "time_scale must be in [1, {MAX_TIME_SCALE}], not {t}"
            ));
        }
        if let Some(app) = &self.app {
            check_name("app", app)?;
        }
        if self.types.is_empty() {
            return Err("needs at least one [[types]] entry".into());
        }
        if self.types.len() > MAX_TYPES {
            return Err(format!(
                "has {} types; at most {MAX_TYPES}",
                self.types.len()
            ));
        }
        for (i, t) in self.types.iter().enumerate() {
            check_name(&format!("type #{} name", i + 1), &t.name)?;
            if self.types[..i].iter().any(|o| o.name == t.name) {
                return Err(format!("type name '{}' appears twice", t.name));
            }
            let field = |f: &str| format!("type '{}': {f}", t.name);
            if !(t.ratio > 0.0 && t.ratio <= 1.0) {
                return Err(format!(
                    "{} must be in (0, 1], not {}",
                    field("ratio"),
                    t.ratio
                ));
            }
            t.service.validate().map_err(|m| field(&m))?;
        }
        let sum: f64 = self.types.iter().map(|t| t.ratio).sum();
        if (sum - 1.0).abs() > 1e-3 {
            return Err(format!("type ratios sum to {sum}, not 1"));
        }
        for t in &mut self.types {
            t.ratio /= sum;
        }
        self.validate_phases()
    }

    /// Checks the phases (see the module's ranges) and names unnamed ones.
    fn validate_phases(&mut self) -> Result<(), String> {
        if self.phases.len() > MAX_PHASES {
            return Err(format!(
                "has {} phases; at most {MAX_PHASES}",
                self.phases.len()
            ));
        }
        let mut total_s = 0.0;
        for i in 0..self.phases.len() {
            if self.phases[i].name.is_empty() {
                self.phases[i].name = format!("phase {i}");
            }
            let p = &self.phases[i];
            check_name(&format!("phase #{i} name"), &p.name)?;
            if self.phases[..i].iter().any(|o| o.name == p.name) {
                return Err(format!("phase name '{}' appears twice", p.name));
            }
            let field = |f: &str| format!("phase '{}': {f}", p.name);
            in_range(
                &field("duration_s"),
                p.duration_s,
                MIN_PHASE_S,
                MAX_PHASE_S,
                " s",
            )?;
            total_s += p.duration_s;
            match (p.rps, p.load) {
                (Some(_), Some(_)) => {
                    return Err(field("give rps or load, not both"));
                }
                (Some(r), None) if !(r > 0.0 && r <= MAX_PHASE_RPS) => {
                    return Err(format!(
                        "{} must be in (0, {MAX_PHASE_RPS:e}], not {}",
                        field("rps"),
                        short_float(r)
                    ));
                }
                (None, Some(l)) if !(l > 0.0 && l <= MAX_PHASE_LOAD) => {
                    return Err(format!(
                        "{} must be in (0, {MAX_PHASE_LOAD}], not {}",
                        field("load"),
                        short_float(l)
                    ));
                }
                _ => {}
            }
            for (j, o) in p.types.iter().enumerate() {
                let of = |f: &str| field(&format!("type '{}': {f}", o.name));
                if !self.types.iter().any(|t| t.name == o.name) {
                    return Err(field(&format!(
                        "type '{}' is not one of the workload's [[types]]",
                        o.name
                    )));
                }
                if p.types[..j].iter().any(|x| x.name == o.name) {
                    return Err(field(&format!("type '{}' appears twice", o.name)));
                }
                if o.ratio.is_none() && o.service.is_none() {
                    return Err(of("changes nothing (give ratio, service or both)"));
                }
                if let Some(r) = o.ratio {
                    in_range(&of("ratio"), r, 0.0, 1.0, "")?;
                }
                if let Some(d) = &o.service {
                    d.validate().map_err(|m| of(&m))?;
                }
            }
            let sum: f64 = self
                .types
                .iter()
                .map(|t| {
                    p.types
                        .iter()
                        .find(|o| o.name == t.name)
                        .and_then(|o| o.ratio)
                        .unwrap_or(t.ratio)
                })
                .sum();
            if (sum - 1.0).abs() > 1e-3 {
                return Err(field(&format!("type ratios sum to {sum}, not 1")));
            }
        }
        if total_s > MAX_PHASE_S {
            return Err(format!(
                "phases last {} s in all; at most {MAX_PHASE_S} s",
                short_float(total_s)
            ));
        }
        Ok(())
    }

    /// Phase `k` as a plain workload: the same types (names, ids), with the
    /// phase's ratios and service times, and no phases.
    ///
    /// # Panics
    /// If there is no phase `k`.
    pub fn phase(&self, k: usize) -> Workload {
        let p = &self.phases[k];
        let mut w = Workload {
            name: format!("{}/{}", self.name, p.name),
            phases: Vec::new(),
            ..self.clone()
        };
        for t in &mut w.types {
            if let Some(o) = p.types.iter().find(|o| o.name == t.name) {
                t.ratio = o.ratio.unwrap_or(t.ratio);
                t.service = o.service.unwrap_or(t.service);
            }
        }
        let sum: f64 = w.types.iter().map(|t| t.ratio).sum();
        for t in &mut w.types {
            t.ratio /= sum;
        }
        w
    }

    /// Length of phase `k`, in ns.
    ///
    /// # Panics
    /// If there is no phase `k`.
    pub fn phase_duration_ns(&self, k: usize) -> Nanos {
        (self.phases[k].duration_s * 1e9).round() as Nanos
    }

    /// Offered rate of phase `k` at a point offering `point_rate_rps` on
    /// `workers` workers: the phase's `rps`, its `load` times its own peak, or
    /// the point's rate.
    ///
    /// # Panics
    /// If there is no phase `k`.
    pub fn phase_rate_rps(&self, k: usize, point_rate_rps: f64, workers: usize) -> f64 {
        let p = &self.phases[k];
        match (p.rps, p.load) {
            (Some(r), _) => r,
            (None, Some(l)) => l * self.phase(k).peak_rps(workers),
            (None, None) => point_rate_rps,
        }
    }

    /// The arrival period of a point whose `--duration` is `duration_ns`: the
    /// sum of the phases' durations, or `duration_ns` without phases.
    pub fn arrival_period_ns(&self, duration_ns: Nanos) -> Nanos {
        if self.phases.is_empty() {
            duration_ns
        } else {
            (0..self.phases.len())
                .map(|k| self.phase_duration_ns(k))
                .sum()
        }
    }

    /// Where each phase starts, in seconds from the first arrival's period
    /// start, with its name (for plots); empty without phases.
    pub fn phase_boundaries(&self) -> Vec<(f64, String)> {
        let mut start_ns: Nanos = 0;
        self.phases
            .iter()
            .enumerate()
            .map(|(k, p)| {
                let at = start_ns as f64 / 1e9;
                start_ns += self.phase_duration_ns(k);
                (at, p.name.clone())
            })
            .collect()
    }

    /// Each phase's `(rate_rps, duration_ns)` at a point offering
    /// `point_rate_rps` for `duration_ns` on `workers` workers; without phases,
    /// the point itself.
    pub fn arrival_plan(
        &self,
        point_rate_rps: f64,
        duration_ns: Nanos,
        workers: usize,
    ) -> Vec<(f64, Nanos)> {
        if self.phases.is_empty() {
            return vec![(point_rate_rps, duration_ns)];
        }
        (0..self.phases.len())
            .map(|k| {
                (
                    self.phase_rate_rps(k, point_rate_rps, workers),
                    self.phase_duration_ns(k),
                )
            })
            .collect()
    }

    /// Requests a point offering `point_rate_rps` for `duration_ns` on
    /// `workers` workers is expected to generate, all phases together.
    pub fn expected_requests(
        &self,
        point_rate_rps: f64,
        duration_ns: Nanos,
        workers: usize,
    ) -> f64 {
        self.arrival_plan(point_rate_rps, duration_ns, workers)
            .iter()
            .map(|&(rate, d)| rate * d as f64 / 1e9)
            .sum()
    }

    /// Mean service time over the mix, in nanoseconds.
    pub fn mean_service_ns(&self) -> f64 {
        self.types
            .iter()
            .map(|t| t.ratio * t.service.mean_us() * 1e3)
            .sum()
    }

    /// Peak request rate on `workers` workers: workers / mean service time.
    pub fn peak_rps(&self, workers: usize) -> f64 {
        workers as f64 / (self.mean_service_ns() / 1e9)
    }

    /// The types as the policy core registers them, with expected means.
    pub fn type_infos(&self) -> Vec<TypeInfo> {
        self.types
            .iter()
            .map(|t| TypeInfo {
                name: t.name.clone(),
                mean_service_ns: Some(t.service.mean_us() * 1e3),
            })
            .collect()
    }

    /// A workload of fixed-service types `(name, us, ratio)`, for tests and tools.
    pub fn fixed(name: &str, types: &[(&str, f64, f64)]) -> Self {
        Self {
            name: name.to_string(),
            description: String::new(),
            app: None,
            app_options: None,
            phases: Vec::new(),
            time_scale: None,
            types: types
                .iter()
                .map(|&(n, us, ratio)| WorkloadType {
                    name: n.to_string(),
                    ratio,
                    service: ServiceDist::Fixed { us },
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn every_builtin_parses_and_extreme_bimodal_peak_matches_the_spec() {
        for (name, _) in BUILTIN {
            let w = Workload::resolve(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(&w.name, name);
        }
        let w = Workload::resolve("extreme-bimodal").unwrap();
        assert!((w.mean_service_ns() - 2997.5).abs() < 1e-6);
        assert!((w.peak_rps(16) / 1e6 - 5.3378).abs() < 1e-3);
    }

    #[test]
    fn malformed_and_invalid_files_are_errors() {
        let bad = [
            "name = 1",
            "name = \"x\"\ntypes = []",
            "name = \"x\"\n[[types]]\nname = \"a\"\nratio = 0.5\nservice = { dist = \"fixed\", us = 1.0 }",
            "name = \"x\"\n[[types]]\nname = \"a\"\nratio = 1\nservice = { dist = \"fixed\", us = -1.0 }",
            "name = \"x\"\n[[types]]\nname = \"a\"\nratio = 1\nservice = { dist = \"zipf\", us = 1.0 }",
            "name = \"x\"\n[[types]]\nname = \"a\"\nratio = 1\nservice = { dist = \"fixed\", us = 1.0, mean_us = 2.0 }",
        ];
        for text in bad {
            assert!(Workload::parse(text, "t").is_err(), "{text}");
        }
        assert!(matches!(
            Workload::resolve("no-such-workload"),
            Err(WorkloadError::Unknown(_))
        ));
        assert!(matches!(
            Workload::resolve("/nonexistent/w.toml"),
            Err(WorkloadError::Io { .. })
        ));
    }

    fn one_type(service: &str) -> String {
        format!("name = \"x\"\n[[types]]\nname = \"a\"\nratio = 1\nservice = {{ {service} }}\n")
    }

    #[test]
    fn every_field_is_range_checked_and_the_error_names_it() {
        for (service, field) in [
            ("dist = \"fixed\", us = 1e-300", "service.us"),
            ("dist = \"fixed\", us = 1e308", "service.us"),
            ("dist = \"fixed\", us = inf", "service.us"),
            ("dist = \"fixed\", us = nan", "service.us"),
            ("dist = \"fixed\", us = 0.0", "service.us"),
            ("dist = \"exponential\", mean_us = 2e6", "service.mean_us"),
            (
                "dist = \"lognormal\", mean_us = 1.0, sigma = 50.0",
                "service.sigma",
            ),
            (
                "dist = \"lognormal\", mean_us = 1.0, sigma = -1.0",
                "service.sigma",
            ),
            (
                "dist = \"bimodal\", short_us = 1.0, long_us = 1e9, p_long = 0.1",
                "service.long_us",
            ),
            (
                "dist = \"bimodal\", short_us = 1.0, long_us = 2.0, p_long = nan",
                "service.p_long",
            ),
            (
                "dist = \"uniform\", min_us = 0.0001, max_us = 2.0",
                "service.min_us",
            ),
            (
                "dist = \"uniform\", min_us = 3.0, max_us = 2.0",
                "service.min_us",
            ),
        ] {
            let e = Workload::parse(&one_type(service), "t")
                .expect_err(service)
                .to_string();
            assert!(
                e.contains(field) && e.contains("type 'a'"),
                "{service}: {e}"
            );
        }
        let w = Workload::parse(&one_type("dist = \"fixed\", us = 0.001"), "t").unwrap();
        assert_eq!(
            w.types[0]
                .service
                .sampler()
                .sample(&mut SmallRng::seed_from_u64(1)),
            1
        );
        assert!(Workload::parse(&one_type("dist = \"fixed\", us = 1e6"), "t").is_ok());
        for (text, needle) in [
            (
                one_type("dist = \"fixed\", us = 1.0").replace("ratio = 1", "ratio = nan"),
                "ratio",
            ),
            (
                one_type("dist = \"fixed\", us = 1.0").replace("ratio = 1", "ratio = 2"),
                "ratio",
            ),
            (
                one_type("dist = \"fixed\", us = 1.0").replace("name = \"x\"", "name = \"\""),
                "name",
            ),
            (
                one_type("dist = \"fixed\", us = 1.0").replace("name = \"a\"", "name = \"a\\nb\""),
                "control",
            ),
            (
                one_type("dist = \"fixed\", us = 1.0")
                    .replace("name = \"a\"", &format!("name = \"{}\"", "n".repeat(65))),
                "1 to 64 characters",
            ),
        ] {
            let e = Workload::parse(&text, "t").expect_err(&text).to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn at_most_max_types() {
        let types = |n: usize| {
            let mut t = String::from("name = \"many\"\n");
            for i in 0..n {
                t.push_str(&format!(
                    "[[types]]\nname = \"t{i}\"\nratio = {}\nservice = {{ dist = \"fixed\", us = 1.0 }}\n",
                    1.0 / n as f64
                ));
            }
            t
        };
        assert_eq!(
            Workload::parse(&types(MAX_TYPES), "t").unwrap().types.len(),
            MAX_TYPES
        );
        let e = Workload::parse(&types(MAX_TYPES + 1), "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("at most 64"), "{e}");
    }

    #[test]
    fn a_directory_a_device_or_an_empty_file_says_what_it_is() {
        let dir = std::env::temp_dir().join(format!("psp-workload-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.toml");
        std::fs::write(&empty, "  \n").unwrap();
        let big = dir.join("big.toml");
        std::fs::write(&big, vec![b'#'; MAX_FILE_BYTES as usize + 1]).unwrap();
        for (path, needle) in [
            (dir.to_str().unwrap(), "is a directory"),
            ("/dev/null", "is not a regular file"),
            (empty.to_str().unwrap(), "is empty"),
            (big.to_str().unwrap(), "is larger than"),
            ("/no/such/file.toml", "no such file"),
        ] {
            let e = Workload::resolve(path).unwrap_err().to_string();
            assert!(e.contains(needle) && e.contains(path), "{path}: {e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn two_types_and(phases: &str) -> String {
        format!(
            "name = \"x\"\n[[types]]\nname = \"a\"\nratio = 0.5\nservice = {{ dist = \"fixed\", us = 1.0 }}\n[[types]]\nname = \"b\"\nratio = 0.5\nservice = {{ dist = \"fixed\", us = 100.0 }}\n{phases}"
        )
    }

    #[test]
    fn phases_are_checked_and_the_error_names_the_phase_and_field() {
        let ok = "[[phases]]\nduration_s = 1\n";
        assert!(Workload::parse(&two_types_and(ok), "t").is_ok());
        let over = |body: &str| format!("[[phases]]\nname = \"p\"\nduration_s = 1\n{body}");
        for (phases, needle) in [
            ("[[phases]]\nduration_s = 0\n".to_string(), "duration_s"),
            ("[[phases]]\nduration_s = -1\n".to_string(), "duration_s"),
            ("[[phases]]\nduration_s = nan\n".to_string(), "duration_s"),
            ("[[phases]]\nduration_s = 3601\n".to_string(), "duration_s"),
            (
                "[[phases]]\nduration_s = 3000\n[[phases]]\nduration_s = 3000\n".to_string(),
                "at most 3600 s",
            ),
            ("[[phases]]\nname = \" \"\nduration_s = 1\n".to_string(), "phase #0 name"),
            (
                "[[phases]]\nname = \"p\"\nduration_s = 1\n[[phases]]\nname = \"p\"\nduration_s = 1\n"
                    .to_string(),
                "appears twice",
            ),
            (over("rps = 0\n"), "phase 'p': rps must be in (0, 1e9]"),
            (over("rps = 2e9\n"), "rps"),
            (over("load = 11\n"), "phase 'p': load must be in (0, 10]"),
            (over("load = 0.5\nrps = 10\n"), "not both"),
            (
                over("[[phases.types]]\nname = \"c\"\nratio = 1\n"),
                "type 'c' is not one of",
            ),
            (over("[[phases.types]]\nname = \"a\"\n"), "changes nothing"),
            (
                over("[[phases.types]]\nname = \"a\"\nratio = 1.5\n"),
                "phase 'p': type 'a': ratio must be in [0, 1]",
            ),
            (
                over("[[phases.types]]\nname = \"a\"\nratio = 0.9\n"),
                "phase 'p': type ratios sum to 1.4",
            ),
            (
                over("[[phases.types]]\nname = \"a\"\nratio = 0\n[[phases.types]]\nname = \"b\"\nratio = 0\n"),
                "sum to 0",
            ),
            (
                over("[[phases.types]]\nname = \"a\"\nratio = 0.5\n[[phases.types]]\nname = \"a\"\nratio = 0.5\n"),
                "type 'a' appears twice",
            ),
            (
                over("[[phases.types]]\nname = \"b\"\nservice = { dist = \"fixed\", us = 1e9 }\n"),
                "phase 'p': type 'b': service.us",
            ),
            (over("mix = 1\n"), "unknown field"),
        ] {
            let text = two_types_and(&phases);
            let e = Workload::parse(&text, "t").expect_err(&text).to_string();
            assert!(e.contains(needle), "{phases}: {e}");
        }
        let many: String = (0..=MAX_PHASES)
            .map(|_| "[[phases]]\nduration_s = 1\n")
            .collect();
        let e = Workload::parse(&two_types_and(&many), "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("at most 64"), "{e}");
    }

    #[test]
    fn workload_change_has_four_5s_phases_at_80_percent_of_their_own_peak() {
        let w = Workload::resolve("workload-change").unwrap();
        assert_eq!(w.phases.len(), 4);
        assert_eq!(w.arrival_period_ns(1), 20_000_000_000);
        let starts: Vec<f64> = w.phase_boundaries().iter().map(|b| b.0).collect();
        assert_eq!(starts, vec![0.0, 5.0, 10.0, 15.0]);
        let mix = |k: usize| -> Vec<(f64, f64)> {
            w.phase(k)
                .types
                .iter()
                .map(|t| (t.ratio, t.service.mean_us()))
                .collect()
        };
        assert_eq!(mix(0), vec![(0.5, 1.0), (0.5, 100.0)]);
        assert_eq!(mix(1), vec![(0.5, 100.0), (0.5, 1.0)]);
        assert_eq!(mix(2), vec![(0.995, 100.0), (0.005, 1.0)]);
        assert_eq!(mix(3), vec![(1.0, 100.0), (0.0, 1.0)]);
        for k in 0..4 {
            let rate = w.phase_rate_rps(k, 1.0, 16);
            assert!((rate / w.phase(k).peak_rps(16) - 0.8).abs() < 1e-12);
        }
    }

    #[test]
    fn samplers_have_the_declared_means() {
        let mut rng = SmallRng::seed_from_u64(5);
        for d in [
            ServiceDist::Exponential { mean_us: 2.0 },
            ServiceDist::Lognormal {
                mean_us: 3.0,
                sigma: 0.5,
            },
            ServiceDist::Bimodal {
                short_us: 1.0,
                long_us: 100.0,
                p_long: 0.1,
            },
            ServiceDist::Uniform {
                min_us: 1.0,
                max_us: 5.0,
            },
        ] {
            let s = d.sampler();
            let n = 200_000;
            let mean = (0..n).map(|_| s.sample(&mut rng) as f64).sum::<f64>() / n as f64 / 1e3;
            assert!((mean / d.mean_us() - 1.0).abs() < 0.02, "{d:?}: {mean}");
        }
    }

    #[test]
    fn scaled_workloads_scale_the_policies_time_constants_and_the_scale_has_a_range() {
        for (name, scale) in [
            ("extreme-bimodal-x1000", 1000.0),
            ("balanced-bimodal-x1000", 1000.0),
            ("extreme-bimodal-x100", 100.0),
            ("high-bimodal-x100", 100.0),
            ("workload-change-x100", 100.0),
            ("extreme-bimodal", 1.0),
        ] {
            assert_eq!(
                Workload::resolve(name).unwrap().time_scale(),
                scale,
                "{name}"
            );
        }
        let w = Workload::resolve("extreme-bimodal-x1000").unwrap();
        assert_eq!(w.policy("ts").unwrap().to_string(), "ts:quantum=5000");
        assert_eq!(
            w.policy("ts:quantum=1000").unwrap().to_string(),
            "ts:quantum=1000"
        );
        let body =
            "[[types]]\nname = \"a\"\nratio = 1.0\nservice = { dist = \"fixed\", us = 1.0 }\n";
        for bad in ["0.5", "10001", "nan"] {
            let text = format!("name = \"w\"\ntime_scale = {bad}\n{body}");
            let e = Workload::parse(&text, "w.toml").unwrap_err().to_string();
            assert!(e.contains("time_scale must be in [1, 10000]"), "{bad}: {e}");
        }
        let ok = format!("name = \"w\"\ntime_scale = 10\n{body}");
        assert_eq!(Workload::parse(&ok, "w.toml").unwrap().time_scale(), 10.0);
    }

    #[test]
    fn every_workload_file_in_the_repository_parses() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                Workload::resolve(path.to_str().unwrap())
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                n += 1;
            }
        }
        assert!(n >= 20, "{n} workload files in {}", dir.display());
    }
}
