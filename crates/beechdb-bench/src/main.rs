//! `beechdb-bench`: the seeds' benchmarks. `kv` reproduces seed 000's Table 3 (Data Store);
//! with `--features peers`, Berkeley DB 5.3, LMDB and SQLite run the same workload in the
//! same process run, and the table shows BeechDB / Berkeley DB ratios.

mod engines;
mod kv;
mod report;

use clap::{Parser, Subcommand, ValueEnum};
use engines::{Engine, Setup};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "beechdb-bench",
    version,
    about = "BeechDB benchmarks against Berkeley DB 5.3, LMDB and SQLite"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Mode {
    /// Data Store: no log, no transactions (seed 000 Table 3).
    Ds,
}

#[derive(Subcommand)]
enum Command {
    /// The key/value workload of seed 000 (Table 3).
    Kv {
        #[arg(long, value_enum, default_value = "ds")]
        mode: Mode,
        /// Fraction of the paper's 57,600 batches (1.0 = the paper's size).
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
        /// Runs per engine (the paper uses five).
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
        /// Also write the results as JSON records to this file.
        #[arg(long)]
        json: Option<PathBuf>,
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

fn run(cli: Cli) -> engines::BenchResult<()> {
    match cli.command {
        Command::Kv {
            mode,
            scale,
            runs,
            engines,
            cache_mb,
            page_size,
            bdb_page_size,
            dir,
            json,
        } => {
            if !(scale > 0.0 && scale <= 100.0) || runs == 0 {
                return Err("--scale must be in (0, 100] and --runs at least 1".into());
            }
            let engines = if engines.is_empty() {
                Engine::available()
            } else {
                engines
            };
            let opts = kv::KvOptions {
                engines,
                batches: ((kv::PAPER_BATCHES as f64 * scale).round() as u64).max(1),
                runs,
                setup: Setup {
                    cache_bytes: cache_mb << 20,
                    page_size,
                    bdb_page_size,
                },
                dir,
                mode: match mode {
                    Mode::Ds => "ds".into(),
                },
            };
            let samples = kv::run(&opts)?;
            let (table, records) = kv::report(&opts, &samples);
            println!("{table}");
            if let Some(path) = json {
                std::fs::write(&path, serde_json::to_string_pretty(&records)?)?;
                eprintln!("wrote {} records to {}", records.len(), path.display());
            }
            Ok(())
        }
    }
}
