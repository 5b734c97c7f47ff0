//! `psp serve --protocol resp` driven by Redis's own clients (redis-tools,
//! which scripts/deps.sh installs): redis-cli's commands read back exactly,
//! and a short redis-benchmark of PING, SET, GET, LPUSH and LRANGE_100
//! completes every request; the server drains and exits 0 with every
//! request answered; `--bigkeys` and `--latency` work against it.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

fn start(policy: &str, store: &[&str]) -> (Child, String) {
    let mut server = Command::new(env!("CARGO_BIN_EXE_psp"))
        .args([
            "serve",
            "--protocol",
            "resp",
            "--address",
            "127.0.0.1:0",
            "--workers",
            "2",
            "--policy",
            policy,
            "--duration",
            "120s",
            "--no-raise-priority",
            "--json",
        ])
        .args(store)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start psp serve");
    let mut lines = BufReader::new(server.stderr.take().unwrap()).lines();
    let first = lines.next().expect("a listening line").unwrap();
    let port = first
        .split_whitespace()
        .find_map(|w| w.strip_prefix("tcp://"))
        .and_then(|a| a.rsplit(':').next())
        .unwrap_or_else(|| panic!("no address in '{first}'"))
        .to_string();
    std::thread::spawn(move || for _ in lines {});
    (server, port)
}

fn cli(port: &str, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", port])
        .args(args)
        .output()
        .expect("redis-cli runs (scripts/deps.sh installs redis-tools)");
    assert!(out.status.success(), "redis-cli {args:?}: {out:?}");
    // One reply per line (raw mode: a nil is an empty line); no final newline.
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.strip_suffix('\n').unwrap_or(&text).to_string()
}

fn stop(mut server: Child) -> serde_json::Value {
    let kill = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let mut out = String::new();
    std::io::Read::read_to_string(server.stdout.as_mut().unwrap(), &mut out).unwrap();
    let status = server.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{out}");
    serde_json::from_str(&out).expect("a JSON summary")
}

#[test]
fn redis_cli_and_redis_benchmark_talk_to_psp_serve_on_rocksdb() {
    talk(
        &["--store", "rocksdb", "--kv-keys", "100"],
        "ping,set,get,lpush,lrange_100",
    );
}

/// The in-memory store answers every test of redis-benchmark's default list.
#[test]
fn redis_cli_and_redis_benchmark_talk_to_psp_serve_in_memory() {
    talk(&[], DEFAULT_TESTS);
}

/// redis-benchmark's default tests (7.0), as `-t` names them.
const DEFAULT_TESTS: &str = "ping,set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,lrange_100,lrange_300,lrange_500,lrange_600,mset";

