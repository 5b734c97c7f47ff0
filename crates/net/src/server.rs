//! The network server: the runtime's dispatcher with a datapath front end (the
//! paper's net worker runs on the dispatcher's thread) and workers that transmit
//! their own responses.
//!
//! One pass of the dispatcher: take free slots, receive a batch into their packet
//! buffers, parse and classify each datagram, admit valid requests to the policy
//! and answer the others (BAD_REQUEST, UNKNOWN_TYPE, OVERLOADED) in one batched
//! send; then drain completions and dispatch, as the in-process front end does.
//! Datagrams shorter than a header carry no id to answer to: they are counted and
//! dropped. Nothing is lost silently: every datagram ends up in one counter.
//!
//! memcached's protocol over UDP carries no order of its own, yet memcached
//! promises that a client's commands take effect in the order sent: under
//! it, a peer (address and port) has at most one request at the policy or on
//! a worker. The next ones wait, classified, in their packet buffers, in the
//! dispatcher's [`PeerOrder`] (bounded by the queue capacity; one more is
//! answered OVERLOADED and counted in `held_full`) until the worker that
//! answers the one before says so over its ring of answered tokens; then the
//! dispatcher admits the next. This project's protocol, whose clients match
//! replies by request id, is admitted as it arrives.
//!
//! With [`ServerConfig::metrics`], the dispatcher also publishes live snapshots
//! (its counters and the front end's, [`NetCounters::SNAPSHOT_LEN`] of them)
//! that an [`Exporter`] serves over HTTP from its own thread.

use std::io::{self, Write as _};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering, fence};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use psp_core::{Classifier, ClassifierKind, PolicySpec, Request, TypeInfo};
use psp_runtime::idle::{Idler, Wakeup};
use psp_runtime::{
    DispatchCore, DispatcherReport, FrontEnd, HandlerError, HandlerFactory, IdleStrategy, Job,
    JobIo, RunReport, RuntimeConfig, RuntimeError, Slot, SnapshotPublisher,
};

use crate::datapath::{Datapath, Transmit};
use crate::dgram::{Arrival, DatagramProtocol, Parsed, PeerKey, PeerOrder};
use crate::exporter::{DropProbe, Exporter, MetricsSource};
use crate::pool::PacketPool;
use crate::protocol::{self, Status};
use crate::udp::UdpDatapath;
use crate::xdp::XdpDatapath;

/// Everything `psp serve` configures.
#[derive(Clone)]
pub struct ServerConfig {
    /// Where to listen (port 0: any free port).
    pub addr: SocketAddr,
    /// Where to serve Prometheus metrics over HTTP (`/metrics`; port 0: any
    /// free port), if anywhere.
    pub metrics: Option<SocketAddr>,
    /// Workers, pinning, idling, queue bounds, live statistics, drain timeout.
    pub runtime: RuntimeConfig,
    /// The scheduling policy.
    pub policy: PolicySpec,
    /// The registered request types (index = type id on the wire).
    pub types: Vec<TypeInfo>,
    /// How types are read from the protocol header (ignored when
    /// `app_classifier` is set).
    pub classifier: ClassifierKind,
    /// The application's own classifier (the paper's application-provided
    /// one): reads each request's body and names its type (an index of
    /// `types`; anything else is answered UNKNOWN_TYPE). The header's type
    /// field is then not read.
    pub app_classifier: Option<Arc<dyn ClassifierFactory>>,
    /// What the server serves: a handler per worker (or per request slot,
    /// under a preemptive policy), from the application the caller started.
    pub handlers: Arc<dyn HandlerFactory>,
    /// How datagrams get in and out.
    pub datapath: DatapathKind,
    /// The protocol of the datagrams (udp and xdp datapaths): this
    /// project's, or memcached's over UDP (whose commands its own classifier
    /// types; `classifier` and `app_classifier` then do not apply).
    pub protocol: crate::dgram::DatagramProtocol,
}

/// Makes the application's classifier, once per dispatcher (a classifier
/// may keep state: it is `&mut` on the dispatcher thread).
pub trait ClassifierFactory: Send + Sync {
    /// A classifier.
    fn classifier(&self) -> Box<dyn Classifier>;
}

impl<F: Fn() -> Box<dyn Classifier> + Send + Sync> ClassifierFactory for F {
    fn classifier(&self) -> Box<dyn Classifier> {
        self()
    }
}

/// Which datapath a server (or a load client) uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum DatapathKind {
    /// Kernel UDP sockets.
    #[default]
    Udp,
    /// AF_XDP sockets and an XDP program on the interface that holds the
    /// address (kernel bypass).
    Xdp(crate::xdp::XdpConfig),
    /// Kernel TCP connections speaking a request protocol of its own
    /// (RESP), from the protocol registry ([`psp_proto::PROTOCOLS`]), which
    /// frames and classifies (the configuration's `classifier` and
    /// `app_classifier` do not apply).
    Tcp(&'static psp_proto::ProtocolEntry, crate::tcp::TcpConfig),
}

