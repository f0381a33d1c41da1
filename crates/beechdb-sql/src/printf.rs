//! `printf()` and `format()`: SQLite's own formatter (`sqlite3_str_vappendf` in printf.c,
//! as its SQL function drives it), so that a format gives SQLite's bytes: its flags (`-+ #0,!`),
//! widths and precisions (`*` from an argument), byte counts for `%s` unless `!`, its
//! rounding of reals (`sqlite3FpDecode`: 16 significant digits, 26 with `!`, halves away from
//! zero), `%r` ordinals, `%#q` escapes, and its endings: an unknown conversion ends the
//! output there, and a result never begun is NULL.
//!
//! May call: `value` (argument conversions). Keeps: no output reaches
//! [`crate::func::MAX_LENGTH`]; past it the result is NULL, as SQLite's.

use crate::func::MAX_LENGTH;
use crate::value::Value;
use std::borrow::Cow;

/// SQLite's cap on a real's precision (`SQLITE_FP_PRECISION_LIMIT`).
const FP_PRECISION_LIMIT: i64 = 100_000_000;
/// Below this precision an integer's digits fit SQLite's stack buffer, which is not checked
/// against the length limit (`etBUFSIZE - 10 - etBUFSIZE / 3`).
const SMALL_PRECISION: i64 = 37;

/// The result of `printf(format, args...)`.
pub(crate) fn printf(args: &[Value]) -> Value {
    let Some(format) = args.first().and_then(text_arg) else {
        return Value::Null;
    };
    let mut p = Printer {
        args: &args[1..],
        used: 0,
        out: Vec::new(),
        begun: false,
    };
    match p.format(&format) {
        Ok(()) if p.begun => match String::from_utf8(p.out) {
            Ok(s) => Value::from(s),
            // A byte precision can cut a character; SQLite keeps its bytes, a text here
            // holds the replacement character instead.
            Err(e) => Value::from(String::from_utf8_lossy(e.as_bytes()).into_owned()),
        },
        _ => Value::Null,
    }
}

/// The output reached the length limit: the result is NULL.
struct TooBig;

/// An argument as `sqlite3_value_text` gives it to C: `None` for NULL, and up to its first
/// zero byte.
pub(crate) fn text_arg(v: &Value) -> Option<Cow<'_, [u8]>> {
    let bytes: Cow<[u8]> = match v {
        Value::Null => return None,
        Value::Text(s) => Cow::Borrowed(s.as_bytes()),
        Value::Blob(b) => Cow::Borrowed(b),
        other => Cow::Owned(other.to_text().into_bytes()),
    };
    Some(match bytes.iter().position(|&b| b == 0) {
        Some(end) => match bytes {
            Cow::Borrowed(b) => Cow::Borrowed(&b[..end]),
            Cow::Owned(mut b) => {
                b.truncate(end);
                Cow::Owned(b)
            }
        },
        None => bytes,
    })
}

struct Printer<'a> {
    args: &'a [Value],
    used: usize,
    out: Vec<u8>,
    /// Whether anything was appended, even nothing: SQLite's result is NULL otherwise.
    begun: bool,
}

/// What a conversion does with its argument (SQLite's `et*` kinds).
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Decimal {
        signed: bool,
    },
    Radix {
        base: u64,
        upper: bool,
        prefix: &'static [u8],
    },
    Ordinal,
    Pointer,
    Float,
    Exp,
    Generic,
    Size,
    Percent,
    Char,
    Str,
    Escape(u8),
}

fn kind_of(c: u8) -> Option<Kind> {
    Some(match c {
        b'd' | b'i' => Kind::Decimal { signed: true },
        b'u' => Kind::Decimal { signed: false },
        b's' | b'z' => Kind::Str,
        b'g' | b'G' => Kind::Generic,
        b'f' => Kind::Float,
        b'e' | b'E' => Kind::Exp,
        b'q' | b'Q' | b'w' => Kind::Escape(c),
        b'c' => Kind::Char,
        b'o' => Kind::Radix {
            base: 8,
            upper: false,
            prefix: b"0",
        },
        b'x' => Kind::Radix {
            base: 16,
            upper: false,
            prefix: b"0x",
        },
        b'X' => Kind::Radix {
            base: 16,
            upper: true,
            prefix: b"0X",
        },
        b'p' => Kind::Pointer,
        b'r' => Kind::Ordinal,
        b'n' => Kind::Size,
        b'%' => Kind::Percent,
        // %T and %S are SQLite's own, for its messages: the SQL function stops at them.
        _ => return None,
    })
}

