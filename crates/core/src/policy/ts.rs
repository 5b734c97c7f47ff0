//! Shinjuku-style time sharing: a centralized dispatcher hands requests to free
//! workers with a quantum; an expired quantum preempts (always, or only when a
//! request waits), the worker loses `cost_ns` to the switch, and the request goes
//! back to its queue (head or tail).
//!
//! Single queue: one FIFO. Multi queue: one FIFO per type (and one for UNKNOWN);
//! a free worker takes the head with the highest ratio of time since arrival to
//! its type's target latency (`target_factor` x expected mean service time).

use super::Shape;
use super::param::{
    COST_US, MAX_FACTOR, MECH_OVER_COST_DOC, Micros, Param, ParamRange, Params, Pick, QUANTUM_US,
    Real,
};
use super::registry::{ModelledSystem, PolicyConfig, PolicyEntry, PreemptionModel};
use super::{
    Action, Policy, PolicyContext, PolicyError, PolicyStats, PreemptionMechanism, mean_hints,
};
use crate::queue::TypedQueue;
use crate::request::{Nanos, Request};
use crate::workers::{WorkerId, WorkerSet};

/// Shinjuku's queue structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsQueues {
    /// One FIFO.
    Single,
    /// One queue per type; the head with the highest waiting time / target wins.
    Multi,
}

/// Where a preempted request goes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    /// Head of its queue (Shinjuku's choice for light-tailed distributions).
    Head,
    /// Tail of its queue (Shinjuku's choice for heavy-tailed or multimodal ones).
    Tail,
}

/// The `requeue` parameter's values (`ts`, `ts-block`).
pub const REQUEUE: &[(&str, Requeue)] = &[("head", Requeue::Head), ("tail", Requeue::Tail)];

/// When an expired quantum preempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsPreempt {
    /// Every expired quantum preempts.
    Always,
    /// Only when some request is waiting; otherwise the request runs on.
    IfWaiting,
}

/// Shinjuku-style time sharing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TsConfig {
    /// Single or multi queue.
    pub queues: TsQueues,
    /// Time slice.
    pub quantum_ns: u64,
    /// Worker time lost per preemption, in the simulator.
    pub cost_ns: u64,
    /// Where a preempted request goes back.
    pub requeue: Requeue,
    /// When a quantum expiry preempts.
    pub preempt: TsPreempt,
    /// Multi-queue target latency of a type, as a multiple of its mean service time.
    pub target_factor: f64,
    /// A named mechanism whose cost replaces `cost_ns` in the simulator.
    pub mechanism: Option<PreemptionMechanism>,
}

impl Default for TsConfig {
    fn default() -> Self {
        Self {
            queues: TsQueues::Multi,
            quantum_ns: 5_000,
            cost_ns: 1_000,
            requeue: Requeue::Tail,
            preempt: TsPreempt::Always,
            target_factor: 10.0,
            mechanism: None,
        }
    }
}

impl Params for TsConfig {
    const PARAMS: &'static [Param<Self>] = &[
        Param::bare(
            "queues",
            "one queue per type (`mq`, the most overdue head first) or a single FIFO (`sq`)",
            &Pick::<Self, _> {
                options: &[("mq", TsQueues::Multi), ("sq", TsQueues::Single)],
                get: |c| Some(c.queues),
                set: |c, v| c.queues = v,
            },
        ),
        Param::keyed(
            "quantum",
            "time slice",
            &Micros::<Self> {
                range: QUANTUM_US,
                get: |c| c.quantum_ns,
                set: |c, v| c.quantum_ns = v,
            },
        )
        .in_workload_time(),
        Param::keyed(
            "cost",
            "the simulated worker time lost per preemption",
            &Micros::<Self> {
                range: COST_US,
                get: |c| c.cost_ns,
                set: |c, v| c.cost_ns = v,
            },
        ),
        Param::keyed(
            "requeue",
            "where a preempted request goes back in its queue",
            &Pick::<Self, _> {
                options: REQUEUE,
                get: |c| Some(c.requeue),
                set: |c, v| c.requeue = v,
            },
        ),
        Param::keyed(
            "preempt",
            "whether an expired quantum always preempts or only when a request waits",
            &Pick::<Self, _> {
                options: &[
                    ("always", TsPreempt::Always),
                    ("waiting", TsPreempt::IfWaiting),
                ],
                get: |c| Some(c.preempt),
                set: |c, v| c.preempt = v,
            },
        ),
        Param::keyed(
            "target",
            "`mq`: a type's target latency, as a multiple of its mean service time",
            &Real::<Self> {
                range: ParamRange::positive(MAX_FACTOR),
                get: |c| c.target_factor,
                set: |c, v| c.target_factor = v,
            },
        ),
        Param::keyed(
            "mech",
            MECH_OVER_COST_DOC,
            &Pick::<Self, _> {
                options: PreemptionMechanism::ALL,
                get: |c| c.mechanism,
                set: |c, v| c.mechanism = Some(v),
            },
        ),
    ];
}

/// Shinjuku time sharing.
#[derive(Debug)]
pub struct TimeSharing {
    label: String,
    cfg: TsConfig,
    queues: Vec<TypedQueue>,
    /// Per queue, 1 / target latency (multi queue only).
    inv_target: Vec<f64>,
    queued: usize,
    free: WorkerSet,
    stats: PolicyStats,
}

