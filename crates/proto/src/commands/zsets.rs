//! Sorted sets: ZADD, ZINCRBY, ZSCORE, ZPOPMIN/MAX, ZRANK, ZCOUNT, ZRANGE and its
//! BYSCORE/REV forms, ZREMRANGEBYSCORE, ZREMRANGEBYRANK.
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
        b"zadd" => zadd(a, db, &mut held, w)?,
        b"zincrby" => {
            arity(n == 3, nm)?;
            let by = parse_f64(a[1]).ok_or(Fail::Msg(NOT_FLOAT))?;
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let v = g.update(a[0], |slot| {
                let e = slot.get_or_insert_with(|| Entry::new(Value::ZSet(Arc::default())));
                let Value::ZSet(z) = &mut e.value else {
                    return (false, Err(Fail::Msg(WRONGTYPE)));
                };
                let new = z.score(a[2]).unwrap_or(0.0) + by;
                if new.is_nan() {
                    return (
                        false,
                        Err(Fail::Msg(b"ERR resulting score is not a number (NaN)")),
                    );
                }
                Arc::make_mut(z).insert(a[2], new);
                (true, Ok(new))
            })?;
            crate::blocking::wake();
            w.double(v);
        }
        b"zscore" => {
            arity(n == 2, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            match g.get(a[0]).map(|e| &e.value) {
                None => w.nil(),
                Some(Value::ZSet(z)) => match z.score(a[1]) {
                    Some(s) => w.double(s),
                    None => w.nil(),
                },
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            }
        }
        b"zrank" | b"zrevrank" => {
            arity(n == 2, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let z = match g.get(a[0]).map(|e| &e.value) {
                None => {
                    w.nil();
                    return Ok(());
                }
                Some(Value::ZSet(z)) => z,
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            };
            match z.score(a[1]) {
                None => w.nil(),
                Some(sc) => {
                    let below = z.ordered().range(..(Score(sc), Box::from(a[1]))).count();
                    let rank = if name == b"zrank" {
                        below
                    } else {
                        z.len() - 1 - below
                    };
                    w.int(rank as i64);
                }
            }
        }
        b"zcount" | b"zlexcount" => {
            arity(n == 3, nm)?;
            // The bounds are read before the key is looked up, as Redis does.
            let (scores, lex) = if name == b"zcount" {
                (Some((score_bound(a[1])?, score_bound(a[2])?)), None)
            } else {
                (None, Some((lex_bound(a[1])?, lex_bound(a[2])?)))
            };
            let mut g = lock(db, &mut held, &a[..1], false)?;
            match g.get(a[0]).map(|e| &e.value) {
                None => w.int(0),
                Some(Value::ZSet(z)) => {
                    let count = z
                        .ordered()
                        .iter()
                        .filter(|(s, m)| {
                            scores.is_none_or(|b| within(s.0, b))
                                && lex.as_ref().is_none_or(|b| within_lex(m, b))
                        })
                        .count();
                    w.int(count as i64);
                }
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            }
        }
        b"bzpopmin" | b"bzpopmax" => {
            arity(n >= 2, nm)?;
            let timeout = block_timeout(a[n - 1])?;
            let keys = &a[..n - 1];
            let blocks = held.is_none();
            let mut g = lock(db, &mut held, keys, false)?;
            // The first key, in the order given, whose sorted set has a member.
            let min = name == b"bzpopmin";
            let popped = take_first(&mut g, keys, |v| match v {
                Value::ZSet(z) => Some(if min {
                    Arc::make_mut(z).pop_min()
                } else {
                    Arc::make_mut(z).pop_max()
                }),
                _ => None,
            })?;
            if let Some((k, (m, sc))) = popped {
                w.array(3);
                w.bulk(k);
                w.bulk(&m);
                w.double(sc);
                return Ok(());
            }
            if !blocks {
                w.nil_array();
                return Ok(());
            }
            return Err(block(timeout, g.now_ms, w.resp3));
        }
        b"zpopmin" | b"zpopmax" => {
            arity(n == 1 || n == 2, nm)?;
            let count = match a.get(1) {
                None => 1,
                Some(c) => parse_i64(c)
                    .and_then(|c| usize::try_from(c).ok())
                    .ok_or(Fail::Msg(NOT_POSITIVE))?,
            };
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let popped = g.update(a[0], |slot| match slot.as_mut().map(|e| &mut e.value) {
                None => (false, Ok(Vec::new())),
                Some(Value::ZSet(z)) => {
                    let k = count.min(z.len());
                    let v: Vec<(Box<[u8]>, f64)> = (0..k)
                        .filter_map(|_| {
                            if name == b"zpopmin" {
                                Arc::make_mut(z).pop_min()
                            } else {
                                Arc::make_mut(z).pop_max()
                            }
                        })
                        .collect();
                    (k > 0, Ok(v))
                }
                Some(_) => (false, Err(Fail::Msg(WRONGTYPE))),
            })?;
            if w.resp3 && n == 2 {
                w.array(popped.len());
                for (m, s) in &popped {
                    w.array(2);
                    w.bulk(m);
                    w.double(*s);
                }
            } else {
                w.array(2 * popped.len());
                for (m, s) in &popped {
                    w.bulk(m);
                    w.double(*s);
                }
            }
        }
        b"zrange" | b"zrangebyscore" | b"zrevrange" | b"zrevrangebyscore" | b"zrangebylex"
        | b"zrevrangebylex" => zrange(name, a, db, &mut held, w)?,
        b"zremrangebyscore" | b"zremrangebyrank" | b"zremrangebylex" => {
            arity(n == 3, nm)?;
            // The range is read before the key is looked up, as Redis does.
            let (bounds, lex, ranks) = match name {
                b"zremrangebyscore" => {
                    (Some((score_bound(a[1])?, score_bound(a[2])?)), None, (0, 0))
                }
                b"zremrangebylex" => (None, Some((lex_bound(a[1])?, lex_bound(a[2])?)), (0, 0)),
                _ => (None, None, (int_arg(a[1])?, int_arg(a[2])?)),
            };
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let removed = g.update(a[0], |slot| match slot.as_mut().map(|e| &mut e.value) {
                None => (false, Ok(0)),
                Some(Value::ZSet(z)) => {
                    let doomed: Vec<Box<[u8]>> = match (bounds, &lex) {
                        (Some(b), _) => z
                            .ordered()
                            .iter()
                            .filter(|(s, _)| within(s.0, b))
                            .map(|(_, m)| m.clone())
                            .collect(),
                        (_, Some(b)) => z
                            .ordered()
                            .iter()
                            .filter(|(_, m)| within_lex(m, b))
                            .map(|(_, m)| m.clone())
                            .collect(),
                        _ => {
                            let (s, e) = range(ranks.0, ranks.1, z.len());
                            z.ordered()
                                .iter()
                                .skip(s)
                                .take(e - s)
                                .map(|(_, m)| m.clone())
                                .collect()
                        }
                    };
                    for m in &doomed {
                        Arc::make_mut(z).remove(m);
                    }
                    (!doomed.is_empty(), Ok(doomed.len()))
                }
                Some(_) => (false, Err(Fail::Msg(WRONGTYPE))),
            })?;
            w.int(removed as i64);
        }
        _ => unreachable!("routed to zsets by name"),
    }
    Ok(())
}

