//! `psp serve`: the runtime behind a datapath (kernel UDP, AF_XDP) or a TCP
//! front end, until SIGINT, SIGTERM or `--duration`, then its summary. Its
//! options come from the flags and the `--config` file through one struct;
//! [`plan`] checks every value before anything starts, [`summary`] prints
//! what the server did.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use psp_net::Server;
use serde::Deserialize;

use super::{XdpArgs, server_summary, stop_on_signals};
use crate::app::{AppArgs, or_each_missing};
use crate::limits;

mod plan;
mod summary;

/// `psp serve` arguments; each may also come from the `--config` TOML file
/// (same names, with underscores), flags winning. The one struct is both the
/// command line (clap) and the file (serde), so that no flag is missing from
/// the file.
#[derive(Args, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeArgs {
    /// TOML file with any of the options below (e.g. `policy = "darc"`,
    /// `workers = 2`, `address = "0.0.0.0:7000"`).
    #[arg(long)]
    #[serde(skip)]
    config: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:7000].
    #[arg(long)]
    address: Option<String>,
    /// Serve Prometheus metrics over HTTP at this address, path /metrics (e.g.
    /// 127.0.0.1:9100; port 0: any free port) [default: none].
    #[arg(long)]
    metrics: Option<String>,
    /// Datapath: udp (kernel sockets, recvmmsg) or xdp (AF_XDP on the
    /// interface that holds --address: kernel bypass; needs root; see
    /// docs/xdp.md) [default: udp].
    #[arg(long)]
    datapath: Option<String>,
    #[command(flatten)]
    #[serde(flatten)]
    xdp: XdpArgs,
    // The help names the registry's protocols (`protocol_help`).
    #[arg(long, help = protocol_help())]
    protocol: Option<String>,
    /// Store behind --protocol resp, memcache and memcache-udp: mem (in
    /// memory, as Redis and memcached) or rocksdb (persistent, with the
    /// --kv-* options; strings and lists only) [default: mem].
    #[arg(long)]
    store: Option<String>,
    /// In-memory store: bound on its data, e.g. 512mb or 2gb (0: none; else
    /// 1mb to 1tb) [default: 0 for resp, 64mb for memcache, as memcached].
    #[arg(long)]
    max_memory: Option<String>,
    /// In-memory store under --protocol resp: what a full store does,
    /// noeviction (refuse writes with Redis's OOM error) or allkeys-lru
    /// [default: noeviction]; memcached's protocols always evict LRU.
    #[arg(long)]
    maxmemory_policy: Option<String>,
    #[command(flatten)]
    #[serde(flatten)]
    tcp: TcpArgs,
    /// Scheduling policy with its parameters (e.g. darc-fair, darc, darc:delta=0.1, c-fcfs)
    /// [default: darc-fair (DARC's reservations, idle reserved workers lent,
    /// no type starved); darc-fair:mech=none, which lends nothing, when the
    /// workers leave the dispatcher no core of its own].
    #[arg(long)]
    policy: Option<String>,
    /// Workload whose request types the server registers (type id = index) and
    /// whose mean service times seed the policy; a type whose measured mean is
    /// more than 1.5x off its declared one is warned about [default:
    /// high-bimodal].
    #[arg(long)]
    workload: Option<String>,
    /// Application workers [default: one per core left after the dispatcher].
    #[arg(long, allow_hyphen_values = true)]
    workers: Option<usize>,
    /// Cores to pin to, dispatcher first (e.g. 0-14) [default: automatic].
    #[arg(long)]
    cores: Option<String>,
    /// How idle threads wait: spin, yield or park [default: park].
    #[arg(long)]
    idle: Option<String>,
    /// Whether polling threads yield their core on each pass: auto (when the
    /// server's threads outnumber its cores), on or off [default: auto].
    #[arg(long)]
    poll_yield: Option<String>,
    /// Whether worker 0 runs on the dispatcher's thread (which then serves
    /// each job the policy gives worker 0 the moment it is dispatched, with
    /// no hand-off: under DARC, the shortest types run where they were
    /// read): auto (when the server's threads would take all its cores,
    /// under a policy that runs requests to completion: c-fcfs, fp, edf, the
    /// DARC family), on, or off (every worker on its own thread, the
    /// paper's layout) [default: auto].
    #[arg(long)]
    inline_worker: Option<String>,
    /// Bound of each queue the policy keeps [default: 4096].
    #[arg(long, allow_hyphen_values = true)]
    queue_capacity: Option<usize>,
    /// Longest a request may wait from its arrival to its start, past which
    /// it is answered OVERLOADED unrun instead of served late (its client
    /// has given up): DUR for every type (e.g. 50ms), TYPE=DUR,... for the
    /// types named, DUR,TYPE=DUR,... for every type with exceptions
    /// (TYPE=none: unbounded); 1us to 1h [default: none].
    #[arg(long, allow_hyphen_values = true)]
    max_wait: Option<String>,
    #[command(flatten)]
    #[serde(flatten)]
    app: AppArgs,
    /// Classifier: header or random (misclassification experiment) [default: header].
    #[arg(long)]
    classifier: Option<String>,
    /// Seed of the random classifier [default: 1].
    #[arg(long, allow_hyphen_values = true)]
    seed: Option<u64>,
    /// Print live statistics every interval (e.g. 1s) on stderr.
    #[arg(long, allow_hyphen_values = true)]
    stats_interval: Option<String>,
    /// Live statistics as JSON lines.
    #[arg(long)]
    stats_json: bool,
    /// Longest wait for admitted requests once asked to stop [default: 10s];
    /// what is left then is counted stranded and never answered.
    #[arg(long, allow_hyphen_values = true)]
    drain_timeout: Option<String>,
    /// Longest service time a request may ask the spin application for; longer
    /// ones are answered HANDLER_ERROR at once [default: 100 x the largest
    /// registered type's mean, at least 1ms].
    #[arg(long, allow_hyphen_values = true)]
    max_service: Option<String>,
    /// Stop by itself after this long (default: run until SIGINT or SIGTERM).
    #[arg(long, allow_hyphen_values = true)]
    duration: Option<String>,
    /// Leave the dispatcher at normal CPU priority (by default it asks for nice
    /// -15; turn that off when a load generator shares the server's cores).
    #[arg(long)]
    no_raise_priority: bool,
    /// Print the final summary as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// The file's `raise_priority = false`: as `no_raise_priority = true`
    /// (the key configs/serve.toml once used; still read, no flag).
    #[arg(skip)]
    raise_priority: Option<bool>,
}

