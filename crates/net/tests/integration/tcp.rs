//! The TCP front end with RESP (`--protocol resp`) on the RocksDB store:
//! pipelined and byte-by-byte requests answered in order, malformed input
//! answered and the connection closed, the server alive and bounded under a
//! client that never reads, the connection limit, and every request of a
//! connection answered exactly once.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use psp_net::tcp::TcpConfig;
use psp_net::{Server, ServerReport};

use crate::common;

fn server(policy: &str, tcp: TcpConfig) -> Server {
    common::server::resp(
        common::server::kv_service(&psp_proto::resp::Resp),
        policy,
        tcp,
        common::server::runtime(),
    )
}

/// The in-memory store behind RESP, empty.
fn mem_service() -> std::sync::Arc<dyn psp_apps::Service> {
    std::sync::Arc::new(
        psp_apps::memkv::MemService::start(
            &psp_proto::resp::Resp,
            psp_apps::memkv::MemConfig::default(),
        )
        .unwrap(),
    )
}

/// The in-memory store behind RESP under `policy`, the TCP front end's
/// defaults.
fn mem_server(policy: &str) -> Server {
    common::server::resp(
        mem_service(),
        policy,
        TcpConfig::default(),
        common::server::runtime(),
    )
}

fn connect(s: &Server) -> TcpStream {
    let c = TcpStream::connect(s.local_addr()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c
}

fn cmd(args: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    psp_proto::resp::write_command(&args, &mut out);
    out
}

/// Reads until `want` bytes arrived (or the peer closed).
/// Bytes received on `c` and not yet read (the kernel's receive queue).
fn unread_bytes(c: &TcpStream) -> usize {
    use std::os::fd::AsRawFd;
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int through the pointer, which points to
    // `n`, alive for the call; the descriptor is `c`'s, open while borrowed.
    let rc = unsafe { libc::ioctl(c.as_raw_fd(), libc::FIONREAD, &mut n) };
    assert_eq!(rc, 0, "FIONREAD: {}", std::io::Error::last_os_error());
    usize::try_from(n).expect("a byte count")
}

fn read_exactly(c: &mut TcpStream, want: usize) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 65_536];
    while got.len() < want {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => panic!("read after {} of {want} bytes: {e}", got.len()),
        }
    }
    got
}

/// Every request the server read ends in one outcome.
fn assert_balanced(r: &ServerReport) {
    let (n, c) = (&r.net, &r.dispatcher.counts);
    // As on the datagram path: every request read ends refused as
    // malformed, of no type, or arrived at the policy; every refusal of the
    // policy is answered OVERLOADED (BUSY).
    assert_eq!(
        n.received,
        n.bad_request + n.unknown_type + c.arrived,
        "{n:?} {c:?}"
    );
    // The others shed are the admitted ones a worker answered BUSY past
    // their queueing bound (expired).
    assert_eq!(n.overloaded + c.expired, c.shed, "{n:?} {c:?}");
    assert_eq!(c.arrived + c.expired, c.shed + c.admitted, "{c:?}");
    assert_eq!(c.admitted, c.completed + c.expired + c.stranded, "{c:?}");
    assert_eq!(c.stranded, 0, "{c:?}");
}

