//! Every number has a range, checked before any work starts: absurd
//! flags, workload fields and policy parameters are answered with one line on
//! stderr naming the flag, field or parameter, and exit code 2, quickly. Each
//! `psp` process is killed after [`LIMIT`], so a value that would hang fails
//! the test instead of hanging it.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use proptest::prelude::*;

/// Longest a `psp` call may take here.
const LIMIT: Duration = Duration::from_secs(20);

/// What a `psp` call did.
struct Outcome {
    /// Exit code (`None`: killed by a signal, e.g. an abort).
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `psp args`, killing it after [`LIMIT`]; `None` if it had to be killed.
fn psp(args: &[&str]) -> Option<Outcome> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_psp"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run psp");
    // Drain the pipes on their own threads so that a chatty child cannot block.
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for psp") {
            break Some(status);
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    status.map(|s| Outcome {
        code: s.code(),
        stdout,
        stderr,
    })
}

/// `psp args` exits 2 within [`LIMIT`], with nothing on stdout and one line on
/// stderr that names `needle`.
fn assert_rejected(args: &[&str], needle: &str) {
    let Some(o) = psp(args) else {
        panic!("{args:?}: still running after {LIMIT:?}");
    };
    assert_eq!(
        o.code,
        Some(2),
        "{args:?}: exit {:?}, stderr {}",
        o.code,
        o.stderr
    );
    assert!(
        o.stdout.is_empty(),
        "{args:?}: wrote to stdout: {}",
        o.stdout
    );
    assert!(
        !o.stderr.contains("panicked"),
        "{args:?} panicked: {}",
        o.stderr
    );
    assert_eq!(
        o.stderr.trim_end().lines().count(),
        1,
        "{args:?}: not one line: {}",
        o.stderr
    );
    assert!(
        o.stderr.contains(needle),
        "{args:?}: '{}' does not name '{needle}'",
        o.stderr.trim_end()
    );
}

/// A scratch directory for this test process.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("psp-validation-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// A one-type workload with the given service (TOML inline-table body).
fn one_type(service: &str) -> String {
    format!("name = \"w\"\n[[types]]\nname = \"a\"\nratio = 1\nservice = {{ {service} }}\n")
}

/// A workload of `n` fixed 1 µs types in the shortest TOML.
fn many_types(n: usize) -> String {
    let mut t = String::from("name=\"many\"\n");
    for i in 0..n {
        t.push_str(&format!(
            "[[types]]\nname=\"{i}\"\nratio={}\nservice={{dist=\"fixed\",us=1}}\n",
            1.0 / n as f64
        ));
    }
    t
}

