//! The XDP program of the AF_XDP datapath, assembled in Rust, and its loader.
//!
//! The program sorts incoming frames: IPv4/UDP frames for the server's
//! address and port range (and every IPv4/UDP fragment for that address) are
//! redirected into the AF_XDP socket bound to the receiving queue, through an
//! `XSKMAP`; everything else (ARP, IPv6, ICMP, other addresses or ports,
//! truncated frames) gets `XDP_PASS`, so the kernel stack keeps handling it.
//!
//! There is no aya, libbpf or clang here: the eBPF instructions are written
//! out by [`assemble`], and the loader talks to the kernel with raw `bpf(2)`
//! system calls plus, for the legacy attachment API only, a hand-written
//! rtnetlink request (the `netlink` module).
//!
//! What this module must not do: any per-packet work. It runs once at start
//! up (create the map, load and attach the program, put the sockets in the
//! map) and is never on the hot path; the frames themselves are read from the
//! AF_XDP rings elsewhere. The program is attached through a bpf link, so the
//! kernel detaches it when the last file descriptor of the link closes: a
//! server that exits, panics or is killed (even with `SIGKILL`) leaves
//! nothing attached to the interface.

use std::ffi::c_long;
use std::io;
use std::net::Ipv4Addr;
use std::ops::RangeInclusive;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

pub use super::netlink::attached_program_id;
use super::netlink::detach_legacy;

// ---------------------------------------------------------------------------
// Kernel constants (include/uapi/linux/bpf.h, if_link.h)
// ---------------------------------------------------------------------------

/// `XDP_DROP`: the frame is dropped.
pub const XDP_DROP: u32 = 1;
/// `XDP_PASS`: the frame goes on to the kernel network stack.
pub const XDP_PASS: u32 = 2;
/// `XDP_REDIRECT`: the frame was redirected (to an AF_XDP socket here).
pub const XDP_REDIRECT: u32 = 4;

const BPF_MAP_CREATE: u32 = 0;
const BPF_MAP_UPDATE_ELEM: u32 = 2;
const BPF_PROG_LOAD: u32 = 5;
const BPF_PROG_TEST_RUN: u32 = 10;
const BPF_OBJ_GET_INFO_BY_FD: u32 = 15;
const BPF_LINK_CREATE: u32 = 28;

const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const BPF_ANY: u64 = 0;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;

pub(super) const XDP_FLAGS_SKB_MODE: u32 = 2;
pub(super) const XDP_FLAGS_DRV_MODE: u32 = 4;

