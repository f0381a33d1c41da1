//! `beech load`: db_dump sections into databases, all or nothing.
//!
//! Owns: reading the input, choosing each section's database, and making a load atomic. In
//! a transactional environment the whole load is one transaction (it spills to the log
//! when large, so memory stays bounded); in a Data Store one nothing is checkpointed until
//! the input has been read to its end, and a failed load drops the environment without a
//! checkpoint, which leaves it as it was. An environment or directory the load created is
//! removed again when the load fails. So a load that fails, or is killed, leaves nothing.

use crate::progress::{Progress, Unit};
use crate::{io_msg, Res};
use beechdb::dump::{DumpKind, DumpReader};
use beechdb::{Config, Db, Env, Error, Mode, Txn};
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

pub(crate) fn run(
    dir: &Path,
    target: Option<String>,
    page_size: Option<usize>,
    file: Option<PathBuf>,
    no_overwrite: bool,
    accept: bool,
) -> Res<ExitCode> {
    let (input, source, total): (Box<dyn Read>, String, Option<u64>) = match &file {
        Some(p) => {
            let f = std::fs::File::open(p)
                .map_err(|e| format!("-f {}: {}", p.display(), io_msg(&e)))?;
            let len = f.metadata().ok().map(|m| m.len());
            (Box::new(f), p.display().to_string(), len)
        }
        None => {
            let len = std::fs::metadata("/dev/stdin")
                .ok()
                .filter(|m| m.is_file())
                .map(|m| m.len());
            (Box::new(std::io::stdin()), "standard input".into(), len)
        }
    };
    let read = Rc::new(Cell::new(0));
    let input = BufReader::with_capacity(
        1 << 20,
        Counted {
            inner: input,
            read: read.clone(),
        },
    );
    // What was in the directory before, so that a failed load can remove an environment
    // it created (and only one it created: an existing environment keeps every file).
    let existed: Option<Vec<std::ffi::OsString>> = std::fs::read_dir(dir)
        .ok()
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.file_name())).collect());
    let had_env = dir.join("beech.db").exists();
    let mut progress = Progress::new(format!("load {source}"), total, Unit::Bytes);
    let result = load(
        dir,
        target,
        page_size,
        &source,
        input,
        no_overwrite,
        accept,
        &mut |n| progress.set(n),
        &read,
    );
    progress.finish();
    match result {
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

#[allow(clippy::too_many_arguments)]
fn load(
    dir: &Path,
    target: Option<String>,
    page_size: Option<usize>,
    source: &str,
    input: impl BufRead,
    no_overwrite: bool,
    accept: bool,
    progress: &mut dyn FnMut(u64),
    read: &Cell<u64>,
) -> Res<Loaded> {
    let mut reader = DumpReader::new(input);
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    let mut dbs: BTreeMap<String, Db> = BTreeMap::new();
    let mut env: Option<Env> = None;
    let mut sink = Sink::Direct;
    let mut sections = 0;
    while let Some(header) = reader.next_section().map_err(|e| input_error(source, e))? {
        sections += 1;
        if sections == 2 && target.is_some() {
            return Err(format!(
                "the input holds more than one database (a second section ends its header at \
                 line {}), and loading them all into one database would merge them; load \
                 without a database name to load each into the database its section names",
                reader.line_number()
            )
            .into());
        }
        let name = target.clone().or(header.database.clone()).ok_or(
            "the dump does not name its database (no database= line): give the database name \
             as an argument",
        )?;
        if header.duplicates {
            return Err(format!(
                "{}: the dump has duplicates=1 (several values per key), and BeechDB \
                 databases do not hold duplicate keys yet",
                name.escape_debug()
            )
            .into());
        }
        if env.is_none() {
            // A new environment is a Data Store one with the page size asked for, else the
            // default (not the dump's db_pagesize: a smaller page lowers the longest key
            // that fits); an existing one is loaded in its own mode and page size.
            let mut config = Config::new().adopt_mode(true).accept_meta_fallback(accept);
            if let Some(ps) = page_size {
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
                (Ok(db), _) => {
                    let len = db.len()?;
                    (db, len)
                }
                (Err(Error::DbNotFound(_)), Sink::Txn(t)) => (t.create_db(&name)?, 0),
                (Err(Error::DbNotFound(_)), Sink::Direct) => (env.create_db(&name)?, 0),
                (Err(e), _) => return Err(e.into()),
            };
            dbs.insert(name.clone(), db);
            tallies.entry(name.clone()).or_default().len_before = len;
        }
        let db = &dbs[&name];
        let tally = tallies.get_mut(&name).unwrap();
        let name = name.escape_debug();
        tally.kinds.push(header.kind);
        tally.kinds.dedup();
        while let Some((k, v)) = reader.next_pair().map_err(|e| input_error(source, e))? {
            tally.pairs += 1;
            let stored = match (&sink, no_overwrite) {
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
                    "{name}: line {}: key {}: {e}",
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
            progress(read.get());
        }
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
