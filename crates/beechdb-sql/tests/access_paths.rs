//! Access paths give exactly SQLite's rows, across storage classes and affinities:
//! equality joins without an index (read through an in-memory hash of the inner rows:
//! integers and integral reals meet, numeric text meets numbers only where affinity converts
//! it, text meets text in the comparison's collation, NULL meets nothing, LEFT JOINs keep
//! their unmatched rows), and ranges on an indexed
//! numeric column (text and blobs above every number, NULL in no range); index lookups
//! that turn into a hash of the whole table when there are many of them; an inner join
//! that starts at the table a condition lets it read by key, or at a much smaller table;
//! min and max read at one end of an index, and `count(*)` of a whole table its count; an
//! index equality, `IN` list, OR of equalities or numeric range of constants that reads
//! the index alone when the rowid is all the statement needs; `IN (list)` on the rowid or
//! an indexed column, each value looked up; a sort for a LIMIT that drops rows early.

mod common;

use beechdb_sql::{Database, Value};

/// Runs each query on both engines and compares the rows, sorted.
fn same_rows(ours: &mut beechdb_sql::Connection, lite: &rusqlite::Connection, queries: &[String]) {
    for q in queries {
        common::same_rows(ours, lite, q, true);
    }
}

#[test]
fn ranges_on_indexed_numeric_columns_match_sqlite() {
    let setup = "CREATE TABLE r(i INTEGER, f REAL, n NUMERIC, tag);
                 CREATE INDEX r_i ON r(i); CREATE INDEX r_f ON r(f, tag); CREATE UNIQUE INDEX r_n ON r(n);";
    let db = Database::open_in_memory().unwrap();
    let mut ours = db.connect();
    let lite = rusqlite::Connection::open_in_memory().unwrap();
    ours.execute_batch(setup).unwrap();
    lite.execute_batch(setup).unwrap();
    let values = [
        "-5",
        "0",
        "1",
        "2",
        "2.5",
        "3",
        "'4'",
        "'abc'",
        "X'01'",
        "NULL",
        "9007199254740993",
        "9007199254740992.0",
        "-1e300",
        "1e300",
        "'10'",
        "7",
    ];
    for (k, v) in values.iter().enumerate() {
        let sql = format!(
            "INSERT INTO r VALUES ({v}, {v}, CASE WHEN {k} = 9 THEN NULL ELSE {v} END, {k})"
        );
        ours.execute(&sql, &[]).unwrap();
        lite.execute(&sql, []).unwrap();
    }
    let bounds = [
        "1",
        "2.5",
        "'2'",
        "'abc'",
        "NULL",
        "-1e301",
        "9007199254740992",
        "'zzz'",
        "X'00'",
    ];
    let mut queries = Vec::new();
    for c in ["i", "f", "n"] {
        for a in bounds {
            for op in [">", ">=", "<", "<="] {
                queries.push(format!("SELECT tag FROM r WHERE {c} {op} {a}"));
                queries.push(format!("SELECT tag FROM r WHERE {a} {op} {c}"));
            }
            for b in bounds {
                queries.push(format!("SELECT tag FROM r WHERE {c} BETWEEN {a} AND {b}"));
            }
        }
    }
    same_rows(&mut ours, &lite, &queries);
    let plan = ours
        .query(
            "EXPLAIN QUERY PLAN SELECT tag FROM r WHERE i BETWEEN 1 AND 3",
            &[],
        )
        .unwrap();
    assert_eq!(
        plan.rows[0][3],
        Value::from("SEARCH r USING INDEX r_i (i>? AND i<?)")
    );
}

#[test]
fn equality_joins_without_an_index_match_sqlite() {
    let setup = "
        CREATE TABLE a(k, ki INTEGER, kt TEXT, kr REAL, kc TEXT COLLATE NOCASE, kq TEXT COLLATE RTRIM, tag);
        CREATE TABLE b(k, ki INTEGER, kt TEXT, kr REAL, kc TEXT COLLATE NOCASE, kq TEXT COLLATE RTRIM, tag);";
    let values = [
        "'ABC'",
        "'abc '",
        "'Abc  '",
        "0.30000000000000004",
        "'0.3'",
        "0.1 + 0.2",
        "'1e3'",
        "'-0'",
        "1",
        "2",
        "2.0",
        "'2'",
        "'2.0'",
        "' 2'",
        "3.5",
        "'3.5'",
        "NULL",
        "'x'",
        "X'02'",
        "9007199254740993",
        "9007199254740992.0",
        "-0.0",
        "0",
        "'abc'",
        "1e3",
        "'1000'",
        // Text that spells an integer in a collation only, and integers' neighbours.
        "'2 '",
        "'2  '",
        "'-5'",
        "-5",
        "'007'",
        "'1000.0'",
    ];
    let db = Database::open_in_memory().unwrap();
    let mut ours = db.connect();
    let lite = rusqlite::Connection::open_in_memory().unwrap();
    ours.execute_batch(setup).unwrap();
    lite.execute_batch(setup).unwrap();
    for (t, n) in [("a", 0), ("b", 7)] {
        for (i, v) in values.iter().enumerate() {
            let sql = format!(
                "INSERT INTO {t} VALUES ({v}, {v}, {v}, {v}, {v}, {v}, {})",
                i + n
            );
            ours.execute(&sql, &[]).unwrap();
            lite.execute(&sql, []).unwrap();
        }
    }
    // Text is hashed too, in the comparison's collation: every pair of columns, both
    // ways round, with and without an explicit COLLATE, and expressions on either side.
    let cols = ["k", "ki", "kt", "kr", "kc", "kq"];
    let mut queries = Vec::new();
    for x in cols {
        for y in cols {
            queries.push(format!("SELECT a.tag, b.tag FROM a, b WHERE a.{x} = b.{y}"));
            queries.push(format!(
                "SELECT a.tag, b.tag FROM a LEFT JOIN b ON b.{y} = a.{x}"
            ));
            queries.push(format!(
                "SELECT a.tag, b.tag FROM a JOIN b ON a.{x} = b.{y} + 0"
            ));
            queries.push(format!(
                "SELECT a.tag, b.tag FROM a JOIN b ON a.{x} = b.{y} || ''"
            ));
            // A derived table's expression columns have no affinity: TEXT affinity on the
            // other side makes their numbers text.
            queries.push(format!(
                "SELECT a.tag, s.t FROM a JOIN (SELECT {y} + 0 AS v, tag AS t FROM b) s ON a.{x} = s.v"
            ));
            for coll in ["NOCASE", "RTRIM", "BINARY"] {
                queries.push(format!(
                    "SELECT a.tag, b.tag FROM a JOIN b ON a.{x} = b.{y} COLLATE {coll}"
                ));
            }
        }
    }
    same_rows(&mut ours, &lite, &queries);
}

