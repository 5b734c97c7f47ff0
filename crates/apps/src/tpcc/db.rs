//! The tables and the five transaction profiles (clauses 2.4.2-2.8.2).

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use psp_runtime::Preemption;

use super::input::{
    CustomerSelector, DeliveryInput, NewOrderInput, OrderStatusInput, PaymentInput,
    StockLevelInput, TxnInput,
};
use super::text::{FixedStr, has_original};
use super::{Scale, ScaleError, TxnError};

/// `c_data` holds at most this many bytes (clause 1.3.1).
const C_DATA_MAX: usize = 500;

/// An ITEM row (immutable).
#[derive(Debug)]
pub(crate) struct Item {
    /// `i_price` in cents.
    pub(crate) price: u32,
    /// `i_name`: returned by NewOrder's terminal output, which the compact
    /// response leaves out.
    #[expect(dead_code, reason = "schema column only terminal output reads")]
    pub(crate) name: FixedStr<24>,
    pub(crate) data: FixedStr<50>,
}

/// A STOCK row: immutable columns, then the mutable ones behind the row's
/// lock.
#[derive(Debug)]
pub(crate) struct Stock {
    /// `s_dist_01..10`.
    pub(crate) dist: [[u8; 24]; 10],
    pub(crate) data: FixedStr<50>,
    pub(crate) state: Mutex<StockState>,
}

/// The columns of a STOCK row that NewOrder writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StockState {
    pub(crate) quantity: i32,
    pub(crate) ytd: u64,
    pub(crate) order_cnt: u32,
    pub(crate) remote_cnt: u32,
}

/// A WAREHOUSE row with its districts and stock.
#[derive(Debug)]
pub(crate) struct Warehouse {
    pub(crate) name: FixedStr<10>,
    /// `w_tax` in ten-thousandths.
    pub(crate) tax: u32,
    /// `w_ytd` in cents.
    pub(crate) ytd: Mutex<i64>,
    pub(crate) districts: Vec<District>,
    /// Indexed by `i_id - 1`.
    pub(crate) stock: Vec<Stock>,
}

/// A DISTRICT row: immutable columns and customer columns, an index on last
/// names, and the mutable state behind the district's lock.
#[derive(Debug)]
pub(crate) struct District {
    pub(crate) name: FixedStr<10>,
    /// `d_tax` in ten-thousandths.
    pub(crate) tax: u32,
    /// Indexed by `c_id - 1`.
    pub(crate) customers: Vec<Customer>,
    /// Customer ids sorted by (last name, first name, id).
    pub(crate) by_name: Vec<u16>,
    /// `by_name[name_start[n]..name_start[n + 1]]` have last name `n`.
    pub(crate) name_start: Vec<u32>,
    pub(crate) state: Mutex<DistrictState>,
}

/// The columns of a CUSTOMER row no transaction writes.
#[derive(Debug)]
pub(crate) struct Customer {
    pub(crate) first: FixedStr<16>,
    /// `c_middle`, `c_since` and `c_credit_lim` are Payment's and
    /// OrderStatus's terminal output, which the compact response leaves out.
    #[expect(dead_code, reason = "schema column only terminal output reads")]
    pub(crate) middle: [u8; 2],
    /// The last name's number (see [`last_name`](super::last_name)).
    pub(crate) last: u16,
    #[expect(dead_code, reason = "schema column only terminal output reads")]
    pub(crate) since: u64,
    /// `c_credit` is "BC".
    pub(crate) bad_credit: bool,
    #[expect(dead_code, reason = "schema column only terminal output reads")]
    pub(crate) credit_lim: i64,
    /// `c_discount` in ten-thousandths.
    pub(crate) discount: u32,
}

