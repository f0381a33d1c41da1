//! `sql-micro`: prepared SQL statements one at a time, BeechDB's SQL layer beside SQLite
//! (rusqlite, bundled, WAL, with `--features peers`) in the same run, on the same data and
//! the same random keys: point SELECT by primary key, point SELECT through a secondary
//! index, single-row INSERT and UPDATE (auto-commit), a 100-row range scan, a 3-table join,
//! a GROUP BY over the whole table, the first 20 rows by an indexed column (the whole
//! index's order, and a range of it), single-row INSERTs all in one transaction (its
//! commit timed with them), and three shapes a planner without SQLite's automatic index
//! and incremental window frames reads quadratically (an equality join on an expression,
//! a correlated EXISTS, a sum over a moving frame), a recursive CTE, and CREATE INDEX over
//! the table (dropped again after each run), and `json_extract` from a 600-byte JSON
//! document given as a parameter (parsed on every call). Each engine's answers are checksummed and must
//! agree (after the writes, the table's row count and sums), so that no engine is timed
//! doing less work.

use crate::engines::BenchResult;
use beechdb_sql::Value;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::time::Instant;

/// One engine under test: runs SQL text with parameters, returns a checksum of the rows.
trait SqlEngine {
    fn name(&self) -> &'static str;
    fn batch(&mut self, sql: &str) -> BenchResult<()>;
    /// Runs `sql` (prepared once, cached) with `params`; returns rows seen and the sum of
    /// their integer values.
    fn run(&mut self, sql: &str, params: &[Value]) -> BenchResult<(u64, i64)>;
}

struct Beech {
    conn: beechdb_sql::Connection,
    _db: beechdb_sql::Database,
    cache: std::collections::HashMap<String, beechdb_sql::Statement>,
}

impl SqlEngine for Beech {
    fn name(&self) -> &'static str {
        "beechdb"
    }
    fn batch(&mut self, sql: &str) -> BenchResult<()> {
        Ok(self.conn.execute_batch(sql)?)
    }
    fn run(&mut self, sql: &str, params: &[Value]) -> BenchResult<(u64, i64)> {
        if !self.cache.contains_key(sql) {
            let st = self.conn.prepare(sql)?;
            self.cache.insert(sql.to_string(), st);
        }
        let st = &self.cache[sql];
        let r = self.conn.run(st, params)?;
        let sum = r
            .rows
            .iter()
            .flatten()
            .map(|v| match v {
                Value::Integer(i) => *i,
                _ => 0,
            })
            .fold(0i64, i64::wrapping_add);
        Ok((r.rows.len() as u64, sum))
    }
}

#[cfg(feature = "peers")]
struct Lite {
    conn: rusqlite::Connection,
}

#[cfg(feature = "peers")]
impl SqlEngine for Lite {
    fn name(&self) -> &'static str {
        "sqlite"
    }
    fn batch(&mut self, sql: &str) -> BenchResult<()> {
        Ok(self.conn.execute_batch(sql)?)
    }
    fn run(&mut self, sql: &str, params: &[Value]) -> BenchResult<(u64, i64)> {
        use rusqlite::types::ToSqlOutput;
        let params: Vec<ToSqlOutput> = params
            .iter()
            .map(|v| match v {
                Value::Integer(i) => ToSqlOutput::from(*i),
                Value::Real(r) => ToSqlOutput::from(*r),
                Value::Text(t) => ToSqlOutput::from(t.to_string()),
                Value::Blob(b) => ToSqlOutput::from(b.to_vec()),
                Value::Null => ToSqlOutput::from(rusqlite::types::Null),
            })
            .collect();
        let mut st = self.conn.prepare_cached(sql)?;
        let n = st.column_count();
        let mut rows = st.query(rusqlite::params_from_iter(params.iter()))?;
        let (mut count, mut sum) = (0u64, 0i64);
        while let Some(row) = rows.next()? {
            count += 1;
            for i in 0..n {
                if let rusqlite::types::ValueRef::Integer(x) = row.get_ref(i)? {
                    sum = sum.wrapping_add(x);
                }
            }
        }
        Ok((count, sum))
    }
}

