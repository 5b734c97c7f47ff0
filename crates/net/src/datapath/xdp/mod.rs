//! The AF_XDP datapath: Linux's kernel-bypass socket, behind the same
//! [`Datapath`] and [`Transmit`] traits as kernel UDP. An XDP program on the
//! server's interface redirects UDP datagrams for the server's address and
//! port into AF_XDP sockets (one per receive queue); everything else (ARP,
//! ICMP, other ports) goes on to the kernel's stack.
//!
//! Frames and who holds them. One UMEM holds every frame, of three kinds:
//! - *Request frames*: each packet-pool token holds exactly one frame at all
//!   times. Receiving into a token swaps frames: the token takes the frame
//!   the kernel received into (the request is read there, in place: no copy
//!   between the ring and the handler) and lends the frame it held to the
//!   fill ring. So the fill ring stays topped up with one frame per frame
//!   received, and a token's frame is free whenever the token is.
//! - *Fill frames*: as many per queue as the fill ring holds, lent to the
//!   kernel (fill ring, in the kernel, or in the RX ring).
//! - *Transmit frames*: each transmitter (every worker, and the dispatcher
//!   for its error replies) has a stock of its own and an AF_XDP socket of
//!   its own, bound to queue 0 and sharing queue 0's UMEM, fill and
//!   completion rings. A response is written into one of its frames (the
//!   response body is copied once, as the kernel copies it on the UDP path),
//!   with its Ethernet, IPv4 and UDP headers and checksums, and put on the
//!   transmitter's own TX ring, which it kicks when the ring asks: workers
//!   transmit in parallel, as each sends its own responses on the UDP path.
//!   Sent frames come back on the shared completion ring, which only the
//!   dispatcher reads; it returns each to its transmitter's stock over a
//!   lock-free ring.
//!
//! [`XdpReport`] counts every frame by where it is; `frames_leaked` is what
//! is missing from the total, zero unless a frame was lost.
//!
//! The request path allocates and locks nowhere, and makes no system call
//! but the kicks the rings ask for.

pub mod bpf;
mod client;
pub mod device;
pub mod frame;
mod netlink;
pub mod xsk;

pub use client::{CLIENT_BASE_PORT, XdpEcho, XdpReceiver, XdpSender, open_client};

use std::io;
use std::net::{SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::datapath::{Datapath, PeerAddr, Transmit};
use crate::pool::{PACKET_BYTES, PacketPool, PacketToken};
use frame::{Endpoint, FrameError};
use xsk::{Desc, FRAME_SIZE, RingSizes, Umem, XskCompletion, XskRx, XskTx};

/// Largest UDP payload a frame carries on a 1,500-byte MTU.
pub const MAX_PAYLOAD: usize = frame::MAX_UDP_PAYLOAD_1500;
/// Receive queues (AF_XDP sockets) one datapath binds at most.
pub const MAX_QUEUES: u32 = 64;
/// `--xdp-ring`: entries of each ring (a power of two in this range).
pub const RING_ENTRIES: (u32, u32) = (64, xsk::MAX_RING);
/// `--xdp-tx-frames`: frames each transmitter owns.
pub const TX_FRAMES: (u32, u32) = (16, 8192);
/// `--xdp-busy-poll`: microseconds of `SO_BUSY_POLL`.
pub const BUSY_POLL_US: (u32, u32) = (0, 1000);

/// How `psp serve --datapath xdp` binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdpConfig {
    /// Entries of each ring (fill, RX, TX, completion): a power of two.
    pub ring: u32,
    /// Frames each transmitter owns (responses queued or in flight at once).
    pub tx_frames: u32,
    /// Queues to bind (one socket each); `None`: every receive queue of the
    /// interface.
    pub queues: Option<u32>,
    /// `Some(true)`: zero-copy or fail; `Some(false)`: copy mode; `None`:
    /// zero-copy where the driver supports it.
    pub zero_copy: Option<bool>,
    /// Where the XDP program runs; `None`: the driver if it can, else the
    /// kernel's generic hook.
    pub attach: Option<bpf::AttachMode>,
    /// `SO_BUSY_POLL` microseconds (0: off).
    pub busy_poll_us: u32,
}

