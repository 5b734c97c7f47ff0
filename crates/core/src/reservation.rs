//! DARC's worker reservation (Algorithm 2 of the Perséphone paper, SOSP'21).
//!
//! From each type's mean service time `S_i` and occurrence ratio `R_i`: group
//! types whose means are within a factor `delta` of the group's first member, give
//! each group (shortest first) its rounded CPU demand
//! `d_g = sum(S_i R_i over the group) / sum(S_j R_j) * W` in workers handed out in
//! index order, and let it steal every worker still unreserved at that point (the
//! workers of longer groups). A group left without workers gets the spillway.
//!
//! Types that are absent from the profile (ratio 0, or never measured) get no
//! reservation of their own: they are ordered last and served by the spillway.
//!
//! [`Reservation::compute_into`] reuses the reservation's storage: an update
//! allocates nothing.

use crate::request::TypeId;
use crate::workers::WorkerSet;

/// How a group's fractional demand becomes a number of workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rounding {
    /// The paper's rule: 1 worker when the whole part is 0; otherwise floor when the
    /// fractional part is at most 0.5, else ceil.
    Paper,
    /// Always round up.
    Ceil,
    /// Always round down (at least one worker).
    Floor,
    /// `darc+`: the paper's rule, raised where it would leave a group fewer
    /// workers than it keeps busy at the measured rate (its demand times the
    /// measured utilization, plus [`ReservationConfig::headroom`]): rounding a
    /// 2.32-worker demand down to 2 is right at 80% load (1.86 workers busy)
    /// but starves the group at 95% (2.21). Without a measured utilization it is
    /// the paper's rule.
    Load,
}

impl Rounding {
    /// Workers for a demand of `d` (before capping by the workers left).
    pub fn workers_for(self, d: f64) -> usize {
        let whole = d.floor();
        let n = match self {
            Rounding::Paper | Rounding::Load if whole == 0.0 => 1.0,
            Rounding::Paper | Rounding::Load if d - whole <= 0.5 => whole,
            Rounding::Paper | Rounding::Load | Rounding::Ceil => d.ceil(),
            Rounding::Floor => whole,
        };
        (n as usize).max(1)
    }

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Rounding::Paper => "paper",
            Rounding::Ceil => "ceil",
            Rounding::Floor => "floor",
            Rounding::Load => "load",
        }
    }
}

/// Parameters of the reservation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReservationConfig {
    /// Grouping factor: type p joins group g when `S_p - S_g < S_g * delta`.
    pub delta: f64,
    /// Number of spillway workers (the last ones).
    pub spillway: usize,
    /// Rounding of fractional demands.
    pub rounding: Rounding,
    /// `darc+`: when the longest group's mean is less than this many times the
    /// next shorter group's, the longest group, which cannot steal, is sized
    /// first: it gets `ceil(d)` workers (as far as the shorter groups keep at
    /// least `max(1, floor(d))` each) and every worker the shorter groups leave.
    /// 0 (never) is the paper's shortest-first hand-out, where the longest group
    /// takes what is left and a noisy round-up above it can starve it. A group
    /// far longer than the rest tolerates waiting (its slowdown is counted in
    /// its own long service time) and is left to the paper's rule.
    pub protect_longest: f64,
    /// `darc+`: a group other than the shortest whose demand is below this many
    /// workers joins the next shorter group instead of taking a whole worker of
    /// its own (0: never, the paper's one-worker minimum).
    pub merge_below: f64,
    /// `round=load`: workers a group keeps above its measured load (0: at least
    /// `ceil(load)`).
    pub headroom: f64,
}

impl Default for ReservationConfig {
    fn default() -> Self {
        Self {
            delta: 0.2,
            spillway: 1,
            rounding: Rounding::Paper,
            protect_longest: 0.0,
            merge_below: 0.0,
            headroom: 0.0,
        }
    }
}

/// Profile of one type as the reservation sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TypeDemand {
    /// Mean service time (any unit, the same for all types); `f64::INFINITY` when the
    /// type was never measured.
    pub mean: f64,
    /// Occurrence ratio in the profiling window; 0 for an absent type.
    pub ratio: f64,
}

impl TypeDemand {
    fn is_active(&self) -> bool {
        self.ratio > 0.0 && self.mean.is_finite() && self.mean > 0.0
    }
}

/// A group of types of similar service time and the workers it may use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Group {
    /// Its types are `Reservation::order[start..end]`.
    pub start: usize,
    /// End (exclusive) of its types in `Reservation::order`.
    pub end: usize,
    /// CPU demand in workers (unrounded).
    pub demand: f64,
    /// Workers reserved for the group.
    pub reserved: WorkerSet,
    /// Workers it may steal when idle: those reserved for longer groups.
    pub stealable: WorkerSet,
    /// The group got no worker of its own and runs on the spillway.
    pub on_spillway: bool,
    /// The group holds the types absent from the profile.
    pub inactive: bool,
}

