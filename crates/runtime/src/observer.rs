//! What the dispatcher observes of a run, apart from driving it: the
//! outcome counters and the recorder, the bounded reservation log, the time
//! series, the live statistics lines on stderr, the warnings about declared
//! service times, the live snapshots, and the report they all end in.
//!
//! The [`DispatchCore`](crate::DispatchCore) owns one [`Observer`] and tells
//! it what happened (an arrival, a shed, a completion, the end of a pass);
//! the observer never decides anything about a request. Counting an arrival
//! or a completion is on the request path and must not allocate, lock or
//! format; what does (a statistics line, a reservation change, a series
//! window, a warning) runs at most once per interval or per rare event.

use std::collections::VecDeque;
use std::time::Duration;

use psp_core::{Policy, Reservation, TypeId, WorkerId};
use psp_metrics::series::{ReservationView, SeriesRecorder, TimeSeries};
use psp_metrics::{Digest, Recorder};

use crate::message::{Done, RequestCounts, Slot};
use crate::preempt::ReclaimTimes;
use crate::snapshot::{Loan, PUBLISH_INTERVAL, Snapshot, SnapshotPublisher};

/// Reservation changes kept in the log (the most recent): a long-running server
/// must not grow with uptime. The log's total count is kept apart.
pub(crate) const RESERVATION_LOG_CAPACITY: usize = 1024;
/// How far a type's measured mean service time may be from its declared one
/// (either way) before the dispatcher warns: beyond it, a load computed from
/// the declared times is not the load the workers carry.
pub const SERVICE_OFF_FACTOR: f64 = 1.5;
/// Completions of a type before its measured mean is compared.
pub const SERVICE_CHECK_MIN: u64 = 100;
/// How often the measured means are compared with the declared ones.
const SERVICE_CHECK_EVERY_NS: u64 = 1_000_000_000;

/// The one rule every front end warns by: a type's measured mean service time
/// over its declared one, when it has [`SERVICE_CHECK_MIN`] completions and the
/// ratio is more than [`SERVICE_OFF_FACTOR`] off either way; `None` otherwise
/// (also without a positive declared mean). Both means in the same unit.
pub fn service_off(measured_mean: f64, declared_mean: f64, completed: u64) -> Option<f64> {
    if completed < SERVICE_CHECK_MIN || declared_mean.is_nan() || declared_mean <= 0.0 {
        return None;
    }
    let ratio = measured_mean / declared_mean;
    (!(1.0 / SERVICE_OFF_FACTOR..=SERVICE_OFF_FACTOR).contains(&ratio)).then_some(ratio)
}

/// Periodic live statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatsConfig {
    /// Time between two lines.
    pub interval: Duration,
    /// JSON lines instead of human lines.
    pub json: bool,
}

/// A reservation change observed at run time.
#[derive(Debug, Clone, PartialEq)]
pub struct ReservationEvent {
    /// Seconds since the dispatcher started.
    pub at_s: f64,
    /// The new reservation (cloned only when an update is applied: rare).
    pub reservation: psp_core::Reservation,
}

/// Counters and records of a finished run.
#[derive(Debug, Clone)]
pub struct DispatcherReport {
    /// Measured (after warm-up) latency and slowdown, and measured sheds.
    pub recorder: Recorder,
    /// Outcomes of every request, warm-up included.
    pub counts: RequestCounts,
    /// Requests that arrived after the warm-up (the measured ones).
    pub measured_arrived: u64,
    /// The most recent reservation changes, in order (at most 1024).
    pub reservation_log: Vec<ReservationEvent>,
    /// The policy's counters (`reservation_updates` counts every change,
    /// including those the bounded log no longer holds).
    pub policy_stats: psp_core::policy::PolicyStats,
    /// The final reservation, if any.
    pub reservation: Option<psp_core::Reservation>,
    /// Per-window latency and reservation, when a front end asked for one
    /// ([`DispatchCore::record_series`](crate::DispatchCore::record_series)).
    pub series: Option<TimeSeries>,
    /// Requests completed, by type, warm-up included.
    pub completed_by_type: Vec<u64>,
    /// Their service times summed (handler time: what the workers were
    /// busy with), by type.
    pub service_ns_by_type: Vec<u64>,
    /// Requests refused, by type, warm-up included: with `completed_by_type`,
    /// the same counts as `/metrics`' `psp_requests`.
    pub shed_by_type: Vec<u64>,
    /// How the policy's ordered preemptions landed (central preemptive
    /// runs only).
    pub reclaims: Option<ReclaimTimes>,
}

