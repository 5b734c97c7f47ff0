//! Lists: LPUSH/RPUSH, LPOP/RPOP, LRANGE, LINDEX.
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
        b"lpush" | b"rpush" | b"lpushx" | b"rpushx" => {
            arity(n >= 2, nm)?;
            let left = name.starts_with(b"l");
            // The X forms push only onto a list that exists.
            let only_existing = name.ends_with(b"x");
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let len = g.update(a[0], |slot| {
                if only_existing && slot.is_none() {
                    return (false, Ok(0));
                }
                let e = slot.get_or_insert_with(|| Entry::new(Value::List(Arc::default())));
                let Value::List(l) = &mut e.value else {
                    return (false, Err(Fail::Msg(WRONGTYPE)));
                };
                for v in &a[1..] {
                    Arc::make_mut(l).push(v, left);
                }
                (true, Ok(l.len()))
            })?;
            crate::blocking::wake();
            w.int(len as i64);
        }
        b"blpop" | b"brpop" => {
            arity(n >= 2, nm)?;
            let timeout = block_timeout(a[n - 1])?;
            let keys = &a[..n - 1];
            let blocks = held.is_none();
            let mut g = lock(db, &mut held, keys, false)?;
            // The first key, in the order given, whose list has an element.
            let left = name == b"blpop";
            let popped = take_first(&mut g, keys, |v| match v {
                Value::List(l) => Some(Arc::make_mut(l).pop(left)),
                _ => None,
            })?;
            if let Some((k, v)) = popped {
                w.array(2);
                w.bulk(k);
                w.bulk(&v);
                return Ok(());
            }
            // Inside a transaction or a script nothing can come: the
            // timeout's reply at once, as Redis.
            if !blocks {
                w.nil_array();
                return Ok(());
            }
            return Err(block(timeout, g.now_ms, w.resp3));
        }
        b"lmpop" | b"blmpop" => multi_pop(
            name,
            a,
            db,
            &mut held,
            w,
            [b"left", b"right"],
            |v, left| match v {
                Value::List(l) => Some(Arc::make_mut(l).pop(left)),
                _ => None,
            },
            |w, v| w.bulk(v),
        )?,
        b"lrem" => {
            arity(n == 3, nm)?;
            let count = int_arg(a[1])?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let removed = g.update(a[0], |slot| {
                let Some(e) = slot.as_mut() else {
                    return (false, Ok(0));
                };
                let Value::List(l) = &mut e.value else {
                    return (false, Err(Fail::Msg(WRONGTYPE)));
                };
                // count > 0: the first `count` from the head; < 0: from the
                // tail; 0: every one.
                let limit = if count == 0 {
                    usize::MAX
                } else {
                    count.unsigned_abs() as usize
                };
                let removed = Arc::make_mut(l).remove_matching(a[2], count >= 0, limit);
                (removed > 0, Ok(removed))
            })?;
            w.int(removed as i64);
        }
        b"lmove" | b"rpoplpush" | b"blmove" | b"brpoplpush" => {
            let moves = name == b"lmove" || name == b"blmove";
            let blocking = name[0] == b'b';
            let words = if moves { 4 } else { 2 } + usize::from(blocking);
            arity(n == words, nm)?;
            let side = |s: &[u8]| match s.to_ascii_uppercase().as_slice() {
                b"LEFT" => Ok(true),
                b"RIGHT" => Ok(false),
                _ => Err(Fail::Msg(SYNTAX)),
            };
            let (from_left, to_left) = if moves {
                (side(a[2])?, side(a[3])?)
            } else {
                (false, true)
            };
            let timeout = if blocking {
                Some(block_timeout(a[n - 1])?)
            } else {
                None
            };
            let blocks = blocking && held.is_none();
            let mut g = lock(db, &mut held, &a[..2], true)?;
            match g.get(a[0]).map(|e| &e.value) {
                None => {
                    if let (true, Some(t)) = (blocks, timeout) {
                        return Err(block(t, g.now_ms, w.resp3));
                    }
                    w.nil();
                    return Ok(());
                }
                Some(Value::List(_)) => {}
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            }
            if !matches!(g.get(a[1]).map(|e| &e.value), None | Some(Value::List(_))) {
                return Err(Fail::Msg(WRONGTYPE));
            }
            let v = g.update(a[0], |slot| match slot.as_mut().map(|e| &mut e.value) {
                Some(Value::List(l)) => (true, Arc::make_mut(l).pop(from_left)),
                _ => (false, None),
            });
            let Some(v) = v else {
                w.nil();
                return Ok(());
            };
            g.update(a[1], |slot| {
                let e = slot.get_or_insert_with(|| Entry::new(Value::List(Arc::default())));
                if let Value::List(l) = &mut e.value {
                    Arc::make_mut(l).push(&v, to_left);
                }
                (true, ())
            });
            crate::blocking::wake();
            w.bulk(&v);
        }
        b"lset" => {
            arity(n == 3, nm)?;
            let i = int_arg(a[1])?;
            let mut g = lock(db, &mut held, &a[..1], true)?;
            g.update(a[0], |slot| {
                let Some(e) = slot.as_mut() else {
                    return (false, Err(Fail::Msg(b"ERR no such key")));
                };
                let Value::List(l) = &mut e.value else {
                    return (false, Err(Fail::Msg(WRONGTYPE)));
                };
                let i = if i < 0 { l.len() as i64 + i } else { i };
                match usize::try_from(i)
                    .ok()
                    .filter(|&i| Arc::make_mut(l).set(i, a[2]))
                {
                    Some(_) => (true, Ok(())),
                    None => (false, Err(Fail::Msg(b"ERR index out of range"))),
                }
            })?;
            w.ok();
        }
        b"ltrim" => {
            arity(n == 3, nm)?;
            let (start, end) = (int_arg(a[1])?, int_arg(a[2])?);
            let mut g = lock(db, &mut held, &a[..1], false)?;
            g.update(a[0], |slot| {
                let Some(e) = slot.as_mut() else {
                    return (false, Ok(()));
                };
                let Value::List(l) = &mut e.value else {
                    return (false, Err(Fail::Msg(WRONGTYPE)));
                };
                // Redis's arithmetic: negative offsets from the end; out of
                // range empties the list (and so removes the key).
                let len = l.len() as i64;
                let start = if start < 0 {
                    (len + start).max(0)
                } else {
                    start
                };
                let end = if end < 0 { len + end } else { end };
                if start > end || start >= len {
                    Arc::make_mut(l).keep(0, 0);
                } else {
                    Arc::make_mut(l).keep(start as usize, (end.min(len - 1) + 1) as usize);
                }
                (true, Ok(()))
            })?;
            w.ok();
        }
        b"lpop" | b"rpop" => {
            arity(n == 1 || n == 2, nm)?;
            let count = match a.get(1) {
                None => None,
                Some(c) => Some(
                    parse_i64(c)
                        .and_then(|c| usize::try_from(c).ok())
                        .ok_or(Fail::Msg(NOT_POSITIVE))?,
                ),
            };
            let left = name == b"lpop";
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let popped = g.update(a[0], |slot| {
                let Some(e) = slot.as_mut() else {
                    return (false, Ok(None));
                };
                let Value::List(l) = &mut e.value else {
                    return (false, Err(Fail::Msg(WRONGTYPE)));
                };
                let k = count.unwrap_or(1).min(l.len());
                let v: Vec<Box<[u8]>> = (0..k).filter_map(|_| Arc::make_mut(l).pop(left)).collect();
                (k > 0, Ok(Some(v)))
            })?;
            match (count, popped) {
                (None, Some(v)) if !v.is_empty() => w.bulk(&v[0]),
                (None, _) => w.nil(),
                (Some(_), None) => w.nil_array(),
                (Some(_), Some(v)) => {
                    w.array(v.len());
                    for x in &v {
                        w.bulk(x);
                    }
                }
            }
        }
        b"lrange" => {
            arity(n == 3, nm)?;
            let (start, stop) = (int_arg(a[1])?, int_arg(a[2])?);
            // The value's snapshot (an `Arc` clone) under the lock, walked
            // after it: a big value holds its shard for O(1), not its walk.
            let value = snapshot(db, &mut held, a[0])?;
            match value.as_ref() {
                None => w.array(0),
                Some(Value::List(l)) => {
                    let (s, e) = range(start, stop, l.len());
                    w.array(e - s);
                    for v in l.items().range(s..e) {
                        w.bulk(v);
                    }
                }
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            }
        }
        b"lindex" => {
            arity(n == 2, nm)?;
            // Redis looks the key up before it reads the index: a missing
            // key answers nil whatever the index.
            let mut g = lock(db, &mut held, &a[..1], false)?;
            match g.get(a[0]).map(|e| &e.value) {
                None => w.nil(),
                Some(Value::List(l)) => {
                    let i = int_arg(a[1])?;
                    let len = l.len() as i64;
                    let i = if i < 0 { len + i } else { i };
                    match usize::try_from(i).ok().and_then(|i| l.items().get(i)) {
                        Some(v) => w.bulk(v),
                        None => w.nil(),
                    }
                }
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            }
        }
        b"lpos" => {
            arity(n >= 2, nm)?;
            // RANK, COUNT and MAXLEN are read before the key, as Redis does.
            let (mut rank, mut count, mut maxlen) = (1i64, None, 0usize);
            let mut i = 2;
            while i < n {
                let Some(v) = a.get(i + 1) else {
                    return Err(Fail::Msg(SYNTAX));
                };
                match a[i].to_ascii_uppercase().as_slice() {
                    b"RANK" => {
                        rank = int_arg(v)?;
                        if rank == 0 {
                            return Err(Fail::Msg(
                                b"ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                            ));
                        }
                    }
                    b"COUNT" => {
                        let c = int_arg(v)?;
                        if c < 0 {
                            return Err(Fail::Msg(b"ERR COUNT can't be negative"));
                        }
                        count = Some(c as usize);
                    }
                    b"MAXLEN" => {
                        let m = int_arg(v)?;
                        if m < 0 {
                            return Err(Fail::Msg(b"ERR MAXLEN can't be negative"));
                        }
                        maxlen = m as usize;
                    }
                    _ => return Err(Fail::Msg(SYNTAX)),
                }
                i += 2;
            }
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let found: Vec<usize> = match g.get(a[0]).map(|e| &e.value) {
                None => Vec::new(),
                Some(Value::List(l)) => {
                    let items = l.items();
                    let len = items.len();
                    let scan = if maxlen == 0 { len } else { maxlen.min(len) };
                    // COUNT 0: every match; none given: the first (one reply).
                    let want = match count {
                        Some(0) => usize::MAX,
                        Some(c) => c,
                        None => 1,
                    };
                    let skip = rank.unsigned_abs().saturating_sub(1);
                    let hits = |i: &usize| *items[*i] == *a[1];
                    if rank > 0 {
                        (0..scan)
                            .filter(hits)
                            .skip(skip as usize)
                            .take(want)
                            .collect()
                    } else {
                        (len - scan..len)
                            .rev()
                            .filter(hits)
                            .skip(skip as usize)
                            .take(want)
                            .collect()
                    }
                }
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            };
            match count {
                None => match found.first() {
                    Some(&p) => w.int(p as i64),
                    None => w.nil(),
                },
                Some(_) => {
                    w.array(found.len());
                    for p in found {
                        w.int(p as i64);
                    }
                }
            }
        }
        b"linsert" => {
            arity(n == 4, nm)?;
            let before = match a[1].to_ascii_uppercase().as_slice() {
                b"BEFORE" => true,
                b"AFTER" => false,
                _ => return Err(Fail::Msg(SYNTAX)),
            };
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let len = g.update(a[0], |slot| match slot.as_mut().map(|e| &mut e.value) {
                None => (false, Ok(0)),
                Some(Value::List(l)) => match l.items().iter().position(|v| **v == *a[2]) {
                    None => (false, Ok(-1)),
                    Some(at) => {
                        Arc::make_mut(l).insert(if before { at } else { at + 1 }, a[3]);
                        (true, Ok(l.len() as i64))
                    }
                },
                Some(_) => (false, Err(Fail::Msg(WRONGTYPE))),
            })?;
            if len > 0 {
                crate::blocking::wake();
            }
            w.int(len);
        }
        _ => unreachable!("routed to lists by name"),
    }
    Ok(())
}
