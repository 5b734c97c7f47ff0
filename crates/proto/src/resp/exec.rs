//! Execution: runs one framed request against a [`Store`] and appends the
//! RESP2 reply. Pure computation over the store's calls: no I/O, no threads,
//! no global state; it never panics on any input.

use std::borrow::Cow;

use super::*;
use crate::store::Store;

/// Executes one complete request against `store`, appending the RESP2 reply to `out`.
///
/// `scratch` is a buffer the caller reuses across calls (values read from the store pass
/// through it); its contents on return are unspecified.
///
/// Returns `Err` only when `req` is not exactly one valid request (see [`parse`]); then
/// nothing is appended. Everything else, unknown commands, wrong argument counts, wrong
/// types and store failures included, is answered with a RESP error reply, as Redis 7
/// words it where Redis has the case.
///
/// Commands and where they differ from Redis:
/// * `PING [msg]`, `ECHO msg`, `GET`, `MGET`, `MSET`, `DEL`, `EXISTS`, `INCR`, `LLEN`,
///   `LRANGE` as in Redis (strings and lists share one key space: `GET` of a list key is
///   `-WRONGTYPE`, `SET`/`MSET` overwrite a list, `DEL` removes either).
/// * `SET key value` accepts `NX`, `XX`, `GET` and `KEEPTTL` (a no-op: there are no
///   expiries); `EX`/`PX`/`EXAT`/`PXAT` are refused with an error reply, other words are
///   `-ERR syntax error`.
/// * `LPUSH`/`RPUSH key v...` reply the new length; `LPOP`/`RPOP key [count]` reply a
///   bulk string, or nil (`$-1`) when the list does not exist; with a count, an array
///   (`*-1` when the list does not exist).
/// * `CONFIG GET ...` and `COMMAND ...` reply `*0`; other `CONFIG` subcommands are
///   `-ERR unknown subcommand`. `HELLO` replies `-NOPROTO this server speaks RESP2 only`
///   whatever its arguments. `SELECT 0` is `+OK`, any other index is
///   `-ERR DB index is out of range`. `INFO` replies a short fixed bulk string.
///
/// Every read-modify-write (`SET`, `INCR`, `DEL`, list pushes, pops and `LRANGE`) runs
/// inside `store.atomically(key, ...)` for its user key.
///
/// # Storage layout
/// * String `k`: under `k`, or under `0x00 ++ k` when `k` itself starts with `0x00`
///   (escaping: user keys never collide with the records below).
/// * List `k` metadata: under `0x00 'L' ++ k`, 16 bytes: head and tail as big-endian
///   `i64`; the elements are the indices `head..tail` (never stored empty: the last pop
///   deletes it).
/// * List element `i`: under `0x00 'E' ++ len(k) as u32 BE ++ k ++ (i as u64 ^ 1<<63) BE`,
///   so that one list's elements sort in index order. `LPUSH` decrements head, `RPUSH`
///   increments tail, `LRANGE` reads `head+start..=head+stop` one `get` each.
pub fn execute<S: Store>(
    req: &[u8],
    store: &S,
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
) -> Result<(), RespError> {
    let cmd = parse(req)?;
    let start = out.len();
    if let Err(fail) = run(cmd, store, out, scratch) {
        out.truncate(start);
        fail.write(out);
    }
    Ok(())
}

const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
const OVERFLOW: &str = "ERR increment or decrement would overflow";
const SYNTAX: &str = "ERR syntax error";
const NOT_POSITIVE: &str = "ERR value is out of range, must be positive";
pub(super) const NO_EXPIRY: &str =
    "ERR expiry options (EX, PX, EXAT, PXAT) are not supported by this server";
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOPROTO: &str = "NOPROTO this server speaks RESP2 only";
const BAD_DB: &str = "ERR DB index is out of range";
const CORRUPT: &str = "ERR store holds a corrupt list";
pub(super) const INFO: &[u8] =
    b"# Server\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\n\r\n# Replication\r\nrole:master\r\n";

