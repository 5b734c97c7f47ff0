//! Transaction inputs: their rules (clauses 2.4.1-2.8.1), their byte
//! encoding and their generator.

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use thiserror::Error;

use super::text::{C_ID_RUN, C_ITEM_RUN, C_LAST_RUN, nurand};
use super::{MAX_CUSTOMERS, MAX_DISTRICTS, MAX_WAREHOUSES, Scale, ScaleError, TxnKind, check};

/// Fewest lines of a NewOrder.
const MIN_LINES: usize = 5;
/// Most lines of a NewOrder.
const MAX_LINES: usize = 15;
/// Bytes of a NewOrder before its lines.
const NEW_ORDER_HEAD: usize = 6;
/// Bytes of one NewOrder line.
const LINE_BYTES: usize = 7;

/// Longest encoded body (a NewOrder with 15 lines).
pub const MAX_BODY: usize = NEW_ORDER_HEAD + MAX_LINES * LINE_BYTES;

// Generated bodies must fit the runtime's 256-byte slots.
const _: () = assert!(MAX_BODY < 256);

/// Why a body (or an input built in code) is not a valid input.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BodyError {
    /// The body ends inside a field.
    #[error("body ends early")]
    Truncated,
    /// Bytes follow the last field.
    #[error("{0} bytes after the input")]
    Trailing(usize),
    /// Longer than any input ([`MAX_BODY`]).
    #[error("body of {0} bytes is longer than any input")]
    TooLong(usize),
    /// A field outside the range the input rules allow.
    #[error("{field} = {value} is outside [{min}, {max}]")]
    Field {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// Smallest valid value.
        min: u64,
        /// Largest valid value.
        max: u64,
    },
    /// A customer selector tag other than 0 (by id) or 1 (by last name).
    #[error("customer selector tag {0} is neither 0 (id) nor 1 (last name)")]
    Selector(u8),
}

fn field(name: &'static str, value: u64, min: u64, max: u64) -> Result<(), BodyError> {
    check(name, value, min, max).map_err(|e| BodyError::Field {
        field: e.field,
        value: e.value,
        min: e.min,
        max: e.max,
    })
}

fn warehouse(name: &'static str, w: u16) -> Result<(), BodyError> {
    field(name, w.into(), 1, MAX_WAREHOUSES.into())
}

fn district(name: &'static str, d: u8) -> Result<(), BodyError> {
    field(name, d.into(), 1, MAX_DISTRICTS.into())
}

fn customer_id(c: u16) -> Result<(), BodyError> {
    field("c_id", c.into(), 1, MAX_CUSTOMERS.into())
}

/// How a Payment or OrderStatus names its customer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CustomerSelector {
    /// By `c_id` (`1..=3000`).
    Id(u16),
    /// By last name, given as its number (`0..=999`, see
    /// [`last_name`](super::last_name)): the middle one by first name of the
    /// district's customers with that name.
    LastName(u16),
}

impl CustomerSelector {
    fn validate(self) -> Result<(), BodyError> {
        match self {
            CustomerSelector::Id(c) => customer_id(c),
            CustomerSelector::LastName(n) => field("c_last", n.into(), 0, 999),
        }
    }

    fn encode(self, out: &mut Vec<u8>) {
        let (tag, value) = match self {
            CustomerSelector::Id(c) => (0u8, c),
            CustomerSelector::LastName(n) => (1, n),
        };
        out.push(tag);
        out.extend_from_slice(&value.to_le_bytes());
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self, BodyError> {
        let tag = r.u8()?;
        let value = r.u16()?;
        match tag {
            0 => Ok(CustomerSelector::Id(value)),
            1 => Ok(CustomerSelector::LastName(value)),
            t => Err(BodyError::Selector(t)),
        }
    }
}

/// Payment's input (clause 2.5.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PaymentInput {
    /// The warehouse paid at.
    pub w_id: u16,
    /// The district paid at.
    pub d_id: u8,
    /// The customer's warehouse (another one for 15% of payments).
    pub c_w_id: u16,
    /// The customer's district.
    pub c_d_id: u8,
    /// The customer.
    pub customer: CustomerSelector,
    /// `h_amount` in cents (`100..=500_000`).
    pub amount_cents: u32,
}

