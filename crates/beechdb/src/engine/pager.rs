//! The pager: pages of the file in the cache, loaded and checked on every read, allocated
//! and freed through the free space, handed over for writing on eviction.
//!
//! Owns: [`Pager`] (the page file, the cache, free space, the tree-shape epoch, and the
//! frames a checkpoint in flight still needs): loading (under the exclusive lock, or by
//! readers with no lock through [`PageMiss`]), page allocation and freeing, eviction. The
//! engine keeps one (`Engine::pager`); tree code reads and changes pages through it. May
//! call: `storage`, `cache`, `btree::node` (to
//! validate a page's structure), `engine/writeback.rs` (evicted dirty pages go there, and
//! loads read a page there before the file). Tree code works over these methods. No method
//! here writes: I/O under the exclusive lock is only a load the caller could not avoid.
//! Invariant: a dirty page is written only where the durable checkpoint does not reference
//! it (see the invariants in `engine/mod.rs`).

use super::{Engine, Need, NeedResult, WriteBack};
use crate::btree::node::{self, Layout};
use crate::cache::Cache;
use crate::error::{Error, Result};
use crate::storage::freespace::FreeSpace;
use crate::storage::page;
use crate::storage::StorageFile;
use std::sync::Arc;

/// A page a reader found missing: what it needs to load it with no lock held, and the
/// change counter of its page number to prove, under the shared lock again, that the page
/// still means what the reader's descent saw.
pub(crate) struct PageMiss {
    pub pid: u64,
    pub epoch: u32,
    writeback: Arc<WriteBack>,
    page_count: u64,
    max_gen: u64,
    layout: Layout,
    read_only: bool,
}

/// A page that fails its checks in a read-only engine is most likely one the writing
/// process reused after a checkpoint: the error says so.
fn read_error(read_only: bool, e: Error) -> Error {
    match e {
        Error::Corrupt { page, detail } if read_only => Error::Corrupt {
            page,
            detail: format!(
                "{detail} (read-only: if another process writes this environment, it may have \
                 reused the page after a checkpoint, and opening again reads the newer one; \
                 otherwise the page is damaged: `beech verify` reports the damage and \
                 `beech dump --salvage` recovers every record still readable)"
            ),
        },
        e => e,
    }
}

impl PageMiss {
    /// Reads and checks the page (the I/O of a cache miss, under no lock).
    pub fn load(&self) -> Result<Box<[u8]>> {
        // A kept buffer needs no zeroing: the read fills it whole, or fails.
        let mut buf = self
            .writeback
            .spare_buffer()
            .unwrap_or_else(|| vec![0u8; self.layout.page_size].into_boxed_slice());
        self.writeback
            .read_page(self.pid, &mut buf, self.page_count, self.max_gen, None)
            .and_then(|_| node::validate(&buf, self.pid, &self.layout, self.page_count))
            .map_err(|e| read_error(self.read_only, e))?;
        Ok(buf)
    }
}

/// The pages of the file as tree code sees them: loaded into the cache (and checked) on
/// demand, allocated and freed through the free space, evicted within the cache's budget.
pub(crate) struct Pager {
    pub layout: Layout,
    pub file: Arc<dyn StorageFile>,
    /// Pages handed over under the exclusive lock, written after it is released.
    pub writeback: Arc<WriteBack>,
    pub cache: Cache,
    pub space: FreeSpace,
    /// Bumped by every change to the shape of any tree or to the cache's residency:
    /// allocation, relocation, freeing, eviction. A
    /// [`LeafHint`](super::LeafHint) is valid only in its epoch.
    pub epoch: u64,
    /// Generation of the durable checkpoint.
    pub generation: u64,
    /// Opened with `Config::read_only`: writes nothing, ever.
    pub read_only: bool,
    /// Something changed since the durable checkpoint.
    pub changed: bool,
    /// A checkpoint is between its first and last phase.
    pub checkpoint_in_flight: bool,
    /// Pages relocated or freed whose frames the checkpoint in flight still has to write.
    pub retired: Vec<u64>,
}

impl Engine {
    /// Evicts pages until the cache is within budget (see [`Pager::shrink_cache`]); a
    /// poisoned engine keeps its dirty pages.
    pub fn shrink_cache(&mut self) {
        let writable = self.poisoned.is_none();
        self.pager.shrink_cache(writable);
    }

    /// Whether the cache holds at least as many pages as the trees use (the file's pages
    /// less the meta pages, free ones and the durable checkpoint's free-list pages, which
    /// are never cached): then no descent will miss.
    pub(crate) fn all_pages_resident(&self) -> bool {
        let space = &self.pager.space;
        let unused = 2
            + self.freelist_pages.len()
            + space.free_count()
            + space.pending_count()
            + space.held_count();
        self.pager.cache.len() as u64 + unused as u64 >= space.page_count()
    }
}

impl Pager {
    /// Loads page `pid` into the cache, checking checksum, header and structure.
    pub fn load(&mut self, pid: u64) -> Result<()> {
        let mut buf = self.cache.buffer();
        self.writeback
            .read_page(
                pid,
                &mut buf,
                self.space.page_count(),
                self.max_page_generation(),
                None,
            )
            .and_then(|_| node::validate(&buf, pid, &self.layout, self.space.page_count()))
            .map_err(|e| self.explain_read_error(e))?;
        self.cache.misses += 1;
        self.cache.insert(pid, buf, false);
        Ok(())
    }

