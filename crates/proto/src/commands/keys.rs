//! The keyspace: DEL, EXISTS, TYPE, KEYS, SCAN, and the length of any value (STRLEN, LLEN, HLEN, SCARD, ZCARD).
//!
//! Each command is one arm of [`run`], which [`super::run`] calls for
//! this family's commands (its column of `COMMANDS`); the arms keep
//! Redis 7's replies and error texts.

use super::*;

/// Runs one of this family's commands (`name` is lowercase).
/// Elements past which DEL frees a value after its lock (Redis's lazy-free
/// threshold).
const LAZY_FREE_ELEMENTS: usize = 64;

pub(super) fn run<'d>(
    name: &[u8],
    a: &[&[u8]],
    db: &'d Db,
    w: &mut Reply<'_>,
    mut held: Option<&mut Guard<'d>>,
    point: &mut dyn FnMut(),
) -> Res {
    let n = a.len();
    let nm = std::str::from_utf8(name).unwrap_or("?");
    match name {
        b"strlen" | b"llen" | b"hlen" | b"scard" | b"zcard" => {
            arity(n == 1, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let len = match (name, g.get(a[0]).map(|e| &e.value)) {
                (_, None) => 0,
                (b"strlen", Some(Value::Str(v))) => v.len(),
                (b"llen", Some(Value::List(l))) => l.len(),
                (b"hlen", Some(Value::Hash(h))) => h.len(),
                (b"scard", Some(Value::Set(s))) => s.len(),
                (b"zcard", Some(Value::ZSet(z))) => z.len(),
                _ => return Err(Fail::Msg(WRONGTYPE)),
            };
            w.int(len as i64);
        }
        b"del" | b"unlink" => {
            arity(n >= 1, nm)?;
            // A big value is freed after its shard's lock is released (as
            // Redis frees one lazily): the free walks every element.
            let mut freed = Vec::new();
            let count = {
                let mut g = lock(db, &mut held, a, false)?;
                a.iter()
                    .filter(|k| match g.remove(k) {
                        Some(e) if e.value.elements() > LAZY_FREE_ELEMENTS => {
                            freed.push(e);
                            true
                        }
                        Some(_) => true,
                        None => false,
                    })
                    .count()
            };
            drop(freed);
            w.int(count as i64);
        }
        b"rename" | b"renamenx" => {
            arity(n == 2, nm)?;
            let mut g = lock(db, &mut held, &a[..2], false)?;
            if g.get(a[0]).is_none() {
                return Err(Fail::Msg(b"ERR no such key"));
            }
            if a[0] == a[1] {
                // Renamed to itself: nothing moves.
                if name == b"rename" {
                    w.ok();
                } else {
                    w.int(0);
                }
                return Ok(());
            }
            if name == b"renamenx" && g.get(a[1]).is_some() {
                w.int(0);
                return Ok(());
            }
            // The value moves with its deadline.
            let entry = g.update(a[0], |slot| (true, slot.take()));
            if let Some(e) = entry {
                g.set(a[1], e);
            }
            if name == b"rename" {
                w.ok();
            } else {
                w.int(1);
            }
        }
        b"exists" | b"touch" => {
            arity(n >= 1, nm)?;
            let mut g = lock(db, &mut held, a, false)?;
            let count = a.iter().filter(|k| g.get(k).is_some()).count();
            w.int(count as i64);
        }
        b"copy" => {
            arity(n >= 2, nm)?;
            // Options first, then the names, then the keys, as Redis.
            let mut replace = false;
            let mut j = 2;
            while j < n {
                if a[j].eq_ignore_ascii_case(b"replace") {
                    replace = true;
                    j += 1;
                } else if a[j].eq_ignore_ascii_case(b"db") && j + 1 < n {
                    match parse_i64(a[j + 1]) {
                        None => return Err(Fail::Msg(NOT_INTEGER)),
                        // Only database 0 exists here.
                        Some(0) => {}
                        Some(_) => return Err(Fail::Msg(b"ERR DB index is out of range")),
                    }
                    j += 2;
                } else {
                    return Err(Fail::Msg(SYNTAX));
                }
            }
            if a[0] == a[1] {
                return Err(Fail::Msg(
                    b"ERR source and destination objects are the same",
                ));
            }
            let mut g = lock(db, &mut held, &a[..2], true)?;
            let Some(src) = g.get(a[0]).map(|e| (e.value.clone(), e.expire_ms)) else {
                w.int(0);
                return Ok(());
            };
            if !replace && g.get(a[1]).is_some() {
                w.int(0);
                return Ok(());
            }
            // A collection is shared until either side changes it (`Arc`).
            g.set(
                a[1],
                Entry {
                    expire_ms: src.1,
                    ..Entry::new(src.0)
                },
            );
            crate::blocking::wake();
            w.int(1);
        }
        b"object" => {
            arity(n >= 1, nm)?;
            let sub = a[0].to_ascii_lowercase();
            if sub == b"help" {
                w.array(OBJECT_HELP.len());
                for line in OBJECT_HELP {
                    w.simple(line.as_bytes());
                }
                return Ok(());
            }
            if !matches!(
                sub.as_slice(),
                b"encoding" | b"refcount" | b"idletime" | b"freq"
            ) {
                return Err(unknown_subcommand(a[0], "OBJECT"));
            }
            if n != 2 {
                return Err(Fail::Arity(format!(
                    "object|{}",
                    String::from_utf8_lossy(&sub)
                )));
            }
            let mut g = lock(db, &mut held, &a[1..2], false)?;
            let clock = g.clock();
            // Not a use of the key (Redis looks it up without touching it).
            let Some(e) = g.peek(a[1]) else {
                w.nil();
                return Ok(());
            };
            match sub.as_slice() {
                b"encoding" => w.bulk(encoding(&e.value)),
                b"refcount" => w.int(match &e.value {
                    // Redis shares the integers 0 to 9999.
                    Value::Str(s) if parse_i64(s).is_some_and(|v| (0..10_000).contains(&v)) => {
                        i64::from(i32::MAX)
                    }
                    _ => 1,
                }),
                b"idletime" => w.int(e.idle_secs(clock) as i64),
                _ => return Err(Fail::Msg(
                    b"ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
                )),
            }
        }
        b"randomkey" => {
            arity(n == 0, nm)?;
            // A random shard, then the next ones until one holds a key.
            let mut rng = random_seed();
            let first = (rng % crate::db::SHARDS as u64) as usize;
            for s in 0..crate::db::SHARDS {
                let i = (first + s) % crate::db::SHARDS;
                rng = rng.wrapping_mul(0x5851_F42D_4C95_7F2D).wrapping_add(1);
                let found = match held.as_mut() {
                    Some(g) => g.random_key_in_shard(i, rng >> 11),
                    None => db.lock_shard(i)?.random_key_in_shard(i, rng >> 11),
                };
                if let Some(k) = found {
                    w.bulk(&k);
                    return Ok(());
                }
            }
            w.nil();
        }
        b"type" => {
            arity(n == 1, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let t = g.get(a[0]).map_or("none", |e| e.value.type_name());
            w.simple(t.as_bytes());
        }
        b"keys" => {
            arity(n == 1, nm)?;
            let mut found = Vec::new();
            for i in 0..crate::db::SHARDS {
                let keep = |k: &[u8]| glob_match(a[0], k);
                match held.as_mut() {
                    Some(g) => {
                        g.keys_in_shard(i, 0, usize::MAX, keep, &mut found);
                    }
                    None => {
                        db.lock_shard(i)?
                            .keys_in_shard(i, 0, usize::MAX, keep, &mut found);
                        point();
                    }
                }
            }
            w.array(found.len());
            for k in &found {
                w.bulk(k);
            }
        }
        b"scan" => scan(a, db, &mut held, w, point)?,
        b"hscan" | b"sscan" | b"zscan" => scan_collection(name, a, db, &mut held, w)?,
        b"memory" => {
            // MEMORY USAGE key [SAMPLES n]: the store's own estimate of the
            // entry (key, value and bookkeeping), the figure its memory
            // bound counts; Redis's counts its allocator's sizes.
            if !a[0].eq_ignore_ascii_case(b"usage") {
                let mut msg = b"ERR unknown subcommand '".to_vec();
                msg.extend_from_slice(&a[0][..a[0].len().min(128)]);
                msg.extend_from_slice(b"'. Try MEMORY HELP.");
                return Err(Fail::Owned(msg));
            }
            arity(n == 2 || n == 4, "memory|usage")?;
            if n == 4 {
                if !a[2].eq_ignore_ascii_case(b"samples") {
                    return Err(Fail::Msg(SYNTAX));
                }
                int_arg(a[3])?;
            }
            let mut g = lock(db, &mut held, &a[1..2], false)?;
            match g.get(a[1]) {
                Some(e) => w.int(e.mem(a[1].len()) as i64),
                None => w.nil(),
            }
        }
        _ => unreachable!("routed to keys by name"),
    }
    Ok(())
}

/// A SCAN-family cursor.
fn scan_cursor(s: &[u8]) -> Result<u64, Fail> {
    std::str::from_utf8(s)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(Fail::Msg(b"ERR invalid cursor"))
}

/// What a SCAN-family call asks past its cursor.
struct ScanOptions<'a> {
    pattern: Option<&'a [u8]>,
    count: usize,
    /// SCAN's TYPE (lowercase).
    type_name: Option<Vec<u8>>,
}

/// The MATCH, COUNT and (`with_type`: SCAN's) TYPE options in `opts`.
fn scan_options<'a>(opts: &[&'a [u8]], with_type: bool) -> Result<ScanOptions<'a>, Fail> {
    let mut o = ScanOptions {
        pattern: None,
        count: SCAN_DEFAULT_COUNT,
        type_name: None,
    };
    for pair in opts.chunks(2) {
        let [name, value] = pair else {
            return Err(Fail::Msg(SYNTAX));
        };
        match name.to_ascii_uppercase().as_slice() {
            b"MATCH" => o.pattern = Some(value),
            b"COUNT" => {
                let c = int_arg(value)?;
                if c < 1 {
                    return Err(Fail::Msg(SYNTAX));
                }
                o.count = (c as usize).min(SCAN_MAX_COUNT);
            }
            b"TYPE" if with_type => o.type_name = Some(value.to_ascii_lowercase()),
            _ => return Err(Fail::Msg(SYNTAX)),
        }
    }
    Ok(o)
}

