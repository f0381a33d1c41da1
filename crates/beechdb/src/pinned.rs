//! Pinned checkpoints: a durable checkpoint held still (its pages not reused) and read page
//! by page while the environment goes on, commits and checkpoints included: what hot backup
//! and replication snapshots stream.
//!
//! Owns: [`PinnedCheckpoint`]. May call: `engine` (to pin and unpin, under the exclusive
//! lock for a moment), `storage`. Invariant: while a pin lives, no page the checkpoint
//! references is handed out by free space, and pages a checkpoint references are never
//! written in place, so reading them from the file gives the checkpoint's image; each is
//! checked (checksum, number, generation) as it is read.

use crate::env::Shared;
use crate::error::{Error, Result};
use crate::files::{DB_FILE, DB_FILE_TMP};
use crate::storage::format::{read_checked, read_free_list};
use crate::storage::meta::{Meta, META_LEN};
use crate::storage::page::ANY_KIND;
use crate::storage::{Storage, StorageFile};
use rustc_hash::FxHashSet;
use std::sync::Arc;

/// A durable checkpoint kept from change: read it page by page ([`PinnedCheckpoint::read_page`])
/// or copy it whole into a new environment ([`PinnedCheckpoint::copy_to`]) while the
/// environment goes on. Dropping it releases the pin. Holding it delays the reuse of the
/// pages later checkpoints free (the file may grow meanwhile), never a checkpoint.
pub struct PinnedCheckpoint {
    shared: Arc<Shared>,
    /// The checkpoint's meta record as a copy's must be: with no log segment yet.
    meta: Meta,
    free: FxHashSet<u64>,
    file: Arc<dyn StorageFile>,
}

impl PinnedCheckpoint {
    pub(crate) fn pin(shared: Arc<Shared>) -> Result<PinnedCheckpoint> {
        shared.live()?;
        let (meta, file) = {
            let mut e = shared.exclusive();
            let meta = e.durable_meta;
            e.pager.space.pin(meta.generation);
            (meta, e.pager.file.clone())
        };
        // Read once pinned: the free list's own pages are the checkpoint's too.
        let free = match read_free_list(file.as_ref(), &meta) {
            Ok((free, _)) => free.into_iter().collect(),
            Err(e) => {
                shared.exclusive().pager.space.unpin(meta.generation);
                return Err(e);
            }
        };
        Ok(PinnedCheckpoint {
            shared,
            meta: Meta {
                log_segment: 0,
                keep_segment: 0,
                ..meta
            },
            free,
            file,
        })
    }

    /// The checkpoint's generation.
    pub fn generation(&self) -> u64 {
        self.meta.generation
    }

    /// Its page size in bytes.
    pub fn page_size(&self) -> usize {
        self.meta.page_size as usize
    }

    /// Its pages: `0..page_count`.
    pub fn page_count(&self) -> u64 {
        self.meta.page_count
    }

    /// Page `pid` of the checkpoint into `buf` (one page long), as a copy of the checkpoint
    /// holds it: its pages as written, checked; zeros for a free page; for the two meta
    /// pages, this checkpoint's meta record (naming no log segment: a copy starts its own).
    pub fn read_page(&self, pid: u64, buf: &mut [u8]) -> Result<()> {
        self.shared.live()?;
        if buf.len() != self.page_size() || pid >= self.page_count() {
            return Err(Error::InvalidArgument(format!(
                "page {pid} of {} into a buffer of {} bytes (pages have {})",
                self.page_count(),
                buf.len(),
                self.page_size()
            )));
        }
        if pid < 2 || self.free.contains(&pid) {
            buf.fill(0);
            if pid < 2 {
                buf[..META_LEN].copy_from_slice(&self.meta.encode());
            }
            return Ok(());
        }
        read_checked(
            self.file.as_ref(),
            pid,
            buf,
            self.page_count(),
            self.generation(),
            Some(ANY_KIND),
        )
        .map(drop)
    }