#[test]
fn many_index_lookups_hashed_match_sqlite() {
    let setup = "CREATE TABLE o(x, tag); CREATE TABLE i(k INTEGER, r REAL, t TEXT, tag);
                 CREATE INDEX i_k ON i(k); CREATE INDEX i_r ON i(r); CREATE INDEX i_t ON i(t);";
    let db = Database::open_in_memory().unwrap();
    let mut ours = db.connect();
    let lite = rusqlite::Connection::open_in_memory().unwrap();
    ours.execute_batch(setup).unwrap();
    lite.execute_batch(setup).unwrap();
    let kinds = [
        "{n}", "{n}.0", "'{n}'", "'x{n}'", "NULL", "{n}.5", "X'0{d}'",
    ];
    let mut inserts = Vec::new();
    // 700 outer rows probe a 100-row inner table: past 64 lookups, and 4 x 64 > 100.
    for n in 0..700 {
        let v = kinds[n % kinds.len()]
            .replace("{n}", &(n % 60).to_string())
            .replace("{d}", &(n % 10).to_string());
        inserts.push(format!("INSERT INTO o VALUES ({v}, {n})"));
    }
    for n in 0..100 {
        let v = kinds[n % kinds.len()]
            .replace("{n}", &(n % 50).to_string())
            .replace("{d}", &(n % 10).to_string());
        inserts.push(format!("INSERT INTO i VALUES ({v}, {v}, {v}, {n})"));
    }
    for sql in &inserts {
        ours.execute(sql, &[]).unwrap();
        lite.execute(sql, []).unwrap();
    }
    let mut queries = Vec::new();
    for c in ["k", "r", "t"] {
        queries.push(format!("SELECT o.tag, i.tag FROM o, i WHERE i.{c} = o.x"));
        queries.push(format!(
            "SELECT o.tag, i.tag FROM o LEFT JOIN i ON i.{c} = o.x"
        ));
        queries.push(format!(
            "SELECT count(*), sum(i.tag) FROM o JOIN i ON o.x = i.{c}"
        ));
    }
    same_rows(&mut ours, &lite, &queries);
}

#[test]
fn an_inner_join_starts_at_the_table_read_by_key_and_matches_sqlite() {
    let setup = "CREATE TABLE big(id INTEGER PRIMARY KEY, k INTEGER, tag TEXT);
                 CREATE TABLE small(id INTEGER PRIMARY KEY, k INTEGER, note TEXT);
                 CREATE TABLE mid(id INTEGER PRIMARY KEY, k INTEGER);
                 CREATE INDEX big_k ON big(k); CREATE INDEX small_k ON small(k);
                 CREATE INDEX mid_k ON mid(k);";
    let (_db, mut ours, lite) = common::both(setup);
    let mut fill = String::from("BEGIN;");
    for i in 1..=400 {
        let k = if i % 37 == 0 {
            "NULL".to_string()
        } else {
            (i % 50).to_string()
        };
        fill += &format!("INSERT INTO big VALUES ({i}, {k}, 'b{i}');");
        if i <= 60 {
            fill += &format!("INSERT INTO small VALUES ({i}, {}, 's{i}');", i % 25);
            fill += &format!("INSERT INTO mid VALUES ({i}, '{}');", i % 10);
        }
    }
    fill += "COMMIT;";
    ours.execute_batch(&fill).unwrap();
    lite.execute_batch(&fill).unwrap();
    // The FROM clause names the big table first; the small one is read by key.
    let plan = common::plan_of(
        &mut ours,
        "SELECT * FROM big, small WHERE big.k = small.k AND small.id = 7",
    );
    assert_eq!(
        plan,
        [
            "SEARCH small USING INTEGER PRIMARY KEY (rowid=?)",
            "SEARCH big USING INDEX big_k (k=?)"
        ]
    );
    // With no such condition, the small table goes first when the big one is then read
    // by key.
    let plan = common::plan_of(&mut ours, "SELECT * FROM big, small WHERE big.k = small.k");
    assert_eq!(plan, ["SCAN small", "SEARCH big USING INDEX big_k (k=?)"]);
    // A start read by key that would leave the other table scanned again for each of its
    // rows (no key, no equality with a column to hash): the other table goes first, and
    // this one is read by key from it.
    let self_join = "SELECT count(*) FROM big a JOIN big b ON a.id = b.id + 1 WHERE a.k = 5";
    assert_eq!(
        common::plan_of(&mut ours, self_join),
        ["SCAN b", "SEARCH a USING INTEGER PRIMARY KEY (rowid=?)"]
    );
    // Neither read by key, the equality's bare column on the second table's side: the
    // table whose column it is comes second, read through a hash of its rows, rather than
    // scanned again for each row of the other (a product of their sizes).
    let unindexed = "CREATE TABLE p(n, m); CREATE TABLE q(n, m);
                     INSERT INTO p SELECT id % 40, id FROM big WHERE id <= 300;
                     INSERT INTO q SELECT id, id % 7 FROM big WHERE id <= 200;";
    ours.execute_batch(unindexed).unwrap();
    lite.execute_batch(unindexed).unwrap();
    let hashed = "SELECT count(*) FROM q, p WHERE p.n = q.n * 2 + 1";
    assert_eq!(common::plan_of(&mut ours, hashed), ["SCAN q", "SCAN p"]);
    let by_expression = "SELECT count(*) FROM p, q WHERE p.n = q.n * 2 + 1";
    assert_eq!(
        common::plan_of(&mut ours, by_expression),
        ["SCAN q", "SCAN p"]
    );
    // (With no bare column on either side there is nothing to hash: FROM order.)
    let neither = "SELECT count(*) FROM p, q WHERE p.n + 0 = q.n * 2 + 1";
    assert_eq!(common::plan_of(&mut ours, neither), ["SCAN p", "SCAN q"]);
    let queries: Vec<String> = [
        self_join,
        hashed,
        by_expression,
        neither,
        "SELECT p.m, q.m FROM p, q WHERE p.n = q.n * 2 + 1 AND q.m < 3",
        "SELECT p.m, q.n FROM p, q WHERE p.n = q.m + 0.0 AND q.n < 20",
        "SELECT p.m, q.n FROM p, q WHERE p.n = q.m || '' AND q.n < 20",
        "SELECT a.id, b.tag FROM big a, big b WHERE b.k = 7 AND a.id = b.id * 2 - 1",
        "SELECT a.id, b.id FROM big a, small b WHERE a.k = 3 AND a.id + 0 = b.id + 5",
        "SELECT * FROM big, small WHERE big.k = small.k",
        "SELECT big.id, small.id FROM big, small WHERE big.id = small.id",
        "SELECT * FROM big, small WHERE big.k = small.k AND small.id = 7",
        "SELECT big.id, small.note FROM big JOIN small ON big.k = small.k WHERE small.id BETWEEN 3 AND 9",
        "SELECT * FROM big, small WHERE big.k = small.k AND small.k < 4",
        "SELECT big.tag, mid.id, small.id FROM big, mid, small \
         WHERE big.k = mid.k AND mid.k = small.k AND small.id = 12",
        "SELECT count(*), sum(big.id) FROM big, small WHERE big.k = small.k AND small.id > 50",
        "SELECT * FROM big, small WHERE big.k = small.k AND small.id = 7 AND big.id % 3 = 0",
        "SELECT * FROM small LEFT JOIN big ON big.k = small.k WHERE small.id = 5",
        "SELECT * FROM big, small WHERE big.id = small.k + 100 AND small.note = 's8'",
        // An inner table scanned once, its own conditions applied as it is read.
        "SELECT big.id, mid.id FROM big, mid WHERE big.id % 50 = mid.k AND mid.k + 0 < 3",
        "SELECT small.id, (SELECT count(*) FROM big b2, mid WHERE b2.tag = 'b' || mid.id          AND mid.id + 0 < small.id) FROM small",
    ]
    .map(String::from)
    .to_vec();
    same_rows(&mut ours, &lite, &queries);
}