#[test]
fn absurd_values_are_one_line_errors_with_exit_code_2() {
    let dir = scratch("table");
    let w = |name: &str, text: &str| write(&dir, name, text);
    let tiny = w("tiny.toml", &one_type("dist = \"fixed\", us = 1e-300"));
    let huge = w("huge.toml", &one_type("dist = \"fixed\", us = 1e308"));
    let inf = w(
        "inf.toml",
        &one_type("dist = \"exponential\", mean_us = inf"),
    );
    let nan = w(
        "nan.toml",
        &one_type("dist = \"uniform\", min_us = 1.0, max_us = nan"),
    );
    let sigma = w(
        "sigma.toml",
        &one_type("dist = \"lognormal\", mean_us = 1.0, sigma = 1e300"),
    );
    let p_long = w(
        "p_long.toml",
        &one_type("dist = \"bimodal\", short_us = 1.0, long_us = 2.0, p_long = 2.0"),
    );
    let ratio = w(
        "ratio.toml",
        &one_type("dist = \"fixed\", us = 1.0").replace("ratio = 1", "ratio = nan"),
    );
    let types_65534 = w("types-65534.toml", &many_types(65_534));
    let types_65 = w("types-65.toml", &many_types(65));
    let empty = w("empty.toml", "");
    let zero_workers = w("zero-workers.toml", "workers = 0\n");
    let long_stats = w("long-stats.toml", "stats_interval = \"99999999999999s\"\n");
    let dir_s = dir.to_str().unwrap().to_string();
    let policies_33 = vec!["c-fcfs"; 33].join(",");
    let any = "127.0.0.1:0";

    let cases: Vec<(Vec<&str>, &str)> = vec![
        // The list.
        (vec!["sim", "--load", "1e9"], "--load"),
        (vec!["run", "--load", "1e9"], "--load"),
        (vec!["load", "--load", "1e9"], "--load"),
        (vec!["sweep", "--loads", "1e9"], "--loads"),
        (vec!["sim", "--rps", "1e12"], "--rps"),
        (vec!["run", "--rps", "1e12"], "--rps"),
        (vec!["load", "--rps", "1e12"], "--rps"),
        (
            vec!["sim", "--queue-capacity", "99999999999"],
            "--queue-capacity",
        ),
        (
            vec!["run", "--queue-capacity", "99999999999"],
            "--queue-capacity",
        ),
        (
            vec!["serve", "--address", any, "--queue-capacity", "99999999999"],
            "--queue-capacity",
        ),
        (vec!["sim", "--workload", &tiny], "service.us"),
        (vec!["sim", "--workload", &huge], "service.us"),
        (vec!["sim", "--workload", &types_65534], "larger than"),
        (vec!["sim", "--workload", &types_65], "at most 64"),
        (vec!["sim", "--policy", "darc-static:1,delta=nan"], "delta"),
        (vec!["sim", "--policy", "darc:delta=nan"], "delta"),
        (vec!["sim", "--policy", "ts:quantum=1e300"], "quantum"),
        (
            vec!["run", "--stats-interval", "99999999999999s"],
            "--stats-interval",
        ),
        (vec!["sim", "--workload", &dir_s], "is a directory"),
        (
            vec!["sim", "--workload", "/dev/null"],
            "is not a regular file",
        ),
        (vec!["sim", "--workload", &empty], "is empty"),
        // Rates and loads.
        (vec!["sim", "--load", "nan"], "--load"),
        (vec!["sim", "--load", "inf"], "--load"),
        (vec!["sim", "--load", "-1"], "--load"),
        (vec!["sim", "--load", "0"], "--load"),
        (vec!["sim", "--load", "10.5"], "--load"),
        (vec!["sim", "--rps", "nan"], "--rps"),
        (vec!["sim", "--rps", "-inf"], "--rps"),
        (vec!["sim", "--rps", "0"], "--rps"),
        (
            vec!["sim", "--rps", "1e8", "--duration", "2s"],
            "--duration",
        ),
        (
            vec![
                "sim",
                "--workers",
                "128",
                "--load",
                "10",
                "--duration",
                "3600s",
            ],
            "--duration",
        ),
        // Workers, queues, warm-up, durations.
        (vec!["sim", "--workers", "0"], "--workers"),
        (vec!["sim", "--workers", "129"], "--workers"),
        (
            vec!["sim", "--workers", "99999999999999999999999"],
            "--workers",
        ),
        (vec!["sim", "--queue-capacity", "0"], "--queue-capacity"),
        (
            vec!["sim", "--queue-capacity", "1048576", "--workers", "16"],
            "--queue-capacity",
        ),
        (vec!["sim", "--warmup", "1"], "--warmup"),
        (vec!["sim", "--warmup", "-0.1"], "--warmup"),
        (vec!["sim", "--warmup", "nan"], "--warmup"),
        (vec!["sim", "--duration", "1e-300s"], "--duration"),
        (vec!["sim", "--duration", "99999999999999s"], "--duration"),
        (vec!["sim", "--duration", "1e300"], "--duration"),
        (vec!["sim", "--duration", "nan"], "--duration"),
        (vec!["sim", "--duration", "inf"], "--duration"),
        (vec!["sim", "--duration", "3601s"], "--duration"),
        // Workload fields.
        (vec!["sim", "--workload", &inf], "service.mean_us"),
        (vec!["sim", "--workload", &nan], "service.max_us"),
        (vec!["sim", "--workload", &sigma], "service.sigma"),
        (vec!["sim", "--workload", &p_long], "service.p_long"),
        (vec!["sim", "--workload", &ratio], "ratio"),
        // Policy parameters.
        (vec!["sim", "--policy", "darc:samples=0"], "samples"),
        (vec!["sim", "--policy", "darc:spillway=1000"], "spillway"),
        (vec!["sim", "--policy", "darc:delay=inf"], "delay"),
        (vec!["sim", "--policy", "darc:deviation=-1"], "deviation"),
        (
            vec!["sim", "--policy", "darc-static:99999999999999999999"],
            "N",
        ),
        (vec!["sim", "--policy", "edf:k=inf"], "k must be"),
        (vec!["sim", "--policy", "ts:cost=-1"], "cost"),
        (vec!["sim", "--policy", "ts:target=nan"], "target"),
        (vec!["sim", "--policy", "ts:quantum=0.01"], "quantum"),
        (vec!["sim", "--policy", "ts-block:1e300"], "COST"),
        (vec!["sim", "--policy", "ts-block:1,long=0.5"], "long"),
        (
            vec!["sim", "--policy", "ts:quantum=0.1", "--duration", "10s"],
            "time slices",
        ),
        // The argument parser.
        (vec!["sim", "--bogus"], "--bogus"),
        (vec!["sim", "--workers", "x"], "--workers"),
        (vec!["sim", "--load"], "--load"),
        (vec!["sim", "--seed", "-1"], "-1"),
        (vec!["nope"], "nope"),
        // psp run.
        (vec!["run", "--stats-interval", "0s"], "--stats-interval"),
        (vec!["run", "--drain-timeout", "1e9s"], "--drain-timeout"),
        (vec!["run", "--drain-timeout", "0s"], "--drain-timeout"),
        (vec!["run", "--cores", "0-99999999999"], "--cores"),
        (vec!["run", "--cores", "1,1"], "--cores"),
        (vec!["run", "--idle", "park:99999999"], "--idle"),
        // psp serve: before it listens.
        (
            vec!["serve", "--address", any, "--workers", "0"],
            "--workers",
        ),
        (
            vec!["serve", "--address", any, "--workers", "129"],
            "--workers",
        ),
        (
            vec![
                "serve",
                "--address",
                any,
                "--stats-interval",
                "99999999999999s",
            ],
            "--stats-interval",
        ),
        (
            vec!["serve", "--address", any, "--drain-timeout", "0s"],
            "--drain-timeout",
        ),
        (
            vec!["serve", "--address", any, "--duration", "1e30s"],
            "--duration",
        ),
        (
            vec!["serve", "--address", any, "--cores", "0-5000"],
            "--cores",
        ),
        (
            vec!["serve", "--address", any, "--idle", "park:99999999"],
            "--idle",
        ),
        (
            vec!["serve", "--address", any, "--policy", "ts:quantum=1e300"],
            "quantum",
        ),
        (
            vec![
                "serve",
                "--address",
                any,
                "--policy",
                "darc:spillway=3",
                "--workers",
                "2",
            ],
            "spillway",
        ),
        (
            vec!["serve", "--address", any, "--workload", &tiny],
            "service.us",
        ),
        (
            vec!["serve", "--address", any, "--workload", &dir_s],
            "is a directory",
        ),
        (
            vec!["serve", "--address", any, "--config", &zero_workers],
            "--workers",
        ),
        (
            vec!["serve", "--address", any, "--config", &zero_workers],
            "zero-workers.toml",
        ),
        (
            vec!["serve", "--address", any, "--config", &long_stats],
            "--stats-interval",
        ),
        (
            vec!["serve", "--address", any, "--config", &dir_s],
            "is a directory",
        ),
        (
            vec!["serve", "--address", any, "--config", "/dev/null"],
            "regular file",
        ),
        // psp load: before it sends.
        (vec!["load", "--server", any, "--flows", "0"], "--flows"),
        (
            vec!["load", "--server", any, "--flows", "100000"],
            "--flows",
        ),
        (
            vec!["load", "--server", any, "--timeout", "1e9s"],
            "--timeout",
        ),
        (
            vec!["load", "--server", any, "--timeout", "0s"],
            "--timeout",
        ),
        (
            vec!["load", "--server", any, "--rps", "1e8", "--duration", "10s"],
            "--duration",
        ),
        (
            vec!["load", "--server", any, "--duration", "99999999999999s"],
            "--duration",
        ),
        // psp sweep.
        (vec!["sweep", "--loads", "0.000001:10:0.000001"], "--loads"),
        (vec!["sweep", "--loads", "0.1:1:1e-300"], "--loads"),
        (vec!["sweep", "--loads", "nan"], "--loads"),
        (vec!["sweep", "--loads", "0.5,20"], "--loads"),
        (vec!["sweep", "--refine", "1000"], "--refine"),
        (vec!["sweep", "--threads", "0"], "--threads"),
        (vec!["sweep", "--slo-slowdown", "inf"], "--slo-slowdown"),
        (vec!["sweep", "--slo-overall", "0.5"], "--slo-overall"),
        (vec!["sweep", "--max-loss", "2"], "--max-loss"),
        (vec!["sweep", "--policies", &policies_33], "--policies"),
        (
            vec![
                "sweep",
                "--mode",
                "net",
                "--policies",
                "c-fcfs",
                "--flows",
                "0",
            ],
            "--flows",
        ),
        (
            vec![
                "sweep",
                "--workers",
                "128",
                "--loads",
                "10",
                "--duration",
                "3600s",
            ],
            "--duration",
        ),
        (vec!["sweep", "--workload", &huge], "service.us"),
        // psp echo, netbench, bench.
        (
            vec!["echo", "--address", any, "--threads", "0"],
            "--threads",
        ),
        (
            vec!["echo", "--address", any, "--threads", "100000"],
            "--threads",
        ),
        (
            vec!["echo", "--address", any, "--duration", "1e30s"],
            "--duration",
        ),
        (vec!["netbench", "--rates", "1e12"], "--rates"),
        (vec!["netbench", "--rates", "nan"], "--rates"),
        (vec!["netbench", "--workers", "0"], "--workers"),
        (vec!["netbench", "--duration", "1e9s"], "--duration"),
        (vec!["netbench", "--max-loss", "nan"], "--max-loss"),
        (vec!["netbench", "--flows", "0"], "--flows"),
        (
            vec!["netbench", "--rates", "1e8", "--duration", "10s"],
            "--duration",
        ),
        (vec!["bench", "--reps", "0"], "--reps"),
        (vec!["bench", "--reps", "1000"], "--reps"),
        (vec!["bench", "--duration", "1e9s"], "--duration"),
        (vec!["bench", "--policies", "ts:quantum=1e300"], "quantum"),
        (vec!["plot", &dir_s], "is a directory"),
    ];
    for (args, needle) in &cases {
        assert_rejected(args, needle);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn help_and_version_are_unchanged() {
    for args in [vec!["--help"], vec!["sim", "--help"], vec!["--version"]] {
        let o = psp(&args).expect("prompt");
        assert_eq!(o.code, Some(0), "{args:?}");
        assert!(!o.stdout.is_empty() && o.stderr.is_empty(), "{args:?}");
    }
    // No command: the help, on stderr, exit 2 (docs/guide/reference.md).
    let o = psp(&[]).expect("prompt");
    assert_eq!(o.code, Some(2));
    assert!(o.stderr.contains("Usage: psp <COMMAND>"), "{}", o.stderr);
}

// ------------------------------------------------------------ properties

/// Numbers as users mistype them: extremes, special values and sane ones.
fn float() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(-0.0),
        Just(-1.0),
        Just(1e-300),
        Just(1e308),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(f64::NAN),
        Just(5e-324),
        any::<f64>(),
        0.0005f64..2e6,
        0.5f64..100.0,
    ]
}

