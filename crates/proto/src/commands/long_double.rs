//! INCRBYFLOAT's and HINCRBYFLOAT's arithmetic as redis-server does it on
//! x86-64 Linux: in x87 extended precision (C's `long double`: a 64-bit
//! significand, exponents -16382 to 16383, subnormals below). The operands
//! are read as `strtold` reads them (correctly rounded, ties to even), added
//! with one rounding, and printed as `%.17Lf` with the trailing zeros cut
//! (Redis's `ld2string` in its human form). Every step is exact on big
//! integers, so a result has the bits Redis's has, not a 64-bit float's
//! approximation of them (`-9223372036854775808 + 1.5` is
//! `-9223372036854775806.5`, as on redis-server).
//!
//! What this module must not do: allocate or loop in proportion to an
//! unchecked number. A text is at most [`MAX_CHARS`] bytes (Redis's own
//! bound), and an exponent past the format's range is an overflow or an
//! underflow before any power is computed.

use num_bigint::{BigInt, BigUint, Sign};
use num_integer::Integer;
use num_traits::{ToPrimitive, Zero};

/// Longest text a long double is read from (Redis's
/// `MAX_LONG_DOUBLE_CHARS`: one this long or longer is not a float).
pub const MAX_CHARS: usize = 5 * 1024;

/// Exponent of the smallest subnormal's unit: `2^-16445`.
const MIN_EXP: i64 = -16445;
/// Largest exponent of a 64-bit significand: `(2^64 - 1) * 2^16320` is the
/// largest finite value.
const MAX_EXP: i64 = 16383 - 63;
/// Digits after the point in Redis's output (`%.17Lf`).
const FRACTION_DIGITS: u32 = 17;

/// A finite long double: `(-1)^neg * mant * 2^exp` (zero when `mant` is 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongDouble {
    neg: bool,
    mant: u64,
    exp: i64,
}

/// A value read: a finite long double, or an infinity (which `strtold`
/// reads from `inf` and Redis accepts as an operand).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operand {
    /// A finite value.
    Finite(LongDouble),
    /// `inf`, `-inf`, `infinity`.
    Infinite,
}

impl LongDouble {
    /// Zero.
    pub const ZERO: LongDouble = LongDouble {
        neg: false,
        mant: 0,
        exp: 0,
    };
}

/// `value` rounded to a long double: `|value| = num / den` (`den` > 0),
/// negative when `neg`. `None`: past the largest finite value.
fn round(neg: bool, num: &BigUint, den: &BigUint) -> Option<LongDouble> {
    if num.is_zero() {
        return Some(LongDouble {
            neg,
            mant: 0,
            exp: 0,
        });
    }
    // floor(log2(num / den)): the bit lengths give it within one.
    let mut k = num.bits() as i64 - den.bits() as i64;
    let at_least = if k >= 0 {
        *num >= den << (k as u64)
    } else {
        num << (-k) as u64 >= *den
    };
    if !at_least {
        k -= 1;
    }
    // The significand is num / den * 2^scale, in [2^63, 2^64) for a normal
    // value; a subnormal keeps the smallest exponent.
    let mut scale = (63 - k).min(-MIN_EXP);
    if -scale > MAX_EXP {
        return None;
    }
    let (n, d) = if scale >= 0 {
        (num << scale as u64, den.clone())
    } else {
        (num.clone(), den << (-scale) as u64)
    };
    let (mut m, r) = n.div_rem(&d);
    let twice = r << 1u32;
    if twice > d || (twice == d && m.bit(0)) {
        m += 1u32;
    }
    let mant = match m.to_u64() {
        Some(v) => v,
        // Rounded up to 2^64: one more binary digit.
        None => {
            scale -= 1;
            if -scale > MAX_EXP {
                return None;
            }
            1 << 63
        }
    };
    Some(LongDouble {
        neg,
        mant,
        exp: -scale,
    })
}

