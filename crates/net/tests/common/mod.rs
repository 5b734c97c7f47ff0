//! A test topology for the AF_XDP datapath: two network namespaces joined by
//! a veth pair, made by scripts/netns.sh and removed on drop.
#![allow(dead_code)] // each test file uses its own subset

use std::path::PathBuf;
use std::process::Command;

pub mod server;

/// Two namespaces and a veth pair, removed on drop.
pub struct Topology {
    pub prefix: String,
    pub server_ns: String,
    pub client_ns: String,
    pub server_dev: String,
    pub client_dev: String,
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/netns.sh")
}

impl Topology {
    /// A topology named after this process and `tag`; `None` (after saying
    /// why) when not root.
    pub fn up(tag: &str) -> Option<Topology> {
        Self::up_with_queues(tag, 1)
    }

    /// As [`up`](Self::up), with `queues` queues on each veth end.
    pub fn up_with_queues(tag: &str, queues: u32) -> Option<Topology> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: AF_XDP tests need root (network namespaces, BPF)");
            return None;
        }
        let prefix = format!("px{}{tag}", std::process::id() % 100_000);
        let out = Command::new(script())
            .args(["up", "--prefix", &prefix, "--queues", &queues.to_string()])
            .output()
            .expect("scripts/netns.sh runs");
        assert!(
            out.status.success(),
            "netns.sh up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let get = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")))
                .unwrap_or_else(|| panic!("netns.sh printed no {k}: {text}"))
                .to_string()
        };
        Some(Topology {
            prefix: prefix.clone(),
            server_ns: get("server_ns"),
            client_ns: get("client_ns"),
            server_dev: get("server_dev"),
            client_dev: get("client_dev"),
        })
    }

    /// Runs `cmd` in the client's namespace.
    pub fn in_client(&self, cmd: &[&str]) -> std::process::Output {
        Command::new("ip")
            .args(["netns", "exec", &self.client_ns])
            .args(cmd)
            .output()
            .expect("ip netns exec runs")
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        let _ = Command::new(script())
            .args(["down", "--prefix", &self.prefix])
            .output();
    }
}

/// Tests that time a running server take turns, across all of this binary's
/// modules: each expects the 2-core machine's cores to itself (more spinning
/// threads than cores turn its measurements into noise). One lock for the
/// whole binary keeps the turns the separate test binaries used to give.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `tests/frameworks/SCRIPT` with Debian's /usr/bin/python3 (where
/// scripts/deps.sh installs the client libraries) against `port`; whether
/// it succeeded, and what it printed.
#[allow(dead_code)] // not every test binary drives a framework
pub fn run_framework(script: &str, port: u16) -> (bool, String) {
    let out = std::process::Command::new("/usr/bin/python3")
        .arg(format!(
            "{}/tests/frameworks/{script}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .arg(port.to_string())
        .output()
        .expect("python3 runs (scripts/deps.sh installs its libraries)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}
