//! The backup API (`sqlite3_backup_*`): a consistent copy of one database into another.
//!
//! Owns: `sqlite3_backup`. The first step reads the source's schema and rows in one
//! snapshot transaction, then replaces everything in the destination with them in one
//! transaction; so a step copies everything ("pages" count rows here), and a failed step
//! leaves the destination as it was. May call: `conn`.

use crate::conn::{failure, sqlite3, Failure, Inner};
use crate::consts::*;
use crate::value::arg_str;
use beechdb_sql::{Connection, Value};
use std::ffi::{c_char, c_int};

/// A backup in progress (`sqlite3_backup*`).
pub struct sqlite3_backup {
    dest: *mut sqlite3,
    src: *mut sqlite3,
    done: bool,
    rows: c_int,
}

/// One table's contents: its CREATE statement, column list for INSERT, rows.
struct TableCopy {
    name: String,
    columns: Vec<String>,
    rows: Vec<Vec<Value>>,
}

/// Everything in a database: its tables, then its other objects' CREATE statements.
struct Snapshot {
    tables: Vec<(String, TableCopy)>,
    others: Vec<String>,
}

fn quote_name(n: &str) -> String {
    format!("\"{}\"", n.replace('"', "\"\""))
}

fn text(v: &Value) -> String {
    v.to_text()
}

/// Reads a database's schema and rows in one snapshot.
fn read_all(conn: &mut Connection) -> beechdb_sql::Result<Snapshot> {
    let own_txn = conn.is_autocommit();
    if own_txn {
        conn.execute("BEGIN", &[])?;
    }
    let r = (|| {
        let schema = conn.query(
            "SELECT type, name, sql FROM sqlite_schema WHERE sql IS NOT NULL",
            &[],
        )?;
        let mut snap = Snapshot {
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
            let info = conn.query(&format!("PRAGMA table_info({})", quote_name(&name)), &[])?;
            let mut columns: Vec<String> = info.rows.iter().map(|r| text(&r[1])).collect();
            let has_rowid_alias = info
                .rows
                .iter()
                .any(|r| r[5].as_i64() == 1 && text(&r[2]).eq_ignore_ascii_case("INTEGER"));
            let keeps_rowid =
                !has_rowid_alias && !sql.to_ascii_uppercase().contains("WITHOUT ROWID");
            let select = if keeps_rowid {
                columns.insert(0, "rowid".into());
                format!("SELECT rowid, * FROM {}", quote_name(&name))
            } else {
                format!("SELECT * FROM {}", quote_name(&name))
            };
            let rows = conn.query(&select, &[])?.rows;
            snap.tables.push((
                sql,
                TableCopy {
                    name,
                    columns,
                    rows,
                },
            ));
        }
        Ok(snap)
    })();
    if own_txn {
        conn.execute("COMMIT", &[])?;
    }
    r
}

/// Replaces everything in `conn`'s database with `snap`, in one transaction.
fn write_all(conn: &mut Connection, snap: &Snapshot) -> beechdb_sql::Result<()> {
    if !conn.is_autocommit() {
        return Err(beechdb_sql::Error::Sql(
            "cannot back up into a database with a transaction open on this connection".into(),
        ));
    }
    conn.execute("BEGIN IMMEDIATE", &[])?;
    let r = (|| {
        let old = conn.query(
            "SELECT type, name FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' ORDER BY type = 'table'",
            &[],
        )?;
        for row in &old.rows {
            let kind = text(&row[0]).to_ascii_uppercase();
            conn.execute(
                &format!("DROP {kind} IF EXISTS {}", quote_name(&text(&row[1]))),
                &[],
            )?;
        }
        for (sql, t) in &snap.tables {
            conn.execute(sql, &[])?;
            let cols: Vec<String> = t.columns.iter().map(|c| quote_name(c)).collect();
            let marks = vec!["?"; cols.len()].join(", ");
            let insert = conn.prepare(&format!(
                "INSERT INTO {}({}) VALUES ({marks})",
                quote_name(&t.name),
                cols.join(", ")
            ))?;
            for row in &t.rows {
                conn.run(&insert, row)?;
            }
        }
        for sql in &snap.others {
            conn.execute(sql, &[])?;
        }
        Ok(())
    })();
    match r {
        Ok(()) => conn.execute("COMMIT", &[]).map(drop),
        Err(e) => {
            let _ = conn.execute("ROLLBACK", &[]);
            Err(e)
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
    let main = |n: *const c_char| arg_str(n).is_none_or(|n| n.eq_ignore_ascii_case("main"));
    if dest == src {
        d.fail(SQLITE_ERROR, "source and destination must be distinct");
        return std::ptr::null_mut();
    }
    if !main(dest_name) || !main(src_name) {
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
        done: false,
        rows: 0,
    }))
}

/// Copies everything at the first call (whatever `pages` asks); `SQLITE_DONE` after.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_backup_step(p: *mut sqlite3_backup, _pages: c_int) -> c_int {
    let Some(b) = p.as_mut() else {
        return SQLITE_MISUSE;
    };
    if b.done {
        return SQLITE_DONE;
    }
    let (snap, rc) = (*b.src).with(None, |inner: &mut Inner| -> Result<_, Failure> {
        read_all(inner.conn()?).map(Some).map_err(failure)
    });
    let Some(snap) = snap else {
        let msg = crate::stmt::last_error(b.src);
        return (*b.dest).fail(rc, &msg);
    };
    let rc = (*b.dest).run(|inner| write_all(inner.conn()?, &snap).map_err(failure));
    if rc != SQLITE_OK {
        return rc;
    }
    b.rows = snap.tables.iter().map(|(_, t)| t.rows.len() as c_int).sum();
    b.done = true;
    SQLITE_DONE
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_backup_remaining(p: *mut sqlite3_backup) -> c_int {
    p.as_ref()
        .map_or(0, |b| if b.done { 0 } else { b.rows.max(1) })
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_backup_pagecount(p: *mut sqlite3_backup) -> c_int {
    p.as_ref().map_or(0, |b| b.rows)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_backup_finish(p: *mut sqlite3_backup) -> c_int {
    if p.is_null() {
        return SQLITE_OK;
    }
    let b = Box::from_raw(p);
    sqlite3::release(b.src);
    sqlite3::release(b.dest);
    if b.done {
        SQLITE_OK
    } else {
        (*b.dest).err_code()
    }
}
