//! Past one server, through a proxy users already run: twemproxy
//! (`nutcracker`, which scripts/deps.sh installs) in front of two
//! `--protocol resp` and two `--protocol memcache` psp servers shards keys
//! by consistent hashing (ketama). What is written through the proxy lands
//! on both servers of its pool, every key on exactly one, and reads back
//! through the proxy, multi-key gets included; what twemproxy does not
//! forward (MULTI) is refused by the proxy, not by psp. Each server still
//! schedules its own share under its policy (docs/guide/many-servers.md).

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use psp_net::DatapathKind;
use psp_net::Server;
use psp_net::tcp::TcpConfig;
use redis::Commands;

use crate::common;

/// Keys written through each proxy.
const KEYS: usize = 200;

/// A psp server speaking `protocol` ("resp" or "memcache") over TCP, under
/// the serving default.
fn server(protocol: &str) -> Server {
    let entry = psp_proto::find(protocol).expect("registered");
    common::server::start(
        common::server::kv_service(entry.protocol),
        common::server::types(entry.protocol.types(), entry.protocol.type_mean_us()),
        "darc-fair",
        DatapathKind::Tcp(entry, TcpConfig::default()),
        Default::default(),
    )
}

/// A free TCP port on loopback (bound, read, released).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// nutcracker, killed and its files removed when dropped.
struct Nutcracker {
    child: Child,
    dir: PathBuf,
}