/// `mant * 2^exp` as a fraction of big integers.
fn fraction(mant: &BigUint, exp: i64) -> (BigUint, BigUint) {
    if exp >= 0 {
        (mant << exp as u64, BigUint::from(1u32))
    } else {
        (mant.clone(), BigUint::from(1u32) << (-exp) as u64)
    }
}

/// Reads `text` as Redis's `string2ld` does (`strtold`, then refused: an
/// empty text or one of [`MAX_CHARS`] or more, leading white space,
/// anything left unread, NaN, and an overflow or an underflow to zero).
pub fn parse(text: &[u8]) -> Option<Operand> {
    if text.is_empty() || text.len() >= MAX_CHARS || is_space(text[0]) {
        return None;
    }
    let (neg, rest) = match text[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if rest.eq_ignore_ascii_case(b"inf") || rest.eq_ignore_ascii_case(b"infinity") {
        return Some(Operand::Infinite);
    }
    let hex = rest.len() > 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x';
    let (digits, radix, exp_mark) = if hex {
        (&rest[2..], 16, b'p')
    } else {
        (rest, 10, b'e')
    };
    // Digits, a point, digits, then an optional exponent: all of it read.
    let mut mantissa = Vec::with_capacity(digits.len());
    let mut fraction_digits: i64 = 0;
    let mut seen_point = false;
    let mut i = 0;
    while i < digits.len() {
        let c = digits[i];
        if c == b'.' && !seen_point {
            seen_point = true;
        } else if (c as char).is_digit(radix) {
            mantissa.push(c);
            fraction_digits += i64::from(seen_point);
        } else {
            break;
        }
        i += 1;
    }
    if mantissa.is_empty() {
        return None;
    }
    let mut exp: i64 = 0;
    if i < digits.len() {
        if (digits[i] | 0x20) != exp_mark {
            return None;
        }
        let e = &digits[i + 1..];
        let (eneg, e) = match e.first() {
            Some(b'-') => (true, &e[1..]),
            Some(b'+') => (false, &e[1..]),
            _ => (false, e),
        };
        if e.is_empty() || !e.iter().all(u8::is_ascii_digit) {
            return None;
        }
        // Saturating: past about 10^5 either way it is out of range anyway.
        for &c in e {
            exp = (exp * 10 + i64::from(c - b'0')).min(1 << 40);
        }
        if eneg {
            exp = -exp;
        }
    }
    let p = BigUint::parse_bytes(&mantissa, radix).expect("digits of the radix");
    if p.is_zero() {
        return Some(Operand::Finite(LongDouble {
            neg,
            mant: 0,
            exp: 0,
        }));
    }
    let value = if hex {
        let e2 = exp - 4 * fraction_digits;
        let bits = p.bits() as i64;
        // Beyond the range: an overflow or an underflow to zero (ERANGE).
        if bits + e2 > MAX_EXP + 65 || bits + e2 < MIN_EXP - 2 {
            return None;
        }
        let (n, d) = fraction(&p, e2);
        round(neg, &n, &d)?
    } else {
        let e10 = exp - fraction_digits;
        // Significant digits: the mantissa's, past its leading zeros.
        let digits = mantissa.iter().skip_while(|&&c| c == b'0').count() as i64;
        let magnitude = digits + e10;
        // 10^4933 is past the largest value (about 1.19e4932), and below
        // 10^-4952 everything rounds to zero (the smallest is 3.6e-4951).
        if !(-4952..=4934).contains(&magnitude) {
            return None;
        }
        let ten = BigUint::from(10u32);
        let (n, d) = if e10 >= 0 {
            (p * ten.pow(e10 as u32), BigUint::from(1u32))
        } else {
            (p, ten.pow((-e10) as u32))
        };
        round(neg, &n, &d)?
    };
    // An underflow to zero is refused as strtold's ERANGE is.
    (value.mant != 0).then_some(Operand::Finite(value))
}

/// C's `isspace` in the "C" locale.
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// `a + b` with one rounding; `None` when the sum is infinite or NaN (an
/// infinite operand, or an overflow): Redis's "increment would produce NaN
/// or Infinity".
pub fn add(a: Operand, b: Operand) -> Option<LongDouble> {
    let (Operand::Finite(a), Operand::Finite(b)) = (a, b) else {
        return None;
    };
    let e = a.exp.min(b.exp);
    let signed = |v: LongDouble| {
        let m = BigInt::from_biguint(
            if v.neg { Sign::Minus } else { Sign::Plus },
            BigUint::from(v.mant),
        );
        m << (v.exp - e) as u64
    };
    let sum = signed(a) + signed(b);
    let neg = sum.sign() == Sign::Minus || (sum.is_zero() && a.neg && b.neg);
    let (n, d) = fraction(sum.magnitude(), e);
    round(neg, &n, &d)
}

/// `v` as Redis prints it: `%.17Lf` (rounded to nearest, ties to even, as
/// glibc does), trailing zeros and a trailing point cut, `-0` as `0`.
pub fn format(v: LongDouble) -> String {
    let (n, d) = fraction(&BigUint::from(v.mant), v.exp);
    let scaled = n * BigUint::from(10u32).pow(FRACTION_DIGITS);
    let (mut q, r) = scaled.div_rem(&d);
    let twice = r << 1u32;
    if twice > d || (twice == d && q.bit(0)) {
        q += 1u32;
    }
    let digits = q.to_string();
    let width = FRACTION_DIGITS as usize + 1;
    let digits = format!("{digits:0>width$}");
    let (int, frac) = digits.split_at(digits.len() - FRACTION_DIGITS as usize);
    let frac = frac.trim_end_matches('0');
    let mut s = String::with_capacity(digits.len() + 2);
    if v.neg {
        s.push('-');
    }
    s.push_str(int);
    if !frac.is_empty() {
        s.push('.');
        s.push_str(frac);
    }
    if s == "-0" { "0".to_owned() } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(a: &str, b: &str) -> Option<String> {
        let (a, b) = (parse(a.as_bytes())?, parse(b.as_bytes())?);
        add(a, b).map(format)
    }

    /// Figures from redis-server 7.0.15 on x86-64 (long double), including
    /// those a 64-bit float gets wrong.
    #[test]
    fn sums_are_redis_long_double_sums() {
        let cases = [
            ("10.5", "0.1", "10.6"),
            ("10.6", "-2500", "-2489.39999999999999991"),
            ("-9223372036854775808", "1.5", "-9223372036854775806.5"),
            ("0", "3.0e3", "3000"),
            ("5.0e3", "2.0e2", "5200"),
            ("0.1", "0.2", "0.3"),
            ("1", "-1", "0"),
            ("-0.000000000000000001", "0", "0"),
            ("1e-20", "0", "0"),
            ("0x1p3", "1", "9"),
            ("1.5", "0.000003814697265625", "1.50000381469726562"),
            (
                "123456789012345678901234567890",
                "1",
                "123456789012345678899921813504",
            ),
        ];
        for (a, b, want) in cases {
            assert_eq!(sum(a, b).as_deref(), Some(want), "{a} + {b}");
        }
    }

    #[test]
    fn what_strtold_or_redis_refuses_is_no_float() {
        for bad in [
            "", " 1", "1 ", "abc", "1e", "1e+", "0x", ".", "nan", "-nan", "1..2", "1e5x",
        ] {
            assert_eq!(parse(bad.as_bytes()), None, "{bad:?}");
        }
        // Overflow and underflow to zero (ERANGE), and a text too long.
        for bad in ["1e5000", "-1e5000", "1e-5000", "1e99999999999999999999"] {
            assert_eq!(parse(bad.as_bytes()), None, "{bad}");
        }
        assert_eq!(parse("1".repeat(MAX_CHARS).as_bytes()), None);
        assert_eq!(parse(b"inf"), Some(Operand::Infinite));
        assert_eq!(sum("inf", "1"), None);
        assert_eq!(sum("1.18e4932", "1.18e4932"), None, "overflow");
        assert_eq!(
            parse(b"0e99999999"),
            Some(Operand::Finite(LongDouble::ZERO))
        );
        assert!(parse(b"3.7e-4951").is_some(), "a subnormal is read");
    }
}
