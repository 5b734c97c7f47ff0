//! The AF_XDP datapath end to end, in two network namespaces joined by a veth
//! pair that each test makes (scripts/netns.sh) and removes: `psp serve`'s
//! engine on `xdp` answering load clients on `udp` and on `xdp`, the kernel
//! still answering ARP and ping, garbage frames counted and harmless, every
//! UMEM frame back at the end, the XDP program gone once the server stops.
//! Needs root (CI runs as root); without it each test says so and passes.

use crate::common;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use psp_apps::SpinConfig;
use psp_apps::spin::SpinService;
use psp_net::client::{LoadConfig, LoadReport, Progress, run_load};
use psp_net::protocol;
use psp_net::server::DatapathKind;
use psp_net::xdp::frame::{self, Endpoint};
use psp_net::xdp::{XdpConfig, bpf, device};
use psp_net::{ClassifierKind, Server, ServerConfig, ServerReport};
use psp_runtime::{IdleStrategy, RuntimeConfig, Spinner};
use psp_workload::Workload;

use common::Topology;

const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
const PORT: u16 = 7000;

fn spinner() -> Spinner {
    static S: OnceLock<Spinner> = OnceLock::new();
    *S.get_or_init(|| Spinner::calibrate(Duration::from_millis(20)))
}

fn workload() -> Workload {
    Workload::fixed("xdp-test", &[("short", 5.0, 0.9), ("long", 50.0, 0.1)])
}

fn server_addr() -> SocketAddr {
    SocketAddr::from((SERVER_IP, PORT))
}

fn start_server(t: &Topology, policy: &str) -> Server {
    // The address is fixed, and the kernel frees the previous test's socket
    // and queue asynchronously (later still on a busy machine): a start that
    // finds them taken is tried again, for up to 10 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match try_start_server(t, policy) {
            Ok(s) => return s,
            Err(e) if std::time::Instant::now() < deadline => {
                eprintln!("the AF_XDP server: {e}; trying again");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("the AF_XDP server starts: {e}"),
        }
    }
}

fn try_start_server(t: &Topology, policy: &str) -> Result<Server, psp_net::ServerError> {
    device::in_namespace(&t.server_ns, || {
        Server::start(ServerConfig {
            addr: server_addr(),
            metrics: None,
            runtime: RuntimeConfig {
                workers: 2,
                queue_capacity: 256,
                drain_timeout: Duration::from_secs(5),
                raise_priority: false,
                // Threads sleep when idle: never more spinning threads than
                // the 2 cores (spinning ones starved the client beside a busy
                // core, and requests waited past the queue's bound).
                idle: IdleStrategy::SpinPark {
                    spin_us: 0,
                    park_us: 1_000,
                },
                ..RuntimeConfig::default()
            },
            policy: policy.parse().unwrap(),
            types: workload().type_infos(),
            classifier: ClassifierKind::Header,
            app_classifier: None,
            handlers: psp_apps::handler_factory(
                Arc::new(SpinService::with_spinner(
                    spinner(),
                    &SpinConfig {
                        max_service_ns: 1_000_000_000,
                    },
                )),
                None,
            ),
            datapath: DatapathKind::Xdp(XdpConfig::default()),
            protocol: Default::default(),
        })
    })
    .expect("joins the server namespace")
}

fn load(t: &Topology, datapath: DatapathKind, rps: f64, ms: u64) -> LoadReport {
    load_flows(t, datapath, rps, ms, 4)
}

fn load_flows(t: &Topology, datapath: DatapathKind, rps: f64, ms: u64, flows: usize) -> LoadReport {
    let cfg = LoadConfig {
        server: server_addr(),
        workload: workload(),
        bodies: psp_runtime::EncoderSource::synthetic(),
        rate_rps: rps,
        duration_ns: ms * 1_000_000,
        warmup_ns: 0,
        seed: 3,
        flows,
        timeout: Duration::from_millis(500),
        keep_samples: false,
        raise_priority: false,
        workers: 2,
        datapath,
    };
    device::in_namespace(&t.client_ns, || run_load(&cfg, &Progress::default()))
        .expect("joins the client namespace")
        .expect("the client runs")
}

