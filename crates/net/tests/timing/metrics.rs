//! `psp serve --metrics` end to end over loopback: a server with the exporter
//! on, requests of every outcome (ok, a body the application refuses, a
//! malformed datagram, an unknown type), then `/metrics` fetched with a real
//! HTTP client and read with a Prometheus-format parser. The scrape is polled
//! until the dispatcher's snapshot (published every 100 ms) catches up, with a
//! deadline of seconds: nothing depends on timing.
//!
//! Then `/metrics` as an HTTP server under clients that are many, slow,
//! pipelined or hostile, spoken to over loopback with plain sockets from one
//! or two threads; and the Grafana dashboard and Prometheus examples in
//! deploy/ checked against the names a live scrape exports.
//!
//! The tests run one at a time (`common::one_at_a_time`), in the binary of
//! tests that take turns: the memory test reads the process's own resident
//! size, which other tests' servers would move.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::{Arc, OnceLock};

use crate::common::one_at_a_time;
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
    let _g = one_at_a_time();
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
    // The process's CPU time, Prometheus's standard name.
    assert!(value(&s, "process_cpu_seconds_total", &[]) > 0.0);

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
    let _g = one_at_a_time();
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
    let _g = one_at_a_time();
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
    let _g = one_at_a_time();
    let srv = Server::start(config("c-fcfs", None)).expect("server starts");
    assert_eq!(srv.metrics_addr(), None);
    srv.stop().expect("clean stop");
}

/// A server with `/metrics` on any free port (c-FCFS).
fn metrics_server() -> Server {
    Server::start(config("c-fcfs", Some("127.0.0.1:0".parse().unwrap()))).expect("server starts")
}

/// A connection with generous deadlines.
fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

const GET: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: psp\r\n\r\n";

/// One answer read off a connection.
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: String,
}

/// Reads one answer from `s` (its head, then `Content-Length` bytes of body
/// unless it answers a `HEAD`), leaving whatever follows in `pending`.
fn read_answer(s: &mut TcpStream, pending: &mut Vec<u8>, head_request: bool) -> Answer {
    let mut buf = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut buf).expect("an answer");
        assert!(n > 0, "closed before an answer: {pending:?}");
        pending.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&pending[..head_end]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {head:?}"));
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or_else(|| panic!("a content length: {head:?}"));
    let length = if head_request { 0 } else { length };
    while pending.len() < head_end + length {
        let n = s.read(&mut buf).expect("the body");
        assert!(n > 0, "closed inside a body");
        pending.extend_from_slice(&buf[..n]);
    }
    let body = String::from_utf8_lossy(&pending[head_end..head_end + length]).into_owned();
    pending.drain(..head_end + length);
    Answer { status, head, body }
}

/// A whole scrape: 200 and the exposition up to its end.
fn assert_full_scrape(a: &Answer) {
    assert_eq!(a.status, 200, "{a:?}");
    assert!(a.head.contains("openmetrics-text"), "{}", a.head);
    assert!(a.body.contains("psp_uptime_seconds"), "{}", a.body);
    assert!(
        a.body.ends_with("# EOF\n"),
        "cut short: {} bytes",
        a.body.len()
    );
}

/// One scrape on a connection of its own.
fn raw_scrape(addr: SocketAddr) -> Answer {
    let mut s = connect(addr);
    s.write_all(GET).unwrap();
    read_answer(&mut s, &mut Vec::new(), false)
}

/// 200 clients connected and asking at once (from one thread: all asked
/// before any answer is read) are all answered in full.
#[test]
fn two_hundred_concurrent_scrapes_are_all_answered() {
    let _g = one_at_a_time();
    let srv = metrics_server();
    let addr = srv.metrics_addr().unwrap();
    let mut clients: Vec<TcpStream> = (0..200).map(|_| connect(addr)).collect();
    for c in &mut clients {
        c.write_all(GET).unwrap();
    }
    for c in &mut clients {
        assert_full_scrape(&read_answer(c, &mut Vec::new(), false));
    }
    srv.stop().expect("clean stop");
}