/// A complete reservation: type order, groups and their workers.
#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
    workers: usize,
    /// Types in dispatch order: active types by ascending mean, then absent ones.
    pub order: Vec<TypeId>,
    /// Groups, shortest first.
    pub groups: Vec<Group>,
    /// Group index of each type.
    pub group_of: Vec<u16>,
    /// Each type's CPU demand in workers (0 for absent types).
    pub type_demand: Vec<f64>,
    /// The spillway workers.
    pub spillway: WorkerSet,
    /// Scratch: each type's sort key (see `compute_into`).
    sort_keys: Vec<u64>,
    /// Scratch: each active group's span of `order` and demand, before workers
    /// are handed out.
    spans: Vec<(usize, usize, f64)>,
    /// Scratch: per span, the workers kept back for the longer groups
    /// (`protect_longest`).
    keep_for_later: Vec<usize>,
}

impl Reservation {
    /// An empty reservation for `types` types on `workers` workers, to be filled by
    /// [`compute_into`](Self::compute_into).
    pub fn with_capacity(types: usize, workers: usize) -> Self {
        Self {
            workers,
            order: Vec::with_capacity(types),
            groups: Vec::with_capacity(types + 1),
            group_of: vec![0; types],
            type_demand: vec![0.0; types],
            spillway: WorkerSet::EMPTY,
            sort_keys: vec![0; types],
            spans: Vec::with_capacity(types),
            keep_for_later: Vec::with_capacity(types),
        }
    }

    /// Computes the reservation for `stats` (indexed by type id) on `workers`.
    ///
    /// # Panics
    /// If `workers` is 0 or above [`crate::MAX_WORKERS`], or the spillway does not
    /// fit (validated when a policy is built).
    pub fn compute(stats: &[TypeDemand], workers: usize, cfg: &ReservationConfig) -> Self {
        let mut r = Self::with_capacity(stats.len(), workers);
        r.compute_into(stats, cfg);
        r
    }

    /// As [`compute`](Self::compute), with the window's measured utilization
    /// (busy workers / workers) for [`Rounding::Load`].
    pub fn compute_loaded(
        stats: &[TypeDemand],
        workers: usize,
        utilization: Option<f64>,
        cfg: &ReservationConfig,
    ) -> Self {
        let mut r = Self::with_capacity(stats.len(), workers);
        r.compute_into_loaded(stats, utilization, cfg);
        r
    }

    /// Recomputes this reservation in place (no allocation).
    pub fn compute_into(&mut self, stats: &[TypeDemand], cfg: &ReservationConfig) {
        self.compute_into_loaded(stats, None, cfg);
    }

