//! [`Db`]: the handle of one named database, its reads and auto-committed writes.
//!
//! May call: the environment's shared state, `btree`, `dups`, `txn` (auto-commit).

use super::Shared;
use crate::btree::cursor::KeyRange;
use crate::btree::{Cursor, Iter};
use crate::config::Duplicates;
use crate::dups;
use crate::engine::{Engine, NeedResult};
use crate::error::{Error, Result};
use crate::stats::{DbStat, NodeSummary};
use crate::txn::Txn;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A handle to one named database. Cheap to clone; may be shared between threads.
///
/// In a database with duplicates ([`Env::create_db_with`](crate::Env::create_db_with)) each key/value pair is an entry:
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
                Ok((d.name.clone(), d.entries, d.root, e.pager.layout.capacity()))
            })?;
            let walked = DbStat::walk(name, entries, root, capacity, |pid| {
                sh.read(|e| Ok(NodeSummary::of(e.pager.page(pid)?, capacity)))
                    .map(|(n, _)| n)
            });
            match walked {
                Err(_) if sh.data_version.load(Ordering::Acquire) != version => continue,
                r => return r,
            }
        }
        let mut e = sh.exclusive();
        let d = e.db(self.id)?.clone();
        let capacity = e.pager.layout.capacity();
        let r = DbStat::walk(d.name, d.entries, d.root, capacity, |pid| {
            e.pager.ensure(pid)?;
            Ok(NodeSummary::of(e.pager.node(pid), capacity))
        });
        e.shrink_cache();
        r
    }
}
