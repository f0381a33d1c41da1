//! SQL values with SQLite's semantics: storage classes, type affinity, comparison and sort
//! order across types, arithmetic (integer overflow to REAL, integer division), conversion
//! to and from text.
//!
//! Owns: [`Value`], [`Affinity`], [`Collation`] and the rules between them. May call:
//! nothing. Invariant: every rule here is SQLite's as documented (datatype3.html,
//! lang_expr.html); differences are listed in docs/sql-compat.md.

use std::cmp::Ordering;

/// 2^63: the first REAL past the largest integer.
pub(crate) const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
use std::fmt;
use std::sync::Arc;

/// A value of one of SQLite's five storage classes.
#[derive(Debug, Clone, Default)]
pub enum Value {
    #[default]
    Null,
    Integer(i64),
    Real(f64),
    Text(Arc<str>),
    Blob(Arc<[u8]>),
}

/// A column's type affinity (datatype3.html, 3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Affinity {
    Text,
    Numeric,
    Integer,
    Real,
    Blob,
}

/// How text compares (datatype3.html, 7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Collation {
    #[default]
    Binary,
    NoCase,
    Rtrim,
    /// A collation the application registered (see `functions.rs`); only in expressions.
    User(u32),
}

impl Collation {
    pub fn from_name(name: &str) -> Option<Collation> {
        match name.to_ascii_uppercase().as_str() {
            "BINARY" => Some(Collation::Binary),
            "NOCASE" => Some(Collation::NoCase),
            "RTRIM" => Some(Collation::Rtrim),
            _ => None,
        }
    }

    pub fn compare(self, a: &str, b: &str) -> Ordering {
        match self {
            Collation::Binary => a.as_bytes().cmp(b.as_bytes()),
            Collation::NoCase => {
                let fold = |s: &str| {
                    s.bytes()
                        .map(|c| c.to_ascii_lowercase())
                        .collect::<Vec<_>>()
                };
                fold(a).cmp(&fold(b))
            }
            Collation::Rtrim => a.trim_end_matches(' ').cmp(b.trim_end_matches(' ')),
            Collation::User(i) => crate::functions::user_compare(i, a, b),
        }
    }
}

impl Affinity {
    /// The affinity of a declared column type (datatype3.html, 3.1).
    pub fn of_declared(decl: Option<&str>) -> Affinity {
        let Some(d) = decl else {
            return Affinity::Blob;
        };
        let d = d.to_ascii_uppercase();
        if d.contains("INT") {
            Affinity::Integer
        } else if d.contains("CHAR") || d.contains("CLOB") || d.contains("TEXT") {
            Affinity::Text
        } else if d.contains("BLOB") || d.is_empty() {
            Affinity::Blob
        } else if d.contains("REAL") || d.contains("FLOA") || d.contains("DOUB") {
            Affinity::Real
        } else {
            Affinity::Numeric
        }
    }

    pub fn is_numeric(self) -> bool {
        matches!(self, Affinity::Numeric | Affinity::Integer | Affinity::Real)
    }

    /// `v` converted as storing it in a column of this affinity would.
    pub fn apply(self, v: Value) -> Value {
        match self {
            Affinity::Blob => v,
            Affinity::Text => match v {
                Value::Integer(_) | Value::Real(_) => Value::Text(v.to_text().into()),
                other => other,
            },
            Affinity::Numeric | Affinity::Integer => match v {
                Value::Text(ref s) => match parse_number(s) {
                    Some(n) => integral(n),
                    None => v,
                },
                Value::Real(r) => integral(Value::Real(r)),
                other => other,
            },
            Affinity::Real => match v {
                Value::Text(ref s) => match parse_number(s) {
                    Some(n) => Value::Real(n.as_f64()),
                    None => v,
                },
                Value::Integer(i) => Value::Real(i as f64),
                // SQLite stores a REAL column's integral values as integers: -0.0 comes
                // back as 0.0.
                Value::Real(0.0) => Value::Real(0.0),
                other => other,
            },
        }
    }
}

/// A REAL holding an integer that fits becomes an INTEGER (NUMERIC affinity's rule).
fn integral(v: Value) -> Value {
    match v {
        Value::Real(r)
            if r.fract() == 0.0 && (-9.223372036854776e18..9.223372036854776e18).contains(&r) =>
        {
            Value::Integer(r as i64)
        }
        other => other,
    }
}

/// The number a whole text spells (spaces around allowed), as SQLite's affinity conversion
/// reads it; `None` if it is not entirely a number.
pub fn parse_number(s: &str) -> Option<Value> {
    let t = s.trim_matches(|c: char| c.is_ascii_whitespace());
    if t.is_empty() {
        return None;
    }
    let (n, used) = number_prefix(t);
    (used == t.len() && used > 0).then_some(n)
}

