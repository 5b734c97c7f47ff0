//! One implementation of SYNERGY's and Tiny Quanta's rules: the same small
//! deterministic trace goes through the rules as the simulator drives them
//! (the `psp-core` policy, through the `Policy` hooks the simulator calls)
//! and as the runtime's executor drives them (its `LocalQueues`: admission,
//! a free worker's take, the timer's pass, a preempted request's requeue),
//! one event at a time on one thread, and the two decision sequences must
//! be equal: where each request goes, what each free worker takes, which
//! expired quanta preempt, and the counters (steals, wait-queue passes,
//! preemptions, renewals).

use std::collections::HashSet;
use std::sync::Arc;

use psp_core::policy::{Execution, LocalRules, Policy, PolicyContext, PolicySpec, TypeInfo};
use psp_core::{Action, Request, WorkerId};
use psp_runtime::{Clock, Job, LocalQueues, PreemptFlag};

const WORKERS: usize = 2;

/// A trace event.
#[derive(Debug, Clone, Copy)]
enum Event {
    /// Request `id` arrives on `flow`.
    Arrive(u64, u16),
    /// Worker `w` is free and looks for its next request.
    Free(usize),
    /// The quantum of the request running on worker `w` expired.
    Expire(usize),
    /// The request running on worker `w` completed.
    Complete(usize),
}

/// An executor of the rules, driven one event at a time.
trait Executor {
    /// Returns the decision the event led to, as text.
    fn step(&mut self, e: Event, long: &[bool]) -> String;
    /// Preemptions, renewals, steals, wait-queue passes.
    fn counters(&self) -> [u64; 4];
}

fn policy(name: &str, queue_capacity: usize) -> Box<dyn Policy> {
    let ctx = PolicyContext {
        workers: WORKERS,
        types: vec![TypeInfo {
            name: "any".into(),
            mean_service_ns: Some(1_000.0),
        }],
        queue_capacity,
    };
    name.parse::<PolicySpec>().unwrap().build(&ctx).unwrap()
}

/// The simulator's side: the policy through the hooks the engine calls.
struct Simulated {
    p: Box<dyn Policy>,
    running: [Option<Request>; WORKERS],
}

impl Executor for Simulated {
    fn step(&mut self, e: Event, long: &[bool]) -> String {
        match e {
            Event::Arrive(id, flow) => {
                let ok = self.p.on_arrival(req(id, flow), 0).is_ok();
                format!("arrive {id}: {}", if ok { "queued" } else { "refused" })
            }
            Event::Free(w) => match self.p.next_action(0) {
                Some(Action::Dispatch {
                    worker,
                    req,
                    quantum_ns,
                }) => {
                    assert_eq!(worker as usize, w, "the trace frees one worker at a time");
                    // A request that begins and is long declares itself
                    // (the engine's feedback rule); a resumed one is armed.
                    if quantum_ns.is_none() && long[req.id as usize] {
                        self.p.on_feedback_start(worker, 0);
                    }
                    self.running[w] = Some(req);
                    format!("free {w}: takes {}", req.id)
                }
                Some(a) => panic!("unexpected {a:?}"),
                None => format!("free {w}: nothing"),
            },
            Event::Expire(w) => {
                if self.p.on_quantum_expired(w as WorkerId, 0) {
                    let r = self.running[w].take().expect("a running request");
                    self.p.on_preempted(w as WorkerId, r, 0);
                    format!("expire {w}: preempts {}", r.id)
                } else {
                    format!("expire {w}: renews")
                }
            }
            Event::Complete(w) => {
                let r = self.running[w].take().expect("a running request");
                self.p.on_completion(w as WorkerId, &r, 1_000, 0);
                format!("complete {w}: {}", r.id)
            }
        }
    }

    fn counters(&self) -> [u64; 4] {
        let s = self.p.stats();
        [
            s.preemptions,
            s.preemptions_avoided,
            s.steals,
            s.wait_queue_passes,
        ]
    }
}

/// The runtime's side: its local executor's queues, driven as its workers
/// and its timer drive them.
struct Runtime {
    rules: LocalRules,
    q: LocalQueues,
    detector: psp_core::policy::CongestionDetector,
    running: [Option<Job>; WORKERS],
    preempted: HashSet<u32>,
}

