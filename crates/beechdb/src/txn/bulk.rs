//! The commit of a transaction that spilled its writes to the log: applied to the trees in
//! bounded batches while readers, writers and commits go on, made visible at once at the
//! end.
//!
//! Owns: [`Shared::commit_spilled`]. May call: `engine` (under the environment's exclusive
//! lock, one batch at a time), `wal` (the merge of the transaction's runs, the commit
//! record), `txn::undo`. Steps, and why each is safe:
//! 1. Every write still in memory is spilled, so the writes are exactly the merge of the
//!    transaction's runs, which the log keeps (a hold) until a checkpoint covers the commit.
//! 2. Under the exclusive lock: the databases it writes are checked to exist and not to be
//!    removed by another commit being applied; an undo store is registered (from here on,
//!    every reader sees, for each key the commit has applied, the value before it), and the
//!    databases it creates are created, nameless to others. No checkpoint begins while a
//!    store is being applied: one would capture writes that no logged commit explains.
//! 3. Batches of the merge, read outside the lock, are applied under it, each key's value
//!    before recorded first; the store's new entries are written to its file outside it.
//!    Other transactions cannot write these keys meanwhile: this one holds their locks (or
//!    their databases' locks).
//! 4. Under the exclusive lock: the databases it removes are removed, its records (the
//!    databases created and removed, in order, then `commit-runs`) appended to the log, the store marked
//!    committed at the commit's LSN and the created databases named: the commit becomes
//!    visible to everyone at once, and log order is still the order of visibility.
//!
//! A crash before step 4 leaves no commit record: recovery ignores the runs. A failure
//! during steps 2-4 poisons the environment (the trees hold writes no log record explains);
//! readers keep seeing the values before the commit through the store until it is reopened.

use super::commit::Ddl;
use super::handle::State;
use super::scoped_key;
use super::undo::UndoStore;
use super::writes::Write;
use crate::config::Duplicates;
use crate::config::Durability;
use crate::env::Shared;
use crate::error::{Error, Result};
use crate::wal::reader::RunMerge;
use crate::wal::{Record, RunsBuilder};
use std::sync::atomic::Ordering::{Relaxed, Release};

/// Writes applied per hold of the exclusive lock, and their bytes at most.
const BATCH_OPS: usize = 512;
const BATCH_BYTES: usize = 1 << 20;

