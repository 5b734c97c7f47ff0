//! The in-memory store's commands allocate nothing of their own on the
//! request path: a GET, an LRANGE over an existing list or an EXISTS of 8
//! keys, once the reply buffer has its size, makes no heap allocation (its
//! arguments and the locks of its shards stay on the stack). A write
//! allocates what it stores (INCR: the new value), as Redis does. Counted
//! by a global allocator that counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use psp_proto::commands::{Session, execute};
use psp_proto::db::Db;

/// Counts the allocations of the threads that turned counting on: the test
/// harness's own thread allocates while the test runs (late, on a loaded
/// machine), and those are not the command's.
struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    if COUNTING.with(Cell::get) {
        ALLOCATIONS.with(|a| a.set(a.get() + 1));
    }
}

// SAFETY: forwards every call to the system allocator unchanged; the
// counters are const-initialized thread-locals of plain values (no
// allocation, no destructor).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// This thread's allocations so far.
fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

fn cmd(args: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    psp_proto::resp::write_command(&args, &mut out);
    out
}

#[test]
fn reads_allocate_nothing() {
    COUNTING.with(|c| c.set(true));
    // The counter counts.
    let before = allocations();
    drop(std::hint::black_box(Vec::<u8>::with_capacity(8)));
    assert_eq!(allocations() - before, 1);
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
        let before = allocations();
        for _ in 0..100 {
            out.clear();
            execute(&req, &db, &mut session, &mut out, &mut || {}).unwrap();
        }
        let made = allocations() - before;
        assert_eq!(
            made,
            0,
            "{}: {made} allocations in 100 runs",
            String::from_utf8_lossy(&req)
        );
    }
}

/// memcached's reads allocate nothing either (the same store, its text
/// protocol's parse and reply).
#[test]
fn memcached_reads_allocate_nothing() {
    COUNTING.with(|c| c.set(true));
    let db = Db::default();
    let mut out = Vec::with_capacity(1 << 16);
    for setup in ["set k 0 0 5\r\nvalue\r\n", "set n 0 0 1\r\n1\r\n"] {
        psp_proto::memcache::execute_db(setup.as_bytes(), &db, &mut out).unwrap();
    }
    for req in ["get k\r\n", "gets k n x\r\n", "mg k v f c t\r\n", "mn\r\n"] {
        out.clear();
        psp_proto::memcache::execute_db(req.as_bytes(), &db, &mut out).unwrap();
        let before = allocations();
        for _ in 0..100 {
            out.clear();
            psp_proto::memcache::execute_db(req.as_bytes(), &db, &mut out).unwrap();
        }
        let made = allocations() - before;
        assert_eq!(made, 0, "{req:?}: {made} allocations in 100 runs");
    }
}
