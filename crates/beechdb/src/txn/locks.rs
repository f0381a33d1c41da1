//! Key locks for writers: one owner per key, waits bounded by a timeout, and a wait-for
//! graph that finds deadlocks the moment a wait would close a cycle.
//!
//! Invariant: every transaction waits for at most one other, so the graph is a set of
//! chains and a cycle check is a walk along one chain.

use crate::error::{Error, Result};
use parking_lot::{Condvar, Mutex};
use rustc_hash::FxHashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

#[derive(Default)]
struct Table {
    owners: FxHashMap<Vec<u8>, u64>,
    waits_for: FxHashMap<u64, u64>,
}

#[derive(Default)]
pub(crate) struct LockTable {
    table: Mutex<Table>,
    released: Condvar,
    pub stats: crate::stats::LockCounters,
}

impl LockTable {
    /// Takes `key` for transaction `txn`, waiting while another holds it. Returns whether
    /// it had to wait.
    pub(crate) fn lock(&self, txn: u64, key: &[u8], timeout: Duration) -> Result<bool> {
        let mut t = self.table.lock();
        let deadline = Instant::now() + timeout;
        let mut waited = false;
        loop {
            let owner = match t.owners.get(key) {
                None => {
                    t.owners.insert(key.to_vec(), txn);
                    return Ok(waited);
                }
                Some(&o) if o == txn => return Ok(waited),
                Some(&o) => o,
            };
            // Would waiting for `owner` close a cycle back to us?
            let mut cur = owner;
            while let Some(&next) = t.waits_for.get(&cur) {
                if next == txn {
                    self.stats.deadlocks.fetch_add(1, Relaxed);
                    return Err(Error::Deadlock);
                }
                cur = next;
            }
            if !waited {
                self.stats.waits.fetch_add(1, Relaxed);
            }
            waited = true;
            t.waits_for.insert(txn, owner);
            let timed_out = self.released.wait_until(&mut t, deadline).timed_out();
            t.waits_for.remove(&txn);
            if timed_out && t.owners.get(key).is_some_and(|&o| o != txn) {
                self.stats.timeouts.fetch_add(1, Relaxed);
                return Err(Error::LockTimeout);
            }
        }
    }

    /// Releases every key in `keys` held by `txn` and wakes the waiters.
    pub(crate) fn release<K: AsRef<[u8]>>(&self, txn: u64, keys: impl IntoIterator<Item = K>) {
        let mut t = self.table.lock();
        let mut any = false;
        for k in keys {
            let k = k.as_ref();
            if t.owners.get(k) == Some(&txn) {
                t.owners.remove(k);
                any = true;
            }
        }
        drop(t);
        if any {
            self.released.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn cycle_is_detected_and_timeout_fires() {
        let lt = Arc::new(LockTable::default());
        lt.lock(1, b"a", Duration::from_secs(1)).unwrap();
        lt.lock(2, b"b", Duration::from_secs(1)).unwrap();
        let lt2 = lt.clone();
        let waiter = std::thread::spawn(move || lt2.lock(1, b"b", Duration::from_secs(5)));
        std::thread::sleep(Duration::from_millis(50));
        assert!(matches!(
            lt.lock(2, b"a", Duration::from_secs(5)),
            Err(Error::Deadlock)
        ));
        lt.release(2, [b"b"]);
        assert!(waiter.join().unwrap().unwrap());
        assert!(matches!(
            lt.lock(3, b"a", Duration::from_millis(20)),
            Err(Error::LockTimeout)
        ));
    }
}
