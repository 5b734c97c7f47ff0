//! Write your own application: one file implementing `App`, one registry
//! entry, then configured, bound to a workload's types, its requests
//! generated and served, and its service times measured (`psp profile`'s
//! measurement).
//!
//! The application: an inventory of item stocks. `GET` reads one item's
//! stock (short); `SUM` adds up the whole inventory (long, with preemption
//! points so that preemptive policies can suspend it). Its one option,
//! `inventory_items`, sets the inventory's size.
//!
//! In the crate, the application is this file as `src/inventory.rs` (with
//! `pub mod inventory;` in `lib.rs`) and one line in `APPS`:
//!
//! ```text
//! pub static APPS: &[AppEntry] = &[spin::SPIN, spin::ECHO, kv::ENTRY, tpcc::ENTRY, inventory::ENTRY];
//! ```
//!
//! after which `psp run --app inventory`, `psp serve --app inventory`,
//! `psp load` and `psp profile --app inventory` drive it (its option read
//! from a workload file's `[app_options]`). Here the registry is extended in
//! the program instead.
//!
//!     cargo run --release -p psp-apps --example own_app

use std::sync::Arc;

use psp_apps::profile::{ProfileOrder, profile};
use psp_apps::{App, AppConfig, AppEntry, AppError, AppOptions, Service};
use psp_runtime::{BodyEncoder, Handler, HandlerError, RequestContext};

/// The operations, in operation-index order.
const OPERATIONS: [&str; 2] = ["GET", "SUM"];
/// Index of GET in [`OPERATIONS`].
const GET: usize = 0;

/// The registry's entry: the name `--app` takes, the mix `psp profile`
/// measures by default, the options a workload file may carry, and how the
/// options make the application.
const ENTRY: AppEntry = AppEntry {
    name: "inventory",
    about: "an inventory's GETs and SUMs",
    default_mix: &[("GET", 0.9), ("SUM", 0.1)],
    workload_options: &["inventory_items"],
    configure: |o: &AppOptions| {
        AppConfig::new(Inventory {
            items: o.count("inventory_items").unwrap_or(10_000),
        })
    },
};

/// The application with its options.
#[derive(Debug, Clone, Copy)]
struct Inventory {
    /// Items in the inventory.
    items: u64,
}

impl App for Inventory {
    fn name(&self) -> &'static str {
        "inventory"
    }

    fn operations(&self) -> Option<&'static [&'static str]> {
        Some(&OPERATIONS)
    }

    fn validate(&self) -> Result<(), AppError> {
        psp_apps::check_range("inventory_items", self.items, 1, 1 << 24).map(|_| ())
    }

    /// What a SUM costs depends on it.
    fn options(&self) -> Vec<(&'static str, u64)> {
        vec![("inventory_items", self.items)]
    }

    fn encoder(&self, ops: Vec<usize>, seed: u64) -> Box<dyn BodyEncoder> {
        Box::new(InventoryEncoder {
            ops,
            items: self.items,
            state: seed | 1,
        })
    }

    fn service(&self, ops: Vec<usize>) -> Result<Arc<dyn Service>, AppError> {
        let stock = (0..self.items).map(|i| i * 7 % 101).collect();
        Ok(Arc::new(InventoryService {
            stock: Arc::new(stock),
            ops: ops.into(),
        }))
    }
}

/// Writes request bodies: GET, an item (u32, little-endian); SUM, nothing.
struct InventoryEncoder {
    ops: Vec<usize>,
    items: u64,
    state: u64,
}

impl BodyEncoder for InventoryEncoder {
    fn encode(&mut self, type_id: u16, _service_ns: u64, out: &mut Vec<u8>) {
        if psp_apps::operation_of(&self.ops, type_id) == Some(GET) {
            // xorshift: cheap, deterministic per seed.
            self.state ^= self.state << 13;
            self.state ^= self.state >> 7;
            self.state ^= self.state << 17;
            out.extend_from_slice(&((self.state % self.items) as u32).to_le_bytes());
        }
    }
}