    /// Recomputes this reservation in place (no allocation), with the measured
    /// utilization: the fraction of the workers kept busy over the profiling
    /// window, so that a group of demand `d` (a share of all workers) keeps
    /// `utilization x d` of them busy. Only [`Rounding::Load`] reads it.
    pub fn compute_into_loaded(
        &mut self,
        stats: &[TypeDemand],
        utilization: Option<f64>,
        cfg: &ReservationConfig,
    ) {
        let w = self.workers;
        assert!(
            w >= 1 && cfg.spillway >= 1 && cfg.spillway <= w,
            "bad reservation shape"
        );
        assert_eq!(stats.len(), self.group_of.len(), "type count changed");
        self.spillway = WorkerSet::range(w - cfg.spillway, w);
        self.order.clear();
        self.order.extend(0..stats.len() as TypeId);
        // Active types first, by ascending mean, then absent ones by mean; the id
        // breaks ties (deterministic). One integer key per type makes each
        // comparison a single compare: the bits of a non-negative f64 order like
        // the number, and the top bit marks absent types.
        for (key, st) in self.sort_keys.iter_mut().zip(stats) {
            let mean_bits = st.mean.max(0.0).to_bits();
            *key = if st.is_active() {
                mean_bits
            } else {
                (1 << 63) | (mean_bits >> 1)
            };
        }
        let keys = &self.sort_keys;
        self.order.sort_unstable_by_key(|&t| (keys[t as usize], t));
        let active = self
            .order
            .iter()
            .filter(|&&t| stats[t as usize].is_active())
            .count();
        let total: f64 = self.order[..active]
            .iter()
            .map(|&t| stats[t as usize].mean * stats[t as usize].ratio)
            .sum();

        // Demand in workers per unit of S x R: one division, not one per type.
        let workers_per_unit = w as f64 / total;
        self.groups.clear();
        self.spans.clear();
        self.type_demand.fill(0.0);
        // Groups: types within `delta` of the group's first member.
        let mut i = 0usize;
        while i < active {
            let first = stats[self.order[i] as usize].mean;
            let mut end = i + 1;
            while end < active && stats[self.order[end] as usize].mean - first < first * cfg.delta {
                end += 1;
            }
            let mut demand = 0.0;
            for &t in &self.order[i..end] {
                let s = &stats[t as usize];
                let d = s.mean * s.ratio * workers_per_unit;
                self.type_demand[t as usize] = d;
                demand += d;
            }
            match self.spans.last_mut() {
                Some(prev) if demand < cfg.merge_below => {
                    prev.1 = end;
                    prev.2 += demand;
                }
                _ => self.spans.push((i, end, demand)),
            }
            i = end;
        }
        let protect = self.plan_longest_first(stats, cfg);
        // Workers, shortest group first, in index order.
        let mut next = 0usize;
        let last = self.spans.len().saturating_sub(1);
        let load_floor = match (cfg.rounding, utilization) {
            (Rounding::Load, Some(u)) if u.is_finite() && u > 0.0 => Some(u),
            _ => None,
        };
        for g in 0..self.spans.len() {
            let (start, end, demand) = self.spans[g];
            let mut want = cfg.rounding.workers_for(demand);
            if let Some(u) = load_floor {
                // Never below the workers the group keeps busy, but every
                // longer group keeps one worker of its own.
                let busy = ((u * demand + cfg.headroom).ceil() as usize).max(1);
                let later = self.spans.len() - 1 - g;
                want = want.max(busy.min((w - next).saturating_sub(later).max(1)));
            }
            let take = if protect && g == last {
                w - next
            } else if protect {
                let room = (w - next).saturating_sub(self.keep_for_later[g]);
                want.min(room).max(1).min(w - next)
            } else {
                want.min(w - next)
            };
            let (reserved, on_spillway) = if take == 0 {
                (self.spillway, true)
            } else {
                (WorkerSet::range(next, next + take), false)
            };
            next += take;
            let stealable = if on_spillway {
                WorkerSet::EMPTY
            } else {
                WorkerSet::range(next, w)
            };
            self.push_group(start, end, demand, reserved, stealable, on_spillway, false);
        }
        if active < self.order.len() {
            let spill = self.spillway;
            self.push_group(
                active,
                self.order.len(),
                0.0,
                spill,
                WorkerSet::EMPTY,
                true,
                true,
            );
        }
    }

    /// `protect_longest`: whether it applies, and then per span the workers to
    /// keep back for the longer groups: `max(1, floor(d))` for each middle group
    /// and `ceil(d)` for the longest, which is lowered (to no less than
    /// `floor(d)`, 1 at least) when the shorter groups' own floors do not leave
    /// room for it.
    fn plan_longest_first(&mut self, stats: &[TypeDemand], cfg: &ReservationConfig) -> bool {
        self.keep_for_later.clear();
        if self.spans.len() < 2 {
            return false;
        }
        let last = self.spans.len() - 1;
        let first_mean = |span: &(usize, usize, f64)| stats[self.order[span.0] as usize].mean;
        if first_mean(&self.spans[last]) >= cfg.protect_longest * first_mean(&self.spans[last - 1])
        {
            return false;
        }
        let floor_of = |d: f64| (d.floor() as usize).max(1);
        let shorter: usize = self.spans[..last].iter().map(|s| floor_of(s.2)).sum();
        let d_last = self.spans[last].2;
        let longest = (d_last.ceil() as usize)
            .max(1)
            .min(self.workers.saturating_sub(shorter))
            .max(floor_of(d_last).min(self.workers));
        let mut keep = longest;
        self.keep_for_later.resize(self.spans.len(), 0);
        for g in (0..last).rev() {
            self.keep_for_later[g] = keep;
            keep += floor_of(self.spans[g].2);
        }
        true
    }