/// 20 clients that dribble a request head a byte a second hold no scrape
/// back, and are closed once their head's deadline passed.
#[test]
fn slow_clients_do_not_starve_a_scrape_and_are_closed() {
    let _g = one_at_a_time();
    let srv = metrics_server();
    let addr = srv.metrics_addr().unwrap();
    let mut slow: Vec<TcpStream> = (0..20).map(|_| connect(addr)).collect();
    for s in &mut slow {
        s.write_all(b"G").unwrap();
        s.set_nonblocking(true).unwrap();
    }
    // The slow clients are connected and served (their heads pending) while
    // this scrape comes.
    assert_full_scrape(&raw_scrape(addr));
    let mut open = vec![true; slow.len()];
    let deadline = Instant::now() + Duration::from_secs(60);
    while open.iter().any(|&o| o) {
        assert!(
            Instant::now() < deadline,
            "slow clients still open after 60 s: {}",
            open.iter().filter(|&&o| o).count()
        );
        std::thread::sleep(Duration::from_secs(1));
        for (s, o) in slow.iter_mut().zip(&mut open) {
            let mut buf = [0u8; 256];
            // Closed: end of stream, or an error other than "nothing yet".
            *o = match s.read(&mut buf) {
                Ok(0) => false,
                Ok(_) => true,
                Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
            } && s.write(b"E").is_ok();
        }
        // Scrapes are answered all along.
        assert_full_scrape(&raw_scrape(addr));
    }
    srv.stop().expect("clean stop");
}

/// Requests sent back to back on one connection, before any answer, are
/// answered in their order.
#[test]
fn pipelined_requests_are_answered_in_order() {
    let _g = one_at_a_time();
    let srv = metrics_server();
    let mut s = connect(srv.metrics_addr().unwrap());
    let mut three = GET.to_vec();
    three.extend_from_slice(b"GET /nope HTTP/1.1\r\nHost: psp\r\n\r\n");
    three.extend_from_slice(GET);
    s.write_all(&three).unwrap();
    let mut pending = Vec::new();
    assert_full_scrape(&read_answer(&mut s, &mut pending, false));
    assert_eq!(read_answer(&mut s, &mut pending, false).status, 404);
    assert_full_scrape(&read_answer(&mut s, &mut pending, false));
    assert!(pending.is_empty(), "{pending:?}");
    srv.stop().expect("clean stop");
}

/// One connection serves request after request (keep-alive), a `HEAD`
/// among them (its answer has a length and no body).
#[test]
fn one_connection_serves_request_after_request() {
    let _g = one_at_a_time();
    let srv = metrics_server();
    let mut s = connect(srv.metrics_addr().unwrap());
    let mut pending = Vec::new();
    for _ in 0..2 {
        s.write_all(GET).unwrap();
        assert_full_scrape(&read_answer(&mut s, &mut pending, false));
    }
    s.write_all(b"HEAD /metrics HTTP/1.1\r\nHost: psp\r\n\r\n")
        .unwrap();
    let head = read_answer(&mut s, &mut pending, true);
    assert_eq!(head.status, 200);
    s.write_all(GET).unwrap();
    assert_full_scrape(&read_answer(&mut s, &mut pending, false));
    assert!(pending.is_empty(), "a HEAD answer carried a body");
    srv.stop().expect("clean stop");
}

/// Another path is 404, another method on `/metrics` 405 (naming the
/// allowed ones), a request line that is not HTTP 400; a query string is
/// ignored; a POST's large body is never read (the connection closes).
#[test]
fn other_paths_and_methods_are_refused() {
    let _g = one_at_a_time();
    let srv = metrics_server();
    let addr = srv.metrics_addr().unwrap();
    let ask = |req: &[u8]| {
        let mut s = connect(addr);
        s.write_all(req).unwrap();
        read_answer(&mut s, &mut Vec::new(), false)
    };
    assert_eq!(ask(b"GET / HTTP/1.1\r\nHost: psp\r\n\r\n").status, 404);
    assert_eq!(ask(b"GET /metricsx HTTP/1.1\r\n\r\n").status, 404);
    assert_full_scrape(&ask(b"GET /metrics?name[]=psp_uptime HTTP/1.1\r\n\r\n"));
    for method in ["POST", "PUT", "DELETE", "OPTIONS"] {
        let a = ask(format!("{method} /metrics HTTP/1.1\r\nHost: psp\r\n\r\n").as_bytes());
        assert_eq!(a.status, 405, "{method}: {a:?}");
        assert!(
            a.head.to_ascii_lowercase().contains("allow: get, head"),
            "{a:?}"
        );
    }
    assert_eq!(ask(b"nonsense\r\n\r\n").status, 400);

    let mut s = connect(addr);
    s.write_all(b"POST /metrics HTTP/1.1\r\nHost: psp\r\nContent-Length: 100000000\r\n\r\n")
        .unwrap();
    let chunk = vec![b'b'; 64 * 1024];
    // What the kernel buffers goes in; the server reads no more than a bound.
    let mut sent = 0;
    while sent < 16 << 20 && s.write_all(&chunk).is_ok() {
        sent += chunk.len();
    }
    let mut pending = Vec::new();
    assert_eq!(read_answer(&mut s, &mut pending, false).status, 405);
    let mut rest = Vec::new();
    // The connection ends (not kept alive for the body's rest).
    let _ = s.read_to_end(&mut rest);
    srv.stop().expect("clean stop");
}