impl DispatcherReport {
    /// Over a run of `wall_ns` on `workers`: the measured utilization (the
    /// service time of every completed request over workers x wall time), and
    /// the utilization the declared mean service times (ns, in type order)
    /// imply for the same completions (`None` when no type declares one).
    pub fn utilization(
        &self,
        workers: usize,
        wall_ns: f64,
        declared_ns: &[Option<f64>],
    ) -> (f64, Option<f64>) {
        let capacity_ns = (workers as f64 * wall_ns).max(1.0);
        let busy_ns: u64 = self.service_ns_by_type.iter().sum();
        let declared = declared_ns.iter().any(Option::is_some).then(|| {
            self.completed_by_type
                .iter()
                .zip(declared_ns)
                .map(|(&n, m)| n as f64 * m.unwrap_or(0.0))
                .sum::<f64>()
                / capacity_ns
        });
        (busy_ns as f64 / capacity_ns, declared)
    }
}

/// Per-type counters of the live statistics and snapshots. Unlike
/// [`RequestCounts`], the outcomes of completed requests are disjoint: an error
/// answer that could not be sent counts as `unsent` only.
#[derive(Debug, Clone, Copy, Default)]
struct TypeCounts {
    arrived: u64,
    completed: u64,
    shed: u64,
    ok: u64,
    handler_errors: u64,
    bad_bodies: u64,
    unsent: u64,
    stranded: u64,
    /// Service time of the completed ones, summed.
    service_ns: u64,
}

/// What the core's state is at an observation: what the observer reports
/// but does not keep.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Load {
    /// Requests waiting for a worker.
    pub(crate) queued: usize,
    /// Requests queued or running.
    pub(crate) in_flight: usize,
}

/// What the core knows of its workers, for a snapshot.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WorkerView<'a> {
    /// The type of the job each worker holds (`None` for the whole: not
    /// known, the workers take their jobs themselves).
    pub(crate) running: Option<&'a [Option<TypeId>]>,
    /// Requests preempted on each worker and handed back.
    pub(crate) preemptions: &'a [u64],
}

/// The live snapshots, once a front end asked for them.
struct Snapshots {
    publisher: SnapshotPublisher,
    /// Each type's latest latency and service-time digests (the buffer a
    /// snapshot is written into holds an older one).
    digests: Vec<(Digest, Digest)>,
    /// The type whose quantiles the next snapshot reads.
    next_quantiles: usize,
}

/// The time series (`psp run --series`).
struct Series {
    recorder: SeriesRecorder,
    /// Its view of the reservation in force.
    view: Vec<(usize, usize)>,
    /// The time (since the base) of the last pass, where it ends.
    end_ns: u64,
}

/// The periodic statistics lines, when asked for.
struct StatsLines {
    cfg: StatsConfig,
    next: u64,
    /// At the previous line: when, the service time completed by then, and
    /// the declared service time of what had completed.
    last: (u64, u64, f64),
}

/// Each type's declared mean service time (ns; 0: none), when a front end
/// set them: live statistics then show the load they imply, and a type whose
/// measured mean is off by more than [`SERVICE_OFF_FACTOR`] is warned about
/// once.
#[derive(Default)]
struct Declared {
    ns: Vec<f64>,
    warned: Vec<bool>,
    next_check: u64,
}

