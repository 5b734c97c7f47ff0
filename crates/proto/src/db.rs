//! The in-memory database behind `psp serve --protocol resp|memcache`: Redis's
//! data types (strings, lists, hashes, sets, sorted sets) in one keyspace,
//! with expiry, a memory bound and eviction, shared by every worker.
//!
//! The keyspace is [`SHARDS`] shards, each a `hashbrown` map under a
//! `parking_lot` mutex (`benches/maps.rs` measures this against `dashmap` and
//! `scc`). A command locks the shards of the keys it touches, in ascending
//! shard order (so two commands never wait for each other in a circle), does
//! all its work, and unlocks: every command is atomic on its keys, whatever
//! worker runs it and whatever runs beside it. A transaction (`MULTI`/`EXEC`)
//! locks every shard.
//!
//! # Preemption
//! A [`Guard`] is never held across a preemption point: a command that may
//! run long (SCAN, KEYS, FLUSHALL) takes one shard at a time and reaches its
//! points between shards, holding nothing. So a preempted request holds no
//! lock and cannot deadlock the request that runs after it on the same
//! worker.
//!
//! # Expiry
//! An entry's deadline is an absolute Unix time in ms. Expired entries are
//! removed when touched (lazy) and by [`Db::expire_cycle`], which a
//! background thread runs every 100 ms over a few shards (active, as Redis's
//! `serverCron`).
//!
//! # Memory
//! Every entry's size is estimated ([`Entry::mem`], kept up to date by each
//! update) and summed per database. With a bound ([`DbConfig::max_memory`]),
//! a command that may grow the data finds the sum over the bound and either
//! evicts (approximate LRU: of a few sampled entries, the least recently
//! used, as Redis's `allkeys-lru` and close to memcached's LRU) or is refused
//! ([`Full`], Redis's `noeviction`). Commands that do not grow it (reads,
//! deletes) always run.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use parking_lot::{Mutex, MutexGuard};

/// Shards of the keyspace: enough that two workers rarely meet on one.
pub const SHARDS: usize = 256;
/// Estimated bytes of an entry beyond its key and value: the map's slot
/// (key pointer, entry, control byte) and the allocator's rounding.
pub const ENTRY_OVERHEAD: usize = 80;
/// Estimated bytes per element of a list, hash, set or sorted set beyond its
/// own bytes.
pub const ELEMENT_OVERHEAD: usize = 32;
/// Entries sampled per eviction (Redis's `maxmemory-samples` default is 5).
pub const EVICTION_SAMPLES: usize = 8;
/// Shards [`Db::expire_cycle`] sweeps per call by default.
pub const EXPIRE_SHARDS_PER_CYCLE: usize = 16;

/// What a full database does with a command that may grow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Eviction {
    /// Refuse it (Redis's `noeviction`, its default).
    #[default]
    NoEviction,
    /// Evict the least recently used of a few sampled entries until the
    /// data fits (Redis's `allkeys-lru`; memcached's behaviour).
    AllKeysLru,
}

impl Eviction {
    /// The name Redis's `maxmemory-policy` uses.
    pub fn name(self) -> &'static str {
        match self {
            Eviction::NoEviction => "noeviction",
            Eviction::AllKeysLru => "allkeys-lru",
        }
    }
}

/// The database's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DbConfig {
    /// Bound on the estimated bytes of all entries; 0: none.
    pub max_memory: usize,
    /// What a command that would grow a full database meets.
    pub eviction: Eviction,
}

/// The database is over its memory bound and may not evict (or could not
/// evict enough).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

/// Why a command could not take its shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The database is full ([`Full`]).
    Full,
    /// A script past `busy-reply-threshold` holds one of them (Redis's
    /// BUSY; [`crate::busy`]).
    Busy,
}

impl From<Full> for Refused {
    fn from(_: Full) -> Self {
        Refused::Full
    }
}

/// How long a command waiting for a taken shard waits between looks at
/// whether a busy script holds it.
const BUSY_POLL: std::time::Duration = std::time::Duration::from_millis(2);

/// A sorted set's score, ordered as Redis's skiplist compares them: by
/// value, so `-0` and `0` tie and their members decide (NaN is refused
/// before it gets here).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Score(pub f64);

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0
            .partial_cmp(&other.0)
            .unwrap_or_else(|| self.0.total_cmp(&other.0))
    }
}

/// Bytes of one element as the estimate counts them.
fn element(bytes: usize) -> usize {
    bytes + ELEMENT_OVERHEAD
}

/// A list: elements and their estimated bytes.
#[derive(Debug, Default, Clone)]
pub struct List {
    items: VecDeque<Box<[u8]>>,
    bytes: usize,
}

impl List {
    /// The elements.
    pub fn items(&self) -> &VecDeque<Box<[u8]>> {
        &self.items
    }
    /// Adds at the head (`left`) or the tail.
    pub fn push(&mut self, v: &[u8], left: bool) {
        self.bytes += element(v.len());
        if left {
            self.items.push_front(v.into());
        } else {
            self.items.push_back(v.into());
        }
    }
    /// Takes from the head (`left`) or the tail.
    pub fn pop(&mut self, left: bool) -> Option<Box<[u8]>> {
        let v = if left {
            self.items.pop_front()
        } else {
            self.items.pop_back()
        }?;
        self.bytes -= element(v.len());
        Some(v)
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.items.len()
    }
    /// Whether it has no element.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    /// Removes up to `limit` elements equal to `v`, from the head
    /// (`from_head`) or the tail; returns how many.
    pub fn remove_matching(&mut self, v: &[u8], from_head: bool, limit: usize) -> usize {
        let mut removed = 0;
        let mut kept = VecDeque::with_capacity(self.items.len());
        let mut take = |item: Box<[u8]>, kept: &mut VecDeque<Box<[u8]>>, front: bool| {
            if removed < limit && *item == *v {
                removed += 1;
            } else if front {
                kept.push_front(item);
            } else {
                kept.push_back(item);
            }
        };
        if from_head {
            for item in self.items.drain(..) {
                take(item, &mut kept, false);
            }
        } else {
            for item in self.items.drain(..).rev() {
                take(item, &mut kept, true);
            }
        }
        self.items = kept;
        self.bytes -= removed * element(v.len());
        removed
    }
    /// Inserts `v` at position `i` (`i` up to the length).
    pub fn insert(&mut self, i: usize, v: &[u8]) {
        self.bytes += element(v.len());
        self.items.insert(i.min(self.items.len()), v.into());
    }
    /// Replaces element `i`; returns whether there is one.
    pub fn set(&mut self, i: usize, v: &[u8]) -> bool {
        let Some(slot) = self.items.get_mut(i) else {
            return false;
        };
        self.bytes = self.bytes - element(slot.len()) + element(v.len());
        *slot = v.into();
        true
    }
    /// Keeps the elements `from..to` only (`to` past the end: to the end).
    pub fn keep(&mut self, from: usize, to: usize) {
        let to = to.min(self.items.len());
        let from = from.min(to);
        let mut dropped = 0;
        for v in self.items.drain(to..) {
            dropped += element(v.len());
        }
        for v in self.items.drain(..from) {
            dropped += element(v.len());
        }
        self.bytes -= dropped;
    }
}

