//! The TCP front end: many connections on the dispatcher's thread (the
//! paper's net worker), a request protocol without request ids (RESP,
//! memcached's text), so replies go out in each connection's request order.
//!
//! A connection's commands also *take effect* in the order sent, under every
//! policy (Redis and memcached guarantee it, and clients rely on it: a
//! pipeline reads its own writes): a connection has at most one request at
//! the policy or on a worker, and the next waits, already read, in its
//! input until that one's reply is back. Each command is still classified
//! and scheduled on its own; many connections run in parallel. What it
//! costs a pipelining client is in docs/protocol.md.
//!
//! The net thread reads each readable connection into its input buffer, cuts
//! complete requests with the protocol's framing (pipelined requests and
//! partial reads alike), classifies each, copies it into a packet-pool buffer
//! under a token and admits it to the policy. A worker serves it, writes the
//! reply into a buffer of its own stock and hands it back over its lock-free
//! ring; the net thread puts each reply at its place in the connection's
//! reorder window and writes out what is in order.
//!
//! Bounds, each a setting checked before start ([`TcpConfig::check`]):
//! connections (one more is answered "max clients" and closed), request
//! size (a longer one is answered and the connection closed: its framing is
//! lost), requests in flight per connection and reply bytes waiting per
//! connection (past either, the connection is not read until it drains: a
//! client that never reads cannot grow the server's memory), idle time.
//! A request the policy refuses (its queue full) is answered in its place,
//! never dropped: every request of a connection gets exactly one reply, in
//! order, until the connection closes. When no request slot is free, the
//! next request waits in its connection's input until a completion frees
//! one. Every request read ends in exactly one of the counters bad request
//! (malformed or too large), unknown type, or arrived at the policy.
//!
//! The request path allocates only until each worker's reply stock and each
//! connection's buffers reach their working size; it makes the system calls
//! of TCP itself (read, write) and no other.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use psp_core::Request;
use psp_runtime::idle::{Idler, Wakeup};
use psp_runtime::{
    DispatchCore, DispatcherReport, FrontEnd, HandlerError, IdleStrategy, Job, JobIo, Slot,
    SnapshotPublisher,
};

use psp_proto::{Protocol, Sizes};

use crate::pool::{PACKET_BYTES, PacketPool, PacketToken};
use crate::server::NetCounters;

/// Why the server answers a request itself; each protocol words it
/// ([`Protocol::refusal`]).
pub use psp_proto::Refusal;

/// The TCP front end's settings (`psp serve --protocol resp`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpConfig {
    /// Connections open at once at most.
    pub max_connections: usize,
    /// Longest request (bytes), at most [`MAX_REQUEST`].
    pub max_request: usize,
    /// Requests of one connection in flight at most (pipelining window).
    pub max_pipeline: usize,
    /// Reply bytes waiting for one connection at most before it is no
    /// longer read.
    pub max_output: usize,
    /// A connection idle this long (nothing in flight) is closed.
    pub idle_timeout: Duration,
    /// Whether a connection's commands take effect in the order sent (one
    /// executing at a time: the servers' contract, the default), or only
    /// their replies are in order while its pipelined commands run at once
    /// on several workers (for read-only or idempotent traffic; a
    /// `MULTI` block or `HELLO 3` then races the commands after it).
    pub ordered: bool,
    /// Consecutive complete commands of one connection and one type run as
    /// one job, this many at most (1: each command is its own job).
    pub max_batch: usize,
    /// A batch's expected time at most: the commands' type's mean measured
    /// service time times their count (as memcached's `-R` bounds what one
    /// connection runs per event), so that a short job stays short for the
    /// policy.
    pub batch_budget: Duration,
    /// The store's sizes, when the protocol may read them to type a
    /// command by what it will touch ([`Protocol::classify_sized`]): the
    /// in-memory store's; `None` types by name and arguments only.
    pub sizes: Option<psp_proto::StoreSizes>,
    /// The size classes by which `sizes` types a command.
    pub size_bounds: psp_proto::SizeBounds,
}

/// The longest request (a job's length is 16 bits). One longer than a
/// packet-pool buffer goes into its token's [`TcpSlots`] buffer.
pub const MAX_REQUEST: usize = u16::MAX as usize;
/// A connection's input buffer at first; it grows (to `max_request + 1`)
/// only for a request that does not fit.
const INPUT_START: usize = 4096;

/// What the TCP front end keeps per request slot beside the packet pool's
/// buffer: where the request came from and its place in its connection's
/// order (the worker's reply carries them back), and its body when longer
/// than a packet-pool buffer (values of a few KB: one growable buffer per
/// slot, empty until used). The datagram front ends have no use for either,
/// so the pool's `Packet` does not carry them.
///
/// Reached through the slot's [`PacketToken`], as the packet pool is
/// (module doc of `pool`): the net thread writes a slot before it admits
/// the token; the worker that pops the slot's job reads it until its
/// completion. The job and completion rings' release/acquire ordering
/// publishes the writes.
struct TcpSlots(Box<[std::cell::UnsafeCell<TcpSlot>]>);

/// One request slot's [`TcpSlots`] entry.
#[derive(Default)]
struct TcpSlot {
    /// The connection the request came on (its index).
    conn: u32,
    /// Its generation (a reused connection index has another).
    generation: u32,
    /// The request's place in the connection's request order.
    seq: u64,
    /// The body, when longer than a packet-pool buffer.
    large: Vec<u8>,
}

// SAFETY: a slot is touched only by the current owner of its token (see
// the type's doc): never by two threads at once.
unsafe impl Sync for TcpSlots {}

impl TcpSlots {
    fn new(tokens: usize) -> Self {
        Self(
            (0..tokens)
                .map(|_| std::cell::UnsafeCell::new(TcpSlot::default()))
                .collect(),
        )
    }

    /// `token`'s slot, to write.
    fn get_mut<'a>(&'a self, token: &'a mut PacketToken) -> &'a mut TcpSlot {
        // SAFETY: the token is unique and borrowed exclusively for as long
        // as this reference lives: no other access to its slot exists.
        unsafe { &mut *self.0[token.index() as usize].get() }
    }

    /// `token`'s slot, to read.
    fn get<'a>(&'a self, token: &'a PacketToken) -> &'a TcpSlot {
        // SAFETY: the token is unique and borrowed shared for as long as
        // this reference lives: nobody writes meanwhile.
        unsafe { &*self.0[token.index() as usize].get() }
    }
}

/// The smallest `--tcp-max-request`.
pub const MIN_REQUEST: usize = 16;
/// `--tcp-max-connections`.
pub const CONNECTIONS: (usize, usize) = (1, 65_536);
/// `--tcp-max-pipeline`.
pub const PIPELINE: (usize, usize) = (1, 4096);
/// `--tcp-max-output` (bytes).
pub const OUTPUT: (usize, usize) = (4096, 64 << 20);
/// `--tcp-idle-timeout` (seconds).
pub const IDLE_S: (u64, u64) = (1, 86_400);
/// `--tcp-batch` (commands per job).
pub const BATCH: (usize, usize) = (1, 256);
/// [`TcpConfig::batch_budget`]'s range (µs).
pub const BATCH_BUDGET_US: (u64, u64) = (1, 1_000_000);

