//! The engine state behind an environment's lock: page file, cache, free space, databases.
//!
//! Owns: opening and creating the page file, loading pages (checked on every read), writing
//! dirty pages on eviction, and the copy-on-write checkpoint. May call: `storage`, `cache`,
//! `btree` (for the catalog). Invariants:
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

use crate::btree::node::{self, Layout};
use crate::cache::Cache;
use crate::config::{Config, Duplicates, Mode};
use crate::error::{Error, Result};
pub(crate) use crate::files::DB_FILE;
use crate::files::DB_FILE_TMP;
use crate::storage::freespace::FreeSpace;
use crate::storage::meta::{Meta, META_LEN};
use crate::storage::page::{self, rd32, rd64, wr32, wr64, HDR, KIND_FREELIST, KIND_LEAF};
use crate::storage::{Storage, StorageFile};
use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

/// Database id of the catalog tree (names -> database records).
pub(crate) const CATALOG: u32 = 0;
pub(crate) const CATALOG_RECORD_LEN: usize = 20;

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
    pub layout: Layout,
    pub file: Arc<dyn StorageFile>,
    pub cache: Cache,
    pub space: FreeSpace,
    /// Indexed by database id; `None` for removed ids. Id 0 is the catalog.
    pub dbs: Vec<Option<DbState>>,
    pub names: BTreeMap<String, u32>,
    /// Generation of the durable checkpoint.
    pub generation: u64,
    freelist_pages: Vec<u64>,
    next_db_id: u32,
    pub poisoned: Option<String>,
    /// Problems with the meta pages found at open (e.g. one slot unreadable).
    pub meta_warnings: Vec<String>,
    /// Something changed since the durable checkpoint.
    pub changed: bool,
    pub pages_written: u64,
    pub checkpoints: u64,
    pub(crate) path_buf: Vec<(u64, usize)>,
    /// Bumped by every change to the shape of any tree or to the cache's residency:
    /// allocation, relocation, freeing, eviction. A [`LeafHint`] is valid only in its epoch.
    pub(crate) epoch: u64,
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
    /// A checkpoint is between its first and last phase.
    checkpoint_in_flight: bool,
    /// Pages relocated or freed whose frames the checkpoint in flight still has to write.
    retired: Vec<u64>,
    /// The meta record the environment was opened from, and its slot.
    opened_from: (Meta, u64),
    /// Opened with `Config::read_only`: writes nothing, ever.
    pub read_only: bool,
}

/// A page a reader found missing: what it needs to load it with no lock held, and the
/// change counter of its page number to prove, under the shared lock again, that the page
/// still means what the reader's descent saw.
pub(crate) struct PageMiss {
    pub pid: u64,
    pub epoch: u32,
    file: Arc<dyn StorageFile>,
    page_count: u64,
    max_gen: u64,
    layout: Layout,
    read_only: bool,
}

/// A page that fails its checks in a read-only engine is most likely one the writing
/// process reused after a checkpoint: the error says so.
fn read_error(read_only: bool, e: Error) -> Error {
    match e {
        Error::Corrupt { page, detail } if read_only => Error::Corrupt {
            page,
            detail: format!(
                "{detail} (read-only: if another process writes this environment, it may have \
                 reused the page after a checkpoint, and opening again reads the newer one; \
                 otherwise the page is damaged: `beech verify` reports the damage and \
                 `beech dump --salvage` recovers every record still readable)"
            ),
        },
        e => e,
    }
}

impl PageMiss {
    /// Reads and checks the page (the I/O of a cache miss, under no lock).
    pub fn load(&self) -> Result<Box<[u8]>> {
        let mut buf = vec![0u8; self.layout.page_size].into_boxed_slice();
        read_checked(
            self.file.as_ref(),
            self.pid,
            &mut buf,
            self.page_count,
            self.max_gen,
            None,
        )
        .and_then(|_| node::validate(&buf, self.pid, &self.layout, self.page_count))
        .map_err(|e| read_error(self.read_only, e))?;
        Ok(buf)
    }
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

/// A catalog record: `id u32 | root u64 | entries u64`, then `duplicates u8` for a database
/// with duplicates only (so the records of other databases keep their first format).
pub(crate) fn encode_catalog_record(id: u32, root: u64, entries: u64, dups: Duplicates) -> Vec<u8> {
    let mut r = vec![0u8; CATALOG_RECORD_LEN];
    wr32(&mut r, 0, id);
    wr64(&mut r, 4, root);
    wr64(&mut r, 12, entries);
    if dups != Duplicates::None {
        r.push(dups.code());
    }
    r
}

pub(crate) fn decode_catalog_record(v: &[u8]) -> Option<(u32, u64, u64, Duplicates)> {
    let dups = match v.len() {
        CATALOG_RECORD_LEN => Duplicates::None,
        n if n == CATALOG_RECORD_LEN + 1 => {
            Duplicates::from_code(v[CATALOG_RECORD_LEN]).filter(|&d| d != Duplicates::None)?
        }
        _ => return None,
    };
    Some((rd32(v, 0), rd64(v, 4), rd64(v, 12), dups))
}

fn io_err(what: &str) -> impl FnOnce(io::Error) -> Error + '_ {
    move |e| Error::io(what, e)
}

