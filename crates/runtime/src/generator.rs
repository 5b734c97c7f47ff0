//! The in-process open-loop front end of `psp run`: it generates the arrival
//! schedule on the dispatcher's thread, writes each request's body (the
//! application's [`BodyEncoder`]) into the pool buffer of its token, classifies
//! it by its type header and admits it when it is due. Workers read the bodies
//! through [`GeneratedIo`]. It plugs into the one dispatch loop as a
//! [`FrontEnd`].

use std::sync::Arc;
use std::time::Duration;

use psp_core::{Classifier, Request};
use psp_workload::{Arrival, ArrivalSource};

use crate::dispatcher::{ARRIVAL_BATCH, DispatchCore, FrontEnd};
use crate::handler::{BodyEncoder, HandlerError};
use crate::idle::{IdleStrategy, Idler, Wakeup};
use crate::message::{Job, NO_DEADLINE, Slot};
use crate::observer::DispatcherReport;
use crate::pool::{GeneratedBody, MAX_GENERATED_BODY, TokenPool};
use crate::worker::JobIo;

/// Wake this long before a scheduled arrival (the wake-up latency of a park).
const PARK_MARGIN_NS: u64 = 15_000;
/// Start this long after the loop begins, so the first arrivals are not late.
const START_DELAY_NS: u64 = 1_000_000;

/// Where a generated request's type header (for the classifier) holds its type:
/// the type, u16 little-endian, at offset 0 (a header classifier built for
/// the generator reads at offset 0).
pub const TYPE_OFFSET: usize = 0;

/// The open-loop generator and classifier.
pub struct Generator {
    classifier: Box<dyn Classifier>,
    arrivals: Box<dyn ArrivalSource + Send>,
    encoder: Box<dyn BodyEncoder>,
    bodies: Arc<TokenPool<GeneratedBody>>,
    scratch: Vec<u8>,
    warmup_ns: u64,
    idle: IdleStrategy,
    idler: Idler,
    next: Option<Arrival>,
    /// Time zero of the schedule, on the run's clock.
    base: u64,
    seq: u64,
}

impl Generator {
    /// A generator of `arrivals` (times relative to the start; those before
    /// `warmup_ns` are not measured) whose bodies `encoder` writes,
    /// classifying with `classifier` (reading the type header at offset 0),
    /// idling with `idle`, for a runtime of `slots` request slots
    /// ([`crate::max_in_flight`]).
    pub fn new(
        classifier: Box<dyn Classifier>,
        arrivals: Box<dyn ArrivalSource + Send>,
        encoder: Box<dyn BodyEncoder>,
        slots: usize,
        warmup_ns: u64,
        idle: IdleStrategy,
    ) -> Self {
        Self {
            classifier,
            arrivals,
            encoder,
            bodies: Arc::new(TokenPool::new(slots)),
            scratch: Vec::with_capacity(MAX_GENERATED_BODY),
            warmup_ns,
            idle,
            idler: Idler::new(idle),
            next: None,
            base: 0,
            seq: 0,
        }
    }
}

impl FrontEnd for Generator {
    type Report = DispatcherReport;
    type Io = GeneratedIo;

    /// Every worker reads the bodies from the generator's pool.
    fn worker_io(&mut self, _worker: usize) -> GeneratedIo {
        GeneratedIo::new(self.bodies.clone())
    }

    fn begin(&mut self, core: &mut DispatchCore, now: u64) {
        self.base = now + START_DELAY_NS;
        core.set_base(self.base);
        self.next = self.arrivals.next_arrival();
    }

