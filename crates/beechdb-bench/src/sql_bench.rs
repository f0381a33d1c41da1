//! `sql`: seed 004's concurrency test, the TPC-B-like test (seed 000 Table 6) and the
//! Wisconsin queries (Table 7), on every engine in the same run.
//!
//! The workloads are one C program (`csrc/sqlbench.c`) written against SQLite's API,
//! built once here and run, unchanged, on each engine by pointing the dynamic linker at a
//! directory whose `libsqlite3.so.0` is that engine's library: BeechDB's drop-in library,
//! SQLite (the system's, rollback journal and WAL), Berkeley DB SQL 5.3 (`libdb_sql`). Each
//! run is its own process in a fresh directory, engines interleaved run by run. BeechDB
//! also runs the same workloads through its native Rust API (`beechdb_sql`), in process.
//!
//! Every run checks its invariant (seed 004: the counters' sum grew by exactly the commits;
//! TPC-B: branch, teller, account and history totals agree and history holds one row per
//! commit); a violation is reported, never hidden.

use crate::engines::BenchResult;
use crate::report::Summary;
use beechdb_sql::{Connection, Database, Value};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// An engine of the SQL benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum SqlEngine {
    /// BeechDB through its Rust API, in process.
    Beechdb,
    /// BeechDB through its drop-in libsqlite3.
    BeechdbC,
    /// SQLite with its rollback journal, BEGIN (as in seed 004).
    Sqlite,
    /// SQLite in WAL mode with BEGIN IMMEDIATE.
    SqliteWal,
    /// Berkeley DB SQL 5.3.
    Bdb,
}

impl SqlEngine {
    fn name(self) -> &'static str {
        match self {
            SqlEngine::Beechdb => "beechdb",
            SqlEngine::BeechdbC => "beechdb-c",
            SqlEngine::Sqlite => "sqlite",
            SqlEngine::SqliteWal => "sqlite-wal",
            SqlEngine::Bdb => "bdb",
        }
    }

    /// The KIND argument of sqlbench.
    fn kind(self) -> &'static str {
        match self {
            SqlEngine::Beechdb | SqlEngine::BeechdbC => "beechdb",
            other => other.name(),
        }
    }
}

#[derive(clap::Args)]
pub struct Options {
    /// Benchmarks: seed004, tpcb, wisconsin; comma-separated.
    #[arg(
        long = "bench",
        value_delimiter = ',',
        default_value = "seed004,tpcb,wisconsin"
    )]
    pub benches: Vec<String>,
    /// Thread counts for seed004 (the seed: 1,2,4,8,16,32,64,100).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32,64,100")]
    pub seed004_threads: Vec<usize>,
    /// Thread counts for tpcb (the seed: 1,2,3,4,5,10).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,5,10")]
    pub tpcb_threads: Vec<usize>,
    /// Seconds each throughput run lasts.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Runs of each point (medians are reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Wisconsin relation sizes (the seed: 10000,100000).
    #[arg(long, value_delimiter = ',', default_value = "10000,100000")]
    pub wisconsin_tuples: Vec<usize>,
    /// Runs of each Wisconsin query (the seed: 10; the mean is reported).
    #[arg(long, default_value_t = 10)]
    pub wisconsin_runs: usize,
    /// Engines (default: all; those whose library is not installed are left out).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub engines: Vec<SqlEngine>,
    /// Directory for the databases (default: the system's temporary directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Also write the results as JSON records to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Draw PNG plots of TPS against threads into this directory (`sql-seed004.png`,
    /// `sql-tpcb.png`; docs/ for the figures in docs/benchmarks.md).
    #[arg(long)]
    pub plots: Option<PathBuf>,
}

/// One measured run of a throughput benchmark.
#[derive(Debug, Clone, Default, serde::Deserialize)]
struct Throughput {
    secs: f64,
    commits: u64,
    retries: u64,
    errors: u64,
    tps: f64,
    invariant_ok: bool,
    #[serde(default)]
    first_error: String,
}

/// One Wisconsin query's result on one engine.
#[derive(Debug, Clone, serde::Deserialize)]
struct QueryTime {
    query: String,
    ms: f64,
    rows: u64,
    checksum: String,
    error: String,
}

/// A JSON record of the results.
#[derive(Serialize)]
struct Record {
    engine: String,
    bench: String,
    threads: usize,
    tuples: usize,
    query: String,
    tps: Option<Summary>,
    ms: Option<Summary>,
    runs: Vec<f64>,
    commits: Vec<u64>,
    retries: Vec<u64>,
    errors: Vec<u64>,
    invariant_violations: usize,
    first_error: String,
}

