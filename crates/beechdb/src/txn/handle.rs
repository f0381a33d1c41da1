//! The public transaction handle.
//!
//! Owns: [`Txn`], [`Savepoint`] and a transaction's private state (its write set in layers,
//! one per live savepoint, its held locks, its databases created and removed). May call:
//! `env` (reads through the engine's locks), `txn::commit`, `txn::writes`, the lock table.
//! Invariants: every method takes `&self`, the state sitting behind a mutex that is never
//! held while the engine's lock is taken by anything but the commit (so an iterator, which
//! takes the engine's lock and then the state's, never waits on a cycle); a key is in
//! `locked` exactly when the lock table holds it for this transaction, and the keys of a
//! database in `escalated` are held by the database's lock instead; live savepoint `i`
//! begins write-set layer `i + 1`.

use super::scan::TxnIter;
use super::writes::{Merged, Sk, WriteSet};
use super::{scoped_key, Ddl};
use crate::btree::cursor::KeyRange;
use crate::btree::Seek;
use crate::config::{Duplicates, Durability, GroupDurability, Isolation};
use crate::dups;
use crate::engine::Need;
use crate::env::{Db, Shared};
use crate::error::{Error, Result};
use crate::replica::HeldLocks;
use crate::wal::{Op, OpsBuilder};
use parking_lot::{Mutex, MutexGuard};
use rustc_hash::FxHashSet;
use std::ops::Bound;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// The lock-table "database" of database names: creating or removing a database locks its
/// name, so two transactions cannot both create (or remove) the same one.
const CATALOG_LOCK: u32 = crate::engine::CATALOG;

/// Key locks a transaction holds before it asks for the whole database of the key it is
/// locking (and again after as many more). A key lock costs about 128 bytes (its entries in
/// the lock table and in the transaction's set), so these take at most about an eighth of
/// the transaction's memory; and at most 4,096 (as SQL Server's 5,000): past that, each
/// key lock costs a load a thousand instructions a write (a seventh of an SQL row's
/// insert), where a transaction that writes so many keys of one database is a load or a
/// bulk change, which other writers of that database would wait for anyway.
fn escalation_threshold(txn_memory: usize) -> usize {
    (txn_memory / 1024).clamp(64, 4096)
}

/// A transaction over any databases of one environment. Reads see a snapshot taken at
/// [`crate::Env::begin_txn`] (or the latest committed data under read-committed isolation)
/// plus the transaction's own writes. Every method takes `&self`, so a transaction can be
/// shared (between threads too), written while it is being iterated, and held by bindings;
/// once committed or aborted, every call fails with [`Error::TxnFinished`]. Dropping an
/// unfinished transaction aborts it (when its iterators are gone too).
///
/// ```
/// use beechdb::{Config, Env};
/// let dir = tempfile::tempdir()?;
/// let env = Env::open(dir.path(), Config::new().transactional(true))?;
/// let accounts = env.open_or_create_db("accounts")?;
/// let txn = env.begin_txn()?;
/// txn.put(&accounts, b"alice", b"100")?;
/// let before_bob = txn.savepoint()?;
/// txn.put(&accounts, b"bob", b"50")?;
/// txn.rollback_to(&before_bob)?; // bob's write is undone, alice's kept
/// let lsn = txn.commit()?; // durable (fsynced) when this returns
/// assert!(lsn > 0);
/// assert_eq!(accounts.get(b"alice")?, Some(b"100".to_vec()));
/// assert_eq!(accounts.get(b"bob")?, None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Txn {
    inner: Arc<TxnInner>,
}

/// A point in a transaction to roll back to ([`Txn::rollback_to`]) or to release
/// ([`Txn::release`]), as SQL's `SAVEPOINT`.
#[derive(Debug)]
pub struct Savepoint {
    txn: u64,
    id: u64,
}

pub(crate) struct TxnInner {
    pub(super) shared: Arc<Shared>,
    id: u64,
    pub(super) snapshot: Option<u64>,
    state: Mutex<State>,
}

pub(super) struct State {
    /// The latest write of each key (scoped by database), in layers.
    pub(super) writes: WriteSet,
    /// Live savepoints, oldest first.
    marks: Vec<Mark>,
    next_mark: u64,
    locked: FxHashSet<Vec<u8>>,
    /// Databases held whole instead of key by key, and the count of key locks at which to
    /// try that next.
    escalated: Vec<u32>,
    escalate_at: usize,
    /// Databases created and removed, in order.
    pub(super) ddl: Vec<Ddl>,
    /// Databases written (each once).
    pub(super) dbs: Vec<u32>,
    /// Counts this transaction's changes to what it sees: each write, each rollback to a
    /// savepoint; with, for each database of `dbs` (same position), the count at its
    /// latest write, and the count at the latest rollback (see [`Txn::changes_to`]).
    changes: u64,
    written_at: Vec<u64>,
    rolled_back: u64,
    durability: Durability,
    /// In a replication group, how the commit is made durable, when set.
    pub(super) group: Option<GroupDurability>,
    registered: Option<u64>,
    finished: bool,
}

