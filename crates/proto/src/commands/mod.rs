//! Redis's commands over the in-memory [`Db`]: what `psp serve --protocol
//! resp` runs by default, with Redis 7's replies and error texts.
//!
//! A worker calls [`execute`] with one complete request (framed by
//! [`crate::resp::request_len`]), the connection's [`Session`] and an output
//! buffer. Each command locks the shards of its keys for its whole run, so
//! it is atomic on them against every other command (MSET/MSETNX/MGET/DEL
//! over many keys included); `EXEC` locks every shard and runs the queued
//! commands back to back. Commands that walk the keyspace (KEYS, SCAN,
//! DBSIZE, FLUSHALL) take one shard at a time and call the request's
//! preemption point between shards, holding no lock.
//!
//! The connection's state (protocol version, name, `MULTI` queue, `WATCH`ed
//! keys) is its [`Session`], kept in [`Sessions`] by the connection's id;
//! one connection has one command executing at a time (the TCP front end
//! sees to it), so a session is never used by two workers at once.
//!
//! Replies are RESP2, or RESP3 after `HELLO 3` (nulls as `_`, HGETALL as a
//! map, SMEMBERS as a set, scores as doubles).

mod bitmaps;
mod connection;
mod counters;
mod expiry;
mod hashes;
mod keys;
mod lists;
mod long_double;
mod pubsub;
mod scripting;
mod server;
mod sets;
mod slowlog;
mod sort;
mod streams;
mod strings;
mod transaction;
mod zsets;

use parking_lot::Mutex;
use std::io::Write as _;
use std::time::Instant;

pub use crate::commandstats::CommandStats;

use crate::db::{Db, Entry, Full, Guard, Refused, Score, Value, ZSet};
use crate::resp::wire::{RespError, parse};

/// A command's arguments: inline up to 8, so that a command allocates no
/// vector for them.
type Args<'a> = smallvec::SmallVec<[&'a [u8]; 8]>;

/// The longest string SETRANGE may make (Redis's proto-max-bulk-len).
const MAX_STRING: usize = 512 << 20;

/// Commands one `MULTI` may queue at most (a longer transaction is refused
/// at `EXEC` with `EXECABORT`, its queue dropped as it grows).
pub const MAX_QUEUED: usize = 10_000;
/// Bytes of requests one `MULTI` may queue at most (the same refusal): a
/// connection's queue cannot hold more than this, whatever its requests'
/// sizes.
pub const MAX_QUEUED_BYTES: usize = 4 << 20;
/// SCAN's COUNT when none is given (Redis's).
const SCAN_DEFAULT_COUNT: usize = 10;
/// Most keys one SCAN call looks at (its COUNT is clamped to this).
pub const SCAN_MAX_COUNT: usize = 100_000;

const OOM: &[u8] = b"OOM command not allowed when used memory > 'maxmemory'.";
const WRONGTYPE: &[u8] = b"WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INTEGER: &[u8] = b"ERR value is not an integer or out of range";
const NOT_FLOAT: &[u8] = b"ERR value is not a valid float";
const OVERFLOW: &[u8] = b"ERR increment or decrement would overflow";
const SYNTAX: &[u8] = b"ERR syntax error";
const NOT_POSITIVE: &[u8] = b"ERR value is out of range, must be positive";
const BAD_DB: &[u8] = b"ERR DB index is out of range";

/// One connection's state.
#[derive(Debug, Default, Clone)]
pub struct Session {
    /// The connection's id (`CLIENT ID`).
    pub id: u64,
    /// RESP3 replies (`HELLO 3`).
    pub resp3: bool,
    /// `CLIENT SETNAME`.
    pub name: Option<Vec<u8>>,
    /// Inside `MULTI`: the queued requests.
    pub multi: Option<Vec<Vec<u8>>>,
    /// Bytes of the queued requests.
    pub multi_bytes: usize,
    /// A command queued in this `MULTI` was refused: `EXEC` aborts.
    pub multi_failed: bool,
    /// `WATCH`ed keys and their versions then.
    pub watched: Vec<(Box<[u8]>, u64)>,
    /// Channels and patterns it listens to ([`crate::pubsub`]): past 0, a
    /// RESP2 connection is in Redis's subscribed state.
    pub subscriptions: usize,
    /// The last command's name, lower case (`CLIENT LIST`'s `cmd=`), and
    /// its length.
    pub last_cmd: [u8; 24],
    /// Bytes of `last_cmd` in use (0: none run yet).
    pub last_cmd_len: u8,
    /// When its last command started: the reading [`execute`] takes for
    /// the command's own time anyway, kept for `CLIENT LIST`'s `idle=`
    /// when the session goes back ([`Sessions::put`]).
    pub started: Option<Instant>,
}

impl Session {
    /// The connection's id as Redis's clients see it (`CLIENT ID`, `CLIENT
    /// LIST`'s `id=`, `CLIENT KILL ID`): unique in the process and never
    /// reused, as Redis's (the session's generation, from 1).
    pub fn client_id(&self) -> u64 {
        client_id(self.id)
    }

    /// Records `name` (lower case, at most 24 bytes) as the last command
    /// (its start time is [`Session::started`]).
    pub fn ran(&mut self, name: &[u8]) {
        let n = name.len().min(self.last_cmd.len());
        self.last_cmd[..n].copy_from_slice(&name[..n]);
        self.last_cmd_len = n as u8;
    }
}

/// SRANDMEMBER's, HRANDFIELD's and ZRANDMEMBER's largest negative |count|
/// (picks with repetitions): the reply holds that many.
const MAX_RANDOM_MEMBERS: u64 = 1_000_000;

/// A random-pick count, as Redis checks it (and within
/// [`MAX_RANDOM_MEMBERS`]).
fn random_count(c: &[u8]) -> Result<i64, Fail> {
    let c = int_arg(c)?;
    if c == i64::MIN {
        return Err(Fail::Msg(
            b"ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    // A positive count is at most the collection's size; a negative one
    // repeats picks, as many as asked: bounded here.
    if c < 0 && c.unsigned_abs() > MAX_RANDOM_MEMBERS {
        return Err(Fail::Msg(b"ERR value is out of range"));
    }
    Ok(c)
}

/// SRANDMEMBER's, HRANDFIELD's and ZRANDMEMBER's picks from `items`:
/// without a count one item (nil when there is none); a count of at least
/// 0, distinct items (at most all of them); a negative count, |count| items
/// with repetitions. Each pick is `width` replies (2 with WITHVALUES or
/// WITHSCORES: a pair each in RESP3, flat in RESP2), written by `write`.
fn random_picks<T>(
    w: &mut Reply<'_>,
    items: &[T],
    count: Option<i64>,
    width: usize,
    write: impl Fn(&mut Reply<'_>, &T),
) {
    let mut rng = random_seed();
    let mut pick = |len: usize| {
        // xorshift64*: cheap, and good enough to pick members.
        rng ^= rng >> 12;
        rng ^= rng << 25;
        rng ^= rng >> 27;
        (rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % len
    };
    let Some(c) = count else {
        match items.len() {
            0 => w.nil(),
            len => write(w, &items[pick(len)]),
        }
        return;
    };
    let picks: Vec<usize> = if c >= 0 {
        // Distinct items: a partial shuffle of their indices.
        let mut idx: Vec<usize> = (0..items.len()).collect();
        let k = (c as usize).min(idx.len());
        for i in 0..k {
            let j = i + pick(idx.len() - i);
            idx.swap(i, j);
        }
        idx.truncate(k);
        idx
    } else if items.is_empty() {
        Vec::new()
    } else {
        (0..c.unsigned_abs() as usize)
            .map(|_| pick(items.len()))
            .collect()
    };
    let pairs = width > 1 && w.resp3;
    w.array(picks.len() * if pairs { 1 } else { width });
    for i in picks {
        if pairs {
            w.array(width);
        }
        write(w, &items[i]);
    }
}

/// A seed for the random picks, different on every call.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish() | 1
}

/// HRANDFIELD's and ZRANDMEMBER's optional `count [WITHVALUES|WITHSCORES]`
/// after the key: the count, and whether `with` was given.
fn random_args(a: &[&[u8]], with: &[u8]) -> Result<(Option<i64>, bool), Fail> {
    match a.len() {
        1 => Ok((None, false)),
        2 => Ok((Some(random_count(a[1])?), false)),
        3 => {
            let c = random_count(a[1])?;
            if !a[2].eq_ignore_ascii_case(with) {
                return Err(Fail::Msg(SYNTAX));
            }
            Ok((Some(c), true))
        }
        _ => Err(Fail::Msg(SYNTAX)),
    }
}

/// A STORE form's result written to `dst` (no deadline), replacing what
/// was there; an empty result (`None`) deletes it, as Redis does. A list
/// or sorted set stored wakes the clients blocked on keys. Returns what
/// `dst` held, for the caller to free after its locks.
fn store_result(g: &mut Guard<'_>, dst: &[u8], value: Option<Value>) -> Option<Entry> {
    let wakes = matches!(value, Some(Value::List(_) | Value::ZSet(_)));
    let old = g.update(dst, |slot| {
        let changed = slot.is_some() || value.is_some();
        (changed, std::mem::replace(slot, value.map(Entry::new)))
    });
    if wakes {
        crate::blocking::wake();
    }
    old
}

/// SINTERCARD's and ZINTERCARD's LIMIT (0: none).
fn card_limit(v: &[u8]) -> Result<usize, Fail> {
    parse_i64(v)
        .and_then(|l| usize::try_from(l).ok())
        .ok_or(Fail::Msg(b"ERR LIMIT can't be negative"))
}

/// Redis's `-ERR <what> '<value>'` (the value cut at 64 bytes).
fn error_naming(out: &mut Vec<u8>, what: &str, value: &[u8]) {
    let _ = write!(
        out,
        "-ERR {what} '{}'\r\n",
        String::from_utf8_lossy(&value[..value.len().min(64)])
    );
}

/// [`Session::client_id`] of session `id`.
pub fn client_id(session: u64) -> u64 {
    u64::from(session as u32) + 1
}

/// The sessions of a server's connections, by connection id (see
/// [`Sessions::take`]): a fixed table, one slot per connection index.
#[derive(Debug)]
pub struct Sessions {
    slots: Box<[Mutex<Slot>]>,
}

/// A connection index's slot: the session (absent while a command has it
/// out), and what a second command of the same connection running at the
/// same time (`--tcp-order replies`) needs to answer in the right protocol.
#[derive(Debug, Default)]
struct Slot {
    id: u64,
    resp3: bool,
    session: Option<Box<Session>>,
    /// When its last command started (`CLIENT LIST`'s `idle=`).
    last: Option<Instant>,
}

impl Sessions {
    /// Room for connection indices `0..connections`.
    pub fn new(connections: usize) -> Self {
        Self {
            slots: (0..connections.max(1))
                .map(|_| Mutex::new(Slot::default()))
                .collect(),
        }
    }

    /// Takes the session of connection `id` (`index << 32 | generation`,
    /// index from 1; 0: a request of no connection, which gets a fresh
    /// session). A slot whose session belongs to an earlier connection of
    /// the same index starts afresh. The session is out of the table while
    /// its command runs ([`Sessions::put`] brings it back), so no lock is
    /// held across the command's preemption points. Should another command
    /// of the connection run meanwhile (only with the order turned off), it
    /// gets a session with the connection's protocol version and nothing
    /// else.
    pub fn take(&self, id: u64) -> Box<Session> {
        let index = (id >> 32) as usize;
        let fresh = |resp3| {
            Box::new(Session {
                id,
                resp3,
                ..Session::default()
            })
        };
        if index == 0 {
            return fresh(false);
        }
        let mut slot = self.slots[(index - 1) % self.slots.len()].lock();
        if slot.id != id {
            *slot = Slot {
                id,
                ..Slot::default()
            };
        }
        match slot.session.take() {
            Some(s) => s,
            None => fresh(slot.resp3),
        }
    }

    /// `CLIENT LIST`'s reply for the connection of `current`: a line per
    /// open connection ([`crate::clients`]) in Redis's `key=value` form,
    /// with what this table knows of its session (name, protocol, idle
    /// time, last command, subscriptions, transaction).
    pub fn client_list(&self, current: &Session) -> Vec<u8> {
        let mut out = Vec::new();
        let now = Instant::now();
        let reg = crate::clients::registry();
        let server = reg.server_of(current.id);
        for (id, conn) in reg.list() {
            if Some(conn.server) != server {
                continue;
            }
            let index = (id >> 32) as usize;
            let Some(slot) = index
                .checked_sub(1)
                .and_then(|i| self.slots.get(i % self.slots.len()))
            else {
                continue;
            };
            let slot = slot.lock();
            let mine = slot.id == id;
            let session = if id == current.id {
                Some(current)
            } else {
                slot.session.as_deref().filter(|_| mine)
            };
            let idle = match (id == current.id, slot.last.filter(|_| mine)) {
                (false, Some(t)) => now.duration_since(t).as_secs(),
                _ => 0,
            };
            let cmd: &[u8] = match session {
                _ if id == current.id => b"client|list",
                Some(s) if s.last_cmd_len > 0 => &s.last_cmd[..usize::from(s.last_cmd_len)],
                _ => b"NULL",
            };
            let subs = session.map_or(0, |s| s.subscriptions);
            let multi = session
                .and_then(|s| s.multi.as_ref())
                .map_or(-1, |q| q.len() as i64);
            let resp3 = session.map_or(mine && slot.resp3, |s| s.resp3);
            let _ = write!(
                out,
                "id={} addr={} laddr={} fd={} name=",
                client_id(id),
                conn.addr,
                conn.laddr,
                conn.fd
            );
            out.extend_from_slice(session.and_then(|s| s.name.as_deref()).unwrap_or_default());
            let _ = write!(
                out,
                " age={} idle={idle} flags={} db=0 sub={subs} psub=0 ssub=0 multi={multi} cmd=",
                now.duration_since(conn.since).as_secs(),
                if subs > 0 { "P" } else { "N" },
            );
            out.extend_from_slice(cmd);
            let _ = writeln!(
                out,
                " user=default redir=-1 resp={}",
                if resp3 { 3 } else { 2 }
            );
        }
        out
    }

    /// `CLIENT KILL`: the old form `addr:port` (`+OK`, or an error when no
    /// connection has it) or Redis 7.0's filters (ID, ADDR, LADDR, TYPE,
    /// USER, SKIPME; answered with how many connections it closes). The
    /// front end that owns a marked connection closes it on its next pass.
    pub fn client_kill(&self, current: &Session, a: &[&[u8]], out: &mut Vec<u8>) {
        let reg = crate::clients::registry();
        // This server's connections only (one registry serves every server
        // of the process).
        let server = reg.server_of(current.id);
        let ours = |c: &crate::clients::Conn| Some(c.server) == server;
        if a.len() == 1 {
            let n = reg.kill(|_, c| ours(c) && c.addr.to_string().as_bytes() == a[0]);
            out.extend_from_slice(if n > 0 {
                b"+OK\r\n".as_slice()
            } else {
                b"-ERR No such client\r\n"
            });
            return;
        }
        if a.is_empty() || !a.len().is_multiple_of(2) {
            out.extend_from_slice(b"-ERR syntax error\r\n");
            return;
        }
        let (mut id, mut addr, mut laddr, mut kind) = (None, None, None, None);
        let mut skip_me = true;
        for pair in a.chunks(2) {
            let (key, val) = (pair[0].to_ascii_lowercase(), pair[1]);
            match key.as_slice() {
                b"id" => match parse_i64(val) {
                    Some(v) if v > 0 => id = Some(v as u64),
                    _ => {
                        out.extend_from_slice(b"-ERR client-id should be greater than 0\r\n");
                        return;
                    }
                },
                b"addr" => addr = Some(val),
                b"laddr" => laddr = Some(val),
                b"user" => {
                    // Every connection is the default user's.
                    if !val.eq_ignore_ascii_case(b"default") {
                        return error_naming(out, "No such user", val);
                    }
                }
                b"type" => match val.to_ascii_lowercase().as_slice() {
                    b"normal" => kind = Some(false),
                    b"pubsub" => kind = Some(true),
                    // No replication here: no such connection (below).
                    b"master" | b"replica" | b"slave" => {}
                    _ => return error_naming(out, "Unknown client type", val),
                },
                b"skipme" => match val.to_ascii_lowercase().as_slice() {
                    b"yes" => skip_me = true,
                    b"no" => skip_me = false,
                    _ => {
                        out.extend_from_slice(b"-ERR syntax error\r\n");
                        return;
                    }
                },
                _ => {
                    out.extend_from_slice(b"-ERR syntax error\r\n");
                    return;
                }
            }
        }
        let replication_only = a.chunks(2).any(|p| {
            p[0].eq_ignore_ascii_case(b"type")
                && matches!(
                    p[1].to_ascii_lowercase().as_slice(),
                    b"master" | b"replica" | b"slave"
                )
        });
        let n = if replication_only {
            0
        } else {
            reg.kill(|session, c| {
                ours(c)
                    && (!skip_me || session != current.id)
                    && id.is_none_or(|i| client_id(session) == i)
                    && addr.is_none_or(|x| c.addr.to_string().as_bytes() == x)
                    && laddr.is_none_or(|x| c.laddr.to_string().as_bytes() == x)
                    && kind.is_none_or(|pubsub| self.subscribed(session, current) == pubsub)
            })
        };
        let _ = write!(out, ":{n}\r\n");
    }

    /// Whether connection `session` listens to a channel or pattern, as
    /// far as this table knows (a session out for a command counts as not).
    fn subscribed(&self, session: u64, current: &Session) -> bool {
        if session == current.id {
            return current.subscriptions > 0;
        }
        let Some(i) = ((session >> 32) as usize).checked_sub(1) else {
            return false;
        };
        let slot = self.slots[i % self.slots.len()].lock();
        slot.id == session && slot.session.as_ref().is_some_and(|s| s.subscriptions > 0)
    }

    /// Brings back a session taken by [`Sessions::take`] (one of a
    /// connection that has since closed is dropped).
    pub fn put(&self, session: Box<Session>) {
        let index = (session.id >> 32) as usize;
        if index == 0 {
            return;
        }
        let mut slot = self.slots[(index - 1) % self.slots.len()].lock();
        if slot.id == session.id {
            slot.resp3 = session.resp3;
            slot.last = session.started.or(slot.last);
            slot.session = Some(session);
        }
    }
}

/// A reply writer that speaks RESP2 or RESP3.
struct Reply<'o> {
    out: &'o mut Vec<u8>,
    resp3: bool,
}

impl Reply<'_> {
    fn raw(&mut self, b: &[u8]) {
        self.out.extend_from_slice(b);
    }
    fn ok(&mut self) {
        self.raw(b"+OK\r\n");
    }
    fn simple(&mut self, s: &[u8]) {
        self.out.push(b'+');
        self.raw(s);
        self.raw(b"\r\n");
    }
    fn error(&mut self, msg: &[u8]) {
        self.out.push(b'-');
        self.out.extend(
            msg.iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        self.raw(b"\r\n");
    }
    fn header(&mut self, kind: u8, n: usize) {
        self.out.push(kind);
        self.raw(itoa::Buffer::new().format(n).as_bytes());
        self.raw(b"\r\n");
    }
    fn int(&mut self, v: i64) {
        self.out.push(b':');
        self.raw(itoa::Buffer::new().format(v).as_bytes());
        self.raw(b"\r\n");
    }
    fn bulk(&mut self, b: &[u8]) {
        self.header(b'$', b.len());
        self.raw(b);
        self.raw(b"\r\n");
    }
    fn nil(&mut self) {
        if self.resp3 {
            self.raw(b"_\r\n");
        } else {
            self.raw(b"$-1\r\n");
        }
    }
    fn nil_array(&mut self) {
        if self.resp3 {
            self.raw(b"_\r\n");
        } else {
            self.raw(b"*-1\r\n");
        }
    }
    fn array(&mut self, n: usize) {
        self.header(b'*', n);
    }
    fn map(&mut self, n: usize) {
        if self.resp3 {
            self.header(b'%', n);
        } else {
            self.header(b'*', 2 * n);
        }
    }
    fn set(&mut self, n: usize) {
        self.header(if self.resp3 { b'~' } else { b'*' }, n);
    }
    fn double(&mut self, v: f64) {
        let s = fmt_double(v);
        if self.resp3 {
            self.out.push(b',');
            self.raw(s.as_bytes());
            self.raw(b"\r\n");
        } else {
            self.bulk(s.as_bytes());
        }
    }
    fn bool_int(&mut self, b: bool) {
        self.int(i64::from(b));
    }
}

/// A double as Redis 7.0 prints it in a reply: C's `%.17g` (17
/// significant digits, trailing zeros cut, an exponent past 10^16 or below
/// 10^-4: `0.10000000000000001`, `1e+17`), `inf`/`-inf`.
fn fmt_double(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // Rust's formatting rounds exactly, as glibc's printf does.
    let sci = format!("{v:.16e}");
    let (mantissa, exp) = sci.split_once('e').expect("an exponent");
    let x: i32 = exp.parse().expect("a decimal exponent");
    let cut = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s.to_owned()
        }
    };
    if (-4..17).contains(&x) {
        cut(&format!("{v:.*}", (16 - x) as usize))
    } else {
        format!(
            "{}e{}{:02}",
            cut(mantissa),
            if x < 0 { '-' } else { '+' },
            x.unsigned_abs()
        )
    }
}

/// Why a command stopped: its reply is this error instead.
enum Fail {
    Arity(String),
    Msg(&'static [u8]),
    Owned(Vec<u8>),
    /// A blocking command found nothing: it is parked until `deadline_ms`
    /// (Unix ms; 0: never), then answered `timeout_reply`
    /// ([`crate::blocking`]).
    Block {
        deadline_ms: u64,
        timeout_reply: &'static [u8],
        /// The command to run again, when not the request as sent (XREAD's
        /// `$` resolved to the id it meant when it blocked).
        again: Option<Vec<u8>>,
    },
}

type Res = Result<(), Fail>;

impl From<Full> for Fail {
    fn from(_: Full) -> Self {
        Fail::Msg(OOM)
    }
}

impl From<Refused> for Fail {
    fn from(r: Refused) -> Self {
        match r {
            Refused::Full => Fail::Msg(OOM),
            Refused::Busy => Fail::Msg(crate::busy::BUSY),
        }
    }
}

fn arity(ok: bool, name: &str) -> Res {
    if ok {
        Ok(())
    } else {
        Err(Fail::Arity(name.to_ascii_lowercase()))
    }
}

/// `s` as Redis's `string2ll` reads an integer: canonical form only (no
/// sign but `-`, no leading zero, no `-0`, no space), within 64 bits.
fn parse_i64(s: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(s).ok()?;
    if s.starts_with('+') || (s.len() > 1 && s.starts_with('0')) || s.starts_with("-0") {
        return None;
    }
    s.parse().ok()
}

fn parse_f64(s: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(s).ok()?;
    let v = match s.to_ascii_lowercase().as_str() {
        "inf" | "+inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        t => t.parse().ok()?,
    };
    (!v.is_nan()).then_some(v)
}

fn int_arg(s: &[u8]) -> Result<i64, Fail> {
    parse_i64(s).ok_or(Fail::Msg(NOT_INTEGER))
}

/// Either the caller's guard (inside `EXEC`) or one taken for this command.
enum Locks<'g, 'd> {
    Held(&'g mut Guard<'d>),
    Own(Guard<'d>),
}

impl<'d> std::ops::Deref for Locks<'_, 'd> {
    type Target = Guard<'d>;
    fn deref(&self) -> &Guard<'d> {
        match self {
            Locks::Held(g) => g,
            Locks::Own(g) => g,
        }
    }
}

impl<'d> std::ops::DerefMut for Locks<'_, 'd> {
    fn deref_mut(&mut self) -> &mut Guard<'d> {
        match self {
            Locks::Held(g) => g,
            Locks::Own(g) => g,
        }
    }
}

