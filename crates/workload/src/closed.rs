//! Closed-loop clients, as Redis and memcached clients are: a fixed number of
//! connections per request type, each with at most one request outstanding.
//! When a connection's request ends (answered, or refused by a full queue), it
//! thinks for a while (exponential with a given mean, or not at all) and sends
//! the next request of the same type. A type's arrivals are thus paced by its
//! own completions: what the system serves slowly, its clients ask for slowly.
//!
//! [`Clients`] is the checked description (connections per type, mean think
//! time); [`ClosedLoop`] is the [`ArrivalSource`] an executor drives, alone or
//! as [`crate::Arrivals::Closed`] (one source type for the simulator's loop,
//! open or closed: compiled once, the open loop runs as fast as before). Unlike
//! the open-loop sources, its next arrival depends on what happened to the
//! earlier ones, so the executor reports each request's end
//! ([`ArrivalSource::on_done`]). Each connection is a client flow: its index is
//! the [`FlowId`] its requests come on (RSS steers a connection, not a
//! request), so at most [`MAX_CONNECTIONS`] connections.
//!
//! Everything is sized at construction from checked numbers: at most one
//! pending request per connection, so the source never allocates while it
//! runs. Deterministic for a seed.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand_distr::{Distribution, Exp1};

use crate::arrivals::{Arrival, ArrivalSource, MAX_FLOWS};
use crate::workload::{ServiceSampler, Workload};
use psp_core::{FlowId, Nanos, TypeId};

/// Most connections of one request type.
pub const MAX_CONNECTIONS_PER_TYPE: u32 = 4096;
/// Most connections in all: each is a flow, and a flow id is 16 bits.
pub const MAX_CONNECTIONS: u32 = MAX_FLOWS;
/// Longest mean think time (1 s).
pub const MAX_THINK_NS: Nanos = 1_000_000_000;
/// How long a connection whose request was refused waits on top of its think
/// time before sending again: without it, a refusal at think time 0 would be
/// answered by the same request at the same instant, forever.
pub const RETRY_NS: Nanos = 1_000;

/// Why a clients description is not valid for a workload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientsError {
    /// The description does not parse.
    #[error("{0}")]
    Syntax(String),
    /// A number is out of range, or the counts do not fit the workload.
    #[error("{0}")]
    Invalid(String),
}

/// Closed-loop clients: connections per request type (in the workload's type
/// order) and the mean think time. Built only through [`Clients::new`], so
/// every value is in range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clients {
    connections: Vec<u32>,
    think_ns: Nanos,
}

impl Clients {
    /// `connections[t]` connections of type `t` of `workload`, each thinking
    /// `think_ns` on average between a request's end and its next one.
    ///
    /// # Errors
    /// A count per type above [`MAX_CONNECTIONS_PER_TYPE`], no connection at
    /// all, more than [`MAX_CONNECTIONS`] in all, a think time above
    /// [`MAX_THINK_NS`], a count per type that is not one per type of
    /// `workload`, or a workload with phases (clients send one stationary mix).
    pub fn new(
        connections: Vec<u32>,
        think_ns: Nanos,
        workload: &Workload,
    ) -> Result<Self, ClientsError> {
        let invalid = |m: String| Err(ClientsError::Invalid(m));
        if connections.len() != workload.types.len() {
            return invalid(format!(
                "{} connection counts for the {} types of '{}'",
                connections.len(),
                workload.types.len(),
                workload.name
            ));
        }
        if !workload.phases.is_empty() {
            return invalid(format!(
                "workload '{}' has phases; closed-loop clients send one stationary mix",
                workload.name
            ));
        }
        if let Some(&n) = connections.iter().find(|&&n| n > MAX_CONNECTIONS_PER_TYPE) {
            return invalid(format!(
                "connections per type must be in [0, {MAX_CONNECTIONS_PER_TYPE}], not {n}"
            ));
        }
        let total: u64 = connections.iter().map(|&n| u64::from(n)).sum();
        if !(1..=u64::from(MAX_CONNECTIONS)).contains(&total) {
            return invalid(format!(
                "connections in all must be in [1, {MAX_CONNECTIONS}], not {total}"
            ));
        }
        if think_ns > MAX_THINK_NS {
            return invalid(format!(
                "the mean think time must be at most {:?}, not {:?}",
                std::time::Duration::from_nanos(MAX_THINK_NS),
                std::time::Duration::from_nanos(think_ns)
            ));
        }
        Ok(Self {
            connections,
            think_ns,
        })
    }

