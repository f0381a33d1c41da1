//! RIGHT and FULL joins (SQLite 3.39's), checked against SQLite (rusqlite, bundled)
//! statement by statement: matched and unmatched rows on either side, USING and NATURAL
//! columns merged, joins before and after an outer join, conditions in ON and in WHERE,
//! column names, and the errors of a bad USING.

mod common;

const SCHEMA: &str = "CREATE TABLE a(x, y);
     CREATE TABLE b(x, z);
     CREATE TABLE c(x INTEGER PRIMARY KEY, w);
     CREATE TABLE e(x, y);
     INSERT INTO a VALUES(1, 'a1'), (2, 'a2'), (NULL, 'an'), (2, 'a2bis');
     INSERT INTO b VALUES(2, 'b2'), (3, 'b3'), (NULL, 'bn');
     INSERT INTO c VALUES(3, 'c3'), (1, 'c1'), (4, 'c4');
     CREATE VIEW ab AS SELECT * FROM a FULL JOIN b USING (x);";

#[test]
fn outer_joins_match_sqlite() {
    let (_db, mut ours, lite) = common::both(SCHEMA);
    let unordered = [
        "SELECT * FROM a RIGHT JOIN b ON a.x = b.x",
        "SELECT * FROM a FULL JOIN b ON a.x = b.x",
        "SELECT * FROM a FULL OUTER JOIN b ON a.x = b.x",
        "SELECT * FROM a RIGHT OUTER JOIN b ON a.x = b.x",
        "SELECT * FROM a RIGHT JOIN b USING (x)",
        "SELECT * FROM a FULL JOIN b USING (x)",
        "SELECT x, a.x, b.x FROM a FULL JOIN b USING (x)",
        "SELECT * FROM a NATURAL FULL JOIN b",
        "SELECT * FROM a NATURAL RIGHT JOIN e",
        "SELECT * FROM a FULL JOIN b ON a.x = b.x WHERE b.z IS NULL",
        "SELECT * FROM a FULL JOIN b ON a.x = b.x WHERE a.x IS NULL",
        "SELECT * FROM a FULL JOIN b ON a.x = b.x AND b.z = 'b2'",
        "SELECT * FROM a RIGHT JOIN b ON 1",
        "SELECT * FROM a RIGHT JOIN b ON 0",
        "SELECT * FROM a FULL JOIN b ON 0",
        "SELECT * FROM a JOIN c ON a.x = c.x RIGHT JOIN b ON b.x = a.x",
        "SELECT * FROM a RIGHT JOIN b ON a.x = b.x JOIN c ON c.x = b.x",
        "SELECT * FROM a FULL JOIN b ON a.x = b.x FULL JOIN c ON c.x = b.x",
        "SELECT * FROM a FULL JOIN b USING (x) FULL JOIN c USING (x)",
        "SELECT x FROM a FULL JOIN b USING (x) FULL JOIN c USING (x)",
        "SELECT * FROM a FULL JOIN b USING (x) LEFT JOIN c USING (x)",
        "SELECT * FROM a LEFT JOIN b USING (x) RIGHT JOIN c USING (x)",
        "SELECT * FROM (SELECT x FROM a WHERE x > 1) AS s RIGHT JOIN c ON s.x = c.x",
        "SELECT * FROM c FULL JOIN (SELECT x, count(*) AS n FROM a GROUP BY x) AS g USING (x)",
        "SELECT * FROM ab",
        "SELECT x, y, z FROM ab WHERE x IS NOT NULL",
        "SELECT b.*, a.y FROM a RIGHT JOIN b USING (x)",
        "SELECT a.* FROM a FULL JOIN b USING (x)",
        "SELECT c.w, (SELECT count(*) FROM a RIGHT JOIN b ON a.x = b.x WHERE b.x = c.x) FROM c",
        "SELECT * FROM c WHERE x IN (SELECT b.x FROM a FULL JOIN b ON a.x = b.x)",
        "SELECT * FROM (a RIGHT JOIN b ON a.x = b.x) JOIN c ON c.x = b.x",
        "SELECT * FROM a RIGHT JOIN b ON a.x = b.x, c WHERE c.w = 'c1'",
    ];
    for sql in unordered {
        common::same_rows(&mut ours, &lite, sql, true);
    }
    let ordered = [
        "SELECT x, count(*) FROM a FULL JOIN b USING (x) GROUP BY x ORDER BY x",
        "SELECT coalesce(a.y, '-'), coalesce(b.z, '-') FROM a FULL JOIN b ON a.x = b.x \
         ORDER BY 1, 2",
        "SELECT * FROM a FULL JOIN b ON a.x = b.x ORDER BY b.z, a.y LIMIT 3",
        "SELECT * FROM a FULL JOIN b ON a.x = b.x ORDER BY b.z DESC, a.y LIMIT 2 OFFSET 1",
        "SELECT DISTINCT x FROM a FULL JOIN b USING (x) ORDER BY x",
        "SELECT count(*), count(a.x), count(b.x), count(x) FROM a FULL JOIN b USING (x)",
    ];
    for sql in ordered {
        common::same_rows(&mut ours, &lite, sql, false);
    }
    for sql in [
        "SELECT * FROM a RIGHT JOIN b USING (x)",
        "SELECT * FROM a FULL JOIN b USING (x) FULL JOIN c USING (x)",
        "SELECT * FROM a NATURAL FULL JOIN e",
        "SELECT a.x, b.x, x FROM a RIGHT JOIN b USING (x)",
    ] {
        common::same_names(&mut ours, &lite, sql);
    }
    for bad in [
        "SELECT * FROM a RIGHT JOIN b USING (nosuch)",
        "SELECT * FROM a FULL JOIN b ON nosuch.x = b.x",
        "SELECT * FROM a FULL JOIN b ON a.x = b.x WHERE q = 1",
    ] {
        common::same_outcome(&mut ours, &lite, bad);
    }
}

