//! Redis's pub/sub between connections: who listens to which channel and
//! pattern, and the messages published to each listener that its
//! connection has not written yet.
//!
//! The commands run on workers like any other (SUBSCRIBE and its kin
//! record a connection here, PUBLISH appends its message to the outbox of
//! every connection that listens, in RESP2 or RESP3 form); the TCP front
//! end, which owns the sockets, moves each outbox into its connection's
//! output on its next pass ([`PubSub::drain`]: after the replies of that
//! pass, so a connection's subscription confirmation leaves before any
//! message on it), and forgets a connection when it closes
//! ([`PubSub::forget`]). A connection is its session id
//! (`index << 32 | generation`), unique in the process.
//!
//! An outbox holds at most [`OUTBOX_LIMIT`] bytes (Redis's
//! `client-output-buffer-limit pubsub` hard limit): past it the outbox is
//! emptied and marked, and the front end closes the connection (a
//! subscriber that does not read is disconnected; the server keeps its
//! memory).
//!
//! What this module must not do: know sockets, or hold its lock while
//! anything but its own maps is touched.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard};

/// Bytes a listener's messages may take before its connection is closed
/// (Redis's default `client-output-buffer-limit pubsub 32mb`).
pub const OUTBOX_LIMIT: usize = 32 << 20;

/// The process's listeners (one table for every server in the process:
/// session ids are unique in it).
pub fn registry() -> &'static PubSub {
    static REGISTRY: LazyLock<PubSub> = LazyLock::new(PubSub::default);
    &REGISTRY
}

/// Listeners and their outboxes.
#[derive(Debug, Default)]
pub struct PubSub {
    state: Mutex<State>,
    /// An outbox holds something (or overflowed) since the last drain.
    pending: AtomicBool,
    /// Connections that listen to anything: the front end's look at a
    /// closing connection costs no lock while none does.
    listeners: AtomicUsize,
}

#[derive(Debug, Default)]
struct State {
    channels: HashMap<Box<[u8]>, Vec<u64>>,
    patterns: HashMap<Box<[u8]>, Vec<u64>>,
    listeners: HashMap<u64, Listener>,
}

#[derive(Debug, Default)]
struct Listener {
    resp3: bool,
    channels: Vec<Box<[u8]>>,
    patterns: Vec<Box<[u8]>>,
    outbox: Vec<u8>,
    /// Messages in `outbox`.
    waiting: u64,
    overflowed: bool,
}

impl Listener {
    fn count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }
}

/// What a connection's outbox held at a drain.
#[derive(Debug, PartialEq, Eq)]
pub enum Outbox<'a> {
    /// `count` messages to write, in order.
    Messages {
        /// Their bytes.
        bytes: &'a [u8],
        /// How many.
        count: u64,
    },
    /// More than [`OUTBOX_LIMIT`] waited: close the connection.
    Overflowed,
}

/// Which of the two kinds a subscription is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// SUBSCRIBE: a channel by name.
    Channel,
    /// PSUBSCRIBE: channels matching a glob pattern.
    Pattern,
}

impl PubSub {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Subscribes connection `session` (replies in RESP3 if `resp3`) to
    /// `name`; returns its subscriptions (channels and patterns) after.
    pub fn subscribe(&self, session: u64, resp3: bool, kind: Kind, name: &[u8]) -> usize {
        let mut s = self.lock();
        let st = &mut *s;
        let l = st.listeners.entry(session).or_insert_with(|| {
            self.listeners.fetch_add(1, Ordering::Relaxed);
            Listener::default()
        });
        l.resp3 = resp3;
        let (mine, table) = match kind {
            Kind::Channel => (&mut l.channels, &mut st.channels),
            Kind::Pattern => (&mut l.patterns, &mut st.patterns),
        };
        if !mine.iter().any(|c| &**c == name) {
            mine.push(name.into());
            table.entry(name.into()).or_default().push(session);
        }
        l.count()
    }

    /// Unsubscribes `session` from `name`; returns its subscriptions after.
    pub fn unsubscribe(&self, session: u64, kind: Kind, name: &[u8]) -> usize {
        let mut s = self.lock();
        let st = &mut *s;
        let Some(l) = st.listeners.get_mut(&session) else {
            return 0;
        };
        let (mine, table) = match kind {
            Kind::Channel => (&mut l.channels, &mut st.channels),
            Kind::Pattern => (&mut l.patterns, &mut st.patterns),
        };
        if let Some(i) = mine.iter().position(|c| &**c == name) {
            mine.swap_remove(i);
            remove_from(table, name, session);
        }
        l.count()
    }

    /// The channels (or patterns) `session` listens to, in no order.
    pub fn subscriptions(&self, session: u64, kind: Kind) -> Vec<Box<[u8]>> {
        let s = self.lock();
        s.listeners
            .get(&session)
            .map_or_else(Vec::new, |l| match kind {
                Kind::Channel => l.channels.clone(),
                Kind::Pattern => l.patterns.clone(),
            })
    }

