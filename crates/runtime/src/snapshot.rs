//! Live metrics: the snapshot of its counters that the dispatcher publishes for
//! an exporter running on another thread (`psp serve --metrics`), and the two
//! ends of the channel it travels through.
//!
//! The dispatcher holds the [`SnapshotPublisher`]. Every [`PUBLISH_INTERVAL`] of
//! its clock, at the end of a pass, it overwrites the back buffer of a triple
//! buffer in place (counters, queue lengths, the reservation, each type's
//! latency and service-time [`Digest`]s, each worker's state, the front end's
//! own counters) and publishes it: one atomic swap. The [`SnapshotReader`] on the exporter's
//! thread takes the latest published snapshot whenever it likes. Neither side
//! ever waits for the other or takes a lock, and the dispatcher allocates
//! nothing after start-up: every vector of the three buffers is sized when the
//! channel is made and only overwritten.
//!
//! This module must not format, encode or do I/O: the exporter does that on its
//! own thread, from a snapshot.

use std::time::Duration;

use psp_metrics::Digest;

use crate::message::RequestCounts;

/// How often the dispatcher publishes (on the run's clock): reading each type's
/// distributions costs microseconds, so not on every pass.
pub const PUBLISH_INTERVAL: Duration = Duration::from_millis(100);

/// One request type's part of a [`Snapshot`]. The outcomes of finished requests
/// are disjoint: `completed() = ok + handler_errors + bad_bodies + unsent`, and
/// `arrived = shed + completed() + stranded + in_flight()`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TypeSnapshot {
    /// Valid requests of this type offered to the dispatcher.
    pub arrived: u64,
    /// Served and answered with success.
    pub ok: u64,
    /// Answered HANDLER_ERROR (the handler failed).
    pub handler_errors: u64,
    /// Answered BAD_REQUEST (the application refused the body).
    pub bad_bodies: u64,
    /// Run, but the answer could not be sent (whatever it said).
    pub unsent: u64,
    /// Refused before running (full queue or no free slot).
    pub shed: u64,
    /// Left at the drain deadline, never answered.
    pub stranded: u64,
    /// Waiting in the policy's queue for this type (`None`: the policy keeps
    /// no queue per type).
    pub queued: Option<u64>,
    /// Workers reserved for this type's group (`None`: no reservation in force).
    pub reserved_workers: Option<u32>,
    /// The index of this type's group in the reservation in force (groups
    /// shortest first; `None`: no reservation in force): a worker whose
    /// [`WorkerSnapshot::reserved_group`] is the same is reserved for it.
    pub group: Option<u16>,
    /// Latency (arrival to the handler's return) of the `ok` requests.
    pub latency: Digest,
    /// Service time of the `ok` requests.
    pub service: Digest,
    /// Service time of every completed request (all outcomes, from the
    /// start): what the workers were busy with, the measured utilization's
    /// numerator, as in the server's summary.
    pub busy_ns: u64,
}

impl TypeSnapshot {
    /// Run and finished, whatever the outcome.
    pub fn completed(&self) -> u64 {
        self.ok + self.handler_errors + self.bad_bodies + self.unsent
    }

    /// Admitted and not finished yet (queued or running).
    pub fn in_flight(&self) -> u64 {
        self.arrived
            .saturating_sub(self.shed + self.completed() + self.stranded)
    }
}

/// Whose request a worker runs, against the reservation in force.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Loan {
    /// Idle, or running a request of the group it is reserved for (or no
    /// reservation holds it: the spillway, or none in force).
    #[default]
    Own,
    /// Reserved for a longer group, it runs a shorter group's request: DARC's
    /// work stealing.
    Stealing,
    /// Reserved for a shorter group, it runs a longer group's request: lent
    /// (`darc-lend`), until it is reclaimed by a preemption.
    Lent,
}

/// One worker's part of a [`Snapshot`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerSnapshot {
    /// The type of the request it runs now (`None`: idle, or not known: see
    /// [`Snapshot::running_known`]).
    pub running: Option<u16>,
    /// The group of the reservation in force it is reserved for (an index as
    /// [`TypeSnapshot::group`]; the shortest, for a spillway worker that also
    /// serves a group without workers of its own; `None`: none, or no
    /// reservation in force).
    pub reserved_group: Option<u16>,
    /// Whether it is one of the reservation's spillway workers.
    pub spillway: bool,
    /// Whose request it runs, against the reservation.
    pub loan: Loan,
    /// Requests preempted on it and handed back to the policy, since the start.
    pub preemptions: u64,
}