impl Default for XdpConfig {
    fn default() -> Self {
        Self {
            ring: 2048,
            tx_frames: 512,
            queues: None,
            zero_copy: None,
            attach: None,
            busy_poll_us: 0,
        }
    }
}

impl XdpConfig {
    /// Checks every number before anything is mapped.
    ///
    /// # Errors
    /// A value out of its range, as one line.
    pub fn check(&self) -> Result<(), String> {
        let (lo, hi) = RING_ENTRIES;
        if !self.ring.is_power_of_two() || !(lo..=hi).contains(&self.ring) {
            return Err(format!(
                "--xdp-ring must be a power of two in [{lo}, {hi}], not {}",
                self.ring
            ));
        }
        let (lo, hi) = TX_FRAMES;
        if !(lo..=hi).contains(&self.tx_frames) {
            return Err(format!(
                "--xdp-tx-frames must be in [{lo}, {hi}], not {}",
                self.tx_frames
            ));
        }
        // A transmitter's TX ring holds all its frames: a send never finds
        // it full.
        if self.tx_frames > self.ring {
            return Err(format!(
                "--xdp-tx-frames ({}) must not exceed --xdp-ring ({})",
                self.tx_frames, self.ring
            ));
        }
        if let Some(q) = self.queues
            && !(1..=MAX_QUEUES).contains(&q)
        {
            return Err(format!(
                "--xdp-queues must be in [1, {MAX_QUEUES}], not {q}"
            ));
        }
        let (lo, hi) = BUSY_POLL_US;
        if !(lo..=hi).contains(&self.busy_poll_us) {
            return Err(format!(
                "--xdp-busy-poll must be in [{lo}, {hi}] (us), not {}",
                self.busy_poll_us
            ));
        }
        Ok(())
    }
}

/// Every frame of an AF_XDP datapath by where it is, and what it dropped.
pub type XdpReport = psp_metrics::XdpSummary;

/// One transmitter, seen from the dispatcher.
struct TxLane {
    /// Free frames going back to the transmitter.
    stock: rtrb::Producer<u64>,
    /// Its socket, for a last kick at the end.
    sock: Arc<xsk::XskFd>,
}

/// What every AF_XDP user here binds: one UMEM, one socket per receive
/// queue of the interface (sharing the UMEM), the XSKMAP and the XDP
/// program that steers `ip`'s datagrams for `ports` into them. The first
/// `reserved` frames are left to the caller; then come each queue's fill
/// frames (lent to the kernel at once); the frames after are the caller's
/// too (`next_frame` on).
struct Link {
    umem: Arc<Umem>,
    rx: Vec<XskRx>,
    /// Queue 0's transmit side.
    tx: XskTx,
    /// Queue 0's completion ring: sent frames of every socket on queue 0.
    completion: XskCompletion,
    /// Where queue 0's socket is bound.
    queue0: xsk::BindTo,
    mac: [u8; 6],
    next_frame: u32,
    report: XdpReport,
    attachment: bpf::Attachment,
    program: bpf::Program,
    map: bpf::XskMap,
}

