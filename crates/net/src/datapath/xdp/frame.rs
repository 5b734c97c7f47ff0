//! Ethernet II + IPv4 + UDP frames for the AF_XDP datapath.
//!
//! With AF_XDP, user space receives and sends whole link-layer frames: the
//! kernel's IP and UDP stacks are bypassed, so this module does their per-packet
//! work. [`parse_udp4`] checks a received frame (IPv4 header checksum, UDP
//! checksum, lengths, no fragments) and says where the UDP payload lies;
//! [`write_udp4`] fills in the 42 bytes of headers in front of a payload that
//! is already in place, with both checksums.
//!
//! This is on the per-packet path, so nothing here may allocate, make a
//! syscall, lock, or copy the payload: every function works on borrowed byte
//! slices (normally a UMEM chunk) and returns plain values. Malformed input is
//! reported as a [`FrameError`] (one drop counter per variant), never a panic.
//!
//! Not handled (these frames are rejected, not misparsed): VLAN tags
//! ([`FrameError::NotIpv4`]), IPv6, IP fragments ([`FrameError::Fragment`]).

use std::fmt;
use std::net::Ipv4Addr;

/// Length of an Ethernet II header (destination MAC, source MAC, ethertype).
pub const ETH_LEN: usize = 14;
/// Length of an IPv4 header without options.
pub const IPV4_LEN: usize = 20;
/// Length of a UDP header.
pub const UDP_LEN: usize = 8;
/// Length of the headers this side writes (no IP options): 42 bytes.
/// [`write_udp4`] expects the payload at `frame[HEADERS_LEN..]`.
pub const HEADERS_LEN: usize = ETH_LEN + IPV4_LEN + UDP_LEN;
/// Largest UDP payload whose IPv4 packet fits a 1500-byte MTU
/// (1500 - 20 bytes of IPv4 header - 8 bytes of UDP header = 1472).
pub const MAX_UDP_PAYLOAD_1500: usize = 1500 - 28;

/// Ethertype of IPv4.
const ETHERTYPE_IPV4: u16 = 0x0800;
/// IP protocol number of UDP.
const PROTO_UDP: u8 = 17;
/// TTL of the packets [`write_udp4`] writes.
const TTL: u8 = 64;
/// IPv4 flags/fragment-offset word: Don't Fragment.
const FLAG_DF: u16 = 0x4000;
/// IPv4 flags/fragment-offset word: More Fragments.
const FLAG_MF: u16 = 0x2000;
/// IPv4 flags/fragment-offset word: the 13-bit fragment offset.
const FRAG_OFFSET_MASK: u16 = 0x1fff;
/// Largest UDP payload an IPv4 packet can carry (total length is a u16).
const MAX_UDP4_PAYLOAD: usize = u16::MAX as usize - IPV4_LEN - UDP_LEN;

/// One end of a UDP-over-IPv4-over-Ethernet conversation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Link-layer (MAC) address.
    pub mac: [u8; 6],
    /// IPv4 address.
    pub ip: Ipv4Addr,
    /// UDP port.
    pub port: u16,
}

/// A received UDP datagram's place in its frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Udp4 {
    /// The sender (Ethernet source, IPv4 source, UDP source port).
    pub src: Endpoint,
    /// The receiver (Ethernet destination, IPv4 destination, UDP destination port).
    pub dst: Endpoint,
    /// Offset of the UDP payload in the frame (42 unless the IP header has options).
    pub payload_offset: usize,
    /// Length of the UDP payload (UDP length - 8).
    pub payload_len: usize,
}

impl Udp4 {
    /// The payload's byte range in the frame it was parsed from.
    #[must_use]
    pub fn payload_range(&self) -> std::ops::Range<usize> {
        self.payload_offset..self.payload_offset + self.payload_len
    }
}

/// Why a frame was dropped: one counter each.
///
/// `#[repr(u8)]` with discriminants in [`FrameError::ALL`] order, so
/// `err as usize` indexes an array of counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameError {
    /// The frame ends before a header it must contain, or before the end
    /// the IPv4 total length gives.
    Truncated,
    /// The ethertype is not IPv4 (ARP, IPv6, a VLAN tag, ...).
    NotIpv4,
    /// IP version is not 4, IHL < 5, or the total length is below
    /// IHL * 4 + 8.
    BadIpHeader,
    /// The IPv4 header checksum does not verify.
    BadIpChecksum,
    /// The packet is an IP fragment (MF set or fragment offset non-zero).
    Fragment,
    /// The IP protocol is not UDP.
    NotUdp,
    /// The UDP length is below 8 or beyond the IP payload.
    BadUdpLength,
    /// The UDP checksum is non-zero and does not verify.
    BadUdpChecksum,
}

