//! memcached's meta commands over the in-memory database: `mg` (get),
//! `ms` (set), `md` (delete), `ma` (arithmetic) and `mn` (no-op), with
//! memcached 1.6's flags and replies (`VA`, `HD`, `EN`, `NF`, `NS`, `EX`,
//! `MN`) and its errors.
//!
//! Flags: `b` (the key in base64), `c` (return the cas unique), `f`
//! (return the client flags), `k` (return the key), `O<opaque>` (echoed,
//! at most 31 bytes), `q` (quiet: the common answer is left out: a miss of
//! `mg`, the `HD` of `ms`, `md` and `ma`), `s` (return the size), `t`
//! (return the seconds to live, -1 for none), `u` (accepted: nothing is
//! bumped), `v` (return the value); `mg`: `T<ttl>` (touch, after `t` is
//! read); `ms`: `T<ttl>`,
//! `F<flags>`, `C<cas>` (compare), `M<mode>` (`S` set, `E` add, `A`
//! append, `P` prepend, `R` replace); `md`: `C<cas>`; `ma`: `N<ttl>`
//! (create on a miss, from `J<initial>`, default 0), `D<delta>` (default
//! 1), `T<ttl>`, `C<cas>`, `M<mode>` (`I`, `+` incr; `D`, `-` decr).
//! Returned flags come in the order asked. Not here (answered `CLIENT_ERROR
//! invalid flag`, or memcached's `invalid or duplicate flag` for `md` and
//! `ma`): stale-while-revalidate (`mg`'s `N` and `R`, `I`, and the
//! `W`/`X`/`Z` they return: no item keeps a win or stale mark here), `h` and `l` (hit and access times are not kept), `E` (an
//! explicit cas), `x`; and `me` (debug) is `ERROR`.

use std::io::Write as _;

use base64::Engine as _;

use super::{
    BAD_FORMAT, Db, Entry, MAX_KEY, NON_NUMERIC, OOM, OOM_STORING, Value, deadline, item,
    parse_i64, parse_u64, tokens,
};

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
            (b"mg", b'f' | b's' | b't' | b'v') => false,
            (b"mg", b'T') => true,
            (b"ms", b'f' | b's' | b't') => false,
            (b"ms", b'T' | b'F' | b'C' | b'M') => true,
            (b"md", b'C') => true,
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
struct Shown {
    cas: u64,
    flags: u32,
    size: usize,
    ttl: i64,
}

impl Shown {
    /// Entry `e` (an item) at `now_ms`.
    fn of(e: &Entry, now_ms: u64) -> Self {
        Shown {
            cas: e.version,
            flags: e.flags,
            size: item(e).map_or(0, <[u8]>::len),
            ttl: ttl_of(e, now_ms),
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
            _ => {}
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
    let Ok(mut g) = db.lock_one(key, false) else {
        return line_reply(out, OOM);
    };
    let now = g.now_ms;
    let deadline = f.ttl.map(|t| token_deadline(t, now));
    g.update(key, |slot| {
        let hit = slot.as_ref().is_some_and(|e| item(e).is_some());
        if !hit {
            if !m.quiet() {
                out.extend_from_slice(b"EN");
                m.returned(out, None);
            }
            return (false, ());
        }
        let e = slot.as_ref().expect("a hit");
        let data = item(e).expect("a hit");
        let shown = Shown::of(e, now);
        if f.has(b'v') {
            let _ = write!(out, "VA {}", data.len());
            m.returned(out, Some(&shown));
            out.extend_from_slice(data);
            out.extend_from_slice(b"\r\n");
        } else {
            out.extend_from_slice(b"HD");
            m.returned(out, Some(&shown));
        }
        // After the TTL was read.
        if let Some(dl) = deadline {
            touch(slot, dl);
        }
        (false, ())
    });
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
    let now = g.now_ms;
    let dl = f.ttl.map_or(Some(0), |t| token_deadline(t, now));
    let code = g.update(key, |slot| {
        let old = slot.as_mut().filter(|e| item(e).is_some());
        if let (Some(want), Some(e)) = (expected, old.as_ref())
            && e.version != want
        {
            return (false, "EX");
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
        .map(|e| Shown::of(e, now));
    m.returned(out, shown.as_ref());
}

fn meta_delete(m: &Meta<'_>, db: &Db, out: &mut Vec<u8>) {
    let (key, f) = (m.key, &m.f);
    let expected = f.cas.and_then(parse_u64);
    let Ok(mut g) = db.lock_one(key, false) else {
        return;
    };
    let code = g.update(key, |slot| {
        match slot.as_ref().filter(|e| item(e).is_some()) {
            None => (false, "NF"),
            Some(e) if expected.is_some_and(|c| c != e.version) => (false, "EX"),
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
    let now = g.now_ms;
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
    let shown = g.get(key).map(|e| Shown::of(e, now));
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
