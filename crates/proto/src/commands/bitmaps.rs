//! Strings as bitmaps: SETBIT, GETBIT, BITCOUNT and BITPOS (with BYTE and
//! BIT ranges), BITOP (AND, OR, XOR, NOT) and BITFIELD (and BITFIELD_RO:
//! signed and unsigned fields of 1 to 64 and 63 bits, WRAP, SAT and FAIL
//! overflow), as Redis 7.0 runs them: bit 0
//! is the most significant bit of the first byte, a missing key is all
//! zeros, a write past the end grows the string with zero bytes up to
//! Redis's bound (512 MiB: a bit offset below 2^32), in place.
//!
//! Each command is one arm of [`run`], which [`super::run`] calls for
//! this family's commands (its column of `COMMANDS`).

use super::*;

/// Redis's bound on a string (proto-max-bulk-len), in bits.
const MAX_BITS: u64 = (MAX_STRING as u64) << 3;
const BAD_OFFSET: &[u8] = b"ERR bit offset is not an integer or out of range";

/// Runs one of this family's commands (`name` is lowercase).
pub(super) fn run<'d>(
    name: &[u8],
    a: &[&[u8]],
    db: &'d Db,
    w: &mut Reply<'_>,
    mut held: Option<&mut Guard<'d>>,
) -> Res {
    let n = a.len();
    let nm = std::str::from_utf8(name).unwrap_or("?");
    match name {
        b"setbit" => {
            arity(n == 3, nm)?;
            let offset = bit_offset(a[1])?;
            let on = match parse_i64(a[2]) {
                Some(0) => false,
                Some(1) => true,
                _ => return Err(Fail::Msg(b"ERR bit is not an integer or out of range")),
            };
            let (byte, mask) = ((offset >> 3) as usize, 0x80u8 >> (offset & 7));
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let old = g.update(a[0], |slot| {
                let slot = match string_of_at_least(slot, byte + 1) {
                    Ok(v) => v,
                    Err(e) => return (false, Err(e)),
                };
                let old = slot[byte] & mask != 0;
                if on {
                    slot[byte] |= mask;
                } else {
                    slot[byte] &= !mask;
                }
                (true, Ok(old))
            })?;
            w.int(i64::from(old));
        }
        b"bitfield" | b"bitfield_ro" => {
            arity(n >= 1, nm)?;
            let ops = field_ops(&a[1..])?;
            let writes = ops.iter().any(|o| o.kind != FieldKind::Get);
            if !writes {
                // Reads only: a missing key is all zeros.
                let value = snapshot(db, &mut held, a[0])?;
                let v: &[u8] = match value.as_ref() {
                    None => &[],
                    Some(Value::Str(v)) => v,
                    Some(_) => return Err(Fail::Msg(WRONGTYPE)),
                };
                w.array(ops.len());
                for o in &ops {
                    w.int(o.read(v));
                }
                return Ok(());
            }
            if name == b"bitfield_ro" {
                return Err(Fail::Msg(
                    b"ERR BITFIELD_RO only supports the GET subcommand",
                ));
            }
            // The string grows to the farthest bit written before any
            // operation runs, as Redis's does (even when every write then
            // fails its overflow check).
            let last_bit = ops
                .iter()
                .filter(|o| o.kind != FieldKind::Get)
                .map(|o| o.offset + u64::from(o.bits) - 1)
                .max()
                .unwrap_or(0);
            let len = (last_bit >> 3) as usize + 1;
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let answers = g.update(a[0], |slot| {
                let slot = match string_of_at_least(slot, len) {
                    Ok(v) => v,
                    Err(e) => return (false, Err(e)),
                };
                let answers: Vec<Option<i64>> = ops.iter().map(|o| o.apply(slot)).collect();
                (true, Ok(answers))
            })?;
            w.array(answers.len());
            for a in answers {
                match a {
                    Some(v) => w.int(v),
                    None => w.nil(),
                }
            }
        }
        b"getbit" => {
            arity(n == 2, nm)?;
            let offset = bit_offset(a[1])?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let bit = match g.get(a[0]).map(|e| &e.value) {
                None => false,
                Some(Value::Str(v)) => v
                    .get((offset >> 3) as usize)
                    .is_some_and(|b| b & (0x80 >> (offset & 7)) != 0),
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            };
            w.int(i64::from(bit));
        }
        b"bitcount" => {
            arity(n >= 1, nm)?;
            // The key first: a missing one counts 0 whatever the range.
            let value = snapshot(db, &mut held, a[0])?;
            let v: &[u8] = match value.as_ref() {
                None => {
                    w.int(0);
                    return Ok(());
                }
                Some(Value::Str(v)) => v,
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            };
            let (lo, hi) = match n {
                1 => (0, v.len() as i64 * 8 - 1),
                3 | 4 => {
                    let (start, end) = (int_arg(a[1])?, int_arg(a[2])?);
                    let bits = match a.get(3) {
                        None => false,
                        Some(m) if m.eq_ignore_ascii_case(b"bit") => true,
                        Some(m) if m.eq_ignore_ascii_case(b"byte") => false,
                        Some(_) => return Err(Fail::Msg(SYNTAX)),
                    };
                    match bit_range(v.len(), start, end, bits) {
                        Some(r) => r,
                        None => {
                            w.int(0);
                            return Ok(());
                        }
                    }
                }
                _ => return Err(Fail::Msg(SYNTAX)),
            };
            w.int(count_ones(v, lo, hi) as i64);
        }
        b"bitpos" => {
            arity(n >= 2, nm)?;
            let target = match parse_i64(a[1]) {
                Some(b @ (0 | 1)) => b == 1,
                Some(_) => return Err(Fail::Msg(b"ERR The bit argument must be 1 or 0.")),
                None => return Err(Fail::Msg(NOT_INTEGER)),
            };
            let value = snapshot(db, &mut held, a[0])?;
            let v: &[u8] = match value.as_ref() {
                // All zeros, without end.
                None => {
                    w.int(if target { -1 } else { 0 });
                    return Ok(());
                }
                Some(Value::Str(v)) => v,
                Some(_) => return Err(Fail::Msg(WRONGTYPE)),
            };
            let len = v.len() as i64;
            let (range, end_given) = match n {
                2 => ((len > 0).then(|| (0, len * 8 - 1)), false),
                3..=5 => {
                    let start = int_arg(a[2])?;
                    let bits = match a.get(4) {
                        None => false,
                        Some(m) if m.eq_ignore_ascii_case(b"bit") => true,
                        Some(m) if m.eq_ignore_ascii_case(b"byte") => false,
                        Some(_) => return Err(Fail::Msg(SYNTAX)),
                    };
                    let end = match a.get(3) {
                        Some(e) => int_arg(e)?,
                        None => len - 1,
                    };
                    (bit_range(v.len(), start, end, bits), n >= 4)
                }
                _ => return Err(Fail::Msg(SYNTAX)),
            };
            // An empty range holds neither a 0 nor a 1.
            let Some((lo, hi)) = range else {
                w.int(-1);
                return Ok(());
            };
            let pos = match find_bit(v, lo, hi, target) {
                Some(p) => p,
                // Past the string everything is 0, unless an end was given.
                None if !target && !end_given => (hi / 8 + 1) * 8,
                None => -1,
            };
            w.int(pos);
        }
        b"bitop" => {
            arity(n >= 3, nm)?;
            let op = a[0].to_ascii_lowercase();
            if !matches!(op.as_slice(), b"and" | b"or" | b"xor" | b"not") {
                return Err(Fail::Msg(SYNTAX));
            }
            if op == b"not" && n != 3 {
                return Err(Fail::Msg(
                    b"ERR BITOP NOT must be called with a single source key.",
                ));
            }
            let mut g = lock(db, &mut held, &a[1..], true)?;
            let mut sources: Vec<Box<[u8]>> = Vec::with_capacity(n - 2);
            for k in &a[2..] {
                match g.get(k).map(|e| &e.value) {
                    None => sources.push(Box::default()),
                    Some(Value::Str(v)) => sources.push(v.clone()),
                    Some(_) => return Err(Fail::Msg(WRONGTYPE)),
                }
            }
            let len = sources.iter().map(|s| s.len()).max().unwrap_or(0);
            let byte = |s: &[u8], i: usize| s.get(i).copied().unwrap_or(0);
            let result: Vec<u8> = (0..len)
                .map(|i| {
                    let mut bytes = sources.iter().map(|s| byte(s, i));
                    let first = bytes.next().unwrap_or(0);
                    match op.as_slice() {
                        b"and" => bytes.fold(first, |x, y| x & y),
                        b"or" => bytes.fold(first, |x, y| x | y),
                        b"xor" => bytes.fold(first, |x, y| x ^ y),
                        _ => !first,
                    }
                })
                .collect();
            // A new value (no deadline); an empty one deletes the key.
            store_result(
                &mut g,
                a[1],
                (len > 0).then(|| Value::Str(result.into_boxed_slice())),
            );
            w.int(len as i64);
        }
        _ => unreachable!("routed to bitmaps by name"),
    }
    Ok(())
}

