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
        // Under UNION a row already queued is not queued again, the seed's repeats too.
        "WITH RECURSIVE c(x) AS (SELECT 1 FROM (SELECT 1 UNION ALL SELECT 1) UNION \
         SELECT x + 1 FROM c WHERE x < 3) SELECT x FROM c",
        "WITH RECURSIVE c(x) AS (VALUES (1), (1), (2), (1.0) UNION SELECT x + 1 FROM c \
         WHERE x < 4) SELECT x, typeof(x) FROM c",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION SELECT x + 1 FROM c WHERE x < 3000) \
         SELECT count(*), sum(x) FROM c",
        "WITH RECURSIVE r(n) AS (SELECT a FROM e UNION SELECT b FROM e, r WHERE e.a = r.n) \
         SELECT n FROM r",
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

/// A subquery in FROM with a WITH clause of its own: its common table expressions are in
/// scope while the outer statement works out the subquery's columns (they were not: "no
/// such table", found by a hunt for inputs that crash), shadowing tables of their name
/// there only.
#[test]
fn ctes_of_a_subquery_in_from_match_sqlite() {
    let (_db, mut ours, lite) = common::both("CREATE TABLE t(a); INSERT INTO t VALUES (4), (5);");
    for q in [
        "SELECT * FROM (WITH c(x) AS (SELECT 1) SELECT x FROM c)",
        "SELECT * FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c \
         WHERE x < 3) SELECT x FROM c)",
        "WITH d(y) AS (SELECT 5) SELECT * FROM (WITH c(x) AS (SELECT y FROM d) SELECT x FROM c)",
        "SELECT * FROM (SELECT * FROM (WITH c(x) AS (SELECT 2) SELECT x FROM c))",
        "SELECT s.x, t.a FROM (WITH c AS (SELECT 4 AS x) SELECT * FROM c) AS s \
         LEFT JOIN t ON t.a = s.x",
        "SELECT * FROM (WITH c(x) AS (SELECT 1), e(z) AS (SELECT x + 1 FROM c) \
         SELECT x, z FROM c, e)",
        "SELECT * FROM (WITH t(q) AS (SELECT 9) SELECT q FROM t), t",
        "SELECT (SELECT count(*) FROM (WITH c AS (SELECT a FROM t) SELECT * FROM c))",
    ] {
        common::same_rows(&mut ours, &lite, q, false);
    }
    common::same_outcome(
        &mut ours,
        &lite,
        "INSERT INTO t SELECT * FROM (WITH c(x) AS (SELECT 3) SELECT x FROM c)",
    );
    common::same_rows(&mut ours, &lite, "SELECT a FROM t ORDER BY a", false);
}

/// Recursive steps of the simplest shape (`SELECT ... FROM c [AS a] [WHERE ...]`, run row
/// by row without a plan per step) and the shapes next to it that are planned each step
/// (a subquery, a join, an aggregate), as SQLite answers them: aliases, `*` and `a.*`,
/// several columns of every type, NULL conditions, a column of the statement around the
/// CTE, and the errors of a step that does not fit.
#[test]
fn recursive_steps_of_every_shape_match_sqlite() {
    let (_db, mut ours, lite) =
        common::both("CREATE TABLE e(a, b); INSERT INTO e VALUES (1, 'x'), (4, NULL), (6, 2.5);");
    for q in [
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT p.x + 1 FROM c AS p WHERE p.x < 5) \
         SELECT x FROM c",
        "WITH RECURSIVE c(x, s, r) AS (SELECT 1, 'a', 0.5 UNION ALL \
         SELECT x + 1, s || char(97 + x), r * 3 FROM c WHERE x < 6) SELECT x, s, r FROM c",
        "WITH RECURSIVE c(x, y) AS (SELECT 1, NULL UNION ALL SELECT x + 1, y FROM c \
         WHERE x < 4) SELECT x, y, typeof(y) FROM c",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT * FROM c WHERE x < 1 LIMIT 3) \
         SELECT x FROM c",
        "WITH RECURSIVE c(x, y) AS (SELECT 1, 2 UNION ALL SELECT q.* FROM c AS q WHERE 0) \
         SELECT x, y FROM c",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < NULL) \
         SELECT count(*) FROM c",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x IS NOT 4) \
         SELECT sum(x) FROM c",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION SELECT x % 3 + 1 FROM c) SELECT x FROM c",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT CASE WHEN x < 3 THEN x + 1 END \
         FROM c WHERE x IS NOT NULL) SELECT x FROM c",
        // A column of the query around the CTE, read in each step.
        "SELECT a, (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c \
         WHERE x < e.a) SELECT sum(x) FROM c) FROM e",
        // Planned each step: a subquery, a join, a table alongside.
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + (SELECT count(*) FROM e) \
         FROM c WHERE x < 20) SELECT x FROM c",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + a FROM c, e \
         WHERE x < 10 AND a = 1) SELECT x FROM c",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x IN \
         (SELECT a FROM e)) SELECT x FROM c",
    ] {
        common::same_rows(&mut ours, &lite, q, false);
    }
    for q in [
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x, x FROM c WHERE x < 3) \
         SELECT x FROM c",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT nosuch + 1 FROM c WHERE x < 3) \
         SELECT x FROM c",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT e.* FROM c WHERE x < 3) \
         SELECT x FROM c",
    ] {
        common::same_outcome(&mut ours, &lite, q);
    }
}