impl Link {
    fn open(
        cfg: &XdpConfig,
        iface: &device::Interface,
        ports: std::ops::RangeInclusive<u16>,
        reserved: u64,
        extra: u64,
    ) -> io::Result<Link> {
        // The completion ring holds every transmit frame at once: the
        // kernel never waits for room in it.
        let completion_entries = extra.max(u64::from(cfg.ring)).next_power_of_two();
        let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
        cfg.check().map_err(invalid)?;
        let mac = device::mac_of(&iface.name)?;
        let queues = match cfg.queues {
            Some(q) => q,
            None => device::rx_queues(&iface.name).min(MAX_QUEUES),
        };
        let fill_per_queue = u64::from(cfg.ring);
        let frames = reserved + u64::from(queues) * fill_per_queue + extra;
        if frames > u64::from(xsk::MAX_FRAMES) {
            return Err(invalid(format!(
                "the AF_XDP datapath would need {frames} frames, more than {} (fewer queues, a smaller --xdp-ring or queue capacity)",
                xsk::MAX_FRAMES
            )));
        }
        let umem = Umem::new(frames as u32)?;
        if completion_entries > u64::from(xsk::MAX_RING) {
            return Err(invalid(format!(
                "the AF_XDP datapath would need a completion ring of {completion_entries} entries, more than {} (fewer workers or a smaller --xdp-tx-frames)",
                xsk::MAX_RING
            )));
        }
        let sizes = RingSizes {
            fill: cfg.ring,
            completion: completion_entries as u32,
            rx: cfg.ring,
            tx: cfg.ring,
        };
        let mut rx = Vec::with_capacity(queues as usize);
        let mut tx = None;
        let mut first: Option<Arc<xsk::XskFd>> = None;
        let mut completion = None;
        for q in 0..queues {
            let to = xsk::BindTo {
                ifindex: iface.ifindex,
                queue: q,
                zero_copy: cfg.zero_copy,
                busy_poll_us: cfg.busy_poll_us,
            };
            let (r, t, c) = xsk::open(&umem, to, sizes, first.as_deref())?;
            if first.is_none() {
                first = Some(r.socket().clone());
                tx = Some(t);
                completion = Some(c);
            }
            rx.push(r);
        }
        let tx = tx.expect("at least one queue");
        let completion = completion.expect("at least one queue");
        let map = bpf::XskMap::new(queues)?;
        for (q, r) in rx.iter().enumerate() {
            map.set(q as u32, r.socket().as_fd())?;
        }
        let filter = bpf::UdpFilter {
            ip: iface.ip,
            ports,
        };
        let program = bpf::Program::load(&filter, &map, bpf::XDP_PASS)?;
        let attachment = program.attach(iface.ifindex, cfg.attach)?;
        let mut next = reserved as u32;
        for r in &mut rx {
            for _ in 0..fill_per_queue {
                r.fill(Umem::frame_addr(next));
                next += 1;
            }
            r.publish_fill();
        }
        let report = XdpReport {
            interface: iface.name.clone(),
            queues,
            zero_copy: tx.socket().zero_copy(),
            attach_mode: match attachment.mode {
                bpf::AttachMode::Driver => "driver",
                bpf::AttachMode::Generic => "generic",
            }
            .into(),
            frames_total: frames,
            ..XdpReport::default()
        };
        Ok(Link {
            umem,
            rx,
            tx,
            completion,
            queue0: xsk::BindTo {
                ifindex: iface.ifindex,
                queue: 0,
                zero_copy: cfg.zero_copy,
                busy_poll_us: cfg.busy_poll_us,
            },
            mac,
            next_frame: next,
            report,
            attachment,
            program,
            map,
        })
    }

    /// The descriptors of every queue's sockets, for `poll`.
    fn pollfds(&self, fds: &mut [libc::pollfd; MAX_QUEUES as usize + 2]) -> usize {
        for (f, r) in fds.iter_mut().zip(&self.rx) {
            *f = readable(r.socket().as_fd().as_raw_fd());
        }
        self.rx.len()
    }

    fn add_kernel_counters(&self, r: &mut XdpReport) {
        for s in self.rx.iter().filter_map(|r| r.socket().statistics().ok()) {
            r.kernel_rx_dropped += s.rx_dropped;
            r.kernel_rx_ring_full += s.rx_ring_full;
            r.kernel_fill_ring_empty += s.rx_fill_ring_empty_descs;
            r.kernel_tx_invalid += s.tx_invalid_descs;
        }
    }
}

fn readable(fd: i32) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// The server's AF_XDP datapath (owned by the dispatcher thread).
pub struct XdpDatapath {
    addr: SocketAddrV4,
    me: Endpoint,
    link: Link,
    lanes: Vec<TxLane>,
    /// The next transmitter's first frame, and frames each gets.
    next_tx_frame: u32,
    tx_frames: u32,
    /// Entries of each transmitter's TX ring.
    tx_ring: u32,
    /// First transmit frame (all before are request or fill frames).
    tx_base: u64,
    /// Transmitters still to hand out.
    transmitters_left: usize,
    /// The queue `recv_batch` starts at (round robin).
    next_queue: usize,
    tokens: u64,
    drops: [u64; FrameError::ALL.len()],
    wrong_destination: u64,
    transmitted: u64,
}

impl std::fmt::Debug for XdpDatapath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpDatapath")
            .field("addr", &self.addr)
            .field("interface", &self.link.report.interface)
            .field("queues", &self.link.rx.len())
            .finish_non_exhaustive()
    }
}

