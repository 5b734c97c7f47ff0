//! AF_XDP sockets: the UMEM (one region of fixed-size frames shared with the
//! kernel), the four rings (fill, RX, TX, completion) mapped from the socket,
//! and bind. A socket splits into its receive side ([`XskRx`]: fill and RX
//! rings), its transmit side ([`XskTx`]: the TX ring) and its completion
//! ring ([`XskCompletion`]), each owned by one thread: every ring has
//! exactly one user-space producer or consumer. More transmit-only sockets
//! ([`open_tx`]) can share a socket's UMEM, queue, fill and completion rings,
//! one per transmitting thread.
//!
//! The rings are hand-written over `libc`'s definitions rather than taken
//! from a crate: the datapath moves frames between a request's token, the
//! fill ring and the transmitters' stocks by address, and counts every
//! frame in one place; the crates available wrap frames in their own
//! ownership types that this accounting would have to work around.
//!
//! Nothing here allocates, locks or makes a system call per frame; system
//! calls happen only to wake the kernel (`sendto` for TX, `recvfrom` for the
//! fill ring), and only when the ring says the kernel asked for it
//! (`XDP_USE_NEED_WAKEUP`).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering, fence};

/// Bytes per UMEM frame (one page): the kernel puts a received frame
/// `XDP_PACKET_HEADROOM` (256) bytes into its chunk, which leaves room for an
/// Ethernet frame of 1,514 bytes and for the packet pool's largest request.
pub const FRAME_SIZE: u32 = 4096;
/// Frames one UMEM may hold at most (1 GiB of frames): sizes are derived from
/// checked configuration, and this bounds them again before any memory is
/// mapped.
pub const MAX_FRAMES: u32 = 1 << 18;
/// The largest ring the datapath asks for (entries; rings are powers of two).
pub const MAX_RING: u32 = 1 << 15;

/// A UMEM: anonymous memory, page-aligned, registered with an AF_XDP socket.
/// Frames are addressed by their byte offset in the region (what descriptors
/// carry).
#[derive(Debug)]
pub struct Umem {
    base: NonNull<u8>,
    len: usize,
    frames: u32,
}

// SAFETY: the region is plain memory owned by this value until drop; which
// thread may touch which frame is the datapath's protocol (a frame belongs to
// exactly one owner at a time, handed over through the rings or the packet
// pool's tokens with release/acquire ordering), not this type's.
unsafe impl Send for Umem {}
// SAFETY: as above; shared references only hand out raw pointers.
unsafe impl Sync for Umem {}

