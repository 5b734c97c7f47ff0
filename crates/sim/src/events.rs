//! The simulator's agenda: the pending events (completions, quantum ends,
//! preemption signals, switch ends, ticks) in time order, ties broken by
//! insertion order so that runs are deterministic. It only orders events: what
//! an event does is the event loop's (`engine`).

use psp_core::{Nanos, WorkerId};

/// What happens when an event comes due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventKind {
    Complete,
    QuantumEnd,
    PreemptSignal,
    SwitchDone,
    /// The policy's tick (`Policy::tick_interval`); not tied to a worker.
    Tick,
}

/// 24 bytes: the agenda moves these as it places new ones.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Event {
    pub(crate) at: Nanos,
    /// Insertion order: breaks ties between events at the same time.
    pub(crate) seq: u64,
    /// The worker's generation when the event was scheduled (a stale event
    /// belongs to a segment that already ended).
    pub(crate) gen_: u32,
    pub(crate) worker: WorkerId,
    pub(crate) kind: EventKind,
}

impl Event {
    /// The agenda's key, `(at, seq)` as one integer: one comparison, no branch.
    #[inline]
    fn key(&self) -> u128 {
        (u128::from(self.at) << 64) | u128::from(self.seq)
    }
}

/// How many of the soonest events a new one is compared with, one by one,
/// before the rest are searched by halves.
const SCAN: usize = 4;

/// The pending events sorted latest first, so that the earliest is at the end:
/// taking it is a pop. A new event is compared from that end: under the
/// heavy-tailed workloads simulated here most are short requests'
/// completions, due among the soonest, and are placed after a comparison or
/// two (a binary heap sifts through its depth for each); farther ones by
/// binary search. Keys are unique, so events come out in the order a heap
/// gives.
#[derive(Debug)]
pub(crate) struct Agenda {
    events: Vec<Event>,
}

impl Agenda {
    /// An agenda with room for `capacity` events before it grows.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self {
            events: Vec::with_capacity(capacity),
        }
    }

    /// The earliest event.
    #[inline]
    pub(crate) fn peek(&self) -> Option<&Event> {
        self.events.last()
    }

    /// Takes the earliest event.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<Event> {
        self.events.pop()
    }

    /// Events pending.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.events.len()
    }

    /// Schedules `ev`.
    #[inline]
    pub(crate) fn push(&mut self, ev: Event) {
        let key = ev.key();
        let n = self.events.len();
        let mut i = n;
        while i > 0 && n - i < SCAN && self.events[i - 1].key() < key {
            i -= 1;
        }
        if n - i == SCAN && i > 0 && self.events[i - 1].key() < key {
            i = self.events[..i].partition_point(|e| e.key() > key);
        }
        self.events.insert(i, ev);
    }
}

#[cfg(test)]
mod tests {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    use super::*;

    /// Random pushes (near and far, many at the same time) and pops: the
    /// agenda gives the events in the order a heap on `(at, seq)` gives.
    #[test]
    fn events_come_out_in_time_then_insertion_order() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut rand = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let (mut agenda, mut heap) = (Agenda::with_capacity(4), BinaryHeap::new());
        let (mut now, mut seq) = (0u64, 0u64);
        for step in 0..200_000u32 {
            if rand() % 5 < 3 || heap.is_empty() {
                let at = now
                    + match rand() % 4 {
                        0 => 0,
                        1 => rand() % 4,
                        2 => rand() % 1_000,
                        _ => rand() % 1_000_000,
                    };
                let ev = Event {
                    at,
                    seq,
                    gen_: step,
                    worker: (rand() % 64) as WorkerId,
                    kind: EventKind::Complete,
                };
                seq += 1;
                agenda.push(ev);
                heap.push(Reverse((at, ev.seq, step)));
            } else {
                let Reverse((at, seq, gen_)) = heap.pop().expect("non-empty");
                let ev = agenda.pop().expect("as many as the heap");
                assert_eq!((ev.at, ev.seq, ev.gen_), (at, seq, gen_));
                now = at;
            }
            assert_eq!(agenda.len(), heap.len());
            assert_eq!(agenda.peek().map(|e| e.seq), heap.peek().map(|r| r.0.1));
        }
    }
}
