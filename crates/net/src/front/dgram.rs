//! The request protocols a datagram server speaks: this project's (a 16-byte
//! header with the type, docs/protocol.md) or memcached's over UDP (an
//! 8-byte frame header with a request id and sequence numbers, then one
//! text command). Parsing, the error replies, the reply header written
//! over the request's in place, and [`PeerOrder`]: memcached's promise that
//! a client's commands take effect in the order sent. Nothing here does I/O.

use std::net::SocketAddr;

use psp_runtime::Slot;

use crate::datapath::PeerAddr;
use crate::pool::{PACKET_BYTES, PacketToken};
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
                match psp_proto::memcache::request_len(body, PACKET_BYTES) {
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

/// memcached's commands in datagrams, typed as the registry's memcached
/// protocol types them (a datagram carries no connection state).
pub(crate) struct MemcacheClassifier;

impl psp_core::Classifier for MemcacheClassifier {
    fn classify(&mut self, req: &[u8]) -> psp_core::TypeId {
        psp_proto::memcache::classify(req)
    }
}

/// A peer as [`PeerOrder`] tells them apart: its address and port (all
/// zero for an address of an unknown family).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PeerKey {
    ip: u128,
    port: u16,
    v6: bool,
}

impl PeerKey {
    /// The key of `peer`.
    #[inline]
    pub(crate) fn of(peer: &PeerAddr) -> Self {
        match peer.to_socket_addr() {
            Some(SocketAddr::V4(a)) => PeerKey {
                ip: u128::from(a.ip().to_bits()),
                port: a.port(),
                v6: false,
            },
            Some(SocketAddr::V6(a)) => PeerKey {
                ip: a.ip().to_bits(),
                port: a.port(),
                v6: true,
            },
            None => PeerKey::default(),
        }
    }

    #[inline]
    fn hash(self) -> u64 {
        let x = (self.ip as u64)
            ^ ((self.ip >> 64) as u64).rotate_left(29)
            ^ (u64::from(self.port) << 47)
            ^ u64::from(self.v6);
        x.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }
}

/// No token.
const NONE: u32 = u32::MAX;

/// A peer with a request executing: its key, the executing request's token
/// (`NONE`: an empty table entry) and its held requests, oldest first, linked
/// through [`PeerOrder::next`].
#[derive(Clone, Copy)]
struct PeerEntry {
    key: PeerKey,
    running: u32,
    head: u32,
    tail: u32,
}

const EMPTY_ENTRY: PeerEntry = PeerEntry {
    key: PeerKey {
        ip: 0,
        port: 0,
        v6: false,
    },
    running: NONE,
    head: NONE,
    tail: NONE,
};

/// What to do with a request that arrived ([`PeerOrder::arrive`]).
#[derive(Debug)]
pub(crate) enum Arrival {
    /// Nothing of its peer executes: to the policy now (it now executes for
    /// its peer; if the policy refuses it, [`PeerOrder::finished`] it).
    Run(PacketToken),
    /// Held behind its peer's executing request, in arrival order: the
    /// order keeps its token.
    Held,
    /// Held requests are at the bound: refuse it.
    Full(PacketToken),
}

/// memcached's order for a datagram server (the dispatcher's, on its
/// thread): a peer (address and port) has at most one request at the policy
/// or on a worker; the next ones wait here, received and classified, in
/// their packet buffers (under their tokens), until the one before is
/// answered. Everything is sized at start-up: a table of the peers with a
/// request executing (at most one per token, open addressing at most half
/// full) and, per token, its peer, its place in a held list and its slot.
/// At most `capacity` requests are held at once; one more is refused.
pub(crate) struct PeerOrder {
    table: Box<[PeerEntry]>,
    /// `64 - log2(table.len())`: a key's home is its hash's top bits.
    shift: u32,
    /// Per token: its request's peer (executing or held).
    key_of: Box<[PeerKey]>,
    /// Per held token: the next held request of the same peer.
    next: Box<[u32]>,
    /// Per held token: its request as classified on arrival.
    slot: Box<[Slot]>,
    /// Per held token: the token itself (the order owns a held request's
    /// packet).
    held_tokens: Box<[Option<PacketToken>]>,
    held: usize,
    capacity: usize,
}