/// Order-Status's input (clause 2.6.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderStatusInput {
    /// The customer's warehouse.
    pub w_id: u16,
    /// The customer's district.
    pub d_id: u8,
    /// The customer.
    pub customer: CustomerSelector,
}

/// One line of a NewOrder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewOrderLine {
    /// The item (`>= 1`; an id past the item table rolls the order back).
    pub i_id: u32,
    /// The supplying warehouse.
    pub supply_w_id: u16,
    /// Quantity (`1..=10`).
    pub quantity: u8,
}

/// New-Order's input (clause 2.4.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewOrderInput {
    /// The home warehouse.
    pub w_id: u16,
    /// The district.
    pub d_id: u8,
    /// The customer (`1..=3000`).
    pub c_id: u16,
    /// The lines (`5..=15`).
    pub lines: Vec<NewOrderLine>,
}

/// Delivery's input (clause 2.7.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveryInput {
    /// The warehouse.
    pub w_id: u16,
    /// `o_carrier_id` (`1..=10`).
    pub carrier_id: u8,
}

/// Stock-Level's input (clause 2.8.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StockLevelInput {
    /// The warehouse.
    pub w_id: u16,
    /// The district.
    pub d_id: u8,
    /// The low-stock threshold (`10..=20`).
    pub threshold: u8,
}

/// One transaction's input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnInput {
    /// A Payment.
    Payment(PaymentInput),
    /// An Order-Status.
    OrderStatus(OrderStatusInput),
    /// A New-Order.
    NewOrder(NewOrderInput),
    /// A Delivery.
    Delivery(DeliveryInput),
    /// A Stock-Level.
    StockLevel(StockLevelInput),
}

impl TxnInput {
    /// Hands a NewOrder's line storage to `spare` (for
    /// [`TxnInput::decode_reusing`] or a generator); other inputs own none.
    pub fn recycle_into(self, spare: &mut Vec<NewOrderLine>) {
        if let TxnInput::NewOrder(o) = self {
            *spare = o.lines;
        }
    }

    /// The transaction's kind.
    pub fn kind(&self) -> TxnKind {
        match self {
            TxnInput::Payment(_) => TxnKind::Payment,
            TxnInput::OrderStatus(_) => TxnKind::OrderStatus,
            TxnInput::NewOrder(_) => TxnKind::NewOrder,
            TxnInput::Delivery(_) => TxnKind::Delivery,
            TxnInput::StockLevel(_) => TxnKind::StockLevel,
        }
    }

    /// Checks every field against the input rules, independent of any
    /// database's scale (ids within a database are checked when executed).
    ///
    /// # Errors
    /// The first field out of its range.
    pub fn validate(&self) -> Result<(), BodyError> {
        match self {
            TxnInput::Payment(p) => {
                warehouse("w_id", p.w_id)?;
                district("d_id", p.d_id)?;
                warehouse("c_w_id", p.c_w_id)?;
                district("c_d_id", p.c_d_id)?;
                p.customer.validate()?;
                field("h_amount", p.amount_cents.into(), 100, 500_000)
            }
            TxnInput::OrderStatus(o) => {
                warehouse("w_id", o.w_id)?;
                district("d_id", o.d_id)?;
                o.customer.validate()
            }
            TxnInput::NewOrder(n) => {
                warehouse("w_id", n.w_id)?;
                district("d_id", n.d_id)?;
                customer_id(n.c_id)?;
                field(
                    "ol_cnt",
                    n.lines.len() as u64,
                    MIN_LINES as u64,
                    MAX_LINES as u64,
                )?;
                for l in &n.lines {
                    field("ol_i_id", l.i_id.into(), 1, u32::MAX.into())?;
                    warehouse("ol_supply_w_id", l.supply_w_id)?;
                    field("ol_quantity", l.quantity.into(), 1, 10)?;
                }
                Ok(())
            }
            TxnInput::Delivery(d) => {
                warehouse("w_id", d.w_id)?;
                field("o_carrier_id", d.carrier_id.into(), 1, 10)
            }
            TxnInput::StockLevel(s) => {
                warehouse("w_id", s.w_id)?;
                district("d_id", s.d_id)?;
                field("threshold", s.threshold.into(), 10, 20)
            }
        }
    }

