//! The system cost model: what the ideal simulated system leaves out.
//!
//! The dispatcher is a serial resource. It spends `arrival_ns` on each arriving
//! request (receive, classify, enqueue), `dispatch_ns` on each dispatch (select,
//! push to a worker) and `completion_ns` on each completion signal (and on each
//! preempted request handed back), and `preempt_ns` on each preemption it
//! orders. It handles that work in the order it arrives: a request cannot start
//! before the dispatcher has received and dispatched it, and a freed worker is
//! not reused before the dispatcher has seen its completion, so a centralized
//! policy saturates when its dispatcher does (at 1 / (arrival + dispatch +
//! completion) requests per second). Arrivals the dispatcher has not reached
//! wait in a receive ring of `ingress_capacity` requests; an arrival that finds
//! it full is dropped (counted), as a NIC drops. `network_ns` is added to every
//! response's latency (wire and stack, both ways).
//!
//! Policies whose execution places no arrival through a dispatcher
//! ([`psp_core::policy::Execution::dispatcher_places_arrivals`] false: d-FCFS,
//! work stealing, SYNERGY) have no dispatcher: they pay only the network. A worker's context-switch cost stays
//! the policy's parameter (`ts:cost=`, `ts-block:X`).
//!
//! This module holds the costs, the named presets and their ranges; the engine
//! applies them. It must not know about flags or units: the CLI parses values.

use psp_core::Nanos;
use serde::Serialize;

/// Costs of the simulated system; all zero is the ideal system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SystemCosts {
    /// Preset the costs started from (`custom` once a cost is overridden).
    pub preset: &'static str,
    /// Dispatcher time per arriving request.
    pub arrival_ns: Nanos,
    /// Dispatcher time per dispatch.
    pub dispatch_ns: Nanos,
    /// Dispatcher time per completion (and per preempted request handed back).
    pub completion_ns: Nanos,
    /// Dispatcher time per preemption it orders.
    pub preempt_ns: Nanos,
    /// Latency added to every response.
    pub network_ns: Nanos,
    /// Requests the receive ring holds while the dispatcher is busy.
    pub ingress_capacity: usize,
}

/// Largest dispatcher cost per step.
pub const MAX_STEP_NS: Nanos = 1_000_000;
/// Largest network latency.
pub const MAX_NETWORK_NS: Nanos = 1_000_000_000;
/// Largest receive ring.
pub const MAX_INGRESS: usize = 1 << 20;

/// A named set of costs and where its figures come from.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    /// Its name (`--system NAME`).
    pub name: &'static str,
    /// Where the figures come from.
    pub source: &'static str,
    /// The costs.
    pub costs: SystemCosts,
}

const fn costs(preset: &'static str, per_step: [Nanos; 4], network_ns: Nanos) -> SystemCosts {
    SystemCosts {
        preset,
        arrival_ns: per_step[0],
        dispatch_ns: per_step[1],
        completion_ns: per_step[2],
        preempt_ns: per_step[3],
        network_ns,
        ingress_capacity: 4096,
    }
}

/// The network latency of the presets that model a testbed: Perséphone's
/// kernel-bypass testbed adds about 10 µs between client and server.
pub const TESTBED_NETWORK_NS: Nanos = 10_000;

/// The presets, `ideal` first.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "ideal",
        source: "no dispatcher cost, no network (Perséphone's simulations)",
        costs: costs("ideal", [0, 0, 0, 0], 0),
    },
    Preset {
        name: "psp",
        source: "this project's runtime: 80 ns per request through DispatchCore (arrival, \
                 dispatch, completion; split in thirds), as the dispatch_path bench first \
                 measured it (84-104 ns; 49-62 ns since the executor redesign, kept at 80 ns \
                 so that the figures made with it reproduce), 10 us network",
        costs: costs("psp", [27, 27, 26, 0], TESTBED_NETWORK_NS),
    },
    Preset {
        name: "persephone",
        source: "Perséphone's dispatcher: ~7 M packets/s with the type at a known offset \
                 (143 ns per request, split in thirds), 10 us network",
        costs: costs("persephone", [48, 48, 47, 0], TESTBED_NETWORK_NS),
    },
    Preset {
        name: "shinjuku",
        source: "Shinjuku's dispatcher: ~4.5 M requests/s without preemption (222 ns per \
                 request, split in thirds); ~150 ns to send a posted interrupt (298 cycles \
                 at 2 GHz); 10 us network",
        costs: costs("shinjuku", [74, 74, 74, 150], TESTBED_NETWORK_NS),
    },
    Preset {
        name: "synergy",
        source: "SYNERGY's decentralized system: no dispatcher (each worker polls its own NIC \
                 queue; the timer core is off the request path); 10 us network",
        costs: costs("synergy", [0, 0, 0, 0], TESTBED_NETWORK_NS),
    },
    Preset {
        name: OWN,
        source: "each policy on the system it models: ts and ts-block on `shinjuku`; d-fcfs, \
                 ws and synergy on `synergy`; every other (c-fcfs, fp, edf, darc, concord, tq) \
                 on `persephone` (the published descriptions give no per-request figure for \
                 Concord's or Tiny Quanta's dispatcher); takes no overrides",
        costs: costs(OWN, [0, 0, 0, 0], 0),
    },
];

/// The preset that stands for each policy's own system ([`SystemCosts::for_policy`]).
pub const OWN: &str = "own";

impl Default for SystemCosts {
    fn default() -> Self {
        PRESETS[0].costs
    }
}

