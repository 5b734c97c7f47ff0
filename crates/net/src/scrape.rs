//! The client side of `psp serve --metrics`: fetches a server's `/metrics` and
//! reads back each request type's measured service times (the histogram
//! `psp_service_seconds`, its `_sum` and `_count` by `type`), so that
//! `psp load --server-profile` can turn `--load` into a rate by what the
//! server measured rather than by what the workload declares.
//!
//! The same fetch and reader serve `psp top` ([`fetch_exposition`],
//! [`parse_samples`]), which reads every series of the exposition.
//!
//! `psp load` calls it once, on the calling thread, before any load is sent.
//! What a server can cost the client is bounded: one plain-HTTP GET (no proxy, no redirect)
//! within [`SCRAPE_TIMEOUT`], a body of at most [`MAX_SCRAPE_BYTES`]. The text
//! is read whole and strictly: every sample line must be Prometheus text
//! (`name{label="value",...} value [timestamp]`), so a page that is not an
//! exposition is an error rather than "no types measured".

use std::net::SocketAddr;
use std::time::Duration;

/// The most bytes of an exposition the client reads (a server with a few
/// dozen types writes tens of kilobytes).
pub const MAX_SCRAPE_BYTES: u64 = 4 << 20;
/// The longest a scrape may take, connection to the body's last byte.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);

/// The histogram of ok requests' service times, by `type` (crate::exporter).
const SUM: &str = "psp_service_seconds_sum";
/// See [`SUM`].
const COUNT: &str = "psp_service_seconds_count";

/// One request type's service times as the server measured them (ok requests
/// since it started).
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredService {
    /// The type's name (the `type` label).
    pub name: String,
    /// Requests measured.
    pub count: u64,
    /// Their service times together, in seconds.
    pub sum_s: f64,
}

impl MeasuredService {
    /// The mean service time in ns (`None` before the first request).
    pub fn mean_ns(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_s * 1e9 / self.count as f64)
    }
}

/// Why a server's service times could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScrapeError {
    /// No exposition came back: unreachable, timed out, an HTTP error status,
    /// too large, not UTF-8.
    #[error("cannot fetch {url}: {reason}")]
    Fetch {
        /// What was asked for.
        url: String,
        /// The HTTP client's account.
        reason: String,
    },
    /// A line that is not Prometheus text.
    #[error("line {line} is not Prometheus text ({why}): '{text}'")]
    Malformed {
        /// 1-based.
        line: usize,
        /// What is wrong with it.
        why: &'static str,
        /// Its start.
        text: String,
    },
    /// Prometheus text, but without the service-time histogram by type.
    #[error(
        "no {SUM} and {COUNT} series by type: not the /metrics of a psp serve (its --metrics address?)"
    )]
    NoServiceTimes,
    /// The histogram's series of one type do not add up.
    #[error("type '{name}': {why}")]
    Inconsistent {
        /// The type.
        name: String,
        /// What is wrong.
        why: &'static str,
    },
}

/// Fetches `http://ADDR/metrics` and reads its service times
/// ([`parse_service_times`]).
///
/// # Errors
/// [`ScrapeError::Fetch`] when no exposition of at most [`MAX_SCRAPE_BYTES`]
/// arrives within [`SCRAPE_TIMEOUT`] (or the status is not 2xx); otherwise as
/// [`parse_service_times`].
pub fn fetch_service_times(addr: SocketAddr) -> Result<Vec<MeasuredService>, ScrapeError> {
    parse_service_times(&fetch_exposition(&format!("http://{addr}/metrics"))?)
}

/// Fetches the exposition at `url` (plain HTTP), as text.
///
/// # Errors
/// [`ScrapeError::Fetch`] when no text of at most [`MAX_SCRAPE_BYTES`]
/// arrives within [`SCRAPE_TIMEOUT`] (or the status is not 2xx).
pub fn fetch_exposition(url: &str) -> Result<String, ScrapeError> {
    let fail = |e: ureq::Error| ScrapeError::Fetch {
        url: url.to_string(),
        reason: e.to_string(),
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(SCRAPE_TIMEOUT))
        // A lab server named by address: never through an environment's proxy.
        .proxy(None)
        .max_redirects(0)
        .build()
        .into();
    let mut response = agent.get(url).call().map_err(fail)?;
    response
        .body_mut()
        .with_config()
        .limit(MAX_SCRAPE_BYTES)
        .read_to_string()
        .map_err(fail)
}

