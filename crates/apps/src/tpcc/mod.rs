//! TPC-C (placeholder while the engine lands).
use psp_core::TypeId;
use psp_runtime::BodyEncoder;

use crate::{AppError, Service};

/// The five transactions, in type-id order of the `tpcc` workload.
pub const OPERATIONS: [&str; 5] = [
    "Payment",
    "OrderStatus",
    "NewOrder",
    "Delivery",
    "StockLevel",
];
/// The standard mix.
pub const DEFAULT_MIX: [(&str, f64); 5] = [
    ("Payment", 0.44),
    ("OrderStatus", 0.04),
    ("NewOrder", 0.44),
    ("Delivery", 0.04),
    ("StockLevel", 0.04),
];
/// Options.
#[derive(Debug, Clone, Default)]
pub struct TpccConfig {
    /// Warehouses.
    pub warehouses: u64,
}
impl TpccConfig {
    /// Checks.
    pub fn validate(&self) -> Result<(), AppError> {
        Ok(())
    }
}
/// Encoder.
pub struct TpccEncoder;
impl TpccEncoder {
    /// New.
    pub fn new(_c: &TpccConfig, _ops: Vec<usize>, _seed: u64) -> Self {
        Self
    }
}
impl BodyEncoder for TpccEncoder {
    fn encode(&mut self, _t: TypeId, _s: u64, _out: &mut Vec<u8>) {}
}
/// Service.
#[derive(Debug)]
pub struct TpccService;
impl TpccService {
    /// Load.
    pub fn load(_c: &TpccConfig, _ops: Vec<usize>) -> Result<Self, AppError> {
        Err(AppError::Setup("not yet".into()))
    }
}
impl Service for TpccService {
    fn app(&self) -> &'static str {
        "tpcc"
    }
    fn handler(&self, _w: usize) -> Box<dyn psp_runtime::Handler> {
        unreachable!()
    }
    fn describe(&self) -> String {
        String::new()
    }
}