/// One conversion's flags, width and precision.
#[derive(Default)]
struct Spec {
    left: bool,
    /// `+` or ` `, or 0.
    sign: u8,
    alt: bool,
    alt2: bool,
    zero: bool,
    thousands: bool,
    width: i64,
    /// -1 when none was given.
    precision: i64,
}

impl Printer<'_> {
    fn next_arg(&mut self) -> Option<&Value> {
        let v = self.args.get(self.used);
        self.used += usize::from(v.is_some());
        v
    }

    fn int_arg(&mut self) -> i64 {
        self.next_arg().map_or(0, Value::as_i64)
    }

    fn real_arg(&mut self) -> f64 {
        self.next_arg().map_or(0.0, Value::as_f64)
    }

    fn text_arg(&mut self) -> Option<Vec<u8>> {
        self.next_arg().and_then(text_arg).map(Cow::into_owned)
    }

    fn append(&mut self, bytes: &[u8]) -> Result<(), TooBig> {
        self.room(bytes.len() as u64)?;
        self.out.extend_from_slice(bytes);
        Ok(())
    }

    fn append_repeated(&mut self, byte: u8, n: i64) -> Result<(), TooBig> {
        self.room(n as u64)?;
        self.out.resize(self.out.len() + n as usize, byte);
        Ok(())
    }

    /// Room for `n` more bytes under the length limit (SQLite keeps one for its NUL).
    fn room(&mut self, n: u64) -> Result<(), TooBig> {
        self.begun = true;
        match self.out.len() as u64 + n < MAX_LENGTH as u64 {
            true => Ok(()),
            false => Err(TooBig),
        }
    }

    /// A scratch buffer of `n` bytes, refused as SQLite's `printfTempBuf` refuses it.
    fn scratch(n: i64) -> Result<(), TooBig> {
        match n > MAX_LENGTH as i64 {
            true => Err(TooBig),
            false => Ok(()),
        }
    }

    fn format(&mut self, fmt: &[u8]) -> Result<(), TooBig> {
        let fmt = match fmt.iter().position(|&b| b == 0) {
            Some(end) => &fmt[..end],
            None => fmt,
        };
        let at = |i: usize| fmt.get(i).copied().unwrap_or(0);
        let mut i = 0;
        while i < fmt.len() {
            if fmt[i] != b'%' {
                let start = i;
                while i < fmt.len() && fmt[i] != b'%' {
                    i += 1;
                }
                self.append(&fmt[start..i])?;
                if i == fmt.len() {
                    break;
                }
            }
            i += 1;
            let mut c = at(i);
            if c == 0 {
                self.append(b"%")?;
                break;
            }
            let mut spec = Spec {
                precision: -1,
                ..Spec::default()
            };
            loop {
                let mut done = false;
                match c {
                    b'-' => spec.left = true,
                    b'+' | b' ' => spec.sign = c,
                    b'#' => spec.alt = true,
                    b'!' => spec.alt2 = true,
                    b'0' => spec.zero = true,
                    b',' => spec.thousands = true,
                    b'l' => {
                        // A length modifier means nothing for SQL values.
                        i += 1;
                        c = at(i);
                        if c == b'l' {
                            i += 1;
                            c = at(i);
                        }
                        done = true;
                    }
                    b'1'..=b'9' => {
                        let mut w = u32::from(c - b'0');
                        loop {
                            i += 1;
                            c = at(i);
                            if !c.is_ascii_digit() {
                                break;
                            }
                            w = w.wrapping_mul(10).wrapping_add(u32::from(c - b'0'));
                        }
                        spec.width = i64::from(w & 0x7fff_ffff);
                        if c != b'.' && c != b'l' {
                            done = true;
                        } else {
                            i -= 1;
                        }
                    }
                    b'*' => {
                        let w = self.int_arg() as i32;
                        spec.width = i64::from(w);
                        if w < 0 {
                            spec.left = true;
                            spec.width = if w >= -i32::MAX { -i64::from(w) } else { 0 };
                        }
                        let following = at(i + 1);
                        if following != b'.' && following != b'l' {
                            i += 1;
                            c = at(i);
                            done = true;
                        }
                    }
                    b'.' => {
                        i += 1;
                        c = at(i);
                        if c == b'*' {
                            let p = self.int_arg() as i32;
                            spec.precision = match p {
                                p if p >= 0 => i64::from(p),
                                p if p >= -i32::MAX => -i64::from(p),
                                _ => -1,
                            };
                            i += 1;
                            c = at(i);
                        } else {
                            let mut p = 0u32;
                            while c.is_ascii_digit() {
                                p = p.wrapping_mul(10).wrapping_add(u32::from(c - b'0'));
                                i += 1;
                                c = at(i);
                            }
                            spec.precision = i64::from(p & 0x7fff_ffff);
                        }
                        if c == b'l' {
                            i -= 1;
                        } else {
                            done = true;
                        }
                    }
                    _ => done = true,
                }
                if done {
                    break;
                }
                i += 1;
                c = at(i);
                if c == 0 {
                    break;
                }
            }
            let Some(kind) = kind_of(c) else {
                // SQLite stops at a conversion it does not know, keeping what it wrote.
                return Ok(());
            };
            self.convert(c, kind, spec)?;
            i += 1;
        }
        Ok(())
    }

    /// One conversion, with its padding, appended.
    fn convert(&mut self, c: u8, kind: Kind, mut spec: Spec) -> Result<(), TooBig> {
        let body: Vec<u8> = match kind {
            Kind::Decimal { .. } | Kind::Radix { .. } | Kind::Ordinal | Kind::Pointer => {
                self.integer(kind, &mut spec)?
            }
            Kind::Float | Kind::Exp | Kind::Generic => {
                render_real(self.real_arg(), c, kind, &mut spec)?
            }
            Kind::Size => {
                spec.width = 0;
                Vec::new()
            }
            Kind::Percent => b"%".to_vec(),
            Kind::Char => {
                let first = self.text_arg().map_or_else(
                    || vec![0],
                    |t| {
                        // One character: its first byte, and the continuation bytes after
                        // it if it leads several (up to four); a zero byte for ''.
                        let lead = t.first().copied().unwrap_or(0);
                        let mut n = 1;
                        if lead & 0xc0 == 0xc0 {
                            while n < 4 && t.get(n).is_some_and(|b| b & 0xc0 == 0x80) {
                                n += 1;
                            }
                        }
                        t.get(..n).map_or_else(|| vec![lead], <[u8]>::to_vec)
                    },
                );
                if spec.precision > 1 {
                    spec.width -= spec.precision - 1;
                    if spec.width > 1 && !spec.left {
                        self.append_repeated(b' ', spec.width - 1)?;
                        spec.width = 0;
                    }
                    let copies = spec.precision - 1;
                    self.room(first.len() as u64 * copies as u64)?;
                    for _ in 0..copies {
                        self.out.extend_from_slice(&first);
                    }
                }
                spec.alt2 = true;
                first
            }
            Kind::Str => {
                let text = self.text_arg().unwrap_or_default();
                let len = match spec.precision {
                    p if p < 0 => text.len(),
                    p if spec.alt2 => char_bytes(&text, p),
                    p => text.len().min(p as usize),
                };
                let mut text = text;
                text.truncate(len);
                text
            }
            Kind::Escape(q) => self.escaped(q, &mut spec)?,
        };
        if spec.alt2 && spec.width > 0 && matches!(kind, Kind::Char | Kind::Str | Kind::Escape(_)) {
            // Widths count characters under `!`: each continuation byte widens the field.
            spec.width += body.iter().filter(|&&b| b & 0xc0 == 0x80).count() as i64;
        }
        let pad = spec.width - body.len() as i64;
        if pad > 0 && !spec.left {
            self.append_repeated(b' ', pad)?;
        }
        self.append(&body)?;
        if pad > 0 && spec.left {
            self.append_repeated(b' ', pad)?;
        }
        Ok(())
    }

    fn integer(&mut self, kind: Kind, spec: &mut Spec) -> Result<Vec<u8>, TooBig> {
        let (base, upper, alt_prefix, signed) = match kind {
            Kind::Decimal { signed } => (10, false, &b""[..], signed),
            Kind::Radix {
                base,
                upper,
                prefix,
            } => {
                spec.thousands = false;
                (base, upper, prefix, false)
            }
            Kind::Ordinal => {
                spec.thousands = false;
                (10, false, &b""[..], true)
            }
            _ => {
                spec.thousands = false;
                (16, true, &b"0x"[..], false)
            }
        };
        let v = self.int_arg();
        let (mut value, sign) = match signed && v < 0 {
            true => (v.unsigned_abs(), b'-'),
            false if signed => (v as u64, spec.sign),
            false => (v as u64, 0),
        };
        if value == 0 {
            spec.alt = false;
        }
        let signs = i64::from(sign != 0);
        if spec.zero && spec.precision < spec.width - signs {
            spec.precision = spec.width - signs;
        }
        if spec.precision >= SMALL_PRECISION {
            let thousands = if spec.thousands {
                spec.precision / 3
            } else {
                0
            };
            Self::scratch(spec.precision + 10 + thousands)?;
        }
        // Built backwards, as SQLite builds it.
        let mut rev: Vec<u8> = Vec::new();
        if kind == Kind::Ordinal {
            let mut x = (value % 10) as usize;
            if x >= 4 || (value / 10) % 10 == 1 {
                x = 0;
            }
            let suffix = &b"thstndrd"[x * 2..x * 2 + 2];
            rev.extend([suffix[1], suffix[0]]);
        }
        let digits: &[u8] = if upper {
            b"0123456789ABCDEF"
        } else {
            b"0123456789abcdef"
        };
        let start = rev.len();
        loop {
            rev.push(digits[(value % base) as usize]);
            value /= base;
            if value == 0 {
                break;
            }
        }
        // An ordinal's suffix counts toward the precision, as in SQLite.
        while spec.precision > rev.len() as i64 {
            rev.push(b'0');
        }
        let mut body: Vec<u8> = Vec::with_capacity(rev.len() + 8);
        if spec.alt {
            body.extend_from_slice(alt_prefix);
        }
        if sign != 0 {
            body.push(sign);
        }
        let number = &rev[start..];
        let length = number.len();
        for (n, &d) in number.iter().rev().enumerate() {
            body.push(d);
            let left = length - 1 - n;
            if spec.thousands && left > 0 && left.is_multiple_of(3) {
                body.push(b',');
            }
        }
        body.extend(rev[..start].iter().rev());
        Ok(body)
    }

    /// `%q %Q %w`: the text with its quotes doubled (`%#q`: control characters and
    /// backslashes escaped as `unistr()` reads them).
    fn escaped(&mut self, conv: u8, spec: &mut Spec) -> Result<Vec<u8>, TooBig> {
        let arg = self.text_arg();
        let quote = if conv == b'w' { b'"' } else { b'\'' };
        if conv == b'w' {
            spec.alt = false;
        }
        let mut enclose = 0;
        let text: Vec<u8> = match arg {
            Some(t) => {
                if conv == b'Q' {
                    enclose = 1;
                }
                t
            }
            None if conv == b'Q' => b"NULL".to_vec(),
            None => b"(NULL)".to_vec(),
        };
        // The precision counts bytes of the input (characters under `!`).
        let mut taken = 0;
        let mut left = spec.precision;
        while left != 0 && taken < text.len() {
            if spec.alt2 && text[taken] & 0xc0 == 0xc0 {
                while text.get(taken + 1).is_some_and(|b| b & 0xc0 == 0x80) {
                    taken += 1;
                }
            }
            taken += 1;
            left -= 1;
        }
        let text = &text[..taken];
        let mut quotes = text.iter().filter(|&&b| b == quote).count() as i64;
        if spec.alt {
            let backslashes = text.iter().filter(|&&b| b == b'\\').count() as i64;
            let controls = text.iter().filter(|&&b| b <= 0x1f).count() as i64;
            if controls > 0 || conv == b'q' {
                quotes += backslashes + 5 * controls;
                if conv == b'Q' {
                    quotes += 10;
                    enclose = 2;
                }
            } else {
                spec.alt = false;
            }
        }
        let needed = quotes + text.len() as i64 + 3;
        Self::scratch(needed)?;
        let mut out = Vec::with_capacity(needed as usize);
        match enclose {
            2 => out.extend_from_slice(b"unistr('"),
            1 => out.push(b'\''),
            _ => {}
        }
        for &b in text {
            if b == quote {
                out.extend([b, b]);
            } else if spec.alt && b == b'\\' {
                out.extend(b"\\\\");
            } else if spec.alt && b <= 0x1f {
                out.extend(b"\\u00");
                out.push(if b >= 0x10 { b'1' } else { b'0' });
                out.push(b"0123456789abcdef"[usize::from(b & 0xf)]);
            } else {
                out.push(b);
            }
        }
        match enclose {
            2 => out.extend_from_slice(b"')"),
            1 => out.push(b'\''),
            _ => {}
        }
        Ok(out)
    }
}