impl Shared {
    /// Spills the write set of transaction `txn` (state `st`) when it outgrows the
    /// transaction budget.
    pub(super) fn spill_if_over(&self, txn: u64, st: &mut State) -> Result<()> {
        let tx = self.tx()?;
        if st.writes.mem_bytes() <= tx.txn_memory {
            return Ok(());
        }
        // Key filters may take a quarter as much again (see `WriteSet::spill`).
        let filters = tx.txn_memory / 4;
        st.writes
            .spill(|| self.spill_log(), txn, &tx.txns.stats, filters)
    }
}

/// Where a savepoint was taken: the lengths of the DDL list and the written databases at
/// that moment (its writes go to a write-set layer of their own).
struct Mark {
    id: u64,
    ddl: usize,
    dbs: usize,
}

impl State {
    /// Whether this transaction created database `db` (and has not removed it).
    pub(super) fn created(&self, db: u32) -> bool {
        self.ddl
            .iter()
            .any(|d| matches!(d, Ddl::Create { db: c, .. } if *c == db))
            && !self.removed(db)
    }

    pub(super) fn removed(&self, db: u32) -> bool {
        self.ddl
            .iter()
            .any(|d| matches!(d, Ddl::Remove { db: r, .. } if *r == db))
    }

    /// For a transaction that never spilled: its writes as a commit's operations, in
    /// scoped-key order, the latest of each key; writes to databases it removed go with
    /// them.
    pub(super) fn commit_ops(&mut self) -> OpsBuilder {
        self.commit_writes().0
    }

    /// As [`State::commit_ops`], with the writes themselves (to apply them without copying
    /// them out of the operations).
    pub(super) fn commit_writes(&mut self) -> (OpsBuilder, Merged) {
        // Sized once: a load's commit is megabytes, and growing it by doubling copied it
        // again and again.
        let mut ops = OpsBuilder::with_capacity(self.writes.commit_bytes());
        let writes = self.writes.merged();
        writes.for_each(|k, written| {
            let (db, key) = (u32::from_be_bytes(k[..4].try_into().unwrap()), &k[4..]);
            if !self.removed(db) {
                ops.push(match &written.w {
                    Some(value) => Op::Put { db, key, value },
                    None => Op::Delete { db, key },
                });
            }
        });
        (ops, writes)
    }

    pub(super) fn write(&mut self, db: u32, key: &[u8], value: Option<Vec<u8>>) {
        self.written(db);
        self.writes.insert(Sk::scoped(db, key), value);
    }

    /// [`State::write`] of puts of `entries` (see [`Txn::put_sorted`]).
    fn write_sorted(&mut self, db: u32, entries: Vec<(Vec<u8>, Vec<u8>)>) {
        self.written(db);
        let scoped = entries
            .into_iter()
            .map(|(k, v)| (Sk::scoped(db, &k), Some(v)));
        self.writes.insert_sorted(scoped.collect());
    }

    /// Counts a change to `db` (see [`Txn::changes_to`]).
    fn written(&mut self, db: u32) {
        self.changes += 1;
        match self.dbs.iter().position(|&d| d == db) {
            Some(i) => self.written_at[i] = self.changes,
            None => {
                self.dbs.push(db);
                self.written_at.push(self.changes);
            }
        }
    }

    /// Whether database `db` is one this transaction creates.
    fn created_here(&self, db: u32) -> bool {
        self.ddl
            .iter()
            .any(|d| matches!(d, Ddl::Create { db: c, .. } if *c == db))
    }

    /// The name's latest state in this transaction: `Some(Some(db))` created, `Some(None)`
    /// removed, `None` untouched.
    fn ddl_of(&self, name: &str) -> Option<Option<u32>> {
        self.ddl.iter().rev().find_map(|d| match d {
            Ddl::Create { db, name: n, .. } if n == name => Some(Some(*db)),
            Ddl::Remove { name: n, .. } if n == name => Some(None),
            _ => None,
        })
    }
}

impl TxnInner {
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock()
    }

    /// The state of a transaction still going; [`Error::TxnFinished`] after commit or abort.
    pub(super) fn open_state(&self) -> Result<MutexGuard<'_, State>> {
        let st = self.state.lock();
        if st.finished {
            return Err(Error::TxnFinished);
        }
        Ok(st)
    }

    /// The state, if `db` may be used by this transaction.
    pub(super) fn checked(&self, db: &Db) -> Result<MutexGuard<'_, State>> {
        if !db.same_env(&self.shared) {
            return Err(Error::InvalidArgument(
                "database handle belongs to another environment".into(),
            ));
        }
        let st = self.open_state()?;
        if st.removed(db.id()) {
            return Err(Error::DbRemoved);
        }
        Ok(st)
    }

    /// See [`finish`]; `held_many` as there.
    fn finish(&self, st: &mut State, committed: bool, held_many: bool) {
        finish(&self.shared, self.id, st, committed, held_many);
    }
}

