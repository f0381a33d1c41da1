//! Verification of the durable checkpoint, straight from storage (never through the cache).
//!
//! Owns: the checks behind [`crate::Env::verify`] and [`verify_path`]: meta pages, every
//! page's checksum, header and structure, key order across the whole tree (each subtree
//! within its separators), equal leaf depth, overflow chains, entry counts against the
//! catalog, the free list, and that every page is used exactly once or free. Problems are
//! collected, not thrown, so one run reports all of them in a machine-readable form.

use crate::btree::node::{self, Layout, LeafValue};
use crate::engine::{decode_catalog_record, DB_FILE};
use crate::error::{Error, Result};
use crate::storage::format::{read_checked, read_free_list, read_metas};
use crate::storage::meta::Meta;
use crate::storage::page::{self, rd32, HDR, KIND_OVERFLOW};
use crate::storage::{Storage, StorageFile};
use crate::Config;
use serde::Serialize;
use std::path::Path;
use std::sync::Arc;

/// One problem found by verification.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Problem {
    /// The page where it was found, if any.
    pub page: Option<u64>,
    /// The database it belongs to, if known.
    pub database: Option<String>,
    /// A short machine-readable class: `meta`, `page`, `order`, `depth`, `overflow`,
    /// `count`, `catalog`, `free-list`, `double-use`, `leak`, `file`, `log`.
    pub kind: String,
    /// What exactly is wrong.
    pub detail: String,
}

/// What verification checked and found.
#[derive(Debug, Clone, Serialize, Default)]
pub struct VerifyReport {
    /// Generation of the checkpoint verified.
    pub generation: u64,
    /// Pages in that checkpoint's file.
    pub page_count: u64,
    /// Pages read and checked.
    pub pages_checked: u64,
    /// Databases found in the catalog.
    pub databases: u64,
    /// Entries found across all databases.
    pub entries: u64,
    /// Commits in the log after the verified checkpoint (a transactional environment's
    /// newest work, not yet checkpointed): not in the counts above; opening the environment
    /// applies them. Found by reading the log to its end as recovery does ([`verify_path`]).
    pub log_commits: u64,
    /// Everything found wrong; empty when the environment is sound.
    pub problems: Vec<Problem>,
}

impl VerifyReport {
    /// True when no problem was found.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }

    pub(crate) fn push_meta_warning(&mut self, detail: String) {
        let p = Problem {
            page: None,
            database: None,
            kind: "meta".into(),
            detail,
        };
        if !self.problems.contains(&p) {
            self.problems.push(p);
        }
    }
}

/// Verifies the environment in directory `path` without opening it for use (so damage that
/// would stop [`crate::Env::open`] is still reported): its durable checkpoint, then its log
/// after that checkpoint, read to the end as recovery reads it. Takes no lock and writes
/// nothing, so it works beside a process that has the environment open (which may
/// checkpoint meanwhile: problems are then checked again against the newer checkpoint).
/// Nothing is created: a directory without an environment is an error.
pub fn verify_path(path: impl AsRef<Path>) -> Result<VerifyReport> {
    verify_path_with_progress(path, |_, _| {})
}

/// [`verify_path`], calling `progress(pages checked, pages in the checkpoint)` as it goes.
pub fn verify_path_with_progress(
    path: impl AsRef<Path>,
    mut progress: impl FnMut(u64, u64),
) -> Result<VerifyReport> {
    let storage = crate::files::existing(path.as_ref())?;
    let exists = storage
        .exists(DB_FILE)
        .map_err(|e| Error::io("looking for the page file", e))?;
    if !exists {
        let listing = crate::files::Listing::read(&storage)?;
        return Err(listing
            .no_environment(&storage, false)
            .expect("creation is off"));
    }
    let mut tries = 0;
    let mut report = loop {
        let report = walk_storage(&storage, None, Some(&mut progress))?;
        // A process writing the environment reuses the pages of a checkpoint once a newer
        // one is durable: problems found then are checked again against the newer one.
        if report.is_clean() || tries == 3 || newest_generation(&storage)? == report.generation {
            break report;
        }
        tries += 1;
    };
    let config = Config::new()
        .read_only(true)
        .adopt_mode(true)
        .accept_meta_fallback(true);
    match crate::Env::open_with_storage(Arc::new(storage), config) {
        Ok(env) => {
            if env.stat()?.generation == report.generation {
                report.log_commits = env.recovered_commits();
            }
            env.close()?;
        }
        // With the pages sound, what stops the open is the log.
        Err(Error::Corrupt { page, detail }) if report.is_clean() => {
            report.problems.push(Problem {
                page,
                database: None,
                kind: "log".into(),
                detail,
            })
        }
        Err(Error::Corrupt { .. }) => {}
        Err(e) => return Err(e),
    }
    Ok(report)
}

