//! `psp reproduce`, `psp sim --series` and `--system` from the outside: figures
//! are written with their data, the marked region of a results file is
//! replaced and nothing else, and bad input is one line with exit code 2.

use crate::common;

use common::{assert_one_line_error, json_of, psp};

fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("psp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Every relative link of the markdown file `md` names an existing file,
/// relative to `md`'s directory; returns how many were checked.
fn assert_links_resolve(md: &std::path::Path) -> usize {
    let text = std::fs::read_to_string(md).unwrap();
    let base = md.parent().unwrap();
    let mut n = 0;
    for (i, _) in text.match_indices("](") {
        let target = text[i + 2..].split(')').next().unwrap();
        if target.starts_with('#') || target.contains("://") {
            continue;
        }
        let file = target.split('#').next().unwrap();
        assert!(
            base.join(file).exists(),
            "{}: link '{target}' does not resolve",
            md.display()
        );
        n += 1;
    }
    n
}

#[test]
fn reproduce_lists_figures_and_writes_one_into_the_marked_region() {
    let out = psp(&["reproduce", "--list"]);
    assert!(out.status.success());
    let list = String::from_utf8(out.stdout).unwrap();
    for id in [
        "fig1",
        "fig3",
        "fig4",
        "fig6",
        "fig7",
        "fig9",
        "fig10",
        "apps-14w",
        "scaling",
        "synergy-mechanisms",
        "synergy-imbalance",
        "dispatcher-overhead",
    ] {
        assert!(
            list.lines().any(|l| l.starts_with(id)),
            "{id} missing:\n{list}"
        );
    }

    // The results file and the figures in sibling directories, given as paths
    // relative to the working directory; one figure written without
    // --results, another with it: every link must resolve either way.
    let dir = temp_dir("reproduce");
    std::fs::create_dir_all(dir.join("doc")).unwrap();
    let results = dir.join("doc/results.md");
    std::fs::write(
        &results,
        "before\n<!-- psp reproduce: begin (generated; edit crates/cli/src/reproduce.rs) -->\nold\n<!-- psp reproduce: end -->\nafter\n",
    )
    .unwrap();
    let figs = dir.join("figs");
    let run_in_dir = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_psp"))
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("run psp");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stderr).unwrap()
    };
    run_in_dir(&["reproduce", "fig3", "--quick", "--out", "figs"]);
    let log = run_in_dir(&[
        "reproduce",
        "synergy-mechanisms",
        "--quick",
        "--out",
        "figs",
        "--results",
        "doc/results.md",
    ]);
    assert!(
        log.contains("psp reproduce: 1 figure(s) in"),
        "total wall time: {log}"
    );
    for f in [
        "fig3.json",
        "fig3.svg",
        "fig3.png",
        "fig3.md",
        "fig3-260k.json",
        "synergy-mechanisms.md",
        "synergy-mechanisms-zippydb.json",
    ] {
        assert!(figs.join(f).exists(), "{f} not written");
    }
    let text = std::fs::read_to_string(&results).unwrap();
    assert!(
        text.starts_with("before\n") && text.ends_with("after\n"),
        "{text}"
    );
    assert!(!text.contains("\nold\n"));
    assert!(text.contains("Fig. 3") && text.contains("| `darc` |"));
    assert!(text.contains("Fig. 6.7") && text.contains("`synergy:mech=signal`"));
    assert!(
        text.contains("](../figs/fig3.png)"),
        "links relative to the results file"
    );
    let mut checked = assert_links_resolve(&results);
    for md in ["fig3.md", "synergy-mechanisms.md"] {
        checked += assert_links_resolve(&figs.join(md));
    }
    assert!(checked >= 2 * (2 + 2 * 4), "{checked} links");

    assert_one_line_error(&["reproduce", "fig99"], "unknown figure 'fig99'");
    let plain = dir.join("plain.md");
    std::fs::write(&plain, "no markers\n").unwrap();
    assert_one_line_error(
        &["reproduce", "fig3", "--results", plain.to_str().unwrap()],
        "has no reproduce markers",
    );
    // Run from elsewhere than the repository root (the tests' working
    // directory is the crate's), a figure that reads the measured profiles is
    // refused before any work.
    assert_one_line_error(
        &["reproduce", "apps-14w"],
        "reads 'docs/data/apps/kv-rocksdb.toml', which is not here",
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn sim_takes_a_system_and_a_classifier_and_refuses_bad_ones() {
    let run = |system: &str| {
        json_of(&psp(&[
            "sim",
            "--workload",
            "fixed",
            "--workers",
            "2",
            "--load",
            "0.5",
            "--duration",
            "20ms",
            "--policy",
            "c-fcfs",
            "--system",
            system,
            "--json",
        ]))
    };
    let ideal = run("ideal");
    let net = run("ideal:network=10us");
    let lat = |v: &serde_json::Value| v["types"][0]["mean_latency_us"].as_f64().unwrap();
    assert!((lat(&net) - lat(&ideal) - 10.0).abs() < 1e-6);
    assert_eq!(
        net["extra"]["system"].as_str().unwrap().split(' ').next(),
        Some("custom")
    );
    for (args, needle) in [
        (vec!["sim", "--system", "warp"], "unknown system 'warp'"),
        (
            vec!["sim", "--system", "ideal:dispatch=2ms"],
            "at most 1000 us",
        ),
        (vec!["sim", "--system", "ideal:ingress=0"], "ingress"),
        (
            vec!["sim", "--classifier", "psychic"],
            "--classifier must be header or random",
        ),
        (
            vec!["run", "--system", "psp", "--duration", "10ms"],
            "simulator",
        ),
        (
            vec!["sim", "--series", "/tmp/x", "--series-window", "0s"],
            "--series-window",
        ),
    ] {
        assert_one_line_error(&args, needle);
    }
}

#[test]
fn sim_series_follows_the_phases_of_a_workload_change() {
    let dir = temp_dir("series");
    let stem = dir.join("wc");
    let out = psp(&[
        "sim",
        "--workload",
        "workload-change",
        "--workers",
        "14",
        "--policy",
        "darc:samples=5000",
        "--warmup",
        "0",
        "--series",
        stem.to_str().unwrap(),
        "--series-window",
        "250ms",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let point = json_of(&out);
    assert_eq!(
        point["duration_s"].as_f64(),
        Some(20.0),
        "four phases of 5 s"
    );
    let series: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(stem.with_extension("json")).unwrap())
            .unwrap();
    let windows = series["windows"].as_array().unwrap();
    // 80 windows of arrivals, and one more if requests are still completing.
    assert!(
        (80..=81).contains(&windows.len()),
        "{} windows",
        windows.len()
    );
    // The shorter type gets the small reservation: A in the base phase, B once
    // the service times are swapped (checked away from the change itself).
    let reserved = |at_s: f64, t: usize| {
        let w = windows
            .iter()
            .find(|w| w["start_s"].as_f64().unwrap() >= at_s)
            .unwrap();
        w["types"][t]["reserved_workers"].as_u64().unwrap()
    };
    assert!(
        reserved(4.0, 0) < reserved(4.0, 1),
        "base: A is the short type"
    );
    assert!(
        reserved(9.0, 1) < reserved(9.0, 0),
        "swap: B is the short type"
    );
    // Only A arrives in the last phase: B completes nothing there.
    assert!(
        windows
            .iter()
            .filter(|w| w["start_s"].as_f64().unwrap() >= 16.0)
            .all(|w| w["types"][1]["completions"].as_u64() == Some(0))
    );
    for ext in ["svg", "png"] {
        assert!(stem.with_extension(ext).exists());
    }
    let _ = std::fs::remove_dir_all(dir);
}
