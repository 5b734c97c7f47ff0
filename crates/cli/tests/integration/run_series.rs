//! `psp run --series`: the real runtime's time series (per-window latency and
//! the reservation in force), as the simulator's `--series` writes it.

use crate::common;

use common::{assert_one_line_error, json_of, psp};

/// A phased workload whose short type stops arriving in its last phase, short
/// enough for CI: every completion lands in exactly one window, and the
/// reservation the series reports at the end is the one the run ended with.
#[test]
fn run_series_counts_every_completion_once_and_carries_the_reservation() {
    let dir = std::env::temp_dir().join(format!("psp-run-series-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let wl = dir.join("change.toml");
    std::fs::write(
        &wl,
        r#"name = "change"
[[types]]
name = "A"
ratio = 0.5
service = { dist = "fixed", us = 100.0 }
[[types]]
name = "B"
ratio = 0.5
service = { dist = "fixed", us = 1000.0 }
[[phases]]
name = "mix"
duration_s = 0.6
load = 0.3
[[phases]]
name = "B only"
duration_s = 0.6
load = 0.3
[[phases.types]]
name = "A"
ratio = 0.0
service = { dist = "fixed", us = 100.0 }
[[phases.types]]
name = "B"
ratio = 1.0
service = { dist = "fixed", us = 1000.0 }
"#,
    )
    .unwrap();
    let stem = dir.join("series");
    let out = psp(&[
        "run",
        "--workload",
        wl.to_str().unwrap(),
        "--workers",
        "2",
        "--warmup",
        "0",
        "--policy",
        "darc:samples=20",
        "--series",
        stem.to_str().unwrap(),
        "--series-window",
        "100ms",
        "--json",
    ]);
    let point = json_of(&out);
    let series: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(stem.with_extension("json")).unwrap())
            .unwrap();
    assert!(stem.with_extension("png").exists() && stem.with_extension("svg").exists());
    assert_eq!(series["types"], serde_json::json!(["A", "B"]));
    let windows = series["windows"].as_array().unwrap();
    assert!(windows.len() >= 12, "{} windows for 1.2 s", windows.len());
    let in_windows: u64 = windows
        .iter()
        .flat_map(|w| w["types"].as_array().unwrap())
        .map(|t| t["completions"].as_u64().unwrap())
        .sum();
    let extra = &point["extra"];
    assert_eq!(extra["handler_errors"], 0);
    assert_eq!(
        in_windows,
        extra["completed_total"].as_u64().unwrap(),
        "every completion in exactly one window"
    );
    // The last window carries the reservation in force at the end, when the
    // run made one.
    if let Some(r) = extra.get("reservation") {
        let r: psp_metrics::ReservationLayout = serde_json::from_value(r.clone()).unwrap();
        let last = windows
            .iter()
            .rev()
            .find_map(|w| w["reservation"].as_str())
            .expect("a window with the reservation");
        assert_eq!(last, r.to_string());
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn run_series_window_is_checked_before_the_run() {
    assert_one_line_error(
        &[
            "run",
            "--workload",
            "extreme-bimodal-x1000",
            "--series",
            "/tmp/psp-never-written",
            "--series-window",
            "0ms",
        ],
        "window",
    );
}

/// A series that could not be written is refused before the run, not after
/// it (a phased run may last minutes).
#[test]
fn run_series_stem_is_checked_before_the_run() {
    let dir = std::env::temp_dir().join(format!("psp-run-series-dir-{}", std::process::id()));
    // The series' JSON path is taken by a directory.
    std::fs::create_dir_all(dir.join("taken.json")).unwrap();
    let stem = dir.join("taken");
    for cmd in ["run", "sim"] {
        assert_one_line_error(
            &[
                cmd,
                "--workload",
                "workload-change-x100",
                "--workers",
                "2",
                "--series",
                stem.to_str().unwrap(),
            ],
            "--series",
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}
