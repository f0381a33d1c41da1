//! A prepared statement keeps its plans between runs (see `exec::PlanCache`); a change of
//! schema — by this connection, inside its transaction, or by another connection — must
//! make it plan again, so that it never reads through a dropped index, misses a new
//! column, or names a table that is gone. A table read in rowid order decodes only the
//! columns a statement reads, those its conditions read first: checked against SQLite for
//! the shapes that decide which (bare columns of aggregates, subqueries, added columns).

mod common;

use beechdb_sql::{Database, Value};

/// A database whose table `t(id INTEGER PRIMARY KEY, k INTEGER)`, indexed on `k`, holds
/// the rows `values`; and a connection to it.
fn indexed_table(values: &str) -> (Database, beechdb_sql::Connection) {
    let db = Database::open_in_memory().unwrap();
    let mut c = db.connect();
    c.execute_batch(&format!(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER);
         INSERT INTO t VALUES {values};
         CREATE INDEX t_k ON t(k);"
    ))
    .unwrap();
    (db, c)
}

fn ints(rows: &[Vec<Value>]) -> Vec<i64> {
    rows.iter().map(|r| r[0].as_i64()).collect()
}

#[test]
fn a_prepared_select_sees_schema_changes_between_runs() {
    let (db, mut c) = indexed_table("(1, 10), (2, 20), (3, 20)");
    let by_k = c
        .prepare("SELECT id FROM t WHERE k = ?1 ORDER BY id")
        .unwrap();
    let star = c.prepare("SELECT * FROM t WHERE id = ?1").unwrap();
    let plan = c
        .prepare("EXPLAIN QUERY PLAN SELECT id FROM t WHERE k = ?1")
        .unwrap();
    let detail = |c: &mut beechdb_sql::Connection| {
        c.run(&plan, &[Value::Integer(20)]).unwrap().rows[0][3].to_text()
    };
    assert_eq!(ints(&c.run(&by_k, &[20.into()]).unwrap().rows), [2, 3]);
    assert!(detail(&mut c).contains("USING COVERING INDEX t_k"));
    assert_eq!(*c.run(&star, &[1.into()]).unwrap().columns, ["id", "k"]);

    // Dropped index: the next run scans, and still finds the rows.
    c.execute_batch("DROP INDEX t_k").unwrap();
    assert_eq!(detail(&mut c), "SCAN t");
    assert_eq!(ints(&c.run(&by_k, &[20.into()]).unwrap().rows), [2, 3]);

    // A new column shows in `*`.
    c.execute_batch("ALTER TABLE t ADD COLUMN v TEXT DEFAULT 'x'")
        .unwrap();
    let r = c.run(&star, &[1.into()]).unwrap();
    assert_eq!(*r.columns, ["id", "k", "v"]);
    assert_eq!(r.rows[0][2], Value::from("x"));

    // Inside one transaction: an index created, then dropped, between runs.
    c.execute_batch("BEGIN; CREATE INDEX t_k2 ON t(k);")
        .unwrap();
    assert!(detail(&mut c).contains("USING COVERING INDEX t_k2"));
    assert_eq!(ints(&c.run(&by_k, &[20.into()]).unwrap().rows), [2, 3]);
    c.execute_batch("DROP INDEX t_k2; INSERT INTO t(id, k) VALUES (4, 20);")
        .unwrap();
    assert_eq!(detail(&mut c), "SCAN t");
    assert_eq!(ints(&c.run(&by_k, &[20.into()]).unwrap().rows), [2, 3, 4]);
    c.execute_batch("COMMIT").unwrap();

    // Another connection replaces the table: the next run reads the new one.
    let mut other = db.connect();
    other
        .execute_batch(
            "DROP TABLE t; CREATE TABLE t(k INTEGER, id INTEGER PRIMARY KEY);
             INSERT INTO t VALUES (20, 7);",
        )
        .unwrap();
    assert_eq!(ints(&c.run(&by_k, &[20.into()]).unwrap().rows), [7]);
    assert_eq!(*c.run(&star, &[7.into()]).unwrap().columns, ["k", "id"]);
    other.execute_batch("DROP TABLE t").unwrap();
    let err = c.run(&by_k, &[20.into()]).unwrap_err();
    assert!(err.to_string().contains("no such table: t"), "{err}");
}

#[test]
fn prepared_update_and_delete_follow_schema_changes() {
    let (_db, mut c) = indexed_table("(1, 1), (2, 2), (3, 3), (4, 4)");
    let upd = c.prepare("UPDATE t SET k = k + 100 WHERE k = ?1").unwrap();
    let del = c.prepare("DELETE FROM t WHERE k = ?1").unwrap();
    assert_eq!(c.run(&upd, &[1.into()]).map(|_| c.changes()).unwrap(), 1);
    assert_eq!(c.run(&del, &[2.into()]).map(|_| c.changes()).unwrap(), 1);
    c.execute_batch("DROP INDEX t_k").unwrap();
    assert_eq!(c.run(&upd, &[3.into()]).map(|_| c.changes()).unwrap(), 1);
    assert_eq!(c.run(&del, &[4.into()]).map(|_| c.changes()).unwrap(), 1);
    let rows = c
        .query("SELECT id, k FROM t ORDER BY id", &[])
        .unwrap()
        .rows;
    assert_eq!(
        rows,
        [
            vec![Value::Integer(1), Value::Integer(101)],
            vec![Value::Integer(3), Value::Integer(103)]
        ]
    );
}

