//! Parsing and formatting of one complete PRINTF message.
//!
//! Message words (after assembly), as the device libraries send them:
//!
//! ```text
//! word 0        control: bit 0 = stderr (else stdout); all other bits 0
//! word 1..      the format string, NUL-terminated, zero-padded to 8 bytes
//! then, for each conversion of the format, in order:
//!   one word    a `*` width        (int: low 32 bits, signed)
//!   one word    a `*` precision    (int: low 32 bits, signed)
//!   the value:  d i o u x X c p n f F e E g G a A  → one word
//!               s → the string's bytes, NUL-terminated, zero-padded to
//!                   8 bytes (a NULL pointer arrives as one zero word and
//!                   prints as "", like an empty string)
//!               % → nothing
//! ```
//!
//! Strings are read only from the message's words (little-endian bytes).
//!
//! Argument conversion mirrors what C's printf does with a promoted
//! argument: 32-bit integers arrive zero-extended, so the length modifier
//! picks the width (none: int, 32 bits; hh: 8; h: 16; l ll j z t: 64, the
//! AMDGPU sizes of long, long long, intmax_t, size_t, ptrdiff_t) and the
//! conversion the signedness. Floating arguments are doubles; `L` (long
//! double) is a 64-bit double on the GPU, so `%La` prints like `%a`.
//! `%c` takes an int. `%n` consumes its pointer word and writes nothing.
//! Surplus argument words are ignored (as C ignores surplus arguments).
//!
//! Defined errors (the message prints nothing; the device gets -1): see
//! `FormatError`. Not supported, hence errors: positional arguments
//! (`%1$d`), wide conversions (`%lc %ls %C %S`), glibc's extensions (`%m`,
//! `'` and `I` flags, `q`/`Z` lengths), and length modifiers C leaves
//! undefined for a conversion (e.g. `%hf`, `%Ld`, `%lp`).

use core::ffi::c_int;

use super::cfmt::{self, CfmtError, Value, FLAG_HASH, FLAG_MINUS, FLAG_PLUS, FLAG_SPACE, FLAG_ZERO};

/// Why a complete message could not be printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormatError {
    /// The message has no words at all.
    Empty,
    /// The control word has bits other than bit 0 set.
    ControlBits,
    /// No NUL terminates the format string within the message.
    UnterminatedFormat,
    /// Unknown flag, length or conversion, a `%` at the end of the format,
    /// or a length modifier the conversion does not take.
    BadSpec,
    /// Positional arguments (`%1$d`).
    Positional,
    /// A wide-character conversion (`%lc`, `%ls`, `%C`, `%S`).
    Wide,
    /// The format needs more argument words than the message has.
    MissingArgument,
    /// A `%s` argument without a NUL within the message.
    UnterminatedString,
    /// The output (or a width/precision) exceeds `max_output_bytes`.
    TooLong,
    /// The C library refused a conversion.
    Conversion,
}

/// A formatted message.
#[derive(Debug, PartialEq, Eq)]
pub struct Formatted {
    /// Control bit 0: print to stderr instead of stdout.
    pub stderr: bool,
    pub bytes: Vec<u8>,
}

/// Control word bit 0: the message goes to stderr.
pub const CONTROL_STDERR: u64 = 1;

/// Formats a whole message (see the module doc). Output longer than
/// `max_output` bytes is an error.
pub fn format_message(words: &[u64], max_output: usize) -> Result<Formatted, FormatError> {
    let (&control, rest) = words.split_first().ok_or(FormatError::Empty)?;
    if control & !CONTROL_STDERR != 0 {
        return Err(FormatError::ControlBits);
    }
    let mut args = Args { words: rest, next: 0 };
    let format = args.string().ok_or(FormatError::UnterminatedFormat)?;
    let mut out = Vec::new();
    format_into(&mut out, &format, &mut args, max_output)?;
    Ok(Formatted { stderr: control & CONTROL_STDERR != 0, bytes: out })
}

/// The argument words after the control word, consumed in order.
struct Args<'a> {
    words: &'a [u64],
    next: usize,
}

