//! The commit pipeline: log a transaction's records, apply them to the trees, wait for the
//! durability asked for; and auto-commit of single operations.
//!
//! Owns: [`Shared::commit_local`], [`Shared::autocommit`], applying a committed operation
//! ([`Engine::apply_op`]). May call: `engine` (under the environment's exclusive lock),
//! `wal`, the key-lock table. An auto-commit outside a replication group takes no key lock:
//! it checks that no transaction holds its key, decides whether the key is present, logs
//! and applies, all in one hold of the exclusive lock (`LockTable::is_free` says why that
//! is race-free); behind a transaction's lock it takes the key lock and waits.
//!
//! Invariants: a commit's records are appended and its operations applied under one hold
//! of the exclusive lock, so log order is the order in which commits become visible; every
//! database a commit writes is checked to exist before anything is logged, so
//! applying a logged commit never fails for a reason that replaying it would meet again.

use super::scoped_key;
use crate::config::Duplicates;
use crate::config::Durability;
use crate::engine::Engine;
use crate::env::{Shared, Tx};
use crate::error::{Error, Result};
use crate::replica::{HeldLocks, Replicator};
use crate::wal::reader::TxnOp;
use crate::wal::{Op, Ops, OpsBuilder, Record};
use std::cell::RefCell;
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::sync::Arc;

/// A database created or removed by a transaction.
#[derive(Debug, Clone)]
pub(crate) enum Ddl {
    Create {
        db: u32,
        name: String,
        dups: Duplicates,
    },
    Remove {
        db: u32,
        name: String,
    },
}

impl Ddl {
    pub(super) fn record(&self, txn: u64) -> Record<'_> {
        match self {
            Ddl::Create {
                db,
                name,
                dups: Duplicates::None,
            } => Record::CreateDb {
                txn,
                prev: 0,
                db: *db,
                name,
            },
            Ddl::Create { db, name, dups } => Record::CreateDbWithDups {
                txn,
                prev: 0,
                db: *db,
                dups: u32::from(dups.code()),
                name,
            },
            Ddl::Remove { db, name } => Record::RemoveDb {
                txn,
                prev: 0,
                db: *db,
                name,
            },
        }
    }

    fn op(&self) -> TxnOp<'_> {
        match self {
            Ddl::Create { db, name, dups } => TxnOp::CreateDb {
                db: *db,
                name,
                dups: *dups,
            },
            Ddl::Remove { db, name } => TxnOp::RemoveDb { db: *db, name },
        }
    }
}

impl Engine {
    /// Applies one operation of a transaction committed at `lsn`, keeping the value a write
    /// replaces when `keep` (a snapshot older than `lsn` is active). A write to a database
    /// that does not exist means a damaged log: the commit path checks before logging.
    pub(crate) fn apply_op(&mut self, op: TxnOp, lsn: u64, keep: bool) -> Result<()> {
        match op {
            TxnOp::Write(op) => {
                let (db, key) = (op.db(), op.key());
                if self.db(db).is_err() {
                    return Err(Error::Corrupt {
                        page: None,
                        detail: format!(
                            "the commit at LSN {lsn} writes database id {db}, which does not exist"
                        ),
                    });
                }
                if keep {
                    let before = self.read_latest_loading(db, key)?;
                    self.versions
                        .entry(scoped_key(db, key))
                        .or_default()
                        .push((lsn, before));
                    self.versions_newest = self.versions_newest.max(lsn);
                }
                match op.value() {
                    Some(v) => drop(self.put(db, key, v, false)?),
                    None => drop(self.delete(db, key)?),
                }
                Ok(())
            }
            TxnOp::CreateDb { db, name, dups } => self.create_db_with_id(db, name, dups),
            TxnOp::RemoveDb { db, name } => self.remove_db_with_id(db, name),
        }
    }
}

thread_local! {
    /// The one-operation write set of an auto-commit, reused.
    static AUTOCOMMIT_OPS: RefCell<OpsBuilder> = RefCell::new(OpsBuilder::default());
}

