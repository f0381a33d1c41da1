//! Pages handed over for writing under the exclusive lock and written after it is released:
//! dirty pages evicted from the cache, and new overflow chains.
//!
//! Owns: [`WriteBack`], the sealed image of each such page until the file holds it. May
//! call: `storage`. The engine adds images under its exclusive lock; whoever released that
//! lock (a commit, a write, a checkpoint: the release of `env::shared::Exclusive`, through
//! which every exclusive hold goes) writes them with no engine lock held.
//! Invariants:
//! - an image stays here until the file holds it (it is removed only after its write
//!   returned), so a load of its page, with or without a lock, reads it here first and never
//!   meets the file before the write;
//! - every write of a page, here or by a checkpoint, is made holding `io`, and takes the
//!   newest image of its page at that moment: so a page's writes land in the order their
//!   images were made, and an older image never overwrites a newer one;
//! - only fresh pages (not referenced by the durable checkpoint) or pages the checkpoint in
//!   flight captured (whose image never changes) come here: writing them at any moment is
//!   safe for the durable checkpoint.

use crate::error::Result;
use crate::storage::format::read_checked;
use crate::storage::StorageFile;
use parking_lot::{Mutex, MutexGuard};
use rustc_hash::FxHashMap;
use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::Arc;

/// A sealed page image, shared between the table and a writer taking it.
pub(crate) type Image = Arc<Box<[u8]>>;

pub(crate) struct WriteBack {
    file: Arc<dyn StorageFile>,
    page_size: u64,
    /// Page number to (version, image): the version tells a write whether its image is
    /// still the newest when it returns.
    pending: Mutex<FxHashMap<u64, (u64, Image)>>,
    /// `pending`'s length, read without its mutex: every load and every exclusive hold's
    /// end asks whether anything waits, and almost always nothing does.
    len: AtomicUsize,
    next_version: AtomicU64,
    io: Mutex<()>,
    written: AtomicU64,
    /// Buffers of images written, and of clean pages readers evicted, for the cache and
    /// readers' loads to reuse (allocating and freeing a page buffer per eviction cost more
    /// than the write itself).
    spare: Mutex<Vec<Box<[u8]>>>,
    spare_len: AtomicUsize,
}

/// Images taken out of the table per hold of its mutex by a writer.
const BATCH: usize = 64;
/// Buffers of written images kept for reuse, at most.
const SPARE: usize = 64;

impl WriteBack {
    pub fn new(file: Arc<dyn StorageFile>, page_size: usize) -> WriteBack {
        WriteBack {
            file,
            page_size: page_size as u64,
            pending: Mutex::new(FxHashMap::default()),
            len: AtomicUsize::new(0),
            next_version: AtomicU64::new(0),
            io: Mutex::new(()),
            written: AtomicU64::new(0),
            spare: Mutex::new(Vec::new()),
            spare_len: AtomicUsize::new(0),
        }
    }

    /// Hands over `image`, sealed, as the newest content of page `pid`.
    pub fn add(&self, pid: u64, image: Box<[u8]>) {
        let version = self.next_version.fetch_add(1, Relaxed);
        if self
            .pending
            .lock()
            .insert(pid, (version, Arc::new(image)))
            .is_none()
        {
            self.len.fetch_add(1, SeqCst);
        }
    }

    /// The image of `pid` not yet in the file, if any.
    #[inline]
    pub fn image(&self, pid: u64) -> Option<Image> {
        if self.len.load(SeqCst) == 0 {
            return None;
        }
        self.pending
            .lock()
            .get(&pid)
            .map(|(_, image)| image.clone())
    }

    /// Reads page `pid` into `buf`: the image waiting here, else the file's, checked as
    /// [`read_checked`] does (`kind`, if given, is the kind it must have).
    pub fn read_page(
        &self,
        pid: u64,
        buf: &mut [u8],
        page_count: u64,
        max_gen: u64,
        kind: Option<u8>,
    ) -> Result<()> {
        match self.image(pid) {
            Some(image) => buf.copy_from_slice(&image),
            None => drop(read_checked(
                self.file.as_ref(),
                pid,
                buf,
                page_count,
                max_gen,
                kind,
            )?),
        }
        Ok(())
    }

    /// Drops what is waiting for page `pid`, which was freed: nobody reads it again before
    /// it is allocated and written anew.
    pub fn forget(&self, pid: u64) {
        if self.len.load(SeqCst) != 0 && self.pending.lock().remove(&pid).is_some() {
            self.len.fetch_sub(1, SeqCst);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len.load(SeqCst) == 0
    }

    /// A page buffer to reuse, if one is kept: a reader's load takes it here, with no engine
    /// lock held.
    pub fn spare_buffer(&self) -> Option<Box<[u8]>> {
        if self.spare_len.load(Relaxed) == 0 {
            return None;
        }
        let mut spare = self.spare.lock();
        let buffer = spare.pop();
        self.spare_len.store(spare.len(), Relaxed);
        buffer
    }

    /// Keeps `buffer` for reuse (by the cache, or a reader's load), up to [`SPARE`].
    pub fn recycle(&self, buffer: Box<[u8]>) {
        let mut spare = self.spare.lock();
        if spare.len() < SPARE {
            spare.push(buffer);
            self.spare_len.store(spare.len(), Relaxed);
        }
    }

    /// Moves kept buffers into `into`, for reuse, until it holds `up_to`.
    pub fn take_spares(&self, into: &mut Vec<Box<[u8]>>, up_to: usize) {
        if self.spare_len.load(Relaxed) != 0 && into.len() < up_to {
            let mut spare = self.spare.lock();
            let from = spare.len().saturating_sub(up_to - into.len());
            into.extend(spare.drain(from..));
            self.spare_len.store(spare.len(), Relaxed);
        }
    }

    /// Pages written from here since the engine opened.
    pub fn written(&self) -> u64 {
        self.written.load(Relaxed)
    }

    /// Held by every write of a page that may also be here (see the module doc).
    pub fn io(&self) -> MutexGuard<'_, ()> {
        self.io.lock()
    }

