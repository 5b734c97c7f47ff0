//! Each executor's own figures of a point: the point document's `extra` object,
//! typed. The point's `mode` says which one it holds ([`Extra`]): the
//! simulator's ([`SimExtra`]), the runtime's under `psp run` ([`RunExtra`]), or
//! the open-loop client's, with the server's summary when the client started the
//! server itself ([`NetExtra`], [`ServerSummary`]).
//!
//! Field names are part of the `psp` command contract, like the point's own:
//! add fields, never rename or remove one. Fields that documents saved by
//! earlier versions lack read as their default (`#[serde(default)]`), so those
//! documents still load (`psp plot`).

use serde::{Deserialize, Serialize};

use crate::reservation::ReservationLayout;
use crate::schema::PointResult;

/// A point's executor-specific figures, keyed by the point's `mode`: in JSON, the
/// point's `mode` and `extra` fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", content = "extra", rename_all = "lowercase")]
pub enum Extra {
    /// `psp sim`: the simulator's figures.
    Sim(Box<SimExtra>),
    /// `psp run`: the runtime's counters, with the in-process generator.
    Run(Box<RunExtra>),
    /// `psp load` and `psp sweep --mode net`: the client's counters.
    Net(Box<NetExtra>),
}

impl Extra {
    /// The point's mode: `sim`, `run` or `net`.
    pub fn mode(&self) -> &'static str {
        match self {
            Extra::Sim(_) => "sim",
            Extra::Run(_) => "run",
            Extra::Net(_) => "net",
        }
    }

    /// The simulator's figures, for a `sim` point.
    pub fn sim(&self) -> Option<&SimExtra> {
        match self {
            Extra::Sim(s) => Some(s),
            _ => None,
        }
    }

    /// The runtime's figures, for a `run` point.
    pub fn run(&self) -> Option<&RunExtra> {
        match self {
            Extra::Run(r) => Some(r),
            _ => None,
        }
    }

    /// The client's figures, for a `net` point.
    pub fn net(&self) -> Option<&NetExtra> {
        match self {
            Extra::Net(n) => Some(n),
            _ => None,
        }
    }

    /// The reservation in force at the end, when the policy makes one (and, in
    /// network mode, when the server's was collected).
    pub fn reservation(&self) -> Option<&ReservationLayout> {
        match self {
            Extra::Sim(s) => s.reservation.as_ref(),
            Extra::Run(r) => r.reservation.as_ref(),
            Extra::Net(n) => n.reservation.as_ref(),
        }
    }

    /// The figures of `mode` from their JSON object: for an executor that hands
    /// them over serialized (the simulator's `SimStats`).
    ///
    /// # Errors
    /// An unknown mode, or an object that is not that mode's figures (a field
    /// missing or of another type).
    pub fn from_object(
        mode: &str,
        extra: serde_json::Map<String, serde_json::Value>,
    ) -> serde_json::Result<Self> {
        let mut doc = serde_json::Map::new();
        doc.insert("mode".into(), mode.into());
        doc.insert("extra".into(), extra.into());
        serde_json::from_value(doc.into())
    }
}

/// The simulator's figures for one point (field for field `psp_sim::SimStats`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SimExtra {
    /// Requests generated, warm-up included.
    pub generated_total: u64,
    /// Requests completed, warm-up included.
    pub completed_total: u64,
    /// Requests dropped at a full queue or receive ring, warm-up included.
    pub dropped_total: u64,
    /// Of those, requests dropped at the full receive ring (system cost model).
    #[serde(default)]
    pub ingress_dropped_total: u64,
    /// Of those, requests dropped unrun past their type's queueing bound
    /// (`--max-wait`; written only when some were, so the figures of runs
    /// without a bound keep their form).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub expired_total: u64,
    /// The system cost model.
    #[serde(default)]
    pub system: String,
    /// The classifier (`header`: the true type; `random`).
    #[serde(default)]
    pub classifier: String,
    /// Requests left queued with no event pending (a policy bug if non-zero).
    pub stranded: u64,
    /// Preemptions the policy asked for.
    pub preemptions: u64,
    /// Requests idle workers stole from other workers' queues (`ws`).
    #[serde(default)]
    pub steals: u64,
    /// Expired quanta that did not preempt (conditional preemption).
    #[serde(default)]
    pub preemptions_avoided: u64,
    /// Preempted requests that went through the global wait queue (`synergy`).
    #[serde(default)]
    pub wait_queue_passes: u64,
    /// Times the wait queue became congested (`synergy`'s THRESH_WQD).
    #[serde(default)]
    pub congestion_episodes: u64,
    /// DARC ended the run in its warm-up: its profiling window never
    /// filled, so it made no reservation and scheduled as c-FCFS.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warming_up: bool,
    /// Reservation changes applied.
    pub reservation_updates: u64,
    /// The final reservation, for reservation-based policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<ReservationLayout>,
    /// Simulated time of the last event.
    pub simulated_end_s: f64,
    /// Events processed (arrivals included).
    #[serde(default)]
    pub events: u64,
    /// Wall time of the simulation.
    pub wall_s: f64,
    /// Simulator speed: requests simulated per wall-clock second.
    pub sim_requests_per_s: f64,
    /// The closed-loop clients the requests came from; absent for open-loop
    /// arrivals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clients: Option<ClosedLoopExtra>,
}