/// The application, started: the stock every worker reads.
#[derive(Debug)]
struct InventoryService {
    stock: Arc<Vec<u64>>,
    ops: Arc<[usize]>,
}

impl Service for InventoryService {
    fn app(&self) -> &'static str {
        "inventory"
    }

    fn handler(&self, _worker: usize) -> Box<dyn Handler> {
        Box::new(InventoryHandler {
            stock: self.stock.clone(),
            ops: self.ops.clone(),
        })
    }

    fn describe(&self) -> String {
        format!("inventory of {} items", self.stock.len())
    }
}

/// One worker's handler.
struct InventoryHandler {
    stock: Arc<Vec<u64>>,
    ops: Arc<[usize]>,
}

impl Handler for InventoryHandler {
    fn handle(&mut self, ctx: &mut RequestContext<'_>) -> Result<(), HandlerError> {
        let total = match psp_apps::operation_of(&self.ops, ctx.type_id) {
            Some(GET) => {
                let item = ctx
                    .body
                    .first_chunk::<4>()
                    .map(|b| u32::from_le_bytes(*b) as usize)
                    .and_then(|i| self.stock.get(i))
                    .ok_or(HandlerError::BadBody("GET: an item (u32)"))?;
                *item
            }
            Some(_) => {
                let mut total = 0u64;
                for (i, s) in self.stock.iter().enumerate() {
                    total = total.wrapping_add(*s);
                    if i % 1024 == 0 {
                        ctx.preemption_point();
                    }
                }
                total
            }
            None => return Err(HandlerError::BadBody("a type of no operation")),
        };
        ctx.response.extend_from_slice(&total.to_le_bytes());
        Ok(())
    }
}

fn main() {
    // The registry plus this program's line (in the crate: one line in `APPS`).
    let registry: Vec<AppEntry> = psp_apps::APPS.iter().copied().chain([ENTRY]).collect();
    let entry = registry
        .iter()
        .find(|e| e.name == "inventory")
        .expect("registered above");

    // `--app inventory` with `inventory_items = 5000` from a workload file.
    let app =
        (entry.configure)(&AppOptions::new(u64::MAX).with_count("inventory_items", Some(5000)));
    app.validate().expect("in range");
    let types: Vec<String> = entry
        .default_mix
        .iter()
        .map(|(n, _)| n.to_string())
        .collect();
    println!(
        "app {} | operations {:?} | options {:?}",
        app.name(),
        app.operations(),
        app.options()
    );

    // A workload type that names no operation is refused before anything starts.
    let err = app
        .bind(&["PUT".to_string()])
        .expect_err("not an operation");
    println!("refused: {err}");

    // What `psp run` and `psp serve` do: start the service, one handler per
    // worker, requests from the load generator's encoder.
    let service = app.start(&types).expect("starts");
    let mut encoder = app.encoder(&types, 7).expect("encodes");
    let mut handler = service.handler(0);
    let (mut body, mut response) = (Vec::new(), Vec::new());
    for type_id in [0u16, 1] {
        body.clear();
        response.clear();
        encoder.encode(type_id, 0, &mut body);
        handler
            .handle(&mut RequestContext::new(type_id, &body, &mut response, 0))
            .expect("a generated request is served");
        println!(
            "{} ({} body bytes) -> {} reply bytes",
            types[usize::from(type_id)],
            body.len(),
            response.len()
        );
    }

    // What `psp profile` does: each operation's service time, measured alone.
    let mix: Vec<(String, f64)> = entry
        .default_mix
        .iter()
        .map(|&(n, r)| (n.to_string(), r))
        .collect();
    for t in profile(&app, &mix, 200, ProfileOrder::Mix, 1).expect("measures") {
        println!(
            "{:<4} {:>6} requests, mean {:.2} us",
            t.name, t.count, t.mean_us
        );
        assert_eq!(t.errors, 0);
    }
    println!("{}", service.describe());
}

#[test]
fn the_example_runs() {
    main();
}
