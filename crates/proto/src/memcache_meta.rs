//! memcached's meta commands over the in-memory database: `mg` (get),
//! `ms` (set), `md` (delete), `ma` (arithmetic), `mn` (no-op) and `me`
//! (debug), with memcached 1.6's flags and replies (`VA`, `HD`, `EN`, `NF`,
//! `NS`, `EX`, `MN`, `ME`) and its errors.
//!
//! Flags: `b` (the key in base64), `c` (return the cas unique), `f`
//! (return the client flags), `k` (return the key), `O<opaque>` (echoed,
//! at most 31 bytes), `q` (quiet: the common answer is left out: a miss of
//! `mg`, the `HD` of `ms`, `md` and `ma`), `s` (return the size), `t`
//! (return the seconds to live, -1 for none), `v` (return the value);
//! `mg`: `h` (whether the item was
//! read before: 0 or 1), `l` (seconds since it was last used), `u` (do
//! not mark it used or read), `T<ttl>` (touch: `t` shows the new TTL); `ms`: `T<ttl>`, `F<flags>`, `C<cas>`
//! (compare), `M<mode>` (`S` set, `E` add, `A` append, `P` prepend, `R`
//! replace); `md`: `C<cas>`; `ma`: `N<ttl>` (create on a miss, from
//! `J<initial>`, default 0), `D<delta>` (default 1), `T<ttl>`, `C<cas>`,
//! `M<mode>` (`I`, `+` incr; `D`, `-` decr).
//!
//! Stale-while-revalidate, as memcached keeps it (marks on the entry,
//! [`crate::db::MARK_WON`] and [`crate::db::MARK_STALE`]): `mg`'s
//! `N<ttl>` creates an empty item on a miss and answers it with `W` (this
//! client won the right to fill it); `R<ttl>` wins when the item has
//! fewer seconds to live than the token; later readers see `Z` (a win
//! was already given). `md ... I` marks an item stale instead of removing
//! it (a new cas unique; `T<ttl>` then sets its TTL), and `ms ... I`
//! with a `C` older than the item's stores the value still stale, keeping
//! the TTL: a stale item answers `X`, and its first reader wins (`W`).
//!
//! Returned flags come in the order asked, then `Z`, `X`, `W`. Not here,
//! as in memcached 1.6.18 (answered `CLIENT_ERROR invalid flag`, or
//! `invalid or duplicate flag` for `md` and `ma`): `E` (an explicit cas)
//! and `md`'s `x`. `me`'s `cls` and `size` are those memcached would
//! give the item (its default slab classes, its item header), though
//! this store keeps no slabs.

use std::io::Write as _;

use base64::Engine as _;

use super::{
    BAD_FORMAT, Db, Entry, MAX_KEY, NON_NUMERIC, OOM, OOM_STORING, Value, deadline, item,
    parse_i64, parse_u64, tokens,
};
use crate::db::{MARK_FETCHED, MARK_STALE, MARK_WON};

/// Longest opaque token memcached echoes (its token of 32 bytes holds the
/// `O`).
const MAX_OPAQUE: usize = 31;
const BAD_TOKEN: &str = "CLIENT_ERROR bad token in command line format";

/// A meta command's flags as asked: the single letters in order (for
/// the returned flags), and the tokens of those that take one.
#[derive(Default)]
struct Flags<'a> {
    order: [u8; 24],
    n: usize,
    seen: u64,
    opaque: Option<&'a [u8]>,
    ttl: Option<&'a [u8]>,
    vivify: Option<&'a [u8]>,
    recache: Option<&'a [u8]>,
    cas: Option<&'a [u8]>,
    client_flags: Option<&'a [u8]>,
    mode: Option<&'a [u8]>,
    initial: Option<&'a [u8]>,
    delta: Option<&'a [u8]>,
}

impl<'a> Flags<'a> {
    fn has(&self, f: u8) -> bool {
        self.seen & bit(f) != 0
    }
}

fn bit(f: u8) -> u64 {
    1u64 << (f & 63)
}

