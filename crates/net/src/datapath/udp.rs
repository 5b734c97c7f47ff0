//! The kernel UDP datapath: one socket; the dispatcher receives in batches with
//! `recvmmsg` straight into pool buffers; each worker sends its responses with
//! `sendmsg` on its own duplicate of the socket (so responses leave from the
//! server's address and port), gathering the in-place header and the body
//! without a copy; the dispatcher's error replies go out in one `sendmmsg`.

use std::io;
use std::mem::MaybeUninit;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::Arc;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use crate::datapath::{Datapath, PeerAddr, SyscallCount, Transmit};
use crate::pool::{PACKET_BYTES, Packet, PacketPool, PacketToken};

/// Most datagrams one `recvmmsg` or `sendmmsg` call handles.
pub const MAX_BATCH: usize = 64;
/// Socket buffer asked for on each side (the kernel caps it at
/// net.core.rmem_max / wmem_max).
const SOCKET_BUFFER: usize = 8 << 20;

/// A UDP socket bound to `addr`, with large buffers; `reuse_port` lets several
/// sockets share the address.
///
/// # Errors
/// The address cannot be bound.
pub fn bind_udp(addr: SocketAddr, reuse_port: bool) -> io::Result<UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    // Best effort: a smaller buffer only means earlier drops under bursts.
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

/// The kernel UDP datapath.
#[derive(Debug)]
pub struct UdpDatapath {
    socket: UdpSocket,
    /// Its own system calls (the dispatcher's receives and waits), then
    /// each transmitter's.
    syscalls: Vec<Arc<SyscallCount>>,
}

impl UdpDatapath {
    /// Binds `addr` (port 0: an ephemeral port; see [`Datapath::local_addr`]).
    ///
    /// # Errors
    /// The address cannot be bound.
    pub fn bind(addr: SocketAddr) -> io::Result<Self> {
        Ok(Self {
            socket: bind_udp(addr, false)?,
            syscalls: vec![Arc::default()],
        })
    }

    /// A duplicate of the socket (for [`socket_drops`] on another thread).
    ///
    /// # Errors
    /// The descriptor cannot be duplicated.
    pub fn try_clone_socket(&self) -> io::Result<UdpSocket> {
        self.socket.try_clone()
    }
}

/// Receives up to `bufs.len()` datagrams from `fd` without blocking, each into
/// the buffer and address slot `bufs[i]` points to; writes each datagram's
/// length into `lens[i]` and returns the count. Shared by the server and the
/// load client.
///
/// A datagram longer than [`PACKET_BYTES`] is truncated to the buffer, and its
/// `lens[i]` is its full length (more than [`PACKET_BYTES`]): callers tell a
/// truncated datagram by its length, never read past [`PACKET_BYTES`].
///
/// # Safety
/// Every pointer in `bufs` is valid for writes of `PACKET_BYTES` bytes (data) and
/// a `PeerAddr` (address, may be null to discard it), and not accessed by
/// another thread during the call.
pub unsafe fn recv_many(
    fd: BorrowedFd<'_>,
    bufs: &[(*mut u8, *mut PeerAddr)],
    lens: &mut [usize],
) -> io::Result<usize> {
    let n = bufs.len().min(MAX_BATCH).min(lens.len());
    if n == 0 {
        return Ok(0);
    }
    let mut iov: [MaybeUninit<libc::iovec>; MAX_BATCH] = [MaybeUninit::uninit(); MAX_BATCH];
    let mut hdrs: [MaybeUninit<libc::mmsghdr>; MAX_BATCH] = [MaybeUninit::uninit(); MAX_BATCH];
    for i in 0..n {
        let (data, peer) = bufs[i];
        iov[i].write(libc::iovec {
            iov_base: data.cast(),
            iov_len: PACKET_BYTES,
        });
        // SAFETY: mmsghdr is plain data; all-zero is a valid empty header.
        let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
        h.msg_hdr.msg_iov = iov[i].as_mut_ptr();
        h.msg_hdr.msg_iovlen = 1;
        if !peer.is_null() {
            // SAFETY: the caller guarantees `peer` points to a writable PeerAddr.
            h.msg_hdr.msg_name = unsafe { (&raw mut (*peer).storage).cast() };
            h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
        }
        hdrs[i].write(h);
    }
    // SAFETY: the first `n` headers are initialized and point to `n` initialized
    // iovecs whose buffers the caller guarantees are writable for PACKET_BYTES;
    // MSG_DONTWAIT makes the call return at once when nothing is queued, and
    // MSG_TRUNC makes each `msg_len` the datagram's full length (Linux, UDP),
    // still writing at most the iovec's length.
    let got = unsafe {
        libc::recvmmsg(
            fd.as_raw_fd(),
            hdrs.as_mut_ptr().cast(),
            n as u32,
            libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            std::ptr::null_mut(),
        )
    };
    if got < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
            _ => Err(e),
        };
    }
    let got = got as usize;
    for i in 0..got {
        // SAFETY: the kernel filled headers 0..got.
        let h = unsafe { hdrs[i].assume_init_ref() };
        // The kernel flags a datagram cut to the buffer; should it not report
        // the full length, the length still says "longer than the buffer".
        let truncated = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
        lens[i] = if truncated {
            (h.msg_len as usize).max(PACKET_BYTES + 1)
        } else {
            h.msg_len as usize
        };
        let (_, peer) = bufs[i];
        if !peer.is_null() {
            // SAFETY: as above, `peer` is writable and was filled by the kernel.
            unsafe { (*peer).len = h.msg_hdr.msg_namelen };
        }
    }
    Ok(got)
}

