//! `psp serve`'s plan: every option from its flag, else the `--config` file,
//! checked (ranges in [`limits`]) and turned into the server's config, the
//! application and the workload. Nothing listens or spawns here; only the
//! application opens (last, once everything else is known to be right).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use psp_core::PolicySpec;
use psp_net::dgram::DatagramProtocol;
use psp_net::server::DatapathKind;
use psp_net::{ClassifierKind, ServerConfig};
use psp_proto::{ProtocolEntry, Transport};
use psp_runtime::{RuntimeConfig, StatsConfig};
use psp_sim::Workload;

use super::{ServeArgs, load_serve_file};
use crate::app::{AppArgs, type_names};
use crate::net::{default_max_service_ns, parse_addr};
use crate::{Mode, PointArgs, limits};

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
        match (flag, file) {
            (Some(v), _) => check(v.clone()).map(Some),
            (None, Some(v)) => self.named(true, check(v.clone()).map(Some)),
            _ => Ok(None),
        }
    }

    /// `r`, its error naming the file where the file gave (some of) the
    /// values it was checked from.
    fn named<T>(&self, from_file: bool, r: Result<T>) -> Result<T> {
        match self.config {
            Some(path) if from_file => r.with_context(|| format!("'{}'", path.display())),
            _ => r,
        }
    }
}

/// `--protocol`'s choices in words, from the registry: this project's
/// protocol, then each registered one with what it is.
pub(super) fn protocols_about() -> String {
    let mut names = vec!["psp (this project's, over --datapath)".to_string()];
    names.extend(
        psp_proto::PROTOCOLS
            .iter()
            .map(|e| format!("{} ({}, on the --store)", e.name, e.about)),
    );
    psp_proto::or_list(&names)
}

/// Everything `psp serve` starts from.
pub(super) struct ServePlan {
    pub(super) cfg: ServerConfig,
    /// The application behind the handlers (described at start, checked at
    /// the end).
    pub(super) service: Arc<dyn psp_apps::Service>,
    pub(super) workload: Workload,
    pub(super) duration: Option<Duration>,
    /// The summary as JSON on stdout (`--json`).
    pub(super) json: bool,
}

/// The protocol and what carries it: `--protocol`, `--datapath` with its
/// `--xdp-*` settings or the `--tcp-*` bounds, and `--address`.
struct Front {
    datapath: DatapathKind,
    dgram: DatagramProtocol,
    protocol: String,
    /// A protocol of the registry: it registers its own types and serves
    /// the kv store (`None`: this project's datagram protocol).
    entry: Option<&'static ProtocolEntry>,
    addr: SocketAddr,
}

/// Everything `psp serve` needs, from its flags and `--config` file (flags
/// winning), every value checked: nothing starts before this returns.
pub(super) fn serve_plan(a: &ServeArgs) -> Result<ServePlan> {
    let f = match &a.config {
        Some(p) => load_serve_file(p)?,
        None => ServeArgs::default(),
    };
    let src = Sources {
        config: a.config.as_deref(),
    };
    let front = front(a, &f, &src)?;
    let metrics = src.pick(&a.metrics, &f.metrics, |s| parse_addr(&s, "--metrics"))?;
    let workload = workload(a, &f, &src, &front)?;
    let policy = src.pick(&a.policy, &f.policy, |s| Ok(workload.policy(&s)?))?;
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
    let (mut runtime, classifier) = runtime(a, &f, &src, workers, queue_capacity)?;
    let names = crate::app::type_names(&workload);
    runtime.max_wait = src
        .pick(&a.max_wait, &f.max_wait, |s| limits::max_wait(&s, &names))?
        .unwrap_or_default();
    let duration = src.pick(&a.duration, &f.duration, |s| {
        limits::SERVE_DURATION.parse(&s)
    })?;
    let max_service = src.pick(&a.max_service, &f.max_service, |s| {
        limits::MAX_SERVICE.parse(&s)
    })?;
    let app_args = a.app.or(&f.app);
    let max_service_ns = max_service.map_or(default_max_service_ns(&workload), |d| {
        u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
    });
    // Last: the application opens and loads its database (or calibrates its
    // spin, 50 ms).
    let service = service(a, &f, &src, &front, &app_args, &workload, max_service_ns)?;
    // A protocol over the in-memory store types each command by what it
    // will touch (its key's elements), read from the store.
    let mut datapath = front.datapath;
    if let DatapathKind::Tcp(_, t) = &mut datapath {
        t.sizes = service.sizes();
    }
    Ok(ServePlan {
        cfg: ServerConfig {
            addr: front.addr,
            metrics,
            runtime,
            policy: policy.clone(),
            types: workload.type_infos(),
            classifier,
            app_classifier: None,
            handlers: psp_apps::handler_factory(service.clone(), policy.feedback_threshold_ns()),
            datapath,
            protocol: front.dgram,
        },
        service,
        workload,
        duration,
        json: a.json || f.json,
    })
}

