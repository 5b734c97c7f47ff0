//! Write your own protocol: a line protocol in one file, registered, then
//! framed, classified and executed as `psp serve` does with each request.
//!
//! The protocol: one request per text line, `get KEY`, `set KEY VALUE` or
//! `count` (how many keys the store holds). `count` is the expensive type,
//! so the scheduler sees two types: `short` (get, set) and `count`.
//!
//! In the crate, the protocol is this file as `src/line.rs` (with `pub mod
//! line;` in `lib.rs`) and one line in `PROTOCOLS`:
//!
//! ```text
//! ProtocolEntry::new("line", "a line per request over TCP", Tcp, &line::Line),
//! ```
//!
//! after which `psp serve --protocol line` registers its types, frames and
//! classifies on the net thread, and runs its commands on the in-memory
//! store (or RocksDB with `--store rocksdb`). Here the registry is extended
//! in the program instead, and the net thread's steps run by hand.
//!
//!     cargo run -p psp-proto --example line_protocol

use psp_proto::commands::Sessions;
use psp_proto::db::{Db, DbConfig, Entry, Value};
use psp_proto::{KvStore, PROTOCOLS, Protocol, ProtocolEntry, Refusal, Transport};

/// The protocol (no state: one instance serves every connection).
struct Line;

/// Index of `short` in [`TYPES`].
const SHORT: u16 = 0;
/// Index of `count` in [`TYPES`].
const COUNT: u16 = 1;
/// The scheduler's request types.
const TYPES: [&str; 2] = ["short", "count"];
/// What each is expected to cost (µs), before the scheduler measures.
const TYPE_MEAN_US: [f64; 2] = [1.0, 50.0];

/// A request's words: command, key, value (the rest of the line).
fn words(req: &[u8]) -> (&[u8], &[u8], &[u8]) {
    let line = req.strip_suffix(b"\n").unwrap_or(req);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut parts = line.splitn(3, |&b| b == b' ');
    let mut next = || parts.next().unwrap_or_default();
    (next(), next(), next())
}

impl Protocol for Line {
    fn types(&self) -> &'static [&'static str] {
        &TYPES
    }

    fn type_mean_us(&self) -> &'static [f64] {
        &TYPE_MEAN_US
    }

    fn request_len(&self, buf: &[u8], max: usize) -> Result<Option<usize>, Refusal> {
        match buf.iter().take(max).position(|&b| b == b'\n') {
            Some(_) if !buf[0].is_ascii_alphabetic() => Err(Refusal::Malformed),
            Some(end) => Ok(Some(end + 1)),
            None if buf.len() >= max => Err(Refusal::TooLarge),
            None => Ok(None),
        }
    }

    /// Blank lines between requests.
    fn ignorable_prefix(&self, buf: &[u8]) -> usize {
        buf.iter()
            .take_while(|&&b| b == b'\n' || b == b'\r')
            .count()
    }

    fn classify(&self, req: &[u8], _state: &mut u32) -> u16 {
        if words(req).0 == b"count" {
            COUNT
        } else {
            SHORT
        }
    }

    fn refusal(&self, refusal: Refusal, out: &mut Vec<u8>) {
        out.extend_from_slice(match refusal {
            Refusal::Overloaded => b"ERR busy\n".as_slice(),
            Refusal::TooLarge => b"ERR too large\n",
            Refusal::Malformed | Refusal::BadBody => b"ERR malformed\n",
            Refusal::UnknownType => b"ERR unknown type\n",
            Refusal::HandlerError => b"ERR internal\n",
            Refusal::MaxClients => b"ERR too many connections\n",
        });
    }

    fn service_name(&self) -> &'static str {
        "line"
    }

    fn commands_about(&self) -> &'static str {
        "line commands"
    }

    fn execute_db(
        &self,
        req: &[u8],
        db: &Db,
        _sessions: &Sessions,
        _session: u64,
        out: &mut Vec<u8>,
        _preempt: &mut dyn FnMut(),
    ) -> Result<(), &'static str> {
        match words(req) {
            (b"get", key, _) if !key.is_empty() => {
                // A read never waits for room (`grows: false`): no refusal.
                let value = match db.lock_one(key, false) {
                    Ok(mut g) => match g.get(key).map(|e| &e.value) {
                        Some(Value::Str(v)) => Some(v.clone()),
                        _ => None,
                    },
                    Err(_) => None,
                };
                match value {
                    Some(v) => {
                        out.extend_from_slice(b"VALUE ");
                        out.extend_from_slice(&v);
                        out.push(b'\n');
                    }
                    None => out.extend_from_slice(b"NONE\n"),
                }
            }
            (b"set", key, value) if !key.is_empty() => match db.lock_one(key, true) {
                Ok(mut g) => {
                    g.set(key, Entry::new(Value::Str(value.into())));
                    out.extend_from_slice(b"OK\n");
                }
                Err(_) => out.extend_from_slice(b"ERR full\n"),
            },
            (b"count", b"", _) => out.extend_from_slice(format!("{}\n", db.len()).as_bytes()),
            _ => out.extend_from_slice(b"ERR unknown command\n"),
        }
        Ok(())
    }

    fn execute_store(
        &self,
        req: &[u8],
        store: &dyn KvStore,
        out: &mut Vec<u8>,
        _scratch: &mut Vec<u8>,
    ) -> Result<(), &'static str> {
        let mut value = Vec::new();
        let reply: &[u8] = match words(req) {
            (b"get", key, _) if !key.is_empty() => match store.kv_get(key, &mut value) {
                Ok(true) => {
                    out.extend_from_slice(b"VALUE ");
                    out.extend_from_slice(&value);
                    b"\n"
                }
                Ok(false) => b"NONE\n",
                Err(_) => b"ERR store\n",
            },
            (b"set", key, value) if !key.is_empty() => match store.kv_put(key, value) {
                Ok(()) => b"OK\n",
                Err(_) => b"ERR store\n",
            },
            _ => b"ERR unknown command\n",
        };
        out.extend_from_slice(reply);
        Ok(())
    }
}

