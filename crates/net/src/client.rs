//! The open-loop load client behind `psp load`: Poisson arrivals of a workload's
//! request mix at a fixed rate, sent on schedule whatever the server does (so
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

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use psp_metrics::{PointMeta, PointResult, Recorder};
use psp_runtime::Clock;
use psp_runtime::handler::synthetic;
use psp_workload::{ArrivalSource, PoissonArrivals, Workload};
use serde_json::json;

use crate::datapath::PeerAddr;
use crate::pool::PACKET_BYTES;
use crate::protocol::{self, Status};
use crate::udp::{MAX_BATCH, bind_udp, poll_fds, recv_many};

/// One `psp load` run.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// The server.
    pub server: SocketAddr,
    /// The request mix and service times (sent in each request's body).
    pub workload: Workload,
    /// Offered rate.
    pub rate_rps: f64,
    /// Length of the sending period.
    pub duration_ns: u64,
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
    /// Datagrams that were no valid response (or longer than the receive
    /// buffer), or answered an unknown or already answered id.
    pub unexpected: u64,
    /// How far the sender fell behind its schedule: median, p99 and max.
    pub send_lag_ns: [u64; 3],
    /// One entry per request, when asked for.
    pub samples: Vec<Sample>,
    /// Wall time of the run.
    pub wall: Duration,
}

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

