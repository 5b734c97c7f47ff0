//! `--system`: the simulator's system cost model, a preset with optional
//! overrides (`shinjuku`, `ideal:request=200ns`, `psp:network=0,ingress=1024`).
//! Durations take units (`ns` when none is given); ranges are psp-sim's
//! ([`psp_sim::SystemCosts::set`]).

use anyhow::{Result, anyhow};
use psp_sim::SystemCosts;

use crate::units;

/// Parses `NAME[:KEY=VALUE,...]`.
///
/// # Errors
/// An unknown preset or key, a value that does not parse, or one out of range.
pub fn parse(s: &str) -> Result<SystemCosts> {
    let (name, overrides) = s.split_once(':').unwrap_or((s, ""));
    let mut costs = SystemCosts::preset(name.trim()).map_err(|e| anyhow!("--system: {e}"))?;
    for kv in overrides
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let (key, value) = kv
            .split_once('=')
            .ok_or_else(|| anyhow!("--system: expected KEY=VALUE, not '{kv}'"))?;
        let (key, value) = (key.trim(), value.trim());
        let v = if key == "ingress" {
            value.parse::<u64>().map_err(|_| {
                anyhow!("--system: ingress takes a number of requests, not '{value}'")
            })?
        } else {
            // A bare number is nanoseconds here (costs are ns-scale).
            let with_unit = if value.chars().last().is_some_and(|c| c.is_ascii_digit()) {
                format!("{value}ns")
            } else {
                value.to_string()
            };
            let ns = units::parse_duration_f64_ns(&with_unit)
                .map_err(|e| anyhow!("--system {key}: {e}"))?;
            if ns > u64::MAX as f64 / 2.0 {
                return Err(anyhow!("--system {key}: '{value}' is out of range"));
            }
            ns.round() as u64
        };
        costs.set(key, v).map_err(|e| anyhow!("--system: {e}"))?;
    }
    Ok(costs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_and_overrides_parse() {
        assert_eq!(parse("ideal").unwrap(), SystemCosts::default());
        let c = parse("shinjuku:network=0,preempt=1us").unwrap();
        assert_eq!((c.network_ns, c.preempt_ns, c.dispatch_ns), (0, 1000, 74));
        assert_eq!(parse("ideal:request=300").unwrap().per_request_ns(), 300);
        assert_eq!(parse("psp:ingress=64").unwrap().ingress_capacity, 64);
        for bad in [
            "nope",
            "ideal:request",
            "ideal:request=x",
            "ideal:request=2ms",
            "ideal:ingress=1.5",
            "ideal:colour=1",
            "ideal:network=-1us",
            "ideal:network=1e30s",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
