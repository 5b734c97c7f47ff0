//! The Prometheus exporter of `psp serve --metrics`: an HTTP listener on its own
//! thread that answers `GET /metrics` with the latest snapshot the dispatcher
//! published, in the text exposition format (its OpenMetrics 1.0 flavour, as
//! `prometheus-client`'s text encoder writes it); any other path is 404. The
//! metric names are listed in docs/metrics.md.
//!
//! It must never touch the dispatcher or slow it down: all it shares with the
//! server is the reading end of the snapshot channel (a triple buffer: neither
//! side waits for the other) and a duplicate of the UDP socket, through which it
//! reads the kernel's drop counter itself at scrape time.
//!
//! The HTTP side is `front/http.rs`'s (hyper, on a thread of its own, with
//! bounded heads, deadlines and connections); this module only encodes.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::time::Instant;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use psp_metrics::{DIGEST_BOUNDS_NS, DIGEST_QUANTILES, Digest};
use psp_runtime::{Loan, Snapshot, SnapshotReader};

use crate::server::NetCounters;

/// The exposition's content type (OpenMetrics text, which Prometheus reads).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

pub use super::http::{CLIENT_DEADLINE, MAX_CONNECTIONS, MAX_HEAD_BYTES, WRITE_STALL};
use super::http::{HttpServer, Page};

/// Reads the kernel's count of datagrams it dropped for the server's socket.
pub type DropProbe = Box<dyn Fn() -> Option<u64> + Send>;

/// What the exporter reads on each scrape.
pub struct MetricsSource {
    /// The latest published snapshot.
    pub reader: SnapshotReader,
    /// The request types' names (the `type` label), in type order.
    pub type_names: Vec<String>,
    /// When the server started (`psp_uptime_seconds`).
    pub started: Instant,
    /// The socket's drop counter, read at scrape time (never by the dispatcher:
    /// it reads a file).
    pub dropped_by_os: Option<DropProbe>,
    /// The server's workers (`psp_workers`; the utilization's capacity).
    pub workers: usize,
    /// Each type's declared mean service time in ns (the workload's), in type
    /// order (`psp_declared_service_seconds`).
    pub declared_service_ns: Vec<Option<f64>>,
    /// The policy, as its canonical name (`psp_server_info`'s `policy`
    /// label: a client's report names the policy it measured).
    pub policy: String,
}

/// A running exporter: stops (and closes its connections) when dropped.
pub struct Exporter {
    server: HttpServer,
}

impl Exporter {
    /// Binds the HTTP listener (port 0: any free port), so that a bad or used
    /// address is an error before anything starts.
    ///
    /// # Errors
    /// The address cannot be bound.
    pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
        super::http::bind(addr)
    }

    /// Serves `/metrics` from `source` on `listener`, on a thread of its own.
    ///
    /// # Errors
    /// The listener's address cannot be read or the thread cannot start.
    pub fn start(listener: TcpListener, mut source: MetricsSource) -> io::Result<Exporter> {
        let page = Page {
            path: "/metrics",
            content_type: CONTENT_TYPE,
            body: Box::new(move || scrape(&mut source)),
        };
        let server = HttpServer::start(listener, "psp-metrics", page, MAX_CONNECTIONS)?;
        Ok(Exporter { server })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter")
            .field("addr", &self.local_addr())
            .finish()
    }
}

/// The exposition of the latest snapshot.
fn scrape(source: &mut MetricsSource) -> String {
    let dropped_by_os = source.dropped_by_os.as_ref().and_then(|probe| probe());
    let uptime_s = source.started.elapsed().as_secs_f64();
    encode(
        source.reader.latest(),
        &source.type_names,
        uptime_s,
        dropped_by_os,
        &Capacity {
            workers: source.workers,
            declared_service_ns: source.declared_service_ns.clone(),
            policy: source.policy.clone(),
        },
    )
}

/// What the utilization gauges compare: the workers, and the service times
/// the workload declares.
#[derive(Debug, Clone, Default)]
pub struct Capacity {
    /// The server's workers.
    pub workers: usize,
    /// Each type's declared mean service time in ns, in type order.
    pub declared_service_ns: Vec<Option<f64>>,
    /// The policy's canonical name (`psp_server_info`).
    pub policy: String,
}