fn newest_generation(storage: &dyn Storage) -> Result<u64> {
    let file = storage
        .open_read_only(DB_FILE)
        .map_err(|e| Error::io("opening the page file", e))?;
    Ok(read_metas(file.as_ref()).map_or(0, |(m, _, _)| m.generation))
}

/// What salvage recovered of one database, or (`database` `None`) from leaf pages that no
/// database's tree reaches any more (a damaged branch's children, say).
#[derive(Debug, Clone)]
pub struct Salvaged {
    /// The database's name, from the catalog.
    pub database: Option<String>,
    /// Whether it holds duplicates (its entries are then composite, see [`Salvaged::pairs`]).
    pub duplicates: crate::Duplicates,
    /// Every readable entry, in key order (orphans: in page order).
    pub entries: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Salvaged {
    /// The entries as the user's key/value pairs (a database with duplicates stores each pair
    /// under a composite key); entries that do not decode are left out.
    pub fn pairs(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        match self.duplicates {
            crate::Duplicates::None => self.entries.clone(),
            dups => self
                .entries
                .iter()
                .filter_map(|(k, v)| crate::dups::decode(dups, k, v).ok())
                .collect(),
        }
    }
}

/// Salvage (Berkeley DB's `db_dump -r`): every entry that can still be read from the durable
/// checkpoint of the environment in `path`, whatever is damaged. Each database's tree is
/// walked, skipping pages that fail their checks (and entries whose overflow chains do);
/// then leaf pages that are neither reached nor free are read as orphans. `f` receives each
/// database, then the orphans (if any), one at a time; the report lists what was wrong.
/// Reads only; commits only in the log are not included.
pub fn salvage_path(
    path: impl AsRef<Path>,
    mut f: impl FnMut(Salvaged) -> Result<()>,
) -> Result<VerifyReport> {
    let storage = crate::files::existing(path.as_ref())?;
    walk_storage(&storage, Some(&mut f), None)
}

pub(crate) fn verify_storage(storage: &dyn Storage) -> Result<VerifyReport> {
    walk_storage(storage, None, None)
}

type SalvageFn<'a> = &'a mut dyn FnMut(Salvaged) -> Result<()>;
type ProgressFn<'a> = &'a mut dyn FnMut(u64, u64);

fn walk_storage<'s>(
    storage: &dyn Storage,
    salvage: Option<SalvageFn<'s>>,
    progress: Option<ProgressFn<'s>>,
) -> Result<VerifyReport> {
    let file = storage
        .open_read_only(DB_FILE)
        .map_err(|e| Error::io("opening the page file", e))?;
    let mut report = VerifyReport::default();
    let (meta, warnings) = match read_metas(file.as_ref()) {
        Ok((m, _, w)) => (m, w),
        Err(Error::Corrupt { page, detail }) => {
            report.problems.push(Problem {
                page,
                database: None,
                kind: "meta".into(),
                detail,
            });
            return Ok(report);
        }
        Err(e) => return Err(e),
    };
    for w in warnings {
        report.push_meta_warning(w);
    }
    report.generation = meta.generation;
    report.page_count = meta.page_count;
    let mut w = Walker {
        file: file.as_ref(),
        layout: Layout::new(meta.page_size as usize),
        buf: vec![0u8; meta.page_size as usize],
        seen: vec![Use::Unseen; meta.page_count as usize],
        meta,
        leaf_depth: None,
        report,
        salvage,
        progress,
    };
    w.run()?;
    Ok(w.report)
}

