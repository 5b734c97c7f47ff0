//! What `psp top` shows, read from a server's `/metrics`: one [`Scrape`] per
//! look (every series the view needs, by type and by worker), and the
//! [`Top`] that keeps the last two and turns their differences into rates and
//! events (reservation changes, preemptions, sheds).
//!
//! Pure: it reads text and keeps numbers; fetching and drawing are the
//! caller's. The metric names it reads are the exporter's (docs/metrics.md).

use std::collections::VecDeque;

use psp_net::scrape::{Sample, ScrapeError, parse_samples};

/// Events kept (the most recent): the pane shows the newest that fit.
pub const EVENT_CAPACITY: usize = 256;

/// One request type as one scrape shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TypeRow {
    /// The type's name (the `type` label).
    pub name: String,
    /// Valid requests offered to the dispatcher, since the start.
    pub arrived: f64,
    /// Served and answered with success, since the start.
    pub ok: f64,
    /// Refused (OVERLOADED, or unanswered past the reply budget).
    pub shed: f64,
    /// Left at the drain deadline, never answered.
    pub stranded: f64,
    /// Latency at the quantiles 0.5, 0.99, 0.999 (seconds; since the start).
    pub latency_s: [Option<f64>; 3],
    /// Waiting in the policy's queue of the type (`None`: no queue per type).
    pub queued: Option<f64>,
    /// Workers reserved for the type's group (`None`: no reservation).
    pub reserved: Option<f64>,
}

/// One worker as one scrape shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkerRow {
    /// Whether it runs a request (`None`: the server does not say).
    pub busy: Option<bool>,
    /// The type of the request it runs.
    pub running: Option<String>,
    /// The types of the group it is reserved for, in type order.
    pub reserved_for: Vec<String>,
    /// One of the reservation's spillway workers.
    pub spillway: bool,
    /// Runs a longer group's request while reserved for a shorter one.
    pub lent: bool,
    /// Runs a shorter group's request while reserved for a longer one.
    pub stealing: bool,
    /// Requests preempted on it, since the start.
    pub preemptions: f64,
}

/// Everything one scrape says that the view shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    /// The server's uptime (seconds).
    pub uptime_s: f64,
    /// Snapshots the dispatcher published.
    pub snapshots: f64,
    /// Request types, in the server's type order.
    pub types: Vec<TypeRow>,
    /// Workers, in worker order.
    pub workers: Vec<WorkerRow>,
    /// Whether a reservation is in force.
    pub reservation_in_force: bool,
    /// Reservation updates applied, since the start.
    pub reservation_updates: f64,
    /// Requests preempted, all workers, since the start.
    pub preemptions: f64,
    /// Requests queued or running.
    pub in_flight: f64,
    /// Measured utilization since the start.
    pub utilization: Option<f64>,
}

/// Why a text is not what `psp top` can show.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Not Prometheus text.
    #[error(transparent)]
    Scrape(#[from] ScrapeError),
    /// Prometheus text, but not a `psp serve`'s.
    #[error(
        "no psp_snapshots_total or psp_workers: not the /metrics of a psp serve (its --metrics address?)"
    )]
    NotPsp,
}

/// The row of type `name`, made when first seen (types keep the order in
/// which the exposition names them: the server's type order).
fn type_row<'a>(types: &'a mut Vec<TypeRow>, name: &str) -> &'a mut TypeRow {
    match types.iter().position(|t| t.name == name) {
        Some(i) => &mut types[i],
        None => {
            types.push(TypeRow {
                name: name.to_string(),
                ..TypeRow::default()
            });
            types.last_mut().expect("just pushed")
        }
    }
}

/// The quantile labels of `psp_latency_quantile_seconds`, in column order.
const QUANTILES: [&str; 3] = ["0.5", "0.99", "0.999"];