/// Writes in memory at or above which a transaction's end hands the memory its write set
/// freed back at once (see [`release_freed`]).
const BIG_WRITE_SET: usize = 1 << 16;

/// Whether the end of a transaction in state `st` should call [`release_freed`].
fn big(st: &State) -> bool {
    st.writes.mem_writes() >= BIG_WRITE_SET
}

/// Merges the blocks a large write set freed and gives free memory back to the system.
/// glibc's allocator keeps small freed blocks unmerged until the next large allocation,
/// which then merges them all: after a 100,000-row load, the first statement to run paid
/// 20-35 ms for it (SQLite's first statement: 0.2 ms). This puts that work in the
/// transaction that made it.
fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only rearranges the allocator's free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Ends transaction `id` (state `st`) once: releases its locks and snapshot, frees its
/// writes and counts it; when its write set is big, or was (`held_many`: a commit has
/// taken the writes out already), hands the freed memory back.
fn finish(shared: &Shared, id: u64, st: &mut State, committed: bool, held_many: bool) {
    if st.finished {
        return;
    }
    let held_many = held_many || big(st);
    st.finished = true;
    if let Ok(tx) = shared.tx() {
        // (A transaction that locked nothing leaves the lock table's mutex alone.)
        if !st.locked.is_empty() {
            tx.txns.locks.release(id, st.locked.drain());
        }
        tx.txns
            .locks
            .release_databases(id, &std::mem::take(&mut st.escalated));
        st.writes.end_hold(None);
        if let Some(s) = st.registered.take() {
            tx.txns.unregister(s);
        }
        let counter = if committed {
            &tx.txns.stats.commits
        } else {
            &tx.txns.stats.aborts
        };
        counter.fetch_add(1, Relaxed);
    }
    drop(std::mem::take(&mut st.writes));
    if held_many {
        release_freed();
    }
}

impl Drop for TxnInner {
    fn drop(&mut self) {
        finish(&self.shared, self.id, self.state.get_mut(), false, false);
    }
}

impl State {
    /// The state of a transaction that applies a replicated commit here: it holds no
    /// locks and has no handle (see `txn::parts`).
    pub(super) fn applying(durability: Durability) -> State {
        State {
            durability,
            finished: false,
            ..State::empty()
        }
    }