/// What a district's lock guards.
#[derive(Debug)]
pub(crate) struct DistrictState {
    /// `d_ytd` in cents.
    pub(crate) ytd: i64,
    pub(crate) next_o_id: u32,
    /// The mutable columns of the district's customers, by `c_id - 1`.
    pub(crate) customers: Vec<CustomerState>,
    /// The district's orders, by `o_id - 1`.
    pub(crate) orders: Vec<Order>,
    /// NEW-ORDER: undelivered order ids, oldest first.
    pub(crate) new_orders: VecDeque<u32>,
    /// HISTORY rows of payments made at this district.
    pub(crate) history: Vec<History>,
    /// Orders Delivery delivered since the load (for condition 11).
    pub(crate) delivered: u64,
}

/// The columns of a CUSTOMER row that transactions write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CustomerState {
    /// `c_balance` in cents.
    pub(crate) balance: i64,
    /// `c_ytd_payment` in cents.
    pub(crate) ytd_payment: i64,
    pub(crate) payment_cnt: u32,
    pub(crate) delivery_cnt: u32,
    /// The customer's newest order (0: none): OrderStatus's index.
    pub(crate) last_o_id: u32,
    pub(crate) data: Vec<u8>,
}

/// An ORDER row with its ORDER-LINE rows.
#[derive(Debug)]
pub(crate) struct Order {
    pub(crate) c_id: u16,
    #[expect(dead_code, reason = "schema column only terminal output reads")]
    pub(crate) entry_d: u64,
    pub(crate) carrier: Option<u8>,
    /// `o_ol_cnt`, as NewOrder wrote it (condition 6 checks it).
    pub(crate) ol_cnt: u8,
    #[expect(dead_code, reason = "schema column no transaction reads")]
    pub(crate) all_local: bool,
    pub(crate) lines: Box<[OrderLine]>,
}

/// An ORDER-LINE row (`ol_number` is its position in the order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OrderLine {
    pub(crate) i_id: u32,
    pub(crate) supply_w_id: u16,
    pub(crate) quantity: u8,
    /// `ol_amount` in cents.
    pub(crate) amount: u32,
    pub(crate) delivery_d: Option<u64>,
    pub(crate) dist_info: [u8; 24],
}

/// A HISTORY row (`h_d_id`, `h_w_id`: the district that holds it).
#[derive(Debug)]
pub(crate) struct History {
    pub(crate) c_id: u16,
    pub(crate) c_d_id: u8,
    pub(crate) c_w_id: u16,
    #[expect(dead_code, reason = "schema column no transaction reads")]
    pub(crate) date: u64,
    /// `h_amount` in cents.
    pub(crate) amount: i64,
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "schema column no transaction reads")
    )]
    pub(crate) data: FixedStr<24>,
}

/// A TPC-C database in memory, shared by concurrent workers.
#[derive(Debug)]
pub struct Database {
    pub(crate) scale: Scale,
    /// Indexed by `i_id - 1`.
    pub(crate) items: Vec<Item>,
    /// Indexed by `w_id - 1`.
    pub(crate) warehouses: Vec<Warehouse>,
}

/// Rows per table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableStats {
    /// WAREHOUSE rows.
    pub warehouses: u64,
    /// DISTRICT rows.
    pub districts: u64,
    /// CUSTOMER rows.
    pub customers: u64,
    /// HISTORY rows.
    pub history: u64,
    /// NEW-ORDER rows.
    pub new_orders: u64,
    /// ORDER rows.
    pub orders: u64,
    /// ORDER-LINE rows.
    pub order_lines: u64,
    /// ITEM rows.
    pub items: u64,
    /// STOCK rows.
    pub stock: u64,
}

/// Locks `m`; a poisoned lock fails the transaction rather than exposing
/// what a panicking thread left half-written.
pub(crate) fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>, TxnError> {
    m.lock().map_err(|_| TxnError::Poisoned)
}

/// The current time, in seconds since the Unix epoch.
pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_secs())
        .max(1)
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn out_of_range(field: &'static str, value: impl Into<u32>) -> TxnError {
    TxnError::OutOfRange {
        field,
        value: value.into(),
    }
}

