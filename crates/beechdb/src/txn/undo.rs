//! The values a large transaction's commit replaced, kept in memory up to a budget and on
//! disk past it: what readers see of the keys it wrote while its commit is applied in
//! batches, and what older snapshots see once it is done.
//!
//! Owns: [`UndoStore`] and its temporary file (`undo.N.tmp`, made when its entries outgrow
//! the memory it may keep, removed when the store goes, and at open as a leftover). May
//! call: `storage`. Invariants:
//! - entries are appended in scoped-key order, one per key the commit wrote (the value the
//!   key had before it, `None`: absent), and a key at or before the frontier that the
//!   commit wrote has its entry here; so for a key at or before the frontier, "in the store"
//!   means "changed by the commit". Keys of a database the commit creates have no entry:
//!   the store names the database instead (every key of it was absent before);
//! - while the commit is being applied (`lsn` 0) every reader sees the store's values for
//!   the keys it covers: the commit is invisible until its record is in the log and `lsn`
//!   set, both under the engine's exclusive lock; after that, snapshots older than `lsn`
//!   do;
//! - written blocks never change, so they are read with only the store's mutex held for
//!   the index.

use super::writes::{Capped, Entries, Write};
use crate::error::{Error, Result};
use crate::storage::{Storage, StorageFile};
use parking_lot::Mutex;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

pub(crate) struct UndoStore {
    /// The commit's LSN; 0 while it is being applied.
    lsn: AtomicU64,
    /// Databases the commit writes or creates, and those it removes.
    pub(crate) dbs: Vec<u32>,
    pub(crate) removes: Vec<u32>,
    /// Databases the commit creates: the store holds no entry for their keys, which were
    /// all absent before it (see [`UndoStore::creates`]).
    created: Vec<u32>,
    storage: Arc<dyn Storage>,
    /// Bytes of entries kept in memory before they go to a file (0: every flush writes).
    keep_in_memory: usize,
    /// The file written blocks go to, made by the first flush that writes: its name, the
    /// open file.
    file: OnceLock<(String, Box<dyn StorageFile>)>,
    inner: Mutex<Inner>,
}

/// A written block: its first and last keys, offset and length in the file.
struct Block {
    first: Vec<u8>,
    last: Vec<u8>,
    off: u64,
    len: usize,
}

#[derive(Default)]
struct Inner {
    /// The last key the commit had applied when the tail was last written out (with a
    /// tail, its last key is the frontier: see `Inner::frontier`).
    frontier: Option<Vec<u8>>,
    blocks: Vec<Block>,
    /// Entries not yet written, after every block's, and the bytes they take encoded.
    tail: Entries,
    tail_bytes: usize,
    file_len: u64,
    /// The block read last, decoded.
    cached: Option<(usize, Arc<Entries>)>,
}

impl Inner {
    /// The last key the commit has applied: the store covers every key up to it (keys are
    /// pushed in order, so the tail's last, else the last written out).
    fn frontier(&self) -> Option<&[u8]> {
        self.tail
            .last()
            .map(|(k, _)| k.as_slice())
            .or(self.frontier.as_deref())
    }
}

fn encode(entries: &[(Vec<u8>, Write)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, w) in entries {
        out.extend_from_slice(&(k.len() as u32).to_le_bytes());
        out.push(w.is_some() as u8);
        let v = w.as_deref().unwrap_or(&[]);
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(k);
        out.extend_from_slice(v);
    }
    out
}

/// What an entry takes encoded.
fn entry_bytes(key: &[u8], w: &Write) -> usize {
    9 + key.len() + w.as_ref().map_or(0, Vec::len)
}

fn decode(mut buf: &[u8]) -> Option<Entries> {
    let mut out = Vec::new();
    let take = |buf: &mut &[u8], n: usize| -> Option<Vec<u8>> {
        let (head, tail) = (buf.get(..n)?, buf.get(n..)?);
        *buf = tail;
        Some(head.to_vec())
    };
    while !buf.is_empty() {
        let h = take(&mut buf, 9)?;
        let kl = u32::from_le_bytes(h[..4].try_into().unwrap()) as usize;
        let vl = u32::from_le_bytes(h[5..9].try_into().unwrap()) as usize;
        let key = take(&mut buf, kl)?;
        let value = take(&mut buf, vl)?;
        out.push((key, (h[4] == 1).then_some(value)));
    }
    Some(out)
}

/// Bytes of entries per written block.
const BLOCK_BYTES: usize = 64 << 10;

