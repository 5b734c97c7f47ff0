//! The consistency conditions (clause 3.3.2) and table statistics.

use std::ops::RangeInclusive;
use std::sync::MutexGuard;

use super::db::{Database, DistrictState, TableStats, lock};

/// Fails the check with a message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

impl Database {
    /// Checks consistency conditions 1-12 of clause 3.3.2, plus the indexes
    /// this implementation keeps (each customer's newest order) and the
    /// customer counters (`c_payment_cnt` = the customer's history rows,
    /// `c_delivery_cnt` = its orders delivered since the load). Condition 11,
    /// which the specification states for the initial population only
    /// (`count(ORDER) - count(NEW-ORDER) = 2100`), is checked as that
    /// initial difference plus the orders delivered since.
    ///
    /// Takes every warehouse and district lock, so it waits for running
    /// transactions and blocks new ones; meant for a quiescent database.
    ///
    /// # Errors
    /// The first violation found, described.
    pub fn check_consistency(&self) -> Result<(), String> {
        let poisoned = |_| "a lock was poisoned".to_string();
        // The global lock order: warehouses, then districts.
        let mut w_ytd = Vec::with_capacity(self.warehouses.len());
        for wh in &self.warehouses {
            w_ytd.push(*lock(&wh.ytd).map_err(poisoned)?);
        }
        let mut states: Vec<Vec<MutexGuard<'_, DistrictState>>> = Vec::new();
        for wh in &self.warehouses {
            let mut ds = Vec::with_capacity(wh.districts.len());
            for d in &wh.districts {
                ds.push(lock(&d.state).map_err(poisoned)?);
            }
            states.push(ds);
        }

        let s = &self.scale;
        let shape = Shape {
            warehouses: self.warehouses.len(),
            districts: usize::from(s.districts_per_warehouse),
            customers: s.customers_per_district as usize,
            initial_delivered: s.initial_orders_per_district - s.initial_new_orders_per_district,
        };
        let payments = check_history(&shape, &w_ytd, &states)?;
        let mut orders = CustomerOrders::new(shape.customers);
        for (wi, ds) in states.iter().enumerate() {
            for (di, st) in ds.iter().enumerate() {
                let at = format!("district ({}, {})", wi + 1, di + 1);
                let pending = check_order_ids(&shape, &at, st)?;
                orders.tally(&shape, &at, st, pending)?;
                let first = (wi * shape.districts + di) * shape.customers;
                check_customers(&at, st, &orders, &payments, first)?;
            }
        }
        Ok(())
    }

    /// Rows per table. Reads one district at a time, so under load the
    /// counts are not one snapshot.
    pub fn stats(&self) -> TableStats {
        let s = &self.scale;
        let districts = u64::from(s.warehouses) * u64::from(s.districts_per_warehouse);
        let mut stats = TableStats {
            warehouses: s.warehouses.into(),
            districts,
            customers: districts * u64::from(s.customers_per_district),
            items: s.items.into(),
            stock: u64::from(s.warehouses) * u64::from(s.items),
            ..TableStats::default()
        };
        for d in self.warehouses.iter().flat_map(|w| &w.districts) {
            // A poisoned district still has rows to count.
            let st = d.state.lock().unwrap_or_else(|e| e.into_inner());
            stats.history += st.history.len() as u64;
            stats.new_orders += st.new_orders.len() as u64;
            stats.orders += st.orders.len() as u64;
            stats.order_lines += st.orders.iter().map(|o| o.lines.len() as u64).sum::<u64>();
        }
        stats
    }
}

/// The database's dimensions, as the checks index customers.
struct Shape {
    warehouses: usize,
    /// Districts per warehouse.
    districts: usize,
    /// Customers per district.
    customers: usize,
    /// Orders per district the load delivered (condition 11's baseline).
    initial_delivered: u32,
}

impl Shape {
    /// The flat index of customer `(w, d, c)` (all 1-based), if it exists.
    fn customer_index(&self, w: u16, d: u8, c: u16) -> Option<usize> {
        let (w, d, c) = (usize::from(w), usize::from(d), usize::from(c));
        let ok = (1..=self.warehouses).contains(&w)
            && (1..=self.districts).contains(&d)
            && (1..=self.customers).contains(&c);
        ok.then(|| ((w - 1) * self.districts + d - 1) * self.customers + c - 1)
    }
}