    fn poll(&mut self, core: &mut DispatchCore, now: u64) -> bool {
        let mut admitted = 0;
        while let Some(a) = self.next {
            let due = self.base.saturating_add(a.at_ns);
            if due > now || admitted == ARRIVAL_BATCH {
                break;
            }
            admitted += 1;
            self.seq += 1;
            let measured = a.at_ns >= self.warmup_ns;
            let header = a.type_id.to_le_bytes();
            match core.take_token() {
                Some(token) => {
                    self.scratch.clear();
                    self.encoder
                        .encode(a.type_id, a.service_ns, &mut self.scratch);
                    assert!(
                        self.scratch.len() <= MAX_GENERATED_BODY,
                        "an encoder wrote a {}-byte body, above the generator's {MAX_GENERATED_BODY}",
                        self.scratch.len()
                    );
                    // SAFETY: the dispatcher thread owns a token it took until it
                    // dispatches it; no worker reads this buffer before then. (The
                    // pool has a buffer per slot: `new`'s `slots`; a token beyond
                    // it panics here, ending the run with an error.)
                    let body = unsafe { self.bodies.get_mut(token.index()) };
                    body.data[..self.scratch.len()].copy_from_slice(&self.scratch);
                    body.len = self.scratch.len() as u16;
                    let slot = Slot {
                        req: Request {
                            id: self.seq,
                            token: token.index(),
                            type_id: self.classifier.classify(&header),
                            flow: a.flow,
                            arrival_ns: now,
                        },
                        true_type: a.type_id,
                        scheduled_ns: due,
                        measured,
                        len: body.len,
                        count: 1,
                        deadline_ns: NO_DEADLINE,
                    };
                    if let Err(token) = core.admit(token, slot, now) {
                        core.put_token(token);
                    }
                }
                None => core.shed_without_slot(a.type_id, measured),
            }
            self.next = self.arrivals.next_arrival();
        }
        admitted > 0
    }

    fn input_ended(&self) -> bool {
        self.next.is_none()
    }

    fn idle(&mut self, core: &DispatchCore, me: &Wakeup, now: u64, worked: bool) {
        if worked {
            self.idler.reset();
            return;
        }
        let until_next = core.idle_bound(
            now,
            self.next.map_or(Duration::from_millis(1), |a| {
                Duration::from_nanos(
                    self.base
                        .saturating_add(a.at_ns)
                        .saturating_sub(now)
                        .saturating_sub(PARK_MARGIN_NS),
                )
            }),
        );
        let has_work = || core.has_completions() || core.deadline_within(now, until_next);
        match self.idle {
            // Nothing to do until the next arrival or, if requests wait for a
            // worker, a completion: sleep, never spin. A spinning (or
            // yield-spinning) dispatcher on a core it shares with a worker delays
            // that worker's next request by milliseconds.
            IdleStrategy::SpinPark { .. } => {
                if until_next.is_zero() {
                    std::hint::spin_loop();
                } else if core.completion_is_urgent() || self.next.is_none() || core.decentralized()
                {
                    // Decentralized workers wake the dispatcher only when it
                    // must act (a completion ring half full, a quantum armed).
                    me.park(until_next, has_work);
                } else {
                    // Workers stamp their own completions: those can wait.
                    me.sleep(until_next);
                }
            }
            _ => self.idler.idle(me, until_next, has_work),
        }
    }

    fn finish(self, core: DispatcherReport) -> DispatcherReport {
        core
    }
}

/// The in-process generator's I/O: bodies are in the generator's pool, nothing
/// is sent.
#[derive(Clone)]
pub struct GeneratedIo {
    bodies: Arc<TokenPool<GeneratedBody>>,
}

impl GeneratedIo {
    /// Reads the bodies the generator writes to `bodies`.
    pub fn new(bodies: Arc<TokenPool<GeneratedBody>>) -> Self {
        Self { bodies }
    }
}

impl JobIo for GeneratedIo {
    #[inline]
    fn request<'a>(&'a self, job: &'a Job) -> &'a [u8] {
        // SAFETY: this worker owns the job's token from the job's pop (from its
        // ring or a worker queue: each job is popped once) until it pushes the
        // completion (after the handler is done with the body).
        unsafe { self.bodies.get(job.token) }.bytes()
    }

    #[inline]
    fn respond(
        &mut self,
        _job: &Job,
        _outcome: Result<(), HandlerError>,
        _response: &[u8],
    ) -> bool {
        true
    }
}
