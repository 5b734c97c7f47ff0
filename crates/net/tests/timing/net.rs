//! End to end over loopback: the server behind the UDP datapath, the open-loop
//! client, bad input, a million random datagrams, and a client facing a dead or
//! overloaded server. Tests run one at a time (2-core machines) and use parking
//! idle threads.

use std::net::{SocketAddr, UdpSocket};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use psp_apps::spin::{EchoService, SpinService};
use psp_apps::{Service, SpinConfig};
use psp_net::client::{LoadConfig, Progress, run_load};
use psp_net::protocol::{self, HEADER_LEN, Status};
use psp_net::{ClassifierKind, Server, ServerConfig};
use psp_runtime::{RuntimeConfig, Spinner};
use psp_workload::Workload;

fn spinner() -> Spinner {
    static S: OnceLock<Spinner> = OnceLock::new();
    *S.get_or_init(|| Spinner::calibrate(Duration::from_millis(20)))
}

fn workload() -> Workload {
    Workload::fixed("net-test", &[("short", 20.0, 0.9), ("long", 200.0, 0.1)])
}

fn server(policy: &str, workers: usize, queue_capacity: usize) -> Server {
    server_at("127.0.0.1:0", policy, workers, queue_capacity).expect("server starts")
}

fn server_at(
    addr: &str,
    policy: &str,
    workers: usize,
    queue_capacity: usize,
) -> Result<Server, psp_net::ServerError> {
    Server::start(ServerConfig {
        addr: addr.parse().unwrap(),
        metrics: None,
        runtime: RuntimeConfig {
            workers,
            queue_capacity,
            drain_timeout: Duration::from_secs(5),
            raise_priority: false,
            ..RuntimeConfig::default()
        },
        policy: policy.parse().unwrap(),
        types: workload().type_infos(),
        classifier: ClassifierKind::Header,
        app_classifier: None,
        handlers: psp_apps::handler_factory(
            Arc::new(SpinService::with_spinner(
                spinner(),
                &SpinConfig {
                    max_service_ns: MAX_SERVICE_NS,
                },
            )),
            None,
        ),
        datapath: Default::default(),
        protocol: Default::default(),
    })
}

/// A c-FCFS server with one worker running `app`, draining for `drain_timeout`.
fn one_worker_server(drain_timeout: Duration, app: Arc<dyn Service>) -> Server {
    Server::start(ServerConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        metrics: None,
        runtime: RuntimeConfig {
            workers: 1,
            queue_capacity: 16,
            drain_timeout,
            raise_priority: false,
            ..RuntimeConfig::default()
        },
        policy: "c-fcfs".parse().unwrap(),
        types: workload().type_infos(),
        classifier: ClassifierKind::Header,
        app_classifier: None,
        handlers: psp_apps::handler_factory(app, None),
        datapath: Default::default(),
        protocol: Default::default(),
    })
    .expect("server starts")
}

/// The spin application's cap in these tests.
const MAX_SERVICE_NS: u64 = 5_000_000_000;

/// Every datagram the server read ends in exactly one counter, and every valid
/// request in exactly one outcome.
fn assert_accounted(s: &psp_net::ServerReport) {
    let (n, c) = (&s.net, &s.dispatcher.counts);
    assert_eq!(
        n.truncated + n.bad_request + n.unknown_type + c.arrived,
        n.received,
        "datagrams: {n:?} {c:?}"
    );
    assert_eq!(
        n.overloaded + n.shed_unanswered,
        c.shed,
        "refused: {n:?} {c:?}"
    );
    assert_eq!(c.arrived, c.shed + c.admitted, "requests: {c:?}");
    assert_eq!(c.admitted, c.completed + c.stranded, "admitted: {c:?}");
}

fn load(server: SocketAddr, rps: f64, ms: u64, timeout_ms: u64) -> LoadConfig {
    LoadConfig {
        server,
        workload: workload(),
        bodies: psp_runtime::EncoderSource::synthetic(),
        rate_rps: rps,
        duration_ns: ms * 1_000_000,
        warmup_ns: ms * 100_000,
        seed: 7,
        flows: 4,
        timeout: Duration::from_millis(timeout_ms),
        keep_samples: true,
        raise_priority: false,
        workers: 1,
        datapath: Default::default(),
    }
}

