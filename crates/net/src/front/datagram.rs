//! The datagram front end (udp and xdp datapaths): the runtime's dispatcher
//! with a datapath in front (the paper's net worker runs on the dispatcher's
//! thread) and workers that transmit their own responses.
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
//! With [`super::server::ServerConfig::metrics`], the dispatcher also
//! publishes live snapshots (its counters and the front end's,
//! [`NetCounters::SNAPSHOT_LEN`] of them) that an
//! [`super::exporter::Exporter`] serves over HTTP from its own thread.
//!
//! What this module must not do: decide anything about scheduling (the
//! policy behind the core does), or reach a packet but through its token.

use std::io::{self, Write as _};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use psp_core::{Classifier, Request};
use psp_runtime::idle::{Idler, Wakeup};
use psp_runtime::{
    DispatchCore, DispatcherReport, FrontEnd, HandlerError, IdleStrategy, Job, JobIo, RuntimeError,
    Slot, SnapshotPublisher,
};

use super::counters::{DatapathReport, NetCounters};
use super::server::{ServeResult, ServerConfig, begin_serving, run};
use crate::datapath::{Datapath, Transmit};
use crate::dgram::{Arrival, DatagramProtocol, Parsed, PeerKey, PeerOrder};
use crate::pool::{PACKET_BYTES, PacketPool, PacketToken, TokenBatch};
use crate::protocol::{self, Status};

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
    /// Worker 0 on the dispatcher's thread: its answers of one pass, each
    /// whole in its request's packet, leave in one `sendmmsg` at the
    /// pass's end ([`JobIo::flush`]).
    held: Option<HeldAnswers>,
    /// Answers held that the OS refused, for the front end's
    /// `reply_send_errors`.
    held_unsent: Arc<AtomicU64>,
}

/// Answers held until the end of the dispatcher's pass: their packets'
/// tokens (a completed job's packet is not received into before the next
/// pass reads its input, after the flush).
struct HeldAnswers {
    tokens: [u32; HELD_ANSWERS],
    len: usize,
}

/// Answers held at most: one `sendmmsg` of them leaves when full.
const HELD_ANSWERS: usize = crate::datapath::udp::MAX_BATCH;

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
        // SAFETY: this worker owns the job's slot from its job's pop until it
        // pushes the completion, after `respond`.
        let token = unsafe { PacketToken::from_raw_ref(&job.token) };
        let pkt = self.pool.get(token);
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
        let status = match outcome {
            // The worker turned a response above `max_response` into an error.
            Ok(()) => Status::Ok,
            Err(HandlerError::BadBody(_)) => Status::BadRequest,
            Err(HandlerError::Failed(_)) => Status::HandlerError,
        };
        self.send(job, status, response)
    }

    fn refuse_expired(&mut self, job: &Job) -> bool {
        self.send(job, Status::Overloaded, &[])
    }

    fn hold_answers(&mut self) {
        self.held = Some(HeldAnswers {
            tokens: [0; HELD_ANSWERS],
            len: 0,
        });
    }

    fn flush(&mut self) {
        let Some(h) = self.held.as_ref() else { return };
        let n = h.len;
        if n == 0 {
            return;
        }
        let mut msgs: [(&crate::datapath::PeerAddr, &[u8]); HELD_ANSWERS] =
            [(&EMPTY_PEER, &[]); HELD_ANSWERS];
        for (m, raw) in msgs.iter_mut().zip(&h.tokens[..n]) {
            // SAFETY: a held token's job completed and its packet is free,
            // but nothing receives into it before the next pass, after this
            // flush (`JobIo::flush`); only reads happen here.
            let token = unsafe { PacketToken::from_raw_ref(raw) };
            let pkt = self.pool.get(token);
            *m = (&pkt.peer, &pkt.data()[..pkt.len]);
        }
        let sent = self.tx.send_batch(&msgs[..n]).unwrap_or(0);
        if sent < n {
            self.held_unsent
                .fetch_add((n - sent) as u64, Ordering::Relaxed);
        }
        if let Some(h) = self.held.as_mut() {
            h.len = 0;
        }
    }
}