impl DatapathKind {
    /// The name `--datapath` takes.
    pub fn name(&self) -> &'static str {
        match self {
            DatapathKind::Udp => "udp",
            DatapathKind::Xdp(_) => "xdp",
            DatapathKind::Tcp(..) => "tcp",
        }
    }
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("addr", &self.addr)
            .field("metrics", &self.metrics)
            .field("runtime", &self.runtime)
            .field("policy", &self.policy)
            .field("types", &self.types)
            .field("classifier", &self.classifier)
            .field("app_classifier", &self.app_classifier.is_some())
            .field("datapath", &self.datapath)
            .finish_non_exhaustive()
    }
}

/// What the network front end counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetCounters {
    /// Datagrams received.
    pub received: u64,
    /// Datagrams shorter than a header: dropped without a reply.
    pub truncated: u64,
    /// Answered BAD_REQUEST.
    pub bad_request: u64,
    /// Answered UNKNOWN_TYPE.
    pub unknown_type: u64,
    /// Answered OVERLOADED.
    pub overloaded: u64,
    /// memcached's protocol: requests refused because as many requests as
    /// the bound allows waited behind their peers' executing ones (each also
    /// in `overloaded`, or in `shed_unanswered` past the reply budget).
    pub held_full: u64,
    /// Shed without a reply: OVERLOADED replies are budgeted to the number of
    /// requests served plus a burst, so that refusing never costs more than
    /// serving.
    pub shed_unanswered: u64,
    /// Error replies the OS refused to send.
    pub reply_send_errors: u64,
    /// Receive calls that failed (other than "nothing to receive").
    pub receive_errors: u64,
    /// Link-layer frames dropped as malformed (AF_XDP: truncated headers,
    /// bad lengths or checksums, fragments; the kernel drops these itself
    /// on the UDP path).
    pub malformed_frames: u64,
    /// Datagrams the OS dropped before the server read them (socket receive
    /// buffer full), when the datapath can tell.
    pub dropped_by_os: Option<u64>,
    /// The AF_XDP datapath's frame accounting and drops, on that datapath.
    pub xdp: Option<crate::xdp::XdpReport>,
    /// The TCP front end's connection counters, on that front end.
    pub tcp: Option<crate::tcp::TcpCounters>,
}

impl NetCounters {
    /// Counters the network front end puts in a live snapshot (all but
    /// `dropped_by_os`, which the exporter reads itself: it is a file read,
    /// and `held_full`, which is in the final report only).
    pub const SNAPSHOT_LEN: usize = 9;

    /// Writes the live-snapshot values into `out`, with `malformed`: the
    /// datapath's count of malformed frames so far.
    pub(crate) fn fill_snapshot(&self, out: &mut [u64], malformed: u64) {
        let mut values = self.snapshot_values();
        values[8] = malformed;
        for (o, v) in out.iter_mut().zip(values) {
            *o = v;
        }
    }

    fn snapshot_values(&self) -> [u64; Self::SNAPSHOT_LEN] {
        [
            self.received,
            self.truncated,
            self.bad_request,
            self.unknown_type,
            self.overloaded,
            self.shed_unanswered,
            self.reply_send_errors,
            self.receive_errors,
            self.malformed_frames,
        ]
    }

    /// The counters from a snapshot's front-end part (missing values read 0;
    /// `dropped_by_os` is `None`).
    pub fn from_snapshot(front: &[u64]) -> NetCounters {
        let v = |i: usize| front.get(i).copied().unwrap_or(0);
        NetCounters {
            received: v(0),
            truncated: v(1),
            bad_request: v(2),
            unknown_type: v(3),
            overloaded: v(4),
            held_full: 0,
            shed_unanswered: v(5),
            reply_send_errors: v(6),
            receive_errors: v(7),
            malformed_frames: v(8),
            dropped_by_os: None,
            xdp: None,
            tcp: None,
        }
    }
}

/// The outcome of a server's life.
#[derive(Debug, Clone)]
pub struct ServerReport {
    /// The dispatcher's counters; latency here is server-side (receive to
    /// handler completion), by type.
    pub dispatcher: DispatcherReport,
    /// The network front end's counters.
    pub net: NetCounters,
    /// Jobs answered per worker.
    pub served_per_worker: Vec<u64>,
    /// Jobs each worker stole from another's queue (`ws`).
    pub steals_per_worker: Vec<u64>,
    /// Workers still inside their handler after the drain deadline: left
    /// running, answering nothing more.
    pub abandoned_workers: Vec<usize>,
    /// SYNERGY's or Tiny Quanta's counters (preemptions, renewals, steals,
    /// wait-queue passes), for those executors.
    pub local: Option<psp_runtime::LocalStats>,
    /// Whether threads were pinned.
    pub pinned: bool,
    /// Whether polling passes yielded the core.
    pub polls_yield: bool,
    /// How long the server ran.
    pub wall: Duration,
}

/// A worker's packet access and response path: the request's packet (its
/// body and its peer) stays in the shared pool under its token until its
/// completion, so whichever worker finishes a request answers it.
struct NetIo<T: Transmit> {
    pool: Arc<PacketPool>,
    tx: T,
    protocol: DatagramProtocol,
    /// memcached's protocol: where answered tokens go back to the
    /// dispatcher's [`PeerOrder`].
    answered: Option<Answered>,
}

