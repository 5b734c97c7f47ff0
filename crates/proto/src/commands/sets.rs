//! Sets: SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER, SCARD, SPOP, SRANDMEMBER,
//! SMOVE, SINTER/SUNION/SDIFF and their STORE forms.
//!
//! Each command is one arm of [`run`], which [`super::run`] calls by name;
//! the arms keep Redis 7's replies and error texts.

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
            let mut g = Some(lock(db, &mut held, a, store)?);
            let sources = if store { &a[1..] } else { a };
            let mut sets = Vec::with_capacity(sources.len());
            for k in sources {
                match g.as_mut().and_then(|g| g.get(k)).map(|e| &e.value) {
                    None => sets.push(None),
                    // Shared (an `Arc` clone): the guard lends one entry
                    // at a time.
                    Some(Value::Set(s)) => sets.push(Some(Arc::clone(s))),
                    Some(_) => return Err(Fail::Msg(WRONGTYPE)),
                }
            }
            if !store {
                // Only read from here: the sources are walked unlocked
                // (see `snapshot`).
                g = None;
            }
            let first = sets[0].as_ref();
            let out: Vec<&Box<[u8]>> = match &name[..5] {
                b"sunio" => {
                    let mut seen = std::collections::HashSet::new();
                    sets.iter()
                        .flatten()
                        .flat_map(|s| s.members().iter())
                        .filter(|m| seen.insert(*m))
                        .collect()
                }
                b"sinte" => match first {
                    Some(f) if sets.iter().all(Option::is_some) => f
                        .members()
                        .iter()
                        .filter(|m| sets[1..].iter().flatten().all(|s| s.members().contains(*m)))
                        .collect(),
                    _ => Vec::new(),
                },
                _ => first.map_or_else(Vec::new, |f| {
                    f.members()
                        .iter()
                        .filter(|m| !sets[1..].iter().flatten().any(|s| s.members().contains(*m)))
                        .collect()
                }),
            };
            if store {
                // The result replaces the destination, whatever it held; an
                // empty one deletes it.
                let count = out.len();
                let mut result = crate::db::Set::default();
                for m in &out {
                    result.add(m);
                }
                let g = g.as_mut().expect("a STORE form keeps its locks");
                store_result(g, a[0], (count > 0).then(|| Value::Set(Arc::new(result))));
                w.int(count as i64);
            } else {
                w.set(out.len());
                for m in out {
                    w.bulk(m);
                }
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
