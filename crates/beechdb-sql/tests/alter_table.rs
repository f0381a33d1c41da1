//! ALTER TABLE RENAME COLUMN and DROP COLUMN, checked against SQLite (rusqlite, bundled)
//! statement by statement: the same errors in the same words, the same rows, and the same
//! schema text afterwards; then what outlives the statement (a reopen, a rollback).

mod common;

use beechdb_sql::{Database, Value};

/// Runs each statement on both engines (see `common::same_outcome`).
fn same_outcomes(script: &[&str]) {
    // (rusqlite's bundled SQLite enforces foreign keys by default; SQLite does not.)
    let (_db, mut ours, lite) = common::both("PRAGMA foreign_keys = OFF");
    for sql in script {
        common::same_outcome(&mut ours, &lite, sql);
    }
}

#[test]
fn rename_column_matches_sqlite() {
    same_outcomes(&[
        "CREATE TABLE p(k PRIMARY KEY, v)",
        "CREATE TABLE t(a integer primary key, b text unique, c, d check(d > 0), \
         e references t(c), CHECK (c <> e), foreign key(c) references t(b))",
        "CREATE TABLE ch(x references p(k), y, foreign key(y) references p(v))",
        "CREATE INDEX i ON t(c, e DESC)",
        "INSERT INTO p VALUES(1, 'one')",
        "INSERT INTO t VALUES(1, 'x', 3, 4, 5), (2, 'y', 6, 7, 8)",
        "ALTER TABLE t RENAME COLUMN zz TO q",
        "ALTER TABLE t RENAME COLUMN c TO b",
        "ALTER TABLE t RENAME COLUMN c TO C2",
        "ALTER TABLE t RENAME COLUMN a TO \"the id\"",
        "ALTER TABLE p RENAME COLUMN k TO kk",
        "ALTER TABLE p RENAME COLUMN v TO vv",
        "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY name",
        "SELECT * FROM t ORDER BY \"the id\"",
        "SELECT C2, e FROM t WHERE C2 = 6",
        "SELECT c FROM t",
        "INSERT INTO t VALUES(3, 'z', 9, 0, 1)",
        "INSERT INTO t(\"the id\", b, C2, d, e) VALUES(3, 'z', 9, 1, 1)",
        "SELECT * FROM t ORDER BY 1",
        "PRAGMA table_info(t)",
        "PRAGMA index_info(i)",
    ]);
}

#[test]
fn drop_column_matches_sqlite() {
    same_outcomes(&[
        "CREATE TABLE t(a integer primary key, b text unique, c, d check(d > 0), \
         e varchar(10), f DEFAULT 'f', CHECK (c <> e), foreign key(c) references t(b))",
        "CREATE TABLE u(x)",
        "CREATE TABLE w(x, y, z, PRIMARY KEY(x, y))",
        "CREATE INDEX i ON t(f)",
        "INSERT INTO t VALUES(1, 'x', 3, 4, 5, 'f1'), (2, 'y', 6, 7, 8, 'f2')",
        "ALTER TABLE t ADD COLUMN g DEFAULT 9",
        "INSERT INTO t VALUES(3, 'z', 9, 10, 11, 'f3', 12)",
        "ALTER TABLE t DROP COLUMN zz",
        "ALTER TABLE t DROP COLUMN a",
        "ALTER TABLE t DROP COLUMN b",
        "ALTER TABLE t DROP COLUMN c",
        "ALTER TABLE t DROP COLUMN e",
        "ALTER TABLE t DROP COLUMN f",
        "ALTER TABLE t DROP COLUMN d",
        "DROP INDEX i",
        "ALTER TABLE t DROP COLUMN f",
        "ALTER TABLE u DROP COLUMN x",
        "ALTER TABLE w DROP COLUMN y",
        "ALTER TABLE w DROP COLUMN z",
        "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY name",
        "SELECT * FROM t ORDER BY a",
        "SELECT d FROM t",
        "INSERT INTO t VALUES(4, 'w', 1, 2, 3)",
        "INSERT INTO t VALUES(5, 'v', 1, 2)",
        "SELECT * FROM t ORDER BY a",
        "ALTER TABLE t DROP COLUMN g",
        "SELECT * FROM t ORDER BY a",
        "PRAGMA table_info(t)",
    ]);
}

#[test]
fn rename_table_matches_sqlite() {
    same_outcomes(&[
        "CREATE TABLE t ( a primary key, b check(t.b > 0), foreign key(b) references t(a))",
        "CREATE INDEX i ON t(b)",
        "CREATE TABLE c(x references t(a), y, foreign key(y) references \"t\"(a))",
        "INSERT INTO t VALUES(1, 2)",
        "ALTER TABLE t RENAME TO c",
        "ALTER TABLE t RENAME TO \"new t\"",
        "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY name",
        "SELECT * FROM \"new t\"",
        "INSERT INTO \"new t\" VALUES(1, 3)",
        "SELECT * FROM t",
        "ALTER TABLE sqlite_schema RENAME TO x",
    ]);
}