impl Scrape {
    /// Reads an exposition.
    ///
    /// # Errors
    /// Not Prometheus text, or not a `psp serve`'s (no `psp_snapshots_total`
    /// or `psp_workers`).
    pub fn parse(text: &str) -> Result<Scrape, ReadError> {
        let samples = parse_samples(text)?;
        let mut s = Scrape::default();
        let (mut seen_snapshots, mut workers) = (false, None);
        for x in &samples {
            match x.name {
                "psp_snapshots_total" => {
                    seen_snapshots = true;
                    s.snapshots = x.value;
                }
                "psp_workers" => workers = Some(x.value.clamp(0.0, 4096.0) as usize),
                _ => {}
            }
        }
        let Some(workers) = workers.filter(|_| seen_snapshots) else {
            return Err(ReadError::NotPsp);
        };
        s.workers = vec![WorkerRow::default(); workers];
        for x in &samples {
            s.read_global(x);
            if let Some(t) = x.label("type").filter(|_| x.label("worker").is_none()) {
                read_type(type_row(&mut s.types, t), x);
            }
            if let Some(w) = x.label("worker").and_then(|w| w.parse::<usize>().ok())
                && let Some(row) = s.workers.get_mut(w)
            {
                read_worker(row, x);
            }
        }
        Ok(s)
    }

    fn read_global(&mut self, x: &Sample<'_>) {
        let on = x.value != 0.0;
        match x.name {
            "psp_uptime_seconds" => self.uptime_s = x.value,
            "psp_reservation_in_force" => self.reservation_in_force = on,
            "psp_reservation_updates_total" => self.reservation_updates = x.value,
            "psp_preemptions_total" => self.preemptions = x.value,
            "psp_in_flight_requests" => self.in_flight = x.value,
            "psp_utilization" => self.utilization = Some(x.value),
            _ => {}
        }
    }

    /// Type `name`'s row, if the scrape has it.
    pub fn type_named(&self, name: &str) -> Option<&TypeRow> {
        self.types.iter().find(|t| t.name == name)
    }

    /// The reservation in force, as "types → workers" per group, in the order
    /// the workers come (`None`: no worker is reserved).
    pub fn reservation_summary(&self) -> Option<String> {
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        for (w, row) in self.workers.iter().enumerate() {
            if row.reserved_for.is_empty() {
                continue;
            }
            let key = row.reserved_for.join("+");
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, ws)) => ws.push(w),
                None => groups.push((key, vec![w])),
            }
        }
        (!groups.is_empty()).then(|| {
            groups
                .iter()
                .map(|(k, ws)| format!("{k} → {}", worker_list(ws)))
                .collect::<Vec<_>>()
                .join("  ")
        })
    }
}

/// `w0,w2-w4`: workers, with runs shortened.
pub fn worker_list(ws: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ws.len() {
        let mut j = i;
        while j + 1 < ws.len() && ws[j + 1] == ws[j] + 1 {
            j += 1;
        }
        out.push(match j - i {
            0 => format!("w{}", ws[i]),
            1 => format!("w{},w{}", ws[i], ws[j]),
            _ => format!("w{}-w{}", ws[i], ws[j]),
        });
        i = j + 1;
    }
    out.join(",")
}

fn read_type(row: &mut TypeRow, x: &Sample<'_>) {
    match (x.name, x.label("outcome"), x.label("quantile")) {
        ("psp_requests_arrived_total", ..) => row.arrived = x.value,
        ("psp_requests_total", Some("ok"), _) => row.ok = x.value,
        ("psp_requests_total", Some("shed"), _) => row.shed = x.value,
        ("psp_requests_total", Some("stranded"), _) => row.stranded = x.value,
        ("psp_latency_quantile_seconds", _, Some(q)) => {
            if let Some(i) = QUANTILES.iter().position(|&l| l == q) {
                row.latency_s[i] = Some(x.value);
            }
        }
        ("psp_queue_length", ..) => row.queued = Some(x.value),
        ("psp_reserved_workers", ..) => row.reserved = Some(x.value),
        _ => {}
    }
}

fn read_worker(row: &mut WorkerRow, x: &Sample<'_>) {
    let on = x.value != 0.0;
    match x.name {
        "psp_worker_busy" => row.busy = Some(on),
        "psp_worker_running" if on => row.running = x.label("type").map(str::to_string),
        "psp_worker_reserved_for" if on => {
            if let Some(t) = x.label("type") {
                row.reserved_for.push(t.to_string());
            }
        }
        "psp_worker_spillway" => row.spillway = on,
        "psp_worker_lent" => row.lent = on,
        "psp_worker_stealing" => row.stealing = on,
        "psp_worker_preemptions_total" => row.preemptions = x.value,
        _ => {}
    }
}

