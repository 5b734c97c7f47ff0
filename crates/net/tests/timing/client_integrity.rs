//! The load client against misbehaving fake servers (a thread with a plain UDP
//! socket, over IPv4 loopback): a reply counts as a success only if it answers,
//! from the server's address, a request this client sent on that flow, with the
//! request's type, for the first time. Every other datagram is counted as one
//! kind of refused reply, and a request whose only replies were refused ends as
//! a timeout. Runs are short and slow (200 requests/s); tests run one at a time.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use psp_net::client::{LoadConfig, LoadReport, Progress, RejectedReplies, run_load};
use psp_net::protocol::{self, HEADER_LEN, Status};
use psp_workload::{ArrivalSource, PoissonArrivals, Workload};

const RATE_RPS: f64 = 200.0;
const DURATION_NS: u64 = 250_000_000;
const SEED: u64 = 11;

fn workload() -> Workload {
    Workload::fixed("integrity", &[("short", 20.0, 0.5), ("long", 200.0, 0.5)])
}

/// How many requests the client will schedule.
fn scheduled() -> u64 {
    let mut a = PoissonArrivals::new(&workload(), RATE_RPS, DURATION_NS, SEED);
    std::iter::from_fn(|| a.next_arrival()).count() as u64
}

/// A request as the fake server saw it.
#[derive(Debug, Clone, Copy)]
struct Seen {
    id: u64,
    type_id: u16,
    from: SocketAddr,
}

/// A datagram the fake sends: `bytes` to `to`, from its own socket or, with
/// `from_other`, from a second socket (another port).
struct Out {
    bytes: Vec<u8>,
    to: SocketAddr,
    from_other: bool,
}

/// A response header with an empty body.
fn response(status: Status, type_id: u16, id: u64) -> Vec<u8> {
    let mut h = [0u8; HEADER_LEN];
    protocol::write_header(&mut h, status as u8, type_id, 0, id);
    h.to_vec()
}

/// The correct reply to `r`.
fn ok(r: &Seen) -> Out {
    Out {
        bytes: response(Status::Ok, r.type_id, r.id),
        to: r.from,
        from_other: false,
    }
}

struct Fake {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    /// Returns the datagrams it sent.
    thread: JoinHandle<u64>,
}

/// Starts a fake server that answers each request it receives with what
/// `behave` returns.
fn fake(mut behave: impl FnMut(&Seen) -> Vec<Out> + Send + 'static) -> Fake {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let other = UdpSocket::bind("127.0.0.1:0").unwrap();
    // Only bounds how late the thread notices `stop`.
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let addr = sock.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop_fake = stop.clone();
    let thread = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut sent = 0;
        while !stop_fake.load(Ordering::Relaxed) {
            let Ok((n, from)) = sock.recv_from(&mut buf) else {
                continue;
            };
            let h = protocol::parse_request(&buf[..n]).expect("the client sends valid requests");
            let seen = Seen {
                id: h.id,
                type_id: h.type_id,
                from,
            };
            for out in behave(&seen) {
                let s = if out.from_other { &other } else { &sock };
                s.send_to(&out.bytes, out.to).unwrap();
                sent += 1;
            }
        }
        sent
    });
    Fake { addr, stop, thread }
}

/// Runs the client against `fake` (2 flows, all requests measured), checks the
/// accounting every run keeps; returns the report and the datagrams the fake
/// sent.
fn run_against(fake: Fake) -> (LoadReport, u64) {
    let cfg = config(fake.addr);
    let rep = run_load(&cfg, &Progress::default()).unwrap();
    fake.stop.store(true, Ordering::Relaxed);
    let replies = fake.thread.join().unwrap();
    assert_eq!(rep.scheduled, scheduled());
    assert_eq!(rep.sent, rep.scheduled, "loopback takes every send");
    check_accounting(&rep, &cfg);
    (rep, replies)
}

fn config(server: SocketAddr) -> LoadConfig {
    LoadConfig {
        server,
        workload: workload(),
        bodies: psp_runtime::EncoderSource::synthetic(),
        rate_rps: RATE_RPS,
        duration_ns: DURATION_NS,
        warmup_ns: 0,
        seed: SEED,
        flows: 2,
        // Generous: CI machines are slow and shared.
        timeout: Duration::from_millis(500),
        keep_samples: true,
        raise_priority: false,
        workers: 1,
        datapath: Default::default(),
    }
}

fn successes(rep: &LoadReport) -> u64 {
    rep.responses.iter().sum()
}

/// Checks the invariants every run keeps, whatever the server did: each
/// request ends once (a status or a timeout), and the point document carries
/// the refusals.
fn check_accounting(rep: &LoadReport, cfg: &LoadConfig) {
    let point = rep.to_point(cfg, "fake", 1);
    assert_eq!(point.measured_generated, rep.scheduled);
    assert_eq!(
        successes(rep) + point.timeouts,
        rep.scheduled,
        "every request ends once: {rep:?}"
    );
    assert_eq!(rep.samples.len() as u64, rep.scheduled);
    assert_eq!(
        rep.samples.iter().filter(|s| s.status.is_none()).count() as u64,
        point.timeouts
    );
    // The point document names each counter as the client does.
    let doc = serde_json::to_value(&point).unwrap();
    let extra = &doc["extra"];
    for (name, n) in rep.rejected.fields() {
        assert_eq!(extra["rejected_replies"][name], n, "{name}");
    }
    assert_eq!(extra["unexpected_datagrams"], rep.rejected.total());
    for s in Status::ALL {
        assert_eq!(
            extra["responses_total"][s.name()],
            rep.responses[s as usize - 1],
            "{}",
            s.name()
        );
    }
}

