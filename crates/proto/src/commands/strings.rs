//! String values: GET, SET and its variants, MGET, MSET(NX), GETSET, GETDEL.
//!
//! Each command is one arm of [`run`], which [`super::run`] calls for
//! this family's commands (its column of `COMMANDS`); the arms keep
//! Redis 7's replies and error texts.

use super::*;

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
        b"get" => {
            arity(n == 1, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            match g.get(a[0]).map(|e| &e.value) {
                None => w.nil(),
                Some(Value::Str(v)) => w.bulk(v),
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            }
        }
        b"set" => set(a, db, &mut held, w)?,
        b"lcs" => lcs(a, db, &mut held, w)?,
        // SUBSTR: GETRANGE's old name.
        b"getrange" | b"substr" => {
            arity(n == 3, nm)?;
            // Redis reads the offsets first, then the key.
            let (start, end) = (int_arg(a[1])?, int_arg(a[2])?);
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let v: &[u8] = match g.get(a[0]).map(|e| &e.value) {
                None => b"",
                Some(Value::Str(v)) => v,
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            };
            let len = v.len() as i64;
            if start < 0 && end < 0 && start > end {
                w.bulk(b"");
                return Ok(());
            }
            let start = if start < 0 {
                (len + start).max(0)
            } else {
                start
            };
            let end = if end < 0 { (len + end).max(0) } else { end }.min(len - 1);
            if start > end || len == 0 {
                w.bulk(b"");
            } else {
                w.bulk(&v[start as usize..=end as usize]);
            }
        }
        b"setex" | b"psetex" => {
            arity(n == 3, nm)?;
            let t = int_arg(a[1])?;
            let at = expire_time(t, name == b"setex", false, true, db.now_ms(), nm)?;
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let mut e = Entry::new(Value::Str(a[2].into()));
            e.expire_ms = at as u64;
            g.set(a[0], e);
            w.ok();
        }
        b"setnx" => {
            arity(n == 2, nm)?;
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let done = g.update(a[0], |slot| {
                if slot.is_some() {
                    (false, false)
                } else {
                    *slot = Some(Entry::new(Value::Str(a[1].into())));
                    (true, true)
                }
            });
            w.bool_int(done);
        }
        b"mget" => {
            arity(n >= 1, nm)?;
            let mut g = lock(db, &mut held, a, false)?;
            w.array(n);
            for k in a {
                match g.get(k).map(|e| &e.value) {
                    Some(Value::Str(v)) => w.bulk(v),
                    _ => w.nil(),
                }
            }
        }
        b"mset" | b"msetnx" => {
            arity(n >= 2 && n.is_multiple_of(2), nm)?;
            let keys: Vec<&[u8]> = a.iter().step_by(2).copied().collect();
            let mut g = lock(db, &mut held, &keys, true)?;
            if name == b"msetnx" && keys.iter().any(|k| g.get(k).is_some()) {
                w.int(0);
                return Ok(());
            }
            for kv in a.chunks(2) {
                g.set(kv[0], Entry::new(Value::Str(kv[1].into())));
            }
            if name == b"msetnx" { w.int(1) } else { w.ok() }
        }
        b"getex" => {
            arity(n >= 1, nm)?;
            // The options are read before the key, as Redis does.
            let now = db.now_ms();
            let deadline = match a[1..] {
                [] => None,
                [o] if o.eq_ignore_ascii_case(b"persist") => Some(0),
                [o, t] => {
                    let o = o.to_ascii_uppercase();
                    if !matches!(o.as_slice(), b"EX" | b"PX" | b"EXAT" | b"PXAT") {
                        return Err(Fail::Msg(SYNTAX));
                    }
                    let t = int_arg(t)?;
                    Some(expire_time(t, o[0] == b'E', o.len() == 4, true, now, nm)?.max(1) as u64)
                }
                _ => return Err(Fail::Msg(SYNTAX)),
            };
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let v = g.update(a[0], |slot| match slot.as_mut() {
                None => (false, Ok(None)),
                Some(e) => match &e.value {
                    Value::Str(v) => {
                        let v = v.clone();
                        match deadline {
                            Some(d) => {
                                e.expire_ms = d;
                                (true, Ok(Some(v)))
                            }
                            None => (false, Ok(Some(v))),
                        }
                    }
                    _ => (false, Err(Fail::Msg(WRONGTYPE))),
                },
            })?;
            match v {
                Some(v) => w.bulk(&v),
                None => w.nil(),
            }
        }
        b"setrange" => {
            arity(n == 3, nm)?;
            let offset = int_arg(a[1])?;
            let offset =
                usize::try_from(offset).map_err(|_| Fail::Msg(b"ERR offset is out of range"))?;
            // Redis's bound on a string (proto-max-bulk-len): checked before
            // anything grows.
            if offset.saturating_add(a[2].len()) > MAX_STRING {
                return Err(Fail::Msg(
                    b"ERR string exceeds maximum allowed size (proto-max-bulk-len)",
                ));
            }
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let len = g.update(a[0], |slot| {
                let cur: &[u8] = match slot.as_ref().map(|e| &e.value) {
                    None => b"",
                    Some(Value::Str(v)) => v,
                    Some(_) => return (false, Err(Fail::Msg(WRONGTYPE))),
                };
                if a[2].is_empty() {
                    // Nothing written: no key made either.
                    return (false, Ok(cur.len()));
                }
                let mut v = cur.to_vec();
                if v.len() < offset + a[2].len() {
                    v.resize(offset + a[2].len(), 0);
                }
                v[offset..offset + a[2].len()].copy_from_slice(a[2]);
                let len = v.len();
                set_str_keep_ttl(slot, &v);
                (true, Ok(len))
            })?;
            w.int(len as i64);
        }
        b"getset" | b"getdel" => {
            arity(n == if name == b"getset" { 2 } else { 1 }, nm)?;
            let mut g = lock(db, &mut held, &a[..1], name == b"getset")?;
            let old = g.update(a[0], |slot| {
                let old = match slot.as_ref().map(|e| &e.value) {
                    None => None,
                    Some(Value::Str(v)) => Some(v.clone()),
                    Some(_) => return (false, Err(Fail::Msg(WRONGTYPE))),
                };
                if name == b"getset" {
                    *slot = Some(Entry::new(Value::Str(a[1].into())));
                    (true, Ok(old))
                } else {
                    let changed = slot.take().is_some();
                    (changed, Ok(old))
                }
            })?;
            match old {
                Some(v) => w.bulk(&v),
                None => w.nil(),
            }
        }
        _ => unreachable!("routed to strings by name"),
    }
    Ok(())
}