    fn empty() -> State {
        State {
            writes: WriteSet::default(),
            marks: Vec::new(),
            next_mark: 0,
            locked: FxHashSet::default(),
            escalated: Vec::new(),
            escalate_at: 0,
            ddl: Vec::new(),
            dbs: Vec::new(),
            changes: 0,
            written_at: Vec::new(),
            rolled_back: 0,
            durability: Durability::Sync,
            group: None,
            registered: None,
            finished: true,
        }
    }
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
        let state = State {
            durability: tx.durability,
            registered: snapshot,
            finished: false,
            ..State::empty()
        };
        Ok(Txn {
            inner: Arc::new(TxnInner {
                shared,
                id,
                snapshot,
                state: Mutex::new(state),
            }),
        })
    }

    /// The LSN of the snapshot this transaction reads (`None` under read-committed).
    pub fn snapshot_lsn(&self) -> Option<u64> {
        self.inner.snapshot
    }

    /// Creates database `name` when the transaction commits; the handle works in this
    /// transaction at once, and everywhere after the commit. [`Error::DbExists`] if the
    /// name is taken.
    pub fn create_db(&self, name: &str) -> Result<Db> {
        self.create_db_with(name, Duplicates::None)
    }

    /// As [`Txn::create_db`], for a database with duplicates when `dups` says so.
    pub fn create_db_with(&self, name: &str, dups: Duplicates) -> Result<Db> {
        drop(self.inner.open_state()?);
        self.inner.shared.writable()?;
        crate::env::check_name(name)?;
        self.lock(CATALOG_LOCK, name.as_bytes())?;
        let committed = self.inner.shared.engine.read().names.contains_key(name);
        let mut st = self.inner.open_state()?;
        if st.ddl_of(name).map_or(committed, |d| d.is_some()) {
            return Err(Error::DbExists(name.to_string()));
        }
        let db = self.inner.shared.write(|e| Ok(e.alloc_db_id()))?;
        st.ddl.push(Ddl::Create {
            db,
            name: name.to_string(),
            dups,
        });
        Ok(Db::new(self.inner.shared.clone(), db, name, dups))
    }

    /// Removes database `name` when the transaction commits; its handles fail with
    /// [`Error::DbRemoved`] in this transaction at once, and everywhere after the commit.
    pub fn remove_db(&self, name: &str) -> Result<()> {
        drop(self.inner.open_state()?);
        self.inner.shared.writable()?;
        self.lock(CATALOG_LOCK, name.as_bytes())?;
        let committed = self.inner.shared.engine.read().names.get(name).copied();
        let mut st = self.inner.open_state()?;
        let db = st
            .ddl_of(name)
            .unwrap_or(committed)
            .ok_or_else(|| Error::DbNotFound(name.to_string()))?;
        st.ddl.push(Ddl::Remove {
            db,
            name: name.to_string(),
        });
        Ok(())
    }

    /// The value of `key` in `db` as this transaction sees it (with duplicates, the first).
    pub fn get(&self, db: &Db, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_with(db, key, <[u8]>::to_vec)
    }

    /// As [`Txn::get`], lending the value to `f` rather than copying it out. `f` runs while
    /// the environment's shared lock is held, so it must not call into the environment.
    pub fn get_with<R>(
        &self,
        db: &Db,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>> {
        if db.duplicates() != Duplicates::None {
            let mut first = self.range(db, key..=key);
            return Ok(first.next_ref().transpose()?.map(|(_, v)| f(v)));
        }
        self.entry_with(db, key, f)
    }

    /// The tree entry under `key` as it is (a composite, with duplicates), copied.
    fn get_entry(&self, db: &Db, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.entry_with(db, key, <[u8]>::to_vec)
    }

    /// Calls `f` with the tree entry under `key` as this transaction sees it.
    fn entry_with<R>(&self, db: &Db, key: &[u8], f: impl FnOnce(&[u8]) -> R) -> Result<Option<R>> {
        {
            let mut st = self.inner.checked(db)?;
            // (A read-only transaction's empty write set needs no key built to search it.)
            if !st.writes.is_empty() {
                let stats = &self.inner.shared.tx()?.txns.stats;
                if let Some(w) = st.writes.get(&scoped_key(db.id(), key), stats)? {
                    return Ok(w.map(|v| f(&v)));
                }
            }
            if st.created(db.id()) {
                return Ok(None);
            }
        }
        let at = self.inner.snapshot;
        let mut f = Some(f);
        let (v, _) = self
            .inner
            .shared
            .read(|e| e.read_at(db.id(), key, at, &mut f))?;
        Ok(v)
    }

    /// Calls `f` with each entry of `db` whose key is `from` or greater, ascending, as this
    /// transaction sees them, until `f` returns `false` or the entries end. Keys and values
    /// are lent, not copied: leaf after leaf, while no newer commit and none of this
    /// transaction's writes need merging (then the rest through the merging scan), so a
    /// walk allocates nothing. `f` runs while the environment's shared lock is held (taken
    /// once a leaf), so it must not call into the environment.
    pub fn visit_from(
        &self,
        db: &Db,
        from: &[u8],
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let plain = db.duplicates() == Duplicates::None && {
            let st = self.inner.checked(db)?;
            st.writes.is_empty() && !st.created(db.id())
        };
        // The last key lent, once a leaf has been walked.
        let mut after: Option<Vec<u8>> = None;
        if plain {
            let at = self.inner.snapshot;
            loop {
                let (walk, _) = self.inner.shared.read(|e| {
                    if !e.trees_as_seen(at) {
                        return Ok(Some(None));
                    }
                    let seek = match &after {
                        None => Seek::Ge(from),
                        Some(last) => Seek::Gt(last),
                    };
                    crate::btree::cursor::visit_leaf(e, db.id(), seek, &mut f).map(|l| l.map(Some))
                })?;
                match walk {
                    None => return Ok(()),
                    Some(Some(last)) => after = Some(last),
                    Some(None) => break,
                }
            }
        }
        // The rest (or all, when something must be merged) through the merging walk.
        let from = match after {
            Some(last) => Bound::Excluded(last),
            None => Bound::Included(from.to_vec()),
        };
        let mut rest = self.scan(db, (from, Bound::Unbounded), false);
        while let Some(kv) = rest.next_ref() {
            let (k, v) = kv?;
            if !f(k, v) {
                break;
            }
        }
        Ok(())
    }

    /// The entries of `db` with keys in `range`, ascending, as this transaction sees them: its
    /// snapshot (or, under read-committed, the latest committed data as each leaf is read)
    /// plus its own writes, including those made while the iteration goes on, in the part
    /// of the range not yet reached. Streams a leaf at a time; holds no lock between items.
    pub fn range(&self, db: &Db, range: impl KeyRange) -> TxnIter {
        self.scan(db, range, false)
    }

    /// Every entry of `db`, ascending, as this transaction sees it.
    pub fn iter(&self, db: &Db) -> TxnIter {
        self.scan(db, .., false)
    }

    /// As [`Txn::range`], descending.
    pub fn range_rev(&self, db: &Db, range: impl KeyRange) -> TxnIter {
        self.scan(db, range, true)
    }

    /// The first entry of `range` as this transaction sees it: `range(..).next()` without
    /// copying the entries after it.
    pub fn first(&self, db: &Db, range: impl KeyRange) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.scan(db, range, false)
            .one_at_a_time()
            .next()
            .transpose()
    }

    /// The last entry of `range` as this transaction sees it (see [`Txn::first`]).
    pub fn last(&self, db: &Db, range: impl KeyRange) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.scan(db, range, true)
            .one_at_a_time()
            .next()
            .transpose()
    }

    /// The number of entries of `db` this transaction sees (with duplicates, of pairs).
    /// Read from the tree's count, with each of the transaction's own writes in `db`
    /// checked against the tree, when the trees are as its snapshot saw them and it has
    /// written few keys there; else counted through the merging scan.
    pub fn len(&self, db: &Db) -> Result<u64> {
        // Own writes checked one by one: beyond this many, the scan is cheaper.
        const OWN_WRITES: usize = 64;
        let own = {
            let mut st = self.inner.checked(db)?;
            if st.created(db.id()) {
                None
            } else if st.writes.is_empty() {
                Some(Vec::new())
            } else {
                let (lo, hi) = super::scoped_range(db.id(), &Bound::Unbounded, &Bound::Unbounded);
                let (writes, cut) = st.writes.range(&lo, &hi, false, OWN_WRITES + 1)?;
                (cut.is_none() && writes.len() <= OWN_WRITES).then_some(writes)
            }
        };
        if let Some(own) = own {
            let at = self.inner.snapshot;
            let (counted, _) = self.inner.shared.read(|e| {
                if !e.trees_as_seen(at) {
                    return Ok(None);
                }
                let mut n = e.db(db.id())?.entries;
                for (sk, w) in &own {
                    match (e.locate(db.id(), &sk[4..])?.is_some(), w.is_some()) {
                        (false, true) => n += 1,
                        (true, false) => n -= 1,
                        _ => {}
                    }
                }
                Ok(Some(n))
            })?;
            if let Some(n) = counted {
                return Ok(n);
            }
        }
        let mut entries = self.scan(db, .., false);
        let mut n = 0;
        while let Some(kv) = entries.next_ref() {
            kv?;
            n += 1;
        }
        Ok(n)
    }

    fn scan(&self, db: &Db, range: impl KeyRange, rev: bool) -> TxnIter {
        let (lo, hi) = range.bounds();
        let decode = db.duplicates();
        let (lo, hi) = match decode {
            Duplicates::None => (lo, hi),
            _ => dups::range(lo, hi),
        };
        let misuse = self.inner.checked(db).err();
        TxnIter::new(
            self.inner.clone(),
            db.clone(),
            (lo, hi),
            rev,
            misuse,
            decode,
        )
    }

    /// The entries of `db` as they are (composites, with duplicates) between the bounds.
    fn entries(&self, db: &Db, (lo, hi): (Vec<u8>, Vec<u8>), rev: bool) -> TxnIter {
        let misuse = self.inner.checked(db).err();
        let bounds = (Bound::Included(lo), Bound::Excluded(hi));
        TxnIter::new(
            self.inner.clone(),
            db.clone(),
            bounds,
            rev,
            misuse,
            Duplicates::None,
        )
    }

    /// Reads `key` and locks it for this transaction (Berkeley DB's `DB_RMW`), so that no
    /// other transaction can write it before this one ends. Not for a database with
    /// duplicates, whose pairs are each locked as they are written.
    pub fn get_for_update(&self, db: &Db, key: &[u8]) -> Result<Option<Vec<u8>>> {
        drop(self.inner.checked(db)?);
        if db.duplicates() != Duplicates::None {
            return Err(Error::InvalidArgument(format!(
                "get_for_update on database {:?}, which holds duplicates: each pair is locked \
                 when it is written",
                db.name()
            )));
        }
        self.lock(db.id(), key)?;
        self.get(db, key)
    }

    /// Writes `value` under `key` in `db` when the transaction commits (with duplicates:
    /// adds the pair, as [`Db::put`] does).
    pub fn put(&self, db: &Db, key: &[u8], value: &[u8]) -> Result<()> {
        match db.duplicates() {
            Duplicates::None => self.put_entry(db, key, value),
            // Each pair's entry is locked before it is looked for, so that two transactions
            // cannot both find it free: under read-committed the second sees the first's
            // commit (a sorted pair exists; an unsorted number is taken, so it takes the
            // next); under snapshot isolation the lock reports the conflict.
            Duplicates::Sorted => {
                let c = dups::sorted_pair(key, value);
                drop(self.inner.checked(db)?);
                self.lock(db.id(), &c)?;
                if self.get_entry(db, &c)?.is_some() {
                    return Err(Error::KeyExists);
                }
                self.put_entry(db, &c, b"")
            }
            Duplicates::Unsorted => loop {
                let last = self
                    .entries(db, dups::pairs_of(key), true)
                    .next()
                    .transpose()?;
                let c = dups::unsorted_pair(key, dups::next_sequence(last.as_ref())?);
                drop(self.inner.checked(db)?);
                self.lock(db.id(), &c)?;
                if self.get_entry(db, &c)?.is_none() {
                    return self.put_entry(db, &c, value);
                }
            },
        }
    }

    /// Writes `entries` (key, value) into `db` when the transaction commits, as [`Txn::put`]
    /// of each would, for a database without duplicates ([`Error::InvalidArgument`]
    /// otherwise). Keys in ascending order (as an index build writes them) that the
    /// transaction has not written go into its write set in one step, not a search each.
    pub fn put_sorted(&self, db: &Db, entries: Vec<(Vec<u8>, Vec<u8>)>) -> Result<()> {
        if db.duplicates() != Duplicates::None {
            return Err(Error::InvalidArgument(format!(
                "put_sorted on database {:?}, which holds duplicates: use put",
                db.name()
            )));
        }
        drop(self.inner.checked(db)?);
        self.inner.shared.writable()?;
        for (k, v) in &entries {
            self.inner.shared.check_sizes(k, v)?;
            self.lock(db.id(), k)?;
        }
        let mut st = self.inner.checked(db)?;
        st.write_sorted(db.id(), entries);
        self.spill_if_over(&mut st)
    }

    fn put_entry(&self, db: &Db, key: &[u8], value: &[u8]) -> Result<()> {
        drop(self.inner.checked(db)?);
        self.inner.shared.writable()?;
        self.inner.shared.check_sizes(key, value)?;
        self.lock(db.id(), key)?;
        let mut st = self.inner.checked(db)?;
        st.write(db.id(), key, Some(value.to_vec()));
        self.spill_if_over(&mut st)
    }

    /// Spills the write set to the log when it outgrows the transaction's memory.
    fn spill_if_over(&self, st: &mut State) -> Result<()> {
        self.inner.shared.spill_if_over(self.inner.id, st)
    }

    /// Deletes `key` from `db` when the transaction commits (with duplicates: all its
    /// pairs); returns whether it was present.
    pub fn delete(&self, db: &Db, key: &[u8]) -> Result<bool> {
        if db.duplicates() == Duplicates::None {
            return self.delete_entry(db, key);
        }
        let pairs: Vec<Vec<u8>> = self
            .entries(db, dups::pairs_of(key), false)
            .map(|kv| kv.map(|(c, _)| c))
            .collect::<Result<_>>()?;
        for c in &pairs {
            self.delete_entry(db, c)?;
        }
        Ok(!pairs.is_empty())
    }

    fn delete_entry(&self, db: &Db, key: &[u8]) -> Result<bool> {
        drop(self.inner.checked(db)?);
        self.inner.shared.writable()?;
        self.lock(db.id(), key)?;
        let existed = self.get_entry(db, key)?.is_some();
        let mut st = self.inner.checked(db)?;
        st.write(db.id(), key, None);
        self.spill_if_over(&mut st)?;
        Ok(existed)
    }

    /// Takes the key's lock for this transaction (waiting outside the state's mutex), then,
    /// under snapshot isolation, fails with [`Error::Conflict`] if a commit newer than the
    /// snapshot wrote it.
    fn lock(&self, db: u32, key: &[u8]) -> Result<()> {
        let tx = self.inner.shared.tx()?;
        let sk = {
            let st = self.inner.open_state()?;
            // No other transaction can reach a database before its creation commits, so
            // its keys take no locks (an index built, a table loaded), and no commit newer
            // than the snapshot wrote them.
            if st.created_here(db) {
                return Ok(());
            }
            if st.escalated.contains(&db) {
                None
            } else {
                let sk = scoped_key(db, key);
                if st.locked.contains(&sk) {
                    return Ok(());
                }
                Some(sk)
            }
        };
        if let Some(sk) = sk {
            tx.txns
                .locks
                .lock(self.inner.id, &sk, tx.lock_timeout, false)?;
            let mut st = self.inner.state();
            if st.finished {
                // Finished meanwhile, by another thread sharing the transaction.
                tx.txns.locks.release(self.inner.id, [sk]);
                return Err(Error::TxnFinished);
            }
            st.locked.insert(sk);
            let threshold = escalation_threshold(tx.txn_memory);
            if db != CATALOG_LOCK && st.locked.len() >= st.escalate_at.max(threshold) {
                self.escalate(&mut st, db);
                st.escalate_at = st.locked.len() + threshold;
            }
        }
        if let Some(s) = self.inner.snapshot {
            let shared = &self.inner.shared;
            let checked = shared.engine.read().committed_after(db, key, s);
            let newer = match checked {
                Ok(newer) => newer,
                Err(Need::Fail(e)) => return Err(e),
                // A leaf to read back (a database a batched commit created): through the
                // reading path, which loads it with no lock held.
                Err(Need::Page(_)) => shared.read(|e| e.committed_after(db, key, s))?.0,
            };
            if newer {
                tx.txns.stats.conflicts.fetch_add(1, Relaxed);
                return Err(Error::Conflict);
            }
        }
        Ok(())
    }

    /// Trades this transaction's key locks in `db` for a lock on the whole database, so that
    /// their memory stays bounded; if other transactions hold keys there for long, it keeps
    /// its key locks and tries again after as many more.
    fn escalate(&self, st: &mut State, db: u32) {
        let Ok(tx) = self.inner.shared.tx() else {
            return;
        };
        let wait = tx.lock_timeout.min(std::time::Duration::from_secs(1));
        if !tx.txns.locks.escalate(self.inner.id, db, wait) {
            return;
        }
        let prefix = db.to_be_bytes();
        st.locked.retain(|k| !k.starts_with(&prefix));
        st.escalated.push(db);
    }

    /// Marks a point to roll back to. Savepoints nest: rolling back to one undoes
    /// everything done after it, later savepoints included.
    pub fn savepoint(&self) -> Result<Savepoint> {
        let mut st = self.inner.open_state()?;
        let id = st.next_mark;
        st.next_mark += 1;
        let mark = Mark {
            id,
            ddl: st.ddl.len(),
            dbs: st.dbs.len(),
        };
        st.marks.push(mark);
        st.writes.push_layer();
        Ok(Savepoint {
            txn: self.inner.id,
            id,
        })
    }

    fn mark_index(&self, st: &State, sp: &Savepoint) -> Result<usize> {
        if sp.txn != self.inner.id {
            return Err(Error::InvalidArgument(
                "the savepoint belongs to another transaction".into(),
            ));
        }
        st.marks.iter().position(|m| m.id == sp.id).ok_or_else(|| {
            Error::InvalidArgument("the savepoint was released, or rolled back past".into())
        })
    }

    /// Undoes every write, and every database created or removed, since `sp`; `sp` stays,
    /// later savepoints go (as SQL's `ROLLBACK TO`). Locks taken since are kept.
    pub fn rollback_to(&self, sp: &Savepoint) -> Result<()> {
        let mut st = self.inner.open_state()?;
        let i = self.mark_index(&st, sp)?;
        let (ddl, dbs) = (st.marks[i].ddl, st.marks[i].dbs);
        st.writes.rollback_to(i);
        st.ddl.truncate(ddl);
        st.dbs.truncate(dbs);
        st.written_at.truncate(dbs);
        st.marks.truncate(i + 1);
        st.changes += 1;
        st.rolled_back = st.changes;
        Ok(())
    }

    /// A number that grows whenever this transaction changes what it sees of `db` by its
    /// own doing (a write there; a rollback to a savepoint, for every database), and
    /// stays the same otherwise: a reader that keeps what it read of `db` may use it again
    /// while the number is unchanged (under snapshot isolation, where others' commits do
    /// not show). 0 before the first change.
    pub fn changes_to(&self, db: &Db) -> Result<u64> {
        let st = self.inner.checked(db)?;
        let written = st.dbs.iter().position(|&d| d == db.id());
        Ok(written.map_or(0, |i| st.written_at[i]).max(st.rolled_back))
    }

    /// Forgets `sp` and every savepoint after it, keeping what was done since (as SQL's
    /// `RELEASE`).
    pub fn release(&self, sp: Savepoint) -> Result<()> {
        let mut st = self.inner.open_state()?;
        let i = self.mark_index(&st, &sp)?;
        st.marks.truncate(i);
        st.writes.release(i);
        Ok(())
    }

    /// In a replication group, makes this transaction's commit durable and acknowledged as
    /// `group` says rather than as the member's default (JE's per-transaction
    /// `Durability`). Outside a group it has no effect.
    pub fn set_group_durability(&self, group: GroupDurability) -> Result<()> {
        self.inner.open_state()?.group = Some(group);
        Ok(())
    }

    /// Commits with the environment's default durability; returns the commit's LSN.
    pub fn commit(&self) -> Result<u64> {
        let d = self.inner.open_state()?.durability;
        self.commit_with(d)
    }

    /// Commits with durability `d`; returns the commit's LSN (for a transaction that wrote
    /// nothing, the LSN of the data it read). Whatever the outcome, the transaction is
    /// finished: it releases its locks, and later calls fail with [`Error::TxnFinished`].
    pub fn commit_with(&self, d: Durability) -> Result<u64> {
        let mut st = self.inner.open_state()?;
        let held_many = big(&st);
        let result = if st.writes.is_empty() && st.ddl.is_empty() {
            Ok(self
                .inner
                .snapshot
                .unwrap_or_else(|| self.inner.shared.engine.read().commit_lsn))
        } else {
            // The transaction reads nothing more: its snapshot must not make the commit
            // keep the values it overwrites (its locks still keep others off its keys).
            if let (Some(s), Ok(tx)) = (st.registered.take(), self.inner.shared.tx()) {
                tx.txns.unregister(s);
            }
            let (shared, id) = (&self.inner.shared, self.inner.id);
            match shared.replicator() {
                // The transaction's locks go with its commit; the replicator releases them
                // once the commit is applied.
                Some(r) => {
                    let keys = st.locked.drain().collect();
                    let dbs = std::mem::take(&mut st.escalated);
                    let locks = HeldLocks::new(shared.clone(), id, keys, dbs);
                    if st.writes.spilled() || st.writes.commit_bytes() > r.part_bytes() {
                        shared.commit_in_parts(r.as_ref(), id, &mut st, d, locks)
                    } else {
                        let ops = st.commit_ops();
                        let (ddl, group) = (&st.ddl, st.group);
                        shared.commit_replicated(r.as_ref(), ddl, ops.ops(), d, group, locks)
                    }
                }
                None if st.writes.spilled()
                    || shared.commits_in_batches(st.writes.mem_writes(), &st.ddl) =>
                {
                    shared.commit_in_batches(id, &mut st, d)
                }
                None => {
                    let ops = st.commit_ops();
                    let dbs: Vec<u32> =
                        st.dbs.iter().copied().filter(|&d| !st.removed(d)).collect();
                    shared.commit_local(id, &st.ddl, ops.ops(), &dbs, d)
                }
            }
        };
        self.inner.finish(&mut st, result.is_ok(), held_many);
        result
    }

    /// Discards the transaction's writes and releases its locks.
    pub fn abort(&self) {
        self.inner.finish(&mut self.inner.state(), false, false);
    }
}