#[test]
fn pipelined_and_byte_by_byte_requests_are_answered_in_order() {
    let s = server("darc:samples=20", TcpConfig::default());
    let mut c = connect(&s);
    // Pipelined commands in one write, each answered in its place. Requests
    // of one connection may run at once on different workers, so a
    // pipeline's commands are independent here (a client that needs one to
    // see another's effect waits for its reply, below).
    let mut req = Vec::new();
    let mut want = Vec::new();
    for i in 0..50 {
        req.extend(cmd(&["SET", &format!("k{i}"), &format!("v{i}")]));
        want.extend_from_slice(b"+OK\r\n");
    }
    for i in 0..50 {
        req.extend(cmd(&["RPUSH", &format!("list{i}"), "e0"]));
        want.extend_from_slice(b":1\r\n");
    }
    c.write_all(&req).unwrap();
    assert_eq!(read_exactly(&mut c, want.len()), want);
    // A list built one reply at a time, then GETs of the values set above
    // with long LRANGEs among them (another type, another queue): replies
    // still in request order.
    for i in 1..50 {
        c.write_all(&cmd(&["RPUSH", "list", &format!("e{i}")]))
            .unwrap();
        c.write_all(&cmd(&["LLEN", "list0"])).unwrap();
        assert_eq!(
            read_exactly(&mut c, 8),
            b":".iter()
                .chain(format!("{i}\r\n:1\r\n").as_bytes())
                .copied()
                .collect::<Vec<u8>>()[..]
        );
    }
    c.write_all(&cmd(&["LPUSH", "list", "e0"])).unwrap();
    assert_eq!(read_exactly(&mut c, 5), b":50\r\n");
    let mut req = Vec::new();
    let mut want = Vec::new();
    for i in 0..50 {
        req.extend(cmd(&["GET", &format!("k{i}")]));
        want.extend(format!("${}\r\nv{i}\r\n", format!("v{i}").len()).into_bytes());
        if i % 10 == 0 {
            req.extend(cmd(&["LRANGE", "list", "0", "-1"]));
            want.extend_from_slice(b"*50\r\n");
            for e in 0..50 {
                want.extend(format!("${}\r\ne{e}\r\n", format!("e{e}").len()).into_bytes());
            }
        }
    }
    c.write_all(&req).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&read_exactly(&mut c, want.len())),
        String::from_utf8_lossy(&want)
    );
    // One byte at a time: partial reads are stitched together.
    let mut want = Vec::new();
    let mut req = cmd(&["MGET", "k1", "nope", "k2"]);
    want.extend_from_slice(b"*3\r\n$2\r\nv1\r\n$-1\r\n$2\r\nv2\r\n");
    req.extend(cmd(&["INCR", "counter"]));
    want.extend_from_slice(b":1\r\n");
    for b in &req {
        c.write_all(&[*b]).unwrap();
        std::thread::sleep(Duration::from_micros(200));
    }
    assert_eq!(read_exactly(&mut c, want.len()), want);
    // An unknown command is an error reply; the connection goes on.
    c.write_all(&cmd(&["FLY", "away"])).unwrap();
    c.write_all(&cmd(&["PING"])).unwrap();
    let got = read_exactly(
        &mut c,
        b"-ERR unknown command 'FLY', with args beginning with: 'away' \r\n+PONG\r\n".len(),
    );
    assert!(
        got.starts_with(b"-ERR unknown command"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    assert!(got.ends_with(b"+PONG\r\n"));
    drop(c);
    let r = s.stop().unwrap();
    assert_balanced(&r);
    assert_eq!(r.net.received, 100 + 2 * 49 + 1 + 50 + 5 + 2 + 2);
    let tcp = r.net.tcp.as_ref().unwrap();
    assert_eq!(tcp.accepted, 1);
}

#[test]
fn malformed_input_is_answered_and_the_connection_closed() {
    let s = server("c-fcfs", TcpConfig::default());
    for bad in [
        &b"*2\r\n$3\r\nGET\r\n:5\r\n"[..], // an integer where a bulk string goes
        b"*1\r\n$99999999999\r\n",         // a huge declared length
        b"*-5\r\n",                        // a negative count
        b"\x00\x01\x02\xffgarbage\r\n",    // binary garbage
    ] {
        let mut c = connect(&s);
        c.write_all(bad).unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got).unwrap(); // returns once the server closes
        assert!(
            got.starts_with(b"-ERR Protocol error"),
            "{:?}: {}",
            bad,
            String::from_utf8_lossy(&got)
        );
    }
    // A request longer than the limit: answered, closed.
    let mut c = connect(&s);
    let long = "x".repeat(70_000);
    c.write_all(&cmd(&["SET", "k", &long])).unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    assert!(
        got.starts_with(b"-ERR Protocol error: request too large"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    // A truncated request is waited for, then completed.
    let mut c = connect(&s);
    let req = cmd(&["ECHO", "hello"]);
    c.write_all(&req[..7]).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    c.write_all(&req[7..]).unwrap();
    assert_eq!(read_exactly(&mut c, 11), b"$5\r\nhello\r\n");
    // Still serving.
    let mut ok = connect(&s);
    ok.write_all(&cmd(&["PING"])).unwrap();
    assert_eq!(read_exactly(&mut ok, 7), b"+PONG\r\n");
    drop((c, ok));
    let r = s.stop().unwrap();
    assert_balanced(&r);
    let tcp = r.net.tcp.unwrap();
    assert_eq!(tcp.closed_on_error, 5, "{tcp:?}");
    assert_eq!(r.net.bad_request, 5);
}

#[test]
fn a_client_that_never_reads_is_paused_and_others_are_served() {
    let s = server(
        "c-fcfs",
        TcpConfig {
            max_output: 64 << 10,
            max_pipeline: 64,
            ..TcpConfig::default()
        },
    );
    let mut setup = connect(&s);
    setup
        .write_all(&cmd(&["SET", "big", &"v".repeat(1900)]))
        .unwrap();
    assert_eq!(read_exactly(&mut setup, 5), b"+OK\r\n");
    // A million GETs of a 1,900-byte value, never read: 24 MB of requests,
    // more than the kernel's buffers on both sides hold (a few MB each), so
    // the client can send them all only if the server reads them all.
    const GETS: u64 = 1_000_000;
    let mut greedy = connect(&s);
    greedy.set_nonblocking(true).unwrap();
    let one = cmd(&["GET", "big"]);
    let mut sent = 0usize;
    let pending = one.repeat(GETS as usize);
    // Wait for the event itself, not for a time: the server has stopped
    // reading the greedy client (its writes make no progress for four
    // seconds while requests remain unsent, and nothing more arrives for it
    // to not read). A slow or descheduled server only delays this.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut seen = (usize::MAX, sent);
    let mut since = Instant::now();
    loop {
        assert!(
            sent < pending.len(),
            "the server read all {GETS} requests of a client that reads nothing"
        );
        match greedy.write(&pending[sent..]) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("{e}"),
        }
        let now = (unread_bytes(&greedy), sent);
        if now != seen {
            (seen, since) = (now, Instant::now());
        } else if since.elapsed() >= Duration::from_secs(4) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server went on reading a client that reads nothing for 120 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // The server still serves others.
    let mut other = connect(&s);
    other.write_all(&cmd(&["PING"])).unwrap();
    assert_eq!(read_exactly(&mut other, 7), b"+PONG\r\n");
    drop((greedy, other, setup));
    let r = s.stop().unwrap();
    let tcp = r.net.tcp.as_ref().unwrap();
    assert!(
        tcp.paused > 0,
        "{tcp:?}; sent {sent} bytes; {:?}; {:?}",
        r.net,
        r.dispatcher.counts
    );
    // It stopped reading the greedy client once the kernel's buffers and
    // its own bounded output held what the client did not read: at most
    // the kernel's socket buffers' worth of replies (a few MB, a few
    // thousand GETs) beyond it.
    assert!(
        r.net.received < GETS / 10,
        "read {} of {GETS} requests from a client that reads nothing",
        r.net.received
    );
    assert_balanced(&r);
}

#[test]
fn connections_past_the_limit_are_answered_and_closed() {
    let s = server(
        "c-fcfs",
        TcpConfig {
            max_connections: 2,
            ..TcpConfig::default()
        },
    );
    let mut a = connect(&s);
    let mut b = connect(&s);
    for c in [&mut a, &mut b] {
        c.write_all(&cmd(&["PING"])).unwrap();
        assert_eq!(read_exactly(c, 7), b"+PONG\r\n");
    }
    let mut third = connect(&s);
    let mut got = Vec::new();
    third.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"-ERR max number of clients reached\r\n");
    drop((a, b));
    let r = s.stop().unwrap();
    assert_eq!(r.net.tcp.as_ref().unwrap().refused, 1);
}

/// A pipeline's consecutive commands of one type run as jobs of several
/// (`TcpConfig::max_batch`) on the default in-memory store: each command
/// still sees the effects of those before it (a counter incremented and read
/// back in one write, with long LRANGEs of another type among them), every
/// reply arrives in its place, and each command is counted as a request.
#[test]
fn a_pipeline_runs_as_jobs_of_several_commands_with_order_and_counts_kept() {
    for (policy, batch) in [("c-fcfs", 16), ("darc:samples=20", 16), ("c-fcfs", 1)] {
        let service = mem_service();
        let s = common::server::resp(
            service,
            policy,
            TcpConfig {
                max_batch: batch,
                // Count-bound only: on a loaded machine a descheduled
                // worker inflates the measured mean, and the time bound
                // would then keep batches at one command.
                batch_budget: Duration::from_secs(1),
                ..TcpConfig::default()
            },
            common::server::runtime(),
        );
        let mut c = connect(&s);
        let mut sent = 0u64;
        for round in 0..20 {
            let mut req = Vec::new();
            let mut want = Vec::new();
            for i in 1..=50 {
                let n = round * 50 + i;
                req.extend(cmd(&["INCR", "ctr"]));
                want.extend(format!(":{n}\r\n").bytes());
                req.extend(cmd(&["RPUSH", "l", &n.to_string()]));
                want.extend(format!(":{n}\r\n").bytes());
                if i % 25 == 0 {
                    // Another type: it ends a batch and runs alone.
                    req.extend(cmd(&["LRANGE", "l", "0", "-1"]));
                    want.extend(format!("*{n}\r\n").bytes());
                    for e in 1..=n {
                        want.extend(format!("${}\r\n{e}\r\n", e.to_string().len()).bytes());
                    }
                    sent += 1;
                }
                sent += 2;
            }
            c.write_all(&req).unwrap();
            assert_eq!(
                String::from_utf8_lossy(&read_exactly(&mut c, want.len())),
                String::from_utf8_lossy(&want),
                "{policy} batch {batch} round {round}"
            );
        }
        drop(c);
        let r = s.stop().unwrap();
        assert_balanced(&r);
        assert_eq!(r.dispatcher.counts.completed, sent, "{policy}");
        let jobs: u64 = r.served_per_worker.iter().sum();
        if batch == 1 {
            assert_eq!(jobs, sent, "{policy}: one job per command");
        } else {
            // Pipelined short commands went several to a job.
            assert!(jobs < sent / 2, "{policy}: {jobs} jobs for {sent} commands");
        }
    }
}

/// Answers `+OK` to each command and fails on `FAIL`.
#[derive(Debug)]
struct FailOnFail;

impl psp_runtime::Handler for FailOnFail {
    fn handle(
        &mut self,
        ctx: &mut psp_runtime::RequestContext<'_>,
    ) -> Result<(), psp_runtime::HandlerError> {
        if ctx.body.windows(4).any(|w| w == b"FAIL") {
            return Err(psp_runtime::HandlerError::Failed("asked to"));
        }
        ctx.response.extend_from_slice(b"+OK\r\n");
        Ok(())
    }
}

impl psp_apps::Service for FailOnFail {
    fn app(&self) -> &'static str {
        "fail-on-fail"
    }
    fn handler(&self, _worker: usize) -> Box<dyn psp_runtime::Handler> {
        Box::new(FailOnFail)
    }
    fn describe(&self) -> String {
        "+OK, or a failure on FAIL".into()
    }
}