/// The bytes of bits `lo..=hi` of `v` (bit 0: the first byte's top bit),
/// each masked to the bits of the range it holds, with its first bit's
/// position.
fn masked_bytes(v: &[u8], lo: i64, hi: i64) -> impl Iterator<Item = (i64, u8)> + '_ {
    // An empty range (an empty string's whole range is 0..=-1) has none.
    let (first, last) = if hi < lo {
        (1, 0)
    } else {
        ((lo >> 3) as usize, (hi >> 3) as usize)
    };
    (first..=last).map(move |i| {
        let mut b = v[i];
        if i == first {
            b &= 0xFF >> (lo & 7);
        }
        if i == last {
            b &= 0xFF << (7 - (hi & 7));
        }
        (i as i64 * 8, b)
    })
}

/// Set bits among bits `lo..=hi` of `v`, a byte at a time.
fn count_ones(v: &[u8], lo: i64, hi: i64) -> u64 {
    masked_bytes(v, lo, hi)
        .map(|(_, b)| u64::from(b.count_ones()))
        .sum()
}

/// The first bit of `lo..=hi` of `v` that is `target`, a byte at a time.
fn find_bit(v: &[u8], lo: i64, hi: i64, target: bool) -> Option<i64> {
    masked_bytes(v, lo, hi).find_map(|(at, b)| {
        // Bits outside the range read as the opposite of the target.
        let in_range = {
            let from = (lo - at).clamp(0, 8) as u32;
            let to = (hi - at + 1).clamp(0, 8) as u32;
            (0xFFu16 >> from & (0xFF00u16 >> to)) as u8
        };
        let hits = if target { b } else { !b & in_range };
        (hits != 0).then(|| at + i64::from(hits.leading_zeros()))
    })
}