/// A kB figure of /proc/self/status (`VmRSS`, `VmHWM`).
fn status_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/self/status"))
}

/// A 32 MB header line is refused (431, or the connection closed) after
/// the server read a bounded part of it: the process's resident size does
/// not grow by more than a few MB, and scrapes go on.
#[test]
fn a_32_mb_header_costs_nothing() {
    let _g = one_at_a_time();
    let srv = metrics_server();
    let addr = srv.metrics_addr().unwrap();
    assert_full_scrape(&raw_scrape(addr));
    // The peak since now (where the kernel lets it be reset: Linux 4.0+).
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let rss_before = status_kb("VmRSS");
    let started = Instant::now();

    let mut s = connect(addr);
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: psp\r\nX-Big: ")
        .unwrap();
    let chunk = vec![b'a'; 64 * 1024];
    let mut sent = 0;
    while sent < 32 << 20 {
        if s.write_all(&chunk).is_err() {
            break;
        }
        sent += chunk.len();
    }
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 431 "),
        "{answer}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "refused after {:?}",
        started.elapsed()
    );
    drop(s);
    assert_full_scrape(&raw_scrape(addr));

    let grown_kb = status_kb("VmRSS").saturating_sub(rss_before);
    let peak_kb = if reset {
        status_kb("VmHWM").saturating_sub(rss_before)
    } else {
        grown_kb
    };
    eprintln!("32 MB header: {sent} bytes sent, resident +{grown_kb} kB, peak +{peak_kb} kB");
    assert!(grown_kb < 8 * 1024, "resident size grew {grown_kb} kB");
    assert!(peak_kb < 8 * 1024, "peak resident size grew {peak_kb} kB");
    srv.stop().expect("clean stop");
}

/// What a live scrape exports: sample names (a histogram's `_bucket`,
/// `_sum` and `_count`, a counter's `_total`: every family is declared even
/// without series) and label names, with the labels Prometheus adds.
fn exported(text: &str) -> (HashSet<String>, HashSet<String>) {
    let mut names = HashSet::new();
    let mut labels: HashSet<String> = ["job", "instance"].map(String::from).into();
    for line in text.lines() {
        if let Some(decl) = line.strip_prefix("# TYPE ") {
            let (family, kind) = decl.split_once(' ').expect("# TYPE name kind");
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                _ => &[""],
            };
            names.extend(suffixes.iter().map(|s| format!("{family}{s}")));
        } else if !line.starts_with('#') && !line.is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            names.insert(line[..end].to_string());
            if let Some(set) = line[end..].strip_prefix('{') {
                for pair in set.split(',') {
                    if let Some((k, _)) = pair.split_once('=') {
                        labels.insert(k.trim().to_string());
                    }
                }
            }
        }
    }
    (names, labels)
}

/// One token of a PromQL expression.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str,
    Num,
    Var,
    Punct(char),
}

/// The tokens of `expr` (Grafana's `$variables` as [`Tok::Var`]).
fn lex(expr: &str) -> Result<Vec<Tok>, String> {
    let b = expr.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let word = |i: usize, ok: &dyn Fn(u8) -> bool| {
        let mut j = i;
        while j < b.len() && ok(b[j]) {
            j += 1;
        }
        j
    };
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_alphabetic() || c == b'_' || c == b':' {
            let j = word(i, &|c| c.is_ascii_alphanumeric() || c == b'_' || c == b':');
            out.push(Tok::Ident(expr[i..j].to_string()));
            i = j;
        } else if c.is_ascii_digit() || c == b'.' {
            i = word(i, &|c| c.is_ascii_alphanumeric() || c == b'.');
            out.push(Tok::Num);
        } else if c == b'$' {
            i = word(i + 1, &|c| c.is_ascii_alphanumeric() || c == b'_');
            out.push(Tok::Var);
        } else if c == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            if j >= b.len() {
                return Err(format!("unclosed string in {expr:?}"));
            }
            out.push(Tok::Str);
            i = j + 1;
        } else if b"(){}[],=!~<>+-*/^%".contains(&c) {
            out.push(Tok::Punct(c as char));
            i += 1;
        } else {
            return Err(format!("unexpected {:?} in {expr:?}", c as char));
        }
    }
    Ok(out)
}