#[test]
fn a_common_table_expression_hiding_a_table_keeps_its_own_rows() {
    let db = Database::open_in_memory().unwrap();
    let mut c = db.connect();
    c.execute_batch("CREATE TABLE x(a); INSERT INTO x VALUES (1);")
        .unwrap();
    let cte = c
        .prepare("WITH x(a) AS (VALUES (5)) SELECT a FROM x")
        .unwrap();
    let plain = c.prepare("SELECT a FROM x").unwrap();
    for _ in 0..2 {
        assert_eq!(ints(&c.run(&cte, &[]).unwrap().rows), [5]);
        assert_eq!(ints(&c.run(&plain, &[]).unwrap().rows), [1]);
    }
}

#[test]
fn columns_decoded_lazily_give_sqlite_answers() {
    let setup = "CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER, b TEXT, c REAL, d BLOB);
                 CREATE TABLE u(x INTEGER, y TEXT);
                 INSERT INTO u VALUES (1, 'one'), (2, 'two'), (3, 'three');";
    let (_db, mut ours, lite) = common::both(setup);
    let mut fill = String::from("INSERT INTO t(a, b, c, d) VALUES ");
    for i in 0..300 {
        let sep = if i == 0 { "" } else { "," };
        fill += &format!(
            "{sep}({}, 'text-{}', {}.5, X'{:02x}')",
            i % 7,
            i % 13,
            i % 5,
            i % 256
        );
    }
    ours.execute_batch(&fill).unwrap();
    lite.execute_batch(&fill).unwrap();
    let queries = [
        "SELECT b FROM t WHERE a = 3",
        "SELECT id, d FROM t WHERE c > 2 AND a < 2",
        "SELECT * FROM t WHERE b LIKE 'text-1%' AND id BETWEEN 10 AND 200",
        "SELECT a, count(*), max(c) FROM t GROUP BY a",
        "SELECT b, max(id) FROM t WHERE a = 1",
        "SELECT a, sum(c) FROM t GROUP BY a HAVING b <> 'x' AND count(*) > 3",
        "SELECT count(*), sum(a) FROM t WHERE id BETWEEN 50 AND 149",
        "SELECT id FROM t WHERE a = (SELECT x FROM u WHERE y = 'two')",
        "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.x = t.a AND u.y > t.b)",
        "SELECT (SELECT y FROM u WHERE x = t.a), c FROM t WHERE id < 20",
        "SELECT a, b FROM t ORDER BY c DESC, id LIMIT 7",
        "SELECT DISTINCT a, c FROM t WHERE id > 250",
        "SELECT t.b, u.y FROM t JOIN u ON u.x = t.a WHERE t.id < 30",
    ];
    for q in &queries {
        common::same_rows(&mut ours, &lite, q, true);
    }
    // Rows stored before a column was added read its default, decoded lazily or not.
    let add = "ALTER TABLE t ADD COLUMN e TEXT DEFAULT 'added'";
    ours.execute_batch(add).unwrap();
    lite.execute_batch(add).unwrap();
    for q in [
        "SELECT e, b FROM t WHERE a = 2",
        "SELECT id FROM t WHERE e = 'added' AND a = 4",
    ] {
        common::same_rows(&mut ours, &lite, q, true);
    }
}

#[test]
fn a_transaction_begun_after_another_connection_replaced_a_table_reads_the_new_one() {
    let db = Database::open_in_memory().unwrap();
    let (mut c, mut other) = (db.connect(), db.connect());
    c.execute_batch("CREATE TABLE t(a); INSERT INTO t VALUES (1);")
        .unwrap();
    // An auto-commit statement leaves the connection holding t's database handle.
    assert_eq!(ints(&c.query("SELECT a FROM t", &[]).unwrap().rows), [1]);
    other
        .execute_batch("DROP TABLE t; CREATE TABLE t(a); INSERT INTO t VALUES (2);")
        .unwrap();
    c.execute_batch("BEGIN").unwrap();
    assert_eq!(ints(&c.query("SELECT a FROM t", &[]).unwrap().rows), [2]);
    c.execute_batch("INSERT INTO t VALUES (3); COMMIT").unwrap();
    assert_eq!(
        ints(&other.query("SELECT a FROM t ORDER BY a", &[]).unwrap().rows),
        [2, 3]
    );
}