impl Umem {
    /// Maps `frames` frames of [`FRAME_SIZE`] bytes, populated up front (no
    /// page fault on the datapath).
    ///
    /// # Errors
    /// More than [`MAX_FRAMES`] frames, or the kernel refuses the mapping.
    pub fn new(frames: u32) -> io::Result<Arc<Umem>> {
        if frames == 0 || frames > MAX_FRAMES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a UMEM holds 1 to {MAX_FRAMES} frames, not {frames}"),
            ));
        }
        let len = frames as usize * FRAME_SIZE as usize;
        // SAFETY: an anonymous private mapping with no address hint has no
        // preconditions; the result is checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Arc::new(Umem {
            base: NonNull::new(p.cast()).expect("mmap never returns null on success"),
            len,
            frames,
        }))
    }

    /// Frames in the region.
    pub fn frames(&self) -> u32 {
        self.frames
    }

    /// The address (offset) of frame `i`.
    #[inline]
    pub fn frame_addr(i: u32) -> u64 {
        u64::from(i) * u64::from(FRAME_SIZE)
    }

    /// The frame (chunk) an address lies in, as that frame's address.
    #[inline]
    pub fn chunk(addr: u64) -> u64 {
        addr & !(u64::from(FRAME_SIZE) - 1)
    }

    /// A pointer to the byte at `addr`.
    ///
    /// # Panics
    /// In debug builds, if `addr` lies outside the region.
    #[inline]
    pub fn ptr(&self, addr: u64) -> *mut u8 {
        debug_assert!(
            (addr as usize) < self.len,
            "UMEM address {addr} out of range"
        );
        // SAFETY: callers pass addresses the kernel or the datapath produced
        // from this region (checked in debug builds): the offset stays inside
        // the mapping.
        unsafe { self.base.as_ptr().add(addr as usize) }
    }

    /// The bytes of the frame holding `addr`, from `addr` to the frame's end.
    ///
    /// # Safety
    /// The caller owns the frame (no other thread and not the kernel touches
    /// it for the borrow's life).
    #[inline]
    // The UMEM is memory shared with the kernel: which frame is whose is
    // the datapath's protocol, not a borrow of this value.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn frame_mut(&self, addr: u64) -> &mut [u8] {
        let end = Self::chunk(addr) + u64::from(FRAME_SIZE);
        // SAFETY: the range lies inside one frame of the mapping, which the
        // caller owns exclusively.
        unsafe { std::slice::from_raw_parts_mut(self.ptr(addr), (end - addr) as usize) }
    }

    /// The bytes of a received frame (`d.len` bytes from `d.addr`), or
    /// `None` when the descriptor reaches past its chunk (no kernel writes
    /// one; never read past a frame on its word).
    ///
    /// # Safety
    /// The descriptor came off an RX ring of this UMEM: the caller owns the
    /// frame until it lends or transmits it.
    #[inline]
    pub unsafe fn received(&self, d: &Desc) -> Option<&[u8]> {
        let in_chunk = d.addr - Self::chunk(d.addr);
        if in_chunk + u64::from(d.len) > u64::from(FRAME_SIZE) {
            return None;
        }
        // SAFETY: the range lies inside one frame (checked), which the
        // caller owns.
        Some(unsafe { std::slice::from_raw_parts(self.ptr(d.addr), d.len as usize) })
    }

    fn region(&self) -> (u64, u64) {
        (self.base.as_ptr() as u64, self.len as u64)
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: the mapping was made in `new` with this length and is
        // unmapped once; every socket using it holds an `Arc` to this value.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// One mapped ring: the shared producer and consumer indices, flags and
/// descriptors, with this side's cached copies.
struct Ring<T> {
    map: NonNull<libc::c_void>,
    map_len: usize,
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    descs: NonNull<T>,
    mask: u32,
    size: u32,
    /// This side's view of the producer index.
    cached_prod: u32,
    /// This side's view of the consumer index.
    cached_cons: u32,
}

// SAFETY: a ring side is used by the one thread that owns it (moved, never
// shared); the mapping lives as long as the value; its entries are `T`s, so
// moving the side moves `T`s across threads: only for `T: Send`.
unsafe impl<T: Send> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    /// Maps the ring of `size` entries at page offset `pgoff` of `fd`.
    fn map(
        fd: BorrowedFd<'_>,
        off: &libc::xdp_ring_offset,
        size: u32,
        pgoff: libc::off_t,
    ) -> io::Result<Self> {
        let map_len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        // SAFETY: mapping a socket's ring at the offset the kernel documents
        // for it; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                pgoff,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let at = |o: u64| {
            // SAFETY: the kernel's offsets lie inside the mapping it sized.
            NonNull::new(unsafe { p.cast::<u8>().add(o as usize) }).expect("inside a mapping")
        };
        let mut ring = Ring {
            map: NonNull::new(p).expect("mmap never returns null on success"),
            map_len,
            producer: at(off.producer).cast(),
            consumer: at(off.consumer).cast(),
            flags: at(off.flags).cast(),
            descs: at(off.desc).cast(),
            mask: size - 1,
            size,
            cached_prod: 0,
            cached_cons: 0,
        };
        ring.cached_prod = ring.producer().load(Ordering::Relaxed);
        ring.cached_cons = ring.consumer().load(Ordering::Relaxed);
        Ok(ring)
    }

    #[inline]
    fn producer(&self) -> &AtomicU32 {
        // SAFETY: the index is a live, aligned u32 of the mapping, shared with
        // the kernel, which accesses it atomically.
        unsafe { self.producer.as_ref() }
    }

    #[inline]
    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { self.consumer.as_ref() }
    }

    /// Whether the kernel asked to be woken (`XDP_RING_NEED_WAKEUP`).
    #[inline]
    fn needs_wakeup(&self) -> bool {
        // The index just published must be visible before the flag is read,
        // or a kernel that set the flag after its last look could be missed.
        fence(Ordering::SeqCst);
        // SAFETY: as for `producer`.
        let flags = unsafe { self.flags.as_ref() };
        flags.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    #[inline]
    fn slot(&self, idx: u32) -> *mut T {
        // SAFETY: `idx & mask` is below the ring's size, inside the mapping.
        unsafe { self.descs.as_ptr().add((idx & self.mask) as usize) }
    }

    // --- producer side (fill, TX) ---

    /// Entries free for this producer (refreshing the consumer's index only
    /// when the cached view says fewer than `want`).
    #[inline]
    fn free(&mut self, want: u32) -> u32 {
        let free = self.size - self.cached_prod.wrapping_sub(self.cached_cons);
        if free >= want {
            return free;
        }
        self.cached_cons = self.consumer().load(Ordering::Acquire);
        self.size - self.cached_prod.wrapping_sub(self.cached_cons)
    }

    /// Writes `v` into the next free entry (not yet visible to the kernel).
    /// The caller checked [`free`](Self::free).
    #[inline]
    fn write(&mut self, v: T) {
        // SAFETY: the entry is free (the caller checked), so the kernel does
        // not read it until the producer index moves past it.
        unsafe { self.slot(self.cached_prod).write(v) };
        self.cached_prod = self.cached_prod.wrapping_add(1);
    }

    /// Makes the written entries visible to the kernel.
    #[inline]
    fn publish(&mut self) {
        self.producer().store(self.cached_prod, Ordering::Release);
    }

    /// Entries published and not yet consumed by the kernel.
    fn outstanding(&mut self) -> u32 {
        self.cached_cons = self.consumer().load(Ordering::Acquire);
        self.cached_prod.wrapping_sub(self.cached_cons)
    }

    // --- consumer side (RX, completion) ---

    /// Entries ready to read, at most `max`.
    #[inline]
    fn available(&mut self, max: u32) -> u32 {
        let mut n = self.cached_prod.wrapping_sub(self.cached_cons);
        if n == 0 {
            self.cached_prod = self.producer().load(Ordering::Acquire);
            n = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        n.min(max)
    }

    /// The `i`-th ready entry. The caller checked [`available`](Self::available).
    #[inline]
    fn read(&self, i: u32) -> T {
        // SAFETY: the entry lies between the consumer and producer indices:
        // the kernel wrote it before publishing (acquire in `available`).
        unsafe { self.slot(self.cached_cons.wrapping_add(i)).read() }
    }

    /// Hands `n` read entries back to the kernel.
    #[inline]
    fn release(&mut self, n: u32) {
        self.cached_cons = self.cached_cons.wrapping_add(n);
        self.consumer().store(self.cached_cons, Ordering::Release);
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: the mapping was made in `map` with this length and is
        // unmapped once.
        unsafe { libc::munmap(self.map.as_ptr(), self.map_len) };
    }
}

/// A frame descriptor of the RX and TX rings.
pub type Desc = libc::xdp_desc;

/// Ring sizes (entries, powers of two).
#[derive(Debug, Clone, Copy)]
pub struct RingSizes {
    /// Fill ring: frames lent to the kernel for receiving.
    pub fill: u32,
    /// Completion ring: transmitted frames coming back.
    pub completion: u32,
    /// RX ring: received frames.
    pub rx: u32,
    /// TX ring: frames to transmit.
    pub tx: u32,
}

impl RingSizes {
    fn check(&self) -> io::Result<()> {
        for (name, n) in [
            ("fill", self.fill),
            ("completion", self.completion),
            ("rx", self.rx),
            ("tx", self.tx),
        ] {
            if !n.is_power_of_two() || n > MAX_RING {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "the {name} ring must hold a power of two up to {MAX_RING} entries, not {n}"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Where and how to bind a socket.
#[derive(Debug, Clone, Copy)]
pub struct BindTo {
    /// The interface.
    pub ifindex: u32,
    /// Its queue.
    pub queue: u32,
    /// `Some(true)`: zero-copy or fail; `Some(false)`: copy mode; `None`:
    /// zero-copy where the driver supports it, else copy mode.
    pub zero_copy: Option<bool>,
    /// Busy polling: `SO_BUSY_POLL` microseconds (0: off).
    pub busy_poll_us: u32,
}

/// The socket itself, shared by its two halves.
#[derive(Debug)]
pub struct XskFd {
    fd: OwnedFd,
    zero_copy: bool,
}

impl XskFd {
    /// The socket's descriptor (for `poll`, and for the XSKMAP).
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Whether the kernel bound the socket in zero-copy mode.
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// The kernel's counters for this socket.
    pub fn statistics(&self) -> io::Result<libc::xdp_statistics> {
        // SAFETY: plain data; all-zero is valid.
        let mut s: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of_val(&s) as libc::socklen_t;
        // SAFETY: `s` is writable for `len` bytes; the kernel writes at most that.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                (&raw mut s).cast(),
                &mut len,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(s)
    }
}

/// The receive half: the fill ring (frames lent to the kernel) and the RX
/// ring (frames received).
pub struct XskRx {
    sock: Arc<XskFd>,
    fill: Ring<u64>,
    rx: Ring<Desc>,
    /// Frames lent to the kernel and not yet received back: in the fill ring,
    /// held by the kernel, or in the RX ring.
    lent: u64,
}

/// A transmit side: the TX ring (frames to send).
pub struct XskTx {
    sock: Arc<XskFd>,
    tx: Ring<Desc>,
}

/// The completion ring of a UMEM's queue: frames the kernel has sent, for
/// every socket sharing it.
pub struct XskCompletion {
    completion: Ring<u64>,
    _sock: Arc<XskFd>,
}

fn setsockopt<T>(fd: BorrowedFd<'_>, level: i32, name: i32, v: &T) -> io::Result<()> {
    // SAFETY: `v` is a live value of the size passed; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("setsockopt({level}, {name}): {e}"),
        ));
    }
    Ok(())
}

/// Opens an AF_XDP socket on `to` over `umem`, with rings of `sizes`.
/// `shared_with`: a socket already bound on the same UMEM (another queue of
/// the same device), whose UMEM registration this one shares; it still gets
/// its own fill and completion rings.
///
/// # Errors
/// A ring size that is not a power of two, or the kernel refuses a step
/// (the error names it).
pub fn open(
    umem: &Arc<Umem>,
    to: BindTo,
    sizes: RingSizes,
    shared_with: Option<&XskFd>,
) -> io::Result<(XskRx, XskTx, XskCompletion)> {
    sizes.check()?;
    // The kernel releases a closed socket's hold on its queue in deferred
    // work: a socket bound right after another closed (the next server of a
    // benchmark) may find the queue busy for a moment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        let r = match to.zero_copy {
            Some(zc) => open_mode(umem, to, sizes, shared_with, zc),
            None => open_mode(umem, to, sizes, shared_with, true)
                .or_else(|_| open_mode(umem, to, sizes, shared_with, false)),
        };
        match r {
            Err(e)
                if e.kind() == io::ErrorKind::ResourceBusy
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            r => return r,
        }
    }
}