/// PromQL's functions and aggregations that the examples may call.
const FUNCTIONS: &[&str] = &[
    "rate",
    "irate",
    "increase",
    "delta",
    "sum",
    "max",
    "min",
    "avg",
    "count",
    "topk",
    "histogram_quantile",
    "clamp_min",
    "abs",
    "time",
    "vector",
];
/// Words that are neither functions nor metrics.
const KEYWORDS: &[&str] = &["and", "or", "unless", "bool", "offset"];
/// Words followed by a list of label names.
const GROUPINGS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Checks one PromQL expression: brackets balance, calls are to known
/// functions, label names are exported ones, and every other name is an
/// exported metric (collected into `used`).
fn check_promql(
    expr: &str,
    names: &HashSet<String>,
    labels: &HashSet<String>,
    used: &mut HashSet<String>,
) -> Result<(), String> {
    let toks = lex(expr)?;
    let mut open = Vec::new();
    for t in &toks {
        match t {
            Tok::Punct(c @ ('(' | '[' | '{')) => open.push(*c),
            Tok::Punct(c @ (')' | ']' | '}')) => {
                let want = match c {
                    ')' => '(',
                    ']' => '[',
                    _ => '{',
                };
                if open.pop() != Some(want) {
                    return Err(format!("unbalanced {c:?} in {expr:?}"));
                }
            }
            _ => {}
        }
    }
    if !open.is_empty() {
        return Err(format!("unclosed {open:?} in {expr:?}"));
    }
    let mut i = 0;
    while i < toks.len() {
        let Tok::Ident(w) = &toks[i] else {
            i += 1;
            continue;
        };
        let next = toks.get(i + 1);
        if GROUPINGS.contains(&w.as_str()) {
            // A list of label names: by (type, le).
            if next != Some(&Tok::Punct('(')) {
                return Err(format!("{w} without a label list in {expr:?}"));
            }
            i += 2;
            while toks.get(i) != Some(&Tok::Punct(')')) {
                match toks.get(i) {
                    Some(Tok::Ident(l)) if labels.contains(l) => {}
                    Some(Tok::Punct(',')) => {}
                    other => return Err(format!("label {other:?} in {w}(...) of {expr:?}")),
                }
                i += 1;
            }
        } else if KEYWORDS.contains(&w.as_str()) {
            i += 1;
        } else if next == Some(&Tok::Punct('('))
            || matches!(next, Some(Tok::Ident(g)) if GROUPINGS.contains(&g.as_str()))
        {
            // A call, or an aggregation with its grouping first: sum by (type) (...).
            if !FUNCTIONS.contains(&w.as_str()) {
                return Err(format!("unknown function {w} in {expr:?}"));
            }
            i += 1;
        } else {
            if !names.contains(w) {
                return Err(format!("{w} is not exported (in {expr:?})"));
            }
            used.insert(w.clone());
            i += 1;
            if toks.get(i) == Some(&Tok::Punct('{')) {
                // Matchers: label op "value", ...
                i += 1;
                while toks.get(i) != Some(&Tok::Punct('}')) {
                    match toks.get(i) {
                        Some(Tok::Ident(l)) if labels.contains(l) => {}
                        Some(Tok::Punct(',' | '=' | '!' | '~') | Tok::Str) => {}
                        other => return Err(format!("matcher {other:?} of {w} in {expr:?}")),
                    }
                    i += 1;
                }
            }
        }
    }
    Ok(())
}

/// Every string under `key` anywhere in `v`.
fn strings_under<'a>(v: &'a serde_json::Value, key: &str, out: &mut Vec<&'a str>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                match x {
                    serde_json::Value::String(s) if k == key => out.push(s),
                    _ => strings_under(x, key, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| strings_under(x, key, out)),
        _ => {}
    }
}

/// The `expr:` values of a rules file (one line, or a `|` block).
fn rule_exprs(yaml: &str) -> Vec<String> {
    let lines: Vec<&str> = yaml.lines().collect();
    let mut out = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let Some((indent, rest)) = line.split_once("expr:") else {
            continue;
        };
        if !indent.trim().is_empty() && indent.trim() != "-" {
            continue;
        }
        let rest = rest.trim();
        if rest != "|" {
            out.push(rest.to_string());
            continue;
        }
        let block = lines[n + 1..]
            .iter()
            .take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > indent.len());
        out.push(block.copied().collect::<Vec<_>>().join("\n"));
    }
    out
}

