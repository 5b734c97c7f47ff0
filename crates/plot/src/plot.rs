//! Paper-style figures drawn from sweep results, as SVG and PNG.
//!
//! [`plot_sweep`] turns a [`SweepResult`] into the classic two-panel figure of the
//! Perséphone paper: p99.9 slowdown against offered load (with the SLO bound), and
//! the p99.9 latency of the shortest request type against offered load. One line per
//! policy, log-scaled y axes.
//!
//! [`plot_series`] turns a [`TimeSeries`] into the workload-change figure: each
//! type's p99.9 latency per window against time (log y) above the workers
//! reserved for each type against time, with a vertical line at each phase
//! boundary.
//!
//! This module does no measuring and no SLO evaluation: it only draws the numbers
//! that an executor already put in the result documents.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use psp_metrics::{PointResult, SweepResult, TimeSeries, TypeStats};

/// Everything that can go wrong while writing a figure.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The output directory could not be created.
    #[error("cannot create directory {path}: {source}")]
    Io {
        /// The directory that could not be created.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Drawing or encoding a figure failed (plotters' errors are generic over the
    /// backend, so only their message is kept).
    #[error("cannot draw {path}: {message}")]
    Draw {
        /// The figure file being written.
        path: PathBuf,
        /// What went wrong, as reported by the drawing library.
        message: String,
    },
}

/// Font family used for every piece of text (registered from the embedded font).
pub(crate) const FONT: &str = "sans-serif";

/// The embedded font: no system font is reachable by plotters in this configuration.
const FONT_BYTES: &[u8] = include_bytes!("../../../assets/DejaVuSans.ttf");

/// Total figure size in pixels (two panels side by side).
const FIGURE_SIZE: (u32, u32) = (1400, 550);

/// Line colours, one per policy, cycled when there are more policies than colours
/// (the Tableau 10 palette).
pub(crate) const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Registers the embedded font under [`FONT`], once per process.
fn ensure_font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font(FONT, FontStyle::Normal, FONT_BYTES)
                .map_err(|_| "the embedded DejaVuSans font is not a valid font".to_string())
        })
        .clone()
}

/// Draws the p99.9 slowdown and shortest-type p99.9 latency of every policy of
/// `sweep` against offered load, and writes the figure as `<out_stem>.svg` and
/// `<out_stem>.png`.
///
/// The parent directory of `out_stem` is created when missing. `title` is drawn
/// above both panels. Returns the paths written, SVG first then PNG.
pub fn plot_sweep(
    sweep: &SweepResult,
    out_stem: &Path,
    title: &str,
) -> Result<Vec<PathBuf>, PlotError> {
    render(&Figure::from_sweep(sweep, title), out_stem, FIGURE_SIZE)
}

/// A figure that draws itself on any plotters backend.
pub(crate) trait Drawing {
    /// Draws on `root`; a one-line error on failure.
    fn draw_on<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>;
}

/// Draws `figure` at `size` pixels as `<out_stem>.svg` and `<out_stem>.png`
/// (the directory created when missing); returns the paths, SVG first. Every
/// figure of this crate is written through it.
pub(crate) fn render(
    figure: &impl Drawing,
    out_stem: &Path,
    size: (u32, u32),
) -> Result<Vec<PathBuf>, PlotError> {
    let (svg, png) = output_paths(out_stem)?;
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |message: String| PlotError::Draw { path, message }
    };
    ensure_font().map_err(err(&svg))?;
    figure
        .draw_on(&SVGBackend::new(&svg, size).into_drawing_area())
        .map_err(err(&svg))?;
    let mut rgb = vec![0u8; size.0 as usize * size.1 as usize * 3];
    figure
        .draw_on(&BitMapBackend::with_buffer(&mut rgb, size).into_drawing_area())
        .map_err(err(&png))?;
    write_png(&png, &rgb, size)?;
    Ok(vec![svg, png])
}

