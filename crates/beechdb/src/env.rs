//! The public handles: [`Env`] (an environment directory) and [`Db`] (a named database).
//!
//! Owns: the lock discipline. Reads run under the shared lock and never wait for each other;
//! a read that meets a non-resident page retries under the exclusive lock, which loads it.
//! Writes run under the exclusive lock. Eviction runs after an exclusive operation, so no
//! page disappears while an operation holds it. May call: `engine`, `btree`, `verify`,
//! `stats`.

use crate::btree::cursor::KeyRange;
use crate::btree::{Cursor, Iter};
use crate::config::{Config, Duplicates, Durability, Isolation, Mode};
use crate::dups;
use crate::engine::{Engine, Need, NeedResult, DB_FILE};
use crate::error::{Error, Result};
use crate::files::Listing;
use crate::stats::{DbStat, EnvStat, NodeSummary};
use crate::storage::{OsStorage, Storage};
use crate::sync::ReadMostlyLock;
use crate::txn::{Txn, TxnManager};
use crate::verify::VerifyReport;
use crate::wal::reader::LogReader;
use crate::wal::{self, segment_name, Record, Wal};
use parking_lot::Mutex;
use std::any::Any;
use std::io;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

pub(crate) struct Shared {
    pub(crate) engine: ReadMostlyLock<Engine>,
    /// Bumped by every write: cursors use it to know their copied entries are current.
    pub(crate) data_version: AtomicU64,
    closed: AtomicBool,
    pub(crate) storage: Arc<dyn Storage>,
    lock: Mutex<Option<Box<dyn Any + Send + Sync>>>,
    /// Held by checkpoints and by `verify`, which reads the durable checkpoint from disk.
    pub(crate) checkpoint_mutex: Mutex<()>,
    /// Transactional Data Store state; `None` in Data Store mode.
    pub(crate) tx: Option<Tx>,
    /// Woken when a spilled transaction's commit has been applied (or failed): checkpoints
    /// and cursors wait for that.
    pub(crate) bulk_done: crate::sync::Broadcast,
    /// Opened with [`Config::read_only`].
    pub(crate) read_only: bool,
    /// Takes over commits when the environment is a member of a replication group; the
    /// flag says whether one is installed, so that a commit of a plain environment reads
    /// one atomic and takes no lock.
    pub(crate) replicator: parking_lot::RwLock<Option<Arc<dyn crate::Replicator>>>,
    pub(crate) replicated: AtomicBool,
}

/// Loads a reader tries without the exclusive lock before it takes it.
const READ_ATTEMPTS: usize = 64;

/// How committers and `close` reach the background checkpointer.
#[derive(Default)]
pub(crate) struct CheckpointSignal {
    state: Mutex<BackgroundWork>,
    wake: parking_lot::Condvar,
}

#[derive(Default)]
struct BackgroundWork {
    checkpoint: bool,
    /// The log wants background work (its next segment, a sync).
    log_work: bool,
    stop: bool,
}

impl CheckpointSignal {
    fn request(&self, what: impl FnOnce(&mut BackgroundWork) -> &mut bool) {
        let mut st = self.state.lock();
        let flag = what(&mut st);
        if !*flag {
            *flag = true;
            self.wake.notify_one();
        }
    }
}

/// The background checkpointer: runs a checkpoint when asked (log volume) or when
/// `interval` has passed with commits since the last one, and does the log's background
/// work (its next segment, syncs) when asked. While it waits it holds only the signal and a weak reference, so it
/// never keeps an environment (or its lock) alive; `close` and drop stop it.
fn checkpointer(
    shared: std::sync::Weak<Shared>,
    signal: Arc<CheckpointSignal>,
    interval: std::time::Duration,
) {
    loop {
        let (log_work, log_only) = {
            let mut st = signal.state.lock();
            if !st.checkpoint && !st.log_work && !st.stop {
                signal.wake.wait_for(&mut st, interval);
            }
            if st.stop {
                return;
            }
            let wanted = (st.log_work, st.log_work && !st.checkpoint);
            (st.checkpoint, st.log_work) = (false, false);
            wanted
        };
        let Some(s) = shared.upgrade() else { return };
        let Some(tx) = &s.tx else { return };
        if let (true, Some(w)) = (log_work, &tx.wal) {
            // Without a spare the commit that fills the segment creates the next one itself;
            // a failed sync poisons the log, and the next commit reports it.
            let _ = w.background_work();
        }
        if log_only {
            continue;
        }
        let behind = s.engine.read().commit_lsn > tx.last_checkpoint_lsn.load(Ordering::Relaxed);
        if behind && !s.closed.load(Ordering::Acquire) {
            // Errors poison the environment and surface on the next write.
            let _ = s.checkpoint();
        }
    }
}

/// What a transactional environment adds.
pub(crate) struct Tx {
    /// `None` with an in-memory log.
    pub wal: Option<Wal>,
    pub txns: TxnManager,
    pub durability: Durability,
    pub isolation: Isolation,
    pub lock_timeout: std::time::Duration,
    pub txn_memory: usize,
    keep_logs: bool,
    pub checkpoint_log_bytes: u64,
    /// The in-memory log's next LSN.
    pub inmem_lsn: AtomicU64,
    pub last_checkpoint_lsn: AtomicU64,
    /// Wakes the background checkpointer early (log volume reached, or closing).
    checkpoint_signal: Arc<CheckpointSignal>,
    pub recovered_commits: u64,
}

