//! The AF_XDP datapath's other users: a load client's link (its sender
//! and receiver, whole frames of its own, replies steered to its ports by
//! its own XDP program) and the baseline echo server over AF_XDP. They
//! share the server's link setup (`Link`) and nothing of its frame
//! accounting.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::frame::{self, Endpoint};
use super::xsk::{Desc, Umem, XskCompletion, XskRx, XskTx};
use super::{Link, MAX_PAYLOAD, MAX_QUEUES, XdpConfig, bpf, device, readable, server_address};
use crate::datapath::PeerAddr;
use crate::pool::PACKET_BYTES;

/// The first UDP port of a load client's flows over AF_XDP (flow `i` sends
/// from port `CLIENT_BASE_PORT + i`; the client's XDP program takes the
/// replies to those ports).
pub const CLIENT_BASE_PORT: u16 = 47_000;

/// A load client's transmit side over AF_XDP: writes each request as a
/// whole frame (flow `i` from port `CLIENT_BASE_PORT + i`) into a frame of
/// its own stock and puts it on the TX ring itself (the sender is the ring's
/// one producer).
pub struct XdpSender {
    umem: Arc<Umem>,
    tx: XskTx,
    completion: XskCompletion,
    free: Vec<u64>,
    me: Endpoint,
    server: Endpoint,
}

/// A load client's receive side over AF_XDP: the RX rings of every queue.
pub struct XdpReceiver {
    umem: Arc<Umem>,
    rx: Vec<XskRx>,
    me: Ipv4Addr,
    flows: usize,
    /// Frames dropped as malformed, or for another address or port.
    pub dropped: u64,
    _attachment: bpf::Attachment,
    _program: bpf::Program,
    _map: bpf::XskMap,
}

/// Opens a load client's AF_XDP link towards `server` (a neighbour on a
/// directly attached subnet, whose MAC the kernel's table has or resolves
/// within a second), for `flows` flows.
///
/// # Errors
/// As [`super::XdpDatapath::open`], and an unresolvable server.
pub fn open_client(
    cfg: &XdpConfig,
    server: SocketAddr,
    flows: usize,
) -> io::Result<(XdpSender, XdpReceiver)> {
    let server = server_address(server)?;
    let iface = device::towards(*server.ip())?;
    let last = u16::try_from(flows.saturating_sub(1))
        .ok()
        .and_then(|f| CLIENT_BASE_PORT.checked_add(f))
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "too many flows"))?;
    let server_mac = device::resolve(*server.ip(), &iface.name, Duration::from_secs(1))?;
    let link = Link::open(cfg, &iface, CLIENT_BASE_PORT..=last, 0, u64::from(cfg.ring))?;
    let free = (link.next_frame..link.next_frame + cfg.ring)
        .map(Umem::frame_addr)
        .collect();
    let me = Endpoint {
        mac: link.mac,
        ip: iface.ip,
        port: CLIENT_BASE_PORT,
    };
    Ok((
        XdpSender {
            umem: link.umem.clone(),
            tx: link.tx,
            completion: link.completion,
            free,
            me,
            server: Endpoint {
                mac: server_mac,
                ip: *server.ip(),
                port: server.port(),
            },
        },
        XdpReceiver {
            umem: link.umem,
            rx: link.rx,
            me: iface.ip,
            flows,
            dropped: 0,
            _attachment: link.attachment,
            _program: link.program,
            _map: link.map,
        },
    ))
}