/// The operations timed, in order: name, SQL, and how many runs per 1,000 point operations
/// (at least one).
const OPS: [(&str, &str, usize); 16] = [
    ("point SELECT by primary key", "SELECT v FROM t WHERE id = ?1", 1000),
    ("point SELECT through an index", "SELECT id FROM t WHERE k = ?1", 1000),
    ("single-row INSERT", "INSERT INTO t(k, v) VALUES(?1, ?2)", 1000),
    ("single-row UPDATE", "UPDATE t SET v = ?2 WHERE id = ?1", 1000),
    ("100-row range scan", "SELECT count(*), sum(k) FROM t WHERE id BETWEEN ?1 AND ?1 + 99", 100),
    (
        "3-table join",
        "SELECT a.x, b.y, c.z FROM a JOIN b ON b.a_id = a.id JOIN c ON c.b_id = b.id WHERE a.id = ?1",
        1000,
    ),
    ("GROUP BY over the table", "SELECT k % 100, count(*), sum(id) FROM t GROUP BY 1", 1),
    (
        "ORDER BY an index LIMIT 20",
        "SELECT id, k FROM t ORDER BY k DESC, id DESC LIMIT 20",
        100,
    ),
    (
        "the same below a key",
        "SELECT id, k FROM t WHERE k < ?1 ORDER BY k DESC, id DESC LIMIT 20",
        100,
    ),
    ("INSERT, one transaction", "INSERT INTO t(k, v) VALUES(?1, ?2)", 1000),
    // Shapes a planner without SQLite's automatic index and incremental window frames
    // reads quadratically (docs/benchmarks.md, "Statements that went quadratic").
    (
        "join on an expression, no index",
        "SELECT count(*), sum(b.id) FROM b, c WHERE c.z = b.y + 2",
        1,
    ),
    (
        "correlated EXISTS, no index",
        "SELECT count(*), sum(b.id) FROM b WHERE b.id <= 2000 AND EXISTS (SELECT 1 FROM c WHERE c.z = b.y)",
        0,
    ),
    (
        "sum over a moving window frame",
        "SELECT count(*), sum(s) FROM (SELECT sum(k) OVER (ORDER BY id ROWS BETWEEN 50 PRECEDING AND 50 FOLLOWING) s FROM t)",
        0,
    ),
    (
        "recursive CTE counting to 10,000",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 10000) SELECT count(*), sum(x) FROM c",
        1,
    ),
    ("CREATE INDEX on t(v), then DROP", "CREATE INDEX t_v ON t(v)", 0),
    (
        "json_extract from a document",
        "SELECT json_extract(?1, '$.items[5].price'), ?1 ->> '$.meta.flags.n'",
        1000,
    ),
];

/// A JSON document of about 600 bytes for the `json_extract` line.
fn document(id: i64) -> String {
    let items: Vec<String> = (0..8)
        .map(|i| {
            format!(
                r#"{{"sku":"sku-{id}-{i}","price":{},"qty":{i},"tags":["a","b"]}}"#,
                id * 10 + i
            )
        })
        .collect();
    format!(
        r#"{{"id":{id},"name":"item number {id}","items":[{}],"meta":{{"created":"2026-11-29T10:00:00Z","flags":{{"x":true,"y":null,"n":{id}}}}}}}"#,
        items.join(",")
    )
}

/// The line whose INSERTs run in one transaction.
const ONE_TRANSACTION: usize = 9;
/// The line that makes an index (dropped again after each run, in the time).
const CREATE_INDEX: usize = 14;

/// What the writes leave, compared across engines after the INSERT and UPDATE lines.
const WRITTEN: &str = "SELECT count(*), sum(k), sum(length(v)) FROM t";

fn setup(e: &mut dyn SqlEngine, rows: i64) -> BenchResult<()> {
    e.batch(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, v TEXT);
         CREATE INDEX t_k ON t(k);
         CREATE TABLE a(id INTEGER PRIMARY KEY, x INTEGER);
         CREATE TABLE b(id INTEGER PRIMARY KEY, a_id INTEGER, y INTEGER);
         CREATE TABLE c(id INTEGER PRIMARY KEY, b_id INTEGER, z INTEGER);
         CREATE INDEX b_a ON b(a_id);
         CREATE INDEX c_b ON c(b_id);
         BEGIN;",
    )?;
    for i in 1..=rows {
        let v = Value::from(format!("value-{i:0>44}"));
        e.run(
            "INSERT INTO t(id, k, v) VALUES(?1, ?2, ?3)",
            &[i.into(), ((i * 7919) % rows).into(), v],
        )?;
    }
    let small = (rows / 10).max(100);
    for i in 1..=small {
        e.run("INSERT INTO a VALUES(?1, ?2)", &[i.into(), (i * 3).into()])?;
        e.run(
            "INSERT INTO b VALUES(?1, ?2, ?3)",
            &[i.into(), (((i * 31) % small) + 1).into(), (i * 5).into()],
        )?;
        e.run(
            "INSERT INTO c VALUES(?1, ?2, ?3)",
            &[i.into(), (((i * 17) % small) + 1).into(), (i * 7).into()],
        )?;
    }
    e.batch("COMMIT;")
}