/// A page to visit: number, key bounds from its ancestors (lower inclusive, upper exclusive),
/// and depth.
type Visit = (u64, Option<Vec<u8>>, Option<Vec<u8>>, u32);

#[derive(Clone, Copy, PartialEq)]
enum Use {
    Unseen,
    Used,
    Free,
}

struct Walker<'a, 's> {
    file: &'a dyn StorageFile,
    meta: Meta,
    layout: Layout,
    buf: Vec<u8>,
    seen: Vec<Use>,
    leaf_depth: Option<u32>,
    report: VerifyReport,
    /// Receives each database's readable entries when salvaging.
    salvage: Option<SalvageFn<'s>>,
    /// Told every so many pages how far the walk got.
    progress: Option<ProgressFn<'s>>,
}

impl Walker<'_, '_> {
    fn problem(&mut self, page: Option<u64>, db: &str, kind: &str, detail: impl Into<String>) {
        let database = (!db.is_empty()).then(|| db.to_string());
        self.report.problems.push(Problem {
            page,
            database,
            kind: kind.into(),
            detail: detail.into(),
        });
    }

    /// Records a use of `pid`; false (and a problem) if it was already used or free.
    fn mark(&mut self, pid: u64, db: &str, how: Use) -> bool {
        match self.seen.get(pid as usize).copied() {
            None => {
                self.problem(
                    Some(pid),
                    db,
                    "page",
                    format!(
                        "page number outside the file of {} pages",
                        self.meta.page_count
                    ),
                );
                false
            }
            Some(Use::Unseen) => {
                self.seen[pid as usize] = how;
                true
            }
            Some(prev) => {
                let was = if prev == Use::Free { "free" } else { "in use" };
                self.problem(
                    Some(pid),
                    db,
                    "double-use",
                    format!("page is referenced again but is already {was}"),
                );
                false
            }
        }
    }

