//! TPC-C as an application behind the scheduler: the request types are the
//! five transactions (type names = [`TxnKind`] names), a request's body is a
//! transaction's input ([`TxnInput::encode`]), and every worker executes
//! against the one shared [`Database`].
//!
//! Responses: a byte saying whether the transaction committed (1) or rolled
//! back (0, the 1% of NewOrders that name an unused item: a valid outcome of
//! the benchmark, answered OK), then [`Database::execute`]'s output. A body that
//! does not decode, or names a warehouse, district, customer or item the
//! database does not have, is BAD_REQUEST.
//!
//! On a green thread, Delivery and StockLevel reach preemption points where
//! they hold no lock ([`Database::execute_with`]).

use std::sync::Arc;

use psp_core::TypeId;
use psp_runtime::{BodyEncoder, Handler, HandlerError, RequestContext};

use super::{Database, InputGenerator, NewOrderLine, Scale, TxnError, TxnInput, TxnKind};
use crate::{App, AppConfig, AppEntry, AppError, AppOptions, Service, operation_of};

/// The transactions, in operation-index order (= [`TxnKind`] discriminants).
pub const OPERATIONS: [&str; 5] = [
    "Payment",
    "OrderStatus",
    "NewOrder",
    "Delivery",
    "StockLevel",
];
/// The specification's standard mix (clause 5.2.3's minimum percentages, with
/// NewOrder taking the rest).
pub const DEFAULT_MIX: [(&str, f64); 5] = [
    ("Payment", 0.44),
    ("OrderStatus", 0.04),
    ("NewOrder", 0.44),
    ("Delivery", 0.04),
    ("StockLevel", 0.04),
];
/// Fewest warehouses.
pub const MIN_WAREHOUSES: u64 = 1;

/// The TPC-C application's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TpccConfig {
    /// Warehouses (the scale factor).
    pub warehouses: u64,
    /// The specification's table sizes (`true`), or a reduced population for
    /// tests (1,000 items, 300 customers per district).
    pub full_scale: bool,
    /// Seed of the initial population.
    pub seed: u64,
}

impl Default for TpccConfig {
    fn default() -> Self {
        Self {
            warehouses: 1,
            full_scale: true,
            seed: 1,
        }
    }
}

impl TpccConfig {
    /// Checks every option against its range.
    ///
    /// # Errors
    /// [`AppError::Range`] naming the option.
    pub fn validate(&self) -> Result<(), AppError> {
        crate::check_range(
            "--tpcc-warehouses",
            self.warehouses,
            MIN_WAREHOUSES,
            u64::from(super::MAX_WAREHOUSES),
        )?;
        Ok(())
    }

    /// The table sizes.
    pub fn scale(&self) -> Scale {
        let w = self.warehouses as u16;
        if self.full_scale {
            Scale::spec(w)
        } else {
            Scale::small(w)
        }
    }
}

/// The registry's entry of TPC-C.
pub const ENTRY: AppEntry = AppEntry {
    name: "tpcc",
    about: "TPC-C transactions",
    default_mix: &DEFAULT_MIX,
    workload_options: &["tpcc_warehouses"],
    configure: |o: &AppOptions| {
        AppConfig::new(TpccConfig {
            warehouses: o.count("tpcc_warehouses").unwrap_or(1),
            ..TpccConfig::default()
        })
    },
};

impl App for TpccConfig {
    fn name(&self) -> &'static str {
        "tpcc"
    }

    fn operations(&self) -> Option<&'static [&'static str]> {
        Some(&OPERATIONS)
    }

    fn validate(&self) -> Result<(), AppError> {
        TpccConfig::validate(self)
    }

    /// The scale: how many rows each transaction finds.
    fn options(&self) -> Vec<(&'static str, u64)> {
        vec![("tpcc_warehouses", self.warehouses)]
    }

    fn encoder(&self, ops: Vec<usize>, seed: u64) -> Box<dyn BodyEncoder> {
        Box::new(TpccEncoder::new(self, ops, seed))
    }

    fn service(&self, ops: Vec<usize>) -> Result<Arc<dyn Service>, AppError> {
        Ok(Arc::new(TpccService::load(self, ops)?))
    }
}

/// The TPC-C application, started: loaded tables.
#[derive(Debug)]
pub struct TpccService {
    db: Arc<Database>,
    ops: Arc<[usize]>,
    warehouses: u64,
}

