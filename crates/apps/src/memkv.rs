//! The in-memory key-value services behind `psp serve --protocol resp`,
//! `memcache` and `memcache-udp` (their default store, as in the servers
//! they stand in for): one [`psp_proto::db::Db`] shared by every worker, with
//! the protocol's commands ([`psp_proto::Protocol::execute_db`]: Redis's
//! [`psp_proto::commands`], memcached's [`psp_proto::memcache::execute_db`])
//! over it.
//!
//! A background thread removes expired keys every 100 ms (a few shards a
//! pass, as Redis's active expiry); it holds only a weak reference and ends
//! with the service.
//!
//! Handlers are fiber-safe: a command holds its shard locks only between
//! preemption points, never across one (see the `db` module), so a
//! preempted request holds no lock.

use std::sync::{Arc, Weak};
use std::time::Duration;

use psp_proto::Protocol;
use psp_proto::commands::Sessions;
use psp_proto::db::{Db, DbConfig, EXPIRE_SHARDS_PER_CYCLE};
use psp_runtime::{Handler, HandlerError, RequestContext};

use crate::Service;

/// How often the active expiry runs.
const EXPIRE_EVERY: Duration = Duration::from_millis(100);

/// The in-memory store's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemConfig {
    /// The database's memory bound and eviction.
    pub db: DbConfig,
    /// Connection slots the sessions table holds (the TCP front end's
    /// `--tcp-max-connections`): connections past it share slots, and one
    /// that takes a shared slot starts the other's session afresh.
    pub connections: usize,
}

impl Default for MemConfig {
    /// No memory bound; as many session slots as the TCP front end's
    /// default connection limit (1,024).
    fn default() -> Self {
        Self {
            db: DbConfig::default(),
            connections: 1024,
        }
    }
}

/// The in-memory store and the protocol's commands over it.
#[derive(Debug)]
pub struct MemService {
    db: Arc<Db>,
    sessions: Arc<Sessions>,
    protocol: &'static dyn Protocol,
}

impl MemService {
    /// An empty store, with its expiry thread started.
    ///
    /// # Errors
    /// The expiry thread cannot be spawned.
    pub fn start(protocol: &'static dyn Protocol, cfg: MemConfig) -> std::io::Result<Self> {
        let db = Arc::new(Db::new(cfg.db));
        let weak: Weak<Db> = Arc::downgrade(&db);
        std::thread::Builder::new()
            .name("psp-expire".into())
            .spawn(move || {
                while let Some(db) = {
                    std::thread::sleep(EXPIRE_EVERY);
                    weak.upgrade()
                } {
                    db.expire_cycle(EXPIRE_SHARDS_PER_CYCLE);
                }
            })?;
        Ok(Self {
            db,
            sessions: Arc::new(Sessions::new(cfg.connections.max(1))),
            protocol,
        })
    }

    /// The database (tests and reports read it).
    pub fn db(&self) -> &Arc<Db> {
        &self.db
    }
}

impl Service for MemService {
    fn app(&self) -> &'static str {
        self.protocol.service_name()
    }

    fn handler(&self, _worker: usize) -> Box<dyn Handler> {
        Box::new(MemHandler {
            db: self.db.clone(),
            sessions: self.sessions.clone(),
            protocol: self.protocol,
        })
    }

    fn sizes(&self) -> Option<psp_proto::StoreSizes> {
        Some(psp_proto::StoreSizes(self.db.clone()))
    }

    fn describe(&self) -> String {
        let c = self.db.config();
        let bound = if c.max_memory == 0 {
            "no memory bound".to_string()
        } else {
            format!(
                "at most {} MiB, {} when full",
                c.max_memory >> 20,
                self.protocol.eviction_about(c.eviction)
            )
        };
        let what = self.protocol.commands_about();
        format!("{what} over the in-memory store ({bound})")
    }

    /// What the store holds and what it dropped (evictions, expiries).
    fn finish(&self) -> Option<String> {
        let st = self.db.stats();
        Some(format!(
            "store: {} keys ({} with a deadline), {:.1} MiB of data, {} evicted for memory, {} expired",
            st.keys,
            st.volatile,
            st.used as f64 / f64::from(1 << 20),
            st.evicted,
            st.expired
        ))
    }
}

/// A worker's (or a request slot's) handler.
struct MemHandler {
    db: Arc<Db>,
    sessions: Arc<Sessions>,
    protocol: &'static dyn Protocol,
}

impl Handler for MemHandler {
    fn handle(&mut self, ctx: &mut RequestContext<'_>) -> Result<(), HandlerError> {
        let (preempt, body, session) = (&ctx.preempt, ctx.body, ctx.session);
        crate::answer_panics(ctx.response, |response| {
            self.protocol
                .execute_db(
                    body,
                    &self.db,
                    &self.sessions,
                    session,
                    response,
                    &mut || preempt.point(),
                )
                .map_err(HandlerError::BadBody)
        })
    }

    /// Locks are held only between preemption points (module doc).
    fn fiber_safe(&self) -> bool {
        true
    }
}