/// INTERSECT and EXCEPT find each left row among the right side's by a hash of the rows
/// (they compared every pair): the same rows as SQLite's, values equal across storage
/// classes as SQLite compares them (3 and 3.0 alike, '3' not), NULLs equal, duplicates
/// dropped, in SQLite's order, and of equal rows the one SQLite keeps.
#[test]
fn compound_selects_match_sqlite() {
    let mut setup = String::from("CREATE TABLE a(x, y); CREATE TABLE b(x, y); BEGIN;");
    for i in 0..2000 {
        let x = match i % 9 {
            0 => "NULL".to_string(),
            1 => format!("'{}'", i % 50),
            2 => format!("{}.0", i % 50),
            3 => format!("{}.5", i % 50),
            4 => format!("x'{:02x}'", i % 50),
            _ => (i % 50).to_string(),
        };
        setup += &format!("INSERT INTO a VALUES ({x}, {});", i % 3);
        if i % 2 == 0 {
            setup += &format!("INSERT INTO b VALUES ({x}, {});", i % 4);
        }
    }
    setup += "COMMIT;";
    let (_db, mut ours, lite) = common::both(&setup);
    for q in [
        "SELECT x FROM a INTERSECT SELECT x FROM b",
        "SELECT x FROM a EXCEPT SELECT x FROM b",
        "SELECT x, y FROM a INTERSECT SELECT x, y FROM b",
        "SELECT x, y FROM a EXCEPT SELECT x, y FROM b ORDER BY 2, 1",
        "SELECT x FROM b EXCEPT SELECT x FROM a",
        "SELECT x FROM a UNION SELECT x FROM b INTERSECT SELECT y FROM a",
        "SELECT x FROM a EXCEPT SELECT x FROM b UNION ALL SELECT y FROM b",
        "SELECT count(*) FROM (SELECT x FROM a INTERSECT SELECT x + 0 FROM b)",
        "SELECT x FROM a WHERE y = 1 EXCEPT SELECT 3 INTERSECT SELECT x FROM b",
        // With an ORDER BY, the first of equal rows (3 before 3.0) stands for them.
        "SELECT x, y FROM a UNION SELECT x, y FROM b ORDER BY 2, 1",
        "SELECT x, y FROM a INTERSECT SELECT x, y FROM b ORDER BY 2, 1",
        "SELECT x FROM a UNION SELECT x FROM b ORDER BY 1 DESC",
        "SELECT x FROM b UNION SELECT y FROM a EXCEPT SELECT x FROM a WHERE y = 2 ORDER BY 1",
    ] {
        common::same_rows(&mut ours, &lite, q, false);
    }
}

