//! Which concurrent map to build the in-memory store's keyspace on: `dashmap`
//! 6, `scc` 3 (`scc::HashMap`, its `*_sync` methods), a naive baseline of 64
//! shards of `std::sync::Mutex<std::collections::HashMap>`, and the store's
//! own layout (`src/db.rs`: 256 shards of `hashbrown` maps under
//! `parking_lot` mutexes, each on its own cache lines).
//!
//! Every map holds 100,000 keys of 16 bytes (`key:000000123456`) with values
//! of 100 bytes, keys and values `Box<[u8]>`, and every map hashes with
//! `hashbrown`'s default hasher (foldhash), so only the maps differ. Each
//! iteration runs 2 threads (one per core of the 2-core machine this was
//! written on), each doing [`OPS`] operations; the time is the wall time from
//! both threads starting (a barrier, after the spawn) to both finishing, and
//! the reported throughput is the operations of both threads.
//!
//! - `mix`: 90% GET (the value copied into a reused `Vec`) and 10% SET (the
//!   value replaced by a freshly allocated one, the old one freed outside
//!   the lock) on uniformly random keys (xorshift).
//! - `contention`: both threads increment one counter under one key, a
//!   read-modify-write under the map's per-key lock (`get_mut`,
//!   `update_sync`, the shard's mutex); after every iteration the count must
//!   have grown by exactly `2 * OPS`, so this also checks atomicity.
//! - `churn`: each thread inserts 64 fresh keys (with fresh values), then
//!   removes them (each removal must find its key), and again; every insert
//!   and every remove is one operation. The map stays at 100,000 keys.
//!
//! ns/op is the median time per iteration divided by `2 * OPS`.
//!
//! Run: `cargo bench -p psp-proto --features bench --bench maps -- --warm-up-time 1
//! --measurement-time 3` (a filter such as `mix/` or `/scc` picks some).

use std::collections::HashMap as StdMap;
use std::hash::BuildHasher;
use std::hint::black_box;
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use hashbrown::DefaultHashBuilder as Hasher;

/// Operations per thread per iteration.
const OPS: usize = 20_000;
/// Keys preloaded into every map.
const KEYS: usize = 100_000;
/// Bytes of every value.
const VALUE_LEN: usize = 100;
/// Keys one churn thread inserts before removing them.
const CHURN_BATCH: usize = 64;
/// The contention scenario's key (16 bytes, like the others).
const COUNTER: &[u8] = b"counter:00000000";

/// The operations the store needs of its map.
trait Store: Sync {
    /// An empty map sized for `capacity` keys.
    fn with_capacity(capacity: usize) -> Self;
    /// Copies `key`'s value into `out` (GET); false if absent.
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> bool;
    /// Replaces `key`'s value (SET on a present key) and returns the old one,
    /// so that the caller frees it after the lock is released.
    fn replace(&self, key: &[u8], value: Box<[u8]>) -> Option<Box<[u8]>>;
    /// Adds 1 to the little-endian `u64` at the start of `key`'s value, in
    /// place, under the key's lock (INCR); false if absent.
    fn incr(&self, key: &[u8]) -> bool;
    /// Inserts `key` (SET of a new key); false if it was present.
    fn insert(&self, key: Box<[u8]>, value: Box<[u8]>) -> bool;
    /// Removes `key` (DEL); false if absent.
    fn remove(&self, key: &[u8]) -> bool;
}

/// Adds 1 to the counter at the start of `value`.
fn bump(value: &mut [u8]) {
    let mut n = [0; 8];
    n.copy_from_slice(&value[..8]);
    value[..8].copy_from_slice(&(u64::from_le_bytes(n) + 1).to_le_bytes());
}

/// `dashmap` 6 with its default shard count (4 per CPU, a power of two).
struct Dash(dashmap::DashMap<Box<[u8]>, Box<[u8]>, Hasher>);

impl Store for Dash {
    fn with_capacity(capacity: usize) -> Self {
        Self(dashmap::DashMap::with_capacity_and_hasher(
            capacity,
            Hasher::default(),
        ))
    }
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> bool {
        let Some(v) = self.0.get(key) else {
            return false;
        };
        out.clear();
        out.extend_from_slice(&v);
        true
    }
    fn replace(&self, key: &[u8], value: Box<[u8]>) -> Option<Box<[u8]>> {
        self.0
            .get_mut(key)
            .map(|mut v| std::mem::replace(&mut *v, value))
    }
    fn incr(&self, key: &[u8]) -> bool {
        self.0.get_mut(key).map(|mut v| bump(&mut v)).is_some()
    }
    fn insert(&self, key: Box<[u8]>, value: Box<[u8]>) -> bool {
        self.0.insert(key, value).is_none()
    }
    fn remove(&self, key: &[u8]) -> bool {
        self.0.remove(key).is_some()
    }
}

