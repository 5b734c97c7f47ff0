//! A service's own classifier (`ServerConfig::app_classifier`): the body, not
//! the header, names the type; a body it does not know is answered
//! UNKNOWN_TYPE; every other request is served once, counted under the type
//! the classifier gave.

use std::net::UdpSocket;
use std::sync::Arc;
use std::time::Duration;

use psp_core::{TypeInfo, UNKNOWN_TYPE};
use psp_net::protocol::{self, HEADER_LEN, Status};
use psp_net::{Classifier, Server, ServerConfig};
use psp_runtime::{Handler, HandlerError, RequestContext, RuntimeConfig};

/// Answers the body's length.
struct Len;
impl Handler for Len {
    fn handle(&mut self, ctx: &mut RequestContext<'_>) -> Result<(), HandlerError> {
        ctx.response
            .extend_from_slice(&(ctx.body.len() as u32).to_le_bytes());
        Ok(())
    }
}

/// `a...` is type 0, `b...` type 1, `c...` type 2; anything else unknown.
struct Letter;
impl Classifier for Letter {
    fn classify(&mut self, body: &[u8]) -> psp_core::TypeId {
        match body.first() {
            Some(&c @ b'a'..=b'c') => u16::from(c - b'a'),
            _ => UNKNOWN_TYPE,
        }
    }
}

#[test]
fn the_application_classifier_types_every_request_from_its_body() {
    let server = Server::start(ServerConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        metrics: None,
        runtime: RuntimeConfig {
            workers: 2,
            raise_priority: false,
            // Threads sleep when idle: no more spinning threads than cores.
            idle: psp_runtime::IdleStrategy::SpinPark {
                spin_us: 0,
                park_us: 1_000,
            },
            ..RuntimeConfig::default()
        },
        policy: "darc:samples=10".parse().unwrap(),
        types: ["a", "b", "c"]
            .map(|n| TypeInfo {
                name: n.into(),
                mean_service_ns: Some(1e3),
            })
            .to_vec(),
        classifier: psp_core::ClassifierKind::Header,
        app_classifier: Some(Arc::new(|| Box::new(Letter) as Box<dyn Classifier>)),
        handlers: Arc::new(|_| Box::new(Len) as Box<dyn Handler>),
        datapath: Default::default(),
        protocol: Default::default(),
    })
    .unwrap();
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    // 30 requests of each letter, each with a header type the server must
    // not read (9: not even a registered type), and 5 unknown bodies.
    let bodies: Vec<Vec<u8>> = (0..95)
        .map(|i| match i {
            0..30 => format!("a{i}").into_bytes(),
            30..60 => format!("bb{i}").into_bytes(),
            60..90 => format!("ccc{i}").into_bytes(),
            _ => format!("z{i}").into_bytes(),
        })
        .collect();
    let mut dgram = Vec::new();
    for (id, body) in bodies.iter().enumerate() {
        protocol::encode_request(&mut dgram, 9, id as u64, body);
        client.send_to(&dgram, server.local_addr()).unwrap();
    }
    let mut seen = vec![0u32; bodies.len()];
    let mut buf = [0u8; 256];
    for _ in 0..bodies.len() {
        let n = client.recv(&mut buf).expect("every request answered");
        let (h, status) = protocol::parse_response(&buf[..n]).unwrap();
        let id = h.id as usize;
        seen[id] += 1;
        if id < 90 {
            assert_eq!(status, Status::Ok, "request {id}");
            let len = u32::from_le_bytes(buf[HEADER_LEN..HEADER_LEN + 4].try_into().unwrap());
            assert_eq!(len as usize, bodies[id].len(), "request {id}");
        } else {
            assert_eq!(status, Status::UnknownType, "request {id}");
        }
    }
    assert!(seen.iter().all(|&n| n == 1), "{seen:?}");
    let report = server.stop().unwrap();
    assert_eq!(report.dispatcher.completed_by_type, vec![30, 30, 30]);
    assert_eq!(report.net.unknown_type, 5);
    assert_eq!(report.net.received, 95);
}