/// Which handler runs a command: a module of this folder (each module's
/// `run` picks the command by name among its own), or the one answered
/// here. The table ([`COMMANDS`]) gives each command's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Connection,
    Scripting,
    PubSub,
    Streams,
    Slowlog,
    Latency,
    Server,
    Transaction,
    Strings,
    Sort,
    Bitmaps,
    Counters,
    Keys,
    Expiry,
    Lists,
    Hashes,
    Sets,
    ZSets,
    /// WAIT: no replicas, answered here.
    Wait,
}

/// What a command's cost grows with, as the network thread reads it from
/// the command's name and arguments alone (`resp::classify`; the store's
/// sizes refine it where the front end has them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cost {
    /// Constant, or small whatever its arguments.
    Short,
    /// A script: its type is the script's.
    Script,
    /// Its keys, one a word (MGET, DEL, ...): long past `MULTI_KEYS`.
    Keys,
    /// Its key/value pairs (MSET): long past `MULTI_KEYS` pairs.
    Pairs,
    /// A key and its members or fields (HMGET, SADD, ...): long past
    /// `MULTI_KEYS` of them.
    Members,
    /// A rank range (LRANGE, ZRANGE): long when its span may pass
    /// `RANGE_SHORT` elements.
    Span,
    /// A walk of a collection or of the keyspace: always long.
    Walk,
    /// A SCAN step: long when its COUNT passes `RANGE_SHORT`.
    Scan,
}

/// How the network thread types command `name` (as sent, any case):
/// its table row's [`Cost`]; `Short` for a name the table lacks (it is
/// answered at once as unknown).
pub(crate) fn cost_of(name: &[u8]) -> Cost {
    let mut buf = [0u8; NAME_MAX];
    spec(lowercase_name(name, &mut buf)).map_or(Cost::Short, |c| c.cost)
}

/// Longer than any command's name.
const NAME_MAX: usize = 24;

/// Command `raw` (as sent, any case) in lower case, in `buf` (no
/// allocation); empty when longer than any command (an unknown one).
fn lowercase_name<'b>(raw: &[u8], buf: &'b mut [u8; NAME_MAX]) -> &'b [u8] {
    match buf.get_mut(..raw.len()) {
        Some(name) => {
            name.copy_from_slice(raw);
            name.make_ascii_lowercase();
            name
        }
        None => b"",
    }
}

/// Keys a command names beyond Redis's first/last/step triple (Redis 7
/// gives them as key specs): a script must declare them too, and a
/// command that runs under its caller's locks (a script's, EXEC's) may
/// touch only keys those hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MoreKeys {
    None,
    /// A key count at this word (the name is word 0), that many keys after
    /// it (ZUNIONSTORE's sources, ZUNION's, LMPOP's).
    Counted(u8),
    /// The first half of the words after `STREAMS` (XREAD).
    Streams,
    /// The word after `STORE` (SORT's destination).
    Store,
}

/// A command as Redis 7's command table gives it (`COMMAND INFO`): its
/// arity, counting the name (n: exactly n words; -n: at least n), and where
/// its keys are (the first and last key's word, the name being word 0, the
/// last -1 for "to the end", and the step; 0, 0, 0: no key, or keys found
/// otherwise, as EVAL's after its key count).
struct CommandSpec {
    /// The handler that runs it (with its family's other commands).
    family: Family,
    /// How the network thread types it ([`Cost`]).
    cost: Cost,
    /// Keys it names beyond the first/last/step triple ([`MoreKeys`]).
    more_keys: MoreKeys,
    /// It touches no key at all (connection state, pub/sub, the server's
    /// settings and logs, the clock): a transaction need lock nothing
    /// for it.
    keyless: bool,
    name: &'static str,
    arity: i32,
    first_key: u8,
    last_key: i8,
    key_step: u8,
    /// Redis's `write` flag: it may change the data (a script that called
    /// one cannot be killed).
    write: bool,
    /// How many of its leading keys it changes in place (a collection it
    /// adds to, removes from or reorders), whose shared value is copied
    /// outside the lock first ([`lock`]): 1 for a write by default, 2 for
    /// the moves between two keys, 0 for the commands that only replace or
    /// delete their destination (the STORE forms, RENAME, COPY, DEL).
    in_place: u8,
}

impl CommandSpec {
    const fn new(
        family: Family,
        name: &'static str,
        arity: i32,
        first_key: u8,
        last_key: i8,
        key_step: u8,
    ) -> Self {
        Self {
            family,
            cost: Cost::Short,
            more_keys: MoreKeys::None,
            keyless: false,
            name,
            arity,
            first_key,
            last_key,
            key_step,
            write: false,
            in_place: 0,
        }
    }

    /// Typed by `cost` rather than short.
    const fn costs(self, cost: Cost) -> Self {
        Self { cost, ..self }
    }

    /// Naming more keys than its triple says, as `more` finds them.
    const fn more_keys(self, more: MoreKeys) -> Self {
        Self {
            more_keys: more,
            ..self
        }
    }

    /// Touching no key ([`CommandSpec::keyless`]).
    const fn keyless(self) -> Self {
        Self {
            keyless: true,
            ..self
        }
    }

    /// Flagged `write`, changing its first key in place.
    const fn write(self) -> Self {
        Self {
            write: true,
            in_place: 1,
            ..self
        }
    }

    /// Flagged `write`, changing its first `keys` keys in place.
    const fn write_in_place(self, keys: u8) -> Self {
        Self {
            write: true,
            in_place: keys,
            ..self
        }
    }

    /// Whether `words` words (the name counted) fit the arity.
    fn fits(&self, words: usize) -> bool {
        let n = self.arity.unsigned_abs() as usize;
        if self.arity >= 0 {
            words == n
        } else {
            words >= n
        }
    }

    /// Every key among `args` (the words after the name): those of the
    /// first/last/step triple, then those [`MoreKeys`] finds. What a script
    /// must declare, and what a command under a caller's locks may touch.
    fn keys<'a, 'b>(&self, args: &'b [&'a [u8]]) -> impl Iterator<Item = &'a [u8]> + 'b {
        let word = |i: usize| args.get(i.wrapping_sub(1)).copied();
        let more: &'b [&'a [u8]] = match self.more_keys {
            MoreKeys::None => &[],
            MoreKeys::Counted(at) => {
                let at = usize::from(at);
                let n = word(at)
                    .and_then(parse_i64)
                    .and_then(|n| usize::try_from(n).ok())
                    .unwrap_or(0);
                let from = at.min(args.len());
                &args[from..from.saturating_add(n).min(args.len())]
            }
            MoreKeys::Streams => {
                let after = args
                    .iter()
                    .position(|a| a.eq_ignore_ascii_case(b"streams"))
                    .map_or(args.len(), |i| i + 1);
                let rest = &args[after..];
                &rest[..rest.len() / 2]
            }
            MoreKeys::Store => {
                let at = args
                    .iter()
                    .position(|a| a.eq_ignore_ascii_case(b"store"))
                    .map_or(args.len(), |i| i + 1);
                args.get(at..(at + 1).min(args.len())).unwrap_or_default()
            }
        };
        self.triple_keys(args).chain(more.iter().copied())
    }

    /// Whether every key it may touch is among those [`keys`](Self::keys)
    /// finds in its arguments.
    fn names_its_keys(&self) -> bool {
        self.first_key > 0 || self.more_keys != MoreKeys::None
    }

    /// The keys of the first/last/step triple among `args`.
    fn triple_keys<'a, 'b>(&self, args: &'b [&'a [u8]]) -> impl Iterator<Item = &'a [u8]> + 'b {
        let first = usize::from(self.first_key);
        // A negative last key counts from the end (-1: the last word, -2:
        // the one before it, as BLPOP's timeout follows its keys).
        let last = match self.last_key {
            l if l < 0 => (args.len() + 1).saturating_sub(l.unsigned_abs() as usize),
            l => (l as usize).min(args.len()),
        };
        let words = if first == 0 {
            &[][..]
        } else {
            args.get(first - 1..last).unwrap_or_default()
        };
        words
            .iter()
            .copied()
            .step_by(usize::from(self.key_step.max(1)))
    }
}

