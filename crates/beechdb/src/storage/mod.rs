//! The storage seam: every byte BeechDB reads or writes goes through [`Storage`] and
//! [`StorageFile`].
//!
//! Owns: the two traits, the real implementation ([`OsStorage`]), one in memory for
//! environments that need no files ([`RamStorage`]), the simulating one
//! (`MemStorage`: power loss, fault injection, process restarts; and `HookStorage`, which
//! runs a test's hook before each write; both behind the `mem-storage` feature) and a
//! namespace of unsynced scratch files inside either (`scratch`). May call: the operating
//! system, nothing else in the crate. Invariant: implementations keep the promises written
//! on each method; the engine's crash safety rests on exactly those promises and no others
//! (see `docs/architecture.md`, "What BeechDB assumes of storage").

pub(crate) mod format;
pub(crate) mod freespace;
#[cfg(any(test, feature = "mem-storage"))]
mod hook;
#[cfg(any(test, feature = "mem-storage"))]
mod mem;
pub(crate) mod meta;
mod os;
pub(crate) mod page;
mod ram;
pub(crate) mod scratch;

#[cfg(any(test, feature = "mem-storage"))]
pub use hook::{Hook, HookStorage};
#[cfg(any(test, feature = "mem-storage"))]
pub use mem::{FaultKind, MemStorage};
pub use os::OsStorage;
pub use ram::RamStorage;

use std::any::Any;
use std::fmt::Debug;
use std::io;

/// The page file's name: the one name a one-file environment ([`OsStorage::file`]) keeps
/// as the file itself.
pub(crate) const PAGE_FILE: &str = "beech.db";

/// Whether the file at `path` begins as a BeechDB page file does (the magic of its first
/// meta page), damaged or not: tells a damaged environment from another program's file.
pub fn is_page_file(path: &std::path::Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 12];
    std::fs::File::open(path).is_ok_and(|mut f| f.read_exact(&mut head).is_ok())
        && meta::has_magic(&head)
}

/// One environment directory: a flat namespace of files.
///
/// Implement this to put BeechDB on another medium or to check it under simulated faults.
pub trait Storage: Send + Sync + Debug {
    /// Opens the file `name`, creating it (empty) when `create` is true and it is missing.
    /// A newly created name is durable only after [`Storage::sync_dir`].
    fn open(&self, name: &str, create: bool) -> io::Result<Box<dyn StorageFile>>;
    /// Opens an existing file for reading only (writes through it fail).
    fn open_read_only(&self, name: &str) -> io::Result<Box<dyn StorageFile>> {
        self.open(name, false)
    }
    /// Whether a file named `name` exists.
    fn exists(&self, name: &str) -> io::Result<bool>;
    /// The names of the files in the directory, in any order.
    fn list(&self) -> io::Result<Vec<String>>;
    /// Removes the file `name`; durable after [`Storage::sync_dir`].
    fn remove(&self, name: &str) -> io::Result<()>;
    /// Atomically renames `from` to `to`, replacing `to`; durable after [`Storage::sync_dir`].
    fn rename(&self, from: &str, to: &str) -> io::Result<()>;
    /// Makes every create, rename and remove so far durable. Until it returns, any subset of
    /// them may be lost by a crash, in any order; a failed call leaves them pending.
    fn sync_dir(&self) -> io::Result<()>;
    /// Takes the environment's exclusive lock, held until the returned guard is dropped.
    /// Fails with [`io::ErrorKind::WouldBlock`] when another holder has it.
    fn lock(&self) -> io::Result<Box<dyn Any + Send + Sync>>;
    /// A human-readable location, for messages.
    fn describe(&self) -> String;
}

/// An open file. All offsets are absolute; calls may come from many threads at once.
pub trait StorageFile: Send + Sync {
    /// Fills `buf` from `offset`; reading past the end is an [`io::ErrorKind::UnexpectedEof`].
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `buf` at `offset`, extending the file if needed. Not durable until a
    /// sync; after a crash an unsynced write may be absent, torn at any 512-byte sector
    /// boundary or reordered with others, but one aligned sector is kept whole or lost.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// The file's current length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Whether the file is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Truncates or extends the file; durable after [`StorageFile::sync_all`].
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Makes every completed write durable, and the length when it is needed to read them
    /// back (`fdatasync`), but not a [`StorageFile::set_len`]. An error means the writes
    /// since the last successful sync may never become durable, even though reads (in this
    /// process or a later one in the same boot) still return them.
    fn sync_data(&self) -> io::Result<()>;
    /// As [`StorageFile::sync_data`], and the length and all metadata too (`fsync`).
    fn sync_all(&self) -> io::Result<()>;
    /// Maps the file's first `len` bytes for writing, when the storage can: bytes copied
    /// into the mapping reach the file as [`StorageFile::write_at`] would put them (read
    /// back at once, durable after a sync of this file), without a system call each. The
    /// caller keeps the file at least `len` long while it is mapped. `None`, the default:
    /// the caller writes through `write_at`.
    fn map_for_writing(&self, len: u64) -> io::Result<Option<Box<dyn MappedFile>>> {
        let _ = len;
        Ok(None)
    }
    /// A hint that `len` bytes from `offset` will be written or read soon: a storage with a
    /// cache may start reading them in. Changes nothing a read returns; the default does
    /// nothing.
    fn will_need(&self, offset: u64, len: u64) {
        let _ = (offset, len);
    }
}

/// A file's first bytes mapped for writing (see [`StorageFile::map_for_writing`]).
pub trait MappedFile: Send + Sync {
    /// Copies `data` to `offset`; an [`io::ErrorKind::InvalidInput`] error, and nothing
    /// written, when that reaches past the mapped length.
    fn write(&self, data: &[u8], offset: u64) -> io::Result<()>;
}