impl PeerOrder {
    /// An order for `tokens` request slots holding at most `capacity`
    /// requests (at least 1).
    pub(crate) fn new(tokens: usize, capacity: usize) -> Self {
        let size = (2 * tokens).next_power_of_two().max(2);
        PeerOrder {
            table: vec![EMPTY_ENTRY; size].into_boxed_slice(),
            shift: 64 - size.trailing_zeros(),
            key_of: vec![PeerKey::default(); tokens].into_boxed_slice(),
            next: vec![NONE; tokens].into_boxed_slice(),
            slot: vec![Slot::BLANK; tokens].into_boxed_slice(),
            held_tokens: (0..tokens).map(|_| None).collect(),
            held: 0,
            capacity: capacity.max(1),
        }
    }

    /// Requests held now.
    #[inline]
    pub(crate) fn held(&self) -> usize {
        self.held
    }

    #[inline]
    fn home(&self, key: PeerKey) -> usize {
        (key.hash() >> self.shift) as usize
    }

    /// The table index of `key`'s entry, or of the empty one where it would go.
    #[inline]
    fn find(&self, key: PeerKey) -> (usize, bool) {
        let mask = self.table.len() - 1;
        let mut i = self.home(key);
        loop {
            let e = &self.table[i];
            if e.running == NONE {
                return (i, false);
            }
            if e.key == key {
                return (i, true);
            }
            i = (i + 1) & mask;
        }
    }

    /// The request of `key` under `token` (`slot`: as classified) arrived.
    #[inline]
    pub(crate) fn arrive(&mut self, key: PeerKey, token: PacketToken, slot: Slot) -> Arrival {
        let (i, found) = self.find(key);
        let index = token.index();
        let t = index as usize;
        self.key_of[t] = key;
        if !found {
            self.table[i] = PeerEntry {
                key,
                running: index,
                head: NONE,
                tail: NONE,
            };
            return Arrival::Run(token);
        }
        if self.held >= self.capacity {
            return Arrival::Full(token);
        }
        self.held += 1;
        self.slot[t] = slot;
        self.next[t] = NONE;
        self.held_tokens[t] = Some(token);
        let e = &mut self.table[i];
        match e.tail {
            NONE => e.head = index,
            tail => self.next[tail as usize] = index,
        }
        e.tail = index;
        Arrival::Held
    }

    /// Hands held request `index` back, to execute or be refused.
    #[inline]
    fn release(&mut self, index: u32) -> (PacketToken, Slot) {
        let t = index as usize;
        let token = self.held_tokens[t].take().expect("a held request's token");
        (token, self.slot[t])
    }

    /// The executing request under token `index` was answered (or
    /// refused): its peer's next held request, which executes from now on
    /// (if the policy refuses it, it is [`finished`](Self::finished) in
    /// turn).
    #[inline]
    pub(crate) fn finished(&mut self, index: u32) -> Option<(PacketToken, Slot)> {
        let (i, found) = self.find(self.key_of[index as usize]);
        debug_assert!(found && self.table[i].running == index, "token {index}");
        if !found {
            return None;
        }
        let e = &mut self.table[i];
        match e.head {
            NONE => {
                self.remove(i);
                None
            }
            next => {
                e.head = self.next[next as usize];
                if e.head == NONE {
                    e.tail = NONE;
                }
                e.running = next;
                self.held -= 1;
                Some(self.release(next))
            }
        }
    }

    /// Takes any held request out of its peer's order (at the end of a
    /// run: it is refused instead).
    #[cold]
    pub(crate) fn take_held(&mut self) -> Option<(PacketToken, Slot)> {
        let e = self
            .table
            .iter_mut()
            .find(|e| e.running != NONE && e.head != NONE)?;
        let token = e.head;
        e.head = self.next[token as usize];
        if e.head == NONE {
            e.tail = NONE;
        }
        self.held -= 1;
        Some(self.release(token))
    }