    /// What a reader needs to load `pid` with no lock held (see [`PageMiss`]).
    pub fn miss(&self, pid: u64) -> PageMiss {
        PageMiss {
            pid,
            epoch: self.cache.epoch(pid),
            writeback: self.writeback.clone(),
            page_count: self.space.page_count(),
            max_gen: self.max_page_generation(),
            layout: self.layout,
            read_only: self.read_only,
        }
    }

    /// The newest generation a page read from the file may carry: pages of the checkpoint
    /// being built carry the next one, which a read-only engine (reading one durable
    /// checkpoint beside a writer) never reads.
    pub(crate) fn max_page_generation(&self) -> u64 {
        self.generation + u64::from(!self.read_only)
    }

    pub(crate) fn explain_read_error(&self, e: Error) -> Error {
        read_error(self.read_only, e)
    }

    /// Evicts clean pages (no I/O) down to 7/8 of the budget, for readers.
    pub fn shrink_clean(&mut self) {
        let target = self.cache.capacity() - self.cache.capacity() / 8;
        for _ in 0..self.cache.len() {
            if self.cache.len() <= target {
                break;
            }
            let Some(pid) = self.cache.victim() else {
                break;
            };
            if !self.cache.frame_mut(pid).is_some_and(|f| f.dirty) {
                self.epoch += 1;
                // For the readers' next loads, which take their buffers there.
                self.writeback.recycle(self.cache.evict_taking(pid));
            }
        }
    }

    /// Makes `pid` resident.
    #[inline]
    pub fn ensure(&mut self, pid: u64) -> Result<()> {
        if !self.cache.contains(pid) {
            self.load(pid)?;
        }
        Ok(())
    }

    /// A page if resident; else what a reader must load ([`Need::Page`]).
    #[inline]
    pub(crate) fn page(&self, pid: u64) -> NeedResult<&[u8]> {
        self.cache.get(pid).ok_or(Need::Page(pid))
    }

    /// A resident page (the caller made it resident).
    #[inline]
    pub fn node(&self, pid: u64) -> &[u8] {
        self.cache
            .get(pid)
            .expect("page made resident by the caller")
    }

    /// A resident page about to be modified: marks it dirty. Only fresh pages may be.
    #[inline]
    pub fn node_mut(&mut self, pid: u64) -> &mut [u8] {
        debug_assert!(
            self.space.is_fresh(pid),
            "modifying page {pid}, which the durable checkpoint owns"
        );
        self.changed = true;
        let f = self
            .cache
            .frame_mut(pid)
            .expect("page made resident by the caller");
        f.dirty = true;
        &mut f.data
    }

    /// A new, empty, dirty node of `kind`.
    pub fn new_node(&mut self, kind: u8) -> u64 {
        self.epoch += 1;
        let pid = self.space.allocate();
        let mut buf = self.cache.buffer();
        node::init(&mut buf, kind);
        self.cache.insert(pid, buf, true);
        self.changed = true;
        pid
    }

    /// Frees a page: out of the cache, back to free space.
    pub fn free_page(&mut self, pid: u64) {
        self.epoch += 1;
        if !self.retire_frame(pid) {
            self.cache.discard(pid);
        }
        if self.space.is_fresh(pid) {
            // Nothing references it. (A page the checkpoint in flight captured must still
            // reach the file.)
            self.writeback.forget(pid);
        }
        self.space.release(pid);
        self.changed = true;
    }

    /// Evicts pages until the cache is within budget. A dirty victim is sealed and handed
    /// to [`WriteBack`](super::WriteBack), which writes it once the exclusive lock is
    /// released (loads read it there until then): no I/O here. Unless `writable`, dirty
    /// pages stay.
    pub fn shrink_cache(&mut self, writable: bool) {
        self.writeback
            .take_spares(self.cache.spares(), crate::cache::SPARES);
        while self.cache.over_budget() {
            let Some(pid) = self.cache.victim() else {
                break;
            };
            let dirty = self.cache.frame_mut(pid).is_some_and(|f| f.dirty);
            // A read-only engine keeps what it replayed in memory: it never writes.
            if dirty && (!writable || self.read_only) {
                break;
            }
            self.epoch += 1;
            if dirty {
                let mut image = self.cache.evict_taking(pid);
                page::seal(&mut image, pid, self.generation + 1);
                self.writeback.add(pid, image);
                self.cache.dirty_evictions += 1;
            } else {
                self.cache.evict(pid);
            }
        }
    }

    /// Whether the frame of `pid`, which is being relocated or freed, must stay resident
    /// until the checkpoint in flight has written it: it is dirty but not fresh, so that
    /// checkpoint captured it. Such frames are retired: dropped when the checkpoint ends.
    pub(crate) fn retire_frame(&mut self, pid: u64) -> bool {
        let keep = self.checkpoint_in_flight
            && !self.space.is_fresh(pid)
            && self.cache.frame_mut(pid).is_some_and(|f| f.dirty);
        if keep {
            self.retired.push(pid);
        }
        keep
    }
}