/// Where each C engine's library is, as a directory holding it as `libsqlite3.so.0`.
struct Libraries {
    sqlbench: PathBuf,
    dirs: BTreeMap<SqlEngine, PathBuf>,
}

const SQLBENCH_C: &str = include_str!("../csrc/sqlbench.c");
const SQLITE3_H: &str = include_str!("../../beechdb-sqlite3/include/sqlite3.h");

/// The first of `names` found in the system's library directories.
fn system_library(names: &[&str]) -> Option<PathBuf> {
    let dirs = [
        "/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/lib/aarch64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
        "/lib",
    ];
    names
        .iter()
        .flat_map(|n| dirs.iter().map(move |d| Path::new(d).join(n)))
        .find(|p| p.exists())
}

/// BeechDB's drop-in library, built beside this program (cargo puts it in `deps`).
fn beechdb_library() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [
        dir.join("libbeechdb_sqlite3.so"),
        dir.join("deps/libbeechdb_sqlite3.so"),
    ]
    .into_iter()
    .find(|p| p.exists())
}

/// Builds sqlbench and the per-engine library directories under `dir`.
fn prepare(dir: &Path, engines: &[SqlEngine]) -> BenchResult<Libraries> {
    let build = dir.join("sqlbench-build");
    std::fs::create_dir_all(&build)?;
    let mut dirs = BTreeMap::new();
    for &e in engines {
        let lib = match e {
            SqlEngine::Beechdb => continue,
            SqlEngine::BeechdbC => beechdb_library(),
            SqlEngine::Sqlite | SqlEngine::SqliteWal => system_library(&["libsqlite3.so.0"]),
            SqlEngine::Bdb => system_library(&["libdb_sql-5.3.so", "libdb_sql.so"]),
        };
        let Some(lib) = lib else {
            eprintln!("{}: its library is not installed here; left out", e.name());
            continue;
        };
        let d = build.join(e.name());
        std::fs::create_dir_all(&d)?;
        let link = d.join("libsqlite3.so.0");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&lib, &link)?;
        dirs.insert(e, d);
    }
    let sqlbench = build.join("sqlbench");
    if let Some(link_dir) = dirs.values().next() {
        std::fs::write(build.join("sqlbench.c"), SQLBENCH_C)?;
        std::fs::write(build.join("sqlite3.h"), SQLITE3_H)?;
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let out = Command::new(&cc)
            .args(["-O2", "-Wall", "-o"])
            .arg(&sqlbench)
            .arg(build.join("sqlbench.c"))
            .arg("-I")
            .arg(&build)
            .arg("-L")
            .arg(link_dir)
            .args(["-l:libsqlite3.so.0", "-lpthread"])
            .output()
            .map_err(|e| format!("{cc}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "building sqlbench failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
    }
    Ok(Libraries { sqlbench, dirs })
}

/// Runs sqlbench on one engine in a fresh directory; returns its JSON lines.
fn run_c(
    libs: &Libraries,
    e: SqlEngine,
    args: &[String],
    parent: &Path,
) -> BenchResult<Vec<String>> {
    let work = tempfile::tempdir_in(parent)?;
    let out = Command::new(&libs.sqlbench)
        .arg(e.kind())
        .arg(&args[0])
        .arg(work.path())
        .args(&args[1..])
        .env("LD_LIBRARY_PATH", &libs.dirs[&e])
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "{} {}: {}",
            e.name(),
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect())
}

