//! The applications behind the scheduler, and the seam they plug into.
//!
//! An application ([`AppConfig`], chosen on the command line with its options)
//! names its operations, maps a workload's request types onto them
//! ([`AppConfig::bind`]: type id = the workload type's index, matched by name),
//! writes the bodies of generated requests ([`AppConfig::encoder`], for
//! `psp run`'s generator and `psp load`'s client) and starts its [`Service`]
//! ([`AppConfig::start`]), which builds one [`Handler`] per worker, sharing
//! what must be shared (one database, one set of tables). Handlers validate
//! every body: a bad one is answered BAD_REQUEST
//! ([`psp_runtime::HandlerError::BadBody`]), never a crash.
//!
//! - [`spin`]: the synthetic application (spins for the service time the
//!   request carries) and the echo service.
//! - [`kv`]: a key-value service over an embedded RocksDB.
//! - [`tpcc`]: TPC-C's five transactions over in-memory tables.
//! - [`profile`]: each operation's service time, measured alone.
//!
//! Options are checked in one place each ([`kv::KvConfig::validate`],
//! [`tpcc::TpccConfig::validate`]) before anything is opened or loaded.

pub mod kv;
pub mod memkv;
pub mod profile;
pub mod spin;
pub mod tpcc;

use std::fmt::Debug;
use std::sync::Arc;

use psp_core::TypeId;
use psp_runtime::{BodyEncoder, Handler};

pub use kv::KvConfig;
pub use spin::SpinConfig;
pub use tpcc::TpccConfig;

/// Why an application could not be set up (one line each).
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// No application of that name.
    #[error("--app must be spin, echo, kv or tpcc, not '{0}'")]
    Unknown(String),
    /// A workload type names no operation of the application.
    #[error("workload type '{name}' is not an operation of app {app} ({ops})")]
    NotAnOperation {
        /// The application.
        app: &'static str,
        /// The type's name.
        name: String,
        /// The application's operations.
        ops: String,
    },
    /// An option out of its range.
    #[error("{option} must be in [{min}, {max}], not {value}")]
    Range {
        /// The option, as the command line spells it.
        option: &'static str,
        /// Smallest valid value.
        min: u64,
        /// Largest valid value.
        max: u64,
        /// The value given.
        value: u64,
    },
    /// The application could not start (a database that does not open, …).
    #[error("{0}")]
    Setup(String),
}

/// Checks `value` against `[min, max]` for `option`.
///
/// # Errors
/// [`AppError::Range`].
pub fn check_range(option: &'static str, value: u64, min: u64, max: u64) -> Result<u64, AppError> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(AppError::Range {
            option,
            min,
            max,
            value,
        })
    }
}

/// An application with its options.
#[derive(Debug, Clone)]
pub enum AppConfig {
    /// Spins for the service time each request carries ([`spin`]).
    Spin(SpinConfig),
    /// Answers with the request's body ([`spin::EchoHandler`]).
    Echo,
    /// The RocksDB key-value service ([`kv`]).
    Kv(KvConfig),
    /// TPC-C ([`tpcc`]).
    Tpcc(TpccConfig),
}

/// The application names, as the command line spells them.
pub const APP_NAMES: [&str; 4] = ["spin", "echo", "kv", "tpcc"];

