//! The point document of each mode: it reads back as the value written, and its
//! field names are pinned (the `psp` command contract: a rename or a removal
//! fails here; an added field is added to the lists below).

use std::collections::BTreeSet;

use psp_metrics::{
    Agreement, ClosedLoopExtra, Extra, LoadedServer, LocalCounters, MeanSource, NetExtra,
    OverallStats, PhaseSpan, PointResult, RateMean, RejectedReplies, ReservationChange,
    ReservationGroup, ReservationLayout, ResponsesByStatus, RunExtra, SendLag, ServerSummary,
    ServerTypeLatency, SimExtra, TypeStats,
};
use serde_json::Value;

fn reservation() -> ReservationLayout {
    ReservationLayout {
        groups: vec![
            ReservationGroup {
                types: vec![0],
                demand: 2.66,
                reserved: vec![0, 1, 2],
                spillway: false,
                stealable: vec![3, 4, 5],
            },
            ReservationGroup {
                types: vec![1, 2],
                demand: 0.25,
                reserved: vec![5],
                spillway: true,
                stealable: vec![],
            },
        ],
    }
}

fn type_stats(name: &str) -> TypeStats {
    TypeStats {
        name: name.into(),
        count: 1000,
        mean_service_us: 0.5,
        mean_latency_us: 1.25,
        p50_latency_us: 0.75,
        p99_latency_us: 3.5,
        p999_latency_us: 8.0,
        p50_slowdown: 1.5,
        p99_slowdown: 7.0,
        p999_slowdown: 16.0,
        throughput_rps: 666.5,
        dropped: 2,
        timeouts: 3,
        errors: 4,
    }
}

fn point(extra: Extra) -> PointResult {
    PointResult {
        workload: "extreme-bimodal".into(),
        policy: "darc".into(),
        workers: 6,
        load: 0.75,
        offered_rps: 150_000.0,
        achieved_rps: 149_500.5,
        duration_s: 1.5,
        seed: 7,
        overall: OverallStats {
            count: 2000,
            p50_slowdown: 1.5,
            p99_slowdown: 6.25,
            p999_slowdown: 12.5,
        },
        types: vec![type_stats("SHORT"), type_stats("LONG")],
        dropped: 1,
        shed: 2,
        timeouts: 3,
        errors: 4,
        measured_generated: 2010,
        loss_fraction: 0.005,
        extra,
    }
}

fn sim_extra() -> SimExtra {
    SimExtra {
        generated_total: 2200,
        completed_total: 2190,
        dropped_total: 10,
        ingress_dropped_total: 1,
        expired_total: 2,
        system: "ideal".into(),
        classifier: "header".into(),
        stranded: 0,
        preemptions: 5,
        steals: 6,
        preemptions_avoided: 7,
        wait_queue_passes: 8,
        congestion_episodes: 9,
        warming_up: false,
        reservation_updates: 3,
        reservation: Some(reservation()),
        simulated_end_s: 1.5,
        events: 4400,
        wall_s: 0.25,
        sim_requests_per_s: 8800.0,
        clients: Some(ClosedLoopExtra {
            connections: vec![64, 4],
            think_us: 2.5,
        }),
    }
}

fn sim_point() -> PointResult {
    point(Extra::Sim(Box::new(sim_extra())))
}