impl Default for TcpConfig {
    fn default() -> Self {
        Self {
            max_connections: 1024,
            max_request: MAX_REQUEST,
            max_pipeline: 256,
            max_output: 4 << 20,
            idle_timeout: Duration::from_secs(300),
            ordered: true,
            max_batch: 16,
            batch_budget: Duration::from_micros(20),
            sizes: None,
            size_bounds: psp_proto::SizeBounds::default(),
        }
    }
}

impl TcpConfig {
    /// Checks every number before anything is bound.
    ///
    /// # Errors
    /// A value out of its range, as one line.
    pub fn check(&self) -> Result<(), String> {
        let within = |name: &str, v: usize, (lo, hi): (usize, usize)| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(format!("{name} must be in [{lo}, {hi}], not {v}"))
            }
        };
        within("--tcp-max-connections", self.max_connections, CONNECTIONS)?;
        within(
            "--tcp-max-request",
            self.max_request,
            (MIN_REQUEST, MAX_REQUEST),
        )?;
        within("--tcp-max-pipeline", self.max_pipeline, PIPELINE)?;
        within("--tcp-max-output", self.max_output, OUTPUT)?;
        within("--tcp-batch", self.max_batch, BATCH)?;
        let us = self.batch_budget.as_micros();
        if !(u128::from(BATCH_BUDGET_US.0)..=u128::from(BATCH_BUDGET_US.1)).contains(&us) {
            return Err(format!(
                "the batch budget must be in [{}us, {}us], not {us}us",
                BATCH_BUDGET_US.0, BATCH_BUDGET_US.1
            ));
        }
        let s = self.idle_timeout.as_secs();
        if !(IDLE_S.0..=IDLE_S.1).contains(&s) {
            return Err(format!(
                "--tcp-idle-timeout must be in [{}s, {}s], not {s}s",
                IDLE_S.0, IDLE_S.1
            ));
        }
        Ok(())
    }
}

/// A worker's reply, on its way to the net thread.
struct Reply {
    conn: u32,
    generation: u32,
    seq: u64,
    bytes: Vec<u8>,
}

/// A reply in a connection's window: its bytes and the lane (worker) whose
/// stock they return to (`None`: the net thread's own refusal).
type Ready = (Option<usize>, Vec<u8>);

/// The eventfd a worker writes when the net thread sleeps with a reply
/// waiting for it.
struct Wake {
    sleeping: CachePadded<AtomicBool>,
    event: OwnedFd,
    /// System calls about sleeping and waking the network thread: its
    /// waits and eventfd reads, the workers' eventfd writes (rare on a
    /// busy server: only while it sleeps).
    syscalls: AtomicU64,
}

impl Wake {
    fn new() -> io::Result<Self> {
        // SAFETY: eventfd(2) has no memory preconditions; checked below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            sleeping: CachePadded::new(AtomicBool::new(false)),
            // SAFETY: a fresh descriptor owned by nobody else.
            event: unsafe { OwnedFd::from_raw_fd(fd) },
            syscalls: AtomicU64::new(0),
        })
    }

    #[inline]
    fn notify(&self) {
        // Pairs with the fence in `TcpFrontEnd::wait`.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) {
            let one = 1u64;
            // SAFETY: writes 8 bytes from a live u64 to our eventfd.
            unsafe { libc::write(self.event.as_raw_fd(), (&raw const one).cast(), 8) };
            self.syscalls.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn clear(&self) {
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into a live u64 from our non-blocking eventfd.
        unsafe { libc::read(self.event.as_raw_fd(), (&raw mut v).cast(), 8) };
        self.syscalls.fetch_add(1, Ordering::Relaxed);
    }
}

/// A worker's request access and reply path.
pub struct TcpIo {
    pool: Arc<PacketPool>,
    slots: Arc<TcpSlots>,
    protocol: &'static dyn Protocol,
    replies: rtrb::Producer<Reply>,
    stock: rtrb::Consumer<Vec<u8>>,
    wake: Arc<Wake>,
}

impl JobIo for TcpIo {
    #[inline]
    fn request<'a>(&'a self, job: &'a Job) -> &'a [u8] {
        let len = usize::from(job.len);
        // SAFETY: this worker owns the job's slot from its job's pop until
        // it pushes the completion, after `respond`.
        let token = unsafe { PacketToken::from_raw_ref(&job.token) };
        if len > PACKET_BYTES {
            return &self.slots.get(token).large[..len];
        }
        &self.pool.get(token).data()[..len]
    }

    fn session(&self, job: &Job) -> u64 {
        // SAFETY: as in `request`.
        let slot = self
            .slots
            .get(unsafe { PacketToken::from_raw_ref(&job.token) });
        session_id(slot.conn, slot.generation)
    }

    fn max_response(&self) -> usize {
        // Replies are the handler's, bounded by the application (LRANGE's
        // count, MGET's keys); a connection's output bound applies after.
        64 << 20
    }

    fn first_request_len(&self, body: &[u8]) -> usize {
        // The net thread framed the batch with the same protocol.
        match self.protocol.request_len(body, body.len()) {
            Ok(Some(n)) => n,
            _ => body.len(),
        }
    }

    fn append_refusal(&self, error: &HandlerError, response: &mut Vec<u8>) {
        self.protocol.refusal(refusal_for(error), response);
    }

    fn respond(&mut self, job: &Job, outcome: Result<(), HandlerError>, response: &[u8]) -> bool {
        match outcome {
            Ok(()) => self.send(job, Ok(response)),
            Err(e) => self.send(job, Err(refusal_for(&e))),
        }
    }

    fn refuse_expired(&mut self, job: &Job) -> bool {
        self.send(job, Err(Refusal::Overloaded))
    }
}

impl TcpIo {
    /// Hands the net thread `job`'s answer: `response`, or `refusal` once
    /// per request the job carries (each gets its answer).
    fn send(&mut self, job: &Job, answer: Result<&[u8], Refusal>) -> bool {
        // SAFETY: as in `request`.
        let slot = self
            .slots
            .get(unsafe { PacketToken::from_raw_ref(&job.token) });
        let mut bytes = self.stock.pop().unwrap_or_default();
        bytes.clear();
        match answer {
            Ok(response) => bytes.extend_from_slice(response),
            Err(refusal) => {
                for _ in 0..job.count.max(1) {
                    self.protocol.refusal(refusal, &mut bytes);
                }
            }
        }
        let mut reply = Reply {
            conn: slot.conn,
            generation: slot.generation,
            seq: slot.seq,
            bytes,
        };
        // The ring holds a reply per request slot: it is full only while
        // the net thread is behind; it drains it on every pass.
        loop {
            match self.replies.push(reply) {
                Ok(()) => break,
                Err(rtrb::PushError::Full(r)) => {
                    reply = r;
                    self.wake.notify();
                    std::thread::yield_now();
                }
            }
        }
        self.wake.notify();
        true
    }
}

/// The refusal that answers a request whose handler returned `error`.
fn refusal_for(error: &HandlerError) -> Refusal {
    match error {
        HandlerError::BadBody(_) => Refusal::BadBody,
        HandlerError::Failed(_) => Refusal::HandlerError,
    }
}