impl Warehouse {
    fn district(&self, field: &'static str, d_id: u8) -> Result<&District, TxnError> {
        usize::from(d_id)
            .checked_sub(1)
            .and_then(|i| self.districts.get(i))
            .ok_or_else(|| out_of_range(field, d_id))
    }
}

impl District {
    fn customer(&self, c_id: u16) -> Result<&Customer, TxnError> {
        usize::from(c_id)
            .checked_sub(1)
            .and_then(|i| self.customers.get(i))
            .ok_or_else(|| out_of_range("c_id", c_id))
    }

    /// Resolves a customer selector to an id. By last name: the customer at
    /// position ceil(n / 2) of the n with that name sorted by first name
    /// (clause 2.5.2.2).
    pub(crate) fn find(&self, sel: CustomerSelector) -> Result<u16, TxnError> {
        match sel {
            CustomerSelector::Id(c_id) => self.customer(c_id).map(|_| c_id),
            CustomerSelector::LastName(n) => {
                let i = usize::from(n);
                let (Some(&lo), Some(&hi)) = (self.name_start.get(i), self.name_start.get(i + 1))
                else {
                    return Err(TxnError::CustomerNotFound(n));
                };
                let matches = self
                    .by_name
                    .get(lo as usize..hi as usize)
                    .unwrap_or_default();
                if matches.is_empty() {
                    return Err(TxnError::CustomerNotFound(n));
                }
                Ok(matches[(matches.len() - 1) / 2])
            }
        }
    }
}

impl CustomerState {
    fn index(c_id: u16) -> usize {
        usize::from(c_id) - 1
    }
}

impl Database {
    /// Populates a database of `scale` per clause 4.3.3.1, drawing from
    /// `seed` (warehouses load in parallel).
    ///
    /// # Errors
    /// A scale out of range.
    pub fn load(scale: Scale, seed: u64) -> Result<Database, ScaleError> {
        super::load::load(scale, seed)
    }

    /// The database's scale.
    pub fn scale(&self) -> &Scale {
        &self.scale
    }

    pub(crate) fn warehouse(&self, field: &'static str, w_id: u16) -> Result<&Warehouse, TxnError> {
        usize::from(w_id)
            .checked_sub(1)
            .and_then(|i| self.warehouses.get(i))
            .ok_or_else(|| out_of_range(field, w_id))
    }

    /// Runs one transaction and appends its response to `out` (nothing on
    /// an error). Responses are little-endian:
    ///
    /// - Payment: `c_id: u32`, `c_balance: i64` (cents, after the payment).
    /// - OrderStatus: `c_id: u32`, `c_balance: i64`, the newest order's
    ///   `o_id: u32` (0: none), `o_carrier_id: u8` (0: NULL), `o_ol_cnt: u8`
    ///   and the sum of its `ol_amount: i64`.
    /// - NewOrder: `o_id: u32`, total amount `i64` (cents, with discount and
    ///   taxes), `o_ol_cnt: u8`, lines with brand-generic 'B' `u8`.
    /// - Delivery: orders delivered `u8`, then per district the `o_id: u32`
    ///   delivered (0: the district had no new order and was skipped).
    /// - StockLevel: distinct low-stock items `u32`.
    ///
    /// Delivery commits one transaction per district (clause 2.7.4); if a
    /// later district fails (a poisoned lock) the earlier ones stay
    /// delivered.
    ///
    /// # Errors
    /// An input breaking the input rules, an id outside this database, a
    /// NewOrder rolled back on an unused item, a last name no customer of
    /// the district has, or a poisoned lock. None leaves an effect.
    pub fn execute(&self, input: &TxnInput, out: &mut Vec<u8>) -> Result<(), TxnError> {
        self.execute_with(input, out, Preemption::none())
    }

