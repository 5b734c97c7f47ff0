//! `psp serve`'s engine: what a server is configured with
//! ([`ServerConfig`]), how it starts over the chosen datapath (the datagram
//! front end, [`super::datagram`]) or TCP ([`super::tcp`]), serves metrics
//! ([`Exporter`]) and reports ([`ServerReport`]). How requests are parsed,
//! admitted and answered is the front ends'.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use psp_core::{Classifier, ClassifierKind, PolicySpec, TypeInfo};
use psp_runtime::{
    DispatchCore, DispatcherReport, FrontEnd, HandlerFactory, RunReport, RuntimeConfig,
    RuntimeError, SnapshotPublisher,
};

pub use super::counters::NetCounters;
use super::datagram::serve;
use crate::datapath::Datapath;
use crate::exporter::{DropProbe, Exporter, MetricsSource};
use crate::pool::PacketPool;
use crate::udp::UdpDatapath;
use crate::xdp::XdpDatapath;

/// Everything `psp serve` configures.
#[derive(Clone)]
pub struct ServerConfig {
    /// Where to listen (port 0: any free port).
    pub addr: SocketAddr,
    /// Where to serve Prometheus metrics over HTTP (`/metrics`; port 0: any
    /// free port), if anywhere.
    pub metrics: Option<SocketAddr>,
    /// Workers, pinning, idling, queue bounds, live statistics, drain timeout.
    pub runtime: RuntimeConfig,
    /// The scheduling policy.
    pub policy: PolicySpec,
    /// The registered request types (index = type id on the wire).
    pub types: Vec<TypeInfo>,
    /// How types are read from the protocol header (ignored when
    /// `app_classifier` is set).
    pub classifier: ClassifierKind,
    /// The application's own classifier (the paper's application-provided
    /// one): reads each request's body and names its type (an index of
    /// `types`; anything else is answered UNKNOWN_TYPE). The header's type
    /// field is then not read.
    pub app_classifier: Option<Arc<dyn ClassifierFactory>>,
    /// What the server serves: a handler per worker (or per request slot,
    /// under a preemptive policy), from the application the caller started.
    pub handlers: Arc<dyn HandlerFactory>,
    /// How datagrams get in and out.
    pub datapath: DatapathKind,
    /// The protocol of the datagrams (udp and xdp datapaths): this
    /// project's, or memcached's over UDP (whose commands its own classifier
    /// types; `classifier` and `app_classifier` then do not apply).
    pub protocol: crate::dgram::DatagramProtocol,
}

/// Makes the application's classifier, once per dispatcher (a classifier
/// may keep state: it is `&mut` on the dispatcher thread).
pub trait ClassifierFactory: Send + Sync {
    /// A classifier.
    fn classifier(&self) -> Box<dyn Classifier>;
}

impl<F: Fn() -> Box<dyn Classifier> + Send + Sync> ClassifierFactory for F {
    fn classifier(&self) -> Box<dyn Classifier> {
        self()
    }
}

/// Which datapath a server (or a load client) uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum DatapathKind {
    /// Kernel UDP sockets.
    #[default]
    Udp,
    /// AF_XDP sockets and an XDP program on the interface that holds the
    /// address (kernel bypass).
    Xdp(crate::xdp::XdpConfig),
    /// Kernel TCP connections speaking a request protocol of its own
    /// (RESP), from the protocol registry ([`psp_proto::PROTOCOLS`]), which
    /// frames and classifies (the configuration's `classifier` and
    /// `app_classifier` do not apply).
    Tcp(&'static psp_proto::ProtocolEntry, crate::tcp::TcpConfig),
}

