//! `psp echo`: the plain echo server, the throughput baseline `psp netbench`
//! measures psp serve against (udp: blocking sockets, one per thread; xdp:
//! each datagram turned around in its frame). No runtime, no policy.

use std::io::Write as _;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use psp_net::echo::EchoServer;
use psp_net::server::DatapathKind;

use super::{XdpArgs, parse_addr, stop_on_signals};
use crate::limits;

/// `psp echo` arguments.
#[derive(Args)]
pub struct EchoArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7001")]
    address: String,
    /// Threads, each with its own SO_REUSEPORT socket (udp; the xdp echo
    /// server runs one thread over every queue).
    #[arg(long, allow_hyphen_values = true, default_value_t = 2)]
    threads: usize,
    /// Datapath: udp or xdp (AF_XDP on the interface that holds --address;
    /// turns each datagram around in the frame it arrived in).
    #[arg(long, default_value = "udp")]
    datapath: String,
    #[command(flatten)]
    xdp: XdpArgs,
    /// Stop by itself after this long (default: run until SIGINT or SIGTERM).
    #[arg(long, allow_hyphen_values = true)]
    duration: Option<String>,
}

/// Runs `psp echo`.
pub fn echo(a: EchoArgs) -> Result<()> {
    let addr = parse_addr(&a.address, "--address")?;
    limits::ECHO_THREADS.check(a.threads)?;
    let duration = a
        .duration
        .as_deref()
        .map(|d| limits::SERVE_DURATION.parse(d))
        .transpose()?;
    let datapath = a.xdp.datapath(&a.datapath)?;
    let (stop, finish, line): (_, Box<dyn FnOnce() -> u64>, String) = match &datapath {
        DatapathKind::Udp => {
            let s = EchoServer::start(addr, a.threads)
                .with_context(|| format!("cannot listen on {addr}"))?;
            let line = format!(
                "psp echo: listening on udp://{} with {} threads (SO_REUSEPORT, blocking recv_from/send_to)",
                s.local_addr(),
                a.threads
            );
            (s.stop_flag(), Box::new(move || s.stop()), line)
        }
        DatapathKind::Xdp(x) => {
            let s = psp_net::xdp::XdpEcho::start(x, addr)
                .with_context(|| format!("cannot listen on {addr} (AF_XDP)"))?;
            let line = format!(
                "psp echo: listening on xdp://{} (one thread, every queue, replies written over the request's frame)",
                s.local_addr()
            );
            (s.stop_flag(), Box::new(move || s.stop()), line)
        }
        DatapathKind::Tcp(..) => bail!("psp echo serves udp or xdp"),
    };
    stop_on_signals(&stop)?;
    println!("{line}");
    let _ = std::io::stdout().flush();
    let started = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("echoed {} datagrams", finish());
    Ok(())
}
