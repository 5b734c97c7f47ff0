//! Streams: XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM (what job queues
//! such as RQ record results with). Consumer groups and XREAD are not
//! here.
//!
//! Trimming with `~` keeps Redis's observable behaviour for entries added
//! in order: Redis frees whole nodes of 100 entries (its default
//! `stream-node-max-entries`), so an approximate trim removes the oldest
//! entries in blocks of 100, and only while a whole block can go; `=`
//! trims exactly.
//!
//! Each command is one arm of [`run`], which [`super::run`] calls for
//! this family's commands (its column of `COMMANDS`); the arms keep
//! Redis 7's replies and error texts.

use super::*;
use crate::db::{Stream, StreamId};
use std::sync::Arc;

const BAD_ID: &[u8] = b"ERR Invalid stream ID specified as stream command argument";
const NOT_BIGGER: &[u8] =
    b"ERR The ID specified in XADD is equal or smaller than the target stream top item";
/// Entries of one of Redis's stream nodes: what an approximate trim frees
/// at a time.
const NODE_ENTRIES: usize = 100;

/// Runs one of this family's commands (`name` is lowercase).
pub(super) fn run<'d>(
    name: &[u8],
    a: &[&[u8]],
    db: &'d Db,
    w: &mut Reply<'_>,
    mut held: Option<&mut Guard<'d>>,
) -> Res {
    let nm = std::str::from_utf8(name).unwrap_or("?");
    match name {
        b"xadd" => {
            let (mut i, mut nomkstream, mut trim) = (1, false, None);
            loop {
                let opt = a.get(i).map(|o| o.to_ascii_lowercase());
                match opt.as_deref() {
                    Some(b"nomkstream") => {
                        nomkstream = true;
                        i += 1;
                    }
                    Some(b"maxlen" | b"minid") => {
                        let (t, used) = parse_trim(&a[i..])?;
                        trim = Some(t);
                        i += used;
                    }
                    _ => break,
                }
            }
            let rest = &a[i..];
            if rest.len() < 3 || rest.len().is_multiple_of(2) {
                return Err(Fail::Arity(nm.into()));
            }
            let wanted = parse_add_id(rest[0])?;
            let now = db.now_ms();
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let id = g.update(a[0], |slot| {
                // The id first: a refused XADD makes no key.
                let last = match slot.as_ref().map(|e| &e.value) {
                    None if nomkstream => return (false, Ok(None)),
                    None => StreamId::default(),
                    Some(Value::Stream(s)) => s.last(),
                    Some(_) => return (false, Err(Fail::Msg(WRONGTYPE))),
                };
                let id = match next_id(last, wanted, now) {
                    Ok(id) => id,
                    Err(f) => return (false, Err(f)),
                };
                let e = slot.get_or_insert_with(|| Entry::new(Value::Stream(Arc::default())));
                let Value::Stream(s) = &mut e.value else {
                    unreachable!("checked above");
                };
                let s = Arc::make_mut(s);
                s.append(id, &rest[1..]);
                if let Some(t) = &trim {
                    apply_trim(s, t);
                }
                (true, Ok(Some(id)))
            })?;
            match id {
                Some(id) => {
                    // A reader blocked in XREAD may now have an entry.
                    crate::blocking::wake();
                    let mut b = Vec::new();
                    id.write(&mut b);
                    w.bulk(&b);
                }
                None => w.nil(),
            }
        }
        b"xlen" => {
            arity(a.len() == 1, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let n = match g.get(a[0]).map(|e| &e.value) {
                None => 0,
                Some(Value::Stream(s)) => s.len(),
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            };
            w.int(n as i64);
        }
        b"xrange" | b"xrevrange" => {
            let rev = name == b"xrevrange";
            let (lo, hi) = if rev { (a[2], a[1]) } else { (a[1], a[2]) };
            let start = parse_bound(lo, false)?;
            let end = parse_bound(hi, true)?;
            let count = match &a[3..] {
                [] => None,
                [c, n] if c.eq_ignore_ascii_case(b"count") => {
                    Some(usize::try_from(int_arg(n)?).unwrap_or(0))
                }
                _ => return Err(Fail::Msg(SYNTAX)),
            };
            let value = snapshot(db, &mut held, a[0])?;
            let s = match value.as_ref() {
                None => None,
                Some(Value::Stream(s)) => Some(s),
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            };
            let (Some(s), Some(start), Some(end)) = (s, start, end) else {
                w.array(0);
                return Ok(());
            };
            if count == Some(0) {
                // Redis answers a count of 0 (or less) with a null.
                w.nil_array();
                return Ok(());
            }
            if start > end {
                w.array(0);
                return Ok(());
            }
            let range = s.entries().range(start..=end);
            let take = count.unwrap_or(usize::MAX);
            let picked: Vec<_> = if rev {
                range.rev().take(take).collect()
            } else {
                range.take(take).collect()
            };
            w.array(picked.len());
            let mut b = Vec::new();
            for (id, fields) in picked {
                write_entry(w, *id, fields, &mut b);
            }
        }
        b"xdel" => {
            let ids = a[1..]
                .iter()
                .map(|s| parse_full_id(s, 0))
                .collect::<Result<Vec<_>, _>>()?;
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let n = g.update(a[0], |slot| match slot.as_mut().map(|e| &mut e.value) {
                None => (false, Ok(0)),
                Some(Value::Stream(s)) => {
                    let s = Arc::make_mut(s);
                    let n = ids.iter().filter(|&&id| s.remove(id)).count();
                    (n > 0, Ok(n))
                }
                Some(_) => (false, Err(Fail::Msg(WRONGTYPE))),
            })?;
            w.int(n as i64);
        }
        b"xtrim" => {
            let (t, used) = parse_trim(&a[1..])?;
            if used != a.len() - 1 {
                return Err(Fail::Msg(SYNTAX));
            }
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let n = g.update(a[0], |slot| match slot.as_mut().map(|e| &mut e.value) {
                None => (false, Ok(0)),
                Some(Value::Stream(s)) => {
                    let n = apply_trim(Arc::make_mut(s), &t);
                    (n > 0, Ok(n))
                }
                Some(_) => (false, Err(Fail::Msg(WRONGTYPE))),
            })?;
            w.int(n as i64);
        }
        b"xread" => return xread(a, db, w, held),
        _ => unreachable!("routed to streams by name"),
    }
    Ok(())
}

/// One entry as XRANGE and XREAD give it: `[id, [field, value, ...]]`
/// (`b`: a scratch buffer for the id).
fn write_entry(w: &mut Reply<'_>, id: StreamId, fields: &[Box<[u8]>], b: &mut Vec<u8>) {
    w.array(2);
    b.clear();
    id.write(b);
    w.bulk(b);
    w.array(fields.len());
    for f in fields {
        w.bulk(f);
    }
}

/// A stream entry read out: its id and its fields and values.
type StreamEntry = (StreamId, Box<[Box<[u8]>]>);

/// XREAD [COUNT n] [BLOCK ms] STREAMS key... id...: each stream's entries
/// after its id (`$`: its last id now), at most `n` each; none: a null, or
/// with BLOCK (a connection's own command, not inside MULTI or a script)
/// a block reply whose command to run again has each `$` resolved, so a
/// woken run reads what came after the block.
fn xread<'d>(a: &[&[u8]], db: &'d Db, w: &mut Reply<'_>, mut held: Option<&mut Guard<'d>>) -> Res {
    let (mut count, mut block_ms, mut i) = (None, None, 0);
    loop {
        let opt = a.get(i).map(|o| o.to_ascii_lowercase());
        match opt.as_deref() {
            Some(b"count") => {
                let n = int_arg(a.get(i + 1).ok_or(Fail::Msg(SYNTAX))?)?;
                count = Some(usize::try_from(n).unwrap_or(0));
                i += 2;
            }
            Some(b"block") => {
                let ms = int_arg(a.get(i + 1).ok_or(Fail::Msg(SYNTAX))?)
                    .map_err(|_| Fail::Msg(b"ERR timeout is not an integer or out of range"))?;
                if ms < 0 {
                    return Err(Fail::Msg(b"ERR timeout is negative"));
                }
                block_ms = Some(ms as u64);
                i += 2;
            }
            Some(b"streams") => {
                i += 1;
                break;
            }
            _ => return Err(Fail::Msg(SYNTAX)),
        }
    }
    let rest = &a[i..];
    if rest.is_empty() || rest.len() % 2 == 1 {
        return Err(Fail::Msg(
            b"ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
        ));
    }
    let (keys, ids) = rest.split_at(rest.len() / 2);
    let blocks = held.is_none();
    let mut g = lock(db, &mut held, keys, false)?;
    // `$`: the stream's last id now (0-0 for a missing stream).
    let mut after = Vec::with_capacity(keys.len());
    for (k, id) in keys.iter().zip(ids) {
        let last = match g.get(k).map(|e| &e.value) {
            None => StreamId::default(),
            Some(Value::Stream(s)) => s.last(),
            Some(_) => return Err(Fail::Msg(WRONGTYPE)),
        };
        after.push(if *id == b"$" {
            last
        } else {
            parse_full_id(id, 0)?
        });
    }
    let take = count.filter(|&c| c > 0).unwrap_or(usize::MAX);
    let mut found: Vec<(&[u8], Vec<StreamEntry>)> = Vec::new();
    for (k, from) in keys.iter().zip(&after) {
        if let Some(Value::Stream(s)) = g.get(k).map(|e| &e.value) {
            let entries: Vec<_> = s
                .entries()
                .range((std::ops::Bound::Excluded(*from), std::ops::Bound::Unbounded))
                .take(take)
                .map(|(id, f)| (*id, f.clone()))
                .collect();
            if !entries.is_empty() {
                found.push((k, entries));
            }
        }
    }
    if found.is_empty() {
        if let Some(ms) = block_ms.filter(|_| blocks) {
            let mut words: Vec<Vec<u8>> = vec![b"XREAD".to_vec()];
            if let Some(c) = count {
                words.extend([b"COUNT".to_vec(), c.to_string().into_bytes()]);
            }
            words.extend([
                b"BLOCK".to_vec(),
                ms.to_string().into_bytes(),
                b"STREAMS".to_vec(),
            ]);
            words.extend(keys.iter().map(|k| k.to_vec()));
            words.extend(after.iter().map(|id| {
                let mut b = Vec::new();
                id.write(&mut b);
                b
            }));
            let refs: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
            let mut again = Vec::new();
            crate::resp::wire::write_command(&refs, &mut again);
            let Fail::Block {
                deadline_ms,
                timeout_reply,
                ..
            } = block(ms, g.now_ms, w.resp3)
            else {
                unreachable!("block() makes a block");
            };
            return Err(Fail::Block {
                deadline_ms,
                timeout_reply,
                again: Some(again),
            });
        }
        w.nil_array();
        return Ok(());
    }
    // RESP3: a map of key to entries; RESP2: an array of [key, entries].
    if w.resp3 {
        w.map(found.len());
    } else {
        w.array(found.len());
    }
    let mut b = Vec::new();
    for (k, entries) in found {
        if !w.resp3 {
            w.array(2);
        }
        w.bulk(k);
        w.array(entries.len());
        for (id, fields) in &entries {
            write_entry(w, *id, fields, &mut b);
        }
    }
    Ok(())
}