/// Closed-loop clients of a simulated point (`psp sim --clients`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClosedLoopExtra {
    /// Connections per request type, in workload order; each has at most one
    /// request outstanding.
    pub connections: Vec<u32>,
    /// Mean think time between a request's end and the connection's next one.
    pub think_us: f64,
}

/// The runtime's figures for one `psp run` point.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunExtra {
    /// Requests the generator produced, warm-up included.
    pub generated_total: u64,
    /// Requests admitted to a queue, warm-up included.
    #[serde(default)]
    pub admitted_total: u64,
    /// Requests answered by a worker, warm-up included.
    pub completed_total: u64,
    /// Requests shed at a full queue or expired (below), warm-up included.
    pub shed_total: u64,
    /// Of `shed_total`, requests admitted whose turn came after their
    /// type's queueing bound (`--max-wait`): dropped unrun.
    #[serde(default)]
    pub expired: u64,
    /// Completed requests whose handler failed.
    pub handler_errors: u64,
    /// Of `handler_errors`, those a preemptive run could not start (no
    /// request slot or fiber stack free).
    #[serde(default)]
    pub no_fiber: u64,
    /// Completed requests whose body the handler could not read.
    #[serde(default)]
    pub bad_bodies: u64,
    /// Admitted requests still in flight when the drain timed out.
    pub stranded: u64,
    /// DARC ended the run in its warm-up: its profiling window never
    /// filled, so it made no reservation and scheduled as c-FCFS.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warming_up: bool,
    /// Reservation changes applied.
    pub reservation_updates: u64,
    /// The final reservation, for reservation-based policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<ReservationLayout>,
    /// The most recent reservation changes, in order.
    pub reservation_log: Vec<ReservationChange>,
    /// A phased workload's phases, in order (absent for other workloads).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseSpan>,
    /// Jobs answered per worker.
    pub served_per_worker: Vec<u64>,
    /// Jobs stolen from other workers' queues, all workers.
    #[serde(default)]
    pub steals_total: u64,
    /// Jobs each worker stole.
    #[serde(default)]
    pub steals_per_worker: Vec<u64>,
    /// SYNERGY's or Tiny Quanta's counters, for those executors.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub local: Option<LocalCounters>,
    /// Preemptions: the local executor's, else the policy's.
    #[serde(default)]
    pub preemptions: u64,
    /// Workers still in their handler after the drain deadline (left running).
    #[serde(default)]
    pub abandoned_workers: Vec<usize>,
    /// Whether every thread was pinned (a floating dispatcher: no).
    pub pinned: bool,
    /// Whether polling passes yielded the core (threads outnumbered cores,
    /// or `--poll-yield on`).
    #[serde(default)]
    pub polls_yield: bool,
    /// The idle strategy, as its `Debug` form.
    pub idle: String,
    /// The classifier.
    pub classifier: String,
    /// The application, as it describes itself.
    #[serde(default)]
    pub app: String,
    /// The application's own check of its state at the end, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_check: Option<String>,
    /// Wall time of the run.
    pub wall_s: f64,
    /// Service time of every completed request over workers x `wall_s`.
    #[serde(default)]
    pub measured_utilization: f64,
    /// What the workload's declared mean service times imply for the same
    /// completions (`None`: no type declares one).
    #[serde(default)]
    pub declared_utilization: Option<f64>,
    /// Requests completed, by type, warm-up included.
    #[serde(default)]
    pub completed_by_type: Vec<u64>,
    /// Their mean service time (handler time), by type; 0 for a type with none.
    #[serde(default)]
    pub service_us_by_type: Vec<f64>,
    /// The simulator's prediction of the same point (`--compare-sim`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sim_prediction: Option<Box<PointResult>>,
    /// Measured over predicted latency, per type (`--compare-sim`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sim_agreement: Option<Vec<Agreement>>,
}

