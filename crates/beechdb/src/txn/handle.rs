//! The public transaction handle, and the engine methods that serve it.

use super::scan::TxnIter;
use super::{scoped_key, scoped_range, Ddl};
use crate::config::{Durability, Isolation};
use crate::engine::{Engine, Need, NeedResult};
use crate::env::{Db, Shared};
use crate::error::{Error, Result};
use crate::wal::{Op, OpsBuilder};
use std::collections::BTreeMap;

/// The lock-table "database" of database names: creating or removing a database locks its
/// name, so two transactions cannot both create (or remove) the same one.
const CATALOG_LOCK: u32 = crate::engine::CATALOG;
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

impl Engine {
    /// The value of `key` as of snapshot `at` (`None`: the latest committed).
    pub(crate) fn read_at(
        &self,
        db: u32,
        key: &[u8],
        at: Option<u64>,
    ) -> NeedResult<Option<Vec<u8>>> {
        if let (Some(s), false) = (at, self.versions.is_empty()) {
            if let Some(chain) = self.versions.get(&scoped_key(db, key)) {
                if let Some((_, before)) = chain.iter().find(|(lsn, _)| *lsn > s) {
                    return Ok(before.clone());
                }
            }
        }
        match self.locate(db, key)? {
            None => Ok(None),
            Some((leaf, idx)) => self.with_value(leaf, idx, |v| v.to_vec()).map(Some),
        }
    }

    /// Whether a commit newer than snapshot `at` wrote `key`.
    pub(crate) fn committed_after(&self, db: u32, key: &[u8], at: u64) -> bool {
        !self.versions.is_empty()
            && self
                .versions
                .get(&scoped_key(db, key))
                .and_then(|c| c.last())
                .is_some_and(|(lsn, _)| *lsn > at)
    }

    pub(crate) fn read_latest_loading(&mut self, db: u32, key: &[u8]) -> Result<Option<Vec<u8>>> {
        loop {
            match self.read_at(db, key, None) {
                Ok(v) => return Ok(v),
                Err(Need::Page(pid)) => self.load(pid)?,
                Err(Need::Fail(e)) => return Err(e),
            }
        }
    }

    /// For keys of `db` in `[lo, hi)` written by commits newer than snapshot `at`: the value
    /// each had at the snapshot (`None`: absent).
    pub(crate) fn snapshot_overrides(
        &self,
        db: u32,
        lo: &Bound<Vec<u8>>,
        hi: &Bound<Vec<u8>>,
        at: u64,
    ) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        let (start, end) = scoped_range(db, lo, hi);
        self.versions
            .range((start, end))
            .filter_map(|(k, chain)| {
                chain
                    .iter()
                    .find(|(lsn, _)| *lsn > at)
                    .map(|(_, before)| (k[4..].to_vec(), before.clone()))
            })
            .collect()
    }

    /// Drops versions no active snapshot can read.
    pub(crate) fn gc_versions(&mut self, oldest: Option<u64>) {
        match oldest {
            None => self.versions.clear(),
            Some(o) => self.versions.retain(|_, chain| {
                chain.retain(|(lsn, _)| *lsn > o);
                !chain.is_empty()
            }),
        }
    }
}

/// A transaction over any databases of one environment. Reads see a snapshot taken at
/// [`crate::Env::begin_txn`] (or the latest committed data under read-committed isolation)
/// plus the transaction's own writes. Dropping an unfinished transaction aborts it.
///
/// ```
/// use beechdb::{Config, Env};
/// let dir = tempfile::tempdir()?;
/// let env = Env::open(dir.path(), Config::new().transactional(true))?;
/// let accounts = env.open_or_create_db("accounts")?;
/// let mut txn = env.begin_txn()?;
/// txn.put(&accounts, b"alice", b"100")?;
/// txn.put(&accounts, b"bob", b"50")?;
/// let lsn = txn.commit()?; // durable (fsynced) when this returns
/// assert!(lsn > 0);
/// assert_eq!(accounts.get(b"alice")?, Some(b"100".to_vec()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Txn {
    shared: Arc<Shared>,
    id: u64,
    pub(super) snapshot: Option<u64>,
    registered: Option<u64>,
    pub(super) writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    locked: Vec<Vec<u8>>,
    /// Databases created and removed, in order.
    ddl: Vec<Ddl>,
    /// Databases written (each once).
    dbs: Vec<u32>,
    durability: Durability,
    finished: bool,
}