/// Wraps an error with what was being done, keeping its kind.
pub(super) fn context(e: io::Error, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

// ---------------------------------------------------------------------------
// Instructions and a tiny assembler
// ---------------------------------------------------------------------------

/// One eBPF instruction exactly as the kernel reads it (`struct bpf_insn`,
/// 8 bytes): opcode, destination and source registers, offset, immediate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const _: () = assert!(std::mem::size_of::<Insn>() == 8);

/// An eBPF register, `r0` to `r10`.
#[derive(Clone, Copy)]
struct Reg(u8);

/// Return value / helper result.
const R0: Reg = Reg(0);
/// First helper argument; the context pointer on entry.
const R1: Reg = Reg(1);
const R2: Reg = Reg(2);
const R3: Reg = Reg(3);
const R4: Reg = Reg(4);
const R5: Reg = Reg(5);
/// Callee-saved: survives helper calls.
const R6: Reg = Reg(6);
const R9: Reg = Reg(9);

// Instruction classes.
const BPF_LD: u8 = 0x00;
const BPF_LDX: u8 = 0x01;
const BPF_ALU: u8 = 0x04;
const BPF_JMP: u8 = 0x05;
const BPF_JMP32: u8 = 0x06;
const BPF_ALU64: u8 = 0x07;
// Sizes and modes of loads.
const BPF_W: u8 = 0x00;
const BPF_H: u8 = 0x08;
const BPF_B: u8 = 0x10;
const BPF_DW: u8 = 0x18;
const BPF_IMM: u8 = 0x00;
const BPF_MEM: u8 = 0x60;
// Operand source: immediate (K) or register (X).
const BPF_K: u8 = 0x00;
const BPF_X: u8 = 0x08;
// ALU operations.
const BPF_ADD: u8 = 0x00;
const BPF_AND: u8 = 0x50;
const BPF_LSH: u8 = 0x60;
const BPF_RSH: u8 = 0x70;
const BPF_MOV: u8 = 0xb0;
const BPF_END: u8 = 0xd0;
const BPF_TO_BE: u8 = 0x08;
// Jump operations.
const BPF_JGT: u8 = 0x20;
const BPF_JSET: u8 = 0x40;
const BPF_JNE: u8 = 0x50;
const BPF_JLT: u8 = 0xa0;
const BPF_CALL: u8 = 0x80;
const BPF_EXIT: u8 = 0x90;

impl Insn {
    fn new(code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> Self {
        // `struct bpf_insn` has `dst_reg:4, src_reg:4` bit fields, whose
        // placement in the byte follows the byte order.
        #[cfg(target_endian = "little")]
        let regs = dst.0 | (src.0 << 4);
        #[cfg(target_endian = "big")]
        let regs = (dst.0 << 4) | src.0;
        Insn {
            code,
            regs,
            off,
            imm,
        }
    }
}

/// `dst = src` (64 bit).
fn mov64_reg(dst: Reg, src: Reg) -> Insn {
    Insn::new(BPF_ALU64 | BPF_MOV | BPF_X, dst, src, 0, 0)
}

/// `dst = imm` (64 bit, sign-extended immediate).
fn mov64_imm(dst: Reg, imm: i32) -> Insn {
    Insn::new(BPF_ALU64 | BPF_MOV | BPF_K, dst, R0, 0, imm)
}

/// `dst += imm` (64 bit).
fn add64_imm(dst: Reg, imm: i32) -> Insn {
    Insn::new(BPF_ALU64 | BPF_ADD | BPF_K, dst, R0, 0, imm)
}

/// `dst += src` (64 bit).
fn add64_reg(dst: Reg, src: Reg) -> Insn {
    Insn::new(BPF_ALU64 | BPF_ADD | BPF_X, dst, src, 0, 0)
}

/// `dst &= imm` (64 bit).
fn and64_imm(dst: Reg, imm: i32) -> Insn {
    Insn::new(BPF_ALU64 | BPF_AND | BPF_K, dst, R0, 0, imm)
}

/// `dst <<= imm` (64 bit).
fn shift_left64(dst: Reg, imm: i32) -> Insn {
    Insn::new(BPF_ALU64 | BPF_LSH | BPF_K, dst, R0, 0, imm)
}

/// `dst >>= imm` (64 bit, logical).
fn shift_right64(dst: Reg, imm: i32) -> Insn {
    Insn::new(BPF_ALU64 | BPF_RSH | BPF_K, dst, R0, 0, imm)
}

/// `dst = be16_to_host(dst)`: turns a 16-bit field loaded from the wire
/// (network byte order) into its numeric value; clears the upper bits.
fn net_to_host16(dst: Reg) -> Insn {
    Insn::new(BPF_ALU | BPF_END | BPF_TO_BE, dst, R0, 0, 16)
}

/// `dst = *(u8 *)(src + off)`.
fn load_u8(dst: Reg, src: Reg, off: i16) -> Insn {
    Insn::new(BPF_LDX | BPF_MEM | BPF_B, dst, src, off, 0)
}

/// `dst = *(u16 *)(src + off)`, in memory (host) byte order.
fn load_u16(dst: Reg, src: Reg, off: i16) -> Insn {
    Insn::new(BPF_LDX | BPF_MEM | BPF_H, dst, src, off, 0)
}

/// `dst = *(u32 *)(src + off)`, in memory (host) byte order.
fn load_u32(dst: Reg, src: Reg, off: i16) -> Insn {
    Insn::new(BPF_LDX | BPF_MEM | BPF_W, dst, src, off, 0)
}

/// `dst = &map` (the two-slot `lddw` with `src_reg = BPF_PSEUDO_MAP_FD`: the
/// kernel replaces the map fd with the map's address when loading).
fn load_map_fd(dst: Reg, map_fd: i32) -> [Insn; 2] {
    [
        Insn::new(
            BPF_LD | BPF_DW | BPF_IMM,
            dst,
            Reg(BPF_PSEUDO_MAP_FD),
            0,
            map_fd,
        ),
        // Second slot: upper 32 bits of the 64-bit immediate.
        Insn::new(0, R0, R0, 0, 0),
    ]
}

/// Calls kernel helper number `helper`; arguments in r1..r5, result in r0.
fn call_helper(helper: i32) -> Insn {
    Insn::new(BPF_JMP | BPF_CALL, R0, R0, 0, helper)
}

/// Returns r0.
fn exit() -> Insn {
    Insn::new(BPF_JMP | BPF_EXIT, R0, R0, 0, 0)
}

/// Jump targets of the program.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Label {
    /// Hand the frame to the kernel stack.
    Pass,
    /// Redirect the frame to the AF_XDP socket of its queue.
    Redirect,
}

/// Collects instructions; jumps name a [`Label`] and are patched once every
/// label is placed.
#[derive(Default)]
struct Asm {
    insns: Vec<Insn>,
    jumps: Vec<(usize, Label)>,
    labels: Vec<(Label, usize)>,
}

impl Asm {
    fn push(&mut self, insn: Insn) {
        self.insns.push(insn);
    }

    /// Places `label` at the next instruction.
    fn label(&mut self, label: Label) {
        self.labels.push((label, self.insns.len()));
    }

    /// `if (u32)reg <op> imm goto label` (32-bit compare: the immediate is
    /// not sign-extended, so addresses with the top bit set compare right).
    fn jump32_imm(&mut self, op: u8, reg: Reg, imm: i32, label: Label) {
        self.jumps.push((self.insns.len(), label));
        self.push(Insn::new(BPF_JMP32 | op | BPF_K, reg, R0, 0, imm));
    }

    /// `if a <op> b goto label` (64-bit compare of two registers).
    fn jump_reg(&mut self, op: u8, a: Reg, b: Reg, label: Label) {
        self.jumps.push((self.insns.len(), label));
        self.push(Insn::new(BPF_JMP | op | BPF_X, a, b, 0, 0));
    }

    fn finish(mut self) -> Vec<Insn> {
        for &(at, label) in &self.jumps {
            let target = self
                .labels
                .iter()
                .find(|(l, _)| *l == label)
                .map(|&(_, pos)| pos)
                .expect("every jump label is placed by assemble()");
            let off = target as isize - (at as isize + 1);
            self.insns[at].off = i16::try_from(off).expect("the program is far below 32k insns");
        }
        self.insns
    }
}

/// A 16-bit value as the immediate that equals it when loaded from the wire
/// (network byte order) into a register with a host-order load.
fn wire16(v: u16) -> i32 {
    i32::from(u16::from_ne_bytes(v.to_be_bytes()))
}

// Frame layout (offsets from the start of the frame).
const ETH_TYPE: i16 = 12;
const ETH_LEN: i16 = 14;
const IP_VER_IHL: i16 = ETH_LEN;
const IP_FRAG: i16 = ETH_LEN + 6;
const IP_PROTO: i16 = ETH_LEN + 9;
const IP_DST: i16 = ETH_LEN + 16;
const IP_MIN_LEN: i32 = 20;
const UDP_DST_PORT: i16 = 2;
const UDP_LEN: i32 = 8;
const ETHERTYPE_IPV4: u16 = 0x0800;
const IPPROTO_UDP: i32 = 17;
/// `MF` flag and fragment offset bits of the IPv4 flags/offset field.
const IP_MF_OR_OFFSET: i32 = 0x3fff;

// `struct xdp_md` offsets.
const XDP_MD_DATA: i16 = 0;
const XDP_MD_DATA_END: i16 = 4;
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

/// Which frames the program sends to the AF_XDP sockets: UDP over IPv4 to
/// `ip`, destination port in `ports` (and all IPv4 fragments to `ip`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UdpFilter {
    /// The server's IPv4 address (destination address of wanted frames).
    pub ip: Ipv4Addr,
    /// The UDP destination ports served, inclusive.
    pub ports: RangeInclusive<u16>,
}