/// One reservation change of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReservationChange {
    /// Seconds since the dispatcher started.
    pub at_s: f64,
    /// The reservation from then on.
    pub reservation: ReservationLayout,
}

/// One phase of a phased workload, as the run scheduled it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseSpan {
    /// The phase's name.
    pub name: String,
    /// Its start, from the beginning of the arrivals.
    pub start_s: f64,
    /// Its length.
    pub duration_s: f64,
    /// Its offered rate.
    pub offered_rps: f64,
}

/// SYNERGY's or Tiny Quanta's counters of a run (the total preemptions are
/// [`RunExtra::preemptions`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LocalCounters {
    /// The executor (`synergy` or `tq`).
    pub executor: String,
    /// Requests preempted, by the worker running them.
    pub preemptions_per_worker: Vec<u64>,
    /// Expired quanta that did not preempt, all workers.
    pub preemptions_avoided: u64,
    /// Expired quanta that did not preempt, per worker.
    pub preemptions_avoided_per_worker: Vec<u64>,
    /// Preempted requests put on the global wait queue, all workers.
    pub wait_queue_passes: u64,
    /// Preempted requests put on the global wait queue, per worker.
    pub wait_queue_passes_per_worker: Vec<u64>,
    /// Times the wait queue became congested.
    pub congestion_episodes: u64,
    /// Pushes the wait queue refused.
    pub wait_queue_full: u64,
    /// SYNERGY's timer: mean lateness of its passes at expired quanta (µs;
    /// 0 for Tiny Quanta, whose workers time themselves).
    #[serde(default)]
    pub timer_late_mean_us: f64,
    /// The worst lateness (µs).
    #[serde(default)]
    pub timer_late_max_us: f64,
    /// Which thread checked SYNERGY's quanta: `core` (the timer's thread)
    /// or `worker` (each worker, at its request's points); empty for Tiny
    /// Quanta and for results written before it was recorded.
    #[serde(default)]
    pub timer: String,
}

/// How far a measurement is from the simulator's prediction of the same
/// point, for one request type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Agreement {
    /// The type.
    pub name: String,
    /// Measured p99.9 latency over predicted.
    pub p999_ratio: f64,
    /// Measured median latency over predicted.
    pub p50_ratio: f64,
}

/// The open-loop client's figures for one network point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetExtra {
    /// The server loaded: its address, or its summary when the client's caller
    /// started the server itself (`psp sweep --mode net`).
    pub server: LoadedServer,
    /// Flows (source ports) the requests were spread over.
    pub flows: usize,
    /// How long the client waited for a reply.
    pub timeout_ms: f64,
    /// Requests in the schedule, warm-up included.
    pub scheduled_total: u64,
    /// Requests the OS accepted to send.
    pub sent_total: u64,
    /// Sends the OS refused.
    pub send_errors: u64,
    /// Replies by status, warm-up included.
    pub responses_total: ResponsesByStatus,
    /// Replies after the timeout (counted as timeouts).
    pub late_responses: u64,
    /// Datagrams refused as replies, all reasons.
    pub unexpected_datagrams: u64,
    /// Datagrams refused as replies, by reason.
    #[serde(default)]
    pub rejected_replies: RejectedReplies,
    /// How far the sender fell behind its schedule.
    pub send_lag_us: SendLag,
    /// Wall time of the client's run.
    pub wall_s: f64,
    /// The server's final reservation, when the caller started the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<ReservationLayout>,
    /// With `psp load --server-profile`: each type's mean service time the
    /// offered rate was computed from (the server's measured one or the
    /// declared one), so the point's `load` is a fraction of the capacity
    /// those means give; absent otherwise (the declared means).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_means: Option<Vec<RateMean>>,
}

