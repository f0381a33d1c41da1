//! `beech`: command-line utilities for BeechDB environments, after Berkeley DB's db_stat,
//! db_dump, db_load and db_verify.
//!
//! Exit status: 0 on success, 1 when `verify` finds problems or `stat` opens an older
//! checkpoint than the newest (accepted with `--accept-fallback`), 2 on any error.
//!
//! Every command opens an existing environment in the mode it was created in; none creates
//! one except `load`, and none converts one to another mode.

use beechdb::dump::{write_section, DumpHeader, DumpReader};
use beechdb::{Config, Env, Mode};
use clap::{Parser, Subcommand};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod node;
mod sql;

#[derive(Parser)]
#[command(
    name = "beech",
    version,
    about = "BeechDB utilities",
    after_help = "Exit status: 0 success, 1 problems found (verify) or an older checkpoint \
                  opened (stat --accept-fallback), 2 error."
)]
struct Cli {
    /// Open an environment whose newest meta page is damaged from the older checkpoint that
    /// the other meta page names (its newest changes are lost; a command that writes makes
    /// that permanent).
    #[arg(long, global = true)]
    accept_fallback: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// A SQL shell (like sqlite3): interactive, or the SQL given, or standard input; the
    /// database is the environment directory (created if missing). Exit status 1 on a SQL
    /// error in batch mode.
    Sql {
        /// Environment directory.
        dir: PathBuf,
        /// SQL to run (statements and dot commands) instead of a session.
        sql: Option<String>,
    },
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
    /// Copy a consistent checkpoint of everything committed into a new environment (like
    /// db_hotbackup). The copy opens on its own.
    Backup {
        /// Environment directory.
        dir: PathBuf,
        /// Directory for the copy (created; must hold no environment).
        dest: PathBuf,
    },
    /// Print every record of the log, one per line: LSN, kind and fields (like
    /// db_printlog). Reads only; works beside a process that has the environment open.
    Printlog {
        /// Environment directory.
        dir: PathBuf,
    },
    /// Check every page, the tree structure and the free space (like db_verify).
    Verify {
        /// Environment directory.
        dir: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run one member of a replication group as a process, until killed. Its directory
    /// holds its environment and its log. Clients write through `beechdb_repl::tcp::Client`.
    Node {
        /// The member's directory (created if missing).
        dir: PathBuf,
        /// The member's id in the group.
        #[arg(long)]
        id: u64,
        /// Address to listen on (the member's address in the group), e.g. 127.0.0.1:7001.
        #[arg(long)]
        listen: String,
        /// The group's name: members of other groups are refused.
        #[arg(long, default_value = "beechdb")]
        group: String,
        /// Form a new group of these voting members, ID=ADDRESS,... (give the same list to
        /// each; the smallest id forms it).
        #[arg(long)]
        init: Option<String>,
        /// Join the running group at these addresses (any members; the master is found).
        #[arg(long)]
        join: Option<String>,
        /// With --join: join as a non-voting replica.
        #[arg(long)]
        replica: bool,
        /// Take a copy of the environment (and drop the log before it) every this many
        /// log entries; a member further behind is rebuilt from the copy.
        #[arg(long, default_value_t = 50_000)]
        snapshot_every: u64,
    },
    /// The status of the members of a group: state, master, term, log and applied positions.
    Members {
        /// Member addresses.
        #[arg(required = true)]
        addrs: Vec<String>,
        /// The group's name.
        #[arg(long, default_value = "beechdb")]
        group: String,
        /// One JSON object per member.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    // Writing into a closed pipe (`beech dump DIR | head`) ends the process quietly, as it
    // does Unix tools, instead of panicking in `println!`.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("beech: {e}");
            ExitCode::from(2)
        }
    }
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Opens an existing environment in the mode it was created in, keeping every log segment
/// unless `keep_logs` is false. Warns on standard error when it opened an older checkpoint.
fn open_existing(dir: &Path, keep_logs: bool, accept_fallback: bool) -> Res<Env> {
    let cfg = Config::new()
        .create(false)
        .adopt_mode(true)
        .keep_logs(keep_logs)
        .accept_meta_fallback(accept_fallback);
    let env = Env::open(dir, cfg)?;
    for w in env.stat()?.meta_warnings {
        eprintln!("beech: WARNING: {}: {w}", dir.display());
    }
    Ok(env)
}

/// The environment's log, for commands that work on it: a Data Store environment has none.
fn require_log(env: &Env, dir: &Path, command: &str) -> Res<()> {
    match env.mode() {
        Mode::Transactional => Ok(()),
        mode => Err(format!(
            "{}: {command} works on a transactional environment's log, and this one was created \
             in {} mode, which keeps no log files; nothing was changed",
            dir.display(),
            match mode {
                Mode::DataStore => "Data Store",
                _ => "in-memory log",
            }
        )
        .into()),
    }
}

fn run(cli: Cli) -> Res<ExitCode> {
    let accept = cli.accept_fallback;
    match cli.command {
        Command::Sql { dir, sql } => sql::run(&dir, sql),
        Command::Node {
            dir,
            id,
            listen,
            group,
            init,
            join,
            replica,
            snapshot_every,
        } => node::run(dir, id, listen, group, init, join, replica, snapshot_every),
        Command::Members { addrs, group, json } => node::status(&group, &addrs, json),
        Command::Stat { dir, db, json } => stat(&dir, db, json, accept),
        Command::Dump {
            dir,
            db,
            printable,
            output,
        } => dump(&dir, db, printable, output, accept),
        Command::Load {
            dir,
            db,
            file,
            no_overwrite,
        } => load(&dir, db, file, no_overwrite, accept),
        Command::Recover { dir } => {
            let env = open_existing(&dir, true, accept)?;
            require_log(&env, &dir, "recover")?;
            println!("recovery replayed {} commits", env.recovered_commits());
            env.close()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Checkpoint { dir } => {
            let env = open_existing(&dir, false, accept)?;
            env.sync()?;
            println!("checkpoint {} taken", env.stat()?.generation);
            env.close()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Archive { dir, remove } => {
            let env = open_existing(&dir, true, accept)?;
            require_log(&env, &dir, "archive")?;
            let names = env.archive_logs()?;
            env.close()?;
            for name in &names {
                println!("{name}");
                if remove {
                    let path = dir.join(name);
                    std::fs::remove_file(&path)
                        .map_err(|e| format!("removing {}: {e}", path.display()))?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Backup { dir, dest } => {
            let env = open_existing(&dir, true, accept)?;
            env.backup(&dest)?;
            let generation = env.stat()?.generation;
            env.close()?;
            println!("checkpoint {generation} copied to {}", dest.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Printlog { dir } => {
            let storage = beechdb::storage::OsStorage::existing(&dir)
                .map_err(|e| format!("{}: {e}", dir.display()))?;
            let mut out = BufWriter::new(std::io::stdout().lock());
            match beechdb::print_log(&storage, &mut out).and_then(|n| {
                out.flush().map_err(|e| beechdb::Error::Io {
                    context: "writing".into(),
                    source: e,
                })?;
                Ok(n)
            }) {
                Ok(_) => Ok(ExitCode::SUCCESS),
                // `beech printlog DIR | head` ends quietly, as Unix tools do.
                Err(beechdb::Error::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::BrokenPipe =>
                {
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => Err(e.into()),
            }
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

fn stat(dir: &Path, only: Option<String>, json: bool, accept: bool) -> Res<ExitCode> {
    let env = open_existing(dir, true, accept)?;
    let names = match only {
        Some(n) => vec![n],
        None => env.db_names()?,
    };
    let mut dbs = Vec::new();
    for name in names {
        dbs.push(env.open_db(&name)?.stat()?);
    }
    let env_stat = env.stat()?;
    let fell_back = !env_stat.meta_warnings.is_empty();
    if json {
        let v = serde_json::json!({ "environment": env_stat, "databases": dbs });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{env_stat}");
        for d in dbs {
            print!("\n{d}");
        }
    }
    Ok(if fell_back {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn dump(
    dir: &Path,
    only: Option<String>,
    printable: bool,
    output: Option<PathBuf>,
    accept: bool,
) -> Res<ExitCode> {
    let env = open_existing(dir, true, accept)?;
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
    dir: &Path,
    target: Option<String>,
    file: Option<PathBuf>,
    no_overwrite: bool,
    accept: bool,
) -> Res<ExitCode> {
    let input: Box<dyn BufRead> = match file {
        Some(p) => Box::new(BufReader::new(std::fs::File::open(p)?)),
        None => Box::new(BufReader::new(std::io::stdin().lock())),
    };
    let mut reader = DumpReader::new(input);
    // A new environment is a Data Store one; an existing one is loaded in its own mode.
    let mut config = Config::new().adopt_mode(true).accept_meta_fallback(accept);
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
