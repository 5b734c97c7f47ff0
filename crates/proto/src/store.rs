//! The key-value store the protocols' Store-backed executors run against
//! (RESP's and memcached's over RocksDB, `execute_store`): [`Store`], its
//! lock order ([`stripes_of`]), the in-memory test double [`MemStore`], and
//! [`KvStore`], [`Store`] made object safe, so that
//! [`crate::Protocol::execute_store`] (called through the registry's `&dyn
//! Protocol`) can take any store, with [`DynStore`] turning it back into a
//! [`Store`] for the protocols' generic executors. Every [`Store`] is a
//! [`KvStore`]. Nothing here but [`MemStore`] allocates. The in-memory
//! server's full command set runs over [`crate::db::Db`] instead.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

/// The key-value store the executor runs against.
///
/// Keys and values are arbitrary bytes. Each call must be atomic on its own;
/// [`Store::atomically`] groups calls that must not interleave with other writers of the
/// same user key.
pub trait Store {
    /// Appends the value of `key` to `out` and returns whether the key was found.
    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, String>;
    /// Stores `value` under `key`, replacing any previous value.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String>;
    /// Removes `key`; returns whether it existed.
    fn delete(&self, key: &[u8]) -> Result<bool, String>;
    /// Runs `f` with exclusive access to `key`'s read-modify-write (INCR, list pushes/pops),
    /// e.g. a striped lock.
    ///
    /// `key` is the user key; `f` may call `get`/`put`/`delete` on other (derived) keys but
    /// never calls `atomically` again.
    fn atomically<R>(&self, key: &[u8], f: impl FnOnce() -> R) -> R;

    /// Runs `f` with exclusive access to every key of `keys` at once (MSET,
    /// MGET, DEL of several keys: no command on any of them interleaves),
    /// taking what [`Store::atomically`] takes for each, in one global
    /// order so that two such calls never wait for each other in a circle.
    /// `f` never calls `atomically` or `atomically_all`.
    fn atomically_all<R>(&self, keys: &[&[u8]], f: impl FnOnce() -> R) -> R;
}

/// The stripes of `keys` among `stripes` (by `stripe_of`), ascending and
/// each once: the order in which [`Store::atomically_all`] takes them.
pub fn stripes_of(
    keys: &[&[u8]],
    stripes: usize,
    stripe_of: impl Fn(&[u8]) -> usize,
) -> Vec<usize> {
    let mut v: Vec<usize> = keys.iter().map(|k| stripe_of(k) % stripes).collect();
    v.sort_unstable();
    v.dedup();
    v
}

const STRIPES: usize = 64;

/// In-memory [`Store`]: the test double for the Store-backed executors
/// ([`crate::resp::execute`], [`crate::memcache::execute`]).
///
/// A `Mutex<BTreeMap>` holds the records; [`Store::atomically`] takes one of 64 striped
/// locks chosen by a hash of the key. Not meant for production use.
#[derive(Debug)]
pub struct MemStore {
    map: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
    stripes: Vec<Mutex<()>>,
}

impl MemStore {
    /// An empty store.
    pub fn new() -> MemStore {
        MemStore {
            map: Mutex::new(BTreeMap::new()),
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
        }
    }