/// A worker's end of its ring of answered tokens.
struct Answered {
    ring: rtrb::Producer<u32>,
    wake: Arc<OrderWake>,
}

/// How a worker wakes a dispatcher that waits with requests held: the
/// decentralized executors' workers do not wake it for a completion, but a
/// held request waits for exactly that.
#[derive(Default)]
struct OrderWake {
    /// The dispatcher is about to wait with requests held.
    sleeping: AtomicBool,
    /// The dispatcher's eventfd (a duplicate, kept as long as a worker may
    /// write it), set at its first wait.
    event: OnceLock<std::fs::File>,
}

impl OrderWake {
    #[inline]
    fn notify(&self) {
        // Pairs with the fence in `NetFrontEnd::idle`: either the dispatcher
        // sees the answered token, or this sees it sleeping.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed)
            && let Some(mut event) = self.event.get()
        {
            // A failed write (the counter full) leaves it signalled anyway.
            let _ = event.write(&1u64.to_ne_bytes());
        }
    }
}

impl<T: Transmit> JobIo for NetIo<T> {
    #[inline]
    fn request<'a>(&'a self, job: &'a Job) -> &'a [u8] {
        // SAFETY: this worker owns the job's token from its job's pop until it
        // pushes the completion, after `respond`.
        let pkt = unsafe { self.pool.get_mut(job.token) };
        let at = self.protocol.header_len();
        &pkt.data()[at..at + usize::from(job.len)]
    }

    #[inline]
    fn max_response(&self) -> usize {
        self.tx
            .max_payload()
            .saturating_sub(self.protocol.header_len())
            .min(protocol::MAX_BODY)
    }

    #[inline]
    fn respond(&mut self, job: &Job, outcome: Result<(), HandlerError>, response: &[u8]) -> bool {
        // SAFETY: as in `request`; the borrow handed out there has ended.
        let pkt = unsafe { self.pool.get_mut(job.token) };
        let p = self.protocol;
        let (status, body) = match outcome {
            // The worker turned a response above `max_response` into an error.
            Ok(()) => (Status::Ok, response),
            Err(HandlerError::BadBody(_)) => (Status::BadRequest, p.error_body(Status::BadRequest)),
            Err(HandlerError::Failed(_)) => {
                (Status::HandlerError, p.error_body(Status::HandlerError))
            }
        };
        p.write_reply_header(pkt.data_mut(), status, body.len());
        let pkt = &*pkt;
        let sent = self
            .tx
            .send(&pkt.peer, [&pkt.data()[..p.header_len()], body])
            .is_ok();
        if let Some(a) = &mut self.answered {
            // The ring holds every token: each is in it at most once (it is
            // drained before the token can be received into again).
            let mut token = job.token;
            while let Err(rtrb::PushError::Full(t)) = a.ring.push(token) {
                token = t;
                std::hint::spin_loop();
            }
            a.wake.notify();
        }
        sent
    }
}

/// The dispatcher's datapath front end.
struct NetFrontEnd<D: Datapath> {
    datapath: D,
    reply_tx: D::Tx,
    pool: Arc<PacketPool>,
    classifier: Box<dyn Classifier>,
    /// Whether `classifier` reads the body (the application's) rather than
    /// the header.
    classify_body: bool,
    protocol: DatagramProtocol,
    n_types: u16,
    idle: IdleStrategy,
    idler: Idler,
    busy_idler: Idler,
    stop: Arc<AtomicBool>,
    net: NetCounters,
    seq: u64,
    /// Handed to the core at `begin`, when metrics are served.
    snapshots: Option<SnapshotPublisher>,
    /// Told at `begin`, once every thread runs: until then [`Server::start`]
    /// waits, so that a run that cannot start (a core not available, a thread
    /// that cannot spawn) is its error, not a failure after "listening".
    started: Option<std::sync::mpsc::Sender<()>>,
    /// The registered types' declared mean service times, which the core
    /// compares with the measured ones.
    declared_ns: Vec<Option<f64>>,
    /// Each worker's transmitter, until the worker's I/O takes it.
    worker_txs: Vec<Option<D::Tx>>,
    /// memcached's protocol: each peer's order.
    order: Option<Order>,
}

/// The dispatcher's side of memcached's order.
struct Order {
    peers: PeerOrder,
    /// Each worker's ring of answered tokens.
    answered: Vec<rtrb::Consumer<u32>>,
    /// Each worker's end of its ring, until the worker's I/O takes it.
    worker_ends: Vec<Option<rtrb::Producer<u32>>>,
    wake: Arc<OrderWake>,
    /// When the stop was first seen with requests held, and how long they
    /// may still wait for their turn (the drain timeout): then they are
    /// refused, so that a stuck handler cannot hold the server up.
    stopping_since: Option<u64>,
    drain_ns: u64,
}

