//! The scripts running now, as the database sees them: which shards each
//! holds and since when, whether it has written, and whether `SCRIPT KILL`
//! asked it to stop. What Redis's BUSY rule and `SCRIPT KILL` read. Also
//! which request type each script has ([`RunningScripts::slot`]).
//!
//! Redis answers every command `-BUSY` once a script has run past
//! `busy-reply-threshold` (5 s by default), and `SCRIPT KILL` then stops a
//! script that has not written. Here a script holds only its keys' shards,
//! so only a command that waits for one of them answers BUSY; the others go
//! on. Nothing here is on a command's path unless the command found a shard
//! taken (it is consulted while waiting), and nothing here waits.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::db::SHARDS;
use crate::resp::wire::SCRIPT_TYPES;

/// Redis's `busy-reply-threshold` default, ms.
pub const BUSY_REPLY_THRESHOLD_MS: u64 = 5_000;

/// The longest `busy-reply-threshold` accepted, ms (a day: a bound a
/// waiting `SCRIPT KILL` can never exceed).
pub const MAX_BUSY_REPLY_THRESHOLD_MS: u64 = 86_400_000;

/// Redis's reply to a command that meets a script past the threshold.
pub const BUSY: &[u8] =
    b"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

/// The shards a script holds, one bit each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShardSet([u64; SHARDS / 64]);

impl ShardSet {
    /// Every shard (a script inside a transaction or a SORT that holds all).
    pub fn all() -> Self {
        Self([u64::MAX; SHARDS / 64])
    }

    /// Adds shard `i` (< [`SHARDS`]).
    pub fn insert(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }

    /// Whether shard `i` is in the set.
    pub fn contains(&self, i: usize) -> bool {
        self.0[i / 64] & (1 << (i % 64)) != 0
    }
}

/// One script while it runs.
#[derive(Debug)]
pub struct ScriptRun {
    started: Instant,
    shards: ShardSet,
    kill: AtomicBool,
    wrote: AtomicBool,
}

impl ScriptRun {
    /// Whether `SCRIPT KILL` asked the script to stop.
    pub fn killed(&self) -> bool {
        self.kill.load(Ordering::Relaxed)
    }

    /// The script called a write command: `SCRIPT KILL` no longer stops it
    /// (its writes would be left half done).
    pub fn wrote(&self) {
        self.wrote.store(true, Ordering::Relaxed);
    }
}

/// What `SCRIPT KILL` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kill {
    /// Asked every script past the threshold that had not written to stop.
    Killed,
    /// No script ran past the threshold.
    NotBusy,
    /// Those past the threshold have all written.
    Unkillable,
}

/// The database's running scripts and its busy threshold.
#[derive(Debug)]
pub struct RunningScripts {
    runs: Mutex<Vec<Arc<ScriptRun>>>,
    /// `runs.len()`, read without the lock: a command waiting for a shard
    /// looks at the registry only while a script runs.
    running: AtomicUsize,
    threshold_ms: AtomicU64,
    /// The scripts with a type of their own, by SHA1, in the order first
    /// seen: at most `SCRIPT_TYPES - 1` (kept across `SCRIPT FLUSH`: a
    /// script's type is its SHA's for the server's life).
    typed: Mutex<Vec<[u8; 40]>>,
}

impl Default for RunningScripts {
    fn default() -> Self {
        Self {
            runs: Mutex::new(Vec::new()),
            running: AtomicUsize::new(0),
            threshold_ms: AtomicU64::new(BUSY_REPLY_THRESHOLD_MS),
            typed: Mutex::new(Vec::with_capacity(SCRIPT_TYPES - 1)),
        }
    }
}

/// A script's registration: dropping it says the script ended.
#[derive(Debug)]
pub struct Running<'a> {
    scripts: &'a RunningScripts,
    /// The script's flags, shared with the registry.
    pub run: Arc<ScriptRun>,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let mut runs = self.scripts.runs.lock();
        runs.retain(|r| !Arc::ptr_eq(r, &self.run));
        self.scripts.running.store(runs.len(), Ordering::Relaxed);
    }
}

impl RunningScripts {
    /// The type slot of the script `sha` ([`crate::resp::script_type`]):
    /// its own while fewer than `SCRIPT_TYPES - 1` scripts have one, else
    /// the shared last one. A scan of at most 7 entries, on the network
    /// thread, for scripts only.
    pub fn slot(&self, sha: &[u8; 40]) -> usize {
        let mut typed = self.typed.lock();
        if let Some(i) = typed.iter().position(|t| t == sha) {
            return i;
        }
        if typed.len() < SCRIPT_TYPES - 1 {
            typed.push(*sha);
            return typed.len() - 1;
        }
        SCRIPT_TYPES - 1
    }

    /// The scripts with a type of their own, by slot.
    pub fn typed(&self) -> Vec<[u8; 40]> {
        self.typed.lock().clone()
    }