/// The text exposition of `snapshot` (`type_names` label its types).
pub fn encode(
    snapshot: &Snapshot,
    type_names: &[String],
    uptime_s: f64,
    dropped_by_os: Option<u64>,
    capacity: &Capacity,
) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(SnapshotCollector {
        snapshot: snapshot.clone(),
        type_names: type_names.to_vec(),
        uptime_s,
        dropped_by_os,
        capacity: capacity.clone(),
    }));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .expect("writing to a String cannot fail");
    out
}

/// One scrape's data, encoded by `prometheus-client`.
#[derive(Debug)]
struct SnapshotCollector {
    snapshot: Snapshot,
    type_names: Vec<String>,
    uptime_s: f64,
    dropped_by_os: Option<u64>,
    capacity: Capacity,
}

/// The `type` label of a type's series (and more labels after it).
fn by_type(name: &str) -> [(&'static str, &str); 1] {
    [("type", name)]
}

fn seconds(ns: u128) -> f64 {
    ns as f64 / 1e9
}

/// A digest as a histogram: non-cumulative bucket counts (the encoder sums
/// them), bounds in seconds.
fn buckets(d: &Digest) -> Vec<(f64, u64)> {
    DIGEST_BOUNDS_NS
        .iter()
        .map(|&b| b as f64 / 1e9)
        .chain([f64::INFINITY])
        .zip(d.buckets)
        .collect()
}

/// The labels of each quantile gauge series.
const QUANTILE_LABELS: [&str; DIGEST_QUANTILES.len()] = ["0.5", "0.99", "0.999"];

impl SnapshotCollector {
    fn types(&self) -> impl Iterator<Item = (&str, &psp_runtime::TypeSnapshot)> {
        self.type_names
            .iter()
            .map(String::as_str)
            .zip(&self.snapshot.types)
    }

    /// A counter family with one series per type.
    fn per_type_counter(
        &self,
        enc: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        value: impl Fn(&psp_runtime::TypeSnapshot) -> u64,
    ) -> std::fmt::Result {
        let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
        for (t, s) in self.types() {
            m.encode_family(&by_type(t))?
                .encode_counter::<NoLabelSet, _, u64>(&value(s), None)?;
        }
        Ok(())
    }

    /// A histogram family (one series per type) and the matching quantile
    /// gauges, in seconds.
    fn distribution(
        &self,
        enc: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        digest: impl Fn(&psp_runtime::TypeSnapshot) -> &Digest,
    ) -> std::fmt::Result {
        let mut m =
            enc.encode_descriptor(name, help, Some(&Unit::Seconds), MetricType::Histogram)?;
        for (t, s) in self.types() {
            let d = digest(s);
            m.encode_family(&by_type(t))?
                .encode_histogram::<NoLabelSet>(seconds(d.sum_ns), d.count, &buckets(d), None)?;
        }
        let q_name = format!("{name}_quantile");
        let q_help = format!(
            "{help}: values at quantiles 0.5, 0.99 and 0.999 since the start (within 0.1%; 0 before the first sample; read for one type per snapshot, in turn)"
        );
        let mut m =
            enc.encode_descriptor(&q_name, &q_help, Some(&Unit::Seconds), MetricType::Gauge)?;
        for (t, s) in self.types() {
            let d = digest(s);
            for (q, &v) in QUANTILE_LABELS.iter().zip(&d.quantiles_ns) {
                let labels = [("type", t), ("quantile", q)];
                m.encode_family(&labels)?
                    .encode_gauge(&seconds(u128::from(v)))?;
            }
        }
        Ok(())
    }
}

impl Collector for SnapshotCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        self.encode_requests(&mut enc)?;
        self.distribution(
            &mut enc,
            "psp_latency",
            "Server-side latency of ok requests (receive to the handler's return), by type",
            |t| &t.latency,
        )?;
        self.distribution(
            &mut enc,
            "psp_service",
            "Service time (handler time) of ok requests, by type",
            |t| &t.service,
        )?;
        self.encode_queues(&mut enc)?;
        self.encode_reservation(&mut enc)?;
        self.encode_workers(&mut enc)?;
        self.encode_net(&mut enc)?;
        self.encode_utilization(&mut enc)?;
        counter(
            &mut enc,
            "psp_snapshots",
            "Snapshots the dispatcher published (every 100 ms while it runs)",
            self.snapshot.seq,
        )?;
        enc.encode_descriptor(
            "psp_uptime",
            "Time since the server started",
            Some(&Unit::Seconds),
            MetricType::Gauge,
        )?
        .encode_gauge(&self.uptime_s)?;
        enc.encode_descriptor(
            "psp_server_info",
            "The server's policy (label policy), always 1",
            None,
            MetricType::Gauge,
        )?
        .encode_family(&[("policy", self.capacity.policy.as_str())])?
        .encode_gauge(&1i64)?;
        // Prometheus's standard process metric: with the completions'
        // rate, the server's CPU time per request.
        enc.encode_descriptor(
            "process_cpu",
            "User and system CPU time of every thread of the server's process",
            Some(&Unit::Seconds),
            MetricType::Counter,
        )?
        .encode_counter::<NoLabelSet, _, u64>(&super::server::process_cpu().as_secs_f64(), None)
    }
}