/// Where the mean service time a type's rate was computed from came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MeanSource {
    /// The workload's declared mean.
    Declared,
    /// The mean the server measured (its `/metrics`).
    Server,
}

/// One type's mean service time as `psp load --server-profile` saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateMean {
    /// The type.
    pub name: String,
    /// The workload's declared mean.
    pub declared_us: f64,
    /// The server's measured mean (absent before its first request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_us: Option<f64>,
    /// Requests the server's mean is over.
    pub server_requests: u64,
    /// The mean the rate used.
    pub used: MeanSource,
}

/// The server a network point loaded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum LoadedServer {
    /// The server's own summary of the run.
    Summary(Box<ServerSummary>),
    /// The server's address (a server the client does not control).
    Address(String),
}

impl LoadedServer {
    /// The server's summary, when the point has it.
    pub fn summary(&self) -> Option<&ServerSummary> {
        match self {
            LoadedServer::Summary(s) => Some(s),
            LoadedServer::Address(_) => None,
        }
    }
}

/// Replies by status, named as on the wire.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponsesByStatus {
    /// `OK`.
    #[serde(rename = "OK")]
    pub ok: u64,
    /// `OVERLOADED`.
    #[serde(rename = "OVERLOADED")]
    pub overloaded: u64,
    /// `BAD_REQUEST`.
    #[serde(rename = "BAD_REQUEST")]
    pub bad_request: u64,
    /// `UNKNOWN_TYPE`.
    #[serde(rename = "UNKNOWN_TYPE")]
    pub unknown_type: u64,
    /// `HANDLER_ERROR`.
    #[serde(rename = "HANDLER_ERROR")]
    pub handler_error: u64,
}

/// Datagrams the client refused as replies, by the first check each failed (in
/// this order): each counts once, in one field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RejectedReplies {
    /// Not from the server's address and port.
    pub wrong_peer: u64,
    /// Longer than the client's receive buffer (truncated): not read as a reply.
    pub oversize: u64,
    /// Not a valid version-1 response.
    pub malformed: u64,
    /// An id outside this client's schedule.
    pub unknown_id: u64,
    /// An id of the schedule this client had not sent (not yet, or its send
    /// failed).
    pub future_id: u64,
    /// Arrived on a flow other than the one its request was sent on.
    pub wrong_flow: u64,
    /// Does not echo its request's type.
    pub wrong_type: u64,
    /// A request already answered (or already timed out and answered late).
    pub duplicate: u64,
}

impl RejectedReplies {
    /// All refused datagrams.
    pub fn total(&self) -> u64 {
        self.fields().iter().map(|(_, n)| n).sum()
    }

