//! Every policy behind every datagram front end: each registered policy
//! (`common::server::policies()`, from the registry; `darc-fair` both with and
//! without lending) serves the synthetic (`spin`) and the key-value (`kv`,
//! RocksDB) applications on 2 workers, through the in-process generator,
//! through the UDP server on loopback and, as root, through the AF_XDP server
//! in a network namespace (a kernel-UDP client in the other namespace of a
//! veth pair). The TCP front end's runs under every policy are the Redis and
//! memcached semantics tests (`semantics.rs`).
//! Each run checks that every request is answered exactly once, that the
//! dispatcher's counters balance, and that every answer is the one the
//! application gives when the request runs alone, unpreempted: a SCAN's
//! digest folds every key and value it visits, with a preemption point after
//! each key, so a request resumed on another worker, or resumed twice, or
//! answered with another request's response, fails the comparison. The
//! preemptive runs must also have preempted (so the comparison covered
//! preemption points): whether one run does depends on timing on a loaded
//! machine, so a run that did not is repeated, up to four in all, each one
//! checked in full.

use std::collections::HashMap;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use psp_apps::{AppConfig, KvConfig, Service, SpinConfig};
use psp_core::{HeaderClassifier, PolicySpec};
use psp_net::protocol::{self, HEADER_LEN, Status};
use psp_net::server::DatapathKind;
use psp_net::xdp::{XdpConfig, device};
use psp_net::{ClassifierKind, Server, ServerConfig};
use psp_runtime::{
    GeneratedIo, Generator, HandlerError, IdleStrategy, InlineWorker, Job, JobIo, RequestContext,
    RunReport, RuntimeConfig, WrappedIo, max_in_flight,
};
use psp_workload::{Arrival, TraceArrivals, Workload};

use crate::common;

use common::server::policies;

/// Requests per run.
const REQUESTS: u64 = 160;
/// Between two groups of ten requests: 160 requests over 80 ms. A group's
/// four long requests take 2 ms of 2 workers' time, its six short ones
/// arrive within 4.5 ms: each group finds the last one served, unless the
/// machine is loaded (then they overlap, which the checks allow).
const GROUP_NS: u64 = 5_000_000;

/// An application under test: its workload (types, declared service
/// times), the started service, and the reference answer of a request.
struct App {
    name: &'static str,
    workload: Workload,
    config: AppConfig,
    service: Arc<dyn Service>,
    /// Reference answers by request (type, body): every run sends the same
    /// requests, and both applications only read.
    references: Mutex<HashMap<Request, Vec<u8>>>,
}

/// A request as the reference answers know it: its type and body.
type Request = (u16, Vec<u8>);

impl App {
    fn spin() -> App {
        // Short 20 µs, long 1 ms: dozens of quanta for the preemptive ones.
        let workload = Workload::fixed(
            "matrix-spin",
            &[("short", 20.0, 0.8), ("long", 1000.0, 0.2)],
        );
        let config = AppConfig::new(SpinConfig {
            max_service_ns: 10_000_000,
        });
        App::start("spin", workload, config)
    }

    fn kv() -> App {
        // A SCAN walks all 2,000 keys (a few hundred µs: the declared 200
        // µs, scores of quanta for the preemptive policies).
        let workload = Workload::fixed("matrix-kv", &[("GET", 2.0, 0.7), ("SCAN", 200.0, 0.3)]);
        let config = AppConfig::new(KvConfig {
            keys: 2_000,
            ..KvConfig::default()
        });
        App::start("kv", workload, config)
    }

