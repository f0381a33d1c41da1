//! Key locks for writers: one owner per key, waits bounded by a timeout, and a wait-for
//! graph that finds deadlocks the moment a wait would close a cycle. A transaction holding
//! many keys of one database may trade them for one lock on the whole database (lock
//! escalation), which it gets only once no other transaction holds a key there.
//!
//! Keys are scoped keys (database id big-endian, then the key). Invariants: every
//! transaction waits for at most one other, so the graph is a set of chains and a cycle
//! check is a walk along one chain; a database lock and another transaction's key lock in
//! that database never coexist.

use crate::error::{Error, Result};
use parking_lot::{Condvar, Mutex};
use rustc_hash::FxHashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::{Duration, Instant};

/// A small number naming the calling thread, cheaper to read than `thread::current()`.
pub(crate) fn thread_tag() -> u64 {
    use std::sync::atomic::AtomicU64;
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static TAG: u64 = NEXT.fetch_add(1, Relaxed);
    }
    TAG.with(|t| *t)
}

#[derive(Default)]
struct Table {
    /// Key -> (transaction, tag of the thread that took the lock).
    owners: FxHashMap<Vec<u8>, (u64, u64)>,
    waits_for: FxHashMap<u64, u64>,
    /// Database id -> the transaction holding the whole database.
    databases: FxHashMap<u32, u64>,
}

fn db_of(key: &[u8]) -> Option<u32> {
    key.get(..4)
        .map(|b| u32::from_be_bytes(b.try_into().unwrap()))
}

impl Table {
    /// The transaction other than `txn` that `key`'s lock (or its database's) belongs to,
    /// with the thread that took a key lock.
    fn holder(&self, txn: u64, key: &[u8]) -> Option<(u64, Option<u64>)> {
        if !self.databases.is_empty() {
            if let Some(&o) = db_of(key).and_then(|db| self.databases.get(&db)) {
                return (o != txn).then_some((o, None));
            }
        }
        self.owners
            .get(key)
            .filter(|&&(o, _)| o != txn)
            .map(|&(o, thread)| (o, Some(thread)))
    }

    /// Whether waiting for `owner` would close a cycle back to `txn`.
    fn would_deadlock(&self, txn: u64, owner: u64) -> bool {
        let mut cur = owner;
        while let Some(&next) = self.waits_for.get(&cur) {
            if next == txn {
                return true;
            }
            cur = next;
        }
        false
    }
}

#[derive(Default)]
pub(crate) struct LockTable {
    table: Mutex<Table>,
    /// Key and database locks held, kept equal to the table's count under its mutex: read
    /// with no mutex by [`LockTable::is_free`].
    held: AtomicUsize,
    released: Condvar,
    pub stats: crate::stats::LockCounters,
}

impl LockTable {
    /// Takes `key` for transaction `txn`, waiting while another holds it. Returns whether
    /// it had to wait. With `single_op` (an auto-commit write, which holds nothing else), a
    /// key held by a transaction this very thread took it with is a deadlock at once: the
    /// thread would wait for itself.
    pub(crate) fn lock(
        &self,
        txn: u64,
        key: &[u8],
        timeout: Duration,
        single_op: bool,
    ) -> Result<bool> {
        let me = thread_tag();
        let mut t = self.table.lock();
        let mut deadline = None;
        let mut waited = false;
        loop {
            let Some((owner, owner_thread)) = t.holder(txn, key) else {
                let covered = !t.databases.is_empty()
                    && db_of(key).and_then(|db| t.databases.get(&db)) == Some(&txn);
                if !covered {
                    t.owners.insert(key.to_vec(), (txn, me));
                    self.recount(&t);
                }
                return Ok(waited);
            };
            if t.would_deadlock(txn, owner) || single_op && owner_thread == Some(me) {
                self.stats.deadlocks.fetch_add(1, Relaxed);
                return Err(Error::Deadlock);
            }
            if !waited {
                self.stats.waits.fetch_add(1, Relaxed);
            }
            waited = true;
            t.waits_for.insert(txn, owner);
            let deadline = *deadline.get_or_insert_with(|| Instant::now() + timeout);
            let timed_out = self.released.wait_until(&mut t, deadline).timed_out();
            t.waits_for.remove(&txn);
            if timed_out && t.holder(txn, key).is_some() {
                self.stats.timeouts.fetch_add(1, Relaxed);
                return Err(Error::LockTimeout);
            }
        }
    }

    /// Trades `txn`'s key locks in database `db` for a lock on the whole database, waiting
    /// (at most `timeout`) for other transactions holding keys there to end. Gives up, with
    /// nothing changed, if a wait would deadlock or time out. Returns whether it succeeded.
    pub(crate) fn escalate(&self, txn: u64, db: u32, timeout: Duration) -> bool {
        let prefix = db.to_be_bytes();
        let mut t = self.table.lock();
        let deadline = Instant::now() + timeout;
        loop {
            let other = match t.databases.get(&db) {
                Some(&o) if o != txn => Some(o),
                Some(_) => return true,
                None => t
                    .owners
                    .iter()
                    .find(|(k, &(o, _))| o != txn && k.starts_with(&prefix))
                    .map(|(_, &(o, _))| o),
            };
            let Some(owner) = other else {
                t.databases.insert(db, txn);
                t.owners
                    .retain(|k, &mut (o, _)| !(o == txn && k.starts_with(&prefix)));
                self.recount(&t);
                self.stats.escalations.fetch_add(1, Relaxed);
                return true;
            };
            if t.would_deadlock(txn, owner) {
                return false;
            }
            t.waits_for.insert(txn, owner);
            let timed_out = self.released.wait_until(&mut t, deadline).timed_out();
            t.waits_for.remove(&txn);
            if timed_out {
                return false;
            }
        }
    }

