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
//! - [`handler`]: the application interface and the synthetic spin handler.
//! - [`idle`]: spin / spin-then-yield / spin-then-park, with lost-wake-up-free
//!   parking.
//! - [`clock`]: the shared monotonic clock and the calibrated spin.
//! - [`runtime`]: threads, rings, pinning, start and shutdown.
//!
//! The runtime runs centralized, non-preemptive policies (c-FCFS, d-FCFS, FP,
//! EDF, DARC-static, DARC); preemptive ones stay in the simulator for now.

pub mod clock;
pub mod control;
pub mod dispatcher;
pub mod generator;
pub mod handler;
pub mod idle;
pub mod runtime;
pub mod worker;

pub use clock::{Clock, Spinner};
pub use control::RunControl;
pub use dispatcher::{
    DispatchCore, DispatcherReport, FrontEnd, LoopEnd, RequestCounts, ReservationEvent, Slot,
    StatsConfig, dispatch_loop,
};
pub use generator::Generator;
pub use handler::{Handler, HandlerError, SpinHandler};
pub use idle::IdleStrategy;
pub use runtime::{RunReport, RuntimeConfig, RuntimeError, max_in_flight, run, start};
pub use worker::{InlineIo, Job, JobIo};