impl SystemCosts {
    /// The preset called `name`.
    ///
    /// # Errors
    /// An unknown name, with the known ones.
    pub fn preset(name: &str) -> Result<Self, String> {
        PRESETS
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.costs)
            .ok_or_else(|| {
                let names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
                format!("unknown system '{name}' (known: {})", names.join(", "))
            })
    }

    /// Sets one cost by key: `arrival`, `dispatch`, `completion`, `preempt`,
    /// `network` (ns), `request` (ns per request, split in thirds over arrival,
    /// dispatch and completion) or `ingress` (requests).
    ///
    /// # Errors
    /// An unknown key or a value out of range.
    pub fn set(&mut self, key: &str, value: u64) -> Result<(), String> {
        if self.preset == OWN {
            return Err(format!(
                "system '{OWN}' takes no overrides (it is a different preset per policy)"
            ));
        }
        let step = |v: u64| {
            if v <= MAX_STEP_NS {
                Ok(v)
            } else {
                Err(format!(
                    "system cost '{key}' must be at most {} us, not {v} ns",
                    MAX_STEP_NS / 1000
                ))
            }
        };
        match key {
            "arrival" => self.arrival_ns = step(value)?,
            "dispatch" => self.dispatch_ns = step(value)?,
            "completion" => self.completion_ns = step(value)?,
            "preempt" => self.preempt_ns = step(value)?,
            "request" => {
                let v = step(value)?;
                self.arrival_ns = v / 3;
                self.dispatch_ns = v / 3;
                self.completion_ns = v - 2 * (v / 3);
            }
            "network" if value <= MAX_NETWORK_NS => self.network_ns = value,
            "network" => {
                return Err(format!(
                    "system cost 'network' must be at most 1 s, not {value} ns"
                ));
            }
            "ingress" if (1..=MAX_INGRESS as u64).contains(&value) => {
                self.ingress_capacity = value as usize;
            }
            "ingress" => {
                return Err(format!(
                    "system 'ingress' must be in [1, {MAX_INGRESS}] requests, not {value}"
                ));
            }
            other => {
                return Err(format!(
                    "unknown system cost '{other}' (known: arrival, dispatch, completion, \
                     preempt, request, network, ingress)"
                ));
            }
        }
        self.preset = "custom";
        Ok(())
    }

    /// The costs `spec` runs under: these, or under [`OWN`] the preset of the
    /// system the policy models.
    pub fn for_policy(&self, spec: &psp_core::PolicySpec) -> SystemCosts {
        use psp_core::policy::ModelledSystem;
        if self.preset != OWN {
            return *self;
        }
        let name = match spec.modelled_system() {
            ModelledSystem::Shinjuku => "shinjuku",
            ModelledSystem::Synergy => "synergy",
            ModelledSystem::Persephone => "persephone",
        };
        Self::preset(name).expect("a listed preset")
    }

    /// Dispatcher time per request that is received, dispatched and completed
    /// once: the inverse of a centralized policy's throughput cap.
    pub fn per_request_ns(&self) -> Nanos {
        self.arrival_ns + self.dispatch_ns + self.completion_ns
    }

    /// Whether the dispatcher costs anything (the network alone needs no
    /// dispatcher model).
    pub fn has_dispatcher_cost(&self) -> bool {
        self.per_request_ns() + self.preempt_ns > 0
    }

    /// A one-line description (`psp sim`'s table, plots).
    pub fn describe(&self) -> String {
        if *self == Self::default() {
            return "ideal".into();
        }
        format!(
            "{} (dispatcher {}+{}+{} ns per request, {} ns per preemption; network {} us)",
            self.preset,
            self.arrival_ns,
            self.dispatch_ns,
            self.completion_ns,
            self.preempt_ns,
            self.network_ns as f64 / 1000.0
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_found_and_ideal_is_all_zero() {
        let ideal = SystemCosts::preset("ideal").unwrap();
        assert_eq!(ideal, SystemCosts::default());
        assert!(!ideal.has_dispatcher_cost() && ideal.network_ns == 0);
        let s = SystemCosts::preset("shinjuku").unwrap();
        // ~4.5 M requests/s.
        assert!((1e9 / s.per_request_ns() as f64 - 4.5e6).abs() < 0.05e6);
        assert!(SystemCosts::preset("nope").unwrap_err().contains("ideal"));
    }

    #[test]
    fn overrides_are_checked_and_request_splits_in_thirds() {
        let mut c = SystemCosts::default();
        c.set("request", 100).unwrap();
        assert_eq!((c.arrival_ns, c.dispatch_ns, c.completion_ns), (33, 33, 34));
        assert_eq!(c.per_request_ns(), 100);
        assert_eq!(c.preset, "custom");
        assert!(c.set("dispatch", MAX_STEP_NS + 1).is_err());
        assert!(c.set("ingress", 0).is_err());
        assert!(c.set("network", MAX_NETWORK_NS + 1).is_err());
        assert!(c.set("colour", 1).is_err());
    }

    #[test]
    fn own_runs_each_policy_on_its_system() {
        let own = SystemCosts::preset(OWN).unwrap();
        let on = |p: &str| own.for_policy(&p.parse().unwrap()).preset;
        assert_eq!(on("ts"), "shinjuku");
        assert_eq!(on("synergy"), "synergy");
        assert_eq!(on("ws"), "synergy");
        assert_eq!(on("darc"), "persephone");
        assert_eq!(on("c-fcfs"), "persephone");
        assert_eq!(on("concord"), "persephone");
        let ideal = SystemCosts::default();
        assert_eq!(ideal.for_policy(&"ts".parse().unwrap()), ideal);
        assert!(own.clone().set("network", 0).is_err());
    }
}