fn zadd<'d>(a: &[&[u8]], db: &'d Db, held: &mut Option<&mut Guard<'d>>, w: &mut Reply<'_>) -> Res {
    arity(a.len() >= 3, "zadd")?;
    let (mut nx, mut xx, mut ch, mut incr) = (false, false, false, false);
    let (mut gt, mut lt) = (false, false);
    let mut i = 1;
    while i < a.len() {
        match a[i].to_ascii_uppercase().as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"CH" => ch = true,
            b"INCR" => incr = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            _ => break,
        }
        i += 1;
    }
    let pairs = &a[i..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(Fail::Msg(SYNTAX));
    }
    if nx && xx {
        return Err(Fail::Msg(
            b"ERR XX and NX options at the same time are not compatible",
        ));
    }
    if (gt && lt) || (nx && (gt || lt)) {
        return Err(Fail::Msg(
            b"ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if incr && pairs.len() != 2 {
        return Err(Fail::Msg(
            b"ERR INCR option supports a single increment-element pair",
        ));
    }
    let mut scored = Vec::with_capacity(pairs.len() / 2);
    for p in pairs.chunks(2) {
        scored.push((parse_f64(p[0]).ok_or(Fail::Msg(NOT_FLOAT))?, p[1]));
    }
    let mut g = lock(db, held, &a[..1], true)?;
    let r = g.update(a[0], |slot| {
        if xx && slot.is_none() {
            return (false, Ok((0, None)));
        }
        let e = slot.get_or_insert_with(|| Entry::new(Value::ZSet(Arc::<ZSet>::default())));
        let Value::ZSet(z) = &mut e.value else {
            return (false, Err(Fail::Msg(WRONGTYPE)));
        };
        let (mut added, mut changed, mut last) = (0, 0, None);
        for &(s, m) in &scored {
            let cur = z.score(m);
            if (nx && cur.is_some()) || (xx && cur.is_none()) {
                continue;
            }
            let new = if incr { cur.unwrap_or(0.0) + s } else { s };
            if new.is_nan() {
                return (
                    false,
                    Err(Fail::Msg(b"ERR resulting score is not a number (NaN)")),
                );
            }
            // GT/LT update an existing member only to a greater/lesser
            // score; new members are added all the same.
            if let Some(c) = cur
                && ((gt && new <= c) || (lt && new >= c))
            {
                continue;
            }
            if Arc::make_mut(z).insert(m, new) {
                added += 1;
            } else if cur != Some(new) {
                changed += 1;
            }
            last = Some(new);
        }
        (
            added + changed > 0,
            Ok((if ch { added + changed } else { added }, last)),
        )
    })?;
    if r.0 > 0 || r.1.is_some() {
        // A member added or changed: a parked BZPOPMIN may take it.
        crate::blocking::wake();
    }
    if incr {
        match r.1 {
            Some(s) => w.double(s),
            None => w.nil(),
        }
    } else {
        w.int(r.0 as i64);
    }
    Ok(())
}

fn zrange<'d>(
    name: &[u8],
    a: &[&[u8]],
    db: &'d Db,
    held: &mut Option<&mut Guard<'d>>,
    w: &mut Reply<'_>,
) -> Res {
    arity(a.len() >= 3, std::str::from_utf8(name).unwrap_or("zrange"))?;
    let mut by_score = name == b"zrangebyscore" || name == b"zrevrangebyscore";
    let mut by_lex = name == b"zrangebylex" || name == b"zrevrangebylex";
    // ZREVRANGE is ZRANGE ... REV (Redis parses LIMIT for it too, and then
    // refuses it as for any rank range); ZREVRANGEBYSCORE KEY MAX MIN is
    // ZRANGE KEY MAX MIN BYSCORE REV.
    let (mut withscores, mut rev) = (
        false,
        name == b"zrevrange" || name == b"zrevrangebyscore" || name == b"zrevrangebylex",
    );
    let mut limit: Option<(i64, i64)> = None;
    let mut i = 3;
    while i < a.len() {
        match a[i].to_ascii_uppercase().as_slice() {
            b"WITHSCORES" => withscores = true,
            b"BYSCORE" if name == b"zrange" => by_score = true,
            b"BYLEX" if name == b"zrange" => by_lex = true,
            b"REV" if name == b"zrange" => rev = true,
            b"LIMIT" if i + 2 < a.len() => {
                limit = Some((int_arg(a[i + 1])?, int_arg(a[i + 2])?));
                i += 2;
            }
            _ => return Err(Fail::Msg(SYNTAX)),
        }
        i += 1;
    }
    // Redis checks the arguments before it looks the key up: LIMIT with a
    // count needs BYSCORE (its offset alone is ignored by rank), then the
    // range must read.
    if by_score && by_lex {
        return Err(Fail::Msg(SYNTAX));
    }
    if by_lex && withscores {
        return Err(Fail::Msg(
            b"ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    if !by_score && !by_lex && limit.is_some_and(|(_, count)| count != -1) {
        return Err(Fail::Msg(
            b"ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    let scores = if by_score {
        let (lo, hi) = if rev { (a[2], a[1]) } else { (a[1], a[2]) };
        Some((score_bound(lo)?, score_bound(hi)?))
    } else {
        None
    };
    let lex = if by_lex {
        let (lo, hi) = if rev { (a[2], a[1]) } else { (a[1], a[2]) };
        Some((lex_bound(lo)?, lex_bound(hi)?))
    } else {
        None
    };
    let ranks = if by_score || by_lex {
        (0, 0)
    } else {
        (int_arg(a[1])?, int_arg(a[2])?)
    };
    // Walked after the lock (see `snapshot`).
    let value = snapshot(db, held, a[0])?;
    let z = match value.as_ref() {
        None => {
            w.array(0);
            return Ok(());
        }
        Some(Value::ZSet(z)) => z,
        Some(_) => return Err(Fail::Msg(WRONGTYPE)),
    };
    let items: Vec<&(Score, Box<[u8]>)> = if scores.is_some() || lex.is_some() {
        let mut v: Vec<_> = z
            .ordered()
            .iter()
            .filter(|(s, m)| {
                scores.is_none_or(|b| within(s.0, b))
                    && lex.as_ref().is_none_or(|b| within_lex(m, b))
            })
            .collect();
        if rev {
            v.reverse();
        }
        if let Some((off, cnt)) = limit {
            let off = usize::try_from(off).unwrap_or(usize::MAX);
            let cnt = usize::try_from(cnt).unwrap_or(usize::MAX);
            v = v.into_iter().skip(off).take(cnt).collect();
        }
        v
    } else {
        let (s, e) = range(ranks.0, ranks.1, z.len());
        if rev {
            z.ordered().iter().rev().skip(s).take(e - s).collect()
        } else {
            z.ordered().iter().skip(s).take(e - s).collect()
        }
    };
    if withscores && w.resp3 {
        w.array(items.len());
        for (s, m) in items {
            w.array(2);
            w.bulk(m);
            w.double(s.0);
        }
    } else {
        w.array(items.len() * if withscores { 2 } else { 1 });
        for (s, m) in items {
            w.bulk(m);
            if withscores {
                w.double(s.0);
            }
        }
    }
    Ok(())
}

/// Whether `score` lies within the bounds `((lo, lo exclusive), (hi, hi
/// exclusive))` ([`score_bound`]).
fn within(score: f64, ((lo, lo_ex), (hi, hi_ex)): ((f64, bool), (f64, bool))) -> bool {
    (if lo_ex { score > lo } else { score >= lo }) && (if hi_ex { score < hi } else { score <= hi })
}

/// A lexicographic range bound: `[x` inclusive, `(x` exclusive, `-` the
/// least, `+` the greatest.
#[derive(Debug, Clone)]
enum Lex<'a> {
    Min,
    Max,
    At(&'a [u8], bool),
}

/// A ZRANGEBYLEX bound, as Redis reads it.
fn lex_bound(s: &[u8]) -> Result<Lex<'_>, Fail> {
    match s {
        b"-" => Ok(Lex::Min),
        b"+" => Ok(Lex::Max),
        [b'[', rest @ ..] => Ok(Lex::At(rest, false)),
        [b'(', rest @ ..] => Ok(Lex::At(rest, true)),
        _ => Err(Fail::Msg(b"ERR min or max not valid string range item")),
    }
}

/// Whether member `m` lies within the lexicographic bounds `(lo, hi)`.
fn within_lex(m: &[u8], (lo, hi): &(Lex<'_>, Lex<'_>)) -> bool {
    let above = match lo {
        Lex::Min => true,
        Lex::Max => false,
        Lex::At(v, ex) => {
            if *ex {
                m > *v
            } else {
                m >= *v
            }
        }
    };
    let below = match hi {
        Lex::Min => false,
        Lex::Max => true,
        Lex::At(v, ex) => {
            if *ex {
                m < *v
            } else {
                m <= *v
            }
        }
    };
    above && below
}

/// A ZRANGEBYSCORE bound: `(x` exclusive, `-inf`/`+inf`.
fn score_bound(s: &[u8]) -> Result<(f64, bool), Fail> {
    let (ex, t) = match s.strip_prefix(b"(") {
        Some(t) => (true, t),
        None => (false, s),
    };
    let v = parse_f64(t).ok_or(Fail::Msg(b"ERR min or max is not a float"))?;
    Ok((v, ex))
}
