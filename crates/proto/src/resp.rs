//! Redis's protocol (RESP2): the [`Resp`] entry of the protocol registry, and the
//! Redis layer of the key-value service that runs behind the scheduler.
//!
//! A TCP front end reads bytes from a connection and calls [`request_len`] to cut them
//! into complete requests, then [`classify`] to pick the scheduler's request type
//! (an index into [`TYPES`]). Later a worker thread calls [`execute`], which runs the
//! request against a [`Store`] and appends the RESP2 reply to an output buffer.
//!
//! Everything here is pure computation over byte slices: this module does no I/O,
//! starts no threads, keeps no global state and never panics on any input. Framing and
//! classification do not allocate at all; execution allocates only for replies and,
//! for list commands, for one small key buffer. The socket, the buffering and the
//! threads belong to the front end and the workers that call it.
//!
//! # Requests
//! A request is either a RESP2 array of bulk strings (`*N\r\n$len\r\nbytes\r\n...`,
//! what every client library and `redis-benchmark` send) or an inline command
//! (`PING\r\n`, as typed into telnet): a line that starts with an ASCII letter, ends with
//! `\n` or `\r\n`, and whose arguments are separated by spaces or tabs. Inline commands
//! have no quoting: `"` and `'` are ordinary bytes. Empty arrays (`*0`), null arrays
//! (`*-1`) and empty lines are not requests: [`request_len`] refuses them, and a front
//! end skips them first with [`ignorable_prefix`], as Redis does.
//!
//! # Keys and values
//! Strings live under the user's key itself. Lists live under reserved keys that start
//! with the byte `0x00` (see [`execute`]); a user key that starts with `0x00` is
//! *escaped* by prepending one more `0x00` byte, so every user key is accepted and none
//! can collide with list records.

use crate::{Refusal, Sizes};

pub mod wire;

pub use wire::*;

// ---------------------------------------------------------------------------------------
// Classification
// ---------------------------------------------------------------------------------------

/// The scheduler's request type of one complete request: an index into [`TYPES`].
///
/// * [`TYPE_MULTI`] (1): MGET, DEL, UNLINK, EXISTS with more than [`MULTI_KEYS`] keys,
///   MSET/MSETNX with more than [`MULTI_KEYS`] key/value pairs, HMGET/SADD/SREM/HDEL/ZREM
///   with more than [`MULTI_KEYS`] members; a transaction's EXEC by its size (see
///   [`classify_in_stream`]).
/// * [`TYPE_RANGE`] (2): commands that walk a collection or the keyspace: LRANGE and
///   ZRANGE whose span may exceed [`RANGE_SHORT`] elements (the span is `stop - start +
///   1` when both indices have the same sign, `stop + 1` when only `start` is negative
///   (an upper bound), and unbounded ("to the end") when only `stop` is negative);
///   ZRANGEBYSCORE, HGETALL, SMEMBERS, KEYS, FLUSHALL/FLUSHDB, and SCAN with a COUNT above
///   [`RANGE_SHORT`].
/// * [`TYPE_SHORT`] (0): everything else, including malformed requests and requests
///   that will be answered with an error.
///
/// Scans the frame once more without allocating.
pub fn classify(req: &[u8]) -> u16 {
    match parse(req) {
        Ok(cmd) => classify_command(cmd),
        Err(_) => TYPE_SHORT,
    }
}

/// [`classify`] of a parsed request: by its command's [`Cost`] in the
/// command table, read against its arguments.
///
/// [`Cost`]: crate::commands::Cost
fn classify_command(cmd: Command<'_>) -> u16 {
    use crate::commands::Cost;
    let mut args = cmd.args;
    let n = args.len();
    let long_span = |start: Option<i64>, stop: Option<i64>| {
        let (Some(start), Some(stop)) = (start, stop) else {
            return false;
        };
        match (start < 0, stop < 0) {
            (false, true) => true,
            (true, false) => stop.saturating_add(1) > RANGE_SHORT as i64,
            _ => stop.saturating_sub(start).saturating_add(1) > RANGE_SHORT as i64,
        }
    };
    let cost = crate::commands::cost_of(cmd.raw_name);
    match cost {
        Cost::Short => TYPE_SHORT,
        Cost::Script => TYPE_SCRIPT,
        Cost::Keys if n > MULTI_KEYS => TYPE_MULTI,
        Cost::Pairs if n / 2 > MULTI_KEYS => TYPE_MULTI,
        Cost::Members if n > MULTI_KEYS + 1 => TYPE_MULTI,
        Cost::Keys | Cost::Pairs | Cost::Members => TYPE_SHORT,
        Cost::Span => {
            if n >= 3 {
                let start = args.nth(1).and_then(parse_i64);
                let stop = args.next().and_then(parse_i64);
                if long_span(start, stop) {
                    return TYPE_RANGE;
                }
            }
            TYPE_SHORT
        }
        Cost::Walk => TYPE_RANGE,
        Cost::Scan => {
            if !cmd.raw_name.eq_ignore_ascii_case(b"scan") {
                let _key = args.next();
            }
            let _cursor = args.next();
            while let (Some(opt), Some(v)) = (args.next(), args.next()) {
                if opt.eq_ignore_ascii_case(b"count")
                    && parse_i64(v).is_some_and(|c| c > RANGE_SHORT as i64)
                {
                    return TYPE_RANGE;
                }
            }
            TYPE_SHORT
        }
    }
}

/// ZUNION, ZINTER, ZDIFF, their STORE forms and ZINTERCARD: their cost is
/// their sources' sizes.
fn zset_operation(name: &[u8]) -> bool {
    [
        &b"zunion"[..],
        b"zinter",
        b"zdiff",
        b"zintercard",
        b"zunionstore",
        b"zinterstore",
        b"zdiffstore",
    ]
    .iter()
    .any(|n| name.eq_ignore_ascii_case(n))
}

/// The elements `cmd` will walk, from the store's `sizes`, for the commands
/// whose cost grows with their keys (`None`: a command whose cost its name
/// and arguments tell, or one whose size is not read).
fn elements_touched(cmd: &Command<'_>, sizes: &dyn Sizes, big: usize) -> Option<usize> {
    let name = cmd.raw_name;
    let mut args = cmd.args.clone();
    let is = |s: &[u8]| name.eq_ignore_ascii_case(s);
    // The sources' sum (at most 4 x MULTI_KEYS looked up); `None` if one
    // is not known now.
    let sum = |keys: Args<'_>| keys.take(MULTI_KEYS * 4).map(|k| sizes.elements(k)).sum();
    if is(b"lrange") || is(b"zrange") || is(b"zrevrange") {
        let len = sizes.elements(args.next()?)? as i64;
        let (start, stop) = (
            args.next().and_then(parse_i64),
            args.next().and_then(parse_i64),
        );
        // A BYSCORE/BYLEX range, or bounds that do not parse: at most the
        // key's length.
        let by_rank =
            !args.any(|a| a.eq_ignore_ascii_case(b"byscore") || a.eq_ignore_ascii_case(b"bylex"));
        let (Some(start), Some(stop), true) = (start, stop, by_rank) else {
            return Some(len as usize);
        };
        let at = |i: i64| if i < 0 { (len + i).max(0) } else { i };
        let (from, to) = (at(start), at(stop).min(len - 1));
        return Some(if to >= from {
            (to - from + 1) as usize
        } else {
            0
        });
    }
    if is(b"sort")
        || is(b"sort_ro")
        || is(b"hgetall")
        || is(b"hkeys")
        || is(b"hvals")
        || is(b"smembers")
        || is(b"lpos")
        || is(b"linsert")
        || is(b"lrem")
        || is(b"zrangebyscore")
        || is(b"zrevrangebyscore")
        || is(b"zrangebylex")
        || is(b"zrevrangebylex")
        || is(b"zremrangebyscore")
        || is(b"zremrangebyrank")
        || is(b"zremrangebylex")
    {
        return sizes.elements(args.next()?);
    }
    if is(b"sinter") || is(b"sunion") || is(b"sdiff") {
        return sum(args);
    }
    if is(b"zrangestore") {
        // At most the source's length (the destination is no source).
        let _destination = args.next();
        return sizes.elements(args.next()?);
    }
    if zset_operation(name) {
        // The destination is no source; the key count says where the keys
        // end (WEIGHTS and the rest follow them).
        if name.len() > 9 && name[name.len() - 5..].eq_ignore_ascii_case(b"store") {
            let _destination = args.next();
        }
        let keys = args
            .next()
            .and_then(parse_i64)?
            .clamp(0, (MULTI_KEYS * 4) as i64);
        return args.take(keys as usize).map(|k| sizes.elements(k)).sum();
    }
    if is(b"sinterstore") || is(b"sunionstore") || is(b"sdiffstore") || is(b"sintercard") {
        // The destination, or SINTERCARD's key count, is not a source.
        let _first = args.next();
        return sum(args);
    }
    if is(b"del") || is(b"unlink") {
        // Freeing a big value walks it too (Redis's lazy free exists for
        // it); a DEL of many small keys keeps its type by count.
        let n: usize = args
            .take(MULTI_KEYS + 1)
            .map(|k| sizes.elements(k))
            .sum::<Option<usize>>()?;
        return (n > big).then_some(n);
    }
    if is(b"keys") || is(b"flushall") || is(b"flushdb") {
        return Some(sizes.keys());
    }
    None
}