    /// Reads page `pid`; a corrupt page becomes a problem and `Ok(false)`.
    fn read(&mut self, pid: u64, db: &str, kind: Option<u8>) -> Result<bool> {
        match read_checked(
            self.file,
            pid,
            &mut self.buf,
            self.meta.page_count,
            self.meta.generation,
            kind,
        ) {
            Ok(_) => {
                self.report.pages_checked += 1;
                if let Some(f) = self.progress.as_mut() {
                    if self.report.pages_checked.is_multiple_of(256) {
                        f(self.report.pages_checked, self.meta.page_count);
                    }
                }
                Ok(true)
            }
            Err(Error::Corrupt { page, detail }) => {
                self.problem(page, db, "page", detail);
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    fn run(&mut self) -> Result<()> {
        let ps = self.meta.page_size as u64;
        let len = self
            .file
            .len()
            .map_err(|e| Error::io("reading the file size", e))?;
        if len < self.meta.page_count * ps {
            self.problem(
                None,
                "",
                "file",
                format!(
                    "file has {len} bytes, less than its {} pages",
                    self.meta.page_count
                ),
            );
        }
        match read_free_list(self.file, &self.meta) {
            Ok((free, pages)) => {
                for pid in pages {
                    self.mark(pid, "", Use::Used);
                }
                for pid in free {
                    self.mark(pid, "", Use::Free);
                }
            }
            Err(Error::Corrupt { page, detail }) => self.problem(page, "", "free-list", detail),
            Err(e) => return Err(e),
        }
        let mut catalog = Vec::new();
        self.walk_tree("(catalog)", self.meta.catalog_root, Some(&mut catalog))?;
        let mut ids = std::collections::HashSet::new();
        for (name, value) in catalog {
            let name = String::from_utf8_lossy(&name).into_owned();
            let Some((id, root, entries, dups)) = decode_catalog_record(&value) else {
                self.problem(
                    None,
                    &name,
                    "catalog",
                    format!("record has {} bytes", value.len()),
                );
                continue;
            };
            if id == 0 || id >= self.meta.next_db_id || !ids.insert(id) {
                self.problem(
                    None,
                    &name,
                    "catalog",
                    format!("database id {id} is invalid or repeated"),
                );
            }
            self.report.databases += 1;
            let mut collected = Vec::new();
            let collect = self.salvage.is_some().then_some(&mut collected);
            let found = self.walk_tree(&name, root, collect)?;
            if let Some(f) = self.salvage.as_mut() {
                f(Salvaged {
                    database: Some(name.clone()),
                    duplicates: dups,
                    entries: collected,
                })?;
            }
            self.report.entries += found;
            if found != entries {
                self.problem(
                    None,
                    &name,
                    "count",
                    format!("catalog says {entries} entries, tree holds {found}"),
                );
            }
        }
        for pid in 2..self.meta.page_count {
            if self.seen[pid as usize] == Use::Unseen {
                self.problem(Some(pid), "", "leak", "page is neither used nor free");
            }
        }
        if self.salvage.is_some() {
            self.salvage_orphans()?;
        }
        Ok(())
    }

    /// Reads the entries of leaf pages no tree reached, for salvage.
    fn salvage_orphans(&mut self) -> Result<()> {
        let mut entries = Vec::new();
        for pid in 2..self.meta.page_count {
            if self.seen[pid as usize] != Use::Unseen {
                continue;
            }
            let readable = read_checked(
                self.file,
                pid,
                &mut self.buf,
                self.meta.page_count,
                self.meta.generation,
                Some(page::KIND_LEAF),
            )
            .and_then(|_| node::validate(&self.buf, pid, &self.layout, self.meta.page_count));
            if readable.is_err() {
                continue;
            }
            self.seen[pid as usize] = Use::Used;
            let p = std::mem::take(&mut self.buf);
            self.leaf_entries(&p, pid, "(orphans)", &mut entries)?;
            self.buf = p;
        }
        if let Some(f) = self.salvage.as_mut() {
            if !entries.is_empty() {
                f(Salvaged {
                    database: None,
                    duplicates: crate::Duplicates::None,
                    entries,
                })?;
            }
        }
        Ok(())
    }

    /// The entries of leaf `p` whose key and value read whole (overflow chains intact).
    fn leaf_entries(
        &mut self,
        p: &[u8],
        pid: u64,
        db: &str,
        out: &mut Vec<(Vec<u8>, Vec<u8>)>,
    ) -> Result<()> {
        for i in 0..node::nslots(p) {
            let mut key = node::key(p, i).to_vec();
            let mut whole = true;
            if let Some((first, len)) = node::long_key(p, i) {
                let rest = self.walk_overflow(db, pid, first, len)?;
                whole &= rest.len() == len as usize;
                key.extend(rest);
            }
            let value = match node::leaf_value(p, i) {
                LeafValue::Inline(v) => v.to_vec(),
                LeafValue::Overflow { first, len } => {
                    let v = self.walk_overflow(db, pid, first, len)?;
                    whole &= v.len() == len as usize;
                    v
                }
            };
            if whole {
                out.push((key, value));
            }
        }
        Ok(())
    }

    /// Walks one tree; returns its entry count, and its entries into `collect` if given.
    fn walk_tree(
        &mut self,
        db: &str,
        root: u64,
        mut collect: Option<&mut Vec<(Vec<u8>, Vec<u8>)>>,
    ) -> Result<u64> {
        self.leaf_depth = None;
        let mut entries = 0;
        let mut stack: Vec<Visit> = vec![(root, None, None, 1)];
        while let Some((pid, lo, hi, depth)) = stack.pop() {
            if !self.mark(pid, db, Use::Used) || !self.read(pid, db, None)? {
                continue;
            }
            if let Err(Error::Corrupt { page, detail }) =
                node::validate(&self.buf, pid, &self.layout, self.meta.page_count)
            {
                self.problem(page, db, "page", detail);
                continue;
            }
            let p = std::mem::take(&mut self.buf);
            let n = node::nslots(&p);
            // Whole keys: a long key's rest is read from its chain (whose pages are used).
            let mut keys = Vec::with_capacity(n);
            let mut whole = vec![true; n];
            for (i, whole) in whole.iter_mut().enumerate() {
                let mut k = node::key(&p, i).to_vec();
                if let Some((first, len)) = node::long_key(&p, i) {
                    let rest = self.walk_overflow(db, pid, first, len)?;
                    *whole = rest.len() == len as usize;
                    k.extend(rest);
                }
                keys.push(k);
            }
            if node::has_long_keys(&p) && keys.windows(2).any(|w| w[0] >= w[1]) {
                self.problem(Some(pid), db, "order", "long keys are out of order");
            }
            if n > 0 {
                if lo.as_deref().is_some_and(|lo| keys[0].as_slice() < lo) {
                    self.problem(
                        Some(pid),
                        db,
                        "order",
                        "first key sorts before its parent's separator",
                    );
                }
                if hi.as_deref().is_some_and(|hi| keys[n - 1].as_slice() >= hi) {
                    self.problem(
                        Some(pid),
                        db,
                        "order",
                        "last key does not sort before the next separator",
                    );
                }
            }
            if node::is_leaf(&p) {
                if *self.leaf_depth.get_or_insert(depth) != depth {
                    self.problem(
                        Some(pid),
                        db,
                        "depth",
                        format!("leaf at depth {depth}, others at {:?}", self.leaf_depth),
                    );
                }
                entries += n as u64;
                for (i, key) in keys.iter().enumerate() {
                    let value = match node::leaf_value(&p, i) {
                        LeafValue::Inline(v) => v.to_vec(),
                        LeafValue::Overflow { first, len } => {
                            let v = self.walk_overflow(db, pid, first, len)?;
                            whole[i] &= v.len() == len as usize;
                            v
                        }
                    };
                    // A broken chain was reported; its entry is not data to hand out.
                    if let Some(c) = collect.as_deref_mut().filter(|_| whole[i]) {
                        c.push((key.clone(), value));
                    }
                }
            } else {
                for i in (0..=n).rev() {
                    let clo = if i == 0 {
                        lo.clone()
                    } else {
                        Some(keys[i - 1].clone())
                    };
                    let chi = if i == n {
                        hi.clone()
                    } else {
                        Some(keys[i].clone())
                    };
                    stack.push((node::child(&p, i), clo, chi, depth + 1));
                }
            }
            self.buf = p;
        }
        Ok(entries)
    }

    fn walk_overflow(&mut self, db: &str, leaf: u64, first: u64, len: u32) -> Result<Vec<u8>> {
        let cap = self.layout.page_size - HDR;
        let mut value = Vec::new();
        let mut pid = first;
        let mut buf = vec![0u8; self.layout.page_size];
        std::mem::swap(&mut buf, &mut self.buf);
        let limit = (len as usize).div_ceil(cap);
        let mut pages = 0;
        while pid != 0 && pages <= limit {
            pages += 1;
            if !self.mark(pid, db, Use::Used) || !self.read(pid, db, Some(KIND_OVERFLOW))? {
                break;
            }
            let used = (rd32(&self.buf, 32) as usize).min(cap);
            value.extend_from_slice(&self.buf[HDR..HDR + used]);
            pid = page::link(&self.buf);
        }
        std::mem::swap(&mut buf, &mut self.buf);
        if value.len() != len as usize || pid != 0 {
            self.problem(
                Some(leaf),
                db,
                "overflow",
                format!(
                    "overflow chain from page {first} holds {} bytes, not {len}",
                    value.len()
                ),
            );
        }
        Ok(value)
    }
}