    /// DARC-static's fixed reservation: the shortest group (types within `delta` of
    /// the shortest mean) gets workers `0..short_reserved` and may steal every other
    /// worker; all longer types share the remaining workers, in ascending mean order.
    /// With `short_reserved = 0` this is fixed priority. `None` when longer types
    /// exist and would be left without a worker.
    ///
    /// # Panics
    /// If `means` is empty or `workers` is 0 or above [`crate::MAX_WORKERS`].
    pub fn static_split(
        means: &[f64],
        workers: usize,
        short_reserved: usize,
        delta: f64,
    ) -> Option<Self> {
        let mut r = Self::with_capacity(means.len(), workers);
        r.spillway = WorkerSet::range(workers - 1, workers);
        r.order.extend(0..means.len() as TypeId);
        r.order.sort_unstable_by(|&a, &b| {
            means[a as usize]
                .total_cmp(&means[b as usize])
                .then(a.cmp(&b))
        });
        let first = means[r.order[0] as usize];
        let short_end = r
            .order
            .iter()
            .take_while(|&&t| means[t as usize] - first < first * delta)
            .count();
        if short_end < means.len() && short_reserved >= workers {
            return None;
        }
        let all = WorkerSet::range(0, workers);
        let reserved = WorkerSet::range(0, short_reserved.min(workers));
        r.push_group(
            0,
            short_end,
            0.0,
            reserved,
            all.without(reserved),
            false,
            false,
        );
        if short_end < means.len() {
            r.push_group(
                short_end,
                means.len(),
                0.0,
                all.without(reserved),
                WorkerSet::EMPTY,
                false,
                false,
            );
        }
        Some(r)
    }

    #[allow(clippy::too_many_arguments)]
    fn push_group(
        &mut self,
        start: usize,
        end: usize,
        demand: f64,
        reserved: WorkerSet,
        stealable: WorkerSet,
        on_spillway: bool,
        inactive: bool,
    ) {
        let g = self.groups.len() as u16;
        for &t in &self.order[start..end] {
            self.group_of[t as usize] = g;
        }
        self.groups.push(Group {
            start,
            end,
            demand,
            reserved,
            stealable,
            on_spillway,
            inactive,
        });
    }

    /// Number of workers this reservation covers.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// The types of group `g`, in dispatch order.
    pub fn group_types(&self, g: usize) -> &[TypeId] {
        let grp = &self.groups[g];
        &self.order[grp.start..grp.end]
    }

    /// The group of type `t`.
    #[inline]
    pub fn group(&self, t: TypeId) -> &Group {
        &self.groups[self.group_of[t as usize] as usize]
    }

    /// Workers a request of type `t` may run on (reserved, then stealable).
    #[inline]
    pub fn allowed(&self, t: TypeId) -> WorkerSet {
        let g = self.group(t);
        g.reserved.or(g.stealable)
    }

    /// Why running a request of type `t` on `worker` would break this reservation:
    /// outside the type's reserved and stealable workers, on a worker reserved for
    /// a shorter group (except the spillway, for groups that run on it), or an
    /// UNKNOWN request off the spillway. `None` when the dispatch is allowed. For
    /// test probes and executors' debug assertions.
    pub fn dispatch_violation(&self, t: TypeId, worker: crate::WorkerId) -> Option<String> {
        if t == crate::UNKNOWN_TYPE {
            return (!self.spillway.contains(worker)).then(|| {
                format!(
                    "UNKNOWN request on worker {worker}, off the spillway {}",
                    self.spillway
                )
            });
        }
        let g = self.group_of[t as usize] as usize;
        if !self.allowed(t).contains(worker) {
            return Some(format!(
                "type {t} (group {g}) on worker {worker}, outside its workers: {self}"
            ));
        }
        let on_spill = self.groups[g].on_spillway && self.spillway.contains(worker);
        self.groups[..g]
            .iter()
            .any(|shorter| shorter.reserved.contains(worker) && !on_spill)
            .then(|| {
                format!(
                    "type {t} (group {g}) on worker {worker}, reserved for a shorter group: {self}"
                )
            })
    }

    /// Per type (index = type id), how many workers its group has reserved and
    /// may steal: the shape a time series records.
    pub fn worker_counts(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        (0..self.group_of.len()).map(|t| {
            let g = self.group(t as TypeId);
            (g.reserved.len(), g.stealable.len())
        })
    }

    /// Whether `other` groups the same types and hands them the same workers
    /// (whatever the demands it was computed from).
    pub fn same_split(&self, other: &Reservation) -> bool {
        self.order == other.order
            && self.groups.len() == other.groups.len()
            && self.groups.iter().zip(&other.groups).all(|(a, b)| {
                (a.start, a.end, a.reserved, a.stealable, a.on_spillway)
                    == (b.start, b.end, b.reserved, b.stealable, b.on_spillway)
            })
    }

    /// Whether `fresh` differs enough from this reservation to be applied: the set
    /// of active types changed, or some type's demand moved by more than
    /// `threshold` (relative) from the demand this reservation was built on.
    pub fn deviates(&self, fresh: &Reservation, threshold: f64) -> bool {
        self.type_demand
            .iter()
            .zip(&fresh.type_demand)
            .any(|(&old, &new)| ((old > 0.0) != (new > 0.0)) || (new - old).abs() > threshold * old)
    }
}