    /// [`Database::execute`] with preemption points, for a request on a
    /// green thread: Delivery reaches one before each district, StockLevel
    /// one before its first lock. None is reached while a lock is held (a
    /// suspended transaction would hold its locks, and a `MutexGuard` must
    /// not move to another thread); the locked sections also sit inside a
    /// [`Preemption::no_preempt`] guard, so that a point added inside them
    /// later defers its yield instead.
    ///
    /// # Errors
    /// As [`Database::execute`].
    pub fn execute_with(
        &self,
        input: &TxnInput,
        out: &mut Vec<u8>,
        preempt: Preemption<'_>,
    ) -> Result<(), TxnError> {
        input.validate()?;
        match input {
            TxnInput::Payment(p) => self.payment(p, out),
            TxnInput::OrderStatus(o) => self.order_status(o, out),
            TxnInput::NewOrder(n) => self.new_order(n, out),
            TxnInput::Delivery(d) => self.delivery(d, out, preempt),
            TxnInput::StockLevel(s) => self.stock_level(s, out, preempt),
        }
    }

    /// Clause 2.4.2.2.
    fn new_order(&self, input: &NewOrderInput, out: &mut Vec<u8>) -> Result<(), TxnError> {
        let wh = self.warehouse("w_id", input.w_id)?;
        let district = wh.district("d_id", input.d_id)?;
        let customer = district.customer(input.c_id)?;
        // Every check before the first lock, so a rollback leaves no trace.
        for line in &input.lines {
            self.warehouse("ol_supply_w_id", line.supply_w_id)?;
        }
        if input
            .lines
            .iter()
            .any(|l| l.i_id == 0 || l.i_id > self.scale.items)
        {
            return Err(TxnError::Rollback);
        }
        // The stock rows, each once, in lock order.
        let mut keys: Vec<(u16, u32)> = input
            .lines
            .iter()
            .map(|l| (l.supply_w_id, l.i_id))
            .collect();
        keys.sort_unstable();
        keys.dedup();

        let mut state = lock(&district.state)?;
        let mut stocks = Vec::with_capacity(keys.len());
        for &(w, i) in &keys {
            stocks.push(lock(&self.stock_row(w, i).state)?);
        }

        let state = &mut *state;
        let o_id = state.next_o_id;
        state.next_o_id += 1;
        let d_index = usize::from(input.d_id) - 1;
        let now = now();
        let mut sum: u64 = 0;
        let mut brand = 0u8;
        let mut lines = Vec::with_capacity(input.lines.len());
        for line in &input.lines {
            let item = &self.items[line.i_id as usize - 1];
            let row = self.stock_row(line.supply_w_id, line.i_id);
            let slot = keys.partition_point(|&k| k < (line.supply_w_id, line.i_id));
            let stock = &mut stocks[slot];
            let qty = i32::from(line.quantity);
            // Clause 2.4.2.2: restock by 91 when fewer than 10 would remain.
            if stock.quantity >= qty + 10 {
                stock.quantity -= qty;
            } else {
                stock.quantity = stock.quantity - qty + 91;
            }
            stock.ytd += u64::from(line.quantity);
            stock.order_cnt += 1;
            if line.supply_w_id != input.w_id {
                stock.remote_cnt += 1;
            }
            let amount = u32::from(line.quantity) * item.price;
            sum += u64::from(amount);
            if has_original(item.data.as_bytes()) && has_original(row.data.as_bytes()) {
                brand += 1;
            }
            lines.push(OrderLine {
                i_id: line.i_id,
                supply_w_id: line.supply_w_id,
                quantity: line.quantity,
                amount,
                delivery_d: None,
                dist_info: row.dist[d_index],
            });
        }
        let ol_cnt = lines.len() as u8;
        state.orders.push(Order {
            c_id: input.c_id,
            entry_d: now,
            carrier: None,
            ol_cnt,
            all_local: input.lines.iter().all(|l| l.supply_w_id == input.w_id),
            lines: lines.into_boxed_slice(),
        });
        state.new_orders.push_back(o_id);
        state.customers[CustomerState::index(input.c_id)].last_o_id = o_id;

        // total = sum * (1 - c_discount) * (1 + w_tax + d_tax), rounded.
        let scaled =
            sum * u64::from(10_000 - customer.discount) * u64::from(10_000 + wh.tax + district.tax);
        let total = (scaled + 50_000_000) / 100_000_000;
        put_u32(out, o_id);
        put_i64(out, total as i64);
        out.push(ol_cnt);
        out.push(brand);
        Ok(())
    }