/// Sends `dgram` and returns the reply, if one comes within 10 s (generous:
/// a reply takes microseconds, but CI machines are slow and shared, and a
/// loaded one may leave the server's threads off their cores for long).
fn ask(sock: &UdpSocket, dgram: &[u8]) -> Option<Vec<u8>> {
    ask_within(sock, dgram, Duration::from_secs(10))
}

/// Sends `dgram` and returns the reply, if one comes within `wait`.
fn ask_within(sock: &UdpSocket, dgram: &[u8], wait: Duration) -> Option<Vec<u8>> {
    sock.send(dgram).unwrap();
    let mut buf = [0u8; 4096];
    sock.set_read_timeout(Some(wait)).unwrap();
    sock.recv(&mut buf).ok().map(|n| buf[..n].to_vec())
}

fn client_socket(server: SocketAddr) -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.connect(server).unwrap();
    s
}

/// The header and status of a reply that must have come.
fn status_of(reply: Option<Vec<u8>>) -> (protocol::Header, Status) {
    let r = reply.expect("a reply");
    protocol::parse_response(&r).expect("a valid response")
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

#[test]
fn every_request_is_answered_and_counted_on_both_sides() {
    let _g = crate::common::one_at_a_time();
    for policy in ["c-fcfs", "darc", "d-fcfs", "ws"] {
        let srv = server(policy, 2, 1024);
        let cfg = load(srv.local_addr(), 2_000.0, 400, 5_000);
        let rep = run_load(&cfg, &Progress::default()).unwrap();
        let s = srv.stop().unwrap();
        let point = rep.to_point(&cfg, policy, 2);
        assert_eq!(rep.send_errors, 0, "{policy}");
        assert_eq!(
            point.timeouts + point.shed + point.errors,
            0,
            "{policy}: {point:?}"
        );
        assert_eq!(
            rep.responses[Status::Ok as usize - 1],
            rep.scheduled,
            "{policy}"
        );
        assert_eq!(
            s.dispatcher.counts.completed, rep.scheduled,
            "{policy}: server side"
        );
        assert_accounted(&s);
        // One clock: the server's latency (receive to the handler's return) is
        // never shorter than the service time.
        let min = s.dispatcher.recorder.min_slowdown().expect("completions");
        assert!(min >= 1.0, "{policy}: a server-side slowdown of {min}");
        assert_eq!(s.net.received, rep.scheduled, "{policy}");
        assert_eq!(point.overall.count, point.measured_generated, "{policy}");
        assert_eq!(rep.samples.len() as u64, rep.scheduled);
        // Latency from the scheduled send time covers at least the service time.
        for t in &point.types {
            assert!(
                t.p50_latency_us >= t.mean_service_us * 0.9,
                "{policy}: {t:?}"
            );
        }
        assert_eq!(s.dispatcher.counts.stranded, 0);
    }
}

#[test]
fn bad_input_gets_an_error_reply_or_a_counted_drop() {
    let _g = crate::common::one_at_a_time();
    let srv = server("darc", 1, 64);
    let sock = client_socket(srv.local_addr());
    let good = request(0, 41, 1_000);

    // Truncated header: nothing to answer to, dropped and counted.
    let silence = Duration::from_millis(300);
    assert_eq!(ask_within(&sock, &good[..10], silence), None);
    assert_eq!(ask_within(&sock, &[], silence), None);
    // Wrong version.
    let mut v9 = good.clone();
    v9[0] = 9;
    let (h, st) = status_of(ask(&sock, &v9));
    assert_eq!((st, h.id), (Status::BadRequest, 41));
    // Length field larger than the packet, and smaller.
    let mut long = good.clone();
    long[4..6].copy_from_slice(&1000u16.to_le_bytes());
    assert_eq!(status_of(ask(&sock, &long)).1, Status::BadRequest);
    assert_eq!(
        status_of(ask(&sock, &good[..HEADER_LEN + 3])).1,
        Status::BadRequest
    );
    // A response sent as a request.
    let mut resp = good.clone();
    resp[1] = Status::Ok as u8;
    assert_eq!(status_of(ask(&sock, &resp)).1, Status::BadRequest);
    // Unknown type (the workload registers 2).
    let (h, st) = status_of(ask(&sock, &request(7, 43, 1_000)));
    assert_eq!((st, h.id, h.type_id), (Status::UnknownType, 43, 7));
    // A body the spin application cannot read: BAD_REQUEST from the worker.
    let mut short_body = Vec::new();
    protocol::encode_request(&mut short_body, 1, 44, b"abc");
    assert_eq!(status_of(ask(&sock, &short_body)).1, Status::BadRequest);
    // And the server still serves.
    let (h, st) = status_of(ask(&sock, &good));
    assert_eq!((st, h.id, h.type_id), (Status::Ok, 41, 0));

    let s = srv.stop().unwrap();
    assert_eq!(s.net.truncated, 2);
    assert_eq!(s.net.bad_request, 4);
    assert_eq!(s.net.unknown_type, 1);
    assert_eq!(s.dispatcher.counts.bad_bodies, 1);
    assert_eq!(s.dispatcher.counts.handler_errors, 0);
    // An error outcome per type, not a latency sample.
    assert_eq!(s.dispatcher.recorder.errors(), 1);
    assert_eq!(s.dispatcher.recorder.completed(), 1);
    assert_eq!(s.dispatcher.counts.completed, 2);
    assert_eq!(s.net.received, 2 + 4 + 1 + 2);
    assert_accounted(&s);
}

/// xorshift: reproducible random bytes without a dependency.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn a_million_random_datagrams_leave_the_server_serving() {
    let _g = crate::common::one_at_a_time();
    const N: u64 = 1_000_000;
    let srv = server("darc", 1, 256);
    let sock = client_socket(srv.local_addr());
    sock.set_nonblocking(true).unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut buf = [0u8; 64];
    let mut sink = [0u8; 64];
    // The probes' ids: a random datagram may carry any id, but an OK reply
    // to one is all but impossible (its body would have to name a known type
    // and ask for less than the cap).
    const PROBE: u64 = 0x5052_4f42_4500_0000;
    let mut probes = 0;
    let t0 = Instant::now();
    for i in 0..N {
        let len = (next(&mut state) % 48) as usize;
        for b in buf[..len].iter_mut() {
            *b = next(&mut state) as u8;
        }
        // Every fourth datagram starts like a request, to reach deeper checks.
        if i % 4 == 0 && len >= HEADER_LEN {
            buf[0] = protocol::VERSION;
            buf[1] = 0;
        }
        while sock.send(&buf[..len]).is_err() {
            std::thread::yield_now();
        }
        // Throw replies away as they come.
        while sock.recv(&mut sink).is_ok() {}
        // Pace the sender on the server's progress, not on a sleep: every
        // 128 datagrams, a valid request whose reply means the server has
        // read all that came before it (one socket, read in order), so the
        // socket buffer never holds more than 129 of them, however slowly
        // a loaded machine runs the server.
        if i % 128 == 127 {
            probes += 1;
            wait_for_reply(&sock, &request(0, PROBE + probes, 1_000));
        }
    }
    let sent_in = t0.elapsed();
    // The server still answers a valid request correctly.
    sock.set_nonblocking(false).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    while {
        sock.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        sock.recv(&mut sink).is_ok()
    } {}
    let reply = ask(&sock, &request(1, 99, 1_000)).expect("served after the flood");
    let (h, st) = protocol::parse_response(&reply).unwrap();
    assert_eq!((st, h.id), (Status::Ok, 99));
    let s = srv.stop().unwrap();
    let n = &s.net;
    assert_accounted(&s);
    assert_eq!(s.dispatcher.counts.stranded, 0);
    // The pacing keeps the socket buffer from overflowing on this machine; a
    // slower one may overflow it, and then the OS's drop counter accounts for the
    // difference: every datagram sent is either read or counted as dropped.
    let dropped = n.dropped_by_os.expect("the OS's drop counter is readable");
    assert_eq!(
        n.received + dropped,
        N + probes + 1,
        "{n:?} (sent in {sent_in:?})"
    );
    assert_eq!(dropped, 0, "pacing failed: {n:?}");
}

