//! The green threads of a preemptive run, shared by both preemptive shapes:
//! stacks, request slots and parked fibers shared by every worker; a flag and
//! a segment clock per worker. Built once, at start-up.

use std::sync::Arc;

use crossbeam_queue::ArrayQueue;

use super::shape::PlanInput;
use crate::green::{RequestSlot, StackPool, StackPoolConfig};
use crate::handler::Handler;
use crate::message::RuntimeError;
use crate::point::PreemptFlag;
use crate::preempt::{GreenWorker, HandlerFiber, SegmentClock, SuspendedFibers};

/// Request slots (a handler instance and 4.3 KB of buffers each; a stack, up
/// to as many, is taken only while a request is started) per worker in a
/// preemptive run, at most (never more than the run's request slots): how
/// many requests may be started and unfinished (running or preempted) at once.
/// Time sharing starts every queued request in turn, so with 64 a queue of a
/// few hundred ran out under load. A request that finds none free is answered
/// with a handler error ("no request slot free for a fiber"), counted.
pub const FIBER_SLOTS_PER_WORKER: usize = 1024;

/// The green threads of a preemptive run.
pub(crate) struct GreenSetup<H> {
    pool: Arc<StackPool>,
    /// Each worker's preemption flag.
    pub(crate) flags: Vec<Arc<PreemptFlag>>,
    /// Each worker's run segments.
    pub(crate) segments: Vec<Arc<SegmentClock>>,
    slots: Arc<ArrayQueue<RequestSlot<H>>>,
    suspended: Arc<SuspendedFibers<HandlerFiber<H>>>,
}

impl<H: Handler + 'static> GreenSetup<H> {
    /// Slots with handlers from `input.make_handler` (each must be
    /// fiber-safe), and as many stacks at most.
    pub(crate) fn new(input: &mut PlanInput<'_, H>) -> Result<Self, RuntimeError> {
        let (workers, max_in_flight) = (input.workers, input.max_in_flight);
        let n = (workers * FIBER_SLOTS_PER_WORKER)
            .min(max_in_flight)
            .max(workers);
        let slots = ArrayQueue::new(n);
        for i in 0..n {
            let handler = (input.make_handler)(i);
            if !handler.fiber_safe() {
                return Err(RuntimeError::Preemptive(input.policy_name.to_string()));
            }
            let _ = slots.push(RequestSlot::new(handler, 256, 4096));
        }
        let pool = StackPool::new(StackPoolConfig {
            preallocate: (2 * workers).min(n),
            max_stacks: n,
            ..StackPoolConfig::default()
        })
        .map_err(|e| RuntimeError::Green(e.to_string()))?;
        Ok(Self {
            pool,
            flags: (0..workers).map(|_| Arc::new(PreemptFlag::new())).collect(),
            segments: (0..workers)
                .map(|_| Arc::new(SegmentClock::new()))
                .collect(),
            slots: Arc::new(slots),
            suspended: Arc::new(SuspendedFibers::new(max_in_flight)),
        })
    }

    /// Requests that may be started and unfinished at once (a slot each).
    pub(crate) fn fiber_slots(&self) -> usize {
        self.slots.capacity()
    }

    /// Worker `i`'s share.
    pub(crate) fn worker(&self, i: usize) -> GreenWorker<H> {
        GreenWorker {
            pool: self.pool.clone(),
            flag: self.flags[i].clone(),
            segment: self.segments[i].clone(),
            slots: self.slots.clone(),
            suspended: self.suspended.clone(),
        }
    }
}
