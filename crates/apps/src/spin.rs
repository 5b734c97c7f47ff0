//! The synthetic application, which spins for the service time each request
//! carries (the workloads' declared service times made real on a core), and
//! the echo service (answers with the request's body: a do-nothing baseline).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use psp_runtime::{Handler, HandlerError, RequestContext, SpinHandler, Spinner};

use crate::{App, AppConfig, AppEntry, AppError, AppOptions, Service};

/// The registry's entry of the spin application.
pub const SPIN: AppEntry = AppEntry {
    name: "spin",
    about: "spins for the service time each request carries",
    default_mix: &[],
    workload_options: &[],
    configure: |o: &AppOptions| {
        AppConfig::new(SpinConfig {
            max_service_ns: o.max_service_ns,
        })
    },
};

/// The registry's entry of the echo service.
pub const ECHO: AppEntry = AppEntry {
    name: "echo",
    about: "returns the body",
    default_mix: &[],
    workload_options: &[],
    configure: |_: &AppOptions| AppConfig::new(EchoConfig),
};

/// The spin application's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpinConfig {
    /// Longest service time a request may ask for; longer ones are answered
    /// HANDLER_ERROR at once (`u64::MAX` for generated, trusted requests).
    pub max_service_ns: u64,
}

impl App for SpinConfig {
    fn name(&self) -> &'static str {
        "spin"
    }

    fn service(&self, _ops: Vec<usize>) -> Result<Arc<dyn Service>, AppError> {
        Ok(Arc::new(SpinService::new(self)))
    }
}

/// The process's calibrated spin (calibrated once, 50 ms, on first use).
pub fn spinner() -> Spinner {
    static S: OnceLock<Spinner> = OnceLock::new();
    *S.get_or_init(|| Spinner::calibrate(Duration::from_millis(50)))
}

/// The spin application, started.
#[derive(Debug)]
pub struct SpinService {
    spinner: Spinner,
    config: SpinConfig,
}

impl SpinService {
    /// Serves with `config`, spinning with the process's calibrated
    /// [`spinner`].
    pub fn new(config: &SpinConfig) -> Self {
        Self::with_spinner(spinner(), config)
    }

    /// Serves with `config`, spinning with `spinner`.
    pub fn with_spinner(spinner: Spinner, config: &SpinConfig) -> Self {
        Self {
            spinner,
            config: *config,
        }
    }
}

impl Service for SpinService {
    fn app(&self) -> &'static str {
        "spin"
    }

    fn handler(&self, _worker: usize) -> Box<dyn Handler> {
        Box::new(SpinHandler::with_cap(
            self.spinner,
            self.config.max_service_ns,
        ))
    }

    fn handler_with_feedback(&self, _worker: usize, long_ns: u64) -> Box<dyn Handler> {
        Box::new(
            SpinHandler::with_cap(self.spinner, self.config.max_service_ns)
                .with_feedback_threshold(long_ns),
        )
    }

    fn describe(&self) -> String {
        format!(
            "spin (requests may ask for at most {:?})",
            std::time::Duration::from_nanos(self.config.max_service_ns)
        )
    }
}

/// The echo application (it has no options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EchoConfig;

impl App for EchoConfig {
    fn name(&self) -> &'static str {
        "echo"
    }

    fn service(&self, _ops: Vec<usize>) -> Result<Arc<dyn Service>, AppError> {
        Ok(Arc::new(EchoService))
    }
}

/// The echo service.
#[derive(Debug, Clone, Copy)]
pub struct EchoService;

/// Answers with the request's body.
#[derive(Debug, Clone, Copy)]
pub struct EchoHandler;

impl Handler for EchoHandler {
    #[inline]
    fn handle(&mut self, ctx: &mut RequestContext<'_>) -> Result<(), HandlerError> {
        ctx.response.extend_from_slice(ctx.body);
        Ok(())
    }

    /// Copies its body: no point, nothing held.
    fn fiber_safe(&self) -> bool {
        true
    }
}

impl Service for EchoService {
    fn app(&self) -> &'static str {
        "echo"
    }

    fn handler(&self, _worker: usize) -> Box<dyn Handler> {
        Box::new(EchoHandler)
    }

    fn describe(&self) -> String {
        "echo".into()
    }
}
