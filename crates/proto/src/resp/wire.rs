//! RESP's wire: what a request is on the socket and what the server writes
//! back, with nothing of what the commands do. The bounds of a request, the
//! scheduler's types of a command (the table the classifier, `INFO
//! scripttypes` and the scripts' registry read), framing
//! ([`request_len`], [`ignorable_prefix`]), parsing ([`parse`],
//! [`Command`]), a client's encoding ([`write_command`]) and the reply
//! encoders. A leaf: it imports nothing else of the crate, so the
//! commands (`crate::commands`) and the protocol (`crate::resp`) both build
//! on it.

use std::fmt;

/// Most arguments (command name included) one request may carry: Redis's
/// bound on a multibulk length (a client loading a big key sends thousands
/// in one HSET or RPUSH; a request's bytes are bounded apart).
pub const MAX_ARGS: usize = 1024 * 1024;

/// MGET/EXISTS/DEL with more keys than this (MSET: more key/value pairs) are "multi".
pub const MULTI_KEYS: usize = 8;

/// LRANGE whose requested span may exceed this many elements is "range".
pub const RANGE_SHORT: usize = 32;

/// Elements past which a command that walks them is "big" ([`TYPE_BIG`]),
/// where the store's sizes are known ([`classify_sized`]).
pub const BIG_ELEMENTS: usize = 10_000;

/// The scheduler's request types; [`classify`] returns an index into this array.
/// The scripts' types come last but one (`script`) and last (`script-2` to
/// `script-8`): a script is typed by its SHA1 where the store's sizes are
/// known ([`SCRIPT_TYPES`]).
pub const TYPES: [&str; 12] = [
    "short", "multi", "range", "script", "big", "script-2", "script-3", "script-4", "script-5",
    "script-6", "script-7", "script-8",
];

/// The mean service time (µs) each of [`TYPES`] is declared with when a
/// server registers them: where DARC starts, before it measures (a GET on
/// RocksDB takes a few µs; MGET/MSET of many keys and a long LRANGE tens to
/// hundreds).
pub const TYPE_MEAN_US: [f64; 12] = [
    2.0, 20.0, 100.0, 50.0, 2_000.0, 50.0, 50.0, 50.0, 50.0, 50.0, 50.0, 50.0,
];

/// The scripts' types: the first `SCRIPT_TYPES - 1` distinct scripts (by
/// SHA1) the server is sent each get a type of their own, profiled apart
/// (so a slow script is what DARC keeps off the GETs' workers, and a fast
/// one is not taken for it); the scripts after them share the last.
/// `INFO scripttypes` says which script has which type.
pub const SCRIPT_TYPES: usize = 8;

/// Every script type, slot by slot.
pub const SCRIPT_TYPE_IDS: [u16; SCRIPT_TYPES] = [
    TYPE_SCRIPT,
    TYPE_BIG + 1,
    TYPE_BIG + 2,
    TYPE_BIG + 3,
    TYPE_BIG + 4,
    TYPE_BIG + 5,
    TYPE_BIG + 6,
    TYPE_BIG + 7,
];

/// The type of script slot `slot` (in `0..SCRIPT_TYPES`; above: the last).
pub fn script_type(slot: usize) -> u16 {
    SCRIPT_TYPE_IDS[slot.min(SCRIPT_TYPES - 1)]
}

/// [`TYPES`] index of single-key and other cheap commands.
pub const TYPE_SHORT: u16 = 0;
/// [`TYPES`] index of MGET/MSET/DEL/EXISTS over more than [`MULTI_KEYS`] keys.
pub const TYPE_MULTI: u16 = 1;
/// [`TYPES`] index of LRANGE over more than [`RANGE_SHORT`] elements.
pub const TYPE_RANGE: u16 = 2;
/// [`TYPES`] index of EVAL and EVALSHA: a Lua script, whose cost is its
/// own (profiled as its own type, so DARC keeps slow scripts off the
/// GETs' workers); where sizes are known, the first script's, the others
/// typed by [`script_type`].
pub const TYPE_SCRIPT: u16 = 3;
/// [`TYPES`] index of a command that walks more than [`BIG_ELEMENTS`]
/// elements (a `KEYS *` of a big keyspace, the HGETALL of a 100,000-field
/// hash): known only where the store's sizes are ([`classify_sized`]), so
/// that DARC profiles it apart from the range commands of tens of µs.
pub const TYPE_BIG: u16 = 4;

