//! `psp serve --metrics` end to end over loopback: a server with the exporter
//! on, requests of every outcome (ok, a body the application refuses, a
//! malformed datagram, an unknown type), then `/metrics` fetched with a real
//! HTTP client and read with a Prometheus-format parser. The scrape is polled
//! until the dispatcher's snapshot (published every 100 ms) catches up, with a
//! deadline of seconds: nothing depends on timing.

use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use prometheus_parse::{Sample, Scrape, Value};
use psp_apps::SpinConfig;
use psp_apps::spin::SpinService;
use psp_net::protocol::{self, Status};
use psp_net::{ClassifierKind, Server, ServerConfig, ServerError};
use psp_runtime::{RuntimeConfig, Spinner};
use psp_workload::Workload;

fn spinner() -> Spinner {
    static S: OnceLock<Spinner> = OnceLock::new();
    *S.get_or_init(|| Spinner::calibrate(Duration::from_millis(20)))
}

fn config(policy: &str, metrics: Option<SocketAddr>) -> ServerConfig {
    ServerConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        metrics,
        runtime: RuntimeConfig {
            workers: 1,
            queue_capacity: 64,
            drain_timeout: Duration::from_secs(5),
            raise_priority: false,
            ..RuntimeConfig::default()
        },
        policy: policy.parse().unwrap(),
        types: Workload::fixed(
            "metrics-test",
            &[("short", 20.0, 0.9), ("long", 200.0, 0.1)],
        )
        .type_infos(),
        classifier: ClassifierKind::Header,
        app_classifier: None,
        handlers: psp_apps::handler_factory(
            Arc::new(SpinService::with_spinner(
                spinner(),
                &SpinConfig {
                    max_service_ns: 1_000_000_000,
                },
            )),
            None,
        ),
        datapath: Default::default(),
        protocol: Default::default(),
    }
}

fn request(type_id: u16, id: u64, service_ns: u64) -> Vec<u8> {
    let mut out = Vec::new();
    protocol::encode_request(
        &mut out,
        type_id,
        id,
        &psp_runtime::handler::synthetic::encode(type_id, service_ns),
    );
    out
}

/// Sends `dgram` and returns the status of the reply (generous wait: CI
/// machines are slow and shared).
fn ask(sock: &UdpSocket, dgram: &[u8]) -> Status {
    sock.send(dgram).unwrap();
    let mut buf = [0u8; 4096];
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let n = sock.recv(&mut buf).expect("a reply");
    protocol::parse_response(&buf[..n]).expect("a response").1
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .into()
}

/// One scrape of `/metrics`, parsed.
fn scrape(agent: &ureq::Agent, addr: SocketAddr) -> Scrape {
    let resp = agent
        .get(format!("http://{addr}/metrics"))
        .call()
        .expect("GET /metrics");
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(content_type.contains("openmetrics-text"), "{content_type}");
    let body = resp.into_body().read_to_string().expect("a text body");
    assert!(
        body.ends_with("# EOF\n"),
        "an OpenMetrics exposition ends so"
    );
    Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).expect("the Prometheus format")
}

/// The sample `name` whose labels include `labels`.
fn find<'a>(s: &'a Scrape, name: &str, labels: &[(&str, &str)]) -> Option<&'a Sample> {
    s.samples
        .iter()
        .find(|x| x.metric == name && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
}

/// The value of a counter, gauge or untyped sample (0 when absent).
fn value(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    match find(s, name, labels).map(|x| &x.value) {
        Some(Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v)) => *v,
        Some(other) => panic!("{name}: not a number: {other:?}"),
        None => 0.0,
    }
}