/// Writes `rgb` (8-bit RGB rows, `size` pixels) as a PNG file at `path`.
///
/// plotters' own PNG encoder goes through the `image` crate, a large build
/// for one format; the `png` crate it wraps does the same here.
///
/// # Errors
/// [`PlotError::Draw`] when the buffer does not match `size` or the file
/// cannot be written.
pub fn write_png(path: &Path, rgb: &[u8], size: (u32, u32)) -> Result<(), PlotError> {
    let fail = |message: String| PlotError::Draw {
        path: path.to_path_buf(),
        message,
    };
    let file = std::fs::File::create(path).map_err(|e| fail(e.to_string()))?;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), size.0, size.1);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    // Plots are flat colour: the encoder's best compression with a filter
    // chosen per row makes them a quarter of the size of its fast default
    // (they are committed beside the results).
    encoder.set_compression(png::Compression::Best);
    encoder.set_adaptive_filter(png::AdaptiveFilterType::Adaptive);
    let mut writer = encoder.write_header().map_err(|e| fail(e.to_string()))?;
    writer
        .write_image_data(rgb)
        .map_err(|e| fail(e.to_string()))?;
    writer.finish().map_err(|e| fail(e.to_string()))
}

/// `<out_stem>.svg` and `<out_stem>.png`, with their directory created.
fn output_paths(out_stem: &Path) -> Result<(PathBuf, PathBuf), PlotError> {
    if let Some(dir) = out_stem.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir).map_err(|source| PlotError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    Ok((with_suffix(out_stem, "svg"), with_suffix(out_stem, "png")))
}

/// Size of the time-series figure (two panels, one above the other).
const SERIES_SIZE: (u32, u32) = (1200, 900);

/// Draws `series` against time, and writes the figure as `<out_stem>.svg` and
/// `<out_stem>.png`: above, each type's p99.9 latency per window (log scale;
/// windows without completions of a type leave a gap); below, the workers
/// reserved for each type's group (dashed: the workers it may steal), when the
/// series has a reservation. `boundaries` are phase starts `(seconds, name)`
/// (e.g. `Workload::phase_boundaries`), drawn as labelled vertical lines.
///
/// The parent directory of `out_stem` is created when missing. Returns the
/// paths written, SVG first then PNG.
///
/// # Errors
/// The directory cannot be created, or a figure cannot be drawn or written.
pub fn plot_series(
    series: &TimeSeries,
    boundaries: &[(f64, String)],
    out_stem: &Path,
    title: &str,
) -> Result<Vec<PathBuf>, PlotError> {
    let figure = SeriesFigure {
        series,
        boundaries,
        title,
    };
    render(&figure, out_stem, SERIES_SIZE)
}

/// [`plot_series`]'s figure.
struct SeriesFigure<'a> {
    series: &'a TimeSeries,
    boundaries: &'a [(f64, String)],
    title: &'a str,
}

impl Drawing for SeriesFigure<'_> {
    fn draw_on<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        draw_series(self.series, self.boundaries, self.title, root)
    }
}

/// One line of the time-series figure: points where the value exists, split
/// into runs at the gaps.
fn runs(points: impl Iterator<Item = (f64, Option<f64>)>, log: bool) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for (x, y) in points {
        match y.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
            Some(v) => out.last_mut().expect("never empty").push((x, v)),
            None if !out.last().expect("never empty").is_empty() => out.push(Vec::new()),
            None => {}
        }
    }
    out.retain(|r| !r.is_empty());
    out
}

fn draw_series<DB: DrawingBackend>(
    series: &TimeSeries,
    boundaries: &[(f64, String)],
    title: &str,
    root: &DrawingArea<DB, Shift>,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let body = root.titled(title, (FONT, 26)).map_err(err)?;
    let (_, height) = body.dim_in_pixel();
    let (top, bottom) = body.split_vertically(height * 3 / 5);
    let end_s = series.windows.last().map_or(1.0, |w| w.end_s);
    let x_range = 0.0..end_s.max(1e-9);
    let panels = SeriesPanels {
        series,
        lines: SeriesLines::of(series),
        boundaries,
        x_range,
    };
    panels.draw_latency(&top)?;
    panels.draw_workers(&bottom)?;
    root.present().map_err(err)
}

