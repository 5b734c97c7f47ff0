//! Deadlines: EXPIRE and its variants, TTL, PTTL, PERSIST.
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
        b"expire" | b"pexpire" | b"expireat" | b"pexpireat" => {
            arity(n >= 2, nm)?;
            let t = int_arg(a[1])?;
            let mut cond = None;
            for o in &a[2..] {
                let o = o.to_ascii_uppercase();
                match o.as_slice() {
                    b"NX" | b"XX" | b"GT" | b"LT" if cond.is_none() => cond = Some(o),
                    _ => {
                        return Err(Fail::Owned(
                            format!("ERR Unsupported option {}", String::from_utf8_lossy(&o))
                                .into_bytes(),
                        ));
                    }
                }
            }
            let seconds = matches!(name, b"expire" | b"expireat");
            let absolute = matches!(name, b"expireat" | b"pexpireat");
            let at = expire_time(t, seconds, absolute, false, db.now_ms(), nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let now = g.now_ms as i64;
            let done = g.update(a[0], |slot| {
                let Some(e) = slot.as_mut() else {
                    return (false, false);
                };
                let cur = e.expire_ms;
                let ok = match cond.as_deref() {
                    Some(b"NX") => cur == 0,
                    Some(b"XX") => cur != 0,
                    Some(b"GT") => cur != 0 && at > cur as i64,
                    Some(b"LT") => cur == 0 || at < cur as i64,
                    _ => true,
                };
                if !ok {
                    return (false, false);
                }
                if at <= now {
                    *slot = None;
                } else {
                    e.expire_ms = at as u64;
                }
                (true, true)
            });
            w.bool_int(done);
        }
        b"ttl" | b"pttl" => {
            arity(n == 1, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let now = g.now_ms;
            match g.get(a[0]) {
                None => w.int(-2),
                Some(e) if e.expire_ms == 0 => w.int(-1),
                Some(e) => {
                    let ms = e.expire_ms.saturating_sub(now) as i64;
                    w.int(if name == b"ttl" {
                        (ms + 500) / 1000
                    } else {
                        ms
                    });
                }
            }
        }
        b"expiretime" | b"pexpiretime" => {
            arity(n == 1, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            match g.get(a[0]) {
                None => w.int(-2),
                Some(e) if e.expire_ms == 0 => w.int(-1),
                Some(e) => {
                    let ms = e.expire_ms as i64;
                    w.int(if name == b"expiretime" { ms / 1000 } else { ms });
                }
            }
        }
        b"persist" => {
            arity(n == 1, nm)?;
            let mut g = lock(db, &mut held, &a[..1], false)?;
            let done = g.update(a[0], |slot| match slot.as_mut() {
                Some(e) if e.expire_ms != 0 => {
                    e.expire_ms = 0;
                    (true, true)
                }
                _ => (false, false),
            });
            w.bool_int(done);
        }
        _ => unreachable!("routed to expiry by name"),
    }
    Ok(())
}