/// Sends `dgram` (a valid request) on the non-blocking `sock` and waits for
/// its OK reply, throwing other replies away; fails after 10 s.
fn wait_for_reply(sock: &UdpSocket, dgram: &[u8]) {
    let want = protocol::parse_request(dgram).unwrap();
    while sock.send(dgram).is_err() {
        std::thread::yield_now();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    sock.set_nonblocking(false).unwrap();
    let mut buf = [0u8; 256];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "no reply to probe {} within 10 s", want.id);
        sock.set_read_timeout(Some(left)).unwrap();
        let Ok(n) = sock.recv(&mut buf) else {
            continue;
        };
        if let Ok((h, Status::Ok)) = protocol::parse_response(&buf[..n])
            && h.id == want.id
        {
            break;
        }
    }
    sock.set_nonblocking(true).unwrap();
}

#[test]
fn a_dead_server_shows_up_as_timeouts_and_the_client_returns() {
    let _g = crate::common::one_at_a_time();
    // A bound socket nobody reads: datagrams vanish without an ICMP error.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let cfg = load(silent.local_addr().unwrap(), 1_000.0, 200, 100);
    let t0 = Instant::now();
    let rep = run_load(&cfg, &Progress::default()).unwrap();
    let wall = t0.elapsed();
    let point = rep.to_point(&cfg, "none", 1);
    assert!(rep.scheduled > 100);
    assert_eq!(point.timeouts, point.measured_generated);
    assert!((point.loss_fraction - 1.0).abs() < 1e-9);
    // 200 ms of sending and a 100 ms timeout: about 0.3 s; a client that
    // waited for the replies that never come would not return at all.
    assert!(
        wall < Duration::from_secs(20),
        "the client must stop one timeout after its last send, took {wall:?}"
    );
    // No socket at all: datagrams go nowhere (the client's sockets are not
    // connected, so no ICMP error reaches them); the client still returns and
    // counts every request as a timeout.
    drop(silent);
    let rep = run_load(&cfg, &Progress::default()).unwrap();
    let point = rep.to_point(&cfg, "none", 1);
    assert_eq!(point.overall.count, 0);
    assert_eq!(point.timeouts, point.measured_generated);
}

