//! `beech`: command-line utilities for BeechDB environments, after Berkeley DB's db_stat,
//! db_dump, db_load and db_verify.
//!
//! Exit status: 0 on success, 1 when `verify` finds problems, 2 on any error.

use beechdb::dump::{write_section, DumpHeader, DumpReader};
use beechdb::{Config, Env};
use clap::{Parser, Subcommand};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "beech", version, about = "BeechDB utilities")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print environment and per-database statistics (like db_stat).
    Stat {
        /// Environment directory.
        dir: PathBuf,
        /// Only this database.
        #[arg(short, long)]
        db: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write databases in Berkeley DB's db_dump format (like db_dump).
    Dump {
        /// Environment directory.
        dir: PathBuf,
        /// Database to dump; all of them when omitted.
        db: Option<String>,
        /// Printable format (`format=print`) instead of hex.
        #[arg(short = 'p', long)]
        printable: bool,
        /// Output file (default: standard output).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Read db_dump format into databases (like db_load); reads `db5.3_dump` output too.
    Load {
        /// Environment directory (created if missing).
        dir: PathBuf,
        /// Database to load into; taken from each section's `database=` line when omitted.
        db: Option<String>,
        /// Input file (default: standard input).
        #[arg(short, long)]
        file: Option<PathBuf>,
        /// Refuse to replace keys that already exist.
        #[arg(short = 'n', long)]
        no_overwrite: bool,
    },
    /// Run recovery: apply the log to the last checkpoint, then checkpoint (like db_recover).
    Recover {
        /// Environment directory.
        dir: PathBuf,
    },
    /// Take a checkpoint now and remove log segments it makes unnecessary (like
    /// db_checkpoint -1).
    Checkpoint {
        /// Environment directory.
        dir: PathBuf,
    },
    /// List log segments no longer needed for recovery, kept for archiving (like db_archive).
    Archive {
        /// Environment directory.
        dir: PathBuf,
        /// Remove them after listing.
        #[arg(short, long)]
        remove: bool,
    },
    /// Check every page, the tree structure and the free space (like db_verify).
    Verify {
        /// Environment directory.
        dir: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("beech: {e}");
            ExitCode::from(2)
        }
    }
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Opens an existing environment as transactional (running recovery), keeping the log
/// segments checkpoints no longer need when `keep_logs`.
fn open_transactional(dir: &PathBuf, keep_logs: bool) -> Res<Env> {
    Ok(Env::open(
        dir,
        Config::new()
            .create(false)
            .transactional(true)
            .keep_logs(keep_logs),
    )?)
}

/// Opens an existing environment as it was used: transactional (keeping its log) if it has
/// a log, so that inspecting it changes nothing.
fn open_existing(dir: &PathBuf) -> Res<Env> {
    let has_log = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("log."))
        })
        .unwrap_or(false);
    let cfg = Config::new()
        .create(false)
        .transactional(has_log)
        .keep_logs(has_log);
    Ok(Env::open(dir, cfg)?)
}

fn run(cli: Cli) -> Res<ExitCode> {
    match cli.command {
        Command::Stat { dir, db, json } => stat(&dir, db, json),
        Command::Dump {
            dir,
            db,
            printable,
            output,
        } => dump(&dir, db, printable, output),
        Command::Load {
            dir,
            db,
            file,
            no_overwrite,
        } => load(&dir, db, file, no_overwrite),
        Command::Recover { dir } => {
            let env = open_transactional(&dir, true)?;
            println!("recovery replayed {} commits", env.recovered_commits());
            env.close()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Checkpoint { dir } => {
            let env = open_transactional(&dir, false)?;
            env.sync()?;
            println!("checkpoint {} taken", env.stat()?.generation);
            env.close()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Archive { dir, remove } => {
            let env = open_transactional(&dir, true)?;
            let names = env.archive_logs()?;
            env.close()?;
            for name in &names {
                println!("{name}");
                if remove {
                    std::fs::remove_file(dir.join(name))?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Verify { dir, json } => {
            let report = beechdb::verify_path(&dir)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!(
                    "checkpoint {}: {} pages, {} checked, {} databases, {} entries",
                    report.generation,
                    report.page_count,
                    report.pages_checked,
                    report.databases,
                    report.entries
                );
                for p in &report.problems {
                    println!("{}", serde_json::to_string(p)?);
                }
                println!(
                    "{}",
                    if report.is_clean() {
                        "verify: OK"
                    } else {
                        "verify: PROBLEMS FOUND"
                    }
                );
            }
            Ok(if report.is_clean() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}

fn stat(dir: &PathBuf, only: Option<String>, json: bool) -> Res<ExitCode> {
    let env = open_existing(dir)?;
    let names = match only {
        Some(n) => vec![n],
        None => env.db_names()?,
    };
    let mut dbs = Vec::new();
    for name in names {
        dbs.push(env.open_db(&name)?.stat()?);
    }
    let env_stat = env.stat()?;
    if json {
        let v = serde_json::json!({ "environment": env_stat, "databases": dbs });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{env_stat}");
        for d in dbs {
            print!("\n{d}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn dump(
    dir: &PathBuf,
    only: Option<String>,
    printable: bool,
    output: Option<PathBuf>,
) -> Res<ExitCode> {
    let env = open_existing(dir)?;
    let names = match only {
        Some(n) => vec![n],
        None => env.db_names()?,
    };
    let mut out: Box<dyn Write> = match output {
        Some(p) => Box::new(BufWriter::new(std::fs::File::create(p)?)),
        None => Box::new(BufWriter::new(std::io::stdout().lock())),
    };
    for name in names {
        let db = env.open_db(&name)?;
        let header = DumpHeader {
            database: Some(name),
            printable,
            page_size: Some(env.page_size()),
        };
        write_section(&mut out, &header, db.iter())?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn load(
    dir: &PathBuf,
    target: Option<String>,
    file: Option<PathBuf>,
    no_overwrite: bool,
) -> Res<ExitCode> {
    let input: Box<dyn BufRead> = match file {
        Some(p) => Box::new(BufReader::new(std::fs::File::open(p)?)),
        None => Box::new(BufReader::new(std::io::stdin().lock())),
    };
    let mut reader = DumpReader::new(input);
    let mut config = Config::new();
    let mut env: Option<Env> = None;
    let progress = indicatif::ProgressBar::new_spinner();
    progress.set_style(indicatif::ProgressStyle::with_template(
        "{spinner} {msg} {pos} entries ({per_sec})",
    )?);
    let mut total = 0u64;
    while let Some(header) = reader.next_section()? {
        let name = target.clone().or(header.database.clone()).ok_or(
            "the dump does not name its database (no database= line): give the database name as an argument",
        )?;
        if env.is_none() {
            if let Some(ps) = header
                .page_size
                .filter(|ps| (4096..=65536).contains(ps) && ps.is_power_of_two())
            {
                config = config.page_size(ps);
            }
            env = Some(Env::open(dir, config.clone())?);
        }
        let env = env.as_ref().unwrap();
        let db = env.open_or_create_db(&name)?;
        progress.set_message(format!("loading {name}:"));
        while let Some((k, v)) = reader.next_pair()? {
            if no_overwrite {
                db.insert(&k, &v)?;
            } else {
                db.put(&k, &v)?;
            }
            total += 1;
            progress.inc(1);
        }
    }
    progress.finish_and_clear();
    match env {
        Some(env) => env.close()?,
        None => return Err("the input holds no dump section".into()),
    }
    eprintln!("beech: loaded {total} entries");
    Ok(ExitCode::SUCCESS)
}
