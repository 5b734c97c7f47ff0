//! SORT and SORT_RO: a list's, set's or sorted set's elements in order, by
//! their own value or by other keys (`BY pattern`, `*` replaced by the
//! element, `key->field` for a hash's field), with LIMIT, GET (`#` for the
//! element), ASC/DESC, ALPHA and STORE, as Redis 7.0 runs them: equal
//! scores are ordered by the elements' bytes, so the result is always the
//! same. A command with a BY or GET pattern reads keys it cannot name in
//! advance: it reads each under its own shard's lock and answers only if
//! the database's write sequence did not move meanwhile (one consistent
//! view), and holds every shard (as EXEC does) only after two views that
//! changed under it, or inside EXEC or a script; without a pattern, it
//! holds its own keys only for the lookup and sorts a snapshot of its
//! source after the lock, and its STORE form stores only if the source is
//! still the value it sorted (as SUNIONSTORE and ZRANGESTORE).
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
    mut held: Option<&mut Guard<'d>>,
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
    let order = Order {
        desc,
        alpha,
        limit,
        by,
        gets: &gets,
        stores: store.is_some(),
    };
    if order.patterns() {
        // It reads keys it cannot name in advance. Alone (not inside EXEC
        // or a script), it reads each under its own shard's lock, and
        // answers if nothing changed anywhere meanwhile (`Db::write_seq`):
        // a consistent view, as if it ran alone, without holding every
        // shard while it sorts. Past STORE_TRIES changed views, or inside
        // EXEC, it holds every shard, as EXEC does.
        if held.is_none() {
            for _ in 0..super::STORE_TRIES {
                if sort_unlocked(db, a[0], &order, store, w)? {
                    return Ok(());
                }
            }
        }
        let mut g = match held {
            Some(g) => Locks::Held(g),
            None => Locks::Own(db.lock_all(store.is_some())?),
        };
        let (items, is_set) = elements(g.get(a[0]).map(|e| &e.value))?;
        // Under a script's locks, a pattern may name a key they do not
        // hold: refused, as an undeclared key is.
        let mut unheld = false;
        let out = order.apply(items, is_set, |p, m| {
            let key = pattern_key(p, m)?;
            if !g.holds(&key) {
                unheld = true;
                return None;
            }
            pattern_value(&mut g, &key, p).map(Into::into)
        })?;
        if unheld {
            return Err(Fail::Msg(UNDECLARED_PATTERN_KEY));
        }
        return match store {
            Some(dst) => {
                let (len, value) = stored(&out);
                let old = store_result(&mut g, dst, value);
                drop(g);
                drop(old);
                w.int(len as i64);
                Ok(())
            }
            None => reply(w, &out),
        };
    }
    // Its own keys only, and walked after the lock (see `snapshot`); a
    // STORE of its own (not inside EXEC or a script) sorts unlocked too and
    // stores if its source is still the value it read (else it reads it
    // again; past STORE_TRIES, it sorts under the locks).
    let mut unlocked_tries = if store.is_some() && held.is_none() {
        super::STORE_TRIES
    } else {
        0
    };
    let read = |g: &mut Guard<'_>| Ok(vec![SameValue(g.get(a[0]).map(|e| e.value.clone()))]);
    loop {
        let mut g = None;
        let value = match store {
            Some(dst) => {
                let g = g.insert(lock(db, &mut held, &[a[0], dst], true)?);
                read(g)?.pop().and_then(|v| v.0)
            }
            None => snapshot(db, &mut held, a[0])?,
        };
        if unlocked_tries > 0 {
            g = None;
        }
        let (items, is_set) = elements(value.as_ref())?;
        // No pattern: nothing is looked up.
        let out = order.apply(items, is_set, |_, _| None)?;
        let Some(dst) = store else {
            return reply(w, &out);
        };
        let (len, result) = stored(&out);
        let g = match g {
            Some(g) => g,
            None => {
                let was = [SameValue(value.clone())];
                match relock_unchanged(db, &mut held, &[a[0], dst], read, &was)? {
                    Some(g) => g,
                    None => {
                        unlocked_tries -= 1;
                        continue;
                    }
                }
            }
        };
        store_then_free(g, dst, result);
        w.int(len as i64);
        return Ok(());
    }
}

/// SORT's refusal of a BY or GET pattern that names a key the caller's
/// locks (a script's declared keys) do not hold.
const UNDECLARED_PATTERN_KEY: &[u8] = b"ERR SORT's BY or GET pattern named a key the script did not declare in its KEYS (psp runs a script under the locks of its declared keys)";

/// SORT with patterns, reading each key under its own shard's lock
/// only: whether it answered (nothing changed while it read, or, with
/// STORE, until it stored under its destination's lock); `false` when a
/// change came meanwhile (the caller tries again).
fn sort_unlocked(
    db: &Db,
    source: &[u8],
    order: &Order<'_>,
    store: Option<&[u8]>,
    w: &mut Reply<'_>,
) -> Result<bool, Fail> {
    let seen = db.write_seq();
    let value = snapshot(db, &mut None, source)?;
    let (items, is_set) = elements(value.as_ref())?;
    // A shard refused (a script busy on it past its threshold) is the
    // command's answer (BUSY), not a missing key.
    let mut refused = None;
    let out = order.apply(items, is_set, |p, m| {
        let key = pattern_key(p, m)?;
        match db.lock_one(&key, false) {
            Ok(mut g) => pattern_value(&mut g, &key, p).map(Into::into),
            Err(e) => {
                refused.get_or_insert(e);
                None
            }
        }
    })?;
    if let Some(e) = refused {
        return Err(e.into());
    }
    #[cfg(test)]
    super::between_compute_and_store();
    let Some(dst) = store else {
        if db.write_seq() != seen {
            return Ok(false);
        }
        reply(w, &out)?;
        return Ok(true);
    };
    let mut none = None;
    let g = lock(db, &mut none, &[dst], true)?;
    if db.write_seq() != seen {
        return Ok(false);
    }
    let (len, value) = stored(&out);
    store_then_free(g, dst, value);
    w.int(len as i64);
    Ok(true)
}