/// Why a byte sequence is not a valid request.
///
/// The front end answers it with [`RespError::write_reply`] and closes the connection,
/// since the stream can no longer be cut into requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RespError {
    /// The request starts with this byte, which is neither `*` nor an ASCII letter.
    UnexpectedType(u8),
    /// An array element starts with this byte instead of `$`.
    ExpectedBulk(u8),
    /// The argument count is not a decimal number in `1..=MAX_ARGS` without leading zeros.
    InvalidMultibulkLength,
    /// More than [`MAX_ARGS`] arguments.
    TooManyArgs,
    /// A bulk string length is not a non-negative decimal number without leading zeros.
    InvalidBulkLength,
    /// A bulk string or the whole request is larger than the `max` given to [`request_len`].
    TooLarge,
    /// A `\r\n` is missing where the protocol requires one.
    MissingCrlf,
    /// An inline command contains a control byte, or a `\r` not followed by `\n`.
    InvalidInline,
    /// [`parse`] was given an incomplete request.
    Incomplete,
    /// [`parse`] was given more bytes than one request.
    TrailingBytes,
}

impl RespError {
    /// Appends the RESP error reply (`-ERR Protocol error: ...\r\n`) for this error.
    pub fn write_reply(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"-ERR Protocol error: ");
        out.extend_from_slice(self.to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}

/// Shows a byte as Redis does in protocol errors, but never as a control character.
struct ShowByte(u8);

impl fmt::Display for ShowByte {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_ascii_graphic() || self.0 == b' ' {
            write!(f, "{}", char::from(self.0))
        } else {
            write!(f, "\\x{:02x}", self.0)
        }
    }
}

impl fmt::Display for RespError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnexpectedType(b) => write!(f, "expected '*', got '{}'", ShowByte(*b)),
            Self::ExpectedBulk(b) => write!(f, "expected '$', got '{}'", ShowByte(*b)),
            Self::InvalidMultibulkLength | Self::TooManyArgs => {
                f.write_str("invalid multibulk length")
            }
            Self::InvalidBulkLength => f.write_str("invalid bulk length"),
            Self::TooLarge => f.write_str("request too large"),
            Self::MissingCrlf => f.write_str("expected CRLF"),
            Self::InvalidInline => f.write_str("invalid inline request"),
            Self::Incomplete => f.write_str("incomplete request"),
            Self::TrailingBytes => f.write_str("trailing bytes after request"),
        }
    }
}

impl std::error::Error for RespError {}

// ---------------------------------------------------------------------------------------
// Framing
// ---------------------------------------------------------------------------------------

/// Bytes at the start of `buf` that Redis skips between requests: empty
/// lines (`\r\n` or `\n`; `redis-cli --pipe` sends one before its closing
/// ECHO) and empty or null arrays (`*0\r\n`, `*-1\r\n`). Only whole ones
/// count; [`request_len`] refuses them, so a front end drops these first.
pub fn ignorable_prefix(buf: &[u8]) -> usize {
    let mut at = 0;
    loop {
        let rest = &buf[at..];
        let skip = if rest.starts_with(b"\r\n") {
            2
        } else if rest.starts_with(b"\n") {
            1
        } else if rest.starts_with(b"*0\r\n") {
            4
        } else if rest.starts_with(b"*-1\r\n") {
            5
        } else {
            return at;
        };
        at += skip;
    }
}

/// Length of the first complete request in `buf`.
///
/// `Ok(None)`: `buf` holds only a prefix of a request (possibly empty); read more and
/// call again with the longer buffer. `Ok(Some(n))`: `buf[..n]` is one complete request
/// (give it to [`classify`] and [`execute`]) and `buf[n..]` is the start of the next.
/// `Err`: the stream is not valid RESP2 request framing (see [`RespError`]).
///
/// `max` bounds both each bulk string and the whole request (framing included); a
/// request that declares more is refused as soon as the declaration is read, so a caller
/// never buffers more than about `max` bytes for one request. Requests may carry at most
/// [`MAX_ARGS`] arguments.
///
/// Never allocates, never panics, and runs in time linear in the bytes it looks at
/// (each call rescans from the start of `buf`, but never past the first request).
pub fn request_len(buf: &[u8], max: usize) -> Result<Option<usize>, RespError> {
    match buf.first() {
        None => Ok(None),
        Some(b'*') => multibulk_len(buf, max),
        Some(b) if b.is_ascii_alphabetic() => inline_len(buf, max),
        Some(&b) => Err(RespError::UnexpectedType(b)),
    }
}

