//! `beechdb-bench`: the seeds' benchmarks. `kv` reproduces seed 000's Tables 3-5 (Data
//! Store; Transactional Data Store at each durability level; several threads); with
//! `--features peers`, Berkeley DB 5.3, LMDB and SQLite run the same workload in the same
//! process run, and the tables show BeechDB / Berkeley DB ratios. `testfile` is seed 002's
//! log-throughput test.

mod engines;
mod ha;
mod ha_je;
mod kv;
mod plot;
mod report;
mod sql_bench;
mod sql_micro;

use clap::{Parser, Subcommand};
use engines::{BenchResult, Engine, Mode, Setup};
use report::Summary;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "beechdb-bench",
    version,
    about = "BeechDB benchmarks against Berkeley DB 5.3, LMDB and SQLite",
    long_about = "BeechDB benchmarks against Berkeley DB 5.3, LMDB, SQLite and Berkeley DB JE \
                  HA, each engine measured in the same run on the same workload. The workloads \
                  are those of Oracle's published Berkeley DB performance papers (the \
                  key/value and SQL overview of Berkeley DB 11gR2, the JE High Availability \
                  scalability tests) and of Berkeley DB's reference guide."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The key/value workload of Oracle's Berkeley DB 11gR2 performance overview (its Tables
    /// 3, 4 and 5): batches of bulk puts, gets, updates, deletes and scans, in Data Store
    /// mode and in transactional mode with each durability, on one or more threads.
    Kv {
        /// Modes: ds, tds (all five below), tds-sync, tds-write-nosync, tds-nosync,
        /// tds-inmem, tds-tmpfs-sync; comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "ds")]
        mode: Vec<String>,
        /// Thread counts, comma-separated (the paper: 1,2,3,4,8,12,16).
        #[arg(long, value_delimiter = ',', default_value = "1")]
        threads: Vec<usize>,
        /// Fraction of the paper's 57,600 batches (1.0 = the paper's size).
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
        /// Runs per configuration (the paper uses five).
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Engines to run (default: all compiled in).
        #[arg(long, value_enum, value_delimiter = ',')]
        engines: Vec<Engine>,
        /// Cache size in MiB for every engine (the paper: 512).
        #[arg(long, default_value_t = 512)]
        cache_mb: usize,
        /// BeechDB page size.
        #[arg(long, default_value_t = beechdb::DEFAULT_PAGE_SIZE)]
        page_size: usize,
        /// Berkeley DB page size (0: its default).
        #[arg(long, default_value_t = 0)]
        bdb_page_size: usize,
        /// Directory to hold the engines' files (default: the system's temporary directory).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// RAM-disk directory for tds-tmpfs-sync.
        #[arg(long, default_value = "/dev/shm")]
        tmpfs_dir: PathBuf,
        /// Also write the results as JSON records to this file.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// The SQL benchmarks: a concurrency test of many writers at once (from Berkeley DB
    /// SQL's performance paper), a TPC-B-like test and the Wisconsin queries (the 11gR2
    /// overview's Tables 6 and 7): one C program run on BeechDB's drop-in libsqlite3, SQLite
    /// (journal and WAL) and Berkeley DB SQL, engines interleaved, and BeechDB's Rust API in
    /// the same run.
    Sql(sql_bench::Options),
    /// JE High Availability's ScaleTest on a replication group (the scenarios of its paper's
    /// Table 2, the series of replica counts, failover, catch-up and network restore), every
    /// replica a process on loopback; the fsync and loopback ceilings measured in the same
    /// run.
    Ha(ha::Options),
    /// One member of a replication group, for `ha` (runs until killed).
    #[command(hide = true)]
    HaNode(ha::NodeOptions),
    /// Prepared SQL statements one at a time (point and index lookups, single-row writes, a
    /// range scan, a join, a GROUP BY): BeechDB's SQL layer, and SQLite with `--features
    /// peers`, in the same run; medians and ratios.
    SqlMicro {
        /// Rows in the main table.
        #[arg(long, default_value_t = 100_000)]
        rows: i64,
        /// Runs of each point operation (range scans run a tenth as often).
        #[arg(long, default_value_t = 20_000)]
        points: usize,
        /// Repeats of the whole run.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Directory for the databases (default: the system's temporary directory).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Also write the results as JSON records to this file.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// The disk's commit ceiling (the reference guide's log-throughput test): write N bytes,
    /// fsync, seek back; prints ops/s.
    Testfile {
        /// Bytes per write.
        #[arg(short = 'b', default_value_t = 256)]
        bytes: usize,
        /// Number of operations.
        #[arg(short = 'o', default_value_t = 1000)]
        ops: usize,
        /// Directory for the test file (default: the system's temporary directory).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("beechdb-bench: {e}");
            ExitCode::from(2)
        }
    }
}