impl FrameError {
    /// Every variant, in discriminant order (`ALL[e as usize] == e`).
    pub const ALL: [FrameError; 8] = [
        FrameError::Truncated,
        FrameError::NotIpv4,
        FrameError::BadIpHeader,
        FrameError::BadIpChecksum,
        FrameError::Fragment,
        FrameError::NotUdp,
        FrameError::BadUdpLength,
        FrameError::BadUdpChecksum,
    ];

    /// The variant's snake_case name, for metric labels.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            FrameError::Truncated => "truncated",
            FrameError::NotIpv4 => "not_ipv4",
            FrameError::BadIpHeader => "bad_ip_header",
            FrameError::BadIpChecksum => "bad_ip_checksum",
            FrameError::Fragment => "fragment",
            FrameError::NotUdp => "not_udp",
            FrameError::BadUdpLength => "bad_udp_length",
            FrameError::BadUdpChecksum => "bad_udp_checksum",
        }
    }
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::error::Error for FrameError {}

#[inline]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline]
fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline]
fn mac_at(b: &[u8], at: usize) -> [u8; 6] {
    let mut mac = [0; 6];
    mac.copy_from_slice(&b[at..at + 6]);
    mac
}

#[inline]
fn ip_at(b: &[u8], at: usize) -> Ipv4Addr {
    Ipv4Addr::new(b[at], b[at + 1], b[at + 2], b[at + 3])
}

/// Adds `data`, as big-endian 16-bit words (an odd last byte padded with a
/// zero byte), to a one's-complement accumulator. Reads 8 bytes at a time and
/// adds them as two 32-bit halves: since 2^16 ≡ 1 (mod 2^16 - 1), summing
/// 32-bit words and folding later gives the same result as summing 16-bit
/// words. `data` must start at an even offset of the checksummed stream.
#[inline]
fn sum_words(mut acc: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        acc += (w >> 32) + (w & 0xffff_ffff);
    }
    let mut pairs = chunks.remainder().chunks_exact(2);
    for p in &mut pairs {
        acc += u64::from(u16::from_be_bytes([p[0], p[1]]));
    }
    if let [last] = pairs.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

/// Folds a one's-complement accumulator to 16 bits (end-around carries).
#[inline]
fn fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The one's-complement sum of the UDP pseudo-header and `udp`, folded,
/// not complemented.
#[inline]
fn udp4_sum(src: Ipv4Addr, dst: Ipv4Addr, udp: &[u8]) -> u16 {
    let s = u32::from(src);
    let d = u32::from(dst);
    let acc = u64::from(s >> 16)
        + u64::from(s & 0xffff)
        + u64::from(d >> 16)
        + u64::from(d & 0xffff)
        + u64::from(PROTO_UDP)
        + udp.len() as u64;
    fold(sum_words(acc, udp))
}

/// The Internet checksum (RFC 1071) of an IPv4 header as it stands.
///
/// Over a header whose checksum field (bytes 10..12) is zero, this is the
/// value to store there; over a header with a correct checksum filled in,
/// it is 0.
#[must_use]
pub fn ipv4_header_checksum(header: &[u8]) -> u16 {
    !fold(sum_words(0, header))
}

/// The UDP checksum (RFC 768) over the IPv4 pseudo-header (`src`, `dst`,
/// protocol 17, `udp.len()`), then `udp`: the UDP header, with its checksum
/// field (bytes 6..8) zero, and the payload.
///
/// Returns the value to store: a computed 0 is returned as 0xffff, since 0 in
/// the field means "no checksum".
#[must_use]
pub fn udp4_checksum(src: Ipv4Addr, dst: Ipv4Addr, udp: &[u8]) -> u16 {
    match !udp4_sum(src, dst, udp) {
        0 => 0xffff,
        c => c,
    }
}