/// Runs `f` on several threads, each with its own connection, until `seconds` pass.
fn native_workers(
    db: &Database,
    threads: usize,
    seconds: f64,
    body: impl Fn(&mut Connection, &mut StdRng) -> beechdb_sql::Result<()> + Sync,
) -> Throughput {
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let per_thread: Vec<Throughput> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (stop, body) = (&stop, &body);
                s.spawn(move || {
                    let mut conn = db.connect();
                    conn.set_busy_timeout(Duration::from_secs(10));
                    let mut rng = StdRng::seed_from_u64(0x5eed + t as u64);
                    let mut r = Throughput::default();
                    while !stop.load(Ordering::Relaxed) {
                        let outcome = conn
                            .execute("BEGIN", &[])
                            .and_then(|_| body(&mut conn, &mut rng))
                            .and_then(|_| conn.execute("COMMIT", &[]));
                        match outcome {
                            Ok(_) => r.commits += 1,
                            Err(e) => {
                                if e.is_busy() {
                                    r.retries += 1;
                                } else {
                                    r.errors += 1;
                                    if r.first_error.is_empty() {
                                        r.first_error = e.to_string();
                                    }
                                }
                                if !conn.is_autocommit() {
                                    let _ = conn.execute("ROLLBACK", &[]);
                                }
                            }
                        }
                    }
                    r
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(seconds));
        stop.store(true, Ordering::Relaxed);
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut total = Throughput {
        secs: start.elapsed().as_secs_f64(),
        ..Default::default()
    };
    for r in per_thread {
        total.commits += r.commits;
        total.retries += r.retries;
        total.errors += r.errors;
        if total.first_error.is_empty() {
            total.first_error = r.first_error;
        }
    }
    total.tps = total.commits as f64 / total.secs;
    total
}

fn scalar(conn: &mut Connection, sql: &str) -> BenchResult<i64> {
    let r = conn.query(sql, &[])?;
    Ok(r.rows
        .first()
        .and_then(|r| r.first())
        .map_or(0, Value::as_i64))
}

const SEED004_ROWS: i64 = 10_000;

fn native_seed004(dir: &Path, threads: usize, seconds: f64) -> BenchResult<Throughput> {
    let db = Database::open(dir.join("bench.db"))?;
    let mut conn = db.connect();
    conn.execute_batch(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, counter INTEGER NOT NULL, payload TEXT); BEGIN",
    )?;
    let ins = conn.prepare("INSERT INTO t VALUES (?, 0, ?)")?;
    let mut rng = StdRng::seed_from_u64(4);
    for id in 1..=SEED004_ROWS {
        let payload: String = (0..400)
            .map(|_| rng.gen_range(b'a'..=b'z') as char)
            .collect();
        conn.run(&ins, &[Value::Integer(id), Value::from(payload)])?;
    }
    conn.execute("COMMIT", &[])?;
    let before = scalar(&mut conn, "SELECT sum(counter) FROM t")?;
    let sel = conn.prepare("SELECT payload FROM t WHERE id = ?")?;
    let upd = conn.prepare("UPDATE t SET counter = counter + 1 WHERE id = ?")?;
    let mut r = native_workers(&db, threads, seconds, |c, rng| {
        c.run(&sel, &[Value::Integer(rng.gen_range(1..=SEED004_ROWS))])?;
        c.run(&upd, &[Value::Integer(rng.gen_range(1..=SEED004_ROWS))])?;
        Ok(())
    });
    let after = scalar(&mut conn, "SELECT sum(counter) FROM t")?;
    r.invariant_ok = (after - before) as u64 == r.commits;
    Ok(r)
}

const BRANCHES: i64 = 1000;
const TELLERS: i64 = 10_000;
const ACCOUNTS: i64 = 100_000;

