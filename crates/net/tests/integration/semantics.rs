//! `psp serve`'s Redis and memcached front ends keep those servers'
//! contracts under every policy, driven by real client libraries (the
//! `redis` crate, the `memcache` crate) over TCP, 2 workers, on the
//! in-memory store:
//!
//! - a connection's commands take effect in the order sent, pipelined
//!   included (a pipeline reads its own writes and deletes);
//! - updates from many connections are atomic (INCR, list pushes, HINCRBY,
//!   memcached incr and cas loops end exact), MSET is never seen
//!   half-applied by MGET, and none of it deadlocks while long commands
//!   (KEYS over thousands of keys) are preempted in the middle;
//! - expiry, MULTI/EXEC (the redis crate's atomic pipeline), WATCH and
//!   RESP3 (`HELLO 3`) behave as Redis's;
//! - every request gets exactly one answer and the server's counters
//!   balance.

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use psp_apps::memkv::{MemConfig, MemService};
use psp_net::tcp::TcpConfig;
use psp_net::{DatapathKind, Server};
use redis::Commands;

use crate::common;

use common::server::policies;

/// Connections updating at once.
const CLIENTS: usize = 4;
/// Updates per connection.
const UPDATES: usize = 100;

fn server(protocol: &str, policy: &str) -> Server {
    let entry = psp_proto::find(protocol).expect("registered");
    let service = MemService::start(
        entry.protocol,
        MemConfig {
            connections: 1024,
            ..MemConfig::default()
        },
    )
    .unwrap();
    let types = common::server::types(entry.protocol.types(), entry.protocol.type_mean_us());
    common::server::start(
        Arc::new(service),
        types,
        policy,
        DatapathKind::Tcp(entry, TcpConfig::default()),
        Default::default(),
    )
}

fn redis_conn(s: &Server, resp3: bool) -> redis::Connection {
    let url = format!(
        "redis://{}/{}",
        s.local_addr(),
        if resp3 { "?protocol=resp3" } else { "" }
    );
    let c = redis::Client::open(url).unwrap();
    let conn = c.get_connection().expect("connects");
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    conn
}

/// Checks what the server answered and counted once it stops.
fn stop_balanced(s: Server, policy: &str) {
    let r = s.stop().unwrap();
    let net = &r.net;
    assert_eq!(net.bad_request, 0, "{policy}: {net:?}");
    assert_eq!(net.overloaded, 0, "{policy}: {net:?}");
    assert_eq!(
        r.dispatcher.counts.stranded, 0,
        "{policy}: every request answered"
    );
}

/// One pipeline (one write) of SET, GET, DEL, GET over 50 keys reads its
/// own writes and deletes.
fn assert_pipeline_order(c: &mut redis::Connection, policy: &str) {
    let mut p = redis::pipe();
    for i in 0..50 {
        let k = format!("order:{i}");
        p.set(&k, i).get(&k).del(&k).get(&k);
    }
    let got: Vec<redis::Value> = p.query(c).unwrap();
    for (i, quad) in got.chunks(4).enumerate() {
        assert_eq!(quad[0], redis::Value::Okay, "{policy}: SET {i}");
        assert_eq!(
            redis::from_redis_value::<i64>(&quad[1]).unwrap(),
            i as i64,
            "{policy}: GET after SET {i}"
        );
        assert_eq!(redis::from_redis_value::<i64>(&quad[2]).unwrap(), 1);
        assert_eq!(quad[3], redis::Value::Nil, "{policy}: GET after DEL {i}");
    }
}