/// Writes out the XDP program for `filter`.
///
/// `map_fd` is the `XSKMAP` (see [`XskMap`]) indexed by receive queue;
/// `no_socket` is the action returned when a frame is to be redirected but
/// the map holds no socket for its queue (production passes [`XDP_PASS`];
/// tests pass [`XDP_DROP`] to observe the decision).
///
/// The program: if the frame is Ethernet/IPv4 (no VLAN tag), protocol UDP,
/// destination `filter.ip`, then a fragment (MF set or offset != 0) is
/// redirected without looking further (later fragments carry no UDP header;
/// user space counts and drops them), and an unfragmented datagram is
/// redirected when its destination port, found after the IPv4 header and its
/// options (IHL), is in `filter.ports`. Everything else, including frames
/// too short for the headers, returns `XDP_PASS`.
pub fn assemble(filter: &UdpFilter, map_fd: i32, no_socket: u32) -> Vec<Insn> {
    let (lo, hi) = if filter.ports.is_empty() {
        (1, 0) // matches no port
    } else {
        (*filter.ports.start(), *filter.ports.end())
    };
    let mut a = Asm::default();

    // Context: keep ctx in r6 (callee-saved, read again for the queue
    // index); r2 = data, r3 = data_end.
    a.push(mov64_reg(R6, R1));
    a.push(load_u32(R2, R1, XDP_MD_DATA));
    a.push(load_u32(R3, R1, XDP_MD_DATA_END));

    // Ethernet header and the fixed 20 bytes of IPv4 must be in the frame:
    // if data + 34 > data_end, pass.
    a.push(mov64_reg(R4, R2));
    a.push(add64_imm(R4, i32::from(ETH_LEN) + IP_MIN_LEN));
    a.jump_reg(BPF_JGT, R4, R3, Label::Pass);

    // EtherType must be IPv4 (a VLAN tag, 0x8100, passes).
    a.push(load_u16(R5, R2, ETH_TYPE));
    a.jump32_imm(BPF_JNE, R5, wire16(ETHERTYPE_IPV4), Label::Pass);

    // Version must be 4; r9 = header length = IHL * 4, at least 20.
    a.push(load_u8(R9, R2, IP_VER_IHL));
    a.push(mov64_reg(R5, R9));
    a.push(shift_right64(R5, 4));
    a.jump32_imm(BPF_JNE, R5, 4, Label::Pass);
    a.push(and64_imm(R9, 0x0f));
    a.push(shift_left64(R9, 2));
    a.jump32_imm(BPF_JLT, R9, IP_MIN_LEN, Label::Pass);

    // Protocol must be UDP.
    a.push(load_u8(R5, R2, IP_PROTO));
    a.jump32_imm(BPF_JNE, R5, IPPROTO_UDP, Label::Pass);

    // Destination address must be the server's (compared as the wire bytes).
    a.push(load_u32(R5, R2, IP_DST));
    a.jump32_imm(
        BPF_JNE,
        R5,
        i32::from_ne_bytes(filter.ip.octets()),
        Label::Pass,
    );

    // A fragment (MF set or offset != 0) is redirected as is: later
    // fragments have no UDP header, so the port is not read.
    a.push(load_u16(R5, R2, IP_FRAG));
    a.push(net_to_host16(R5));
    a.jump32_imm(BPF_JSET, R5, IP_MF_OR_OFFSET, Label::Redirect);

    // r4 = UDP header = data + 14 + IHL * 4; all 8 bytes of it must be in
    // the frame, else pass.
    a.push(mov64_reg(R4, R2));
    a.push(add64_imm(R4, i32::from(ETH_LEN)));
    a.push(add64_reg(R4, R9));
    a.push(mov64_reg(R5, R4));
    a.push(add64_imm(R5, UDP_LEN));
    a.jump_reg(BPF_JGT, R5, R3, Label::Pass);

    // Destination port must be in lo..=hi.
    a.push(load_u16(R5, R4, UDP_DST_PORT));
    a.push(net_to_host16(R5));
    a.jump32_imm(BPF_JLT, R5, i32::from(lo), Label::Pass);
    a.jump32_imm(BPF_JGT, R5, i32::from(hi), Label::Pass);

    // Redirect: return bpf_redirect_map(&xsks_map, ctx->rx_queue_index,
    // no_socket); the helper returns XDP_REDIRECT when the map has a socket
    // at that key, else the low bits of its third argument.
    a.label(Label::Redirect);
    a.push(load_u32(R2, R6, XDP_MD_RX_QUEUE_INDEX));
    for insn in load_map_fd(R1, map_fd) {
        a.push(insn);
    }
    a.push(mov64_imm(R3, no_socket as i32));
    a.push(call_helper(BPF_FUNC_REDIRECT_MAP));
    a.push(exit());

    // Pass: return XDP_PASS.
    a.label(Label::Pass);
    a.push(mov64_imm(R0, XDP_PASS as i32));
    a.push(exit());

    a.finish()
}

// ---------------------------------------------------------------------------
// bpf(2)
// ---------------------------------------------------------------------------

/// `bpf_attr` for `BPF_MAP_CREATE` (prefix up to `map_ifindex`).
#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
    map_ifindex: u32,
}

/// `bpf_attr` for `BPF_MAP_*_ELEM`.
#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// `bpf_attr` for `BPF_PROG_LOAD` (prefix up to `expected_attach_type`).
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `bpf_attr` for `BPF_PROG_TEST_RUN`.
#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

/// `bpf_attr` for `BPF_OBJ_GET_INFO_BY_FD`.
#[repr(C)]
#[derive(Default)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// `bpf_attr` for `BPF_LINK_CREATE` (the common prefix; XDP needs nothing
/// from the union that follows).
#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

// No implicit padding anywhere: the kernel insists that unused bytes are 0.
const _: () = assert!(std::mem::size_of::<MapCreateAttr>() == 48);
const _: () = assert!(std::mem::size_of::<MapElemAttr>() == 32);
const _: () = assert!(std::mem::size_of::<ProgLoadAttr>() == 72);
const _: () = assert!(std::mem::size_of::<TestRunAttr>() == 80);
const _: () = assert!(std::mem::size_of::<InfoAttr>() == 16);
const _: () = assert!(std::mem::size_of::<LinkCreateAttr>() == 16);

/// Issues `bpf(cmd, attr, sizeof attr)`.
///
/// # Safety
///
/// Every pointer stored in `attr` (as a `u64`) must be valid, for the
/// command's reads and writes, for the duration of the call.
unsafe fn sys_bpf<T>(cmd: u32, attr: &mut T) -> io::Result<i64> {
    let size = std::mem::size_of::<T>() as libc::c_uint;
    // SAFETY: `attr` is an exclusive reference to a live, fully initialised
    // `#[repr(C)]` attribute struct without padding, of exactly `size`
    // bytes, so the kernel reads and writes only memory we own; the pointers
    // inside it are valid by this function's contract.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as c_long,
            attr as *mut T as *mut libc::c_void,
            size,
        )
    };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as i64)
    }
}

