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

use psp_runtime::{DispatchCore, Slot};

use crate::pool::PacketToken;

/// The dispatcher's request slots as tokens: the runtime's core keeps its
/// free slots as indices (they cross to workers and back in its rings); a
/// front end holds each slot it takes as a [`PacketToken`] until it admits
/// it or puts it back. The front ends reach the core's slots only through
/// these three calls, which is what makes each token unique.
pub(crate) trait CoreTokens {
    /// Takes a free slot; `None` when every slot is in flight.
    fn take_packet(&mut self) -> Option<PacketToken>;

    /// Puts back a slot taken and not admitted.
    fn put_packet(&mut self, token: PacketToken);

    /// Admits the request in `slot`, held under `token`, to the policy
    /// ([`DispatchCore::admit`]); the token comes back when the policy
    /// refuses it.
    fn admit_packet(&mut self, token: PacketToken, slot: Slot, now: u64)
    -> Result<(), PacketToken>;
}

impl CoreTokens for DispatchCore {
    #[inline]
    fn take_packet(&mut self) -> Option<PacketToken> {
        // SAFETY: the core's free slots hold each slot at most once, and a
        // slot leaves them only here, to come back through `put_packet` or
        // through its job's completion (the runtime's, after the worker
        // consumed its token): no other token for it exists meanwhile.
        self.take_token()
            .map(|t| unsafe { PacketToken::from_raw(t) })
    }

    #[inline]
    fn put_packet(&mut self, token: PacketToken) {
        self.put_token(token.into_raw());
    }

    #[inline]
    fn admit_packet(
        &mut self,
        token: PacketToken,
        slot: Slot,
        now: u64,
    ) -> Result<(), PacketToken> {
        if self.admit(token.index(), slot, now) {
            // The core holds the slot now (its job carries the index).
            let _ = token.into_raw();
            Ok(())
        } else {
            Err(token)
        }
    }
}
