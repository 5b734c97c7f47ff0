//! Black-box tests of the `psp` binary: bad input is answered with one line and
//! exit code 2; JSON output is the schema's, alone on stdout.

use crate::common;

use std::process::{Command, Output};

use common::{assert_one_line_error, json_of, psp};

#[test]
fn bad_input_is_one_line_and_exit_code_2() {
    let dir = std::env::temp_dir().join(format!("psp-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let malformed = dir.join("bad.toml");
    std::fs::write(
        &malformed,
        "name = \"x\"\n[[types]]\nname = \"a\"\nratio = 1\nservice = { dist = \"fixed\" }\n",
    )
    .unwrap();
    let malformed = malformed.to_str().unwrap();
    let not_a_sweep = dir.join("x.json");
    std::fs::write(&not_a_sweep, "{\"a\": 1}").unwrap();
    let not_a_sweep = not_a_sweep.to_str().unwrap();

    for (args, needle) in [
        (vec!["sim", "--workload", "nope"], "unknown workload 'nope'"),
        (
            vec!["sim", "--workload", "/no/such/file.toml"],
            "/no/such/file.toml",
        ),
        (vec!["sim", "--workload", malformed], "malformed workload"),
        (vec!["sim", "--policy", "fifo"], "unknown policy 'fifo'"),
        (vec!["sim", "--policy", "darc:delta=x"], "delta"),
        (vec!["sim", "--load", "0"], "--load"),
        (vec!["sim", "--load", "-0.5"], "--load"),
        (vec!["sim", "--rps", "0"], "--rps"),
        (vec!["sim", "--duration", "0s"], "duration"),
        (vec!["sim", "--duration", "-1s"], "duration"),
        (vec!["sim", "--duration", "soon"], "duration"),
        (vec!["sim", "--workers", "0"], "workers"),
        (vec!["sim", "--workers", "1000"], "workers"),
        (
            vec!["sim", "--policy", "darc-static:16", "--workers", "16"],
            "leaves none",
        ),
        (
            vec!["sweep", "--policies", "c-fcfs,bogus", "--loads", "0.5"],
            "unknown policy 'bogus'",
        ),
        (vec!["sweep", "--loads", "0:1:0.5"], "loads"),
        (vec!["sweep", "--loads", "-1,0.5"], "loads"),
        (
            vec!["sweep", "--mode", "net", "--policies", "tq:quantum=0.5"],
            "shorter than the runtime can honour",
        ),
        (vec!["run", "--idle", "sleepy"], "idle strategy"),
        (
            vec![
                "sweep",
                "--loads",
                "0.5",
                "--run-point",
                "4",
                "--points-dir",
                "/tmp",
            ],
            "--run-point must be in [0, 3] for this sweep, not 4",
        ),
        (
            vec!["serve", "--poll-yield", "sometimes"],
            "--poll-yield: poll yield must be auto, on or off, not 'sometimes'",
        ),
        (vec!["run", "--cores", "a-b"], "--cores"),
        (
            vec!["run", "--classifier", "psychic", "--duration", "10ms"],
            "classifier",
        ),
        (vec!["run", "--workload", "nope"], "unknown workload"),
        (vec!["run", "--load", "0"], "--load"),
        (vec!["sweep", "--slo-slowdown", "0.5"], "slo"),
        (vec!["plot", not_a_sweep], "not a sweep result"),
        (vec!["plot", "/no/such.json"], "cannot read"),
    ] {
        assert_one_line_error(&args, needle);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sim_json_is_one_document_with_the_schema_fields() {
    let out = psp(&[
        "sim",
        "--workload",
        "high-bimodal",
        "--workers",
        "4",
        "--policy",
        "darc:samples=1000",
        "--load",
        "0.7",
        "--duration",
        "50ms",
        "--json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    for key in [
        "mode",
        "workload",
        "policy",
        "workers",
        "offered_rps",
        "achieved_rps",
        "duration_s",
        "overall",
        "types",
        "dropped",
        "shed",
        "timeouts",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    for key in ["count", "p50_slowdown", "p99_slowdown", "p999_slowdown"] {
        assert!(v["overall"].get(key).is_some(), "missing overall.{key}");
    }
    for key in [
        "name",
        "count",
        "mean_service_us",
        "p50_latency_us",
        "p99_latency_us",
        "p999_latency_us",
        "p999_slowdown",
        "dropped",
    ] {
        assert!(v["types"][0].get(key).is_some(), "missing types[].{key}");
    }
    assert_eq!(v["mode"], "sim");
    assert_eq!(v["policy"], "darc:samples=1000");
    assert!(v["overall"]["count"].as_u64().unwrap() > 1000);
}

#[test]
fn sweep_finds_sustainable_throughput_writes_json_and_plot() {
    let dir = std::env::temp_dir().join(format!("psp-sweep-test-{}", std::process::id()));
    let out_json = dir.join("s.json");
    let out = psp(&[
        "sweep",
        "--workload",
        "high-bimodal",
        "--workers",
        "4",
        "--policies",
        "c-fcfs,darc:samples=1000,delay=1",
        "--loads",
        "0.2,0.5,0.95",
        "--duration",
        "20ms",
        "--refine",
        "1",
        "--threads",
        "2",
        "--out",
        out_json.to_str().unwrap(),
        "--json",
    ]);
    let v = json_of(&out);
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out_json).unwrap()).unwrap();
    assert_eq!(v, saved);
    let policies = v["policies"].as_array().unwrap();
    assert_eq!(policies.len(), 2);
    assert_eq!(policies[1]["policy"], "darc:samples=1000,delay=1");
    for p in policies {
        assert!(p["points"].as_array().unwrap().len() >= 3);
        assert!(p.get("max_rps_within_slo").is_some());
    }
    assert_eq!(v["slo"]["per_type_p999_slowdown"], 10.0);
    assert!(dir.join("s.svg").is_file() && dir.join("s.png").is_file());
    // And psp plot redraws it elsewhere.
    let stem = dir.join("again");
    let out = psp(&[
        "plot",
        out_json.to_str().unwrap(),
        "--out",
        stem.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.join("again.svg").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A sweep split into point commands (as a batch engine would run them, in
/// any order) and merged gives the very sweep that one process gives.
#[test]
fn a_split_sweep_merges_into_the_same_sweep() {
    let dir = std::env::temp_dir().join(format!("psp-split-test-{}", std::process::id()));
    let points = dir.join("points");
    let sweep = |extra: &[&str], out: &std::path::Path| -> Output {
        let mut args = vec![
            "sweep",
            "--workload",
            "high-bimodal",
            "--workers",
            "4",
            "--policies",
            "c-fcfs,darc:samples=1000,delay=1",
            "--loads",
            "0.2,0.5,0.95",
            "--duration",
            "20ms",
            "--refine",
            "2",
            "--slo-slowdown",
            "100",
            "--threads",
            "2",
            "--no-plot",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        psp(&args)
    };
    let whole = dir.join("whole.json");
    let out = sweep(&[], &whole);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Emit: one command per grid point (2 policies x 3 loads), on stdout and in
    // points.txt, running nothing.
    let merged = dir.join("merged.json");
    let out = sweep(&["--emit-points", points.to_str().unwrap()], &merged);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        listed,
        std::fs::read_to_string(points.join("points.txt")).unwrap()
    );
    let commands: Vec<&str> = listed.lines().collect();
    assert_eq!(commands.len(), 6);
    assert!(!merged.exists());
    // With --json: one document, the same commands.
    let out = sweep(
        &["--emit-points", points.to_str().unwrap(), "--json"],
        &merged,
    );
    let v = json_of(&out);
    let listed_json: Vec<&str> = v["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(listed_json.len(), 6);
    for (a, b) in listed_json.iter().zip(&commands) {
        // The same command, carrying the sweep's --json along.
        assert_eq!(a.replace(" --json", ""), *b);
    }
    // Merging before every point ran names the missing one.
    let out = sweep(&["--merge", points.to_str().unwrap()], &merged);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--run-point 0"));
    // Run the points, last first, each as its command says.
    for (i, line) in commands.iter().enumerate().rev() {
        let words: Vec<&str> = line.split(' ').collect();
        assert_eq!(words[0], "psp");
        assert!(line.ends_with(&format!(
            "--run-point {i} --points-dir {}",
            points.display()
        )));
        let out = psp(&words[1..]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(points.join(format!("point-{i}.json")).is_file());
    }
    let out = sweep(&["--merge", points.to_str().unwrap()], &merged);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Equal but for the wall-clock time each point took.
    let read = |p: &std::path::Path| -> serde_json::Value {
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        for policy in v["policies"].as_array_mut().unwrap() {
            for point in policy["points"].as_array_mut().unwrap() {
                let extra = point["extra"].as_object_mut().unwrap();
                assert!(extra.remove("wall_s").is_some());
                assert!(extra.remove("sim_requests_per_s").is_some());
            }
        }
        v
    };
    let (whole, merged_sweep) = (read(&whole), read(&merged));
    assert_eq!(whole, merged_sweep);
    // Bisection ran in the merge step: points beyond the grid, and a
    // sustainable throughput found.
    for policy in whole["policies"].as_array().unwrap() {
        assert_eq!(policy["points"].as_array().unwrap().len(), 5);
        assert!(policy["max_rps_within_slo"].as_f64().unwrap() > 0.0);
    }
    // A point of another sweep is refused.
    let out = psp(&[
        "sweep",
        "--workload",
        "high-bimodal",
        "--workers",
        "4",
        "--policies",
        "c-fcfs,darc:samples=1000,delay=1",
        "--loads",
        "0.2,0.6,0.95",
        "--duration",
        "20ms",
        "--no-plot",
        "--out",
        merged.to_str().unwrap(),
        "--merge",
        points.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("split from the same sweep"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_json_is_the_point_schema_and_conserves_requests() {
    let out = psp(&[
        "run",
        "--workload",
        "balanced-bimodal-x1000",
        "--workers",
        "2",
        "--policy",
        "darc:samples=100",
        "--load",
        "0.3",
        "--duration",
        "300ms",
        "--compare-sim",
        "--json",
    ]);
    let v = json_of(&out);
    assert_eq!(v["mode"], "run");
    for key in [
        "offered_rps",
        "achieved_rps",
        "overall",
        "types",
        "dropped",
        "shed",
        "timeouts",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    let x = &v["extra"];
    let n = |k: &str| x[k].as_u64().unwrap_or_else(|| panic!("{k}"));
    assert!(n("generated_total") > 50);
    assert_eq!(n("generated_total"), n("completed_total") + n("shed_total"));
    assert_eq!(n("stranded"), 0);
    assert_eq!(x["sim_prediction"]["mode"], "sim");
}

#[test]
fn net_commands_answer_bad_input_in_one_line() {
    let dir = std::env::temp_dir().join(format!("psp-cli-net-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad_key = dir.join("serve.toml");
    std::fs::write(&bad_key, "policy = \"darc\"\nwokers = 2\n").unwrap();
    let bad_key = bad_key.to_str().unwrap();
    let taken = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    for (args, needle) in [
        (vec!["serve", "--address", &taken], "in use"),
        (vec!["serve", "--datapath", "dpdk"], "--datapath"),
        (vec!["serve", "--address", "nowhere"], "--address"),
        (vec!["serve", "--app", "redis"], "--app"),
        (vec!["serve", "--config", bad_key], "wokers"),
        (
            vec!["serve", "--config", "/nonexistent/x.toml"],
            "cannot read",
        ),
        (vec!["load", "--server", "::bad::"], "--server"),
        (vec!["load", "--rps", "100", "--flows", "0"], "--flows"),
        (vec!["load", "--rps", "100", "--timeout", "0s"], "--timeout"),
        (
            vec!["sweep", "--mode", "sim", "--server", "127.0.0.1:1"],
            "--mode net",
        ),
        (vec!["netbench", "--rates", "1000,fast"], "--rates"),
        (
            vec![
                "sweep",
                "--mode",
                "net",
                "--policies",
                "darc",
                "--idle",
                "nap",
            ],
            "idle strategy",
        ),
        (
            vec![
                "sweep",
                "--mode",
                "run",
                "--policies",
                "darc",
                "--cores",
                "0-x",
            ],
            "--cores",
        ),
    ] {
        assert_one_line_error(&args, needle);
    }
}

/// `psp serve --metrics`: an address that is not one, or one in use, is a
/// one-line error before anything is served (from the flag or the `--config`
/// file); port 0 is accepted, the start line names the bound address, the flag
/// wins over the file, and `/metrics` answers there until SIGINT.
#[test]
fn serve_metrics_address_is_checked_and_served() {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::process::Stdio;
    let dir = std::env::temp_dir().join(format!("psp-cli-metrics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("serve.toml");
    std::fs::write(&bad, "metrics = \"nowhere\"\n").unwrap();
    let bad = bad.to_str().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    let serve = ["serve", "--address", "127.0.0.1:0", "--duration", "60s"];
    for (extra, needle) in [
        (
            vec!["--metrics", "nowhere"],
            "--metrics: 'nowhere' is not an address",
        ),
        (vec!["--metrics", &taken], "in use"),
        (vec!["--metrics", &taken], "cannot serve metrics"),
        (vec!["--config", bad], "serve.toml"),
        (vec!["--config", bad], "--metrics"),
    ] {
        let args: Vec<&str> = serve.iter().copied().chain(extra).collect();
        assert_one_line_error(&args, needle);
    }

    let mut server = Command::new(env!("CARGO_BIN_EXE_psp"))
        .args(serve)
        .args([
            "--workload",
            "fixed",
            "--workers",
            "1",
            "--policy",
            "c-fcfs",
        ])
        .args(["--config", bad, "--metrics", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start psp serve");
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a listening line").unwrap();
    let metrics = common::metrics_address(&first);
    assert!(!metrics.ends_with(":0"), "the bound port, not 0: {first}");
    let mut http = std::net::TcpStream::connect(&metrics).expect("the metrics listener");
    http.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    write!(
        http,
        "GET /metrics HTTP/1.1\r\nHost: {metrics}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    http.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(
        response.contains("psp_requests_arrived_total{type=\"req\"} 0"),
        "{response}"
    );
    let kill = Command::new("kill")
        .args(["-INT", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = server.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(
        std::net::TcpStream::connect(&metrics).is_err(),
        "the metrics listener outlived psp serve"
    );
}

/// `psp serve` prints where it listens, `psp load` measures it as a JSON point,
/// and SIGINT drains the server, which prints its summary and exits 0.
#[test]
fn serve_then_load_then_sigint() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut server = Command::new(env!("CARGO_BIN_EXE_psp"))
        .args([
            "serve",
            "--address",
            "127.0.0.1:0",
            "--workload",
            "fixed",
            "--workers",
            "1",
            "--policy",
            "c-fcfs",
            "--duration",
            "60s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start psp serve");
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a listening line").unwrap();
    let addr = first
        .split_whitespace()
        .find_map(|w| w.strip_prefix("udp://"))
        .unwrap_or_else(|| panic!("no address in '{first}'"))
        .to_string();
    let load = |more: &[&str]| {
        let mut args = vec![
            "load",
            "--server",
            &addr,
            "--workload",
            "fixed",
            "--workers",
            "1",
            "--rps",
            "2000",
            "--timeout",
            "500ms",
            "--json",
        ];
        args.extend_from_slice(more);
        psp(&args)
    };
    let out = load(&["--duration", "500ms", "--policy", "c-fcfs"]);
    let point = json_of(&out);
    assert_eq!(point["mode"], "net");
    assert_eq!(point["policy"], "c-fcfs");
    assert_eq!(point["timeouts"], 0);
    assert!(point["overall"]["count"].as_u64().unwrap() > 500, "{point}");
    for key in ["timeouts", "errors", "dropped"] {
        assert!(
            point["types"][0].get(key).is_some(),
            "types[].{key} missing"
        );
    }
    // Without --policy (and no --server-profile), the report says so.
    let out = load(&["--duration", "200ms"]);
    assert_eq!(json_of(&out)["policy"], "not given (--policy)");
    let kill = Command::new("kill")
        .args(["-INT", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = server.wait().unwrap();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert_eq!(status.code(), Some(0), "{rest:?}");
    let summary = rest.join("\n");
    assert!(summary.contains("completed"), "{summary}");
    assert!(summary.contains("server-side latency"), "{summary}");
}

/// The example configuration file parses and runs (flags override it), and the
/// summary is one JSON document.
#[test]
fn the_example_serve_config_runs() {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/../../configs/serve.toml");
    let v = json_of(&psp(&[
        "serve",
        "--config",
        config,
        "--address",
        "127.0.0.1:0",
        "--duration",
        "200ms",
        "--json",
    ]));
    assert_eq!(v["received"], 0);
    assert_eq!(v["served_per_worker"].as_array().map(Vec::len), Some(2));
}

/// The `--config` file takes the `--tcp-*` and `--xdp-*` settings by their
/// flags' names too: checked as the flags are (the error names the file),
/// and used.
#[test]
fn serve_config_takes_the_tcp_and_xdp_settings() {
    let dir = std::env::temp_dir().join(format!("psp-cli-groups-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let tcp_bad = file(
        "tcp-bad.toml",
        "protocol = \"resp\"\ntcp_max_connections = 0\n",
    );
    let xdp_udp = file("xdp-udp.toml", "xdp_ring = 64\n");
    for (config, needle) in [
        (&tcp_bad, "--tcp-max-connections must be in"),
        (&tcp_bad, "tcp-bad.toml"),
        (&xdp_udp, "--xdp-* options need --datapath xdp"),
        (&xdp_udp, "xdp-udp.toml"),
    ] {
        assert_one_line_error(
            &["serve", "--address", "127.0.0.1:0", "--config", config],
            needle,
        );
    }
    let tcp = file(
        "tcp.toml",
        "protocol = \"resp\"\ntcp_max_connections = 8\ntcp_order = \"replies\"\ntcp_idle_timeout = \"5s\"\n",
    );
    let out = psp(&[
        "serve",
        "--config",
        &tcp,
        "--address",
        "127.0.0.1:0",
        "--duration",
        "200ms",
        "--json",
    ]);
    let v = json_of(&out);
    assert!(v["tcp"].is_object(), "{v}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("listening on tcp://"), "{stderr}");
}

/// A workload whose declared service times are far from what the
/// application takes (200 µs declared, echo answers in about a microsecond)
/// is named in a warning pointing at `psp profile`, the point carries the
/// measured utilization beside the declared one, and the statistics lines
/// the measured one.
#[test]
fn run_reports_measured_utilization_and_warns_of_declared_times_off() {
    let dir = std::env::temp_dir().join(format!("psp-cli-util-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let w = dir.join("slow.toml");
    std::fs::write(
        &w,
        "name = \"slow\"\n[[types]]\nname = \"a\"\nratio = 1\nservice = { dist = \"fixed\", us = 200 }\n",
    )
    .unwrap();
    let out = psp(&[
        "run",
        "--workload",
        w.to_str().unwrap(),
        "--app",
        "echo",
        "--workers",
        "1",
        "--policy",
        "c-fcfs",
        "--load",
        "0.1",
        "--duration",
        "500ms",
        "--stats-interval",
        "100ms",
        "--stats-json",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let point = json_of(&out);
    let e = &point["extra"];
    let (measured, declared) = (
        e["measured_utilization"].as_f64().expect("measured"),
        e["declared_utilization"].as_f64().expect("declared"),
    );
    // 250 requests declared at 200 µs each; echo takes far less.
    assert!(declared > 0.0 && measured < declared / 1.5, "{e}");
    assert_eq!(e["completed_by_type"][0], e["completed_total"], "{e}");
    assert!(
        stderr.contains("more than 1.5x off") && stderr.contains("psp profile"),
        "{stderr}"
    );
    // Each statistics line: the workers' utilization over its interval.
    assert!(stderr.contains("\"utilization\":"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// More busy threads than cores with a shortest type of a few
/// microseconds is said to measure the machine; a scaled workload is not.
#[test]
fn run_says_when_it_measures_the_machine() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = cores.min(128).to_string();
    let run = |workload: &str| {
        let out = psp(&[
            "run",
            "--workload",
            workload,
            "--workers",
            &workers,
            "--policy",
            "c-fcfs",
            "--load",
            "0.001",
            "--duration",
            "10ms",
            "--json",
        ]);
        let _ = json_of(&out);
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let stderr = run("extreme-bimodal");
    assert!(
        stderr.contains("measures the machine, not the policy")
            && stderr.contains("scaled workload"),
        "{stderr}"
    );
    let stderr = run("extreme-bimodal-x1000");
    assert!(!stderr.contains("measures the machine"), "{stderr}");
}

/// The subcommands `psp --help` lists, read from its "Commands:" block.
fn subcommands() -> Vec<String> {
    let help = String::from_utf8(psp(&["--help"]).stdout).unwrap();
    let block = help.split("Commands:").nth(1).expect("a Commands: block");
    let names: Vec<String> = block
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(str::to_string)
        .collect();
    assert!(
        names.len() >= 15,
        "too few subcommands in --help: {names:?}"
    );
    names
}

#[test]
fn completions_know_every_subcommand_and_parse_in_bash() {
    let names = subcommands();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = psp(&["completions", shell]);
        assert!(out.status.success(), "completions {shell}: {out:?}");
        let script = String::from_utf8(out.stdout).unwrap();
        for name in &names {
            assert!(
                script.contains(name.as_str()),
                "{shell} completion lacks {name}"
            );
        }
        if shell == "bash" && Command::new("bash").arg("--version").output().is_ok() {
            // The script must at least be valid bash.
            let path = std::env::temp_dir().join(format!("psp-compl-{}.bash", std::process::id()));
            std::fs::write(&path, &script).unwrap();
            let check = Command::new("bash").arg("-n").arg(&path).output().unwrap();
            std::fs::remove_file(&path).ok();
            assert!(check.status.success(), "bash -n: {check:?}");
        }
    }
    assert_one_line_error(&["completions", "nosh"], "invalid value 'nosh'");
}

#[test]
fn man_page_has_a_section_per_subcommand_with_its_flags() {
    let out = psp(&["man"]);
    assert!(out.status.success(), "{out:?}");
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(
        page.starts_with(".ie") || page.contains(".TH psp 1"),
        "not roff: {}",
        &page[..200.min(page.len())]
    );
    for name in subcommands() {
        let title = format!(".SH \"PSP {}\"", name.to_uppercase());
        assert!(page.contains(&title), "man page lacks {title}");
    }
    // A flag of a subcommand, not only its name, is in the page.
    assert!(page.contains("\\-\\-metrics"), "serve's --metrics missing");
}

/// `psp load` against an address where nothing answers: the report still
/// prints (every request a timeout), and the run fails with one line saying
/// why, so that a script does not take it for a result.
#[test]
fn load_against_nothing_fails_after_its_report() {
    let dead = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = dead.local_addr().unwrap().to_string();
    drop(dead);
    let out = common::psp(&[
        "load",
        "--server",
        &addr,
        "--rps",
        "200",
        "--duration",
        "200ms",
        "--timeout",
        "100ms",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no response at all"), "{stderr}");
    let point: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the report");
    assert!(point["timeouts"].as_u64().unwrap() > 0, "{point}");
}

/// No option's help states its default twice (clap adds `[default: ...]`
/// itself), in any subcommand, the list read from `psp --help`.
#[test]
fn no_help_text_states_a_default_twice() {
    let top = String::from_utf8(common::psp(&["--help"]).stdout).unwrap();
    let subcommands: Vec<&str> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|s| *s != "help")
        .collect();
    assert!(subcommands.contains(&"netbench"), "{top}");
    for sub in subcommands {
        let help = String::from_utf8(common::psp(&[sub, "--help"]).stdout).unwrap();
        // Wrapped lines joined: two defaults one after the other.
        let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            !flat.contains("] [default:"),
            "psp {sub} --help states a default twice: {help}"
        );
    }
}

/// DARC ending a run before its first profiling window filled (no
/// reservation, c-FCFS throughout) is said, by `psp sim` and `psp sweep`;
/// a run long enough to reserve is not warned about.
#[test]
fn darc_still_warming_up_at_the_end_is_warned_about() {
    let sim = |duration: &str, rps: &str| {
        let out = common::psp(&[
            "sim",
            "--workload",
            "extreme-bimodal",
            "--workers",
            "16",
            "--policy",
            "darc",
            "--rps",
            rps,
            "--duration",
            duration,
        ]);
        assert!(out.status.success());
        String::from_utf8(out.stderr).unwrap()
    };
    let short = sim("2ms", "1e5");
    assert!(
        short.contains("darc made no reservation in this run"),
        "{short}"
    );
    assert!(short.contains("darc:samples="), "{short}");
    let long = sim("100ms", "5.1e6");
    assert!(!long.contains("no reservation"), "{long}");
    let dir = std::env::temp_dir().join(format!("psp-warmup-sweep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out_json = dir.join("sweep.json");
    let out = common::psp(&[
        "sweep",
        "--mode",
        "sim",
        "--workload",
        "extreme-bimodal",
        "--workers",
        "16",
        "--policies",
        "c-fcfs,darc",
        "--duration",
        "2ms",
        "--out",
        out_json.to_str().unwrap(),
        "--no-plot",
    ]);
    std::fs::remove_dir_all(&dir).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("darc made no reservation in"), "{stderr}");
    assert!(!stderr.contains("c-fcfs made no"), "{stderr}");
}
