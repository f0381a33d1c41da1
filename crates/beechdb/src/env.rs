//! The public handles: [`Env`] (an environment directory) and [`Db`] (a named database).
//!
//! Owns: the lock discipline. Reads run under the shared lock and never wait for each other;
//! a read that meets a non-resident page retries under the exclusive lock, which loads it.
//! Writes run under the exclusive lock. Eviction runs after an exclusive operation, so no
//! page disappears while an operation holds it. May call: `engine`, `btree`, `verify`,
//! `stats`.

use crate::btree::{Cursor, Iter};
use crate::config::Config;
use crate::engine::{Engine, Need, NeedResult};
use crate::error::{Error, Result};
use crate::stats::{DbStat, EnvStat};
use crate::storage::{OsStorage, Storage};
use crate::verify::VerifyReport;
use parking_lot::{Mutex, RwLock};
use std::any::Any;
use std::io;
use std::ops::RangeBounds;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

pub(crate) struct Shared {
    pub(crate) engine: RwLock<Engine>,
    /// Bumped by every write: cursors use it to know their copied entries are current.
    data_version: AtomicU64,
    closed: AtomicBool,
    pub(crate) storage: Arc<dyn Storage>,
    lock: Mutex<Option<Box<dyn Any + Send + Sync>>>,
    /// Held by checkpoints and by `verify`, which reads the durable checkpoint from disk.
    pub(crate) checkpoint_mutex: Mutex<()>,
}

impl Shared {
    fn live(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// Runs `op` under the shared lock, or under the exclusive lock loading pages it needs.
    /// Returns the result and the data version it saw.
    pub(crate) fn read<T>(&self, mut op: impl FnMut(&Engine) -> NeedResult<T>) -> Result<(T, u64)> {
        self.live()?;
        {
            let e = self.engine.read();
            match op(&e) {
                Ok(v) => return Ok((v, self.data_version.load(Ordering::Acquire))),
                Err(Need::Fail(err)) => return Err(err),
                Err(Need::Page(_)) => {}
            }
        }
        let mut e = self.engine.write();
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

    fn checkpoint(&self) -> Result<()> {
        let _ckpt = self.checkpoint_mutex.lock();
        let mut e = self.engine.write();
        e.checkpoint()
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // A handle dropped without close() still ends with a checkpoint, as a clean close
        // would; a poisoned or already closed environment has nothing to save.
        if !self.closed.load(Ordering::Acquire) {
            let _ = self.engine.get_mut().checkpoint();
        }
    }
}

/// An environment: one directory holding any number of named databases.
///
/// Handles are cheap to clone and may be shared between threads.
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
    shared: Arc<Shared>,
}

impl Env {
    /// Opens (or, if `config` allows, creates) the environment in directory `path`.
    /// Fails with [`Error::Locked`] if another handle or process has it open.
    pub fn open(path: impl AsRef<Path>, config: Config) -> Result<Env> {
        let storage = OsStorage::new(path.as_ref())
            .map_err(|e| Error::io(format!("creating directory {}", path.as_ref().display()), e))?;
        Env::open_with_storage(Arc::new(storage), config)
    }

    /// Opens an environment on any [`Storage`] implementation.
    pub fn open_with_storage(storage: Arc<dyn Storage>, config: Config) -> Result<Env> {
        let guard = match storage.lock() {
            Ok(g) => g,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(Error::Locked {
                    path: storage.describe(),
                })
            }
            Err(e) => return Err(Error::io("taking the environment lock", e)),
        };
        let engine = Engine::open(storage.as_ref(), &config)?;
        Ok(Env {
            shared: Arc::new(Shared {
                engine: RwLock::new(engine),
                data_version: AtomicU64::new(0),
                closed: AtomicBool::new(false),
                storage,
                lock: Mutex::new(Some(guard)),
                checkpoint_mutex: Mutex::new(()),
            }),
        })
    }

    fn handle(&self, id: u32, name: &str) -> Db {
        Db {
            shared: self.shared.clone(),
            id,
            name: name.into(),
        }
    }

    /// Opens an existing database; [`Error::DbNotFound`] if there is none of that name.
    pub fn open_db(&self, name: &str) -> Result<Db> {
        self.shared.live()?;
        let id = self.shared.engine.read().names.get(name).copied();
        id.map(|id| self.handle(id, name))
            .ok_or_else(|| Error::DbNotFound(name.to_string()))
    }