/// `sum(h_amount)` and history rows per customer (flat index), wherever
/// the payment was made.
struct Payments {
    paid: Vec<i64>,
    rows: Vec<u32>,
}

/// Conditions 1, 8 and 9: the year-to-date totals of warehouses and
/// districts against each other and the history. Returns the payments
/// per customer for conditions 10 and 12.
fn check_history(
    shape: &Shape,
    w_ytd: &[i64],
    states: &[Vec<MutexGuard<'_, DistrictState>>],
) -> Result<Payments, String> {
    let customers = shape.warehouses * shape.districts * shape.customers;
    let mut payments = Payments {
        paid: vec![0i64; customers],
        rows: vec![0u32; customers],
    };
    for (wi, ds) in states.iter().enumerate() {
        let w_id = wi + 1;
        let mut w_history = 0i64;
        for (di, st) in ds.iter().enumerate() {
            let d_id = di + 1;
            let mut d_history = 0i64;
            for h in &st.history {
                let i = shape
                    .customer_index(h.c_w_id, h.c_d_id, h.c_id)
                    .ok_or_else(|| {
                        format!(
                            "history of district ({w_id}, {d_id}) names customer ({}, {}, {})",
                            h.c_w_id, h.c_d_id, h.c_id
                        )
                    })?;
                payments.paid[i] += h.amount;
                payments.rows[i] += 1;
                d_history += h.amount;
            }
            ensure!(
                st.ytd == d_history,
                "condition 9: district ({w_id}, {d_id}): d_ytd {} != sum(h_amount) {d_history}",
                st.ytd
            );
            w_history += d_history;
        }
        let d_ytd: i64 = ds.iter().map(|st| st.ytd).sum();
        ensure!(
            w_ytd[wi] == d_ytd,
            "condition 1: warehouse {w_id}: w_ytd {} != sum(d_ytd) {d_ytd}",
            w_ytd[wi]
        );
        ensure!(
            w_ytd[wi] == w_history,
            "condition 8: warehouse {w_id}: w_ytd {} != sum(h_amount) {w_history}",
            w_ytd[wi]
        );
    }
    Ok(payments)
}

/// Conditions 2, 3 and 11 for one district: its next order id against
/// its orders and new orders, the new orders consecutive, and orders
/// less new orders equal to those delivered. Returns the ids of the
/// pending (new) orders.
fn check_order_ids(
    shape: &Shape,
    at: &str,
    st: &DistrictState,
) -> Result<Option<RangeInclusive<u32>>, String> {
    let last = st.next_o_id - 1;
    ensure!(
        st.orders.len() == last as usize,
        "condition 2: {at}: d_next_o_id - 1 = {last} but max(o_id) = {}",
        st.orders.len()
    );
    let pending = match (st.new_orders.front(), st.new_orders.back()) {
        (Some(&lo), Some(&hi)) => {
            ensure!(
                hi == last,
                "condition 2: {at}: d_next_o_id - 1 = {last} but max(no_o_id) = {hi}"
            );
            let contiguous = st
                .new_orders
                .iter()
                .zip(lo..)
                .all(|(&o, expect)| o == expect);
            ensure!(
                contiguous && (hi - lo + 1) as usize == st.new_orders.len(),
                "condition 3: {at}: new orders {lo}..={hi} are not {} consecutive ids",
                st.new_orders.len()
            );
            Some(lo..=hi)
        }
        _ => None,
    };
    let delivered = u64::from(shape.initial_delivered) + st.delivered;
    ensure!(
        (st.orders.len() - st.new_orders.len()) as u64 == delivered,
        "condition 11: {at}: count(order) - count(new-order) = {} but {delivered} were delivered",
        st.orders.len() - st.new_orders.len()
    );
    Ok(pending)
}

/// Per customer of one district (0-based), what its orders say; reused
/// across districts.
struct CustomerOrders {
    /// Amount of the delivered order lines.
    delivered_amount: Vec<i64>,
    /// The newest order's id (0: none).
    newest: Vec<u32>,
    /// Orders delivered since the load.
    deliveries: Vec<u32>,
}

impl CustomerOrders {
    fn new(customers: usize) -> Self {
        Self {
            delivered_amount: vec![0; customers],
            newest: vec![0; customers],
            deliveries: vec![0; customers],
        }
    }

    /// Conditions 4-7 for one district's orders (carrier set exactly when
    /// not pending, line counts, line delivery dates), tallying each
    /// customer's orders on the way.
    fn tally(
        &mut self,
        shape: &Shape,
        at: &str,
        st: &DistrictState,
        pending: Option<RangeInclusive<u32>>,
    ) -> Result<(), String> {
        self.delivered_amount.fill(0);
        self.newest.fill(0);
        self.deliveries.fill(0);
        let (mut ol_cnt_sum, mut line_count) = (0u64, 0u64);
        for (o_id, order) in (1u32..).zip(&st.orders) {
            ol_cnt_sum += u64::from(order.ol_cnt);
            line_count += order.lines.len() as u64;
            let is_pending = pending.as_ref().is_some_and(|p| p.contains(&o_id));
            ensure!(
                order.carrier.is_none() == is_pending,
                "condition 5: {at}: order {o_id} has carrier {:?} but new-order row: {is_pending}",
                order.carrier
            );
            ensure!(
                usize::from(order.ol_cnt) == order.lines.len(),
                "condition 6: {at}: order {o_id} has o_ol_cnt {} but {} lines",
                order.ol_cnt,
                order.lines.len()
            );
            let c = usize::from(order.c_id);
            ensure!(
                (1..=shape.customers).contains(&c),
                "{at}: order {o_id} names customer {c}"
            );
            self.newest[c - 1] = o_id;
            for line in order.lines.iter() {
                ensure!(
                    line.delivery_d.is_none() == order.carrier.is_none(),
                    "condition 7: {at}: order {o_id}: carrier {:?}, line delivery date {:?}",
                    order.carrier,
                    line.delivery_d
                );
                if line.delivery_d.is_some() {
                    self.delivered_amount[c - 1] += i64::from(line.amount);
                }
            }
            if order.carrier.is_some() && o_id > shape.initial_delivered {
                self.deliveries[c - 1] += 1;
            }
        }
        ensure!(
            ol_cnt_sum == line_count,
            "condition 4: {at}: sum(o_ol_cnt) {ol_cnt_sum} != order lines {line_count}"
        );
        Ok(())
    }
}

/// Conditions 10 and 12 for one district's customers (balance against
/// deliveries and payments), and the counters and newest-order index this
/// implementation keeps. `first` is the flat index of its first customer.
fn check_customers(
    at: &str,
    st: &DistrictState,
    orders: &CustomerOrders,
    payments: &Payments,
    first: usize,
) -> Result<(), String> {
    for (ci, cs) in st.customers.iter().enumerate() {
        let c_id = ci + 1;
        let i = first + ci;
        let delivered = orders.delivered_amount[ci];
        let paid = payments.paid[i];
        ensure!(
            cs.balance == delivered - paid,
            "condition 10: {at}: customer {c_id}: c_balance {} != delivered {delivered} - paid {paid}",
            cs.balance
        );
        ensure!(
            cs.balance + cs.ytd_payment == delivered,
            "condition 12: {at}: customer {c_id}: c_balance {} + c_ytd_payment {} != delivered {delivered}",
            cs.balance,
            cs.ytd_payment
        );
        ensure!(
            cs.last_o_id == orders.newest[ci],
            "{at}: customer {c_id}: newest order {} but index says {}",
            orders.newest[ci],
            cs.last_o_id
        );
        ensure!(
            cs.payment_cnt == payments.rows[i],
            "{at}: customer {c_id}: c_payment_cnt {} != history rows {}",
            cs.payment_cnt,
            payments.rows[i]
        );
        ensure!(
            cs.delivery_cnt == orders.deliveries[ci],
            "{at}: customer {c_id}: c_delivery_cnt {} != orders delivered since load {}",
            cs.delivery_cnt,
            orders.deliveries[ci]
        );
    }
    Ok(())
}