    /// The stock row of a checked warehouse and item.
    fn stock_row(&self, w_id: u16, i_id: u32) -> &Stock {
        &self.warehouses[usize::from(w_id) - 1].stock[i_id as usize - 1]
    }

    /// Clause 2.5.2.2.
    fn payment(&self, input: &PaymentInput, out: &mut Vec<u8>) -> Result<(), TxnError> {
        let wh = self.warehouse("w_id", input.w_id)?;
        let district = wh.district("d_id", input.d_id)?;
        let c_district = self
            .warehouse("c_w_id", input.c_w_id)?
            .district("c_d_id", input.c_d_id)?;
        // Names never change, so the customer is found before any lock.
        let c_id = c_district.find(input.customer)?;
        let customer = c_district.customer(c_id)?;
        let amount = i64::from(input.amount_cents);

        let mut w_ytd = lock(&wh.ytd)?;
        let home = (input.w_id, input.d_id);
        let remote = (input.c_w_id, input.c_d_id);
        let (mut pay, mut cust) = if home == remote {
            (lock(&district.state)?, None)
        } else if home < remote {
            let pay = lock(&district.state)?;
            (pay, Some(lock(&c_district.state)?))
        } else {
            let cust = lock(&c_district.state)?;
            (lock(&district.state)?, Some(cust))
        };

        *w_ytd += amount;
        let balance = {
            let cs = match cust.as_deref_mut() {
                Some(c) => &mut c.customers[CustomerState::index(c_id)],
                None => &mut pay.customers[CustomerState::index(c_id)],
            };
            cs.balance -= amount;
            cs.ytd_payment += amount;
            cs.payment_cnt += 1;
            if customer.bad_credit {
                let prefix = format!(
                    "{c_id} {} {} {} {} {}.{:02} ",
                    input.c_d_id,
                    input.c_w_id,
                    input.d_id,
                    input.w_id,
                    amount / 100,
                    amount % 100
                );
                cs.data.splice(0..0, prefix.bytes());
                cs.data.truncate(C_DATA_MAX);
            }
            cs.balance
        };
        pay.ytd += amount;
        let mut h_data = [b' '; 24];
        let w_name = wh.name.as_bytes();
        let d_name = district.name.as_bytes();
        h_data[..w_name.len()].copy_from_slice(w_name);
        let d_at = w_name.len() + 4;
        h_data[d_at..d_at + d_name.len()].copy_from_slice(d_name);
        pay.history.push(History {
            c_id,
            c_d_id: input.c_d_id,
            c_w_id: input.c_w_id,
            date: now(),
            amount,
            data: FixedStr::new(&h_data[..d_at + d_name.len()]),
        });
        put_u32(out, c_id.into());
        put_i64(out, balance);
        Ok(())
    }

