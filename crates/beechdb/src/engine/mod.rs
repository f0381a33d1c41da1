//! The engine state behind an environment's lock: page file, cache, free space, databases.
//!
//! Owns: the [`Engine`] struct, opening and creating the page file, and poisoning. Its jobs
//! live in submodules: `pager` (the [`Pager`]: file, cache, free space; loading pages,
//! checked on every read; allocation, freeing, eviction), which tree code works over;
//! `catalog` (the database table and its tree) and `checkpoint` (the copy-on-write
//! checkpoint), each an `impl Engine`; `writeback` holds the pages an exclusive hold
//! evicted or wrote until they are written after it. The values old snapshots still need
//! are `txn/versions.rs`'s, the readers of the file's formats `storage/format.rs`'s.
//! May call: `storage`, `cache`, `btree` (tree code works over `Engine::pager`).
//! Invariants:
//! - every dirty page is fresh (allocated since the durable checkpoint), or captured by the
//!   checkpoint in flight and holding exactly the image that checkpoint writes; so writing
//!   it never touches a page the durable checkpoint references;
//! - the ancestors of a fresh page are fresh (relocating a page relocates its path);
//! - after a failed write or sync the engine is poisoned and refuses every further write.
//!
//! A checkpoint: (1) refresh catalog records of changed databases; (2) allocate free-list
//! pages from pages free in the durable checkpoint; (3) write every dirty page and the free
//! list; (4) `sync_data`; (5) write the meta slot not used by the durable checkpoint; (6)
//! `sync_data`. Only then do pages freed since the last checkpoint become reusable. A crash
//! before (6) completes leaves the previous meta, and every page it references, untouched.
//! Steps (3)-(6) run without the exclusive lock ([`CheckpointWork::write`]): the checkpoint
//! seals free space when it begins, so what it captured is relocated, never changed in
//! place, and frames it has still to write are retired rather than dropped.

mod catalog;
mod checkpoint;
mod pager;
mod writeback;

pub(crate) use catalog::{decode_catalog_record, encode_catalog_record, tree_refs, CATALOG};
pub(crate) use pager::Pager;
pub(crate) use writeback::WriteBack;

use crate::btree::node::{self, Layout};
use crate::cache::Cache;
use crate::config::{Config, Duplicates, Mode};
use crate::error::{Error, Result};
pub(crate) use crate::files::DB_FILE;
use crate::files::DB_FILE_TMP;
use crate::storage::format::{io_err, read_free_list, read_metas};
use crate::storage::freespace::FreeSpace;
use crate::storage::meta::{Meta, META_LEN};
use crate::storage::page::{self, KIND_LEAF};
use crate::storage::{Storage, StorageFile};
use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

/// Values a key had before successive commits: `(commit LSN, value before it)`, oldest first.
pub(crate) type VersionChain = Vec<(u64, Option<Vec<u8>>)>;

/// Why a read under the shared lock could not finish.
pub(crate) enum Need {
    /// Page not resident: retry under the exclusive lock after loading it.
    Page(u64),
    Fail(Error),
}

impl From<Error> for Need {
    fn from(e: Error) -> Need {
        Need::Fail(e)
    }
}

pub(crate) type NeedResult<T> = std::result::Result<T, Need>;

#[derive(Debug, Clone)]
pub(crate) struct DbState {
    pub name: String,
    pub root: u64,
    pub entries: u64,
    pub dups: Duplicates,
    /// Root or entry count changed since the catalog record was written.
    pub catalog_dirty: bool,
}

