//! `psp serve` (the runtime behind a datapath: kernel UDP or AF_XDP), `psp load` (the open-loop
//! client), `psp echo` (the baseline echo server), `psp netbench` (highest
//! sustained rate of trivial requests: psp serve beside the echo server) and the
//! net-mode point that `psp sweep --mode net` measures.

use std::io::Write as _;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use psp_apps::AppConfig;
use psp_core::PolicySpec;
use psp_metrics::{Extra, LoadedServer, PointResult, ServerSummary, ServerTypeLatency};
use psp_net::client::{LoadConfig, LoadReport, Progress, run_load};
use psp_net::echo::EchoServer;
use psp_net::server::DatapathKind;
use psp_net::xdp::XdpConfig;
use psp_net::{ClassifierKind, Server, ServerConfig, ServerReport};
use psp_runtime::{IdleStrategy, RuntimeConfig, StatsConfig};
use psp_sim::{SimConfig, Workload};
use serde::Deserialize;
use serde_json::json;

use crate::app::{AppArgs, type_names};
use crate::{Mode, OfferedLoad, PointArgs, limits, report};

mod server_profile;

/// The default bound on the service time a request may ask the spin
/// application for: 100 times the largest type's mean, at least 1 ms, so that
/// one datagram cannot hold a worker for as long as it likes.
pub fn default_max_service_ns(workload: &Workload) -> u64 {
    workload
        .types
        .iter()
        .map(|t| t.service.mean_us() * 1e3 * 100.0)
        .fold(1e6, f64::max) as u64
}

/// A socket address flag's value (`flag` names it in the error).
pub fn parse_addr(s: &str, flag: &str) -> Result<SocketAddr> {
    s.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .with_context(|| format!("{flag}: '{s}' is not an address (example: 127.0.0.1:7000)"))
}

/// Raises `flag` on SIGINT and SIGTERM.
fn stop_on_signals(flag: &Arc<AtomicBool>) -> Result<()> {
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, flag.clone())
            .context("cannot install a signal handler")?;
    }
    Ok(())
}

/// The AF_XDP datapath's settings (`--datapath xdp`), shared by `psp serve`,
/// `psp load`, `psp echo` and `psp netbench`.
#[derive(Args, Clone, Debug, Default)]
pub struct XdpArgs {
    /// AF_XDP: entries of each ring (fill, RX, TX, completion), a power of two
    /// from 64 to 32768 [default: 2048].
    #[arg(long, allow_hyphen_values = true)]
    pub xdp_ring: Option<u32>,
    /// AF_XDP: frames each transmitter (worker, dispatcher) owns, 16 to 8192
    /// [default: 512].
    #[arg(long, allow_hyphen_values = true)]
    pub xdp_tx_frames: Option<u32>,
    /// AF_XDP: receive queues to bind, one socket each, 1 to 64 [default:
    /// every queue of the interface].
    #[arg(long, allow_hyphen_values = true)]
    pub xdp_queues: Option<u32>,
    /// AF_XDP: zero-copy mode: auto (where the driver supports it), on, off
    /// (copy mode) [default: auto].
    #[arg(long)]
    pub xdp_zero_copy: Option<String>,
    /// AF_XDP: where the XDP program runs: auto (the driver if it can), driver,
    /// generic [default: auto].
    #[arg(long)]
    pub xdp_attach: Option<String>,
    /// AF_XDP: busy polling (SO_BUSY_POLL) in microseconds, 0 to 1000
    /// [default: 0, off].
    #[arg(long, allow_hyphen_values = true)]
    pub xdp_busy_poll: Option<u32>,
}

impl XdpArgs {
    /// The datapath `--datapath` names, with these settings for `xdp`.
    ///
    /// # Errors
    /// An unknown datapath or a setting out of its range (one line).
    pub fn datapath(&self, name: &str) -> Result<DatapathKind> {
        let set = self.xdp_ring.is_some()
            || self.xdp_tx_frames.is_some()
            || self.xdp_queues.is_some()
            || self.xdp_zero_copy.is_some()
            || self.xdp_attach.is_some()
            || self.xdp_busy_poll.is_some();
        match name {
            "udp" if set => bail!("--xdp-* options need --datapath xdp"),
            "udp" => Ok(DatapathKind::Udp),
            "xdp" => {
                let d = XdpConfig::default();
                let cfg = XdpConfig {
                    ring: self.xdp_ring.unwrap_or(d.ring),
                    tx_frames: self.xdp_tx_frames.unwrap_or(d.tx_frames),
                    queues: self.xdp_queues,
                    zero_copy: match self.xdp_zero_copy.as_deref() {
                        None | Some("auto") => None,
                        Some("on") => Some(true),
                        Some("off") => Some(false),
                        Some(o) => bail!("--xdp-zero-copy must be auto, on or off, not '{o}'"),
                    },
                    attach: match self.xdp_attach.as_deref() {
                        None | Some("auto") => None,
                        Some("driver") => Some(psp_net::xdp::bpf::AttachMode::Driver),
                        Some("generic") => Some(psp_net::xdp::bpf::AttachMode::Generic),
                        Some(o) => {
                            bail!("--xdp-attach must be auto, driver or generic, not '{o}'")
                        }
                    },
                    busy_poll_us: self.xdp_busy_poll.unwrap_or(0),
                };
                cfg.check().map_err(anyhow::Error::msg)?;
                Ok(DatapathKind::Xdp(cfg))
            }
            _ => bail!(
                "--datapath must be udp (kernel UDP sockets) or xdp (AF_XDP, kernel bypass), not '{name}'"
            ),
        }
    }
}

/// The TCP front end's bounds (`--protocol resp`).
#[derive(Args, Clone, Debug, Default)]
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
}

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
        };
        cfg.check().map_err(anyhow::Error::msg)?;
        Ok(cfg)
    }

    fn any(&self) -> bool {
        self.tcp_max_connections.is_some()
            || self.tcp_max_request.is_some()
            || self.tcp_max_pipeline.is_some()
            || self.tcp_max_output.is_some()
            || self.tcp_idle_timeout.is_some()
            || self.tcp_order.is_some()
    }
}

/// Client options shared by `psp load`, `psp sweep --mode net` and `psp netbench`.
#[derive(Args, Clone, Debug)]
pub struct ClientArgs {
    /// Sockets (source ports) the client spreads its requests over: `--flows`,
    /// a flag of the point ([`PointArgs`]) or of `psp netbench`.
    #[arg(skip = DEFAULT_SOCKETS)]
    pub flows: usize,
    /// How long a request may wait for its response before it counts as a timeout.
    #[arg(long, allow_hyphen_values = true, default_value = "1s")]
    pub timeout: String,
    /// Leave the client's threads at normal priority (by default, at rates up to
    /// 5000 requests/s, they ask for SCHED_FIFO so that busy server threads on the
    /// same cores do not delay sends; `psp netbench` never raises it).
    #[arg(long)]
    pub no_raise_priority: bool,
}

/// The client's sockets unless `--flows` says otherwise.
pub const DEFAULT_SOCKETS: usize = 16;

impl ClientArgs {
    /// These options with `flows` sockets when given.
    pub fn with_flows(mut self, flows: Option<usize>) -> Self {
        self.flows = flows.unwrap_or(DEFAULT_SOCKETS);
        self
    }

    /// Checks the flags; returns the timeout.
    ///
    /// # Errors
    /// A flag out of range ([`limits::FLOWS`], [`limits::TIMEOUT`]).
    pub fn check(&self) -> Result<Duration> {
        limits::FLOWS.check(self.flows)?;
        limits::TIMEOUT.parse(&self.timeout)
    }
}

// ---------------------------------------------------------------- psp serve

