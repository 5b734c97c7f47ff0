//! A key-value service over an embedded RocksDB (the real library, linked from
//! the system's librocksdb): a database at a configurable path (a fresh
//! temporary directory by default, removed when the service ends), loaded at
//! start with `keys` keys, serving GET, SCAN and PUT. Perséphone's RocksDB
//! experiment (GET vs SCAN over 5,000 keys) and SYNERGY's LevelDB one (1,000
//! keys, a SCAN walks all) are both this service with different options.
//!
//! Keys are `key:` and a 12-digit index (16 bytes, so the key order is the
//! index order); the loaded values are `value_bytes` bytes derived from the
//! index. Request bodies (little-endian):
//!
//! ```text
//! GET   key                                   1..=128 bytes
//! PUT   key_len u8 (1..=128), key, value      value: the rest (may be empty)
//! SCAN  limit u32 (0: no limit), start_len u8 (0: from the first key),
//!       start key, end key (the rest; empty: to the last key; exclusive)
//! ```
//!
//! A SCAN visits at most `--kv-max-scan` keys (default: 10 times the keys
//! loaded, at least 10,000), whatever its limit says: clients can PUT keys, and
//! the work one request asks for stays bounded. A client that wants more
//! continues from the last key it got.
//!
//! Responses: GET `1, value` when the key exists, `0` when it does not; PUT
//! `1`; SCAN `count u32, digest u64` ([`digest`] over every key and value
//! visited, in order), then the first and the last key visited, each as
//! `len u8, key` (empty when nothing was visited). A body that does not parse
//! is BAD_REQUEST; a RocksDB error is HANDLER_ERROR.
//!
//! Each worker keeps what RocksDB lets it reuse: its read and write options
//! and its response buffer. A SCAN creates its iterator: an iterator pins the
//! database version it was created on, so one kept across requests would not
//! see later PUTs (and the crate consumes the read options of an iterator);
//! creating one costs about a microsecond, against a millisecond of scanning.
//!
//! A SCAN reaches a preemption point after every key (when the request runs on
//! a green thread, `psp_runtime::green`): it may be suspended there, holding
//! its iterator, and go on on another worker. A RocksDB iterator keeps no
//! thread-local state between calls (the version it pins is
//! reference-counted), and no key or value slice is held across the point.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use psp_core::TypeId;
use psp_runtime::{BodyEncoder, Handler, HandlerError, Preemption, RequestContext};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use rocksdb::{DB, Options, ReadOptions, WriteBatch, WriteOptions};

use crate::{App, AppConfig, AppEntry, AppError, AppOptions, Service, check_range, operation_of};

/// The operations, in operation-index order.
pub const OPERATIONS: [&str; 3] = ["GET", "SCAN", "PUT"];
/// Index of GET in [`OPERATIONS`].
pub const GET: usize = 0;
/// Index of SCAN in [`OPERATIONS`].
pub const SCAN: usize = 1;
/// Index of PUT in [`OPERATIONS`].
pub const PUT: usize = 2;
/// Perséphone's RocksDB mix: half GETs, half SCANs.
pub const DEFAULT_MIX: [(&str, f64); 2] = [("GET", 0.5), ("SCAN", 0.5)];

/// Bytes of a generated key.
pub const KEY_BYTES: usize = 16;
/// Longest key a request may carry.
pub const MAX_KEY_BYTES: usize = 128;
/// Fewest keys loaded at start.
pub const MIN_KEYS: u64 = 1;
/// Most keys loaded at start (a few seconds of loading).
pub const MAX_KEYS: u64 = 1_000_000;
/// Shortest loaded value.
pub const MIN_VALUE_BYTES: u64 = 1;
/// Largest `--kv-max-scan` (a SCAN of 10 million keys takes seconds).
pub const MAX_SCAN_KEYS: u64 = 10_000_000;
/// Longest loaded (and generated PUT) value: a generated PUT must fit the
/// generator's body buffer.
pub const MAX_VALUE_BYTES: u64 = 200;

/// The key-value service's options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvConfig {
    /// Where the database lives; `None`: a fresh temporary directory, removed
    /// when the service ends.
    pub path: Option<PathBuf>,
    /// Keys loaded at start (and the range generated requests draw keys from).
    pub keys: u64,
    /// Bytes of each loaded value (and of generated PUTs' values).
    pub value_bytes: u64,
    /// Most keys one SCAN visits, whatever its limit says (clients can PUT
    /// keys, so a whole-database SCAN would otherwise cost what they make it
    /// cost); `None`: 10 times the keys loaded, at least 10,000.
    pub max_scan_keys: Option<u64>,
}