/// Runs `f` on the write set of one put (`value`) or delete (`None`) of `db`'s `key`.
fn with_single_op<R>(db: u32, key: &[u8], value: Option<&[u8]>, f: impl FnOnce(Ops) -> R) -> R {
    AUTOCOMMIT_OPS.with(|b| {
        let mut b = b.borrow_mut();
        b.clear();
        b.push(match value {
            Some(value) => Op::Put { db, key, value },
            None => Op::Delete { db, key },
        });
        f(b.ops())
    })
}

impl Shared {
    /// Logs and applies transaction `txn`'s commit here: its databases created or removed
    /// (`ddl`, in order), then its writes `ops`, which touch the databases `dbs`, with
    /// durability `d`; returns its LSN. (In a replication group a commit goes to the
    /// replicator instead, `Shared::commit_replicated`, and comes back here through
    /// `Env::apply_replicated`.)
    pub(crate) fn commit_local(
        &self,
        txn: u64,
        ddl: &[Ddl],
        ops: Ops,
        dbs: &[u32],
        d: Durability,
    ) -> Result<u64> {
        let lsn = self.commit_local_if(txn, ddl, ops, dbs, d, |_| Ok(true))?;
        Ok(lsn.expect("an open gate commits"))
    }

    /// As [`Shared::commit_local`], asking `gate` first, under the exclusive lock, whether
    /// to commit at all: `Ok(None)` when it says no.
    fn commit_local_if(
        &self,
        txn: u64,
        ddl: &[Ddl],
        ops: Ops,
        dbs: &[u32],
        d: Durability,
        gate: impl FnOnce(&mut Engine) -> Result<bool>,
    ) -> Result<Option<u64>> {
        self.live()?;
        let tx = self.tx()?;
        if !tx.pages_resident.load(Relaxed) {
            self.prefetch(ops);
        }
        let mut arrival = tx.wal.as_ref().map(|w| w.arrive());
        let lsn = {
            // A SYNC commit waits for a flush that gathers the commits around it: backing
            // off would make it miss one.
            let mut e = match (&tx.wal, d) {
                (Some(_), Durability::Sync) => self.exclusive(),
                _ => self.exclusive_backing_off(),
            };
            e.check_writable()?;
            for &db in dbs {
                let created = ddl
                    .iter()
                    .any(|d| matches!(d, Ddl::Create { db: c, .. } if *c == db));
                if e.db(db).is_err() && !created {
                    return Err(Error::DbRemoved);
                }
            }
            let removes_applying = |d: &Ddl| matches!(d, Ddl::Remove { db, .. } if e.undo.iter().any(|u| u.lsn().is_none() && u.dbs.contains(db)));
            if ddl.iter().any(removes_applying) {
                // A spilled transaction's commit is being applied to it: it ends first.
                tx.txns.stats.conflicts.fetch_add(1, Relaxed);
                return Err(Error::Conflict);
            }
            if !gate(&mut e)? {
                return Ok(None);
            }
            let commit = Record::Commit { txn, prev: 0, ops };
            let appended = match (&tx.wal, arrival.as_mut()) {
                (Some(w), Some(a)) if ddl.is_empty() => w.append(a, &[commit]),
                (Some(w), Some(a)) => {
                    let mut records: Vec<Record> = ddl.iter().map(|d| d.record(txn)).collect();
                    records.push(commit);
                    w.append(a, &records)
                }
                _ => in_memory_lsn(tx, ddl.iter().map(|d| d.record(txn)).chain([commit])),
            };
            let lsn = appended?;
            let oldest = tx.txns.oldest();
            let keep = oldest.is_some_and(|o| o < lsn);
            let applied = ddl
                .iter()
                .try_for_each(|d| e.apply_op(d.op(), lsn, keep))
                .and_then(|()| {
                    ops.iter()
                        .try_for_each(|op| e.apply_op(TxnOp::Write(op), lsn, keep))
                });
            if let Err(err) = applied {
                // The log holds the whole commit; memory holds part of it. Only a reopen
                // (recovery) can make the two agree again.
                e.poisoned
                    .get_or_insert_with(|| format!("a commit failed half-applied: {err}"));
                return Err(err);
            }
            e.commit_lsn = lsn;
            let old_versions = !e.versions.is_empty() || !e.undo.is_empty();
            if old_versions && (oldest.is_none() || lsn % 64 < 8) {
                e.gc_versions(oldest);
            }
            self.data_version.fetch_add(1, Release);
            e.shrink_cache();
            tx.pages_resident.store(e.all_pages_resident(), Relaxed);
            // Dropped (their files removed) once the lock is released.
            (lsn, std::mem::take(&mut e.undo_garbage))
        };
        let (lsn, garbage) = lsn;
        drop(garbage);
        if let Some(w) = &tx.wal {
            w.wait(lsn, d)?;
        }
        if ddl.iter().any(|d| matches!(d, Ddl::Remove { .. })) {
            // The commit stands whatever this meets: the next checkpoint frees what is
            // left, and reports the error if it comes again.
            let _ = self.free_doomed();
        }
        self.request_background_work(tx, lsn);
        Ok(Some(lsn))
    }

