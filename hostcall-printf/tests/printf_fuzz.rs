//! Stable-Rust randomized test of the PRINTF service (the cargo-fuzz target
//! in `fuzz/` needs nightly). Deterministic seeds, a few seconds in all:
//!
//! * random byte strings through the same harness as the fuzz target
//!   (packet streams from several lanes/buffers, raw messages);
//! * differential: random single-conversion specs (flags, digit or `*`
//!   width/precision, length modifiers) and values, encoded as the device
//!   sends them, must format exactly like the C library's `snprintf`;
//! * mutated valid messages (bit flips, truncation) never panic and never
//!   print more than the cap.
#[path = "../../fuzz/harness/printf.rs"]
mod fuzzing;

use amdgpu_dropin_hostcall_printf::{format_message, pack_string, FormatError};
use std::ffi::{c_char, c_int, CString};

/// xorshift64*: small, deterministic, no crate needed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

#[test]
fn printf_random_bytes_through_fuzz_harness() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..6000 {
        let len = rng.below(600) as usize;
        let mut data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if rng.chance(50) && !data.is_empty() {
            // Bias toward packet streams that look like a device's.
            data[0] &= !1;
            for b in data.iter_mut().skip(1).step_by(3) {
                *b &= 0xE7; // descriptor source 0/1: replay the reply
            }
        }
        fuzzing::run(&data);
    }
}

/// A random printf conversion plus the C call that is its reference.
struct Case {
    /// Format sent to the device.
    device_fmt: String,
    /// Format handed to the host snprintf (differs only for `L`).
    host_fmt: String,
    /// Argument words as the device sends them.
    words: Vec<u64>,
    /// Width/precision `*` values, in order.
    stars: Vec<c_int>,
    value: HostValue,
}

enum HostValue {
    Int(c_int),
    Long(i64),
    Double(f64),
    Str(CString),
    Ptr(usize),
    None,
}

fn random_case(rng: &mut Rng) -> Case {
    const CONVS: &[u8] = b"diouxXcfFeEgGaAsp%n";
    let conv = *rng.pick(CONVS);
    let mut spec = String::from("%");
    if conv != b'%' {
        for flag in ['-', '+', ' ', '#', '0'] {
            if rng.chance(20) {
                spec.push(flag);
            }
        }
    }
    let mut stars = Vec::new();
    let mut words = Vec::new();
    if conv != b'%' {
        match rng.below(3) {
            0 => {}
            1 => spec.push_str(&rng.below(30).to_string()),
            _ => {
                spec.push('*');
                let w = rng.below(61) as c_int - 30;
                stars.push(w);
                words.push(u64::from(w as u32));
            }
        }
        if conv != b'c' && conv != b'p' || rng.chance(10) {
            match rng.below(4) {
                0 | 1 => {}
                2 => {
                    spec.push('.');
                    if rng.chance(80) {
                        spec.push_str(&rng.below(25).to_string());
                    }
                }
                _ => {
                    spec.push_str(".*");
                    let p = rng.below(31) as c_int - 5;
                    stars.push(p);
                    words.push(u64::from(p as u32));
                }
            }
        }
    }
    let length = match conv {
        b'd' | b'i' | b'o' | b'u' | b'x' | b'X' | b'n' => {
            *rng.pick(&["", "", "hh", "h", "l", "ll", "j", "z", "t"])
        }
        b'f' | b'F' | b'e' | b'E' | b'g' | b'G' | b'a' | b'A' => *rng.pick(&["", "", "l", "L"]),
        _ => "",
    };
    let host_spec = format!("{spec}{}{}", if length == "L" { "" } else { length }, conv as char);
    let device_spec = format!("{spec}{length}{}", conv as char);
    let value = match conv {
        b'd' | b'i' | b'o' | b'u' | b'x' | b'X' | b'c' => {
            let raw = rng.next();
            let raw = match rng.below(4) {
                0 => raw & 0xff,
                1 => raw & 0xffff,
                2 => raw | 0xffff_ffff_ffff_ff00,
                _ => raw,
            };
            if length.len() == 1 && length != "h" || length == "ll" {
                words.push(raw);
                HostValue::Long(raw as i64)
            } else {
                let v = if conv == b'c' { (raw as c_int) & 0xff } else { raw as u32 as c_int };
                words.push(u64::from(v as u32)); // zero-extended, as the device sends it
                HostValue::Int(v)
            }
        }
        b'f' | b'F' | b'e' | b'E' | b'g' | b'G' | b'a' | b'A' => {
            let v = match rng.below(6) {
                0 => f64::from_bits(rng.next()),
                1 => (rng.next() as i64 as f64) / 1e6,
                2 => {
                    *rng.pick(&[0.0, -0.0, 0.5, 1.5, 2.5, 0.125, 1e-310, f64::INFINITY, f64::NAN, -f64::NAN])
                }
                3 => (rng.below(2_000_000) as f64 - 1e6) / 1000.0,
                4 => f64::from_bits(rng.next() & 0x800F_FFFF_FFFF_FFFF), // subnormals
                _ => 10f64.powi(rng.below(600) as i32 - 300),
            };
            if !v.is_finite() || v.abs() > 1e30 {
                // Keep %f output short.
                if matches!(conv, b'f' | b'F') && v.is_finite() {
                    words.push(1.0f64.to_bits());
                    return Case {
                        device_fmt: device_spec,
                        host_fmt: host_spec,
                        words,
                        stars,
                        value: HostValue::Double(1.0),
                    };
                }
            }
            words.push(v.to_bits());
            HostValue::Double(v)
        }
        b's' => {
            let len = rng.below(40) as usize;
            let text: Vec<u8> = (0..len).map(|_| 1 + rng.below(255) as u8).collect();
            if rng.chance(10) {
                words.push(0); // NULL pointer: one zero word, prints ""
                HostValue::Str(CString::new("").unwrap())
            } else {
                words.extend(pack_string(&text));
                HostValue::Str(CString::new(text).unwrap())
            }
        }
        b'p' => {
            let v = if rng.chance(20) { 0 } else { rng.next() as usize };
            words.push(v as u64);
            HostValue::Ptr(v)
        }
        b'n' => {
            words.push(rng.next());
            HostValue::None
        }
        _ => HostValue::None,
    };
    Case { device_fmt: device_spec, host_fmt: host_spec, words, stars, value }
}