impl Order {
    /// Whether a worker answered a request the dispatcher has not looked at.
    #[inline]
    fn pending(&self) -> bool {
        self.answered.iter().any(|r| !r.is_empty())
    }
}

/// Longest blocking wait of an idle dispatcher: bounds how late it notices a stop
/// request or prints statistics.
const MAX_WAIT: Duration = Duration::from_millis(5);
/// OVERLOADED replies allowed beyond the number of requests served: under heavy
/// overload, each reply costs the dispatcher about what serving a trivial request
/// costs, and answering every shed request cut goodput by half at 2.7x capacity
/// (docs/results.md, section 7).
const OVERLOAD_REPLY_BURST: u64 = 4096;
/// Error replies sent between two looks at the workers (each costs the kernel's
/// loopback or NIC path: microseconds).
const REPLY_CHUNK: usize = 4;
/// Datagrams received per pass at most: a worker waiting for its next job waits
/// for the whole receive call.
const RX_BATCH: usize = 32;
/// How long an idle dispatcher polls before it sleeps while workers are busy.
const BUSY_SPIN_US: u32 = 20;

impl<D: Datapath> FrontEnd for NetFrontEnd<D> {
    type Report = (DispatcherReport, NetCounters);
    type Io = NetIo<D::Tx>;

    fn worker_io(&mut self, worker: usize) -> NetIo<D::Tx> {
        NetIo {
            pool: self.pool.clone(),
            tx: self.worker_txs[worker]
                .take()
                .expect("one transmitter per worker, asked once"),
            protocol: self.protocol,
            answered: self.order.as_mut().map(|o| Answered {
                ring: o.worker_ends[worker]
                    .take()
                    .expect("one ring per worker, asked once"),
                wake: o.wake.clone(),
            }),
        }
    }

    fn waits_on_event_fd(&self) -> bool {
        true
    }

    fn begin(&mut self, core: &mut DispatchCore, now: u64) {
        begin_serving(
            core,
            now,
            &self.declared_ns,
            &mut self.snapshots,
            &mut self.started,
        );
    }

    fn fill_snapshot(&self, out: &mut [u64]) {
        self.net.fill_snapshot(out, self.datapath.malformed());
    }