impl Shared {
    /// Commits transaction `txn`, whose writes spilled (see the module comment); waits for
    /// durability `d`. Returns the commit's LSN.
    pub(super) fn commit_spilled(&self, txn: u64, st: &mut State, d: Durability) -> Result<u64> {
        self.live()?;
        if self.replicator().is_some() {
            return Err(Error::InvalidArgument(
                "a transaction whose writes outgrew its memory budget (Config::txn_memory) \
                 cannot be replicated yet: commit it in smaller transactions or raise the \
                 budget"
                    .into(),
            ));
        }
        let tx = self.tx()?;
        let wal = tx.wal.as_ref().expect("only a logged transaction spills");
        let (runs, reader) = st.writes.runs(wal, txn, &tx.txns.stats)?;
        let mut merge = RunMerge::new(reader, txn, runs.iter().copied());
        let removed: Vec<u32> = st
            .ddl
            .iter()
            .filter_map(|d| match d {
                Ddl::Remove { db, .. } => Some(*db),
                Ddl::Create { .. } => None,
            })
            .collect();
        // Databases it creates and keeps (one it also removes is never made).
        let creates: Vec<(u32, &str, Duplicates)> = st
            .ddl
            .iter()
            .filter_map(|d| match d {
                Ddl::Create { db, name, dups } if !removed.contains(db) => {
                    Some((*db, name.as_str(), *dups))
                }
                _ => None,
            })
            .collect();
        let created_ever = |id: u32| {
            st.ddl
                .iter()
                .any(|d| matches!(d, Ddl::Create { db, .. } if *db == id))
        };
        // Removals happen at the end and creations at the start: a name cannot pass from an
        // older database to a new one in between.
        let renamed = st.ddl.iter().find_map(|d| match d {
            Ddl::Remove { db, name }
                if !created_ever(*db) && creates.iter().any(|(_, n, _)| n == name) =>
            {
                Some(name)
            }
            _ => None,
        });
        if let Some(name) = renamed {
            return Err(Error::InvalidArgument(format!(
                "a transaction that spilled to the log cannot both remove and create database \
                 {name:?}; commit between the two"
            )));
        }
        let mut touched: Vec<u32> = st.dbs.clone();
        touched.extend(creates.iter().map(|(db, _, _)| *db));
        let store = UndoStore::create(self.storage.clone(), touched, removed.clone())?;

        // Step 2.
        {
            let mut e = self.engine.write();
            e.check_writable()?;
            for &db in &st.dbs {
                let created = creates.iter().any(|(c, _, _)| *c == db);
                if !created && !removed.contains(&db) && e.db(db).is_err() {
                    return Err(Error::DbRemoved);
                }
            }
            if e.undo
                .iter()
                .any(|u| u.lsn().is_none() && u.removes.iter().any(|r| store.dbs.contains(r)))
            {
                tx.txns.stats.conflicts.fetch_add(1, Relaxed);
                return Err(Error::Conflict);
            }
            e.undo.push(store.clone());
            for &(db, name, dups) in &creates {
                if let Err(err) = e.create_db_with_id(db, name, dups) {
                    return Err(self.fail_applying(&mut e, err));
                }
                e.hidden.push(db);
            }
        }
        let applied = self.apply_batches(&mut merge, &store, &removed);
        let mut e = self.engine.write();
        if let Err(err) = applied {
            return Err(self.fail_applying(&mut e, err));
        }

        // Step 4.
        let result = (|| {
            for d in &st.ddl {
                match d {
                    Ddl::Remove { db, name } if !created_ever(*db) => {
                        e.remove_db_with_id(*db, name)?
                    }
                    _ => {}
                }
            }
            let mut listed = RunsBuilder::default();
            for &(first, n) in &runs {
                listed.push(first, n);
            }
            let mut records: Vec<Record> = st.ddl.iter().map(|d| d.record(txn)).collect();
            records.push(Record::CommitRuns {
                txn,
                prev: 0,
                ddl: st.ddl.len() as u32,
                runs: listed.runs(),
            });
            // The first follows the last run; `append` chains the rest.
            records[0] = records[0].with_prev(st.writes.last_lsn());
            wal.append(&mut wal.arrive(), &records)
        })();
        let lsn = match result {
            Ok(lsn) => lsn,
            Err(err) => return Err(self.fail_applying(&mut e, err)),
        };
        store.set_committed(lsn);
        e.hidden.retain(|h| !creates.iter().any(|(c, _, _)| c == h));
        e.commit_lsn = lsn;
        e.gc_versions(tx.txns.oldest());
        let garbage = std::mem::take(&mut e.undo_garbage);
        self.data_version.fetch_add(1, Release);
        e.shrink_cache();
        drop(e);
        self.write_back();
        drop(garbage);
        self.bulk_done.wake_all();
        st.writes.end_hold(Some(wal), Some(lsn));
        tx.txns.stats.spilled_commits.fetch_add(1, Relaxed);
        wal.wait(lsn, d)?;
        if !removed.is_empty() {
            // As for any commit that removes databases (see `Shared::commit_local`).
            let _ = self.free_doomed();
        }
        self.request_background_work(tx, lsn);
        Ok(lsn)
    }

    /// Step 3: the merge applied in batches.
    fn apply_batches(
        &self,
        merge: &mut RunMerge,
        store: &UndoStore,
        removed: &[u32],
    ) -> Result<()> {
        let mut batch: Vec<(u32, Vec<u8>, Write)> = Vec::with_capacity(BATCH_OPS);
        loop {
            batch.clear();
            let mut bytes = 0;
            while batch.len() < BATCH_OPS && bytes < BATCH_BYTES {
                let Some(op) = merge.next()? else { break };
                if removed.contains(&op.db()) {
                    continue;
                }
                bytes += op.key().len() + op.value().map_or(0, <[u8]>::len);
                batch.push((op.db(), op.key().to_vec(), op.value().map(<[u8]>::to_vec)));
            }
            if batch.is_empty() {
                return Ok(());
            }
            // The batch's leaves are loaded with no lock first.
            self.prefetch_keys(
                batch
                    .iter()
                    .map(|(db, key, w)| (*db, key.as_slice(), w.is_none())),
            );
            {
                self.live()?;
                let mut e = self.engine.write();
                e.check_writable()?;
                for (db, key, w) in batch.drain(..) {
                    let before = e.read_tree_loading(db, &key)?;
                    store.push(scoped_key(db, &key), before);
                    match w {
                        Some(v) => drop(e.put(db, &key, &v, false)?),
                        None => drop(e.delete(db, &key)?),
                    }
                }
                self.data_version.fetch_add(1, Release);
                e.shrink_cache();
            }
            self.write_back();
            store.flush()?;
        }
    }

    /// A failure once the trees may hold part of the commit: the environment is poisoned
    /// (only recovery can make trees and log agree); the store stays, so readers keep seeing
    /// the values before the commit.
    fn fail_applying(&self, e: &mut crate::engine::Engine, err: Error) -> Error {
        e.poisoned
            .get_or_insert_with(|| format!("a large commit failed while being applied: {err}"));
        self.bulk_done.wake_all();
        err
    }
}