impl AppConfig {
    /// The name used on the command line and in workload files.
    pub fn name(&self) -> &'static str {
        match self {
            AppConfig::Spin(_) => "spin",
            AppConfig::Echo => "echo",
            AppConfig::Kv(_) => "kv",
            AppConfig::Tpcc(_) => "tpcc",
        }
    }

    /// The operations request types may name; `None`: any name (the type only
    /// matters to the scheduler).
    pub fn operations(&self) -> Option<&'static [&'static str]> {
        match self {
            AppConfig::Spin(_) | AppConfig::Echo => None,
            AppConfig::Kv(_) => Some(&kv::OPERATIONS),
            AppConfig::Tpcc(_) => Some(&tpcc::OPERATIONS),
        }
    }

    /// The mix `psp profile` writes by default (operation, ratio): the
    /// papers' experiments for this application.
    pub fn default_mix(&self) -> &'static [(&'static str, f64)] {
        default_mix(self.name())
    }

    /// The operation each of `types` (a workload's type names, in type-id
    /// order) names: `ops[type_id]` is an index into
    /// [`operations`](Self::operations) (the type id itself for applications
    /// that take any name).
    ///
    /// # Errors
    /// A type that names no operation.
    pub fn bind(&self, types: &[String]) -> Result<Vec<usize>, AppError> {
        let Some(ops) = self.operations() else {
            return Ok((0..types.len()).collect());
        };
        types
            .iter()
            .map(|t| {
                ops.iter()
                    .position(|op| op.eq_ignore_ascii_case(t))
                    .ok_or_else(|| AppError::NotAnOperation {
                        app: self.name(),
                        name: t.clone(),
                        ops: ops.join(", "),
                    })
            })
            .collect()
    }

    /// Checks the options (each against its range), opening nothing.
    ///
    /// # Errors
    /// An option out of range.
    pub fn validate(&self) -> Result<(), AppError> {
        match self {
            AppConfig::Spin(_) | AppConfig::Echo => Ok(()),
            AppConfig::Kv(c) => c.validate(),
            AppConfig::Tpcc(c) => c.validate(),
        }
    }

    /// The writer of generated request bodies for a workload with `types`,
    /// drawing with `seed`.
    ///
    /// # Errors
    /// Options out of range, or a type that names no operation.
    pub fn encoder(&self, types: &[String], seed: u64) -> Result<Box<dyn BodyEncoder>, AppError> {
        self.validate()?;
        let ops = self.bind(types)?;
        Ok(match self {
            AppConfig::Spin(_) | AppConfig::Echo => Box::new(psp_runtime::SyntheticEncoder),
            AppConfig::Kv(c) => Box::new(kv::KvEncoder::new(c, ops, seed)),
            AppConfig::Tpcc(c) => Box::new(tpcc::TpccEncoder::new(c, ops, seed)),
        })
    }

    /// The encoders of this application's request bodies for `types`, for a
    /// load generator ([`Self::encoder`] with each seed).
    pub fn encoders(&self, types: &[String]) -> psp_runtime::EncoderSource {
        let (app, types) = (self.clone(), types.to_vec());
        psp_runtime::EncoderSource::new(move |seed| {
            app.encoder(&types, seed).map_err(|e| e.to_string())
        })
    }

    /// Starts the application for a workload with `types`: opens and loads
    /// its database or tables.
    ///
    /// # Errors
    /// Options out of range, a type that names no operation, a database that
    /// cannot be opened or loaded.
    pub fn start(&self, types: &[String]) -> Result<Arc<dyn Service>, AppError> {
        self.validate()?;
        let ops = self.bind(types)?;
        Ok(match self {
            AppConfig::Spin(c) => Arc::new(spin::SpinService::new(c)),
            AppConfig::Echo => Arc::new(spin::EchoService),
            AppConfig::Kv(c) => Arc::new(kv::KvService::open(c, ops)?),
            AppConfig::Tpcc(c) => Arc::new(tpcc::TpccService::load(c, ops)?),
        })
    }
}

/// The mix `psp profile` writes by default for the application named `app`
/// (empty for applications without operations of their own, or unknown names).
pub fn default_mix(app: &str) -> &'static [(&'static str, f64)] {
    match app.to_ascii_lowercase().as_str() {
        "kv" => &kv::DEFAULT_MIX,
        "tpcc" => &tpcc::DEFAULT_MIX,
        _ => &[],
    }
}

/// A started application: what a server or run serves.
pub trait Service: Send + Sync + Debug {
    /// The application's name.
    fn app(&self) -> &'static str;
    /// The handler of worker `worker` (its own state; shared state behind an
    /// `Arc`).
    fn handler(&self, worker: usize) -> Box<dyn Handler>;
    /// The handler of worker `worker` under a policy driven by application
    /// feedback (SYNERGY) whose long threshold is `long_ns`: the synthetic
    /// application declares requests asking for at least that much service
    /// long (`feedback_start()`); applications that recognise their long
    /// requests themselves (kv's SCAN, TPC-C's Delivery and StockLevel)
    /// ignore it (the default).
    fn handler_with_feedback(&self, worker: usize, long_ns: u64) -> Box<dyn Handler> {
        let _ = long_ns;
        self.handler(worker)
    }
    /// What is being served, for humans (e.g. the database's path and size).
    fn describe(&self) -> String;
    /// Once serving is over: the application's own check of its state, for
    /// humans (TPC-C's consistency conditions), if it has one.
    fn finish(&self) -> Option<String> {
        None
    }
}

/// The handlers of `service` as a front end or run takes them: under a
/// policy driven by application feedback (`feedback_ns`: SYNERGY's `long`,
/// [`psp_core::PolicySpec::feedback_threshold_ns`]) each handler declares
/// long requests by that threshold ([`Service::handler_with_feedback`]).
pub fn handler_factory(
    service: Arc<dyn Service>,
    feedback_ns: Option<u64>,
) -> Arc<dyn psp_runtime::HandlerFactory> {
    Arc::new(move |i: usize| match feedback_ns {
        Some(long_ns) => service.handler_with_feedback(i, long_ns),
        None => service.handler(i),
    })
}

/// The operation index of `type_id` under `ops` (from [`AppConfig::bind`]);
/// `None` for a type the workload does not have.
#[inline]
pub fn operation_of(ops: &[usize], type_id: TypeId) -> Option<usize> {
    ops.get(usize::from(type_id)).copied()
}