impl UndoStore {
    /// A new, empty store for a commit that writes or creates databases `dbs` (creating
    /// `created` of them) and removes `removes`, in `storage`: its entries are kept in
    /// memory up to `keep_in_memory` bytes (0 for a spilled commit, whose values before are
    /// as unbounded as its writes; the transaction budget for one whose writes stayed in
    /// memory), then written to a file of their own (`undo.N.tmp`) at each flush.
    pub(crate) fn new(
        storage: Arc<dyn Storage>,
        keep_in_memory: usize,
        dbs: Vec<u32>,
        created: Vec<u32>,
        removes: Vec<u32>,
    ) -> Arc<UndoStore> {
        Arc::new(UndoStore {
            lsn: AtomicU64::new(0),
            dbs,
            removes,
            created,
            storage,
            keep_in_memory,
            file: OnceLock::new(),
            inner: Mutex::default(),
        })
    }

    /// Makes the store's file ahead of its first flush.
    pub(crate) fn make_file(&self) -> Result<()> {
        self.file().map(drop)
    }

    /// The store's file, made the first time (only the committer writes, so only it
    /// makes it).
    fn file(&self) -> Result<&(String, Box<dyn StorageFile>)> {
        if let Some(f) = self.file.get() {
            return Ok(f);
        }
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let name = format!("undo.{}.tmp", NEXT.fetch_add(1, Ordering::Relaxed));
        let file = self
            .storage
            .open(&name, true)
            .and_then(|f| f.set_len(0).map(|()| f))
            .map_err(|e| {
                let _ = self.storage.remove(&name);
                Error::io(format!("creating {name}"), e)
            })?;
        let _ = self.file.set((name, file));
        Ok(self.file.get().expect("set above"))
    }

    /// The commit's LSN, once its record is logged.
    pub(crate) fn lsn(&self) -> Option<u64> {
        Some(self.lsn.load(Ordering::Acquire)).filter(|&l| l != 0)
    }

    /// Marks the commit done at `lsn` (under the engine's exclusive lock).
    pub(crate) fn set_committed(&self, lsn: u64) {
        self.lsn.store(lsn, Ordering::Release);
    }

    /// Whether a reader of snapshot `at` (`None`: the latest committed data) sees this
    /// store's values rather than the trees'.
    pub(crate) fn hides_for(&self, at: Option<u64>) -> bool {
        match (self.lsn(), at) {
            (None, _) => true,
            (Some(lsn), Some(s)) => s < lsn,
            (Some(_), None) => false,
        }
    }

    /// Whether the commit creates database `db`: a reader this store hides the commit from
    /// sees `db` empty, whatever the tree holds (an entry per key, each saying "absent",
    /// would say the same at a cost per write).
    pub(crate) fn creates(&self, db: u32) -> bool {
        self.created.contains(&db)
    }

    /// Records the value scoped key `key` had before the commit wrote it; keys come in
    /// order. Call under the engine's exclusive lock, before the write is applied.
    /// Returns the bytes the next [`UndoStore::flush`] will write.
    pub(crate) fn push(&self, key: Vec<u8>, before: Write) -> usize {
        let mut g = self.inner.lock();
        g.tail_bytes += entry_bytes(&key, &before);
        g.tail.push((key, before));
        match self.keeps(&g) {
            true => 0,
            false => g.tail_bytes,
        }
    }

    /// Whether the unwritten entries stay in memory at a flush.
    fn keeps(&self, g: &Inner) -> bool {
        self.file.get().is_none() && g.tail_bytes <= self.keep_in_memory
    }

    /// Writes the entries pushed so far to the file (no engine lock needed; only the
    /// committer writes).
    pub(crate) fn flush(&self) -> Result<()> {
        let (bytes, n, off) = {
            let g = self.inner.lock();
            if g.tail.is_empty() || self.keeps(&g) {
                return Ok(());
            }
            (encode(&g.tail), g.tail.len(), g.file_len)
        };
        let (name, file) = self.file()?;
        file.write_at(&bytes, off)
            .map_err(|e| Error::io(format!("writing {name}"), e))?;
        let mut g = self.inner.lock();
        let rest = g.tail.split_off(n);
        g.tail_bytes = rest.iter().map(|(k, w)| entry_bytes(k, w)).sum();
        let written = std::mem::replace(&mut g.tail, rest);
        if let Some((last, _)) = written.last() {
            g.frontier = Some(last.clone());
        }
        // Blocks of about BLOCK_BYTES each, so a lookup reads little.
        let mut at = off;
        let mut i = 0;
        while i < written.len() {
            let start = i;
            let mut len = 0;
            while i < written.len() && (len < BLOCK_BYTES || i == start) {
                let (k, w) = &written[i];
                len += entry_bytes(k, w);
                i += 1;
            }
            g.blocks.push(Block {
                first: written[start].0.clone(),
                last: written[i - 1].0.clone(),
                off: at,
                len,
            });
            at += len as u64;
        }
        g.file_len = at;
        Ok(())
    }

