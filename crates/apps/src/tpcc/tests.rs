use std::sync::{Arc, MutexGuard};
use std::thread;
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::db::{CustomerState, DistrictState, StockState};
use super::*;

fn load(scale: Scale) -> Database {
    Database::load(scale, 7).expect("valid scale")
}

fn run(db: &Database, input: &TxnInput) -> Result<Vec<u8>, TxnError> {
    let mut out = Vec::new();
    db.execute(input, &mut out).map(|()| out)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn i64_at(b: &[u8], at: usize) -> i64 {
    i64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn district(db: &Database, w: u16, d: u8) -> MutexGuard<'_, DistrictState> {
    db.warehouses[usize::from(w) - 1].districts[usize::from(d) - 1]
        .state
        .lock()
        .unwrap()
}

fn stock(db: &Database, w: u16, i: u32) -> MutexGuard<'_, StockState> {
    db.warehouses[usize::from(w) - 1].stock[i as usize - 1]
        .state
        .lock()
        .unwrap()
}

fn customer(db: &Database, w: u16, d: u8, c: u16) -> CustomerState {
    district(db, w, d).customers[usize::from(c) - 1].clone()
}

fn w_ytd(db: &Database, w: u16) -> i64 {
    *db.warehouses[usize::from(w) - 1].ytd.lock().unwrap()
}

fn new_order(w: u16, d: u8, c: u16, lines: &[(u32, u16, u8)]) -> TxnInput {
    TxnInput::NewOrder(NewOrderInput {
        w_id: w,
        d_id: d,
        c_id: c,
        lines: lines
            .iter()
            .map(|&(i_id, supply_w_id, quantity)| NewOrderLine {
                i_id,
                supply_w_id,
                quantity,
            })
            .collect(),
    })
}

fn payment(w: u16, d: u8, c_w: u16, c_d: u8, customer: CustomerSelector, cents: u32) -> TxnInput {
    TxnInput::Payment(PaymentInput {
        w_id: w,
        d_id: d,
        c_w_id: c_w,
        c_d_id: c_d,
        customer,
        amount_cents: cents,
    })
}

