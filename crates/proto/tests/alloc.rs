//! The in-memory store's commands allocate nothing of their own on the
//! request path: a GET, an LRANGE over an existing list or an EXISTS of 8
//! keys, once the reply buffer has its size, makes no heap allocation (its
//! arguments and the locks of its shards stay on the stack). A write
//! allocates what it stores (INCR: the new value), as Redis does. Counted
//! by a global allocator that counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use psp_proto::commands::{Session, execute};
use psp_proto::db::Db;

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only
// counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

fn cmd(args: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    psp_proto::resp::write_command(&args, &mut out);
    out
}

#[test]
fn reads_allocate_nothing() {
    let db = Db::default();
    let mut session = Session::default();
    let mut out = Vec::with_capacity(1 << 16);
    for setup in [
        // The slow log copies a command that took longer than its bound
        // (10 ms): on a loaded machine a GET descheduled that long would
        // be logged, an allocation of the log's, not the command's.
        cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]),
        cmd(&["SET", "k", "value"]),
        cmd(&["SET", "n", "1"]),
        cmd(&["RPUSH", "l", "a", "b", "c", "d", "e", "f", "g", "h"]),
    ] {
        execute(&setup, &db, &mut session, &mut out, &mut || {}).unwrap();
    }
    for req in [
        cmd(&["GET", "k"]),
        cmd(&["LRANGE", "l", "0", "-1"]),
        cmd(&["EXISTS", "k", "n", "l", "x", "y", "z", "k", "n"]),
    ] {
        // Warm: the reply buffer holds a reply already.
        out.clear();
        execute(&req, &db, &mut session, &mut out, &mut || {}).unwrap();
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        for _ in 0..100 {
            out.clear();
            execute(&req, &db, &mut session, &mut out, &mut || {}).unwrap();
        }
        let made = ALLOCATIONS.load(Ordering::Relaxed) - before;
        assert_eq!(
            made,
            0,
            "{}: {made} allocations in 100 runs",
            String::from_utf8_lossy(&req)
        );
    }
}
