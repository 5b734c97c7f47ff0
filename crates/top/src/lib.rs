//! `psp top`: a live terminal view of a running `psp serve --metrics ADDR`,
//! read from its `/metrics` every interval: per request type the arrival rate,
//! latency quantiles, queue, sheds and the reservation; per worker what it
//! runs and for whom it is reserved or lent; and the reservation changes,
//! preemptions and sheds as they happen.
//!
//! [`model`] reads scrapes and keeps their differences, [`view`] draws them
//! with ratatui; [`run`] is the terminal loop around both. It only reads the
//! server's metrics: it never talks to the server otherwise, and a server
//! that goes away leaves its last scrape on screen.

pub mod model;
pub mod view;

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use psp_net::scrape::fetch_exposition;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};

pub use model::{ReadError, Scrape, Top};

/// Why `psp top` cannot start.
#[derive(Debug, thiserror::Error)]
pub enum TopError {
    /// The address is neither `host:port` nor an `http://` URL.
    #[error("'{0}' is not HOST:PORT or an http://HOST:PORT/metrics URL")]
    Address(String),
    /// The first scrape failed: nothing listening, not HTTP, not a psp server.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Standard input or output is not a terminal (a pipe, a file, a
    /// service manager): there is no screen to draw on.
    #[error(
        "psp top draws a live view and needs a terminal (standard input and output are not one); without a screen, read the same numbers with `curl {0}`"
    )]
    NoTerminal(String),
    /// The terminal could not be used.
    #[error("terminal: {0}")]
    Terminal(#[from] std::io::Error),
}

/// The URL of the metrics at `addr`: `host:port` (as `psp serve --metrics`
/// takes it) or a full `http://` URL (a URL without a path gets `/metrics`).
///
/// # Errors
/// [`TopError::Address`] for anything else.
pub fn metrics_url(addr: &str) -> Result<String, TopError> {
    let bad = || TopError::Address(addr.to_string());
    if let Some(rest) = addr.strip_prefix("http://") {
        let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(bad());
        }
        return Ok(if path.is_empty() {
            format!("http://{host}/metrics")
        } else {
            addr.to_string()
        });
    }
    let (host, port) = addr.rsplit_once(':').ok_or_else(bad)?;
    if host.is_empty() || host.contains(['/', ' ']) || port.parse::<u16>().is_err() {
        return Err(bad());
    }
    Ok(format!("http://{addr}/metrics"))
}

/// One look at `url`: fetched and read.
///
/// # Errors
/// As [`fetch_exposition`] and [`Scrape::parse`].
pub fn look(url: &str) -> Result<Scrape, ReadError> {
    Scrape::parse(&fetch_exposition(url)?)
}

/// Runs the live view of the metrics at `addr` until `q`, Esc or Ctrl-C,
/// looking every `interval`. The address and the first scrape are checked
/// before the screen is taken over, so that a wrong address is a plain error.
///
/// # Errors
/// A bad address, a first scrape that fails, or a terminal that cannot be
/// used.
pub fn run(addr: &str, interval: Duration) -> Result<(), TopError> {
    let url = metrics_url(addr)?;
    let mut top = Top::new(url.clone());
    top.update(look(&url)?);
    if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
        return Err(TopError::NoTerminal(url));
    }
    let mut terminal = ratatui::try_init()?;
    let result = watch(&mut terminal, &mut top, &url, interval);
    ratatui::restore();
    result
}

/// The loop: draw, wait for a key until the next look is due, look.
fn watch(
    terminal: &mut ratatui::DefaultTerminal,
    top: &mut Top,
    url: &str,
    interval: Duration,
) -> Result<(), TopError> {
    let mut next = Instant::now() + interval;
    loop {
        terminal.draw(|f| view::draw(f, top))?;
        let left = next.saturating_duration_since(Instant::now());
        if event::poll(left)? {
            if let Event::Key(k) = event::read()?
                && k.kind != KeyEventKind::Release
                && quits(k.code, k.modifiers)
            {
                return Ok(());
            }
            continue;
        }
        next = Instant::now() + interval;
        match look(url) {
            Ok(s) => top.update(s),
            Err(e) => top.failed(e.to_string()),
        }
    }
}

/// `q`, Esc or Ctrl-C.
fn quits(code: KeyCode, modifiers: KeyModifiers) -> bool {
    match code {
        KeyCode::Char('q') | KeyCode::Esc => true,
        KeyCode::Char('c') => modifiers.contains(KeyModifiers::CONTROL),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_urls() {
        assert_eq!(
            metrics_url("127.0.0.1:9100").unwrap(),
            "http://127.0.0.1:9100/metrics"
        );
        assert_eq!(
            metrics_url("[::1]:9100").unwrap(),
            "http://[::1]:9100/metrics"
        );
        assert_eq!(
            metrics_url("http://h:1/metrics").unwrap(),
            "http://h:1/metrics"
        );
        assert_eq!(metrics_url("http://h:1").unwrap(), "http://h:1/metrics");
        for bad in ["nowhere", "h:", ":1", "h:99999", "http://", "h/x:1"] {
            assert!(
                matches!(metrics_url(bad), Err(TopError::Address(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn keys_that_quit() {
        assert!(quits(KeyCode::Char('q'), KeyModifiers::NONE));
        assert!(quits(KeyCode::Esc, KeyModifiers::NONE));
        assert!(quits(KeyCode::Char('c'), KeyModifiers::CONTROL));
        assert!(!quits(KeyCode::Char('c'), KeyModifiers::NONE));
    }
}