/// A trim: keep at most `max` entries, or none below `min_id`; `exact`
/// (`=`) or in whole nodes (`~`) removing at most `limit`.
#[derive(Debug, Clone, Copy)]
struct Trim {
    max_len: Option<usize>,
    min_id: Option<StreamId>,
    exact: bool,
    limit: usize,
}

/// `MAXLEN|MINID [=|~] threshold [LIMIT count]` at the start of `a`; the
/// trim and the words it took.
fn parse_trim(a: &[&[u8]]) -> Result<(Trim, usize), Fail> {
    let by_len = a[0].eq_ignore_ascii_case(b"maxlen");
    if !by_len && !a[0].eq_ignore_ascii_case(b"minid") {
        return Err(Fail::Msg(SYNTAX));
    }
    let mut i = 1;
    let mut exact = true;
    match a.get(i).copied() {
        Some(b"~") => {
            exact = false;
            i += 1;
        }
        Some(b"=") => i += 1,
        _ => {}
    }
    let Some(threshold) = a.get(i) else {
        return Err(Fail::Msg(SYNTAX));
    };
    i += 1;
    let (max_len, min_id) = if by_len {
        let n = int_arg(threshold)?;
        if n < 0 {
            return Err(Fail::Msg(b"ERR The MAXLEN argument must be >= 0."));
        }
        (Some(n as usize), None)
    } else {
        (None, Some(parse_full_id(threshold, 0)?))
    };
    // Redis's default for `~`: 100 nodes' worth.
    let mut limit = if exact {
        usize::MAX
    } else {
        100 * NODE_ENTRIES
    };
    if a.get(i).is_some_and(|o| o.eq_ignore_ascii_case(b"limit")) {
        let n = int_arg(a.get(i + 1).ok_or(Fail::Msg(SYNTAX))?)?;
        if n < 0 {
            return Err(Fail::Msg(b"ERR The LIMIT argument must be >= 0."));
        }
        if exact {
            return Err(Fail::Msg(
                b"ERR syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
        limit = if n == 0 { usize::MAX } else { n as usize };
        i += 2;
    }
    Ok((
        Trim {
            max_len,
            min_id,
            exact,
            limit,
        },
        i,
    ))
}

/// Trims `s` as `t` says; returns the entries removed.
fn apply_trim(s: &mut Stream, t: &Trim) -> usize {
    let mut removed = 0;
    if t.exact {
        while match (t.max_len, t.min_id) {
            (Some(max), _) => s.len() > max,
            (_, Some(min)) => s.entries().keys().next().is_some_and(|&id| id < min),
            _ => false,
        } {
            s.pop_oldest();
            removed += 1;
        }
        return removed;
    }
    // Whole nodes, oldest first, as Redis frees them: a node goes when
    // what is left without it still holds MAXLEN, or when its last id is
    // below MINID; never past the limit.
    loop {
        let node = s.len().min(NODE_ENTRIES);
        if node == 0 || removed + node > t.limit {
            return removed;
        }
        let goes = match (t.max_len, t.min_id) {
            (Some(max), _) => s.len() - node >= max,
            (_, Some(min)) => s.entries().keys().nth(node - 1).is_some_and(|&id| id < min),
            _ => false,
        };
        if !goes {
            return removed;
        }
        for _ in 0..node {
            s.pop_oldest();
        }
        removed += node;
    }
}

/// What XADD's id asks: the next one (`*`), the next within `ms`
/// (`ms-*`), or exactly one.
#[derive(Debug, Clone, Copy)]
enum Wanted {
    Auto,
    SeqOf(u64),
    Exact(StreamId),
}

fn parse_add_id(s: &[u8]) -> Result<Wanted, Fail> {
    if s == b"*" {
        return Ok(Wanted::Auto);
    }
    if let Some(ms) = s.strip_suffix(b"-*") {
        return parse_u64(ms).map(Wanted::SeqOf).ok_or(Fail::Msg(BAD_ID));
    }
    parse_full_id(s, 0).map(Wanted::Exact)
}

/// The id XADD gives in a stream whose last id is `last`, at `now_ms`.
fn next_id(last: StreamId, wanted: Wanted, now_ms: u64) -> Result<StreamId, Fail> {
    let id = match wanted {
        Wanted::Auto if now_ms > last.ms => StreamId { ms: now_ms, seq: 0 },
        Wanted::Auto | Wanted::SeqOf(_) if last == StreamId::MAX => {
            return Err(Fail::Msg(
                b"ERR The stream has exhausted the last possible ID, unable to add more items",
            ));
        }
        Wanted::Auto if last.seq == u64::MAX => StreamId {
            ms: last.ms + 1,
            seq: 0,
        },
        Wanted::Auto => StreamId {
            ms: last.ms,
            seq: last.seq + 1,
        },
        Wanted::SeqOf(ms) if ms > last.ms => StreamId { ms, seq: 0 },
        Wanted::SeqOf(ms) if ms == last.ms && last.seq < u64::MAX => StreamId {
            ms,
            seq: last.seq + 1,
        },
        Wanted::SeqOf(_) => return Err(Fail::Msg(NOT_BIGGER)),
        Wanted::Exact(id) => id,
    };
    if id == (StreamId { ms: 0, seq: 0 }) {
        return Err(Fail::Msg(
            b"ERR The ID specified in XADD must be greater than 0-0",
        ));
    }
    if id <= last {
        return Err(Fail::Msg(NOT_BIGGER));
    }
    Ok(id)
}

/// `ms-seq`, or `ms` (then `seq` is `missing_seq`).
fn parse_full_id(s: &[u8], missing_seq: u64) -> Result<StreamId, Fail> {
    let (ms, seq) = match s.iter().position(|&b| b == b'-') {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let ms = parse_u64(ms).ok_or(Fail::Msg(BAD_ID))?;
    let seq = match seq {
        Some(q) => parse_u64(q).ok_or(Fail::Msg(BAD_ID))?,
        None => missing_seq,
    };
    Ok(StreamId { ms, seq })
}

/// A range's bound: `-`, `+`, an id (an end's missing sequence is the
/// largest), or `(id` exclusive. `None`: an exclusive bound past the
/// ends (an empty range).
fn parse_bound(s: &[u8], end: bool) -> Result<Option<StreamId>, Fail> {
    match s {
        b"-" => return Ok(Some(StreamId::default())),
        b"+" => return Ok(Some(StreamId::MAX)),
        _ => {}
    }
    let missing = if end { u64::MAX } else { 0 };
    let Some(inner) = s.strip_prefix(b"(") else {
        return parse_full_id(s, missing).map(Some);
    };
    let id = parse_full_id(inner, missing)?;
    Ok(if end {
        match id {
            StreamId { ms: 0, seq: 0 } => {
                return Err(Fail::Msg(b"ERR invalid end ID for the interval"));
            }
            StreamId { ms, seq: 0 } => Some(StreamId {
                ms: ms - 1,
                seq: u64::MAX,
            }),
            StreamId { ms, seq } => Some(StreamId { ms, seq: seq - 1 }),
        }
    } else {
        match id {
            StreamId::MAX => {
                return Err(Fail::Msg(b"ERR invalid start ID for the interval"));
            }
            StreamId { ms, seq: u64::MAX } => Some(StreamId { ms: ms + 1, seq: 0 }),
            StreamId { ms, seq } => Some(StreamId { ms, seq: seq + 1 }),
        }
    })
}

fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}