fn set<'d>(a: &[&[u8]], db: &'d Db, held: &mut Option<&mut Guard<'d>>, w: &mut Reply<'_>) -> Res {
    arity(a.len() >= 2, "set")?;
    let (mut nx, mut xx, mut get, mut keep) = (false, false, false, false);
    let mut ttl: Option<(bool, i64)> = None; // (absolute, ms)
    let mut i = 2;
    while i < a.len() {
        let o = a[i].to_ascii_uppercase();
        match o.as_slice() {
            b"NX" if !xx => nx = true,
            b"XX" if !nx => xx = true,
            b"GET" => get = true,
            b"KEEPTTL" if ttl.is_none() => keep = true,
            b"EX" | b"PX" | b"EXAT" | b"PXAT" if ttl.is_none() && !keep && i + 1 < a.len() => {
                i += 1;
                let t = int_arg(a[i])?;
                let absolute = o.len() == 4;
                let at = expire_time(t, o[0] == b'E', absolute, true, db.now_ms(), "set")?;
                ttl = Some((absolute, at));
            }
            _ => return Err(Fail::Msg(SYNTAX)),
        }
        i += 1;
    }
    let mut g = lock(db, held, &a[..1], true)?;
    let r = g.update(a[0], |slot| {
        let old = match slot.as_ref().map(|e| &e.value) {
            None => None,
            Some(Value::Str(v)) => Some(v.clone()),
            Some(_) if get => return (false, Err(Fail::Msg(WRONGTYPE))),
            Some(_) => None,
        };
        if (nx && slot.is_some()) || (xx && slot.is_none()) {
            return (false, Ok((false, old)));
        }
        let old_deadline = slot.as_ref().map_or(0, |e| e.expire_ms);
        let mut e = Entry::new(Value::Str(a[1].into()));
        e.expire_ms = match ttl {
            // An absolute time in ms either way (EX/PX made absolute above).
            Some((_, at)) => at.max(1) as u64,
            None if keep => old_deadline,
            None => 0,
        };
        *slot = Some(e);
        (true, Ok((true, old)))
    })?;
    match (get, r) {
        (true, (_, Some(v))) => w.bulk(&v),
        (true, (_, None)) => w.nil(),
        (false, (true, _)) => w.ok(),
        (false, (false, _)) => w.nil(),
    }
    Ok(())
}