/// The type of `req` where the store's sizes are known: as
/// [`classify_in_stream`], but a command whose cost grows with its keys
/// (LRANGE, ZRANGE, HGETALL, SMEMBERS, SUNION, KEYS, DEL of a big value,
/// ...) is typed by the elements it will walk: [`TYPE_SHORT`] up to
/// [`RANGE_SHORT`], [`TYPE_RANGE`] up to [`BIG_ELEMENTS`], [`TYPE_BIG`]
/// past it. Inside `MULTI` nothing is read (the commands are only queued).
pub fn classify_sized(
    req: &[u8],
    state: &mut u32,
    sizes: &dyn Sizes,
    bounds: crate::SizeBounds,
) -> u16 {
    classify_stream(req, state, Some((sizes, bounds)))
}

/// [`classify`] for a request of a connection whose transaction state is
/// `state` (0 outside `MULTI`; inside, one more than the commands queued),
/// updated here: commands queued after `MULTI` are short (they are only
/// queued), and `EXEC` runs them all, so it is [`TYPE_MULTI`] when more than
/// [`MULTI_KEYS`] are queued.
pub fn classify_in_stream(req: &[u8], state: &mut u32) -> u16 {
    classify_stream(req, state, None)
}

/// [`classify_in_stream`], refined by the store's sizes where given
/// ([`classify_sized`]): one parse either way.
fn classify_stream(
    req: &[u8],
    state: &mut u32,
    sized: Option<(&dyn Sizes, crate::SizeBounds)>,
) -> u16 {
    // The front end classifies what it framed.
    let Ok(cmd) = parse_framed(req) else {
        return TYPE_SHORT;
    };
    let is = |s: &[u8]| cmd.raw_name.eq_ignore_ascii_case(s);
    if *state == 0 {
        if is(b"multi") {
            *state = 1;
        }
        let by_name = classify_command(cmd.clone());
        let Some((sizes, bounds)) = sized else {
            return by_name;
        };
        if by_name == TYPE_SCRIPT {
            return script_sha(&cmd)
                .map_or(TYPE_SCRIPT, |sha| script_type(sizes.script_slot(&sha)));
        }
        return match elements_touched(&cmd, sizes, bounds.big) {
            None => by_name,
            Some(n) if n > bounds.big => TYPE_BIG,
            Some(n) if n > bounds.short => TYPE_RANGE.max(by_name),
            Some(_) if by_name == TYPE_RANGE => TYPE_SHORT,
            Some(_) => by_name,
        };
    }
    if is(b"exec") {
        let queued = *state - 1;
        *state = 0;
        return if queued as usize > MULTI_KEYS {
            TYPE_MULTI
        } else {
            TYPE_SHORT
        };
    }
    if is(b"discard") || is(b"reset") {
        *state = 0;
    } else if !is(b"watch") && !is(b"multi") {
        *state = state.saturating_add(1);
    }
    TYPE_SHORT
}

/// The SHA1 (40 lowercase hex digits) of the script an EVAL or EVALSHA
/// runs: EVALSHA's as sent, EVAL's computed (as Redis does for every EVAL);
/// `None` for a name that is not one (EVALSHA then answers NOSCRIPT).
fn script_sha(cmd: &Command<'_>) -> Option<[u8; 40]> {
    let first = cmd.args.clone().next()?;
    let mut sha = [0u8; 40];
    if cmd.raw_name.eq_ignore_ascii_case(b"evalsha") {
        if first.len() != 40 || !first.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        sha.copy_from_slice(first);
        sha.make_ascii_lowercase();
    } else {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let digest = sha1_smol::Sha1::from(first).digest().bytes();
        for (i, b) in digest.iter().enumerate() {
            sha[2 * i] = HEX[usize::from(b >> 4)];
            sha[2 * i + 1] = HEX[usize::from(b & 15)];
        }
    }
    Some(sha)
}

// ---------------------------------------------------------------------------------------
// The registry's entry
// ---------------------------------------------------------------------------------------

/// Redis's protocol (RESP2) as the registry holds it: framing by
/// [`request_len`], types by [`classify_in_stream`], refusals as Redis error
/// replies, Redis's commands over the in-memory store
/// ([`crate::commands`]) or any [`Store`] ([`execute`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Resp;