impl Reservation {
    /// `darc+`'s hysteresis: whether `fresh` moves workers for a reason larger than
    /// window noise. True when the groups differ (other types, other grouping),
    /// or when some group's number of reserved workers changes and its demand
    /// moved by more than `margin` workers since this reservation was made;
    /// a demand wobbling around a rounding boundary changes nothing.
    pub fn shifts(&self, fresh: &Reservation, margin: f64) -> bool {
        if self.groups.len() != fresh.groups.len() || self.group_of != fresh.group_of {
            return true;
        }
        let active = |d: f64| d > 0.0;
        if self
            .type_demand
            .iter()
            .zip(&fresh.type_demand)
            .any(|(&old, &new)| active(old) != active(new))
        {
            return true;
        }
        self.groups.iter().zip(&fresh.groups).any(|(old, new)| {
            (old.reserved.len() != new.reserved.len() || old.on_spillway != new.on_spillway)
                && (new.demand - old.demand).abs() > margin
        })
    }
}

impl std::fmt::Display for Reservation {
    /// One line per group: `[types] demand=.. reserved=.. stealable=..`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (g, grp) in self.groups.iter().enumerate() {
            if g > 0 {
                f.write_str("; ")?;
            }
            write!(
                f,
                "types {:?} demand {:.2} reserved {}",
                self.group_types(g),
                grp.demand,
                grp.reserved
            )?;
            if grp.on_spillway {
                f.write_str(" (spillway)")?;
            }
            write!(f, " stealable {}", grp.stealable)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! The paper's worked examples of the reservation, on 14 workers.
    use super::*;

    fn td(v: &[(f64, f64)]) -> Vec<TypeDemand> {
        v.iter()
            .map(|&(mean, ratio)| TypeDemand { mean, ratio })
            .collect()
    }

    fn ws(a: usize, b: usize) -> WorkerSet {
        WorkerSet::range(a, b)
    }

    #[test]
    fn high_bimodal_reserves_one_worker_for_short() {
        let r = Reservation::compute(&td(&[(1.0, 0.5), (100.0, 0.5)]), 14, &Default::default());
        assert_eq!(r.groups.len(), 2);
        assert!((r.groups[0].demand - 0.1386).abs() < 1e-3);
        assert_eq!(r.groups[0].reserved, ws(0, 1));
        assert_eq!(r.groups[0].stealable, ws(1, 14));
        assert_eq!(r.groups[1].reserved, ws(1, 14));
        assert_eq!(r.groups[1].stealable, WorkerSet::EMPTY);
    }

    #[test]
    fn extreme_bimodal_reserves_two_workers_for_short() {
        let r = Reservation::compute(
            &td(&[(0.5, 0.995), (500.0, 0.005)]),
            14,
            &Default::default(),
        );
        assert!(
            (r.groups[0].demand - 2.32).abs() < 0.01,
            "{}",
            r.groups[0].demand
        );
        assert_eq!(r.groups[0].reserved, ws(0, 2));
        assert_eq!(r.groups[0].stealable, ws(2, 14));
        assert_eq!(r.groups[1].reserved, ws(2, 14));
    }

    #[test]
    fn tpcc_groups_and_steals_as_in_the_paper() {
        // Payment, OrderStatus, NewOrder, Delivery, StockLevel.
        let s = td(&[
            (5.7, 0.44),
            (6.0, 0.04),
            (20.0, 0.44),
            (88.0, 0.04),
            (100.0, 0.04),
        ]);
        let r = Reservation::compute(&s, 14, &Default::default());
        assert_eq!(r.groups.len(), 3);
        assert_eq!(r.group_types(0), &[0, 1]);
        assert_eq!(r.group_types(1), &[2]);
        assert_eq!(r.group_types(2), &[3, 4]);
        // Workers 1-2, 3-8, 9-14 in the paper's 1-based numbering.
        assert_eq!(r.groups[0].reserved, ws(0, 2));
        assert_eq!(r.groups[1].reserved, ws(2, 8));
        assert_eq!(r.groups[2].reserved, ws(8, 14));
        assert_eq!(r.groups[0].stealable, ws(2, 14));
        assert_eq!(r.groups[1].stealable, ws(8, 14));
        assert_eq!(r.groups[2].stealable, WorkerSet::EMPTY);
    }

    #[test]
    fn rocksdb_reserves_one_worker_for_get() {
        let r = Reservation::compute(&td(&[(1.5, 0.5), (635.0, 0.5)]), 14, &Default::default());
        assert_eq!(r.groups[0].reserved, ws(0, 1));
        assert_eq!(r.groups[1].reserved, ws(1, 14));
    }

    #[test]
    fn rounding_alternatives_on_16_workers() {
        let s = td(&[(0.5, 0.995), (500.0, 0.005)]);
        let with = |rounding| {
            let cfg = ReservationConfig {
                rounding,
                ..Default::default()
            };
            Reservation::compute(&s, 16, &cfg).groups[0].reserved.len()
        };
        // Demand 2.66 workers.
        assert_eq!(with(Rounding::Paper), 3);
        assert_eq!(with(Rounding::Ceil), 3);
        assert_eq!(with(Rounding::Floor), 2);
    }