impl XdpDatapath {
    /// Binds AF_XDP sockets on the interface that holds `addr`'s IP (one per
    /// queue), loads and attaches the XDP program that steers `addr`'s
    /// datagrams to them, and gives each of `pool`'s tokens its first frame.
    /// `transmitters`: how many [`Datapath::transmitter`] calls will come.
    ///
    /// # Errors
    /// Not an IPv4 address with a port, no interface holds it, a setting out
    /// of range, or the kernel refuses a step (the error says which).
    pub fn open(
        cfg: &XdpConfig,
        addr: SocketAddr,
        pool: &mut PacketPool,
        transmitters: usize,
    ) -> io::Result<Self> {
        let addr = server_address(addr)?;
        let iface = device::holding(*addr.ip())?;
        let tokens = pool.len() as u64;
        let link = Link::open(
            cfg,
            &iface,
            addr.port()..=addr.port(),
            tokens,
            transmitters as u64 * u64::from(cfg.tx_frames),
        )?;
        // Each packet keeps its own buffer until a frame is received for it.
        for (t, pkt) in pool.each_mut() {
            pkt.hold_frame(Umem::frame_addr(t));
        }
        let next = link.next_frame;
        Ok(Self {
            addr,
            me: Endpoint {
                mac: link.mac,
                ip: *addr.ip(),
                port: addr.port(),
            },
            lanes: Vec::with_capacity(transmitters),
            next_tx_frame: next,
            tx_frames: cfg.tx_frames,
            tx_ring: cfg.ring,
            tx_base: Umem::frame_addr(next),
            transmitters_left: transmitters,
            next_queue: 0,
            tokens,
            drops: [0; FrameError::ALL.len()],
            wrong_destination: 0,
            transmitted: 0,
            link,
        })
    }

    /// What was bound (before the run; the counters fill in at the end).
    pub fn bound(&self) -> &XdpReport {
        &self.link.report
    }

    /// The socket of queue 0 (its kernel counters, for the metrics exporter).
    pub fn socket(&self) -> Arc<xsk::XskFd> {
        self.link.tx.socket().clone()
    }

    /// Returns a received frame to the fill ring of queue `q`.
    #[inline]
    fn lend(&mut self, q: usize, frame: u64) {
        self.link.rx[q].fill(frame);
    }

    /// Takes back sent frames, each to its transmitter's stock; returns
    /// how many.
    fn reap(&mut self) -> u32 {
        let c = &mut self.link.completion;
        let n = c.completed(u32::MAX);
        if n > 0 {
            let per = u64::from(self.tx_frames) * u64::from(FRAME_SIZE);
            for i in 0..n {
                let frame = Umem::chunk(c.completed_addr(i));
                let lane = ((frame - self.tx_base) / per) as usize;
                // A lane's stock ring holds all its frames: never full.
                let _ = self.lanes[lane].stock.push(frame);
            }
            c.release(n);
            self.transmitted += u64::from(n);
        }
        n
    }

    /// Transmit frames not back in their stock (on a transmitter's ring,
    /// in the kernel, or on the completion ring).
    fn frames_out(&self) -> u64 {
        let free: u64 = self
            .lanes
            .iter()
            .map(|l| (l.stock.buffer().capacity() - l.stock.slots()) as u64)
            .sum();
        self.lanes.len() as u64 * u64::from(self.tx_frames) - free
    }
}

