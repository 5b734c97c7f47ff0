//! What Redis users read to find their big commands: per command, calls,
//! time and failures (`INFO commandstats`), and the commands slower than a
//! bound (`SLOWLOG GET/LEN/RESET`, with `slowlog-log-slower-than` and
//! `slowlog-max-len` in `CONFIG GET/SET`), in Redis 7's formats.
//!
//! The counters are the database's ([`Db::commands`]): a command's run is
//! timed around its execution (its lock waits included, as Redis's time
//! includes nothing but the command itself). Recording takes a few
//! atomics; only a slow command takes the log's lock.

use std::collections::VecDeque;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

use super::{COMMANDS, Fail, Reply, Res, int_arg, unknown_subcommand};
use crate::db::Db;

/// Arguments of a slow log entry kept at most (Redis's).
const LOGGED_ARGS: usize = 32;
/// Bytes of an argument kept in a slow log entry (Redis's).
const LOGGED_BYTES: usize = 128;
/// The slow log's longest length (`CONFIG SET slowlog-max-len`).
pub const MAX_SLOWLOG_LEN: i64 = 1 << 20;

/// Counter stripes: each thread counts in its own (a cache line per
/// command and stripe), so two workers running the same command never
/// contend for one counter; a read sums the stripes.
const STRIPES: usize = 16;

/// One command's counters in one stripe: calls, µs, failed calls, on a
/// cache line of their own.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Counters([AtomicU64; 3]);

/// This thread's stripe.
fn stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    STRIPE.with(|s| *s)
}

/// The database's command statistics.
#[derive(Debug)]
pub struct CommandStats {
    /// Per command of the table (by index) and stripe.
    counters: OnceLock<Box<[Counters]>>,
    slowlog: Mutex<VecDeque<SlowEntry>>,
    next_id: AtomicU64,
    /// µs; negative: log nothing; 0: log everything (Redis's default 10 ms).
    slower_than_us: AtomicI64,
    max_len: AtomicUsize,
    /// The latency monitor's threshold, ms (0: off, Redis's default).
    latency_threshold_ms: AtomicU64,
    /// The "command" event's samples (LATENCY LATEST / HISTORY).
    latency: Mutex<LatencyEvent>,
    /// Per command of the table, a histogram of its run times
    /// (`INFO latencystats`): [`LATENCY_BUCKETS`] counters each.
    histograms: OnceLock<Box<[AtomicU64]>>,
}

/// Buckets of a run-time histogram: exact below 8 µs, then 8 per power of
/// two (within 12.5%), up to 2^41 µs.
const LATENCY_BUCKETS: usize = 320;

/// The bucket of `us` µs.
fn bucket(us: u64) -> usize {
    if us < 8 {
        return us as usize;
    }
    let e = 63 - us.leading_zeros() as usize; // floor(log2), >= 3
    let sub = ((us >> (e - 3)) & 7) as usize;
    (8 * (e - 2) + sub).min(LATENCY_BUCKETS - 1)
}

/// The largest µs value of bucket `i` (what a percentile reports).
fn bucket_top(i: usize) -> u64 {
    if i < 8 {
        return i as u64;
    }
    let (e, sub) = (i / 8 + 2, (i % 8) as u64);
    ((8 + sub + 1) << (e - 3)) - 1
}

/// One latency event's record, as Redis's latency monitor keeps it: a
/// sample per second (the worst of that second), the newest
/// [`LATENCY_SAMPLES`], and the worst ever.
#[derive(Debug, Default)]
struct LatencyEvent {
    /// (Unix s, ms), oldest first.
    samples: VecDeque<(u64, u64)>,
    max_ms: u64,
}

/// Samples a latency event keeps (Redis's `LATENCY_TS_LEN`).
const LATENCY_SAMPLES: usize = 160;

#[derive(Debug, Clone)]
struct SlowEntry {
    id: u64,
    unix_s: u64,
    us: u64,
    args: Vec<Vec<u8>>,
}