impl DatapathKind {
    /// The name `--datapath` takes.
    pub fn name(&self) -> &'static str {
        match self {
            DatapathKind::Udp => "udp",
            DatapathKind::Xdp(_) => "xdp",
            DatapathKind::Tcp(..) => "tcp",
        }
    }
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("addr", &self.addr)
            .field("metrics", &self.metrics)
            .field("runtime", &self.runtime)
            .field("policy", &self.policy)
            .field("types", &self.types)
            .field("classifier", &self.classifier)
            .field("app_classifier", &self.app_classifier.is_some())
            .field("datapath", &self.datapath)
            .finish_non_exhaustive()
    }
}

/// The outcome of a server's life.
#[derive(Debug, Clone)]
pub struct ServerReport {
    /// The dispatcher's counters; latency here is server-side (receive to
    /// handler completion), by type.
    pub dispatcher: DispatcherReport,
    /// The network front end's counters.
    pub net: NetCounters,
    /// Jobs answered per worker.
    pub served_per_worker: Vec<u64>,
    /// Jobs each worker stole from another's queue (`ws`).
    pub steals_per_worker: Vec<u64>,
    /// Workers still inside their handler after the drain deadline: left
    /// running, answering nothing more.
    pub abandoned_workers: Vec<usize>,
    /// SYNERGY's or Tiny Quanta's counters (preemptions, renewals, steals,
    /// wait-queue passes), for those executors.
    pub local: Option<psp_runtime::LocalStats>,
    /// Whether threads were pinned.
    pub pinned: bool,
    /// Whether polling passes yielded the core.
    pub polls_yield: bool,
    /// Whether worker 0 ran on the dispatcher's thread.
    pub inline_worker: bool,
    /// Each thread and its core, one line.
    pub threads: String,
    /// How long the server ran.
    pub wall: Duration,
    /// The CPU time (user + system) the process spent while the server ran,
    /// all its threads (a process that does nothing else: the server's).
    pub process_cpu: Duration,
}

/// A network front end's first step: the core's time zero and declared
/// service times, live snapshots if asked, and the word to
/// [`Server::start`] that every thread runs.
pub(crate) fn begin_serving(
    core: &mut DispatchCore,
    now: u64,
    declared_ns: &[Option<f64>],
    snapshots: &mut Option<SnapshotPublisher>,
    started: &mut Option<std::sync::mpsc::Sender<()>>,
) {
    core.set_base(now);
    core.set_declared_service(declared_ns);
    if let Some(p) = snapshots.take() {
        core.publish_snapshots(p, now);
    }
    if let Some(tx) = started.take() {
        let _ = tx.send(());
    }
}

/// A running server.
pub struct Server {
    local_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<RunReport<(DispatcherReport, NetCounters)>, RuntimeError>>,
    /// Serves `/metrics` until the server is joined (or dropped).
    exporter: Option<Exporter>,
    /// The process's CPU time when the server started.
    cpu_at_start: Duration,
}