/// `v` as TOML writes it.
fn toml_float(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf".into() } else { "-inf".into() }
    } else {
        format!("{v:?}")
    }
}

/// A service distribution with parameters from `f`.
fn service(f: fn() -> BoxedStrategy<f64>) -> impl Strategy<Value = String> {
    let f = move || f().prop_map(toml_float);
    prop_oneof![
        f().prop_map(|us| format!("dist = \"fixed\", us = {us}")),
        f().prop_map(|m| format!("dist = \"exponential\", mean_us = {m}")),
        (f(), f()).prop_map(|(m, s)| format!("dist = \"lognormal\", mean_us = {m}, sigma = {s}")),
        (f(), f(), f()).prop_map(|(a, b, p)| {
            format!("dist = \"bimodal\", short_us = {a}, long_us = {b}, p_long = {p}")
        }),
        (f(), f()).prop_map(|(a, b)| format!("dist = \"uniform\", min_us = {a}, max_us = {b}")),
    ]
}

/// A workload file: 1 to 70 types (a few beyond the cap) with arbitrary
/// services, ratios that usually sum to 1, and occasionally odd names.
fn arbitrary_workload() -> impl Strategy<Value = String> {
    (
        prop_oneof![1usize..4, 60usize..70],
        prop::collection::vec(
            (
                service(|| float().boxed()),
                prop::option::weighted(0.2, float()),
            ),
            1..4,
        ),
        prop_oneof![Just("w".to_string()), Just(String::new()), "[a-z\\n]{0,80}"],
    )
        .prop_map(|(n, services, name)| workload_text(&name, n, &services))
}