/// A hash: fields, values and their estimated bytes.
#[derive(Debug, Default, Clone)]
pub struct Hash {
    map: HashMap<Box<[u8]>, Box<[u8]>>,
    bytes: usize,
}

impl Hash {
    /// The fields and values.
    pub fn map(&self) -> &HashMap<Box<[u8]>, Box<[u8]>> {
        &self.map
    }
    /// Sets `field`; returns whether it is new.
    pub fn set(&mut self, field: &[u8], value: &[u8]) -> bool {
        match self.map.get_mut(field) {
            Some(v) => {
                self.bytes = self.bytes - v.len() + value.len();
                *v = value.into();
                false
            }
            None => {
                self.bytes += element(field.len() + value.len());
                self.map.insert(field.into(), value.into());
                true
            }
        }
    }
    /// Removes `field`; returns whether it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self.map.remove(field) {
            Some(v) => {
                self.bytes -= element(field.len() + v.len());
                true
            }
            None => false,
        }
    }
    /// Number of fields.
    pub fn len(&self) -> usize {
        self.map.len()
    }
    /// Whether it has no field.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// A set: members and their estimated bytes.
#[derive(Debug, Default, Clone)]
pub struct Set {
    set: HashSet<Box<[u8]>>,
    bytes: usize,
}

impl Set {
    /// The members.
    pub fn members(&self) -> &HashSet<Box<[u8]>> {
        &self.set
    }
    /// Adds `m`; returns whether it is new.
    pub fn add(&mut self, m: &[u8]) -> bool {
        if self.set.contains(m) {
            return false;
        }
        self.bytes += element(m.len());
        self.set.insert(m.into())
    }
    /// Removes `m`; returns whether it was there.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        if self.set.remove(m) {
            self.bytes -= element(m.len());
            true
        } else {
            false
        }
    }
    /// Removes and returns some member.
    pub fn pop(&mut self) -> Option<Box<[u8]>> {
        let m = self.set.iter().next()?.clone();
        self.set.remove(&m);
        self.bytes -= element(m.len());
        Some(m)
    }
    /// Number of members.
    pub fn len(&self) -> usize {
        self.set.len()
    }
    /// Whether it has no member.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

/// A sorted set: members by score (ties by member bytes, as Redis).
#[derive(Debug, Default, Clone)]
pub struct ZSet {
    scores: HashMap<Box<[u8]>, f64>,
    order: BTreeSet<(Score, Box<[u8]>)>,
    bytes: usize,
}

impl ZSet {
    /// The members in order.
    pub fn ordered(&self) -> &BTreeSet<(Score, Box<[u8]>)> {
        &self.order
    }
    /// The score of `m`.
    pub fn score(&self, m: &[u8]) -> Option<f64> {
        self.scores.get(m).copied()
    }
    /// Sets `m`'s score; returns whether `m` is new.
    pub fn insert(&mut self, m: &[u8], score: f64) -> bool {
        match self.scores.get_mut(m) {
            Some(old) => {
                let key: Box<[u8]> = m.into();
                self.order.remove(&(Score(*old), key.clone()));
                *old = score;
                self.order.insert((Score(score), key));
                false
            }
            None => {
                self.bytes += 2 * element(m.len()) + 8;
                self.scores.insert(m.into(), score);
                self.order.insert((Score(score), m.into()));
                true
            }
        }
    }
    /// Removes `m`; returns whether it was there.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match self.scores.remove(m) {
            Some(s) => {
                self.order.remove(&(Score(s), Box::from(m)));
                self.bytes -= 2 * element(m.len()) + 8;
                true
            }
            None => false,
        }
    }
    /// Removes and returns the member with the lowest score.
    pub fn pop_min(&mut self) -> Option<(Box<[u8]>, f64)> {
        let (s, m) = self.order.pop_first()?;
        self.scores.remove(&m);
        self.bytes -= 2 * element(m.len()) + 8;
        Some((m, s.0))
    }
    /// Removes and returns the member with the highest score (the last in
    /// order among equal scores).
    pub fn pop_max(&mut self) -> Option<(Box<[u8]>, f64)> {
        let (s, m) = self.order.pop_last()?;
        self.scores.remove(&m);
        self.bytes -= 2 * element(m.len()) + 8;
        Some((m, s.0))
    }
    /// Number of members.
    pub fn len(&self) -> usize {
        self.scores.len()
    }
    /// Whether it has no member.
    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }
}

/// A stream entry's id: milliseconds and a sequence number within them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    /// Unix time in ms (or what the client gave).
    pub ms: u64,
    /// The entry's number within `ms`.
    pub seq: u64,
}

impl StreamId {
    /// The largest id.
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// `ms-seq`, as replies give it.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(itoa::Buffer::new().format(self.ms).as_bytes());
        out.push(b'-');
        out.extend_from_slice(itoa::Buffer::new().format(self.seq).as_bytes());
    }
}

/// A stream: entries (field-value pairs) in id order, and the last id
/// given (kept when that entry is deleted: ids only grow).
#[derive(Debug, Default, Clone)]
pub struct Stream {
    entries: std::collections::BTreeMap<StreamId, Box<[Box<[u8]>]>>,
    last: StreamId,
    bytes: usize,
}

