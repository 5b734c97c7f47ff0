//! `psp load --server-profile METRICS_ADDR`: `--load` as a fraction of the
//! capacity the server measured rather than the one the workload declares.
//!
//! Before any load is sent, the client reads each type's service times from
//! the server's `/metrics` ([`psp_net::scrape`]); a type the server measured
//! over at least [`SERVICE_CHECK_MIN`] requests counts at its measured mean,
//! any other at its declared one. The rate then follows from those means by
//! the one rule `--load` always uses ([`crate::limits::offered_rate`]: workers
//! over the mix's mean service time), applied to [`ServerProfile::rate_workload`],
//! the workload with those means: what is sent is still the workload's own
//! mix and service times. Runs once, on the main thread.

use anyhow::{Context, Result, bail};
use psp_metrics::{MeanSource, RateMean};
use psp_net::scrape::{MeasuredService, fetch_service_times};
use psp_runtime::SERVICE_CHECK_MIN;
use psp_workload::{ServiceDist, Workload};

use super::parse_addr;

/// The means a `--load` becomes a rate by.
#[derive(Debug, Clone)]
pub(crate) struct ServerProfile {
    /// Where they came from (`http://ADDR/metrics`).
    pub url: String,
    /// The workload with each type's service at the mean used (fixed): what
    /// the rate is computed from, never what is sent.
    pub rate_workload: Workload,
    /// Each type's declared and measured means, and which one was used.
    pub means: Vec<RateMean>,
}

/// Reads the server's service times at `addr` (`--server-profile`'s value)
/// for `workload`: the profile, and the counters it came from (for
/// [`of_run`]).
///
/// # Errors
/// A bad address, an unreachable server, an answer that is not a psp serve's
/// Prometheus text, a server whose types are not `workload`'s, or a workload
/// whose phases set their own loads.
pub(crate) fn fetch(
    addr: &str,
    workload: &Workload,
) -> Result<(ServerProfile, Vec<MeasuredService>)> {
    let measured = fetch_raw(addr)?;
    Ok((of_counters(addr, workload, &measured)?, measured))
}

/// The profile of `workload` from counters read at `addr`.
fn of_counters(
    addr: &str,
    workload: &Workload,
    measured: &[MeasuredService],
) -> Result<ServerProfile> {
    let addr = parse_addr(addr, "--server-profile")?;
    ServerProfile::new(format!("http://{addr}/metrics"), workload, measured)
}

/// The server's raw service-time counters at `addr` (`--server-profile`'s
/// value).
///
/// # Errors
/// A bad address or a failed scrape.
fn fetch_raw(addr: &str) -> Result<Vec<MeasuredService>> {
    let addr = parse_addr(addr, "--server-profile")?;
    fetch_service_times(addr).context("--server-profile")
}

/// The profile of `workload` from what the server measured between two
/// scrapes (`--calibrate`): each type's requests and service time in the
/// interval alone.
///
/// # Errors
/// See [`fetch`]; also counters that went back (the server restarted).
pub(crate) fn of_run(
    addr: &str,
    workload: &Workload,
    before: &[MeasuredService],
    after: &[MeasuredService],
) -> Result<ServerProfile> {
    let delta = run_delta(before, after)
        .context("--calibrate: the server's counters went back (a restart?) during the run")?;
    of_counters(addr, workload, &delta)
}

/// Per type, `after` less `before` (the same types in the same order);
/// `None` when a counter went back or the types differ.
fn run_delta(
    before: &[MeasuredService],
    after: &[MeasuredService],
) -> Option<Vec<MeasuredService>> {
    if before.len() != after.len() {
        return None;
    }
    before
        .iter()
        .zip(after)
        .map(|(b, a)| {
            (a.name == b.name && a.count >= b.count).then(|| MeasuredService {
                name: a.name.clone(),
                count: a.count - b.count,
                sum_s: (a.sum_s - b.sum_s).max(0.0),
            })
        })
        .collect()
}

impl ServerProfile {
    /// The profile of `workload` from the server's `measured` service times
    /// (read at `url`).
    ///
    /// # Errors
    /// See [`fetch`].
    pub(crate) fn new(
        url: String,
        workload: &Workload,
        measured: &[MeasuredService],
    ) -> Result<Self> {
        let server: Vec<&str> = measured.iter().map(|m| m.name.as_str()).collect();
        let ours: Vec<&str> = workload.types.iter().map(|t| t.name.as_str()).collect();
        if server != ours {
            bail!(
                "--server-profile: the server at {url} serves the types [{}], workload '{}' has [{}]: load it with the workload it serves (a request's type is its position in the list)",
                server.join(", "),
                workload.name,
                ours.join(", ")
            );
        }
        if let Some(p) = workload
            .phases
            .iter()
            .find(|p| p.rps.is_none() && p.load.is_some())
        {
            bail!(
                "--server-profile: workload '{}' has a phase ('{}') whose load its file sets by the declared service times; give that phase an rps, or load the workload without --server-profile",
                workload.name,
                p.name
            );
        }
        let mut rate_workload = workload.clone();
        let means = rate_workload
            .types
            .iter_mut()
            .zip(measured)
            .map(|(t, m)| {
                let declared_us = t.service.mean_us();
                let server_us = m.mean_ns().map(|ns| ns / 1e3);
                let used = match server_us {
                    Some(us) if m.count >= SERVICE_CHECK_MIN && us > 0.0 => {
                        t.service = ServiceDist::Fixed { us };
                        MeanSource::Server
                    }
                    _ => MeanSource::Declared,
                };
                RateMean {
                    name: t.name.clone(),
                    declared_us,
                    server_us,
                    server_requests: m.count,
                    used,
                }
            })
            .collect();
        Ok(Self {
            url,
            rate_workload,
            means,
        })
    }