/// Writes each worker's state into `s`, in place: what it runs, the group it
/// is reserved for, and whether it runs another group's request.
fn fill_workers(s: &mut Snapshot, reservation: Option<&Reservation>, view: WorkerView<'_>) {
    s.running_known = view.running.is_some();
    for (w, out) in s.workers.iter_mut().enumerate() {
        out.running = view.running.and_then(|r| r[w]);
        out.preemptions = view.preemptions[w];
        out.reserved_group = None;
        out.spillway = reservation.is_some_and(|r| r.spillway.contains(w as WorkerId));
    }
    if let Some(r) = reservation {
        // A spillway worker may be reserved for a short group and for one
        // that got no worker of its own: it counts as the shortest's.
        for (g, group) in r.groups.iter().enumerate().rev() {
            for w in group.reserved.iter() {
                s.workers[w as usize].reserved_group = Some(g as u16);
            }
        }
    }
    for out in &mut s.workers {
        // Groups are shortest first: a worker of a longer group running a
        // shorter one's request lets it steal; the reverse is a loan.
        let own = out.reserved_group;
        let running = out
            .running
            .and_then(|t| reservation.map(|r| r.group_of[t as usize]));
        out.loan = match (own, running) {
            (Some(own), Some(g)) if own > g => Loan::Stealing,
            (Some(own), Some(g)) if own < g => Loan::Lent,
            _ => Loan::Own,
        };
    }
}

/// Everything the dispatcher observes of a run (module docs).
pub(crate) struct Observer {
    type_names: Vec<String>,
    /// Workers (the statistics' utilization is over all of them).
    workers: usize,
    /// Time zero of the statistics, the series and the reservation log.
    base: u64,
    recorder: Recorder,
    counts: RequestCounts,
    measured_arrived: u64,
    by_type: Vec<TypeCounts>,
    /// The policy's reservation updates at the last look.
    last_updates: u64,
    reservation_log: VecDeque<ReservationEvent>,
    stats_cfg: Option<StatsConfig>,
    stats: Option<StatsLines>,
    declared: Declared,
    series: Option<Series>,
    snapshots: Option<Snapshots>,
}

impl Observer {
    /// An observer of `type_names` on `workers` workers, printing statistics
    /// lines per `stats`.
    pub(crate) fn new(type_names: Vec<String>, workers: usize, stats: Option<StatsConfig>) -> Self {
        Self {
            recorder: Recorder::new(type_names.iter().cloned()),
            by_type: vec![TypeCounts::default(); type_names.len()],
            type_names,
            workers,
            base: 0,
            counts: RequestCounts::default(),
            measured_arrived: 0,
            last_updates: 0,
            reservation_log: VecDeque::with_capacity(RESERVATION_LOG_CAPACITY),
            stats_cfg: stats,
            stats: None,
            declared: Declared::default(),
            series: None,
            snapshots: None,
        }
    }

    /// The request types' names.
    pub(crate) fn type_names(&self) -> &[String] {
        &self.type_names
    }

    /// The outcome counters so far.
    pub(crate) fn counts(&self) -> &RequestCounts {
        &self.counts
    }

    /// Records a time series with windows of `window_ns` from the time zero.
    pub(crate) fn record_series(&mut self, window_ns: u64) {
        self.series = Some(Series {
            recorder: SeriesRecorder::new(self.type_names.iter().cloned(), window_ns.max(1)),
            view: Vec::new(),
            end_ns: 0,
        });
    }

    /// Sets each type's declared mean service time (`None`: not declared).
    pub(crate) fn set_declared_service(&mut self, means_ns: &[Option<f64>]) {
        self.declared.ns = means_ns
            .iter()
            .map(|m| m.filter(|v| v.is_finite() && *v > 0.0).unwrap_or(0.0))
            .collect();
        self.declared.warned = vec![false; means_ns.len()];
    }

    /// No warning about declared service times from now on.
    pub(crate) fn silence_declared_warnings(&mut self) {
        self.declared.warned.fill(true);
    }