/// Every `psp_` name in `text` (not inside a longer name).
fn psp_names(text: &str) -> Vec<&str> {
    // (A name ends at a ':' of prose; none starts after a recording rule's.)
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices("psp_")
        .filter(|&(i, _)| !text[..i].ends_with(|c| ident(c) || c == ':'))
        .map(|(i, _)| {
            let end = text[i..].find(|c| !ident(c)).map_or(text.len(), |e| i + e);
            &text[i..end]
        })
        .collect()
}

/// The Grafana dashboard and the Prometheus examples in deploy/ use only
/// metric and label names a live scrape exports; the dashboard's queries
/// are well-formed PromQL and cover what an operator watches.
#[test]
fn deploy_examples_use_only_exported_metrics() {
    let _g = one_at_a_time();
    let srv = metrics_server();
    let live = raw_scrape(srv.metrics_addr().unwrap());
    srv.stop().expect("clean stop");
    assert_full_scrape(&live);
    let (names, labels) = exported(&live.body);
    assert!(names.contains("psp_latency_seconds_bucket"), "{names:?}");

    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let read =
        |p: &str| std::fs::read_to_string(root.join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
    let dashboard: serde_json::Value =
        serde_json::from_str(&read("deploy/grafana/psp-dashboard.json")).expect("JSON");
    let mut exprs = Vec::new();
    strings_under(&dashboard, "expr", &mut exprs);
    assert!(exprs.len() >= 20, "{} queries", exprs.len());
    let mut used = HashSet::new();
    for e in &exprs {
        check_promql(e, &names, &labels, &mut used).unwrap_or_else(|m| panic!("dashboard: {m}"));
    }
    // Its variables: Grafana's label_values(selector, label).
    let mut variables = Vec::new();
    strings_under(&dashboard, "definition", &mut variables);
    assert!(variables.len() >= 3, "{variables:?}");
    for v in variables {
        let (selector, label) = v
            .strip_prefix("label_values(")
            .and_then(|v| v.strip_suffix(')'))
            .and_then(|v| v.rsplit_once(','))
            .unwrap_or_else(|| panic!("a variable: {v:?}"));
        assert!(labels.contains(label.trim()), "variable {v:?}");
        check_promql(selector, &names, &labels, &mut used)
            .unwrap_or_else(|m| panic!("variable: {m}"));
    }
    for want in [
        "psp_requests_arrived_total",
        "psp_requests_total",
        "psp_latency_seconds_bucket",
        "psp_latency_quantile_seconds",
        "psp_queue_length",
        "psp_reserved_workers",
        "psp_utilization",
        "psp_net_overloaded_total",
    ] {
        assert!(used.contains(want), "the dashboard does not show {want}");
    }
    // Every psp_ name anywhere in it (descriptions too) is exported.
    let text = read("deploy/grafana/psp-dashboard.json");
    for n in psp_names(&text) {
        assert!(names.contains(n), "dashboard: {n} is not exported");
    }

    let rules = read("deploy/psp-rules.yml");
    let rule_exprs = rule_exprs(&rules);
    assert!(rule_exprs.len() >= 6, "{rule_exprs:?}");
    for e in &rule_exprs {
        check_promql(e, &names, &labels, &mut used).unwrap_or_else(|m| panic!("rules: {m}"));
    }
    let scrape_config = read("deploy/prometheus.yml");
    assert!(scrape_config.contains("metrics_path: /metrics"));
    assert!(scrape_config.contains("psp-rules.yml"));
    for (file, text) in [
        ("prometheus.yml", &scrape_config),
        ("psp-rules.yml", &rules),
    ] {
        for n in psp_names(text) {
            assert!(names.contains(n), "{file}: {n} is not exported");
        }
    }

    // The checker itself refuses what it should.
    let mut scratch = HashSet::new();
    for bad in [
        "rate(psp_no_such_metric_total[1m])",
        "psp_latency_seconds",
        "sum by (typ) (psp_queue_length)",
        "psp_queue_length{typ=\"a\"}",
        "rate(psp_snapshots_total[1m]",
        "frobnicate(psp_workers)",
    ] {
        assert!(
            check_promql(bad, &names, &labels, &mut scratch).is_err(),
            "accepted {bad:?}"
        );
    }
}
