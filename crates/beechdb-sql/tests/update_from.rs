//! `UPDATE ... FROM` and row values in SET, checked against SQLite (rusqlite, bundled)
//! statement by statement.

mod common;

#[test]
fn update_from_matches_sqlite() {
    let (_db, mut ours, lite) = common::both(
        "CREATE TABLE inventory(item TEXT PRIMARY KEY, qty INTEGER, note);
         CREATE TABLE sales(item TEXT, q INTEGER);
         CREATE TABLE t(id INTEGER PRIMARY KEY, v);
         CREATE TABLE names(item TEXT, label TEXT);
         CREATE TABLE log(item, qty);
         INSERT INTO inventory VALUES('apple', 10, NULL), ('pear', 5, NULL), ('fig', 7, NULL);
         INSERT INTO sales VALUES('apple', 2), ('apple', 3), ('pear', 1), ('kiwi', 4);
         INSERT INTO t VALUES(1, 10), (2, 20), (3, 30), (5, 50);
         INSERT INTO names VALUES('apple', 'Apple'), ('fig', 'Fig');
         CREATE TRIGGER sold AFTER INSERT ON sales BEGIN
           UPDATE inventory SET qty = qty - s.q FROM (SELECT new.item AS item, new.q AS q) AS s
             WHERE inventory.item = s.item;
         END;",
    );
    let script = [
        "UPDATE inventory SET qty = qty - daily.amt \
         FROM (SELECT item, sum(q) AS amt FROM sales GROUP BY item) AS daily \
         WHERE inventory.item = daily.item RETURNING item, qty",
        "SELECT changes(), total_changes()",
        "SELECT * FROM inventory ORDER BY item",
        "UPDATE inventory SET note = names.label || ':' || sales.q FROM names JOIN sales USING (item) \
         WHERE names.item = inventory.item AND sales.q = 3",
        "SELECT * FROM inventory ORDER BY item",
        // A self-join through an alias; the values come from the rows as they were.
        "UPDATE t SET v = o.v + 1 FROM t AS o WHERE o.id = t.id + 1",
        "SELECT * FROM t ORDER BY id",
        // Nothing joins: nothing changes.
        "UPDATE t SET v = 0 FROM names WHERE names.item = 'none'",
        "SELECT changes()",
        "INSERT INTO sales VALUES('fig', 2)",
        "SELECT * FROM inventory ORDER BY item",
        "UPDATE inventory SET qty = x FROM (SELECT 1 AS x) WHERE item = 'pear' RETURNING qty",
        // Row values: a list of values, or a subquery's row (NULLs when it has none).
        "UPDATE t SET (v, id) = (v * 2, id + 100), v = v + 1 WHERE id = 5 RETURNING *",
        "UPDATE inventory SET (qty, note) = (SELECT count(*), group_concat(q) FROM sales \
         WHERE sales.item = inventory.item) RETURNING *",
        "UPDATE inventory SET (qty, note) = (SELECT q, item FROM sales WHERE q > 100)",
        "SELECT * FROM inventory ORDER BY item",
        "INSERT INTO inventory VALUES('fig', 1, 'x') ON CONFLICT(item) \
         DO UPDATE SET (qty, note) = (excluded.qty + 10, excluded.note || note) RETURNING *",
    ];
    for sql in script {
        common::same_rows(&mut ours, &lite, sql, false);
    }
    for bad in [
        "UPDATE t SET v = nosuch.v FROM names",
        "UPDATE t SET v = 1 FROM nosuch",
        "UPDATE t SET (v, id) = (1, 2, 3)",
        "UPDATE t SET (v, id) = 5",
    ] {
        common::same_outcome(&mut ours, &lite, bad);
    }
}

/// A WITH clause before UPDATE and DELETE (and INSERT, already), its tables read by the
/// statement's conditions, SET values, FROM and RETURNING, recursive ones too.
#[test]
fn with_before_update_and_delete_matches_sqlite() {
    let (_db, mut ours, lite) = common::both(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v, grp);
         INSERT INTO t VALUES (1, 10, 'a'), (2, 20, 'a'), (3, 30, 'b'), (4, 40, 'b'), (5, 50, 'c');
         CREATE TABLE audit(id, note);",
    );
    let script = [
        "WITH big(id) AS (SELECT id FROM t WHERE v > 25) UPDATE t SET v = v + 1 WHERE id IN big RETURNING *",
        "WITH m AS (SELECT grp, max(v) AS top FROM t GROUP BY grp) \
         UPDATE t SET v = m.top FROM m WHERE m.grp = t.grp AND t.v < m.top RETURNING id, v",
        "WITH k(n) AS (VALUES (2), (4)) UPDATE t SET grp = (SELECT 'k' || n FROM k WHERE n = t.id) \
         WHERE id IN (SELECT n FROM k)",
        "SELECT * FROM t ORDER BY id",
        "WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 2 FROM seq WHERE n < 3) \
         DELETE FROM t WHERE id IN seq RETURNING id",
        "SELECT * FROM t ORDER BY id",
        "WITH gone AS (SELECT id FROM t WHERE grp LIKE 'k%') DELETE FROM t WHERE id IN gone",
        "SELECT changes()",
        "WITH x(a, b) AS (SELECT id, v FROM t) INSERT INTO audit SELECT a, b FROM x",
        "SELECT * FROM audit ORDER BY id",
    ];
    for sql in script {
        common::same_rows(&mut ours, &lite, sql, false);
    }
    for bad in [
        "WITH x AS (SELECT nosuch FROM t) UPDATE t SET v = 1 WHERE id IN x",
        "WITH x AS (SELECT 1) DELETE FROM nosuch",
        "WITH x AS (SELECT 1) UPDATE t SET v = 1 WHERE id IN (SELECT * FROM y)",
    ] {
        common::same_outcome(&mut ours, &lite, bad);
    }
}