/// Parses `toks` as command `cmd`'s flags; `Err`: memcached's reply.
fn parse_flags<'a>(
    cmd: &[u8],
    toks: impl Iterator<Item = &'a [u8]>,
) -> Result<Flags<'a>, &'static str> {
    let strict = matches!(cmd, b"md" | b"ma");
    let (invalid, duplicate) = if strict {
        (
            "CLIENT_ERROR invalid or duplicate flag",
            "CLIENT_ERROR invalid or duplicate flag",
        )
    } else {
        ("CLIENT_ERROR invalid flag", "CLIENT_ERROR duplicate flag")
    };
    let mut f = Flags::default();
    for t in toks {
        let (letter, arg) = (t[0], &t[1..]);
        let takes = match (cmd, letter) {
            (_, b'b' | b'c' | b'k' | b'q' | b'u' | b'O') => letter == b'O',
            (b"mg", b'f' | b's' | b't' | b'v' | b'h' | b'l') => false,
            (b"mg", b'T' | b'N' | b'R') => true,
            (b"ms", b'f' | b's' | b't' | b'I') => false,
            // `N` (vivify an append's miss) is taken and, as in memcached 1.6.18,
            // does nothing: the append answers NS.
            (b"ms", b'T' | b'F' | b'C' | b'M' | b'N') => true,
            (b"md", b'I') => false,
            (b"md", b'C' | b'T') => true,
            (b"ma", b't' | b'v') => false,
            (b"ma", b'N' | b'J' | b'D' | b'T' | b'C' | b'M') => true,
            _ => return Err(invalid),
        };
        if f.has(letter) {
            return Err(duplicate);
        }
        f.seen |= bit(letter);
        if f.n == f.order.len() {
            return Err(invalid);
        }
        f.order[f.n] = letter;
        f.n += 1;
        if !takes {
            continue;
        }
        if letter == b'O' && arg.len() > MAX_OPAQUE {
            return Err("CLIENT_ERROR opaque token too long");
        }
        // md and ma answer a bad token as a bad flag.
        let bad_token = if strict { invalid } else { BAD_TOKEN };
        let numeric = !matches!(letter, b'O' | b'M' | b'F');
        if numeric && parse_i64(arg).is_none() && parse_u64(arg).is_none() {
            return Err(bad_token);
        }
        if letter == b'M' && arg.is_empty() {
            return Err(bad_token);
        }
        let slot = match letter {
            b'O' => &mut f.opaque,
            b'T' => &mut f.ttl,
            b'N' => &mut f.vivify,
            b'R' => &mut f.recache,
            b'C' => &mut f.cas,
            b'F' => &mut f.client_flags,
            b'M' => &mut f.mode,
            b'J' => &mut f.initial,
            _ => &mut f.delta,
        };
        *slot = Some(arg);
    }
    Ok(f)
}

/// What an item showed, for the returned flags.
#[derive(Default)]
struct Shown {
    cas: u64,
    flags: u32,
    size: usize,
    ttl: i64,
    /// Read before (`h`).
    fetched: bool,
    /// Seconds since last used (`l`).
    idle: u64,
    /// `mg`'s marks: a win given before (`Z`), stale (`X`), won now (`W`).
    marks: [bool; 3],
}

impl Shown {
    /// Entry `e` (an item) at `now_ms` and LRU clock `clock`.
    fn of(e: &Entry, now_ms: u64, clock: u32) -> Self {
        Shown {
            cas: e.version,
            flags: e.flags,
            size: item(e).map_or(0, <[u8]>::len),
            ttl: ttl_of(e, now_ms),
            fetched: e.marked(MARK_FETCHED),
            idle: e.idle_secs(clock),
            marks: [false; 3],
        }
    }
}

/// One meta command's key (as given, and decoded when `b`) and flags.
struct Meta<'a> {
    key: &'a [u8],
    /// The key as sent in base64 (`b`), which `k` returns.
    key_b64: Option<&'a [u8]>,
    f: Flags<'a>,
}

impl Meta<'_> {
    /// `q`: the command's common answer is left out.
    fn quiet(&self) -> bool {
        self.f.has(b'q')
    }

    /// Appends the returned flags in the order asked (`b` goes with `k`),
    /// and the line's end.
    fn returned(&self, out: &mut Vec<u8>, shown: Option<&Shown>) {
        returned(out, &self.f, self.key, self.key_b64, shown);
    }
}

