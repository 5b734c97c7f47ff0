//! Once its pool is warm, serving requests on fibers allocates nothing: not
//! to start a fiber, not to suspend or resume it, not to finish it (the one
//! test of this binary, so that the counting allocator sees only it).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use psp_runtime::handler::synthetic;
use psp_runtime::{
    PreemptFlag, RequestFiber, RequestSlot, Resumed, RunLimits, SpinHandler, Spinner, StackPool,
    StackPoolConfig,
};

/// Counts the allocations of the threads that turned counting on.
struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the counters are const-initialized
// thread-locals of plain integers (no allocation, no destructor).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCATIONS.with(|a| a.set(a.get() + 1));
        }
        // SAFETY: the caller's promises about `layout` are passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
fn a_warm_pool_serves_preempted_requests_without_allocating() {
    let spinner = Spinner::calibrate(Duration::from_millis(20));
    let pool = StackPool::new(StackPoolConfig {
        preallocate: 2,
        max_stacks: 2,
        ..StackPoolConfig::default()
    })
    .unwrap();
    let flag = PreemptFlag::new();
    let handler = SpinHandler::new(spinner).with_point_interval(1_000);
    let mut slot = Some(RequestSlot::new(handler, 64, 64));
    let body = synthetic::encode(0, 5_000);

    let serve_one = |slot: &mut Option<RequestSlot<SpinHandler>>| {
        let mut s = slot.take().unwrap();
        s.load(0, 0, &body);
        // SAFETY: the spin handler holds nothing tied to its thread.
        let mut fiber = unsafe { RequestFiber::serve(&pool, s) }.unwrap();
        loop {
            // Preempted at every point: 4 yields per request.
            flag.raise();
            match fiber.resume(&RunLimits::new(&flag)) {
                Resumed::Finished(served) => {
                    assert_eq!(served.outcome, Ok(()));
                    *slot = Some(served.slot);
                    return;
                }
                Resumed::Yielded(_) => {}
            }
        }
    };
    serve_one(&mut slot);
    // The counter counts.
    COUNTING.with(|c| c.set(true));
    drop(std::hint::black_box(Vec::<u8>::with_capacity(8)));
    assert_eq!(ALLOCATIONS.with(|a| a.replace(0)), 1);
    for _ in 0..1_000 {
        serve_one(&mut slot);
    }
    COUNTING.with(|c| c.set(false));
    assert_eq!(ALLOCATIONS.with(Cell::get), 0);
    assert_eq!(pool.stats().mapped, 2);
    assert_eq!(
        slot.unwrap().response,
        5_000u64.to_le_bytes(),
        "the response"
    );
}
