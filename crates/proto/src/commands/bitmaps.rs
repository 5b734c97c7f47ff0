//! Strings as bitmaps: SETBIT, GETBIT, BITCOUNT and BITPOS (with BYTE and
//! BIT ranges) and BITOP (AND, OR, XOR, NOT), as Redis 7.0 runs them: bit 0
//! is the most significant bit of the first byte, a missing key is all
//! zeros, a write past the end grows the string with zero bytes up to
//! Redis's bound (512 MiB: a bit offset below 2^32), in place.
//!
//! Each command is one arm of [`run`], which [`super::run`] calls by name.

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
            let on = match redis_int(a[2]) {
                Some(0) => false,
                Some(1) => true,
                _ => return Err(Fail::Msg(b"ERR bit is not an integer or out of range")),
            };
            let (byte, mask) = ((offset >> 3) as usize, 0x80u8 >> (offset & 7));
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let old = g.update(a[0], |slot| {
                let slot = match slot {
                    Some(Entry {
                        value: Value::Str(v),
                        ..
                    }) => v,
                    Some(_) => return (false, Err(Fail::Msg(WRONGTYPE))),
                    None => {
                        *slot = Some(Entry::new(Value::Str(Box::default())));
                        let Some(Entry {
                            value: Value::Str(v),
                            ..
                        }) = slot
                        else {
                            unreachable!("just made")
                        };
                        v
                    }
                };
                if slot.len() <= byte {
                    let mut grown = std::mem::take(slot).into_vec();
                    grown.resize(byte + 1, 0);
                    *slot = grown.into_boxed_slice();
                }
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
            let target = match redis_int(a[1]) {
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
            g.update(a[1], |slot| {
                let had = slot.is_some();
                *slot = (len > 0).then(|| Entry::new(Value::Str(result.into_boxed_slice())));
                (had || len > 0, ())
            });
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

/// A bit offset as Redis reads it: an integer in canonical form from 0 to
/// 2^32 - 1 (a string of 512 MiB).
fn bit_offset(v: &[u8]) -> Result<u64, Fail> {
    redis_int(v)
        .and_then(|o| u64::try_from(o).ok())
        .filter(|&o| o < MAX_BITS)
        .ok_or(Fail::Msg(BAD_OFFSET))
}
