//! Perséphone's request protocols: how a server cuts a byte stream into
//! requests, which of the scheduler's request types each one is (and what
//! each type is expected to cost), what the server answers when it refuses
//! one, and what the key-value application runs for each command.
//!
//! A protocol is one file that implements [`Protocol`] ([`resp`]: Redis's
//! RESP2; [`memcache`]: memcached's text) and one line in [`PROTOCOLS`], the
//! registry that the server, the key-value application and the command line
//! read: `psp serve --protocol NAME` finds its entry there, registers the
//! protocol's types with their expected costs, frames and classifies requests
//! on the net thread and executes them on the workers. Adding a protocol
//! touches nothing else (`examples/line_protocol.rs` writes one).
//!
//! Everything here is computation over byte slices: no I/O, no threads, no
//! clock. Framing and classification never allocate; they run once per
//! request on the net thread. The in-memory store ([`db`]) keeps its own
//! locks; the sockets and buffers belong to the front end that calls in.

pub mod blocking;
pub mod busy;
pub mod clients;
pub mod commands;
pub mod commandstats;
pub mod db;
pub mod memcache;
pub mod pubsub;
pub mod resp;
pub mod store;

pub use store::{DynStore, KvStore};

/// What a classifier may ask a store about sizes, cheaply, on the network
/// thread: how many elements a key holds, how many keys there are. An
/// estimate for scheduling (the data may change before the command runs).
pub trait Sizes: Send + Sync {
    /// The elements of `key`'s value: a list's, hash's, set's or sorted
    /// set's length, 1 for a string, 0 for no key; `None` when it cannot be
    /// read without waiting (the network thread never waits for a lock:
    /// the command is then typed by name).
    fn elements(&self, key: &[u8]) -> Option<usize>;
    /// The keys in the store.
    fn keys(&self) -> usize;
    /// The type slot (`0..resp::SCRIPT_TYPES`) of the script whose SHA1 is
    /// `sha` (40 lowercase hex digits): the same for every request of one
    /// script ([`resp::SCRIPT_TYPES`]).
    fn script_slot(&self, _sha: &[u8; 40]) -> usize {
        0
    }
}

/// The size classes of the commands whose cost grows with their keys
/// ([`Protocol::classify_sized`]): up to `short` elements such a command is
/// typed with the cheap commands, up to `big` as a range, past it as big.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeBounds {
    /// Elements up to which a command is short.
    pub short: usize,
    /// Elements past which a command is big.
    pub big: usize,
}

impl SizeBounds {
    /// The range each bound may take (`psp serve --size-classes`):
    /// 1 <= short < big <= 10^9.
    pub const MAX: usize = 1_000_000_000;

    /// The bounds, checked.
    ///
    /// # Errors
    /// Out of range, or `short` not below `big` (one line).
    pub fn new(short: usize, big: usize) -> Result<Self, String> {
        if short == 0 || short >= big || big > Self::MAX {
            return Err(format!(
                "size classes must be SHORT,BIG with 1 <= SHORT < BIG <= {}, not {short},{big}",
                Self::MAX
            ));
        }
        Ok(Self { short, big })
    }
}

impl Default for SizeBounds {
    fn default() -> Self {
        Self {
            short: resp::RANGE_SHORT,
            big: resp::BIG_ELEMENTS,
        }
    }
}

/// A shared [`Sizes`] (the store's), comparable by identity: what a front
/// end's settings carry.
#[derive(Clone)]
pub struct StoreSizes(pub std::sync::Arc<dyn Sizes>);

impl PartialEq for StoreSizes {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for StoreSizes {}

impl std::fmt::Debug for StoreSizes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoreSizes")
    }
}

use Transport::{Tcp, Udp};
use db::{Db, DbConfig, Eviction};

/// Why the server answers a request itself (not through a handler): each
/// protocol words each refusal its own way ([`Protocol::refusal`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The policy's queue is full.
    Overloaded,
    /// Longer than the server's bound on a request.
    TooLarge,
    /// Not a request of the protocol (the connection is closed after it).
    Malformed,
    /// The classifier named no registered type.
    UnknownType,
    /// The handler could not read the request.
    BadBody,
    /// The handler failed.
    HandlerError,
    /// The server holds as many connections as it may.
    MaxClients,
}

