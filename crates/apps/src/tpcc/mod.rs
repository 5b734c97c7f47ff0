//! TPC-C (standard specification rev. 5.11) on in-memory tables, with real
//! transactions run by concurrent workers.
//!
//! The point is a service whose request types do genuinely different amounts
//! of work on shared, contended state, as the scheduler's TPC-C workload
//! assumes: [`Database::load`] populates the nine tables per clause 4.3.3.1
//! at a configurable [`Scale`], an [`InputGenerator`] draws transaction
//! inputs per the input rules of clauses 2.4.1-2.8.1, inputs travel as
//! compact little-endian bodies ([`TxnInput::encode`], [`TxnInput::decode`])
//! and [`Database::execute`] runs the profiles of clauses 2.4.2-2.8.2
//! through a shared `&Database` from any number of threads.
//! [`Database::check_consistency`] verifies the consistency conditions of
//! clause 3.3.2.
//!
//! # Storage and isolation
//!
//! Columns no transaction writes (taxes, names, credit, discount, the item
//! table, the stock's `s_dist_xx` and `s_data`) live outside any lock. The
//! mutable state sits behind three kinds of mutex:
//!
//! 1. one per warehouse (`w_ytd`);
//! 2. one per district: `d_ytd`, `d_next_o_id`, the mutable columns of the
//!    district's customers, its orders with their lines, its new-order queue
//!    and the history rows of payments made at the district;
//! 3. one per stock row (`s_quantity`, `s_ytd`, `s_order_cnt`,
//!    `s_remote_cnt`).
//!
//! Every transaction takes all the locks it needs in one global order,
//! warehouses by id, then districts by (warehouse, district), then stock rows
//! by (warehouse, item), and holds them until it is done (strict two-phase
//! locking). So transactions are serializable and cannot deadlock. Delivery
//! runs as one such transaction per district, as clause 2.7.4 allows.
//! A NewOrder checks all its item ids before it takes a lock, so the 1%
//! rollback on an unused item (clause 2.4.2.3) leaves no trace.
//!
//! Money is integer cents and rates are ten-thousandths, so sums are exact.
//!
//! # Reduced scale
//!
//! At a [`Scale`] below the specification's, last names are drawn from
//! `min(1000, customers / 3)` names instead of 1000 (the first that many
//! customers take them in order, per clause 4.3.2.3) so that a name still
//! matches about three customers; `D_YTD` starts at 10.00 per customer and
//! `W_YTD` at the sum of its districts, which is the specification's 30,000.00
//! and 300,000.00 at full scale and keeps conditions 1, 8 and 9 true at any
//! scale.

#![forbid(unsafe_code)]

mod check;
mod db;
mod input;
mod load;
mod text;

#[cfg(test)]
mod tests;

pub use db::{Database, TableStats};
pub use input::{
    BodyError, CustomerSelector, DeliveryInput, InputGenerator, MAX_BODY, NewOrderInput,
    NewOrderLine, OrderStatusInput, PaymentInput, StockLevelInput, TxnInput,
};
pub use text::last_name;

use thiserror::Error;

/// The five transactions, in the order of a TPC-C workload's request types
/// (the discriminant is the type id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxnKind {
    /// Payment (clause 2.5).
    Payment = 0,
    /// Order-Status (clause 2.6).
    OrderStatus = 1,
    /// New-Order (clause 2.4).
    NewOrder = 2,
    /// Delivery (clause 2.7).
    Delivery = 3,
    /// Stock-Level (clause 2.8).
    StockLevel = 4,
}

impl TxnKind {
    /// All kinds, in type-id order.
    pub const ALL: [TxnKind; 5] = [
        TxnKind::Payment,
        TxnKind::OrderStatus,
        TxnKind::NewOrder,
        TxnKind::Delivery,
        TxnKind::StockLevel,
    ];

    /// The standard mix (share of each kind, indexed by type id).
    pub const STANDARD_MIX: [f64; 5] = [0.44, 0.04, 0.44, 0.04, 0.04];

    /// The kind's name, as workload files spell it.
    pub fn name(self) -> &'static str {
        match self {
            TxnKind::Payment => "Payment",
            TxnKind::OrderStatus => "OrderStatus",
            TxnKind::NewOrder => "NewOrder",
            TxnKind::Delivery => "Delivery",
            TxnKind::StockLevel => "StockLevel",
        }
    }

    /// The kind with type id `index`, if any.
    pub fn from_index(index: u16) -> Option<TxnKind> {
        TxnKind::ALL.get(usize::from(index)).copied()
    }

    /// The type id.
    pub fn index(self) -> u16 {
        self as u16
    }
}

