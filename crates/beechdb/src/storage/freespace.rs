//! Page allocation and the copy-on-write rule for free space.
//!
//! Owns: which pages are free now, which become free when the next checkpoint is durable,
//! and which were allocated since the last durable checkpoint ("fresh"). Invariant: a page
//! that the durable checkpoint references is never handed out, so a crash at any instant
//! finds that checkpoint intact. Freeing a fresh page makes it reusable at once; freeing any
//! other page only queues it until the next checkpoint is durable. A pinned checkpoint's
//! pages are not handed out either: pages that become reusable when checkpoint `g` is
//! durable (the checkpoint before `g` referenced them) are held while a checkpoint older
//! than `g` is pinned, and are still listed as free by every checkpoint (a pin does not
//! survive a crash).

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
    /// Pins per checkpoint generation.
    pins: std::collections::BTreeMap<u64, usize>,
    /// Pages that became reusable when the checkpoint of the generation given was durable,
    /// held for a pin on an older checkpoint.
    held: Vec<(u64, Vec<u64>)>,
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

    /// Pages held for pinned checkpoints.
    pub fn held_count(&self) -> usize {
        self.held.iter().map(|(_, p)| p.len()).sum()
    }

    /// Every page the next checkpoint will list as free: free now, held for a pin, or freed
    /// since the last.
    pub fn checkpoint_free_list(&self) -> Vec<u64> {
        let held = self.held.iter().flat_map(|(_, p)| p.iter().copied());
        let mut all: Vec<u64> = self
            .free
            .iter()
            .copied()
            .chain(self.pending.iter().copied())
            .chain(held)
            .collect();
        all.sort_unstable();
        all
    }

    /// Total entries the next free list will hold.
    pub fn checkpoint_free_len(&self) -> usize {
        self.free.len() + self.pending.len() + self.held_count()
    }

    /// Keeps the pages of checkpoint `generation` (the durable one) from reuse until
    /// [`FreeSpace::unpin`].
    pub fn pin(&mut self, generation: u64) {
        *self.pins.entry(generation).or_default() += 1;
    }

    /// Ends one pin of `generation`; pages no pin needs any more become reusable.
    pub fn unpin(&mut self, generation: u64) {
        if let Some(n) = self.pins.get_mut(&generation) {
            *n -= 1;
            if *n == 0 {
                self.pins.remove(&generation);
            }
        }
        let oldest = self.pins.keys().next().copied();
        let (free, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|(g, _)| oldest.is_none_or(|o| o >= *g));
        self.held = keep;
        for (_, pages) in free {
            self.free.extend(pages);
        }
    }

    /// A checkpoint begins: the pages allocated so far are its own from now on (none is
    /// fresh), and pages freed so far will be reusable once it is durable: returned, for
    /// [`FreeSpace::reusable`] then. Pages freed from here on wait for the checkpoint after.
    pub fn seal(&mut self) -> Vec<u64> {
        self.fresh.clear();
        std::mem::take(&mut self.pending)
    }

    /// The checkpoint that sealed `pages`, of generation `generation`, is durable and no
    /// longer references them: they are free, unless a checkpoint older than it is pinned.
    pub fn reusable(&mut self, pages: Vec<u64>, generation: u64) {
        if self.pins.keys().next().is_some_and(|&o| o < generation) {
            self.held.push((generation, pages));
        } else {
            self.free.extend(pages);
        }
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
        fs.reusable(sealed, 2);
        assert_eq!(fs.allocate(), 7);
        assert_eq!(fs.allocate(), 12, "page 10 waits for the checkpoint after");
        let sealed = fs.seal();
        fs.reusable(sealed, 3);
        assert_eq!(fs.allocate(), 10);
    }

    #[test]
    fn a_pinned_checkpoint_keeps_its_pages() {
        // Checkpoint 5 is durable and references page 4; it is pinned.
        let mut fs = FreeSpace::new(10, []);
        fs.pin(5);
        fs.release(4);
        let sealed = fs.seal();
        fs.reusable(sealed, 6);
        assert_eq!(
            fs.allocate(),
            10,
            "page 4 is held for the pin on checkpoint 5"
        );
        assert_eq!(
            fs.checkpoint_free_list(),
            vec![4],
            "but listed free by checkpoints"
        );
        fs.pin(6);
        fs.unpin(5);
        assert_eq!(
            fs.allocate(),
            4,
            "a pin on checkpoint 6 does not need page 4"
        );
        fs.unpin(6);
        assert_eq!(fs.held_count(), 0);
    }
}