#[test]
fn kinds_and_mix() {
    for (i, k) in TxnKind::ALL.iter().enumerate() {
        assert_eq!(k.index() as usize, i);
        assert_eq!(TxnKind::from_index(i as u16), Some(*k));
    }
    assert_eq!(TxnKind::from_index(5), None);
    let names: Vec<_> = TxnKind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(
        names,
        [
            "Payment",
            "OrderStatus",
            "NewOrder",
            "Delivery",
            "StockLevel"
        ]
    );
    assert!((TxnKind::STANDARD_MIX.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    assert_eq!(last_name(0), "BARBARBAR");
    assert_eq!(last_name(371), "PRICALLYOUGHT");
}

#[test]
fn scale_validation() {
    assert!(Scale::spec(1).validate().is_ok());
    assert!(Scale::small(64).validate().is_ok());
    let bad = [
        Scale::spec(0),
        Scale::spec(65),
        Scale {
            districts_per_warehouse: 11,
            ..Scale::small(1)
        },
        Scale {
            customers_per_district: 29,
            ..Scale::small(1)
        },
        Scale {
            items: 100_001,
            ..Scale::small(1)
        },
        Scale {
            initial_orders_per_district: 301,
            ..Scale::small(1)
        },
        Scale {
            initial_new_orders_per_district: 301,
            ..Scale::small(1)
        },
    ];
    for s in bad {
        assert!(s.validate().is_err(), "{s:?}");
        assert!(Database::load(s, 1).is_err());
        assert!(InputGenerator::new(s, 1, None).is_err());
    }
    assert!(InputGenerator::new(Scale::small(4), 1, Some(5)).is_err());
    assert!(InputGenerator::new(Scale::small(4), 1, Some(0)).is_err());
}

#[test]
fn consistent_after_load() {
    let scale = Scale::small(2);
    let db = load(scale);
    db.check_consistency().unwrap();
    let s = db.stats();
    assert_eq!(s.warehouses, 2);
    assert_eq!(s.districts, 20);
    assert_eq!(s.customers, 6000);
    assert_eq!(s.history, 6000);
    assert_eq!(s.orders, 6000);
    assert_eq!(s.new_orders, 1800);
    assert_eq!(s.items, 1000);
    assert_eq!(s.stock, 2000);
    assert!((5 * 6000..=15 * 6000).contains(&s.order_lines));
    // The last names: the first 100 customers take each in turn.
    let d = &db.warehouses[0].districts[0];
    assert_eq!(d.name_start.len(), 101);
    assert!((0..100).all(|c| d.customers[c].last == c as u16));
}

#[test]
fn consistent_after_load_at_spec_scale() {
    let start = Instant::now();
    let db = load(Scale::spec(1));
    let loaded = start.elapsed();
    db.check_consistency().unwrap();
    let s = db.stats();
    assert_eq!(s.orders, 30_000);
    assert_eq!(s.new_orders, 9_000);
    assert_eq!(s.stock, 100_000);
    assert!(loaded.as_secs_f64() < 5.0, "loading took {loaded:?}");
}

#[test]
fn check_detects_violations() {
    let scale = Scale {
        districts_per_warehouse: 2,
        ..Scale::small(1)
    };
    type Corruption = (&'static str, fn(&Database));
    let corruptions: [Corruption; 6] = [
        ("condition 1", |db| {
            *db.warehouses[0].ytd.lock().unwrap() += 1;
        }),
        ("condition 9", |db| district(db, 1, 2).ytd += 1),
        ("condition 2", |db| district(db, 1, 1).next_o_id += 1),
        ("condition 5", |db| {
            district(db, 1, 1).orders[0].carrier = None
        }),
        ("condition 10", |db| {
            district(db, 1, 2).customers[9].balance -= 1;
        }),
        ("condition 3", |db| {
            let mut st = district(db, 1, 1);
            let front = st.new_orders.pop_front().unwrap();
            st.new_orders.push_front(front - 1);
        }),
    ];
    for (what, corrupt) in corruptions {
        let db = load(scale);
        db.check_consistency().unwrap();
        corrupt(&db);
        let err = db.check_consistency().unwrap_err();
        assert!(err.contains(what), "{what}: {err}");
    }
}

#[test]
fn concurrent_mix_stays_consistent() {
    const THREADS: u64 = 4;
    const TXNS: usize = 3000;
    let scale = Scale::small(2);
    let db = Arc::new(load(scale));
    let before = db.stats();
    let ytd_before = w_ytd(&db, 1) + w_ytd(&db, 2);

    #[derive(Default, Debug)]
    struct Tally {
        new_orders: u64,
        rollbacks: u64,
        payments: u64,
        paid: i64,
        delivered: u64,
    }
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let db = Arc::clone(&db);
            thread::spawn(move || {
                let mut generator = InputGenerator::new(scale, 100 + t, None).unwrap();
                let mut tally = Tally::default();
                let (mut body, mut out) = (Vec::new(), Vec::new());
                for _ in 0..TXNS {
                    // Through the wire format, as a server would see it.
                    let input = generator.next_input();
                    body.clear();
                    input.encode(&mut body);
                    let input = TxnInput::decode(input.kind(), &body).unwrap();
                    out.clear();
                    match (db.execute(&input, &mut out), &input) {
                        (Ok(()), TxnInput::NewOrder(_)) => tally.new_orders += 1,
                        (Ok(()), TxnInput::Payment(p)) => {
                            tally.payments += 1;
                            tally.paid += i64::from(p.amount_cents);
                        }
                        (Ok(()), TxnInput::Delivery(_)) => tally.delivered += u64::from(out[0]),
                        (Ok(()), _) => {}
                        (Err(TxnError::Rollback), TxnInput::NewOrder(_)) => tally.rollbacks += 1,
                        (Err(e), input) => panic!("{input:?}: {e}"),
                    }
                }
                tally
            })
        })
        .collect();
    let mut total = Tally::default();
    for w in workers {
        let t = w.join().unwrap();
        total.new_orders += t.new_orders;
        total.rollbacks += t.rollbacks;
        total.payments += t.payments;
        total.paid += t.paid;
        total.delivered += t.delivered;
    }
    db.check_consistency().unwrap();

    let after = db.stats();
    assert!(total.new_orders > 4000 && total.delivered > 0, "{total:?}");
    assert!(total.rollbacks > 0, "{total:?}");
    assert_eq!(after.orders, before.orders + total.new_orders);
    assert_eq!(
        after.new_orders,
        before.new_orders + total.new_orders - total.delivered
    );
    assert_eq!(after.history, before.history + total.payments);
    assert_eq!(w_ytd(&db, 1) + w_ytd(&db, 2), ytd_before + total.paid);
    let history: i64 = db
        .warehouses
        .iter()
        .flat_map(|w| &w.districts)
        .map(|d| {
            let st = d.state.lock().unwrap();
            st.history.iter().map(|h| h.amount).sum::<i64>()
        })
        .sum();
    assert_eq!(history, ytd_before + total.paid);
}

#[test]
fn new_order_updates_stock_and_order_rows() {
    let db = load(Scale::small(2));
    *stock(&db, 1, 7) = StockState {
        quantity: 15,
        ytd: 0,
        order_cnt: 0,
        remote_cnt: 0,
    };
    stock(&db, 1, 8).quantity = 50;
    stock(&db, 1, 10).quantity = 50;
    let remote_before = *stock(&db, 2, 9);
    let next = district(&db, 1, 4).next_o_id;
    let input = new_order(
        1,
        4,
        17,
        &[(7, 1, 10), (8, 1, 5), (9, 2, 3), (10, 1, 2), (10, 1, 2)],
    );
    let out = run(&db, &input).unwrap();
    assert_eq!(out.len(), 14);
    assert_eq!(u32_at(&out, 0), next);
    assert_eq!(out[12], 5);

    // Fewer than 10 would remain: restocked by 91 (clause 2.4.2.2).
    assert_eq!(stock(&db, 1, 7).quantity, 15 - 10 + 91);
    assert_eq!(stock(&db, 1, 7).ytd, 10);
    assert_eq!(stock(&db, 1, 8).quantity, 45);
    // The same item twice: both lines apply.
    assert_eq!(stock(&db, 1, 10).quantity, 46);
    assert_eq!(stock(&db, 1, 10).order_cnt, 2);
    let remote = *stock(&db, 2, 9);
    assert_eq!(remote.remote_cnt, remote_before.remote_cnt + 1);
    assert_eq!(remote.ytd, remote_before.ytd + 3);

    let price = |i: u32| db.items[i as usize - 1].price;
    let st = district(&db, 1, 4);
    assert_eq!(st.next_o_id, next + 1);
    assert_eq!(st.new_orders.back(), Some(&next));
    assert_eq!(st.customers[16].last_o_id, next);
    let order = st.orders.last().unwrap();
    assert_eq!((order.c_id, order.ol_cnt, order.carrier), (17, 5, None));
    let amounts: Vec<u32> = order.lines.iter().map(|l| l.amount).collect();
    assert_eq!(
        amounts,
        [
            10 * price(7),
            5 * price(8),
            3 * price(9),
            2 * price(10),
            2 * price(10)
        ]
    );
    assert_eq!(
        order.lines[2].dist_info, db.warehouses[1].stock[8].dist[3],
        "ol_dist_info is the supplying stock's s_dist_04"
    );
    // The total, recomputed in floating point.
    let wh = &db.warehouses[0];
    let dist = &wh.districts[3];
    let discount = f64::from(dist.customers[16].discount) / 1e4;
    let taxes = f64::from(wh.tax + dist.tax) / 1e4;
    let sum: f64 = amounts.iter().map(|&a| f64::from(a)).sum();
    let expect = sum * (1.0 - discount) * (1.0 + taxes);
    assert!((i64_at(&out, 4) as f64 - expect).abs() <= 1.0);
    drop(st);
    db.check_consistency().unwrap();
}

#[test]
fn new_order_rollback_leaves_no_trace() {
    let db = load(Scale::small(2));
    let items = db.scale().items;
    let snapshot = |db: &Database| {
        let st = district(db, 1, 2);
        let stocks: Vec<StockState> = (1..=6).map(|i| *stock(db, 1, i)).collect();
        (
            st.next_o_id,
            st.orders.len(),
            st.new_orders.clone(),
            st.customers[4].clone(),
            stocks,
            *stock(db, 2, 3),
        )
    };
    let before = snapshot(&db);
    // The unused item last (as generated) and in the middle.
    for bad in [
        new_order(
            1,
            2,
            5,
            &[
                (1, 1, 1),
                (2, 1, 2),
                (3, 2, 3),
                (4, 1, 4),
                (items + 1, 1, 5),
            ],
        ),
        new_order(
            1,
            2,
            5,
            &[(1, 1, 1), (2, 1, 2), (u32::MAX, 1, 3), (5, 1, 4), (6, 1, 5)],
        ),
    ] {
        assert_eq!(run(&db, &bad), Err(TxnError::Rollback));
        assert_eq!(snapshot(&db), before);
    }
    db.check_consistency().unwrap();
    // Without the bad line the same order commits and changes all of it.
    let good = new_order(
        1,
        2,
        5,
        &[(1, 1, 1), (2, 1, 2), (3, 2, 3), (4, 1, 4), (5, 1, 5)],
    );
    run(&db, &good).unwrap();
    let after = snapshot(&db);
    assert_eq!(after.0, before.0 + 1);
    assert_eq!(after.1, before.1 + 1);
    assert_ne!(after.4, before.4);
    assert_ne!(after.5, before.5);
}

#[test]
fn payment_by_last_name_picks_the_middle_customer() {
    // More customers than names, so names repeat as at full scale.
    let scale = Scale {
        warehouses: 1,
        districts_per_warehouse: 1,
        customers_per_district: 3000,
        items: 100,
        initial_orders_per_district: 30,
        initial_new_orders_per_district: 9,
    };
    let db = load(scale);
    let d = &db.warehouses[0].districts[0];
    let mut seen_counts = std::collections::BTreeSet::new();
    for name in 0..1000u16 {
        // Clause 2.5.2.2, naively: sort by c_first, take position ceil(n/2).
        let mut matches: Vec<(Vec<u8>, u16)> = (1..=3000u16)
            .filter(|&c| d.customers[usize::from(c) - 1].last == name)
            .map(|c| (d.customers[usize::from(c) - 1].first.as_bytes().to_vec(), c))
            .collect();
        matches.sort();
        seen_counts.insert(matches.len());
        let expect = matches[matches.len().div_ceil(2) - 1].1;

        let before = customer(&db, 1, 1, expect);
        let out = run(
            &db,
            &payment(1, 1, 1, 1, CustomerSelector::LastName(name), 1234),
        )
        .unwrap();
        assert_eq!(u32_at(&out, 0), u32::from(expect), "name {name}");
        assert_eq!(i64_at(&out, 4), before.balance - 1234);
        let after = customer(&db, 1, 1, expect);
        assert_eq!(after.ytd_payment, before.ytd_payment + 1234);
        assert_eq!(after.payment_cnt, before.payment_cnt + 1);

        // OrderStatus resolves names the same way.
        let os = TxnInput::OrderStatus(OrderStatusInput {
            w_id: 1,
            d_id: 1,
            customer: CustomerSelector::LastName(name),
        });
        assert_eq!(u32_at(&run(&db, &os).unwrap(), 0), u32::from(expect));
    }
    assert!(seen_counts.iter().any(|&n| n >= 4 && n % 2 == 0));
    assert!(seen_counts.iter().any(|&n| n >= 3 && n % 2 == 1));
    db.check_consistency().unwrap();
}

#[test]
fn payment_updates_ledgers_and_bad_credit_data() {
    let db = load(Scale::small(2));
    let ytd1 = w_ytd(&db, 1);
    let ytd2 = w_ytd(&db, 2);
    // A customer with bad credit, paying remotely: at (1, 3), customer of (2, 5).
    let bc = (1..=300u16)
        .find(|&c| db.warehouses[1].districts[4].customers[usize::from(c) - 1].bad_credit)
        .unwrap();
    let d_ytd = district(&db, 1, 3).ytd;
    let history = district(&db, 1, 3).history.len();
    let before = customer(&db, 2, 5, bc);
    let out = run(&db, &payment(1, 3, 2, 5, CustomerSelector::Id(bc), 12_345)).unwrap();
    assert_eq!(u32_at(&out, 0), u32::from(bc));
    assert_eq!(i64_at(&out, 4), before.balance - 12_345);
    assert_eq!(w_ytd(&db, 1), ytd1 + 12_345);
    assert_eq!(w_ytd(&db, 2), ytd2);
    assert_eq!(district(&db, 1, 3).ytd, d_ytd + 12_345);
    let after = customer(&db, 2, 5, bc);
    let prefix = format!("{bc} 5 2 3 1 123.45 ");
    assert!(after.data.starts_with(prefix.as_bytes()));
    assert_eq!(
        after.data.len(),
        (before.data.len() + prefix.len()).min(500)
    );
    assert_eq!(
        &after.data[prefix.len()..],
        &before.data[..after.data.len() - prefix.len()]
    );
    let st = district(&db, 1, 3);
    assert_eq!(st.history.len(), history + 1);
    let h = st.history.last().unwrap();
    assert_eq!((h.c_id, h.c_d_id, h.c_w_id, h.amount), (bc, 5, 2, 12_345));
    let expect_data = [
        db.warehouses[0].name.as_bytes(),
        b"    ",
        db.warehouses[0].districts[2].name.as_bytes(),
    ]
    .concat();
    assert_eq!(h.data.as_bytes(), expect_data);
    drop(st);
    db.check_consistency().unwrap();
}

#[test]
fn delivery_takes_the_oldest_new_order_of_each_district() {
    let scale = Scale {
        initial_new_orders_per_district: 1,
        ..Scale::small(1)
    };
    let db = load(scale);
    // Two more undelivered orders in district 2 only.
    for c in [11, 12] {
        run(&db, &new_order(1, 2, c, &[(1, 1, 1); 5])).unwrap();
    }
    let expected: Vec<(u32, u16, i64, CustomerState)> = (1..=10u8)
        .map(|d| {
            let st = district(&db, 1, d);
            let o_id = *st.new_orders.front().unwrap();
            let order = &st.orders[o_id as usize - 1];
            let sum = order.lines.iter().map(|l| i64::from(l.amount)).sum();
            let c = order.c_id;
            (o_id, c, sum, st.customers[usize::from(c) - 1].clone())
        })
        .collect();
    assert!(expected.iter().all(|e| e.2 > 0));

    let delivery = TxnInput::Delivery(DeliveryInput {
        w_id: 1,
        carrier_id: 7,
    });
    let out = run(&db, &delivery).unwrap();
    assert_eq!(out.len(), 1 + 4 * 10);
    assert_eq!(out[0], 10);
    for (d, (o_id, c, sum, before)) in (1..=10u8).zip(&expected) {
        assert_eq!(u32_at(&out, 1 + 4 * (usize::from(d) - 1)), *o_id);
        let st = district(&db, 1, d);
        let order = &st.orders[*o_id as usize - 1];
        assert_eq!(order.carrier, Some(7));
        assert!(order.lines.iter().all(|l| l.delivery_d.is_some()));
        let after = &st.customers[usize::from(*c) - 1];
        assert_eq!(after.balance, before.balance + sum);
        assert_eq!(after.delivery_cnt, before.delivery_cnt + 1);
        assert_ne!(st.new_orders.front(), Some(o_id));
    }
    // Now only district 2 has new orders; the others are skipped.
    let out = run(&db, &delivery).unwrap();
    assert_eq!(out[0], 1);
    assert_eq!(u32_at(&out, 1), 0);
    assert_eq!(u32_at(&out, 5), 301);
    let out = run(&db, &delivery).unwrap();
    assert_eq!((out[0], u32_at(&out, 5)), (1, 302));
    let out = run(&db, &delivery).unwrap();
    assert_eq!(out[0], 0);
    assert!(out[1..].iter().all(|&b| b == 0));
    db.check_consistency().unwrap();
}

#[test]
fn stock_level_counts_distinct_low_items_of_the_last_20_orders() {
    let db = load(Scale::small(1));
    for i in 1..=db.scale().items {
        stock(&db, 1, i).quantity = 100;
    }
    // 21 orders in district 3: the oldest names items 900..=904 only.
    run(
        &db,
        &new_order(
            1,
            3,
            1,
            &[
                (900, 1, 1),
                (901, 1, 1),
                (902, 1, 1),
                (903, 1, 1),
                (904, 1, 1),
            ],
        ),
    )
    .unwrap();
    for c in 2..=21 {
        run(
            &db,
            &new_order(
                1,
                3,
                c,
                &[
                    (1, 1, 1),
                    (1, 1, 1),
                    (2, 1, 1),
                    (3, 1, 1),
                    (4, 1, 1),
                    (5, 1, 1),
                ],
            ),
        )
        .unwrap();
    }
    for i in [1, 2, 3, 900, 999] {
        stock(&db, 1, i).quantity = 5;
    }
    stock(&db, 1, 4).quantity = 15;
    let level = |threshold| {
        let input = TxnInput::StockLevel(StockLevelInput {
            w_id: 1,
            d_id: 3,
            threshold,
        });
        u32_at(&run(&db, &input).unwrap(), 0)
    };
    // Items 1-3 (1 twice per order, counted once); not 900 (21st order)
    // nor 999 (in no order).
    assert_eq!(level(10), 3);
    // Item 4 at 15 is below 20; item 5 is at 80.
    assert_eq!(level(20), 4);
    assert_eq!(level(15), 3);
    db.check_consistency().unwrap();
}

#[test]
fn encode_decode_round_trip() {
    let mut generator = InputGenerator::new(Scale::spec(64), 3, None).unwrap();
    let mut body = Vec::new();
    for kind in TxnKind::ALL {
        for _ in 0..500 {
            let input = generator.generate(kind);
            assert_eq!(input.kind(), kind);
            body.clear();
            input.encode(&mut body);
            assert!(body.len() <= MAX_BODY);
            assert_eq!(TxnInput::decode(kind, &body), Ok(input));
        }
    }
    // The largest body is a 15-line NewOrder.
    let full = new_order(64, 10, 3000, &[(100_000, 64, 10); 15]);
    body.clear();
    full.encode(&mut body);
    assert_eq!(body.len(), MAX_BODY);
}

#[test]
fn decode_rejects_bad_bodies_without_panicking() {
    let mut rng = SmallRng::seed_from_u64(9);
    let mut generator = InputGenerator::new(Scale::small(8), 4, None).unwrap();
    let mut body = Vec::new();
    for kind in TxnKind::ALL {
        // Every truncation of valid bodies, and one byte too many.
        for _ in 0..50 {
            let input = generator.generate(kind);
            body.clear();
            input.encode(&mut body);
            for cut in 0..body.len() {
                assert_eq!(
                    TxnInput::decode(kind, &body[..cut]),
                    Err(BodyError::Truncated)
                );
            }
            body.push(rng.random());
            let expect = if body.len() > MAX_BODY {
                BodyError::TooLong(body.len())
            } else {
                BodyError::Trailing(1)
            };
            assert_eq!(TxnInput::decode(kind, &body), Err(expect));
        }
        // Random bytes of every length up to past the limit.
        for len in 0..=300 {
            for _ in 0..30 {
                body.clear();
                body.extend((0..len).map(|_| rng.random::<u8>()));
                if let Ok(input) = TxnInput::decode(kind, &body) {
                    assert!(input.validate().is_ok());
                    let mut again = Vec::new();
                    input.encode(&mut again);
                    assert_eq!(again, body);
                }
            }
        }
        assert_eq!(
            TxnInput::decode(kind, &[0; MAX_BODY + 1]),
            Err(BodyError::TooLong(MAX_BODY + 1))
        );
    }
    // Each range rule.
    let rejects = |kind, body: &[u8]| {
        assert!(
            matches!(TxnInput::decode(kind, body), Err(BodyError::Field { .. })),
            "{kind:?} {body:?}"
        )
    };
    rejects(TxnKind::Delivery, &[0, 0, 1]);
    rejects(TxnKind::Delivery, &[65, 0, 1]);
    rejects(TxnKind::Delivery, &[1, 0, 11]);
    rejects(TxnKind::StockLevel, &[1, 0, 11, 15]);
    rejects(TxnKind::StockLevel, &[1, 0, 1, 21]);
    rejects(TxnKind::OrderStatus, &[1, 0, 1, 1, 0xe8, 0x03]);
    rejects(TxnKind::OrderStatus, &[1, 0, 1, 0, 0xb9, 0x0b]);
    rejects(TxnKind::Payment, &[1, 0, 1, 1, 0, 1, 0, 1, 0, 99, 0, 0, 0]);
    rejects(TxnKind::NewOrder, &[1, 0, 1, 1, 0, 4]);
    rejects(TxnKind::NewOrder, &[1, 0, 1, 1, 0, 16]);
    assert_eq!(
        TxnInput::decode(TxnKind::OrderStatus, &[1, 0, 1, 2, 1, 0]),
        Err(BodyError::Selector(2))
    );
}

#[test]
fn out_of_range_ids_are_errors() {
    let scale = Scale {
        districts_per_warehouse: 5,
        ..Scale::small(1)
    };
    let db = load(scale);
    let before = db.stats();
    let ytd = w_ytd(&db, 1);
    let range = |field| {
        move |r: Result<Vec<u8>, TxnError>| {
            assert!(
                matches!(r, Err(TxnError::OutOfRange { field: f, .. }) if f == field),
                "{field}: {r:?}"
            )
        }
    };
    range("w_id")(run(&db, &new_order(2, 1, 1, &[(1, 1, 1); 5])));
    range("d_id")(run(&db, &new_order(1, 6, 1, &[(1, 1, 1); 5])));
    range("c_id")(run(&db, &new_order(1, 1, 301, &[(1, 1, 1); 5])));
    range("ol_supply_w_id")(run(&db, &new_order(1, 1, 1, &[(1, 2, 1); 5])));
    range("c_w_id")(run(&db, &payment(1, 1, 3, 1, CustomerSelector::Id(1), 100)));
    range("c_d_id")(run(&db, &payment(1, 1, 1, 9, CustomerSelector::Id(1), 100)));
    range("c_id")(run(
        &db,
        &payment(1, 1, 1, 1, CustomerSelector::Id(3000), 100),
    ));
    range("w_id")(run(
        &db,
        &TxnInput::Delivery(DeliveryInput {
            w_id: 64,
            carrier_id: 1,
        }),
    ));
    range("d_id")(run(
        &db,
        &TxnInput::StockLevel(StockLevelInput {
            w_id: 1,
            d_id: 10,
            threshold: 15,
        }),
    ));
    // At this scale names stop at 99.
    assert_eq!(
        run(
            &db,
            &payment(1, 1, 1, 1, CustomerSelector::LastName(999), 100)
        ),
        Err(TxnError::CustomerNotFound(999))
    );
    assert_eq!(
        run(&db, &new_order(1, 1, 1, &[(1001, 1, 1); 5])),
        Err(TxnError::Rollback)
    );
    // Inputs built in code are checked as decoding would.
    for bad in [
        new_order(1, 1, 1, &[]),
        new_order(1, 1, 1, &[(1, 1, 1); 16]),
        new_order(1, 1, 1, &[(1, 1, 0); 5]),
        new_order(1, 1, 1, &[(0, 1, 1); 5]),
        new_order(1, 0, 1, &[(1, 1, 1); 5]),
        payment(1, 1, 1, 1, CustomerSelector::Id(0), 100),
        payment(1, 1, 1, 1, CustomerSelector::Id(1), 0),
        TxnInput::StockLevel(StockLevelInput {
            w_id: 1,
            d_id: 1,
            threshold: 9,
        }),
    ] {
        assert!(
            matches!(run(&db, &bad), Err(TxnError::Invalid(_))),
            "{bad:?}"
        );
    }
    // Inputs for a far larger database: errors or commits, never a panic.
    let mut generator = InputGenerator::new(Scale::spec(64), 5, None).unwrap();
    let mut committed = 0;
    for _ in 0..3000 {
        match run(&db, &generator.next_input()) {
            Ok(_) => committed += 1,
            Err(
                TxnError::OutOfRange { .. } | TxnError::Rollback | TxnError::CustomerNotFound(_),
            ) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert!(committed > 0);
    db.check_consistency().unwrap();
    let after = db.stats();
    assert!(after.orders >= before.orders);
    assert!(w_ytd(&db, 1) >= ytd);
}

#[test]
fn generator_follows_the_input_rules() {
    let scale = Scale::small(4);
    let mut generator = InputGenerator::new(scale, 11, Some(2)).unwrap();
    let n = 40_000;
    let mut kinds = [0usize; 5];
    let (mut payments, mut remote_payments, mut by_name) = (0, 0, 0);
    let (mut orders, mut rollbacks, mut lines, mut remote_lines) = (0, 0, 0, 0);
    for _ in 0..n {
        let input = generator.next_input();
        input.validate().unwrap();
        kinds[input.kind().index() as usize] += 1;
        match input {
            TxnInput::Payment(p) => {
                assert_eq!(p.w_id, 2);
                payments += 1;
                if p.c_w_id != 2 {
                    remote_payments += 1;
                } else {
                    assert_eq!(p.c_d_id, p.d_id);
                }
                if let CustomerSelector::LastName(name) = p.customer {
                    assert!(name < 100);
                    by_name += 1;
                }
            }
            TxnInput::NewOrder(o) => {
                assert_eq!(o.w_id, 2);
                orders += 1;
                assert!((5..=15).contains(&o.lines.len()));
                for (k, l) in o.lines.iter().enumerate() {
                    if l.i_id > scale.items {
                        assert_eq!(k + 1, o.lines.len(), "only the last line is unused");
                        rollbacks += 1;
                    }
                    lines += 1;
                    if l.supply_w_id != 2 {
                        remote_lines += 1;
                    }
                }
            }
            other => assert_eq!(
                match other {
                    TxnInput::OrderStatus(o) => o.w_id,
                    TxnInput::Delivery(d) => d.w_id,
                    TxnInput::StockLevel(s) => s.w_id,
                    _ => unreachable!(),
                },
                2
            ),
        }
    }
    let share = |count: usize| count as f64 / n as f64;
    for (k, &c) in kinds.iter().enumerate() {
        assert!(
            (share(c) - TxnKind::STANDARD_MIX[k]).abs() < 0.015,
            "{kinds:?}"
        );
    }
    let ratio = |a: usize, b: usize| a as f64 / b as f64;
    assert!((0.12..0.18).contains(&ratio(remote_payments, payments)));
    assert!((0.56..0.64).contains(&ratio(by_name, payments)));
    assert!((0.005..0.016).contains(&ratio(rollbacks, orders)));
    assert!((0.006..0.014).contains(&ratio(remote_lines, lines)));

    // One warehouse: nothing remote. The same seed: the same inputs.
    let mut a = InputGenerator::new(Scale::small(1), 1, None).unwrap();
    let mut b = InputGenerator::new(Scale::small(1), 1, None).unwrap();
    for _ in 0..2000 {
        let input = a.next_input();
        assert_eq!(input, b.next_input());
        match input {
            TxnInput::Payment(p) => assert_eq!((p.c_w_id, p.c_d_id), (1, p.d_id)),
            TxnInput::NewOrder(o) => assert!(o.lines.iter().all(|l| l.supply_w_id == 1)),
            _ => {}
        }
    }
}

/// Load times at full scale and each transaction's mean time, one thread:
/// `cargo test --release -- --ignored --nocapture timings`.
#[test]
#[ignore = "timing report"]
fn timings() {
    for w in [1, 2] {
        let start = Instant::now();
        let db = load(Scale::spec(w));
        println!("load spec({w}): {:?}", start.elapsed());
        drop(db);
    }
    let scale = Scale::spec(1);
    let db = load(scale);
    let mut generator = InputGenerator::new(scale, 1, Some(1)).unwrap();
    let mut nanos = [0u128; 5];
    let mut counts = [0u32; 5];
    let mut out = Vec::new();
    for _ in 0..200_000 {
        let input = generator.next_input();
        out.clear();
        let start = Instant::now();
        let _ = db.execute(&input, &mut out);
        let k = input.kind().index() as usize;
        nanos[k] += start.elapsed().as_nanos();
        counts[k] += 1;
    }
    for k in TxnKind::ALL {
        let i = k.index() as usize;
        println!(
            "{:12} {:>7} runs, mean {:>8.2} us",
            k.name(),
            counts[i],
            nanos[i] as f64 / f64::from(counts[i]) / 1000.0
        );
    }
    let start = Instant::now();
    db.check_consistency().unwrap();
    println!("check_consistency: {:?}", start.elapsed());
}

#[test]
fn smallest_scales_run_and_stay_consistent() {
    for (orders, new_orders) in [(0, 0), (30, 0), (30, 30), (30, 7)] {
        let scale = Scale {
            warehouses: 1,
            districts_per_warehouse: 1,
            customers_per_district: 30,
            items: 100,
            initial_orders_per_district: orders,
            initial_new_orders_per_district: new_orders,
        };
        let db = load(scale);
        db.check_consistency().unwrap();
        let mut generator = InputGenerator::new(scale, 2, None).unwrap();
        for _ in 0..2000 {
            match run(&db, &generator.next_input()) {
                Ok(_) | Err(TxnError::Rollback) => {}
                Err(e) => panic!("{scale:?}: {e}"),
            }
        }
        db.check_consistency().unwrap();
    }
}
