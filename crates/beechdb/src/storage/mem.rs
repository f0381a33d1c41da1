//! In-memory storage that can simulate power loss and inject I/O faults, for tests and for
//! outside checkers.
//!
//! Model, exactly the promises of the [`Storage`] traits and no more:
//! - each file has a durable image and the writes and size changes made since; the directory
//!   has a durable name table and the creates, renames and removes made since its last sync;
//! - `sync_data` makes the pending writes durable, not `set_len` changes; `sync_all` makes
//!   the whole file durable, size included;
//! - a sync that fails (an injected fault) drops the file's pending changes the way Linux
//!   does after a failed `fsync`: they stay visible (the page cache) but will never become
//!   durable unless written again. A failed `sync_dir` leaves the directory operations
//!   pending (file systems journal them; the next successful `sync_dir` makes them durable);
//! - [`MemStorage::restart_process`] ends the process using the storage (every handle it
//!   holds fails from then on, its lock is released) and starts another on the same machine:
//!   it sees the page cache, not only what is durable;
//! - [`MemStorage::crash_image`] builds what a disk could hold after power is cut: every
//!   durable byte, plus any subset of the pending writes (in order, some torn at 512-byte
//!   sector granularity, others lost: reordering), size changes kept or lost, and the pending
//!   directory operations either as a prefix or each kept or lost independently (each acting
//!   on the file it named when it was made: a kept rename moves that file, whatever else was
//!   lost).

use super::{Storage, StorageFile};
use parking_lot::Mutex;
use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::sync::Arc;

const SECTOR: usize = 512;

/// Which calls an injected fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// `write_at` and `set_len`.
    Write,
    /// `sync_data`, `sync_all` and `sync_dir`.
    Sync,
}

/// Simulated storage; clones share the same files (and the same process).
#[derive(Clone, Default)]
pub struct MemStorage {
    inner: Arc<Mutex<MemState>>,
    /// The simulated process this handle belongs to.
    process: u64,
}

impl fmt::Debug for MemStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MemStorage")
    }
}

#[derive(Default)]
struct MemState {
    inodes: Vec<Inode>,
    names: BTreeMap<String, usize>,
    durable_names: BTreeMap<String, usize>,
    pending_dir: Vec<DirOp>,
    /// The process holding the environment lock.
    locked: Option<u64>,
    /// The live process: handles of earlier ones fail.
    process: u64,
    /// Mutating calls made so far.
    mutations: u64,
    /// Power goes off when `mutations` reaches this.
    cut_at: Option<u64>,
    /// The live process ends when `mutations` reaches this.
    end_at: Option<u64>,
    power_off: bool,
    faults: Vec<(FaultKind, u64, i32)>,
    write_calls: u64,
    sync_calls: u64,
}

#[derive(Default, Clone)]
struct Inode {
    data: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<Pending>,
}

#[derive(Clone)]
enum Pending {
    Write { offset: usize, bytes: Vec<u8> },
    SetLen(usize),
}

/// A directory operation not yet durable, with the inode it acted on: a crash image that
/// keeps it changes that inode's entries only (an unlink or a rename acts on the file its
/// name had then, not on whatever file the name has in an image that lost earlier
/// operations).
#[derive(Clone)]
enum DirOp {
    Link(String, usize),
    Unlink(String, usize),
    Rename(String, String, usize),
}

impl MemStorage {
    /// Empty storage.
    pub fn new() -> MemStorage {
        MemStorage::default()
    }

    /// Simulates the end of the process using this storage (a kill or a crash, not a power
    /// loss) and the start of a new one on the same machine: every handle of the old process
    /// (this one, its clones, files it opened) fails from now on and its lock is released. The
    /// returned handle belongs to the new process, which sees every file as the old one left
    /// it, durable or not, as a restarted process sees the operating system's page cache.
    pub fn restart_process(&self) -> MemStorage {
        let mut s = self.inner.lock();
        s.end_process();
        MemStorage {
            inner: self.inner.clone(),
            process: s.process,
        }
    }