    /// Whether no transaction but `txn` holds `db`'s `key` or the whole of `db`: for a write
    /// that takes no lock because it is applied within one hold of the engine's exclusive
    /// lock (an auto-commit). Race-free against a transaction locking the key meanwhile,
    /// because a lock taker then reads the engine (its snapshot check) and so waits out
    /// that hold: the count and the engine's writer flag are a Dekker pair, both `SeqCst`.
    pub(crate) fn is_free(&self, txn: u64, db: u32, key: &[u8]) -> bool {
        self.held.load(SeqCst) == 0
            || self
                .table
                .lock()
                .holder(txn, &super::scoped_key(db, key))
                .is_none()
    }

    fn recount(&self, t: &Table) {
        self.held.store(t.owners.len() + t.databases.len(), SeqCst);
    }

    /// Releases `txn`'s locks on the databases `dbs` and wakes the waiters.
    pub(crate) fn release_databases(&self, txn: u64, dbs: &[u32]) {
        if dbs.is_empty() {
            return;
        }
        let mut t = self.table.lock();
        for db in dbs {
            if t.databases.get(db) == Some(&txn) {
                t.databases.remove(db);
            }
        }
        self.recount(&t);
        drop(t);
        self.released.notify_all();
    }

    /// Releases every key in `keys` held by `txn` and wakes the waiters.
    pub(crate) fn release<K: AsRef<[u8]>>(&self, txn: u64, keys: impl IntoIterator<Item = K>) {
        let mut t = self.table.lock();
        let mut any = false;
        for k in keys {
            let k = k.as_ref();
            if t.owners.get(k).map(|o| o.0) == Some(txn) {
                t.owners.remove(k);
                any = true;
            }
        }
        self.recount(&t);
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
        lt.lock(1, b"a", Duration::from_secs(1), false).unwrap();
        lt.lock(2, b"b", Duration::from_secs(1), false).unwrap();
        let lt2 = lt.clone();
        let waiter = std::thread::spawn(move || lt2.lock(1, b"b", Duration::from_secs(30), false));
        while lt.table.lock().waits_for.get(&1) != Some(&2) {
            std::thread::yield_now();
        }
        assert!(matches!(
            lt.lock(2, b"a", Duration::from_secs(5), false),
            Err(Error::Deadlock)
        ));
        lt.release(2, [b"b"]);
        assert!(waiter.join().unwrap().unwrap());
        assert!(matches!(
            lt.lock(3, b"a", Duration::from_millis(20), false),
            Err(Error::LockTimeout)
        ));
    }

    fn key(db: u32, k: &[u8]) -> Vec<u8> {
        crate::txn::scoped_key(db, k)
    }

    #[test]
    fn escalation_waits_for_other_holders_then_covers_the_database() {
        let lt = Arc::new(LockTable::default());
        let short = Duration::from_millis(30);
        lt.lock(1, &key(5, b"a"), short, false).unwrap();
        lt.lock(2, &key(5, b"b"), short, false).unwrap();
        lt.lock(2, &key(6, b"x"), short, false).unwrap();
        // Transaction 2 holds a key in database 5: no escalation for 1 yet.
        assert!(!lt.escalate(1, 5, short));
        lt.release(2, [key(5, b"b")]);
        assert!(lt.escalate(1, 5, short));
        // Every key of database 5 is now 1's, including ones it never named; 1's own key
        // entry went with the escalation.
        assert!(matches!(
            lt.lock(2, &key(5, b"zzz"), short, false),
            Err(Error::LockTimeout)
        ));
        assert!(!lt.lock(1, &key(5, b"new"), short, false).unwrap());
        assert!(lt.table.lock().owners.keys().all(|k| db_of(k) != Some(5)));
        // Database 6 is untouched.
        assert!(lt.escalate(2, 6, short));
        lt.release_databases(1, &[5]);
        assert!(!lt.lock(2, &key(5, b"zzz"), short, false).unwrap());
        // A waiter for the database lock wakes when it goes.
        lt.release(2, [key(5, b"zzz")]);
        assert!(lt.escalate(1, 5, short));
        let lt2 = lt.clone();
        let waiter =
            std::thread::spawn(move || lt2.lock(3, &key(5, b"q"), Duration::from_secs(30), false));
        while lt.table.lock().waits_for.get(&3) != Some(&1) {
            std::thread::yield_now();
        }
        lt.release_databases(1, &[5]);
        assert!(waiter.join().unwrap().unwrap());
    }

    #[test]
    fn escalation_gives_up_rather_than_deadlock() {
        let lt = Arc::new(LockTable::default());
        lt.lock(1, &key(5, b"a"), Duration::from_secs(1), false)
            .unwrap();
        lt.lock(2, &key(5, b"b"), Duration::from_secs(1), false)
            .unwrap();
        let lt2 = lt.clone();
        // 2 waits for 1's key; 1 escalating would wait for 2: it gives up instead.
        let waiter =
            std::thread::spawn(move || lt2.lock(2, &key(5, b"a"), Duration::from_secs(5), false));
        while lt.table.lock().waits_for.get(&2) != Some(&1) {
            std::thread::yield_now();
        }
        assert!(!lt.escalate(1, 5, Duration::from_secs(5)));
        lt.release(1, [key(5, b"a")]);
        assert!(waiter.join().unwrap().unwrap());
    }
}
