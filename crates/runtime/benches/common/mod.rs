//! What the cross-thread benchmarks share: how a thread waits for the other.

use std::hint::spin_loop;
use std::thread;

/// Spins before yielding the CPU in a wait: on an oversubscribed machine (2
/// cores, shared) a pure spin could wait out the other thread's whole time slice.
const SPINS_BEFORE_YIELD: u32 = 1 << 14;

/// One step of a spin-wait: `spins` counts the steps of this wait.
#[inline]
pub fn wait(spins: &mut u32) {
    *spins += 1;
    if *spins < SPINS_BEFORE_YIELD {
        spin_loop();
    } else {
        *spins = 0;
        thread::yield_now();
    }
}