/// The CPU time (user + system) of every thread of this process so far.
pub(crate) fn process_cpu() -> Duration {
    // SAFETY: getrusage writes one rusage into the zeroed, live struct.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF needs no other argument.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(r.ru_utime) + tv(r.ru_stime)
}

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The socket could not be set up.
    #[error("cannot listen on {addr}")]
    Bind {
        /// Where.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// The metrics listener could not be set up.
    #[error("cannot serve metrics on {addr}")]
    MetricsBind {
        /// Where.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// The runtime refused the configuration or a thread failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// Bad configuration.
    #[error("{0}")]
    Config(String),
}

impl Server {
    /// Binds the socket (and the metrics listener, if any) and starts the
    /// dispatcher and workers (and the metrics exporter).
    ///
    /// # Errors
    /// An address cannot be bound, the policy cannot run on the runtime, no
    /// request type is registered.
    pub fn start(cfg: ServerConfig) -> Result<Server, ServerError> {
        let started = Instant::now();
        if cfg.types.is_empty() || cfg.types.len() > usize::from(u16::MAX) {
            return Err(ServerError::Config(
                "a server needs between 1 and 65535 request types".into(),
            ));
        }
        let bind_err = |source| ServerError::Bind {
            addr: cfg.addr,
            source,
        };
        // The packet buffers, one per request slot: the AF_XDP datapath gives
        // each its first frame when it binds.
        let mut pool = PacketPool::new(psp_runtime::max_in_flight(&cfg.runtime, cfg.types.len()));
        match cfg.datapath.clone() {
            DatapathKind::Udp => {
                let datapath = UdpDatapath::bind(cfg.addr).map_err(bind_err)?;
                let socket = datapath.try_clone_socket().map_err(bind_err)?;
                let probe: DropProbe = Box::new(move || crate::udp::socket_drops(&socket));
                let local = datapath.local_addr().map_err(bind_err)?;
                Self::launch(
                    cfg,
                    local,
                    Some(probe),
                    started,
                    move |cfg, stop, snaps, tx| {
                        serve(cfg, datapath, Arc::new(pool), stop, snaps, tx)
                    },
                )
            }
            DatapathKind::Xdp(x) => {
                let datapath = XdpDatapath::open(&x, cfg.addr, &mut pool, cfg.runtime.workers + 1)
                    .map_err(bind_err)?;
                let socket = datapath.socket();
                let probe: DropProbe =
                    Box::new(move || socket.statistics().ok().map(|s| s.rx_dropped));
                let local = datapath.local_addr().map_err(bind_err)?;
                Self::launch(
                    cfg,
                    local,
                    Some(probe),
                    started,
                    move |cfg, stop, snaps, tx| {
                        serve(cfg, datapath, Arc::new(pool), stop, snaps, tx)
                    },
                )
            }
            DatapathKind::Tcp(protocol, tcp) => {
                tcp.check().map_err(ServerError::Config)?;
                let listener = crate::tcp::bind(cfg.addr).map_err(bind_err)?;
                let local = listener.local_addr().map_err(bind_err)?;
                Self::launch(cfg, local, None, started, move |cfg, stop, snaps, tx| {
                    serve_tcp(
                        cfg,
                        listener,
                        protocol,
                        tcp,
                        Arc::new(pool),
                        stop,
                        snaps,
                        tx,
                    )
                })
            }
        }
    }

    /// Starts the metrics exporter (if asked), the dispatcher and the
    /// workers over a bound datapath.
    fn launch(
        cfg: ServerConfig,
        local_addr: SocketAddr,
        dropped_by_os: Option<DropProbe>,
        started: Instant,
        run: impl FnOnce(
            ServerConfig,
            Arc<AtomicBool>,
            Option<SnapshotPublisher>,
            std::sync::mpsc::Sender<()>,
        ) -> ServeResult
        + Send
        + 'static,
    ) -> Result<Server, ServerError> {
        let thread_err = |e: io::Error| ServerError::Runtime(RuntimeError::Thread(e.to_string()));
        // Both listeners are bound before anything starts, so that a bad or used
        // address is an error of its own.
        let (exporter, snapshots) = match cfg.metrics {
            Some(addr) => {
                let listener = Exporter::bind(addr)
                    .map_err(|source| ServerError::MetricsBind { addr, source })?;
                let (publisher, reader) = psp_runtime::snapshot_channel(
                    cfg.types.len(),
                    cfg.runtime.workers,
                    NetCounters::SNAPSHOT_LEN,
                );
                let source = MetricsSource {
                    reader,
                    type_names: cfg.types.iter().map(|t| t.name.clone()).collect(),
                    started,
                    dropped_by_os,
                    workers: cfg.runtime.workers,
                    declared_service_ns: cfg.types.iter().map(|t| t.mean_service_ns).collect(),
                    policy: cfg.policy.to_string(),
                };
                let exporter = Exporter::start(listener, source).map_err(thread_err)?;
                (Some(exporter), Some(publisher))
            }
            None => (None, None),
        };
        let cpu_at_start = process_cpu();
        let stop = Arc::new(AtomicBool::new(false));
        let stop_front = stop.clone();
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("psp-serve".into())
            .spawn(move || run(cfg, stop_front, snapshots, started_tx))
            .map_err(thread_err)?;
        // The sender is dropped unanswered when the run fails to start: its
        // error is then this call's.
        if started_rx.recv().is_err() {
            return Err(match thread.join() {
                Ok(Err(e)) => e.into(),
                Ok(Ok(_)) => {
                    RuntimeError::Thread("the server ended before it started".into()).into()
                }
                Err(_) => RuntimeError::Thread("server thread panicked".into()).into(),
            });
        }
        Ok(Server {
            local_addr,
            stop,
            thread,
            exporter,
            cpu_at_start,
        })
    }

    /// Where `/metrics` is served, if it is.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.exporter.as_ref().map(Exporter::local_addr)
    }

    /// Where clients send.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The flag that asks the server to stop receiving and drain (e.g. for a
    /// signal handler).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Whether the server has stopped (drained, or failed).
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Asks the server to stop, waits for the drain and returns its report.
    ///
    /// # Errors
    /// A runtime thread failed.
    pub fn stop(self) -> Result<ServerReport, ServerError> {
        self.stop.store(true, Ordering::Relaxed);
        self.join()
    }

    /// Waits until the server stops (after its stop flag was raised), then
    /// stops its metrics exporter.
    ///
    /// # Errors
    /// A runtime thread failed.
    pub fn join(self) -> Result<ServerReport, ServerError> {
        let joined = self.thread.join();
        drop(self.exporter);
        let r = joined.map_err(|_| RuntimeError::Thread("server thread panicked".into()))??;
        let (dispatcher, net) = r.dispatcher;
        Ok(ServerReport {
            dispatcher,
            net,
            served_per_worker: r.served_per_worker,
            steals_per_worker: r.steals_per_worker,
            abandoned_workers: r.abandoned_workers,
            local: r.local,
            pinned: r.pinned,
            polls_yield: r.polls_yield,
            inline_worker: r.inline_worker,
            threads: r.threads,
            wall: r.wall,
            process_cpu: process_cpu().saturating_sub(self.cpu_at_start),
        })
    }
}

