//! Functions and collations an application registers on a connection: resolved when a
//! statement is prepared, hiding built-ins of the same name and argument count, usable as
//! aggregates and window functions; and a statement stopped from another thread.

use beechdb_sql::{AggregateFunction, AggregateState, Database, Error, UserFunction, Value};
use std::sync::Arc;

struct Longest;
struct LongestState(Option<String>);

impl AggregateFunction for Longest {
    fn start(&self) -> Box<dyn AggregateState> {
        Box::new(LongestState(None))
    }
}

impl AggregateState for LongestState {
    fn step(&mut self, args: &[Value]) -> beechdb_sql::Result<()> {
        let t = args[0].to_text();
        if self.0.as_ref().is_none_or(|b| t.len() > b.len()) {
            self.0 = Some(t);
        }
        Ok(())
    }
    fn finish(&mut self) -> beechdb_sql::Result<Value> {
        Ok(self.0.take().map_or(Value::Null, Value::from))
    }
}

fn one(conn: &mut beechdb_sql::Connection, sql: &str) -> Value {
    conn.query(sql, &[]).unwrap().rows[0][0].clone()
}

/// Registers `twice(x)`, the scalar `2 * x`.
fn register_twice(c: &mut beechdb_sql::Connection) {
    c.create_function(
        "twice",
        1,
        Some(UserFunction::Scalar(Arc::new(|a: &[Value]| {
            Ok(Value::Integer(a[0].as_i64() * 2))
        }))),
    );
}

#[test]
fn registered_functions_and_collations() {
    let db = Database::open_in_memory().unwrap();
    let mut c = db.connect();
    c.execute_batch(
        "CREATE TABLE w(x TEXT); INSERT INTO w VALUES ('ccc'), ('a'), ('bb'), ('dddd');",
    )
    .unwrap();
    // A scalar function, and one hiding the built-in upper() for one argument.
    register_twice(&mut c);
    c.create_function(
        "upper",
        1,
        Some(UserFunction::Scalar(Arc::new(|_: &[Value]| {
            Ok(Value::from("mine"))
        }))),
    );
    assert_eq!(one(&mut c, "SELECT twice(21)"), Value::Integer(42));
    assert_eq!(one(&mut c, "SELECT upper('x')"), Value::from("mine"));
    // Errors from a function are the statement's.
    c.create_function(
        "fails",
        -1,
        Some(UserFunction::Scalar(Arc::new(|_: &[Value]| {
            Err(Error::Sql("it failed".into()))
        }))),
    );
    let e = c.query("SELECT fails(1, 2)", &[]).unwrap_err();
    assert_eq!(e.to_string(), "it failed");
    // An aggregate, grouped and as a window function over a frame.
    c.create_function(
        "longest",
        1,
        Some(UserFunction::Aggregate(Arc::new(Longest))),
    );
    assert_eq!(one(&mut c, "SELECT longest(x) FROM w"), Value::from("dddd"));
    let r = c
        .query(
            "SELECT longest(x) OVER (ORDER BY rowid ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM w",
            &[],
        )
        .unwrap();
    let got: Vec<Value> = r.rows.into_iter().map(|mut r| r.remove(0)).collect();
    assert_eq!(got, ["ccc", "ccc", "bb", "dddd"].map(Value::from));
    // A collation by length, in ORDER BY and comparisons.
    c.create_collation(
        "bylen",
        Some(Arc::new(|a: &str, b: &str| a.len().cmp(&b.len()))),
    );
    let r = c
        .query("SELECT x FROM w ORDER BY x COLLATE bylen DESC", &[])
        .unwrap();
    let got: Vec<Value> = r.rows.into_iter().map(|mut r| r.remove(0)).collect();
    assert_eq!(got, ["dddd", "ccc", "bb", "a"].map(Value::from));
    assert_eq!(
        one(&mut c, "SELECT 'ab' = 'xy' COLLATE bylen"),
        Value::Integer(1)
    );
    // Not in table definitions (their text outlives the connection's registration).
    assert!(c
        .execute("CREATE TABLE v(y TEXT COLLATE bylen)", &[])
        .is_err());
    // Removed: statements prepared afterwards no longer see it.
    c.create_function("twice", 1, None);
    assert!(c.query("SELECT twice(1)", &[]).is_err());
    // Another connection never saw them.
    let mut other = db.connect();
    assert!(other.query("SELECT longest(x) FROM w", &[]).is_err());
}

#[test]
fn interrupt_stops_a_running_statement() {
    let db = Database::open_in_memory().unwrap();
    let mut c = db.connect();
    c.execute_batch("CREATE TABLE n(i); INSERT INTO n VALUES (1), (2), (3), (4), (5), (6), (7), (8), (9), (10);")
        .unwrap();
    let stop = c.interrupter();
    // A statement that would take minutes: interrupted from another thread.
    let t = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(100));
        stop.interrupt();
    });
    let e = c
        .query(
            "SELECT count(*) FROM n a, n b, n c, n d, n e, n f, n g, n h, n i",
            &[],
        )
        .unwrap_err();
    t.join().unwrap();
    assert!(matches!(e, Error::Interrupted), "{e}");
    assert_eq!(e.code(), beechdb_sql::codes::SQLITE_INTERRUPT);
    // The next statement runs.
    assert_eq!(one(&mut c, "SELECT count(*) FROM n"), Value::Integer(10));
}

