//! What every handle of an environment shares: the engine behind its read-mostly lock, and
//! the transactional state.
//!
//! Owns: the lock discipline. Reads run under the shared lock and never wait for each other;
//! a read that meets a non-resident page loads it with no lock held and retries (after
//! repeated conflicts with writers, under the exclusive lock, which loads it). Writes run
//! under the exclusive lock, always taken as an [`Exclusive`], whose release writes what
//! the hold handed to the write-back. Eviction runs after an exclusive operation, so no page
//! disappears while an operation holds it. May call: `engine`, `txn`, `wal`, `storage`.

use super::checkpointer::CheckpointSignal;
use crate::config::{Durability, Isolation};
use crate::engine::{Engine, Need, NeedResult, WriteBack};
use crate::error::{Error, Result};
use crate::files::SCRATCH_PREFIX;
use crate::storage::scratch::Scratch;
use crate::storage::Storage;
use crate::sync::{OwnLine, ReadMostlyLock, WriteGuard};
use crate::txn::TxnManager;
use crate::wal::{Record, Wal};
use parking_lot::Mutex;
use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// What every handle of one environment shares.
///
/// Lock order (docs/architecture.md, "Lock order"): `checkpoint_mutex`, then `freeing`, then
/// `engine`, then the transaction registry and the log's `retained`, then the log's
/// `syncs`, then its `inner`; the key-lock table, the log's `spare`, the background signal and `replicator`
/// are leaves.
pub(crate) struct Shared {
    pub(crate) engine: ReadMostlyLock<Engine>,
    /// Bumped by every write: cursors use it to know their copied entries are current. On
    /// a line of its own: the fields around it are read by every operation.
    pub(crate) data_version: OwnLine<AtomicU64>,
    pub(super) closed: AtomicBool,
    pub(crate) storage: Arc<dyn Storage>,
    pub(super) lock: Mutex<Option<Box<dyn Any + Send + Sync>>>,
    /// Held by checkpoints and by `verify`, which reads the durable checkpoint from disk.
    pub(crate) checkpoint_mutex: Mutex<()>,
    /// Held by whoever frees removed databases' pages ([`Shared::free_doomed`]), and by a
    /// checkpoint, which frees what is left before it begins.
    pub(crate) freeing: Mutex<()>,
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
    /// The engine's: pages its exclusive holds hand over, written by [`Shared::write_back`].
    pub(crate) writeback: Arc<WriteBack>,
}

/// The engine under the exclusive lock ([`Shared::exclusive`]). Its release writes what
/// the hold handed to the write-back (evicted dirty pages, new overflow chains; see
/// `engine/writeback.rs`) with no lock held, so no exclusive hold can leave those writes
/// waiting for a later one.
pub(crate) struct Exclusive<'a> {
    guard: Option<WriteGuard<'a, Engine>>,
    shared: &'a Shared,
}

impl std::ops::Deref for Exclusive<'_> {
    type Target = Engine;
    fn deref(&self) -> &Engine {
        self.guard.as_ref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for Exclusive<'_> {
    fn deref_mut(&mut self) -> &mut Engine {
        self.guard.as_mut().expect("held until dropped")
    }
}

impl Drop for Exclusive<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        self.shared.write_back();
    }
}

/// Loads a reader tries without the exclusive lock before it takes it.
pub(super) const READ_ATTEMPTS: usize = 64;

/// What a transactional environment adds.
pub(crate) struct Tx {
    /// `None` with an in-memory log.
    pub wal: Option<Arc<Wal>>,
    /// With an in-memory log: where transactions spill ([`Shared::spill_log`]).
    pub scratch: Mutex<ScratchLogs>,
    /// The size of a log segment (of the scratch log too).
    pub log_segment_size: u64,
    pub txns: TxnManager,
    pub durability: Durability,
    pub isolation: Isolation,
    pub lock_timeout: std::time::Duration,
    pub txn_memory: usize,
    pub(super) keep_logs: bool,
    pub checkpoint_log_bytes: u64,
    /// The in-memory log's next LSN (bumped by every commit: on a line of its own).
    pub inmem_lsn: OwnLine<AtomicU64>,
    pub last_checkpoint_lsn: AtomicU64,
    /// The cache held every page of the trees after the last commit: commits skip loading
    /// their pages ahead (`Shared::prefetch`).
    pub pages_resident: OwnLine<AtomicBool>,
    /// Wakes the background checkpointer early (log volume reached, or closing).
    pub(super) checkpoint_signal: Arc<CheckpointSignal>,
    pub recovered_commits: u64,
}

/// With the log in memory, the scratch logs transactions spill to. A failed write or sync
/// poisons a log for good; a scratch log holds nothing to lose, so the next spill starts a
/// new one (the old one stays with the transactions that spilled to it, and its files go
/// with the last of them), and a full disk stops large transactions only while it is full.
#[derive(Default)]
pub(crate) struct ScratchLogs {
    /// The one new spills go to: made by the first, replaced once poisoned.
    current: Option<Arc<Wal>>,
    /// How many were made: each one's files are named `spill.N.*` by its number.
    made: u64,
    /// Set at close: no scratch file changes after that (`storage::scratch`).
    closed: Arc<AtomicBool>,
}