/// A run point with every optional part: SYNERGY's counters, phases, the
/// application's check and the simulator's prediction.
fn run_point() -> PointResult {
    point(Extra::Run(Box::new(RunExtra {
        generated_total: 2200,
        admitted_total: 2195,
        completed_total: 2190,
        shed_total: 5,
        expired: 2,
        handler_errors: 1,
        no_fiber: 0,
        bad_bodies: 2,
        stranded: 0,
        warming_up: false,
        reservation_updates: 2,
        reservation: Some(reservation()),
        reservation_log: vec![ReservationChange {
            at_s: 0.5,
            reservation: reservation(),
        }],
        phases: vec![PhaseSpan {
            name: "base".into(),
            start_s: 0.0,
            duration_s: 1.5,
            offered_rps: 150_000.0,
        }],
        served_per_worker: vec![1000, 1190],
        steals_total: 3,
        steals_per_worker: vec![1, 2],
        local: Some(LocalCounters {
            executor: "synergy".into(),
            preemptions_per_worker: vec![2, 3],
            preemptions_avoided: 4,
            preemptions_avoided_per_worker: vec![1, 3],
            wait_queue_passes: 5,
            wait_queue_passes_per_worker: vec![2, 3],
            congestion_episodes: 1,
            wait_queue_full: 0,
            timer_late_mean_us: 12.5,
            timer_late_max_us: 250.0,
            timer: "worker".into(),
        }),
        preemptions: 5,
        abandoned_workers: vec![1],
        pinned: true,
        polls_yield: true,
        idle: "Park".into(),
        classifier: "header".into(),
        app: "spin".into(),
        app_check: Some("consistent".into()),
        wall_s: 1.75,
        measured_utilization: 0.5,
        declared_utilization: Some(0.625),
        completed_by_type: vec![2000, 190],
        service_us_by_type: vec![0.5, 500.25],
        sim_prediction: Some(Box::new(sim_point())),
        sim_agreement: Some(vec![Agreement {
            name: "SHORT".into(),
            p999_ratio: 1.25,
            p50_ratio: 0.75,
        }]),
    })))
}

fn server_summary() -> ServerSummary {
    ServerSummary {
        received: 2300,
        requests: 2290,
        admitted: 2280,
        completed: 2270,
        truncated_dropped: 1,
        bad_request: 2,
        unknown_type: 3,
        overloaded: 4,
        shed_unanswered: 5,
        handler_errors: 6,
        expired: 3,
        no_fiber: 2,
        bad_bodies: 7,
        reply_send_errors: 8,
        worker_send_errors: 9,
        receive_errors: 10,
        dropped_by_os: Some(11),
        malformed_frames: 3,
        syscalls: Some(12),
        xdp: Some(psp_metrics::XdpSummary {
            interface: "psps".into(),
            queues: 1,
            zero_copy: false,
            attach_mode: "driver".into(),
            frames_total: 100,
            frames_with_tokens: 40,
            frames_lent_for_rx: 40,
            frames_free_for_tx: 20,
            frames_in_tx: 0,
            frames_leaked: 0,
            dropped: [("fragment".to_string(), 3)].into(),
            wrong_destination: 0,
            transmitted: 2270,
            kernel_rx_dropped: 0,
            kernel_rx_ring_full: 0,
            kernel_fill_ring_empty: 0,
            kernel_tx_invalid: 0,
        }),
        tcp: Some(psp_metrics::TcpSummary {
            accepted: 3,
            refused: 0,
            closed_by_peer: 2,
            closed_on_error: 1,
            closed_idle: 0,
            closed_on_io_error: 0,
            replies_to_closed: 0,
            paused: 4,
            parked: 2,
            parked_timeouts: 1,
            pubsub_messages: 5,
            closed_on_pubsub_overflow: 0,
            closed_by_kill: 0,
        }),
        stranded: 0,
        abandoned_workers: vec![],
        warming_up: false,
        reservation_updates: 2,
        reservation: Some(reservation()),
        served_per_worker: vec![1100, 1170],
        steals_per_worker: vec![0, 0],
        preemptions: 0,
        local: None,
        pinned: false,
        polls_yield: false,
        inline_worker: false,
        threads: String::new(),
        cpu_us_per_request: Some(12.5),
        wall_s: 2.5,
        measured_utilization: 0.25,
        declared_utilization: Some(0.375),
        server_side_latency: vec![ServerTypeLatency {
            name: "SHORT".into(),
            completed: 2000,
            mean_service_us: 0.5,
            declared_service_us: Some(0.5),
            p50_latency_us: 1.5,
            p99_latency_us: 4.5,
            p999_latency_us: 9.5,
            shed: 3,
        }],
        app_check: Some("consistent".into()),
    }
}