/// Runs the load: returns when every request is answered or timed out.
///
/// # Errors
/// The client's sockets cannot be set up.
pub fn run_load(cfg: &LoadConfig, progress: &Progress) -> io::Result<LoadReport> {
    let mut arrivals = PoissonArrivals::new(&cfg.workload, cfg.rate_rps, cfg.duration_ns, cfg.seed);
    let mut plan =
        Vec::with_capacity((cfg.rate_rps * cfg.duration_ns as f64 / 1e9 * 1.1) as usize + 16);
    while let Some(a) = arrivals.next_arrival() {
        plan.push(Planned {
            at_ns: a.at_ns,
            service_ns: a.service_ns,
            type_id: a.type_id,
        });
    }
    let local: SocketAddr = if cfg.server.is_ipv4() {
        "0.0.0.0:0".parse().expect("literal address")
    } else {
        "[::]:0".parse().expect("literal address")
    };
    let mut flows = Vec::with_capacity(cfg.flows.max(1));
    for _ in 0..cfg.flows.max(1) {
        let s = bind_udp(local, false)?;
        s.connect(cfg.server)?;
        flows.push(s);
    }
    let rx_flows: Vec<UdpSocket> = flows
        .iter()
        .map(|s| s.try_clone())
        .collect::<io::Result<_>>()?;
    let clock = Clock::new();
    // Start a little in the future so the first sends are not already late.
    let base = clock.now_ns() + 2_000_000;
    // When the sender finished (u64::MAX: still sending).
    let sender_done_at = AtomicU64::new(u64::MAX);
    let started = std::time::Instant::now();
    let plan = &plan;

    let tune = || {
        psp_runtime::runtime::set_timer_slack_1ns();
        // Only a mostly sleeping sender may outrank the server: at higher rates
        // it polls, and a real-time poller would starve a co-located server.
        if cfg.raise_priority
            && cfg.rate_rps <= MAX_RAISED_RPS
            && !psp_runtime::runtime::set_thread_realtime()
        {
            psp_runtime::runtime::set_thread_nice(-10);
        }
    };
    let (send_out, mut rx_out) = std::thread::scope(|scope| {
        let sender = scope.spawn(|| {
            tune();
            let out = send_all(plan, &flows, &clock, base, progress);
            sender_done_at.store(clock.now_ns(), Ordering::Release);
            out
        });
        let receiver = scope.spawn(|| {
            tune();
            receive_all(
                cfg,
                plan,
                &rx_flows,
                &clock,
                base,
                &sender_done_at,
                progress,
            )
        });
        (
            sender.join().expect("sender thread"),
            receiver.join().expect("receiver thread"),
        )
    });

    // Whatever is still pending timed out.
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
    let mut lags = send_out.lags;
    lags.sort_unstable();
    let at = |q: f64| {
        lags.get(((lags.len() as f64 * q) as usize).min(lags.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    Ok(LoadReport {
        recorder: rx_out.recorder,
        scheduled: plan.len() as u64,
        measured_generated: plan.iter().filter(|p| p.at_ns >= cfg.warmup_ns).count() as u64,
        sent: send_out.sent,
        send_errors: send_out.errors,
        responses: rx_out.responses,
        late: rx_out.late,
        unexpected: rx_out.unexpected,
        send_lag_ns: [at(0.5), at(0.99), lags.last().copied().unwrap_or(0)],
        samples: rx_out.samples,
        wall: started.elapsed(),
    })
}

struct SendOut {
    sent: u64,
    errors: u64,
    lags: Vec<u64>,
}

fn send_all(
    plan: &[Planned],
    flows: &[UdpSocket],
    clock: &Clock,
    base: u64,
    progress: &Progress,
) -> SendOut {
    let mut buf = Vec::with_capacity(protocol::HEADER_LEN + synthetic::LEN);
    let mut out = SendOut {
        sent: 0,
        errors: 0,
        lags: Vec::with_capacity(plan.len()),
    };
    for (id, p) in plan.iter().enumerate() {
        let due = base + p.at_ns;
        loop {
            let now = clock.now_ns();
            if now >= due {
                break;
            }
            // Sleep through long gaps (waking early), yield the core through
            // shorter ones (a co-located server may need it), spin the last
            // stretch.
            let left = due - now;
            if left > 150_000 {
                std::thread::sleep(Duration::from_nanos(left - 100_000));
            } else if left > 20_000 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        protocol::encode_request(
            &mut buf,
            p.type_id,
            id as u64,
            &synthetic::encode(p.type_id, p.service_ns),
        );
        match flows[id % flows.len()].send(&buf) {
            Ok(_) => out.sent += 1,
            Err(_) => out.errors += 1,
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
    unexpected: u64,
    samples: Vec<Sample>,
}

#[allow(clippy::too_many_arguments)]
fn receive_all(
    cfg: &LoadConfig,
    plan: &[Planned],
    flows: &[UdpSocket],
    clock: &Clock,
    base: u64,
    sender_done_at: &AtomicU64,
    progress: &Progress,
) -> RecvOut {
    let names: Vec<String> = cfg.workload.types.iter().map(|t| t.name.clone()).collect();
    let mut out = RecvOut {
        recorder: Recorder::new(names),
        states: vec![PENDING; plan.len()],
        responses: [0; 5],
        late: 0,
        unexpected: 0,
        samples: Vec::with_capacity(if cfg.keep_samples { plan.len() } else { 0 }),
    };
    let timeout_ns = cfg.timeout.as_nanos() as u64;
    let mut bufs = vec![[0u8; PACKET_BYTES]; MAX_BATCH];
    let mut lens = [0usize; MAX_BATCH];
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
        poll_fds(&mut pollfds, Duration::from_millis(2));
        for (f, pfd) in flows.iter().zip(&pollfds) {
            if pfd.revents == 0 {
                continue;
            }
            loop {
                let mut slots =
                    [(std::ptr::null_mut::<u8>(), std::ptr::null_mut::<PeerAddr>()); MAX_BATCH];
                for (s, b) in slots.iter_mut().zip(bufs.iter_mut()) {
                    s.0 = b.as_mut_ptr();
                }
                // SAFETY: each pointer addresses one of this thread's PACKET_BYTES
                // buffers; addresses are discarded (null), the socket is connected.
                let got = unsafe { recv_many(f.as_fd(), &slots, &mut lens) }.unwrap_or(0);
                if got == 0 {
                    break;
                }
                let now = clock.now_ns();
                for i in 0..got {
                    // A reply longer than the buffer (truncated) is no reply.
                    if lens[i] > PACKET_BYTES {
                        out.unexpected += 1;
                        continue;
                    }
                    answered += usize::from(handle_response(
                        cfg,
                        plan,
                        &bufs[i][..lens[i]],
                        now,
                        base,
                        timeout_ns,
                        &mut out,
                    ));
                }
                progress.received.fetch_add(got as u64, Ordering::Relaxed);
            }
        }
        let done_at = sender_done_at.load(Ordering::Acquire);
        if done_at != u64::MAX
            && (answered == plan.len() || clock.now_ns() > done_at.saturating_add(timeout_ns))
        {
            break;
        }
    }
    out
}

/// Accounts for one datagram; returns whether it answered a pending request.
fn handle_response(
    cfg: &LoadConfig,
    plan: &[Planned],
    dgram: &[u8],
    now: u64,
    base: u64,
    timeout_ns: u64,
    out: &mut RecvOut,
) -> bool {
    let Ok((h, status)) = protocol::parse_response(dgram) else {
        out.unexpected += 1;
        return false;
    };
    let id = h.id as usize;
    if id >= plan.len() || out.states[id] != PENDING {
        out.unexpected += 1;
        return false;
    }
    let p = plan[id];
    let latency = now.saturating_sub(base + p.at_ns);
    if latency > timeout_ns {
        out.states[id] = LATE;
        out.late += 1;
        return true;
    }
    out.states[id] = status as u8;
    out.responses[status as usize - 1] += 1;
    let measured = p.at_ns >= cfg.warmup_ns;
    if measured {
        let t = p.type_id as usize;
        match status {
            Status::Ok => out.recorder.record(t, latency, p.service_ns),
            Status::Overloaded => out.recorder.record_drop(t),
            _ => out.recorder.record_error(t),
        }
    }
    if cfg.keep_samples {
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

impl LoadReport {
    /// The point document (`mode` "net"), with the client's counters in `extra`.
    pub fn to_point(&self, cfg: &LoadConfig, policy: &str, workers: usize) -> PointResult {
        let mut extra = serde_json::Map::new();
        extra.insert("server".into(), json!(cfg.server.to_string()));
        extra.insert("flows".into(), json!(cfg.flows));
        extra.insert("timeout_ms".into(), json!(cfg.timeout.as_secs_f64() * 1e3));
        extra.insert("scheduled_total".into(), json!(self.scheduled));
        extra.insert("sent_total".into(), json!(self.sent));
        extra.insert("send_errors".into(), json!(self.send_errors));
        extra.insert(
            "responses_total".into(),
            json!(
                Status::ALL
                    .iter()
                    .map(|s| (s.name().to_string(), json!(self.responses[*s as usize - 1])))
                    .collect::<serde_json::Map<_, _>>()
            ),
        );
        extra.insert("late_responses".into(), json!(self.late));
        extra.insert("unexpected_datagrams".into(), json!(self.unexpected));
        extra.insert(
            "send_lag_us".into(),
            json!({"p50": self.send_lag_ns[0] as f64 / 1e3, "p99": self.send_lag_ns[1] as f64 / 1e3, "max": self.send_lag_ns[2] as f64 / 1e3}),
        );
        extra.insert("wall_s".into(), json!(self.wall.as_secs_f64()));
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
        PointResult::from_recorder(meta, &self.recorder, self.measured_generated, extra)
    }
}