/// Registers the protocol, then serves a pipelined byte stream the way the
/// TCP front end does: skip, frame, classify, execute, answer.
fn main() {
    // The registry plus this program's line (in the crate: one line in
    // `PROTOCOLS`).
    let registry: Vec<ProtocolEntry> = PROTOCOLS
        .iter()
        .copied()
        .chain([ProtocolEntry::new(
            "line",
            "a line per request over TCP",
            Transport::Tcp,
            &Line,
        )])
        .collect();
    let entry = psp_proto::find_in(&registry, "line").expect("registered above");
    let protocol = entry.protocol;
    println!(
        "protocol {} ({}), types {:?}, expected {:?} us",
        entry.name,
        entry.about,
        protocol.types(),
        protocol.type_mean_us()
    );

    // A connection's input: pipelined requests, a blank line, a partial one.
    let mut input = b"set a 1\nset b 2\n\nget a\ncount\nget zz\nbogus\nget".to_vec();
    let (db, sessions) = (Db::new(DbConfig::default()), Sessions::new(1));
    let (mut state, mut replies, mut types) = (0u32, Vec::new(), Vec::new());
    loop {
        let skip = protocol.ignorable_prefix(&input);
        input.drain(..skip);
        let len = match protocol.request_len(&input, 1024) {
            Ok(Some(len)) => len,
            Ok(None) => break,
            Err(r) => panic!("the stream is well framed: {r:?}"),
        };
        let req = &input[..len];
        types.push(TYPES[usize::from(protocol.classify(req, &mut state))]);
        protocol
            .execute_db(req, &db, &sessions, 0, &mut replies, &mut || {})
            .expect("one framed request");
        input.drain(..len);
    }
    let replies = String::from_utf8(replies).expect("text");
    print!("types {types:?}\nreplies:\n{replies}");
    println!(
        "left in the input (incomplete): {:?}",
        String::from_utf8_lossy(&input)
    );
    assert_eq!(
        types,
        ["short", "short", "short", "count", "short", "short"]
    );
    assert_eq!(replies, "OK\nOK\nVALUE 1\n2\nNONE\nERR unknown command\n");
    assert_eq!(input, b"get");

    // The same commands over any store (RocksDB in the key-value application).
    let store = psp_proto::store::MemStore::new();
    let (mut out, mut scratch) = (Vec::new(), Vec::new());
    for req in [&b"set k v\n"[..], b"get k\n", b"get nope\n"] {
        protocol
            .execute_store(req, &store, &mut out, &mut scratch)
            .expect("one framed request");
    }
    assert_eq!(out, b"OK\nVALUE v\nNONE\n");

    // What the server answers in its place when it refuses one.
    let mut refusal = Vec::new();
    protocol.refusal(Refusal::Overloaded, &mut refusal);
    assert_eq!(refusal, b"ERR busy\n");
    println!("ok");
}

#[test]
fn the_example_runs() {
    main();
}
