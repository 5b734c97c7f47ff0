//! `psp serve --datapath xdp` as a user runs it: in a network namespace made
//! by scripts/netns.sh, flooded by `psp load --datapath xdp` at the highest
//! rate the client can send (300,000 requests a second are scheduled, more
//! than a test build sends on 2 cores: each flood sends them late, in about
//! 2 s), then stopped with SIGTERM during a second flood:
//! it drains, exits 0, accounts for every frame, holds its memory, and leaves
//! no XDP program behind. Also the flags' one-line errors. Needs root (CI
//! runs as root); without it the namespace test says so and passes.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{assert_one_line_error, json_of, psp};

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/netns.sh")
}

struct Topology(String);

impl Drop for Topology {
    fn drop(&mut self) {
        let _ = Command::new(script())
            .args(["down", "--prefix", &self.0])
            .output();
    }
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS")
}

fn flood(prefix: &str, seconds: &str) -> std::process::Output {
    Command::new("ip")
        .args(["netns", "exec", &format!("{prefix}-cli")])
        .arg(env!("CARGO_BIN_EXE_psp"))
        .args([
            "load",
            "--server",
            "10.77.0.1:7000",
            "--datapath",
            "xdp",
            "--workload",
            "fixed",
            "--workers",
            "2",
            "--rps",
            "300000",
            "--duration",
            seconds,
            "--timeout",
            "200ms",
            "--no-raise-priority",
            "--json",
        ])
        .output()
        .expect("psp load runs")
}

#[test]
fn serve_on_xdp_survives_a_flood_and_drains_on_sigterm() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: AF_XDP needs root (network namespaces, BPF)");
        return;
    }
    let prefix = format!("pc{}", std::process::id() % 100_000);
    let up = Command::new(script())
        .args(["up", "--prefix", &prefix])
        .output()
        .unwrap();
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let _topology = Topology(prefix.clone());
    let mut server = Command::new("ip")
        .args(["netns", "exec", &format!("{prefix}-srv")])
        .arg(env!("CARGO_BIN_EXE_psp"))
        .args([
            "serve",
            "--datapath",
            "xdp",
            "--address",
            "10.77.0.1:7000",
            "--workload",
            "fixed",
            "--workers",
            "2",
            "--policy",
            "c-fcfs",
            "--queue-capacity",
            "1024",
            "--duration",
            "120s",
            "--no-raise-priority",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start psp serve");
    let mut err_lines = BufReader::new(server.stderr.take().unwrap()).lines();
    let first = err_lines.next().expect("a listening line").unwrap();
    assert!(
        first.contains("listening on xdp://10.77.0.1:7000"),
        "{first}"
    );
    let pid = server.id();
    let before = rss_kib(pid);

    let first_flood = flood(&prefix, "1s");
    let point = json_of(&first_flood);
    let sent = point["extra"]["sent_total"].as_u64().unwrap_or(0);
    assert!(sent > 10_000, "the flood sent {sent} requests: {point}");
    let after = rss_kib(pid);
    assert!(
        after < before + 16 * 1024,
        "RSS grew from {before} KiB to {after} KiB under the flood"
    );

    // SIGTERM in the middle of a second flood.
    let prefix2 = prefix.clone();
    let second = std::thread::spawn(move || flood(&prefix2, "1s"));
    std::thread::sleep(Duration::from_millis(700));
    let kill = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = server.wait_with_output().unwrap();
    let rest: Vec<String> = err_lines.map_while(Result::ok).collect();
    assert_eq!(out.status.code(), Some(0), "{rest:?}");
    let summary: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("a JSON summary on stdout");
    let _ = second.join();
    assert_eq!(summary["stranded"], 0, "{summary}");
    let received = summary["received"].as_u64().unwrap();
    assert!(received > 10_000, "{summary}");
    assert_eq!(
        summary["requests"].as_u64().unwrap(),
        received
            - summary["truncated_dropped"].as_u64().unwrap()
            - summary["bad_request"].as_u64().unwrap()
            - summary["unknown_type"].as_u64().unwrap(),
        "{summary}"
    );
    let x = &summary["xdp"];
    assert_eq!(x["frames_leaked"], 0, "{x}");
    assert_eq!(x["frames_in_tx"], 0, "{x}");
    assert_eq!(summary["malformed_frames"], 0, "{x}");
    let link = Command::new("ip")
        .args([
            "-n",
            &format!("{prefix}-srv"),
            "link",
            "show",
            &format!("{prefix}s"),
        ])
        .output()
        .unwrap();
    let link = String::from_utf8_lossy(&link.stdout);
    assert!(
        !link.contains("prog/xdp"),
        "XDP program left behind: {link}"
    );
}

#[test]
fn xdp_flags_are_checked_before_anything_starts() {
    assert_one_line_error(
        &["serve", "--datapath", "dpdk", "--duration", "1s"],
        "--datapath",
    );
    assert_one_line_error(
        &[
            "serve",
            "--datapath",
            "xdp",
            "--xdp-ring",
            "1000",
            "--duration",
            "1s",
        ],
        "--xdp-ring",
    );
    assert_one_line_error(
        &["serve", "--xdp-queues", "2", "--duration", "1s"],
        "--datapath xdp",
    );
    assert_one_line_error(
        &[
            "load",
            "--datapath",
            "xdp",
            "--xdp-tx-frames",
            "1",
            "--rps",
            "10",
        ],
        "--xdp-tx-frames",
    );
    assert_one_line_error(
        &["netbench", "--datapaths", "udp,xdp", "--rates", "1000"],
        "--netns",
    );
    assert_one_line_error(
        &["netbench", "--netns", "../../etc", "--rates", "1000"],
        "--netns",
    );
    // An address no interface holds: refused before serving.
    assert_one_line_error(
        &[
            "serve",
            "--datapath",
            "xdp",
            "--address",
            "192.0.2.77:7000",
            "--duration",
            "1s",
        ],
        "192.0.2.77",
    );
    let _ = psp;
}
