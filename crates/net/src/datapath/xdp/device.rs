//! What the AF_XDP datapath must know about the link it runs on: which
//! interface holds an address, its MAC and queue count, and a neighbour's
//! MAC from the kernel's table. Read once at start, never per packet.

use std::io;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

/// A network interface and the IPv4 address and prefix it has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Its name.
    pub name: String,
    /// Its index.
    pub ifindex: u32,
    /// The address.
    pub ip: Ipv4Addr,
    /// The prefix length.
    pub prefix: u8,
}

/// Every IPv4 address of every interface (getifaddrs).
///
/// # Errors
/// The kernel refuses the listing.
pub fn interfaces() -> io::Result<Vec<Interface>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `head` is a valid out-pointer; freed below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` walks the list getifaddrs returned, still allocated.
        let ifa = unsafe { &*p };
        p = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_netmask.is_null() {
            continue;
        }
        // SAFETY: a non-null ifa_addr points to a sockaddr of its family.
        if i32::from(unsafe { (*ifa.ifa_addr).sa_family }) != libc::AF_INET {
            continue;
        }
        // SAFETY: the family says both are sockaddr_in.
        let (a, m) = unsafe {
            (
                *(ifa.ifa_addr as *const libc::sockaddr_in),
                *(ifa.ifa_netmask as *const libc::sockaddr_in),
            )
        };
        // SAFETY: ifa_name is a NUL-terminated string of the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: ifa_name is a NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(ifa.ifa_name) };
        out.push(Interface {
            name,
            ifindex,
            ip: Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
            prefix: u32::from_be(m.sin_addr.s_addr).count_ones() as u8,
        });
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// The interface that holds `ip` itself (a server's bind address).
///
/// # Errors
/// No interface has the address.
pub fn holding(ip: Ipv4Addr) -> io::Result<Interface> {
    interfaces()?.into_iter().find(|i| i.ip == ip).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::AddrNotAvailable,
            format!("no interface has the address {ip} (AF_XDP binds to a local interface's address; scripts/netns.sh makes one)"),
        )
    })
}

/// The interface whose subnet holds `peer` (a client's way to its server).
///
/// # Errors
/// `peer` is on no directly attached subnet.
pub fn towards(peer: Ipv4Addr) -> io::Result<Interface> {
    interfaces()?
        .into_iter()
        .filter(|i| !i.ip.is_loopback())
        .find(|i| {
            let mask = u32::MAX.checked_shl(32 - u32::from(i.prefix)).unwrap_or(0);
            u32::from(i.ip) & mask == u32::from(peer) & mask
        })
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                format!("{peer} is on no directly attached IPv4 subnet (AF_XDP writes link-layer frames: the server must be a neighbour)"),
            )
        })
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.trim().split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// An `ifreq` ioctl on a throwaway socket: answered by the calling
/// thread's network namespace (a thread that joined another namespace with
/// `setns` sees that one's devices; `/sys` would still show the mount's).
fn ifreq_ioctl(
    name: &str,
    request: libc::Ioctl,
    data: *mut libc::c_void,
) -> io::Result<libc::ifreq> {
    // SAFETY: plain data; all-zero is valid.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.len() >= ifr.ifr_name.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("interface name too long: {name}"),
        ));
    }
    for (d, s) in ifr.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    if !data.is_null() {
        ifr.ifr_ifru.ifru_data = data.cast();
    }
    let sock = std::net::UdpSocket::bind("0.0.0.0:0")?;
    // SAFETY: `ifr` is a live ifreq (and `data`, when given, the live
    // argument the request reads and writes).
    let r = unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&sock), request, &mut ifr) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ifr)
}

/// The interface's hardware address.
///
/// # Errors
/// The interface does not exist or has no Ethernet address.
pub fn mac_of(name: &str) -> io::Result<[u8; 6]> {
    let ifr = ifreq_ioctl(name, libc::SIOCGIFHWADDR, std::ptr::null_mut())
        .map_err(|e| io::Error::new(e.kind(), format!("hardware address of {name}: {e}")))?;
    // SAFETY: SIOCGIFHWADDR filled the hardware-address member.
    let sa = unsafe { ifr.ifr_ifru.ifru_hwaddr };
    if sa.sa_family != libc::ARPHRD_ETHER {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{name} is not an Ethernet interface"),
        ));
    }
    let mut mac = [0u8; 6];
    for (m, b) in mac.iter_mut().zip(sa.sa_data) {
        *m = b as u8;
    }
    Ok(mac)
}

/// The interface's receive queues (ethtool's channel count: dedicated RX
/// channels plus combined ones), 1 when the driver does not say.
pub fn rx_queues(name: &str) -> u32 {
    // struct ethtool_channels: cmd, then max_{rx,tx,other,combined}, then
    // {rx,tx,other,combined}_count.
    let mut ch = [0u32; 9];
    ch[0] = 0x3c; // ETHTOOL_GCHANNELS
    match ifreq_ioctl(name, libc::SIOCETHTOOL, ch.as_mut_ptr().cast()) {
        Ok(_) => (ch[5] + ch[8]).max(1),
        Err(_) => 1,
    }
}

/// `ip`'s hardware address in the kernel's neighbour table on `dev`
/// (the ARP table), if it is complete.
pub fn neighbour(ip: Ipv4Addr, dev: &str) -> Option<[u8; 6]> {
    // thread-self: the calling thread's network namespace.
    let text = std::fs::read_to_string("/proc/thread-self/net/arp").ok()?;
    for line in text.lines().skip(1) {
        // IP address, HW type, Flags, HW address, Mask, Device
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 6 && f[0].parse() == Ok(ip) && f[5] == dev {
            // ATF_COM (0x2): the entry is complete.
            let flags = u32::from_str_radix(f[2].trim_start_matches("0x"), 16).unwrap_or(0);
            if flags & 0x2 != 0 {
                return parse_mac(f[3]);
            }
        }
    }
    None
}

/// `ip`'s hardware address, asking the kernel to resolve it (a datagram to
/// the discard port through the kernel's stack triggers ARP) when the table
/// does not have it yet.
///
/// # Errors
/// No answer within `timeout`.
pub fn resolve(ip: Ipv4Addr, dev: &str, timeout: Duration) -> io::Result<[u8; 6]> {
    let deadline = Instant::now() + timeout;
    let probe = std::net::UdpSocket::bind("0.0.0.0:0")?;
    loop {
        if let Some(mac) = neighbour(ip, dev) {
            return Ok(mac);
        }
        if Instant::now() >= deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no neighbour entry for {ip} on {dev} (no ARP reply within {timeout:?})"),
            ));
        }
        let _ = probe.send_to(&[], (ip, 9));
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `f` on a thread that joined the network namespace `ns` (as `ip
/// netns` names it: `/var/run/netns/NS`); threads `f` starts stay there.
/// How one process runs a server and a client on the two ends of a veth
/// pair.
///
/// # Errors
/// The namespace does not exist or cannot be joined (needs root).
pub fn in_namespace<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> io::Result<T> {
    let file = std::fs::File::open(format!("/var/run/netns/{ns}"))
        .map_err(|e| io::Error::new(e.kind(), format!("network namespace {ns}: {e}")))?;
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: setns on a live namespace descriptor changes only this
            // thread's network namespace.
            if unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&file), libc::CLONE_NEWNET) }
                < 0
            {
                let e = io::Error::last_os_error();
                return Err(io::Error::new(e.kind(), format!("joining {ns}: {e}")));
            }
            Ok(f())
        })
        .join()
        .map_err(|_| io::Error::other(format!("a thread in {ns} panicked")))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_parse_and_refuse_garbage() {
        assert_eq!(parse_mac("02:00:0a:4d:00:01\n"), Some([2, 0, 10, 77, 0, 1]));
        for bad in ["", "02:00", "02:00:0a:4d:00:01:07", "zz:00:0a:4d:00:01"] {
            assert_eq!(parse_mac(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_loopback_interface_has_no_ethernet_address_and_one_queue() {
        assert!(mac_of("lo").is_err());
        assert!(mac_of("no-such-device0").is_err());
        assert_eq!(rx_queues("lo"), 1);
    }

    #[test]
    fn the_loopback_interface_is_found_by_its_address() {
        let lo = holding(Ipv4Addr::LOCALHOST).unwrap();
        assert_eq!(lo.prefix, 8);
        assert!(lo.ifindex > 0);
        assert!(holding(Ipv4Addr::new(192, 0, 2, 77)).is_err());
    }
}