/// Every request of the schedule answered exactly once, nothing refused as
/// malformed. Most are served; a few may be answered OVERLOADED: with the
/// 2 cores busy elsewhere (a build beside the suite), the workers fall
/// behind and a 256-deep queue sheds, which is still an answer, once.
fn assert_all_answered(r: &LoadReport, what: &str) {
    assert_eq!(r.sent, r.scheduled, "{what}: sent");
    assert_eq!(r.send_errors, 0, "{what}: send errors");
    assert_eq!(
        r.responses[0] + r.responses[1],
        r.scheduled,
        "{what}: OK and OVERLOADED responses {:?}",
        r.responses
    );
    assert!(
        r.responses[0] * 2 >= r.scheduled,
        "{what}: fewer than half served: {:?}",
        r.responses
    );
    assert_eq!(r.responses[2..], [0, 0, 0], "{what}: errors");
    assert_eq!(r.late, 0, "{what}: late");
    assert_eq!(
        r.rejected,
        Default::default(),
        "{what}: refused replies {:?}",
        r.rejected
    );
}

/// Every datagram the server read ends in one counter, every request in one
/// outcome, and every UMEM frame is where the datapath says.
fn assert_balanced(s: &ServerReport) {
    let (n, c) = (&s.net, &s.dispatcher.counts);
    assert_eq!(
        n.truncated + n.bad_request + n.unknown_type + c.arrived,
        n.received,
        "datagrams: {n:?} {c:?}"
    );
    assert_eq!(c.arrived, c.shed + c.admitted, "requests: {c:?}");
    assert_eq!(c.admitted, c.completed, "admitted: {c:?}");
    let x = n.xdp.as_ref().expect("an AF_XDP report");
    assert_eq!(x.frames_leaked, 0, "{x:?}");
    assert_eq!(x.frames_in_tx, 0, "{x:?}");
    assert_eq!(
        x.frames_with_tokens + x.frames_lent_for_rx + x.frames_free_for_tx,
        x.frames_total,
        "{x:?}"
    );
    assert_eq!(x.dropped_total(), n.malformed_frames);
}

fn program_attached(t: &Topology) -> bool {
    let dev = t.server_dev.clone();
    device::in_namespace(&t.server_ns, move || {
        bpf::attached_program_id(bpf::ifindex(&dev).unwrap()).unwrap()
    })
    .unwrap()
    .is_some()
}

#[test]
fn an_xdp_server_answers_udp_and_xdp_clients_once_each_and_gets_every_frame_back() {
    let _one = crate::common::one_at_a_time();
    let Some(t) = Topology::up("a") else { return };
    let server = start_server(&t, "darc");
    assert!(program_attached(&t), "the XDP program is attached");
    let udp = load(&t, DatapathKind::Udp, 4000.0, 300);
    assert_all_answered(&udp, "udp client");
    let xdp = load(&t, DatapathKind::Xdp(XdpConfig::default()), 4000.0, 300);
    assert_all_answered(&xdp, "xdp client");

    // The kernel still answers ping and ARP (the program passes them on):
    // with the client's neighbour entry gone, ping needs an ARP reply.
    let ping = |t: &Topology| t.in_client(&["ping", "-c", "1", "-W", "2", "10.77.0.1"]);
    assert!(ping(&t).status.success(), "ping through the kernel");
    let del = t.in_client(&["ip", "neigh", "del", "10.77.0.1", "dev", &t.client_dev]);
    assert!(
        del.status.success(),
        "{}",
        String::from_utf8_lossy(&del.stderr)
    );
    assert!(ping(&t).status.success(), "ping after ARP");
    let neigh = t.in_client(&["ip", "neigh", "show", "10.77.0.1", "dev", &t.client_dev]);
    let neigh = String::from_utf8_lossy(&neigh.stdout);
    assert!(neigh.contains("lladdr"), "ARP resolved the server: {neigh}");

    let report = server.stop().expect("the server drains");
    assert_balanced(&report);
    let x = report.net.xdp.as_ref().unwrap();
    assert!(!x.zero_copy, "a veth binds in copy mode");
    assert_eq!(x.attach_mode, "driver", "veth runs XDP in its driver");
    assert_eq!(
        report.dispatcher.counts.completed,
        udp.scheduled + xdp.scheduled
    );
    assert!(x.transmitted >= report.dispatcher.counts.completed);
    assert!(!program_attached(&t), "the XDP program is gone after stop");
}

