//! The discrete-event simulator: drives the policy core's [`psp_core::Policy`]
//! objects in simulated time, exactly as the runtime's dispatcher drives them in
//! real time, so what is simulated is what is deployed.
//!
//! - [`workload`]: workloads as TOML data (built-in or by path).
//! - [`arrivals`]: open-loop Poisson arrivals, traces.
//! - [`engine`]: the event loop (workers, service, quanta, preemption), recording
//!   latency and slowdown per type.
//!
//! The simulator is an ideal system: no network, no dispatcher cost; each worker
//! runs one request at a time; preemption costs are the policy's parameters.

pub mod arrivals;
pub mod engine;
pub mod workload;

pub use arrivals::{Arrival, ArrivalSource, PoissonArrivals, TraceArrivals};
pub use engine::{SimConfig, SimError, SimOutcome, Simulator, simulate_point};
pub use workload::{ServiceDist, Workload, WorkloadError};
