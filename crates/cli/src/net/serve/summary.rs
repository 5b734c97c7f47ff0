//! `psp serve`'s summary in words: the counters, the server-side latency
//! table, the measured utilization and the warnings, printed once the server
//! has stopped (`--json` prints the summary itself instead).

use psp_metrics::{ServerSummary, ServerTypeLatency};
use psp_net::ServerReport;

/// The measured utilization beside the one the declared service times imply.
fn utilization_line(s: &ServerSummary) -> String {
    let mut line = format!(
        "utilization over the server's {:.1} s: measured {:.1}%",
        s.wall_s,
        s.measured_utilization * 100.0
    );
    if let Some(d) = s.declared_utilization.filter(|d| *d > 0.0) {
        line.push_str(&format!(
            " | by the workload's declared service times {:.1}% (measured / declared {:.2}x)",
            d * 100.0,
            s.measured_utilization / d
        ));
    }
    if let Some(cpu) = s.cpu_us_per_request {
        line.push_str(&format!(" | process CPU {cpu:.2} us per request"));
    }
    if let Some(n) = s.syscalls.filter(|_| s.completed > 0) {
        line.push_str(&format!(
            " | network system calls {:.2} per request",
            n as f64 / s.completed as f64
        ));
    }
    if s.inline_worker {
        line.push_str(" | worker 0 ran on the dispatcher's thread");
    }
    if !s.threads.is_empty() {
        line.push_str(&format!(" | threads: {}", s.threads));
    }
    line
}

/// A warning naming the types whose measured mean service time is off from
/// the declared one by more than [`psp_runtime::SERVICE_OFF_FACTOR`] (types
/// with at least 100 completions). None over TCP: there the declared times
/// only seed the policy's profile, and its clients (redis-benchmark,
/// memcaslap, ...) take no `--load` computed from them, so `psp profile` and
/// `psp load --server-profile`, the two remedies, do not apply.
fn service_warning(types: &[ServerTypeLatency], over_tcp: bool) -> Option<String> {
    if over_tcp {
        return None;
    }
    let f = psp_runtime::SERVICE_OFF_FACTOR;
    let off: Vec<String> = types
        .iter()
        .filter_map(|t| {
            let r =
                psp_runtime::service_off(t.mean_service_us, t.declared_service_us?, t.completed)?;
            Some(format!("{} {r:.2}x", t.name))
        })
        .collect();
    (!off.is_empty()).then(|| {
        format!(
            "warning: measured mean service times are more than {f}x off from the workload's declared ones ({}): a load computed from the declared times (psp load --load) is not the load the server carried (see the measured utilization); measure the real times with `psp profile` and use the workload file it writes, or let `psp load --server-profile` read this server's measured ones from its --metrics",
            off.join(", ")
        )
    })
}

/// The AF_XDP datapath's account in one line.
fn xdp_line(x: &psp_metrics::XdpSummary) -> String {
    let dropped: Vec<String> = x
        .dropped
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    format!(
        "af_xdp: {} ({} queue(s), {} mode, XDP in the {}) | frames {} = {} with requests + {} lent for receive + {} free for transmit + {} in flight (leaked {}) | transmitted {} | malformed frames dropped {} ({}) | kernel: rx dropped {}, rx ring full {}, fill ring empty {}, tx invalid {}",
        x.interface,
        x.queues,
        if x.zero_copy { "zero-copy" } else { "copy" },
        x.attach_mode,
        x.frames_total,
        x.frames_with_tokens,
        x.frames_lent_for_rx,
        x.frames_free_for_tx,
        x.frames_in_tx,
        x.frames_leaked,
        x.transmitted,
        x.dropped_total(),
        if dropped.is_empty() {
            "none".into()
        } else {
            dropped.join(", ")
        },
        x.kernel_rx_dropped,
        x.kernel_rx_ring_full,
        x.kernel_fill_ring_empty,
        x.kernel_tx_invalid,
    )
}

