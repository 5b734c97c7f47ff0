//! Line figures that are not sweeps: a metric against a parameter (reserved
//! workers, worker count, time), one line per series, as SVG and PNG, in the
//! same style as [`crate::plot_sweep`].
//!
//! Like `plot`, this module only draws numbers it is given.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;

use crate::plot::{
    Drawing, FONT, PALETTE, PlotError, draw_axes, draw_legend, draw_line, is_plottable,
    legend_line, linear_range, log_range, render,
};

/// One line: a name and its (x, y) points.
#[derive(Debug, Clone)]
pub struct Line {
    /// Legend entry.
    pub name: String,
    /// Points; those with a non-finite coordinate (or non-positive y on a log
    /// axis) are skipped.
    pub points: Vec<(f64, f64)>,
}

/// A one-panel line figure.
#[derive(Debug, Clone)]
pub struct LineFigure {
    /// Title above the panel.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Log-scaled y axis.
    pub log_y: bool,
    /// The lines.
    pub lines: Vec<Line>,
    /// A dashed horizontal reference (e.g. the SLO) and its legend entry.
    pub reference: Option<(f64, String)>,
}

const SIZE: (u32, u32) = (900, 560);

/// Draws `figure` as `<out_stem>.svg` and `<out_stem>.png` (the parent
/// directory is created when missing); returns the paths written.
///
/// # Errors
/// A directory that cannot be created or a figure that cannot be drawn.
pub fn plot_lines(figure: &LineFigure, out_stem: &Path) -> Result<Vec<PathBuf>, PlotError> {
    render(figure, out_stem, SIZE)
}

impl Drawing for LineFigure {
    fn draw_on<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        draw(self, root)
    }
}

fn draw<DB: DrawingBackend>(f: &LineFigure, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let keep = |&(x, y): &(f64, f64)| {
        x.is_finite()
            && (if f.log_y {
                is_plottable(y)
            } else {
                y.is_finite()
            })
    };
    let lines: Vec<(String, Vec<(f64, f64)>)> = f
        .lines
        .iter()
        .map(|l| {
            (
                l.name.clone(),
                l.points.iter().copied().filter(keep).collect(),
            )
        })
        .collect();
    let x_range = linear_range(lines.iter().flat_map(|l| l.1.iter().map(|p| p.0)));
    let ys = lines
        .iter()
        .flat_map(|l| l.1.iter().map(|p| p.1))
        .chain(f.reference.as_ref().map(|r| r.0));
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(&f.title, (FONT, 20))
        .margin(14)
        .x_label_area_size(45)
        .y_label_area_size(70);
    // The two axis kinds are different types: draw through one generic helper.
    if f.log_y {
        let chart = builder
            .build_cartesian_2d(x_range.clone(), log_range(ys).log_scale())
            .map_err(err)?;
        finish(f, chart, &lines, x_range)?;
    } else {
        let (lo, hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), y| {
            (a.min(y), b.max(y))
        });
        let (lo, hi) = if lo.is_finite() {
            (lo.min(0.0), hi.max(lo + 1.0) * 1.05)
        } else {
            (0.0, 1.0)
        };
        let chart = builder
            .build_cartesian_2d(x_range.clone(), lo..hi)
            .map_err(err)?;
        finish(f, chart, &lines, x_range)?;
    }
    root.present().map_err(err)
}

fn finish<'a, DB: DrawingBackend + 'a, Y>(
    f: &LineFigure,
    mut chart: ChartContext<'a, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, Y>>,
    lines: &[(String, Vec<(f64, f64)>)],
    x_range: std::ops::Range<f64>,
) -> Result<(), String>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    draw_axes(&mut chart, &f.x_label, &f.y_label, None)?;
    for (i, (name, points)) in lines.iter().enumerate() {
        if !points.is_empty() {
            draw_line(&mut chart, name, points, PALETTE[i % PALETTE.len()])?;
        }
    }
    if let Some((y, name)) = &f.reference {
        let c = RGBColor(60, 60, 60);
        chart
            .draw_series(DashedLineSeries::new(
                [(x_range.start, *y), (x_range.end, *y)],
                8,
                6,
                c.stroke_width(2),
            ))
            .map_err(|e| e.to_string())?
            .label(name.as_str())
            .legend(legend_line(c));
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperRight)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_log_and_linear_figures() {
        let dir = std::env::temp_dir().join(format!("psp-lines-{}", std::process::id()));
        for log_y in [true, false] {
            let f = LineFigure {
                title: "t".into(),
                x_label: "x".into(),
                y_label: "y".into(),
                log_y,
                lines: vec![Line {
                    name: "a".into(),
                    points: vec![(0.0, 1.0), (1.0, 10.0), (2.0, f64::NAN)],
                }],
                reference: Some((5.0, "SLO".into())),
            };
            let stem = dir.join(if log_y { "log" } else { "lin" });
            let written = plot_lines(&f, &stem).unwrap();
            assert!(
                written
                    .iter()
                    .all(|p| std::fs::metadata(p).unwrap().len() > 100)
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