/// Blocks until one of `fds` has an event or `timeout` passed (EINTR counts as
/// a spurious return); `revents` tell which. Negative descriptors are ignored.
pub fn poll_fds(fds: &mut [libc::pollfd], timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `fds` and `ts` are live for the call and `fds.len()` entries long;
    // a null signal mask keeps the thread's mask.
    unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        );
    }
}

/// Blocks until `fd` or `also` is readable or `timeout` passed.
pub fn wait_readable(fd: BorrowedFd<'_>, also: Option<BorrowedFd<'_>>, timeout: Duration) {
    let readable = |fd: i32| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    poll_fds(
        &mut [
            readable(fd.as_raw_fd()),
            readable(also.map_or(-1, |a| a.as_raw_fd())),
        ],
        timeout,
    );
}

impl Datapath for UdpDatapath {
    type Tx = UdpTx;

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    type Report = ();

    fn recv_batch(&mut self, pool: &PacketPool, tokens: &mut [PacketToken]) -> io::Result<usize> {
        let n = tokens.len().min(MAX_BATCH);
        let mut bufs = [(std::ptr::null_mut::<u8>(), std::ptr::null_mut::<PeerAddr>()); MAX_BATCH];
        for (b, t) in bufs.iter_mut().zip(&mut tokens[..n]) {
            let p = pool.as_ptr(t);
            // SAFETY: `p` points to a live packet of the pool; taking field
            // addresses creates no reference.
            *b = unsafe { (Packet::own_buffer(p), &raw mut (*p).peer) };
        }
        let mut lens = [0usize; MAX_BATCH];
        self.syscalls[0].add(1);
        // SAFETY: we hold the tokens, so their packets are writable and
        // untouched by other threads; each data buffer holds PACKET_BYTES.
        let got = unsafe {
            recv_many(
                std::os::fd::AsFd::as_fd(&self.socket),
                &bufs[..n],
                &mut lens,
            )?
        };
        // The raw pointers above are no longer used.
        for (t, &len) in tokens[..got].iter_mut().zip(&lens) {
            pool.get_mut(t).len = len;
        }
        Ok(got)
    }

    fn transmitter(&mut self) -> io::Result<UdpTx> {
        let syscalls = Arc::new(SyscallCount::default());
        self.syscalls.push(syscalls.clone());
        Ok(UdpTx {
            socket: self.socket.try_clone()?,
            syscalls,
        })
    }

    fn wait(&self, also: Option<BorrowedFd<'_>>, timeout: Duration) {
        self.syscalls[0].add(1);
        wait_readable(std::os::fd::AsFd::as_fd(&self.socket), also, timeout);
    }

    fn syscalls(&self) -> Option<u64> {
        Some(self.syscalls.iter().map(|c| c.get()).sum())
    }

    fn dropped_by_os(&self) -> Option<u64> {
        socket_drops(&self.socket)
    }

    fn finish(&mut self) {}
}

/// The kernel's drop counter of `socket` (receive buffer overflows), read from
/// `/proc/net/udp{,6}` by the socket's inode.
pub fn socket_drops(socket: &UdpSocket) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let inode = std::fs::metadata(format!("/proc/self/fd/{}", socket.as_raw_fd()))
        .ok()?
        .ino();
    for table in ["/proc/net/udp", "/proc/net/udp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref ptr drops
            if fields.len() >= 13 && fields[9].parse::<u64>().ok() == Some(inode) {
                return fields[12].parse().ok();
            }
        }
    }
    None
}

/// A transmit handle: a duplicate of the server's socket.
#[derive(Debug)]
pub struct UdpTx {
    socket: UdpSocket,
    /// Its sends (`sendmsg`, `sendmmsg`), for the datapath's count.
    syscalls: Arc<SyscallCount>,
}

