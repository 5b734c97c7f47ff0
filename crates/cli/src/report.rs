//! Human-readable tables of points and sweeps.

use std::fmt::Write;

use psp_metrics::{Extra, PointResult, SweepResult, rate_unit};

/// A rate of requests per second as the tables write it (`266.9`, `51.2k`,
/// `5.10M`), for one-line messages.
pub fn rate_text(rps: f64) -> String {
    if rps.abs() < 1e4 {
        return format!("{rps:.1}");
    }
    let (div, unit) = rate_unit(rps.abs());
    format!("{:.2}{}", rps / div, &unit[..1])
}

/// Whether DARC ended `p` still in its warm-up (its profiling window never
/// filled: no reservation, c-FCFS throughout).
pub fn ended_warming_up(p: &PointResult) -> bool {
    match &p.extra {
        Extra::Sim(x) => x.warming_up,
        Extra::Run(x) => x.warming_up,
        Extra::Net(x) => x.server.summary().is_some_and(|s| s.warming_up),
    }
}

/// The warning for `points` of `policy` of which `warming` ended in DARC's
/// warm-up; `None` when none did.
pub fn warmup_warning(policy: &str, warming: usize, points: usize) -> Option<String> {
    if warming == 0 {
        return None;
    }
    let which = if points == 1 {
        "this run".to_string()
    } else {
        format!("{warming} of its {points} points")
    };
    let family = policy.split(':').next().unwrap_or(policy);
    Some(format!(
        "warning: {policy} made no reservation in {which}: its first profiling window never filled, so it scheduled as c-FCFS throughout; run longer (--duration) or give it a smaller window (e.g. --policy {family}:samples=1000)"
    ))
}

/// [`warmup_warning`] for one point.
pub fn point_warmup_warning(p: &PointResult) -> Option<String> {
    warmup_warning(&p.policy, usize::from(ended_warming_up(p)), 1)
}

/// [`warmup_warning`] for each policy of a sweep.
pub fn sweep_warmup_warnings(r: &SweepResult) -> Vec<String> {
    r.policies
        .iter()
        .filter_map(|s| {
            let warming = s.points.iter().filter(|p| ended_warming_up(p)).count();
            warmup_warning(&s.policy, warming, s.points.len())
        })
        .collect()
}