#[test]
fn min_and_max_read_one_end_of_an_index_and_match_sqlite() {
    let setup = "CREATE TABLE m(id INTEGER PRIMARY KEY, n, t TEXT COLLATE NOCASE, d INTEGER);
                 CREATE INDEX m_n ON m(n); CREATE INDEX m_t ON m(t); CREATE INDEX m_d ON m(d DESC);
                 CREATE TABLE empty(id INTEGER PRIMARY KEY, n); CREATE INDEX empty_n ON empty(n);";
    let (_db, mut ours, lite) = common::both(setup);
    let fill =
        "INSERT INTO m VALUES (5, NULL, 'beta', 3), (9, 2.5, 'Alpha', NULL), (2, 'x', 'alpha', 7),
                (7, -4, NULL, 1), (3, X'00', 'Gamma', 9), (11, NULL, 'b', 2);";
    ours.execute_batch(fill).unwrap();
    lite.execute_batch(fill).unwrap();
    let plan = common::plan_of(&mut ours, "SELECT min(n) FROM m");
    assert_eq!(plan, ["SEARCH m USING INDEX m_n"]);
    let queries: Vec<String> = [
        "SELECT min(n) FROM m",
        "SELECT max(n) FROM m",
        "SELECT min(t), max(t) FROM m",
        "SELECT min(t) FROM m",
        "SELECT max(t) FROM m",
        "SELECT min(d) FROM m",
        "SELECT max(d) FROM m",
        "SELECT min(id) FROM m",
        "SELECT max(rowid) FROM m",
        "SELECT min(n) FROM empty",
        "SELECT max(id) FROM empty",
        "SELECT max(n) FROM m WHERE id > 4",
        "SELECT min(n) AS low FROM m ORDER BY 1",
    ]
    .map(String::from)
    .to_vec();
    same_rows(&mut ours, &lite, &queries);
    // All NULL: no value to find.
    ours.execute_batch("UPDATE m SET n = NULL").unwrap();
    lite.execute_batch("UPDATE m SET n = NULL").unwrap();
    same_rows(
        &mut ours,
        &lite,
        &[
            "SELECT min(n), 1 FROM m".into(),
            "SELECT min(n) FROM m".into(),
            "SELECT max(n) FROM m".into(),
        ],
    );
}

/// `SELECT count(*) FROM t` alone is the table's count (`Txn::len`): what the statement's
/// transaction sees, its own changes included, and not another connection's later commit.
#[test]
fn count_of_a_whole_table_is_its_count_as_the_transaction_sees_it() {
    let setup = "CREATE TABLE c(id INTEGER PRIMARY KEY, v); CREATE TABLE empty(x);
                 CREATE VIEW half AS SELECT * FROM c WHERE id % 2 = 0;";
    let db = Database::open_in_memory().unwrap();
    let (mut ours, mut other) = (db.connect(), db.connect());
    let lite = rusqlite::Connection::open_in_memory().unwrap();
    ours.execute_batch(setup).unwrap();
    lite.execute_batch(setup).unwrap();
    let count = |c: &mut beechdb_sql::Connection, sql: &str| c.query(sql, &[]).unwrap().rows;
    for step in [
        "WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < 500)
         INSERT INTO c(v) SELECT x FROM s",
        "DELETE FROM c WHERE id % 7 = 0",
        "BEGIN; INSERT INTO c(v) VALUES (1), (2); DELETE FROM c WHERE id < 10",
        "INSERT INTO c(v) SELECT v FROM c",
        "COMMIT",
    ] {
        ours.execute_batch(step).unwrap();
        lite.execute_batch(step).unwrap();
        let queries = [
            "SELECT count(*) FROM c",
            "SELECT count(*) FROM empty",
            "SELECT count(*) FROM half",
            "SELECT count(*) FROM c LIMIT 1 OFFSET 1",
            "WITH c AS (SELECT 1) SELECT count(*) FROM c",
        ]
        .map(String::from);
        same_rows(&mut ours, &lite, &queries);
    }
    assert_eq!(
        common::plan_of(&mut ours, "SELECT count(*) FROM c"),
        ["SCAN c"]
    );
    // A transaction's count stays its snapshot's while another connection commits.
    ours.execute_batch("BEGIN").unwrap();
    let before = count(&mut ours, "SELECT count(*) FROM c");
    other.execute_batch("INSERT INTO c(v) VALUES (7)").unwrap();
    assert_eq!(count(&mut ours, "SELECT count(*) FROM c"), before);
    ours.execute_batch("COMMIT").unwrap();
    let after = count(&mut ours, "SELECT count(*) FROM c");
    assert_eq!(after[0][0].as_i64(), before[0][0].as_i64() + 1);
}