    /// Publishes `message` on `channel`: appended to the outbox of every
    /// connection that listens to it or to a pattern it matches (one
    /// message per match, as Redis sends). Returns how many were sent.
    pub fn publish(&self, channel: &[u8], message: &[u8]) -> usize {
        let mut s = self.lock();
        let st = &mut *s;
        let mut sent = 0;
        if let Some(subs) = st.channels.get(channel) {
            for id in subs {
                if let Some(l) = st.listeners.get_mut(id) {
                    push(l, None, channel, message);
                    sent += 1;
                }
            }
        }
        for (pattern, subs) in &st.patterns {
            if !crate::commands::glob_match(pattern, channel) {
                continue;
            }
            for id in subs {
                if let Some(l) = st.listeners.get_mut(id) {
                    push(l, Some(pattern), channel, message);
                    sent += 1;
                }
            }
        }
        if sent > 0 {
            self.pending.store(true, Ordering::Release);
        }
        sent
    }

    /// Whether a drain would find anything (one atomic load).
    #[inline]
    pub fn pending(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    /// Hands each connection's waiting messages to `deliver` (its session
    /// and what waits), which returns whether the connection is its own
    /// (one table serves every server of the process); the outboxes taken
    /// are emptied, and an overflowed connection taken is forgotten. Only
    /// a front end calls it, once a pass when [`pending`](Self::pending).
    pub fn drain(&self, mut deliver: impl FnMut(u64, Outbox<'_>) -> bool) {
        if !self.pending.swap(false, Ordering::AcqRel) {
            return;
        }
        let mut s = self.lock();
        let mut overflowed = Vec::new();
        let mut left = false;
        for (&id, l) in s.listeners.iter_mut() {
            if l.overflowed {
                if deliver(id, Outbox::Overflowed) {
                    overflowed.push(id);
                } else {
                    left = true;
                }
            } else if !l.outbox.is_empty() {
                let m = Outbox::Messages {
                    bytes: &l.outbox,
                    count: l.waiting,
                };
                if deliver(id, m) {
                    l.outbox.clear();
                    l.waiting = 0;
                } else {
                    left = true;
                }
            }
        }
        for id in overflowed {
            forget_locked(&mut s, &self.listeners, id);
        }
        if left {
            // Another server's connections: its own pass takes them.
            self.pending.store(true, Ordering::Release);
        }
    }

    /// Forgets connection `session` (closed): its subscriptions and what
    /// waited for it.
    pub fn forget(&self, session: u64) {
        if self.listeners.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut s = self.lock();
        forget_locked(&mut s, &self.listeners, session);
    }

    /// Whether connection `session` listens to anything.
    pub fn listens(&self, session: u64) -> bool {
        self.listeners.load(Ordering::Relaxed) > 0
            && self
                .lock()
                .listeners
                .get(&session)
                .is_some_and(|l| l.count() > 0)
    }

    /// PUBSUB CHANNELS: the channels with a listener, those matching
    /// `pattern` if given.
    pub fn channels(&self, pattern: Option<&[u8]>) -> Vec<Box<[u8]>> {
        let s = self.lock();
        s.channels
            .keys()
            .filter(|c| pattern.is_none_or(|p| crate::commands::glob_match(p, c)))
            .cloned()
            .collect()
    }

    /// PUBSUB NUMSUB: the listeners of `channel`.
    pub fn numsub(&self, channel: &[u8]) -> usize {
        self.lock().channels.get(channel).map_or(0, Vec::len)
    }

    /// PUBSUB NUMPAT: patterns with a listener.
    pub fn numpat(&self) -> usize {
        self.lock().patterns.len()
    }
}

fn remove_from(table: &mut HashMap<Box<[u8]>, Vec<u64>>, name: &[u8], session: u64) {
    if let Some(subs) = table.get_mut(name) {
        subs.retain(|&s| s != session);
        if subs.is_empty() {
            table.remove(name);
        }
    }
}

fn forget_locked(s: &mut State, listeners: &AtomicUsize, session: u64) {
    let Some(l) = s.listeners.remove(&session) else {
        return;
    };
    listeners.fetch_sub(1, Ordering::Relaxed);
    for c in &l.channels {
        remove_from(&mut s.channels, c, session);
    }
    for p in &l.patterns {
        remove_from(&mut s.patterns, p, session);
    }
}

/// Appends one message (a `pmessage` when it came by `pattern`) to `l`'s
/// outbox, in its protocol's form: an array in RESP2, a push in RESP3.
fn push(l: &mut Listener, pattern: Option<&[u8]>, channel: &[u8], message: &[u8]) {
    if l.overflowed {
        return;
    }
    let out = &mut l.outbox;
    let kind = if l.resp3 { b'>' } else { b'*' };
    match pattern {
        None => {
            header(out, kind, 3);
            bulk(out, b"message");
        }
        Some(p) => {
            header(out, kind, 4);
            bulk(out, b"pmessage");
            bulk(out, p);
        }
    }
    bulk(out, channel);
    bulk(out, message);
    l.waiting += 1;
    if out.len() > OUTBOX_LIMIT {
        l.overflowed = true;
        *out = Vec::new();
    }
}

/// A confirmation of (un)subscribing, as SUBSCRIBE, UNSUBSCRIBE,
/// PSUBSCRIBE and PUNSUBSCRIBE reply for each name: the action, the name
/// (`None`: Redis's null, for an UNSUBSCRIBE of nothing) and the
/// connection's subscriptions after.
pub fn confirmation(out: &mut Vec<u8>, resp3: bool, action: &[u8], name: Option<&[u8]>, n: usize) {
    header(out, if resp3 { b'>' } else { b'*' }, 3);
    bulk(out, action);
    match name {
        Some(c) => bulk(out, c),
        None if resp3 => out.extend_from_slice(b"_\r\n"),
        None => out.extend_from_slice(b"$-1\r\n"),
    }
    out.push(b':');
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn header(out: &mut Vec<u8>, kind: u8, n: usize) {
    out.push(kind);
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn bulk(out: &mut Vec<u8>, b: &[u8]) {
    header(out, b'$', b.len());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drained(p: &PubSub) -> Vec<(u64, Vec<u8>)> {
        let mut got = Vec::new();
        p.drain(|id, o| {
            match o {
                Outbox::Messages { bytes, count } => {
                    assert!(count > 0);
                    got.push((id, bytes.to_vec()))
                }
                Outbox::Overflowed => got.push((id, b"overflowed".to_vec())),
            }
            true
        });
        got.sort();
        got
    }

    #[test]
    fn a_message_reaches_each_listener_of_its_channel_and_matching_patterns_in_its_protocol() {
        let p = PubSub::default();
        assert_eq!(p.subscribe(1, false, Kind::Channel, b"news"), 1);
        assert_eq!(p.subscribe(1, false, Kind::Channel, b"news"), 1, "once");
        assert_eq!(p.subscribe(2, true, Kind::Pattern, b"n*"), 1);
        assert_eq!(p.subscribe(3, false, Kind::Channel, b"other"), 1);
        assert_eq!(p.publish(b"news", b"hi"), 2);
        assert!(p.pending());
        assert_eq!(
            drained(&p),
            vec![
                (
                    1,
                    b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n".to_vec()
                ),
                (
                    2,
                    b">4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$2\r\nhi\r\n".to_vec()
                ),
            ]
        );
        assert!(!p.pending());
        assert_eq!(p.publish(b"zzz", b"x"), 0);
        assert_eq!(p.numsub(b"news"), 1);
        assert_eq!(p.numpat(), 1);
        let mut ch = p.channels(None);
        ch.sort();
        assert_eq!(ch, vec![b"news".to_vec().into(), b"other".to_vec().into()]);
        assert_eq!(p.channels(Some(b"o*")).len(), 1);
        assert_eq!(p.unsubscribe(1, Kind::Channel, b"news"), 0);
        assert_eq!(p.numsub(b"news"), 0);
        p.forget(2);
        assert_eq!(p.numpat(), 0);
        assert_eq!(p.publish(b"news", b"x"), 0);
    }

    #[test]
    fn a_drain_leaves_what_another_server_must_take() {
        let p = PubSub::default();
        p.subscribe(1, false, Kind::Channel, b"c");
        p.subscribe(2, false, Kind::Channel, b"c");
        p.publish(b"c", b"m");
        let mut mine = Vec::new();
        p.drain(|id, _| {
            mine.push(id);
            id == 1
        });
        assert_eq!(mine.len(), 2);
        assert!(p.pending(), "session 2's message still waits");
        assert_eq!(drained(&p).len(), 1);
        assert!(!p.pending());
    }

    #[test]
    fn a_listener_that_does_not_read_is_cut_off_at_the_outbox_limit() {
        let p = PubSub::default();
        p.subscribe(7, false, Kind::Channel, b"c");
        let big = vec![b'x'; 1 << 20];
        for _ in 0..=OUTBOX_LIMIT >> 20 {
            p.publish(b"c", &big);
        }
        assert_eq!(drained(&p), vec![(7, b"overflowed".to_vec())]);
        // Forgotten: its memory is back, and nothing is sent to it.
        assert_eq!(p.publish(b"c", b"x"), 0);
        assert_eq!(p.listeners.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn confirmations_have_redis_form() {
        let mut out = Vec::new();
        confirmation(&mut out, false, b"subscribe", Some(b"a"), 1);
        confirmation(&mut out, false, b"unsubscribe", None, 0);
        assert_eq!(
            out,
            b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n"
        );
        let mut out = Vec::new();
        confirmation(&mut out, true, b"unsubscribe", None, 0);
        assert_eq!(out, b">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n");
    }
}