/// A point as a per-type table.
pub fn point_table(p: &PointResult) -> String {
    let (div, u) = rate_unit(p.offered_rps);
    let mut s = String::new();
    let clients = p.extra.sim().and_then(|x| x.clients.as_ref());
    let _ = writeln!(
        s,
        "{} | {} | {} workers | offered {:.3} {u} ({:.0}% {}) | achieved {:.3} {u}",
        p.workload,
        p.policy,
        p.workers,
        p.offered_rps / div,
        p.load * 100.0,
        if clients.is_some() {
            "busy"
        } else if p.extra.net().is_some_and(|x| x.rate_means.is_some()) {
            "of peak by --server-profile's means"
        } else {
            "of peak"
        },
        p.achieved_rps / div
    );
    if let Some(c) = clients {
        let per_type: Vec<String> = p
            .types
            .iter()
            .zip(&c.connections)
            .map(|(t, n)| format!("{} {n}", t.name))
            .collect();
        let _ = writeln!(
            s,
            "closed loop: connections {}, mean think {} us (offered: what they sent)",
            per_type.join(", "),
            c.think_us
        );
    }
    let _ = writeln!(
        s,
        "overall slowdown p50 {:.2}  p99 {:.2}  p99.9 {:.2}  ({} requests measured, {} dropped)",
        p.overall.p50_slowdown,
        p.overall.p99_slowdown,
        p.overall.p999_slowdown,
        p.overall.count,
        // A simulated point drops; a measured one sheds (one of the two is 0).
        p.dropped + p.shed
    );
    if let Some(x) = p.extra.sim().filter(|x| x.expired_total > 0) {
        let _ = writeln!(
            s,
            "dropped unrun past their type's --max-wait: {} (warm-up included)",
            x.expired_total
        );
    }
    let _ = writeln!(
        s,
        "{:<12} {:>10} {:>12} {:>9} {:>10} {:>10} {:>11} {:>11} {:>8}",
        "type",
        "count",
        "done/s",
        "svc(us)",
        "p50(us)",
        "p99(us)",
        "p99.9(us)",
        "p99.9 sd",
        "dropped"
    );
    for t in &p.types {
        let _ = writeln!(
            s,
            "{:<12} {:>10} {:>12.0} {:>9.2} {:>10.2} {:>10.2} {:>11.2} {:>11.2} {:>8}",
            t.name,
            t.count,
            t.throughput_rps,
            t.mean_service_us,
            t.p50_latency_us,
            t.p99_latency_us,
            t.p999_latency_us,
            t.p999_slowdown,
            t.dropped
        );
    }
    if let Some(net) = p.extra.net() {
        let per_type: Vec<String> = p
            .types
            .iter()
            .map(|t| {
                format!(
                    "{} {} OVERLOADED / {} timeouts / {} errors",
                    t.name, t.dropped, t.timeouts, t.errors
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "lost: {} (loss {:.4}%)",
            per_type.join(", "),
            p.loss_fraction * 100.0
        );
        let lag = &net.send_lag_us;
        let _ = writeln!(
            s,
            "client send lag behind schedule: p50 {:.1} us, p99 {:.1} us, max {:.1} us",
            lag.p50, lag.p99, lag.max
        );
    }
    if let Some(r) = p.extra.reservation() {
        let _ = writeln!(s, "reservation: {r}");
    }
    s
}

fn slo_text(r: &SweepResult) -> String {
    let mut parts = Vec::new();
    if let Some(b) = r.slo.per_type_p999_slowdown {
        parts.push(format!("p99.9 slowdown <= {b} per type"));
    }
    if let Some(b) = r.slo.overall_p999_slowdown {
        parts.push(format!("p99.9 slowdown <= {b} overall"));
    }
    parts.join(", ")
}

/// The default figure title of a sweep.
pub fn sweep_title(r: &SweepResult) -> String {
    format!(
        "{} ({}), {} workers, SLO: {}",
        r.workload,
        r.mode,
        r.workers,
        slo_text(r)
    )
}

/// A sweep as a summary of sustainable throughput plus the worst per-type p99.9
/// slowdown at each load.
pub fn sweep_table(r: &SweepResult) -> String {
    let (div, u) = rate_unit(r.peak_rps);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} on {} workers ({}), peak {:.3} {u}; SLO: {}, loss <= {}%",
        r.workload,
        r.workers,
        r.mode,
        r.peak_rps / div,
        slo_text(r),
        r.slo.max_loss_fraction * 100.0
    );
    let _ = writeln!(
        s,
        "\n{:<28} {:>22} {:>12}",
        "policy",
        format!("sustainable ({u})"),
        "% of peak"
    );
    for p in &r.policies {
        match p.max_rps_within_slo {
            Some(rps) => {
                let _ = writeln!(
                    s,
                    "{:<28} {:>22.3} {:>11.1}%",
                    p.policy,
                    rps / div,
                    rps / r.peak_rps * 100.0
                );
            }
            None => {
                let _ = writeln!(s, "{:<28} {:>22} {:>12}", p.policy, "none", "-");
            }
        }
    }
    let _ = writeln!(
        s,
        "\nworst per-type p99.9 slowdown by offered load (* = SLO met):"
    );
    let mut loads: Vec<f64> = r
        .policies
        .iter()
        .flat_map(|p| p.points.iter().map(|pt| pt.offered_rps))
        .collect();
    loads.sort_by(f64::total_cmp);
    loads.dedup_by(|a, b| (*a - *b).abs() < 1.0);
    let _ = write!(s, "{:>10}", u);
    for p in &r.policies {
        let _ = write!(s, " {:>16}", truncate(&p.policy, 16));
    }
    let _ = writeln!(s);
    for l in loads {
        let _ = write!(s, "{:>10.3}", l / div);
        for p in &r.policies {
            match p.points.iter().find(|pt| (pt.offered_rps - l).abs() < 1.0) {
                Some(pt) => {
                    let worst = pt
                        .types
                        .iter()
                        .filter(|t| t.count > 0)
                        .map(|t| t.p999_slowdown)
                        .fold(0.0, f64::max);
                    let mark = if r.slo.is_met_by(pt) { "*" } else { " " };
                    let _ = write!(s, " {:>15.1}{mark}", worst);
                }
                None => {
                    let _ = write!(s, " {:>16}", "");
                }
            }
        }
        let _ = writeln!(s);
    }
    s
}

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::rate_text;

    /// Rates read as people write them, never as `2.6691e2`.
    #[test]
    fn rates_are_written_plainly() {
        assert_eq!(rate_text(266.91), "266.9");
        assert_eq!(rate_text(51_234.0), "51.23k");
        assert_eq!(rate_text(5.1e6), "5.10M");
    }
}
