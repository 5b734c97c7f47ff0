//! Perséphone's network layer, in three rooms: the datapath (how datagrams
//! get in and out), the front ends (how requests reach the runtime and
//! their answers leave) and the open-loop load client; the wire protocol is
//! shared by all three.
//!
//! - [`protocol`]: the versioned binary header (docs/protocol.md); total parsers.
//! - [`datapath`]: the seam (receive in batches, transmit per worker), the
//!   packet pool and its tokens, kernel UDP ([`udp`]) and AF_XDP ([`xdp`]).
//! - [`front`]: `psp serve`'s engine ([`server`]), the datagram and TCP
//!   ([`tcp`]) front ends, the datagram protocols ([`dgram`]), the
//!   counters, the metrics exporter ([`exporter`]) and the baseline echo
//!   server ([`echo`]).
//! - [`client`]: `psp load`'s engine.
//! - [`scrape`]: a server's measured service times, read back from its
//!   `/metrics` (`psp load --server-profile`).
//!
//! The datapath and front-end modules are also reachable at the crate's
//! root (`psp_net::udp`, `psp_net::server`, ...), their paths before the
//! rooms were drawn.
//!
//! # Your own service
//!
//! A service is a [`psp_runtime::Handler`] (one per worker, or per request
//! slot under a preemptive policy: [`psp_runtime::HandlerFactory`]) and,
//! optionally, a [`Classifier`] that reads each request's body and names its
//! type (the paper's application-provided classifier;
//! [`ServerConfig::app_classifier`]). Every policy, datapath, counter, metric
//! and the drain work as for the built-in applications, which are served
//! through the same two traits. `examples/own_service.rs` is a complete
//! program (`cargo run --release -p psp-net --example own_service -- darc`).
//!
//! ```
//! use std::sync::Arc;
//! use psp_core::{TypeInfo, UNKNOWN_TYPE};
//! use psp_net::{Classifier, Server, ServerConfig, protocol};
//! use psp_runtime::{Handler, HandlerError, RequestContext, RuntimeConfig};
//!
//! /// Upper-cases short bodies (`u...`), reverses long ones (`r...`).
//! struct Text;
//! impl Handler for Text {
//!     fn handle(&mut self, ctx: &mut RequestContext<'_>) -> Result<(), HandlerError> {
//!         match ctx.body.split_first() {
//!             Some((b'u', rest)) => ctx.response.extend(rest.to_ascii_uppercase()),
//!             Some((b'r', rest)) => ctx.response.extend(rest.iter().rev()),
//!             _ => return Err(HandlerError::BadBody("u... or r...")),
//!         }
//!         Ok(())
//!     }
//! }
//!
//! /// The body's first byte names the type.
//! struct FirstByte;
//! impl Classifier for FirstByte {
//!     fn classify(&mut self, body: &[u8]) -> psp_core::TypeId {
//!         match body.first() {
//!             Some(b'u') => 0,
//!             Some(b'r') => 1,
//!             _ => UNKNOWN_TYPE,
//!         }
//!     }
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let types = ["upper", "reverse"].map(|n| TypeInfo { name: n.into(), mean_service_ns: Some(1e3) });
//! let server = Server::start(ServerConfig {
//!     addr: "127.0.0.1:0".parse()?,
//!     metrics: None,
//!     runtime: RuntimeConfig { workers: 1, ..RuntimeConfig::default() },
//!     policy: "darc".parse()?,
//!     types: types.to_vec(),
//!     classifier: psp_core::ClassifierKind::Header,
//!     app_classifier: Some(Arc::new(|| Box::new(FirstByte) as Box<dyn Classifier>)),
//!     handlers: Arc::new(|_| Box::new(Text) as Box<dyn Handler>),
//!     datapath: Default::default(),
//!     protocol: Default::default(),
//! })?;
//! let client = std::net::UdpSocket::bind("127.0.0.1:0")?;
//! client.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
//! let mut request = Vec::new();
//! protocol::encode_request(&mut request, 0, 1, b"rabc"); // type 0: not read
//! client.send_to(&request, server.local_addr())?;
//! let mut reply = [0u8; 64];
//! let n = client.recv(&mut reply)?;
//! let (header, status) = protocol::parse_response(&reply[..n]).expect("a response");
//! assert_eq!((header.id, status), (1, protocol::Status::Ok));
//! assert_eq!(&reply[protocol::HEADER_LEN..n], b"cba");
//! let report = server.stop()?;
//! assert_eq!(report.dispatcher.completed_by_type, vec![0, 1]); // classified as reverse
//! # Ok(())
//! # }
//! ```

pub mod client;
pub mod datapath;
pub mod front;
pub mod protocol;
pub mod scrape;

pub use datapath::{pool, udp, xdp};
pub use front::{dgram, echo, exporter, server, tcp};

pub use psp_core::Classifier;
pub use psp_core::ClassifierKind;
pub use server::{
    ClassifierFactory, DatapathKind, NetCounters, Server, ServerConfig, ServerError, ServerReport,
};
