//! `psp serve --protocol memcache` (TCP) and `memcache-udp` driven by
//! memcached's own load generator (memcaslap, from libmemcached-tools, which
//! scripts/deps.sh installs): sets and gets with verification, no miss, no
//! failed verification, no UDP drop or timeout; the server drains and exits
//! 0 with every request answered.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn memcaslap_sets_and_verifies_gets_over_tcp() {
    memcaslap_against("memcache");
}

#[test]
fn memcaslap_sets_and_verifies_gets_over_udp() {
    memcaslap_against("memcache-udp");
}

fn memcaslap_against(protocol: &str) {
    let udp = protocol == "memcache-udp";
    let mut server = Command::new(env!("CARGO_BIN_EXE_psp"))
        .args([
            "serve",
            "--protocol",
            protocol,
            "--address",
            "127.0.0.1:0",
            "--workers",
            "2",
            "--policy",
            "darc",
            "--duration",
            "120s",
            "--no-raise-priority",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start psp serve");
    let mut lines = BufReader::new(server.stderr.take().unwrap()).lines();
    let first = lines.next().expect("a listening line").unwrap();
    let addr = first
        .split_whitespace()
        .find_map(|w| {
            w.strip_prefix("tcp://")
                .or_else(|| w.strip_prefix("udp://"))
        })
        .unwrap_or_else(|| panic!("no address in '{first}'"))
        .to_string();
    let stderr = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>());
    let mut args = vec!["-s", &addr, "-t", "2s", "-T", "1", "-c", "8", "-v", "0.2"];
    if udp {
        args.push("-U");
    }
    let out = Command::new("memcaslap")
        .args(&args)
        .output()
        .expect("memcaslap runs (scripts/deps.sh installs libmemcached-tools)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let count = |name: &str| -> u64 {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{name}: ")))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in memcaslap's output: {text}"))
    };
    let (gets, sets) = (count("cmd_get"), count("cmd_set"));
    assert!(gets > 1000 && sets > 100, "{text}");
    assert_eq!(count("get_misses"), 0, "{text}");
    assert_eq!(count("verify_failed"), 0, "{text}");
    if udp {
        assert_eq!(count("packet_drop"), 0, "{text}");
        assert_eq!(count("udp_timeout"), 0, "{text}");
    }
    let kill = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let mut json = String::new();
    std::io::Read::read_to_string(server.stdout.as_mut().unwrap(), &mut json).unwrap();
    assert_eq!(server.wait().unwrap().code(), Some(0), "{json}");
    let summary: serde_json::Value = serde_json::from_str(&json).expect("a JSON summary");
    assert_eq!(summary["stranded"], 0, "{summary}");
    let received = summary["received"].as_u64().unwrap();
    eprintln!("memcaslap: {gets} gets, {sets} sets; the server received {received}");
    // memcaslap counts each of its 8 connections' last command, which may
    // still be unsent or unread when its time runs out and it closes.
    assert!(received + 8 >= gets + sets, "{gets} + {sets}: {summary}");
    if udp {
        assert_eq!(summary["bad_request"], 0, "{summary}");
    } else {
        assert_eq!(summary["tcp"]["closed_on_error"], 0, "{summary}");
        // Over TCP the declared service times only seed the policy: no
        // warning that they are off (whose remedies do not apply), live or
        // in the summary.
        let stderr = stderr.join().unwrap();
        assert!(
            !stderr
                .iter()
                .any(|l| l.contains("measured mean service time")),
            "{stderr:?}"
        );
    }
}