impl Tx {
    pub(crate) fn request_checkpoint(&self) {
        self.checkpoint_signal.request(|w| &mut w.checkpoint);
    }

    pub(crate) fn request_log_work(&self) {
        self.checkpoint_signal.request(|w| &mut w.log_work);
    }
}

impl Shared {
    pub(crate) fn tx(&self) -> Result<&Tx> {
        self.tx.as_ref().ok_or_else(|| {
            Error::InvalidArgument(
                "transactions need an environment opened with Config::transactional(true)".into(),
            )
        })
    }

    pub(crate) fn check_sizes(&self, key: &[u8], value: &[u8]) -> Result<()> {
        crate::btree::check_sizes(key, value)
    }

    pub(crate) fn live(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// [`Error::ReadOnly`] in a read-only environment, before a write starts.
    pub(crate) fn writable(&self) -> Result<()> {
        if self.read_only {
            Err(Error::ReadOnly)
        } else {
            Ok(())
        }
    }

    /// Runs `op` under the shared lock. A page it needs that is not in memory is read with
    /// no lock held and added to the cache under the shared lock (see `cache`), then `op`
    /// runs again; readers take the exclusive lock only to evict clean pages when loaded
    /// ones overfill the cache (no I/O), or to load after repeated conflicts with writers
    /// (both counted).
    /// Returns the result and the data version it saw.
    pub(crate) fn read<T>(&self, mut op: impl FnMut(&Engine) -> NeedResult<T>) -> Result<(T, u64)> {
        self.live()?;
        for _ in 0..READ_ATTEMPTS {
            let miss = {
                let e = self.engine.read();
                match op(&e) {
                    Ok(v) => return Ok((v, self.data_version.load(Ordering::Acquire))),
                    Err(Need::Fail(err)) => return Err(err),
                    Err(Need::Page(pid)) => e.miss(pid),
                }
            };
            let loaded = miss.load();
            let overfull = {
                let e = self.engine.read();
                match loaded {
                    Ok(image) => {
                        e.cache.add_loaded(miss.pid, image, miss.epoch);
                    }
                    // Unless the page changed meaning meanwhile (freed, reused), a real error.
                    Err(err) if e.cache.epoch(miss.pid) == miss.epoch => return Err(err),
                    Err(_) => {}
                }
                e.cache.len() > e.cache.capacity() + e.cache.capacity() / 4 + 64
            };
            if overfull {
                // A brief hold with no I/O: clean pages only, down to 7/8 of the budget.
                let mut e = self.engine.write();
                e.cache.reader_evictions.fetch_add(1, Ordering::Relaxed);
                e.shrink_clean();
            }
        }
        // Writers kept changing what the reader needed: load under the exclusive lock.
        let mut e = self.engine.write();
        e.cache.reads_locked.fetch_add(1, Ordering::Relaxed);
        loop {
            match op(&e) {
                Ok(v) => {
                    let version = self.data_version.load(Ordering::Acquire);
                    e.shrink_cache();
                    return Ok((v, version));
                }
                Err(Need::Fail(err)) => return Err(err),
                Err(Need::Page(pid)) => e.load(pid)?,
            }
        }
    }

    /// Runs a modifying `op` under the exclusive lock.
    pub(crate) fn write<T>(&self, op: impl FnOnce(&mut Engine) -> Result<T>) -> Result<T> {
        self.live()?;
        let mut e = self.engine.write();
        e.check_writable()?;
        let r = op(&mut e);
        self.data_version.fetch_add(1, Ordering::Release);
        e.shrink_cache();
        r
    }

    /// A checkpoint of everything committed so far. The exclusive lock is held only to begin
    /// and to end it: pages are written and synced while reads and commits go on. In a
    /// transactional environment, log segments it makes unnecessary are then removed (or
    /// kept for archiving).
    pub(crate) fn checkpoint(&self) -> Result<()> {
        let _ckpt = self.checkpoint_mutex.lock();
        let (work, lsn) = {
            // Holding the exclusive lock, no commit is between its log append and its apply;
            // nor may a spilled transaction's commit be (its batches are applied before its
            // record is logged).
            let mut e = loop {
                let seen = self.bulk_done.seq();
                let e = self.engine.write();
                if !e.undo.iter().any(|u| u.lsn().is_none()) || e.poisoned.is_some() {
                    break e;
                }
                drop(e);
                self.bulk_done.wait(seen, std::time::Duration::ZERO);
            };
            let lsn = match &self.tx {
                None => None,
                Some(tx) => {
                    let (lsn, chain, segment) = match &tx.wal {
                        Some(w) => {
                            if e.changed || w.end() != e.log_lsn {
                                // Marks, for readers of the log, where this checkpoint begins.
                                let generation = e.generation + 1;
                                w.append(&mut w.arrive(), &[Record::Checkpoint { generation }])?;
                            }
                            w.position()
                        }
                        None => (tx.inmem_lsn.load(Ordering::Relaxed), 0, 0),
                    };
                    let keep = match &tx.wal {
                        Some(w) => Some(w.needed_segment(lsn)).filter(|&k| k != segment),
                        None => None,
                    };
                    let keep = keep.unwrap_or(0);
                    if e.log_lsn != lsn || e.log_segment != segment || e.log_keep_segment != keep {
                        e.changed = true;
                    }
                    (e.log_lsn, e.log_segment, e.log_chain) = (lsn, segment, chain);
                    e.log_keep_segment = keep;
                    Some(lsn)
                }
            };
            (e.begin_checkpoint()?, lsn)
        };
        // The log up to the checkpoint's position, and the segment holding it, exist before
        // the meta page naming them is written; no I/O under the engine's lock.
        if let (Some(w), Some(lsn)) = (self.tx.as_ref().and_then(|t| t.wal.as_ref()), lsn) {
            if let Err(err) = w.flush_to(lsn) {
                let context = "writing the log before a checkpoint".to_string();
                return Err(self.engine.write().poison_with(context, err));
            }
        }
        if let Some(work) = work {
            let written = work.write(|| self.engine.read());
            let mut e = self.engine.write();
            match written {
                Ok(pages) => e.end_checkpoint(work, pages),
                Err((context, err)) => return Err(e.poison(context, err)),
            }
        }
        let (Some(tx), Some(lsn)) = (&self.tx, lsn) else {
            return Ok(());
        };
        tx.last_checkpoint_lsn.store(lsn, Ordering::Relaxed);
        if let Some(w) = &tx.wal {
            w.release_before(lsn, tx.keep_logs)?;
        }
        Ok(())
    }
}

impl Shared {
    fn stop_checkpointer(&self) {
        if let Some(tx) = &self.tx {
            tx.checkpoint_signal.state.lock().stop = true;
            tx.checkpoint_signal.wake.notify_all();
        }
    }
}

impl Drop for Shared {
    /// The last handle of an environment not closed: no checkpoint and no fsync (closing is
    /// explicit, and reports errors), as a process that exits without closing. The
    /// background thread stops; the log buffer is handed to the operating system, so that
    /// NOSYNC commits survive as they would the process's exit; changes of a Data Store
    /// environment since its last checkpoint are lost, as at a crash. Opening again
    /// recovers, as after a crash.
    fn drop(&mut self) {
        self.stop_checkpointer();
        if !self.closed.load(Ordering::Acquire) {
            if let Some(w) = self.tx.as_ref().and_then(|t| t.wal.as_ref()) {
                let _ = w.flush_to(w.end());
                w.stop_preparing();
            }
        }
    }
}

/// An environment: one directory holding any number of named databases.
///
/// Handles are cheap to clone and may be shared between threads. Close it with
/// [`Env::close`], which checkpoints and reports errors. Dropping the last handle without
/// closing does no checkpoint and no fsync: it is as if the process had exited, and the next
/// open recovers (transactional environments lose nothing committed durably; a Data Store
/// environment keeps what its last [`Env::sync`] saved).
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let env = beechdb::Env::open(dir.path(), beechdb::Config::new())?;
/// let db = env.open_or_create_db("fruit")?;
/// db.put(b"apple", b"red")?;
/// db.put(b"banana", b"yellow")?;
/// assert_eq!(db.get(b"apple")?, Some(b"red".to_vec()));
/// let keys: Vec<Vec<u8>> = db.iter().map(|kv| kv.map(|(k, _)| k)).collect::<Result<_, _>>()?;
/// assert_eq!(keys, vec![b"apple".to_vec(), b"banana".to_vec()]);
/// env.sync()?; // durable from here on
/// env.close()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Env {
    pub(crate) shared: Arc<Shared>,
}

