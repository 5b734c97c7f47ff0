//! The datapath: how datagrams get in and out, below any protocol or
//! policy. The dispatcher's net worker receives batches into pool buffers
//! it owns (each under a [`PacketToken`]); every worker (and the
//! dispatcher, for error replies) holds its own transmit handle. Two
//! implementations: kernel UDP ([`udp`]) and AF_XDP ([`xdp`], kernel
//! bypass); another (DPDK) would plug in behind the same two traits.
//!
//! This room knows packets, addresses and buffers only: it parses no
//! request, counts no request outcome and names no front end (those are
//! [`crate::front`]'s).
//!
//! - this module: the seam ([`Datapath`], [`Transmit`]) and [`PeerAddr`].
//! - [`pool`]: the packet buffers, each owned through its token.
//! - [`udp`]: kernel UDP (`recvmmsg`, `sendmsg`, `sendmmsg`).
//! - [`xdp`]: AF_XDP: UMEM, rings, the XDP program, frames.

pub mod pool;
pub mod udp;
pub mod xdp;

use std::io;
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::time::Duration;

use crate::pool::{PacketPool, PacketToken};

/// A peer's socket address in the kernel's layout (no conversion per packet).
#[derive(Clone, Copy)]
#[repr(C)]
pub struct PeerAddr {
    /// The address.
    pub storage: libc::sockaddr_storage,
    /// Bytes of `storage` in use.
    pub len: libc::socklen_t,
    /// The peer's link-layer address, on a datapath that writes frames
    /// (AF_XDP: the request's source MAC, where its reply goes); zero
    /// otherwise.
    pub hw: [u8; 6],
}

impl std::fmt::Debug for PeerAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.to_socket_addr() {
            Some(a) => write!(f, "{a}"),
            None => write!(f, "<unknown address>"),
        }
    }
}

impl PeerAddr {
    /// The standard library's view of the address (IPv4 or IPv6).
    pub fn to_socket_addr(&self) -> Option<SocketAddr> {
        match i32::from(self.storage.ss_family) {
            libc::AF_INET if self.len as usize >= std::mem::size_of::<libc::sockaddr_in>() => {
                // SAFETY: the family says the storage holds a sockaddr_in, and
                // sockaddr_storage is large and aligned enough for any sockaddr.
                let a = unsafe { *(&raw const self.storage).cast::<libc::sockaddr_in>() };
                Some(SocketAddr::from((
                    u32::from_be(a.sin_addr.s_addr).to_be_bytes(),
                    u16::from_be(a.sin_port),
                )))
            }
            libc::AF_INET6 if self.len as usize >= std::mem::size_of::<libc::sockaddr_in6>() => {
                // SAFETY: as above, for sockaddr_in6.
                let a = unsafe { *(&raw const self.storage).cast::<libc::sockaddr_in6>() };
                Some(SocketAddr::from((
                    a.sin6_addr.s6_addr,
                    u16::from_be(a.sin6_port),
                )))
            }
            _ => None,
        }
    }

    /// The flow this client address and port stand for: a hash of both,
    /// folded to a [`psp_core::FlowId`] (what a NIC's RSS hash of the packet's
    /// source does; decentralized policies steer by it). An address of an
    /// unknown family is flow 0.
    #[inline]
    pub fn flow(&self) -> psp_core::FlowId {
        use psp_core::policy::ws::flow_hash;
        let key = match self.to_socket_addr() {
            Some(SocketAddr::V4(a)) => u64::from(a.ip().to_bits()) << 16 | u64::from(a.port()),
            Some(SocketAddr::V6(a)) => {
                let ip = a.ip().to_bits();
                flow_hash(ip as u64 ^ (ip >> 64) as u64) << 16 | u64::from(a.port())
            }
            None => 0,
        };
        let h = flow_hash(key);
        (h ^ h >> 16 ^ h >> 32 ^ h >> 48) as psp_core::FlowId
    }

    /// The kernel's view of `addr`.
    pub fn from(addr: SocketAddr) -> Self {
        let sa = socket2::SockAddr::from(addr);
        // SAFETY: sockaddr_storage is plain data; all-zero is valid.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let n = (sa.len() as usize).min(std::mem::size_of::<libc::sockaddr_storage>());
        // SAFETY: both regions are valid for `n` bytes and do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                sa.as_ptr().cast::<u8>(),
                (&raw mut storage).cast::<u8>(),
                n,
            );
        }
        Self {
            storage,
            len: n as libc::socklen_t,
            hw: [0; 6],
        }
    }

    /// An IPv4 peer seen on a link (AF_XDP), written without conversions:
    /// this runs once per received frame.
    #[inline]
    pub fn ipv4(ip: std::net::Ipv4Addr, port: u16, hw: [u8; 6]) -> Self {
        // SAFETY: sockaddr_storage is plain data; all-zero is valid.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        // SAFETY: sockaddr_storage is large and aligned enough for a
        // sockaddr_in, which is plain data.
        let sin = unsafe { &mut *(&raw mut storage).cast::<libc::sockaddr_in>() };
        sin.sin_family = libc::AF_INET as libc::sa_family_t;
        sin.sin_port = port.to_be();
        sin.sin_addr.s_addr = u32::from(ip).to_be();
        Self {
            storage,
            len: std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            hw,
        }
    }
}

/// System calls one thread made, counted at each call site: one writer (a
/// load and a store, no read-modify-write), read by the front end at any
/// time; on a cache line of its own.
#[derive(Debug, Default)]
pub struct SyscallCount(crossbeam_utils::CachePadded<std::sync::atomic::AtomicU64>);