impl Default for CommandStats {
    fn default() -> Self {
        Self {
            counters: OnceLock::new(),
            slowlog: Mutex::new(VecDeque::new()),
            next_id: AtomicU64::new(0),
            slower_than_us: AtomicI64::new(10_000),
            max_len: AtomicUsize::new(128),
            latency_threshold_ms: AtomicU64::new(0),
            latency: Mutex::new(LatencyEvent::default()),
            histograms: OnceLock::new(),
        }
    }
}

impl CommandStats {
    fn counters(&self) -> &[Counters] {
        self.counters.get_or_init(|| {
            (0..COMMANDS.len() * STRIPES)
                .map(|_| Counters::default())
                .collect()
        })
    }

    fn histograms(&self) -> &[AtomicU64] {
        self.histograms.get_or_init(|| {
            (0..COMMANDS.len() * LATENCY_BUCKETS)
                .map(|_| AtomicU64::new(0))
                .collect()
        })
    }

    /// Command `index`'s run times at `quantiles` (µs, each the top of
    /// its bucket); `None`: it never ran.
    fn percentiles<const N: usize>(&self, index: usize, quantiles: [f64; N]) -> Option<[u64; N]> {
        let h = &self.histograms()[index * LATENCY_BUCKETS..(index + 1) * LATENCY_BUCKETS];
        let counts: Vec<u64> = h.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        Some(quantiles.map(|q| {
            let rank = ((q * total as f64).ceil() as u64).max(1);
            let mut seen = 0;
            for (i, &c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    return bucket_top(i);
                }
            }
            bucket_top(LATENCY_BUCKETS - 1)
        }))
    }

    /// Command `index`'s counters summed over the stripes.
    fn totals(&self, index: usize) -> [u64; 3] {
        let mut t = [0; 3];
        for c in &self.counters()[index * STRIPES..(index + 1) * STRIPES] {
            for (sum, v) in t.iter_mut().zip(&c.0) {
                *sum += v.load(Ordering::Relaxed);
            }
        }
        t
    }

    /// Command `index` of the table, `name` with `args`, ran for `us` µs;
    /// `failed`: it answered an error. Allocates only for a slow one.
    pub(super) fn record(
        &self,
        index: usize,
        us: u64,
        failed: bool,
        (name, args): (&[u8], &[&[u8]]),
    ) {
        let c = &self.counters()[index * STRIPES + stripe()].0;
        c[0].fetch_add(1, Ordering::Relaxed);
        c[1].fetch_add(us, Ordering::Relaxed);
        if failed {
            c[2].fetch_add(1, Ordering::Relaxed);
        }
        self.histograms()[index * LATENCY_BUCKETS + bucket(us)].fetch_add(1, Ordering::Relaxed);
        let threshold = self.latency_threshold_ms.load(Ordering::Relaxed);
        if threshold > 0 && us / 1000 >= threshold {
            self.latency_sample(unix_now(), us / 1000);
        }
        let bound = self.slower_than_us.load(Ordering::Relaxed);
        if bound < 0 || (us as i64) < bound {
            return;
        }
        let args: Vec<&[u8]> = std::iter::once(name).chain(args.iter().copied()).collect();
        let mut kept: Vec<Vec<u8>> = args
            .iter()
            .take(if args.len() > LOGGED_ARGS {
                LOGGED_ARGS - 1
            } else {
                LOGGED_ARGS
            })
            .map(|a| {
                if a.len() > LOGGED_BYTES {
                    let mut v = a[..LOGGED_BYTES].to_vec();
                    v.extend_from_slice(
                        format!("... ({} more bytes)", a.len() - LOGGED_BYTES).as_bytes(),
                    );
                    v
                } else {
                    a.to_vec()
                }
            })
            .collect();
        if args.len() > LOGGED_ARGS {
            kept.push(
                format!("... ({} more arguments)", args.len() - LOGGED_ARGS + 1).into_bytes(),
            );
        }
        let entry = SlowEntry {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            unix_s: unix_now(),
            us,
            args: kept,
        };
        let mut log = self.slowlog.lock();
        log.push_front(entry);
        log.truncate(self.max_len.load(Ordering::Relaxed));
    }
}