    /// Ends the live process (as a SIGKILL would) at its `n`th next mutating call: that call
    /// and every later one of the process fails, and nothing is lost from the page cache.
    /// Continue with [`MemStorage::restart_process`].
    pub fn end_process_after(&self, n: u64) {
        let mut s = self.inner.lock();
        s.end_at = Some(s.mutations + n);
    }

    /// Cuts the power after `n` more mutating calls (writes, size changes, syncs, directory
    /// operations): that call and every later one fail, and [`MemStorage::crash_image`] then
    /// describes the disk at that instant.
    pub fn cut_power_after(&self, n: u64) {
        let mut s = self.inner.lock();
        s.cut_at = Some(s.mutations + n);
    }

    /// Whether the power has been cut.
    pub fn is_power_off(&self) -> bool {
        self.inner.lock().power_off
    }

    /// Makes the `nth` (1-based) next call of `kind` fail with the OS error `errno` (for
    /// example `libc::EIO` = 5 or `libc::ENOSPC` = 28). A failed write changes nothing; a
    /// failed file sync drops the file's pending changes (visible, never durable); a failed
    /// directory sync makes nothing durable.
    pub fn inject_fault(&self, kind: FaultKind, nth: u64, errno: i32) {
        let mut s = self.inner.lock();
        let base = match kind {
            FaultKind::Write => s.write_calls,
            FaultKind::Sync => s.sync_calls,
        };
        s.faults.push((kind, base + nth, errno));
    }

    /// Withdraws every injected fault not yet hit (a full disk given space again).
    pub fn clear_faults(&self) {
        self.inner.lock().faults.clear();
    }

    /// Number of mutating calls so far (to pick power-cut points).
    pub fn mutation_count(&self) -> u64 {
        self.inner.lock().mutations
    }

    /// A new storage holding what the disk could contain after a power cut now, chosen by
    /// `seed`. The current storage is unaffected.
    pub fn crash_image(&self, seed: u64) -> MemStorage {
        let s = self.inner.lock();
        let mut rng = SplitMix(seed);
        let mut names = s.durable_names.clone();
        // Directory operations survive as a prefix, or each independently of the others.
        let independent = rng.below(2) == 0;
        let applied = rng.below(s.pending_dir.len() as u64 + 1) as usize;
        for (i, op) in s.pending_dir.iter().enumerate() {
            let kept = if independent {
                rng.below(2) == 0
            } else {
                i < applied
            };
            if !kept {
                continue;
            }
            match op {
                DirOp::Link(n, i) => {
                    names.insert(n.clone(), *i);
                }
                DirOp::Unlink(n, i) => {
                    if names.get(n) == Some(i) {
                        names.remove(n);
                    }
                }
                DirOp::Rename(a, b, i) => {
                    if names.get(a) == Some(i) {
                        names.remove(a);
                    }
                    names.insert(b.clone(), *i);
                }
            }
        }
        let mut out = MemState::default();
        for (name, &ino) in &names {
            let src = &s.inodes[ino];
            let mut bytes = src.durable.clone();
            for p in &src.pending {
                match p {
                    Pending::SetLen(len) => {
                        if rng.below(2) == 0 {
                            bytes.resize(*len, 0);
                        }
                    }
                    Pending::Write { offset, bytes: w } => match rng.below(4) {
                        0 => {}
                        1 => {
                            // Torn: each sector independently reaches the disk or not.
                            for (i, chunk) in w.chunks(SECTOR).enumerate() {
                                if rng.below(2) == 0 {
                                    put(&mut bytes, offset + i * SECTOR, chunk);
                                }
                            }
                        }
                        _ => put(&mut bytes, *offset, w),
                    },
                }
            }
            out.inodes.push(Inode {
                data: bytes.clone(),
                durable: bytes,
                pending: Vec::new(),
            });
            out.names.insert(name.clone(), out.inodes.len() - 1);
        }
        out.durable_names = out.names.clone();
        MemStorage {
            inner: Arc::new(Mutex::new(out)),
            process: 0,
        }
    }

