//! Application-agnostic first-come-first-served policies.
//!
//! - [`CFcfs`]: one central FIFO; a free worker takes the head (join-idle-queue).
//!   Work conserving.
//! - [`DFcfs`]: one FIFO per worker; an arrival goes to the worker its flow hashes
//!   to (RSS) and never moves. Not work conserving.

use super::{Action, Policy, PolicyContext};
use crate::queue::TypedQueue;
use crate::request::{Nanos, Request};
use crate::workers::{WorkerId, WorkerSet};

/// Centralized FCFS.
#[derive(Debug)]
pub struct CFcfs {
    queue: TypedQueue,
    free: WorkerSet,
}

impl CFcfs {
    /// A central FIFO of `ctx.queue_capacity` for `ctx.workers` workers.
    pub fn new(ctx: &PolicyContext) -> Self {
        Self {
            queue: TypedQueue::new(ctx.queue_capacity, 0),
            free: WorkerSet::range(0, ctx.workers),
        }
    }
}

impl Policy for CFcfs {
    fn name(&self) -> String {
        "c-fcfs".into()
    }

    #[inline]
    fn on_arrival(&mut self, req: Request, _now: Nanos) -> Result<(), Request> {
        self.queue.push(req)
    }

    #[inline]
    fn on_completion(&mut self, worker: WorkerId, _req: &Request, _service_ns: Nanos, _now: Nanos) {
        self.free.insert(worker);
    }

    #[inline]
    fn next_action(&mut self, _now: Nanos) -> Option<Action> {
        let worker = self.free.first()?;
        let req = self.queue.pop()?;
        self.free.remove(worker);
        Some(Action::Dispatch {
            worker,
            req,
            quantum_ns: None,
        })
    }

    fn queued(&self) -> usize {
        self.queue.len()
    }

    fn idle_workers(&self) -> WorkerSet {
        self.free
    }
}

/// Decentralized FCFS: per-worker queues fed by a flow hash.
#[derive(Debug)]
pub struct DFcfs {
    queues: Vec<TypedQueue>,
    free: WorkerSet,
    /// Workers whose queue is non-empty.
    backlogged: WorkerSet,
    queued: usize,
}

/// A 64-bit mix (splitmix64's finalizer): the stand-in for the NIC's RSS hash.
#[inline]
fn flow_hash(id: u64) -> u64 {
    let mut z = id.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl DFcfs {
    /// One queue of `ctx.queue_capacity` per worker.
    pub fn new(ctx: &PolicyContext) -> Self {
        Self {
            queues: (0..ctx.workers)
                .map(|_| TypedQueue::new(ctx.queue_capacity, 0))
                .collect(),
            free: WorkerSet::range(0, ctx.workers),
            backlogged: WorkerSet::EMPTY,
            queued: 0,
        }
    }

    /// The worker request `id` is steered to.
    #[inline]
    pub fn worker_for(&self, id: u64) -> WorkerId {
        (flow_hash(id) % self.queues.len() as u64) as WorkerId
    }
}

impl Policy for DFcfs {
    fn name(&self) -> String {
        "d-fcfs".into()
    }

    /// Requests are steered to worker queues by flow hash, as RSS does: no
    /// dispatcher on the request path.
    fn centralized(&self) -> bool {
        false
    }

    #[inline]
    fn on_arrival(&mut self, req: Request, _now: Nanos) -> Result<(), Request> {
        let w = self.worker_for(req.id);
        self.queues[w as usize].push(req)?;
        self.backlogged.insert(w);
        self.queued += 1;
        Ok(())
    }

    #[inline]
    fn on_completion(&mut self, worker: WorkerId, _req: &Request, _service_ns: Nanos, _now: Nanos) {
        self.free.insert(worker);
    }

    #[inline]
    fn next_action(&mut self, _now: Nanos) -> Option<Action> {
        let worker = self.free.and(self.backlogged).first()?;
        let q = &mut self.queues[worker as usize];
        let req = q.pop()?;
        if q.is_empty() {
            self.backlogged.remove(worker);
        }
        self.free.remove(worker);
        self.queued -= 1;
        Some(Action::Dispatch {
            worker,
            req,
            quantum_ns: None,
        })
    }

    fn queued(&self) -> usize {
        self.queued
    }

    fn idle_workers(&self) -> WorkerSet {
        self.free
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{Driver, ctx};
    use super::*;
    use crate::policy::PolicySpec;

    #[test]
    fn c_fcfs_never_leaves_a_worker_idle_while_a_request_waits() {
        for seed in 0..20 {
            let mut d = Driver::new(
                PolicySpec::CFcfs.build(&ctx(3, &[1.0, 50.0])).unwrap(),
                seed,
            );
            d.run(3_000, |p, disp| {
                if disp.is_none() {
                    assert!(
                        p.queued() == 0 || p.idle_workers().is_empty(),
                        "idle worker while queue non-empty"
                    );
                }
            });
            assert!(d.completed > 0);
        }
    }

    #[test]
    fn c_fcfs_serves_in_arrival_order() {
        let mut d = Driver::new(PolicySpec::CFcfs.build(&ctx(2, &[1.0])).unwrap(), 7);
        d.run(2_000, |_, _| {});
        let starts: Vec<u64> = d.dispatched.iter().map(|(_, r)| r.id).collect();
        assert!(
            starts.windows(2).all(|w| w[0] < w[1]),
            "FIFO order violated"
        );
    }

    #[test]
    fn d_fcfs_never_moves_a_request_between_workers() {
        let built = DFcfs::new(&ctx(4, &[1.0, 20.0]));
        let expected: Vec<WorkerId> = (0..50_000).map(|id| built.worker_for(id)).collect();
        for seed in 0..10 {
            let mut d = Driver::new(
                PolicySpec::DFcfs.build(&ctx(4, &[1.0, 20.0])).unwrap(),
                seed,
            );
            d.run(3_000, |_, _| {});
            assert!(d.dispatched.len() > 100);
            for (w, r) in &d.dispatched {
                assert_eq!(*w, expected[r.id as usize], "request {} moved", r.id);
            }
        }
    }

    #[test]
    fn d_fcfs_hash_spreads_evenly() {
        let d = DFcfs::new(&ctx(8, &[1.0]));
        let mut counts = [0u32; 8];
        for id in 0..80_000 {
            counts[d.worker_for(id) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_000..11_000).contains(&c)),
            "{counts:?}"
        );
    }
}
