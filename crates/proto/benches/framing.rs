//! The net thread's per-request protocol work, framing and classifying a
//! pipelined buffer, called directly and through the registry's
//! `&dyn Protocol` (what the TCP front end calls): the registry must cost
//! nothing a request would notice. And a pipelined request's whole protocol
//! path through the registry (`path/*`): the net thread's framing,
//! classification and blocking check, then the worker's split of the batch
//! and its execution against the in-memory store, as `psp serve` runs them
//! (docs/results.md, "Parse once").
//!
//! Run: `cargo bench -p psp-proto --features bench --bench framing -- --warm-up-time 1
//! --measurement-time 3`

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use psp_proto::{Protocol, memcache, resp};

/// Requests in each buffer.
const REQUESTS: usize = 64;

/// Frames and classifies every request of `buf` with `len` and `class`.
fn walk(
    buf: &[u8],
    len: impl Fn(&[u8]) -> Option<usize>,
    class: impl Fn(&[u8], &mut u32) -> u16,
) -> u32 {
    let (mut at, mut state, mut sum) = (0, 0u32, 0u32);
    while let Some(n) = len(&buf[at..]) {
        sum += u32::from(class(&buf[at..at + n], &mut state));
        at += n;
    }
    sum
}

fn buffers() -> (Vec<u8>, Vec<u8>) {
    let mut r = Vec::new();
    for i in 0..REQUESTS {
        let key = format!("key:{i:08}");
        match i % 4 {
            0 => resp::write_command(&[b"SET", key.as_bytes(), b"some value"], &mut r),
            1 => resp::write_command(&[b"MGET", b"a", b"b", b"c", key.as_bytes()], &mut r),
            _ => resp::write_command(&[b"GET", key.as_bytes()], &mut r),
        }
    }
    let mut m = Vec::new();
    for i in 0..REQUESTS {
        match i % 4 {
            0 => m.extend_from_slice(format!("set key:{i:08} 0 0 10\r\nsome value\r\n").as_bytes()),
            1 => m.extend_from_slice(format!("get a b c key:{i:08}\r\n").as_bytes()),
            _ => m.extend_from_slice(format!("get key:{i:08}\r\n").as_bytes()),
        }
    }
    (r, m)
}

/// A protocol's framing and classification, called directly.
struct Direct {
    len: fn(&[u8], usize) -> Option<usize>,
    class: fn(&[u8], &mut u32) -> u16,
}

fn framing(c: &mut Criterion) {
    let (r, m) = buffers();
    let max = 1 << 20;
    let mut g = c.benchmark_group("framing");
    g.throughput(Throughput::Elements(REQUESTS as u64));
    let cases = [
        (
            "resp",
            &r,
            Direct {
                len: |x, max| resp::request_len(x, max).ok().flatten(),
                class: resp::classify_in_stream,
            },
        ),
        (
            "memcache",
            &m,
            Direct {
                len: |x, max| memcache::request_len(x, max).ok().flatten(),
                class: |x, _| memcache::classify(x),
            },
        ),
    ];
    for (name, buf, direct) in cases {
        g.bench_function(format!("{name}/direct"), |b| {
            b.iter(|| walk(black_box(buf), |x| (direct.len)(x, max), direct.class));
        });
        // Opaque, as the server's is: no devirtualizing.
        let p: &dyn Protocol = black_box(psp_proto::find(name).expect("registered").protocol);
        g.bench_function(format!("{name}/registry"), |b| {
            b.iter(|| {
                walk(
                    black_box(buf),
                    |x| p.request_len(x, max).ok().flatten(),
                    |x, s| p.classify(x, s),
                )
            });
        });
    }
    g.finish();
}

/// The whole protocol path of every request of `buf`: what the net thread
/// asks of the protocol, then what the worker does with the batch.
fn path(
    p: &dyn Protocol,
    buf: &[u8],
    db: &psp_proto::db::Db,
    sessions: &psp_proto::commands::Sessions,
    out: &mut Vec<u8>,
) -> usize {
    let max = 1 << 20;
    let (mut at, mut state, mut sum) = (0, 0u32, 0usize);
    while let Ok(Some(n)) = p.request_len(&buf[at..], max) {
        let one = &buf[at..at + n];
        sum += usize::from(p.classify(one, &mut state)) + usize::from(p.may_block(one));
        at += n;
    }
    let mut rest = buf;
    out.clear();
    while !rest.is_empty() {
        let n = match p.request_len(rest, rest.len()) {
            Ok(Some(n)) => n,
            _ => rest.len(),
        };
        let (one, after) = rest.split_at(n);
        rest = after;
        let _ = p.execute_db(one, db, sessions, 1 << 32 | 1, out, &mut || {});
    }
    sum + out.len()
}

fn request_path(c: &mut Criterion) {
    let (r, m) = buffers();
    let mut g = c.benchmark_group("path");
    g.throughput(Throughput::Elements(REQUESTS as u64));
    for (name, buf) in [("resp", &r), ("memcache", &m)] {
        let p: &dyn Protocol = black_box(psp_proto::find(name).expect("registered").protocol);
        let db = psp_proto::db::Db::default();
        let sessions = psp_proto::commands::Sessions::new(4);
        let mut out = Vec::with_capacity(1 << 16);
        g.bench_function(name, |b| {
            b.iter(|| path(p, black_box(buf), &db, &sessions, &mut out));
        });
    }
    g.finish();
}

criterion_group!(benches, framing, request_path);
criterion_main!(benches);
