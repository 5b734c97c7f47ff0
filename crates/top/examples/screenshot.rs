//! A screenshot of `psp top` without a screen: watches a live server with the
//! real model and view for a while, draws the last frame into ratatui's test
//! backend, and paints that buffer (symbols and colours) into a PNG.
//!
//! ```sh
//! psp serve --workload workload-change-x100 --policy darc:samples=200 --workers 2 \
//!     --address 127.0.0.1:7000 --metrics 127.0.0.1:9100 --duration 60s &
//! psp load --workload workload-change-x100 --server 127.0.0.1:7000 &
//! cargo run -p psp-top --example screenshot -- 127.0.0.1:9100 docs/img/psp-top.png 24
//! ```
//!
//! Arguments: the metrics address, the PNG to write, and how many seconds to
//! watch (scraping every second, as `psp top` does by default). The glyphs
//! are DejaVu Sans Mono where the system has it (the proportional DejaVu Sans
//! of `assets/` otherwise, one glyph per cell either way).

use std::time::{Duration, Instant};

use plotters::prelude::*;
use plotters::style::{Color as _, FontStyle};
use psp_top::{Top, look, metrics_url, view};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};

const COLS: u16 = 112;
const ROWS: u16 = 30;
const CELL_W: u32 = 9;
const CELL_H: u32 = 20;
const FONT_PX: f64 = 17.0;
const BACKGROUND: RGBColor = RGBColor(24, 26, 32);
const FOREGROUND: RGBColor = RGBColor(208, 208, 208);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [addr, out, secs] = &args[..] else {
        return Err("usage: screenshot METRICS_ADDR OUT.png SECONDS".into());
    };
    let url = metrics_url(addr)?;
    let watch = Duration::from_secs_f64(secs.parse()?);
    let mut top = Top::new(url.clone());
    let end = Instant::now() + watch;
    loop {
        match look(&url) {
            Ok(s) => top.update(s),
            Err(e) => top.failed(e.to_string()),
        }
        if Instant::now() >= end {
            break;
        }
        std::thread::sleep(Duration::from_secs(1).min(end - Instant::now()));
    }
    let mut terminal = Terminal::new(TestBackend::new(COLS, ROWS))?;
    terminal.draw(|f| view::draw(f, &top))?;
    paint(terminal.backend().buffer(), out)?;
    println!("wrote {out}");
    Ok(())
}

/// The RGB of a terminal colour (xterm's palette).
fn rgb(c: Color, default: RGBColor) -> RGBColor {
    match c {
        Color::Reset => default,
        Color::Black => RGBColor(0, 0, 0),
        Color::Red => RGBColor(205, 49, 49),
        Color::Green => RGBColor(13, 188, 121),
        Color::Yellow => RGBColor(229, 229, 16),
        Color::Blue => RGBColor(36, 114, 200),
        Color::Magenta => RGBColor(188, 63, 188),
        Color::Cyan => RGBColor(17, 168, 205),
        Color::Gray => RGBColor(229, 229, 229),
        Color::DarkGray => RGBColor(118, 118, 118),
        Color::LightRed => RGBColor(241, 76, 76),
        Color::LightGreen => RGBColor(35, 209, 139),
        Color::LightYellow => RGBColor(245, 245, 67),
        Color::LightBlue => RGBColor(59, 142, 234),
        Color::LightMagenta => RGBColor(214, 112, 214),
        Color::LightCyan => RGBColor(41, 184, 219),
        Color::White => RGBColor(255, 255, 255),
        Color::Rgb(r, g, b) => RGBColor(r, g, b),
        Color::Indexed(_) => default,
    }
}