impl<T: Transmit> NetIo<T> {
    /// Answers `job` with `status` and, when OK, `response` (otherwise the
    /// protocol's body for the status), and hands its slot back. Worker 0
    /// on the dispatcher's thread holds the answer in the request's packet
    /// when it fits (`true`: it leaves at the pass's flush, which counts a
    /// refusal in `reply_send_errors`).
    #[inline]
    fn send(&mut self, job: &Job, status: Status, response: &[u8]) -> bool {
        let p = self.protocol;
        let body = match status {
            Status::Ok => response,
            _ => p.error_body(status),
        };
        let at = p.header_len();
        let hold = self.held.is_some() && at + body.len() <= PACKET_BYTES;
        if self
            .held
            .as_ref()
            .is_some_and(|h| !hold || h.len == HELD_ANSWERS)
        {
            // Full, or an answer too big to hold: those held leave first,
            // in order.
            self.flush();
        }
        // SAFETY: as in `request`; the borrow handed out there has ended.
        let mut token = unsafe { PacketToken::from_raw(job.token) };
        let pkt = self.pool.get_mut(&mut token);
        let sent = match self.held.as_mut() {
            Some(h) if hold => {
                // Nothing reads the request any more: the answer goes
                // where it was.
                let data = pkt.data_mut();
                data[at..at + body.len()].copy_from_slice(body);
                p.write_reply_header(data, status, body.len());
                pkt.len = at + body.len();
                h.tokens[h.len] = job.token;
                h.len += 1;
                true
            }
            _ => {
                p.write_reply_header(pkt.data_mut(), status, body.len());
                let pkt = &*pkt;
                self.tx.send(&pkt.peer, [&pkt.data()[..at], body]).is_ok()
            }
        };
        // Answered: the slot goes back with the job's completion.
        let mut answered = token.into_raw();
        if let Some(a) = &mut self.answered {
            // The ring holds every token: each is in it at most once (it is
            // drained before the token can be received into again).
            while let Err(rtrb::PushError::Full(t)) = a.ring.push(answered) {
                answered = t;
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
    /// Worker 0's held answers that the OS refused ([`NetIo::held`]).
    held_unsent: Arc<AtomicU64>,
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
/// (docs/results.md, "The UDP front end on loopback").
const OVERLOAD_REPLY_BURST: u64 = 4096;
/// Error replies sent between two looks at the workers (each costs the kernel's
/// loopback or NIC path: microseconds).
const REPLY_CHUNK: usize = 4;
/// Datagrams received per pass at most: a worker waiting for its next job waits
/// for the whole receive call.
const RX_BATCH: usize = 32;
/// How long an idle dispatcher polls before it sleeps while workers are busy.
const BUSY_SPIN_US: u32 = 20;

impl<D: Datapath> FrontEnd for NetFrontEnd<D>
where
    D::Report: DatapathReport,
{
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
            held: None,
            held_unsent: self.held_unsent.clone(),
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
        let mut net = self.net.clone();
        net.reply_send_errors += self.held_unsent.load(Ordering::Relaxed);
        net.syscalls = self.datapath.syscalls();
        net.fill_snapshot(out, self.datapath.malformed());
    }

    fn poll(&mut self, core: &mut DispatchCore, now: u64) -> bool {
        let mut batch = TokenBatch::<RX_BATCH>::new();
        // Error replies of one pass, and their statuses.
        let mut replies = TokenBatch::<RX_BATCH>::new();
        let mut statuses = [Status::Ok; RX_BATCH];
        let mut worked = self.datapath.service();
        if self.order.is_some() {
            worked |= self.release(core, now);
            if self.held_at_stop(core, now) {
                return worked;
            }
        }
        self.receive(core, &mut batch);
        for (i, token) in batch.drain().enumerate() {
            worked = true;
            // A worker that finished meanwhile gets its next job now, not after
            // the whole batch (each worker holds one job at a time).
            if i > 0 {
                core.feed_workers(now);
            }
            self.net.received += 1;
            if let Some((token, s)) = self.admit(core, token, now) {
                if !self.count_refusal(core, s) {
                    core.put_token(token);
                    continue;
                }
                statuses[replies.len()] = s;
                replies.push(token);
            }
        }
        // Error replies cost a system call per datagram in the kernel: feed the
        // workers between chunks, or a worker waiting for its next job meanwhile
        // is capacity lost (and shedding would slow serving).
        let mut pending = replies.drain().zip(statuses).peekable();
        while pending.peek().is_some() {
            worked |= core.feed_workers(now);
            self.send_replies(core, &mut pending);
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
        let datapath = &self.datapath;
        let bound = core.idle_bound(now, MAX_WAIT);
        if bound.is_zero() {
            return;
        }
        // A quantum armed since `bound` was read found no sleeper to wake.
        let answered = || order.is_some_and(Order::pending) || core.deadline_within(now, bound);
        let has_work = || core.has_completions() || answered();
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
        self.datapath.finish().file(&mut self.net);
        self.net.reply_send_errors += self.held_unsent.load(Ordering::Relaxed);
        self.net.syscalls = self.datapath.syscalls();
        self.net.malformed_frames = self.datapath.malformed();
        self.net.dropped_by_os = self.datapath.dropped_by_os();
        (core, self.net)
    }
}

impl<D: Datapath> NetFrontEnd<D> {
    /// Receives one batch into free packets of the core's; gives back those
    /// the datapath did not fill.
    #[inline]
    fn receive(&mut self, core: &mut DispatchCore, batch: &mut TokenBatch<RX_BATCH>) {
        // Worker 0's held answers are in free packets: out before any is
        // read into.
        core.flush_inline();
        while !batch.is_full()
            && let Some(t) = core.take_token()
        {
            batch.push(t);
        }
        let got = match self.datapath.recv_batch(&self.pool, batch.tokens_mut()) {
            Ok(n) => n,
            Err(_) => {
                self.net.receive_errors += 1;
                0
            }
        };
        while batch.len() > got
            && let Some(t) = batch.pop()
        {
            core.put_token(t);
        }
    }

    /// Parses and classifies one received request and hands it on (see
    /// [`Self::enter`]). Returns the refusal to answer, if any; a datagram
    /// too short to answer goes back to the pool.
    #[inline]
    fn admit(
        &mut self,
        core: &mut DispatchCore,
        mut token: PacketToken,
        now: u64,
    ) -> Option<(PacketToken, Status)> {
        let index = token.index();
        let pkt = self.pool.get_mut(&mut token);
        let bytes = pkt.bytes();
        let at = self.protocol.header_len();
        let (header_type, body_len) = match self.protocol.parse(bytes, pkt.len) {
            Parsed::Drop => {
                self.net.truncated += 1;
                core.put_token(token);
                return None;
            }
            Parsed::Refuse(s) => return Some((token, s)),
            Parsed::Request { header_type, .. }
                if !self.classify_body && header_type >= self.n_types =>
            {
                return Some((token, Status::UnknownType));
            }
            Parsed::Request {
                header_type,
                body_len,
            } => (header_type, body_len),
        };
        let (type_id, true_type) = if self.classify_body {
            let body = &bytes[at..at + usize::from(body_len)];
            let t = self.classifier.classify(body);
            if t >= self.n_types {
                return Some((token, Status::UnknownType));
            }
            (t, t)
        } else {
            (self.classifier.classify(bytes), header_type)
        };
        self.seq += 1;
        let slot = Slot {
            req: Request {
                id: self.seq,
                token: index,
                type_id,
                flow: pkt.peer.flow(),
                arrival_ns: now,
            },
            true_type,
            scheduled_ns: now,
            measured: true,
            len: body_len,
            count: 1,
            deadline_ns: psp_runtime::NO_DEADLINE,
        };
        let arrival = match &mut self.order {
            Some(o) => o.peers.arrive(PeerKey::of(&pkt.peer), token, slot),
            None => Arrival::Run(token),
        };
        self.enter(core, arrival, slot, now)
    }

    /// Admits a request to the core, unless it waits for its peer's request
    /// before it (memcached's order). Returns the refusal to answer, if any.
    #[inline]
    fn enter(
        &mut self,
        core: &mut DispatchCore,
        arrival: Arrival,
        slot: Slot,
        now: u64,
    ) -> Option<(PacketToken, Status)> {
        match arrival {
            Arrival::Run(token) => match core.admit(token, slot, now) {
                Ok(()) => None,
                Err(token) => {
                    // Refused: its peer has nothing executing (and
                    // nothing held: it had nothing executing).
                    if let Some(o) = &mut self.order {
                        let held = o.peers.finished(token.index());
                        debug_assert!(held.is_none(), "held behind nothing");
                    }
                    Some((token, Status::Overloaded))
                }
            },
            // It waits for its peer's request before it.
            Arrival::Held => None,
            Arrival::Full(token) => {
                self.net.held_full += 1;
                core.shed_without_slot(slot.true_type, slot.measured);
                Some((token, Status::Overloaded))
            }
        }
    }

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
        let mut refused = TokenBatch::<REPLY_CHUNK>::new();
        let overloaded = |t| (t, Status::Overloaded);
        for w in 0..order.answered.len() {
            // The index of an answered request: its slot went back with its
            // completion; here it only names the peer whose turn it was.
            while let Ok(index) = order.answered[w].pop() {
                worked = true;
                let mut next = order.peers.finished(index);
                while let Some((t, slot)) = next {
                    let Err(t) = core.admit(t, slot, now) else {
                        break;
                    };
                    next = order.peers.finished(t.index());
                    if !self.count_refusal(core, Status::Overloaded) {
                        core.put_token(t);
                        continue;
                    }
                    refused.push(t);
                    if refused.is_full() {
                        self.send_replies(core, refused.drain().map(overloaded));
                    }
                }
            }
        }
        if !refused.is_empty() {
            self.send_replies(core, refused.drain().map(overloaded));
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
                self.send_replies(core, std::iter::once((t, Status::Overloaded)));
            } else {
                core.put_token(t);
            }
        }
        false
    }

    /// Answers the first [`REPLY_CHUNK`] datagrams of `replies` with
    /// header-only responses (rewritten in place) in one batched send, then
    /// frees their slots.
    #[cold]
    fn send_replies(
        &mut self,
        core: &mut DispatchCore,
        replies: impl Iterator<Item = (PacketToken, Status)>,
    ) {
        let mut tokens = TokenBatch::<REPLY_CHUNK>::new();
        let mut statuses = [Status::Ok; REPLY_CHUNK];
        for (t, s) in replies.take(REPLY_CHUNK) {
            statuses[tokens.len()] = s;
            tokens.push(t);
        }
        let n = tokens.len();
        let mut msgs: [(&crate::datapath::PeerAddr, &[u8]); REPLY_CHUNK] =
            [(&EMPTY_PEER, &[]); REPLY_CHUNK];
        // Each token is held once: the packets borrowed are disjoint.
        for ((m, token), &status) in msgs.iter_mut().zip(tokens.tokens_mut()).zip(&statuses) {
            let pkt = self.pool.get_mut(token);
            let p = self.protocol;
            // The reply's body (memcached's error line) goes where the
            // request's was: nothing reads the request any more.
            let body = p.error_body(status);
            let (at, data) = (p.header_len(), pkt.data_mut());
            data[at..at + body.len()].copy_from_slice(body);
            p.write_reply_header(data, status, body.len());
            *m = (&pkt.peer, &pkt.data()[..at + body.len()]);
        }
        let sent = self.reply_tx.send_batch(&msgs[..n]).unwrap_or(0);
        self.net.reply_send_errors += (n - sent) as u64;
        for token in tokens.drain() {
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

/// The datagram front end's run over a bound datapath.
pub(super) fn serve<D: Datapath<Report: DatapathReport> + 'static>(
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
        held_unsent: Arc::default(),
        order,
    };
    run(cfg, front)
}
