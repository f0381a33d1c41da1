//! Database images (`sqlite3_serialize`, `sqlite3_deserialize`): a whole database as one
//! byte string, in BeechDB's own format rather than SQLite's file format.
//!
//! Owns: the image format and its two calls. An image is what a backup copies (the schema
//! and every row, read in one snapshot: `backup::read_source`), written out as:
//!
//! ```text
//! magic "BeechDB SQL image\0", u32 version (1)
//! u32 tables, each: str CREATE, str name, u32 columns, that many str, u64 rows,
//!                   each row one value per column
//! u32 other objects (indexes, triggers, views), each: str CREATE
//! u32 CRC-32C of everything before it
//! ```
//!
//! Integers little-endian; a str is a u32 length and UTF-8; a value is a tag (0 NULL,
//! 1 integer i64, 2 real f64, 3 text str, 4 blob u32 length and bytes) and its payload.
//! Decoding trusts no count: a bad or truncated image is refused whole
//! (SQLITE_NOTADB, "file is not a database") before anything is changed. Deserializing
//! moves the connection to a new in-memory database holding the image, as SQLite reopens
//! the schema on the image in memory: the database it had stays as it was.
//! May call: `backup`, `conn`.

use crate::backup::{read_source, Snapshot, TableCopy, Transfer};
use crate::conn::{failure, sqlite3, Inner};
use crate::consts::*;
use crate::util::{sqlite3_free, sqlite3_malloc64};
use crate::value::names_main;
use beechdb_sql::{Database, Value};
use std::ffi::{c_char, c_int, c_uint};

const MAGIC: &[u8] = b"BeechDB SQL image\0";
const VERSION: u32 = 1;

/// Writes `snap` as an image.
fn encode(snap: &Snapshot) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    let u32_ = |out: &mut Vec<u8>, n: usize| out.extend_from_slice(&(n as u32).to_le_bytes());
    let bytes = |out: &mut Vec<u8>, b: &[u8]| {
        u32_(out, b.len());
        out.extend_from_slice(b);
    };
    u32_(&mut out, VERSION as usize);
    u32_(&mut out, snap.tables.len());
    for t in &snap.tables {
        bytes(&mut out, t.sql.as_bytes());
        bytes(&mut out, t.name.as_bytes());
        u32_(&mut out, t.columns.len());
        for c in &t.columns {
            bytes(&mut out, c.as_bytes());
        }
        out.extend_from_slice(&(t.rows.len() as u64).to_le_bytes());
        for v in t.rows.iter().flatten() {
            match v {
                Value::Null => out.push(0),
                Value::Integer(i) => {
                    out.push(1);
                    out.extend_from_slice(&i.to_le_bytes());
                }
                Value::Real(r) => {
                    out.push(2);
                    out.extend_from_slice(&r.to_bits().to_le_bytes());
                }
                Value::Text(s) => {
                    out.push(3);
                    bytes(&mut out, s.as_bytes());
                }
                Value::Blob(b) => {
                    out.push(4);
                    bytes(&mut out, b);
                }
            }
        }
    }
    u32_(&mut out, snap.others.len());
    for sql in &snap.others {
        bytes(&mut out, sql.as_bytes());
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Reads an image; `Err` says what is wrong with it.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("truncated".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = self.u32()? as usize;
        self.take(n)
    }

    fn str(&mut self) -> Result<String, String> {
        let b = self.bytes()?;
        String::from_utf8(b.to_vec()).map_err(|_| "text that is not UTF-8".to_string())
    }

    fn value(&mut self) -> Result<Value, String> {
        Ok(match self.take(1)?[0] {
            0 => Value::Null,
            1 => Value::Integer(self.u64()? as i64),
            // As SQLite stores a NaN bound to a statement: as NULL.
            2 => match f64::from_bits(self.u64()?) {
                r if r.is_nan() => Value::Null,
                r => Value::Real(r),
            },
            3 => Value::Text(self.str()?.into()),
            4 => Value::Blob(self.bytes()?.into()),
            t => return Err(format!("unknown value tag {t}")),
        })
    }
}

/// Decodes an image. Every count is checked against the bytes left, so a bad one fails
/// without allocating for it.
pub(crate) fn decode(image: &[u8]) -> Result<Snapshot, String> {
    let body_len = image
        .len()
        .checked_sub(4)
        .filter(|&n| n >= MAGIC.len() + 4)
        .ok_or("too short")?;
    let (body, crc) = image.split_at(body_len);
    if !body.starts_with(MAGIC) {
        return Err("not a BeechDB image".into());
    }
    if crc32c::crc32c(body) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
        return Err("checksum mismatch".into());
    }
    let mut r = Reader(&body[MAGIC.len()..]);
    let version = r.u32()?;
    if version != VERSION {
        return Err(format!(
            "image version {version}, this library reads {VERSION}"
        ));
    }
    let mut snap = Snapshot {
        lsn: None,
        tables: Vec::new(),
        others: Vec::new(),
    };
    for _ in 0..r.u32()? {
        let (sql, name) = (r.str()?, r.str()?);
        let width = r.u32()? as usize;
        if width == 0 || width > r.0.len() / 4 {
            return Err(format!("table {name} with {width} columns"));
        }
        let columns = (0..width).map(|_| r.str()).collect::<Result<Vec<_>, _>>()?;
        let count = r.u64()?;
        // Every value takes at least a byte.
        if count > (r.0.len() / width) as u64 {
            return Err(format!("table {name} with {count} rows"));
        }
        let rows = (0..count)
            .map(|_| (0..width).map(|_| r.value()).collect())
            .collect::<Result<Vec<_>, _>>()?;
        snap.tables.push(TableCopy {
            sql,
            name,
            columns,
            rows,
        });
    }
    for _ in 0..r.u32()? {
        snap.others.push(r.str()?);
    }
    if !r.0.is_empty() {
        return Err("bytes after the end".into());
    }
    Ok(snap)
}

