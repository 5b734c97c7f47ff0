//! Lua's `bit` library (LuaBitOp), as Redis gives scripts: `tobit`,
//! `tohex`, `bnot`, `band`, `bor`, `bxor`, `lshift`, `rshift`,
//! `arshift`, `rol`, `ror`, `bswap`, on 32-bit integers, with BitOp's
//! rounding (to nearest, ties to even) and its argument errors at the
//! script's line.
//!
//! What this module must not do: reach the store or the session.

use mlua::{Lua, MultiValue, Value};

/// Puts the `bit` table in `lua`'s globals.
pub(super) fn install(lua: &Lua) -> mlua::Result<()> {
    let bit = lua.create_table()?;
    type Op = fn(&[i32]) -> i32;
    let ops: [(&str, usize, Op); 9] = [
        ("tobit", 1, |a| a[0]),
        ("bnot", 1, |a| !a[0]),
        ("bswap", 1, |a| a[0].swap_bytes()),
        ("lshift", 2, |a| ((a[0] as u32) << (a[1] & 31)) as i32),
        ("rshift", 2, |a| ((a[0] as u32) >> (a[1] & 31)) as i32),
        ("arshift", 2, |a| a[0] >> (a[1] & 31)),
        ("rol", 2, |a| {
            (a[0] as u32).rotate_left((a[1] & 31) as u32) as i32
        }),
        ("ror", 2, |a| {
            (a[0] as u32).rotate_right((a[1] & 31) as u32) as i32
        }),
        ("band", 0, |a| a.iter().fold(-1, |x, y| x & y)),
    ];
    for (name, arity, op) in ops {
        bit.set(
            name,
            lua.create_function(move |lua, args: MultiValue| {
                let a = ints(lua, name, &args, arity.max(1))?;
                Ok(f64::from(op(&a)))
            })?,
        )?;
    }
    for (name, op) in [
        ("bor", (|x, y| x | y) as fn(i32, i32) -> i32),
        ("bxor", |x, y| x ^ y),
    ] {
        bit.set(
            name,
            lua.create_function(move |lua, args: MultiValue| {
                let a = ints(lua, name, &args, 1)?;
                Ok(f64::from(a[1..].iter().fold(a[0], |x, &y| op(x, y))))
            })?,
        )?;
    }
    bit.set(
        "tohex",
        lua.create_function(|lua, args: MultiValue| {
            let x = ints(lua, "tohex", &args, 1)?[0];
            let n = match args.get(1) {
                None | Some(Value::Nil) => 8,
                Some(_) => ints(lua, "tohex", &args, 2)?[1],
            };
            let upper = n < 0;
            let digits = n.unsigned_abs().min(8) as usize;
            let hex = if upper {
                format!("{:08X}", x as u32)
            } else {
                format!("{:08x}", x as u32)
            };
            Ok(hex[8 - digits..].to_string())
        })?,
    )?;
    lua.globals().set("bit", bit)
}

/// The first `need` arguments (all of them when more are given) as BitOp's
/// 32-bit integers; Lua's "bad argument" error for one that is not a
/// number.
fn ints(lua: &Lua, name: &str, args: &MultiValue, need: usize) -> mlua::Result<Vec<i32>> {
    let n = args.len().max(need);
    (0..n)
        .map(|i| {
            let v = args.get(i);
            number(v).map(tobit).ok_or_else(|| {
                let got = match v {
                    None => "no value",
                    Some(v) => v.type_name(),
                };
                super::cjson::raise(
                    lua,
                    format!(
                        "bad argument #{} to '{name}' (number expected, got {got})",
                        i + 1
                    ),
                )
            })
        })
        .collect()
}

/// A number as Lua's `lua_tonumber` reads it (a string of one too).
fn number(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => Some(*n),
        Value::Integer(i) => Some(*i as f64),
        Value::String(s) => {
            let s = s.to_str().ok()?;
            let t = s.trim();
            match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                Some(h) => u64::from_str_radix(h, 16).ok().map(|v| v as f64),
                None => t.parse().ok(),
            }
        }
        _ => None,
    }
}

/// BitOp's normalisation: rounded to the nearest integer (ties to even,
/// by adding 2^52 + 2^51) and kept modulo 2^32, as a signed 32-bit number.
fn tobit(x: f64) -> i32 {
    (x + 6_755_399_441_055_744.0).to_bits() as u32 as i32
}

#[cfg(test)]
mod tests {
    use super::tobit;

    #[test]
    fn numbers_normalise_as_bitop_does() {
        for (x, want) in [
            (1.5, 2),
            (2.5, 2),
            (-2.5, -2),
            (4_294_967_295.0, -1),
            (4_294_967_301.0, 5),
            (-1.0, -1),
        ] {
            assert_eq!(tobit(x), want, "{x}");
        }
    }
}