/// The commands this server knows, each (lowercase) as Redis 7's command
/// table gives it ([`CommandSpec`]). A command inside `MULTI` with a wrong
/// count is refused at once and its transaction aborted, as Redis does; a
/// script may reach only the keys it declares, found by the key positions.
const COMMANDS: &[CommandSpec] = &[
    CommandSpec::new(Family::Connection, "ping", -1, 0, 0, 0).keyless(),
    CommandSpec::new(Family::Connection, "echo", 2, 0, 0, 0).keyless(),
    CommandSpec::new(Family::Connection, "quit", -1, 0, 0, 0).keyless(),
    CommandSpec::new(Family::Connection, "hello", -1, 0, 0, 0).keyless(),
    CommandSpec::new(Family::Connection, "auth", -2, 0, 0, 0).keyless(),
    CommandSpec::new(Family::Connection, "client", -2, 0, 0, 0).keyless(),
    CommandSpec::new(Family::Connection, "select", 2, 0, 0, 0).keyless(),
    CommandSpec::new(Family::Server, "command", -1, 0, 0, 0).keyless(),
    CommandSpec::new(Family::Server, "info", -1, 0, 0, 0).keyless(),
    CommandSpec::new(Family::Server, "config", -2, 0, 0, 0).keyless(),
    CommandSpec::new(Family::Server, "dbsize", 1, 0, 0, 0),
    CommandSpec::new(Family::Server, "time", 1, 0, 0, 0).keyless(),
    CommandSpec::new(Family::Server, "flushdb", -1, 0, 0, 0)
        .costs(Cost::Walk)
        .write_in_place(0),
    CommandSpec::new(Family::Server, "flushall", -1, 0, 0, 0)
        .costs(Cost::Walk)
        .write_in_place(0),
    CommandSpec::new(Family::Transaction, "multi", 1, 0, 0, 0),
    CommandSpec::new(Family::Transaction, "exec", 1, 0, 0, 0),
    CommandSpec::new(Family::Transaction, "discard", 1, 0, 0, 0),
    CommandSpec::new(Family::Transaction, "watch", -2, 1, -1, 1),
    CommandSpec::new(Family::Transaction, "unwatch", 1, 0, 0, 0),
    CommandSpec::new(Family::Connection, "reset", 1, 0, 0, 0).keyless(),
    CommandSpec::new(Family::Strings, "get", 2, 1, 1, 1),
    CommandSpec::new(Family::Strings, "set", -3, 1, 1, 1).write(),
    CommandSpec::new(Family::Strings, "setex", 4, 1, 1, 1).write(),
    CommandSpec::new(Family::Strings, "psetex", 4, 1, 1, 1).write(),
    CommandSpec::new(Family::Strings, "setnx", 3, 1, 1, 1).write(),
    CommandSpec::new(Family::Strings, "mget", -2, 1, -1, 1).costs(Cost::Keys),
    CommandSpec::new(Family::Strings, "mset", -3, 1, -1, 2)
        .costs(Cost::Pairs)
        .write(),
    CommandSpec::new(Family::Strings, "msetnx", -3, 1, -1, 2)
        .costs(Cost::Pairs)
        .write(),
    CommandSpec::new(Family::Counters, "incr", 2, 1, 1, 1).write(),
    CommandSpec::new(Family::Counters, "incrby", 3, 1, 1, 1).write(),
    CommandSpec::new(Family::Counters, "decr", 2, 1, 1, 1).write(),
    CommandSpec::new(Family::Counters, "decrby", 3, 1, 1, 1).write(),
    CommandSpec::new(Family::Counters, "incrbyfloat", 3, 1, 1, 1).write(),
    CommandSpec::new(Family::Counters, "append", 3, 1, 1, 1).write(),
    CommandSpec::new(Family::Keys, "strlen", 2, 1, 1, 1),
    CommandSpec::new(Family::Strings, "getset", 3, 1, 1, 1).write(),
    CommandSpec::new(Family::Strings, "getdel", 2, 1, 1, 1).write(),
    CommandSpec::new(Family::Strings, "getrange", 4, 1, 1, 1),
    CommandSpec::new(Family::Bitmaps, "setbit", 4, 1, 1, 1).write(),
    CommandSpec::new(Family::Bitmaps, "getbit", 3, 1, 1, 1),
    CommandSpec::new(Family::Bitmaps, "bitcount", -2, 1, 1, 1),
    CommandSpec::new(Family::Bitmaps, "bitpos", -3, 1, 1, 1),
    CommandSpec::new(Family::Bitmaps, "bitop", -4, 2, -1, 1).write_in_place(0),
    CommandSpec::new(Family::Bitmaps, "bitfield", -2, 1, 1, 1).write(),
    CommandSpec::new(Family::Bitmaps, "bitfield_ro", -2, 1, 1, 1),
    CommandSpec::new(Family::Strings, "substr", 4, 1, 1, 1),
    CommandSpec::new(Family::Strings, "lcs", -3, 1, 2, 1),
    CommandSpec::new(Family::Keys, "copy", -3, 1, 2, 1).write_in_place(0),
    CommandSpec::new(Family::Keys, "randomkey", 1, 0, 0, 0),
    CommandSpec::new(Family::Keys, "object", -2, 2, 2, 1),
    CommandSpec::new(Family::Strings, "getex", -2, 1, 1, 1).write(),
    CommandSpec::new(Family::Strings, "setrange", 4, 1, 1, 1).write(),
    CommandSpec::new(Family::Keys, "del", -2, 1, -1, 1)
        .costs(Cost::Keys)
        .write_in_place(0),
    CommandSpec::new(Family::Keys, "unlink", -2, 1, -1, 1)
        .costs(Cost::Keys)
        .write_in_place(0),
    CommandSpec::new(Family::Keys, "exists", -2, 1, -1, 1).costs(Cost::Keys),
    CommandSpec::new(Family::Keys, "touch", -2, 1, -1, 1).costs(Cost::Keys),
    CommandSpec::new(Family::Keys, "rename", 3, 1, 2, 1).write_in_place(0),
    CommandSpec::new(Family::Keys, "renamenx", 3, 1, 2, 1).write_in_place(0),
    CommandSpec::new(Family::Expiry, "expire", -3, 1, 1, 1).write(),
    CommandSpec::new(Family::Expiry, "pexpire", -3, 1, 1, 1).write(),
    CommandSpec::new(Family::Expiry, "expireat", -3, 1, 1, 1).write(),
    CommandSpec::new(Family::Expiry, "pexpireat", -3, 1, 1, 1).write(),
    CommandSpec::new(Family::Expiry, "ttl", 2, 1, 1, 1),
    CommandSpec::new(Family::Expiry, "pttl", 2, 1, 1, 1),
    CommandSpec::new(Family::Expiry, "persist", 2, 1, 1, 1).write(),
    CommandSpec::new(Family::Keys, "type", 2, 1, 1, 1),
    CommandSpec::new(Family::Keys, "scan", -2, 0, 0, 0).costs(Cost::Scan),
    CommandSpec::new(Family::Keys, "keys", 2, 0, 0, 0).costs(Cost::Walk),
    CommandSpec::new(Family::Lists, "lpush", -3, 1, 1, 1).write(),
    CommandSpec::new(Family::Lists, "lpushx", -3, 1, 1, 1).write(),
    CommandSpec::new(Family::Lists, "lmpop", -4, 0, 0, 0)
        .more_keys(MoreKeys::Counted(1))
        .write(),
    CommandSpec::new(Family::Lists, "blmpop", -5, 0, 0, 0)
        .more_keys(MoreKeys::Counted(2))
        .write(),
    CommandSpec::new(Family::ZSets, "zmpop", -4, 0, 0, 0)
        .more_keys(MoreKeys::Counted(1))
        .write(),
    CommandSpec::new(Family::ZSets, "bzmpop", -5, 0, 0, 0)
        .more_keys(MoreKeys::Counted(2))
        .write(),
    CommandSpec::new(Family::Lists, "rpushx", -3, 1, 1, 1).write(),
    CommandSpec::new(Family::Lists, "rpush", -3, 1, 1, 1).write(),
    CommandSpec::new(Family::Lists, "lpop", -2, 1, 1, 1).write(),
    CommandSpec::new(Family::Lists, "rpop", -2, 1, 1, 1).write(),
    CommandSpec::new(Family::Lists, "lrange", 4, 1, 1, 1).costs(Cost::Span),
    CommandSpec::new(Family::Keys, "llen", 2, 1, 1, 1),
    CommandSpec::new(Family::Lists, "lindex", 3, 1, 1, 1),
    CommandSpec::new(Family::Lists, "lset", 4, 1, 1, 1).write(),
    CommandSpec::new(Family::Lists, "ltrim", 4, 1, 1, 1).write(),
    CommandSpec::new(Family::Lists, "lrem", 4, 1, 1, 1)
        .costs(Cost::Walk)
        .write(),
    CommandSpec::new(Family::Lists, "lmove", 5, 1, 2, 1).write_in_place(2),
    CommandSpec::new(Family::Lists, "rpoplpush", 3, 1, 2, 1).write_in_place(2),
    CommandSpec::new(Family::Hashes, "hset", -4, 1, 1, 1).write(),
    CommandSpec::new(Family::Hashes, "hmset", -4, 1, 1, 1).write(),
    CommandSpec::new(Family::Hashes, "hget", 3, 1, 1, 1),
    CommandSpec::new(Family::Hashes, "hstrlen", 3, 1, 1, 1),
    CommandSpec::new(Family::Hashes, "hmget", -3, 1, 1, 1).costs(Cost::Members),
    CommandSpec::new(Family::Hashes, "hgetall", 2, 1, 1, 1).costs(Cost::Walk),
    CommandSpec::new(Family::Hashes, "hkeys", 2, 1, 1, 1).costs(Cost::Walk),
    CommandSpec::new(Family::Hashes, "hvals", 2, 1, 1, 1).costs(Cost::Walk),
    CommandSpec::new(Family::Hashes, "hsetnx", 4, 1, 1, 1).write(),
    CommandSpec::new(Family::Hashes, "hdel", -3, 1, 1, 1)
        .costs(Cost::Members)
        .write(),
    CommandSpec::new(Family::Hashes, "hincrby", 4, 1, 1, 1).write(),
    CommandSpec::new(Family::Keys, "hlen", 2, 1, 1, 1),
    CommandSpec::new(Family::Hashes, "hexists", 3, 1, 1, 1),
    CommandSpec::new(Family::Sets, "sadd", -3, 1, 1, 1)
        .costs(Cost::Members)
        .write(),
    CommandSpec::new(Family::Sets, "srem", -3, 1, 1, 1)
        .costs(Cost::Members)
        .write(),
    CommandSpec::new(Family::Sets, "smembers", 2, 1, 1, 1).costs(Cost::Walk),
    CommandSpec::new(Family::Sets, "sismember", 3, 1, 1, 1),
    CommandSpec::new(Family::Sets, "smismember", -3, 1, 1, 1).costs(Cost::Members),
    CommandSpec::new(Family::Sets, "sinter", -2, 1, -1, 1).costs(Cost::Walk),
    CommandSpec::new(Family::Sets, "sintercard", -3, 0, 0, 0).more_keys(MoreKeys::Counted(1)),
    CommandSpec::new(Family::Sets, "sunion", -2, 1, -1, 1).costs(Cost::Walk),
    CommandSpec::new(Family::Sets, "sdiff", -2, 1, -1, 1).costs(Cost::Walk),
    CommandSpec::new(Family::Sets, "smove", 4, 1, 2, 1).write_in_place(2),
    CommandSpec::new(Family::Keys, "scard", 2, 1, 1, 1),
    CommandSpec::new(Family::Sets, "spop", -2, 1, 1, 1).write(),
    CommandSpec::new(Family::ZSets, "zunionstore", -4, 1, 1, 1)
        .more_keys(MoreKeys::Counted(2))
        .costs(Cost::Walk)
        .write_in_place(0),
    CommandSpec::new(Family::ZSets, "zinterstore", -4, 1, 1, 1)
        .more_keys(MoreKeys::Counted(2))
        .costs(Cost::Walk)
        .write_in_place(0),
    CommandSpec::new(Family::ZSets, "zdiffstore", -4, 1, 1, 1)
        .more_keys(MoreKeys::Counted(2))
        .costs(Cost::Walk)
        .write_in_place(0),
    CommandSpec::new(Family::ZSets, "zunion", -3, 0, 0, 0)
        .more_keys(MoreKeys::Counted(1))
        .costs(Cost::Walk),
    CommandSpec::new(Family::ZSets, "zinter", -3, 0, 0, 0)
        .more_keys(MoreKeys::Counted(1))
        .costs(Cost::Walk),
    CommandSpec::new(Family::ZSets, "zdiff", -3, 0, 0, 0)
        .more_keys(MoreKeys::Counted(1))
        .costs(Cost::Walk),
    CommandSpec::new(Family::ZSets, "zintercard", -3, 0, 0, 0)
        .more_keys(MoreKeys::Counted(1))
        .costs(Cost::Walk),
    CommandSpec::new(Family::ZSets, "zmscore", -3, 1, 1, 1),
    CommandSpec::new(Family::ZSets, "zrandmember", -2, 1, 1, 1),
    CommandSpec::new(Family::Hashes, "hrandfield", -2, 1, 1, 1),
    CommandSpec::new(Family::Sort, "sort", -2, 1, 1, 1)
        .more_keys(MoreKeys::Store)
        .costs(Cost::Walk)
        .write_in_place(0),
    CommandSpec::new(Family::Sort, "sort_ro", -2, 1, 1, 1).costs(Cost::Walk),
    CommandSpec::new(Family::ZSets, "zrangestore", -5, 1, 2, 1)
        .costs(Cost::Walk)
        .write_in_place(0),
    CommandSpec::new(Family::ZSets, "zadd", -4, 1, 1, 1).write(),
    CommandSpec::new(Family::ZSets, "zrange", -4, 1, 1, 1).costs(Cost::Span),
    CommandSpec::new(Family::ZSets, "zrangebyscore", -4, 1, 1, 1).costs(Cost::Walk),
    CommandSpec::new(Family::Hashes, "zrem", -3, 1, 1, 1)
        .costs(Cost::Members)
        .write(),
    CommandSpec::new(Family::ZSets, "zincrby", 4, 1, 1, 1).write(),
    CommandSpec::new(Family::Keys, "zcard", 2, 1, 1, 1),
    CommandSpec::new(Family::ZSets, "zpopmin", -2, 1, 1, 1).write(),
    CommandSpec::new(Family::ZSets, "zpopmax", -2, 1, 1, 1).write(),
    CommandSpec::new(Family::ZSets, "zrank", 3, 1, 1, 1),
    CommandSpec::new(Family::ZSets, "zrevrank", 3, 1, 1, 1),
    CommandSpec::new(Family::ZSets, "zcount", 4, 1, 1, 1).costs(Cost::Walk),
    CommandSpec::new(Family::ZSets, "zrevrange", -4, 1, 1, 1).costs(Cost::Span),
    CommandSpec::new(Family::ZSets, "zscore", 3, 1, 1, 1),
    CommandSpec::new(Family::Sets, "sinterstore", -3, 1, -1, 1)
        .costs(Cost::Walk)
        .write_in_place(0),
    CommandSpec::new(Family::Sets, "sunionstore", -3, 1, -1, 1)
        .costs(Cost::Walk)
        .write_in_place(0),
    CommandSpec::new(Family::Sets, "sdiffstore", -3, 1, -1, 1)
        .costs(Cost::Walk)
        .write_in_place(0),
    CommandSpec::new(Family::Sets, "srandmember", -2, 1, 1, 1),
    CommandSpec::new(Family::Hashes, "hincrbyfloat", 4, 1, 1, 1).write(),
    CommandSpec::new(Family::Lists, "lpos", -3, 1, 1, 1).costs(Cost::Walk),
    CommandSpec::new(Family::Lists, "linsert", 5, 1, 1, 1)
        .costs(Cost::Walk)
        .write(),
    CommandSpec::new(Family::Expiry, "expiretime", 2, 1, 1, 1),
    CommandSpec::new(Family::Expiry, "pexpiretime", 2, 1, 1, 1),
    CommandSpec::new(Family::Wait, "wait", 3, 0, 0, 0).keyless(),
    CommandSpec::new(Family::Slowlog, "slowlog", -2, 0, 0, 0).keyless(),
    CommandSpec::new(Family::Latency, "latency", -2, 0, 0, 0).keyless(),
    CommandSpec::new(Family::Keys, "memory", -2, 0, 0, 0),
    CommandSpec::new(Family::Keys, "hscan", -3, 1, 1, 1).costs(Cost::Scan),
    CommandSpec::new(Family::Keys, "sscan", -3, 1, 1, 1).costs(Cost::Scan),
    CommandSpec::new(Family::Keys, "zscan", -3, 1, 1, 1).costs(Cost::Scan),
    CommandSpec::new(Family::Lists, "blpop", -3, 1, -2, 1).write(),
    CommandSpec::new(Family::Lists, "brpop", -3, 1, -2, 1).write(),
    CommandSpec::new(Family::Lists, "blmove", 6, 1, 2, 1).write_in_place(2),
    CommandSpec::new(Family::Lists, "brpoplpush", 4, 1, 2, 1).write_in_place(2),
    CommandSpec::new(Family::ZSets, "zrangebylex", -4, 1, 1, 1).costs(Cost::Walk),
    CommandSpec::new(Family::ZSets, "zrevrangebylex", -4, 1, 1, 1).costs(Cost::Walk),
    CommandSpec::new(Family::ZSets, "zlexcount", 4, 1, 1, 1).costs(Cost::Walk),
    CommandSpec::new(Family::ZSets, "bzpopmin", -3, 1, -2, 1).write(),
    CommandSpec::new(Family::ZSets, "bzpopmax", -3, 1, -2, 1).write(),
    CommandSpec::new(Family::ZSets, "zrevrangebyscore", -4, 1, 1, 1).costs(Cost::Walk),
    CommandSpec::new(Family::ZSets, "zremrangebyscore", 4, 1, 1, 1)
        .costs(Cost::Walk)
        .write(),
    CommandSpec::new(Family::ZSets, "zremrangebyrank", 4, 1, 1, 1)
        .costs(Cost::Walk)
        .write(),
    CommandSpec::new(Family::ZSets, "zremrangebylex", 4, 1, 1, 1)
        .costs(Cost::Walk)
        .write(),
    CommandSpec::new(Family::Scripting, "eval", -3, 0, 0, 0).costs(Cost::Script),
    CommandSpec::new(Family::Scripting, "evalsha", -3, 0, 0, 0).costs(Cost::Script),
    CommandSpec::new(Family::Scripting, "script", -2, 0, 0, 0),
    CommandSpec::new(Family::PubSub, "subscribe", -2, 0, 0, 0).keyless(),
    CommandSpec::new(Family::PubSub, "unsubscribe", -1, 0, 0, 0).keyless(),
    CommandSpec::new(Family::PubSub, "psubscribe", -2, 0, 0, 0).keyless(),
    CommandSpec::new(Family::PubSub, "punsubscribe", -1, 0, 0, 0).keyless(),
    CommandSpec::new(Family::PubSub, "publish", 3, 0, 0, 0).keyless(),
    CommandSpec::new(Family::PubSub, "pubsub", -2, 0, 0, 0).keyless(),
    CommandSpec::new(Family::Streams, "xadd", -5, 1, 1, 1).write(),
    CommandSpec::new(Family::Streams, "xlen", 2, 1, 1, 1),
    CommandSpec::new(Family::Streams, "xrange", -4, 1, 1, 1),
    CommandSpec::new(Family::Streams, "xrevrange", -4, 1, 1, 1),
    CommandSpec::new(Family::Streams, "xdel", -3, 1, 1, 1).write(),
    CommandSpec::new(Family::Streams, "xtrim", -4, 1, 1, 1).write(),
    // Its keys follow STREAMS: found by the command, not the table.
    CommandSpec::new(Family::Streams, "xread", -4, 0, 0, 0).more_keys(MoreKeys::Streams),
];