    /// Each counter with its name in the point document.
    pub fn fields(&self) -> [(&'static str, u64); 8] {
        [
            ("wrong_peer", self.wrong_peer),
            ("oversize", self.oversize),
            ("malformed", self.malformed),
            ("unknown_id", self.unknown_id),
            ("future_id", self.future_id),
            ("wrong_flow", self.wrong_flow),
            ("wrong_type", self.wrong_type),
            ("duplicate", self.duplicate),
        ]
    }
}

/// The client's lag behind its send schedule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SendLag {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

/// The server's own view of a run (`psp serve --json`, and a network point's
/// `server` when the sweep started the server): every datagram ends in one of
/// `truncated_dropped`, `bad_request`, `unknown_type` or `requests`; every
/// request in one of `overloaded`, `shed_unanswered` or `admitted`; every
/// admitted one in `completed` (HANDLER_ERROR included) or `stranded`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerSummary {
    /// Datagrams received.
    pub received: u64,
    /// Valid requests.
    #[serde(default)]
    pub requests: u64,
    /// Requests admitted to a queue.
    #[serde(default)]
    pub admitted: u64,
    /// Admitted requests answered by a worker.
    pub completed: u64,
    /// Datagrams longer than the receive buffer, dropped.
    pub truncated_dropped: u64,
    /// Datagrams answered BAD_REQUEST.
    pub bad_request: u64,
    /// Requests of a type the server does not know.
    pub unknown_type: u64,
    /// Requests answered OVERLOADED.
    pub overloaded: u64,
    /// Requests shed whose OVERLOADED reply could not be sent.
    #[serde(default)]
    pub shed_unanswered: u64,
    /// Completed requests whose handler failed.
    pub handler_errors: u64,
    /// Admitted requests whose turn came after their type's queueing bound
    /// (`--max-wait`): answered OVERLOADED by a worker, unrun (not in
    /// `overloaded`, the front end's refusals).
    #[serde(default)]
    pub expired: u64,
    /// Of `handler_errors`, those a preemptive run could not start (no
    /// request slot or fiber stack free).
    #[serde(default)]
    pub no_fiber: u64,
    /// Completed requests whose body the handler could not read.
    #[serde(default)]
    pub bad_bodies: u64,
    /// Replies of the front end the OS refused to send.
    pub reply_send_errors: u64,
    /// Replies of the workers the OS refused to send.
    pub worker_send_errors: u64,
    /// Receive calls that failed.
    pub receive_errors: u64,
    /// Datagrams the OS dropped at a full receive buffer (`None`: unknown).
    #[serde(default)]
    pub dropped_by_os: Option<u64>,
    /// Link-layer frames dropped as malformed (AF_XDP; the kernel drops
    /// these itself on the UDP path).
    #[serde(default)]
    pub malformed_frames: u64,
    /// System calls of the network path, counted at each call (the network
    /// thread's receives, sends, waits and accepts, the workers' sends and
    /// their wake-ups of the network thread; not the parks of idle
    /// workers); `None` where not counted (AF_XDP).
    #[serde(default)]
    pub syscalls: Option<u64>,
    /// The AF_XDP datapath's account of its frames, on that datapath.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xdp: Option<XdpSummary>,
    /// The TCP front end's connections, on that front end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpSummary>,
    /// Admitted requests still in flight when the drain timed out.
    pub stranded: u64,
    /// Workers still in their handler after the drain deadline.
    #[serde(default)]
    pub abandoned_workers: Vec<usize>,
    /// DARC ended the run in its warm-up: its profiling window never
    /// filled, so it made no reservation and scheduled as c-FCFS.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warming_up: bool,
    /// Reservation changes applied.
    pub reservation_updates: u64,
    /// The final reservation, for reservation-based policies.
    pub reservation: Option<ReservationLayout>,
    /// Jobs answered per worker.
    pub served_per_worker: Vec<u64>,
    /// Jobs each worker stole.
    #[serde(default)]
    pub steals_per_worker: Vec<u64>,
    /// Preemptions: the local executor's (SYNERGY, Tiny Quanta), else the
    /// policy's.
    #[serde(default)]
    pub preemptions: u64,
    /// SYNERGY's or Tiny Quanta's counters, for those executors.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub local: Option<LocalCounters>,
    /// Whether every thread was pinned (a floating dispatcher: no).
    pub pinned: bool,
    /// Whether polling passes yielded the core.
    #[serde(default)]
    pub polls_yield: bool,
    /// Whether worker 0 ran on the dispatcher's thread (`--inline-worker`).
    #[serde(default)]
    pub inline_worker: bool,
    /// Each thread and its core, one line ("dispatcher and worker 0 on
    /// core 0, worker 1 on core 1 (2 threads, 2 cores)").
    #[serde(default)]
    pub threads: String,
    /// The server process's CPU time (user + system, all threads) per
    /// completed request, µs (`None`: none completed).
    #[serde(default)]
    pub cpu_us_per_request: Option<f64>,
    /// Wall time of the server's run.
    pub wall_s: f64,
    /// Service time of every completed request over workers x `wall_s`.
    #[serde(default)]
    pub measured_utilization: f64,
    /// What the workload's declared mean service times imply for the same
    /// completions, over workers x `wall_s` (`None`: no type declares one).
    #[serde(default)]
    pub declared_utilization: Option<f64>,
    /// Latency from receive to handler completion, by type.
    pub server_side_latency: Vec<ServerTypeLatency>,
    /// The application's own check of its state at the end (TPC-C's
    /// consistency conditions), when it has one.
    #[serde(default)]
    pub app_check: Option<String>,
}