/// A real as SQLite renders it as text (`%!.15g`): 15 significant digits, with a `.` or
/// an exponent.
pub(crate) fn real_text(r: f64) -> String {
    let mut spec = Spec {
        alt2: true,
        precision: 15,
        ..Spec::default()
    };
    let body = render_real(r, b'g', Kind::Generic, &mut spec).unwrap_or_default();
    String::from_utf8(body).expect("ASCII")
}

/// A real as SQLite's `quote()` writes it: `%!.15g` when that reads back as the same
/// value, else `%!.20e`.
pub(crate) fn real_quoted(r: f64) -> String {
    let short = real_text(r);
    if sqlite_atof(&short) == r {
        return short;
    }
    let mut spec = Spec {
        alt2: true,
        precision: 20,
        ..Spec::default()
    };
    let body = render_real(r, b'e', Kind::Exp, &mut spec).unwrap_or_default();
    String::from_utf8(body).expect("ASCII")
}

/// `v` under `%f %e %E %g %G` (conversion `c`).
fn render_real(v: f64, c: u8, kind: Kind, spec: &mut Spec) -> Result<Vec<u8>, TooBig> {
    let mut precision = if spec.precision < 0 {
        6
    } else {
        spec.precision.min(FP_PRECISION_LIMIT)
    };
    let round = match kind {
        Kind::Float => -precision,
        Kind::Generic => {
            precision = precision.max(1);
            precision
        }
        _ => precision + 1,
    };
    let mut d = fp_decode(v, round, if spec.alt2 { 26 } else { 16 });
    match d.special {
        Special::NaN => {
            let text: &[u8] = if spec.zero { b"null" } else { b"NaN" };
            return Ok(text.to_vec());
        }
        Special::Infinity if spec.zero => {
            d.digits = vec![b'9'];
            d.point = 1000;
        }
        Special::Infinity => {
            let text: &[u8] = match (d.negative, spec.sign) {
                (true, _) => b"-Inf",
                (false, b'+') => b"+Inf",
                (false, b' ') => b" Inf",
                _ => b"Inf",
            };
            return Ok(text.to_vec());
        }
        Special::No => {}
    }
    let prefix = if d.negative { b'-' } else { spec.sign };
    let mut exp = d.point - 1;
    let mut as_exp = kind == Kind::Exp;
    let trim_zeros = if kind == Kind::Generic {
        precision -= 1;
        if exp < -4 || exp > precision {
            as_exp = true;
        } else {
            precision -= exp;
        }
        !spec.alt
    } else {
        spec.alt2
    };
    let mut e2 = if as_exp { 0 } else { d.point - 1 };
    let mut needed = e2.max(0) + precision + spec.width + 15;
    if spec.thousands && e2 > 0 {
        needed += (e2 + 2) / 3;
    }
    Printer::scratch(needed)?;
    let point = precision > 0 || spec.alt || spec.alt2;
    let mut out: Vec<u8> = Vec::with_capacity(needed.min(1 << 16) as usize);
    if prefix != 0 {
        out.push(prefix);
    }
    let mut digits = d.digits.iter().copied();
    let mut next_digit = || digits.next().unwrap_or(b'0');
    if e2 < 0 {
        out.push(b'0');
    } else {
        while e2 >= 0 {
            out.push(next_digit());
            if spec.thousands && e2 % 3 == 0 && e2 > 1 {
                out.push(b',');
            }
            e2 -= 1;
        }
    }
    if point {
        out.push(b'.');
    }
    e2 += 1;
    while e2 < 0 && precision > 0 {
        out.push(b'0');
        precision -= 1;
        e2 += 1;
    }
    while precision > 0 {
        out.push(next_digit());
        precision -= 1;
    }
    if trim_zeros && point {
        while out.last() == Some(&b'0') {
            out.pop();
        }
        if out.last() == Some(&b'.') {
            match spec.alt2 {
                true => out.push(b'0'),
                false => {
                    out.pop();
                }
            }
        }
    }
    if as_exp {
        exp = d.point - 1;
        out.push(if c.is_ascii_uppercase() { b'E' } else { b'e' });
        out.push(if exp < 0 { b'-' } else { b'+' });
        let exp = exp.unsigned_abs();
        if exp >= 100 {
            out.push(b'0' + (exp / 100) as u8);
        }
        out.push(b'0' + (exp / 10 % 10) as u8);
        out.push(b'0' + (exp % 10) as u8);
    }
    let width = spec.width;
    if spec.zero && !spec.left && (out.len() as i64) < width {
        let at = usize::from(prefix != 0);
        let zeros = width as usize - out.len();
        out.splice(at..at, std::iter::repeat_n(b'0', zeros));
    }
    Ok(out)
}