/// One command of a batch that fails is answered with the refusal in its
/// place, the others with their replies, and the counters say so: one
/// HANDLER_ERROR, the rest ok (not the whole job failed).
#[test]
fn a_failed_command_in_a_batch_is_counted_alone() {
    let s = common::server::resp(
        std::sync::Arc::new(FailOnFail),
        "c-fcfs",
        TcpConfig {
            batch_budget: Duration::from_secs(1),
            ..TcpConfig::default()
        },
        common::server::runtime(),
    );
    let mut c = connect(&s);
    let mut req = Vec::new();
    for word in ["SET", "SET", "FAIL", "SET", "SET"] {
        req.extend(cmd(&[word, "k", "v"]));
    }
    c.write_all(&req).unwrap();
    let want = b"+OK\r\n+OK\r\n-ERR internal error\r\n+OK\r\n+OK\r\n";
    assert_eq!(read_exactly(&mut c, want.len()), want);
    drop(c);
    let r = s.stop().unwrap();
    assert_balanced(&r);
    let counts = &r.dispatcher.counts;
    assert_eq!(
        (counts.completed, counts.handler_errors),
        (5, 1),
        "{counts:?}"
    );
    // The five went as one job: the failure is counted alone, not job-wide.
    assert!(r.served_per_worker.iter().sum::<u64>() < 5, "{r:?}");
}