/// A request protocol: framing, classification into the scheduler's request
/// types, refusals, and the key-value commands it carries.
///
/// One instance serves every connection and worker (it is shared as
/// `&'static dyn Protocol`), so per-connection state lives with the caller:
/// the classification state of [`Protocol::classify`], the sessions of
/// [`Protocol::execute_db`].
pub trait Protocol: Send + Sync {
    /// The scheduler's request types, in type-id order:
    /// [`Protocol::classify`] returns an index into them.
    fn types(&self) -> &'static [&'static str];

    /// The mean service time (µs) each of [`Protocol::types`] is declared
    /// with when a server registers them: where DARC starts, before it
    /// measures.
    fn type_mean_us(&self) -> &'static [f64];

    /// Length of the first complete request in `buf` (`None`: incomplete),
    /// refusing any request longer than `max` bytes. Never allocates.
    ///
    /// # Errors
    /// [`Refusal::Malformed`] (not a request of the protocol) or
    /// [`Refusal::TooLarge`]: the stream's framing is lost.
    fn request_len(&self, buf: &[u8], max: usize) -> Result<Option<usize>, Refusal>;

    /// Bytes at the start of `buf` the protocol skips between requests
    /// (Redis: empty lines and empty arrays); by default none.
    fn ignorable_prefix(&self, buf: &[u8]) -> usize {
        let _ = buf;
        0
    }

    /// The type of `req` (one complete request), the next request of a
    /// connection whose classification state is `state` (0 at its start):
    /// for protocols where a request's cost depends on the ones before it
    /// (Redis's `EXEC` runs what `MULTI` queued). A value of
    /// `types().len()` or more is a type the server does not know. Never
    /// allocates.
    fn classify(&self, req: &[u8], state: &mut u32) -> u16;

    /// [`classify`](Self::classify) where the store's sizes are known: a
    /// protocol whose commands' cost grows with what they touch (Redis's
    /// HGETALL, SMEMBERS, LRANGE, KEYS) types each by the elements it will
    /// walk, read from `sizes` (a small HGETALL stays with the GETs; one
    /// of a 100,000-field hash is big). By default the same as `classify`.
    fn classify_sized(
        &self,
        req: &[u8],
        state: &mut u32,
        sizes: &dyn Sizes,
        bounds: SizeBounds,
    ) -> u16 {
        let _ = (sizes, bounds);
        self.classify(req, state)
    }

    /// Appends the protocol's reply for `refusal` to `out`.
    fn refusal(&self, refusal: Refusal, out: &mut Vec<u8>);

    /// The types whose requests may run without a bound the server sets
    /// (Redis's Lua scripts run until they end or `SCRIPT KILL` stops
    /// them): never run on the thread that reads the input
    /// (`RuntimeConfig::open_ended_types`). None by default.
    fn open_ended_types(&self) -> &'static [u16] {
        &[]
    }

    /// Whether `req` (one complete request) may answer with a block reply
    /// ([`blocking`]): it then runs as a job of its own, never batched with
    /// the commands around it. None by default.
    fn may_block(&self, req: &[u8]) -> bool {
        let _ = req;
        false
    }

    /// A count that changes whenever a parked command may have something
    /// to take ([`blocking::wakes`]); a front end admits its parked
    /// commands again when it moves. Constant by default (nothing blocks).
    fn wake_generation(&self) -> u64 {
        0
    }

    /// The name a service running the protocol's commands reports (`redis`).
    fn service_name(&self) -> &'static str;

    /// The protocol's commands, for humans (`Redis commands`).
    fn commands_about(&self) -> &'static str;

    /// The in-memory store's bound and eviction for the protocol, from the
    /// ones asked (`None`: not given): by default no bound and Redis's
    /// default eviction.
    ///
    /// # Errors
    /// A setting the protocol does not take (why, one line).
    fn db_config(
        &self,
        max_memory: Option<usize>,
        eviction: Option<Eviction>,
    ) -> Result<DbConfig, &'static str> {
        Ok(DbConfig {
            max_memory: max_memory.unwrap_or(0),
            eviction: eviction.unwrap_or_default(),
        })
    }

    /// What the store does when full under `eviction`, for humans.
    fn eviction_about(&self, eviction: Eviction) -> &'static str {
        eviction.name()
    }

    /// Runs one complete request against the in-memory store `db` for the
    /// connection `session` (its state in `sessions`, if the protocol keeps
    /// any), appending the reply to `out`; `preempt` is the request's
    /// preemption point, to be called only while no lock is held.
    ///
    /// # Errors
    /// `req` is not exactly one request of the protocol (why, one line).
    fn execute_db(
        &self,
        req: &[u8],
        db: &Db,
        sessions: &commands::Sessions,
        session: u64,
        out: &mut Vec<u8>,
        preempt: &mut dyn FnMut(),
    ) -> Result<(), &'static str>;

    /// Runs one complete request against `store` (RocksDB, in the
    /// key-value application), appending the reply to `out`; `scratch` is a
    /// buffer the caller reuses across requests.
    ///
    /// # Errors
    /// `req` is not exactly one request of the protocol (why, one line).
    fn execute_store(
        &self,
        req: &[u8],
        store: &dyn KvStore,
        out: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
    ) -> Result<(), &'static str>;
}

