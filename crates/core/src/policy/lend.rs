//! `darc-lend`: DARC whose reserved workers are lent, while idle, to requests
//! of longer types, and reclaimed by a preemption when a request they are
//! reserved for has nowhere else to run — only where the preemption
//! mechanism's cost allows it.
//!
//! DARC leaves a short group's reserved workers idle rather than let a long
//! request block them: that idle capacity is what it pays for short requests'
//! tail latency. With a preemption mechanism, a long request on such a worker
//! need not block anyone: it can be evicted when a short one needs the worker.
//! What that costs decides whether lending pays, so the rules read the
//! mechanism's cost ([`PreemptionMechanism::cost`]):
//!
//! - A group's reserved workers are **lendable** when the mechanism's cost
//!   (the time until the interrupt lands plus the switch) is at most `budget`
//!   times the group's shortest profiled mean: a short request that reclaims
//!   one waits about that long. Handlers without preemption points
//!   (`mech=none`) lend nothing: the policy is `darc+` exactly.
//! - A request of a type with no free worker of its own (reserved or
//!   stealable) may run on a free lendable worker of a shorter group, when at
//!   least `keep` of that group's reserved workers stay free.
//! - When a request waits and every worker it may use is busy, a lent worker
//!   among them is **reclaimed** (one [`Action::Preempt`] per waiting request)
//!   if the lent request's expected remaining time is at least `gain` times
//!   the mechanism's cost. The evicted request goes back to the head of its
//!   typed queue and resumes wherever its group's workers free up.
//!
//! Reservations, profiling and group order are `darc+`'s ([`super::darc`]),
//! with its profiling window's size as a parameter (`samples`).
//! This module holds the configuration and the lending state's pure rules; the
//! DARC machine applies them. Nothing here reads a clock or allocates after
//! construction.
//!
//! [`Action::Preempt`]: super::Action::Preempt

use super::param::{Count, MAX_FACTOR, MECH_DOC, Param, ParamRange, Params, Pick, Real};
use super::{MechanismCost, PreemptionMechanism};
use crate::request::{Nanos, TypeId};
use crate::workers::{MAX_WORKERS, WorkerId, WorkerSet};

/// `darc-lend`'s own parameters (DARC's are `darc+`'s defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LendConfig {
    /// How a preemption reaches a worker: its cost decides what is lent.
    pub mechanism: PreemptionMechanism,
    /// A group's workers are lent when the mechanism's cost is at most this
    /// many times the group's shortest mean.
    pub budget: f64,
    /// A lent worker is reclaimed only when its request's expected remaining
    /// time is at least this many times the mechanism's cost.
    pub gain: f64,
    /// Reserved workers of a group that stay free (never lent).
    pub keep: usize,
    /// DARC's profiling window ([`super::DarcConfig::min_samples`]); the
    /// other DARC rules are `darc+`'s.
    pub min_samples: u64,
}

impl Default for LendConfig {
    fn default() -> Self {
        Self {
            mechanism: PreemptionMechanism::CompilerInterrupt,
            budget: 5.0,
            gain: 2.0,
            keep: 0,
            min_samples: super::DarcConfig::plus().min_samples,
        }
    }
}

impl Params for LendConfig {
    const PARAMS: &'static [Param<Self>] = &[
        Param::keyed(
            "mech",
            MECH_DOC,
            &Pick::<Self, _> {
                options: PreemptionMechanism::ALL,
                get: |c| Some(c.mechanism),
                set: |c, v| c.mechanism = v,
            },
        ),
        Param::keyed(
            "budget",
            "a group's reserved workers are lent when a preemption costs at most this many times the group's shortest mean",
            &Real::<Self> {
                range: ParamRange::closed(0.0, MAX_FACTOR),
                get: |c| c.budget,
                set: |c, v| c.budget = v,
            },
        ),
        Param::keyed(
            "gain",
            "a lent worker is reclaimed when its request's expected remaining time is at least this many times a preemption's cost",
            &Real::<Self> {
                range: ParamRange::closed(0.0, MAX_FACTOR),
                get: |c| c.gain,
                set: |c, v| c.gain = v,
            },
        ),
        Param::keyed(
            "keep",
            "reserved workers of a group that are never lent",
            &Count::<Self> {
                range: ParamRange::closed(0.0, MAX_WORKERS as f64),
                get: |c| c.keep as u64,
                set: |c, v| c.keep = v as usize,
            },
        ),
        Param::keyed(
            "samples",
            "completions a profiling window needs before an update is considered (as `darc+`)",
            &Count::<Self> {
                range: ParamRange::closed(1.0, 1e9),
                get: |c| c.min_samples,
                set: |c, v| c.min_samples = v,
            },
        ),
    ];
}