/// Whether `name` (lowercase) is a command this server runs.
pub fn known(name: &[u8]) -> bool {
    spec(name).is_some()
}

/// The table's entry of command `name` (lowercase): one hash lookup, on
/// every command's path.
fn spec(name: &[u8]) -> Option<&'static CommandSpec> {
    spec_index(name).map(|i| &COMMANDS[i])
}

/// The table's index of command `name` (lowercase).
fn spec_index(name: &[u8]) -> Option<usize> {
    static BY_NAME: std::sync::LazyLock<hashbrown::HashMap<&'static [u8], usize>> =
        std::sync::LazyLock::new(|| {
            COMMANDS
                .iter()
                .enumerate()
                .map(|(i, c)| (c.name.as_bytes(), i))
                .collect()
        });
    BY_NAME.get(name).copied()
}

/// Whether `words` words (the name counted) fit the arity of command
/// `name` (lowercase; a known one).
fn arity_fits(name: &[u8], words: usize) -> bool {
    spec(name).is_none_or(|c| c.fits(words))
}

/// Runs one complete request against `db` for the connection whose state
/// is `session`, appending the reply to `out`. `point` is the request's
/// preemption point, called only while no lock is held.
///
/// # Errors
/// `req` is not exactly one valid request (nothing is appended).
pub fn execute(
    req: &[u8],
    db: &Db,
    session: &mut Session,
    out: &mut Vec<u8>,
    point: &mut dyn FnMut(),
) -> Result<(), RespError> {
    let cmd = parse(req)?;
    execute_parsed(req, cmd, db, session, out, point)
}

/// [`execute`] of `req` as the caller already parsed it (`cmd`, from
/// [`parse`]), so that it is not parsed again on its way.
pub(crate) fn execute_parsed(
    req: &[u8],
    cmd: crate::resp::wire::Command<'_>,
    db: &Db,
    session: &mut Session,
    out: &mut Vec<u8>,
    point: &mut dyn FnMut(),
) -> Result<(), RespError> {
    // One clock reading for the command's time, the session's idle time
    // and the time its keys see (their deadlines, their LRU clock).
    let t0 = Instant::now();
    session.started = Some(t0);
    let _time = crate::db::CommandTime::start(t0);
    let args: Args<'_> = cmd.args.collect();
    let mut lower = [0u8; NAME_MAX];
    let name = lowercase_name(cmd.raw_name, &mut lower);
    session.ran(name);
    let mut w = Reply {
        out,
        resp3: session.resp3,
    };
    // Inside MULTI: queue (transaction commands excepted).
    if let Some(queue) = session.multi.as_mut()
        && !matches!(
            name,
            b"exec" | b"discard" | b"multi" | b"watch" | b"quit" | b"reset"
        )
    {
        if !known(name) {
            session.multi_failed = true;
            unknown(&mut w, cmd.raw_name, &args);
            return Ok(());
        }
        if !arity_fits(name, args.len() + 1) {
            session.multi_failed = true;
            write_fail(
                &mut w,
                Fail::Arity(String::from_utf8_lossy(name).into_owned()),
            );
            return Ok(());
        }
        if queue.len() >= MAX_QUEUED || session.multi_bytes + req.len() > MAX_QUEUED_BYTES {
            session.multi_failed = true;
            queue.clear();
            session.multi_bytes = 0;
            w.error(b"ERR too many commands queued in this MULTI");
            return Ok(());
        }
        queue.push(req.to_vec());
        session.multi_bytes += req.len();
        w.simple(b"QUEUED");
        return Ok(());
    }
    // Every command's arity is checked here, from the table, before it
    // runs (as Redis checks it): no command reads past its words.
    let index = spec_index(name);
    if index.is_some_and(|i| !COMMANDS[i].fits(args.len() + 1)) {
        write_fail(
            &mut w,
            Fail::Arity(String::from_utf8_lossy(name).into_owned()),
        );
        return Ok(());
    }
    // A RESP2 connection that listens may only (un)subscribe, PING (in
    // its two-element form), QUIT and RESET.
    if index.is_some() && session.subscriptions > 0 && !session.resp3 {
        if let Some(m) = pubsub::refused_while_subscribed(name, cmd.raw_name) {
            w.error(&m);
            return Ok(());
        }
        if name == b"ping" && args.len() <= 1 {
            pubsub::subscribed_ping(&args, &mut w);
            return Ok(());
        }
    }
    let start = w.out.len();
    CHANGING.set(index.map_or(0, |i| usize::from(COMMANDS[i].in_place)));
    let r = run(
        index,
        name,
        cmd.raw_name,
        &args,
        db,
        session,
        &mut w,
        None,
        point,
    );
    if let Some(index) = index {
        db.commands().record(
            COMMANDS.len(),
            index,
            t0.elapsed().as_micros() as u64,
            r.is_err() || w.out.get(start) == Some(&b'-'),
            (cmd.raw_name, &args),
        );
    }
    match r {
        Ok(()) => {}
        Err(Fail::Block {
            deadline_ms,
            timeout_reply,
            again,
        }) => {
            w.out.truncate(start);
            let again = again.as_deref().unwrap_or(req);
            crate::blocking::write(w.out, deadline_ms, timeout_reply, again);
        }
        Err(f) => {
            w.out.truncate(start);
            write_fail(&mut w, f);
        }
    }
    Ok(())
}

fn write_fail(w: &mut Reply<'_>, f: Fail) {
    match f {
        Fail::Arity(name) => {
            w.error(format!("ERR wrong number of arguments for '{name}' command").as_bytes())
        }
        Fail::Msg(m) => w.error(m),
        Fail::Owned(m) => w.error(&m),
        // Only a connection's own command blocks (never one inside EXEC or
        // a script): elsewhere it is its timeout.
        Fail::Block { timeout_reply, .. } => w.raw(timeout_reply),
    }
}

fn unknown(w: &mut Reply<'_>, raw_name: &[u8], args: &[&[u8]]) {
    w.error(&crate::resp::wire::unknown_command(
        raw_name,
        args.iter().copied(),
    ));
}

thread_local! {
    /// How many leading keys the command this thread runs (outside EXEC
    /// and scripts) changes in place ([`CommandSpec::in_place`]): [`lock`]
    /// copies a shared value of those outside the lock. Set by [`execute`]
    /// from the command table.
    static CHANGING: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

#[cfg(test)]
thread_local! {
    /// Run between a STORE form's unlocked computation and its store, with
    /// no lock held (a command run there would deadlock on a held one):
    /// where a test changes a source meanwhile.
    static BETWEEN_COMPUTE_AND_STORE: std::cell::RefCell<Option<Box<dyn FnMut()>>> =
        const { std::cell::RefCell::new(None) };
}

/// Calls the test's [`BETWEEN_COMPUTE_AND_STORE`], if one is set.
#[cfg(test)]
fn between_compute_and_store() {
    BETWEEN_COMPUTE_AND_STORE.with(|f| {
        if let Some(f) = f.borrow_mut().as_mut() {
            f();
        }
    });
}

/// A STORE form that computed with its locks released takes the locks of
/// `keys` again: `None` if `read` no longer reads its sources as
/// `sources` (nothing to store: the caller reads again).
fn relock_unchanged<'g, 'd, S: PartialEq>(
    db: &'d Db,
    held: &'g mut Option<&mut Guard<'d>>,
    keys: &[&[u8]],
    read: impl Fn(&mut Guard<'d>) -> Result<Vec<S>, Fail>,
    sources: &[S],
) -> Result<Option<Locks<'g, 'd>>, Fail> {
    #[cfg(test)]
    between_compute_and_store();
    let mut again = lock(db, held, keys, true)?;
    Ok((read(&mut again).ok().as_deref() == Some(sources)).then_some(again))
}

/// A value read for a STORE form: equal to another only if both are
/// missing or the same shared collection.
struct SameValue(Option<Value>);

impl PartialEq for SameValue {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => a.same(b),
            _ => false,
        }
    }
}

/// Stores a STORE form's result under `g` ([`store_result`]) and frees
/// what `dst` held after the locks.
fn store_then_free(mut g: Locks<'_, '_>, dst: &[u8], value: Option<Value>) {
    let old = store_result(&mut g, dst, value);
    drop(g);
    drop(old);
}

/// How many times a STORE form computes with its locks released, before
/// it computes under them (its sources kept changing meanwhile).
const STORE_TRIES: usize = 2;

/// How many times a writer copies a shared value outside the lock before
/// it copies it under the lock (readers kept taking new snapshots).
const UNSHARE_TRIES: usize = 2;

/// Takes the locks a command needs: the caller's (inside EXEC) or its own.
/// A command that changes a key in place and finds its value shared (a big
/// command walks a snapshot of it: [`snapshot`]) copies it with the lock
/// released, then takes the lock again and puts the copy in place if the
/// value is still the one it copied, so that the change does not copy a
/// big value while others wait for the shard.
fn lock<'g, 'd>(
    db: &'d Db,
    held: &'g mut Option<&mut Guard<'d>>,
    keys: &[&[u8]],
    grows: bool,
) -> Result<Locks<'g, 'd>, Fail> {
    let take = || match keys {
        [k] => db.lock_one(k, grows),
        _ => db.lock_keys(keys.iter().copied(), grows),
    };
    match held {
        Some(g) => Ok(Locks::Held(g)),
        None => {
            let mut g = take()?;
            let changing = CHANGING.get().min(keys.len());
            if changing > 0 {
                for _ in 0..UNSHARE_TRIES {
                    let shared = keys[..changing].iter().find_map(|&k| {
                        g.peek(k)
                            .filter(|e| e.value.is_shared())
                            .map(|e| (k, e.value.clone()))
                    });
                    let Some((key, was)) = shared else {
                        break;
                    };
                    drop(g);
                    let copy = was.unshared_copy();
                    g = take()?;
                    g.replace_shared(key, &was, copy);
                }
            }
            Ok(Locks::Own(g))
        }
    }
}

/// Redis's reply to an unknown subcommand `sub` of `command` (its first
/// 128 bytes quoted).
fn unknown_subcommand(sub: &[u8], command: &str) -> Fail {
    let mut msg = b"ERR unknown subcommand '".to_vec();
    msg.extend_from_slice(&sub[..sub.len().min(128)]);
    msg.extend_from_slice(format!("'. Try {command} HELP.").as_bytes());
    Fail::Owned(msg)
}