impl Env {
    /// Opens (or, if `config` allows, creates) the environment in directory `path`.
    /// Fails with [`Error::Locked`] if another handle or process has it open. With creation
    /// off, a missing directory or environment is an error and nothing is created.
    pub fn open(path: impl AsRef<Path>, config: Config) -> Result<Env> {
        let path = path.as_ref();
        let storage = if config.create_value() {
            OsStorage::new(path)
                .map_err(|e| Error::io(format!("creating directory {}", path.display()), e))?
        } else {
            crate::files::existing_dir(path)?
        };
        Env::open_with_storage(Arc::new(storage), config)
    }

    /// Opens an environment on any [`Storage`] implementation.
    ///
    /// Opening makes the environment's state durable before it acknowledges anything: the
    /// directory is synced (the page file's creation may not have been), the checkpoint it
    /// starts from is written again and synced, and when the log held commits after that
    /// checkpoint, they are replayed and a checkpoint is taken, so that nothing an earlier
    /// process left unsynced (or whose sync failed) is built upon. Files an interrupted step
    /// left behind, and log segments the durable checkpoint no longer needs (unless
    /// [`Config::keep_logs`]), are removed.
    pub fn open_with_storage(storage: Arc<dyn Storage>, config: Config) -> Result<Env> {
        config.validate()?;
        if !config.read_only {
            return Env::open_inner(storage, config);
        }
        // Beside a writer, the log's tail or a page may be caught mid-change (a record half
        // written, a page reused after a checkpoint): a few more tries read a newer state.
        let mut tries = 0;
        loop {
            match Env::open_inner(storage.clone(), config.clone()) {
                Err(Error::Corrupt { .. } | Error::Io { .. }) if tries < 4 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20 << tries));
                }
                r => return r,
            }
        }
    }

    fn open_inner(storage: Arc<dyn Storage>, config: Config) -> Result<Env> {
        let read_only = config.read_only;
        let st = storage.as_ref();
        let exists = st
            .exists(DB_FILE)
            .map_err(|e| Error::io("looking for the page file", e))?;
        if !exists {
            // Checked before the lock is taken, so that a refusal creates nothing, not even
            // the lock file; checked again under the lock.
            let listing = Listing::read(st)?;
            if let Some(e) = listing.no_environment(st, config.create_value()) {
                return Err(e);
            }
        }
        let guard = match st.lock() {
            // A read-only environment takes no lock: it writes nothing, and may be opened
            // beside a process that holds the lock.
            _ if read_only => None,
            Ok(g) => Some(g),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(Error::Locked {
                    path: st.describe(),
                })
            }
            Err(e) => return Err(Error::io("taking the environment lock", e)),
        };
        let listing = Listing::read(st)?;
        if !listing.page_file {
            if let Some(e) = listing.no_environment(st, config.create_value()) {
                return Err(e);
            }
        }
        let mut engine = Engine::open(st, &config, !listing.page_file)?;
        let mut wal = None;
        let mut recovered_commits = 0;
        if engine.mode.has_log_files() {
            // Recovery: the checkpoint plus every commit logged after it. The log is judged
            // before anything is written: damage leaves every file as it was.
            let first_needed = engine.durable_meta.first_needed_segment().max(1);
            let from = wal::LogStart {
                lsn: engine.log_lsn,
                chain: engine.log_chain,
                segment: engine.log_segment,
            };
            let present = listing
                .segments
                .range(engine.log_segment.max(1)..)
                .copied()
                .collect();
            let rec = wal::recover(
                st,
                engine.env_id,
                from,
                &present,
                config.log_segment_size,
                read_only,
            )?;
            if !read_only {
                engine.make_checkpoint_durable()?;
            }
            if !config.keep_logs && !read_only {
                // No directory sync: a segment that comes back is removed at the next open.
                for name in listing
                    .segments
                    .range(..first_needed)
                    .map(|&n| segment_name(n))
                {
                    st.remove(&name)
                        .map_err(|e| Error::io(format!("removing {name}"), e))?;
                }
            }
            // Segments before the checkpoint's hold writes of transactions that spilled them
            // ahead and committed after it.
            let kept = listing
                .segments
                .range(first_needed..engine.log_segment.max(1));
            let live: Vec<u64> = kept
                .copied()
                .chain(rec.segments.iter().map(|s| s.no))
                .collect();
            let mut reader = LogReader::new(
                st,
                engine.env_id,
                live,
                (from.lsn, Some(from.chain)),
                rec.end,
            )?;
            let total = rec.end.saturating_sub(from.lsn);
            while let Some(c) = reader.next_commit()? {
                reader.for_each_op(&c, |op| engine.apply_op(op, c.end, false))?;
                engine.commit_lsn = c.end;
                engine.shrink_cache();
                recovered_commits += 1;
                if let Some(p) = &config.recovery_progress {
                    if recovered_commits % 1024 == 0 {
                        (p.0)(c.end.saturating_sub(from.lsn), total);
                    }
                }
            }
            engine.commit_lsn = rec.end;
            wal = (!read_only).then(|| {
                Wal::new(
                    storage.clone(),
                    config.log_segment_size,
                    engine.env_id,
                    rec.segments,
                    (rec.end, rec.chain),
                    from.lsn,
                )
            });
        } else if let Some(&n) = listing.segments.iter().next() {
            return Err(Error::Corrupt {
                page: None,
                detail: format!(
                    "the environment at {} was created in {}, which keeps no log, yet it holds \
                     log segment {}; nothing was changed",
                    st.describe(),
                    engine.mode.config_words(),
                    segment_name(n)
                ),
            });
        } else if !read_only {
            engine.make_checkpoint_durable()?;
        }
        // Leftovers are harmless (each is rebuilt from nothing when next needed): removing
        // them is tidying, and a failure to remove one is ignored.
        for name in listing.leftovers.iter().filter(|_| !read_only) {
            let _ = st.remove(name);
        }
        let replayed = engine.commit_lsn != engine.log_lsn;
        let start_lsn = engine.commit_lsn;
        let tx = (engine.mode != Mode::DataStore).then(|| Tx {
            wal,
            txns: TxnManager::default(),
            durability: config.durability,
            isolation: config.isolation,
            lock_timeout: config.lock_timeout,
            txn_memory: config.txn_memory,
            keep_logs: config.keep_logs,
            checkpoint_log_bytes: config.checkpoint_log_bytes,
            inmem_lsn: AtomicU64::new(start_lsn),
            last_checkpoint_lsn: AtomicU64::new(engine.log_lsn),
            checkpoint_signal: Arc::new(CheckpointSignal::default()),
            recovered_commits,
        });
        let env = Env {
            shared: Arc::new(Shared {
                engine: ReadMostlyLock::new(engine),
                data_version: AtomicU64::new(0),
                closed: AtomicBool::new(false),
                storage: storage.clone(),
                lock: Mutex::new(guard),
                checkpoint_mutex: Mutex::new(()),
                tx,
                bulk_done: crate::sync::Broadcast::new(),
                read_only,
                replicator: parking_lot::RwLock::new(None),
                replicated: AtomicBool::new(false),
            }),
        };
        if replayed && !read_only {
            // The replayed log was read through the page cache: it may never have been
            // durable. A checkpoint makes what was replayed durable before anything new is
            // logged after it.
            env.shared.checkpoint()?;
        }
        if let Some(tx) = env.shared.tx.as_ref().filter(|_| !read_only) {
            let (weak, signal) = (Arc::downgrade(&env.shared), tx.checkpoint_signal.clone());
            let interval = config.checkpoint_interval;
            std::thread::Builder::new()
                .name("beechdb-checkpointer".into())
                .spawn(move || checkpointer(weak, signal, interval))
                .map_err(|e| Error::io("starting the checkpoint thread", e))?;
        }
        Ok(env)
    }

    #[cfg(test)]
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Pins the durable checkpoint: its pages stay as they are while the returned handle
    /// lives, to be read page by page or copied, whatever commits and checkpoints follow.
    /// Call [`Env::sync`] first to include every change so far.
    pub fn pin_checkpoint(&self) -> Result<crate::PinnedCheckpoint> {
        crate::PinnedCheckpoint::pin(self.shared.clone())
    }

    /// A hot backup into directory `dir` (created if missing, holding no environment):
    /// a checkpoint of everything committed so far, copied while work goes on, as a new
    /// environment that opens on its own (Berkeley DB's `db_hotbackup`).
    pub fn backup(&self, dir: impl AsRef<Path>) -> Result<()> {
        let dir = dir.as_ref();
        let storage = OsStorage::new(dir)
            .map_err(|e| Error::io(format!("creating directory {}", dir.display()), e))?;
        self.sync()?;
        self.pin_checkpoint()?.copy_to(&storage)
    }

    /// The mode the environment was created in (and is open in).
    pub fn mode(&self) -> Mode {
        self.shared.engine.read().mode
    }

    /// Begins a transaction with the environment's default isolation.
    pub fn begin_txn(&self) -> Result<Txn> {
        self.shared.live()?;
        let isolation = self.shared.tx()?.isolation;
        Txn::begin(self.shared.clone(), isolation)
    }

    /// Begins a transaction with isolation `isolation`.
    pub fn begin_txn_with(&self, isolation: Isolation) -> Result<Txn> {
        self.shared.live()?;
        Txn::begin(self.shared.clone(), isolation)
    }

    /// Log segments that the durable checkpoint no longer needs, kept (with
    /// [`Config::keep_logs`], or by another program) for archiving, oldest first, as in
    /// Berkeley DB's `db_archive`. Removing them is safe: recovery never reads them.
    pub fn archive_logs(&self) -> Result<Vec<String>> {
        self.shared.live()?;
        self.shared.tx()?;
        // Read before the listing: a checkpoint completing meanwhile only makes more
        // segments unnecessary.
        let durable = self
            .shared
            .engine
            .read()
            .durable_meta
            .first_needed_segment();
        let listing = Listing::read(self.shared.storage.as_ref())?;
        Ok(listing
            .segments
            .range(..durable)
            .map(|&n| segment_name(n))
            .collect())
    }

    /// Commits replayed from the log when this environment was opened.
    pub fn recovered_commits(&self) -> u64 {
        self.shared.tx.as_ref().map_or(0, |t| t.recovered_commits)
    }

    fn handle(&self, id: u32, name: &str) -> Db {
        let dups = self
            .shared
            .engine
            .read()
            .db(id)
            .map_or(Duplicates::None, |d| d.dups);
        Db::new(self.shared.clone(), id, name, dups)
    }

    /// Opens an existing database; [`Error::DbNotFound`] if there is none of that name.
    pub fn open_db(&self, name: &str) -> Result<Db> {
        self.shared.live()?;
        let id = self.shared.engine.read().visible_db(name);
        id.map(|id| self.handle(id, name))
            .ok_or_else(|| Error::DbNotFound(name.to_string()))
    }

    /// Creates a database; [`Error::DbExists`] if the name is taken. Names are 1 to 255
    /// bytes of UTF-8. In a transactional environment this is a transaction of its own.
    pub fn create_db(&self, name: &str) -> Result<Db> {
        self.create_db_with(name, Duplicates::None)
    }

    /// Creates a database that holds several values per key when `dups` says so
    /// (Berkeley DB's `DB_DUPSORT`, `DB_DUP`): see [`Db`] for how its calls behave.
    pub fn create_db_with(&self, name: &str, dups: Duplicates) -> Result<Db> {
        check_name(name)?;
        if self.shared.tx.is_some() {
            let t = self.begin_txn_with(Isolation::ReadCommitted)?;
            let db = t.create_db_with(name, dups)?;
            t.commit()?;
            return Ok(db);
        }
        let id = self.shared.write(|e| e.create_db(name, dups))?;
        Ok(self.handle(id, name))
    }

    /// Opens the database, creating it if missing.
    pub fn open_or_create_db(&self, name: &str) -> Result<Db> {
        if let Ok(db) = self.open_db(name) {
            return Ok(db);
        }
        match self.create_db(name) {
            Err(Error::DbExists(_)) => self.open_db(name),
            r => r,
        }
    }

    /// Removes a database and frees its pages. Its handles fail with [`Error::DbRemoved`]. In a
    /// transactional environment this is a transaction of its own.
    pub fn remove_db(&self, name: &str) -> Result<()> {
        if self.shared.tx.is_some() {
            let t = self.begin_txn_with(Isolation::ReadCommitted)?;
            t.remove_db(name)?;
            return t.commit().map(drop);
        }
        self.shared.write(|e| e.remove_db(name))
    }

    /// The names of all databases, sorted.
    pub fn db_names(&self) -> Result<Vec<String>> {
        self.shared.live()?;
        let e = self.shared.engine.read();
        Ok(e.names
            .iter()
            .filter(|(_, id)| !e.hidden.contains(id))
            .map(|(n, _)| n.clone())
            .collect())
    }

    /// Makes every change so far durable (a checkpoint). A crash at any instant leaves the
    /// environment as of the last completed `sync`.
    pub fn sync(&self) -> Result<()> {
        self.shared.live()?;
        self.shared.writable()?;
        self.shared.checkpoint()
    }

    /// Makes everything durable and closes the environment: every handle to it, including
    /// database handles and cursors, fails with [`Error::Closed`] afterwards, and the
    /// directory may be opened again.
    pub fn close(self) -> Result<()> {
        self.shared.live()?;
        self.shared.stop_checkpointer();
        let r = if self.shared.read_only {
            Ok(())
        } else {
            self.shared.checkpoint()
        };
        self.shared.closed.store(true, Ordering::Release);
        if let Some(w) = self.shared.tx.as_ref().and_then(|tx| tx.wal.as_ref()) {
            // No file of this environment may change once its directory is released.
            w.stop_preparing();
        }
        self.shared.lock.lock().take();
        r
    }

    /// Checks the durable checkpoint on disk: every page's checksum and structure, key
    /// order across the tree, overflow chains, entry counts, and that every page is used
    /// exactly once or free. Call [`Env::sync`] first to include recent changes.
    pub fn verify(&self) -> Result<VerifyReport> {
        self.shared.live()?;
        let _ckpt = self.shared.checkpoint_mutex.lock();
        let warnings = self.shared.engine.read().meta_warnings.clone();
        let mut report = crate::verify::verify_storage(self.shared.storage.as_ref())?;
        for w in warnings {
            report.push_meta_warning(w);
        }
        Ok(report)
    }

    /// Environment statistics: cache, file and free space; transactions, locks and log
    /// in a transactional environment.
    pub fn stat(&self) -> Result<EnvStat> {
        self.shared.live()?;
        let txn = self.shared.tx.as_ref().map(|tx| crate::stats::TxnStat {
            txns: tx.txns.stats.snapshot(),
            locks: tx.txns.locks.stats.snapshot(),
            log: tx.wal.as_ref().map(|w| w.stats.snapshot()),
            recovered_commits: tx.recovered_commits,
        });
        let e = self.shared.engine.read();
        Ok(EnvStat::collect(&e, txn))
    }

    /// The durability a commit gets unless it asks for another (`Config::durability`);
    /// `None` in a Data Store environment (no transactions) or with an in-memory log (no
    /// commit outlives the process).
    pub fn durability(&self) -> Option<Durability> {
        let tx = self.shared.tx().ok()?;
        tx.wal.as_ref().map(|_| tx.durability)
    }

    /// The page size of this environment.
    pub fn page_size(&self) -> usize {
        self.shared.engine.read().layout.page_size
    }

    /// The largest key accepted: [`crate::MAX_KEY_LEN`], whatever the page size. Keys
    /// longer than a quarter page keep their first bytes in the tree and the rest in
    /// overflow pages (as Berkeley DB's overflow keys): they work as any other key, and a
    /// lookup reads the rest only when the first bytes do not decide.
    pub fn max_key_len(&self) -> usize {
        crate::MAX_KEY_LEN
    }
}