/// [`CLIENTS`] connections, `updates` rounds each: INCR `counter`, RPUSH
/// `list`, HINCRBY `hash field 2` (with `hashes`), and an MSET of two keys
/// that a following MGET must never see half-applied.
fn update_from_many_connections(addr: std::net::SocketAddr, updates: usize, hashes: bool) {
    let writers: Vec<_> = (0..CLIENTS)
        .map(|t| {
            thread::spawn(move || {
                let mut c = redis::Client::open(format!("redis://{addr}/"))
                    .unwrap()
                    .get_connection()
                    .unwrap();
                for i in 0..updates {
                    let _: i64 = c.incr("counter", 1).unwrap();
                    let _: i64 = c.rpush("list", format!("{t}:{i}")).unwrap();
                    if hashes {
                        let _: i64 = c.hincr("hash", "field", 2).unwrap();
                    }
                    let v = (t * updates + i) as i64;
                    let () = c.mset(&[("pair:a", v), ("pair:b", v)]).unwrap();
                    let (a, b): (i64, i64) = c.mget(&["pair:a", "pair:b"]).unwrap();
                    assert_eq!(a, b, "MSET seen half-applied");
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
}

fn redis_semantics(policy: &str) {
    let s = server("resp", policy);
    let mut c = redis_conn(&s, false);

    assert_pipeline_order(&mut c, policy);

    // A keyspace large enough that KEYS runs for milliseconds: preemptive
    // policies stop it in the middle while the updates below run.
    let mut p = redis::pipe();
    for i in 0..3000 {
        p.set(format!("bulk:{i}"), i).ignore();
    }
    let () = p.query(&mut c).unwrap();

    // Atomicity across connections, beside long commands.
    let addr = s.local_addr();
    let walkers = thread::spawn(move || {
        let mut c = redis::Client::open(format!("redis://{addr}/"))
            .unwrap()
            .get_connection()
            .unwrap();
        for _ in 0..5 {
            let keys: Vec<String> = redis::cmd("KEYS").arg("bulk:*").query(&mut c).unwrap();
            assert_eq!(keys.len(), 3000);
        }
    });
    update_from_many_connections(addr, UPDATES, true);
    walkers.join().unwrap();
    let total = (CLIENTS * UPDATES) as i64;
    assert_eq!(c.get::<_, i64>("counter").unwrap(), total, "{policy}: INCR");
    assert_eq!(c.llen::<_, i64>("list").unwrap(), total, "{policy}: RPUSH");
    assert_eq!(
        c.hget::<_, _, i64>("hash", "field").unwrap(),
        2 * total,
        "{policy}: HINCRBY"
    );

    // MULTI/EXEC (the crate's atomic pipeline) and WATCH.
    let (x, y): (i64, i64) = redis::pipe()
        .atomic()
        .incr("tx", 1)
        .incr("tx", 1)
        .query(&mut c)
        .unwrap();
    assert_eq!((x, y), (1, 2), "{policy}: EXEC");
    let () = redis::cmd("WATCH").arg("tx").query(&mut c).unwrap();
    let mut other = redis_conn(&s, false);
    let _: i64 = other.incr("tx", 10).unwrap();
    let aborted: Option<(i64,)> = redis::pipe().atomic().incr("tx", 1).query(&mut c).unwrap();
    assert_eq!(aborted, None, "{policy}: EXEC after a WATCHed key changed");
    assert_eq!(c.get::<_, i64>("tx").unwrap(), 12);

    // Lua scripts through the crate's Script (EVALSHA, EVAL on NOSCRIPT):
    // each atomic, so a read-modify-write from several connections at once
    // loses no update; and redis-py's Lock release (delete if the token is
    // still ours).
    let bump = redis::Script::new(
        "local v = tonumber(redis.call('get', KEYS[1]) or '0') + 1; redis.call('set', KEYS[1], v); return v",
    );
    let bumpers: Vec<_> = (0..4)
        .map(|_| {
            let bump = bump.clone();
            thread::spawn(move || {
                let mut c = redis::Client::open(format!("redis://{addr}/"))
                    .unwrap()
                    .get_connection()
                    .unwrap();
                for _ in 0..50 {
                    let _: i64 = bump.key("scripted").invoke(&mut c).unwrap();
                }
            })
        })
        .collect();
    for b in bumpers {
        b.join().unwrap();
    }
    assert_eq!(
        c.get::<_, i64>("scripted").unwrap(),
        200,
        "{policy}: scripts are atomic"
    );
    let release = redis::Script::new(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
    );
    let () = c.set("lock", "token").unwrap();
    let kept: i64 = release.key("lock").arg("other").invoke(&mut c).unwrap();
    let freed: i64 = release.key("lock").arg("token").invoke(&mut c).unwrap();
    assert_eq!((kept, freed), (0, 1), "{policy}: lock release");

    // Pub/sub through the crate's PubSub (RESP2): a listener on a channel
    // and on a pattern gets, in order, what another connection publishes.
    let mut listener = redis::Client::open(format!("redis://{addr}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    let mut ps = listener.as_pubsub();
    ps.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    ps.subscribe("news").unwrap();
    ps.psubscribe("ev-*").unwrap();
    let sent: (i64, i64, i64) = (
        c.publish("news", "a").unwrap(),
        c.publish("ev-1", "b").unwrap(),
        c.publish("elsewhere", "c").unwrap(),
    );
    assert_eq!(sent, (1, 1, 0), "{policy}: receivers");
    let m = ps.get_message().unwrap();
    assert_eq!(
        (m.get_channel_name(), m.get_payload::<String>().unwrap()),
        ("news", "a".to_string()),
        "{policy}"
    );
    let m = ps.get_message().unwrap();
    assert_eq!(
        (
            m.get_pattern::<String>().unwrap(),
            m.get_channel_name(),
            m.get_payload::<String>().unwrap()
        ),
        ("ev-*".to_string(), "ev-1", "b".to_string()),
        "{policy}"
    );
    ps.unsubscribe("news").unwrap();
    ps.punsubscribe("ev-*").unwrap();
    drop(ps);
    drop(listener);
    // Lua's C recursion at its bound (pcall 180 deep): a script has a stack
    // of its own, deeper than a preemptive worker's fiber stack.
    let deep: i64 = redis::cmd("EVAL")
        .arg("local function f(n) if n == 0 then return 0 end local ok, v = pcall(f, n - 1) return v + 1 end return f(180)")
        .arg(0)
        .query(&mut c)
        .unwrap();
    assert_eq!(deep, 180, "{policy}: deep script");

    // A value larger than a packet buffer (requests up to 64 KiB).
    let big = vec![b'x'; 20_000];
    let () = c.set("big", &big).unwrap();
    assert_eq!(
        c.get::<_, Vec<u8>>("big").unwrap(),
        big,
        "{policy}: 20 KB value"
    );

    // Expiry.
    let () = redis::cmd("SET")
        .arg("short")
        .arg("v")
        .arg("PX")
        .arg(100)
        .query(&mut c)
        .unwrap();
    assert_eq!(
        c.get::<_, Option<String>>("short").unwrap().as_deref(),
        Some("v")
    );
    let ttl: i64 = c.pttl("short").unwrap();
    assert!((1..=100).contains(&ttl), "{policy}: PTTL {ttl}");
    thread::sleep(Duration::from_millis(150));
    assert_eq!(
        c.get::<_, Option<String>>("short").unwrap(),
        None,
        "{policy}: expired"
    );

    // RESP3: the client's HELLO 3, then typed replies.
    let mut c3 = redis_conn(&s, true);
    let () = c3.hset("h3", "f", "v").map(|_: i64| ()).unwrap();
    let m: std::collections::HashMap<String, String> = c3.hgetall("h3").unwrap();
    assert_eq!(m.get("f").map(String::as_str), Some("v"));
    assert_eq!(c3.get::<_, Option<String>>("missing").unwrap(), None);

    // Errors keep the connection usable.
    let e = redis::cmd("NOSUCHCMD").query::<()>(&mut c).unwrap_err();
    assert!(e.to_string().contains("unknown command"), "{e}");
    let e = c.lpush::<_, _, i64>("counter", "x").unwrap_err();
    assert!(e.to_string().contains("WRONGTYPE"), "{e}");
    assert_eq!(c.get::<_, i64>("counter").unwrap(), total);

    drop((c, c3, other));
    stop_balanced(s, policy);
}

/// Expiry's wait: memcached's exptime is in whole seconds.
const EXPIRY_WAIT: Duration = Duration::from_millis(2100);

/// A server whose expiry check is under way: a key set to expire in one
/// second, at `set_at`.
struct ExpiryPending {
    s: Server,
    c: memcache::Client,
    set_at: std::time::Instant,
    policy: &'static str,
}

/// Everything but the end of the expiry check, which [`expired_then_stop`]
/// makes once [`EXPIRY_WAIT`] has passed: the servers of every policy wait
/// for it together instead of one after another.
fn memcache_semantics(policy: &'static str) -> ExpiryPending {
    let s = server("memcache", policy);
    let url = format!(
        "memcache://{}?timeout=20&tcp_nodelay=true&protocol=ascii",
        s.local_addr()
    );
    let c = memcache::Client::connect(url.as_str()).unwrap();
    c.set("k", "v0", 0).unwrap();
    for i in 0..50 {
        c.set("k", i.to_string(), 0).unwrap();
        assert_eq!(
            c.get::<String>("k").unwrap(),
            Some(i.to_string()),
            "{policy}"
        );
    }
    let big = "y".repeat(20_000);
    c.set("big", big.as_str(), 0).unwrap();
    assert_eq!(
        c.get::<String>("big").unwrap(),
        Some(big),
        "{policy}: 20 KB value"
    );
    c.set("n", 0u64, 0).unwrap();
    c.set("casn", 0u64, 0).unwrap();
    let workers: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let url = url.clone();
            thread::spawn(move || {
                let c = memcache::Client::connect(url.as_str()).unwrap();
                for _ in 0..UPDATES {
                    c.increment("n", 1).unwrap();
                    // A gets/cas loop: retried until no one wrote between.
                    loop {
                        let got: std::collections::HashMap<String, (Vec<u8>, u32, Option<u64>)> =
                            c.gets(&["casn"]).unwrap();
                        let (v, _, cas) = &got["casn"];
                        let n: u64 = String::from_utf8_lossy(v).parse().unwrap();
                        if c.cas("casn", (n + 1).to_string(), 0, cas.unwrap()).unwrap() {
                            break;
                        }
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let total = (CLIENTS * UPDATES) as u64;
    assert_eq!(c.get::<u64>("n").unwrap(), Some(total), "{policy}: incr");
    assert_eq!(c.get::<u64>("casn").unwrap(), Some(total), "{policy}: cas");
    // A get of 100 keys, as pymemcache's get_many sends it.
    let keys: Vec<String> = (0..100).map(|i| format!("m{i}")).collect();
    for k in &keys {
        c.set(k, k.as_str(), 0).unwrap();
    }
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let got: std::collections::HashMap<String, String> = c.gets(&refs).unwrap();
    assert_eq!(got.len(), 100, "{policy}: get of 100 keys");
    // Expiry (memcached's exptime is in seconds).
    c.set("gone", "v", 1).unwrap();
    let set_at = std::time::Instant::now();
    assert_eq!(c.get::<String>("gone").unwrap().as_deref(), Some("v"));
    ExpiryPending {
        s,
        c,
        set_at,
        policy,
    }
}

/// The end of [`memcache_semantics`]: the key has expired.
fn expired_then_stop(p: ExpiryPending) {
    let ExpiryPending {
        s,
        c,
        set_at,
        policy,
    } = p;
    if let Some(rest) = EXPIRY_WAIT.checked_sub(set_at.elapsed()) {
        thread::sleep(rest);
    }
    assert_eq!(c.get::<String>("gone").unwrap(), None, "{policy}: expired");
    drop(c);
    stop_balanced(s, policy);
}

/// `--store rocksdb`: the same order and atomicity (its commands are
/// strings and lists).
fn rocksdb_semantics(policy: &str) {
    let service = psp_apps::kv::ProtocolService::open(
        &psp_proto::resp::Resp,
        &psp_apps::KvConfig {
            keys: 100,
            ..psp_apps::KvConfig::default()
        },
    )
    .unwrap();
    let s = common::server::resp(
        Arc::new(service),
        policy,
        TcpConfig::default(),
        common::server::runtime(),
    );
    let mut c = redis_conn(&s, false);
    assert_pipeline_order(&mut c, policy);
    update_from_many_connections(s.local_addr(), UPDATES / 2, false);
    let total = (CLIENTS * UPDATES / 2) as i64;
    assert_eq!(c.get::<_, i64>("counter").unwrap(), total, "{policy}: INCR");
    assert_eq!(c.llen::<_, i64>("list").unwrap(), total, "{policy}: RPUSH");
    drop(c);
    stop_balanced(s, policy);
}

#[test]
fn the_rocksdb_store_keeps_order_and_atomicity() {
    for policy in ["c-fcfs", "darc:samples=20", "ts", "ws"] {
        rocksdb_semantics(policy);
    }
}

#[test]
fn redis_clients_see_redis_semantics_under_every_policy() {
    for policy in policies() {
        redis_semantics(policy);
    }
}

#[test]
fn memcached_clients_see_memcached_semantics_under_every_policy() {
    let pending: Vec<ExpiryPending> = policies().into_iter().map(memcache_semantics).collect();
    for p in pending {
        expired_then_stop(p);
    }
}

/// pymemcache as users run it (Debian's python3-pymemcache, installed by
/// scripts/deps.sh): its PooledClient from several threads, a get_many of
/// 100 keys, gets/cas, incr, add, delete, touch, and a HashClient
/// (tests/frameworks/memcached_frameworks.py), under c-fcfs and the default
/// policy's family.
#[test]
fn pymemcache_pooled_and_hash_clients_run_against_psp_serve() {
    for policy in ["c-fcfs", "darc-fair:samples=20"] {
        let s = server("memcache", policy);
        let (ok, text) = common::run_framework("memcached_frameworks.py", s.local_addr().port());
        assert!(ok, "{policy}: {text}");
        assert!(text.contains("hash client ok"), "{policy}: {text}");
        stop_balanced(s, policy);
    }
}
