//! The copy-on-write checkpoint: its phases under and outside the exclusive lock (see the
//! steps in `engine/mod.rs`), and making the opened checkpoint durable again at open.
//!
//! Owns: [`CheckpointWork`], the pages retired while one is in flight. May call: the pager,
//! the catalog, `storage`. Invariant: what a checkpoint captured is relocated, never
//! changed in place, until it ends; its meta page is written only after every page it
//! references is synced.

use super::{encode_catalog_record, Engine, WriteBack, CATALOG};
use crate::error::Result;
use crate::storage::format::io_err;
use crate::storage::meta::Meta;
use crate::storage::page::{wr32, wr64, HDR, KIND_FREELIST};
use crate::storage::{page, StorageFile};
use std::io;
use std::sync::Arc;

impl Engine {
    /// Makes the checkpoint the environment was opened from durable, whatever an earlier
    /// process left unsynced: it may have been killed after writing the meta page but before
    /// syncing it, or its sync may have failed and the kernel dropped the page while still
    /// serving it from the page cache. So the meta page is written again and, when no meta
    /// page was unusable (no newer checkpoint may need them), pages past the checkpoint's
    /// count are cut off; then everything is synced. Pages the checkpoint references were
    /// synced before its meta page was first written. Call before writing any page. The
    /// rewritten meta page no longer says the environment was closed cleanly: from here on
    /// the log may hold commits the page file does not. `log_segment`: the segment recovery
    /// found or made holding the checkpoint's log position, named in the meta page from
    /// here on (a new environment's names none), so that the page file without its log is
    /// refused rather than opened as if it had none.
    pub fn make_checkpoint_durable(&mut self, log_segment: Option<u64>) -> Result<()> {
        let (mut meta, slot) = self.opened_from;
        meta.closed_clean = false;
        if let Some(no) = log_segment {
            meta.log_segment = no;
            self.log_segment = no;
        }
        (self.opened_from.0, self.durable_meta) = (meta, meta);
        let ps = meta.page_size as u64;
        let file = self.pager.file.as_ref();
        file.write_at(&meta.encode(), slot * ps)
            .map_err(io_err("writing the meta page"))?;
        let want = meta.page_count * ps;
        let len = file.len().map_err(io_err("reading the file size"))?;
        if self.meta_warnings.is_empty() && len > want {
            file.set_len(want)
                .map_err(io_err("trimming the page file"))?;
        }
        file.sync_all().map_err(io_err("syncing the page file"))
    }

    /// At close, once the last checkpoint is durable and covers the whole log (`log_end`:
    /// where the log ends): says so in its meta page, written again in place and synced, so
    /// that the page file alone holds the environment and opens without the log beside it
    /// (a SQLite database is one file once closed). Writes nothing when the log holds
    /// more: a commit after the checkpoint, or a spilled transaction's writes.
    pub(crate) fn mark_closed_clean(&mut self, log_end: u64) -> Result<()> {
        let mut meta = self.durable_meta;
        if meta.log_lsn != log_end || meta.keep_segment != 0 || !self.mode.has_log_files() {
            return Ok(());
        }
        meta.closed_clean = true;
        let file = self.pager.file.as_ref();
        let slot = meta.generation % 2;
        file.write_at(&meta.encode(), slot * meta.page_size as u64)
            .map_err(io_err("writing the meta page"))?;
        file.sync_all().map_err(io_err("syncing the page file"))?;
        self.durable_meta = meta;
        Ok(())
    }