/// SORT's options, once read.
struct Order<'p> {
    desc: bool,
    alpha: bool,
    limit: Option<(i64, i64)>,
    by: Option<&'p [u8]>,
    gets: &'p [&'p [u8]],
    /// STORE: the result must be the same each time.
    stores: bool,
}

impl Order<'_> {
    /// Whether it reads keys named by its elements (BY with a `*`, GET).
    fn patterns(&self) -> bool {
        self.by.is_some_and(|p| p.contains(&b'*')) || !self.gets.is_empty()
    }

    /// The result: `items` ordered, limited and mapped through the GET
    /// patterns; `lookup` reads what a pattern names for an element.
    fn apply(
        &self,
        mut items: Vec<Box<[u8]>>,
        is_set: bool,
        mut lookup: impl FnMut(&[u8], &[u8]) -> Option<Box<[u8]>>,
    ) -> Result<Vec<Option<Box<[u8]>>>, Fail> {
        let (desc, mut alpha, mut by) = (self.desc, self.alpha, self.by);
        // A BY pattern without `*` does not sort (the elements keep their order).
        let mut dont_sort = by.is_some_and(|p| !p.contains(&b'*'));
        // A set has no order of its own: left unsorted it is sorted by its
        // bytes where the result must be the same each time (STORE).
        if dont_sort && is_set && self.stores {
            dont_sort = false;
            alpha = true;
            by = None;
        }
        if !dont_sort {
            let mut keyed: Vec<Keyed> = Vec::with_capacity(items.len());
            for m in items {
                let key: Option<Box<[u8]>> = match by {
                    Some(p) => lookup(p, &m),
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
        let (start, count) = match self.limit {
            None => (0, items.len()),
            Some((off, cnt)) => (
                usize::try_from(off).unwrap_or(0).min(items.len()),
                usize::try_from(cnt).unwrap_or(usize::MAX),
            ),
        };
        let chosen = &items[start..items.len().min(start.saturating_add(count))];
        let mut out = Vec::with_capacity(chosen.len() * self.gets.len().max(1));
        for m in chosen {
            if self.gets.is_empty() {
                out.push(Some(m.clone()));
            }
            for p in self.gets {
                out.push(if *p == b"#" {
                    Some(m.clone())
                } else {
                    lookup(p, m)
                });
            }
        }
        Ok(out)
    }
}

/// SORT's source's elements, and whether it is a set (no order of its own).
type Elements = (Vec<Box<[u8]>>, bool);

/// The elements of SORT's source (`None`: missing).
fn elements(value: Option<&Value>) -> Result<Elements, Fail> {
    Ok(match value {
        None => (Vec::new(), false),
        Some(Value::List(l)) => (l.items().iter().cloned().collect(), false),
        Some(Value::Set(s)) => (s.members().iter().cloned().collect(), true),
        Some(Value::ZSet(z)) => (z.ordered().iter().map(|(_, m)| m.clone()).collect(), false),
        Some(_) => return Err(Fail::Msg(WRONGTYPE)),
    })
}

/// What STORE puts in its destination: a list of the result (a missing
/// GET stores an empty string, as Redis), none when it is empty; and its
/// length.
fn stored(out: &[Option<Box<[u8]>>]) -> (usize, Option<Value>) {
    let mut list = crate::db::List::default();
    for v in out {
        list.push(v.as_deref().unwrap_or_default(), false);
    }
    (
        out.len(),
        (!out.is_empty()).then(|| Value::List(Arc::new(list))),
    )
}

/// SORT's reply without STORE: the result, a missing GET as nil.
fn reply(w: &mut Reply<'_>, out: &[Option<Box<[u8]>>]) -> Res {
    w.array(out.len());
    for v in out {
        match v {
            Some(v) => w.bulk(v),
            None => w.nil(),
        }
    }
    Ok(())
}

/// Where `pattern` splits a hash field from its key: its `->` after the
/// `*`, if a field follows.
fn field_arrow(pattern: &[u8], star: usize) -> Option<usize> {
    pattern[star..]
        .windows(2)
        .position(|w| w == b"->")
        .map(|i| star + i)
        .filter(|&i| i + 2 < pattern.len())
}

/// The key a BY or GET `pattern` names for `element`: its first `*`
/// replaced by the element, up to a `->` (`None`: no `*`).
fn pattern_key(pattern: &[u8], element: &[u8]) -> Option<Vec<u8>> {
    let star = pattern.iter().position(|&b| b == b'*')?;
    let key_end = field_arrow(pattern, star).unwrap_or(pattern.len());
    let mut key = Vec::with_capacity(key_end + element.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(element);
    key.extend_from_slice(&pattern[star + 1..key_end]);
    Some(key)
}

/// What `pattern` reads at `key` (its shard locked by `g`): a string, or
/// the hash field after its `->`.
fn pattern_value<'g>(g: &'g mut Guard<'_>, key: &[u8], pattern: &[u8]) -> Option<&'g [u8]> {
    let star = pattern.iter().position(|&b| b == b'*')?;
    match (g.get(key).map(|e| &e.value), field_arrow(pattern, star)) {
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