impl Datapath for XdpDatapath {
    type Tx = XdpTx;

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(SocketAddr::V4(self.addr))
    }

    type Report = XdpReport;

    fn recv_batch(&mut self, pool: &PacketPool, tokens: &mut [PacketToken]) -> io::Result<usize> {
        let mut got = 0;
        let queues = self.link.rx.len();
        for k in 0..queues {
            if got == tokens.len() {
                break;
            }
            let q = (self.next_queue + k) % queues;
            let n = self.link.rx[q].received((tokens.len() - got) as u32);
            if n == 0 {
                continue;
            }
            for i in 0..n {
                let d = self.link.rx[q].desc(i);
                let chunk = Umem::chunk(d.addr);
                let in_chunk = (d.addr - chunk) as usize;
                // SAFETY: the descriptor came off this UMEM's RX ring: the
                // frame is ours until lent again.
                let Some(bytes) = (unsafe { self.link.umem.received(&d) }) else {
                    self.drops[FrameError::Truncated as usize] += 1;
                    self.lend(q, chunk);
                    continue;
                };
                let udp = match frame::parse_udp4(bytes) {
                    Ok(u) => u,
                    Err(e) => {
                        self.drops[e as usize] += 1;
                        self.lend(q, chunk);
                        continue;
                    }
                };
                if udp.dst.ip != self.me.ip || udp.dst.port != self.me.port {
                    self.wrong_destination += 1;
                    self.lend(q, chunk);
                    continue;
                }
                let data_at = in_chunk + udp.payload_offset;
                if data_at + PACKET_BYTES > FRAME_SIZE as usize {
                    // A layout this datapath cannot read in place (the kernel
                    // never places a frame this late in its chunk).
                    self.drops[FrameError::Truncated as usize] += 1;
                    self.lend(q, chunk);
                    continue;
                }
                let pkt = pool.get_mut(&mut tokens[got]);
                let spare = pkt.frame;
                // SAFETY: we hold the token (so its packet and the frame it
                // holds); the received frame is ours (above), and
                // PACKET_BYTES bytes from `data_at` lie inside it.
                unsafe { pkt.set_frame(chunk, self.link.umem.ptr(chunk + data_at as u64)) };
                pkt.len = udp.payload_len;
                pkt.peer = PeerAddr::ipv4(udp.src.ip, udp.src.port, udp.src.mac);
                self.lend(q, spare);
                got += 1;
            }
            self.link.rx[q].release(n);
            self.link.rx[q].publish_fill();
        }
        self.next_queue = (self.next_queue + 1) % queues;
        Ok(got)
    }

    fn transmitter(&mut self) -> io::Result<XdpTx> {
        if self.transmitters_left == 0 {
            return Err(io::Error::other(
                "the AF_XDP datapath was opened for fewer transmitters",
            ));
        }
        let tx = xsk::open_tx(self.link.rx[0].socket(), self.link.queue0, self.tx_ring)?;
        self.transmitters_left -= 1;
        let n = self.tx_frames as usize;
        let (mut stock_tx, stock_rx) = rtrb::RingBuffer::new(n);
        for _ in 0..n {
            let _ = stock_tx.push(Umem::frame_addr(self.next_tx_frame));
            self.next_tx_frame += 1;
        }
        self.lanes.push(TxLane {
            stock: stock_tx,
            sock: tx.socket().clone(),
        });
        Ok(XdpTx {
            umem: self.link.umem.clone(),
            me: self.me,
            stock: stock_rx,
            tx,
        })
    }

    fn service(&mut self) -> bool {
        self.reap() > 0
    }

    fn wait(&self, also: Option<BorrowedFd<'_>>, timeout: Duration) {
        let mut fds = [readable(-1); MAX_QUEUES as usize + 2];
        let n = self.link.pollfds(&mut fds);
        fds[n] = readable(also.map_or(-1, |a| a.as_raw_fd()));
        crate::udp::poll_fds(&mut fds[..n + 1], timeout);
    }

    fn dropped_by_os(&self) -> Option<u64> {
        Some(
            self.link
                .rx
                .iter()
                .filter_map(|r| r.socket().statistics().ok())
                .map(|s| s.rx_dropped)
                .sum(),
        )
    }

    fn malformed(&self) -> u64 {
        self.drops.iter().sum()
    }

    fn finish(&mut self) -> XdpReport {
        // Kick every transmitter's socket (a frame its last kick left on its
        // ring goes out) and wait, briefly, for the kernel to hand every
        // sent frame back.
        let deadline = Instant::now() + Duration::from_millis(500);
        while self.frames_out() > 0 && Instant::now() < deadline {
            for l in &self.lanes {
                xsk::kick(&l.sock);
            }
            if self.reap() == 0 {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        let mut r = self.link.report.clone();
        r.frames_with_tokens = self.tokens;
        r.frames_lent_for_rx = self.link.rx.iter().map(XskRx::lent).sum();
        r.frames_in_tx = self.frames_out();
        r.frames_free_for_tx = self.lanes.len() as u64 * u64::from(self.tx_frames) - r.frames_in_tx;
        let accounted = r.frames_with_tokens
            + r.frames_lent_for_rx
            + r.frames_free_for_tx
            + r.frames_in_tx
            // Transmit frames of lanes never handed out.
            + u64::from(self.tx_frames) * self.transmitters_left as u64;
        r.frames_leaked = r.frames_total.saturating_sub(accounted);
        r.dropped = FrameError::ALL
            .iter()
            .map(|e| (e.name().to_string(), self.drops[*e as usize]))
            .collect();
        r.wrong_destination = self.wrong_destination;
        r.transmitted = self.transmitted;
        self.link.add_kernel_counters(&mut r);
        r
    }
}

/// A transmitter: writes whole frames into its own stock of UMEM frames and
/// sends them on its own AF_XDP socket (queue 0, sharing the UMEM).
pub struct XdpTx {
    umem: Arc<Umem>,
    me: Endpoint,
    stock: rtrb::Consumer<u64>,
    tx: XskTx,
}

impl std::fmt::Debug for XdpTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpTx")
            .field("me", &self.me)
            .finish_non_exhaustive()
    }
}