/// A workload file with sensible values (0.01 to 1 of each parameter, which
/// also makes a valid `p_long` and `sigma`).
fn sane_workload() -> impl Strategy<Value = String> {
    (
        1usize..5,
        prop::collection::vec((service(|| (0.01f64..1.0).boxed()), Just(None)), 1..4),
    )
        .prop_map(|(n, services)| workload_text("w", n, &services))
}

/// `n` types named `t0`, `t1`... cycling through `services`, with their own
/// ratio or 1/n.
fn workload_text(name: &str, n: usize, services: &[(String, Option<f64>)]) -> String {
    let mut t = format!("name = {name:?}\n");
    for i in 0..n {
        let (svc, ratio) = &services[i % services.len()];
        let ratio = ratio.map_or(toml_float(1.0 / n as f64), toml_float);
        t.push_str(&format!(
            "[[types]]\nname = \"t{i}\"\nratio = {ratio}\nservice = {{ {svc} }}\n"
        ));
    }
    t
}

/// A flag's value: a small valid one (so that accepted runs stay short) or
/// an absurd one.
fn value(valid: &'static [&'static str], absurd: &'static [&'static str]) -> BoxedStrategy<String> {
    prop_oneof![
        8 => prop::sample::select(valid).prop_map(String::from),
        1 => prop::sample::select(absurd).prop_map(String::from),
    ]
    .boxed()
}

