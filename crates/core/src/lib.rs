//! Perséphone's policy core.
//!
//! Everything a scheduling decision needs, and nothing else: request types and
//! classifiers, per-type profiles, the DARC reservation (Algorithm 2) and dispatch
//! (Algorithm 1), and the policies DARC is compared against.
//!
//! **What this crate must not do**: read a clock, spawn a thread, do I/O or
//! allocate on a decision path. Time is an argument ([`Nanos`]); executors (the
//! simulator in `psp-sim`, the runtime) own time, workers and requests' payloads,
//! and drive a [`Policy`] through its hooks.

pub mod classifier;
pub mod policy;
pub mod profile;
pub mod queue;
pub mod request;
pub mod reservation;
pub mod workers;

pub use classifier::{Classifier, ClassifierKind, HeaderClassifier, RandomClassifier};
pub use policy::{
    Action, PerWorkerRules, Policy, PolicyContext, PolicyError, PolicySpec, PreemptionMechanism,
    StealRule, TypeInfo,
};
pub use profile::ProfileWindow;
pub use queue::TypedQueue;
pub use request::{FlowId, Nanos, Request, TypeId, UNKNOWN_TYPE};
pub use reservation::{Group, Reservation, ReservationConfig, Rounding, TypeDemand};
pub use workers::{MAX_WORKERS, WorkerId, WorkerSet};