impl Stream {
    /// The entries in id order.
    pub fn entries(&self) -> &std::collections::BTreeMap<StreamId, Box<[Box<[u8]>]>> {
        &self.entries
    }
    /// The last id given.
    pub fn last(&self) -> StreamId {
        self.last
    }
    /// Appends an entry of `fields` (field, value, ...) at `id`, which the
    /// caller checked is past [`last`](Self::last).
    pub fn append(&mut self, id: StreamId, fields: &[&[u8]]) {
        debug_assert!(id > self.last || (self.entries.is_empty() && id == self.last));
        self.bytes += fields.iter().map(|f| element(f.len())).sum::<usize>() + 16;
        self.entries
            .insert(id, fields.iter().map(|&f| Box::from(f)).collect());
        self.last = id;
    }
    /// Removes the entry at `id`; returns whether it was there.
    pub fn remove(&mut self, id: StreamId) -> bool {
        match self.entries.remove(&id) {
            Some(f) => {
                self.bytes -= f.iter().map(|f| element(f.len())).sum::<usize>() + 16;
                true
            }
            None => false,
        }
    }
    /// Removes the oldest entry; returns its id.
    pub fn pop_oldest(&mut self) -> Option<StreamId> {
        let id = *self.entries.keys().next()?;
        self.remove(id);
        Some(id)
    }
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    /// Whether it has no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A value of one of Redis's types.
#[derive(Debug, Clone)]
pub enum Value {
    /// A string (also memcached's items).
    Str(Box<[u8]>),
    /// A list.
    List(Arc<List>),
    /// A hash.
    Hash(Arc<Hash>),
    /// A set.
    Set(Arc<Set>),
    /// A sorted set.
    ZSet(Arc<ZSet>),
    /// A stream.
    Stream(Arc<Stream>),
}

impl Value {
    /// Whether it is a collection that someone else holds too (a reader's
    /// snapshot, a COPY): a change would copy it first (`Arc::make_mut`).
    pub fn is_shared(&self) -> bool {
        match self {
            Value::Str(_) => false,
            Value::List(l) => Arc::strong_count(l) > 1,
            Value::Hash(h) => Arc::strong_count(h) > 1,
            Value::Set(s) => Arc::strong_count(s) > 1,
            Value::ZSet(z) => Arc::strong_count(z) > 1,
            Value::Stream(x) => Arc::strong_count(x) > 1,
        }
    }

    /// A copy of its own (a collection's elements copied, not shared).
    pub fn unshared_copy(&self) -> Value {
        match self {
            Value::Str(v) => Value::Str(v.clone()),
            Value::List(l) => Value::List(Arc::new(List::clone(l))),
            Value::Hash(h) => Value::Hash(Arc::new(Hash::clone(h))),
            Value::Set(s) => Value::Set(Arc::new(Set::clone(s))),
            Value::ZSet(z) => Value::ZSet(Arc::new(ZSet::clone(z))),
            Value::Stream(x) => Value::Stream(Arc::new(Stream::clone(x))),
        }
    }

    /// Whether `self` and `other` are the same shared collection.
    pub(crate) fn same(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::List(a), Value::List(b)) => Arc::ptr_eq(a, b),
            (Value::Hash(a), Value::Hash(b)) => Arc::ptr_eq(a, b),
            (Value::Set(a), Value::Set(b)) => Arc::ptr_eq(a, b),
            (Value::ZSet(a), Value::ZSet(b)) => Arc::ptr_eq(a, b),
            (Value::Stream(a), Value::Stream(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Its elements: a collection's length, 1 for a string.
    pub fn elements(&self) -> usize {
        match self {
            Value::Str(_) => 1,
            Value::List(l) => l.len(),
            Value::Hash(h) => h.len(),
            Value::Set(s) => s.len(),
            Value::ZSet(z) => z.len(),
            Value::Stream(s) => s.len(),
        }
    }

    /// The name `TYPE` answers.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::List(_) => "list",
            Value::Hash(_) => "hash",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
            Value::Stream(_) => "stream",
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Value::Str(s) => s.len(),
            Value::List(l) => l.bytes,
            Value::Hash(h) => h.bytes,
            Value::Set(s) => s.bytes,
            Value::ZSet(z) => z.bytes,
            Value::Stream(s) => s.bytes,
        }
    }

    /// Whether an aggregate has no element left (Redis deletes such keys).
    pub fn is_empty_aggregate(&self) -> bool {
        match self {
            Value::Str(_) => false,
            Value::List(l) => l.is_empty(),
            Value::Hash(h) => h.is_empty(),
            Value::Set(s) => s.is_empty(),
            Value::ZSet(z) => z.is_empty(),
            // Redis keeps a stream with no entry.
            Value::Stream(_) => false,
        }
    }
}

/// One key's record.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The value.
    pub value: Value,
    /// When it expires (Unix ms); 0: never.
    pub expire_ms: u64,
    /// Bumped by every change ([`Guard::update`]): `WATCH`'s check and
    /// memcached's CAS unique.
    pub version: u64,
    /// memcached's client flags (0 for Redis's values).
    pub flags: u32,
    /// When last touched, in the database's LRU clock (the low bits,
    /// [`LRU_CLOCK`]), and memcached's item marks (the top bits,
    /// [`MARK_FETCHED`], [`MARK_WON`], [`MARK_STALE`]): kept in one word
    /// so that an entry costs nothing more for them.
    pub lru: u32,
}

/// [`Entry::lru`]'s clock bits: 128 ms ticks since the database started.
/// It wraps after about 2.2 years, which only blurs eviction's choice
/// among a few sampled entries for a moment.
pub const LRU_CLOCK: u32 = (1 << 29) - 1;
/// memcached's mark: the item has been read (`mg`'s `h`, `me`'s `fetch`).
pub const MARK_FETCHED: u32 = 1 << 31;
/// memcached's mark: a client has been told it won the recache (`mg`
/// answers `W` once, then `Z`).
pub const MARK_WON: u32 = 1 << 30;
/// memcached's mark: the item is stale (`md ... I`, `ms ... I`; `mg`
/// answers `X`).
pub const MARK_STALE: u32 = 1 << 29;
/// Milliseconds per tick of the LRU clock.
const LRU_TICK_MS: u64 = 128;

impl Entry {
    /// A fresh entry holding `value` (no expiry, no flags).
    pub fn new(value: Value) -> Self {
        Self {
            value,
            expire_ms: 0,
            version: 0,
            flags: 0,
            lru: 0,
        }
    }

    /// Estimated bytes of this entry under `key_len` bytes of key.
    pub fn mem(&self, key_len: usize) -> usize {
        key_len + ENTRY_OVERHEAD + self.value.bytes()
    }

    /// Whether memcached's mark `mark` (e.g. [`MARK_STALE`]) is set.
    pub fn marked(&self, mark: u32) -> bool {
        self.lru & mark != 0
    }

    /// Sets or clears memcached's mark `mark`.
    pub fn mark(&mut self, mark: u32, on: bool) {
        if on {
            self.lru |= mark;
        } else {
            self.lru &= !mark;
        }
    }

    /// Whole seconds since the entry was last used, at `clock` (a guard's
    /// [`Guard::clock`]).
    pub fn idle_secs(&self, clock: u32) -> u64 {
        u64::from(clock.wrapping_sub(self.lru) & LRU_CLOCK) * LRU_TICK_MS / 1000
    }

    /// Marks the entry used at `clock`, keeping its marks.
    fn used(&mut self, clock: u32) {
        self.lru = (self.lru & !LRU_CLOCK) | clock;
    }

