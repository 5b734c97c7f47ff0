//! The front ends: what puts the runtime behind a datapath or behind TCP.
//! A front end parses and classifies requests, admits them to the
//! dispatcher's policy, answers the ones it refuses, counts every outcome
//! and serves the counters as metrics.
//!
//! This room decides nothing about scheduling (the runtime's policy does)
//! and touches no device or socket option of a datapath (those are
//! [`crate::datapath`]'s); it reaches packets only through their tokens.
//!
//! - [`server`]: `psp serve`'s engine: configuration, start, stop, report.
//! - [`datagram`]: the datagram front end (udp and xdp datapaths).
//! - [`dgram`]: the datagram protocols (this project's; memcached over UDP).
//! - [`tcp`]: the TCP front end (many connections, replies in each
//!   connection's order) and its protocols (RESP, memcached's text).
//! - [`counters`]: what the front ends count.
//! - [`exporter`]: `psp serve --metrics`, Prometheus metrics over HTTP from
//!   the dispatcher's published snapshots (encoding only).
//! - `http`: the exporter's HTTP/1.1 server (hyper on a thread of its own,
//!   bounded).
//! - [`echo`]: the baseline echo server (no runtime).

pub mod counters;
pub mod datagram;
pub mod dgram;
pub mod echo;
pub mod exporter;
mod http;
pub mod server;
pub mod tcp;