impl Shared {
    pub(crate) fn tx(&self) -> Result<&Tx> {
        self.tx.as_ref().ok_or_else(|| {
            Error::InvalidArgument(
                "transactions need an environment opened with Config::transactional(true)".into(),
            )
        })
    }

    /// The log a transaction spills its writes to when they outgrow its memory: the
    /// environment's, or, with the log in memory, a scratch log of files named `spill.*` in
    /// the environment's storage (`Wal::scratch`, see [`ScratchLogs`]).
    pub(crate) fn spill_log(&self) -> Result<Arc<Wal>> {
        let tx = self.tx()?;
        if let Some(w) = &tx.wal {
            return Ok(w.clone());
        }
        let mut logs = tx.scratch.lock();
        if let Some(w) = logs.current.as_ref().filter(|w| !w.is_poisoned()) {
            return Ok(w.clone());
        }
        let prefix = format!("{SCRATCH_PREFIX}{}.", logs.made);
        logs.made += 1;
        let files = Scratch::new(self.storage.clone(), prefix, logs.closed.clone());
        let env_id = self.engine.read().env_id;
        let wal = Arc::new(Wal::scratch(Arc::new(files), tx.log_segment_size, env_id)?);
        logs.current = Some(wal.clone());
        Ok(wal)
    }

    /// At close: no scratch file may change once the directory is released, and none is
    /// left (one a failure leaves behind is removed by the next open).
    pub(super) fn close_scratch_logs(&self) {
        let Some(tx) = &self.tx else { return };
        let mut logs = tx.scratch.lock();
        logs.closed.store(true, Ordering::Release);
        logs.current = None;
        for name in self.storage.list().unwrap_or_default() {
            if name.starts_with(SCRATCH_PREFIX) {
                let _ = self.storage.remove(&name);
            }
        }
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

    /// The engine under the exclusive lock (every writer waits for it, and it waits for
    /// every reader to leave); its release writes what the hold handed to the write-back.
    pub(crate) fn exclusive(&self) -> Exclusive<'_> {
        Exclusive {
            guard: Some(self.engine.write()),
            shared: self,
        }
    }

