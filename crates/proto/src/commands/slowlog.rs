//! The commands Redis users run to find their big commands: `SLOWLOG
//! GET/LEN/RESET` (with `slowlog-log-slower-than` and `slowlog-max-len` in
//! `CONFIG GET/SET`), `LATENCY LATEST/HISTORY/RESET` and the `INFO
//! commandstats` and `latencystats` sections, in Redis 7's formats, over
//! the database's counters ([`crate::commandstats`]). A command's run is
//! timed around its execution (its lock waits included, as Redis's time
//! includes nothing but the command itself).

use std::sync::atomic::Ordering;

use super::{COMMANDS, Fail, Reply, Res, int_arg, unknown_subcommand};
use crate::commandstats::{LatencyEvent, MAX_SLOWLOG_LEN};
use crate::db::Db;

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
        if let Some([p50, p99, p999]) =
            db.commands()
                .percentiles(COMMANDS.len(), index, [0.5, 0.99, 0.999])
        {
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
        let [calls, us, failed] = db.commands().totals(COMMANDS.len(), index);
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
