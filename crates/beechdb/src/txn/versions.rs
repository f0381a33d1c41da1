//! The version map: values that commits overwrote while older snapshots were active, and
//! reads of the trees as of a snapshot.
//!
//! Owns: the engine methods over `Engine::versions`. May call: the tree (through the
//! engine). Invariant: for each key, entries are in commit order; a snapshot at LSN `s`
//! reads the first entry newer than `s` (the value before that commit), else the tree; an
//! entry is dropped only when no active snapshot can read it.

use super::{scoped_key, scoped_range};
use crate::engine::{Engine, Need, NeedResult};
use crate::error::Result;
use std::ops::Bound;

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