impl XdpTx {
    /// Writes one frame and puts it on the TX ring (not yet published).
    fn write(&mut self, to: &PeerAddr, parts: [&[u8]; 2]) -> io::Result<()> {
        let len = parts[0].len() + parts[1].len();
        if len > MAX_PAYLOAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "datagram longer than one frame",
            ));
        }
        let Some(SocketAddr::V4(dst)) = to.to_socket_addr() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not an IPv4 peer",
            ));
        };
        let Ok(frame) = self.stock.pop() else {
            // Every frame of this transmitter is on its ring or in flight:
            // the kernel is not keeping up (counted by the caller, like a
            // full socket buffer on the UDP path).
            return Err(io::ErrorKind::WouldBlock.into());
        };
        // SAFETY: a frame popped from this transmitter's stock is its own
        // until put on its TX ring (the dispatcher returns it only after the
        // kernel completed it).
        let buf = unsafe { self.umem.frame_mut(frame) };
        let at = frame::HEADERS_LEN;
        buf[at..at + parts[0].len()].copy_from_slice(parts[0]);
        buf[at + parts[0].len()..at + len].copy_from_slice(parts[1]);
        let dst = Endpoint {
            mac: to.hw,
            ip: *dst.ip(),
            port: dst.port(),
        };
        let flen = frame::write_udp4(buf, &self.me, &dst, len);
        // The ring holds all of this transmitter's frames (checked at
        // configuration): never full.
        debug_assert!(self.tx.tx_free() > 0);
        self.tx.push(Desc {
            addr: frame,
            len: flen as u32,
            options: 0,
        });
        Ok(())
    }
}

impl Transmit for XdpTx {
    #[inline]
    fn send(&mut self, to: &PeerAddr, parts: [&[u8]; 2]) -> io::Result<()> {
        self.write(to, parts)?;
        self.tx.submit();
        Ok(())
    }

    fn send_batch(&mut self, msgs: &[(&PeerAddr, &[u8])]) -> io::Result<usize> {
        let mut sent = 0;
        for (to, bytes) in msgs {
            if self.write(to, [bytes, &[]]).is_ok() {
                sent += 1;
            }
        }
        if sent > 0 {
            self.tx.submit();
        }
        Ok(sent)
    }

    fn max_payload(&self) -> usize {
        MAX_PAYLOAD
    }
}

/// `addr` as the AF_XDP datapath serves it: IPv4, with an explicit port.
///
/// # Errors
/// Anything else, as one line.
pub fn server_address(addr: SocketAddr) -> io::Result<SocketAddrV4> {
    let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
    match addr {
        SocketAddr::V4(a) if a.port() != 0 => Ok(a),
        SocketAddr::V4(_) => Err(invalid(
            "the AF_XDP datapath needs an explicit port (the XDP program filters on it)".into(),
        )),
        SocketAddr::V6(_) => Err(invalid(format!(
            "the AF_XDP datapath serves IPv4 only, not {addr}"
        ))),
    }
}

/// Checks that an interface holds `addr`'s IP (where the AF_XDP datapath
/// would bind), without binding.
///
/// # Errors
/// As [`server_address`] and [`device::holding`].
pub fn check_address(addr: SocketAddr) -> io::Result<()> {
    let a = server_address(addr)?;
    device::holding(*a.ip()).map(|_| ())
}
