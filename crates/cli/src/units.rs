//! Parsing of the CLI's units: durations (their ranges are the callers',
//! [`crate::limits`]).

use anyhow::{Result, bail};

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
}