/// BITCOUNT's and BITPOS's `start..=end` over a string of `len` bytes, in
/// bytes or (with BIT) bits, as Redis converts it (negative from the end,
/// clamped), as a bit range; `None` when it is empty.
fn bit_range(len: usize, start: i64, end: i64, bits: bool) -> Option<(i64, i64)> {
    let total = if bits { len as i64 * 8 } else { len as i64 };
    if start < 0 && end < 0 && start > end {
        return None;
    }
    let fix = |i: i64| if i < 0 { (total + i).max(0) } else { i };
    let (start, end) = (fix(start), fix(end).min(total - 1));
    if start > end {
        return None;
    }
    Some(if bits {
        (start, end)
    } else {
        (start * 8, end * 8 + 7)
    })
}

/// The string in `slot`, made (empty) if there is none and grown with zero
/// bytes to at least `len` bytes, as a bit write finds it; WRONGTYPE for
/// another type.
fn string_of_at_least(slot: &mut Option<Entry>, len: usize) -> Result<&mut Box<[u8]>, Fail> {
    let entry = slot.get_or_insert_with(|| Entry::new(Value::Str(Box::default())));
    let Value::Str(v) = &mut entry.value else {
        return Err(Fail::Msg(WRONGTYPE));
    };
    if v.len() < len {
        let mut grown = std::mem::take(v).into_vec();
        grown.resize(len, 0);
        *v = grown.into_boxed_slice();
    }
    Ok(v)
}