#[test]
fn a_well_behaved_server_gives_a_perfect_run() {
    let _g = crate::common::one_at_a_time();
    let (rep, replies) = run_against(fake(|r| vec![ok(r)]));
    assert_eq!(rep.responses[Status::Ok as usize - 1], rep.scheduled);
    assert_eq!(rep.rejected, RejectedReplies::default());
    assert_eq!((rep.late, replies), (0, rep.scheduled));
}

#[test]
fn replies_with_the_next_id_are_refused_and_their_requests_time_out() {
    let _g = crate::common::one_at_a_time();
    // Request i answered as i+1: with two flows, i+1 belongs to the other flow
    // (and may not be sent yet); the last one's i+1 is outside the schedule.
    let (rep, replies) = run_against(fake(|r| {
        vec![Out {
            bytes: response(Status::Ok, r.type_id, r.id + 1),
            ..ok(r)
        }]
    }));
    assert_eq!(successes(&rep), 0, "{rep:?}");
    let r = rep.rejected;
    assert_eq!(r.unknown_id, 1, "{r:?}");
    assert_eq!(r.future_id + r.wrong_flow + r.unknown_id, replies, "{r:?}");
    assert_eq!(r.total(), replies);
}

#[test]
fn a_reply_to_a_request_not_sent_yet_is_refused() {
    let _g = crate::common::one_at_a_time();
    // Request 0 is answered with the id of the last request, scheduled about
    // 250 ms later; every other request correctly.
    let last = scheduled() - 1;
    assert!(last > 10);
    let (rep, replies) = run_against(fake(move |r| {
        if r.id == 0 {
            vec![Out {
                bytes: response(Status::Ok, r.type_id, last),
                ..ok(r)
            }]
        } else {
            vec![ok(r)]
        }
    }));
    assert_eq!(
        rep.rejected,
        RejectedReplies {
            future_id: 1,
            ..Default::default()
        }
    );
    // The last request still counts its own, later, reply.
    assert_eq!(successes(&rep), rep.scheduled - 1);
    assert_eq!(replies, rep.scheduled);
    let timed_out: Vec<u64> = rep
        .samples
        .iter()
        .filter(|s| s.status.is_none())
        .map(|s| s.id)
        .collect();
    assert_eq!(timed_out, [0]);
}

#[test]
fn a_second_answer_is_a_duplicate_not_a_success() {
    let _g = crate::common::one_at_a_time();
    let (rep, replies) = run_against(fake(|r| vec![ok(r), ok(r)]));
    assert_eq!(replies, 2 * rep.scheduled);
    assert_eq!(successes(&rep), rep.scheduled);
    let r = rep.rejected;
    // The client may stop before reading the very last duplicate: it stops
    // once every request is answered.
    assert!(
        (rep.scheduled - 1..=rep.scheduled).contains(&r.duplicate),
        "{r:?}"
    );
    assert_eq!(r.total(), r.duplicate);
}

#[test]
fn replies_from_another_port_are_refused() {
    let _g = crate::common::one_at_a_time();
    let (rep, replies) = run_against(fake(|r| {
        vec![Out {
            from_other: true,
            ..ok(r)
        }]
    }));
    assert_eq!(successes(&rep), 0);
    assert_eq!(
        rep.rejected,
        RejectedReplies {
            wrong_peer: replies,
            ..Default::default()
        }
    );
    assert_eq!(replies, rep.scheduled);
}

#[test]
fn replies_on_another_flow_are_refused() {
    let _g = crate::common::one_at_a_time();
    // The right id, type and source, sent to the other flow's port (the port
    // the previous request came from; requests alternate between the two
    // flows). The first request has no previous one and is answered correctly.
    let mut previous: Option<SocketAddr> = None;
    let (rep, replies) = run_against(fake(move |r| {
        let to = previous.unwrap_or(r.from);
        assert!(previous.is_none_or(|p| p != r.from), "two flows alternate");
        previous = Some(r.from);
        vec![Out { to, ..ok(r) }]
    }));
    assert_eq!(replies, rep.scheduled);
    assert_eq!(successes(&rep), 1);
    assert_eq!(
        rep.rejected,
        RejectedReplies {
            wrong_flow: replies - 1,
            ..Default::default()
        }
    );
}

#[test]
fn replies_that_do_not_echo_the_type_or_are_no_response_are_refused() {
    let _g = crate::common::one_at_a_time();
    // Per request: the wrong type, a header too short, a request instead of a
    // response, a reply longer than the client's buffer, and an id far out.
    let (rep, replies) = run_against(fake(|r| {
        let mut long = vec![0u8; 3000];
        let h: &mut [u8; HEADER_LEN] = (&mut long[..HEADER_LEN]).try_into().unwrap();
        protocol::write_header(
            h,
            Status::Ok as u8,
            r.type_id,
            3000 - HEADER_LEN as u16,
            r.id,
        );
        let mut as_request = Vec::new();
        protocol::encode_request(&mut as_request, r.type_id, r.id, &[]);
        [
            response(Status::Ok, r.type_id ^ 1, r.id),
            response(Status::Ok, r.type_id, r.id)[..10].to_vec(),
            as_request,
            long,
            response(Status::Ok, r.type_id, r.id + 1_000_000),
        ]
        .into_iter()
        .map(|bytes| Out { bytes, ..ok(r) })
        .collect()
    }));
    let n = rep.scheduled;
    assert_eq!(replies, 5 * n);
    assert_eq!(successes(&rep), 0);
    assert_eq!(
        rep.rejected,
        RejectedReplies {
            wrong_type: n,
            malformed: 2 * n,
            oversize: n,
            unknown_id: n,
            ..Default::default()
        }
    );
}
