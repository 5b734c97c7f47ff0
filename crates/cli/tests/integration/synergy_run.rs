//! `psp run` and `psp serve` with SYNERGY and Tiny Quanta: the executors'
//! counters in the JSON point and the text report, a quantum the runtime
//! cannot honour refused before any work, `psp serve` refusing both in one
//! line, and a scaled workload scaling the policies' time constants.

use crate::common;

use common::{assert_one_line_error, json_of, psp};

fn run(policy: &str, json: bool) -> std::process::Output {
    let mut args = vec![
        "run",
        "--workload",
        "extreme-bimodal-x1000",
        "--workers",
        "2",
        "--policy",
        policy,
        "--load",
        "0.3",
        "--duration",
        "300ms",
    ];
    if json {
        args.push("--json");
    }
    psp(&args)
}

#[test]
fn run_reports_synergy_and_tq_counters() {
    for policy in ["synergy:long=10000", "tq"] {
        let v = json_of(&run(policy, true));
        let x = &v["extra"];
        let n = |k: &str| x[k].as_u64().unwrap_or_else(|| panic!("{policy}: {k}"));
        assert_eq!(n("generated_total"), n("completed_total") + n("shed_total"));
        assert_eq!(n("stranded"), 0);
        for k in [
            "preemptions",
            "preemptions_avoided",
            "steals_total",
            "wait_queue_passes",
            "congestion_episodes",
            "wait_queue_full",
        ] {
            n(k);
        }
        assert_eq!(n("wait_queue_full"), 0);
        assert_eq!(
            x["executor"].as_str(),
            Some(policy.split(':').next().unwrap())
        );
        assert_eq!(x["preemptions_per_worker"].as_array().unwrap().len(), 2);
    }
    let out = run("synergy:long=10000", false);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("synergy counters: preemptions"), "{text}");
}

#[test]
fn a_quantum_the_runtime_cannot_honour_is_refused_in_one_line_by_run_and_serve() {
    for policy in ["tq:quantum=0.5", "synergy:qa=off,quantum=0.2"] {
        assert_one_line_error(
            &[
                "run",
                "--workload",
                "extreme-bimodal-x1000",
                "--policy",
                policy,
                "--duration",
                "100ms",
            ],
            "shorter than the runtime can honour",
        );
    }
    for policy in ["tq:quantum=0.5", "ts:quantum=0.5", "concord:quantum=0.5"] {
        assert_one_line_error(
            &["serve", "--policy", policy],
            "shorter than the runtime can honour",
        );
    }
}

#[test]
fn a_workload_scaled_1000x_runs_the_policies_with_quanta_and_thresholds_scaled_1000x() {
    // The canonical name in the report shows what ran: the defaults (5 µs,
    // SYNERGY's 10 µs `long`) times the workload's `time_scale`, and what
    // the user wrote as written.
    for (policy, ran) in [
        ("ts", "ts:quantum=5000"),
        ("synergy", "synergy:quantum=5000,long=10000"),
        ("concord:quantum=1000", "concord:quantum=1000"),
    ] {
        let v = json_of(&run(policy, true));
        assert_eq!(v["policy"].as_str(), Some(ran), "{policy}");
    }
}