impl Default for KvConfig {
    fn default() -> Self {
        Self {
            path: None,
            keys: 5_000,
            value_bytes: 64,
            max_scan_keys: None,
        }
    }
}

impl KvConfig {
    /// Checks every option against its range.
    ///
    /// # Errors
    /// [`AppError::Range`] naming the option.
    pub fn validate(&self) -> Result<(), AppError> {
        check_range("--kv-keys", self.keys, MIN_KEYS, MAX_KEYS)?;
        check_range(
            "--kv-value-bytes",
            self.value_bytes,
            MIN_VALUE_BYTES,
            MAX_VALUE_BYTES,
        )?;
        if let Some(m) = self.max_scan_keys {
            check_range("--kv-max-scan", m, 1, MAX_SCAN_KEYS)?;
        }
        Ok(())
    }

    /// The bound on the keys one SCAN visits.
    pub fn scan_bound(&self) -> u32 {
        let m = self
            .max_scan_keys
            .unwrap_or_else(|| self.keys.saturating_mul(10).max(10_000));
        m.min(MAX_SCAN_KEYS) as u32
    }
}

impl KvConfig {
    /// The options `options` gives (`kv_path`, `kv_keys`, `kv_value_bytes`,
    /// `kv_max_scan`), each missing one at its default; nothing checked.
    pub fn from_options(options: &AppOptions) -> Self {
        let d = Self::default();
        Self {
            path: options.path("kv_path").map(Path::to_path_buf),
            keys: options.count("kv_keys").unwrap_or(d.keys),
            value_bytes: options.count("kv_value_bytes").unwrap_or(d.value_bytes),
            max_scan_keys: options.count("kv_max_scan"),
        }
    }
}

/// The registry's entry of the key-value application.
pub const ENTRY: AppEntry = AppEntry {
    name: "kv",
    about: "RocksDB key-value store",
    default_mix: &DEFAULT_MIX,
    workload_options: &["kv_keys", "kv_value_bytes"],
    configure: |o: &AppOptions| AppConfig::new(KvConfig::from_options(o)),
};

impl App for KvConfig {
    fn name(&self) -> &'static str {
        "kv"
    }

    fn operations(&self) -> Option<&'static [&'static str]> {
        Some(&OPERATIONS)
    }

    fn validate(&self) -> Result<(), AppError> {
        KvConfig::validate(self)
    }

    /// The database's size and values: what GET and SCAN cost.
    fn options(&self) -> Vec<(&'static str, u64)> {
        vec![("kv_keys", self.keys), ("kv_value_bytes", self.value_bytes)]
    }

    fn encoder(&self, ops: Vec<usize>, seed: u64) -> Box<dyn BodyEncoder> {
        Box::new(KvEncoder::new(self, ops, seed))
    }

    fn service(&self, ops: Vec<usize>) -> Result<Arc<dyn Service>, AppError> {
        Ok(Arc::new(KvService::open(self, ops)?))
    }
}

/// The key of index `i`: `key:` and 12 decimal digits.
pub fn key_of(i: u64) -> [u8; KEY_BYTES] {
    let mut k = *b"key:000000000000";
    let mut v = i;
    for b in k[4..].iter_mut().rev() {
        *b = b'0' + (v % 10) as u8;
        v /= 10;
    }
    k
}

/// The loaded value of key `i`, into `out`.
fn value_of(i: u64, bytes: u64, out: &mut Vec<u8>) {
    out.clear();
    out.extend((0..bytes).map(|j| (i.wrapping_mul(31).wrapping_add(j * 7) % 251) as u8));
}

/// A SCAN request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scan<'a> {
    /// At most this many keys; 0: no limit.
    pub limit: u32,
    /// First key (inclusive); empty: the first key of the database.
    pub start: &'a [u8],
    /// Upper bound (exclusive); empty: none.
    pub end: &'a [u8],
}

