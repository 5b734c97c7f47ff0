//! The memcached text protocol layer of the key-value service behind the scheduler.
//!
//! This module holds the pure parts of the memcached front end, mirroring the RESP module:
//!
//! * [`request_len`] cuts a connection's byte stream into requests (framing),
//! * [`classify`] maps a request to a scheduler type ([`TYPES`], [`TYPE_MEAN_US`]),
//! * [`execute_db`] runs one framed request against the in-memory [`Db`] (what `psp serve
//!   --protocol memcache|memcache-udp` runs by default) and appends the reply,
//! * [`execute`] runs one framed request against a byte [`Store`] (RocksDB) instead.
//!
//! It must not do I/O, spawn or block on threads (other than through the [`Store`] or
//! the [`Db`] locks it is given), or keep per-connection state: the TCP front end owns
//! sockets, buffers and connection lifetime, and closes a connection whose stream
//! [`request_len`] refuses.
//!
//! # Framing (both executors)
//!
//! * A command line is at most [`MAX_LINE`] bytes, but a get line (`get`, `gets`, `gat`,
//!   `gats`: as many keys as it holds) may be as long as a whole request. The front ends
//!   bound a whole request (line and data block): TCP at `--tcp-max-request` (65,535
//!   bytes by default and at most), UDP at one datagram (an 8-byte frame header and the
//!   request).
//! * What memcached answers and then reads on after is answered the same way, and the
//!   connection stays open: a line of the wrong shape (too few or too many tokens, `cas`
//!   without its unique) is `ERROR` and a data block after it is read as the next
//!   command; a key over [`MAX_KEY`] bytes or a bad field (flags, exptime, a negative or
//!   non-numeric `<bytes>`, the cas unique) is `CLIENT_ERROR bad command line format`,
//!   read the same way; a data block not followed by `\r\n` is `CLIENT_ERROR bad data
//!   chunk` after its `<bytes>` and two more are read. With `noreply` last on the line,
//!   a `CLIENT_ERROR` is not sent, as memcached's.
//! * What memcached cannot read on after closes the connection (a framing error): a line
//!   longer than its bound, and a `<bytes>` above the limit (memcached answers `SERVER_ERROR
//!   object too large for cache` and skips the block; this server answers the same and
//!   closes, since it does not read a request past its bound).
//!
//! # [`execute_db`]: memcached 1.6 over the in-memory database
//!
//! Items are the database's string values, with memcached's flags and deadline in the
//! entry, and the entry's version (bumped by every write) as the cas unique. Commands:
//! `get`/`gets <key>*`, `gat`/`gats <exptime> <key>*` (get and touch), `set`/`add`/
//! `replace`/`append`/`prepend`/`cas`, `delete <key> [0] [noreply]`, `incr`/`decr`
//! (64-bit unsigned: incr wraps, decr floors at 0), `touch <key> <exptime> [noreply]`,
//! `flush_all [delay] [noreply]`, `version`, `verbosity`, `stats`, and the meta
//! commands `mg`, `ms`, `md`, `ma`, `mn`, `me` (module `memcache_meta.rs`: their flags,
//! stale-while-revalidate, and those not kept). Anything else (`stats <group>`, `quit`,
//! ...) is answered `ERROR`.
//!
//! `exptime` is memcached's: 0 never expires, a negative one has already expired (the item
//! is not stored, and the one it replaces is gone), up to 30 days
//! ([`MAX_RELATIVE_EXPTIME`]) it is relative seconds, above that an absolute Unix time in
//! seconds (one not after now has already expired). Deadlines are kept in milliseconds.
//! A full database (over its memory bound, no eviction) refuses storage commands with
//! `SERVER_ERROR out of memory storing object` (a refused `set` also drops the key's old
//! item, as memcached does) and an `incr` with `SERVER_ERROR out of memory`.
//!
//! Deviations from memcached 1.6:
//!
//! * `flush_all <delay>` with a positive delay flushes at once, like `flush_all 0`.
//! * `verbosity` is answered `OK` and does nothing.
//! * `stats` answers a few lines (`pid`, `time`, `version`, `pointer_size`, `cmd_get`,
//!   `cmd_set`, `get_hits`, `get_misses` (counted as memcached counts them, per shard
//!   under its lock: `gat` is a touch, a refused `add` a set), `curr_items`, `bytes`,
//!   `limit_maxbytes` (0: unbounded), `evictions`, `expired`);
//!   `stats settings|items|slabs` answer what the store keeps (its bound and eviction;
//!   its items as one slab class, `items:1`); other groups (`stats reset`, `conns`,
//!   ...) are `ERROR`.
//! * `incr`/`decr` store the exact decimal result (memcached pads a shrinking number with
//!   spaces in place); trailing spaces in a stored number are accepted.
//! * A key holding a Redis type (not possible through memcached's commands alone) is a
//!   miss: `get` skips it, `add`/`set` replace it, the others answer `NOT_FOUND` or
//!   `NOT_STORED` and leave it.
//! * A multi-key `get` is not atomic across its keys (memcached's is not either); every
//!   other command is atomic on its key.
//!
//! With `noreply` a command appends nothing at all, its errors included, as memcached's
//! classic commands do; the front end must still count the request as answered.
//!
//! # [`execute`]: over a byte [`Store`] (RocksDB)
//!
//! `get`/`gets`, `set`/`add`/`replace`/`append`/`prepend`/`cas`, `delete`, `incr`/`decr`,
//! `version`, `verbosity`, `flush_all` (refused). Anything else (including `touch`, `gat`,
//! `stats` and the meta commands) is answered `ERROR`, like an unknown command.
//! Deviations from memcached 1.6, besides those of [`execute_db`] that apply:
//!
//! * `exptime` is parsed (a signed integer) and then ignored: items never expire.
//! * `flush_all` is answered `SERVER_ERROR flush_all not supported` and does nothing.
//! * `noreply` suppresses the normal replies (`STORED`, `DELETED`, numbers, `OK`, ...) but
//!   never `CLIENT_ERROR`/`SERVER_ERROR`. With `noreply`, [`execute`] may leave `out`
//!   empty; the front end must still count the request as answered.
//!
//! Each item is stored under its key as `flags` (big-endian `u32`) ++ `cas` (big-endian
//! `u64`) ++ data. The cas unique comes from a process-wide counter, so it changes on every
//! write of the item (set, add, replace, append, prepend, cas, incr, decr).

use std::fmt;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::Refusal;

#[path = "memcache_meta.rs"]
mod meta;
use crate::db::{Db, DbConfig, Entry, Eviction, MARK_FETCHED, Value};

/// Longest command line accepted, excluding its `\r\n` (or `\n`) terminator.
pub const MAX_LINE: usize = 2048;
/// Longest key accepted, in bytes.
pub const MAX_KEY: usize = 250;

/// Names of the scheduler request types returned by [`classify`].
pub const TYPES: [&str; 2] = ["get", "multiget"];
/// Expected mean service time of each type in [`TYPES`], in microseconds.
pub const TYPE_MEAN_US: [f64; 2] = [2.0, 20.0];

/// The reply to `version`.
pub const VERSION: &str = "psp-1.0";

/// Why a byte stream is not a sequence of memcached requests: what memcached itself
/// cannot resynchronise after either (it closes the connection).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McError {
    /// A command line other than a get longer than [`MAX_LINE`] bytes (or no newline
    /// within that many bytes), or a get line longer than the request bound.
    LineTooLong,
    /// A declared data block larger than the limit.
    TooLarge {
        /// The declared `<bytes>`.
        declared: u64,
        /// The limit it exceeds.
        max: usize,
    },
    /// [`execute`] was given something other than exactly one complete request.
    NotOneRequest,
}

impl fmt::Display for McError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            McError::LineTooLong => write!(f, "command line longer than {MAX_LINE} bytes"),
            McError::TooLarge { declared, max } => {
                write!(f, "data block of {declared} bytes exceeds {max}")
            }
            McError::NotOneRequest => write!(f, "not exactly one complete request"),
        }
    }
}

impl std::error::Error for McError {}

// ---------------------------------------------------------------------------------------
// Framing
// ---------------------------------------------------------------------------------------

/// memcached's reply to a line it cannot parse as its command (too few or too many
/// tokens, an unknown command).
const ERROR: &[u8] = b"ERROR\r\n";
/// memcached's reply to a bad key or field on a command it knows.
const FORMAT_ERROR: &[u8] = b"CLIENT_ERROR bad command line format\r\n";
/// memcached's reply to a data block not followed by `\r\n`.
const CHUNK_ERROR: &[u8] = b"CLIENT_ERROR bad data chunk\r\n";

/// One framed request.
struct Frame<'a> {
    /// The command line without its terminator.
    line: &'a [u8],
    /// The data block of a storage command, without its `\r\n`.
    data: &'a [u8],
    /// Total length of the request in the buffer.
    len: usize,
    /// The reply framing decided, when the request is one memcached answers with an
    /// error and goes on after (empty: the error is suppressed by `noreply`).
    error: Option<&'static [u8]>,
}

impl<'a> Frame<'a> {
    /// The line alone, answered `error` (or nothing, when the line ends in `noreply`
    /// and memcached would honour it), as memcached answers it before reading on.
    fn refused(line: &'a [u8], len: usize, error: &'static [u8], quiet: bool) -> Self {
        Frame {
            line,
            data: &[],
            len,
            error: Some(if quiet { b"" } else { error }),
        }
    }
}

/// Space-separated tokens of a command line (runs of spaces count as one separator).
fn tokens(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|&b| b == b' ').filter(|t| !t.is_empty())
}

/// The last of [`tokens`], read from the end (no pass over the line).
fn last_token(line: &[u8]) -> Option<&[u8]> {
    let end = line.iter().rposition(|&b| b != b' ')? + 1;
    let start = line[..end]
        .iter()
        .rposition(|&b| b == b' ')
        .map_or(0, |i| i + 1);
    Some(&line[start..end])
}

/// Whether memcached takes `key`: at most [`MAX_KEY`] bytes (its tokenizer splits on
/// spaces only, so any other byte may be in a key).
fn key_fits(key: &[u8]) -> bool {
    key.len() <= MAX_KEY
}