/// Bytes of the first `chars` characters of `text`.
fn char_bytes(text: &[u8], chars: i64) -> usize {
    let mut at = 0;
    for _ in 0..chars {
        if at >= text.len() {
            break;
        }
        at += 1;
        if text[at - 1] >= 0xc0 {
            while text.get(at).is_some_and(|b| b & 0xc0 == 0x80) {
                at += 1;
            }
        }
    }
    at
}

#[derive(PartialEq)]
enum Special {
    No,
    Infinity,
    NaN,
}

/// A real's decimal digits as SQLite's `sqlite3FpDecode` finds them.
struct Decoded {
    negative: bool,
    special: Special,
    /// Significant digits, no trailing zeros.
    digits: Vec<u8>,
    /// Where the decimal point falls: the value is `0.digits * 10^point`.
    point: i64,
}

/// `r`'s digits, rounded to `round` significant digits when positive, or to `-round`
/// places after the point when not, and to `max_digits` in any case; found, as SQLite finds
/// them, by scaling into `[1e17, 1e19)` in double-double arithmetic (so a half rounds away
/// from zero and digits past the 17th are approximations, as SQLite's are).
fn fp_decode(r: f64, round: i64, max_digits: i64) -> Decoded {
    let negative = r < 0.0;
    let r = r.abs();
    if r == 0.0 {
        return Decoded {
            negative: false,
            special: Special::No,
            digits: vec![b'0'],
            point: 1,
        };
    }
    if !r.is_finite() {
        return Decoded {
            negative,
            special: if r.is_nan() {
                Special::NaN
            } else {
                Special::Infinity
            },
            digits: Vec::new(),
            point: 0,
        };
    }
    let mut rr = [r, 0.0];
    let mut exp: i64 = 0;
    if rr[0] > SCALE[0] {
        while rr[0] > SCALE[1] {
            exp += 100;
            dekker_mul2(&mut rr, E_100);
        }
        while rr[0] > SCALE[2] {
            exp += 10;
            dekker_mul2(&mut rr, E_10);
        }
        while rr[0] > SCALE[0] {
            exp += 1;
            dekker_mul2(&mut rr, E_1);
        }
    } else {
        while rr[0] < SCALE[3] {
            exp -= 100;
            dekker_mul2(&mut rr, E100);
        }
        while rr[0] < SCALE[4] {
            exp -= 10;
            dekker_mul2(&mut rr, E10);
        }
        while rr[0] < SCALE[5] {
            exp -= 1;
            dekker_mul2(&mut rr, E1);
        }
    }
    let v: u64 = if rr[1] < 0.0 {
        (rr[0] as u64).wrapping_sub((-rr[1]) as u64)
    } else {
        (rr[0] as u64).wrapping_add(rr[1] as u64)
    };
    // A leading place for a carry out of the rounding.
    let mut digits: Vec<u8> = vec![b'0'];
    digits.extend(v.to_string().bytes());
    let mut n = digits.len() as i64 - 1;
    let mut first = 1usize;
    let mut point = n + exp;
    let mut round = round;
    if round <= 0 {
        round = point - round;
        if round == 0 && digits[1] >= b'5' {
            // Rounds up to one digit, before the first.
            round = 1;
            first = 0;
            n += 1;
            point += 1;
        }
    }
    if round > 0 && (round < n || n > max_digits) {
        let round = round.min(max_digits) as usize;
        n = round as i64;
        let z = &mut digits[first..];
        if z.get(round).is_some_and(|&d| d >= b'5') {
            let mut j = round;
            loop {
                j -= 1;
                z[j] += 1;
                if z[j] <= b'9' {
                    break;
                }
                z[j] = b'0';
                if j == 0 {
                    first -= 1;
                    digits[first] = b'1';
                    n += 1;
                    point += 1;
                    break;
                }
            }
        }
    }
    let mut digits = digits[first..first + n as usize].to_vec();
    while digits.len() > 1 && digits.last() == Some(&b'0') {
        digits.pop();
    }
    Decoded {
        negative,
        special: Special::No,
        digits,
        point,
    }
}