    #[test]
    fn groups_without_workers_left_get_the_spillway() {
        // Four equally demanding groups with ceil rounding on 3 workers.
        let s = td(&[
            (1.0, 0.25),
            (10.0, 0.025),
            (100.0, 0.0025),
            (1000.0, 0.00025),
        ]);
        let cfg = ReservationConfig {
            rounding: Rounding::Ceil,
            ..Default::default()
        };
        let r = Reservation::compute(&s, 3, &cfg);
        assert_eq!(r.groups.len(), 4);
        assert_eq!(r.groups[3].reserved, ws(2, 3));
        assert!(r.groups[3].on_spillway);
        assert_eq!(r.groups[3].stealable, WorkerSet::EMPTY);
    }

    #[test]
    fn absent_and_unmeasured_types_land_last_on_the_spillway() {
        let s = td(&[(f64::INFINITY, 0.0), (1.0, 0.5), (3.0, 0.0), (100.0, 0.5)]);
        let r = Reservation::compute(&s, 4, &Default::default());
        assert_eq!(&r.order[..2], &[1, 3]);
        let last = r.groups.last().expect("groups");
        assert!(last.inactive && last.on_spillway);
        assert_eq!(r.group_types(r.groups.len() - 1), &[2, 0]);
        assert_eq!(r.allowed(0), ws(3, 4));
    }

    #[test]
    fn dispatch_violations_are_named() {
        let r = Reservation::compute(&td(&[(1.0, 0.5), (100.0, 0.5)]), 4, &Default::default());
        assert_eq!(r.dispatch_violation(0, 3), None, "short may steal");
        assert_eq!(r.dispatch_violation(1, 1), None);
        assert!(
            r.dispatch_violation(1, 0).is_some(),
            "long on short's reserved worker"
        );
        assert!(r.dispatch_violation(crate::UNKNOWN_TYPE, 0).is_some());
        assert_eq!(r.dispatch_violation(crate::UNKNOWN_TYPE, 3), None);
    }

    /// TPC-C with NewOrder's ratio moved so that its demand is `new_order`
    /// workers (the profiled means; the other ratios as in the mix).
    fn tpcc_with_new_order_demand(new_order: f64) -> Vec<TypeDemand> {
        // Demand d = S R / sum(S R) * 14; solve R_no for d.
        let rest: f64 = 5.7 * 0.44 + 6.0 * 0.04 + 88.0 * 0.04 + 100.0 * 0.04;
        let r_no = new_order * rest / (20.0 * (14.0 - new_order));
        td(&[
            (5.7, 0.44),
            (6.0, 0.04),
            (20.0, r_no),
            (88.0, 0.04),
            (100.0, 0.04),
        ])
    }

    fn sizes(r: &Reservation) -> Vec<usize> {
        r.groups.iter().map(|g| g.reserved.len()).collect()
    }

    #[test]
    fn paper_rounding_flips_tpcc_at_the_boundary() {
        let cfg = ReservationConfig::default();
        let low = Reservation::compute(&tpcc_with_new_order_demand(6.42), 14, &cfg);
        let high = Reservation::compute(&tpcc_with_new_order_demand(6.55), 14, &cfg);
        assert!((low.groups[1].demand - 6.42).abs() < 1e-9);
        assert_eq!(sizes(&low), [2, 6, 6]);
        // A window 0.05 workers above the boundary starves Delivery/StockLevel
        // (demand 5.4, no stealing) with 5 workers.
        assert_eq!(sizes(&high), [2, 7, 5]);
    }

    #[test]
    fn protecting_the_longest_group_decides_the_tpcc_boundary_robustly() {
        let cfg = ReservationConfig {
            protect_longest: 10.0,
            ..Default::default()
        };
        for d in [6.3, 6.42, 6.46, 6.5, 6.55, 6.6] {
            let r = Reservation::compute(&tpcc_with_new_order_demand(d), 14, &cfg);
            assert_eq!(sizes(&r), [2, 6, 6], "NewOrder demand {d}: {r}");
            assert_eq!(r.groups[2].reserved, ws(8, 14));
            assert_eq!(r.groups[1].stealable, ws(8, 14));
        }
        // Far from the boundary NewOrder grows, but not at the longest group's
        // expense: Delivery/StockLevel (demand 4.6) keep ceil = 5, the paper 4.
        let r = Reservation::compute(&tpcc_with_new_order_demand(7.7), 14, &cfg);
        assert_eq!(sizes(&r), [2, 7, 5], "{r}");
        let paper = Reservation::compute(&tpcc_with_new_order_demand(7.7), 14, &Default::default());
        assert_eq!(sizes(&paper), [2, 8, 4], "{paper}");
    }