    /// Writes the checkpoint as a new environment into `storage`, which must hold none: the
    /// page file is built under a temporary name, synced, renamed and the directory synced,
    /// as a new environment is, so a crash leaves no environment or a whole one.
    pub fn copy_to(&self, storage: Arc<dyn Storage>) -> Result<()> {
        let mut copy = CheckpointCopy::create(storage, self.page_size(), self.page_count())?;
        let mut buf = vec![0u8; self.page_size()];
        for pid in 0..self.page_count() {
            self.read_page(pid, &mut buf)?;
            copy.write_page(pid, &buf)?;
        }
        copy.finish()
    }
}

/// A pinned checkpoint's copy being written as a new environment, page after page, from
/// pages read here ([`PinnedCheckpoint::copy_to`]) or received from elsewhere (a
/// replication snapshot streamed over the network). Nothing is an environment until
/// [`CheckpointCopy::finish`]: a crash before leaves only a temporary file, which the next
/// copy replaces.
pub struct CheckpointCopy {
    storage: Arc<dyn Storage>,
    out: Box<dyn StorageFile>,
    page_size: usize,
    page_count: u64,
    /// The next page expected: pages come in order, so a gap is caught.
    next: u64,
}

impl CheckpointCopy {
    /// Starts a copy of `page_count` pages of `page_size` bytes into `storage`, which must
    /// hold no environment.
    pub fn create(
        storage: Arc<dyn Storage>,
        page_size: usize,
        page_count: u64,
    ) -> Result<CheckpointCopy> {
        if !crate::config::valid_page_size(page_size) || page_count < 2 {
            return Err(Error::InvalidArgument(format!(
                "a checkpoint copy of {page_count} pages of {page_size} bytes"
            )));
        }
        if storage
            .exists(DB_FILE)
            .map_err(|e| Error::io("looking for a page file", e))?
        {
            return Err(Error::InvalidArgument(format!(
                "{} already holds an environment",
                storage.describe()
            )));
        }
        let io = |e| Error::io("creating the copy's page file", e);
        let out = storage.open(DB_FILE_TMP, true).map_err(io)?;
        out.set_len(0).map_err(io)?;
        Ok(CheckpointCopy {
            storage,
            out,
            page_size,
            page_count,
            next: 0,
        })
    }

    /// Writes page `pid`, which must be the page after the last one written.
    pub fn write_page(&mut self, pid: u64, page: &[u8]) -> Result<()> {
        if pid != self.next || pid >= self.page_count || page.len() != self.page_size {
            return Err(Error::InvalidArgument(format!(
                "page {pid} ({} bytes) of a copy of {} pages of {} bytes, where page {} comes \
                 next",
                page.len(),
                self.page_count,
                self.page_size,
                self.next
            )));
        }
        self.out
            .write_at(page, pid * self.page_size as u64)
            .map_err(|e| Error::io("writing the copy", e))?;
        self.next += 1;
        Ok(())
    }

    /// Makes the copy an environment once every page is written: synced, renamed into
    /// place, the directory synced.
    pub fn finish(self) -> Result<()> {
        if self.next != self.page_count {
            return Err(Error::InvalidArgument(format!(
                "a copy of {} pages finished after {}",
                self.page_count, self.next
            )));
        }
        let io = |what: &'static str| move |e| Error::io(what, e);
        self.out.sync_all().map_err(io("syncing the copy"))?;
        self.storage
            .rename(DB_FILE_TMP, DB_FILE)
            .map_err(io("renaming the copy into place"))?;
        self.storage
            .sync_dir()
            .map_err(io("syncing the copy's directory"))
    }
}

impl Drop for PinnedCheckpoint {
    fn drop(&mut self) {
        self.shared
            .engine
            .write()
            .pager
            .space
            .unpin(self.meta.generation);
    }
}