    fn expired(&self, now_ms: u64) -> bool {
        self.expire_ms != 0 && self.expire_ms <= now_ms
    }
}

type Map = hashbrown::HashMap<Box<[u8]>, Entry>;

/// One shard: its map and the estimated bytes in it.
#[derive(Default)]
pub struct Shard {
    map: Map,
    used: usize,
    /// Entries with a deadline.
    volatile: usize,
    /// memcached's reads of a key here that found it, and that did not,
    /// and its storage commands (`get_hits`, `get_misses`, `cmd_set`):
    /// counted under the shard's lock, so no counter is shared between
    /// workers on the hot path.
    reads: [u64; 2],
    writes: u64,
}

/// A shard's lock on its own cache lines.
#[repr(align(128))]
struct Padded(Mutex<Shard>);

/// The database. Shared by every worker (`Arc`); all methods take `&self`.
pub struct Db {
    shards: Box<[Padded]>,
    hasher: hashbrown::DefaultHashBuilder,
    cfg: DbConfig,
    used: AtomicUsize,
    keys: AtomicUsize,
    volatile: AtomicUsize,
    evicted: AtomicU64,
    expired: AtomicU64,
    version: AtomicU64,
    /// Changes that left no entry ([`Db::write_seq`]).
    removals: AtomicU64,
    expire_cursor: AtomicUsize,
    evict_cursor: AtomicUsize,
    start: Instant,
    start_unix_ms: u64,
    /// What ran on it, per command (`INFO commandstats`, `SLOWLOG`).
    commands: crate::commandstats::CommandStats,
    /// The scripts running on it (BUSY, `SCRIPT KILL`).
    scripts: crate::busy::RunningScripts,
    /// Shared values a writer copied outside the shard's lock
    /// ([`Guard::replace_shared`]).
    unshared_outside_locks: AtomicU64,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("keys", &self.len())
            .field("used", &self.used())
            .field("cfg", &self.cfg)
            .finish()
    }
}

impl Default for Db {
    fn default() -> Self {
        Self::new(DbConfig::default())
    }
}

/// What the database counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DbStats {
    /// Keys now.
    pub keys: usize,
    /// Keys with a deadline now.
    pub volatile: usize,
    /// Estimated bytes now.
    pub used: usize,
    /// Entries evicted for memory so far.
    pub evicted: u64,
    /// Entries removed at their deadline so far (lazily or actively).
    pub expired: u64,
}