    fn poll(&mut self, core: &mut DispatchCore, now: u64) -> bool {
        let mut tokens = [0u32; RX_BATCH];
        // Error replies of one pass: (token, status).
        let mut replies: [(u32, Status); RX_BATCH] = [(0, Status::Ok); RX_BATCH];
        let mut worked = self.datapath.service();
        if self.order.is_some() {
            worked |= self.release(core, now);
            if self.held_at_stop(core, now) {
                return worked;
            }
        }
        let mut k = 0;
        while k < tokens.len() {
            match core.take_token() {
                Some(t) => {
                    tokens[k] = t;
                    k += 1;
                }
                None => break,
            }
        }
        // SAFETY: the dispatcher owns free tokens until it dispatches them.
        let got = match unsafe { self.datapath.recv_batch(&self.pool, &tokens[..k]) } {
            Ok(n) => n,
            Err(_) => {
                self.net.receive_errors += 1;
                0
            }
        };
        for &t in tokens[got..k].iter().rev() {
            core.put_token(t);
        }
        let mut n_replies = 0;
        for (i, &token) in tokens[..got].iter().enumerate() {
            worked = true;
            // A worker that finished meanwhile gets its next job now, not after
            // the whole batch (each worker holds one job at a time).
            if i > 0 {
                core.feed_workers(now);
            }
            self.net.received += 1;
            // SAFETY: owned by the dispatcher (received, not yet dispatched).
            let pkt = unsafe { self.pool.get_mut(token) };
            let bytes = pkt.bytes();
            let at = self.protocol.header_len();
            let status = match self.protocol.parse(bytes, pkt.len) {
                Parsed::Drop => {
                    self.net.truncated += 1;
                    core.put_token(token);
                    continue;
                }
                Parsed::Refuse(s) => Some(s),
                Parsed::Request { header_type, .. }
                    if !self.classify_body && header_type >= self.n_types =>
                {
                    Some(Status::UnknownType)
                }
                Parsed::Request {
                    header_type,
                    body_len,
                } => 'admit: {
                    let (type_id, true_type) = if self.classify_body {
                        let body = &bytes[at..at + usize::from(body_len)];
                        let t = self.classifier.classify(body);
                        if t >= self.n_types {
                            break 'admit Some(Status::UnknownType);
                        }
                        (t, t)
                    } else {
                        (self.classifier.classify(bytes), header_type)
                    };
                    self.seq += 1;
                    let slot = Slot {
                        req: Request {
                            id: self.seq,
                            token,
                            type_id,
                            flow: pkt.peer.flow(),
                            arrival_ns: now,
                        },
                        true_type,
                        scheduled_ns: now,
                        measured: true,
                        len: body_len,
                    };
                    let arrival = match &mut self.order {
                        Some(o) => o.peers.arrive(PeerKey::of(&pkt.peer), token, slot),
                        None => Arrival::Run,
                    };
                    match arrival {
                        Arrival::Run if core.admit(token, slot, now) => None,
                        Arrival::Run => {
                            // Refused: its peer has nothing executing (and
                            // nothing held: it had nothing executing).
                            if let Some(o) = &mut self.order {
                                o.peers.finished(token);
                            }
                            Some(Status::Overloaded)
                        }
                        // It waits for its peer's request before it.
                        Arrival::Held => None,
                        Arrival::Full => {
                            self.net.held_full += 1;
                            core.shed_without_slot(true_type, slot.measured);
                            Some(Status::Overloaded)
                        }
                    }
                }
            };
            if let Some(s) = status {
                if !self.count_refusal(core, s) {
                    core.put_token(token);
                    continue;
                }
                replies[n_replies] = (token, s);
                n_replies += 1;
            }
        }
        // Error replies cost a system call per datagram in the kernel: feed the
        // workers between chunks, or a worker waiting for its next job meanwhile
        // is capacity lost (and shedding would slow serving).
        for chunk in replies[..n_replies].chunks(REPLY_CHUNK) {
            worked |= core.feed_workers(now);
            self.send_replies(core, chunk);
        }
        worked
    }

    fn input_ended(&self) -> bool {
        // Held requests are admitted (or refused) before the drain.
        self.stop.load(Ordering::Relaxed) && self.order.as_ref().is_none_or(|o| o.peers.held() == 0)
    }

    fn idle(&mut self, core: &DispatchCore, me: &Wakeup, now: u64, worked: bool) {
        // Responses queued for the datapath go out while draining too.
        if self.datapath.service() || worked {
            self.idler.reset();
            self.busy_idler.reset();
            return;
        }
        let order = self.order.as_ref();
        // A held request waits for an answer the dispatcher must see.
        let answered = || order.is_some_and(Order::pending);
        let has_work = || core.has_completions() || answered();
        let datapath = &self.datapath;
        let bound = core.idle_bound(now, MAX_WAIT);
        if bound.is_zero() {
            return;
        }
        let wait = |max: Duration| {
            datapath.wait(me.event_fd(), max.min(bound));
            me.clear_event();
        };
        let held = order.filter(|o| o.peers.held() > 0);
        if let Some(o) = held {
            if o.wake.event.get().is_none()
                && let Some(fd) = me.event_fd()
                && let Ok(dup) = fd.try_clone_to_owned()
            {
                let _ = o.wake.event.set(dup.into());
            }
            o.wake.sleeping.store(true, Ordering::Relaxed);
            // Pairs with the fence in `OrderWake::notify`.
            fence(Ordering::SeqCst);
            if o.pending() {
                o.wake.sleeping.store(false, Ordering::Relaxed);
                return;
            }
        }
        match self.idle {
            // Poll briefly while a worker is busy (its completion is likely
            // microseconds away: cheaper than a sleep and a wake-up), then wait in
            // the kernel for a datagram or a completion. Never poll long: a
            // polling dispatcher on a core it shares with a worker steals that
            // worker's time (docs/architecture.md).
            // Decentralized workers go on by themselves: they wake the
            // dispatcher only when it must act (a completion ring half full,
            // a quantum armed); otherwise it waits for a datagram or MAX_WAIT
            // (a wake-up takes a worker's vCPU on a small machine).
            IdleStrategy::SpinPark { .. } if core.in_flight() > 0 && core.decentralized() => {
                me.park_with(answered, || wait(MAX_WAIT));
            }
            IdleStrategy::SpinPark { .. } if core.in_flight() > 0 => {
                self.busy_idler.idle_with(me, MAX_WAIT, has_work, wait);
            }
            IdleStrategy::SpinPark { .. } => me.park_with(has_work, || wait(MAX_WAIT)),
            _ => self.idler.idle_with(me, MAX_WAIT, has_work, wait),
        }
        if let Some(o) = held {
            o.wake.sleeping.store(false, Ordering::Relaxed);
        }
    }

    fn finish(mut self, core: DispatcherReport) -> (DispatcherReport, NetCounters) {
        self.net.xdp = self.datapath.finish();
        self.net.malformed_frames = self.datapath.malformed();
        self.net.dropped_by_os = self.datapath.dropped_by_os();
        (core, self.net)
    }
}

impl<D: Datapath> NetFrontEnd<D> {
    /// Counts a refusal with status `s`; whether to answer it (otherwise it
    /// is shed unanswered and the caller frees its slot).
    #[inline]
    fn count_refusal(&mut self, core: &DispatchCore, s: Status) -> bool {
        match s {
            Status::BadRequest => self.net.bad_request += 1,
            Status::UnknownType => self.net.unknown_type += 1,
            // Refusing must not cost more than serving: past the budget,
            // shed without a reply (counted; the client sees a timeout).
            _ if self.net.overloaded >= core.counts().completed + OVERLOAD_REPLY_BURST => {
                self.net.shed_unanswered += 1;
                return false;
            }
            _ => self.net.overloaded += 1,
        }
        true
    }