impl Args<'_> {
    fn word(&mut self) -> Option<u64> {
        let word = *self.words.get(self.next)?;
        self.next += 1;
        Some(word)
    }

    /// A NUL-terminated string packed little-endian into whole words; the
    /// NUL's word is the last one consumed. Returns the bytes without the
    /// NUL, or None if no NUL is found before the end of the message.
    fn string(&mut self) -> Option<Vec<u8>> {
        let mut bytes = Vec::new();
        for (i, word) in self.words.get(self.next..)?.iter().enumerate() {
            let chunk = word.to_le_bytes();
            if let Some(nul) = chunk.iter().position(|&b| b == 0) {
                bytes.extend_from_slice(&chunk[..nul]);
                self.next += i + 1;
                return Some(bytes);
            }
            bytes.extend_from_slice(&chunk);
        }
        None
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Length {
    None,
    Hh,
    H,
    L,
    Ll,
    J,
    Z,
    T,
    BigL,
}

/// Width or precision as written in the format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Absent,
    Star,
    Digits(u64),
}

struct Spec {
    flags: u8,
    width: Field,
    precision: Field,
    length: Length,
    conv: u8,
}

/// Parses the spec after a `%`; returns it and the index after it.
fn parse_spec(fmt: &[u8], mut i: usize) -> Result<(Spec, usize), FormatError> {
    let at = |i: usize| fmt.get(i).copied().unwrap_or(0);
    let mut flags = 0u8;
    loop {
        let bit = match at(i) {
            b'-' => FLAG_MINUS,
            b'+' => FLAG_PLUS,
            b' ' => FLAG_SPACE,
            b'#' => FLAG_HASH,
            b'0' => FLAG_ZERO,
            _ => break,
        };
        flags |= bit;
        i += 1;
    }
    let digits = |i: &mut usize| {
        let mut value = 0u64;
        while at(*i).is_ascii_digit() {
            value = value.saturating_mul(10).saturating_add(u64::from(at(*i) - b'0'));
            *i += 1;
        }
        value
    };
    let width = if at(i) == b'*' {
        i += 1;
        Field::Star
    } else if at(i).is_ascii_digit() {
        let value = digits(&mut i);
        if at(i) == b'$' {
            return Err(FormatError::Positional);
        }
        Field::Digits(value)
    } else {
        Field::Absent
    };
    let precision = if at(i) == b'.' {
        i += 1;
        if at(i) == b'*' {
            i += 1;
            Field::Star
        } else {
            Field::Digits(digits(&mut i))
        }
    } else {
        Field::Absent
    };
    let (length, len) = match (at(i), at(i + 1)) {
        (b'h', b'h') => (Length::Hh, 2),
        (b'h', _) => (Length::H, 1),
        (b'l', b'l') => (Length::Ll, 2),
        (b'l', _) => (Length::L, 1),
        (b'j', _) => (Length::J, 1),
        (b'z', _) => (Length::Z, 1),
        (b't', _) => (Length::T, 1),
        (b'L', _) => (Length::BigL, 1),
        _ => (Length::None, 0),
    };
    i += len;
    if i >= fmt.len() {
        return Err(FormatError::BadSpec);
    }
    let conv = fmt[i];
    Ok((Spec { flags, width, precision, length, conv }, i + 1))
}

/// Width/precision as the `int` handed to snprintf, bounded by `limit`.
fn field(
    field: Field,
    args: &mut Args<'_>,
    limit: usize,
    is_precision: bool,
) -> Result<Option<c_int>, FormatError> {
    let value: i64 = match field {
        Field::Absent => return Ok(None),
        // An int argument: the low 32 bits, sign-extended.
        Field::Star => i64::from(args.word().ok_or(FormatError::MissingArgument)? as u32 as i32),
        Field::Digits(n) => i64::try_from(n).unwrap_or(i64::MAX),
    };
    // A negative precision means "none"; a negative width means '-' flag.
    if is_precision && value < 0 {
        return Ok(Some(-1));
    }
    // A precision is checked against `limit` by the caller (for %s only the
    // string's length matters); a width always pads to its size.
    if value.unsigned_abs() > i32::MAX as u64 || (!is_precision && value.unsigned_abs() > limit as u64) {
        return Err(FormatError::TooLong);
    }
    Ok(Some(value as c_int))
}