pub(crate) fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 255 {
        return Err(Error::InvalidArgument(format!(
            "database name must be 1 to 255 bytes, not {}",
            name.len()
        )));
    }
    Ok(())
}

/// A handle to one named database. Cheap to clone; may be shared between threads.
///
/// In a database with duplicates ([`Env::create_db_with`]) each key/value pair is an entry:
/// `put` adds a pair (a sorted database refuses a pair it holds with [`Error::KeyExists`];
/// an unsorted one appends), `insert` adds one only if the key has none, `get` returns the
/// key's first value, `delete` removes all of the key's pairs and [`Db::delete_pair`] one,
/// iterators and cursors step through every pair in order (see [`Cursor::next_dup`]), and
/// `len` counts pairs. A sorted database keeps each value inside its entry's key, so its
/// values are limited to [`crate::MAX_KEY_LEN`] bytes, less the key.
#[derive(Clone)]
pub struct Db {
    shared: Arc<Shared>,
    id: u32,
    name: Arc<str>,
    dups: Duplicates,
}

impl Db {
    pub(crate) fn new(shared: Arc<Shared>, id: u32, name: &str, dups: Duplicates) -> Db {
        Db {
            shared,
            id,
            name: name.into(),
            dups,
        }
    }

    /// Whether, and how, the database holds several values per key.
    pub fn duplicates(&self) -> Duplicates {
        self.dups
    }