#[test]
fn an_overloaded_server_answers_overloaded_within_its_reply_budget() {
    let _g = crate::common::one_at_a_time();
    // One worker, queues of 4. 1.5x its capacity for 100 ms sends fewer requests
    // than the reply burst (4096), so every shed request gets a reply whatever
    // the machine's speed; 6x for 300 ms sheds far more than served + burst, so
    // replies stop there and the rest are shed unanswered, counted, and show up
    // as timeouts at the client.
    let peak = workload().peak_rps(1);
    for (factor, ms, expect_unanswered) in [(1.5, 100, false), (6.0, 300, true)] {
        let srv = server("c-fcfs", 1, 4);
        let cfg = load(srv.local_addr(), factor * peak, ms, 500);
        let rep = run_load(&cfg, &Progress::default()).unwrap();
        let s = srv.stop().unwrap();
        let point = rep.to_point(&cfg, "c-fcfs", 1);
        let (ok, overloaded) = (
            rep.responses[Status::Ok as usize - 1],
            rep.responses[Status::Overloaded as usize - 1],
        );
        assert!(point.shed > 0, "{factor}x: {point:?}");
        assert_eq!(
            overloaded, s.net.overloaded,
            "{factor}x: one reply per counted OVERLOADED"
        );
        assert_eq!(ok, s.dispatcher.counts.completed, "{factor}x");
        assert_accounted(&s);
        // Every request sent was served, refused, shed unanswered, or dropped by
        // the OS before the server read it.
        assert_eq!(
            ok + overloaded + s.net.shed_unanswered + s.net.dropped_by_os.unwrap_or(0),
            rep.sent,
            "{factor}x: {:?}",
            s.net
        );
        assert_eq!(
            s.net.shed_unanswered > 0,
            expect_unanswered,
            "{factor}x: {:?}",
            s.net
        );
        assert!(
            s.net.overloaded <= ok + 4096,
            "{factor}x: replies within budget"
        );
        // Every unanswered request is a timeout (warm-up ones are not measured).
        // Timeouts: requests shed unanswered, or dropped by the OS before the
        // server read them.
        assert!(
            point.timeouts <= s.net.shed_unanswered + s.net.dropped_by_os.unwrap_or(0),
            "{factor}x"
        );
    }
}

