//! Application-agnostic first-come-first-served policies.
//!
//! - [`CFcfs`]: one central FIFO; a free worker takes the head (join-idle-queue).
//!   Work conserving.
//!
//! d-FCFS (one FIFO per worker fed by flow) lives with work stealing:
//! [`super::ws::PerWorkerFcfs`].

use super::registry::{PolicyConfig, PolicyEntry};
use super::{Action, Policy, PolicyContext};
use super::{PolicyError, Shape};
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

crate::no_params! {
    /// `c-fcfs`'s configuration: it takes no parameters.
    CFcfsConfig
}

impl PolicyConfig for CFcfsConfig {
    fn build(&self, ctx: &PolicyContext, _label: String) -> Result<Box<dyn Policy>, PolicyError> {
        Ok(Box::new(CFcfs::new(ctx)))
    }

    fn shape(&self) -> Shape {
        Shape::Central
    }
}

/// `c-fcfs` in the policy registry.
pub static C_FCFS: PolicyEntry = PolicyEntry {
    name: "c-fcfs",
    example: "c-fcfs",
    aliases: &[],
    defaults: || Box::new(CFcfsConfig),
};

#[cfg(test)]
mod tests {
    use super::super::testkit::{Driver, ctx};
    use super::{C_FCFS, CFcfsConfig};
    use crate::policy::PolicySpec;

    #[test]
    fn c_fcfs_never_leaves_a_worker_idle_while_a_request_waits() {
        for seed in 0..20 {
            let mut d = Driver::new(
                PolicySpec::new(&C_FCFS, CFcfsConfig)
                    .build(&ctx(3, &[1.0, 50.0]))
                    .unwrap(),
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
        let mut d = Driver::new(
            PolicySpec::new(&C_FCFS, CFcfsConfig)
                .build(&ctx(2, &[1.0]))
                .unwrap(),
            7,
        );
        d.run(2_000, |_, _| {});
        let starts: Vec<u64> = d.dispatched.iter().map(|(_, r)| r.id).collect();
        assert!(
            starts.windows(2).all(|w| w[0] < w[1]),
            "FIFO order violated"
        );
    }
}