/// What an event is about (the view colours them by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// The reservation changed.
    Reservation,
    /// Requests were preempted on a worker.
    Preemption,
    /// Requests of a type were shed.
    Shed,
    /// The server went away, or came back.
    Connection,
}

/// Something that happened between two scrapes.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The server's uptime at the later scrape (seconds; `None`: no scrape).
    pub at_s: Option<f64>,
    /// What it is about.
    pub kind: EventKind,
    /// What happened.
    pub text: String,
}

/// The live view's state: the latest scrape, the one before, and the events
/// their differences made.
#[derive(Debug, Clone, Default)]
pub struct Top {
    /// Where the scrapes come from (shown in the title).
    pub source: String,
    /// The latest scrape.
    pub now: Option<Scrape>,
    /// The one before it.
    pub before: Option<Scrape>,
    /// The most recent events, oldest first (at most [`EVENT_CAPACITY`]).
    pub events: VecDeque<Event>,
    /// Why the latest look failed, if it did (the view keeps the last scrape).
    pub error: Option<String>,
}

impl Top {
    /// A view of `source`, nothing scraped yet.
    pub fn new(source: impl Into<String>) -> Self {
        Top {
            source: source.into(),
            ..Top::default()
        }
    }

    /// Takes a new scrape: the events since the previous one are logged.
    pub fn update(&mut self, s: Scrape) {
        if self.error.take().is_some() {
            self.push(
                Some(s.uptime_s),
                EventKind::Connection,
                "scrapes answer again".into(),
            );
        }
        if let Some(prev) = &self.now {
            // A restarted server starts its counters over: no deltas across.
            if s.uptime_s >= prev.uptime_s {
                for e in events_between(prev, &s) {
                    self.push(Some(s.uptime_s), e.0, e.1);
                }
            }
        } else if let Some(r) = s.reservation_summary() {
            self.push(
                Some(s.uptime_s),
                EventKind::Reservation,
                format!("reservation in force: {r}"),
            );
        }
        self.before = self.now.replace(s);
    }

    /// A look that failed (the last scrape stays on screen).
    pub fn failed(&mut self, why: String) {
        if self.error.is_none() {
            let at = self.now.as_ref().map(|s| s.uptime_s);
            self.push(at, EventKind::Connection, format!("scrape failed: {why}"));
        }
        self.error = Some(why);
    }

    fn push(&mut self, at_s: Option<f64>, kind: EventKind, text: String) {
        if self.events.len() == EVENT_CAPACITY {
            self.events.pop_front();
        }
        self.events.push_back(Event { at_s, kind, text });
    }

    /// Seconds of server time between the two latest scrapes (`None` before
    /// the second, or when no time passed).
    pub fn interval_s(&self) -> Option<f64> {
        let (a, b) = (self.before.as_ref()?, self.now.as_ref()?);
        let dt = b.uptime_s - a.uptime_s;
        (dt > 0.0).then_some(dt)
    }

    /// Type `name`'s arrival rate between the two latest scrapes (req/s).
    pub fn rate(&self, name: &str) -> Option<f64> {
        let dt = self.interval_s()?;
        let a = self.before.as_ref()?.type_named(name)?;
        let b = self.now.as_ref()?.type_named(name)?;
        Some((b.arrived - a.arrived).max(0.0) / dt)
    }

    /// Type `name`'s sheds between the two latest scrapes, per second.
    pub fn shed_rate(&self, name: &str) -> Option<f64> {
        let dt = self.interval_s()?;
        let a = self.before.as_ref()?.type_named(name)?;
        let b = self.now.as_ref()?.type_named(name)?;
        Some((b.shed - a.shed).max(0.0) / dt)
    }
}