/// `scc` 3's `HashMap`, through its synchronous methods.
struct Scc(scc::HashMap<Box<[u8]>, Box<[u8]>, Hasher>);

impl Store for Scc {
    fn with_capacity(capacity: usize) -> Self {
        Self(scc::HashMap::with_capacity_and_hasher(
            capacity,
            Hasher::default(),
        ))
    }
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> bool {
        self.0
            .read_sync(key, |_, v| {
                out.clear();
                out.extend_from_slice(v);
            })
            .is_some()
    }
    fn replace(&self, key: &[u8], value: Box<[u8]>) -> Option<Box<[u8]>> {
        self.0.update_sync(key, |_, v| std::mem::replace(v, value))
    }
    fn incr(&self, key: &[u8]) -> bool {
        self.0.update_sync(key, |_, v| bump(v)).is_some()
    }
    fn insert(&self, key: Box<[u8]>, value: Box<[u8]>) -> bool {
        self.0.insert_sync(key, value).is_ok()
    }
    fn remove(&self, key: &[u8]) -> bool {
        self.0.remove_sync(key).is_some()
    }
}

/// The baseline's shard map.
type StdShard = StdMap<Box<[u8]>, Box<[u8]>, Hasher>;
/// The store's shard map.
type PlShard = hashbrown::HashMap<Box<[u8]>, Box<[u8]>>;

/// A shard on its own cache lines.
#[repr(align(128))]
struct Padded<T>(T);

/// The [`Store`] operations of a layout whose `shard(key)` returns a locked
/// map guard (`StdSharded`, `PlSharded`): the same code over either mutex.
macro_rules! sharded_ops {
    () => {
        fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> bool {
            let shard = self.shard(key);
            let Some(v) = shard.get(key) else {
                return false;
            };
            out.clear();
            out.extend_from_slice(v);
            true
        }
        fn replace(&self, key: &[u8], value: Box<[u8]>) -> Option<Box<[u8]>> {
            self.shard(key)
                .get_mut(key)
                .map(|v| std::mem::replace(v, value))
        }
        fn incr(&self, key: &[u8]) -> bool {
            self.shard(key).get_mut(key).map(|v| bump(v)).is_some()
        }
        fn insert(&self, key: Box<[u8]>, value: Box<[u8]>) -> bool {
            let mut shard = self.shard(&key);
            shard.insert(key, value).is_none()
        }
        fn remove(&self, key: &[u8]) -> bool {
            // Bound first: the old entry is freed after the lock is released.
            let old = self.shard(key).remove(key);
            old.is_some()
        }
    };
}

/// The baseline: 64 shards of `std` maps under `std` mutexes.
struct StdSharded {
    shards: Box<[Padded<Mutex<StdShard>>]>,
    /// Picks the shard; its seed is not the maps' (so a shard's keys are not
    /// alike in the bits its map looks at).
    hasher: Hasher,
}

impl StdSharded {
    const SHARDS: usize = 64;

    fn shard(&self, key: &[u8]) -> std::sync::MutexGuard<'_, StdShard> {
        let i = (self.hasher.hash_one(key) >> 32) as usize % Self::SHARDS;
        self.shards[i]
            .0
            .lock()
            .expect("no thread panics holding a shard")
    }
}

impl Store for StdSharded {
    fn with_capacity(capacity: usize) -> Self {
        let per_shard = capacity.div_ceil(Self::SHARDS) * 5 / 4;
        Self {
            shards: (0..Self::SHARDS)
                .map(|_| {
                    Padded(Mutex::new(StdMap::with_capacity_and_hasher(
                        per_shard,
                        Hasher::default(),
                    )))
                })
                .collect(),
            hasher: Hasher::default(),
        }
    }
    sharded_ops!();
}

/// The store's layout (`src/db.rs`): 256 shards of `hashbrown` maps under
/// `parking_lot` mutexes.
struct PlSharded {
    shards: Box<[Padded<parking_lot::Mutex<PlShard>>]>,
    /// Picks the shard (seeded apart from the maps, as [`StdSharded::hasher`]).
    hasher: Hasher,
}

impl PlSharded {
    const SHARDS: usize = 256;

    fn shard(&self, key: &[u8]) -> parking_lot::MutexGuard<'_, PlShard> {
        let i = (self.hasher.hash_one(key) >> 56) as usize % Self::SHARDS;
        self.shards[i].0.lock()
    }
}

impl Store for PlSharded {
    fn with_capacity(capacity: usize) -> Self {
        let per_shard = capacity.div_ceil(Self::SHARDS) * 5 / 4;
        Self {
            shards: (0..Self::SHARDS)
                .map(|_| {
                    Padded(parking_lot::Mutex::new(hashbrown::HashMap::with_capacity(
                        per_shard,
                    )))
                })
                .collect(),
            hasher: Hasher::default(),
        }
    }
    sharded_ops!();
}