    fn start(name: &'static str, workload: Workload, config: AppConfig) -> App {
        let service = config
            .start(&names(&workload))
            .expect("the application starts");
        App {
            name,
            workload,
            config,
            service,
            references: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `response` is the answer of `body` (of `type_id`) served
    /// alone, run to completion by a fresh handler (once per request).
    fn is_reference(&self, type_id: u16, body: &[u8], response: &[u8]) -> bool {
        let mut known = self.references.lock().unwrap();
        let reference = known.entry((type_id, body.to_vec())).or_insert_with(|| {
            let mut reference = Vec::new();
            self.service
                .handler(0)
                .handle(&mut RequestContext::new(type_id, body, &mut reference, 0))
                .expect("the reference run succeeds");
            reference
        });
        reference[..] == *response
    }

    /// The requests of a run, in groups of ten every [`GROUP_NS`]: four long
    /// requests at once (whatever the placement, both workers run one and
    /// hold more), two short ones right behind them (blocked: every
    /// preemptive policy has a reason to preempt, and SYNERGY's conditional
    /// preemption finds queued work), then four short ones spread out; one
    /// flow of 4 each.
    fn arrivals(&self) -> Vec<Arrival> {
        let means = self.workload.type_infos();
        (0..REQUESTS)
            .map(|i| {
                let (group, k) = (i / 10, i % 10);
                let type_id = u16::from(k < 4);
                let offset_ns = match k {
                    0..=3 => 0,
                    4 | 5 => 50_000 + k * 10_000,
                    _ => k * GROUP_NS / 10,
                };
                Arrival {
                    at_ns: group * GROUP_NS + offset_ns,
                    type_id,
                    service_ns: means[usize::from(type_id)]
                        .mean_service_ns
                        .expect("declared") as u64,
                    flow: (i % 4) as u16,
                }
            })
            .collect()
    }
}

fn names(w: &Workload) -> Vec<String> {
    w.types.iter().map(|t| t.name.clone()).collect()
}

fn runtime_config() -> RuntimeConfig {
    RuntimeConfig {
        workers: 2,
        queue_capacity: 256,
        drain_timeout: Duration::from_secs(10),
        // Tests sleep when idle: no more spinning threads than cores.
        idle: IdleStrategy::SpinPark {
            spin_us: 0,
            park_us: 1_000,
        },
        raise_priority: false,
        ..RuntimeConfig::default()
    }
}

/// What a run's answers looked like.
#[derive(Default)]
struct Tally {
    answered: AtomicU64,
    ok: AtomicU64,
    mismatched: AtomicU64,
}

/// The generator's I/O, checking each answer against the reference.
struct CheckedIo {
    inner: GeneratedIo,
    app: Arc<App>,
    tally: Arc<Tally>,
}

impl JobIo for CheckedIo {
    fn request<'a>(&'a self, job: &'a Job) -> &'a [u8] {
        self.inner.request(job)
    }

    fn respond(&mut self, job: &Job, outcome: Result<(), HandlerError>, response: &[u8]) -> bool {
        let t = &self.tally;
        t.answered.fetch_add(1, Ordering::SeqCst);
        if outcome.is_ok() {
            t.ok.fetch_add(1, Ordering::SeqCst);
            if !self
                .app
                .is_reference(job.type_id, self.inner.request(job), response)
            {
                t.mismatched.fetch_add(1, Ordering::SeqCst);
            }
        }
        self.inner.respond(job, outcome, response)
    }
}

/// Preemptions a run made (by the dispatcher's policy, or by the local
/// executors' workers).
fn preemptions(r: &RunReport<impl Sized>, policy_preemptions: u64) -> u64 {
    policy_preemptions + r.local.as_ref().map_or(0, |l| l.preemptions.iter().sum())
}

/// Runs in which a preemptive policy may happen not to preempt before one
/// must have (see [`preempting`]).
const ATTEMPTS: usize = 4;

/// Runs `run` (which checks every answer and counter and returns the
/// preemptions made) until it has preempted, when `policy` preempts: a
/// preemptive policy's answers must have been compared across preemption
/// points. Whether one run preempts depends on timing the test does not
/// control (a lent worker is reclaimed only while its request is expected to
/// run on, and a loaded machine stretches requests past that); the
/// correctness checks hold on every run.
fn preempting(policy: &str, at: &str, run: impl Fn() -> u64) {
    let spec: PolicySpec = policy.parse().unwrap();
    for _ in 0..ATTEMPTS {
        if run() > 0 || !spec_preempts(&spec) {
            return;
        }
    }
    panic!("{policy}, {at}: nothing was preempted in {ATTEMPTS} runs");
}

fn in_process(app: &Arc<App>, policy: &str) -> u64 {
    let spec: PolicySpec = policy.parse().unwrap();
    let cfg = runtime_config();
    let types = app.workload.type_infos();
    let front = Generator::new(
        Box::new(HeaderClassifier {
            offset: 0,
            types: types.len() as u16,
        }),
        Box::new(TraceArrivals::new(app.arrivals())),
        app.config.encoder(&names(&app.workload), 7).unwrap(),
        max_in_flight(&cfg, types.len()),
        0,
        cfg.idle,
    );
    let tally = Arc::new(Tally::default());
    let handlers = psp_apps::handler_factory(app.service.clone(), spec.feedback_threshold_ns());
    let (checked, checked_app) = (tally.clone(), app.clone());
    let r = psp_runtime::start(
        &cfg,
        &spec,
        types,
        |i| handlers.handler(i),
        WrappedIo {
            inner: front,
            wrap: move |_, inner| CheckedIo {
                inner,
                app: checked_app.clone(),
                tally: checked.clone(),
            },
        },
    )
    .unwrap_or_else(|e| panic!("{policy} on {}: {e}", app.name));
    let c = r.dispatcher.counts;
    let at = format!("{policy}, {}, in-process: {c:?}", app.name);
    assert_eq!(c.arrived, REQUESTS, "{at}");
    assert_eq!((c.shed, c.stranded, c.handler_errors), (0, 0, 0), "{at}");
    assert_eq!(c.admitted, c.completed, "{at}");
    assert_eq!(tally.answered.load(Ordering::SeqCst), REQUESTS, "{at}");
    assert_eq!(tally.ok.load(Ordering::SeqCst), REQUESTS, "{at}");
    assert_eq!(tally.mismatched.load(Ordering::SeqCst), 0, "{at}");
    assert_eq!(r.served_per_worker.iter().sum::<u64>(), REQUESTS, "{at}");
    preemptions(&r, r.dispatcher.policy_stats.preemptions)
}

fn spec_preempts(spec: &PolicySpec) -> bool {
    spec_execution(spec).preempts()
}

/// Whether worker 0 may run on the dispatcher's thread under `spec`.
fn spec_central(spec: &PolicySpec) -> bool {
    matches!(spec_execution(spec), psp_core::policy::Execution::Central)
}

fn spec_execution(spec: &PolicySpec) -> psp_core::policy::Execution {
    let ctx = psp_core::PolicyContext {
        workers: 2,
        types: vec![
            psp_core::TypeInfo {
                name: "a".into(),
                mean_service_ns: Some(1e3),
            },
            psp_core::TypeInfo {
                name: "b".into(),
                mean_service_ns: Some(1e6),
            },
        ],
        queue_capacity: 16,
    };
    spec.build(&ctx).unwrap().execution()
}

/// Over the UDP server on loopback (`xdp: None`), or over the AF_XDP server
/// in `xdp`'s server namespace, with the client's sockets in its client one;
/// `inline`: worker 0 on the dispatcher's thread, holding its answers to
/// send them a pass at a time.
fn over_net(app: &Arc<App>, policy: &str, xdp: Option<&common::Topology>, inline: bool) -> u64 {
    let spec: PolicySpec = policy.parse().unwrap();
    let (addr, datapath, client_ip) = match xdp {
        None => ("127.0.0.1:0", DatapathKind::Udp, "127.0.0.1:0"),
        Some(_) => (
            "10.77.0.1:7000",
            DatapathKind::Xdp(XdpConfig::default()),
            "10.77.0.2:0",
        ),
    };
    let start_server = || {
        Server::start(ServerConfig {
            addr: addr.parse().unwrap(),
            metrics: None,
            runtime: RuntimeConfig {
                inline_worker: if inline {
                    InlineWorker::On
                } else {
                    InlineWorker::Off
                },
                ..runtime_config()
            },
            policy: spec.clone(),
            types: app.workload.type_infos(),
            classifier: ClassifierKind::Header,
            app_classifier: None,
            handlers: psp_apps::handler_factory(app.service.clone(), spec.feedback_threshold_ns()),
            datapath: datapath.clone(),
            protocol: Default::default(),
        })
    };
    // The AF_XDP server listens on a fixed address, and the kernel frees
    // the previous run's socket and queue asynchronously (later still on a
    // busy machine): a start that finds them taken is tried again, for up
    // to 10 s.
    let deadline = Instant::now() + Duration::from_secs(10);
    let server = loop {
        let started = match xdp {
            None => start_server(),
            Some(t) => device::in_namespace(&t.server_ns, start_server).unwrap(),
        };
        match started {
            Ok(s) => break s,
            Err(e) if xdp.is_some() && Instant::now() < deadline => {
                eprintln!("{policy} on {}: {e}; trying again", app.name);
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("{policy} on {}: {e}", app.name),
        }
    };
    let at = format!(
        "{policy}, {}, {}{}",
        app.name,
        datapath.name(),
        if inline { ", worker 0 inline" } else { "" }
    );
    // Four client sockets: four flows for the flow-steered policies.
    let open = || -> Vec<UdpSocket> {
        (0..4)
            .map(|_| {
                let s = UdpSocket::bind(client_ip).unwrap();
                s.connect(server.local_addr()).unwrap();
                s.set_nonblocking(true).unwrap();
                s
            })
            .collect()
    };
    // A socket stays in the namespace it was made in.
    let socks = match xdp {
        None => open(),
        Some(t) => device::in_namespace(&t.client_ns, open).unwrap(),
    };
    let mut encoder = app.config.encoder(&names(&app.workload), 7).unwrap();
    let arrivals = app.arrivals();
    let mut bodies = Vec::with_capacity(arrivals.len());
    let mut answers: HashMap<u64, u32> = HashMap::new();
    let (mut mismatched, mut not_ok) = (0, 0);
    let mut buf = vec![0u8; 65_536];
    let mut receive = |answers: &mut HashMap<u64, u32>, bodies: &Vec<(u16, Vec<u8>)>| {
        for s in &socks {
            while let Ok(n) = s.recv(&mut buf) {
                let (h, status) = protocol::parse_response(&buf[..n]).expect("a valid response");
                *answers.entry(h.id).or_default() += 1;
                let (type_id, body) = &bodies[h.id as usize];
                if status != Status::Ok {
                    not_ok += 1;
                } else if !app.is_reference(*type_id, body, &buf[HEADER_LEN..n]) {
                    mismatched += 1;
                }
            }
        }
    };
    let start = Instant::now();
    let mut dgram = Vec::new();
    for (id, a) in arrivals.iter().enumerate() {
        while start.elapsed() < Duration::from_nanos(a.at_ns) {
            receive(&mut answers, &bodies);
            std::thread::sleep(Duration::from_micros(200));
        }
        let mut body = Vec::new();
        encoder.encode(a.type_id, a.service_ns, &mut body);
        dgram.clear();
        protocol::encode_request(&mut dgram, a.type_id, id as u64, &body);
        bodies.push((a.type_id, body));
        socks[a.flow as usize].send(&dgram).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while answers.len() < arrivals.len() && Instant::now() < deadline {
        receive(&mut answers, &bodies);
        std::thread::sleep(Duration::from_millis(1));
    }
    let report = server.stop().unwrap();
    let c = report.dispatcher.counts;
    assert_eq!(answers.len() as u64, REQUESTS, "{at}: unanswered requests");
    assert!(answers.values().all(|&n| n == 1), "{at}: answered twice");
    assert_eq!((not_ok, mismatched), (0, 0), "{at}: not OK, wrong answer");
    assert_eq!(report.net.received, REQUESTS, "{at}: {:?}", report.net);
    assert_eq!(c.arrived, REQUESTS, "{at}: {c:?}");
    assert_eq!(
        (c.shed, c.stranded, c.handler_errors),
        (0, 0, 0),
        "{at}: {c:?}"
    );
    assert_eq!(c.admitted, c.completed, "{at}: {c:?}");
    assert_eq!(
        report.served_per_worker.iter().sum::<u64>(),
        REQUESTS,
        "{at}"
    );
    if let Some(x) = &report.net.xdp {
        assert_eq!(x.frames_leaked, 0, "{at}: {x:?}");
        assert_eq!(x.frames_in_tx, 0, "{at}: {x:?}");
    }
    let local: u64 = report
        .local
        .as_ref()
        .map_or(0, |l| l.preemptions.iter().sum());
    report.dispatcher.policy_stats.preemptions + local
}

/// Every policy, both applications, in-process and over the UDP server on
/// loopback (worker 0 inline too, where the policy allows it).
#[test]
fn every_policy_answers_every_request_once_and_correctly_in_process_and_over_udp() {
    for app in [App::spin(), App::kv()] {
        let app = Arc::new(app);
        for policy in policies() {
            let name = app.name;
            preempting(policy, &format!("{name}, in-process"), || {
                in_process(&app, policy)
            });
            preempting(policy, &format!("{name}, udp"), || {
                over_net(&app, policy, None, false)
            });
            // Worker 0 on the dispatcher's thread, its answers sent a pass
            // at a time (the default where the threads take every core).
            if spec_central(&policy.parse().unwrap()) {
                over_net(&app, policy, None, true);
            }
        }
    }
}

/// The same over the AF_XDP server in a network namespace, as root (a test
/// of its own: the runs mostly wait on their arrivals' pacing, so the two
/// halves of the matrix share the test threads).
#[test]
fn every_policy_answers_every_request_once_and_correctly_over_af_xdp() {
    let Some(xdp) = common::Topology::up("m") else {
        return;
    };
    for app in [App::spin(), App::kv()] {
        let app = Arc::new(app);
        for policy in policies() {
            let name = app.name;
            preempting(policy, &format!("{name}, xdp"), || {
                over_net(&app, policy, Some(&xdp), false)
            });
            if spec_central(&policy.parse().unwrap()) {
                over_net(&app, policy, Some(&xdp), true);
            }
        }
    }
}
