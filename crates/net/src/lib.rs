//! Perséphone's network layer: the wire protocol, the datapath interface and its
//! kernel UDP implementation, the server front end that puts the runtime behind
//! a datapath, the open-loop load client, and the plain echo server used as a
//! throughput baseline.
//!
//! - [`protocol`]: the versioned binary header (docs/protocol.md); total parsers.
//! - [`datapath`]: receive-in-batches / transmit-per-worker traits.
//! - [`udp`]: kernel UDP (`recvmmsg`, `sendmsg`, `sendmmsg`).
//! - [`xdp`]: AF_XDP (kernel bypass): UMEM, rings, the XDP program, frames.
//! - [`pool`]: packet buffers owned by token, shared by dispatcher and workers.
//! - [`server`]: `psp serve`'s engine.
//! - [`exporter`]: `psp serve --metrics`, Prometheus metrics over HTTP from
//!   the dispatcher's published snapshots.
//! - [`client`]: `psp load`'s engine.
//! - [`echo`]: the baseline echo server.

pub mod client;
pub mod datapath;
pub mod echo;
pub mod exporter;
pub mod pool;
pub mod protocol;
pub mod server;
pub mod udp;
pub mod xdp;

pub use psp_core::ClassifierKind;
pub use server::{NetCounters, Server, ServerConfig, ServerError, ServerReport};