    /// Brings into memory, with no lock held, the pages a commit's writes descend through,
    /// so that applying it under the exclusive lock reads no page from the file while every
    /// reader waits (see [`Shared::read`]: a page found missing is read with no lock and
    /// added under the shared one); for no more writes than half the cache has pages (more
    /// would evict what was loaded first). Commits skip it while the cache held every page
    /// of the trees at the last commit (`Tx::pages_resident`).
    fn prefetch(&self, ops: Ops) {
        let writes = self.engine.read().pager.cache.capacity() / 2;
        self.prefetch_keys(
            ops.iter()
                .take(writes)
                .map(|op| (op.db(), op.key(), op.value().is_none())),
        );
    }

    /// Brings into memory, with no lock held, the pages a descent to each `(db, key,
    /// delete)` of `keys` passes (for a delete, the sibling a merge would need too), one key
    /// per hold of the shared lock (so a key's few misses never send
    /// the read to the exclusive lock, as one read missing hundreds of pages would). Keys
    /// of databases that do not exist, and errors, are left for the caller's apply.
    pub(super) fn prefetch_keys<'k>(&self, keys: impl Iterator<Item = (u32, &'k [u8], bool)>) {
        for (db, key, delete) in keys {
            let _ = self.read(|e| {
                if e.db(db).is_ok() {
                    match delete {
                        true => e.locate_for_delete(db, key)?,
                        false => drop(e.locate(db, key)?),
                    }
                }
                Ok(())
            });
        }
    }

    /// One write as its own transaction: `value` `None` deletes; with `no_overwrite` it
    /// fails if the key is present. Returns whether the key was present.
    pub(crate) fn autocommit(
        self: &Arc<Self>,
        db: u32,
        key: &[u8],
        value: Option<&[u8]>,
        no_overwrite: bool,
    ) -> Result<bool> {
        let tx = self.tx()?;
        self.writable()?;
        if let Some(v) = value {
            self.check_sizes(key, v)?;
        }
        let id = tx.txns.new_id();
        let replicator = self.replicator();
        let local = replicator.is_none();
        if local {
            if let Some(existed) = self.autocommit_local(tx, id, db, key, value, no_overwrite)? {
                return Ok(existed);
            }
        }
        // A transaction holds the key (or, in a replication group, the commit carries its
        // key lock until it is applied): take the lock, waiting for it.
        let sk = scoped_key(db, key);
        tx.txns.locks.lock(id, &sk, tx.lock_timeout, true)?;
        let result = match replicator {
            // Holding the key, no other transaction does (nor its database: escalation
            // waits for this lock), so the check in `autocommit_local` passes.
            None => self
                .autocommit_local(tx, id, db, key, value, no_overwrite)
                .and_then(|r| r.ok_or(Error::Conflict)),
            Some(r) => self.autocommit_replicated(r.as_ref(), tx, id, db, key, value, no_overwrite),
        };
        tx.txns.locks.release(id, &[sk]);
        result
    }

    /// An auto-commit outside a replication group, with no key lock of its own: checked,
    /// logged and applied within one hold of the exclusive lock (see the module comment).
    /// `None` when a transaction holds the key.
    fn autocommit_local(
        &self,
        tx: &Tx,
        id: u64,
        db: u32,
        key: &[u8],
        value: Option<&[u8]>,
        no_overwrite: bool,
    ) -> Result<Option<bool>> {
        let mut busy = false;
        let mut existed = false;
        let committed = with_single_op(db, key, value, |ops| {
            self.commit_local_if(id, &[], ops, &[db], tx.durability, |e| {
                if !tx.txns.locks.is_free(id, db, key) {
                    busy = true;
                    return Ok(false);
                }
                existed = (value.is_none() || no_overwrite) && e.contains_loading(db, key)?;
                if no_overwrite && existed {
                    return Err(Error::KeyExists);
                }
                Ok(value.is_some() || existed)
            })
        })?;
        if busy {
            return Ok(None);
        }
        if committed.is_some() {
            tx.txns.stats.commits.fetch_add(1, Relaxed);
        }
        Ok(Some(existed))
    }

    /// An auto-commit in a replication group, holding the key's lock, which goes with the
    /// commit and is released once it is applied.
    #[allow(clippy::too_many_arguments)]
    fn autocommit_replicated(
        self: &Arc<Self>,
        r: &dyn Replicator,
        tx: &Tx,
        id: u64,
        db: u32,
        key: &[u8],
        value: Option<&[u8]>,
        no_overwrite: bool,
    ) -> Result<bool> {
        let need_check = value.is_none() || no_overwrite;
        let existed = need_check && self.read(|e| Ok(e.locate(db, key)?.is_some()))?.0;
        if no_overwrite && existed {
            return Err(Error::KeyExists);
        }
        if value.is_none() && !existed {
            return Ok(false);
        }
        with_single_op(db, key, value, |ops| {
            let locks = HeldLocks::new(self.clone(), id, vec![scoped_key(db, key)], Vec::new());
            self.commit_replicated(r, &[], ops, tx.durability, None, locks)
        })?;
        tx.txns.stats.commits.fetch_add(1, Relaxed);
        Ok(existed)
    }

    /// Asks the background thread for a checkpoint when enough log has gathered, and for
    /// the log's background work (next segment, sync) when the log wants it.
    pub(super) fn request_background_work(&self, tx: &Tx, lsn: u64) {
        if lsn.saturating_sub(tx.last_checkpoint_lsn.load(Relaxed)) >= tx.checkpoint_log_bytes {
            tx.request_checkpoint();
        }
        if tx.wal.as_ref().is_some_and(|w| w.take_background_request()) {
            tx.request_log_work();
        }
    }
}

