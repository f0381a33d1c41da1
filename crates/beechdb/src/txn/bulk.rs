//! The commit of a large transaction, applied to the trees in bounded batches while
//! readers, writers and commits go on, made visible at once at the end: one that spilled its
//! writes to the log, or one whose write set stayed in memory but holds more writes than
//! one hold of the exclusive lock should apply, or than a commit can load before taking it
//! (half the cache's pages).
//!
//! Owns: [`Shared::commit_in_batches`]. May call: `engine` (under the environment's
//! exclusive lock, one batch at a time), `wal` (the merge of the transaction's runs, the
//! commit record), `txn::undo`. Steps, and why each is safe:
//! 1. A spilled transaction spills every write still in memory, so its writes are exactly
//!    the merge of its runs, which the log keeps (a hold) until a checkpoint covers the
//!    commit; a transaction that did not spill takes its write set, in key order, from
//!    memory.
//! 2. Under the exclusive lock: the databases it writes are checked to exist and not to be
//!    removed by another commit being applied; an undo store is registered (from here on,
//!    every reader sees, for each key the commit has applied, the value before it), and the
//!    databases it creates are created, nameless to others. No checkpoint begins while a
//!    store is being applied: one would capture writes that no logged commit explains.
//! 3. Batches of the writes (no more writes than the pages half the cache holds) are
//!    applied under it, each key's value before recorded with it (under the lock, readers
//!    see both at once), only while their pages are in the cache: a hold that finds the
//!    next write's pages missing ends there, and the next batch's are loaded with no lock
//!    held first; a hold also ends when its values before reach a batch's bytes in the
//!    store's file-bound entries.
//!    The store writes its new entries to its file outside the lock: a spilled commit's
//!    all of them, one from memory those past the transaction budget (its values before
//!    stay in memory up to it). Other transactions cannot write these keys meanwhile: this
//!    one holds their locks (or their databases' locks).
//! 4. Under the exclusive lock: the databases it removes are removed, its records (the
//!    databases created and removed, in order, then `commit-runs` naming the runs, or a
//!    `commit` holding the writes) appended to the log (with the log in memory, given their
//!    LSN), the store marked committed at the commit's LSN and the created databases named:
//!    the commit becomes visible to everyone at once, and log order is still the order of
//!    visibility.
//!
//! A crash before step 4 leaves no commit record: recovery ignores the runs. A failure
//! during steps 2-4 poisons the environment (the trees hold writes no log record explains);
//! readers keep seeing the values before the commit through the store until it is reopened.

use super::commit::Ddl;
use super::handle::State;
use super::undo::UndoStore;
use super::writes::{Sk, Write, Written};
use crate::config::Duplicates;
use crate::config::Durability;
use crate::engine::{Engine, Need};
use crate::env::Shared;
use crate::error::{Error, Result};
use crate::wal::reader::RunMerge;
use crate::wal::{Op, OpsBuilder, Record, RunsBuilder};
use std::sync::atomic::Ordering::{Relaxed, Release};

/// Times in a row a hold may find its first write's pages evicted since they were loaded
/// (by others' loads meanwhile) and give the lock up to load them again with none held.
const RELOADS: u32 = 4;
/// Writes applied per hold of the exclusive lock, and their bytes at most.
const BATCH_OPS: usize = 512;
const BATCH_BYTES: usize = 1 << 20;
/// The most writes a commit applies in one hold of the exclusive lock: a transaction with
/// more commits in batches even if it never spilled.
const LARGEST_HOLD: usize = 4 * BATCH_OPS;
/// A commit with no more writes than this applies them in one hold whatever the cache:
/// batching so few would save readers next to nothing, and deciding costs a read lock.
const SMALL_COMMIT: usize = 16;

/// Where a commit in batches takes its writes from: the merge of a spilled transaction's
/// runs (and the runs, which its commit record names), or the write set it kept in memory
/// (which its commit record holds).
enum Source {
    Runs(RunMerge, Vec<(u64, u32)>),
    /// The commit's operations (for its record) and the writes themselves (applied).
    Memory(OpsBuilder, Box<dyn Iterator<Item = (Sk, Written)> + Send>),
}

/// A write of a commit as `(database, scoped key, write)` (the scoped key goes to the undo
/// store once the write is applied, unless the commit creates the database).
type OwnedWrite = (u32, Sk, Write);

fn owned(op: Op) -> OwnedWrite {
    let w = op.value().map(<[u8]>::to_vec);
    (op.db(), Sk::scoped(op.db(), op.key()), w)
}

