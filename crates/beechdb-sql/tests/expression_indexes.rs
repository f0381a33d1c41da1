//! Indexes on expressions: kept up to date through every change, used for equalities of
//! the indexed expression, unique ones enforced; checked against SQLite (rusqlite, bundled)
//! statement by statement, and against a scan of the same table.

mod common;

use beechdb_sql::Value;

#[test]
fn expression_indexes_match_sqlite() {
    let (_db, mut ours, lite) = common::both(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, a INT, b INT);
         CREATE INDEX t_lower ON t(lower(name));
         CREATE UNIQUE INDEX t_sum ON t(a + b);
         CREATE INDEX t_mixed ON t(a, abs(b) DESC);
         INSERT INTO t VALUES(1, 'Bob', 1, 2), (2, 'BOB', 2, 2), (3, 'alice', 5, -4), (4, NULL, NULL, 3);
         CREATE TABLE u(k TEXT); INSERT INTO u VALUES('bob'), ('alice'), ('carol');",
    );
    let script = [
        "SELECT id FROM t WHERE lower(name) = 'bob' ORDER BY id",
        "SELECT id FROM t WHERE LOWER(t.name) = 'alice'",
        "SELECT id, a + b FROM t WHERE a + b = 4",
        "SELECT u.k, t.id FROM u JOIN t ON lower(t.name) = u.k ORDER BY 1, 2",
        "UPDATE t SET name = 'Carol' WHERE id = 2",
        "SELECT id FROM t WHERE lower(name) = 'bob'",
        "SELECT id FROM t WHERE lower(name) = 'carol'",
        "DELETE FROM t WHERE id = 1",
        "SELECT id FROM t WHERE lower(name) = 'bob'",
        "INSERT INTO t VALUES(5, 'x', 3, 1)",
        "INSERT INTO t VALUES(6, 'y', 10, 0)",
        "INSERT OR REPLACE INTO t VALUES(7, 'z', 2, 2)",
        "SELECT * FROM t ORDER BY id",
        "UPDATE t SET b = b + 1 WHERE id = 7",
        "SELECT id FROM t WHERE a + b = 5",
        "PRAGMA index_info(t_lower)",
        "PRAGMA index_info(t_mixed)",
        "ALTER TABLE t RENAME COLUMN name TO nm",
        "SELECT sql FROM sqlite_schema WHERE name = 't_lower'",
        "SELECT id FROM t WHERE lower(nm) = 'carol'",
        "ALTER TABLE t DROP COLUMN nm",
        "CREATE INDEX bad ON t(random())",
        "CREATE INDEX bad ON t((SELECT 1))",
        "CREATE INDEX bad ON t(nosuch + 1)",
        "CREATE INDEX bad ON t(count(a))",
    ];
    for sql in script {
        common::same_outcome(&mut ours, &lite, sql);
    }
    assert_eq!(
        common::plan_of(&mut ours, "SELECT id FROM t WHERE lower(nm) = ?"),
        ["SEARCH t USING INDEX t_lower (<expr>=?)"]
    );
    // A different expression, or one compared with another collation, is not the index's.
    for other in [
        "lower(nm) || '' = ?",
        "lower(nm) = ? COLLATE nocase",
        "upper(nm) = ?",
    ] {
        assert_eq!(
            common::plan_of(&mut ours, &format!("SELECT id FROM t WHERE {other}")),
            ["SCAN t"]
        );
    }
}

#[test]
fn lookups_through_an_expression_index_find_what_a_scan_finds() {
    let db = beechdb_sql::Database::open_in_memory().unwrap();
    let mut c = db.connect();
    c.execute_batch(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v); CREATE INDEX t_mod ON t(v % 7);
         CREATE INDEX t_text ON t(substr(v, 1, 2));",
    )
    .unwrap();
    c.execute("BEGIN", &[]).unwrap();
    // Integers, reals, text and NULLs, changed and deleted along the way.
    for i in 0..600i64 {
        let v = match i % 4 {
            0 => Value::Integer(i),
            1 => Value::Real(i as f64 + 0.5),
            2 => Value::Text(format!("{}", i * 3).into()),
            _ => Value::Null,
        };
        c.execute("INSERT INTO t VALUES(?, ?)", &[Value::Integer(i), v])
            .unwrap();
    }
    c.execute("UPDATE t SET v = v + 1 WHERE id % 5 = 0", &[])
        .unwrap();
    c.execute("DELETE FROM t WHERE id % 11 = 0", &[]).unwrap();
    c.execute("COMMIT", &[]).unwrap();
    let ids = |c: &mut beechdb_sql::Connection, sql: &str, p: Value| {
        c.query(sql, &[p])
            .unwrap()
            .rows
            .into_iter()
            .map(|r| r[0].as_i64())
            .collect::<Vec<_>>()
    };
    for probe in [
        Value::Integer(3),
        Value::Real(3.0),
        Value::Real(0.5),
        Value::Text("3".into()),
        Value::Null,
    ] {
        let indexed = ids(
            &mut c,
            "SELECT id FROM t WHERE v % 7 = ? ORDER BY id",
            probe.clone(),
        );
        let scanned = ids(
            &mut c,
            "SELECT id FROM t WHERE +(v % 7) = ? ORDER BY id",
            probe.clone(),
        );
        assert_eq!(indexed, scanned, "{probe:?}");
    }
    for probe in ["12", "1", "30"] {
        let p = Value::Text(probe.into());
        let indexed = ids(
            &mut c,
            "SELECT id FROM t WHERE substr(v, 1, 2) = ? ORDER BY id",
            p.clone(),
        );
        let scanned = ids(
            &mut c,
            "SELECT id FROM t WHERE +substr(v, 1, 2) = ? ORDER BY id",
            p,
        );
        assert!(!scanned.is_empty() || probe == "1");
        assert_eq!(indexed, scanned, "{probe}");
    }
    assert_eq!(
        common::plan_of(&mut c, "SELECT id FROM t WHERE v % 7 = ?"),
        ["SEARCH t USING INDEX t_mod (<expr>=?)"]
    );
    assert_eq!(
        c.query("PRAGMA integrity_check", &[]).unwrap().rows,
        vec![vec![Value::Text("ok".into())]]
    );
}