/// Every sample of a Prometheus text exposition, in order. Comments (`# HELP`,
/// `# TYPE`, `# EOF`, ...) and blank lines are skipped; every other line must
/// be a well-formed sample, whatever its metric.
///
/// # Errors
/// [`ScrapeError::Malformed`] for a line that is not a sample.
pub fn parse_samples(text: &str) -> Result<Vec<Sample<'_>>, ScrapeError> {
    text.lines()
        .enumerate()
        .map(|(i, raw)| (i, raw.trim_end_matches('\r')))
        .filter(|(_, line)| !(line.trim().is_empty() || line.starts_with('#')))
        .map(|(i, line)| {
            parse_sample(line).map_err(|why| ScrapeError::Malformed {
                line: i + 1,
                why,
                text: line.chars().take(80).collect(),
            })
        })
        .collect()
}

/// The server's policy from a psp serve exposition (`psp_server_info`'s
/// `policy` label); `None` for a server that does not say it.
pub fn parse_server_policy(text: &str) -> Option<String> {
    parse_samples(text)
        .ok()?
        .iter()
        .find(|s| s.name == "psp_server_info")
        .and_then(|s| s.label("policy").map(str::to_string))
}

/// The policy of the psp serve whose metrics are at `addr` (`/metrics`).
///
/// # Errors
/// As [`fetch_exposition`]; `Ok(None)` when it does not say.
pub fn fetch_server_policy(addr: SocketAddr) -> Result<Option<String>, ScrapeError> {
    Ok(parse_server_policy(&fetch_exposition(&format!(
        "http://{addr}/metrics"
    ))?))
}

/// Each type's service times from a Prometheus text exposition, in the order
/// the types first appear (the server writes them in type order). Comments
/// (`# HELP`, `# TYPE`, `# EOF`, ...) and blank lines are skipped; every other
/// line must be a well-formed sample, whatever its metric.
///
/// # Errors
/// [`ScrapeError::Malformed`] for a line that is not a sample;
/// [`ScrapeError::NoServiceTimes`] when no `psp_service_seconds_sum` or
/// `_count` series has a `type` label; [`ScrapeError::Inconsistent`] for a
/// type with a sum and no count (or the reverse), one given twice, or a count
/// or sum that is not a finite non-negative number (a count also whole).
pub fn parse_service_times(text: &str) -> Result<Vec<MeasuredService>, ScrapeError> {
    // (name, sum, count) in order of first appearance.
    let mut types: Vec<(String, Option<f64>, Option<u64>)> = Vec::new();
    for s in parse_samples(text)? {
        let is_sum = match s.name {
            SUM => true,
            COUNT => false,
            _ => continue,
        };
        let Some((_, name)) = s.labels.iter().find(|(k, _)| *k == "type") else {
            continue;
        };
        let at = match types.iter().position(|(n, ..)| n == name) {
            Some(at) => at,
            None => {
                types.push((name.clone(), None, None));
                types.len() - 1
            }
        };
        let bad = |why| ScrapeError::Inconsistent {
            name: name.clone(),
            why,
        };
        let entry = &mut types[at];
        if !(s.value.is_finite() && s.value >= 0.0) {
            return Err(bad("a service-time sum or count that is not a number >= 0"));
        }
        if is_sum {
            if entry.1.replace(s.value).is_some() {
                return Err(bad("two psp_service_seconds_sum series"));
            }
        } else {
            if s.value.fract() != 0.0 || s.value > u64::MAX as f64 {
                return Err(bad(
                    "a psp_service_seconds_count that is not a whole number",
                ));
            }
            if entry.2.replace(s.value as u64).is_some() {
                return Err(bad("two psp_service_seconds_count series"));
            }
        }
    }
    if types.is_empty() {
        return Err(ScrapeError::NoServiceTimes);
    }
    types
        .into_iter()
        .map(|(name, sum, count)| match (sum, count) {
            (Some(sum_s), Some(count)) => Ok(MeasuredService { name, count, sum_s }),
            _ => Err(ScrapeError::Inconsistent {
                name,
                why: "a psp_service_seconds_sum without its _count, or the reverse",
            }),
        })
        .collect()
}

