//! What the tests that compare BeechDB's SQL with SQLite (rusqlite, bundled) share: both
//! engines' rows of a statement, every value printed the same way (as rusqlite's
//! `ValueRef` prints it), so that equal strings mean equal storage class and value.
#![allow(dead_code)] // each test file uses part of it

use beechdb_sql::{Connection, Value};
use rusqlite::types::ValueRef;

/// A value as rusqlite prints the same value read from SQLite.
pub fn printed(v: &Value) -> String {
    match v {
        Value::Null => format!("{:?}", ValueRef::Null),
        Value::Integer(i) => format!("{:?}", ValueRef::Integer(*i)),
        Value::Real(r) => format!("{:?}", ValueRef::Real(*r)),
        Value::Text(t) => format!("{:?}", ValueRef::Text(t.as_bytes())),
        Value::Blob(b) => format!("{:?}", ValueRef::Blob(b)),
    }
}

/// A value read from SQLite, printed as [`printed`] prints BeechDB's: text that is not
/// UTF-8 (SQLite keeps whatever bytes a blob or a cut gave it) as its lossy form, the one
/// BeechDB's text holds (docs/sql-compat.md).
pub fn lite_printed(v: ValueRef) -> String {
    match v {
        ValueRef::Text(t) => format!(
            "{:?}",
            ValueRef::Text(String::from_utf8_lossy(t).as_bytes())
        ),
        v => format!("{v:?}"),
    }
}

/// SQLite's rows of `sql`.
pub fn sqlite_rows(c: &rusqlite::Connection, sql: &str) -> Vec<Vec<String>> {
    let mut st = c.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let n = st.column_count();
    st.query_map([], |r| {
        (0..n).map(|i| Ok(lite_printed(r.get_ref(i)?))).collect()
    })
    .unwrap()
    .map(|r| r.unwrap())
    .collect()
}

/// BeechDB's rows of `sql`.
pub fn our_rows(c: &mut Connection, sql: &str) -> Vec<Vec<String>> {
    c.query(sql, &[])
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .rows
        .iter()
        .map(|r| r.iter().map(printed).collect())
        .collect()
}

/// Runs `sql` on both and asserts the same rows (in the same order unless `sorted`).
pub fn same_rows(ours: &mut Connection, lite: &rusqlite::Connection, sql: &str, sorted: bool) {
    let (mut got, mut want) = (our_rows(ours, sql), sqlite_rows(lite, sql));
    if sorted {
        got.sort();
        want.sort();
    }
    assert_eq!(got, want, "{sql}");
}

/// Runs `sql` on both: both succeed with the same rows (in the same order), or both fail
/// with the same message.
pub fn same_outcome(ours: &mut Connection, lite: &rusqlite::Connection, sql: &str) {
    let want = lite
        .prepare(sql)
        .and_then(|mut st| {
            let n = st.column_count();
            st.query_map([], |r| {
                (0..n).map(|i| Ok(lite_printed(r.get_ref(i)?))).collect()
            })?
            .collect::<rusqlite::Result<Vec<Vec<String>>>>()
        })
        .map_err(|e| match e {
            rusqlite::Error::SqliteFailure(_, Some(m)) => m,
            rusqlite::Error::SqlInputError { msg, .. } => msg,
            e => e.to_string(),
        });
    let got = ours
        .query(sql, &[])
        .map(|r| {
            r.rows
                .iter()
                .map(|r| r.iter().map(printed).collect())
                .collect()
        })
        .map_err(|e| e.to_string());
    assert_eq!(got, want, "{sql}");
}

/// BeechDB (an in-memory database, kept alive by the returned handle) and SQLite, each
/// with `sql` run.
pub fn both(sql: &str) -> (beechdb_sql::Database, Connection, rusqlite::Connection) {
    let db = beechdb_sql::Database::open_in_memory().unwrap();
    let mut ours = db.connect();
    let lite = rusqlite::Connection::open_in_memory().unwrap();
    ours.execute_batch(sql).unwrap();
    lite.execute_batch(sql).unwrap();
    (db, ours, lite)
}

/// The details of `EXPLAIN QUERY PLAN sql`, a line per access path.
pub fn plan_of(c: &mut Connection, sql: &str) -> Vec<String> {
    c.query(&format!("EXPLAIN QUERY PLAN {sql}"), &[])
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .rows
        .iter()
        .map(|r| r[3].to_text())
        .collect()
}

/// Asserts that `sql`'s result columns are named as SQLite names them (SQLite's names
/// read from the prepared statement; BeechDB's from running it).
pub fn same_names(ours: &mut Connection, lite: &rusqlite::Connection, sql: &str) {
    let want: Vec<String> = lite
        .prepare(sql)
        .unwrap()
        .column_names()
        .into_iter()
        .map(String::from)
        .collect();
    let got = ours.query(sql, &[]).unwrap().columns.to_vec();
    assert_eq!(got, want, "{sql}");
}

/// The number in environment variable `name` (a test's count of random cases), or
/// `default`.
pub fn env_count(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// `create`, then `rows` (each `(...)`) inserted by `insert` (`INSERT INTO t VALUES`), if any.
pub fn with_rows(create: &str, insert: &str, rows: &[String]) -> String {
    match rows.is_empty() {
        true => create.to_string(),
        false => format!("{create}{insert} {};", rows.join(", ")),
    }
}
