//! SORT and SORT_RO: a list's, set's or sorted set's elements in order, by
//! their own value or by other keys (`BY pattern`, `*` replaced by the
//! element, `key->field` for a hash's field), with LIMIT, GET (`#` for the
//! element), ASC/DESC, ALPHA and STORE, as Redis 7.0 runs them: equal
//! scores are ordered by the elements' bytes, so the result is always the
//! same. A command with a BY or GET pattern reads keys it cannot name in
//! advance, so it holds every shard while it runs (as EXEC does); without
//! one, only its own keys.
//!
//! What this module must not do: allocate in proportion to a LIMIT (the
//! result is at most the source's length).

use super::*;
use std::sync::Arc;

/// Runs SORT or SORT_RO (`name` is lowercase).
pub(super) fn run<'d>(
    name: &[u8],
    a: &[&[u8]],
    db: &'d Db,
    w: &mut Reply<'_>,
    held: Option<&mut Guard<'d>>,
) -> Res {
    let nm = std::str::from_utf8(name).unwrap_or("?");
    arity(!a.is_empty(), nm)?;
    let read_only = name == b"sort_ro";
    let (mut desc, mut alpha) = (false, false);
    let mut limit: Option<(i64, i64)> = None;
    let mut by: Option<&[u8]> = None;
    let mut gets: Vec<&[u8]> = Vec::new();
    let mut store: Option<&[u8]> = None;
    let mut j = 1;
    while j < a.len() {
        let left = a.len() - j - 1;
        let opt = a[j].to_ascii_lowercase();
        match opt.as_slice() {
            b"asc" => desc = false,
            b"desc" => desc = true,
            b"alpha" => alpha = true,
            b"limit" if left >= 2 => {
                limit = Some((int_arg(a[j + 1])?, int_arg(a[j + 2])?));
                j += 2;
            }
            b"store" if left >= 1 && !read_only => {
                store = Some(a[j + 1]);
                j += 1;
            }
            b"by" if left >= 1 => {
                by = Some(a[j + 1]);
                j += 1;
            }
            b"get" if left >= 1 => {
                gets.push(a[j + 1]);
                j += 1;
            }
            _ => return Err(Fail::Msg(SYNTAX)),
        }
        j += 1;
    }
    // A BY pattern without `*` does not sort (the elements keep their order).
    let mut dont_sort = by.is_some_and(|p| !p.contains(&b'*'));
    let patterns = by.is_some_and(|p| p.contains(&b'*')) || !gets.is_empty();
    let mut g = match (patterns, held) {
        (_, Some(g)) => Locks::Held(g),
        (true, None) => Locks::Own(db.lock_all(store.is_some())?),
        (false, None) => Locks::Own(match store {
            None => db.lock_one(a[0], false)?,
            Some(dst) => db.lock_keys([a[0], dst], true)?,
        }),
    };
    let (mut items, is_set): (Vec<Box<[u8]>>, bool) = match g.get(a[0]).map(|e| &e.value) {
        None => (Vec::new(), false),
        Some(Value::List(l)) => (l.items().iter().cloned().collect(), false),
        Some(Value::Set(s)) => (s.members().iter().cloned().collect(), true),
        Some(Value::ZSet(z)) => (z.ordered().iter().map(|(_, m)| m.clone()).collect(), false),
        Some(_) => return Err(Fail::Msg(WRONGTYPE)),
    };
    // A set has no order of its own: left unsorted it is sorted by its
    // bytes where the result must be the same each time (STORE).
    if dont_sort && is_set && store.is_some() {
        dont_sort = false;
        alpha = true;
        by = None;
    }
    if !dont_sort {
        let mut keyed: Vec<Keyed> = Vec::with_capacity(items.len());
        for m in items {
            let key: Option<Box<[u8]>> = match by {
                Some(p) => lookup(&mut g, p, &m).map(Into::into),
                None => Some(m.clone()),
            };
            let score = if alpha {
                0.0
            } else {
                match key.as_deref() {
                    // A missing BY key scores 0.
                    None => 0.0,
                    Some(k) => parse_sort_score(k).ok_or(Fail::Msg(
                        b"ERR One or more scores can't be converted into double",
                    ))?,
                }
            };
            keyed.push((key, score, m));
        }
        keyed.sort_by(|x, y| {
            let order = if alpha {
                // A missing BY key sorts first.
                match (&x.0, &y.0) {
                    (None, None) => std::cmp::Ordering::Equal,
                    (None, Some(_)) => std::cmp::Ordering::Less,
                    (Some(_), None) => std::cmp::Ordering::Greater,
                    (Some(p), Some(q)) => p.cmp(q),
                }
            } else {
                x.1.partial_cmp(&y.1)
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then_with(|| x.2.cmp(&y.2))
            };
            if desc { order.reverse() } else { order }
        });
        items = keyed.into_iter().map(|(_, _, m)| m).collect();
    } else if desc && !is_set {
        items.reverse();
    }
    // LIMIT: a negative offset is 0, a negative count everything.
    let (start, count) = match limit {
        None => (0, items.len()),
        Some((off, cnt)) => (
            usize::try_from(off).unwrap_or(0).min(items.len()),
            usize::try_from(cnt).unwrap_or(usize::MAX),
        ),
    };
    let chosen = &items[start..items.len().min(start.saturating_add(count))];
    let mut out: Vec<Option<Box<[u8]>>> = Vec::with_capacity(chosen.len() * gets.len().max(1));
    for m in chosen {
        if gets.is_empty() {
            out.push(Some(m.clone()));
        }
        for p in &gets {
            out.push(if *p == b"#" {
                Some(m.clone())
            } else {
                lookup(&mut g, p, m).map(Into::into)
            });
        }
    }
    match store {
        Some(dst) => {
            let len = out.len();
            let mut list = crate::db::List::default();
            for v in &out {
                // A missing GET stores an empty string, as Redis.
                list.push(v.as_deref().unwrap_or_default(), false);
            }
            store_result(&mut g, dst, (len > 0).then(|| Value::List(Arc::new(list))));
            w.int(len as i64);
        }
        None => {
            w.array(out.len());
            for v in &out {
                match v {
                    Some(v) => w.bulk(v),
                    None => w.nil(),
                }
            }
        }
    }
    Ok(())
}