/// Parses a non-empty decimal `u64`, with an optional `+` (as `strtoull`).
fn parse_u64(t: &[u8]) -> Option<u64> {
    let t = t.strip_prefix(b"+").unwrap_or(t);
    if t.is_empty() {
        return None;
    }
    t.iter().try_fold(0u64, |acc, &b| {
        if b.is_ascii_digit() {
            acc.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

/// Parses an optionally signed decimal `i64`.
fn parse_i64(t: &[u8]) -> Option<i64> {
    match t.split_first() {
        Some((b'-', rest)) if !rest.starts_with(b"+") => parse_u64(rest)
            .and_then(|v| i64::try_from(v).ok())
            .map(|v| -v),
        _ => parse_u64(t).and_then(|v| i64::try_from(v).ok()),
    }
}

/// memcached's flags field: any 64-bit unsigned number, kept modulo 2^32 (memcached
/// 1.6 parses it with `strtoul` and stores 32 bits).
fn parse_flags(t: &[u8]) -> Option<u32> {
    parse_u64(t).map(|v| v as u32)
}

fn is_storage(cmd: &[u8]) -> bool {
    matches!(
        cmd,
        b"set" | b"add" | b"replace" | b"append" | b"prepend" | b"cas"
    )
}

/// Whether `buf` starts a get line (`get`, `gets`, `gat`, `gats`), whose line memcached
/// reads to its end however long.
fn starts_get(buf: &[u8]) -> bool {
    [&b"get "[..], b"gets ", b"gat ", b"gats "]
        .iter()
        .any(|c| buf.starts_with(c))
}

/// The request of `line` (ending at `line_end`) with its data block of
/// `declared` bytes and `\r\n`: incomplete, refused past `max`, or a block
/// not followed by `\r\n` (memcached reads the block and its two bytes,
/// refuses it, and reads on after them).
fn with_block<'a>(
    buf: &'a [u8],
    line: &'a [u8],
    line_end: usize,
    declared: u64,
    max: usize,
    quiet: bool,
) -> Result<Option<Frame<'a>>, McError> {
    let too_large = McError::TooLarge { declared, max };
    let bytes = match usize::try_from(declared) {
        Ok(b) if b <= max => b,
        _ => return Err(too_large),
    };
    let data_end = line_end.checked_add(bytes).ok_or(too_large.clone())?;
    let end = data_end.checked_add(2).ok_or(too_large)?;
    if buf.len() < end {
        return Ok(None);
    }
    if &buf[data_end..end] != b"\r\n" {
        return Ok(Some(Frame::refused(line, end, CHUNK_ERROR, quiet)));
    }
    Ok(Some(Frame {
        line,
        data: &buf[line_end..data_end],
        len: end,
        error: None,
    }))
}

fn frame(buf: &[u8], max: usize) -> Result<Option<Frame<'_>>, McError> {
    let limit = if starts_get(buf) {
        max.max(MAX_LINE)
    } else {
        MAX_LINE
    };
    let scan = &buf[..buf.len().min(limit.saturating_add(2))];
    let Some(nl) = memchr::memchr(b'\n', scan) else {
        return if scan.len() == limit.saturating_add(2) {
            Err(McError::LineTooLong)
        } else {
            Ok(None)
        };
    };
    let line = buf[..nl].strip_suffix(b"\r").unwrap_or(&buf[..nl]);
    if line.len() > limit {
        return Err(McError::LineTooLong);
    }
    let line_end = nl + 1;
    let quiet = last_token(line) == Some(b"noreply");
    let mut toks = tokens(line);
    let cmd = toks.next().unwrap_or_default();
    if matches!(cmd, b"get" | b"gets" | b"gat" | b"gats") {
        if cmd.starts_with(b"ga") {
            // gat/gats <exptime> <key>*: the exptime is checked by execution.
            toks.next();
        }
        if !toks.all(key_fits) {
            return Ok(Some(Frame::refused(line, line_end, FORMAT_ERROR, false)));
        }
    } else if is_storage(cmd) {
        // key flags exptime bytes [cas unique] [noreply]
        let mut args: [&[u8]; 6] = [&[]; 6];
        let mut n = 0;
        for t in toks {
            if n == args.len() {
                n += 1;
                break;
            }
            args[n] = t;
            n += 1;
        }
        let need = if cmd == b"cas" { 5 } else { 4 };
        if n != need && n != need + 1 {
            // Not the command's shape: memcached's ERROR, and the data block (if
            // any) is read as the next command.
            return Ok(Some(Frame::refused(line, line_end, ERROR, false)));
        }
        let bytes = parse_i64(args[3]);
        if !key_fits(args[0])
            || parse_flags(args[1]).is_none()
            || parse_i64(args[2]).is_none()
            || bytes.is_none_or(|b| b < 0)
            || (need == 5 && parse_u64(args[4]).is_none())
        {
            return Ok(Some(Frame::refused(line, line_end, FORMAT_ERROR, quiet)));
        }
        let declared = bytes.unwrap_or_default() as u64;
        return with_block(buf, line, line_end, declared, max, quiet);
    } else if cmd == b"ms" {
        // ms <key> <datalen> <flags>*: a bad key or length is refused with
        // the line alone (the block is read as the next command, as
        // memcached reads it).
        let (key, len) = (toks.next(), toks.next());
        let Some(key) = key else {
            return Ok(Some(Frame::refused(line, line_end, ERROR, false)));
        };
        let bytes = len.and_then(parse_u64);
        let Some(declared) = bytes.filter(|_| key_fits(key)) else {
            return Ok(Some(Frame::refused(line, line_end, FORMAT_ERROR, false)));
        };
        return with_block(buf, line, line_end, declared, max, false);
    } else if matches!(cmd, b"delete" | b"incr" | b"decr" | b"touch")
        && let Some(key) = toks.next()
        && !key_fits(key)
    {
        return Ok(Some(Frame::refused(line, line_end, FORMAT_ERROR, quiet)));
    }
    Ok(Some(Frame {
        line,
        data: &[],
        len: line_end,
        error: None,
    }))
}

/// Length of the first complete request in `buf`, or `None` if it is still incomplete.
///
/// A request is a command line ending in `\r\n` (a bare `\n` is accepted), followed for
/// storage commands (`set`, `add`, `replace`, `append`, `prepend`, `cas`) by a data block
/// of `<bytes>` bytes and `\r\n`. `max` is the largest data block accepted; a larger
/// declared `<bytes>` is refused as soon as the command line is complete, without waiting
/// for the block.
///
/// # Errors
///
/// A line longer than its bound (a get line: `max`; any other: [`MAX_LINE`]) or a
/// `<bytes>` above `max`. The stream cannot be resynchronised after an error. A request
/// that memcached answers with an error and reads on after (see the module's framing
/// rules) is a request: its execution answers the error.
///
/// Never panics, never allocates, and runs in time linear in the bytes it looks at.
pub fn request_len(buf: &[u8], max: usize) -> Result<Option<usize>, McError> {
    Ok(frame(buf, max)?.map(|f| f.len))
}

// ---------------------------------------------------------------------------------------
// Classification
// ---------------------------------------------------------------------------------------

/// The scheduler type of a request: an index into [`TYPES`].
///
/// A `get`/`gets`/`gat`/`gats` with more than one key is `multiget` (1); everything
/// else, including malformed requests, is `get` (0). Looks only at the command line;
/// never allocates.
pub fn classify(req: &[u8]) -> u16 {
    let head = &req[..req.len().min(MAX_LINE + 2)];
    let end = memchr::memchr2(b'\r', b'\n', head).unwrap_or(head.len());
    let mut toks = tokens(&head[..end]);
    match toks.next() {
        Some(b"get" | b"gets") if toks.nth(1).is_some() => 1,
        // gat/gats <exptime> <key>*
        Some(b"gat" | b"gats") if toks.nth(2).is_some() => 1,
        _ => 0,
    }
}

// ---------------------------------------------------------------------------------------
// Execution
// ---------------------------------------------------------------------------------------

use crate::store::Store;

/// Bytes of the stored header: flags (u32 BE) and cas (u64 BE).
const HEADER: usize = 12;

static NEXT_CAS: AtomicU64 = AtomicU64::new(1);

fn next_cas() -> u64 {
    NEXT_CAS.fetch_add(1, Ordering::Relaxed)
}

/// Splits a stored value into flags, cas and data.
fn decode(v: &[u8]) -> Option<(u32, u64, &[u8])> {
    let (flags, rest) = v.split_first_chunk::<4>()?;
    let (cas, data) = rest.split_first_chunk::<8>()?;
    Some((u32::from_be_bytes(*flags), u64::from_be_bytes(*cas), data))
}

fn encode(flags: u32, cas: u64, data: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&cas.to_be_bytes());
    out.extend_from_slice(data);
}

const CORRUPT: &str = "corrupt stored value";

/// Every command but the retrievals takes at most this many tokens after
/// its name (cas with noreply).
const MAX_TOKENS: usize = 7;

/// A command's arguments (the tokens after its name) in `held`; `None`
/// when there are more than [`MAX_TOKENS`] (memcached's `ERROR`).
fn command_args<'a, 'h>(
    toks: impl Iterator<Item = &'a [u8]>,
    held: &'h mut [&'a [u8]; MAX_TOKENS],
) -> Option<&'h [&'a [u8]]> {
    let mut n = 0;
    for t in toks {
        *held.get_mut(n)? = t;
        n += 1;
    }
    Some(&held[..n])
}

