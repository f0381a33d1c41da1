//! Result columns' aliases where SQLite lets a query name them: ORDER BY (an alias comes
//! before a source's column of the same name) and WHERE (a name no source has); checked
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
    ] {
        common::same_outcome(&mut ours, &lite, sql);
    }
}