/// xorshift64*: cheap, good enough to pick keys.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// `prefix` followed by `n` in decimal, zero-padded to 16 bytes in all.
fn key(prefix: &[u8], mut n: u64) -> [u8; 16] {
    let mut k = [b'0'; 16];
    k[..prefix.len()].copy_from_slice(prefix);
    for d in k[prefix.len()..].iter_mut().rev() {
        *d = b'0' + (n % 10) as u8;
        n /= 10;
    }
    k
}

/// A fresh value.
fn value() -> Box<[u8]> {
    vec![b'v'; VALUE_LEN].into_boxed_slice()
}

/// A map of `S` with the preloaded keys and the counter (at 0).
fn preloaded<S: Store>(keys: &[Box<[u8]>]) -> S {
    let map = S::with_capacity(keys.len() + 1 + 2 * CHURN_BATCH);
    for k in keys {
        assert!(map.insert(k.clone(), value()));
    }
    let mut counter = value();
    counter[..8].fill(0);
    assert!(map.insert(COUNTER.into(), counter));
    map
}

/// The wall time of `work(0)` and `work(1)` on 2 threads, from both being
/// ready to both being done.
fn two_threads(work: impl Fn(usize) + Sync) -> Duration {
    let barrier = Barrier::new(2);
    thread::scope(|s| {
        let other = s.spawn(|| {
            barrier.wait();
            work(1);
        });
        barrier.wait();
        let start = Instant::now();
        work(0);
        other.join().expect("the other thread finishes");
        start.elapsed()
    })
}

/// 90% GET, 10% SET on uniformly random keys.
fn mix<S: Store>(map: &S, keys: &[Box<[u8]>], iteration: u64) -> Duration {
    two_threads(|t| {
        let mut rng = Rng::new(iteration * 2 + t as u64 + 1);
        let mut out = Vec::with_capacity(VALUE_LEN);
        for _ in 0..OPS {
            let r = rng.next();
            let k = &keys[(r >> 32) as usize % keys.len()];
            if r.is_multiple_of(10) {
                let old = map.replace(k, value());
                assert!(old.is_some());
            } else {
                assert!(map.get_into(k, &mut out));
                black_box(&out);
            }
        }
    })
}

/// The counter's value.
fn count<S: Store>(map: &S) -> u64 {
    let mut out = Vec::new();
    assert!(map.get_into(COUNTER, &mut out));
    u64::from_le_bytes(out[..8].try_into().expect("8 bytes"))
}

/// Both threads increment the one counter; the count must be exact.
fn contention<S: Store>(map: &S) -> Duration {
    let before = count(map);
    let elapsed = two_threads(|_| {
        for _ in 0..OPS {
            assert!(map.incr(COUNTER));
        }
    });
    assert_eq!(count(map), before + 2 * OPS as u64, "lost increments");
    elapsed
}

/// Each thread inserts [`CHURN_BATCH`] fresh keys and removes them, again.
fn churn<S: Store>(map: &S, iteration: u64) -> Duration {
    two_threads(|t| {
        let prefix: &[u8] = if t == 0 { b"new0:" } else { b"new1:" };
        let mut next = iteration * OPS as u64;
        for _ in 0..OPS / (2 * CHURN_BATCH) {
            let first = next;
            for _ in 0..CHURN_BATCH {
                assert!(map.insert(Box::from(key(prefix, next)), value()));
                next += 1;
            }
            for n in first..next {
                assert!(map.remove(&key(prefix, n)));
            }
        }
    })
}

/// The three scenarios on one candidate.
fn candidate<S: Store>(c: &mut Criterion, name: &str, keys: &[Box<[u8]>]) {
    let map: S = preloaded(keys);
    // Churn does OPS rounded down to whole batches of insert + remove.
    let churn_ops = OPS / (2 * CHURN_BATCH) * 2 * CHURN_BATCH;
    let scenarios: [(&str, usize); 3] = [("mix", OPS), ("contention", OPS), ("churn", churn_ops)];
    for (scenario, ops) in scenarios {
        let mut group = c.benchmark_group(scenario);
        group.throughput(Throughput::Elements(2 * ops as u64));
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|i| match scenario {
                        "mix" => mix(&map, keys, i),
                        "contention" => contention(&map),
                        _ => churn(&map, i),
                    })
                    .sum()
            });
        });
        group.finish();
    }
}

fn maps(c: &mut Criterion) {
    let keys: Vec<Box<[u8]>> = (0..KEYS as u64)
        .map(|i| Box::from(key(b"key:", i)))
        .collect();
    candidate::<Dash>(c, "dashmap", &keys);
    candidate::<Scc>(c, "scc", &keys);
    candidate::<StdSharded>(c, "std-mutex-64", &keys);
    candidate::<PlSharded>(c, "pl-hashbrown-256", &keys);
}

criterion_group!(benches, maps);
criterion_main!(benches);
