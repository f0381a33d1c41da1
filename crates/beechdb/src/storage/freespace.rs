//! Page allocation and the copy-on-write rule for free space.
//!
//! Owns: which pages are free now, which become free when the next checkpoint is durable,
//! and which were allocated since the last durable checkpoint ("fresh"). Invariant: a page
//! that the durable checkpoint references is never handed out, so a crash at any instant
//! finds that checkpoint intact. Freeing a fresh page makes it reusable at once; freeing any
//! other page only queues it until the next checkpoint is durable.

use rustc_hash::FxHashSet;
use std::collections::BTreeSet;

#[derive(Debug, Default)]
pub(crate) struct FreeSpace {
    /// Reusable now, lowest first so the file stays compact.
    free: BTreeSet<u64>,
    /// Freed, but still referenced by the durable checkpoint.
    pending: Vec<u64>,
    /// Allocated since the durable checkpoint: safe to overwrite in place.
    fresh: FxHashSet<u64>,
    /// Pages 0..page_count exist; higher numbers extend the file.
    page_count: u64,
}

impl FreeSpace {
    pub fn new(page_count: u64, free: impl IntoIterator<Item = u64>) -> FreeSpace {
        FreeSpace {
            free: free.into_iter().collect(),
            page_count,
            ..FreeSpace::default()
        }
    }

    pub fn allocate(&mut self) -> u64 {
        let pid = self.free.pop_first().unwrap_or_else(|| {
            self.page_count += 1;
            self.page_count - 1
        });
        self.fresh.insert(pid);
        pid
    }

    pub fn release(&mut self, pid: u64) {
        if self.fresh.remove(&pid) {
            self.free.insert(pid);
        } else {
            self.pending.push(pid);
        }
    }

    #[inline]
    pub fn is_fresh(&self, pid: u64) -> bool {
        self.fresh.contains(&pid)
    }

    pub fn page_count(&self) -> u64 {
        self.page_count
    }

    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }

    /// Every page the next checkpoint will list as free: free now, or freed since the last.
    pub fn checkpoint_free_list(&self) -> Vec<u64> {
        let mut all: Vec<u64> = self
            .free
            .iter()
            .copied()
            .chain(self.pending.iter().copied())
            .collect();
        all.sort_unstable();
        all
    }

    /// Total entries the next free list will hold.
    pub fn checkpoint_free_len(&self) -> usize {
        self.free.len() + self.pending.len()
    }

    /// A checkpoint begins: the pages allocated so far are its own from now on (none is
    /// fresh), and pages freed so far will be reusable once it is durable: returned, for
    /// [`FreeSpace::reusable`] then. Pages freed from here on wait for the checkpoint after.
    pub fn seal(&mut self) -> Vec<u64> {
        self.fresh.clear();
        std::mem::take(&mut self.pending)
    }

    /// The checkpoint that sealed `pages` is durable, and no longer references them.
    pub fn reusable(&mut self, pages: Vec<u64>) {
        self.free.extend(pages);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durable_pages_wait_for_the_next_checkpoint() {
        let mut fs = FreeSpace::new(10, [3, 4]);
        let a = fs.allocate();
        assert_eq!(a, 3);
        fs.release(a);
        assert_eq!(fs.allocate(), 3, "a fresh page is reusable at once");
        fs.release(7);
        assert_eq!(fs.allocate(), 4);
        assert_eq!(
            fs.allocate(),
            10,
            "page 7 is still referenced by the durable checkpoint"
        );
        assert_eq!(fs.checkpoint_free_list(), vec![7]);
        let sealed = fs.seal();
        assert!(!fs.is_fresh(10));
        fs.release(10);
        assert_eq!(
            fs.allocate(),
            11,
            "page 10 belongs to the checkpoint being written"
        );
        fs.reusable(sealed);
        assert_eq!(fs.allocate(), 7);
        assert_eq!(fs.allocate(), 12, "page 10 waits for the checkpoint after");
        let sealed = fs.seal();
        fs.reusable(sealed);
        assert_eq!(fs.allocate(), 10);
    }
}