/// What changed from `a` to `b`: the reservation, preemptions by worker,
/// sheds by type.
fn events_between(a: &Scrape, b: &Scrape) -> Vec<(EventKind, String)> {
    let mut out = Vec::new();
    let updates = b.reservation_updates - a.reservation_updates;
    let moved = a
        .workers
        .iter()
        .zip(&b.workers)
        .any(|(x, y)| x.reserved_for != y.reserved_for);
    if updates > 0.0 || moved {
        let now = b.reservation_summary().unwrap_or_else(|| "none".into());
        let n = if updates > 1.0 {
            format!(" ({updates} updates)")
        } else {
            String::new()
        };
        let verb = if moved { "moved" } else { "kept" };
        out.push((
            EventKind::Reservation,
            format!("reservation #{}{n} {verb}: {now}", b.reservation_updates),
        ));
    }
    for (w, (x, y)) in a.workers.iter().zip(&b.workers).enumerate() {
        let n = y.preemptions - x.preemptions;
        if n > 0.0 {
            let now = match &y.running {
                Some(t) => format!(", now runs {t}"),
                None => String::new(),
            };
            let s = if n == 1.0 { "" } else { "s" };
            out.push((
                EventKind::Preemption,
                format!("w{w}: {n} preemption{s}{now}"),
            ));
        }
    }
    for y in &b.types {
        let Some(x) = a.type_named(&y.name) else {
            continue;
        };
        let n = y.shed - x.shed;
        if n > 0.0 {
            out.push((EventKind::Shed, format!("{}: {n} shed", y.name)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
psp_requests_arrived_total{type=\"A\"} 100
psp_requests_total{type=\"A\",outcome=\"ok\"} 90
psp_requests_total{type=\"A\",outcome=\"shed\"} 4
psp_latency_quantile_seconds{type=\"A\",quantile=\"0.99\"} 0.002
psp_queue_length{type=\"A\"} 3
psp_workers 2
psp_snapshots_total 10
psp_uptime_seconds 1.0
psp_worker_busy{worker=\"0\"} 1
psp_worker_running{worker=\"0\",type=\"A\"} 1
psp_worker_reserved_for{worker=\"1\",type=\"A\"} 1
psp_worker_preemptions_total{worker=\"1\"} 2
# EOF
";

    #[test]
    fn a_scrape_reads_types_and_workers() {
        let s = Scrape::parse(TEXT).unwrap();
        assert_eq!(s.types.len(), 1);
        let a = &s.types[0];
        assert_eq!((a.arrived, a.ok, a.shed), (100.0, 90.0, 4.0));
        assert_eq!(a.latency_s, [None, Some(0.002), None]);
        assert_eq!(a.queued, Some(3.0));
        assert_eq!(s.workers.len(), 2);
        assert_eq!(s.workers[0].running.as_deref(), Some("A"));
        assert_eq!(s.workers[1].reserved_for, ["A"]);
        assert_eq!(s.workers[1].preemptions, 2.0);
        assert_eq!(s.reservation_summary().unwrap(), "A → w1");
    }

    #[test]
    fn text_that_is_not_a_psp_servers_is_refused() {
        assert!(matches!(
            Scrape::parse("up 1\n# EOF\n"),
            Err(ReadError::NotPsp)
        ));
        assert!(matches!(Scrape::parse("<html>"), Err(ReadError::Scrape(_))));
    }

    #[test]
    fn deltas_make_rates_and_events() {
        let mut top = Top::new("test");
        top.update(Scrape::parse(TEXT).unwrap());
        let later = TEXT
            .replace(
                "arrived_total{type=\"A\"} 100",
                "arrived_total{type=\"A\"} 600",
            )
            .replace("outcome=\"shed\"} 4", "outcome=\"shed\"} 9")
            .replace("uptime_seconds 1.0", "uptime_seconds 1.5")
            .replace("total{worker=\"1\"} 2", "total{worker=\"1\"} 3")
            .replace("reserved_for{worker=\"1\"", "reserved_for{worker=\"0\"");
        top.update(Scrape::parse(&later).unwrap());
        assert_eq!(top.rate("A"), Some(1000.0));
        assert_eq!(top.shed_rate("A"), Some(10.0));
        let texts: Vec<&str> = top.events.iter().map(|e| e.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "reservation in force: A → w1",
                "reservation #0 moved: A → w0",
                "w1: 1 preemption",
                "A: 5 shed"
            ]
        );
        top.failed("gone".into());
        top.failed("gone".into());
        assert_eq!(top.events.len(), 5, "one event per outage");
    }

    #[test]
    fn worker_lists_shorten_runs() {
        assert_eq!(worker_list(&[0, 1, 2, 5, 7, 8]), "w0-w2,w5,w7,w8");
        assert_eq!(worker_list(&[]), "");
    }
}
