//! Reads as of a snapshot: the version map (values commits overwrote while older snapshots
//! were active) and the undo stores of spilled transactions' commits, over the trees.
//!
//! Owns: the engine methods over `Engine::versions` and `Engine::undo`. May call: the tree
//! (through the engine), `txn::undo`. Invariants: for each key, version-map entries are in
//! commit order; a reader at snapshot `s` reads the value before the first change after
//! `s` (the version map's, or an undo store's, whichever commit came first; a commit still
//! being applied counts as after every snapshot, and hides what it applied from readers of
//! the latest data too), else the tree; an entry or store is dropped only when no active
//! snapshot can read it.

use super::undo::UndoStore;
use super::writes::{Capped, Write};
use super::{scoped_key, scoped_range};
use crate::engine::{Engine, Need, NeedResult};
use crate::error::Result;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

impl Engine {
    /// Calls `f` with the value of `key` as of snapshot `at` (`None`: the latest committed),
    /// if there is one; `f` is called only once the read has succeeded.
    pub(crate) fn read_at<R>(
        &self,
        db: u32,
        key: &[u8],
        at: Option<u64>,
        f: &mut Option<impl FnOnce(&[u8]) -> R>,
    ) -> NeedResult<Option<R>> {
        let mut call = |v: &[u8]| (f.take().expect("called once"))(v);
        if let Some(before) = self.before_change(db, key, at)? {
            return Ok(before.map(|v| call(&v)));
        }
        match self.locate(db, key)? {
            None => Ok(None),
            Some((leaf, idx)) => self.with_value(leaf, idx, call).map(Some),
        }
    }

    /// Whether a reader at `at` sees the trees as they are: no value a newer commit
    /// overwrote, nor one a spilled commit being applied replaced, is hidden from it.
    pub(crate) fn trees_as_seen(&self, at: Option<u64>) -> bool {
        !self.versions_after(at) && !self.undo.iter().any(|u| u.hides_for(at))
    }

    /// The value `key` had before the first change a reader at `at` must not see, if there
    /// is one.
    pub(crate) fn before_change(
        &self,
        db: u32,
        key: &[u8],
        at: Option<u64>,
    ) -> Result<Option<Write>> {
        if !self.versions_after(at) && self.undo.is_empty() {
            return Ok(None);
        }
        if self.unseen_db(db, at) {
            return Ok(Some(None));
        }
        let sk = scoped_key(db, key);
        let mut first: Option<(u64, &Write)> = None;
        if let Some(s) = at.filter(|_| self.versions_after(at)) {
            if let Some(chain) = self.versions.get(&sk) {
                first = chain.iter().find(|(lsn, _)| *lsn > s).map(|(l, w)| (*l, w));
            }
        }
        let mut from_undo: Option<(u64, Write)> = None;
        for u in self.undo.iter().filter(|u| u.hides_for(at)) {
            let lsn = u.lsn().unwrap_or(u64::MAX);
            if from_undo.as_ref().is_some_and(|(l, _)| *l <= lsn) {
                continue;
            }
            if let Some(w) = u.lookup(&sk)? {
                from_undo = Some((lsn, w));
            }
        }
        Ok(match (first, from_undo) {
            (Some((l, w)), Some((lu, _))) if l < lu => Some(w.clone()),
            (_, Some((_, w))) => Some(w),
            (Some((_, w)), None) => Some(w.clone()),
            (None, None) => None,
        })
    }

    /// Whether database `db` was created by a commit a reader at `at` must not see (one
    /// applied in batches: it names the database in its undo store), so the reader sees
    /// it empty. A database made by a commit applied in one hold has its keys in the version
    /// map instead, as any other write.
    pub(crate) fn unseen_db(&self, db: u32, at: Option<u64>) -> bool {
        self.undo.iter().any(|u| u.creates(db) && u.hides_for(at))
    }

    /// Whether the version map may hold a value a reader at `at` must see.
    fn versions_after(&self, at: Option<u64>) -> bool {
        at.is_some_and(|s| s < self.versions_newest) && !self.versions.is_empty()
    }

    /// Whether a commit newer than snapshot `at` wrote `key`. [`Need::Page`] when a leaf it
    /// must read is not in memory (run it through `Shared::read`, which loads the page).
    pub(crate) fn committed_after(&self, db: u32, key: &[u8], at: u64) -> NeedResult<bool> {
        if !self.versions_after(Some(at)) && self.undo.is_empty() {
            return Ok(false);
        }
        let sk = scoped_key(db, key);
        if self
            .versions
            .get(&sk)
            .and_then(|c| c.last())
            .is_some_and(|(lsn, _)| *lsn > at)
        {
            return Ok(true);
        }
        for u in &self.undo {
            if u.lsn().is_none_or(|l| l <= at) {
                continue;
            }
            let written = match u.creates(db) {
                // Every key of the database was written after `at`: those the tree holds
                // now, and those a later commit deleted (found above, or in another store).
                true => self.locate(db, key)?.is_some(),
                false => u.lookup(&sk)?.is_some(),
            };
            if written {
                return Ok(true);
            }
        }
        Ok(false)
    }

