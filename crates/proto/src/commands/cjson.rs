//! Lua's `cjson` library, as Redis gives scripts: `cjson.encode`,
//! `cjson.decode` and `cjson.null` (what job queues such as BullMQ and
//! rate limiters use to pass structured values through a script).
//!
//! It follows lua-cjson's defaults: numbers with 14 significant digits
//! (`%.14g`), `/` escaped as `\/`, an empty table as `{}`, a table whose
//! keys are 1..n as an array (`null` in its holes, refused when more than
//! half holes past 10 elements: "excessively sparse array"), NaN and
//! infinities refused, nesting bounded at 1,000. An object's keys come in
//! the order Lua's `pairs` gives them. Decoded objects and arrays are
//! tables, `null` is `cjson.null`, numbers are Lua numbers.
//!
//! What this module must not do: reach the store or the session.

use mlua::{LightUserData, Lua, Table, Value};

/// Deepest nesting encoded or decoded, as lua-cjson's default.
const MAX_DEPTH: usize = 1000;

/// Puts the `cjson` table in `lua`'s globals.
pub(super) fn install(lua: &Lua) -> mlua::Result<()> {
    let cjson = lua.create_table()?;
    cjson.set("null", null())?;
    cjson.set(
        "encode",
        lua.create_function(|lua, v: Value| {
            let mut out = Vec::new();
            encode(&v, &mut out, 1).map_err(|e| raise(lua, e))?;
            lua.create_string(&out)
        })?,
    )?;
    cjson.set(
        "decode",
        lua.create_function(|lua, s: mlua::String| {
            let j: serde_json::Value = serde_json::from_slice(&s.as_bytes()).map_err(|e| {
                raise(
                    lua,
                    format!(
                        "Expected value but found invalid token at character {}",
                        e.column()
                    ),
                )
            })?;
            decode(lua, &j, 1).map_err(|e| raise(lua, e))
        })?,
    )?;
    lua.globals().set("cjson", cjson)
}

/// The error `msg`, where its caller is, as lua-cjson's `luaL_error`
/// raises it ("user_script:LINE: msg"): a C function is never tail
/// called, so level 1 is the script's frame.
pub(super) fn raise(lua: &Lua, msg: String) -> mlua::Error {
    let at = lua
        .inspect_stack(1)
        .filter(|d| d.curr_line() > 0)
        .and_then(|d| {
            let src = d.source().short_src?.into_owned();
            Some(format!("{src}:{}: ", d.curr_line()))
        })
        .unwrap_or_default();
    mlua::Error::RuntimeError(format!("{at}{msg}"))
}

/// `cjson.null`: a light userdata holding no pointer.
fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

fn encode(v: &Value, out: &mut Vec<u8>, depth: usize) -> Result<(), String> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        // Lua 5.1's numbers are doubles, whichever form mlua hands over.
        Value::Integer(i) => number(*i as f64, out)?,
        Value::Number(n) => number(*n, out)?,
        Value::String(s) => string(&s.as_bytes(), out),
        Value::Table(t) => {
            if depth > MAX_DEPTH {
                return Err(format!("Cannot serialise, excessive nesting ({depth})"));
            }
            table(t, out, depth)?;
        }
        other => {
            return Err(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            ));
        }
    }
    Ok(())
}

/// `%.14g`, as lua-cjson prints numbers; NaN and infinities refused.
fn number(n: f64, out: &mut Vec<u8>) -> Result<(), String> {
    if !n.is_finite() {
        return Err("Cannot serialise number: must not be NaN or Inf".into());
    }
    out.extend_from_slice(fmt_g14(n).as_bytes());
    Ok(())
}

/// C's `%.14g`.
fn fmt_g14(n: f64) -> String {
    if n == 0.0 {
        return if n.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let exp = n.abs().log10().floor() as i32;
    // Rounding to 14 digits may carry into the next power of ten.
    let sci = format!("{n:.13e}");
    let (mantissa, e) = sci.split_once('e').expect("scientific form");
    let e: i32 = e.parse().unwrap_or(exp);
    if !(-4..14).contains(&e) {
        let m = trim_zeros(mantissa);
        let sign = if e < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", e.abs())
    } else {
        let decimals = (13 - e).max(0) as usize;
        trim_zeros(&format!("{n:.decimals$}")).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

fn string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            b if b < 0x20 || b == 0x7f => {
                out.extend_from_slice(format!("\\u{b:04x}").as_bytes());
            }
            b => out.push(b),
        }
    }
    out.push(b'"');
}