/// Parses an Ethernet II + IPv4 (+options) + UDP frame, verifying the IPv4
/// header checksum and the UDP checksum (0 = none, allowed on IPv4).
///
/// Trailing Ethernet padding beyond the IP total length is ignored, as are
/// bytes of the IP payload beyond the UDP length. Fragments (MF or offset != 0)
/// are an error. Never panics, whatever the bytes.
///
/// # Errors
///
/// The first check the frame fails, as a [`FrameError`]; checks run in
/// header order (Ethernet, IPv4 header, IPv4 checksum, fragment, protocol,
/// UDP length, UDP checksum).
pub fn parse_udp4(frame: &[u8]) -> Result<Udp4, FrameError> {
    if frame.len() < ETH_LEN {
        return Err(FrameError::Truncated);
    }
    if be16(frame, 12) != ETHERTYPE_IPV4 {
        return Err(FrameError::NotIpv4);
    }
    if frame.len() < ETH_LEN + IPV4_LEN {
        return Err(FrameError::Truncated);
    }
    let ip = &frame[ETH_LEN..];
    let version = ip[0] >> 4;
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    if version != 4 || ihl < IPV4_LEN {
        return Err(FrameError::BadIpHeader);
    }
    if ip.len() < ihl {
        return Err(FrameError::Truncated);
    }
    let total = usize::from(be16(ip, 2));
    if total > ip.len() {
        // Fewer bytes arrived than the IP header says were sent.
        return Err(FrameError::Truncated);
    }
    if total < ihl + UDP_LEN {
        return Err(FrameError::BadIpHeader);
    }
    if ipv4_header_checksum(&ip[..ihl]) != 0 {
        return Err(FrameError::BadIpChecksum);
    }
    let frag = be16(ip, 6);
    if frag & (FLAG_MF | FRAG_OFFSET_MASK) != 0 {
        return Err(FrameError::Fragment);
    }
    if ip[9] != PROTO_UDP {
        return Err(FrameError::NotUdp);
    }
    let src_ip = ip_at(ip, 12);
    let dst_ip = ip_at(ip, 16);

    let udp = &ip[ihl..total];
    let udp_len = usize::from(be16(udp, 4));
    if udp_len < UDP_LEN || udp_len > udp.len() {
        return Err(FrameError::BadUdpLength);
    }
    let udp = &udp[..udp_len];
    if be16(udp, 6) != 0 && udp4_sum(src_ip, dst_ip, udp) != 0xffff {
        return Err(FrameError::BadUdpChecksum);
    }

    Ok(Udp4 {
        src: Endpoint {
            mac: mac_at(frame, 6),
            ip: src_ip,
            port: be16(udp, 0),
        },
        dst: Endpoint {
            mac: mac_at(frame, 0),
            ip: dst_ip,
            port: be16(udp, 2),
        },
        payload_offset: ETH_LEN + ihl + UDP_LEN,
        payload_len: udp_len - UDP_LEN,
    })
}

/// Writes Ethernet + IPv4 (no options, DF set, TTL 64, id 0) + UDP headers
/// for a payload of `payload_len` bytes that is already at
/// `frame[HEADERS_LEN..HEADERS_LEN + payload_len]`, with both checksums
/// filled. Returns the frame's length, `HEADERS_LEN + payload_len`.
///
/// # Panics
///
/// If `frame` is shorter than `HEADERS_LEN + payload_len` (the caller sizes
/// it), or if `payload_len` exceeds what an IPv4 packet can carry (65507).
pub fn write_udp4(frame: &mut [u8], src: &Endpoint, dst: &Endpoint, payload_len: usize) -> usize {
    assert!(
        payload_len <= MAX_UDP4_PAYLOAD,
        "UDP payload of {payload_len} bytes does not fit an IPv4 packet"
    );
    let len = HEADERS_LEN + payload_len;
    assert!(
        frame.len() >= len,
        "frame of {} bytes is too short for {len}",
        frame.len()
    );
    let frame = &mut frame[..len];

    let (eth, rest) = frame.split_at_mut(ETH_LEN);
    eth[0..6].copy_from_slice(&dst.mac);
    eth[6..12].copy_from_slice(&src.mac);
    put16(eth, 12, ETHERTYPE_IPV4);

    let (ip, udp) = rest.split_at_mut(IPV4_LEN);
    ip[0] = 0x45; // version 4, IHL 5
    ip[1] = 0; // DSCP/ECN
    put16(ip, 2, (IPV4_LEN + UDP_LEN + payload_len) as u16);
    put16(ip, 4, 0); // identification (unused with DF)
    put16(ip, 6, FLAG_DF);
    ip[8] = TTL;
    ip[9] = PROTO_UDP;
    put16(ip, 10, 0);
    ip[12..16].copy_from_slice(&src.ip.octets());
    ip[16..20].copy_from_slice(&dst.ip.octets());
    let ip_sum = ipv4_header_checksum(ip);
    put16(ip, 10, ip_sum);

    put16(udp, 0, src.port);
    put16(udp, 2, dst.port);
    put16(udp, 4, (UDP_LEN + payload_len) as u16);
    put16(udp, 6, 0);
    let udp_sum = udp4_checksum(src.ip, dst.ip, udp);
    put16(udp, 6, udp_sum);

    len
}