impl Runtime {
    fn new(p: &dyn Policy, queue_capacity: usize) -> Self {
        let Execution::LocalPreemptive(rules) = p.execution() else {
            panic!("a local executor's policy");
        };
        let flags = (0..WORKERS).map(|_| Arc::new(PreemptFlag::new())).collect();
        Runtime {
            rules,
            q: LocalQueues::new(rules, flags, 64, queue_capacity, Clock::new()),
            detector: psp_core::policy::CongestionDetector::new(0),
            running: [None; WORKERS],
            preempted: HashSet::new(),
        }
    }

    fn preempt(&mut self, w: usize) -> String {
        let job = self.running[w].take().expect("a running request");
        self.q.flag(w).clear();
        self.q.feedback(w).end();
        self.q.set_running(w, false);
        self.preempted.insert(job.token);
        self.q.requeue_preempted(w, job);
        format!("expire {w}: preempts {}", job.token)
    }
}

impl Executor for Runtime {
    fn step(&mut self, e: Event, long: &[bool]) -> String {
        match e {
            Event::Arrive(id, flow) => {
                let job = Job {
                    token: id as u32,
                    type_id: 0,
                    len: 0,
                    count: 1,
                    deadline_ns: psp_runtime::NO_DEADLINE,
                };
                let ok = self.q.admit(flow, job).is_ok();
                format!("arrive {id}: {}", if ok { "queued" } else { "refused" })
            }
            Event::Free(w) => match self.q.take(w) {
                Some(job) => {
                    let resumed = self.preempted.remove(&job.token);
                    let fb = self.q.feedback(w);
                    // As the worker does: a resumed long request is re-armed
                    // at once, a new one arms when it declares itself.
                    fb.begin(resumed, 1_000_000);
                    if !resumed && long[job.token as usize] {
                        fb.start();
                    }
                    self.q.set_running(w, true);
                    self.running[w] = Some(job);
                    format!("free {w}: takes {}", job.token)
                }
                None => format!("free {w}: nothing"),
            },
            Event::Expire(w) => match self.rules {
                LocalRules::Synergy(_) => {
                    let before = self.q.stats().preemptions[w];
                    // The timer's pass at the worker's deadline (the other
                    // workers' deadlines, armed later, have not passed).
                    let deadline = self.q.feedback(w).deadline_ns();
                    assert_ne!(deadline, 0, "expire {w}: its timer is armed");
                    self.q.timer_pass(deadline, &mut self.detector);
                    if self.q.stats().preemptions[w] > before {
                        assert!(self.q.flag(w).is_raised(), "preempted by the flag");
                        self.preempt(w)
                    } else {
                        format!("expire {w}: renews")
                    }
                }
                // As the worker does at its own deadline.
                LocalRules::Tq(r) => {
                    if r.yields_on_expiry(self.q.own_queued(w)) {
                        self.preempt(w)
                    } else {
                        self.q.note_renewal(w);
                        format!("expire {w}: renews")
                    }
                }
            },
            Event::Complete(w) => {
                let job = self.running[w].take().expect("a running request");
                self.q.feedback(w).end();
                self.q.set_running(w, false);
                format!("complete {w}: {}", job.token)
            }
        }
    }

    fn counters(&self) -> [u64; 4] {
        let s = self.q.stats();
        let sum = |v: &[u64]| v.iter().sum::<u64>();
        [
            sum(&s.preemptions),
            sum(&s.preemptions_avoided),
            sum(&s.steals),
            sum(&s.wait_queue_passes),
        ]
    }
}

fn req(id: u64, flow: u16) -> Request {
    Request {
        id,
        token: id as u32,
        type_id: 0,
        flow,
        arrival_ns: 0,
    }
}

/// Runs `trace` through both executors of `policy`; returns the simulator's
/// decisions after checking the runtime's are the same.
fn both(policy_name: &str, queue_capacity: usize, trace: &[Event], long: &[bool]) -> Vec<String> {
    let p = policy(policy_name, queue_capacity);
    let mut rt = Runtime::new(&*p, queue_capacity);
    let mut sim = Simulated {
        p,
        running: [None, None],
    };
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for &e in trace {
        a.push(sim.step(e, long));
        b.push(rt.step(e, long));
    }
    assert_eq!(
        a, b,
        "{policy_name}: the simulator's and the runtime's decisions"
    );
    assert_eq!(
        sim.counters(),
        rt.counters(),
        "{policy_name}: preemptions, renewals, steals, wait-queue passes"
    );
    a
}

