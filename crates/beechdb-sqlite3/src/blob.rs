//! Incremental blob I/O (`sqlite3_blob_*`): a handle on one value of one row, read and
//! written in pieces.
//!
//! Owns: `sqlite3_blob`, a copy of the value. Reads come from the copy; each write
//! changes the copy and stores the whole value back in the row at once (within the
//! connection's transaction, if one is open). As in SQLite, a write cannot change the
//! value's size, and a handle whose row its connection has changed since (updated or
//! deleted) expires: reads and writes then fail with `SQLITE_ABORT`. May call: `conn`,
//! `value`.

use crate::conn::{failure, sqlite3, Failure};
use crate::consts::*;
use crate::value::arg_str;
use beechdb_sql::Value;
use std::ffi::{c_char, c_int, c_void};

/// An open blob (`sqlite3_blob*`).
pub struct sqlite3_blob {
    db: *mut sqlite3,
    table: String,
    column: String,
    rowid: i64,
    data: Vec<u8>,
    /// The value was TEXT (written back as TEXT).
    text: bool,
    writable: bool,
    /// The connection's count of changed rows when the copy was last known current.
    changes_seen: u64,
    /// The row changed under the handle.
    expired: bool,
}

impl sqlite3_blob {
    /// Reads the value at `rowid` into the handle.
    fn load(&mut self, inner: &mut crate::conn::Inner, rowid: i64) -> Result<(), Failure> {
        let sql = format!(
            "SELECT {} FROM {} WHERE rowid = ?",
            crate::util::quote_name(&self.column),
            crate::util::quote_name(&self.table)
        );
        let r = inner
            .conn()?
            .query(&sql, &[Value::Integer(rowid)])
            .map_err(failure)?;
        let Some(v) = r.rows.into_iter().next().and_then(|r| r.into_iter().next()) else {
            return Err((SQLITE_ERROR, format!("no such rowid: {rowid}")));
        };
        (self.data, self.text) = match v {
            Value::Blob(b) => (b.to_vec(), false),
            Value::Text(t) => (t.as_bytes().to_vec(), true),
            other => {
                return Err((
                    SQLITE_ERROR,
                    format!("cannot open value of type {}", other.type_name()),
                ))
            }
        };
        self.rowid = rowid;
        self.changes_seen = inner.conn()?.total_changes();
        self.expired = false;
        Ok(())
    }

    /// Fails once the row changed since the copy was made: the connection changed rows
    /// since, and the value there is not the copy any more (or the row is gone).
    fn check_current(&mut self, inner: &mut crate::conn::Inner) -> Result<(), Failure> {
        let expired = || {
            (
                SQLITE_ABORT,
                "the row under the blob handle changed".to_string(),
            )
        };
        if self.expired {
            return Err(expired());
        }
        if inner.conn()?.total_changes() == self.changes_seen {
            return Ok(());
        }
        let copy = (std::mem::take(&mut self.data), self.text);
        let still = match self.load(inner, self.rowid) {
            Ok(()) => (&self.data, self.text) == (&copy.0, copy.1),
            Err(_) => false,
        };
        if !still {
            self.expired = true;
            return Err(expired());
        }
        Ok(())
    }
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_blob_open(
    db: *mut sqlite3,
    schema: *const c_char,
    table: *const c_char,
    column: *const c_char,
    rowid: i64,
    flags: c_int,
    pp: *mut *mut sqlite3_blob,
) -> c_int {
    if pp.is_null() {
        return SQLITE_MISUSE;
    }
    *pp = std::ptr::null_mut();
    let Some(h) = db.as_ref() else {
        return SQLITE_MISUSE;
    };
    let (blob, rc) = h.with(None, |inner| {
        if arg_str(schema).is_some_and(|s| !s.eq_ignore_ascii_case("main")) {
            return Err((SQLITE_ERROR, "no such database".into()));
        }
        let (Some(table), Some(column)) = (arg_str(table), arg_str(column)) else {
            return Err((SQLITE_MISUSE, "a table and a column are needed".into()));
        };
        let mut b = sqlite3_blob {
            db,
            table: table.to_string(),
            column: column.to_string(),
            rowid,
            data: Vec::new(),
            text: false,
            writable: flags != 0,
            changes_seen: 0,
            expired: false,
        };
        b.load(inner, rowid)?;
        inner.live += 1;
        Ok(Some(b))
    });
    if let Some(b) = blob {
        *pp = Box::into_raw(Box::new(b));
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_blob_reopen(p: *mut sqlite3_blob, rowid: i64) -> c_int {
    let Some(b) = p.as_mut() else {
        return SQLITE_MISUSE;
    };
    let h = &*b.db;
    h.run(|inner| b.load(inner, rowid))
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_blob_bytes(p: *mut sqlite3_blob) -> c_int {
    p.as_ref().map_or(0, |b| b.data.len() as c_int)
}

/// Checks that `n` bytes at `offset` lie within the value.
fn span(b: &sqlite3_blob, n: c_int, offset: c_int) -> Result<std::ops::Range<usize>, Failure> {
    if n < 0 || offset < 0 || offset as usize + n as usize > b.data.len() {
        return Err((SQLITE_ERROR, "blob offset and size out of range".into()));
    }
    Ok(offset as usize..offset as usize + n as usize)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_blob_read(
    p: *mut sqlite3_blob,
    out: *mut c_void,
    n: c_int,
    offset: c_int,
) -> c_int {
    let Some(b) = p.as_mut() else {
        return SQLITE_MISUSE;
    };
    let h = &*b.db;
    h.run(|inner| {
        b.check_current(inner)?;
        let r = span(b, n, offset)?;
        std::ptr::copy_nonoverlapping(b.data[r].as_ptr(), out as *mut u8, n as usize);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_blob_write(
    p: *mut sqlite3_blob,
    data: *const c_void,
    n: c_int,
    offset: c_int,
) -> c_int {
    let Some(b) = p.as_mut() else {
        return SQLITE_MISUSE;
    };
    let h = &*b.db;
    h.run(|inner| {
        if !b.writable {
            return Err((
                SQLITE_READONLY,
                "attempt to write a readonly database (the blob was opened read-only)".into(),
            ));
        }
        b.check_current(inner)?;
        let r = span(b, n, offset)?;
        b.data[r].copy_from_slice(std::slice::from_raw_parts(data as *const u8, n as usize));
        let v = if b.text {
            Value::from(String::from_utf8_lossy(&b.data).into_owned())
        } else {
            Value::from(b.data.clone())
        };
        let sql = format!(
            "UPDATE {} SET {} = ? WHERE rowid = ?",
            crate::util::quote_name(&b.table),
            crate::util::quote_name(&b.column)
        );
        inner
            .conn()?
            .execute(&sql, &[v, Value::Integer(b.rowid)])
            .map_err(failure)?;
        // Its own write leaves the copy current.
        b.changes_seen = inner.conn()?.total_changes();
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_blob_close(p: *mut sqlite3_blob) -> c_int {
    if p.is_null() {
        return SQLITE_OK;
    }
    let b = Box::from_raw(p);
    sqlite3::release(b.db);
    SQLITE_OK
}
