//! `darc-fair`'s starvation bound: a type whose oldest waiting request has
//! waited `patience` times its profiled mean is *owed* its fair share of the
//! workers, and keeps that claim while it has work.
//!
//! DARC sizes each group's workers from its share of the work completed in the
//! last profiling window. Where arrivals wait for replies (every Redis and
//! memcached client is a closed loop) a long type's arrivals are paced by its
//! own completions, its profiled share stays near 0, and it is left the
//! spillway behind the short types: it starves. Counting completions cannot
//! see that demand; waiting can. So the bound reads queues, not profiles:
//!
//! - A type is *active* when it has a request waiting or running. Its **fair
//!   share** is the workers divided by the active types (at least one).
//! - A type with a request waiting whose head has waited more than `patience`
//!   times its mean becomes **owed**, and stays owed while it has requests
//!   waiting or running, and for one mean after (its backlog earns it the
//!   workers, not one lucky request; a closed loop's next request comes
//!   right after its last reply).
//! - While an owed type runs on fewer workers than its fair share, it goes
//!   first on every worker that frees: its own group's first, else any free
//!   one that no other type under its share is waiting for. What it is owed
//!   is not reclaimed: a reclaim would hand the worker straight back to it,
//!   evicting and restarting its request for ever. The oldest owed head
//!   goes first. A starved type may be one the reservation left on the
//!   spillway behind a backlogged longer group (a type with no completions
//!   in a window drops to the inactive group, served last): its own workers
//!   alone would not free it.
//!
//! So a type's oldest request waits at most `patience` x its mean, plus the
//! time until a worker frees (the shortest remaining service among the busy
//! workers), plus its own type's requests queued ahead of it; and a
//! backlogged type then keeps at least its fair share of the workers. Types that get their share
//! from the reservation never trigger the rule: with open-loop arrivals below
//! capacity, `darc-fair` is `darc-lend`.
//!
//! Pure state: counts, flags and times per type, sized at construction; no
//! clock (time is the decision's `now`).

use crate::request::{Nanos, Request, TypeId};

/// Per type: how many workers run it and whether it is owed its share.
#[derive(Debug)]
pub(super) struct FairShare {
    /// Waiting longer than this many times the type's mean makes it owed.
    patience: f64,
    workers: usize,
    /// Per type: workers running a request of the type (at the last
    /// [`FairShare::recount`]).
    running: Vec<u32>,
    /// Per type: owed its fair share (while it has work, and one mean after).
    owed: Vec<bool>,
    /// Per type: the wait (ns) past which its head makes it owed; derived
    /// from the profiled means so the decision compares integers.
    limit_ns: Vec<u64>,
    /// The fair share at the last [`FairShare::pick`].
    share: u32,
    /// Per type: the mean the workload declares (ns), for a type not
    /// profiled yet.
    declared_ns: Vec<Option<f64>>,
    /// Per type: the mean its limit derives from (ns).
    mean_ns: Vec<u64>,
    /// Per type: since when it has had nothing waiting or running, as
    /// last seen.
    idle_since: Vec<Option<Nanos>>,
}

impl FairShare {
    /// `declared_ns`: each type's mean as the workload declares it, if any.
    pub fn new(patience: f64, declared_ns: Vec<Option<f64>>, workers: usize) -> Self {
        let types = declared_ns.len();
        Self {
            declared_ns,
            patience,
            workers,
            running: vec![0; types],
            owed: vec![false; types],
            limit_ns: vec![u64::MAX; types],
            mean_ns: vec![u64::MAX; types],
            idle_since: vec![None; types],
            share: workers as u32,
        }
    }

    /// Re-derives each type's limit from its profiled mean. A type not
    /// profiled (none of it completed: perhaps because it starves) takes its
    /// declared mean, else the longest profiled one.
    pub fn set_means(&mut self, mean_ns: &[f64]) {
        let longest = mean_ns
            .iter()
            .copied()
            .filter(|m| m.is_finite())
            .fold(f64::NAN, f64::max);
        for (((limit, own_mean), &mean), declared) in self
            .limit_ns
            .iter_mut()
            .zip(&mut self.mean_ns)
            .zip(mean_ns)
            .zip(&self.declared_ns)
        {
            let mean = match (mean.is_finite(), declared) {
                (true, _) => mean,
                (false, Some(d)) => *d,
                (false, None) => longest,
            };
            // Saturating float-to-int: with nothing profiled (NaN) nobody owes.
            (*limit, *own_mean) = if mean.is_nan() {
                (u64::MAX, u64::MAX)
            } else {
                ((self.patience * mean) as u64, mean as u64)
            };
        }
    }

    /// Counts the workers running each type afresh: `busy` yields the type
    /// each busy worker runs (recounted at each decision rather than kept
    /// by increments, so no missed hook can drift it).
    pub fn recount(&mut self, busy: impl Iterator<Item = TypeId>) {
        self.running.fill(0);
        for t in busy {
            if let Some(r) = self.running.get_mut(t as usize) {
                *r += 1;
            }
        }
    }

    /// Whether type `t` runs on fewer workers than the fair share of the
    /// last [`FairShare::pick`].
    pub fn under_share(&self, t: TypeId) -> bool {
        self.running
            .get(t as usize)
            .is_some_and(|&r| r < self.share)
    }

