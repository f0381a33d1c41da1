//! Window functions, checked against SQLite (rusqlite, bundled) query by query.

mod common;

use beechdb_sql::Database;

#[test]
fn window_functions_match_sqlite() {
    let db = Database::open_in_memory().unwrap();
    let mut b = db.connect();
    let s = rusqlite::Connection::open_in_memory().unwrap();
    let setup = "CREATE TABLE emp(id INTEGER PRIMARY KEY, dept TEXT, name TEXT, pay INTEGER, m);
        INSERT INTO emp(dept, name, pay, m) VALUES
          ('eng','ann',120,1.5),('eng','bob',100,'x'),('eng','cid',120,3),('ops','dee',90,NULL),
          ('ops','eve',NULL,2.5),('ops','fay',70,'a'),('hr','gus',80,4.25);";
    b.execute_batch(setup).unwrap();
    s.execute_batch(setup).unwrap();
    for sql in [
        "SELECT name, row_number() OVER (ORDER BY pay DESC, name) FROM emp ORDER BY name",
        "SELECT name, rank() OVER (PARTITION BY dept ORDER BY pay DESC), dense_rank() OVER (PARTITION BY dept ORDER BY pay DESC) FROM emp ORDER BY id",
        "SELECT name, sum(pay) OVER (PARTITION BY dept), count(*) OVER (), avg(pay) OVER (PARTITION BY dept) FROM emp ORDER BY id",
        "SELECT name, sum(pay) OVER (ORDER BY id), max(pay) OVER (ORDER BY pay) FROM emp ORDER BY id",
        "SELECT name, sum(pay) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM emp ORDER BY id",
        // No rows, with and without partitions; sort keys and arguments that are
        // expressions of several columns.
        "SELECT sum(pay) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING), rank() OVER (ORDER BY pay) FROM emp WHERE id < 0",
        "SELECT count(*) OVER (PARTITION BY dept ORDER BY id) FROM emp WHERE id < 0",
        "SELECT name, sum(pay * id + 1) OVER (ORDER BY pay - id, name DESC ROWS 2 PRECEDING), max(name || dept) OVER (ORDER BY id) FROM emp ORDER BY id",
        "SELECT name, lag(name) OVER (ORDER BY id), lead(pay, 2, -1) OVER (ORDER BY id) FROM emp ORDER BY id",
        "SELECT name, first_value(name) OVER (PARTITION BY dept ORDER BY pay), last_value(name) OVER (PARTITION BY dept ORDER BY pay ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) FROM emp ORDER BY id",
        "SELECT name, ntile(3) OVER (ORDER BY id), percent_rank() OVER (ORDER BY pay), cume_dist() OVER (ORDER BY pay) FROM emp ORDER BY id",
        "SELECT name, nth_value(name, 2) OVER (PARTITION BY dept ORDER BY name ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) FROM emp ORDER BY id",
        "SELECT dept, name FROM emp ORDER BY row_number() OVER (PARTITION BY dept ORDER BY name DESC), dept",
        "SELECT name, group_concat(name, '+') OVER (PARTITION BY dept ORDER BY name) FROM emp ORDER BY id",
        // Named windows, alone and as bases; FILTER on aggregates, windowed or not.
        "SELECT name, rank() OVER w, sum(pay) OVER w FROM emp WINDOW w AS (PARTITION BY dept ORDER BY pay DESC) ORDER BY id",
        "SELECT name, sum(pay) OVER (w ORDER BY id), count(*) OVER (w) FROM emp WINDOW w AS (PARTITION BY dept) ORDER BY id",
        "SELECT name, sum(pay) OVER (w ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM emp WINDOW v AS (ORDER BY id), w AS (v) ORDER BY id",
        "SELECT count(*) FILTER (WHERE pay > 90), sum(pay) FILTER (WHERE dept = 'eng'), count(DISTINCT dept) FILTER (WHERE pay IS NOT NULL) FROM emp",
        "SELECT dept, max(name) FILTER (WHERE pay < 110), group_concat(name) FILTER (WHERE name > 'b') FROM emp GROUP BY dept ORDER BY dept",
        "SELECT name, count(*) FILTER (WHERE pay >= 100) OVER (ORDER BY id) FROM emp ORDER BY id",
        // GROUPS and RANGE offsets, and EXCLUDE (pay has a NULL, ties, and the mixed
        // column m reals, text and NULLs).
        "SELECT name, sum(pay) OVER (ORDER BY pay GROUPS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM emp ORDER BY id",
        "SELECT name, count(*) OVER (ORDER BY pay DESC GROUPS 2 PRECEDING), group_concat(name) OVER (ORDER BY pay GROUPS BETWEEN CURRENT ROW AND 1 FOLLOWING) FROM emp ORDER BY id",
        "SELECT name, sum(pay) OVER (ORDER BY pay RANGE BETWEEN 20 PRECEDING AND 10 FOLLOWING) FROM emp ORDER BY id",
        "SELECT name, sum(pay) OVER (ORDER BY pay DESC RANGE BETWEEN 25 PRECEDING AND CURRENT ROW), count(*) OVER (PARTITION BY dept ORDER BY pay RANGE 30.5 PRECEDING) FROM emp ORDER BY id",
        "SELECT name, m, group_concat(name) OVER (ORDER BY m RANGE BETWEEN 1.5 PRECEDING AND 1.5 FOLLOWING) FROM emp ORDER BY id",
        "SELECT name, group_concat(name) OVER (ORDER BY pay ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING EXCLUDE CURRENT ROW) FROM emp ORDER BY id",
        "SELECT name, group_concat(name) OVER (ORDER BY pay RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW EXCLUDE GROUP), group_concat(name) OVER (ORDER BY pay GROUPS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE TIES) FROM emp ORDER BY id",
        "SELECT name, first_value(name) OVER (ORDER BY pay ROWS BETWEEN CURRENT ROW AND 2 FOLLOWING EXCLUDE CURRENT ROW), last_value(name) OVER (ORDER BY pay RANGE CURRENT ROW EXCLUDE TIES) FROM emp ORDER BY id",
        // Over an aggregate query's groups, reading their aggregates.
        "SELECT dept, count(*), rank() OVER (ORDER BY dept) FROM emp GROUP BY dept ORDER BY dept",
        "SELECT dept, sum(pay), rank() OVER (ORDER BY sum(pay) DESC), sum(sum(pay)) OVER () FROM emp GROUP BY dept ORDER BY 3, dept",
        "SELECT dept, max(pay) - min(pay), lag(dept) OVER w, avg(count(*)) OVER w FROM emp GROUP BY dept HAVING count(*) > 1 WINDOW w AS (ORDER BY max(pay)) ORDER BY dept",
        "SELECT count(*), row_number() OVER () FROM emp",
        "SELECT dept, row_number() OVER (ORDER BY dept DESC) FROM emp GROUP BY dept ORDER BY row_number() OVER (ORDER BY dept DESC)",
    ] {
        common::same_rows(&mut b, &s, sql, false);
    }
    for bad in [
        "SELECT rank() OVER nosuch FROM emp",
        "SELECT rank() OVER (w ORDER BY id) FROM emp WINDOW w AS (ORDER BY pay)",
        "SELECT rank() OVER (w PARTITION BY dept) FROM emp WINDOW w AS (ORDER BY pay)",
        "SELECT sum(pay) OVER (w) FROM emp WINDOW w AS (ROWS 1 PRECEDING)",
        "SELECT abs(pay) FILTER (WHERE pay > 1) FROM emp",
        "SELECT rank() FILTER (WHERE pay > 1) OVER () FROM emp",
        "SELECT count(DISTINCT pay) OVER () FROM emp",
        "SELECT sum(pay) OVER (ORDER BY pay, id RANGE 1 PRECEDING) FROM emp",
        "SELECT sum(pay) OVER (ORDER BY pay ROWS -1 PRECEDING) FROM emp",
        "SELECT sum(pay) OVER (ORDER BY pay RANGE BETWEEN 1 PRECEDING AND -1.5 FOLLOWING) FROM emp",
        "SELECT sum(pay) OVER (ORDER BY pay GROUPS 1.5 PRECEDING) FROM emp",
    ] {
        common::same_outcome(&mut b, &s, bad);
    }
    assert!(b.query("SELECT rank() FROM emp", &[]).is_err());
}