thread_local! {
    /// When the command running on this thread started
    /// ([`CommandTime::start`]): the time its locks see.
    static COMMAND_TIME: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// The running command's time on this thread, from [`CommandTime::start`]
/// until it is dropped (then the time of the command around it, if any: a
/// script's `redis.call`).
pub(crate) struct CommandTime(Option<Instant>);

impl CommandTime {
    /// The command on this thread started at `at`.
    pub(crate) fn start(at: Instant) -> Self {
        CommandTime(COMMAND_TIME.replace(Some(at)))
    }
}

impl Drop for CommandTime {
    fn drop(&mut self) {
        COMMAND_TIME.set(self.0);
    }
}

impl Db {
    /// An empty database.
    pub fn new(cfg: DbConfig) -> Self {
        let start_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        Self {
            shards: (0..SHARDS)
                .map(|_| Padded(Mutex::new(Shard::default())))
                .collect(),
            hasher: hashbrown::DefaultHashBuilder::default(),
            cfg,
            used: AtomicUsize::new(0),
            keys: AtomicUsize::new(0),
            volatile: AtomicUsize::new(0),
            evicted: AtomicU64::new(0),
            expired: AtomicU64::new(0),
            version: AtomicU64::new(0),
            removals: AtomicU64::new(0),
            expire_cursor: AtomicUsize::new(0),
            evict_cursor: AtomicUsize::new(0),
            start: Instant::now(),
            start_unix_ms,
            commands: crate::commandstats::CommandStats::default(),
            scripts: crate::busy::RunningScripts::default(),
            unshared_outside_locks: AtomicU64::new(0),
        }
    }

    /// Shared values that writers copied outside the shard's lock so far.
    pub fn unshared_outside_locks(&self) -> u64 {
        self.unshared_outside_locks.load(Ordering::Relaxed)
    }

    /// The scripts running on it.
    pub fn scripts(&self) -> &crate::busy::RunningScripts {
        &self.scripts
    }

    /// The commands' statistics.
    pub fn commands(&self) -> &crate::commandstats::CommandStats {
        &self.commands
    }

    /// The settings.
    pub fn config(&self) -> DbConfig {
        self.cfg
    }

    /// The time now as Unix ms (a monotonic clock from the database's start,
    /// so that a wall-clock step does not expire or revive keys).
    pub fn now_ms(&self) -> u64 {
        self.start_unix_ms + self.start.elapsed().as_millis() as u64
    }

    fn lru_at(since_start: std::time::Duration) -> u32 {
        (since_start.as_millis() as u64 / LRU_TICK_MS) as u32 & LRU_CLOCK
    }

    /// Keys now (expired ones not yet removed included).
    pub fn len(&self) -> usize {
        self.keys.load(Ordering::Relaxed)
    }

    /// Whether the database holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Estimated bytes of all entries.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// What the database counted.
    pub fn stats(&self) -> DbStats {
        DbStats {
            keys: self.len(),
            volatile: self.volatile.load(Ordering::Relaxed),
            used: self.used(),
            evicted: self.evicted.load(Ordering::Relaxed),
            expired: self.expired.load(Ordering::Relaxed),
        }
    }

    /// memcached's read and storage counts so far, summed over the shards
    /// (each locked in turn): `(hits, misses, sets)`.
    pub fn read_write_counts(&self) -> (u64, u64, u64) {
        self.shards.iter().fold((0, 0, 0), |(h, m, s), shard| {
            let shard = shard.0.lock();
            (h + shard.reads[0], m + shard.reads[1], s + shard.writes)
        })
    }

    /// The shard of `key`.
    pub fn shard_of(&self, key: &[u8]) -> usize {
        (self.hasher.hash_one(key) >> 56) as usize % SHARDS
    }

    /// Locks the shard of `key` (for a command on one key). `grows`: the
    /// command may add data, so a full database evicts first or refuses it.
    ///
    /// # Errors
    /// [`Refused::Full`]: over the bound without eviction (or nothing left
    /// to evict); [`Refused::Busy`]: a script past the busy threshold holds
    /// the shard.
    pub fn lock_one(&self, key: &[u8], grows: bool) -> Result<Guard<'_>, Refused> {
        if grows {
            self.make_room()?;
        }
        let i = self.shard_of(key);
        Ok(self.guard(Held::One(i, self.shard_lock(i)?)))
    }

    /// Locks the shards of `keys` in ascending order (a multi-key command).
    ///
    /// # Errors
    /// As [`Db::lock_one`].
    pub fn lock_keys<'k>(
        &self,
        keys: impl IntoIterator<Item = &'k [u8]>,
        grows: bool,
    ) -> Result<Guard<'_>, Refused> {
        if grows {
            self.make_room()?;
        }
        // Ascending and distinct as they come: a few keys (MGET's, MSET's)
        // are put in place without a general sort, and there are at most
        // SHARDS places.
        let mut idx: smallvec::SmallVec<[usize; 8]> = smallvec::SmallVec::new();
        for k in keys {
            let i = self.shard_of(k);
            if let Err(at) = idx.binary_search(&i) {
                idx.insert(at, i);
            }
        }
        let locks = idx
            .into_iter()
            .map(|i| Ok((i, self.shard_lock(i)?)))
            .collect::<Result<_, Refused>>()?;
        Ok(self.guard(Held::Many(locks)))
    }

    /// Locks every shard (a transaction: nothing else runs meanwhile).
    ///
    /// # Errors
    /// As [`Db::lock_one`].
    pub fn lock_all(&self, grows: bool) -> Result<Guard<'_>, Refused> {
        if grows {
            self.make_room()?;
        }
        let locks = (0..SHARDS)
            .map(|i| Ok((i, self.shard_lock(i)?)))
            .collect::<Result<_, Refused>>()?;
        Ok(self.guard(Held::Many(locks)))
    }

    /// Locks shard `i` alone (a walk over the keyspace, one shard at a time).
    ///
    /// # Errors
    /// [`Refused::Busy`]: a script past the busy threshold holds it.
    pub fn lock_shard(&self, i: usize) -> Result<Guard<'_>, Refused> {
        let i = i % SHARDS;
        Ok(self.guard(Held::One(i, self.shard_lock(i)?)))
    }

    /// Locks shard `i` alone, waiting however long it is held (the
    /// database's own upkeep: eviction, expiry, a flush that checked for
    /// busy scripts first).
    pub fn lock_shard_waiting(&self, i: usize) -> Guard<'_> {
        let i = i % SHARDS;
        self.guard(Held::One(i, self.shards[i].0.lock()))
    }

    /// Shard `i`'s lock: at once when free; otherwise waited for, unless a
    /// script past the busy threshold holds it (looked at only while
    /// waiting, every [`BUSY_POLL`]).
    fn shard_lock(&self, i: usize) -> Result<MutexGuard<'_, Shard>, Refused> {
        let m = &self.shards[i].0;
        if let Some(g) = m.try_lock() {
            return Ok(g);
        }
        loop {
            if self.scripts.busy_on(i) {
                return Err(Refused::Busy);
            }
            if let Some(g) = m.try_lock_for(BUSY_POLL) {
                return Ok(g);
            }
        }
    }

    fn guard<'a>(&'a self, locks: Held<'a>) -> Guard<'a> {
        // The running command's time, as Redis's commands see one time
        // (keys do not expire in the middle of one); one clock reading
        // otherwise.
        let since_start = match COMMAND_TIME.get() {
            Some(t) => t.saturating_duration_since(self.start),
            None => self.start.elapsed(),
        };
        Guard {
            db: self,
            locks,
            now_ms: self.start_unix_ms + since_start.as_millis() as u64,
            lru: Self::lru_at(since_start),
        }
    }

    /// With a memory bound: evicts until the data fits (allkeys-lru) or
    /// says it does not (noeviction). Takes shard locks one at a time, never
    /// while the caller holds one.
    fn make_room(&self) -> Result<(), Full> {
        let max = self.cfg.max_memory;
        if max == 0 || self.used() <= max {
            return Ok(());
        }
        if self.cfg.eviction == Eviction::NoEviction {
            return Err(Full);
        }
        // Each round evicts one entry; give up after visiting every shard
        // twice without getting under the bound.
        let mut empty_rounds = 0;
        while self.used() > max {
            let i = self.evict_cursor.fetch_add(1, Ordering::Relaxed) % SHARDS;
            let mut g = self.lock_shard_waiting(i);
            if !g.evict_one(i) {
                empty_rounds += 1;
                if empty_rounds > 2 * SHARDS {
                    return Err(Full);
                }
            }
        }
        Ok(())
    }

    /// Removes expired entries from the next `shards` shards; returns how
    /// many. Cheap when no key has a deadline.
    pub fn expire_cycle(&self, shards: usize) -> usize {
        if self.volatile.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        let mut removed = 0;
        for _ in 0..shards.min(SHARDS) {
            let i = self.expire_cursor.fetch_add(1, Ordering::Relaxed) % SHARDS;
            // A shard a busy script holds waits for a later cycle.
            let Ok(mut g) = self.lock_shard(i) else {
                continue;
            };
            removed += g.expire_shard(i);
        }
        removed
    }

    /// Removes every key.
    pub fn flush(&self) {
        for i in 0..SHARDS {
            self.lock_shard_waiting(i).clear_shard(i);
        }
    }

    /// A fresh version (cas unique), for an entry made outside
    /// [`Guard::update`]'s bump.
    pub(crate) fn next_version(&self) -> u64 {
        self.version.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Counts a change that leaves no entry (a delete, an expiry, an
    /// eviction, a flush) for [`write_seq`](Self::write_seq); apart from
    /// the versions, which are memcached's cas uniques and move only with
    /// an entry written.
    fn removed_one(&self) {
        self.removals.fetch_add(1, Ordering::Relaxed);
    }

    /// The database's write sequence: it moves with every change to any
    /// key (the versions plus the removals), each counted under the
    /// changed key's shard lock. A reader that
    /// reads it, then reads keys each under its own shard's lock, then
    /// reads it again and finds it unchanged, read one consistent state:
    /// no change was made between the two (a change it saw would have
    /// moved the sequence before its second reading). What lets a command
    /// that reads keys it cannot name in advance (SORT's BY and GET)
    /// run without holding every shard.
    pub fn write_seq(&self) -> u64 {
        // Both only grow: the sum moves if and only if either does.
        self.version
            .load(Ordering::Acquire)
            .wrapping_add(self.removals.load(Ordering::Acquire))
    }
}

/// The shard locks a guard holds: one (no allocation: most commands), or
/// several in ascending shard order.
enum Held<'a> {
    One(usize, MutexGuard<'a, Shard>),
    /// Inline up to 8: a command over a few keys allocates nothing to
    /// lock them.
    Many(smallvec::SmallVec<[(usize, MutexGuard<'a, Shard>); 8]>),
}

impl crate::Sizes for Db {
    fn elements(&self, key: &[u8]) -> Option<usize> {
        // One lookup, on the network thread, only for the commands whose
        // cost grows with their key; never a wait behind a worker holding
        // the shard.
        let shard = self.shards[self.shard_of(key)].0.try_lock()?;
        Some(shard.map.get(key).map_or(0, |e| e.value.elements()))
    }

    fn keys(&self) -> usize {
        self.len()
    }

    fn script_slot(&self, sha: &[u8; 40]) -> usize {
        self.scripts.slot(sha)
    }
}

impl Held<'_> {
    /// Whether shard `i` is locked.
    fn holds(&self, i: usize) -> bool {
        match self {
            Held::One(j, _) => *j == i,
            Held::Many(v) => v.binary_search_by_key(&i, |(s, _)| *s).is_ok(),
        }
    }

    /// Locked shard `i`, if held.
    fn find(&mut self, i: usize) -> Option<&mut Shard> {
        match self {
            Held::One(j, g) => (*j == i).then_some(&mut **g),
            Held::Many(v) => v
                .binary_search_by_key(&i, |(s, _)| *s)
                .ok()
                .map(|at| &mut *v[at].1),
        }
    }

    fn set(&self) -> crate::busy::ShardSet {
        let mut set = crate::busy::ShardSet::default();
        match self {
            Held::One(i, _) => set.insert(*i),
            Held::Many(v) => v.iter().for_each(|(i, _)| set.insert(*i)),
        }
        set
    }

    fn indices(&self) -> Vec<usize> {
        match self {
            Held::One(i, _) => vec![*i],
            Held::Many(v) => v.iter().map(|(i, _)| *i).collect(),
        }
    }
}

/// The shards a command holds: read and change the entries of their keys.
/// Dropping it unlocks them. Never held across a preemption point.
pub struct Guard<'a> {
    db: &'a Db,
    locks: Held<'a>,
    /// The time the command runs at (Unix ms), read once.
    pub now_ms: u64,
    lru: u32,
}

impl Guard<'_> {
    /// Whether this guard holds `key`'s shard (a command on `key` may run
    /// under it).
    pub fn holds(&self, key: &[u8]) -> bool {
        self.locks.holds(self.db.shard_of(key))
    }

    /// The shards held.
    pub fn shard_set(&self) -> crate::busy::ShardSet {
        self.locks.set()
    }

    fn shard(&mut self, key: &[u8]) -> &mut Shard {
        let i = self.db.shard_of(key);
        self.locks
            .find(i)
            .unwrap_or_else(|| panic!("key of shard {i} not locked"))
    }

    /// Removes `key` if expired; counts it.
    fn drop_if_expired(&mut self, key: &[u8]) {
        let now = self.now_ms;
        let db = self.db;
        let shard = self.shard(key);
        if shard.map.get(key).is_some_and(|e| e.expired(now))
            && let Some((k, e)) = shard.map.remove_entry(key)
        {
            shard.forget(db, k.len(), &e);
            db.expired.fetch_add(1, Ordering::Relaxed);
            db.removed_one();
        }
    }

    /// The live entry of `key` (an expired one is removed first), marked
    /// as used now.
    pub fn get(&mut self, key: &[u8]) -> Option<&Entry> {
        self.get_mut(key).map(|e| &*e)
    }

    /// [`get`](Self::get), to change what no one else sees of the entry
    /// (memcached's marks): not a write, no new version.
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        self.drop_if_expired(key);
        let lru = self.lru;
        let e = self.shard(key).map.get_mut(key)?;
        e.used(lru);
        Some(e)
    }

    /// Puts `copy` in place of `key`'s value if that is still `was` (the
    /// same shared collection): the copy a writer made of it outside the
    /// lock ([`Value::unshared_copy`]). Returns whether it did.
    pub fn replace_shared(&mut self, key: &[u8], was: &Value, copy: Value) -> bool {
        match self.shard(key).map.get_mut(key) {
            Some(e) if e.value.same(was) => {
                e.value = copy;
                self.db
                    .unshared_outside_locks
                    .fetch_add(1, Ordering::Relaxed);
                true
            }
            _ => false,
        }
    }

    /// The live entry of `key`, not marked as used (memcached's `me`).
    pub fn peek(&mut self, key: &[u8]) -> Option<&Entry> {
        self.drop_if_expired(key);
        self.shard(key).map.get(key)
    }

    /// Counts a memcached read of `key` (its shard locked): found or not.
    pub fn count_read(&mut self, key: &[u8], hit: bool) {
        self.shard(key).reads[usize::from(!hit)] += 1;
    }

    /// Counts a memcached storage command on `key` (its shard locked).
    pub fn count_write(&mut self, key: &[u8]) {
        self.shard(key).writes += 1;
    }

    /// The LRU clock this guard's commands run at (for [`Entry::idle_secs`]).
    pub fn clock(&self) -> u32 {
        self.lru
    }

    /// `WATCH`'s view of `key`: its version, 0 when it does not exist.
    pub fn version(&mut self, key: &[u8]) -> u64 {
        self.get(key).map_or(0, |e| e.version)
    }

    /// Runs `f` on `key`'s slot (`None`: no live entry). `f` returns
    /// whether it changed the slot and its result; on a change the entry's
    /// version is bumped, its size re-estimated and an emptied aggregate
    /// removed (as Redis deletes an empty list, hash or set).
    pub fn update<R>(&mut self, key: &[u8], f: impl FnOnce(&mut Option<Entry>) -> (bool, R)) -> R {
        self.update_with(key, true, f)
    }

    /// [`update`](Self::update); with `bump` false an entry that was there
    /// is not marked as used (memcached's `u` flag).
    pub fn update_with<R>(
        &mut self,
        key: &[u8],
        bump: bool,
        f: impl FnOnce(&mut Option<Entry>) -> (bool, R),
    ) -> R {
        self.drop_if_expired(key);
        let db = self.db;
        let lru = self.lru;
        let shard = self.shard(key);
        let (old_key, mut entry) = match shard.map.remove_entry(key) {
            Some((k, e)) => (Some(k), Some(e)),
            None => (None, None),
        };
        let (old_mem, old_volatile) = match (&old_key, &entry) {
            (Some(k), Some(e)) => (e.mem(k.len()), e.expire_ms != 0),
            _ => (0, false),
        };
        let (changed, r) = f(&mut entry);
        if entry.as_ref().is_some_and(|e| e.value.is_empty_aggregate()) {
            entry = None;
        }
        let existed = old_key.is_some();
        match entry {
            Some(mut e) => {
                if bump || !existed {
                    e.used(lru);
                }
                if changed {
                    e.version = db.next_version();
                }
                let k = old_key.unwrap_or_else(|| Box::from(key));
                let new_mem = e.mem(k.len());
                shard.account(db, old_mem, new_mem, old_volatile, e.expire_ms != 0);
                if !existed {
                    db.keys.fetch_add(1, Ordering::Relaxed);
                }
                shard.map.insert(k, e);
            }
            None if existed => {
                shard.account(db, old_mem, 0, old_volatile, false);
                db.keys.fetch_sub(1, Ordering::Relaxed);
                db.removed_one();
            }
            None => {}
        }
        r
    }

    /// Replaces `key`'s entry with `entry` (a fresh version).
    pub fn set(&mut self, key: &[u8], entry: Entry) {
        self.update(key, |slot| {
            *slot = Some(entry);
            (true, ())
        });
    }

    /// Removes `key`; returns whether a live entry was there.
    pub fn delete(&mut self, key: &[u8]) -> bool {
        self.remove(key).is_some()
    }

    /// Removes `key`, handing its entry back: the caller may drop it after
    /// the lock (a big value's free walks every element).
    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        self.update(key, |slot| {
            let e = slot.take();
            (e.is_some(), e)
        })
    }

    /// A live key of the locked shard `i`: the first from position `pick`
    /// (modulo the shard's size) of its map's order, wrapping; `None` when
    /// it holds none (RANDOMKEY).
    pub fn random_key_in_shard(&mut self, i: usize, pick: u64) -> Option<Box<[u8]>> {
        let now = self.now_ms;
        let shard = self.locks.find(i).expect("shard locked");
        let len = shard.map.len();
        if len == 0 {
            return None;
        }
        let start = (pick % len as u64) as usize;
        shard
            .map
            .iter()
            .skip(start)
            .chain(shard.map.iter().take(start))
            .find(|(_, e)| !e.expired(now))
            .map(|(k, _)| k.clone())
    }

    /// The live keys of the locked shard `i` from position `from` of its
    /// map's iteration order, at most `count` of them that `keep` accepts;
    /// returns the position to go on from (0: the shard is done). For SCAN
    /// and KEYS, one shard at a time.
    pub fn keys_in_shard(
        &mut self,
        i: usize,
        from: usize,
        count: usize,
        mut keep: impl FnMut(&[u8]) -> bool,
        out: &mut Vec<Box<[u8]>>,
    ) -> usize {
        let now = self.now_ms;
        let shard = self.locks.find(i).expect("shard locked");
        let mut pos = from;
        for (k, e) in shard.map.iter().skip(from) {
            pos += 1;
            if !e.expired(now) && keep(k) {
                out.push(k.clone());
                if out.len() >= count {
                    return if pos >= shard.map.len() { 0 } else { pos };
                }
            }
        }
        0
    }

    /// Evicts the least recently used of a few entries of locked shard
    /// `i`; returns whether there was one.
    fn evict_one(&mut self, i: usize) -> bool {
        let db = self.db;
        let shard = self.locks.find(i).expect("shard locked");
        let victim = shard
            .map
            .iter()
            .take(EVICTION_SAMPLES)
            .min_by_key(|(_, e)| e.lru & LRU_CLOCK)
            .map(|(k, _)| k.clone());
        let Some(victim) = victim else {
            return false;
        };
        if let Some((k, e)) = shard.map.remove_entry(&victim) {
            shard.forget(db, k.len(), &e);
            db.evicted.fetch_add(1, Ordering::Relaxed);
            db.removed_one();
        }
        true
    }

    fn expire_shard(&mut self, i: usize) -> usize {
        let now = self.now_ms;
        let db = self.db;
        let shard = self.locks.find(i).expect("shard locked");
        if shard.volatile == 0 {
            return 0;
        }
        let mut gone = Vec::new();
        shard.map.retain(|k, e| {
            if e.expired(now) {
                gone.push((k.len(), e.mem(k.len())));
                false
            } else {
                true
            }
        });
        for &(_, mem) in &gone {
            shard.account(db, mem, 0, true, false);
            db.keys.fetch_sub(1, Ordering::Relaxed);
        }
        db.expired.fetch_add(gone.len() as u64, Ordering::Relaxed);
        if !gone.is_empty() {
            db.removed_one();
        }
        gone.len()
    }

    fn clear_shard(&mut self, i: usize) {
        let db = self.db;
        let shard = self.locks.find(i).expect("shard locked");
        db.keys.fetch_sub(shard.map.len(), Ordering::Relaxed);
        db.used.fetch_sub(shard.used, Ordering::Relaxed);
        db.volatile.fetch_sub(shard.volatile, Ordering::Relaxed);
        shard.map = Map::default();
        shard.used = 0;
        shard.volatile = 0;
        db.removed_one();
    }

    /// Removes every key of the locked shards (FLUSHALL inside a
    /// transaction, which holds them all).
    pub fn clear_locked(&mut self) {
        let held = self.locks.indices();
        for i in held {
            self.clear_shard(i);
        }
    }

    /// The database.
    pub fn db(&self) -> &Db {
        self.db
    }
}

