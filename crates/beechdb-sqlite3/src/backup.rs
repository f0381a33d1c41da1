//! The backup API (`sqlite3_backup_*`): a consistent copy of one database into another.
//!
//! Owns: `sqlite3_backup`. A copy is made of units that stand for SQLite's pages: each
//! table's rows in runs of about one page (the source's page size) of values, the first
//! run creating the table, and one last unit that creates the indexes, triggers and views
//! and commits. The first step reads the source's schema and rows in one snapshot
//! transaction (held in memory until the backup finishes) and opens a transaction on the
//! destination that replaces its contents; each step copies the units it is asked for;
//! the destination commits with the last one, and a backup finished early rolls back. Each
//! step first looks at the source's snapshot: if anything committed there since the copy
//! was read (through any connection), the copy starts again from a new snapshot, as
//! SQLite's does, so the destination is always one commit's state of the source. A failed
//! step rolls the destination back; the next step starts again. May call: `conn`.

use crate::conn::{failure, sqlite3, Failure, Inner};
use crate::consts::*;
use crate::value::names_main;
use beechdb_sql::{Connection, Value};
use std::ffi::{c_char, c_int};
use std::ops::Range;

/// A backup in progress (`sqlite3_backup*`).
pub struct sqlite3_backup {
    dest: *mut sqlite3,
    src: *mut sqlite3,
    /// The copy under way: `None` before the first step and after a failed one.
    transfer: Option<Transfer>,
    done: bool,
}

/// One table's contents: its CREATE statement, column list for INSERT, rows.
pub(crate) struct TableCopy {
    pub sql: String,
    pub name: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
}

/// Everything in a database at one commit: its tables, then its other objects' CREATE
/// statements.
pub(crate) struct Snapshot {
    pub lsn: Option<u64>,
    pub tables: Vec<TableCopy>,
    pub others: Vec<String>,
}

/// What one unit (one "page") of a copy does.
enum Unit {
    /// Rows `rows` of table `table`; the table's first unit creates it.
    Rows { table: usize, rows: Range<usize> },
    /// Creates the other objects and commits the destination.
    Finish,
}

/// A snapshot being copied, and how far the copy has got.
pub(crate) struct Transfer {
    snap: Snapshot,
    units: Vec<Unit>,
    next: usize,
}

fn text(v: &Value) -> String {
    v.to_text()
}

/// About how many bytes `v` takes in a page.
fn value_bytes(v: &Value) -> usize {
    match v {
        Value::Null => 1,
        Value::Integer(_) | Value::Real(_) => 8,
        Value::Text(s) => s.len(),
        Value::Blob(b) => b.len(),
    }
}

/// Reads the source's schema and rows in one snapshot transaction; `None` when that
/// snapshot is the one already read (`known`: nothing has committed since).
pub(crate) fn read_source(
    conn: &mut Connection,
    known: Option<&Snapshot>,
) -> beechdb_sql::Result<Option<Snapshot>> {
    let own_txn = conn.is_autocommit();
    if own_txn {
        conn.execute("BEGIN", &[])?;
    }
    let lsn = conn.snapshot_lsn();
    let r = match known {
        Some(s) if s.lsn == lsn => Ok(None),
        _ => read_all(conn, lsn).map(Some),
    };
    if own_txn {
        conn.execute("COMMIT", &[])?;
    }
    r
}