/// `psp serve` arguments; each may also come from the `--config` TOML file
/// (same names, with underscores), flags winning.
#[derive(Args, Debug, Default)]
pub struct ServeArgs {
    /// TOML file with any of the options below (e.g. `policy = "darc"`,
    /// `workers = 2`, `address = "0.0.0.0:7000"`).
    #[arg(long)]
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
    xdp: XdpArgs,
    /// Request protocol: psp (this project's, over --datapath), resp (Redis's
    /// RESP2/RESP3 over TCP: redis-cli, redis-benchmark and client libraries
    /// talk to it) or memcache (memcached's text protocol over TCP) or
    /// memcache-udp (memcached over UDP, or AF_XDP with --datapath xdp), the
    /// last three on the --store [default: psp].
    #[arg(long)]
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
    /// Bound of each queue the policy keeps [default: 4096].
    #[arg(long, allow_hyphen_values = true)]
    queue_capacity: Option<usize>,
    #[command(flatten)]
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
}

/// The `--config` file of `psp serve`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServeFile {
    address: Option<String>,
    protocol: Option<String>,
    store: Option<String>,
    max_memory: Option<String>,
    maxmemory_policy: Option<String>,
    metrics: Option<String>,
    datapath: Option<String>,
    policy: Option<String>,
    workload: Option<String>,
    workers: Option<usize>,
    cores: Option<String>,
    idle: Option<String>,
    poll_yield: Option<String>,
    queue_capacity: Option<usize>,
    app: Option<String>,
    kv_path: Option<PathBuf>,
    kv_keys: Option<u64>,
    kv_value_bytes: Option<u64>,
    kv_max_scan: Option<u64>,
    tpcc_warehouses: Option<u64>,
    classifier: Option<String>,
    seed: Option<u64>,
    stats_interval: Option<String>,
    stats_json: Option<bool>,
    drain_timeout: Option<String>,
    max_service: Option<String>,
    duration: Option<String>,
    raise_priority: Option<bool>,
}

/// Largest `--config` file.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// `psp serve`'s policy when none is given, for `workers` workers on a
/// machine with `cores` cores: DARC's short-request tails without starving
/// any type (docs/architecture.md, "`darc-fair`"). Lending reserved workers
/// pays only where a reclaim lands in microseconds: with the dispatcher and
/// the workers sharing cores it waits for the dispatcher to get one
/// (milliseconds; docs/results.md), so there the default lends nothing
/// (`mech=none`) and only owes starving types their share.
pub fn serve_default_policy(workers: usize, cores: usize) -> &'static str {
    if workers < cores {
        "darc-fair"
    } else {
        "darc-fair:mech=none"
    }
}

/// This machine's cores (1 if unknown).
fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

fn load_serve_file(path: &Path) -> Result<ServeFile> {
    let text = psp_workload::read_text_file(path, MAX_CONFIG_BYTES)
        .with_context(|| format!("cannot read '{}'", path.display()))?;
    toml::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "'{}' is not a valid serve config: {}",
            path.display(),
            e.message()
        )
    })
}

/// Where a `psp serve` value comes from: its flag, else the `--config` file.
struct Sources<'a> {
    config: Option<&'a Path>,
}

impl Sources<'_> {
    /// The flag's value, else the file's, through `check` (a value from the
    /// file is checked as its flag, and the error names the file).
    fn pick<V: Clone, T>(
        &self,
        flag: &Option<V>,
        file: &Option<V>,
        check: impl FnOnce(V) -> Result<T>,
    ) -> Result<Option<T>> {
        match (flag, file, self.config) {
            (Some(v), _, _) => check(v.clone()).map(Some),
            (None, Some(v), Some(path)) => check(v.clone())
                .map(Some)
                .with_context(|| format!("'{}'", path.display())),
            _ => Ok(None),
        }
    }
}

struct ServePlan {
    cfg: ServerConfig,
    /// The application behind the handlers (described at start, checked at
    /// the end).
    service: Arc<dyn psp_apps::Service>,
    workload: Workload,
    duration: Option<Duration>,
}

