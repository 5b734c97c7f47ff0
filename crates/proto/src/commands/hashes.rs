//! Hashes: HSET, HGET, HEXISTS, HMGET, HGETALL, HDEL (and ZREM, which shares its shape), HINCRBY.
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
        b"hset" | b"hmset" => {
            arity(n >= 3 && n % 2 == 1, nm)?;
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let added = g.update(a[0], |slot| {
                let e = slot.get_or_insert_with(|| Entry::new(Value::Hash(Arc::default())));
                let Value::Hash(h) = &mut e.value else {
                    return (false, Err(Fail::Msg(WRONGTYPE)));
                };
                let added = a[1..]
                    .chunks(2)
                    .filter(|fv| Arc::make_mut(h).set(fv[0], fv[1]))
                    .count();
                (true, Ok(added))
            })?;
            if name == b"hmset" {
                w.ok()
            } else {
                w.int(added as i64)
            }
        }
        b"hrandfield" => {
            arity(n >= 1, nm)?;
            let (count, values) = random_args(a, b"withvalues")?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let fields: Vec<(&[u8], &[u8])> = match g.get(a[0]).map(|e| &e.value) {
                None => Vec::new(),
                Some(Value::Hash(h)) => h.map().iter().map(|(f, v)| (&f[..], &v[..])).collect(),
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            };
            random_picks(w, &fields, count, 1 + usize::from(values), |w, (f, v)| {
                w.bulk(f);
                if values {
                    w.bulk(v);
                }
            });
        }
        b"hstrlen" => {
            arity(n == 2, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let len = match g.get(a[0]).map(|e| &e.value) {
                None => 0,
                Some(Value::Hash(h)) => h.map().get(a[1]).map_or(0, |v| v.len()),
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            };
            w.int(len as i64);
        }
        b"hget" | b"hexists" => {
            arity(n == 2, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let v = match g.get(a[0]).map(|e| &e.value) {
                None => None,
                Some(Value::Hash(h)) => h.map().get(a[1]),
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            };
            match (name, v) {
                (b"hget", Some(v)) => w.bulk(v),
                (b"hget", None) => w.nil(),
                (_, v) => w.bool_int(v.is_some()),
            }
        }
        b"hmget" => {
            arity(n >= 2, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let h = match g.get(a[0]).map(|e| &e.value) {
                None => None,
                Some(Value::Hash(h)) => Some(h),
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            };
            w.array(n - 1);
            for f in &a[1..] {
                match h.and_then(|h| h.map().get(*f)) {
                    Some(v) => w.bulk(v),
                    None => w.nil(),
                }
            }
        }
        b"hgetall" => {
            arity(n == 1, nm)?;
            // The value's snapshot (an `Arc` clone) under the lock, walked
            // after it: a big value holds its shard for O(1), not its walk.
            let value = snapshot(db, &mut held, a[0])?;
            match value.as_ref() {
                None => w.map(0),
                Some(Value::Hash(h)) => {
                    w.map(h.len());
                    for (f, v) in h.map() {
                        w.bulk(f);
                        w.bulk(v);
                    }
                }
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            }
        }
        b"hkeys" | b"hvals" => {
            arity(n == 1, nm)?;
            // The value's snapshot (an `Arc` clone) under the lock, walked
            // after it: a big value holds its shard for O(1), not its walk.
            let value = snapshot(db, &mut held, a[0])?;
            match value.as_ref() {
                None => w.array(0),
                Some(Value::Hash(h)) => {
                    w.array(h.len());
                    for (f, v) in h.map() {
                        w.bulk(if name == b"hkeys" { f } else { v });
                    }
                }
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            }
        }
        b"hsetnx" => {
            arity(n == 3, nm)?;
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let added = g.update(a[0], |slot| {
                let e = slot.get_or_insert_with(|| Entry::new(Value::Hash(Arc::default())));
                let Value::Hash(h) = &mut e.value else {
                    return (false, Err(Fail::Msg(WRONGTYPE)));
                };
                if h.map().contains_key(a[1]) {
                    return (false, Ok(false));
                }
                (true, Ok(Arc::make_mut(h).set(a[1], a[2])))
            })?;
            w.int(i64::from(added));
        }
        b"hdel" | b"zrem" => {
            arity(n >= 2, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let removed = g.update(a[0], |slot| {
                let r = match slot.as_mut().map(|e| &mut e.value) {
                    None => 0,
                    Some(Value::Hash(h)) if name == b"hdel" => {
                        a[1..].iter().filter(|f| Arc::make_mut(h).remove(f)).count()
                    }
                    Some(Value::ZSet(z)) if name == b"zrem" => {
                        a[1..].iter().filter(|m| Arc::make_mut(z).remove(m)).count()
                    }
                    Some(_) => return (false, Err(Fail::Msg(WRONGTYPE))),
                };
                (r > 0, Ok(r))
            })?;
            w.int(removed as i64);
        }
        b"hincrby" => {
            arity(n == 3, nm)?;
            let by = int_arg(a[2])?;
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let v = g.update(a[0], |slot| {
                let e = slot.get_or_insert_with(|| Entry::new(Value::Hash(Arc::default())));
                let Value::Hash(h) = &mut e.value else {
                    return (false, Err(Fail::Msg(WRONGTYPE)));
                };
                let cur = match h.map().get(a[1]) {
                    None => 0,
                    Some(v) => match parse_i64(v) {
                        Some(x) => x,
                        None => {
                            return (false, Err(Fail::Msg(b"ERR hash value is not an integer")));
                        }
                    },
                };
                let Some(new) = cur.checked_add(by) else {
                    return (false, Err(Fail::Msg(OVERFLOW)));
                };
                Arc::make_mut(h).set(a[1], itoa::Buffer::new().format(new).as_bytes());
                (true, Ok(new))
            })?;
            w.int(v);
        }
        b"hincrbyfloat" => {
            arity(n == 3, nm)?;
            let by = long_double::parse(a[2]).ok_or(Fail::Msg(NOT_FLOAT))?;
            if by == long_double::Operand::Infinite {
                return Err(Fail::Msg(b"ERR value is NaN or Infinity"));
            }
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let v = g.update(a[0], |slot| {
                if !matches!(slot.as_ref().map(|e| &e.value), None | Some(Value::Hash(_))) {
                    return (false, Err(Fail::Msg(WRONGTYPE)));
                }
                let e = slot.get_or_insert_with(|| Entry::new(Value::Hash(Arc::default())));
                let Value::Hash(h) = &mut e.value else {
                    return (false, Err(Fail::Msg(WRONGTYPE)));
                };
                let cur = match h.map().get(a[1]) {
                    None => long_double::Operand::Finite(long_double::LongDouble::ZERO),
                    Some(v) => match long_double::parse(v) {
                        Some(x) => x,
                        None => return (false, Err(Fail::Msg(b"ERR hash value is not a float"))),
                    },
                };
                let s = match float_incr(cur, by) {
                    Ok(s) => s,
                    Err(f) => return (false, Err(f)),
                };
                Arc::make_mut(h).set(a[1], s.as_bytes());
                (true, Ok(s))
            })?;
            w.bulk(v.as_bytes());
        }
        _ => unreachable!("routed to hashes by name"),
    }
    Ok(())
}