/// What the dispatcher publishes: its state at `uptime_ns`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Publications so far, this one included (0: none yet, everything zero).
    pub seq: u64,
    /// Time since the dispatcher's time zero, on the run's clock.
    pub uptime_ns: u64,
    /// Whether the dispatch loop has ended (the last publication).
    pub finished: bool,
    /// Outcomes of every request, all types.
    pub counts: RequestCounts,
    /// Requests waiting in the policy's queues.
    pub queued: u64,
    /// Requests queued or running.
    pub in_flight: u64,
    /// Reservation updates applied so far (DARC).
    pub reservation_updates: u64,
    /// Whether a reservation is in force (DARC after its first window).
    pub has_reservation: bool,
    /// Per request type, in type order.
    pub types: Vec<TypeSnapshot>,
    /// Whether [`WorkerSnapshot::running`] is known: the dispatcher hands each
    /// job to a worker itself (the central shapes); with worker queues the
    /// workers take their jobs and it does not see which runs what.
    pub running_known: bool,
    /// Per worker, in worker order.
    pub workers: Vec<WorkerSnapshot>,
    /// The front end's own counters, as it defines them
    /// ([`crate::FrontEnd::fill_snapshot`]).
    pub front: Vec<u64>,
}

impl Snapshot {
    /// Requests preempted and handed back to the policy, all workers.
    pub fn preemptions(&self) -> u64 {
        self.workers.iter().map(|w| w.preemptions).sum()
    }

    /// An empty snapshot for `types` request types, `workers` workers and
    /// `front` front-end counters: the shape every later one keeps.
    pub fn new(types: usize, workers: usize, front: usize) -> Self {
        Self {
            seq: 0,
            uptime_ns: 0,
            finished: false,
            counts: RequestCounts::default(),
            queued: 0,
            in_flight: 0,
            reservation_updates: 0,
            has_reservation: false,
            types: vec![TypeSnapshot::default(); types],
            running_known: false,
            workers: vec![WorkerSnapshot::default(); workers],
            front: vec![0; front],
        }
    }
}

/// The dispatcher's end: owned by the [`crate::DispatchCore`] once a front end
/// hands it over ([`crate::DispatchCore::publish_snapshots`]).
pub struct SnapshotPublisher {
    input: triple_buffer::Input<Snapshot>,
    /// Next publication time (the run's clock).
    pub(crate) next_ns: u64,
    pub(crate) seq: u64,
    types: usize,
    workers: usize,
}

impl SnapshotPublisher {
    /// The buffer to overwrite, in place, before [`publish`](Self::publish).
    /// It holds some earlier snapshot (of the same shape), not the last one.
    pub(crate) fn buffer(&mut self) -> &mut Snapshot {
        self.input.input_buffer_mut()
    }

    /// Hands the buffer to the reader: an atomic swap, never a wait.
    pub(crate) fn publish(&mut self) {
        self.input.publish();
    }

    /// Request types its snapshots hold.
    pub fn types(&self) -> usize {
        self.types
    }

    /// Workers its snapshots hold.
    pub fn workers(&self) -> usize {
        self.workers
    }
}

impl std::fmt::Debug for SnapshotPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotPublisher")
            .field("seq", &self.seq)
            .finish_non_exhaustive()
    }
}

/// The exporter's end: the latest published snapshot, on demand.
pub struct SnapshotReader {
    output: triple_buffer::Output<Snapshot>,
}

impl SnapshotReader {
    /// The latest published snapshot (never waits; [`Snapshot::seq`] 0 before
    /// the first publication).
    pub fn latest(&mut self) -> &Snapshot {
        self.output.read()
    }
}

impl std::fmt::Debug for SnapshotReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotReader").finish_non_exhaustive()
    }
}

/// A channel for snapshots of `types` request types, `workers` workers and
/// `front` front-end counters. Allocates its three buffers now, once.
pub fn snapshot_channel(
    types: usize,
    workers: usize,
    front: usize,
) -> (SnapshotPublisher, SnapshotReader) {
    let (input, output) = triple_buffer::triple_buffer(&Snapshot::new(types, workers, front));
    (
        SnapshotPublisher {
            input,
            next_ns: 0,
            seq: 0,
            types,
            workers,
        },
        SnapshotReader { output },
    )
}