    /// Connections per type, in the workload's type order.
    pub fn connections(&self) -> &[u32] {
        &self.connections
    }

    /// Connections in all.
    pub fn total(&self) -> u32 {
        self.connections.iter().sum()
    }

    /// Mean think time.
    pub fn think_ns(&self) -> Nanos {
        self.think_ns
    }
}

/// The connection counts of `spec` for `workload`'s types, unchecked: either
/// `NAME=N,...` (type names from the workload; types not named get none) or
/// one count per type in type order, `N,N,...`.
///
/// # Errors
/// An empty item, a count that is not a number, an unknown or repeated type
/// name, a mix of the two forms, or positional counts that are not one per
/// type.
pub fn parse_connections(spec: &str, workload: &Workload) -> Result<Vec<u64>, ClientsError> {
    let syntax = |m: String| Err(ClientsError::Syntax(m));
    let items: Vec<&str> = spec.split(',').map(str::trim).collect();
    if items.iter().any(|i| i.is_empty()) {
        return syntax(format!("'{spec}' has an empty item"));
    }
    let count = |s: &str| {
        s.trim().parse::<u64>().map_err(|_| {
            ClientsError::Syntax(format!("'{}' is not a number of connections", s.trim()))
        })
    };
    let names = workload
        .types
        .iter()
        .map(|t| t.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let named = items.iter().filter(|i| i.contains('=')).count();
    let mut out = vec![0u64; workload.types.len()];
    if named == 0 {
        if items.len() != out.len() {
            return syntax(format!(
                "'{spec}' gives {} counts for the {} types of '{}' ({names}); give one per type or NAME=N",
                items.len(),
                out.len(),
                workload.name
            ));
        }
        for (o, i) in out.iter_mut().zip(&items) {
            *o = count(i)?;
        }
        return Ok(out);
    }
    if named != items.len() {
        return syntax(format!(
            "'{spec}' mixes NAME=N and plain counts; use one form"
        ));
    }
    let mut seen = vec![false; out.len()];
    for item in &items {
        let (name, n) = item.split_once('=').expect("named");
        let name = name.trim();
        let Some(t) = workload.types.iter().position(|t| t.name == name) else {
            return syntax(format!(
                "'{name}' is not a type of '{}' ({names})",
                workload.name
            ));
        };
        if std::mem::replace(&mut seen[t], true) {
            return syntax(format!("type '{name}' is given twice"));
        }
        out[t] = count(n)?;
    }
    Ok(out)
}

/// A request a connection will send: when, and what (24 + 8 bytes).
#[derive(Debug, Clone, Copy)]
struct Pending {
    arrival: Arrival,
    /// Order of scheduling, to break ties: runs are deterministic.
    seq: u64,
}

impl Pending {
    #[inline]
    fn key(&self) -> u128 {
        (u128::from(self.arrival.at_ns) << 64) | u128::from(self.seq)
    }
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    /// Reversed: the heap's top is the earliest.
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        other.key().cmp(&self.key())
    }
}

/// Closed-loop arrivals of a workload's types from [`Clients`], for
/// `duration_ns`: a connection sends no request at or after the end.
///
/// Each connection starts thinking at time 0 (so with a think time, the
/// connections' first requests are spread out) and then loops: send, wait for
/// the end reported by [`ArrivalSource::on_done`], think, send again.
#[derive(Debug, Clone)]
pub struct ClosedLoop {
    rng: SmallRng,
    /// Each connection's type.
    conn_type: Vec<TypeId>,
    samplers: Vec<ServiceSampler>,
    think_mean_ns: f64,
    end_ns: Nanos,
    /// Requests connections will send; one per connection at most, and never
    /// one for a connection with a request in the system.
    pending: BinaryHeap<Pending>,
    seq: u64,
    /// The `seq` of the request `next_arrival` last gave out.
    lent_seq: u64,
    /// Whether each connection has a request out (given out, not yet ended).
    out: Vec<bool>,
}