#[cfg(test)]
mod tests {
    use crate::storage::MemStorage;
    use crate::{Config, Env};
    use std::sync::Arc;

    /// `Txn::last` below thousands of the transaction's own writes (what SQL's rowid
    /// allocator asks before every insert) takes a few of them, not a batch of a thousand
    /// copied at every call; a walk on from there still sees every entry once, in order,
    /// the transaction's deletes applied.
    #[test]
    fn a_lookup_below_many_own_writes_takes_a_few() {
        let storage = Arc::new(MemStorage::new());
        let env = Env::open_with_storage(storage, Config::new().transactional(true)).unwrap();
        let db = env.create_db("d").unwrap();
        for i in 0..100u32 {
            db.put(&i.to_be_bytes(), b"committed").unwrap();
        }
        let t = env.begin_txn().unwrap();
        for i in 50..3000u32 {
            t.put(&db, &i.to_be_bytes(), b"own").unwrap();
        }
        for i in 2990..3000u32 {
            t.delete(&db, &i.to_be_bytes()).unwrap();
        }
        let mut it = t.scan(&db, .., true).one_at_a_time();
        let (k, v) = it.next().unwrap().unwrap();
        assert_eq!((k, v), (2989u32.to_be_bytes().to_vec(), b"own".to_vec()));
        assert!(it.batch_len() < 8, "{} entries copied", it.batch_len());
        let keys: Vec<Vec<u8>> = t
            .scan(&db, .., true)
            .one_at_a_time()
            .map(|r| r.unwrap().0)
            .collect();
        let want: Vec<Vec<u8>> = (0..2990u32)
            .rev()
            .map(|i| i.to_be_bytes().to_vec())
            .collect();
        assert_eq!(keys, want);
        assert_eq!(t.last(&db, ..).unwrap().unwrap().0, 2989u32.to_be_bytes());
        t.abort();
    }