fn read_all(conn: &mut Connection, lsn: Option<u64>) -> beechdb_sql::Result<Snapshot> {
    let schema = conn.query(
        "SELECT type, name, sql FROM sqlite_schema WHERE sql IS NOT NULL",
        &[],
    )?;
    let mut snap = Snapshot {
        lsn,
        tables: Vec::new(),
        others: Vec::new(),
    };
    for row in &schema.rows {
        let (kind, name, sql) = (text(&row[0]), text(&row[1]), text(&row[2]));
        if kind != "table" {
            snap.others.push(sql);
            continue;
        }
        if name.starts_with("sqlite_") {
            continue;
        }
        // A rowid table without an INTEGER PRIMARY KEY keeps its rowids explicitly.
        let info = conn.query(
            &format!("PRAGMA table_info({})", crate::util::quote_name(&name)),
            &[],
        )?;
        let mut columns: Vec<String> = info.rows.iter().map(|r| text(&r[1])).collect();
        let has_rowid_alias = info
            .rows
            .iter()
            .any(|r| r[5].as_i64() == 1 && text(&r[2]).eq_ignore_ascii_case("INTEGER"));
        let keeps_rowid = !has_rowid_alias && !sql.to_ascii_uppercase().contains("WITHOUT ROWID");
        let select = if keeps_rowid {
            columns.insert(0, "rowid".into());
            format!("SELECT rowid, * FROM {}", crate::util::quote_name(&name))
        } else {
            format!("SELECT * FROM {}", crate::util::quote_name(&name))
        };
        let rows = conn.query(&select, &[])?.rows;
        snap.tables.push(TableCopy {
            sql,
            name,
            columns,
            rows,
        });
    }
    Ok(snap)
}

impl Transfer {
    /// Cuts `snap` into units of about `page` bytes of values each.
    pub fn new(snap: Snapshot, page: usize) -> Transfer {
        let mut units = Vec::new();
        for (table, t) in snap.tables.iter().enumerate() {
            let (mut start, mut bytes) = (0, 0);
            for (i, row) in t.rows.iter().enumerate() {
                bytes += row.iter().map(value_bytes).sum::<usize>();
                if bytes >= page {
                    units.push(Unit::Rows {
                        table,
                        rows: start..i + 1,
                    });
                    (start, bytes) = (i + 1, 0);
                }
            }
            if start < t.rows.len() || start == 0 {
                units.push(Unit::Rows {
                    table,
                    rows: start..t.rows.len(),
                });
            }
        }
        units.push(Unit::Finish);
        Transfer {
            snap,
            units,
            next: 0,
        }
    }

    fn remaining(&self) -> usize {
        self.units.len() - self.next
    }

    /// Copies the next `n` units (all that are left when `n` is negative) into `conn`,
    /// beginning its transaction with the first; true when the copy is complete.
    pub fn step(&mut self, conn: &mut Connection, n: c_int) -> beechdb_sql::Result<bool> {
        if self.next == 0 {
            begin_replacing(conn)?;
        }
        let end = match usize::try_from(n) {
            Ok(n) => self.units.len().min(self.next + n),
            Err(_) => self.units.len(),
        };
        while self.next < end {
            match &self.units[self.next] {
                Unit::Rows { table, rows } => {
                    let t = &self.snap.tables[*table];
                    if rows.start == 0 {
                        conn.execute(&t.sql, &[])?;
                    }
                    let cols: Vec<String> = t
                        .columns
                        .iter()
                        .map(|c| crate::util::quote_name(c))
                        .collect();
                    let marks = vec!["?"; cols.len()].join(", ");
                    let insert = conn.prepare(&format!(
                        "INSERT INTO {}({}) VALUES ({marks})",
                        crate::util::quote_name(&t.name),
                        cols.join(", ")
                    ))?;
                    for row in &t.rows[rows.clone()] {
                        conn.run(&insert, row)?;
                    }
                }
                Unit::Finish => {
                    for sql in &self.snap.others {
                        conn.execute(sql, &[])?;
                    }
                    conn.execute("COMMIT", &[])?;
                }
            }
            self.next += 1;
        }
        Ok(self.next == self.units.len())
    }
}

/// Opens the destination's transaction and removes everything in it.
fn begin_replacing(conn: &mut Connection) -> beechdb_sql::Result<()> {
    if !conn.is_autocommit() {
        return Err(beechdb_sql::Error::Sql(
            "cannot back up into a database with a transaction open on this connection".into(),
        ));
    }
    conn.execute("BEGIN IMMEDIATE", &[])?;
    let old = conn.query(
        "SELECT type, name FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' ORDER BY type = 'table'",
        &[],
    )?;
    for row in &old.rows {
        let kind = text(&row[0]).to_ascii_uppercase();
        conn.execute(
            &format!(
                "DROP {kind} IF EXISTS {}",
                crate::util::quote_name(&text(&row[1]))
            ),
            &[],
        )?;
    }
    Ok(())
}

