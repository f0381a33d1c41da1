//! AUTOINCREMENT never gives a rowid twice, deleted rows' and across reopens included, and
//! `sqlite_schema`'s companion `sqlite_sequence` shows the largest used; checked against
//! SQLite (rusqlite, bundled), and then across a reopen.

mod common;

use beechdb_sql::{Database, Value};

#[test]
fn autoincrement_matches_sqlite() {
    let (_db, mut ours, lite) = common::both(
        "CREATE TABLE a(id INTEGER PRIMARY KEY AUTOINCREMENT, v);
         INSERT INTO a(v) VALUES('x'), ('y'), ('z');",
    );
    for sql in [
        "SELECT * FROM sqlite_sequence",
        "DELETE FROM a WHERE id = 3",
        "INSERT INTO a(v) VALUES('after delete') RETURNING id",
        "INSERT INTO a VALUES(100, 'explicit')",
        "DELETE FROM a WHERE id >= 4",
        "INSERT INTO a(v) VALUES('after 100') RETURNING id",
        "UPDATE a SET id = 500 WHERE id = 1",
        "UPDATE a SET id = 3 WHERE id = 500",
        "INSERT INTO a(v) VALUES('after move') RETURNING id",
        "SELECT name, seq FROM sqlite_sequence ORDER BY name",
        "SELECT * FROM a ORDER BY id",
    ] {
        common::same_rows(&mut ours, &lite, sql, false);
    }
}

#[test]
fn deleted_rowids_stay_used_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let db = Database::open(&path).unwrap();
        let mut c = db.connect();
        c.execute_batch(
            "CREATE TABLE a(id INTEGER PRIMARY KEY AUTOINCREMENT, v);
             CREATE TABLE p(id INTEGER PRIMARY KEY, v);
             INSERT INTO a(v) VALUES(1), (2), (3), (4), (5);
             INSERT INTO p(v) VALUES(1), (2), (3), (4), (5);
             DELETE FROM a WHERE id > 3; DELETE FROM p WHERE id > 3;",
        )
        .unwrap();
    }
    let db = Database::open(&path).unwrap();
    let mut c = db.connect();
    let inserted = |c: &mut beechdb_sql::Connection, t: &str| {
        c.query(&format!("INSERT INTO {t}(v) VALUES(0) RETURNING id"), &[])
            .unwrap()
            .rows[0][0]
            .as_i64()
    };
    // A plain rowid table reuses the deleted top rowids (as SQLite does); AUTOINCREMENT not.
    assert_eq!(inserted(&mut c, "p"), 4);
    assert_eq!(inserted(&mut c, "a"), 6);
    assert_eq!(
        c.query("SELECT seq FROM sqlite_sequence WHERE name = 'a'", &[])
            .unwrap()
            .rows,
        vec![vec![Value::Integer(6)]]
    );
    // Dropping the table drops its mark.
    c.execute_batch("DROP TABLE a; CREATE TABLE a(id INTEGER PRIMARY KEY AUTOINCREMENT, v);")
        .unwrap();
    assert_eq!(inserted(&mut c, "a"), 1);
}
