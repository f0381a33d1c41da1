//! Profiling aid: many rows inserted in one transaction, as a load through Python's
//! `executemany` does (a table with a secondary index and a UNIQUE column), then an index
//! made over the loaded rows (`index_timed`).
//! `cargo run --release -p beechdb-sql --example bulk_insert -- 200000 [DIR]`
//! (without DIR, an in-memory database).

use beechdb_sql::{Database, Value};

fn main() -> Result<(), beechdb_sql::Error> {
    let mut args = std::env::args().skip(1);
    let n: i64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let db = match args.next() {
        Some(dir) => Database::open(dir)?,
        None => Database::open_in_memory()?,
    };
    let mut c = db.connect();
    c.execute_batch(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL, k TEXT UNIQUE);
         CREATE INDEX t_name ON t(name);",
    )?;
    let ins = c.prepare("INSERT INTO t(name, v, k) VALUES (?1, ?2, ?3)")?;
    let rows: Vec<[Value; 3]> = (0..n)
        .map(|i| {
            [
                Value::Text(format!("n{}", i % 100).into()),
                Value::Real(i as f64 * 0.5),
                Value::Text(format!("k{i}").into()),
            ]
        })
        .collect();
    let started = std::time::Instant::now();
    timed(&mut c, &ins, &rows)?;
    let inserted = started.elapsed().as_secs_f64();
    c.execute("COMMIT", &[])?;
    let committed = started.elapsed().as_secs_f64() - inserted;
    let count = c.query("SELECT count(*) FROM t", &[])?.rows[0][0].clone();
    let started = std::time::Instant::now();
    index_timed(&mut c)?;
    println!(
        "{n} rows: {:.2} us a row before the commit, commit {:.0} ms ({count:?} rows); \
         CREATE INDEX on v {:.0} ms",
        inserted * 1e6 / n as f64,
        committed * 1e3,
        started.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}

#[inline(never)]
fn index_timed(c: &mut beechdb_sql::Connection) -> Result<(), beechdb_sql::Error> {
    c.execute("CREATE INDEX t_v ON t(v)", &[]).map(drop)
}

/// The timed loop, a function of its own so that a profiler can count only it
/// (`valgrind --tool=callgrind --toggle-collect=bulk_insert::timed`).
#[inline(never)]
fn timed(
    c: &mut beechdb_sql::Connection,
    st: &beechdb_sql::Statement,
    rows: &[[Value; 3]],
) -> Result<(), beechdb_sql::Error> {
    c.execute("BEGIN", &[])?;
    for row in rows {
        c.run(st, row)?;
    }
    Ok(())
}