    fn read_block(&self, i: usize) -> Result<Arc<Entries>> {
        let (off, len) = {
            let g = self.inner.lock();
            if let Some((c, entries)) = &g.cached {
                if *c == i {
                    return Ok(entries.clone());
                }
            }
            (g.blocks[i].off, g.blocks[i].len)
        };
        let (name, file) = self
            .file
            .get()
            .expect("only a store with a file has blocks");
        let mut buf = vec![0u8; len];
        file.read_at(&mut buf, off)
            .map_err(|e| Error::io(format!("reading {name}"), e))?;
        let entries = Arc::new(decode(&buf).ok_or_else(|| Error::Corrupt {
            page: None,
            detail: format!("{name} holds a block that does not decode"),
        })?);
        self.inner.lock().cached = Some((i, entries.clone()));
        Ok(entries)
    }

    /// The value scoped key `key` had before the commit, if the commit wrote it (and has
    /// applied it).
    pub(crate) fn lookup(&self, key: &[u8]) -> Result<Option<Write>> {
        let block = {
            let g = self.inner.lock();
            if g.frontier().is_none_or(|f| key > f) {
                return Ok(None);
            }
            if let Ok(i) = g.tail.binary_search_by(|(k, _)| k.as_slice().cmp(key)) {
                return Ok(Some(g.tail[i].1.clone()));
            }
            let i = g.blocks.partition_point(|b| b.last.as_slice() < key);
            if i == g.blocks.len() || g.blocks[i].first.as_slice() > key {
                return Ok(None);
            }
            i
        };
        let entries = self.read_block(block)?;
        Ok(entries
            .binary_search_by(|(k, _)| k.as_slice().cmp(key))
            .ok()
            .map(|i| entries[i].1.clone()))
    }

    /// The entries with scoped keys in `(lo, hi)` (and up to the frontier), in key order
    /// (descending with `reverse`), at most `cap` of them; with the last key returned when
    /// there were more (the answer is exact up to it).
    pub(crate) fn range(
        &self,
        lo: &Bound<Vec<u8>>,
        hi: &Bound<Vec<u8>>,
        reverse: bool,
        cap: usize,
    ) -> Result<Capped> {
        let in_range = |k: &[u8]| super::in_bounds(k, lo, hi);
        let (blocks, tail): (Vec<usize>, Vec<(Vec<u8>, Write)>) = {
            let g = self.inner.lock();
            let blocks = (0..g.blocks.len())
                .filter(|&i| {
                    let b = &g.blocks[i];
                    let below_hi = match hi {
                        Bound::Included(h) => b.first <= *h,
                        Bound::Excluded(h) => b.first < *h,
                        Bound::Unbounded => true,
                    };
                    let above_lo = match lo {
                        Bound::Included(l) => b.last >= *l,
                        Bound::Excluded(l) => b.last > *l,
                        Bound::Unbounded => true,
                    };
                    below_hi && above_lo
                })
                .collect();
            // The tail is sorted (and, for a store in memory, the whole commit).
            let from = match lo {
                Bound::Included(l) => g.tail.partition_point(|(k, _)| k < l),
                Bound::Excluded(l) => g.tail.partition_point(|(k, _)| k <= l),
                Bound::Unbounded => 0,
            };
            let to = match hi {
                Bound::Included(h) => g.tail.partition_point(|(k, _)| k <= h),
                Bound::Excluded(h) => g.tail.partition_point(|(k, _)| k < h),
                Bound::Unbounded => g.tail.len(),
            };
            // At most `cap` and one more of them are handed out, from the end nearest the
            // direction of travel's start (the blocks come before the tail).
            let to = to.max(from);
            let (from, to) = match reverse {
                true => (to.saturating_sub(cap.saturating_add(1)).max(from), to),
                false => (from, to.min(from.saturating_add(cap.saturating_add(1)))),
            };
            let tail = g.tail[from..to].to_vec();
            (blocks, tail)
        };
        let mut out = Vec::new();
        let mut more = false;
        let mut add = |entries: &mut dyn Iterator<Item = (Vec<u8>, Write)>| {
            for e in entries {
                if out.len() == cap {
                    more = true;
                    return;
                }
                out.push(e);
            }
        };
        if reverse {
            add(&mut tail.into_iter().rev());
            for &i in blocks.iter().rev() {
                let entries = self.read_block(i)?;
                add(&mut entries.iter().rev().filter(|(k, _)| in_range(k)).cloned());
            }
        } else {
            for &i in &blocks {
                let entries = self.read_block(i)?;
                add(&mut entries.iter().filter(|(k, _)| in_range(k)).cloned());
            }
            add(&mut tail.into_iter());
        }
        let cut = more.then(|| out.last().map(|(k, _)| k.clone())).flatten();
        Ok((out, cut))
    }
}

