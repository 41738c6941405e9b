//! One printf conversion through the C library's `snprintf`: the only
//! `unsafe` code of the printf service.
//!
//! Why the C library: the output must be byte-identical to the host's
//! printf, including `%a`/`%g`/`%e` rounding and glibc details such as `%p`
//! printing `(nil)`. No Rust crate reproduces those exactly.
//!
//! Safety by construction: callers never pass a format string. They pass a
//! typed `Value`, flags, and optional width/precision; this module writes
//! the single-conversion spec itself (`%` + flags + `*` + `.*` + `ll` for
//! integers + the conversion), so the spec always matches the variadic
//! arguments that follow it. Width and precision always travel as `int`
//! arguments through `*`, which keeps C's rules for negative values.
//! Strings are `&CStr` built by the caller from the message's words (host
//! memory); a `%p` value is printed, never dereferenced.

use core::ffi::{c_char, c_int, c_void, CStr};

/// Flag bits, in the order they are written into the spec.
pub const FLAG_MINUS: u8 = 1 << 0;
pub const FLAG_PLUS: u8 = 1 << 1;
pub const FLAG_SPACE: u8 = 1 << 2;
pub const FLAG_HASH: u8 = 1 << 3;
pub const FLAG_ZERO: u8 = 1 << 4;
const FLAG_CHARS: [(u8, u8); 5] =
    [(FLAG_MINUS, b'-'), (FLAG_PLUS, b'+'), (FLAG_SPACE, b' '), (FLAG_HASH, b'#'), (FLAG_ZERO, b'0')];

