//! Strings edited in place: INCR/DECR and their BY forms, INCRBYFLOAT, APPEND.
//!
//! Each command is one arm of [`run`], which [`super::run`] calls for
//! this family's commands (its column of `COMMANDS`); the arms keep
//! Redis 7's replies and error texts.

use super::*;

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
        b"incr" | b"decr" | b"incrby" | b"decrby" => {
            let by = match name {
                b"incr" | b"decr" => {
                    arity(n == 1, nm)?;
                    1
                }
                _ => {
                    arity(n == 2, nm)?;
                    int_arg(a[1])?
                }
            };
            let by = if name.starts_with(b"decr") {
                by.checked_neg().ok_or(Fail::Msg(OVERFLOW))?
            } else {
                by
            };
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let v = g.update(a[0], |slot| {
                let cur = match slot.as_ref().map(|e| &e.value) {
                    None => 0,
                    Some(Value::Str(v)) => match parse_i64(v) {
                        Some(x) => x,
                        None => return (false, Err(Fail::Msg(NOT_INTEGER))),
                    },
                    Some(_) => return (false, Err(Fail::Msg(WRONGTYPE))),
                };
                let Some(new) = cur.checked_add(by) else {
                    return (false, Err(Fail::Msg(OVERFLOW)));
                };
                set_str_keep_ttl(slot, itoa::Buffer::new().format(new).as_bytes());
                (true, Ok(new))
            })?;
            w.int(v);
        }
        b"incrbyfloat" => {
            arity(n == 2, nm)?;
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let v = g.update(a[0], |slot| {
                // As Redis: the key's type, its value, then the increment.
                let cur = match slot.as_ref().map(|e| &e.value) {
                    None => long_double::Operand::Finite(long_double::LongDouble::ZERO),
                    Some(Value::Str(v)) => match long_double::parse(v) {
                        Some(x) => x,
                        None => return (false, Err(Fail::Msg(NOT_FLOAT))),
                    },
                    Some(_) => return (false, Err(Fail::Msg(WRONGTYPE))),
                };
                let Some(by) = long_double::parse(a[1]) else {
                    return (false, Err(Fail::Msg(NOT_FLOAT)));
                };
                let s = match float_incr(cur, by) {
                    Ok(s) => s,
                    Err(f) => return (false, Err(f)),
                };
                set_str_keep_ttl(slot, s.as_bytes());
                (true, Ok(s))
            })?;
            w.bulk(v.as_bytes());
        }
        b"append" => {
            arity(n == 2, nm)?;
            let mut g = lock(db, &mut held, &a[..1], true)?;
            let len = g.update(a[0], |slot| match slot.as_mut().map(|e| &mut e.value) {
                None => {
                    *slot = Some(Entry::new(Value::Str(a[1].into())));
                    (true, Ok(a[1].len()))
                }
                Some(Value::Str(v)) => {
                    let mut s = std::mem::take(v).into_vec();
                    s.extend_from_slice(a[1]);
                    let len = s.len();
                    *v = s.into_boxed_slice();
                    (true, Ok(len))
                }
                Some(_) => (false, Err(Fail::Msg(WRONGTYPE))),
            })?;
            w.int(len as i64);
        }
        _ => unreachable!("routed to counters by name"),
    }
    Ok(())
}
