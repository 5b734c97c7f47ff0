//! Each operation's service time, measured alone: one handler on the calling
//! thread serves generated requests of one type after another, with nothing
//! else running, and every handler call is timed. This is the service time a
//! scheduler sees (queueing excluded), on this machine, for a workload file's
//! `service` fields: experiments then use measured, not declared, times.

use std::time::Instant;

use hdrhistogram::Histogram;
use psp_runtime::{HandlerError, RequestContext};

use crate::{AppConfig, AppError};

/// Most requests timed per type.
pub const MAX_REQUESTS: u64 = 10_000_000;

/// One type's measured service time.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeProfile {
    /// The type's name.
    pub name: String,
    /// Requests timed (warm-up excluded).
    pub count: u64,
    /// Requests the handler refused or failed (not timed).
    pub errors: u64,
    /// Mean, in µs.
    pub mean_us: f64,
    /// Median, in µs.
    pub p50_us: f64,
    /// 99th percentile, in µs.
    pub p99_us: f64,
    /// 99.9th percentile, in µs.
    pub p999_us: f64,
    /// Largest, in µs.
    pub max_us: f64,
    /// Standard deviation of the logarithm of the service time (a lognormal's
    /// shape fitted to the samples).
    pub log_sigma: f64,
}

/// Measures each of `types` with `requests` timed requests (after
/// `requests / 10` untimed ones, at least one), serving `app`.
///
/// # Errors
/// `requests` out of range; the application's options or types; a database
/// that does not open.
pub fn profile(
    app: &AppConfig,
    types: &[String],
    requests: u64,
    seed: u64,
) -> Result<Vec<TypeProfile>, AppError> {
    crate::check_range("--requests", requests, 1, MAX_REQUESTS)?;
    let service = app.start(types)?;
    let mut encoder = app.encoder(types, seed)?;
    let mut handler = service.handler(0);
    let (mut body, mut response) = (Vec::with_capacity(4096), Vec::with_capacity(1 << 16));
    let mut out = Vec::with_capacity(types.len());
    for (t, name) in types.iter().enumerate() {
        let type_id = t as u16;
        let mut hist = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)
            .map_err(|e| AppError::Setup(e.to_string()))?;
        let (mut errors, mut log_sum, mut log_sq) = (0u64, 0.0f64, 0.0f64);
        let warmup = (requests / 10).max(1);
        for i in 0..warmup + requests {
            body.clear();
            response.clear();
            encoder.encode(type_id, 0, &mut body);
            let t0 = Instant::now();
            let r: Result<(), HandlerError> = handler.handle(&mut RequestContext {
                type_id,
                body: &body,
                response: &mut response,
                worker: 0,
            });
            let ns = (t0.elapsed().as_nanos() as u64).max(1);
            if i < warmup {
                continue;
            }
            if r.is_err() {
                errors += 1;
                continue;
            }
            hist.saturating_record(ns);
            let l = (ns as f64).ln();
            log_sum += l;
            log_sq += l * l;
        }
        let n = hist.len().max(1) as f64;
        let us = |v: u64| v as f64 / 1e3;
        out.push(TypeProfile {
            name: name.clone(),
            count: hist.len(),
            errors,
            mean_us: hist.mean() / 1e3,
            p50_us: us(hist.value_at_quantile(0.5)),
            p99_us: us(hist.value_at_quantile(0.99)),
            p999_us: us(hist.value_at_quantile(0.999)),
            max_us: us(hist.max()),
            log_sigma: (log_sq / n - (log_sum / n).powi(2)).max(0.0).sqrt(),
        });
    }
    Ok(out)
}
