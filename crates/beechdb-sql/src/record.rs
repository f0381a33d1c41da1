//! Encodings: a row as a record (each value with its own type), a rowid as an order-preserving
//! key, and index keys in an order-preserving ("memcomparable") form that follows SQLite's
//! order across types.
//!
//! Owns: the byte layouts. May call: `value`. Invariants: `decode_row(encode_row(v)) == v`
//! for every value (types kept); for index keys, byte order equals SQLite's order (NULL <
//! numbers by value < text by collation < blob), column by column, descending columns
//! inverted.

use crate::error::{Error, Result};
use crate::value::{Collation, Value, TWO_POW_63};

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
fn get_varint(buf: &[u8], at: &mut usize) -> Option<u64> {
    // Most values fit one byte (small integers, short lengths).
    let b = *buf.get(*at)?;
    *at += 1;
    if b < 0x80 {
        return Some(b as u64);
    }
    let mut v = (b & 0x7f) as u64;
    for shift in (7..64).step_by(7) {
        let b = *buf.get(*at)?;
        *at += 1;
        v |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// A zigzag-encoded integer's value.
#[inline]
fn unzigzag(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

/// A row: per value a tag (0 NULL, 1 integer, 2 real, 3 text, 4 blob) and its bytes;
/// integers zigzag varints, reals 8 bytes, text and blobs a varint length and the bytes.
pub fn encode_row(values: &[Value]) -> Vec<u8> {
    encode_row_except(values, None)
}

/// As [`encode_row`], with column `skip` stored as NULL (a table's rowid alias, which its
/// key holds).
pub fn encode_row_except(values: &[Value], skip: Option<usize>) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * 9);
    for (i, v) in values.iter().enumerate() {
        if skip == Some(i) {
            out.push(0);
            continue;
        }
        match v {
            Value::Null => out.push(0),
            Value::Integer(i) => {
                out.push(1);
                put_varint(&mut out, ((i << 1) ^ (i >> 63)) as u64);
            }
            Value::Real(r) => {
                out.push(2);
                out.extend_from_slice(&r.to_le_bytes());
            }
            Value::Text(s) => {
                out.push(3);
                put_varint(&mut out, s.len() as u64);
                out.extend_from_slice(s.as_bytes());
            }
            Value::Blob(b) => {
                out.push(4);
                put_varint(&mut out, b.len() as u64);
                out.extend_from_slice(b);
            }
        }
    }
    out
}

#[cold]
#[inline(never)]
fn corrupt_row() -> Error {
    Error::Engine(beechdb::Error::Corrupt {
        page: None,
        detail: "a table row does not decode".into(),
    })
}

/// The values stored in a row (fewer than the table's columns if some were added later).
pub fn decode_row(buf: &[u8], ncols: usize) -> Result<Vec<Value>> {
    // One more for the rowid most readers append.
    let mut out = Vec::with_capacity(ncols + 1);
    for v in (RowValues { buf, at: 0 }) {
        out.push(v?);
    }
    Ok(out)
}

/// Decodes a stored row's values into `out` (as many as both have), only those `wanted`
/// marks (all without it); returns how many the row has for `out` (decoded or not).
pub fn decode_into(buf: &[u8], out: &mut [Value], wanted: Option<&[bool]>) -> Result<usize> {
    let mut values = RowValues { buf, at: 0 };
    for (i, slot) in out.iter_mut().enumerate() {
        let want = wanted.is_none_or(|w| w[i]);
        match buf.get(values.at) {
            None => return Ok(i),
            Some(0) => {
                values.at += 1;
                if want {
                    *slot = Value::Null;
                }
            }
            // A text or blob not wanted: skipped by its length.
            Some(3 | 4) if !want => {
                values.at += 1;
                let len = get_varint(buf, &mut values.at).ok_or_else(corrupt_row)?;
                values.at = values
                    .at
                    .checked_add(len as usize)
                    .filter(|&end| end <= buf.len())
                    .ok_or_else(corrupt_row)?;
            }
            // Integers, the commonest values, are read (or skipped) in place.
            Some(1) => {
                values.at += 1;
                let z = get_varint(buf, &mut values.at).ok_or_else(corrupt_row)?;
                match slot {
                    Value::Integer(i) if want => *i = unzigzag(z),
                    _ if want => *slot = Value::Integer(unzigzag(z)),
                    _ => {}
                }
            }
            Some(_) => {
                let (tag, bytes) = values.next_raw().expect("a tag is there")?;
                if want {
                    *slot = value_of(tag, bytes)?;
                }
            }
        }
    }
    Ok(out.len())
}

/// The values of a stored row, one by one.
struct RowValues<'b> {
    buf: &'b [u8],
    at: usize,
}

