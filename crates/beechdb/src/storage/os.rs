//! The real storage: a directory of the operating system's file system.

use super::{Storage, StorageFile};
use std::any::Any;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Storage in a directory on the local file system, through `pread`/`pwrite`/`fdatasync`.
#[derive(Debug, Clone)]
pub struct OsStorage {
    dir: PathBuf,
}

impl OsStorage {
    /// Storage rooted at `dir`, which is created if missing.
    pub fn new(dir: impl AsRef<Path>) -> io::Result<OsStorage> {
        fs::create_dir_all(dir.as_ref())?;
        Ok(OsStorage {
            dir: dir.as_ref().to_path_buf(),
        })
    }

    /// The directory this storage lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Storage for OsStorage {
    fn open(&self, name: &str, create: bool) -> io::Result<Box<dyn StorageFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .open(self.dir.join(name))?;
        Ok(Box::new(OsFile { file }))
    }

    fn exists(&self, name: &str) -> io::Result<bool> {
        self.dir.join(name).try_exists()
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        fs::remove_file(self.dir.join(name))
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        fs::rename(self.dir.join(from), self.dir.join(to))
    }

    fn sync_dir(&self) -> io::Result<()> {
        File::open(&self.dir)?.sync_all()
    }

    fn lock(&self) -> io::Result<Box<dyn Any + Send + Sync>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(self.dir.join("beech.lock"))?;
        match file.try_lock() {
            Ok(()) => Ok(Box::new(file)),
            Err(fs::TryLockError::WouldBlock) => Err(io::ErrorKind::WouldBlock.into()),
            Err(fs::TryLockError::Error(e)) => Err(e),
        }
    }

    fn describe(&self) -> String {
        self.dir.display().to_string()
    }
}

struct OsFile {
    file: File,
}

impl StorageFile for OsFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(buf, offset)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn sync_all(&self) -> io::Result<()> {
        self.file.sync_all()
    }
}