/// Reads the meta slots of `file`: the chosen meta, the slot it was read from, and warnings
/// about the other slot.
pub(crate) fn read_metas(file: &dyn StorageFile) -> Result<(Meta, u64, Vec<String>)> {
    let len = file.len().map_err(io_err("reading the file size"))?;
    let mut buf = [0u8; META_LEN];
    let mut slot0 = Err("file too short".to_string());
    if len >= META_LEN as u64 {
        file.read_at(&mut buf, 0)
            .map_err(io_err("reading meta page 0"))?;
        slot0 = Meta::decode(&buf).map_err(|p| p.to_string());
    }
    // Slot 1 sits one page in; without slot 0 the page size is unknown, so try each.
    let sizes: Vec<u64> = match &slot0 {
        Ok(m) => vec![m.page_size as u64],
        Err(_) => (12..=16).map(|s| 1u64 << s).collect(),
    };
    let mut slot1 = Err("file too short".to_string());
    for ps in sizes {
        if len >= ps + META_LEN as u64 {
            file.read_at(&mut buf, ps)
                .map_err(io_err("reading meta page 1"))?;
            slot1 = match Meta::decode(&buf) {
                Ok(m) if m.page_size as u64 == ps => Ok(m),
                Ok(m) => Err(format!(
                    "page size {} does not match its position",
                    m.page_size
                )),
                Err(p) => Err(p.to_string()),
            };
            if slot1.is_ok() {
                break;
            }
        }
    }
    let mut warnings = Vec::new();
    let chosen = match (slot0, slot1) {
        (Ok(a), Ok(b)) => {
            if a.page_size != b.page_size || a.env_id != b.env_id {
                warnings.push("meta pages disagree on the page size or the environment".into());
            }
            if a.generation >= b.generation {
                (a, 0)
            } else {
                (b, 1)
            }
        }
        (Ok(a), Err(e)) => {
            warnings.push(format!(
                "meta page 1 unusable ({e}); opened checkpoint {} from meta page 0, which may \
                 be older than the last one taken",
                a.generation
            ));
            (a, 0)
        }
        (Err(e), Ok(b)) => {
            warnings.push(format!(
                "meta page 0 unusable ({e}); opened checkpoint {} from meta page 1, which may \
                 be older than the last one taken",
                b.generation
            ));
            (b, 1)
        }
        (Err(a), Err(b)) => {
            return Err(Error::Corrupt {
                page: Some(0),
                detail: format!("no usable meta page (page 0: {a}; page 1: {b})"),
            })
        }
    };
    Ok((chosen.0, chosen.1, warnings))
}

/// Reads and checks the free-list chain of `meta`.
pub(crate) fn read_free_list(file: &dyn StorageFile, meta: &Meta) -> Result<(Vec<u64>, Vec<u64>)> {
    let ps = meta.page_size as usize;
    let mut pages = Vec::new();
    let mut free = Vec::new();
    let mut pid = meta.freelist_head;
    let mut buf = vec![0u8; ps];
    while pid != 0 {
        if pages.len() as u64 >= meta.freelist_pages {
            return Err(Error::corrupt(
                pid,
                "free-list chain is longer than the meta page says",
            ));
        }
        read_checked(
            file,
            pid,
            &mut buf,
            meta.page_count,
            meta.generation,
            Some(KIND_FREELIST),
        )?;
        let n = rd32(&buf, 32) as usize;
        if n > (ps - HDR) / 8 {
            return Err(Error::corrupt(
                pid,
                format!("free-list page claims {n} entries"),
            ));
        }
        for i in 0..n {
            let f = rd64(&buf, HDR + 8 * i);
            if f < 2 || f >= meta.page_count {
                return Err(Error::corrupt(
                    pid,
                    format!("free-list entry {f} lies outside the file"),
                ));
            }
            free.push(f);
        }
        pages.push(pid);
        pid = page::link(&buf);
    }
    if pages.len() as u64 != meta.freelist_pages {
        return Err(Error::corrupt(
            meta.freelist_head,
            "free-list chain is shorter than the meta page says",
        ));
    }
    Ok((free, pages))
}