#[test]
fn a_command_past_its_types_queueing_bound_is_answered_busy_unrun() {
    for policy in ["c-fcfs", "darc:samples=20"] {
        let service = mem_service();
        // The short type's bound is 0: a worker always takes a command
        // after it arrived, so every short command expires; the range type
        // is unbounded.
        let s = common::server::resp(
            service,
            policy,
            TcpConfig::default(),
            psp_runtime::RuntimeConfig {
                max_wait: vec![Some(Duration::ZERO), None, None],
                ..common::server::runtime()
            },
        );
        let mut c = connect(&s);
        let mut req = Vec::new();
        for _ in 0..10 {
            req.extend(cmd(&["RPUSH", "l", "a"]));
        }
        req.extend(cmd(&["LRANGE", "l", "0", "-1"]));
        c.write_all(&req).unwrap();
        let busy = b"-BUSY server overloaded, request refused\r\n";
        let mut want = busy.repeat(10);
        // The pushes never ran: the list is empty.
        want.extend_from_slice(b"*0\r\n");
        let got = read_exactly(&mut c, want.len());
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "{policy}"
        );
        drop(c);
        let r = s.stop().unwrap();
        let cnt = &r.dispatcher.counts;
        assert_eq!(cnt.expired, 10, "{policy}: {cnt:?}");
        assert_eq!(cnt.completed, 1, "{policy}: {cnt:?}");
        assert_eq!(r.net.overloaded, 0, "{policy}: {:?}", r.net);
        assert_balanced(&r);
    }
}