    /// Appends the body (little-endian fields, at most [`MAX_BODY`] bytes for
    /// a valid input) to `out`. The kind travels separately, as the request
    /// type.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            TxnInput::Payment(p) => {
                out.extend_from_slice(&p.w_id.to_le_bytes());
                out.push(p.d_id);
                out.extend_from_slice(&p.c_w_id.to_le_bytes());
                out.push(p.c_d_id);
                p.customer.encode(out);
                out.extend_from_slice(&p.amount_cents.to_le_bytes());
            }
            TxnInput::OrderStatus(o) => {
                out.extend_from_slice(&o.w_id.to_le_bytes());
                out.push(o.d_id);
                o.customer.encode(out);
            }
            TxnInput::NewOrder(n) => {
                out.extend_from_slice(&n.w_id.to_le_bytes());
                out.push(n.d_id);
                out.extend_from_slice(&n.c_id.to_le_bytes());
                // An invalid count (over 255) encodes wrongly, and decoding
                // then rejects the body.
                out.push(n.lines.len() as u8);
                for l in &n.lines {
                    out.extend_from_slice(&l.i_id.to_le_bytes());
                    out.extend_from_slice(&l.supply_w_id.to_le_bytes());
                    out.push(l.quantity);
                }
            }
            TxnInput::Delivery(d) => {
                out.extend_from_slice(&d.w_id.to_le_bytes());
                out.push(d.carrier_id);
            }
            TxnInput::StockLevel(s) => {
                out.extend_from_slice(&s.w_id.to_le_bytes());
                out.push(s.d_id);
                out.push(s.threshold);
            }
        }
    }

    /// Decodes and validates the body of a `kind` request.
    ///
    /// # Errors
    /// A body that is too short or too long, or a field out of its range.
    pub fn decode(kind: TxnKind, body: &[u8]) -> Result<TxnInput, BodyError> {
        Self::decode_reusing(kind, body, &mut Vec::new())
    }

    /// As [`TxnInput::decode`], a NewOrder's lines going into `spare`'s
    /// storage (taken; give it back with [`TxnInput::recycle_into`]), so that
    /// a worker decoding request after request allocates nothing.
    ///
    /// # Errors
    /// As [`TxnInput::decode`].
    pub fn decode_reusing(
        kind: TxnKind,
        body: &[u8],
        spare: &mut Vec<NewOrderLine>,
    ) -> Result<TxnInput, BodyError> {
        if body.len() > MAX_BODY {
            return Err(BodyError::TooLong(body.len()));
        }
        let mut r = Reader { buf: body };
        let input = match kind {
            TxnKind::Payment => TxnInput::Payment(PaymentInput {
                w_id: r.u16()?,
                d_id: r.u8()?,
                c_w_id: r.u16()?,
                c_d_id: r.u8()?,
                customer: CustomerSelector::decode(&mut r)?,
                amount_cents: r.u32()?,
            }),
            TxnKind::OrderStatus => TxnInput::OrderStatus(OrderStatusInput {
                w_id: r.u16()?,
                d_id: r.u8()?,
                customer: CustomerSelector::decode(&mut r)?,
            }),
            TxnKind::NewOrder => {
                let w_id = r.u16()?;
                let d_id = r.u8()?;
                let c_id = r.u16()?;
                let n = usize::from(r.u8()?);
                // Checked before reading so the allocation stays bounded.
                field("ol_cnt", n as u64, MIN_LINES as u64, MAX_LINES as u64)?;
                let mut lines = std::mem::take(spare);
                lines.clear();
                lines.reserve(n);
                for _ in 0..n {
                    lines.push(NewOrderLine {
                        i_id: r.u32()?,
                        supply_w_id: r.u16()?,
                        quantity: r.u8()?,
                    });
                }
                TxnInput::NewOrder(NewOrderInput {
                    w_id,
                    d_id,
                    c_id,
                    lines,
                })
            }
            TxnKind::Delivery => TxnInput::Delivery(DeliveryInput {
                w_id: r.u16()?,
                carrier_id: r.u8()?,
            }),
            TxnKind::StockLevel => TxnInput::StockLevel(StockLevelInput {
                w_id: r.u16()?,
                d_id: r.u8()?,
                threshold: r.u8()?,
            }),
        };
        if !r.buf.is_empty() {
            return Err(BodyError::Trailing(r.buf.len()));
        }
        input.validate()?;
        Ok(input)
    }
}