/// A bit offset as Redis reads it: an integer in canonical form from 0 to
/// 2^32 - 1 (a string of 512 MiB).
fn bit_offset(v: &[u8]) -> Result<u64, Fail> {
    parse_i64(v)
        .and_then(|o| u64::try_from(o).ok())
        .filter(|&o| o < MAX_BITS)
        .ok_or(Fail::Msg(BAD_OFFSET))
}

/// What a BITFIELD operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldKind {
    Get,
    Set,
    Incrby,
}

/// BITFIELD's OVERFLOW behaviour, for the writes after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// One parsed BITFIELD operation.
#[derive(Debug, Clone, Copy)]
struct FieldOp {
    kind: FieldKind,
    signed: bool,
    /// 1..=64 signed, 1..=63 unsigned.
    bits: u32,
    /// In bits, below [`MAX_BITS`].
    offset: u64,
    /// SET's value or INCRBY's increment.
    value: i64,
    overflow: Overflow,
}

const BAD_FIELD_TYPE: &[u8] = b"ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

/// BITFIELD's operations from its arguments after the key, every one checked
/// before any runs, in Redis's order (sub-command, type, offset, value).
fn field_ops(a: &[&[u8]]) -> Result<Vec<FieldOp>, Fail> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 0;
    while j < a.len() {
        let rest = a.len() - j - 1;
        let sub = a[j];
        let kind = if sub.eq_ignore_ascii_case(b"get") && rest >= 2 {
            FieldKind::Get
        } else if sub.eq_ignore_ascii_case(b"set") && rest >= 3 {
            FieldKind::Set
        } else if sub.eq_ignore_ascii_case(b"incrby") && rest >= 3 {
            FieldKind::Incrby
        } else if sub.eq_ignore_ascii_case(b"overflow") && rest >= 1 {
            let t = a[j + 1];
            overflow = if t.eq_ignore_ascii_case(b"wrap") {
                Overflow::Wrap
            } else if t.eq_ignore_ascii_case(b"sat") {
                Overflow::Sat
            } else if t.eq_ignore_ascii_case(b"fail") {
                Overflow::Fail
            } else {
                return Err(Fail::Msg(b"ERR Invalid OVERFLOW type specified"));
            };
            j += 2;
            continue;
        } else {
            return Err(Fail::Msg(SYNTAX));
        };
        let (signed, bits) = field_type(a[j + 1])?;
        let offset = field_offset(a[j + 2], bits)?;
        let value = if kind == FieldKind::Get {
            0
        } else {
            parse_i64(a[j + 3]).ok_or(Fail::Msg(NOT_INTEGER))?
        };
        ops.push(FieldOp {
            kind,
            signed,
            bits,
            offset,
            value,
            overflow,
        });
        j += if kind == FieldKind::Get { 3 } else { 4 };
    }
    Ok(ops)
}

/// `i1`..`i64` or `u1`..`u63` (lowercase, as Redis takes them).
fn field_type(t: &[u8]) -> Result<(bool, u32), Fail> {
    let signed = match t.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(Fail::Msg(BAD_FIELD_TYPE)),
    };
    match parse_i64(&t[1..]) {
        Some(b) if b >= 1 && b <= if signed { 64 } else { 63 } => Ok((signed, b as u32)),
        _ => Err(Fail::Msg(BAD_FIELD_TYPE)),
    }
}