/// A worker's ends of its reply lane: replies out, spent buffers back.
type WorkerLane = (rtrb::Producer<Reply>, rtrb::Consumer<Vec<u8>>);
/// The net thread's ends of a worker's reply lane.
type NetLane = (rtrb::Consumer<Reply>, rtrb::Producer<Vec<u8>>);

/// One connection.
struct Conn {
    stream: TcpStream,
    generation: u32,
    flow: psp_core::FlowId,
    input: Vec<u8>,
    /// Bytes of `input` in use.
    filled: usize,
    /// Reply bytes not yet written, from `out_at`.
    output: Vec<u8>,
    out_at: usize,
    /// The next request's sequence number, and the next reply to write.
    next_seq: u64,
    write_seq: u64,
    /// Replies by `seq - write_seq`: `None` while in flight.
    window: VecDeque<Option<Ready>>,
    /// One of the connection's requests is at the policy or on a worker:
    /// the next one waits in the input until its reply comes back (the
    /// connection's commands take effect in the order sent).
    executing: bool,
    /// The protocol's classification state ([`Protocol::classify`]).
    class_state: u32,
    /// Its input is held by a bound (pipelining, output): counted once per
    /// pause in `paused`.
    paused: bool,
    /// The socket may have unread bytes (edge-triggered readiness).
    readable: bool,
    /// The peer's end of stream (or an error) was announced: read until
    /// the socket says so, short reads included.
    hup: bool,
    /// In `to_read`.
    queued: bool,
    /// Close once every reply is written (peer closed, or framing lost).
    closing: bool,
    /// The peer closed its side.
    peer_closed: bool,
    /// Our side is shut after the last reply; what still arrives is read
    /// and discarded until the peer closes (closing a socket with unread
    /// bytes would reset the connection and lose the last reply).
    lingering: bool,
    last_active: Instant,
    /// A blocking command found nothing and waits, parked here (holding no
    /// worker and no slot): its reply's place is `seq`'s, and the
    /// connection's later commands wait behind it (`executing` stays set).
    parked: Option<Parked>,
}

/// A parked blocking command ([`psp_proto::blocking`]).
struct Parked {
    /// Its reply's place in the connection's order.
    seq: u64,
    /// When to answer `timeout_reply` (Unix ms; 0: never).
    deadline_ms: u64,
    timeout_reply: Vec<u8>,
    /// The command, admitted again when a write may have served it.
    request: Vec<u8>,
}

impl Conn {
    fn in_flight(&self) -> usize {
        self.window.len()
    }

    fn output_len(&self) -> usize {
        self.output.len() - self.out_at
    }

    /// Whether the next request may be cut and admitted now: none of the
    /// connection's is executing, and its pipelining and output bounds
    /// leave room.
    fn can_admit(&self, cfg: &TcpConfig) -> bool {
        !self.executing && self.in_flight() < cfg.max_pipeline && self.output_len() < cfg.max_output
    }
}

/// Connection `id` of `generation` as the protocol's sessions (and pub/sub's
/// listeners) know it: unique in the process ([`next_generation`]).
fn session_id(id: u32, generation: u32) -> u64 {
    (u64::from(id) + 1) << 32 | u64::from(generation)
}

/// A connection's generation, from one count for every TCP front end of
/// the process: a session id names one connection of one server, so one
/// pub/sub table serves every server in the process.
fn next_generation() -> u32 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// What the TCP front end counted beyond [`NetCounters`].
pub type TcpCounters = psp_metrics::TcpSummary;

const LISTENER: Token = Token(usize::MAX);
/// Longest blocking wait of an idle net thread.
const MAX_WAIT: Duration = Duration::from_millis(5);
/// How long an idle net thread polls before it sleeps while workers are
/// busy (as the UDP front end).
const BUSY_SPIN_US: u32 = 20;
/// While workers are busy, the net thread asks epoll for new requests at
/// most this often (a request arriving then waits this long at most).
const EPOLL_GAP: Duration = Duration::from_micros(5);
/// How often idle connections are looked for.
const SWEEP: Duration = Duration::from_millis(100);
/// How long, and how many bytes, a connection closed after an error is read
/// and discarded before it is closed anyway.
const LINGER: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 1 << 20;
/// Requests admitted per pass at most (a worker waiting for its next job
/// waits for the whole pass).
const ADMIT_BATCH: usize = 32;

/// The dispatcher's TCP front end.
pub struct TcpFrontEnd {
    poll: Poll,
    events: Events,
    /// The last poll's events (token, readable, writable, end of stream or
    /// error announced), reused.
    ready: Vec<(Token, bool, bool, bool)>,
    listener: TcpListener,
    conns: Vec<Option<Conn>>,
    free_ids: Vec<u32>,
    generations: Vec<u32>,
    open: usize,
    /// Connections with unread bytes and room to read them.
    to_read: VecDeque<u32>,
    /// Connections waiting for a free request slot (retried every pass).
    starved: Vec<u32>,
    lanes: Vec<NetLane>,
    worker_lanes: Vec<Option<WorkerLane>>,
    pool: Arc<PacketPool>,
    slots: Arc<TcpSlots>,
    protocol: &'static dyn Protocol,
    n_types: u16,
    wake: Arc<Wake>,
    cfg: TcpConfig,
    stop: Arc<AtomicBool>,
    idle: IdleStrategy,
    idler: Idler,
    /// Polls briefly while workers are busy (a reply is likely microseconds
    /// away: cheaper than a sleep and a wake-up), then waits.
    busy_idler: Idler,
    seq: u64,
    last_sweep: Instant,
    /// Connections with a parked command, in the order they parked (with
    /// their generation: a closed one is skipped).
    parked: Vec<(u32, u32)>,
    /// The protocol's wake count when the parked commands were last
    /// admitted again ([`Protocol::wake_generation`]).
    wakes_seen: u64,
    snapshots: Option<SnapshotPublisher>,
    started: Option<std::sync::mpsc::Sender<()>>,
    declared_ns: Vec<Option<f64>>,
    /// Connections given pub/sub messages, and those cut off, in one
    /// delivery ([`Self::deliver_messages`]; kept for their capacity).
    delivered: Vec<u32>,
    overflowed: Vec<u32>,
    /// Connections `CLIENT KILL` marked, in one pass (kept for capacity).
    killed: Vec<u32>,
    /// This front end's number among the process's
    /// ([`psp_proto::clients::next_server`]).
    server: u32,
    /// The listening address (a connection's `laddr` when its own is not
    /// known).
    local: SocketAddr,
    /// System calls the network thread made on its sockets (reads,
    /// writes, epoll, accepts and closes), counted at each call.
    syscalls: u64,
    /// What the front end counted.
    pub net: NetCounters,
    /// And its connections.
    pub tcp: TcpCounters,
}

