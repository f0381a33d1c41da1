//! The node cache: page images in memory under a byte budget, with clock eviction.
//!
//! Owns: which pages are resident, their dirty flags, reference bits and the cache counters.
//! May call: nothing else in the crate; the engine writes dirty victims itself (it owns the
//! file and the generation). Invariants: a page number maps to at most one frame; a frame is
//! either in use (in the map) or on the free-frame list. Reads take `&self` (under the
//! engine's read lock) and only touch atomics; everything else needs `&mut self`.
//!
//! Pages loaded by readers: a reader that misses reads the page with no lock held, then,
//! under the shared lock again, adds it to a side table of loaded pages (`&self`, behind a
//! mutex) if no change to its page number's residency happened meanwhile: every insert,
//! discard, move and eviction bumps a change counter of the page's bucket, which only
//! `&mut self` can do, so a counter read under the shared lock before and after the load
//! proves the page still means what the reader's descent saw. Loaded pages become frames
//! at the next `&mut` call (a writer's), before anything else changes the cache, so a
//! loaded image is handed out only while no writer runs. Invariant: a page number is in at
//! most one of the map and the side table.

use crate::sync::OwnLine;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Buckets of page-number change counters.
const EPOCH_BUCKETS: usize = 4096;

pub(crate) struct Frame {
    pub pid: u64,
    pub data: Box<[u8]>,
    pub dirty: bool,
    referenced: AtomicBool,
}

/// Buffers of evicted and discarded frames kept for reuse, at most (more would hold memory
/// past the cache's budget for nothing: a reader's load takes no buffer from here).
pub(crate) const SPARES: usize = 64;

pub(crate) struct Cache {
    map: FxHashMap<u64, u32>,
    frames: Vec<Option<Frame>>,
    free_frames: Vec<u32>,
    spare: Vec<Box<[u8]>>,
    hand: usize,
    capacity: usize,
    page_size: usize,
    hits: StripedCounter,
    /// Pages loaded by readers under the shared lock, waiting to become frames.
    loaded: Mutex<FxHashMap<u64, Box<[u8]>>>,
    loaded_len: AtomicUsize,
    /// Change counters of page-number buckets (see the module doc).
    epochs: Box<[u32]>,
    /// Pages loaded under the exclusive lock (by writers), and by readers without it.
    pub misses: u64,
    pub shared_loads: AtomicU64,
    /// Reads that loaded under the exclusive lock after repeated conflicts with writers,
    /// and reads that took it to evict clean pages their loads overfilled the cache with.
    pub reads_locked: AtomicU64,
    pub reader_evictions: AtomicU64,
    pub evictions: u64,
    pub dirty_evictions: u64,
}

impl Cache {
    pub fn new(page_size: usize, capacity_pages: usize) -> Cache {
        Cache {
            map: FxHashMap::default(),
            frames: Vec::new(),
            free_frames: Vec::new(),
            spare: Vec::new(),
            hand: 0,
            capacity: capacity_pages,
            page_size,
            hits: StripedCounter::default(),
            loaded: Mutex::new(FxHashMap::default()),
            loaded_len: AtomicUsize::new(0),
            epochs: vec![0; EPOCH_BUCKETS].into_boxed_slice(),
            misses: 0,
            shared_loads: AtomicU64::new(0),
            reads_locked: AtomicU64::new(0),
            reader_evictions: AtomicU64::new(0),
            evictions: 0,
            dirty_evictions: 0,
        }
    }

    #[inline]
    pub fn get(&self, pid: u64) -> Option<&[u8]> {
        match self.map.get(&pid) {
            Some(&i) => {
                let f = self.frames[i as usize].as_ref()?;
                if !f.referenced.load(Relaxed) {
                    f.referenced.store(true, Relaxed);
                }
                Some(&f.data)
            }
            None if self.loaded_len.load(Relaxed) > 0 => self.get_loaded(pid),
            None => None,
        }
    }

    #[cold]
    fn get_loaded(&self, pid: u64) -> Option<&[u8]> {
        let loaded = self.loaded.lock();
        let data: *const [u8] = &**loaded.get(&pid)?;
        // SAFETY: a loaded image's heap buffer is freed or moved only by `settle` or `drop`,
        // which take `&mut self`, so it outlives this `&self` borrow; insertions into the
        // table move the `Box`, not the buffer it points to.
        Some(unsafe { &*data })
    }

    /// The image of `pid` if it is resident and dirty.
    pub fn dirty_image(&self, pid: u64) -> Option<&[u8]> {
        let &i = self.map.get(&pid)?;
        self.frames[i as usize]
            .as_ref()
            .filter(|f| f.dirty)
            .map(|f| &f.data[..])
    }

    #[inline]
    pub fn contains(&self, pid: u64) -> bool {
        self.map.contains_key(&pid)
            || (self.loaded_len.load(Relaxed) > 0 && self.loaded.lock().contains_key(&pid))
    }