/// BLPOP, BRPOP, BLMOVE (and BZPOPMIN, BLMPOP, BZMPOP) park the connection (holding no
/// worker: other clients are served meanwhile), are admitted again when a
/// push comes (one that still finds nothing parks again), keep the
/// connection's later commands behind them, and answer Redis's null at
/// their timeout.
#[test]
fn blocking_commands_park_until_a_push_or_their_timeout() {
    for policy in ["c-fcfs", "darc:samples=20"] {
        let s = mem_server(policy);
        // Two waiters: the first on q, with a GET pipelined behind its
        // BLPOP; the second on two other lists.
        let mut first = connect(&s);
        first
            .write_all(&[cmd(&["BLPOP", "q", "0"]), cmd(&["GET", "after"])].concat())
            .unwrap();
        let mut second = connect(&s);
        second
            .write_all(&cmd(&["BRPOP", "other", "q2", "0"]))
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        // Meanwhile another client is served (both workers are free).
        let mut pusher = connect(&s);
        pusher.write_all(&cmd(&["SET", "after", "v"])).unwrap();
        assert_eq!(read_exactly(&mut pusher, 5), b"+OK\r\n");
        assert_eq!(
            unread_bytes(&first),
            0,
            "{policy}: parked, nothing answered"
        );
        pusher.write_all(&cmd(&["RPUSH", "q", "a"])).unwrap();
        assert_eq!(read_exactly(&mut pusher, 4), b":1\r\n");
        // The first takes it, and its GET then runs; the second, woken
        // too, finds nothing and parks again.
        let want = b"*2\r\n$1\r\nq\r\n$1\r\na\r\n$1\r\nv\r\n";
        assert_eq!(read_exactly(&mut first, want.len()), want, "{policy}");
        pusher.write_all(&cmd(&["LPUSH", "q2", "b"])).unwrap();
        assert_eq!(read_exactly(&mut pusher, 4), b":1\r\n");
        let want = b"*2\r\n$2\r\nq2\r\n$1\r\nb\r\n";
        assert_eq!(read_exactly(&mut second, want.len()), want, "{policy}");
        // A timeout answers Redis's null, after about its time.
        let t = Instant::now();
        second
            .write_all(&cmd(&["BLMOVE", "q", "d", "LEFT", "RIGHT", "0.2"]))
            .unwrap();
        assert_eq!(read_exactly(&mut second, 5), b"*-1\r\n", "{policy}");
        let waited = t.elapsed();
        assert!(
            waited >= Duration::from_millis(190) && waited < Duration::from_secs(3),
            "{policy}: {waited:?}"
        );
        // A sorted set's blocking pop, woken by a ZADD.
        second.write_all(&cmd(&["BZPOPMIN", "zq", "0"])).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        pusher.write_all(&cmd(&["ZADD", "zq", "5", "m"])).unwrap();
        assert_eq!(read_exactly(&mut pusher, 4), b":1\r\n");
        let want = b"*3\r\n$2\r\nzq\r\n$1\r\nm\r\n$1\r\n5\r\n";
        assert_eq!(read_exactly(&mut second, want.len()), want, "{policy}");
        // The multi-key pops, woken the same way: the first key with data.
        second
            .write_all(&cmd(&[
                "BLMPOP", "0", "2", "mq1", "mq2", "RIGHT", "COUNT", "2",
            ]))
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        pusher
            .write_all(&cmd(&["RPUSH", "mq2", "a", "b", "c"]))
            .unwrap();
        assert_eq!(read_exactly(&mut pusher, 4), b":3\r\n");
        let want = b"*2\r\n$3\r\nmq2\r\n*2\r\n$1\r\nc\r\n$1\r\nb\r\n";
        assert_eq!(read_exactly(&mut second, want.len()), want, "{policy}");
        second
            .write_all(&cmd(&["BZMPOP", "0", "1", "mz", "MAX"]))
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        pusher
            .write_all(&cmd(&["ZADD", "mz", "1", "x", "2", "y"]))
            .unwrap();
        assert_eq!(read_exactly(&mut pusher, 4), b":2\r\n");
        let want = b"*2\r\n$2\r\nmz\r\n*1\r\n*2\r\n$1\r\ny\r\n$1\r\n2\r\n";
        assert_eq!(read_exactly(&mut second, want.len()), want, "{policy}");
        drop((first, second, pusher));
        let r = s.stop().unwrap();
        // The BLMOVE parked for its timeout whatever the machine's speed;
        // the others park when they arrive before their push (the sleeps
        // give them time, and the replies above are the same either way).
        let tcp = r.net.tcp.as_ref().unwrap();
        assert!(tcp.parked >= 1, "{policy}: {tcp:?}");
        // The one timeout reply the client saw (BLMOVE's) is counted.
        assert_eq!(tcp.parked_timeouts, 1, "{policy}: {tcp:?}");
        assert_balanced(&r);
    }
}

/// The network path's system calls are counted at each call: one GET at a
/// time over one connection costs at least a read and a write each, and
/// the count stays within a few calls of that (epoll passes, the accept,
/// the close, the net thread's waits). An idle net thread also wakes at
/// least every 5 ms (a wait, an epoll pass, an eventfd read): the bound
/// allows that much for the run's wall time, which a loaded machine
/// stretches.
#[test]
fn the_network_system_calls_are_counted_per_request() {
    let s = mem_server("c-fcfs");
    let t = Instant::now();
    let mut c = connect(&s);
    for _ in 0..200 {
        c.write_all(&cmd(&["GET", "k"])).unwrap();
        assert_eq!(read_exactly(&mut c, 5), b"$-1\r\n");
    }
    drop(c);
    let r = s.stop().unwrap();
    let idle_wakes = t.elapsed().as_millis() as u64 / 5 + 1;
    let n = r.net.syscalls.expect("TCP counts its system calls");
    assert!(
        (400..=200 * 12 + 4 * idle_wakes).contains(&n),
        "{n} system calls for 200 GETs in {:?}",
        t.elapsed()
    );
}

