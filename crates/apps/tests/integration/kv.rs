//! The key-value service on a real RocksDB: reads see writes, scans walk keys
//! in order with the right count and content, concurrent workers lose nothing,
//! and bad bodies or paths are answered, never crashed on.

use std::sync::Arc;

use proptest::prelude::*;
use psp_apps::kv::{self, KvConfig, Scan, ScanReply, key_of};
use psp_apps::{AppConfig, AppError, Service};
use psp_runtime::pool::MAX_GENERATED_BODY;
use psp_runtime::{Handler, HandlerError, RequestContext};

/// The workload's types, as `psp` would register them (type id = index).
fn types() -> Vec<String> {
    ["GET", "SCAN", "PUT"].map(String::from).to_vec()
}
const GET: u16 = 0;
const SCAN: u16 = 1;
const PUT: u16 = 2;

fn config(keys: u64) -> AppConfig {
    AppConfig::new(KvConfig {
        keys,
        ..KvConfig::default()
    })
}

fn start(keys: u64) -> Arc<dyn Service> {
    config(keys).start(&types()).expect("the database opens")
}

fn call(h: &mut dyn Handler, type_id: u16, body: &[u8]) -> Result<Vec<u8>, HandlerError> {
    let mut response = Vec::new();
    h.handle(&mut RequestContext::new(type_id, body, &mut response, 0))?;
    Ok(response)
}

fn put_body(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    kv::encode_put(key, value, &mut b);
    b
}

fn scan_body(limit: u32, start: &[u8], end: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    Scan { limit, start, end }.encode(&mut b);
    b
}

fn scan(h: &mut dyn Handler, limit: u32, start: &[u8], end: &[u8]) -> ScanReply {
    let r = call(h, SCAN, &scan_body(limit, start, end)).expect("scan");
    ScanReply::parse(&r).expect("a well-formed scan reply")
}

#[test]
fn a_get_sees_the_loaded_value_and_a_later_put() {
    let svc = start(100);
    let mut h = svc.handler(0);
    let loaded = call(&mut *h, GET, &key_of(7)).unwrap();
    assert_eq!(loaded[0], 1, "a loaded key is found");
    assert_eq!(loaded.len(), 1 + 64, "a 64-byte value");
    call(&mut *h, PUT, &put_body(&key_of(7), b"new value")).unwrap();
    assert_eq!(call(&mut *h, GET, &key_of(7)).unwrap(), b"\x01new value");
    // Another worker's handler sees it too (one database).
    let mut other = svc.handler(1);
    assert_eq!(
        call(&mut *other, GET, &key_of(7)).unwrap(),
        b"\x01new value"
    );
    // A key never written: found = 0.
    assert_eq!(call(&mut *h, GET, b"no such key").unwrap(), [0]);
    call(&mut *h, PUT, &put_body(b"no such key", b"")).unwrap();
    assert_eq!(call(&mut *h, GET, b"no such key").unwrap(), [1]);
}

#[test]
fn a_scan_walks_keys_in_order_with_the_right_count_and_content() {
    let keys = 300;
    let svc = start(keys);
    let mut h = svc.handler(0);
    let all = scan(&mut *h, 0, b"", b"");
    assert_eq!(all.count, keys as u32);
    assert_eq!(all.first, key_of(0));
    assert_eq!(all.last, key_of(keys - 1));
    // The digest covers every key and value in key order: recompute it from GETs.
    let mut digest = kv::DIGEST_SEED;
    for i in 0..keys {
        let v = call(&mut *h, GET, &key_of(i)).unwrap();
        digest = kv::digest(kv::digest(digest, &key_of(i)), &v[1..]);
    }
    assert_eq!(all.digest, digest);
    // A count, a range, both.
    let first10 = scan(&mut *h, 10, b"", b"");
    assert_eq!((first10.count, first10.last), (10, key_of(9).to_vec()));
    let range = scan(&mut *h, 0, &key_of(100), &key_of(150));
    assert_eq!(
        (range.count, range.first, range.last),
        (50, key_of(100).to_vec(), key_of(149).to_vec())
    );
    let both = scan(&mut *h, 5, &key_of(100), &key_of(150));
    assert_eq!((both.count, both.last), (5, key_of(104).to_vec()));
    // Past the last key: nothing.
    let none = scan(&mut *h, 0, b"zzz", b"");
    assert_eq!((none.count, none.first.len(), none.last.len()), (0, 0, 0));
    // Walking one key at a time visits every key once, each greater than the last.
    let mut from = Vec::new();
    let mut seen = 0;
    loop {
        let step = scan(&mut *h, 1, &from, b"");
        if step.count == 0 {
            break;
        }
        assert!(step.first > from || from.is_empty(), "keys out of order");
        from = step.first.clone();
        from.push(0);
        seen += 1;
    }
    assert_eq!(seen, keys);
}