/// What a registered function cannot be used for, each refused with a typed error: an index
/// expression (the index would outlive the registration), FILTER on a registered aggregate
/// (its steps may not skip NULLs as the rewrite needs). An upsert cannot set the rowid.
#[test]
fn registered_functions_are_refused_where_they_cannot_work() {
    let db = Database::open_in_memory().unwrap();
    let mut c = db.connect();
    c.execute_batch(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT UNIQUE); INSERT INTO t VALUES(1, 'x')",
    )
    .unwrap();
    register_twice(&mut c);
    c.create_function(
        "longest",
        1,
        Some(UserFunction::Aggregate(Arc::new(Longest))),
    );
    for sql in [
        "CREATE INDEX i ON t(twice(a))",
        "SELECT longest(a) FILTER (WHERE id > 1) FROM t",
        "INSERT INTO t VALUES(2, 'x') ON CONFLICT(a) DO UPDATE SET rowid = 5",
    ] {
        match c.execute(sql, &[]) {
            Err(Error::Unsupported(_)) => {}
            other => panic!("{sql}: {other:?}"),
        }
    }
}

/// A sum with an inverse, counting its calls: a window function that slides.
struct SlidingSum(Arc<std::sync::Mutex<Calls>>);
#[derive(Default, Debug)]
struct Calls {
    steps: usize,
    inverses: usize,
    values: usize,
    finishes: usize,
}
struct SlidingState(i64, Arc<std::sync::Mutex<Calls>>);

impl AggregateFunction for SlidingSum {
    fn start(&self) -> Box<dyn AggregateState> {
        Box::new(SlidingState(0, self.0.clone()))
    }
    fn slides(&self) -> bool {
        true
    }
}

impl AggregateState for SlidingState {
    fn step(&mut self, args: &[Value]) -> beechdb_sql::Result<()> {
        self.1.lock().unwrap().steps += 1;
        self.0 += args[0].as_i64();
        Ok(())
    }
    fn inverse(&mut self, args: &[Value]) -> beechdb_sql::Result<()> {
        self.1.lock().unwrap().inverses += 1;
        self.0 -= args[0].as_i64();
        Ok(())
    }
    fn value(&mut self) -> beechdb_sql::Result<Value> {
        self.1.lock().unwrap().values += 1;
        Ok(Value::Integer(self.0))
    }
    /// As in SQLite, a sliding window's final call is not its result: an error here goes
    /// nowhere.
    fn finish(&mut self) -> beechdb_sql::Result<Value> {
        self.1.lock().unwrap().finishes += 1;
        Err(Error::Sql("finish is not a window's result".into()))
    }
}

/// With an inverse, one state slides over each partition (SQLite's xValue / xInverse),
/// giving what stepping each frame afresh gives, for frames that move both ends, that lie
/// wholly after the row, and that are empty.
#[test]
fn window_functions_with_an_inverse_slide() {
    let db = Database::open_in_memory().unwrap();
    let mut c = db.connect();
    c.execute_batch(
        "CREATE TABLE t(g, x INTEGER);
         INSERT INTO t VALUES (1, 4), (1, 5), (1, 3), (1, 8), (1, 1), (2, 10), (2, 20), (2, 30);",
    )
    .unwrap();
    let calls = Arc::new(std::sync::Mutex::new(Calls::default()));
    c.create_function(
        "slidesum",
        1,
        Some(UserFunction::Aggregate(Arc::new(SlidingSum(calls.clone())))),
    );
    for frame in [
        "ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING",
        "ROWS BETWEEN 1 FOLLOWING AND 2 FOLLOWING",
        "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
        "ROWS BETWEEN 3 FOLLOWING AND 5 FOLLOWING",
        "RANGE BETWEEN 2 PRECEDING AND 2 FOLLOWING",
    ] {
        let q = |f: &str| {
            format!(
                "SELECT g, x, {f}(x) OVER (PARTITION BY g ORDER BY x {frame}) FROM t ORDER BY g, x"
            )
        };
        let slid = c.query(&q("slidesum"), &[]).unwrap().rows;
        let summed = c.query(&q("sum"), &[]).unwrap().rows;
        // sum() of an empty frame is NULL where the sliding sum says 0.
        let summed: Vec<_> = summed
            .into_iter()
            .map(|mut r| {
                if r[2].is_null() {
                    r[2] = Value::Integer(0);
                }
                r
            })
            .collect();
        assert_eq!(slid, summed, "{frame}");
    }
    let calls = calls.lock().unwrap();
    // One value per row of each of the five queries, one final call per partition.
    assert_eq!(calls.values, 5 * 8, "{calls:?}");
    assert_eq!(calls.finishes, 5 * 2, "{calls:?}");
    assert!(calls.inverses > 0, "{calls:?}");
    // Each row is stepped in at most once per partition pass: far fewer steps than
    // stepping every frame afresh.
    assert!(calls.steps <= 5 * 8, "{calls:?}");
}
