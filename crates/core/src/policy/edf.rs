//! Earliest deadline first: typed FIFO queues; a free worker takes the head with
//! the earliest deadline `arrival + k x expected mean service of its type`.
//! Work conserving, application-aware, non-preemptive. UNKNOWN requests get the
//! loosest deadline of any type.

use super::Shape;
use super::param::{MAX_FACTOR, Param, ParamRange, Params, Real};
use super::registry::{PolicyConfig, PolicyEntry};
use super::{Action, Policy, PolicyContext, PolicyError, mean_hints};
use crate::queue::TypedQueue;
use crate::request::{Nanos, Request};
use crate::workers::{WorkerId, WorkerSet};

/// EDF's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EdfConfig {
    /// Deadline factor: a request's deadline is its arrival plus `k` times its
    /// type's expected mean service time.
    pub k: f64,
}

impl Default for EdfConfig {
    fn default() -> Self {
        Self { k: 10.0 }
    }
}

impl Params for EdfConfig {
    const PARAMS: &'static [Param<Self>] = &[Param::keyed(
        "k",
        "deadline = arrival + k x the type's expected mean service time",
        &Real::<Self> {
            range: ParamRange::positive(MAX_FACTOR),
            get: |c| c.k,
            set: |c, v| c.k = v,
        },
    )];
}

/// Earliest deadline first.
#[derive(Debug)]
pub struct Edf {
    label: String,
    /// One queue per type, plus one for UNKNOWN at the end.
    queues: Vec<TypedQueue>,
    slack_ns: Vec<Nanos>,
    queued: usize,
    free: WorkerSet,
}

impl Edf {
    /// EDF with `cfg`'s deadline factor.
    ///
    /// # Errors
    /// Without the types' expected mean service times.
    pub fn new(ctx: &PolicyContext, cfg: EdfConfig, label: String) -> Result<Self, PolicyError> {
        let mut slack_ns: Vec<Nanos> = mean_hints(ctx, &label)?
            .iter()
            .map(|m| (cfg.k * m) as Nanos)
            .collect();
        slack_ns.push(slack_ns.iter().copied().max().unwrap_or(0));
        Ok(Self {
            label,
            queues: (0..slack_ns.len())
                .map(|_| TypedQueue::new(ctx.queue_capacity, 0))
                .collect(),
            slack_ns,
            queued: 0,
            free: WorkerSet::range(0, ctx.workers),
        })
    }
}

impl Policy for Edf {
    fn name(&self) -> String {
        self.label.clone()
    }

    fn on_arrival(&mut self, req: Request, _now: Nanos) -> Result<(), Request> {
        let q = (req.type_id as usize).min(self.queues.len() - 1);
        self.queues[q].push(req)?;
        self.queued += 1;
        Ok(())
    }

    fn on_completion(&mut self, worker: WorkerId, _req: &Request, _service_ns: Nanos, _now: Nanos) {
        self.free.insert(worker);
    }

    fn next_action(&mut self, _now: Nanos) -> Option<Action> {
        let worker = self.free.first()?;
        let (_, q) = self
            .queues
            .iter()
            .zip(&self.slack_ns)
            .enumerate()
            .filter_map(|(i, (q, &slack))| q.front().map(|r| ((r.arrival_ns + slack, r.id), i)))
            .min()?;
        let req = self.queues[q].pop()?;
        self.queued -= 1;
        self.free.remove(worker);
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

    fn queued_by_type(&self, t: crate::TypeId) -> Option<usize> {
        // The last queue holds UNKNOWN requests.
        (usize::from(t) + 1 < self.queues.len()).then(|| self.queues[usize::from(t)].len())
    }
}

impl PolicyConfig for EdfConfig {
    fn build(&self, ctx: &PolicyContext, label: String) -> Result<Box<dyn Policy>, PolicyError> {
        Ok(Box::new(Edf::new(ctx, *self, label)?))
    }

    fn shape(&self) -> Shape {
        Shape::Central
    }
}

/// `edf` in the policy registry.
pub static EDF: PolicyEntry = PolicyEntry {
    name: "edf",
    example: "edf",
    aliases: &[],
    defaults: || Box::new(EdfConfig::default()),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::PolicySpec;
    use crate::policy::testkit::ctx;

    #[test]
    fn earliest_deadline_wins() {
        // Short (1 us, k=10: deadline +10 us) arriving later beats a long one
        // (100 us: deadline +1000 us) that arrived earlier.
        let mut p = PolicySpec::new(&EDF, EdfConfig { k: 10.0 })
            .build(&ctx(1, &[1.0, 100.0]))
            .unwrap();
        p.on_arrival(
            Request {
                id: 0,
                token: 0,
                type_id: 1,
                flow: 0,
                arrival_ns: 0,
            },
            0,
        )
        .unwrap();
        p.on_arrival(
            Request {
                id: 1,
                token: 0,
                type_id: 0,
                flow: 0,
                arrival_ns: 500,
            },
            500,
        )
        .unwrap();
        match p.next_action(500) {
            Some(Action::Dispatch { req, .. }) => assert_eq!(req.id, 1),
            other => panic!("{other:?}"),
        }
    }
}