/// A numeric flag's value: as [`value`], or any number.
fn number(
    valid: &'static [&'static str],
    absurd: &'static [&'static str],
) -> BoxedStrategy<String> {
    prop_oneof![10 => value(valid, absurd), 1 => float().prop_map(|v| format!("{v}"))].boxed()
}

/// A duration flag's value: as [`value`], or a number of nanoseconds that is
/// absurd or at most 2 ms (accepted runs stay short).
fn duration(
    valid: &'static [&'static str],
    absurd: &'static [&'static str],
) -> BoxedStrategy<String> {
    let ns = prop_oneof![
        Just(-1.0),
        Just(1e-300),
        Just(1e308),
        Just(f64::INFINITY),
        Just(f64::NAN),
        0.0f64..2e6,
    ];
    prop_oneof![10 => value(valid, absurd), 1 => ns.prop_map(|v| format!("{v}ns"))].boxed()
}

/// `psp sim` flags: each given or not, small valid or absurd.
fn sim_flags() -> impl Strategy<Value = Vec<(&'static str, String)>> {
    let flags: Vec<(&'static str, BoxedStrategy<String>)> = vec![
        (
            "--workers",
            number(&["1", "2", "16", "128"], &["0", "129", "4294967296"]),
        ),
        (
            "--duration",
            duration(
                &["1ms", "5ms", "10ms"],
                &["0s", "-1s", "nan", "1e300s", "1e-300s", "99999999999999s"],
            ),
        ),
        (
            "--load",
            number(
                &["0.01", "0.5", "1", "2"],
                &["0", "-1", "1e9", "nan", "inf"],
            ),
        ),
        (
            "--rps",
            number(
                &["1", "1000", "100000"],
                &["0", "1e12", "nan", "-inf", "1e-300"],
            ),
        ),
        (
            "--queue-capacity",
            number(&["1", "64", "4096"], &["0", "1048577", "99999999999"]),
        ),
        (
            "--warmup",
            number(&["0", "0.1", "0.9"], &["1", "-0.1", "nan"]),
        ),
        (
            "--seed",
            number(
                &["0", "1", "18446744073709551615"],
                &["-1", "18446744073709551616"],
            ),
        ),
        (
            "--policy",
            value(
                &[
                    "darc",
                    "darc:samples=100",
                    "c-fcfs",
                    "d-fcfs",
                    "fp",
                    "edf",
                    "ts",
                    "ts:sq",
                    "ts:quantum=0.1",
                    "ts-block:1",
                    "darc-static:1",
                ],
                &[
                    "darc:delta=nan",
                    "darc-static:1,delta=nan",
                    "ts:quantum=1e300",
                    "edf:k=inf",
                    "darc-static:200",
                    "darc:samples=0",
                    "ts-block:-1",
                ],
            ),
        ),
    ];
    flags
        .into_iter()
        .map(|(flag, v)| prop::option::weighted(0.35, v).prop_map(move |v| v.map(|v| (flag, v))))
        .collect::<Vec<_>>()
        .prop_map(|vs| vs.into_iter().flatten().collect())
}

