//! Closed-loop clients in the simulator: a connection never has two requests
//! out, every request it sends ends (answered or refused) and is reported back
//! once, and throughput obeys Little's law, X = N / (R + Z).

use psp_core::{ClassifierKind, Nanos, PolicyContext, PolicySpec};
use psp_metrics::{PointResult, SimExtra};
use psp_sim::{
    Arrival, ArrivalSource, Clients, ClosedLoop, SimConfig, Simulator, SystemCosts, Workload,
    simulate_clients,
};

fn cfg(workers: usize, duration_ms: u64, queue_capacity: usize) -> SimConfig {
    SimConfig {
        workers,
        rate_rps: 0.0, // not used by closed loops
        duration_ns: duration_ms * 1_000_000,
        warmup_fraction: 0.1,
        seed: 5,
        flows: 1,
        queue_capacity,
        system: SystemCosts::default(),
        classifier: ClassifierKind::Header,
        series_window_ns: None,
        max_wait_ns: Vec::new(),
    }
}

fn sim(p: &PointResult) -> &SimExtra {
    p.extra.sim().expect("a simulated point")
}

/// A closed loop that checks what the engine tells it: each connection has
/// at most one request out, each type at most its connections, and each end
/// is reported once, for a request that is out.
struct Checked {
    inner: ClosedLoop,
    conn_type: Vec<usize>,
    connections: Vec<u32>,
    out: Vec<bool>,
    per_type: Vec<u32>,
    most: Vec<u32>,
    ends: u64,
}

impl Checked {
    fn new(w: &Workload, clients: &Clients, duration_ns: Nanos) -> Self {
        let connections = clients.connections().to_vec();
        let conn_type = connections
            .iter()
            .enumerate()
            .flat_map(|(t, &n)| std::iter::repeat_n(t, n as usize))
            .collect();
        Self {
            inner: ClosedLoop::new(w, clients, duration_ns, 9).unwrap(),
            conn_type,
            out: vec![false; clients.total() as usize],
            per_type: vec![0; connections.len()],
            most: vec![0; connections.len()],
            connections,
            ends: 0,
        }
    }

    fn give(&mut self, a: &Arrival) {
        let c = a.flow as usize;
        assert!(!self.out[c], "connection {c} got a second request out");
        assert_eq!(self.conn_type[c], a.type_id as usize);
        self.out[c] = true;
        let t = self.conn_type[c];
        self.per_type[t] += 1;
        self.most[t] = self.most[t].max(self.per_type[t]);
        assert!(self.per_type[t] <= self.connections[t]);
    }

    fn take(&mut self, flow: u16) {
        let c = flow as usize;
        assert!(self.out[c], "an end for connection {c}, which has none out");
        self.out[c] = false;
        self.per_type[self.conn_type[c]] -= 1;
    }
}

impl ArrivalSource for Checked {
    fn next_arrival(&mut self) -> Option<Arrival> {
        let a = self.inner.next_arrival()?;
        self.give(&a);
        Some(a)
    }

    fn closed_loop(&self) -> bool {
        true
    }

    fn on_done(&mut self, flow: u16, at_ns: Nanos, refused: bool, next: &mut Option<Arrival>) {
        self.ends += 1;
        self.take(flow);
        let held = *next;
        self.inner.on_done(flow, at_ns, refused, next);
        if *next != held {
            if let Some(h) = held {
                self.take(h.flow); // taken back: not sent after all
            }
            if let Some(n) = *next {
                self.give(&n);
            }
        }
    }
}

/// Runs `clients` on `policy` through the checking source; returns it and
/// the outcome's (generated, completed, dropped, stranded).
fn run_checked(
    w: &Workload,
    policy: &str,
    clients: &Clients,
    c: &SimConfig,
) -> (Checked, [u64; 4]) {
    let spec: PolicySpec = policy.parse().unwrap();
    let mut p = spec
        .build(&PolicyContext {
            workers: c.workers,
            types: w.type_infos(),
            queue_capacity: c.queue_capacity,
        })
        .unwrap();
    let names: Vec<String> = w.types.iter().map(|t| t.name.clone()).collect();
    let mut source = Checked::new(w, clients, c.duration_ns);
    let out = Simulator::new(&mut *p, c.workers, &names, 0)
        .with_system(c.system)
        .run(&mut source);
    let counts = [out.generated, out.completed, out.dropped, out.stranded];
    (source, counts)
}

