//! Scratch files inside an environment's storage: a namespace of names with a prefix of
//! their own, whose syncs are skipped, and which closes with its environment.
//!
//! Owns: [`Scratch`]. May call: the storage it wraps. Invariants: every name it hands the
//! wrapped storage starts with its prefix, so its files never collide with the
//! environment's and are recognised (and removed) as leftovers at open; nothing written
//! through it is ever made durable, so nothing may be recovered from it; once its `closed`
//! flag is set (the environment closed, its directory free for another opener) nothing
//! through it changes a file, so a handle left behind cannot touch the next opener's.

use super::{MappedFile, Storage, StorageFile};
use std::any::Any;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering::Acquire};
use std::sync::Arc;

/// The files of `inner` whose names start with `prefix`, under the rest of their name.
#[derive(Debug)]
pub(crate) struct Scratch {
    inner: Arc<dyn Storage>,
    prefix: String,
    closed: Arc<AtomicBool>,
}

fn refuse_if(closed: &AtomicBool) -> io::Result<()> {
    match closed.load(Acquire) {
        true => Err(io::Error::other(
            "the environment its scratch files belong to is closed",
        )),
        false => Ok(()),
    }
}

impl Scratch {
    /// The files of `inner` named `prefix*`, refused once `closed` is set.
    pub(crate) fn new(inner: Arc<dyn Storage>, prefix: String, closed: Arc<AtomicBool>) -> Scratch {
        Scratch {
            inner,
            prefix,
            closed,
        }
    }

    fn name(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    fn unsynced(&self, file: Box<dyn StorageFile>) -> Box<dyn StorageFile> {
        Box::new(Unsynced {
            file,
            closed: self.closed.clone(),
        })
    }
}

/// A scratch file: its syncs do nothing, and it changes nothing once its namespace closed.
struct Unsynced {
    file: Box<dyn StorageFile>,
    closed: Arc<AtomicBool>,
}

impl StorageFile for Unsynced {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        refuse_if(&self.closed)?;
        self.file.write_at(buf, offset)
    }
    fn len(&self) -> io::Result<u64> {
        self.file.len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        refuse_if(&self.closed)?;
        self.file.set_len(len)
    }
    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }
    fn sync_all(&self) -> io::Result<()> {
        Ok(())
    }
    fn map_for_writing(&self, len: u64) -> io::Result<Option<Box<dyn MappedFile>>> {
        refuse_if(&self.closed)?;
        self.file.map_for_writing(len)
    }
}

impl Storage for Scratch {
    fn open(&self, name: &str, create: bool) -> io::Result<Box<dyn StorageFile>> {
        refuse_if(&self.closed)?;
        let file = self.inner.open(&self.name(name), create)?;
        Ok(self.unsynced(file))
    }
    fn open_read_only(&self, name: &str) -> io::Result<Box<dyn StorageFile>> {
        let file = self.inner.open_read_only(&self.name(name))?;
        Ok(self.unsynced(file))
    }
    fn exists(&self, name: &str) -> io::Result<bool> {
        self.inner.exists(&self.name(name))
    }
    fn list(&self) -> io::Result<Vec<String>> {
        Ok(self
            .inner
            .list()?
            .into_iter()
            .filter_map(|n| n.strip_prefix(&self.prefix).map(str::to_string))
            .collect())
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        refuse_if(&self.closed)?;
        self.inner.remove(&self.name(name))
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        refuse_if(&self.closed)?;
        self.inner.rename(&self.name(from), &self.name(to))
    }
    fn sync_dir(&self) -> io::Result<()> {
        Ok(())
    }
    fn lock(&self) -> io::Result<Box<dyn Any + Send + Sync>> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "scratch files have no lock of their own",
        ))
    }
    fn describe(&self) -> String {
        format!("{} (scratch files {}*)", self.inner.describe(), self.prefix)
    }
}
