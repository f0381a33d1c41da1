//! Result columns' aliases where SQLite lets a query name them: ORDER BY (an alias comes
//! before a source's column of the same name), and WHERE, GROUP BY and HAVING (a name no
//! source has); and the order groups come out in without ORDER BY (their keys'). Checked
//! against SQLite (rusqlite, bundled).

mod common;

#[test]
fn aliases_resolve_as_in_sqlite() {
    let (_db, mut ours, lite) = common::both(
        "CREATE TABLE t(a, b); INSERT INTO t VALUES(1, 9), (2, 8), (3, 7);
         CREATE TABLE u(a, c); INSERT INTO u VALUES(1, 5);",
    );
    for sql in [
        "SELECT a AS b, b AS a FROM t ORDER BY a",
        "SELECT a AS x FROM t ORDER BY x DESC",
        "SELECT b AS a FROM t ORDER BY a",
        "SELECT a AS b FROM t ORDER BY b",
        "SELECT a AS b FROM t WHERE b > 7 ORDER BY 1",
        "SELECT a + 0 AS b FROM t WHERE b > 1 ORDER BY 1",
        "SELECT t.a AS q FROM t WHERE q = 2",
        "SELECT a * 2 AS d FROM t WHERE d > 2 AND d < 6 ORDER BY d DESC",
        "SELECT 1 AS k WHERE k = 1",
        "SELECT a AS k FROM t WHERE k IN (SELECT 2) ORDER BY k",
        "SELECT count(*) AS n FROM t WHERE n > 0",
        // A name two sources have stays ambiguous, alias or not.
        "SELECT t.a AS a FROM t, u WHERE a = 1",
        "SELECT t.b AS c2 FROM t, u WHERE c2 = 9 AND c = 5",
        "SELECT a % 2 AS p, count(*) FROM t GROUP BY p",
        "SELECT b > 7 AS big, sum(a) AS s FROM t GROUP BY big HAVING s > 1",
        "SELECT a AS b, count(*) AS n FROM t GROUP BY b HAVING n = 1",
        "SELECT count(*) AS n FROM t GROUP BY n",
        "SELECT a, count(*) AS n FROM t GROUP BY a HAVING n > 0 AND count(*) < 9",
        "SELECT a AS k, row_number() OVER () AS w FROM t GROUP BY k HAVING w > 1",
    ] {
        common::same_outcome(&mut ours, &lite, sql);
    }
}

#[test]
fn groups_come_out_in_the_order_of_their_keys() {
    let (_db, mut ours, lite) = common::both(
        "CREATE TABLE t(a, b TEXT, c);
         INSERT INTO t VALUES (5, 'y', 1), (2, 'X', 2), (9, NULL, 3), (2, 'x', 4), (7, 'b', 5),
             (1.5, 'Y', 6), ('z', 'a', 7), (NULL, 'B', 8), (3, 'a ', 9);
         CREATE TABLE n(k TEXT COLLATE NOCASE, v); INSERT INTO n SELECT b, c FROM t;",
    );
    for sql in [
        "SELECT a, count(*) FROM t GROUP BY a",
        "SELECT b, sum(c) FROM t GROUP BY b",
        // Which row's text stands for a group of case variants is left open: lower().
        "SELECT lower(b), sum(c) FROM t GROUP BY b COLLATE NOCASE",
        "SELECT DISTINCT lower(b COLLATE NOCASE) FROM t",
        "SELECT count(DISTINCT b COLLATE NOCASE), count(DISTINCT b) FROM t",
        "SELECT lower(n) FROM (SELECT DISTINCT b COLLATE NOCASE AS n FROM t) ORDER BY 1",
        "SELECT a % 3, b, count(*) FROM t GROUP BY a % 3, b",
        "SELECT c % 2, group_concat(c) FROM (SELECT * FROM t ORDER BY c DESC) GROUP BY 1",
        "SELECT a, count(*) FROM t GROUP BY a ORDER BY count(*) DESC, a",
        "SELECT lower(k), sum(v) FROM n GROUP BY k",
        "SELECT lower(rtrim(b)), sum(c) FROM t GROUP BY b COLLATE RTRIM",
        "SELECT count(*) FROM (SELECT DISTINCT k FROM n)",
    ] {
        common::same_rows(&mut ours, &lite, sql, false);
    }
}

/// An unaliased result column that is not a column is named by its text as typed, spacing
/// and case included, as SQLite names it.
#[test]
fn result_columns_are_named_by_their_text_as_typed() {
    let (_db, mut ours, lite) = common::both(
        "CREATE TABLE kv(k, v); INSERT INTO kv VALUES ('a', 1);
         CREATE VIEW w AS SELECT v*2, upper( k ) FROM kv;",
    );
    for sql in [
        "SELECT v*2, upper( k ), v  +  1, \"k\" || k, CAST(v AS TEXT), (v), -v, v IS NULL FROM kv",
        "SELECT k IN (1,2), CASE WHEN v THEN 1 END, Count( * ), (SELECT max(v)+1 FROM kv), x.v FROM kv AS x",
        "SELECT (SELECT v*2 FROM kv), v*2 FROM kv",
        "SELECT 1+1, 'a'||'b' UNION SELECT 2 ,  3",
        "WITH c AS (SELECT v*3 FROM kv) SELECT * FROM c",
        "SELECT * FROM w",
        "SELECT DISTINCT v%2 FROM kv",
        "SELECT v*2 FROM kv WHERE v IN (SELECT v+0 FROM kv) ORDER BY v*2",
    ] {
        common::same_names(&mut ours, &lite, sql);
    }
}