/// A protocol is shown as the service it runs (`Protocol(redis)`).
impl std::fmt::Debug for dyn Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Protocol({})", self.service_name())
    }
}

/// How a protocol's requests reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A TCP connection: a byte stream, framed by the protocol.
    Tcp,
    /// UDP datagrams in memcached's frame header, one request each.
    Udp,
}

/// One line of the registry: a protocol under the name `--protocol` takes.
#[derive(Debug, Clone, Copy)]
pub struct ProtocolEntry {
    /// The name on the command line (`resp`).
    pub name: &'static str,
    /// What it is, for the command line's help and messages (`memcached text
    /// over TCP`).
    pub about: &'static str,
    /// How its requests arrive.
    pub transport: Transport,
    /// The protocol.
    pub protocol: &'static dyn Protocol,
}

impl ProtocolEntry {
    /// The protocol `protocol` over `transport`, as `name`.
    pub const fn new(
        name: &'static str,
        about: &'static str,
        transport: Transport,
        protocol: &'static dyn Protocol,
    ) -> Self {
        Self {
            name,
            about,
            transport,
            protocol,
        }
    }
}

/// Entries are told apart by name (a name is registered once).
impl PartialEq for ProtocolEntry {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.transport == other.transport
    }
}

impl Eq for ProtocolEntry {}

/// The registry: every protocol `psp serve --protocol` takes (besides this
/// project's own datagram protocol, `psp`, whose header carries the type).
/// A new protocol is one file and one line here.
pub static PROTOCOLS: &[ProtocolEntry] = &[
    ProtocolEntry::new(
        "resp",
        "Redis's RESP2/RESP3 over TCP: redis-cli, redis-benchmark and client libraries talk to it",
        Tcp,
        &resp::Resp,
    ),
    ProtocolEntry::new(
        "memcache",
        "memcached text over TCP",
        Tcp,
        &memcache::Memcache,
    ),
    ProtocolEntry::new(
        "memcache-udp",
        "memcached over UDP, or AF_XDP with --datapath xdp",
        Udp,
        &memcache::Memcache,
    ),
];

/// The registered protocol named `name` (as the command line spells it).
pub fn find(name: &str) -> Option<&'static ProtocolEntry> {
    find_in(PROTOCOLS, name)
}

/// The protocol named `name` in `registry` (a registry of one's own, as the
/// examples build).
pub fn find_in<'r>(registry: &'r [ProtocolEntry], name: &str) -> Option<&'r ProtocolEntry> {
    registry.iter().find(|e| e.name == name)
}

/// `items` as a sentence's list: `a, b or c`.
pub fn or_list<S: AsRef<str>>(items: &[S]) -> String {
    match items {
        [] => String::new(),
        [one] => one.as_ref().to_string(),
        [head @ .., last] => {
            let head: Vec<&str> = head.iter().map(AsRef::as_ref).collect();
            format!("{} or {}", head.join(", "), last.as_ref())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_registered_once_and_types_have_costs() {
        for (i, e) in PROTOCOLS.iter().enumerate() {
            assert!(
                PROTOCOLS[..i].iter().all(|o| o.name != e.name),
                "{} registered twice",
                e.name
            );
            assert_eq!(
                e.protocol.types().len(),
                e.protocol.type_mean_us().len(),
                "{}",
                e.name
            );
            assert!(!e.protocol.types().is_empty(), "{}", e.name);
            assert_eq!(find(e.name), Some(e));
        }
        assert_eq!(find("psp"), None);
    }

    #[test]
    fn lists_read_as_sentences() {
        assert_eq!(or_list::<&str>(&[]), "");
        assert_eq!(or_list(&["a"]), "a");
        assert_eq!(or_list(&["a", "b", "c"]), "a, b or c");
    }
}