#[test]
fn ipv6_clients_are_answered_at_their_address() {
    let _g = crate::common::one_at_a_time();
    let srv = match server_at("[::1]:0", "darc", 1, 1024) {
        Ok(s) => s,
        Err(e) => {
            // A machine without IPv6 loopback has nothing to test here.
            eprintln!("skipped: no IPv6 loopback ({e})");
            return;
        }
    };
    let sock = UdpSocket::bind("[::1]:0").unwrap();
    sock.connect(srv.local_addr()).unwrap();
    let reply = ask(&sock, &request(1, 77, 1_000)).expect("a reply over IPv6");
    let (h, st) = protocol::parse_response(&reply).unwrap();
    assert_eq!((st, h.id, h.type_id), (Status::Ok, 77, 1));
    // What is tested is the addressing: a timeout generous enough that a
    // stalled CI machine does not turn a slow answer into a missing one.
    let cfg = load(srv.local_addr(), 1_000.0, 200, 5_000);
    let rep = run_load(&cfg, &Progress::default()).unwrap();
    let s = srv.stop().unwrap();
    // Every request is answered at the client's IPv6 address: OK, or
    // OVERLOADED if a stalled machine let the queue fill (the queue is deep,
    // but what is tested here is the addressing, not the capacity).
    let ok = rep.responses[Status::Ok as usize - 1];
    let overloaded = rep.responses[Status::Overloaded as usize - 1];
    let c = s.dispatcher.counts;
    let why = format!(
        "responses {:?}, late {}, rejected {:?}, server {c:?}",
        rep.responses, rep.late, rep.rejected
    );
    assert_eq!(ok + overloaded, rep.scheduled, "{why}");
    assert_eq!(rep.rejected.total(), 0, "{why}");
    assert_eq!(c.completed, ok + 1, "{why}");
    assert_eq!(c.shed, overloaded, "{why}");
}

#[test]
fn a_request_asking_for_more_work_than_the_cap_is_refused_at_once() {
    let _g = crate::common::one_at_a_time();
    let srv = server("c-fcfs", 1, 64);
    let sock = client_socket(srv.local_addr());
    // 2^62 ns: about 146 years of one worker's time. "At once": within
    // `ask`'s deadline, which a worker spinning for it would never meet.
    let reply = ask(&sock, &request(0, 5, 1 << 62)).expect("an answer, not a wedged worker");
    let (h, st) = protocol::parse_response(&reply).unwrap();
    assert_eq!((st, h.id), (Status::HandlerError, 5));
    // Just above the cap: refused too; a request within it is served.
    let over = request(0, 6, MAX_SERVICE_NS + 1);
    assert_eq!(status_of(ask(&sock, &over)).1, Status::HandlerError);
    let (h, st) = status_of(ask(&sock, &request(0, 7, 1_000)));
    assert_eq!((st, h.id), (Status::Ok, 7));
    let s = srv.stop().unwrap();
    assert_eq!(s.dispatcher.counts.handler_errors, 2);
    assert_accounted(&s);
}

