//! The in-memory database's command statistics, what Redis users read to
//! find their big commands: per command of the command table, calls, time
//! and failures (`INFO commandstats`), run-time histograms (`INFO
//! latencystats`), the slow log and the latency monitor's "command" event.
//! The counters live in the database ([`crate::db::Db::commands`]); the
//! commands that read and reset them are `commands/slowlog.rs`'s. A leaf:
//! it knows the command table only by its length, which each call passes.
//! Recording takes a few atomics; only a slow command takes the log's lock.

use std::collections::VecDeque;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

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
    pub(crate) slowlog: Mutex<VecDeque<SlowEntry>>,
    next_id: AtomicU64,
    /// µs; negative: log nothing; 0: log everything (Redis's default 10 ms).
    pub(crate) slower_than_us: AtomicI64,
    pub(crate) max_len: AtomicUsize,
    /// The latency monitor's threshold, ms (0: off, Redis's default).
    pub(crate) latency_threshold_ms: AtomicU64,
    /// The "command" event's samples (LATENCY LATEST / HISTORY).
    pub(crate) latency: Mutex<LatencyEvent>,
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
pub(crate) struct LatencyEvent {
    /// (Unix s, ms), oldest first.
    pub(crate) samples: VecDeque<(u64, u64)>,
    pub(crate) max_ms: u64,
}

/// Samples a latency event keeps (Redis's `LATENCY_TS_LEN`).
const LATENCY_SAMPLES: usize = 160;

#[derive(Debug, Clone)]
pub(crate) struct SlowEntry {
    pub(crate) id: u64,
    pub(crate) unix_s: u64,
    pub(crate) us: u64,
    pub(crate) args: Vec<Vec<u8>>,
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
    fn counters(&self, commands: usize) -> &[Counters] {
        self.counters.get_or_init(|| {
            (0..commands * STRIPES)
                .map(|_| Counters::default())
                .collect()
        })
    }

    fn histograms(&self, commands: usize) -> &[AtomicU64] {
        self.histograms.get_or_init(|| {
            (0..commands * LATENCY_BUCKETS)
                .map(|_| AtomicU64::new(0))
                .collect()
        })
    }

    /// Command `index` of a table of `commands`: its run times at
    /// `quantiles` (µs, each the top of its bucket); `None`: it never ran.
    pub(crate) fn percentiles<const N: usize>(
        &self,
        commands: usize,
        index: usize,
        quantiles: [f64; N],
    ) -> Option<[u64; N]> {
        let h = &self.histograms(commands)[index * LATENCY_BUCKETS..(index + 1) * LATENCY_BUCKETS];
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

    /// Command `index` of a table of `commands`: its counters summed over
    /// the stripes.
    pub(crate) fn totals(&self, commands: usize, index: usize) -> [u64; 3] {
        let mut t = [0; 3];
        for c in &self.counters(commands)[index * STRIPES..(index + 1) * STRIPES] {
            for (sum, v) in t.iter_mut().zip(&c.0) {
                *sum += v.load(Ordering::Relaxed);
            }
        }
        t
    }

    /// Command `index` of a table of `commands`, `name` with `args`, ran
    /// for `us` µs; `failed`: it answered an error. Allocates only for a
    /// slow one.
    pub(crate) fn record(
        &self,
        commands: usize,
        index: usize,
        us: u64,
        failed: bool,
        (name, args): (&[u8], &[&[u8]]),
    ) {
        let c = &self.counters(commands)[index * STRIPES + stripe()].0;
        c[0].fetch_add(1, Ordering::Relaxed);
        c[1].fetch_add(us, Ordering::Relaxed);
        if failed {
            c[2].fetch_add(1, Ordering::Relaxed);
        }
        self.histograms(commands)[index * LATENCY_BUCKETS + bucket(us)]
            .fetch_add(1, Ordering::Relaxed);
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