fn net_point(server: LoadedServer) -> PointResult {
    let reservation = server.summary().and_then(|s| s.reservation.clone());
    // `psp load --server-profile` names a running server by its address.
    let rate_means = matches!(server, LoadedServer::Address(_)).then(|| {
        vec![
            RateMean {
                name: "short".into(),
                declared_us: 1.0,
                server_us: Some(1.25),
                server_requests: 900,
                used: MeanSource::Server,
            },
            RateMean {
                name: "long".into(),
                declared_us: 100.0,
                server_us: None,
                server_requests: 0,
                used: MeanSource::Declared,
            },
        ]
    });
    point(Extra::Net(Box::new(NetExtra {
        server,
        flows: 16,
        timeout_ms: 1000.0,
        scheduled_total: 2300,
        sent_total: 2299,
        send_errors: 1,
        responses_total: ResponsesByStatus {
            ok: 2200,
            overloaded: 4,
            bad_request: 2,
            unknown_type: 3,
            handler_error: 6,
        },
        late_responses: 2,
        unexpected_datagrams: 36,
        rejected_replies: RejectedReplies {
            wrong_peer: 1,
            oversize: 2,
            malformed: 3,
            unknown_id: 4,
            future_id: 5,
            wrong_flow: 6,
            wrong_type: 7,
            duplicate: 8,
        },
        send_lag_us: SendLag {
            p50: 1.5,
            p99: 12.5,
            max: 80.25,
        },
        wall_s: 2.5,
        reservation,
        rate_means,
    })))
}

fn all_points() -> Vec<PointResult> {
    vec![
        sim_point(),
        run_point(),
        net_point(LoadedServer::Address("127.0.0.1:7000".into())),
        net_point(LoadedServer::Summary(Box::new(server_summary()))),
    ]
}

#[test]
fn a_point_of_each_mode_reads_back_as_written() {
    for p in all_points() {
        let text = serde_json::to_string_pretty(&p).unwrap();
        let back: PointResult = serde_json::from_str(&text).unwrap();
        assert_eq!(back, p, "{text}");
    }
    // Without its optional parts too.
    let mut bare = run_point();
    if let Extra::Run(r) = &mut bare.extra {
        (r.local, r.reservation, r.phases) = (None, None, Vec::new());
        (r.sim_prediction, r.sim_agreement, r.app_check) = (None, None, None);
    }
    let back: PointResult = serde_json::from_str(&serde_json::to_string(&bare).unwrap()).unwrap();
    assert_eq!(back, bare);
}

/// Every key of `v`, as `a.b` paths; an array's elements under `a[]`.
fn key_paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(p.clone());
                key_paths(x, &p, out);
            }
        }
        Value::Array(a) => a
            .iter()
            .for_each(|x| key_paths(x, &format!("{prefix}[]"), out)),
        _ => {}
    }
}

fn paths_of(p: &PointResult) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    key_paths(&serde_json::to_value(p).unwrap(), "", &mut out);
    out
}

/// Every point's own fields, whatever its mode.
const POINT: &[&str] = &[
    "mode",
    "workload",
    "policy",
    "workers",
    "load",
    "offered_rps",
    "achieved_rps",
    "duration_s",
    "seed",
    "overall",
    "overall.count",
    "overall.p50_slowdown",
    "overall.p99_slowdown",
    "overall.p999_slowdown",
    "types",
    "types[].name",
    "types[].count",
    "types[].mean_service_us",
    "types[].mean_latency_us",
    "types[].p50_latency_us",
    "types[].p99_latency_us",
    "types[].p999_latency_us",
    "types[].p50_slowdown",
    "types[].p99_slowdown",
    "types[].p999_slowdown",
    "types[].throughput_rps",
    "types[].dropped",
    "types[].timeouts",
    "types[].errors",
    "dropped",
    "shed",
    "timeouts",
    "errors",
    "measured_generated",
    "loss_fraction",
    "extra",
];

/// A reservation's fields, under `at`.
fn reservation_paths(at: &str) -> Vec<String> {
    [
        "",
        "[].types",
        "[].demand",
        "[].reserved",
        "[].spillway",
        "[].stealable",
    ]
    .iter()
    .map(|k| format!("{at}{k}"))
    .collect()
}

const SIM: &[&str] = &[
    "generated_total",
    "completed_total",
    "dropped_total",
    "ingress_dropped_total",
    "expired_total",
    "system",
    "classifier",
    "stranded",
    "preemptions",
    "steals",
    "preemptions_avoided",
    "wait_queue_passes",
    "congestion_episodes",
    "reservation_updates",
    "simulated_end_s",
    "events",
    "wall_s",
    "sim_requests_per_s",
    "clients",
    "clients.connections",
    "clients.think_us",
];

