//! Sorted sets: ZADD, ZINCRBY, ZSCORE, ZMSCORE, ZPOPMIN/MAX, ZRANK, ZCOUNT,
//! ZRANGE and its BYSCORE/REV forms, ZREMRANGEBYSCORE, ZREMRANGEBYRANK, and
//! the set operations ZUNION, ZINTER, ZDIFF (with their STORE forms,
//! WEIGHTS and AGGREGATE) and ZINTERCARD.
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
        b"zunion" | b"zinter" | b"zdiff" | b"zunionstore" | b"zinterstore" | b"zdiffstore"
        | b"zintercard" => set_operation(name, a, db, &mut held, w)?,
        b"zrandmember" => {
            arity(n >= 1, nm)?;
            let (count, scores) = random_args(a, b"withscores")?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let members: Vec<&(Score, Box<[u8]>)> = match g.get(a[0]).map(|e| &e.value) {
                None => Vec::new(),
                Some(Value::ZSet(z)) => z.ordered().iter().collect(),
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            };
            random_picks(w, &members, count, 1 + usize::from(scores), |w, (s, m)| {
                w.bulk(m);
                if scores {
                    w.double(s.0);
                }
            });
        }
        b"zmscore" => {
            arity(n >= 2, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let z = match g.get(a[0]).map(|e| &e.value) {
                None => None,
                Some(Value::ZSet(z)) => Some(z),
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            };
            w.array(n - 1);
            for m in &a[1..] {
                match z.and_then(|z| z.score(m)) {
                    Some(s) => w.double(s),
                    None => w.nil(),
                }
            }
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
        b"zmpop" | b"bzmpop" => multi_pop(
            name,
            a,
            db,
            &mut held,
            w,
            [b"min", b"max"],
            |v, min| match v {
                Value::ZSet(z) => Some(if min {
                    Arc::make_mut(z).pop_min()
                } else {
                    Arc::make_mut(z).pop_max()
                }),
                _ => None,
            },
            |w, (m, s)| {
                w.array(2);
                w.bulk(m);
                w.double(*s);
            },
        )?,
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
        b"zrange" | b"zrangestore" | b"zrangebyscore" | b"zrevrange" | b"zrevrangebyscore"
        | b"zrangebylex" | b"zrevrangebylex" => zrange(name, a, db, &mut held, w)?,
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

/// How ZUNION and ZINTER combine a member's weighted scores (AGGREGATE).
#[derive(Clone, Copy, PartialEq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    /// Redis's `zunionInterAggregate`: a sum that is NaN (`inf + -inf`) is 0.
    fn fold(self, target: &mut f64, v: f64) {
        match self {
            Aggregate::Sum => {
                *target += v;
                if target.is_nan() {
                    *target = 0.0;
                }
            }
            Aggregate::Min => {
                if v < *target {
                    *target = v;
                }
            }
            Aggregate::Max => {
                if v > *target {
                    *target = v;
                }
            }
        }
    }
}

/// A source of a set operation: a sorted set, or a set (every member
/// scored 1), shared so that it is walked after the locks of a read.
#[derive(Clone)]
enum Source {
    Missing,
    Sorted(Arc<ZSet>),
    Plain(Arc<crate::db::Set>),
}

/// Equal only to the same shared value (a write to it since would have
/// copied it, being shared), or both missing.
impl PartialEq for Source {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Source::Missing, Source::Missing) => true,
            (Source::Sorted(a), Source::Sorted(b)) => Arc::ptr_eq(a, b),
            (Source::Plain(a), Source::Plain(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Source {
    fn len(&self) -> usize {
        match self {
            Source::Missing => 0,
            Source::Sorted(z) => z.len(),
            Source::Plain(s) => s.members().len(),
        }
    }

    fn score(&self, m: &[u8]) -> Option<f64> {
        match self {
            Source::Missing => None,
            Source::Sorted(z) => z.score(m),
            Source::Plain(s) => s.members().contains(m).then_some(1.0),
        }
    }

    fn each(&self, mut f: impl FnMut(&[u8], f64) -> bool) {
        match self {
            Source::Missing => {}
            Source::Sorted(z) => {
                for (s, m) in z.ordered() {
                    if !f(m, s.0) {
                        return;
                    }
                }
            }
            Source::Plain(s) => {
                for m in s.members() {
                    if !f(m, 1.0) {
                        return;
                    }
                }
            }
        }
    }
}

/// ZUNION, ZINTER, ZDIFF, their STORE forms and ZINTERCARD, as Redis 7's
/// `zunionInterDiffGenericCommand`: the keys' types are checked before the
/// options are read; the sources are taken from the smallest (a member's
/// scores are combined in that order, which decides a float sum's last
/// bit, as in Redis); a set counts as a sorted set of scores 1.
fn set_operation<'d>(
    name: &[u8],
    a: &[&[u8]],
    db: &'d Db,
    held: &mut Option<&mut Guard<'d>>,
    w: &mut Reply<'_>,
) -> Res {
    let nm = std::str::from_utf8(name).unwrap_or("?");
    let store = name.ends_with(b"store");
    let card = name == b"zintercard";
    let (union, diff) = (name.starts_with(b"zunion"), name.starts_with(b"zdiff"));
    let at = usize::from(store);
    arity(a.len() > at + 1, nm)?;
    let numkeys = int_arg(a[at])?;
    if numkeys < 1 {
        return Err(Fail::Owned(
            format!("ERR at least 1 input key is needed for '{nm}' command").into_bytes(),
        ));
    }
    let keys_end = match usize::try_from(numkeys) {
        Ok(k) if k < a.len() - at => at + 1 + k,
        _ => return Err(Fail::Msg(SYNTAX)),
    };
    let sources = &a[at + 1..keys_end];
    let keys: Vec<&[u8]> = a[..keys_end]
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != at)
        .map(|(_, k)| *k)
        .collect();
    // A STORE form of its own (not inside EXEC or a script) computes with
    // the locks released too, and stores if its sources are still the
    // values it read (else it reads them again; past STORE_TRIES, it
    // computes under the locks).
    let mut unlocked_tries = if store && held.is_none() {
        super::STORE_TRIES
    } else {
        0
    };
    loop {
        let mut g = Some(lock(db, held, &keys, store)?);
        let read = read_sources(g.as_mut().expect("just locked"), sources)?;
        let mut srcs: Vec<(Source, f64)> = read.iter().map(|s| (s.clone(), 1.0)).collect();
        let (mut aggregate, mut withscores, mut limit) = (Aggregate::Sum, false, 0usize);
        let mut j = keys_end;
        while j < a.len() {
            let left = a.len() - j;
            let opt = a[j].to_ascii_lowercase();
            if !diff && !card && left > srcs.len() && opt == b"weights" {
                for (i, src) in srcs.iter_mut().enumerate() {
                    src.1 = parse_f64(a[j + 1 + i])
                        .ok_or(Fail::Msg(b"ERR weight value is not a float"))?;
                }
                j += 1 + srcs.len();
            } else if !diff && !card && left >= 2 && opt == b"aggregate" {
                aggregate = match a[j + 1].to_ascii_lowercase().as_slice() {
                    b"sum" => Aggregate::Sum,
                    b"min" => Aggregate::Min,
                    b"max" => Aggregate::Max,
                    _ => return Err(Fail::Msg(SYNTAX)),
                };
                j += 2;
            } else if !store && !card && opt == b"withscores" {
                withscores = true;
                j += 1;
            } else if card && left >= 2 && opt == b"limit" {
                limit = card_limit(a[j + 1])?;
                j += 2;
            } else {
                return Err(Fail::Msg(SYNTAX));
            }
        }
        if !store || unlocked_tries > 0 {
            // Only read from here: the sources are walked unlocked.
            g = None;
        }
        let mut result = ZSet::default();
        let mut count = 0usize;
        if diff {
            let (first, rest) = srcs.split_first().expect("at least one key");
            first.0.each(|m, s| {
                if rest.iter().all(|(o, _)| o.score(m).is_none()) {
                    result.insert(m, s);
                }
                true
            });
        } else {
            // Stable: equal sizes keep the order given.
            srcs.sort_by_key(|(s, _)| s.len());
            if union {
                for (src, weight) in &srcs {
                    src.each(|m, s| {
                        let mut v = weight * s;
                        if v.is_nan() {
                            v = 0.0;
                        }
                        match result.score(m) {
                            Some(mut acc) => {
                                aggregate.fold(&mut acc, v);
                                result.insert(m, acc);
                            }
                            None => {
                                result.insert(m, v);
                            }
                        }
                        true
                    });
                }
            } else {
                let (first, rest) = srcs.split_first().expect("at least one key");
                first.0.each(|m, s| {
                    let mut acc = first.1 * s;
                    if acc.is_nan() {
                        acc = 0.0;
                    }
                    for (o, weight) in rest {
                        let Some(v) = o.score(m) else {
                            return true;
                        };
                        aggregate.fold(&mut acc, v * weight);
                    }
                    if card {
                        count += 1;
                        return limit == 0 || count < limit;
                    }
                    result.insert(m, acc);
                    true
                });
            }
        }
        if card {
            w.int(count as i64);
        } else if store {
            // The result replaces the destination, whatever it held; an empty
            // one deletes it.
            let len = result.len();
            let value = (len > 0).then(|| Value::ZSet(Arc::new(result)));
            let g = match g {
                Some(g) => g,
                None => {
                    match relock_unchanged(db, held, &keys, |g| read_sources(g, sources), &read)? {
                        Some(g) => g,
                        None => {
                            unlocked_tries -= 1;
                            continue;
                        }
                    }
                }
            };
            store_then_free(g, a[0], value);
            w.int(len as i64);
        } else {
            scored_members(w, result.ordered().iter(), result.len(), withscores);
        }
        return Ok(());
    }
}

/// The sources at `keys` (shared: `Arc` clones), or WRONGTYPE.
fn read_sources(g: &mut Guard<'_>, keys: &[&[u8]]) -> Result<Vec<Source>, Fail> {
    keys.iter()
        .map(|k| match g.get(k).map(|e| &e.value) {
            None => Ok(Source::Missing),
            Some(Value::ZSet(z)) => Ok(Source::Sorted(Arc::clone(z))),
            Some(Value::Set(s)) => Ok(Source::Plain(Arc::clone(s))),
            Some(_) => Err(Fail::Msg(WRONGTYPE)),
        })
        .collect()
}

/// A sorted set's members in order, with their scores when asked (RESP3:
/// a pair each), as ZRANGE answers.
fn scored_members<'a>(
    w: &mut Reply<'_>,
    items: impl Iterator<Item = &'a (Score, Box<[u8]>)>,
    len: usize,
    withscores: bool,
) {
    if withscores && w.resp3 {
        w.array(len);
        for (s, m) in items {
            w.array(2);
            w.bulk(m);
            w.double(s.0);
        }
    } else {
        w.array(len * if withscores { 2 } else { 1 });
        for (s, m) in items {
            w.bulk(m);
            if withscores {
                w.double(s.0);
            }
        }
    }
}

