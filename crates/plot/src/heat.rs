//! Heat maps: a grid of ratios (rows by columns), each cell coloured by how far
//! it lies above or below a reference (green above, red below, white at it)
//! and labelled with its value, as SVG and PNG in the style of the other
//! figures. Empty cells are grey.
//!
//! Like `plot`, this module only draws numbers it is given.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::plot::{Drawing, FONT, PlotError, render};

/// A grid of values to draw.
#[derive(Debug, Clone)]
pub struct HeatMap {
    /// Title above the grid.
    pub title: String,
    /// Row labels, top to bottom.
    pub rows: Vec<String>,
    /// Column labels, left to right.
    pub cols: Vec<String>,
    /// `cells[row][col]`; `None`: no value.
    pub cells: Vec<Vec<Option<f64>>>,
    /// The value drawn white (e.g. 1.0 for a ratio).
    pub reference: f64,
    /// Values this far from the reference (either way) get the full colour.
    pub span: f64,
}

const CELL: (u32, u32) = (120, 34);
const LEFT: u32 = 170;
const TOP: u32 = 100;

/// Draws `map` as `<out_stem>.svg` and `<out_stem>.png`; returns the paths.
///
/// # Errors
/// A directory that cannot be created or a figure that cannot be drawn.
pub fn plot_heat_map(map: &HeatMap, out_stem: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let size = (
        LEFT + CELL.0 * map.cols.len() as u32 + 20,
        TOP + CELL.1 * map.rows.len() as u32 + 20,
    );
    render(map, out_stem, size)
}

impl Drawing for HeatMap {
    fn draw_on<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        draw(self, root)
    }
}

/// The colour of `v`: white at the reference, green above, red below.
fn colour(map: &HeatMap, v: Option<f64>) -> RGBColor {
    let Some(v) = v.filter(|v| v.is_finite()) else {
        return RGBColor(220, 220, 220);
    };
    let x = ((v - map.reference) / map.span.max(f64::MIN_POSITIVE)).clamp(-1.0, 1.0);
    let fade = |full: u8| (255.0 - (255.0 - f64::from(full)) * x.abs()) as u8;
    if x >= 0.0 {
        RGBColor(fade(60), fade(170), fade(75))
    } else {
        RGBColor(fade(215), fade(60), fade(50))
    }
}

fn draw<DB: DrawingBackend>(map: &HeatMap, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let centre = Pos::new(HPos::Center, VPos::Center);
    let title = TextStyle::from((FONT, 18).into_font()).color(&BLACK);
    root.draw(&Text::new(map.title.clone(), (10, 10), title))
        .map_err(err)?;
    let label = TextStyle::from((FONT, 13).into_font())
        .color(&BLACK)
        .pos(centre);
    let row_label = TextStyle::from((FONT, 13).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Right, VPos::Center));
    let (cw, ch) = (CELL.0 as i32, CELL.1 as i32);
    let (left, top) = (LEFT as i32, TOP as i32);
    for (c, name) in map.cols.iter().enumerate() {
        // Column labels may hold two lines: "ideal, per type\nci".
        for (k, line) in name.lines().enumerate() {
            let at = (left + cw * c as i32 + cw / 2, top - 36 + 16 * k as i32);
            root.draw(&Text::new(line.to_string(), at, label.clone()))
                .map_err(err)?;
        }
    }
    for (r, name) in map.rows.iter().enumerate() {
        let y = top + ch * r as i32;
        root.draw(&Text::new(
            name.clone(),
            (left - 8, y + ch / 2),
            row_label.clone(),
        ))
        .map_err(err)?;
        for c in 0..map.cols.len() {
            let v = map
                .cells
                .get(r)
                .and_then(|row| row.get(c))
                .copied()
                .flatten();
            let x = left + cw * c as i32;
            root.draw(&Rectangle::new(
                [(x, y), (x + cw, y + ch)],
                colour(map, v).filled(),
            ))
            .map_err(err)?;
            root.draw(&Rectangle::new(
                [(x, y), (x + cw, y + ch)],
                RGBColor(255, 255, 255).stroke_width(1),
            ))
            .map_err(err)?;
            let text = v.map_or_else(|| "–".to_string(), |v| format!("{v:.2}"));
            root.draw(&Text::new(text, (x + cw / 2, y + ch / 2), label.clone()))
                .map_err(err)?;
        }
    }
    root.present().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heat_map_is_drawn_with_a_label_per_cell() {
        let dir = std::env::temp_dir().join(format!("psp-heat-{}", std::process::id()));
        let map = HeatMap {
            title: "t".into(),
            rows: vec!["a".into(), "b".into()],
            cols: vec!["x\nci".into(), "y".into()],
            cells: vec![vec![Some(1.07), None], vec![Some(0.93), Some(1.0)]],
            reference: 1.0,
            span: 0.2,
        };
        let files = plot_heat_map(&map, &dir.join("h")).unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        for label in ["1.07", "0.93", "1.00", "–", "ci"] {
            assert!(svg.contains(label), "{label} missing");
        }
        assert!(std::fs::metadata(&files[1]).unwrap().len() > 0);
        // Above the reference green, below red, empty grey, at it white.
        assert!(colour(&map, Some(1.2)).1 > colour(&map, Some(1.2)).0);
        assert!(colour(&map, Some(0.8)).0 > colour(&map, Some(0.8)).1);
        assert_eq!(colour(&map, None), RGBColor(220, 220, 220));
        assert_eq!(colour(&map, Some(1.0)), RGBColor(255, 255, 255));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