/// Collections up to this many elements answer HSCAN/SSCAN/ZSCAN in one
/// call, cursor 0, whatever the COUNT (Redis's compact encodings, up to
/// its default 128 entries, do the same).
const SCAN_WHOLE: usize = 128;

/// HSCAN, SSCAN, ZSCAN: the cursor is a position in the collection's
/// iteration order (a hash map's for hashes and sets, the scores' for
/// sorted sets); an element present for the whole scan is returned unless
/// the collection grew (rehashed) between two calls.
fn scan_collection<'d>(
    name: &[u8],
    a: &[&[u8]],
    db: &'d Db,
    held: &mut Option<&mut Guard<'d>>,
    w: &mut Reply<'_>,
) -> Res {
    let cursor = usize::try_from(scan_cursor(a[1])?).unwrap_or(usize::MAX);
    let ScanOptions { pattern, count, .. } = scan_options(&a[2..], false)?;
    let mut g = lock(db, held, &a[..1], false)?;
    // Each element as the words it is answered with (a field and its
    // value, a member and its score, a member).
    let items: Vec<Vec<Vec<u8>>> = match (name, g.get(a[0]).map(|e| &e.value)) {
        (_, None) => Vec::new(),
        (b"hscan", Some(Value::Hash(h))) => h
            .map()
            .iter()
            .map(|(f, v)| vec![f.to_vec(), v.to_vec()])
            .collect(),
        (b"sscan", Some(Value::Set(s))) => s.members().iter().map(|m| vec![m.to_vec()]).collect(),
        (b"zscan", Some(Value::ZSet(z))) => z
            .ordered()
            .iter()
            .map(|(sc, m)| vec![m.to_vec(), fmt_double(sc.0).into_bytes()])
            .collect(),
        _ => return Err(Fail::Msg(WRONGTYPE)),
    };
    let (from, to) = if items.len() <= SCAN_WHOLE {
        (0, items.len())
    } else {
        (
            cursor.min(items.len()),
            cursor.saturating_add(count).min(items.len()),
        )
    };
    let next = if to >= items.len() { 0 } else { to };
    let page: Vec<&Vec<Vec<u8>>> = items[from..to]
        .iter()
        .filter(|words| pattern.is_none_or(|p| glob_match(p, &words[0])))
        .collect();
    w.array(2);
    w.bulk(next.to_string().as_bytes());
    w.array(page.iter().map(|words| words.len()).sum());
    for words in page {
        for word in words {
            w.bulk(word);
        }
    }
    Ok(())
}