    /// Lets a test damage a file directly: `f` edits the bytes, which become durable.
    pub fn edit_file(&self, name: &str, f: impl FnOnce(&mut Vec<u8>)) -> io::Result<()> {
        let mut s = self.state()?;
        let ino = *s.names.get(name).ok_or(io::ErrorKind::NotFound)?;
        let inode = &mut s.inodes[ino];
        f(&mut inode.data);
        inode.durable = inode.data.clone();
        inode.pending.clear();
        Ok(())
    }

    /// The current contents of a file.
    pub fn file_bytes(&self, name: &str) -> io::Result<Vec<u8>> {
        let s = self.state()?;
        let ino = *s.names.get(name).ok_or(io::ErrorKind::NotFound)?;
        Ok(s.inodes[ino].data.clone())
    }
}

impl MemStorage {
    /// The state, for a call of this handle's process.
    fn state(&self) -> io::Result<parking_lot::MutexGuard<'_, MemState>> {
        let s = self.inner.lock();
        s.alive(self.process)?;
        Ok(s)
    }
}

fn put(bytes: &mut Vec<u8>, offset: usize, w: &[u8]) {
    if bytes.len() < offset + w.len() {
        bytes.resize(offset + w.len(), 0);
    }
    bytes[offset..offset + w.len()].copy_from_slice(w);
}

impl MemState {
    /// Accounts for one mutating call; fails it if the power is off or a fault is due.
    fn mutate(&mut self, kind: FaultKind) -> io::Result<()> {
        if self.power_off {
            return Err(power_off());
        }
        self.mutations += 1;
        if self.cut_at.is_some_and(|c| self.mutations >= c) {
            self.power_off = true;
            return Err(power_off());
        }
        if self.end_at.is_some_and(|c| self.mutations >= c) {
            self.end_process();
            return Err(process_ended());
        }
        let n = match kind {
            FaultKind::Write => {
                self.write_calls += 1;
                self.write_calls
            }
            FaultKind::Sync => {
                self.sync_calls += 1;
                self.sync_calls
            }
        };
        if let Some(pos) = self
            .faults
            .iter()
            .position(|&(k, at, _)| k == kind && at == n)
        {
            let (_, _, errno) = self.faults.remove(pos);
            return Err(io::Error::from_raw_os_error(errno));
        }
        Ok(())
    }

    fn live(&self) -> io::Result<()> {
        if self.power_off {
            Err(power_off())
        } else {
            Ok(())
        }
    }

    /// Fails calls from a process that has ended.
    fn alive(&self, process: u64) -> io::Result<()> {
        if process != self.process {
            return Err(process_ended());
        }
        self.live()
    }

    fn end_process(&mut self) {
        self.process += 1;
        self.locked = None;
        self.end_at = None;
    }
}

fn process_ended() -> io::Error {
    io::Error::other("simulated process has ended")
}

fn power_off() -> io::Error {
    io::Error::other("simulated power loss")
}

impl Storage for MemStorage {
    fn open(&self, name: &str, create: bool) -> io::Result<Box<dyn StorageFile>> {
        let mut s = self.state()?;
        let ino = match s.names.get(name) {
            Some(&i) => i,
            None if create => {
                s.mutate(FaultKind::Write)?;
                s.inodes.push(Inode::default());
                let i = s.inodes.len() - 1;
                s.names.insert(name.to_string(), i);
                s.pending_dir.push(DirOp::Link(name.to_string(), i));
                i
            }
            None => return Err(io::ErrorKind::NotFound.into()),
        };
        Ok(Box::new(MemFile {
            storage: self.inner.clone(),
            process: self.process,
            ino,
        }))
    }

    fn exists(&self, name: &str) -> io::Result<bool> {
        Ok(self.state()?.names.contains_key(name))
    }

    fn list(&self) -> io::Result<Vec<String>> {
        Ok(self.state()?.names.keys().cloned().collect())
    }

    fn remove(&self, name: &str) -> io::Result<()> {
        let mut s = self.state()?;
        s.mutate(FaultKind::Write)?;
        let ino = s.names.remove(name).ok_or(io::ErrorKind::NotFound)?;
        s.pending_dir.push(DirOp::Unlink(name.to_string(), ino));
        Ok(())
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let mut s = self.state()?;
        s.mutate(FaultKind::Write)?;
        let ino = s.names.remove(from).ok_or(io::ErrorKind::NotFound)?;
        s.names.insert(to.to_string(), ino);
        s.pending_dir
            .push(DirOp::Rename(from.to_string(), to.to_string(), ino));
        Ok(())
    }