impl XdpSender {
    /// Sends `payload` on flow `flow` to the server.
    ///
    /// # Errors
    /// No free frame (every frame is on the TX ring: the kernel is not
    /// keeping up), or a payload longer than a frame.
    pub fn send(&mut self, flow: usize, payload: &[u8]) -> io::Result<()> {
        if payload.len() > MAX_PAYLOAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "datagram longer than one frame",
            ));
        }
        if self.free.is_empty() {
            self.reap();
        }
        let Some(frame) = self.free.pop() else {
            return Err(io::ErrorKind::WouldBlock.into());
        };
        // SAFETY: a frame of the free stock is this sender's until pushed.
        let buf = unsafe { self.umem.frame_mut(frame) };
        buf[frame::HEADERS_LEN..frame::HEADERS_LEN + payload.len()].copy_from_slice(payload);
        let from = Endpoint {
            port: self.me.port + flow as u16,
            ..self.me
        };
        let len = frame::write_udp4(buf, &from, &self.server, payload.len());
        if self.tx.tx_free() == 0 {
            self.free.push(frame);
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.tx.push(Desc {
            addr: frame,
            len: len as u32,
            options: 0,
        });
        self.tx.submit();
        Ok(())
    }

    /// Takes sent frames back into the free stock.
    fn reap(&mut self) {
        let n = self.completion.completed(u32::MAX);
        for i in 0..n {
            self.free
                .push(Umem::chunk(self.completion.completed_addr(i)));
        }
        self.completion.release(n);
        if n == 0 && self.tx.tx_pending() > 0 {
            self.tx.kick();
        }
    }
}

impl XdpReceiver {
    /// Blocks until a frame may be waiting or `timeout` passed.
    pub fn wait(&self, timeout: Duration) {
        let mut fds = [readable(-1); MAX_QUEUES as usize + 2];
        for (f, r) in fds.iter_mut().zip(&self.rx) {
            *f = readable(r.socket().as_fd().as_raw_fd());
        }
        crate::udp::poll_fds(&mut fds[..self.rx.len()], timeout);
    }

    /// Receives up to `bufs.len()` replies: each payload's first
    /// [`PACKET_BYTES`] bytes into `bufs[i]`, its full length into `lens[i]`,
    /// its sender into `peers[i]` and its flow (destination port) into
    /// `flows[i]`. Frames not for this client, or malformed, are counted in
    /// `dropped`. Returns the count.
    pub fn recv(
        &mut self,
        bufs: &mut [[u8; PACKET_BYTES]],
        peers: &mut [PeerAddr],
        lens: &mut [usize],
        flows: &mut [usize],
    ) -> usize {
        let max = bufs.len().min(peers.len()).min(lens.len()).min(flows.len());
        let mut got = 0;
        for q in 0..self.rx.len() {
            if got == max {
                break;
            }
            let n = self.rx[q].received((max - got) as u32);
            for i in 0..n {
                let d = self.rx[q].desc(i);
                let chunk = Umem::chunk(d.addr);
                // SAFETY: the descriptor came off this UMEM's RX ring: the
                // frame is ours until lent again.
                let parsed = unsafe { self.umem.received(&d) }
                    .and_then(|bytes| frame::parse_udp4(bytes).ok());
                match parsed {
                    Some(u)
                        if u.dst.ip == self.me
                            && usize::from(u.dst.port.wrapping_sub(CLIENT_BASE_PORT))
                                < self.flows =>
                    {
                        let keep = u.payload_len.min(PACKET_BYTES);
                        // SAFETY: as above; the payload lies inside the frame
                        // (parse_udp4 checked its length against the frame).
                        let payload = unsafe {
                            std::slice::from_raw_parts(
                                self.umem.ptr(d.addr + u.payload_offset as u64),
                                keep,
                            )
                        };
                        bufs[got][..keep].copy_from_slice(payload);
                        lens[got] = u.payload_len;
                        peers[got] = PeerAddr::ipv4(u.src.ip, u.src.port, u.src.mac);
                        flows[got] = usize::from(u.dst.port - CLIENT_BASE_PORT);
                        got += 1;
                    }
                    _ => self.dropped += 1,
                }
                self.rx[q].fill(chunk);
            }
            if n > 0 {
                self.rx[q].release(n);
                self.rx[q].publish_fill();
            }
        }
        got
    }
}