impl<'a> Scan<'a> {
    /// Parses a SCAN body.
    ///
    /// # Errors
    /// A body shorter than its fields, or a key longer than
    /// [`MAX_KEY_BYTES`].
    pub fn parse(body: &'a [u8]) -> Result<Self, HandlerError> {
        let bad = HandlerError::BadBody("SCAN: limit u32, start_len u8, start key, end key");
        let (limit, rest) = body.split_first_chunk::<4>().ok_or(bad)?;
        let (&start_len, rest) = rest.split_first().ok_or(bad)?;
        let start_len = usize::from(start_len);
        if start_len > MAX_KEY_BYTES || rest.len() - rest.len().min(start_len) > MAX_KEY_BYTES {
            return Err(HandlerError::BadBody("SCAN: a key longer than 128 bytes"));
        }
        let (start, end) = rest.split_at_checked(start_len).ok_or(bad)?;
        Ok(Self {
            limit: u32::from_le_bytes(*limit),
            start,
            end,
        })
    }

    /// Appends the body of this SCAN to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.limit.to_le_bytes());
        out.push(self.start.len() as u8);
        out.extend_from_slice(self.start);
        out.extend_from_slice(self.end);
    }
}

/// A PUT body: `key_len u8, key, value`.
pub fn encode_put(key: &[u8], value: &[u8], out: &mut Vec<u8>) {
    out.push(key.len() as u8);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

fn parse_put(body: &[u8]) -> Result<(&[u8], &[u8]), HandlerError> {
    let (&len, rest) = body
        .split_first()
        .ok_or(HandlerError::BadBody("PUT: key_len u8, key, value"))?;
    if len == 0 || usize::from(len) > MAX_KEY_BYTES {
        return Err(HandlerError::BadBody("PUT: key of 1 to 128 bytes"));
    }
    rest.split_at_checked(usize::from(len))
        .ok_or(HandlerError::BadBody("PUT: body shorter than its key"))
}

/// The SCAN digest: folds `bytes` into `h` eight bytes at a time (a
/// multiply-rotate mix: cheap next to reading the pair, unlike a byte-wise
/// hash, which cost a third of a 5,000-key scan).
#[inline]
pub fn digest(mut h: u64, bytes: &[u8]) -> u64 {
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().expect("8-byte chunk"));
        h = (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    let w = u64::from_le_bytes(tail) ^ ((bytes.len() as u64) << 56);
    (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
}

/// The digest's starting value.
pub const DIGEST_SEED: u64 = 0xcbf2_9ce4_8422_2325;

/// A SCAN response, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanReply {
    /// Keys visited.
    pub count: u32,
    /// [`digest`] over every key and value visited, in order.
    pub digest: u64,
    /// First key visited.
    pub first: Vec<u8>,
    /// Last key visited.
    pub last: Vec<u8>,
}

impl ScanReply {
    /// Parses a SCAN response body.
    pub fn parse(b: &[u8]) -> Option<Self> {
        let (count, rest) = b.split_first_chunk::<4>()?;
        let (digest, rest) = rest.split_first_chunk::<8>()?;
        let (&fl, rest) = rest.split_first()?;
        let (first, rest) = rest.split_at_checked(usize::from(fl))?;
        let (&ll, rest) = rest.split_first()?;
        let (last, rest) = rest.split_at_checked(usize::from(ll))?;
        rest.is_empty().then(|| Self {
            count: u32::from_le_bytes(*count),
            digest: u64::from_le_bytes(*digest),
            first: first.to_vec(),
            last: last.to_vec(),
        })
    }
}

/// The database and, for a temporary one, its directory (removed after the
/// database closes: fields drop in order).
struct Store {
    db: DB,
    path: PathBuf,
    _temp: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

/// The key-value service, started: an open, loaded database.
#[derive(Debug)]
pub struct KvService {
    store: Arc<Store>,
    ops: Arc<[usize]>,
    keys: u64,
    scan_bound: u32,
}

/// A RocksDB error as one line.
fn one_line(e: &rocksdb::Error) -> String {
    e.to_string().replace('\n', " ")
}

impl KvService {
    /// Opens (creating it if needed) the database of `config` and loads its
    /// keys; `ops` maps type ids to operations ([`crate::AppConfig::bind`]).
    ///
    /// # Errors
    /// Options out of range; a path that cannot be created or opened.
    pub fn open(config: &KvConfig, ops: Vec<usize>) -> Result<Self, AppError> {
        config.validate()?;
        let (path, temp) = match &config.path {
            Some(p) => (p.clone(), None),
            None => {
                let t = tempfile::Builder::new()
                    .prefix("psp-kv-")
                    .tempdir()
                    .map_err(|e| {
                        AppError::Setup(format!(
                            "cannot create a temporary database directory: {e}"
                        ))
                    })?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        let mut opts = Options::default();
        opts.create_if_missing(true);
        let db = DB::open(&opts, &path).map_err(|e| {
            AppError::Setup(format!(
                "cannot open a RocksDB database at '{}': {}",
                path.display(),
                one_line(&e)
            ))
        })?;
        load(&db, config).map_err(|e| {
            AppError::Setup(format!(
                "cannot load the database at '{}': {}",
                path.display(),
                one_line(&e)
            ))
        })?;
        Ok(Self {
            store: Arc::new(Store {
                db,
                path,
                _temp: temp,
            }),
            ops: ops.into(),
            keys: config.keys,
            scan_bound: config.scan_bound(),
        })
    }

    /// Where the database is.
    pub fn path(&self) -> &Path {
        &self.store.path
    }
}

/// Writes the keys in batches, then flushes and compacts them into one sorted
/// run, so reads go through SST files and the block cache as in a database
/// that has been running, not only the memtable.
fn load(db: &DB, config: &KvConfig) -> Result<(), rocksdb::Error> {
    let mut value = Vec::with_capacity(config.value_bytes as usize);
    let mut batch = WriteBatch::default();
    for i in 0..config.keys {
        value_of(i, config.value_bytes, &mut value);
        batch.put(key_of(i), &value);
        if batch.len() == 10_000 {
            db.write(std::mem::take(&mut batch))?;
        }
    }
    db.write(batch)?;
    db.flush()?;
    db.compact_range(None::<&[u8]>, None::<&[u8]>);
    Ok(())
}

impl Service for KvService {
    fn app(&self) -> &'static str {
        "kv"
    }

    fn handler(&self, _worker: usize) -> Box<dyn Handler> {
        Box::new(KvHandler {
            store: self.store.clone(),
            ops: self.ops.clone(),
            read: ReadOptions::default(),
            write: WriteOptions::default(),
            scan_bound: self.scan_bound,
        })
    }

    fn describe(&self) -> String {
        format!(
            "RocksDB key-value store at '{}', {} keys loaded, at most {} keys per SCAN",
            self.store.path.display(),
            self.keys,
            self.scan_bound
        )
    }
}

/// A worker's handle on the database.
pub struct KvHandler {
    store: Arc<Store>,
    ops: Arc<[usize]>,
    read: ReadOptions,
    write: WriteOptions,
    scan_bound: u32,
}

impl KvHandler {
    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<(), HandlerError> {
        if key.is_empty() || key.len() > MAX_KEY_BYTES {
            return Err(HandlerError::BadBody("GET: a key of 1 to 128 bytes"));
        }
        match self.store.db.get_pinned_opt(key, &self.read) {
            Ok(Some(v)) => {
                out.push(1);
                out.extend_from_slice(&v);
                Ok(())
            }
            Ok(None) => {
                out.push(0);
                Ok(())
            }
            Err(_) => Err(HandlerError::Failed("RocksDB read failed")),
        }
    }

    fn put(&self, body: &[u8], out: &mut Vec<u8>) -> Result<(), HandlerError> {
        let (key, value) = parse_put(body)?;
        self.store
            .db
            .put_opt(key, value, &self.write)
            .map_err(|_| HandlerError::Failed("RocksDB write failed"))?;
        out.push(1);
        Ok(())
    }

    fn scan(
        &self,
        body: &[u8],
        out: &mut Vec<u8>,
        preempt: Preemption<'_>,
    ) -> Result<(), HandlerError> {
        let scan = Scan::parse(body)?;
        // SYNERGY's feedback: a SCAN is the long request (the thesis's
        // RocksDB and LevelDB apps call it around their SCAN loop); inert
        // under other policies. The worker disarms the timer when the
        // request ends, whichever way.
        preempt.feedback_start();
        let mut read = ReadOptions::default();
        if !scan.end.is_empty() {
            read.set_iterate_upper_bound(scan.end);
        }
        let mut it = self.store.db.raw_iterator_opt(read);
        if scan.start.is_empty() {
            it.seek_to_first();
        } else {
            it.seek(scan.start);
        }
        // A SCAN visits at most the server's bound: a client that wants more
        // continues from the last key it got.
        let limit = match scan.limit {
            0 => self.scan_bound,
            l => l.min(self.scan_bound),
        };
        let (mut count, mut digest) = (0u32, DIGEST_SEED);
        let digest_of = self::digest;
        // Room for the header; the first and last keys follow.
        out.extend_from_slice(&[0; 12]);
        out.push(0);
        let mut last_start = out.len();
        while count < limit && it.valid() {
            let (Some(k), Some(v)) = (it.key(), it.value()) else {
                break;
            };
            digest = digest_of(digest_of(digest, k), v);
            if count == 0 {
                out[12] = k.len() as u8;
                out.extend_from_slice(k);
                last_start = out.len();
            }
            // The last key so far: overwritten as the scan moves on.
            out.truncate(last_start);
            out.push(k.len() as u8);
            out.extend_from_slice(k);
            count += 1;
            it.next();
            // No slice of the iterator is held here (module docs).
            preempt.point();
        }
        if it.status().is_err() {
            return Err(HandlerError::Failed("RocksDB scan failed"));
        }
        if count == 0 {
            out.push(0);
        }
        out[..4].copy_from_slice(&count.to_le_bytes());
        out[4..12].copy_from_slice(&digest.to_le_bytes());
        preempt.feedback_finished();
        Ok(())
    }
}

impl Handler for KvHandler {
    fn handle(&mut self, ctx: &mut RequestContext<'_>) -> Result<(), HandlerError> {
        match operation_of(&self.ops, ctx.type_id) {
            Some(GET) => self.get(ctx.body, ctx.response),
            Some(SCAN) => self.scan(ctx.body, ctx.response, ctx.preempt),
            Some(PUT) => self.put(ctx.body, ctx.response),
            _ => Err(HandlerError::BadBody("not a key-value operation")),
        }
    }

    /// SCAN's point is between keys: it holds the RocksDB iterator (usable
    /// from any thread, one at a time) and no key or value slice.
    fn fiber_safe(&self) -> bool {
        true
    }
}

/// Writes generated requests: GETs and PUTs of uniformly drawn loaded keys,
/// SCANs of the whole database.
pub struct KvEncoder {
    ops: Vec<usize>,
    keys: u64,
    value_bytes: u64,
    rng: SmallRng,
    value: Vec<u8>,
}

impl KvEncoder {
    /// An encoder for `config`'s database, with `ops` from
    /// [`crate::AppConfig::bind`].
    pub fn new(config: &KvConfig, ops: Vec<usize>, seed: u64) -> Self {
        Self {
            ops,
            keys: config.keys,
            value_bytes: config.value_bytes,
            rng: SmallRng::seed_from_u64(seed),
            value: Vec::with_capacity(config.value_bytes as usize),
        }
    }
}

impl BodyEncoder for KvEncoder {
    fn encode(&mut self, type_id: TypeId, _service_ns: u64, out: &mut Vec<u8>) {
        match operation_of(&self.ops, type_id) {
            Some(GET) => out.extend_from_slice(&key_of(self.rng.random_range(0..self.keys))),
            Some(SCAN) => Scan {
                limit: 0,
                start: &[],
                end: &[],
            }
            .encode(out),
            Some(PUT) => {
                let i = self.rng.random_range(0..self.keys);
                let salt: u64 = self.rng.random();
                value_of(i ^ salt, self.value_bytes, &mut self.value);
                encode_put(&key_of(i), &self.value, out);
            }
            // A type outside the workload: an empty body (answered BAD_REQUEST).
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_in_index_order() {
        assert_eq!(&key_of(42), b"key:000000000042");
        assert!(key_of(9) < key_of(10));
        assert!(key_of(999_999) < key_of(1_000_000));
    }

    #[test]
    fn scan_bodies_round_trip_and_bad_ones_are_refused() {
        let s = Scan {
            limit: 7,
            start: b"key:1",
            end: b"key:2",
        };
        let mut b = Vec::new();
        s.encode(&mut b);
        assert_eq!(Scan::parse(&b), Ok(s));
        for cut in 0..5 {
            assert!(Scan::parse(&b[..cut]).is_err(), "{cut}");
        }
        // start_len beyond the body
        assert!(Scan::parse(&[0, 0, 0, 0, 9, 1]).is_err());
        let long = [vec![0, 0, 0, 0, 0], vec![b'k'; 129]].concat();
        assert!(Scan::parse(&long).is_err());
    }
}

/// The key-value service behind a request protocol of the registry (`psp
/// serve --protocol resp` or `memcache` with `--store rocksdb`): the same
/// RocksDB database (and options), with the protocol's commands
/// ([`psp_proto::Protocol::execute_store`]) over it. Read-modify-write
/// commands (INCR, list pushes and pops, memcached's cas) hold one of
/// [`REDIS_LOCK_STRIPES`] locks, by key.
#[derive(Debug)]
pub struct ProtocolService {
    store: Arc<Store>,
    locks: Arc<[std::sync::Mutex<()>]>,
    keys: u64,
    protocol: &'static dyn psp_proto::Protocol,
}

/// Lock stripes of [`ProtocolService`]'s read-modify-write commands.
pub const REDIS_LOCK_STRIPES: usize = 64;

impl ProtocolService {
    /// Opens (creating it if needed) and loads the database of `config`, to
    /// serve `protocol`'s commands.
    ///
    /// # Errors
    /// As [`KvService::open`].
    pub fn open(
        protocol: &'static dyn psp_proto::Protocol,
        config: &KvConfig,
    ) -> Result<Self, AppError> {
        let kv = KvService::open(config, Vec::new())?;
        Ok(Self {
            store: kv.store,
            locks: (0..REDIS_LOCK_STRIPES)
                .map(|_| std::sync::Mutex::new(()))
                .collect(),
            keys: config.keys,
            protocol,
        })
    }

    /// Where the database is.
    pub fn path(&self) -> &Path {
        &self.store.path
    }
}

impl Service for ProtocolService {
    fn app(&self) -> &'static str {
        self.protocol.service_name()
    }

    fn handler(&self, _worker: usize) -> Box<dyn Handler> {
        Box::new(ProtocolHandler {
            db: RocksKv {
                store: self.store.clone(),
                locks: self.locks.clone(),
                read: ReadOptions::default(),
                write: WriteOptions::default(),
            },
            scratch: Vec::new(),
            protocol: self.protocol,
        })
    }

    fn describe(&self) -> String {
        format!(
            "{} over the RocksDB key-value store at '{}' ({} keys loaded)",
            self.protocol.commands_about(),
            self.store.path.display(),
            self.keys
        )
    }
}

/// A worker's view of the database as [`psp_proto::store::Store`].
struct RocksKv {
    store: Arc<Store>,
    locks: Arc<[std::sync::Mutex<()>]>,
    read: ReadOptions,
    write: WriteOptions,
}

impl psp_proto::store::Store for RocksKv {
    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, String> {
        match self.store.db.get_pinned_opt(key, &self.read) {
            Ok(Some(v)) => {
                out.extend_from_slice(&v);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e) => Err(one_line(&e)),
        }
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.store
            .db
            .put_opt(key, value, &self.write)
            .map_err(|e| one_line(&e))
    }

    fn delete(&self, key: &[u8]) -> Result<bool, String> {
        // RocksDB's delete does not say whether the key was there.
        let existed = self
            .store
            .db
            .get_pinned_opt(key, &self.read)
            .map_err(|e| one_line(&e))?
            .is_some();
        if existed {
            self.store
                .db
                .delete_opt(key, &self.write)
                .map_err(|e| one_line(&e))?;
        }
        Ok(existed)
    }

    fn atomically<R>(&self, key: &[u8], f: impl FnOnce() -> R) -> R {
        let stripe = digest(DIGEST_SEED, key) as usize % self.locks.len();
        // A poisoned stripe (a panicked handler) still serializes.
        let _held = self.locks[stripe]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f()
    }

    fn atomically_all<R>(&self, keys: &[&[u8]], f: impl FnOnce() -> R) -> R {
        let stripes = psp_proto::store::stripes_of(keys, self.locks.len(), |k| {
            digest(DIGEST_SEED, k) as usize
        });
        // In ascending stripe order, as every caller: no circular wait.
        let _held: Vec<_> = stripes
            .into_iter()
            .map(|i| {
                self.locks[i]
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
            })
            .collect();
        f()
    }
}

/// A worker's handler: the request is one command of the protocol (the
/// front end framed it); so is the reply (empty for memcached's `noreply`).
struct ProtocolHandler {
    db: RocksKv,
    scratch: Vec<u8>,
    protocol: &'static dyn psp_proto::Protocol,
}

impl Handler for ProtocolHandler {
    fn handle(&mut self, ctx: &mut RequestContext<'_>) -> Result<(), HandlerError> {
        let (protocol, db, scratch, body) = (self.protocol, &self.db, &mut self.scratch, ctx.body);
        crate::answer_panics(ctx.response, |response| {
            protocol
                .execute_store(body, db, response, scratch)
                .map_err(HandlerError::BadBody)
        })
    }

    /// No preemption point: a command runs to its end (its stripe lock is
    /// never held across a yield).
    fn fiber_safe(&self) -> bool {
        true
    }
}