fn native_tpcb(dir: &Path, threads: usize, seconds: f64) -> BenchResult<Throughput> {
    let db = Database::open_with(
        dir.join("bench.db"),
        beechdb::Config::new().cache_size(256 << 20),
    )?;
    let mut conn = db.connect();
    conn.execute_batch(
        "CREATE TABLE branches(bid INTEGER PRIMARY KEY, bbalance INTEGER NOT NULL, filler CHAR(88));
         CREATE TABLE tellers(tid INTEGER PRIMARY KEY, bid INTEGER NOT NULL, tbalance INTEGER NOT NULL, filler CHAR(84));
         CREATE TABLE accounts(aid INTEGER PRIMARY KEY, bid INTEGER NOT NULL, abalance INTEGER NOT NULL, filler CHAR(84));
         CREATE TABLE history(tid INTEGER, bid INTEGER, aid INTEGER, delta INTEGER, mtime INTEGER, filler CHAR(22));
         BEGIN",
    )?;
    for (sql, n, per_branch) in [
        ("INSERT INTO branches VALUES (?1, 0 * ?2, 'branch filler: 88 bytes in the TPC-B specification')", BRANCHES, 0),
        ("INSERT INTO tellers VALUES (?1, ?2, 0, 'teller filler: 84 bytes in the TPC-B specification')", TELLERS, TELLERS / BRANCHES),
        ("INSERT INTO accounts VALUES (?1, ?2, 0, 'account filler: 84 bytes in the TPC-B specification')", ACCOUNTS, ACCOUNTS / BRANCHES),
    ] {
        let st = conn.prepare(sql)?;
        for i in 1..=n {
            let bid = if per_branch > 0 { (i - 1) / per_branch + 1 } else { 0 };
            conn.run(&st, &[Value::Integer(i), Value::Integer(bid)])?;
        }
    }
    conn.execute("COMMIT", &[])?;
    let acct = conn.prepare("UPDATE accounts SET abalance = abalance + ?1 WHERE aid = ?2")?;
    let read = conn.prepare("SELECT abalance FROM accounts WHERE aid = ?1")?;
    let tell = conn.prepare("UPDATE tellers SET tbalance = tbalance + ?1 WHERE tid = ?2")?;
    let bran = conn.prepare("UPDATE branches SET bbalance = bbalance + ?1 WHERE bid = ?2")?;
    let hist = conn.prepare(
        "INSERT INTO history(tid, bid, aid, delta, mtime, filler) VALUES (?1, ?2, ?3, ?4, ?5, 'tpcb history filler')",
    )?;
    let mut r = native_workers(&db, threads, seconds, |c, rng| {
        let tid = rng.gen_range(1..=TELLERS);
        let bid = (tid - 1) / (TELLERS / BRANCHES) + 1;
        let per = ACCOUNTS / BRANCHES;
        let aid = if rng.gen_ratio(85, 100) {
            (bid - 1) * per + rng.gen_range(1..=per)
        } else {
            rng.gen_range(1..=ACCOUNTS)
        };
        let delta = Value::Integer(rng.gen_range(-99_999..=99_999));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        c.run(&acct, &[delta.clone(), Value::Integer(aid)])?;
        c.run(&read, &[Value::Integer(aid)])?;
        c.run(&tell, &[delta.clone(), Value::Integer(tid)])?;
        c.run(&bran, &[delta.clone(), Value::Integer(bid)])?;
        let row = [tid, bid, aid].map(Value::Integer);
        c.run(
            &hist,
            &[
                row[0].clone(),
                row[1].clone(),
                row[2].clone(),
                delta,
                Value::Integer(now),
            ],
        )?;
        Ok(())
    });
    let sums: Vec<i64> = [
        "SELECT sum(bbalance) FROM branches",
        "SELECT sum(tbalance) FROM tellers",
        "SELECT sum(abalance) FROM accounts",
        "SELECT coalesce(sum(delta), 0) FROM history",
    ]
    .iter()
    .map(|q| scalar(&mut conn, q))
    .collect::<BenchResult<_>>()?;
    let rows = scalar(&mut conn, "SELECT count(*) FROM history")?;
    r.invariant_ok = sums.windows(2).all(|w| w[0] == w[1]) && rows as u64 == r.commits;
    Ok(r)
}

