//! The real storage: a directory of the operating system's file system, or one file and the
//! files named after it beside it (a one-file environment, [`OsStorage::file`]).
//!
//! Invariant of a one-file environment: its page file is the file itself and every other
//! name `N` is the file `PATH-N` beside it; a missing or empty file holds no environment
//! (as SQLite treats an empty file as an empty database), whatever is beside it.

use super::{MappedFile, Storage, StorageFile, PAGE_FILE as DB_FILE};
use std::any::Any;
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Storage in a directory on the local file system, through `pread`/`pwrite`/`fdatasync`.
#[derive(Debug, Clone)]
pub struct OsStorage {
    dir: PathBuf,
    /// A one-file environment's file name in `dir`; `None` when the directory is the
    /// environment's own.
    file: Option<OsString>,
}

impl OsStorage {
    /// Storage rooted at `dir`, which is created if missing. A directory it creates is made
    /// durable (its parent synced), so an environment built in it cannot vanish with it.
    pub fn new(dir: impl AsRef<Path>) -> io::Result<OsStorage> {
        create_dir_durably(dir.as_ref())?;
        Ok(OsStorage {
            dir: dir.as_ref().to_path_buf(),
            file: None,
        })
    }

    /// A one-file environment: its pages in the file `path`, its log and other files beside
    /// it as `PATH-log.0000000001`, `PATH-beech.lock`, ... (as SQLite keeps `-wal` and
    /// `-journal` files beside a database). The directory holding `path` must exist;
    /// nothing is created.
    pub fn file(path: impl AsRef<Path>) -> io::Result<OsStorage> {
        let path = path.as_ref();
        let (Some(name), false) = (
            path.file_name(),
            path.as_os_str().as_bytes().ends_with(b"/"),
        ) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} names no file", path.display()),
            ));
        };
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !fs::metadata(&dir)?.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", dir.display()),
            ));
        }
        Ok(OsStorage {
            dir,
            file: Some(name.to_os_string()),
        })
    }

    /// The existing environment at `path`: a directory, or a one-file environment's file
    /// (see [`OsStorage::file`]); [`io::ErrorKind::NotFound`] if nothing is there. Nothing
    /// is created.
    pub fn existing(path: impl AsRef<Path>) -> io::Result<OsStorage> {
        let path = path.as_ref();
        let found = fs::metadata(path)?;
        if found.is_file() {
            return OsStorage::file(path);
        }
        if !found.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is neither a directory nor a file", path.display()),
            ));
        }
        Ok(OsStorage {
            dir: path.to_path_buf(),
            file: None,
        })
    }

    /// The directory this storage lives in (for a one-file environment, the one holding
    /// its file).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the file `name` is.
    fn path(&self, name: &str) -> PathBuf {
        match &self.file {
            None => self.dir.join(name),
            Some(file) if name == DB_FILE => self.dir.join(file),
            Some(file) => {
                let mut beside = file.clone();
                beside.push("-");
                beside.push(name);
                self.dir.join(beside)
            }
        }
    }

    /// The name a directory entry has in this storage, if it is one of its files.
    fn name_of(&self, entry: &OsStr) -> Option<String> {
        let Some(file) = &self.file else {
            return entry.to_str().map(str::to_string);
        };
        if entry == file.as_os_str() {
            return Some(DB_FILE.to_string());
        }
        let rest = entry.as_bytes().strip_prefix(file.as_bytes())?;
        let rest = rest.strip_prefix(b"-")?;
        std::str::from_utf8(rest).ok().map(str::to_string)
    }

    /// Whether `name` is a one-file environment's own file, present but empty: no
    /// environment yet.
    fn is_empty_file(&self, name: &str) -> io::Result<bool> {
        if self.file.is_none() || name != DB_FILE {
            return Ok(false);
        }
        match fs::metadata(self.path(name)) {
            Ok(m) => Ok(m.is_file() && m.len() == 0),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

impl Storage for OsStorage {
    fn open(&self, name: &str, create: bool) -> io::Result<Box<dyn StorageFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .open(self.path(name))?;
        Ok(Box::new(OsFile { file }))
    }

    fn open_read_only(&self, name: &str) -> io::Result<Box<dyn StorageFile>> {
        let file = OpenOptions::new().read(true).open(self.path(name))?;
        Ok(Box::new(OsFile { file }))
    }

    fn exists(&self, name: &str) -> io::Result<bool> {
        Ok(self.path(name).try_exists()? && !self.is_empty_file(name)?)
    }

    fn list(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            if let Some(name) = self.name_of(&entry?.file_name()) {
                if !self.is_empty_file(&name)? {
                    names.push(name);
                }
            }
        }
        Ok(names)
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        fs::remove_file(self.path(name))
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        fs::rename(self.path(from), self.path(to))
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
            .open(self.path("beech.lock"))?;
        match file.try_lock() {
            Ok(()) => Ok(Box::new(HeldLock(file))),
            Err(fs::TryLockError::WouldBlock) => Err(io::ErrorKind::WouldBlock.into()),
            Err(fs::TryLockError::Error(e)) => Err(e),
        }
    }

    fn describe(&self) -> String {
        match &self.file {
            None => self.dir.display().to_string(),
            Some(_) => self.path(DB_FILE).display().to_string(),
        }
    }
}

/// The environment's lock file, locked. Released explicitly when dropped: a process forked
/// meanwhile shares the lock through its copy of the descriptor until it execs or exits, and
/// closing ours alone would leave the directory locked until then.
struct HeldLock(File);

impl Drop for HeldLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
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
    fn will_need(&self, offset: u64, len: u64) {
        use std::os::fd::AsRawFd;
        let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len))
        else {
            return;
        };
        // A hint: its failure changes nothing.
        // SAFETY: the descriptor is this file's, open for the call's length.
        unsafe {
            libc::posix_fadvise(
                self.file.as_raw_fd(),
                offset,
                len,
                libc::POSIX_FADV_WILLNEED,
            )
        };
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

    /// A one-file environment's names: the page file is the file, the rest beside it; other
    /// files of the directory, a neighbour whose name begins with this one's among them,
    /// are not its own; an empty file is no page file yet.
    #[test]
    fn a_one_file_environment_names_its_files_after_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let s = OsStorage::file(dir.path().join("app.db")).unwrap();
        assert!(!s.exists(DB_FILE).unwrap());
        std::fs::File::create(dir.path().join("app.db")).unwrap();
        assert!(
            !s.exists(DB_FILE).unwrap(),
            "an empty file holds no environment"
        );
        assert!(s.list().unwrap().is_empty());
        s.open(DB_FILE, false).unwrap().write_at(b"x", 0).unwrap();
        s.open("log.0000000001", true).unwrap();
        for other in ["app.dbx", "app.db-", "notes.txt", "app"] {
            std::fs::write(dir.path().join(other), b"").unwrap();
        }
        let mut names = s.list().unwrap();
        names.sort();
        // "app.db-" is "" beside the file: listed, and never taken for any file BeechDB
        // names.
        assert_eq!(names, ["", DB_FILE, "log.0000000001"]);
        assert!(dir.path().join("app.db-log.0000000001").exists());
        s.rename("log.0000000001", "log.0000000002").unwrap();
        assert!(dir.path().join("app.db-log.0000000002").exists());
        s.remove("log.0000000002").unwrap();
        assert_eq!(
            s.describe(),
            dir.path().join("app.db").display().to_string()
        );
        assert!(
            OsStorage::file(dir.path().join("x/")).is_err(),
            "a path that names no file"
        );
        assert!(OsStorage::file(dir.path().join("missing").join("app.db")).is_err());
    }
}