fn format_into(out: &mut Vec<u8>, fmt: &[u8], args: &mut Args<'_>, limit: usize) -> Result<(), FormatError> {
    let mut i = 0;
    while i < fmt.len() {
        let Some(offset) = fmt[i..].iter().position(|&b| b == b'%') else {
            push_literal(out, &fmt[i..], limit)?;
            break;
        };
        push_literal(out, &fmt[i..i + offset], limit)?;
        let (spec, next) = parse_spec(fmt, i + offset + 1)?;
        i = next;
        conversion(out, &spec, args, limit)?;
    }
    Ok(())
}

fn push_literal(out: &mut Vec<u8>, text: &[u8], limit: usize) -> Result<(), FormatError> {
    if out.len() + text.len() > limit {
        return Err(FormatError::TooLong);
    }
    out.extend_from_slice(text);
    Ok(())
}

fn conversion(out: &mut Vec<u8>, spec: &Spec, args: &mut Args<'_>, limit: usize) -> Result<(), FormatError> {
    use Length as L;
    let int_length = matches!(spec.length, L::None | L::Hh | L::H | L::L | L::Ll | L::J | L::Z | L::T);
    // Check the conversion and its length before consuming any word.
    match spec.conv {
        b'd' | b'i' | b'o' | b'u' | b'x' | b'X' | b'n' if int_length => {}
        b'f' | b'F' | b'e' | b'E' | b'g' | b'G' | b'a' | b'A'
            if matches!(spec.length, L::None | L::L | L::BigL) => {}
        b'c' | b's' if spec.length == L::L => return Err(FormatError::Wide),
        b'C' | b'S' => return Err(FormatError::Wide),
        b'c' | b's' | b'p' if spec.length == L::None => {}
        b'%' if spec.length == L::None && spec.width != Field::Star && spec.precision != Field::Star => {}
        _ => return Err(FormatError::BadSpec),
    }
    let width = field(spec.width, args, limit, false)?;
    let mut precision = field(spec.precision, args, limit, true)?;
    let word = |args: &mut Args<'_>| args.word().ok_or(FormatError::MissingArgument);
    let string;
    let value = match spec.conv {
        b'd' | b'i' => {
            let w = word(args)?;
            let v = match spec.length {
                L::None => i64::from(w as u32 as i32),
                L::Hh => i64::from(w as u8 as i8),
                L::H => i64::from(w as u16 as i16),
                _ => w as i64,
            };
            Value::Signed(spec.conv, v)
        }
        b'o' | b'u' | b'x' | b'X' => {
            let w = word(args)?;
            let v = match spec.length {
                L::None => u64::from(w as u32),
                L::Hh => u64::from(w as u8),
                L::H => u64::from(w as u16),
                _ => w,
            };
            Value::Unsigned(spec.conv, v)
        }
        b'n' => {
            // The pointer word is consumed; nothing is ever written.
            word(args)?;
            return Ok(());
        }
        b'c' => Value::Char(word(args)? as u32 as i32),
        b'p' => Value::Pointer(word(args)?),
        b's' => {
            let bytes = args.string().ok_or(if args.next < args.words.len() {
                FormatError::UnterminatedString
            } else {
                FormatError::MissingArgument
            })?;
            // A precision beyond the string's length changes nothing.
            if let Some(p) = precision {
                if p > 0 && p as usize > bytes.len() {
                    precision = Some(bytes.len() as c_int);
                }
            }
            string = terminated(bytes);
            Value::Str(&string)
        }
        b'%' => {
            // glibc prints a bare "%" whatever digits the spec carries; the
            // digits cannot reach snprintf as `*` arguments of `%%`.
            return cfmt::format_into(out, spec.flags, None, None, Value::Percent, limit)
                .map_err(|_| FormatError::TooLong);
        }
        conv => Value::Double(conv, f64::from_bits(word(args)?)),
    };
    if precision.is_some_and(|p| p > 0 && p as usize > limit) {
        return Err(FormatError::TooLong);
    }
    cfmt::format_into(out, spec.flags, width, precision, value, limit).map_err(|e| match e {
        CfmtError::TooLong => FormatError::TooLong,
        CfmtError::BadConversion => FormatError::BadSpec,
        CfmtError::Failed => FormatError::Conversion,
    })
}

/// `bytes` (which hold no NUL: they were cut at the first one) as a C string.
fn terminated(mut bytes: Vec<u8>) -> std::ffi::CString {
    bytes.push(0);
    // `bytes` ends with its only NUL.
    std::ffi::CString::from_vec_with_nul(bytes).unwrap_or_default()
}

