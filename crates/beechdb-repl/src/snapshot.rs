//! Streaming a member's durable checkpoint to another member (network restore): the pages of
//! a pinned checkpoint in chunks, each written into a new environment directory as it
//! arrives, so neither side ever holds the copy in memory.
//!
//! Owns: the chunking ([`read_chunk`]) and the receiving side ([`Receiver`]). May call: the
//! engine's pinned checkpoints and checkpoint copies, the file system. Invariants: pages are
//! sent and written in order, each chunk whole pages; a receiver that does not finish
//! removes its directory, so a failed or cancelled transfer leaves nothing behind.

use beechdb::storage::OsStorage;
use beechdb::{CheckpointCopy, Error, PinnedCheckpoint, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A chunk holds at most this many bytes of pages.
pub(crate) const CHUNK_BYTES: usize = 1 << 20;

/// What a receiver learns before the pages: their size and count.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct Shape {
    pub page_size: u32,
    pub page_count: u64,
}

impl Shape {
    pub(crate) fn of(pin: &PinnedCheckpoint) -> Shape {
        Shape {
            page_size: pin.page_size() as u32,
            page_count: pin.page_count(),
        }
    }

    /// Pages in a chunk.
    pub(crate) fn pages_per_chunk(&self) -> u64 {
        (CHUNK_BYTES / self.page_size.max(1) as usize).max(1) as u64
    }

    /// The first page of each chunk.
    pub(crate) fn chunks(&self) -> impl Iterator<Item = u64> {
        (0..self.page_count).step_by(self.pages_per_chunk() as usize)
    }
}

/// The pages of `pin` from `first`, as many as a chunk holds.
pub(crate) fn read_chunk(pin: &PinnedCheckpoint, first: u64) -> Result<Vec<u8>> {
    let shape = Shape::of(pin);
    let end = (first + shape.pages_per_chunk()).min(shape.page_count);
    let ps = pin.page_size();
    let mut out = vec![0u8; (end.saturating_sub(first)) as usize * ps];
    for (i, page) in out.chunks_mut(ps).enumerate() {
        pin.read_page(first + i as u64, page)?;
    }
    Ok(out)
}

/// A copy arriving into directory `dir`: pages in order, then [`Receiver::finish`].
pub(crate) struct Receiver {
    dir: PathBuf,
    copy: Option<CheckpointCopy>,
    shape: Shape,
    next: u64,
}

fn malformed(why: String) -> Error {
    Error::Corrupt {
        page: None,
        detail: format!("a copy of an environment arriving from the master is malformed: {why}"),
    }
}

impl Receiver {
    /// Starts receiving a copy of `shape` into the new directory `dir`.
    pub(crate) fn begin(dir: &Path, shape: Shape) -> Result<Receiver> {
        let storage = OsStorage::new(dir).map_err(|e| Error::Io {
            context: format!("creating {}", dir.display()),
            source: e,
        })?;
        let copy = CheckpointCopy::create(
            Arc::new(storage),
            shape.page_size as usize,
            shape.page_count,
        )
        .map_err(|e| malformed(e.to_string()))?;
        Ok(Receiver {
            dir: dir.to_path_buf(),
            copy: Some(copy),
            shape,
            next: 0,
        })
    }

    /// Writes the next chunk of pages.
    pub(crate) fn chunk(&mut self, bytes: &[u8]) -> Result<()> {
        let ps = self.shape.page_size as usize;
        if bytes.is_empty() || !bytes.len().is_multiple_of(ps) {
            return Err(malformed(format!(
                "a chunk of {} bytes is not whole pages of {ps}",
                bytes.len()
            )));
        }
        let copy = self
            .copy
            .as_mut()
            .expect("a receiver has its copy until it finishes");
        for page in bytes.chunks(ps) {
            copy.write_page(self.next, page)
                .map_err(|e| malformed(e.to_string()))?;
            self.next += 1;
        }
        Ok(())
    }

    /// Completes the copy (synced, in place) and gives its directory.
    pub(crate) fn finish(mut self) -> Result<PathBuf> {
        let copy = self.copy.take().expect("a receiver finishes once");
        copy.finish().map_err(|e| match e {
            Error::InvalidArgument(why) => malformed(why),
            e => e,
        })?;
        Ok(std::mem::take(&mut self.dir))
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if !self.dir.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
