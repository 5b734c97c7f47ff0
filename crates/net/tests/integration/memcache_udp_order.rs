//! memcached's order over UDP (`psp serve --protocol memcache-udp`): one
//! client socket sends many `set` / `get` pairs of the same keys in one
//! burst, without waiting; each get must read the value the set just
//! before it wrote (memcached's commands take effect in the order a client
//! sent them), under a central policy, DARC and preemptive ones, on two
//! workers that park when idle. Every request is answered once and every
//! counter balances; past the bound on held requests, a request is
//! answered busy and counted, and the order of the others still holds.

use std::collections::HashMap;
use std::net::UdpSocket;
use std::sync::Arc;
use std::time::{Duration, Instant};

use psp_apps::KvConfig;
use psp_apps::kv::ProtocolService;
use psp_net::dgram::DatagramProtocol;
use psp_net::{ClassifierKind, DatapathKind, Server, ServerConfig, ServerReport};
use psp_runtime::{IdleStrategy, InlineWorker, RuntimeConfig};

use crate::common;

/// set/get pairs sent in one burst.
const PAIRS: u16 = 300;
/// Keys the pairs cycle over: a get served early reads an older value.
const KEYS: u16 = 4;

/// `policy`, or `POLICY+inline`: worker 0 on the dispatcher's thread,
/// its answers held and sent a pass at a time.
fn server(policy: &str, queue_capacity: usize) -> Server {
    let (policy, inline) = match policy.strip_suffix("+inline") {
        Some(p) => (p, InlineWorker::On),
        None => (policy, InlineWorker::Off),
    };
    let service = ProtocolService::open(
        &psp_proto::memcache::Memcache,
        &KvConfig {
            keys: 100,
            ..KvConfig::default()
        },
    )
    .unwrap();
    Server::start(ServerConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        metrics: None,
        runtime: RuntimeConfig {
            workers: 2,
            queue_capacity,
            drain_timeout: Duration::from_secs(5),
            raise_priority: false,
            inline_worker: inline,
            idle: IdleStrategy::SpinPark {
                spin_us: 0,
                park_us: 1_000,
            },
            ..RuntimeConfig::default()
        },
        policy: policy.parse().unwrap(),
        types: common::server::types(
            &psp_proto::memcache::TYPES,
            &psp_proto::memcache::TYPE_MEAN_US,
        ),
        classifier: ClassifierKind::Header,
        app_classifier: None,
        handlers: psp_apps::handler_factory(Arc::new(service), None),
        datapath: DatapathKind::Udp,
        protocol: DatagramProtocol::Memcache,
    })
    .expect("server starts")
}

/// One command in a datagram behind memcached's UDP frame header (request
/// `id`, sequence 0 of 1).
fn frame(id: u16, body: &[u8]) -> Vec<u8> {
    let mut d = Vec::with_capacity(8 + body.len());
    for v in [id, 0, 1, 0] {
        d.extend_from_slice(&v.to_be_bytes());
    }
    d.extend_from_slice(body);
    d
}

/// Every request the server read ends in one outcome, and every admitted
/// one was answered.
fn assert_balanced(r: &ServerReport) {
    let (n, c) = (&r.net, &r.dispatcher.counts);
    assert_eq!(
        n.received,
        n.truncated + n.bad_request + n.unknown_type + c.arrived,
        "{n:?} {c:?}"
    );
    assert_eq!(c.arrived, c.shed + c.admitted, "{c:?}");
    assert_eq!(c.admitted, c.completed, "{c:?}");
    assert_eq!(c.stranded, 0, "{c:?}");
}