/// A converted argument and its conversion character.
#[derive(Clone, Copy, Debug)]
pub enum Value<'a> {
    /// `d` or `i`.
    Signed(u8, i64),
    /// `o`, `u`, `x` or `X`.
    Unsigned(u8, u64),
    /// `f F e E g G a A`.
    Double(u8, f64),
    /// `c` (the int argument).
    Char(c_int),
    /// `s`.
    Str(&'a CStr),
    /// `p` (the address, printed only).
    Pointer(u64),
    /// `%` (no argument).
    Percent,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CfmtError {
    /// A conversion character that does not belong to its `Value` kind.
    BadConversion,
    /// The conversion would make `out` longer than the caller's limit.
    TooLong,
    /// snprintf reported an error (e.g. EOVERFLOW).
    Failed,
}

/// Appends one conversion's output to `out`, refusing to let `out` grow past
/// `limit` bytes.
pub fn format_into(
    out: &mut Vec<u8>,
    flags: u8,
    width: Option<c_int>,
    precision: Option<c_int>,
    value: Value<'_>,
    limit: usize,
) -> Result<(), CfmtError> {
    let (length, conv): (&[u8], u8) = match value {
        Value::Signed(c @ (b'd' | b'i'), _) => (b"ll", c),
        Value::Unsigned(c @ (b'o' | b'u' | b'x' | b'X'), _) => (b"ll", c),
        Value::Double(c @ (b'f' | b'F' | b'e' | b'E' | b'g' | b'G' | b'a' | b'A'), _) => (b"", c),
        Value::Char(_) => (b"", b'c'),
        Value::Str(_) => (b"", b's'),
        Value::Pointer(_) => (b"", b'p'),
        Value::Percent => (b"", b'%'),
        _ => return Err(CfmtError::BadConversion),
    };
    if matches!(value, Value::Percent) {
        if width.is_some() || precision.is_some() {
            // `%%` takes no arguments; a `*` here would desynchronize varargs.
            return Err(CfmtError::BadConversion);
        }
        // C leaves flags on `%%` undefined and glibc prints a bare "%" for
        // every such spec: print it here rather than hand snprintf an
        // undefined conversion.
        if out.len() >= limit {
            return Err(CfmtError::TooLong);
        }
        out.push(b'%');
        return Ok(());
    }
    // "%" + 5 flags + "*" + ".*" + "ll" + conv + NUL <= 13 bytes.
    let mut spec = [0u8; 16];
    let mut n = 0;
    let mut push = |byte: u8| {
        spec[n] = byte;
        n += 1;
    };
    push(b'%');
    for (bit, ch) in FLAG_CHARS {
        if flags & bit != 0 {
            push(ch);
        }
    }
    if width.is_some() {
        push(b'*');
    }
    if precision.is_some() {
        push(b'.');
        push(b'*');
    }
    for &b in length {
        push(b);
    }
    push(conv);
    push(0);
    let spec = CStr::from_bytes_until_nul(&spec).map_err(|_| CfmtError::BadConversion)?;

    let start = out.len();
    let room = limit.saturating_sub(start);
    // First try with what is likely enough; snprintf tells the exact size.
    let mut capacity = room.min(256) + 1;
    loop {
        out.reserve(capacity);
        let spare = out.capacity() - start;
        // SAFETY: `out` has `spare` writable bytes from `start` (reserved
        // above); snprintf writes at most `spare` bytes there, NUL included.
        // `spec` is a NUL-terminated spec built above whose `*`s and
        // conversion match exactly the arguments passed by `call`.
        let written =
            unsafe { call(out.as_mut_ptr().add(start).cast(), spare, spec, width, precision, value) };
        let Ok(needed) = usize::try_from(written) else {
            return Err(CfmtError::Failed);
        };
        if needed > room {
            return Err(CfmtError::TooLong);
        }
        if needed < spare {
            // SAFETY: snprintf initialized `needed` bytes at `start`
            // (needed < spare, so nothing was truncated).
            unsafe { out.set_len(start + needed) };
            return Ok(());
        }
        capacity = needed + 1;
    }
}

/// Calls snprintf with the arguments `spec` expects.
///
/// # Safety
/// `buf` must be writable for `size` bytes, and `spec` must be the spec that
/// `format_into` built for exactly this `width`/`precision`/`value`.
unsafe fn call(
    buf: *mut c_char,
    size: usize,
    spec: &CStr,
    width: Option<c_int>,
    precision: Option<c_int>,
    value: Value<'_>,
) -> c_int {
    let fmt = spec.as_ptr();
    macro_rules! snprintf {
        ($($value:expr)?) => {
            // SAFETY: per this function's contract: `buf`/`size` are valid and
            // the spec's `*`s and conversion match these arguments.
            unsafe {
                match (width, precision) {
                    (Some(w), Some(p)) => libc::snprintf(buf, size, fmt, w, p $(, $value)?),
                    (Some(w), None) => libc::snprintf(buf, size, fmt, w $(, $value)?),
                    (None, Some(p)) => libc::snprintf(buf, size, fmt, p $(, $value)?),
                    (None, None) => libc::snprintf(buf, size, fmt $(, $value)?),
                }
            }
        };
    }
    match value {
        Value::Signed(_, v) => snprintf!(v as libc::c_longlong),
        Value::Unsigned(_, v) => snprintf!(v as libc::c_ulonglong),
        Value::Double(_, v) => snprintf!(v as libc::c_double),
        Value::Char(v) => snprintf!(v),
        Value::Str(s) => snprintf!(s.as_ptr()),
        Value::Pointer(v) => snprintf!(v as usize as *const c_void),
        // Printed before the spec is built; never handed to snprintf.
        Value::Percent => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(flags: u8, w: Option<c_int>, p: Option<c_int>, v: Value<'_>) -> String {
        let mut out = Vec::new();
        format_into(&mut out, flags, w, p, v, 1 << 20).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn basic_conversions() {
        assert_eq!(one(0, None, None, Value::Signed(b'd', -42)), "-42");
        assert_eq!(one(FLAG_MINUS, Some(6), None, Value::Signed(b'i', 7)), "7     ");
        assert_eq!(one(FLAG_ZERO | FLAG_PLUS, Some(6), None, Value::Signed(b'd', 7)), "+00007");
        assert_eq!(one(FLAG_HASH, None, None, Value::Unsigned(b'x', 255)), "0xff");
        assert_eq!(one(0, None, Some(3), Value::Double(b'f', 1.23456)), "1.235");
        assert_eq!(one(0, None, None, Value::Double(b'a', 1.0)), "0x1p+0");
        assert_eq!(one(0, None, None, Value::Pointer(0)), "(nil)");
        assert_eq!(one(0, None, None, Value::Pointer(0x1000)), "0x1000");
        assert_eq!(one(0, Some(-4), None, Value::Str(c"ab")), "ab  ");
        assert_eq!(one(0, None, Some(-1), Value::Str(c"abc")), "abc");
        assert_eq!(one(0, None, None, Value::Percent), "%");
    }

    #[test]
    fn percent_with_flags_prints_a_bare_percent_like_glibc() {
        for (bit, _) in FLAG_CHARS {
            assert_eq!(one(bit, None, None, Value::Percent), "%");
        }
        let mut out = b"ab".to_vec();
        assert_eq!(format_into(&mut out, 0, None, None, Value::Percent, 2), Err(CfmtError::TooLong));
        assert_eq!(out, b"ab");
    }

    #[test]
    fn nul_char_is_counted() {
        let mut out = Vec::new();
        format_into(&mut out, 0, None, None, Value::Char(0), 10).unwrap();
        assert_eq!(out, b"\0");
    }

    #[test]
    fn grows_past_first_guess_and_respects_limit() {
        let mut out = b"xy".to_vec();
        format_into(&mut out, 0, Some(1000), None, Value::Signed(b'd', 1), 1002).unwrap();
        assert_eq!(out.len(), 1002);
        assert!(out.ends_with(b"   1"));
        let mut out = b"xy".to_vec();
        assert_eq!(
            format_into(&mut out, 0, Some(1001), None, Value::Signed(b'd', 1), 1002),
            Err(CfmtError::TooLong)
        );
        assert_eq!(out, b"xy");
    }

    #[test]
    fn mismatched_conversion_refused() {
        let mut out = Vec::new();
        assert_eq!(
            format_into(&mut out, 0, None, None, Value::Signed(b's', 1), 10),
            Err(CfmtError::BadConversion)
        );
        assert_eq!(
            format_into(&mut out, 0, Some(1), None, Value::Percent, 10),
            Err(CfmtError::BadConversion)
        );
    }
}