/// Like [`sys_bpf`] for commands that return a new file descriptor.
///
/// # Safety
///
/// As for [`sys_bpf`], and `cmd` must be a command that returns a new fd.
unsafe fn sys_bpf_fd<T>(cmd: u32, attr: &mut T) -> io::Result<OwnedFd> {
    // SAFETY: forwarded contract.
    let fd = unsafe { sys_bpf(cmd, attr) }?;
    // SAFETY: on success the command returned a fresh fd that nothing else
    // owns; we take ownership of it exactly once.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// An object name for the kernel (`[A-Za-z0-9_.]`, up to 15 bytes + NUL).
fn obj_name(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (o, b) in out.iter_mut().zip(name.bytes().take(15)) {
        *o = b;
    }
    out
}

fn fd_u32(fd: BorrowedFd<'_>) -> u32 {
    fd.as_raw_fd() as u32
}

/// An `XSKMAP`: receive queue index -> AF_XDP socket, read by the program's
/// `bpf_redirect_map`.
#[derive(Debug)]
pub struct XskMap {
    fd: OwnedFd,
}

impl XskMap {
    /// Creates a map with room for queues `0..entries`.
    pub fn new(entries: u32) -> io::Result<Self> {
        let mut attr = MapCreateAttr {
            map_type: BPF_MAP_TYPE_XSKMAP,
            key_size: 4,
            value_size: 4,
            max_entries: entries,
            map_name: obj_name("psp_xsks"),
            ..Default::default()
        };
        // SAFETY: BPF_MAP_CREATE returns a new fd; the attr holds no pointers.
        let fd = unsafe { sys_bpf_fd(BPF_MAP_CREATE, &mut attr) }
            .map_err(|e| context(e, format_args!("BPF_MAP_CREATE xskmap({entries})")))?;
        Ok(XskMap { fd })
    }

    /// Puts the AF_XDP socket `xsk_fd` (bound, with an RX ring) at `queue`,
    /// replacing any socket there.
    pub fn set(&self, queue: u32, xsk_fd: BorrowedFd<'_>) -> io::Result<()> {
        let key = queue;
        let value = fd_u32(xsk_fd);
        let mut attr = MapElemAttr {
            map_fd: fd_u32(self.fd.as_fd()),
            key: &key as *const u32 as u64,
            value: &value as *const u32 as u64,
            flags: BPF_ANY,
            ..Default::default()
        };
        // SAFETY: `key` and `value` are live u32 locals, the sizes the map
        // was created with; the kernel only reads them.
        unsafe { sys_bpf(BPF_MAP_UPDATE_ELEM, &mut attr) }
            .map_err(|e| context(e, format_args!("BPF_MAP_UPDATE_ELEM xskmap[{queue}]")))?;
        Ok(())
    }

    /// The map's file descriptor.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// How the program is attached to the interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachMode {
    /// Native XDP, run by the driver (`XDP_FLAGS_DRV_MODE`); needed for
    /// zero-copy AF_XDP.
    Driver,
    /// Generic XDP, run by the core stack after the skb is built
    /// (`XDP_FLAGS_SKB_MODE`); works on any device, copy mode only.
    Generic,
}

impl AttachMode {
    fn flags(self) -> u32 {
        match self {
            AttachMode::Driver => XDP_FLAGS_DRV_MODE,
            AttachMode::Generic => XDP_FLAGS_SKB_MODE,
        }
    }
}

/// A loaded XDP program (see [`assemble`]).
#[derive(Debug)]
pub struct Program {
    fd: OwnedFd,
}

const LICENSE: &std::ffi::CStr = c"Dual MIT/GPL";
const LOG_SIZE: usize = 64 * 1024;

impl Program {
    /// Assembles the program for `filter` against `map` and loads it.
    ///
    /// On a verifier rejection the load is repeated with a log buffer and
    /// the verifier's log is part of the error.
    pub fn load(filter: &UdpFilter, map: &XskMap, no_socket: u32) -> io::Result<Self> {
        let insns = assemble(filter, map.fd.as_raw_fd(), no_socket);
        match Self::load_insns(&insns, None) {
            Ok(fd) => Ok(Program { fd }),
            Err(e) => {
                let mut log = vec![0u8; LOG_SIZE];
                let verifier = match Self::load_insns(&insns, Some(&mut log)) {
                    // Passed the second time (a transient failure): keep it.
                    Ok(fd) => return Ok(Program { fd }),
                    Err(_) => {
                        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                        String::from_utf8_lossy(&log[..end]).trim_end().to_owned()
                    }
                };
                Err(io::Error::new(
                    e.kind(),
                    format!("BPF_PROG_LOAD: {e}; verifier: {verifier}"),
                ))
            }
        }
    }

    fn load_insns(insns: &[Insn], log: Option<&mut [u8]>) -> io::Result<OwnedFd> {
        let (log_level, log_size, log_buf) = match log {
            Some(buf) => (1, buf.len() as u32, buf.as_mut_ptr() as u64),
            None => (0, 0, 0),
        };
        let mut attr = ProgLoadAttr {
            prog_type: BPF_PROG_TYPE_XDP,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: LICENSE.as_ptr() as u64,
            log_level,
            log_size,
            log_buf,
            prog_name: obj_name("psp_xdp"),
            expected_attach_type: BPF_XDP,
            ..Default::default()
        };
        let mut tries = 0;
        loop {
            // SAFETY: `insns` (insn_cnt 8-byte instructions) and the NUL
            // terminated license are borrowed for the call; the log buffer,
            // when present, is an exclusive borrow of `log_size` bytes.
            // BPF_PROG_LOAD returns a new fd.
            match unsafe { sys_bpf_fd(BPF_PROG_LOAD, &mut attr) } {
                // The verifier may ask for a retry when interrupted.
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) && tries < 5 => tries += 1,
                other => return other,
            }
        }
    }

    /// The program's file descriptor.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The kernel's id of the program (as shown by `bpftool prog` and
    /// returned by [`attached_program_id`]).
    pub fn id(&self) -> io::Result<u32> {
        // The first two fields of `struct bpf_prog_info`: type, id.
        let mut info = [0u32; 2];
        let mut attr = InfoAttr {
            bpf_fd: fd_u32(self.fd.as_fd()),
            info_len: std::mem::size_of_val(&info) as u32,
            info: info.as_mut_ptr() as u64,
        };
        // SAFETY: `info` is a live, exclusively borrowed buffer of
        // `info_len` bytes; the kernel writes at most that many.
        unsafe { sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr) }
            .map_err(|e| context(e, "BPF_OBJ_GET_INFO_BY_FD"))?;
        Ok(info[1])
    }

    /// Runs the program once on `frame` (`BPF_PROG_TEST_RUN`, no device
    /// involved) and returns its return value (an XDP action).
    ///
    /// The kernel refuses frames shorter than an Ethernet header (14 bytes)
    /// with `EINVAL`.
    pub fn test_run(&self, frame: &[u8]) -> io::Result<u32> {
        let mut attr = TestRunAttr {
            prog_fd: fd_u32(self.fd.as_fd()),
            data_size_in: frame.len() as u32,
            data_in: frame.as_ptr() as u64,
            repeat: 1,
            ..Default::default()
        };
        // SAFETY: `frame` is borrowed for the call and only read (copied in
        // by the kernel); no output buffers are given.
        unsafe { sys_bpf(BPF_PROG_TEST_RUN, &mut attr) }
            .map_err(|e| context(e, format_args!("BPF_PROG_TEST_RUN ({} B)", frame.len())))?;
        Ok(attr.retval)
    }

    /// Attaches the program to interface `ifindex` through a bpf link, in
    /// `mode`, or with `None` in driver mode and, failing that, generic mode.
    ///
    /// The link lives as long as the returned [`Attachment`]'s fd: dropping
    /// it, or the process dying in any way, detaches the program.
    ///
    /// A stale program attached the old way (netlink, e.g. by `ip link set
    /// dev X xdp obj ...` or an earlier tool) is replaced, not stacked: it is
    /// detached, then the link is created again once. A live bpf link of
    /// another process is never touched (the error is returned).
    pub fn attach(&self, ifindex: u32, mode: Option<AttachMode>) -> io::Result<Attachment> {
        match mode {
            Some(mode) => self.attach_in(ifindex, mode),
            None => self.attach_in(ifindex, AttachMode::Driver).or_else(|drv| {
                self.attach_in(ifindex, AttachMode::Generic)
                    .map_err(|skb| io::Error::new(skb.kind(), format!("{drv}; {skb}")))
            }),
        }
    }

    fn attach_in(&self, ifindex: u32, mode: AttachMode) -> io::Result<Attachment> {
        let what = format!("BPF_LINK_CREATE xdp ifindex {ifindex} {mode:?} mode");
        let fd = match self.link_create(ifindex, mode) {
            Ok(fd) => fd,
            Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EEXIST)) => {
                detach_legacy(ifindex).map_err(|d| {
                    context(
                        d,
                        format_args!("{what}: {e}; detaching the stale XDP program"),
                    )
                })?;
                self.link_create(ifindex, mode).map_err(|e| {
                    context(e, format_args!("{what} (after detaching a stale program)"))
                })?
            }
            Err(e) => return Err(context(e, &what)),
        };
        Ok(Attachment { fd, ifindex, mode })
    }

    fn link_create(&self, ifindex: u32, mode: AttachMode) -> io::Result<OwnedFd> {
        let mut attr = LinkCreateAttr {
            prog_fd: fd_u32(self.fd.as_fd()),
            target_ifindex: ifindex,
            attach_type: BPF_XDP,
            flags: mode.flags(),
        };
        // SAFETY: the attr holds no pointers; BPF_LINK_CREATE returns a new fd.
        unsafe { sys_bpf_fd(BPF_LINK_CREATE, &mut attr) }
    }
}