/// XREAD BLOCK parks like the blocking pops: `$` means the last id when it
/// blocked, so the entry an XADD brings after it is what it reads; a
/// timeout answers Redis's null.
#[test]
fn xread_block_waits_for_the_entry_added_after_it() {
    for policy in ["c-fcfs", "darc:samples=20"] {
        let s = mem_server(policy);
        let mut p = connect(&s);
        p.write_all(&cmd(&["XADD", "q", "5-0", "old", "x"]))
            .unwrap();
        assert_eq!(read_exactly(&mut p, 9), b"$3\r\n5-0\r\n");
        let mut r = connect(&s);
        r.write_all(&cmd(&["XREAD", "BLOCK", "0", "STREAMS", "q", "$"]))
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(unread_bytes(&r), 0, "{policy}: parked");
        p.write_all(&cmd(&["XADD", "q", "7-0", "f", "v"])).unwrap();
        assert_eq!(read_exactly(&mut p, 9), b"$3\r\n7-0\r\n");
        let want = b"*1\r\n*2\r\n$1\r\nq\r\n*1\r\n*2\r\n$3\r\n7-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n";
        assert_eq!(read_exactly(&mut r, want.len()), want, "{policy}");
        let t = Instant::now();
        r.write_all(&cmd(&["XREAD", "BLOCK", "200", "STREAMS", "q", "$"]))
            .unwrap();
        assert_eq!(read_exactly(&mut r, 5), b"*-1\r\n", "{policy}");
        assert!(t.elapsed() >= Duration::from_millis(190), "{policy}");
        drop((p, r));
        drop(s.stop().unwrap());
    }
}

/// Pub/sub between connections: a RESP3 listener gets push messages, a
/// RESP2 one may only (un)subscribe and PING while it listens, and one that
/// never reads is cut off at the output bound (counted), the publisher
/// unharmed; under c-fcfs and DARC.
#[test]
fn pubsub_delivers_in_each_protocol_and_cuts_off_a_listener_that_never_reads() {
    for policy in ["c-fcfs", "darc:samples=20"] {
        let s = mem_server(policy);
        let ch = format!("{policy}-ch");
        let mut l3 = connect(&s);
        l3.write_all(&[cmd(&["HELLO", "3"]), cmd(&["SUBSCRIBE", &ch])].concat())
            .unwrap();
        let mut l2 = connect(&s);
        l2.write_all(&cmd(&["PSUBSCRIBE", "*-ch"])).unwrap();
        let confirm = b"*3\r\n$10\r\npsubscribe\r\n$4\r\n*-ch\r\n:1\r\n";
        assert_eq!(read_exactly(&mut l2, confirm.len()), confirm);
        let mut p = connect(&s);
        // HELLO's map first, then the confirmation as a push.
        let mut hello = Vec::new();
        while !hello
            .ends_with(format!("$9\r\nsubscribe\r\n${}\r\n{ch}\r\n:1\r\n", ch.len()).as_bytes())
        {
            hello.extend(read_exactly(&mut l3, 1));
        }
        assert!(hello.starts_with(b"%"), "{policy}: {hello:?}");
        p.write_all(&cmd(&["PUBLISH", &ch, "hi"])).unwrap();
        assert_eq!(read_exactly(&mut p, 4), b":2\r\n", "{policy}");
        let want = format!(
            ">3\r\n$7\r\nmessage\r\n${}\r\n{ch}\r\n$2\r\nhi\r\n",
            ch.len()
        );
        assert_eq!(
            read_exactly(&mut l3, want.len()),
            want.as_bytes(),
            "{policy}"
        );
        let want = format!(
            "*4\r\n$8\r\npmessage\r\n$4\r\n*-ch\r\n${}\r\n{ch}\r\n$2\r\nhi\r\n",
            ch.len()
        );
        assert_eq!(
            read_exactly(&mut l2, want.len()),
            want.as_bytes(),
            "{policy}"
        );
        // RESP2 while listening: GET refused, PING in its two-element form.
        l2.write_all(&[cmd(&["GET", "k"]), cmd(&["PING"])].concat())
            .unwrap();
        let want = b"-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n*2\r\n$4\r\npong\r\n$0\r\n\r\n";
        assert_eq!(read_exactly(&mut l2, want.len()), want, "{policy}");
        // l2 leaves; l3 stops reading: 1,000 messages of 60 kB (a
        // request's bound is 64 KiB) pass the 32 MiB bound and what the
        // kernel's socket buffers hold.
        l2.write_all(&cmd(&["PUNSUBSCRIBE"])).unwrap();
        let want = b"*3\r\n$12\r\npunsubscribe\r\n$4\r\n*-ch\r\n:0\r\n";
        assert_eq!(read_exactly(&mut l2, want.len()), want, "{policy}");
        let big = "x".repeat(60_000);
        for _ in 0..1000 {
            p.write_all(&cmd(&["PUBLISH", &ch, &big])).unwrap();
            let r = read_exactly(&mut p, 4);
            assert!(r == b":1\r\n" || r == b":0\r\n", "{policy}: {r:?}");
        }
        // The publisher is served on; the listener is gone.
        let deadline = Instant::now() + Duration::from_secs(5);
        while psp_proto::pubsub::registry().numsub(ch.as_bytes()) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        p.write_all(&cmd(&["PUBLISH", &ch, "after"])).unwrap();
        assert_eq!(read_exactly(&mut p, 4), b":0\r\n", "{policy}: cut off");
        drop((l2, l3, p));
        let r = s.stop().unwrap();
        let tcp = r.net.tcp.as_ref().expect("tcp counters");
        assert_eq!(tcp.closed_on_pubsub_overflow, 1, "{policy}: {tcp:?}");
        assert!(tcp.pubsub_messages >= 4, "{policy}: {tcp:?}");
    }
}