/// Every frame of an AF_XDP datapath by where it is at the end of a run,
/// what it dropped, and how it was bound.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct XdpSummary {
    /// The interface.
    pub interface: String,
    /// Sockets bound (one per receive queue).
    pub queues: u32,
    /// Whether the kernel bound the sockets in zero-copy mode (copy mode
    /// otherwise: a veth has no zero-copy).
    pub zero_copy: bool,
    /// Where the XDP program ran: `driver` or `generic`.
    pub attach_mode: String,
    /// Frames in the UMEM.
    pub frames_total: u64,
    /// Frames held by packet-pool tokens (one each).
    pub frames_with_tokens: u64,
    /// Frames lent to the kernel for receiving (fill ring, kernel, RX ring).
    pub frames_lent_for_rx: u64,
    /// Transmit frames free in the transmitters' stocks.
    pub frames_free_for_tx: u64,
    /// Transmit frames on the TX ring or sent and not yet completed.
    pub frames_in_tx: u64,
    /// Frames accounted nowhere (0 unless one was lost).
    pub frames_leaked: u64,
    /// Frames received and dropped as malformed, by reason.
    pub dropped: std::collections::BTreeMap<String, u64>,
    /// Well-formed frames for another address or port (the program filters
    /// them: non-zero only if a frame slipped through).
    pub wrong_destination: u64,
    /// Frames transmitted (responses and error replies).
    pub transmitted: u64,
    /// The kernel's `XDP_STATISTICS`, summed over the sockets: received
    /// frames it dropped.
    pub kernel_rx_dropped: u64,
    /// Frames the kernel could not place because the RX ring was full.
    pub kernel_rx_ring_full: u64,
    /// Times the kernel found the fill ring empty.
    pub kernel_fill_ring_empty: u64,
    /// Invalid TX descriptors the kernel refused.
    pub kernel_tx_invalid: u64,
}

impl XdpSummary {
    /// Malformed frames dropped, all reasons.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.values().sum()
    }
}

/// What the TCP front end (`psp serve --protocol resp`) counted of its
/// connections.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpSummary {
    /// Connections accepted.
    pub accepted: u64,
    /// Connections refused at the connection limit (answered, closed).
    pub refused: u64,
    /// Closed by the peer.
    pub closed_by_peer: u64,
    /// Closed after a malformed or too large request (answered first).
    pub closed_on_error: u64,
    /// Closed idle.
    pub closed_idle: u64,
    /// Closed by a read or write error.
    pub closed_on_io_error: u64,
    /// Replies whose connection had closed (nobody to answer).
    pub replies_to_closed: u64,
    /// Times a connection was not read because its window or its waiting
    /// output was full (backpressure).
    pub paused: u64,
    /// Times a blocking command (BLPOP, ...) found nothing and was parked.
    #[serde(default)]
    pub parked: u64,
    /// Parked commands answered their timeout reply by the front end (no
    /// run of theirs answered them).
    #[serde(default)]
    pub parked_timeouts: u64,
    /// Pub/sub messages written to listening connections.
    #[serde(default)]
    pub pubsub_messages: u64,
    /// Listening connections closed because their messages waiting to be
    /// written passed the bound (Redis's `client-output-buffer-limit
    /// pubsub`).
    #[serde(default)]
    pub closed_on_pubsub_overflow: u64,
    /// Connections closed by a `CLIENT KILL`.
    #[serde(default)]
    pub closed_by_kill: u64,
}

/// One type's server-side latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerTypeLatency {
    /// The type.
    pub name: String,
    /// Requests of the type completed (measured).
    pub completed: u64,
    /// Their mean service time.
    pub mean_service_us: f64,
    /// The mean service time the workload declares for the type.
    #[serde(default)]
    pub declared_service_us: Option<f64>,
    /// Median latency.
    pub p50_latency_us: f64,
    /// 99th percentile latency.
    pub p99_latency_us: f64,
    /// 99.9th percentile latency.
    pub p999_latency_us: f64,
    /// Requests of the type refused (OVERLOADED, the protocol's busy reply,
    /// or shed unanswered), warm-up included, as `/metrics` counts them:
    /// how overload fell on it.
    #[serde(default)]
    pub shed: u64,
}

/// Whether a counter is 0 (`skip_serializing_if`).
fn is_zero(n: &u64) -> bool {
    *n == 0
}