impl Shard {
    fn account(&mut self, db: &Db, old: usize, new: usize, old_vol: bool, new_vol: bool) {
        if new >= old {
            self.used += new - old;
            db.used.fetch_add(new - old, Ordering::Relaxed);
        } else {
            self.used -= old - new;
            db.used.fetch_sub(old - new, Ordering::Relaxed);
        }
        match (old_vol, new_vol) {
            (false, true) => {
                self.volatile += 1;
                db.volatile.fetch_add(1, Ordering::Relaxed);
            }
            (true, false) => {
                self.volatile -= 1;
                db.volatile.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// Accounts for an entry already taken out of the map.
    fn forget(&mut self, db: &Db, key_len: usize, e: &Entry) {
        self.account(db, e.mem(key_len), 0, e.expire_ms != 0, false);
        db.keys.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[u8]) -> Entry {
        Entry::new(Value::Str(v.into()))
    }

    /// memcached's marks share the LRU word: a use keeps them, and the idle
    /// time (`mg`'s `l`, `me`'s `la`) counts clock ticks only, across the
    /// clock's wrap too.
    #[test]
    fn marks_survive_uses_and_idle_time_counts_the_clock_alone() {
        let mut e = s(b"v");
        e.mark(MARK_FETCHED | MARK_STALE, true);
        e.used(LRU_CLOCK - 3);
        assert!(e.marked(MARK_FETCHED) && e.marked(MARK_STALE) && !e.marked(MARK_WON));
        assert_eq!(e.lru & LRU_CLOCK, LRU_CLOCK - 3);
        // 8 ticks of 128 ms later, past the wrap: 1 whole second.
        assert_eq!(e.idle_secs(4), 1);
        assert_eq!(e.idle_secs(LRU_CLOCK - 3), 0);
        e.used(100);
        assert!(e.marked(MARK_FETCHED) && e.marked(MARK_STALE));
        assert_eq!(e.idle_secs(100 + 79), 10);
        e.mark(MARK_STALE, false);
        assert!(!e.marked(MARK_STALE) && e.marked(MARK_FETCHED));
    }

    /// A read marks the entry used; `u` (update_with, no bump) does not.
    #[test]
    fn a_read_without_bump_leaves_the_lru_clock() {
        let db = Db::default();
        let mut g = db.lock_one(b"k", true).unwrap();
        g.set(b"k", s(b"v"));
        let before = g.peek(b"k").unwrap().lru;
        g.lru = (g.lru + 50) & LRU_CLOCK;
        g.update_with(b"k", false, |_| (false, ()));
        assert_eq!(g.peek(b"k").unwrap().lru, before);
        g.update_with(b"k", true, |_| (false, ()));
        assert_eq!(g.peek(b"k").unwrap().lru & LRU_CLOCK, g.lru);
    }

    #[test]
    fn set_get_delete_account_memory_and_keys() {
        let db = Db::default();
        let mut g = db.lock_one(b"k", true).unwrap();
        g.set(b"k", s(b"hello"));
        assert!(matches!(&g.get(b"k").unwrap().value, Value::Str(v) if &v[..] == b"hello"));
        drop(g);
        assert_eq!(db.len(), 1);
        assert_eq!(db.used(), 1 + ENTRY_OVERHEAD + 5);
        let mut g = db.lock_one(b"k", false).unwrap();
        assert!(g.delete(b"k"));
        assert!(!g.delete(b"k"));
        drop(g);
        assert_eq!((db.len(), db.used()), (0, 0));
    }

    #[test]
    fn versions_change_with_every_write_and_only_then() {
        let db = Db::default();
        let mut g = db.lock_one(b"k", true).unwrap();
        assert_eq!(g.version(b"k"), 0);
        g.set(b"k", s(b"a"));
        let v1 = g.version(b"k");
        assert_ne!(v1, 0);
        g.update(b"k", |_| (false, ()));
        assert_eq!(g.version(b"k"), v1);
        g.set(b"k", s(b"a"));
        assert_ne!(g.version(b"k"), v1);
    }

    #[test]
    fn the_write_sequence_moves_with_every_change_and_only_then() {
        let db = Db::default();
        let moved = |before: &mut u64| {
            let now = db.write_seq();
            std::mem::replace(before, now) != now
        };
        let mut seq = db.write_seq();
        let mut g = db.lock_one(b"k", true).unwrap();
        g.set(b"k", s(b"a"));
        assert!(moved(&mut seq), "a write");
        let _ = g.get(b"k");
        g.update(b"k", |_| (false, ()));
        assert!(!moved(&mut seq), "a read, an update that changed nothing");
        assert!(g.delete(b"k"));
        assert!(moved(&mut seq), "a delete");
        let mut e = s(b"v");
        e.expire_ms = db.now_ms() - 1;
        g.set(b"k", e.clone());
        assert!(moved(&mut seq));
        assert!(g.get(b"k").is_none());
        assert!(moved(&mut seq), "a lazy expiry");
        g.set(b"k", e);
        drop(g);
        moved(&mut seq);
        let removed: usize = (0..SHARDS / EXPIRE_SHARDS_PER_CYCLE)
            .map(|_| db.expire_cycle(EXPIRE_SHARDS_PER_CYCLE))
            .sum();
        assert_eq!(removed, 1);
        assert!(moved(&mut seq), "an active expiry");
        db.flush();
        assert!(moved(&mut seq), "a flush");
    }

    #[test]
    fn expired_entries_vanish_lazily_and_actively() {
        let db = Db::default();
        let now = db.now_ms();
        for i in 0..100u32 {
            let k = i.to_be_bytes();
            let mut g = db.lock_one(&k, true).unwrap();
            let mut e = s(b"v");
            e.expire_ms = if i % 2 == 0 { now - 1 } else { now + 3_600_000 };
            g.set(&k, e);
        }
        assert_eq!(db.len(), 100);
        let mut g = db.lock_one(&0u32.to_be_bytes(), false).unwrap();
        assert!(g.get(&0u32.to_be_bytes()).is_none(), "lazy");
        drop(g);
        assert_eq!(db.len(), 99);
        let removed: usize = (0..SHARDS / EXPIRE_SHARDS_PER_CYCLE)
            .map(|_| db.expire_cycle(EXPIRE_SHARDS_PER_CYCLE))
            .sum();
        assert_eq!(removed, 49);
        assert_eq!(db.len(), 50);
        assert_eq!(db.stats().expired, 50);
        assert_eq!(db.stats().volatile, 50);
    }

    #[test]
    fn a_full_database_refuses_or_evicts() {
        let cap = 100 * (ENTRY_OVERHEAD + 4 + 100);
        let refuse = Db::new(DbConfig {
            max_memory: cap,
            eviction: Eviction::NoEviction,
        });
        let evict = Db::new(DbConfig {
            max_memory: cap,
            eviction: Eviction::AllKeysLru,
        });
        let mut refused = 0;
        for i in 0..1000u32 {
            let k = i.to_be_bytes();
            match refuse.lock_one(&k, true) {
                Ok(mut g) => g.set(&k, s(&[0; 100])),
                Err(Refused::Full) => refused += 1,
                Err(Refused::Busy) => unreachable!("no script runs"),
            }
            evict.lock_one(&k, true).unwrap().set(&k, s(&[0; 100]));
        }
        assert!(refused >= 899, "{refused}");
        assert!(refuse.used() <= cap + ENTRY_OVERHEAD + 104);
        assert!(evict.used() <= cap + ENTRY_OVERHEAD + 104);
        assert!(evict.stats().evicted >= 899);
        // The most recent key survived.
        assert!(
            evict
                .lock_one(&999u32.to_be_bytes(), false)
                .unwrap()
                .get(&999u32.to_be_bytes())
                .is_some()
        );
    }

    #[test]
    fn multi_key_locks_cover_every_key_in_order() {
        let db = Db::default();
        let keys: Vec<Vec<u8>> = (0..50u32).map(|i| i.to_be_bytes().to_vec()).collect();
        let mut g = db.lock_keys(keys.iter().map(Vec::as_slice), true).unwrap();
        for k in &keys {
            g.set(k, s(k));
        }
        drop(g);
        assert_eq!(db.len(), 50);
        let mut g = db.lock_all(false).unwrap();
        g.clear_locked();
        drop(g);
        assert_eq!((db.len(), db.used()), (0, 0));
    }
}