/// The database a transaction both removes and creates (by name), if any: such a
/// transaction cannot commit in batches, where removals happen at the end and creations at
/// the start (a name cannot pass from an older database to a new one in between).
fn renamed(ddl: &[Ddl]) -> Option<&str> {
    let created = |id: u32| {
        ddl.iter()
            .any(|d| matches!(d, Ddl::Create { db, .. } if *db == id))
    };
    let removed = |id: u32| {
        ddl.iter()
            .any(|d| matches!(d, Ddl::Remove { db, .. } if *db == id))
    };
    let kept_name = |name: &str| {
        ddl.iter()
            .any(|d| matches!(d, Ddl::Create { db, name: n, .. } if n == name && !removed(*db)))
    };
    ddl.iter().find_map(|d| match d {
        Ddl::Remove { db, name } if !created(*db) && kept_name(name) => Some(name.as_str()),
        _ => None,
    })
}

impl Shared {
    /// Whether a transaction that did not spill, with `writes` writes in memory and
    /// catalog changes `ddl`, commits in batches all the same (see the module comment):
    /// when its writes are more than one exclusive hold should apply, or more than the
    /// pages a commit loads before taking the lock (half the cache), so that neither a
    /// long hold nor loads under the lock stall every reader. (In a replication group, only
    /// the local commit that applies a large replicated one does: see `txn::parts`.)
    pub(super) fn commits_in_batches(&self, writes: usize, ddl: &[Ddl]) -> bool {
        if writes <= SMALL_COMMIT || renamed(ddl).is_some() {
            return false;
        }
        let prefetched = self.engine.read().pager.cache.capacity() / 2;
        self.tx().is_ok() && writes > prefetched.min(LARGEST_HOLD)
    }