/// Whether `c` is a space to SQLite (`sqlite3Isspace`: C's, vertical tab included).
pub(crate) fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The integer that text begins with, as SQLite's `sqlite3Atoi64` reads it: after spaces
/// and a sign, the decimal digits up to the first other byte, clamped to 64 bits; 0 when
/// there are none.
pub(crate) fn integer_prefix(b: &[u8]) -> i64 {
    let mut rest = &b[b.iter().take_while(|&&c| is_space(c)).count()..];
    let negative = rest.first() == Some(&b'-');
    if matches!(rest.first(), Some(b'-' | b'+')) {
        rest = &rest[1..];
    }
    // Past 2^63 every value clamps alike: stop adding digits there.
    let limit = 1u64 << 63;
    let magnitude = rest
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .fold(0u64, |v, &c| {
            v.saturating_mul(10)
                .saturating_add(u64::from(c - b'0'))
                .min(limit + 1)
        });
    match negative {
        true if magnitude >= limit => i64::MIN,
        true => -(magnitude as i64),
        false => magnitude.min(i64::MAX as u64) as i64,
    }
}

/// The longest numeric prefix of `s` (after leading spaces), as SQLite converts text for
/// arithmetic: `"12abc"` is 12, `"abc"` 0. Returns the number and the bytes used.
pub fn number_prefix(s: &str) -> (Value, usize) {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    let start = i;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let digits_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = i - digits_start;
    let mut is_real = false;
    if i < b.len() && b[i] == b'.' {
        let j = i + 1;
        let mut k = j;
        while k < b.len() && b[k].is_ascii_digit() {
            k += 1;
        }
        if int_digits > 0 || k > j {
            is_real = true;
            i = k;
        }
    }
    if int_digits == 0 && !is_real {
        return (Value::Integer(0), 0);
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut k = i + 1;
        if k < b.len() && (b[k] == b'+' || b[k] == b'-') {
            k += 1;
        }
        let e = k;
        while k < b.len() && b[k].is_ascii_digit() {
            k += 1;
        }
        if k > e {
            is_real = true;
            i = k;
        }
    }
    let text = &s[start..i];
    let mut end = i;
    while end < b.len() && b[end].is_ascii_whitespace() {
        end += 1;
    }
    if !is_real {
        if let Ok(v) = text.parse::<i64>() {
            return (Value::Integer(v), end);
        }
    }
    // As SQLite's sqlite3AtoF converts it, not always the nearest double.
    (Value::Real(crate::printf::sqlite_atof(text)), end)
}