/// Sends the burst to a server whose queues hold `queue_capacity`; every
/// request's reply by request id, and the run's report.
fn send_burst(policy: &str, queue_capacity: usize) -> (HashMap<u16, Vec<u8>>, ServerReport) {
    let s = server(policy, queue_capacity);
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    // Room for every reply: they come back while the burst is still sent.
    let _ = socket2::SockRef::from(&c).set_recv_buffer_size(4 << 20);
    c.connect(s.local_addr()).unwrap();
    let n = 2 * usize::from(PAIRS);
    let reader = {
        let c = c.try_clone().unwrap();
        c.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        std::thread::spawn(move || {
            let mut replies = HashMap::new();
            let mut buf = [0u8; 2048];
            let deadline = Instant::now() + Duration::from_secs(10);
            while replies.len() < n && Instant::now() < deadline {
                let Ok(len) = c.recv(&mut buf) else { continue };
                assert!(len >= 8, "a reply without its frame header");
                let id = u16::from_be_bytes([buf[0], buf[1]]);
                assert_eq!(&buf[2..8], &[0, 0, 0, 1, 0, 0], "reply {id}");
                let body = buf[8..len].to_vec();
                assert!(replies.insert(id, body).is_none(), "two replies to {id}");
            }
            replies
        })
    };
    for i in 0..PAIRS {
        let key = format!("order{}", i % KEYS);
        let v = value(policy, i);
        let set = format!("set {key} 0 0 {}\r\n{v}\r\n", v.len());
        c.send(&frame(2 * i, set.as_bytes())).unwrap();
        c.send(&frame(2 * i + 1, format!("get {key}\r\n").as_bytes()))
            .unwrap();
    }
    let replies = reader.join().unwrap();
    let r = s.stop().unwrap();
    assert_balanced(&r);
    assert_eq!(r.net.dropped_by_os, Some(0), "{policy}: {:?}", r.net);
    assert_eq!(replies.len(), n, "{policy}: replies, {:?}", r.net);
    assert_eq!(r.net.received, n as u64, "{policy}: {:?}", r.net);
    // Counted at each call: a receive per 32 datagrams at least, and a send
    // per 64 replies at least.
    let calls = r
        .net
        .syscalls
        .expect("the UDP datapath counts its system calls");
    assert!(
        calls >= n as u64 / 32 + n as u64 / 64,
        "{policy}: {calls} system calls"
    );
    (replies, r)
}

fn value(policy: &str, i: u16) -> String {
    format!("{policy}-{i:05}")
}

/// Sends the burst and checks every reply; the run's report.
fn burst(policy: &str) -> ServerReport {
    let (replies, r) = send_burst(policy, 1024);
    assert_eq!(r.net.held_full, 0, "{policy}: {:?}", r.net);
    let mut stale = Vec::new();
    for i in 0..PAIRS {
        assert_eq!(replies[&(2 * i)], b"STORED\r\n", "{policy}: set {i}");
        let key = format!("order{}", i % KEYS);
        let v = value(policy, i);
        let want = format!("VALUE {key} 0 {}\r\n{v}\r\nEND\r\n", v.len());
        let got = &replies[&(2 * i + 1)];
        if got != want.as_bytes() {
            stale.push((i, String::from_utf8_lossy(got).into_owned()));
        }
    }
    assert!(
        stale.is_empty(),
        "{policy}: {} of {PAIRS} gets did not read the set before them, e.g. {:?}",
        stale.len(),
        &stale[..stale.len().min(3)]
    );
    r
}

#[test]
fn a_clients_commands_take_effect_in_the_order_sent_under_c_fcfs() {
    burst("c-fcfs");
}

#[test]
fn a_clients_commands_take_effect_in_the_order_sent_under_darc() {
    let r = burst("darc");
    // DARC still saw, typed and scheduled each request.
    assert_eq!(r.dispatcher.counts.admitted, 2 * u64::from(PAIRS));
}

#[test]
fn a_clients_commands_take_effect_in_the_order_sent_with_worker_0_inline() {
    // Its answers leave a pass at a time, each after the one before it.
    for policy in ["c-fcfs+inline", "darc+inline"] {
        let r = burst(policy);
        assert_eq!(r.net.reply_send_errors, 0, "{policy}: {:?}", r.net);
    }
}

#[test]
fn a_clients_commands_take_effect_in_the_order_sent_under_ts() {
    burst("ts");
}

#[test]
fn a_clients_commands_take_effect_in_the_order_sent_under_tq() {
    burst("tq");
}

#[test]
fn past_the_bound_on_held_requests_a_request_is_answered_busy_and_counted() {
    // 4 held at most: most of the burst is refused, each refusal answered.
    let (replies, r) = send_burst("c-fcfs", 4);
    let busy = b"SERVER_ERROR busy, request refused\r\n";
    let refused = replies.values().filter(|b| b.as_slice() == busy).count() as u64;
    assert!(r.net.held_full > 0, "{:?}", r.net);
    assert_eq!(r.net.shed_unanswered, 0, "{:?}", r.net);
    assert_eq!(refused, r.net.overloaded, "{:?}", r.net);
    assert!(r.net.held_full <= r.net.overloaded, "{:?}", r.net);
    // What was served still took effect in the order sent: a get reads the
    // last set of its key that was stored before it.
    let mut stored: HashMap<u16, u16> = HashMap::new();
    for i in 0..PAIRS {
        let k = i % KEYS;
        match replies[&(2 * i)].as_slice() {
            b"STORED\r\n" => {
                stored.insert(k, i);
            }
            b => assert_eq!(b, busy, "set {i}"),
        }
        let got = replies[&(2 * i + 1)].as_slice();
        if got == busy {
            continue;
        }
        let want = match stored.get(&k) {
            Some(&j) => {
                let v = value("c-fcfs", j);
                format!("VALUE order{k} 0 {}\r\n{v}\r\nEND\r\n", v.len())
            }
            None => "END\r\n".into(),
        };
        assert_eq!(String::from_utf8_lossy(got), want, "get {i}, {:?}", r.net);
    }
}