/// `psp serve`'s summary of `s` as text on stdout (the warning about
/// declared service times on stderr); `report` adds the reclaim line.
pub(super) fn print(s: &ServerSummary, report: &ServerReport) {
    let os_drops = s
        .dropped_by_os
        .map_or("unknown".to_string(), |d| d.to_string());
    println!(
        "received {} | requests {} | admitted {} | completed {} (of which HANDLER_ERROR {}, BAD_REQUEST body {}) | stranded {} | OVERLOADED {} (+ {} shed unanswered, + {} past --max-wait) | BAD_REQUEST {} | UNKNOWN_TYPE {} | truncated (dropped) {} | send errors {} | dropped by the OS (receive buffer full) {}",
        s.received,
        s.requests,
        s.admitted,
        s.completed,
        s.handler_errors,
        s.bad_bodies,
        s.stranded,
        s.overloaded,
        s.shed_unanswered,
        s.expired,
        s.bad_request,
        s.unknown_type,
        s.truncated_dropped,
        s.reply_send_errors + s.worker_send_errors,
        os_drops,
    );
    println!("server-side latency (receive to handler completion):");
    println!(
        "{:<12} {:>10} {:>9} {:>13} {:>10} {:>10} {:>11} {:>9}",
        "type", "completed", "svc(us)", "declared(us)", "p50(us)", "p99(us)", "p99.9(us)", "shed"
    );
    for t in &s.server_side_latency {
        println!(
            "{:<12} {:>10} {:>9.2} {:>13} {:>10.2} {:>10.2} {:>11.2} {:>9}",
            t.name,
            t.completed,
            t.mean_service_us,
            t.declared_service_us
                .map_or("-".to_string(), |d| format!("{d:.2}")),
            t.p50_latency_us,
            t.p99_latency_us,
            t.p999_latency_us,
            t.shed,
        );
    }
    println!("{}", utilization_line(s));
    match &s.local {
        Some(l) => println!(
            "{}",
            crate::run::local_counters_line(l, s.preemptions, &s.steals_per_worker)
        ),
        None if s.preemptions > 0 => println!("preemptions {}", s.preemptions),
        None => {}
    }
    if let Some(r) = report
        .dispatcher
        .reclaims
        .as_ref()
        .filter(|r| r.ordered > 0)
    {
        println!("{}", r.line());
    }
    if let Some(w) = service_warning(&s.server_side_latency, s.tcp.is_some()) {
        eprintln!("{w}");
    }
    if let Some(r) = &s.reservation {
        println!("reservation: {r}");
    }
    if let Some(c) = &s.app_check {
        println!("{c}");
    }
    if let Some(x) = &s.xdp {
        println!("{}", xdp_line(x));
    }
    if let Some(t) = &s.tcp {
        println!(
            "tcp: connections accepted {} (refused at the limit {}) | closed: by the peer {}, after a bad request {}, idle {}, on an I/O error {}, by CLIENT KILL {} | replies to closed connections {} | paused for backpressure {} | blocking commands parked {} (timed out {}) | pub/sub messages {} (listeners closed past the output bound {})",
            t.accepted,
            t.refused,
            t.closed_by_peer,
            t.closed_on_error,
            t.closed_idle,
            t.closed_on_io_error,
            t.closed_by_kill,
            t.replies_to_closed,
            t.paused,
            t.parked,
            t.parked_timeouts,
            t.pubsub_messages,
            t.closed_on_pubsub_overflow
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn latency(name: &str, completed: u64, svc: f64, declared: Option<f64>) -> ServerTypeLatency {
        ServerTypeLatency {
            name: name.into(),
            completed,
            mean_service_us: svc,
            declared_service_us: declared,
            p50_latency_us: svc,
            p99_latency_us: svc,
            p999_latency_us: svc,
            shed: 0,
        }
    }

    /// The server summary names the types more than 1.5x off their declared
    /// mean service time (either way), once they have 100 completions.
    #[test]
    fn server_warning_names_types_off_their_declared_times() {
        let types = [
            latency("GET", 5000, 11.0, Some(1.5)),
            latency("SCAN", 5000, 1170.0, Some(635.0)),
            latency("PUT", 5000, 1.0, Some(1.2)),
            latency("FEW", 99, 100.0, Some(1.0)),
            latency("FAST", 5000, 1.0, Some(2.0)),
            latency("NONE", 5000, 1.0, None),
        ];
        // Over TCP neither remedy applies: no warning.
        assert!(service_warning(&types, true).is_none());
        let w = service_warning(&types, false).expect("a warning");
        assert!(w.contains("GET 7.33x") && w.contains("SCAN 1.84x"), "{w}");
        assert!(w.contains("FAST 0.50x") && w.contains("psp profile"), "{w}");
        assert!(
            !w.contains("PUT") && !w.contains("FEW") && !w.contains("NONE"),
            "{w}"
        );
        assert!(service_warning(&[latency("GET", 5000, 1.4, Some(1.0))], false).is_none());
    }
}