/// `--protocol`'s help: this project's protocol and every registered one.
fn protocol_help() -> String {
    format!(
        "Request protocol: {} [default: psp]",
        plan::protocols_about()
    )
}

/// The TCP front end's bounds (`--protocol resp`).
#[derive(Args, Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct TcpArgs {
    /// TCP: connections open at once, 1 to 65536 [default: 1024]; one more
    /// is answered "max number of clients reached" and closed.
    #[arg(long, allow_hyphen_values = true)]
    pub tcp_max_connections: Option<usize>,
    /// TCP: longest request in bytes (a command with its values), 16 to
    /// 65535 [default: 65535]; a longer one is answered with an error and
    /// its connection closed.
    #[arg(long, allow_hyphen_values = true)]
    pub tcp_max_request: Option<usize>,
    /// TCP: requests of one connection in flight at most, 1 to 4096
    /// [default: 256]; past it the connection is not read until replies go.
    #[arg(long, allow_hyphen_values = true)]
    pub tcp_max_pipeline: Option<usize>,
    /// TCP: reply bytes waiting for one connection at most, 4096 to 64 MiB
    /// [default: 4 MiB]; past it the connection is not read (a client that
    /// never reads holds at most this much).
    #[arg(long, allow_hyphen_values = true)]
    pub tcp_max_output: Option<usize>,
    /// TCP: close a connection idle this long, 1s to 86400s [default: 300s].
    #[arg(long, allow_hyphen_values = true)]
    pub tcp_idle_timeout: Option<String>,
    /// TCP: effects (a connection's commands take effect in the order
    /// sent, one executing at a time: Redis's and memcached's contract) or
    /// replies (only replies are in order; a connection's pipelined
    /// commands run at once on several workers: for read-only or
    /// idempotent traffic) [default: effects].
    #[arg(long)]
    pub tcp_order: Option<String>,
    /// TCP: a connection's consecutive complete commands of one type run
    /// as one job (its replies leave in one write), 1 to 256 commands
    /// [default: 16], and as many as fit 20 µs at the type's measured mean;
    /// 1: each command is its own job. Order and atomicity are unchanged.
    #[arg(long, allow_hyphen_values = true)]
    pub tcp_batch: Option<usize>,
    /// TCP over the in-memory store: the size classes of the commands
    /// whose cost grows with their keys (HGETALL, SMEMBERS, LRANGE, KEYS,
    /// ...), as SHORT,BIG elements, 1 <= SHORT < BIG <= 10^9 [default:
    /// 32,10000]: up to SHORT such a command is typed `short`, up to BIG
    /// `range`, past it `big`.
    #[arg(long)]
    pub tcp_size_classes: Option<String>,
}

