//! The markdown of `psp reproduce`: the pieces every figure's section is
//! made of (commands, sustainable-throughput tables, verdicts, images), the
//! line and JSON files a figure writes beside its sweeps, and the rebasing of
//! a section's links when it is pasted into a results file.
//!
//! Nothing here runs a point.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use psp_core::PolicySpec;
use psp_metrics::{PointResult, SweepResult, rate_unit};
use psp_plot::{LineFigure, plot_lines};

use super::runs::Period;

/// What a figure's own code adds to the runs: its markdown section body and
/// the files it wrote beyond the runs' own.
pub struct Section {
    /// The section, after the title and the claim.
    pub body: String,
    /// The files written.
    pub files: Vec<PathBuf>,
}

/// Where a figure writes its files, and whether this is a quick look.
pub struct Page {
    /// The output directory.
    pub out: PathBuf,
    /// `--quick`.
    pub quick: bool,
}

impl Page {
    /// `p` as this run takes it: a tenth when quick ([`Period::quick`]).
    pub fn period(&self, p: Period) -> Period {
        if self.quick { p.quick() } else { p }
    }

    /// Writes `value` as pretty JSON to `NAME.json`; returns the path.
    pub fn json<T: serde::Serialize + ?Sized>(&self, name: &str, value: &T) -> Result<PathBuf> {
        let path = self.out.join(format!("{name}.json"));
        std::fs::write(&path, serde_json::to_string_pretty(value)?)
            .with_context(|| format!("cannot write '{}'", path.display()))?;
        Ok(path)
    }

    /// Draws `fig` as `NAME.svg` and `NAME.png`; returns the paths.
    pub fn lines(&self, name: &str, fig: &LineFigure) -> Result<Vec<PathBuf>> {
        Ok(plot_lines(fig, &self.out.join(name))?)
    }
}

/// An image and its SVG, linked relative to the section's own file (in the
/// output directory, beside the image); see [`rebase_links`].
pub fn image(name: &str, alt: &str) -> String {
    format!("![{alt}]({name}.png) ([SVG]({name}.svg))\n\n")
}

/// Commands as an indented block.
pub fn commands_block(cmds: &[String]) -> String {
    let mut s = String::new();
    for c in cmds {
        let _ = writeln!(s, "    {c}");
    }
    s.push('\n');
    s
}

/// A verdict line: whether the figure agrees with the claim it reproduces,
/// against the band stated in its setup before it was run; `why_not` says
/// whether a miss contradicts the claim, and why.
pub fn verdict(agrees: bool, why_not: &str) -> String {
    if agrees {
        "**Verdict.** Within the stated band: the figure agrees with the claim.\n\n".into()
    } else {
        format!("**Verdict.** Outside the stated band. {why_not}\n\n")
    }
}

/// The sustainable rate of `policy` in `r`. A sweep names each policy as its
/// spec prints (defaults left out, parameters in order: `synergy:mech=ci` is
/// `synergy`), so `policy` is compared in that form.
pub fn sustained(r: &SweepResult, policy: &str) -> Option<f64> {
    let name = policy
        .parse::<PolicySpec>()
        .map_or_else(|_| policy.to_string(), |s| s.to_string());
    r.policies
        .iter()
        .find(|p| p.policy == name)
        .and_then(|p| p.max_rps_within_slo)
}

/// `policy`'s sustainable rate in `r`, 0 when no load meets the SLO (for
/// comparisons and lines).
pub fn sustained_or_zero(r: &SweepResult, policy: &str) -> f64 {
    sustained(r, policy).unwrap_or(0.0)
}

/// `policy`'s sustainable rate in `r` with its share of the peak, for a table cell.
pub fn sustained_cell(r: &SweepResult, policy: &str) -> String {
    let (div, u) = rate_unit(r.peak_rps);
    match sustained(r, policy) {
        Some(x) => format!("{:.3} {u} ({:.0}%)", x / div, x / r.peak_rps * 100.0),
        None => "none".into(),
    }
}

/// `a / b` as "1.23x", or "–" when either is missing.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "–".into(),
    }
}

/// A sweep's grid step after bisection, as a fraction of the peak: two rates
/// closer than this are the same result.
pub fn resolution(step: f64, refine: u32) -> f64 {
    step / f64::from(1u32 << refine)
}

/// A sweep's sustainable throughput per policy, against `baseline`.
pub fn sustain_table(r: &SweepResult, baseline: &str) -> String {
    let (div, u) = rate_unit(r.peak_rps);
    let mut s = format!(
        "| policy | sustainable ({u}) | % of peak | vs `{baseline}` |\n|---|---|---|---|\n"
    );
    let base = sustained(r, baseline);
    for p in &r.policies {
        let (rate, pct) = match p.max_rps_within_slo {
            Some(x) => (
                format!("{:.3}", x / div),
                format!("{:.1}%", x / r.peak_rps * 100.0),
            ),
            None => ("none".into(), "–".into()),
        };
        let _ = writeln!(
            s,
            "| `{}` | {rate} | {pct} | {} |",
            p.policy,
            ratio(p.max_rps_within_slo, base)
        );
    }
    s.push('\n');
    s
}