/// Everything `psp serve` needs, from its flags and `--config` file (flags
/// winning), every value checked: nothing starts before this returns.
fn serve_plan(a: &ServeArgs) -> Result<ServePlan> {
    let f = match &a.config {
        Some(p) => load_serve_file(p)?,
        None => ServeFile::default(),
    };
    let src = Sources {
        config: a.config.as_deref(),
    };
    let mut datapath = a.xdp.datapath(
        &src.pick(&a.datapath, &f.datapath, Ok)?
            .unwrap_or_else(|| "udp".into()),
    )?;
    let protocol = src
        .pick(&a.protocol, &f.protocol, Ok)?
        .unwrap_or_else(|| "psp".into());
    // The registry's protocols frame and type their own requests and serve
    // the key-value store; `psp` is this project's datagram protocol.
    let entry = match protocol.as_str() {
        "psp" => None,
        p => match psp_proto::find(p) {
            Some(e) => Some(e),
            None => {
                let mut names = vec!["psp".to_string()];
                names.extend(
                    psp_proto::PROTOCOLS
                        .iter()
                        .map(|e| format!("{} ({})", e.name, e.about)),
                );
                bail!(
                    "--protocol must be {}, not '{p}'",
                    psp_proto::or_list(&names)
                )
            }
        },
    };
    let stream = entry.filter(|e| e.transport == psp_proto::Transport::Tcp);
    if stream.is_none() && a.tcp.any() {
        let tcp: Vec<&str> = psp_proto::PROTOCOLS
            .iter()
            .filter(|e| e.transport == psp_proto::Transport::Tcp)
            .map(|e| e.name)
            .collect();
        bail!(
            "--tcp-* options need --protocol {}",
            psp_proto::or_list(&tcp)
        );
    }
    // Datagrams of a registry protocol come in memcached's UDP frame.
    let dgram_protocol = match entry {
        Some(e) if e.transport == psp_proto::Transport::Udp => {
            psp_net::dgram::DatagramProtocol::Memcache
        }
        _ => psp_net::dgram::DatagramProtocol::Psp,
    };
    if let Some(kind) = stream {
        if datapath != DatapathKind::Udp {
            bail!("--protocol {protocol} runs over TCP: leave --datapath out");
        }
        datapath = DatapathKind::Tcp(kind, a.tcp.config()?);
    }
    let addr = src
        .pick(&a.address, &f.address, |s| parse_addr(&s, "--address"))?
        .map_or_else(|| parse_addr("127.0.0.1:7000", "--address"), Ok)?;
    if matches!(datapath, DatapathKind::Xdp(_)) {
        // AF_XDP binds to the interface that holds the address: say which
        // address is wrong before the application loads.
        psp_net::xdp::check_address(addr)
            .with_context(|| format!("--address {addr} with --datapath xdp"))?;
    }
    let metrics = src.pick(&a.metrics, &f.metrics, |s| parse_addr(&s, "--metrics"))?;
    let policy = src.pick(&a.policy, &f.policy, |s| Ok(s.parse::<PolicySpec>()?))?;
    let workload = if let Some(e) = entry {
        if a.workload.is_some() || f.workload.is_some() {
            bail!("--protocol {protocol} registers its own request types: leave --workload out");
        }
        protocol_workload(e.protocol.types(), e.protocol.type_mean_us())
    } else {
        src.pick(&a.workload, &f.workload, |s| {
            crate::profile::resolve_workload(&s)
        })?
        .map_or_else(|| Workload::resolve("high-bimodal"), Ok)?
    };
    let workers = src
        .pick(&a.workers, &f.workers, |w| limits::WORKERS.check(w))?
        .unwrap_or_else(|| {
            PointArgs {
                workers: None,
                ..crate::default_point_args()
            }
            .with_default_workers(Mode::Net)
            .workers()
        });
    let queue_capacity = src
        .pick(&a.queue_capacity, &f.queue_capacity, |q| {
            limits::QUEUE_CAPACITY.check(q)
        })?
        .unwrap_or(4096);
    limits::slots(workload.types.len(), workers, queue_capacity)?;
    let policy = match policy {
        Some(p) => p,
        None => serve_default_policy(workers, available_cores()).parse::<PolicySpec>()?,
    };
    // The policy on these workers and this workload's types, as the server
    // will build it (cheap; catches what does not fit before listening).
    policy.build(&psp_core::PolicyContext {
        workers,
        types: workload.type_infos(),
        queue_capacity,
    })?;
    limits::runtime_quantum(&policy)?;
    let cores = src.pick(&a.cores, &f.cores, |c| crate::run::parse_cores(&c))?;
    let idle = src
        .pick(&a.idle, &f.idle, |s| limits::idle(&s))?
        .unwrap_or_default();
    let poll_yield = src
        .pick(&a.poll_yield, &f.poll_yield, |s| limits::poll_yield(&s))?
        .unwrap_or_default();
    let seed = src.pick(&a.seed, &f.seed, Ok)?.unwrap_or(1);
    let classifier = src
        .pick(&a.classifier, &f.classifier, |c| {
            ClassifierKind::parse(&c, seed).map_err(anyhow::Error::msg)
        })?
        .unwrap_or(ClassifierKind::Header);
    let stats = src
        .pick(&a.stats_interval, &f.stats_interval, |s| {
            limits::STATS_INTERVAL.parse(&s)
        })?
        .map(|interval| StatsConfig {
            interval,
            json: a.stats_json || f.stats_json.unwrap_or(false),
        });
    let drain_timeout = src
        .pick(&a.drain_timeout, &f.drain_timeout, |s| {
            limits::DRAIN_TIMEOUT.parse(&s)
        })?
        .unwrap_or(Duration::from_secs(10));
    let duration = src.pick(&a.duration, &f.duration, |s| {
        limits::SERVE_DURATION.parse(&s)
    })?;
    let max_service = src.pick(&a.max_service, &f.max_service, |s| {
        limits::MAX_SERVICE.parse(&s)
    })?;
    let file_app = AppArgs {
        app: f.app.clone(),
        kv_path: f.kv_path.clone(),
        kv_keys: f.kv_keys,
        kv_value_bytes: f.kv_value_bytes,
        kv_max_scan: f.kv_max_scan,
        tpcc_warehouses: f.tpcc_warehouses,
    };
    let app_args = a.app.or(&file_app);
    let max_service_ns = max_service.map_or(default_max_service_ns(&workload), |d| {
        u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
    });
    // Last: the application opens and loads its database (or calibrates its
    // spin, 50 ms).
    let store = src.pick(&a.store, &f.store, Ok)?;
    let max_memory = src.pick(&a.max_memory, &f.max_memory, |s| limits::max_memory(&s))?;
    let eviction = src.pick(&a.maxmemory_policy, &f.maxmemory_policy, |s| {
        limits::maxmemory_policy(&s)
    })?;
    if entry.is_none() && (store.is_some() || max_memory.is_some() || eviction.is_some()) {
        let names: Vec<&str> = psp_proto::PROTOCOLS.iter().map(|e| e.name).collect();
        bail!(
            "--store, --max-memory and --maxmemory-policy need --protocol {}",
            psp_proto::or_list(&names)
        );
    }
    let service: Arc<dyn psp_apps::Service> = if let Some(entry) = entry {
        if app_args.app.as_deref().is_some_and(|a| a != "kv") {
            bail!("--protocol {protocol} serves its own store (--store): leave --app out");
        }
        match store.as_deref().unwrap_or("mem") {
            "mem" => {
                if app_args.kv_path.is_some()
                    || app_args.kv_keys.is_some()
                    || app_args.kv_value_bytes.is_some()
                    || app_args.kv_max_scan.is_some()
                {
                    bail!(
                        "--kv-* options configure --store rocksdb: leave them out with the in-memory store"
                    );
                }
                let db = entry
                    .protocol
                    .db_config(max_memory, eviction)
                    .map_err(anyhow::Error::msg)?;
                let connections = match &datapath {
                    DatapathKind::Tcp(_, t) => t.max_connections,
                    _ => 1,
                };
                let cfg = psp_apps::memkv::MemConfig { db, connections };
                Arc::new(psp_apps::memkv::MemService::start(entry.protocol, cfg)?)
            }
            "rocksdb" => {
                if max_memory.is_some() || eviction.is_some() {
                    bail!(
                        "--max-memory and --maxmemory-policy bound the in-memory store: leave them out with --store rocksdb"
                    );
                }
                Arc::new(psp_apps::kv::ProtocolService::open(
                    entry.protocol,
                    &app_args.kv_config(),
                )?)
            }
            other => bail!("--store must be mem or rocksdb, not '{other}'"),
        }
    } else {
        app_args
            .config(&workload, max_service_ns)?
            .start(&type_names(&workload))?
    };
    Ok(ServePlan {
        cfg: ServerConfig {
            addr,
            metrics,
            runtime: RuntimeConfig {
                workers,
                cores,
                idle,
                queue_capacity,
                drain_timeout,
                stats,
                raise_priority: !(a.no_raise_priority || f.raise_priority == Some(false)),
                series_window_ns: None,
                poll_yield,
            },
            policy,
            types: workload.type_infos(),
            classifier,
            app_classifier: None,
            handlers: psp_apps::handler_factory(service.clone(), policy.feedback_threshold_ns()),
            datapath,
            protocol: dgram_protocol,
        },
        service,
        workload,
        duration,
    })
}

/// The request types a protocol front end registers (`--protocol resp` or
/// `memcache`), in its classifier's order, with the mean service times DARC
/// starts from (it then measures).
fn protocol_workload(names: &[&str], mean_us: &[f64]) -> Workload {
    let types: Vec<(&str, f64, f64)> = names
        .iter()
        .zip(mean_us)
        .map(|(&n, &us)| (n, us, 1.0 / names.len() as f64))
        .collect();
    Workload::fixed("protocol", &types)
}

/// The server's summary of `s`, whose types declare the mean service times
/// `declared` (ns, in type order).
///
/// # Errors
/// A final reservation whose text does not read back as data.
fn server_summary(s: &ServerReport, declared: &[Option<f64>]) -> ServerSummary {
    let (d, n) = (&s.dispatcher, &s.net);
    let c = &d.counts;
    let (measured_utilization, declared_utilization) = d.utilization(
        s.served_per_worker.len(),
        s.wall.as_nanos() as f64,
        declared,
    );
    ServerSummary {
        received: n.received,
        requests: c.arrived,
        admitted: c.admitted,
        completed: c.completed,
        truncated_dropped: n.truncated,
        bad_request: n.bad_request,
        unknown_type: n.unknown_type,
        overloaded: n.overloaded,
        shed_unanswered: n.shed_unanswered,
        handler_errors: c.handler_errors,
        no_fiber: c.no_fiber,
        bad_bodies: c.bad_bodies,
        reply_send_errors: n.reply_send_errors,
        worker_send_errors: c.unsent,
        receive_errors: n.receive_errors,
        dropped_by_os: n.dropped_by_os,
        malformed_frames: n.malformed_frames,
        xdp: n.xdp.clone(),
        tcp: n.tcp.clone(),
        stranded: c.stranded,
        abandoned_workers: s.abandoned_workers.clone(),
        reservation_updates: d.policy_stats.reservation_updates,
        reservation: d
            .reservation
            .as_ref()
            .map(psp_metrics::reservation::ReservationLayout::from),
        served_per_worker: s.served_per_worker.clone(),
        steals_per_worker: s.steals_per_worker.clone(),
        preemptions: crate::run::preemptions(s.local.as_ref(), &d.policy_stats),
        local: s.local.as_ref().map(crate::run::local_counters),
        pinned: s.pinned,
        polls_yield: s.polls_yield,
        wall_s: s.wall.as_secs_f64(),
        measured_utilization,
        declared_utilization,
        server_side_latency: d
            .recorder
            .type_stats()
            .into_iter()
            .zip(declared.iter().chain(std::iter::repeat(&None)))
            .zip(d.shed_by_type.iter().copied().chain(std::iter::repeat(0)))
            .map(|((t, m), shed)| ServerTypeLatency {
                name: t.name,
                completed: t.count,
                mean_service_us: t.mean_service_us,
                declared_service_us: m.map(|ns| ns / 1e3),
                p50_latency_us: t.p50_latency_us,
                p99_latency_us: t.p99_latency_us,
                p999_latency_us: t.p999_latency_us,
                shed,
            })
            .collect(),
        app_check: None,
    }
}

