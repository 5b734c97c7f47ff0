//! The initial population (clause 4.3.3.1).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::thread;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::db::{
    Customer, CustomerState, Database, District, DistrictState, History, Item, Order, OrderLine,
    Stock, StockState, Warehouse, now,
};
use super::text::{C_LAST_LOAD, FixedStr, fill_alnum, mark_original, nurand};
use super::{Scale, ScaleError};

/// Initial `d_ytd`: the 10.00 each customer's initial history row paid
/// (30,000.00 at full scale), so that conditions 8 and 9 hold.
fn initial_d_ytd(scale: &Scale) -> i64 {
    i64::from(scale.customers_per_district) * 1000
}

pub(crate) fn load(scale: Scale, seed: u64) -> Result<Database, ScaleError> {
    scale.validate()?;
    let now = now();
    let items = load_items(&scale, &mut SmallRng::seed_from_u64(seed));

    // Warehouses are independent: load them on all cores.
    let n = usize::from(scale.warehouses);
    let workers = thread::available_parallelism()
        .map_or(1, |p| p.get())
        .min(n);
    let per_worker = n.div_ceil(workers);
    let mut slots: Vec<Option<Warehouse>> = (0..n).map(|_| None).collect();
    thread::scope(|s| {
        for (k, chunk) in slots.chunks_mut(per_worker).enumerate() {
            let scale = &scale;
            s.spawn(move || {
                for (j, slot) in chunk.iter_mut().enumerate() {
                    let w_id = (k * per_worker + j + 1) as u16;
                    *slot = Some(load_warehouse(scale, w_id, seed, now));
                }
            });
        }
    });
    Ok(Database {
        scale,
        items,
        warehouses: slots.into_iter().flatten().collect(),
    })
}

fn load_items(scale: &Scale, rng: &mut SmallRng) -> Vec<Item> {
    (0..scale.items)
        .map(|_| {
            let price = rng.random_range(100..=10_000);
            let name = FixedStr::random(rng, 14, 24);
            let mut data = FixedStr::random(rng, 26, 50);
            if rng.random_range(0..10) == 0 {
                mark_original(rng, data.as_mut_bytes());
            }
            Item { price, name, data }
        })
        .collect()
}

fn load_warehouse(scale: &Scale, w_id: u16, seed: u64, now: u64) -> Warehouse {
    // Each warehouse its own stream, so parallel loading is deterministic.
    let mut rng =
        SmallRng::seed_from_u64(seed ^ u64::from(w_id).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let rng = &mut rng;
    let stock = (0..scale.items)
        .map(|_| {
            let quantity = rng.random_range(10..=100);
            let mut dist = [[0; 24]; 10];
            for d in &mut dist {
                fill_alnum(rng, d);
            }
            let mut data = FixedStr::random(rng, 26, 50);
            if rng.random_range(0..10) == 0 {
                mark_original(rng, data.as_mut_bytes());
            }
            Stock {
                dist,
                data,
                state: Mutex::new(StockState {
                    quantity,
                    ytd: 0,
                    order_cnt: 0,
                    remote_cnt: 0,
                }),
            }
        })
        .collect();
    let name = FixedStr::random(rng, 6, 10);
    let tax = rng.random_range(0..=2000);
    let districts: Vec<District> = (1..=scale.districts_per_warehouse)
        .map(|d_id| load_district(scale, w_id, d_id, rng, now))
        .collect();
    let ytd = districts.len() as i64 * initial_d_ytd(scale);
    Warehouse {
        name,
        tax,
        ytd: Mutex::new(ytd),
        districts,
        stock,
    }
}

fn load_district(scale: &Scale, w_id: u16, d_id: u8, rng: &mut SmallRng, now: u64) -> District {
    let c_count = scale.customers_per_district as usize;
    let names = scale.last_names();
    let mut customers = Vec::with_capacity(c_count);
    let mut states = Vec::with_capacity(c_count);
    let mut history = Vec::with_capacity(c_count);
    for c_id in 1..=c_count as u16 {
        // The first customers take each name in turn, the rest NURand's.
        let last = if c_id <= names {
            c_id - 1
        } else {
            nurand(rng, 255, C_LAST_LOAD, 0, u32::from(names) - 1) as u16
        };
        customers.push(Customer {
            first: FixedStr::random(rng, 8, 16),
            middle: *b"OE",
            last,
            since: now,
            bad_credit: rng.random_range(0..10) == 0,
            credit_lim: 5_000_000,
            discount: rng.random_range(0..=5000),
        });
        let mut data = vec![0; rng.random_range(300..=500)];
        fill_alnum(rng, &mut data);
        states.push(CustomerState {
            balance: -1000,
            ytd_payment: 1000,
            payment_cnt: 1,
            delivery_cnt: 0,
            last_o_id: 0,
            data,
        });
        history.push(History {
            c_id,
            c_d_id: d_id,
            c_w_id: w_id,
            date: now,
            amount: 1000,
            data: FixedStr::random(rng, 12, 24),
        });
    }

    let mut by_name: Vec<u16> = (1..=c_count as u16).collect();
    let key = |c: u16| {
        let cust = &customers[usize::from(c) - 1];
        (cust.last, cust.first.as_bytes(), c)
    };
    by_name.sort_unstable_by(|&a, &b| key(a).cmp(&key(b)));
    let mut name_start = vec![0u32; usize::from(names) + 1];
    for cust in &customers {
        name_start[usize::from(cust.last) + 1] += 1;
    }
    for n in 1..name_start.len() {
        name_start[n] += name_start[n - 1];
    }

    // o_c_id is a random permutation of the customers (clause 4.3.3.1).
    let mut perm: Vec<u16> = (1..=c_count as u16).collect();
    for i in (1..perm.len()).rev() {
        perm.swap(i, rng.random_range(0..=i));
    }
    let order_count = scale.initial_orders_per_district;
    let delivered_upto = order_count - scale.initial_new_orders_per_district;
    let mut orders = Vec::with_capacity(order_count as usize);
    for (o_id, &c_id) in (1..=order_count).zip(&perm) {
        let delivered = o_id <= delivered_upto;
        let ol_cnt: u8 = rng.random_range(5..=15);
        let lines = (0..ol_cnt)
            .map(|_| {
                let mut dist_info = [0; 24];
                fill_alnum(rng, &mut dist_info);
                OrderLine {
                    i_id: rng.random_range(1..=scale.items),
                    supply_w_id: w_id,
                    quantity: 5,
                    amount: if delivered {
                        0
                    } else {
                        rng.random_range(1..=999_999)
                    },
                    delivery_d: delivered.then_some(now),
                    dist_info,
                }
            })
            .collect();
        let carrier = delivered.then(|| rng.random_range(1..=10));
        orders.push(Order {
            c_id,
            entry_d: now,
            carrier,
            ol_cnt,
            all_local: true,
            lines,
        });
        states[usize::from(c_id) - 1].last_o_id = o_id;
    }
    let new_orders: VecDeque<u32> = (delivered_upto + 1..=order_count).collect();

    District {
        name: FixedStr::random(rng, 6, 10),
        tax: rng.random_range(0..=2000),
        customers,
        by_name,
        name_start,
        state: Mutex::new(DistrictState {
            ytd: initial_d_ytd(scale),
            next_o_id: order_count + 1,
            customers: states,
            orders,
            new_orders,
            history,
            delivered: 0,
        }),
    }
}