/// The header of a table with one column per policy: `first` (the leading
/// columns, `| a | b |`), a `` `policy` `` column each, then `extra` more
/// columns (`| x | y |`, `""` for none).
pub fn policy_table_header<S: AsRef<str>>(first: &str, policies: &[S], extra: &str) -> String {
    let mut s = String::from(first);
    for p in policies {
        let _ = write!(s, " `{}` |", p.as_ref());
    }
    s += extra;
    s += "\n|";
    let columns = first.matches('|').count() - 1 + policies.len() + extra.matches('|').count();
    s += &"---|".repeat(columns);
    s.push('\n');
    s
}

/// The simulator's figures of a simulated point.
pub fn sim_stats(p: &PointResult) -> &psp_metrics::SimExtra {
    p.extra.sim().expect("reproduce's points are simulated")
}

/// The slowest type of a point (largest mean service time).
pub fn longest_type(p: &PointResult) -> &psp_metrics::TypeStats {
    p.types
        .iter()
        .max_by(|a, b| a.mean_service_us.total_cmp(&b.mean_service_us))
        .expect("a point has types")
}

/// The prefix that turns a link relative to `out` into one relative to the
/// directory of `file` ("" when they are the same directory). Both exist by
/// now, so both are resolved (symbolic links, `..`) before comparing.
pub fn link_prefix(file: &Path, out: &Path) -> Result<String> {
    let dir = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let resolve = |p: &Path| {
        p.canonicalize()
            .with_context(|| format!("cannot resolve '{}'", p.display()))
    };
    let rel = relative_path(&resolve(dir)?, &resolve(out)?);
    let mut prefix = String::new();
    for c in rel.components() {
        prefix.push_str(&c.as_os_str().to_string_lossy());
        prefix.push('/');
    }
    Ok(prefix)
}

/// `to` as a path relative to `from`; both absolute and resolved.
fn relative_path(from: &Path, to: &Path) -> PathBuf {
    let f: Vec<_> = from.components().collect();
    let t: Vec<_> = to.components().collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut rel = PathBuf::new();
    for _ in common..f.len() {
        rel.push("..");
    }
    for c in &t[common..] {
        rel.push(c);
    }
    rel
}

/// `md` with every relative link target (`](target)`) prefixed by `prefix`;
/// anchors, absolute paths and URLs are left alone, as are indented code lines.
pub fn rebase_links(md: &str, prefix: &str) -> String {
    if prefix.is_empty() {
        return md.to_string();
    }
    let mut out = String::with_capacity(md.len() + 64);
    for line in md.split_inclusive('\n') {
        if line.starts_with("    ") {
            out.push_str(line);
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            out.push_str(&rest[..i + 2]);
            rest = &rest[i + 2..];
            let relative = !(rest.starts_with('#')
                || rest.starts_with('/')
                || rest.starts_with(')')
                || rest.split(')').next().is_some_and(|t| t.contains("://")));
            if relative {
                out.push_str(prefix);
            }
        }
        out.push_str(rest);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_path_climbs_to_the_common_ancestor() {
        let rel = |a: &str, b: &str| relative_path(Path::new(a), Path::new(b));
        assert_eq!(
            rel("/r/docs", "/r/docs/figures/reproduce"),
            Path::new("figures/reproduce")
        );
        assert_eq!(rel("/r/doc", "/r/figs"), Path::new("../figs"));
        assert_eq!(rel("/r/a/b", "/r"), Path::new("../.."));
        assert_eq!(rel("/r", "/r"), Path::new(""));
    }

    #[test]
    fn rebase_links_prefixes_relative_targets_only() {
        let md = "![a](x.png) ([SVG](x.svg)) [b](#anchor) [c](https://e.org/y) [d](/abs)\n    psp sweep --out ](not-a-link)\n";
        assert_eq!(
            rebase_links(md, "figures/reproduce/"),
            "![a](figures/reproduce/x.png) ([SVG](figures/reproduce/x.svg)) [b](#anchor) [c](https://e.org/y) [d](/abs)\n    psp sweep --out ](not-a-link)\n"
        );
        assert_eq!(rebase_links(md, ""), md);
    }

    #[test]
    fn a_policy_table_header_counts_its_columns() {
        assert_eq!(
            policy_table_header("| workload | system |", &["a", "b"], " x |"),
            "| workload | system | `a` | `b` | x |\n|---|---|---|---|---|\n"
        );
        assert_eq!(
            policy_table_header("| flows |", &["a"], ""),
            "| flows | `a` |\n|---|---|\n"
        );
    }
}
