//! Partial indexes (`CREATE INDEX ... WHERE cond`): only rows where the condition holds have
//! an entry, kept so through every change; a unique one is enforced among those rows only;
//! a query reads through one only when its conditions imply the index's (each term of the
//! index's condition is one of the query's, or `c IS NOT NULL` beside a comparison of `c`),
//! and otherwise reads every row. Checked against SQLite (rusqlite, bundled) statement by
//! statement, and across a reopen.

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

/// Which queries read through a partial index (EXPLAIN QUERY PLAN), and that every query
/// returns what SQLite's does, through the index or not.
#[test]
fn a_partial_index_is_read_when_the_query_implies_its_condition() {
    let mut setup = String::from(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, email TEXT, deleted INT, n INT);
         CREATE TABLE u(e TEXT);
         INSERT INTO u VALUES ('m3@x'), ('m4@x'), ('nobody');",
    );
    for i in 0..200 {
        let n = if i % 7 == 0 {
            "NULL".to_string()
        } else {
            (i % 50).to_string()
        };
        setup.push_str(&format!(
            "INSERT INTO t VALUES({i}, 'm{}@x', {}, {n});",
            i % 20,
            (i % 3 == 0) as i32
        ));
    }
    setup.push_str(
        "CREATE INDEX live_email ON t(email) WHERE deleted = 0;
         CREATE INDEX known_n ON t(n) WHERE n IS NOT NULL;
         CREATE INDEX big_n ON t(n) WHERE n > 40 AND deleted = 0;
         CREATE TABLE s(id INTEGER PRIMARY KEY, email TEXT, gone INT);
         INSERT INTO s VALUES (1, 'm3@x', NULL), (2, 'm4@x', 1), (3, 'm4@x', 2);
         CREATE INDEX s_live ON s(email) WHERE gone IS NULL;",
    );
    let (_db, mut ours, lite) = common::both(&setup);
    let cases: &[(&str, Option<&str>)] = &[
        ("SELECT id FROM t WHERE email = 'm3@x' AND deleted = 0 ORDER BY id", Some("live_email")),
        ("SELECT id FROM t WHERE deleted = 0 AND email = 'm4@x' ORDER BY id", Some("live_email")),
        ("SELECT id FROM t WHERE email = 'm3@x' ORDER BY id", None),
        ("SELECT id FROM t WHERE email = 'm3@x' AND deleted = 1 ORDER BY id", None),
        ("SELECT id FROM t WHERE email = 'm3@x' AND (deleted = 0 OR n = 1) ORDER BY id", None),
        ("SELECT id FROM t WHERE n = 5 ORDER BY id", Some("known_n")),
        ("SELECT id FROM t WHERE n > 45 ORDER BY id", Some("known_n")),
        ("SELECT id FROM t WHERE n BETWEEN 3 AND 4 ORDER BY id", Some("known_n")),
        ("SELECT id FROM t WHERE n IS NULL ORDER BY id", None),
        ("SELECT id FROM t WHERE n IS 5 ORDER BY id", None),
        ("SELECT id FROM t WHERE n = 45 AND n > 40 AND deleted = 0 ORDER BY id", Some("_n")),
        ("SELECT count(*) FROM u JOIN t ON t.email = u.e WHERE t.deleted = 0", Some("live_email")),
        ("SELECT u.e, t.id FROM u LEFT JOIN t ON t.email = u.e AND t.deleted = 0 ORDER BY 1, 2", Some("live_email")),
        // Only a LEFT JOIN's ON terms lead to a partial index: a WHERE term may pass the row
        // of NULLs the join makes up (`IS NULL`), which the index would make up where the
        // table has a match. (SQLite turns the join into an inner one when a WHERE term
        // rejects that row, and then uses the index: BeechDB does not, and scans.)
        ("SELECT u.e, t.id FROM u LEFT JOIN t ON t.email = u.e WHERE t.deleted = 0 ORDER BY 1, 2", None),
        ("SELECT u.e, s.id FROM u LEFT JOIN s ON s.email = u.e WHERE s.gone IS NULL ORDER BY 1, 2", None),
        ("SELECT u.e, s.id FROM u LEFT JOIN s ON s.email = u.e AND s.gone IS NULL ORDER BY 1, 2", Some("s_live")),
    ];
    for &(sql, index) in cases {
        common::same_outcome(&mut ours, &lite, sql);
        let plan = common::plan_of(&mut ours, sql).join(" | ");
        match index {
            Some(name) => assert!(plan.contains(name), "{sql}: {plan}"),
            None => assert!(
                !["live_email", "known_n", "big_n", "s_live"]
                    .iter()
                    .any(|i| plan.contains(i)),
                "{sql}: {plan}"
            ),
        }
    }
}

/// An index built over rows already there (read a row at a time, written in key order): a
/// UNIQUE one refuses a repeated key and takes repeated NULLs, as SQLite's; REINDEX builds
/// it again; an expression index and a descending one find the same rows.
#[test]
fn indexes_built_over_existing_rows_match_sqlite() {
    let mut setup = String::from("CREATE TABLE b(id INTEGER PRIMARY KEY, a, c TEXT, d);");
    for i in 0..300 {
        let a = if i % 7 == 0 {
            "NULL".to_string()
        } else {
            format!("{}", i * 3)
        };
        setup += &format!("INSERT INTO b VALUES ({i}, {a}, 'c{}', {});", i % 17, i % 5);
    }
    let (_db, mut ours, lite) = common::both(&setup);
    for sql in [
        "CREATE UNIQUE INDEX b_a ON b(a)",
        "CREATE UNIQUE INDEX b_c ON b(c)",
        "CREATE UNIQUE INDEX b_cd ON b(c, d, id)",
        "CREATE INDEX b_d ON b(d DESC, c)",
        "CREATE INDEX b_e ON b(d * 2 + length(c))",
        "REINDEX",
        "SELECT id FROM b WHERE a = 30",
        "SELECT count(*) FROM b WHERE a IS NULL",
        "SELECT id FROM b WHERE d = 3 ORDER BY d DESC, c, id LIMIT 8",
        "SELECT count(*) FROM b WHERE d * 2 + length(c) = 7",
        "INSERT INTO b VALUES (1000, 30, 'x', 0)",
        "INSERT INTO b VALUES (1001, NULL, 'x', 0)",
        "PRAGMA index_list(b)",
        "PRAGMA integrity_check",
    ] {
        common::same_outcome(&mut ours, &lite, sql);
    }
}
