//! The decentralized executor's queues: one bounded multi-producer,
//! multi-consumer queue of jobs per worker, for policies with per-worker rules
//! ([`psp_core::policy::Execution::WorkerQueues`]: `d-fcfs`, `ws`).
//!
//! The front end steers each request straight to its flow's worker queue
//! ([`PerWorkerRules::home`], RSS-like) instead of handing it to a policy; a
//! worker takes from its own queue and, when that is empty and the rules say
//! so, steals the head of another's ([`PerWorkerRules::victim`]). No dispatcher
//! decision sits on the request path; the dispatcher thread only admits
//! requests and records completions, as a NIC and its transmit path would.
//!
//! The queues are `crossbeam_queue::ArrayQueue`s (lock-free, preallocated,
//! well kept): a job is popped by exactly one thread, its owner's or a
//! thief's, so a request can be neither lost nor run twice by the queues
//! (`tests/integration/steal.rs` checks it under stress). Nothing here allocates after
//! construction.

use crossbeam_queue::ArrayQueue;
use psp_core::{FlowId, PerWorkerRules, WorkerId};

use crate::message::Job;

/// One job queue per worker and the rules that fill and drain them.
#[derive(Debug)]
pub struct WorkerQueues {
    queues: Box<[ArrayQueue<Job>]>,
    rules: PerWorkerRules,
}

impl WorkerQueues {
    /// A queue of `capacity` jobs for each of `rules.workers()` workers.
    pub fn new(rules: PerWorkerRules, capacity: usize) -> Self {
        Self {
            queues: (0..rules.workers())
                .map(|_| ArrayQueue::new(capacity.max(1)))
                .collect(),
            rules,
        }
    }

    /// Puts `job` of `flow` at the tail of its flow's worker queue; returns
    /// that worker, or the job back when the queue is full.
    #[inline]
    pub fn steer(&self, flow: FlowId, job: Job) -> Result<WorkerId, Job> {
        let home = self.rules.home(flow);
        self.queues[home as usize].push(job).map(|()| home)
    }

    /// The next job for worker `me`: the head of its own queue, else (with
    /// stealing) the head of the victim's queue. `Some((job, stolen))`.
    #[inline]
    pub fn take(&self, me: WorkerId) -> Option<(Job, bool)> {
        if let Some(job) = self.queues[me as usize].pop() {
            return Some((job, false));
        }
        let victim = self.victim(me)?;
        // The victim's queue may have emptied since its length was read: then
        // nothing is taken and the caller looks again.
        self.queues[victim as usize].pop().map(|job| (job, true))
    }

    /// Whom `me` would steal from now.
    #[inline]
    fn victim(&self, me: WorkerId) -> Option<WorkerId> {
        self.rules.victim(me, |v| self.queues[v as usize].len())
    }

    /// Whether worker `me` has something to take (its own queue, or a queue
    /// it may steal from): what an idle worker checks before it parks.
    #[inline]
    pub(crate) fn has_work_for(&self, me: WorkerId) -> bool {
        !self.queues[me as usize].is_empty() || self.victim(me).is_some()
    }

    /// Whether another worker may steal from `home`'s queue now.
    #[inline]
    pub(crate) fn stealable(&self, home: WorkerId) -> bool {
        self.rules.stealable(self.queues[home as usize].len())
    }

    /// Jobs waiting in every queue.
    pub fn len(&self) -> usize {
        self.queues.iter().map(ArrayQueue::len).sum()
    }

    /// Whether every queue is empty.
    pub fn is_empty(&self) -> bool {
        self.queues.iter().all(ArrayQueue::is_empty)
    }
}
