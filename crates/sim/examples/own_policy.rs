//! Write your own policy: adaptive LIFO, in one file, run by the simulator.
//!
//!     cargo run --release -p psp-sim --example own_policy
//!
//! A policy in Perséphone is one file with three parts, all shown here:
//!
//! 1. the policy itself, a pure state machine behind [`Policy`] (no clock: time
//!    is an argument; no allocation after construction);
//! 2. its configuration, whose parameter table ([`Params`]) is all the parsing,
//!    range checks, canonical name and reference row it gets, and whose
//!    [`PolicyConfig`] builds it and names its execution shape;
//! 3. its registry entry ([`PolicyEntry`]).
//!
//! Inside the project, the file goes to `crates/core/src/policy/` and the
//! entry gets one line in `POLICIES` (`crates/core/src/policy/registry.rs`):
//! then `psp sim --policy lifo:after=8`, `psp serve`, the sweeps and docs/guide/reference.md
//! know it. Here, outside the project, the entry goes into a registry of our
//! own, which [`PolicySpec::parse_in`] reads.
//!
//! Adaptive LIFO serves the oldest request while the queue is short and the
//! newest once more than `after` requests wait: under overload the fresh
//! requests are served at once (a low median) and the old ones wait longer
//! still (a higher tail) – the opposite trade of DARC, which the example
//! prints beside it.

use std::collections::VecDeque;

use psp_core::policy::param::{Count, Param, ParamRange, Params};
use psp_core::policy::{POLICIES, PolicyConfig, PolicyEntry, Shape};
use psp_core::{
    Action, ClassifierKind, Nanos, Policy, PolicyContext, PolicyError, PolicySpec, Request,
    WorkerId, WorkerSet,
};
use psp_sim::{SimConfig, SystemCosts, simulate_point};
use psp_workload::Workload;

// --- 1. The policy ----------------------------------------------------------

/// One central queue: FIFO up to `after` waiting requests, LIFO beyond.
#[derive(Debug)]
struct AdaptiveLifo {
    queue: VecDeque<Request>,
    capacity: usize,
    after: usize,
    free: WorkerSet,
}

impl Policy for AdaptiveLifo {
    fn name(&self) -> String {
        format!("lifo:after={}", self.after)
    }

    fn on_arrival(&mut self, req: Request, _now: Nanos) -> Result<(), Request> {
        if self.queue.len() == self.capacity {
            return Err(req); // refused: the executor counts it
        }
        self.queue.push_back(req);
        Ok(())
    }

    fn on_completion(&mut self, worker: WorkerId, _req: &Request, _service_ns: Nanos, _now: Nanos) {
        self.free.insert(worker);
    }

    fn next_action(&mut self, _now: Nanos) -> Option<Action> {
        let worker = self.free.first()?;
        let req = if self.queue.len() > self.after {
            self.queue.pop_back()
        } else {
            self.queue.pop_front()
        }?;
        self.free.remove(worker);
        Some(Action::Dispatch {
            worker,
            req,
            quantum_ns: None,
        })
    }

    fn queued(&self) -> usize {
        self.queue.len()
    }

    fn idle_workers(&self) -> WorkerSet {
        self.free
    }
}

// --- 2. Its configuration ---------------------------------------------------

/// `lifo:after=N`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct LifoConfig {
    after: u64,
}

impl Default for LifoConfig {
    fn default() -> Self {
        Self { after: 16 }
    }
}

impl Params for LifoConfig {
    const PARAMS: &'static [Param<Self>] = &[Param::keyed(
        "after",
        "serve the newest request once more than this many wait (FIFO below)",
        &Count::<Self> {
            range: ParamRange::closed(0.0, 1_048_576.0),
            get: |c| c.after,
            set: |c, v| c.after = v,
        },
    )];
}

impl PolicyConfig for LifoConfig {
    fn build(&self, ctx: &PolicyContext, _label: String) -> Result<Box<dyn Policy>, PolicyError> {
        Ok(Box::new(AdaptiveLifo {
            queue: VecDeque::with_capacity(ctx.queue_capacity),
            capacity: ctx.queue_capacity,
            after: self.after as usize,
            free: WorkerSet::range(0, ctx.workers),
        }))
    }

    fn shape(&self) -> Shape {
        Shape::Central
    }
}

// --- 3. Its registry entry --------------------------------------------------

static LIFO: PolicyEntry = PolicyEntry {
    name: "lifo",
    example: "lifo",
    aliases: &["adaptive-lifo"],
    defaults: || Box::new(LifoConfig::default()),
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The project's registry plus ours.
    let registry: Vec<&'static PolicyEntry> = POLICIES.iter().copied().chain([&LIFO]).collect();

    // Parsing checks the parameter against the table: a bad value is a
    // one-line error naming the range.
    let bad = PolicySpec::parse_in(&registry, "lifo:after=-1").unwrap_err();
    println!("lifo:after=-1 -> {bad}");

    let workload = Workload::resolve("high-bimodal")?;
    let workers = 14;
    println!(
        "{:<14} {:>5} {:>13} {:>15} {:>14}",
        "policy", "load", "p50 short us", "p99.9 short us", "p99.9 long us"
    );
    for load in [0.8, 1.1] {
        for name in ["c-fcfs", "lifo:after=32", "darc"] {
            let spec = PolicySpec::parse_in(&registry, name)?;
            let cfg = SimConfig {
                workers,
                rate_rps: workload.peak_rps(workers) * load,
                duration_ns: 1_000_000_000,
                warmup_fraction: 0.1,
                seed: 1,
                flows: psp_sim::DEFAULT_FLOWS,
                queue_capacity: 4096,
                system: SystemCosts::default(),
                classifier: ClassifierKind::Header,
                series_window_ns: None,
                max_wait_ns: Vec::new(),
            };
            let point = simulate_point(&workload, &spec, &cfg)?;
            let (short, long) = (&point.types[0], &point.types[1]);
            println!(
                "{:<14} {:>5.2} {:>13.1} {:>15.1} {:>14.1}",
                spec.to_string(),
                load,
                short.p50_latency_us,
                short.p999_latency_us,
                long.p999_latency_us
            );
        }
    }
    Ok(())
}