impl Transmit for UdpTx {
    #[inline]
    fn send(&mut self, to: &PeerAddr, parts: [&[u8]; 2]) -> io::Result<()> {
        let mut iov = [
            libc::iovec {
                iov_base: parts[0].as_ptr() as *mut libc::c_void,
                iov_len: parts[0].len(),
            },
            libc::iovec {
                iov_base: parts[1].as_ptr() as *mut libc::c_void,
                iov_len: parts[1].len(),
            },
        ];
        // SAFETY: msghdr is plain data; all-zero is a valid empty header.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = (&raw const to.storage).cast_mut().cast();
        msg.msg_namelen = to.len;
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = 2;
        // Never block a worker in the kernel (a full send buffer is a counted
        // send error): the dispatcher waits for an answer under way at the drain
        // deadline, so that wait must be short.
        // SAFETY: `msg` points to a live address and two live iovecs whose
        // buffers are readable for their lengths; sendmsg only reads them.
        let r = unsafe { libc::sendmsg(self.socket.as_raw_fd(), &msg, libc::MSG_DONTWAIT) };
        self.syscalls.add(1);
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    fn send_batch(&mut self, msgs: &[(&PeerAddr, &[u8])]) -> io::Result<usize> {
        let mut sent = 0;
        for chunk in msgs.chunks(MAX_BATCH) {
            let mut iov: [MaybeUninit<libc::iovec>; MAX_BATCH] = [MaybeUninit::uninit(); MAX_BATCH];
            let mut hdrs: [MaybeUninit<libc::mmsghdr>; MAX_BATCH] =
                [MaybeUninit::uninit(); MAX_BATCH];
            for (i, (to, bytes)) in chunk.iter().enumerate() {
                iov[i].write(libc::iovec {
                    iov_base: bytes.as_ptr() as *mut libc::c_void,
                    iov_len: bytes.len(),
                });
                // SAFETY: mmsghdr is plain data; all-zero is a valid empty header.
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_name = (&raw const to.storage).cast_mut().cast();
                h.msg_hdr.msg_namelen = to.len;
                h.msg_hdr.msg_iov = iov[i].as_mut_ptr();
                h.msg_hdr.msg_iovlen = 1;
                hdrs[i].write(h);
            }
            // SAFETY: the first chunk.len() headers are initialized and point to live
            // addresses and iovecs over readable buffers; sendmmsg only reads them.
            let r = unsafe {
                // The dispatcher never blocks in the kernel either.
                libc::sendmmsg(
                    self.socket.as_raw_fd(),
                    hdrs.as_mut_ptr().cast(),
                    chunk.len() as u32,
                    libc::MSG_DONTWAIT,
                )
            };
            self.syscalls.add(1);
            if r < 0 {
                if sent == 0 {
                    return Err(io::Error::last_os_error());
                }
                return Ok(sent);
            }
            sent += r as usize;
            if (r as usize) < chunk.len() {
                return Ok(sent);
            }
        }
        Ok(sent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recv_many_reports_the_full_length_of_a_datagram_that_did_not_fit() {
        let rx = bind_udp("127.0.0.1:0".parse().unwrap(), false).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = rx.local_addr().unwrap();
        let sizes = [0, 16, PACKET_BYTES, PACKET_BYTES + 1, 4096, 65_507];
        for &len in &sizes {
            let dgram: Vec<u8> = (0..len).map(|i| i as u8).collect();
            tx.send_to(&dgram, to).unwrap();
        }
        let mut bufs = vec![[0u8; PACKET_BYTES]; sizes.len()];
        let mut peers = [PeerAddr::from(to); 6];
        let mut lens = [usize::MAX; 6];
        let mut got = 0;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while got < sizes.len() && std::time::Instant::now() < deadline {
            wait_readable(
                std::os::fd::AsFd::as_fd(&rx),
                None,
                Duration::from_millis(100),
            );
            let slots: Vec<(*mut u8, *mut PeerAddr)> = bufs[got..]
                .iter_mut()
                .zip(&mut peers[got..])
                .map(|(b, p)| (b.as_mut_ptr(), &raw mut *p))
                .collect();
            // SAFETY: each slot points to a PACKET_BYTES buffer and a PeerAddr of
            // this thread, unused elsewhere during the call.
            got += unsafe { recv_many(std::os::fd::AsFd::as_fd(&rx), &slots, &mut lens[got..]) }
                .unwrap();
        }
        assert_eq!(got, sizes.len());
        assert_eq!(lens, sizes);
        for (i, &len) in sizes.iter().enumerate() {
            let stored = len.min(PACKET_BYTES);
            assert!(
                bufs[i][..stored]
                    .iter()
                    .enumerate()
                    .all(|(j, &b)| b == j as u8)
            );
            assert_eq!(peers[i].to_socket_addr(), Some(tx.local_addr().unwrap()));
        }
    }
}