/// The workload's declared mean service times (ns), in type order.
pub(crate) fn declared(workload: &Workload) -> Vec<Option<f64>> {
    workload
        .type_infos()
        .iter()
        .map(|t| t.mean_service_ns)
        .collect()
}

/// The measured utilization beside the one the declared service times imply.
fn utilization_line(s: &ServerSummary) -> String {
    let mut line = format!(
        "utilization over the server's {:.1} s: measured {:.1}%",
        s.wall_s,
        s.measured_utilization * 100.0
    );
    if let Some(d) = s.declared_utilization.filter(|d| *d > 0.0) {
        line.push_str(&format!(
            " | by the workload's declared service times {:.1}% (measured / declared {:.2}x)",
            d * 100.0,
            s.measured_utilization / d
        ));
    }
    line
}

/// A warning naming the types whose measured mean service time is off from
/// the declared one by more than [`psp_runtime::SERVICE_OFF_FACTOR`] (types
/// with at least 100 completions).
fn service_warning(types: &[ServerTypeLatency]) -> Option<String> {
    let f = psp_runtime::SERVICE_OFF_FACTOR;
    let off: Vec<String> = types
        .iter()
        .filter_map(|t| {
            let r =
                psp_runtime::service_off(t.mean_service_us, t.declared_service_us?, t.completed)?;
            Some(format!("{} {r:.2}x", t.name))
        })
        .collect();
    (!off.is_empty()).then(|| {
        format!(
            "warning: measured mean service times are more than {f}x off from the workload's declared ones ({}): a load computed from the declared times (psp load --load) is not the load the server carried (see the measured utilization); measure the real times with `psp profile` and use the workload file it writes, or let `psp load --server-profile` read this server's measured ones from its --metrics",
            off.join(", ")
        )
    })
}

/// Runs `psp serve`.
pub fn serve(a: ServeArgs) -> Result<()> {
    let plan = serve_plan(&a)?;
    let cfg = plan.cfg.clone();
    let server = Server::start(plan.cfg)?;
    let stop = server.stop_flag();
    stop_on_signals(&stop)?;
    let metrics = server.metrics_addr().map_or(String::new(), |a| {
        format!(" | metrics on http://{a}/metrics")
    });
    let line = format!(
        "psp serve: listening on {}://{}{metrics} | policy {} | {} workers | workload {} ({} types) | app {} | Ctrl-C drains and stops",
        cfg.datapath.name(),
        server.local_addr(),
        cfg.policy,
        cfg.runtime.workers,
        plan.workload.name,
        cfg.types.len(),
        plan.service.describe(),
    );
    if a.json {
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
    if a.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        let os_drops = s
            .dropped_by_os
            .map_or("unknown".to_string(), |d| d.to_string());
        println!(
            "received {} | requests {} | admitted {} | completed {} (of which HANDLER_ERROR {}, BAD_REQUEST body {}) | stranded {} | OVERLOADED {} (+ {} shed unanswered) | BAD_REQUEST {} | UNKNOWN_TYPE {} | truncated (dropped) {} | send errors {} | dropped by the OS (receive buffer full) {}",
            s.received,
            s.requests,
            s.admitted,
            s.completed,
            s.handler_errors,
            s.bad_bodies,
            s.stranded,
            s.overloaded,
            s.shed_unanswered,
            s.bad_request,
            s.unknown_type,
            s.truncated_dropped,
            s.reply_send_errors + s.worker_send_errors,
            os_drops,
        );
        println!("server-side latency (receive to handler completion):");
        println!(
            "{:<12} {:>10} {:>9} {:>13} {:>10} {:>10} {:>11} {:>9}",
            "type",
            "completed",
            "svc(us)",
            "declared(us)",
            "p50(us)",
            "p99(us)",
            "p99.9(us)",
            "shed"
        );
        for t in &s.server_side_latency {
            println!(
                "{:<12} {:>10} {:>9.2} {:>13} {:>10.2} {:>10.2} {:>11.2} {:>9}",
                t.name,
                t.completed,
                t.mean_service_us,
                t.declared_service_us
                    .map_or("-".to_string(), |d| format!("{d:.2}")),
                t.p50_latency_us,
                t.p99_latency_us,
                t.p999_latency_us,
                t.shed,
            );
        }
        println!("{}", utilization_line(&s));
        match &s.local {
            Some(l) => println!(
                "{}",
                crate::run::local_counters_line(l, s.preemptions, &s.steals_per_worker)
            ),
            None if s.preemptions > 0 => println!("preemptions {}", s.preemptions),
            None => {}
        }
        if let Some(r) = report
            .dispatcher
            .reclaims
            .as_ref()
            .filter(|r| r.ordered > 0)
        {
            println!("{}", r.line());
        }
        if let Some(w) = service_warning(&s.server_side_latency) {
            eprintln!("{w}");
        }
        if let Some(r) = &s.reservation {
            println!("reservation: {r}");
        }
        if let Some(c) = &s.app_check {
            println!("{c}");
        }
        if let Some(x) = &s.xdp {
            println!("{}", xdp_line(x));
        }
        if let Some(t) = &s.tcp {
            println!(
                "tcp: connections accepted {} (refused at the limit {}) | closed: by the peer {}, after a bad request {}, idle {}, on an I/O error {} | replies to closed connections {} | paused for backpressure {}",
                t.accepted,
                t.refused,
                t.closed_by_peer,
                t.closed_on_error,
                t.closed_idle,
                t.closed_on_io_error,
                t.replies_to_closed,
                t.paused
            );
        }
    }
    if report.dispatcher.counts.stranded > 0 {
        bail!(
            "{} requests were still in flight when the drain timed out (never answered)",
            report.dispatcher.counts.stranded
        );
    }
    Ok(())
}

// ----------------------------------------------------------------- psp load

/// The AF_XDP datapath's account in one line.
pub fn xdp_line(x: &psp_metrics::XdpSummary) -> String {
    let dropped: Vec<String> = x
        .dropped
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    format!(
        "af_xdp: {} ({} queue(s), {} mode, XDP in the {}) | frames {} = {} with requests + {} lent for receive + {} free for transmit + {} in flight (leaked {}) | transmitted {} | malformed frames dropped {} ({}) | kernel: rx dropped {}, rx ring full {}, fill ring empty {}, tx invalid {}",
        x.interface,
        x.queues,
        if x.zero_copy { "zero-copy" } else { "copy" },
        x.attach_mode,
        x.frames_total,
        x.frames_with_tokens,
        x.frames_lent_for_rx,
        x.frames_free_for_tx,
        x.frames_in_tx,
        x.frames_leaked,
        x.transmitted,
        x.dropped_total(),
        if dropped.is_empty() {
            "none".into()
        } else {
            dropped.join(", ")
        },
        x.kernel_rx_dropped,
        x.kernel_rx_ring_full,
        x.kernel_fill_ring_empty,
        x.kernel_tx_invalid,
    )
}