#[test]
fn shutdown_is_bounded_by_the_drain_timeout_and_stranded_requests_stay_unanswered() {
    let _g = crate::common::one_at_a_time();
    // A 4.5 s request (within the cap) and a 200 ms drain: stop returns soon
    // after the deadline, the request is stranded, and the worker that
    // finishes it later does not answer it. A stop that waited for the
    // request would take at least 4 s more; a bounded one takes 0.2 s plus
    // thread joins, so 3 s holds on a loaded machine and still tells them
    // apart.
    const SPIN: Duration = Duration::from_millis(4_500);
    let spin = Arc::new(SpinService::with_spinner(
        spinner(),
        &SpinConfig {
            max_service_ns: MAX_SERVICE_NS,
        },
    ));
    let srv = one_worker_server(Duration::from_millis(200), spin);
    let sock = client_socket(srv.local_addr());
    let sent = Instant::now();
    assert!(
        ask_within(
            &sock,
            &request(1, 9, SPIN.as_nanos() as u64),
            Duration::from_millis(300)
        )
        .is_none()
    );
    let t0 = Instant::now();
    let s = srv.stop().unwrap();
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(3), "stop took {took:?}");
    assert_eq!(s.dispatcher.counts.stranded, 1);
    assert_eq!(s.dispatcher.counts.completed, 0);
    assert_eq!(s.abandoned_workers, vec![0]);
    assert_accounted(&s);
    // The worker's spin ends SPIN after it starts (wall time, loaded or
    // not): listen until well past that, for an answer that must not come.
    let until = sent + SPIN + Duration::from_secs(2);
    sock.set_read_timeout(Some(
        until
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(100)),
    ))
    .unwrap();
    let mut buf = [0u8; 256];
    assert!(
        sock.recv(&mut buf).is_err(),
        "a request counted as stranded was answered"
    );
}

#[test]
fn a_drain_timeout_too_large_to_add_does_not_overflow() {
    let _g = crate::common::one_at_a_time();
    let srv = one_worker_server(Duration::MAX, Arc::new(EchoService));
    let sock = client_socket(srv.local_addr());
    assert_eq!(status_of(ask(&sock, &request(0, 1, 0))).1, Status::Ok);
    let s = srv.stop().unwrap();
    assert_eq!(s.dispatcher.counts.completed, 1);
}

/// A server with `/metrics` on any free port (c-FCFS, one worker, echo).
fn metrics_server() -> Server {
    Server::start(ServerConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        runtime: RuntimeConfig {
            workers: 1,
            queue_capacity: 16,
            drain_timeout: Duration::from_secs(5),
            raise_priority: false,
            ..RuntimeConfig::default()
        },
        policy: "c-fcfs".parse().unwrap(),
        types: workload().type_infos(),
        classifier: ClassifierKind::Header,
        app_classifier: None,
        handlers: psp_apps::handler_factory(Arc::new(EchoService), None),
        datapath: Default::default(),
        protocol: Default::default(),
    })
    .expect("server starts")
}

/// Sends `head` to `/metrics`' listener, stops sending, and returns the whole
/// answer (generous deadlines: the answer does not depend on timing).
fn http_exchange(addr: SocketAddr, head: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    // The server may answer and close before reading all of an oversized
    // head: what matters is the answer.
    let _ = s.write_all(head);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// A request head past the exporter's bound (here a 300 KB header
/// line) is answered 431 after at most `MAX_HEAD_BYTES` were read, and the
/// exporter goes on serving scrapes.
#[test]
fn a_metrics_request_head_past_its_bound_is_answered_431() {
    let _g = crate::common::one_at_a_time();
    let srv = metrics_server();
    let maddr = srv.metrics_addr().expect("metrics served");
    let mut big = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
    big.resize(big.len() + 300_000, b'a');
    let answer = http_exchange(maddr, &big);
    assert!(
        answer.starts_with("HTTP/1.1 431 "),
        "answer: {:?}",
        &answer[..answer.len().min(200)]
    );
    // A head just within the bound is served.
    let mut fits = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: ".to_vec();
    fits.resize(psp_net::exporter::MAX_HEAD_BYTES - 4, b'a');
    fits.extend_from_slice(b"\r\n\r\n");
    let answer = http_exchange(maddr, &fits);
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    assert!(answer.contains("psp_uptime_seconds"), "{answer}");
    let answer = http_exchange(maddr, b"GET /other HTTP/1.1\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 404 "), "{answer}");
    let answer = http_exchange(maddr, b"POST /metrics HTTP/1.1\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 405 "), "{answer}");
    let answer = http_exchange(maddr, b"nonsense\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    srv.stop().expect("clean stop");
}

