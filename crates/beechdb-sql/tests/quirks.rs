//! Names that name nothing are errors before any row is read, as SQLite's prepare makes
//! them, and two of SQLite's defaults that programs count on: a double-quoted name that
//! names no column is a string (Django writes `WHERE tbl_name = "t"`), both checked
//! against SQLite (rusqlite, bundled); and the math functions SQLite builds in (SQLITE_ENABLE_MATH_
//! FUNCTIONS, on in its own builds but not in rusqlite's, so their results here are the
//! ones SQLite 3.40 gives, copied from it), with `sqlite_compileoption_used` saying so
//! (Django asks before registering its own).

mod common;

use beechdb_sql::Value;

#[test]
fn a_double_quoted_name_that_names_no_column_is_a_string() {
    let (_db, mut ours, lite) =
        common::both("CREATE TABLE t(a, b); INSERT INTO t VALUES ('x', 1), ('a', 2);");
    for sql in [
        "SELECT a FROM t WHERE a = \"x\"",
        "SELECT \"zz\", \"a\" FROM t ORDER BY b",
        "SELECT sql FROM sqlite_master WHERE tbl_name = \"t\"",
        "SELECT a FROM t WHERE \"a\" = 'a'",
        "SELECT * FROM t WHERE nosuch = 1",
        "SELECT \"it\"\"s\" FROM t LIMIT 1",
        "SELECT t.\"zz\" FROM t",
        "SELECT (SELECT \"a\" FROM t AS u WHERE u.b = 2) FROM t ORDER BY b",
        "SELECT count(*) FROM t WHERE b IN (SELECT 1 WHERE \"q\" = 'q')",
    ] {
        common::same_outcome(&mut ours, &lite, sql);
    }
}

#[test]
fn a_name_that_names_nothing_is_an_error_even_on_an_empty_table() {
    let (_db, mut ours, lite) = common::both("CREATE TABLE t(a, b); CREATE TABLE u(c);");
    for sql in [
        "SELECT * FROM t WHERE nosuch = 1",
        "SELECT a FROM t WHERE t.nosuch = 1",
        "SELECT a FROM t GROUP BY nosuch",
        "SELECT a FROM t GROUP BY a HAVING nosuch > 1",
        "SELECT a FROM t ORDER BY nosuch",
        "SELECT nosuch FROM t",
        "SELECT a FROM t JOIN u ON nosuch = c",
        "SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u WHERE c = a)",
        "SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u WHERE c = t.a AND u.c = b)",
        "SELECT a AS x FROM t WHERE x = 1",
    ] {
        common::same_outcome(&mut ours, &lite, sql);
    }
}

#[test]
fn math_functions_give_what_sqlite_gives() {
    let db = beechdb_sql::Database::open_in_memory().unwrap();
    let mut c = db.connect();
    let r = |v: f64| Value::Real(v);
    let i = Value::Integer;
    for (expr, want) in [
        ("ln(0)", Value::Null),
        ("sqrt(-1)", Value::Null),
        ("log(0)", Value::Null),
        ("ln(-1)", Value::Null),
        ("acos(2)", Value::Null),
        ("sin('a')", Value::Null),
        ("ceil(NULL)", Value::Null),
        ("log(NULL, 2)", Value::Null),
        ("mod(1, 0)", Value::Null),
        ("log(1, 8)", Value::Null),
        ("ceil(1)", i(1)),
        ("ceil(1.2)", r(2.0)),
        ("ceil('1.2')", r(2.0)),
        ("ceiling(-1.2)", r(-1.0)),
        ("floor(-1.5)", r(-2.0)),
        ("floor(3)", i(3)),
        ("trunc(-2.7)", r(-2.0)),
        ("ceil(9223372036854775807)", i(i64::MAX)),
        ("pow(2, 10)", r(1024.0)),
        ("power(2, 0.5)", r(std::f64::consts::SQRT_2)),
        ("mod(7, 3)", r(1.0)),
        ("mod(7.5, 2)", r(1.5)),
        ("log(100)", r(2.0)),
        ("log(2, 8)", r(3.0)),
        ("log10(1000)", r(2.9999999999999996)),
        ("log2(8)", r(3.0)),
        ("pi()", r(std::f64::consts::PI)),
        ("degrees(pi())", r(180.0)),
        ("exp(1)", r(std::f64::consts::E)),
        ("exp(1000)", r(f64::INFINITY)),
        ("atan2(1, 1)", r(std::f64::consts::FRAC_PI_4)),
        ("sqrt(4)", r(2.0)),
        ("sqlite_compileoption_used('ENABLE_MATH_FUNCTIONS')", i(1)),
        (
            "sqlite_compileoption_used('SQLITE_ENABLE_MATH_FUNCTIONS')",
            i(1),
        ),
        ("sqlite_compileoption_used('OMIT_TRIGGER')", i(0)),
        (
            "sqlite_compileoption_get(0)",
            Value::from("ENABLE_MATH_FUNCTIONS"),
        ),
        ("sqlite_compileoption_get(1)", Value::Null),
    ] {
        let got = c.query(&format!("SELECT {expr}"), &[]).unwrap().rows;
        assert_eq!(got, vec![vec![want]], "{expr}");
    }
    for bad in ["SELECT sin()", "SELECT log(1, 2, 3)", "SELECT pi(1)"] {
        let e = c.query(bad, &[]).unwrap_err().to_string();
        assert!(e.starts_with("wrong number of arguments"), "{bad}: {e}");
    }
}