/// A raw AF_PACKET socket on the client's end: sends frames as written.
struct RawSender {
    fd: std::os::fd::OwnedFd,
    ifindex: i32,
}

impl RawSender {
    fn open(dev: &str) -> RawSender {
        use std::os::fd::FromRawFd;
        // SAFETY: socket(2) with constant arguments; checked below.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW,
                (libc::ETH_P_ALL as u16).to_be() as i32,
            )
        };
        assert!(
            fd >= 0,
            "AF_PACKET socket: {}",
            std::io::Error::last_os_error()
        );
        RawSender {
            // SAFETY: a fresh descriptor.
            fd: unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) },
            ifindex: bpf::ifindex(dev).unwrap() as i32,
        }
    }

    fn send(&self, frame: &[u8]) {
        use std::os::fd::AsRawFd;
        // SAFETY: plain data; all-zero is valid.
        let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sa.sll_family = libc::AF_PACKET as u16;
        sa.sll_ifindex = self.ifindex;
        sa.sll_halen = 6;
        sa.sll_addr[..6].copy_from_slice(&frame[..6]);
        // SAFETY: `frame` and `sa` are live for the call.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&raw const sa).cast(),
                std::mem::size_of_val(&sa) as u32,
            )
        };
        assert_eq!(
            r,
            frame.len() as isize,
            "{}",
            std::io::Error::last_os_error()
        );
    }
}