    pub(crate) fn id(&self) -> u32 {
        self.id
    }

    /// [`Error::Closed`] once the environment is closed.
    pub(crate) fn live(&self) -> Result<()> {
        self.shared.live()
    }

    pub(crate) fn data_version(&self) -> u64 {
        self.shared.data_version.load(Ordering::Acquire)
    }

    pub(crate) fn read<T>(&self, op: impl FnMut(&Engine) -> NeedResult<T>) -> Result<(T, u64)> {
        self.shared.read(op)
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The value stored under `key`, if any (with duplicates, the first).
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_with(key, |v| v.to_vec())
    }

    /// Calls `f` with the value stored under `key` without copying it out, if present.
    pub fn get_with<R>(&self, key: &[u8], f: impl FnOnce(&[u8]) -> R) -> Result<Option<R>> {
        if self.dups != Duplicates::None {
            return Ok(self.first_pair(key)?.map(|v| f(&v)));
        }
        let mut f = Some(f);
        let (r, _) = self.shared.read(|e| {
            if !e.undo.is_empty() {
                // A spilled transaction's commit may be being applied: what it applied is not
                // visible yet.
                if let Some(before) = e.before_change(self.id, key, None)? {
                    return Ok(before.map(|v| (f.take().expect("called once"))(&v)));
                }
            }
            match e.locate(self.id, key)? {
                None => Ok(None),
                Some((leaf, idx)) => e
                    .with_value(leaf, idx, |v| (f.take().expect("called once"))(v))
                    .map(Some),
            }
        })?;
        Ok(r)
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: &[u8]) -> Result<bool> {
        Ok(self.get_with(key, |_| ())?.is_some())
    }