/// With the log in memory only, a commit takes the LSNs its records would take.
pub(super) fn in_memory_lsn<'r>(tx: &Tx, records: impl Iterator<Item = Record<'r>>) -> Result<u64> {
    let mut len = 0;
    for r in records {
        len += crate::wal::record::framed_size(&r)? as u64;
    }
    Ok(tx.inmem_lsn.fetch_add(len, Relaxed) + len)
}

#[cfg(test)]
mod tests {
    use crate::{Config, Env};
    use std::sync::atomic::Ordering::Relaxed;

    /// Once the cache holds every tree page, commits skip the prefetch: after checkpoints
    /// too, whose free-list pages are never cached (counting them as tree pages sent a
    /// fifth of all commits through a needless descent).
    #[test]
    fn checkpoints_leave_every_page_resident() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = Config::new().transactional(true).cache_size(64 << 20);
        let env = Env::open(dir.path(), cfg).unwrap();
        let db = env.create_db("d").unwrap();
        for round in 0..5u32 {
            for i in 0..3000u32 {
                db.put(&(round * 3000 + i).to_be_bytes(), &[7; 64]).unwrap();
            }
            env.sync().unwrap();
            db.put(b"after", &round.to_be_bytes()).unwrap();
            let tx = env.shared().tx.as_ref().unwrap();
            assert!(tx.pages_resident.load(Relaxed), "round {round}");
        }
        env.close().unwrap();
    }
}