    /// Sets the time zero (before the first request).
    pub(crate) fn set_base(&mut self, base_ns: u64) {
        self.base = base_ns;
        self.declared.next_check = base_ns.saturating_add(SERVICE_CHECK_EVERY_NS);
        self.stats = self.stats_cfg.map(|cfg| StatsLines {
            cfg,
            next: base_ns.saturating_add(cfg.interval.as_nanos() as u64),
            last: (base_ns, 0, 0.0),
        });
    }

    /// The mean service time of the completed requests of `type_id` (ns),
    /// if any completed.
    #[inline]
    pub(crate) fn mean_service_ns(&self, type_id: TypeId) -> Option<u64> {
        let c = self.by_type.get(type_id as usize)?;
        (c.completed > 0).then(|| c.service_ns / c.completed)
    }

    /// A valid request of `true_type` arrived.
    #[inline]
    pub(crate) fn arrived(&mut self, true_type: TypeId, measured: bool, count: u16) {
        let n = u64::from(count);
        self.counts.arrived += n;
        self.measured_arrived += u64::from(measured) * n;
        self.by_type[true_type as usize].arrived += n;
    }

    /// An arrived request of `true_type` was refused.
    #[inline]
    pub(crate) fn shed(&mut self, true_type: TypeId, measured: bool, count: u16) {
        self.counts.shed += u64::from(count);
        self.by_type[true_type as usize].shed += u64::from(count);
        if measured {
            for _ in 0..count {
                self.recorder.record_drop(true_type as usize);
            }
        }
    }

    /// The admitted request in `slot` expired: its turn came after its
    /// deadline, and the worker answered it OVERLOADED unrun. Counted shed
    /// (each of a job's requests), and as a drop in the measured window.
    #[inline]
    pub(crate) fn expired(&mut self, slot: &Slot) {
        self.shed(slot.true_type, slot.measured, slot.count.max(1));
        self.counts.expired += u64::from(slot.count.max(1));
    }

    /// An arrived request was admitted.
    #[inline]
    pub(crate) fn admitted(&mut self, count: u16) {
        self.counts.admitted += u64::from(count);
    }

    /// The request in `slot` finished as `d` says, after `service_ns` (all
    /// its segments): counted, and its latency recorded (from the slot's
    /// scheduled time to the handler's return, both on the run's one clock).
    #[inline]
    ///
    /// A job of several requests ([`Slot::count`]) counts each: each left
    /// in the job's one reply, so each has its latency, and its service
    /// time is its share of the job's; each failed one
    /// ([`Done::failed_in_job`]) counts as the refusal it was answered with.
    pub(crate) fn completed(&mut self, slot: &Slot, d: &Done, service_ns: u64) {
        let t = slot.true_type as usize;
        let n = u64::from(slot.count.max(1));
        // Requests answered BAD_REQUEST and HANDLER_ERROR.
        let (bad, failed) = if slot.count > 1 {
            (u64::from(d.failed_in_job.0), u64::from(d.failed_in_job.1))
        } else {
            (u64::from(d.refused), u64::from(!d.ok && !d.refused))
        };
        let good = n.saturating_sub(bad + failed);
        let sent = u64::from(d.sent);
        let tc = &mut self.by_type[t];
        tc.completed += n;
        tc.service_ns += service_ns;
        tc.ok += good * sent;
        tc.handler_errors += failed * sent;
        tc.bad_bodies += bad * sent;
        tc.unsent += n * (1 - sent);
        self.counts.completed += n;
        self.counts.handler_errors += failed;
        self.counts.no_fiber += n * u64::from(d.no_fiber);
        self.counts.bad_bodies += bad;
        self.counts.unsent += n * (1 - sent);
        let each_ns = service_ns / n;
        let latency = d.finished_ns.saturating_sub(slot.scheduled_ns);
        // A failed handler or an answer that never left is an error
        // outcome, not a latency sample.
        let served = good * sent;
        if slot.measured {
            for _ in 0..served {
                self.recorder.record(t, latency, each_ns);
            }
            for _ in served..n {
                self.recorder.record_error(t);
            }
        }
        // The series is a timeline: the warm-up belongs to it.
        if let Some(series) = self.series.as_mut() {
            for _ in 0..served {
                series.recorder.record(
                    t,
                    d.finished_ns.saturating_sub(self.base),
                    latency,
                    each_ns,
                );
            }
        }
    }

