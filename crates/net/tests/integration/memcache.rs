//! memcached's protocol behind `psp serve` (`--protocol memcache` over TCP,
//! `memcache-udp` over UDP) on the RocksDB store, given malformed input:
//! unknown commands and binary garbage answered `ERROR` on a connection that
//! stays open, huge declared lengths, bad numbers and endless lines answered
//! and the connection closed, a request sent one byte at a time served, bad
//! datagrams answered or counted; the server serving throughout and every
//! counter balanced.

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::time::Duration;

use psp_net::dgram::DatagramProtocol;
use psp_net::tcp::TcpConfig;
use psp_net::{DatapathKind, Server, ServerReport};

use crate::common;

fn server(datapath: DatapathKind, protocol: DatagramProtocol) -> Server {
    common::server::start(
        common::server::kv_service(&psp_proto::memcache::Memcache),
        common::server::types(
            &psp_proto::memcache::TYPES,
            &psp_proto::memcache::TYPE_MEAN_US,
        ),
        "darc",
        datapath,
        protocol,
    )
}

/// Every request the server read ends in one outcome, and every admitted
/// one was answered.
fn assert_balanced(r: &ServerReport) {
    let (n, c) = (&r.net, &r.dispatcher.counts);
    assert_eq!(
        n.received,
        n.truncated + n.bad_request + n.unknown_type + c.arrived,
        "{n:?} {c:?}"
    );
    assert_eq!(c.arrived, c.shed + c.admitted, "{c:?}");
    assert_eq!(c.admitted, c.completed, "{c:?}");
    assert_eq!(c.stranded, 0, "{c:?}");
}

fn connect(s: &Server) -> TcpStream {
    let c = TcpStream::connect(s.local_addr()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c
}

/// Reads until the reply ends with `end` (or the peer closed).
fn read_until(c: &mut TcpStream, end: &[u8]) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(end) {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => panic!("read after {:?}: {e}", String::from_utf8_lossy(&got)),
        }
    }
    got
}

#[test]
fn malformed_memcached_text_is_answered_and_the_server_keeps_serving() {
    let s = server(
        DatapathKind::Tcp(
            psp_proto::find("memcache").expect("registered"),
            TcpConfig::default(),
        ),
        DatagramProtocol::default(),
    );
    // Unknown commands and binary garbage: ERROR, the connection stays.
    let mut c = connect(&s);
    c.write_all(b"bogus command\r\n\x00\x01\x02\xffgarbage\r\nversion\r\n")
        .unwrap();
    assert_eq!(
        read_until(&mut c, b"VERSION psp-1.0\r\n"),
        b"ERROR\r\nERROR\r\nVERSION psp-1.0\r\n"
    );
    // A request sent one byte at a time is served.
    for &b in b"set slow 0 0 5\r\nhello\r\n" {
        c.write_all(&[b]).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(read_until(&mut c, b"\r\n"), b"STORED\r\n");
    c.write_all(b"get slow\r\n").unwrap();
    assert_eq!(
        read_until(&mut c, b"END\r\n"),
        b"VALUE slow 0 5\r\nhello\r\nEND\r\n"
    );
    // A bad number or key, a line of the wrong shape, a bad data block:
    // answered as memcached answers them, and the connection reads on in
    // step, as memcached's (the block after a refused line is a command).
    c.write_all(b"set k x 0 1\r\nv\r\nset k 0 0\r\nset k 0 0 1\r\nxyz\r\nget slow\r\n")
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&read_until(&mut c, b"END\r\n")),
        "CLIENT_ERROR bad command line format\r\nERROR\r\nERROR\r\n\
         CLIENT_ERROR bad data chunk\r\nERROR\r\nVALUE slow 0 5\r\nhello\r\nEND\r\n"
    );
    // A huge declared length, a line without end: answered, then the
    // connection closed (memcached cannot read on after them either).
    let endless = vec![b'a'; 64 << 10];
    for (bad, reply) in [
        (
            &b"set k 0 0 99999999999\r\n"[..],
            &b"SERVER_ERROR object too large"[..],
        ),
        // Past the 2,048-byte line limit (before the request limit).
        (&endless[..], b"CLIENT_ERROR"),
    ] {
        let mut c = connect(&s);
        c.write_all(bad).unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got).unwrap(); // returns once the server closes
        assert!(
            got.starts_with(reply),
            "{:?}: {}",
            String::from_utf8_lossy(&bad[..bad.len().min(40)]),
            String::from_utf8_lossy(&got)
        );
    }
    // Still serving.
    c.write_all(b"get slow\r\n").unwrap();
    assert_eq!(
        read_until(&mut c, b"END\r\n"),
        b"VALUE slow 0 5\r\nhello\r\nEND\r\n"
    );
    drop(c);
    let r = s.stop().unwrap();
    assert_balanced(&r);
    assert_eq!(r.net.bad_request, 2, "{:?}", r.net);
    assert_eq!(r.net.tcp.unwrap().closed_on_error, 2);
}

#[test]
fn malformed_memcached_datagrams_are_answered_or_counted() {
    let s = server(DatapathKind::Udp, DatagramProtocol::Memcache);
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.connect(s.local_addr()).unwrap();
    let frame = |id: u16, seq: u16, total: u16, body: &[u8]| -> Vec<u8> {
        let mut d = Vec::new();
        for v in [id, seq, total, 0] {
            d.extend_from_slice(&v.to_be_bytes());
        }
        d.extend_from_slice(body);
        d
    };
    let reply = |want_id: u16| -> Vec<u8> {
        let mut buf = [0u8; 2048];
        let n = c.recv(&mut buf).unwrap();
        assert_eq!(u16::from_be_bytes([buf[0], buf[1]]), want_id);
        buf[8..n].to_vec()
    };
    // Shorter than the frame header: nothing to answer to, counted.
    c.send(b"\x00\x01\x00").unwrap();
    // Part of a multi-datagram request, a truncated request, binary garbage
    // without a line end: each answered with memcached's error line.
    for (id, d) in [
        (2, frame(2, 1, 2, b"get k\r\n")),
        (3, frame(3, 0, 1, b"set k 0 0 5\r\nhel")),
        (4, frame(4, 0, 1, b"\x00\x01\x02\xff")),
    ] {
        c.send(&d).unwrap();
        assert_eq!(reply(id), b"CLIENT_ERROR bad command line format\r\n");
    }
    // An unknown command is ERROR; a real request is served after all this.
    c.send(&frame(5, 0, 1, b"bogus\r\n")).unwrap();
    assert_eq!(reply(5), b"ERROR\r\n");
    c.send(&frame(6, 0, 1, b"set k 0 0 2\r\nhi\r\n")).unwrap();
    assert_eq!(reply(6), b"STORED\r\n");
    c.send(&frame(7, 0, 1, b"get k\r\n")).unwrap();
    assert_eq!(reply(7), b"VALUE k 0 2\r\nhi\r\nEND\r\n");
    let r = s.stop().unwrap();
    assert_balanced(&r);
    assert_eq!(r.net.truncated, 1, "{:?}", r.net);
    assert_eq!(r.net.bad_request, 3, "{:?}", r.net);
}
