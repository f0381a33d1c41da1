//! Storage that calls a hook before every write, with the file's name, the offset and the
//! length, so that a test can act at an exact point of the engine's work (fail that write,
//! inject a fault, run another thread's step). For tests and outside checkers, behind the
//! `mem-storage` feature, as [`MemStorage`] is.
//!
//! Owns: [`HookStorage`]. May call: the storage it wraps. Invariant: apart from the hook,
//! every call goes to the wrapped storage unchanged.

use super::{MemStorage, Storage, StorageFile};
use std::any::Any;
use std::io;
use std::sync::Arc;

/// Called before every write with the file's name, the offset and the length (before a
/// change of length: the new length and 0); an error fails the write.
pub type Hook = Arc<dyn Fn(&str, u64, usize) -> io::Result<()> + Send + Sync>;

/// [`MemStorage`] with a [`Hook`] before every write.
#[derive(Clone)]
pub struct HookStorage {
    /// The storage written to.
    pub inner: MemStorage,
    /// Run before each write.
    pub hook: Hook,
}

impl std::fmt::Debug for HookStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HookStorage({})", self.inner.describe())
    }
}

impl Storage for HookStorage {
    fn open(&self, name: &str, create: bool) -> io::Result<Box<dyn StorageFile>> {
        let file = self.inner.open(name, create)?;
        Ok(Box::new(HookFile {
            name: name.to_string(),
            file,
            hook: self.hook.clone(),
        }))
    }
    fn exists(&self, name: &str) -> io::Result<bool> {
        self.inner.exists(name)
    }
    fn list(&self) -> io::Result<Vec<String>> {
        self.inner.list()
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        self.inner.remove(name)
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn sync_dir(&self) -> io::Result<()> {
        self.inner.sync_dir()
    }
    fn lock(&self) -> io::Result<Box<dyn Any + Send + Sync>> {
        self.inner.lock()
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}

struct HookFile {
    name: String,
    file: Box<dyn StorageFile>,
    hook: Hook,
}

impl StorageFile for HookFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        (self.hook)(&self.name, offset, buf.len())?;
        self.file.write_at(buf, offset)
    }
    fn len(&self) -> io::Result<u64> {
        self.file.len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        (self.hook)(&self.name, len, 0)?;
        self.file.set_len(len)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn sync_all(&self) -> io::Result<()> {
        self.file.sync_all()
    }
}
