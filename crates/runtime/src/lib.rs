//! Perséphone's real runtime: a dispatcher thread and pinned application workers
//! connected by single-producer/single-consumer rings (one per direction per
//! worker), driven by the same [`psp_core::Policy`] objects as the simulator.
//!
//! # For an embedder
//!
//! - Start a run with [`start`] (any [`FrontEnd`]: where requests come from)
//!   or [`run`] (the in-process open-loop [`Generator`]), configured by a
//!   [`RuntimeConfig`]; it returns a [`RunReport`].
//! - The application is a [`Handler`] serving a [`RequestContext`] (made
//!   per worker, or per request slot when a policy preempts: then requests
//!   run on green threads and yield at their [`Preemption`] points), and a
//!   [`BodyEncoder`] writing generated requests.
//! - A front end implements [`FrontEnd`] over the [`DispatchCore`] it is
//!   lent, and gives each worker a [`JobIo`]; live metrics travel as
//!   [`Snapshot`]s through a [`snapshot_channel`].
//!
//! # Inside (a newcomer's map)
//!
//! Modules, from the bottom up; no module imports one above it:
//!
//! - `message`: the plain data the parts hand each other ([`Job`], [`Done`],
//!   [`Slot`], [`RequestCounts`], [`RuntimeError`]); imports nothing else
//!   from the crate.
//! - [`clock`], `sync`, [`idle`] (spin / yield / park without lost
//!   wake-ups), `control` (stop and failure flags, response gates),
//!   [`pool`] (per-request buffers by token).
//! - `point` (preemption points), [`handler`] (the application interface),
//!   `green` (request fibers on pooled stacks), `preempt` (the dispatcher's
//!   quantum watch, parked fibers).
//! - `worker_queues` and `local`: the decentralized executors' queues
//!   (`d-fcfs`, `ws`; SYNERGY, Tiny Quanta).
//! - `executor`: the four execution shapes, one file each, behind one
//!   `Executor` trait, and the plan that builds the run's one.
//! - `observer` (counters, reservation log, series, statistics lines,
//!   snapshots) and `snapshot` (the channel they travel through).
//! - `dispatcher` (the [`DispatchCore`] and the one dispatch loop),
//!   `worker` (the worker loops), [`generator`] (the in-process front end).
//! - `launch` (threads: pinning, spawning, joining) and [`runtime`]
//!   ([`start`]: plan, spawn, run, join).
//!
//! The runtime runs centralized policies (c-FCFS, FP, EDF, DARC-static, DARC),
//! preemptive ones on green threads (`ts`, `ts-block`, `concord`), and
//! decentralized ones on per-worker queues (`d-fcfs`, `ws`), and SYNERGY
//! (`synergy`) and Tiny Quanta (`tq`) on per-worker queues with green threads.

pub mod clock;
mod green;
pub mod handler;
pub mod idle;
mod message;
mod point;
pub mod pool;
mod preempt;
mod sync;
// Under `--cfg loom` only the wake-up protocol and the executors' cells are
// built (over loom's primitives, for tests/loom_idle.rs and tests/loom_cells.rs):
// the thread roles spawn std threads.
#[cfg(not(loom))]
mod control;
#[cfg(not(loom))]
mod dispatcher;
#[cfg(not(loom))]
mod executor;
#[cfg(not(loom))]
pub mod generator;
#[cfg(not(loom))]
mod launch;
#[cfg(not(loom))]
mod local;
#[cfg(not(loom))]
mod observer;
#[cfg(not(loom))]
pub mod runtime;
#[cfg(not(loom))]
mod snapshot;
#[cfg(not(loom))]
mod worker;
#[cfg(not(loom))]
mod worker_queues;

pub use clock::{Clock, Spinner};
pub use green::{
    GreenError, Refusal, Refused, RequestFiber, RequestSlot, Resumed, Served, StackPool,
    StackPoolConfig, StackPoolStats,
};
pub use handler::{
    BodyEncoder, EncoderSource, Handler, HandlerError, HandlerFactory, RequestContext, SpinHandler,
    SyntheticEncoder,
};
pub use idle::{IdleStrategy, PollYield};
pub use message::{Done, Job, NO_DEADLINE, RequestCounts, RuntimeError, Slot};
pub use point::{Cause, Feedback, NoPreempt, PreemptFlag, Preemption, RunLimits};
pub use preempt::ReclaimTimes;

#[cfg(not(loom))]
pub use control::RunControl;
#[cfg(not(loom))]
pub use dispatcher::{CoreParts, DispatchCore, FrontEnd, WrappedIo};
#[cfg(not(loom))]
pub use executor::FIBER_SLOTS_PER_WORKER;
#[cfg(not(loom))]
pub use generator::{GeneratedIo, Generator};
#[cfg(not(loom))]
pub use local::{LocalQueues, LocalStats};
#[cfg(not(loom))]
pub use observer::{
    DispatcherReport, ReservationEvent, SERVICE_CHECK_MIN, SERVICE_OFF_FACTOR, StatsConfig,
    service_off,
};
#[cfg(not(loom))]
pub use runtime::{
    InlineWorker, RunReport, RuntimeConfig, describe_threads, max_in_flight, run, start,
};
#[cfg(not(loom))]
pub use snapshot::{
    Loan, PUBLISH_INTERVAL, Snapshot, SnapshotPublisher, SnapshotReader, TypeSnapshot,
    WorkerSnapshot, snapshot_channel,
};
#[cfg(not(loom))]
pub use worker::JobIo;
#[cfg(not(loom))]
pub use worker_queues::WorkerQueues;

// What only the loom models reach into: the executors' hand-written cells.
#[cfg(loom)]
pub use preempt::SuspendedFibers;
#[cfg(loom)]
pub use sync::Counter;
