//! The idealized single-queue preemptive system of the paper's discussion
//! ("TS X us"): as soon as a short request is blocked (no worker free), the
//! dispatcher preempts a worker running a long request. The interrupt takes half
//! of the total cost to reach the worker (the long request keeps running), the
//! switch the other half (the worker does nothing useful), then the worker is free.
//! `ts-block:0` is ideal instant preemption.
//!
//! A type is long when its expected mean exceeds `long_factor` x the shortest
//! mean. One preemption is outstanding per blocked short request at most; the
//! victim is the long request that started first. The preempted request goes back
//! to the single FIFO (tail or head); a free worker takes the FIFO head, as in the
//! paper's single-queue systems (an older long request it takes is then
//! preempted again), or with `pick=short` the oldest short request first (the
//! preemption was fired for it: an idealisation without that cascade).

use std::collections::VecDeque;

use super::Shape;
use super::param::{COST_US, MAX_FACTOR, Micros, Param, ParamRange, Params, Pick, Real};
use super::registry::{ModelledSystem, PolicyConfig, PolicyEntry, PreemptionModel};
use super::ts::{REQUEUE, Requeue};
use super::{Action, Policy, PolicyContext, PolicyError, PolicyStats, mean_hints};
use crate::request::{Nanos, Request};
use crate::workers::{WorkerId, WorkerSet};

/// Which waiting request a worker takes in the preempt-on-block model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockPick {
    /// The head of the single FIFO, as in the paper's single-queue preemptive
    /// systems. A worker freed by a preemption may then take an older long
    /// request, which is preempted again at once: under load this cycles
    /// through every queued long request per blocked short one. The default.
    Fifo,
    /// The oldest short request if any (what the preemption was for), else the
    /// head: an idealisation that removes the cascade (`pick=short`).
    Short,
}

/// Single-queue preemption fired as soon as a short request is blocked (the
/// paper's "TS X us" model): the signal takes half the cost, the switch the other.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TsBlockConfig {
    /// Total preemption cost (propagation + switch), in the simulator.
    pub cost_ns: u64,
    /// Where the preempted request goes back.
    pub requeue: Requeue,
    /// What a freed worker takes.
    pub pick: BlockPick,
    /// A type is long when its mean exceeds this multiple of the shortest mean.
    pub long_factor: f64,
}

impl Default for TsBlockConfig {
    fn default() -> Self {
        Self {
            cost_ns: 0,
            requeue: Requeue::Tail,
            pick: BlockPick::Fifo,
            long_factor: 10.0,
        }
    }
}

impl Params for TsBlockConfig {
    const PARAMS: &'static [Param<Self>] = &[
        Param::leading(
            "COST",
            "the simulated total preemption cost: half to reach the worker, half its switch",
            &Micros::<Self> {
                range: COST_US,
                get: |c| c.cost_ns,
                set: |c, v| c.cost_ns = v,
            },
        ),
        Param::keyed(
            "requeue",
            "where a preempted request goes back in the FIFO",
            &Pick::<Self, _> {
                options: REQUEUE,
                get: |c| Some(c.requeue),
                set: |c, v| c.requeue = v,
            },
        ),
        Param::keyed(
            "pick",
            "what a free worker takes: the FIFO's head, or the oldest short request first",
            &Pick::<Self, _> {
                options: &[("fifo", BlockPick::Fifo), ("short", BlockPick::Short)],
                get: |c| Some(c.pick),
                set: |c, v| c.pick = v,
            },
        ),
        Param::keyed(
            "long",
            "a type is long when its mean exceeds this multiple of the shortest mean",
            &Real::<Self> {
                range: ParamRange::closed(1.0, MAX_FACTOR),
                get: |c| c.long_factor,
                set: |c, v| c.long_factor = v,
            },
        ),
    ];
}

/// Preempt-on-block time sharing.
#[derive(Debug)]
pub struct TsBlock {
    label: String,
    cfg: TsBlockConfig,
    is_long: Vec<bool>,
    /// The single FIFO, split by class; the sequence number is the FIFO position.
    short: VecDeque<(i64, Request)>,
    long: VecDeque<(i64, Request)>,
    capacity: usize,
    back_seq: i64,
    front_seq: i64,
    free: WorkerSet,
    running_long: WorkerSet,
    pending: WorkerSet,
    started_ns: Vec<Nanos>,
    stats: PolicyStats,
}

impl TsBlock {
    /// The model over `ctx`.
    ///
    /// # Errors
    /// Without the types' expected mean service times.
    pub fn new(
        ctx: &PolicyContext,
        cfg: TsBlockConfig,
        label: String,
    ) -> Result<Self, PolicyError> {
        let means = mean_hints(ctx, &label)?;
        let shortest = means.iter().copied().fold(f64::INFINITY, f64::min);
        let slots = ctx.queue_capacity + ctx.workers;
        Ok(Self {
            label,
            cfg,
            is_long: means
                .iter()
                .map(|&m| m > cfg.long_factor * shortest)
                .collect(),
            short: VecDeque::with_capacity(slots),
            long: VecDeque::with_capacity(slots),
            capacity: ctx.queue_capacity,
            back_seq: 0,
            front_seq: 0,
            free: WorkerSet::range(0, ctx.workers),
            running_long: WorkerSet::EMPTY,
            pending: WorkerSet::EMPTY,
            started_ns: vec![0; ctx.workers],
            stats: PolicyStats::default(),
        })
    }

    #[inline]
    fn long(&self, req: &Request) -> bool {
        // UNKNOWN requests count as long.
        self.is_long
            .get(req.type_id as usize)
            .copied()
            .unwrap_or(true)
    }