/// One sample line, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample<'a> {
    /// The metric's name (a histogram's series with their suffix:
    /// `_bucket`, `_sum`, `_count`; a counter's with `_total`).
    pub name: &'a str,
    /// Its labels, in order, values unescaped.
    pub labels: Vec<(&'a str, String)>,
    /// Its value.
    pub value: f64,
}

impl Sample<'_> {
    /// The value of label `key`, if it has one.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// `name[{label="value",...}] value [timestamp] [# exemplar]`, as the
/// Prometheus and OpenMetrics text formats write a sample.
fn parse_sample(line: &str) -> Result<Sample<'_>, &'static str> {
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err("no metric name");
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(body) = rest.strip_prefix('{') {
        rest = parse_labels(body, &mut labels)?;
    }
    if !rest.starts_with([' ', '\t']) {
        return Err("no space before the value");
    }
    let mut words = rest.split_ascii_whitespace();
    let value = words
        .next()
        .ok_or("no value")?
        .parse::<f64>()
        .map_err(|_| "a value that is not a number")?;
    match words.next() {
        None | Some("#") => {}
        Some(ts) => {
            ts.parse::<f64>().map_err(|_| "text after the value")?;
            if words.next().is_some_and(|w| w != "#") {
                return Err("text after the timestamp");
            }
        }
    }
    Ok(Sample {
        name,
        labels,
        value,
    })
}

