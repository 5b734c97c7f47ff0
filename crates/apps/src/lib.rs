//! The applications behind the scheduler, and the seam they plug into.
//!
//! An application is one file that implements [`App`] (its name, the
//! operations request types may name, its options' checks, the writer of its
//! generated request bodies, the [`Service`] that builds its handlers) and
//! exports an [`AppEntry`] (the name `--app` takes, its standard mix, how its
//! options are read), plus one line in [`APPS`], the registry the command
//! line reads. Adding an application touches nothing else
//! (`examples/own_app.rs` writes one).
//!
//! A configured application ([`AppConfig`]) maps a workload's request types
//! onto its operations ([`AppConfig::bind`]: type id = the workload type's
//! index, matched by name), writes the bodies of generated requests
//! ([`AppConfig::encoder`], for `psp run`'s generator and `psp load`'s
//! client) and starts its [`Service`] ([`AppConfig::start`]), which builds
//! one [`Handler`] per worker, sharing what must be shared (one database,
//! one set of tables). Handlers validate every body: a bad one is answered
//! BAD_REQUEST ([`psp_runtime::HandlerError::BadBody`]), never a crash.
//!
//! - [`spin`]: the synthetic application (spins for the service time the
//!   request carries) and the echo service.
//! - [`kv`]: a key-value service over an embedded RocksDB.
//! - [`tpcc`]: TPC-C's five transactions over in-memory tables.
//! - [`memkv`]: the in-memory store behind the protocol front ends.
//! - [`profile`]: each operation's service time, measured alone.
//!
//! Options are checked in one place each ([`kv::KvConfig::validate`],
//! [`tpcc::TpccConfig::validate`]) before anything is opened or loaded.

pub mod kv;
pub mod memkv;
pub mod profile;
pub mod spin;
pub mod tpcc;

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use psp_core::TypeId;
use psp_runtime::{BodyEncoder, Handler};

pub use kv::KvConfig;
pub use spin::{EchoConfig, SpinConfig};
pub use tpcc::TpccConfig;

/// The registry: every application `--app` takes, in the order the command
/// line lists them. A new application is one file and one line here.
pub static APPS: &[AppEntry] = &[spin::SPIN, spin::ECHO, kv::ENTRY, tpcc::ENTRY];

/// One line of the registry.
#[derive(Debug, Clone, Copy)]
pub struct AppEntry {
    /// The name `--app` and workload files take (lower case).
    pub name: &'static str,
    /// What it does, for `--app`'s help (a few words).
    pub about: &'static str,
    /// The mix `psp profile` writes by default (operation, ratio): the
    /// papers' experiments for this application; empty for applications
    /// without operations of their own.
    pub default_mix: &'static [(&'static str, f64)],
    /// The options a workload file's `[app_options]` may carry for it
    /// (counts; what its measured service times depend on).
    pub workload_options: &'static [&'static str],
    /// The application with `options` (each missing one at its default),
    /// nothing checked or opened.
    pub configure: fn(&AppOptions) -> AppConfig,
}

/// The registered application named `name` (any case).
pub fn find(name: &str) -> Option<&'static AppEntry> {
    APPS.iter().find(|e| e.name.eq_ignore_ascii_case(name))
}

/// `--app`'s choices in words, from the registry: `spin (...), echo (...)
/// or kv (...)`.
pub fn apps_about() -> String {
    let each: Vec<String> = APPS
        .iter()
        .map(|e| format!("{} ({})", e.name, e.about))
        .collect();
    psp_proto::or_list(&each)
}

/// The registered applications' names, in registry order.
pub fn app_names() -> Vec<&'static str> {
    APPS.iter().map(|e| e.name).collect()
}

/// An application's options as a command gives them: by name (as a workload
/// file's `[app_options]` spells them: `kv_keys`), each optional, and what
/// the command knows of the workload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppOptions {
    /// Longest service time a request may ask for (the synthetic
    /// application's cap; `u64::MAX` for generated, trusted requests).
    pub max_service_ns: u64,
    counts: BTreeMap<String, u64>,
    paths: BTreeMap<String, PathBuf>,
}

impl AppOptions {
    /// No option given, requests capped at `max_service_ns`.
    pub fn new(max_service_ns: u64) -> Self {
        Self {
            max_service_ns,
            ..Self::default()
        }
    }

    /// With the count `name` set to `value` (left as is when `None`).
    #[must_use]
    pub fn with_count(mut self, name: &str, value: Option<u64>) -> Self {
        if let Some(v) = value {
            self.counts.insert(name.to_string(), v);
        }
        self
    }

    /// With the path `name` set to `value` (left as is when `None`).
    #[must_use]
    pub fn with_path(mut self, name: &str, value: Option<PathBuf>) -> Self {
        if let Some(v) = value {
            self.paths.insert(name.to_string(), v);
        }
        self
    }

    /// The count `name`, if given.
    pub fn count(&self, name: &str) -> Option<u64> {
        self.counts.get(name).copied()
    }

    /// The path `name`, if given.
    pub fn path(&self, name: &str) -> Option<&Path> {
        self.paths.get(name).map(PathBuf::as_path)
    }
}