/// The words a device sends for a string (bytes + NUL, zero-padded to 8).
/// Public for the tests and the fuzz target.
pub fn pack_string(bytes: &[u8]) -> Vec<u64> {
    let mut padded = bytes.to_vec();
    padded.push(0);
    padded.resize(padded.len().div_ceil(8) * 8, 0);
    padded.chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    const LIMIT: usize = 1 << 20;

    /// Message words: control, format, then the given argument words.
    fn msg(control: u64, fmt: &str, args: &[u64]) -> Vec<u64> {
        let mut words = vec![control];
        words.extend(pack_string(fmt.as_bytes()));
        words.extend_from_slice(args);
        words
    }

    fn fmt(format: &str, args: &[u64]) -> Result<String, FormatError> {
        format_message(&msg(0, format, args), LIMIT).map(|f| String::from_utf8_lossy(&f.bytes).into_owned())
    }

    fn s(text: &str) -> Vec<u64> {
        pack_string(text.as_bytes())
    }

    /// What the C library prints for a one-conversion format.
    fn c_snprintf(
        format: &str,
        call: impl FnOnce(*mut core::ffi::c_char, usize, *const core::ffi::c_char) -> c_int,
    ) -> String {
        let format = CString::new(format).unwrap();
        let mut buf = vec![0u8; 4096];
        let n = call(buf.as_mut_ptr().cast(), buf.len(), format.as_ptr());
        assert!(n >= 0 && (n as usize) < buf.len());
        buf.truncate(n as usize);
        String::from_utf8_lossy(&buf).into_owned()
    }

    fn c_int_fmt(format: &str, v: c_int) -> String {
        // SAFETY: test formats are literals taking exactly one int.
        c_snprintf(format, |b, n, f| unsafe { libc::snprintf(b, n, f, v) })
    }
    fn c_long_fmt(format: &str, v: i64) -> String {
        // SAFETY: test formats take exactly one long.
        c_snprintf(format, |b, n, f| unsafe { libc::snprintf(b, n, f, v as libc::c_long) })
    }
    fn c_double_fmt(format: &str, v: f64) -> String {
        // SAFETY: test formats take exactly one double.
        c_snprintf(format, |b, n, f| unsafe { libc::snprintf(b, n, f, v) })
    }
    fn c_str_fmt(format: &str, v: &str) -> String {
        let v = CString::new(v).unwrap();
        // SAFETY: test formats take exactly one string.
        c_snprintf(format, |b, n, f| unsafe { libc::snprintf(b, n, f, v.as_ptr()) })
    }

    const INT_FORMATS: &[&str] = &[
        "%d", "%i", "%5d", "%-5d|", "%05d", "%+d", "% d", "%+05d", "%.3d", "%8.3d", "%-8.3d|", "%.0d", "%u",
        "%o", "%#o", "%x", "%#x", "%X", "%#X", "%#08x", "%hhd", "%hhu", "%hhx", "%hd", "%hu", "%hx", "%#.0o",
        "%+.0d", "%c", "%-3c|", "%3c",
    ];
    const INTS: &[i32] =
        &[0, 1, -1, 7, 42, -42, 127, 128, 255, 256, -128, -129, 65535, 65536, -32768, i32::MAX, i32::MIN];

    #[test]
    fn ints_match_libc() {
        for &f in INT_FORMATS {
            for &v in INTS {
                if f.contains('c') && !(0..256).contains(&v) {
                    continue;
                }
                // The device sends a 32-bit int zero-extended.
                let word = u64::from(v as u32);
                assert_eq!(fmt(f, &[word]).unwrap(), c_int_fmt(f, v), "format {f:?} value {v}");
            }
        }
    }

    #[test]
    fn longs_match_libc() {
        let formats = [
            "%ld", "%lld", "%li", "%lu", "%llu", "%lx", "%#llX", "%jd", "%zu", "%td", "%zd", "%20.15lo",
            "%-+22ld|",
        ];
        let values = [0i64, 1, -1, i64::MAX, i64::MIN, 1 << 40, -(1 << 33), 0x1234_5678_9abc_def0];
        for f in formats {
            for v in values {
                assert_eq!(fmt(f, &[v as u64]).unwrap(), c_long_fmt(f, v), "format {f:?} value {v}");
            }
        }
    }

    #[test]
    fn doubles_match_libc() {
        let formats = [
            "%f",
            "%F",
            "%e",
            "%E",
            "%g",
            "%G",
            "%a",
            "%A",
            "%.0f",
            "%.3f",
            "%10.4f",
            "%-10.2e|",
            "%+g",
            "% g",
            "%#g",
            "%#.0f",
            "%#.0e",
            "%.10g",
            "%.0g",
            "%020.8f",
            "%.3a",
            "%#a",
            "%lf",
            "%le",
            "%lg",
            "%.17g",
            "%.1A",
            "%+.3e",
            "%08.3f",
            "%-+12.5g|",
        ];
        let values = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            0.1,
            1.0 / 3.0,
            2.5,
            3.5,
            1e-5,
            1e-300,
            5e-324,
            1e21,
            123456789.0,
            -9.875e10,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            0.95,
            999.9999,
        ];
        for f in formats {
            for v in values {
                assert_eq!(fmt(f, &[v.to_bits()]).unwrap(), c_double_fmt(f, v), "format {f:?} value {v}");
            }
        }
        // long double is a 64-bit double on the GPU.
        assert_eq!(
            fmt("%Lf %Le %Lg %La", &[2.5f64.to_bits(); 4]).unwrap(),
            "2.500000 2.500000e+00 2.5 0x1.4p+1"
        );
    }

    #[test]
    fn strings_match_libc() {
        let formats = ["%s", "%10s", "%-10s|", "%.2s", "%5.1s", "%.0s", "%.100s", "%-3.5s|"];
        let values = [
            "",
            "a",
            "hello",
            "exactly8",
            "sixteen bytes!!!",
            "a longer string that spans words",
            "tab\there",
        ];
        for f in formats {
            for v in values {
                assert_eq!(fmt(f, &s(v)).unwrap(), c_str_fmt(f, v), "format {f:?} value {v:?}");
            }
        }
    }

    #[test]
    fn pointers_and_percent() {
        assert_eq!(fmt("%p", &[0]).unwrap(), "(nil)");
        assert_eq!(fmt("%p", &[0xdead_beef]).unwrap(), "0xdeadbeef");
        assert_eq!(fmt("%20p|%-20p|", &[0x1000, 0]).unwrap(), format!("{:>20}|{:<20}|", "0x1000", "(nil)"));
        assert_eq!(fmt("100%%", &[]).unwrap(), "100%");
        assert_eq!(fmt("%5%", &[]).unwrap(), "%");
        assert_eq!(fmt("a%%b%%%d", &[3]).unwrap(), "a%b%3");
    }

    #[test]
    fn mixed_message() {
        let mut args = vec![u64::from(7u32), 1.5f64.to_bits()];
        args.extend(s("world"));
        args.push(0x41);
        args.push(u64::MAX);
        assert_eq!(fmt("n=%d x=%.2f hello %s %c %ld\n", &args).unwrap(), "n=7 x=1.50 hello world A -1\n");
    }

    #[test]
    fn star_width_and_precision() {
        // Negative width: left-justify; negative precision: as if none.
        let neg = |v: i32| u64::from(v as u32);
        assert_eq!(fmt("[%*d]", &[5, 42]).unwrap(), "[   42]");
        assert_eq!(fmt("[%*d]", &[neg(-5), 42]).unwrap(), "[42   ]");
        assert_eq!(fmt("[%.*f]", &[2, 1.23456f64.to_bits()]).unwrap(), "[1.23]");
        assert_eq!(fmt("[%.*f]", &[neg(-1), 3.5f64.to_bits()]).unwrap(), "[3.500000]");
        assert_eq!(fmt("[%*.*s]", &[neg(-6), 2, s("abcdef")[0]]).unwrap(), "[ab    ]");
        assert_eq!(fmt("[%-*d]", &[4, 1]).unwrap(), "[1   ]");
    }

    #[test]
    fn null_and_empty_strings_print_nothing() {
        assert_eq!(fmt("[%s][%s]", &[0, 0]).unwrap(), "[][]");
        assert_eq!(fmt("[%5s]", &[0]).unwrap(), "[     ]");
    }

    #[test]
    fn n_consumes_a_word_and_writes_nothing() {
        assert_eq!(fmt("ab%nc%d", &[0x1000, 5]).unwrap(), "abc5");
        assert_eq!(fmt("%hhn%lln%d", &[1, 2, 3]).unwrap(), "3");
        assert_eq!(fmt("%n", &[]), Err(FormatError::MissingArgument));
    }

    #[test]
    fn stderr_bit_and_surplus_words() {
        let f = format_message(&msg(1, "x%d", &[1, 2, 3]), LIMIT).unwrap();
        assert_eq!(f, Formatted { stderr: true, bytes: b"x1".to_vec() });
        let f = format_message(&msg(0, "", &[]), LIMIT).unwrap();
        assert_eq!(f, Formatted { stderr: false, bytes: vec![] });
    }

    #[test]
    fn non_utf8_and_high_bytes_pass_through() {
        let mut words = vec![0];
        words.extend(pack_string(b"\xff\xfe %s"));
        words.extend(pack_string(b"\x80\x81"));
        assert_eq!(format_message(&words, LIMIT).unwrap().bytes, b"\xff\xfe \x80\x81");
    }

    #[test]
    fn bad_messages() {
        use FormatError::*;
        assert_eq!(format_message(&[], LIMIT), Err(Empty));
        assert_eq!(format_message(&msg(2, "x", &[]), LIMIT), Err(ControlBits));
        assert_eq!(format_message(&msg(1 << 63, "x", &[]), LIMIT), Err(ControlBits));
        assert_eq!(format_message(&[0], LIMIT), Err(UnterminatedFormat));
        assert_eq!(format_message(&[0, u64::from_le_bytes(*b"abcdefgh")], LIMIT), Err(UnterminatedFormat));
        assert_eq!(fmt("%d %d", &[1]), Err(MissingArgument));
        assert_eq!(fmt("%*d", &[1]), Err(MissingArgument));
        assert_eq!(fmt("%.*d", &[]), Err(MissingArgument));
        assert_eq!(fmt("%s", &[]), Err(MissingArgument));
        assert_eq!(fmt("%s", &[u64::from_le_bytes(*b"no-nul!!")]), Err(UnterminatedString));
        assert_eq!(fmt("%ls", &s("x")), Err(Wide));
        assert_eq!(fmt("%lc", &[65]), Err(Wide));
        assert_eq!(fmt("%S", &s("x")), Err(Wide));
        assert_eq!(fmt("%C", &[65]), Err(Wide));
        assert_eq!(fmt("%1$d", &[1]), Err(Positional));
        for bad in [
            "%", "abc%", "%5", "%-", "%.", "%l", "%hh", "%y", "%m", "%'d", "%Id", "%qd", "%Zd", "%hf", "%Ld",
            "%lp", "%hs", "%Lc", "%ln%", "%*%", "%.*%", "%l%", "%k",
        ] {
            assert_eq!(fmt(bad, &[1, 2, 3]), Err(BadSpec), "format {bad:?}");
        }
    }

    #[test]
    fn output_and_fields_bounded() {
        use FormatError::TooLong;
        assert_eq!(fmt("%2147483647d", &[1]), Err(TooLong));
        assert_eq!(fmt("%99999999999999999999999d", &[1]), Err(TooLong));
        assert_eq!(fmt("%.2000000f", &[1]), Err(TooLong));
        assert_eq!(fmt("%*d", &[0x7fff_ffff, 1]), Err(TooLong));
        assert_eq!(fmt("%*d", &[0x8000_0000, 1]), Err(TooLong)); // INT_MIN width
                                                                 // A big %s precision is harmless (clamped to the string).
        assert_eq!(fmt("%.2147483647s", &s("ok")).unwrap(), "ok");
        let words = msg(0, "%1000d%1000d", &[1, 2]);
        assert!(format_message(&words, 2000).is_ok());
        assert_eq!(format_message(&words, 1999), Err(TooLong));
        let words = msg(0, "0123456789", &[]);
        assert_eq!(format_message(&words, 9), Err(TooLong));
    }

    #[test]
    fn pack_string_pads_to_words() {
        assert_eq!(pack_string(b""), vec![0]);
        assert_eq!(pack_string(b"1234567").len(), 1);
        assert_eq!(pack_string(b"12345678").len(), 2);
        assert_eq!(pack_string(b"ab"), vec![u64::from_le_bytes(*b"ab\0\0\0\0\0\0")]);
    }
}
