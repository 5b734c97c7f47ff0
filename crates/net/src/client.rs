//! The open-loop load client behind `psp load`: Poisson arrivals of a workload's
//! request mix at a fixed rate (or of its phases, one after the other, each at
//! its own rate), sent on schedule whatever the server does (so
//! queueing at the server shows up as latency, never as a slower client), over
//! many flows (one socket and source port each), with a sender thread and a
//! receiver thread.
//!
//! Latency runs from a request's *scheduled* send time to the arrival of its
//! response, so a client that falls behind its schedule cannot hide server
//! queueing (no coordinated omission); the report says how far behind the sender
//! fell. A request with no response within the timeout is a timeout; the client
//! stops at the latest one timeout after its last send, so a dead or stuck server
//! never hangs it.
//!
//! A reply counts only if it answers, from the server's address, a request this
//! client sent on the very flow it arrives on, echoes the request's type, and is
//! the first answer to it. Anything else (another sender, a truncated or
//! malformed datagram, an id outside the schedule or not sent yet, a reply on
//! the wrong flow or of the wrong type, a second answer) is refused and counted
//! in [`RejectedReplies`], never as a success: a request whose only replies were
//! refused ends as a timeout. Every scheduled request ends in exactly one outcome
//! (a status, or a timeout); every datagram received lands in exactly one
//! counter (an answer, a late answer, or one kind of refusal).

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use psp_metrics::{
    Extra, LoadedServer, NetExtra, PointMeta, PointResult, Recorder, ResponsesByStatus, SendLag,
};
use psp_runtime::Clock;
use psp_runtime::pool::MAX_GENERATED_BODY;
use psp_runtime::{BodyEncoder, EncoderSource};
use psp_workload::{ArrivalSource, Arrivals, Workload};

use crate::datapath::PeerAddr;
use crate::pool::PACKET_BYTES;
use crate::protocol::{self, Status};
use crate::udp::{MAX_BATCH, bind_udp, poll_fds, recv_many};

/// One `psp load` run.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// The server.
    pub server: SocketAddr,
    /// The request mix and service times.
    pub workload: Workload,
    /// The request bodies' encoders, from the application whose requests are
    /// sent (the synthetic one carries each request's service time).
    pub bodies: EncoderSource,
    /// Offered rate (a phased workload's phases may set their own).
    pub rate_rps: f64,
    /// Length of the sending period (a phased workload's is the sum of its
    /// phases: `Workload::arrival_period_ns`).
    pub duration_ns: u64,
    /// Workers of the server: a phase's `load` is a fraction of its peak on
    /// them.
    pub workers: usize,
    /// Requests scheduled before this are sent but not measured.
    pub warmup_ns: u64,
    /// Arrival process seed.
    pub seed: u64,
    /// Sockets (source ports) requests are spread over, round robin.
    pub flows: usize,
    /// How long a request may wait for its response.
    pub timeout: Duration,
    /// Keep one [`Sample`] per request.
    pub keep_samples: bool,
    /// Run the client's threads in the real-time class (SCHED_FIFO; nice -10 if
    /// refused), best effort and only up to [`MAX_RAISED_RPS`], where the sender
    /// mostly sleeps: when the server shares the machine's cores, a sender woken
    /// late by busy workers would add the delay to every latency it measures.
    /// Leave it off when the client must not take CPU from the server
    /// (saturation benchmarks).
    pub raise_priority: bool,
    /// Kernel UDP sockets (one per flow), or AF_XDP (flow `i` sends from
    /// port [`crate::xdp::CLIENT_BASE_PORT`]` + i`; the server must be a
    /// neighbour on an attached IPv4 subnet).
    pub datapath: crate::server::DatapathKind,
}

/// Where requests leave: one kernel UDP socket per flow, or an AF_XDP TX
/// ring.
enum Outbound {
    Udp {
        flows: Vec<UdpSocket>,
        server: SocketAddr,
    },
    Xdp(crate::xdp::XdpSender),
}

impl Outbound {
    #[inline]
    fn send(&mut self, flow: usize, dgram: &[u8]) -> io::Result<()> {
        match self {
            Outbound::Udp { flows, server } => flows[flow].send_to(dgram, *server).map(|_| ()),
            Outbound::Xdp(x) => x.send(flow, dgram),
        }
    }
}

/// Where replies arrive: the flows' UDP sockets, or AF_XDP RX rings.
enum Inbound {
    Udp(Vec<UdpSocket>),
    Xdp(crate::xdp::XdpReceiver),
}