    /// The drain deadline passed: everything admitted and neither finished
    /// nor shed is now stranded.
    #[cold]
    ///
    /// Returns how many requests that is (a job may carry several).
    pub(crate) fn stranded(&mut self) -> u64 {
        let mut stranded = 0;
        for c in &mut self.by_type {
            c.stranded = c.arrived - c.shed - c.completed;
            stranded += c.stranded;
        }
        self.counts.stranded = stranded;
        stranded
    }

    /// End-of-pass bookkeeping at `now`: the series' end, reservation changes
    /// (only passes that did work can change it), the statistics line and
    /// the declared-service check when due.
    pub(crate) fn end_of_pass(&mut self, now: u64, worked: bool, policy: &dyn Policy, load: Load) {
        if let Some(series) = self.series.as_mut() {
            series.end_ns = now.saturating_sub(self.base);
        }
        if worked {
            let updates = policy.stats().reservation_updates;
            if updates != self.last_updates {
                self.last_updates = updates;
                self.log_reservation(now, updates, policy);
            }
        }
        if let Some(s) = &mut self.stats
            && now >= s.next
        {
            s.next = s.next.saturating_add(s.cfg.interval.as_nanos() as u64);
            self.print_stats(now, policy, load);
        }
        if now >= self.declared.next_check && !self.declared.ns.is_empty() {
            self.declared.next_check = now.saturating_add(SERVICE_CHECK_EVERY_NS);
            self.check_service();
        }
    }

    /// Warns, once per type, of a measured mean service time off from the
    /// declared one by more than [`SERVICE_OFF_FACTOR`].
    #[cold]
    fn check_service(&mut self) {
        for (i, c) in self.by_type.iter().enumerate() {
            let declared = self.declared.ns.get(i).copied().unwrap_or(0.0);
            let measured = c.service_ns as f64 / c.completed.max(1) as f64;
            let Some(ratio) = service_off(measured, declared, c.completed) else {
                continue;
            };
            if self.declared.warned[i] {
                continue;
            }
            self.declared.warned[i] = true;
            eprintln!(
                "warning: {}'s measured mean service time is {:.2} us, {ratio:.2}x the {:.2} us the workload declares (more than {SERVICE_OFF_FACTOR}x off): a load computed from the declared times (--load) is not the load the workers carry, and the measured utilization in the statistics and the summary is; measure the real times with `psp profile` and use the workload file it writes",
                self.type_names[i],
                measured / 1e3,
                declared / 1e3,
            );
        }
    }

    #[cold]
    fn log_reservation(&mut self, now: u64, updates: u64, policy: &dyn Policy) {
        let Some(r) = policy.reservation() else {
            return;
        };
        let at_s = now.saturating_sub(self.base) as f64 / 1e9;
        if let Some(series) = self.series.as_mut() {
            series.view.clear();
            series.view.extend(r.worker_counts());
            series.recorder.close_windows_until(
                now.saturating_sub(self.base),
                Some(ReservationView {
                    per_type: &series.view,
                    text: &r.to_string(),
                }),
            );
        }
        // Updates are rare: reporting each one is not hot-path work.
        match self.stats_cfg {
            Some(StatsConfig { json: true, .. }) => eprintln!(
                "{{\"event\":\"reservation_update\",\"t_s\":{at_s:.3},\"reservation\":\"{r}\"}}"
            ),
            Some(_) => eprintln!("[{at_s:7.3}s] reservation update #{updates}: {r}"),
            None => {}
        }
        if self.reservation_log.len() == RESERVATION_LOG_CAPACITY {
            self.reservation_log.pop_front();
        }
        self.reservation_log.push_back(ReservationEvent {
            at_s,
            reservation: r.clone(),
        });
    }