/// For a reply built in place over a received frame: writes headers for
/// `payload_len` bytes from `request.dst` (the server) to `request.src` (the
/// client), MAC addresses included, and returns the reply frame's length.
///
/// As with [`write_udp4`], the reply payload must already be at
/// `frame[HEADERS_LEN..]`; if the request had IP options its payload was at
/// `request.payload_offset > HEADERS_LEN`, so a reply that reuses request
/// bytes must move them first (`copy_within`).
///
/// # Panics
///
/// As [`write_udp4`].
pub fn write_reply_udp4(frame: &mut [u8], request: &Udp4, payload_len: usize) -> usize {
    write_udp4(frame, &request.dst, &request.src, payload_len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CLIENT: Endpoint = Endpoint {
        mac: [0x02, 0x00, 0x00, 0x00, 0x00, 0x02],
        ip: Ipv4Addr::new(10, 77, 0, 2),
        port: 40000,
    };
    const SERVER: Endpoint = Endpoint {
        mac: [0x02, 0x00, 0x00, 0x00, 0x00, 0x01],
        ip: Ipv4Addr::new(10, 77, 0, 1),
        port: 6789,
    };

    fn payload(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + 3) as u8).collect()
    }

    /// A valid frame from CLIENT to SERVER with a `len`-byte payload.
    fn valid(len: usize) -> Vec<u8> {
        let mut f = vec![0; HEADERS_LEN + len];
        f[HEADERS_LEN..].copy_from_slice(&payload(len));
        assert_eq!(write_udp4(&mut f, &CLIENT, &SERVER, len), f.len());
        f
    }

    /// Rewrites the IPv4 header checksum of `f` (after a mutation).
    fn fix_ip_checksum(f: &mut [u8]) {
        let ihl = usize::from(f[ETH_LEN] & 0x0f) * 4;
        put16(f, ETH_LEN + 10, 0);
        let c = ipv4_header_checksum(&f[ETH_LEN..ETH_LEN + ihl]);
        put16(f, ETH_LEN + 10, c);
    }

    /// Reference checksum: 16-bit words one at a time, the textbook way.
    fn naive_sum(data: &[u8]) -> u16 {
        let mut acc: u32 = 0;
        for (i, b) in data.iter().enumerate() {
            let w = if i % 2 == 0 {
                u32::from(*b) << 8
            } else {
                u32::from(*b)
            };
            acc += w;
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    #[test]
    fn ipv4_checksum_known_answer() {
        // The classic example (IPv4 header with checksum field zeroed):
        //   4500 0073 0000 4000 4011 0000 c0a8 0001 c0a8 00c7
        // 4500 + 0073 = 4573; + 0000 = 4573; + 4000 = 8573; + 4011 = c584;
        // + 0000 = c584; + c0a8 = 1862c; + 0001 = 1862d; + c0a8 = 246d5;
        // + 00c7 = 2479c. Fold: 479c + 2 = 479e. Complement: b861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(ipv4_header_checksum(&h), 0xb861);
        // With the checksum filled in, the header verifies (sums to 0).
        h[10] = 0xb8;
        h[11] = 0x61;
        assert_eq!(ipv4_header_checksum(&h), 0);
    }

    #[test]
    fn udp_checksum_known_answer() {
        // 10.0.0.1:1000 -> 10.0.0.2:2000, payload "hi", UDP length 10.
        // Pseudo-header: 0a00 + 0001 + 0a00 + 0002 + 0011 (proto) + 000a (len)
        //   = 141e.
        // UDP: 03e8 (sport) + 07d0 (dport) + 000a (len) + 0000 (csum) + 6869 ("hi")
        //   141e + 03e8 = 1806; + 07d0 = 1fd6; + 000a = 1fe0; + 6869 = 8849.
        // No carry to fold. Complement: 77b6.
        let udp = [0x03, 0xe8, 0x07, 0xd0, 0x00, 0x0a, 0x00, 0x00, b'h', b'i'];
        let (s, d) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(udp4_checksum(s, d, &udp), 0x77b6);

        // Odd length, payload "hi!" (UDP length 11, last byte padded: 2100):
        // 0a00 + 0001 + 0a00 + 0002 + 0011 + 000b = 141f;
        // + 03e8 + 07d0 + 000b + 6869 + 2100 = 141f + 03e8 = 1807; + 07d0 = 1fd7;
        // + 000b = 1fe2; + 6869 = 884b; + 2100 = a94b. Complement: 56b4.
        let udp = [
            0x03, 0xe8, 0x07, 0xd0, 0x00, 0x0b, 0x00, 0x00, b'h', b'i', b'!',
        ];
        assert_eq!(udp4_checksum(s, d, &udp), 0x56b4);
    }

    #[test]
    fn udp_checksum_zero_is_sent_as_ffff() {
        // Pick the payload word so the sum is exactly ffff: the checksum
        // computes to 0 and must go out as ffff (0 means "none").
        let (s, d) = (Ipv4Addr::new(0, 0, 0, 0), Ipv4Addr::new(0, 0, 0, 0));
        let mut udp = [0u8; 10];
        put16(&mut udp, 4, 10);
        // Pseudo: 0011 + 000a = 001b; UDP header: 000a; total so far 0025.
        let w = 0xffff - 0x0025;
        put16(&mut udp, 8, w);
        assert_eq!(!udp4_sum(s, d, &udp), 0);
        assert_eq!(udp4_checksum(s, d, &udp), 0xffff);
        // And a frame carrying it parses.
        let mut f = vec![0; HEADERS_LEN + 2];
        let src = Endpoint {
            mac: [0; 6],
            ip: s,
            port: 0,
        };
        let dst = Endpoint {
            mac: [0; 6],
            ip: d,
            port: 0,
        };
        f[HEADERS_LEN..].copy_from_slice(&w.to_be_bytes());
        write_udp4(&mut f, &src, &dst, 2);
        assert_eq!(be16(&f, ETH_LEN + IPV4_LEN + 6), 0xffff);
        assert_eq!(parse_udp4(&f).unwrap().payload_len, 2);
    }

    #[test]
    fn written_headers() {
        let f = valid(5);
        assert_eq!(f.len(), 47);
        assert_eq!(&f[0..6], &SERVER.mac);
        assert_eq!(&f[6..12], &CLIENT.mac);
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        let ip = &f[ETH_LEN..ETH_LEN + IPV4_LEN];
        assert_eq!(ip[0], 0x45);
        assert_eq!(be16(ip, 2), 33);
        assert_eq!(be16(ip, 4), 0);
        assert_eq!(be16(ip, 6), 0x4000);
        assert_eq!(ip[8], 64);
        assert_eq!(ip[9], 17);
        assert_eq!(ipv4_header_checksum(ip), 0);
        let udp = &f[ETH_LEN + IPV4_LEN..];
        assert_eq!(be16(udp, 0), CLIENT.port);
        assert_eq!(be16(udp, 2), SERVER.port);
        assert_eq!(be16(udp, 4), 13);
        assert_ne!(be16(udp, 6), 0);
    }

    #[test]
    fn max_payload_for_1500_mtu() {
        assert_eq!(MAX_UDP_PAYLOAD_1500, 1472);
        let f = valid(MAX_UDP_PAYLOAD_1500);
        assert_eq!(f.len(), 1514);
        assert_eq!(be16(&f, ETH_LEN + 2), 1500);
        let u = parse_udp4(&f).unwrap();
        assert_eq!(u.payload_len, 1472);
    }

    #[test]
    fn write_into_larger_buffer_returns_frame_len() {
        let mut f = vec![0xaa; 2048];
        let n = write_udp4(&mut f, &CLIENT, &SERVER, 10);
        assert_eq!(n, HEADERS_LEN + 10);
        let u = parse_udp4(&f[..n]).unwrap();
        assert_eq!(&f[u.payload_range()], &[0xaa; 10]);
    }

    #[test]
    #[should_panic(expected = "too short")]
    fn write_panics_on_short_frame() {
        let mut f = vec![0; HEADERS_LEN + 9];
        write_udp4(&mut f, &CLIENT, &SERVER, 10);
    }

    #[test]
    fn reply_in_place_swaps_endpoints() {
        let mut f = valid(12);
        f.resize(2048, 0);
        let req = parse_udp4(&f[..HEADERS_LEN + 12]).unwrap();
        f[HEADERS_LEN..HEADERS_LEN + 3].copy_from_slice(b"ok!");
        let n = write_reply_udp4(&mut f, &req, 3);
        let rep = parse_udp4(&f[..n]).unwrap();
        assert_eq!(rep.src, SERVER);
        assert_eq!(rep.dst, CLIENT);
        assert_eq!(&f[rep.payload_range()], b"ok!");
    }

    #[test]
    fn every_truncation_is_an_error() {
        for len in [0, 1, 7, 8, 100] {
            let f = valid(len);
            for cut in 0..f.len() {
                assert!(parse_udp4(&f[..cut]).is_err(), "len {len} cut {cut}");
            }
            assert!(parse_udp4(&f).is_ok());
        }
    }

    #[test]
    fn short_frames_are_truncated() {
        let f = valid(4);
        assert_eq!(parse_udp4(&f[..13]), Err(FrameError::Truncated));
        assert_eq!(parse_udp4(&f[..33]), Err(FrameError::Truncated));
        // IHL 15 (60 bytes of header) with only 20 + 8 + 4 present.
        let mut g = f.clone();
        g[ETH_LEN] = 0x4f;
        assert_eq!(parse_udp4(&g), Err(FrameError::Truncated));
    }

    /// `mutation` applied to a valid frame gives `expected`.
    fn mutated(mutation: impl FnOnce(&mut Vec<u8>)) -> Result<Udp4, FrameError> {
        let mut f = valid(16);
        mutation(&mut f);
        parse_udp4(&f)
    }

    #[test]
    fn each_error_has_a_mutation() {
        use FrameError::*;
        let ip = ETH_LEN;
        let udp = ETH_LEN + IPV4_LEN;
        // Frame ending inside the IP header.
        assert_eq!(mutated(|f| f.truncate(14 + 19)), Err(Truncated));
        // Ethertype ARP.
        assert_eq!(mutated(|f| put16(f, 12, 0x0806)), Err(NotIpv4));
        // Version 6.
        assert_eq!(mutated(|f| f[ip] = 0x65), Err(BadIpHeader));
        // IHL 4.
        assert_eq!(mutated(|f| f[ip] = 0x44), Err(BadIpHeader));
        // Total length past the frame's end: bytes were lost.
        assert_eq!(
            mutated(|f| {
                put16(f, ip + 2, 20 + 8 + 17);
                fix_ip_checksum(f);
            }),
            Err(Truncated)
        );
        // Total length below IHL * 4 + 8.
        assert_eq!(
            mutated(|f| {
                put16(f, ip + 2, 27);
                fix_ip_checksum(f);
            }),
            Err(BadIpHeader)
        );
        // Flipped checksum byte.
        assert_eq!(mutated(|f| f[ip + 10] ^= 0x01), Err(BadIpChecksum));
        // A flipped address byte fails the IP checksum first.
        assert_eq!(mutated(|f| f[ip + 15] ^= 0x80), Err(BadIpChecksum));
        // MF flag.
        assert_eq!(
            mutated(|f| {
                f[ip + 6] |= 0x20;
                fix_ip_checksum(f);
            }),
            Err(Fragment)
        );
        // Fragment offset (last fragment: MF clear, offset 185 * 8).
        assert_eq!(
            mutated(|f| {
                put16(f, ip + 6, 185);
                fix_ip_checksum(f);
            }),
            Err(Fragment)
        );
        // Protocol ICMP.
        assert_eq!(
            mutated(|f| {
                f[ip + 9] = 1;
                fix_ip_checksum(f);
            }),
            Err(NotUdp)
        );
        // UDP length 7.
        assert_eq!(mutated(|f| put16(f, udp + 4, 7)), Err(BadUdpLength));
        // UDP length beyond the IP payload.
        assert_eq!(mutated(|f| put16(f, udp + 4, 8 + 17)), Err(BadUdpLength));
        // Flipped payload byte.
        assert_eq!(mutated(|f| f[HEADERS_LEN + 3] ^= 0x10), Err(BadUdpChecksum));
        // Flipped port byte.
        assert_eq!(mutated(|f| f[udp + 1] ^= 0x01), Err(BadUdpChecksum));
    }

    #[test]
    fn error_table() {
        for (i, e) in FrameError::ALL.iter().enumerate() {
            assert_eq!(*e as usize, i);
            assert_eq!(e.to_string(), e.name());
            assert!(
                e.name()
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            );
        }
        let mut names: Vec<_> = FrameError::ALL.iter().map(|e| e.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), FrameError::ALL.len());
    }

    #[test]
    fn zero_udp_checksum_parses() {
        let f = valid(9);
        let mut g = f.clone();
        put16(&mut g, ETH_LEN + IPV4_LEN + 6, 0);
        // Corrupting the payload is now undetectable, by design.
        g[HEADERS_LEN] ^= 0xff;
        let u = parse_udp4(&g).unwrap();
        assert_eq!(u, parse_udp4(&f).unwrap());
        assert_eq!(u.payload_len, 9);
    }

    /// A frame from CLIENT to SERVER built by hand, with `options` in the IP
    /// header, `extra` bytes of IP payload after the UDP datagram and
    /// `padding` bytes of Ethernet padding after the IP packet.
    fn build(options: &[u8], data: &[u8], extra: usize, padding: usize) -> Vec<u8> {
        assert_eq!(options.len() % 4, 0);
        let ihl = IPV4_LEN + options.len();
        let udp_len = UDP_LEN + data.len();
        let total = ihl + udp_len + extra;
        let mut f = vec![0; ETH_LEN + total + padding];
        f[0..6].copy_from_slice(&SERVER.mac);
        f[6..12].copy_from_slice(&CLIENT.mac);
        put16(&mut f, 12, 0x0800);
        let ip = ETH_LEN;
        f[ip] = 0x40 | (ihl / 4) as u8;
        put16(&mut f, ip + 2, total as u16);
        f[ip + 8] = 3;
        f[ip + 9] = 17;
        f[ip + 12..ip + 16].copy_from_slice(&CLIENT.ip.octets());
        f[ip + 16..ip + 20].copy_from_slice(&SERVER.ip.octets());
        f[ip + 20..ip + ihl].copy_from_slice(options);
        fix_ip_checksum(&mut f);
        let udp = ip + ihl;
        put16(&mut f, udp, CLIENT.port);
        put16(&mut f, udp + 2, SERVER.port);
        put16(&mut f, udp + 4, udp_len as u16);
        f[udp + 8..udp + udp_len].copy_from_slice(data);
        let c = udp4_checksum(CLIENT.ip, SERVER.ip, &f[udp..udp + udp_len]);
        put16(&mut f, udp + 6, c);
        // Junk in the extra IP payload and padding: must not matter.
        for b in &mut f[udp + udp_len..] {
            *b = 0x5a;
        }
        f
    }

    #[test]
    fn ip_options_parse() {
        // IHL 6: one 4-byte option word (NOP NOP NOP EOL).
        let f = build(&[1, 1, 1, 0], b"hello", 0, 0);
        assert_eq!(f[ETH_LEN], 0x46);
        let u = parse_udp4(&f).unwrap();
        assert_eq!(u.payload_offset, ETH_LEN + 24 + UDP_LEN);
        assert_eq!(u.payload_len, 5);
        assert_eq!(&f[u.payload_range()], b"hello");
        assert_eq!((u.src, u.dst), (CLIENT, SERVER));
        // The largest header, IHL 15.
        let f = build(&[1; 40], b"x", 0, 0);
        let u = parse_udp4(&f).unwrap();
        assert_eq!(u.payload_offset, ETH_LEN + 60 + UDP_LEN);
        assert_eq!(&f[u.payload_range()], b"x");
    }

    #[test]
    fn ethernet_padding_is_ignored() {
        // A 1-byte datagram padded to the 60-byte Ethernet minimum.
        let f = build(&[], b"z", 0, 60 - (HEADERS_LEN + 1));
        assert_eq!(f.len(), 60);
        let u = parse_udp4(&f).unwrap();
        assert_eq!(u.payload_offset, HEADERS_LEN);
        assert_eq!(u.payload_len, 1);
        assert_eq!(&f[u.payload_range()], b"z");
        // Also from write_udp4 into a zeroed 60-byte frame.
        let mut g = vec![0; 60];
        let n = write_udp4(&mut g, &CLIENT, &SERVER, 0);
        assert_eq!(n, HEADERS_LEN);
        assert_eq!(parse_udp4(&g).unwrap().payload_len, 0);
    }

    #[test]
    fn ip_payload_beyond_udp_length_is_ignored() {
        let f = build(&[], b"abc", 4, 0);
        let u = parse_udp4(&f).unwrap();
        assert_eq!(u.payload_len, 3);
        assert_eq!(&f[u.payload_range()], b"abc");
    }

    fn endpoint() -> impl Strategy<Value = Endpoint> {
        (any::<[u8; 6]>(), any::<u32>(), any::<u16>()).prop_map(|(mac, ip, port)| Endpoint {
            mac,
            ip: Ipv4Addr::from(ip),
            port,
        })
    }

    proptest! {
        #[test]
        fn round_trip(
            src in endpoint(),
            dst in endpoint(),
            data in proptest::collection::vec(any::<u8>(), 0..=MAX_UDP_PAYLOAD_1500),
        ) {
            let mut f = vec![0; HEADERS_LEN + data.len()];
            f[HEADERS_LEN..].copy_from_slice(&data);
            let n = write_udp4(&mut f, &src, &dst, data.len());
            prop_assert_eq!(n, f.len());
            let u = parse_udp4(&f).unwrap();
            prop_assert_eq!(u.src, src);
            prop_assert_eq!(u.dst, dst);
            prop_assert_eq!(u.payload_offset, HEADERS_LEN);
            prop_assert_eq!(u.payload_len, data.len());
            prop_assert_eq!(&f[u.payload_range()], &data[..]);
        }

        #[test]
        fn checksum_matches_naive(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            prop_assert_eq!(fold(sum_words(0, &data)), naive_sum(&data));
            prop_assert_eq!(ipv4_header_checksum(&data), !naive_sum(&data));
        }

        #[test]
        fn parse_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            check_consistent(&data, parse_udp4(&data));
        }

        #[test]
        fn parse_never_panics_past_ethertype(
            mut data in proptest::collection::vec(any::<u8>(), 0..200),
            ihl in 0u8..16,
        ) {
            // Reach the IP and UDP checks more often than random bytes do.
            if data.len() >= 15 {
                put16(&mut data, 12, 0x0800);
                data[14] = 0x40 | ihl;
            }
            check_consistent(&data, parse_udp4(&data));
        }

        #[test]
        fn single_byte_mutations(
            len in 0usize..100,
            at in any::<prop::sample::Index>(),
            xor in 1u8..=255,
        ) {
            let orig = valid(len);
            let mut f = orig.clone();
            let at = at.index(f.len());
            f[at] ^= xor;
            let r = parse_udp4(&f);
            check_consistent(&f, r);
            let want = parse_udp4(&orig).unwrap();
            if (ETH_LEN..ETH_LEN + IPV4_LEN).contains(&at) || at >= HEADERS_LEN {
                // IP header: caught by the IP checksum (or earlier).
                // Payload: caught by the UDP checksum (write_udp4 always sets one).
                prop_assert!(r.is_err(), "mutation at {} accepted", at);
            }
            if let Ok(u) = r {
                // Only the MACs are unprotected; the UDP checksum field may
                // have become 0 ("none").
                prop_assert_eq!(u.src.ip, want.src.ip);
                prop_assert_eq!(u.dst.ip, want.dst.ip);
                prop_assert_eq!(u.src.port, want.src.port);
                prop_assert_eq!(u.dst.port, want.dst.port);
                prop_assert_eq!(u.payload_offset, want.payload_offset);
                prop_assert_eq!(u.payload_len, want.payload_len);
                if at >= 12 {
                    prop_assert_eq!(u.src.mac, want.src.mac);
                    prop_assert_eq!(u.dst.mac, want.dst.mac);
                }
            }
        }
    }

    /// An Ok result describes bytes inside the frame, consistent with them.
    fn check_consistent(frame: &[u8], r: Result<Udp4, FrameError>) {
        if let Ok(u) = r {
            assert!(u.payload_offset >= HEADERS_LEN);
            assert!(u.payload_offset + u.payload_len <= frame.len());
            assert_eq!(&frame[0..6], &u.dst.mac);
            assert_eq!(&frame[6..12], &u.src.mac);
            let udp = u.payload_offset - UDP_LEN;
            assert_eq!(be16(frame, udp), u.src.port);
            assert_eq!(be16(frame, udp + 2), u.dst.port);
            assert_eq!(usize::from(be16(frame, udp + 4)), u.payload_len + UDP_LEN);
        }
    }
}