pub(crate) struct Engine {
    /// The page file, the cache and free space: what tree code works over.
    pub pager: Pager,
    /// Indexed by database id; `None` for removed ids. Id 0 is the catalog.
    pub dbs: Vec<Option<DbState>>,
    pub names: BTreeMap<String, u32>,
    freelist_pages: Vec<u64>,
    next_db_id: u32,
    pub poisoned: Option<String>,
    /// Problems with the meta pages found at open (e.g. one slot unreadable).
    pub meta_warnings: Vec<String>,
    pub pages_written: u64,
    pub checkpoints: u64,
    pub(crate) path_buf: Vec<(u64, usize)>,
    pub(crate) hint: LeafHint,
    /// The leaf and slot of the last insert, and how many inserts in a row each went one
    /// slot after the one before: a leaf filled by a long such run (a sorted load) is split
    /// where the insert goes, not in the middle. Short runs (a batch of a few keys) are not
    /// a sorted load: full pages would only split again at the next random insert.
    pub(crate) last_insert: Option<(u64, usize)>,
    pub(crate) insert_run: u32,
    /// Unique among all engines of the process: names this engine in thread-local read hints.
    pub(crate) instance: u64,
    /// Log position the next (or the in-flight) checkpoint covers, its segment and the log's
    /// chain value there.
    pub(crate) log_lsn: u64,
    pub(crate) log_segment: u64,
    pub(crate) log_chain: u32,
    /// The oldest segment recovery from that checkpoint needs, if before `log_segment` (0:
    /// none before it).
    pub(crate) log_keep_segment: u64,
    /// The meta record of the durable checkpoint.
    pub(crate) durable_meta: Meta,
    /// Fixed at creation: salts the log's checksums.
    pub(crate) env_id: u64,
    pub(crate) mode: Mode,
    /// End LSN of the last commit applied to the trees: the newest snapshot.
    pub(crate) commit_lsn: u64,
    /// Values overwritten by commits while older snapshots were active: for each key
    /// (database id big-endian, then the key), `(commit LSN, value before that commit)` in
    /// commit order. A snapshot at LSN `s` reads the first entry newer than `s`, else the tree.
    pub(crate) versions: std::collections::BTreeMap<Vec<u8>, VersionChain>,
    /// The newest commit LSN `versions` holds an entry for (never lowered): a snapshot at
    /// or after it reads nothing from the map, so reads skip it.
    pub(crate) versions_newest: u64,
    /// The values commits of spilled transactions replaced: of one being applied in batches
    /// (hiding what it has applied from every reader), or of one done, kept for older
    /// snapshots (see `txn/undo.rs`).
    pub(crate) undo: Vec<Arc<crate::txn::UndoStore>>,
    /// Stores no reader needs any more: dropped (their files removed) outside the lock.
    pub(crate) undo_garbage: Vec<Arc<crate::txn::UndoStore>>,
    /// Databases created by a spilled transaction whose commit is being applied: nameless
    /// to everyone else until it is done.
    pub(crate) hidden: Vec<u32>,
    /// Pages of removed databases' trees still to be freed, and whose children (and
    /// overflow chains) are still to be found: no longer reachable, never changed again
    /// (see `engine/catalog.rs`, and `Shared::free_doomed`).
    pub(crate) doomed: std::collections::VecDeque<u64>,
    /// The meta record the environment was opened from, and its slot.
    opened_from: (Meta, u64),
}

/// The leaf the last write went to, with the key range it covers and its path, so that a
/// following write to a nearby key can skip the descent.
#[derive(Default)]
pub(crate) struct LeafHint {
    pub valid: bool,
    /// The engine instance (read hints are thread-local and outlive any one engine).
    pub instance: u64,
    pub db: u32,
    pub epoch: u64,
    pub leaf: u64,
    pub lo: Option<Vec<u8>>,
    pub hi: Option<Vec<u8>>,
    pub path: Vec<(u64, usize)>,
}