/// Most warehouses a [`Scale`] may have.
pub const MAX_WAREHOUSES: u16 = 64;
/// Most districts per warehouse (the specification's 10).
pub const MAX_DISTRICTS: u8 = 10;
/// Most customers per district (the specification's 3,000).
pub const MAX_CUSTOMERS: u32 = 3000;
/// Most items (the specification's 100,000).
pub const MAX_ITEMS: u32 = 100_000;

/// The size of a database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scale {
    /// Warehouses (`1..=64`).
    pub warehouses: u16,
    /// Districts per warehouse (`1..=10`; 10 in the specification).
    pub districts_per_warehouse: u8,
    /// Customers per district (`30..=3000`; 3,000 in the specification).
    pub customers_per_district: u32,
    /// Items, and stock rows per warehouse (`100..=100_000`; 100,000 in the
    /// specification).
    pub items: u32,
    /// Orders per district at load (at most the customers; 3,000 in the
    /// specification).
    pub initial_orders_per_district: u32,
    /// Of those, the newest this many are undelivered, in NEW-ORDER (at most
    /// the orders; 900 in the specification).
    pub initial_new_orders_per_district: u32,
}

impl Scale {
    /// The specification's cardinalities with `warehouses` warehouses.
    pub fn spec(warehouses: u16) -> Scale {
        Scale {
            warehouses,
            districts_per_warehouse: 10,
            customers_per_district: 3000,
            items: 100_000,
            initial_orders_per_district: 3000,
            initial_new_orders_per_district: 900,
        }
    }

    /// A tenth of the specification (a hundredth for items), for fast tests.
    pub fn small(warehouses: u16) -> Scale {
        Scale {
            warehouses,
            districts_per_warehouse: 10,
            customers_per_district: 300,
            items: 1000,
            initial_orders_per_district: 300,
            initial_new_orders_per_district: 90,
        }
    }

    /// Checks every field against its range.
    ///
    /// # Errors
    /// The first field out of its range.
    pub fn validate(&self) -> Result<(), ScaleError> {
        check(
            "warehouses",
            self.warehouses.into(),
            1,
            MAX_WAREHOUSES.into(),
        )?;
        check(
            "districts_per_warehouse",
            self.districts_per_warehouse.into(),
            1,
            MAX_DISTRICTS.into(),
        )?;
        check(
            "customers_per_district",
            self.customers_per_district.into(),
            30,
            MAX_CUSTOMERS.into(),
        )?;
        check("items", self.items.into(), 100, MAX_ITEMS.into())?;
        check(
            "initial_orders_per_district",
            self.initial_orders_per_district.into(),
            0,
            self.customers_per_district.into(),
        )?;
        check(
            "initial_new_orders_per_district",
            self.initial_new_orders_per_district.into(),
            0,
            self.initial_orders_per_district.into(),
        )
    }

    /// Distinct last names in a district: 1000 at full scale, fewer below so
    /// that each still matches about three customers.
    pub(crate) fn last_names(&self) -> u16 {
        // Validated scales bound this to 10..=1000.
        (self.customers_per_district / 3).clamp(1, 1000) as u16
    }
}

fn check(field: &'static str, value: u64, min: u64, max: u64) -> Result<(), ScaleError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(ScaleError {
            field,
            value,
            min,
            max,
        })
    }
}

/// A [`Scale`] field (or a generator's home warehouse) out of its range.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{field} must be in [{min}, {max}], not {value}")]
pub struct ScaleError {
    /// The field.
    pub field: &'static str,
    /// The value given.
    pub value: u64,
    /// Smallest valid value.
    pub min: u64,
    /// Largest valid value.
    pub max: u64,
}

/// Why a transaction did not commit. None leaves any effect.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TxnError {
    /// An id outside the database's scale.
    #[error("{field} {value} is not in the database")]
    OutOfRange {
        /// The input field.
        field: &'static str,
        /// Its value.
        value: u32,
    },
    /// A NewOrder named an unused item and rolled back (clause 2.4.2.3: the
    /// expected outcome of 1% of NewOrders).
    #[error("new-order rolled back: unused item")]
    Rollback,
    /// No customer of the district has the last name given.
    #[error("no customer with last name {0}")]
    CustomerNotFound(u16),
    /// The input breaks a rule that decoding enforces (for inputs built in
    /// code rather than decoded).
    #[error("invalid input: {0}")]
    Invalid(#[from] BodyError),
    /// A lock was poisoned by a thread that panicked holding it.
    #[error("a lock was poisoned")]
    Poisoned,
}

mod service;
pub use service::{
    DEFAULT_MIX, ENTRY, MIN_WAREHOUSES, OPERATIONS, TpccConfig, TpccEncoder, TpccHandler,
    TpccService,
};
