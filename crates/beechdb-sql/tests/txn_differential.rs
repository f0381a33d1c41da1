//! Differential test of transactions: random runs of writes, schema changes, transactions
//! and savepoints (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, RELEASE, ROLLBACK TO), some of them
//! failing (constraints, missing objects, misuse), run on BeechDB and on SQLite (rusqlite,
//! bundled), each as the C library runs one (prepared, described, run). After every
//! statement both must have succeeded or both failed, and hold the same rows, the same
//! schema and the same counts of changes; a second connection of each, between transactions, must
//! see the same committed state. `BEECH_TXN_DIFF_SEEDS` sets the number of runs (default
//! 150).

mod common;

use beechdb_sql::{Connection, Database};
use common::{our_rows, sqlite_rows};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn seeds() -> u64 {
    std::env::var("BEECH_TXN_DIFF_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150)
}

const SETUP: &str = "CREATE TABLE t1(a INTEGER PRIMARY KEY, b, c);
    CREATE TABLE t2(x TEXT UNIQUE, y INTEGER NOT NULL);
    CREATE TABLE t4(id INTEGER PRIMARY KEY, v)";

/// What is compared after each statement: every table's rows in a fixed order, and the
/// schema (a missing table compares as the same error on both).
const CHECKS: [&str; 6] = [
    "SELECT changes(), total_changes()",
    "SELECT * FROM t1 ORDER BY a",
    "SELECT * FROM t2 ORDER BY x",
    "SELECT * FROM t3 ORDER BY rowid",
    "SELECT * FROM t4 ORDER BY id",
    "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY name",
];

fn statement(rng: &mut StdRng, savepoints: &mut Vec<String>) -> String {
    let k = rng.gen_range(0..12);
    let v = rng.gen_range(-3..40);
    match rng.gen_range(0..24) {
        0 | 1 => format!("INSERT INTO t1 VALUES ({k}, {v}, 'c{}')", v % 5),
        // A new rowid: one past the largest, also after inserts rolled back (t4 has no
        // deletes: SQLite takes a deleted largest rowid again, BeechDB does not).
        2 => format!("INSERT INTO t4(v) VALUES ({v}), ({k})"),
        3 => format!("INSERT OR REPLACE INTO t1 VALUES ({k}, {v}, NULL)"),
        4 => format!("INSERT OR IGNORE INTO t1 VALUES ({k}, {v}, {v})"),
        5 | 6 => format!("INSERT INTO t2 VALUES ('k{k}', {v})"),
        7 => format!("INSERT INTO t2 VALUES ('k{k}', NULL)"),
        8 => format!("UPDATE t1 SET b = b + {v} WHERE a % 3 = {}", k % 3),
        9 => format!("UPDATE t2 SET x = 'k{v}' WHERE y > {k}"),
        10 => format!("DELETE FROM t1 WHERE b < {v}"),
        11 => format!("DELETE FROM t2 WHERE x = 'k{k}'"),
        12 => format!("CREATE INDEX IF NOT EXISTS i{} ON t1(b)", k % 3),
        13 => format!("DROP INDEX IF EXISTS i{}", k % 3),
        14 => "CREATE TABLE IF NOT EXISTS t3(p, q)".into(),
        15 => "DROP TABLE IF EXISTS t3".into(),
        16 => format!("INSERT INTO t3 VALUES ({k}, {v})"),
        17 => match rng.gen_range(0..3) {
            0 => "CREATE UNIQUE INDEX IF NOT EXISTS u2 ON t2(y)".into(),
            1 => "ALTER TABLE t3 ADD COLUMN r DEFAULT 7".into(),
            _ => "CREATE INDEX IF NOT EXISTS i3 ON t3(q)".into(),
        },
        18 => "BEGIN".into(),
        19 => ["COMMIT", "ROLLBACK"][rng.gen_range(0..2)].into(),
        20 => {
            let name = format!("s{}", rng.gen_range(0..3));
            savepoints.push(name.clone());
            format!("SAVEPOINT {name}")
        }
        21 | 22 => {
            let name = match savepoints.is_empty() || rng.gen_ratio(1, 8) {
                true => format!("s{}", rng.gen_range(0..3)),
                false => savepoints[rng.gen_range(0..savepoints.len())].clone(),
            };
            match rng.gen_bool(0.5) {
                true => format!("ROLLBACK TO {name}"),
                false => format!("RELEASE {name}"),
            }
        }
        _ => "INSERT INTO t1 SELECT a + 100, b, c FROM t1 WHERE a < 3".into(),
    }
}

/// The rows of `sql` on each side, or `None` where it fails.
fn rows_of(
    ours: &mut Connection,
    lite: &rusqlite::Connection,
    sql: &str,
) -> [Option<Vec<Vec<String>>>; 2] {
    let mine = ours.query(sql, &[]).ok().map(|_| our_rows(ours, sql));
    let theirs = lite.prepare(sql).ok().map(|_| sqlite_rows(lite, sql));
    [mine, theirs]
}

fn compare(ours: &mut Connection, lite: &rusqlite::Connection, context: &str) {
    for check in CHECKS {
        let [mine, theirs] = rows_of(ours, lite, check);
        assert_eq!(mine, theirs, "{check}, after:\n{context}");
    }
}

fn run(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lite.db");
    let db = Database::open_in_memory().unwrap();
    let (mut ours, mut ours_other) = (db.connect(), db.connect());
    let lite = rusqlite::Connection::open(&path).unwrap();
    let lite_other = rusqlite::Connection::open(&path).unwrap();
    ours.execute_batch(SETUP).unwrap();
    lite.execute_batch(SETUP).unwrap();
    let mut done = Vec::new();
    let mut savepoints = Vec::new();
    for _ in 0..60 {
        let sql = statement(&mut rng, &mut savepoints);
        // As the C library runs a statement: unknown tables and columns fail the prepare.
        let mine = ours
            .prepare(&sql)
            .and_then(|stmt| ours.describe(&stmt).map(|_| stmt))
            .and_then(|stmt| ours.run(&stmt, &[]).map(drop));
        let theirs = lite.execute_batch(&sql);
        done.push(format!(
            "{sql};  -- {}",
            match &mine {
                Ok(()) => "ok".to_string(),
                Err(e) => e.to_string(),
            }
        ));
        let context = format!("seed {seed}:\n{}", done.join("\n"));
        assert_eq!(
            mine.is_ok(),
            theirs.is_ok(),
            "SQLite: {theirs:?}\n{context}"
        );
        compare(&mut ours, &lite, &context);
        if lite.is_autocommit() {
            savepoints.clear();
            compare(&mut ours_other, &lite_other, &context);
        }
    }
}

#[test]
fn transactions_and_savepoints_agree_with_sqlite() {
    for seed in 0..seeds() {
        run(seed);
    }
}