impl<'b> RowValues<'b> {
    /// The next value's tag and encoded bytes, not decoded.
    fn next_raw(&mut self) -> Option<Result<(u8, &'b [u8])>> {
        let buf = self.buf;
        let tag = *buf.get(self.at)?;
        let mut at = self.at + 1;
        let span = match tag {
            0 => Some((at, at)),
            // An integer's bytes are its varint.
            1 => get_varint(buf, &mut at).map(|_| (self.at + 1, at)),
            2 => Some((at, at + 8)),
            3 | 4 => get_varint(buf, &mut at).and_then(|n| Some((at, at.checked_add(n as usize)?))),
            _ => None,
        };
        let Some((bytes, end)) = span.and_then(|(from, end)| Some((buf.get(from..end)?, end)))
        else {
            return Some(Err(corrupt_row()));
        };
        self.at = end;
        Some(Ok((tag, bytes)))
    }
}

impl Iterator for RowValues<'_> {
    type Item = Result<Value>;

    fn next(&mut self) -> Option<Result<Value>> {
        Some(
            self.next_raw()?
                .and_then(|(tag, bytes)| value_of(tag, bytes)),
        )
    }
}

/// A value from its tag and encoded bytes (as `RowValues::next_raw` gives them).
fn value_of(tag: u8, bytes: &[u8]) -> Result<Value> {
    Ok(match tag {
        0 => Value::Null,
        1 => Value::Integer(unzigzag(get_varint(bytes, &mut 0).ok_or_else(corrupt_row)?)),
        2 => Value::Real(f64::from_le_bytes(
            bytes.try_into().map_err(|_| corrupt_row())?,
        )),
        // Valid UTF-8 (always, but for damaged rows) is checked by the fast validator.
        3 => Value::Text(match std::str::from_utf8(bytes) {
            Ok(s) => s.into(),
            Err(_) => String::from_utf8_lossy(bytes).into(),
        }),
        _ => Value::Blob(bytes.into()),
    })
}

/// A rowid as a key whose byte order is numeric order.
pub fn rowid_key(rowid: i64) -> [u8; 8] {
    ((rowid as u64) ^ (1 << 63)).to_be_bytes()
}

pub fn rowid_of_key(key: &[u8]) -> Result<i64> {
    let b: [u8; 8] = key.try_into().map_err(|_| corrupt_row())?;
    Ok((u64::from_be_bytes(b) ^ (1 << 63)) as i64)
}