    /// [`Shared::exclusive`] for a committer that need not wait for an fsync: it backs off
    /// before it queues for the lock (see `sync::ReadMostlyLock::write_backing_off`).
    pub(crate) fn exclusive_backing_off(&self) -> Exclusive<'_> {
        Exclusive {
            guard: Some(self.engine.write_backing_off()),
            shared: self,
        }
    }

    /// Writes what exclusive holds handed over (evicted dirty pages, new overflow chains;
    /// see `engine/writeback.rs`). Called with no engine lock held, when an [`Exclusive`]
    /// is released. The operation that handed them over has succeeded; a failed write
    /// poisons the engine (the one exclusive hold that does not write back when released:
    /// it would only come here again), and the images stay for loads.
    fn write_back(&self) {
        if let Err((context, e)) = self.writeback.flush() {
            self.engine.write().poison(context, e);
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
                    Err(Need::Page(pid)) => e.pager.miss(pid),
                }
            };
            let loaded = miss.load();
            let overfull = {
                let e = self.engine.read();
                match loaded {
                    Ok(image) => {
                        e.pager.cache.add_loaded(miss.pid, image, miss.epoch);
                    }
                    // Unless the page changed meaning meanwhile (freed, reused), a real error.
                    Err(err) if e.pager.cache.epoch(miss.pid) == miss.epoch => return Err(err),
                    Err(_) => {}
                }
                e.pager.cache.len() > e.pager.cache.capacity() + e.pager.cache.capacity() / 4 + 64
            };
            if overfull {
                // A brief hold with no I/O: clean pages only, down to 7/8 of the budget.
                let mut e = self.exclusive();
                e.pager
                    .cache
                    .reader_evictions
                    .fetch_add(1, Ordering::Relaxed);
                e.pager.shrink_clean();
            }
        }
        // Writers kept changing what the reader needed: load under the exclusive lock.
        let mut e = self.exclusive();
        e.pager.cache.reads_locked.fetch_add(1, Ordering::Relaxed);
        loop {
            match op(&e) {
                Ok(v) => {
                    let version = self.data_version.load(Ordering::Acquire);
                    e.shrink_cache();
                    return Ok((v, version));
                }
                Err(Need::Fail(err)) => return Err(err),
                Err(Need::Page(pid)) => e.pager.load(pid)?,
            }
        }
    }

    /// Runs a modifying `op` under the exclusive lock.
    pub(crate) fn write<T>(&self, op: impl FnOnce(&mut Engine) -> Result<T>) -> Result<T> {
        self.live()?;
        let mut e = self.exclusive();
        e.check_writable()?;
        let r = op(&mut e);
        self.data_version.fetch_add(1, Ordering::Release);
        e.shrink_cache();
        r
    }

    /// Frees the pages of removed databases' trees (`Engine::doomed`), a batch at a time:
    /// each batch's pages are read under the shared lock (a miss loaded with no lock), their
    /// overflow chains read with no lock (nobody changes a removed tree), and the exclusive
    /// lock is held only to free them, never for a walk of the whole tree.
    pub(crate) fn free_doomed(&self) -> Result<()> {
        let freeing = self.freeing.lock();
        self.free_doomed_holding(&freeing)
    }

    /// [`Shared::free_doomed`], by the holder of `freeing`: only it takes pages off the
    /// front of the list (removals add theirs at the back).
    fn free_doomed_holding(&self, _freeing: &parking_lot::MutexGuard<'_, ()>) -> Result<()> {
        // Fewer than a read's attempts, so that a batch whose every page misses is loaded
        // with no lock held, not under the exclusive lock after the read runs out of them.
        const BATCH: usize = READ_ATTEMPTS / 2;
        loop {
            // A page missing from the cache makes the read run its closure again: the pages
            // already walked are kept across runs (a removed tree's pages never change, and
            // only this holder takes them off the list), so each run walks only the pages
            // after them (it walked the batch again per miss, a load of a whole index
            // costing 30 times its pages).
            let mut batch = Vec::with_capacity(BATCH);
            let (chains, _) = self.read(|e| {
                for &pid in e.doomed.iter().skip(batch.len()).take(BATCH - batch.len()) {
                    batch.push((pid, crate::engine::tree_refs(e.pager.page(pid)?)));
                }
                Ok(e.chain_reader())
            })?;
            if batch.is_empty() {
                return Ok(());
            }
            let taken = batch.len();
            let (mut freed, mut children) = (Vec::new(), Vec::new());
            for (pid, (kids, long)) in batch {
                freed.push(pid);
                children.extend(kids);
                for (first, len) in long {
                    freed.extend(chains.pages(first, len)?);
                }
            }
            let mut e = self.exclusive();
            e.doomed.drain(..taken);
            e.doomed.extend(children);
            for pid in freed {
                e.pager.free_page(pid);
            }
            e.shrink_cache();
        }
    }

    /// A checkpoint of everything committed so far. The exclusive lock is held only to begin
    /// and to end it: pages are written and synced while reads and commits go on. In a
    /// transactional environment, log segments it makes unnecessary are then removed (or
    /// kept for archiving).
    pub(crate) fn checkpoint(&self) -> Result<()> {
        let _ckpt = self.checkpoint_mutex.lock();
        // No checkpoint may hold a removed tree that is neither reachable nor free.
        let freeing = self.freeing.lock();
        self.free_doomed_holding(&freeing)?;
        let (work, lsn) = {
            // Holding the exclusive lock, no commit is between its log append and its apply;
            // nor may a spilled transaction's commit be (its batches are applied before its
            // record is logged).
            let mut e = loop {
                let seen = self.bulk_done.seq();
                let e = self.exclusive();
                if !e.undo.iter().any(|u| u.lsn().is_none()) || e.poisoned.is_some() {
                    break e;
                }
                drop(e);
                self.bulk_done.wait(seen, std::time::Duration::ZERO);
            };
            // A database removed since: its tree too (rare, and it was just committed).
            if !e.doomed.is_empty() {
                e.free_doomed_now()?;
            }
            drop(freeing);
            let lsn = match &self.tx {
                None => None,
                Some(tx) => {
                    let (lsn, chain, segment) = match &tx.wal {
                        Some(w) => {
                            if e.pager.changed || w.end() != e.log_lsn {
                                // Marks, for readers of the log, where this checkpoint begins.
                                let generation = e.pager.generation + 1;
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
                        e.pager.changed = true;
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
                return Err(self.exclusive().poison_with(context, err));
            }
        }
        if let Some(work) = work {
            let written = work.write(|| self.engine.read());
            let mut e = self.exclusive();
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
    /// After the closing checkpoint: marks it in the page file as covering the whole log
    /// (`Engine::mark_closed_clean`), when it does. Under the exclusive lock, so that no
    /// commit can slip in between the check and the mark; closing is the one place where
    /// this lock is held across a write and an fsync.
    pub(super) fn mark_closed_clean(&self) -> Result<()> {
        let Some(w) = self.tx.as_ref().and_then(|t| t.wal.as_ref()) else {
            return Ok(());
        };
        let _ckpt = self.checkpoint_mutex.lock();
        let mut e = self.exclusive();
        e.mark_closed_clean(w.end())
    }

    pub(super) fn stop_checkpointer(&self) {
        if let Some(tx) = &self.tx {
            tx.checkpoint_signal.stop();
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
