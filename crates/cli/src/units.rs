//! Parsing of the CLI's units: durations and load grids.

use anyhow::{Result, bail};

use crate::limits;

/// `1s`, `500ms`, `250us`, `1000ns`, or a bare number of seconds, in
/// nanoseconds (any finite non-negative number; ranges are the caller's, see
/// [`crate::limits::Span`]).
///
/// # Errors
/// Not a number with a known unit, or NaN, infinite or negative.
pub fn parse_duration_f64_ns(s: &str) -> Result<f64> {
    let s = s.trim();
    // The unit is the trailing letters (`1e9ns` is 1e9 nanoseconds).
    let split = s
        .char_indices()
        .rev()
        .take_while(|&(_, c)| c.is_alphabetic())
        .last()
        .map_or(s.len(), |(i, _)| i);
    let (num, unit) = s.split_at(split);
    let v: f64 = match num.trim().parse() {
        Ok(v) => v,
        Err(_) => bail!("cannot parse duration '{s}' (examples: 1s, 500ms, 250us)"),
    };
    let scale = match unit {
        "" | "s" => 1e9,
        "ms" => 1e6,
        "us" | "µs" => 1e3,
        "ns" => 1.0,
        _ => bail!("unknown duration unit '{unit}' in '{s}' (use s, ms, us or ns)"),
    };
    let ns = v * scale;
    if !(ns.is_finite() && ns >= 0.0) {
        bail!("cannot parse duration '{s}' (examples: 1s, 500ms, 250us)");
    }
    Ok(ns)
}

/// Loads as fractions of peak: `START:END:STEP` (inclusive) or `A,B,C`; each
/// in [`limits::SWEEP_LOAD`], at most [`limits::LOAD_POINTS`] of them (counted before
/// any is made).
///
/// # Errors
/// A number that does not parse, a load out of range, or too many loads.
pub fn parse_loads(s: &str) -> Result<Vec<f64>> {
    let loads: Vec<f64> = if let [a, b, step] = s.split(':').collect::<Vec<_>>()[..] {
        let (a, b, step): (f64, f64, f64) = (num(a)?, num(b)?, num(step)?);
        limits::SWEEP_LOAD.check(a)?;
        limits::SWEEP_LOAD.check(b)?;
        if !(step > 0.0 && b >= a) {
            bail!("--loads range '{s}' needs START <= END and STEP > 0");
        }
        load_range(a, b, step)?
    } else {
        limits::LOAD_POINTS.check(s.split(',').count())?;
        s.split(',').map(num).collect::<Result<_>>()?
    };
    for &l in &loads {
        limits::SWEEP_LOAD.check(l)?;
    }
    Ok(loads)
}

/// Loads from `start` to `end` (inclusive) by `step` > 0, each rounded to
/// 1e-9 so that a grid's loads print as typed; at most
/// [`limits::LOAD_POINTS`] of them (counted before any is made).
///
/// # Errors
/// Too many loads.
pub fn load_range(start: f64, end: f64, step: f64) -> Result<Vec<f64>> {
    let n = ((end - start) / step + 1e-9).floor();
    limits::LOAD_POINTS.check((n as usize).saturating_add(1))?;
    Ok((0..=n as usize)
        .map(|i| ((start + i as f64 * step) * 1e9).round() / 1e9)
        .collect())
}

fn num(s: &str) -> Result<f64> {
    s.trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("--loads: cannot parse number '{s}'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_f64_ns("1s").unwrap(), 1e9);
        assert_eq!(parse_duration_f64_ns("2.5ms").unwrap(), 2.5e6);
        assert_eq!(parse_duration_f64_ns("250us").unwrap(), 250e3);
        assert_eq!(parse_duration_f64_ns("0.5").unwrap(), 5e8);
        assert_eq!(parse_duration_f64_ns("0s").unwrap(), 0.0);
        assert_eq!(parse_duration_f64_ns("1e9ns").unwrap(), 1e9);
        assert_eq!(parse_duration_f64_ns("2.5e-3s").unwrap(), 2.5e6);
        assert_eq!(parse_duration_f64_ns("1e3").unwrap(), 1e12);
        for bad in ["-1s", "abc", "1h", "", "nan", "inf", "1e400s"] {
            assert!(parse_duration_f64_ns(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn loads() {
        assert_eq!(parse_loads("0.1:0.3:0.1").unwrap(), vec![0.1, 0.2, 0.3]);
        assert_eq!(parse_loads("0.5,0.9").unwrap(), vec![0.5, 0.9]);
        for bad in [
            "0:1:0.5",
            "0.5:0.1:0.1",
            "x",
            "0.1:1:0",
            "-1",
            "0.000001:10:0.000001",
            "0.1:1:1e-300",
            "0.5,1e9",
            "nan",
            "0.1:inf:0.1",
        ] {
            let e = parse_loads(bad).unwrap_err().to_string();
            assert!(e.contains("--loads"), "{bad}: {e}");
        }
    }
}