    /// Writes what is waiting, with no engine lock held, unless another thread is writing
    /// (holding `io`): that one writes what it finds waiting until nothing is, so a writer
    /// never waits for another's I/O. (An image can still be left for the next call or the
    /// next checkpoint, which write everything waiting; loads read it here meanwhile.) On
    /// failure, what failed; the image stays, and the caller poisons the engine.
    pub fn flush(&self) -> std::result::Result<(), (String, io::Error)> {
        while !self.is_empty() {
            let Some(io) = self.io.try_lock() else {
                return Ok(());
            };
            self.flush_holding(&io)?;
        }
        Ok(())
    }

    /// Writes everything waiting now, waiting for another thread's writes if need be.
    pub fn flush_all(&self) -> std::result::Result<(), (String, io::Error)> {
        let io = self.io();
        self.flush_holding(&io)
    }

    /// [`WriteBack::flush`] by the holder of `io`.
    fn flush_holding(
        &self,
        _io: &MutexGuard<'_, ()>,
    ) -> std::result::Result<(), (String, io::Error)> {
        let mut batch = Vec::with_capacity(BATCH);
        loop {
            batch.clear();
            batch.extend(
                self.pending
                    .lock()
                    .iter()
                    .take(BATCH)
                    .map(|(&pid, (version, image))| (pid, *version, image.clone())),
            );
            if batch.is_empty() {
                return Ok(());
            }
            for (pid, version, image) in batch.drain(..) {
                self.file
                    .write_at(&image, pid * self.page_size)
                    .map_err(|e| (format!("writing page {pid}"), e))?;
                self.written.fetch_add(1, Relaxed);
                let mut pending = self.pending.lock();
                // A newer image came meanwhile: it is written in its turn.
                if pending.get(&pid).is_some_and(|(v, _)| *v == version) {
                    pending.remove(&pid);
                    self.len.fetch_sub(1, SeqCst);
                }
                drop(pending);
                // Unless a load still reads it.
                if let Ok(buffer) = Arc::try_unwrap(image) {
                    self.recycle(buffer);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{MemStorage, Storage};

    fn setup() -> (Arc<dyn StorageFile>, WriteBack) {
        let storage = MemStorage::new();
        let file: Arc<dyn StorageFile> = storage.open("f", true).unwrap().into();
        file.set_len(8 * 16).unwrap();
        (file.clone(), WriteBack::new(file, 16))
    }

    fn read(file: &Arc<dyn StorageFile>, pid: u64) -> Vec<u8> {
        let mut buf = vec![0u8; 16];
        file.read_at(&mut buf, pid * 16).unwrap();
        buf
    }

    /// Kept buffers stay within their bounds: here at most `SPARE`, and a taker's list
    /// filled only up to what it asks for (the cache's list once grew past its bound so).
    #[test]
    fn spare_buffers_stay_within_their_bounds() {
        let (_, wb) = setup();
        for _ in 0..3 * SPARE {
            wb.recycle(vec![0u8; 16].into_boxed_slice());
        }
        assert_eq!(wb.spare.lock().len(), SPARE);
        let mut into = vec![vec![0u8; 16].into_boxed_slice(); 60];
        wb.take_spares(&mut into, 64);
        assert_eq!((into.len(), wb.spare.lock().len()), (64, SPARE - 4));
        wb.take_spares(&mut into, 64);
        assert_eq!(into.len(), 64, "a full list takes nothing");
        assert!(wb.spare_buffer().is_some());
        assert_eq!(wb.spare.lock().len(), SPARE - 5);
    }

    #[test]
    fn images_are_read_here_until_written_and_the_newest_wins() {
        let (file, wb) = setup();
        wb.add(3, vec![1u8; 16].into_boxed_slice());
        wb.add(3, vec![2u8; 16].into_boxed_slice());
        wb.add(5, vec![5u8; 16].into_boxed_slice());
        assert_eq!(&wb.image(3).unwrap()[..], &[2u8; 16]);
        wb.forget(5);
        assert!(wb.image(5).is_none());
        wb.flush().unwrap();
        assert!(wb.is_empty() && wb.image(3).is_none());
        assert_eq!(read(&file, 3), vec![2u8; 16]);
        assert_eq!(
            read(&file, 5),
            vec![0u8; 16],
            "a forgotten page is not written"
        );
        assert_eq!(wb.written(), 1);
    }
}
