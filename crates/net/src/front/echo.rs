//! The baseline: a plain multi-threaded UDP echo server written the ordinary way
//! (one `SO_REUSEPORT` socket per thread, blocking `recv_from` / `send_to`, the
//! kernel spreading flows over the sockets). It speaks just enough of the
//! protocol to be measured by the same client: it sets the status byte of each
//! datagram to OK and sends it back.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::protocol::{HEADER_LEN, Status};
use crate::udp::bind_udp;

/// A running echo server.
pub struct EchoServer {
    local_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    echoed: Arc<AtomicU64>,
}

/// What the echo server sends back for `datagram`: the same bytes, marked
/// as an OK response when it carries a header (so that `psp load` counts it).
#[inline]
pub fn turn_around(datagram: &mut [u8]) {
    if datagram.len() >= HEADER_LEN {
        datagram[1] = Status::Ok as u8;
    }
}

impl EchoServer {
    /// Starts `threads` threads, each with its own socket on `addr` (port 0: one
    /// free port shared by all).
    ///
    /// # Errors
    /// The address cannot be bound.
    pub fn start(addr: SocketAddr, threads: usize) -> io::Result<EchoServer> {
        let first = bind_udp(addr, true)?;
        let local_addr = first.local_addr()?;
        let mut sockets = vec![first];
        for _ in 1..threads.max(1) {
            sockets.push(bind_udp(local_addr, true)?);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let echoed = Arc::new(AtomicU64::new(0));
        let mut handles = Vec::new();
        for (i, socket) in sockets.into_iter().enumerate() {
            // The read timeout only bounds how late a thread notices `stop`.
            socket.set_read_timeout(Some(Duration::from_millis(20)))?;
            let (stop, echoed) = (stop.clone(), echoed.clone());
            handles.push(
                std::thread::Builder::new()
                    .name(format!("psp-echo-{i}"))
                    .spawn(move || {
                        let mut buf = [0u8; 65_536];
                        let mut n_echoed = 0u64;
                        while !stop.load(Ordering::Relaxed) {
                            let Ok((n, peer)) = socket.recv_from(&mut buf) else {
                                continue;
                            };
                            turn_around(&mut buf[..n]);
                            if socket.send_to(&buf[..n], peer).is_ok() {
                                n_echoed += 1;
                            }
                        }
                        echoed.fetch_add(n_echoed, Ordering::Relaxed);
                    })?,
            );
        }
        Ok(EchoServer {
            local_addr,
            stop,
            threads: handles,
            echoed,
        })
    }

    /// Where clients send.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The flag that stops the server.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Stops the threads; returns how many datagrams they echoed.
    pub fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.threads {
            let _ = h.join();
        }
        self.echoed.load(Ordering::Relaxed)
    }
}