/// Accepted runs finish within [`LIMIT`] with a point on stdout; rejected ones
/// are one line with exit code 2; nothing else (a hang, a panic, an abort).
fn accepted_or_rejected(args: &[&str], expect_stdout: &str) -> Result<(), TestCaseError> {
    let Some(o) = psp(args) else {
        return Err(TestCaseError::fail(format!(
            "{args:?}: still running after {LIMIT:?}"
        )));
    };
    match o.code {
        Some(0) => {
            prop_assert!(
                o.stdout.contains(expect_stdout),
                "{:?}: stdout {}",
                args,
                o.stdout
            );
            prop_assert!(!o.stdout.contains("NaN"), "{:?}: stdout {}", args, o.stdout);
        }
        Some(2) => {
            prop_assert_eq!(
                o.stderr.trim_end().lines().count(),
                1,
                "{:?}: {}",
                args,
                o.stderr
            );
            prop_assert!(o.stderr.starts_with("error: "), "{:?}: {}", args, o.stderr);
            prop_assert!(
                !o.stdout.contains(expect_stdout),
                "{:?}: {}",
                args,
                o.stdout
            );
        }
        c => prop_assert!(false, "{:?}: exit {:?}, stderr {}", args, c, o.stderr),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Arbitrary `psp sim` flags and workload files.
    #[test]
    fn sim_accepts_and_finishes_or_rejects_in_one_line(
        flags in sim_flags(),
        workload in prop::option::of(prop_oneof![2 => sane_workload(), 1 => arbitrary_workload()]),
    ) {
        let dir = scratch("prop-sim");
        let mut args: Vec<String> = vec!["sim".into()];
        if !flags.iter().any(|(f, _)| *f == "--duration") {
            args.extend(["--duration".into(), "10ms".into()]);
        }
        for (f, v) in flags {
            args.extend([f.to_string(), v]);
        }
        if let Some(text) = workload {
            args.extend(["--workload".into(), write(&dir, "w.toml", &text)]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        accepted_or_rejected(&args, "overall slowdown")?;
    }

    /// Arbitrary `psp serve` flags: rejected before it listens, or it listens
    /// and stops by itself after its --duration.
    #[test]
    fn serve_rejects_before_listening(
        workers in number(&["1", "2"], &["0", "129"]),
        queue in number(&["16", "4096"], &["0", "99999999999"]),
        stats in duration(&["10ms", "1s"], &["0s", "99999999999999s", "nan"]),
        drain in duration(&["100ms", "1s"], &["0s", "1e9s"]),
        duration in duration(&["50ms"], &["0s", "1e30s", "-1s"]),
        policy in value(&["c-fcfs", "darc:samples=100", "fp"], &["ts:quantum=1e300", "darc:spillway=9", "ts"]),
    ) {
        let args = [
            "serve", "--address", "127.0.0.1:0", "--workers", &workers, "--queue-capacity", &queue,
            "--stats-interval", &stats, "--drain-timeout", &drain, "--duration", &duration,
            "--policy", &policy, "--app", "echo", "--no-raise-priority",
        ];
        accepted_or_rejected(&args, "listening")?;
    }
}

// ------------------------------------------------------ attacker's inputs

/// Bad inputs that used to be answered late or wrongly: each is one line on
/// stderr naming what is wrong, exit code 2, before any work (a `psp profile`
/// of ten million requests per type would run past [`LIMIT`]).
#[test]
fn bad_inputs_are_named_before_any_work() {
    let dir = scratch("issue24");
    let dir_s = dir.to_str().unwrap().to_string();
    let missing = dir.join("no-such-dir").join("out.toml");
    let missing = missing.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        // Cores are refused before "listening" (nothing on stdout).
        (
            vec![
                "serve",
                "--address",
                "127.0.0.1:0",
                "--app",
                "echo",
                "--workers",
                "1",
                "--cores",
                "1000-1001",
                "--duration",
                "5s",
            ],
            "core 1000 is not available",
        ),
        (
            vec![
                "profile",
                "--app",
                "kv",
                "--requests",
                "10000000",
                "--out",
                &dir_s,
            ],
            "is a directory",
        ),
        (
            vec![
                "profile",
                "--app",
                "kv",
                "--requests",
                "10000000",
                "--out",
                missing,
            ],
            "--out: cannot write",
        ),
        (
            vec!["profile", "--app", "bogus"],
            "--app must be spin, echo, kv or tpcc, not 'bogus'",
        ),
        (
            vec!["load", "--server", "127.0.0.1:9", "--flows", "70000"],
            "--flows must be in [1, 256], not 70000",
        ),
        (
            vec![
                "sweep",
                "--mode",
                "net",
                "--policies",
                "c-fcfs",
                "--flows",
                "70000",
            ],
            "--flows must be in [1, 256], not 70000",
        ),
    ];
    for (args, needle) in &cases {
        assert_rejected(args, needle);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `psp profile` takes its application from the workload file's `app` when
/// `--app` is not given (docs/guide/reference.md, `--help`), and writes it back.
#[test]
fn profile_takes_the_workload_files_app() {
    let dir = scratch("profile-app");
    let w = write(
        &dir,
        "kv.toml",
        "name = \"kv-get\"\napp = \"kv\"\n[[types]]\nname = \"GET\"\nratio = 1\nservice = { dist = \"fixed\", us = 1 }\n",
    );
    let out = dir.join("measured.toml");
    let out_s = out.to_str().unwrap();
    let o = psp(&[
        "profile",
        "--workload",
        &w,
        "--requests",
        "200",
        "--kv-keys",
        "100",
        "--out",
        out_s,
    ])
    .expect("prompt");
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(o.stdout.contains("GET"), "{}", o.stdout);
    let written = std::fs::read_to_string(&out).unwrap();
    assert!(written.contains("app = \"kv\""), "{written}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The store options of the Redis and memcached front ends: checked before
/// anything binds, one line each.
#[test]
fn store_options_are_checked_before_start() {
    fn serve<'a>(extra: &[&'a str]) -> Vec<&'a str> {
        let mut a = vec!["serve", "--address", "127.0.0.1:0"];
        a.extend_from_slice(extra);
        a
    }
    for (args, needle) in [
        (
            serve(&["--protocol", "resp", "--max-memory", "12xb"]),
            "--max-memory",
        ),
        (
            serve(&["--protocol", "resp", "--max-memory", "2tb"]),
            "--max-memory",
        ),
        (
            serve(&["--protocol", "resp", "--max-memory", "1kb"]),
            "--max-memory",
        ),
        (
            serve(&["--protocol", "resp", "--maxmemory-policy", "volatile-lru"]),
            "--maxmemory-policy",
        ),
        (
            serve(&["--protocol", "memcache", "--maxmemory-policy", "noeviction"]),
            "--maxmemory-policy",
        ),
        (serve(&["--protocol", "resp", "--store", "disk"]), "--store"),
        (serve(&["--store", "mem"]), "--store"),
        (
            serve(&["--protocol", "resp", "--kv-keys", "10"]),
            "--store rocksdb",
        ),
        (
            serve(&[
                "--protocol",
                "resp",
                "--store",
                "rocksdb",
                "--max-memory",
                "64mb",
            ]),
            "--max-memory",
        ),
        (
            serve(&["--protocol", "resp", "--tcp-order", "sometimes"]),
            "--tcp-order",
        ),
        (
            serve(&["--protocol", "resp", "--tcp-batch", "0"]),
            "--tcp-batch",
        ),
        (
            serve(&["--protocol", "resp", "--tcp-batch", "257"]),
            "--tcp-batch",
        ),
        (
            serve(&["--protocol", "resp", "--tcp-size-classes", "500,500"]),
            "--tcp-size-classes",
        ),
        (
            serve(&["--protocol", "resp", "--tcp-size-classes", "32"]),
            "--tcp-size-classes",
        ),
        (serve(&["--inline-worker", "sometimes"]), "--inline-worker"),
        (
            serve(&["--inline-worker", "on", "--policy", "ts"]),
            "worker 0",
        ),
    ] {
        let o = psp(&args).expect("returns");
        assert_eq!(o.code, Some(2), "{args:?}: {}", o.stderr);
        assert!(o.stdout.is_empty(), "{args:?}");
        assert_eq!(
            o.stderr.trim_end().lines().count(),
            1,
            "{args:?}: {}",
            o.stderr
        );
        assert!(o.stderr.contains(needle), "{args:?}: {}", o.stderr);
    }
}
