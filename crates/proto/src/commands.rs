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

use parking_lot::Mutex;

use crate::db::{Db, Entry, Full, Guard, Score, Value, ZSet};
use crate::resp::{RespError, parse};

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

/// A double as Redis prints it (shortest round-trip form, `inf`/`-inf`).
fn fmt_double(v: f64) -> String {
    if v.is_infinite() {
        if v > 0.0 { "inf".into() } else { "-inf".into() }
    } else if v == v.trunc() && v.abs() < 1e17 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// Why a command stopped: its reply is this error instead.
enum Fail {
    Arity(String),
    Msg(&'static [u8]),
    Owned(Vec<u8>),
}

type Res = Result<(), Fail>;

impl From<Full> for Fail {
    fn from(_: Full) -> Self {
        Fail::Msg(OOM)
    }
}

fn arity(ok: bool, name: &str) -> Res {
    if ok {
        Ok(())
    } else {
        Err(Fail::Arity(name.to_ascii_lowercase()))
    }
}

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

/// The commands this server knows and the (lowercase) name of each.
const COMMANDS: &[&str] = &[
    "ping",
    "echo",
    "quit",
    "hello",
    "auth",
    "client",
    "select",
    "command",
    "info",
    "config",
    "dbsize",
    "flushdb",
    "flushall",
    "multi",
    "exec",
    "discard",
    "watch",
    "unwatch",
    "reset",
    "get",
    "set",
    "setex",
    "psetex",
    "setnx",
    "mget",
    "mset",
    "msetnx",
    "incr",
    "incrby",
    "decr",
    "decrby",
    "incrbyfloat",
    "append",
    "strlen",
    "getset",
    "getdel",
    "del",
    "unlink",
    "exists",
    "expire",
    "pexpire",
    "expireat",
    "pexpireat",
    "ttl",
    "pttl",
    "persist",
    "type",
    "scan",
    "keys",
    "lpush",
    "rpush",
    "lpop",
    "rpop",
    "lrange",
    "llen",
    "lindex",
    "hset",
    "hmset",
    "hget",
    "hmget",
    "hgetall",
    "hdel",
    "hincrby",
    "hlen",
    "hexists",
    "sadd",
    "srem",
    "smembers",
    "sismember",
    "scard",
    "spop",
    "zadd",
    "zrange",
    "zrangebyscore",
    "zrem",
    "zincrby",
    "zcard",
    "zpopmin",
    "zscore",
];

/// Whether `name` is a command this server runs (case-insensitive).
pub fn known(name: &[u8]) -> bool {
    COMMANDS
        .iter()
        .any(|c| name.eq_ignore_ascii_case(c.as_bytes()))
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
    let args: Vec<&[u8]> = cmd.args.collect();
    let mut lower = [0u8; 24];
    let name: &[u8] = match lower.get_mut(..cmd.raw_name.len()) {
        Some(buf) => {
            buf.copy_from_slice(cmd.raw_name);
            buf.make_ascii_lowercase();
            buf
        }
        // Longer than any command: unknown.
        None => b"",
    };
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
    let start = w.out.len();
    let r = run(name, cmd.raw_name, &args, db, session, &mut w, None, point);
    if let Err(f) = r {
        w.out.truncate(start);
        write_fail(&mut w, f);
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
    }
}

fn unknown(w: &mut Reply<'_>, raw_name: &[u8], args: &[&[u8]]) {
    w.error(&crate::resp::unknown_command(
        raw_name,
        args.iter().copied(),
    ));
}

/// Takes the locks a command needs: the caller's (inside EXEC) or its own.
fn lock<'g, 'd>(
    db: &'d Db,
    held: &'g mut Option<&mut Guard<'d>>,
    keys: &[&[u8]],
    grows: bool,
) -> Result<Locks<'g, 'd>, Fail> {
    match held {
        Some(g) => Ok(Locks::Held(g)),
        None => Ok(Locks::Own(match keys {
            [k] => db.lock_one(k, grows)?,
            _ => db.lock_keys(keys.iter().copied(), grows)?,
        })),
    }
}

#[allow(clippy::too_many_arguments)]
fn run<'d>(
    name: &[u8],
    raw_name: &[u8],
    a: &[&[u8]],
    db: &'d Db,
    session: &mut Session,
    w: &mut Reply<'_>,
    mut held: Option<&mut Guard<'d>>,
    point: &mut dyn FnMut(),
) -> Res {
    let n = a.len();
    let nm = std::str::from_utf8(name).unwrap_or("?");
    match name {
        // ---- connection -------------------------------------------------
        b"ping" => {
            arity(n <= 1, nm)?;
            match a.first() {
                Some(m) => w.bulk(m),
                None => w.simple(b"PONG"),
            }
        }
        b"echo" => {
            arity(n == 1, nm)?;
            w.bulk(a[0]);
        }
        b"quit" => w.ok(),
        b"hello" => hello(a, session, w)?,
        b"auth" => {
            arity(n == 1 || n == 2, nm)?;
            if n == 2 && a[0].eq_ignore_ascii_case(b"default") {
                // The default user has no password: it accepts any.
                w.ok();
            } else if n == 2 {
                return Err(Fail::Msg(
                    b"WRONGPASS invalid username-password pair or user is disabled.",
                ));
            } else {
                return Err(Fail::Msg(b"ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"));
            }
        }
        b"client" => client(a, session, w)?,
        b"select" => {
            arity(n == 1, nm)?;
            match parse_i64(a[0]) {
                None => return Err(Fail::Msg(NOT_INTEGER)),
                Some(0) => w.ok(),
                Some(_) => return Err(Fail::Msg(BAD_DB)),
            }
        }
        b"command" => {
            if a.first().is_some_and(|s| s.eq_ignore_ascii_case(b"count")) {
                w.int(COMMANDS.len() as i64);
            } else {
                w.array(0);
            }
        }
        b"info" => {
            let s = db.stats();
            let text = format!(
                "# Server\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\nserver:psp\r\n\r\n# Memory\r\nused_memory:{}\r\nmaxmemory:{}\r\nmaxmemory_policy:{}\r\n\r\n# Stats\r\nevicted_keys:{}\r\nexpired_keys:{}\r\n\r\n# Replication\r\nrole:master\r\n\r\n# Keyspace\r\ndb0:keys={},expires={},avg_ttl=0\r\n",
                s.used,
                db.config().max_memory,
                db.config().eviction.name(),
                s.evicted,
                s.expired,
                s.keys,
                s.volatile
            );
            w.bulk(text.as_bytes());
        }
        b"config" => {
            arity(n >= 1, nm)?;
            if a[0].eq_ignore_ascii_case(b"get") {
                arity(n >= 2, "config|get")?;
                let mut pairs: Vec<(&str, String)> = Vec::new();
                for p in &a[1..] {
                    if p.eq_ignore_ascii_case(b"maxmemory") {
                        pairs.push(("maxmemory", db.config().max_memory.to_string()));
                    } else if p.eq_ignore_ascii_case(b"maxmemory-policy") {
                        pairs.push(("maxmemory-policy", db.config().eviction.name().into()));
                    } else if p.eq_ignore_ascii_case(b"databases") {
                        pairs.push(("databases", "1".into()));
                    } else if p.eq_ignore_ascii_case(b"save") {
                        // No persistence (redis-benchmark asks).
                        pairs.push(("save", String::new()));
                    } else if p.eq_ignore_ascii_case(b"appendonly") {
                        pairs.push(("appendonly", "no".into()));
                    }
                }
                w.map(pairs.len());
                for (k, v) in pairs {
                    w.bulk(k.as_bytes());
                    w.bulk(v.as_bytes());
                }
            } else {
                let mut msg = b"ERR unknown subcommand '".to_vec();
                msg.extend_from_slice(&a[0][..a[0].len().min(128)]);
                msg.extend_from_slice(b"'. Try CONFIG HELP.");
                return Err(Fail::Owned(msg));
            }
        }
        b"dbsize" => {
            arity(n == 0, nm)?;
            w.int(db.len() as i64);
        }
        b"flushdb" | b"flushall" => {
            arity(n <= 1, nm)?;
            match held {
                Some(g) => g.clear_locked(),
                None => {
                    for i in 0..crate::db::SHARDS {
                        db.lock_shard(i).clear_locked();
                        point();
                    }
                }
            }
            w.ok();
        }
        b"multi" => {
            arity(n == 0, nm)?;
            if session.multi.is_some() {
                return Err(Fail::Msg(b"ERR MULTI calls can not be nested"));
            }
            session.multi = Some(Vec::new());
            session.multi_bytes = 0;
            session.multi_failed = false;
            w.ok();
        }
        b"discard" => {
            arity(n == 0, nm)?;
            if session.multi.take().is_none() {
                return Err(Fail::Msg(b"ERR DISCARD without MULTI"));
            }
            session.watched.clear();
            w.ok();
        }
        b"exec" => {
            arity(n == 0, nm)?;
            exec(db, session, w, point)?;
        }
        b"watch" => {
            arity(n >= 1, nm)?;
            if session.multi.is_some() {
                return Err(Fail::Msg(b"ERR WATCH inside MULTI is not allowed"));
            }
            let mut g = lock(db, &mut held, a, false)?;
            for k in a {
                let v = g.version(k);
                session.watched.push((Box::from(*k), v));
            }
            w.ok();
        }
        b"unwatch" => {
            session.watched.clear();
            w.ok();
        }
        b"reset" => {
            *session = Session {
                id: session.id,
                ..Session::default()
            };
            w.resp3 = false;
            w.simple(b"RESET");
        }
        // ---- strings ----------------------------------------------------
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
        b"setex" | b"psetex" => {
            arity(n == 3, nm)?;
            let t = int_arg(a[1])?;
            if t <= 0 {
                return Err(Fail::Owned(
                    format!("ERR invalid expire time in '{nm}' command").into_bytes(),
                ));
            }
            let ms = if name == b"setex" {
                t.saturating_mul(1000)
            } else {
                t
            };
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let mut e = Entry::new(Value::Str(a[2].into()));
            e.expire_ms = deadline(g.now_ms, ms);
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
        b"incr" | b"decr" | b"incrby" | b"decrby" => {
            let by = match name {
                b"incr" | b"decr" => {
                    arity(n == 1, nm)?;
                    1
                }
                _ => {
                    arity(n == 2, nm)?;
                    int_arg(a[1])?
                }
            };
            let by = if name.starts_with(b"decr") {
                by.checked_neg().ok_or(Fail::Msg(OVERFLOW))?
            } else {
                by
            };
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let v = g.update(a[0], |slot| {
                let cur = match slot.as_ref().map(|e| &e.value) {
                    None => 0,
                    Some(Value::Str(v)) => match parse_i64(v) {
                        Some(x) => x,
                        None => return (false, Err(Fail::Msg(NOT_INTEGER))),
                    },
                    Some(_) => return (false, Err(Fail::Msg(WRONGTYPE))),
                };
                let Some(new) = cur.checked_add(by) else {
                    return (false, Err(Fail::Msg(OVERFLOW)));
                };
                set_str_keep_ttl(slot, itoa::Buffer::new().format(new).as_bytes());
                (true, Ok(new))
            })?;
            w.int(v);
        }
        b"incrbyfloat" => {
            arity(n == 2, nm)?;
            let by = parse_f64(a[1]).ok_or(Fail::Msg(NOT_FLOAT))?;
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let v = g.update(a[0], |slot| {
                let cur = match slot.as_ref().map(|e| &e.value) {
                    None => 0.0,
                    Some(Value::Str(v)) => match parse_f64(v) {
                        Some(x) => x,
                        None => return (false, Err(Fail::Msg(NOT_FLOAT))),
                    },
                    Some(_) => return (false, Err(Fail::Msg(WRONGTYPE))),
                };
                let new = cur + by;
                if !new.is_finite() {
                    return (
                        false,
                        Err(Fail::Msg(b"ERR increment would produce NaN or Infinity")),
                    );
                }
                let s = fmt_double(new);
                set_str_keep_ttl(slot, s.as_bytes());
                (true, Ok(s))
            })?;
            w.bulk(v.as_bytes());
        }
        b"append" => {
            arity(n == 2, nm)?;
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let len = g.update(a[0], |slot| match slot.as_mut().map(|e| &mut e.value) {
                None => {
                    *slot = Some(Entry::new(Value::Str(a[1].into())));
                    (true, Ok(a[1].len()))
                }
                Some(Value::Str(v)) => {
                    let mut s = std::mem::take(v).into_vec();
                    s.extend_from_slice(a[1]);
                    let len = s.len();
                    *v = s.into_boxed_slice();
                    (true, Ok(len))
                }
                Some(_) => (false, Err(Fail::Msg(WRONGTYPE))),
            })?;
            w.int(len as i64);
        }
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
        // ---- keyspace ---------------------------------------------------
        b"del" | b"unlink" => {
            arity(n >= 1, nm)?;
            let mut g = lock(db, &mut held, a, false)?;
            let count = a.iter().filter(|k| g.delete(k)).count();
            w.int(count as i64);
        }
        b"exists" => {
            arity(n >= 1, nm)?;
            let mut g = lock(db, &mut held, a, false)?;
            let count = a.iter().filter(|k| g.get(k).is_some()).count();
            w.int(count as i64);
        }
        b"expire" | b"pexpire" | b"expireat" | b"pexpireat" => {
            arity(n >= 2, nm)?;
            let t = int_arg(a[1])?;
            let mut cond = None;
            for o in &a[2..] {
                let o = o.to_ascii_uppercase();
                match o.as_slice() {
                    b"NX" | b"XX" | b"GT" | b"LT" if cond.is_none() => cond = Some(o),
                    _ => {
                        return Err(Fail::Owned(
                            format!("ERR Unsupported option {}", String::from_utf8_lossy(&o))
                                .into_bytes(),
                        ));
                    }
                }
            }
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let now = g.now_ms as i64;
            let at = match name {
                b"expire" => now.saturating_add(t.saturating_mul(1000)),
                b"pexpire" => now.saturating_add(t),
                b"expireat" => t.saturating_mul(1000),
                _ => t,
            };
            let done = g.update(a[0], |slot| {
                let Some(e) = slot.as_mut() else {
                    return (false, false);
                };
                let cur = e.expire_ms;
                let ok = match cond.as_deref() {
                    Some(b"NX") => cur == 0,
                    Some(b"XX") => cur != 0,
                    Some(b"GT") => cur != 0 && at > cur as i64,
                    Some(b"LT") => cur == 0 || at < cur as i64,
                    _ => true,
                };
                if !ok {
                    return (false, false);
                }
                if at <= now {
                    *slot = None;
                } else {
                    e.expire_ms = at as u64;
                }
                (true, true)
            });
            w.bool_int(done);
        }
        b"ttl" | b"pttl" => {
            arity(n == 1, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let now = g.now_ms;
            match g.get(a[0]) {
                None => w.int(-2),
                Some(e) if e.expire_ms == 0 => w.int(-1),
                Some(e) => {
                    let ms = e.expire_ms.saturating_sub(now) as i64;
                    w.int(if name == b"ttl" {
                        (ms + 500) / 1000
                    } else {
                        ms
                    });
                }
            }
        }
        b"persist" => {
            arity(n == 1, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let done = g.update(a[0], |slot| match slot.as_mut() {
                Some(e) if e.expire_ms != 0 => {
                    e.expire_ms = 0;
                    (true, true)
                }
                _ => (false, false),
            });
            w.bool_int(done);
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
                        db.lock_shard(i)
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
        // ---- lists ------------------------------------------------------
        b"lpush" | b"rpush" => {
            arity(n >= 2, nm)?;
            let left = name == b"lpush";
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let len = g.update(a[0], |slot| {
                let e = slot.get_or_insert_with(|| Entry::new(Value::List(Box::default())));
                let Value::List(l) = &mut e.value else {
                    return (false, Err(Fail::Msg(WRONGTYPE)));
                };
                for v in &a[1..] {
                    l.push(v, left);
                }
                (true, Ok(l.len()))
            })?;
            w.int(len as i64);
        }
        b"lpop" | b"rpop" => {
            arity(n == 1 || n == 2, nm)?;
            let count = match a.get(1) {
                None => None,
                Some(c) => Some(
                    parse_i64(c)
                        .and_then(|c| usize::try_from(c).ok())
                        .ok_or(Fail::Msg(NOT_POSITIVE))?,
                ),
            };
            let left = name == b"lpop";
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let popped = g.update(a[0], |slot| {
                let Some(e) = slot.as_mut() else {
                    return (false, Ok(None));
                };
                let Value::List(l) = &mut e.value else {
                    return (false, Err(Fail::Msg(WRONGTYPE)));
                };
                let k = count.unwrap_or(1).min(l.len());
                let v: Vec<Box<[u8]>> = (0..k).filter_map(|_| l.pop(left)).collect();
                (k > 0, Ok(Some(v)))
            })?;
            match (count, popped) {
                (None, Some(v)) if !v.is_empty() => w.bulk(&v[0]),
                (None, _) => w.nil(),
                (Some(_), None) => w.nil_array(),
                (Some(_), Some(v)) => {
                    w.array(v.len());
                    for x in &v {
                        w.bulk(x);
                    }
                }
            }
        }
        b"lrange" => {
            arity(n == 3, nm)?;
            let (start, stop) = (int_arg(a[1])?, int_arg(a[2])?);
            let mut g = lock(db, &mut held, &a[..1], false)?;
            match g.get(a[0]).map(|e| &e.value) {
                None => w.array(0),
                Some(Value::List(l)) => {
                    let (s, e) = range(start, stop, l.len());
                    w.array(e - s);
                    for v in l.items().range(s..e) {
                        w.bulk(v);
                    }
                }
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            }
        }
        b"lindex" => {
            arity(n == 2, nm)?;
            let i = int_arg(a[1])?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            match g.get(a[0]).map(|e| &e.value) {
                None => w.nil(),
                Some(Value::List(l)) => {
                    let len = l.len() as i64;
                    let i = if i < 0 { len + i } else { i };
                    match usize::try_from(i).ok().and_then(|i| l.items().get(i)) {
                        Some(v) => w.bulk(v),
                        None => w.nil(),
                    }
                }
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            }
        }
        // ---- hashes -----------------------------------------------------
        b"hset" | b"hmset" => {
            arity(n >= 3 && n % 2 == 1, nm)?;
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let added = g.update(a[0], |slot| {
                let e = slot.get_or_insert_with(|| Entry::new(Value::Hash(Box::default())));
                let Value::Hash(h) = &mut e.value else {
                    return (false, Err(Fail::Msg(WRONGTYPE)));
                };
                let added = a[1..].chunks(2).filter(|fv| h.set(fv[0], fv[1])).count();
                (true, Ok(added))
            })?;
            if name == b"hmset" {
                w.ok()
            } else {
                w.int(added as i64)
            }
        }
        b"hget" | b"hexists" => {
            arity(n == 2, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let v = match g.get(a[0]).map(|e| &e.value) {
                None => None,
                Some(Value::Hash(h)) => h.map().get(a[1]),
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            };
            match (name, v) {
                (b"hget", Some(v)) => w.bulk(v),
                (b"hget", None) => w.nil(),
                (_, v) => w.bool_int(v.is_some()),
            }
        }
        b"hmget" => {
            arity(n >= 2, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let h = match g.get(a[0]).map(|e| &e.value) {
                None => None,
                Some(Value::Hash(h)) => Some(h),
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            };
            w.array(n - 1);
            for f in &a[1..] {
                match h.and_then(|h| h.map().get(*f)) {
                    Some(v) => w.bulk(v),
                    None => w.nil(),
                }
            }
        }
        b"hgetall" => {
            arity(n == 1, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            match g.get(a[0]).map(|e| &e.value) {
                None => w.map(0),
                Some(Value::Hash(h)) => {
                    w.map(h.len());
                    for (f, v) in h.map() {
                        w.bulk(f);
                        w.bulk(v);
                    }
                }
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            }
        }
        b"hdel" | b"zrem" => {
            arity(n >= 2, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let removed = g.update(a[0], |slot| {
                let r = match slot.as_mut().map(|e| &mut e.value) {
                    None => 0,
                    Some(Value::Hash(h)) if name == b"hdel" => {
                        a[1..].iter().filter(|f| h.remove(f)).count()
                    }
                    Some(Value::ZSet(z)) if name == b"zrem" => {
                        a[1..].iter().filter(|m| z.remove(m)).count()
                    }
                    Some(_) => return (false, Err(Fail::Msg(WRONGTYPE))),
                };
                (r > 0, Ok(r))
            })?;
            w.int(removed as i64);
        }
        b"hincrby" => {
            arity(n == 3, nm)?;
            let by = int_arg(a[2])?;
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let v = g.update(a[0], |slot| {
                let e = slot.get_or_insert_with(|| Entry::new(Value::Hash(Box::default())));
                let Value::Hash(h) = &mut e.value else {
                    return (false, Err(Fail::Msg(WRONGTYPE)));
                };
                let cur = match h.map().get(a[1]) {
                    None => 0,
                    Some(v) => match parse_i64(v) {
                        Some(x) => x,
                        None => {
                            return (false, Err(Fail::Msg(b"ERR hash value is not an integer")));
                        }
                    },
                };
                let Some(new) = cur.checked_add(by) else {
                    return (false, Err(Fail::Msg(OVERFLOW)));
                };
                h.set(a[1], itoa::Buffer::new().format(new).as_bytes());
                (true, Ok(new))
            })?;
            w.int(v);
        }
        // ---- sets -------------------------------------------------------
        b"sadd" | b"srem" => {
            arity(n >= 2, nm)?;
            let add = name == b"sadd";
            let mut g = lock(db, &mut held, &a[..1], add)?;
            let count = g.update(a[0], |slot| {
                if !add && slot.is_none() {
                    return (false, Ok(0));
                }
                let e = slot.get_or_insert_with(|| Entry::new(Value::Set(Box::default())));
                let Value::Set(s) = &mut e.value else {
                    return (false, Err(Fail::Msg(WRONGTYPE)));
                };
                let c = a[1..]
                    .iter()
                    .filter(|m| if add { s.add(m) } else { s.remove(m) })
                    .count();
                (c > 0, Ok(c))
            })?;
            w.int(count as i64);
        }
        b"smembers" => {
            arity(n == 1, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            match g.get(a[0]).map(|e| &e.value) {
                None => w.set(0),
                Some(Value::Set(s)) => {
                    w.set(s.len());
                    for m in s.members() {
                        w.bulk(m);
                    }
                }
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            }
        }
        b"sismember" => {
            arity(n == 2, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            match g.get(a[0]).map(|e| &e.value) {
                None => w.int(0),
                Some(Value::Set(s)) => w.bool_int(s.members().contains(a[1])),
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            }
        }
        b"spop" => {
            arity(n == 1 || n == 2, nm)?;
            let count = match a.get(1) {
                None => None,
                Some(c) => Some(
                    parse_i64(c)
                        .and_then(|c| usize::try_from(c).ok())
                        .ok_or(Fail::Msg(NOT_POSITIVE))?,
                ),
            };
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let popped = g.update(a[0], |slot| match slot.as_mut().map(|e| &mut e.value) {
                None => (false, Ok(Vec::new())),
                Some(Value::Set(s)) => {
                    let k = count.unwrap_or(1).min(s.len());
                    let v: Vec<Box<[u8]>> = (0..k).filter_map(|_| s.pop()).collect();
                    (k > 0, Ok(v))
                }
                Some(_) => (false, Err(Fail::Msg(WRONGTYPE))),
            })?;
            match count {
                None => match popped.first() {
                    Some(m) => w.bulk(m),
                    None => w.nil(),
                },
                Some(_) => {
                    w.set(popped.len());
                    for m in &popped {
                        w.bulk(m);
                    }
                }
            }
        }
        // ---- sorted sets ------------------------------------------------
        b"zadd" => zadd(a, db, &mut held, w)?,
        b"zincrby" => {
            arity(n == 3, nm)?;
            let by = parse_f64(a[1]).ok_or(Fail::Msg(NOT_FLOAT))?;
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let v = g.update(a[0], |slot| {
                let e = slot.get_or_insert_with(|| Entry::new(Value::ZSet(Box::default())));
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
                z.insert(a[2], new);
                (true, Ok(new))
            })?;
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
        b"zpopmin" => {
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
                    let v: Vec<(Box<[u8]>, f64)> = (0..k).filter_map(|_| z.pop_min()).collect();
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
        b"zrange" | b"zrangebyscore" => zrange(name, a, db, &mut held, w)?,
        _ => unknown(w, raw_name, a),
    }
    Ok(())
}

/// A deadline `ms` from `now` (saturating).
fn deadline(now: u64, ms: i64) -> u64 {
    now.saturating_add(ms.max(1) as u64)
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

fn hello(a: &[&[u8]], session: &mut Session, w: &mut Reply<'_>) -> Res {
    let mut proto = None;
    let mut i = 0;
    if let Some(v) = a.first() {
        match parse_i64(v) {
            Some(p @ (2 | 3)) => proto = Some(p),
            Some(_) => {
                return Err(Fail::Msg(b"NOPROTO unsupported protocol version"));
            }
            None => {
                return Err(Fail::Msg(
                    b"ERR Protocol version is not an integer or out of range",
                ));
            }
        }
        i = 1;
    }
    while i < a.len() {
        let opt = a[i].to_ascii_uppercase();
        match opt.as_slice() {
            b"AUTH" if i + 2 < a.len() => {
                // The default user has no password: it accepts any.
                if !a[i + 1].eq_ignore_ascii_case(b"default") {
                    return Err(Fail::Msg(
                        b"WRONGPASS invalid username-password pair or user is disabled.",
                    ));
                }
                i += 3;
            }
            b"SETNAME" if i + 1 < a.len() => {
                session.name = Some(a[i + 1].to_vec());
                i += 2;
            }
            _ => {
                return Err(Fail::Owned(
                    format!(
                        "ERR Syntax error in HELLO option '{}'",
                        String::from_utf8_lossy(&a[i][..a[i].len().min(64)])
                    )
                    .into_bytes(),
                ));
            }
        }
    }
    if let Some(p) = proto {
        session.resp3 = p == 3;
        w.resp3 = session.resp3;
    }
    w.map(7);
    w.bulk(b"server");
    w.bulk(b"redis");
    w.bulk(b"version");
    w.bulk(b"7.0.0");
    w.bulk(b"proto");
    w.int(if session.resp3 { 3 } else { 2 });
    w.bulk(b"id");
    w.int((session.id >> 32) as i64);
    w.bulk(b"mode");
    w.bulk(b"standalone");
    w.bulk(b"role");
    w.bulk(b"master");
    w.bulk(b"modules");
    w.array(0);
    Ok(())
}

fn client(a: &[&[u8]], session: &mut Session, w: &mut Reply<'_>) -> Res {
    arity(!a.is_empty(), "client")?;
    let sub = a[0].to_ascii_lowercase();
    match sub.as_slice() {
        b"setname" => {
            arity(a.len() == 2, "client|setname")?;
            if a[1].iter().any(|&b| b <= b' ' || b > b'~') {
                return Err(Fail::Msg(
                    b"ERR Client names cannot contain spaces, newlines or special characters.",
                ));
            }
            session.name = (!a[1].is_empty()).then(|| a[1].to_vec());
            w.ok();
        }
        b"getname" => match &session.name {
            Some(n) => w.bulk(n),
            None => w.nil(),
        },
        b"id" => w.int((session.id >> 32) as i64),
        b"setinfo" => {
            arity(a.len() == 3, "client|setinfo")?;
            w.ok();
        }
        b"info" => {
            let name = session.name.clone().unwrap_or_default();
            let mut s = format!("id={} name=", session.id >> 32).into_bytes();
            s.extend_from_slice(&name);
            s.extend_from_slice(
                format!(" db=0 resp={}\n", if session.resp3 { 3 } else { 2 }).as_bytes(),
            );
            w.bulk(&s);
        }
        _ => {
            let mut msg = b"ERR unknown subcommand '".to_vec();
            msg.extend_from_slice(&a[0][..a[0].len().min(128)]);
            msg.extend_from_slice(b"'. Try CLIENT HELP.");
            return Err(Fail::Owned(msg));
        }
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
                if t <= 0 {
                    return Err(Fail::Msg(b"ERR invalid expire time in 'set' command"));
                }
                let ms = if o[0] == b'E' {
                    t.saturating_mul(1000)
                } else {
                    t
                };
                ttl = Some((o.len() == 4, ms));
            }
            _ => return Err(Fail::Msg(SYNTAX)),
        }
        i += 1;
    }
    let mut g = lock(db, held, &a[..1], true)?;
    let now = g.now_ms;
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
            Some((true, at)) => at.max(1) as u64,
            Some((false, ms)) => deadline(now, ms),
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

fn exec(db: &Db, session: &mut Session, w: &mut Reply<'_>, point: &mut dyn FnMut()) -> Res {
    let Some(queue) = session.multi.take() else {
        return Err(Fail::Msg(b"ERR EXEC without MULTI"));
    };
    let watched = std::mem::take(&mut session.watched);
    if session.multi_failed {
        session.multi_failed = false;
        return Err(Fail::Msg(
            b"EXECABORT Transaction discarded because of previous errors.",
        ));
    }
    // Every shard: the block runs as one command, and the WATCH check sees
    // what it runs on. A block that may grow the data finds room first.
    let mut g = db.lock_all(true)?;
    if watched.iter().any(|(k, v)| g.version(k) != *v) {
        w.nil_array();
        return Ok(());
    }
    w.array(queue.len());
    for req in &queue {
        let Ok(cmd) = parse(req) else {
            w.error(b"ERR Protocol error");
            continue;
        };
        let args: Vec<&[u8]> = cmd.args.collect();
        let name = cmd.raw_name.to_ascii_lowercase();
        let start = w.out.len();
        if let Err(f) = run(
            &name,
            cmd.raw_name,
            &args,
            db,
            session,
            w,
            Some(&mut g),
            point,
        ) {
            w.out.truncate(start);
            write_fail(w, f);
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
    let cursor: u64 = std::str::from_utf8(a[0])
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(Fail::Msg(b"ERR invalid cursor"))?;
    let (mut pattern, mut count, mut ty): (Option<&[u8]>, usize, Option<Vec<u8>>) =
        (None, SCAN_DEFAULT_COUNT, None);
    let mut i = 1;
    while i < a.len() {
        let o = a[i].to_ascii_uppercase();
        if i + 1 >= a.len() {
            return Err(Fail::Msg(SYNTAX));
        }
        match o.as_slice() {
            b"MATCH" => pattern = Some(a[i + 1]),
            b"COUNT" => {
                let c = int_arg(a[i + 1])?;
                if c < 1 {
                    return Err(Fail::Msg(SYNTAX));
                }
                count = (c as usize).min(SCAN_MAX_COUNT);
            }
            b"TYPE" => ty = Some(a[i + 1].to_ascii_lowercase()),
            _ => return Err(Fail::Msg(SYNTAX)),
        }
        i += 2;
    }
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
                .lock_shard(shard)
                .keys_in_shard(shard, pos, want, keep, &mut batch),
        };
        if let Some(t) = &ty {
            let is_type = |g: &mut Guard<'_>, k: &[u8]| {
                g.get(k)
                    .is_some_and(|e| e.value.type_name().as_bytes() == t.as_slice())
            };
            batch.retain(|k| match held.as_mut() {
                // Inside EXEC every shard is held already (locking again
                // would wait for ourselves).
                Some(g) => is_type(g, k),
                None => is_type(&mut db.lock_one(k, false).expect("no growth"), k),
            });
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

fn zadd<'d>(a: &[&[u8]], db: &'d Db, held: &mut Option<&mut Guard<'d>>, w: &mut Reply<'_>) -> Res {
    arity(a.len() >= 3, "zadd")?;
    let (mut nx, mut xx, mut ch, mut incr) = (false, false, false, false);
    let mut i = 1;
    while i < a.len() {
        match a[i].to_ascii_uppercase().as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"CH" => ch = true,
            b"INCR" => incr = true,
            b"GT" | b"LT" => return Err(Fail::Msg(SYNTAX)),
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
        let e = slot.get_or_insert_with(|| Entry::new(Value::ZSet(Box::<ZSet>::default())));
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
            if z.insert(m, new) {
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
    let mut by_score = name == b"zrangebyscore";
    let (mut withscores, mut rev) = (false, false);
    let mut limit: Option<(i64, i64)> = None;
    let mut i = 3;
    while i < a.len() {
        match a[i].to_ascii_uppercase().as_slice() {
            b"WITHSCORES" => withscores = true,
            b"BYSCORE" if name == b"zrange" => by_score = true,
            b"REV" if name == b"zrange" => rev = true,
            b"LIMIT" if i + 2 < a.len() => {
                limit = Some((int_arg(a[i + 1])?, int_arg(a[i + 2])?));
                i += 2;
            }
            _ => return Err(Fail::Msg(SYNTAX)),
        }
        i += 1;
    }
    let mut g = lock(db, held, &a[..1], false)?;
    let z = match g.get(a[0]).map(|e| &e.value) {
        None => {
            w.array(0);
            return Ok(());
        }
        Some(Value::ZSet(z)) => z,
        Some(_) => return Err(Fail::Msg(WRONGTYPE)),
    };
    let items: Vec<&(Score, Box<[u8]>)> = if by_score {
        let (lo, hi) = if rev { (a[2], a[1]) } else { (a[1], a[2]) };
        let (lo, lo_ex) = score_bound(lo)?;
        let (hi, hi_ex) = score_bound(hi)?;
        let mut v: Vec<_> = z
            .ordered()
            .iter()
            .filter(|(s, _)| {
                (if lo_ex { s.0 > lo } else { s.0 >= lo })
                    && (if hi_ex { s.0 < hi } else { s.0 <= hi })
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
        if limit.is_some() {
            return Err(Fail::Msg(b"ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"));
        }
        let (s, e) = range(int_arg(a[1])?, int_arg(a[2])?, z.len());
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

/// A ZRANGEBYSCORE bound: `(x` exclusive, `-inf`/`+inf`.
fn score_bound(s: &[u8]) -> Result<(f64, bool), Fail> {
    let (ex, t) = match s.strip_prefix(b"(") {
        Some(t) => (true, t),
        None => (false, s),
    };
    let v = parse_f64(t).ok_or(Fail::Msg(b"ERR min or max is not a float"))?;
    Ok((v, ex))
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
        let mut req = Vec::new();
        write_command(&words, &mut req);
        let mut out = Vec::new();
        execute(&req, db, s, &mut out, &mut || {}).expect("valid");
        String::from_utf8_lossy(&out).into_owned()
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