/// Reads one RESP bulk string's payload (`$<n>\r\n<payload>\r\n`), and
/// nothing after it.
fn read_bulk(c: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        assert_eq!(c.read(&mut byte).unwrap(), 1, "closed: {got:?}");
        got.push(byte[0]);
        if got.ends_with(b"\r\n") {
            break;
        }
    }
    assert!(got.starts_with(b"$"), "{:?}", String::from_utf8_lossy(&got));
    let n: usize = std::str::from_utf8(&got[1..got.len() - 2])
        .unwrap()
        .parse()
        .unwrap();
    let mut body = vec![0u8; n + 2];
    c.read_exact(&mut body).unwrap();
    String::from_utf8(body[..n].to_vec()).unwrap()
}

/// CLIENT LIST shows every open connection with its peer address, name
/// and last command, and CLIENT KILL closes the one it names (by address
/// or by ID; not the caller, unless SKIPME no), counted in the summary.
#[test]
fn client_list_names_every_connection_and_client_kill_closes_the_one_named() {
    let s = mem_server("c-fcfs");
    let mut victim = connect(&s);
    victim
        .write_all(&[cmd(&["CLIENT", "SETNAME", "victim"]), cmd(&["GET", "k"])].concat())
        .unwrap();
    assert_eq!(read_exactly(&mut victim, 10), b"+OK\r\n$-1\r\n");
    let mut admin = connect(&s);
    admin.write_all(&cmd(&["CLIENT", "LIST"])).unwrap();
    let list = read_bulk(&mut admin);
    let victim_addr = victim.local_addr().unwrap().to_string();
    let line = list
        .lines()
        .find(|l| l.contains(&format!("addr={victim_addr} ")))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(
        line.contains(" name=victim ") && line.contains(" cmd=get "),
        "{line}"
    );
    assert!(
        line.contains(&format!(" laddr={} ", s.local_addr())),
        "{line} (server {})",
        s.local_addr()
    );
    let admin_line = list
        .lines()
        .find(|l| l.contains(&format!("addr={} ", admin.local_addr().unwrap())))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(admin_line.contains(" cmd=client|list "), "{admin_line}");
    // By an address no connection has; then the victim's.
    admin
        .write_all(&cmd(&["CLIENT", "KILL", "127.0.0.1:1"]))
        .unwrap();
    let want = b"-ERR No such client\r\n";
    assert_eq!(read_exactly(&mut admin, want.len()), want);
    admin
        .write_all(&cmd(&[
            "CLIENT",
            "KILL",
            "ADDR",
            &victim_addr,
            "SKIPME",
            "yes",
        ]))
        .unwrap();
    assert_eq!(read_exactly(&mut admin, 4), b":1\r\n");
    // The victim's socket ends (EOF) once the front end's next pass runs.
    victim
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(victim.read(&mut buf).unwrap_or(0), 0, "closed");
    // By ID: the caller itself is skipped by default.
    let id_line = list
        .lines()
        .find(|l| l.contains("cmd=client|list"))
        .unwrap();
    let id = id_line.split(' ').next().unwrap().trim_start_matches("id=");
    admin
        .write_all(&cmd(&["CLIENT", "KILL", "ID", id]))
        .unwrap();
    assert_eq!(read_exactly(&mut admin, 4), b":0\r\n");
    admin
        .write_all(&cmd(&["CLIENT", "KILL", "TYPE", "bogus"]))
        .unwrap();
    let want = b"-ERR Unknown client type 'bogus'\r\n";
    assert_eq!(read_exactly(&mut admin, want.len()), want);
    admin.write_all(&cmd(&["PING"])).unwrap();
    assert_eq!(read_exactly(&mut admin, 7), b"+PONG\r\n");
    drop(admin);
    let r = s.stop().unwrap();
    let tcp = r.net.tcp.as_ref().expect("tcp counters");
    assert_eq!(tcp.closed_by_kill, 1, "{tcp:?}");
}

