//! `psp load --server-profile`: against a `psp serve --metrics` on loopback,
//! bad profiles (nothing listening, not Prometheus text, another server's
//! types, with --rps) are one-line errors that send nothing; a server that has
//! measured nothing leaves every type at its declared mean; after that run
//! warmed it up, the next one's rate is the one the server's measured means
//! give, and its report says so.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};

use crate::common;

use common::{assert_one_line_error, psp};

/// `psp serve` of high-bimodal on one worker with its metrics on; returns it,
/// its UDP address and its metrics address.
fn serve() -> (Child, String, String) {
    let mut server = Command::new(env!("CARGO_BIN_EXE_psp"))
        .args([
            "serve",
            "--address",
            "127.0.0.1:0",
            "--metrics",
            "127.0.0.1:0",
            "--workload",
            "high-bimodal",
            "--workers",
            "1",
            "--idle",
            "park",
            "--policy",
            "c-fcfs",
            "--no-raise-priority",
            "--duration",
            "60s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start psp serve");
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a listening line").unwrap();
    let word = |prefix: &str| {
        first
            .split_whitespace()
            .find_map(|w| w.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in '{first}'"))
            .to_string()
    };
    let addr = word("udp://");
    let metrics = word("http://").trim_end_matches("/metrics").to_string();
    std::thread::spawn(move || for _ in lines {});
    (server, addr, metrics)
}

/// An HTTP server that answers every request with a page that is not
/// Prometheus text.
fn not_prometheus() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for mut s in listener.incoming().map_while(Result::ok) {
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let body = "<html>hello</html>\n";
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    addr
}

/// `psp load` of high-bimodal on one worker at `--load 0.3` with `extra` args.
fn load(addr: &str, duration: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "load",
        "--server",
        addr,
        "--workload",
        "high-bimodal",
        "--workers",
        "1",
        "--load",
        "0.3",
        "--duration",
        duration,
        "--json",
    ];
    args.extend(extra);
    psp(&args)
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The one stderr line of the server profile.
fn profile_line(out: &std::process::Output) -> String {
    assert_eq!(out.status.code(), Some(0), "{}", stderr(out));
    let err = stderr(out);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("server profile"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    lines[0].to_string()
}

#[test]
fn load_is_rated_by_the_servers_measured_means() {
    let (server, addr, metrics) = serve();
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let html = not_prometheus();
    let base = [
        "load",
        "--server",
        &addr,
        "--workload",
        "high-bimodal",
        "--workers",
        "1",
        "--duration",
        "100ms",
    ];
    for (extra, needle) in [
        (
            vec!["--server-profile", &closed],
            "--server-profile: cannot fetch",
        ),
        (
            vec!["--server-profile", "nowhere"],
            "--server-profile: 'nowhere'",
        ),
        (vec!["--server-profile", &html], "not Prometheus text"),
        (
            vec!["--server-profile", &metrics, "--rps", "100"],
            "cannot be used with",
        ),
    ] {
        let args: Vec<&str> = base.iter().copied().chain(extra).collect();
        assert_one_line_error(&args, needle);
    }
    let mut fixed: Vec<&str> = base.to_vec();
    fixed[4] = "fixed";
    fixed.extend(["--server-profile", &metrics]);
    assert_one_line_error(
        &fixed,
        "serves the types [short, long], workload 'fixed' has [req]",
    );

    // Nothing measured yet (the errors above sent nothing): the declared
    // means, and the same rate as without the flag. This run warms the
    // server up.
    let out = load(&addr, "600ms", &["--server-profile", &metrics]);
    let line = profile_line(&out);
    for t in ["short declared 1.00 us", "long declared 100.00 us"] {
        assert!(
            line.contains(&format!(
                "{t}, server-measured none over 0 requests, using the declared"
            )),
            "{line}"
        );
    }
    let cold: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let declared_rps = 0.3 / 50.5e-6;
    let rps = cold["offered_rps"].as_f64().unwrap();
    assert!((rps / declared_rps - 1.0).abs() < 1e-9, "{rps}");
    assert!(cold["overall"]["count"].as_u64().unwrap() > 500, "{cold}");

    // Warmed up: both types measured, the rate by the measured means.
    let out = load(&addr, "1s", &["--server-profile", &metrics]);
    let line = profile_line(&out);
    assert!(
        line.contains(&format!("server profile (http://{metrics}/metrics)")),
        "{line}"
    );
    let point: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let means = point["extra"]["rate_means"].as_array().expect("rate_means");
    let since_start: Vec<u64> = means
        .iter()
        .map(|m| m["server_requests"].as_u64().unwrap())
        .collect();
    let mut mean_us = 0.0;
    for (m, name) in means.iter().zip(["short", "long"]) {
        assert_eq!(m["name"], name);
        assert_eq!(m["used"], "server", "{m}");
        assert!(m["server_requests"].as_u64().unwrap() >= 100, "{m}");
        let us = m["server_us"].as_f64().unwrap();
        assert!(
            line.contains(&format!("{name} declared"))
                && line.contains(&format!("server-measured {us:.2} us")),
            "{line}"
        );
        mean_us += 0.5 * us;
    }
    assert!(
        line.contains("using the server's") && !line.contains("using the declared"),
        "{line}"
    );
    let rps = point["offered_rps"].as_f64().unwrap();
    let want = 0.3 / (mean_us * 1e-6);
    // The JSON's figures are rounded to 1e-9 relative at worst.
    assert!(
        (rps / want - 1.0).abs() < 1e-6,
        "offered {rps}, want {want}"
    );
    assert!(
        (point["load"].as_f64().unwrap() - 0.3).abs() < 1e-9,
        "{point}"
    );
    // --calibrate: a run first, and the means of that run alone.
    let out = load(
        &addr,
        "300ms",
        &["--server-profile", &metrics, "--calibrate", "300ms"],
    );
    let err = stderr(&out);
    assert!(err.contains("calibrating:"), "{err}");
    let point: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let means = point["extra"]["rate_means"].as_array().expect("rate_means");
    // The calibration run's requests only (300 ms of them): fewer than the
    // server had measured since its start before the 1 s run above.
    for (m, &total) in means.iter().zip(&since_start) {
        let n = m["server_requests"].as_u64().unwrap();
        assert!(n > 0 && n < total, "{m}: since the start {total}");
    }
    assert!(
        (point["load"].as_f64().unwrap() - 0.3).abs() < 1e-9,
        "{point}"
    );
    for (args, needle) in [
        (vec!["--calibrate", "1s"], "--server-profile"),
        (
            vec!["--server-profile", metrics.as_str(), "--calibrate", "1ms"],
            "--calibrate",
        ),
    ] {
        let out = load(&addr, "100ms", &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }

    // Without the flag, the report holds no means.
    let plain = load(&addr, "100ms", &[]);
    let plain: serde_json::Value = serde_json::from_slice(&plain.stdout).unwrap();
    assert!(plain["extra"].get("rate_means").is_none(), "{plain}");

    let kill = Command::new("kill")
        .args(["-INT", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = server.wait_with_output().unwrap().status;
    assert_eq!(status.code(), Some(0));
}
