//! The figures of `psp`, drawn from the result documents of `psp-metrics`, as
//! SVG and PNG.
//!
//! - [`plot_sweep`], [`plot_series`]: paper-style figures (p99.9 slowdown
//!   against throughput; latency and reservation against time).
//! - [`plot_lines`]: a metric against a parameter, one line per series.
//! - [`plot_heat_map`]: a grid of ratios coloured against a reference.
//!
//! Nothing here measures, evaluates an SLO or runs anything: it only draws the
//! numbers an executor already recorded. It is a crate of its own so that the
//! executors, which only record, do not link the drawing library.

mod heat;
mod lines;
mod plot;

pub use heat::{HeatMap, plot_heat_map};
pub use lines::{Line, LineFigure, plot_lines};
pub use plot::{PlotError, plot_series, plot_sweep, write_png};