    /// Number of raw records (string values, list metadata and list elements).
    pub fn len(&self) -> usize {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether the store holds no record at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy of all raw records, in key order.
    pub fn records(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }
}

impl Default for MemStore {
    fn default() -> Self {
        MemStore::new()
    }
}

impl Store for MemStore {
    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, String> {
        let map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        match map.get(key) {
            Some(v) => {
                out.extend_from_slice(v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        map.insert(key.to_vec(), value.to_vec());
        Ok(())
    }

    fn delete(&self, key: &[u8]) -> Result<bool, String> {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(map.remove(key).is_some())
    }

    fn atomically<R>(&self, key: &[u8], f: impl FnOnce() -> R) -> R {
        // FNV-1a
        let hash = key.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        let stripe = &self.stripes[(hash % STRIPES as u64) as usize];
        let _guard = stripe.lock().unwrap_or_else(PoisonError::into_inner);
        f()
    }

    fn atomically_all<R>(&self, keys: &[&[u8]], f: impl FnOnce() -> R) -> R {
        let fnv = |key: &[u8]| {
            key.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            }) as usize
        };
        let _guards: Vec<_> = stripes_of(keys, STRIPES, fnv)
            .into_iter()
            .map(|i| {
                self.stripes[i]
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
            })
            .collect();
        f()
    }
}

/// [`Store`], callable through `&dyn KvStore` (the closures of
/// [`Store::atomically`] and [`Store::atomically_all`] passed as `&mut dyn
/// FnMut()`, each called exactly once).
pub trait KvStore {
    /// As [`Store::get`].
    ///
    /// # Errors
    /// The store failed (one line).
    fn kv_get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, String>;
    /// As [`Store::put`].
    ///
    /// # Errors
    /// The store failed (one line).
    fn kv_put(&self, key: &[u8], value: &[u8]) -> Result<(), String>;
    /// As [`Store::delete`].
    ///
    /// # Errors
    /// The store failed (one line).
    fn kv_delete(&self, key: &[u8]) -> Result<bool, String>;
    /// As [`Store::atomically`]: runs `f` once.
    fn kv_atomically(&self, key: &[u8], f: &mut dyn FnMut());
    /// As [`Store::atomically_all`]: runs `f` once.
    fn kv_atomically_all(&self, keys: &[&[u8]], f: &mut dyn FnMut());
}

impl<S: Store> KvStore for S {
    fn kv_get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, String> {
        self.get(key, out)
    }

    fn kv_put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.put(key, value)
    }

    fn kv_delete(&self, key: &[u8]) -> Result<bool, String> {
        self.delete(key)
    }

    fn kv_atomically(&self, key: &[u8], f: &mut dyn FnMut()) {
        self.atomically(key, f);
    }

    fn kv_atomically_all(&self, keys: &[&[u8]], f: &mut dyn FnMut()) {
        self.atomically_all(keys, f);
    }
}

/// A `&dyn KvStore` as a [`Store`].
#[derive(Clone, Copy)]
pub struct DynStore<'a>(pub &'a dyn KvStore);

/// Runs `f` (an `FnOnce`) through `run`, which calls its `&mut dyn FnMut()`
/// exactly once, and returns what `f` returned.
fn once<R>(f: impl FnOnce() -> R, run: impl FnOnce(&mut dyn FnMut())) -> R {
    let (mut f, mut r) = (Some(f), None);
    run(&mut || {
        if let Some(f) = f.take() {
            r = Some(f());
        }
    });
    r.expect("a KvStore runs the closure it is given exactly once")
}

impl Store for DynStore<'_> {
    fn get(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, String> {
        self.0.kv_get(key, out)
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.0.kv_put(key, value)
    }

    fn delete(&self, key: &[u8]) -> Result<bool, String> {
        self.0.kv_delete(key)
    }

    fn atomically<R>(&self, key: &[u8], f: impl FnOnce() -> R) -> R {
        once(f, |g| self.0.kv_atomically(key, g))
    }

    fn atomically_all<R>(&self, keys: &[&[u8]], f: impl FnOnce() -> R) -> R {
        once(f, |g| self.0.kv_atomically_all(keys, g))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_behind_a_pointer_runs_the_same_commands() {
        let (direct, behind) = (MemStore::new(), MemStore::new());
        let (mut a, mut b, mut scratch) = (Vec::new(), Vec::new(), Vec::new());
        for req in [
            &b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"[..],
            b"*3\r\n$5\r\nRPUSH\r\n$1\r\nl\r\n$1\r\nx\r\n",
            b"*4\r\n$6\r\nLRANGE\r\n$1\r\nl\r\n$1\r\n0\r\n$2\r\n-1\r\n",
            b"*3\r\n$4\r\nMGET\r\n$1\r\nk\r\n$1\r\nl\r\n",
            b"*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n",
        ] {
            crate::resp::execute(req, &direct, &mut a, &mut scratch).unwrap();
            crate::resp::execute(req, &DynStore(&behind), &mut b, &mut scratch).unwrap();
        }
        assert_eq!(a, b);
        assert_eq!(direct.records(), behind.records());
    }
}
