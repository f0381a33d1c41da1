//! `beech load` and `beech migrate`: db_dump sections into databases, all or nothing.
//!
//! Owns: reading the input, choosing each section's database, and making a load atomic. In
//! a transactional environment the whole load is one transaction (it spills to the log
//! when large, so memory stays bounded); in a Data Store one nothing is checkpointed until
//! the input has been read to its end, and a failed load drops the environment without a
//! checkpoint, which leaves it as it was. An environment or directory the load created is
//! removed again when the load fails. So a load that fails, or is killed, leaves nothing.
//! A migration is one such load over the dumps of every file of a Berkeley DB environment.

use crate::progress::{Progress, Unit};
use crate::{io_msg, Res};
use beechdb::dump::{DumpKind, DumpReader};
use beechdb::{Config, Db, Duplicates, Env, Error, Mode, Txn};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;

/// Counts the bytes read, for progress.
struct Counted<R> {
    inner: R,
    read: Rc<Cell<u64>>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

/// What was loaded into one database.
#[derive(Default)]
struct Tally {
    pairs: u64,
    skipped: u64,
    len_before: u64,
    kinds: Vec<DumpKind>,
}

/// Where the writes go: straight to the databases (Data Store) or into one transaction.
enum Sink {
    Direct,
    Txn(Txn),
}

/// One dump stream to load.
pub(crate) struct Input {
    /// Where it comes from, for messages.
    source: String,
    reader: Box<dyn BufRead>,
    /// Bytes read so far, and the total when known, for progress.
    read: Rc<Cell<u64>>,
    total: Option<u64>,
    /// The database for sections with no `database=` line (a Berkeley DB file holding one).
    unnamed: Option<String>,
}

impl Input {
    fn new(
        source: String,
        input: Box<dyn Read>,
        total: Option<u64>,
        unnamed: Option<String>,
    ) -> Input {
        let read = Rc::new(Cell::new(0));
        let reader = Box::new(BufReader::with_capacity(
            1 << 20,
            Counted {
                inner: input,
                read: read.clone(),
            },
        ));
        Input {
            source,
            reader,
            read,
            total,
            unnamed,
        }
    }
}

/// How a load goes.
pub(crate) struct Options {
    /// Every section into this database (the input must then hold one section).
    pub target: Option<String>,
    /// Page size of a new environment.
    pub page_size: Option<usize>,
    /// Keep keys that exist (warn and skip).
    pub no_overwrite: bool,
    pub accept_fallback: bool,
    /// Refuse a database named by two inputs (a migration's files), or already in the
    /// environment, instead of merging.
    pub distinct_inputs: bool,
}

/// `beech load`: one dump stream, from a file or standard input.
pub(crate) fn run(dir: &Path, file: Option<PathBuf>, opts: Options) -> Res<ExitCode> {
    let input = match &file {
        Some(p) => {
            let f = std::fs::File::open(p)
                .map_err(|e| format!("-f {}: {}", p.display(), io_msg(&e)))?;
            let len = f.metadata().ok().map(|m| m.len());
            Input::new(p.display().to_string(), Box::new(f), len, None)
        }
        None => {
            let len = std::fs::metadata("/dev/stdin")
                .ok()
                .filter(|m| m.is_file())
                .map(|m| m.len());
            Input::new(
                "standard input".into(),
                Box::new(std::io::stdin()),
                len,
                None,
            )
        }
    };
    load_all(dir, std::iter::once(Ok(input)), &opts)
}

/// `beech migrate`: every database of every Berkeley DB file in `from`, dumped by `tool`
/// (db5.3_dump), loaded as one load: all or nothing.
pub(crate) fn migrate(from: &Path, dir: &Path, tool: &str, opts: Options) -> Res<ExitCode> {
    // The environment's directory, and the data directories its DB_CONFIG names.
    let mut dirs = vec![from.to_path_buf()];
    if let Ok(config) = std::fs::read_to_string(from.join("DB_CONFIG")) {
        for line in config.lines() {
            let mut words = line.split_whitespace();
            if let (Some("set_data_dir" | "add_data_dir"), Some(d)) = (words.next(), words.next()) {
                dirs.push(from.join(d));
            }
        }
    }
    let mut files: Vec<PathBuf> = Vec::new();
    for d in &dirs {
        let mut here: Vec<PathBuf> = std::fs::read_dir(d)
            .map_err(|e| format!("{}: {}", d.display(), io_msg(&e)))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        here.sort();
        files.extend(here);
    }
    // Berkeley DB's own files: the region files, its log and its configuration.
    files.retain(|p| {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        !(name.starts_with("__db.") || name.starts_with("log.") || name == "DB_CONFIG")
    });
    if files.is_empty() {
        return Err(format!("{}: no database files to migrate", from.display()).into());
    }
    let inputs = files.into_iter().map(|path| {
        let child = std::process::Command::new(tool)
            .arg(&path)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .map_err(|e| {
                format!(
                    "running {tool} (apt-get install db5.3-util): {}",
                    io_msg(&e)
                )
            })?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        Ok(Input::new(
            format!("{tool} {}", path.display()),
            Box::new(DumpOutput(child)),
            None,
            name,
        ))
    });
    load_all(dir, inputs, &opts)
}

/// A dump tool's output; reading its end checks that the tool succeeded.
struct DumpOutput(std::process::Child);

impl Read for DumpOutput {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.stdout.as_mut().map_or(Ok(0), |o| o.read(buf))?;
        if n == 0 && !buf.is_empty() {
            let status = self.0.wait()?;
            if !status.success() {
                return Err(std::io::Error::other(format!(
                    "the dump tool failed ({status})"
                )));
            }
        }
        Ok(n)
    }
}