/// sum(), total() and avg() add as SQLite does: exactly in integers until a value that is
/// not one (or an overflow), then with a compensated sum of reals, so the last bits agree
/// (a plain running sum of reals gives 0.0 for the first query, SQLite 1.0); an overflow
/// of integers is an error unless a real comes after it.
#[test]
fn sums_agree_with_sqlite_to_the_last_bit() {
    let (_db, mut ours, lite) = common::both(
        "CREATE TABLE n(g, v); INSERT INTO n VALUES
           (1, 1e16), (1, 1.0), (1, -1e16), (2, 9223372036854775000), (2, 9223372036854775000),
           (2, 0.5), (3, 9007199254740993), (3, 9007199254740993), (3, 7), (4, 0.1), (4, 0.2),
           (4, 0.3), (4, '12'), (4, 'x'), (4, NULL), (5, 9223372036854775807), (5, 1);",
    );
    for sql in [
        "SELECT sum(v), total(v), avg(v) FROM n WHERE g = 1",
        "SELECT g, sum(v), total(v), avg(v) FROM n WHERE g < 5 GROUP BY g ORDER BY g",
        "SELECT g, total(v), avg(v) FROM n GROUP BY g ORDER BY g",
        "SELECT sum(v) FROM n WHERE g = 5",
        "SELECT sum(v) FROM n WHERE g IN (5, 4)",
        "SELECT sum(v) FROM n WHERE g = 6",
        "SELECT total(v), avg(v) FROM n WHERE g = 6",
        "SELECT g, sum(v) OVER (ORDER BY rowid) FROM n WHERE g < 5",
    ] {
        common::same_outcome(&mut ours, &lite, sql);
    }
}