    /// The change counter of `pid`'s bucket: read it under the shared lock before loading
    /// the page without a lock, and pass it to [`Cache::add_loaded`].
    pub fn epoch(&self, pid: u64) -> u32 {
        self.epochs[pid as usize % EPOCH_BUCKETS]
    }

    fn touch(&mut self, pid: u64) {
        let e = &mut self.epochs[pid as usize % EPOCH_BUCKETS];
        *e = e.wrapping_add(1);
    }

    /// Adds the image of `pid` that a reader loaded without a lock, under the shared lock:
    /// only if its bucket is unchanged since `epoch` was read and the page is not already
    /// there. Returns whether it was added.
    pub fn add_loaded(&self, pid: u64, data: Box<[u8]>, epoch: u32) -> bool {
        if self.epoch(pid) != epoch || self.map.contains_key(&pid) {
            return false;
        }
        let mut loaded = self.loaded.lock();
        if loaded.contains_key(&pid) {
            return false;
        }
        loaded.insert(pid, data);
        self.loaded_len.fetch_add(1, Relaxed);
        self.shared_loads.fetch_add(1, Relaxed);
        true
    }

    /// Makes loaded pages frames, before anything changes the cache.
    fn settle(&mut self) {
        if *self.loaded_len.get_mut() == 0 {
            return;
        }
        let loaded = std::mem::take(self.loaded.get_mut());
        *self.loaded_len.get_mut() = 0;
        for (pid, data) in loaded {
            self.insert_frame(pid, data, false);
        }
    }

    #[inline]
    pub fn frame_mut(&mut self, pid: u64) -> Option<&mut Frame> {
        self.settle();
        let &i = self.map.get(&pid)?;
        self.frames[i as usize].as_mut()
    }

    /// Buffers kept for reuse by [`Cache::buffer`].
    pub fn spares(&mut self) -> &mut Vec<Box<[u8]>> {
        &mut self.spare
    }

    /// A zeroed page buffer, recycled from evicted frames when possible.
    pub fn buffer(&mut self) -> Box<[u8]> {
        match self.spare.pop() {
            Some(mut b) => {
                b.fill(0);
                b
            }
            None => vec![0u8; self.page_size].into_boxed_slice(),
        }
    }

    pub fn insert(&mut self, pid: u64, data: Box<[u8]>, dirty: bool) {
        self.settle();
        self.insert_frame(pid, data, dirty);
    }

    fn insert_frame(&mut self, pid: u64, data: Box<[u8]>, dirty: bool) {
        debug_assert!(!self.map.contains_key(&pid));
        self.touch(pid);
        let frame = Frame {
            pid,
            data,
            dirty,
            referenced: AtomicBool::new(true),
        };
        let i = match self.free_frames.pop() {
            Some(i) => {
                self.frames[i as usize] = Some(frame);
                i
            }
            None => {
                self.frames.push(Some(frame));
                (self.frames.len() - 1) as u32
            }
        };
        self.map.insert(pid, i);
    }

    /// Drops page `pid` from the cache (it was freed); its buffer is recycled.
    pub fn discard(&mut self, pid: u64) {
        self.settle();
        self.touch(pid);
        if let Some(i) = self.map.remove(&pid) {
            if let Some(f) = self.frames[i as usize].take() {
                self.keep_spare(f.data);
            }
            self.free_frames.push(i);
        }
    }

    /// Moves the frame of `old` to page number `new` (copy-on-write relocation).
    pub fn rekey(&mut self, old: u64, new: u64) {
        self.settle();
        self.touch(old);
        self.touch(new);
        let i = self.map.remove(&old).expect("rekey of a non-resident page");
        self.frames[i as usize].as_mut().unwrap().pid = new;
        self.map.insert(new, i);
    }

    pub fn len(&self) -> usize {
        self.map.len() + self.loaded_len.load(Relaxed)
    }