impl ClosedLoop {
    /// Connections of `clients` sending `workload`'s requests for
    /// `duration_ns`, from `seed`.
    ///
    /// # Errors
    /// `clients` was built for a workload of another type count.
    pub fn new(
        workload: &Workload,
        clients: &Clients,
        duration_ns: Nanos,
        seed: u64,
    ) -> Result<Self, ClientsError> {
        let clients = Clients::new(clients.connections.clone(), clients.think_ns, workload)?;
        let total = clients.total() as usize;
        let mut conn_type = Vec::with_capacity(total);
        for (t, &n) in clients.connections.iter().enumerate() {
            conn_type.extend(std::iter::repeat_n(t as TypeId, n as usize));
        }
        let mut source = Self {
            rng: SmallRng::seed_from_u64(seed),
            conn_type,
            samplers: workload.types.iter().map(|t| t.service.sampler()).collect(),
            think_mean_ns: clients.think_ns as f64,
            end_ns: duration_ns,
            pending: BinaryHeap::with_capacity(total),
            seq: 0,
            lent_seq: 0,
            out: vec![false; total],
        };
        for conn in 0..total {
            source.schedule(conn, 0);
        }
        Ok(source)
    }

    /// A think time: exponential with the mean, or 0 (no draw).
    #[inline]
    fn think(&mut self) -> Nanos {
        if self.think_mean_ns == 0.0 {
            return 0;
        }
        let e: f64 = Exp1.sample(&mut self.rng);
        (e * self.think_mean_ns) as Nanos
    }

    /// Connection `conn` thinks from `from_ns`, then sends its next request
    /// (unless that falls at or after the end). Returns its time, if any.
    #[inline]
    fn schedule(&mut self, conn: usize, from_ns: Nanos) -> Option<Nanos> {
        let at_ns = from_ns.saturating_add(self.think());
        if at_ns >= self.end_ns {
            return None;
        }
        let type_id = self.conn_type[conn];
        let service_ns = self.samplers[type_id as usize].sample(&mut self.rng);
        self.seq += 1;
        debug_assert!(self.pending.len() < self.pending.capacity());
        self.pending.push(Pending {
            arrival: Arrival {
                at_ns,
                type_id,
                service_ns,
                flow: conn as FlowId,
            },
            seq: self.seq,
        });
        Some(at_ns)
    }

    /// Connections with a request given out and not yet ended.
    pub fn outstanding(&self) -> usize {
        self.out.iter().filter(|&&o| o).count()
    }
}

impl ArrivalSource for ClosedLoop {
    #[inline]
    fn next_arrival(&mut self) -> Option<Arrival> {
        let p = self.pending.pop()?;
        self.lent_seq = p.seq;
        let conn = p.arrival.flow as usize;
        debug_assert!(!self.out[conn], "connection {conn} sent a second request");
        self.out[conn] = true;
        Some(p.arrival)
    }

    fn closed_loop(&self) -> bool {
        true
    }