/// Rolls back the transaction a copy opened on the destination, if it has one open.
unsafe fn abandon(b: &mut sqlite3_backup) {
    if let Some(t) = b.transfer.take() {
        if t.next > 0 {
            (*b.dest).with_quiet((), |inner: &mut Inner| {
                let _ = inner.conn()?.execute("ROLLBACK", &[]);
                Ok(())
            });
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_backup_init(
    dest: *mut sqlite3,
    dest_name: *const c_char,
    src: *mut sqlite3,
    src_name: *const c_char,
) -> *mut sqlite3_backup {
    let (Some(d), Some(_)) = (dest.as_ref(), src.as_ref()) else {
        return std::ptr::null_mut();
    };
    if dest == src {
        d.fail(SQLITE_ERROR, "source and destination must be distinct");
        return std::ptr::null_mut();
    }
    if !names_main(dest_name) || !names_main(src_name) {
        d.fail(
            SQLITE_ERROR,
            "unknown database: only \"main\" can be backed up",
        );
        return std::ptr::null_mut();
    }
    for db in [dest, src] {
        let guard = (*db).inner.lock();
        guard.borrow_mut().live += 1;
    }
    Box::into_raw(Box::new(sqlite3_backup {
        dest,
        src,
        transfer: None,
        done: false,
    }))
}

/// Copies `pages` units (all when negative): `SQLITE_OK` while units remain,
/// `SQLITE_DONE` once the destination has committed the copy.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_backup_step(p: *mut sqlite3_backup, pages: c_int) -> c_int {
    let Some(b) = p.as_mut() else {
        return SQLITE_MISUSE;
    };
    if b.done {
        return SQLITE_DONE;
    }
    let known = b.transfer.as_ref().map(|c| &c.snap);
    let (fresh, rc) = (*b.src).with(None, |inner: &mut Inner| -> Result<_, Failure> {
        let conn = inner.conn()?;
        let Some(snap) = read_source(conn, known).map_err(failure)? else {
            return Ok(Some(None));
        };
        let page = conn.query("PRAGMA page_size", &[]).map_err(failure)?.rows[0][0].as_i64();
        Ok(Some(Some(Transfer::new(snap, page.max(512) as usize))))
    });
    let Some(fresh) = fresh else {
        let msg = crate::stmt::last_error(b.src);
        abandon(b);
        return (*b.dest).fail(rc, &msg);
    };
    if let Some(t) = fresh {
        abandon(b);
        b.transfer = Some(t);
    }
    let t = b.transfer.as_mut().expect("read above");
    let (done, rc) = (*b.dest).with(false, |inner| t.step(inner.conn()?, pages).map_err(failure));
    if rc != SQLITE_OK {
        abandon(b);
        return rc;
    }
    b.done = done;
    if done {
        SQLITE_DONE
    } else {
        SQLITE_OK
    }
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_backup_remaining(p: *mut sqlite3_backup) -> c_int {
    p.as_ref().map_or(0, |b| {
        b.transfer.as_ref().map_or(0, |c| c.remaining() as c_int)
    })
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_backup_pagecount(p: *mut sqlite3_backup) -> c_int {
    p.as_ref().map_or(0, |b| {
        b.transfer.as_ref().map_or(0, |c| c.units.len() as c_int)
    })
}

/// Ends the backup; one left before `SQLITE_DONE` rolls the destination back.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_backup_finish(p: *mut sqlite3_backup) -> c_int {
    if p.is_null() {
        return SQLITE_OK;
    }
    let mut b = Box::from_raw(p);
    let rc = if b.done {
        SQLITE_OK
    } else {
        (*b.dest).err_code()
    };
    if !b.done {
        abandon(&mut b);
    }
    sqlite3::release(b.src);
    sqlite3::release(b.dest);
    rc
}
