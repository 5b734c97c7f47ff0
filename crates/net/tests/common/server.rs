//! A server as the application and protocol tests run it: 2 workers, a
//! short drain, normal priority.

use std::sync::Arc;
use std::time::Duration;

use psp_core::TypeInfo;
use psp_net::dgram::DatagramProtocol;
use psp_net::{ClassifierKind, DatapathKind, Server, ServerConfig};
use psp_runtime::RuntimeConfig;

/// Every registered policy, with parameters that make short runs
/// meaningful: DARC profiles after 20 completions; the preemptive ones keep
/// their default quanta (a few µs), far below the long requests. Generated
/// from the registry ([`psp_core::policy::registry::examples_with`]): a
/// policy added there is in every test that runs this list.
pub fn policies() -> Vec<&'static str> {
    let mut all = Vec::new();
    for p in psp_core::policy::registry::examples_with(&[("samples", "20")]) {
        if p.starts_with("darc-fair:") {
            // `psp serve`'s default, both ways it runs: lending (and
            // reclaiming) as darc-lend does, its owed rule out of the way
            // (what a type is owed is never reclaimed, so with it a short
            // run may order no reclaim, which the matrix requires of a
            // preemptive policy); and without lending, its owed rule quick
            // to fire (it owes a type its share after one mean of waiting).
            all.push(format!("{p},patience=1000"));
            all.push(format!("{p},patience=1,mech=none"));
        } else {
            all.push(p);
        }
    }
    // Leaked (a few short strings per call, in tests only): the servers and
    // threads the tests start take `&'static str`.
    all.into_iter().map(|p| &*p.leak()).collect()
}

/// The key-value application behind `protocol`, 100 keys loaded: the store
/// of the protocol tests' servers.
pub fn kv_service(protocol: &'static dyn psp_proto::Protocol) -> Arc<dyn psp_apps::Service> {
    let config = psp_apps::KvConfig {
        keys: 100,
        ..psp_apps::KvConfig::default()
    };
    Arc::new(psp_apps::kv::ProtocolService::open(protocol, &config).expect("the store opens"))
}

/// `service` behind `policy` over `datapath` speaking `protocol` (datagram
/// servers), with request types `types`.
pub fn start(
    service: Arc<dyn psp_apps::Service>,
    types: Vec<TypeInfo>,
    policy: &str,
    datapath: DatapathKind,
    protocol: DatagramProtocol,
) -> Server {
    start_with(service, types, policy, datapath, protocol, runtime())
}

/// The runtime of the tests' servers: 2 workers, a short drain, normal
/// priority, threads that sleep when idle.
pub fn runtime() -> RuntimeConfig {
    RuntimeConfig {
        workers: 2,
        queue_capacity: 1024,
        drain_timeout: Duration::from_secs(5),
        raise_priority: false,
        // Threads sleep when idle: no more spinning threads than cores.
        idle: psp_runtime::IdleStrategy::SpinPark {
            spin_us: 0,
            park_us: 1_000,
        },
        ..RuntimeConfig::default()
    }
}

/// As [`start`], on `runtime`.
pub fn start_with(
    service: Arc<dyn psp_apps::Service>,
    types: Vec<TypeInfo>,
    policy: &str,
    datapath: DatapathKind,
    protocol: DatagramProtocol,
    runtime: RuntimeConfig,
) -> Server {
    Server::start(ServerConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        metrics: None,
        runtime,
        policy: policy.parse().unwrap(),
        types,
        classifier: ClassifierKind::Header,
        app_classifier: None,
        handlers: psp_apps::handler_factory(service, None),
        datapath,
        protocol,
    })
    .expect("server starts")
}

/// A protocol's request types with their declared means (µs).
pub fn types(names: &[&str], means_us: &[f64]) -> Vec<TypeInfo> {
    names
        .iter()
        .zip(means_us)
        .map(|(n, us)| TypeInfo {
            name: (*n).into(),
            mean_service_ns: Some(us * 1e3),
        })
        .collect()
}

/// `service` behind `policy` speaking RESP over TCP with `tcp`, on
/// `runtime`: the Redis tests' server.
#[allow(dead_code)] // not every test binary serves RESP
pub fn resp(
    service: Arc<dyn psp_apps::Service>,
    policy: &str,
    tcp: psp_net::tcp::TcpConfig,
    runtime: RuntimeConfig,
) -> Server {
    start_with(
        service,
        types(&psp_proto::resp::TYPES, &psp_proto::resp::TYPE_MEAN_US),
        policy,
        DatapathKind::Tcp(psp_proto::find("resp").expect("registered"), tcp),
        DatagramProtocol::default(),
        runtime,
    )
}
