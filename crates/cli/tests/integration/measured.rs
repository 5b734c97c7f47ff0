//! `--workload measured:APP`: the application's mix measured on this machine
//! at first use, then read from the cache, so that a load named against it
//! is a load of this machine's capacity.

use crate::common;

use std::process::{Command, Output};

use common::{assert_one_line_error, json_of};

fn psp_cached(cache: &std::path::Path, requests: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_psp"))
        .args(args)
        .env("PSP_PROFILE_CACHE", cache)
        .env("PSP_PROFILE_REQUESTS", requests)
        .output()
        .expect("run psp")
}

#[test]
fn a_measured_workload_is_measured_once_then_read_from_the_cache() {
    let cache = std::env::temp_dir().join(format!("psp-measured-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let args = [
        "sim",
        "--workload",
        "measured:kv",
        "--workers",
        "2",
        "--load",
        "0.3",
        "--duration",
        "50ms",
        "--json",
    ];
    let first = psp_cached(&cache, "200", &args);
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(stderr.contains("measuring it now"), "{stderr}");
    let point = json_of(&first);
    let files: Vec<_> = std::fs::read_dir(&cache).unwrap().collect();
    assert_eq!(files.len(), 1, "one profile per app and machine");
    let file = files[0].as_ref().unwrap().path();
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("app = \"kv\""), "{text}");
    // The point runs on the measured means: SCAN's is the file's.
    let scan = point["types"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "SCAN")
        .expect("a SCAN type");
    assert!(scan["mean_service_us"].as_f64().unwrap() > 10.0, "{scan}");

    // Second use: read, not measured again (an unparsable request count
    // would fail a measurement).
    let second = psp_cached(&cache, "not-a-number", &args);
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(stderr.contains("measured on this machine"), "{stderr}");
    json_of(&second);
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn a_measured_workload_needs_an_application_with_operations() {
    assert_one_line_error(&["sim", "--workload", "measured:spin"], "kv or tpcc");
    assert_one_line_error(&["sim", "--workload", "measured:nope"], "kv or tpcc");
}
