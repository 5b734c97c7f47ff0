//! The real applications behind the network server: the key-value service and
//! TPC-C answer the load client's generated requests, bad bodies get
//! BAD_REQUEST over the wire, and every datagram is accounted for.

use std::net::UdpSocket;
use std::sync::Arc;
use std::time::Duration;

use psp_apps::{AppConfig, KvConfig, Service, TpccConfig};
use psp_net::client::{LoadConfig, Progress, run_load};
use psp_net::protocol::{self, HEADER_LEN, Status};
use psp_net::{Server, ServerReport};
use psp_workload::Workload;

use crate::common;

fn server(app: &AppConfig, w: &Workload, policy: &str) -> (Server, Arc<dyn Service>) {
    let names: Vec<String> = w.types.iter().map(|t| t.name.clone()).collect();
    let service = app.start(&names).expect("the application starts");
    let srv = common::server::start(
        service.clone(),
        w.type_infos(),
        policy,
        Default::default(),
        Default::default(),
    );
    (srv, service)
}

fn load(srv: &Server, app: &AppConfig, w: &Workload, rps: f64, ms: u64) -> LoadConfig {
    LoadConfig {
        server: srv.local_addr(),
        workload: w.clone(),
        bodies: app.encoders(&w.types.iter().map(|t| t.name.clone()).collect::<Vec<_>>()),
        rate_rps: rps,
        duration_ns: ms * 1_000_000,
        warmup_ns: 0,
        seed: 11,
        flows: 4,
        // Generous: what is checked is that every request is answered.
        timeout: Duration::from_secs(5),
        keep_samples: false,
        raise_priority: false,
        workers: 1,
        datapath: Default::default(),
    }
}

fn assert_accounted(s: &ServerReport) {
    let (n, c) = (&s.net, &s.dispatcher.counts);
    assert_eq!(
        n.truncated + n.bad_request + n.unknown_type + c.arrived,
        n.received,
        "{n:?} {c:?}"
    );
    assert_eq!(c.arrived, c.shed + c.admitted, "{c:?}");
    assert_eq!(c.admitted, c.completed + c.stranded, "{c:?}");
}

/// Sends one request and returns the reply's status and body.
fn ask(sock: &UdpSocket, type_id: u16, id: u64, body: &[u8]) -> (Status, Vec<u8>) {
    let mut dgram = Vec::new();
    protocol::encode_request(&mut dgram, type_id, id, body);
    sock.send(&dgram).unwrap();
    let mut buf = [0u8; 4096];
    let n = sock.recv(&mut buf).expect("a reply");
    let (h, st) = protocol::parse_response(&buf[..n]).expect("a valid response");
    assert_eq!(h.id, id);
    (st, buf[HEADER_LEN..n].to_vec())
}

#[test]
fn the_key_value_service_answers_the_load_client_and_refuses_bad_bodies() {
    let w = Workload::fixed(
        "kv",
        &[("GET", 2.0, 0.7), ("SCAN", 200.0, 0.1), ("PUT", 4.0, 0.2)],
    );
    let app = AppConfig::new(KvConfig {
        keys: 300,
        ..KvConfig::default()
    });
    for policy in ["c-fcfs", "darc:samples=100"] {
        let (srv, _) = server(&app, &w, policy);
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.connect(srv.local_addr()).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let (st, body) = ask(&sock, 0, 1, &psp_apps::kv::key_of(12));
        assert_eq!((st, body[0], body.len()), (Status::Ok, 1, 65));
        assert_eq!(ask(&sock, 0, 2, b"missing").1, [0], "not found: OK, 0");
        assert_eq!(
            ask(&sock, 0, 3, b"").0,
            Status::BadRequest,
            "GET without a key"
        );
        assert_eq!(
            ask(&sock, 1, 4, &[1, 2]).0,
            Status::BadRequest,
            "SCAN cut short"
        );
        assert_eq!(
            ask(&sock, 2, 5, &[0]).0,
            Status::BadRequest,
            "PUT, empty key"
        );
        assert_eq!(ask(&sock, 3, 6, b"x").0, Status::UnknownType);
        let cfg = load(&srv, &app, &w, 500.0, 400);
        let rep = run_load(&cfg, &Progress::default()).unwrap();
        let s = srv.stop().unwrap();
        assert_eq!(
            rep.responses[Status::Ok as usize - 1],
            rep.scheduled,
            "{policy}: {:?}",
            rep.responses
        );
        assert_eq!(rep.rejected.total(), 0);
        let c = s.dispatcher.counts;
        assert_eq!(
            (c.bad_bodies, c.handler_errors, c.stranded),
            (3, 0, 0),
            "{policy}: {c:?}"
        );
        assert_eq!(c.completed, rep.scheduled + 6 - 1, "{policy}");
        assert_accounted(&s);
    }
}

#[test]
fn tpcc_answers_the_load_client_and_stays_consistent() {
    let w = Workload::resolve("tpcc").unwrap();
    let app = AppConfig::new(TpccConfig {
        warehouses: 1,
        full_scale: false,
        seed: 2,
    });
    let (srv, service) = server(&app, &w, "darc:samples=100");
    let cfg = load(&srv, &app, &w, 2_000.0, 400);
    let rep = run_load(&cfg, &Progress::default()).unwrap();
    let s = srv.stop().unwrap();
    assert_eq!(
        rep.responses[Status::Ok as usize - 1],
        rep.scheduled,
        "{:?}",
        rep.responses
    );
    let c = s.dispatcher.counts;
    assert_eq!(
        (c.bad_bodies, c.handler_errors, c.stranded),
        (0, 0, 0),
        "{c:?}"
    );
    assert_accounted(&s);
    let check = service.finish().expect("TPC-C checks its tables");
    assert!(check.contains("conditions hold"), "{check}");
}