    /// Phase 1 of a checkpoint (steps 1-2 and the choice of pages to write), under the
    /// exclusive lock. From here on the pages it captures are the next checkpoint's: none is
    /// fresh any more, so writes relocate them instead of changing them in place, and
    /// [`Pager::retire_frame`](super::Pager::retire_frame) keeps their images until they
    /// are written. `None`: nothing changed since the durable checkpoint.
    pub(crate) fn begin_checkpoint(&mut self) -> Result<Option<CheckpointWork>> {
        self.check_writable()?;
        if !self.pager.changed {
            return Ok(None);
        }
        // (1) Catalog records of changed databases. This may itself relocate catalog pages.
        let dirty: Vec<(u32, String, Vec<u8>)> = self
            .dbs
            .iter()
            .enumerate()
            .skip(1)
            .filter_map(|(id, d)| {
                d.as_ref().filter(|d| d.catalog_dirty).map(|d| {
                    let record = encode_catalog_record(id as u32, d.root, d.entries, d.dups);
                    (id as u32, d.name.clone(), record)
                })
            })
            .collect();
        for (id, name, record) in dirty {
            self.put(CATALOG, name.as_bytes(), &record, false)?;
            self.db_mut(id).catalog_dirty = false;
        }
        // (2) The free list: the durable one's pages are freed, then room for the new one is
        // taken from pages that were free in the durable checkpoint (or from the file's end).
        for pid in std::mem::take(&mut self.freelist_pages) {
            self.pager.space.release(pid);
        }
        let per_page = (self.pager.layout.page_size - HDR) / 8;
        let mut list_pages = Vec::new();
        while list_pages.len() < self.pager.space.checkpoint_free_len().div_ceil(per_page) {
            list_pages.push(self.pager.space.allocate());
        }
        let free = self.pager.space.checkpoint_free_list();
        let mut chunks = free.chunks(per_page);
        let list_images = (0..list_pages.len())
            .map(|i| {
                let mut buf = vec![0u8; self.pager.layout.page_size].into_boxed_slice();
                page::init(&mut buf, KIND_FREELIST);
                let chunk = chunks.next().unwrap_or(&[]);
                wr32(&mut buf, 32, chunk.len() as u32);
                for (j, f) in chunk.iter().enumerate() {
                    wr64(&mut buf, HDR + 8 * j, *f);
                }
                page::set_link(&mut buf, list_pages.get(i + 1).copied().unwrap_or(0));
                page::seal(&mut buf, list_pages[i], self.pager.generation + 1);
                buf
            })
            .collect();
        let generation = self.pager.generation + 1;
        let meta = Meta {
            page_size: self.pager.layout.page_size as u32,
            next_db_id: self.next_db_id,
            generation,
            catalog_root: self.db(CATALOG)?.root,
            freelist_head: list_pages.first().copied().unwrap_or(0),
            freelist_pages: list_pages.len() as u64,
            page_count: self.pager.space.page_count(),
            log_lsn: self.log_lsn,
            log_segment: self.log_segment,
            mode: self.mode.code(),
            log_chain: self.log_chain,
            env_id: self.env_id,
            keep_segment: self.log_keep_segment,
            closed_clean: false,
        };
        let reusable_when_durable = self.pager.space.seal();
        self.pager.epoch += 1;
        self.pager.changed = false;
        self.pager.checkpoint_in_flight = true;
        Ok(Some(CheckpointWork {
            pages: self.pager.cache.dirty_pages(),
            file: self.pager.file.clone(),
            writeback: self.pager.writeback.clone(),
            page_size: self.pager.layout.page_size,
            meta,
            list_pages,
            list_images,
            reusable_when_durable,
        }))
    }

    /// Phase 3, under the exclusive lock, once the new meta page is durable: the new
    /// checkpoint is the durable one.
    pub(crate) fn end_checkpoint(&mut self, work: CheckpointWork, pages_written: u64) {
        self.pages_written += pages_written;
        for &pid in &work.pages {
            // Still dirty: it holds the image just written (captured pages are never changed
            // in place), unless eviction wrote it first.
            if let Some(f) = self.pager.cache.frame_mut(pid) {
                f.dirty = false;
            }
        }
        for pid in std::mem::take(&mut self.pager.retired) {
            self.pager.cache.discard(pid);
        }
        self.pager
            .space
            .reusable(work.reusable_when_durable, work.meta.generation);
        self.pager.generation = work.meta.generation;
        self.durable_meta = work.meta;
        self.freelist_pages = work.list_pages;
        self.pager.checkpoint_in_flight = false;
        self.checkpoints += 1;
    }
}