impl Value {
    pub fn text(s: &str) -> Value {
        Value::Text(s.into())
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The storage class's name, as `typeof()` gives it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Integer(_) => "integer",
            Value::Real(_) => "real",
            Value::Text(_) => "text",
            Value::Blob(_) => "blob",
        }
    }

    fn class(&self) -> u8 {
        match self {
            Value::Null => 0,
            Value::Integer(_) | Value::Real(_) => 1,
            Value::Text(_) => 2,
            Value::Blob(_) => 3,
        }
    }

    /// The value as a number for arithmetic: text and blobs by their numeric prefix.
    pub fn to_numeric(&self) -> Value {
        match self {
            Value::Integer(_) | Value::Real(_) | Value::Null => self.clone(),
            Value::Text(s) => number_prefix(s).0,
            Value::Blob(b) => number_prefix(&String::from_utf8_lossy(b)).0,
        }
    }

    pub fn as_f64(&self) -> f64 {
        let r = match self.to_numeric() {
            Value::Integer(i) => i as f64,
            Value::Real(r) => r,
            _ => 0.0,
        };
        // SQLite's text-to-double keeps the sign of a zero ("-", "-0").
        match self {
            Value::Text(_) | Value::Blob(_)
                if r == 0.0 && self.to_text().trim_start().starts_with('-') =>
            {
                -0.0
            }
            _ => r,
        }
    }

    /// The value as an integer (`CAST(x AS INTEGER)`, `sqlite3_value_int64`): reals
    /// truncated toward zero and clamped, text and blobs by their integer prefix (so
    /// `'1.9e1'` is 1, as in SQLite: arithmetic reads it as 19.0, see [`Value::to_numeric`]).
    pub fn as_i64(&self) -> i64 {
        match self {
            Value::Integer(i) => *i,
            Value::Real(r) => real_to_i64(*r),
            Value::Text(s) => integer_prefix(s.as_bytes()),
            Value::Blob(b) => integer_prefix(b),
            Value::Null => 0,
        }
    }

    /// Truth in a WHERE clause: `None` for NULL.
    pub fn truth(&self) -> Option<bool> {
        match self {
            Value::Null => None,
            Value::Integer(i) => Some(*i != 0),
            Value::Real(r) => Some(*r != 0.0),
            _ => Some(self.as_f64() != 0.0),
        }
    }

    /// The value as text, as SQLite renders it (REAL as `%!.15g`).
    pub fn to_text(&self) -> String {
        match self {
            Value::Null => String::new(),
            Value::Integer(i) => i.to_string(),
            Value::Real(r) => format_real(*r),
            Value::Text(s) => s.to_string(),
            Value::Blob(b) => String::from_utf8_lossy(b).into_owned(),
        }
    }

    /// The value as a SQL literal (`quote()`): text quoted, blobs as `X'..'`.
    pub fn to_sql_literal(&self) -> String {
        crate::func::quote(self)
    }

    pub fn to_blob(&self) -> Vec<u8> {
        match self {
            Value::Blob(b) => b.to_vec(),
            Value::Null => Vec::new(),
            other => other.to_text().into_bytes(),
        }
    }

    /// Total order used by ORDER BY, DISTINCT, GROUP BY, indexes: NULL first, then numbers
    /// by value, text by `coll`, blobs by bytes.
    pub fn cmp_with(&self, other: &Value, coll: Collation) -> Ordering {
        let (ca, cb) = (self.class(), other.class());
        if ca != cb {
            return ca.cmp(&cb);
        }
        match (self, other) {
            (Value::Null, Value::Null) => Ordering::Equal,
            (Value::Integer(a), Value::Integer(b)) => a.cmp(b),
            (Value::Real(a), Value::Real(b)) => a.partial_cmp(b).unwrap_or(Ordering::Equal),
            (Value::Integer(a), Value::Real(b)) => cmp_int_real(*a, *b),
            (Value::Real(a), Value::Integer(b)) => cmp_int_real(*b, *a).reverse(),
            (Value::Text(a), Value::Text(b)) => coll.compare(a, b),
            (Value::Blob(a), Value::Blob(b)) => a.cmp(b),
            _ => unreachable!("same class"),
        }
    }
}

fn real_to_i64(r: f64) -> i64 {
    if r.is_nan() {
        0
    } else if r >= TWO_POW_63 {
        i64::MAX
    } else if r <= -TWO_POW_63 {
        i64::MIN
    } else {
        r as i64
    }
}

fn cmp_int_real(i: i64, r: f64) -> Ordering {
    if r.is_nan() {
        return Ordering::Greater;
    }
    if r < -TWO_POW_63 {
        return Ordering::Greater;
    }
    if r >= TWO_POW_63 {
        return Ordering::Less;
    }
    let t = r.trunc() as i64;
    match i.cmp(&t) {
        Ordering::Equal => 0.0f64
            .partial_cmp(&(r - r.trunc()))
            .unwrap_or(Ordering::Equal),
        o => o,
    }
}

/// A REAL as SQLite prints it (`%!.15g`): 15 significant digits, always with a `.` or an
/// exponent.
pub fn format_real(r: f64) -> String {
    crate::printf::real_text(r)
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => write!(f, "NULL"),
            other => write!(f, "{}", other.to_text()),
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        self.cmp_with(other, Collation::Binary) == Ordering::Equal && self.class() == other.class()
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Value {
        Value::Integer(i)
    }
}

impl From<f64> for Value {
    fn from(r: f64) -> Value {
        Value::Real(r)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Text(s.into())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Text(s.into())
    }
}

