//! rtnetlink, for the legacy XDP attachment only: attach or detach a
//! program through `RTM_SETLINK`, and ask which program an interface holds
//! (`RTM_GETLINK`). Hand-written messages over a netlink socket, no library.
//!
//! What this module must not do: anything on the hot path, or attach by
//! default (the loader in [`super::bpf`] attaches through a bpf link, which
//! the kernel detaches when the server's last descriptor closes).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::bpf::{XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE, context};

const NLMSG_HDR_LEN: usize = 16;
const IFINFOMSG_LEN: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_CAPPED: u16 = 0x100;
const NLM_F_ACK_TLVS: u16 = 0x200;
const NLMSGERR_ATTR_MSG: u16 = 1;
const NETLINK_EXT_ACK: libc::c_int = 11;
const NLA_F_NESTED: u16 = 0x8000;
const NLA_TYPE_MASK: u16 = 0x3fff;
const RTM_GETLINK: u16 = 18;
const RTM_SETLINK: u16 = 19;
const IFLA_XDP: u16 = 43;
const IFLA_XDP_FD: u16 = 1;
const IFLA_XDP_FLAGS: u16 = 3;
const IFLA_XDP_PROG_ID: u16 = 4;
const IFLA_XDP_SKB_PROG_ID: u16 = 5;
const IFLA_XDP_DRV_PROG_ID: u16 = 6;
const IFLA_XDP_HW_PROG_ID: u16 = 7;

/// Appends a netlink attribute (header, payload, padding to 4 bytes).
fn push_attr(buf: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(payload);
    buf.resize(buf.len().next_multiple_of(4), 0);
}

/// Iterates over the attributes in `buf` as `(type without flags, payload)`;
/// stops at the first malformed one.
fn attrs(mut buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = usize::from(u16::from_ne_bytes(buf.get(0..2)?.try_into().ok()?));
        let ty = u16::from_ne_bytes(buf.get(2..4)?.try_into().ok()?);
        let payload = buf.get(4..len)?;
        buf = buf.get(len.next_multiple_of(4)..).unwrap_or(&[]);
        Some((ty & NLA_TYPE_MASK, payload))
    })
}

fn read_u32(buf: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(buf.get(at..at + 4)?.try_into().ok()?))
}

fn read_u16(buf: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(buf.get(at..at + 2)?.try_into().ok()?))
}

/// The sequence number of every request (one request per socket).
const SEQ: u32 = 1;

/// Sends one `rtnetlink` request about interface `ifindex` (an `ifinfomsg`
/// followed by `attrs`) and waits for its acknowledgement. Returns the
/// payload of the reply message (after its `nlmsghdr`), if there was one.
fn rtnl_request(msg_type: u16, ifindex: u32, attrs: &[u8]) -> io::Result<Option<Vec<u8>>> {
    let name = match msg_type {
        RTM_GETLINK => "RTM_GETLINK",
        RTM_SETLINK => "RTM_SETLINK",
        _ => "rtnetlink",
    };
    let what = format!("{name} ifindex {ifindex}");
    let sock = open_rtnl_socket(&what)?;
    let msg = request_message(msg_type, ifindex, attrs);
    // SAFETY: `msg` is a live buffer of `msg.len()` bytes, only read.
    let sent = unsafe {
        libc::send(
            sock.as_raw_fd(),
            msg.as_ptr() as *const libc::c_void,
            msg.len(),
            0,
        )
    };
    if sent < 0 {
        return Err(context(
            io::Error::last_os_error(),
            format_args!("{what}: send"),
        ));
    }
    await_ack(&sock, &what)
}