impl crate::Protocol for Resp {
    fn types(&self) -> &'static [&'static str] {
        &TYPES
    }

    fn open_ended_types(&self) -> &'static [u16] {
        &SCRIPT_TYPE_IDS
    }

    fn may_block(&self, req: &[u8]) -> bool {
        // On the network thread for every command: most names are decided
        // by their first letter, without a parse (`*N\r\n$L\r\nNAME`,
        // or an inline command).
        let first = match req.first() {
            Some(b'*') => {
                let mut lines = req.splitn(3, |&b| b == b'\n');
                let (_, _) = (lines.next(), lines.next());
                lines.next().and_then(|name| name.first().copied())
            }
            other => other.copied(),
        };
        if !matches!(first, Some(b'b' | b'B' | b'x' | b'X')) {
            return false;
        }
        parse(req).is_ok_and(|c| {
            [
                &b"blpop"[..],
                b"brpop",
                b"blmove",
                b"brpoplpush",
                b"bzpopmin",
                b"bzpopmax",
                b"blmpop",
                b"bzmpop",
                b"xread",
            ]
            .iter()
            .any(|b| c.raw_name.eq_ignore_ascii_case(b))
        })
    }

    fn wake_generation(&self) -> u64 {
        crate::blocking::wakes()
    }

    fn type_mean_us(&self) -> &'static [f64] {
        &TYPE_MEAN_US
    }

    fn request_len(&self, buf: &[u8], max: usize) -> Result<Option<usize>, Refusal> {
        request_len(buf, max).map_err(|e| match e {
            RespError::TooLarge => Refusal::TooLarge,
            _ => Refusal::Malformed,
        })
    }

    fn ignorable_prefix(&self, buf: &[u8]) -> usize {
        ignorable_prefix(buf)
    }

    fn classify(&self, req: &[u8], state: &mut u32) -> u16 {
        classify_in_stream(req, state)
    }

    fn classify_sized(
        &self,
        req: &[u8],
        state: &mut u32,
        sizes: &dyn crate::Sizes,
        bounds: crate::SizeBounds,
    ) -> u16 {
        classify_sized(req, state, sizes, bounds)
    }

    fn refusal(&self, refusal: Refusal, out: &mut Vec<u8>) {
        out.extend_from_slice(match refusal {
            Refusal::Overloaded => b"-BUSY server overloaded, request refused\r\n".as_slice(),
            Refusal::TooLarge => b"-ERR Protocol error: request too large\r\n",
            Refusal::Malformed => b"-ERR Protocol error: not a RESP request\r\n",
            Refusal::UnknownType => b"-ERR request of no registered type\r\n",
            Refusal::BadBody => b"-ERR malformed request\r\n",
            Refusal::HandlerError => b"-ERR internal error\r\n",
            Refusal::MaxClients => b"-ERR max number of clients reached\r\n",
        });
    }

    fn service_name(&self) -> &'static str {
        "redis"
    }

    fn commands_about(&self) -> &'static str {
        "Redis commands"
    }

    fn execute_db(
        &self,
        req: &[u8],
        db: &crate::db::Db,
        sessions: &crate::commands::Sessions,
        session: u64,
        out: &mut Vec<u8>,
        preempt: &mut dyn FnMut(),
    ) -> Result<(), &'static str> {
        // Validated and parsed once here; the command runs from this parse.
        let c = parse(req).map_err(|_| NOT_A_COMMAND)?;
        let mut s = sessions.take(session);
        // CLIENT LIST and KILL read every connection's session: answered
        // here, where the table is (outside MULTI; queued, they answer as
        // CLIENT's other sub-commands do).
        if s.multi.is_none() && c.raw_name.eq_ignore_ascii_case(b"client") {
            s.started = Some(std::time::Instant::now());
            let args: Vec<&[u8]> = c.args.clone().collect();
            match args.first().map(|a| a.to_ascii_lowercase()).as_deref() {
                Some(b"list") if args.len() == 1 => {
                    let list = sessions.client_list(&s);
                    s.ran(b"client|list");
                    sessions.put(s);
                    out.push(b'$');
                    out.extend_from_slice(list.len().to_string().as_bytes());
                    out.extend_from_slice(b"\r\n");
                    out.extend_from_slice(&list);
                    out.extend_from_slice(b"\r\n");
                    return Ok(());
                }
                Some(b"kill") => {
                    sessions.client_kill(&s, &args[1..], out);
                    s.ran(b"client|kill");
                    sessions.put(s);
                    return Ok(());
                }
                _ => {}
            }
        }
        let r = crate::commands::execute_parsed(req, c, db, &mut s, out, preempt);
        sessions.put(s);
        r.map_err(|_| NOT_A_COMMAND)
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
const NOT_A_COMMAND: &str = "not a RESP command";

mod exec;

pub use exec::execute;

#[cfg(test)]
mod tests {
    use super::exec::{INFO, NO_EXPIRY};
    use super::*;
    use crate::store::{MemStore, Store};
    use proptest::prelude::*;
    use proptest::sample::Index;
    use redis_protocol::resp2::decode::decode_range;
    use redis_protocol::resp2::types::RangeFrame;

    const MAX: usize = 1 << 20;

    fn enc(words: &[&[u8]]) -> Vec<u8> {
        let mut v = Vec::new();
        write_command(words, &mut v);
        v
    }

    fn words(line: &str) -> Vec<&[u8]> {
        line.split(' ').map(str::as_bytes).collect()
    }

    /// Asserts that `reply` is exactly one well-formed RESP2 frame (checked by redis-protocol).
    fn assert_one_frame(reply: &[u8]) {
        match decode_range(reply) {
            Ok(Some((_, n))) => assert_eq!(n, reply.len(), "extra bytes in {reply:?}"),
            other => panic!(
                "not one RESP2 frame: {:?}: {other:?}",
                String::from_utf8_lossy(reply)
            ),
        }
    }

    fn exec_words(store: &MemStore, w: &[&[u8]]) -> Vec<u8> {
        let req = enc(w);
        let mut out = b"previous reply".to_vec();
        let mut scratch = Vec::new();
        execute(&req, store, &mut out, &mut scratch).expect("valid request");
        let reply = out.split_off(14);
        assert_eq!(out, b"previous reply", "execute must only append");
        assert_one_frame(&reply);
        reply
    }

    #[track_caller]
    fn t(store: &MemStore, line: &str, expected: &[u8]) {
        t_words(store, &words(line), expected);
    }