/// One timed operation: runs per second, and the checksum of what it read.
fn time_op(
    e: &mut dyn SqlEngine,
    op: usize,
    runs: usize,
    rows: i64,
    seed: u64,
) -> BenchResult<(f64, (u64, i64))> {
    let (_, sql, _) = OPS[op];
    let mut rng = StdRng::seed_from_u64(seed);
    let mut check = (0u64, 0i64);
    let started = Instant::now();
    if op == ONE_TRANSACTION {
        e.batch("BEGIN")?;
    }
    for _ in 0..runs {
        let id: i64 = rng.gen_range(1..=rows);
        let params: Vec<Value> = match op {
            0 | 4 => vec![id.into()],
            1 | 8 => vec![(id % rows).into()],
            2 | ONE_TRANSACTION => vec![id.into(), Value::from("inserted")],
            3 => vec![id.into(), Value::from(format!("updated-{id}"))],
            5 => vec![((id % (rows / 10).max(100)) + 1).into()],
            15 => vec![Value::from(document(id))],
            _ => vec![],
        };
        let (n, s) = e.run(sql, &params)?;
        check = (check.0 + n, check.1.wrapping_add(s));
        if op == CREATE_INDEX {
            e.batch("DROP INDEX t_v")?;
        }
    }
    if op == ONE_TRANSACTION {
        e.batch("COMMIT")?;
    }
    Ok((runs as f64 / started.elapsed().as_secs_f64(), check))
}

/// Runs the benchmark: `rows` rows, `points` runs of each point operation; `runs` repeats.
pub fn run(
    dir: &Path,
    rows: i64,
    points: usize,
    repeats: usize,
    json: Option<&Path>,
) -> BenchResult<()> {
    let mut results: Vec<Vec<Vec<f64>>> = Vec::new(); // engine -> op -> runs
    let mut names = Vec::new();
    let mut records = Vec::new();
    for rep in 0..repeats {
        let mut engines: Vec<Box<dyn SqlEngine>> = Vec::new();
        let bdir = tempfile::tempdir_in(dir)?;
        let cfg = beechdb::Config::new()
            .durability(beechdb::Durability::NoSync)
            .cache_size(256 << 20);
        let db = beechdb_sql::Database::open_with(bdir.path(), cfg)?;
        engines.push(Box::new(Beech {
            conn: db.connect(),
            _db: db,
            cache: Default::default(),
        }));
        #[cfg(feature = "peers")]
        let _ldir = {
            let ldir = tempfile::tempdir_in(dir)?;
            let conn = rusqlite::Connection::open(ldir.path().join("bench.sqlite"))?;
            conn.execute_batch(
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF; PRAGMA cache_size=-262144;",
            )?;
            conn.set_prepared_statement_cache_capacity(64);
            engines.push(Box::new(Lite { conn }));
            ldir
        };
        if results.is_empty() {
            results = vec![vec![Vec::new(); OPS.len()]; engines.len()];
            names = engines.iter().map(|e| e.name()).collect();
        }
        for e in engines.iter_mut() {
            setup(e.as_mut(), rows)?;
        }
        for (op, &(name, _, per)) in OPS.iter().enumerate() {
            let runs = (points * per / 1000).max(1);
            let mut checks = Vec::new();
            // Engines interleaved per operation, each on the same keys.
            for (ei, e) in engines.iter_mut().enumerate() {
                let (ops, check) =
                    time_op(e.as_mut(), op, runs, rows, rep as u64 * 100 + op as u64)?;
                results[ei][op].push(ops);
                checks.push(check);
                records.push(serde_json::json!({
                    "engine": e.name(), "bench": "sql-micro", "op": name, "rows": rows,
                    "runs": runs, "ops_per_sec": ops, "durability": "nosync",
                }));
            }
            if [2, 3, ONE_TRANSACTION].contains(&op) {
                // The writes' work checked: each engine's table must now hold the same.
                checks.clear();
                for e in engines.iter_mut() {
                    checks.push(e.run(WRITTEN, &[])?);
                }
            }
            if checks.windows(2).any(|w| w[0] != w[1]) {
                return Err(format!("{name}: the engines' answers differ: {checks:?}").into());
            }
        }
    }
    println!("sql-micro: {rows} rows, {points} point operations per line, {repeats} runs (median, min-max); auto-commit writes NOSYNC (SQLite: WAL, synchronous=OFF)");
    print!("{:<32}", "operation");
    for n in &names {
        print!(" {:>30}", format!("{n} ops/s"));
    }
    if names.len() > 1 {
        print!(" {:>16}", "beechdb/sqlite");
    }
    println!();
    for (op, &(name, _, _)) in OPS.iter().enumerate() {
        print!("{name:<32}");
        let mut medians = Vec::new();
        for r in &results {
            let mut v = r[op].clone();
            v.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let med = v[v.len() / 2];
            medians.push(med);
            print!(
                " {:>30}",
                format!("{:.0} ({:.0}-{:.0})", med, v[0], v[v.len() - 1])
            );
        }
        if medians.len() > 1 {
            print!(" {:>15.2}x", medians[0] / medians[1]);
        }
        println!();
    }
    if let Some(p) = json {
        std::fs::write(p, serde_json::to_string_pretty(&records)?)?;
    }
    Ok(())
}