fn zrange<'d>(
    name: &[u8],
    a: &[&[u8]],
    db: &'d Db,
    held: &mut Option<&mut Guard<'d>>,
    w: &mut Reply<'_>,
) -> Res {
    // ZRANGESTORE DST SRC ...: ZRANGE SRC ... whose result replaces DST.
    let store = name == b"zrangestore";
    arity(
        a.len() >= 3 + usize::from(store),
        std::str::from_utf8(name).unwrap_or("zrange"),
    )?;
    let (dst, a) = if store {
        (a[0], &a[1..])
    } else {
        (&b""[..], a)
    };
    let full = name == b"zrange" || store;
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
            b"WITHSCORES" if !store => withscores = true,
            b"BYSCORE" if full => by_score = true,
            b"BYLEX" if full => by_lex = true,
            b"REV" if full => rev = true,
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
    // Walked after the lock (see `snapshot`); a STORE of its own (not
    // inside EXEC or a script) computes unlocked too and stores if its
    // source is still the value it read (else it reads it again; past
    // STORE_TRIES, it computes under the locks).
    let mut unlocked_tries = if store && held.is_none() {
        super::STORE_TRIES
    } else {
        0
    };
    let read = |g: &mut Guard<'_>| Ok(vec![SameValue(g.get(a[0]).map(|e| e.value.clone()))]);
    loop {
        let mut g = None;
        let value = if store {
            let g = g.insert(lock(db, held, &[dst, a[0]], true)?);
            read(g)?.pop().and_then(|v| v.0)
        } else {
            snapshot(db, held, a[0])?
        };
        if unlocked_tries > 0 {
            g = None;
        }
        let empty = ZSet::default();
        let z = match value.as_ref() {
            None if store => &empty,
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
        let len = items.len();
        if !store {
            scored_members(w, items.into_iter(), len, withscores);
            return Ok(());
        }
        let mut result = ZSet::default();
        for (s, m) in items {
            result.insert(m, s.0);
        }
        let stored = (len > 0).then(|| Value::ZSet(Arc::new(result)));
        let g = match g {
            Some(g) => g,
            None => {
                let was = [SameValue(value.clone())];
                match relock_unchanged(db, held, &[dst, a[0]], read, &was)? {
                    Some(g) => g,
                    None => {
                        unlocked_tries -= 1;
                        continue;
                    }
                }
            }
        };
        store_then_free(g, dst, stored);
        w.int(len as i64);
        return Ok(());
    }
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
