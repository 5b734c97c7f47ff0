//! A key-value store behind a pointer: [`KvStore`] is [`Store`] made object
//! safe, so that [`crate::Protocol::execute_store`] (called through the
//! registry's `&dyn Protocol`) can take any store, and [`DynStore`] turns
//! it back into a [`Store`] for the protocols' generic executors. Every
//! [`Store`] is a [`KvStore`]. Nothing here allocates.

use crate::resp::Store;

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
    use crate::resp::MemStore;

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