impl SnapshotCollector {
    /// Requests arrived and finished, by type and outcome.
    fn encode_requests(&self, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        self.per_type_counter(
            enc,
            "psp_requests_arrived",
            "Valid requests offered to the dispatcher, by type",
            |t| t.arrived,
        )?;
        let mut m = enc.encode_descriptor(
            "psp_requests",
            "Requests finished, by type and outcome: ok, handler_error (HANDLER_ERROR sent), bad_body (BAD_REQUEST from the application), unsent (the answer could not be sent), shed (OVERLOADED or refused unanswered), stranded (left at the drain deadline)",
            None,
            MetricType::Counter,
        )?;
        for (t, ts) in self.types() {
            for (outcome, v) in [
                ("ok", ts.ok),
                ("handler_error", ts.handler_errors),
                ("bad_body", ts.bad_bodies),
                ("unsent", ts.unsent),
                ("shed", ts.shed),
                ("stranded", ts.stranded),
            ] {
                let labels = [("type", t), ("outcome", outcome)];
                m.encode_family(&labels)?
                    .encode_counter::<NoLabelSet, _, u64>(&v, None)?;
            }
        }
        Ok(())
    }

    /// What waits: by type (policies with a queue per type), in all, and
    /// admitted and not finished.
    fn encode_queues(&self, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        let s = &self.snapshot;
        let mut m = enc.encode_descriptor(
            "psp_queue_length",
            "Requests waiting in the policy's queue of each type (policies with a queue per type)",
            None,
            MetricType::Gauge,
        )?;
        for (t, ts) in self.types() {
            if let Some(q) = ts.queued {
                m.encode_family(&by_type(t))?.encode_gauge(&q)?;
            }
        }
        gauge(
            enc,
            "psp_queued_requests",
            "Requests waiting in the policy's queues, all types",
            s.queued,
        )?;
        gauge(
            enc,
            "psp_in_flight_requests",
            "Requests admitted and not finished (queued or running)",
            s.in_flight,
        )
    }

    /// The reservation in force and its updates.
    fn encode_reservation(&self, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        let s = &self.snapshot;
        gauge(
            enc,
            "psp_reservation_in_force",
            "1 when a reservation is in force (DARC after its first profiling window), else 0",
            u64::from(s.has_reservation),
        )?;
        let mut m = enc.encode_descriptor(
            "psp_reserved_workers",
            "Workers reserved for the type's group by the reservation in force (absent without one)",
            None,
            MetricType::Gauge,
        )?;
        for (t, ts) in self.types() {
            if let Some(w) = ts.reserved_workers {
                m.encode_family(&by_type(t))?.encode_gauge(&w)?;
            }
        }
        counter(
            enc,
            "psp_reservation_updates",
            "Reservation updates applied (DARC), the first included",
            s.reservation_updates,
        )
    }