/// What happened to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Request id (its index in the schedule).
    pub id: u64,
    /// Request type.
    pub type_id: u16,
    /// Scheduled send time, from the start of the run.
    pub scheduled_ns: u64,
    /// Scheduled send to response; 0 for a timeout.
    pub latency_ns: u64,
    /// The service time the request asked for.
    pub service_ns: u64,
    /// The response's status; `None`: timed out.
    pub status: Option<Status>,
    /// Scheduled after the warm-up.
    pub measured: bool,
}

/// Progress as seen from outside the run.
#[derive(Debug, Default)]
pub struct Progress {
    /// Requests sent so far.
    pub sent: AtomicU64,
    /// Responses received so far.
    pub received: AtomicU64,
}

/// Everything a run measured.
#[derive(Debug, Clone)]
pub struct LoadReport {
    /// Measured (after warm-up): OK latencies by type, OVERLOADED replies as drops,
    /// timeouts and error replies.
    pub recorder: Recorder,
    /// Requests in the schedule.
    pub scheduled: u64,
    /// Requests scheduled after the warm-up.
    pub measured_generated: u64,
    /// Requests the OS accepted to send.
    pub sent: u64,
    /// Sends the OS refused (those requests then time out).
    pub send_errors: u64,
    /// Responses by status, warm-up included.
    pub responses: [u64; 5],
    /// Responses after the timeout (counted as timeouts).
    pub late: u64,
    /// Datagrams refused as answers (none of them counts as one).
    pub rejected: RejectedReplies,
    /// How far the sender fell behind its schedule: median, p99 and max.
    pub send_lag_ns: [u64; 3],
    /// One entry per request, when asked for.
    pub samples: Vec<Sample>,
    /// Wall time of the run.
    pub wall: Duration,
}

/// Datagrams the client refused as answers, by reason (the point document's
/// `rejected_replies`).
pub use psp_metrics::RejectedReplies;

#[derive(Debug, Clone, Copy)]
struct Planned {
    at_ns: u64,
    service_ns: u64,
    type_id: u16,
}

/// Above this rate the client never raises its priority (see
/// [`LoadConfig::raise_priority`]).
pub const MAX_RAISED_RPS: f64 = 5_000.0;

/// Request state kept by the receiver.
const PENDING: u8 = 0;
const LATE: u8 = 0xff;

/// Request state kept by the sender, read by the receiver.
const NOT_SENT: u8 = 0;
/// Set before the send (a reply can be received before the send returns).
const SENT: u8 = 1;
/// The OS refused the send: no reply can answer it.
const SEND_FAILED: u8 = 2;

/// The flow (socket) request `id` is sent on: round robin.
#[inline]
fn flow_of(id: usize, flows: usize) -> usize {
    id % flows
}

