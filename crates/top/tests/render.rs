//! The view drawn into ratatui's test backend from two fixed scrapes: the
//! types with their rates and quantiles, each worker with what it runs and
//! what it is reserved for, and the events their difference makes.

use psp_top::model::{Scrape, Top};
use psp_top::view;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::Color;

/// A psp serve's exposition (the series `psp top` reads), at 10 s.
const FIRST: &str = r#"# HELP psp_requests_arrived Valid requests offered to the dispatcher, by type
# TYPE psp_requests_arrived counter
psp_requests_arrived_total{type="GET"} 10000
psp_requests_arrived_total{type="SCAN"} 100
psp_requests_total{type="GET",outcome="ok"} 9990
psp_requests_total{type="GET",outcome="shed"} 0
psp_requests_total{type="GET",outcome="stranded"} 0
psp_requests_total{type="SCAN",outcome="ok"} 97
psp_requests_total{type="SCAN",outcome="shed"} 2
psp_requests_total{type="SCAN",outcome="stranded"} 0
psp_latency_quantile_seconds{type="GET",quantile="0.5"} 0.0000012
psp_latency_quantile_seconds{type="GET",quantile="0.99"} 0.000004
psp_latency_quantile_seconds{type="GET",quantile="0.999"} 0.000011
psp_latency_quantile_seconds{type="SCAN",quantile="0.5"} 0.0005
psp_latency_quantile_seconds{type="SCAN",quantile="0.99"} 0.0021
psp_latency_quantile_seconds{type="SCAN",quantile="0.999"} 0.0032
psp_queue_length{type="GET"} 0
psp_queue_length{type="SCAN"} 4
psp_in_flight_requests 7
psp_reservation_in_force 1
psp_reserved_workers{type="GET"} 1
psp_reserved_workers{type="SCAN"} 3
psp_reservation_updates_total 3
psp_worker_busy{worker="0"} 0
psp_worker_busy{worker="1"} 1
psp_worker_busy{worker="2"} 1
psp_worker_busy{worker="3"} 1
psp_worker_running{worker="1",type="SCAN"} 1
psp_worker_running{worker="2",type="SCAN"} 1
psp_worker_running{worker="3",type="GET"} 1
psp_worker_reserved_for{worker="0",type="GET"} 1
psp_worker_reserved_for{worker="1",type="SCAN"} 1
psp_worker_reserved_for{worker="2",type="SCAN"} 1
psp_worker_reserved_for{worker="3",type="SCAN"} 1
psp_worker_spillway{worker="0"} 0
psp_worker_spillway{worker="1"} 0
psp_worker_spillway{worker="2"} 0
psp_worker_spillway{worker="3"} 1
psp_worker_stealing{worker="0"} 0
psp_worker_stealing{worker="1"} 0
psp_worker_stealing{worker="2"} 0
psp_worker_stealing{worker="3"} 1
psp_worker_lent{worker="0"} 0
psp_worker_lent{worker="1"} 0
psp_worker_lent{worker="2"} 0
psp_worker_lent{worker="3"} 0
psp_worker_preemptions_total{worker="0"} 0
psp_worker_preemptions_total{worker="1"} 0
psp_worker_preemptions_total{worker="2"} 0
psp_worker_preemptions_total{worker="3"} 0
psp_preemptions_total 0
psp_workers 4
psp_utilization 0.41
psp_snapshots_total 100
psp_uptime_seconds 10.0
# EOF
"#;

/// One second later: GET's rate doubled, the reservation moved worker 1 to
/// GET, worker 0 is lent to SCAN and was preempted twice, SCAN shed 3 more.
fn second() -> String {
    FIRST
        .replace(
            "arrived_total{type=\"GET\"} 10000",
            "arrived_total{type=\"GET\"} 30000",
        )
        .replace(
            "arrived_total{type=\"SCAN\"} 100",
            "arrived_total{type=\"SCAN\"} 150",
        )
        .replace(
            "{type=\"SCAN\",outcome=\"shed\"} 2",
            "{type=\"SCAN\",outcome=\"shed\"} 5",
        )
        .replace("updates_total 3", "updates_total 4")
        .replace(
            "reserved_for{worker=\"1\",type=\"SCAN\"}",
            "reserved_for{worker=\"1\",type=\"GET\"}",
        )
        .replace(
            "psp_worker_busy{worker=\"0\"} 0",
            "psp_worker_busy{worker=\"0\"} 1\npsp_worker_running{worker=\"0\",type=\"SCAN\"} 1",
        )
        .replace("lent{worker=\"0\"} 0", "lent{worker=\"0\"} 1")
        .replace("total{worker=\"0\"} 0", "total{worker=\"0\"} 2")
        .replace("psp_preemptions_total 0", "psp_preemptions_total 2")
        .replace("uptime_seconds 10.0", "uptime_seconds 11.0")
}