    /// Empties entry `i`, shifting back the entries of its probe run that
    /// would no longer be found (linear probing's deletion, no tombstones).
    fn remove(&mut self, mut i: usize) {
        let mask = self.table.len() - 1;
        self.table[i] = EMPTY_ENTRY;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            if self.table[j].running == NONE {
                return;
            }
            let h = self.home(self.table[j].key);
            // The entry at `j` stays when its home lies cyclically in (i, j].
            let stays = if i <= j {
                i < h && h <= j
            } else {
                i < h || h <= j
            };
            if !stays {
                self.table[i] = self.table[j];
                self.table[j] = EMPTY_ENTRY;
                i = j;
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

    #[test]
    fn each_peer_runs_one_request_at_a_time_in_arrival_order() {
        let key = |port: u16| {
            PeerKey::of(&PeerAddr::from(
                format!("127.0.0.{}:{port}", port % 3 + 1).parse().unwrap(),
            ))
        };
        let slot = |id: u64| Slot {
            req: psp_core::Request {
                id,
                ..Slot::BLANK.req
            },
            ..Slot::BLANK
        };
        // The order sees tokens only as slots to hold (no pool here).
        // SAFETY: no pool is touched: a token here only names its slot.
        let tok = |t: u32| unsafe { PacketToken::from_raw(t) };
        #[derive(Debug, PartialEq)]
        enum Seen {
            Run(u32),
            Held,
            Full(u32),
        }
        let seen = |a: Arrival| match a {
            Arrival::Run(t) => Seen::Run(t.into_raw()),
            Arrival::Held => Seen::Held,
            Arrival::Full(t) => Seen::Full(t.into_raw()),
        };
        let index = |r: Option<(PacketToken, Slot)>| r.map(|(t, s)| (t.into_raw(), s.req.id));
        // 64 tokens, 20 peers with 3 requests each (one runs, two held),
        // in a table small enough for long probe runs.
        let mut o = PeerOrder::new(64, 40);
        for round in 0..3u32 {
            for p in 0..20u16 {
                let token = u32::from(p) * 3 + round;
                let want = if round == 0 {
                    Seen::Run(token)
                } else {
                    Seen::Held
                };
                assert_eq!(seen(o.arrive(key(p), tok(token), slot(token.into()))), want);
            }
        }
        assert_eq!(o.held(), 40);
        // Full: one more is refused, whichever peer it comes from.
        assert_eq!(seen(o.arrive(key(0), tok(63), slot(63))), Seen::Full(63));
        // A new peer still runs at once.
        assert_eq!(seen(o.arrive(key(99), tok(62), slot(62))), Seen::Run(62));
        assert!(o.finished(62).is_none());
        // Peers finish in any order; each one's requests come in order,
        // and entries leave the table (shifting others back) as they go.
        let order: Vec<u16> = (0..20).map(|i| (i * 7) % 20).collect();
        for &p in &order {
            let t = u32::from(p) * 3;
            assert_eq!(index(o.finished(t)), Some((t + 1, u64::from(t + 1))));
            assert_eq!(index(o.finished(t + 1)).map(|(t, _)| t), Some(t + 2));
            assert!(o.finished(t + 2).is_none());
            // The peer is gone: its next request runs at once.
            assert_eq!(seen(o.arrive(key(p), tok(t), slot(0))), Seen::Run(t));
            assert!(o.finished(t).is_none());
        }
        assert_eq!(o.held(), 0);
        assert!(o.table.iter().all(|e| e.running == NONE));
        // What is held at the end is taken out, oldest of a peer first.
        assert_eq!(seen(o.arrive(key(5), tok(0), slot(0))), Seen::Run(0));
        assert_eq!(seen(o.arrive(key(5), tok(1), slot(1))), Seen::Held);
        assert_eq!(seen(o.arrive(key(5), tok(2), slot(2))), Seen::Held);
        assert_eq!(index(o.take_held()).map(|(t, _)| t), Some(1));
        assert_eq!(index(o.take_held()).map(|(t, _)| t), Some(2));
        assert_eq!(index(o.take_held()).map(|(t, _)| t), None);
        assert!(o.finished(0).is_none());
    }
}