fn scan<'d>(
    a: &[&[u8]],
    db: &'d Db,
    held: &mut Option<&mut Guard<'d>>,
    w: &mut Reply<'_>,
    point: &mut dyn FnMut(),
) -> Res {
    arity(!a.is_empty(), "scan")?;
    let cursor = scan_cursor(a[0])?;
    let ScanOptions {
        pattern,
        count,
        type_name: ty,
    } = scan_options(&a[1..], true)?;
    // The cursor: shard in the high 16 bits, position in the shard below.
    let mut shard = (cursor >> 48) as usize;
    let mut pos = (cursor & ((1 << 48) - 1)) as usize;
    let mut found = Vec::new();
    while shard < crate::db::SHARDS && found.len() < count {
        let keep = |k: &[u8]| pattern.is_none_or(|p| glob_match(p, k));
        let want = count - found.len();
        let mut batch = Vec::new();
        let next = match held.as_mut() {
            Some(g) => g.keys_in_shard(shard, pos, want, keep, &mut batch),
            None => db
                .lock_shard(shard)?
                .keys_in_shard(shard, pos, want, keep, &mut batch),
        };
        if let Some(t) = &ty {
            let is_type = |g: &mut Guard<'_>, k: &[u8]| {
                g.get(k)
                    .is_some_and(|e| e.value.type_name().as_bytes() == t.as_slice())
            };
            let mut refused = None;
            batch.retain(|k| match held.as_mut() {
                // Inside EXEC every shard is held already (locking again
                // would wait for ourselves).
                Some(g) => is_type(g, k),
                None => match db.lock_one(k, false) {
                    Ok(mut g) => is_type(&mut g, k),
                    Err(r) => {
                        refused = Some(r);
                        false
                    }
                },
            });
            if let Some(r) = refused {
                return Err(r.into());
            }
        }
        found.extend(batch);
        if next == 0 {
            shard += 1;
            pos = 0;
        } else {
            pos = next;
        }
        if held.is_none() {
            point();
        }
    }
    let next = if shard >= crate::db::SHARDS {
        0
    } else {
        ((shard as u64) << 48) | pos as u64
    };
    w.array(2);
    w.bulk(next.to_string().as_bytes());
    w.array(found.len());
    for k in &found {
        w.bulk(k);
    }
    Ok(())
}

