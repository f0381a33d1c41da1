//! The public handles: [`Env`] (an environment directory) and [`Db`] (a named database,
//! `db.rs`); what they share (`shared.rs`: the engine behind its lock, the lock
//! discipline); the background thread (`checkpointer.rs`); opening and recovery (`open.rs`).
//!
//! Owns: the handles' life cycle (open, close, drop). May call: `engine`, `btree`, `txn`,
//! `wal`, `verify`, `stats`.

use crate::config::{Config, Duplicates, Durability, GroupDurability, Isolation, Mode};
use crate::error::{Error, Result};
use crate::files::Listing;
use crate::stats::EnvStat;
use crate::storage::{OsStorage, Storage};
use crate::txn::Txn;
use crate::verify::VerifyReport;
use crate::wal::segment_name;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

mod checkpointer;
mod db;
mod open;
mod shared;

pub use db::Db;
pub(crate) use shared::{Shared, Tx};

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
    /// Opens (or, if `config` allows, creates) the environment in directory `path`; when
    /// `path` is a file, the one-file environment it is (see [`Env::open_file`]).
    /// Fails with [`Error::Locked`] if another handle or process has it open. With creation
    /// off, a missing directory or environment is an error and nothing is created.
    pub fn open(path: impl AsRef<Path>, config: Config) -> Result<Env> {
        let path = path.as_ref();
        if path.is_file() {
            return Env::open_file(path, config);
        }
        let storage = if config.create_value() {
            OsStorage::new(path)
                .map_err(|e| Error::io(format!("creating directory {}", path.display()), e))?
        } else {
            crate::files::existing(path)?
        };
        Env::open_with_storage(Arc::new(storage), config)
    }

    /// Opens (or, if `config` allows, creates) a one-file environment: its pages in the
    /// file `path`, its log segments and other files beside it, named `PATH-log.0000000001`
    /// and so on, as SQLite keeps its `-wal` file beside a database. A missing or empty file
    /// holds no environment: files beside it that name it are left from one that was
    /// removed, and are removed before a new one is created (so that a removed database
    /// stays removed). Once closed with [`Env::close`], the file alone holds the
    /// environment and opens without the files beside it; while open, its recent commits
    /// are in the log beside it, and the file without them is refused ([`Error::Corrupt`]).
    /// The directory holding `path` must exist.
    pub fn open_file(path: impl AsRef<Path>, config: Config) -> Result<Env> {
        let path = path.as_ref();
        let storage = OsStorage::file(path)
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        let present = storage
            .exists(crate::files::DB_FILE)
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        if !present && !config.create_value() {
            return Err(Error::InvalidArgument(format!(
                "no environment at {}: no such file, and creation is off",
                path.display()
            )));
        }
        if !present && !config.read_only {
            crate::files::remove_orphans(&storage)?;
        }
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
        self.pin_checkpoint()?.copy_to(Arc::new(storage))
    }

    /// The mode the environment was created in (and is open in).
    pub fn mode(&self) -> Mode {
        self.shared.engine.read().mode
    }

    /// Begins a transaction with the environment's default isolation.
    pub fn begin_txn(&self) -> Result<Txn> {
        let isolation = self.shared.tx()?.isolation;
        self.begin_txn_with(isolation)
    }

    /// Begins a transaction with isolation `isolation`.
    pub fn begin_txn_with(&self, isolation: Isolation) -> Result<Txn> {
        self.shared.live()?;
        Txn::begin(self.shared.clone(), isolation)
    }

    /// In a replication group, begins a transaction whose commit is made durable and
    /// acknowledged as `group` says (the member's default when `None`; see
    /// [`Txn::set_group_durability`]), checking its ack policy when it begins, as JE does:
    /// on the master it fails at once with [`Error::InsufficientReplicas`] when fewer
    /// members than the policy needs are in contact. ([`Env::begin_txn`] does not check:
    /// its transactions may only read, and a commit that cannot collect its
    /// acknowledgements fails then, with [`Error::InsufficientAcks`].) Outside a group,
    /// the same as [`Env::begin_txn`].
    pub fn begin_replicated_txn(&self, group: Option<GroupDurability>) -> Result<Txn> {
        self.shared.live()?;
        if let Some(r) = self.shared.replicator() {
            r.check_begin(group.map(|g| g.ack))?;
        }
        let txn = self.begin_txn()?;
        if let Some(g) = group {
            txn.set_group_durability(g)?;
        }
        Ok(txn)
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
        self.shared.write(|e| e.remove_db(name))?;
        self.shared.free_doomed()
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
            self.shared
                .checkpoint()
                .and_then(|()| self.shared.mark_closed_clean())
        };
        self.shared.closed.store(true, Ordering::Release);
        if let Some(w) = self.shared.tx.as_ref().and_then(|tx| tx.wal.as_ref()) {
            // No file of this environment may change once its directory is released.
            w.stop_preparing();
            w.remove_reusable();
        }
        self.shared.close_scratch_logs();
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
        self.shared.engine.read().pager.layout.page_size
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
