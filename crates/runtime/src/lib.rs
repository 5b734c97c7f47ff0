//! Perséphone's real runtime: a dispatcher thread and pinned application workers
//! connected by single-producer/single-consumer rings (one per direction per
//! worker), driven by the same [`psp_core::Policy`] objects as the simulator.
//!
//! - [`dispatcher`]: the one dispatch loop, the [`FrontEnd`] trait front ends
//!   plug into, and the [`DispatchCore`] they share (policy, slab, recorder,
//!   counters, job hand-off, completions).
//! - [`generator`]: the in-process open-loop front end (`psp run`).
//! - [`control`]: stop and failure flags, the workers' response gates.
//! - [`worker`]: the worker loop around an application [`Handler`].
//! - [`green`]: green threads for preemptible requests (pooled stacks,
//!   request fibers that yield at preemption points and resume on any
//!   worker).
//! - [`handler`]: the application interface (a [`Handler`] serving a
//!   [`RequestContext`], a [`BodyEncoder`] writing generated requests) and the
//!   synthetic spin application.
//! - [`pool`]: per-request buffers indexed by token (request bodies travel
//!   from front end to worker through them, not through the rings).
//! - [`idle`]: spin / spin-then-yield / spin-then-park, with lost-wake-up-free
//!   parking.
//! - [`clock`]: the shared monotonic clock and the calibrated spin.
//! - [`worker_queues`]: the decentralized executor's per-worker queues, fed
//!   by flow and drained by their workers and thieves (`d-fcfs`, `ws`).
//! - [`local`]: SYNERGY's and Tiny Quanta's executors: per-worker queues
//!   the workers pick from themselves, requests on green threads, SYNERGY's
//!   feedback-armed timer, wait queue and stealing, Tiny Quanta's local
//!   yields.
//! - [`runtime`]: threads, rings, pinning, start and shutdown.
//! - [`snapshot`]: the live metrics the dispatcher publishes for an exporter
//!   on another thread (a triple buffer: no lock, no allocation).
//!
//! The runtime runs centralized policies (c-FCFS, FP, EDF, DARC-static, DARC),
//! preemptive ones on green threads (`ts`, `ts-block`, `concord`), and
//! decentralized ones on per-worker queues (`d-fcfs`, `ws`), and SYNERGY
//! (`synergy`) and Tiny Quanta (`tq`) on per-worker queues with green threads.

pub mod clock;
// Under `--cfg loom` only the wake-up protocol and the executors' cells are
// built (over loom's primitives, for tests/loom_idle.rs and tests/loom_cells.rs):
// the thread roles spawn std threads.
#[cfg(not(loom))]
pub mod control;
#[cfg(not(loom))]
pub mod dispatcher;
#[cfg(not(loom))]
pub mod executor;
#[cfg(not(loom))]
pub mod generator;
pub mod green;
pub mod handler;
pub mod idle;
#[cfg(not(loom))]
pub mod local;
pub mod pool;
pub mod preempt;
#[cfg(not(loom))]
pub mod runtime;
#[cfg(not(loom))]
pub mod snapshot;
pub mod sync;
#[cfg(not(loom))]
pub mod worker;
#[cfg(not(loom))]
pub mod worker_queues;

pub use clock::{Clock, Spinner};
#[cfg(not(loom))]
pub use control::RunControl;
#[cfg(not(loom))]
pub use dispatcher::{
    DispatchCore, DispatcherReport, FrontEnd, LoopEnd, RequestCounts, ReservationEvent,
    SERVICE_CHECK_MIN, SERVICE_OFF_FACTOR, Slot, StatsConfig, WrappedIo, dispatch_loop,
    service_off,
};
#[cfg(not(loom))]
pub use executor::{CoreExecutor, WorkerExec};
#[cfg(not(loom))]
pub use generator::Generator;
pub use green::{
    Cause, Feedback, NoPreempt, PreemptFlag, Preemption, RequestFiber, RequestSlot, Resumed,
    RunLimits, Served, StackPool, StackPoolConfig,
};
pub use handler::{
    BodyEncoder, EncoderSource, Handler, HandlerError, HandlerFactory, RequestContext, SpinHandler,
    SyntheticEncoder,
};
pub use idle::{IdleStrategy, PollYield};
#[cfg(not(loom))]
pub use local::{LocalMode, LocalQueues, LocalStats};
#[cfg(not(loom))]
pub use runtime::{RunReport, RuntimeConfig, RuntimeError, max_in_flight, run, start};
#[cfg(not(loom))]
pub use snapshot::{
    PUBLISH_INTERVAL, Snapshot, SnapshotPublisher, SnapshotReader, TypeSnapshot, snapshot_channel,
};
#[cfg(not(loom))]
pub use worker::{GeneratedIo, Job, JobIo};
#[cfg(not(loom))]
pub use worker_queues::WorkerQueues;