/// The real that well-formed number text (`[-]digits[.digits][e[+-]digits]`) reads as in
/// SQLite (`sqlite3AtoF`, in double-double arithmetic, which is not always the nearest
/// double): what `quote()` checks its short form against.
pub(crate) fn sqlite_atof(text: &str) -> f64 {
    const SIGNIFICANT: u64 = (u64::MAX - 9) / 10;
    let mut z = text.as_bytes();
    let negative = z.first() == Some(&b'-');
    if matches!(z.first(), Some(b'-' | b'+')) {
        z = &z[1..];
    }
    let (mut s, mut d, mut e) = (0u64, 0i64, 0i64);
    while let Some(c) = z.first().filter(|c| c.is_ascii_digit()) {
        if s < SIGNIFICANT {
            s = s * 10 + u64::from(c - b'0');
        } else {
            d += 1;
        }
        z = &z[1..];
    }
    if z.first() == Some(&b'.') {
        z = &z[1..];
        while let Some(c) = z.first().filter(|c| c.is_ascii_digit()) {
            if s < SIGNIFICANT {
                s = s * 10 + u64::from(c - b'0');
                d -= 1;
            }
            z = &z[1..];
        }
    }
    if matches!(z.first(), Some(b'e' | b'E')) {
        z = &z[1..];
        let esign = if z.first() == Some(&b'-') { -1 } else { 1 };
        if matches!(z.first(), Some(b'-' | b'+')) {
            z = &z[1..];
        }
        for c in z.iter().take_while(|c| c.is_ascii_digit()) {
            e = if e < 10_000 {
                e * 10 + i64::from(c - b'0')
            } else {
                10_000
            };
        }
        e *= esign;
    }
    if s == 0 {
        return if negative { -0.0 } else { 0.0 };
    }
    e += d;
    while e > 0 && s < (u64::MAX - 0x7ff) / 10 {
        s *= 10;
        e -= 1;
    }
    while e < 0 && s % 10 == 0 {
        s /= 10;
        e += 1;
    }
    let mut rr = [s as f64, 0.0];
    if rr[0] <= 18_446_744_073_709_549_568.0 {
        let s2 = rr[0] as u64;
        rr[1] = if s >= s2 {
            (s - s2) as f64
        } else {
            -((s2 - s) as f64)
        };
    }
    while e >= 100 {
        e -= 100;
        dekker_mul2(&mut rr, E100);
    }
    while e >= 10 {
        e -= 10;
        dekker_mul2(&mut rr, E10);
    }
    while e >= 1 {
        e -= 1;
        dekker_mul2(&mut rr, E1);
    }
    while e <= -100 {
        e += 100;
        dekker_mul2(&mut rr, E_100);
    }
    while e <= -10 {
        e += 10;
        dekker_mul2(&mut rr, E_10);
    }
    while e <= -1 {
        e += 1;
        dekker_mul2(&mut rr, E_1);
    }
    let mut r = rr[0] + rr[1];
    if r.is_nan() {
        r = f64::INFINITY;
    }
    if negative {
        -r
    } else {
        r
    }
}