fn open_mode(
    umem: &Arc<Umem>,
    to: BindTo,
    sizes: RingSizes,
    shared_with: Option<&XskFd>,
    zero_copy: bool,
) -> io::Result<(XskRx, XskTx, XskCompletion)> {
    // SAFETY: socket(2) has no memory preconditions; the result is checked.
    let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("socket(AF_XDP): {e}")));
    }
    // SAFETY: `raw` is a fresh descriptor owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let b = fd.as_fd();
    if shared_with.is_none() {
        let (addr, len) = umem.region();
        let reg = libc::xdp_umem_reg {
            addr,
            len,
            chunk_size: FRAME_SIZE,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(b, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg)?;
    }
    setsockopt(b, libc::SOL_XDP, libc::XDP_UMEM_FILL_RING, &sizes.fill)?;
    setsockopt(
        b,
        libc::SOL_XDP,
        libc::XDP_UMEM_COMPLETION_RING,
        &sizes.completion,
    )?;
    setsockopt(b, libc::SOL_XDP, libc::XDP_RX_RING, &sizes.rx)?;
    setsockopt(b, libc::SOL_XDP, libc::XDP_TX_RING, &sizes.tx)?;
    let off = mmap_offsets(b)?;
    let fill = Ring::<u64>::map(b, &off.fr, sizes.fill, libc::XDP_UMEM_PGOFF_FILL_RING as _)?;
    let completion = Ring::<u64>::map(
        b,
        &off.cr,
        sizes.completion,
        libc::XDP_UMEM_PGOFF_COMPLETION_RING as _,
    )?;
    let rx = Ring::<Desc>::map(b, &off.rx, sizes.rx, libc::XDP_PGOFF_RX_RING)?;
    let tx = Ring::<Desc>::map(b, &off.tx, sizes.tx, libc::XDP_PGOFF_TX_RING)?;
    if to.busy_poll_us > 0 {
        // SO_PREFER_BUSY_POLL, SO_BUSY_POLL, SO_BUSY_POLL_BUDGET (asm-generic).
        setsockopt(b, libc::SOL_SOCKET, 69, &1i32)?;
        setsockopt(
            b,
            libc::SOL_SOCKET,
            libc::SO_BUSY_POLL,
            &(to.busy_poll_us as i32),
        )?;
        setsockopt(b, libc::SOL_SOCKET, 70, &64i32)?;
    }
    let mut flags = libc::XDP_USE_NEED_WAKEUP;
    flags |= if zero_copy {
        libc::XDP_ZEROCOPY
    } else {
        libc::XDP_COPY
    };
    let mut shared_fd = 0;
    if let Some(s) = shared_with {
        // A socket sharing a UMEM inherits its mode (copy or zero-copy,
        // need-wakeup): the kernel refuses mode flags beside this one.
        flags = libc::XDP_SHARED_UMEM;
        shared_fd = s.fd.as_raw_fd() as u32;
    }
    let sa = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: to.ifindex,
        sxdp_queue_id: to.queue,
        sxdp_shared_umem_fd: shared_fd,
    };
    // SAFETY: `sa` is a live sockaddr_xdp of the size passed.
    let r = unsafe {
        libc::bind(
            b.as_raw_fd(),
            (&raw const sa).cast(),
            std::mem::size_of_val(&sa) as libc::socklen_t,
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        let mode = if zero_copy { "zero-copy" } else { "copy" };
        return Err(io::Error::new(
            e.kind(),
            format!(
                "bind AF_XDP ({mode} mode) to interface {} queue {}: {e}",
                to.ifindex, to.queue
            ),
        ));
    }
    let sock = Arc::new(XskFd { fd, zero_copy });
    Ok((
        XskRx {
            sock: sock.clone(),
            fill,
            rx,
            lent: 0,
        },
        XskTx {
            sock: sock.clone(),
            tx,
        },
        XskCompletion {
            completion,
            _sock: sock,
        },
    ))
}

