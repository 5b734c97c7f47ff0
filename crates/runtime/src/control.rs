//! State shared by every thread of a run: the stop flag that releases the
//! workers, the failure flag a panicking thread raises, and one cache line per
//! worker with its response gate and its served counter.
//!
//! The response gate decides, for each job, who wins at the drain deadline:
//! the worker answering it, or the dispatcher abandoning it as stranded. Exactly
//! one side wins, so a request counted as stranded is never answered afterwards
//! and the server's counters agree with what clients receive.
//!
//! Threads: the dispatcher reads and closes gates; worker `i` alone opens, passes
//! and counts through line `i`; anyone may raise `stop` and `failed`.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

/// The gate is open: the worker may answer its job.
const OPEN: u8 = 0;
/// The worker is answering its job (between the handler's return and the
/// completion's push).
const ANSWERING: u8 = 1;
/// The dispatcher abandoned the worker's job: it must not be answered.
const CLOSED: u8 = 2;

/// One worker's shared line (written per job by that worker only, until the
/// drain deadline).
#[derive(Debug, Default)]
pub(crate) struct WorkerLine {
    gate: AtomicU8,
    served: AtomicU64,
    stolen: AtomicU64,
}

/// The run's shared flags and per-worker lines.
#[derive(Debug)]
pub struct RunControl {
    stop: CachePadded<AtomicBool>,
    failed: CachePadded<AtomicBool>,
    workers: Box<[CachePadded<WorkerLine>]>,
}

impl RunControl {
    /// The control of a run with `workers` workers.
    pub fn new(workers: usize) -> Self {
        Self {
            stop: CachePadded::new(AtomicBool::new(false)),
            failed: CachePadded::new(AtomicBool::new(false)),
            workers: (0..workers).map(|_| CachePadded::default()).collect(),
        }
    }

    /// Asks the workers to exit once their ring is empty.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
    }

    /// Whether the workers were asked to exit.
    #[inline]
    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Records that a thread of the run panicked: the dispatcher ends the run.
    pub(crate) fn fail(&self) {
        self.failed.store(true, Ordering::Release);
    }

    /// Whether a thread of the run panicked.
    #[inline]
    pub(crate) fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// Worker `w` finished its job's handler: `true` if it may answer (then it
    /// must call [`answered`](Self::answered) after pushing the completion),
    /// `false` if the dispatcher abandoned the job (do not answer, exit).
    #[inline]
    pub(crate) fn begin_answer(&self, w: usize) -> bool {
        self.workers[w]
            .gate
            .compare_exchange(OPEN, ANSWERING, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Worker `w` answered its job and pushed the completion.
    #[inline]
    pub(crate) fn answered(&self, w: usize) {
        let line = &self.workers[w];
        // Only worker `w` writes its counter: a load and a store, no RMW.
        line.served
            .store(line.served.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        // Release: the completion pushed before this is visible to a dispatcher
        // whose `close` reads OPEN after it.
        line.gate.store(OPEN, Ordering::Release);
    }

    /// The dispatcher abandons whatever worker `w` holds: after this returns, the
    /// worker answers nothing more, and every completion it pushed is visible.
    /// Waits (briefly: a send and a ring push) for an answer under way.
    pub(crate) fn close(&self, w: usize) {
        let gate = &self.workers[w].gate;
        loop {
            match gate.compare_exchange(OPEN, CLOSED, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) | Err(CLOSED) => return,
                Err(_) => std::hint::spin_loop(),
            }
        }
    }

    /// Jobs worker `w` answered.
    pub(crate) fn served(&self, w: usize) -> u64 {
        self.workers[w].served.load(Ordering::Relaxed)
    }

    /// Worker `w` took a job from another worker's queue.
    #[inline]
    pub(crate) fn stole(&self, w: usize) {
        let line = &self.workers[w];
        // Only worker `w` writes its counter: a load and a store, no RMW.
        line.stolen
            .store(line.stolen.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// Jobs worker `w` took from other workers' queues.
    pub(crate) fn stolen(&self, w: usize) -> u64 {
        self.workers[w].stolen.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_closed_gate_refuses_the_answer_and_an_open_one_counts_it() {
        let c = RunControl::new(2);
        assert!(c.begin_answer(0));
        c.answered(0);
        assert_eq!(c.served(0), 1);
        c.close(0);
        assert!(!c.begin_answer(0), "abandoned jobs are not answered");
        assert!(c.begin_answer(1));
        c.answered(1);
        assert_eq!((c.served(0), c.served(1)), (1, 1));
    }

    /// Stress: a worker answers jobs while the dispatcher closes the gate at a
    /// random moment; every answer the worker began is one the dispatcher sees
    /// counted once it has closed, and none begins after.
    #[test]
    fn exactly_one_side_wins_the_gate() {
        for round in 0..200u64 {
            let c = Arc::new(RunControl::new(1));
            let answers = Arc::new(AtomicU64::new(0));
            let worker = {
                let (c, answers) = (c.clone(), answers.clone());
                std::thread::spawn(move || {
                    while c.begin_answer(0) {
                        answers.fetch_add(1, Ordering::Relaxed);
                        c.answered(0);
                    }
                })
            };
            for _ in 0..(round % 17) * 50 {
                std::hint::spin_loop();
            }
            c.close(0);
            let seen = c.served(0);
            worker.join().unwrap();
            assert_eq!(seen, answers.load(Ordering::Relaxed), "round {round}");
            assert_eq!(c.served(0), seen, "nothing answered after the close");
        }
    }
}