/// Where replies must come from: the server's address, with an unspecified IP
/// (which Linux reaches as the local host) replaced by the loopback one, the
/// source replies from the local host carry.
fn reply_source(server: SocketAddr) -> SocketAddr {
    let ip = match server.ip() {
        std::net::IpAddr::V4(a) if a.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(a) if a.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    SocketAddr::new(ip, server.port())
}

/// Runs the load: returns when every request is answered or timed out.
///
/// # Errors
/// The client's sockets cannot be set up.
pub fn run_load(cfg: &LoadConfig, progress: &Progress) -> io::Result<LoadReport> {
    let encoder = cfg
        .bodies
        .make(cfg.seed ^ 0xb0d1)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let plan = plan_arrivals(cfg);
    let flows = open_flows(cfg)?;
    let started = std::time::Instant::now();
    let (send_out, mut rx_out) = send_and_receive(cfg, &plan, flows, encoder, progress);
    time_out_pending(cfg, &plan, &mut rx_out);
    Ok(report(cfg, &plan, send_out, rx_out, started))
}

/// The whole schedule, drawn before the first send.
fn plan_arrivals(cfg: &LoadConfig) -> Vec<Planned> {
    let mut arrivals = Arrivals::new(
        &cfg.workload,
        cfg.rate_rps,
        cfg.duration_ns,
        cfg.workers,
        cfg.seed,
    );
    let expected = cfg
        .workload
        .expected_requests(cfg.rate_rps, cfg.duration_ns, cfg.workers);
    let mut plan = Vec::with_capacity((expected * 1.1) as usize + 16);
    while let Some(a) = arrivals.next_arrival() {
        plan.push(Planned {
            at_ns: a.at_ns,
            service_ns: a.service_ns,
            type_id: a.type_id,
        });
    }
    plan
}

/// The client's flows, both ways, and where replies must come from.
struct Flows {
    outbound: Outbound,
    inbound: Inbound,
    /// Where replies must come from.
    server: SocketAddr,
    /// Number of flows.
    count: usize,
}

/// Opens the flows on the configured datapath.
fn open_flows(cfg: &LoadConfig) -> io::Result<Flows> {
    let local: SocketAddr = if cfg.server.is_ipv4() {
        "0.0.0.0:0".parse().expect("literal address")
    } else {
        "[::]:0".parse().expect("literal address")
    };
    // Flows are not connected: a connected socket would drop datagrams from
    // other senders in the kernel, unseen; the receiver checks and counts them.
    // (The price: a route lookup per send, about 0.3-0.5 us on loopback.)
    let server = reply_source(cfg.server);
    let count = cfg.flows.max(1);
    let (outbound, inbound) = match &cfg.datapath {
        crate::server::DatapathKind::Udp => {
            let mut flows = Vec::with_capacity(count);
            for _ in 0..count {
                flows.push(bind_udp(local, false)?);
            }
            let rx_flows: Vec<UdpSocket> = flows
                .iter()
                .map(|s| s.try_clone())
                .collect::<io::Result<_>>()?;
            (Outbound::Udp { flows, server }, Inbound::Udp(rx_flows))
        }
        crate::server::DatapathKind::Xdp(x) => {
            let (tx, rx) = crate::xdp::open_client(x, server, count)?;
            (Outbound::Xdp(tx), Inbound::Xdp(rx))
        }
        crate::server::DatapathKind::Tcp(..) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the load client speaks this project's protocol over udp or xdp (drive a RESP server with redis-benchmark)",
            ));
        }
    };
    Ok(Flows {
        outbound,
        inbound,
        server,
        count,
    })
}

/// Tunes the calling load thread; returns whether it runs in the
/// real-time class.
fn tune_thread(cfg: &LoadConfig) -> bool {
    psp_runtime::runtime::set_timer_slack_1ns();
    // Only a mostly sleeping sender may outrank the server: at higher rates
    // it polls, and a real-time poller would starve a co-located server.
    if !(cfg.raise_priority && cfg.rate_rps <= MAX_RAISED_RPS) {
        return false;
    }
    let realtime = psp_runtime::runtime::set_thread_realtime();
    if !realtime {
        psp_runtime::runtime::set_thread_nice(-10);
    }
    realtime
}

/// Runs the sender and the receiver threads to the end of the run.
fn send_and_receive(
    cfg: &LoadConfig,
    plan: &[Planned],
    flows: Flows,
    encoder: Box<dyn BodyEncoder>,
    progress: &Progress,
) -> (SendOut, RecvOut) {
    let Flows {
        mut outbound,
        inbound,
        server,
        count: n_flows,
    } = flows;
    let sent: Vec<AtomicU8> = plan.iter().map(|_| AtomicU8::new(NOT_SENT)).collect();
    let clock = Clock::new();
    // Start a little in the future so the first sends are not already late.
    let base = clock.now_ns() + 2_000_000;
    // When the sender finished (u64::MAX: still sending).
    let sender_done_at = AtomicU64::new(u64::MAX);
    let sent = &sent[..];
    std::thread::scope(|scope| {
        let sender = scope.spawn(|| {
            let never_poll = tune_thread(cfg);
            let out = send_all(
                plan,
                sent,
                &mut outbound,
                n_flows,
                encoder,
                &clock,
                base,
                never_poll,
                progress,
            );
            sender_done_at.store(clock.now_ns(), Ordering::Release);
            out
        });
        let receiver = scope.spawn(|| {
            tune_thread(cfg);
            let rx = Receiver {
                cfg,
                plan,
                sent,
                server,
                flows: n_flows,
                base,
                timeout_ns: cfg.timeout.as_nanos() as u64,
            };
            rx.run(inbound, &clock, &sender_done_at, progress)
        });
        (
            sender.join().expect("sender thread"),
            receiver.join().expect("receiver thread"),
        )
    })
}