    fn pop_next(&mut self) -> Option<Request> {
        let take_short = match (self.short.front(), self.long.front()) {
            (None, None) => return None,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(s), Some(l)) => self.cfg.pick == BlockPick::Short || s.0 < l.0,
        };
        let q = if take_short {
            &mut self.short
        } else {
            &mut self.long
        };
        q.pop_front().map(|(_, r)| r)
    }

    fn vacate(&mut self, worker: WorkerId) {
        self.free.insert(worker);
        self.pending.remove(worker);
        self.running_long.remove(worker);
    }
}

impl Policy for TsBlock {
    fn name(&self) -> String {
        self.label.clone()
    }

    fn execution(&self) -> super::Execution {
        super::Execution::CentralPreemptive
    }

    fn on_arrival(&mut self, req: Request, _now: Nanos) -> Result<(), Request> {
        if self.short.len() + self.long.len() >= self.capacity {
            return Err(req);
        }
        self.back_seq += 1;
        if self.long(&req) {
            &mut self.long
        } else {
            &mut self.short
        }
        .push_back((self.back_seq, req));
        Ok(())
    }

    fn on_completion(&mut self, worker: WorkerId, _req: &Request, _service_ns: Nanos, _now: Nanos) {
        self.vacate(worker);
    }

    fn next_action(&mut self, now: Nanos) -> Option<Action> {
        if let Some(worker) = self.free.first() {
            let req = self.pop_next()?;
            self.free.remove(worker);
            if self.long(&req) {
                self.running_long.insert(worker);
                self.started_ns[worker as usize] = now;
            }
            return Some(Action::Dispatch {
                worker,
                req,
                quantum_ns: None,
            });
        }
        // Every worker is busy: one preemption per blocked short request.
        if self.short.len() <= self.pending.len() {
            return None;
        }
        let worker = self
            .running_long
            .without(self.pending)
            .iter()
            .min_by_key(|&w| self.started_ns[w as usize])?;
        self.pending.insert(worker);
        self.stats.preemptions += 1;
        Some(Action::Preempt { worker })
    }

    fn on_preempted(&mut self, worker: WorkerId, req: Request, _now: Nanos) {
        self.vacate(worker);
        let q = if self.long(&req) {
            &mut self.long
        } else {
            &mut self.short
        };
        match self.cfg.requeue {
            Requeue::Tail => {
                self.back_seq += 1;
                q.push_back((self.back_seq, req));
            }
            Requeue::Head => {
                self.front_seq -= 1;
                q.push_front((self.front_seq, req));
            }
        }
    }

    fn queued(&self) -> usize {
        self.short.len() + self.long.len()
    }

    fn idle_workers(&self) -> WorkerSet {
        self.free
    }

    fn stats(&self) -> PolicyStats {
        self.stats
    }
}

impl PolicyConfig for TsBlockConfig {
    fn build(&self, ctx: &PolicyContext, label: String) -> Result<Box<dyn Policy>, PolicyError> {
        Ok(Box::new(TsBlock::new(ctx, *self, label)?))
    }

    fn shape(&self) -> Shape {
        Shape::CentralPreemptive
    }

    fn preemption_model(&self) -> PreemptionModel {
        PreemptionModel::SignalAndSwitch(self.cost_ns)
    }

    fn modelled_system(&self) -> ModelledSystem {
        ModelledSystem::Shinjuku
    }
}

/// `ts-block` in the policy registry.
pub static TS_BLOCK: PolicyEntry = PolicyEntry {
    name: "ts-block",
    example: "ts-block:1",
    aliases: &[],
    defaults: || Box::new(TsBlockConfig::default()),
};

#[cfg(test)]
mod tests {
    use super::super::testkit::{Driver, ctx};
    use super::*;
    use crate::policy::PolicySpec;

    #[test]
    fn preempts_only_long_requests_and_conserves_requests() {
        for s in [
            "ts-block:0",
            "ts-block:4",
            "ts-block:2,pick=short,requeue=head",
            "ts-block:2,pick=fifo",
        ] {
            let spec: PolicySpec = s.parse().unwrap();
            let means = [1.0, 100.0];
            for seed in 0..10 {
                let mut d = Driver::new(spec.build(&ctx(2, &means)).unwrap(), seed)
                    .with_means(&means)
                    // With and without a switch cost.
                    .with_switch_ns(seed % 2 * 1_000);
                d.run(3_000, |_, _| {});
                assert!(d.preempted > 0, "{s}: never preempted");
                assert_eq!(
                    d.generated(),
                    d.completed + d.dropped + d.in_flight(),
                    "{s}"
                );
            }
        }
    }

    #[test]
    fn blocked_short_request_triggers_one_preemption_of_the_oldest_long() {
        let spec: PolicySpec = "ts-block:4".parse().unwrap();
        let mut p = spec.build(&ctx(2, &[1.0, 100.0])).unwrap();
        for (id, t) in [(0, 1), (1, 1)] {
            p.on_arrival(
                Request {
                    id,
                    token: 0,
                    type_id: t,
                    flow: 0,
                    arrival_ns: id,
                },
                id,
            )
            .unwrap();
            assert!(matches!(p.next_action(id), Some(Action::Dispatch { .. })));
        }
        p.on_arrival(
            Request {
                id: 2,
                token: 0,
                type_id: 0,
                flow: 0,
                arrival_ns: 10,
            },
            10,
        )
        .unwrap();
        assert_eq!(p.next_action(10), Some(Action::Preempt { worker: 0 }));
        assert_eq!(p.next_action(10), None, "one blocked short, one preemption");
    }
}