/// Reads `digits\r\n` at `pos`: a decimal number without sign or leading zeros, at most
/// `limit`. Returns the number and the position after the CRLF; `Ok(None)` if incomplete.
fn read_len(
    buf: &[u8],
    start: usize,
    limit: usize,
    invalid: RespError,
    too_big: RespError,
) -> Result<Option<(usize, usize)>, RespError> {
    let mut pos = start;
    let mut value: usize = 0;
    loop {
        let Some(&b) = buf.get(pos) else {
            return Ok(None);
        };
        match b {
            b'0'..=b'9' => {
                if pos > start && value == 0 {
                    return Err(invalid); // leading zero
                }
                value = value
                    .checked_mul(10)
                    .and_then(|v| v.checked_add(usize::from(b - b'0')))
                    .ok_or(too_big)?;
                if value > limit {
                    return Err(too_big);
                }
                pos += 1;
            }
            b'\r' if pos > start => {
                return match buf.get(pos + 1) {
                    None => Ok(None),
                    Some(b'\n') => Ok(Some((value, pos + 2))),
                    Some(_) => Err(RespError::MissingCrlf),
                };
            }
            _ => return Err(invalid),
        }
    }
}

fn multibulk_len(buf: &[u8], max: usize) -> Result<Option<usize>, RespError> {
    let Some((count, mut pos)) = read_len(
        buf,
        1,
        MAX_ARGS,
        RespError::InvalidMultibulkLength,
        RespError::TooManyArgs,
    )?
    else {
        return Ok(None);
    };
    if count == 0 {
        return Err(RespError::InvalidMultibulkLength);
    }
    if pos > max {
        return Err(RespError::TooLarge);
    }
    for _ in 0..count {
        match buf.get(pos) {
            None => return Ok(None),
            Some(b'$') => {}
            Some(&b) => return Err(RespError::ExpectedBulk(b)),
        }
        let Some((len, data)) = read_len(
            buf,
            pos + 1,
            max,
            RespError::InvalidBulkLength,
            RespError::TooLarge,
        )?
        else {
            return Ok(None);
        };
        let data_end = data.checked_add(len).ok_or(RespError::TooLarge)?;
        let end = data_end.checked_add(2).ok_or(RespError::TooLarge)?;
        if end > max {
            return Err(RespError::TooLarge);
        }
        match buf.get(data_end) {
            None => return Ok(None),
            Some(b'\r') => {}
            Some(_) => return Err(RespError::MissingCrlf),
        }
        match buf.get(data_end + 1) {
            None => return Ok(None),
            Some(b'\n') => {}
            Some(_) => return Err(RespError::MissingCrlf),
        }
        pos = end;
    }
    Ok(Some(pos))
}

fn is_inline_space(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn inline_len(buf: &[u8], max: usize) -> Result<Option<usize>, RespError> {
    let mut tokens = 0usize;
    let mut in_token = false;
    for (i, &b) in buf.iter().enumerate() {
        if i >= max {
            return Err(RespError::TooLarge);
        }
        match b {
            b'\n' => return Ok(Some(i + 1)),
            b'\r' => match buf.get(i + 1) {
                None | Some(b'\n') => in_token = false,
                Some(_) => return Err(RespError::InvalidInline),
            },
            b' ' | b'\t' => in_token = false,
            0x21..=0x7e | 0x80..=0xff => {
                if !in_token {
                    tokens += 1;
                    if tokens > MAX_ARGS {
                        return Err(RespError::TooManyArgs);
                    }
                    in_token = true;
                }
            }
            _ => return Err(RespError::InvalidInline),
        }
    }
    Ok(None)
}

// ---------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------

/// The commands this server knows; anything else is [`Cmd::Unknown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cmd {
    /// `PING [message]`
    Ping,
    /// `ECHO message`
    Echo,
    /// `GET key`
    Get,
    /// `SET key value [NX|XX] [GET] [KEEPTTL]`
    Set,
    /// `DEL key [key ...]`
    Del,
    /// `EXISTS key [key ...]`
    Exists,
    /// `MGET key [key ...]`
    Mget,
    /// `MSET key value [key value ...]`
    Mset,
    /// `INCR key`
    Incr,
    /// `INCRBY key increment`
    Incrby,
    /// `DECR key`
    Decr,
    /// `DECRBY key decrement`
    Decrby,
    /// `LPUSH key element [element ...]`
    Lpush,
    /// `RPUSH key element [element ...]`
    Rpush,
    /// `LPOP key [count]`
    Lpop,
    /// `RPOP key [count]`
    Rpop,
    /// `LLEN key`
    Llen,
    /// `LRANGE key start stop`
    Lrange,
    /// `CONFIG GET parameter [parameter ...]` (answers an empty array)
    Config,
    /// `COMMAND [subcommand ...]` (answers an empty array)
    Command,
    /// `HELLO [protover ...]` (answers `-NOPROTO`: RESP2 only)
    Hello,
    /// `SELECT index` (only database 0 exists)
    Select,
    /// `INFO [section ...]`
    Info,
    /// Any other command name.
    Unknown,
}