/// The protocol, its datapath and the address (`a` the flags, `f` the file).
fn front(a: &ServeArgs, f: &ServeArgs, src: &Sources) -> Result<Front> {
    let (xdp, tcp) = (a.xdp.or(&f.xdp), a.tcp.or(&f.tcp));
    let mut datapath = src.named(
        f.xdp.any(),
        xdp.datapath(
            &src.pick(&a.datapath, &f.datapath, Ok)?
                .unwrap_or_else(|| "udp".into()),
        ),
    )?;
    let protocol = src
        .pick(&a.protocol, &f.protocol, Ok)?
        .unwrap_or_else(|| "psp".into());
    let entry = match protocol.as_str() {
        "psp" => None,
        p => match psp_proto::find(p) {
            Some(e) => Some(e),
            None => bail!("--protocol must be {}, not '{p}'", protocols_about()),
        },
    };
    let stream = entry.filter(|e| e.transport == Transport::Tcp);
    if stream.is_none() && tcp.any() {
        let names: Vec<&str> = psp_proto::PROTOCOLS
            .iter()
            .filter(|e| e.transport == Transport::Tcp)
            .map(|e| e.name)
            .collect();
        return src.named(
            f.tcp.any(),
            Err(anyhow!(
                "--tcp-* options need --protocol {}",
                psp_proto::or_list(&names)
            )),
        );
    }
    // Datagrams of a registry protocol come in memcached's UDP frame.
    let dgram = match entry {
        Some(e) if e.transport == Transport::Udp => DatagramProtocol::Memcache,
        _ => DatagramProtocol::Psp,
    };
    if let Some(kind) = stream {
        if datapath != DatapathKind::Udp {
            bail!("--protocol {protocol} runs over TCP: leave --datapath out");
        }
        datapath = DatapathKind::Tcp(kind, src.named(f.tcp.any(), tcp.config())?);
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
    Ok(Front {
        datapath,
        dgram,
        protocol,
        entry,
        addr,
    })
}

/// The workload whose types the server registers: the protocol front end's
/// own, else `--workload` [default: high-bimodal].
fn workload(a: &ServeArgs, f: &ServeArgs, src: &Sources, front: &Front) -> Result<Workload> {
    if let Some(e) = front.entry {
        if a.workload.is_some() || f.workload.is_some() {
            bail!(
                "--protocol {} registers its own request types: leave --workload out",
                front.protocol
            );
        }
        return Ok(protocol_workload(
            e.protocol.types(),
            e.protocol.type_mean_us(),
        ));
    }
    Ok(src
        .pick(&a.workload, &f.workload, |s| {
            crate::profile::resolve_workload(&s)
        })?
        .map_or_else(|| Workload::resolve("high-bimodal"), Ok)?)
}

/// The runtime's settings past the workers and queues, and the classifier.
fn runtime(
    a: &ServeArgs,
    f: &ServeArgs,
    src: &Sources,
    workers: usize,
    queue_capacity: usize,
) -> Result<(RuntimeConfig, ClassifierKind)> {
    let cores = src.pick(&a.cores, &f.cores, |c| crate::run::parse_cores(&c))?;
    let idle = src
        .pick(&a.idle, &f.idle, |s| limits::idle(&s))?
        .unwrap_or_default();
    let poll_yield = src
        .pick(&a.poll_yield, &f.poll_yield, |s| limits::poll_yield(&s))?
        .unwrap_or_default();
    let inline_worker = src
        .pick(&a.inline_worker, &f.inline_worker, |s| {
            limits::inline_worker(&s)
        })?
        // Measured: with the server's threads taking all its cores, a
        // hand-off costs more than the parallelism it buys.
        .unwrap_or(psp_runtime::InlineWorker::Auto);
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
            json: a.stats_json || f.stats_json,
        });
    let drain_timeout = src
        .pick(&a.drain_timeout, &f.drain_timeout, |s| {
            limits::DRAIN_TIMEOUT.parse(&s)
        })?
        .unwrap_or(Duration::from_secs(10));
    let runtime = RuntimeConfig {
        workers,
        cores,
        idle,
        queue_capacity,
        drain_timeout,
        stats,
        raise_priority: !(a.no_raise_priority
            || f.no_raise_priority
            || f.raise_priority == Some(false)),
        series_window_ns: None,
        poll_yield,
        inline_worker,
        max_wait: Vec::new(),
        // The TCP front end sets the protocol's (`Protocol::open_ended_types`).
        open_ended_types: Vec::new(),
    };
    Ok((runtime, classifier))
}

/// The application behind the handlers, opened: the protocol front end's
/// store (`--store`, `--max-memory`, `--maxmemory-policy`), else `--app`.
fn service(
    a: &ServeArgs,
    f: &ServeArgs,
    src: &Sources,
    front: &Front,
    app_args: &AppArgs,
    workload: &Workload,
    max_service_ns: u64,
) -> Result<Arc<dyn psp_apps::Service>> {
    let store = src.pick(&a.store, &f.store, Ok)?;
    let max_memory = src.pick(&a.max_memory, &f.max_memory, |s| limits::max_memory(&s))?;
    let eviction = src.pick(&a.maxmemory_policy, &f.maxmemory_policy, |s| {
        limits::maxmemory_policy(&s)
    })?;
    let protocol = &front.protocol;
    let Some(entry) = front.entry else {
        if store.is_some() || max_memory.is_some() || eviction.is_some() {
            let names: Vec<&str> = psp_proto::PROTOCOLS.iter().map(|e| e.name).collect();
            bail!(
                "--store, --max-memory and --maxmemory-policy need --protocol {}",
                psp_proto::or_list(&names)
            );
        }
        return Ok(app_args
            .config(workload, max_service_ns)?
            .start(&type_names(workload))?);
    };
    if app_args.app.as_deref().is_some_and(|a| a != "kv") {
        bail!("--protocol {protocol} serves its own store (--store): leave --app out");
    }
    Ok(match store.as_deref().unwrap_or("mem") {
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
            let connections = match &front.datapath {
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
}