    #[track_caller]
    fn t_words(store: &MemStore, w: &[&[u8]], expected: &[u8]) {
        let got = exec_words(store, w);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(expected),
            "command {:?}",
            w.iter()
                .map(|a| String::from_utf8_lossy(a))
                .collect::<Vec<_>>()
        );
    }

    fn bulks(items: &[&[u8]]) -> Vec<u8> {
        let mut v = Vec::new();
        push_header(&mut v, b'*', items.len() as u64);
        for i in items {
            push_bulk(&mut v, i);
        }
        v
    }

    // ----------------------------------------------------------------- framing

    const VALID: &[&[u8]] = &[
        b"*1\r\n$4\r\nPING\r\n",
        b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n",
        b"*2\r\n$3\r\nGET\r\n$0\r\n\r\n",
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n",
        b"*2\r\n$4\r\nECHO\r\n$10\r\n0123456789\r\n",
        b"PING\r\n",
        b"PING\n",
        b"SET  key\tvalue \r\n",
        b"get \"quoted\" x\r\n",
    ];

    #[test]
    fn every_prefix_is_incomplete_and_whole_is_complete() {
        for req in VALID {
            for k in 0..req.len() {
                assert_eq!(request_len(&req[..k], MAX), Ok(None), "{req:?} cut at {k}");
            }
            assert_eq!(request_len(req, MAX), Ok(Some(req.len())), "{req:?}");
            assert_eq!(
                request_len(req, req.len()),
                Ok(Some(req.len())),
                "max = len"
            );
            assert_eq!(request_len(req, req.len() - 1), Err(RespError::TooLarge));
        }
    }

    #[test]
    fn pipelined_requests_are_cut_exactly() {
        let mut stream = Vec::new();
        for req in VALID {
            stream.extend_from_slice(req);
        }
        let mut rest = &stream[..];
        for req in VALID {
            let n = request_len(rest, MAX).unwrap().expect("complete");
            assert_eq!(&rest[..n], *req);
            rest = &rest[n..];
        }
        assert_eq!(request_len(rest, MAX), Ok(None));
    }

    #[test]
    fn inline_commands_parse() {
        let cmd = parse(b"SET  key\tvalue \r\n").unwrap();
        assert_eq!(cmd.name(), Cmd::Set);
        assert_eq!(cmd.args.len(), 2);
        assert_eq!(cmd.args.collect::<Vec<_>>(), vec![&b"key"[..], b"value"]);
        let cmd = parse(b"ping\n").unwrap();
        assert_eq!(
            (cmd.name(), cmd.raw_name, cmd.args.len()),
            (Cmd::Ping, &b"ping"[..], 0)
        );
        let cmd = parse(b"get \"quoted\" x\r\n").unwrap();
        assert_eq!(cmd.args.collect::<Vec<_>>(), vec![&b"\"quoted\""[..], b"x"]);
    }

    #[test]
    fn resp_commands_parse_with_binary_args() {
        let req = VALID[3];
        let cmd = parse(req).unwrap();
        assert_eq!(cmd.name(), Cmd::Set);
        assert_eq!(cmd.args.collect::<Vec<_>>(), vec![&b"k"[..], b"a\r\nb"]);
        assert_eq!(
            parse(&req[..req.len() - 1]).unwrap_err(),
            RespError::Incomplete
        );
        let mut two = req.to_vec();
        two.extend_from_slice(req);
        assert_eq!(parse(&two).unwrap_err(), RespError::TrailingBytes);
        for name in ["lrange", "LRANGE", "lRaNgE"] {
            assert_eq!(parse(&enc(&[name.as_bytes()])).unwrap().name(), Cmd::Lrange);
        }
        assert_eq!(parse(&enc(&[b"getx"])).unwrap().name(), Cmd::Unknown);
    }

    #[test]
    fn malformed_requests_are_errors() {
        use RespError::*;
        let cases: &[(&[u8], usize, RespError)] = &[
            (b"+OK\r\n", MAX, UnexpectedType(b'+')),
            (b"$3\r\nfoo\r\n", MAX, UnexpectedType(b'$')),
            (b":1\r\n", MAX, UnexpectedType(b':')),
            (b"\x00\x01\x02", MAX, UnexpectedType(0)),
            (b"\r\n", MAX, UnexpectedType(b'\r')),
            (b" PING\r\n", MAX, UnexpectedType(b' ')),
            (b"*-5\r\n", MAX, InvalidMultibulkLength),
            (b"*-1\r\n", MAX, InvalidMultibulkLength),
            (b"*0\r\n", MAX, InvalidMultibulkLength),
            (b"*01\r\n", MAX, InvalidMultibulkLength),
            (b"*\r\n", MAX, InvalidMultibulkLength),
            (b"*1x\r\n", MAX, InvalidMultibulkLength),
            (b"*1\rx", MAX, MissingCrlf),
            (b"*1048577\r\n", MAX, TooManyArgs),
            (b"*1048577", MAX, TooManyArgs),
            (b"*99999999999999999999999999", MAX, TooManyArgs),
            (b"*1\r\n:1\r\n", MAX, ExpectedBulk(b':')),
            (b"*1\r\n*1\r\n$1\r\na\r\n", MAX, ExpectedBulk(b'*')),
            (b"*1\r\n$-1\r\n", MAX, InvalidBulkLength),
            (b"*1\r\n$+1\r\n", MAX, InvalidBulkLength),
            (b"*1\r\n$01\r\na\r\n", MAX, InvalidBulkLength),
            (b"*1\r\n$99999999999", MAX, TooLarge),
            (b"*1\r\n$99999999999\r\n", MAX, TooLarge),
            (
                b"*1\r\n$99999999999999999999999999\r\n",
                usize::MAX,
                TooLarge,
            ),
            (b"*1\r\n$4\r\nPINGXX", MAX, MissingCrlf),
            (b"*1\r\n$4\r\nPING\rX", MAX, MissingCrlf),
            (b"*1\r\n$4\r\nPING\n\r", MAX, MissingCrlf),
            (b"*1\r\n$4\nPING\r\n", MAX, InvalidBulkLength),
            (b"*1\r\n$11\r\n", 10, TooLarge),
            (b"*1\r\n$11", 10, TooLarge),
            (b"*2\r\n$5\r\nhello\r\n$5\r\nworld\r\n", 20, TooLarge),
            (b"*2\r\n$5\r\nhello\r\n$5\r\n", 20, TooLarge),
            (b"PING\x00\r\n", MAX, InvalidInline),
            (b"PING\rX", MAX, InvalidInline),
            (b"PING\x7f", MAX, InvalidInline),
            (b"PINGPINGPING", 8, TooLarge),
        ];
        for &(buf, max, ref want) in cases {
            assert_eq!(
                request_len(buf, max),
                Err(*want),
                "{:?}",
                String::from_utf8_lossy(buf)
            );
            let mut reply = Vec::new();
            want.write_reply(&mut reply);
            assert!(reply.starts_with(b"-ERR Protocol error: "));
            assert_one_frame(&reply);
        }
        // 10,000 arguments (a client loading a big hash): taken in both
        // syntaxes, as Redis takes them.
        let mut many = b"*10000\r\n".to_vec();
        for _ in 0..10_000 {
            many.extend_from_slice(b"$1\r\na\r\n");
        }
        assert_eq!(request_len(&many, usize::MAX), Ok(Some(many.len())));
        let inline = format!("MGET{}\r\n", " k".repeat(10_000));
        assert_eq!(
            request_len(inline.as_bytes(), usize::MAX),
            Ok(Some(inline.len()))
        );
        // A count past MAX_ARGS is refused from its header alone.
        let over = format!("*{}\r\n", MAX_ARGS + 1);
        assert_eq!(request_len(over.as_bytes(), usize::MAX), Err(TooManyArgs));
    }

    #[test]
    fn protocol_error_reply_texts() {
        let mut out = Vec::new();
        RespError::ExpectedBulk(b':').write_reply(&mut out);
        RespError::UnexpectedType(b'\r').write_reply(&mut out);
        RespError::InvalidMultibulkLength.write_reply(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "-ERR Protocol error: expected '$', got ':'\r\n\
             -ERR Protocol error: expected '*', got '\\x0d'\r\n\
             -ERR Protocol error: invalid multibulk length\r\n"
        );
    }

    #[test]
    fn execute_refuses_malformed_and_partial_requests() {
        let store = MemStore::new();
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        for bad in [
            &b"*1\r\n$4\r\nPIN"[..],
            b"$3\r\nfoo\r\n",
            b"*1\r\n$4\r\nPING\r\n*1",
        ] {
            assert!(execute(bad, &store, &mut out, &mut scratch).is_err());
        }
        assert!(out.is_empty());
        execute(b"PING\r\n", &store, &mut out, &mut scratch).unwrap();
        execute(b"set k v\n", &store, &mut out, &mut scratch).unwrap();
        execute(b"GET k\r\n", &store, &mut out, &mut scratch).unwrap();
        assert_eq!(out, b"+PONG\r\n+OK\r\n$1\r\nv\r\n");
    }

    fn arb_args() -> impl Strategy<Value = Vec<Vec<u8>>> {
        prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..12)
    }

    fn arb_inline() -> impl Strategy<Value = Vec<u8>> {
        (
            "[a-zA-Z][!-~]{0,8}",
            prop::collection::vec("[!-~\u{80}-\u{ff}]{1,8}", 0..6),
            prop::sample::select(vec!["\r\n", "\n"]),
            prop::collection::vec(prop::sample::select(vec![" ", "\t", "  "]), 6),
        )
            .prop_map(|(name, args, end, seps)| {
                let mut line = name;
                for (a, sep) in args.iter().zip(seps) {
                    line.push_str(sep);
                    line.push_str(a);
                }
                line.push_str(end);
                // `[\u{80}-\u{ff}]` is UTF-8 encoded: still bytes >= 0x80, allowed.
                line.into_bytes()
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn never_panics_on_arbitrary_bytes(
            buf in prop::collection::vec(any::<u8>(), 0..256),
            max in prop_oneof![Just(usize::MAX), 0usize..300],
        ) {
            if let Ok(Some(n)) = request_len(&buf, max) {
                prop_assert!(n <= buf.len() && n <= max);
                prop_assert!(parse(&buf[..n]).is_ok());
            }
            let _ = parse(&buf);
            let _ = classify(&buf);
        }

        #[test]
        fn near_valid_bytes_never_panic_and_execute_well_formed(
            args in arb_args(),
            flips in prop::collection::vec((any::<Index>(), any::<u8>()), 1..4),
            cut in any::<Index>(),
        ) {
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let mut buf = enc(&refs);
            for (at, byte) in flips {
                let i = at.index(buf.len());
                buf[i] = byte;
            }
            buf.truncate(cut.index(buf.len() + 1));
            if let Ok(Some(n)) = request_len(&buf, MAX) {
                let store = MemStore::new();
                let (mut out, mut scratch) = (Vec::new(), Vec::new());
                prop_assert!(execute(&buf[..n], &store, &mut out, &mut scratch).is_ok());
                assert_one_frame(&out);
                let _ = classify(&buf[..n]);
            }
        }

        #[test]
        fn valid_command_split_anywhere(
            args in arb_args(),
            split in any::<Index>(),
            tail in prop::collection::vec(any::<u8>(), 0..16),
        ) {
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let req = enc(&refs);
            let k = split.index(req.len()); // 0..len: a proper prefix
            prop_assert_eq!(request_len(&req[..k], MAX), Ok(None));
            let mut more = req.clone();
            more.extend_from_slice(&tail);
            prop_assert_eq!(request_len(&more, MAX), Ok(Some(req.len())));
            prop_assert_eq!(request_len(&req, req.len()), Ok(Some(req.len())));
            // Our parse agrees with redis-protocol's decoder.
            let (frame, used) = decode_range(&more).unwrap().unwrap();
            prop_assert_eq!(used, req.len());
            let RangeFrame::Array(items) = frame else { panic!("not an array") };
            let theirs: Vec<&[u8]> = items
                .iter()
                .map(|f| match f {
                    RangeFrame::BulkString((s, e)) => &req[*s..*e],
                    other => panic!("{other:?}"),
                })
                .collect();
            let cmd = parse(&req).unwrap();
            let mut ours = vec![cmd.raw_name];
            ours.extend(cmd.args);
            prop_assert_eq!(ours, theirs);
        }

        #[test]
        fn inline_command_split_anywhere(line in arb_inline(), split in any::<Index>()) {
            let k = split.index(line.len());
            prop_assert_eq!(request_len(&line[..k], MAX), Ok(None));
            prop_assert_eq!(request_len(&line, MAX), Ok(Some(line.len())));
            let cmd = parse(&line).unwrap();
            let expected: Vec<&[u8]> = line
                .split(|b| b" \t\r\n".contains(b))
                .filter(|t| !t.is_empty())
                .collect();
            prop_assert_eq!(cmd.args.len() + 1, expected.len());
            let mut ours = vec![cmd.raw_name];
            ours.extend(cmd.args);
            prop_assert_eq!(ours, expected);
        }
    }

    // ----------------------------------------------------------------- classification

    #[test]
    fn empty_lines_and_empty_arrays_are_skipped_whole() {
        assert_eq!(ignorable_prefix(b"\r\n\n*0\r\n*-1\r\n*1\r\n"), 12);
        assert_eq!(ignorable_prefix(b"*3\r\n"), 0);
        assert_eq!(ignorable_prefix(b"\r"), 0, "a partial line waits");
        assert_eq!(ignorable_prefix(b"*-"), 0);
        assert_eq!(ignorable_prefix(b""), 0);
    }

    #[test]
    fn classification() {
        let c = |line: &str| classify(&enc(&words(line)));
        assert_eq!(c("GET k"), 0);
        assert_eq!(c("SET k v"), 0);
        assert_eq!(c("PING"), 0);
        assert_eq!(c("MGET a b"), 0);
        let twenty = format!("MGET{}", " k".repeat(20));
        assert_eq!(c(&twenty), 1);
        assert_eq!(c(&format!("mget{}", " k".repeat(8))), 0);
        assert_eq!(c(&format!("mget{}", " k".repeat(9))), 1);
        assert_eq!(c(&format!("DEL{}", " k".repeat(9))), 1);
        assert_eq!(c(&format!("EXISTS{}", " k".repeat(9))), 1);
        assert_eq!(c(&format!("MSET{}", " k v".repeat(8))), 0);
        assert_eq!(c(&format!("MSET{}", " k v".repeat(9))), 1);
        assert_eq!(c("LRANGE l 0 99"), 2);
        assert_eq!(c("LRANGE l 0 9"), 0);
        assert_eq!(c("LRANGE l 0 31"), 0);
        assert_eq!(c("LRANGE l 0 32"), 2);
        assert_eq!(c("LRANGE l 0 -1"), 2);
        assert_eq!(c("LRANGE l 5 -1"), 2);
        assert_eq!(c("LRANGE l -10 -1"), 0);
        assert_eq!(c("LRANGE l -100 -1"), 2);
        assert_eq!(c("LRANGE l -1000 5"), 0);
        assert_eq!(c("LRANGE l -1000 50"), 2);
        assert_eq!(c("LRANGE l x 50"), 0);
        assert_eq!(c("LRANGE l 0"), 0);
        assert_eq!(classify(b"LRANGE l 0 -1\r\n"), 2);
        assert_eq!(classify(b"garbage"), 0);
        assert_eq!(TYPES[usize::from(c("LRANGE l 0 -1"))], "range");
    }

    // ----------------------------------------------------------------- execution

    #[test]
    fn transcript_strings_and_misc() {
        let s = MemStore::new();
        t(&s, "PING", b"+PONG\r\n");
        t(&s, "ping hello", b"$5\r\nhello\r\n");
        t(
            &s,
            "PING a b",
            b"-ERR wrong number of arguments for 'ping' command\r\n",
        );
        t(&s, "ECHO hi", b"$2\r\nhi\r\n");
        t(
            &s,
            "ECHO",
            b"-ERR wrong number of arguments for 'echo' command\r\n",
        );
        t(&s, "GET foo", b"$-1\r\n");
        t(&s, "SET foo bar", b"+OK\r\n");
        t(&s, "GET foo", b"$3\r\nbar\r\n");
        t(&s, "gEt foo", b"$3\r\nbar\r\n");
        t(&s, "GET FOO", b"$-1\r\n");
        t(
            &s,
            "GET",
            b"-ERR wrong number of arguments for 'get' command\r\n",
        );
        t(
            &s,
            "GET a b",
            b"-ERR wrong number of arguments for 'get' command\r\n",
        );
        t(
            &s,
            "SET foo",
            b"-ERR wrong number of arguments for 'set' command\r\n",
        );
        t(&s, "SET foo baz NX", b"$-1\r\n");
        t(&s, "SET fresh v XX", b"$-1\r\n");
        t(&s, "GET fresh", b"$-1\r\n");
        t(&s, "SET foo qux xx", b"+OK\r\n");
        t(&s, "SET foo v2 GET", b"$3\r\nqux\r\n");
        t(&s, "SET other v GET", b"$-1\r\n");
        t(&s, "SET foo v3 NX GET", b"$2\r\nv2\r\n");
        t(&s, "GET foo", b"$2\r\nv2\r\n");
        t(&s, "SET foo v KEEPTTL", b"+OK\r\n");
        t(&s, "SET foo v NX XX", b"-ERR syntax error\r\n");
        t(&s, "SET foo v BOGUS", b"-ERR syntax error\r\n");
        t(
            &s,
            "SET foo x EX 10",
            &[b"-", NO_EXPIRY.as_bytes(), b"\r\n"].concat(),
        );
        t(&s, "GET foo", b"$1\r\nv\r\n");
        t_words(&s, &[b"SET", b"empty", b""], b"+OK\r\n");
        t(&s, "GET empty", b"$0\r\n\r\n");
        t_words(&s, &[b"SET", b"bin\r\nkey", b"a\r\n\x00b"], b"+OK\r\n");
        t_words(&s, &[b"GET", b"bin\r\nkey"], b"$5\r\na\r\n\x00b\r\n");
        t(&s, "DEL foo missing", b":1\r\n");
        t(&s, "EXISTS foo", b":0\r\n");
        t(
            &s,
            "DEL",
            b"-ERR wrong number of arguments for 'del' command\r\n",
        );
        t(&s, "MSET a 1 b 2", b"+OK\r\n");
        t(
            &s,
            "MSET a 1 b",
            b"-ERR wrong number of arguments for 'mset' command\r\n",
        );
        t(&s, "MGET a nope b", b"*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n2\r\n");
        t(
            &s,
            "MGET",
            b"-ERR wrong number of arguments for 'mget' command\r\n",
        );
        t(&s, "EXISTS a a nope b", b":3\r\n");
        t(&s, "INCR a", b":2\r\n");
        t(&s, "INCR counter", b":1\r\n");
        t(&s, "INCR counter", b":2\r\n");
        t(&s, "GET counter", b"$1\r\n2\r\n");
        t(&s, "SET s abc", b"+OK\r\n");
        t(
            &s,
            "INCR s",
            b"-ERR value is not an integer or out of range\r\n",
        );
        t(&s, "SET lz 007", b"+OK\r\n");
        t(
            &s,
            "INCR lz",
            b"-ERR value is not an integer or out of range\r\n",
        );
        t(&s, "SET plus +1", b"+OK\r\n");
        t(
            &s,
            "INCR plus",
            b"-ERR value is not an integer or out of range\r\n",
        );
        t(&s, "SET neg -5", b"+OK\r\n");
        t(&s, "INCR neg", b":-4\r\n");
        t(&s, "SET min -9223372036854775808", b"+OK\r\n");
        t(&s, "INCR min", b":-9223372036854775807\r\n");
        t(&s, "SET big 9223372036854775807", b"+OK\r\n");
        t(
            &s,
            "INCR big",
            b"-ERR increment or decrement would overflow\r\n",
        );
        t(&s, "GET big", b"$19\r\n9223372036854775807\r\n");
        t(
            &s,
            "INCR",
            b"-ERR wrong number of arguments for 'incr' command\r\n",
        );
        t(&s, "CONFIG GET save", b"*0\r\n");
        t(&s, "config get appendonly", b"*0\r\n");
        t(
            &s,
            "CONFIG GET",
            b"-ERR wrong number of arguments for 'config|get' command\r\n",
        );
        t(
            &s,
            "CONFIG",
            b"-ERR wrong number of arguments for 'config' command\r\n",
        );
        t(
            &s,
            "CONFIG SET a b",
            b"-ERR unknown subcommand 'SET'. Try CONFIG HELP.\r\n",
        );
        t(&s, "COMMAND", b"*0\r\n");
        t(&s, "COMMAND DOCS", b"*0\r\n");
        t(&s, "HELLO 3", b"-NOPROTO this server speaks RESP2 only\r\n");
        t(&s, "HELLO", b"-NOPROTO this server speaks RESP2 only\r\n");
        t(&s, "SELECT 0", b"+OK\r\n");
        t(&s, "SELECT 1", b"-ERR DB index is out of range\r\n");
        t(
            &s,
            "SELECT x",
            b"-ERR value is not an integer or out of range\r\n",
        );
        t(
            &s,
            "SELECT",
            b"-ERR wrong number of arguments for 'select' command\r\n",
        );
        let mut info = Vec::new();
        push_bulk(&mut info, INFO);
        t(&s, "INFO", &info);
        t(&s, "INFO server", &info);
        t(
            &s,
            "FOO a b",
            b"-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n",
        );
        t(
            &s,
            "foo",
            b"-ERR unknown command 'foo', with args beginning with: \r\n",
        );
        t_words(
            &s,
            &[b"x\r\ny", b"a\nb"],
            b"-ERR unknown command 'x  y', with args beginning with: 'a b' \r\n",
        );
        // Argument text is cut at 128 bytes like Redis does.
        let long = "z".repeat(200);
        let got = exec_words(&s, &[b"nope", long.as_bytes(), b"next"]);
        let want = format!(
            "-ERR unknown command 'nope', with args beginning with: '{}' \r\n",
            "z".repeat(128)
        );
        assert_eq!(String::from_utf8(got).unwrap(), want);
    }

    #[test]
    fn transcript_lists() {
        let s = MemStore::new();
        t(&s, "RPUSH mylist a b c", b":3\r\n");
        t(
            &s,
            "LRANGE mylist 0 -1",
            b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",
        );
        t(&s, "LPUSH mylist x y", b":5\r\n");
        t(
            &s,
            "LRANGE mylist 0 -1",
            &bulks(&[b"y", b"x", b"a", b"b", b"c"]),
        );
        t(&s, "LLEN mylist", b":5\r\n");
        t(&s, "LRANGE mylist -2 -1", &bulks(&[b"b", b"c"]));
        t(&s, "LRANGE mylist 1 2", &bulks(&[b"x", b"a"]));
        t(&s, "LRANGE mylist 3 100", &bulks(&[b"b", b"c"]));
        t(&s, "LRANGE mylist -100 1", &bulks(&[b"y", b"x"]));
        t(&s, "LRANGE mylist -100 -100", b"*0\r\n");
        t(&s, "LRANGE mylist -3 2", &bulks(&[b"a"]));
        t(&s, "LRANGE mylist 5 10", b"*0\r\n");
        t(&s, "LRANGE mylist 2 1", b"*0\r\n");
        t(&s, "LRANGE mylist 0 0", &bulks(&[b"y"]));
        t(&s, "LRANGE nolist 0 -1", b"*0\r\n");
        t(
            &s,
            "LRANGE mylist a 1",
            b"-ERR value is not an integer or out of range\r\n",
        );
        t(
            &s,
            "LRANGE mylist 0",
            b"-ERR wrong number of arguments for 'lrange' command\r\n",
        );
        t(
            &s,
            "LPUSH mylist",
            b"-ERR wrong number of arguments for 'lpush' command\r\n",
        );
        t(
            &s,
            "RPUSH",
            b"-ERR wrong number of arguments for 'rpush' command\r\n",
        );
        t(&s, "LPOP mylist", b"$1\r\ny\r\n");
        t(&s, "RPOP mylist", b"$1\r\nc\r\n");
        t(&s, "LPOP mylist 2", &bulks(&[b"x", b"a"]));
        t(&s, "LPOP mylist 0", b"*0\r\n");
        t(
            &s,
            "LPOP mylist -1",
            b"-ERR value is out of range, must be positive\r\n",
        );
        t(
            &s,
            "LPOP mylist x",
            b"-ERR value is out of range, must be positive\r\n",
        );
        t(
            &s,
            "LPOP mylist 1 2",
            b"-ERR wrong number of arguments for 'lpop' command\r\n",
        );
        t(&s, "LLEN mylist", b":1\r\n");
        t(&s, "RPOP mylist 10", &bulks(&[b"b"]));
        t(&s, "LPOP mylist", b"$-1\r\n");
        t(&s, "RPOP mylist", b"$-1\r\n");
        t(&s, "LPOP mylist 1", b"*-1\r\n");
        t(&s, "LLEN mylist", b":0\r\n");
        t(
            &s,
            "LLEN",
            b"-ERR wrong number of arguments for 'llen' command\r\n",
        );
        t(&s, "EXISTS mylist", b":0\r\n");
        assert!(
            s.is_empty(),
            "an emptied list leaves no record: {:?}",
            s.records()
        );
    }

    #[test]
    fn strings_and_lists_share_one_key_space() {
        let s = MemStore::new();
        let wrong = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
        t(&s, "RPUSH l a b", b":2\r\n");
        t(&s, "SET s x", b"+OK\r\n");
        t(&s, "GET l", wrong);
        t(&s, "INCR l", wrong);
        t(&s, "SET l v GET", wrong);
        t(&s, "LPUSH s v", wrong);
        t(&s, "RPUSH s v", wrong);
        t(&s, "LRANGE s 0 -1", wrong);
        t(&s, "LLEN s", wrong);
        t(&s, "LPOP s", wrong);
        t(&s, "RPOP s 2", wrong);
        t(&s, "MGET l s", b"*2\r\n$-1\r\n$1\r\nx\r\n");
        t(&s, "EXISTS l s", b":2\r\n");
        t(&s, "SET l v NX", b"$-1\r\n");
        t(&s, "LLEN l", b":2\r\n");
        t(&s, "SET l str", b"+OK\r\n");
        t(&s, "GET l", b"$3\r\nstr\r\n");
        t(
            &s,
            "LLEN l",
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        );
        t(&s, "RPUSH l2 a b c", b":3\r\n");
        t(&s, "DEL l l2 s nope", b":3\r\n");
        assert!(s.is_empty(), "DEL removes every record: {:?}", s.records());
        t(&s, "RPUSH m a", b":1\r\n");
        t(&s, "MSET m 1 n 2", b"+OK\r\n");
        t(&s, "INCR m", b":2\r\n");
        assert_eq!(s.len(), 2, "MSET replaced the list: {:?}", s.records());
    }

    #[test]
    fn keys_starting_with_nul_are_escaped() {
        let s = MemStore::new();
        t(&s, "RPUSH mylist a", b":1\r\n");
        let meta: &[u8] = b"\x00Lmylist";
        t_words(&s, &[b"GET", meta], b"$-1\r\n");
        t_words(&s, &[b"SET", meta, b"x"], b"+OK\r\n");
        t_words(&s, &[b"GET", meta], b"$1\r\nx\r\n");
        t(&s, "LRANGE mylist 0 -1", &bulks(&[b"a"]));
        t_words(&s, &[b"INCR", b"\x00"], b":1\r\n");
        let keys: Vec<Vec<u8>> = s.records().into_iter().map(|(k, _)| k).collect();
        assert!(keys.contains(&b"\x00\x00Lmylist".to_vec()), "{keys:?}");
        assert!(keys.contains(&b"\x00\x00".to_vec()), "{keys:?}");
        t_words(&s, &[b"DEL", meta], b":1\r\n");
        t(&s, "LLEN mylist", b":1\r\n");
    }

    #[test]
    fn list_layout_is_as_documented() {
        let s = MemStore::new();
        t(&s, "RPUSH k b", b":1\r\n");
        t(&s, "LPUSH k a", b":2\r\n");
        let recs = s.records();
        let elem = |i: i64| {
            let mut key = b"\x00E\x00\x00\x00\x01k".to_vec();
            key.extend_from_slice(&((i as u64) ^ (1 << 63)).to_be_bytes());
            key
        };
        let mut meta = (-1i64).to_be_bytes().to_vec();
        meta.extend_from_slice(&1i64.to_be_bytes());
        assert_eq!(
            recs,
            vec![
                (elem(-1), b"a".to_vec()),
                (elem(0), b"b".to_vec()),
                (b"\x00Lk".to_vec(), meta),
            ]
        );
    }

    #[test]
    fn long_lists_and_negative_ranges() {
        let s = MemStore::new();
        let items: Vec<String> = (0..600).map(|i| format!("item-{i}")).collect();
        for chunk in items.chunks(100) {
            let mut w: Vec<&[u8]> = vec![b"RPUSH", b"big"];
            w.extend(chunk.iter().map(|x| x.as_bytes()));
            exec_words(&s, &w);
        }
        t(&s, "LLEN big", b":600\r\n");
        let all: Vec<&[u8]> = items.iter().map(|x| x.as_bytes()).collect();
        t(&s, "LRANGE big 0 599", &bulks(&all));
        t(&s, "LRANGE big 0 -1", &bulks(&all));
        t(&s, "LRANGE big -600 10000", &bulks(&all));
        t(&s, "LRANGE big -10 -1", &bulks(&all[590..]));
        t(&s, "LRANGE big 100 -101", &bulks(&all[100..500]));
        t(&s, "LRANGE big -1 -10", b"*0\r\n");
        // LPUSH pushes one at a time at the head: reversed order.
        let mut w: Vec<&[u8]> = vec![b"LPUSH", b"rev"];
        w.extend(all.iter().copied());
        t_words(&s, &w, b":600\r\n");
        let reversed: Vec<&[u8]> = all.iter().rev().copied().collect();
        t(&s, "LRANGE rev 0 599", &bulks(&reversed));
        t(&s, "RPOP rev", &bulks(&[b"item-0"])[4..]);
    }

    #[test]
    fn concurrent_incr_and_push() {
        let s = MemStore::new();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    let (mut out, mut scratch) = (Vec::new(), Vec::new());
                    let incr = enc(&[b"INCR", b"counter"]);
                    let push = enc(&[b"RPUSH", b"list", b"x"]);
                    for _ in 0..1000 {
                        out.clear();
                        execute(&incr, &s, &mut out, &mut scratch).unwrap();
                        assert_eq!(out[0], b':');
                        execute(&push, &s, &mut out, &mut scratch).unwrap();
                    }
                });
            }
        });
        t(&s, "GET counter", b"$4\r\n4000\r\n");
        t(&s, "LLEN list", b":4000\r\n");
        assert_eq!(s.len(), 4000 + 2);
    }

    #[test]
    fn store_errors_become_error_replies() {
        struct Broken;
        impl Store for Broken {
            fn get(&self, _: &[u8], _: &mut Vec<u8>) -> Result<bool, String> {
                Err("disk on fire\r\n".into())
            }
            fn put(&self, _: &[u8], _: &[u8]) -> Result<(), String> {
                Err("read-only".into())
            }
            fn delete(&self, _: &[u8]) -> Result<bool, String> {
                Err("read-only".into())
            }
            fn atomically<R>(&self, _: &[u8], f: impl FnOnce() -> R) -> R {
                f()
            }
            fn atomically_all<R>(&self, _: &[&[u8]], f: impl FnOnce() -> R) -> R {
                f()
            }
        }
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        execute(&enc(&[b"GET", b"k"]), &Broken, &mut out, &mut scratch).unwrap();
        assert_eq!(out, b"-ERR store error: disk on fire  \r\n");
        out.clear();
        execute(
            &enc(&[b"MGET", b"a", b"b"]),
            &Broken,
            &mut out,
            &mut scratch,
        )
        .unwrap();
        assert_eq!(
            out, b"-ERR store error: disk on fire  \r\n",
            "partial reply dropped"
        );
    }

    #[test]
    fn parse_i64_matches_string2ll() {
        for (s, v) in [
            ("0", Some(0)),
            ("1", Some(1)),
            ("-1", Some(-1)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("-9223372036854775809", None),
            ("-0", None),
            ("01", None),
            ("+1", None),
            (" 1", None),
            ("1 ", None),
            ("", None),
            ("-", None),
            ("1a", None),
        ] {
            assert_eq!(parse_i64(s.as_bytes()), v, "{s:?}");
        }
    }

    /// A store of known sizes: key -> elements.
    struct FixedSizes(&'static [(&'static str, usize)], usize);

    impl Sizes for FixedSizes {
        fn elements(&self, key: &[u8]) -> Option<usize> {
            Some(
                self.0
                    .iter()
                    .find(|(k, _)| k.as_bytes() == key)
                    .map_or(0, |&(_, n)| n),
            )
        }
        fn keys(&self) -> usize {
            self.1
        }
    }

    fn array(words: &[&str]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", words.len()).into_bytes();
        for w in words {
            out.extend_from_slice(format!("${}\r\n{w}\r\n", w.len()).as_bytes());
        }
        out
    }

    #[test]
    fn a_command_is_typed_by_the_elements_it_will_walk_where_sizes_are_known() {
        let sizes = FixedSizes(
            &[
                ("small", 3),
                ("mid", 500),
                ("huge", 100_000),
                ("s1", 6_000),
                ("s2", 6_000),
            ],
            200_000,
        );
        let sized =
            |words: &[&str]| classify_sized(&array(words), &mut 0, &sizes, Default::default());
        let by_name = |words: &[&str]| classify_in_stream(&array(words), &mut 0);
        for (words, expected) in [
            (&["HGETALL", "small"][..], TYPE_SHORT),
            (&["HGETALL", "mid"], TYPE_RANGE),
            (&["HGETALL", "huge"], TYPE_BIG),
            (&["SMEMBERS", "small"], TYPE_SHORT),
            (&["SMEMBERS", "huge"], TYPE_BIG),
            (&["LRANGE", "huge", "0", "-1"], TYPE_BIG),
            (&["LRANGE", "huge", "0", "9"], TYPE_SHORT),
            (&["LRANGE", "huge", "-100", "-1"], TYPE_RANGE),
            (&["LRANGE", "small", "0", "-1"], TYPE_SHORT),
            (&["ZRANGE", "huge", "-inf", "+inf", "BYSCORE"], TYPE_BIG),
            (&["SUNION", "s1", "s2"], TYPE_BIG),
            (&["SINTERCARD", "2", "s1", "s2"], TYPE_BIG),
            (&["ZRANGE", "huge", "0", "9", "BYSCORE"], TYPE_BIG),
            (&["SUNIONSTORE", "huge", "small", "small"], TYPE_SHORT),
            (&["SINTER", "small", "mid"], TYPE_RANGE),
            (&["KEYS", "*"], TYPE_BIG),
            (&["DEL", "huge"], TYPE_BIG),
            (&["DEL", "small"], TYPE_SHORT),
            (&["GET", "huge"], TYPE_SHORT),
            (
                &["MGET", "a", "b", "c", "d", "e", "f", "g", "h", "i"],
                TYPE_MULTI,
            ),
            (&["EVAL", "return 1", "0"], TYPE_SCRIPT),
        ] {
            assert_eq!(sized(words), expected, "{words:?}");
        }
        // Other bounds move the classes.
        let tight = crate::SizeBounds::new(2, 5).unwrap();
        let with = |words: &[&str]| classify_sized(&array(words), &mut 0, &sizes, tight);
        assert_eq!(with(&["HGETALL", "small"]), TYPE_RANGE);
        assert_eq!(with(&["HGETALL", "mid"]), TYPE_BIG);
        assert_eq!(with(&["DEL", "mid"]), TYPE_BIG);
        // A size that cannot be read without waiting: typed by name.
        struct Busy;
        impl Sizes for Busy {
            fn elements(&self, _: &[u8]) -> Option<usize> {
                None
            }
            fn keys(&self) -> usize {
                0
            }
        }
        let busy = |words: &[&str]| classify_sized(&array(words), &mut 0, &Busy, tight);
        assert_eq!(busy(&["HGETALL", "small"]), TYPE_RANGE);
        assert_eq!(busy(&["DEL", "huge"]), TYPE_SHORT);
        // Without sizes, by name as before: every HGETALL is "range".
        assert_eq!(by_name(&["HGETALL", "small"]), TYPE_RANGE);
        assert_eq!(by_name(&["HGETALL", "huge"]), TYPE_RANGE);
        // Inside MULTI a command is only queued: nothing is read.
        let mut state = 0;
        assert_eq!(
            classify_sized(&array(&["MULTI"]), &mut state, &sizes, Default::default()),
            TYPE_SHORT
        );
        assert_eq!(
            classify_sized(
                &array(&["HGETALL", "huge"]),
                &mut state,
                &sizes,
                Default::default()
            ),
            TYPE_SHORT
        );
    }

    #[test]
    fn each_script_is_typed_by_its_sha_and_the_scripts_past_seven_share_a_type() {
        let db = crate::db::Db::default();
        let sized = |words: &[&str]| {
            classify_sized(&array(words), &mut 0, &db, crate::SizeBounds::default())
        };
        let sha = |body: &str| sha1_smol::Sha1::from(body).digest().to_string();
        assert_eq!(sized(&["EVAL", "return 0", "0"]), TYPE_SCRIPT);
        // The same script by SHA, in either case, has the same type.
        assert_eq!(sized(&["EVALSHA", &sha("return 0"), "0"]), TYPE_SCRIPT);
        let upper = sha("return 0").to_ascii_uppercase();
        assert_eq!(sized(&["evalsha", &upper, "0"]), TYPE_SCRIPT);
        for i in 1..SCRIPT_TYPES {
            let body = format!("return {i}");
            let t = script_type(i);
            assert_eq!(sized(&["EVAL", &body, "0"]), t, "{body}");
            assert_eq!(sized(&["EVALSHA", &sha(&body), "0"]), t, "{body}");
            assert_eq!(TYPES[usize::from(t)], format!("script-{}", i + 1));
        }
        // Past the seventh script, every new one shares the last type.
        assert_eq!(
            sized(&["EVAL", "return 100", "0"]),
            script_type(SCRIPT_TYPES - 1)
        );
        assert_eq!(
            sized(&["EVAL", "return 101", "0"]),
            script_type(SCRIPT_TYPES - 1)
        );
        assert_eq!(sized(&["EVAL", "return 1", "0"]), script_type(1));
        // A name that is no SHA, and a server without sizes: "script".
        assert_eq!(sized(&["EVALSHA", "nope", "0"]), TYPE_SCRIPT);
        assert_eq!(
            classify_in_stream(&array(&["EVAL", "return 5", "0"]), &mut 0),
            TYPE_SCRIPT
        );
        assert_eq!(TYPES.len(), TYPE_MEAN_US.len());
        // INFO says which script has which type.
        let sessions = crate::commands::Sessions::new(1);
        let mut out = Vec::new();
        crate::Protocol::execute_db(
            &Resp,
            &array(&["INFO", "scripttypes"]),
            &db,
            &sessions,
            0,
            &mut out,
            &mut || {},
        )
        .unwrap();
        let info = String::from_utf8_lossy(&out);
        assert!(
            info.contains(&format!("script:{}\r\n", sha("return 0"))),
            "{info}"
        );
        assert!(
            info.contains(&format!("script-7:{}\r\n", sha("return 6"))),
            "{info}"
        );
        assert!(info.contains("script-8:every other script\r\n"), "{info}");
    }

    #[test]
    fn the_in_memory_store_answers_sizes() {
        let db = crate::db::Db::default();
        let sessions = crate::commands::Sessions::new(1);
        let mut out = Vec::new();
        for words in [&["RPUSH", "l", "a", "b", "c"][..], &["SET", "s", "v"]] {
            crate::Protocol::execute_db(
                &Resp,
                &array(words),
                &db,
                &sessions,
                0,
                &mut out,
                &mut || {},
            )
            .unwrap();
        }
        assert_eq!(Sizes::elements(&db, b"l"), Some(3));
        assert_eq!(Sizes::elements(&db, b"s"), Some(1));
        assert_eq!(Sizes::elements(&db, b"none"), Some(0));
        assert_eq!(Sizes::keys(&db), 2);
    }
}