impl CommandStats {
    /// A "command" latency event of `ms` at `unix_s`: the second's worst.
    fn latency_sample(&self, unix_s: u64, ms: u64) {
        let mut e = self.latency.lock();
        e.max_ms = e.max_ms.max(ms);
        match e.samples.back_mut() {
            Some((t, worst)) if *t == unix_s => *worst = (*worst).max(ms),
            _ => {
                if e.samples.len() == LATENCY_SAMPLES {
                    e.samples.pop_front();
                }
                e.samples.push_back((unix_s, ms));
            }
        }
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// LATENCY LATEST / HISTORY event / RESET [event ...]: Redis's latency
/// monitor, over one event, "command" (a command that ran for
/// `latency-monitor-threshold` ms or more; 0, the default, monitors
/// nothing).
pub(super) fn latency(a: &[&[u8]], db: &Db, w: &mut Reply<'_>) -> Res {
    let stats = db.commands();
    let is_command = |e: &[u8]| e.eq_ignore_ascii_case(b"command");
    match (a[0].to_ascii_lowercase().as_slice(), a.len()) {
        (b"latest", 1) => {
            let e = stats.latency.lock();
            match e.samples.back() {
                None => w.array(0),
                Some(&(t, ms)) => {
                    w.array(1);
                    w.array(4);
                    w.bulk(b"command");
                    w.int(t as i64);
                    w.int(ms as i64);
                    w.int(e.max_ms as i64);
                }
            }
        }
        (b"history", 2) => {
            let e = stats.latency.lock();
            if !is_command(a[1]) {
                w.array(0);
                return Ok(());
            }
            w.array(e.samples.len());
            for &(t, ms) in &e.samples {
                w.array(2);
                w.int(t as i64);
                w.int(ms as i64);
            }
        }
        (b"reset", _) => {
            let mut e = stats.latency.lock();
            let named = a.len() == 1 || a[1..].iter().any(|x| is_command(x));
            let reset = named && !e.samples.is_empty();
            if reset {
                *e = LatencyEvent::default();
            }
            w.int(i64::from(reset));
        }
        _ => return Err(unknown_subcommand(a[0], "LATENCY")),
    }
    Ok(())
}

/// SLOWLOG GET [count] / LEN / RESET.
pub(super) fn slowlog(a: &[&[u8]], db: &Db, w: &mut Reply<'_>) -> Res {
    let stats = db.commands();
    match (a[0].to_ascii_lowercase().as_slice(), a.len()) {
        (b"get", 1 | 2) => {
            let count = match a.get(1) {
                None => 10,
                Some(c) => match int_arg(c) {
                    Ok(-1) => usize::MAX,
                    Ok(c) if c >= 0 => c as usize,
                    _ => {
                        return Err(Fail::Msg(
                            b"ERR count should be greater than or equal to -1",
                        ));
                    }
                },
            };
            let log = stats.slowlog.lock();
            let n = count.min(log.len());
            w.array(n);
            for e in log.iter().take(n) {
                w.array(6);
                w.int(e.id as i64);
                w.int(e.unix_s as i64);
                w.int(e.us as i64);
                w.array(e.args.len());
                for arg in &e.args {
                    w.bulk(arg);
                }
                w.bulk(b"");
                w.bulk(b"");
            }
        }
        (b"len", 1) => w.int(stats.slowlog.lock().len() as i64),
        (b"reset", 1) => {
            stats.slowlog.lock().clear();
            w.ok();
        }
        _ => return Err(unknown_subcommand(a[0], "SLOWLOG")),
    }
    Ok(())
}

/// `CONFIG GET`'s slow log settings among `(name, value)` pairs.
pub(super) fn config_get(db: &Db, name: &[u8], pairs: &mut Vec<(&'static str, String)>) {
    let s = db.commands();
    if name.eq_ignore_ascii_case(b"slowlog-log-slower-than") {
        pairs.push((
            "slowlog-log-slower-than",
            s.slower_than_us.load(Ordering::Relaxed).to_string(),
        ));
    } else if name.eq_ignore_ascii_case(b"slowlog-max-len") {
        pairs.push((
            "slowlog-max-len",
            s.max_len.load(Ordering::Relaxed).to_string(),
        ));
    } else if name.eq_ignore_ascii_case(b"latency-monitor-threshold") {
        pairs.push((
            "latency-monitor-threshold",
            s.latency_threshold_ms.load(Ordering::Relaxed).to_string(),
        ));
    }
}

/// `CONFIG SET` of a slow log setting; `None`: not one.
pub(super) fn config_set(db: &Db, name: &[u8], value: &[u8]) -> Option<Res> {
    let s = db.commands();
    let v = int_arg(value);
    if name.eq_ignore_ascii_case(b"slowlog-log-slower-than") {
        return Some(v.map(|v| s.slower_than_us.store(v, Ordering::Relaxed)));
    }
    if name.eq_ignore_ascii_case(b"latency-monitor-threshold") {
        return Some(v.and_then(|v| {
            if v < 0 {
                return Err(Fail::Owned(
                    b"ERR CONFIG SET failed (possibly related to argument 'latency-monitor-threshold') - argument must be between 0 and 9223372036854775807 inclusive".to_vec(),
                ));
            }
            s.latency_threshold_ms.store(v as u64, Ordering::Relaxed);
            Ok(())
        }));
    }
    if name.eq_ignore_ascii_case(b"slowlog-max-len") {
        return Some(v.and_then(|v| {
            if !(0..=MAX_SLOWLOG_LEN).contains(&v) {
                return Err(Fail::Owned(
                    format!("ERR CONFIG SET failed (possibly related to argument 'slowlog-max-len') - argument must be between 0 and {MAX_SLOWLOG_LEN} inclusive").into_bytes(),
                ));
            }
            s.max_len.store(v as usize, Ordering::Relaxed);
            s.slowlog.lock().truncate(v as usize);
            Ok(())
        }));
    }
    None
}

/// `INFO latencystats`'s section: per command that ran, its run time's
/// p50, p99 and p99.9 (µs, Redis's form; each the top of a histogram
/// bucket, within 12.5%).
pub(super) fn latencystats(db: &Db) -> String {
    let mut out = String::from("# Latencystats\r\n");
    for (index, spec) in COMMANDS.iter().enumerate() {
        if let Some([p50, p99, p999]) = db.commands().percentiles(index, [0.5, 0.99, 0.999]) {
            out.push_str(&format!(
                "latency_percentiles_usec_{}:p50={p50}.000,p99={p99}.000,p99.9={p999}.000\r\n",
                spec.name
            ));
        }
    }
    out
}

/// `INFO commandstats`'s section: a line per command that ran.
pub(super) fn commandstats(db: &Db) -> String {
    let mut out = String::from("# Commandstats\r\n");
    for (index, spec) in COMMANDS.iter().enumerate() {
        let [calls, us, failed] = db.commands().totals(index);
        if calls == 0 {
            continue;
        }
        out.push_str(&format!(
            "cmdstat_{}:calls={calls},usec={us},usec_per_call={:.2},rejected_calls=0,failed_calls={}\r\n",
            spec.name,
            us as f64 / calls as f64,
            failed
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_time_falls_in_a_bucket_whose_top_is_within_an_eighth_above_it() {
        for us in (0..5_000u64).chain([65_535, 1 << 20, 123_456_789, 1 << 40]) {
            let top = bucket_top(bucket(us));
            assert!(top >= us && top - us <= us / 8, "{us} -> {top}");
            assert!(bucket(us) < LATENCY_BUCKETS);
        }
        // Monotone: a longer time never lands in an earlier bucket.
        assert!((1..100_000u64).all(|us| bucket(us) >= bucket(us - 1)));
    }
}