    /// Whether type `t` is owed at all.
    #[cfg(test)]
    pub fn is_owed(&self, t: TypeId) -> bool {
        self.owed.get(t as usize).copied().unwrap_or(false)
    }

    /// Updates the owed flags from each type's queue head at `now`, and
    /// returns the owed type under its fair share with the oldest head, if
    /// any. `head(t)` is the head of type `t`'s queue.
    pub fn pick<'q>(
        &mut self,
        now: Nanos,
        head: impl Fn(usize) -> Option<&'q Request>,
    ) -> Option<TypeId> {
        let mut active = 0usize;
        let mut any_owed = false;
        for t in 0..self.owed.len() {
            match head(t) {
                Some(r) => {
                    active += 1;
                    self.idle_since[t] = None;
                    if !self.owed[t] && now.saturating_sub(r.arrival_ns) > self.limit_ns[t] {
                        self.owed[t] = true;
                    }
                    any_owed |= self.owed[t];
                }
                None if self.running[t] > 0 => {
                    // A closed loop's next request is on its way.
                    active += 1;
                    self.idle_since[t] = None;
                }
                None => {
                    // Idle: the claim lapses after one mean of idleness, so
                    // a closed loop's gap between a reply and its next
                    // request keeps it.
                    let since = *self.idle_since[t].get_or_insert(now);
                    if now.saturating_sub(since) > self.mean_ns[t] {
                        self.owed[t] = false;
                    }
                }
            }
        }
        self.share = (self.workers / active.max(1)).max(1) as u32;
        if !any_owed {
            return None;
        }
        (0..self.owed.len())
            .filter(|&t| self.owed[t] && self.under_share(t as TypeId))
            .filter_map(|t| head(t).map(|r| (r.arrival_ns, r.id, t as TypeId)))
            .min()
            .map(|(_, _, t)| t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(id: u64, t: TypeId, arrival_ns: Nanos) -> Request {
        Request {
            id,
            token: 0,
            type_id: t,
            flow: 0,
            arrival_ns,
        }
    }

    #[test]
    fn a_type_is_owed_after_its_patience_and_until_its_queue_empties() {
        let mut f = FairShare::new(10.0, vec![None; 2], 2);
        f.set_means(&[1_000.0, 100_000.0]);
        let long = req(1, 1, 0);
        // Type 1 waits 999 us < 10 x 100 us: not owed.
        assert_eq!(f.pick(999_000, |t| (t == 1).then_some(&long)), None);
        assert!(!f.is_owed(1));
        assert_eq!(f.pick(1_000_001, |t| (t == 1).then_some(&long)), Some(1));
        assert!(f.is_owed(1));
        // A younger head keeps the claim while the queue is not empty.
        let next = req(2, 1, 1_000_000);
        assert_eq!(f.pick(1_000_002, |t| (t == 1).then_some(&next)), Some(1));
        // Served up to its share (2 workers over 1 active type: 2).
        f.recount([1, 1].into_iter());
        assert_eq!(f.pick(1_000_003, |t| (t == 1).then_some(&next)), None);
        // Nothing waits, two run: still owed (a closed loop's next request
        // is on its way).
        assert_eq!(f.pick(1_000_004, |_| None), None);
        assert!(f.is_owed(1));
        // Idle: the claim lapses one mean (100 us) later.
        f.recount(std::iter::empty());
        assert_eq!(f.pick(1_000_005, |_| None), None);
        assert!(f.is_owed(1));
        assert_eq!(f.pick(1_100_005, |_| None), None);
        assert!(f.is_owed(1));
        assert_eq!(f.pick(1_100_006, |_| None), None);
        assert!(!f.is_owed(1));
    }

    #[test]
    fn a_type_never_profiled_is_owed_after_its_declared_or_the_longest_mean() {
        let mut f = FairShare::new(2.0, vec![Some(5_000.0), None, None], 1);
        f.set_means(&[f64::INFINITY, f64::INFINITY, 3_000.0]);
        assert_eq!(f.limit_ns, [10_000, 6_000, 6_000]);
        f.set_means(&[f64::INFINITY; 3]);
        assert_eq!(f.limit_ns[1], u64::MAX);
    }

    #[test]
    fn the_share_divides_the_workers_over_the_types_with_work() {
        let mut f = FairShare::new(1.0, vec![None, None, Some(1e9)], 4);
        f.set_means(&[1_000.0, 10_000.0, f64::INFINITY]);
        let short = req(1, 0, 0);
        let long = req(2, 1, 0);
        let unmeasured = req(3, 2, 0);
        let heads = |t: usize| match t {
            0 => Some(&short),
            1 => Some(&long),
            _ => Some(&unmeasured),
        };
        // Three active types over 4 workers: a share of 1 each. The
        // unmeasured type is owed after its declared mean (1 s) only; the
        // oldest owed head goes first (ids break the tie).
        assert_eq!(f.pick(20_000, heads), Some(0));
        f.recount([0].into_iter());
        assert_eq!(f.pick(20_000, heads), Some(1));
        f.recount([0, 1].into_iter());
        assert_eq!(f.pick(20_000, heads), None);
        f.recount([0].into_iter());
        assert_eq!(f.pick(20_000, heads), Some(1));
    }
}
