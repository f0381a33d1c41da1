//! Generated columns (`GENERATED ALWAYS AS (...) VIRTUAL | STORED`, SQLite 3.31's), checked
//! against SQLite (rusqlite, bundled) statement by statement: values after INSERT, UPDATE,
//! upsert and REPLACE, columns that read other generated columns in any order, affinity,
//! constraints and indexes on them, the pragmas, ALTER TABLE, and SQLite's errors.

mod common;

#[test]
fn generated_columns_match_sqlite() {
    let (_db, mut ours, lite) = common::both(
        "CREATE TABLE t(a INTEGER PRIMARY KEY, b, c AS (a * 10 + b) STORED,
           d TEXT GENERATED ALWAYS AS (c || 'x') VIRTUAL, e AS (upper(b)));
         CREATE TABLE u(a, c AS (d + 1), d AS (a * 2));
         CREATE INDEX u_c ON u(c);
         CREATE TABLE v(a, b AS (a + 1) NOT NULL, c AS (a * 2) CHECK (c < 100) UNIQUE);
         CREATE TABLE w(a, n INTEGER AS ('12'), m AS (a COLLATE NOCASE), k TEXT COLLATE NOCASE AS (a));
         CREATE TABLE log(x);
         CREATE TRIGGER t_ins AFTER INSERT ON t BEGIN INSERT INTO log VALUES (new.c || new.d); END;",
    );
    let script = [
        "INSERT INTO t VALUES (1, 2)",
        "INSERT INTO t(b) VALUES (7)",
        "INSERT INTO t(b, a) VALUES ('q', 9)",
        "INSERT INTO t DEFAULT VALUES",
        "SELECT * FROM t ORDER BY a",
        "SELECT typeof(c), typeof(d), typeof(e) FROM t ORDER BY a",
        "SELECT * FROM log ORDER BY rowid",
        "UPDATE t SET b = b + 1 WHERE a < 5 RETURNING *",
        "UPDATE t SET a = a + 100 WHERE a = 1 RETURNING *",
        "INSERT INTO t SELECT a + 1000, b FROM t WHERE b IS NOT NULL",
        "SELECT * FROM t ORDER BY a",
        "INSERT INTO u VALUES (5), (1), (NULL)",
        "INSERT INTO u(a) VALUES (2) RETURNING *",
        "SELECT * FROM u ORDER BY a",
        "SELECT * FROM u WHERE c = 11",
        "SELECT a FROM u WHERE c > 3 ORDER BY c",
        "INSERT INTO v(a) VALUES (3)",
        "INSERT INTO v(a) VALUES (4) ON CONFLICT(c) DO UPDATE SET a = excluded.a + 100",
        "INSERT INTO v(a) VALUES (3) ON CONFLICT(c) DO UPDATE SET a = excluded.c + 10 RETURNING *",
        "INSERT OR REPLACE INTO v(a) VALUES (4)",
        "INSERT OR IGNORE INTO v(a) VALUES (60)",
        "SELECT * FROM v ORDER BY a",
        "INSERT INTO w(a) VALUES ('Abc'), (5)",
        "SELECT n, typeof(n), m, k FROM w ORDER BY a",
        "SELECT a FROM w WHERE k = 'abc'",
        "SELECT a FROM w WHERE m = 'abc'",
        "PRAGMA table_info(t)",
        "PRAGMA table_xinfo(t)",
        "PRAGMA table_xinfo(u)",
        "ALTER TABLE v ADD COLUMN g AS (a * 3)",
        "SELECT * FROM v ORDER BY a",
        "INSERT INTO v(a) VALUES (7)",
        "SELECT * FROM v ORDER BY a",
        "ALTER TABLE v DROP COLUMN g",
        "ALTER TABLE v RENAME COLUMN a TO z",
        "SELECT sql FROM sqlite_schema WHERE name = 'v'",
        "INSERT INTO v(z) VALUES (8)",
        "SELECT * FROM v ORDER BY z",
    ];
    for sql in script {
        common::same_rows(&mut ours, &lite, sql, false);
    }
    common::same_names(&mut ours, &lite, "SELECT * FROM t");
    for bad in [
        "INSERT INTO t VALUES (1, 2, 3)",
        "INSERT INTO t(a, b, c) VALUES (5, 6, 7)",
        "UPDATE t SET c = 1",
        "UPDATE t SET (b, d) = (1, 2)",
        "INSERT INTO v(z) VALUES (NULL)",
        "INSERT INTO v(z) VALUES (60)",
        "INSERT INTO v(z) VALUES (3)",
        "CREATE TABLE loop1(a, c AS (c + 1))",
        "CREATE TABLE loop2(a, c AS (d + 1), d AS (c))",
        "CREATE TABLE loop3(a, c AS (d + 1), d AS (e), e AS (c * a))",
        "CREATE TABLE x(a, b AS (a) DEFAULT 3)",
        "CREATE TABLE x(a AS (1) PRIMARY KEY, b)",
        "CREATE TABLE x(a, b AS (1), PRIMARY KEY (b))",
        "CREATE TABLE x(a AS (b), b AS (a))",
        "CREATE TABLE x(a, b AS (random()))",
        "CREATE TABLE x(a, b AS ((SELECT 1)))",
        "CREATE TABLE x(a, b AS (sum(a)))",
        "CREATE TABLE x(a, b AS (rowid))",
        "CREATE TABLE x(a, b AS (nosuch))",
        "CREATE TABLE x(a, b AS (?))",
        "CREATE TABLE x(a, b GENERATED ALWAYS AS (a) foo)",
        "ALTER TABLE v ADD COLUMN s AS (z) STORED",
        "ALTER TABLE v ADD COLUMN s AS (nosuch)",
        "ALTER TABLE v DROP COLUMN z",
        "ALTER TABLE v DROP COLUMN c",
    ] {
        common::same_outcome(&mut ours, &lite, bad);
    }
}

/// The values survive a reopen (they are stored, and the schema is read back from its
/// text), and an ADD COLUMN's values are computed for rows written before it.
#[test]
fn generated_values_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.db");
    {
        let db = beechdb_sql::Database::open(&path).unwrap();
        let mut c = db.connect();
        c.execute_batch(
            "CREATE TABLE t(a, b AS (a * 2), c AS (b + 1) STORED);
             INSERT INTO t(a) VALUES (1), (2);
             ALTER TABLE t ADD COLUMN d AS (c * 10);",
        )
        .unwrap();
    }
    let db = beechdb_sql::Database::open(&path).unwrap();
    let mut c = db.connect();
    c.execute_batch("INSERT INTO t(a) VALUES (3)").unwrap();
    let rows = common::our_rows(&mut c, "SELECT a, b, c, d FROM t ORDER BY a");
    let want: Vec<Vec<String>> = [[1, 2, 3, 30], [2, 4, 5, 50], [3, 6, 7, 70]]
        .iter()
        .map(|r| r.iter().map(|v| format!("Integer({v})")).collect())
        .collect();
    assert_eq!(rows, want);
}