/// A checkpoint between its first and last phase: what it writes, without the engine's lock
/// (see the module doc).
pub(crate) struct CheckpointWork {
    /// Dirty pages when it began; written from the cache unless eviction wrote them first.
    pages: Vec<u64>,
    file: Arc<dyn StorageFile>,
    writeback: Arc<WriteBack>,
    page_size: usize,
    meta: Meta,
    list_pages: Vec<u64>,
    list_images: Vec<Box<[u8]>>,
    /// Pages the durable checkpoint references but this one does not.
    reusable_when_durable: Vec<u64>,
}

/// Pages copied out of the cache per hold of the engine's lock while a checkpoint writes.
const CHECKPOINT_BATCH: usize = 64;

impl CheckpointWork {
    /// Phase 2 (steps 3-6): writes the captured pages and the free list, syncs, writes the
    /// meta page and syncs, taking the engine's shared lock (through `engine`) only to copy
    /// a batch of pages out of the cache and to extend the file. Returns the pages written;
    /// on failure, what failed.
    pub(crate) fn write<'a, E: std::ops::Deref<Target = Engine> + 'a>(
        &self,
        engine: impl Fn() -> E,
    ) -> std::result::Result<u64, (String, io::Error)> {
        let ps = self.page_size as u64;
        let mut written = self.list_pages.len() as u64;
        let generation = self.meta.generation;
        let write = |pid: u64, data: &mut [u8]| {
            page::seal(data, pid, generation);
            self.file
                .write_at(data, pid * ps)
                .map_err(|e| (format!("writing page {pid}"), e))
        };
        // (3) Pages handed over for writing before it began (evicted dirty pages, new
        // overflow chains), which it may reference; then the captured pages, copied out a
        // batch at a time into one buffer (from the cache, or from the write-back when
        // evicted since), then the free list (sealed when the checkpoint began). Writes that
        // may meet the write-back's hold its `io`, so that none overtakes another.
        self.writeback.flush_all()?;
        let size = self.page_size;
        let mut buf = vec![0u8; CHECKPOINT_BATCH * size];
        let mut copied = Vec::with_capacity(CHECKPOINT_BATCH);
        for pids in self.pages.chunks(CHECKPOINT_BATCH) {
            copied.clear();
            {
                let e = engine();
                for &pid in pids {
                    let at = copied.len() * size;
                    if let Some(data) = e.pager.cache.dirty_image(pid) {
                        buf[at..at + size].copy_from_slice(data);
                    } else if let Some(image) = e.pager.writeback.image(pid) {
                        buf[at..at + size].copy_from_slice(&image);
                    } else {
                        // Clean, or not resident and not waiting: its image is written.
                        continue;
                    }
                    copied.push(pid);
                }
            }
            let _io = self.writeback.io();
            for (i, &pid) in copied.iter().enumerate() {
                write(pid, &mut buf[i * size..(i + 1) * size])?;
            }
            written += copied.len() as u64;
        }
        for (&pid, image) in self.list_pages.iter().zip(&self.list_images) {
            self.file
                .write_at(image, pid * ps)
                .map_err(|e| (format!("writing free-list page {pid}"), e))?;
        }
        // Free pages at the tail may never have been written: the file must still cover
        // every page the meta counts. Under the lock, so that no eviction extends it meanwhile.
        let extended = {
            let _e = engine();
            let want = self.meta.page_count * ps;
            let len = self
                .file
                .len()
                .map_err(|e| ("reading the page file size".to_string(), e))?;
            if len < want {
                self.file
                    .set_len(want)
                    .map_err(|e| ("extending the page file".to_string(), e))?;
            }
            len < want
        };
        // (4) Everything the new meta will reference is durable before the meta is written;
        // a length set without writing is durable only through `sync_all`.
        let sync = if extended {
            self.file.sync_all()
        } else {
            self.file.sync_data()
        };
        sync.map_err(|e| ("syncing the page file".to_string(), e))?;
        // (5), (6) The meta page flip.
        let slot = generation % 2;
        self.file
            .write_at(&self.meta.encode(), slot * ps)
            .map_err(|e| ("writing the meta page".to_string(), e))?;
        self.file
            .sync_data()
            .map_err(|e| ("syncing the meta page".to_string(), e))?;
        Ok(written)
    }
}
