//! `--app` end to end through the binary: `psp profile` writes a measured
//! workload that `psp run`, `psp serve` and `psp load` take (the application
//! implied by it); TPC-C through serve and load reports its consistency check;
//! bad application options are one-line errors with exit code 2.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use crate::common;

use common::{assert_one_line_error, json_of, psp};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("psp-apps-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Starts `psp serve ARGS --address 127.0.0.1:0 --json`; returns it and its
/// address.
fn serve(args: &[&str]) -> (Child, String) {
    let mut server = Command::new(env!("CARGO_BIN_EXE_psp"))
        .args([
            "serve",
            "--address",
            "127.0.0.1:0",
            "--json",
            "--duration",
            "120s",
        ])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start psp serve");
    let mut lines = BufReader::new(server.stderr.take().unwrap()).lines();
    let first = lines.next().expect("a listening line").unwrap();
    let addr = first
        .split_whitespace()
        .find_map(|w| w.strip_prefix("udp://"))
        .unwrap_or_else(|| panic!("no address in '{first}'"))
        .to_string();
    // Keep draining stderr so the server never blocks on it.
    std::thread::spawn(move || for _ in lines {});
    (server, addr)
}

/// SIGINT, then the server's JSON summary.
fn stop(server: Child) -> serde_json::Value {
    let kill = Command::new("kill")
        .args(["-INT", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = server.wait_with_output().unwrap();
    json_of(&out)
}

#[test]
fn a_measured_kv_profile_drives_run_serve_and_load() {
    let dir = scratch("kv");
    let file = dir.join("kv.toml");
    let file = file.to_str().unwrap();
    let out = psp(&[
        "profile",
        "--app",
        "kv",
        "--kv-keys",
        "300",
        "--requests",
        "200",
        "--out",
        file,
        "--json",
    ]);
    let prof = json_of(&out);
    assert_eq!(prof["types"].as_array().unwrap().len(), 2, "{prof}");
    let text = std::fs::read_to_string(file).unwrap();
    assert!(
        text.contains("app = \"kv\"") && text.contains("lognormal"),
        "{text}"
    );
    // What the measurement depends on travels with it: no --kv-keys below.
    assert!(text.contains("kv_keys = 300"), "{text}");

    // psp run: the application comes from the workload file.
    let point = json_of(&psp(&[
        "run",
        "--workload",
        file,
        "--workers",
        "2",
        "--rps",
        "300",
        "--duration",
        "300ms",
        "--policy",
        "darc:samples=50",
        "--json",
    ]));
    assert_eq!(
        point["extra"]["completed_total"],
        point["extra"]["generated_total"]
    );
    assert_eq!(point["extra"]["bad_bodies"], 0);
    assert_eq!(point["extra"]["handler_errors"], 0);
    assert!(
        point["extra"]["app"].as_str().unwrap().contains("RocksDB"),
        "{point}"
    );

    let (server, addr) = serve(&["--workload", file, "--workers", "2", "--policy", "c-fcfs"]);
    let point = json_of(&psp(&[
        "load",
        "--server",
        &addr,
        "--workload",
        file,
        "--workers",
        "2",
        "--rps",
        "300",
        "--duration",
        "400ms",
        "--timeout",
        "5s",
        "--json",
    ]));
    assert_eq!(point["timeouts"], 0, "{point}");
    assert_eq!(point["errors"], 0, "{point}");
    let summary = stop(server);
    assert_eq!(summary["bad_bodies"], 0, "{summary}");
    assert_eq!(summary["stranded"], 0, "{summary}");
    assert!(summary["completed"].as_u64().unwrap() > 50, "{summary}");
    // The server's own CPU time, per request it completed.
    let cpu = summary["cpu_us_per_request"]
        .as_f64()
        .expect("CPU per request");
    assert!(cpu > 0.0 && cpu.is_finite(), "{summary}");
}

#[test]
fn tpcc_through_serve_and_load_ends_consistent() {
    let (server, addr) = serve(&[
        "--app",
        "tpcc",
        "--workload",
        "tpcc",
        "--workers",
        "2",
        "--policy",
        "darc:samples=100",
    ]);
    let point = json_of(&psp(&[
        "load",
        "--server",
        &addr,
        "--app",
        "tpcc",
        "--workload",
        "tpcc",
        "--workers",
        "2",
        "--rps",
        "2000",
        "--duration",
        "400ms",
        "--timeout",
        "5s",
        "--json",
    ]));
    assert_eq!(point["timeouts"], 0, "{point}");
    assert_eq!(point["errors"], 0, "{point}");
    let summary = stop(server);
    let check = summary["app_check"].as_str().unwrap_or_default();
    assert!(check.contains("consistency conditions hold"), "{summary}");
}

#[test]
fn bad_application_options_are_one_line_errors() {
    let dir = scratch("bad");
    let for_tpcc = dir.join("for-tpcc.toml");
    std::fs::write(
        &for_tpcc,
        "name = \"t\"\napp = \"tpcc\"\n[[types]]\nname = \"Payment\"\nratio = 1\nservice = { dist = \"fixed\", us = 1 }\n",
    )
    .unwrap();
    let for_tpcc = for_tpcc.to_str().unwrap();
    let for_redis = dir.join("for-redis.toml");
    std::fs::write(
        &for_redis,
        "name = \"r\"\napp = \"redis\"\n[[types]]\nname = \"GET\"\nratio = 1\nservice = { dist = \"fixed\", us = 1 }\n",
    )
    .unwrap();
    let for_redis = for_redis.to_str().unwrap();
    let run = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "run",
            "--workers",
            "1",
            "--rps",
            "100",
            "--duration",
            "10ms",
        ]
        .map(String::from)
        .to_vec();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            run(&["--workload", for_redis]),
            "workload 'r' is for app 'redis'",
        ),
        (
            vec![
                "profile".into(),
                "--app".into(),
                "kv".into(),
                "--requests".into(),
                "99999999999".into(),
            ],
            "--requests",
        ),
        (
            run(&["--app", "kv", "--workload", "rocksdb", "--kv-max-scan", "0"]),
            "--kv-max-scan",
        ),
        (run(&["--app", "redis"]), "--app"),
        (
            run(&["--app", "kv", "--workload", "rocksdb", "--kv-keys", "0"]),
            "--kv-keys",
        ),
        (
            run(&[
                "--app",
                "kv",
                "--workload",
                "rocksdb",
                "--kv-value-bytes",
                "999",
            ]),
            "--kv-value-bytes",
        ),
        (
            run(&[
                "--app",
                "tpcc",
                "--workload",
                "tpcc",
                "--tpcc-warehouses",
                "0",
            ]),
            "--tpcc-warehouses",
        ),
        (run(&["--app", "tpcc", "--workload", "rocksdb"]), "GET"),
        (run(&["--app", "kv", "--workload", "tpcc"]), "Payment"),
        (
            run(&["--app", "kv", "--workload", for_tpcc]),
            "for app tpcc",
        ),
        (
            run(&[
                "--app",
                "kv",
                "--workload",
                "rocksdb",
                "--kv-path",
                "/proc/psp-no-db-here",
            ]),
            "/proc/psp-no-db-here",
        ),
        (vec!["profile".into()], "--app"),
        (
            vec!["profile".into(), "--app".into(), "spin".into()],
            "--workload",
        ),
        (
            vec![
                "profile".into(),
                "--app".into(),
                "kv".into(),
                "--requests".into(),
                "0".into(),
            ],
            "--requests",
        ),
        (
            vec![
                "serve".into(),
                "--app".into(),
                "kv".into(),
                "--workload".into(),
                "rocksdb".into(),
                "--kv-path".into(),
                "/proc/psp-no-db-here".into(),
            ],
            "/proc/psp-no-db-here",
        ),
    ];
    for (args, needle) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_one_line_error(&args, needle);
    }
}