    fn sync_dir(&self) -> io::Result<()> {
        let mut s = self.state()?;
        s.mutate(FaultKind::Sync)?;
        s.durable_names = s.names.clone();
        s.pending_dir.clear();
        Ok(())
    }

    fn lock(&self) -> io::Result<Box<dyn Any + Send + Sync>> {
        let mut s = self.state()?;
        if s.locked.is_some() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        s.locked = Some(self.process);
        Ok(Box::new(MemLock(self.inner.clone(), self.process)))
    }

    fn describe(&self) -> String {
        "in-memory storage".to_string()
    }
}

struct MemLock(Arc<Mutex<MemState>>, u64);

impl Drop for MemLock {
    fn drop(&mut self) {
        let mut s = self.0.lock();
        if s.locked == Some(self.1) {
            s.locked = None;
        }
    }
}

struct MemFile {
    storage: Arc<Mutex<MemState>>,
    process: u64,
    ino: usize,
}

impl MemFile {
    fn state(&self) -> io::Result<parking_lot::MutexGuard<'_, MemState>> {
        let s = self.storage.lock();
        s.alive(self.process)?;
        Ok(s)
    }

    /// A sync: `all` makes size changes durable too. On failure the pending changes are
    /// dropped: visible, never durable (see the module doc).
    fn sync(&self, all: bool) -> io::Result<()> {
        let mut s = self.state()?;
        if let Err(e) = s.mutate(FaultKind::Sync) {
            if !s.power_off {
                s.inodes[self.ino].pending.clear();
            }
            return Err(e);
        }
        let inode = &mut s.inodes[self.ino];
        let pending = std::mem::take(&mut inode.pending);
        if all {
            inode.durable = inode.data.clone();
        } else {
            for p in pending {
                match p {
                    Pending::Write { offset, bytes } => put(&mut inode.durable, offset, &bytes),
                    // Not made durable by `sync_data`; still pending.
                    Pending::SetLen(len) => inode.pending.push(Pending::SetLen(len)),
                }
            }
        }
        Ok(())
    }
}

impl StorageFile for MemFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let s = self.state()?;
        let data = &s.inodes[self.ino].data;
        let start = offset as usize;
        let end = start
            .checked_add(buf.len())
            .ok_or(io::ErrorKind::InvalidInput)?;
        if end > data.len() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.copy_from_slice(&data[start..end]);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut s = self.state()?;
        s.mutate(FaultKind::Write)?;
        let inode = &mut s.inodes[self.ino];
        put(&mut inode.data, offset as usize, buf);
        inode.pending.push(Pending::Write {
            offset: offset as usize,
            bytes: buf.to_vec(),
        });
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        let s = self.state()?;
        Ok(s.inodes[self.ino].data.len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut s = self.state()?;
        s.mutate(FaultKind::Write)?;
        let inode = &mut s.inodes[self.ino];
        inode.data.resize(len as usize, 0);
        inode.pending.push(Pending::SetLen(len as usize));
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.sync(false)
    }

    fn sync_all(&self) -> io::Result<()> {
        self.sync(true)
    }
}

