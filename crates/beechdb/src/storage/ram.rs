//! Storage in this process's memory and nowhere else: an environment that needs no files
//! and outlives nothing (an SQL `:memory:` database, a scratch environment in a test).
//!
//! Owns: [`RamStorage`] and its files. May call: nothing else in the crate. Invariants:
//! every write is seen at once by every handle of the same storage; syncs do nothing and
//! succeed, since nothing here can be durable; clones share the files, and the lock is
//! taken by one holder at a time, as a directory's would be.

use super::{Storage, StorageFile};
use parking_lot::{Mutex, RwLock};
use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;

type Bytes = Arc<RwLock<Vec<u8>>>;

/// An environment's files in memory: fast, private to the process, gone with the last
/// handle. Nothing written to it survives the process; use it where that is the point.
#[derive(Clone, Default)]
pub struct RamStorage {
    files: Arc<Mutex<BTreeMap<String, Bytes>>>,
    locked: Arc<AtomicBool>,
}

impl RamStorage {
    /// An empty storage.
    pub fn new() -> RamStorage {
        RamStorage::default()
    }
}

impl fmt::Debug for RamStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RamStorage")
    }
}

fn not_found(name: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("no file {name:?} in memory"),
    )
}

impl Storage for RamStorage {
    fn open(&self, name: &str, create: bool) -> io::Result<Box<dyn StorageFile>> {
        let mut files = self.files.lock();
        let bytes = match files.get(name) {
            Some(b) => b.clone(),
            None if create => files.entry(name.to_string()).or_default().clone(),
            None => return Err(not_found(name)),
        };
        Ok(Box::new(RamFile {
            bytes,
            writable: true,
        }))
    }

    fn open_read_only(&self, name: &str) -> io::Result<Box<dyn StorageFile>> {
        let bytes = self.files.lock().get(name).cloned();
        Ok(Box::new(RamFile {
            bytes: bytes.ok_or_else(|| not_found(name))?,
            writable: false,
        }))
    }

    fn exists(&self, name: &str) -> io::Result<bool> {
        Ok(self.files.lock().contains_key(name))
    }

    fn list(&self) -> io::Result<Vec<String>> {
        Ok(self.files.lock().keys().cloned().collect())
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        self.files
            .lock()
            .remove(name)
            .map(drop)
            .ok_or_else(|| not_found(name))
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let mut files = self.files.lock();
        let bytes = files.remove(from).ok_or_else(|| not_found(from))?;
        files.insert(to.to_string(), bytes);
        Ok(())
    }

    fn sync_dir(&self) -> io::Result<()> {
        Ok(())
    }

    fn lock(&self) -> io::Result<Box<dyn Any + Send + Sync>> {
        if self.locked.swap(true, SeqCst) {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "the environment in memory is open already",
            ));
        }
        Ok(Box::new(Unlock(self.locked.clone())))
    }

    fn describe(&self) -> String {
        "memory".into()
    }
}

/// Releases [`RamStorage`]'s lock when dropped.
struct Unlock(Arc<AtomicBool>);

impl Drop for Unlock {
    fn drop(&mut self) {
        self.0.store(false, SeqCst);
    }
}

struct RamFile {
    bytes: Bytes,
    writable: bool,
}

impl RamFile {
    fn check_writable(&self) -> io::Result<()> {
        match self.writable {
            true => Ok(()),
            false => Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the file was opened for reading only",
            )),
        }
    }
}

fn end_of(offset: u64, len: usize) -> io::Result<usize> {
    usize::try_from(offset)
        .ok()
        .and_then(|o| o.checked_add(len))
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "offset out of range"))
}

impl StorageFile for RamFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let bytes = self.bytes.read();
        let end = end_of(offset, buf.len())?;
        match bytes.get(offset as usize..end) {
            Some(src) => {
                buf.copy_from_slice(src);
                Ok(())
            }
            None => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "a read to {end} past the end of a {}-byte file",
                    bytes.len()
                ),
            )),
        }
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.check_writable()?;
        let end = end_of(offset, buf.len())?;
        let mut bytes = self.bytes.write();
        if bytes.len() < end {
            bytes.resize(end, 0);
        }
        bytes[offset as usize..end].copy_from_slice(buf);
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.bytes.read().len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.check_writable()?;
        let len = end_of(len, 0)?;
        self.bytes.write().resize(len, 0);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }

    fn sync_all(&self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_shared_by_handles_and_clones() {
        let s = RamStorage::new();
        let a = s.open("f", true).unwrap();
        a.write_at(b"hello", 3).unwrap();
        assert_eq!(a.len().unwrap(), 8);
        let b = s.clone().open_read_only("f").unwrap();
        let mut buf = [0u8; 8];
        b.read_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"\0\0\0hello");
        assert_eq!(
            b.write_at(b"x", 0).unwrap_err().kind(),
            io::ErrorKind::PermissionDenied
        );
        assert_eq!(
            b.read_at(&mut buf, 1).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
        assert_eq!(
            a.read_at(&mut buf, u64::MAX).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        s.rename("f", "g").unwrap();
        assert_eq!(s.list().unwrap(), vec!["g".to_string()]);
        assert_eq!(
            s.open("f", false).err().unwrap().kind(),
            io::ErrorKind::NotFound
        );
        s.remove("g").unwrap();
        assert!(!s.exists("g").unwrap());
    }

    #[test]
    fn one_holder_of_the_lock_at_a_time() {
        let s = RamStorage::new();
        let held = s.lock().unwrap();
        assert_eq!(
            s.clone().lock().err().unwrap().kind(),
            io::ErrorKind::WouldBlock
        );
        drop(held);
        s.lock().unwrap();
    }
}