or_each_missing!(TcpArgs {
    tcp_max_connections,
    tcp_max_request,
    tcp_max_pipeline,
    tcp_max_output,
    tcp_idle_timeout,
    tcp_order,
    tcp_batch,
    tcp_size_classes
});

impl TcpArgs {
    /// The settings, checked.
    ///
    /// # Errors
    /// A value out of its range (one line).
    pub fn config(&self) -> Result<psp_net::tcp::TcpConfig> {
        let d = psp_net::tcp::TcpConfig::default();
        let cfg = psp_net::tcp::TcpConfig {
            max_connections: self.tcp_max_connections.unwrap_or(d.max_connections),
            max_request: self.tcp_max_request.unwrap_or(d.max_request),
            max_pipeline: self.tcp_max_pipeline.unwrap_or(d.max_pipeline),
            max_output: self.tcp_max_output.unwrap_or(d.max_output),
            idle_timeout: match &self.tcp_idle_timeout {
                Some(t) => limits::TCP_IDLE_TIMEOUT.parse(t)?,
                None => d.idle_timeout,
            },
            ordered: match self.tcp_order.as_deref() {
                None | Some("effects") => true,
                Some("replies") => false,
                Some(o) => anyhow::bail!("--tcp-order must be effects or replies, not '{o}'"),
            },
            max_batch: self.tcp_batch.unwrap_or(d.max_batch),
            batch_budget: d.batch_budget,
            sizes: None,
            size_bounds: match &self.tcp_size_classes {
                Some(s) => limits::size_classes(s)?,
                None => d.size_bounds,
            },
        };
        cfg.check().map_err(anyhow::Error::msg)?;
        Ok(cfg)
    }

    /// Whether any bound is given.
    fn any(&self) -> bool {
        self.tcp_max_connections.is_some()
            || self.tcp_max_request.is_some()
            || self.tcp_max_pipeline.is_some()
            || self.tcp_max_output.is_some()
            || self.tcp_idle_timeout.is_some()
            || self.tcp_order.is_some()
            || self.tcp_batch.is_some()
            || self.tcp_size_classes.is_some()
    }
}

