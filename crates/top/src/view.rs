//! How `psp top` draws a [`Top`]: a title line, the request types (rate,
//! latency quantiles, queue, sheds, reservation), the workers (what each runs
//! and for whom it is reserved or lent) and the events, newest first.
//!
//! It only draws: any ratatui backend (the terminal, or a test's buffer)
//! gets the same frame.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table};

use crate::model::{EventKind, Scrape, Top};

/// Type colours, by the type's place in the server's order.
const PALETTE: [Color; 8] = [
    Color::Cyan,
    Color::Yellow,
    Color::Green,
    Color::Magenta,
    Color::LightBlue,
    Color::LightRed,
    Color::LightCyan,
    Color::LightGreen,
];

fn type_style(s: &Scrape, name: &str) -> Style {
    let i = s.types.iter().position(|t| t.name == name).unwrap_or(0);
    Style::default().fg(PALETTE[i % PALETTE.len()])
}

const DIM: Style = Style::new().fg(Color::DarkGray);
const HEADER: Style = Style::new().fg(Color::White).add_modifier(Modifier::BOLD);

/// Seconds as the unit that reads best: `850 ns`, `12.3 µs`, `4.56 ms`, `1.20 s`.
pub fn duration(s: f64) -> String {
    match s {
        s if s < 1e-6 => format!("{:.0} ns", s * 1e9),
        s if s < 1e-3 => format!("{:.1} µs", s * 1e6),
        s if s < 1.0 => format!("{:.2} ms", s * 1e3),
        s => format!("{s:.2} s"),
    }
}

/// A count or rate, short: `950`, `12.3k`, `4.56M`.
pub fn count(v: f64) -> String {
    match v {
        v if v < 1e3 => format!("{v:.0}"),
        v if v < 1e6 => format!("{:.1}k", v / 1e3),
        v => format!("{:.2}M", v / 1e6),
    }
}

/// Draws `top` over the whole frame.
pub fn draw(frame: &mut Frame, top: &Top) {
    let area = frame.area();
    let Some(now) = &top.now else {
        let text = format!("psp top: waiting for the first scrape of {}", top.source);
        frame.render_widget(Paragraph::new(text), area);
        return;
    };
    let types_h = now.types.len() as u16 + 3;
    let workers_h = (now.workers.len() as u16 + 3).min(area.height.saturating_sub(types_h + 6));
    let [title, types, workers, events] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(types_h),
        Constraint::Length(workers_h.max(4)),
        Constraint::Min(3),
    ])
    .areas(area);
    draw_title(frame, title, top, now);
    draw_types(frame, types, top, now);
    draw_workers(frame, workers, now);
    draw_events(frame, events, top);
}

fn draw_title(frame: &mut Frame, area: Rect, top: &Top, now: &Scrape) {
    let util = now.utilization.map_or(String::new(), |u| {
        format!("  utilization {:.0}%", u * 100.0)
    });
    let first = Line::from(vec![
        Span::styled("psp top ", HEADER),
        Span::raw(format!("{}  ", top.source)),
        Span::styled("q", HEADER),
        Span::styled(" quits", DIM),
    ]);
    let mut second = vec![Span::raw(format!(
        "up {:.1} s  {} workers  in flight {}{util}  reservation updates {}  preemptions {}",
        now.uptime_s,
        now.workers.len(),
        count(now.in_flight),
        count(now.reservation_updates),
        count(now.preemptions),
    ))];
    if let Some(e) = &top.error {
        second.push(Span::styled(
            format!("  last scrape failed: {e}"),
            Style::default().fg(Color::Red),
        ));
    }
    frame.render_widget(Paragraph::new(vec![first, Line::from(second)]), area);
}