/// The lending state of one DARC machine: which workers run lent requests,
/// which are being reclaimed, and what each worker runs since when.
#[derive(Debug)]
pub(super) struct Lending {
    cfg: LendConfig,
    /// The mechanism's cost; `None`: a preemption never lands.
    cost: Option<MechanismCost>,
    /// Per worker: the type of the request it runs and when it started.
    running: Vec<(TypeId, Nanos)>,
    /// Workers running a lent request.
    pub lent: WorkerSet,
    /// Lent workers whose preemption was ordered and has not landed.
    pub reclaiming: WorkerSet,
    /// Workers whose group's shortest mean makes lending them pay (derived
    /// with each reservation).
    pub lendable: WorkerSet,
}

impl Lending {
    pub fn new(cfg: LendConfig, workers: usize) -> Self {
        Self {
            cfg,
            cost: cfg.mechanism.cost(),
            running: vec![(0, 0); workers],
            lent: WorkerSet::EMPTY,
            reclaiming: WorkerSet::EMPTY,
            lendable: WorkerSet::EMPTY,
        }
    }

    /// Whether anything can ever be lent (a preemption can land).
    pub fn preempts(&self) -> bool {
        self.cost.is_some()
    }

    /// Whether a group whose shortest type's mean is `shortest_mean_ns` may
    /// lend its reserved workers.
    pub fn group_lends(&self, shortest_mean_ns: f64) -> bool {
        self.cost
            .is_some_and(|c| (c.total_ns() as f64) <= self.cfg.budget * shortest_mean_ns)
    }

    /// Whether a group with `reserved` workers may lend one of them now (it
    /// keeps `keep` free).
    pub fn may_lend_from(&self, reserved: WorkerSet, free: WorkerSet) -> bool {
        reserved.and(free).len() > self.cfg.keep
    }

    /// `worker` starts a request of type `t` at `now`; `lent` when it runs
    /// outside its type's own workers.
    pub fn started(&mut self, worker: WorkerId, t: TypeId, now: Nanos, lent: bool) {
        self.running[worker as usize] = (t, now);
        if lent {
            self.lent.insert(worker);
        }
    }

    /// `worker` finished or was preempted.
    pub fn ended(&mut self, worker: WorkerId) {
        self.lent.remove(worker);
        self.reclaiming.remove(worker);
    }

    /// The lent worker among `victims` worth reclaiming at `now` (the one
    /// whose request has the longest expected remaining time, at least `gain`
    /// times a preemption's cost), given each type's profiled mean. Past its
    /// mean a request's remaining time is taken to be a whole mean again (the
    /// policy knows only means).
    pub fn victim(&self, victims: WorkerSet, now: Nanos, mean_ns: &[f64]) -> Option<WorkerId> {
        let cost = self.cost?;
        let floor = self.cfg.gain * cost.total_ns() as f64;
        victims
            .iter()
            .map(|w| {
                let (t, since) = self.running[w as usize];
                let mean = mean_ns.get(t as usize).copied().unwrap_or(0.0);
                let elapsed = now.saturating_sub(since) as f64;
                let left = if elapsed < mean { mean - elapsed } else { mean };
                (left, w)
            })
            .filter(|&(left, _)| left >= floor)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, w)| w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lending_follows_the_mechanisms_cost_and_none_lends_nothing() {
        let of = |mech| {
            Lending::new(
                LendConfig {
                    mechanism: mech,
                    ..LendConfig::default()
                },
                4,
            )
        };
        // 0.5 us shorts with a budget of 5x: 2.5 us per preemption at most.
        assert!(of(PreemptionMechanism::CompilerInterrupt).group_lends(500.0));
        assert!(of(PreemptionMechanism::UserInterrupt).group_lends(500.0));
        assert!(!of(PreemptionMechanism::Signal).group_lends(500.0));
        assert!(of(PreemptionMechanism::Signal).group_lends(1_100.0));
        assert!(!of(PreemptionMechanism::None).group_lends(f64::MAX));
        assert!(!of(PreemptionMechanism::None).preempts());
    }

    #[test]
    fn the_victim_has_the_most_work_left_and_enough_of_it() {
        let mut l = Lending::new(
            LendConfig {
                mechanism: PreemptionMechanism::UserInterrupt,
                ..LendConfig::default()
            },
            3,
        );
        let means = [500.0, 100_000.0, 4_000.0];
        l.started(0, 1, 0, true); // 100 us, 90 us left at 10 us
        l.started(1, 1, 5_000, true); // 95 us left
        l.started(2, 2, 9_000, true); // 3 us left < 2 x 1.351 us? no: 2.702
        let all = WorkerSet::range(0, 3);
        assert_eq!(l.victim(all, 10_000, &means), Some(1));
        // 4 us type with 1 us run: 3 us left, above 2.7 us.
        assert_eq!(l.victim(WorkerSet::range(2, 3), 10_000, &means), Some(2));
        // With 1.5 us run: 2.5 us left, not worth a 1.35 us preemption twice.
        assert_eq!(l.victim(WorkerSet::range(2, 3), 10_500, &means), None);
        // Past its mean a request is taken to have a whole mean left.
        assert_eq!(l.victim(WorkerSet::range(0, 1), 500_000, &means), Some(0));
        l.ended(0);
        assert!(!l.lent.contains(0));
    }
}
