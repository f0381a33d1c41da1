//! `beech`: command-line utilities for BeechDB environments, after Berkeley DB's db_stat,
//! db_dump, db_load and db_verify.
//!
//! Exit status: 0 on success; 1 when `verify` finds problems, `stat` opens an older
//! checkpoint than the newest (accepted with `--accept-fallback`), or `load -n` skips keys
//! that exist; 2 on any error.
//!
//! Every command opens an existing environment in the mode it was created in; none creates
//! one except `load`, and none converts one to another mode.

use beechdb::dump::{write_section, DumpHeader};
use beechdb::{Config, Duplicates, Env, Mode};
use clap::{Parser, Subcommand};
use progress::{Progress, Unit};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod load;
mod node;
mod progress;
mod sql;

#[derive(Parser)]
#[command(
    name = "beech",
    version,
    about = "BeechDB utilities",
    after_help = "Exit status: 0 success; 1 problems found (verify), an older checkpoint \
                  opened (stat --accept-fallback) or existing keys skipped (load -n); 2 error."
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
    /// A SQL shell (like sqlite3): interactive, or the SQL given, or standard input. The
    /// database is a file, as sqlite3's (created if missing, its log beside it as
    /// PATH-log.N), or an existing environment directory. Exit status 1 on a SQL error in
    /// batch mode.
    Sql {
        /// The database file (or an existing environment directory).
        dir: PathBuf,
        /// SQL to run (statements and dot commands) instead of a session.
        sql: Option<String>,
    },
    /// Print environment and per-database statistics (like db_stat). Reads only: works
    /// beside a process that has the environment open, from its last checkpoint and log.
    /// On a replication member's directory, its replicated log too (vote, positions,
    /// history).
    Stat {
        /// Environment directory, or a replication member's directory.
        dir: PathBuf,
        /// Only this database.
        db: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write databases in Berkeley DB's db_dump format (like db_dump). Reads only: works
    /// beside a process that has the environment open, from its last checkpoint and log.
    Dump {
        /// Environment directory.
        dir: PathBuf,
        /// Database to dump; all of them when omitted.
        db: Option<String>,
        /// Printable format (`format=print`) instead of hex.
        #[arg(short = 'p', long)]
        printable: bool,
        /// With a database name: no `database=` line, as db5.3_dump writes a file that holds
        /// one database (loading it then needs the name).
        #[arg(long, requires = "db")]
        plain: bool,
        /// Recover every readable record of a damaged environment (like db_dump -r): walk
        /// each tree past pages that fail their checks, then read leaf pages no tree
        /// reaches into a section named `__salvaged`. Reads the last checkpoint only (not
        /// the log). Exit status 1 when something was damaged.
        #[arg(long, conflicts_with = "plain")]
        salvage: bool,
        /// Output file (default: standard output).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Read db_dump format into databases (like db_load); reads `db5.3_dump` output,
    /// including hash and recno dumps. All or nothing: a load that fails or is killed
    /// leaves the environment as it was.
    Load {
        /// Environment directory (created if missing).
        dir: PathBuf,
        /// Database to load into (the input must then hold one section); taken from each
        /// section's `database=` line when omitted.
        db: Option<String>,
        /// Input file (default: standard input).
        #[arg(short, long)]
        file: Option<PathBuf>,
        /// Keep keys that already exist: warn for each, skip it, go on, and exit with 1.
        #[arg(short = 'n', long)]
        no_overwrite: bool,
        /// Page size of a new environment (4096 to 65536, a power of two; default 16384).
        /// Dumping with the page size of the Berkeley DB file gives back its dump byte for
        /// byte. An existing environment keeps its own.
        #[arg(long)]
        page_size: Option<usize>,
    },
    /// Move a whole Berkeley DB environment in: every database of every file in FROM and in
    /// the data directories its DB_CONFIG names (but Berkeley DB's own `__db.*`, `log.*`
    /// and `DB_CONFIG`), dumped with db5.3_dump, into
    /// the BeechDB environment DIR. A file's databases keep their names; a file holding one
    /// unnamed database gives it the file's name. All or nothing; a name found in two files,
    /// or already in DIR, stops it. Run db5.3_recover on FROM first if its
    /// application did not exit cleanly.
    Migrate {
        /// The Berkeley DB environment directory.
        from: PathBuf,
        /// The BeechDB environment directory (created if missing).
        dir: PathBuf,
        /// Page size of a new environment (as for load).
        #[arg(long)]
        page_size: Option<usize>,
        /// The Berkeley DB dump utility to run.
        #[arg(long, default_value = "db5.3_dump")]
        dump_tool: String,
    },
    /// Run recovery: apply the log to the last checkpoint, then checkpoint (like db_recover).
    Recover {
        /// Environment directory.
        dir: PathBuf,
    },
    /// Take a checkpoint now and remove the log segments it makes unnecessary (like
    /// db_checkpoint -1, then db_archive -d).
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
    /// db_hotbackup). The copy opens on its own. With --member, the source is a running
    /// replication member's address: its copy is streamed while the group goes on.
    Backup {
        /// Environment directory (with --member: the member's address).
        src: String,
        /// Directory for the copy (created; must hold no environment).
        dest: PathBuf,
        /// The source is a running member of a replication group, at that address.
        #[arg(long)]
        member: bool,
        /// With --member: the group's name.
        #[arg(long, default_value = "beechdb")]
        group: String,
        /// With --member: copy once the member has applied this commit (a token a commit
        /// returned on the master), so the copy holds it.
        #[arg(long, default_value_t = 0)]
        after: u64,
    },
    /// Print every record of the log, one per line: LSN, kind and fields (like
    /// db_printlog). Reads only; works beside a process that has the environment open.
    Printlog {
        /// Environment directory.
        dir: PathBuf,
    },
    /// Check every page, the tree structure and the free space of the last checkpoint, then
    /// the log after it (like db_verify). Reads only: works beside a process that has the
    /// environment open.
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
    /// Hand the master's role of a group to one of its voting members.
    Transfer {
        /// Member addresses (any; the master is found).
        #[arg(required = true)]
        addrs: Vec<String>,
        /// The member to become master.
        #[arg(long)]
        to: u64,
        /// The group's name.
        #[arg(long, default_value = "beechdb")]
        group: String,
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

/// An I/O error as a message: "No such file or directory", without Rust's "(os error 2)".
pub(crate) fn io_msg(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(at) => s[..at].to_string(),
        None => s,
    }
}

/// Opens an existing environment in the mode it was created in, keeping every log segment
/// unless `keep_logs` is false. Warns on standard error when it opened an older checkpoint.
fn open_existing(dir: &Path, keep_logs: bool, accept_fallback: bool) -> Res<Env> {
    open_with(dir, Config::new().keep_logs(keep_logs), accept_fallback)
}

/// Opens an existing environment read-only, for the commands that only look: beside a
/// process that has it open for writing, reading its last durable checkpoint plus its log,
/// and writing nothing.
fn open_for_reading(dir: &Path, accept_fallback: bool) -> Res<Env> {
    open_with(dir, Config::new().read_only(true), accept_fallback)
}

fn open_with(dir: &Path, cfg: Config, accept_fallback: bool) -> Res<Env> {
    let cfg = cfg
        .create(false)
        .adopt_mode(true)
        .accept_meta_fallback(accept_fallback);
    let env = Env::open(dir, cfg).map_err(|e| format!("{}: {e}", dir.display()))?;
    for w in env.stat()?.meta_warnings {
        eprintln!("beech: WARNING: {}: {w}", dir.display());
    }
    Ok(env)
}

/// The names of the log segments in `dir`, sorted.
fn log_segments(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("log.") && n[4..].bytes().all(|b| b.is_ascii_digit()))
        .collect();
    names.sort();
    names
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
        Command::Transfer { addrs, to, group } => node::transfer(&group, &addrs, to),
        Command::Stat { dir, db, json } => stat(&dir, db, json, accept),
        Command::Dump {
            dir,
            db,
            printable,
            salvage: true,
            output,
            ..
        } => dump_salvage(&dir, db, printable, output),
        Command::Dump {
            dir,
            db,
            printable,
            plain,
            output,
            ..
        } => dump(&dir, db, printable, plain, output, accept),
        Command::Load {
            dir,
            db,
            file,
            no_overwrite,
            page_size,
        } => load::run(
            &dir,
            file,
            load::Options {
                target: db,
                page_size,
                no_overwrite,
                accept_fallback: accept,
                distinct_inputs: false,
            },
        ),
        Command::Migrate {
            from,
            dir,
            page_size,
            dump_tool,
        } => load::migrate(
            &from,
            &dir,
            &dump_tool,
            load::Options {
                target: None,
                page_size,
                no_overwrite: false,
                accept_fallback: accept,
                distinct_inputs: true,
            },
        ),
        Command::Recover { dir } => {
            let what = format!("recover {}", dir.display());
            let progress = std::sync::Mutex::new(None::<Progress>);
            let progress = std::sync::Arc::new(progress);
            let shown = progress.clone();
            let cfg = Config::new()
                .keep_logs(true)
                .recovery_progress(move |done, total| {
                    let mut p = shown.lock().unwrap_or_else(|e| e.into_inner());
                    p.get_or_insert_with(|| Progress::new(what.clone(), Some(total), Unit::Bytes))
                        .update(done);
                });
            let env = open_with(&dir, cfg, accept)?;
            if let Some(p) = progress.lock().unwrap_or_else(|e| e.into_inner()).take() {
                p.finish();
            }
            require_log(&env, &dir, "recover")?;
            println!("recovery replayed {} commits", env.recovered_commits());
            env.close()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Checkpoint { dir } => {
            let before = log_segments(&dir);
            let env = open_existing(&dir, false, accept)?;
            env.sync()?;
            let generation = env.stat()?.generation;
            env.close()?;
            let after = log_segments(&dir);
            let removed: Vec<&String> = before.iter().filter(|n| !after.contains(n)).collect();
            println!(
                "checkpoint {generation} taken; {} log segments no longer needed removed{}",
                removed.len(),
                match (removed.first(), removed.last()) {
                    (Some(a), Some(b)) if a != b => format!(" ({a} to {b})"),
                    (Some(a), _) => format!(" ({a})"),
                    _ => String::new(),
                }
            );
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
        Command::Backup {
            src,
            dest,
            member: true,
            group,
            after,
        } => node::backup(&group, &src, after, &dest),
        Command::Backup { src, dest, .. } => {
            let dir = PathBuf::from(src);
            let member = dir
                .parent()
                .is_some_and(|p| p.join("raft").join("log").is_file());
            let env = match open_existing(&dir, true, accept) {
                Err(e) if member => {
                    return Err(format!(
                        "{e} (a replication member's environment: while the member runs, \
                         copy it with `beech backup --member ADDRESS DEST`)"
                    )
                    .into())
                }
                r => r?,
            };
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
            let mut progress: Option<Progress> = None;
            let report = beechdb::verify_path_with_progress(&dir, |done, total| {
                progress
                    .get_or_insert_with(|| {
                        Progress::new(
                            format!("verify {}", dir.display()),
                            Some(total),
                            Unit::Pages,
                        )
                    })
                    .update(done)
            })
            .map_err(|e| format!("{}: {e}", dir.display()))?;
            if let Some(p) = progress {
                p.finish();
            }
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
                if report.log_commits > 0 {
                    println!(
                        "log: {} commits after checkpoint {} (not in the counts above; opening \
                         the environment applies them)",
                        report.log_commits, report.generation
                    );
                }
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
    // A replication member's directory: its log, then its environment.
    let member_log = dir.join("raft").join("log");
    let (dir, log) = match member_log.is_file() && dir.join("env").is_dir() {
        true => (
            dir.join("env"),
            Some(beechdb_repl::summarize_log(&member_log)?),
        ),
        false => (dir.to_path_buf(), None),
    };
    let env = open_for_reading(&dir, accept)?;
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
        let v = match log {
            Some(log) => {
                serde_json::json!({ "replication_log": log, "environment": env_stat, "databases": dbs })
            }
            None => serde_json::json!({ "environment": env_stat, "databases": dbs }),
        };
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        if let Some(l) = log {
            let dash = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
            println!("Replicated log:");
            println!("{}	Vote term (one more at each election)", l.vote_term);
            println!("{}	Voted for", dash(l.voted_for));
            println!(
                "{}	Vote granted by a majority (a master's)",
                l.vote_committed
            );
            println!(
                "{}	Last entry (term.index)",
                l.last.map_or("-".to_string(), |(t, i)| format!("{t}.{i}"))
            );
            println!("{}	Last entry known committed", dash(l.committed));
            println!(
                "{}	Last entry removed (a snapshot holds it)",
                dash(l.purged)
            );
            println!("{}	Entries kept", l.entries);
            println!("{}	Log file bytes", l.file_bytes);
            println!(
                "{}	Group history",
                l.history.map_or("-".to_string(), |h| format!("{h:016x}"))
            );
            println!("Environment:");
        }
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

/// The dump's destination: a file, or standard output.
fn dump_output(output: &Option<PathBuf>) -> Res<Box<dyn Write>> {
    Ok(match output {
        Some(p) => Box::new(BufWriter::new(
            std::fs::File::create(p).map_err(|e| format!("-o {}: {}", p.display(), io_msg(&e)))?,
        )),
        None => Box::new(BufWriter::new(std::io::stdout().lock())),
    })
}

/// The section name of the records salvaged from pages no database reaches.
const ORPHANS: &str = "__salvaged";

fn dump_salvage(
    dir: &Path,
    only: Option<String>,
    printable: bool,
    output: Option<PathBuf>,
) -> Res<ExitCode> {
    let mut out = dump_output(&output)?;
    let (mut databases, mut records) = (0u64, 0u64);
    let report = beechdb::salvage_path(dir, |s| {
        if only.is_some() && s.database.is_some() && s.database != only {
            return Ok(());
        }
        let pairs = s.pairs();
        let header = DumpHeader {
            database: Some(s.database.clone().unwrap_or_else(|| ORPHANS.to_string())),
            printable,
            duplicates: s.duplicates != Duplicates::None,
            dupsort: s.duplicates == Duplicates::Sorted,
            ..Default::default()
        };
        databases += 1;
        records += pairs.len() as u64;
        write_section(&mut out, &header, pairs.into_iter().map(Ok)).map(drop)
    })
    .map_err(|e| format!("{}: {e}", dir.display()))?;
    out.flush()?;
    for p in &report.problems {
        eprintln!("beech: salvage: {}", serde_json::to_string(p)?);
    }
    eprintln!(
        "beech: salvaged {records} records in {databases} sections from checkpoint {} of {} \
         ({} problems{})",
        report.generation,
        dir.display(),
        report.problems.len(),
        if report.is_clean() {
            ""
        } else {
            "; records on damaged pages are lost, and pages no database reaches are in the \
             section __salvaged"
        }
    );
    Ok(if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn dump(
    dir: &Path,
    only: Option<String>,
    printable: bool,
    plain: bool,
    output: Option<PathBuf>,
    accept: bool,
) -> Res<ExitCode> {
    let env = open_for_reading(dir, accept)?;
    let names = match only {
        Some(n) => vec![n],
        None => env.db_names()?,
    };
    let mut dbs = Vec::new();
    for name in names {
        let db = env
            .open_db(&name)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        dbs.push(db);
    }
    let mut out = dump_output(&output)?;
    let mut total = 0;
    for db in &dbs {
        total += db.len()?;
    }
    let mut progress = Progress::new(
        format!("dump {}", dir.display()),
        Some(total),
        Unit::Records,
    );
    for db in &dbs {
        let header = DumpHeader {
            database: (!plain).then(|| db.name().to_string()),
            printable,
            page_size: Some(env.page_size()),
            duplicates: db.duplicates() != Duplicates::None,
            dupsort: db.duplicates() == Duplicates::Sorted,
            ..Default::default()
        };
        let entries = db.iter().inspect(|_| progress.inc(1));
        match write_section(&mut out, &header, entries) {
            // `beech dump DIR | head` ends quietly, as Unix tools do.
            Err(beechdb::Error::Io { source, .. })
                if source.kind() == std::io::ErrorKind::BrokenPipe =>
            {
                return Ok(ExitCode::SUCCESS)
            }
            r => r.map_err(|e| format!("{}: {}: {e}", dir.display(), db.name()))?,
        };
    }
    progress.finish();
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