/// Whatever is still pending (or was answered late) timed out: records it.
fn time_out_pending(cfg: &LoadConfig, plan: &[Planned], rx_out: &mut RecvOut) {
    let mut timeouts_measured = 0u64;
    for (id, p) in plan.iter().enumerate() {
        let st = rx_out.states[id];
        if st == PENDING || st == LATE {
            let measured = p.at_ns >= cfg.warmup_ns;
            if measured {
                rx_out.recorder.record_timeout(p.type_id as usize);
                timeouts_measured += 1;
            }
            if cfg.keep_samples {
                rx_out.samples.push(Sample {
                    id: id as u64,
                    type_id: p.type_id,
                    scheduled_ns: p.at_ns,
                    latency_ns: 0,
                    service_ns: p.service_ns,
                    status: None,
                    measured,
                });
            }
        }
    }
    debug_assert_eq!(timeouts_measured, rx_out.recorder.timeouts());
}

/// The run's report, from what both threads saw.
fn report(
    cfg: &LoadConfig,
    plan: &[Planned],
    send_out: SendOut,
    rx_out: RecvOut,
    started: std::time::Instant,
) -> LoadReport {
    let mut lags = send_out.lags;
    lags.sort_unstable();
    let at = |q: f64| {
        lags.get(((lags.len() as f64 * q) as usize).min(lags.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    LoadReport {
        recorder: rx_out.recorder,
        scheduled: plan.len() as u64,
        measured_generated: plan.iter().filter(|p| p.at_ns >= cfg.warmup_ns).count() as u64,
        sent: send_out.sent,
        send_errors: send_out.errors,
        responses: rx_out.responses,
        late: rx_out.late,
        rejected: rx_out.rejected,
        send_lag_ns: [at(0.5), at(0.99), lags.last().copied().unwrap_or(0)],
        samples: rx_out.samples,
        wall: started.elapsed(),
    }
}

struct SendOut {
    sent: u64,
    errors: u64,
    lags: Vec<u64>,
}

/// Sends every request on schedule, to `server` on its flow, marking each in
/// `sent` before its send (a reply may arrive before the send returns). Each
/// request's body is written (by `encoder`) before its due time.
#[allow(clippy::too_many_arguments)]
fn send_all(
    plan: &[Planned],
    sent: &[AtomicU8],
    out_path: &mut Outbound,
    flows: usize,
    mut encoder: Box<dyn BodyEncoder>,
    clock: &Clock,
    base: u64,
    never_poll: bool,
    progress: &Progress,
) -> SendOut {
    let mut buf = Vec::with_capacity(protocol::HEADER_LEN + MAX_GENERATED_BODY);
    let mut body = Vec::with_capacity(MAX_GENERATED_BODY);
    let mut out = SendOut {
        sent: 0,
        errors: 0,
        lags: Vec::with_capacity(plan.len()),
    };
    for (id, p) in plan.iter().enumerate() {
        let due = base + p.at_ns;
        body.clear();
        encoder.encode(p.type_id, p.service_ns, &mut body);
        protocol::encode_request(&mut buf, p.type_id, id as u64, &body);
        loop {
            let now = clock.now_ns();
            if now >= due {
                break;
            }
            // Sleep through long gaps (waking early), yield the core through
            // shorter ones (a co-located server may need it), spin the last
            // stretch. A real-time sender never polls: its yield does not let
            // normal threads run, so yielding or spinning would take the core
            // from a co-located server for the whole gap (server-side latency
            // went from ~60 us to milliseconds, and to a second under contention,
            // at 5,000 requests/s). It sleeps to the due time instead: the
            // wake-up's lateness shows up as send lag, and as latency.
            let left = due - now;
            if never_poll {
                std::thread::sleep(Duration::from_nanos(left));
            } else if left > 150_000 {
                std::thread::sleep(Duration::from_nanos(left - 100_000));
            } else if left > 20_000 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        sent[id].store(SENT, Ordering::Release);
        match out_path.send(flow_of(id, flows), &buf) {
            Ok(()) => out.sent += 1,
            Err(_) => {
                sent[id].store(SEND_FAILED, Ordering::Release);
                out.errors += 1;
            }
        }
        out.lags.push(clock.now_ns().saturating_sub(due));
        progress.sent.store(id as u64 + 1, Ordering::Relaxed);
    }
    out
}

struct RecvOut {
    recorder: Recorder,
    states: Vec<u8>,
    responses: [u64; 5],
    late: u64,
    rejected: RejectedReplies,
    samples: Vec<Sample>,
}

/// Datagrams just received: the buffers, senders and full lengths.
struct Batch<'a> {
    bufs: &'a [[u8; PACKET_BYTES]],
    peers: &'a [PeerAddr],
    lens: &'a [usize],
}

/// The receiver thread's view of the run.
struct Receiver<'a> {
    cfg: &'a LoadConfig,
    plan: &'a [Planned],
    /// The sender's marks, by request id.
    sent: &'a [AtomicU8],
    /// Where replies must come from.
    server: SocketAddr,
    /// Number of flows.
    flows: usize,
    base: u64,
    timeout_ns: u64,
}

impl Receiver<'_> {
    /// Receives and accounts for replies on `flows` until every request is
    /// answered, or one timeout after the sender finished.
    fn run(
        &self,
        inbound: Inbound,
        clock: &Clock,
        sender_done_at: &AtomicU64,
        progress: &Progress,
    ) -> RecvOut {
        let (cfg, plan) = (self.cfg, self.plan);
        let names: Vec<String> = cfg.workload.types.iter().map(|t| t.name.clone()).collect();
        let mut out = RecvOut {
            recorder: Recorder::new(names),
            states: vec![PENDING; plan.len()],
            responses: [0; 5],
            late: 0,
            rejected: RejectedReplies::default(),
            samples: Vec::with_capacity(if cfg.keep_samples { plan.len() } else { 0 }),
        };
        let mut bufs = vec![[0u8; PACKET_BYTES]; MAX_BATCH];
        let mut peers = [PeerAddr::from(self.server); MAX_BATCH];
        let mut lens = [0usize; MAX_BATCH];
        let mut flow_ids = [0usize; MAX_BATCH];
        let (flows, mut xdp) = match inbound {
            Inbound::Udp(f) => (f, None),
            Inbound::Xdp(x) => (Vec::new(), Some(x)),
        };
        let mut pollfds: Vec<libc::pollfd> = flows
            .iter()
            .map(|s| libc::pollfd {
                fd: s.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let mut answered = 0usize;
        loop {
            if let Some(x) = &mut xdp {
                let got = x.recv(&mut bufs, &mut peers, &mut lens, &mut flow_ids);
                if got == 0 {
                    x.wait(Duration::from_millis(2));
                }
                let batch = Batch {
                    bufs: &bufs[..got],
                    peers: &peers[..got],
                    lens: &lens[..got],
                };
                answered += self.handle_batch(&batch, |i| flow_ids[i], clock, &mut out);
                progress.received.fetch_add(got as u64, Ordering::Relaxed);
            } else {
                poll_fds(&mut pollfds, Duration::from_millis(2));
            }
            for (flow, (f, pfd)) in flows.iter().zip(&pollfds).enumerate() {
                if pfd.revents == 0 {
                    continue;
                }
                loop {
                    let mut slots =
                        [(std::ptr::null_mut::<u8>(), std::ptr::null_mut::<PeerAddr>()); MAX_BATCH];
                    for ((s, b), p) in slots.iter_mut().zip(bufs.iter_mut()).zip(&mut peers) {
                        *s = (b.as_mut_ptr(), &raw mut *p);
                    }
                    // SAFETY: each slot addresses one of this thread's PACKET_BYTES
                    // buffers and one of its PeerAddr slots, untouched during the
                    // call.
                    let got = unsafe { recv_many(f.as_fd(), &slots, &mut lens) }.unwrap_or(0);
                    if got == 0 {
                        break;
                    }
                    let batch = Batch {
                        bufs: &bufs[..got],
                        peers: &peers[..got],
                        lens: &lens[..got],
                    };
                    answered += self.handle_batch(&batch, |_| flow, clock, &mut out);
                    progress.received.fetch_add(got as u64, Ordering::Relaxed);
                }
            }
            let done_at = sender_done_at.load(Ordering::Acquire);
            if done_at != u64::MAX
                && (answered == plan.len()
                    || clock.now_ns() > done_at.saturating_add(self.timeout_ns))
            {
                break;
            }
        }
        if let Some(x) = &xdp {
            // Frames for this client that were not replies (malformed, or
            // for another address or port) are refused like any other.
            out.rejected.malformed += x.dropped;
        }
        out
    }

    /// Accounts for a received batch, datagram `i` on flow `flow_of(i)`;
    /// returns how many answered a pending request.
    fn handle_batch(
        &self,
        batch: &Batch<'_>,
        flow_of: impl Fn(usize) -> usize,
        clock: &Clock,
        out: &mut RecvOut,
    ) -> usize {
        let now = clock.now_ns();
        let mut answered = 0;
        for (i, buf) in batch.bufs.iter().enumerate() {
            let len = batch.lens[i];
            answered += usize::from(self.handle_response(
                flow_of(i),
                &batch.peers[i],
                len,
                &buf[..len.min(PACKET_BYTES)],
                now,
                out,
            ));
        }
        answered
    }

    /// Accounts for one datagram of `len` bytes (`dgram`: what the buffer kept)
    /// from `from` on flow `flow`; returns whether it answered a pending request
    /// (in time or late). A refused datagram lands in one counter of
    /// `out.rejected`.
    fn handle_response(
        &self,
        flow: usize,
        from: &PeerAddr,
        len: usize,
        dgram: &[u8],
        now: u64,
        out: &mut RecvOut,
    ) -> bool {
        let rejected = &mut out.rejected;
        let from_server = from
            .to_socket_addr()
            .is_some_and(|a| a.ip() == self.server.ip() && a.port() == self.server.port());
        if !from_server {
            rejected.wrong_peer += 1;
            return false;
        }
        if len > PACKET_BYTES {
            rejected.oversize += 1;
            return false;
        }
        let Ok((h, status)) = protocol::parse_response(dgram) else {
            rejected.malformed += 1;
            return false;
        };
        let Some(&p) = usize::try_from(h.id).ok().and_then(|id| self.plan.get(id)) else {
            rejected.unknown_id += 1;
            return false;
        };
        let id = h.id as usize;
        if self.sent[id].load(Ordering::Acquire) != SENT {
            rejected.future_id += 1;
            return false;
        }
        if flow_of(id, self.flows) != flow {
            rejected.wrong_flow += 1;
            return false;
        }
        if h.type_id != p.type_id {
            rejected.wrong_type += 1;
            return false;
        }
        if out.states[id] != PENDING {
            rejected.duplicate += 1;
            return false;
        }
        let latency = now.saturating_sub(self.base + p.at_ns);
        if latency > self.timeout_ns {
            out.states[id] = LATE;
            out.late += 1;
            return true;
        }
        out.states[id] = status as u8;
        out.responses[status as usize - 1] += 1;
        let measured = p.at_ns >= self.cfg.warmup_ns;
        if measured {
            let t = p.type_id as usize;
            match status {
                Status::Ok => out.recorder.record(t, latency, p.service_ns),
                Status::Overloaded => out.recorder.record_drop(t),
                _ => out.recorder.record_error(t),
            }
        }
        if self.cfg.keep_samples {
            out.samples.push(Sample {
                id: id as u64,
                type_id: p.type_id,
                scheduled_ns: p.at_ns,
                latency_ns: latency,
                service_ns: p.service_ns,
                status: Some(status),
                measured,
            });
        }
        true
    }
}

impl LoadReport {
    /// The point document (`mode` "net"), with the client's counters in `extra`.
    pub fn to_point(&self, cfg: &LoadConfig, policy: &str, workers: usize) -> PointResult {
        let replies = |s: Status| self.responses[s as usize - 1];
        let lag_us = |i: usize| self.send_lag_ns[i] as f64 / 1e3;
        let extra = NetExtra {
            server: LoadedServer::Address(cfg.server.to_string()),
            flows: cfg.flows,
            timeout_ms: cfg.timeout.as_secs_f64() * 1e3,
            scheduled_total: self.scheduled,
            sent_total: self.sent,
            send_errors: self.send_errors,
            responses_total: ResponsesByStatus {
                ok: replies(Status::Ok),
                overloaded: replies(Status::Overloaded),
                bad_request: replies(Status::BadRequest),
                unknown_type: replies(Status::UnknownType),
                handler_error: replies(Status::HandlerError),
            },
            late_responses: self.late,
            // Every refused datagram, then by reason.
            unexpected_datagrams: self.rejected.total(),
            rejected_replies: self.rejected,
            send_lag_us: SendLag {
                p50: lag_us(0),
                p99: lag_us(1),
                max: lag_us(2),
            },
            wall_s: self.wall.as_secs_f64(),
            reservation: None,
            rate_means: None,
        };
        let meta = PointMeta {
            mode: "net",
            workload: cfg.workload.name.clone(),
            policy: policy.to_string(),
            workers,
            load: if workers > 0 {
                cfg.rate_rps / cfg.workload.peak_rps(workers)
            } else {
                0.0
            },
            offered_rps: cfg.rate_rps,
            duration_s: cfg.duration_ns as f64 / 1e9,
            measured_s: cfg.duration_ns.saturating_sub(cfg.warmup_ns) as f64 / 1e9,
            seed: cfg.seed,
        };
        PointResult::new(
            meta,
            &self.recorder,
            self.measured_generated,
            Extra::Net(Box::new(extra)),
        )
    }
}