    #[test]
    fn protecting_the_longest_group_keeps_the_paper_examples() {
        let cfg = ReservationConfig {
            protect_longest: 10.0,
            ..Default::default()
        };
        for (s, want) in [
            (td(&[(1.0, 0.5), (100.0, 0.5)]), [1, 13]),
            (td(&[(0.5, 0.995), (500.0, 0.005)]), [2, 12]),
            (td(&[(1.5, 0.5), (635.0, 0.5)]), [1, 13]),
        ] {
            let paper = Reservation::compute(&s, 14, &Default::default());
            let r = Reservation::compute(&s, 14, &cfg);
            assert_eq!(sizes(&r), want, "{r}");
            assert_eq!((&r.order, &r.groups), (&paper.order, &paper.groups));
        }
        let tpcc = tpcc_with_new_order_demand(6.46);
        let r = Reservation::compute(&tpcc, 14, &cfg);
        let paper = Reservation::compute(&tpcc, 14, &Default::default());
        assert_eq!((&r.order, &r.groups), (&paper.order, &paper.groups));
    }

    #[test]
    fn a_far_longer_longest_group_is_left_to_the_paper_rule() {
        // Extreme Bimodal with a window that saw few long requests: short demand
        // 2.6 rounds up to 3, and long (1000x longer, protected only within 10x)
        // keeps the 11 left: the short requests are the ones that need workers.
        let s = td(&[(0.5, 0.9955), (500.0, 0.0045)]);
        let cfg = ReservationConfig {
            protect_longest: 10.0,
            ..Default::default()
        };
        let r = Reservation::compute(&s, 14, &cfg);
        assert!(r.groups[0].demand > 2.5, "{r}");
        assert_eq!(sizes(&r), [3, 11], "{r}");
        let all = ReservationConfig {
            protect_longest: 1e6,
            ..Default::default()
        };
        assert_eq!(sizes(&Reservation::compute(&s, 14, &all)), [2, 12]);
    }

    #[test]
    fn more_groups_than_workers_still_use_the_spillway_when_protected() {
        let s = td(&[
            (1.0, 0.25),
            (10.0, 0.025),
            (100.0, 0.0025),
            (1000.0, 0.00025),
        ]);
        let cfg = ReservationConfig {
            protect_longest: 10.0,
            ..Default::default()
        };
        let r = Reservation::compute(&s, 3, &cfg);
        assert_eq!(r.groups.len(), 4);
        assert!(r.groups.iter().all(|g| !g.reserved.is_empty()), "{r}");
        assert!(r.groups[3].on_spillway, "{r}");
        for t in 0..4 {
            for w in r.allowed(t).iter() {
                assert_eq!(r.dispatch_violation(t, w), None);
            }
        }
    }

    #[test]
    fn a_tiny_longer_group_merges_into_the_shorter_one() {
        // ZippyDB-like: 0.5 us 78%, 2.5 us 19%, 500 us 3%: demands 0.34, 0.42, 13.2.
        let s = td(&[(0.5, 0.78), (2.5, 0.19), (500.0, 0.03)]);
        let paper = Reservation::compute(&s, 14, &Default::default());
        assert_eq!(sizes(&paper), [1, 1, 12]);
        let cfg = ReservationConfig {
            merge_below: 0.5,
            ..Default::default()
        };
        let r = Reservation::compute(&s, 14, &cfg);
        assert_eq!(sizes(&r), [1, 13], "{r}");
        assert_eq!(r.group_types(0), &[0, 1]);
    }

    #[test]
    fn hysteresis_ignores_a_boundary_wobble_but_not_a_real_move() {
        let cfg = ReservationConfig::default();
        let a = Reservation::compute(&tpcc_with_new_order_demand(6.46), 14, &cfg);
        let wobble = Reservation::compute(&tpcc_with_new_order_demand(6.55), 14, &cfg);
        let moved = Reservation::compute(&tpcc_with_new_order_demand(7.7), 14, &cfg);
        assert_ne!(sizes(&a), sizes(&wobble));
        assert!(!a.shifts(&wobble, 0.25));
        assert!(a.shifts(&wobble, 0.05));
        assert!(a.shifts(&moved, 0.25));
        let fewer = Reservation::compute(&td(&[(1.0, 0.5), (100.0, 0.5)]), 14, &cfg);
        let other = Reservation::compute(&td(&[(1.0, 1.0), (100.0, 0.0)]), 14, &cfg);
        assert!(fewer.shifts(&other, 10.0), "the type set changed");
    }