    #[inline]
    fn on_done(&mut self, flow: FlowId, at_ns: Nanos, refused: bool, next: &mut Option<Arrival>) {
        let conn = flow as usize;
        assert!(
            self.out.get(conn).copied().unwrap_or(false),
            "an end reported for connection {conn}, which has no request out"
        );
        self.out[conn] = false;
        let from_ns = at_ns + if refused { RETRY_NS } else { 0 };
        let Some(at_ns) = self.schedule(conn, from_ns) else {
            return;
        };
        match next {
            // The request held stays first (ties go to the earlier scheduled).
            Some(held) if held.at_ns <= at_ns => {}
            _ => {
                if let Some(held) = next.take() {
                    self.out[held.flow as usize] = false;
                    self.pending.push(Pending {
                        arrival: held,
                        seq: self.lent_seq,
                    });
                }
                *next = self.next_arrival();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv() -> Workload {
        Workload::fixed("kv", &[("GET", 1.0, 0.9), ("SCAN", 100.0, 0.1)])
    }

    #[test]
    fn connections_parse_by_name_or_position() {
        let w = kv();
        assert_eq!(parse_connections("GET=16,SCAN=4", &w), Ok(vec![16, 4]));
        assert_eq!(parse_connections(" SCAN = 2 ", &w), Ok(vec![0, 2]));
        assert_eq!(parse_connections("16, 4", &w), Ok(vec![16, 4]));
        for bad in [
            "16",
            "16,4,1",
            "GET=1,4",
            "PUT=3",
            "GET=1,GET=2",
            "GET=-1",
            "x,y",
            "",
            "1,,2",
            "GET=99999999999999999999",
        ] {
            assert!(
                matches!(parse_connections(bad, &w), Err(ClientsError::Syntax(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn clients_are_checked() {
        let w = kv();
        assert!(Clients::new(vec![16, 4], 0, &w).is_ok());
        assert!(Clients::new(vec![0, 1], MAX_THINK_NS, &w).is_ok());
        assert!(Clients::new(vec![0, 0], 0, &w).is_err());
        assert!(Clients::new(vec![MAX_CONNECTIONS_PER_TYPE + 1, 0], 0, &w).is_err());
        assert!(Clients::new(vec![1], 0, &w).is_err());
        assert!(Clients::new(vec![1, 1], MAX_THINK_NS + 1, &w).is_err());
    }

    /// Feeds every arrival back as done `rtt_ns` later; returns the arrivals.
    fn echo(source: &mut ClosedLoop, rtt_ns: Nanos) -> Vec<Arrival> {
        let mut all = Vec::new();
        let mut next = source.next_arrival();
        while let Some(a) = next.take() {
            all.push(a);
            next = source.next_arrival();
            source.on_done(a.flow, a.at_ns + rtt_ns, false, &mut next);
        }
        all
    }

    #[test]
    fn each_connection_sends_its_type_one_request_at_a_time() {
        let w = kv();
        let clients = Clients::new(vec![3, 2], 0, &w).unwrap();
        let mut s = ClosedLoop::new(&w, &clients, 1_000_000, 7).unwrap();
        let all = echo(&mut s, 10_000);
        assert!(all.windows(2).all(|p| p[0].at_ns <= p[1].at_ns));
        // 5 connections, one request each per 10 us, for 1 ms.
        assert_eq!(all.len(), 5 * 100);
        for a in &all {
            assert_eq!(a.type_id, if a.flow < 3 { 0 } else { 1 });
            assert_eq!(a.service_ns, [1_000, 100_000][a.type_id as usize]);
            assert_eq!(a.at_ns % 10_000, 0);
        }
        assert_eq!(s.outstanding(), 0);
    }

    #[test]
    fn think_times_average_their_mean_and_runs_repeat() {
        let w = kv();
        let clients = Clients::new(vec![4, 0], 50_000, &w).unwrap();
        let run = |seed| {
            let mut s = ClosedLoop::new(&w, &clients, 1_000_000_000, seed).unwrap();
            echo(&mut s, 0)
        };
        let all = run(3);
        // Each connection: 1 s / 50 us of think = 20,000 requests on average.
        let per_conn = all.len() as f64 / 4.0;
        assert!((per_conn / 20_000.0 - 1.0).abs() < 0.02, "{per_conn}");
        assert_eq!(all, run(3));
        assert_ne!(all, run(4));
    }

    #[test]
    fn an_earlier_request_displaces_the_one_held() {
        let w = kv();
        let clients = Clients::new(vec![2, 0], 0, &w).unwrap();
        let mut s = ClosedLoop::new(&w, &clients, 1_000_000, 1).unwrap();
        let a = s.next_arrival().unwrap();
        let mut next = s.next_arrival();
        assert_eq!((a.flow, next.unwrap().flow), (0, 1));
        // Connection 1's request (held) has not arrived; connection 0's ends
        // at 0 and is refused: it comes back at RETRY_NS, after the held one.
        s.on_done(a.flow, 0, true, &mut next);
        assert_eq!(next.map(|n| (n.flow, n.at_ns)), Some((1, 0)));
        let b = next.take().unwrap();
        next = s.next_arrival();
        assert_eq!(next.map(|n| (n.flow, n.at_ns)), Some((0, RETRY_NS)));
        // Connection 1 ends before that: its next request comes first.
        s.on_done(b.flow, 10, false, &mut next);
        assert_eq!(next.map(|n| (n.flow, n.at_ns)), Some((1, 10)));
        assert_eq!(
            s.next_arrival().map(|n| (n.flow, n.at_ns)),
            Some((0, RETRY_NS))
        );
    }
}