    /// The one stderr line: per type, the declared and the measured means and
    /// which was used; then the rate `rate_rps` on `workers`, beside the rate
    /// the declared means alone give for the same load.
    pub(crate) fn line(&self, workload: &Workload, rate_rps: f64, workers: usize) -> String {
        let types: Vec<String> = self
            .means
            .iter()
            .map(|m| {
                let server = m
                    .server_us
                    .map_or("none".to_string(), |us| format!("{us:.2} us"));
                let used = match m.used {
                    MeanSource::Server => "using the server's".to_string(),
                    MeanSource::Declared => {
                        format!(
                            "using the declared (server measured fewer than {SERVICE_CHECK_MIN})"
                        )
                    }
                };
                format!(
                    "{} declared {:.2} us, server-measured {server} over {} requests, {used}",
                    m.name, m.declared_us, m.server_requests
                )
            })
            .collect();
        let load = self.load(rate_rps, workers);
        format!(
            "server profile ({}): {} | load {:.3} of the capacity these means give = {} requests/s on {workers} worker(s) (by the declared means alone: {})",
            self.url,
            types.join("; "),
            load,
            crate::report::rate_text(rate_rps),
            crate::report::rate_text(load * workload.peak_rps(workers))
        )
    }

    /// The load `rate_rps` is on `workers`, by the means used.
    pub(crate) fn load(&self, rate_rps: f64, workers: usize) -> f64 {
        rate_rps / self.rate_workload.peak_rps(workers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(name: &str, count: u64, mean_us: f64) -> MeasuredService {
        MeasuredService {
            name: name.into(),
            count,
            sum_s: count as f64 * mean_us / 1e6,
        }
    }

    /// `--calibrate`'s means are the run's alone: the counters' differences.
    #[test]
    fn a_calibration_run_counts_only_its_own_requests() {
        let before = [
            measured("short", 1_000, 1.0),
            measured("long", 1_000, 100.0),
        ];
        // 1,000 more of each, short ones at 3 us and long ones at 200 us.
        let after = [
            MeasuredService {
                name: "short".into(),
                count: 2_000,
                sum_s: before[0].sum_s + 1_000.0 * 3e-6,
            },
            MeasuredService {
                name: "long".into(),
                count: 2_000,
                sum_s: before[1].sum_s + 1_000.0 * 200e-6,
            },
        ];
        let d = run_delta(&before, &after).unwrap();
        assert_eq!(d[0].count, 1_000);
        assert!((d[0].mean_ns().unwrap() - 3_000.0).abs() < 1e-6);
        assert!((d[1].mean_ns().unwrap() - 200_000.0).abs() < 1e-3);
        // A counter that went back (a restart), or other types: refused.
        assert!(run_delta(&after, &before).is_none());
        assert!(run_delta(&before, &after[..1]).is_none());
    }

    fn bimodal() -> Workload {
        Workload::fixed("bimodal", &[("short", 1.0, 0.5), ("long", 100.0, 0.5)])
    }

    /// A type measured over enough requests counts at its measured mean; one
    /// under the minimum (or never served) at its declared one; the rate is
    /// `--load`'s rule over the means used.
    #[test]
    fn measured_means_replace_declared_ones_past_the_minimum() {
        let w = bimodal();
        let p = ServerProfile::new(
            "http://s/metrics".into(),
            &w,
            &[measured("short", 500, 3.0), measured("long", 99, 300.0)],
        )
        .unwrap();
        assert_eq!(p.means[0].used, MeanSource::Server);
        assert!((p.means[0].server_us.unwrap() - 3.0).abs() < 1e-9);
        assert_eq!(p.means[1].used, MeanSource::Declared);
        assert_eq!(p.means[1].server_requests, 99);
        // 2 workers over a mean of 0.5 x 3 + 0.5 x 100 = 51.5 us.
        let rate = crate::limits::offered_rate(Some(0.5), None, &p.rate_workload, 2).unwrap();
        assert!((rate - 0.5 * 2.0 / 51.5e-6).abs() < 1e-6, "{rate}");
        assert!((p.load(rate, 2) - 0.5).abs() < 1e-12);
        // What is sent keeps the declared service times.
        assert_eq!(w.types[0].service, ServiceDist::Fixed { us: 1.0 });
        let line = p.line(&w, rate, 2);
        for needle in [
            "short declared 1.00 us, server-measured 3.00 us over 500 requests, using the server's",
            "long declared 100.00 us, server-measured 300.00 us over 99 requests, using the declared",
            "load 0.500",
            "19.42k requests/s on 2 worker(s)",
            "by the declared means alone: 19.80k",
        ] {
            assert!(line.contains(needle), "{needle}: {line}");
        }
        assert_eq!(line.lines().count(), 1);

        let never = ServerProfile::new(
            "http://s/metrics".into(),
            &w,
            &[measured("short", 0, 0.0), measured("long", 0, 0.0)],
        )
        .unwrap();
        assert!(
            never
                .means
                .iter()
                .all(|m| m.used == MeanSource::Declared && m.server_us.is_none())
        );
        assert_eq!(never.rate_workload, w);
        assert!(never.line(&w, 1.0, 1).contains("server-measured none"));
    }

    #[test]
    fn another_servers_types_are_refused() {
        let w = bimodal();
        for server in [
            vec![measured("req", 500, 1.0)],
            vec![measured("long", 500, 1.0), measured("short", 500, 1.0)],
            vec![
                measured("short", 500, 1.0),
                measured("long", 500, 1.0),
                measured("more", 500, 1.0),
            ],
        ] {
            let err = ServerProfile::new("http://s/metrics".into(), &w, &server)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("serves the types") && err.contains("[short, long]"),
                "{err}"
            );
        }
    }
}