const RUN: &[&str] = &[
    "generated_total",
    "admitted_total",
    "completed_total",
    "shed_total",
    "expired",
    "handler_errors",
    "no_fiber",
    "bad_bodies",
    "stranded",
    "reservation_updates",
    "reservation_log",
    "reservation_log[].at_s",
    "phases",
    "phases[].name",
    "phases[].start_s",
    "phases[].duration_s",
    "phases[].offered_rps",
    "served_per_worker",
    "steals_total",
    "steals_per_worker",
    "executor",
    "preemptions",
    "preemptions_per_worker",
    "preemptions_avoided",
    "preemptions_avoided_per_worker",
    "wait_queue_passes",
    "wait_queue_passes_per_worker",
    "congestion_episodes",
    "wait_queue_full",
    "timer_late_mean_us",
    "timer_late_max_us",
    "timer",
    "abandoned_workers",
    "pinned",
    "polls_yield",
    "idle",
    "classifier",
    "app",
    "app_check",
    "wall_s",
    "measured_utilization",
    "declared_utilization",
    "completed_by_type",
    "service_us_by_type",
    "sim_prediction",
    "sim_agreement",
    "sim_agreement[].name",
    "sim_agreement[].p999_ratio",
    "sim_agreement[].p50_ratio",
];

const NET: &[&str] = &[
    "server",
    "flows",
    "timeout_ms",
    "scheduled_total",
    "sent_total",
    "send_errors",
    "responses_total",
    "responses_total.OK",
    "responses_total.OVERLOADED",
    "responses_total.BAD_REQUEST",
    "responses_total.UNKNOWN_TYPE",
    "responses_total.HANDLER_ERROR",
    "late_responses",
    "unexpected_datagrams",
    "rejected_replies",
    "rejected_replies.wrong_peer",
    "rejected_replies.oversize",
    "rejected_replies.malformed",
    "rejected_replies.unknown_id",
    "rejected_replies.future_id",
    "rejected_replies.wrong_flow",
    "rejected_replies.wrong_type",
    "rejected_replies.duplicate",
    "send_lag_us",
    "send_lag_us.p50",
    "send_lag_us.p99",
    "send_lag_us.max",
    "wall_s",
];

/// A network point's `extra` with `psp load --server-profile`.
const NET_RATE_MEANS: &[&str] = &[
    "rate_means",
    "rate_means[].name",
    "rate_means[].declared_us",
    "rate_means[].server_us",
    "rate_means[].server_requests",
    "rate_means[].used",
];

/// `psp serve --json`, and a network point's `server` when the sweep started it.
const SERVER: &[&str] = &[
    "received",
    "requests",
    "admitted",
    "completed",
    "truncated_dropped",
    "bad_request",
    "unknown_type",
    "overloaded",
    "shed_unanswered",
    "handler_errors",
    "expired",
    "no_fiber",
    "bad_bodies",
    "reply_send_errors",
    "worker_send_errors",
    "receive_errors",
    "dropped_by_os",
    "malformed_frames",
    "syscalls",
    "xdp",
    "xdp.interface",
    "xdp.queues",
    "xdp.zero_copy",
    "xdp.attach_mode",
    "xdp.frames_total",
    "xdp.frames_with_tokens",
    "xdp.frames_lent_for_rx",
    "xdp.frames_free_for_tx",
    "xdp.frames_in_tx",
    "xdp.frames_leaked",
    "xdp.dropped",
    "xdp.dropped.fragment",
    "xdp.wrong_destination",
    "xdp.transmitted",
    "xdp.kernel_rx_dropped",
    "xdp.kernel_rx_ring_full",
    "xdp.kernel_fill_ring_empty",
    "xdp.kernel_tx_invalid",
    "tcp",
    "tcp.accepted",
    "tcp.refused",
    "tcp.closed_by_peer",
    "tcp.closed_on_error",
    "tcp.closed_idle",
    "tcp.closed_on_io_error",
    "tcp.replies_to_closed",
    "tcp.paused",
    "tcp.parked",
    "tcp.parked_timeouts",
    "tcp.pubsub_messages",
    "tcp.closed_on_pubsub_overflow",
    "tcp.closed_by_kill",
    "stranded",
    "abandoned_workers",
    "reservation_updates",
    "served_per_worker",
    "steals_per_worker",
    "preemptions",
    "pinned",
    "polls_yield",
    "inline_worker",
    "threads",
    "cpu_us_per_request",
    "wall_s",
    "measured_utilization",
    "declared_utilization",
    "server_side_latency",
    "server_side_latency[].name",
    "server_side_latency[].completed",
    "server_side_latency[].mean_service_us",
    "server_side_latency[].declared_service_us",
    "server_side_latency[].p50_latency_us",
    "server_side_latency[].p99_latency_us",
    "server_side_latency[].p999_latency_us",
    "server_side_latency[].shed",
    "app_check",
];