impl Engine {
    /// Opens the page file in `storage`, creating a new environment first when `create`.
    /// Writes nothing else: the caller makes the checkpoint durable
    /// ([`Engine::make_checkpoint_durable`]) once it has decided to use it.
    pub fn open(storage: &dyn Storage, cfg: &Config, create: bool) -> Result<Engine> {
        if create {
            crate::config::check_cache_size(cfg.cache_size_value(), cfg.page_size_value())?;
            create_page_file(storage, cfg.page_size_value(), cfg.mode())?;
        } else if !cfg.read_only {
            // An earlier open may have created it and failed to sync the directory.
            storage
                .sync_dir()
                .map_err(io_err("syncing the environment directory"))?;
        }
        let file = if cfg.read_only {
            storage.open_read_only(DB_FILE)
        } else {
            storage.open(DB_FILE, false)
        }
        .map_err(io_err("opening the page file"))?;
        let (meta, slot, meta_warnings) = read_metas(file.as_ref())?;
        if !meta_warnings.is_empty() && !cfg.accept_meta_fallback {
            return Err(Error::Corrupt {
                page: Some(1 - slot),
                detail: format!(
                    "{}; the changes of the newest checkpoint may be lost. Nothing was changed: \
                     open with Config::accept_meta_fallback(true) (beech --accept-fallback) to \
                     use checkpoint {} anyway",
                    meta_warnings.join("; "),
                    meta.generation
                ),
            });
        }
        let mode = Mode::from_code(meta.mode);
        if mode != cfg.mode() && !cfg.adopt_mode {
            return Err(Error::InvalidArgument(format!(
                "the environment at {} was created in {}; it cannot be opened in {} (open it \
                 in its own mode, or with Config::adopt_mode(true))",
                storage.describe(),
                mode.config_words(),
                cfg.mode().config_words()
            )));
        }
        let (free, freelist_pages) = read_free_list(file.as_ref(), &meta)?;
        let ps = meta.page_size as usize;
        crate::config::check_cache_size(cfg.cache_size_value(), ps)?;
        let capacity = cfg.cache_size_value() / ps;
        let file: Arc<dyn StorageFile> = Arc::from(file);
        let mut engine = Engine {
            pager: Pager {
                layout: Layout::new(ps),
                writeback: Arc::new(WriteBack::new(file.clone(), ps)),
                file,
                cache: Cache::new(ps, capacity),
                space: FreeSpace::new(meta.page_count, free),
                epoch: 0,
                generation: meta.generation,
                read_only: cfg.read_only,
                changed: false,
                checkpoint_in_flight: false,
                retired: Vec::new(),
            },
            dbs: vec![Some(DbState {
                name: String::new(),
                root: meta.catalog_root,
                entries: 0,
                dups: Duplicates::None,
                catalog_dirty: false,
            })],
            names: BTreeMap::new(),
            freelist_pages,
            next_db_id: meta.next_db_id.max(1),
            poisoned: None,
            meta_warnings,
            pages_written: 0,
            checkpoints: 0,
            path_buf: Vec::new(),
            hint: LeafHint::default(),
            last_insert: None,
            insert_run: 0,
            instance: {
                static NEXT_INSTANCE: std::sync::atomic::AtomicU64 =
                    std::sync::atomic::AtomicU64::new(1);
                NEXT_INSTANCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            },
            log_lsn: meta.log_lsn,
            log_segment: meta.log_segment,
            log_chain: meta.log_chain,
            log_keep_segment: meta.keep_segment,
            durable_meta: meta,
            env_id: meta.env_id,
            mode,
            commit_lsn: meta.log_lsn,
            versions: std::collections::BTreeMap::new(),
            versions_newest: 0,
            undo: Vec::new(),
            undo_garbage: Vec::new(),
            hidden: Vec::new(),
            doomed: Default::default(),
            opened_from: (meta, slot),
        };
        engine.load_catalog()?;
        engine.shrink_cache();
        Ok(engine)
    }

    pub fn check_writable(&self) -> Result<()> {
        if self.pager.read_only {
            return Err(Error::ReadOnly);
        }
        match &self.poisoned {
            Some(cause) => Err(Error::Poisoned {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Records an I/O failure on the write path and returns the error to report.
    pub fn poison(&mut self, context: String, e: io::Error) -> Error {
        if self.poisoned.is_none() {
            self.poisoned = Some(format!("{context}: {e}"));
        }
        Error::io(context, e)
    }

    /// Records a failure of another part (the log) on the write path; returns it.
    pub fn poison_with(&mut self, context: String, e: Error) -> Error {
        if self.poisoned.is_none() {
            self.poisoned = Some(format!("{context}: {e}"));
        }
        e
    }
}

/// A random environment id, from the operating system's randomness (through the standard
/// library's hash seeds), the time and the process id.
fn new_env_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}

/// Writes a new, empty environment: a temporary file made durable, then renamed into place,
/// so that a page file that exists always has a valid meta page.
fn create_page_file(storage: &dyn Storage, page_size: usize, mode: Mode) -> Result<()> {
    let f = storage
        .open(DB_FILE_TMP, true)
        .map_err(io_err("creating the page file"))?;
    f.set_len(0).map_err(io_err("creating the page file"))?;
    let mut buf = vec![0u8; page_size * 3];
    let root = &mut buf[2 * page_size..];
    node::init(root, KIND_LEAF);
    // Generation 0, so that either meta page may reference it.
    page::seal(root, 2, 0);
    // Checkpoint 1 in slot 1, and an identical checkpoint 0 in slot 0.
    let mut meta = Meta {
        page_size: page_size as u32,
        next_db_id: 1,
        generation: 0,
        catalog_root: 2,
        page_count: 3,
        log_lsn: crate::wal::FIRST_LSN,
        mode: mode.code(),
        env_id: new_env_id(),
        ..Meta::default()
    };
    buf[..META_LEN].copy_from_slice(&meta.encode());
    meta.generation = 1;
    buf[page_size..page_size + META_LEN].copy_from_slice(&meta.encode());
    f.write_at(&buf, 0)
        .map_err(io_err("writing the new page file"))?;
    f.sync_all().map_err(io_err("syncing the new page file"))?;
    storage
        .rename(DB_FILE_TMP, DB_FILE)
        .map_err(io_err("renaming the new page file"))?;
    storage
        .sync_dir()
        .map_err(io_err("syncing the environment directory"))?;
    Ok(())
}