impl From<Vec<u8>> for Value {
    fn from(b: Vec<u8>) -> Value {
        Value::Blob(b.into())
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(o: Option<T>) -> Value {
        o.map_or(Value::Null, Into::into)
    }
}

/// Binary arithmetic with SQLite's rules: NULL in, NULL out; integer results that overflow
/// become REAL; division and remainder by zero are NULL.
pub fn arith(op: ArithOp, a: &Value, b: &Value) -> Value {
    match (a, b) {
        (Value::Integer(i), Value::Integer(j)) => return int_arith(op, *i, *j),
        (Value::Null, _) | (_, Value::Null) => return Value::Null,
        _ => {}
    }
    let (x, y) = (a.to_numeric(), b.to_numeric());
    if let (Value::Integer(i), Value::Integer(j)) = (&x, &y) {
        return int_arith(op, *i, *j);
    }
    if op == ArithOp::Rem {
        // The operands as integers read from the values themselves, as SQLite's
        // OP_Remainder does (so text '1e5' is 1 here, though 100000.0 in a sum).
        let (i, j) = (a.as_i64(), b.as_i64());
        if j == 0 {
            return Value::Null;
        }
        return Value::Real(if j == -1 { 0.0 } else { (i % j) as f64 });
    }
    // As SQLite: a real operation converts text and blobs to doubles directly ("-" is -0.0).
    arith_real(op, a.as_f64(), b.as_f64())
}

/// Integer arithmetic, overflowing to REAL as SQLite does.
fn int_arith(op: ArithOp, i: i64, j: i64) -> Value {
    let r = match op {
        ArithOp::Add => i.checked_add(j),
        ArithOp::Sub => i.checked_sub(j),
        ArithOp::Mul => i.checked_mul(j),
        ArithOp::Div => {
            if j == 0 {
                return Value::Null;
            }
            i.checked_div(j)
        }
        ArithOp::Rem => {
            if j == 0 {
                return Value::Null;
            }
            Some(if j == -1 { 0 } else { i % j })
        }
    };
    match r {
        Some(v) => Value::Integer(v),
        None => arith_real(op, i as f64, j as f64),
    }
}

fn arith_real(op: ArithOp, a: f64, b: f64) -> Value {
    let r = match op {
        ArithOp::Add => a + b,
        ArithOp::Sub => a - b,
        ArithOp::Mul => a * b,
        ArithOp::Div => {
            if b == 0.0 {
                return Value::Null;
            }
            a / b
        }
        ArithOp::Rem => unreachable!("remainder is computed on integers"),
    };
    if r.is_nan() {
        Value::Null
    } else {
        Value::Real(r)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reals_print_as_sqlite_prints_them() {
        for (r, s) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (1e20, "1.0e+20"),
            (1.5e-7, "1.5e-07"),
            (123456789012345.0, "123456789012345.0"),
            (1.0 / 3.0, "0.333333333333333"),
            (100.0, "100.0"),
            (9.223372036854776e18, "9.22337203685478e+18"),
            (0.00001234, "1.234e-05"),
            (0.0001234, "0.0001234"),
            (1e15, "1.0e+15"),
            (123456789012345.6, "123456789012346.0"),
            (f64::INFINITY, "Inf"),
            (f64::NEG_INFINITY, "-Inf"),
        ] {
            assert_eq!(format_real(r), s, "{r}");
        }
    }

    #[test]
    fn arithmetic_follows_sqlite() {
        let i = Value::Integer;
        assert_eq!(arith(ArithOp::Div, &i(7), &i(2)), i(3));
        assert_eq!(arith(ArithOp::Div, &i(-7), &i(2)), i(-3));
        assert!(arith(ArithOp::Div, &i(7), &i(0)).is_null());
        assert_eq!(arith(ArithOp::Rem, &i(-7), &i(2)), i(-1));
        assert_eq!(
            arith(ArithOp::Add, &i(i64::MAX), &i(1)),
            Value::Real(9.223372036854776e18)
        );
        assert_eq!(arith(ArithOp::Add, &Value::text("12abc"), &i(1)), i(13));
        assert_eq!(
            arith(ArithOp::Rem, &Value::Real(5.5), &i(2)),
            Value::Real(1.0)
        );
    }

    #[test]
    fn order_across_types() {
        let mut v = [
            Value::text("a"),
            Value::Real(1.5),
            Value::Null,
            Value::Blob(vec![0].into()),
            Value::Integer(1),
            Value::Integer(2),
        ];
        v.sort_by(|a, b| a.cmp_with(b, Collation::Binary));
        let names: Vec<_> = v.iter().map(|x| x.to_string()).collect();
        assert_eq!(names, ["NULL", "1", "1.5", "2", "a", "\u{0}"]);
    }

    #[test]
    fn affinity_conversions() {
        assert_eq!(Affinity::of_declared(Some("VARCHAR(10)")), Affinity::Text);
        assert_eq!(Affinity::of_declared(Some("BIGINT")), Affinity::Integer);
        assert_eq!(Affinity::of_declared(Some("DECIMAL")), Affinity::Numeric);
        assert_eq!(Affinity::of_declared(None), Affinity::Blob);
        assert_eq!(
            Affinity::Integer.apply(Value::text(" 3.0 ")),
            Value::Integer(3)
        );
        assert_eq!(
            Affinity::Numeric.apply(Value::text("3.5")),
            Value::Real(3.5)
        );
        assert_eq!(
            Affinity::Numeric.apply(Value::text("x3")),
            Value::text("x3")
        );
        assert_eq!(Affinity::Text.apply(Value::Integer(7)), Value::text("7"));
        assert_eq!(Affinity::Real.apply(Value::Integer(7)), Value::Real(7.0));
        let zero = Affinity::Real.apply(Value::Real(-0.0));
        assert!(matches!(zero, Value::Real(z) if z.is_sign_positive()));
    }
}
