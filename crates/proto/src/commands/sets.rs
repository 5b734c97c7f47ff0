//! Sets: SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER, SCARD, SPOP, SRANDMEMBER,
//! SMOVE, SINTER/SUNION/SDIFF and their STORE forms.
//!
//! Each command is one arm of [`run`], which [`super::run`] calls for
//! this family's commands (its column of `COMMANDS`); the arms keep
//! Redis 7's replies and error texts.

use super::*;
use std::sync::Arc;

/// Runs one of this family's commands (`name` is lowercase).
pub(super) fn run<'d>(
    name: &[u8],
    a: &[&[u8]],
    db: &'d Db,
    w: &mut Reply<'_>,
    mut held: Option<&mut Guard<'d>>,
) -> Res {
    let n = a.len();
    let nm = std::str::from_utf8(name).unwrap_or("?");
    match name {
        b"sadd" | b"srem" => {
            arity(n >= 2, nm)?;
            let add = name == b"sadd";
            let mut g = lock(db, &mut held, &a[..1], add)?;
            let count = g.update(a[0], |slot| {
                if !add && slot.is_none() {
                    return (false, Ok(0));
                }
                let e = slot.get_or_insert_with(|| Entry::new(Value::Set(Arc::default())));
                let Value::Set(s) = &mut e.value else {
                    return (false, Err(Fail::Msg(WRONGTYPE)));
                };
                let c = a[1..]
                    .iter()
                    .filter(|m| {
                        if add {
                            Arc::make_mut(s).add(m)
                        } else {
                            Arc::make_mut(s).remove(m)
                        }
                    })
                    .count();
                (c > 0, Ok(c))
            })?;
            w.int(count as i64);
        }
        b"smembers" => {
            arity(n == 1, nm)?;
            // The value's snapshot (an `Arc` clone) under the lock, walked
            // after it: a big value holds its shard for O(1), not its walk.
            let value = snapshot(db, &mut held, a[0])?;
            match value.as_ref() {
                None => w.set(0),
                Some(Value::Set(s)) => {
                    w.set(s.len());
                    for m in s.members() {
                        w.bulk(m);
                    }
                }
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            }
        }
        b"sismember" => {
            arity(n == 2, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            match g.get(a[0]).map(|e| &e.value) {
                None => w.int(0),
                Some(Value::Set(s)) => w.bool_int(s.members().contains(a[1])),
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            }
        }
        b"sintercard" => {
            arity(n >= 2, nm)?;
            // Not a number reads as no keys, as in Redis.
            let keys = parse_i64(a[0]).unwrap_or(0);
            if keys < 1 {
                return Err(Fail::Msg(b"ERR numkeys should be greater than 0"));
            }
            let end = match usize::try_from(keys) {
                Ok(k) if k < n => 1 + k,
                _ => {
                    return Err(Fail::Msg(
                        b"ERR Number of keys can't be greater than number of args",
                    ));
                }
            };
            let mut limit = 0usize;
            let mut j = end;
            while j < n {
                if j + 1 < n && a[j].eq_ignore_ascii_case(b"limit") {
                    limit = card_limit(a[j + 1])?;
                    j += 2;
                } else {
                    return Err(Fail::Msg(SYNTAX));
                }
            }
            let mut g = Some(lock(db, &mut held, &a[1..end], false)?);
            let mut sets = Vec::with_capacity(end - 1);
            for k in &a[1..end] {
                match g.as_mut().and_then(|g| g.get(k)).map(|e| &e.value) {
                    None => sets.push(None),
                    Some(Value::Set(s)) => sets.push(Some(Arc::clone(s))),
                    Some(_) => return Err(Fail::Msg(WRONGTYPE)),
                }
            }
            // Walked unlocked (see `snapshot`).
            g = None;
            drop(g);
            let mut count = 0usize;
            if let Some(Some(first)) = sets
                .iter()
                .min_by_key(|s| s.as_ref().map_or(0, |s| s.members().len()))
            {
                for m in first.members() {
                    if sets
                        .iter()
                        .all(|s| s.as_ref().is_some_and(|s| s.members().contains(m)))
                    {
                        count += 1;
                        if count == limit {
                            break;
                        }
                    }
                }
            }
            w.int(count as i64);
        }
        b"sinter" | b"sunion" | b"sdiff" | b"sinterstore" | b"sunionstore" | b"sdiffstore" => {
            let store = name.ends_with(b"store");
            arity(n > usize::from(store), nm)?;
            let sources = if store { &a[1..] } else { a };
            // A STORE form of its own (not inside EXEC or a script) computes
            // with the locks released too, and stores if its sources are
            // still the values it read (else it reads them again; past
            // STORE_TRIES, it computes under the locks).
            let mut unlocked_tries = if store && held.is_none() {
                super::STORE_TRIES
            } else {
                0
            };
            loop {
                let mut g = lock(db, &mut held, a, store)?;
                let sets = read_sets(&mut g, sources)?;
                let g = if !store || unlocked_tries > 0 {
                    // Walked unlocked (see `snapshot`).
                    drop(g);
                    None
                } else {
                    Some(g)
                };
                let out = set_operation(name, &sets);
                if !store {
                    w.set(out.len());
                    for m in out {
                        w.bulk(m);
                    }
                    break;
                }
                // The result replaces the destination, whatever it held; an
                // empty one deletes it (built before the locks are taken).
                let count = out.len();
                let mut result = crate::db::Set::default();
                for m in &out {
                    result.add(m);
                }
                let value = (count > 0).then(|| Value::Set(Arc::new(result)));
                let g = match g {
                    Some(g) => g,
                    None => {
                        match relock_unchanged(db, &mut held, a, |g| read_sets(g, sources), &sets)?
                        {
                            Some(g) => g,
                            None => {
                                unlocked_tries -= 1;
                                continue;
                            }
                        }
                    }
                };
                store_then_free(g, a[0], value);
                w.int(count as i64);
                break;
            }
        }
        b"srandmember" => {
            arity(n == 1 || n == 2, nm)?;
            let count = a.get(1).map(|c| random_count(c)).transpose()?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let members: Vec<&Box<[u8]>> = match g.get(a[0]).map(|e| &e.value) {
                None => Vec::new(),
                Some(Value::Set(s)) => s.members().iter().collect(),
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            };
            random_picks(w, &members, count, 1, |w, m| w.bulk(m));
        }
        b"smove" => {
            arity(n == 3, nm)?;
            let mut g = lock(db, &mut held, &a[..2], true)?;
            let src_has = match g.get(a[0]).map(|e| &e.value) {
                None => {
                    w.int(0);
                    return Ok(());
                }
                Some(Value::Set(s)) => s.members().contains(a[2]),
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            };
            if !matches!(g.get(a[1]).map(|e| &e.value), None | Some(Value::Set(_))) {
                return Err(Fail::Msg(WRONGTYPE));
            }
            if a[0] == a[1] || !src_has {
                w.bool_int(src_has);
                return Ok(());
            }
            g.update(a[0], |slot| match slot.as_mut().map(|e| &mut e.value) {
                Some(Value::Set(s)) => (Arc::make_mut(s).remove(a[2]), ()),
                _ => (false, ()),
            });
            g.update(a[1], |slot| {
                let e = slot.get_or_insert_with(|| Entry::new(Value::Set(Arc::default())));
                if let Value::Set(s) = &mut e.value {
                    Arc::make_mut(s).add(a[2]);
                }
                (true, ())
            });
            w.int(1);
        }
        b"smismember" => {
            arity(n >= 2, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let set = match g.get(a[0]).map(|e| &e.value) {
                None => None,
                Some(Value::Set(s)) => Some(s.members()),
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            };
            w.array(n - 1);
            for m in &a[1..] {
                w.bool_int(set.is_some_and(|s| s.contains(*m)));
            }
        }
        b"spop" => {
            arity(n == 1 || n == 2, nm)?;
            let count = match a.get(1) {
                None => None,
                Some(c) => Some(
                    parse_i64(c)
                        .and_then(|c| usize::try_from(c).ok())
                        .ok_or(Fail::Msg(NOT_POSITIVE))?,
                ),
            };
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let popped = g.update(a[0], |slot| match slot.as_mut().map(|e| &mut e.value) {
                None => (false, Ok(Vec::new())),
                Some(Value::Set(s)) => {
                    let k = count.unwrap_or(1).min(s.len());
                    let v: Vec<Box<[u8]>> = (0..k).filter_map(|_| Arc::make_mut(s).pop()).collect();
                    (k > 0, Ok(v))
                }
                Some(_) => (false, Err(Fail::Msg(WRONGTYPE))),
            })?;
            match count {
                None => match popped.first() {
                    Some(m) => w.bulk(m),
                    None => w.nil(),
                },
                Some(_) => {
                    w.set(popped.len());
                    for m in &popped {
                        w.bulk(m);
                    }
                }
            }
        }
        _ => unreachable!("routed to sets by name"),
    }
    Ok(())
}

/// The sets at `keys` (shared: `Arc` clones; `None`: no key), or WRONGTYPE.
fn read_sets(g: &mut Guard<'_>, keys: &[&[u8]]) -> Result<Vec<Option<SameSet>>, Fail> {
    keys.iter()
        .map(|k| match g.get(k).map(|e| &e.value) {
            None => Ok(None),
            Some(Value::Set(s)) => Ok(Some(SameSet(Arc::clone(s)))),
            Some(_) => Err(Fail::Msg(WRONGTYPE)),
        })
        .collect()
}

/// A set read for an operation: equal to another only if it is the same
/// shared value (a write to it since would have copied it, being shared).
#[derive(Debug)]
struct SameSet(Arc<crate::db::Set>);

impl PartialEq for SameSet {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// SUNION, SINTER or SDIFF (by `name`'s first five letters) of `sets`:
/// the members, in the first set's order (SUNION: each once).
fn set_operation<'s>(name: &[u8], sets: &'s [Option<SameSet>]) -> Vec<&'s [u8]> {
    let first = sets[0].as_ref().map(|s| &s.0);
    let others = || sets[1..].iter().flatten().map(|s| &s.0);
    let members = |s: &'s crate::db::Set| s.members().iter().map(|m| &**m);
    match &name[..5] {
        b"sunio" => {
            let mut seen = std::collections::HashSet::new();
            sets.iter()
                .flatten()
                .flat_map(|s| members(&s.0))
                .filter(|m| seen.insert(*m))
                .collect()
        }
        b"sinte" => match first {
            Some(f) if sets.iter().all(Option::is_some) => members(f)
                .filter(|m| others().all(|s| s.members().contains(*m)))
                .collect(),
            _ => Vec::new(),
        },
        _ => first.map_or_else(Vec::new, |f| {
            members(f)
                .filter(|m| !others().any(|s| s.members().contains(*m)))
                .collect()
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::commands::{BETWEEN_COMPUTE_AND_STORE as BETWEEN, Session, execute};
    use crate::db::Db;
    use crate::resp::write_command;

    fn run(db: &Db, s: &mut Session, words: &[&str]) -> String {
        let words: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
        let mut req = Vec::new();
        write_command(&words, &mut req);
        let mut out = Vec::new();
        execute(&req, db, s, &mut out, &mut || {}).expect("valid");
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Runs `store` (a STORE form, or SORT with a pattern) with
    /// `meanwhile` run by another client between its first computation
    /// and its store or answer (it can: no lock is held then; were one
    /// held, this thread would wait for itself); returns `store`'s reply.
    fn store_with_a_write_meanwhile(
        db: &Arc<Db>,
        store: &[&str],
        meanwhile: &'static [&'static str],
    ) -> String {
        let writer = Arc::clone(db);
        let mut once = true;
        BETWEEN.with(|f| {
            *f.borrow_mut() = Some(Box::new(move || {
                if std::mem::take(&mut once) {
                    let mut s = Session::default();
                    assert_eq!(run(&writer, &mut s, meanwhile), ":1\r\n");
                }
            }))
        });
        let reply = run(db, &mut Session::default(), store);
        BETWEEN.with(|f| f.borrow_mut().take());
        reply
    }

    #[test]
    fn a_store_form_computes_unlocked_and_reads_again_if_a_source_changed() {
        let db = Arc::new(Db::default());
        let mut s = Session::default();
        run(&db, &mut s, &["SADD", "a", "1", "2"]);
        run(&db, &mut s, &["SADD", "b", "2", "3"]);
        // The result includes what was added meanwhile, as if the STORE
        // form ran after it.
        let union = ["SUNIONSTORE", "d", "a", "b"];
        assert_eq!(
            store_with_a_write_meanwhile(&db, &union, &["SADD", "b", "4"]),
            ":4\r\n"
        );
        run(&db, &mut s, &["ZADD", "z", "1", "x"]);
        let zunion = ["ZUNIONSTORE", "dz", "2", "z", "a"];
        assert_eq!(
            store_with_a_write_meanwhile(&db, &zunion, &["ZADD", "z", "2", "y"]),
            ":4\r\n"
        );
        assert_eq!(run(&db, &mut s, &["ZSCORE", "dz", "y"]), "$1\r\n2\r\n");
        let zrange = ["ZRANGESTORE", "dr", "z", "0", "-1"];
        assert_eq!(
            store_with_a_write_meanwhile(&db, &zrange, &["ZADD", "z", "3", "w"]),
            ":3\r\n"
        );
        // SORT ... STORE sorts unlocked and sorts again what changed.
        run(&db, &mut s, &["SADD", "unsorted", "3", "1"]);
        let sort = ["SORT", "unsorted", "STORE", "sorted"];
        assert_eq!(
            store_with_a_write_meanwhile(&db, &sort, &["SADD", "unsorted", "2"]),
            ":3\r\n"
        );
        assert_eq!(
            run(&db, &mut s, &["LRANGE", "sorted", "0", "-1"]),
            "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n"
        );
        assert_eq!(run(&db, &mut s, &["SCARD", "d"]), ":4\r\n");
        assert_eq!(run(&db, &mut s, &["SISMEMBER", "d", "4"]), ":1\r\n");
        // A source a reader holds is not copied (only the destination is
        // written, and it is replaced).
        let before = db.unshared_outside_locks();
        let view = crate::commands::snapshot(&db, &mut None, b"a");
        assert_eq!(run(&db, &mut s, &["SINTERSTORE", "d", "a", "b"]), ":1\r\n");
        assert_eq!(db.unshared_outside_locks(), before);
        drop(view);
    }

    /// SORT's unlocked reads under concurrent writers: two threads move
    /// one unit at a time between keys in transactions (the total stays
    /// 200), and every SORT ... GET of all the keys, taken meanwhile, sees
    /// the total whole: no view mixes a key read before a move with one
    /// read after it. A stress test of the write sequence's validation.
    #[test]
    fn sort_with_patterns_never_sees_half_a_transaction() {
        const KEYS: usize = 20;
        let db = Arc::new(Db::default());
        let mut s = Session::default();
        for i in 0..KEYS {
            run(&db, &mut s, &["RPUSH", "ids", &i.to_string()]);
            run(&db, &mut s, &["SET", &format!("w_{i}"), "10"]);
        }
        let stop = std::sync::atomic::AtomicBool::new(false);
        let moves = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|scope| {
            for t in 0..2u64 {
                let (db, stop, moves) = (&db, &stop, &moves);
                scope.spawn(move || {
                    let mut s = Session::default();
                    let mut x = t + 1;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        // A small xorshift: which keys, without a clock.
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let (from, to) = (x as usize % KEYS, (x >> 20) as usize % KEYS);
                        run(db, &mut s, &["MULTI"]);
                        run(db, &mut s, &["DECR", &format!("w_{from}")]);
                        run(db, &mut s, &["INCR", &format!("w_{to}")]);
                        assert!(run(db, &mut s, &["EXEC"]).starts_with("*2"));
                        moves.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                });
            }
            // Stops the writers however this thread leaves (a failed
            // assertion included), so that a failure fails, not hangs.
            struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);
            impl Drop for StopOnDrop<'_> {
                fn drop(&mut self) {
                    self.0.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            }
            let _stop = StopOnDrop(&stop);
            let mut views = 0;
            while views < 2_000 || moves.load(std::sync::atomic::Ordering::Relaxed) < 2_000 {
                let reply = run(&db, &mut s, &["SORT", "ids", "BY", "nosort", "GET", "w_*"]);
                let total: i64 = reply
                    .split("\r\n")
                    .filter(|l| !l.is_empty() && !l.starts_with('*') && !l.starts_with('$'))
                    .map(|l| l.parse::<i64>().expect("a number"))
                    .sum();
                assert_eq!(total, 10 * KEYS as i64, "a view mixed two states: {reply}");
                views += 1;
            }
        });
    }

    /// SORT with BY and GET patterns holds no shard while it sorts, and
    /// answers from one consistent view: a change to a key it read, made
    /// meanwhile, has it read again (its answer as if it ran after it).
    #[test]
    fn sort_with_patterns_reads_unlocked_and_again_if_anything_changed() {
        let db = Arc::new(Db::default());
        let mut s = Session::default();
        run(&db, &mut s, &["RPUSH", "ids", "a", "b"]);
        run(&db, &mut s, &["HSET", "w_b", "f", "1"]);
        run(&db, &mut s, &["SET", "o_a", "A"]);
        run(&db, &mut s, &["SET", "o_b", "B"]);
        let by = ["SORT", "ids", "BY", "w_*->f", "GET", "#", "GET", "o_*"];
        // Alone: a has no weight (0), so a, then b.
        assert_eq!(
            run(&db, &mut s, &by),
            "*4\r\n$1\r\na\r\n$1\r\nA\r\n$1\r\nb\r\n$1\r\nB\r\n"
        );
        // a's weight set to 5 after it read the weights: b, then a.
        assert_eq!(
            store_with_a_write_meanwhile(&db, &by, &["HSET", "w_a", "f", "5"]),
            "*4\r\n$1\r\nb\r\n$1\r\nB\r\n$1\r\na\r\n$1\r\nA\r\n"
        );
        // The STORE form: a's weight gone (the field deleted) meanwhile.
        let store = ["SORT", "ids", "BY", "w_*->f", "STORE", "out"];
        assert_eq!(
            store_with_a_write_meanwhile(&db, &store, &["HDEL", "w_a", "f"]),
            ":2\r\n"
        );
        assert_eq!(
            run(&db, &mut s, &["LRANGE", "out", "0", "-1"]),
            "*2\r\n$1\r\na\r\n$1\r\nb\r\n"
        );
    }
}