/// `psp load` arguments.
#[derive(Args)]
pub struct LoadArgs {
    /// The server's address.
    #[arg(long, default_value = "127.0.0.1:7000")]
    server: String,
    #[command(flatten)]
    point: PointArgs,
    #[command(flatten)]
    offered: OfferedLoad,
    /// The server's policy, recorded in the report (the client cannot see it).
    #[arg(long, default_value = "unknown")]
    policy: String,
    /// Datapath: udp (kernel sockets, one per flow) or xdp (AF_XDP on the
    /// interface towards --server, which must be a neighbour; flow i sends
    /// from port 47000 + i; needs root).
    #[arg(long, default_value = "udp")]
    datapath: String,
    #[command(flatten)]
    xdp: XdpArgs,
    #[command(flatten)]
    client: ClientArgs,
    /// The application whose requests are sent (its options must match the
    /// server's, e.g. --kv-keys).
    #[command(flatten)]
    app: AppArgs,
    /// Write one CSV row per request (id, type, scheduled time, latency, status).
    #[arg(long)]
    samples: Option<PathBuf>,
    /// Print the point as JSON.
    #[arg(long)]
    json: bool,
    /// The server's --metrics address (host:port): before the run, read the
    /// mean service time it measured for each type, and turn --load into a
    /// rate by the measured mean of every type with at least 100 measured
    /// requests (by the declared one otherwise); warm the server up with a
    /// short run at the same load first.
    #[arg(long, value_name = "METRICS_ADDR", conflicts_with = "rps")]
    server_profile: Option<String>,
    /// With --server-profile: first offer the load for this long (e.g. 2s),
    /// read the server's service times before and after, and set the
    /// measured run's rate by the means of that run alone: the times under
    /// this load's contention, not since the server started.
    #[arg(
        long,
        value_name = "DURATION",
        requires = "server_profile",
        allow_hyphen_values = true
    )]
    calibrate: Option<String>,
}

fn load_config(
    server: SocketAddr,
    workload: &Workload,
    app: &AppConfig,
    sim: &SimConfig,
    client: &ClientArgs,
    keep_samples: bool,
) -> Result<LoadConfig> {
    Ok(LoadConfig {
        server,
        workload: workload.clone(),
        bodies: app.encoders(&type_names(workload)),
        rate_rps: sim.rate_rps,
        duration_ns: workload.arrival_period_ns(sim.duration_ns),
        workers: sim.workers,
        warmup_ns: (workload.arrival_period_ns(sim.duration_ns) as f64 * sim.warmup_fraction)
            as u64,
        seed: sim.seed,
        flows: client.flows,
        timeout: client.check()?,
        keep_samples,
        raise_priority: !client.no_raise_priority,
        datapath: Default::default(),
    })
}

/// Runs the client with a progress bar on stderr (hidden when not a terminal).
fn load_with_progress(cfg: &LoadConfig) -> Result<LoadReport> {
    let expected = cfg
        .workload
        .expected_requests(cfg.rate_rps, cfg.duration_ns, cfg.workers)
        .round() as u64;
    let bar = ProgressBar::new(expected.max(1));
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} sent {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let progress = Progress::default();
    let done = AtomicBool::new(false);
    let report = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                bar.set_position(progress.sent.load(Ordering::Relaxed));
                bar.set_message(format!(
                    "{} received",
                    progress.received.load(Ordering::Relaxed)
                ));
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let r = run_load(cfg, &progress);
        done.store(true, Ordering::Relaxed);
        r
    });
    bar.finish_and_clear();
    report.with_context(|| format!("cannot load {}", cfg.server))
}

fn write_samples(path: &Path, cfg: &LoadConfig, rep: &LoadReport) -> Result<()> {
    let mut out = String::with_capacity(rep.samples.len() * 48 + 64);
    out.push_str("id,type,scheduled_us,latency_us,service_us,status,measured\n");
    let mut samples = rep.samples.clone();
    samples.sort_by_key(|s| s.id);
    for s in &samples {
        use std::fmt::Write as _;
        let _ = writeln!(
            out,
            "{},{},{:.3},{:.3},{:.3},{},{}",
            s.id,
            cfg.workload.types[s.type_id as usize].name,
            s.scheduled_ns as f64 / 1e3,
            s.latency_ns as f64 / 1e3,
            s.service_ns as f64 / 1e3,
            s.status.map_or("TIMEOUT", |st| st.name()),
            s.measured
        );
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create '{}'", dir.display()))?;
    }
    std::fs::write(path, out).with_context(|| format!("cannot write '{}'", path.display()))
}

/// Offered loads (by the declared service times) up to which the client
/// expects every type's median latency within [`CLIENT_LATENCY_FACTOR`] x its
/// declared mean service time plus [`CLIENT_LATENCY_FLOOR_US`].
const CLIENT_WARN_MAX_LOAD: f64 = 0.8;
/// See [`CLIENT_WARN_MAX_LOAD`].
const CLIENT_LATENCY_FACTOR: f64 = 10.0;
/// See [`CLIENT_WARN_MAX_LOAD`]: room for the network round trip.
const CLIENT_LATENCY_FLOOR_US: f64 = 1000.0;

/// The client's side of the service-time check. Replies carry no service
/// time, so the client judges by latency: at a load the declared service times
/// put at [`CLIENT_WARN_MAX_LOAD`] or less, a type whose median latency is past
/// [`CLIENT_LATENCY_FACTOR`] x its declared mean plus [`CLIENT_LATENCY_FLOOR_US`]
/// means the server carries far more than the declared load (slower service
/// than declared), or is shared.
fn latency_warning(point: &PointResult) -> Option<String> {
    if point.load > CLIENT_WARN_MAX_LOAD {
        return None;
    }
    let slow: Vec<String> = point
        .types
        .iter()
        .filter(|t| {
            t.count > 0
                && t.mean_service_us > 0.0
                && t.p50_latency_us
                    > CLIENT_LATENCY_FACTOR * t.mean_service_us + CLIENT_LATENCY_FLOOR_US
        })
        .map(|t| {
            format!(
                "{} median latency {:.0} us, {:.0}x its declared {:.2} us",
                t.name,
                t.p50_latency_us,
                t.p50_latency_us / t.mean_service_us,
                t.mean_service_us
            )
        })
        .collect();
    (!slow.is_empty()).then(|| {
        format!(
            "warning: at {:.0}% load by the workload's declared service times, {}: the server's real service times are likely longer than declared, so it runs at more than that load; its summary, statistics lines and /metrics report the measured utilization beside the declared one; measure the real times with `psp profile` and use the workload file it writes, or rate --load by the server's measured times with `psp load --server-profile`",
            point.load * 100.0,
            slow.join("; ")
        )
    })
}