    pub(crate) fn read_latest_loading(&mut self, db: u32, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut copy = Some(<[u8]>::to_vec);
        loop {
            match self.read_at(db, key, None, &mut copy) {
                Ok(v) => return Ok(v),
                Err(Need::Page(pid)) => self.pager.load(pid)?,
                Err(Need::Fail(e)) => return Err(e),
            }
        }
    }

    /// Whether the tree holds `key`, loading the pages on the way.
    pub(crate) fn contains_loading(&mut self, db: u32, key: &[u8]) -> Result<bool> {
        loop {
            match self.locate(db, key) {
                Ok(at) => return Ok(at.is_some()),
                Err(Need::Page(pid)) => self.pager.load(pid)?,
                Err(Need::Fail(e)) => return Err(e),
            }
        }
    }

    /// The tree's value of `key`, whatever a commit being applied hides.
    pub(crate) fn read_tree_loading(&mut self, db: u32, key: &[u8]) -> Result<Option<Vec<u8>>> {
        loop {
            let found = self.locate(db, key).and_then(|at| match at {
                None => Ok(None),
                Some((leaf, idx)) => self.with_value(leaf, idx, |v| v.to_vec()).map(Some),
            });
            match found {
                Ok(v) => return Ok(v),
                Err(Need::Page(pid)) => self.pager.load(pid)?,
                Err(Need::Fail(e)) => return Err(e),
            }
        }
    }

    /// For keys of `db` in `(lo, hi)` that a reader at `at` (`None`: the latest committed)
    /// must see otherwise than the tree has them: the value it sees (`None`: absent), in key
    /// order (descending with `reverse`). At most about `cap` come from each undo store;
    /// when one had more, the answer is exact up to the returned cut key (included) in the
    /// direction of travel.
    pub(crate) fn overrides(
        &self,
        db: u32,
        (lo, hi): (&Bound<Vec<u8>>, &Bound<Vec<u8>>),
        at: Option<u64>,
        reverse: bool,
        cap: usize,
    ) -> Result<Capped> {
        if self.trees_as_seen(at) {
            return Ok((Vec::new(), None));
        }
        let (start, end) = scoped_range(db, lo, hi);
        // Scoped key -> (LSN of the first change the reader must not see, value before it).
        let mut first: BTreeMap<Vec<u8>, (u64, Write)> = BTreeMap::new();
        if let Some(s) = at.filter(|_| self.versions_after(at)) {
            for (k, chain) in self.versions.range((start.clone(), end.clone())) {
                if let Some((lsn, before)) = chain.iter().find(|(lsn, _)| *lsn > s) {
                    first.insert(k.clone(), (*lsn, before.clone()));
                }
            }
        }
        let mut cut: Option<Vec<u8>> = None;
        for u in self.undo.iter().filter(|u| u.hides_for(at)) {
            let lsn = u.lsn().unwrap_or(u64::MAX);
            let (entries, more) = u.range(&start, &end, reverse, cap)?;
            for (k, before) in entries {
                if first.get(&k).is_none_or(|(l, _)| lsn < *l) {
                    first.insert(k, (lsn, before));
                }
            }
            if let Some(m) = more {
                if cut.as_ref().is_none_or(|c| (m < *c) != reverse) {
                    cut = Some(m);
                }
            }
        }
        let beyond_cut = |k: &Vec<u8>| match &cut {
            None => false,
            Some(c) => (k > c) != reverse && k != c,
        };
        let mut out: Vec<(Vec<u8>, Write)> = first
            .into_iter()
            .filter(|(k, _)| !beyond_cut(k))
            .map(|(k, (_, w))| (k[4..].to_vec(), w))
            .collect();
        if reverse {
            out.reverse();
        }
        Ok((out, cut.map(|c| c[4..].to_vec())))
    }

    /// Whether a spilled transaction's commit is being applied to `db`: readers of the
    /// latest data that cannot ask the undo stores (cursors) wait for it.
    pub(crate) fn applying_to(&self, db: u32) -> bool {
        self.undo
            .iter()
            .any(|u| u.lsn().is_none() && u.dbs.contains(&db))
    }

    /// Drops versions and undo stores no active snapshot can read (stores go to
    /// `undo_garbage`, to be dropped outside the lock).
    pub(crate) fn gc_versions(&mut self, oldest: Option<u64>) {
        match oldest {
            None => self.versions.clear(),
            Some(o) => self.versions.retain(|_, chain| {
                chain.retain(|(lsn, _)| *lsn > o);
                !chain.is_empty()
            }),
        }
        if !self.undo.is_empty() {
            let needed = |u: &Arc<UndoStore>| match u.lsn() {
                None => true,
                Some(l) => oldest.is_some_and(|o| o < l),
            };
            let (keep, gone): (Vec<_>, Vec<_>) = self.undo.drain(..).partition(needed);
            self.undo = keep;
            self.undo_garbage.extend(gone);
        }
    }
}