impl TcpFrontEnd {
    /// The front end over `listener` (already bound) for `workers` workers.
    ///
    /// # Errors
    /// The kernel refuses the poll set or an eventfd.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        listener: std::net::TcpListener,
        cfg: TcpConfig,
        protocol: &'static dyn Protocol,
        pool: Arc<PacketPool>,
        workers: usize,
        n_types: u16,
        idle: IdleStrategy,
        stop: Arc<AtomicBool>,
        snapshots: Option<SnapshotPublisher>,
        started: std::sync::mpsc::Sender<()>,
        declared_ns: Vec<Option<f64>>,
    ) -> io::Result<Self> {
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let mut listener = TcpListener::from_std(listener);
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let slots = pool.len().max(1);
        let mut lanes = Vec::with_capacity(workers);
        let mut worker_lanes = Vec::with_capacity(workers);
        for _ in 0..workers {
            let (rtx, rrx) = rtrb::RingBuffer::new(slots);
            let (stx, srx) = rtrb::RingBuffer::new(slots);
            lanes.push((rrx, stx));
            worker_lanes.push(Some((rtx, srx)));
        }
        Ok(Self {
            poll,
            events: Events::with_capacity(256),
            ready: Vec::with_capacity(256),
            listener,
            conns: Vec::new(),
            free_ids: Vec::new(),
            generations: Vec::new(),
            open: 0,
            to_read: VecDeque::new(),
            starved: Vec::new(),
            lanes,
            worker_lanes,
            protocol,
            slots: Arc::new(TcpSlots::new(pool.len())),
            pool,
            n_types,
            wake: Arc::new(Wake::new()?),
            cfg,
            stop,
            idle,
            idler: Idler::new(idle),
            busy_idler: Idler::new(IdleStrategy::SpinPark {
                spin_us: BUSY_SPIN_US,
                park_us: MAX_WAIT.as_micros() as u32,
            }),
            seq: 0,
            last_sweep: Instant::now(),
            parked: Vec::new(),
            wakes_seen: 0,
            snapshots,
            started: Some(started),
            declared_ns,
            net: NetCounters::default(),
            tcp: TcpCounters::default(),
            syscalls: 0,
            delivered: Vec::new(),
            overflowed: Vec::new(),
            killed: Vec::new(),
            server: psp_proto::clients::next_server(),
            local,
        })
    }

    /// Takes the workers' replies; returns whether there were any.
    fn take_replies(&mut self) -> bool {
        let mut any = false;
        for lane in 0..self.lanes.len() {
            while let Ok(r) = self.lanes[lane].0.pop() {
                any = true;
                let id = r.conn as usize;
                let live =
                    matches!(&self.conns.get(id), Some(Some(c)) if c.generation == r.generation);
                if !live {
                    self.tcp.replies_to_closed += 1;
                    let _ = self.lanes[lane].1.push(r.bytes);
                    continue;
                }
                let c = self.conns[id].as_mut().expect("live");
                if let Some(b) = psp_proto::blocking::read(&r.bytes) {
                    // Nothing to take yet: parked, its place kept, the
                    // connection's turn not over.
                    c.parked = Some(Parked {
                        seq: r.seq,
                        deadline_ms: b.deadline_ms,
                        timeout_reply: b.timeout_reply.to_vec(),
                        request: b.request.to_vec(),
                    });
                    self.parked.push((r.conn, r.generation));
                    self.tcp.parked += 1;
                    let _ = self.lanes[lane].1.push(r.bytes);
                    continue;
                }
                let at = (r.seq - c.write_seq) as usize;
                c.window[at] = Some((Some(lane), r.bytes));
                // Its turn is over: the next request (already in the input,
                // or still in the socket) may go (`flush` queues it).
                c.executing = false;
                self.flush(r.conn);
            }
        }
        any
    }

    /// Moves the pub/sub messages published to this front end's listening
    /// connections into their outputs and writes them; closes one whose
    /// messages passed the bound. A connection with a reply in flight gets
    /// its messages on a later pass (they never overtake a reply, so a
    /// subscription's confirmation leaves before its first message).
    /// Returns whether any were moved.
    fn deliver_messages(&mut self) -> bool {
        let registry = psp_proto::pubsub::registry();
        if !registry.pending() {
            return false;
        }
        // Reused: the net thread allocates nothing once warm.
        let mut written = std::mem::take(&mut self.delivered);
        let mut overflowed = std::mem::take(&mut self.overflowed);
        let (conns, tcp) = (&mut self.conns, &mut self.tcp);
        registry.drain(|session, outbox| {
            let Some(id) = (session >> 32).checked_sub(1) else {
                return false;
            };
            let Some(Some(c)) = conns.get_mut(id as usize) else {
                return false;
            };
            if c.generation != session as u32 || !c.window.is_empty() {
                return false;
            }
            match outbox {
                // Unwritten messages count against the same bound, in
                // the outbox or in the output.
                psp_proto::pubsub::Outbox::Messages { bytes, .. }
                    if c.output_len() + bytes.len() > psp_proto::pubsub::OUTBOX_LIMIT =>
                {
                    overflowed.push(id as u32);
                }
                psp_proto::pubsub::Outbox::Messages { bytes, count } => {
                    c.output.extend_from_slice(bytes);
                    tcp.pubsub_messages += count;
                    written.push(id as u32);
                }
                psp_proto::pubsub::Outbox::Overflowed => overflowed.push(id as u32),
            }
            true
        });
        for &id in &overflowed {
            self.tcp.closed_on_pubsub_overflow += 1;
            self.close(id);
        }
        for &id in &written {
            self.flush(id);
        }
        let any = !(written.is_empty() && overflowed.is_empty());
        written.clear();
        overflowed.clear();
        (self.delivered, self.overflowed) = (written, overflowed);
        any
    }

    /// Closes this front end's connections that `CLIENT KILL` marked
    /// (after the replies already taken: the killer's own reply, when it
    /// killed itself, leaves first). Returns whether any were.
    fn carry_out_kills(&mut self) -> bool {
        let registry = psp_proto::clients::registry();
        if !registry.pending() {
            return false;
        }
        let mut any = false;
        let conns = &self.conns;
        let owns = |session: u64| {
            let Some(id) = (session >> 32).checked_sub(1) else {
                return false;
            };
            matches!(conns.get(id as usize), Some(Some(c)) if c.generation == session as u32)
        };
        let mut marked = std::mem::take(&mut self.killed);
        registry.take_kills(owns, |s| marked.push(((s >> 32) - 1) as u32));
        for &id in &marked {
            self.flush(id);
            // A write error in the flush closed it already (counted there):
            // one counter per connection.
            if self.conns[id as usize].is_some() {
                self.tcp.closed_by_kill += 1;
                self.close(id);
            }
            any = true;
        }
        marked.clear();
        self.killed = marked;
        any
    }

    /// Writes what is in order for connection `id`; closes it when done
    /// and closing, or on a write error.
    fn flush(&mut self, id: u32) {
        let Some(c) = self.conns[id as usize].as_mut() else {
            return;
        };
        while let Some(Some(_)) = c.window.front() {
            let (lane, bytes) = c.window.pop_front().flatten().expect("ready");
            c.write_seq += 1;
            c.output.extend_from_slice(&bytes);
            // Back to the stock of the worker that wrote it: each stock then
            // holds what its worker needs, and no worker allocates once warm.
            if let Some(l) = lane.and_then(|l| self.lanes.get_mut(l)) {
                let _ = l.1.push(bytes);
            }
        }
        let mut failed = false;
        while c.out_at < c.output.len() {
            self.syscalls += 1;
            match c.stream.write(&c.output[c.out_at..]) {
                Ok(0) => {
                    failed = true;
                    break;
                }
                Ok(n) => c.out_at += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        if c.out_at == c.output.len() {
            c.output.clear();
            c.out_at = 0;
        }
        if failed {
            self.net.reply_send_errors += 1;
            self.tcp.closed_on_io_error += 1;
            self.close(id);
            return;
        }
        let c = self.conns[id as usize].as_mut().expect("open");
        if c.closing && c.window.is_empty() && c.output_len() == 0 {
            if c.peer_closed {
                self.close(id);
            } else if !c.lingering {
                c.lingering = true;
                c.last_active = Instant::now();
                let _ = c.stream.shutdown(std::net::Shutdown::Write);
                self.discard(id);
            }
            return;
        }
        // A bound (not the connection's own turn) holds its input: paused.
        let waiting = (c.readable || c.filled > 0) && !c.closing;
        let bounded = waiting && !c.executing && !c.can_admit(&self.cfg);
        if bounded && !c.paused {
            self.tcp.paused += 1;
        }
        c.paused = bounded;
        // Room again: cut or read what may be waiting.
        if waiting && c.can_admit(&self.cfg) && !c.queued {
            c.queued = true;
            self.to_read.push_back(id);
        }
    }

    /// The network path's system calls so far: the network thread's own
    /// and those about sleeping and waking it.
    fn syscalls_so_far(&self) -> u64 {
        self.syscalls + self.wake.syscalls.load(Ordering::Relaxed)
    }

    fn has_room(&self, id: u32) -> bool {
        self.conns[id as usize]
            .as_ref()
            .is_some_and(|c| c.can_admit(&self.cfg))
    }

    fn close(&mut self, id: u32) {
        if let Some(mut c) = self.conns[id as usize].take() {
            let _ = self.poll.registry().deregister(&mut c.stream);
            // epoll_ctl, and the close as `c` drops.
            self.syscalls += 2;
            self.open -= 1;
            psp_proto::pubsub::registry().forget(session_id(id, c.generation));
            psp_proto::clients::registry().closed(session_id(id, c.generation));
            self.generations[id as usize] = next_generation();
            self.free_ids.push(id);
            // Requests still in flight are answered into the void: their
            // replies are counted as `replies_to_closed` when they come.
        }
    }

    fn accept(&mut self) {
        loop {
            self.syscalls += 1;
            match self.listener.accept() {
                Ok((mut stream, peer)) => {
                    if self.open >= self.cfg.max_connections {
                        self.tcp.refused += 1;
                        let mut msg = Vec::new();
                        self.protocol.refusal(Refusal::MaxClients, &mut msg);
                        let _ = stream.write(&msg);
                        // The write, and the close as `stream` drops.
                        self.syscalls += 2;
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    // setsockopt, then epoll_ctl below.
                    self.syscalls += 2;
                    let id = match self.free_ids.pop() {
                        Some(id) => id,
                        None => {
                            self.conns.push(None);
                            self.generations.push(next_generation());
                            (self.conns.len() - 1) as u32
                        }
                    };
                    if self
                        .poll
                        .registry()
                        .register(
                            &mut stream,
                            Token(id as usize),
                            Interest::READABLE | Interest::WRITABLE,
                        )
                        .is_err()
                    {
                        self.free_ids.push(id);
                        self.tcp.closed_on_io_error += 1;
                        continue;
                    }
                    self.tcp.accepted += 1;
                    self.open += 1;
                    // For CLIENT LIST and KILL (getsockname: a system call).
                    self.syscalls += 1;
                    psp_proto::clients::registry().opened(
                        session_id(id, self.generations[id as usize]),
                        psp_proto::clients::Conn {
                            addr: peer,
                            laddr: stream.local_addr().unwrap_or(self.local),
                            fd: stream.as_raw_fd(),
                            since: Instant::now(),
                            server: self.server,
                        },
                    );
                    self.conns[id as usize] = Some(Conn {
                        stream,
                        generation: self.generations[id as usize],
                        flow: psp_core::policy::ws::flow_hash(
                            u64::from(id) << 32 | u64::from(self.generations[id as usize]),
                        ) as psp_core::FlowId,
                        input: vec![0; INPUT_START.min(self.cfg.max_request + 1)],
                        filled: 0,
                        output: Vec::new(),
                        out_at: 0,
                        next_seq: 0,
                        write_seq: 0,
                        window: VecDeque::new(),
                        executing: false,
                        class_state: 0,
                        paused: false,
                        readable: true,
                        hup: false,
                        queued: true,
                        closing: false,
                        peer_closed: false,
                        lingering: false,
                        last_active: Instant::now(),
                        parked: None,
                    });
                    self.to_read.push_back(id);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.net.receive_errors += 1;
                    return;
                }
            }
        }
    }

    /// Puts `refusal`'s reply at connection `id`'s next place.
    fn refuse_in_order(&mut self, id: u32, refusal: Refusal) {
        self.refuse_each_in_order(id, refusal, 1);
    }

    /// Puts `refusal`'s reply to each of `count` requests at connection
    /// `id`'s next place.
    fn refuse_each_in_order(&mut self, id: u32, refusal: Refusal, count: u16) {
        let mut bytes = Vec::new();
        for _ in 0..count {
            self.protocol.refusal(refusal, &mut bytes);
        }
        let c = self.conns[id as usize].as_mut().expect("open");
        c.next_seq += 1;
        c.window.push_back(Some((None, bytes)));
    }

    /// Reads connection `id` and admits its complete requests, up to
    /// `budget`; returns how many requests it cut.
    fn read_conn(&mut self, core: &mut DispatchCore, id: u32, now: u64, budget: usize) -> usize {
        let max = self.cfg.max_request;
        let mut cut = 0;
        loop {
            // Cut what is complete.
            loop {
                if cut >= budget || !self.has_room(id) {
                    self.flush(id);
                    return cut;
                }
                let Some(c) = self.conns[id as usize].as_mut() else {
                    return cut;
                };
                let skip = self.protocol.ignorable_prefix(&c.input[..c.filled]);
                if skip > 0 {
                    c.input.copy_within(skip..c.filled, 0);
                    c.filled -= skip;
                }
                if c.filled == 0 {
                    break;
                }
                let len = match self.protocol.request_len(&c.input[..c.filled], max) {
                    Ok(Some(len)) => len,
                    Ok(None) if c.filled > max => {
                        self.tcp.closed_on_error += 1;
                        self.net.received += 1;
                        self.net.bad_request += 1;
                        self.refuse_in_order(id, Refusal::TooLarge);
                        self.stop_reading(id);
                        return cut;
                    }
                    Ok(None) => break,
                    Err(refusal) => {
                        self.tcp.closed_on_error += 1;
                        self.net.received += 1;
                        self.net.bad_request += 1;
                        self.refuse_in_order(id, refusal);
                        self.stop_reading(id);
                        return cut;
                    }
                };
                let Some((len, count)) = self.admit(core, id, len, now, budget - cut) else {
                    // No request slot free: the request stays in the input
                    // until a completion frees one (as the UDP front end
                    // receives only into free slots).
                    self.starve(id);
                    return cut;
                };
                self.net.received += u64::from(count);
                cut += usize::from(count);
                let c = self.conns[id as usize].as_mut().expect("open");
                c.input.copy_within(len..c.filled, 0);
                c.filled -= len;
            }
            // Read more.
            let Some(c) = self.conns[id as usize].as_mut() else {
                return cut;
            };
            if c.closing || !c.readable {
                self.flush(id);
                return cut;
            }
            if c.filled == c.input.len() {
                // A request longer than the buffer, within the bound (a
                // longer one was refused above): grow, up to the bound.
                let to = (c.input.len() * 2).min(max + 1);
                c.input.resize(to, 0);
            }
            let room = c.input.len() - c.filled;
            self.syscalls += 1;
            match c.stream.read(&mut c.input[c.filled..c.filled + room]) {
                Ok(0) => {
                    self.tcp.closed_by_peer += 1;
                    c.readable = false;
                    c.closing = true;
                    c.peer_closed = true;
                    self.flush(id);
                    return cut;
                }
                Ok(n) => {
                    c.filled += n;
                    c.last_active = Instant::now();
                    // A short read drained the socket: the next byte to
                    // arrive raises a new edge, so the read that would only
                    // say "would block" (a system call per request) is
                    // skipped.
                    if n < room && !c.hup {
                        c.readable = false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    c.readable = false;
                    if c.filled == 0 {
                        self.flush(id);
                        return cut;
                    }
                    // Cut what arrived, then stop.
                    let before = cut;
                    let more = self.read_cut_only(core, id, now, budget - cut);
                    return before + more;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.net.receive_errors += 1;
                    self.tcp.closed_on_io_error += 1;
                    self.close(id);
                    return cut;
                }
            }
        }
    }

    /// Cuts the complete requests already read (the socket is drained).
    fn read_cut_only(
        &mut self,
        core: &mut DispatchCore,
        id: u32,
        now: u64,
        budget: usize,
    ) -> usize {
        // `readable` is false: read_conn cuts and returns without reading.
        self.read_conn(core, id, now, budget)
    }

    /// Reads and drops what a lingering connection sends, closing it at
    /// the peer's end of stream or past [`LINGER_BYTES`].
    fn discard(&mut self, id: u32) {
        let Some(c) = self.conns[id as usize].as_mut() else {
            return;
        };
        let mut dropped = 0;
        loop {
            self.syscalls += 1;
            match c.stream.read(&mut c.input) {
                Ok(0) => break,
                Ok(n) => {
                    dropped += n;
                    if dropped > LINGER_BYTES {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => break,
            }
        }
        self.close(id);
    }

    fn stop_reading(&mut self, id: u32) {
        if let Some(c) = self.conns[id as usize].as_mut() {
            c.closing = true;
            c.readable = false;
            c.filled = 0;
        }
        self.flush(id);
    }

    /// Admits (or answers) the request of `len` bytes at the front of
    /// connection `id`'s input, with the complete requests of its type right
    /// after it (a batch: [`TcpConfig::max_batch`], [`TcpConfig::batch_budget`], at
    /// most `budget` in all). Returns the bytes and requests taken; `None`:
    /// no request slot is free, nothing was taken.
    fn admit(
        &mut self,
        core: &mut DispatchCore,
        id: u32,
        len: usize,
        now: u64,
        budget: usize,
    ) -> Option<(usize, u16)> {
        let c = self.conns[id as usize].as_ref().expect("open");
        // The state moves on only with the request (not when it must wait
        // for a slot and is classified again).
        let mut state = c.class_state;
        let typing = Typing {
            protocol: self.protocol,
            sizes: self.cfg.sizes.as_ref().map(|s| &*s.0),
            bounds: self.cfg.size_bounds,
        };
        let type_id = typing.classify(&c.input[..len], &mut state);
        let mut token = core.take_token()?;
        if type_id >= self.n_types {
            self.conns[id as usize].as_mut().expect("open").class_state = state;
            core.put_token(token);
            self.net.unknown_type += 1;
            self.refuse_in_order(id, Refusal::UnknownType);
            return Some((len, 1));
        }
        let max = if self.protocol.may_block(&c.input[..len]) {
            1
        } else {
            self.batch_limit(core, type_id).min(budget.max(1))
        };
        let c = self.conns[id as usize].as_mut().expect("open");
        let (len, count) = batch(
            &typing,
            &c.input[..c.filled],
            len,
            type_id,
            &mut state,
            max,
            self.cfg.max_request,
        );
        c.class_state = state;
        let c = self.conns[id as usize].as_mut().expect("open");
        self.seq += 1;
        let slot = load_request(
            &self.slots,
            &self.pool,
            &mut token,
            &c.input[..len],
            (id, c, c.next_seq),
            (self.seq, type_id, count, now),
        );
        match core.admit(token, slot, now) {
            Ok(()) => {
                c.next_seq += 1;
                c.window.push_back(None);
                c.executing = self.cfg.ordered;
            }
            Err(token) => {
                core.put_token(token);
                self.net.overloaded += u64::from(count);
                self.refuse_each_in_order(id, Refusal::Overloaded, count);
            }
        }
        Some((len, count))
    }

    /// How many commands of `type_id` one job may carry now: the setting,
    /// and as many as fit [`TcpConfig::batch_budget`] at the type's mean measured
    /// service time (its declared one before any completed). Only where a
    /// job runs to completion on one worker (a preemptive executor runs
    /// each request on its own fiber).
    fn batch_limit(&self, core: &DispatchCore, type_id: u16) -> usize {
        if self.cfg.max_batch <= 1 || !core.runs_jobs_to_completion() {
            return 1;
        }
        let mean = core.mean_service_ns(type_id).or_else(|| {
            self.declared_ns
                .get(usize::from(type_id))
                .copied()
                .flatten()
                .map(|ns| ns as u64)
        });
        match mean {
            Some(ns) => {
                let budget = self.cfg.batch_budget.as_nanos() as u64;
                (budget / ns.max(1)).clamp(1, self.cfg.max_batch as u64) as usize
            }
            None => 1,
        }
    }

    /// Sets connection `id` aside until the next pass (a slot may be free
    /// then), out of `to_read` so that an idle net thread does not spin on it.
    fn starve(&mut self, id: u32) {
        if let Some(c) = self.conns[id as usize].as_mut()
            && !c.queued
        {
            c.queued = true;
            self.starved.push(id);
        }
    }

    /// Answers the parked commands whose deadline passed with their
    /// timeout reply and, when a write may have served them (the
    /// protocol's wake count moved), admits the others again, in the order
    /// they parked, as new requests (each scheduled like any other). One
    /// that finds nothing again parks again. Returns whether it did
    /// anything.
    fn unpark(&mut self, core: &mut DispatchCore, now: u64) -> bool {
        if self.parked.is_empty() {
            return false;
        }
        let wakes = self.protocol.wake_generation();
        let woken = wakes != self.wakes_seen;
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut worked = false;
        let mut all_admitted = true;
        let mut i = 0;
        while i < self.parked.len() {
            let (id, generation) = self.parked[i];
            let Some(c) = self
                .conns
                .get_mut(id as usize)
                .and_then(Option::as_mut)
                .filter(|c| c.generation == generation && c.parked.is_some())
            else {
                self.parked.remove(i);
                continue;
            };
            let p = c.parked.as_ref().expect("parked");
            if p.deadline_ms != 0 && now_ms >= p.deadline_ms {
                let p = c.parked.take().expect("parked");
                let at = (p.seq - c.write_seq) as usize;
                c.window[at] = Some((None, p.timeout_reply));
                c.executing = false;
                self.parked.remove(i);
                self.tcp.parked_timeouts += 1;
                self.flush(id);
                worked = true;
                continue;
            }
            if woken {
                match self.readmit(core, id, now) {
                    Some(true) => {
                        self.parked.remove(i);
                        worked = true;
                        continue;
                    }
                    Some(false) => {
                        self.parked.remove(i);
                        worked = true;
                        self.flush(id);
                        continue;
                    }
                    // No request slot free: next pass.
                    None => all_admitted = false,
                }
            }
            i += 1;
        }
        if woken && all_admitted {
            self.wakes_seen = wakes;
        }
        worked
    }

    /// Admits connection `id`'s parked command again, at its place.
    /// `Some(true)`: admitted; `Some(false)`: refused (answered OVERLOADED
    /// at its place); `None`: no request slot free, it stays parked.
    fn readmit(&mut self, core: &mut DispatchCore, id: u32, now: u64) -> Option<bool> {
        let mut token = core.take_token()?;
        let c = self.conns[id as usize].as_mut().expect("open");
        let p = c.parked.take().expect("parked");
        // Classified afresh, the connection's state untouched (a blocking
        // command is not part of a transaction's count).
        let mut state = 0;
        let type_id = self.protocol.classify(&p.request, &mut state);
        self.seq += 1;
        self.net.received += 1;
        let slot = load_request(
            &self.slots,
            &self.pool,
            &mut token,
            &p.request,
            (id, c, p.seq),
            (self.seq, type_id, 1, now),
        );
        match core.admit(token, slot, now) {
            Ok(()) => Some(true),
            Err(token) => {
                core.put_token(token);
                self.net.overloaded += 1;
                let mut busy = Vec::new();
                self.protocol.refusal(Refusal::Overloaded, &mut busy);
                let at = (p.seq - c.write_seq) as usize;
                c.window[at] = Some((None, busy));
                c.executing = false;
                Some(false)
            }
        }
    }

    fn sweep_idle(&mut self) {
        let now = Instant::now();
        if now.duration_since(self.last_sweep) < SWEEP {
            return;
        }
        self.last_sweep = now;
        for id in 0..self.conns.len() as u32 {
            // A pub/sub listener waits for messages, not idle (as Redis's
            // `timeout` spares it).
            let idle = self.conns[id as usize].as_ref().is_some_and(|c| {
                let quiet = now.duration_since(c.last_active);
                (c.lingering && quiet > LINGER)
                    || (c.window.is_empty()
                        && c.output_len() == 0
                        && quiet > self.cfg.idle_timeout
                        && !psp_proto::pubsub::registry().listens(session_id(id, c.generation)))
            });
            if idle {
                self.tcp.closed_idle += 1;
                self.close(id);
            }
        }
    }
}

/// Loads `request` (one or a batch of `count`) into `token`'s buffers, as
/// the request of place `seq` of connection `conn` (`id`), and returns its
/// slot (request `req_id`, of type `type_id`, arrived at `now`). The
/// token's large buffer goes with it: it is kept only while its requests
/// are large, so what stays allocated is bounded by the large requests in
/// flight, not by every token ever used.
fn load_request(
    slots: &TcpSlots,
    pool: &PacketPool,
    token: &mut PacketToken,
    request: &[u8],
    (id, conn, seq): (u32, &Conn, u64),
    (req_id, type_id, count, now): (u64, u16, u16, u64),
) -> Slot {
    let len = request.len();
    let slot = slots.get_mut(token);
    (slot.conn, slot.generation, slot.seq) = (id, conn.generation, seq);
    let big = &mut slot.large;
    if len > PACKET_BYTES {
        big.clear();
        big.extend_from_slice(request);
    } else if big.capacity() != 0 {
        *big = Vec::new();
    }
    let index = token.index();
    let pkt = pool.get_mut(token);
    if len <= PACKET_BYTES {
        pkt.data_mut()[..len].copy_from_slice(request);
    }
    pkt.len = len;
    Slot {
        req: Request {
            id: req_id,
            token: index,
            type_id,
            flow: conn.flow,
            arrival_ns: now,
        },
        true_type: type_id,
        scheduled_ns: now,
        measured: true,
        len: len as u16,
        count,
        deadline_ns: psp_runtime::NO_DEADLINE,
    }
}

/// The batch that starts with the request of `first` bytes at the start of
/// `input` (of type `type_id`; `state` is the connection's classification
/// state after it): it and the complete requests right after it that
/// classify as `type_id` too, `max` requests at most, in one packet-pool
/// buffer (a batch never needs a large body; a lone large request may).
/// Returns its bytes and requests; `state` moves on over the batch.
fn batch(
    typing: &Typing<'_>,
    input: &[u8],
    first: usize,
    type_id: u16,
    state: &mut u32,
    max: usize,
    max_request: usize,
) -> (usize, u16) {
    let (mut len, mut count) = (first, 1u16);
    while usize::from(count) < max && len < input.len() {
        let rest = &input[len..];
        // A separator between requests ends the batch (it is skipped
        // before the next cut).
        if typing.protocol.ignorable_prefix(rest) > 0 {
            break;
        }
        let next = match typing.protocol.request_len(rest, max_request) {
            Ok(Some(n)) if len + n <= PACKET_BYTES => n,
            _ => break,
        };
        let mut after = *state;
        if typing.classify(&rest[..next], &mut after) != type_id
            || typing.protocol.may_block(&rest[..next])
        {
            break;
        }
        *state = after;
        len += next;
        count += 1;
    }
    (len, count)
}

/// How a request gets its type: by the protocol, and by the store's sizes
/// where they are known ([`TcpConfig::sizes`]).
struct Typing<'a> {
    protocol: &'a dyn Protocol,
    sizes: Option<&'a dyn Sizes>,
    bounds: psp_proto::SizeBounds,
}

impl Typing<'_> {
    fn classify(&self, req: &[u8], state: &mut u32) -> u16 {
        match self.sizes {
            Some(s) => self.protocol.classify_sized(req, state, s, self.bounds),
            None => self.protocol.classify(req, state),
        }
    }
}

/// Blocks until a connection (`poll_fd`), a reply (`wake`) or `also` may be
/// ready, or `timeout` passed. Returns whether `also` was signalled. An
/// eventfd is read (cleared) only when the poll saw it signalled: no system
/// call for one that was not.
fn wait(
    poll_fd: i32,
    wake: &Wake,
    lanes: &[NetLane],
    also: Option<BorrowedFd<'_>>,
    timeout: Duration,
) -> bool {
    wake.sleeping.store(true, Ordering::Relaxed);
    // Pairs with the fence in `Wake::notify`.
    fence(Ordering::SeqCst);
    let mut signalled = (false, false);
    if lanes.iter().all(|l| l.0.is_empty()) {
        let readable = |fd: i32| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let mut fds = [
            readable(poll_fd),
            readable(wake.event.as_raw_fd()),
            readable(also.map_or(-1, |a| a.as_raw_fd())),
        ];
        crate::udp::poll_fds(&mut fds, timeout);
        wake.syscalls.fetch_add(1, Ordering::Relaxed);
        signalled = (fds[1].revents != 0, fds[2].revents != 0);
    }
    wake.sleeping.store(false, Ordering::Relaxed);
    // A notification written after the poll stays for the next one, which
    // then returns at once and clears it.
    if signalled.0 {
        wake.clear();
    }
    signalled.1
}

impl FrontEnd for TcpFrontEnd {
    type Report = (DispatcherReport, NetCounters);
    type Io = TcpIo;

    fn worker_io(&mut self, worker: usize) -> TcpIo {
        let (replies, stock) = self.worker_lanes[worker]
            .take()
            .expect("one lane per worker, asked once");
        TcpIo {
            pool: self.pool.clone(),
            slots: self.slots.clone(),
            protocol: self.protocol,
            replies,
            stock,
            wake: self.wake.clone(),
        }
    }

    fn waits_on_event_fd(&self) -> bool {
        true
    }

    fn begin(&mut self, core: &mut DispatchCore, now: u64) {
        crate::server::begin_serving(
            core,
            now,
            &self.declared_ns,
            &mut self.snapshots,
            &mut self.started,
        );
        // The declared times only seed the policy here: no client computes a
        // load from them (the summary does not warn either). Before the first
        // pass, so before any check.
        core.silence_service_warnings();
    }

    fn fill_snapshot(&self, out: &mut [u64]) {
        let mut net = self.net.clone();
        net.syscalls = Some(self.syscalls_so_far());
        net.fill_snapshot(out, 0);
    }

    fn poll(&mut self, core: &mut DispatchCore, now: u64) -> bool {
        let mut worked = self.take_replies();
        worked |= self.deliver_messages();
        worked |= self.carry_out_kills();
        worked |= self.unpark(core, now);
        self.to_read.extend(self.starved.drain(..));
        if self
            .poll
            .poll(&mut self.events, Some(Duration::ZERO))
            .is_err()
        {
            self.net.receive_errors += 1;
        }
        self.syscalls += 1;
        self.ready.clear();
        for e in self.events.iter() {
            self.ready.push((
                e.token(),
                e.is_readable() || e.is_read_closed(),
                e.is_writable(),
                e.is_read_closed() || e.is_error(),
            ));
        }
        for i in 0..self.ready.len() {
            let (token, readable, writable, hup) = self.ready[i];
            worked = true;
            if token == LISTENER {
                self.accept();
                continue;
            }
            let id = token.0 as u32;
            if self
                .conns
                .get(id as usize)
                .and_then(Option::as_ref)
                .is_some_and(|c| c.lingering)
            {
                if readable {
                    self.discard(id);
                }
                continue;
            }
            if let Some(c) = self.conns.get_mut(id as usize).and_then(Option::as_mut) {
                c.hup |= hup;
                if readable && !c.closing {
                    c.readable = true;
                    if !c.queued {
                        c.queued = true;
                        self.to_read.push_back(id);
                    }
                }
                if writable {
                    self.flush(id);
                }
            }
        }
        // Read connections in turn, a bounded batch per pass.
        let mut budget = ADMIT_BATCH;
        let mut rounds = self.to_read.len();
        while budget > 0 && rounds > 0 {
            rounds -= 1;
            let Some(id) = self.to_read.pop_front() else {
                break;
            };
            let Some(c) = self.conns[id as usize].as_mut() else {
                continue;
            };
            c.queued = false;
            let cut = self.read_conn(core, id, now, budget);
            budget -= cut.min(budget);
            worked |= cut > 0;
            core.feed_workers(now);
            // Still bytes to read (budget ran out): its turn comes again.
            let room = self.has_room(id);
            if let Some(c) = self.conns[id as usize].as_mut()
                && (c.readable || c.filled > 0)
                && !c.closing
                && room
                && !c.queued
            {
                c.queued = true;
                self.to_read.push_back(id);
            }
        }
        self.sweep_idle();
        worked
    }

    fn input_ended(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn idle(&mut self, core: &DispatchCore, me: &Wakeup, now: u64, worked: bool) {
        if self.take_replies() || worked || !self.to_read.is_empty() {
            self.idler.reset();
            self.busy_idler.reset();
            return;
        }
        let bound = core.idle_bound(now, MAX_WAIT);
        if bound.is_zero() {
            return;
        }
        let (poll_fd, wake, lanes) = (self.poll.as_raw_fd(), &*self.wake, &self.lanes[..]);
        let ready = || core.has_completions() || lanes.iter().any(|l| !l.0.is_empty());
        // Before sleeping: a quantum a worker armed since `bound` was read
        // found no sleeper to wake.
        let has_work = || ready() || core.deadline_within(now, bound);
        let wait_for = |max: Duration| {
            if wait(poll_fd, wake, lanes, me.event_fd(), max.min(bound)) {
                me.clear_event();
            }
        };
        match self.idle {
            // A central dispatcher hands each worker its next job: while one
            // is busy, its reply (and its completion) are near.
            IdleStrategy::SpinPark { .. } if core.in_flight() > 0 && !core.decentralized() => {
                // Each pass asks epoll (a system call): between two, watch
                // only the reply lanes, so that a busy net thread does not
                // spend its core on empty epoll_waits.
                let until = Instant::now() + EPOLL_GAP;
                while !ready() && Instant::now() < until {
                    psp_runtime::idle::pause();
                }
                if !has_work() {
                    self.busy_idler.idle_with(me, MAX_WAIT, has_work, wait_for);
                }
            }
            IdleStrategy::SpinPark { .. } => me.park_with(has_work, || wait_for(MAX_WAIT)),
            _ => self.idler.idle_with(me, MAX_WAIT, has_work, wait_for),
        }
    }

    fn finish(mut self, core: DispatcherReport) -> (DispatcherReport, NetCounters) {
        self.take_replies();
        let mut net = self.net.clone();
        net.tcp = Some(self.tcp.clone());
        net.syscalls = Some(self.syscalls_so_far());
        (core, net)
    }
}

/// The address a TCP server listens on, bound now (so that a used address
/// is an error before anything starts).
///
/// # Errors
/// The address cannot be bound.
pub fn bind(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}

#[cfg(test)]
mod tests {
    use super::TcpConfig;
    use std::time::Duration;

    #[test]
    fn batch_bounds_out_of_range_are_refused_in_one_line() {
        assert!(TcpConfig::default().check().is_ok());
        for bad in [
            TcpConfig {
                max_batch: 0,
                ..TcpConfig::default()
            },
            TcpConfig {
                max_batch: 257,
                ..TcpConfig::default()
            },
            TcpConfig {
                batch_budget: Duration::ZERO,
                ..TcpConfig::default()
            },
            TcpConfig {
                batch_budget: Duration::from_secs(2),
                ..TcpConfig::default()
            },
        ] {
            let e = bad.check().expect_err("out of range");
            assert!(e.contains("batch") && !e.contains('\n'), "{e}");
        }
    }
}
