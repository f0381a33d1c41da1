//! Transactions: snapshot isolation over the trees, key locks for writers, and commit
//! through the log.
//!
//! Owns: transaction ids, the registry of active snapshots, the lock table, the write-set
//! encoding of commit records, and the public [`Txn`]. May call: `engine` (under the
//! environment's lock), `wal`. Design: writes are deferred. A transaction keeps its writes
//! in a private map; reads look there first, then at the trees as of the snapshot. Commit
//! appends the write set to the log and applies it to the trees under the engine's exclusive
//! lock, so log order is commit order and recovery is redo-only. Values a commit overwrites are kept in the
//! engine's version map while an older snapshot is active. Invariants:
//! - a snapshot is taken and registered under the engine's shared lock, and a commit reads
//!   the oldest active snapshot under the exclusive lock, so no snapshot misses a version;
//! - a writer holds the key's lock from its first write to commit or abort; under snapshot
//!   isolation it then fails with `Conflict` if the key was committed after its snapshot.

mod handle;
pub(crate) mod locks;
mod scan;

pub use handle::Txn;
pub use scan::TxnIter;

use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// One write of a write set: database id, key, new value (`None` deletes).
pub(crate) type Write<'a> = (u32, &'a [u8], Option<&'a [u8]>);

/// The lock-table and version-map key of `key` in database `db`.
pub(crate) fn scoped_key(db: u32, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + key.len());
    k.extend_from_slice(&db.to_be_bytes());
    k.extend_from_slice(key);
    k
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

/// Commit record payload: `count u32`, then per write `db u32 | op u8 (1 put, 2 delete) |
/// klen u32 | vlen u32 | key | value`.
pub(crate) fn encode_writes(writes: &[Write], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&(writes.len() as u32).to_le_bytes());
    for (db, k, v) in writes {
        out.extend_from_slice(&db.to_le_bytes());
        out.push(if v.is_some() { 1 } else { 2 });
        out.extend_from_slice(&(k.len() as u32).to_le_bytes());
        out.extend_from_slice(&(v.map_or(0, |v| v.len()) as u32).to_le_bytes());
        out.extend_from_slice(k);
        if let Some(v) = v {
            out.extend_from_slice(v);
        }
    }
}

pub(crate) fn decode_writes(p: &[u8]) -> Result<Vec<Write<'_>>> {
    let bad = || Error::Corrupt {
        page: None,
        detail: "malformed commit record in the log".into(),
    };
    let u32_at = |at: usize| -> Result<usize> {
        Ok(u32::from_le_bytes(p.get(at..at + 4).ok_or_else(bad)?.try_into().unwrap()) as usize)
    };
    let n = u32_at(0)?;
    let mut at = 4;
    let mut out = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        let db = u32_at(at)? as u32;
        let op = *p.get(at + 4).ok_or_else(bad)?;
        let (kl, vl) = (u32_at(at + 5)?, u32_at(at + 9)?);
        at += 13;
        let key = p.get(at..at + kl).ok_or_else(bad)?;
        at += kl;
        let value = match op {
            1 => {
                let v = p.get(at..at + vl).ok_or_else(bad)?;
                at += vl;
                Some(v)
            }
            2 => None,
            _ => return Err(bad()),
        };
        out.push((db, key, value));
    }
    if at != p.len() {
        return Err(bad());
    }
    Ok(out)
}

#[derive(Default)]
pub(crate) struct TxnStats {
    pub begun: AtomicU64,
    pub commits: AtomicU64,
    pub aborts: AtomicU64,
    pub conflicts: AtomicU64,
}

/// Transaction ids and the active snapshots.
#[derive(Default)]
pub(crate) struct TxnManager {
    next_id: AtomicU64,
    /// Snapshot LSN -> number of transactions reading at it.
    active: Mutex<BTreeMap<u64, usize>>,
    pub locks: locks::LockTable,
    pub stats: TxnStats,
}

impl TxnManager {
    pub(crate) fn new_id(&self) -> u64 {
        self.next_id.fetch_add(1, Relaxed) + 1
    }

    /// Registers a snapshot; call under the engine's shared lock.
    pub(crate) fn register(&self, lsn: u64) {
        *self.active.lock().entry(lsn).or_default() += 1;
    }

    pub(crate) fn unregister(&self, lsn: u64) {
        let mut a = self.active.lock();
        if let Some(n) = a.get_mut(&lsn) {
            *n -= 1;
            if *n == 0 {
                a.remove(&lsn);
            }
        }
    }

    /// The oldest active snapshot; call under the engine's exclusive lock.
    pub(crate) fn oldest(&self) -> Option<u64> {
        self.active.lock().keys().next().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_sets_round_trip_and_garbage_is_rejected() {
        let writes: Vec<Write> = vec![
            (1, b"k1", Some(b"v1")),
            (2, b"", None),
            (1, b"k3", Some(b"")),
        ];
        let mut buf = Vec::new();
        encode_writes(&writes, &mut buf);
        assert_eq!(decode_writes(&buf).unwrap(), writes);
        for cut in 0..buf.len() {
            assert!(decode_writes(&buf[..cut]).is_err());
        }
        let mut bad = buf.clone();
        bad[8] = 9;
        assert!(decode_writes(&bad).is_err());
    }
}