#[test]
fn rowid_ranges_and_lookups_drop_only_the_conditions_they_make_true() {
    // A rowid range from integer bounds reads exactly the rows its conditions select, so
    // they are not checked again; any other bound (a real, text, NULL, a strict
    // comparison, a second bound on the same side) still filters every row.
    let (_db, mut ours, lite) = common::both(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v);
         INSERT INTO t VALUES(1,'a'),(2,'b'),(3,'c'),(4,'d'),(5,'e'),(6,'f');
         CREATE TABLE u(id INTEGER PRIMARY KEY, t_id, w);
         INSERT INTO u VALUES(10, 2, 'x'),(11, '3', 'y'),(12, 3.0, 'z'),(13, 3.5, 'q'),(14, NULL, 'n');",
    );
    let bounds = [
        "1", "2", "6", "1.5", "2.0", "3.5", "'2'", "'abc'", "NULL", "-9", "99",
    ];
    let mut queries = Vec::new();
    for lo in bounds {
        for hi in bounds {
            queries.push(format!(
                "SELECT id, v FROM t WHERE id BETWEEN {lo} AND {hi}"
            ));
            queries.push(format!("SELECT id FROM t WHERE id >= {lo} AND id <= {hi}"));
            queries.push(format!("SELECT id FROM t WHERE id > {lo} AND id < {hi}"));
            queries.push(format!("SELECT id FROM t WHERE id >= {lo} AND id >= {hi}"));
            queries.push(format!(
                "SELECT count(*), sum(id) FROM t WHERE rowid BETWEEN {lo} AND {hi} AND v <> 'c'"
            ));
        }
        queries.push(format!("SELECT id, v FROM t WHERE id = {lo}"));
        queries.push(format!("SELECT id FROM t WHERE {lo} <= id"));
    }
    // Lookups by rowid from another table's values (text, reals, NULL).
    queries.push("SELECT u.id, t.v FROM u JOIN t ON t.id = u.t_id".into());
    queries.push("SELECT u.id, t.v FROM u LEFT JOIN t ON t.id = u.t_id AND t.v <> 'b'".into());
    queries.push("SELECT u.id, t.v FROM u, t WHERE t.id = u.t_id AND u.w <> 'y'".into());
    same_rows(&mut ours, &lite, &queries);
    // Prepared: the same plan with integer, real and text bounds.
    let st = ours
        .prepare("SELECT id FROM t WHERE id BETWEEN ?1 AND ?2")
        .unwrap();
    let ids = |c: &mut beechdb_sql::Connection, lo: Value, hi: Value| -> Vec<i64> {
        c.run(&st, &[lo, hi])
            .unwrap()
            .rows
            .iter()
            .map(|r| r[0].as_i64())
            .collect()
    };
    assert_eq!(ids(&mut ours, 2.into(), 4.into()), [2, 3, 4]);
    assert_eq!(ids(&mut ours, Value::Real(2.5), Value::Real(4.5)), [3, 4]);
    assert_eq!(ids(&mut ours, "2".into(), "3".into()), [2, 3]);
    assert_eq!(ids(&mut ours, 5.into(), Value::Null), Vec::<i64>::new());
}