    /// memcached's order: takes the tokens the workers answered and admits
    /// each one's peer's next held request (one the policy refuses is
    /// answered OVERLOADED, and the next after it goes). Returns whether
    /// there was any.
    fn release(&mut self, core: &mut DispatchCore, now: u64) -> bool {
        let Some(mut order) = self.order.take() else {
            return false;
        };
        let mut worked = false;
        let mut refused = [(0u32, Status::Overloaded); REPLY_CHUNK];
        let mut n = 0;
        for w in 0..order.answered.len() {
            while let Ok(token) = order.answered[w].pop() {
                worked = true;
                let mut next = order.peers.finished(token);
                while let Some((t, slot)) = next {
                    if core.admit(t, slot, now) {
                        break;
                    }
                    next = order.peers.finished(t);
                    if !self.count_refusal(core, Status::Overloaded) {
                        core.put_token(t);
                        continue;
                    }
                    refused[n] = (t, Status::Overloaded);
                    n += 1;
                    if n == REPLY_CHUNK {
                        self.send_replies(core, &refused);
                        n = 0;
                    }
                }
            }
        }
        if n > 0 {
            self.send_replies(core, &refused[..n]);
        }
        self.order = Some(order);
        worked
    }

    /// memcached's order, once the stop is asked with requests held: they
    /// still go in order (nothing more is received meanwhile), for at most
    /// the drain timeout; then what is still held is refused OVERLOADED.
    /// Returns whether requests are still held (receiving must wait).
    fn held_at_stop(&mut self, core: &mut DispatchCore, now: u64) -> bool {
        let Some(order) = self.order.as_mut() else {
            return false;
        };
        if order.peers.held() == 0 || !self.stop.load(Ordering::Relaxed) {
            return false;
        }
        let since = *order.stopping_since.get_or_insert(now);
        if now.saturating_sub(since) < order.drain_ns {
            return true;
        }
        while let Some((t, slot)) = self.order.as_mut().and_then(|o| o.peers.take_held()) {
            core.shed_without_slot(slot.true_type, slot.measured);
            if self.count_refusal(core, Status::Overloaded) {
                self.send_replies(core, &[(t, Status::Overloaded)]);
            } else {
                core.put_token(t);
            }
        }
        false
    }

    /// Answers the datagrams in `replies` with header-only responses (rewritten in
    /// place) in one batched send, then frees their slots.
    #[cold]
    fn send_replies(&mut self, core: &mut DispatchCore, replies: &[(u32, Status)]) {
        let mut msgs: [(&crate::datapath::PeerAddr, &[u8]); REPLY_CHUNK] =
            [(&EMPTY_PEER, &[]); REPLY_CHUNK];
        for (m, &(token, status)) in msgs.iter_mut().zip(replies) {
            // SAFETY: the dispatcher owns these tokens (received, never admitted or
            // refused by the policy); each token appears once, so the mutable
            // borrows are disjoint.
            let pkt = unsafe { &mut *self.pool.as_ptr(token) };
            let p = self.protocol;
            // The reply's body (memcached's error line) goes where the
            // request's was: nothing reads the request any more.
            let body = p.error_body(status);
            let (at, data) = (p.header_len(), pkt.data_mut());
            data[at..at + body.len()].copy_from_slice(body);
            p.write_reply_header(data, status, body.len());
            *m = (&pkt.peer, &pkt.data()[..at + body.len()]);
        }
        let sent = self
            .reply_tx
            .send_batch(&msgs[..replies.len()])
            .unwrap_or(0);
        self.net.reply_send_errors += (replies.len() - sent) as u64;
        for &(token, _) in replies {
            core.put_token(token);
        }
    }
}

static EMPTY_PEER: crate::datapath::PeerAddr = crate::datapath::PeerAddr {
    // SAFETY: sockaddr_storage is plain data; all-zero is valid.
    storage: unsafe { std::mem::zeroed() },
    len: 0,
    hw: [0; 6],
};

/// A network front end's first step: the core's time zero and declared
/// service times, live snapshots if asked, and the word to
/// [`Server::start`] that every thread runs.
pub(crate) fn begin_serving(
    core: &mut DispatchCore,
    now: u64,
    declared_ns: &[Option<f64>],
    snapshots: &mut Option<SnapshotPublisher>,
    started: &mut Option<std::sync::mpsc::Sender<()>>,
) {
    core.set_base(now);
    core.set_declared_service(declared_ns);
    if let Some(p) = snapshots.take() {
        core.publish_snapshots(p, now);
    }
    if let Some(tx) = started.take() {
        let _ = tx.send(());
    }
}