impl Drop for UndoStore {
    fn drop(&mut self) {
        // A leftover is removed at the next open.
        if let Some((name, _)) = self.file.get() {
            let _ = self.storage.remove(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemStorage;

    fn key(n: u32) -> Vec<u8> {
        crate::txn::scoped_key(1, format!("k{n:05}").as_bytes())
    }

    #[test]
    fn lookups_and_ranges_cover_written_and_pending_entries_up_to_the_frontier() {
        let store = UndoStore::new(Arc::new(MemStorage::new()), 0, vec![1], vec![], vec![]);
        lookups_and_ranges(&store);
        assert!(store.inner.lock().blocks.len() > 2);
    }

    #[test]
    fn a_store_in_memory_answers_the_same_from_its_entries() {
        let store = UndoStore::new(
            Arc::new(MemStorage::new()),
            usize::MAX,
            vec![1],
            vec![],
            vec![],
        );
        lookups_and_ranges(&store);
        assert!(store.inner.lock().blocks.is_empty());
        // A capped range takes its entries from the end it starts at.
        let (back, cut) = store
            .range(&Bound::Unbounded, &Bound::Unbounded, true, 10)
            .unwrap();
        assert_eq!(
            (back[0].0.clone(), back.len(), cut),
            (key(1998), 10, Some(key(1980)))
        );
        // Ranges within the entries, each bound both ways.
        for (lo, hi, want) in [
            (Bound::Included(key(1000)), Bound::Excluded(key(1010)), 5),
            (Bound::Excluded(key(1000)), Bound::Included(key(1010)), 5),
            (Bound::Included(key(1001)), Bound::Included(key(1001)), 0),
            (Bound::Included(key(1998)), Bound::Unbounded, 1),
            (Bound::Unbounded, Bound::Excluded(key(2)), 1),
            (Bound::Included(key(10)), Bound::Excluded(key(4)), 0),
        ] {
            let (got, cut) = store.range(&lo, &hi, false, usize::MAX).unwrap();
            assert_eq!((got.len(), cut), (want, None), "{lo:?}..{hi:?}");
            assert!(got.iter().all(|(k, _)| crate::txn::in_bounds(k, &lo, &hi)));
        }
    }

    /// A store in memory past its budget writes everything to a file at the next flush,
    /// and every flush after that, answering the same; under it, no file is made.
    #[test]
    fn a_store_in_memory_moves_to_a_file_past_its_budget() {
        let storage = Arc::new(MemStorage::new());
        let files = || {
            let names = storage.list().unwrap();
            names.into_iter().filter(|n| n.starts_with("undo.")).count()
        };
        let store = UndoStore::new(storage.clone(), 1 << 20, vec![1], vec![], vec![]);
        assert_eq!(store.push(key(0), Some(vec![1; 1000])), 0, "kept in memory");
        store.flush().unwrap();
        assert_eq!(files(), 0);
        let store = UndoStore::new(storage.clone(), 200_000, vec![1], vec![], vec![]);
        lookups_and_ranges(&store);
        assert!(store.inner.lock().blocks.len() > 2);
        assert_eq!(files(), 1);
        assert!(store.push(key(5000), None) > 0, "written at the next flush");
        drop(store);
        assert_eq!(files(), 0, "removed with the store");
    }

    fn lookups_and_ranges(store: &UndoStore) {
        assert_eq!(store.lookup(&key(0)).unwrap(), None);
        let before =
            |n: u32| (!n.is_multiple_of(3)).then(|| vec![n as u8; (n % 7) as usize * 3000]);
        for n in (0..2000).step_by(2) {
            store.push(key(n), before(n));
            if n % 500 == 0 {
                store.flush().unwrap();
            }
        }
        assert!(!store.inner.lock().tail.is_empty());
        for n in 0..2100 {
            let want = (n < 2000 && n % 2 == 0).then(|| before(n));
            assert_eq!(store.lookup(&key(n)).unwrap(), want, "key {n}");
        }
        let (all, cut) = store
            .range(&Bound::Unbounded, &Bound::Unbounded, false, usize::MAX)
            .unwrap();
        assert_eq!((all.len(), cut), (1000, None));
        let (lo, hi) = (Bound::Excluded(key(100)), Bound::Included(key(300)));
        let (some, cut) = store.range(&lo, &hi, false, 10).unwrap();
        assert_eq!(some.first().unwrap().0, key(102));
        assert_eq!(cut, Some(key(120)));
        let (back, cut) = store.range(&lo, &hi, true, 1000).unwrap();
        assert_eq!((back.len(), back[0].0.clone(), cut), (100, key(300), None));
        assert!(store.hides_for(None) && store.hides_for(Some(u64::MAX)));
        store.set_committed(500);
        assert!(!store.hides_for(None) && store.hides_for(Some(499)));
        assert!(!store.hides_for(Some(500)));
    }
}
