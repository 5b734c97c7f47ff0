//! The tests that time a running server, as one test binary apart from the
//! others: each expects the 2-core machine to itself, so they take turns
//! (`common::one_at_a_time`) and share their binary with nothing else, as
//! when each file was a binary of its own.

mod client_integrity;
#[path = "../common/mod.rs"]
mod common;
mod metrics;
mod net;
mod xdp;