/// Opens a transmit-only socket on `owner`'s interface and queue (`to`: an
/// AF_XDP socket cannot tell its own address), sharing
/// its UMEM, fill and completion rings (the kernel shares the queue's buffer
/// pool between sockets bound to the same queue): a transmitting thread's
/// own TX ring, whose sent frames come back on `owner`'s completion ring.
///
/// # Errors
/// The kernel refuses a step (the error names it).
pub fn open_tx(owner: &XskFd, to: BindTo, tx_entries: u32) -> io::Result<XskTx> {
    if !tx_entries.is_power_of_two() || tx_entries > MAX_RING {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "the tx ring must hold a power of two up to {MAX_RING} entries, not {tx_entries}"
            ),
        ));
    }
    // SAFETY: socket(2) has no memory preconditions; the result is checked.
    let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("socket(AF_XDP): {e}")));
    }
    // SAFETY: `raw` is a fresh descriptor owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let b = fd.as_fd();
    setsockopt(b, libc::SOL_XDP, libc::XDP_TX_RING, &tx_entries)?;
    let off = mmap_offsets(b)?;
    let tx = Ring::<Desc>::map(b, &off.tx, tx_entries, libc::XDP_PGOFF_TX_RING)?;
    // Mode flags (copy, zero-copy, need-wakeup) come with the shared pool.
    let sa = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: libc::XDP_SHARED_UMEM,
        sxdp_ifindex: to.ifindex,
        sxdp_queue_id: to.queue,
        sxdp_shared_umem_fd: owner.fd.as_raw_fd() as u32,
    };
    // SAFETY: `sa` is a live sockaddr_xdp of the size passed.
    let r = unsafe {
        libc::bind(
            b.as_raw_fd(),
            (&raw const sa).cast(),
            std::mem::size_of_val(&sa) as libc::socklen_t,
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!(
                "bind a transmit AF_XDP socket to interface {} queue {}: {e}",
                to.ifindex, to.queue
            ),
        ));
    }
    Ok(XskTx {
        sock: Arc::new(XskFd {
            fd,
            zero_copy: owner.zero_copy,
        }),
        tx,
    })
}