/// A copy of `key`'s live value taken under its shard's lock, which is
/// released before the caller walks it: a collection is shared (`Arc`), so
/// the copy is O(1), and a writer that comes meanwhile copies the value
/// before changing it (`Arc::make_mut`). What a command that reads a whole
/// big value uses, so that it holds the shard only for the lookup, and
/// still answers from one consistent view.
fn snapshot<'d>(
    db: &'d Db,
    held: &mut Option<&mut Guard<'d>>,
    key: &[u8],
) -> Result<Option<crate::db::Value>, Fail> {
    let mut g = lock(db, held, &[key], false)?;
    Ok(g.get(key).map(|e| e.value.clone()))
}

/// Runs command `index` of the table ([`COMMANDS`]; `None`: not one of
/// them, answered as Redis answers an unknown command) by its family's
/// handler, which its name picks among the family's commands.
#[allow(clippy::too_many_arguments)]
fn run<'d>(
    index: Option<usize>,
    name: &[u8],
    raw_name: &[u8],
    a: &[&[u8]],
    db: &'d Db,
    session: &mut Session,
    w: &mut Reply<'_>,
    held: Option<&mut Guard<'d>>,
    point: &mut dyn FnMut(),
) -> Res {
    let Some(spec) = index.map(|i| &COMMANDS[i]) else {
        unknown(w, raw_name, a);
        return Ok(());
    };
    match spec.family {
        Family::Connection => connection::run(name, a, session, w),
        Family::Scripting => scripting::run(name, a, db, session, w, held),
        Family::PubSub => pubsub::run(name, a, session, w),
        Family::Streams => streams::run(name, a, db, w, held),
        Family::Slowlog => slowlog::slowlog(a, db, w),
        Family::Latency => slowlog::latency(a, db, w),
        Family::Server => server::run(name, a, db, w, held, point),
        Family::Transaction => transaction::run(name, a, db, session, w, held, point),
        Family::Strings => strings::run(name, a, db, w, held),
        Family::Sort => sort::run(name, a, db, w, held),
        Family::Bitmaps => bitmaps::run(name, a, db, w, held),
        Family::Counters => counters::run(name, a, db, w, held),
        Family::Keys => keys::run(name, a, db, w, held, point),
        Family::Expiry => expiry::run(name, a, db, w, held),
        Family::Lists => lists::run(name, a, db, w, held),
        Family::Hashes => hashes::run(name, a, db, w, held),
        Family::Sets => sets::run(name, a, db, w, held),
        Family::ZSets => zsets::run(name, a, db, w, held),
        Family::Wait => {
            // No replicas: every write is on as many replicas as asked of
            // none (Redis without replicas answers 0 at once).
            arity(a.len() == 2, "wait")?;
            int_arg(a[0])?;
            int_arg(a[1])?;
            w.int(0);
            Ok(())
        }
    }
}

/// An expire time as Redis 7 reads it: `t` in seconds (`seconds`) or ms,
/// from `now` (ms) unless `absolute`; the absolute time in ms. Refused with
/// Redis's "invalid expire time in 'NAME' command" when it does not fit a
/// signed 64-bit count of ms, or, where the command needs one (`positive`:
/// SET's EX/PX, SETEX, GETEX), when `t` is not positive. Checked before the
/// key is looked up, as Redis does.
fn expire_time(
    t: i64,
    seconds: bool,
    absolute: bool,
    positive: bool,
    now: u64,
    nm: &str,
) -> Result<i64, Fail> {
    let invalid = || Fail::Owned(format!("ERR invalid expire time in '{nm}' command").into_bytes());
    if positive && t <= 0 {
        return Err(invalid());
    }
    let ms = if seconds {
        t.checked_mul(1000).ok_or_else(invalid)?
    } else {
        t
    };
    if absolute {
        return Ok(ms);
    }
    let at = ms.checked_add(now as i64).ok_or_else(invalid)?;
    if positive && at <= 0 {
        return Err(invalid());
    }
    Ok(at)
}

/// A blocking command's timeout (seconds, fractions allowed; 0: forever)
/// in ms, read as Redis reads it.
fn block_timeout(t: &[u8]) -> Result<u64, Fail> {
    let secs = std::str::from_utf8(t)
        .ok()
        .and_then(|t| t.parse::<f64>().ok())
        .filter(|v| !v.is_nan())
        .ok_or(Fail::Msg(b"ERR timeout is not a float or out of range"))?;
    if secs < 0.0 {
        return Err(Fail::Msg(b"ERR timeout is negative"));
    }
    let ms = (secs * 1000.0).ceil();
    if ms > i64::MAX as f64 / 2.0 {
        return Err(Fail::Msg(b"ERR timeout is out of range"));
    }
    Ok(ms as u64)
}

/// The command found nothing and may wait: the front end parks it
/// ([`crate::blocking`]) until `timeout_ms` from `now_ms` (0: forever),
/// then answers Redis's null.
fn block(timeout_ms: u64, now_ms: u64, resp3: bool) -> Fail {
    Fail::Block {
        deadline_ms: if timeout_ms == 0 {
            0
        } else {
            now_ms.saturating_add(timeout_ms)
        },
        timeout_reply: if resp3 { b"_\r\n" } else { b"*-1\r\n" },
        again: None,
    }
}

/// LMPOP's and ZMPOP's arguments after the timeout (`numkeys key...
/// SIDE [COUNT n]`), read in Redis's order: the keys, the side (one of
/// `sides`, else a syntax error), then COUNT (at least 1; default 1).
fn mpop_args<'a>(a: &[&'a [u8]], sides: [&[u8]; 2]) -> Result<(Vec<&'a [u8]>, bool, usize), Fail> {
    let keys = a
        .first()
        .and_then(|k| parse_i64(k))
        .filter(|&k| k >= 1)
        .ok_or(Fail::Msg(b"ERR numkeys should be greater than 0"))?;
    let side_at = usize::try_from(keys)
        .ok()
        .filter(|&k| k < a.len() - 1)
        .map(|k| k + 1)
        .ok_or(Fail::Msg(SYNTAX))?;
    let first = if a[side_at].eq_ignore_ascii_case(sides[0]) {
        true
    } else if a[side_at].eq_ignore_ascii_case(sides[1]) {
        false
    } else {
        return Err(Fail::Msg(SYNTAX));
    };
    let count = match &a[side_at + 1..] {
        [] => 1,
        [opt, c] if opt.eq_ignore_ascii_case(b"count") => parse_i64(c)
            .filter(|&c| c >= 1)
            .and_then(|c| usize::try_from(c).ok())
            .ok_or(Fail::Msg(b"ERR count should be greater than 0"))?,
        _ => return Err(Fail::Msg(SYNTAX)),
    };
    Ok((a[1..side_at].to_vec(), first, count))
}

/// LMPOP and ZMPOP, and their blocking forms (a timeout first): up to
/// COUNT elements `pop` takes from one side of the first of the keys that
/// has any (`pop` answers `None` for a value of another type: WRONGTYPE),
/// each written by `write`; nothing there: a null reply, or, blocking and
/// outside a transaction, parked until a push or the timeout.
#[allow(clippy::too_many_arguments)]
fn multi_pop<'d, T>(
    name: &[u8],
    a: &[&[u8]],
    db: &'d Db,
    held: &mut Option<&mut Guard<'d>>,
    w: &mut Reply<'_>,
    sides: [&[u8]; 2],
    pop: impl Fn(&mut Value, bool) -> Option<Option<T>>,
    write: impl Fn(&mut Reply<'_>, &T),
) -> Res {
    let blocking = name.starts_with(b"b");
    let skip = usize::from(blocking);
    arity(
        a.len() >= 3 + skip,
        std::str::from_utf8(name).unwrap_or("?"),
    )?;
    let (keys, first, count) = mpop_args(&a[skip..], sides)?;
    let timeout = if blocking {
        Some(block_timeout(a[0])?)
    } else {
        None
    };
    let blocks = blocking && held.is_none();
    let mut g = lock(db, held, &keys, false)?;
    let popped = take_first(&mut g, &keys, |v| {
        let mut items = Vec::new();
        while items.len() < count {
            match pop(v, first)? {
                Some(x) => items.push(x),
                None => break,
            }
        }
        Some((!items.is_empty()).then_some(items))
    })?;
    if let Some((k, items)) = popped {
        w.array(2);
        w.bulk(k);
        w.array(items.len());
        for x in &items {
            write(w, x);
        }
        return Ok(());
    }
    match timeout {
        Some(t) if blocks => Err(block(t, g.now_ms, w.resp3)),
        _ => {
            w.nil_array();
            Ok(())
        }
    }
}

/// The blocking pops' search: the first of `keys`, in order, from whose
/// value `take` takes an element (a missing key is skipped; `take` answers
/// `None` for a value of another type: WRONGTYPE).
fn take_first<'k, T>(
    g: &mut Guard<'_>,
    keys: &[&'k [u8]],
    take: impl Fn(&mut Value) -> Option<Option<T>>,
) -> Result<Option<(&'k [u8], T)>, Fail> {
    for &k in keys {
        let taken = g.update(k, |slot| match slot.as_mut().map(|e| &mut e.value) {
            None => (false, Ok(None)),
            Some(v) => match take(v) {
                None => (false, Err(Fail::Msg(WRONGTYPE))),
                Some(t) => (t.is_some(), Ok(t)),
            },
        })?;
        if let Some(t) = taken {
            return Ok(Some((k, t)));
        }
    }
    Ok(None)
}

/// INCRBYFLOAT's and HINCRBYFLOAT's sum, in Redis's long double and its
/// text.
fn float_incr(cur: long_double::Operand, by: long_double::Operand) -> Result<String, Fail> {
    long_double::add(cur, by)
        .map(long_double::format)
        .ok_or(Fail::Msg(b"ERR increment would produce NaN or Infinity"))
}

/// Replaces a string value, keeping its deadline (INCR, APPEND keep a TTL).
fn set_str_keep_ttl(slot: &mut Option<Entry>, v: &[u8]) {
    match slot {
        Some(e) => e.value = Value::Str(v.into()),
        None => *slot = Some(Entry::new(Value::Str(v.into()))),
    }
}

/// Redis's `start..=stop` (negative from the end) as a clamped `s..e`.
fn range(start: i64, stop: i64, len: usize) -> (usize, usize) {
    let len = len as i64;
    let s = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let e = if stop < 0 {
        len + stop
    } else {
        stop.min(len - 1)
    };
    if s > e || s >= len {
        (0, 0)
    } else {
        (s as usize, e as usize + 1)
    }
}

