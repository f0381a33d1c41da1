//! Partial indexes (`CREATE INDEX ... WHERE cond`): only rows where the condition holds have
//! an entry, kept so through every change; a unique one is enforced among those rows only;
//! queries read every row (the index is not used to find rows). Checked against SQLite
//! (rusqlite, bundled) statement by statement, and across a reopen.

mod common;

#[test]
fn partial_indexes_match_sqlite() {
    let (_db, mut ours, lite) = common::both(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, email TEXT, deleted INT, n INT);
         INSERT INTO t VALUES(1, 'a@x', 1, 5), (2, 'a@x', 1, 6), (3, 'b@x', 0, 7);
         CREATE UNIQUE INDEX live_email ON t(email) WHERE deleted = 0;
         CREATE INDEX big_n ON t(n) WHERE n > 6;",
    );
    let script = [
        // Uniqueness among the rows the condition takes, and only those.
        "INSERT INTO t VALUES(4, 'a@x', 0, 1)",
        "INSERT INTO t VALUES(5, 'a@x', 0, 2)",
        "INSERT INTO t VALUES(6, 'a@x', 1, 3)",
        "UPDATE t SET deleted = 0 WHERE id = 1",
        "UPDATE t SET deleted = 1 WHERE id = 4",
        "UPDATE t SET deleted = 0 WHERE id = 1",
        "INSERT OR REPLACE INTO t VALUES(7, 'b@x', 0, 9)",
        "INSERT OR IGNORE INTO t VALUES(8, 'a@x', 0, 9)",
        "SELECT * FROM t ORDER BY id",
        // Queries see every row, in the index or not.
        "SELECT id FROM t WHERE email = 'a@x' ORDER BY id",
        "SELECT id FROM t WHERE n = 5",
        "SELECT id FROM t WHERE n > 0 ORDER BY n",
        "SELECT count(*) FROM t WHERE email = 'a@x' AND deleted = 0",
        "DELETE FROM t WHERE id = 1",
        "INSERT INTO t VALUES(9, 'a@x', 0, 10)",
        "SELECT * FROM t ORDER BY id",
        "PRAGMA index_list(t)",
        "SELECT name, sql FROM sqlite_schema WHERE type = 'index' ORDER BY name",
        // An index over rows that clash outside its condition builds.
        "CREATE UNIQUE INDEX dead_email ON t(email) WHERE deleted = 1",
        "CREATE UNIQUE INDEX all_email ON t(email)",
        "DROP INDEX live_email",
        "INSERT INTO t VALUES(10, 'a@x', 0, 11)",
        // Renaming a column the condition names carries it along; dropping it is refused.
        "ALTER TABLE t RENAME COLUMN deleted TO gone",
        "SELECT sql FROM sqlite_schema WHERE name = 'dead_email'",
        "INSERT INTO t VALUES(11, 'z@x', 1, 1)",
        "INSERT INTO t VALUES(12, 'z@x', 1, 1)",
        "INSERT INTO t VALUES(13, 'z@x', 0, 1)",
        "ALTER TABLE t DROP COLUMN gone",
        "SELECT * FROM t ORDER BY id",
        // SQLite's rules for what a condition may hold.
        "CREATE INDEX bad ON t(n) WHERE random() > 0",
        "CREATE INDEX bad ON t(n) WHERE n IN (SELECT 1)",
        "CREATE INDEX bad ON t(n) WHERE n > ?",
        "CREATE INDEX bad ON t(n) WHERE nosuch > 1",
        "CREATE INDEX bad ON t(n) WHERE abs(n) > 1 AND email LIKE 'a%'",
    ];
    for sql in script {
        common::same_outcome(&mut ours, &lite, sql);
    }
}

#[test]
fn a_partial_unique_index_holds_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let db = beechdb_sql::Database::open(&path).unwrap();
        let mut c = db.connect();
        c.execute_batch(
            "CREATE TABLE t(k TEXT, live INT);
             CREATE UNIQUE INDEX one_live ON t(k) WHERE live;
             INSERT INTO t VALUES('a', 1), ('a', 0), ('a', 0);",
        )
        .unwrap();
    }
    let db = beechdb_sql::Database::open(&path).unwrap();
    let mut c = db.connect();
    let err = c.execute("INSERT INTO t VALUES('a', 1)", &[]).unwrap_err();
    assert!(
        err.to_string().contains("UNIQUE constraint failed"),
        "{err}"
    );
    c.execute("INSERT INTO t VALUES('a', 0)", &[]).unwrap();
    c.execute("INSERT INTO t VALUES('b', 1)", &[]).unwrap();
    let rows = c
        .query("SELECT count(*) FROM t WHERE k = 'a'", &[])
        .unwrap()
        .rows;
    assert_eq!(rows[0][0], beechdb_sql::Value::Integer(4));
}