#[test]
fn index_lookups_of_constants_read_only_the_index_when_the_rowid_is_all_they_need() {
    // Columns of every affinity and collation, holding values of every storage class: an
    // equality with a constant finds exactly SQLite's rows, through the index alone when
    // nothing but the rowid is read.
    let setup = "CREATE TABLE c(id INTEGER PRIMARY KEY, i INTEGER, r REAL, n NUMERIC, t TEXT,
                   nc TEXT COLLATE NOCASE, rt TEXT COLLATE RTRIM, b BLOB, tag);
                 CREATE INDEX c_i ON c(i); CREATE INDEX c_r ON c(r); CREATE INDEX c_n ON c(n);
                 CREATE INDEX c_t ON c(t); CREATE INDEX c_nc ON c(nc); CREATE INDEX c_rt ON c(rt);
                 CREATE INDEX c_b ON c(b);";
    let (_db, mut ours, lite) = common::both(setup);
    let values = [
        "1",
        "1.0",
        "1.5",
        "'1'",
        "' 1'",
        "'1.0'",
        "'abc'",
        "'ABC'",
        "'abc  '",
        "X'01'",
        "X'6162'",
        "NULL",
        "-0.0",
        "9223372036854775807",
        "9223372036854775806.0",
        "1e300",
        "2",
        "'3'",
        "-7",
    ];
    for (k, v) in values.iter().enumerate() {
        let row = format!("INSERT INTO c VALUES ({k}, {v}, {v}, {v}, {v}, {v}, {v}, {v}, {k})");
        ours.execute(&row, &[]).unwrap();
        lite.execute(&row, []).unwrap();
    }
    let mut queries = Vec::new();
    for col in ["i", "r", "n", "t", "nc", "rt", "b"] {
        for v in values {
            queries.push(format!("SELECT id FROM c WHERE {col} = {v}"));
            queries.push(format!("SELECT count(*) FROM c WHERE {v} = {col}"));
            queries.push(format!("SELECT id, tag FROM c WHERE {col} = {v}"));
        }
        // As exact: `IN (constants)`, `c = x OR c = y` (the same), and a range with
        // constant bounds on a numeric column.
        for w in values.windows(3) {
            let (a, b, c) = (w[0], w[1], w[2]);
            for cond in [
                format!("{col} IN ({a}, {b}, {c}, {a})"),
                format!("{col} = {a} OR {col} = {b}"),
                format!("{a} = {col} OR {col} = {b} OR {c} = {col}"),
                format!("({col} = {a} OR {col} = {b}) AND tag > 3"),
                format!("{col} = {a} OR tag = {b}"),
                format!("{col} BETWEEN {a} AND {b}"),
                format!("{col} >= {a}"),
                format!("{col} <= {b}"),
                format!("{col} > {a} AND {col} <= {c}"),
                format!("{a} <= {col} AND {col} < {b}"),
            ] {
                queries.push(format!("SELECT count(*) FROM c WHERE {cond}"));
                queries.push(format!("SELECT id, tag FROM c WHERE {cond}"));
            }
        }
        let plan = common::plan_of(&mut ours, &format!("SELECT id FROM c WHERE {col} = 1"));
        assert_eq!(
            plan,
            [format!("SEARCH c USING COVERING INDEX c_{col} ({col}=?)")]
        );
    }
    same_rows(&mut ours, &lite, &queries);
    for (q, want) in [
        (
            "SELECT count(*) FROM c WHERE i IN (1, 2)",
            "SEARCH c USING COVERING INDEX c_i (i=?)",
        ),
        (
            "SELECT id FROM c WHERE t = 'a' OR t = 'b'",
            "SEARCH c USING COVERING INDEX c_t (t=?)",
        ),
        (
            "SELECT count(*) FROM c WHERE n BETWEEN 1 AND 3",
            "SEARCH c USING COVERING INDEX c_n (n>? AND n<?)",
        ),
        // A bound that is not a constant: the range is checked again on each row.
        ("SELECT count(*) FROM c WHERE n BETWEEN 1 AND tag", "SCAN c"),
    ] {
        assert_eq!(common::plan_of(&mut ours, q), vec![want.to_string()], "{q}");
    }
    let st = ours
        .prepare("SELECT count(*) FROM c WHERE i IN (?1, ?2) OR i = ?3")
        .unwrap();
    let got = ours
        .run(
            &st,
            &[Value::Integer(1), Value::from("3"), Value::Real(-7.0)],
        )
        .unwrap()
        .rows;
    let want = common::sqlite_rows(
        &lite,
        "SELECT count(*) FROM c WHERE i IN (1, '3') OR i = -7.0",
    );
    assert_eq!(common::printed(&got[0][0]), want[0][0]);
    // Parameters, and the transaction's own changes (merged with the index as it reads).
    let by_i = ours
        .prepare("SELECT id FROM c WHERE i = ?1 ORDER BY id")
        .unwrap();
    let check = |ours: &mut beechdb_sql::Connection, lite: &rusqlite::Connection| {
        for (p, literal) in [
            (Value::Integer(1), "1"),
            (Value::Real(1.0), "1.0"),
            (Value::from("1"), "'1'"),
        ] {
            let got: Vec<i64> = ours
                .run(&by_i, &[p])
                .unwrap()
                .rows
                .iter()
                .map(|r| r[0].as_i64())
                .collect();
            let sql = format!("SELECT id FROM c WHERE i = {literal} ORDER BY id");
            let want: Vec<i64> = common::sqlite_rows(lite, &sql)
                .iter()
                .map(|r| {
                    r[0].trim_start_matches("Integer(")
                        .trim_end_matches(')')
                        .parse()
                        .unwrap()
                })
                .collect();
            assert_eq!(got, want, "{sql}");
        }
    };
    let change = "BEGIN; DELETE FROM c WHERE id = 0; INSERT INTO c(id, i) VALUES (99, 1);";
    ours.execute_batch(change).unwrap();
    lite.execute_batch(change).unwrap();
    check(&mut ours, &lite);
    ours.execute_batch("ROLLBACK").unwrap();
    lite.execute_batch("ROLLBACK").unwrap();
    check(&mut ours, &lite);
}

/// A WHERE condition on a LEFT JOIN's right table sees the NULL row an unmatched outer row
/// gets: it is never used to filter that table's rows before the join (`x IS NULL`, the
/// anti-join idiom, holds only there). Found by the differential test.
#[test]
fn where_conditions_on_a_left_joins_table_see_its_null_row() {
    let (_db, mut ours, lite) = common::both(
        "CREATE TABLE o(id INTEGER PRIMARY KEY, k);
         CREATE TABLE i(id INTEGER PRIMARY KEY, k, v);
         INSERT INTO o VALUES(1, 1), (2, 2), (3, 3), (4, NULL);
         INSERT INTO i VALUES(10, 1, 'a'), (11, 1, NULL), (12, 3, 'c');",
    );
    for sql in [
        "SELECT o.id, i.id FROM o LEFT JOIN i ON i.k = o.k WHERE i.id IS NULL",
        "SELECT o.id, i.id FROM o LEFT JOIN i ON 1 WHERE i.v IS NULL",
        "SELECT o.id, i.id FROM o LEFT JOIN i ON i.k = o.k WHERE i.v IS NULL OR i.v = 'c'",
        "SELECT o.id, i.id FROM o LEFT JOIN i ON i.k = o.k WHERE coalesce(i.v, 'none') = 'none'",
        "SELECT o.id, i.id FROM o LEFT JOIN i ON i.k = o.k AND i.v IS NOT NULL WHERE i.id IS NULL",
        "SELECT o.id, i.id FROM o LEFT JOIN i ON i.k = o.k WHERE i.id = 12",
    ] {
        common::same_rows(&mut ours, &lite, sql, true);
    }
}

/// An index is used for `col = other` only when the comparison converts none of the
/// column's values: a TEXT column compared with a number compares its text as numbers
/// ('7' = 7.0), which no text key finds. Found by the differential test.
#[test]
fn an_index_is_not_used_where_the_comparison_converts_its_column() {
    let (_db, mut ours, lite) = common::both(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, s TEXT, b);
         CREATE TABLE r(id INTEGER PRIMARY KEY, x REAL, y TEXT);
         CREATE INDEX t_s ON t(s); CREATE INDEX t_b ON t(b);
         INSERT INTO t VALUES(1, '7', 7), (2, 'a', '7'), (3, '7.0', 7.5), (4, NULL, 'a');
         INSERT INTO r VALUES(1, ' 7', '7'), (2, 7.5, 'a'), (3, NULL, '7.5');",
    );
    for sql in [
        "SELECT t.id, r.id FROM r JOIN t ON t.s = r.x",
        "SELECT t.id, r.id FROM r JOIN t ON t.s = r.y",
        "SELECT t.id, r.id FROM r JOIN t ON t.b = r.x",
        "SELECT t.id, r.id FROM r JOIN t ON t.b = r.y",
        "SELECT t.id FROM t WHERE s = 7",
        "SELECT t.id FROM t WHERE b = '7'",
    ] {
        common::same_rows(&mut ours, &lite, sql, true);
    }
}