/// A field's offset in bits: `N`, or `#N` for the N-th field of this width.
fn field_offset(v: &[u8], bits: u32) -> Result<u64, Fail> {
    let (index, by) = match v.strip_prefix(b"#") {
        Some(rest) => (rest, i64::from(bits)),
        None => (v, 1),
    };
    parse_i64(index)
        .and_then(|o| o.checked_mul(by))
        .and_then(|o| u64::try_from(o).ok())
        .filter(|&o| o < MAX_BITS)
        .ok_or(Fail::Msg(BAD_OFFSET))
}

impl FieldOp {
    /// The field in `v` (zeros past its end).
    fn read(&self, v: &[u8]) -> i64 {
        let raw = read_bits(v, self.offset, self.bits);
        if self.signed {
            sign_extend(raw, self.bits)
        } else {
            raw as i64
        }
    }

    /// Runs a write (or a read) on `v`, which holds every bit it touches:
    /// the reply, `None` where FAIL refused an overflow (nothing written).
    fn apply(&self, v: &mut [u8]) -> Option<i64> {
        let old = self.read(v);
        let (new, overflowed, reply) = match self.kind {
            FieldKind::Get => return Some(old),
            FieldKind::Set => {
                let (new, over) = self.check(self.value, 0);
                (new, over, old)
            }
            FieldKind::Incrby => {
                let (new, over) = self.check(old, self.value);
                (new, over, new)
            }
        };
        if overflowed && self.overflow == Overflow::Fail {
            return None;
        }
        write_bits(v, self.offset, self.bits, new as u64);
        Some(reply)
    }

    /// `value + incr` in this field's type under its overflow rule, and
    /// whether it overflowed (Redis's checkSignedBitfieldOverflow and
    /// checkUnsignedBitfieldOverflow).
    fn check(&self, value: i64, incr: i64) -> (i64, bool) {
        let bits = self.bits;
        let wrap = || {
            let sum = (value as u64).wrapping_add(incr as u64);
            let raw = if bits == 64 {
                sum
            } else {
                sum & ((1u64 << bits) - 1)
            };
            if self.signed {
                sign_extend(raw, bits)
            } else {
                raw as i64
            }
        };
        let (max, min) = if self.signed {
            let max = if bits == 64 {
                i64::MAX as i128
            } else {
                (1i128 << (bits - 1)) - 1
            };
            (max, -max - 1)
        } else {
            ((1i128 << bits) - 1, 0)
        };
        // Unsigned fields take the value as Redis does: its 64-bit pattern.
        let base = if self.signed {
            i128::from(value)
        } else {
            i128::from(value as u64)
        };
        let sum = base + i128::from(incr);
        let limit = if base > max || sum > max {
            max
        } else if base < min || sum < min {
            min
        } else {
            return (sum as i64, false);
        };
        match self.overflow {
            Overflow::Wrap => (wrap(), true),
            Overflow::Sat => (limit as i64, true),
            Overflow::Fail => (0, true),
        }
    }
}

/// `bits` bits of `v` from bit `offset` (bit 0: the first byte's most
/// significant), zeros past the end.
fn read_bits(v: &[u8], offset: u64, bits: u32) -> u64 {
    (0..u64::from(bits)).fold(0, |acc, j| {
        let at = offset + j;
        let bit = v
            .get((at >> 3) as usize)
            .is_some_and(|b| b & (0x80 >> (at & 7)) != 0);
        (acc << 1) | u64::from(bit)
    })
}

/// Writes the low `bits` bits of `value` into `v` from bit `offset`.
fn write_bits(v: &mut [u8], offset: u64, bits: u32, value: u64) {
    for j in 0..u64::from(bits) {
        let at = offset + j;
        let mask = 0x80u8 >> (at & 7);
        let byte = &mut v[(at >> 3) as usize];
        if (value >> (u64::from(bits) - 1 - j)) & 1 == 1 {
            *byte |= mask;
        } else {
            *byte &= !mask;
        }
    }
}

/// The low `bits` bits of `raw` as a two's-complement number.
fn sign_extend(raw: u64, bits: u32) -> i64 {
    if bits < 64 && raw & (1 << (bits - 1)) != 0 {
        (raw | (u64::MAX << bits)) as i64
    } else {
        raw as i64
    }
}