    /// Commits transaction `txn` in batches (see the module comment): one whose writes
    /// spilled, from the merge of its runs, or one too large for a single hold
    /// ([`Shared::commits_in_batches`]), from memory; waits for durability `d`. Returns
    /// the commit's LSN.
    pub(super) fn commit_in_batches(&self, txn: u64, st: &mut State, d: Durability) -> Result<u64> {
        self.live()?;
        let tx = self.tx()?;
        let wal = tx.wal.as_ref();
        let mut source = match st.writes.spilled() {
            true => {
                let (runs, reader) = st.writes.runs(txn, &tx.txns.stats)?;
                Source::Runs(RunMerge::new(reader, txn, runs.iter().copied()), runs)
            }
            false => {
                let (ops, writes) = st.commit_writes();
                Source::Memory(ops, writes.into_iter())
            }
        };
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
        if let Some(name) = renamed(&st.ddl) {
            return Err(Error::InvalidArgument(format!(
                "a transaction that spilled to the log cannot both remove and create database \
                 {name:?}; commit between the two"
            )));
        }
        let mut touched: Vec<u32> = st.dbs.clone();
        touched.extend(creates.iter().map(|(db, _, _)| *db));
        // The values before of a commit from memory stay in memory as its writes did, up
        // to the same budget (deletes and overwrites of long values can take far more).
        let keep_in_memory = match &source {
            Source::Runs(..) => 0,
            Source::Memory(..) => tx.txn_memory,
        };
        let store = UndoStore::new(
            self.storage.clone(),
            keep_in_memory,
            touched,
            creates.iter().map(|(db, _, _)| *db).collect(),
            removed.clone(),
        );
        if keep_in_memory == 0 {
            // Its file is made now, so that failing to make it fails the commit before
            // anything is applied, not by poisoning the environment halfway.
            store.make_file()?;
        }

        // Step 2.
        {
            let mut e = self.exclusive();
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
        let applied = match &mut source {
            Source::Runs(merge, _) => {
                self.apply_batches(&mut || Ok(merge.next()?.map(owned)), &store, &removed)
            }
            Source::Memory(_, writes) => {
                let mut next = || {
                    Ok(writes.next().map(|(sk, written)| {
                        let db = u32::from_be_bytes(sk[..4].try_into().expect("scoped"));
                        (db, sk, written.w)
                    }))
                };
                self.apply_batches(&mut next, &store, &removed)
            }
        };
        let mut e = self.exclusive();
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
            let mut records: Vec<Record> = st.ddl.iter().map(|d| d.record(txn)).collect();
            records.push(match &source {
                Source::Runs(_, runs) => {
                    for &(first, n) in runs {
                        listed.push(first, n);
                    }
                    Record::CommitRuns {
                        txn,
                        prev: 0,
                        ddl: st.ddl.len() as u32,
                        runs: listed.runs(),
                    }
                }
                Source::Memory(ops, _) => Record::Commit {
                    txn,
                    prev: 0,
                    ops: ops.ops(),
                },
            });
            // The first follows the last run; `append` chains the rest.
            records[0] = records[0].with_prev(st.writes.last_lsn());
            match wal {
                Some(w) => w.append(&mut w.arrive(), &records),
                None => super::commit::in_memory_lsn(tx, records.into_iter()),
            }
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
        drop(garbage);
        self.bulk_done.wake_all();
        st.writes.end_hold(Some(lsn));
        let counter = match source {
            Source::Runs(..) => &tx.txns.stats.spilled_commits,
            Source::Memory(..) => &tx.txns.stats.large_commits,
        };
        counter.fetch_add(1, Relaxed);
        if let Some(w) = wal {
            w.wait(lsn, d)?;
        }
        if !removed.is_empty() {
            // As for any commit that removes databases (see `Shared::commit_local`).
            let _ = self.free_doomed();
        }
        self.request_background_work(tx, lsn);
        Ok(lsn)
    }

    /// Step 3: the merge applied in batches. A hold that finds the pages of its next write
    /// missing (never loaded, or evicted by others' loads meanwhile, or by the batch's own)
    /// ends there, and the rest of the batch is loaded with no lock, fewer writes at a
    /// time, before the next hold. A hold whose first write's pages
    /// went too applies nothing and loads it again, up to [`RELOADS`] times in a row; only
    /// then does it load under the lock.
    fn apply_batches(
        &self,
        next_write: &mut dyn FnMut() -> Result<Option<OwnedWrite>>,
        store: &UndoStore,
        removed: &[u32],
    ) -> Result<()> {
        // No more writes than the pages a prefetch keeps (see `Shared::prefetch`).
        let ops = (self.engine.read().pager.cache.capacity() / 2).clamp(1, BATCH_OPS);
        let mut batch: Vec<OwnedWrite> = Vec::with_capacity(ops);
        // The writes loaded and applied per hold, and the holds in a row that found even
        // their first write's pages evicted since they were loaded.
        let mut window = ops;
        let mut missed = 0;
        // Whether the last hold ended at a write whose pages were not in the cache: the
        // next window is loaded first (else it is tried at once: most often, the pages
        // are there, and a load with no lock would look each write up once more).
        let mut short = false;
        loop {
            if batch.is_empty() {
                let mut bytes = 0;
                while batch.len() < ops && bytes < BATCH_BYTES {
                    let Some((db, key, w)) = next_write()? else {
                        break;
                    };
                    if removed.contains(&db) {
                        continue;
                    }
                    bytes += key.len() - 4 + w.as_ref().map_or(0, Vec::len);
                    batch.push((db, key, w));
                }
                if batch.is_empty() {
                    return Ok(());
                }
            }
            if short {
                self.prefetch_keys(
                    batch
                        .iter()
                        .take(window)
                        .map(|(db, sk, w)| (*db, &sk[4..], w.is_none())),
                );
            }
            let (applied, undo_full) = {
                self.live()?;
                let mut e = self.exclusive();
                e.check_writable()?;
                let (mut applied, mut undo_full) = (0, false);
                for (db, sk, w) in batch.iter_mut().take(window) {
                    let (db, key) = (*db, &sk[4..]);
                    // Only what is in the cache is applied under the lock (see above); a
                    // put's leaf found resident gives the value before at once.
                    let may_stop = applied > 0 || missed < RELOADS;
                    let mut before = None;
                    let done = match w {
                        // A put's pages found resident give the value before on the way.
                        Some(v) => match e.put_resident(db, key, v, &mut before) {
                            Ok(()) => Ok(()),
                            Err(Need::Page(_)) if may_stop => break,
                            Err(Need::Page(_)) => {
                                before = e.read_tree_loading(db, key)?;
                                e.put(db, key, v, false).map(drop)
                            }
                            Err(Need::Fail(err)) => Err(err),
                        },
                        None => {
                            if may_stop && e.locate_for_delete(db, key).is_err() {
                                break;
                            }
                            before = e.read_tree_loading(db, key)?;
                            e.delete(db, key).map(drop)
                        }
                    };
                    // Kept even if the write failed partway (readers see the value before);
                    // a database the commit creates is named in the store instead.
                    let to_write = match store.creates(db) {
                        true => 0,
                        false => store.push(std::mem::take(sk).into_vec(), before),
                    };
                    done?;
                    applied += 1;
                    // Long values before (deletes and overwrites of them): the hold ends,
                    // so the store writes them with no lock held before it takes more.
                    if to_write >= BATCH_BYTES {
                        undo_full = true;
                        break;
                    }
                }
                self.data_version.fetch_add(1, Release);
                e.shrink_cache();
                (applied, undo_full)
            };
            // A window whose pages did not all stay (each write may need its leaf, a
            // sibling and branches) shrinks to what did; one that did grows back. A hold
            // that applied nothing loads its first write again, with no lock, up to
            // `RELOADS` times in a row before it loads under the lock.
            missed = if applied == 0 { missed + 1 } else { 0 };
            short = applied < window.min(batch.len()) && !undo_full;
            window = match short {
                true => applied.max(1),
                false => (window * 2).min(ops),
            };
            batch.drain(..applied);
            store.flush()?;
        }
    }

    /// A failure once the trees may hold part of the commit: the environment is poisoned
    /// (only recovery can make trees and log agree); the store stays, so readers keep seeing
    /// the values before the commit.
    fn fail_applying(&self, e: &mut Engine, err: Error) -> Error {
        e.poisoned
            .get_or_insert_with(|| format!("a large commit failed while being applied: {err}"));
        self.bulk_done.wake_all();
        err
    }
}