/// redis-py as users run it (Debian's python3-redis, installed by
/// scripts/deps.sh): its Lock, register_script, CLIENT LIST, a consumer
/// parked in BLPOP, a pub/sub round trip, and an RQ worker (python3-rq)
/// consuming a queued job (tests/frameworks/redis_frameworks.py), under
/// c-fcfs and the default policy's family.
#[test]
fn redis_py_and_an_rq_worker_run_against_psp_serve() {
    for policy in ["c-fcfs", "darc-fair:samples=20"] {
        let s = mem_server(policy);
        let (ok, text) = common::run_framework("redis_frameworks.py", s.local_addr().port());
        assert!(ok, "{policy}: {text}");
        assert!(text.contains("blpop ok"), "{policy}: {text}");
        assert!(text.contains("pubsub ok"), "{policy}: {text}");
        assert!(text.contains("rq ok"), "{policy}: {text}");
        drop(s.stop().unwrap());
    }
}

/// Reads one reply line (up to its `\r\n`).
fn read_line(c: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n") {
        match c.read(&mut byte) {
            Ok(1) => got.push(byte[0]),
            other => panic!("read after {:?}: {other:?}", String::from_utf8_lossy(&got)),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// A script that loops, behind `psp serve` as a client sees it: once it is
/// past `busy-reply-threshold`, a command on its key answers Redis's BUSY
/// (others are served), SCRIPT KILL stops it from another connection, and
/// its caller gets Redis's error; then its key is served again. Also with
/// worker 0 on the dispatcher's thread, where c-fcfs dispatches the script
/// to worker 0: it runs on worker 0's spare thread, so the input (the
/// SCRIPT KILL) is still read.
#[test]
fn script_kill_stops_a_busy_script_behind_psp_serve() {
    const BUSY: &str = "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
    for (policy, inline) in [
        ("c-fcfs", psp_runtime::InlineWorker::Off),
        ("darc-fair:samples=20", psp_runtime::InlineWorker::Off),
        ("c-fcfs", psp_runtime::InlineWorker::On),
        (
            "darc-fair:samples=20,mech=none",
            psp_runtime::InlineWorker::On,
        ),
    ] {
        let s = common::server::resp(
            mem_service(),
            policy,
            TcpConfig::default(),
            psp_runtime::RuntimeConfig {
                inline_worker: inline,
                ..common::server::runtime()
            },
        );
        let policy = format!("{policy}, worker 0 inline {inline:?}");
        let mut admin = connect(&s);
        admin
            .write_all(&cmd(&["CONFIG", "SET", "busy-reply-threshold", "50"]))
            .unwrap();
        assert_eq!(read_line(&mut admin), "+OK\r\n", "{policy}");
        let mut looping = connect(&s);
        looping
            .write_all(&cmd(&["EVAL", "while true do end", "1", "k"]))
            .unwrap();
        // Until the script holds its key: nil before, BUSY after (an
        // event: the script never ends by itself).
        loop {
            admin.write_all(&cmd(&["GET", "k"])).unwrap();
            match read_line(&mut admin).as_str() {
                "$-1\r\n" => std::thread::sleep(Duration::from_millis(5)),
                reply => {
                    assert_eq!(reply, BUSY, "{policy}");
                    break;
                }
            }
        }
        admin.write_all(&cmd(&["PING"])).unwrap();
        assert_eq!(read_line(&mut admin), "+PONG\r\n", "{policy}");
        admin.write_all(&cmd(&["SCRIPT", "KILL"])).unwrap();
        assert_eq!(read_line(&mut admin), "+OK\r\n", "{policy}");
        let killed = read_line(&mut looping);
        assert!(
            killed.starts_with("-ERR Script killed by user with SCRIPT KILL... script: ")
                && killed.ends_with(", on @user_script:1.\r\n"),
            "{policy}: {killed}"
        );
        admin.write_all(&cmd(&["GET", "k"])).unwrap();
        assert_eq!(read_line(&mut admin), "$-1\r\n", "{policy}");
        admin.write_all(&cmd(&["SCRIPT", "KILL"])).unwrap();
        assert_eq!(
            read_line(&mut admin),
            "-NOTBUSY No scripts in execution right now.\r\n",
            "{policy}"
        );
        drop((admin, looping));
        drop(s.stop().unwrap());
    }
}