/// Checks that `image` decodes (for the fuzz target): its table count, or what is wrong.
#[doc(hidden)]
pub fn check_image(image: &[u8]) -> Result<usize, String> {
    decode(image).map(|s| s.tables.len())
}

/// The database as an image, in memory from `sqlite3_malloc` (the caller frees it with
/// `sqlite3_free`). `SQLITE_SERIALIZE_NOCOPY` returns NULL: no image is ever kept.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_serialize(
    db: *mut sqlite3,
    schema: *const c_char,
    size: *mut i64,
    flags: c_uint,
) -> *mut u8 {
    const SQLITE_SERIALIZE_NOCOPY: c_uint = 1;
    if !size.is_null() {
        *size = -1;
    }
    let Some(h) = db.as_ref() else {
        return std::ptr::null_mut();
    };
    if !names_main(schema) {
        h.fail(
            SQLITE_ERROR,
            "unknown database: only \"main\" can be serialized",
        );
        return std::ptr::null_mut();
    }
    if flags & SQLITE_SERIALIZE_NOCOPY != 0 {
        return std::ptr::null_mut();
    }
    let (image, _) = h.with(None, |inner: &mut Inner| {
        let snap = read_source(inner.conn()?, None).map_err(failure)?;
        Ok(snap.map(|s| encode(&s)))
    });
    let Some(image) = image else {
        return std::ptr::null_mut();
    };
    let p = sqlite3_malloc64(image.len() as u64).cast::<u8>();
    if p.is_null() {
        h.fail(SQLITE_NOMEM, "out of memory");
        return p;
    }
    std::ptr::copy_nonoverlapping(image.as_ptr(), p, image.len());
    if !size.is_null() {
        *size = image.len() as i64;
    }
    p
}

/// Moves the connection to a new in-memory database holding the image `data[..size]`
/// (BeechDB's, from `sqlite3_serialize`); the database it used is left as it was.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_deserialize(
    db: *mut sqlite3,
    schema: *const c_char,
    data: *mut u8,
    size: i64,
    _buf: i64,
    flags: c_uint,
) -> c_int {
    const SQLITE_DESERIALIZE_FREEONCLOSE: c_uint = 1;
    const SQLITE_DESERIALIZE_READONLY: c_uint = 4;
    let image = match (data.is_null(), usize::try_from(size)) {
        (false, Ok(n)) => std::slice::from_raw_parts(data, n),
        _ => &[],
    };
    let decoded = decode(image);
    if flags & SQLITE_DESERIALIZE_FREEONCLOSE != 0 {
        sqlite3_free(data.cast());
    }
    let Some(h) = db.as_ref() else {
        return SQLITE_MISUSE;
    };
    if !names_main(schema) {
        return h.fail(
            SQLITE_ERROR,
            "unknown database: only \"main\" can be deserialized",
        );
    }
    let snap = match decoded {
        Ok(s) => s,
        Err(why) => {
            return h.fail(
                SQLITE_NOTADB,
                &format!("file is not a database: image {why}"),
            );
        }
    };
    h.run(|inner| {
        if !inner.settings()?.is_autocommit() {
            return Err((
                SQLITE_BUSY,
                "cannot deserialize inside a transaction".into(),
            ));
        }
        let fresh = Database::open_in_memory().map_err(failure)?;
        let mut load = fresh.connect();
        Transfer::new(snap, fresh.env().page_size())
            .step(&mut load, -1)
            .map_err(failure)?;
        inner.move_to_private(&fresh)?;
        inner.readonly = flags & SQLITE_DESERIALIZE_READONLY != 0;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Snapshot {
        Snapshot {
            lsn: None,
            tables: vec![TableCopy {
                sql: "CREATE TABLE t(a, b)".into(),
                name: "t".into(),
                columns: vec!["rowid".into(), "a".into(), "b".into()],
                rows: vec![
                    vec![Value::Integer(1), Value::Null, Value::Real(-0.5)],
                    vec![
                        Value::Integer(i64::MIN),
                        Value::Text("\u{e6}\0".into()),
                        Value::Blob(vec![0, 255].into()),
                    ],
                ],
            }],
            others: vec!["CREATE INDEX i ON t(a)".into()],
        }
    }

    /// `body` with a correct checksum after it, so that decoding reaches the structure.
    fn sealed(body: &[u8]) -> Vec<u8> {
        let mut v = body.to_vec();
        v.extend_from_slice(&crc32c::crc32c(body).to_le_bytes());
        v
    }

    #[test]
    fn round_trips() {
        let image = encode(&sample());
        let back = decode(&image).unwrap();
        assert_eq!(encode(&back), image);
        assert_eq!(back.tables[0].rows, sample().tables[0].rows);
        assert_eq!(back.others, sample().others);
    }

    #[test]
    fn every_damaged_image_is_refused() {
        let image = encode(&sample());
        let body = &image[..image.len() - 4];
        for cut in 0..image.len() {
            assert!(decode(&image[..cut]).is_err(), "cut at {cut}");
            // Checksummed again: the structure itself must be found short.
            assert!(decode(&sealed(&body[..cut.min(body.len() - 1)])).is_err());
        }
        for i in 0..image.len() {
            let mut bad = image.clone();
            bad[i] ^= 1;
            assert!(decode(&bad).is_err(), "bit flipped at {i}");
        }
        // Counts far beyond the bytes are refused without allocating for them.
        for at in [MAGIC.len() + 4, body.len() - 8] {
            let mut big = body.to_vec();
            big[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
            assert!(decode(&sealed(&big)).is_err());
        }
    }
}