/// Runs `psp load`.
pub fn load(a: LoadArgs) -> Result<()> {
    let server = parse_addr(&a.server, "--server")?;
    // --flows counts the client's sockets here: their range, not the
    // simulator's, which the point's own check below would name.
    let client = a.client.clone().with_flows(a.point.flows);
    client.check()?;
    let workload = crate::profile::resolve_workload(&a.point.workload)?;
    let point = a.point.clone().with_default_workers(Mode::Net);
    let workers = limits::WORKERS.check(point.workers())?;
    let calibrate = a
        .calibrate
        .as_deref()
        .map(|d| limits::CALIBRATE.parse(d))
        .transpose()?;
    // The server's measured means, read before anything else is set up.
    let profile = a
        .server_profile
        .as_deref()
        .map(|addr| server_profile::fetch(addr, &workload))
        .transpose()?;
    let rate_workload = profile.as_ref().map_or(&workload, |p| &p.0.rate_workload);
    let rate = a.offered.rate(rate_workload, workers)?;
    let sim = point.config(&workload, rate)?;
    let app = a.app.config(&workload, u64::MAX)?;
    let datapath = a.xdp.datapath(&a.datapath)?;
    // --calibrate: a run at that rate first; its own service times (the
    // server's counters before and after it) set the measured run's rate.
    let (profile, rate, sim) = match (calibrate, profile) {
        (Some(span), Some((first, before))) => {
            let addr = a.server_profile.as_deref().unwrap_or_default();
            let short = psp_sim::SimConfig {
                duration_ns: span.as_nanos() as u64,
                ..sim.clone()
            };
            limits::point_requests(&workload, workers, rate, short.duration_ns)?;
            let mut cal = load_config(server, &workload, &app, &short, &client, false)?;
            cal.datapath = datapath.clone();
            eprintln!(
                "calibrating: {:.4e} requests/s for {span:?} ({})",
                rate,
                first.line(&workload, rate, workers)
            );
            load_with_progress(&cal)?;
            let (_, after) = server_profile::fetch(addr, &workload)?;
            let p = server_profile::of_run(addr, &workload, &before, &after)?;
            let rate = a.offered.rate(&p.rate_workload, workers)?;
            let sim = point.config(&workload, rate)?;
            (Some(p), rate, sim)
        }
        (_, profile) => (profile.map(|(p, _)| p), rate, sim),
    };
    // A phased workload runs its phases: their requests, not --duration's.
    limits::point_requests(&workload, workers, rate, sim.duration_ns)?;
    let mut cfg = load_config(server, &workload, &app, &sim, &client, a.samples.is_some())?;
    cfg.datapath = datapath;
    if let Some(p) = &profile {
        eprintln!("{}", p.line(&workload, rate, workers));
    }
    let rep = load_with_progress(&cfg)?;
    if let Some(path) = &a.samples {
        write_samples(path, &cfg, &rep)?;
        eprintln!("wrote {}", path.display());
    }
    let mut point = rep.to_point(&cfg, &a.policy, point.workers());
    if rep.responses.iter().sum::<u64>() == 0 && rep.scheduled > 0 {
        eprintln!(
            "warning: no response at all from {server}: is a server running there? (every request counted as a timeout)"
        );
    }
    match &profile {
        // The load by the means the rate was computed from, and those means.
        Some(p) => {
            point.load = p.load(rate, workers);
            if let Extra::Net(x) = &mut point.extra {
                x.rate_means = Some(p.means.clone());
            }
        }
        // The warning's premise: declared service times that may be off.
        None => {
            if let Some(w) = latency_warning(&point) {
                eprintln!("{w}");
            }
        }
    }
    if rep.rejected.total() > 0 {
        eprintln!(
            "warning: {} replies rejected (not answers to requests this client sent on that flow, or duplicates): {:?}",
            rep.rejected.total(),
            rep.rejected
        );
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&point)?);
    } else {
        print!("{}", report::point_table(&point));
    }
    Ok(())
}

// ------------------------------------------------------------ sweep --mode net

/// How `psp sweep --mode net` measures points.
#[derive(Debug, Clone)]
pub struct NetOptions {
    /// Use this running server instead of starting one per point.
    pub server: Option<SocketAddr>,
    /// Client options.
    pub client: ClientArgs,
    /// The server's pinning (`None`: automatic).
    pub cores: Option<Vec<usize>>,
    /// The server's idle strategy.
    pub idle: IdleStrategy,
}

/// One point over loopback: starts a server running `spec` on `cfg.workers`
/// workers (unless `opts.server` names a running one), runs the client at
/// `cfg`'s rate, stops the server and reports the client's measurements, with
/// the server's summary in `extra.server` and its final reservation in
/// `extra.reservation`.
pub fn measure(
    workload: &Workload,
    app: &AppConfig,
    spec: &PolicySpec,
    cfg: &SimConfig,
    opts: &NetOptions,
) -> Result<PointResult> {
    crate::run::ideal_system_only(cfg)?;
    let server = match opts.server {
        Some(_) => None,
        None => Some(Server::start(ServerConfig {
            addr: "127.0.0.1:0".parse().expect("literal address"),
            metrics: None,
            runtime: RuntimeConfig {
                workers: cfg.workers,
                queue_capacity: cfg.queue_capacity,
                cores: opts.cores.clone(),
                idle: opts.idle,
                // A favoured dispatcher would starve a normal-priority client on
                // shared cores; a real-time client (the default) outranks it.
                raise_priority: !opts.client.no_raise_priority,
                ..RuntimeConfig::default()
            },
            policy: *spec,
            types: workload.type_infos(),
            classifier: cfg.classifier,
            app_classifier: None,
            handlers: psp_apps::handler_factory(
                app.start(&type_names(workload))?,
                spec.feedback_threshold_ns(),
            ),
            datapath: Default::default(),
            protocol: Default::default(),
        })?),
    };
    let addr = opts
        .server
        .or(server.as_ref().map(Server::local_addr))
        .expect("a server");
    let lc = load_config(addr, workload, app, cfg, &opts.client, false)?;
    let rep = run_load(&lc, &Progress::default()).with_context(|| format!("cannot load {addr}"))?;
    let mut point = rep.to_point(&lc, &spec.to_string(), cfg.workers);
    if let Some(s) = server {
        let summary = server_summary(&s.stop()?, &declared(workload));
        let Extra::Net(net) = &mut point.extra else {
            unreachable!("the client's points are net points")
        };
        net.reservation = summary.reservation.clone();
        net.server = LoadedServer::Summary(Box::new(summary));
    }
    Ok(point)
}

// ----------------------------------------------------------------- psp echo

/// `psp echo` arguments.
#[derive(Args)]
pub struct EchoArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7001")]
    address: String,
    /// Threads, each with its own SO_REUSEPORT socket (udp; the xdp echo
    /// server runs one thread over every queue).
    #[arg(long, allow_hyphen_values = true, default_value_t = 2)]
    threads: usize,
    /// Datapath: udp or xdp (AF_XDP on the interface that holds --address;
    /// turns each datagram around in the frame it arrived in).
    #[arg(long, default_value = "udp")]
    datapath: String,
    #[command(flatten)]
    xdp: XdpArgs,
    /// Stop by itself after this long (default: run until SIGINT or SIGTERM).
    #[arg(long, allow_hyphen_values = true)]
    duration: Option<String>,
}

/// Runs `psp echo`.
pub fn echo(a: EchoArgs) -> Result<()> {
    let addr = parse_addr(&a.address, "--address")?;
    limits::ECHO_THREADS.check(a.threads)?;
    let duration = a
        .duration
        .as_deref()
        .map(|d| limits::SERVE_DURATION.parse(d))
        .transpose()?;
    let datapath = a.xdp.datapath(&a.datapath)?;
    let (stop, finish, line): (_, Box<dyn FnOnce() -> u64>, String) = match &datapath {
        DatapathKind::Udp => {
            let s = EchoServer::start(addr, a.threads)
                .with_context(|| format!("cannot listen on {addr}"))?;
            let line = format!(
                "psp echo: listening on udp://{} with {} threads (SO_REUSEPORT, blocking recv_from/send_to)",
                s.local_addr(),
                a.threads
            );
            (s.stop_flag(), Box::new(move || s.stop()), line)
        }
        DatapathKind::Xdp(x) => {
            let s = psp_net::xdp::XdpEcho::start(x, addr)
                .with_context(|| format!("cannot listen on {addr} (AF_XDP)"))?;
            let line = format!(
                "psp echo: listening on xdp://{} (one thread, every queue, replies written over the request's frame)",
                s.local_addr()
            );
            (s.stop_flag(), Box::new(move || s.stop()), line)
        }
        DatapathKind::Tcp(..) => bail!("psp echo serves udp or xdp"),
    };
    stop_on_signals(&stop)?;
    println!("{line}");
    let _ = std::io::stdout().flush();
    let started = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("echoed {} datagrams", finish());
    Ok(())
}

// ------------------------------------------------------------- psp netbench