#[test]
fn a_scan_visits_at_most_the_servers_bound() {
    let svc = AppConfig::new(KvConfig {
        keys: 100,
        max_scan_keys: Some(30),
        ..KvConfig::default()
    })
    .start(&types())
    .unwrap();
    let mut h = svc.handler(0);
    for limit in [0, 31, u32::MAX] {
        let r = scan(&mut *h, limit, b"", b"");
        assert_eq!((r.count, r.last), (30, key_of(29).to_vec()), "{limit}");
    }
    assert_eq!(scan(&mut *h, 5, b"", b"").count, 5);
    // Continuing from the last key walks the rest.
    let mut from = key_of(29).to_vec();
    from.push(0);
    assert_eq!(scan(&mut *h, 0, &from, b"").first, key_of(30));
    let err = AppConfig::new(KvConfig {
        max_scan_keys: Some(0),
        ..KvConfig::default()
    })
    .validate()
    .expect_err("a bound of 0");
    assert!(err.to_string().starts_with("--kv-max-scan"), "{err}");
}

#[test]
fn concurrent_workers_lose_no_write() {
    let keys = 200u64;
    let svc = start(keys);
    let threads = 4u64;
    let per = 300u64;
    std::thread::scope(|s| {
        for t in 0..threads {
            let mut h = svc.handler(t as usize);
            s.spawn(move || {
                for i in 0..per {
                    let key = format!("new:{t}:{i:05}");
                    call(&mut *h, PUT, &put_body(key.as_bytes(), &i.to_le_bytes())).unwrap();
                    // Readers and scanners run beside the writers.
                    assert_eq!(call(&mut *h, GET, &key_of(i % keys)).unwrap()[0], 1);
                    if i % 50 == 0 {
                        assert!(scan(&mut *h, 0, b"", b"").count >= keys as u32);
                    }
                }
            });
        }
    });
    let mut h = svc.handler(0);
    assert_eq!(
        scan(&mut *h, 0, b"", b"").count as u64,
        keys + threads * per
    );
    for t in 0..threads {
        for i in (0..per).step_by(37) {
            let key = format!("new:{t}:{i:05}");
            let got = call(&mut *h, GET, key.as_bytes()).unwrap();
            assert_eq!(got[1..], i.to_le_bytes(), "{key}");
        }
    }
}

#[test]
fn generated_requests_hit_loaded_keys_and_fit_the_generator() {
    let app = config(1000);
    let svc = app.start(&types()).unwrap();
    let mut h = svc.handler(0);
    let mut enc = app.encoder(&types(), 9).unwrap();
    let mut body = Vec::new();
    for i in 0..3000u64 {
        let t = (i % 3) as u16;
        body.clear();
        enc.encode(t, 0, &mut body);
        assert!(body.len() <= MAX_GENERATED_BODY);
        let r = call(&mut *h, t, &body).unwrap();
        match t {
            GET => assert_eq!(r[0], 1, "a generated GET names a loaded key"),
            SCAN => assert_eq!(ScanReply::parse(&r).unwrap().count, 1000),
            _ => assert_eq!(r, [1]),
        }
    }
}