/// The lines of the time-series figure, per type, each split into runs.
struct SeriesLines {
    /// p99.9 latency at each window's middle.
    latency: Vec<Vec<Vec<(f64, f64)>>>,
    /// Workers reserved, as steps.
    reserved: Vec<Vec<Vec<(f64, f64)>>>,
    /// Workers that may steal, as steps.
    stealable: Vec<Vec<Vec<(f64, f64)>>>,
}

impl SeriesLines {
    fn of(series: &TimeSeries) -> Self {
        let mid = |w: &psp_metrics::Window| (w.start_s + w.end_s) / 2.0;
        let latency = (0..series.types.len())
            .map(|t| {
                runs(
                    series
                        .windows
                        .iter()
                        .map(|w| (mid(w), w.types.get(t).and_then(|x| x.p999_latency_us))),
                    true,
                )
            })
            .collect();
        // Reserved and stealable workers hold for a whole window: steps.
        let step = |t: usize, pick: fn(&psp_metrics::WindowType) -> Option<usize>| {
            runs(
                series.windows.iter().flat_map(move |w| {
                    let v = w.types.get(t).and_then(pick).map(|n| n as f64);
                    [(w.start_s, v), (w.end_s, v)]
                }),
                false,
            )
        };
        let reserved = (0..series.types.len())
            .map(|t| step(t, |x| x.reserved_workers))
            .collect();
        let stealable = (0..series.types.len())
            .map(|t| step(t, |x| x.stealable_workers))
            .collect();
        Self {
            latency,
            reserved,
            stealable,
        }
    }
}

/// The two panels of the time-series figure, over the same time range.
struct SeriesPanels<'a> {
    series: &'a TimeSeries,
    lines: SeriesLines,
    /// Phase boundaries: start (s) and name.
    boundaries: &'a [(f64, String)],
    x_range: Range<f64>,
}

impl SeriesPanels<'_> {
    /// The upper panel: each type's p99.9 latency per window (log y), with
    /// the phase boundaries marked and named.
    fn draw_latency<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
    ) -> Result<(), String> {
        let (series, lines, x_range) = (self.series, &self.lines, &self.x_range);
        let lat_range = log_range(lines.latency.iter().flatten().flatten().map(|p| p.1));
        let mut chart = series_panel(area, "p99.9 latency per window")
            .build_cartesian_2d(x_range.clone(), lat_range.clone().log_scale())
            .map_err(|e| e.to_string())?;
        draw_axes(&mut chart, "Time (s)", "p99.9 latency (µs)", None)?;
        for (t, name) in series.types.iter().enumerate() {
            draw_runs(&mut chart, name, &lines.latency[t], palette(t))?;
        }
        let label_y = lat_range.end / 1.2;
        draw_boundaries(
            &mut chart,
            self.boundaries,
            x_range,
            lat_range,
            Some(label_y),
        )?;
        if !series.types.is_empty() {
            draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        }
        Ok(())
    }

    /// The lower panel: the workers reserved for each type (dashed: those
    /// that may steal), with the phase boundaries marked.
    fn draw_workers<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
    ) -> Result<(), String> {
        let (series, lines, x_range) = (self.series, &self.lines, &self.x_range);
        let most_workers = lines
            .reserved
            .iter()
            .chain(&lines.stealable)
            .flatten()
            .flatten()
            .map(|p| p.1)
            .fold(1.0, f64::max);
        let y_top = most_workers + 1.0;
        let mut chart = series_panel(area, "workers reserved per type (dashed: may steal)")
            .build_cartesian_2d(x_range.clone(), 0.0..y_top)
            .map_err(|e| e.to_string())?;
        draw_axes(
            &mut chart,
            "Time (s)",
            "workers",
            Some((y_top as usize + 1).min(12)),
        )?;
        for (t, name) in series.types.iter().enumerate() {
            let color = palette(t);
            draw_runs(&mut chart, name, &lines.reserved[t], color)?;
            for run in &lines.stealable[t] {
                chart
                    .draw_series(DashedLineSeries::new(
                        run.iter().copied(),
                        6,
                        4,
                        color.stroke_width(1),
                    ))
                    .map_err(|e| e.to_string())?;
            }
        }
        draw_boundaries(&mut chart, self.boundaries, x_range, 0.0..y_top, None)?;
        if lines.reserved.iter().any(|r| !r.is_empty()) {
            draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        }
        Ok(())
    }
}