/// ORDER BY the rowid (or its INTEGER PRIMARY KEY alias) of one table reads the table in
/// that order, either way, with no sort, and stops at the LIMIT: the rows are SQLite's,
/// in a transaction's own writes too.
#[test]
fn order_by_the_rowid_reads_in_rowid_order_and_stops_at_the_limit() {
    let (_db, mut ours, lite) = common::both(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300)
         INSERT INTO t SELECT i * 3, i % 7 FROM n;
         CREATE TABLE u(a, b); INSERT INTO u SELECT v, id FROM t;",
    );
    let queries = [
        "SELECT * FROM t ORDER BY id DESC LIMIT 5",
        "SELECT * FROM t ORDER BY id LIMIT 4 OFFSET 10",
        "SELECT id FROM t ORDER BY rowid DESC LIMIT 3 OFFSET 2",
        "SELECT * FROM t WHERE v = 3 ORDER BY id DESC LIMIT 4",
        "SELECT * FROM t WHERE id BETWEEN 100 AND 200 ORDER BY id DESC LIMIT 6",
        "SELECT * FROM t WHERE id > 850 ORDER BY id DESC",
        "SELECT DISTINCT v FROM t ORDER BY id DESC LIMIT 3",
        "SELECT a, b FROM u ORDER BY rowid DESC LIMIT 3",
        "SELECT * FROM t ORDER BY id DESC LIMIT 0",
        "SELECT * FROM t ORDER BY id DESC LIMIT -1 OFFSET 295",
        "SELECT * FROM t ORDER BY id DESC, v LIMIT 2",
    ];
    for sql in queries {
        common::same_rows(&mut ours, &lite, sql, false);
    }
    for sql in [
        "BEGIN",
        "INSERT INTO t VALUES (2000, 1), (1, 2)",
        "DELETE FROM t WHERE id = 900",
    ] {
        ours.execute_batch(sql).unwrap();
        lite.execute_batch(sql).unwrap();
    }
    for sql in queries {
        common::same_rows(&mut ours, &lite, sql, false);
    }
    assert_eq!(
        common::plan_of(&mut ours, "SELECT * FROM t ORDER BY id DESC LIMIT 5"),
        vec!["SCAN t"]
    );
}

/// ORDER BY with a LIMIT that an index's order satisfies reads the index in that order
/// (backwards for the opposite direction) and stops at the LIMIT: random orders, filters,
/// limits and offsets over columns of mixed storage classes, NULLs, a NOCASE column (with
/// an index of another collation on it) and a DESC index, each ended by the rowid so that the order is total, inside a transaction that
/// has written too; the rows (in order) must be SQLite's. Orders no index follows are sorted
/// as before, and give the same rows.
#[test]
fn order_by_an_indexed_order_reads_the_index_and_matches_sqlite() {
    use rand::{Rng, SeedableRng};
    let (_db, mut ours, lite) = common::both(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, a, b TEXT COLLATE NOCASE, c REAL, d INTEGER);
         CREATE INDEX t_0 ON t(b COLLATE BINARY);
         CREATE INDEX t_a ON t(a); CREATE INDEX t_b ON t(b); CREATE INDEX t_c ON t(c DESC);
         CREATE INDEX t_dc ON t(d, c); CREATE INDEX t_bd ON t(b, d);",
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let value = |rng: &mut rand::rngs::StdRng| match rng.gen_range(0..6) {
        0 => "NULL".to_string(),
        1 => format!("{}", rng.gen_range(-20..20)),
        2 => format!("{}.5", rng.gen_range(-20..20)),
        3 => format!(
            "'{}'",
            ["x", "X", "y", "abc", "Abd", "10"][rng.gen_range(0..6)]
        ),
        4 => format!("X'0{}'", rng.gen_range(0..9)),
        _ => format!("{}", rng.gen_range(0..5)),
    };
    let insert = |ours: &mut beechdb_sql::Connection, rng: &mut rand::rngs::StdRng, n: usize| {
        for _ in 0..n {
            let row: Vec<String> = (0..4).map(|_| value(rng)).collect();
            let sql = format!("INSERT INTO t(a, b, c, d) VALUES ({})", row.join(", "));
            ours.execute(&sql, &[]).unwrap();
            lite.execute(&sql, []).unwrap();
        }
    };
    insert(&mut ours, &mut rng, 400);
    ours.execute("BEGIN", &[]).unwrap();
    lite.execute("BEGIN", []).unwrap();
    insert(&mut ours, &mut rng, 100);
    let orders = [
        "a",
        "b",
        "c",
        "d, c",
        "b, d",
        "a, c",
        "c, a",
        "d",
        "b COLLATE BINARY",
    ];
    let filters = [
        "",
        "WHERE d = 2",
        "WHERE d > 1",
        "WHERE a > 0",
        "WHERE b = 'x'",
        "WHERE c < 3 AND d IS NOT NULL",
        "WHERE d > 'a'",
        "WHERE d < 'zz' AND d > 0",
    ];
    let mut index_reads = 0;
    for i in 0..400 {
        let order = orders[rng.gen_range(0..orders.len())];
        let dir = ["", " DESC"][rng.gen_range(0..2)];
        let terms: Vec<String> = order.split(", ").map(|t| format!("{t}{dir}")).collect();
        // The rowid last, mostly in the same direction (else no index follows).
        let id_dir = if rng.gen_ratio(4, 5) {
            dir
        } else {
            [" DESC", ""][(dir == " DESC") as usize]
        };
        let filter = filters[rng.gen_range(0..filters.len())];
        let limit = match rng.gen_range(0..4) {
            0 => format!("LIMIT {}", rng.gen_range(0..30)),
            1 => format!(
                "LIMIT {} OFFSET {}",
                rng.gen_range(1..20),
                rng.gen_range(0..40)
            ),
            2 => "LIMIT -1".to_string(),
            _ => format!("LIMIT {}", rng.gen_range(1..5)),
        };
        let sql = format!(
            "SELECT id, a, b, c, d FROM t {filter} ORDER BY {}, id{id_dir} {limit}",
            terms.join(", ")
        );
        common::same_rows(&mut ours, &lite, &sql, false);
        if common::plan_of(&mut ours, &sql)
            .iter()
            .all(|l| l != "USE TEMP B-TREE FOR ORDER BY")
        {
            index_reads += 1;
        }
        if i % 50 == 0 {
            insert(&mut ours, &mut rng, 5);
        }
    }
    assert!(
        index_reads > 40,
        "{index_reads} of 400 read in an index's order"
    );
    // The pagination query reads the index backwards, stopping at the LIMIT.
    assert_eq!(
        common::plan_of(
            &mut ours,
            "SELECT * FROM t ORDER BY a DESC, id DESC LIMIT 20"
        ),
        vec!["SCAN t USING INDEX t_a"]
    );
    assert_eq!(
        common::plan_of(&mut ours, "SELECT * FROM t ORDER BY a DESC, id LIMIT 20"),
        vec!["SCAN t", "USE TEMP B-TREE FOR ORDER BY"]
    );
}