/// A running server.
pub struct Server {
    local_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<RunReport<(DispatcherReport, NetCounters)>, RuntimeError>>,
    /// Serves `/metrics` until the server is joined (or dropped).
    exporter: Option<Exporter>,
}

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The socket could not be set up.
    #[error("cannot listen on {addr}")]
    Bind {
        /// Where.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// The metrics listener could not be set up.
    #[error("cannot serve metrics on {addr}")]
    MetricsBind {
        /// Where.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// The runtime refused the configuration or a thread failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// Bad configuration.
    #[error("{0}")]
    Config(String),
}

impl Server {
    /// Binds the socket (and the metrics listener, if any) and starts the
    /// dispatcher and workers (and the metrics exporter).
    ///
    /// # Errors
    /// An address cannot be bound, the policy cannot run on the runtime, no
    /// request type is registered.
    pub fn start(cfg: ServerConfig) -> Result<Server, ServerError> {
        let started = Instant::now();
        if cfg.types.is_empty() || cfg.types.len() > usize::from(u16::MAX) {
            return Err(ServerError::Config(
                "a server needs between 1 and 65535 request types".into(),
            ));
        }
        let bind_err = |source| ServerError::Bind {
            addr: cfg.addr,
            source,
        };
        // The packet buffers, one per request slot: the AF_XDP datapath gives
        // each its first frame when it binds.
        let pool = Arc::new(PacketPool::new(psp_runtime::max_in_flight(
            &cfg.runtime,
            cfg.types.len(),
        )));
        match cfg.datapath.clone() {
            DatapathKind::Udp => {
                let datapath = UdpDatapath::bind(cfg.addr).map_err(bind_err)?;
                let socket = datapath.try_clone_socket().map_err(bind_err)?;
                let probe: DropProbe = Box::new(move || crate::udp::socket_drops(&socket));
                let local = datapath.local_addr().map_err(bind_err)?;
                Self::launch(
                    cfg,
                    local,
                    Some(probe),
                    started,
                    move |cfg, stop, snaps, tx| serve(cfg, datapath, pool, stop, snaps, tx),
                )
            }
            DatapathKind::Xdp(x) => {
                let datapath = XdpDatapath::open(&x, cfg.addr, &pool, cfg.runtime.workers + 1)
                    .map_err(bind_err)?;
                let socket = datapath.socket();
                let probe: DropProbe =
                    Box::new(move || socket.statistics().ok().map(|s| s.rx_dropped));
                let local = datapath.local_addr().map_err(bind_err)?;
                Self::launch(
                    cfg,
                    local,
                    Some(probe),
                    started,
                    move |cfg, stop, snaps, tx| serve(cfg, datapath, pool, stop, snaps, tx),
                )
            }
            DatapathKind::Tcp(protocol, tcp) => {
                tcp.check().map_err(ServerError::Config)?;
                let listener = crate::tcp::bind(cfg.addr).map_err(bind_err)?;
                let local = listener.local_addr().map_err(bind_err)?;
                Self::launch(cfg, local, None, started, move |cfg, stop, snaps, tx| {
                    serve_tcp(cfg, listener, protocol, tcp, pool, stop, snaps, tx)
                })
            }
        }
    }

    /// Starts the metrics exporter (if asked), the dispatcher and the
    /// workers over a bound datapath.
    fn launch(
        cfg: ServerConfig,
        local_addr: SocketAddr,
        dropped_by_os: Option<DropProbe>,
        started: Instant,
        run: impl FnOnce(
            ServerConfig,
            Arc<AtomicBool>,
            Option<SnapshotPublisher>,
            std::sync::mpsc::Sender<()>,
        ) -> ServeResult
        + Send
        + 'static,
    ) -> Result<Server, ServerError> {
        let thread_err = |e: io::Error| ServerError::Runtime(RuntimeError::Thread(e.to_string()));
        // Both listeners are bound before anything starts, so that a bad or used
        // address is an error of its own.
        let (exporter, snapshots) = match cfg.metrics {
            Some(addr) => {
                let listener = Exporter::bind(addr)
                    .map_err(|source| ServerError::MetricsBind { addr, source })?;
                let (publisher, reader) =
                    psp_runtime::snapshot_channel(cfg.types.len(), NetCounters::SNAPSHOT_LEN);
                let source = MetricsSource {
                    reader,
                    type_names: cfg.types.iter().map(|t| t.name.clone()).collect(),
                    started,
                    dropped_by_os,
                    workers: cfg.runtime.workers,
                    declared_service_ns: cfg.types.iter().map(|t| t.mean_service_ns).collect(),
                };
                let exporter = Exporter::start(listener, source).map_err(thread_err)?;
                (Some(exporter), Some(publisher))
            }
            None => (None, None),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let stop_front = stop.clone();
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("psp-serve".into())
            .spawn(move || run(cfg, stop_front, snapshots, started_tx))
            .map_err(thread_err)?;
        // The sender is dropped unanswered when the run fails to start: its
        // error is then this call's.
        if started_rx.recv().is_err() {
            return Err(match thread.join() {
                Ok(Err(e)) => e.into(),
                Ok(Ok(_)) => {
                    RuntimeError::Thread("the server ended before it started".into()).into()
                }
                Err(_) => RuntimeError::Thread("server thread panicked".into()).into(),
            });
        }
        Ok(Server {
            local_addr,
            stop,
            thread,
            exporter,
        })
    }

    /// Where `/metrics` is served, if it is.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.exporter.as_ref().map(Exporter::local_addr)
    }

    /// Where clients send.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The flag that asks the server to stop receiving and drain (e.g. for a
    /// signal handler).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Whether the server has stopped (drained, or failed).
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Asks the server to stop, waits for the drain and returns its report.
    ///
    /// # Errors
    /// A runtime thread failed.
    pub fn stop(self) -> Result<ServerReport, ServerError> {
        self.stop.store(true, Ordering::Relaxed);
        self.join()
    }

    /// Waits until the server stops (after its stop flag was raised), then
    /// stops its metrics exporter.
    ///
    /// # Errors
    /// A runtime thread failed.
    pub fn join(self) -> Result<ServerReport, ServerError> {
        let joined = self.thread.join();
        drop(self.exporter);
        let r = joined.map_err(|_| RuntimeError::Thread("server thread panicked".into()))??;
        let (dispatcher, net) = r.dispatcher;
        Ok(ServerReport {
            dispatcher,
            net,
            served_per_worker: r.served_per_worker,
            steals_per_worker: r.steals_per_worker,
            abandoned_workers: r.abandoned_workers,
            local: r.local,
            pinned: r.pinned,
            polls_yield: r.polls_yield,
            wall: r.wall,
        })
    }
}

/// What a server's thread returns.
type ServeResult = Result<RunReport<(DispatcherReport, NetCounters)>, RuntimeError>;

/// The TCP front end's run: the listener is bound.
#[allow(clippy::too_many_arguments)]
fn serve_tcp(
    cfg: ServerConfig,
    listener: std::net::TcpListener,
    protocol: &'static psp_proto::ProtocolEntry,
    tcp: crate::tcp::TcpConfig,
    pool: Arc<PacketPool>,
    stop: Arc<AtomicBool>,
    snapshots: Option<SnapshotPublisher>,
    started: std::sync::mpsc::Sender<()>,
) -> ServeResult {
    let front = crate::tcp::TcpFrontEnd::new(
        listener,
        tcp,
        protocol.protocol,
        pool,
        cfg.runtime.workers,
        cfg.types.len() as u16,
        cfg.runtime.idle,
        stop,
        snapshots,
        started,
        cfg.types.iter().map(|t| t.mean_service_ns).collect(),
    )
    .map_err(|e| RuntimeError::Thread(e.to_string()))?;
    let handlers = cfg.handlers;
    psp_runtime::start(
        &cfg.runtime,
        &cfg.policy,
        cfg.types,
        |i| handlers.handler(i),
        front,
    )
}

fn serve<D: Datapath + 'static>(
    cfg: ServerConfig,
    mut datapath: D,
    pool: Arc<PacketPool>,
    stop: Arc<AtomicBool>,
    snapshots: Option<SnapshotPublisher>,
    started: std::sync::mpsc::Sender<()>,
) -> ServeResult {
    let thread_err = |e: io::Error| RuntimeError::Thread(e.to_string());
    let n_types = cfg.types.len() as u16;
    let classify_body = cfg.app_classifier.is_some() || cfg.protocol.classifies_body();
    let classifier = match (&cfg.app_classifier, cfg.protocol) {
        (_, DatagramProtocol::Memcache) => Box::new(crate::dgram::MemcacheClassifier),
        (Some(f), _) => f.classifier(),
        (None, _) => cfg.classifier.build(protocol::TYPE_OFFSET, n_types),
    };
    let mut worker_txs = Vec::with_capacity(cfg.runtime.workers);
    for _ in 0..cfg.runtime.workers {
        worker_txs.push(Some(datapath.transmitter().map_err(thread_err)?));
    }
    // memcached's order: as many requests held as one of the policy's queues
    // holds (at most half the request slots: the rest stay for other peers).
    let order = (cfg.protocol == DatagramProtocol::Memcache).then(|| {
        let (ends, answered) = (0..cfg.runtime.workers)
            .map(|_| {
                let (tx, rx) = rtrb::RingBuffer::new(pool.len());
                (Some(tx), rx)
            })
            .unzip();
        Order {
            peers: PeerOrder::new(pool.len(), cfg.runtime.queue_capacity.min(pool.len() / 2)),
            answered,
            worker_ends: ends,
            wake: Arc::default(),
            stopping_since: None,
            drain_ns: cfg.runtime.drain_timeout.as_nanos() as u64,
        }
    });
    let front = NetFrontEnd {
        reply_tx: datapath.transmitter().map_err(thread_err)?,
        datapath,
        pool: pool.clone(),
        classifier,
        classify_body,
        protocol: cfg.protocol,
        n_types,
        idle: cfg.runtime.idle,
        idler: Idler::new(cfg.runtime.idle),
        busy_idler: Idler::new(IdleStrategy::SpinPark {
            spin_us: BUSY_SPIN_US,
            park_us: MAX_WAIT.as_micros() as u32,
        }),
        stop,
        net: NetCounters::default(),
        seq: 0,
        snapshots,
        started: Some(started),
        declared_ns: cfg.types.iter().map(|t| t.mean_service_ns).collect(),
        worker_txs,
        order,
    };
    let handlers = cfg.handlers;
    psp_runtime::start(
        &cfg.runtime,
        &cfg.policy,
        cfg.types,
        |i| handlers.handler(i),
        front,
    )
}