const NAMES: [(&str, Cmd); 23] = [
    ("get", Cmd::Get),
    ("set", Cmd::Set),
    ("ping", Cmd::Ping),
    ("incr", Cmd::Incr),
    ("incrby", Cmd::Incrby),
    ("decr", Cmd::Decr),
    ("decrby", Cmd::Decrby),
    ("mget", Cmd::Mget),
    ("mset", Cmd::Mset),
    ("lpush", Cmd::Lpush),
    ("rpush", Cmd::Rpush),
    ("lpop", Cmd::Lpop),
    ("rpop", Cmd::Rpop),
    ("lrange", Cmd::Lrange),
    ("llen", Cmd::Llen),
    ("del", Cmd::Del),
    ("exists", Cmd::Exists),
    ("echo", Cmd::Echo),
    ("config", Cmd::Config),
    ("command", Cmd::Command),
    ("hello", Cmd::Hello),
    ("select", Cmd::Select),
    ("info", Cmd::Info),
];

impl Cmd {
    /// The command for a name, compared ASCII case-insensitively.
    pub fn from_name(name: &[u8]) -> Cmd {
        NAMES
            .iter()
            .find(|(n, _)| name.eq_ignore_ascii_case(n.as_bytes()))
            .map_or(Cmd::Unknown, |&(_, c)| c)
    }

    /// The lowercase name, as Redis writes it in error replies (`"unknown"` for Unknown).
    pub fn as_str(self) -> &'static str {
        NAMES
            .iter()
            .find(|&&(_, c)| c == self)
            .map_or("unknown", |&(n, _)| n)
    }
}

/// The arguments of a [`Command`], borrowed from the request bytes.
///
/// An iterator that decodes the (already validated) request lazily: no allocation.
#[derive(Debug, Clone)]
pub struct Args<'a> {
    /// The whole request (RESP) or the inline line without its terminator.
    buf: &'a [u8],
    pos: usize,
    remaining: usize,
    inline: bool,
}

impl<'a> Args<'a> {
    fn next_resp(&mut self) -> Option<&'a [u8]> {
        // At `pos`: `$len\r\ndata\r\n`, already validated by `request_len`.
        let mut p = self.pos + 1;
        let mut len = 0usize;
        while let Some(&d) = self.buf.get(p) {
            if !d.is_ascii_digit() {
                break;
            }
            len = len.wrapping_mul(10).wrapping_add(usize::from(d - b'0'));
            p += 1;
        }
        let start = p.checked_add(2)?;
        let end = start.checked_add(len)?;
        let arg = self.buf.get(start..end)?;
        self.pos = end.checked_add(2)?;
        Some(arg)
    }

    fn next_inline(&mut self) -> Option<&'a [u8]> {
        let line = self.buf;
        let mut p = self.pos;
        while p < line.len() && is_inline_space(line[p]) {
            p += 1;
        }
        let start = p;
        while p < line.len() && !is_inline_space(line[p]) {
            p += 1;
        }
        self.pos = p;
        (p > start).then(|| &line[start..p])
    }
}

impl<'a> Iterator for Args<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.remaining == 0 {
            return None;
        }
        let arg = if self.inline {
            self.next_inline()
        } else {
            self.next_resp()
        };
        match arg {
            Some(_) => self.remaining -= 1,
            None => self.remaining = 0,
        }
        arg
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Args<'_> {}

/// One parsed request: the command and its arguments, borrowed from the request bytes.
#[derive(Debug, Clone)]
pub struct Command<'a> {
    /// The command name exactly as sent (used in `unknown command` replies).
    pub raw_name: &'a [u8],
    /// The arguments after the command name.
    pub args: Args<'a>,
}

impl Command<'_> {
    /// Which command of [`execute`]'s (case-insensitive match of
    /// `raw_name`): looked up when asked, as the in-memory store's commands
    /// look theirs up in their own table.
    pub fn name(&self) -> Cmd {
        Cmd::from_name(self.raw_name)
    }
}

