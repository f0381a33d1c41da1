//! The real storage: a directory of the operating system's file system.

use super::{MappedFile, Storage, StorageFile};
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
    /// Storage rooted at `dir`, which is created if missing. A directory it creates is made
    /// durable (its parent synced), so an environment built in it cannot vanish with it.
    pub fn new(dir: impl AsRef<Path>) -> io::Result<OsStorage> {
        create_dir_durably(dir.as_ref())?;
        Ok(OsStorage {
            dir: dir.as_ref().to_path_buf(),
        })
    }

    /// Storage rooted at the existing directory `dir`; [`io::ErrorKind::NotFound`] if it is
    /// missing. Nothing is created.
    pub fn existing(dir: impl AsRef<Path>) -> io::Result<OsStorage> {
        if !fs::metadata(dir.as_ref())?.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", dir.as_ref().display()),
            ));
        }
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

    fn open_read_only(&self, name: &str) -> io::Result<Box<dyn StorageFile>> {
        let file = OpenOptions::new().read(true).open(self.dir.join(name))?;
        Ok(Box::new(OsFile { file }))
    }

    fn exists(&self, name: &str) -> io::Result<bool> {
        self.dir.join(name).try_exists()
    }

    fn list(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
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

/// Creates `dir` and any missing parents, syncing the parent of each directory created.
fn create_dir_durably(dir: &Path) -> io::Result<()> {
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(parent) = parent {
        create_dir_durably(parent)?;
    }
    match fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => return Ok(()),
        Err(e) => return Err(e),
    }
    File::open(parent.unwrap_or(Path::new(".")))?.sync_all()
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
    fn map_for_writing(&self, len: u64) -> io::Result<Option<Box<dyn MappedFile>>> {
        if len == 0 || self.len()? < len {
            return Ok(None);
        }
        let len = usize::try_from(len).map_err(|_| io::ErrorKind::InvalidInput)?;
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh shared mapping of a file this process has open for writing; it is
        // only written through `OsMap::write`, within `len`, and unmapped on drop.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                self.file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Some(Box::new(OsMap {
            ptr: ptr.cast(),
            len,
        })))
    }
}

/// A shared, writable mapping of a file's first `len` bytes: what is copied in is in the
/// file's page cache at once, as a `pwrite` puts it, and `fdatasync` of the file writes it
/// out. One difference from `pwrite`: a write to a page that is not in memory reads it
/// first, and a read error there is a SIGBUS rather than an error return.
struct OsMap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory shared with the kernel; writers of overlapping bytes
// are kept apart by the caller (the log writes only under its flush leadership).
unsafe impl Send for OsMap {}
unsafe impl Sync for OsMap {}

impl MappedFile for OsMap {
    fn write(&self, data: &[u8], offset: u64) -> io::Result<()> {
        let at = usize::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
        if at > self.len || data.len() > self.len - at {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        // SAFETY: `at..at + data.len()` lies within the mapping (checked above).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(at), data.len()) };
        Ok(())
    }
}

impl Drop for OsMap {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map_for_writing`, unmapped once. Dirty pages stay in
        // the page cache and reach the file as any written page does.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapped_writes_are_read_back_and_stay_within_the_mapping() {
        let dir = tempfile::tempdir().unwrap();
        let storage = OsStorage::new(dir.path()).unwrap();
        let file = storage.open("f", true).unwrap();
        file.set_len(4096).unwrap();
        assert!(
            file.map_for_writing(8192).unwrap().is_none(),
            "longer than the file"
        );
        let map = file.map_for_writing(4096).unwrap().expect("a mapping");
        map.write(b"abcdef", 4090).unwrap();
        let err = map.write(b"abcdefg", 4090).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(map.write(b"x", u64::MAX).is_err());
        drop(map);
        let mut back = [0u8; 6];
        file.read_at(&mut back, 4090).unwrap();
        assert_eq!(&back, b"abcdef");
        // Another handle (another process, after a kill) reads it too.
        let other = storage.open("f", false).unwrap();
        other.read_at(&mut back, 4090).unwrap();
        assert_eq!(&back, b"abcdef");
    }
}