#[test]
fn views_and_triggers_that_may_name_the_column_stop_the_change() {
    let db = Database::open_in_memory().unwrap();
    let mut c = db.connect();
    c.execute_batch(
        "CREATE TABLE u(x, y, z); CREATE TABLE other(y);
         CREATE TRIGGER tr AFTER INSERT ON u BEGIN SELECT new.y; END;
         CREATE VIEW v AS SELECT z FROM u;",
    )
    .unwrap();
    let err =
        |c: &mut beechdb_sql::Connection, sql: &str| c.execute(sql, &[]).unwrap_err().to_string();
    assert_eq!(
        err(&mut c, "ALTER TABLE u DROP COLUMN y"),
        "error in trigger tr after drop column: no such column: y"
    );
    assert_eq!(
        err(&mut c, "ALTER TABLE u DROP COLUMN z"),
        "error in view v after drop column: no such column: z"
    );
    assert!(err(&mut c, "ALTER TABLE u RENAME COLUMN y TO yy").contains("trigger tr may name"));
    // Another table's column of the same name is not the trigger's.
    c.execute("ALTER TABLE other RENAME COLUMN y TO yy", &[])
        .unwrap();
    assert!(err(&mut c, "ALTER TABLE u RENAME TO w").contains("which view v may name"));
    c.execute("DROP VIEW v", &[]).unwrap();
    assert!(err(&mut c, "ALTER TABLE u RENAME TO w").contains("which trigger tr may name"));
    c.execute("ALTER TABLE u DROP COLUMN x", &[]).unwrap();
    c.execute("INSERT INTO u VALUES(1, 2)", &[]).unwrap();
}

#[test]
fn changes_persist_and_roll_back_with_their_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let rows = 5000;
    {
        let db = Database::open(&path).unwrap();
        let mut c = db.connect();
        c.execute_batch(
            "CREATE TABLE t(id INTEGER PRIMARY KEY, a, b, c); CREATE INDEX ic ON t(c);",
        )
        .unwrap();
        c.execute("BEGIN", &[]).unwrap();
        for i in 0..rows {
            c.execute(
                "INSERT INTO t VALUES(?, ?, ?, ?)",
                &[
                    Value::Integer(i),
                    Value::Integer(i * 2),
                    Value::Text(format!("b{i}").into()),
                    Value::Integer(i % 7),
                ],
            )
            .unwrap();
        }
        c.execute("COMMIT", &[]).unwrap();
        // A statement prepared before the change sees it (or fails) after.
        let st = c.prepare("SELECT count(*) FROM t WHERE a >= 0").unwrap();
        c.execute("BEGIN", &[]).unwrap();
        c.execute("ALTER TABLE t DROP COLUMN b", &[]).unwrap();
        c.execute("ALTER TABLE t RENAME COLUMN c TO k", &[])
            .unwrap();
        assert_eq!(
            c.query("SELECT * FROM t WHERE id = 7", &[]).unwrap().rows,
            vec![vec![
                Value::Integer(7),
                Value::Integer(14),
                Value::Integer(0)
            ]]
        );
        c.execute("ROLLBACK", &[]).unwrap();
        assert_eq!(
            c.query("SELECT b, c FROM t WHERE id = 7", &[])
                .unwrap()
                .rows,
            vec![vec![Value::Text("b7".into()), Value::Integer(0)]]
        );
        c.execute("ALTER TABLE t DROP COLUMN b", &[]).unwrap();
        c.execute("ALTER TABLE t RENAME COLUMN a TO doubled", &[])
            .unwrap();
        c.execute("ALTER TABLE t RENAME COLUMN c TO k", &[])
            .unwrap();
        assert!(c
            .run(&st, &[])
            .unwrap_err()
            .to_string()
            .contains("no such column: a"));
        // Another connection sees the committed change.
        let mut other = db.connect();
        assert_eq!(
            other
                .query("SELECT sum(doubled), count(k) FROM t WHERE k = 3", &[])
                .unwrap()
                .rows,
            c.query("SELECT sum(doubled), count(k) FROM t WHERE +k = 3", &[])
                .unwrap()
                .rows,
        );
    }
    let db = Database::open(&path).unwrap();
    let mut c = db.connect();
    assert_eq!(
        c.query("SELECT sql FROM sqlite_schema WHERE name = 't'", &[])
            .unwrap()
            .rows,
        vec![vec![Value::Text(
            "CREATE TABLE t(id INTEGER PRIMARY KEY, doubled, k)".into()
        )]]
    );
    let sum: i64 = (0..rows).map(|i| i * 2).sum();
    assert_eq!(
        c.query("SELECT count(*), sum(doubled), max(k) FROM t", &[])
            .unwrap()
            .rows,
        vec![vec![
            Value::Integer(rows),
            Value::Integer(sum),
            Value::Integer(6)
        ]]
    );
    assert_eq!(
        c.query("PRAGMA integrity_check", &[]).unwrap().rows,
        vec![vec![Value::Text("ok".into())]]
    );
}