/// OBJECT HELP's lines, as Redis 7.0 gives them.
const OBJECT_HELP: [&str; 15] = [
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
];

/// The encoding Redis 7.0 would give `v` when built by the commands that
/// made it, at its default thresholds: a string is `int` (a 64-bit integer
/// in canonical form), `embstr` (up to 44 bytes) or `raw`; a list is a
/// `quicklist`; a hash of at most 512 fields of at most 64 bytes, and a
/// sorted set of at most 128 members of at most 64 bytes, a `listpack`; a
/// set of at most 512 integers an `intset`. Redis never converts back a
/// collection that grew past a threshold and shrank, nor a string an
/// APPEND made `raw`: such a key reads here as if it were built anew.
fn encoding(v: &Value) -> &'static [u8] {
    match v {
        Value::Str(s) if s.len() <= 20 && parse_i64(s).is_some() => b"int",
        Value::Str(s) if s.len() <= 44 => b"embstr",
        Value::Str(_) => b"raw",
        Value::List(_) => b"quicklist",
        Value::Hash(h)
            if h.map().len() <= 512
                && h.map().iter().all(|(f, v)| f.len() <= 64 && v.len() <= 64) =>
        {
            b"listpack"
        }
        Value::Hash(_) => b"hashtable",
        Value::Set(s)
            if s.members().len() <= 512 && s.members().iter().all(|m| parse_i64(m).is_some()) =>
        {
            b"intset"
        }
        Value::Set(_) => b"hashtable",
        Value::ZSet(z) if z.len() <= 128 && z.ordered().iter().all(|(_, m)| m.len() <= 64) => {
            b"listpack"
        }
        Value::ZSet(_) => b"skiplist",
        Value::Stream(_) => b"stream",
    }
}
