//! Scratch files inside an environment's storage: a namespace of names with a prefix of
//! their own, whose syncs are skipped.
//!
//! Owns: [`Scratch`]. May call: the storage it wraps. Invariants: every name it hands the
//! wrapped storage starts with its prefix, so its files never collide with the
//! environment's and are recognised (and removed) as leftovers at open; nothing written
//! through it is ever made durable, so nothing may be recovered from it.

use super::{MappedFile, Storage, StorageFile};
use std::any::Any;
use std::io;
use std::sync::Arc;

/// The files of `inner` whose names start with `prefix`, under the rest of their name.
#[derive(Debug)]
pub(crate) struct Scratch {
    inner: Arc<dyn Storage>,
    prefix: &'static str,
}

impl Scratch {
    pub(crate) fn new(inner: Arc<dyn Storage>, prefix: &'static str) -> Scratch {
        Scratch { inner, prefix }
    }

    fn name(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }
}

/// A scratch file: its syncs do nothing.
struct Unsynced(Box<dyn StorageFile>);

impl StorageFile for Unsynced {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_at(buf, offset)
    }
    fn len(&self) -> io::Result<u64> {
        self.0.len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }
    fn sync_all(&self) -> io::Result<()> {
        Ok(())
    }
    fn map_for_writing(&self, len: u64) -> io::Result<Option<Box<dyn MappedFile>>> {
        self.0.map_for_writing(len)
    }
}

impl Storage for Scratch {
    fn open(&self, name: &str, create: bool) -> io::Result<Box<dyn StorageFile>> {
        let file = self.inner.open(&self.name(name), create)?;
        Ok(Box::new(Unsynced(file)))
    }
    fn open_read_only(&self, name: &str) -> io::Result<Box<dyn StorageFile>> {
        let file = self.inner.open_read_only(&self.name(name))?;
        Ok(Box::new(Unsynced(file)))
    }
    fn exists(&self, name: &str) -> io::Result<bool> {
        self.inner.exists(&self.name(name))
    }
    fn list(&self) -> io::Result<Vec<String>> {
        Ok(self
            .inner
            .list()?
            .into_iter()
            .filter_map(|n| n.strip_prefix(self.prefix).map(str::to_string))
            .collect())
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        self.inner.remove(&self.name(name))
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
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