impl TpccService {
    /// Populates the tables of `config`; `ops` maps type ids to transactions
    /// ([`crate::AppConfig::bind`]).
    ///
    /// # Errors
    /// Options out of range.
    pub fn load(config: &TpccConfig, ops: Vec<usize>) -> Result<Self, AppError> {
        config.validate()?;
        let db = Database::load(config.scale(), config.seed)
            .map_err(|e| AppError::Setup(format!("TPC-C scale: {e}")))?;
        Ok(Self {
            db: Arc::new(db),
            ops: ops.into(),
            warehouses: config.warehouses,
        })
    }

    /// The database (for consistency checks).
    pub fn database(&self) -> &Arc<Database> {
        &self.db
    }
}

impl Service for TpccService {
    fn app(&self) -> &'static str {
        "tpcc"
    }

    fn handler(&self, _worker: usize) -> Box<dyn Handler> {
        Box::new(TpccHandler {
            db: self.db.clone(),
            ops: self.ops.clone(),
            spare: Vec::with_capacity(16),
        })
    }

    fn describe(&self) -> String {
        let s = self.db.stats();
        format!(
            "TPC-C in memory, {} warehouse(s): {} customers, {} orders, {} stock rows",
            self.warehouses, s.customers, s.orders, s.stock
        )
    }

    fn finish(&self) -> Option<String> {
        Some(match self.db.check_consistency() {
            Ok(()) => {
                let s = self.db.stats();
                format!(
                    "TPC-C consistency conditions hold ({} orders, {} new-orders, {} history rows)",
                    s.orders, s.new_orders, s.history
                )
            }
            Err(e) => format!("TPC-C consistency VIOLATED: {e}"),
        })
    }
}

/// A worker's handle on the tables.
pub struct TpccHandler {
    db: Arc<Database>,
    ops: Arc<[usize]>,
    /// A NewOrder's line storage, reused from request to request.
    spare: Vec<NewOrderLine>,
}

impl Handler for TpccHandler {
    fn handle(&mut self, ctx: &mut RequestContext<'_>) -> Result<(), HandlerError> {
        let kind = operation_of(&self.ops, ctx.type_id)
            .and_then(|op| TxnKind::from_index(op as u16))
            .ok_or(HandlerError::BadBody("not a TPC-C transaction"))?;
        let input = TxnInput::decode_reusing(kind, ctx.body, &mut self.spare)
            .map_err(|_| HandlerError::BadBody("TPC-C: malformed transaction input"))?;
        ctx.response.push(1);
        let r = self.db.execute_with(&input, ctx.response, ctx.preempt);
        input.recycle_into(&mut self.spare);
        match r {
            Ok(()) => Ok(()),
            Err(TxnError::Rollback) => {
                ctx.response[0] = 0;
                Ok(())
            }
            Err(TxnError::OutOfRange { .. } | TxnError::CustomerNotFound(_)) => Err(
                HandlerError::BadBody("TPC-C: an id or name the database does not have"),
            ),
            Err(TxnError::Invalid(_)) => Err(HandlerError::BadBody("TPC-C: invalid input")),
            Err(TxnError::Poisoned) => Err(HandlerError::Failed(
                "TPC-C: a table lock was poisoned by a panic",
            )),
        }
    }

    /// Points only where no lock is held; locked sections are `no_preempt`.
    fn fiber_safe(&self) -> bool {
        true
    }
}

/// Writes generated transactions: inputs drawn per the specification's input
/// rules, for a database of `config`'s scale, each warehouse uniformly.
pub struct TpccEncoder {
    ops: Vec<usize>,
    generator: InputGenerator,
}

impl TpccEncoder {
    /// An encoder for `config`'s database, with `ops` from
    /// [`crate::AppConfig::bind`].
    pub fn new(config: &TpccConfig, ops: Vec<usize>, seed: u64) -> Self {
        Self {
            ops,
            generator: InputGenerator::new(config.scale(), seed, None)
                .expect("a validated configuration has a valid scale"),
        }
    }
}

impl BodyEncoder for TpccEncoder {
    fn encode(&mut self, type_id: TypeId, _service_ns: u64, out: &mut Vec<u8>) {
        let Some(kind) =
            operation_of(&self.ops, type_id).and_then(|op| TxnKind::from_index(op as u16))
        else {
            // A type outside the workload: an empty body (answered BAD_REQUEST).
            return;
        };
        let input = self.generator.generate(kind);
        input.encode(out);
        self.generator.recycle(input);
    }
}