/// Largest `--config` file.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The `--config` file at `path`: any of `psp serve`'s options, by their
/// flags' names with underscores.
fn load_serve_file(path: &Path) -> Result<ServeArgs> {
    let text = psp_workload::read_text_file(path, MAX_CONFIG_BYTES)
        .with_context(|| format!("cannot read '{}'", path.display()))?;
    toml::from_str(&text).map_err(|e| {
        let mut message = e.message().to_string();
        // serde names no expected keys for a struct with flattened groups.
        if message.starts_with("unknown field") {
            let keys: Vec<String> = file_keys().iter().map(|k| format!("`{k}`")).collect();
            message.push_str(&format!(", expected one of {}", keys.join(", ")));
        }
        // Nor which key a bad value belongs to: read alone, each key's
        // value finds it.
        if let Some(key) = bad_key(&text) {
            message = format!("`{key}`: {message}");
        }
        anyhow::anyhow!(
            "'{}' is not a valid serve config: {message}",
            path.display()
        )
    })
}

/// The first key of the config `text` whose value, read alone, is refused.
fn bad_key(text: &str) -> Option<String> {
    let table: toml::Table = toml::from_str(text).ok()?;
    table.into_iter().find_map(|(key, value)| {
        let mut alone = toml::Table::new();
        alone.insert(key.clone(), value);
        toml::from_str::<ServeArgs>(&alone.to_string())
            .is_err()
            .then_some(key)
    })
}

/// The keys of the `--config` file: every flag but `--config`, with
/// underscores for hyphens, and `raise_priority`.
fn file_keys() -> Vec<String> {
    ServeArgs::augment_args(clap::Command::new("serve"))
        .get_arguments()
        .filter_map(|a| a.get_long())
        .filter(|l| *l != "config")
        .map(|l| l.replace('-', "_"))
        .chain(["raise_priority".to_string()])
        .collect()
}