/// Executes one complete request against `store`, appending the memcached reply to `out`.
///
/// `scratch` is a reusable buffer for values read from or written to the store; its
/// contents on return are unspecified. Command errors become replies: `ERROR` for an
/// unknown command or a wrong argument count, `CLIENT_ERROR <reason>` for bad arguments,
/// `SERVER_ERROR <reason>` for store failures. With `noreply`, a successful command
/// appends nothing, but the front end must still count the request as answered.
/// Read-modify-write commands (and every write, so that `cas` is exact) run inside
/// [`Store::atomically`] for their key.
///
/// # Errors
///
/// Only if `req` is not exactly one framed request (see [`request_len`]), which is a bug
/// in the caller; `out` is then untouched.
pub fn execute<S: Store>(
    req: &[u8],
    store: &S,
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
) -> Result<(), McError> {
    let frame = match frame(req, usize::MAX)? {
        Some(f) if f.len == req.len() => f,
        _ => return Err(McError::NotOneRequest),
    };
    if let Some(error) = frame.error {
        out.extend_from_slice(error);
        return Ok(());
    }
    let mut toks = tokens(frame.line);
    let cmd = toks.next().unwrap_or_default();
    if cmd == b"get" || cmd == b"gets" {
        get(toks, cmd == b"gets", store, out, scratch);
        return Ok(());
    }
    let mut held = [&[][..]; MAX_TOKENS];
    let Some(args) = command_args(toks, &mut held) else {
        out.extend_from_slice(b"ERROR\r\n");
        return Ok(());
    };
    let n = args.len();
    if is_storage(cmd) {
        storage(cmd, args, frame.data, store, out, scratch);
        return Ok(());
    }
    match (cmd, n) {
        (b"delete", 1..=3) => delete(args, store, out),
        (b"incr" | b"decr", 2 | 3) => arith(cmd == b"incr", args, store, out, scratch),
        (b"version", 0) => {
            out.extend_from_slice(b"VERSION ");
            out.extend_from_slice(VERSION.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        (b"verbosity", 1 | 2) => {
            if parse_u64(args[0]).is_some_and(|v| v <= u64::from(u32::MAX)) {
                reply(out, noreply(args, 2), "OK");
            } else {
                out.extend_from_slice(b"CLIENT_ERROR bad command line format\r\n");
            }
        }
        (b"flush_all", 0..=2) => {
            out.extend_from_slice(b"SERVER_ERROR flush_all not supported\r\n");
        }
        _ => out.extend_from_slice(b"ERROR\r\n"),
    }
    Ok(())
}

/// Whether `args` has its optional last argument at index `at - 1` and it is `noreply`.
fn noreply(args: &[&[u8]], at: usize) -> bool {
    args.len() == at && args[at - 1] == b"noreply"
}

fn reply(out: &mut Vec<u8>, noreply: bool, msg: &str) {
    if !noreply {
        out.extend_from_slice(msg.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}

fn server_error(out: &mut Vec<u8>, msg: &str) {
    out.extend_from_slice(b"SERVER_ERROR ");
    out.extend(
        msg.bytes()
            .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

fn get<'a, S: Store>(
    keys: impl Iterator<Item = &'a [u8]>,
    with_cas: bool,
    store: &S,
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
) {
    let start = out.len();
    let mut any = false;
    for key in keys {
        any = true;
        scratch.clear();
        let found = match store.get(key, scratch) {
            Ok(f) => f,
            Err(e) => {
                out.truncate(start);
                return server_error(out, &e);
            }
        };
        if !found {
            continue;
        }
        let Some((flags, cas, data)) = decode(scratch) else {
            out.truncate(start);
            return server_error(out, CORRUPT);
        };
        out.extend_from_slice(b"VALUE ");
        out.extend_from_slice(key);
        let _ = write!(out, " {flags} {}", data.len());
        if with_cas {
            let _ = write!(out, " {cas}");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
    }
    if any {
        out.extend_from_slice(b"END\r\n");
    } else {
        out.extend_from_slice(b"ERROR\r\n");
    }
}

fn storage<S: Store>(
    cmd: &[u8],
    args: &[&[u8]],
    data: &[u8],
    store: &S,
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
) {
    // Framing has validated the line: key flags exptime bytes [cas] [noreply].
    let key = args[0];
    let Some(flags) = parse_flags(args[1]) else {
        return out.extend_from_slice(b"CLIENT_ERROR bad command line format\r\n");
    };
    let is_cas = cmd == b"cas";
    let expected = if is_cas { parse_u64(args[4]) } else { None };
    let quiet = noreply(args, if is_cas { 6 } else { 5 });
    let result = store.atomically(key, || -> Result<&'static str, String> {
        scratch.clear();
        let exists = store.get(key, scratch)?;
        let old = if exists {
            Some(decode(scratch).ok_or(CORRUPT)?)
        } else {
            None
        };
        let cas = next_cas();
        match (cmd, old) {
            (b"add", Some(_)) | (b"replace" | b"append" | b"prepend", None) => {
                return Ok("NOT_STORED");
            }
            (b"cas", None) => return Ok("NOT_FOUND"),
            (b"cas", Some((_, old_cas, _))) if Some(old_cas) != expected => {
                return Ok("EXISTS");
            }
            (b"append", Some(_)) => {
                scratch[4..HEADER].copy_from_slice(&cas.to_be_bytes());
                scratch.extend_from_slice(data);
            }
            (b"prepend", Some(_)) => {
                scratch[4..HEADER].copy_from_slice(&cas.to_be_bytes());
                scratch.splice(HEADER..HEADER, data.iter().copied());
            }
            _ => encode(flags, cas, data, scratch),
        }
        store.put(key, scratch)?;
        Ok("STORED")
    });
    match result {
        Ok(msg) => reply(out, quiet, msg),
        Err(e) => server_error(out, &e),
    }
}

fn delete<S: Store>(args: &[&[u8]], store: &S, out: &mut Vec<u8>) {
    // delete <key> [0] [noreply], as memcached 1.6 accepts it.
    let quiet = args.len() > 1 && args[args.len() - 1] == b"noreply";
    let valid = match args.len() {
        1 => true,
        2 => args[1] == b"0" || quiet,
        _ => args[1] == b"0" && quiet,
    };
    if !valid {
        return out.extend_from_slice(
            b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n",
        );
    }
    let key = args[0];
    match store.atomically(key, || store.delete(key)) {
        Ok(true) => reply(out, quiet, "DELETED"),
        Ok(false) => reply(out, quiet, "NOT_FOUND"),
        Err(e) => server_error(out, &e),
    }
}

enum Arith {
    Value(u64),
    NotFound,
    NonNumeric,
}

/// memcached's incr/decr of the stored number `data` (spaces around it
/// allowed, as `strtoull` skips leading ones and memcached pads a shrunk
/// number with trailing ones) by `delta`: incr wraps at 2^64, decr stops at
/// 0; `None` when `data` is not a number.
fn arith_step(incr: bool, data: &[u8], delta: u64) -> Option<u64> {
    let old = parse_u64(data.trim_ascii())?;
    Some(if incr {
        old.wrapping_add(delta)
    } else {
        old.saturating_sub(delta)
    })
}

fn arith<S: Store>(
    incr: bool,
    args: &[&[u8]],
    store: &S,
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
) {
    let key = args[0];
    let quiet = noreply(args, 3);
    let Some(delta) = parse_u64(args[1]) else {
        return out.extend_from_slice(b"CLIENT_ERROR invalid numeric delta argument\r\n");
    };
    let result = store.atomically(key, || -> Result<Arith, String> {
        scratch.clear();
        if !store.get(key, scratch)? {
            return Ok(Arith::NotFound);
        }
        let (flags, _, data) = decode(scratch).ok_or(CORRUPT)?;
        let Some(new) = arith_step(incr, data, delta) else {
            return Ok(Arith::NonNumeric);
        };
        encode(flags, next_cas(), &[], scratch);
        let _ = write!(scratch, "{new}");
        store.put(key, scratch)?;
        Ok(Arith::Value(new))
    });
    match result {
        Ok(Arith::Value(v)) => {
            if !quiet {
                let _ = write!(out, "{v}\r\n");
            }
        }
        Ok(Arith::NotFound) => reply(out, quiet, "NOT_FOUND"),
        Ok(Arith::NonNumeric) => out
            .extend_from_slice(b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"),
        Err(e) => server_error(out, &e),
    }
}

// ---------------------------------------------------------------------------------------
// Execution over the in-memory database
// ---------------------------------------------------------------------------------------

/// Largest exptime taken as relative seconds (30 days); a larger one is a Unix time.
pub const MAX_RELATIVE_EXPTIME: i64 = 60 * 60 * 24 * 30;

/// memcached's reply to a storage command that finds the database full.
const OOM_STORING: &str = "SERVER_ERROR out of memory storing object";
/// memcached's reply to an `incr` that finds the database full.
const OOM: &str = "SERVER_ERROR out of memory";
const BAD_FORMAT: &str = "CLIENT_ERROR bad command line format";
const BAD_EXPTIME: &str = "CLIENT_ERROR invalid exptime argument";
const BAD_DELTA: &str = "CLIENT_ERROR invalid numeric delta argument";
const NON_NUMERIC: &str = "CLIENT_ERROR cannot increment or decrement non-numeric value";
const DELETE_USAGE: &str = "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]";

/// memcached's `exptime` at `now_ms` as an entry's deadline: `Some(0)` never expires,
/// `Some(ms)` a Unix time in ms, `None` already expired (negative, or an absolute time
/// not after now).
fn deadline(exptime: i64, now_ms: u64) -> Option<u64> {
    match exptime {
        0 => Some(0),
        e if e < 0 => None,
        e if e <= MAX_RELATIVE_EXPTIME => Some(now_ms.saturating_add(e as u64 * 1000)),
        e => {
            let at = (e as u64).saturating_mul(1000);
            (at > now_ms).then_some(at)
        }
    }
}

/// The string of a live memcached item (a Redis type under the key is a miss).
fn item(e: &Entry) -> Option<&[u8]> {
    match &e.value {
        Value::Str(v) => Some(v),
        _ => None,
    }
}

/// `VALUE <key> <flags> <bytes>[ <cas>]\r\n<data>\r\n`.
fn value_line(out: &mut Vec<u8>, key: &[u8], flags: u32, data: &[u8], cas: Option<u64>) {
    out.extend_from_slice(b"VALUE ");
    out.extend_from_slice(key);
    let _ = write!(out, " {flags} {}", data.len());
    if let Some(cas) = cas {
        let _ = write!(out, " {cas}");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// Executes one complete request against the in-memory [`Db`], appending memcached
/// 1.6's reply to `out` (see the module doc for the commands and their deviations).
///
/// Items are [`Value::Str`] entries with memcached's client flags in [`Entry::flags`],
/// the deadline in [`Entry::expire_ms`] and [`Entry::version`] as the cas unique. A key
/// that holds another type (a Redis value) is a miss. Every command runs under one
/// guard on its key's shard, so its read-modify-write is atomic; a multi-key
/// `get`/`gat` takes its keys one at a time (memcached's is not atomic across keys
/// either). Command errors are replies (`ERROR`, `CLIENT_ERROR ...`, `SERVER_ERROR
/// ...`), and with `noreply` a command appends nothing at all, errors included (as
/// memcached 1.6); the front end must still count the request as answered.
///
/// # Errors
///
/// As [`execute`]: `req` is not exactly one framed request; `out` is then untouched.
pub fn execute_db(req: &[u8], db: &Db, out: &mut Vec<u8>) -> Result<(), McError> {
    let frame = match frame(req, usize::MAX)? {
        Some(f) if f.len == req.len() => f,
        _ => return Err(McError::NotOneRequest),
    };
    if let Some(error) = frame.error {
        out.extend_from_slice(error);
        return Ok(());
    }
    let mut toks = tokens(frame.line);
    let cmd = toks.next().unwrap_or_default();
    match cmd {
        b"get" | b"gets" => {
            db_get(db, None, toks, cmd == b"gets", out);
            return Ok(());
        }
        b"gat" | b"gats" => {
            // gat <exptime> <key>+: without a key it is no command (memcached's ERROR).
            let exptime = toks.next().unwrap_or_default();
            if tokens(frame.line).nth(2).is_none() {
                out.extend_from_slice(b"ERROR\r\n");
            } else if let Some(exptime) = parse_i64(exptime) {
                db_get(db, Some(exptime), toks, cmd == b"gats", out);
            } else {
                reply(out, false, BAD_EXPTIME);
            }
            return Ok(());
        }
        _ => {}
    }
    if matches!(cmd, b"mg" | b"ms" | b"md" | b"ma" | b"mn" | b"me") {
        meta::execute(cmd, frame.line, frame.data, db, out);
        return Ok(());
    }
    let mut held = [&[][..]; MAX_TOKENS];
    let Some(args) = command_args(toks, &mut held) else {
        out.extend_from_slice(b"ERROR\r\n");
        return Ok(());
    };
    let n = args.len();
    if is_storage(cmd) {
        db_storage(cmd, args, frame.data, db, out);
        return Ok(());
    }
    match (cmd, n) {
        (b"delete", 1..=3) => db_delete(args, db, out),
        (b"incr" | b"decr", 2 | 3) => db_arith(cmd == b"incr", args, db, out),
        (b"touch", 2 | 3) => db_touch(args, db, out),
        (b"flush_all", 0..=2) => {
            let quiet = args.last().is_some_and(|a| *a == b"noreply");
            let has_delay = n == 2 || (n == 1 && !quiet);
            if has_delay && parse_i64(args[0]).is_none() {
                reply(out, quiet, BAD_FORMAT);
            } else {
                // Any delay is taken as 0: everything goes now. memcached
                // spends a cas unique on it (the oldest one still valid).
                db.flush();
                db.next_version();
                reply(out, quiet, "OK");
            }
        }
        (b"version", 0) => {
            out.extend_from_slice(b"VERSION ");
            out.extend_from_slice(VERSION.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        (b"verbosity", 1 | 2) => {
            let quiet = noreply(args, 2);
            if parse_u64(args[0]).is_some_and(|v| v <= u64::from(u32::MAX)) {
                reply(out, quiet, "OK");
            } else {
                reply(out, quiet, BAD_FORMAT);
            }
        }
        (b"stats", 0) => db_stats(db, out),
        (b"stats", 1) if matches!(args[0], b"settings" | b"items" | b"slabs") => {
            db_stats_group(args[0], db, out)
        }

        _ => out.extend_from_slice(b"ERROR\r\n"),
    }
    Ok(())
}

/// `get`/`gets` (`touch`: `None`) or `gat`/`gats` (`touch`: the exptime).
fn db_get<'a>(
    db: &Db,
    touch: Option<i64>,
    keys: impl Iterator<Item = &'a [u8]>,
    with_cas: bool,
    out: &mut Vec<u8>,
) {
    let mut any = false;
    for key in keys {
        any = true;
        let Ok(mut g) = db.lock_one(key, false) else {
            continue; // lock_one(_, false) never refuses
        };
        match touch {
            None => {
                let mut hit = false;
                if let Some(e) = g.get_mut(key)
                    && let Some(data) = item(e)
                {
                    value_line(out, key, e.flags, data, with_cas.then_some(e.version));
                    e.mark(MARK_FETCHED, true);
                    hit = true;
                }
                g.count_read(key, hit);
            }
            Some(exptime) => {
                let dl = deadline(exptime, g.now_ms);
                // A touch to memcached (`cmd_touch`), not a get.
                g.update(key, |slot| {
                    let Some(e) = slot.as_mut() else {
                        return (false, ());
                    };
                    let Some(data) = item(e) else {
                        return (false, ());
                    };
                    value_line(out, key, e.flags, data, with_cas.then_some(e.version));
                    e.mark(MARK_FETCHED, true);
                    // A touch keeps the cas unique (changed: false), as memcached's.
                    match dl {
                        Some(at) => e.expire_ms = at,
                        None => *slot = None,
                    }
                    (false, ())
                });
            }
        }
    }
    if any {
        out.extend_from_slice(b"END\r\n");
    } else {
        out.extend_from_slice(b"ERROR\r\n");
    }
}

fn db_storage(cmd: &[u8], args: &[&[u8]], data: &[u8], db: &Db, out: &mut Vec<u8>) {
    // Framing has validated the line: key flags exptime bytes [cas] [noreply].
    let key = args[0];
    let is_cas = cmd == b"cas";
    let quiet = noreply(args, if is_cas { 6 } else { 5 });
    let flags = parse_flags(args[1]);
    let exptime = parse_i64(args[2]);
    let expected = if is_cas { parse_u64(args[4]) } else { Some(0) };
    let (Some(flags), Some(exptime), Some(expected)) = (flags, exptime, expected) else {
        return reply(out, quiet, BAD_FORMAT);
    };
    let mut g = match db.lock_one(key, true) {
        Ok(mut g) => {
            g.count_write(key);
            g
        }
        // Full (a memcached database runs no script, so never Busy).
        Err(_) => {
            // memcached drops the old item of a set it cannot store, so that a stale
            // value does not outlive the failed write.
            if cmd == b"set"
                && let Ok(mut g) = db.lock_one(key, false)
            {
                g.update(key, |slot| {
                    let stale = slot.as_ref().is_some_and(|e| item(e).is_some());
                    if stale {
                        *slot = None;
                    }
                    (stale, ())
                });
            }
            return reply(out, quiet, OOM_STORING);
        }
    };
    let dl = deadline(exptime, g.now_ms);
    let msg = g.update(key, |slot| {
        let old = slot.as_mut().filter(|e| item(e).is_some());
        match (cmd, old) {
            (b"add", Some(_)) | (b"replace" | b"append" | b"prepend", None) => {
                (false, "NOT_STORED")
            }
            (b"cas", None) => (false, "NOT_FOUND"),
            (b"cas", Some(e)) if e.version != expected => (false, "EXISTS"),
            // append/prepend keep the item's flags and deadline, as memcached's.
            (b"append" | b"prepend", Some(e)) => {
                if let Value::Str(v) = &mut e.value {
                    let joined = if cmd == b"append" {
                        [&v[..], data].concat()
                    } else {
                        [data, &v[..]].concat()
                    };
                    *v = joined.into_boxed_slice();
                }
                (true, "STORED")
            }
            _ => {
                // An item that is already expired is not stored, and the old one
                // it replaces is gone (memcached stores it dead).
                *slot = dl.map(|expire_ms| Entry {
                    value: Value::Str(data.into()),
                    expire_ms,
                    version: 0,
                    flags,
                    lru: 0,
                });
                (true, "STORED")
            }
        }
    });
    reply(out, quiet, msg);
}

fn db_delete(args: &[&[u8]], db: &Db, out: &mut Vec<u8>) {
    // delete <key> [0] [noreply], as memcached 1.6 accepts it.
    let quiet = args.len() > 1 && args[args.len() - 1] == b"noreply";
    let valid = match args.len() {
        1 => true,
        2 => args[1] == b"0" || quiet,
        _ => args[1] == b"0" && quiet,
    };
    if !valid {
        return reply(out, quiet, DELETE_USAGE);
    }
    let key = args[0];
    let Ok(mut g) = db.lock_one(key, false) else {
        return;
    };
    let deleted = g.update(key, |slot| {
        let was = slot.as_ref().is_some_and(|e| item(e).is_some());
        if was {
            *slot = None;
        }
        (was, was)
    });
    reply(out, quiet, if deleted { "DELETED" } else { "NOT_FOUND" });
}

fn db_arith(incr: bool, args: &[&[u8]], db: &Db, out: &mut Vec<u8>) {
    let key = args[0];
    let quiet = noreply(args, 3);
    let Some(delta) = parse_u64(args[1]) else {
        return reply(out, quiet, BAD_DELTA);
    };
    // An incr may lengthen the number; a decr never does.
    let Ok(mut g) = db.lock_one(key, incr) else {
        return reply(out, quiet, OOM);
    };
    let result = g.update(key, |slot| {
        let Some(e) = slot.as_mut() else {
            return (false, Arith::NotFound);
        };
        let Value::Str(v) = &mut e.value else {
            return (false, Arith::NotFound);
        };
        let Some(new) = arith_step(incr, v, delta) else {
            return (false, Arith::NonNumeric);
        };
        *v = new.to_string().into_bytes().into_boxed_slice();
        (true, Arith::Value(new))
    });
    match result {
        Arith::Value(v) => {
            if !quiet {
                let _ = write!(out, "{v}\r\n");
            }
        }
        Arith::NotFound => reply(out, quiet, "NOT_FOUND"),
        Arith::NonNumeric => reply(out, quiet, NON_NUMERIC),
    }
}

fn db_touch(args: &[&[u8]], db: &Db, out: &mut Vec<u8>) {
    // touch <key> <exptime> [noreply]
    let key = args[0];
    let quiet = noreply(args, 3);
    let Some(exptime) = parse_i64(args[1]) else {
        return reply(out, quiet, BAD_EXPTIME);
    };
    let Ok(mut g) = db.lock_one(key, false) else {
        return;
    };
    let dl = deadline(exptime, g.now_ms);
    let touched = g.update(key, |slot| {
        let Some(e) = slot.as_mut().filter(|e| item(e).is_some()) else {
            return (false, false);
        };
        match dl {
            Some(at) => e.expire_ms = at,
            None => *slot = None,
        }
        // The cas unique stays (changed: false), as memcached's.
        (false, true)
    });
    reply(out, quiet, if touched { "TOUCHED" } else { "NOT_FOUND" });
}

fn db_stats(db: &Db, out: &mut Vec<u8>) {
    let s = db.stats();
    let (hits, misses, sets) = db.read_write_counts();
    let _ = write!(
        out,
        "STAT pid {}\r\nSTAT time {}\r\nSTAT version {VERSION}\r\nSTAT pointer_size {}\r\n\
         STAT cmd_get {}\r\nSTAT cmd_set {}\r\nSTAT get_hits {}\r\nSTAT get_misses {}\r\n\
         STAT curr_items {}\r\nSTAT bytes {}\r\nSTAT limit_maxbytes {}\r\n\
         STAT evictions {}\r\nSTAT expired {}\r\nEND\r\n",
        std::process::id(),
        db.now_ms() / 1000,
        usize::BITS,
        hits + misses,
        sets,
        hits,
        misses,
        s.keys,
        s.used,
        db.config().max_memory,
        s.evicted,
        s.expired,
    );
}

/// `stats settings|items|slabs`, the groups monitoring exporters read, in
/// memcached's line form, with what this store keeps: its memory bound and
/// eviction, and its items as one slab class (it has no slabs: `items:1`
/// holds every item, and `slabs` the bytes in use). A figure the store does
/// not keep (ports, threads, LRU segments, hit counts) is left out rather
/// than made up.
fn db_stats_group(group: &[u8], db: &Db, out: &mut Vec<u8>) {
    let s = db.stats();
    let cfg = db.config();
    match group {
        b"settings" => {
            let _ = write!(
                out,
                "STAT maxbytes {}\r\nSTAT evictions {}\r\nSTAT cas_enabled yes\r\n\
                 STAT flush_enabled yes\r\nSTAT verbosity 0\r\n",
                cfg.max_memory,
                if cfg.eviction == Eviction::AllKeysLru {
                    "on"
                } else {
                    "off"
                },
            );
        }
        b"items" if s.keys > 0 => {
            let _ = write!(
                out,
                "STAT items:1:number {}\r\nSTAT items:1:mem_requested {}\r\n\
                 STAT items:1:evicted {}\r\nSTAT items:1:reclaimed {}\r\n",
                s.keys, s.used, s.evicted, s.expired,
            );
        }
        b"slabs" => {
            let _ = write!(
                out,
                "STAT active_slabs {}\r\nSTAT total_malloced {}\r\n",
                usize::from(s.keys > 0),
                s.used,
            );
        }
        _ => {}
    }
    out.extend_from_slice(b"END\r\n");
}

// ---------------------------------------------------------------------------------------
// The registry's entry
// ---------------------------------------------------------------------------------------

/// memcached's text protocol as the registry holds it: framing by
/// [`request_len`], types by [`classify`], refusals as memcached's error
/// lines, its commands over the in-memory store ([`execute_db`], bounded
/// and evicting the least recently used, as memcached) or any [`Store`]
/// ([`execute`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Memcache;

/// The in-memory store's bound when none is given: memcached's `-m 64`.
pub const DEFAULT_MAX_MEMORY: usize = 64 << 20;

impl crate::Protocol for Memcache {
    fn types(&self) -> &'static [&'static str] {
        &TYPES
    }

    fn type_mean_us(&self) -> &'static [f64] {
        &TYPE_MEAN_US
    }

    fn request_len(&self, buf: &[u8], max: usize) -> Result<Option<usize>, Refusal> {
        request_len(buf, max).map_err(|e| match e {
            McError::TooLarge { .. } => Refusal::TooLarge,
            _ => Refusal::Malformed,
        })
    }

    fn classify(&self, req: &[u8], _state: &mut u32) -> u16 {
        classify(req)
    }

    fn refusal(&self, refusal: Refusal, out: &mut Vec<u8>) {
        out.extend_from_slice(match refusal {
            Refusal::Overloaded => b"SERVER_ERROR busy, request refused\r\n".as_slice(),
            Refusal::TooLarge => b"SERVER_ERROR object too large for cache\r\n",
            Refusal::Malformed => b"CLIENT_ERROR bad command line format\r\n",
            Refusal::UnknownType => b"ERROR\r\n",
            Refusal::BadBody => b"CLIENT_ERROR bad request\r\n",
            Refusal::HandlerError => b"SERVER_ERROR internal error\r\n",
            Refusal::MaxClients => b"SERVER_ERROR max number of clients reached\r\n",
        });
    }

    fn service_name(&self) -> &'static str {
        "memcache"
    }

    fn commands_about(&self) -> &'static str {
        "memcached commands"
    }

    fn db_config(
        &self,
        max_memory: Option<usize>,
        eviction: Option<Eviction>,
    ) -> Result<DbConfig, &'static str> {
        if eviction.is_some() {
            return Err(
                "--maxmemory-policy is Redis's: memcached's protocols always evict the least recently used",
            );
        }
        Ok(DbConfig {
            max_memory: max_memory.unwrap_or(DEFAULT_MAX_MEMORY),
            eviction: Eviction::AllKeysLru,
        })
    }

    fn eviction_about(&self, _: Eviction) -> &'static str {
        "evicting the least recently used"
    }

    fn execute_db(
        &self,
        req: &[u8],
        db: &Db,
        _sessions: &crate::commands::Sessions,
        _session: u64,
        out: &mut Vec<u8>,
        _preempt: &mut dyn FnMut(),
    ) -> Result<(), &'static str> {
        execute_db(req, db, out).map_err(|_| NOT_A_COMMAND)
    }

    fn execute_store(
        &self,
        req: &[u8],
        store: &dyn crate::KvStore,
        out: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
    ) -> Result<(), &'static str> {
        execute(req, &crate::DynStore(store), out, scratch).map_err(|_| NOT_A_COMMAND)
    }
}

/// Why a worker's request is no command (the front end framed it: a bug).
const NOT_A_COMMAND: &str = "not a memcached command";

// ---------------------------------------------------------------------------------------
// Test double
// ---------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemStore;
    use proptest::prelude::*;

    const MAX: usize = 1 << 20;

    proptest! {
        #[test]
        fn the_last_token_read_from_the_end_is_the_tokenizers_last(
            line in proptest::collection::vec(prop_oneof![Just(b' '), Just(b'a'), Just(b'z')], 0..24)
        ) {
            prop_assert_eq!(last_token(&line), tokens(&line).last());
        }
    }

    fn run(store: &impl Store, req: &[u8]) -> String {
        assert_eq!(
            request_len(req, MAX),
            Ok(Some(req.len())),
            "{:?}",
            String::from_utf8_lossy(req)
        );
        let mut out = Vec::new();
        let mut scratch = Vec::new();
        execute(req, store, &mut out, &mut scratch).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Runs `(request, expected reply)` steps in order against one store.
    fn transcript(store: &impl Store, steps: &[(&str, &str)]) {
        for (req, want) in steps {
            assert_eq!(run(store, req.as_bytes()), *want, "request {req:?}");
        }
    }

    /// Returns the cas unique of the single `VALUE` line of a `gets` reply.
    fn gets_cas(store: &MemStore, key: &str) -> u64 {
        let reply = run(store, format!("gets {key}\r\n").as_bytes());
        let line = reply.split("\r\n").next().unwrap();
        let fields: Vec<&str> = line.split(' ').collect();
        assert_eq!(fields.len(), 5, "{reply:?}");
        assert_eq!(fields[0], "VALUE");
        assert_eq!(fields[1], key);
        fields[4].parse().unwrap()
    }

    // --- framing ------------------------------------------------------------------------

    const VALID: &[&str] = &[
        "get k\r\n",
        "gets k\r\n",
        "get a b c\r\n",
        "set k 0 0 3\r\nabc\r\n",
        "set k 42 -1 0\r\n\r\n",
        "set k 0 0 3 noreply\r\nabc\r\n",
        "cas k 0 0 3 17\r\nabc\r\n",
        "append k 0 0 1\r\nx\r\n",
        "delete k\r\n",
        "delete k noreply\r\n",
        "incr k 1\r\n",
        "decr k 1 noreply\r\n",
        "get k\n",
        "set k 0 0 1\nx\r\n",
        "version\r\n",
        "\r\n",
        "bogus command\r\n",
    ];

    #[test]
    fn every_prefix_is_incomplete() {
        for req in VALID {
            let req = req.as_bytes();
            for cut in 0..req.len() {
                assert_eq!(
                    request_len(&req[..cut], MAX),
                    Ok(None),
                    "{:?} cut at {cut}",
                    String::from_utf8_lossy(req)
                );
            }
            assert_eq!(request_len(req, MAX), Ok(Some(req.len())));
        }
    }

    #[test]
    fn pipelined_requests_have_exact_lengths() {
        let stream: Vec<u8> = VALID.concat().into_bytes();
        let mut at = 0;
        for req in VALID {
            assert_eq!(
                request_len(&stream[at..], MAX),
                Ok(Some(req.len())),
                "{req:?}"
            );
            at += req.len();
        }
        assert_eq!(at, stream.len());
        assert_eq!(request_len(&stream[at..], MAX), Ok(None));
    }

    #[test]
    fn data_block_is_framed_by_byte_count() {
        let req = b"set k 0 0 7\r\n\r\nget\r\n\r\nget k\r\n";
        assert_eq!(request_len(req, MAX), Ok(Some(22)));
        assert_eq!(request_len(&req[22..], MAX), Ok(Some(7)));
        let store = MemStore::new();
        assert_eq!(run(&store, &req[..22]), "STORED\r\n");
        assert_eq!(
            run(&store, &req[22..]),
            "VALUE k 0 7\r\n\r\nget\r\n\r\nEND\r\n"
        );
    }

    #[test]
    fn huge_block_is_refused_from_the_line_alone() {
        // Only the command line is present: the refusal must not wait for the block.
        assert_eq!(
            request_len(b"set k 0 0 1048577\r\n", MAX),
            Err(McError::TooLarge {
                declared: 1_048_577,
                max: MAX
            })
        );
        assert_eq!(
            request_len(b"set k 0 0 9223372036854775807\r\n", MAX),
            Err(McError::TooLarge {
                declared: i64::MAX as u64,
                max: MAX
            })
        );
        // Past a signed 64-bit number: memcached's CLIENT_ERROR, line alone.
        for req in [
            &b"set k 0 0 18446744073709551615\r\n"[..],
            b"set k 0 0 99999999999999999999\r\n",
        ] {
            assert_eq!(request_len(req, MAX), Ok(Some(req.len())));
        }
        // At the limit it is just incomplete.
        assert_eq!(request_len(b"set k 0 0 1048576\r\n", MAX), Ok(None));
        // usize::MAX as the limit must not overflow the end computation.
        assert_eq!(
            request_len(b"set k 0 0 9223372036854775807\r\n", usize::MAX),
            Ok(None)
        );
    }

    /// What memcached 1.6 answers and then reads on after (each reply checked
    /// side by side with memcached 1.6): the request is the line alone (or
    /// the line and its block), answered with memcached's error, and the
    /// stream stays in step.
    #[test]
    fn errors_memcached_reads_on_after_are_requests_answered_in_step() {
        let k250 = "k".repeat(250);
        let k251 = "k".repeat(251);
        assert_eq!(
            request_len(format!("get {k250}\r\n").as_bytes(), MAX),
            Ok(Some(256))
        );
        let format = "CLIENT_ERROR bad command line format\r\n";
        let db = Db::new(DbConfig::default());
        // (request, its length in the stream (0: its line), the reply)
        let cases: Vec<(String, usize, &str)> = vec![
            (format!("get {k251}\r\n"), 0, format),
            (format!("get a {k251}\r\n"), 0, format),
            (format!("gat 0 {k251}\r\n"), 0, format),
            (format!("delete {k251}\r\n"), 0, format),
            (format!("incr {k251} 1\r\n"), 0, format),
            (format!("touch {k251} 1\r\n"), 0, format),
            (format!("touch {k251} 1 noreply\r\n"), 0, ""),
            // A storage line's errors leave its block to be read as a command.
            (format!("set {k251} 0 0 1\r\nx\r\n"), 0, format),
            ("set k x 0 1\r\nx\r\n".into(), 0, format),
            ("set k -1 0 1\r\nx\r\n".into(), 0, format),
            ("set k 18446744073709551616 0 1\r\n".into(), 0, format),
            ("set k 0 x 1\r\n".into(), 0, format),
            ("set k 0 0 1x\r\n".into(), 0, format),
            ("set k 0 0 -1\r\n".into(), 0, format),
            ("set k 0 0 -1 noreply\r\n".into(), 0, ""),
            ("cas k 0 0 1 x\r\n".into(), 0, format),
            ("set k 0 0\r\n".into(), 0, "ERROR\r\n"),
            ("set\r\n".into(), 0, "ERROR\r\n"),
            ("set k 0 0 1 noreply extra\r\nx\r\n".into(), 0, "ERROR\r\n"),
            ("set k 0 0 1 2 3 4\r\n".into(), 0, "ERROR\r\n"),
            ("cas k 0 0 1\r\nx\r\n".into(), 0, "ERROR\r\n"),
            // A block not followed by its \r\n: read with two more bytes.
            (
                "set k 0 0 1\r\nxyz\r\n".into(),
                16,
                "CLIENT_ERROR bad data chunk\r\n",
            ),
            (
                "set k 0 0 1\r\nx\nz".into(),
                16,
                "CLIENT_ERROR bad data chunk\r\n",
            ),
            ("set k 0 0 1 noreply\r\nxyz".into(), 24, ""),
        ];
        for (req, len, reply) in &cases {
            let len = match *len {
                0 => req.find('\n').expect("a line") + 1,
                n => n,
            };
            let got = request_len(req.as_bytes(), MAX);
            assert_eq!(got, Ok(Some(len)), "{req:?}");
            assert_eq!(run_db(&db, &req.as_bytes()[..len]), *reply, "{req:?}");
        }
        assert!(db.is_empty(), "no error stored anything");
        // A block not complete yet waits, even when its end will be wrong.
        assert_eq!(request_len(b"set k 0 0 1\r\nxy", MAX), Ok(None));
        // Flags are kept modulo 2^32, as memcached's; a `+` is a sign.
        db_transcript(
            &db,
            &[
                ("set f 4294967296 0 1\r\nx\r\n", "STORED\r\n"),
                ("get f\r\n", "VALUE f 0 1\r\nx\r\nEND\r\n"),
                ("set f 18446744073709551615 0 +1\r\ny\r\n", "STORED\r\n"),
                ("get f\r\n", "VALUE f 4294967295 1\r\ny\r\nEND\r\n"),
                // strtoull skips leading spaces: " 5" is a number.
                ("set n 0 0 2\r\n 5\r\n", "STORED\r\n"),
                ("incr n 100\r\n", "105\r\n"),
            ],
        );
        // Any byte but a space or a line end is a key byte, as in memcached
        // (memcaslap's keys start with 0x10 bytes).
        for req in [
            &b"get a\tb\r\n"[..],
            b"get a\x7f\r\n",
            b"get \x10\x10key\r\n",
            b"get a\rb\r\n",
        ] {
            assert_eq!(request_len(req, MAX), Ok(Some(req.len())), "{req:?}");
        }
        // A get line is as long as a request may be: pymemcache's get_many of
        // 100 keys of 20 bytes is one 2.1 kB line.
        let many = format!(
            "get{}\r\n",
            (0..100).map(|i| format!(" key{i:017}")).collect::<String>()
        );
        assert!(many.len() > MAX_LINE);
        assert_eq!(request_len(many.as_bytes(), MAX), Ok(Some(many.len())));
        assert_eq!(run_db(&db, many.as_bytes()), "END\r\n");
        let gat = format!("gat 0{}\r\n", " k".repeat(5_000));
        assert_eq!(request_len(gat.as_bytes(), MAX), Ok(Some(gat.len())));
        // ... up to the request bound.
        assert_eq!(
            request_len(format!("gets{}\r\n", " k".repeat(1_500)).as_bytes(), 1_000),
            Err(McError::LineTooLong)
        );
    }

    #[test]
    fn line_length_limit() {
        let long = vec![b'a'; 3000];
        assert_eq!(request_len(&long, MAX), Err(McError::LineTooLong));
        // Detected as soon as MAX_LINE + 2 bytes hold no newline.
        assert_eq!(
            request_len(&long[..MAX_LINE + 2], MAX),
            Err(McError::LineTooLong)
        );
        assert_eq!(request_len(&long[..MAX_LINE + 1], MAX), Ok(None));
        let mut ok = vec![b'a'; MAX_LINE];
        ok.extend_from_slice(b"\r\n");
        assert_eq!(request_len(&ok, MAX), Ok(Some(MAX_LINE + 2)));
        let mut bad = vec![b'a'; MAX_LINE + 1];
        bad.extend_from_slice(b"\r\n");
        assert_eq!(request_len(&bad, MAX), Err(McError::LineTooLong));
        let mut bad = vec![b'a'; MAX_LINE + 1];
        bad.push(b'\n');
        assert_eq!(request_len(&bad, MAX), Err(McError::LineTooLong));
    }

    // --- classification -----------------------------------------------------------------

    #[test]
    fn classification() {
        assert_eq!(TYPES.len(), TYPE_MEAN_US.len());
        assert_eq!(classify(b"get k\r\n"), 0);
        assert_eq!(classify(b"gets k\r\n"), 0);
        assert_eq!(classify(b"get a b\r\n"), 1);
        assert_eq!(classify(b"gets a b c\n"), 1);
        assert_eq!(classify(b"get  k \r\n"), 0);
        assert_eq!(classify(b"set k 0 0 3\r\nabc\r\n"), 0);
        assert_eq!(classify(b"delete k\r\n"), 0);
        assert_eq!(classify(b"getx a b\r\n"), 0);
        assert_eq!(classify(b"gat 10 k\r\n"), 0);
        assert_eq!(classify(b"gats 10 a b\r\n"), 1);
        assert_eq!(classify(b"gat 10\r\n"), 0);
        assert_eq!(classify(b""), 0);
    }

    // --- execution ----------------------------------------------------------------------

    #[test]
    fn set_get_round_trip_with_flags() {
        transcript(
            &MemStore::new(),
            &[
                ("set foo 5 0 3\r\nbar\r\n", "STORED\r\n"),
                ("get foo\r\n", "VALUE foo 5 3\r\nbar\r\nEND\r\n"),
                ("set foo 4294967295 100 0\r\n\r\n", "STORED\r\n"),
                ("get foo\r\n", "VALUE foo 4294967295 0\r\n\r\nEND\r\n"),
                ("get missing\r\n", "END\r\n"),
            ],
        );
    }

    #[test]
    fn multi_get_skips_missing_keys() {
        transcript(
            &MemStore::new(),
            &[
                ("set a 1 0 2\r\naa\r\n", "STORED\r\n"),
                ("set c 3 0 1\r\nc\r\n", "STORED\r\n"),
                (
                    "get a b c\r\n",
                    "VALUE a 1 2\r\naa\r\nVALUE c 3 1\r\nc\r\nEND\r\n",
                ),
                ("get b b\r\n", "END\r\n"),
            ],
        );
    }

    #[test]
    fn add_replace_append_prepend() {
        transcript(
            &MemStore::new(),
            &[
                ("replace k 0 0 1\r\nx\r\n", "NOT_STORED\r\n"),
                ("get k\r\n", "END\r\n"),
                ("add k 7 0 2\r\nbc\r\n", "STORED\r\n"),
                ("add k 0 0 1\r\nx\r\n", "NOT_STORED\r\n"),
                ("get k\r\n", "VALUE k 7 2\r\nbc\r\nEND\r\n"),
                ("append k 9 0 1\r\nd\r\n", "STORED\r\n"),
                ("prepend k 9 0 1\r\na\r\n", "STORED\r\n"),
                ("get k\r\n", "VALUE k 7 4\r\nabcd\r\nEND\r\n"),
                ("replace k 2 0 1\r\nz\r\n", "STORED\r\n"),
                ("get k\r\n", "VALUE k 2 1\r\nz\r\nEND\r\n"),
                ("append nope 0 0 1\r\nx\r\n", "NOT_STORED\r\n"),
                ("prepend nope 0 0 1\r\nx\r\n", "NOT_STORED\r\n"),
            ],
        );
    }

    #[test]
    fn delete_forms() {
        transcript(
            &MemStore::new(),
            &[
                ("delete k\r\n", "NOT_FOUND\r\n"),
                ("set k 0 0 1\r\nx\r\n", "STORED\r\n"),
                ("delete k\r\n", "DELETED\r\n"),
                ("get k\r\n", "END\r\n"),
                ("set k 0 0 1\r\nx\r\n", "STORED\r\n"),
                ("delete k 0\r\n", "DELETED\r\n"),
                (
                    "delete k 5\r\n",
                    "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n",
                ),
                (
                    "delete k 5 noreply\r\n",
                    "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n",
                ),
                ("delete k 0 noreply\r\n", ""),
            ],
        );
    }

    /// incr/decr as both executors answer them.
    const INCR_DECR: &[(&str, &str)] = &[
        ("incr n 1\r\n", "NOT_FOUND\r\n"),
        ("decr n 1\r\n", "NOT_FOUND\r\n"),
        ("set n 3 0 2\r\n10\r\n", "STORED\r\n"),
        ("incr n 5\r\n", "15\r\n"),
        ("get n\r\n", "VALUE n 3 2\r\n15\r\nEND\r\n"),
        ("decr n 4\r\n", "11\r\n"),
        ("decr n 100\r\n", "0\r\n"),
        ("get n\r\n", "VALUE n 3 1\r\n0\r\nEND\r\n"),
        ("set n 0 0 20\r\n18446744073709551615\r\n", "STORED\r\n"),
        ("incr n 1\r\n", "0\r\n"),
        ("set n 0 0 20\r\n18446744073709551614\r\n", "STORED\r\n"),
        ("incr n 3\r\n", "1\r\n"),
        ("incr n 18446744073709551615\r\n", "0\r\n"),
        ("set n 0 0 3\r\n12 \r\n", "STORED\r\n"),
        ("incr n 1\r\n", "13\r\n"),
        (
            "incr n abc\r\n",
            "CLIENT_ERROR invalid numeric delta argument\r\n",
        ),
        (
            "incr n -1\r\n",
            "CLIENT_ERROR invalid numeric delta argument\r\n",
        ),
        (
            "incr n 18446744073709551616\r\n",
            "CLIENT_ERROR invalid numeric delta argument\r\n",
        ),
        ("set s 0 0 3\r\nabc\r\n", "STORED\r\n"),
        (
            "incr s 1\r\n",
            "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
        ),
        (
            "decr s 1\r\n",
            "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
        ),
        ("set e 0 0 0\r\n\r\n", "STORED\r\n"),
        (
            "incr e 1\r\n",
            "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
        ),
        ("set big 0 0 20\r\n18446744073709551616\r\n", "STORED\r\n"),
        (
            "incr big 1\r\n",
            "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
        ),
    ];

    #[test]
    fn incr_decr() {
        transcript(&MemStore::new(), INCR_DECR);
    }

    #[test]
    fn noreply_suppresses_normal_replies_only() {
        let store = MemStore::new();
        transcript(
            &store,
            &[
                ("set k 0 0 1 noreply\r\n1\r\n", ""),
                ("add k 0 0 1 noreply\r\nx\r\n", ""),
                ("replace q 0 0 1 noreply\r\nx\r\n", ""),
                ("append k 0 0 1 noreply\r\n0\r\n", ""),
                ("incr k 5 noreply\r\n", ""),
                ("decr k 1 noreply\r\n", ""),
                ("get k\r\n", "VALUE k 0 2\r\n14\r\nEND\r\n"),
                ("incr q 1 noreply\r\n", ""),
                ("verbosity 1 noreply\r\n", ""),
                ("delete k noreply\r\n", ""),
                ("delete k noreply\r\n", ""),
                ("get k q\r\n", "END\r\n"),
                ("set s 0 0 1 noreply\r\nx\r\n", ""),
                (
                    "incr s 1 noreply\r\n",
                    "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
                ),
            ],
        );
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn gets_cas_changes_on_every_write() {
        let store = MemStore::new();
        transcript(&store, &[("set k 6 0 2\r\nhi\r\n", "STORED\r\n")]);
        let c1 = gets_cas(&store, "k");
        assert_eq!(
            run(&store, b"gets k\r\n"),
            format!("VALUE k 6 2 {c1}\r\nhi\r\nEND\r\n")
        );
        assert_eq!(gets_cas(&store, "k"), c1, "reads keep the cas");
        transcript(&store, &[("set k 6 0 2\r\nho\r\n", "STORED\r\n")]);
        let c2 = gets_cas(&store, "k");
        assert_ne!(c1, c2);
        transcript(
            &store,
            &[
                (&format!("cas k 1 0 1 {c1}\r\nx\r\n"), "EXISTS\r\n"),
                (&format!("cas k 1 0 1 {c2}\r\nx\r\n"), "STORED\r\n"),
                (&format!("cas k 1 0 1 {c2}\r\ny\r\n"), "EXISTS\r\n"),
                ("get k\r\n", "VALUE k 1 1\r\nx\r\nEND\r\n"),
                ("cas nope 0 0 1 1\r\nx\r\n", "NOT_FOUND\r\n"),
                (&format!("cas k 1 0 1 {c2} noreply\r\nz\r\n"), ""),
            ],
        );
        let c3 = gets_cas(&store, "k");
        assert!(c3 != c2 && c3 != c1);
        transcript(
            &store,
            &[(
                "incr k 0\r\n",
                "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
            )],
        );
        transcript(&store, &[("set k 0 0 1\r\n1\r\n", "STORED\r\n")]);
        let c4 = gets_cas(&store, "k");
        transcript(&store, &[("incr k 0\r\n", "1\r\n")]);
        assert_ne!(gets_cas(&store, "k"), c4, "incr bumps the cas");
        // Multi-key gets: one cas per found key.
        transcript(&store, &[("set j 0 0 1\r\nj\r\n", "STORED\r\n")]);
        let reply = run(&store, b"gets j missing k\r\n");
        let lines: Vec<&str> = reply.split("\r\n").collect();
        assert!(lines[0].starts_with("VALUE j 0 1 "), "{reply:?}");
        assert_eq!(lines[1], "j");
        assert!(lines[2].starts_with("VALUE k 0 1 "), "{reply:?}");
        assert_eq!(&lines[3..], ["1", "END", ""]);
    }

    #[test]
    fn unknown_commands_and_wrong_argument_counts() {
        transcript(
            &MemStore::new(),
            &[
                ("foo\r\n", "ERROR\r\n"),
                ("foo bar baz\r\n", "ERROR\r\n"),
                ("\r\n", "ERROR\r\n"),
                ("GET k\r\n", "ERROR\r\n"),
                ("touch k 10\r\n", "ERROR\r\n"),
                ("get\r\n", "ERROR\r\n"),
                ("gets\r\n", "ERROR\r\n"),
                ("delete\r\n", "ERROR\r\n"),
                ("delete a 0 noreply x\r\n", "ERROR\r\n"),
                ("incr k\r\n", "ERROR\r\n"),
                ("decr k 1 noreply x\r\n", "ERROR\r\n"),
                ("incr a b c d e f g h\r\n", "ERROR\r\n"),
                ("version\r\n", "VERSION psp-1.0\r\n"),
                ("version x\r\n", "ERROR\r\n"),
                ("verbosity\r\n", "ERROR\r\n"),
                ("verbosity 1\r\n", "OK\r\n"),
                (
                    "verbosity x\r\n",
                    "CLIENT_ERROR bad command line format\r\n",
                ),
                ("verbosity 1 2 3\r\n", "ERROR\r\n"),
                ("flush_all\r\n", "SERVER_ERROR flush_all not supported\r\n"),
                (
                    "flush_all 0 noreply\r\n",
                    "SERVER_ERROR flush_all not supported\r\n",
                ),
                ("flush_all 0 1 2\r\n", "ERROR\r\n"),
            ],
        );
    }

    struct FailStore;

    impl Store for FailStore {
        fn get(&self, _: &[u8], _: &mut Vec<u8>) -> Result<bool, String> {
            Err("disk on\r\nfire".into())
        }
        fn put(&self, _: &[u8], _: &[u8]) -> Result<(), String> {
            Err("read only".into())
        }
        fn delete(&self, _: &[u8]) -> Result<bool, String> {
            Err("read only".into())
        }
        fn atomically<R>(&self, _: &[u8], f: impl FnOnce() -> R) -> R {
            f()
        }
        fn atomically_all<R>(&self, _: &[&[u8]], f: impl FnOnce() -> R) -> R {
            f()
        }
    }

    #[test]
    fn store_errors_are_server_errors() {
        transcript(
            &FailStore,
            &[
                ("get a b\r\n", "SERVER_ERROR disk on  fire\r\n"),
                ("set k 0 0 1\r\nx\r\n", "SERVER_ERROR disk on  fire\r\n"),
                ("delete k\r\n", "SERVER_ERROR read only\r\n"),
                ("delete k noreply\r\n", "SERVER_ERROR read only\r\n"),
                ("incr k 1\r\n", "SERVER_ERROR disk on  fire\r\n"),
            ],
        );
        // A corrupt record (shorter than the header) is reported, not a panic.
        let store = MemStore::new();
        store.put(b"bad", b"short").unwrap();
        transcript(
            &store,
            &[
                ("get bad\r\n", "SERVER_ERROR corrupt stored value\r\n"),
                ("incr bad 1\r\n", "SERVER_ERROR corrupt stored value\r\n"),
                (
                    "append bad 0 0 1\r\nx\r\n",
                    "SERVER_ERROR corrupt stored value\r\n",
                ),
            ],
        );
    }

    #[test]
    fn execute_rejects_anything_but_one_request() {
        let store = MemStore::new();
        let mut out = b"kept".to_vec();
        let mut scratch = Vec::new();
        for req in [
            &b"get k\r\nget k\r\n"[..],
            b"get k",
            b"set k 0 0 3\r\nab",
            b"",
        ] {
            assert_eq!(
                execute(req, &store, &mut out, &mut scratch),
                Err(McError::NotOneRequest)
            );
        }
        assert_eq!(out, b"kept");
        assert!(store.is_empty());
    }

    #[test]
    fn concurrent_incr_is_atomic() {
        let store = MemStore::new();
        transcript(&store, &[("set c 0 0 1\r\n0\r\n", "STORED\r\n")]);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let mut out = Vec::new();
                    let mut scratch = Vec::new();
                    for _ in 0..1000 {
                        out.clear();
                        execute(b"incr c 1\r\n", &store, &mut out, &mut scratch).unwrap();
                        assert!(out.ends_with(b"\r\n"));
                    }
                });
            }
        });
        assert_eq!(run(&store, b"get c\r\n"), "VALUE c 0 4\r\n4000\r\nEND\r\n");
    }

    // --- execute_db ---------------------------------------------------------------------

    use crate::db::{DbConfig, Eviction};

    fn run_db(db: &Db, req: &[u8]) -> String {
        assert_eq!(
            request_len(req, MAX),
            Ok(Some(req.len())),
            "{:?}",
            String::from_utf8_lossy(req)
        );
        let mut out = Vec::new();
        execute_db(req, db, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Runs `(request, expected reply)` steps in order against one database.
    fn db_transcript(db: &Db, steps: &[(&str, &str)]) {
        for (req, want) in steps {
            assert_eq!(run_db(db, req.as_bytes()), *want, "request {req:?}");
        }
    }

    /// The cas unique of the single `VALUE` line of a `gets` reply.
    fn db_gets_cas(db: &Db, key: &str) -> u64 {
        let reply = run_db(db, format!("gets {key}\r\n").as_bytes());
        let line = reply.split("\r\n").next().unwrap();
        let fields: Vec<&str> = line.split(' ').collect();
        assert_eq!(fields.len(), 5, "{reply:?}");
        assert_eq!((fields[0], fields[1]), ("VALUE", key));
        fields[4].parse().unwrap()
    }

    /// The deadline (Unix ms) of `key`'s live entry.
    fn expire_ms(db: &Db, key: &[u8]) -> Option<u64> {
        let mut g = db.lock_one(key, false).unwrap();
        g.get(key).map(|e| e.expire_ms)
    }

    #[test]
    fn db_set_get_with_flags_and_multi_get() {
        let db = Db::default();
        db_transcript(
            &db,
            &[
                ("get foo\r\n", "END\r\n"),
                ("set foo 5 0 3\r\nbar\r\n", "STORED\r\n"),
                ("get foo\r\n", "VALUE foo 5 3\r\nbar\r\nEND\r\n"),
                ("set foo 4294967295 0 0\r\n\r\n", "STORED\r\n"),
                ("get foo\r\n", "VALUE foo 4294967295 0\r\n\r\nEND\r\n"),
                ("set a 1 0 2\r\naa\r\n", "STORED\r\n"),
                ("set c 3 0 1\r\nc\r\n", "STORED\r\n"),
                (
                    "get a b c\r\n",
                    "VALUE a 1 2\r\naa\r\nVALUE c 3 1\r\nc\r\nEND\r\n",
                ),
                ("get b b\r\n", "END\r\n"),
                ("get\r\n", "ERROR\r\n"),
                ("gets\r\n", "ERROR\r\n"),
                ("set bin 0 0 7\r\n\r\nget\r\n\r\n", "STORED\r\n"),
                ("get bin\r\n", "VALUE bin 0 7\r\n\r\nget\r\n\r\nEND\r\n"),
            ],
        );
        assert_eq!(db.len(), 4);
        // gets prints each found key's cas unique, the entry's version.
        let ca = db_gets_cas(&db, "a");
        let cc = db_gets_cas(&db, "c");
        assert_ne!(ca, cc);
        assert_eq!(
            run_db(&db, b"gets a nope c\r\n"),
            format!("VALUE a 1 2 {ca}\r\naa\r\nVALUE c 3 1 {cc}\r\nc\r\nEND\r\n")
        );
        assert_eq!(db.lock_one(b"a", false).unwrap().version(b"a"), ca);
    }

    #[test]
    fn db_get_of_100_keys() {
        let db = Db::default();
        let keys: Vec<String> = (0..100).map(|i| format!("key:{i:04}")).collect();
        for (i, k) in keys.iter().enumerate() {
            if i % 10 != 3 {
                let req = format!("set {k} {i} 0 {}\r\n{k}\r\n", k.len());
                assert_eq!(run_db(&db, req.as_bytes()), "STORED\r\n");
            }
        }
        let req = format!("get {}\r\n", keys.join(" "));
        assert!(req.len() <= MAX_LINE);
        assert_eq!(classify(req.as_bytes()), 1);
        let want: String = keys
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 10 != 3)
            .map(|(i, k)| format!("VALUE {k} {i} {}\r\n{k}\r\n", k.len()))
            .chain(["END\r\n".to_string()])
            .collect();
        assert_eq!(run_db(&db, req.as_bytes()), want);
        let gets = run_db(&db, format!("gets {}\r\n", keys.join(" ")).as_bytes());
        assert_eq!(gets.matches("VALUE ").count(), 90);
    }

    #[test]
    fn db_add_replace_append_prepend() {
        let db = Db::default();
        db_transcript(
            &db,
            &[
                ("replace k 0 0 1\r\nx\r\n", "NOT_STORED\r\n"),
                ("append k 0 0 1\r\nx\r\n", "NOT_STORED\r\n"),
                ("prepend k 0 0 1\r\nx\r\n", "NOT_STORED\r\n"),
                ("get k\r\n", "END\r\n"),
                ("add k 7 0 2\r\nbc\r\n", "STORED\r\n"),
                ("add k 0 0 1\r\nx\r\n", "NOT_STORED\r\n"),
                ("get k\r\n", "VALUE k 7 2\r\nbc\r\nEND\r\n"),
                // append/prepend keep the item's flags.
                ("append k 9 0 1\r\nd\r\n", "STORED\r\n"),
                ("prepend k 9 0 1\r\na\r\n", "STORED\r\n"),
                ("get k\r\n", "VALUE k 7 4\r\nabcd\r\nEND\r\n"),
                ("replace k 2 0 1\r\nz\r\n", "STORED\r\n"),
                ("get k\r\n", "VALUE k 2 1\r\nz\r\nEND\r\n"),
            ],
        );
        assert_eq!(db.len(), 1);
        // Every write bumps the cas unique; append/prepend keep the deadline.
        db_transcript(&db, &[("set t 0 1000 1\r\nb\r\n", "STORED\r\n")]);
        let (c1, d1) = (db_gets_cas(&db, "t"), expire_ms(&db, b"t").unwrap());
        assert_ne!(d1, 0);
        db_transcript(&db, &[("append t 0 0 1\r\nc\r\n", "STORED\r\n")]);
        let c2 = db_gets_cas(&db, "t");
        assert_ne!(c1, c2);
        assert_eq!(expire_ms(&db, b"t"), Some(d1));
        db_transcript(&db, &[("prepend t 0 -1 1\r\na\r\n", "STORED\r\n")]);
        assert_ne!(db_gets_cas(&db, "t"), c2);
        assert_eq!(expire_ms(&db, b"t"), Some(d1));
        db_transcript(&db, &[("get t\r\n", "VALUE t 0 3\r\nabc\r\nEND\r\n")]);
    }

    #[test]
    fn db_cas_stores_exists_not_found() {
        let db = Db::default();
        db_transcript(
            &db,
            &[
                ("cas k 0 0 1 1\r\nx\r\n", "NOT_FOUND\r\n"),
                ("set k 6 0 2\r\nhi\r\n", "STORED\r\n"),
            ],
        );
        let c1 = db_gets_cas(&db, "k");
        assert_eq!(db_gets_cas(&db, "k"), c1, "reads keep the cas");
        db_transcript(&db, &[("set k 6 0 2\r\nho\r\n", "STORED\r\n")]);
        let c2 = db_gets_cas(&db, "k");
        assert_ne!(c1, c2);
        db_transcript(
            &db,
            &[
                (&format!("cas k 1 0 1 {c1}\r\nx\r\n"), "EXISTS\r\n"),
                (&format!("cas k 1 0 1 {c2}\r\nx\r\n"), "STORED\r\n"),
                (&format!("cas k 1 0 1 {c2}\r\ny\r\n"), "EXISTS\r\n"),
                ("get k\r\n", "VALUE k 1 1\r\nx\r\nEND\r\n"),
                ("cas nope 0 0 1 1\r\nx\r\n", "NOT_FOUND\r\n"),
            ],
        );
        let c3 = db_gets_cas(&db, "k");
        db_transcript(
            &db,
            &[
                (&format!("cas k 3 0 1 {c3} noreply\r\nz\r\n"), ""),
                (&format!("cas k 3 0 1 {c3} noreply\r\nw\r\n"), ""),
                ("get k\r\n", "VALUE k 3 1\r\nz\r\nEND\r\n"),
            ],
        );
        // A cas with an expired exptime stores nothing and removes the item.
        let c4 = db_gets_cas(&db, "k");
        db_transcript(
            &db,
            &[
                (&format!("cas k 0 -1 1 {c4}\r\nq\r\n"), "STORED\r\n"),
                ("get k\r\n", "END\r\n"),
            ],
        );
        assert!(db.is_empty());
    }

    #[test]
    fn db_delete_forms() {
        let db = Db::default();
        db_transcript(
            &db,
            &[
                ("delete k\r\n", "NOT_FOUND\r\n"),
                ("set k 0 0 1\r\nx\r\n", "STORED\r\n"),
                ("delete k\r\n", "DELETED\r\n"),
                ("get k\r\n", "END\r\n"),
                ("set k 0 0 1\r\nx\r\n", "STORED\r\n"),
                ("delete k 0\r\n", "DELETED\r\n"),
                (
                    "delete k 5\r\n",
                    "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n",
                ),
                ("set k 0 0 1\r\nx\r\n", "STORED\r\n"),
                ("delete k 0 noreply\r\n", ""),
                ("delete k noreply\r\n", ""),
                ("delete\r\n", "ERROR\r\n"),
                ("delete a 0 noreply x\r\n", "ERROR\r\n"),
            ],
        );
        assert!(db.is_empty());
    }

    #[test]
    fn db_incr_decr() {
        let db = Db::default();
        db_transcript(&db, INCR_DECR);
        db_transcript(
            &db,
            &[
                ("incr k\r\n", "ERROR\r\n"),
                ("decr k 1 noreply x\r\n", "ERROR\r\n"),
            ],
        );
        // incr bumps the cas and keeps flags and deadline.
        db_transcript(&db, &[("set c 9 1000 1\r\n1\r\n", "STORED\r\n")]);
        let (c, d) = (db_gets_cas(&db, "c"), expire_ms(&db, b"c"));
        db_transcript(
            &db,
            &[
                ("incr c 0\r\n", "1\r\n"),
                ("get c\r\n", "VALUE c 9 1\r\n1\r\nEND\r\n"),
            ],
        );
        assert_ne!(db_gets_cas(&db, "c"), c);
        assert_eq!(expire_ms(&db, b"c"), d);
    }

    #[test]
    fn db_exptime_relative_absolute_negative() {
        let db = Db::default();
        let now = db.now_ms();
        db_transcript(
            &db,
            &[
                ("set rel 0 100 1\r\nr\r\n", "STORED\r\n"),
                ("set month 0 2592000 1\r\nm\r\n", "STORED\r\n"),
                ("set abs 0 4102444800 1\r\na\r\n", "STORED\r\n"),
                ("set never 0 0 1\r\nn\r\n", "STORED\r\n"),
            ],
        );
        let after = db.now_ms();
        let rel = expire_ms(&db, b"rel").unwrap();
        assert!((now + 100_000..=after + 100_000).contains(&rel), "{rel}");
        let month = expire_ms(&db, b"month").unwrap();
        assert!((now + 2_592_000_000..=after + 2_592_000_000).contains(&month));
        assert_eq!(expire_ms(&db, b"abs"), Some(4_102_444_800_000));
        assert_eq!(expire_ms(&db, b"never"), Some(0));
        assert_eq!(db.len(), 4);
        // Absolute times in the past (2,592,001 s is in 1970) and negative ones have
        // already expired: nothing is stored, and an old item under the key is gone.
        db_transcript(
            &db,
            &[
                ("set past 0 1000000000 1\r\np\r\n", "STORED\r\n"),
                ("get past\r\n", "END\r\n"),
                ("set past 0 2592001 1\r\np\r\n", "STORED\r\n"),
                ("add past 0 -1 1\r\np\r\n", "STORED\r\n"),
                ("get past\r\n", "END\r\n"),
                ("set never 0 -1 1\r\nx\r\n", "STORED\r\n"),
                ("get never\r\n", "END\r\n"),
                ("replace rel 0 2592001 1\r\nx\r\n", "STORED\r\n"),
                ("get rel\r\n", "END\r\n"),
            ],
        );
        assert_eq!(db.len(), 2);
        // An entry whose deadline passes is a miss (and removed) on the next read.
        {
            let mut g = db.lock_one(b"abs", false).unwrap();
            g.update(b"abs", |slot| {
                slot.as_mut().unwrap().expire_ms = 1;
                (false, ())
            });
        }
        db_transcript(
            &db,
            &[
                ("get abs\r\n", "END\r\n"),
                ("incr abs 1\r\n", "NOT_FOUND\r\n"),
            ],
        );
        assert_eq!(db.len(), 1);
        assert_eq!(db.stats().expired, 1);
        // exptime 1 is one second from now, not a time in 1970.
        db_transcript(&db, &[("set one 0 1 1\r\n1\r\n", "STORED\r\n")]);
        let one = expire_ms(&db, b"one").unwrap();
        assert!(one >= now + 1000 && one <= db.now_ms() + 1000, "{one}");
    }

    #[test]
    fn db_touch_and_gat() {
        let db = Db::default();
        db_transcript(
            &db,
            &[
                ("touch k 10\r\n", "NOT_FOUND\r\n"),
                ("set k 4 0 2\r\nhi\r\n", "STORED\r\n"),
            ],
        );
        let cas = db_gets_cas(&db, "k");
        let now = db.now_ms();
        db_transcript(&db, &[("touch k 10\r\n", "TOUCHED\r\n")]);
        let d = expire_ms(&db, b"k").unwrap();
        assert!((now + 10_000..now + 20_000).contains(&d), "{d}");
        assert_eq!(db_gets_cas(&db, "k"), cas, "touch keeps the cas");
        db_transcript(
            &db,
            &[
                ("touch k 0\r\n", "TOUCHED\r\n"),
                ("touch k 4102444800 noreply\r\n", ""),
                ("touch k x\r\n", "CLIENT_ERROR invalid exptime argument\r\n"),
                ("touch k x noreply\r\n", ""),
                ("touch k\r\n", "ERROR\r\n"),
                ("touch k 1 noreply x\r\n", "ERROR\r\n"),
            ],
        );
        assert_eq!(expire_ms(&db, b"k"), Some(4_102_444_800_000));
        // gat/gats: the values, with the new deadline; gats prints the (kept) cas.
        db_transcript(
            &db,
            &[
                ("set j 1 0 1\r\nj\r\n", "STORED\r\n"),
                (
                    "gat 0 k nope j\r\n",
                    "VALUE k 4 2\r\nhi\r\nVALUE j 1 1\r\nj\r\nEND\r\n",
                ),
                ("gat 100 nope\r\n", "END\r\n"),
                (
                    "gats 100 k\r\n",
                    &format!("VALUE k 4 2 {cas}\r\nhi\r\nEND\r\n"),
                ),
                ("gat 100\r\n", "ERROR\r\n"),
                ("gat\r\n", "ERROR\r\n"),
                ("gat x k\r\n", "CLIENT_ERROR invalid exptime argument\r\n"),
                ("gats x\r\n", "ERROR\r\n"),
            ],
        );
        assert_eq!(expire_ms(&db, b"j"), Some(0));
        let d = expire_ms(&db, b"k").unwrap();
        assert!((now + 100_000..now + 200_000).contains(&d), "{d}");
        // A past exptime: touch and gat expire the item (gat still shows it once).
        db_transcript(
            &db,
            &[
                ("gat -1 k\r\n", "VALUE k 4 2\r\nhi\r\nEND\r\n"),
                ("get k\r\n", "END\r\n"),
                ("touch j 1000000000\r\n", "TOUCHED\r\n"),
                ("get j\r\n", "END\r\n"),
                ("touch j 10\r\n", "NOT_FOUND\r\n"),
            ],
        );
        assert!(db.is_empty());
    }

    #[test]
    fn db_noreply_suppresses_every_reply() {
        let db = Db::default();
        db_transcript(
            &db,
            &[
                ("set k 0 0 1 noreply\r\n1\r\n", ""),
                ("add k 0 0 1 noreply\r\nx\r\n", ""),
                ("replace q 0 0 1 noreply\r\nx\r\n", ""),
                ("append k 0 0 1 noreply\r\n0\r\n", ""),
                ("prepend k 0 0 1 noreply\r\n0\r\n", ""),
                ("incr k 5 noreply\r\n", ""),
                ("decr k 1 noreply\r\n", ""),
                ("get k\r\n", "VALUE k 0 2\r\n14\r\nEND\r\n"),
                ("incr q 1 noreply\r\n", ""),
                ("incr k x noreply\r\n", ""),
                ("touch k 100 noreply\r\n", ""),
                ("touch q 100 noreply\r\n", ""),
                ("verbosity 1 noreply\r\n", ""),
                ("verbosity x noreply\r\n", ""),
                ("cas q 0 0 1 1 noreply\r\nx\r\n", ""),
                ("set s 0 0 1 noreply\r\nx\r\n", ""),
                ("incr s 1 noreply\r\n", ""),
                ("delete s 5 noreply\r\n", ""),
                ("delete k noreply\r\n", ""),
                ("delete k noreply\r\n", ""),
                ("get k q\r\n", "END\r\n"),
                ("flush_all noreply\r\n", ""),
                ("flush_all 0 noreply\r\n", ""),
                ("flush_all x noreply\r\n", ""),
            ],
        );
        assert!(db.is_empty());
    }

    #[test]
    fn db_flush_version_verbosity_stats_unknown() {
        let db = Db::default();
        for i in 0..10 {
            let req = format!("set k{i} 0 0 1\r\nx\r\n");
            assert_eq!(run_db(&db, req.as_bytes()), "STORED\r\n");
        }
        let stats = run_db(&db, b"stats\r\n");
        assert!(stats.starts_with("STAT pid "), "{stats}");
        assert!(stats.ends_with("\r\nEND\r\n"), "{stats}");
        assert!(stats.contains("\r\nSTAT version psp-1.0\r\n"), "{stats}");
        assert!(stats.contains("\r\nSTAT curr_items 10\r\n"), "{stats}");
        let bytes = format!("\r\nSTAT bytes {}\r\n", db.used());
        assert!(stats.contains(&bytes), "{stats}");
        assert!(stats.contains("\r\nSTAT limit_maxbytes 0\r\n"), "{stats}");
        assert!(stats.contains("\r\nSTAT evictions 0\r\n"), "{stats}");
        assert!(stats.contains("\r\nSTAT expired 0\r\n"), "{stats}");
        for line in stats.split("\r\n").filter(|l| !l.is_empty() && *l != "END") {
            assert_eq!(line.split(' ').count(), 3, "{line:?}");
        }
        db_transcript(
            &db,
            &[
                ("flush_all\r\n", "OK\r\n"),
                ("get k0 k9\r\n", "END\r\n"),
                ("set k 0 0 1\r\nx\r\n", "STORED\r\n"),
                ("flush_all 0\r\n", "OK\r\n"),
                ("set k 0 0 1\r\nx\r\n", "STORED\r\n"),
                // A positive delay flushes at once.
                ("flush_all 60\r\n", "OK\r\n"),
                ("get k\r\n", "END\r\n"),
                (
                    "flush_all x\r\n",
                    "CLIENT_ERROR bad command line format\r\n",
                ),
                ("flush_all 0 1 2\r\n", "ERROR\r\n"),
                ("version\r\n", "VERSION psp-1.0\r\n"),
                ("version x\r\n", "ERROR\r\n"),
                ("verbosity\r\n", "ERROR\r\n"),
                ("verbosity 1\r\n", "OK\r\n"),
                (
                    "verbosity x\r\n",
                    "CLIENT_ERROR bad command line format\r\n",
                ),
                ("verbosity 1 2 3\r\n", "ERROR\r\n"),
                ("stats items\r\n", "END\r\n"),
                ("stats reset\r\n", "ERROR\r\n"),
                ("foo\r\n", "ERROR\r\n"),
                ("foo bar baz\r\n", "ERROR\r\n"),
                ("\r\n", "ERROR\r\n"),
                ("GET k\r\n", "ERROR\r\n"),
                ("me k\r\n", "EN\r\n"),
                ("mg k v\r\n", "EN\r\n"),
                ("incr a b c d e f g h\r\n", "ERROR\r\n"),
            ],
        );
        assert!(db.is_empty());
        assert!(run_db(&db, b"stats\r\n").contains("\r\nSTAT curr_items 0\r\n"));
    }

    #[test]
    fn stats_count_reads_hits_misses_and_storage_commands_as_memcached() {
        let db = Db::default();
        for req in [
            "set a 0 0 1\r\nx\r\n",
            "add a 0 0 1\r\ny\r\n",
            "get a\r\n",
            "get a b c\r\n",
            "gat 100 a\r\n",
            "mg a v\r\n",
            "mg b v\r\n",
            "ms c 1\r\nz\r\n",
        ] {
            run_db(&db, req.as_bytes());
        }
        let stats = run_db(&db, b"stats\r\n");
        // As memcached 1.6.18 counts the same requests: 6 keys read (a: 3
        // hits; b twice and c once: misses; gat is a touch, not a get), 3
        // storage commands (the refused add counts).
        for line in [
            "STAT cmd_get 6\r\n",
            "STAT cmd_set 3\r\n",
            "STAT get_hits 3\r\n",
            "STAT get_misses 3\r\n",
        ] {
            assert!(stats.contains(line), "{line:?} in {stats}");
        }
    }

    #[test]
    fn stats_groups_give_what_the_store_keeps_in_memcached_form() {
        let db = Db::new(DbConfig {
            max_memory: 1 << 20,
            eviction: Eviction::AllKeysLru,
        });
        let settings = run_db(&db, b"stats settings\r\n");
        assert!(
            settings.starts_with("STAT maxbytes 1048576\r\nSTAT evictions on\r\n")
                && settings.ends_with("END\r\n"),
            "{settings}"
        );
        run_db(&db, b"set k 0 0 1\r\nv\r\n");
        let items = run_db(&db, b"stats items\r\n");
        assert!(items.starts_with("STAT items:1:number 1\r\n"), "{items}");
        let slabs = run_db(&db, b"stats slabs\r\n");
        assert!(
            slabs.starts_with("STAT active_slabs 1\r\nSTAT total_malloced "),
            "{slabs}"
        );
    }

    #[test]
    fn db_full_is_server_error() {
        let db = Db::new(DbConfig {
            max_memory: 1000,
            eviction: Eviction::NoEviction,
        });
        let big = "x".repeat(1000);
        db_transcript(
            &db,
            &[
                ("set n 0 0 1\r\n5\r\n", "STORED\r\n"),
                ("set old 0 0 1\r\no\r\n", "STORED\r\n"),
                ("set a 0 0 1\r\na\r\n", "STORED\r\n"),
                (&format!("set big 0 0 1000\r\n{big}\r\n"), "STORED\r\n"),
            ],
        );
        assert!(db.used() > 1000);
        let oom = "SERVER_ERROR out of memory storing object\r\n";
        db_transcript(
            &db,
            &[
                ("set k 0 0 1\r\nx\r\n", oom),
                ("add k 0 0 1\r\nx\r\n", oom),
                ("append a 0 0 1\r\nx\r\n", oom),
                ("cas a 0 0 1 1\r\nx\r\n", oom),
                ("set k 0 0 1 noreply\r\nx\r\n", ""),
                // A refused set drops the old item, as memcached's.
                ("set old 0 0 1\r\nx\r\n", oom),
                ("get old\r\n", "END\r\n"),
                ("incr n 1\r\n", "SERVER_ERROR out of memory\r\n"),
                // What does not grow the data still runs.
                ("decr n 1\r\n", "4\r\n"),
                (
                    "get a n\r\n",
                    "VALUE a 0 1\r\na\r\nVALUE n 0 1\r\n4\r\nEND\r\n",
                ),
                ("touch a 100\r\n", "TOUCHED\r\n"),
                ("gat 0 a\r\n", "VALUE a 0 1\r\na\r\nEND\r\n"),
                ("delete big\r\n", "DELETED\r\n"),
                ("set k 0 0 1\r\nx\r\n", "STORED\r\n"),
                ("incr n 1\r\n", "5\r\n"),
            ],
        );
    }

    #[test]
    fn db_redis_values_are_misses() {
        let db = Db::default();
        let mut list = crate::db::List::default();
        list.push(b"x", true);
        db.lock_one(b"l", true)
            .unwrap()
            .set(b"l", Entry::new(Value::List(std::sync::Arc::new(list))));
        db_transcript(
            &db,
            &[
                ("get l\r\n", "END\r\n"),
                ("gat 10 l\r\n", "END\r\n"),
                ("incr l 1\r\n", "NOT_FOUND\r\n"),
                ("touch l 1\r\n", "NOT_FOUND\r\n"),
                ("delete l\r\n", "NOT_FOUND\r\n"),
                ("replace l 0 0 1\r\nx\r\n", "NOT_STORED\r\n"),
                ("append l 0 0 1\r\nx\r\n", "NOT_STORED\r\n"),
                ("cas l 0 0 1 1\r\nx\r\n", "NOT_FOUND\r\n"),
            ],
        );
        assert!(matches!(
            db.lock_one(b"l", false)
                .unwrap()
                .get(b"l")
                .map(|e| &e.value),
            Some(Value::List(_))
        ));
        db_transcript(
            &db,
            &[
                ("add l 0 0 1\r\nx\r\n", "STORED\r\n"),
                ("get l\r\n", "VALUE l 0 1\r\nx\r\nEND\r\n"),
            ],
        );
    }

    #[test]
    fn db_execute_rejects_anything_but_one_request() {
        let db = Db::default();
        let mut out = b"kept".to_vec();
        for req in [
            &b"get k\r\nget k\r\n"[..],
            b"get k",
            b"set k 0 0 3\r\nab",
            b"",
        ] {
            assert_eq!(execute_db(req, &db, &mut out), Err(McError::NotOneRequest));
        }
        // A bad block's request ends two bytes after the block: one byte more
        // is the next request's.
        assert_eq!(
            execute_db(b"set k 0 0 1\r\nxy\r\n", &db, &mut out),
            Err(McError::NotOneRequest)
        );
        assert_eq!(out, b"kept");
        assert!(db.is_empty());
    }

    #[test]
    fn db_concurrent_incr_is_atomic() {
        let db = Db::default();
        db_transcript(&db, &[("set c 0 0 1\r\n0\r\n", "STORED\r\n")]);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let mut out = Vec::new();
                    for _ in 0..1000 {
                        out.clear();
                        execute_db(b"incr c 1\r\n", &db, &mut out).unwrap();
                        assert!(out.ends_with(b"\r\n") && out[0].is_ascii_digit());
                    }
                });
            }
        });
        assert_eq!(run_db(&db, b"get c\r\n"), "VALUE c 0 4\r\n4000\r\nEND\r\n");
    }

    #[test]
    fn db_concurrent_gets_cas_loops_lose_no_update() {
        const THREADS: usize = 4;
        const UPDATES: usize = 500;
        let db = Db::default();
        db_transcript(&db, &[("set c 0 0 1\r\n0\r\n", "STORED\r\n")]);
        let retries = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    let mut out = Vec::new();
                    for _ in 0..UPDATES {
                        loop {
                            out.clear();
                            execute_db(b"gets c\r\n", &db, &mut out).unwrap();
                            let reply = std::str::from_utf8(&out).unwrap();
                            let mut lines = reply.split("\r\n");
                            let head: Vec<&str> = lines.next().unwrap().split(' ').collect();
                            let cas: u64 = head[4].parse().unwrap();
                            let n: u64 = lines.next().unwrap().parse().unwrap();
                            let v = (n + 1).to_string();
                            let req = format!("cas c 0 0 {} {cas}\r\n{v}\r\n", v.len());
                            out.clear();
                            execute_db(req.as_bytes(), &db, &mut out).unwrap();
                            match &out[..] {
                                b"STORED\r\n" => break,
                                b"EXISTS\r\n" => {
                                    retries.fetch_add(1, Ordering::Relaxed);
                                }
                                other => panic!("{:?}", String::from_utf8_lossy(other)),
                            }
                        }
                    }
                });
            }
        });
        let total = THREADS * UPDATES;
        assert_eq!(
            run_db(&db, b"get c\r\n"),
            format!(
                "VALUE c 0 {}\r\n{total}\r\nEND\r\n",
                total.to_string().len()
            )
        );
    }

    // --- properties ---------------------------------------------------------------------

    fn key() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9_:!~-]{1,40}"
    }

    /// A random valid request.
    fn request() -> impl Strategy<Value = Vec<u8>> {
        let nl = prop_oneof![Just("\r\n"), Just("\n")];
        let noreply = prop_oneof![Just(""), Just(" noreply")];
        prop_oneof![
            (
                prop_oneof![Just("get"), Just("gets")],
                prop::collection::vec(key(), 1..=40),
                nl.clone()
            )
                .prop_map(|(cmd, keys, nl)| format!("{cmd} {}{nl}", keys.join(" ")).into_bytes()),
            (
                prop_oneof![
                    Just("set"),
                    Just("add"),
                    Just("replace"),
                    Just("append"),
                    Just("prepend"),
                    Just("cas")
                ],
                key(),
                any::<u32>(),
                any::<i32>(),
                prop::collection::vec(any::<u8>(), 0..64),
                noreply.clone(),
                nl.clone()
            )
                .prop_map(|(cmd, key, flags, exp, data, noreply, nl)| {
                    let cas = if cmd == "cas" { " 12345" } else { "" };
                    let mut v =
                        format!("{cmd} {key} {flags} {exp} {}{cas}{noreply}{nl}", data.len())
                            .into_bytes();
                    v.extend_from_slice(&data);
                    v.extend_from_slice(b"\r\n");
                    v
                }),
            (key(), noreply.clone(), nl.clone())
                .prop_map(|(k, nr, nl)| format!("delete {k}{nr}{nl}").into_bytes()),
            (
                prop_oneof![Just("incr"), Just("decr")],
                key(),
                any::<u64>(),
                noreply,
                nl
            )
                .prop_map(|(c, k, n, nr, nl)| format!("{c} {k} {n}{nr}{nl}").into_bytes()),
        ]
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_bytes(
            buf in prop::collection::vec(any::<u8>(), 0..3000),
            max in 0usize..100,
        ) {
            let store = MemStore::new();
            let mut out = Vec::new();
            let mut scratch = Vec::new();
            let _ = classify(&buf);
            if let Ok(Some(n)) = request_len(&buf, max) {
                prop_assert!(n > 0 && n <= buf.len());
                prop_assert_eq!(execute(&buf[..n], &store, &mut out, &mut scratch), Ok(()));
                prop_assert_eq!(execute_db(&buf[..n], &Db::default(), &mut out), Ok(()));
            }
        }

        #[test]
        fn never_panics_on_protocol_like_bytes(
            parts in prop::collection::vec(
                prop::sample::select(&[
                    "get ", "set ", "cas ", "incr ", "delete ", "0 ", "1 ", "5 ", "noreply",
                    "gat ", "touch ", "flush_all ", "stats", "append ", "-1 ", "4102444800 ",
                    "\r\n", "\n", "\r", "k ", " ", "99999999999999999999 ", "-1 ", "x",
                ][..]),
                0..30,
            ),
        ) {
            let buf = parts.concat().into_bytes();
            let store = MemStore::new();
            let mut out = Vec::new();
            let mut scratch = Vec::new();
            let _ = classify(&buf);
            let db = Db::default();
            let mut rest = &buf[..];
            while let Ok(Some(n)) = request_len(rest, 16) {
                prop_assert!(n > 0 && n <= rest.len());
                prop_assert_eq!(execute(&rest[..n], &store, &mut out, &mut scratch), Ok(()));
                prop_assert_eq!(execute_db(&rest[..n], &db, &mut out), Ok(()));
                rest = &rest[n..];
            }
        }

        #[test]
        fn split_valid_request_is_incomplete_then_complete(
            req in request(),
            next in request(),
            cut in any::<prop::sample::Index>(),
        ) {
            let cut = cut.index(req.len());
            prop_assert_eq!(request_len(&req[..cut], MAX), Ok(None));
            prop_assert_eq!(request_len(&req, MAX), Ok(Some(req.len())));
            let mut two = req.clone();
            two.extend_from_slice(&next);
            prop_assert_eq!(request_len(&two, MAX), Ok(Some(req.len())));
            prop_assert_eq!(request_len(&two[req.len()..], MAX), Ok(Some(next.len())));
            let store = MemStore::new();
            let mut out = Vec::new();
            let mut scratch = Vec::new();
            prop_assert_eq!(execute(&req, &store, &mut out, &mut scratch), Ok(()));
            prop_assert_eq!(execute_db(&req, &Db::default(), &mut out), Ok(()));
            let multi = req.starts_with(b"get") && req.iter().take_while(|&&b| b != b'\n').filter(|&&b| b == b' ').count() > 1;
            prop_assert_eq!(classify(&req), u16::from(multi));
        }
    }
}
