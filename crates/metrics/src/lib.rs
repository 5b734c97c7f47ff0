//! Measurement and reporting shared by every executor (simulator, runtime, client).
//!
//! - [`recorder`]: per-type latency and slowdown histograms, filled by an executor.
//! - [`schema`]: the JSON result documents of `psp` (one point, a sweep), and the
//!   SLO that decides a point's sustainability.
//! - [`extra`]: each executor's own figures of a point (its `extra` object), and
//!   the server's summary of a run.
//! - [`reservation`]: a reservation as result data (groups, types, workers), and
//!   its one-line text.
//! - [`series`]: per-window, per-type latency over time with the reservation in
//!   force (the workload-change experiment).
//!
//! Nothing here reads a clock or knows about policies (a reservation is read only
//! as data): executors hand in numbers. The figures drawn from these documents
//! live in `psp-plot`, so that an executor does not link the drawing library.

pub mod extra;
pub mod recorder;
pub mod reservation;
pub mod schema;
pub mod series;

pub use extra::{
    Agreement, ClosedLoopExtra, Extra, LoadedServer, LocalCounters, MeanSource, NetExtra,
    PhaseSpan, RateMean, RejectedReplies, ReservationChange, ResponsesByStatus, RunExtra, SendLag,
    ServerSummary, ServerTypeLatency, SimExtra, TcpSummary, XdpSummary,
};
pub use recorder::{
    DIGEST_BOUNDS_NS, DIGEST_BUCKETS, DIGEST_QUANTILES, Digest, Recorder, TypeRecorder,
};
pub use reservation::{ParseReservationError, ReservationGroup, ReservationLayout};
pub use schema::{
    OverallStats, PointMeta, PointResult, PolicySweep, Slo, SweepResult, TypeStats, rate_unit,
};
pub use series::{ReservationView, SeriesRecorder, TimeSeries, Window, WindowType};
