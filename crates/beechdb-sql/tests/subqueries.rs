//! Subqueries that read nothing of the rows around them run once per statement (SQLite's
//! uncorrelated subqueries), and `x IN (subquery)` then answers by a search of their sorted
//! values: checked against SQLite (rusqlite, bundled) where that could go wrong. Correlated
//! ones (a name reaching an enclosing query, directly or from a nested subquery), ones
//! whose data the statement changes as it goes (triggers, RETURNING, INSERT ... SELECT),
//! subqueries in a recursive common table expression's steps, and the comparison rules of
//! IN (affinities on either side, collations, NULLs).

mod common;

#[test]
fn kept_subqueries_match_sqlite() {
    let mut setup = String::from(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, score REAL, tag);
         CREATE TABLE u(k, v TEXT COLLATE NOCASE);
         CREATE TABLE log(n);
         CREATE TRIGGER t_del AFTER DELETE ON t BEGIN
           INSERT INTO log VALUES ((SELECT count(*) FROM t));
         END;",
    );
    for i in 0..200 {
        let tag = match i % 5 {
            0 => "NULL".to_string(),
            1 => format!("'{}'", i % 7),
            2 => format!("{}", i % 7),
            3 => format!("{}.0", i % 7),
            _ => format!("'x{}'", i % 3),
        };
        setup += &format!(
            "INSERT INTO t(grp, name, score, tag) VALUES ({}, 'n{}', {}, {tag});",
            i % 10,
            i % 13,
            (i * 37) % 100
        );
    }
    setup += "INSERT INTO u VALUES (1, 'A'), ('2', 'b'), (3.0, NULL), (NULL, 'c'), ('x1', 'N1'), (4, 'n2');";
    let (_db, mut ours, lite) = common::both(&setup);
    let sorted = [
        "SELECT id FROM t WHERE grp IN (SELECT k FROM u)",
        "SELECT id FROM t WHERE grp NOT IN (SELECT k FROM u)",
        "SELECT id FROM t WHERE grp NOT IN (SELECT k FROM u WHERE k IS NOT NULL)",
        "SELECT id FROM t WHERE tag IN (SELECT k FROM u)",
        "SELECT id FROM t WHERE tag IN (SELECT v FROM u)",
        "SELECT id FROM t WHERE name IN (SELECT v FROM u)",
        "SELECT id FROM t WHERE 'N1' IN (SELECT v FROM u) AND grp = 1",
        "SELECT id FROM t WHERE score IN (SELECT score FROM t WHERE grp = 3)",
        "SELECT id FROM t WHERE id IN (SELECT id FROM t WHERE grp = 3)",
        "SELECT id FROM t WHERE grp IN (SELECT grp FROM t AS b WHERE b.id = t.id + 1)",
        "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.grp)",
        "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = 4)",
        "SELECT id FROM t WHERE score > (SELECT avg(score) FROM t)",
        "SELECT id FROM t WHERE score > (SELECT avg(score) FROM t AS b WHERE b.grp = t.grp)",
        "SELECT id, (SELECT count(*) FROM u WHERE (SELECT t.grp) = u.k) FROM t",
        "SELECT id FROM t WHERE grp IN (SELECT k FROM u WHERE k IN (SELECT grp FROM t WHERE id < 5))",
        "SELECT id FROM t WHERE grp IN (SELECT x FROM (SELECT t.grp AS x))",
        // Planned again at each run inside a WITH: two correlated subqueries, each holding
        // a different uncorrelated one, keep their own rows.
        "WITH c AS (SELECT 1 AS one) SELECT id, \
         (SELECT count(*) FROM u WHERE u.k = t.grp AND u.k IN (SELECT k FROM u WHERE k > 1)), \
         (SELECT count(*) FROM u WHERE u.k = t.grp AND u.k IN (SELECT k FROM u WHERE k < 3)) \
         FROM t, c",
    ];
    for q in sorted {
        common::same_rows(&mut ours, &lite, q, true);
    }
    let script = [
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c \
         WHERE x < 20 AND x NOT IN (SELECT k FROM u WHERE k IS NOT NULL)) SELECT x FROM c",
        "WITH RECURSIVE c(x, s) AS (SELECT 1, (SELECT count(*) FROM u) UNION ALL \
         SELECT x + 1, (SELECT count(*) FROM t WHERE grp = x) FROM c WHERE x < 12) SELECT * FROM c",
        "DELETE FROM t WHERE grp IN (SELECT k FROM u) AND id < 60",
        "SELECT * FROM log ORDER BY rowid",
        "UPDATE t SET score = (SELECT max(score) FROM t) + 1 WHERE grp = 9 RETURNING id, score",
        "UPDATE t SET grp = grp + 100 WHERE id IN (SELECT id FROM t WHERE grp = 8) \
         RETURNING id, (SELECT count(*) FROM t WHERE grp >= 100)",
        "INSERT INTO u(k, v) SELECT grp, name FROM t WHERE grp NOT IN (SELECT k FROM u WHERE k IS NOT NULL) \
         AND id > 190",
        "SELECT * FROM u ORDER BY rowid",
    ];
    for q in script {
        common::same_rows(&mut ours, &lite, q, false);
    }
}

/// Recursive common table expressions step by step as SQLite's: UNION ALL and UNION (rows
/// seen before dropped), a LIMIT met inside a step, several recursive selects, one that
/// adds nothing, and an error in a step (the statement fails, the connection goes on).
#[test]
fn recursive_ctes_match_sqlite() {
    let (_db, mut ours, lite) = common::both(
        "CREATE TABLE e(a, b); INSERT INTO e VALUES \
         (1, 2), (2, 3), (3, 1), (3, 4), (4, 5), (5, 5);",
    );
    for q in [
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000) \
         SELECT count(*), sum(x), max(x) FROM c",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 7) SELECT x FROM c",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 1) SELECT x FROM c",
        "WITH RECURSIVE c(x) AS (VALUES (1), (2) UNION ALL SELECT x * 2 FROM c WHERE x < 40 \
         LIMIT 9) SELECT x FROM c",
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION SELECT b FROM e, r WHERE e.a = r.n) \
         SELECT n FROM r ORDER BY n",
        "WITH RECURSIVE r(n, d) AS (SELECT 1, 0 UNION ALL SELECT b, d + 1 FROM e, r \
         WHERE e.a = r.n AND d < 6) SELECT n, d FROM r ORDER BY d, n",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5 \
         UNION ALL SELECT x + 10 FROM c WHERE x < 3) SELECT x FROM c ORDER BY x",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x FROM c WHERE 0) SELECT x FROM c",
    ] {
        common::same_rows(&mut ours, &lite, q, false);
    }
    let failing = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c \
                   WHERE x < 50 AND (x < 40 OR abs(-9223372036854775808))) SELECT count(*) FROM c";
    common::same_outcome(&mut ours, &lite, failing);
    common::same_rows(&mut ours, &lite, "SELECT count(*) FROM e", false);
    // One that never ends stops at BeechDB's step limit with an error (SQLite's would run
    // until memory ran out), and the connection goes on.
    let endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x FROM c) \
                   SELECT count(*) FROM c";
    let err = ours.query(endless, &[]).unwrap_err().to_string();
    assert!(err.contains("recursive query did not end"), "{err}");
    common::same_rows(&mut ours, &lite, "SELECT count(*) FROM e", false);
}