/// Why a command stopped early; the partial reply is dropped and this error is written.
#[derive(Debug)]
enum Fail {
    /// Wrong number of arguments for the named command.
    Arity(&'static str),
    /// A fixed error text (without the leading `-`).
    Msg(&'static str),
    /// A store error.
    Store(String),
}

impl From<String> for Fail {
    fn from(e: String) -> Self {
        Fail::Store(e)
    }
}

impl Fail {
    fn write(self, out: &mut Vec<u8>) {
        match self {
            Fail::Arity(name) => {
                let msg = format!("ERR wrong number of arguments for '{name}' command");
                push_error(out, msg.as_bytes());
            }
            Fail::Msg(msg) => push_error(out, msg.as_bytes()),
            Fail::Store(e) => {
                let msg = format!("ERR store error: {e}");
                push_error(out, msg.as_bytes());
            }
        }
    }
}

type Res = Result<(), Fail>;

fn run<S: Store>(cmd: Command<'_>, store: &S, out: &mut Vec<u8>, scratch: &mut Vec<u8>) -> Res {
    let (name, args) = (cmd.name(), cmd.args);
    match name {
        Cmd::Get
        | Cmd::Set
        | Cmd::Mset
        | Cmd::Mget
        | Cmd::Del
        | Cmd::Exists
        | Cmd::Incr
        | Cmd::Decr
        | Cmd::Incrby
        | Cmd::Decrby => strings(name, args, store, out, scratch),
        Cmd::Lpush | Cmd::Rpush | Cmd::Lpop | Cmd::Rpop | Cmd::Llen | Cmd::Lrange => {
            lists(name, args, store, out, scratch)
        }
        Cmd::Ping
        | Cmd::Echo
        | Cmd::Config
        | Cmd::Command
        | Cmd::Hello
        | Cmd::Select
        | Cmd::Info => server(name, args, out),
        Cmd::Unknown => {
            push_error(out, &unknown_command(cmd.raw_name, args));
            Ok(())
        }
    }
}

/// Redis 7's error for a wrong number of arguments to `name` unless `ok`.
fn arity(name: Cmd, ok: bool) -> Res {
    if ok {
        Ok(())
    } else {
        Err(Fail::Arity(name.as_str()))
    }
}

/// Strings and the keyspace: GET, SET, MSET, MGET, DEL, EXISTS, INCR/DECR(BY).
fn strings<S: Store>(
    name: Cmd,
    mut args: Args<'_>,
    store: &S,
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
) -> Res {
    let n = args.len();
    match name {
        Cmd::Get => {
            arity(name, n == 1)?;
            let key = args.next().unwrap_or_default();
            scratch.clear();
            if store.get(&string_key(key), scratch)? {
                push_bulk(out, scratch);
            } else if probe_list(store, key, scratch, out)? {
                return Err(Fail::Msg(WRONGTYPE));
            } else {
                push_nil(out);
            }
        }
        Cmd::Set => {
            arity(name, n >= 2)?;
            let key = args.next().unwrap_or_default();
            let value = args.next().unwrap_or_default();
            let mut opts = SetOpts::default();
            for opt in args {
                match opt.to_ascii_uppercase().as_slice() {
                    b"NX" => opts.nx = true,
                    b"XX" => opts.xx = true,
                    b"GET" => opts.get = true,
                    b"KEEPTTL" => {}
                    b"EX" | b"PX" | b"EXAT" | b"PXAT" => return Err(Fail::Msg(NO_EXPIRY)),
                    _ => return Err(Fail::Msg(SYNTAX)),
                }
            }
            if opts.nx && opts.xx {
                return Err(Fail::Msg(SYNTAX));
            }
            store.atomically(key, || set(store, key, value, opts, true, out, scratch))?;
        }
        Cmd::Mset => {
            arity(name, n >= 2 && n.is_multiple_of(2))?;
            let keys: Vec<&[u8]> = args.clone().step_by(2).collect();
            store.atomically_all(&keys, || -> Res {
                while let (Some(key), Some(value)) = (args.next(), args.next()) {
                    let opts = SetOpts::default();
                    set(store, key, value, opts, false, out, scratch)?;
                }
                Ok(())
            })?;
            out.extend_from_slice(b"+OK\r\n");
        }
        Cmd::Mget => {
            arity(name, n >= 1)?;
            push_header(out, b'*', n as u64);
            let keys: Vec<&[u8]> = args.clone().collect();
            store.atomically_all(&keys, || -> Res {
                for key in args {
                    scratch.clear();
                    if store.get(&string_key(key), scratch)? {
                        push_bulk(out, scratch);
                    } else {
                        push_nil(out);
                    }
                }
                Ok(())
            })?;
        }
        Cmd::Del => {
            arity(name, n >= 1)?;
            let keys: Vec<&[u8]> = args.clone().collect();
            let count = store.atomically_all(&keys, || -> Result<i64, Fail> {
                let mut count = 0;
                for key in args {
                    if del(store, key, scratch, out)? {
                        count += 1;
                    }
                }
                Ok(count)
            })?;
            push_int(out, count);
        }
        Cmd::Exists => {
            arity(name, n >= 1)?;
            let mut count = 0i64;
            for key in args {
                scratch.clear();
                if store.get(&string_key(key), scratch)? || probe_list(store, key, scratch, out)? {
                    count += 1;
                }
            }
            push_int(out, count);
        }
        Cmd::Incr | Cmd::Decr | Cmd::Incrby | Cmd::Decrby => {
            let by_arg = matches!(name, Cmd::Incrby | Cmd::Decrby);
            arity(name, n == if by_arg { 2 } else { 1 })?;
            let key = args.next().unwrap_or_default();
            let by = if by_arg {
                args.next()
                    .and_then(parse_i64)
                    .ok_or(Fail::Msg(NOT_INTEGER))?
            } else {
                1
            };
            let by = if matches!(name, Cmd::Decr | Cmd::Decrby) {
                by.checked_neg().ok_or(Fail::Msg(OVERFLOW))?
            } else {
                by
            };
            store.atomically(key, || incr(store, key, by, out, scratch))?;
        }
        _ => unreachable!("routed by name"),
    }
    Ok(())
}

/// Lists: LPUSH/RPUSH, LPOP/RPOP, LLEN, LRANGE.
fn lists<S: Store>(
    name: Cmd,
    mut args: Args<'_>,
    store: &S,
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
) -> Res {
    let n = args.len();
    match name {
        Cmd::Lpush | Cmd::Rpush => {
            arity(name, n >= 2)?;
            let key = args.next().unwrap_or_default();
            let left = name == Cmd::Lpush;
            store.atomically(key, || push(store, key, args, left, out, scratch))?;
        }
        Cmd::Lpop | Cmd::Rpop => {
            arity(name, n == 1 || n == 2)?;
            let key = args.next().unwrap_or_default();
            let count = match args.next() {
                None => None,
                Some(c) => match parse_i64(c).and_then(|c| u64::try_from(c).ok()) {
                    Some(c) => Some(c),
                    None => return Err(Fail::Msg(NOT_POSITIVE)),
                },
            };
            let left = name == Cmd::Lpop;
            store.atomically(key, || pop(store, key, count, left, out, scratch))?;
        }
        Cmd::Llen => {
            arity(name, n == 1)?;
            let key = args.next().unwrap_or_default();
            let mut keys = ListKeys::new(key)?;
            let len = match read_meta(store, &mut keys, scratch)? {
                Some((head, tail)) => tail - head,
                None if string_exists(store, key, scratch)? => return Err(Fail::Msg(WRONGTYPE)),
                None => 0,
            };
            push_int(out, len);
        }
        Cmd::Lrange => {
            arity(name, n == 3)?;
            let key = args.next().unwrap_or_default();
            let start = args.next().and_then(parse_i64);
            let stop = args.next().and_then(parse_i64);
            let (Some(start), Some(stop)) = (start, stop) else {
                return Err(Fail::Msg(NOT_INTEGER));
            };
            store.atomically(key, || lrange(store, key, start, stop, out, scratch))?;
        }
        _ => unreachable!("routed by name"),
    }
    Ok(())
}

/// The connection and the server: PING, ECHO, CONFIG, COMMAND, HELLO, SELECT, INFO.
fn server(name: Cmd, mut args: Args<'_>, out: &mut Vec<u8>) -> Res {
    let n = args.len();
    match name {
        Cmd::Ping => {
            arity(name, n <= 1)?;
            match args.next() {
                Some(msg) => push_bulk(out, msg),
                None => out.extend_from_slice(b"+PONG\r\n"),
            }
        }
        Cmd::Echo => {
            arity(name, n == 1)?;
            push_bulk(out, args.next().unwrap_or_default());
        }
        Cmd::Config => {
            arity(name, n >= 1)?;
            let sub = args.next().unwrap_or_default();
            if sub.eq_ignore_ascii_case(b"get") {
                if n < 2 {
                    return Err(Fail::Arity("config|get"));
                }
                out.extend_from_slice(b"*0\r\n");
            } else {
                let mut msg = b"ERR unknown subcommand '".to_vec();
                msg.extend_from_slice(&sub[..sub.len().min(128)]);
                msg.extend_from_slice(b"'. Try CONFIG HELP.");
                push_error(out, &msg);
            }
        }
        Cmd::Command => out.extend_from_slice(b"*0\r\n"),
        Cmd::Hello => push_error(out, NOPROTO.as_bytes()),
        Cmd::Select => {
            arity(name, n == 1)?;
            match args.next().and_then(parse_i64) {
                None => return Err(Fail::Msg(NOT_INTEGER)),
                Some(0) => out.extend_from_slice(b"+OK\r\n"),
                Some(_) => return Err(Fail::Msg(BAD_DB)),
            }
        }
        Cmd::Info => push_bulk(out, INFO),
        _ => unreachable!("routed by name"),
    }
    Ok(())
}

/// The record key of user string key `k` (escaped when it starts with `0x00`).
fn string_key(k: &[u8]) -> Cow<'_, [u8]> {
    if k.first() == Some(&0) {
        let mut escaped = Vec::with_capacity(k.len() + 1);
        escaped.push(0);
        escaped.extend_from_slice(k);
        Cow::Owned(escaped)
    } else {
        Cow::Borrowed(k)
    }
}

fn string_exists<S: Store>(store: &S, key: &[u8], scratch: &mut Vec<u8>) -> Result<bool, Fail> {
    scratch.clear();
    Ok(store.get(&string_key(key), scratch)?)
}

/// Whether list `key` exists, without allocating: the meta key is built in `scratch` and
/// its value read into the tail of `out`, which is truncated back.
fn probe_list<S: Store>(
    store: &S,
    key: &[u8],
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Result<bool, Fail> {
    scratch.clear();
    scratch.extend_from_slice(&[0, b'L']);
    scratch.extend_from_slice(key);
    let mark = out.len();
    let found = store.get(scratch, out);
    out.truncate(mark);
    Ok(found?)
}

/// The record keys of one list: the meta key followed by an element key whose last
/// 8 bytes are rewritten for each index.
struct ListKeys {
    buf: Vec<u8>,
    meta_len: usize,
}

impl ListKeys {
    fn new(key: &[u8]) -> Result<ListKeys, Fail> {
        let len = u32::try_from(key.len()).map_err(|_| Fail::Msg("ERR key too long"))?;
        let mut buf = Vec::with_capacity(2 * key.len() + 16);
        buf.extend_from_slice(&[0, b'L']);
        buf.extend_from_slice(key);
        let meta_len = buf.len();
        buf.extend_from_slice(&[0, b'E']);
        buf.extend_from_slice(&len.to_be_bytes());
        buf.extend_from_slice(key);
        buf.extend_from_slice(&[0; 8]);
        Ok(ListKeys { buf, meta_len })
    }

    fn meta(&self) -> &[u8] {
        &self.buf[..self.meta_len]
    }

    fn elem(&mut self, index: i64) -> &[u8] {
        let ordered = (index as u64) ^ (1 << 63);
        let at = self.buf.len() - 8;
        self.buf[at..].copy_from_slice(&ordered.to_be_bytes());
        &self.buf[self.meta_len..]
    }
}

fn read_meta<S: Store>(
    store: &S,
    keys: &mut ListKeys,
    scratch: &mut Vec<u8>,
) -> Result<Option<(i64, i64)>, Fail> {
    scratch.clear();
    if !store.get(keys.meta(), scratch)? {
        return Ok(None);
    }
    let (Some(head), Some(tail)) = (scratch.get(..8), scratch.get(8..16)) else {
        return Err(Fail::Msg(CORRUPT));
    };
    let head = i64::from_be_bytes(head.try_into().map_err(|_| Fail::Msg(CORRUPT))?);
    let tail = i64::from_be_bytes(tail.try_into().map_err(|_| Fail::Msg(CORRUPT))?);
    if scratch.len() != 16 || tail <= head || tail.checked_sub(head).is_none() {
        return Err(Fail::Msg(CORRUPT));
    }
    Ok(Some((head, tail)))
}

fn write_meta<S: Store>(store: &S, keys: &ListKeys, head: i64, tail: i64) -> Res {
    if head == tail {
        store.delete(keys.meta())?;
    } else {
        let mut meta = [0u8; 16];
        meta[..8].copy_from_slice(&head.to_be_bytes());
        meta[8..].copy_from_slice(&tail.to_be_bytes());
        store.put(keys.meta(), &meta)?;
    }
    Ok(())
}

fn delete_list<S: Store>(store: &S, keys: &mut ListKeys, head: i64, tail: i64) -> Res {
    for i in head..tail {
        store.delete(keys.elem(i))?;
    }
    store.delete(keys.meta())?;
    Ok(())
}

#[derive(Debug, Clone, Copy, Default)]
struct SetOpts {
    nx: bool,
    xx: bool,
    get: bool,
}

/// `SET` (and one pair of `MSET`, with `reply` false) inside `atomically(key)`.
#[allow(clippy::too_many_arguments)]
fn set<S: Store>(
    store: &S,
    key: &[u8],
    value: &[u8],
    opts: SetOpts,
    reply: bool,
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
) -> Res {
    let list = probe_list(store, key, scratch, out)?;
    let skey = string_key(key);
    scratch.clear();
    let had_string = (opts.nx || opts.xx || opts.get) && store.get(&skey, scratch)?;
    if opts.get && list {
        return Err(Fail::Msg(WRONGTYPE));
    }
    let exists = had_string || list;
    let write = !(opts.nx && exists || opts.xx && !exists);
    if write {
        if list {
            // `opts.get` is false here (GET on a list is WRONGTYPE), so `scratch` may be reused.
            let mut keys = ListKeys::new(key)?;
            if let Some((head, tail)) = read_meta(store, &mut keys, scratch)? {
                delete_list(store, &mut keys, head, tail)?;
            }
        }
        store.put(&skey, value)?;
    }
    if !reply {
        // MSET: one reply for all pairs, written by the caller.
    } else if opts.get {
        if had_string {
            push_bulk(out, scratch);
        } else {
            push_nil(out);
        }
    } else if write {
        out.extend_from_slice(b"+OK\r\n");
    } else {
        push_nil(out);
    }
    Ok(())
}

fn del<S: Store>(
    store: &S,
    key: &[u8],
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Result<bool, Fail> {
    let mut existed = store.delete(&string_key(key))?;
    if probe_list(store, key, scratch, out)? {
        let mut keys = ListKeys::new(key)?;
        if let Some((head, tail)) = read_meta(store, &mut keys, scratch)? {
            delete_list(store, &mut keys, head, tail)?;
            existed = true;
        }
    }
    Ok(existed)
}

fn incr<S: Store>(store: &S, key: &[u8], by: i64, out: &mut Vec<u8>, scratch: &mut Vec<u8>) -> Res {
    let skey = string_key(key);
    scratch.clear();
    let current = if store.get(&skey, scratch)? {
        parse_i64(scratch).ok_or(Fail::Msg(NOT_INTEGER))?
    } else if probe_list(store, key, scratch, out)? {
        return Err(Fail::Msg(WRONGTYPE));
    } else {
        0
    };
    let next = current.checked_add(by).ok_or(Fail::Msg(OVERFLOW))?;
    scratch.clear();
    push_i64_digits(scratch, next);
    store.put(&skey, scratch)?;
    push_int(out, next);
    Ok(())
}

fn push<S: Store>(
    store: &S,
    key: &[u8],
    values: Args<'_>,
    left: bool,
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
) -> Res {
    let mut keys = ListKeys::new(key)?;
    let (mut head, mut tail) = match read_meta(store, &mut keys, scratch)? {
        Some(meta) => meta,
        None if string_exists(store, key, scratch)? => return Err(Fail::Msg(WRONGTYPE)),
        None => (0, 0),
    };
    let full = || Fail::Msg("ERR list index space exhausted");
    for value in values {
        if left {
            head = head.checked_sub(1).ok_or_else(full)?;
            store.put(keys.elem(head), value)?;
        } else {
            let next = tail.checked_add(1).ok_or_else(full)?;
            store.put(keys.elem(tail), value)?;
            tail = next;
        }
    }
    write_meta(store, &keys, head, tail)?;
    push_int(out, tail - head);
    Ok(())
}

fn pop<S: Store>(
    store: &S,
    key: &[u8],
    count: Option<u64>,
    left: bool,
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
) -> Res {
    let mut keys = ListKeys::new(key)?;
    let Some((mut head, mut tail)) = read_meta(store, &mut keys, scratch)? else {
        if string_exists(store, key, scratch)? {
            return Err(Fail::Msg(WRONGTYPE));
        }
        out.extend_from_slice(if count.is_some() {
            b"*-1\r\n"
        } else {
            b"$-1\r\n"
        });
        return Ok(());
    };
    let len = (tail - head) as u64;
    let take = count.unwrap_or(1).min(len);
    if count.is_some() {
        push_header(out, b'*', take);
    }
    for _ in 0..take {
        let index = if left { head } else { tail - 1 };
        scratch.clear();
        if !store.get(keys.elem(index), scratch)? {
            return Err(Fail::Msg(CORRUPT));
        }
        push_bulk(out, scratch);
        store.delete(keys.elem(index))?;
        if left {
            head += 1;
        } else {
            tail -= 1;
        }
    }
    write_meta(store, &keys, head, tail)
}

fn lrange<S: Store>(
    store: &S,
    key: &[u8],
    start: i64,
    stop: i64,
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
) -> Res {
    let mut keys = ListKeys::new(key)?;
    let Some((head, tail)) = read_meta(store, &mut keys, scratch)? else {
        if string_exists(store, key, scratch)? {
            return Err(Fail::Msg(WRONGTYPE));
        }
        out.extend_from_slice(b"*0\r\n");
        return Ok(());
    };
    let len = tail - head;
    // Redis' listTypeRange arithmetic.
    let mut start = if start < 0 { len + start } else { start };
    let mut stop = if stop < 0 { len + stop } else { stop };
    if start < 0 {
        start = 0;
    }
    if start > stop || start >= len {
        out.extend_from_slice(b"*0\r\n");
        return Ok(());
    }
    if stop >= len {
        stop = len - 1;
    }
    push_header(out, b'*', (stop - start + 1) as u64);
    for i in start..=stop {
        scratch.clear();
        if !store.get(keys.elem(head + i), scratch)? {
            return Err(Fail::Msg(CORRUPT));
        }
        push_bulk(out, scratch);
    }
    Ok(())
}