/// Scrapes until `done` holds (the snapshot caught up), for at most 10 s.
fn scrape_until(agent: &ureq::Agent, addr: SocketAddr, done: impl Fn(&Scrape) -> bool) -> Scrape {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = scrape(agent, addr);
        if done(&s) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "the metrics never caught up: {:?}",
            s.samples
                .iter()
                .filter(|x| x.metric.starts_with("psp_net") || x.metric == "psp_requests_total")
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn metrics_count_what_was_sent_and_stop_with_the_server() {
    let srv = Server::start(config(
        "darc:samples=5",
        Some("127.0.0.1:0".parse().unwrap()),
    ))
    .expect("server starts");
    let maddr = srv.metrics_addr().expect("metrics are served");
    let agent = agent();

    // Before any request: every counter is there, at zero.
    let s = scrape(&agent, maddr);
    assert_eq!(value(&s, "psp_net_received_total", &[]), 0.0);
    assert!(find(&s, "psp_requests_arrived_total", &[("type", "short")]).is_some());

    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.connect(srv.local_addr()).unwrap();
    for id in 0..12 {
        assert_eq!(ask(&sock, &request(0, id, 2_000)), Status::Ok);
    }
    for id in 12..15 {
        assert_eq!(ask(&sock, &request(1, id, 20_000)), Status::Ok);
    }
    // Bodies the spin application cannot read: BAD_REQUEST from a worker.
    for id in 15..17 {
        let mut short_body = Vec::new();
        protocol::encode_request(&mut short_body, 1, id, b"abc");
        assert_eq!(ask(&sock, &short_body), Status::BadRequest);
    }
    // Unknown type (2 are registered), and a malformed datagram (version 9).
    assert_eq!(ask(&sock, &request(7, 17, 1_000)), Status::UnknownType);
    let mut v9 = request(0, 18, 1_000);
    v9[0] = 9;
    assert_eq!(ask(&sock, &v9), Status::BadRequest);

    let s = scrape_until(&agent, maddr, |s| {
        value(s, "psp_net_received_total", &[]) == 19.0
            && value(
                s,
                "psp_requests_total",
                &[("type", "long"), ("outcome", "bad_body")],
            ) == 2.0
            // Quantiles are read for one type per snapshot, in turn: wait
            // until both types' were read since their first requests.
            && ["short", "long"].iter().all(|t| {
                value(
                    s,
                    "psp_service_quantile_seconds",
                    &[("type", t), ("quantile", "0.999")],
                ) > 0.0
            })
    });
    let short = [("type", "short")];
    let long = [("type", "long")];
    let outcome = |t: &'static str, o: &'static str| {
        value(&s, "psp_requests_total", &[("type", t), ("outcome", o)])
    };
    assert_eq!(value(&s, "psp_requests_arrived_total", &short), 12.0);
    assert_eq!(value(&s, "psp_requests_arrived_total", &long), 5.0);
    assert_eq!(outcome("short", "ok"), 12.0);
    assert_eq!(outcome("long", "ok"), 3.0);
    for (t, o) in [
        ("short", "bad_body"),
        ("short", "handler_error"),
        ("long", "handler_error"),
        ("short", "unsent"),
        ("long", "shed"),
        ("long", "stranded"),
    ] {
        assert_eq!(outcome(t, o), 0.0, "{t} {o}");
    }
    assert_eq!(value(&s, "psp_net_unknown_type_total", &[]), 1.0);
    assert_eq!(value(&s, "psp_net_bad_request_total", &[]), 1.0);
    assert_eq!(value(&s, "psp_net_overloaded_total", &[]), 0.0);
    assert_eq!(value(&s, "psp_net_truncated_total", &[]), 0.0);
    assert!(
        find(&s, "psp_net_dropped_by_os_total", &[]).is_some(),
        "read from /proc on Linux"
    );
    assert_eq!(value(&s, "psp_in_flight_requests", &[]), 0.0);
    assert_eq!(value(&s, "psp_queued_requests", &[]), 0.0);
    assert_eq!(value(&s, "psp_queue_length", &short), 0.0);
    assert!(value(&s, "psp_uptime_seconds", &[]) > 0.0);
    assert!(value(&s, "psp_snapshots_total", &[]) >= 1.0);

    // Latency and service time: one sample per ok answer, every one in a bucket.
    for (labels, ok) in [(&short, 12.0), (&long, 3.0)] {
        for metric in ["psp_latency_seconds", "psp_service_seconds"] {
            assert_eq!(
                value(&s, &format!("{metric}_count"), labels),
                ok,
                "{metric}"
            );
            let Some(Value::Histogram(buckets)) = find(&s, metric, labels).map(|x| &x.value) else {
                panic!("{metric}: no histogram");
            };
            let inf = buckets
                .iter()
                .find(|b| b.less_than.is_infinite())
                .expect("+Inf");
            assert_eq!(inf.count, ok, "{metric}");
        }
        // A 2 µs or 20 µs request takes at least that long on the server.
        let p50 = value(
            &s,
            "psp_service_quantile_seconds",
            &[labels[0], ("quantile", "0.5")],
        );
        assert!(p50 >= 1.9e-6, "{p50}");
        let lat = value(
            &s,
            "psp_latency_quantile_seconds",
            &[labels[0], ("quantile", "0.999")],
        );
        assert!(lat >= p50, "{lat} < {p50}");
    }

    // DARC left its warm-up after 5 samples: a reservation for each type.
    assert_eq!(value(&s, "psp_reservation_in_force", &[]), 1.0);
    assert!(value(&s, "psp_reservation_updates_total", &[]) >= 1.0);
    for labels in [&short, &long] {
        assert!(
            find(&s, "psp_reserved_workers", labels).is_some(),
            "{labels:?}: no reservation gauge"
        );
    }

    // Only /metrics is served.
    match agent.get(format!("http://{maddr}/nope")).call() {
        Err(ureq::Error::StatusCode(404)) => {}
        other => panic!("/nope: {other:?}"),
    }

    // The scrape agrees with the server's own final report, and the listener
    // is gone once the server stopped.
    let report = srv.stop().expect("clean stop");
    assert_eq!(report.net.received, 19);
    assert_eq!(report.dispatcher.counts.bad_bodies, 2);
    assert_eq!(report.dispatcher.recorder.types()[0].count, 12);
    // (The exporter's accept thread closes the listener just after.)
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect_timeout(&maddr, Duration::from_secs(1)).is_ok() {
        assert!(
            Instant::now() < deadline,
            "the metrics listener outlived the server"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_metrics_address_in_use_is_an_error_before_serving() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    match Server::start(config("c-fcfs", Some(addr))) {
        Err(e @ ServerError::MetricsBind { .. }) => {
            assert!(e.to_string().contains(&addr.to_string()), "{e}");
        }
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("started on a used metrics address"),
    }
}

/// A client that connects and never sends, or sends a request and never
/// reads, does not hold the server's shutdown.
#[test]
fn a_stuck_metrics_client_does_not_hold_shutdown() {
    use std::io::Write;
    let srv = Server::start(config("c-fcfs", Some("127.0.0.1:0".parse().unwrap())))
        .expect("server starts");
    let maddr = srv.metrics_addr().unwrap();
    let _silent = TcpStream::connect(maddr).unwrap();
    let mut greedy = TcpStream::connect(maddr).unwrap();
    greedy
        .set_write_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    for _ in 0..2000 {
        // Pipelined scrapes, never read.
        let _ = write!(greedy, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    }
    std::thread::sleep(Duration::from_millis(200));
    // On a helper thread, so that a hang fails the test instead of hanging it.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(srv.stop().is_ok());
    });
    let stopped = rx.recv_timeout(Duration::from_secs(8));
    assert_eq!(
        stopped,
        Ok(true),
        "shutdown hangs on a stuck metrics client"
    );
    drop(greedy);
}

#[test]
fn without_metrics_there_is_no_listener() {
    let srv = Server::start(config("c-fcfs", None)).expect("server starts");
    assert_eq!(srv.metrics_addr(), None);
    srv.stop().expect("clean stop");
}