/// An array when every key is a positive integer (holes as `null`), else
/// an object of string and number keys.
fn table(t: &Table, out: &mut Vec<u8>, depth: usize) -> Result<(), String> {
    let mut max = 0usize;
    let mut count = 0usize;
    let mut array = true;
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, _) = pair.map_err(|e| e.to_string())?;
        count += 1;
        match key_index(&k) {
            Some(i) if array => max = max.max(i),
            _ => array = false,
        }
    }
    if count == 0 {
        out.extend_from_slice(b"{}");
        return Ok(());
    }
    if array {
        if max > 10 && max > 2 * count {
            return Err("Cannot serialise table: excessively sparse array".into());
        }
        out.push(b'[');
        for i in 1..=max {
            if i > 1 {
                out.push(b',');
            }
            let v = t.raw_get::<Value>(i).map_err(|e| e.to_string())?;
            encode(&v, out, depth + 1)?;
        }
        out.push(b']');
        return Ok(());
    }
    out.push(b'{');
    let mut first = true;
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, v) = pair.map_err(|e| e.to_string())?;
        if !first {
            out.push(b',');
        }
        first = false;
        match &k {
            Value::String(s) => string(&s.as_bytes(), out),
            Value::Integer(i) => string(fmt_g14(*i as f64).as_bytes(), out),
            Value::Number(n) => string(fmt_g14(*n).as_bytes(), out),
            _ => {
                return Err("Cannot serialise table: table key must be a number or string".into());
            }
        }
        out.push(b':');
        encode(&v, out, depth + 1)?;
    }
    out.push(b'}');
    Ok(())
}

/// `k` as an array index (a positive whole number), if it is one.
fn key_index(k: &Value) -> Option<usize> {
    match k {
        Value::Integer(i) if *i >= 1 => usize::try_from(*i).ok(),
        Value::Number(n) if *n >= 1.0 && n.fract() == 0.0 && *n < 1e15 => Some(*n as usize),
        _ => None,
    }
}

fn decode(lua: &Lua, j: &serde_json::Value, depth: usize) -> Result<Value, String> {
    if depth > MAX_DEPTH {
        return Err(format!("Found too many nested data structures ({depth})"));
    }
    Ok(match j {
        serde_json::Value::Null => null(),
        serde_json::Value::Bool(b) => Value::Boolean(*b),
        serde_json::Value::Number(n) => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
        serde_json::Value::String(s) => {
            Value::String(lua.create_string(s).map_err(|e| e.to_string())?)
        }
        serde_json::Value::Array(items) => {
            let t = lua
                .create_table_with_capacity(items.len(), 0)
                .map_err(|e| e.to_string())?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, decode(lua, item, depth + 1)?)
                    .map_err(|e| e.to_string())?;
            }
            Value::Table(t)
        }
        serde_json::Value::Object(fields) => {
            let t = lua
                .create_table_with_capacity(0, fields.len())
                .map_err(|e| e.to_string())?;
            for (k, v) in fields {
                let k = lua.create_string(k).map_err(|e| e.to_string())?;
                t.raw_set(k, decode(lua, v, depth + 1)?)
                    .map_err(|e| e.to_string())?;
            }
            Value::Table(t)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::fmt_g14;

    #[test]
    fn numbers_print_as_c_percent_14g() {
        for (n, want) in [
            (1.0, "1"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (1e20, "1e+20"),
            (123456789012345.0, "1.2345678901234e+14"),
            (12345678901234.0, "12345678901234"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.0 / 3.0, "0.33333333333333"),
            (99999999999999.9, "1e+14"),
        ] {
            assert_eq!(fmt_g14(n), want, "{n}");
        }
    }
}