#[test]
fn garbage_frames_are_counted_by_reason_and_harmless() {
    let _one = crate::common::one_at_a_time();
    let Some(t) = Topology::up("g") else { return };
    let server = start_server(&t, "c-fcfs");
    let (server_dev, client_dev) = (t.server_dev.clone(), t.client_dev.clone());
    let server_mac = device::in_namespace(&t.server_ns, move || device::mac_of(&server_dev))
        .unwrap()
        .unwrap();
    let expected = device::in_namespace(&t.client_ns, move || {
        let me = Endpoint {
            mac: device::mac_of(&client_dev).unwrap(),
            ip: Ipv4Addr::new(10, 77, 0, 2),
            port: 41_000,
        };
        let to = Endpoint {
            mac: server_mac,
            ip: SERVER_IP,
            port: PORT,
        };
        let valid = |body: &[u8], dst: &Endpoint| {
            let mut req = Vec::new();
            protocol::encode_request(&mut req, 0, 1, body);
            let mut f = vec![0u8; frame::HEADERS_LEN + req.len()];
            f[frame::HEADERS_LEN..].copy_from_slice(&req);
            frame::write_udp4(&mut f, &me, dst, req.len());
            f
        };
        let raw = RawSender::open(&client_dev);
        let good = valid(&5000u64.to_le_bytes(), &to);
        // (frame, reason it must be dropped for)
        let mut garbage: Vec<(Vec<u8>, &str)> = Vec::new();
        // Cut inside the payload: the IP length claims more than arrived.
        for cut in frame::HEADERS_LEN..good.len() {
            garbage.push((good[..cut].to_vec(), "truncated"));
        }
        let mutate = |at: usize, v: u8| {
            let mut f = good.clone();
            f[at] = v;
            f
        };
        garbage.push((mutate(24, good[24] ^ 0xff), "bad_ip_checksum"));
        garbage.push((
            mutate(good.len() - 1, good[good.len() - 1] ^ 1),
            "bad_udp_checksum",
        ));
        // UDP length below its header, and beyond the IP payload.
        let mut short_udp = good.clone();
        short_udp[38..40].copy_from_slice(&7u16.to_be_bytes());
        garbage.push((short_udp, "bad_udp_length"));
        let mut long_udp = good.clone();
        long_udp[38..40].copy_from_slice(&2000u16.to_be_bytes());
        garbage.push((long_udp, "bad_udp_length"));
        // IP total length too short for a UDP header.
        let mut long_ip = good.clone();
        long_ip[16..18].copy_from_slice(&24u16.to_be_bytes());
        long_ip[24..26].copy_from_slice(&[0, 0]);
        let c = frame::ipv4_header_checksum(&long_ip[14..34]);
        long_ip[24..26].copy_from_slice(&c.to_be_bytes());
        garbage.push((long_ip, "bad_ip_header"));
        // Fragments (more-fragments flag; an offset).
        for flags in [0x20u8, 0x00] {
            let mut frag = good.clone();
            frag[20] = flags;
            frag[21] = if flags == 0 { 8 } else { 0 };
            frag[24..26].copy_from_slice(&[0, 0]);
            let c = frame::ipv4_header_checksum(&frag[14..34]);
            frag[24..26].copy_from_slice(&c.to_be_bytes());
            garbage.push((frag, "fragment"));
        }
        for (f, _) in &garbage {
            raw.send(f);
        }
        // Passed to the kernel, never seen by the datapath: headers cut
        // short, another port, another protocol.
        for cut in 0..frame::HEADERS_LEN {
            raw.send(&good[..cut.max(14)]);
        }
        raw.send(&valid(
            b"",
            &Endpoint {
                port: PORT + 1,
                ..to
            },
        ));
        let mut icmp = good.clone();
        icmp[23] = 1;
        raw.send(&icmp);
        // And a good one, answered.
        raw.send(&good);
        let mut want = std::collections::BTreeMap::new();
        for (_, why) in &garbage {
            *want.entry(why.to_string()).or_insert(0u64) += 1;
        }
        want
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // Still serving.
    let after = load(&t, DatapathKind::Udp, 2000.0, 200);
    assert_all_answered(&after, "udp client after the garbage");
    let report = server.stop().expect("the server drains");
    assert_balanced(&report);
    let x = report.net.xdp.as_ref().unwrap();
    for (why, n) in &x.dropped {
        assert_eq!(
            *n,
            expected.get(why).copied().unwrap_or(0),
            "{why}: {:?}",
            x.dropped
        );
    }
    assert_eq!(x.wrong_destination, 0);
    assert_eq!(
        report.dispatcher.counts.completed,
        after.scheduled + 1,
        "the good raw frame was served too"
    );
}

/// With two queues per veth end, the kernel client's flows arrive on both:
/// the server binds a socket on each (one net thread serving both) and
/// answers every request.
#[test]
fn a_socket_per_queue_serves_flows_spread_over_two_queues() {
    let _one = crate::common::one_at_a_time();
    let Some(t) = Topology::up_with_queues("q", 2) else {
        return;
    };
    let server = start_server(&t, "darc");
    let udp = load_flows(&t, DatapathKind::Udp, 4000.0, 300, 16);
    assert_all_answered(&udp, "udp client, 16 flows");
    let xdp = load_flows(&t, DatapathKind::Xdp(XdpConfig::default()), 4000.0, 300, 16);
    assert_all_answered(&xdp, "xdp client, 16 flows");
    let report = server.stop().expect("the server drains");
    assert_balanced(&report);
    assert_eq!(report.net.xdp.as_ref().unwrap().queues, 2);
}
