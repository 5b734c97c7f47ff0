//! Parsing of the CLI's units: durations and load grids.

use anyhow::{Context, Result, bail};

/// `1s`, `500ms`, `250us`, `1000ns`, or a bare number of seconds; must be positive.
pub fn parse_duration_ns(s: &str) -> Result<u64> {
    let s = s.trim();
    let split = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
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
    if ns.is_nan() || ns.is_infinite() || ns < 1.0 {
        bail!("duration must be positive, not '{s}'");
    }
    Ok(ns.round() as u64)
}

/// Loads as fractions of peak: `START:END:STEP` (inclusive) or `A,B,C`.
pub fn parse_loads(s: &str) -> Result<Vec<f64>> {
    let loads: Vec<f64> = if let [a, b, step] = s.split(':').collect::<Vec<_>>()[..] {
        let (a, b, step): (f64, f64, f64) = (num(a)?, num(b)?, num(step)?);
        if step.is_nan() || step <= 0.0 || b < a {
            bail!("load range '{s}' needs START <= END and STEP > 0");
        }
        let n = ((b - a) / step + 1e-9).floor() as usize;
        (0..=n)
            .map(|i| ((a + i as f64 * step) * 1e9).round() / 1e9)
            .collect()
    } else {
        s.split(',').map(num).collect::<Result<_>>()?
    };
    if loads.is_empty() || loads.iter().any(|&l| !(l.is_finite() && l > 0.0)) {
        bail!("loads must be positive fractions of peak, got '{s}'");
    }
    Ok(loads)
}

fn num(s: &str) -> Result<f64> {
    s.trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("cannot parse number '{s}'"))
}

/// A duration flag's value (`flag` names it in the error).
pub fn parse_duration_flag(s: &str, flag: &str) -> Result<std::time::Duration> {
    Ok(std::time::Duration::from_nanos(
        parse_duration_ns(s).with_context(|| flag.to_string())?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("1s").unwrap(), 1_000_000_000);
        assert_eq!(parse_duration_ns("2.5ms").unwrap(), 2_500_000);
        assert_eq!(parse_duration_ns("250us").unwrap(), 250_000);
        assert_eq!(parse_duration_ns("0.5").unwrap(), 500_000_000);
        for bad in ["0s", "-1s", "abc", "1h", "", "nan"] {
            assert!(parse_duration_ns(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn loads() {
        assert_eq!(parse_loads("0.1:0.3:0.1").unwrap(), vec![0.1, 0.2, 0.3]);
        assert_eq!(parse_loads("0.5,0.9").unwrap(), vec![0.5, 0.9]);
        for bad in ["0:1:0.5", "0.5:0.1:0.1", "x", "0.1:1:0", "-1"] {
            assert!(parse_loads(bad).is_err(), "{bad}");
        }
    }
}
