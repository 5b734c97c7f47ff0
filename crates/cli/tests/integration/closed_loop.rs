//! `psp sim --clients` from the outside: closed-loop clients are checked before
//! any work (one line, exit code 2), and a point reports who sent its requests
//! and each type's throughput.

use crate::common;

use common::{assert_one_line_error, json_of, psp};

#[test]
fn clients_and_think_are_checked_before_any_work() {
    let sim = |extra: &[&'static str]| {
        let mut a = vec!["sim", "--workload", "leveldb", "--duration", "10ms"];
        a.extend_from_slice(extra);
        a
    };
    for (args, needle) in [
        (sim(&["--clients", "GET=4", "--load", "0.5"]), "--load"),
        (sim(&["--clients", "GET=4", "--rps", "1000"]), "--rps"),
        (sim(&["--clients", "GET=4", "--flows", "8"]), "--flows"),
        (sim(&["--think", "1us"]), "--think"),
        (
            sim(&["--clients", "GET=4097"]),
            "--clients (connections per type)",
        ),
        (sim(&["--clients", "0,0"]), "--clients (connections in all)"),
        (sim(&["--clients", "GET=1", "--think", "2s"]), "--think"),
        (sim(&["--clients", "GET=1", "--think", "-1us"]), "--think"),
        (sim(&["--clients", "GET=1", "--think", "soon"]), "--think"),
        (sim(&["--clients", "LRANGE=1"]), "not a type of 'leveldb'"),
        (sim(&["--clients", "16"]), "one per type"),
        (sim(&["--clients", "GET=1,4"]), "mixes"),
        (sim(&["--clients", "GET=1,GET=2"]), "twice"),
        (sim(&["--clients", "GET=x"]), "not a number"),
        (
            vec![
                "sim",
                "--workload",
                "leveldb",
                "--clients",
                "4096,4096",
                "--duration",
                "3600s",
            ],
            "at most 1e8",
        ),
        (
            vec!["sim", "--workload", "workload-change", "--clients", "1,1"],
            "phases",
        ),
    ] {
        assert_one_line_error(&args, needle);
    }
}

#[test]
fn a_closed_loop_point_reports_its_clients_and_each_types_throughput() {
    let out = psp(&[
        "sim",
        "--workload",
        "leveldb",
        "--workers",
        "4",
        "--policy",
        "c-fcfs",
        "--clients",
        "GET=8,SCAN=2",
        "--think",
        "5us",
        "--duration",
        "20ms",
        "--json",
    ]);
    let p = json_of(&out);
    let clients = &p["extra"]["clients"];
    assert_eq!(clients["connections"], serde_json::json!([8, 2]));
    assert_eq!(clients["think_us"], 5.0);
    let types = p["types"].as_array().unwrap();
    let x: Vec<f64> = types
        .iter()
        .map(|t| t["throughput_rps"].as_f64().unwrap())
        .collect();
    assert!(x.iter().all(|&x| x > 0.0), "{x:?}");
    let achieved = p["achieved_rps"].as_f64().unwrap();
    assert!((x.iter().sum::<f64>() / achieved - 1.0).abs() < 1e-9);
    // The load is the workers' busy fraction.
    let load = p["load"].as_f64().unwrap();
    assert!(load > 0.0 && load <= 1.0 + 1e-9, "{load}");

    // The text names the clients and has a throughput column.
    let out = psp(&[
        "sim",
        "--workload",
        "leveldb",
        "--clients",
        "2,1",
        "--duration",
        "5ms",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("closed loop: connections GET 2, SCAN 1"),
        "{text}"
    );
    assert!(text.contains("done/s"), "{text}");
}