/// An outer join in UPDATE ... FROM and in INSERT ... SELECT, and a RIGHT join's rows
/// read inside a transaction that wrote them.
#[test]
fn outer_joins_in_writes_match_sqlite() {
    let (_db, mut ours, lite) = common::both(SCHEMA);
    let script = [
        "CREATE TABLE t(x, y, z)",
        "INSERT INTO t SELECT x, y, z FROM a FULL JOIN b USING (x)",
        "SELECT * FROM t ORDER BY x, y, z",
        "UPDATE c SET w = w || '+' || s.n FROM (SELECT b.x, count(a.y) AS n FROM a RIGHT JOIN b \
         USING (x) GROUP BY b.x) AS s WHERE s.x = c.x",
        "SELECT * FROM c ORDER BY x",
        "BEGIN",
        "INSERT INTO b VALUES (4, 'b4')",
        "SELECT * FROM c RIGHT JOIN b USING (x) ORDER BY x",
        "COMMIT",
        "DELETE FROM t WHERE rowid IN (SELECT t.rowid FROM t FULL JOIN c USING (x) WHERE c.x IS NULL)",
        "SELECT * FROM t ORDER BY x, y, z",
    ];
    for sql in script {
        common::same_rows(&mut ours, &lite, sql, false);
    }
}

/// Sides large enough that an equality picks candidates through a hash: numbers of both
/// kinds, numeric text, NULLs and duplicates on both sides, so that every affinity rule of
/// `=` is met, and conditions beside the equality.
#[test]
fn hashed_outer_joins_match_sqlite() {
    let mut sql = String::from(
        "CREATE TABLE p(k, v TEXT); CREATE TABLE q(k INTEGER, w); CREATE TABLE r(k TEXT, u);",
    );
    for i in 0..60 {
        let k = match i % 6 {
            0 => "NULL".to_string(),
            1 => format!("{}", i % 13),
            2 => format!("{}.0", i % 13),
            3 => format!("'{}'", i % 13),
            4 => format!("'x{}'", i % 5),
            _ => format!("{}", i % 7),
        };
        sql += &format!("INSERT INTO p VALUES({k}, 'p{i}');");
        sql += &format!("INSERT INTO q VALUES({k}, {i});");
        sql += &format!("INSERT INTO r VALUES({k}, 'r{i}');");
    }
    let (_db, mut ours, lite) = common::both(&sql);
    for q in [
        "SELECT * FROM p FULL JOIN q ON p.k = q.k",
        "SELECT * FROM q RIGHT JOIN p ON q.k = p.k",
        "SELECT * FROM p FULL JOIN r ON r.k = p.k",
        "SELECT * FROM r FULL JOIN q ON r.k = q.k AND q.w > 20",
        "SELECT * FROM p RIGHT JOIN q ON q.k = p.k + 1",
        "SELECT * FROM p FULL JOIN q USING (k)",
        "SELECT k, count(*) FROM q FULL JOIN r USING (k) GROUP BY k",
        "SELECT * FROM p FULL JOIN q ON p.k = q.k FULL JOIN r ON r.k = q.k WHERE p.v IS NULL",
    ] {
        common::same_rows(&mut ours, &lite, q, true);
    }
}
