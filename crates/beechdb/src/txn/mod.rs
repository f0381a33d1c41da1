//! Transactions: snapshot isolation over the trees, key locks for writers, and commit
//! through the log.
//!
//! Owns: transaction ids, the registry of active snapshots, the lock table, the commit
//! pipeline (`commit.rs`), and the public [`Txn`]. May call: `engine` (under the
//! environment's lock), `wal`. Design: writes are deferred. A transaction keeps its writes
//! in a private map; reads look there first, then at the trees as of the snapshot. Commit
//! appends the transaction's records to the log and applies them to the trees under the
//! engine's exclusive lock, so log order is commit order and recovery is redo-only. Values a
//! commit overwrites are kept in the engine's version map while an older snapshot is
//! active. Databases are created and removed by transactions too (logged, replayed). A
//! transaction whose writes outgrow its memory spills them to the log ahead of its commit
//! (`writes.rs`), and its commit is applied in bounded batches (`bulk.rs`), the values it
//! replaces kept on disk for readers meanwhile and for older snapshots after (`undo.rs`).
//! Invariants:
//! - a snapshot is taken and registered under the engine's shared lock, and a commit reads
//!   the oldest active snapshot under the exclusive lock, so no snapshot misses a version;
//! - a writer holds the key's lock from its first write to commit or abort; under snapshot
//!   isolation it then fails with `Conflict` if the key was committed after its snapshot.

mod bulk;
mod commit;
mod filter;
mod handle;
pub(crate) mod locks;
mod parts;
mod scan;
mod undo;
mod versions;
mod writes;

pub(crate) use commit::Ddl;
pub(crate) use undo::UndoStore;

pub use handle::{Savepoint, Txn};
pub use scan::TxnIter;

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The lock-table and version-map key of `key` in database `db`.
pub(crate) fn scoped_key(db: u32, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + key.len());
    k.extend_from_slice(&db.to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// Whether `k` lies within the bounds `lo` and `hi`.
pub(crate) fn in_bounds(
    k: &[u8],
    lo: &std::ops::Bound<Vec<u8>>,
    hi: &std::ops::Bound<Vec<u8>>,
) -> bool {
    use std::ops::Bound;
    (match lo {
        Bound::Included(l) => k >= &l[..],
        Bound::Excluded(l) => k > &l[..],
        Bound::Unbounded => true,
    }) && (match hi {
        Bound::Included(h) => k <= &h[..],
        Bound::Excluded(h) => k < &h[..],
        Bound::Unbounded => true,
    })
}

/// The range of scoped keys that `[lo, hi)` of database `db` covers.
pub(crate) fn scoped_range(
    db: u32,
    lo: &std::ops::Bound<Vec<u8>>,
    hi: &std::ops::Bound<Vec<u8>>,
) -> (std::ops::Bound<Vec<u8>>, std::ops::Bound<Vec<u8>>) {
    use std::ops::Bound;
    let start = match lo.as_ref().map(|k| scoped_key(db, k)) {
        Bound::Unbounded => Bound::Included(scoped_key(db, &[])),
        b => b,
    };
    let end = match hi.as_ref().map(|k| scoped_key(db, k)) {
        Bound::Unbounded => Bound::Excluded(scoped_key(db + 1, &[])),
        b => b,
    };
    (start, end)
}

/// Transaction ids and the active snapshots.
#[derive(Default)]
pub(crate) struct TxnManager {
    next_id: AtomicU64,
    /// Snapshot LSN and the number of transactions reading at it, ascending by LSN. A vector,
    /// not a map: few snapshots are live at once, most new ones are the newest (a push at
    /// the end), and it keeps its capacity, so a short transaction allocates nothing here.
    active: Mutex<Vec<(u64, usize)>>,
    pub locks: locks::LockTable,
    pub stats: crate::stats::TxnCounters,
}

impl TxnManager {
    pub(crate) fn new_id(&self) -> u64 {
        self.next_id.fetch_add(1, Relaxed) + 1
    }

    /// Registers a snapshot; call under the engine's shared lock.
    pub(crate) fn register(&self, lsn: u64) {
        let mut a = self.active.lock();
        match a.last_mut() {
            Some((last, n)) if *last == lsn => *n += 1,
            Some((last, _)) if *last > lsn => match a.binary_search_by_key(&lsn, |e| e.0) {
                Ok(i) => a[i].1 += 1,
                Err(i) => a.insert(i, (lsn, 1)),
            },
            _ => a.push((lsn, 1)),
        }
    }

    pub(crate) fn unregister(&self, lsn: u64) {
        let mut a = self.active.lock();
        if let Ok(i) = a.binary_search_by_key(&lsn, |e| e.0) {
            a[i].1 -= 1;
            if a[i].1 == 0 {
                a.remove(i);
            }
        }
    }

    /// The oldest active snapshot; call under the engine's exclusive lock.
    pub(crate) fn oldest(&self) -> Option<u64> {
        self.active.lock().first().map(|e| e.0)
    }
}

#[cfg(test)]
mod tests {
    use super::TxnManager;

    /// Snapshots registered in any order, some twice, leave in any order; the oldest is
    /// always the smallest still registered.
    #[test]
    fn active_snapshots_count_and_order() {
        let m = TxnManager::default();
        assert_eq!(m.oldest(), None);
        for lsn in [20, 20, 10, 30, 15, 30] {
            m.register(lsn);
        }
        assert_eq!(*m.active.lock(), [(10, 1), (15, 1), (20, 2), (30, 2)]);
        m.unregister(10);
        assert_eq!(m.oldest(), Some(15));
        m.unregister(20);
        m.unregister(15);
        assert_eq!(m.oldest(), Some(20));
        m.unregister(20);
        m.unregister(30);
        m.unregister(99); // never registered: ignored
        assert_eq!(m.oldest(), Some(30));
        m.unregister(30);
        assert_eq!(m.oldest(), None);
        assert!(m.active.lock().is_empty());
    }
}