/// A panel of the time-series figure on `area`, captioned, ready for its
/// coordinates.
fn series_panel<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    caption: &str,
) -> ChartBuilder<'a, 'a, DB> {
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(caption, (FONT, 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70);
    builder
}

/// Type `t`'s color.
fn palette(t: usize) -> RGBColor {
    PALETTE[t % PALETTE.len()]
}

/// One type's line, in runs; the first run carries the legend entry.
fn draw_runs<DB, X, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    name: &str,
    runs: &[Vec<(f64, f64)>],
    color: RGBColor,
) -> Result<(), String>
where
    DB: DrawingBackend,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    for (i, run) in runs.iter().enumerate() {
        let s = chart
            .draw_series(LineSeries::new(run.iter().copied(), color.stroke_width(2)))
            .map_err(err)?;
        if i == 0 {
            s.label(name).legend(legend_line(color));
        }
    }
    Ok(())
}

/// A dashed gray line across `y` at each phase boundary inside `x_range`,
/// followed by its name at height `label_y` when given.
fn draw_boundaries<DB, X, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    boundaries: &[(f64, String)],
    x_range: &Range<f64>,
    y: Range<f64>,
    label_y: Option<f64>,
) -> Result<(), String>
where
    DB: DrawingBackend,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let gray = RGBColor(60, 60, 60);
    for (at, name) in boundaries.iter().filter(|b| x_range.contains(&b.0)) {
        chart
            .draw_series(DashedLineSeries::new(
                [(*at, y.start), (*at, y.end)],
                6,
                4,
                gray.stroke_width(1),
            ))
            .map_err(err)?;
        if let Some(label_y) = label_y {
            chart
                .draw_series(std::iter::once(Text::new(
                    name.clone(),
                    (*at, label_y),
                    (FONT, 14).into_font().color(&gray),
                )))
                .map_err(err)?;
        }
    }
    Ok(())
}

/// The axes of every panel: descriptions, fonts, tick format and a light grid;
/// `y_labels` caps the number of y ticks.
pub(crate) fn draw_axes<DB, X, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    x_desc: &str,
    y_desc: &str,
    y_labels: Option<usize>,
) -> Result<(), String>
where
    DB: DrawingBackend,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(x_desc)
        .y_desc(y_desc)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .x_label_formatter(&|v| format_tick(*v))
        .y_label_formatter(&|v| format_tick(*v))
        .light_line_style(RGBColor(235, 235, 235));
    if let Some(n) = y_labels {
        mesh.y_labels(n);
    }
    mesh.draw().map_err(|e| e.to_string())
}

/// A legend entry: a short solid line in `color`.
pub(crate) fn legend_line(color: RGBColor) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
}

/// The legend box at `position`.
pub(crate) fn draw_legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(position)
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
}

/// One named line with a dot at each point, in `color`.
pub(crate) fn draw_line<DB, X, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    name: &str,
    points: &[(f64, f64)],
    color: RGBColor,
) -> Result<(), String>
where
    DB: DrawingBackend,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    chart
        .draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new(
            points.iter().copied(),
            color.stroke_width(2),
        ))
        .map_err(err)?
        .label(name)
        .legend(legend_line(color));
    Ok(())
}

/// `stem` with `.ext` appended (not replacing any dot already in the file name).
pub(crate) fn with_suffix(stem: &Path, ext: &str) -> PathBuf {
    let mut s = stem.as_os_str().to_owned();
    s.push(".");
    s.push(ext);
    PathBuf::from(s)
}

