//! Framing at a real server over IPv4 loopback: a request datagram longer than
//! the protocol's maximum (`protocol::MAX_REQUEST_LEN`) is answered BAD_REQUEST
//! with its id, whatever its header's body length says, including datagrams the
//! kernel truncates to the receive buffer; a valid request of the maximum length
//! is still served.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Duration;

use psp_apps::spin::EchoService;
use psp_net::protocol::{self, HEADER_LEN, MAX_REQUEST_BODY, MAX_REQUEST_LEN, Status};
use psp_net::{ClassifierKind, Server, ServerConfig};
use psp_runtime::RuntimeConfig;
use psp_workload::Workload;

fn server() -> Server {
    Server::start(ServerConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        metrics: None,
        runtime: RuntimeConfig {
            workers: 1,
            queue_capacity: 64,
            ..crate::common::server::runtime()
        },
        policy: "darc".parse().unwrap(),
        types: Workload::fixed("framing", &[("short", 20.0, 0.9), ("long", 200.0, 0.1)])
            .type_infos(),
        classifier: ClassifierKind::Header,
        app_classifier: None,
        // Echo: a body of any length is a valid request to serve.
        handlers: psp_apps::handler_factory(Arc::new(EchoService), None),
        datapath: Default::default(),
        protocol: Default::default(),
    })
    .expect("server starts")
}

fn client_socket(server: SocketAddr) -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.connect(server).unwrap();
    // Generous: CI machines are slow and shared.
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

/// A datagram of `len` bytes (at least a header) whose header is a version-1
/// request of type 0 with `id`, claiming a body of `claimed` bytes.
fn datagram(len: usize, claimed: u16, id: u64) -> Vec<u8> {
    let mut d: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let h: &mut [u8; HEADER_LEN] = (&mut d[..HEADER_LEN]).try_into().unwrap();
    protocol::write_header(h, protocol::CODE_REQUEST, 0, claimed, id);
    d
}

/// Sends `dgram` and parses the reply.
fn ask(sock: &UdpSocket, dgram: &[u8]) -> (protocol::Header, Status, Vec<u8>) {
    sock.send(dgram).unwrap();
    let mut buf = vec![0u8; 65_536];
    let n = sock.recv(&mut buf).expect("a reply within 5 s");
    let (h, st) = protocol::parse_response(&buf[..n]).expect("a valid response");
    (h, st, buf[HEADER_LEN..n].to_vec())
}

#[test]
fn datagrams_longer_than_the_maximum_are_bad_requests_whatever_their_header_says() {
    let srv = server();
    let sock = client_socket(srv.local_addr());
    let claimed = MAX_REQUEST_BODY as u16;
    assert_eq!(claimed, 2032);

    // The longest valid request is served, its whole body echoed.
    let max = datagram(MAX_REQUEST_LEN, claimed, 1);
    let (h, st, body) = ask(&sock, &max);
    assert_eq!((st, h.id, h.type_id), (Status::Ok, 1, 0));
    assert_eq!(body, &max[HEADER_LEN..]);

    // Longer datagrams claiming the largest valid body: one byte over (kept
    // whole by the server's buffer), 4,096 and 65,507 bytes (cut by the kernel
    // to the buffer: the part the header describes would look complete).
    let oversize = [
        (MAX_REQUEST_LEN + 1, claimed, 2),
        (4096, claimed, 3),
        (65_507, claimed, 4),
        // And with a length field that agrees with the datagram.
        (MAX_REQUEST_LEN + 1, claimed + 1, 5),
        (4096, (4096 - HEADER_LEN) as u16, 6),
    ];
    for &(len, claimed, id) in &oversize {
        let (h, st, body) = ask(&sock, &datagram(len, claimed, id));
        assert_eq!(
            (st, h.id, h.type_id, body.len()),
            (Status::BadRequest, id, 0, 0),
            "{len}-byte datagram claiming {claimed}"
        );
    }

    // The server still serves valid requests after them.
    let (h, st, _) = ask(&sock, &datagram(HEADER_LEN + 16, 16, 7));
    assert_eq!((st, h.id), (Status::Ok, 7));

    let s = srv.stop().unwrap();
    assert_eq!(s.net.bad_request, oversize.len() as u64, "{:?}", s.net);
    assert_eq!(s.net.received, oversize.len() as u64 + 2, "{:?}", s.net);
    assert_eq!(s.net.truncated, 0);
    assert_eq!(s.dispatcher.counts.completed, 2);
    assert_eq!(s.dispatcher.counts.handler_errors, 0);
}