    pub fn over_budget(&self) -> bool {
        self.len() > self.capacity
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Page lookups served from memory: counted once per operation by the engine, which
    /// knows how many pages it visited, to keep an atomic off every page visit.
    pub fn count_hits(&self, n: u64) {
        self.hits.add(n)
    }

    pub fn hits(&self) -> u64 {
        self.hits.sum()
    }

    /// Chooses the next victim by the clock rule: a frame not referenced since the hand last
    /// passed. Returns its page number.
    pub fn victim(&mut self) -> Option<u64> {
        self.settle();
        let n = self.frames.len();
        for _ in 0..2 * n + 1 {
            self.hand = (self.hand + 1) % n.max(1);
            if let Some(f) = self.frames.get(self.hand).and_then(|f| f.as_ref()) {
                if f.referenced.swap(false, Relaxed) {
                    continue;
                }
                return Some(f.pid);
            }
        }
        None
    }

    /// Removes a clean victim; its buffer is recycled.
    pub fn evict(&mut self, pid: u64) {
        let data = self.evict_taking(pid);
        self.keep_spare(data);
    }

    fn keep_spare(&mut self, data: Box<[u8]>) {
        if self.spare.len() < SPARES {
            self.spare.push(data);
        }
    }

    /// Removes a victim and returns its image (a dirty one, which the engine hands over for
    /// writing).
    pub fn evict_taking(&mut self, pid: u64) -> Box<[u8]> {
        self.settle();
        self.touch(pid);
        let i = self
            .map
            .remove(&pid)
            .expect("eviction of a non-resident page");
        self.free_frames.push(i);
        self.evictions += 1;
        self.frames[i as usize].take().expect("a frame in use").data
    }

    /// Page numbers of every dirty frame, sorted.
    pub fn dirty_pages(&mut self) -> Vec<u64> {
        self.settle();
        let mut v: Vec<u64> = self
            .frames
            .iter()
            .flatten()
            .filter(|f| f.dirty)
            .map(|f| f.pid)
            .collect();
        v.sort_unstable();
        v
    }
}

/// A counter bumped from many threads without sharing one cache line.
#[derive(Default)]
struct StripedCounter {
    cells: [OwnLine<AtomicU64>; 8],
}

thread_local! {
    static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
}

impl StripedCounter {
    #[inline]
    fn add(&self, n: u64) {
        let stripe = STRIPE.with(|s| {
            if s.get() == usize::MAX {
                static NEXT: AtomicU64 = AtomicU64::new(0);
                s.set(NEXT.fetch_add(1, Relaxed) as usize % 8);
            }
            s.get()
        });
        self.cells[stripe].0.fetch_add(n, Relaxed);
    }
    fn sum(&self) -> u64 {
        self.cells.iter().map(|c| c.0.load(Relaxed)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_prefers_unreferenced_frames() {
        let mut c = Cache::new(4096, 2);
        for pid in 1..=3 {
            let b = c.buffer();
            c.insert(pid, b, false);
        }
        assert!(c.over_budget());
        // All were referenced on insert; touching 2 again keeps it longest.
        let v = c.victim().unwrap();
        c.evict(v);
        assert!(!c.over_budget());
        assert_eq!(c.len(), 2);
        c.rekey(*[1, 2, 3].iter().find(|&&p| c.contains(p)).unwrap(), 99);
        assert!(c.contains(99));
    }

    /// Images that readers loaded stay readable through the references handed out while
    /// other readers add more (the side table grows and moves its boxes, never their
    /// buffers), and become frames at the next change. Run under Miri in CI, which checks
    /// the `unsafe` of `get_loaded`.
    #[test]
    fn loaded_images_stay_readable_while_others_are_loaded() {
        let mut c = Cache::new(64, 1024);
        let image = |pid: u64| vec![pid as u8; 64].into_boxed_slice();
        std::thread::scope(|s| {
            let c = &c;
            for t in 0..4u64 {
                s.spawn(move || {
                    let mut held: Vec<(u64, &[u8])> = Vec::new();
                    for i in 0..40u64 {
                        let pid = t * 1000 + i;
                        assert!(c.add_loaded(pid, image(pid), c.epoch(pid)));
                        held.push((pid, c.get(pid).unwrap()));
                        for &(pid, data) in &held {
                            assert!(data.iter().all(|&b| b == pid as u8));
                        }
                    }
                    assert!(!c.add_loaded(t * 1000, image(0), c.epoch(t * 1000)));
                });
            }
        });
        assert_eq!(c.len(), 160);
        assert!(c
            .frame_mut(3005)
            .is_some_and(|f| f.data[0] == 3005u64 as u8));
        let pid = 2000;
        let epoch = c.epoch(pid);
        c.discard(pid);
        assert!(
            !c.add_loaded(pid, image(pid), epoch),
            "a change since the epoch"
        );
    }

    /// Pages evicted and discarded keep at most `SPARES` buffers for reuse, however many go:
    /// the spares once grew by a page per eviction when loads took no buffer from them
    /// (a reader's load does not), holding hundreds of megabytes beside a 1 MiB cache.
    #[test]
    fn evictions_keep_a_bounded_number_of_spare_buffers() {
        let mut c = Cache::new(4096, 8);
        for pid in 1..=10_000 {
            c.insert(pid, vec![0u8; 4096].into_boxed_slice(), false);
            while c.over_budget() {
                let v = c.victim().unwrap();
                c.evict(v);
            }
            if pid % 7 == 0 {
                c.discard(pid);
            }
        }
        assert!(c.spares().len() <= SPARES);
        assert_eq!(
            c.spares().len(),
            SPARES,
            "recycling is kept up to the bound"
        );
    }
}