impl Txn {
    pub(crate) fn begin(shared: Arc<Shared>, isolation: Isolation) -> Result<Txn> {
        let tx = shared.tx()?;
        let id = tx.txns.new_id();
        let snapshot = match isolation {
            Isolation::ReadCommitted => None,
            Isolation::Snapshot => {
                let e = shared.engine.read();
                tx.txns.register(e.commit_lsn);
                Some(e.commit_lsn)
            }
        };
        tx.txns.stats.begun.fetch_add(1, Relaxed);
        let durability = tx.durability;
        Ok(Txn {
            shared,
            id,
            snapshot,
            registered: snapshot,
            writes: BTreeMap::new(),
            locked: Vec::new(),
            ddl: Vec::new(),
            dbs: Vec::new(),
            durability,
            finished: false,
        })
    }

    /// Whether this transaction created database `db` (and has not removed it).
    pub(super) fn created(&self, db: u32) -> bool {
        self.ddl
            .iter()
            .any(|d| matches!(d, Ddl::Create { db: c, .. } if *c == db))
            && !self.removed(db)
    }

    fn removed(&self, db: u32) -> bool {
        self.ddl
            .iter()
            .any(|d| matches!(d, Ddl::Remove { db: r, .. } if *r == db))
    }

    /// Creates database `name` when the transaction commits; the handle works in this
    /// transaction at once, and everywhere after the commit. [`Error::DbExists`] if the
    /// name is taken.
    pub fn create_db(&mut self, name: &str) -> Result<Db> {
        self.check_open()?;
        crate::env::check_name(name)?;
        self.lock(CATALOG_LOCK, name.as_bytes())?;
        let exists = self.shared.engine.read().names.contains_key(name);
        let ours = self.ddl.iter().rev().find_map(|d| match d {
            Ddl::Create { name: n, .. } if n == name => Some(true),
            Ddl::Remove { name: n, .. } if n == name => Some(false),
            _ => None,
        });
        if ours.unwrap_or(exists) {
            return Err(Error::DbExists(name.to_string()));
        }
        let db = self.shared.write(|e| Ok(e.alloc_db_id()))?;
        self.ddl.push(Ddl::Create {
            db,
            name: name.to_string(),
        });
        Ok(Db::new(self.shared.clone(), db, name))
    }

    /// Removes database `name` when the transaction commits; the transaction's own writes
    /// to it are discarded, and its handles fail with [`Error::Closed`] afterwards.
    pub fn remove_db(&mut self, name: &str) -> Result<()> {
        self.check_open()?;
        self.lock(CATALOG_LOCK, name.as_bytes())?;
        let ours = self.ddl.iter().rev().find_map(|d| match d {
            Ddl::Create { db, name: n } if n == name => Some(Some(*db)),
            Ddl::Remove { name: n, .. } if n == name => Some(None),
            _ => None,
        });
        let db = match ours {
            Some(found) => found,
            None => self.shared.engine.read().names.get(name).copied(),
        }
        .ok_or_else(|| Error::DbNotFound(name.to_string()))?;
        let prefix = db.to_be_bytes();
        self.writes.retain(|k, _| k[..4] != prefix);
        self.dbs.retain(|&d| d != db);
        self.ddl.push(Ddl::Remove {
            db,
            name: name.to_string(),
        });
        Ok(())
    }

    fn check_open(&self) -> Result<()> {
        if self.finished {
            return Err(Error::Closed);
        }
        Ok(())
    }

    fn check(&self, db: &Db) -> Result<()> {
        self.check_open()?;
        if !db.same_env(&self.shared) {
            return Err(Error::InvalidArgument(
                "database handle belongs to another environment".into(),
            ));
        }
        if self.removed(db.id()) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// The LSN of the snapshot this transaction reads (`None` under read-committed).
    pub fn snapshot_lsn(&self) -> Option<u64> {
        self.snapshot
    }

    /// The value of `key` in `db` as this transaction sees it.
    pub fn get(&self, db: &Db, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check(db)?;
        if let Some(w) = self.writes.get(&scoped_key(db.id(), key)) {
            return Ok(w.clone());
        }
        if self.created(db.id()) {
            return Ok(None);
        }
        let (v, _) = self
            .shared
            .read(|e| e.read_at(db.id(), key, self.snapshot))?;
        Ok(v)
    }

    /// The entries of `db` with keys in `range`, ascending, as this transaction sees them: its
    /// snapshot (or, under read-committed, the latest committed data as each leaf is read)
    /// plus its own writes. Streams a leaf at a time; holds no lock between items.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, db: &Db, range: R) -> TxnIter<'_> {
        self.scan(db, range, false)
    }