    /// Runs `op` as [`Shared::read`] does, first waiting while a spilled transaction's commit
    /// is being applied to this database: for readers of the latest data that cannot look
    /// past what it has applied (cursors).
    pub(crate) fn read_unless_applying<T>(
        &self,
        mut op: impl FnMut(&Engine) -> NeedResult<T>,
    ) -> Result<(T, u64)> {
        loop {
            let seen = self.shared.bulk_done.seq();
            let (r, version) = self.shared.read(|e| {
                if e.applying_to(self.id) {
                    return Ok(None);
                }
                op(e).map(Some)
            })?;
            match r {
                Some(r) => return Ok((r, version)),
                None => self.shared.bulk_done.wait(seen, std::time::Duration::ZERO),
            }
        }
    }

    pub(crate) fn same_env(&self, shared: &Arc<Shared>) -> bool {
        Arc::ptr_eq(&self.shared, shared)
    }

    /// Stores `value` under `key`, replacing any previous value (with duplicates: adds the
    /// pair). In a transactional environment this is a transaction of its own, committed
    /// with the default durability.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.store(key, value, false)
    }

    /// Stores `value` under `key` only if the key is absent; [`Error::KeyExists`] otherwise.
    pub fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.store(key, value, true)
    }

    #[inline]
    fn store(&self, key: &[u8], value: &[u8], no_overwrite: bool) -> Result<()> {
        if self.dups == Duplicates::None {
            return self.store_entry(key, value, no_overwrite);
        }
        self.store_pair(key, value, no_overwrite)
    }

    #[cold]
    fn store_pair(&self, key: &[u8], value: &[u8], no_overwrite: bool) -> Result<()> {
        if self.shared.tx.is_some() {
            // One transaction: the check and the write see the same pairs, and `Txn::put`
            // keeps two writers from taking the same entry.
            let t = Txn::begin(self.shared.clone(), crate::Isolation::ReadCommitted)?;
            if no_overwrite && t.get(self, key)?.is_some() {
                return Err(Error::KeyExists);
            }
            t.put(self, key, value)?;
            return t.commit().map(drop);
        }
        if no_overwrite && self.first_pair(key)?.is_some() {
            return Err(Error::KeyExists);
        }
        if self.dups == Duplicates::Sorted {
            return self.store_entry(&dups::sorted_pair(key, value), b"", true);
        }
        // Unsorted: after the key's last pair. A writer racing for the same number makes
        // this one take the next.
        loop {
            let (lo, hi) = dups::pairs_of(key);
            let last = Iter::entries(
                self.clone(),
                (Bound::Included(lo), Bound::Excluded(hi)),
                true,
            )
            .next()
            .transpose()?;
            let c = dups::unsorted_pair(key, dups::next_sequence(last.as_ref())?);
            match self.store_entry(&c, value, true) {
                Err(Error::KeyExists) => continue,
                r => return r,
            }
        }
    }

    #[inline]
    fn store_entry(&self, key: &[u8], value: &[u8], no_overwrite: bool) -> Result<()> {
        if self.shared.tx.is_some() {
            self.shared
                .autocommit(self.id, key, Some(value), no_overwrite)
                .map(drop)
        } else {
            self.shared
                .write(|e| e.put(self.id, key, value, no_overwrite))
                .map(drop)
        }
    }

    /// Removes `key` (with duplicates: all its pairs, in one transaction in a
    /// transactional environment); returns whether it was present.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        if self.dups == Duplicates::None {
            return self.delete_entry(key);
        }
        self.delete_pairs(key)
    }

    #[cold]
    fn delete_pairs(&self, key: &[u8]) -> Result<bool> {
        if self.shared.tx.is_some() {
            let t = Txn::begin(self.shared.clone(), crate::Isolation::ReadCommitted)?;
            let found = t.delete(self, key)?;
            t.commit()?;
            return Ok(found);
        }
        let (lo, hi) = dups::pairs_of(key);
        let range = (Bound::Included(lo), Bound::Excluded(hi));
        let entries: Vec<Vec<u8>> = Iter::entries(self.clone(), range, false)
            .map(|kv| kv.map(|(c, _)| c))
            .collect::<Result<_>>()?;
        for c in &entries {
            self.delete_entry(c)?;
        }
        Ok(!entries.is_empty())
    }

    /// Removes one pair of a database with duplicates; returns whether it was there.
    pub fn delete_pair(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        match self.dups {
            Duplicates::None => Err(Error::InvalidArgument(format!(
                "delete_pair on database {:?}, which holds no duplicates: use delete",
                self.name
            ))),
            Duplicates::Sorted => self.delete_entry(&dups::sorted_pair(key, value)),
            Duplicates::Unsorted => {
                let (lo, hi) = dups::pairs_of(key);
                for kv in Iter::entries(
                    self.clone(),
                    (Bound::Included(lo), Bound::Excluded(hi)),
                    false,
                ) {
                    let (c, v) = kv?;
                    if v == value {
                        return self.delete_entry(&c);
                    }
                }
                Ok(false)
            }
        }
    }

    /// The values of `key`, in order: all of its pairs in a database with duplicates, at
    /// most one otherwise.
    pub fn get_all(&self, key: &[u8]) -> Result<Vec<Vec<u8>>> {
        if self.dups == Duplicates::None {
            return Ok(self.get(key)?.into_iter().collect());
        }
        self.pairs(key).map(|kv| kv.map(|(_, v)| v)).collect()
    }

    /// The number of values of `key` (Berkeley DB's `DBcursor->count`).
    pub fn count(&self, key: &[u8]) -> Result<u64> {
        if self.dups == Duplicates::None {
            return Ok(u64::from(self.contains(key)?));
        }
        let mut n = 0;
        for kv in self.pairs(key) {
            kv?;
            n += 1;
        }
        Ok(n)
    }

    #[cold]
    fn first_pair(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.pairs(key).next().transpose()?.map(|(_, v)| v))
    }

    /// The pairs of `key`, decoded.
    fn pairs(&self, key: &[u8]) -> Iter {
        self.range(key..=key)
    }

    #[inline]
    fn delete_entry(&self, key: &[u8]) -> Result<bool> {
        if self.shared.tx.is_some() {
            return self.shared.autocommit(self.id, key, None, false);
        }
        self.shared.write(|e| e.delete(self.id, key))
    }

    /// Number of entries (with duplicates: of pairs).
    pub fn len(&self) -> Result<u64> {
        self.shared.live()?;
        Ok(self.shared.engine.read().db(self.id)?.entries)
    }

    /// Whether the database has no entries.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// A cursor, not yet positioned.
    pub fn cursor(&self) -> Cursor {
        Cursor::new(self.clone())
    }

    /// All entries in key order.
    pub fn iter(&self) -> Iter {
        Iter::new(self.clone(), .., false)
    }

    /// Entries with keys in `range`, in ascending order. Bounds may be `&[u8]`, `Vec<u8>` or
    /// anything else that is `AsRef<[u8]>`: `db.range(&b"a"[..]..&b"m"[..])`.
    pub fn range(&self, range: impl KeyRange) -> Iter {
        Iter::new(self.clone(), range, false)
    }

    /// Entries with keys in `range`, in descending order.
    pub fn range_rev(&self, range: impl KeyRange) -> Iter {
        Iter::new(self.clone(), range, true)
    }

    /// Statistics gathered by walking the tree: pages by kind, depth, entries. The walk
    /// reads one node at a time (nothing is held between nodes, and missed pages are
    /// loaded with no lock), so writes go on meanwhile; if they change the tree under the
    /// walk so that a node cannot be read, it starts again, and after a few tries walks
    /// once under the exclusive lock.
    pub fn stat(&self) -> Result<DbStat> {
        let mut st = self.walk_stat()?;
        st.duplicates = self.dups;
        Ok(st)
    }

    fn walk_stat(&self) -> Result<DbStat> {
        let sh = &self.shared;
        for _ in 0..4 {
            let ((name, entries, root, capacity), version) = sh.read(|e| {
                let d = e.db(self.id)?;
                Ok((d.name.clone(), d.entries, d.root, e.layout.capacity()))
            })?;
            let walked = DbStat::walk(name, entries, root, capacity, |pid| {
                sh.read(|e| Ok(NodeSummary::of(e.page(pid)?, capacity)))
                    .map(|(n, _)| n)
            });
            match walked {
                Err(_) if sh.data_version.load(Ordering::Acquire) != version => continue,
                r => return r,
            }
        }
        let mut e = sh.engine.write();
        let d = e.db(self.id)?.clone();
        let capacity = e.layout.capacity();
        let r = DbStat::walk(d.name, d.entries, d.root, capacity, |pid| {
            e.ensure(pid)?;
            Ok(NodeSummary::of(e.node(pid), capacity))
        });
        e.shrink_cache();
        r
    }
}