/// Frames that start at the partition's first row and only grow (the default frame with
/// an ORDER BY, `ROWS ... CURRENT ROW`, ending before or after the current row, by value
/// and by groups) are computed by one running state per partition, and min and max over
/// frames that move at both ends by a queue that slides with them: each aggregate, over
/// ties (1 and 1.0, 'a' and 'A' under NOCASE), NULLs, reals, text and integers that
/// overflow, with and without FILTER, agrees with SQLite row by row. JSON's aggregate,
/// whose state cannot be read twice, and frames that exclude rows take the frame-by-frame
/// path, and agree too.
#[test]
fn aggregates_over_frames_that_grow_or_move_match_sqlite() {
    let db = Database::open_in_memory().unwrap();
    let mut b = db.connect();
    let s = rusqlite::Connection::open_in_memory().unwrap();
    let mut setup = String::from(
        "CREATE TABLE r(id INTEGER PRIMARY KEY, g, k, v, c TEXT COLLATE NOCASE); BEGIN;",
    );
    for i in 1..=300i64 {
        let v = match i % 11 {
            0 => "NULL".to_string(),
            1 => format!("{}.25", i % 17),
            2 => format!("'t{}'", i % 5),
            3 if i % 2 == 1 => "9223372036854775000".to_string(),
            _ => (i * 7919 % 101 - 50).to_string(),
        };
        let k = if i % 13 == 0 {
            "NULL".to_string()
        } else {
            (i % 23).to_string()
        };
        let c = ["a", "A", "b", "B ", "b", "Z"][(i % 6) as usize];
        setup += &format!("INSERT INTO r VALUES ({i}, {}, {k}, {v}, '{c}');", i % 4);
    }
    setup += "COMMIT;";
    b.execute_batch(&setup).unwrap();
    s.execute_batch(&setup).unwrap();
    let frames = [
        "ORDER BY k",
        "ORDER BY k DESC, id",
        "PARTITION BY g ORDER BY k",
        "PARTITION BY g",
        "ORDER BY id ROWS UNBOUNDED PRECEDING",
        "ORDER BY k ROWS BETWEEN UNBOUNDED PRECEDING AND 2 PRECEDING",
        "ORDER BY k ROWS BETWEEN UNBOUNDED PRECEDING AND 3 FOLLOWING",
        "PARTITION BY g ORDER BY k RANGE BETWEEN UNBOUNDED PRECEDING AND 2 FOLLOWING",
        "ORDER BY k DESC RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING",
        "ORDER BY k GROUPS BETWEEN UNBOUNDED PRECEDING AND 1 FOLLOWING",
        "ORDER BY k RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING",
        "ORDER BY k ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW EXCLUDE CURRENT ROW",
        "ORDER BY k RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW EXCLUDE TIES",
        // Frames that move at both ends.
        "ORDER BY id ROWS BETWEEN 3 PRECEDING AND 2 FOLLOWING",
        "ORDER BY k ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING",
        "PARTITION BY g ORDER BY k DESC ROWS BETWEEN 2 FOLLOWING AND 4 FOLLOWING",
        "ORDER BY k ROWS BETWEEN 5 PRECEDING AND 1 PRECEDING",
        "ORDER BY k RANGE BETWEEN 2 PRECEDING AND 1 FOLLOWING",
        "ORDER BY k DESC RANGE BETWEEN 1 PRECEDING AND CURRENT ROW",
        "PARTITION BY g ORDER BY k GROUPS BETWEEN 1 PRECEDING AND CURRENT ROW",
        "ORDER BY k GROUPS BETWEEN CURRENT ROW AND 2 FOLLOWING",
        "ORDER BY k ROWS BETWEEN 2 PRECEDING AND 2 FOLLOWING EXCLUDE CURRENT ROW",
    ];
    let calls = [
        "sum(v)",
        "total(v)",
        "avg(v)",
        "count(v)",
        "count(*)",
        "min(v)",
        "max(v)",
        "group_concat(v, '|')",
        "json_group_array(v)",
        "sum(k)",
        "min(c)",
        "max(c)",
        "max(v) FILTER (WHERE k > 5)",
        "min(k) FILTER (WHERE g <> 1)",
    ];
    for frame in frames {
        for call in calls {
            let sql = format!("SELECT id, {call} OVER ({frame}) FROM r ORDER BY id");
            common::same_outcome(&mut b, &s, &sql);
        }
    }
}