fn text(buf: &Buffer) -> Vec<String> {
    (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
        })
        .collect()
}

/// The row of the screen that holds `needle` (panics with the screen if none).
fn row_with<'a>(screen: &'a [String], needle: &str) -> &'a str {
    screen
        .iter()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no '{needle}' on screen:\n{}", screen.join("\n")))
}

#[test]
fn the_view_shows_types_workers_and_events() {
    let mut top = Top::new("http://127.0.0.1:9100/metrics");
    top.update(Scrape::parse(FIRST).unwrap());
    top.update(Scrape::parse(&second()).unwrap());
    let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
    terminal.draw(|f| view::draw(f, &top)).unwrap();
    let buf = terminal.backend().buffer().clone();
    let screen = text(&buf);
    let shown = screen.join("\n");

    assert!(shown.contains("psp top"), "{shown}");
    assert!(shown.contains("up 11.0 s  4 workers"), "{shown}");
    // Types: rate from the counters' difference, quantiles, queue, sheds.
    let get = row_with(&screen, "│GET");
    for cell in ["20.0k", "1.2 µs", "4.0 µs", "11.0 µs", "1 w"] {
        assert!(get.contains(cell), "GET row without {cell}: {get}");
    }
    let scan = row_with(&screen, "│SCAN");
    for cell in ["50", "500.0 µs", "2.10 ms", "3.20 ms", " 4 ", " 5 ", "3 w"] {
        assert!(scan.contains(cell), "SCAN row without {cell}: {scan}");
    }
    // Workers: what each runs, for whom it is reserved, lent or stealing.
    let w0 = row_with(&screen, "│w0");
    for cell in ["SCAN", "GET", "lent", " 2 "] {
        assert!(w0.contains(cell), "w0 row without {cell}: {w0}");
    }
    let w1 = row_with(&screen, "│w1");
    assert!(
        w1.contains("SCAN") && w1.contains("GET") && w1.contains("own"),
        "{w1}"
    );
    let w3 = row_with(&screen, "│w3");
    assert!(w3.contains("stealing") && w3.contains("(spillway)"), "{w3}");
    // Events, newest first: the sheds, the preemptions, the move.
    let events: Vec<&String> = screen
        .iter()
        .skip_while(|l| !l.contains("events"))
        .collect();
    let at = |needle: &str| {
        events
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no event '{needle}':\n{shown}"))
    };
    let (shed, preempted, moved, first) = (
        at("SCAN: 3 shed"),
        at("w0: 2 preemptions, now runs SCAN"),
        at("reservation #4 moved: GET → w0,w1  SCAN → w2,w3"),
        at("reservation in force: GET → w0  SCAN → w1-w3"),
    );
    assert!(
        shed < preempted && preempted < moved && moved < first,
        "{shown}"
    );

    // Colours: each type has its own, and a worker running it shows it.
    let x = w0_running_x(&screen);
    let y = screen.iter().position(|l| l.contains("│w0")).unwrap() as u16;
    let scan_y = screen.iter().position(|l| l.contains("│SCAN")).unwrap() as u16;
    assert_eq!(buf[(x, y)].fg, buf[(1, scan_y)].fg);
    assert_ne!(buf[(1, scan_y)].fg, Color::Reset);
}

/// The column where w0's row shows what it runs.
fn w0_running_x(screen: &[String]) -> u16 {
    let row = row_with(screen, "│w0");
    let byte = row.find("SCAN").unwrap();
    row[..byte].chars().count() as u16
}

#[test]
fn before_the_first_scrape_it_says_so() {
    let top = Top::new("http://h:1/metrics");
    let mut terminal = Terminal::new(TestBackend::new(80, 5)).unwrap();
    terminal.draw(|f| view::draw(f, &top)).unwrap();
    let screen = text(terminal.backend().buffer());
    assert!(
        screen[0].contains("waiting for the first scrape"),
        "{screen:?}"
    );
}