    /// Since the previous statistics line (and makes this one the previous):
    /// the workers' measured utilization, and the utilization the declared
    /// service times of the same completions imply (`None` without them).
    fn interval_utilization(&mut self, now: u64) -> (f64, Option<f64>) {
        let busy: u64 = self.by_type.iter().map(|c| c.service_ns).sum();
        let declared: f64 = self
            .by_type
            .iter()
            .zip(&self.declared.ns)
            .map(|(c, d)| c.completed as f64 * d)
            .sum();
        let Some(s) = &mut self.stats else {
            return (0.0, None);
        };
        let (at, last_busy, last_declared) = s.last;
        s.last = (now, busy, declared);
        let capacity = (now.saturating_sub(at) as f64 * self.workers as f64).max(1.0);
        let measured = busy.saturating_sub(last_busy) as f64 / capacity;
        let declared =
            (!self.declared.ns.is_empty()).then(|| (declared - last_declared).max(0.0) / capacity);
        (measured, declared)
    }

    #[cold]
    fn print_stats(&mut self, now: u64, policy: &dyn Policy, load: Load) {
        let Some(cfg) = self.stats_cfg else {
            return;
        };
        let t = now.saturating_sub(self.base) as f64 / 1e9;
        let (util, declared) = self.interval_utilization(now);
        let res = policy
            .reservation()
            .map(|r| r.to_string())
            .unwrap_or_else(|| "none (c-FCFS warm-up or not DARC)".into());
        let c = &self.counts;
        let (queued, in_flight, updates) = (load.queued, load.in_flight, self.last_updates);
        let mut per_type = String::new();
        for (i, name) in self.type_names.iter().enumerate() {
            let q = policy.queued_by_type(i as TypeId);
            let TypeCounts {
                arrived,
                completed,
                shed,
                ..
            } = self.by_type[i];
            if cfg.json {
                let q = q.map_or("null".to_string(), |q| q.to_string());
                let sep = if i > 0 { "," } else { "" };
                per_type.push_str(&format!(
                    "{sep}{{\"name\":\"{name}\",\"arrived\":{arrived},\"completed\":{completed},\"shed\":{shed},\"queued\":{q}}}"
                ));
            } else {
                let q = q.map_or(String::new(), |q| format!(" queued {q}"));
                per_type.push_str(&format!(" | {name} {arrived}/{completed}/{shed}{q}"));
            }
        }
        if cfg.json {
            let declared = declared.map_or("null".to_string(), |d| format!("{d:.4}"));
            eprintln!(
                "{{\"t_s\":{t:.3},\"arrived\":{},\"completed\":{},\"shed\":{},\"queued\":{queued},\"in_flight\":{in_flight},\"reservation_updates\":{updates},\"utilization\":{util:.4},\"declared_utilization\":{declared},\"types\":[{per_type}],\"reservation\":\"{res}\"}}",
                c.arrived, c.completed, c.shed
            );
        } else {
            let declared = declared.map_or(String::new(), |d| {
                format!(" (declared service times: {:.1}%)", d * 100.0)
            });
            eprintln!(
                "[{t:7.3}s] arrived/completed/shed {}/{}/{} queued {queued} in flight {in_flight} updates {updates} utilization {:.1}%{declared}{per_type} || {res}",
                c.arrived,
                c.completed,
                c.shed,
                util * 100.0
            );
        }
    }