impl SyscallCount {
    /// Counts `n` more, from the one thread that writes this count.
    #[inline]
    pub fn add(&self, n: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        self.0.store(self.0.load(Relaxed) + n, Relaxed);
    }

    /// The count so far.
    pub fn get(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// The receive side, owned by the dispatcher thread.
pub trait Datapath: Send {
    /// The transmit handle type.
    type Tx: Transmit + 'static;

    /// What the datapath says about itself at the end of a run
    /// ([`finish`](Self::finish)): `()` where there is nothing to say.
    type Report;

    /// The address clients send to.
    ///
    /// # Errors
    /// If the OS cannot tell.
    fn local_addr(&self) -> io::Result<SocketAddr>;

    /// Receives, without blocking, up to `tokens.len()` datagrams into the pool
    /// buffers of `tokens`, in order; returns how many arrived (0 when none
    /// was waiting). Each filled packet has its `peer` and `len` set; `len` is
    /// the datagram's full length, more than [`pool::PACKET_BYTES`] when
    /// it did not fit the buffer (see [`pool::Packet::truncated`]).
    ///
    /// # Errors
    /// A socket error other than "nothing to receive".
    fn recv_batch(&mut self, pool: &PacketPool, tokens: &mut [PacketToken]) -> io::Result<usize>;

    /// A new transmit handle (one per worker; one for the dispatcher).
    ///
    /// # Errors
    /// If the OS refuses one.
    fn transmitter(&mut self) -> io::Result<Self::Tx>;

    /// Moves the datapath's own work along on the dispatcher thread (AF_XDP:
    /// queued responses onto the TX ring, sent frames back to their
    /// transmitters); returns whether it did anything. Called on every pass,
    /// while receiving and while draining.
    fn service(&mut self) -> bool {
        false
    }

    /// Blocks until a datagram may be waiting, `also` is readable, or `timeout`
    /// passed (spurious returns are allowed).
    fn wait(&self, also: Option<BorrowedFd<'_>>, timeout: Duration);

    /// Datagrams the OS dropped before the server could read them (receive
    /// buffer full), if the datapath can tell.
    fn dropped_by_os(&self) -> Option<u64> {
        None
    }

    /// Link-layer frames received and dropped as malformed (truncated
    /// headers, bad lengths or checksums, fragments); 0 on a datapath whose
    /// kernel checks them.
    fn malformed(&self) -> u64 {
        0
    }

    /// System calls it and its transmitters made so far (receives, sends,
    /// waits), counted at each call, if it counts them.
    fn syscalls(&self) -> Option<u64> {
        None
    }

    /// At the end of the run, after the last response was handed over: sends
    /// what is still queued and reports (AF_XDP: where every frame is).
    fn finish(&mut self) -> Self::Report;
}

/// The transmit side: one handle per thread.
pub trait Transmit: Send {
    /// Sends one datagram made of `parts` (gathered, not copied) to `to`.
    ///
    /// # Errors
    /// The OS refused the send (counted by the caller).
    fn send(&mut self, to: &PeerAddr, parts: [&[u8]; 2]) -> io::Result<()>;

    /// Sends a batch of datagrams; returns how many the OS took.
    ///
    /// # Errors
    /// The OS refused the first one.
    fn send_batch(&mut self, msgs: &[(&PeerAddr, &[u8])]) -> io::Result<usize>;

    /// The longest datagram one send carries (header and body).
    fn max_payload(&self) -> usize {
        65_507
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_addresses_round_trip_through_the_kernel_layout() {
        for a in [
            "127.0.0.1:7000",
            "10.1.2.3:1",
            "[::1]:7000",
            "[2001:db8::42]:65535",
        ] {
            let addr: SocketAddr = a.parse().unwrap();
            assert_eq!(PeerAddr::from(addr).to_socket_addr(), Some(addr), "{a}");
        }
        // SAFETY: sockaddr_storage is plain data; all-zero is valid.
        let storage = unsafe { std::mem::zeroed() };
        let unknown = PeerAddr {
            storage,
            len: 0,
            hw: [0; 6],
        };
        let seen = PeerAddr::ipv4([10, 77, 0, 2].into(), 40_001, [2, 0, 0, 0, 0, 1]);
        assert_eq!(
            seen.to_socket_addr(),
            Some("10.77.0.2:40001".parse().unwrap())
        );
        assert_eq!(
            seen.flow(),
            PeerAddr::from("10.77.0.2:40001".parse().unwrap()).flow()
        );
        assert_eq!(unknown.to_socket_addr(), None);
    }

    #[test]
    fn a_client_socket_is_one_flow_and_its_ports_spread_over_workers() {
        let flow = |a: &str| PeerAddr::from(a.parse::<SocketAddr>().unwrap()).flow();
        assert_eq!(flow("127.0.0.1:40000"), flow("127.0.0.1:40000"));
        assert_ne!(flow("127.0.0.1:40000"), flow("127.0.0.1:40001"));
        assert_ne!(flow("127.0.0.1:40000"), flow("127.0.0.2:40000"));
        assert_ne!(flow("[::1]:40000"), flow("[::2]:40000"));
        // 16 client ports (psp load's default) reach every one of 2 workers.
        let rules = psp_core::PerWorkerRules::new(2, None);
        let homes: std::collections::HashSet<_> = (0..16)
            .map(|p| rules.home(flow(&format!("127.0.0.1:{}", 40_000 + p))))
            .collect();
        assert_eq!(homes.len(), 2);
    }
}
