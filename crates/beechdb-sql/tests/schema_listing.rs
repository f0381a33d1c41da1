//! `sqlite_schema` (kept once made, until the schema changes) against SQLite after every step
//! of a run of schema changes: in and out of transactions, rolled back whole or to a
//! savepoint, renames, added columns, drops; read by this connection and by another one
//! that sees only what is committed.

mod common;

use common::{both, same_rows};

const LISTING: &str = "SELECT type, name, tbl_name, sql FROM sqlite_schema";

#[test]
fn the_listing_follows_every_change_and_every_rollback() {
    let (db, mut ours, lite) = both("CREATE TABLE a(x INTEGER PRIMARY KEY, y TEXT)");
    let mut other = db.connect();
    let lite_other = rusqlite::Connection::open_in_memory().unwrap();
    lite_other
        .execute_batch("CREATE TABLE a(x INTEGER PRIMARY KEY, y TEXT)")
        .unwrap();
    let steps: &[&str] = &[
        "CREATE INDEX ay ON a(y)",
        "BEGIN",
        "CREATE TABLE b(p, q)",
        "CREATE VIEW v AS SELECT x FROM a",
        "ROLLBACK",
        "BEGIN",
        "CREATE TABLE c(r)",
        "SAVEPOINT s",
        "CREATE INDEX cr ON c(r)",
        "ROLLBACK TO s",
        "CREATE TRIGGER tg AFTER INSERT ON a BEGIN SELECT 1; END",
        "COMMIT",
        "ALTER TABLE c RENAME TO d",
        "ALTER TABLE d ADD COLUMN s INTEGER",
        "CREATE TABLE e(i INTEGER PRIMARY KEY AUTOINCREMENT, j)",
        "DROP INDEX ay",
        "DROP TABLE d",
    ];
    // The committed listing, as the other connection must see it between transactions.
    let mut committed: Vec<&str> = vec!["CREATE TABLE a(x INTEGER PRIMARY KEY, y TEXT)"];
    let mut pending: Vec<&str> = Vec::new();
    let mut in_txn = false;
    for step in steps {
        ours.execute_batch(step).unwrap();
        lite.execute_batch(step).unwrap();
        same_rows(&mut ours, &lite, LISTING, false);
        match *step {
            "BEGIN" => in_txn = true,
            "COMMIT" => {
                in_txn = false;
                committed.append(&mut pending);
            }
            "ROLLBACK" => {
                in_txn = false;
                pending.clear();
            }
            _ if in_txn => pending.push(step),
            _ => committed.push(step),
        }
        if !in_txn {
            // Replays what SQLite's second database should hold: the committed steps,
            // with the savepoint's rolled-back index left out.
            let replay: Vec<&str> = committed
                .iter()
                .copied()
                .filter(|s| !s.starts_with("SAVEPOINT") && !s.starts_with("ROLLBACK TO"))
                .filter(|s| *s != "CREATE INDEX cr ON c(r)")
                .collect();
            let fresh = rusqlite::Connection::open_in_memory().unwrap();
            fresh.execute_batch(&replay.join(";")).unwrap();
            same_rows(&mut other, &fresh, LISTING, false);
        }
    }
    drop(lite_other);
}

#[test]
fn a_schema_change_that_fails_inside_a_transaction_leaves_the_schema_as_it_was() {
    let (_db, mut ours, lite) =
        both("CREATE TABLE a(x, y); INSERT INTO a VALUES (1, 'p'), (2, 'p'); BEGIN");
    same_rows(&mut ours, &lite, LISTING, false);
    for bad in [
        "CREATE UNIQUE INDEX u ON a(y)",
        "CREATE TABLE b(p, q, p)",
        "CREATE VIEW a AS SELECT 1",
        "CREATE TABLE c AS SELECT x, abs(-9223372036854775807 - 1) FROM a",
    ] {
        assert!(ours.execute_batch(bad).is_err(), "{bad}");
        assert!(lite.execute_batch(bad).is_err(), "{bad}");
        same_rows(&mut ours, &lite, LISTING, false);
        same_rows(&mut ours, &lite, "SELECT * FROM a ORDER BY x", false);
    }
    for sql in ["CREATE INDEX ok ON a(y)", "COMMIT"] {
        ours.execute_batch(sql).unwrap();
        lite.execute_batch(sql).unwrap();
    }
    same_rows(&mut ours, &lite, LISTING, false);
}

/// CREATE TABLE ... AS SELECT writes its own CREATE text: names that are not plain
/// identifiers are quoted there, as SQLite quotes them, so the text reads back (the
/// database opens again with it) and lists as SQLite's does.
#[test]
fn create_table_as_select_quotes_the_names_it_writes() {
    let sql = "CREATE TABLE src(a INTEGER, \"b c\" TEXT); INSERT INTO src VALUES (1, 'x');
        CREATE TABLE \"my t\" AS SELECT 1, a + 1, \"b c\", a AS \"select\", a AS 'q\"t', a AS é FROM src;
        CREATE TABLE t2 AS SELECT * FROM \"my t\"";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let lite = rusqlite::Connection::open_in_memory().unwrap();
    lite.execute_batch(sql).unwrap();
    {
        let db = beechdb_sql::Database::open_file(&path).unwrap();
        let mut ours = db.connect();
        ours.execute_batch(sql).unwrap();
        same_rows(&mut ours, &lite, LISTING, false);
        drop(ours);
        db.close().unwrap();
    }
    let db = beechdb_sql::Database::open_file(&path).unwrap();
    let mut ours = db.connect();
    same_rows(&mut ours, &lite, LISTING, false);
    same_rows(&mut ours, &lite, "SELECT * FROM \"my t\"", false);
    same_rows(&mut ours, &lite, "SELECT * FROM t2", false);
}