// Powers of ten as double-doubles (value, error), as SQLite writes them.
#[allow(clippy::excessive_precision)]
const E100: (f64, f64) = (1.0e100, -1.590_289_110_975_991_804_6e83);
#[allow(clippy::excessive_precision)]
const E_100: (f64, f64) = (1.0e-100, -1.999_189_980_260_288_361_96e-117);
const E10: (f64, f64) = (1.0e10, 0.0);
#[allow(clippy::excessive_precision)]
const E_10: (f64, f64) = (1.0e-10, -3.643_219_731_549_774_157_9e-27);
const E1: (f64, f64) = (1.0e1, 0.0);
#[allow(clippy::excessive_precision)]
const E_1: (f64, f64) = (1.0e-1, -5.551_115_123_125_782_702_1e-18);
/// The bounds `fp_decode` scales a real between, with SQLite's own literals (each is the
/// double nearest its decimal, as in C).
#[allow(clippy::excessive_precision)]
const SCALE: [f64; 6] = [
    9.223372036854774784e18,
    9.223372036854774784e118,
    9.223372036854774784e28,
    9.223372036854774784e-83,
    9.223372036854774784e07,
    9.22337203685477478e17,
];

/// `x *= (y.0 + y.1)` in double-double arithmetic (SQLite's `dekkerMul2`).
fn dekker_mul2(x: &mut [f64; 2], (y, yy): (f64, f64)) {
    let split = |v: f64| f64::from_bits(v.to_bits() & 0xffff_ffff_fc00_0000);
    let hx = split(x[0]);
    let tx = x[0] - hx;
    let hy = split(y);
    let ty = y - hy;
    let p = hx * hy;
    let q = hx * ty + tx * hy;
    let c = p + q;
    let mut cc = p - c + q + tx * ty;
    cc += x[0] * yy + x[1] * y;
    x[0] = c + cc;
    x[1] = c - x[0];
    x[1] += cc;
}

