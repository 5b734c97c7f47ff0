//! Helpers shared by the black-box tests of the `psp` binary.
#![allow(dead_code)] // each test file uses its own subset

use std::process::{Command, Output};

/// Runs `psp ARGS` to completion.
pub fn psp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_psp"))
        .args(args)
        .output()
        .expect("run psp")
}

/// The one JSON document a successful `psp ... --json` printed.
pub fn json_of(out: &Output) -> serde_json::Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document on stdout")
}

/// `psp ARGS` fails with one line naming `needle` on stderr, nothing on
/// stdout, exit code 2.
pub fn assert_one_line_error(args: &[&str], needle: &str) {
    let out = psp(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{args:?}: exit {:?}, stderr {stderr}",
        out.status.code()
    );
    assert!(out.stdout.is_empty(), "{args:?}: wrote to stdout");
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    assert!(
        stderr.to_lowercase().contains(&needle.to_lowercase()),
        "{args:?}: '{stderr}' does not name '{needle}'"
    );
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "{args:?}: not one line: {stderr}"
    );
}