/// Seed 002's test: the ceiling for one synchronous committer on this disk. Each operation
/// writes `bytes` at offset 0 and calls fdatasync, as BeechDB's log commit does.
fn testfile(dir: &Path, bytes: usize, ops: usize) -> BenchResult<f64> {
    let path = dir.join("testfile.tmp");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)?;
    let buf = vec![0xabu8; bytes];
    f.write_all_at(&buf, 0)?;
    f.sync_all()?;
    let start = Instant::now();
    for _ in 0..ops {
        f.write_all_at(&buf, 0)?;
        f.sync_data()?;
    }
    let secs = start.elapsed().as_secs_f64();
    std::fs::remove_file(&path)?;
    Ok(ops as f64 / secs)
}

fn parse_modes(names: &[String]) -> BenchResult<Vec<Mode>> {
    let mut modes = Vec::new();
    for n in names {
        let add: Vec<Mode> = match n.as_str() {
            "ds" => vec![Mode::Ds],
            "tds" => vec![
                Mode::TdsSync,
                Mode::TdsWriteNosync,
                Mode::TdsNosync,
                Mode::TdsInmem,
                Mode::TdsTmpfsSync,
            ],
            "tds-sync" => vec![Mode::TdsSync],
            "tds-write-nosync" => vec![Mode::TdsWriteNosync],
            "tds-nosync" => vec![Mode::TdsNosync],
            "tds-inmem" => vec![Mode::TdsInmem],
            "tds-tmpfs-sync" => vec![Mode::TdsTmpfsSync],
            other => return Err(format!("unknown mode {other:?}").into()),
        };
        for m in add {
            if !modes.contains(&m) {
                modes.push(m);
            }
        }
    }
    Ok(modes)
}

fn run(cli: Cli) -> BenchResult<()> {
    match cli.command {
        Command::Sql(opts) => sql_bench::run(opts),
        Command::Ha(opts) => ha::run(opts),
        Command::HaNode(opts) => ha::node(opts),
        Command::SqlMicro {
            rows,
            points,
            runs,
            dir,
            json,
        } => {
            let dir = dir.unwrap_or_else(std::env::temp_dir);
            sql_micro::run(&dir, rows, points, runs, json.as_deref())
        }
        Command::Testfile { bytes, ops, dir } => {
            let dir = dir.unwrap_or_else(std::env::temp_dir);
            println!("running: {ops} ops");
            let t = Instant::now();
            let rate = testfile(&dir, bytes, ops)?;
            println!("Elapsed time: {:.6} seconds", t.elapsed().as_secs_f64());
            println!("{ops} ops: {rate:.2} ops per second");
            Ok(())
        }
        Command::Kv {
            mode,
            threads,
            scale,
            runs,
            engines,
            cache_mb,
            page_size,
            bdb_page_size,
            dir,
            tmpfs_dir,
            json,
        } => {
            if !(scale > 0.0 && scale <= 100.0) || runs == 0 || threads.contains(&0) {
                return Err(
                    "--scale must be in (0, 100], --runs and every thread count at least 1".into(),
                );
            }
            let modes = parse_modes(&mode)?;
            let engines = if engines.is_empty() {
                Engine::available()
            } else {
                engines
            };
            let opts = kv::KvOptions {
                engines,
                modes,
                threads,
                batches: ((kv::PAPER_BATCHES as f64 * scale).round() as u64).max(1),
                runs,
                setup: Setup {
                    cache_bytes: cache_mb << 20,
                    page_size,
                    bdb_page_size,
                    mode: Mode::Ds,
                },
                dir: dir.clone(),
                tmpfs_dir,
            };
            // Seed 002's ceiling, measured on the same disk before each SYNC run at the fewest
            // threads, so that it sees the disk as those runs do (its fsync rate drifts).
            let testfile_dir = dir.clone().unwrap_or_else(std::env::temp_dir);
            let fewest = opts.threads.iter().copied().min().unwrap_or(1);
            let mut rates = Vec::new();
            let samples = kv::run(&opts, &mut |mode, threads| {
                if mode == Mode::TdsSync && threads == fewest {
                    rates.push(testfile(&testfile_dir, 256, 1000)?);
                }
                Ok(())
            })?;
            let ceiling = (!rates.is_empty()).then(|| Summary::of(&rates));
            let (mut table, records) = kv::report(&opts, &samples);
            let ceiling = ceiling.as_ref().map(|c| (c, rates.len()));
            table.push_str(&targets(&opts, &samples, ceiling));
            println!("{table}");
            if let Some(path) = json {
                std::fs::write(&path, serde_json::to_string_pretty(&records)?)?;
                eprintln!("wrote {} records to {}", records.len(), path.display());
            }
            Ok(())
        }
    }
}