fn load_all(dir: &Path, inputs: impl Iterator<Item = Res<Input>>, opts: &Options) -> Res<ExitCode> {
    // What was in the directory before, so that a failed load can remove an environment
    // it created (and only one it created: an existing environment keeps every file).
    let existed: Option<Vec<std::ffi::OsString>> = std::fs::read_dir(dir)
        .ok()
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.file_name())).collect());
    let had_env = dir.join("beech.db").exists();
    match load(dir, inputs, opts) {
        Ok((tallies, now)) => {
            let mut skipped_any = false;
            for (name, t) in &tallies {
                let added = now.get(name).copied().unwrap_or(0) - t.len_before;
                let name = name.escape_debug();
                let replaced = t.pairs - t.skipped - added;
                let mut line = format!(
                    "beech: loaded {name}: {} key/value pairs read, {added} records added",
                    t.pairs
                );
                if replaced > 0 {
                    line += &format!(", {replaced} replaced the value of a key already there");
                }
                if t.skipped > 0 {
                    line += &format!(", {} skipped (the key exists; -n)", t.skipped);
                    skipped_any = true;
                }
                for kind in &t.kinds {
                    line += match kind {
                        DumpKind::Btree => "",
                        DumpKind::Hash => " (a hash database, now a B+tree in key order)",
                        DumpKind::Recno => {
                            " (a recno database: keys are record numbers, 4-byte big-endian)"
                        }
                    };
                }
                eprintln!("{line}");
            }
            Ok(ExitCode::from(if skipped_any { 1 } else { 0 }))
        }
        Err(e) => {
            let removed = !had_env && remove_created(dir, existed.as_deref());
            Err(format!(
                "{e}\nbeech: nothing was loaded{}",
                if removed {
                    format!(
                        " (the environment the load created at {} is removed)",
                        dir.display()
                    )
                } else {
                    String::new()
                }
            )
            .into())
        }
    }
}

type Loaded = (BTreeMap<String, Tally>, BTreeMap<String, u64>);

/// An error of the input, named by where it came from.
fn input_error(source: &str, e: Error) -> String {
    match e {
        Error::InvalidArgument(m) => format!("{source}: {m}"),
        e => format!("{source}: {e}"),
    }
}

