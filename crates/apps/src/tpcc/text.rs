//! Random data per clause 4.3.2 and NURand per clause 2.1.6.

use rand::RngExt;
use rand::rngs::SmallRng;

/// The alphabet of random a-strings (clause 4.3.2.2).
const ALNUM: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Syllables of last names (clause 4.3.2.3).
const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];

/// NURand's C for last names at load time.
pub(crate) const C_LAST_LOAD: u32 = 157;
/// NURand's C for last names at run time: differs from the load-time one by
/// a delta in 65..=119, neither 96 nor 112 (clause 2.1.6.1).
pub(crate) const C_LAST_RUN: u32 = 223;
/// NURand's C for customer ids at run time.
pub(crate) const C_ID_RUN: u32 = 259;
/// NURand's C for item ids at run time.
pub(crate) const C_ITEM_RUN: u32 = 7911;

const _: () = {
    let delta = C_LAST_RUN.abs_diff(C_LAST_LOAD);
    assert!(delta >= 65 && delta <= 119 && delta != 96 && delta != 112);
    assert!(C_LAST_RUN <= 255 && C_ID_RUN <= 1023 && C_ITEM_RUN <= 8191);
};

/// The last name numbered `num` (0..=999): three syllables, one per decimal
/// digit (clause 4.3.2.3). Larger numbers use their last three digits.
pub fn last_name(num: u16) -> String {
    let n = usize::from(num % 1000);
    [n / 100, n / 10 % 10, n % 10]
        .iter()
        .map(|&d| SYLLABLES[d])
        .collect()
}

/// NURand(A, x, y) with run-time constant `c` (clause 2.1.6); `x <= y`.
pub(crate) fn nurand(rng: &mut SmallRng, a: u32, c: u32, x: u32, y: u32) -> u32 {
    let r = rng.random_range(0..=a) | rng.random_range(x..=y);
    (r + c) % (y - x + 1) + x
}

/// Fills `buf` with random alphanumerics, eight per draw (the load writes
/// tens of megabytes of them).
pub(crate) fn fill_alnum(rng: &mut SmallRng, buf: &mut [u8]) {
    for chunk in buf.chunks_mut(8) {
        let mut r: u64 = rng.random();
        for b in chunk {
            // Multiply-shift maps a byte onto 0..62 without a division.
            *b = ALNUM[((r & 0xff) as usize * ALNUM.len()) >> 8];
            r >>= 8;
        }
    }
}

/// Overwrites a random stretch of `s` with "ORIGINAL" (clause 4.3.3.1).
pub(crate) fn mark_original(rng: &mut SmallRng, s: &mut [u8]) {
    if s.len() >= 8 {
        let at = rng.random_range(0..=s.len() - 8);
        s[at..at + 8].copy_from_slice(b"ORIGINAL");
    }
}

/// Whether `s` contains "ORIGINAL" (the brand-generic test of NewOrder).
pub(crate) fn has_original(s: &[u8]) -> bool {
    s.windows(8).any(|w| w == b"ORIGINAL")
}

/// A string of at most `N` bytes stored inline (no allocation per row).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FixedStr<const N: usize> {
    len: u8,
    buf: [u8; N],
}

impl<const N: usize> FixedStr<N> {
    /// The first `N` bytes of `s`.
    pub(crate) fn new(s: &[u8]) -> Self {
        let len = s.len().min(N);
        let mut buf = [0; N];
        buf[..len].copy_from_slice(&s[..len]);
        FixedStr {
            len: len as u8,
            buf,
        }
    }

    /// A random a-string of `min..=max` (at most `N`) characters.
    pub(crate) fn random(rng: &mut SmallRng, min: usize, max: usize) -> Self {
        let len = rng.random_range(min..=max).min(N);
        let mut buf = [0; N];
        fill_alnum(rng, &mut buf[..len]);
        FixedStr {
            len: len as u8,
            buf,
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.len).min(N)]
    }

    pub(crate) fn as_mut_bytes(&mut self) -> &mut [u8] {
        &mut self.buf[..usize::from(self.len).min(N)]
    }
}