/// Parses one complete request, as delimited by [`request_len`].
///
/// `req` must be exactly one request: [`RespError::Incomplete`] if it is shorter,
/// [`RespError::TrailingBytes`] if longer. No size limit beyond [`MAX_ARGS`] is
/// enforced here (the front end's [`request_len`] applied `max`). Does not allocate.
pub fn parse(req: &[u8]) -> Result<Command<'_>, RespError> {
    let len = request_len(req, usize::MAX)?.ok_or(RespError::Incomplete)?;
    if len != req.len() {
        return Err(RespError::TrailingBytes);
    }
    parse_framed(req)
}

/// [`parse`] of a request the front end already framed with [`request_len`]
/// (exactly one complete request): the frame is not validated again, so a
/// pipelined command is validated once on its way, not at each of its
/// parses (classification, execution). On bytes that are not such a
/// request it never panics and reads nothing out of bounds: the arguments
/// end where the bytes stop making sense.
pub fn parse_framed(req: &[u8]) -> Result<Command<'_>, RespError> {
    let mut args = if req.first() == Some(&b'*') {
        let (count, pos) = read_len(
            req,
            1,
            MAX_ARGS,
            RespError::InvalidMultibulkLength,
            RespError::TooManyArgs,
        )?
        .ok_or(RespError::Incomplete)?;
        Args {
            buf: req,
            pos,
            remaining: count,
            inline: false,
        }
    } else {
        let line = req.strip_suffix(b"\n").unwrap_or(req);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let count = line
            .split(|&b| is_inline_space(b))
            .filter(|t| !t.is_empty())
            .count();
        Args {
            buf: line,
            pos: 0,
            remaining: count,
            inline: true,
        }
    };
    let raw_name = args.next().ok_or(RespError::Incomplete)?;
    Ok(Command { raw_name, args })
}

/// Appends `args` encoded as a RESP2 request (array of bulk strings), as a client sends it.
pub fn write_command(args: &[&[u8]], out: &mut Vec<u8>) {
    push_header(out, b'*', args.len() as u64);
    for arg in args {
        push_bulk(out, arg);
    }
}

/// Redis 7's error text for an unknown command: "unknown command '%.128s',
/// with args beginning with: " followed by "'%.*s' " per argument while the
/// arguments shown are shorter than 128 bytes.
pub(crate) fn unknown_command<'a>(
    raw_name: &[u8],
    args: impl IntoIterator<Item = &'a [u8]>,
) -> Vec<u8> {
    let mut msg = b"ERR unknown command '".to_vec();
    msg.extend_from_slice(&raw_name[..raw_name.len().min(128)]);
    msg.extend_from_slice(b"', with args beginning with: ");
    let mut shown = 0usize;
    for arg in args {
        if shown >= 128 {
            break;
        }
        let take = arg.len().min(128 - shown);
        msg.push(b'\'');
        msg.extend_from_slice(&arg[..take]);
        msg.extend_from_slice(b"' ");
        shown += take + 3;
    }
    msg
}

// ---------------------------------------------------------------------------------------
// Numbers and reply encoding
// ---------------------------------------------------------------------------------------

/// Parses a decimal `i64` as Redis' `string2ll` does: optional `-`, no `+`, no leading
/// zeros, no spaces, at most 20 bytes.
pub(crate) fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    if !matches!(digits.first(), Some(b'1'..=b'9')) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        0i64.checked_sub_unsigned(v)
    } else {
        i64::try_from(v).ok()
    }
}

fn push_u64_digits(out: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

pub(crate) fn push_i64_digits(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    push_u64_digits(out, v.unsigned_abs());
}

pub(crate) fn push_header(out: &mut Vec<u8>, kind: u8, n: u64) {
    out.push(kind);
    push_u64_digits(out, n);
    out.extend_from_slice(b"\r\n");
}

pub(crate) fn push_bulk(out: &mut Vec<u8>, data: &[u8]) {
    push_header(out, b'$', data.len() as u64);
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

pub(crate) fn push_nil(out: &mut Vec<u8>) {
    out.extend_from_slice(b"$-1\r\n");
}

pub(crate) fn push_int(out: &mut Vec<u8>, v: i64) {
    out.push(b':');
    push_i64_digits(out, v);
    out.extend_from_slice(b"\r\n");
}

/// Appends `-msg\r\n`, with CR and LF inside `msg` replaced by spaces as Redis does.
pub(crate) fn push_error(out: &mut Vec<u8>, msg: &[u8]) {
    out.push(b'-');
    out.extend(
        msg.iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}
