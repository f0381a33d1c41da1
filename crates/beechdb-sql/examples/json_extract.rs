//! Profiling aid: `sql-micro`'s JSON line, two paths read from a new 600-byte document per
//! call (so each call parses one), or as many as the second argument says (1 to 4).
//! `cargo run --release -p beechdb-sql --example json_extract -- 20000 [PATHS]`

use beechdb_sql::{Database, Value};

fn main() -> Result<(), beechdb_sql::Error> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000);
    let db = Database::open_in_memory()?;
    let mut c = db.connect();
    let paths: usize = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2);
    let reads = [
        "json_extract(?1, '$.items[5].price')",
        "?1 ->> '$.meta.flags.n'",
        "?1 ->> '$.items[0].qty'",
        "json_extract(?1, '$.id')",
    ];
    let st = c.prepare(&format!("SELECT {}", reads[..paths.clamp(1, 4)].join(", ")))?;
    let docs: Vec<Value> = (0..n as i64)
        .map(|id| {
            let item = |i| {
                format!(
                    r#"{{"sku":"sku-{id}-{i}","price":{},"qty":{i},"tags":["a","b"]}}"#,
                    id * 10 + i
                )
            };
            let items: Vec<String> = (0..8).map(item).collect();
            let meta = format!(
                r#"{{"created":"2026-11-29T10:00:00Z","flags":{{"x":true,"y":null,"n":{id}}}}}"#
            );
            let doc = format!(
                r#"{{"id":{id},"name":"item number {id}","items":[{}],"meta":{meta}}}"#,
                items.join(",")
            );
            Value::from(doc)
        })
        .collect();
    let started = std::time::Instant::now();
    let sum = timed(&mut c, &st, &docs)?;
    println!(
        "{n} calls: {:.0}/s (checksum {sum})",
        n as f64 / started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The timed loop, a function of its own so that a profiler can count only it
/// (`valgrind --tool=callgrind --toggle-collect=json_extract::timed`).
#[inline(never)]
fn timed(
    c: &mut beechdb_sql::Connection,
    st: &beechdb_sql::Statement,
    docs: &[Value],
) -> Result<i64, beechdb_sql::Error> {
    let mut sum = 0;
    for d in docs {
        for v in &c.run(st, std::slice::from_ref(d))?.rows[0] {
            if let Value::Integer(i) = v {
                sum += i;
            }
        }
    }
    Ok(sum)
}