/// One policy's drawable data.
struct Series {
    name: String,
    color: RGBColor,
    /// (offered Mrps, overall p99.9 slowdown), finite and positive only.
    slowdown: Vec<(f64, f64)>,
    /// (offered Mrps, p99.9 latency in µs of the shortest type), finite and positive only.
    short_latency: Vec<(f64, f64)>,
}

/// Everything needed to draw the figure, extracted from a sweep.
struct Figure {
    title: String,
    series: Vec<Series>,
    slo: Option<f64>,
    /// Name(s) of the shortest request type, for the right panel's title.
    short_type: String,
    /// Divisor and name of the x axis' rate unit.
    unit: (f64, &'static str),
}

impl Drawing for Figure {
    fn draw_on<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        self.draw(root)
    }
}

impl Figure {
    fn from_sweep(sweep: &SweepResult, title: &str) -> Self {
        let top = sweep
            .policies
            .iter()
            .flat_map(|p| &p.points)
            .map(|p| p.offered_rps)
            .fold(sweep.peak_rps, f64::max);
        let unit = psp_metrics::rate_unit(top);
        let mut short_names: Vec<String> = Vec::new();
        let series = sweep
            .policies
            .iter()
            .enumerate()
            .map(|(i, policy)| {
                let mut slowdown = Vec::new();
                let mut short_latency = Vec::new();
                for point in &policy.points {
                    let x = point.offered_rps / unit.0;
                    if !x.is_finite() {
                        continue;
                    }
                    if is_plottable(point.overall.p999_slowdown) {
                        slowdown.push((x, point.overall.p999_slowdown));
                    }
                    if let Some(t) = shortest_type(point) {
                        if !short_names.contains(&t.name) {
                            short_names.push(t.name.clone());
                        }
                        if is_plottable(t.p999_latency_us) {
                            short_latency.push((x, t.p999_latency_us));
                        }
                    }
                }
                slowdown.sort_by(|a, b| a.0.total_cmp(&b.0));
                short_latency.sort_by(|a, b| a.0.total_cmp(&b.0));
                Series {
                    name: policy.policy.clone(),
                    color: PALETTE[i % PALETTE.len()],
                    slowdown,
                    short_latency,
                }
            })
            .collect();
        let slo = sweep
            .slo
            .per_type_p999_slowdown
            .or(sweep.slo.overall_p999_slowdown)
            .filter(|b| is_plottable(*b));
        let short_type = if short_names.is_empty() {
            "the shortest type".to_string()
        } else {
            short_names.join("/")
        };
        Figure {
            unit,
            title: title.to_string(),
            series,
            slo,
            short_type,
        }
    }

    /// Draws both panels on `root` and presents it (writes the file).
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let body = root
            .titled(&self.title, (FONT, 26))
            .map_err(|e| e.to_string())?;
        let (width, _) = body.dim_in_pixel();
        let (left, right) = body.split_horizontally(width / 2);

        let xs = self
            .series
            .iter()
            .flat_map(|s| s.slowdown.iter().chain(&s.short_latency).map(|p| p.0));
        let x_range = linear_range(xs);

        let left_ys = self
            .series
            .iter()
            .flat_map(|s| s.slowdown.iter().map(|p| p.1))
            .chain(self.slo);
        self.draw_panel(
            &left,
            "p99.9 slowdown",
            "p99.9 slowdown",
            x_range.clone(),
            log_range(left_ys),
            |s| &s.slowdown,
            self.slo,
        )?;

        let right_ys = self
            .series
            .iter()
            .flat_map(|s| s.short_latency.iter().map(|p| p.1));
        self.draw_panel(
            &right,
            &format!("p99.9 latency of {}", self.short_type),
            "p99.9 latency (µs)",
            x_range,
            log_range(right_ys),
            |s| &s.short_latency,
            None,
        )?;