#[test]
fn in_lists_on_the_rowid_and_indexed_columns_match_sqlite() {
    let mut setup = String::from(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, i INTEGER, s TEXT, c TEXT COLLATE NOCASE, x);
         CREATE INDEX t_i ON t(i DESC); CREATE INDEX t_s ON t(s); CREATE INDEX t_c ON t(c);
         CREATE INDEX t_x ON t(x);
         CREATE TABLE o(k, v);
         INSERT INTO o VALUES (3, 'a'), ('7', 'b'), (NULL, 'c');",
    );
    let vals = [
        "1", "2.5", "'3'", "'abc'", "'ABC'", "NULL", "X'01'", "7", "7.0", "'7'",
    ];
    for n in 1..=60 {
        let v = vals[n % vals.len()];
        setup += &format!(
            "INSERT INTO t(id, i, s, c, x) VALUES ({n}, {}, {v}, {v}, {v});",
            n % 9
        );
    }
    let (_db, mut ours, lite) = common::both(&setup);
    let queries: Vec<String> = [
        "SELECT * FROM t WHERE id IN (3, '5', 7.0, 8.5, NULL, 3, 1000)",
        "SELECT * FROM t WHERE rowid IN (1, 2) AND i > 0",
        "SELECT * FROM t WHERE i IN (1, '2', 3.0, 4.5, NULL)",
        "SELECT * FROM t WHERE s IN ('abc', 3, 7, '2.5', NULL)",
        "SELECT * FROM t WHERE c IN ('abc', 'x')",
        "SELECT * FROM t WHERE x IN (7, '7', 2.5, X'01')",
        "SELECT * FROM t WHERE i NOT IN (1, 2)",
        "SELECT * FROM t WHERE i IN (1, 2) AND s IN ('abc', 'ABC')",
        "SELECT o.v, t.id FROM o, t WHERE t.id IN (o.k, o.k + 10)",
        "SELECT o.v, t.id FROM o JOIN t ON t.i IN (o.k, 8)",
        "SELECT id FROM t WHERE id IN (SELECT k FROM o)",
        "SELECT id FROM t WHERE i IN (SELECT k FROM o)",
        "SELECT id FROM t WHERE s IN (SELECT v FROM o UNION SELECT 'abc')",
        "SELECT id FROM t WHERE x IN (SELECT k FROM o WHERE k IS NOT NULL)",
        "SELECT id FROM t WHERE id IN (SELECT k FROM o WHERE o.v = t.s)",
        "SELECT id FROM t WHERE id IN (SELECT i FROM t AS t2 WHERE t2.s = 'abc')",
        "SELECT id FROM t WHERE id NOT IN (SELECT k FROM o WHERE k IS NOT NULL)",
        "SELECT o.v, t.id FROM o, t WHERE t.id IN (SELECT k + 1 FROM o)",
        "SELECT count(*) FROM t WHERE i IN (0)",
    ]
    .iter()
    .map(|q| q.to_string())
    .collect();
    same_rows(&mut ours, &lite, &queries);
    for (q, want) in [
        (
            "SELECT * FROM t WHERE id IN (1, 2)",
            "SEARCH t USING INTEGER PRIMARY KEY (rowid=?)",
        ),
        (
            "SELECT * FROM t WHERE i IN (1, 2)",
            "SEARCH t USING INDEX t_i (i=?)",
        ),
        (
            "SELECT * FROM t WHERE id IN (SELECT k FROM o)",
            "SEARCH t USING INTEGER PRIMARY KEY (rowid=?)",
        ),
        (
            "SELECT * FROM t WHERE i IN (SELECT k FROM o)",
            "SEARCH t USING INDEX t_i (i=?)",
        ),
    ] {
        assert_eq!(common::plan_of(&mut ours, q), vec![want.to_string()], "{q}");
    }
    // A subquery naming the table read is no access path: it is checked on each row.
    let correlated = "SELECT * FROM t WHERE id IN (SELECT k FROM o WHERE o.v = t.s)";
    assert_eq!(
        common::plan_of(&mut ours, correlated),
        vec!["SCAN t".to_string()]
    );
    common::same_outcome(
        &mut ours,
        &lite,
        "SELECT id FROM t WHERE id IN (SELECT k, v FROM o)",
    );
    let params = [Value::Integer(4), Value::from("5"), Value::Null];
    let rows = ours
        .query(
            "SELECT id FROM t WHERE id IN (?1, ?2, ?3) ORDER BY id",
            &params,
        )
        .unwrap()
        .rows;
    assert_eq!(rows, vec![vec![Value::Integer(4)], vec![Value::Integer(5)]]);
}