/// Redis's glob: `*`, `?`, `[abc]`, `[^a]`, `[a-z]`, `\x`. Iterative, with
/// one backtrack point per `*` (linear-ish, no recursion to blow the stack).
pub fn glob_match(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() {
            match p[pi] {
                b'*' => {
                    star = Some((pi, si));
                    pi += 1;
                    continue;
                }
                b'?' => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                b'[' => {
                    if let Some((matched, end)) = class(p, pi, s[si])
                        && matched
                    {
                        pi = end;
                        si += 1;
                        continue;
                    }
                }
                b'\\' if pi + 1 < p.len() && p[pi + 1] == s[si] => {
                    pi += 2;
                    si += 1;
                    continue;
                }
                b'\\' if pi + 1 < p.len() => {}
                c if c == s[si] => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, ss)) => {
                pi = sp + 1;
                si = ss + 1;
                star = Some((sp, ss + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// A `[...]` class at `p[at]` against `c`: whether it matched and where the
/// pattern goes on.
fn class(p: &[u8], at: usize, c: u8) -> Option<(bool, usize)> {
    let mut i = at + 1;
    let negate = p.get(i) == Some(&b'^');
    if negate {
        i += 1;
    }
    let mut matched = false;
    while i < p.len() && p[i] != b']' {
        if p[i] == b'\\' && i + 1 < p.len() {
            matched |= p[i + 1] == c;
            i += 2;
        } else if i + 2 < p.len() && p[i + 1] == b'-' && p[i + 2] != b']' {
            let (lo, hi) = (p[i].min(p[i + 2]), p[i].max(p[i + 2]));
            matched |= (lo..=hi).contains(&c);
            i += 3;
        } else {
            matched |= p[i] == c;
            i += 1;
        }
    }
    if i >= p.len() {
        return None;
    }
    Some((matched != negate, i + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::write_command;

    fn run_line(db: &Db, s: &mut Session, line: &str) -> String {
        let words: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        run_words(db, s, &words)
    }

    fn run_words(db: &Db, s: &mut Session, words: &[&[u8]]) -> String {
        let mut req = Vec::new();
        write_command(words, &mut req);
        let mut out = Vec::new();
        execute(&req, db, s, &mut out, &mut || {}).expect("valid");
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Every command of the table, called from a script with each of a
    /// set of argument shapes and keys of every type present, declaring
    /// no key or one: each call is answered (a reply or an error), none
    /// panics and none touches a key the script's locks do not hold (which
    /// would panic: a shard not held is a bug, not an answer), so a
    /// script cannot take a worker down. Also alone and inside MULTI/EXEC.
    #[test]
    fn every_command_called_from_a_script_or_exec_with_any_keys_is_answered() {
        let db = Db::default();
        let mut s = Session::default();
        for line in [
            "RPUSH l1 a b c",
            "SADD s1 a b",
            "SADD s2 b c",
            "ZADD z1 1 a 2 b",
            "ZADD z2 3 c",
            "HSET h1 f v",
            "SET k1 10",
            "SET w_a 3",
            "XADD x1 * f v",
            "SETBIT b1 3 1",
        ] {
            run_line(&db, &mut s, line);
        }
        let shapes: &[&[&str]] = &[
            &[],
            &["k1"],
            &["l1", "0", "-1"],
            &["1", "z1"],
            &["2", "z1", "z2"],
            &["d", "2", "z1", "z2"],
            &["1", "l1", "LEFT"],
            &["0", "2", "z1", "z2", "MIN"],
            &["z1", "z2", "z1"],
            &["s1", "s2"],
            &["d", "s1", "s2"],
            &["STREAMS", "x1", "0"],
            &["COUNT", "1", "STREAMS", "x1", "x2", "0", "0"],
            &["l1", "BY", "w_*", "GET", "#", "GET", "h*->f"],
            &["l1", "STORE", "dst"],
            &["and", "d", "b1", "k1"],
            &["h1", "f", "1"],
            &["k1", "5"],
            &["usage", "l1"],
            &["encoding", "k1"],
        ];
        let body = b"return redis.pcall(unpack(ARGV))";
        let mut answered = 0;
        for spec in COMMANDS {
            // Every name fits the buffer a name is lowercased into.
            assert!(spec.name.len() <= NAME_MAX, "{}", spec.name);
            for shape in shapes {
                for declared in [&[][..], &[&b"l1"[..]][..]] {
                    let mut words: Vec<&[u8]> = vec![b"EVAL", body];
                    let n = declared.len().to_string();
                    words.push(n.as_bytes());
                    words.extend_from_slice(declared);
                    words.push(spec.name.as_bytes());
                    words.extend(shape.iter().map(|w| w.as_bytes()));
                    let reply = run_words(&db, &mut Session::default(), &words);
                    assert!(!reply.is_empty(), "{} {shape:?}", spec.name);
                    answered += 1;
                }
                // Alone, and inside MULTI/EXEC (every shard held): answered
                // too.
                let mut words: Vec<&[u8]> = vec![spec.name.as_bytes()];
                words.extend(shape.iter().map(|w| w.as_bytes()));
                let reply = run_words(&db, &mut Session::default(), &words);
                assert!(!reply.is_empty(), "{} {shape:?}", spec.name);
                let mut t = Session::default();
                run_line(&db, &mut t, "MULTI");
                let mut words: Vec<&[u8]> = vec![spec.name.as_bytes()];
                words.extend(shape.iter().map(|w| w.as_bytes()));
                run_words(&db, &mut t, &words);
                let reply = run_words(&db, &mut t, &[b"EXEC"]);
                assert!(!reply.is_empty(), "EXEC {} {shape:?}", spec.name);
            }
        }
        assert!(answered >= COMMANDS.len() * shapes.len() * 2);
    }

    /// Waits until a script has run past the busy threshold (an event, not
    /// a time: the script runs until it is stopped).
    fn until_busy(db: &Db) {
        while !db.scripts().any_busy() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    const BUSY_REPLY: &str = "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";

    #[test]
    fn a_busy_script_makes_its_keys_answer_busy_until_script_kill_stops_it() {
        let db = Db::default();
        let mut s = Session::default();
        assert_eq!(
            run_line(&db, &mut s, "CONFIG SET busy-reply-threshold 20"),
            "+OK\r\n"
        );
        // A key in another shard than the script's.
        let other = (0..)
            .map(|i| format!("other{i}"))
            .find(|k| db.shard_of(k.as_bytes()) != db.shard_of(b"k"))
            .expect("some key elsewhere");
        // A list elsewhere whose element names the script's key: SORT's
        // GET pattern reads it.
        let list = (0..)
            .map(|i| format!("list{i}"))
            .find(|k| db.shard_of(k.as_bytes()) != db.shard_of(b"k"))
            .expect("some key elsewhere");
        assert_eq!(run_line(&db, &mut s, &format!("RPUSH {list} k")), ":1\r\n");
        // Endless loops, the second one catching errors as it goes: both
        // stop only when killed.
        for body in [
            "while true do end",
            "while true do pcall(function() while true do end end) end",
        ] {
            std::thread::scope(|scope| {
                let script = scope.spawn(|| {
                    let mut s = Session::default();
                    run_words(&db, &mut s, &[b"EVAL", body.as_bytes(), b"1", b"k"])
                });
                until_busy(&db);
                // A failed assertion below kills the script, so that the
                // scope's join ends and the test fails instead of hanging.
                struct KillOnPanic<'a>(&'a Db);
                impl Drop for KillOnPanic<'_> {
                    fn drop(&mut self) {
                        if std::thread::panicking() {
                            run_line(self.0, &mut Session::default(), "SCRIPT KILL");
                        }
                    }
                }
                let _kill = KillOnPanic(&db);
                assert_eq!(run_line(&db, &mut s, "GET k"), BUSY_REPLY);
                assert_eq!(run_line(&db, &mut s, "FLUSHALL"), BUSY_REPLY);
                // A transaction (it takes every shard) is discarded, in
                // Redis's words.
                let mut t = Session::default();
                assert_eq!(run_line(&db, &mut t, "MULTI"), "+OK\r\n");
                assert_eq!(run_line(&db, &mut t, "SET k v"), "+QUEUED\r\n");
                assert_eq!(
                    run_line(&db, &mut t, "EXEC"),
                    format!(
                        "-EXECABORT Transaction discarded because of: {}",
                        &BUSY_REPLY[1..]
                    )
                );
                assert_eq!(run_line(&db, &mut t, "EXEC"), "-ERR EXEC without MULTI\r\n");
                assert_eq!(run_line(&db, &mut s, &format!("SET {other} v")), "+OK\r\n");
                // A pattern key on the busy shard is BUSY, not a missing key.
                assert_eq!(
                    run_line(&db, &mut s, &format!("SORT {list} BY nosort GET *")),
                    BUSY_REPLY
                );
                assert_eq!(run_line(&db, &mut s, "SCRIPT KILL"), "+OK\r\n");
                let reply = script.join().expect("the script's thread");
                let sha = sha1_smol::Sha1::from(body).digest().to_string();
                assert_eq!(
                    reply,
                    format!(
                        "-ERR Script killed by user with SCRIPT KILL... script: {sha}, on @user_script:1.\r\n"
                    )
                );
            });
            assert_eq!(run_line(&db, &mut s, "GET k"), "$-1\r\n");
            assert_eq!(
                run_line(&db, &mut s, "SCRIPT KILL"),
                "-NOTBUSY No scripts in execution right now.\r\n"
            );
        }
        // The worker's Lua state runs the next script as before.
        assert_eq!(
            run_words(&db, &mut s, &[b"EVAL", b"return 7", b"0"]),
            ":7\r\n"
        );
    }

    #[test]
    fn the_command_table_flags_writes_and_the_keys_they_change_in_place() {
        let flags = |name: &str| spec(name.as_bytes()).map(|c| (c.write, c.in_place));
        for (name, want) in [
            ("get", (false, 0)),
            ("lrange", (false, 0)),
            ("set", (true, 1)),
            ("lpush", (true, 1)),
            ("zadd", (true, 1)),
            ("smove", (true, 2)),
            ("lmove", (true, 2)),
            ("sunionstore", (true, 0)),
            ("zrangestore", (true, 0)),
            ("del", (true, 0)),
            ("rename", (true, 0)),
            ("publish", (false, 0)),
        ] {
            assert_eq!(flags(name), Some(want), "{name}");
        }
    }

    #[test]
    fn a_write_to_a_value_a_reader_holds_copies_it_outside_the_lock() {
        let db = Db::default();
        let mut s = Session::default();
        assert_eq!(run_line(&db, &mut s, "RPUSH l a b c"), ":3\r\n");
        // A big command's view of the list, walked without the lock.
        let view = snapshot(&db, &mut None, b"l")
            .ok()
            .flatten()
            .expect("a list");
        // A read leaves it shared; a write copies it outside the lock.
        assert_eq!(run_line(&db, &mut s, "LLEN l"), ":3\r\n");
        assert_eq!(db.unshared_outside_locks(), 0);
        assert_eq!(run_line(&db, &mut s, "RPUSH l d"), ":4\r\n");
        assert_eq!(db.unshared_outside_locks(), 1);
        // The reader still sees what it took; the store has the write.
        assert_eq!(view.elements(), 3);
        assert_eq!(
            run_line(&db, &mut s, "LRANGE l 0 -1"),
            "*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"
        );
        // Nobody else holds it now: the next write copies nothing.
        drop(view);
        assert_eq!(run_line(&db, &mut s, "LPOP l"), "$1\r\na\r\n");
        assert_eq!(db.unshared_outside_locks(), 1);
        // The same for every collection, and for a command of two keys.
        for (setup, write) in [
            ("SADD s x", "SADD s y"),
            ("HSET h f v", "HDEL h f"),
            ("ZADD z 1 m", "ZINCRBY z 2 m"),
        ] {
            run_line(&db, &mut s, setup);
            let key = &setup[5..6];
            let view = snapshot(&db, &mut None, key.as_bytes()).ok().flatten();
            let before = db.unshared_outside_locks();
            run_line(&db, &mut s, write);
            assert_eq!(db.unshared_outside_locks(), before + 1, "{write}");
            drop(view);
        }
        let view = snapshot(&db, &mut None, b"s").ok().flatten();
        let before = db.unshared_outside_locks();
        assert_eq!(run_line(&db, &mut s, "SMOVE s s2 x"), ":1\r\n");
        assert_eq!(db.unshared_outside_locks(), before + 1);
        drop(view);
    }

    #[test]
    fn script_kill_spares_a_script_that_has_written() {
        let db = Db::default();
        let mut s = Session::default();
        assert_eq!(
            run_line(&db, &mut s, "CONFIG SET lua-time-limit 20"),
            "+OK\r\n"
        );
        // Writes, then loops until the server itself stops it (what
        // SHUTDOWN NOSAVE does): no timing decides what SCRIPT KILL meets.
        let body = "redis.call('set', KEYS[1], 'x') while true do end";
        std::thread::scope(|scope| {
            let script = scope.spawn(|| {
                let mut s = Session::default();
                run_words(&db, &mut s, &[b"EVAL", body.as_bytes(), b"1", b"w"])
            });
            until_busy(&db);
            assert_eq!(
                run_line(&db, &mut s, "SCRIPT KILL"),
                "-UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.\r\n"
            );
            // Still running, and still refusing its key.
            assert!(db.scripts().any_busy());
            assert!(run_line(&db, &mut s, "GET w").starts_with("-BUSY"));
            db.scripts().stop_all();
            let reply = script.join().expect("the script's thread");
            assert!(reply.starts_with("-ERR Script killed"), "{reply}");
        });
        assert_eq!(run_line(&db, &mut s, "GET w"), "$1\r\nx\r\n");
    }

    #[test]
    fn the_busy_threshold_is_read_and_set_under_both_of_redis_names_within_its_range() {
        let db = Db::default();
        let mut s = Session::default();
        for name in ["busy-reply-threshold", "lua-time-limit"] {
            assert_eq!(
                run_line(&db, &mut s, &format!("CONFIG GET {name}")),
                format!("*2\r\n${}\r\n{name}\r\n$4\r\n5000\r\n", name.len())
            );
        }
        assert_eq!(
            run_line(&db, &mut s, "CONFIG SET busy-reply-threshold -1"),
            "-ERR CONFIG SET failed (possibly related to argument 'busy-reply-threshold') - argument must be between 0 and 86400000 inclusive\r\n"
        );
        assert_eq!(
            run_line(&db, &mut s, "CONFIG SET lua-time-limit abc"),
            "-ERR CONFIG SET failed (possibly related to argument 'lua-time-limit') - argument couldn't be parsed into an integer\r\n"
        );
        assert!(
            run_line(&db, &mut s, "CONFIG SET lua-time-limit 86400001")
                .starts_with("-ERR CONFIG SET failed")
        );
        assert_eq!(
            run_line(&db, &mut s, "CONFIG SET lua-time-limit 100"),
            "+OK\r\n"
        );
        assert_eq!(
            run_line(&db, &mut s, "CONFIG GET busy-reply-threshold"),
            "*2\r\n$20\r\nbusy-reply-threshold\r\n$3\r\n100\r\n"
        );
    }

    #[test]
    fn the_latency_monitor_records_commands_past_its_threshold() {
        let db = Db::default();
        let mut s = Session::default();
        // A script of a few million steps: milliseconds on any machine.
        let run_slow = |s: &mut Session| {
            let words: [&[u8]; 3] = [
                b"EVAL",
                b"local t = 0 for i = 1, 5000000 do t = t + i end return t",
                b"0",
            ];
            let mut req = Vec::new();
            write_command(&words, &mut req);
            let mut out = Vec::new();
            execute(&req, &db, s, &mut out, &mut || {}).expect("valid");
            assert!(out.starts_with(b":"), "{}", String::from_utf8_lossy(&out));
        };
        assert_eq!(
            run_line(&db, &mut s, "CONFIG GET latency-monitor-threshold"),
            "*2\r\n$25\r\nlatency-monitor-threshold\r\n$1\r\n0\r\n"
        );
        // Off by default: nothing recorded.
        run_slow(&mut s);
        assert_eq!(run_line(&db, &mut s, "LATENCY LATEST"), "*0\r\n");
        assert!(
            run_line(&db, &mut s, "CONFIG SET latency-monitor-threshold -1")
                .starts_with("-ERR CONFIG SET failed")
        );
        assert_eq!(
            run_line(&db, &mut s, "CONFIG SET latency-monitor-threshold 1"),
            "+OK\r\n"
        );
        run_slow(&mut s);
        let latest = run_line(&db, &mut s, "LATENCY LATEST");
        assert!(
            latest.starts_with("*1\r\n*4\r\n$7\r\ncommand\r\n:"),
            "{latest}"
        );
        let history = run_line(&db, &mut s, "LATENCY HISTORY command");
        assert!(history.starts_with("*1\r\n*2\r\n:"), "{history}");
        assert_eq!(run_line(&db, &mut s, "LATENCY RESET"), ":1\r\n");
        assert_eq!(run_line(&db, &mut s, "LATENCY LATEST"), "*0\r\n");
        assert!(run_line(&db, &mut s, "LATENCY DOCTOR").starts_with("-ERR unknown subcommand"));
    }

    #[test]
    fn latencystats_give_each_commands_percentiles_in_redis_form() {
        let db = Db::default();
        let mut s = Session::default();
        for _ in 0..10 {
            run_line(&db, &mut s, "SET k v");
        }
        let stats = run_line(&db, &mut s, "INFO latencystats");
        assert!(stats.contains("# Latencystats\r\n"), "{stats}");
        let line = stats
            .lines()
            .find(|l| l.starts_with("latency_percentiles_usec_set:"))
            .expect("SET ran");
        let fields: Vec<&str> = line.split(':').nth(1).unwrap().split(',').collect();
        assert_eq!(fields.len(), 3, "{line}");
        for (f, name) in fields.iter().zip(["p50=", "p99=", "p99.9="]) {
            assert!(f.starts_with(name) && f.ends_with(".000"), "{line}");
        }
        assert!(!stats.contains("usec_get:"), "GET never ran: {stats}");
    }

    #[test]
    fn a_big_value_deleted_is_gone_and_its_bytes_given_back() {
        let db = Db::default();
        let mut s = Session::default();
        let items: Vec<String> = (0..200).map(|i| format!("e{i}")).collect();
        run_line(&db, &mut s, &format!("RPUSH l {}", items.join(" ")));
        run_line(&db, &mut s, "SET small v");
        assert!(db.used() > 0);
        // One freed after the lock (200 elements), one under it.
        assert_eq!(run_line(&db, &mut s, "DEL l small missing"), ":2\r\n");
        assert_eq!(run_line(&db, &mut s, "EXISTS l small"), ":0\r\n");
        let stats = db.stats();
        assert_eq!((stats.keys, stats.used), (0, 0));
    }

    #[test]
    fn a_snapshot_is_one_consistent_view_and_a_writer_copies_before_it_changes() {
        let db = Db::default();
        let mut s = Session::default();
        run_line(&db, &mut s, "HSET h a 1 b 2");
        let Ok(Some(before)) = snapshot(&db, &mut None, b"h") else {
            panic!("h exists")
        };
        // The shard is free again: a writer goes on, and changes its own copy.
        assert_eq!(run_line(&db, &mut s, "HSET h c 3"), ":1\r\n");
        assert_eq!(run_line(&db, &mut s, "HDEL h a"), ":1\r\n");
        let crate::db::Value::Hash(h) = &before else {
            panic!("a hash")
        };
        let mut fields: Vec<_> = h.map().keys().map(|k| k.to_vec()).collect();
        fields.sort();
        assert_eq!(
            fields,
            [b"a".to_vec(), b"b".to_vec()],
            "the view taken before"
        );
        assert_eq!(run_line(&db, &mut s, "HLEN h"), ":2\r\n");
        assert_eq!(run_line(&db, &mut s, "HEXISTS h c"), ":1\r\n");
    }

    #[test]
    fn strings_counters_and_expiry() {
        let db = Db::default();
        let mut s = Session::default();
        assert_eq!(run_line(&db, &mut s, "SET k v"), "+OK\r\n");
        assert_eq!(run_line(&db, &mut s, "GET k"), "$1\r\nv\r\n");
        assert_eq!(run_line(&db, &mut s, "INCR n"), ":1\r\n");
        assert_eq!(run_line(&db, &mut s, "INCRBY n 41"), ":42\r\n");
        assert_eq!(run_line(&db, &mut s, "DECRBY n 2"), ":40\r\n");
        assert_eq!(run_line(&db, &mut s, "INCRBYFLOAT n 0.5"), "$4\r\n40.5\r\n");
        assert_eq!(
            run_line(&db, &mut s, "INCR k"),
            "-ERR value is not an integer or out of range\r\n"
        );
        assert_eq!(run_line(&db, &mut s, "APPEND k w"), ":2\r\n");
        assert_eq!(run_line(&db, &mut s, "STRLEN k"), ":2\r\n");
        assert_eq!(run_line(&db, &mut s, "SET e x EX 100"), "+OK\r\n");
        assert_eq!(run_line(&db, &mut s, "TTL e"), ":100\r\n");
        assert_eq!(run_line(&db, &mut s, "PERSIST e"), ":1\r\n");
        assert_eq!(run_line(&db, &mut s, "TTL e"), ":-1\r\n");
        assert_eq!(run_line(&db, &mut s, "TTL nope"), ":-2\r\n");
        assert_eq!(run_line(&db, &mut s, "PEXPIRE e 0"), ":1\r\n");
        assert_eq!(run_line(&db, &mut s, "EXISTS e"), ":0\r\n");
        assert_eq!(run_line(&db, &mut s, "SET k v NX"), "$-1\r\n");
        assert_eq!(run_line(&db, &mut s, "SET k v2 XX GET"), "$2\r\nvw\r\n");
        assert_eq!(run_line(&db, &mut s, "GETDEL k"), "$2\r\nv2\r\n");
        assert_eq!(run_line(&db, &mut s, "MSETNX a 1 b 2"), ":1\r\n");
        assert_eq!(run_line(&db, &mut s, "MSETNX a 1 c 2"), ":0\r\n");
        assert_eq!(
            run_line(&db, &mut s, "MGET a b c"),
            "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n"
        );
        assert_eq!(
            run_line(&db, &mut s, "SET k v EX 0"),
            "-ERR invalid expire time in 'set' command\r\n"
        );
        // Times past a signed 64-bit count of ms are refused, as Redis 7
        // refuses them, and nothing is written.
        for (cmd, name) in [
            ("SETEX s1 9999999999999999 x", "setex"),
            ("PSETEX s1 9223372036854775807 x", "psetex"),
            ("SET s1 x EX 9999999999999999", "set"),
            ("SET s1 x PX 9223372036854775807", "set"),
            ("EXPIRE k 9999999999999999", "expire"),
            ("PEXPIRE k 9223372036854775807", "pexpire"),
            ("EXPIREAT k 9999999999999999", "expireat"),
        ] {
            assert_eq!(
                run_line(&db, &mut s, cmd),
                format!("-ERR invalid expire time in '{name}' command\r\n"),
                "{cmd}"
            );
        }
        assert_eq!(run_line(&db, &mut s, "EXISTS s1"), ":0\r\n");
        // The largest that fit are taken.
        assert_eq!(
            run_line(&db, &mut s, "SET big x EX 9000000000000"),
            "+OK\r\n"
        );
        assert_eq!(
            run_line(&db, &mut s, "PEXPIREAT big 9223372036854775807"),
            ":1\r\n"
        );
    }

    #[test]
    fn aggregates_and_wrong_types() {
        let db = Db::default();
        let mut s = Session::default();
        assert_eq!(run_line(&db, &mut s, "RPUSH l a b c"), ":3\r\n");
        assert_eq!(run_line(&db, &mut s, "LPUSH l z"), ":4\r\n");
        assert_eq!(
            run_line(&db, &mut s, "LRANGE l 0 -1"),
            "*4\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"
        );
        assert_eq!(run_line(&db, &mut s, "LINDEX l -1"), "$1\r\nc\r\n");
        assert_eq!(
            run_line(&db, &mut s, "RPOP l 2"),
            "*2\r\n$1\r\nc\r\n$1\r\nb\r\n"
        );
        assert_eq!(
            run_line(&db, &mut s, "GET l"),
            format!("-{}\r\n", String::from_utf8_lossy(WRONGTYPE))
        );
        assert_eq!(run_line(&db, &mut s, "HSET h f 1 g 2"), ":2\r\n");
        assert_eq!(run_line(&db, &mut s, "HINCRBY h f 9"), ":10\r\n");
        assert_eq!(
            run_line(&db, &mut s, "HMGET h f x"),
            "*2\r\n$2\r\n10\r\n$-1\r\n"
        );
        assert_eq!(run_line(&db, &mut s, "HDEL h f g"), ":2\r\n");
        assert_eq!(run_line(&db, &mut s, "EXISTS h"), ":0\r\n");
        assert_eq!(run_line(&db, &mut s, "SADD s a b a"), ":2\r\n");
        assert_eq!(run_line(&db, &mut s, "SISMEMBER s b"), ":1\r\n");
        assert_eq!(run_line(&db, &mut s, "SCARD s"), ":2\r\n");
        assert_eq!(run_line(&db, &mut s, "ZADD z 2 b 1 a"), ":2\r\n");
        assert_eq!(run_line(&db, &mut s, "ZINCRBY z 5 a"), "$1\r\n6\r\n");
        assert_eq!(
            run_line(&db, &mut s, "ZRANGE z 0 -1 WITHSCORES"),
            "*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\n6\r\n"
        );
        assert_eq!(
            run_line(&db, &mut s, "ZRANGEBYSCORE z (2 +inf"),
            "*1\r\n$1\r\na\r\n"
        );
        assert_eq!(
            run_line(&db, &mut s, "ZPOPMIN z"),
            "*2\r\n$1\r\nb\r\n$1\r\n2\r\n"
        );
        assert_eq!(run_line(&db, &mut s, "TYPE z"), "+zset\r\n");
        assert_eq!(
            run_line(&db, &mut s, "NOSUCH a b"),
            "-ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' \r\n"
        );
        assert_eq!(
            run_line(&db, &mut s, "GET"),
            "-ERR wrong number of arguments for 'get' command\r\n"
        );
    }

    #[test]
    fn hello_3_switches_replies_to_resp3() {
        let db = Db::default();
        let mut s = Session::default();
        let r = run_line(&db, &mut s, "HELLO 3");
        assert!(r.starts_with("%7\r\n$6\r\nserver\r\n"), "{r}");
        assert_eq!(run_line(&db, &mut s, "GET nope"), "_\r\n");
        run_line(&db, &mut s, "HSET h f v");
        assert_eq!(
            run_line(&db, &mut s, "HGETALL h"),
            "%1\r\n$1\r\nf\r\n$1\r\nv\r\n"
        );
        assert_eq!(
            run_line(&db, &mut s, "CLIENT SETINFO lib-name redis-py"),
            "+OK\r\n"
        );
        assert!(run_line(&db, &mut s, "AUTH x").starts_with("-ERR AUTH"));
    }

    #[test]
    fn multi_exec_runs_a_block_and_watch_aborts_it() {
        let db = Db::default();
        let mut s = Session {
            id: 1 << 32,
            ..Session::default()
        };
        let mut other = Session::default();
        assert_eq!(run_line(&db, &mut s, "MULTI"), "+OK\r\n");
        assert_eq!(run_line(&db, &mut s, "INCR c"), "+QUEUED\r\n");
        assert_eq!(run_line(&db, &mut s, "INCR c"), "+QUEUED\r\n");
        assert_eq!(run_line(&db, &mut s, "EXEC"), "*2\r\n:1\r\n:2\r\n");
        assert_eq!(run_line(&db, &mut s, "WATCH c"), "+OK\r\n");
        assert_eq!(run_line(&db, &mut other, "INCR c"), ":3\r\n");
        run_line(&db, &mut s, "MULTI");
        run_line(&db, &mut s, "INCR c");
        assert_eq!(run_line(&db, &mut s, "EXEC"), "*-1\r\n");
        assert_eq!(run_line(&db, &mut s, "GET c"), "$1\r\n3\r\n");
        run_line(&db, &mut s, "MULTI");
        assert!(run_line(&db, &mut s, "BOGUS").starts_with("-ERR unknown command"));
        assert!(run_line(&db, &mut s, "EXEC").starts_with("-EXECABORT"));
        assert_eq!(run_line(&db, &mut s, "EXEC"), "-ERR EXEC without MULTI\r\n");
        // A command with the wrong number of words is refused when queued,
        // and EXEC then runs nothing (redis-server 7.0's replies).
        run_line(&db, &mut s, "MULTI");
        assert_eq!(run_line(&db, &mut s, "SET c 100"), "+QUEUED\r\n");
        assert_eq!(
            run_line(&db, &mut s, "LRANGE l1 10 1 extra"),
            "-ERR wrong number of arguments for 'lrange' command\r\n"
        );
        assert_eq!(
            run_line(&db, &mut s, "GET"),
            "-ERR wrong number of arguments for 'get' command\r\n"
        );
        assert_eq!(
            run_line(&db, &mut s, "EXEC"),
            "-EXECABORT Transaction discarded because of previous errors.\r\n"
        );
        assert_eq!(run_line(&db, &mut s, "GET c"), "$1\r\n3\r\n");
        // At least as many words as a variadic command needs: queued.
        run_line(&db, &mut s, "MULTI");
        assert_eq!(run_line(&db, &mut s, "DEL a b c"), "+QUEUED\r\n");
        assert_eq!(
            run_line(&db, &mut s, "SET a"),
            "-ERR wrong number of arguments for 'set' command\r\n"
        );
        run_line(&db, &mut s, "DISCARD");
    }

    #[test]
    fn arguments_are_checked_where_redis_checks_them() {
        // redis-server 7.0.15's replies: a range's bounds are read before
        // the key is looked up; LINDEX's index after.
        let db = Db::default();
        let mut s = Session::default();
        let int = "-ERR value is not an integer or out of range\r\n";
        let float = "-ERR min or max is not a float\r\n";
        let limit = "-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX\r\n";
        assert_eq!(run_line(&db, &mut s, "ZRANGE missing abc 2"), int);
        assert_eq!(run_line(&db, &mut s, "ZRANGEBYSCORE missing abc 1"), float);
        assert_eq!(run_line(&db, &mut s, "RPUSH l a b"), ":2\r\n");
        assert_eq!(run_line(&db, &mut s, "ZRANGEBYSCORE l abc abc"), float);
        assert_eq!(run_line(&db, &mut s, "LINDEX missing abc"), "$-1\r\n");
        assert_eq!(run_line(&db, &mut s, "LINDEX l abc"), int);
        assert_eq!(run_line(&db, &mut s, "ZADD z 1 a 2 b 3 c"), ":3\r\n");
        assert_eq!(
            run_line(&db, &mut s, "ZRANGE missing 0 -1 LIMIT 1 1"),
            limit
        );
        assert_eq!(run_line(&db, &mut s, "ZRANGE z abc 1 LIMIT 1 1"), limit);
        // A rank range ignores LIMIT's offset when its count is -1.
        assert_eq!(
            run_line(&db, &mut s, "ZRANGE z -10 -3 LIMIT 1 -1"),
            "*1\r\n$1\r\na\r\n"
        );
        assert_eq!(run_line(&db, &mut s, "ZRANGE z 0 1 BYSCORE LIMIT x 1"), int);
    }

    #[test]
    fn hkeys_hvals_and_hsetnx_answer_as_redis() {
        let db = Db::default();
        let mut s = Session::default();
        assert_eq!(run_line(&db, &mut s, "HKEYS h"), "*0\r\n");
        assert_eq!(run_line(&db, &mut s, "HSETNX h f 1"), ":1\r\n");
        assert_eq!(run_line(&db, &mut s, "HSETNX h f 2"), ":0\r\n");
        assert_eq!(run_line(&db, &mut s, "HKEYS h"), "*1\r\n$1\r\nf\r\n");
        assert_eq!(run_line(&db, &mut s, "HVALS h"), "*1\r\n$1\r\n1\r\n");
        assert_eq!(run_line(&db, &mut s, "SET k v"), "+OK\r\n");
        for cmd in ["HKEYS k", "HVALS k", "HSETNX k f 1"] {
            assert!(
                run_line(&db, &mut s, cmd).starts_with("-WRONGTYPE"),
                "{cmd}"
            );
        }
        assert_eq!(
            run_line(&db, &mut s, "HSETNX h f"),
            "-ERR wrong number of arguments for 'hsetnx' command\r\n"
        );
    }

    #[test]
    fn random_picks_are_distinct_up_to_the_size_and_repeat_when_negative() {
        let db = Db::default();
        let mut s = Session::default();
        run_line(&db, &mut s, "HSET h a 1 b 2 c 3");
        run_line(&db, &mut s, "ZADD z 1 a 2 b 3 c");
        for _ in 0..50 {
            // Two distinct fields of the three.
            let r = run_line(&db, &mut s, "HRANDFIELD h 2");
            let picks: Vec<&str> = r.lines().skip(2).step_by(2).collect();
            assert!(r.starts_with("*2\r\n"), "{r}");
            assert!(
                picks[0] != picks[1] && picks.iter().all(|p| ["a", "b", "c"].contains(&p.trim())),
                "{r}"
            );
            // Five picks with repetitions, each a member with its score.
            let r = run_line(&db, &mut s, "ZRANDMEMBER z -5 WITHSCORES");
            let lines: Vec<&str> = r.lines().collect();
            assert_eq!(lines[0], "*10", "{r}");
            for pair in lines[1..].chunks(4) {
                let (m, sc) = (pair[1], pair[3]);
                assert_eq!(
                    (m, sc),
                    [("a", "1"), ("b", "2"), ("c", "3")][(m.as_bytes()[0] - b'a') as usize]
                );
            }
        }
        // RANDOMKEY: one of the keys, and not always the same.
        let seen: std::collections::HashSet<String> = (0..200)
            .map(|_| run_line(&db, &mut s, "RANDOMKEY"))
            .collect();
        assert!(seen.len() >= 2, "{seen:?}");
        assert!(
            seen.iter()
                .all(|k| k == "$1\r\nh\r\n" || k == "$1\r\nz\r\n"),
            "{seen:?}"
        );
        // All three, each once, past the size.
        let r = run_line(&db, &mut s, "HRANDFIELD h 10");
        let mut all: Vec<&str> = r.lines().skip(2).step_by(2).collect();
        all.sort_unstable();
        assert_eq!(all, ["a", "b", "c"], "{r}");
    }

    #[test]
    fn getrange_touch_smismember_and_sorted_set_ranks_answer_as_redis() {
        // redis-server 7.0.15's replies.
        let db = Db::default();
        let mut s = Session::default();
        let r = |s: &mut Session, c: &str| run_line(&db, s, c);
        assert_eq!(r(&mut s, "SET k Hello"), "+OK\r\n");
        for (c, want) in [
            ("GETRANGE k 0 3", "$4\r\nHell\r\n"),
            ("GETRANGE k -3 -1", "$3\r\nllo\r\n"),
            ("GETRANGE k 0 -1", "$5\r\nHello\r\n"),
            ("GETRANGE k 10 100", "$0\r\n\r\n"),
            ("GETRANGE k -1 -5", "$0\r\n\r\n"),
            ("GETRANGE missing 0 1", "$0\r\n\r\n"),
            (
                "GETRANGE missing a 1",
                "-ERR value is not an integer or out of range\r\n",
            ),
            ("TOUCH k k missing", ":2\r\n"),
        ] {
            assert_eq!(r(&mut s, c), want, "{c}");
        }
        assert_eq!(r(&mut s, "SADD s a b"), ":2\r\n");
        assert_eq!(r(&mut s, "SMISMEMBER s a x b"), "*3\r\n:1\r\n:0\r\n:1\r\n");
        assert_eq!(r(&mut s, "SMISMEMBER missing a"), "*1\r\n:0\r\n");
        assert_eq!(r(&mut s, "ZADD z 1 a 2 b 3 c"), ":3\r\n");
        for (c, want) in [
            ("ZRANK z a", ":0\r\n"),
            ("ZRANK z c", ":2\r\n"),
            ("ZREVRANK z a", ":2\r\n"),
            ("ZRANK z x", "$-1\r\n"),
            ("ZRANK missing a", "$-1\r\n"),
            ("ZCOUNT z 2 +inf", ":2\r\n"),
            ("ZCOUNT z (1 (3", ":1\r\n"),
            ("ZCOUNT missing x 1", "-ERR min or max is not a float\r\n"),
            ("ZPOPMAX z", "*2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
            (
                "ZPOPMAX z 5",
                "*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\n1\r\n",
            ),
            ("ZPOPMAX z", "*0\r\n"),
        ] {
            assert_eq!(r(&mut s, c), want, "{c}");
        }
        for c in [
            "GETRANGE s 0 1",
            "SMISMEMBER k a",
            "ZRANK k a",
            "ZCOUNT k 0 1",
            "ZPOPMAX k",
        ] {
            assert!(r(&mut s, c).starts_with("-WRONGTYPE"), "{c}");
        }
    }

    #[test]
    fn lset_ltrim_rename_and_time_answer_as_redis() {
        // redis-server 7.0.15's replies.
        let db = Db::default();
        let mut s = Session::default();
        let r = |s: &mut Session, c: &str| run_line(&db, s, c);
        for (c, want) in [
            ("RPUSH l a b c d e", ":5\r\n"),
            ("LSET l -1 E", "+OK\r\n"),
            ("LSET l 10 x", "-ERR index out of range\r\n"),
            ("LSET missing 0 x", "-ERR no such key\r\n"),
            ("LTRIM l 1 -2", "+OK\r\n"),
            ("LRANGE l 0 -1", "*3\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"),
            ("LTRIM l 5 10", "+OK\r\n"),
            ("EXISTS l", ":0\r\n"),
            ("SETEX t 100 v", "+OK\r\n"),
            ("RENAME t t2", "+OK\r\n"),
            ("TTL t2", ":100\r\n"),
            ("RENAME t t3", "-ERR no such key\r\n"),
            ("RENAMENX t2 t2", ":0\r\n"),
            ("SET k v", "+OK\r\n"),
            ("RENAMENX t2 k", ":0\r\n"),
            ("RENAMENX t2 k2", ":1\r\n"),
            ("GET k2", "$1\r\nv\r\n"),
        ] {
            assert_eq!(r(&mut s, c), want, "{c}");
        }
        let time = r(&mut s, "TIME");
        assert!(time.starts_with("*2\r\n$10\r\n"), "{time}");
    }

    #[test]
    fn lrem_lmove_set_algebra_and_zrevrange_answer_as_redis() {
        // redis-server 7.0.15's replies (set members sorted: no order is
        // promised).
        let db = Db::default();
        let mut s = Session::default();
        let r = |s: &mut Session, c: &str| run_line(&db, s, c);
        let list = |items: &[&str]| {
            let mut out = format!("*{}\r\n", items.len());
            for i in items {
                out.push_str(&format!("${}\r\n{i}\r\n", i.len()));
            }
            out
        };
        for (c, want) in [
            ("RPUSH l a b a c a", ":5\r\n".to_string()),
            ("LREM l -2 a", ":2\r\n".into()),
            ("LRANGE l 0 -1", list(&["a", "b", "c"])),
            ("LREM l 0 a", ":1\r\n".into()),
            ("RPUSH q 1 2 3", ":3\r\n".into()),
            ("RPOPLPUSH q r", "$1\r\n3\r\n".into()),
            ("LMOVE q r LEFT RIGHT", "$1\r\n1\r\n".into()),
            ("LRANGE r 0 -1", list(&["3", "1"])),
            ("LMOVE q r UP LEFT", "-ERR syntax error\r\n".into()),
            ("LMOVE missing r LEFT LEFT", "$-1\r\n".into()),
            ("SADD s1 a b c", ":3\r\n".into()),
            ("SADD s2 b c d", ":3\r\n".into()),
            ("SDIFF s1 s2", "*1\r\n$1\r\na\r\n".into()),
            ("SINTER s1 missing", "*0\r\n".into()),
            ("ZADD z 1 a 2 b 3 c", ":3\r\n".into()),
            ("ZREVRANGE z 0 -1", list(&["c", "b", "a"])),
        ] {
            assert_eq!(r(&mut s, c), want, "{c}");
        }
        let mut members: Vec<String> = r(&mut s, "SUNION s1 s2 missing")
            .split("\r\n")
            .filter(|l| !l.starts_with(['*', '$']) && !l.is_empty())
            .map(String::from)
            .collect();
        members.sort();
        assert_eq!(members, ["a", "b", "c", "d"]);
        assert_eq!(r(&mut s, "SET str v"), "+OK\r\n");
        for c in ["LMOVE q str LEFT LEFT", "SINTER str s1", "LREM str 1 a"] {
            assert!(r(&mut s, c).starts_with("-WRONGTYPE"), "{c}");
        }
    }

    #[test]
    fn getex_setrange_and_smove_answer_as_redis() {
        // redis-server 7.0.15's replies.
        let db = Db::default();
        let mut s = Session::default();
        let r = |s: &mut Session, c: &str| run_line(&db, s, c);
        for (c, want) in [
            ("SET k Hello", "+OK\r\n"),
            ("GETEX k EX 100", "$5\r\nHello\r\n"),
            ("TTL k", ":100\r\n"),
            ("GETEX k PERSIST", "$5\r\nHello\r\n"),
            ("TTL k", ":-1\r\n"),
            (
                "GETEX k PX 0",
                "-ERR invalid expire time in 'getex' command\r\n",
            ),
            ("GETEX k FOO 1", "-ERR syntax error\r\n"),
            ("SETRANGE k 6 World", ":11\r\n"),
            ("GET k", "$11\r\nHello\0World\r\n"),
            ("SETRANGE n 3 ab", ":5\r\n"),
            ("SETRANGE k -1 x", "-ERR offset is out of range\r\n"),
            (
                "SETRANGE k 536870912 x",
                "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n",
            ),
            ("SADD s1 a b", ":2\r\n"),
            ("SMOVE s1 s2 a", ":1\r\n"),
            ("SMOVE s1 s2 x", ":0\r\n"),
            ("SMOVE missing s2 a", ":0\r\n"),
            ("SMOVE s1 s1 b", ":1\r\n"),
            ("SISMEMBER s2 a", ":1\r\n"),
        ] {
            assert_eq!(r(&mut s, c), want, "{c}");
        }
        assert!(r(&mut s, "SMOVE s1 k b").starts_with("-WRONGTYPE"));
        assert!(r(&mut s, "SETRANGE s1 0 x").starts_with("-WRONGTYPE"));
    }

    #[test]
    fn every_command_has_redis_arity() {
        // Every known command has an arity, and the name counts.
        for c in COMMANDS {
            assert!(c.arity != 0, "{}", c.name);
            assert!(known(c.name.as_bytes()));
        }
        let keys = |name: &str, args: &[&str]| -> Vec<String> {
            let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            spec(name.as_bytes())
                .unwrap()
                .keys(&args)
                .map(|k| String::from_utf8_lossy(k).into_owned())
                .collect()
        };
        assert_eq!(keys("get", &["k"]), ["k"]);
        assert_eq!(keys("mset", &["a", "1", "b", "2"]), ["a", "b"]);
        assert_eq!(keys("lmove", &["s", "d", "LEFT", "RIGHT"]), ["s", "d"]);
        assert_eq!(keys("del", &["a", "b", "c"]), ["a", "b", "c"]);
        assert!(keys("ping", &["x"]).is_empty());
        assert!(arity_fits(b"get", 2) && !arity_fits(b"get", 3) && !arity_fits(b"get", 1));
        assert!(arity_fits(b"del", 2) && arity_fits(b"del", 9) && !arity_fits(b"del", 1));
    }

    #[test]
    fn slowlog_and_commandstats_answer_in_redis_form() {
        let db = Db::default();
        let mut s = Session::default();
        assert_eq!(
            run_line(&db, &mut s, "CONFIG GET slowlog-log-slower-than"),
            "*2\r\n$23\r\nslowlog-log-slower-than\r\n$5\r\n10000\r\n"
        );
        assert_eq!(
            run_line(&db, &mut s, "CONFIG SET slowlog-log-slower-than 0"),
            "+OK\r\n"
        );
        assert_eq!(run_line(&db, &mut s, "SLOWLOG RESET"), "+OK\r\n");
        run_line(&db, &mut s, "SET a b");
        run_line(&db, &mut s, "INCR a");
        // Every command is slower than 0 µs: SLOWLOG RESET, SET, INCR (the
        // latest entry is SLOWLOG LEN itself, id 4: CONFIG SET was 0).
        assert_eq!(run_line(&db, &mut s, "SLOWLOG LEN"), ":3\r\n");
        let last = run_line(&db, &mut s, "SLOWLOG GET 1");
        assert!(last.starts_with("*1\r\n*6\r\n:4\r\n:"), "{last}");
        assert!(
            last.ends_with("*2\r\n$7\r\nSLOWLOG\r\n$3\r\nLEN\r\n$0\r\n\r\n$0\r\n\r\n"),
            "{last}"
        );
        assert!(run_line(&db, &mut s, "SLOWLOG GET -2").contains("greater than or equal to -1"));
        assert_eq!(
            run_line(&db, &mut s, "CONFIG SET slowlog-max-len 1"),
            "+OK\r\n"
        );
        assert_eq!(run_line(&db, &mut s, "SLOWLOG LEN"), ":1\r\n");
        let stats = run_line(&db, &mut s, "INFO commandstats");
        assert!(stats.contains("# Commandstats\r\n"), "{stats}");
        assert!(
            stats.contains("cmdstat_incr:calls=1,") && stats.contains("failed_calls=1\r\n"),
            "INCR of a non-number failed once: {stats}"
        );
        assert!(run_line(&db, &mut s, "CONFIG SET nosuch 1").starts_with("-ERR Unknown option"));
        // MEMORY USAGE: the store's estimate, growing with the value.
        run_line(&db, &mut s, "SET small x");
        run_line(&db, &mut s, &format!("SET big {}", "x".repeat(1000)));
        let usage = |s: &mut Session, k: &str| -> i64 {
            run_line(&db, s, &format!("MEMORY USAGE {k}"))[1..]
                .trim_end()
                .parse()
                .unwrap()
        };
        let (small, big) = (usage(&mut s, "small"), usage(&mut s, "big"));
        assert!(small > 1 && big >= small + 990, "{small} {big}");
    }

    #[test]
    fn hscan_sscan_zscan_walk_a_big_collection_once() {
        let db = Db::default();
        let mut s = Session::default();
        for i in 0..300 {
            run_line(&db, &mut s, &format!("HSET h f{i} v{i}"));
            run_line(&db, &mut s, &format!("SADD s m{i}"));
            run_line(&db, &mut s, &format!("ZADD z {i} m{i}"));
        }
        for (cmd, words_per_item) in [("HSCAN h", 2), ("SSCAN s", 1), ("ZSCAN z", 2)] {
            let (mut cursor, mut seen, mut calls) = ("0".to_string(), Vec::new(), 0);
            loop {
                let reply = run_line(&db, &mut s, &format!("{cmd} {cursor} COUNT 50"));
                let lines: Vec<&str> = reply.split("\r\n").collect();
                // *2, $n, cursor, *m, then $len/word pairs.
                cursor = lines[2].to_string();
                let words: Vec<&str> = lines[4..].iter().skip(1).step_by(2).copied().collect();
                seen.extend(words.iter().step_by(words_per_item).map(|w| w.to_string()));
                calls += 1;
                if cursor == "0" {
                    break;
                }
            }
            let n = seen.len();
            seen.sort();
            seen.dedup();
            assert_eq!((n, seen.len()), (300, 300), "{cmd}: each element once");
            assert_eq!(
                calls, 6,
                "{cmd}: COUNT 50 pages of a 300-element collection"
            );
        }
    }

    #[test]
    fn keys_and_scan_walk_the_keyspace() {
        let db = Db::default();
        let mut s = Session::default();
        for i in 0..300 {
            run_line(&db, &mut s, &format!("SET key:{i} v"));
        }
        run_line(&db, &mut s, "SET other v");
        let r = run_line(&db, &mut s, "KEYS key:*");
        assert!(r.starts_with("*300\r\n"), "{}", &r[..20]);
        let mut cursor = "0".to_string();
        let mut seen = std::collections::HashSet::new();
        loop {
            let mut req = Vec::new();
            write_command(
                &[
                    b"SCAN",
                    cursor.as_bytes(),
                    b"MATCH",
                    b"key:*",
                    b"COUNT",
                    b"50",
                ],
                &mut req,
            );
            let mut out = Vec::new();
            execute(&req, &db, &mut s, &mut out, &mut || {}).unwrap();
            let text = String::from_utf8(out).unwrap();
            let lines: Vec<&str> = text.split("\r\n").collect();
            cursor = lines[2].to_string();
            for l in lines.iter().skip(5).step_by(2) {
                if !l.is_empty() {
                    seen.insert(l.to_string());
                }
            }
            if cursor == "0" {
                break;
            }
        }
        assert_eq!(seen.len(), 300);
        assert!(glob_match(b"h?llo", b"hello"));
        assert!(glob_match(b"h[a-e]llo", b"hello"));
        assert!(!glob_match(b"h[^e]llo", b"hello"));
        assert!(glob_match(b"*", b""));
    }

    #[test]
    fn a_transaction_queues_a_bounded_number_of_bytes() {
        let db = Db::default();
        let mut s = Session {
            id: 1 << 32,
            ..Session::default()
        };
        run_line(&db, &mut s, "MULTI");
        let big = vec![b'v'; MAX_QUEUED_BYTES / 4];
        let mut answers = Vec::new();
        for _ in 0..5 {
            let mut req = Vec::new();
            write_command(&[b"SET", b"k", &big], &mut req);
            let mut out = Vec::new();
            execute(&req, &db, &mut s, &mut out, &mut || {}).unwrap();
            answers.push(String::from_utf8(out).unwrap());
        }
        assert_eq!(answers[..3], ["+QUEUED\r\n"; 3]);
        // The fourth crosses the bound; the queue is dropped and EXEC aborts.
        assert!(answers[3].starts_with("-ERR too many"), "{answers:?}");
        assert!(run_line(&db, &mut s, "EXEC").starts_with("-EXECABORT"));
        assert_eq!(run_line(&db, &mut s, "EXISTS k"), ":0\r\n");
    }

    #[test]
    fn scan_with_a_type_inside_exec_does_not_wait_for_itself() {
        let db = Db::default();
        let mut s = Session {
            id: 1 << 32,
            ..Session::default()
        };
        run_line(&db, &mut s, "SET a 1");
        run_line(&db, &mut s, "RPUSH l x");
        run_line(&db, &mut s, "MULTI");
        run_line(&db, &mut s, "SCAN 0 COUNT 1000 TYPE list");
        assert_eq!(
            run_line(&db, &mut s, "EXEC"),
            "*1\r\n*2\r\n$1\r\n0\r\n*1\r\n$1\r\nl\r\n"
        );
    }

    #[test]
    fn sessions_start_afresh_for_a_new_connection_of_the_same_index() {
        let sessions = Sessions::new(4);
        let mut s = sessions.take(1 << 32 | 7);
        s.resp3 = true;
        sessions.put(s);
        let s = sessions.take(1 << 32 | 7);
        assert!(s.resp3);
        sessions.put(s);
        assert!(!sessions.take(1 << 32 | 8).resp3);
    }
}