/// A run that cannot start (here: cores this machine does not have)
/// is `Server::start`'s error, so `psp serve` never says it listens.
#[test]
fn a_server_whose_cores_are_missing_does_not_start() {
    let _g = crate::common::one_at_a_time();
    let r = Server::start(ServerConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        metrics: None,
        runtime: RuntimeConfig {
            workers: 1,
            cores: Some(vec![1000, 1001]),
            raise_priority: false,
            ..RuntimeConfig::default()
        },
        policy: "c-fcfs".parse().unwrap(),
        types: workload().type_infos(),
        classifier: ClassifierKind::Header,
        app_classifier: None,
        handlers: psp_apps::handler_factory(Arc::new(EchoService), None),
        datapath: Default::default(),
        protocol: Default::default(),
    });
    match r {
        Err(psp_net::ServerError::Runtime(psp_runtime::RuntimeError::Cores(m))) => {
            assert!(m.contains("core 1000"), "{m}");
        }
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("started on cores that do not exist"),
    }
}

/// The value of the exposition line that starts with `prefix` (a metric name
/// with its labels), if any.
fn exposed(body: &str, prefix: &str) -> Option<f64> {
    body.lines().find_map(|l| {
        l.strip_prefix(prefix)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// Requests that take twice their type's declared mean service
/// time show up as a measured utilization twice the declared one, in
/// `/metrics` and in the report's per-type service sums.
#[test]
fn measured_utilization_is_reported_beside_the_declared_one() {
    let _g = crate::common::one_at_a_time();
    let srv = Server::start(ServerConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        runtime: RuntimeConfig {
            workers: 1,
            queue_capacity: 64,
            drain_timeout: Duration::from_secs(5),
            raise_priority: false,
            ..RuntimeConfig::default()
        },
        policy: "c-fcfs".parse().unwrap(),
        types: workload().type_infos(),
        classifier: ClassifierKind::Header,
        app_classifier: None,
        handlers: psp_apps::handler_factory(
            Arc::new(SpinService::with_spinner(
                spinner(),
                &SpinConfig {
                    max_service_ns: MAX_SERVICE_NS,
                },
            )),
            None,
        ),
        datapath: Default::default(),
        protocol: Default::default(),
    })
    .expect("server starts");
    let maddr = srv.metrics_addr().unwrap();
    let sock = client_socket(srv.local_addr());
    // "short" declares 20 us; each of these spins 40 us.
    const N: u64 = 50;
    for id in 0..N {
        assert_eq!(status_of(ask(&sock, &request(0, id, 40_000))).1, Status::Ok);
    }
    let ok = "psp_requests_total{type=\"short\",outcome=\"ok\"}";
    let deadline = Instant::now() + Duration::from_secs(10);
    let body = loop {
        let answer = http_exchange(maddr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        if exposed(&answer, ok) == Some(N as f64) {
            break answer;
        }
        assert!(
            Instant::now() < deadline,
            "metrics never caught up: {answer}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(exposed(&body, "psp_workers"), Some(1.0), "{body}");
    assert_eq!(
        exposed(&body, "psp_declared_service_seconds{type=\"short\"}"),
        Some(20e-6),
        "{body}"
    );
    let measured = exposed(&body, "psp_utilization").expect("psp_utilization");
    let declared = exposed(&body, "psp_declared_utilization").expect("declared");
    assert!(declared > 0.0, "{body}");
    // A spin lasts at least what it asks for: twice the declared mean.
    assert!(measured / declared >= 1.9, "{measured} / {declared}");
    let report = srv.stop().expect("clean stop");
    let d = &report.dispatcher;
    assert_eq!(d.completed_by_type, vec![N, 0]);
    assert!(
        d.service_ns_by_type[0] >= N * 39_000,
        "{:?}",
        d.service_ns_by_type
    );
    assert_eq!(d.service_ns_by_type[1], 0);
}