/// Lines for the targets that compare configurations with each other.
fn targets(
    opts: &kv::KvOptions,
    samples: &kv::Samples,
    ceiling: Option<(&Summary, usize)>,
) -> String {
    let mut out = String::new();
    let find = |mode: Mode, threads: usize, engine: Engine, op: usize| -> Option<Summary> {
        let mi = opts.modes.iter().position(|&m| m == mode)?;
        let ti = opts.threads.iter().position(|&t| t == threads)?;
        let ei = opts.engines.iter().position(|&e| e == engine)?;
        samples.get(&(mi, ti, ei, op)).map(|v| Summary::of(v))
    };
    let (insert, fetch) = (0, 1);
    if let Some((c, runs)) = ceiling {
        out.push_str(&format!(
            "\nseed 002 testfile -b256 -o1000 on this disk, before each SYNC run: {} ops/s ({} runs, median {}, {}–{})\n",
            report::thousands(c.mean),
            runs,
            report::thousands(c.median),
            report::thousands(c.min),
            report::thousands(c.max)
        ));
        if let Some(s) = find(Mode::TdsSync, 1, Engine::Beechdb, insert) {
            out.push_str(&format!(
                "BeechDB SYNC insert, 1 thread / testfile: {:.0}% (target >= 80%)\n",
                100.0 * s.mean / c.mean
            ));
        }
    }
    let max_t = opts.threads.iter().copied().max().unwrap_or(1);
    if max_t > 1 {
        if let (Some(one), Some(many)) = (
            find(Mode::TdsSync, 1, Engine::Beechdb, insert),
            find(Mode::TdsSync, max_t, Engine::Beechdb, insert),
        ) {
            out.push_str(&format!(
                "BeechDB SYNC insert, {max_t} threads / 1 thread: {:.2}x (target >= 5x at 16)\n",
                many.mean / one.mean
            ));
        }
        if let (Some(b), Some(d)) = (
            find(Mode::TdsSync, max_t, Engine::Beechdb, insert),
            find(Mode::TdsSync, max_t, Engine::Bdb, insert),
        ) {
            out.push_str(&format!("BeechDB / Berkeley DB, SYNC insert, {max_t} threads: {:.2}x (target >= 3x at 16)\n", b.mean / d.mean));
        }
    }
    for &mode in &opts.modes {
        if let (Some(one), Some(two)) = (
            find(mode, 1, Engine::Beechdb, fetch),
            find(mode, 2, Engine::Beechdb, fetch),
        ) {
            out.push_str(&format!(
                "BeechDB fetch, {}: 2 threads / 1 thread: {:.2}x (target >= 1.6x)\n",
                mode.name(),
                two.mean / one.mean
            ));
        }
    }
    out
}