/// The paths of a point whose `extra` holds `fields` and a reservation at each
/// of `reservations` (relative to `extra`), all under `at`.
fn expected(at: &str, fields: &[&str], reservations: &[&str]) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = POINT.iter().map(|k| format!("{at}{k}")).collect();
    out.extend(fields.iter().map(|k| format!("{at}extra.{k}")));
    for r in reservations {
        out.extend(reservation_paths(&format!("{at}extra.{r}")));
    }
    out
}

#[test]
fn each_mode_keeps_its_field_names() {
    let sim = expected("", SIM, &["reservation"]);
    assert_eq!(paths_of(&sim_point()), sim);

    let mut run = expected("", RUN, &["reservation", "reservation_log[].reservation"]);
    run.extend(expected("extra.sim_prediction.", SIM, &["reservation"]));
    assert_eq!(paths_of(&run_point()), run);

    let mut address = expected("", NET, &[]);
    address.extend(NET_RATE_MEANS.iter().map(|k| format!("extra.{k}")));
    assert_eq!(
        paths_of(&net_point(LoadedServer::Address("127.0.0.1:7000".into()))),
        address
    );
    let mut summary = expected("", NET, &["reservation"]);
    summary.extend(SERVER.iter().map(|k| format!("extra.server.{k}")));
    summary.extend(reservation_paths("extra.server.reservation"));
    assert_eq!(
        paths_of(&net_point(LoadedServer::Summary(
            Box::new(server_summary())
        ))),
        summary
    );

    let mut serve = BTreeSet::new();
    key_paths(
        &serde_json::to_value(server_summary()).unwrap(),
        "",
        &mut serve,
    );
    let mut want: BTreeSet<String> = SERVER.iter().map(|k| k.to_string()).collect();
    want.extend(reservation_paths("reservation"));
    assert_eq!(serve, want);
}

/// The mode is the `mode` field, and `extra` is that mode's figures.
#[test]
fn the_mode_names_the_figures() {
    let modes: Vec<Value> = all_points()
        .iter()
        .map(|p| serde_json::to_value(p).unwrap()["mode"].clone())
        .collect();
    assert_eq!(modes, ["sim", "run", "net", "net"]);
    for p in all_points() {
        assert_eq!(serde_json::to_value(&p).unwrap()["mode"], p.mode());
    }
    // Another mode's figures under `mode` do not read.
    let mut doc = serde_json::to_value(sim_point()).unwrap();
    doc["mode"] = "net".into();
    assert!(serde_json::from_value::<PointResult>(doc).is_err());
}

/// Figures handed over as a JSON object read as the named mode's, or not at all.
#[test]
fn figures_from_an_object_must_fit_the_mode() {
    let Value::Object(m) = serde_json::to_value(sim_extra()).unwrap() else {
        panic!("a struct serializes to an object")
    };
    assert_eq!(
        Extra::from_object("sim", m.clone()).unwrap(),
        Extra::Sim(Box::new(sim_extra()))
    );
    assert!(Extra::from_object("run", m.clone()).is_err());
    assert!(Extra::from_object("warp", m.clone()).is_err());
    let mut missing = m;
    missing.remove("generated_total");
    assert!(Extra::from_object("sim", missing).is_err());
}