/// The arms (left, right, up, down) of a box-drawing character: drawn as
/// lines, so that borders join whatever the font's metrics.
fn box_arms(symbol: &str) -> Option<[bool; 4]> {
    Some(match symbol {
        "─" => [true, true, false, false],
        "│" => [false, false, true, true],
        "┌" => [false, true, false, true],
        "┐" => [true, false, false, true],
        "└" => [false, true, true, false],
        "┘" => [true, false, true, false],
        "├" => [false, true, true, true],
        "┤" => [true, false, true, true],
        "┬" => [true, true, false, true],
        "┴" => [true, true, true, false],
        "┼" => [true, true, true, true],
        _ => return None,
    })
}

fn draw_box<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    (px, py): (i32, i32),
    [left, right, up, down]: [bool; 4],
    color: RGBColor,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let (cx, cy) = (px + CELL_W as i32 / 2, py + CELL_H as i32 / 2);
    let (x0, x1) = (
        if left { px } else { cx },
        if right { px + CELL_W as i32 } else { cx },
    );
    let (y0, y1) = (
        if up { py } else { cy },
        if down { py + CELL_H as i32 } else { cy },
    );
    if left || right {
        area.draw(&PathElement::new([(x0, cy), (x1, cy)], color))?;
    }
    if up || down {
        area.draw(&PathElement::new([(cx, y0), (cx, y1)], color))?;
    }
    Ok(())
}

/// A font file's bytes, for as long as the process runs (plotters keeps them).
fn font(paths: &[&str]) -> Option<&'static [u8]> {
    paths
        .iter()
        .find_map(|p| std::fs::read(p).ok())
        .map(|b| &*Box::leak(b.into_boxed_slice()))
}

fn paint(buf: &Buffer, out: &str) -> Result<(), Box<dyn std::error::Error>> {
    let assets = concat!(env!("CARGO_MANIFEST_DIR"), "/../../assets/DejaVuSans.ttf");
    let regular = font(&[
        "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf",
        assets,
    ])
    .ok_or("no font")?;
    plotters::style::register_font("cell", FontStyle::Normal, regular).map_err(|_| "not a font")?;
    let bold = font(&["/usr/share/fonts/truetype/dejavu/DejaVuSansMono-Bold.ttf"]);
    let bold_style = match bold {
        Some(b) if plotters::style::register_font("cell", FontStyle::Bold, b).is_ok() => {
            FontStyle::Bold
        }
        _ => FontStyle::Normal,
    };
    let (w, h) = (u32::from(buf.area.width), u32::from(buf.area.height));
    let size = (w * CELL_W + 16, h * CELL_H + 16);
    let mut pixels = vec![0u8; size.0 as usize * size.1 as usize * 3];
    let base = BitMapBackend::with_buffer(&mut pixels, size).into_drawing_area();
    base.fill(&BACKGROUND)?;
    let root = base.margin(8, 8, 8, 8);
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            let cell = &buf[(x, y)];
            let (mut fg, mut bg) = (rgb(cell.fg, FOREGROUND), rgb(cell.bg, BACKGROUND));
            if cell.modifier.contains(Modifier::REVERSED) {
                std::mem::swap(&mut fg, &mut bg);
            }
            let (px, py) = (i32::from(x) * CELL_W as i32, i32::from(y) * CELL_H as i32);
            if bg != BACKGROUND {
                root.draw(&Rectangle::new(
                    [(px, py), (px + CELL_W as i32, py + CELL_H as i32)],
                    bg.filled(),
                ))?;
            }
            let symbol = cell.symbol();
            if symbol.trim().is_empty() {
                continue;
            }
            if let Some(arms) = box_arms(symbol) {
                draw_box(&root, (px, py), arms, fg)?;
                continue;
            }
            let style = if cell.modifier.contains(Modifier::BOLD) {
                bold_style
            } else {
                FontStyle::Normal
            };
            let text = ("cell", FONT_PX, style).into_font().color(&fg);
            root.draw(&Text::new(symbol.to_string(), (px, py + 1), text))?;
        }
    }
    root.present()?;
    // The areas borrow the pixels until dropped.
    drop((root, base));
    psp_plot::write_png(std::path::Path::new(out), &pixels, size)?;
    Ok(())
}