/// Appends the returned flags in the order asked (`b` goes with `k`).
fn returned(
    out: &mut Vec<u8>,
    f: &Flags<'_>,
    key: &[u8],
    key_b64: Option<&[u8]>,
    shown: Option<&Shown>,
) {
    for &letter in &f.order[..f.n] {
        match (letter, shown) {
            (b'k', _) => {
                out.extend_from_slice(b" k");
                match key_b64 {
                    Some(k) => {
                        out.extend_from_slice(k);
                        out.extend_from_slice(b" b");
                    }
                    None => out.extend_from_slice(key),
                }
            }
            (b'O', _) => {
                out.extend_from_slice(b" O");
                out.extend_from_slice(f.opaque.unwrap_or_default());
            }
            (b'c', Some(s)) => {
                let _ = write!(out, " c{}", s.cas);
            }
            (b'f', Some(s)) => {
                let _ = write!(out, " f{}", s.flags);
            }
            (b's', Some(s)) => {
                let _ = write!(out, " s{}", s.size);
            }
            (b't', Some(s)) => {
                let _ = write!(out, " t{}", s.ttl);
            }
            (b'h', Some(s)) => {
                let _ = write!(out, " h{}", u8::from(s.fetched));
            }
            (b'l', Some(s)) => {
                let _ = write!(out, " l{}", s.idle);
            }
            _ => {}
        }
    }
    if let Some(s) = shown {
        for (on, mark) in s.marks.into_iter().zip([" Z", " X", " W"]) {
            if on {
                out.extend_from_slice(mark.as_bytes());
            }
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// Seconds an entry has to live at `now_ms` (-1: no deadline).
fn ttl_of(e: &Entry, now_ms: u64) -> i64 {
    if e.expire_ms == 0 {
        -1
    } else {
        (e.expire_ms.saturating_sub(now_ms).div_ceil(1000)) as i64
    }
}

/// Runs meta command `cmd` (`mg`, `ms`, `md`, `ma`, `mn`) of `line` (with
/// `data`, the block of an `ms`), appending memcached's reply.
pub(super) fn execute(cmd: &[u8], line: &[u8], data: &[u8], db: &Db, out: &mut Vec<u8>) {
    let mut toks = tokens(line).skip(1);
    if cmd == b"mn" {
        out.extend_from_slice(b"MN\r\n");
        return;
    }
    if cmd == b"me" {
        return meta_debug(toks, db, out);
    }
    let Some(raw_key) = toks.next() else {
        out.extend_from_slice(b"ERROR\r\n");
        return;
    };
    if cmd == b"ms" {
        // The data length, checked by framing.
        toks.next();
    }
    if raw_key.len() > MAX_KEY {
        return line_reply(out, BAD_FORMAT);
    }
    let flags = match parse_flags(cmd, toks) {
        Ok(f) => f,
        Err(e) => return line_reply(out, e),
    };
    let decoded;
    let (key, key_b64) = if flags.has(b'b') {
        match base64::engine::general_purpose::STANDARD.decode(raw_key) {
            Ok(k) if !k.is_empty() && k.len() <= MAX_KEY => {
                decoded = k;
                (&decoded[..], Some(raw_key))
            }
            _ => return line_reply(out, "CLIENT_ERROR error decoding key"),
        }
    } else {
        (raw_key, None)
    };
    let m = Meta {
        key,
        key_b64,
        f: flags,
    };
    match cmd {
        b"mg" => meta_get(&m, db, out),
        b"ms" => meta_set(&m, data, db, out),
        b"md" => meta_delete(&m, db, out),
        _ => meta_arith(&m, db, out),
    }
}

fn line_reply(out: &mut Vec<u8>, msg: &str) {
    out.extend_from_slice(msg.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// An exptime token as a deadline (`None`: already expired).
fn token_deadline(t: &[u8], now_ms: u64) -> Option<u64> {
    deadline(parse_i64(t).unwrap_or_default(), now_ms)
}

/// A touch (`T`) of the item in `slot`: its new deadline, or gone when the
/// TTL has already passed. It keeps the cas unique.
fn touch(slot: &mut Option<Entry>, deadline: Option<u64>) {
    match (deadline, slot.as_mut()) {
        (Some(at), Some(e)) => e.expire_ms = at,
        (None, _) => *slot = None,
        _ => {}
    }
}

fn meta_get(m: &Meta<'_>, db: &Db, out: &mut Vec<u8>) {
    let (key, f) = (m.key, &m.f);
    // `N` may create an item: then it may be refused for memory.
    let Ok(mut g) = db.lock_one(key, f.vivify.is_some()) else {
        return line_reply(out, OOM);
    };
    let (now, clock) = (g.now_ms, g.clock());
    let deadline = f.ttl.map(|t| token_deadline(t, now));
    let vivify = f.vivify.map(|t| token_deadline(t, now));
    let recache = f.recache.and_then(parse_i64);
    let bump = !f.has(b'u');
    let hit = g.update_with(key, bump, |slot| {
        let hit = slot.as_ref().is_some_and(|e| item(e).is_some());
        if !hit {
            let Some(dl) = vivify else {
                if !m.quiet() {
                    out.extend_from_slice(b"EN");
                    m.returned(out, None);
                }
                return (false, false);
            };
            // memcached's stub: no data, read, and this client wins the
            // right to fill it. One whose TTL has passed is answered once
            // and gone at the next look.
            let mut e = Entry {
                expire_ms: dl.unwrap_or(now),
                version: db.next_version(),
                ..Entry::new(Value::Str(Box::default()))
            };
            e.mark(MARK_FETCHED | MARK_WON, true);
            let shown = Shown {
                marks: [false, false, true],
                ..Shown::of(&e, now, clock)
            };
            answer(m, b"", &shown, out);
            *slot = Some(e);
            return (false, false);
        }
        let e = slot.as_mut().expect("a hit");
        let (given, stale) = (e.marked(MARK_WON), e.marked(MARK_STALE));
        let due = recache.is_some_and(|r| e.expire_ms != 0 && ttl_of(e, now) < r);
        let won = !given && (stale || due);
        // A touch before `t` is read (memcached shows the new TTL), after
        // `R` was weighed.
        if let Some(Some(at)) = deadline {
            e.expire_ms = at;
        }
        let shown = Shown {
            marks: [given, stale, won],
            ..Shown::of(e, now, clock)
        };
        answer(m, item(e).expect("a hit"), &shown, out);
        e.mark(MARK_WON, given || won);
        if bump {
            e.mark(MARK_FETCHED, true);
        }
        // A TTL already passed: answered, then gone.
        if let Some(None) = deadline {
            *slot = None;
        }
        (false, true)
    });
    g.count_read(key, hit);
}

/// `mg`'s answer to a hit: `VA` with the value when `v` was asked, else
/// `HD`; the returned flags.
fn answer(m: &Meta<'_>, data: &[u8], shown: &Shown, out: &mut Vec<u8>) {
    if m.f.has(b'v') {
        let _ = write!(out, "VA {}", data.len());
        m.returned(out, Some(shown));
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
    } else {
        out.extend_from_slice(b"HD");
        m.returned(out, Some(shown));
    }
}

/// `me <key> [b]`: memcached's debug line for an item, not marking it
/// used.
fn meta_debug<'a>(mut toks: impl Iterator<Item = &'a [u8]>, db: &Db, out: &mut Vec<u8>) {
    const BAD_LINE: &str = "CLIENT_ERROR bad command line format";
    let Some(raw_key) = toks.next().filter(|k| k.len() <= MAX_KEY) else {
        return line_reply(out, BAD_LINE);
    };
    let decoded;
    let key = if toks.any(|t| t == b"b") {
        match base64::engine::general_purpose::STANDARD.decode(raw_key) {
            Ok(k) if !k.is_empty() && k.len() <= MAX_KEY => {
                decoded = k;
                &decoded[..]
            }
            _ => return line_reply(out, "CLIENT_ERROR error decoding key"),
        }
    } else {
        raw_key
    };
    let Ok(mut g) = db.lock_one(key, false) else {
        return line_reply(out, OOM);
    };
    let (now, clock) = (g.now_ms, g.clock());
    let Some(e) = g.peek(key).filter(|e| item(e).is_some()) else {
        return line_reply(out, "EN");
    };
    let size = item_size(key.len(), item(e).map_or(0, <[u8]>::len));
    // memcached prints the time to live negated (its `exp` is now less
    // the expiry), -1 for none.
    let exp = match ttl_of(e, now) {
        -1 => -1,
        t => -t,
    };
    // The key as stored (decoded, with `b`), as memcached prints it.
    out.extend_from_slice(b"ME ");
    out.extend_from_slice(key);
    let _ = write!(
        out,
        " exp={exp} la={} cas={} fetch={} cls={} size={size}\r\n",
        e.idle_secs(clock),
        e.version,
        if e.marked(MARK_FETCHED) { "yes" } else { "no" },
        slab_class(size),
    );
}

/// Bytes memcached 1.6 gives an item of a `key` and `value` bytes: its
/// 48-byte header, the key and its terminator, the value with its CRLF,
/// and the cas unique.
fn item_size(key: usize, value: usize) -> usize {
    48 + key + 1 + value + 2 + 8
}

/// The slab class memcached 1.6 stores an item of `size` bytes in, at its
/// defaults (`-n 48`, `-f 1.25`, 8-byte alignment, 512 KiB chunks at
/// most): classes from 96 bytes, each 1.25x the last; the largest class
/// holds the rest.
fn slab_class(size: usize) -> usize {
    const MAX_CHUNK: usize = 512 * 1024;
    let mut chunk = 96usize;
    let mut class = 1;
    loop {
        if chunk >= size {
            return class;
        }
        let next = chunk * 5 / 4;
        if next as f64 >= MAX_CHUNK as f64 / 1.25 {
            return class + 1;
        }
        chunk = next.div_ceil(8) * 8;
        class += 1;
    }
}

fn meta_set(m: &Meta<'_>, data: &[u8], db: &Db, out: &mut Vec<u8>) {
    let (key, f) = (m.key, &m.f);
    let mode = match f.mode.map(|m| m[0]) {
        None | Some(b'S') => b'S',
        Some(m @ (b'E' | b'A' | b'P' | b'R')) => m,
        Some(_) => return line_reply(out, "CLIENT_ERROR invalid mode for ms M token"),
    };
    // Client flags: any 64-bit number, kept modulo 2^32 (as the classic
    // commands').
    let client_flags = match f.client_flags.map(parse_u64) {
        None => 0,
        Some(Some(v)) => v as u32,
        Some(None) => return line_reply(out, BAD_FORMAT),
    };
    let expected = f.cas.and_then(parse_u64);
    let Ok(mut g) = db.lock_one(key, true) else {
        return line_reply(out, OOM_STORING);
    };
    g.count_write(key);
    let (now, clock) = (g.now_ms, g.clock());
    let dl = f.ttl.map_or(Some(0), |t| token_deadline(t, now));
    let code = g.update(key, |slot| {
        let old = slot.as_mut().filter(|e| item(e).is_some());
        if let (Some(want), Some(e)) = (expected, old.as_ref())
            && e.version != want
        {
            // `I`: a value computed from an older version is still stored,
            // stale, with the item's TTL and its win mark.
            if !(f.has(b'I') && mode == b'S' && want < e.version) {
                return (false, "EX");
            }
            let mut fresh = Entry {
                expire_ms: e.expire_ms,
                flags: client_flags,
                ..Entry::new(Value::Str(data.into()))
            };
            fresh.mark(MARK_STALE, true);
            fresh.mark(MARK_WON, e.marked(MARK_WON));
            *slot = Some(fresh);
            return (true, "HD");
        }
        match (mode, old) {
            (b'E', Some(_)) | (b'A' | b'P' | b'R', None) => (false, "NS"),
            (_, None) if expected.is_some() => (false, "NF"),
            (b'A' | b'P', Some(e)) => {
                if let Value::Str(v) = &mut e.value {
                    let joined = if mode == b'A' {
                        [&v[..], data].concat()
                    } else {
                        [data, &v[..]].concat()
                    };
                    *v = joined.into_boxed_slice();
                }
                (true, "HD")
            }
            _ => {
                *slot = dl.map(|expire_ms| Entry {
                    expire_ms,
                    flags: client_flags,
                    ..Entry::new(Value::Str(data.into()))
                });
                (true, "HD")
            }
        }
    });
    if code == "HD" && m.quiet() {
        return;
    }
    out.extend_from_slice(code.as_bytes());
    // What was stored (its new cas unique), when it was.
    let shown = g
        .get(key)
        .filter(|_| code == "HD")
        .map(|e| Shown::of(e, now, clock));
    m.returned(out, shown.as_ref());
}

fn meta_delete(m: &Meta<'_>, db: &Db, out: &mut Vec<u8>) {
    let (key, f) = (m.key, &m.f);
    let expected = f.cas.and_then(parse_u64);
    let Ok(mut g) = db.lock_one(key, false) else {
        return;
    };
    // `T` counts only with `I`.
    let deadline = f
        .ttl
        .filter(|_| f.has(b'I'))
        .map(|t| token_deadline(t, g.now_ms));
    let code = g.update(key, |slot| {
        match slot.as_mut().filter(|e| item(e).is_some()) {
            None => (false, "NF"),
            Some(e) if expected.is_some_and(|c| c != e.version) => (false, "EX"),
            // Invalidated, not removed: stale (a new cas unique), and the
            // next reader may win the right to fill it again.
            Some(e) if f.has(b'I') => {
                e.mark(MARK_STALE, true);
                e.mark(MARK_WON, false);
                if let Some(dl) = deadline {
                    touch(slot, dl);
                }
                (true, "HD")
            }
            Some(_) => {
                *slot = None;
                (true, "HD")
            }
        }
    });
    if code == "HD" && m.quiet() {
        return;
    }
    out.extend_from_slice(code.as_bytes());
    m.returned(out, None);
}

fn meta_arith(m: &Meta<'_>, db: &Db, out: &mut Vec<u8>) {
    let (key, f) = (m.key, &m.f);
    let incr = match f.mode.map(|m| m[0]) {
        None | Some(b'I' | b'+') => true,
        Some(b'D' | b'-') => false,
        Some(_) => return line_reply(out, "CLIENT_ERROR invalid mode for ma M token"),
    };
    let delta = match f.delta.map(parse_u64) {
        None => 1,
        Some(Some(d)) => d,
        Some(None) => return line_reply(out, "CLIENT_ERROR invalid numeric delta argument"),
    };
    let initial = match f.initial.map(parse_u64) {
        None => 0,
        Some(Some(v)) => v,
        Some(None) => return line_reply(out, "CLIENT_ERROR invalid numeric initial value"),
    };
    let expected = f.cas.and_then(parse_u64);
    let Ok(mut g) = db.lock_one(key, true) else {
        return line_reply(out, OOM);
    };
    let (now, clock) = (g.now_ms, g.clock());
    let vivify = f.vivify.map(|t| token_deadline(t, now));
    let deadline = f.ttl.map(|t| token_deadline(t, now));
    enum Done {
        Value(u64),
        Code(&'static str),
        NonNumeric,
    }
    let done = g.update(key, |slot| {
        let Some(e) = slot.as_mut().filter(|e| item(e).is_some()) else {
            return match vivify {
                // Created with the initial value (the delta not applied).
                Some(dl) => {
                    *slot = dl.map(|expire_ms| Entry {
                        expire_ms,
                        ..Entry::new(Value::Str(initial.to_string().into_bytes().into()))
                    });
                    (true, Done::Value(initial))
                }
                None => (false, Done::Code("NF")),
            };
        };
        if expected.is_some_and(|c| c != e.version) {
            return (false, Done::Code("EX"));
        }
        let Value::Str(v) = &mut e.value else {
            return (false, Done::Code("NF"));
        };
        let Some(new) = super::arith_step(incr, v, delta) else {
            return (false, Done::NonNumeric);
        };
        *v = new.to_string().into_bytes().into_boxed_slice();
        if let Some(dl) = deadline {
            touch(slot, dl);
        }
        (true, Done::Value(new))
    });
    let value = match done {
        Done::NonNumeric => return line_reply(out, NON_NUMERIC),
        Done::Code(c) => {
            out.extend_from_slice(c.as_bytes());
            return m.returned(out, None);
        }
        Done::Value(v) => v,
    };
    let shown = g.get(key).map(|e| Shown::of(e, now, clock));
    if f.has(b'v') {
        let text = value.to_string();
        let _ = write!(out, "VA {}", text.len());
        m.returned(out, shown.as_ref());
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(b"\r\n");
    } else if !m.quiet() {
        out.extend_from_slice(b"HD");
        m.returned(out, shown.as_ref());
    }
}