/// The echo server over AF_XDP: one thread receives on every queue, turns
/// each datagram for its address and port around in the frame it arrived in
/// (addresses swapped, headers rewritten) and transmits that frame: no copy
/// at all. The baseline `psp serve --datapath xdp` is measured against.
pub struct XdpEcho {
    addr: SocketAddrV4,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<io::Result<u64>>,
}

impl XdpEcho {
    /// Binds on the interface holding `addr` and starts echoing.
    ///
    /// # Errors
    /// As [`super::XdpDatapath::open`].
    pub fn start(cfg: &XdpConfig, addr: SocketAddr) -> io::Result<XdpEcho> {
        let addr = server_address(addr)?;
        let iface = device::holding(*addr.ip())?;
        let link = Link::open(cfg, &iface, addr.port()..=addr.port(), 0, 0)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("psp-echo-xdp".into())
            .spawn(move || Ok(echo_loop(link, addr, &flag)))?;
        Ok(XdpEcho { addr, stop, thread })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        SocketAddr::V4(self.addr)
    }

    /// The flag that stops it.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Stops it; returns how many datagrams it echoed.
    pub fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().ok().and_then(Result::ok).unwrap_or(0)
    }
}

fn echo_loop(mut link: Link, addr: SocketAddrV4, stop: &AtomicBool) -> u64 {
    let mut echoed = 0u64;
    let mut fds = [readable(-1); MAX_QUEUES as usize + 2];
    let nfds = link.pollfds(&mut fds);
    while !stop.load(Ordering::Relaxed) {
        let mut worked = false;
        // Sent frames go back to the queue that has the fewest lent.
        let n = link.completion.completed(u32::MAX);
        for i in 0..n {
            let frame = Umem::chunk(link.completion.completed_addr(i));
            let q = (0..link.rx.len())
                .min_by_key(|&q| link.rx[q].lent())
                .unwrap_or(0);
            link.rx[q].fill(frame);
        }
        if n > 0 {
            link.completion.release(n);
            for r in &mut link.rx {
                r.publish_fill();
            }
            worked = true;
        }
        let mut pushed = false;
        for q in 0..link.rx.len() {
            let n = link.rx[q].received(64);
            for i in 0..n {
                let d = link.rx[q].desc(i);
                let chunk = Umem::chunk(d.addr);
                // SAFETY: the frame came through the RX ring: ours until
                // lent or transmitted.
                let buf = unsafe { link.umem.frame_mut(d.addr) };
                let len = (d.len as usize).min(buf.len());
                let reply = match frame::parse_udp4(&buf[..len]) {
                    Ok(u) if u.dst.ip == *addr.ip() && u.dst.port == addr.port() => {
                        if u.payload_offset != frame::HEADERS_LEN {
                            buf.copy_within(u.payload_range(), frame::HEADERS_LEN);
                        }
                        crate::echo::turn_around(
                            &mut buf[frame::HEADERS_LEN..frame::HEADERS_LEN + u.payload_len],
                        );
                        Some(frame::write_reply_udp4(buf, &u, u.payload_len))
                    }
                    _ => None,
                };
                match reply {
                    Some(flen) if link.tx.tx_free() > 0 => {
                        link.tx.push(Desc {
                            addr: d.addr,
                            len: flen as u32,
                            options: 0,
                        });
                        pushed = true;
                        echoed += 1;
                    }
                    _ => link.rx[q].fill(chunk),
                }
            }
            if n > 0 {
                link.rx[q].release(n);
                link.rx[q].publish_fill();
                worked = true;
            }
        }
        // Copy mode sends a bounded batch per kick: go on with the rest.
        if pushed || link.tx.tx_pending() > 0 {
            link.tx.submit();
        }
        if !worked {
            crate::udp::poll_fds(&mut fds[..nfds], Duration::from_millis(1));
        }
    }
    echoed
}