/// A sort for a LIMIT drops a row whose key does not sort before the last of the rows it
/// keeps before decoding the columns only the result reads: the same rows as SQLite's, for
/// keys of every storage class with ties, NULLs, collations, DISTINCT and OFFSET; and a
/// subquery read while the sort runs keeps all its own rows.
#[test]
fn sorts_for_a_limit_keep_exactly_sqlites_rows() {
    let mut setup = String::from(
        "CREATE TABLE s(id INTEGER PRIMARY KEY, k, t TEXT COLLATE NOCASE, pad TEXT, g INTEGER);
         CREATE TABLE small(x);
         INSERT INTO small VALUES (1), (2), (3);",
    );
    let keys = [
        "1", "2.5", "'b'", "'B'", "NULL", "X'01'", "-3", "2", "'a'", "7.0", "7",
    ];
    for n in 0..700 {
        let k = keys[(n * 7) % keys.len()];
        setup += &format!(
            "INSERT INTO s VALUES ({n}, {k}, {k}, '{}', {});",
            "p".repeat(n % 40),
            n % 13
        );
    }
    let (_db, mut ours, lite) = common::both(&setup);
    let mut queries = Vec::new();
    for order in [
        "k, id",
        "k DESC, id",
        "t, id DESC",
        "t COLLATE BINARY DESC, id",
        "k NULLS LAST, id",
        "g * 2 - id % 5, id",
        "length(pad) DESC, id",
    ] {
        for limit in ["1", "10", "95", "10 OFFSET 20", "0"] {
            queries.push(format!("SELECT * FROM s ORDER BY {order} LIMIT {limit}"));
            queries.push(format!(
                "SELECT id, pad FROM s WHERE g > 3 ORDER BY {order} LIMIT {limit}"
            ));
        }
    }
    // Ties: only the keys are compared (which of two tied rows comes is SQLite's choice).
    queries.push("SELECT k FROM s ORDER BY k LIMIT 50".into());
    queries.push("SELECT DISTINCT g FROM s ORDER BY g DESC LIMIT 5".into());
    queries.push("SELECT DISTINCT k, t FROM s ORDER BY t, k LIMIT 7".into());
    // A subquery in the result or per row: the bar stands aside, and the subquery's own
    // sort keeps its rows.
    queries.push(
        "SELECT id, (SELECT x FROM small ORDER BY x DESC LIMIT 1) FROM s ORDER BY g, id LIMIT 5"
            .into(),
    );
    queries.push(
        "SELECT id FROM s WHERE g IN (SELECT x FROM small ORDER BY x LIMIT 2)
         ORDER BY pad DESC, id LIMIT 12"
            .into(),
    );
    // Joins: the bar is the one table's alone (a joined row's columns may be decoded last).
    queries.push(
        "SELECT a.pad, b.x FROM s a JOIN small b ON b.x = a.g % 3 + 1 \
         ORDER BY a.pad DESC, a.id LIMIT 5"
            .into(),
    );
    queries.push(
        "SELECT a.id, b.x FROM s a, small b WHERE b.x < 3 ORDER BY a.k, a.id, b.x LIMIT 9".into(),
    );
    queries.push(
        "SELECT id FROM s AS o WHERE id IN
           (SELECT id FROM s WHERE s.g = o.g ORDER BY length(pad) DESC, id LIMIT 3)
         ORDER BY pad DESC, id LIMIT 12"
            .into(),
    );
    for q in &queries {
        common::same_rows(&mut ours, &lite, q, false);
    }
    // A parameter LIMIT, run again with other values.
    let st = ours
        .prepare("SELECT id FROM s ORDER BY pad, id DESC LIMIT ?1")
        .unwrap();
    for n in [3i64, 200, 0, 1] {
        let got: Vec<Vec<String>> = ours
            .run(&st, &[Value::Integer(n)])
            .unwrap()
            .rows
            .iter()
            .map(|r| r.iter().map(common::printed).collect())
            .collect();
        let want = common::sqlite_rows(
            &lite,
            &format!("SELECT id FROM s ORDER BY pad, id DESC LIMIT {n}"),
        );
        assert_eq!(got, want, "LIMIT {n}");
    }
}

/// A join of a table with a source that is not a table (a common table expression's
/// rows, a subquery's) starts at that source when the table is then read by key from it:
/// a walk up a tree through a recursive CTE reads a row of the table per step (it scanned
/// the table whole at each); when the table would not be read by key, FROM order stays.
/// Rows as SQLite's.
#[test]
fn a_join_with_a_cte_starts_at_the_cte_when_the_table_is_then_read_by_key() {
    let mut setup = String::from(
        "CREATE TABLE tree(id INTEGER PRIMARY KEY, parent INTEGER, name TEXT);
         CREATE INDEX tree_name ON tree(name); BEGIN;",
    );
    for i in 0..500 {
        let parent = if i == 0 {
            "NULL".to_string()
        } else {
            ((i - 1) / 3).to_string()
        };
        setup += &format!("INSERT INTO tree VALUES ({i}, {parent}, 'n{}');", i % 70);
    }
    setup += "COMMIT;";
    let (_db, mut ours, lite) = common::both(&setup);
    let up = "WITH RECURSIVE anc(id) AS (SELECT 499 UNION ALL SELECT parent FROM tree \
              JOIN anc ON tree.id = anc.id WHERE parent IS NOT NULL) SELECT id FROM anc";
    let step =
        "WITH c(k) AS (VALUES (7), (9), (400)) SELECT tree.* FROM tree JOIN c ON tree.id = c.k";
    assert_eq!(
        common::plan_of(&mut ours, step),
        [
            "SCAN c (a subquery, view or CTE)",
            "SEARCH tree USING INTEGER PRIMARY KEY (rowid=?)"
        ]
    );
    let by_name =
        "WITH c(n) AS (VALUES ('n5'), ('n6')) SELECT tree.id FROM tree, c WHERE tree.name = c.n";
    assert_eq!(
        common::plan_of(&mut ours, by_name),
        [
            "SCAN c (a subquery, view or CTE)",
            "SEARCH tree USING INDEX tree_name (name=?)"
        ]
    );
    let unkeyed =
        "WITH c(p) AS (VALUES (3), (4)) SELECT tree.id FROM tree JOIN c ON tree.parent = c.p";
    assert_eq!(
        common::plan_of(&mut ours, unkeyed),
        ["SCAN tree", "SCAN c (a subquery, view or CTE)"]
    );
    let queries: Vec<String> = [
        up,
        step,
        by_name,
        unkeyed,
        "WITH RECURSIVE sub(id, d) AS (SELECT 0, 0 UNION ALL SELECT tree.id, d + 1 FROM tree \
         JOIN sub ON tree.parent = sub.id) SELECT d, count(*) FROM sub GROUP BY d ORDER BY d",
        "SELECT tree.name, s.k FROM tree JOIN (SELECT 11 AS k UNION ALL SELECT 12) s \
         ON tree.id = s.k + 0",
        "SELECT t2.id FROM (SELECT id FROM tree WHERE name = 'n3') s, tree t2 \
         WHERE t2.id = s.id * 2",
    ]
    .map(String::from)
    .to_vec();
    same_rows(&mut ours, &lite, &queries);
}