    /// A range with an end, read for a LIMIT (`few_first`), copies about half a kilobyte
    /// of entries first, not 64 KiB; read on, it still yields the whole range in order,
    /// either way round.
    #[test]
    fn a_range_read_few_first_copies_little_then_all() {
        let storage = Arc::new(MemStorage::new());
        let env = Env::open_with_storage(storage, Config::new().transactional(true)).unwrap();
        let db = env.create_db("d").unwrap();
        for i in 0..5000u32 {
            db.put(&i.to_be_bytes(), b"value").unwrap();
        }
        let t = env.begin_txn().unwrap();
        let range = 0u32.to_be_bytes().to_vec()..2500u32.to_be_bytes().to_vec();
        for reverse in [false, true] {
            let scan = || t.scan(&db, range.clone(), reverse);
            let mut plain = scan();
            plain.next().unwrap().unwrap();
            let mut few = scan().few_first();
            few.next().unwrap().unwrap();
            let (plain, few) = (plain.batch_len(), few.batch_len());
            assert!(
                few < 64 && plain > few * 4,
                "{plain} entries, {few} read few first"
            );
            let keys: Vec<u32> = scan()
                .few_first()
                .map(|r| u32::from_be_bytes(r.unwrap().0.try_into().unwrap()))
                .collect();
            let mut want: Vec<u32> = (0..2500).collect();
            if reverse {
                want.reverse();
            }
            assert_eq!(keys, want);
        }
        t.abort();
    }
}