/// A flow whose requests SYNERGY steers to worker `w`.
fn flow_of(w: usize) -> u16 {
    let Execution::LocalPreemptive(LocalRules::Synergy(r)) = policy("synergy", 8).execution()
    else {
        unreachable!()
    };
    (0..u16::MAX).find(|&f| r.home(f) as usize == w).unwrap()
}

#[test]
fn synergy_decides_the_same_in_the_simulator_and_the_runtime() {
    use Event::*;
    let (f0, f1) = (flow_of(0), flow_of(1));
    // 0 is long; the others short.
    let long = [true, false, false, false, false, true, true];
    let trace = [
        Arrive(0, f0),
        Free(0),   // own queue: 0, which declares itself long
        Expire(0), // nothing queued on 0: renewed
        Arrive(1, f0),
        Arrive(2, f0),
        Arrive(3, f0),
        Free(1),     // own and wait queues empty: steals 1 and 2 from 0 (running long)
        Expire(0),   // 3 queued on 0: preempts 0, to the wait queue
        Free(0),     // own queue first: 3
        Complete(1), // 1 done
        Free(1),     // own queue: 2 (stolen earlier)
        Complete(0),
        Free(0), // own queue empty: the wait queue: 0, resumed long
        Complete(1),
        Free(1), // nothing anywhere
        Arrive(4, f1),
        Free(1),     // own queue: 4
        Complete(0), // 0 done
        Complete(1),
    ];
    let d = both("synergy", 8, &trace, &long);
    // The trace does what it says (the comparison is not between two
    // executors that both do nothing).
    assert_eq!(d[6], "free 1: takes 1");
    assert_eq!(d[7], "expire 0: preempts 0");
    assert_eq!(d[12], "free 0: takes 0");
    assert_eq!(d[2], "expire 0: renews");
    assert_eq!(d[14], "free 1: nothing");
}

#[test]
fn synergy_renews_instead_of_preempting_into_a_full_wait_queue_in_both() {
    use Event::*;
    let (f0, f1) = (flow_of(0), flow_of(1));
    let long = [true, true, false, false];
    // A wait queue bound of 1: the second preemption finds it full.
    let trace = [
        Arrive(0, f0),
        Arrive(1, f1),
        Free(0),
        Free(1),
        Arrive(2, f0),
        Expire(0), // 2 queued: preempts 0 into the wait queue (now full)
        Free(0),   // own queue: 2
        Arrive(3, f1),
        Expire(1), // 3 queued, but the wait queue is full: renews
        Complete(0),
        Complete(1),
    ];
    let d = both("synergy:ws=off", 1, &trace, &long);
    assert_eq!(d[5], "expire 0: preempts 0");
    assert_eq!(d[8], "expire 1: renews");
}

#[test]
fn tiny_quanta_decides_the_same_in_the_simulator_and_the_runtime() {
    use Event::*;
    let long = [false; 8];
    let trace = [
        Arrive(0, 0), // JSQ: worker 0 (lowest index among equals)
        Arrive(1, 0), // worker 0 holds one: worker 1
        Free(0),
        Free(1),
        Arrive(2, 0), // both running one: worker 0
        Expire(0),    // 2 queued on 0: 0 yields to its tail
        Free(0),      // 2
        Expire(1),    // nothing else on 1: renews
        Expire(0),    // 0 queued behind 2: yields
        Free(0),      // 0 again
        Complete(0),
        Free(0), // 2, resumed
        Complete(0),
        Complete(1),
        Free(1), // nothing
    ];
    let d = both("tq", 8, &trace, &long);
    assert_eq!(d[3], "free 1: takes 1");
    assert_eq!(d[5], "expire 0: preempts 0");
    assert_eq!(d[7], "expire 1: renews");
    assert_eq!(d[11], "free 0: takes 2");
}