    /// Publishes live snapshots into `publisher` from `now` on, every
    /// [`PUBLISH_INTERVAL`]; the recorder keeps what the snapshots' digests
    /// need from then on (allocated now, once).
    ///
    /// # Panics
    /// When `publisher` was made for another number of request types.
    pub(crate) fn publish_snapshots(&mut self, mut publisher: SnapshotPublisher, now: u64) {
        assert_eq!(
            publisher.types(),
            self.type_names.len(),
            "a snapshot channel for another number of request types"
        );
        self.recorder.track_live_digests();
        publisher.next_ns = now;
        self.snapshots = Some(Snapshots {
            publisher,
            digests: vec![Default::default(); self.type_names.len()],
            next_quantiles: 0,
        });
    }

    /// Whether a snapshot is due (never without a publisher).
    #[inline]
    pub(crate) fn snapshot_due(&self, now: u64) -> bool {
        matches!(&self.snapshots, Some(s) if now >= s.publisher.next_ns)
    }

    /// Writes the current state into the publisher's back buffer, in place,
    /// and publishes it ([`DispatchCore::publish_snapshot`](crate::DispatchCore::publish_snapshot)).
    #[cold]
    pub(crate) fn publish_snapshot(
        &mut self,
        now: u64,
        finished: bool,
        policy: &dyn Policy,
        load: Load,
        workers: WorkerView<'_>,
        fill_front: impl FnOnce(&mut [u64]),
    ) {
        let Some(snaps) = &mut self.snapshots else {
            return;
        };
        let p = &mut snaps.publisher;
        p.seq += 1;
        p.next_ns = now.saturating_add(PUBLISH_INTERVAL.as_nanos() as u64);
        let seq = p.seq;
        let fresh = snaps.next_quantiles;
        snaps.next_quantiles = (fresh + 1) % snaps.digests.len().max(1);
        let reservation = policy.reservation();
        let s = p.buffer();
        s.seq = seq;
        s.uptime_ns = now.saturating_sub(self.base);
        s.finished = finished;
        s.counts = self.counts;
        s.queued = load.queued as u64;
        s.in_flight = load.in_flight as u64;
        s.reservation_updates = policy.stats().reservation_updates;
        s.has_reservation = reservation.is_some();
        for (i, (((out, c), rec), (latency, service))) in s
            .types
            .iter_mut()
            .zip(&self.by_type)
            .zip(self.recorder.types())
            .zip(&mut snaps.digests)
            .enumerate()
        {
            let t = i as TypeId;
            out.arrived = c.arrived;
            out.ok = c.ok;
            out.handler_errors = c.handler_errors;
            out.bad_bodies = c.bad_bodies;
            out.unsent = c.unsent;
            out.shed = c.shed;
            out.stranded = c.stranded;
            out.busy_ns = c.service_ns;
            out.queued = policy.queued_by_type(t).map(|q| q as u64);
            out.reserved_workers = reservation.map(|r| r.group(t).reserved.len() as u32);
            out.group = reservation.map(|r| r.group_of[i]);
            let quantiles = finished || i == fresh;
            rec.latency_digest(latency, quantiles);
            rec.service_digest(service, quantiles);
            out.latency = *latency;
            out.service = *service;
        }
        fill_workers(s, reservation, workers);
        fill_front(&mut s.front);
        p.publish();
    }

    /// The final counters and records, with the policy's and the
    /// executor's (`reclaims`).
    pub(crate) fn finish(
        self,
        policy: &dyn Policy,
        reclaims: Option<ReclaimTimes>,
    ) -> DispatcherReport {
        DispatcherReport {
            recorder: self.recorder,
            counts: self.counts,
            measured_arrived: self.measured_arrived,
            reservation_log: self.reservation_log.into(),
            policy_stats: policy.stats(),
            reservation: policy.reservation().cloned(),
            series: self.series.map(|s| s.recorder.finish(s.end_ns)),
            completed_by_type: self.by_type.iter().map(|c| c.completed).collect(),
            service_ns_by_type: self.by_type.iter().map(|c| c.service_ns).collect(),
            shed_by_type: self.by_type.iter().map(|c| c.shed).collect(),
            reclaims,
        }
    }
}