/// Reads `label="value",...}` (the text after `{`) into `out`; returns what
/// follows the `}`.
fn parse_labels<'a>(
    mut s: &'a str,
    out: &mut Vec<(&'a str, String)>,
) -> Result<&'a str, &'static str> {
    loop {
        s = s.trim_start();
        if let Some(rest) = s.strip_prefix('}') {
            return Ok(rest);
        }
        let end = s
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .ok_or("an unclosed label set")?;
        let key = &s[..end];
        if key.is_empty() || key.starts_with(|c: char| c.is_ascii_digit()) {
            return Err("a label without a name");
        }
        s = s[end..]
            .trim_start()
            .strip_prefix('=')
            .ok_or("a label without '='")?
            .trim_start()
            .strip_prefix('"')
            .ok_or("a label value without quotes")?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let close = loop {
            match chars.next().ok_or("an unclosed label value")? {
                (i, '"') => break i,
                (_, '\\') => match chars.next().ok_or("an unclosed label value")?.1 {
                    'n' => value.push('\n'),
                    c @ ('\\' | '"') => value.push(c),
                    _ => return Err("an unknown escape in a label value"),
                },
                (_, c) => value.push(c),
            }
        };
        out.push((key, value));
        s = s[close + 1..].trim_start();
        if let Some(rest) = s.strip_prefix(',') {
            s = rest;
        } else if !s.starts_with('}') {
            return Err("labels not separated by ','");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exporter::{Capacity, encode};

    #[test]
    fn the_servers_policy_reads_back_from_its_exposition() {
        let snap = psp_runtime::Snapshot::new(1, 0, 0);
        let cap = Capacity {
            policy: "darc-fair:samples=20,mech=none".into(),
            ..Capacity::default()
        };
        let text = encode(&snap, &["GET".into()], 1.0, None, &cap);
        assert_eq!(
            parse_server_policy(&text).as_deref(),
            Some("darc-fair:samples=20,mech=none"),
            "{text}"
        );
        assert_eq!(parse_server_policy("# nothing\nother_metric 1\n"), None);
    }

    fn measured(name: &str, count: u64, sum_s: f64) -> MeasuredService {
        MeasuredService {
            name: name.into(),
            count,
            sum_s,
        }
    }

    /// The exporter's own exposition reads back: every type, in type order,
    /// with its sum and count (and a type that served nothing yet as 0).
    #[test]
    fn the_exporters_exposition_reads_back() {
        let mut snap = psp_runtime::Snapshot::new(3, 0, 0);
        for (t, (count, sum_ns)) in snap
            .types
            .iter_mut()
            .zip([(400, 800_000), (0, 0), (7, 700)])
        {
            t.service.count = count;
            t.service.sum_ns = sum_ns;
        }
        let names: Vec<String> = ["GET", "SCAN \"all\"", "PUT"].map(Into::into).to_vec();
        let text = encode(&snap, &names, 1.0, None, &Capacity::default());
        let got = parse_service_times(&text).unwrap();
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0].name, "GET");
        assert_eq!(got[0].count, 400);
        assert!((got[0].mean_ns().unwrap() - 2000.0).abs() < 1e-6, "{got:?}");
        assert_eq!(got[1], measured("SCAN \"all\"", 0, 0.0));
        assert_eq!(got[1].mean_ns(), None);
        assert_eq!(got[2].name, "PUT");
        assert!((got[2].mean_ns().unwrap() - 100.0).abs() < 1e-6, "{got:?}");
    }

    /// Each worker's state reads back as its series: what it runs, the types
    /// it is reserved for, the spillway, loans and preemptions.
    #[test]
    fn worker_series_read_back() {
        use psp_runtime::{Loan, WorkerSnapshot};
        let mut snap = psp_runtime::Snapshot::new(3, 3, 0);
        snap.has_reservation = true;
        snap.running_known = true;
        for (t, g) in snap.types.iter_mut().zip([0, 0, 1]) {
            t.group = Some(g);
        }
        snap.workers = vec![
            WorkerSnapshot {
                running: Some(2),
                reserved_group: Some(0),
                loan: Loan::Lent,
                preemptions: 5,
                ..Default::default()
            },
            WorkerSnapshot {
                reserved_group: Some(1),
                ..Default::default()
            },
            WorkerSnapshot {
                spillway: true,
                ..Default::default()
            },
        ];
        let names: Vec<String> = ["GET", "PUT", "SCAN"].map(Into::into).to_vec();
        let text = encode(&snap, &names, 1.0, None, &Capacity::default());
        let samples = parse_samples(&text).unwrap();
        let series = |name: &str| -> Vec<(String, f64)> {
            samples
                .iter()
                .filter(|s| s.name == name)
                .map(|s| {
                    let labels: Vec<String> =
                        s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    (labels.join(","), s.value)
                })
                .collect()
        };
        let pairs = |v: &[(&str, f64)]| -> Vec<(String, f64)> {
            v.iter().map(|(l, x)| (l.to_string(), *x)).collect()
        };
        assert_eq!(
            series("psp_worker_busy"),
            pairs(&[("worker=0", 1.0), ("worker=1", 0.0), ("worker=2", 0.0)])
        );
        assert_eq!(
            series("psp_worker_running"),
            pairs(&[("worker=0,type=SCAN", 1.0)])
        );
        assert_eq!(
            series("psp_worker_reserved_for"),
            pairs(&[
                ("worker=0,type=GET", 1.0),
                ("worker=0,type=PUT", 1.0),
                ("worker=1,type=SCAN", 1.0)
            ])
        );
        assert_eq!(
            series("psp_worker_spillway"),
            pairs(&[("worker=0", 0.0), ("worker=1", 0.0), ("worker=2", 1.0)])
        );
        assert_eq!(series("psp_worker_lent")[0], ("worker=0".into(), 1.0));
        assert!(series("psp_worker_stealing").iter().all(|(_, v)| *v == 0.0));
        assert_eq!(
            series("psp_worker_preemptions_total"),
            pairs(&[("worker=0", 5.0), ("worker=1", 0.0), ("worker=2", 0.0)])
        );
        assert_eq!(series("psp_preemptions_total"), pairs(&[("", 5.0)]));

        // Without a reservation, or where the dispatcher does not see which
        // worker runs what, those series are absent.
        snap.has_reservation = false;
        snap.running_known = false;
        let text = encode(&snap, &names, 1.0, None, &Capacity::default());
        for absent in [
            "psp_worker_busy",
            "psp_worker_running",
            "psp_worker_reserved_for",
            "psp_worker_lent",
        ] {
            assert!(!text.contains(absent), "{absent} in {text}");
        }
        assert!(text.contains("psp_worker_preemptions_total{worker=\"2\"} 0"));
    }

    /// Other metrics, other labels (before or after `type`), timestamps,
    /// exemplars, comments and CRLF are read past; a type with no series is
    /// simply not listed.
    #[test]
    fn other_metrics_and_labels_are_read_past() {
        let text = "# HELP psp_service_seconds Service time.\r\n\
            # TYPE psp_service_seconds histogram\n\
            psp_requests_total{type=\"a\",outcome=\"ok\"} 12\n\
            psp_service_seconds_bucket{type=\"a\",le=\"+Inf\"} 4 # {trace=\"x\"} 1.0\n\
            psp_service_seconds_sum{instance=\"h:1\",type=\"a\"} 0.004 1700000000\n\
            psp_service_seconds_count{ type = \"a\" , } 4\r\n\
            psp_service_seconds_sum{other=\"b\"} 9\n\
            psp_uptime_seconds 3.5\n\
            psp_service_seconds_count{type=\"b\\\\n\"} 0\n\
            psp_service_seconds_sum{type=\"b\\\\n\"} 0.0\n\
            \n\
            # EOF\n";
        let got = parse_service_times(text).unwrap();
        assert_eq!(got, vec![measured("a", 4, 0.004), measured("b\\n", 0, 0.0)]);
        assert!((got[0].mean_ns().unwrap() - 1e6).abs() < 1e-6);
    }

    #[test]
    fn text_that_is_not_prometheus_is_refused_with_its_line() {
        for (text, line, why) in [
            ("<html><body>hello</body></html>", 1, "no metric name"),
            (
                "# HELP x\nx_total 1\npsp_x{type=\"a\" 3\n",
                3,
                "labels not separated",
            ),
            ("psp_x{type=a} 3\n", 1, "without quotes"),
            ("psp_x{type=\"a} 3\n", 1, "unclosed label value"),
            ("psp_x{type=\"\\t\"} 3\n", 1, "unknown escape"),
            ("psp_x{=\"a\"} 3\n", 1, "without a name"),
            ("psp_x\n", 1, "no space"),
            ("psp_x three\n", 1, "not a number"),
            ("psp_x 3 4 5\n", 1, "after the timestamp"),
            ("psp_x 3 soon\n", 1, "after the value"),
            ("psp_x{type=\"a\"}3\n", 1, "no space"),
        ] {
            match parse_service_times(text) {
                Err(ScrapeError::Malformed {
                    line: l, why: w, ..
                }) => {
                    assert_eq!(l, line, "{text}");
                    assert!(w.contains(why), "{text}: {w}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn missing_or_inconsistent_service_times_are_errors() {
        assert_eq!(
            parse_service_times("psp_uptime_seconds 3\n# EOF\n"),
            Err(ScrapeError::NoServiceTimes)
        );
        assert_eq!(parse_service_times(""), Err(ScrapeError::NoServiceTimes));
        // Series without a type label are not the server's.
        assert_eq!(
            parse_service_times("psp_service_seconds_sum 3\npsp_service_seconds_count 1\n"),
            Err(ScrapeError::NoServiceTimes)
        );
        for (text, why) in [
            (
                "psp_service_seconds_sum{type=\"a\"} 1\n",
                "without its _count",
            ),
            (
                "psp_service_seconds_count{type=\"a\"} 1\n",
                "without its _count",
            ),
            (
                "psp_service_seconds_count{type=\"a\"} 1\npsp_service_seconds_count{type=\"a\"} 2\n",
                "two psp_service_seconds_count",
            ),
            (
                "psp_service_seconds_sum{type=\"a\"} 1\npsp_service_seconds_sum{type=\"a\"} 2\n",
                "two psp_service_seconds_sum",
            ),
            (
                "psp_service_seconds_count{type=\"a\"} 1.5\n",
                "whole number",
            ),
            ("psp_service_seconds_count{type=\"a\"} -1\n", ">= 0"),
            ("psp_service_seconds_sum{type=\"a\"} NaN\n", ">= 0"),
            ("psp_service_seconds_sum{type=\"a\"} +Inf\n", ">= 0"),
        ] {
            match parse_service_times(text) {
                Err(ScrapeError::Inconsistent { name, why: w }) => {
                    assert_eq!(name, "a");
                    assert!(w.contains(why), "{text}: {w}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    /// Nothing listening: a Fetch error naming the URL, well within the
    /// timeout.
    #[test]
    fn an_unreachable_server_is_a_fetch_error() {
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let err = fetch_service_times(addr).unwrap_err();
        assert!(
            matches!(&err, ScrapeError::Fetch { url, .. } if url == &format!("http://{addr}/metrics")),
            "{err}"
        );
    }
}