/// A `NETLINK_ROUTE` socket that asks for the kernel's error strings and
/// never waits forever for a reply (both best effort).
fn open_rtnl_socket(what: &str) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call with constant arguments.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if raw < 0 {
        return Err(context(
            io::Error::last_os_error(),
            format_args!("{what}: socket"),
        ));
    }
    // SAFETY: `raw` is a fresh socket fd that nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };

    let one: libc::c_int = 1;
    // SAFETY: `one` is a live c_int and the length passed is its size.
    unsafe {
        libc::setsockopt(
            raw,
            libc::SOL_NETLINK,
            NETLINK_EXT_ACK,
            &one as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    let timeout = libc::timeval {
        tv_sec: 5,
        tv_usec: 0,
    };
    // SAFETY: `timeout` is a live timeval and the length passed is its size.
    unsafe {
        libc::setsockopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &timeout as *const libc::timeval as *const libc::c_void,
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    Ok(sock)
}

/// The request: `nlmsghdr` + `ifinfomsg` + attributes.
fn request_message(msg_type: u16, ifindex: u32, attrs: &[u8]) -> Vec<u8> {
    let mut msg = Vec::with_capacity(NLMSG_HDR_LEN + IFINFOMSG_LEN + attrs.len());
    msg.extend_from_slice(&0u32.to_ne_bytes()); // nlmsg_len, set below
    msg.extend_from_slice(&msg_type.to_ne_bytes());
    msg.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    msg.extend_from_slice(&SEQ.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes()); // nlmsg_pid: the kernel fills it
    msg.push(libc::AF_UNSPEC as u8); // ifi_family
    msg.push(0); // pad
    msg.extend_from_slice(&0u16.to_ne_bytes()); // ifi_type
    msg.extend_from_slice(&(ifindex as i32).to_ne_bytes()); // ifi_index
    msg.extend_from_slice(&0u32.to_ne_bytes()); // ifi_flags
    msg.extend_from_slice(&0u32.to_ne_bytes()); // ifi_change
    msg.extend_from_slice(attrs);
    let len = msg.len() as u32;
    msg[0..4].copy_from_slice(&len.to_ne_bytes());
    msg
}

/// Reads replies to the request until its acknowledgement (or `NLMSG_DONE`);
/// returns the last other reply's payload, if any.
fn await_ack(sock: &OwnedFd, what: &str) -> io::Result<Option<Vec<u8>>> {
    let mut reply = None;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: `buf` is a live, exclusively borrowed buffer of
        // `buf.len()` bytes; recv writes at most that many.
        let n = unsafe {
            libc::recv(
                sock.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                0,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(context(e, format_args!("{what}: recv")));
        }
        let mut data = &buf[..n as usize];
        while data.len() >= NLMSG_HDR_LEN {
            let bad = || io::Error::new(io::ErrorKind::InvalidData, format!("{what}: bad reply"));
            let len = read_u32(data, 0).ok_or_else(bad)? as usize;
            let ty = read_u16(data, 4).ok_or_else(bad)?;
            let flags = read_u16(data, 6).ok_or_else(bad)?;
            let seq = read_u32(data, 8).ok_or_else(bad)?;
            let body = data.get(NLMSG_HDR_LEN..len).ok_or_else(bad)?;
            data = data.get(len.next_multiple_of(4)..).unwrap_or(&[]);
            if seq != SEQ {
                continue;
            }
            match ty {
                NLMSG_ERROR => {
                    let errno = read_u32(body, 0).ok_or_else(bad)? as i32;
                    if errno == 0 {
                        return Ok(reply);
                    }
                    let e = io::Error::from_raw_os_error(-errno);
                    return Err(match ext_ack_message(body, flags) {
                        Some(m) => context(e, format_args!("{what} ({m})")),
                        None => context(e, what),
                    });
                }
                NLMSG_DONE => return Ok(reply),
                _ => reply = Some(body.to_vec()),
            }
        }
    }
}

/// The kernel's error string in an extended ack (`NLMSGERR_ATTR_MSG`).
fn ext_ack_message(body: &[u8], flags: u16) -> Option<String> {
    if flags & NLM_F_ACK_TLVS == 0 {
        return None;
    }
    // error (4 bytes) + the request's header, plus its payload unless capped.
    let echoed = if flags & NLM_F_CAPPED != 0 {
        NLMSG_HDR_LEN
    } else {
        (read_u32(body, 4)? as usize).next_multiple_of(4)
    };
    let tlvs = body.get(4 + echoed..)?;
    attrs(tlvs)
        .find(|&(ty, _)| ty == NLMSGERR_ATTR_MSG)
        .map(|(_, m)| {
            let end = m.iter().position(|&b| b == 0).unwrap_or(m.len());
            String::from_utf8_lossy(&m[..end]).into_owned()
        })
}

/// Attaches (`prog_fd >= 0`) or detaches (`prog_fd == -1`) an XDP program
/// the legacy way: `RTM_SETLINK` with `IFLA_XDP { IFLA_XDP_FD, IFLA_XDP_FLAGS }`.
pub(super) fn set_legacy_xdp(ifindex: u32, prog_fd: RawFd, flags: u32) -> io::Result<()> {
    let mut nest = Vec::new();
    push_attr(&mut nest, IFLA_XDP_FD, &prog_fd.to_ne_bytes());
    push_attr(&mut nest, IFLA_XDP_FLAGS, &flags.to_ne_bytes());
    let mut attrs = Vec::new();
    push_attr(&mut attrs, IFLA_XDP | NLA_F_NESTED, &nest);
    rtnl_request(RTM_SETLINK, ifindex, &attrs).map(drop)
}

/// Detaches whatever program was attached the legacy way, in driver and in
/// generic mode (a mode with no program is a no-op for the kernel; a mode
/// held by a bpf link fails with `EBUSY` and is left alone).
pub(super) fn detach_legacy(ifindex: u32) -> io::Result<()> {
    set_legacy_xdp(ifindex, -1, XDP_FLAGS_DRV_MODE)?;
    set_legacy_xdp(ifindex, -1, XDP_FLAGS_SKB_MODE)
}

/// The id of the XDP program attached to interface `ifindex` (in the calling
/// thread's network namespace), by any means, or `None`.
pub fn attached_program_id(ifindex: u32) -> io::Result<Option<u32>> {
    let reply = rtnl_request(RTM_GETLINK, ifindex, &[])?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("RTM_GETLINK ifindex {ifindex}: no reply"),
        )
    })?;
    let link_attrs = reply.get(IFINFOMSG_LEN..).unwrap_or(&[]);
    let Some((_, xdp)) = attrs(link_attrs).find(|&(ty, _)| ty == IFLA_XDP) else {
        return Ok(None);
    };
    // IFLA_XDP_PROG_ID is given when one mode is in use; with several, only
    // the per-mode ids are.
    let mut ids = [None; 4];
    for (ty, payload) in attrs(xdp) {
        let slot = match ty {
            IFLA_XDP_PROG_ID => 0,
            IFLA_XDP_DRV_PROG_ID => 1,
            IFLA_XDP_SKB_PROG_ID => 2,
            IFLA_XDP_HW_PROG_ID => 3,
            _ => continue,
        };
        ids[slot] = read_u32(payload, 0).filter(|&id| id != 0);
    }
    Ok(ids.into_iter().flatten().next())
}