    /// Each worker: what it runs, what it is reserved for, whether it runs
    /// another group's request, and the preemptions on it.
    fn encode_workers(&self, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        let s = &self.snapshot;
        let ids: Vec<String> = (0..s.workers.len()).map(|w| w.to_string()).collect();
        let workers = || ids.iter().map(String::as_str).zip(&s.workers);
        if s.running_known {
            let mut m = enc.encode_descriptor(
                "psp_worker_busy",
                "1 when the worker runs a request, else 0 (absent where the dispatcher does not see it: worker-queue policies)",
                None,
                MetricType::Gauge,
            )?;
            for (w, ws) in workers() {
                m.encode_family(&[("worker", w)])?
                    .encode_gauge(&u64::from(ws.running.is_some()))?;
            }
            let mut m = enc.encode_descriptor(
                "psp_worker_running",
                "1 for the type of the request the worker runs now (absent when idle)",
                None,
                MetricType::Gauge,
            )?;
            for (w, ws) in workers() {
                if let Some(name) = ws.running.and_then(|t| self.type_names.get(t as usize)) {
                    m.encode_family(&[("worker", w), ("type", name.as_str())])?
                        .encode_gauge(&1u64)?;
                }
            }
        }
        if s.has_reservation {
            self.encode_worker_reservation(enc, &ids)?;
        }
        let mut m = enc.encode_descriptor(
            "psp_worker_preemptions",
            "Requests preempted on the worker and handed back to the policy",
            None,
            MetricType::Counter,
        )?;
        for (w, ws) in workers() {
            m.encode_family(&[("worker", w)])?
                .encode_counter::<NoLabelSet, _, u64>(&ws.preemptions, None)?;
        }
        counter(
            enc,
            "psp_preemptions",
            "Requests preempted and handed back to the policy, all workers",
            s.preemptions(),
        )
    }

    /// Each worker against the reservation in force: the types it is
    /// reserved for, the spillway, and loans (`ids`: the workers' labels).
    fn encode_worker_reservation(
        &self,
        enc: &mut DescriptorEncoder,
        ids: &[String],
    ) -> std::fmt::Result {
        let s = &self.snapshot;
        let mut m = enc.encode_descriptor(
            "psp_worker_reserved_for",
            "1 for each type of the group the reservation in force reserves the worker for",
            None,
            MetricType::Gauge,
        )?;
        for (w, ws) in ids.iter().zip(&s.workers) {
            for (t, ts) in self.types() {
                if ws.reserved_group.is_some() && ts.group == ws.reserved_group {
                    m.encode_family(&[("worker", w.as_str()), ("type", t)])?
                        .encode_gauge(&1u64)?;
                }
            }
        }
        let mut m = enc.encode_descriptor(
            "psp_worker_spillway",
            "1 when the worker is one of the reservation's spillway workers, else 0",
            None,
            MetricType::Gauge,
        )?;
        for (w, ws) in ids.iter().zip(&s.workers) {
            m.encode_family(&[("worker", w.as_str())])?
                .encode_gauge(&u64::from(ws.spillway))?;
        }
        if !s.running_known {
            return Ok(());
        }
        for (name, help, loan) in [
            (
                "psp_worker_stealing",
                "1 when the worker, reserved for a longer group, runs a shorter group's request (work stealing), else 0",
                Loan::Stealing,
            ),
            (
                "psp_worker_lent",
                "1 when the worker, reserved for a shorter group, runs a longer group's request (lent: darc-lend), else 0",
                Loan::Lent,
            ),
        ] {
            let mut m = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (w, ws) in ids.iter().zip(&s.workers) {
                m.encode_family(&[("worker", w.as_str())])?
                    .encode_gauge(&u64::from(ws.loan == loan))?;
            }
        }
        Ok(())
    }