    /// `busy-reply-threshold`.
    pub fn threshold(&self) -> Duration {
        Duration::from_millis(self.threshold_ms.load(Ordering::Relaxed))
    }

    /// Sets `busy-reply-threshold` (ms, at most
    /// [`MAX_BUSY_REPLY_THRESHOLD_MS`]; the caller checked).
    pub fn set_threshold_ms(&self, ms: u64) {
        self.threshold_ms
            .store(ms.min(MAX_BUSY_REPLY_THRESHOLD_MS), Ordering::Relaxed);
    }

    /// Registers a script that starts now holding `shards`.
    pub fn start(&self, shards: ShardSet) -> Running<'_> {
        let run = Arc::new(ScriptRun {
            started: Instant::now(),
            shards,
            kill: AtomicBool::new(false),
            wrote: AtomicBool::new(false),
        });
        let mut runs = self.runs.lock();
        runs.push(run.clone());
        self.running.store(runs.len(), Ordering::Relaxed);
        drop(runs);
        Running { scripts: self, run }
    }

    /// Whether a script past the threshold holds shard `i`: a command
    /// waiting for it answers BUSY.
    pub fn busy_on(&self, i: usize) -> bool {
        self.any_past_threshold(|r| r.shards.contains(i))
    }

    /// Whether any script runs past the threshold (a command that needs
    /// every shard answers BUSY at once rather than clear some of them).
    pub fn any_busy(&self) -> bool {
        self.any_past_threshold(|_| true)
    }

    /// Whether a script past the threshold is one `which` picks.
    fn any_past_threshold(&self, which: impl Fn(&ScriptRun) -> bool) -> bool {
        if self.running.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let threshold = self.threshold();
        self.runs
            .lock()
            .iter()
            .any(|r| which(r) && r.started.elapsed() >= threshold)
    }

    /// What `SHUTDOWN NOSAVE` does to scripts: asks every running script to
    /// stop, written or not (the server's own end; `SCRIPT KILL` spares
    /// writers).
    pub fn stop_all(&self) {
        for r in self.runs.lock().iter() {
            r.kill.store(true, Ordering::Relaxed);
        }
    }

    /// `SCRIPT KILL`: asks every script past the threshold that has not
    /// written to stop. A script still under the threshold is waited for
    /// until it passes it or ends, as a `SCRIPT KILL` sent to a busy Redis
    /// is read only once the threshold has passed: so the reply is the one
    /// Redis would give, never a kill of a script Redis would have let
    /// finish.
    pub fn kill(&self) -> Kill {
        let asked = Instant::now();
        loop {
            let threshold = self.threshold();
            {
                let runs = self.runs.lock();
                let (past, under): (Vec<_>, Vec<_>) =
                    runs.iter().partition(|r| r.started.elapsed() >= threshold);
                if !past.is_empty() {
                    let mut killed = false;
                    for r in past.iter().filter(|r| !r.wrote.load(Ordering::Relaxed)) {
                        r.kill.store(true, Ordering::Relaxed);
                        killed = true;
                    }
                    return if killed {
                        Kill::Killed
                    } else {
                        Kill::Unkillable
                    };
                }
                if under.is_empty() || asked.elapsed() > threshold {
                    return Kill::NotBusy;
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_set_holds_exactly_what_was_put_in() {
        let mut s = ShardSet::default();
        s.insert(0);
        s.insert(SHARDS - 1);
        s.insert(65);
        let inside: Vec<usize> = (0..SHARDS).filter(|&i| s.contains(i)).collect();
        assert_eq!(inside, [0, 65, SHARDS - 1]);
        assert!((0..SHARDS).all(|i| ShardSet::all().contains(i)));
    }

    #[test]
    fn only_a_script_past_the_threshold_is_busy_and_kill_spares_writers() {
        let scripts = RunningScripts::default();
        scripts.set_threshold_ms(0);
        assert_eq!(scripts.kill(), Kill::NotBusy);
        let mut shards = ShardSet::default();
        shards.insert(3);
        let reader = scripts.start(shards);
        assert!(scripts.busy_on(3) && !scripts.busy_on(4) && scripts.any_busy());
        let writer = scripts.start(ShardSet::default());
        writer.run.wrote();
        assert_eq!(scripts.kill(), Kill::Killed);
        assert!(reader.run.killed() && !writer.run.killed());
        drop(reader);
        assert!(!scripts.busy_on(3));
        assert_eq!(scripts.kill(), Kill::Unkillable);
        drop(writer);
        assert_eq!(scripts.kill(), Kill::NotBusy);
        // Under the threshold nothing is busy, and a kill waits for the
        // script to pass it or end.
        scripts.set_threshold_ms(60_000);
        let young = scripts.start(shards);
        assert!(!scripts.busy_on(3) && !scripts.any_busy());
        std::thread::scope(|s| {
            s.spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                drop(young);
            });
            assert_eq!(scripts.kill(), Kill::NotBusy);
        });
    }
}