#[test]
fn a_connection_has_one_request_out_and_each_type_at_most_its_connections() {
    let w = Workload::resolve("high-bimodal").unwrap();
    let mut network = SystemCosts::default();
    network.set("network", 5_000).unwrap();
    // (policy, queue capacity, think, system): a queue smaller than the
    // connections makes refusals, which come back after RETRY_NS.
    let cases = [
        ("c-fcfs", 4096, 0, SystemCosts::default()),
        ("darc:samples=500", 4096, 2_000, SystemCosts::default()),
        ("c-fcfs", 3, 0, SystemCosts::default()),
        ("ts", 4096, 0, network),
        ("d-fcfs", 2, 1_000, SystemCosts::default()),
        ("synergy", 4096, 0, SystemCosts::default()),
    ];
    for (policy, cap, think, system) in cases {
        let clients = Clients::new(vec![24, 6], think, &w).unwrap();
        let c = SimConfig {
            system,
            ..cfg(4, 10, cap)
        };
        let (source, [generated, completed, dropped, stranded]) =
            run_checked(&w, policy, &clients, &c);
        let what = format!("{policy}, capacity {cap}, think {think}");
        assert_eq!(stranded, 0, "{what}");
        assert_eq!(generated, completed + dropped, "{what}");
        assert_eq!(source.ends, generated, "{what}: every request ends once");
        assert!(
            source.out.iter().all(|o| !o),
            "{what}: a request never ended"
        );
        // Without think time or refusals, the loops were full: each type
        // had all its connections out at once (never more: `give` checks).
        if think == 0 && dropped == 0 {
            assert_eq!(source.most, vec![24, 6], "{what}");
        }
        assert_eq!(dropped > 0, cap < 30, "{what}: {dropped} refused");
        assert!(generated > 1_000, "{what}: {generated}");
    }
}

#[test]
fn throughput_obeys_littles_law() {
    // One type of 10 us on 4 workers, c-FCFS.
    let w = Workload::fixed("ten", &[("req", 10.0, 1.0)]);
    let little = |n: u32, think_ns: Nanos, network_ns: Nanos| {
        let clients = Clients::new(vec![n], think_ns, &w).unwrap();
        let mut c = cfg(4, 200, 4096);
        c.system.set("network", network_ns).unwrap();
        let (p, _) = simulate_clients(&w, &"c-fcfs".parse().unwrap(), &c, &clients).unwrap();
        assert_eq!(p.dropped, 0);
        assert_eq!(sim(&p).stranded, 0);
        let t = &p.types[0];
        let (x, r) = (t.throughput_rps, t.mean_latency_us * 1e-6);
        let predicted = f64::from(n) / (r + think_ns as f64 * 1e-9);
        assert!(
            (x / predicted - 1.0).abs() < 0.02,
            "N {n}, Z {think_ns} ns: X {x:.0}/s, R {:.2} us, N/(R+Z) {predicted:.0}/s",
            r * 1e6
        );
        assert!((p.achieved_rps / x - 1.0).abs() < 1e-9);
        (x, r, p)
    };
    // Two connections never queue on four workers: R is the service time.
    let (x, r, p) = little(2, 20_000, 0);
    assert!((r * 1e6 - 10.0).abs() < 1e-9, "{r}");
    assert!((x / (2.0 / 30e-6) - 1.0).abs() < 0.02, "{x}");
    let clients = sim(&p).clients.as_ref().expect("closed-loop figures");
    assert_eq!(
        (clients.connections.clone(), clients.think_us),
        (vec![2], 20.0)
    );
    // Sixteen connections without think time keep the four workers busy:
    // X is the capacity, 400k/s, and R = N / X = 40 us.
    let (x, r, _) = little(16, 0, 0);
    assert!((x / 4e5 - 1.0).abs() < 0.01, "{x}");
    assert!((r * 1e6 / 40.0 - 1.0).abs() < 0.02, "{r}");
    // In between, with the network's latency in R.
    little(8, 30_000, 10_000);
}

#[test]
fn closed_loop_points_are_deterministic_per_seed() {
    let w = Workload::resolve("leveldb").unwrap();
    let clients = Clients::new(vec![16, 4], 1_000, &w).unwrap();
    let spec: PolicySpec = "darc:samples=500".parse().unwrap();
    let run = |seed| {
        let c = SimConfig {
            seed,
            ..cfg(6, 20, 4096)
        };
        let (p, _) = simulate_clients(&w, &spec, &c, &clients).unwrap();
        (sim(&p).generated_total, p.offered_rps, p.types)
    };
    let a = run(1);
    assert_eq!(a, run(1));
    assert_ne!(a, run(2));
    // The offered rate is what the clients sent in the measured window.
    assert!(a.1 > 0.0);
}

#[test]
fn clients_for_another_workload_are_refused() {
    let w = Workload::resolve("leveldb").unwrap();
    let other = Workload::resolve("tpcc").unwrap();
    let clients = Clients::new(vec![1, 1], 0, &w).unwrap();
    let spec: PolicySpec = "c-fcfs".parse().unwrap();
    assert!(simulate_clients(&other, &spec, &cfg(2, 1, 64), &clients).is_err());
}