fn draw_types(frame: &mut Frame, area: Rect, top: &Top, now: &Scrape) {
    let header = Row::new(
        [
            "type", "req/s", "p50", "p99", "p99.9", "queued", "shed", "shed/s", "stranded",
            "reserved",
        ]
        .map(|h| Cell::from(h).style(HEADER)),
    );
    let opt = |v: Option<f64>, f: fn(f64) -> String| v.map_or("-".to_string(), f);
    let rows = now.types.iter().map(|t| {
        let shed_style = if top.shed_rate(&t.name).unwrap_or(0.0) > 0.0 {
            Style::default().fg(Color::Red)
        } else {
            Style::default()
        };
        let [p50, p99, p999] = t.latency_s.map(|q| opt(q, duration));
        Row::new(vec![
            Cell::from(t.name.clone()).style(type_style(now, &t.name)),
            Cell::from(opt(top.rate(&t.name), count)),
            Cell::from(p50),
            Cell::from(p99),
            Cell::from(p999),
            Cell::from(opt(t.queued, count)),
            Cell::from(count(t.shed)).style(shed_style),
            Cell::from(opt(top.shed_rate(&t.name), count)).style(shed_style),
            Cell::from(count(t.stranded)),
            Cell::from(opt(t.reserved, |w| format!("{w:.0} w"))),
        ])
    });
    let widths = [
        Constraint::Min(8),
        Constraint::Length(8),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(7),
        Constraint::Length(7),
        Constraint::Length(7),
        Constraint::Length(9),
        Constraint::Length(9),
    ];
    let table = Table::new(rows, widths)
        .header(header)
        .block(Block::default().borders(Borders::ALL).title(" types "));
    frame.render_widget(table, area);
}

fn draw_workers(frame: &mut Frame, area: Rect, now: &Scrape) {
    let header = Row::new(
        ["worker", "runs", "reserved for", "as", "preemptions"]
            .map(|h| Cell::from(h).style(HEADER)),
    );
    let rows = now.workers.iter().enumerate().map(|(w, row)| {
        let runs = match (&row.running, row.busy) {
            (Some(t), _) => Cell::from(t.clone()).style(type_style(now, t)),
            (None, Some(true)) => Cell::from("busy"),
            (None, Some(false)) => Cell::from("idle").style(DIM),
            (None, None) => Cell::from("?").style(DIM),
        };
        let reserved: Line = if row.reserved_for.is_empty() {
            Line::styled(if row.spillway { "spillway" } else { "-" }, DIM)
        } else {
            let mut spans = Vec::new();
            for (i, t) in row.reserved_for.iter().enumerate() {
                if i > 0 {
                    spans.push(Span::raw("+"));
                }
                spans.push(Span::styled(t.clone(), type_style(now, t)));
            }
            if row.spillway {
                spans.push(Span::styled(" (spillway)", DIM));
            }
            Line::from(spans)
        };
        let role = match (row.lent, row.stealing) {
            (true, _) => Cell::from("lent").style(
                Style::default()
                    .fg(Color::LightMagenta)
                    .add_modifier(Modifier::BOLD),
            ),
            (_, true) => Cell::from("stealing").style(Style::default().fg(Color::LightYellow)),
            _ if row.running.is_some() => Cell::from("own"),
            _ => Cell::from(""),
        };
        Row::new(vec![
            Cell::from(format!("w{w}")),
            runs,
            Cell::from(reserved),
            role,
            Cell::from(count(row.preemptions)),
        ])
    });
    let widths = [
        Constraint::Length(7),
        Constraint::Min(10),
        Constraint::Min(16),
        Constraint::Length(9),
        Constraint::Length(12),
    ];
    let table = Table::new(rows, widths)
        .header(header)
        .block(Block::default().borders(Borders::ALL).title(" workers "));
    frame.render_widget(table, area);
}

fn draw_events(frame: &mut Frame, area: Rect, top: &Top) {
    let lines: Vec<Line> = top
        .events
        .iter()
        .rev()
        .take(area.height.saturating_sub(2) as usize)
        .map(|e| {
            let at = e
                .at_s
                .map_or("      -".to_string(), |t| format!("{t:7.1}s"));
            let style = match e.kind {
                EventKind::Reservation => Style::default().fg(Color::LightGreen),
                EventKind::Preemption => Style::default().fg(Color::LightMagenta),
                EventKind::Shed => Style::default().fg(Color::Red),
                EventKind::Connection => Style::default().fg(Color::LightRed),
            };
            Line::from(vec![
                Span::styled(at, DIM),
                Span::raw("  "),
                Span::styled(e.text.clone(), style),
            ])
        })
        .collect();
    let block = Block::default()
        .borders(Borders::ALL)
        .title(" events (newest first) ");
    frame.render_widget(Paragraph::new(lines).block(block), area);
}