    #[test]
    fn deviation_detects_demand_and_type_set_changes() {
        let cfg = ReservationConfig::default();
        let a = Reservation::compute(&td(&[(1.0, 0.5), (100.0, 0.5)]), 14, &cfg);
        let b = Reservation::compute(&td(&[(1.05, 0.5), (100.0, 0.5)]), 14, &cfg);
        let c = Reservation::compute(&td(&[(2.0, 0.5), (100.0, 0.5)]), 14, &cfg);
        let d = Reservation::compute(&td(&[(1.0, 1.0), (100.0, 0.0)]), 14, &cfg);
        assert!(!a.deviates(&b, 0.1));
        assert!(a.deviates(&c, 0.1));
        assert!(a.deviates(&d, 0.1));
    }

    fn load_cfg(headroom: f64) -> ReservationConfig {
        ReservationConfig {
            rounding: Rounding::Load,
            headroom,
            ..Default::default()
        }
    }

    #[test]
    fn load_rounding_never_leaves_a_group_below_its_measured_load() {
        // Extreme-bimodal, 14 workers: short demand 2.32 workers, i.e. 2.32 x
        // utilization busy. The paper's 2 holds until 2 workers are busy
        // (utilization 0.862), then 3.
        let s = td(&[(0.5, 0.995), (500.0, 0.005)]);
        let at = |u: Option<f64>, cfg: &ReservationConfig| {
            sizes(&Reservation::compute_loaded(&s, 14, u, cfg))
        };
        let cfg = load_cfg(0.0);
        assert_eq!(
            at(None, &cfg),
            [2, 12],
            "no rate measured: the paper's rule"
        );
        assert_eq!(at(Some(0.5), &cfg), [2, 12]);
        assert_eq!(at(Some(0.80), &cfg), [2, 12]);
        assert_eq!(at(Some(0.86), &cfg), [2, 12]);
        assert_eq!(at(Some(0.87), &cfg), [3, 11]);
        assert_eq!(at(Some(0.95), &cfg), [3, 11]);
        // Headroom: a quarter of a worker above the load from 0.755.
        assert_eq!(at(Some(0.75), &load_cfg(0.25)), [2, 12]);
        assert_eq!(at(Some(0.80), &load_cfg(0.25)), [3, 11]);
        // The paper's rounding ignores the rate.
        assert_eq!(at(Some(0.95), &ReservationConfig::default()), [2, 12]);
    }

    #[test]
    fn load_rounding_keeps_the_paper_examples_below_their_boundaries() {
        let cfg = load_cfg(0.0);
        for (s, want) in [
            (td(&[(1.0, 0.5), (100.0, 0.5)]), vec![1, 13]),
            (td(&[(1.5, 0.5), (635.0, 0.5)]), vec![1, 13]),
            (tpcc_with_new_order_demand(6.46), vec![2, 6, 6]),
        ] {
            let paper = Reservation::compute(&s, 14, &Default::default());
            assert_eq!(sizes(&paper), want);
            for u in [0.3, 0.6, 0.85] {
                let r = Reservation::compute_loaded(&s, 14, Some(u), &cfg);
                assert_eq!((&r.order, &r.groups), (&paper.order, &paper.groups), "{u}");
            }
        }
    }

    #[test]
    fn load_rounding_leaves_every_longer_group_a_worker_and_the_protected_room() {
        // TPC-C at 97%: NewOrder keeps 6.27 workers busy, but with the longest
        // group sized first (darc+) it may not take Delivery/StockLevel's sixth.
        let tpcc = tpcc_with_new_order_demand(6.46);
        let plus = ReservationConfig {
            protect_longest: 10.0,
            ..load_cfg(0.0)
        };
        let r = Reservation::compute_loaded(&tpcc, 14, Some(0.97), &plus);
        assert_eq!(sizes(&r), [2, 6, 6], "{r}");
        // Without that rule NewOrder rises to 7 and the longest keeps the rest.
        let r = Reservation::compute_loaded(&tpcc, 14, Some(0.97), &load_cfg(0.0));
        assert_eq!(sizes(&r), [2, 7, 5], "{r}");
        // An overloaded short group never takes the last worker of a longer one.
        // Demands 2 and 2 on 4 workers: the paper gives 2/2, the floor asks 4.
        let s = td(&[(1.0, 0.5), (100.0, 0.005)]);
        assert_eq!(
            sizes(&Reservation::compute(&s, 4, &Default::default())),
            [2, 2]
        );
        let r = Reservation::compute_loaded(&s, 4, Some(1.0), &load_cfg(2.0));
        assert_eq!(sizes(&r), [3, 1], "{r}");
        assert!(!r.groups[1].on_spillway);
    }
}