/// Reads page `pid` into `buf` and checks its header; a short file is corruption.
pub(crate) fn read_checked(
    file: &dyn StorageFile,
    pid: u64,
    buf: &mut [u8],
    page_count: u64,
    max_gen: u64,
    kind: Option<u8>,
) -> Result<u8> {
    if pid < 2 || pid >= page_count {
        return Err(Error::corrupt(
            pid,
            format!("page number outside the file of {page_count} pages"),
        ));
    }
    match file.read_at(buf, pid * buf.len() as u64) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            return Err(Error::corrupt(pid, "page lies beyond the end of the file"))
        }
        Err(e) => return Err(Error::io(format!("reading page {pid}"), e)),
    }
    page::check(buf, pid, max_gen, kind)
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
        let mut engine = Engine {
            layout: Layout::new(ps),
            file: Arc::from(file),
            cache: Cache::new(ps, capacity),
            space: FreeSpace::new(meta.page_count, free),
            dbs: vec![Some(DbState {
                name: String::new(),
                root: meta.catalog_root,
                entries: 0,
                dups: Duplicates::None,
                catalog_dirty: false,
            })],
            names: BTreeMap::new(),
            generation: meta.generation,
            freelist_pages,
            next_db_id: meta.next_db_id.max(1),
            poisoned: None,
            meta_warnings,
            changed: false,
            pages_written: 0,
            checkpoints: 0,
            path_buf: Vec::new(),
            epoch: 0,
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
            checkpoint_in_flight: false,
            retired: Vec::new(),
            opened_from: (meta, slot),
            read_only: cfg.read_only,
        };
        engine.load_catalog()?;
        engine.shrink_cache();
        Ok(engine)
    }

    fn load_catalog(&mut self) -> Result<()> {
        let records = self.scan_all(CATALOG)?;
        for (k, v) in records {
            let name = String::from_utf8(k).map_err(|_| Error::Corrupt {
                page: None,
                detail: "catalog holds a database name that is not UTF-8".into(),
            })?;
            let (id, root, entries, dups) =
                decode_catalog_record(&v).ok_or_else(|| Error::Corrupt {
                    page: None,
                    detail: format!("catalog record of {name:?} has {} bytes", v.len()),
                })?;
            if id == CATALOG || id >= self.next_db_id || root < 2 || root >= self.space.page_count()
            {
                return Err(Error::Corrupt {
                    page: None,
                    detail: format!(
                        "catalog record of {name:?} is inconsistent (id {id}, root {root})"
                    ),
                });
            }
            let slot = id as usize;
            if self.dbs.len() <= slot {
                self.dbs.resize(slot + 1, None);
            }
            if self.dbs[slot].is_some() {
                return Err(Error::Corrupt {
                    page: None,
                    detail: format!("database id {id} appears twice"),
                });
            }
            self.dbs[slot] = Some(DbState {
                name: name.clone(),
                root,
                entries,
                dups,
                catalog_dirty: false,
            });
            self.names.insert(name, id);
        }
        Ok(())
    }

    /// Makes the checkpoint the environment was opened from durable, whatever an earlier
    /// process left unsynced: it may have been killed after writing the meta page but before
    /// syncing it, or its sync may have failed and the kernel dropped the page while still
    /// serving it from the page cache. So the meta page is written again and, when no meta
    /// page was unusable (no newer checkpoint may need them), pages past the checkpoint's
    /// count are cut off; then everything is synced. Pages the checkpoint references were
    /// synced before its meta page was first written. Call before writing any page.
    pub fn make_checkpoint_durable(&mut self) -> Result<()> {
        let (meta, slot) = self.opened_from;
        let ps = meta.page_size as u64;
        let file = self.file.as_ref();
        file.write_at(&meta.encode(), slot * ps)
            .map_err(io_err("writing the meta page"))?;
        let want = meta.page_count * ps;
        let len = file.len().map_err(io_err("reading the file size"))?;
        if self.meta_warnings.is_empty() && len > want {
            file.set_len(want)
                .map_err(io_err("trimming the page file"))?;
        }
        file.sync_all().map_err(io_err("syncing the page file"))
    }

    pub fn check_writable(&self) -> Result<()> {
        if self.read_only {
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

    /// The id of database `name`, unless a commit being applied created it.
    pub fn visible_db(&self, name: &str) -> Option<u32> {
        self.names
            .get(name)
            .copied()
            .filter(|id| !self.hidden.contains(id))
    }

    #[inline]
    pub fn db(&self, id: u32) -> Result<&DbState> {
        self.dbs
            .get(id as usize)
            .and_then(|d| d.as_ref())
            .ok_or(Error::DbRemoved)
    }

    #[inline]
    pub fn db_mut(&mut self, id: u32) -> &mut DbState {
        self.dbs[id as usize]
            .as_mut()
            .expect("database id checked by the caller")
    }

    /// Loads page `pid` into the cache, checking checksum, header and structure.
    pub fn load(&mut self, pid: u64) -> Result<()> {
        let mut buf = self.cache.buffer();
        read_checked(
            self.file.as_ref(),
            pid,
            &mut buf,
            self.space.page_count(),
            self.max_page_generation(),
            None,
        )
        .and_then(|_| node::validate(&buf, pid, &self.layout, self.space.page_count()))
        .map_err(|e| self.explain_read_error(e))?;
        self.cache.misses += 1;
        self.cache.insert(pid, buf, false);
        Ok(())
    }

    /// What a reader needs to load `pid` with no lock held (see [`PageMiss`]).
    pub fn miss(&self, pid: u64) -> PageMiss {
        PageMiss {
            pid,
            epoch: self.cache.epoch(pid),
            file: self.file.clone(),
            page_count: self.space.page_count(),
            max_gen: self.max_page_generation(),
            layout: self.layout,
            read_only: self.read_only,
        }
    }

    /// The newest generation a page read from the file may carry: pages of the checkpoint
    /// being built carry the next one, which a read-only engine (reading one durable
    /// checkpoint beside a writer) never reads.
    pub(crate) fn max_page_generation(&self) -> u64 {
        self.generation + u64::from(!self.read_only)
    }

    pub(crate) fn explain_read_error(&self, e: Error) -> Error {
        read_error(self.read_only, e)
    }

    /// Evicts clean pages (no I/O) down to 7/8 of the budget, for readers.
    pub fn shrink_clean(&mut self) {
        let target = self.cache.capacity() - self.cache.capacity() / 8;
        for _ in 0..self.cache.len() {
            if self.cache.len() <= target {
                break;
            }
            let Some(pid) = self.cache.victim() else {
                break;
            };
            if !self.cache.frame_mut(pid).is_some_and(|f| f.dirty) {
                self.epoch += 1;
                self.cache.evict(pid);
            }
        }
    }

    /// Makes `pid` resident.
    #[inline]
    pub fn ensure(&mut self, pid: u64) -> Result<()> {
        if !self.cache.contains(pid) {
            self.load(pid)?;
        }
        Ok(())
    }

    /// A resident page (the caller made it resident).
    #[inline]
    pub fn node(&self, pid: u64) -> &[u8] {
        self.cache
            .get(pid)
            .expect("page made resident by the caller")
    }

    /// A resident page about to be modified: marks it dirty. Only fresh pages may be.
    #[inline]
    pub fn node_mut(&mut self, pid: u64) -> &mut [u8] {
        debug_assert!(
            self.space.is_fresh(pid),
            "modifying page {pid}, which the durable checkpoint owns"
        );
        self.changed = true;
        let f = self
            .cache
            .frame_mut(pid)
            .expect("page made resident by the caller");
        f.dirty = true;
        &mut f.data
    }

    /// A new, empty, dirty node of `kind`.
    pub fn new_node(&mut self, kind: u8) -> u64 {
        self.epoch += 1;
        let pid = self.space.allocate();
        let mut buf = self.cache.buffer();
        node::init(&mut buf, kind);
        self.cache.insert(pid, buf, true);
        self.changed = true;
        pid
    }

    /// Frees a page: out of the cache, back to free space.
    pub fn free_page(&mut self, pid: u64) {
        self.epoch += 1;
        if !self.retire_frame(pid) {
            self.cache.discard(pid);
        }
        self.space.release(pid);
        self.changed = true;
    }

    fn write_page(&mut self, pid: u64, data: &mut [u8]) -> Result<()> {
        page::seal(data, pid, self.generation + 1);
        let ps = self.layout.page_size as u64;
        if let Err(e) = self.file.write_at(data, pid * ps) {
            return Err(self.poison(format!("writing page {pid}"), e));
        }
        self.pages_written += 1;
        Ok(())
    }

    /// Writes resident dirty page `pid` to its (fresh) location and marks it clean.
    fn write_frame(&mut self, pid: u64) -> Result<()> {
        let frame = self.cache.frame_mut(pid).expect("a resident page");
        let mut data = std::mem::take(&mut frame.data);
        let res = self.write_page(pid, &mut data);
        let frame = self.cache.frame_mut(pid).expect("a resident page");
        frame.data = data;
        res?;
        frame.dirty = false;
        Ok(())
    }

    /// Evicts pages until the cache is within budget; dirty victims are written first (to
    /// their fresh locations). A write failure poisons the engine and stops eviction.
    pub fn shrink_cache(&mut self) {
        while self.cache.over_budget() {
            let Some(pid) = self.cache.victim() else {
                break;
            };
            let frame = self.cache.frame_mut(pid).unwrap();
            if frame.dirty {
                // A read-only engine keeps what it replayed in memory: it never writes.
                if self.poisoned.is_some() || self.read_only {
                    break;
                }
                if self.write_frame(pid).is_err() {
                    break;
                }
                self.cache.dirty_evictions += 1;
            }
            self.epoch += 1;
            self.cache.evict(pid);
        }
    }

    /// Creates database `name`, returning its id.
    pub fn create_db(&mut self, name: &str, dups: Duplicates) -> Result<u32> {
        self.check_writable()?;
        if self.names.contains_key(name) {
            return Err(Error::DbExists(name.to_string()));
        }
        let id = self.alloc_db_id();
        self.create_db_with_id(id, name, dups)?;
        Ok(id)
    }

    /// A database id no database has had.
    pub fn alloc_db_id(&mut self) -> u32 {
        let id = self.next_db_id;
        self.next_db_id += 1;
        id
    }

    /// Creates database `name` with id `id` (allocated earlier, or read from the log).
    pub fn create_db_with_id(&mut self, id: u32, name: &str, dups: Duplicates) -> Result<()> {
        if self.names.contains_key(name) || self.dbs.get(id as usize).is_some_and(Option::is_some) {
            return Err(Error::Corrupt {
                page: None,
                detail: format!("database {name:?} (id {id}) is created twice"),
            });
        }
        let root = self.new_node(KIND_LEAF);
        self.next_db_id = self.next_db_id.max(id + 1);
        if self.dbs.len() <= id as usize {
            self.dbs.resize(id as usize + 1, None);
        }
        self.dbs[id as usize] = Some(DbState {
            name: name.to_string(),
            root,
            entries: 0,
            dups,
            catalog_dirty: false,
        });
        self.names.insert(name.to_string(), id);
        self.put(
            CATALOG,
            name.as_bytes(),
            &encode_catalog_record(id, root, 0, dups),
            false,
        )?;
        Ok(())
    }

    /// Removes database `name` and frees all its pages.
    pub fn remove_db(&mut self, name: &str) -> Result<()> {
        self.check_writable()?;
        let id = *self
            .names
            .get(name)
            .ok_or_else(|| Error::DbNotFound(name.to_string()))?;
        self.remove_db_with_id(id, name)
    }

    /// Removes database `name`, whose id must be `id`, and frees all its pages.
    pub fn remove_db_with_id(&mut self, id: u32, name: &str) -> Result<()> {
        if self.names.get(name) != Some(&id) {
            return Err(Error::Corrupt {
                page: None,
                detail: format!("database {name:?} (id {id}) is removed but does not exist"),
            });
        }
        let root = self.db(id)?.root;
        let mut pages = Vec::new();
        self.collect_pages(root, &mut pages)?;
        self.delete(CATALOG, name.as_bytes())?;
        for pid in pages {
            self.free_page(pid);
        }
        self.names.remove(name);
        self.dbs[id as usize] = None;
        Ok(())
    }

    /// Phase 1 of a checkpoint (steps 1-2 and the choice of pages to write), under the
    /// exclusive lock. From here on the pages it captures are the next checkpoint's: none is
    /// fresh any more, so writes relocate them instead of changing them in place, and
    /// [`Engine::retire_frame`] keeps their images until they are written. `None`: nothing
    /// changed since the durable checkpoint.
    pub(crate) fn begin_checkpoint(&mut self) -> Result<Option<CheckpointWork>> {
        self.check_writable()?;
        if !self.changed {
            return Ok(None);
        }
        // (1) Catalog records of changed databases. This may itself relocate catalog pages.
        let dirty: Vec<(u32, String, Vec<u8>)> = self
            .dbs
            .iter()
            .enumerate()
            .skip(1)
            .filter_map(|(id, d)| {
                d.as_ref().filter(|d| d.catalog_dirty).map(|d| {
                    let record = encode_catalog_record(id as u32, d.root, d.entries, d.dups);
                    (id as u32, d.name.clone(), record)
                })
            })
            .collect();
        for (id, name, record) in dirty {
            self.put(CATALOG, name.as_bytes(), &record, false)?;
            self.db_mut(id).catalog_dirty = false;
        }
        // (2) The free list: the durable one's pages are freed, then room for the new one is
        // taken from pages that were free in the durable checkpoint (or from the file's end).
        for pid in std::mem::take(&mut self.freelist_pages) {
            self.space.release(pid);
        }
        let per_page = (self.layout.page_size - HDR) / 8;
        let mut list_pages = Vec::new();
        while list_pages.len() < self.space.checkpoint_free_len().div_ceil(per_page) {
            list_pages.push(self.space.allocate());
        }
        let free = self.space.checkpoint_free_list();
        let mut chunks = free.chunks(per_page);
        let list_images = (0..list_pages.len())
            .map(|i| {
                let mut buf = vec![0u8; self.layout.page_size].into_boxed_slice();
                page::init(&mut buf, KIND_FREELIST);
                let chunk = chunks.next().unwrap_or(&[]);
                wr32(&mut buf, 32, chunk.len() as u32);
                for (j, f) in chunk.iter().enumerate() {
                    wr64(&mut buf, HDR + 8 * j, *f);
                }
                page::set_link(&mut buf, list_pages.get(i + 1).copied().unwrap_or(0));
                page::seal(&mut buf, list_pages[i], self.generation + 1);
                buf
            })
            .collect();
        let generation = self.generation + 1;
        let meta = Meta {
            page_size: self.layout.page_size as u32,
            next_db_id: self.next_db_id,
            generation,
            catalog_root: self.db(CATALOG)?.root,
            freelist_head: list_pages.first().copied().unwrap_or(0),
            freelist_pages: list_pages.len() as u64,
            page_count: self.space.page_count(),
            log_lsn: self.log_lsn,
            log_segment: self.log_segment,
            mode: self.mode.code(),
            log_chain: self.log_chain,
            env_id: self.env_id,
            keep_segment: self.log_keep_segment,
        };
        let reusable_when_durable = self.space.seal();
        self.epoch += 1;
        self.changed = false;
        self.checkpoint_in_flight = true;
        Ok(Some(CheckpointWork {
            pages: self.cache.dirty_pages(),
            file: self.file.clone(),
            page_size: self.layout.page_size,
            meta,
            list_pages,
            list_images,
            reusable_when_durable,
        }))
    }

    /// Phase 3, under the exclusive lock, once the new meta page is durable: the new
    /// checkpoint is the durable one.
    pub(crate) fn end_checkpoint(&mut self, work: CheckpointWork, pages_written: u64) {
        self.pages_written += pages_written;
        for &pid in &work.pages {
            // Still dirty: it holds the image just written (captured pages are never changed
            // in place), unless eviction wrote it first.
            if let Some(f) = self.cache.frame_mut(pid) {
                f.dirty = false;
            }
        }
        for pid in std::mem::take(&mut self.retired) {
            self.cache.discard(pid);
        }
        self.space
            .reusable(work.reusable_when_durable, work.meta.generation);
        self.generation = work.meta.generation;
        self.durable_meta = work.meta;
        self.freelist_pages = work.list_pages;
        self.checkpoint_in_flight = false;
        self.checkpoints += 1;
    }

    /// Whether the frame of `pid`, which is being relocated or freed, must stay resident
    /// until the checkpoint in flight has written it: it is dirty but not fresh, so that
    /// checkpoint captured it. Such frames are retired: dropped when the checkpoint ends.
    pub(crate) fn retire_frame(&mut self, pid: u64) -> bool {
        let keep = self.checkpoint_in_flight
            && !self.space.is_fresh(pid)
            && self.cache.frame_mut(pid).is_some_and(|f| f.dirty);
        if keep {
            self.retired.push(pid);
        }
        keep
    }
}

/// A checkpoint between its first and last phase: what it writes, without the engine's lock
/// (see the module doc).
pub(crate) struct CheckpointWork {
    /// Dirty pages when it began; written from the cache unless eviction wrote them first.
    pages: Vec<u64>,
    file: Arc<dyn StorageFile>,
    page_size: usize,
    meta: Meta,
    list_pages: Vec<u64>,
    list_images: Vec<Box<[u8]>>,
    /// Pages the durable checkpoint references but this one does not.
    reusable_when_durable: Vec<u64>,
}

/// Pages copied out of the cache per hold of the engine's lock while a checkpoint writes.
const CHECKPOINT_BATCH: usize = 64;

impl CheckpointWork {
    /// Phase 2 (steps 3-6): writes the captured pages and the free list, syncs, writes the
    /// meta page and syncs, taking the engine's shared lock (through `engine`) only to copy
    /// a batch of pages out of the cache and to extend the file. Returns the pages written;
    /// on failure, what failed.
    pub(crate) fn write<'a, E: std::ops::Deref<Target = Engine> + 'a>(
        &self,
        engine: impl Fn() -> E,
    ) -> std::result::Result<u64, (String, io::Error)> {
        let ps = self.page_size as u64;
        let mut written = self.list_pages.len() as u64;
        let generation = self.meta.generation;
        let write = |pid: u64, data: &mut [u8]| {
            page::seal(data, pid, generation);
            self.file
                .write_at(data, pid * ps)
                .map_err(|e| (format!("writing page {pid}"), e))
        };
        // (3) Captured pages, copied out a batch at a time into one buffer, then the free
        // list (sealed when the checkpoint began).
        let size = self.page_size;
        let mut buf = vec![0u8; CHECKPOINT_BATCH * size];
        let mut copied = Vec::with_capacity(CHECKPOINT_BATCH);
        for pids in self.pages.chunks(CHECKPOINT_BATCH) {
            copied.clear();
            {
                let e = engine();
                for &pid in pids {
                    // Not resident, or clean: eviction has written it.
                    if let Some(data) = e.cache.dirty_image(pid) {
                        let at = copied.len() * size;
                        buf[at..at + size].copy_from_slice(data);
                        copied.push(pid);
                    }
                }
            }
            for (i, &pid) in copied.iter().enumerate() {
                write(pid, &mut buf[i * size..(i + 1) * size])?;
            }
            written += copied.len() as u64;
        }
        for (&pid, image) in self.list_pages.iter().zip(&self.list_images) {
            self.file
                .write_at(image, pid * ps)
                .map_err(|e| (format!("writing free-list page {pid}"), e))?;
        }
        // Free pages at the tail may never have been written: the file must still cover
        // every page the meta counts. Under the lock, so that no eviction extends it meanwhile.
        let extended = {
            let _e = engine();
            let want = self.meta.page_count * ps;
            let len = self
                .file
                .len()
                .map_err(|e| ("reading the page file size".to_string(), e))?;
            if len < want {
                self.file
                    .set_len(want)
                    .map_err(|e| ("extending the page file".to_string(), e))?;
            }
            len < want
        };
        // (4) Everything the new meta will reference is durable before the meta is written;
        // a length set without writing is durable only through `sync_all`.
        let sync = if extended {
            self.file.sync_all()
        } else {
            self.file.sync_data()
        };
        sync.map_err(|e| ("syncing the page file".to_string(), e))?;
        // (5), (6) The meta page flip.
        let slot = generation % 2;
        self.file
            .write_at(&self.meta.encode(), slot * ps)
            .map_err(|e| ("writing the meta page".to_string(), e))?;
        self.file
            .sync_data()
            .map_err(|e| ("syncing the meta page".to_string(), e))?;
        Ok(written)
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