/// `psp netbench` arguments.
#[derive(Args)]
pub struct NetbenchArgs {
    /// Offered rates to try, in requests per second (e.g. 50000,100000,200000).
    #[arg(
        long,
        allow_hyphen_values = true,
        default_value = "25000,50000,100000,150000,200000,250000,300000"
    )]
    rates: String,
    /// Length of each measurement.
    #[arg(long, allow_hyphen_values = true, default_value = "2s")]
    duration: String,
    /// psp serve's workers (and the echo server's threads).
    #[arg(long, allow_hyphen_values = true, default_value_t = 1)]
    workers: usize,
    /// psp serve's policy.
    #[arg(long, default_value = "c-fcfs")]
    policy: String,
    /// psp serve's idle strategy: spin, yield, park or park:SPIN_US.
    #[arg(long, default_value = "park")]
    idle: String,
    /// Largest tolerated fraction of lost requests for a rate to count as sustained.
    #[arg(long, allow_hyphen_values = true, default_value_t = 0.001)]
    max_loss: f64,
    /// Sockets (source ports) the client spreads its requests over.
    #[arg(long, allow_hyphen_values = true, default_value_t = DEFAULT_SOCKETS)]
    flows: usize,
    /// The servers' datapaths, each measured in turn: udp, xdp or udp,xdp
    /// (xdp needs --netns).
    #[arg(long, default_value = "udp")]
    datapaths: String,
    /// The client's datapath: udp, xdp, or same (the server's) [default: same].
    #[arg(long, default_value = "same")]
    client_datapath: String,
    /// Run the servers in namespace PREFIX-srv at --server-ip:7000 and the
    /// client in PREFIX-cli, over the veth pair `scripts/netns.sh up --prefix
    /// PREFIX` makes [default: both on loopback, udp only].
    #[arg(long)]
    netns: Option<String>,
    /// The server's address in PREFIX-srv (with --netns).
    #[arg(long, default_value = "10.77.0.1")]
    server_ip: std::net::Ipv4Addr,
    #[command(flatten)]
    xdp: XdpArgs,
    #[command(flatten)]
    client: ClientArgs,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `f` in network namespace `ns`, or here.
fn in_ns<T: Send>(ns: Option<&str>, f: impl FnOnce() -> T + Send) -> Result<T> {
    match ns {
        Some(ns) => Ok(psp_net::xdp::device::in_namespace(ns, f)?),
        None => Ok(f()),
    }
}

/// Runs `psp netbench`: at each rate, the same client measures psp serve (0 us
/// requests, echo application) and then the plain echo server.
pub fn netbench(mut a: NetbenchArgs) -> Result<()> {
    a.client = a.client.with_flows(Some(a.flows));
    limits::RATE_POINTS.check(a.rates.split(',').count())?;
    let rates: Vec<f64> = a
        .rates
        .split(',')
        .map(|r| match r.trim().parse::<f64>() {
            Ok(v) => limits::RATE.check(v),
            Err(_) => bail!("--rates: '{r}' is not a rate in requests per second"),
        })
        .collect::<Result<_>>()?;
    limits::WORKERS.check(a.workers)?;
    let spec: PolicySpec = a.policy.parse()?;
    let idle = limits::idle(&a.idle)?;
    let duration_ns = limits::DURATION.parse_ns(&a.duration)?;
    limits::MAX_LOSS.check(a.max_loss)?;
    a.client.check()?;
    for &rate in &rates {
        limits::requests(rate, duration_ns)?;
    }
    let workload = Workload::fixed("zero", &[("req", 0.0, 1.0)]);
    let sim = SimConfig {
        workers: a.workers,
        rate_rps: 0.0,
        duration_ns,
        warmup_fraction: 0.1,
        seed: 1,
        flows: psp_workload::DEFAULT_FLOWS,
        queue_capacity: 4096,
        system: psp_sim::SystemCosts::default(),
        classifier: ClassifierKind::Header,
        series_window_ns: None,
    };
    spec.build(&psp_core::PolicyContext {
        workers: a.workers,
        types: workload.type_infos(),
        queue_capacity: sim.queue_capacity,
    })?;
    let names: Vec<&str> = a.datapaths.split(',').map(str::trim).collect();
    limits::DATAPATHS.check(names.len())?;
    let mut datapaths = Vec::new();
    for n in &names {
        if datapaths.iter().any(|d: &DatapathKind| d.name() == *n) {
            bail!("--datapaths: '{n}' twice");
        }
        datapaths.push(if *n == "udp" {
            DatapathKind::Udp
        } else {
            a.xdp.datapath(n)?
        });
    }
    let client_datapath = match a.client_datapath.as_str() {
        "same" => None,
        d => Some(a.xdp.datapath(d)?),
    };
    let (srv_ns, cli_ns) = match &a.netns {
        // scripts/netns.sh's rule: it names files under /var/run/netns.
        Some(p)
            if p.is_empty()
                || p.len() > 14
                || !p
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
        {
            bail!("--netns wants 1 to 14 of [A-Za-z0-9_-] (scripts/netns.sh's --prefix), not '{p}'")
        }
        Some(p) => (Some(format!("{p}-srv")), Some(format!("{p}-cli"))),
        None => (None, None),
    };
    let needs_ns = datapaths
        .iter()
        .chain(&client_datapath)
        .any(|d| matches!(d, DatapathKind::Xdp(_)));
    if needs_ns && a.netns.is_none() {
        bail!(
            "--datapaths xdp needs --netns PREFIX (two namespaces joined by a veth pair: scripts/netns.sh up --prefix PREFIX)"
        );
    }
    let addr: SocketAddr = match &a.netns {
        Some(_) => SocketAddr::from((a.server_ip, 7000)),
        None => "127.0.0.1:0".parse().expect("literal address"),
    };
    let mut rows = Vec::new();
    for datapath in &datapaths {
        let dp = datapath.name();
        for &rate in &rates {
            let sim = SimConfig {
                rate_rps: rate,
                ..sim.clone()
            };
            for kind in ["psp-serve", "echo"] {
                let (addr, stop) = in_ns(srv_ns.as_deref(), || {
                    netbench_server(kind, datapath, addr, a.workers, idle, spec, &workload)
                })??;
                let mut lc = load_config(
                    addr,
                    &workload,
                    &AppConfig::new(psp_apps::EchoConfig),
                    &sim,
                    &a.client,
                    false,
                )?;
                // A saturation benchmark: the client must not outrank either server.
                lc.raise_priority = false;
                lc.datapath = client_datapath.clone().unwrap_or_else(|| datapath.clone());
                let rep = in_ns(cli_ns.as_deref(), || run_load(&lc, &Progress::default()));
                let server = stop()?;
                let rep = rep??;
                let point = rep.to_point(&lc, kind, a.workers);
                let p99 = point.types[0].p99_latency_us;
                eprintln!(
                    "{dp} {kind:>9} at {:>8.0} rps: achieved {:>8.0} rps, loss {:.4}%, p50 {:.1} us, p99 {:.1} us, client lag p99 {:.1} us",
                    rate,
                    point.achieved_rps,
                    point.loss_fraction * 100.0,
                    point.types[0].p50_latency_us,
                    p99,
                    rep.send_lag_ns[1] as f64 / 1e3
                );
                rows.push(json!({
                    "datapath": dp,
                    "client_datapath": lc.datapath.name(),
                    "server": kind,
                    "offered_rps": rate,
                    "achieved_rps": point.achieved_rps,
                    "loss_fraction": point.loss_fraction,
                    "p50_latency_us": point.types[0].p50_latency_us,
                    "p99_latency_us": p99,
                    "client_send_lag_p99_us": rep.send_lag_ns[1] as f64 / 1e3,
                    "server_counters": server,
                }));
            }
        }
    }
    // The highest rate of the ladder before the first one past --max-loss.
    let sustained = |dp: &str, kind: &str| {
        let mut best = None;
        for r in rows
            .iter()
            .filter(|r| r["server"] == kind && r["datapath"] == dp)
        {
            if r["loss_fraction"].as_f64().unwrap_or(1.0) > a.max_loss {
                break;
            }
            best = r["offered_rps"].as_f64();
        }
        best
    };
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => Some(a / b),
        _ => None,
    };
    let mut summary = serde_json::Map::new();
    let mut lines = Vec::new();
    let f = |v: Option<f64>| v.map_or("none".to_string(), |v| format!("{v:.0} rps"));
    let r2 = |v: Option<f64>| v.map_or("n/a".to_string(), |r| format!("{r:.2}"));
    for d in &datapaths {
        let dp = d.name();
        let (ours, echo) = (sustained(dp, "psp-serve"), sustained(dp, "echo"));
        summary.insert(
            dp.into(),
            json!({
                "sustained_rps": {"psp-serve": ours, "echo": echo},
                "ratio_psp_over_echo": ratio(ours, echo),
            }),
        );
        lines.push(format!(
            "{dp}: psp serve ({spec}) {} | echo server {} | ratio {}",
            f(ours),
            f(echo),
            r2(ratio(ours, echo))
        ));
    }
    let xdp_over_udp = ratio(sustained("xdp", "psp-serve"), sustained("udp", "psp-serve"));
    let doc = json!({
        "workers": a.workers,
        "policy": spec.to_string(),
        "idle": a.idle,
        "duration_s": duration_ns as f64 / 1e9,
        "max_loss": a.max_loss,
        "flows": a.client.flows,
        "netns": a.netns,
        "datapaths": summary,
        "ratio_psp_serve_xdp_over_udp": xdp_over_udp,
        "points": rows,
    });
    if a.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        println!(
            "highest sustained rate (loss <= {}%), 0 us requests, {} worker(s)/thread(s):",
            a.max_loss * 100.0,
            a.workers,
        );
        for l in lines {
            println!("  {l}");
        }
        if datapaths.len() > 1 {
            println!("  psp serve xdp / udp: {}", r2(xdp_over_udp));
        }
    }
    Ok(())
}