impl TimeSharing {
    /// Time sharing over `ctx`.
    ///
    /// # Errors
    /// Multi queue needs the types' expected mean service times.
    pub fn new(ctx: &PolicyContext, cfg: TsConfig, label: String) -> Result<Self, PolicyError> {
        let inv_target = match cfg.queues {
            TsQueues::Single => vec![1.0],
            TsQueues::Multi => {
                let mut t: Vec<f64> = mean_hints(ctx, &label)?
                    .iter()
                    .map(|m| 1.0 / (cfg.target_factor * m))
                    .collect();
                // UNKNOWN: the loosest target.
                t.push(t.iter().copied().fold(f64::INFINITY, f64::min));
                t
            }
        };
        Ok(Self {
            label,
            cfg,
            // Headroom: every worker may hand its request back at once.
            queues: (0..inv_target.len())
                .map(|_| TypedQueue::new(ctx.queue_capacity, ctx.workers))
                .collect(),
            inv_target,
            queued: 0,
            free: WorkerSet::range(0, ctx.workers),
            stats: PolicyStats::default(),
        })
    }

    #[inline]
    fn queue_of(&self, req: &Request) -> usize {
        match self.cfg.queues {
            TsQueues::Single => 0,
            TsQueues::Multi => (req.type_id as usize).min(self.queues.len() - 1),
        }
    }
}

impl Policy for TimeSharing {
    fn name(&self) -> String {
        self.label.clone()
    }

    fn execution(&self) -> super::Execution {
        super::Execution::CentralPreemptive
    }

    fn on_arrival(&mut self, req: Request, _now: Nanos) -> Result<(), Request> {
        let q = self.queue_of(&req);
        self.queues[q].push(req)?;
        self.queued += 1;
        Ok(())
    }

    fn on_completion(&mut self, worker: WorkerId, _req: &Request, _service_ns: Nanos, _now: Nanos) {
        self.free.insert(worker);
    }

    fn next_action(&mut self, now: Nanos) -> Option<Action> {
        if self.queued == 0 {
            return None;
        }
        let worker = self.free.first()?;
        let q = match self.cfg.queues {
            TsQueues::Single => 0,
            TsQueues::Multi => {
                let mut best = (f64::NEG_INFINITY, 0);
                for (i, q) in self.queues.iter().enumerate() {
                    if let Some(head) = q.front() {
                        let ratio = now.saturating_sub(head.arrival_ns) as f64 * self.inv_target[i];
                        if ratio > best.0 {
                            best = (ratio, i);
                        }
                    }
                }
                best.1
            }
        };
        let req = self.queues[q].pop()?;
        self.queued -= 1;
        self.free.remove(worker);
        Some(Action::Dispatch {
            worker,
            req,
            quantum_ns: Some(self.cfg.quantum_ns),
        })
    }

    fn on_quantum_expired(&mut self, _worker: WorkerId, _now: Nanos) -> bool {
        let preempt = match self.cfg.preempt {
            TsPreempt::Always => true,
            TsPreempt::IfWaiting => self.queued > 0,
        };
        if preempt {
            self.stats.preemptions += 1;
        }
        preempt
    }

    fn on_preempted(&mut self, worker: WorkerId, req: Request, _now: Nanos) {
        let q = self.queue_of(&req);
        match self.cfg.requeue {
            Requeue::Head => self.queues[q].requeue_front(req),
            Requeue::Tail => self.queues[q].requeue_back(req),
        }
        self.queued += 1;
        self.free.insert(worker);
    }

    fn queued(&self) -> usize {
        self.queued
    }

    fn idle_workers(&self) -> WorkerSet {
        self.free
    }

    fn stats(&self) -> PolicyStats {
        self.stats
    }
}

impl PolicyConfig for TsConfig {
    fn build(&self, ctx: &PolicyContext, label: String) -> Result<Box<dyn Policy>, PolicyError> {
        Ok(Box::new(TimeSharing::new(ctx, *self, label)?))
    }

    fn shape(&self) -> Shape {
        Shape::CentralPreemptive
    }

    fn preemption_model(&self) -> PreemptionModel {
        PreemptionModel::named_or_switch(self.mechanism, self.cost_ns)
    }

    fn modelled_system(&self) -> ModelledSystem {
        ModelledSystem::Shinjuku
    }

    fn fixed_quantum_ns(&self) -> Option<u64> {
        Some(self.quantum_ns)
    }
}

/// `ts` (Shinjuku) in the policy registry.
pub static TS: PolicyEntry = PolicyEntry {
    name: "ts",
    example: "ts",
    aliases: &[],
    defaults: || Box::new(TsConfig::default()),
};

#[cfg(test)]
mod tests {
    use super::super::testkit::{Driver, ctx};
    use crate::policy::PolicySpec;

    #[test]
    fn time_sharing_conserves_requests_and_stays_work_conserving() {
        for s in [
            "ts",
            "ts:sq",
            "ts:requeue=head,preempt=waiting",
            "ts:sq,cost=0",
        ] {
            let spec: PolicySpec = s.parse().unwrap();
            let means = [1.0, 100.0];
            for seed in 0..10 {
                let mut d = Driver::new(spec.build(&ctx(3, &means)).unwrap(), seed)
                    .with_means(&means)
                    // With and without a switch cost.
                    .with_switch_ns(seed % 2 * 1_000);
                d.run(3_000, |p, disp| {
                    if disp.is_none() {
                        assert!(
                            p.queued() == 0 || p.idle_workers().is_empty(),
                            "{s}: idle while waiting"
                        );
                    }
                });
                assert!(d.preempted > 0, "{s}: no preemption exercised");
                assert_eq!(
                    d.generated(),
                    d.completed + d.dropped + d.in_flight(),
                    "{s}"
                );
            }
        }
    }
}