        root.present().map_err(|e| e.to_string())
    }

    /// Draws one panel: a line per policy from `data`, and an optional dashed SLO line.
    #[allow(clippy::too_many_arguments)]
    fn draw_panel<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        caption: &str,
        y_desc: &str,
        x_range: Range<f64>,
        y_range: Range<f64>,
        data: impl Fn(&Series) -> &Vec<(f64, f64)>,
        slo: Option<f64>,
    ) -> Result<(), String> {
        let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        let mut chart = ChartBuilder::on(area)
            .caption(caption, (FONT, 20))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(x_range.clone(), y_range.log_scale())
            .map_err(err)?;
        draw_axes(
            &mut chart,
            &format!("Offered load ({})", self.unit.1),
            y_desc,
            None,
        )?;

        let mut labelled = false;
        for s in &self.series {
            let points = data(s);
            if points.is_empty() {
                continue;
            }
            draw_line(&mut chart, &s.name, points, s.color)?;
            labelled = true;
        }

        if let Some(bound) = slo {
            let slo_color = RGBColor(60, 60, 60);
            chart
                .draw_series(DashedLineSeries::new(
                    [(x_range.start, bound), (x_range.end, bound)],
                    8,
                    6,
                    slo_color.stroke_width(2),
                ))
                .map_err(err)?
                .label("SLO")
                .legend(move |(x, y)| {
                    DashedPathElement::new(
                        vec![(x, y), (x + 20, y)],
                        6,
                        3,
                        slo_color.stroke_width(2),
                    )
                });
            labelled = true;
        }

        if labelled {
            draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        }
        Ok(())
    }
}

/// Whether `v` can be drawn on a log axis.
pub(crate) fn is_plottable(v: f64) -> bool {
    v.is_finite() && v > 0.0
}

/// The measured type with the smallest mean service time of `point`, if any.
fn shortest_type(point: &PointResult) -> Option<&TypeStats> {
    point
        .types
        .iter()
        .filter(|t| t.count > 0 && t.mean_service_us.is_finite())
        .min_by(|a, b| a.mean_service_us.total_cmp(&b.mean_service_us))
}

/// A linear axis range covering `values` with a 5% margin (never empty, never
/// below zero when the data is not).
pub(crate) fn linear_range(values: impl Iterator<Item = f64>) -> Range<f64> {
    let (lo, hi) = min_max(values.filter(|v| v.is_finite()));
    let Some((lo, hi)) = lo.zip(hi) else {
        return 0.0..1.0;
    };
    let span = hi - lo;
    let pad = if span > 0.0 {
        span * 0.05
    } else {
        (lo.abs() * 0.1).max(0.1)
    };
    let start = if lo >= 0.0 {
        (lo - pad).max(0.0)
    } else {
        lo - pad
    };
    start..hi + pad
}

/// A log axis range covering the positive finite `values`, padded by a factor on
/// both sides (so it stays valid when all values are equal).
pub(crate) fn log_range(values: impl Iterator<Item = f64>) -> Range<f64> {
    const PAD: f64 = 1.5;
    let (lo, hi) = min_max(values.filter(|v| is_plottable(*v)));
    let Some((lo, hi)) = lo.zip(hi) else {
        return 1.0..10.0;
    };
    let (start, end) = (lo / PAD, hi * PAD);
    // plotters labels a log axis at the powers of ten within it and at
    // multiples of each going up: a range with no power of ten gets no label
    // at all, and one far above the power below leaves its lowest data
    // unlabelled. Start at that power then.
    let below = 10f64.powf(start.log10().floor());
    let next = below * 10.0;
    if below < start && (next > end || next / start > 2.0) {
        // A hair below, so that rounding (10^-3 read as 1.0000001e-3)
        // cannot push the power out of the range.
        below * (1.0 - 1e-9)..end
    } else {
        start..end
    }
}

/// The smallest and largest of `values` (`None` when there are none).
fn min_max(values: impl Iterator<Item = f64>) -> (Option<f64>, Option<f64>) {
    values.fold((None, None), |(lo, hi), v| {
        (
            Some(lo.map_or(v, |l: f64| l.min(v))),
            Some(hi.map_or(v, |h: f64| h.max(v))),
        )
    })
}