fn load(dir: &Path, inputs: impl Iterator<Item = Res<Input>>, opts: &Options) -> Res<Loaded> {
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    let mut dbs: BTreeMap<String, Db> = BTreeMap::new();
    // Which input named each database, for a migration's collisions.
    let mut named_by: BTreeMap<String, String> = BTreeMap::new();
    let mut env: Option<Env> = None;
    let mut sink = Sink::Direct;
    let mut sections = 0;
    for input in inputs {
        let Input {
            source,
            reader,
            read,
            total,
            unnamed,
        } = input?;
        let mut reader = DumpReader::new(reader);
        let mut progress = Progress::new(format!("load {source}"), total, Unit::Bytes);
        while let Some(header) = reader.next_section().map_err(|e| input_error(&source, e))? {
            sections += 1;
            if sections == 2 && opts.target.is_some() {
                return Err(format!(
                    "the input holds more than one database (a second section ends its header \
                     at line {}), and loading them all into one database would merge them; load \
                     without a database name to load each into the database its section names",
                    reader.line_number()
                )
                .into());
            }
            let name = opts
                .target
                .clone()
                .or(header.database.clone())
                .or(unnamed.clone())
                .ok_or(
                    "the dump does not name its database (no database= line): give the \
                     database name as an argument",
                )?;
            if opts.distinct_inputs {
                if let Some(first) = named_by.get(&name).filter(|f| **f != source) {
                    return Err(format!(
                        "database {} is in both {first} and {source}; nothing merges them",
                        name.escape_debug()
                    )
                    .into());
                }
                named_by.insert(name.clone(), source.clone());
            }
            let dups = match (header.duplicates, header.dupsort) {
                (false, _) => Duplicates::None,
                (true, true) => Duplicates::Sorted,
                (true, false) => Duplicates::Unsorted,
            };
            if env.is_none() {
                // A new environment is a Data Store one with the page size asked for, else
                // the default; an existing one is loaded in its own mode and page size.
                let mut config = Config::new()
                    .adopt_mode(true)
                    .accept_meta_fallback(opts.accept_fallback);
                if let Some(ps) = opts.page_size {
                    config = config.page_size(ps);
                }
                let e = Env::open(dir, config).map_err(|e| format!("{}: {e}", dir.display()))?;
                if e.mode() != Mode::DataStore {
                    sink = Sink::Txn(e.begin_txn()?);
                }
                env = Some(e);
            }
            let env = env.as_ref().unwrap();
            if !dbs.contains_key(&name) {
                let (db, len) = match (env.open_db(&name), &sink) {
                    (Ok(_), _) if opts.distinct_inputs => {
                        return Err(format!(
                            "database {} of {source} is already in {}; nothing merges them",
                            name.escape_debug(),
                            dir.display()
                        )
                        .into())
                    }
                    (Ok(db), _) => {
                        let len = db.len()?;
                        (db, len)
                    }
                    (Err(Error::DbNotFound(_)), Sink::Txn(t)) => {
                        (t.create_db_with(&name, dups)?, 0)
                    }
                    (Err(Error::DbNotFound(_)), Sink::Direct) => {
                        (env.create_db_with(&name, dups)?, 0)
                    }
                    (Err(e), _) => return Err(e.into()),
                };
                dbs.insert(name.clone(), db);
                tallies.entry(name.clone()).or_default().len_before = len;
            }
            let db = &dbs[&name];
            if db.duplicates() != dups {
                return Err(format!(
                    "{}: the dump's database holds {} and the existing one {}: they cannot merge",
                    name.escape_debug(),
                    describe(dups),
                    describe(db.duplicates())
                )
                .into());
            }
            let tally = tallies.get_mut(&name).unwrap();
            let name = name.escape_debug();
            tally.kinds.push(header.kind);
            tally.kinds.dedup();
            while let Some((k, v)) = reader.next_pair().map_err(|e| input_error(&source, e))? {
                tally.pairs += 1;
                let stored = match (&sink, opts.no_overwrite) {
                    (Sink::Direct, false) => db.put(&k, &v).map(|()| true),
                    (Sink::Direct, true) => match db.insert(&k, &v) {
                        Err(Error::KeyExists) => Ok(false),
                        r => r.map(|()| true),
                    },
                    (Sink::Txn(t), false) => t.put(db, &k, &v).map(|()| true),
                    (Sink::Txn(t), true) => match t.get(db, &k) {
                        Ok(Some(_)) => Ok(false),
                        Ok(None) => t.put(db, &k, &v).map(|()| true),
                        Err(e) => Err(e),
                    },
                }
                .map_err(|e| {
                    format!(
                        "{source}: {name}: line {}: key {}: {e}",
                        reader.line_number() - 1,
                        show_key(&k)
                    )
                })?;
                if !stored {
                    tally.skipped += 1;
                    eprintln!(
                        "beech: {name}: line {}: key {} already exists; skipped (-n)",
                        reader.line_number() - 1,
                        show_key(&k)
                    );
                }
                progress.set(read.get());
            }
        }
        progress.finish();
    }
    let Some(env) = env else {
        return Err("the input holds no dump section".into());
    };
    if let Sink::Txn(t) = sink {
        t.commit()?;
    }
    let mut now = BTreeMap::new();
    for (name, db) in &dbs {
        now.insert(name.clone(), db.len()?);
    }
    env.close()?;
    Ok((tallies, now))
}

fn describe(dups: Duplicates) -> &'static str {
    match dups {
        Duplicates::None => "one value per key",
        Duplicates::Sorted => "sorted duplicates",
        Duplicates::Unsorted => "unsorted duplicates",
    }
}

/// A key as messages show it: printable bytes as they are, others escaped, at most 48 bytes.
fn show_key(k: &[u8]) -> String {
    let shown: String = k[..k.len().min(48)]
        .iter()
        .map(|&b| match b {
            0x20..=0x7e if b != b'\\' => (b as char).to_string(),
            _ => format!("\\{b:02x}"),
        })
        .collect();
    format!("\"{shown}\"{}", if k.len() > 48 { "..." } else { "" })
}

/// Removes what a failed load created in `dir`: the directory itself if it did not exist,
/// else the files that were not there before. Returns whether anything was removed.
fn remove_created(dir: &Path, existed: Option<&[std::ffi::OsString]>) -> bool {
    match existed {
        None => std::fs::remove_dir_all(dir).is_ok(),
        Some(before) => {
            let mut removed = false;
            if let Ok(rd) = std::fs::read_dir(dir) {
                for entry in rd.flatten() {
                    if !before.contains(&entry.file_name()) {
                        removed |= std::fs::remove_file(entry.path()).is_ok();
                    }
                }
            }
            removed
        }
    }
}