/// `x IN (...)` with a long list of constants or parameters answers by a binary search of
/// the list sorted once per run of its statement (it compared each value in turn for each
/// row): the same rows as SQLite's across affinities on the left (INTEGER, TEXT, NOCASE
/// text, none), list values of every storage class, NULLs in the list (NOT IN), and a
/// prepared statement run again with other parameters.
#[test]
fn long_in_lists_match_sqlite() {
    let mut setup =
        String::from("CREATE TABLE v(i INTEGER, t TEXT, c TEXT COLLATE NOCASE, n, r REAL); BEGIN;");
    for k in 0..300 {
        let n = match k % 5 {
            0 => format!("'{}'", k % 40),
            1 => format!("{}.0", k % 40),
            2 => "NULL".to_string(),
            _ => (k % 40).to_string(),
        };
        setup += &format!(
            "INSERT INTO v VALUES ({}, '{}', '{}', {n}, {}.5);",
            k % 50,
            k % 60,
            if k % 2 == 0 { "Ab" } else { "aB" },
            k % 30
        );
    }
    setup += "COMMIT;";
    let (_db, mut ours, lite) = common::both(&setup);
    let list = "1, 2, '3', 4.0, '5.0', 6, 7, 8, 'x', X'09', 10, 11.5, 12";
    for col in ["i", "t", "c", "n", "r", "i + 0", "t || ''"] {
        for not in ["", "NOT "] {
            for extra in ["", ", NULL", ", 'ab', 'AB'"] {
                let sql = format!(
                    "SELECT rowid, {col} FROM v WHERE {col} {not}IN ({list}{extra}) ORDER BY rowid"
                );
                common::same_rows(&mut ours, &lite, &sql, false);
            }
        }
    }
    // A prepared statement's list of parameters, run again with others.
    let sql = "SELECT count(*), sum(i) FROM v WHERE i IN (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
    let st = ours.prepare(sql).unwrap();
    for base in [0i64, 20, 45] {
        let params: Vec<beechdb_sql::Value> = (base..base + 9).map(Value::Integer).collect();
        let got: Vec<String> = ours.run(&st, &params).unwrap().rows[0]
            .iter()
            .map(|v| format!("{v:?}"))
            .collect();
        let want: (i64, i64) = lite
            .query_row(sql, rusqlite::params_from_iter(base..base + 9), |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!(
            got,
            [
                format!("{:?}", Value::Integer(want.0)),
                format!("{:?}", Value::Integer(want.1))
            ],
            "parameters from {base}"
        );
    }
}

/// A COLLATE on an operand carries up through operators, casts and function calls to the
/// comparison, as SQLite finds it (the left side's first): `t || ' ' COLLATE RTRIM` compares
/// in RTRIM, as do ORDER BY and GROUP BY over such expressions; a CAST keeps its column's.
#[test]
fn a_collate_inside_an_expression_reaches_the_comparison() {
    let (_db, mut ours, lite) = common::both(
        "CREATE TABLE c(t TEXT, u TEXT COLLATE NOCASE); INSERT INTO c VALUES
           ('a', 'A'), ('A', 'a'), ('b ', 'B'), ('B', 'b '), ('c', 'c');",
    );
    for sql in [
        "SELECT 'a ' = 'a' || '' COLLATE RTRIM, 'A' = lower('a' COLLATE NOCASE)",
        "SELECT 'A' = CAST('a' COLLATE NOCASE AS TEXT), 'A' = -('a' COLLATE NOCASE)",
        "SELECT rowid FROM c WHERE t = u || '' ORDER BY rowid",
        "SELECT rowid FROM c WHERE t = u || '' COLLATE BINARY ORDER BY rowid",
        "SELECT rowid FROM c WHERE t || '' COLLATE NOCASE = u ORDER BY rowid",
        "SELECT rowid FROM c WHERE t || ' ' = u || '' COLLATE RTRIM ORDER BY rowid",
        "SELECT t FROM c ORDER BY t || '' COLLATE NOCASE, rowid",
        "SELECT u FROM c ORDER BY CAST(u AS TEXT), rowid",
        "SELECT count(*) FROM c GROUP BY CAST(u AS TEXT) ORDER BY 1",
    ] {
        common::same_outcome(&mut ours, &lite, sql);
    }
}

/// Text and blobs read as integers by their integer prefix (SQLite's `sqlite3Atoi64`: no
/// fraction, no exponent), as reals by their longest numeric prefix.
#[test]
fn text_reads_as_an_integer_by_its_integer_prefix() {
    let (_db, mut ours, lite) = common::both("CREATE TABLE t(a TEXT, b BLOB, c ANY);");
    for sql in [
        "SELECT CAST('35e8' AS INTEGER), CAST('1.9e1' AS INTEGER), CAST(' 12x' AS INTEGER)",
        "SELECT CAST(CAST('35e8' AS BLOB) AS INTEGER), CAST(x'3132' AS INTEGER)",
        "SELECT CAST('-0x10' AS INTEGER), CAST('9223372036854775808' AS INTEGER)",
        "SELECT CAST('-9223372036854775809' AS INTEGER), CAST('1e100' AS INTEGER)",
        "SELECT CAST('35e8' AS REAL), CAST('35e8' AS NUMERIC), CAST('1.5e1x' AS NUMERIC)",
        "SELECT printf('%d|%d|%f', '35e8', x'33356538', '1e2')",
        "SELECT '35e8' + 0, '35e8' * 1, abs('-1e1'), CAST('  -7.0' AS INTEGER)",
        "SELECT substr('abcdef', '2e0', '1.9e0'), char('65e0')",
    ] {
        common::same_outcome(&mut ours, &lite, sql);
    }
}

/// Text SQLite's tokenizer stops at gives its message, naming the token as far as SQLite
/// takes it; a comment left open runs to the end of the text.
#[test]
fn bad_tokens_are_named_as_sqlite_names_them() {
    let (_db, mut ours, lite) = common::both("CREATE TABLE t(a);");
    for sql in [
        "SELECT x'123'",
        "SELECT x'12g4' FROM t",
        "SELECT 'abc",
        "SELECT \"abc",
        "SELECT [abc",
        "SELECT 12abc",
        "SELECT 1e5x, 2",
        "SELECT 0xg",
        "SELECT 1 ! 2",
        "SELECT #",
        "SELECT 1 /* open",
        "SELECT 1; /* open",
    ] {
        common::same_outcome(&mut ours, &lite, sql);
    }
}

/// Tables and views are found by their names in any case, as SQLite finds them: a SELECT
/// from a view, an INSERT into one (through its INSTEAD OF trigger) and into a table, each
/// named in lower, upper and mixed case.
#[test]
fn tables_and_views_are_found_by_name_in_any_case() {
    let (_db, mut ours, lite) = common::both(
        "CREATE TABLE Items(a, b); CREATE VIEW BigItems AS SELECT a, b FROM items WHERE b > 1;
         CREATE TRIGGER bigitems_in INSTEAD OF INSERT ON BIGITEMS
           BEGIN INSERT INTO ITEMS VALUES (new.a, new.b + 10); END;",
    );
    for sql in [
        "INSERT INTO items VALUES ('x', 1)",
        "INSERT INTO ITEMS VALUES ('y', 2)",
        "INSERT INTO iTeMs VALUES ('z', 3)",
        "INSERT INTO bigitems VALUES ('v', 4)",
        "INSERT INTO BIGITEMS VALUES ('w', 5)",
        "INSERT INTO nosuch VALUES (1)",
        "INSERT INTO NoSuch VALUES (1)",
        "SELECT a, b FROM BigItems ORDER BY a",
        "SELECT a, b FROM bigitems ORDER BY a",
        "SELECT a, b FROM BIGITEMS ORDER BY a",
        "SELECT count(*) FROM ITEMS",
    ] {
        common::same_outcome(&mut ours, &lite, sql);
    }
}
