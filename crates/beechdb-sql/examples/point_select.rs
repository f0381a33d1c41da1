//! Profiling aid: one prepared statement run many times on a 100,000-row table.
//! `cargo run --release -p beechdb-sql --example point_select -- 1000000 [pk|index|update|insert|txninsert|scan|order|ordercover|orderlt|cte|cteunion|createindex|join|exprjoin|window|groupby|filter|wide1|wide10|wide11|wide13|wide18|wide20|wide22|wide27]`

use beechdb_sql::{Database, Value};

fn main() -> Result<(), beechdb_sql::Error> {
    let mut args = std::env::args().skip(1);
    let n: i64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let what = args.next().unwrap_or_else(|| "pk".into());
    let db = Database::open_in_memory()?;
    let mut c = db.connect();
    c.execute_batch(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, v TEXT); CREATE INDEX t_k ON t(k); BEGIN;",
    )?;
    let ins = c.prepare("INSERT INTO t VALUES(?1, ?2, 'value')")?;
    for i in 1..=100_000i64 {
        c.run(&ins, &[i.into(), (i * 7919 % 100_000).into()])?;
    }
    if what == "join" || what == "exprjoin" {
        let (a, b, cc) = (
            c.prepare("INSERT INTO a VALUES(?1, ?2)")?,
            c.prepare("INSERT INTO b VALUES(?1, ?2, ?2)")?,
            c.prepare("INSERT INTO c VALUES(?1, ?2, ?2)")?,
        );
        c.execute_batch(
            "CREATE TABLE a(id INTEGER PRIMARY KEY, x INTEGER);
             CREATE TABLE b(id INTEGER PRIMARY KEY, a_id INTEGER, y INTEGER);
             CREATE TABLE c(id INTEGER PRIMARY KEY, b_id INTEGER, z INTEGER);
             CREATE INDEX b_a ON b(a_id); CREATE INDEX c_b ON c(b_id);",
        )?;
        for i in 1..=10_000i64 {
            c.run(&a, &[i.into(), (i * 3).into()])?;
            c.run(&b, &[i.into(), ((i * 31) % 10_000 + 1).into()])?;
            c.run(&cc, &[i.into(), ((i * 17) % 10_000 + 1).into()])?;
        }
    }
    if what.starts_with("wide") {
        // Wisconsin's tenktup1 at 10,000 tuples (seed 000 Table 7): 16 columns, ~200 bytes.
        c.execute_batch(
            "CREATE TABLE w(unique1 INTEGER NOT NULL, unique2 INTEGER NOT NULL, two INTEGER,
               four INTEGER, ten INTEGER, twenty INTEGER, onePercent INTEGER, tenPercent INTEGER,
               twentyPercent INTEGER, fiftyPercent INTEGER, unique3 INTEGER,
               evenOnePercent INTEGER, oddOnePercent INTEGER, stringu1 CHAR(52),
               stringu2 CHAR(52), string4 CHAR(52));
             INSERT INTO w SELECT (id * 7919) % 10000, id - 1, id % 2, id % 4, id % 10, id % 20,
               id % 100, id % 10, id % 5, id % 2, id, (id % 100) * 2, (id % 100) * 2 + 1,
               printf('%052d', id * 7), printf('%052d', id), 'AAAA' || printf('%048d', 0)
               FROM t WHERE id <= 10000;
             CREATE TABLE bp AS SELECT * FROM w WHERE unique2 < 1000;",
        )?;
        if what == "wide13" {
            c.execute_batch("CREATE INDEX w_u2 ON w(unique2); CREATE INDEX bp_u2 ON bp(unique2);")?;
        }
    }
    c.execute("COMMIT", &[])?;
    if what == "createindex" {
        let started = std::time::Instant::now();
        create_indexes(&mut c, n)?;
        let secs = started.elapsed().as_secs_f64();
        println!(
            "{n} runs of CREATE INDEX t_v ON t(v) and DROP: {:.1} ms each",
            secs * 1e3 / n as f64
        );
        return Ok(());
    }
    let sql = match what.as_str() {
        "wide1" => "SELECT * FROM w WHERE unique2 BETWEEN 792 AND 891",
        "wide10" => "SELECT * FROM w A, bp B WHERE A.unique2 = B.unique2",
        "wide11" => "SELECT * FROM bp C, w A, w B WHERE C.unique2 = A.unique2 AND A.unique2 = B.unique2 AND A.unique2 < 1000 AND B.unique2 < 1000",
        "wide13" => "SELECT * FROM w A, bp B WHERE A.unique2 = B.unique2",
        "wide18" => "SELECT DISTINCT two, four, ten, twenty, onePercent, string4 FROM w",
        "wide20" => "SELECT min(unique2) FROM w",
        "wide27" => "DELETE FROM w WHERE unique1 = -1",
        "wide22" => "SELECT sum(unique3) FROM w GROUP BY onePercent",
        "pk" => "SELECT v FROM t WHERE id = ?1",
        "index" => "SELECT id FROM t WHERE k = ?1",
        "update" => "UPDATE t SET v = 'x' WHERE id = ?1",
        "insert" | "txninsert" => "INSERT INTO t(k, v) VALUES(?1, 'inserted')",
        "scan" => "SELECT count(*), sum(k) FROM t WHERE id BETWEEN ?1 AND ?1 + 99",
        "filter" => "SELECT * FROM t WHERE k + 0 BETWEEN ?1 AND ?1 + 99",
        "order" => "SELECT * FROM t ORDER BY k DESC, id DESC LIMIT 20 + 0 * ?1",
        "ordercover" => "SELECT id, k FROM t ORDER BY k DESC, id DESC LIMIT 20 + 0 * ?1",
        "cte" => "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000 + 0 * ?1) SELECT count(*), sum(x) FROM c",
        "cteunion" => "WITH RECURSIVE c(x) AS (SELECT 1 UNION SELECT x + 1 FROM c WHERE x < 20000 + 0 * ?1) SELECT count(*), sum(x) FROM c",
        "orderlt" => "SELECT * FROM t WHERE k < ?1 ORDER BY k DESC LIMIT 20",
        "join" => "SELECT a.x, b.y, c.z FROM a JOIN b ON b.a_id = a.id JOIN c ON c.b_id = b.id WHERE a.id = ?1 % 10000 + 1",
        "exprjoin" => "SELECT count(*), sum(b.id) FROM b, c WHERE c.z = b.y + 2 + 0 * ?1",
        "window" => "SELECT count(*), sum(s) FROM (SELECT sum(k) OVER (ORDER BY id ROWS BETWEEN 50 PRECEDING AND 50 FOLLOWING) s FROM t WHERE id > 0 * ?1)",
        "groupby" => "SELECT k % 100 + 0 * ?1, count(*), sum(id) FROM t GROUP BY 1",
        other => panic!("unknown statement kind {other}"),
    };
    let sel = c.prepare(sql)?;
    let started = std::time::Instant::now();
    // `txninsert`: the inserts in one transaction, its commit in the time.
    let one_txn = what == "txninsert";
    let found = timed(&mut c, &sel, n, one_txn)?;
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{n} runs of {what}, {found} rows: {:.0}/s, {:.2} us each",
        n as f64 / secs,
        secs * 1e6 / n as f64
    );
    Ok(())
}

/// `createindex`: an index on the 100,000 rows' text column made and dropped `n` times.
#[inline(never)]
fn create_indexes(c: &mut beechdb_sql::Connection, n: i64) -> Result<(), beechdb_sql::Error> {
    for _ in 0..n {
        c.execute_batch("CREATE INDEX t_v ON t(v); DROP INDEX t_v;")?;
    }
    Ok(())
}

/// The timed loop, a function of its own so that a profiler can count only it
/// (`valgrind --tool=callgrind --toggle-collect=point_select::timed`).
#[inline(never)]
fn timed(
    c: &mut beechdb_sql::Connection,
    st: &beechdb_sql::Statement,
    n: i64,
    one_txn: bool,
) -> Result<usize, beechdb_sql::Error> {
    if one_txn {
        c.execute("BEGIN", &[])?;
    }
    let mut found = 0;
    for i in 0..n {
        // A load's keys spread over the index, as `sql-micro`'s random keys do.
        let key = match one_txn {
            true => (i * 7919 + 13) % 100_000 + 1,
            false => i % 100_000 + 1,
        };
        found += c.run(st, &[Value::Integer(key)])?.rows.len();
    }
    if one_txn {
        c.execute("COMMIT", &[])?;
    }
    Ok(found)
}