/// DeWitt's relations and the 32 queries for `n` tuples, as "label\tSQL" lines; "setup"
/// lines load the relations and create the indices between the two phases. The SQL is that
/// of SQLite 3.7 (no CTEs), which Berkeley DB SQL 5.3 speaks. "Clustered" indices are
/// plain indices on unique2 (SQLite keeps rows in rowid order, as does BeechDB).
pub fn wisconsin_queries(n: usize) -> Vec<(String, String)> {
    let (p1, p10) = (n / 100, n / 10);
    let lo = 792 * n / 10_000;
    let letters = |x: &str| {
        (0..7)
            .rev()
            .map(|k| {
                format!(
                    "substr('ABCDEFGHIJKLMNOPQRSTUVWXYZ', ({x} / {}) % 26 + 1, 1)",
                    26u64.pow(k)
                )
            })
            .collect::<Vec<_>>()
            .join(" || ")
            + &format!(" || '{}'", "x".repeat(45))
    };
    let digits = (0..10)
        .map(|d| format!("SELECT {d}"))
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    let places = (n.max(10) as f64).log10().ceil() as usize;
    let nums = (0..places)
        .map(|k| format!("d{k}.d * {}", 10usize.pow(k as u32)))
        .collect::<Vec<_>>()
        .join(" + ");
    let from = (0..places)
        .map(|k| format!("digits d{k}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut q: Vec<(String, String)> = vec![
        ("setup".into(), "CREATE TABLE digits(d INTEGER)".into()),
        ("setup".into(), format!("INSERT INTO digits {digits}")),
        (
            "setup".into(),
            format!("CREATE TABLE nums AS SELECT {nums} AS i FROM {from}"),
        ),
    ];
    for (name, rows, mult) in [
        ("tenktup1", n, 7919),
        ("tenktup2", n, 7907),
        ("onektup", n / 10, 7901),
    ] {
        q.push(("setup".into(), format!(
            "CREATE TABLE {name}(unique1 INTEGER NOT NULL, unique2 INTEGER NOT NULL, two INTEGER, four INTEGER, \
             ten INTEGER, twenty INTEGER, onePercent INTEGER, tenPercent INTEGER, twentyPercent INTEGER, \
             fiftyPercent INTEGER, unique3 INTEGER, evenOnePercent INTEGER, oddOnePercent INTEGER, \
             stringu1 CHAR(52), stringu2 CHAR(52), string4 CHAR(52))"
        )));
        q.push(("setup".into(), format!(
            "INSERT INTO {name} SELECT u1, i, u1 % 2, u1 % 4, u1 % 10, u1 % 20, u1 % 100, u1 % 10, u1 % 5, \
             u1 % 2, u1, (u1 % 100) * 2, (u1 % 100) * 2 + 1, {}, {}, \
             substr('AAAAHHHHOOOOVVVV', (i % 4) * 4 + 1, 4) || '{}' \
             FROM (SELECT i, (i * {mult}) % {rows} AS u1 FROM nums WHERE i < {rows}) ORDER BY i",
            letters("u1"),
            letters("i"),
            "x".repeat(48)
        )));
    }
    q.push((
        "setup".into(),
        "CREATE TABLE bprime AS SELECT * FROM tenktup2 WHERE unique2 < 1000".into(),
    ));
    let sel = |col: &str, count: usize| {
        format!(
            "SELECT * FROM tenktup1 WHERE {col} BETWEEN {lo} AND {}",
            lo + count - 1
        )
    };
    let join_ab = |c: &str| {
        format!("SELECT * FROM tenktup1 A, tenktup2 B WHERE A.{c} = B.{c} AND B.{c} < {p10}")
    };
    let join_abp = |c: &str| format!("SELECT * FROM tenktup1 A, bprime B WHERE A.{c} = B.{c}");
    let join_cab = |c: &str| {
        format!(
            "SELECT * FROM onektup C, tenktup1 A, tenktup2 B WHERE C.{c} = A.{c} AND A.{c} = B.{c} \
             AND A.{c} < {p10} AND B.{c} < {p10}"
        )
    };
    let delete = |k: usize| format!("DELETE FROM tenktup1 WHERE unique1 = {k}");
    let update = |col: &str, to: usize, from: usize| {
        format!("UPDATE tenktup1 SET {col} = {to} WHERE {col} = {from}")
    };
    let insert = |k: usize| {
        format!(
            "INSERT INTO tenktup1 VALUES ({k}, {k}, 0, 0, 0, 0, 0, 0, 0, 0, {k}, 0, 1, \
             'XXXXXXX{x}', 'XXXXXXX{x}', 'AAAA{y}')",
            x = "x".repeat(45),
            y = "x".repeat(48)
        )
    };
    let proj1 =
        "SELECT DISTINCT two, four, ten, twenty, onePercent, string4 FROM tenktup1".to_string();
    let proj100 = "SELECT DISTINCT two, four, ten, twenty, onePercent, tenPercent, twentyPercent, fiftyPercent, \
                   unique3, evenOnePercent, oddOnePercent, stringu1, stringu2, string4 FROM tenktup1"
        .to_string();
    let (min, min_g, sum_g) = (
        "SELECT min(unique2) FROM tenktup1".to_string(),
        "SELECT min(unique3) FROM tenktup1 GROUP BY onePercent".to_string(),
        "SELECT sum(unique3) FROM tenktup1 GROUP BY onePercent".to_string(),
    );
    let no_index = [
        (1, sel("unique2", p1)),
        (2, sel("unique2", p10)),
        (9, join_ab("unique2")),
        (10, join_abp("unique2")),
        (11, join_cab("unique2")),
        (18, proj1),
        (19, proj100),
        (20, min.clone()),
        (21, min_g.clone()),
        (22, sum_g.clone()),
        (26, insert(n + 1)),
        (27, delete(n + 1)),
        (28, update("unique2", n + 1, n * 1491 / 10_000)),
    ];
    q.extend(no_index.into_iter().map(|(i, s)| (i.to_string(), s)));
    for t in ["tenktup1", "tenktup2", "onektup", "bprime"] {
        q.push((
            "setup".into(),
            format!("CREATE INDEX {t}_u2 ON {t}(unique2)"),
        ));
        q.push((
            "setup".into(),
            format!("CREATE INDEX {t}_u1 ON {t}(unique1)"),
        ));
    }
    let indexed = [
        (3, sel("unique2", p1)),
        (4, sel("unique2", p10)),
        (5, sel("unique1", p1)),
        (6, sel("unique1", p10)),
        (
            7,
            format!(
                "SELECT * FROM tenktup1 WHERE unique2 = {}",
                n * 2001 / 10_000
            ),
        ),
        (8, sel("unique2", p1)),
        (12, join_ab("unique2")),
        (13, join_abp("unique2")),
        (14, join_cab("unique2")),
        (15, join_ab("unique1")),
        (16, join_abp("unique1")),
        (17, join_cab("unique1")),
        (23, min),
        (24, min_g),
        (25, sum_g),
        (29, insert(n + 2)),
        (30, delete(n + 2)),
        (31, update("unique2", n + 3, n * 1492 / 10_000)),
        (32, update("unique1", n + 4, n * 1493 / 10_000)),
    ];
    q.extend(indexed.into_iter().map(|(i, s)| (i.to_string(), s)));
    q
}

/// A row's hash from its columns as text (as `Value::to_text` gives it); summed over rows,
/// so that the checksum of a result does not depend on row order (as sqlbench.c computes
/// it). Text is hashed in place and integers are written into `scratch`, as sqlbench.c
/// reads them through `sqlite3_column_text` (a conversion into a buffer the statement
/// reuses): the harness's share of the time is the same for every engine.
fn row_hash(row: &[Value], scratch: &mut String) -> u64 {
    use std::fmt::Write;
    let mut h = 0u64;
    for v in row {
        let text = match v {
            Value::Text(s) => s.as_bytes(),
            Value::Integer(i) => {
                scratch.clear();
                write!(scratch, "{i}").expect("writes to a string");
                scratch.as_bytes()
            }
            other => {
                *scratch = other.to_text();
                scratch.as_bytes()
            }
        };
        for &b in text {
            h = h.wrapping_mul(31).wrapping_add(b as u64);
        }
        h = h.wrapping_mul(31).wrapping_add(0xff);
    }
    h
}

/// The Wisconsin queries through BeechDB's Rust API.
fn native_wisconsin(dir: &Path, n: usize, runs: usize) -> BenchResult<Vec<QueryTime>> {
    let db = Database::open(dir.join("bench.db"))?;
    let mut conn = db.connect();
    let mut out = Vec::new();
    for (label, sql) in wisconsin_queries(n) {
        if label == "setup" {
            conn.execute_batch(&sql)?;
            continue;
        }
        let mut total = Duration::ZERO;
        let (mut rows, mut checksum, mut error) = (0u64, 0u64, String::new());
        let mut scratch = String::new();
        for _ in 0..runs {
            let t = Instant::now();
            match conn.query(&sql, &[]) {
                Ok(r) => {
                    rows += r.rows.len() as u64;
                    for row in &r.rows {
                        checksum = checksum.wrapping_add(row_hash(row, &mut scratch));
                    }
                }
                Err(e) => {
                    error = e.to_string();
                    break;
                }
            }
            total += t.elapsed();
        }
        out.push(QueryTime {
            query: label,
            ms: total.as_secs_f64() * 1000.0 / runs as f64,
            rows: rows / runs as u64,
            checksum: format!("{checksum:x}"),
            error,
        });
    }
    Ok(out)
}

fn parse<T: serde::de::DeserializeOwned>(lines: &[String]) -> BenchResult<Vec<T>> {
    lines
        .iter()
        .map(|l| serde_json::from_str(l).map_err(|e| format!("{e}: {l}").into()))
        .collect()
}

pub fn run(mut opts: Options) -> BenchResult<()> {
    if opts.runs == 0 || opts.seconds <= 0.0 || opts.wisconsin_runs == 0 {
        return Err("--runs, --seconds and --wisconsin-runs must be positive".into());
    }
    if opts.engines.is_empty() {
        use SqlEngine::*;
        opts.engines = vec![Beechdb, BeechdbC, Sqlite, SqliteWal, Bdb];
    }
    let work = opts
        .dir
        .clone()
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("beechdb-sql-bench-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let r = run_in(&opts, &work);
    let _ = std::fs::remove_dir_all(&work);
    r
}

fn run_in(opts: &Options, dir: &Path) -> BenchResult<()> {
    let libs = prepare(dir, &opts.engines)?;
    let engines: Vec<SqlEngine> = opts
        .engines
        .iter()
        .copied()
        .filter(|e| *e == SqlEngine::Beechdb || libs.dirs.contains_key(e))
        .collect();
    let mut records = Vec::new();
    for bench in &opts.benches {
        match bench.as_str() {
            "seed004" | "tpcb" => {
                let threads = if bench == "seed004" {
                    &opts.seed004_threads
                } else {
                    &opts.tpcb_threads
                };
                throughput(opts, dir, &libs, &engines, bench, threads, &mut records)?
            }
            "wisconsin" => wisconsin(opts, dir, &libs, &engines, &mut records)?,
            other => return Err(format!("unknown SQL benchmark {other:?}").into()),
        }
    }
    if let Some(path) = &opts.json {
        let text: String = records
            .iter()
            .map(|r| serde_json::to_string(r).expect("serializable") + "\n")
            .collect();
        std::fs::write(path, text)?;
        println!("JSON records: {}", path.display());
    }
    Ok(())
}

fn throughput(
    opts: &Options,
    dir: &Path,
    libs: &Libraries,
    engines: &[SqlEngine],
    bench: &str,
    threads: &[usize],
    records: &mut Vec<Record>,
) -> BenchResult<()> {
    let title = if bench == "seed004" {
        "Seed 004: BEGIN; SELECT by id; UPDATE by id; COMMIT (10,000 rows of 400 bytes)"
    } else {
        "TPC-B-like (seed 000 Table 6): 1,000 branches, 10,000 tellers, 100,000 accounts"
    };
    println!("\n### {title}\n");
    println!(
        "Committed transactions per second, median of {} runs of {} s (min–max); each engine's \
         default durable commit.\n",
        opts.runs, opts.seconds
    );
    let mut header = String::from("| threads |");
    for e in engines {
        header += &format!(" {} |", e.name());
    }
    println!("{header} retries / errors / invariant violations |");
    println!("|---|{}---|", "---|".repeat(engines.len()));
    for &t in threads {
        let mut results: BTreeMap<SqlEngine, Vec<Throughput>> = BTreeMap::new();
        for run in 0..opts.runs {
            // Interleaved, starting with a different engine each run.
            for k in 0..engines.len() {
                let e = engines[(k + run) % engines.len()];
                let r = if e == SqlEngine::Beechdb {
                    let work = tempfile::tempdir_in(dir)?;
                    if bench == "seed004" {
                        native_seed004(work.path(), t, opts.seconds)?
                    } else {
                        native_tpcb(work.path(), t, opts.seconds)?
                    }
                } else {
                    let args = [bench.to_string(), t.to_string(), opts.seconds.to_string()];
                    let lines = run_c(libs, e, &args, dir)?;
                    parse::<Throughput>(&lines)?
                        .pop()
                        .ok_or_else(|| format!("{}: no result", e.name()))?
                };
                results.entry(e).or_default().push(r);
            }
        }
        let mut row = format!("| {t} |");
        let mut notes = Vec::new();
        for e in engines {
            let rs = &results[e];
            let tps: Vec<f64> = rs.iter().map(|r| r.tps).collect();
            let s = Summary::of(&tps);
            row += &format!(" {:.0} ({:.0}–{:.0}) |", s.median, s.min, s.max);
            let violations = rs.iter().filter(|r| !r.invariant_ok).count();
            let retries: u64 = rs.iter().map(|r| r.retries).sum();
            let errors: u64 = rs.iter().map(|r| r.errors).sum();
            notes.push(format!("{}: {retries}/{errors}/{violations}", e.name()));
            let first_error = rs
                .iter()
                .map(|r| r.first_error.clone())
                .find(|m| !m.is_empty());
            records.push(Record {
                engine: e.name().into(),
                bench: bench.into(),
                threads: t,
                tuples: 0,
                query: String::new(),
                tps: Some(s),
                ms: None,
                runs: tps,
                commits: rs.iter().map(|r| r.commits).collect(),
                retries: rs.iter().map(|r| r.retries).collect(),
                errors: rs.iter().map(|r| r.errors).collect(),
                invariant_violations: violations,
                first_error: first_error.unwrap_or_default(),
            });
        }
        println!("{row} {} |", notes.join("; "));
    }
    ratios(records, bench, engines);
    if let Some(dir) = &opts.plots {
        plot(dir, records, bench, engines, title);
    }
    Ok(())
}

/// Draws the medians of `bench` against threads, one line per engine.
fn plot(dir: &Path, records: &[Record], bench: &str, engines: &[SqlEngine], title: &str) {
    let series: Vec<crate::plot::Series> = engines
        .iter()
        .map(|e| {
            let points = records
                .iter()
                .filter(|r| r.engine == e.name() && r.bench == bench)
                .filter_map(|r| r.tps.as_ref().map(|s| (r.threads as f64, s.median)))
                .collect();
            (e.name().to_string(), points)
        })
        .collect();
    let path = dir.join(format!("sql-{bench}.png"));
    match crate::plot::lines(&path, title, "committed transactions per second", &series) {
        Ok(()) => println!("\nplot: {}", path.display()),
        Err(e) => eprintln!("{e}"),
    }
}

/// BeechDB's median throughput over each peer's, per thread count.
fn ratios(records: &[Record], bench: &str, engines: &[SqlEngine]) {
    let median = |e: &str, t: usize| {
        records
            .iter()
            .find(|r| r.engine == e && r.bench == bench && r.threads == t)
            .and_then(|r| r.tps.as_ref().map(|s| s.median))
    };
    let threads: Vec<usize> = {
        let mut v: Vec<usize> = records
            .iter()
            .filter(|r| r.bench == bench)
            .map(|r| r.threads)
            .collect();
        v.dedup();
        v
    };
    for ours in [SqlEngine::Beechdb, SqlEngine::BeechdbC] {
        if !engines.contains(&ours) {
            continue;
        }
        for peer in [SqlEngine::Bdb, SqlEngine::SqliteWal, SqlEngine::Sqlite] {
            if !engines.contains(&peer) {
                continue;
            }
            let cells: Vec<String> = threads
                .iter()
                .map(
                    |&t| match (median(ours.name(), t), median(peer.name(), t)) {
                        (Some(a), Some(b)) if b > 0.0 => format!("{t}: {:.2}x", a / b),
                        _ => format!("{t}: -"),
                    },
                )
                .collect();
            println!("\n{} / {}: {}", ours.name(), peer.name(), cells.join(", "));
        }
    }
}

fn wisconsin(
    opts: &Options,
    dir: &Path,
    libs: &Libraries,
    engines: &[SqlEngine],
    records: &mut Vec<Record>,
) -> BenchResult<()> {
    for &n in &opts.wisconsin_tuples {
        println!(
            "\n### Wisconsin (seed 000 Table 7), {n} tuples: ms per query, mean of {} runs\n",
            opts.wisconsin_runs
        );
        let queries = dir.join(format!("wisconsin-{n}.tsv"));
        let text: String = wisconsin_queries(n)
            .iter()
            .map(|(l, s)| format!("{l}\t{s}\n"))
            .collect();
        std::fs::write(&queries, text)?;
        let mut by_engine: BTreeMap<SqlEngine, Vec<QueryTime>> = BTreeMap::new();
        for &e in engines {
            let times = if e == SqlEngine::Beechdb {
                let work = tempfile::tempdir_in(dir)?;
                native_wisconsin(work.path(), n, opts.wisconsin_runs)?
            } else {
                let args = [
                    "wisconsin".to_string(),
                    n.to_string(),
                    opts.wisconsin_runs.to_string(),
                    queries.display().to_string(),
                ];
                parse(&run_c(libs, e, &args, dir)?)?
            };
            by_engine.insert(e, times);
        }
        let mut header = String::from("| query |");
        for e in engines {
            header += &format!(" {} |", e.name());
        }
        println!("{header} rows |");
        println!("|---|{}---|", "---|".repeat(engines.len()));
        let labels: Vec<String> = by_engine
            .values()
            .next()
            .map(|v| v.iter().map(|q| q.query.clone()).collect())
            .unwrap_or_default();
        let mut sums = vec![0.0; engines.len()];
        for label in &labels {
            let mut row = format!("| {label} |");
            let mut rows = Vec::new();
            for (i, e) in engines.iter().enumerate() {
                let Some(q) = by_engine[e].iter().find(|q| &q.query == label) else {
                    row += " - |";
                    continue;
                };
                if q.error.is_empty() {
                    row += &format!(" {:.3} |", q.ms);
                    sums[i] += q.ms;
                } else {
                    row += &format!(" error: {} |", q.error);
                }
                rows.push(format!("{}", q.rows));
                records.push(Record {
                    engine: e.name().into(),
                    bench: "wisconsin".into(),
                    threads: 1,
                    tuples: n,
                    query: label.clone(),
                    tps: None,
                    ms: Some(Summary::of(&[q.ms])),
                    runs: vec![q.ms],
                    commits: Vec::new(),
                    retries: Vec::new(),
                    errors: Vec::new(),
                    invariant_violations: 0,
                    first_error: q.error.clone(),
                });
            }
            rows.dedup();
            println!("{row} {} |", rows.join(" / "));
        }
        let mut row = String::from("| sum |");
        for s in &sums {
            row += &format!(" {s:.1} |");
        }
        println!("{row} |");
        // Every engine must have read the same rows.
        for label in &labels {
            let sums: Vec<(&str, &str)> = engines
                .iter()
                .filter_map(|e| {
                    by_engine[e]
                        .iter()
                        .find(|q| &q.query == label && q.error.is_empty())
                        .map(|q| (e.name(), q.checksum.as_str()))
                })
                .collect();
            if sums.windows(2).any(|w| w[0].1 != w[1].1) {
                println!("query {label}: engines read different rows: {sums:?}");
            }
        }
    }
    Ok(())
}