    /// Creates a database; [`Error::DbExists`] if the name is taken. Names are 1 to 255
    /// bytes of UTF-8.
    pub fn create_db(&self, name: &str) -> Result<Db> {
        check_name(name)?;
        let id = self.shared.write(|e| e.create_db(name))?;
        Ok(self.handle(id, name))
    }

    /// Opens the database, creating it if missing.
    pub fn open_or_create_db(&self, name: &str) -> Result<Db> {
        check_name(name)?;
        let id = self.shared.write(|e| match e.names.get(name) {
            Some(&id) => Ok(id),
            None => e.create_db(name),
        })?;
        Ok(self.handle(id, name))
    }

    /// Removes a database and frees its pages. Its handles fail with [`Error::Closed`].
    pub fn remove_db(&self, name: &str) -> Result<()> {
        self.shared.write(|e| e.remove_db(name))
    }

    /// The names of all databases, sorted.
    pub fn db_names(&self) -> Result<Vec<String>> {
        self.shared.live()?;
        Ok(self.shared.engine.read().names.keys().cloned().collect())
    }

    /// Makes every change so far durable (a checkpoint). A crash at any instant leaves the
    /// environment as of the last completed `sync`.
    pub fn sync(&self) -> Result<()> {
        self.shared.live()?;
        self.shared.checkpoint()
    }

    /// Makes everything durable and closes the environment: every handle to it, including
    /// database handles and cursors, fails with [`Error::Closed`] afterwards, and the
    /// directory may be opened again.
    pub fn close(self) -> Result<()> {
        self.shared.live()?;
        let r = self.shared.checkpoint();
        self.shared.closed.store(true, Ordering::Release);
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

    /// Environment statistics: cache, file and free space.
    pub fn stat(&self) -> Result<EnvStat> {
        self.shared.live()?;
        let e = self.shared.engine.read();
        Ok(EnvStat::collect(&e))
    }

    /// The page size of this environment.
    pub fn page_size(&self) -> usize {
        self.shared.engine.read().layout.page_size
    }

    /// The largest key this environment accepts (a quarter of a page).
    pub fn max_key_len(&self) -> usize {
        self.shared.engine.read().layout.max_key
    }
}

fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 255 {
        return Err(Error::InvalidArgument(format!(
            "database name must be 1 to 255 bytes, not {}",
            name.len()
        )));
    }
    Ok(())
}

/// A handle to one named database. Cheap to clone; may be shared between threads.
#[derive(Clone)]
pub struct Db {
    shared: Arc<Shared>,
    id: u32,
    name: Arc<str>,
}

impl Db {
    pub(crate) fn id(&self) -> u32 {
        self.id
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

    /// The value stored under `key`, if any.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_with(key, |v| v.to_vec())
    }

    /// Calls `f` with the value stored under `key` without copying it out, if present.
    pub fn get_with<R>(&self, key: &[u8], f: impl FnOnce(&[u8]) -> R) -> Result<Option<R>> {
        let mut f = Some(f);
        let (r, _) = self.shared.read(|e| match e.locate(self.id, key)? {
            None => Ok(None),
            Some((leaf, idx)) => e
                .with_value(leaf, idx, |v| (f.take().expect("called once"))(v))
                .map(Some),
        })?;
        Ok(r)
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: &[u8]) -> Result<bool> {
        Ok(self.shared.read(|e| e.locate(self.id, key))?.0.is_some())
    }

    /// Stores `value` under `key`, replacing any previous value.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.shared
            .write(|e| e.put(self.id, key, value, false))
            .map(drop)
    }

    /// Stores `value` under `key` only if the key is absent; [`Error::KeyExists`] otherwise.
    pub fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.shared
            .write(|e| e.put(self.id, key, value, true))
            .map(drop)
    }

    /// Removes `key`; returns whether it was present.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.shared.write(|e| e.delete(self.id, key))
    }

    /// Number of entries.
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
        Iter::new::<&[u8], _>(self.clone(), .., false)
    }

    /// Entries with keys in `range`, in ascending order. Bounds may be `&[u8]`, `Vec<u8>` or
    /// anything else that is `AsRef<[u8]>`: `db.range(&b"a"[..]..&b"m"[..])`.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
        Iter::new(self.clone(), range, false)
    }

    /// Entries with keys in `range`, in descending order.
    pub fn range_rev<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
        Iter::new(self.clone(), range, true)
    }

    /// Statistics gathered by walking the tree: pages by kind, depth, entries.
    pub fn stat(&self) -> Result<DbStat> {
        self.shared.live()?;
        let mut e = self.shared.engine.write();
        let r = DbStat::collect(&mut e, self.id);
        e.shrink_cache();
        r
    }
}
