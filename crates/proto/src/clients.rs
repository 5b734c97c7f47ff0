//! The process's open connections as Redis's `CLIENT LIST` and `CLIENT
//! KILL` see them: each connection's peer and local address, its socket
//! and when it opened, by session id (`index << 32 | generation`, unique in
//! the process, as [`crate::pubsub`]'s listeners).
//!
//! The TCP front end, which owns the sockets, records a connection when it
//! accepts it ([`Clients::opened`]) and forgets it when it closes
//! ([`Clients::closed`]); `CLIENT KILL` runs on a worker and only marks
//! connections ([`Clients::kill`]); the front end closes the marked ones
//! it owns on its next pass ([`Clients::take_kills`]).
//!
//! What this module must not do: know sockets, or be touched per request
//! (only when a connection opens or closes, and by the CLIENT commands).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard};
use std::time::Instant;

/// The process's connections (one table for every server in the process:
/// session ids are unique in it).
pub fn registry() -> &'static Clients {
    static REGISTRY: LazyLock<Clients> = LazyLock::new(Clients::default);
    &REGISTRY
}

/// One open connection.
#[derive(Debug, Clone, Copy)]
pub struct Conn {
    /// The peer's address (`addr=`).
    pub addr: SocketAddr,
    /// The server's address it came to (`laddr=`).
    pub laddr: SocketAddr,
    /// Its socket (`fd=`).
    pub fd: i32,
    /// When it was accepted (`age=`).
    pub since: Instant,
    /// The front end that owns it ([`next_server`]): `CLIENT LIST` and
    /// `KILL` see only their own server's connections.
    pub server: u32,
}

/// A number for a new front end, unique in the process.
pub fn next_server() -> u32 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Open connections and the kills not yet carried out.
#[derive(Debug, Default)]
pub struct Clients {
    state: Mutex<State>,
    /// A kill waits for its front end.
    pending: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    open: HashMap<u64, Conn>,
    killed: Vec<u64>,
}

impl Clients {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding it left plain maps: still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Connection `session` was accepted.
    pub fn opened(&self, session: u64, conn: Conn) {
        self.state().open.insert(session, conn);
    }

    /// Connection `session` closed (a kill still marked for it is void).
    pub fn closed(&self, session: u64) {
        let mut s = self.state();
        s.open.remove(&session);
        s.killed.retain(|&k| k != session);
    }

    /// The front end that owns connection `session`, while it is open.
    pub fn server_of(&self, session: u64) -> Option<u32> {
        self.state().open.get(&session).map(|c| c.server)
    }

    /// The open connections, by session id.
    pub fn list(&self) -> Vec<(u64, Conn)> {
        let mut v: Vec<(u64, Conn)> = self.state().open.iter().map(|(&s, &c)| (s, c)).collect();
        v.sort_unstable_by_key(|&(s, _)| s);
        v
    }

    /// Marks every open connection `pick` accepts for closing; returns how
    /// many were marked.
    pub fn kill(&self, pick: impl Fn(u64, &Conn) -> bool) -> usize {
        let mut s = self.state();
        let State { open, killed } = &mut *s;
        let before = killed.len();
        for (&session, conn) in open.iter() {
            if pick(session, conn) && !killed.contains(&session) {
                killed.push(session);
            }
        }
        let n = killed.len() - before;
        if n > 0 {
            self.pending.store(true, Ordering::Release);
        }
        n
    }

    /// Whether a kill waits (one atomic load: the front end asks each pass).
    pub fn pending(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    /// Hands `close` each marked connection that `owns` says is this front
    /// end's, and forgets those marks; others stay for their own front end.
    pub fn take_kills(&self, owns: impl Fn(u64) -> bool, mut close: impl FnMut(u64)) {
        let mut s = self.state();
        let mut mine = Vec::new();
        s.killed.retain(|&k| {
            let m = owns(k);
            if m {
                mine.push(k);
            }
            !m
        });
        if s.killed.is_empty() {
            self.pending.store(false, Ordering::Release);
        }
        drop(s);
        for k in mine {
            close(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(port: u16) -> Conn {
        Conn {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            laddr: SocketAddr::from(([127, 0, 0, 1], 6379)),
            fd: 7,
            since: Instant::now(),
            server: 1,
        }
    }

    #[test]
    fn a_kill_reaches_only_the_front_end_that_owns_the_connection() {
        let c = Clients::default();
        c.opened(1 << 32 | 5, conn(1000));
        c.opened(2 << 32 | 6, conn(1001));
        assert_eq!(c.kill(|_, k| k.addr.port() == 1001), 1);
        // Marked twice: still one kill.
        assert_eq!(c.kill(|_, k| k.addr.port() == 1001), 0);
        assert!(c.pending());
        let mut closed = Vec::new();
        c.take_kills(|s| s as u32 == 5, |s| closed.push(s));
        assert!(closed.is_empty() && c.pending(), "not this front end's");
        c.take_kills(|s| s as u32 == 6, |s| closed.push(s));
        assert_eq!(closed, [2 << 32 | 6]);
        assert!(!c.pending());
        c.closed(2 << 32 | 6);
        assert_eq!(c.list().len(), 1);
    }

    #[test]
    fn a_connection_closed_before_its_kill_is_carried_out_is_forgotten() {
        let c = Clients::default();
        c.opened(3 << 32, conn(1002));
        assert_eq!(c.kill(|_, _| true), 1);
        c.closed(3 << 32);
        let mut closed = Vec::new();
        c.take_kills(|_| true, |s| closed.push(s));
        assert!(closed.is_empty() && !c.pending());
    }
}
