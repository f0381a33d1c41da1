//! New rowids inside one long transaction, where the SQL layer keeps each table's largest
//! rowid rather than looking it up at every insert: explicit rowids above it, rows moved
//! up and down by UPDATE, failed statements, savepoints rolled back, triggers inserting into
//! the same table and REPLACE; every rowid compared with SQLite's (bundled) after each
//! statement. (The largest row is never deleted here: SQLite takes its rowid again, BeechDB
//! does not; docs/sql-compat.md.)

mod common;

use common::{both, same_outcome};

#[test]
fn new_rowids_in_a_long_transaction_are_sqlites() {
    let (_db, mut ours, lite) = both(
        "CREATE TABLE t(v UNIQUE, w);
         CREATE TABLE log(what);
         CREATE TRIGGER big AFTER INSERT ON t WHEN new.w = 'twin' BEGIN
           INSERT INTO t(v, w) VALUES (new.v || '-twin', 'made');
           INSERT INTO log VALUES (new.rowid);
         END;
         BEGIN;",
    );
    let steps = [
        "INSERT INTO t(v) VALUES ('a'), ('b'), ('c')",
        "INSERT INTO t(rowid, v) VALUES (1000, 'far')",
        "INSERT INTO t(v) VALUES ('after far')",
        "UPDATE t SET rowid = 5000 WHERE v = 'b'",
        "INSERT INTO t(v) VALUES ('after move up')",
        "UPDATE t SET rowid = 7 WHERE v = 'far'",
        "INSERT INTO t(v) VALUES ('after move down')",
        // Fails at its second row: the first row's rowid is not kept.
        "INSERT INTO t(rowid, v) VALUES (9000, 'gone'), (9001, 'a')",
        "INSERT INTO t(v) VALUES ('after failure')",
        "SAVEPOINT s",
        "INSERT INTO t(rowid, v) VALUES (20000, 'rolled back')",
        "ROLLBACK TO s",
        "INSERT INTO t(v) VALUES ('after rollback')",
        "INSERT INTO t(v) VALUES ('inside')",
        "ROLLBACK TO s",
        "INSERT INTO t(v) VALUES ('after rollback again')",
        "RELEASE s",
        "INSERT INTO t(v, w) VALUES ('x', 'twin')",
        "INSERT INTO t(v) VALUES ('after trigger')",
        "INSERT OR REPLACE INTO t(rowid, v) VALUES (30000, 'x')",
        "INSERT INTO t(v) VALUES ('after replace')",
        "DELETE FROM t WHERE rowid < 10",
        "INSERT INTO t(v) VALUES ('after delete')",
    ];
    for sql in steps {
        let (a, b) = (ours.execute(sql, &[]), lite.execute(sql, []));
        assert_eq!(a.is_ok(), b.is_ok(), "{sql}: {a:?} / {b:?}");
        same_outcome(&mut ours, &lite, "SELECT rowid, v, w FROM t ORDER BY rowid");
        same_outcome(&mut ours, &lite, "SELECT * FROM log ORDER BY rowid");
    }
    ours.execute("COMMIT", &[]).unwrap();
    lite.execute("COMMIT", []).unwrap();
    same_outcome(&mut ours, &lite, "SELECT rowid, v, w FROM t ORDER BY rowid");
}