/// Short tick label: integers without decimals, otherwise up to 3 significant digits.
pub(crate) fn format_tick(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    if !(1e-3..1e6).contains(&a) {
        return format!("{v:.0e}");
    }
    if (v - v.round()).abs() < 1e-9 * a.max(1.0) {
        return format!("{}", v.round());
    }
    let digits = (2 - a.log10().floor() as i32).clamp(0, 6) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use psp_metrics::{OverallStats, PolicySweep, Slo};

    fn type_stats(name: &str, mean_service_us: f64, p999_latency_us: f64) -> TypeStats {
        TypeStats {
            name: name.to_string(),
            count: 1000,
            mean_service_us,
            mean_latency_us: mean_service_us * 2.0,
            p50_latency_us: mean_service_us * 1.5,
            p99_latency_us: p999_latency_us * 0.5,
            p999_latency_us,
            p50_slowdown: 1.5,
            p99_slowdown: p999_latency_us * 0.5 / mean_service_us,
            p999_slowdown: p999_latency_us / mean_service_us,
            throughput_rps: 1000.0,
            dropped: 0,
            timeouts: 0,
            errors: 0,
        }
    }

    fn point(policy: &str, offered_rps: f64, slowdown: f64) -> PointResult {
        PointResult {
            workload: "high-bimodal".to_string(),
            policy: policy.to_string(),
            workers: 14,
            load: offered_rps / 2.8e6,
            offered_rps,
            achieved_rps: offered_rps,
            duration_s: 1.0,
            seed: 1,
            overall: OverallStats {
                count: 2000,
                p50_slowdown: 1.2,
                p99_slowdown: slowdown / 2.0,
                p999_slowdown: slowdown,
            },
            // The long type comes first: the plot must pick the short one by service time.
            types: vec![
                type_stats("LONG", 500.0, 500.0 * slowdown / 10.0),
                type_stats("SHORT", 0.5, 0.5 * slowdown),
            ],
            dropped: 0,
            shed: 0,
            timeouts: 0,
            errors: 0,
            measured_generated: 2000,
            loss_fraction: 0.0,
            extra: psp_metrics::Extra::Sim(Box::default()),
        }
    }

    fn sweep() -> SweepResult {
        let policies = [("c-FCFS", 1.0), ("DARC", 0.2)]
            .into_iter()
            .map(|(name, scale)| PolicySweep {
                policy: name.to_string(),
                max_rps_within_slo: Some(1.0e6),
                points: [(0.5e6, 5.0), (1.0e6, 20.0), (1.5e6, 400.0)]
                    .into_iter()
                    .map(|(rps, s)| point(name, rps, s * scale))
                    .collect(),
            })
            .collect();
        SweepResult {
            slo: Slo {
                per_type_p999_slowdown: Some(10.0),
                overall_p999_slowdown: None,
                max_loss_fraction: 0.001,
            },
            mode: "sim".to_string(),
            workload: "high-bimodal".to_string(),
            workers: 14,
            peak_rps: 2.8e6,
            policies,
        }
    }

    #[test]
    fn plot_sweep_writes_svg_and_png() {
        let dir = std::env::temp_dir().join(format!("psp-plot-test-{}", std::process::id()));
        // A missing nested directory must be created.
        let stem = dir.join("nested").join("sweep");
        let written = plot_sweep(&sweep(), &stem, "Test sweep").expect("plot_sweep failed");

        assert_eq!(written.len(), 2);
        let svg_path = dir.join("nested").join("sweep.svg");
        let png_path = dir.join("nested").join("sweep.png");
        assert_eq!(written, vec![svg_path.clone(), png_path.clone()]);
        assert!(svg_path.is_file() && png_path.is_file());

        let svg = std::fs::read_to_string(&svg_path).expect("read svg");
        assert!(!svg.is_empty());
        assert!(svg.contains("<svg"));
        assert!(svg.contains("p99.9 latency of SHORT"));

        let png = std::fs::read(&png_path).expect("read png");
        assert!(png.starts_with(&[0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A]));

        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn plot_series_writes_svg_and_png_with_phase_marks() {
        use psp_metrics::{ReservationView, SeriesRecorder};
        let mut rec = SeriesRecorder::new(["A", "B"], 100_000_000);
        rec.close_windows_until(
            0,
            Some(ReservationView {
                per_type: &[(1, 4), (3, 3)],
                text: "A:1 B:3",
            }),
        );
        for i in 0..2_000u64 {
            let at = i * 1_000_000;
            if i == 1_000 {
                rec.close_windows_until(
                    at,
                    Some(ReservationView {
                        per_type: &[(3, 3), (1, 4)],
                        text: "A:3 B:1",
                    }),
                );
            }
            let slow = i >= 1_000;
            rec.record(0, at, if slow { 300_000 } else { 3_000 }, 1_000);
            if i % 3 == 0 {
                rec.record(1, at, 150_000, 100_000);
            }
        }
        let ts = rec.finish(2_000_000_000);
        let dir = std::env::temp_dir().join(format!("psp-series-test-{}", std::process::id()));
        let stem = dir.join("series");
        let bounds = vec![(0.0, "base".to_string()), (1.0, "swap".to_string())];
        let written = plot_series(&ts, &bounds, &stem, "Workload change").expect("plot_series");
        assert_eq!(written.len(), 2);
        let svg = std::fs::read_to_string(&written[0]).expect("read svg");
        assert!(svg.contains("swap") && svg.contains("p99.9 latency per window"));
        let png = std::fs::read(&written[1]).expect("read png");
        assert!(png.starts_with(&[0x89, b'P', b'N', b'G']));
        // An empty series (no windows, no reservation) still draws.
        let empty = SeriesRecorder::new(["A"], 1_000_000).finish(0);
        assert!(plot_series(&empty, &[], &dir.join("empty"), "empty").is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn gaps_split_lines() {
        let r = runs(
            [
                (0.0, Some(1.0)),
                (1.0, None),
                (2.0, Some(0.0)),
                (3.0, Some(2.0)),
                (4.0, Some(3.0)),
            ]
            .into_iter(),
            true,
        );
        assert_eq!(r, vec![vec![(0.0, 1.0)], vec![(3.0, 2.0), (4.0, 3.0)]]);
    }

    #[test]
    fn ranges_stay_valid_for_equal_or_missing_values() {
        let r = log_range([3.0, 3.0].into_iter());
        assert!(r.start > 0.0 && r.start < 3.0 && r.end > 3.0);
        let r = log_range([f64::NAN, -1.0, 0.0, f64::INFINITY].into_iter());
        assert!(r.start > 0.0 && r.start < r.end);
        let r = linear_range([2.0].into_iter());
        assert!(r.start < 2.0 && r.end > 2.0 && r.start >= 0.0);
        let r = linear_range(std::iter::empty());
        assert!(r.start < r.end);
    }

    /// A log axis spanning less than a decade (or lying between two
    /// powers of ten) still gets labelled ticks, and the lowest data is within
    /// a factor of 2 of a labelled tick.
    #[test]
    fn a_sub_decade_log_axis_gets_labelled_ticks() {
        use plotters::coord::ranged1d::Ranged;
        for data in [
            [20.0, 40.0],
            [6.5, 8.0],
            [1.2, 1.9],
            [3.0, 3.0],
            [0.002, 0.004],
            [2.33, 10.42],
            [0.7, 300.0],
        ] {
            let r = log_range(data.into_iter());
            let axis: LogCoord<f64> = r.clone().log_scale().into();
            let ticks: Vec<f64> = axis
                .key_points(10usize)
                .into_iter()
                .filter(|t| r.contains(t))
                .collect();
            assert!(ticks.len() >= 2, "{data:?}: range {r:?}, ticks {ticks:?}");
            assert!(
                ticks[0] <= data[0] * 2.0,
                "{data:?}: lowest tick {} far above the data",
                ticks[0]
            );
            assert!(ticks.iter().all(|t| !format_tick(*t).is_empty()));
        }
    }

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(format_tick(100.0), "100");
        assert_eq!(format_tick(0.5), "0.5");
        assert_eq!(format_tick(1.25), "1.25");
        assert_eq!(format_tick(0.123456), "0.123");
    }
}