/// A correlated subquery that scans a table whole, with an equality of one of its columns
/// with the rows around it, reads the table once per run of its statement and answers
/// each run from a hash of its rows (`Exec::kept_scan`; text grouped in the comparison's
/// collation), rebuilt when the transaction writes the table: the same answers as
/// SQLite's for EXISTS, NOT EXISTS, IN, scalar subqueries and counts, over values of every
/// storage class, affinity and collation on both sides, nested ones, and statements that
/// write the table the subquery reads.
#[test]
fn correlated_subqueries_over_a_kept_table_match_sqlite() {
    let mut setup = String::from(
        "CREATE TABLE o(id INTEGER PRIMARY KEY, x, t TEXT, n NUMERIC);
         CREATE TABLE i(x, y, t TEXT, r REAL, c TEXT COLLATE NOCASE);
         BEGIN;",
    );
    for k in 0..600 {
        let x = match k % 7 {
            0 => "NULL".to_string(),
            1 => format!("'{}'", k % 40),
            2 => format!("{}.0", k % 40),
            3 => format!("{}.5", k % 40),
            _ => (k % 40).to_string(),
        };
        setup += &format!(
            "INSERT INTO o(x, t, n) VALUES ({x}, '{}', '{}');",
            k % 30,
            k % 25
        );
        if k % 3 != 0 {
            setup += &format!(
                "INSERT INTO i VALUES ({x}, {}, '{}', {}, '{}');",
                k % 5,
                k % 20,
                k % 35,
                if k % 2 == 0 { "Ab" } else { "aB" }
            );
        }
    }
    setup += "COMMIT;";
    let (_db, mut ours, lite) = common::both(&setup);
    for q in [
        "SELECT id FROM o WHERE EXISTS (SELECT 1 FROM i WHERE i.x = o.x)",
        "SELECT id FROM o WHERE NOT EXISTS (SELECT 1 FROM i WHERE i.x = o.x)",
        "SELECT id, (SELECT count(*) FROM i WHERE i.x = o.x) FROM o",
        "SELECT id, (SELECT max(y) FROM i WHERE i.x = o.x + 1) FROM o",
        "SELECT id FROM o WHERE x IN (SELECT x FROM i WHERE i.y = o.id % 5)",
        "SELECT id FROM o WHERE (SELECT sum(y) FROM i WHERE i.t = o.n) > 3",
        "SELECT id FROM o WHERE EXISTS (SELECT 1 FROM i WHERE i.t = o.x)",
        "SELECT id FROM o WHERE EXISTS (SELECT 1 FROM i WHERE i.r = o.t)",
        "SELECT id FROM o WHERE EXISTS (SELECT 1 FROM i WHERE i.r = o.x AND i.y > 2)",
        "SELECT id FROM o WHERE EXISTS (SELECT 1 FROM i WHERE i.c = 'ab' AND i.y = o.id % 5)",
        // Text grouped in the comparison's collation (a NOCASE column, an explicit
        // COLLATE, trailing spaces under RTRIM), and text against numbers.
        "SELECT id, (SELECT count(*) FROM i WHERE i.t = o.t) FROM o",
        "SELECT id, (SELECT count(*) FROM i WHERE i.c = o.t || 'B') FROM o",
        "SELECT id, (SELECT count(*) FROM i WHERE i.c = upper(o.t) || 'b') FROM o",
        "SELECT id, (SELECT count(*) FROM i WHERE o.t = i.t COLLATE NOCASE) FROM o",
        "SELECT id, (SELECT count(*) FROM i WHERE i.t = o.t || ' ' COLLATE RTRIM) FROM o",
        "SELECT id, (SELECT count(*) FROM i WHERE i.t = o.n) FROM o",
        "SELECT id, (SELECT count(*) FROM i WHERE i.x = o.t) FROM o",
        "SELECT id, (SELECT max(y) FROM i WHERE i.t = o.x) FROM o",
        // A join inside the subquery: its second table hashed on text equal to an outer
        // column.
        "SELECT id, (SELECT count(*) FROM i AS h, i AS j WHERE j.c = o.t || 'b' \
           AND h.y = j.y AND h.r < 3) FROM o",
        "SELECT id, (SELECT count(*) FROM i WHERE i.x = o.x AND EXISTS \
           (SELECT 1 FROM i AS j WHERE j.y = i.y AND j.t = o.t)) FROM o",
        "SELECT o.id, (SELECT group_concat(y) FROM i WHERE i.x = o.x) FROM o, o AS p \
           WHERE p.id = o.id % 7 + 1",
    ] {
        common::same_rows(&mut ours, &lite, q, false);
    }
    // Statements that write: the table the subquery reads, and another.
    for w in [
        "UPDATE o SET n = (SELECT count(*) FROM i WHERE i.x = o.x) WHERE id % 2 = 0",
        "UPDATE i SET y = y + (SELECT count(*) FROM i AS j WHERE j.x = i.x)",
        "DELETE FROM i WHERE EXISTS (SELECT 1 FROM i AS j WHERE j.x = i.x + 1)",
        "INSERT INTO i(x, y) SELECT x, id FROM o WHERE NOT EXISTS \
           (SELECT 1 FROM i WHERE i.x = o.x)",
        "DELETE FROM o WHERE NOT EXISTS (SELECT 1 FROM i WHERE i.x = o.x)",
    ] {
        common::same_outcome(&mut ours, &lite, w);
        common::same_rows(&mut ours, &lite, "SELECT * FROM o", false);
        common::same_rows(&mut ours, &lite, "SELECT * FROM i", false);
    }
}
