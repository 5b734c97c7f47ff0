//! The point `psp sweep --mode net` measures: a server over loopback (or a
//! running one), the open-loop client against it, the server's summary
//! folded into the client's point.

use std::net::SocketAddr;

use anyhow::{Context, Result};
use psp_apps::AppConfig;
use psp_core::PolicySpec;
use psp_metrics::{Extra, LoadedServer, PointResult};
use psp_net::client::{Progress, run_load};
use psp_net::{Server, ServerConfig};
use psp_runtime::{IdleStrategy, RuntimeConfig};
use psp_sim::{SimConfig, Workload};

use super::{ClientArgs, load_config, server_summary};
use crate::app::{declared, type_names};

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
            policy: spec.clone(),
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
