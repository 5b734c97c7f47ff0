//! Workloads and arrivals, shared by every executor and the load generator.
//!
//! - [`workload`]: request types with ratios and service-time distributions, as
//!   TOML data (built in from `workloads/`, or any file by path).
//! - [`arrivals`]: open-loop Poisson arrivals over a workload or its phases
//!   ([`Arrivals::new`], what every executor calls), traces.
//! - [`closed`]: closed-loop clients ([`ClosedLoop`]): connections per type,
//!   each sending its next request when its last one ends.
//!
//! Nothing here knows about policies or reads a clock.

pub mod arrivals;
pub mod closed;
pub mod workload;

pub use arrivals::{
    Arrival, ArrivalSource, Arrivals, DEFAULT_FLOWS, MAX_FLOWS, PhasedArrivals, PoissonArrivals,
    TraceArrivals,
};
pub use closed::{
    Clients, ClientsError, ClosedLoop, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_TYPE, MAX_THINK_NS,
    RETRY_NS, parse_connections,
};
pub use workload::{
    MAX_FILE_BYTES, MAX_NAME_CHARS, MAX_PHASE_LOAD, MAX_PHASE_RPS, MAX_PHASE_S, MAX_PHASES,
    MAX_SERVICE_US, MAX_SIGMA, MAX_TYPES, MIN_PHASE_S, MIN_SERVICE_US, Phase, ServiceDist,
    TypeOverride, Workload, WorkloadError, read_text_file,
};
