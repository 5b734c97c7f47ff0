//! Bounded FIFO queues of requests, allocated once.

use std::collections::VecDeque;

use crate::request::Request;

/// A bounded FIFO of requests (a typed queue, a worker's local queue, the central
/// queue). Admission is refused at `capacity`; `headroom` extra slots let a
/// preemptive policy put back requests it already admitted without ever dropping
/// them. Storage is allocated at construction and never grows.
#[derive(Debug, Clone)]
pub struct TypedQueue {
    items: VecDeque<Request>,
    capacity: usize,
    limit: usize,
}

impl TypedQueue {
    /// A queue admitting `capacity` requests, with `headroom` extra slots for
    /// re-queued (preempted) requests.
    pub fn new(capacity: usize, headroom: usize) -> Self {
        Self {
            items: VecDeque::with_capacity(capacity + headroom),
            capacity,
            limit: capacity + headroom,
        }
    }

    /// Admits a new request; hands it back when the queue is full.
    #[inline]
    pub fn push(&mut self, req: Request) -> Result<(), Request> {
        if self.items.len() >= self.capacity {
            return Err(req);
        }
        self.items.push_back(req);
        Ok(())
    }

    /// Puts back an already admitted request at the tail (uses headroom).
    ///
    /// # Panics
    /// If the headroom is exhausted: the owning policy sized it for every worker.
    #[inline]
    pub fn requeue_back(&mut self, req: Request) {
        assert!(
            self.items.len() < self.limit,
            "typed queue headroom exhausted"
        );
        self.items.push_back(req);
    }

    /// Puts back an already admitted request at the head (uses headroom).
    ///
    /// # Panics
    /// If the headroom is exhausted.
    #[inline]
    pub fn requeue_front(&mut self, req: Request) {
        assert!(
            self.items.len() < self.limit,
            "typed queue headroom exhausted"
        );
        self.items.push_front(req);
    }

    /// Removes the head.
    #[inline]
    pub fn pop(&mut self) -> Option<Request> {
        self.items.pop_front()
    }

    /// The head.
    #[inline]
    pub fn front(&self) -> Option<&Request> {
        self.items.front()
    }

    /// Queued requests.
    #[inline]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether nothing is queued.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(id: u64) -> Request {
        Request {
            id,
            token: 0,
            type_id: 0,
            flow: 0,
            arrival_ns: id,
        }
    }

    #[test]
    fn bounded_fifo_with_headroom() {
        let mut q = TypedQueue::new(2, 1);
        assert!(q.push(req(1)).is_ok());
        assert!(q.push(req(2)).is_ok());
        assert_eq!(q.push(req(3)), Err(req(3)));
        q.requeue_front(req(0));
        assert_eq!(q.len(), 3);
        assert_eq!(q.pop().map(|r| r.id), Some(0));
        assert_eq!(q.pop().map(|r| r.id), Some(1));
        assert_eq!(q.front().map(|r| r.id), Some(2));
    }
}