fn talk(store: &[&str], tests: &str) {
    let (server, port) = start("darc", store);
    let p = port.as_str();
    assert_eq!(cli(p, &["PING"]), "PONG");
    assert_eq!(cli(p, &["ECHO", "hello world"]), "hello world");
    assert_eq!(cli(p, &["SET", "greeting", "bonjour"]), "OK");
    assert_eq!(cli(p, &["GET", "greeting"]), "bonjour");
    assert_eq!(cli(p, &["MSET", "a", "1", "b", "2"]), "OK");
    assert_eq!(cli(p, &["MGET", "a", "b", "nope"]), "1\n2\n");
    assert_eq!(cli(p, &["INCR", "a"]), "2");
    assert_eq!(cli(p, &["EXISTS", "a", "b", "nope"]), "2");
    assert_eq!(cli(p, &["DEL", "b"]), "1");
    assert_eq!(cli(p, &["RPUSH", "l", "x", "y", "z"]), "3");
    assert_eq!(cli(p, &["LPUSH", "l", "w"]), "4");
    assert_eq!(cli(p, &["LRANGE", "l", "0", "-1"]), "w\nx\ny\nz");
    assert_eq!(cli(p, &["LPOP", "l"]), "w");
    assert_eq!(cli(p, &["RPOP", "l"]), "z");
    assert_eq!(cli(p, &["LLEN", "l"]), "2");
    assert!(cli(p, &["NOSUCHCOMMAND"]).starts_with("ERR unknown command"));
    assert!(cli(p, &["GET"]).contains("wrong number of arguments"));
    // redis-benchmark: 50 clients, every request must succeed; with --csv
    // it prints one line per test (name, rps, latencies).
    let bench = Command::new("redis-benchmark")
        .args(["-p", p, "-t", tests, "-n", "2000", "--csv"])
        .output()
        .expect("redis-benchmark runs (scripts/deps.sh installs redis-tools)");
    assert!(bench.status.success(), "{bench:?}");
    let errors = String::from_utf8_lossy(&bench.stderr);
    assert!(
        !errors.contains("Error"),
        "redis-benchmark saw errors: {errors}"
    );
    let csv = String::from_utf8_lossy(&bench.stdout);
    let names: Vec<String> = tests
        .split(',')
        .flat_map(|t| match t {
            "ping" => vec!["PING_INLINE".to_string(), "PING_MBULK".to_string()],
            "lrange_100" | "lrange_300" | "lrange_500" | "lrange_600" => {
                vec![format!("LRANGE_{}", &t[7..])]
            }
            "mset" => vec!["MSET (10 keys)".to_string()],
            t => vec![t.to_ascii_uppercase()],
        })
        .collect();
    for test in &names {
        assert!(
            csv.lines()
                .any(|l| l.starts_with(&format!("\"{test}")) && !l.contains("\"0.00\"")),
            "{test} missing from redis-benchmark's output: {csv}"
        );
    }
    // What redis-benchmark wrote reads back: its SETs wrote a 3-byte value
    // (its default -d) under key:__rand_int__, its LPUSHes filled mylist.
    assert_eq!(cli(p, &["GET", "key:__rand_int__"]).len(), 3);
    let len: u64 = cli(p, &["LLEN", "mylist"]).parse().unwrap();
    assert!(len >= 2000, "mylist has {len} elements");
    let summary = stop(server);
    assert_eq!(summary["stranded"], 0, "{summary}");
    let received = summary["received"].as_u64().unwrap();
    assert!(received > 10_000, "{summary}");
    assert_eq!(
        summary["completed"].as_u64().unwrap() + summary["overloaded"].as_u64().unwrap(),
        received,
        "{summary}"
    );
    assert_eq!(summary["tcp"]["closed_on_error"], 0, "{summary}");
}

/// What Redis users run to find big keys and slow answers: `redis-cli
/// --bigkeys` names the biggest key of each type with its size, and
/// `redis-cli --latency` (raw: one line, min max avg samples, over 1 s)
/// gets its PINGs answered.
#[test]
fn redis_cli_bigkeys_and_latency_work_against_psp_serve() {
    let (server, port) = start("darc-fair", &[]);
    let fields: Vec<String> = (0..400)
        .flat_map(|i| [format!("f{i}"), "v".into()])
        .collect();
    let mut hset = vec!["HSET", "big:hash"];
    hset.extend(fields.iter().map(String::as_str));
    assert_eq!(cli(&port, &hset), "400");
    assert_eq!(cli(&port, &["RPUSH", "a:list", "x", "y", "z"]), "3");
    assert_eq!(cli(&port, &["SET", "a:string", "hello"]), "OK");
    let big = cli(&port, &["--bigkeys"]);
    for line in [
        "Biggest   hash found '\"big:hash\"' has 400 fields",
        "Biggest   list found '\"a:list\"' has 3 items",
        "Biggest string found '\"a:string\"' has 5 bytes",
    ] {
        assert!(big.contains(line), "no '{line}' in:\n{big}");
    }
    let latency = cli(&port, &["--latency", "--raw", "-i", "1"]);
    let fields: Vec<f64> = latency
        .split_whitespace()
        .map(|f| f.parse().unwrap_or_else(|_| panic!("'{latency}'")))
        .collect();
    assert_eq!(fields.len(), 4, "'{latency}'");
    let (min, max, avg, samples) = (fields[0], fields[1], fields[2], fields[3]);
    assert!(samples >= 1.0 && min <= avg && avg <= max, "'{latency}'");
    stop(server);
}