fn host_snprintf(case: &Case, prefix: &str, suffix: &str) -> Vec<u8> {
    if case.device_fmt.ends_with('n') {
        return format!("{prefix}{suffix}").into_bytes();
    }
    let fmt = CString::new(format!("{prefix}{}{suffix}", case.host_fmt)).unwrap();
    let mut buf = vec![0u8; 8192];
    let (b, n, f) = (buf.as_mut_ptr() as *mut c_char, buf.len(), fmt.as_ptr());
    macro_rules! call {
        ($($v:expr),*) => {
            // SAFETY: `fmt` holds exactly one conversion whose `*`s and length
            // modifier match the stars and the value type passed here.
            unsafe {
                match case.stars.as_slice() {
                    [] => libc::snprintf(b, n, f $(, $v)*),
                    [a] => libc::snprintf(b, n, f, *a $(, $v)*),
                    [a, c] => libc::snprintf(b, n, f, *a, *c $(, $v)*),
                    _ => unreachable!(),
                }
            }
        };
    }
    let written = match &case.value {
        HostValue::Int(v) => call!(*v),
        HostValue::Long(v) => call!(*v as libc::c_long),
        HostValue::Double(v) => call!(*v),
        HostValue::Str(s) => call!(s.as_ptr()),
        HostValue::Ptr(p) => call!(*p as *const libc::c_void),
        HostValue::None => call!(),
    };
    assert!(written >= 0 && (written as usize) < buf.len(), "{}", case.host_fmt);
    buf.truncate(written as usize);
    buf
}

#[test]
fn printf_random_conversions_match_libc_snprintf() {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    for i in 0..20_000 {
        let case = random_case(&mut rng);
        let (prefix, suffix) = if i % 3 == 0 { ("<", ">\n") } else { ("", "") };
        let mut words = vec![0u64];
        words.extend(pack_string(format!("{prefix}{}{suffix}", case.device_fmt).as_bytes()));
        words.extend_from_slice(&case.words);
        let ours = format_message(&words, 1 << 20).unwrap_or_else(|e| panic!("{:?}: {e:?}", case.device_fmt));
        let theirs = host_snprintf(&case, prefix, suffix);
        assert_eq!(
            String::from_utf8_lossy(&ours.bytes),
            String::from_utf8_lossy(&theirs),
            "format {:?} words {:x?}",
            case.device_fmt,
            case.words
        );
    }
}

#[test]
fn printf_mutated_messages_never_panic() {
    let mut rng = Rng(0x1234_5678_9ABC_DEF1);
    for _ in 0..10_000 {
        let mut fmt = String::new();
        let mut words = Vec::new();
        for _ in 0..1 + rng.below(4) {
            let case = random_case(&mut rng);
            fmt.push_str(&case.device_fmt);
            fmt.push(' ');
            words.extend(case.words);
        }
        let mut message = vec![0u64];
        message.extend(pack_string(fmt.as_bytes()));
        message.extend(words);
        match rng.below(4) {
            0 => {
                let cut = rng.below(message.len() as u64 + 1) as usize;
                message.truncate(cut);
            }
            1 => {
                let i = rng.below(message.len() as u64) as usize;
                message[i] ^= 1 << rng.below(64);
            }
            2 => {
                let i = rng.below(message.len() as u64) as usize;
                message[i] = rng.next();
            }
            _ => {}
        }
        match format_message(&message, 4096) {
            Ok(out) => assert!(out.bytes.len() <= 4096),
            Err(FormatError::Empty) => assert!(message.is_empty()),
            Err(_) => {}
        }
    }
}