#[test]
fn bad_bodies_are_refused_not_crashed_on() {
    let svc = start(10);
    let mut h = svc.handler(0);
    let refused = |r: Result<Vec<u8>, HandlerError>| matches!(r, Err(HandlerError::BadBody(_)));
    assert!(refused(call(&mut *h, GET, b"")), "a GET without a key");
    assert!(
        refused(call(&mut *h, GET, &[b'k'; 129])),
        "an oversized key"
    );
    assert!(refused(call(&mut *h, PUT, b"")), "a PUT without a key");
    assert!(refused(call(&mut *h, PUT, &[0, 1, 2])), "a zero-length key");
    assert!(refused(call(&mut *h, PUT, &[9, b'a'])), "a key cut short");
    assert!(refused(call(&mut *h, SCAN, &[1, 0])), "a SCAN cut short");
    assert!(
        refused(call(&mut *h, SCAN, &[0, 0, 0, 0, 200, 1])),
        "a start key cut short"
    );
    assert!(
        refused(call(&mut *h, 3, b"key")),
        "not an operation of the workload"
    );
    // And the database still serves.
    assert_eq!(call(&mut *h, GET, &key_of(3)).unwrap()[0], 1);
}

#[test]
fn a_workload_type_that_is_not_an_operation_is_an_error() {
    let err = config(10)
        .start(&["GET".into(), "DELETE".into()])
        .expect_err("DELETE is not a kv operation");
    assert!(matches!(err, AppError::NotAnOperation { .. }), "{err}");
    assert!(err.to_string().contains("DELETE") && err.to_string().contains("GET, SCAN, PUT"));
}

#[test]
fn an_unusable_path_or_option_is_a_one_line_error() {
    let file = tempfile::NamedTempFile::new().unwrap();
    for path in ["/proc/psp-kv-cannot-be-here", file.path().to_str().unwrap()] {
        let err = AppConfig::new(KvConfig {
            path: Some(path.into()),
            keys: 10,
            ..KvConfig::default()
        })
        .start(&types())
        .expect_err("no database there");
        let msg = err.to_string();
        assert!(msg.contains(path) && !msg.contains('\n'), "{msg}");
    }
    for (keys, value_bytes, flag) in [
        (0, 64, "--kv-keys"),
        (10, 0, "--kv-value-bytes"),
        (10, 201, "--kv-value-bytes"),
        (u64::MAX, 64, "--kv-keys"),
    ] {
        let err = AppConfig::new(KvConfig {
            path: None,
            keys,
            value_bytes,
            max_scan_keys: None,
        })
        .start(&types())
        .expect_err("out of range");
        assert!(err.to_string().starts_with(flag), "{err}");
    }
}

#[test]
fn a_database_at_a_given_path_persists() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = AppConfig::new(KvConfig {
        path: Some(dir.path().join("db")),
        keys: 20,
        ..KvConfig::default()
    });
    {
        let svc = cfg.start(&types()).unwrap();
        let mut h = svc.handler(0);
        call(&mut *h, PUT, &put_body(b"kept", b"yes")).unwrap();
    }
    // Reopened (and reloaded): the earlier PUT is still there.
    let svc = cfg.start(&types()).unwrap();
    let mut h = svc.handler(0);
    assert_eq!(call(&mut *h, GET, b"kept").unwrap(), b"\x01yes");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn arbitrary_bodies_get_an_answer_or_a_refusal(t in 0u16..4, body in proptest::collection::vec(any::<u8>(), 0..300)) {
        thread_local! {
            static SVC: Arc<dyn Service> = start(50);
        }
        SVC.with(|svc| {
            let mut h = svc.handler(0);
            match call(&mut *h, t, &body) {
                Ok(r) => prop_assert!(!r.is_empty()),
                Err(HandlerError::BadBody(_)) => {}
                Err(e) => prop_assert!(false, "{e}"),
            }
            Ok(())
        })?;
    }
}
