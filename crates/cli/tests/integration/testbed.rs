//! scripts/testbed.sh at `SCALE=ci` (one workload, one load, c-FCFS and
//! darc-fair, 0.5 s runs, `--idle park`): the report directory holds
//! report.md and report.json with a row of numbers per run, the runtime's
//! beside the simulator's, for `psp run` (fig6) and `psp serve` + `psp load`
//! (kv); and the Redis and memcached mixes of scripts/compare.py where their
//! clients are installed (scripts/deps.sh installs them), else the report
//! says why they were skipped and this test prints a note.

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn installed(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A per-type p99.9 latency that is a positive number.
fn has_p999(fig: &Value) -> bool {
    fig["types"].as_array().is_some_and(|types| {
        !types.is_empty()
            && types
                .iter()
                .all(|t| t["p999_latency_us"].as_f64().is_some_and(|v| v > 0.0))
    })
}

#[test]
fn ci_scale_reports_every_run_beside_the_simulator() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::env::temp_dir().join(format!("psp-testbed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    // compare.py needs a fixed port: one that was free a moment ago.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut script = Command::new("bash");
    // Nothing of the caller's shell changes what SCALE=ci runs.
    for var in [
        "EXPERIMENTS",
        "WORKERS",
        "SERVE_WORKERS",
        "DURATION",
        "SEED",
        "WORKLOADS",
        "LOADS",
        "POLICIES",
        "KV_LOADS",
        "KV_POLICIES",
        "PROFILE_REQUESTS",
        "MIX_SYSTEMS",
        "GETS",
        "LRANGES",
        "CLIENTS",
        "MIX_SECONDS",
        "IDLE",
    ] {
        script.env_remove(var);
    }
    let run = script
        .arg(root.join("scripts/testbed.sh"))
        .arg(&out)
        .env("SCALE", "ci")
        .env("PSP", env!("CARGO_BIN_EXE_psp"))
        .env("PORT", port.to_string())
        .output()
        .expect("bash runs scripts/testbed.sh");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "testbed.sh failed: {stderr}");

    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap())
            .expect("report.json is JSON");
    assert!(report["machine"]["cores"].as_str().is_some(), "{report:#}");
    assert!(md.contains("## Machine"), "{md}");

    for (exp, workload) in [("fig6", "high-bimodal"), ("kv", "kv-measured")] {
        let rows = report["experiments"][exp].as_array().expect("rows");
        let policies: Vec<&str> = rows.iter().filter_map(|r| r["policy"].as_str()).collect();
        assert_eq!(policies, ["c-fcfs", "darc-fair"], "{exp}: {report:#}");
        for r in rows {
            let policy = r["policy"].as_str().unwrap();
            assert_eq!(r["status"], "ok", "{exp} {policy}: {stderr}");
            assert!(has_p999(&r["runtime"]), "{exp} {policy}: {r:#}");
            assert!(has_p999(&r["sim"]), "{exp} {policy}: {r:#}");
            assert!(
                r["runtime"]["achieved_rps"]
                    .as_f64()
                    .is_some_and(|v| v > 0.0)
            );
            // Its row in the workload's table: runtime / simulator cells.
            let row = md
                .lines()
                .find(|l| l.starts_with(&format!("| {workload} | 0.5 | `{policy}` | ok |")))
                .unwrap_or_else(|| panic!("no {exp} row for {policy} in\n{md}"));
            let pairs = row.matches(" / ").count();
            assert!(pairs >= 4, "{row}");
            assert!(!row.contains("- / -"), "a run without numbers: {row}");
        }
    }

    for (kind, client) in [("redis", "redis-benchmark"), ("memcached", "memcaslap")] {
        if !installed(client) || !installed("taskset") {
            eprintln!("note: the {kind} mix is not tested: {client} or taskset is not installed");
            let why = report["skipped"][kind].as_str().unwrap_or_default();
            assert!(why.contains("not installed"), "{kind}: {report:#}");
            continue;
        }
        let mix = &report["mixes"][kind];
        let table = mix["table"].as_str().unwrap_or_default();
        assert!(md.contains(table), "{kind}: its table is not in report.md");
        for system in ["psp:c-fcfs", "psp:darc-fair"] {
            let rps = mix["systems"][system]["get_only"]["rps"].as_f64();
            assert!(rps.is_some_and(|v| v > 0.0), "{kind} {system}: {report:#}");
            let row = table
                .lines()
                .find(|l| l.starts_with(&format!("| {system} | ")))
                .unwrap_or_else(|| panic!("{kind}: no row for {system} in\n{table}"));
            assert!(row.chars().any(|c| c.is_ascii_digit()), "{row}");
        }
    }
    let _ = std::fs::remove_dir_all(&out);
}
