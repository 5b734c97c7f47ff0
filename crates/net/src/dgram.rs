//! The request protocols a datagram server speaks: this project's (a 16-byte
//! header with the type, docs/protocol.md) or memcached's over UDP (an
//! 8-byte frame header with a request id and sequence numbers, then one
//! text command). Parsing, the error replies, and the reply header written
//! over the request's in place. Nothing here does I/O.

use crate::pool::PACKET_BYTES;
use crate::protocol::{self, HEADER_LEN, ParseError, Status};

/// memcached's UDP frame header: request id, sequence number, datagrams in
/// the message, reserved (each a big-endian u16).
pub const MEMCACHE_FRAME: usize = 8;

/// Which protocol a datagram server speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DatagramProtocol {
    /// This project's binary protocol (docs/protocol.md).
    #[default]
    Psp,
    /// memcached's text protocol over UDP: single-datagram requests, one
    /// datagram per reply (request id echoed, sequence 0 of 1).
    Memcache,
}

/// What a received datagram is.
pub(crate) enum Parsed {
    /// Too short to carry an id to answer to: counted and dropped.
    Drop,
    /// Answered at once with this status.
    Refuse(Status),
    /// A request: the type its header names (this project's protocol) and
    /// its body's length (the body follows the header).
    Request {
        /// The header's type field (0 for memcached's, which has none).
        header_type: u16,
        /// The body's length.
        body_len: u16,
    },
}

impl DatagramProtocol {
    /// The header's length (the body starts there).
    #[inline]
    pub fn header_len(self) -> usize {
        match self {
            DatagramProtocol::Psp => HEADER_LEN,
            DatagramProtocol::Memcache => MEMCACHE_FRAME,
        }
    }

    /// Whether the body names the type (memcached's command): the
    /// application's classifier reads it.
    pub fn classifies_body(self) -> bool {
        matches!(self, DatagramProtocol::Memcache)
    }

    /// What the received bytes (`len` as sent, more than the buffer when cut)
    /// are.
    pub(crate) fn parse(self, bytes: &[u8], len: usize) -> Parsed {
        match self {
            DatagramProtocol::Psp => match protocol::parse_request(bytes) {
                Err(ParseError::Truncated(_)) => Parsed::Drop,
                Err(_) => Parsed::Refuse(Status::BadRequest),
                Ok(h) => Parsed::Request {
                    header_type: h.type_id,
                    body_len: h.body_len,
                },
            },
            DatagramProtocol::Memcache => {
                if bytes.len() < MEMCACHE_FRAME {
                    return Parsed::Drop;
                }
                let be = |i: usize| u16::from_be_bytes([bytes[i], bytes[i + 1]]);
                // One datagram, the whole request (memcached takes no
                // multi-datagram request over UDP either).
                if be(2) != 0 || be(4) != 1 || len >= PACKET_BYTES {
                    return Parsed::Refuse(Status::BadRequest);
                }
                let body = &bytes[MEMCACHE_FRAME..];
                match psp_resp::memcache::request_len(body, PACKET_BYTES) {
                    Ok(Some(n)) if n == body.len() => Parsed::Request {
                        header_type: 0,
                        body_len: n as u16,
                    },
                    _ => Parsed::Refuse(Status::BadRequest),
                }
            }
        }
    }

    /// The body of a reply with `status` other than OK (memcached's error
    /// line; nothing for this project's protocol, whose header says it).
    pub(crate) fn error_body(self, status: Status) -> &'static [u8] {
        match self {
            DatagramProtocol::Psp => b"",
            DatagramProtocol::Memcache => match status {
                Status::Ok => b"",
                Status::BadRequest => b"CLIENT_ERROR bad command line format\r\n",
                Status::UnknownType => b"ERROR\r\n",
                Status::Overloaded => b"SERVER_ERROR busy, request refused\r\n",
                Status::HandlerError => b"SERVER_ERROR internal error\r\n",
            },
        }
    }

    /// Rewrites the request's header in `data` as the reply's (status,
    /// `body_len` bytes of body).
    pub(crate) fn write_reply_header(self, data: &mut [u8], status: Status, body_len: usize) {
        match self {
            DatagramProtocol::Psp => {
                let (header, _) = data
                    .split_first_chunk_mut::<HEADER_LEN>()
                    .expect("packet buffers hold a header");
                protocol::make_response_header(header, status, body_len as u16);
            }
            DatagramProtocol::Memcache => {
                // The request id stays; sequence 0 of 1 datagram.
                data[2..8].copy_from_slice(&[0, 0, 0, 1, 0, 0]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mc(id: u16, seq: u16, total: u16, body: &[u8]) -> Vec<u8> {
        let mut d = Vec::new();
        for v in [id, seq, total, 0] {
            d.extend_from_slice(&v.to_be_bytes());
        }
        d.extend_from_slice(body);
        d
    }

    #[test]
    fn memcached_datagrams_parse_or_are_refused() {
        let p = DatagramProtocol::Memcache;
        let ok = mc(7, 0, 1, b"get k\r\n");
        assert!(matches!(
            p.parse(&ok, ok.len()),
            Parsed::Request { body_len: 7, .. }
        ));
        let set = mc(7, 0, 1, b"set k 0 0 2\r\nhi\r\n");
        assert!(matches!(p.parse(&set, set.len()), Parsed::Request { .. }));
        for bad in [
            mc(7, 1, 2, b"get k\r\n"),          // part of a multi-datagram request
            mc(7, 0, 1, b"get k"),              // incomplete
            mc(7, 0, 1, b"get k\r\nget j\r\n"), // two requests
            mc(7, 0, 1, b"set k 0 0 9\r\nhi\r\n"),
        ] {
            assert!(
                matches!(p.parse(&bad, bad.len()), Parsed::Refuse(Status::BadRequest)),
                "{bad:?}"
            );
        }
        assert!(matches!(p.parse(&ok[..5], 5), Parsed::Drop));
        let mut reply = ok.clone();
        p.write_reply_header(&mut reply, Status::Ok, 3);
        assert_eq!(&reply[..8], &[0, 7, 0, 0, 0, 1, 0, 0]);
    }
}