fn mmap_offsets(b: BorrowedFd<'_>) -> io::Result<libc::xdp_mmap_offsets> {
    // SAFETY: plain data; all-zero is valid.
    let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of_val(&off) as libc::socklen_t;
    // SAFETY: `off` is writable for `len` bytes.
    let r = unsafe {
        libc::getsockopt(
            b.as_raw_fd(),
            libc::SOL_XDP,
            libc::XDP_MMAP_OFFSETS,
            (&raw mut off).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(off)
}

impl XskRx {
    /// The socket.
    pub fn socket(&self) -> &Arc<XskFd> {
        &self.sock
    }

    /// Free entries of the fill ring.
    #[inline]
    pub fn fill_free(&mut self) -> u32 {
        self.fill.free(self.fill.size)
    }

    /// Lends frame `addr` to the kernel. The caller checked
    /// [`fill_free`](Self::fill_free); call [`publish_fill`](Self::publish_fill)
    /// after a batch.
    #[inline]
    pub fn fill(&mut self, addr: u64) {
        self.fill.write(addr);
        self.lent += 1;
    }

    /// Publishes the frames lent since the last call, and wakes the kernel if
    /// it asked (it ran out of frames to receive into).
    #[inline]
    pub fn publish_fill(&mut self) {
        self.fill.publish();
        if self.fill.needs_wakeup() {
            // SAFETY: a zero-length, non-blocking receive on our own socket
            // only wakes the kernel's receive path.
            unsafe {
                libc::recvfrom(
                    self.sock.fd.as_raw_fd(),
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
        }
    }

    /// Received frames ready to read, at most `max`.
    #[inline]
    pub fn received(&mut self, max: u32) -> u32 {
        self.rx.available(max)
    }

    /// The `i`-th received frame (`i` below what [`received`](Self::received)
    /// returned).
    #[inline]
    pub fn desc(&self, i: u32) -> Desc {
        self.rx.read(i)
    }

    /// Releases `n` read descriptors (their frames are now the caller's).
    #[inline]
    pub fn release(&mut self, n: u32) {
        self.rx.release(n);
        self.lent -= u64::from(n);
    }

    /// Frames lent to the kernel and not received back.
    pub fn lent(&self) -> u64 {
        self.lent
    }
}

impl XskTx {
    /// The socket.
    pub fn socket(&self) -> &Arc<XskFd> {
        &self.sock
    }

    /// Free entries of the TX ring.
    #[inline]
    pub fn tx_free(&mut self) -> u32 {
        self.tx.free(self.tx.size)
    }

    /// Queues one frame for sending. The caller checked
    /// [`tx_free`](Self::tx_free); [`submit`](Self::submit) publishes.
    #[inline]
    pub fn push(&mut self, d: Desc) {
        self.tx.write(d);
    }

    /// Publishes the queued frames and kicks the kernel if it asked (copy
    /// mode always does: its transmit runs in this system call).
    #[inline]
    pub fn submit(&mut self) {
        self.tx.publish();
        if self.tx.needs_wakeup() {
            self.kick();
        }
    }

    /// Wakes the kernel's transmit path.
    pub fn kick(&self) {
        kick(&self.sock);
    }

    /// Frames in the TX ring not yet taken by the kernel.
    pub fn tx_pending(&mut self) -> u32 {
        self.tx.outstanding()
    }
}

/// Wakes the kernel's transmit path of `sock` (any thread may: the kernel
/// serializes transmission per socket).
pub fn kick(sock: &XskFd) {
    // SAFETY: a zero-length, non-blocking send on our own socket only wakes
    // the kernel's transmit path; EAGAIN/EBUSY (ring being drained) are
    // retried by the next kick.
    unsafe {
        libc::sendto(
            sock.fd.as_raw_fd(),
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
}

impl XskCompletion {
    /// Sent frames ready to take back, at most `max`.
    #[inline]
    pub fn completed(&mut self, max: u32) -> u32 {
        self.completion.available(max)
    }

    /// The `i`-th completed frame's address.
    #[inline]
    pub fn completed_addr(&self, i: u32) -> u64 {
        self.completion.read(i)
    }

    /// Takes back `n` completed frames.
    #[inline]
    pub fn release(&mut self, n: u32) {
        self.completion.release(n);
    }
}