/// The value a BY or GET `pattern` names for `element`: its first `*`
/// replaced by the element; `key->field` reads a hash's field; a missing
/// key, a key of another type or a missing field is `None`.
fn lookup<'g>(g: &'g mut Guard<'_>, pattern: &[u8], element: &[u8]) -> Option<&'g [u8]> {
    let star = pattern.iter().position(|&b| b == b'*')?;
    // `->` after the `*` splits the key from a hash field.
    let arrow = pattern[star..]
        .windows(2)
        .position(|w| w == b"->")
        .map(|i| star + i)
        .filter(|&i| i + 2 < pattern.len());
    let key_end = arrow.unwrap_or(pattern.len());
    let mut key = Vec::with_capacity(key_end + element.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(element);
    key.extend_from_slice(&pattern[star + 1..key_end]);
    match (g.get(&key).map(|e| &e.value), arrow) {
        (Some(Value::Str(v)), None) => Some(v),
        (Some(Value::Hash(h)), Some(i)) => h.map().get(&pattern[i + 2..]).map(|v| &v[..]),
        _ => None,
    }
}

/// An element with what it sorts by: its BY value (`None`: a missing
/// key) and that value's score.
type Keyed = (Option<Box<[u8]>>, f64, Box<[u8]>);

/// A sort score as Redis reads it (`strtod` over the whole text, no NaN).
fn parse_sort_score(s: &[u8]) -> Option<f64> {
    parse_f64(s).filter(|v| !v.is_nan())
}