/// A tiny deterministic generator, so crash images depend only on the seed.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsynced_writes_may_vanish_synced_ones_stay() {
        let st = MemStorage::new();
        let f = st.open("a", true).unwrap();
        st.sync_dir().unwrap();
        f.write_at(b"durable", 0).unwrap();
        f.sync_data().unwrap();
        f.write_at(b"VOLATILE", 0).unwrap();
        let mut saw_lost = false;
        for seed in 0..32 {
            let img = st.crash_image(seed);
            let bytes = img.file_bytes("a").unwrap();
            assert!(bytes.len() >= 7);
            if &bytes[..7] == b"durable" {
                saw_lost = true;
            }
        }
        assert!(saw_lost, "some crash image must drop the unsynced write");
    }

    #[test]
    fn unsynced_create_may_vanish_and_power_cut_stops_io() {
        let st = MemStorage::new();
        st.open("a", true).unwrap();
        assert!((0..32).any(|s| !st.crash_image(s).exists("a").unwrap()));
        st.cut_power_after(1);
        assert!(st.open("b", true).is_err());
        assert!(st.is_power_off());
        assert!(st.exists("a").is_err());
    }

    #[test]
    fn set_len_is_durable_only_through_sync_all() {
        let st = MemStorage::new();
        let f = st.open("a", true).unwrap();
        st.sync_dir().unwrap();
        f.set_len(4096).unwrap();
        f.sync_data().unwrap();
        assert!((0..32).any(|s| st.crash_image(s).file_bytes("a").unwrap().is_empty()));
        f.sync_all().unwrap();
        assert!((0..32).all(|s| st.crash_image(s).file_bytes("a").unwrap().len() == 4096));
    }

    #[test]
    fn a_failed_sync_drops_the_data_it_should_have_saved() {
        let st = MemStorage::new();
        let f = st.open("a", true).unwrap();
        st.sync_dir().unwrap();
        f.write_at(b"lost", 0).unwrap();
        st.inject_fault(FaultKind::Sync, 1, 5);
        assert!(f.sync_data().is_err());
        // Still visible (the page cache), but a later successful sync does not save it.
        assert_eq!(st.file_bytes("a").unwrap(), b"lost");
        f.sync_data().unwrap();
        assert!((0..32).all(|s| st.crash_image(s).file_bytes("a").unwrap().is_empty()));
    }

    /// A rename kept in a crash image moves the file it renamed, even when the image lost
    /// the unlink of an older file of that name and the new file's creation: the name's
    /// old file never appears under the new name. (The crash checker's seed 329885: a log
    /// segment installed from a new spare file showed the zeros of the spare it replaced.)
    #[test]
    fn a_kept_rename_moves_the_file_it_renamed() {
        let st = MemStorage::new();
        let old = st.open("spare", true).unwrap();
        old.write_at(b"old", 0).unwrap();
        old.sync_all().unwrap();
        st.sync_dir().unwrap();
        st.remove("spare").unwrap();
        let new = st.open("spare", true).unwrap();
        new.write_at(b"new", 0).unwrap();
        new.sync_all().unwrap();
        st.rename("spare", "segment").unwrap();
        let mut renamed = 0;
        for seed in 0..256 {
            let img = st.crash_image(seed);
            if img.exists("segment").unwrap() {
                renamed += 1;
                assert_eq!(img.file_bytes("segment").unwrap(), b"new", "seed {seed}");
            }
        }
        assert!(renamed > 0, "some image keeps the rename");
    }

    #[test]
    fn directory_operations_may_survive_out_of_order() {
        let st = MemStorage::new();
        st.open("a", true).unwrap();
        st.open("b", true).unwrap();
        let only_b = (0..64).any(|s| {
            let img = st.crash_image(s);
            !img.exists("a").unwrap() && img.exists("b").unwrap()
        });
        assert!(
            only_b,
            "the later create may survive without the earlier one"
        );
    }

    #[test]
    fn a_restarted_process_sees_the_page_cache_and_the_old_one_is_dead() {
        let st = MemStorage::new();
        let _lock = st.lock().unwrap();
        let f = st.open("a", true).unwrap();
        f.write_at(b"unsynced", 0).unwrap();
        let next = st.restart_process();
        assert!(f.write_at(b"x", 0).is_err());
        assert!(st.exists("a").is_err());
        assert_eq!(next.file_bytes("a").unwrap(), b"unsynced");
        let _again = next.lock().expect("the old process's lock is released");
        next.end_process_after(1);
        assert!(next.open("b", true).is_err());
        assert!(next.exists("a").is_err());
        assert!(next.restart_process().exists("a").unwrap());
    }

    #[test]
    fn injected_fault_fires_once() {
        let st = MemStorage::new();
        let f = st.open("a", true).unwrap();
        st.inject_fault(FaultKind::Sync, 1, 5);
        assert_eq!(f.sync_data().unwrap_err().raw_os_error(), Some(5));
        f.sync_data().unwrap();
    }
}
