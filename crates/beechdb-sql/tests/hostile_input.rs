//! Input that ended the process (a stack overflow, an allocation past memory, a panic) or
//! ran for minutes is refused with SQLite's error or answered as SQLite answers it.
//! Expressions and SELECTs may nest 1,000 deep, SQLite's limit; everything up to it runs on
//! a thread with Rust's default stack (2 MiB). Strings and blobs stop at SQLite's length
//! limit (10^9 bytes). Found by running the fuzz smoke test and the random differential
//! far past their default counts, and by trying SQLite's limits one by one.

use beechdb_sql::{Database, Value};

/// Runs `sql` on a fresh in-memory database, on a thread with a 2 MiB stack.
fn run(setup: &str, sql: String) -> Result<Vec<Vec<Value>>, String> {
    let setup = setup.to_string();
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let db = Database::open_in_memory().unwrap();
            let mut c = db.connect();
            c.execute_batch(&setup).map_err(|e| e.to_string())?;
            c.query(&sql, &[])
                .map(|r| r.rows)
                .map_err(|e| e.to_string())
        })
        .unwrap()
        .join()
        .expect("no panic")
}

const TOO_DEEP: &str = "Expression tree is too large (maximum depth 1000)";

#[test]
fn nesting_up_to_the_limit_runs_and_past_it_is_refused() {
    let sum = |n: usize| format!("SELECT {}", vec!["1"; n].join(" + "));
    let parens = |n: usize| format!("SELECT {}1{}", "(".repeat(n), ")".repeat(n));
    let calls = |n: usize| format!("SELECT {}-1{}", "abs(".repeat(n), ")".repeat(n));
    let cases = |n: usize| {
        format!(
            "SELECT {}1{}",
            "CASE WHEN 1 THEN ".repeat(n),
            " END".repeat(n)
        )
    };
    let subqueries = |n: usize| format!("SELECT {}1{}", "(SELECT ".repeat(n), ")".repeat(n));
    let from = |n: usize| {
        format!(
            "SELECT * FROM {}(SELECT 1){}",
            "(SELECT * FROM ".repeat(n),
            ")".repeat(n)
        )
    };
    let ands = |n: usize| {
        format!(
            "SELECT count(*) FROM t WHERE {}",
            vec!["a = 1"; n].join(" AND ")
        )
    };
    let setup = "CREATE TABLE t(a); INSERT INTO t VALUES (1), (2);";
    for (name, make, fits) in [
        ("sum", &sum as &dyn Fn(usize) -> String, 990),
        ("parentheses", &parens, 990),
        ("calls", &calls, 990),
        ("CASE", &cases, 300),
        ("subqueries", &subqueries, 300),
        ("FROM subqueries", &from, 300),
        ("AND", &ands, 490),
    ] {
        let rows = run(setup, make(fits)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(rows.len(), 1, "{name}");
        for deep in [1_001, 20_000] {
            assert_eq!(
                run(setup, make(deep)),
                Err(TOO_DEEP.into()),
                "{name} {deep}"
            );
        }
    }
    assert_eq!(run(setup, sum(990)).unwrap()[0][0], Value::Integer(990));
}

/// An alias whose expression names a column of its own name reads the column, not the
/// alias again (found by the fuzz smoke test at 300,000 inputs: the alias was expanded
/// into itself until the stack overflowed). As SQLite: with no such column, an error.
#[test]
fn an_alias_naming_itself_is_expanded_once() {
    let setup = "CREATE TABLE t(a, b, c); INSERT INTO t VALUES (1, 5, 2);";
    for (sql, want) in [
        ("SELECT b - c AS c WHERE c > 0", Err("no such column: b")),
        ("SELECT 1 - c AS c WHERE c > 0", Err("no such column: c")),
        (
            "SELECT c + 1 AS d, d + 1 AS c WHERE c > 0",
            Err("no such column: c"),
        ),
        ("SELECT 1 - x AS x GROUP BY x", Err("no such column: x")),
        ("SELECT b - c AS c FROM t WHERE c > 0", Ok(3)),
        ("SELECT a + 1 AS a FROM t WHERE a > 0", Ok(2)),
    ] {
        let got = run(setup, sql.into());
        match want {
            Ok(v) => assert_eq!(got, Ok(vec![vec![Value::Integer(v)]]), "{sql}"),
            Err(e) => assert_eq!(got, Err(e.to_string()), "{sql}"),
        }
    }
}

/// A view that would name itself, directly or through others (made possible by dropping
/// a view and making it again), is refused when it is made: working out its columns went
/// round the cycle until the stack overflowed. (SQLite makes it, and refuses it when read.)
#[test]
fn circular_views_are_refused() {
    let setup = "CREATE VIEW v1 AS SELECT 1 AS x; CREATE VIEW v2 AS SELECT * FROM v1;
        DROP VIEW v1; CREATE VIEW w AS SELECT 1 AS x; DROP VIEW w;
        CREATE VIEW fine AS SELECT 2 AS y;";
    for (sql, view) in [
        ("CREATE VIEW v1 AS SELECT * FROM v2", "v2"),
        ("CREATE VIEW v1 AS SELECT y FROM fine JOIN v2", "v2"),
        ("CREATE VIEW w AS SELECT x + 1 FROM w", "w"),
    ] {
        let want = format!("view {view} is circularly defined");
        assert_eq!(run(setup, sql.into()), Err(want), "{sql}");
    }
    let got = run(setup, "SELECT * FROM fine, fine AS again".into());
    assert_eq!(got, Ok(vec![vec![Value::Integer(2), Value::Integer(2)]]));
}

/// Triggers that fire each other run to SQLite's limit (1,000 levels) and stop there with
/// its error, on a thread with a 2 MiB stack.
#[test]
fn trigger_recursion_stops_at_the_limit() {
    let setup = "PRAGMA recursive_triggers = 1; CREATE TABLE a(x);
        CREATE TRIGGER t AFTER INSERT ON a WHEN new.x < 5000 BEGIN
          INSERT INTO a VALUES (new.x + 1); END;
        CREATE TABLE b(x); CREATE TRIGGER u AFTER INSERT ON b WHEN new.x < 900 BEGIN
          INSERT INTO b VALUES (new.x + 1); END;";
    let got = run(setup, "INSERT INTO a VALUES (1)".into());
    assert_eq!(got, Err("too many levels of trigger recursion".into()));
    let got = run(
        &format!("{setup} INSERT INTO b VALUES (1);"),
        "SELECT count(*), max(x) FROM b".into(),
    );
    assert_eq!(
        got,
        Ok(vec![vec![Value::Integer(900), Value::Integer(900)]])
    );
}

/// Values past SQLite's length limit (10^9 bytes) are "string or blob too big" before they
/// are made, as in SQLite; `printf` past it gives NULL, and a precision past 65,535 (which
/// made Rust's formatter panic) is SQLite's: zeros to at most 10^8 digits.
#[test]
fn values_stop_at_the_length_limit() {
    let too_big = Err("string or blob too big".to_string());
    for sql in [
        "SELECT zeroblob(5000000000)",
        "SELECT randomblob(5000000000)",
        "SELECT replace(hex(zeroblob(100000)), '0', hex(zeroblob(10000)))",
        "WITH RECURSIVE c(s, n) AS (SELECT 'ab', 0 UNION ALL SELECT s || s, n + 1 FROM c \
         WHERE n < 40) SELECT max(length(s)) FROM c",
    ] {
        assert_eq!(run("", sql.into()), too_big, "{sql}");
    }
    let one = |sql: &str| run("", sql.into()).map(|rows| rows[0][0].clone());
    assert_eq!(one("SELECT printf('%2000000000d', 1)"), Ok(Value::Null));
    assert_eq!(
        one("SELECT length(printf('%.200000f', 1.5))"),
        Ok(Value::Integer(200_002))
    );
    assert_eq!(
        one("SELECT printf('%.70000e', 2.5) LIKE '2.5000%0e+00'"),
        Ok(Value::Integer(1))
    );
    assert_eq!(
        one("SELECT printf('%.3f|%10.2e|%-5d|%5s|', 3.14159, 12345.678, 42, 'ab')"),
        Ok(Value::from("3.142|  1.23e+04|42   |   ab|"))
    );
}
