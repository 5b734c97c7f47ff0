//! Requests as policies see them: a type, an arrival time and an executor handle.

/// Time in nanoseconds. Simulated time in the simulator, monotonic time since start
/// in the runtime; policies only compare and subtract it.
pub type Nanos = u64;

/// Index of a request type in the workload's type table.
pub type TypeId = u16;

/// The type of a request the classifier could not recognise. Such requests are
/// served only by the spillway worker(s), at the lowest priority.
pub const UNKNOWN_TYPE: TypeId = TypeId::MAX;

/// The flow a request came on: the stand-in for the client's addresses and
/// ports, which a NIC's RSS hash steers to a worker queue (decentralized
/// policies). The in-process generator assigns flows; the network front end
/// folds the client's address and port into one.
pub type FlowId = u16;

/// A request as a policy sees it. The executor keeps everything else (payload,
/// service time) under `token`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Sequence number, unique per run.
    pub id: u64,
    /// Executor handle (a slot index); opaque to policies.
    pub token: u32,
    /// Request type, or [`UNKNOWN_TYPE`].
    pub type_id: TypeId,
    /// The flow it came on (steers it in decentralized policies).
    pub flow: FlowId,
    /// When the request arrived at the dispatcher.
    pub arrival_ns: Nanos,
}
