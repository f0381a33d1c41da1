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

/// Writes to `sqlite_sequence` (as a dump's restore makes them) set a table's mark, and are
/// refused clearly where BeechDB keeps no such row (a table without AUTOINCREMENT) or the
/// write is not one it understands.
#[test]
fn writes_to_sqlite_sequence_set_marks_or_are_refused_clearly() {
    let db = Database::open_in_memory().unwrap();
    let mut c = db.connect();
    c.execute_batch(
        "CREATE TABLE a(id INTEGER PRIMARY KEY AUTOINCREMENT, v); CREATE TABLE plain(v);",
    )
    .unwrap();
    c.execute("INSERT INTO sqlite_sequence VALUES('a', 41)", &[])
        .unwrap();
    let r = c
        .query("INSERT INTO a(v) VALUES('x') RETURNING id", &[])
        .unwrap();
    assert_eq!(r.rows[0][0], Value::Integer(42));
    let refused = |c: &mut beechdb_sql::Connection, sql: &str, says: &str| {
        let e = c.execute(sql, &[]).unwrap_err();
        assert!(e.to_string().contains(says), "{sql}: {e}");
    };
    refused(
        &mut c,
        "INSERT INTO sqlite_sequence VALUES('plain', 5)",
        "no AUTOINCREMENT table",
    );
    refused(
        &mut c,
        "INSERT INTO sqlite_sequence(seq) VALUES(5)",
        "needs a name",
    );
    refused(
        &mut c,
        "UPDATE sqlite_sequence SET name = 'b'",
        "other than SET seq",
    );
    // Nothing refused changed anything.
    let r = c
        .query("SELECT name, seq FROM sqlite_sequence", &[])
        .unwrap();
    assert_eq!(r.rows, vec![vec![Value::from("a"), Value::Integer(42)]]);
    c.execute("DELETE FROM sqlite_sequence", &[]).unwrap();
    let r = c
        .query("INSERT INTO a(v) VALUES('y') RETURNING id", &[])
        .unwrap();
    assert_eq!(
        r.rows[0][0],
        Value::Integer(43),
        "the largest rowid still counts"
    );
}

/// `Database::close` checkpoints, so the environment opens again with nothing to replay;
/// a database only dropped leaves its commits in the log. Closing while another handle or
/// connection is open is refused and closes nothing.
#[test]
fn closing_a_database_checkpoints_it() {
    let dir = tempfile::tempdir().unwrap();
    let replayed = |path: &std::path::Path| {
        let env = beechdb::Env::open(path, beechdb::Config::new().transactional(true)).unwrap();
        let n = env.stat().unwrap().txn.unwrap().recovered_commits;
        env.close().unwrap();
        n
    };
    for close in [true, false] {
        let path = dir.path().join(format!("db-{close}"));
        let db = Database::open_file(&path).unwrap();
        let mut c = db.connect();
        c.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES(1); INSERT INTO t VALUES(2);")
            .unwrap();
        assert!(matches!(
            db.clone().close(),
            Err(beechdb_sql::Error::Misuse(_))
        ));
        assert_eq!(
            c.query("SELECT count(*) FROM t", &[]).unwrap().rows[0][0],
            Value::Integer(2)
        );
        drop(c);
        if close {
            db.close().unwrap();
            assert_eq!(replayed(&path), 0);
        } else {
            drop(db);
            assert!(replayed(&path) > 0);
        }
    }
}