/// Runs `psp serve`.
pub fn serve(a: ServeArgs) -> Result<()> {
    let plan = plan::serve_plan(&a)?;
    let cfg = plan.cfg.clone();
    // Where the threads go, before they start: the same plan the runtime
    // makes (an error here is the one the start would give).
    let threads = psp_runtime::describe_threads(&cfg.runtime, &cfg.policy, cfg.types.clone())?;
    let server = Server::start(plan.cfg)?;
    let stop = server.stop_flag();
    stop_on_signals(&stop)?;
    let metrics = server.metrics_addr().map_or(String::new(), |a| {
        format!(" | metrics on http://{a}/metrics")
    });
    let line = format!(
        "psp serve: listening on {}://{}{metrics} | policy {} | {} workers | workload {} ({} types) | app {} | threads: {threads} | Ctrl-C drains and stops",
        cfg.datapath.name(),
        server.local_addr(),
        cfg.policy,
        cfg.runtime.workers,
        plan.workload.name,
        cfg.types.len(),
        plan.service.describe(),
    );
    if plan.json {
        eprintln!("{line}");
    } else {
        println!("{line}");
        let _ = std::io::stdout().flush();
    }
    let started = Instant::now();
    while !stop.load(Ordering::Relaxed) && !server.is_finished() {
        if plan.duration.is_some_and(|d| started.elapsed() >= d) {
            stop.store(true, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("psp serve: stopping (draining admitted requests)");
    let report = server.join()?;
    let declared: Vec<Option<f64>> = cfg.types.iter().map(|t| t.mean_service_ns).collect();
    let mut s = server_summary(&report, &declared);
    s.app_check = plan.service.finish();
    let policy = cfg.policy.to_string();
    if let Some(w) = crate::report::warmup_warning(&policy, usize::from(s.warming_up), 1) {
        eprintln!("{w}");
    }
    if plan.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        summary::print(&s, &report);
    }
    if report.dispatcher.counts.stranded > 0 {
        bail!(
            "{} requests were still in flight when the drain timed out (never answered)",
            report.dispatcher.counts.stranded
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::{Command, FromArgMatches};

    use super::*;

    /// `psp serve`'s flags as clap defines them: the long name and whether it
    /// takes a value.
    fn flags() -> Vec<(String, bool)> {
        ServeArgs::augment_args(Command::new("serve"))
            .get_arguments()
            .map(|a| {
                let long = a.get_long().expect("every psp serve option is a --flag");
                (long.to_string(), a.get_action().takes_values())
            })
            .collect()
    }

    /// `psp serve ARGV` as clap reads it.
    fn from_flags(argv: &[&str]) -> ServeArgs {
        let matches = ServeArgs::augment_args(Command::new("serve"))
            .try_get_matches_from(argv)
            .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        ServeArgs::from_arg_matches(&matches).unwrap()
    }

    /// Every flag of `psp serve` but `--config` itself is a key of the
    /// `--config` file by the same name (underscores for hyphens), and sets
    /// what the flag sets; the list comes from clap's definition, so a new
    /// flag is checked too.
    #[test]
    fn every_serve_flag_works_in_the_config_file_by_its_name() {
        let flags = flags();
        for f in ["address", "tcp-max-connections", "tcp-order", "xdp-ring"] {
            assert!(flags.iter().any(|(l, _)| l == f), "no --{f}");
        }
        assert!(flags.iter().any(|(l, _)| l == "xdp-busy-poll"));
        for (long, takes_value) in flags.iter().filter(|(l, _)| l != "config") {
            let key = long.replace('-', "_");
            let flag = format!("--{long}");
            let (by_flag, texts) = if *takes_value {
                (
                    from_flags(&["serve", &flag, "7"]),
                    vec![format!("{key} = 7"), format!("{key} = \"7\"")],
                )
            } else {
                (from_flags(&["serve", &flag]), vec![format!("{key} = true")])
            };
            let want = format!("{by_flag:?}");
            let by_file: Vec<String> = texts
                .iter()
                .filter_map(|t| toml::from_str::<ServeArgs>(t).ok())
                .map(|a| format!("{a:?}"))
                .collect();
            assert!(
                by_file.contains(&want),
                "{flag}: the file's {texts:?} gives {by_file:?}, the flag {want}"
            );
        }
    }

    /// The file takes no key that is not a flag (but `raise_priority`, the
    /// example file's), nor `config` itself.
    #[test]
    fn the_config_file_refuses_unknown_keys() {
        for text in ["wokers = 2", "config = \"other.toml\"", "help = true"] {
            let e = toml::from_str::<ServeArgs>(text).unwrap_err();
            let key = text.split(' ').next().unwrap();
            assert!(e.message().contains(key), "{text}: {}", e.message());
            assert!(!file_keys().contains(&key.to_string()), "{key}");
        }
        assert!(file_keys().contains(&"tcp_max_output".to_string()));
        let a: ServeArgs = toml::from_str("raise_priority = false").unwrap();
        assert_eq!(a.raise_priority, Some(false));
    }

    /// A value of the wrong type names its line, hence its key.
    #[test]
    fn a_bad_value_in_the_config_file_names_its_key() {
        let dir = std::env::temp_dir().join(format!("psp-serve-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.toml");
        std::fs::write(&path, "policy = \"darc\"\nworkers = \"two\"\n").unwrap();
        let e = load_serve_file(&path).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(e.contains("`workers`: invalid type"), "{e}");
        assert!(e.contains("expected usize"), "{e}");
    }

    /// configs/serve.toml reads as it always has.
    #[test]
    fn the_example_config_reads() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../configs/serve.toml");
        let a = load_serve_file(Path::new(path)).unwrap();
        assert_eq!(a.workers, Some(2));
        assert_eq!(a.app.app.as_deref(), Some("spin"));
        // Every key of the example is a flag's name (`raise_priority`, the
        // key it once used, is still read).
        assert_eq!(a.raise_priority, None);
        assert!(!a.stats_json && !a.no_raise_priority);
        let text = std::fs::read_to_string(path).unwrap();
        let table: toml::Table = toml::from_str(&text).unwrap();
        let keys = file_keys();
        for key in table.keys() {
            assert!(
                key != "raise_priority" && keys.contains(key),
                "configs/serve.toml: `{key}` is not a flag's name"
            );
        }
    }
}