impl Drop for Nutcracker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts nutcracker with a Redis pool and a memcached pool, each over two
/// servers, on ports free when chosen; returns it and where each pool
/// listens, once both listen. A port free when chosen may be taken before
/// nutcracker binds it (another test's connection can get it as its source
/// port): nutcracker then exits, and it is started again on other ports.
fn nutcracker(
    redis: [SocketAddr; 2],
    memcache: [SocketAddr; 2],
) -> (Nutcracker, SocketAddr, SocketAddr) {
    let dir = std::env::temp_dir().join(format!("psp-twemproxy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // murmur, not twemproxy's example fnv1a_64: with it, ketama put all
    // of `user:0` ... `user:199` on one of the two memcached servers.
    let pool = |name: &str, listen: SocketAddr, servers: [SocketAddr; 2], redis: bool| {
        format!(
            "{name}:\n  listen: {listen}\n  hash: murmur\n  distribution: ketama\n{}  auto_eject_hosts: false\n  timeout: 5000\n  servers:\n   - {}:1 {name}-a\n   - {}:1 {name}-b\n",
            if redis { "  redis: true\n" } else { "" },
            servers[0],
            servers[1]
        )
    };
    let log = dir.join("nutcracker.log");
    let mut last_log = String::new();
    for _attempt in 0..5 {
        std::fs::create_dir_all(&dir).unwrap();
        let at = || -> SocketAddr { format!("127.0.0.1:{}", free_port()).parse().unwrap() };
        let (redis_at, memcache_at) = (at(), at());
        let conf = dir.join("nutcracker.yml");
        std::fs::write(
            &conf,
            pool("psp_redis", redis_at, redis, true)
                + &pool("psp_memcache", memcache_at, memcache, false),
        )
        .unwrap();
        let child = Command::new("nutcracker")
            .arg("-c")
            .arg(&conf)
            .args(["-s", &free_port().to_string(), "-a", "127.0.0.1"])
            .arg("-o")
            .arg(&log)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nutcracker runs (scripts/deps.sh installs the nutcracker package)");
        let mut proxy = Nutcracker {
            child,
            dir: dir.clone(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        let listening = [redis_at, memcache_at].iter().all(|&a| {
            loop {
                if TcpStream::connect(a).is_ok() {
                    break true;
                }
                if matches!(proxy.child.try_wait(), Ok(Some(_))) || Instant::now() >= deadline {
                    break false;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        if listening {
            return (proxy, redis_at, memcache_at);
        }
        last_log = std::fs::read_to_string(&log).unwrap_or_default();
        // Killed, and its directory removed; the next attempt makes both again.
        drop(proxy);
    }
    panic!("nutcracker did not listen in 5 attempts; its last log: {last_log}");
}

/// A RESP connection to the proxy without the `redis` crate's connection
/// handshake: the crate sends `CLIENT SETINFO` first, which twemproxy does
/// not forward (it closes the connection); the commands and replies are
/// still the crate's encoding and parser.
struct ProxyConn(std::io::BufReader<TcpStream>);

impl ProxyConn {
    fn open(at: SocketAddr) -> ProxyConn {
        let s = TcpStream::connect(at).expect("connects to the proxy");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        ProxyConn(std::io::BufReader::new(s))
    }

    fn call<T: redis::FromRedisValue>(&mut self, cmd: &redis::Cmd) -> redis::RedisResult<T> {
        self.0.get_mut().write_all(&cmd.get_packed_command())?;
        let v = redis::Parser::new().parse_value(&mut self.0)?;
        redis::from_owned_redis_value(v.extract_error()?)
    }
}

fn redis_conn(at: SocketAddr) -> redis::Connection {
    let c = redis::Client::open(format!("redis://{at}/")).unwrap();
    let conn = c.get_connection().expect("connects");
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    conn
}

/// A memcached text-protocol connection to one server, read line by line.
struct MemcacheConn(std::io::BufReader<TcpStream>);

impl MemcacheConn {
    fn open(at: SocketAddr) -> MemcacheConn {
        let s = TcpStream::connect(at).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // A request in one segment, not held back by Nagle's algorithm.
        s.set_nodelay(true).unwrap();
        MemcacheConn(std::io::BufReader::new(s))
    }

    /// Whether the server holds `key` (a `get`, its reply read to `END`).
    fn holds(&mut self, key: &str) -> bool {
        self.0
            .get_mut()
            .write_all(format!("get {key}\r\n").as_bytes())
            .unwrap();
        let mut found = false;
        loop {
            let mut line = String::new();
            self.0.read_line(&mut line).expect("a reply line");
            match line.trim_end() {
                "END" => return found,
                l if l.starts_with("VALUE ") => found = true,
                _ => {}
            }
        }
    }
}

/// How many of `keys` each of the two servers holds, as `holds(server, key)`
/// reads it from each directly.
fn spread(keys: &[String], mut holds: impl FnMut(usize, &str) -> bool) -> [usize; 2] {
    let mut held = [0; 2];
    for k in keys {
        for (server, n) in held.iter_mut().enumerate() {
            *n += usize::from(holds(server, k));
        }
    }
    held
}

#[test]
fn twemproxy_shards_keys_over_two_psp_servers_of_each_protocol() {
    let (r1, r2, m1, m2) = (
        server("resp"),
        server("resp"),
        server("memcache"),
        server("memcache"),
    );
    let (_proxy, redis_at, memcache_at) = nutcracker(
        [r1.local_addr(), r2.local_addr()],
        [m1.local_addr(), m2.local_addr()],
    );
    let keys: Vec<String> = (0..KEYS).map(|i| format!("user:{i}")).collect();

    // Redis: written and read back through the proxy.
    let mut proxy = ProxyConn::open(redis_at);
    for (i, k) in keys.iter().enumerate() {
        let () = proxy
            .call(redis::cmd("SET").arg(k).arg(i))
            .expect("SET through the proxy");
    }
    for (i, k) in keys.iter().enumerate() {
        let v: usize = proxy
            .call(redis::cmd("GET").arg(k))
            .expect("GET through the proxy");
        assert_eq!(v, i, "{k}");
    }
    let got: Vec<usize> = proxy
        .call(redis::cmd("MGET").arg(&keys[..20]))
        .expect("MGET through the proxy");
    assert_eq!(got, (0..20).collect::<Vec<_>>());
    // twemproxy does not forward transactions: the proxy refuses MULTI
    // (answering an error or closing the connection).
    assert!(proxy.call::<()>(&redis::cmd("MULTI")).is_err());
    // Every key on exactly one server, both servers used.
    let mut direct = [redis_conn(r1.local_addr()), redis_conn(r2.local_addr())];
    let held = spread(&keys, |s, k| {
        direct[s].exists::<_, bool>(k).expect("EXISTS on a server")
    });
    assert_eq!(held[0] + held[1], KEYS, "each key on one server: {held:?}");
    assert!(
        held[0] > 0 && held[1] > 0,
        "both servers hold keys: {held:?}"
    );

    // memcached: the same, with a multi-key get through the proxy, in
    // memcached's text protocol (the `memcache` crate's pool checks a new
    // connection with `version`, which twemproxy does not forward).
    let mut proxy = std::io::BufReader::new(TcpStream::connect(memcache_at).unwrap());
    proxy
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    proxy.get_ref().set_nodelay(true).unwrap();
    let mut line = String::new();
    let mut read_line = |proxy: &mut std::io::BufReader<TcpStream>| {
        line.clear();
        proxy.read_line(&mut line).expect("a reply line");
        line.trim_end().to_string()
    };
    for (i, k) in keys.iter().enumerate() {
        let v = i.to_string();
        let set = format!("set {k} 0 0 {}\r\n{v}\r\n", v.len());
        proxy.get_mut().write_all(set.as_bytes()).unwrap();
        assert_eq!(read_line(&mut proxy), "STORED", "set {k} through the proxy");
    }
    let get = format!("get {}\r\n", keys.join(" "));
    proxy.get_mut().write_all(get.as_bytes()).unwrap();
    let mut got = HashMap::new();
    loop {
        let head = read_line(&mut proxy);
        if head == "END" {
            break;
        }
        let key = head
            .split(' ')
            .nth(1)
            .expect("VALUE KEY FLAGS LEN")
            .to_string();
        got.insert(key, read_line(&mut proxy).parse::<usize>().unwrap());
    }
    assert_eq!(got.len(), KEYS);
    assert!(keys.iter().enumerate().all(|(i, k)| got[k] == i));
    let mut direct = [
        MemcacheConn::open(m1.local_addr()),
        MemcacheConn::open(m2.local_addr()),
    ];
    let held = spread(&keys, |s, k| direct[s].holds(k));
    assert_eq!(held[0] + held[1], KEYS, "each key on one server: {held:?}");
    assert!(
        held[0] > 0 && held[1] > 0,
        "both servers hold keys: {held:?}"
    );

    drop((direct, proxy, _proxy));
    for s in [r1, r2, m1, m2] {
        let r = s.stop().unwrap();
        assert_eq!(r.dispatcher.counts.stranded, 0);
        assert_eq!(r.dispatcher.counts.admitted, r.dispatcher.counts.completed);
    }
}
