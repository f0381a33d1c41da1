//! The node cache: page images in memory under a byte budget, with clock eviction.
//!
//! Owns: which pages are resident, their dirty flags, reference bits and the cache counters.
//! May call: nothing else in the crate; the engine writes dirty victims itself (it owns the
//! file and the generation). Invariants: a page number maps to at most one frame; a frame is
//! either in use (in the map) or on the free-frame list. Reads take `&self` (under the
//! engine's read lock) and only touch atomics; everything else needs `&mut self`.

use rustc_hash::FxHashMap;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

pub(crate) struct Frame {
    pub pid: u64,
    pub data: Box<[u8]>,
    pub dirty: bool,
    referenced: AtomicBool,
}

pub(crate) struct Cache {
    map: FxHashMap<u64, u32>,
    frames: Vec<Option<Frame>>,
    free_frames: Vec<u32>,
    spare: Vec<Box<[u8]>>,
    hand: usize,
    capacity: usize,
    page_size: usize,
    hits: StripedCounter,
    pub misses: u64,
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
            misses: 0,
            evictions: 0,
            dirty_evictions: 0,
        }
    }

    #[inline]
    pub fn get(&self, pid: u64) -> Option<&[u8]> {
        let &i = self.map.get(&pid)?;
        let f = self.frames[i as usize].as_ref()?;
        if !f.referenced.load(Relaxed) {
            f.referenced.store(true, Relaxed);
        }
        Some(&f.data)
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
    }

    #[inline]
    pub fn frame_mut(&mut self, pid: u64) -> Option<&mut Frame> {
        let &i = self.map.get(&pid)?;
        self.frames[i as usize].as_mut()
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
        debug_assert!(!self.map.contains_key(&pid));
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
        if let Some(i) = self.map.remove(&pid) {
            if let Some(f) = self.frames[i as usize].take() {
                self.spare.push(f.data);
            }
            self.free_frames.push(i);
        }
    }

    /// Moves the frame of `old` to page number `new` (copy-on-write relocation).
    pub fn rekey(&mut self, old: u64, new: u64) {
        let i = self.map.remove(&old).expect("rekey of a non-resident page");
        self.frames[i as usize].as_mut().unwrap().pid = new;
        self.map.insert(new, i);
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn over_budget(&self) -> bool {
        self.map.len() > self.capacity
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

    /// Removes a clean victim (the caller has written it if it was dirty).
    pub fn evict(&mut self, pid: u64) {
        self.discard(pid);
        self.evictions += 1;
    }

    /// Page numbers of every dirty frame, sorted.
    pub fn dirty_pages(&self) -> Vec<u64> {
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
    cells: [PaddedCounter; 8],
}

#[derive(Default)]
#[repr(align(64))]
struct PaddedCounter(AtomicU64);

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
}