    /// Every entry of `db`, ascending, as this transaction sees it.
    pub fn iter(&self, db: &Db) -> TxnIter<'_> {
        self.scan::<&[u8], _>(db, .., false)
    }

    /// As [`Txn::range`], descending.
    pub fn range_rev<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, db: &Db, range: R) -> TxnIter<'_> {
        self.scan(db, range, true)
    }

    fn scan<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, db: &Db, range: R, rev: bool) -> TxnIter<'_> {
        let lo = range.start_bound().map(|k| k.as_ref().to_vec());
        let hi = range.end_bound().map(|k| k.as_ref().to_vec());
        TxnIter::new(self, db.clone(), lo, hi, rev, self.check(db).err())
    }

    /// Reads `key` and locks it for this transaction (Berkeley DB's `DB_RMW`), so that no
    /// other transaction can write it before this one ends.
    pub fn get_for_update(&mut self, db: &Db, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check(db)?;
        self.lock(db.id(), key)?;
        self.get(db, key)
    }

    /// Writes `value` under `key` in `db` when the transaction commits.
    pub fn put(&mut self, db: &Db, key: &[u8], value: &[u8]) -> Result<()> {
        self.check(db)?;
        self.shared.check_sizes(key, value)?;
        self.lock(db.id(), key)?;
        self.note_db(db.id());
        self.writes
            .insert(scoped_key(db.id(), key), Some(value.to_vec()));
        Ok(())
    }

    /// Deletes `key` from `db` when the transaction commits; returns whether it was present.
    pub fn delete(&mut self, db: &Db, key: &[u8]) -> Result<bool> {
        self.check(db)?;
        self.lock(db.id(), key)?;
        self.note_db(db.id());
        let existed = self.get(db, key)?.is_some();
        self.writes.insert(scoped_key(db.id(), key), None);
        Ok(existed)
    }

    fn note_db(&mut self, db: u32) {
        if !self.dbs.contains(&db) {
            self.dbs.push(db);
        }
    }

    fn lock(&mut self, db: u32, key: &[u8]) -> Result<()> {
        let sk = scoped_key(db, key);
        if self.locked.contains(&sk) {
            return Ok(());
        }
        let tx = self.shared.tx()?;
        tx.txns.locks.lock(self.id, &sk, tx.lock_timeout)?;
        self.locked.push(sk);
        if let Some(s) = self.snapshot {
            if self.shared.engine.read().committed_after(db, key, s) {
                tx.txns.stats.conflicts.fetch_add(1, Relaxed);
                return Err(Error::Conflict);
            }
        }
        Ok(())
    }

    /// Commits with the environment's default durability; returns the commit's LSN.
    pub fn commit(self) -> Result<u64> {
        let d = self.durability;
        self.commit_with(d)
    }

    /// Commits with durability `d`; returns the commit's LSN (for a transaction that wrote
    /// nothing, the LSN of the data it read).
    pub fn commit_with(mut self, d: Durability) -> Result<u64> {
        self.check_open()?;
        let result = if self.writes.is_empty() && self.ddl.is_empty() {
            Ok(self
                .snapshot
                .unwrap_or_else(|| self.shared.engine.read().commit_lsn))
        } else {
            let mut ops = OpsBuilder::default();
            for (k, v) in &self.writes {
                let (db, key) = (u32::from_be_bytes(k[..4].try_into().unwrap()), &k[4..]);
                ops.push(match v {
                    Some(value) => Op::Put { db, key, value },
                    None => Op::Delete { db, key },
                });
            }
            self.shared
                .commit_txn(self.id, &self.ddl, ops.ops(), &self.dbs, d)
        };
        self.finish(result.is_ok());
        result
    }

    /// Discards the transaction's writes and releases its locks.
    pub fn abort(mut self) {
        self.finish(false);
    }

    fn finish(&mut self, committed: bool) {
        if self.finished {
            return;
        }
        self.finished = true;
        if let Ok(tx) = self.shared.tx() {
            tx.txns.locks.release(self.id, &self.locked);
            if let Some(s) = self.registered.take() {
                tx.txns.unregister(s);
            }
            let counter = if committed {
                &tx.txns.stats.commits
            } else {
                &tx.txns.stats.aborts
            };
            counter.fetch_add(1, Relaxed);
        }
    }
}

impl Drop for Txn {
    fn drop(&mut self) {
        self.finish(false);
    }
}
