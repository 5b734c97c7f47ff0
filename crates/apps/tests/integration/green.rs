//! The real applications on green threads: a key-value SCAN and TPC-C's
//! transactions give the same answers when preempted at every preemption
//! point (and resumed on other threads) as when run to completion, on the
//! default 64 KiB fiber stacks.

use std::sync::Arc;
use std::thread;

use psp_apps::kv::{self, KvConfig, Scan, ScanReply};
use psp_apps::tpcc::{TpccConfig, TpccEncoder, TpccService, TxnKind};
use psp_apps::{AppConfig, Service};
use psp_runtime::{
    BodyEncoder, Handler, PreemptFlag, RequestContext, RequestFiber, RequestSlot, Resumed,
    RunLimits, Served, StackPool, StackPoolConfig,
};

type Slot = RequestSlot<Box<dyn Handler>>;

fn pool() -> Arc<StackPool> {
    StackPool::new(StackPoolConfig::default()).expect("a pool")
}

/// Serves `slot`'s request on a fiber, preempting it at every point when
/// `preempt`, each resume on a new thread when `hop`; returns the served slot
/// and the yields.
fn serve(
    pool: &Arc<StackPool>,
    slot: Slot,
    preempt: bool,
    hop: bool,
) -> (Served<Box<dyn Handler>>, u32) {
    // SAFETY: the applications hold no lock and no thread-local across their
    // preemption points (kv.rs, tpcc/db.rs).
    let mut fiber = unsafe { RequestFiber::serve(pool, slot) }.expect("a stack");
    let resume = |f: &mut RequestFiber<Served<Box<dyn Handler>>>| {
        let flag = PreemptFlag::new();
        if preempt {
            flag.raise();
        }
        f.resume(&RunLimits::new(&flag))
    };
    let mut yields = 0;
    loop {
        let r = if hop {
            thread::scope(|s| s.spawn(|| resume(&mut fiber)).join().unwrap())
        } else {
            resume(&mut fiber)
        };
        match r {
            Resumed::Finished(served) => return (served, yields),
            Resumed::Yielded(_) => yields += 1,
        }
    }
}

fn direct(
    h: &mut dyn Handler,
    type_id: u16,
    body: &[u8],
) -> (Result<(), psp_runtime::HandlerError>, Vec<u8>) {
    let mut response = Vec::new();
    let r = h.handle(&mut RequestContext::new(type_id, body, &mut response, 0));
    (r, response)
}

#[test]
fn a_scan_preempted_at_every_key_and_moved_between_threads_answers_the_same() {
    let keys = 2_000;
    let svc = AppConfig::new(KvConfig {
        keys,
        ..KvConfig::default()
    })
    .start(&["GET", "SCAN", "PUT"].map(String::from))
    .expect("the database opens");
    let mut body = Vec::new();
    Scan {
        limit: 0,
        start: &[],
        end: &[],
    }
    .encode(&mut body);
    let (r, expected) = direct(&mut *svc.handler(0), 1, &body);
    r.unwrap();
    assert_eq!(ScanReply::parse(&expected).unwrap().count, keys as u32);

    let pool = pool();
    let mut slot: Slot = RequestSlot::new(svc.handler(1), 256, 4096);
    for (preempt, hop) in [(false, false), (true, false), (true, true)] {
        slot.load(1, 1, &body);
        let (served, yields) = serve(&pool, slot, preempt, hop);
        served.outcome.unwrap();
        assert_eq!(
            served.slot.response, expected,
            "preempt {preempt}, hop {hop}"
        );
        // A point after every key.
        assert_eq!(yields, if preempt { keys as u32 } else { 0 });
        slot = served.slot;
    }
    // A GET and a PUT on the same slot (no points: not preempted).
    slot.load(0, 1, &kv::key_of(5));
    let (served, _) = serve(&pool, slot, true, false);
    served.outcome.unwrap();
    assert_eq!(served.slot.response[0], 1);
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn tpcc_transactions_preempted_at_every_point_answer_as_run_to_completion() {
    let config = TpccConfig {
        warehouses: 1,
        full_scale: false,
        seed: 3,
    };
    let ops = vec![0, 1, 2, 3, 4];
    // Two identical databases: one served directly, one on fibers.
    let plain = TpccService::load(&config, ops.clone()).unwrap();
    let fibered = TpccService::load(&config, ops.clone()).unwrap();
    let mut h = plain.handler(0);
    let mut encoder = TpccEncoder::new(&config, ops, 11);
    let pool = pool();
    let mut slot: Slot = RequestSlot::new(fibered.handler(0), 256, 256);
    let mut body = Vec::new();
    let mut checked = [0; 5];
    for i in 0..300 {
        // Every kind, Delivery and StockLevel most.
        let kind = TxnKind::ALL[[0, 1, 2, 3, 4, 3, 4][i % 7]];
        body.clear();
        encoder.encode(kind.index(), 0, &mut body);
        let (r, expected) = direct(&mut *h, kind.index(), &body);
        slot.load(kind.index(), 0, &body);
        let (served, yields) = serve(&pool, slot, true, i % 10 == 0);
        assert_eq!(served.outcome, r, "{kind:?}");
        // Delivery: one point per district; StockLevel: one; the rest none.
        let points = match kind {
            TxnKind::Delivery => 10,
            TxnKind::StockLevel => 1,
            _ => 0,
        };
        assert_eq!(yields, points, "{kind:?}");
        assert_eq!(served.slot.response, expected, "{kind:?} #{i}");
        checked[kind.index() as usize] += 1;
        slot = served.slot;
    }
    assert!(checked.iter().all(|&c| c > 0));
    fibered.database().check_consistency().unwrap();
}