/// The program attached to an interface through a bpf link. Dropping it
/// closes the link's fd, which detaches the program (the kernel does the
/// same when the process dies, however it dies).
#[derive(Debug)]
pub struct Attachment {
    fd: OwnedFd,
    /// The interface the program is attached to.
    pub ifindex: u32,
    /// The mode it was attached in.
    pub mode: AttachMode,
}

impl Attachment {
    /// The link's file descriptor.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The index of the network interface called `name` (in the calling
/// thread's network namespace).
pub fn ifindex(name: &str) -> io::Result<u32> {
    let cname = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name has a NUL"))?;
    // SAFETY: `cname` is a valid NUL-terminated string that outlives the call.
    let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if index == 0 {
        let e = io::Error::last_os_error();
        return Err(context(e, format_args!("if_nametoindex({name})")));
    }
    Ok(index)
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xdp::netlink::set_legacy_xdp;
    use std::io::{BufRead, BufReader};
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    const SERVER: Ipv4Addr = Ipv4Addr::new(192, 168, 77, 200); // top bit set in a host-order load on both ends
    const LO: u16 = 7000;
    const HI: u16 = 7010;

    fn is_root() -> bool {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        if euid != 0 {
            eprintln!("skipped: needs root (bpf, netns)");
        }
        euid == 0
    }

    fn filter() -> UdpFilter {
        UdpFilter {
            ip: SERVER,
            ports: LO..=HI,
        }
    }

    /// Ethernet header with `ethertype`.
    fn eth(ethertype: u16) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02];
        f.extend_from_slice(&ethertype.to_be_bytes());
        f
    }

    /// IPv4 header (with `options`), `proto`, `dst`, flags/offset word.
    fn ipv4(proto: u8, dst: Ipv4Addr, frag: u16, options: &[u8], payload_len: usize) -> Vec<u8> {
        assert_eq!(options.len() % 4, 0);
        let ihl = 5 + options.len() / 4;
        let total = ihl * 4 + payload_len;
        let mut h = vec![0x40 | ihl as u8, 0];
        h.extend_from_slice(&(total as u16).to_be_bytes());
        h.extend_from_slice(&0x1234u16.to_be_bytes()); // id
        h.extend_from_slice(&frag.to_be_bytes());
        h.extend_from_slice(&[64, proto, 0, 0]); // ttl, proto, checksum
        h.extend_from_slice(&[10, 0, 0, 1]);
        h.extend_from_slice(&dst.octets());
        h.extend_from_slice(options);
        h
    }

    fn udp(dst_port: u16, payload: &[u8]) -> Vec<u8> {
        let mut u = Vec::new();
        u.extend_from_slice(&40000u16.to_be_bytes());
        u.extend_from_slice(&dst_port.to_be_bytes());
        u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        u.extend_from_slice(&[0, 0]);
        u.extend_from_slice(payload);
        u
    }

    /// A complete frame: Ethernet, IPv4 (DF set), UDP, 16 bytes payload.
    fn frame_with(proto: u8, dst: Ipv4Addr, frag: u16, options: &[u8], port: u16) -> Vec<u8> {
        let l4 = udp(port, &[0xab; 16]);
        let mut f = eth(0x0800);
        f.extend(ipv4(proto, dst, frag, options, l4.len()));
        f.extend(l4);
        f
    }

    fn udp_frame(dst: Ipv4Addr, port: u16) -> Vec<u8> {
        frame_with(17, dst, 0x4000, &[], port)
    }

    /// A program with an empty map that drops what it would redirect.
    fn decider(filter: &UdpFilter) -> Program {
        let map = XskMap::new(4).expect("xskmap");
        Program::load(filter, &map, XDP_DROP).expect("load")
    }

    #[test]
    fn instruction_encoding() {
        let i = load_u16(R5, R4, 2);
        // SAFETY: Insn is #[repr(C)], 8 bytes, no padding; reading it as
        // bytes is sound.
        let bytes: [u8; 8] = unsafe { std::mem::transmute(i) };
        assert_eq!(bytes[0], 0x69); // ldxh
        assert_eq!(bytes[1], 0x45); // src r4, dst r5 (little endian nibbles)
        assert_eq!(i16::from_ne_bytes([bytes[2], bytes[3]]), 2);
        let map = load_map_fd(R1, 7);
        assert_eq!((map[0].code, map[0].regs, map[0].imm), (0x18, 0x11, 7));
        assert_eq!(map[1], Insn::new(0, R0, R0, 0, 0));
        // Every jump lands inside the program.
        let p = assemble(&filter(), 3, XDP_PASS);
        for (at, i) in p.iter().enumerate() {
            let class = i.code & 0x07;
            let op = i.code & 0xf0;
            if (class == BPF_JMP || class == BPF_JMP32) && op != BPF_CALL && op != BPF_EXIT {
                let to = at as isize + 1 + i.off as isize;
                assert!(
                    to > at as isize && (to as usize) < p.len(),
                    "jump {at} -> {to}"
                );
            }
        }
        assert_eq!(p.last().map(|i| i.code), Some(BPF_JMP | BPF_EXIT));
    }

    #[test]
    fn decisions() {
        if !is_root() {
            return;
        }
        let p = decider(&filter());
        let run = |f: &[u8]| p.test_run(f).expect("test_run");
        let redirect = XDP_DROP;

        // Matching frames, at both ends of the range.
        assert_eq!(run(&udp_frame(SERVER, 7000)), redirect);
        assert_eq!(run(&udp_frame(SERVER, 7005)), redirect);
        assert_eq!(run(&udp_frame(SERVER, 7010)), redirect);
        // Exactly the headers, no payload.
        assert_eq!(run(&udp_frame(SERVER, 7000)[..42]), redirect);
        // With IP options (IHL 6 and IHL 15): the port is found after them.
        assert_eq!(
            run(&frame_with(17, SERVER, 0, &[1, 1, 1, 1], 7003)),
            redirect
        );
        assert_eq!(run(&frame_with(17, SERVER, 0, &[1; 40], 7003)), redirect);
        assert_eq!(
            run(&frame_with(17, SERVER, 0, &[1, 1, 1, 1], 6999)),
            XDP_PASS
        );
        // Options whose length would put a wanted port where the fixed-size
        // header has it: must not match (port read past the options).
        let mut opts = [1u8; 4];
        opts[2..4].copy_from_slice(&7000u16.to_be_bytes());
        assert_eq!(run(&frame_with(17, SERVER, 0, &opts, 80)), XDP_PASS);

        // Fragments: first (MF), later (offset != 0, no UDP header: the
        // bytes where the port would be are out of range), and a later
        // fragment cut right after the IP header.
        assert_eq!(run(&frame_with(17, SERVER, 0x2000, &[], 7000)), redirect);
        assert_eq!(run(&frame_with(17, SERVER, 0x2000, &[], 80)), redirect);
        assert_eq!(run(&frame_with(17, SERVER, 0x0010, &[], 80)), redirect);
        assert_eq!(run(&frame_with(17, SERVER, 0x2010, &[], 80)), redirect);
        assert_eq!(
            run(&frame_with(17, SERVER, 0x0010, &[], 80)[..34]),
            redirect
        );
        // ... but not fragments for other hosts or protocols.
        assert_eq!(
            run(&frame_with(
                17,
                Ipv4Addr::new(192, 168, 77, 2),
                0x2000,
                &[],
                7000
            )),
            XDP_PASS
        );
        assert_eq!(run(&frame_with(6, SERVER, 0x2000, &[], 7000)), XDP_PASS);

        // Other destinations and ports.
        assert_eq!(
            run(&udp_frame(Ipv4Addr::new(192, 168, 77, 2), 7000)),
            XDP_PASS
        );
        assert_eq!(
            run(&udp_frame(Ipv4Addr::new(200, 77, 168, 192), 7000)),
            XDP_PASS
        );
        assert_eq!(run(&udp_frame(SERVER, 6999)), XDP_PASS);
        assert_eq!(run(&udp_frame(SERVER, 7011)), XDP_PASS);
        assert_eq!(run(&udp_frame(SERVER, 0)), XDP_PASS);
        assert_eq!(run(&udp_frame(SERVER, 65535)), XDP_PASS);
        // Byte-swapped port (7000 = 0x1b58 -> 0x581b) must not match.
        assert_eq!(run(&udp_frame(SERVER, 0x581b)), XDP_PASS);

        // Other protocols: TCP, ICMP.
        assert_eq!(run(&frame_with(6, SERVER, 0x4000, &[], 7000)), XDP_PASS);
        assert_eq!(run(&frame_with(1, SERVER, 0x4000, &[], 7000)), XDP_PASS);
        // Bad IPv4 headers: IHL < 5, version 6 in an IPv4 EtherType.
        let mut f = udp_frame(SERVER, 7000);
        f[14] = 0x44;
        assert_eq!(run(&f), XDP_PASS);
        f[14] = 0x65;
        assert_eq!(run(&f), XDP_PASS);

        // ARP request.
        let mut arp = eth(0x0806);
        arp.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
        arp.extend_from_slice(&[0x02, 0, 0, 0, 0, 1, 10, 0, 0, 1]);
        arp.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
        arp.extend_from_slice(&SERVER.octets());
        assert_eq!(run(&arp), XDP_PASS);
        // IPv6 UDP to the port.
        let mut v6 = eth(0x86dd);
        v6.extend_from_slice(&[0x60, 0, 0, 0, 0, 24, 17, 64]);
        v6.extend_from_slice(&[0u8; 32]);
        v6.extend(udp(7000, &[0; 16]));
        assert_eq!(run(&v6), XDP_PASS);
        // VLAN-tagged copy of a matching frame.
        let good = udp_frame(SERVER, 7000);
        let mut vlan = eth(0x8100);
        vlan.extend_from_slice(&[0, 5]);
        vlan.extend_from_slice(&good[12..]);
        assert_eq!(run(&vlan), XDP_PASS);

        // Every truncation of a matching frame short of a full UDP header
        // passes; the kernel refuses runs shorter than an Ethernet header.
        let good = frame_with(17, SERVER, 0x4000, &[], 7000);
        for len in 0..42 {
            match p.test_run(&good[..len]) {
                Ok(action) => assert_eq!(action, XDP_PASS, "length {len}"),
                Err(e) => {
                    assert!(len < 14, "length {len}: {e}");
                    assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "length {len}: {e}");
                }
            }
        }
        // Same with options: the UDP header ends at 46.
        let good = frame_with(17, SERVER, 0, &[1, 1, 1, 1], 7000);
        for len in 14..46 {
            assert_eq!(run(&good[..len]), XDP_PASS, "length {len} with options");
        }
        assert_eq!(run(&good[..46]), redirect);
    }

    #[test]
    fn no_socket_action_and_full_range() {
        if !is_root() {
            return;
        }
        let map = XskMap::new(1).expect("xskmap");
        // Production setting: with no socket the frame goes to the stack.
        let p = Program::load(&filter(), &map, XDP_PASS).expect("load");
        assert_eq!(p.test_run(&udp_frame(SERVER, 7000)).expect("run"), XDP_PASS);

        let all = decider(&UdpFilter {
            ip: SERVER,
            ports: 0..=65535,
        });
        for port in [0, 1, 7000, 65535] {
            assert_eq!(
                all.test_run(&udp_frame(SERVER, port)).expect("run"),
                XDP_DROP
            );
        }
        let one = decider(&UdpFilter {
            ip: Ipv4Addr::new(10, 0, 0, 2),
            ports: 53..=53,
        });
        let ip = Ipv4Addr::new(10, 0, 0, 2);
        assert_eq!(one.test_run(&udp_frame(ip, 53)).expect("run"), XDP_DROP);
        assert_eq!(one.test_run(&udp_frame(ip, 52)).expect("run"), XDP_PASS);
        assert_eq!(one.test_run(&udp_frame(ip, 54)).expect("run"), XDP_PASS);
        #[allow(clippy::reversed_empty_ranges)]
        let none = decider(&UdpFilter { ip, ports: 10..=5 });
        for port in [0, 5, 7, 10, 65535] {
            assert_eq!(none.test_run(&udp_frame(ip, port)).expect("run"), XDP_PASS);
        }
    }

    #[test]
    fn verifier_accepts_various_filters() {
        if !is_root() {
            return;
        }
        let map = XskMap::new(64).expect("xskmap");
        for (ip, ports) in [
            (Ipv4Addr::new(10, 0, 0, 1), 9000..=9000),
            (Ipv4Addr::new(255, 255, 255, 255), 1..=1024),
            (Ipv4Addr::new(0, 0, 0, 0), 0..=65535),
            (Ipv4Addr::new(128, 0, 0, 1), 65535..=65535),
        ] {
            let f = UdpFilter { ip, ports };
            let p = Program::load(&f, &map, XDP_PASS).unwrap_or_else(|e| panic!("{f:?}: {e}"));
            assert!(p.id().expect("id") > 0);
        }
    }

    #[test]
    fn verifier_log_in_error() {
        if !is_root() {
            return;
        }
        // A program that reads r2 uninitialised: rejected, log reported.
        let bad = [load_u32(R0, R2, 0), exit()];
        let err = Program::load_insns(&bad, None).expect_err("must be rejected");
        assert_eq!(err.raw_os_error(), Some(libc::EACCES));
        let mut log = vec![0u8; LOG_SIZE];
        assert!(Program::load_insns(&bad, Some(&mut log)).is_err());
        let text = String::from_utf8_lossy(&log);
        assert!(text.contains("R2 !read_ok"), "log: {text}");
    }

    #[test]
    fn map_update_errors() {
        if !is_root() {
            return;
        }
        let map = XskMap::new(2).expect("xskmap");
        // Not an AF_XDP socket: the kernel refuses it.
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp socket");
        let err = map
            .set(0, udp.as_fd())
            .expect_err("non-xsk socket accepted");
        assert!(
            err.to_string().contains("BPF_MAP_UPDATE_ELEM xskmap[0]"),
            "{err}"
        );
        let err = map
            .set(5, udp.as_fd())
            .expect_err("out-of-range queue accepted");
        assert!(err.to_string().contains("xskmap[5]"), "{err}");
        assert!(XskMap::new(0).is_err());
    }

    #[test]
    fn ifindex_of_lo() {
        assert_eq!(ifindex("lo").expect("lo"), 1);
        assert!(ifindex("psp-no-such-if").is_err());
        assert!(ifindex("a\0b").is_err());
    }

    // --- real devices ------------------------------------------------------

    /// A network namespace with an up veth pair `va`/`vb`, deleted on drop.
    struct Netns {
        name: String,
    }

    impl Netns {
        fn new(tag: &str) -> Netns {
            let name = format!("psp-bpf-test-{}-{tag}", std::process::id());
            // Leftover from a crashed run with a recycled pid: ignore errors.
            let _ = Command::new("ip").args(["netns", "del", &name]).output();
            ip(&["netns", "add", &name]);
            let ns = Netns { name };
            ip(&[
                "-n", &ns.name, "link", "add", "va", "type", "veth", "peer", "name", "vb",
            ]);
            ip(&["-n", &ns.name, "link", "set", "va", "up"]);
            ip(&["-n", &ns.name, "link", "set", "vb", "up"]);
            ns
        }

        /// Runs `f` in a new thread that has entered the namespace, so the
        /// test harness's threads keep their namespace.
        fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
            run_in_netns(&self.name, f)
        }
    }

    impl Drop for Netns {
        fn drop(&mut self) {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.name])
                .status();
        }
    }

    fn ip(args: &[&str]) {
        let out = Command::new("ip").args(args).output().expect("run ip");
        assert!(
            out.status.success(),
            "ip {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn enter_netns(name: &str) {
        let file = std::fs::File::open(format!("/var/run/netns/{name}")).expect("open netns");
        // SAFETY: `file` is an open namespace fd for the duration of the
        // call; setns only changes the calling thread's network namespace.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns: {}", io::Error::last_os_error());
    }

    fn run_in_netns<T: Send + 'static>(name: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        let name = name.to_owned();
        let thread = std::thread::spawn(move || {
            enter_netns(&name);
            f()
        });
        match thread.join() {
            Ok(v) => v,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }

    /// Polls until nothing is attached to `ifindex` (detaching is
    /// asynchronous when a process dies); false after `limit`.
    fn gone_within(ifindex: u32, limit: Duration) -> bool {
        let start = Instant::now();
        loop {
            if attached_program_id(ifindex).expect("query").is_none() {
                return true;
            }
            if start.elapsed() > limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn attach_detach_and_replace_stale() {
        if !is_root() {
            return;
        }
        let ns = Netns::new("attach");
        ns.run(|| {
            let va = ifindex("va").expect("va");
            let map = XskMap::new(4).expect("xskmap");
            let prog = Program::load(&filter(), &map, XDP_PASS).expect("load");
            let id = prog.id().expect("id");
            assert_eq!(attached_program_id(va).expect("query"), None);

            // Link in driver mode; dropping the link detaches.
            let link = prog
                .attach(va, Some(AttachMode::Driver))
                .expect("attach drv");
            assert_eq!(link.mode, AttachMode::Driver);
            assert_eq!(link.ifindex, va);
            assert_eq!(attached_program_id(va).expect("query"), Some(id));
            // A second link on the same device and mode is refused (a live
            // link is never replaced).
            let other = Program::load(&filter(), &map, XDP_PASS).expect("load");
            let err = other
                .attach(va, Some(AttachMode::Driver))
                .expect_err("stacked");
            assert!(err.to_string().contains("BPF_LINK_CREATE"), "{err}");
            assert_eq!(attached_program_id(va).expect("query"), Some(id));
            drop(link);
            assert!(
                gone_within(va, Duration::from_secs(1)),
                "still attached after drop"
            );

            // Generic mode, and `None` picks driver mode on veth.
            let link = prog
                .attach(va, Some(AttachMode::Generic))
                .expect("attach skb");
            assert_eq!(attached_program_id(va).expect("query"), Some(id));
            drop(link);
            assert!(gone_within(va, Duration::from_secs(1)));
            let link = prog.attach(va, None).expect("attach auto");
            assert_eq!(link.mode, AttachMode::Driver);
            drop(link);
            assert!(gone_within(va, Duration::from_secs(1)));

            // A stale program attached the old way, in the same mode (EBUSY)
            // and in the other mode (EEXIST): replaced, not stacked.
            for stale_mode in [XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE] {
                let stale = Program::load(&filter(), &map, XDP_PASS).expect("load stale");
                let stale_id = stale.id().expect("id");
                set_legacy_xdp(va, stale.fd().as_raw_fd(), stale_mode).expect("legacy attach");
                drop(stale); // the device keeps it alive
                assert_eq!(attached_program_id(va).expect("query"), Some(stale_id));
                let link = prog
                    .attach(va, Some(AttachMode::Driver))
                    .expect("replace stale");
                assert_eq!(attached_program_id(va).expect("query"), Some(id));
                drop(link);
                assert!(
                    gone_within(va, Duration::from_secs(1)),
                    "left attached after replacing a stale program (mode {stale_mode})"
                );
            }
        });
    }

    const KILL_ENV: &str = "PSP_BPF_TEST_KILL_NETNS";

    /// Not a test by itself (hence ignored): `killed_server_leaves_nothing`
    /// re-executes the test binary to run it alone, and it attaches inside the
    /// namespace, reports, and waits to be killed.
    #[test]
    #[ignore = "the child process of killed_server_leaves_nothing, not a test"]
    fn attach_and_wait_helper() {
        let name = std::env::var(KILL_ENV).expect("run by killed_server_leaves_nothing");
        enter_netns(&name);
        let va = ifindex("va").expect("va");
        let map = XskMap::new(4).expect("xskmap");
        let prog = Program::load(&filter(), &map, XDP_PASS).expect("load");
        let _link = prog.attach(va, Some(AttachMode::Driver)).expect("attach");
        println!("ATTACHED {}", prog.id().expect("id"));
        std::thread::sleep(Duration::from_secs(30));
    }

    /// Kills the child on drop, so a failed assertion leaves no process.
    struct ChildGuard(Child);

    impl Drop for ChildGuard {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn killed_server_leaves_nothing() {
        if !is_root() {
            return;
        }
        let ns = Netns::new("kill");
        let name = ns.name.clone();
        ns.run(move || {
            let va = ifindex("va").expect("va");
            let exe = std::env::current_exe().expect("test binary");
            // The helper's test name: its module path without the crate's.
            let (_, module) = module_path!().split_once("::").expect("a crate");
            let helper = format!("{module}::attach_and_wait_helper");
            let child = Command::new(exe)
                .args(["--exact", &helper, "--ignored", "--nocapture"])
                .args(["--test-threads", "1"])
                .env(KILL_ENV, &name)
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn helper");
            let mut child = ChildGuard(child);
            let stdout = child.0.stdout.take().expect("stdout");
            let id: u32 = BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .find_map(|l| {
                    // libtest prints "test <name> ... " on the same line.
                    l.split_once("ATTACHED ")
                        .map(|(_, id)| id.trim().parse().expect("id"))
                })
                .expect("helper exited before attaching");
            assert_eq!(attached_program_id(va).expect("query"), Some(id));

            // SAFETY: kill(2) on our own child's pid; the child is not yet
            // reaped (ChildGuard waits for it later), so the pid is its.
            let r = unsafe { libc::kill(child.0.id() as libc::pid_t, libc::SIGKILL) };
            assert_eq!(r, 0);
            let status = child.0.wait().expect("wait");
            assert!(!status.success());
            assert!(
                gone_within(va, Duration::from_secs(1)),
                "program still attached 1 s after SIGKILL"
            );
        });
    }
}
