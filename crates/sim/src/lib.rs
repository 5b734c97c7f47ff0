//! The discrete-event simulator: drives the policy core's [`psp_core::Policy`]
//! objects in simulated time, exactly as the runtime's dispatcher drives them in
//! real time, so what is simulated is what is deployed.
//!
//! - [`engine`]: the event loop (workers, service, quanta, preemption), recording
//!   latency and slowdown per type.
//!
//! - [`system`]: the system cost model (dispatcher time per step, network
//!   latency, receive ring), off by default.
//!
//! - [`preemption`]: what a preemption costs, from the policy's parameters or
//!   the mechanism it names.
//!
//! Workloads and arrivals come from `psp-workload`: open-loop
//! ([`simulate_point`]) or from closed-loop clients ([`simulate_clients`]). By default the simulator is
//! an ideal system: no network, no dispatcher cost; each worker runs one request
//! at a time; preemption costs are the policy's parameters.

pub mod engine;
mod events;
pub mod preemption;
pub mod system;

pub use engine::{
    SimConfig, SimError, SimOutcome, SimPolicy, SimStats, Simulator, simulate, simulate_clients,
    simulate_point, simulate_with_series,
};
pub use preemption::PreemptionCost;
pub use system::SystemCosts;
// Workloads and arrivals live in `psp-workload`; re-exported for convenience.
pub use psp_workload::{
    Arrival, ArrivalSource, Clients, ClosedLoop, DEFAULT_FLOWS, MAX_FLOWS, PoissonArrivals,
    ServiceDist, TraceArrivals, Workload, WorkloadError, arrivals, workload,
};