/// LCS: the longest common subsequence of two strings, as Redis 7.0
/// computes it (the dynamic programming table, walked back from its end),
/// with LEN, IDX (the matching ranges, from the end), MINMATCHLEN and
/// WITHMATCHLEN. The table is (len1 + 1) x (len2 + 1) 32-bit counts,
/// refused past Redis's bound (proto-max-bulk-len, 512 MiB) before it is
/// made.
fn lcs<'d>(a: &[&[u8]], db: &'d Db, held: &mut Option<&mut Guard<'d>>, w: &mut Reply<'_>) -> Res {
    arity(a.len() >= 2, "lcs")?;
    let mut g = lock(db, held, &a[..2], false)?;
    let mut text = |k: &[u8]| match g.get(k).map(|e| &e.value) {
        None => Ok(Box::default()),
        Some(Value::Str(v)) => Ok(v.clone()),
        Some(_) => Err(Fail::Msg(
            b"ERR The specified keys must contain string values",
        )),
    };
    let (x, y) = (text(a[0])?, text(a[1])?);
    drop(g);
    let (mut get_len, mut get_idx, mut with_len, mut min_len) = (false, false, false, 0u64);
    let mut j = 2;
    while j < a.len() {
        let opt = a[j].to_ascii_lowercase();
        match opt.as_slice() {
            b"idx" => get_idx = true,
            b"len" => get_len = true,
            b"withmatchlen" => with_len = true,
            b"minmatchlen" if j + 1 < a.len() => {
                min_len = u64::try_from(int_arg(a[j + 1])?).unwrap_or(0);
                j += 1;
            }
            _ => return Err(Fail::Msg(SYNTAX)),
        }
        j += 1;
    }
    if get_idx && get_len {
        return Err(Fail::Msg(
            b"ERR If you want both the length and indexes, please just use IDX.",
        ));
    }
    let (n, m) = (x.len(), y.len());
    let cells = (n as u64 + 1) * (m as u64 + 1);
    if cells * 4 > MAX_STRING as u64 {
        return Err(Fail::Msg(
            b"ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let width = m + 1;
    let mut t = vec![0u32; cells as usize];
    for i in 1..=n {
        for k in 1..=m {
            t[i * width + k] = if x[i - 1] == y[k - 1] {
                t[(i - 1) * width + k - 1] + 1
            } else {
                t[(i - 1) * width + k].max(t[i * width + k - 1])
            };
        }
    }
    let total = t[n * width + m];
    if get_len {
        w.int(i64::from(total));
        return Ok(());
    }
    // Walked back from the end: the subsequence, and its ranges as matched.
    let mut result = vec![0u8; total as usize];
    let mut ranges: Vec<[u64; 5]> = Vec::new();
    let (mut i, mut k, mut at) = (n, m, total as usize);
    let mut range: Option<[usize; 4]> = None; // a_start, a_end, b_start, b_end
    while i > 0 && k > 0 {
        let mut emit = false;
        if x[i - 1] == y[k - 1] {
            result[at - 1] = x[i - 1];
            match &mut range {
                None => range = Some([i - 1, i - 1, k - 1, k - 1]),
                Some(r) if r[0] == i && r[2] == k => {
                    r[0] -= 1;
                    r[2] -= 1;
                }
                Some(_) => emit = true,
            }
            if range.is_some_and(|r| r[0] == 0 || r[2] == 0) {
                emit = true;
            }
            at -= 1;
            i -= 1;
            k -= 1;
        } else {
            if t[(i - 1) * width + k] > t[i * width + k - 1] {
                i -= 1;
            } else {
                k -= 1;
            }
            emit = range.is_some();
        }
        if emit && let Some(r) = range.take() {
            let len = (r[1] - r[0] + 1) as u64;
            if min_len == 0 || len >= min_len {
                ranges.push([r[0] as u64, r[1] as u64, r[2] as u64, r[3] as u64, len]);
            }
        }
    }
    if !get_idx {
        w.bulk(&result);
        return Ok(());
    }
    w.map(2);
    w.bulk(b"matches");
    w.array(ranges.len());
    for r in &ranges {
        w.array(2 + usize::from(with_len));
        w.array(2);
        w.int(r[0] as i64);
        w.int(r[1] as i64);
        w.array(2);
        w.int(r[2] as i64);
        w.int(r[3] as i64);
        if with_len {
            w.int(r[4] as i64);
        }
    }
    w.bulk(b"len");
    w.int(i64::from(total));
    Ok(())
}