/// An application with its options: what a registry entry configures.
pub trait App: Debug + Send + Sync + 'static {
    /// The name used on the command line and in workload files.
    fn name(&self) -> &'static str;

    /// The operations request types may name; `None` (the default): any
    /// name (the type only matters to the scheduler).
    fn operations(&self) -> Option<&'static [&'static str]> {
        None
    }

    /// Checks the options (each against its range), opening nothing.
    ///
    /// # Errors
    /// An option out of range.
    fn validate(&self) -> Result<(), AppError> {
        Ok(())
    }

    /// The options its measured service times depend on (name, value), as
    /// `psp profile` writes them into a workload file's `[app_options]`.
    fn options(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// The writer of generated request bodies, for types whose operations
    /// are `ops` ([`AppConfig::bind`]), drawing with `seed`. Called after
    /// [`App::validate`]. By default the synthetic body: the service time
    /// the workload drew (for applications without operations of their own).
    fn encoder(&self, ops: Vec<usize>, seed: u64) -> Box<dyn BodyEncoder> {
        let _ = (ops, seed);
        Box::new(psp_runtime::SyntheticEncoder)
    }

    /// Starts the application (opens and loads its database or tables)
    /// for types whose operations are `ops`: the handler factory a runtime
    /// serves. Called after [`App::validate`].
    ///
    /// # Errors
    /// A database that cannot be opened or loaded.
    fn service(&self, ops: Vec<usize>) -> Result<Arc<dyn Service>, AppError>;
}

/// Why an application could not be set up (one line each).
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// No application of that name.
    #[error("--app must be {names}, not '{0}'", names = psp_proto::or_list(&app_names()))]
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

/// An application with its options, configured ([`AppEntry::configure`]).
#[derive(Debug, Clone)]
pub struct AppConfig(Arc<dyn App>);

impl AppConfig {
    /// The application `app`.
    pub fn new(app: impl App) -> Self {
        Self(Arc::new(app))
    }

    /// The application.
    pub fn app(&self) -> &dyn App {
        &*self.0
    }

    /// The name used on the command line and in workload files.
    pub fn name(&self) -> &'static str {
        self.0.name()
    }

    /// The operations request types may name; `None`: any name (the type only
    /// matters to the scheduler).
    pub fn operations(&self) -> Option<&'static [&'static str]> {
        self.0.operations()
    }

    /// The mix `psp profile` writes by default (operation, ratio): the
    /// papers' experiments for this application.
    pub fn default_mix(&self) -> &'static [(&'static str, f64)] {
        default_mix(self.name())
    }

    /// The options its measured service times depend on ([`App::options`]).
    pub fn options(&self) -> Vec<(&'static str, u64)> {
        self.0.options()
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
        self.0.validate()
    }

    /// The writer of generated request bodies for a workload with `types`,
    /// drawing with `seed`.
    ///
    /// # Errors
    /// Options out of range, or a type that names no operation.
    pub fn encoder(&self, types: &[String], seed: u64) -> Result<Box<dyn BodyEncoder>, AppError> {
        self.validate()?;
        let ops = self.bind(types)?;
        Ok(self.0.encoder(ops, seed))
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
        self.0.service(ops)
    }
}

/// The mix `psp profile` writes by default for the application named `app`
/// (empty for applications without operations of their own, or unknown names).
pub fn default_mix(app: &str) -> &'static [(&'static str, f64)] {
    find(app).map_or(&[], |e| e.default_mix)
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
    /// The store's sizes, where a protocol front end may read them to type
    /// each command by what it will touch (the in-memory store's).
    fn sizes(&self) -> Option<psp_proto::StoreSizes> {
        None
    }
    /// Once serving is over: the application's own check of its state, for
    /// humans (TPC-C's consistency conditions), if it has one.
    fn finish(&self) -> Option<String> {
        None
    }
}

/// Runs a protocol command (`execute`), answering a panic inside it as
/// HANDLER_ERROR (the reply it had begun, `response` past `start`, taken
/// back) instead of letting it take the worker, and with it the server,
/// down: a command that panics is a bug, but one client's command must
/// not stop everyone's. The panic's message still goes to stderr.
pub fn answer_panics(
    response: &mut Vec<u8>,
    execute: impl FnOnce(&mut Vec<u8>) -> Result<(), psp_runtime::HandlerError>,
) -> Result<(), psp_runtime::HandlerError> {
    let start = response.len();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| execute(&mut *response))) {
        Ok(r) => r,
        Err(_) => {
            response.truncate(start);
            Err(psp_runtime::HandlerError::Failed(
                "the command failed inside the server",
            ))
        }
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

#[cfg(test)]
mod tests {
    use psp_runtime::HandlerError;

    /// A command that panics is answered HANDLER_ERROR, the reply it had
    /// begun taken back and what was there before kept; one that returns
    /// is untouched.
    #[test]
    fn a_panicking_command_is_answered_and_its_partial_reply_taken_back() {
        let mut out = b"earlier".to_vec();
        let r = super::answer_panics(&mut out, |o| {
            o.extend_from_slice(b"half a rep");
            panic!("a bug in a command");
        });
        assert!(matches!(r, Err(HandlerError::Failed(_))), "{r:?}");
        assert_eq!(out, b"earlier");
        let r = super::answer_panics(&mut out, |o| {
            o.extend_from_slice(b"+OK\r\n");
            Ok(())
        });
        assert!(r.is_ok());
        assert_eq!(out, b"earlier+OK\r\n");
    }
}