    /// Clause 2.6.2.2.
    fn order_status(&self, input: &OrderStatusInput, out: &mut Vec<u8>) -> Result<(), TxnError> {
        let district = self
            .warehouse("w_id", input.w_id)?
            .district("d_id", input.d_id)?;
        let c_id = district.find(input.customer)?;
        let state = lock(&district.state)?;
        let cs = &state.customers[CustomerState::index(c_id)];
        put_u32(out, c_id.into());
        put_i64(out, cs.balance);
        let order = (cs.last_o_id as usize)
            .checked_sub(1)
            .and_then(|i| state.orders.get(i));
        match order {
            Some(o) => {
                put_u32(out, cs.last_o_id);
                out.push(o.carrier.unwrap_or(0));
                out.push(o.ol_cnt);
                let sum: i64 = o.lines.iter().map(|l| i64::from(l.amount)).sum();
                put_i64(out, sum);
            }
            None => {
                put_u32(out, 0);
                out.extend_from_slice(&[0, 0]);
                put_i64(out, 0);
            }
        }
        Ok(())
    }

    /// Clause 2.7.4.2, one district at a time.
    fn delivery(
        &self,
        input: &DeliveryInput,
        out: &mut Vec<u8>,
        preempt: Preemption<'_>,
    ) -> Result<(), TxnError> {
        // SYNERGY's feedback: Delivery is a long transaction (inert under
        // other policies; the worker disarms the timer when it ends).
        preempt.feedback_start();
        let wh = self.warehouse("w_id", input.w_id)?;
        let now = now();
        let mut delivered = [0u32; 10];
        let mut count = 0u8;
        for (slot, district) in delivered.iter_mut().zip(&wh.districts) {
            // Between two districts' transactions no lock is held: the one
            // place to yield.
            preempt.point();
            // Dropped after the district's lock (declared before it).
            let _no_preempt = preempt.no_preempt();
            let mut guard = lock(&district.state)?;
            let state = &mut *guard;
            let Some(&o_id) = state.new_orders.front() else {
                continue;
            };
            let Some(order) = state.orders.get_mut(o_id as usize - 1) else {
                continue;
            };
            state.new_orders.pop_front();
            order.carrier = Some(input.carrier_id);
            let mut sum = 0i64;
            for line in order.lines.iter_mut() {
                line.delivery_d = Some(now);
                sum += i64::from(line.amount);
            }
            let cs = &mut state.customers[CustomerState::index(order.c_id)];
            cs.balance += sum;
            cs.delivery_cnt += 1;
            state.delivered += 1;
            *slot = o_id;
            count += 1;
        }
        out.push(count);
        for &o_id in &delivered[..wh.districts.len()] {
            put_u32(out, o_id);
        }
        preempt.feedback_finished();
        Ok(())
    }

    /// Clause 2.8.2.2.
    fn stock_level(
        &self,
        input: &StockLevelInput,
        out: &mut Vec<u8>,
        preempt: Preemption<'_>,
    ) -> Result<(), TxnError> {
        // SYNERGY's feedback: StockLevel is a long transaction.
        preempt.feedback_start();
        let wh = self.warehouse("w_id", input.w_id)?;
        let district = wh.district("d_id", input.d_id)?;
        // The only point: from the district's lock on, the transaction holds
        // every lock it took until it ends (two-phase locking), so its loops
        // over stock rows cannot yield.
        preempt.point();
        let _no_preempt = preempt.no_preempt();
        let state = lock(&district.state)?;
        // The last 20 orders: o_id in [next_o_id - 20, next_o_id).
        let end = state.next_o_id as usize - 1;
        let recent = state
            .orders
            .get(end.saturating_sub(20)..end)
            .unwrap_or_default();
        let mut items: Vec<u32> = recent
            .iter()
            .flat_map(|o| o.lines.iter().map(|l| l.i_id))
            .collect();
        items.sort_unstable();
        items.dedup();
        // Every stock lock is held until all are read (two-phase).
        let mut stocks = Vec::with_capacity(items.len());
        for &i in &items {
            if let Some(row) = wh.stock.get(i as usize - 1) {
                stocks.push(lock(&row.state)?);
            }
        }
        let low = stocks
            .iter()
            .filter(|s| s.quantity < i32::from(input.threshold))
            .count();
        put_u32(out, low as u32);
        drop(stocks);
        drop(state);
        preempt.feedback_finished();
        Ok(())
    }
}
