//! Profiling aid: prepared point SELECTs by primary key on a 100,000-row table.
//! `cargo run --release -p beechdb-sql --example point_select -- 1000000`

use beechdb_sql::{Database, Value};

fn main() -> Result<(), beechdb_sql::Error> {
    let n: i64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    let db = Database::open_in_memory()?;
    let mut c = db.connect();
    c.execute_batch("CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, v TEXT); BEGIN;")?;
    let ins = c.prepare("INSERT INTO t VALUES(?1, ?2, 'value')")?;
    for i in 1..=100_000i64 {
        c.run(&ins, &[i.into(), (i * 7 % 1000).into()])?;
    }
    c.execute("COMMIT", &[])?;
    let sel = c.prepare("SELECT v FROM t WHERE id = ?1")?;
    let started = std::time::Instant::now();
    let mut found = 0;
    for i in 0..n {
        found += c.run(&sel, &[Value::Integer(i % 100_000 + 1)])?.rows.len();
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{n} point selects, {found} rows: {:.0}/s, {:.2} us each",
        n as f64 / secs,
        secs * 1e6 / n as f64
    );
    Ok(())
}