    /// The front end's counters, and the kernel's drops.
    fn encode_net(&self, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        let net = NetCounters::from_snapshot(&self.snapshot.front);
        for (name, help, v) in [
            ("psp_net_received", "Datagrams received", net.received),
            (
                "psp_net_truncated",
                "Datagrams shorter than a header, dropped without a reply",
                net.truncated,
            ),
            (
                "psp_net_bad_request",
                "Datagrams answered BAD_REQUEST by the dispatcher (malformed)",
                net.bad_request,
            ),
            (
                "psp_net_unknown_type",
                "Requests answered UNKNOWN_TYPE",
                net.unknown_type,
            ),
            (
                "psp_net_overloaded",
                "Requests answered OVERLOADED",
                net.overloaded,
            ),
            (
                "psp_net_shed_unanswered",
                "Requests shed without a reply (past the OVERLOADED reply budget)",
                net.shed_unanswered,
            ),
            (
                "psp_net_reply_send_errors",
                "Error replies the OS refused to send",
                net.reply_send_errors,
            ),
            (
                "psp_net_receive_errors",
                "Receive calls that failed",
                net.receive_errors,
            ),
            (
                "psp_net_malformed_frames",
                "Link-layer frames dropped as malformed (AF_XDP: truncated headers, bad lengths or checksums, fragments)",
                net.malformed_frames,
            ),
        ] {
            counter(enc, name, help, v)?;
        }
        if let Some(n) = net.syscalls {
            counter(
                enc,
                "psp_net_syscalls",
                "System calls of the network path, counted at each call: the network thread's receives, sends, waits and accepts, the workers' sends and their wake-ups of the network thread (not the parks of idle workers); absent where not counted (AF_XDP)",
                n,
            )?;
        }
        if let Some(d) = self.dropped_by_os {
            counter(
                enc,
                "psp_net_dropped_by_os",
                "Datagrams the OS dropped before the server read them (receive buffer full)",
                d,
            )?;
        }
        Ok(())
    }
}

impl SnapshotCollector {
    /// The workers, the declared service times, and the utilization measured
    /// and implied by the declared times since the start (both over the
    /// workers' capacity since then, so their ratio is how far the declared
    /// times are off; `rate()` of `psp_service_seconds_sum` over `psp_workers`
    /// is the measured utilization over any window).
    fn encode_utilization(&self, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        let c = &self.capacity;
        gauge(enc, "psp_workers", "Application workers", c.workers as u64)?;
        let mut m = enc.encode_descriptor(
            "psp_declared_service",
            "Mean service time the workload declares for the type (what --load is computed from)",
            Some(&Unit::Seconds),
            MetricType::Gauge,
        )?;
        for ((t, _), d) in self.types().zip(&c.declared_service_ns) {
            if let Some(d) = d {
                m.encode_family(&by_type(t))?.encode_gauge(&(d / 1e9))?;
            }
        }
        let capacity_s = (c.workers as f64 * self.uptime_s).max(1e-9);
        // Every completed request, whatever its outcome, as the summary
        // counts them: a failed handler kept its worker busy too.
        let busy_s: f64 = self
            .snapshot
            .types
            .iter()
            .map(|t| seconds(u128::from(t.busy_ns)))
            .sum();
        let declared_s: f64 = self
            .snapshot
            .types
            .iter()
            .zip(&c.declared_service_ns)
            .map(|(t, d)| t.completed() as f64 * d.unwrap_or(0.0) / 1e9)
            .sum();
        enc.encode_descriptor(
            "psp_utilization",
            "Measured utilization since the start: service time of every completed request over workers x uptime",
            None,
            MetricType::Gauge,
        )?
        .encode_gauge(&(busy_s / capacity_s))?;
        enc.encode_descriptor(
            "psp_declared_utilization",
            "Utilization the workload's declared service times imply for the same completed requests, over workers x uptime",
            None,
            MetricType::Gauge,
        )?
        .encode_gauge(&(declared_s / capacity_s))?;
        Ok(())
    }
}

fn gauge(enc: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> std::fmt::Result {
    enc.encode_descriptor(name, help, None, MetricType::Gauge)?
        .encode_gauge(&v)
}

fn counter(enc: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> std::fmt::Result {
    enc.encode_descriptor(name, help, None, MetricType::Counter)?
        .encode_counter::<NoLabelSet, _, u64>(&v, None)
}