/// Reads little-endian fields off the front of a body.
struct Reader<'a> {
    buf: &'a [u8],
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], BodyError> {
        let (head, rest) = self
            .buf
            .split_first_chunk::<N>()
            .ok_or(BodyError::Truncated)?;
        self.buf = rest;
        Ok(*head)
    }

    fn u8(&mut self) -> Result<u8, BodyError> {
        Ok(self.take::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, BodyError> {
        Ok(u16::from_le_bytes(self.take()?))
    }

    fn u32(&mut self) -> Result<u32, BodyError> {
        Ok(u32::from_le_bytes(self.take()?))
    }
}

/// Draws transaction inputs per the input rules of clauses 2.4.1-2.8.1 for
/// a database of a given [`Scale`], as one terminal would.
///
/// NURand's run-time constants are the same for every generator (clause
/// 2.1.6 asks that all terminals share them), whatever the seed.
#[derive(Debug, Clone)]
pub struct InputGenerator {
    rng: SmallRng,
    scale: Scale,
    home: Option<u16>,
    /// Order lines handed back by [`InputGenerator::recycle`], reused by the
    /// next NewOrder (a generator in a request path allocates nothing).
    spare_lines: Vec<NewOrderLine>,
}

impl InputGenerator {
    /// A generator for `scale` drawing from `seed`. With a home warehouse
    /// every input is for it (a terminal's fixed `w_id`, clause 2.4.1.1);
    /// without one each input draws its warehouse uniformly.
    ///
    /// # Errors
    /// A scale out of range, or a home warehouse not in it.
    pub fn new(
        scale: Scale,
        seed: u64,
        home_warehouse: Option<u16>,
    ) -> Result<InputGenerator, ScaleError> {
        scale.validate()?;
        if let Some(w) = home_warehouse {
            check("home_warehouse", w.into(), 1, scale.warehouses.into())?;
        }
        Ok(InputGenerator {
            rng: SmallRng::seed_from_u64(seed),
            scale,
            home: home_warehouse,
            spare_lines: Vec::with_capacity(MAX_LINES),
        })
    }

    /// Takes back an input's storage for the next one to reuse.
    pub fn recycle(&mut self, input: TxnInput) {
        input.recycle_into(&mut self.spare_lines);
    }

    /// A kind drawn from the standard mix.
    pub fn next_kind(&mut self) -> TxnKind {
        let mut x: f64 = self.rng.random();
        for (kind, share) in TxnKind::ALL.iter().zip(TxnKind::STANDARD_MIX) {
            if x < share {
                return *kind;
            }
            x -= share;
        }
        TxnKind::StockLevel
    }

    /// An input of a kind drawn from the standard mix.
    pub fn next_input(&mut self) -> TxnInput {
        let kind = self.next_kind();
        self.generate(kind)
    }

    /// An input of `kind`.
    pub fn generate(&mut self, kind: TxnKind) -> TxnInput {
        match kind {
            TxnKind::Payment => TxnInput::Payment(self.payment()),
            TxnKind::OrderStatus => TxnInput::OrderStatus(OrderStatusInput {
                w_id: self.warehouse(),
                d_id: self.district(),
                customer: self.customer(),
            }),
            TxnKind::NewOrder => TxnInput::NewOrder(self.new_order()),
            TxnKind::Delivery => TxnInput::Delivery(DeliveryInput {
                w_id: self.warehouse(),
                carrier_id: self.rng.random_range(1..=10),
            }),
            TxnKind::StockLevel => TxnInput::StockLevel(StockLevelInput {
                w_id: self.warehouse(),
                d_id: self.district(),
                threshold: self.rng.random_range(10..=20),
            }),
        }
    }

    fn warehouse(&mut self) -> u16 {
        match self.home {
            Some(w) => w,
            None => self.rng.random_range(1..=self.scale.warehouses),
        }
    }

    /// A warehouse other than `w` (there must be two or more).
    fn other_warehouse(&mut self, w: u16) -> u16 {
        let r = self.rng.random_range(1..self.scale.warehouses);
        if r >= w { r + 1 } else { r }
    }

    fn district(&mut self) -> u8 {
        self.rng
            .random_range(1..=self.scale.districts_per_warehouse)
    }

    fn customer_id(&mut self) -> u16 {
        let c = self.scale.customers_per_district;
        nurand(&mut self.rng, 1023, C_ID_RUN, 1, c) as u16
    }

    /// 60% by last name, 40% by id (clauses 2.5.1.2 and 2.6.1.2).
    fn customer(&mut self) -> CustomerSelector {
        if self.rng.random_range(1..=100) <= 60 {
            let names = u32::from(self.scale.last_names());
            CustomerSelector::LastName(nurand(&mut self.rng, 255, C_LAST_RUN, 0, names - 1) as u16)
        } else {
            CustomerSelector::Id(self.customer_id())
        }
    }

    fn payment(&mut self) -> PaymentInput {
        let w_id = self.warehouse();
        let d_id = self.district();
        // 15% of customers belong to another warehouse, when there is one.
        let (c_w_id, c_d_id) = if self.scale.warehouses > 1 && self.rng.random_range(1..=100) > 85 {
            (self.other_warehouse(w_id), self.district())
        } else {
            (w_id, d_id)
        };
        PaymentInput {
            w_id,
            d_id,
            c_w_id,
            c_d_id,
            customer: self.customer(),
            amount_cents: self.rng.random_range(100..=500_000),
        }
    }

    fn new_order(&mut self) -> NewOrderInput {
        let w_id = self.warehouse();
        let d_id = self.district();
        let c_id = self.customer_id();
        let count = self.rng.random_range(MIN_LINES..=MAX_LINES);
        // 1% of orders end on an unused item and roll back.
        let rollback = self.rng.random_range(1..=100) == 1;
        let mut lines = std::mem::take(&mut self.spare_lines);
        lines.clear();
        for i in 0..count {
            let i_id = if rollback && i + 1 == count {
                self.scale.items + 1
            } else {
                nurand(&mut self.rng, 8191, C_ITEM_RUN, 1, self.scale.items)
            };
            // 1% of lines come from another warehouse, when there is one.
            let supply_w_id = if self.scale.warehouses > 1 && self.rng.random_range(1..=100) == 1 {
                self.other_warehouse(w_id)
            } else {
                w_id
            };
            lines.push(NewOrderLine {
                i_id,
                supply_w_id,
                quantity: self.rng.random_range(1..=10),
            });
        }
        NewOrderInput {
            w_id,
            d_id,
            c_id,
            lines,
        }
    }
}