/// What a server's thread returns.
pub(super) type ServeResult = Result<RunReport<(DispatcherReport, NetCounters)>, RuntimeError>;

/// The TCP front end's run: the listener is bound.
#[allow(clippy::too_many_arguments)]
fn serve_tcp(
    cfg: ServerConfig,
    listener: std::net::TcpListener,
    protocol: &'static psp_proto::ProtocolEntry,
    tcp: crate::tcp::TcpConfig,
    pool: Arc<PacketPool>,
    stop: Arc<AtomicBool>,
    snapshots: Option<SnapshotPublisher>,
    started: std::sync::mpsc::Sender<()>,
) -> ServeResult {
    let front = crate::tcp::TcpFrontEnd::new(
        listener,
        tcp,
        protocol.protocol,
        pool,
        cfg.runtime.workers,
        cfg.types.len() as u16,
        cfg.runtime.idle,
        stop,
        snapshots,
        started,
        cfg.types.iter().map(|t| t.mean_service_ns).collect(),
    )
    .map_err(|e| RuntimeError::Thread(e.to_string()))?;
    let mut cfg = cfg;
    cfg.runtime.open_ended_types = protocol.protocol.open_ended_types().to_vec();
    run(cfg, front)
}

/// Runs `front` under the configured runtime, policy and handlers until it
/// drains (a front end's whole run after its setup).
pub(super) fn run<F>(cfg: ServerConfig, front: F) -> ServeResult
where
    F: FrontEnd<Report = (DispatcherReport, NetCounters)> + Send,
{
    let handlers = cfg.handlers;
    psp_runtime::start(
        &cfg.runtime,
        &cfg.policy,
        cfg.types,
        |i| handlers.handler(i),
        front,
    )
}
