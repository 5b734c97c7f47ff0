//! Your own service behind Perséphone: a handler and a classifier, served by
//! `psp serve`'s engine under any policy.
//!
//! The service here is a small inventory: `g<item>` reads one item's stock
//! (short), `r` adds up the whole inventory (long, about 200 µs, with
//! preemption points so that preemptive policies can suspend it). Its
//! classifier reads the first byte of each request's body; the scheduler
//! never parses the body itself. A client in the same program sends a mix of
//! both over UDP and prints what it got back and what the server counted.
//!
//!     cargo run --release -p psp-net --example own_service -- darc    # or c-fcfs, ts, synergy, ...
//!
//! The wire protocol is the project's (docs/protocol.md): a 16-byte header
//! (version, code, type, body length, request id) and the body; with an
//! application classifier the header's type field is not read (send 0).

use std::collections::HashMap;
use std::net::UdpSocket;
use std::sync::Arc;
use std::time::{Duration, Instant};

use psp_core::{TypeInfo, UNKNOWN_TYPE};
use psp_net::protocol;
use psp_net::{Classifier, Server, ServerConfig};
use psp_runtime::{Handler, HandlerError, RequestContext, RuntimeConfig};

/// The shared state: item stock, read by every worker.
struct Inventory {
    stock: Vec<u64>,
}

/// One worker's handler (or one request slot's, under a preemptive policy).
struct InventoryHandler {
    inventory: Arc<Inventory>,
}

impl Handler for InventoryHandler {
    fn handle(&mut self, ctx: &mut RequestContext<'_>) -> Result<(), HandlerError> {
        match ctx.body {
            [b'g', item @ ..] => {
                let i: usize = std::str::from_utf8(item)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .filter(|&i| i < self.inventory.stock.len())
                    .ok_or(HandlerError::BadBody("g<item>: an item number"))?;
                ctx.response
                    .extend_from_slice(self.inventory.stock[i].to_string().as_bytes());
            }
            [b'r'] => {
                let mut total = 0u64;
                for (i, s) in self.inventory.stock.iter().enumerate() {
                    // A little work per item, and a place to be preempted.
                    total = total.wrapping_add(s.wrapping_mul(31).rotate_left((i % 63) as u32));
                    if i % 64 == 0 {
                        ctx.preemption_point();
                    }
                }
                ctx.response.extend_from_slice(total.to_string().as_bytes());
            }
            _ => return Err(HandlerError::BadBody("g<item> or r")),
        }
        Ok(())
    }

    // Nothing tied to the thread is held across a preemption point.
    fn fiber_safe(&self) -> bool {
        true
    }
}

/// The application's classifier: the first byte names the type.
struct FirstByte;

impl Classifier for FirstByte {
    fn classify(&mut self, body: &[u8]) -> psp_core::TypeId {
        match body.first() {
            Some(b'g') => 0,
            Some(b'r') => 1,
            _ => UNKNOWN_TYPE,
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let policy = std::env::args().nth(1).unwrap_or_else(|| "darc".into());
    let inventory = Arc::new(Inventory {
        stock: (0..100_000u64).map(|i| i * 7 % 1000).collect(),
    });
    let shared = inventory.clone();
    let server = Server::start(ServerConfig {
        addr: "127.0.0.1:0".parse()?,
        metrics: None,
        runtime: RuntimeConfig {
            workers: 2,
            ..RuntimeConfig::default()
        },
        policy: policy.parse()?,
        // The types, in classifier order, with their expected mean service
        // times (DARC starts its reservation from them, then measures).
        types: vec![
            TypeInfo {
                name: "get".into(),
                mean_service_ns: Some(1_000.0),
            },
            TypeInfo {
                name: "report".into(),
                mean_service_ns: Some(200_000.0),
            },
        ],
        classifier: psp_core::ClassifierKind::Header,
        app_classifier: Some(Arc::new(|| Box::new(FirstByte) as Box<dyn Classifier>)),
        handlers: Arc::new(move |_instance: usize| {
            Box::new(InventoryHandler {
                inventory: shared.clone(),
            }) as Box<dyn Handler>
        }),
        datapath: Default::default(),
        protocol: Default::default(),
    })?;
    println!(
        "inventory service on udp://{} under {policy}",
        server.local_addr()
    );

    // A client: 4,000 requests, 1 in 50 a report, one every 100 µs.
    let socket = UdpSocket::bind("127.0.0.1:0")?;
    socket.connect(server.local_addr())?;
    socket.set_read_timeout(Some(Duration::from_millis(200)))?;
    let receiver = socket.try_clone()?;
    let n = 4_000u64;
    let collect = std::thread::spawn(move || {
        let mut answered = std::collections::HashSet::new();
        let mut statuses: HashMap<String, u64> = HashMap::new();
        let mut buf = [0u8; 2048];
        while let Ok(len) = receiver.recv(&mut buf) {
            if let Ok((h, status)) = protocol::parse_response(&buf[..len]) {
                *statuses.entry(format!("{status:?}")).or_default() += 1;
                answered.insert(h.id);
            }
            if answered.len() as u64 == n + 1 {
                break;
            }
        }
        statuses
    });
    let start = Instant::now();
    let mut dgram = Vec::new();
    for id in 0..n {
        while start.elapsed() < Duration::from_micros(100 * id) {
            std::hint::spin_loop();
        }
        let body = if id % 50 == 0 {
            b"r".to_vec()
        } else {
            format!("g{}", id * 13 % 100_000).into_bytes()
        };
        protocol::encode_request(&mut dgram, 0, id, &body);
        socket.send(&dgram)?;
    }
    // And one the classifier does not know.
    protocol::encode_request(&mut dgram, 0, n, b"x");
    socket.send(&dgram)?;
    let statuses = collect.join().expect("the client thread");
    let report = server.stop()?;
    println!("replies by status: {statuses:?}");
    println!(
        "server: {} received, {} completed, {} UNKNOWN_TYPE; per type:",
        report.net.received, report.dispatcher.counts.completed, report.net.unknown_type
    );
    for t in report.dispatcher.recorder.type_stats() {
        println!(
            "  {:<7} {:>5} completed, mean service {:>7.1} us, server-side p50 {:>7.1} us, p99.9 {:>8.1} us",
            t.name, t.count, t.mean_service_us, t.p50_latency_us, t.p999_latency_us
        );
    }
    assert_eq!(statuses.get("Ok").copied(), Some(n));
    assert_eq!(report.net.unknown_type, 1);
    Ok(())
}