/// What stops a netbench server and returns its counters.
type StopServer = Box<dyn FnOnce() -> Result<serde_json::Value> + Send>;

/// Starts `kind` (psp-serve or echo) on `datapath` at `addr`.
fn netbench_server(
    kind: &str,
    datapath: &DatapathKind,
    addr: SocketAddr,
    workers: usize,
    idle: IdleStrategy,
    spec: PolicySpec,
    workload: &Workload,
) -> Result<(SocketAddr, StopServer)> {
    Ok(match (kind, datapath) {
        ("psp-serve", _) => {
            let s = Server::start(ServerConfig {
                addr,
                metrics: None,
                runtime: RuntimeConfig {
                    workers,
                    idle,
                    // As the echo server's threads: normal priority.
                    raise_priority: false,
                    ..RuntimeConfig::default()
                },
                policy: spec,
                types: workload.type_infos(),
                classifier: ClassifierKind::Header,
                app_classifier: None,
                handlers: psp_apps::handler_factory(Arc::new(psp_apps::spin::EchoService), None),
                datapath: datapath.clone(),
                protocol: Default::default(),
            })?;
            let d = declared(workload);
            (
                s.local_addr(),
                Box::new(move || Ok(serde_json::to_value(server_summary(&s.stop()?, &d))?)),
            )
        }
        (_, DatapathKind::Udp) => {
            let s = EchoServer::start(addr, workers)?;
            (
                s.local_addr(),
                Box::new(move || Ok(json!({"echoed": s.stop()}))),
            )
        }
        (_, DatapathKind::Tcp(..)) => bail!("psp netbench measures udp and xdp"),
        (_, DatapathKind::Xdp(x)) => {
            let s = psp_net::xdp::XdpEcho::start(x, addr)
                .with_context(|| format!("AF_XDP echo server on {addr}"))?;
            (
                s.local_addr(),
                Box::new(move || Ok(json!({"echoed": s.stop()}))),
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `psp serve`'s default lends (mech=ci) only where the workers leave the
    /// dispatcher a core of its own; every choice parses.
    #[test]
    fn the_serving_default_lends_only_where_the_dispatcher_keeps_a_core() {
        assert_eq!(serve_default_policy(14, 16), "darc-fair");
        assert_eq!(serve_default_policy(1, 2), "darc-fair");
        assert_eq!(serve_default_policy(2, 2), "darc-fair:mech=none");
        assert_eq!(serve_default_policy(16, 16), "darc-fair:mech=none");
        for (w, c) in [(1, 1), (14, 16), (2, 2)] {
            serve_default_policy(w, c).parse::<PolicySpec>().unwrap();
        }
    }

    fn latency(name: &str, completed: u64, svc: f64, declared: Option<f64>) -> ServerTypeLatency {
        ServerTypeLatency {
            name: name.into(),
            completed,
            mean_service_us: svc,
            declared_service_us: declared,
            p50_latency_us: svc,
            p99_latency_us: svc,
            p999_latency_us: svc,
            shed: 0,
        }
    }

    /// The server summary names the types more than 1.5x off their declared
    /// mean service time (either way), once they have 100 completions.
    #[test]
    fn server_warning_names_types_off_their_declared_times() {
        let w = service_warning(&[
            latency("GET", 5000, 11.0, Some(1.5)),
            latency("SCAN", 5000, 1170.0, Some(635.0)),
            latency("PUT", 5000, 1.0, Some(1.2)),
            latency("FEW", 99, 100.0, Some(1.0)),
            latency("FAST", 5000, 1.0, Some(2.0)),
            latency("NONE", 5000, 1.0, None),
        ])
        .expect("a warning");
        assert!(w.contains("GET 7.33x") && w.contains("SCAN 1.84x"), "{w}");
        assert!(w.contains("FAST 0.50x") && w.contains("psp profile"), "{w}");
        assert!(
            !w.contains("PUT") && !w.contains("FEW") && !w.contains("NONE"),
            "{w}"
        );
        assert!(service_warning(&[latency("GET", 5000, 1.4, Some(1.0))]).is_none());
    }

    fn client_point(load: f64, svc_us: f64, p50_us: f64) -> PointResult {
        let mut rec = psp_metrics::Recorder::new(["SCAN"]);
        for _ in 0..100 {
            rec.record(0, (p50_us * 1e3) as u64, (svc_us * 1e3) as u64);
        }
        let meta = psp_metrics::PointMeta {
            mode: "net",
            workload: "rocksdb".into(),
            policy: "darc".into(),
            workers: 2,
            load,
            offered_rps: 1.0,
            duration_s: 1.0,
            measured_s: 1.0,
            seed: 1,
        };
        let extra = psp_metrics::NetExtra {
            server: LoadedServer::Address("127.0.0.1:7000".into()),
            flows: 1,
            timeout_ms: 1000.0,
            scheduled_total: 100,
            sent_total: 100,
            send_errors: 0,
            responses_total: psp_metrics::ResponsesByStatus {
                ok: 100,
                ..Default::default()
            },
            late_responses: 0,
            unexpected_datagrams: 0,
            rejected_replies: Default::default(),
            send_lag_us: Default::default(),
            wall_s: 1.0,
            reservation: None,
            rate_means: None,
        };
        PointResult::new(meta, &rec, 100, Extra::Net(Box::new(extra)))
    }

    /// The client warns when a type's median latency is past 10x its declared
    /// mean plus 1 ms at a declared load of 80% or less.
    #[test]
    fn client_warns_of_latency_far_past_the_declared_service() {
        let w = latency_warning(&client_point(0.3, 635.0, 737_000.0)).expect("a warning");
        assert!(
            w.contains("SCAN median latency") && w.contains("psp profile"),
            "{w}"
        );
        // Within the bound, or at a load where queueing may explain it: quiet.
        assert!(latency_warning(&client_point(0.3, 635.0, 7_000.0)).is_none());
        assert!(latency_warning(&client_point(0.9, 635.0, 737_000.0)).is_none());
    }
}