/// memcaslap's shape: `CLIENTS` sockets, each with one request in flight
/// at a time under a request id that changes with every request (memcaslap
/// aborts on a reply with any other id). Each socket sets and reads its own
/// key: a reply must come to the socket that asked, under the id it asked
/// with, and name that socket's key and value.
fn closed_loop_clients(policy: &str) -> ServerReport {
    const CLIENTS: u16 = 24;
    const ROUNDS: u16 = 60;
    let s = server(policy, 1024);
    let socks: Vec<UdpSocket> = (0..CLIENTS)
        .map(|_| {
            let c = UdpSocket::bind("127.0.0.1:0").unwrap();
            c.set_nonblocking(true).unwrap();
            c
        })
        .collect();
    // (request id, expected reply) of each socket's request in flight.
    let mut waiting: Vec<Option<(u16, Vec<u8>)>> = vec![None; socks.len()];
    let mut next_id: u16 = 1;
    let mut done = vec![0u16; socks.len()];
    let send = |i: usize, round: u16, id: u16| {
        let key = format!("own{i}");
        let v = format!("{policy}-{i}-{round}");
        let (body, want) = if round.is_multiple_of(2) {
            (
                format!("set {key} 0 0 {}\r\n{v}\r\n", v.len()),
                "STORED\r\n".to_string(),
            )
        } else {
            let v = format!("{policy}-{i}-{}", round - 1);
            (
                format!("get {key}\r\n"),
                format!("VALUE {key} 0 {}\r\n{v}\r\nEND\r\n", v.len()),
            )
        };
        socks[i]
            .send_to(&frame(id, body.as_bytes()), s.local_addr())
            .unwrap();
        (id, want.into_bytes())
    };
    for (i, w) in waiting.iter_mut().enumerate() {
        *w = Some(send(i, 0, next_id));
        next_id = next_id.wrapping_add(1);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut buf = [0u8; 2048];
    while done.iter().any(|&d| d < ROUNDS) {
        assert!(Instant::now() < deadline, "{policy}: rounds done {done:?}");
        let mut any = false;
        for (i, c) in socks.iter().enumerate() {
            let Ok((len, from)) = c.recv_from(&mut buf) else {
                continue;
            };
            any = true;
            assert_eq!(from, s.local_addr(), "{policy}: a reply from elsewhere");
            let id = u16::from_be_bytes([buf[0], buf[1]]);
            let (want_id, want) = waiting[i].take().unwrap_or_else(|| {
                panic!("{policy}: socket {i} got reply {id} with nothing in flight")
            });
            assert_eq!(id, want_id, "{policy}: socket {i}, round {}", done[i]);
            assert_eq!(
                String::from_utf8_lossy(&buf[8..len]),
                String::from_utf8_lossy(&want),
                "{policy}: socket {i}, round {}",
                done[i]
            );
            done[i] += 1;
            if done[i] < ROUNDS {
                waiting[i] = Some(send(i, done[i], next_id));
                next_id = next_id.wrapping_add(1);
            }
        }
        if !any {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    // Nothing more comes: no socket gets a second reply.
    std::thread::sleep(Duration::from_millis(50));
    for (i, c) in socks.iter().enumerate() {
        assert!(
            c.recv_from(&mut buf).is_err(),
            "{policy}: socket {i}: a reply too many"
        );
    }
    let r = s.stop().unwrap();
    assert_balanced(&r);
    assert_eq!(
        r.dispatcher.counts.completed,
        u64::from(CLIENTS) * u64::from(ROUNDS),
        "{policy}"
    );
    r
}

#[test]
fn each_reply_reaches_the_socket_that_asked_under_its_request_id() {
    for policy in [
        "c-fcfs",
        "darc-fair",
        "darc",
        "c-fcfs+inline",
        "darc+inline",
    ] {
        closed_loop_clients(policy);
    }
}
