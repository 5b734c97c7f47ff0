//! Each operation's service time, measured alone: one handler on the calling
//! thread serves generated requests one at a time, with nothing else running,
//! and every handler call is timed. This is the service time a scheduler sees
//! (queueing excluded), on this machine, for a workload file's `service`
//! fields: experiments then use measured, not declared, times.
//!
//! By default the requests follow the workload's mix ([`ProfileOrder::Mix`]):
//! an application's state evolves with its requests, and a type run on its own
//! can leave the state no real mix produces (TPC-C's Delivery alone empties the
//! new-order table after 900 calls and then does nothing; NewOrder alone only
//! grows it). [`ProfileOrder::PerType`] runs each type in a block instead.

use std::time::Instant;

use hdrhistogram::Histogram;
use psp_runtime::{HandlerError, RequestContext};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::{AppConfig, AppError};

/// Most requests timed per type.
pub const MAX_REQUESTS: u64 = 10_000_000;

/// Checks a number of timed requests per type against its range.
///
/// # Errors
/// [`AppError::Range`] naming `--requests`.
pub fn check_requests(requests: u64) -> Result<u64, AppError> {
    crate::check_range("--requests", requests, 1, MAX_REQUESTS)
}

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

/// The order requests are served in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileOrder {
    /// Types drawn from the mix, request after request, until each has its
    /// timed requests.
    Mix,
    /// All of one type, then all of the next.
    PerType,
}

/// What is measured per type so far.
struct Tally {
    hist: Histogram<u64>,
    errors: u64,
    log_sum: f64,
    log_sq: f64,
    untimed: u64,
}

/// Measures each of `types` (name, ratio in the mix) with `requests` timed
/// requests (after `requests / 10` untimed ones, at least one), serving
/// `app`, in `order`.
///
/// # Errors
/// `requests` out of range; the application's options or types; a database
/// that does not open.
pub fn profile(
    app: &AppConfig,
    types: &[(String, f64)],
    requests: u64,
    order: ProfileOrder,
    seed: u64,
) -> Result<Vec<TypeProfile>, AppError> {
    check_requests(requests)?;
    let names: Vec<String> = types.iter().map(|(n, _)| n.clone()).collect();
    let service = app.start(&names)?;
    let mut encoder = app.encoder(&names, seed)?;
    let mut handler = service.handler(0);
    let (mut body, mut response) = (Vec::with_capacity(4096), Vec::with_capacity(1 << 16));
    let warmup = (requests / 10).max(1);
    let mut tallies = Vec::with_capacity(types.len());
    for _ in types {
        tallies.push(Tally {
            hist: Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)
                .map_err(|e| AppError::Setup(e.to_string()))?,
            errors: 0,
            log_sum: 0.0,
            log_sq: 0.0,
            untimed: 0,
        });
    }
    // `record: false` serves without recording (a type whose requests are all
    // timed, still drawn from the mix).
    let mut serve_one = |type_id: usize, record: bool, tallies: &mut [Tally]| {
        body.clear();
        response.clear();
        encoder.encode(type_id as u16, 0, &mut body);
        let t0 = Instant::now();
        let r: Result<(), HandlerError> = handler.handle(&mut RequestContext::new(
            type_id as u16,
            &body,
            &mut response,
            0,
        ));
        let ns = (t0.elapsed().as_nanos() as u64).max(1);
        let t = &mut tallies[type_id];
        if !record {
        } else if t.untimed < warmup {
            t.untimed += 1;
        } else if r.is_err() {
            t.errors += 1;
        } else {
            t.hist.saturating_record(ns);
            let l = (ns as f64).ln();
            t.log_sum += l;
            t.log_sq += l * l;
        }
    };
    let done = |t: &Tally| t.hist.len() + t.errors >= requests;
    match order {
        ProfileOrder::PerType => {
            for type_id in 0..types.len() {
                while !done(&tallies[type_id]) {
                    serve_one(type_id, true, &mut tallies);
                }
            }
        }
        ProfileOrder::Mix => {
            let total: f64 = types.iter().map(|(_, r)| r.max(0.0)).sum();
            let mut rng = SmallRng::seed_from_u64(seed ^ 0x9f0f);
            while !tallies.iter().all(done) {
                let mut x = rng.random::<f64>() * total;
                let mut pick = types.len() - 1;
                for (i, (_, r)) in types.iter().enumerate() {
                    if x < *r {
                        pick = i;
                        break;
                    }
                    x -= r;
                }
                // A type with all its requests timed still runs (the mix goes
                // on) but is no longer recorded.
                let record = !done(&tallies[pick]);
                serve_one(pick, record, &mut tallies);
            }
        }
    }
    Ok(types
        .iter()
        .zip(&tallies)
        .map(|((name, _), t)| {
            let n = t.hist.len().max(1) as f64;
            let us = |v: u64| v as f64 / 1e3;
            TypeProfile {
                name: name.clone(),
                count: t.hist.len(),
                errors: t.errors,
                mean_us: t.hist.mean() / 1e3,
                p50_us: us(t.hist.value_at_quantile(0.5)),
                p99_us: us(t.hist.value_at_quantile(0.99)),
                p999_us: us(t.hist.value_at_quantile(0.999)),
                max_us: us(t.hist.max()),
                log_sigma: (t.log_sq / n - (t.log_sum / n).powi(2)).max(0.0).sqrt(),
            }
        })
        .collect())
}