fn orderable_f64(r: f64) -> u64 {
    let bits = if r == 0.0 {
        0f64.to_bits()
    } else {
        r.to_bits()
    };
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// Whether no value but those equal to `v` (under the key's collation) has `v`'s key part.
/// True of every value but two: a number's part is its nearest real and the integer's
/// distance from it (clamped at `i64::MAX`), so the integer 2^63 - 1 and the real 2^63,
/// which SQL holds unequal, share one.
pub fn key_part_is_exact(v: &Value) -> bool {
    !matches!(v, Value::Integer(i64::MAX)) && !matches!(v, Value::Real(r) if *r == TWO_POW_63)
}

/// Appends `v` to an index key: comparing keys bytewise compares values in SQLite's order
/// under collation `coll`; `desc` inverts the component (see `key_part_is_exact`).
pub fn encode_key_part(out: &mut Vec<u8>, v: &Value, coll: Collation, desc: bool) {
    let start = out.len();
    match v {
        Value::Null => out.push(0x05),
        Value::Integer(_) | Value::Real(_) => {
            out.push(0x10);
            let (f, tie) = match v {
                Value::Integer(i) => {
                    let f = *i as f64;
                    let back = if f >= TWO_POW_63 { i64::MAX } else { f as i64 };
                    (f, i.wrapping_sub(back))
                }
                Value::Real(r) => (*r, 0),
                _ => unreachable!(),
            };
            out.extend_from_slice(&orderable_f64(f).to_be_bytes());
            out.extend_from_slice(&rowid_key(tie));
        }
        Value::Text(s) => {
            out.push(0x20);
            let folded: std::borrow::Cow<str> = match coll {
                // User collations are refused in table and index definitions.
                Collation::Binary | Collation::User(_) => s.as_ref().into(),
                Collation::NoCase => s.to_ascii_lowercase().into(),
                Collation::Rtrim => s.trim_end_matches(' ').into(),
            };
            escape(out, folded.as_bytes());
        }
        Value::Blob(b) => {
            out.push(0x30);
            escape(out, b);
        }
    }
    if desc {
        for b in &mut out[start..] {
            *b = !*b;
        }
    }
}

/// A key part read back (see `encode_key_part`): a number as the nearest real and the
/// integer's distance from it, which only the column's affinity turns back into a value.
#[derive(Debug, PartialEq)]
pub enum KeyPart {
    Null,
    Number(f64, i64),
    Text(String),
    Blob(Vec<u8>),
}

/// Reads the key part at `*at` of `key` (written with BINARY collation, `desc` as given)
/// and moves `*at` past it; `None` when the bytes are not a key part.
pub fn decode_key_part(key: &[u8], at: &mut usize, desc: bool) -> Option<KeyPart> {
    let flip = if desc { 0xff } else { 0 };
    let byte = |i: usize| key.get(i).map(|b| b ^ flip);
    let tag = byte(*at)?;
    *at += 1;
    let word = |from: usize| -> Option<u64> {
        let mut b = [0u8; 8];
        for (k, x) in b.iter_mut().enumerate() {
            *x = byte(from + k)?;
        }
        Some(u64::from_be_bytes(b))
    };
    match tag {
        0x05 => Some(KeyPart::Null),
        0x10 => {
            let (ordered, tie) = (word(*at)?, word(*at + 8)?);
            *at += 16;
            let bits = match ordered >> 63 {
                1 => ordered & !(1 << 63),
                _ => !ordered,
            };
            Some(KeyPart::Number(
                f64::from_bits(bits),
                (tie ^ (1 << 63)) as i64,
            ))
        }
        0x20 | 0x30 => {
            let mut bytes = Vec::new();
            loop {
                let b = byte(*at)?;
                *at += 1;
                if b != 0 {
                    bytes.push(b);
                    continue;
                }
                let next = byte(*at)?;
                *at += 1;
                match next {
                    0 => break,
                    0xff => bytes.push(0),
                    _ => return None,
                }
            }
            Some(match tag {
                0x20 => KeyPart::Text(String::from_utf8(bytes).ok()?),
                _ => KeyPart::Blob(bytes),
            })
        }
        _ => None,
    }
}

/// Bytes with 0x00 written as 0x00 0xff, ended by 0x00 0x00: a prefix sorts first.
fn escape(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xff);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_parts_read_back() {
        let values = [
            Value::Null,
            Value::Integer(0),
            Value::Integer(-7),
            Value::Integer(i64::MIN),
            Value::Integer(i64::MAX - 1),
            Value::Integer((1 << 53) + 1),
            Value::Real(2.5),
            Value::Real(-0.125),
            Value::Real(1e300),
            Value::from("a\0b"),
            Value::from(""),
            Value::Blob(vec![0, 0, 255, 1].into()),
        ];
        for desc in [false, true] {
            let mut key = Vec::new();
            for v in &values {
                encode_key_part(&mut key, v, Collation::Binary, desc);
            }
            let mut at = 0;
            for v in &values {
                let part = decode_key_part(&key, &mut at, desc).unwrap();
                let back = match part {
                    KeyPart::Null => Value::Null,
                    KeyPart::Number(f, 0) if !matches!(v, Value::Integer(_)) => Value::Real(f),
                    KeyPart::Number(f, tie) => Value::Integer((f as i64).wrapping_add(tie)),
                    KeyPart::Text(t) => Value::from(t),
                    KeyPart::Blob(b) => Value::Blob(b.into()),
                };
                assert_eq!(&back, v, "desc {desc}");
            }
            assert_eq!(at, key.len());
        }
    }

    #[test]
    fn key_parts_are_shared_only_by_the_integer_and_real_at_two_to_the_63() {
        let key = |v: &Value| {
            let mut k = Vec::new();
            encode_key_part(&mut k, v, Collation::Binary, false);
            k
        };
        let (max, real) = (Value::Integer(i64::MAX), Value::Real(TWO_POW_63));
        assert_eq!(key(&max), key(&real));
        assert!(!key_part_is_exact(&max) && !key_part_is_exact(&real));
        // Neighbours keep keys of their own, and equal values share theirs.
        for v in [i64::MAX - 1, i64::MIN, 1 << 53, (1 << 53) + 1, -1, 0] {
            assert!(key_part_is_exact(&Value::Integer(v)));
            assert_ne!(key(&Value::Integer(v)), key(&real));
        }
        assert_eq!(key(&Value::Integer(3)), key(&Value::Real(3.0)));
        assert_ne!(
            key(&Value::Integer((1 << 53) + 1)),
            key(&Value::Real((1u64 << 53) as f64))
        );
    }

    #[test]
    fn rows_round_trip_with_their_types() {
        let row = vec![
            Value::Null,
            Value::Integer(-5),
            Value::Integer(i64::MIN),
            Value::Real(2.5),
            Value::text("héllo"),
            Value::Blob(vec![0, 1, 2].into()),
        ];
        let back = decode_row(&encode_row(&row), 8).unwrap();
        assert_eq!(back.len(), 6);
        for (a, b) in row.iter().zip(&back) {
            assert_eq!(a.type_name(), b.type_name());
            assert_eq!(a, b);
        }
        assert!(decode_row(&[9], 1).is_err());
        assert!(decode_row(&[3, 200], 1).is_err());
    }

    #[test]
    fn key_order_is_sqlite_order() {
        let vals = [
            Value::Null,
            Value::Real(-1e300),
            Value::Integer(i64::MIN),
            Value::Integer(-3),
            Value::Real(-2.5),
            Value::Integer(0),
            Value::Real(0.5),
            Value::Integer(1),
            Value::Integer(9007199254740993),
            Value::Real(9007199254740994.0),
            Value::Integer(i64::MAX),
            Value::Real(1e300),
            Value::text(""),
            Value::text("a"),
            Value::text("a\0"),
            Value::text("ab"),
            Value::Blob(vec![].into()),
            Value::Blob(vec![0].into()),
        ];
        for w in vals.windows(2) {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            encode_key_part(&mut a, &w[0], Collation::Binary, false);
            encode_key_part(&mut b, &w[1], Collation::Binary, false);
            assert!(a < b, "{:?} < {:?}", w[0], w[1]);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            encode_key_part(&mut a, &w[0], Collation::Binary, true);
            encode_key_part(&mut b, &w[1], Collation::Binary, true);
            assert!(a > b, "desc {:?} > {:?}", w[0], w[1]);
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        encode_key_part(&mut a, &Value::Integer(3), Collation::Binary, false);
        encode_key_part(&mut b, &Value::Real(3.0), Collation::Binary, false);
        assert_eq!(a, b, "3 and 3.0 are one key");
    }
}