#[cfg(test)]
mod tests {
    //! The formatter's own corners; tests/printf.rs compares it with SQLite at large.
    use super::*;

    fn f(format: &str, args: &[Value]) -> Value {
        let mut all = vec![Value::text(format)];
        all.extend_from_slice(args);
        printf(&all)
    }

    #[test]
    fn decoding_rounds_halves_away_from_zero() {
        let d = fp_decode(2.5, 0, 16);
        assert_eq!((d.digits, d.point), (b"3".to_vec(), 1));
        let d = fp_decode(0.125, 2, 16);
        assert_eq!((d.digits, d.point), (b"13".to_vec(), 0));
        let d = fp_decode(9.96, 2, 16);
        assert_eq!((d.digits, d.point), (b"1".to_vec(), 2));
        assert_eq!(sqlite_atof("8.87568544406733e-101"), 8.875685444067331e-101);
        assert_eq!(real_text(0.00001234), "1.234e-05");
        assert_eq!(real_quoted(0.1 + 0.2), "3.000000000000000445e-01");
    }

    #[test]
    fn endings_follow_sqlite() {
        // An unknown conversion ends the output; nothing written at all is NULL.
        let i = Value::Integer;
        assert_eq!(f("%d|%hd|%d", &[i(1), i(2), i(3)]), Value::text("1|"));
        assert_eq!(f("%y", &[]), Value::Null);
        assert_eq!(f("", &[]), Value::Null);
        assert_eq!(f("%s", &["".into()]), Value::text(""));
        assert_eq!(printf(&[Value::Null]), Value::Null);
        // Past the length limit: NULL, with nothing allocated.
        assert_eq!(f("%1000000000d", &[i(1)]), Value::Null);
        assert_eq!(
            f("%.*c", &[i(i64::from(i32::MAX)), "x".into()]),
            Value::Null
        );
    }
}
