//! The one executor a run builds from its policy's
//! [`Execution`](psp_core::policy::Execution): the dispatcher's side (an
//! [`Executor`], held by the [`DispatchCore`](crate::DispatchCore)) and each
//! worker's side (a [`WorkerExec`]), made together by [`plan`] so that the
//! two always agree. One file per execution shape, each implementing the one
//! [`Executor`] trait, and nothing else: an impossible mix (worker queues
//! with a quantum watch, green threads without stacks) cannot be built.
//!
//! | shape | file | dispatcher | workers |
//! |---|---|---|---|
//! | `central` | `central.rs` | drives the policy, pushes jobs on rings | run each job to completion |
//! | `central-preemptive` | `central_preemptive.rs` | drives the policy, watches quanta, raises flags | run jobs on green threads, hand back preempted ones |
//! | `worker-queues` | `worker_queues.rs` | steers jobs to flow queues, records completions | take and steal by the policy's rules |
//! | `local-preemptive` | `local_preemptive.rs` | steers jobs to worker queues, runs SYNERGY's timer | pick, run on green threads and preempt by the policy's rules |
//!
//! `shape.rs` holds the contract (the [`Executor`] trait, [`WorkerExec`]),
//! `fibers.rs` the green threads both preemptive shapes share, `plan.rs` the
//! one place that picks a shape. Front ends never see any of this: they
//! admit and complete through the core.

mod central;
mod central_preemptive;
mod fibers;
mod local_preemptive;
mod plan;
mod shape;
mod worker_queues;

pub(crate) use central::CentralExec;
pub use fibers::FIBER_SLOTS_PER_WORKER;
pub(crate) use plan::{CoreExecutor, plan};
pub(crate) use shape::{Executor, PlanInput, Wakes, WorkerExec};
