//! A member's replicated log on disk: entries, the vote, and the marks of truncation and
//! purging, appended to one file as checksummed frames and replayed at start. The commit
//! index is not kept: the environment's marker says what is applied, and a master says
//! what is committed.
//!
//! Owns: [`LogStore`] and its file `raft/log`. May call: the file system. Invariants: a
//! frame is `[length u32][crc32c u32][payload]`, payload a bincode [`Frame`]; replay stops
//! at the first frame cut short or failing its checksum and cuts the file there (a torn
//! tail is a write that never completed, never acknowledged); the vote and every membership
//! or `sync` entry reach disk (fsync) before openraft is told they are stored, so a vote is
//! never forgotten and an acknowledged durable commit survives power loss. A log that has
//! grown well past what it keeps is rewritten to a new file and renamed into place.
//!
//! Appends are group-committed: an append is written at once, and its completion (which
//! tells openraft the entries are stored) is handed to the flusher thread, which fsyncs
//! once for every append waiting and then completes them in order, so openraft goes on
//! appending while a sync is in flight and many commits share one fsync.
//!
//! This log is the member's own, beside the environment's write-ahead log; folding the two
//! into one (one fsync per replicated commit instead of two writes) is the planned next
//! step (see docs/architecture.md).

use crate::{NodeId, TypeConfig};
use beechdb::{Error, Result};
use bincode::Options;
use openraft::storage::{LogFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::{AnyError, Entry, EntryPayload, LogId, StorageError, StorageIOError, Vote};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The log file is rewritten when it holds this many more bytes than its live frames.
const REWRITE_SLACK: u64 = 64 << 20;
const FRAME_HDR: usize = 8;

/// One frame of the log file.
#[derive(Serialize, Deserialize)]
enum Frame {
    Entry(Entry<TypeConfig>),
    /// Entries from this index on are gone (a new master's log replaced them).
    Truncate(u64),
    /// Entries up to this one are gone (a snapshot holds them).
    Purge(LogId<NodeId>),
    Vote(Vote<NodeId>),
}

#[derive(Default)]
struct State {
    entries: BTreeMap<u64, Entry<TypeConfig>>,
    vote: Option<Vote<NodeId>>,
    last_purged: Option<LogId<NodeId>>,
}

impl State {
    fn replay(&mut self, f: Frame) {
        match f {
            Frame::Entry(e) => {
                self.entries.insert(e.log_id.index, e);
            }
            Frame::Truncate(from) => drop(self.entries.split_off(&from)),
            Frame::Purge(upto) => {
                self.entries = self.entries.split_off(&(upto.index + 1));
                self.last_purged = Some(upto);
            }
            Frame::Vote(v) => self.vote = Some(v),
        }
    }

    /// The frames that rebuild this state.
    fn frames(&self) -> Vec<Frame> {
        let mut out = Vec::with_capacity(self.entries.len() + 3);
        out.extend(self.vote.map(Frame::Vote));
        out.extend(self.last_purged.map(Frame::Purge));
        out.extend(self.entries.values().cloned().map(Frame::Entry));
        out
    }
}

/// An append waiting for the flusher: its completion, whether it needs an fsync, and the
/// file it went to.
struct Waiting {
    done: LogFlushed<TypeConfig>,
    sync: bool,
    file: Arc<File>,
}

/// The flusher's queue, and whether the log is gone.
#[derive(Default)]
struct Queue {
    waiting: Vec<Waiting>,
    /// The flusher holds a batch not yet completed: later appends complete after it.
    busy: bool,
    closed: bool,
}

#[derive(Default)]
struct Flusher {
    queue: parking_lot::Mutex<Queue>,
    wake: parking_lot::Condvar,
}

impl Flusher {
    /// Completes queued appends in order, one fsync per file for each batch that needs one.
    fn run(&self) {
        loop {
            let batch = {
                let mut q = self.queue.lock();
                q.busy = false;
                while q.waiting.is_empty() && !q.closed {
                    self.wake.wait(&mut q);
                }
                if q.waiting.is_empty() {
                    return;
                }
                q.busy = true;
                std::mem::take(&mut q.waiting)
            };
            let mut synced: Vec<*const File> = Vec::new();
            let mut outcome: std::io::Result<()> = Ok(());
            for w in batch.iter().filter(|w| w.sync) {
                let f = Arc::as_ptr(&w.file);
                if !synced.contains(&f) && outcome.is_ok() {
                    outcome = w.file.sync_data();
                    synced.push(f);
                }
            }
            for w in batch {
                let r = match &outcome {
                    Ok(()) => Ok(()),
                    Err(e) => Err(std::io::Error::new(e.kind(), e.to_string())),
                };
                w.done.log_io_completed(r);
            }
        }
    }
}

struct Inner {
    dir: PathBuf,
    file: Arc<File>,
    flusher: Arc<Flusher>,
    /// Bytes in the file, and bytes its live frames would take rewritten.
    len: u64,
    live: u64,
    state: State,
}

/// A member's replicated log (openraft's log storage), shared by its reader handles.
#[derive(Clone)]
pub(crate) struct LogStore {
    inner: Arc<Mutex<Inner>>,
}

fn io(context: String, e: std::io::Error) -> Error {
    Error::Io { context, source: e }
}

fn encode(f: &Frame, out: &mut Vec<u8>) {
    let payload = bincode::serialize(f).expect("log frames always serialize");
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
}

/// The whole frames at the start of `bytes`, and the length they take.
/// A frame whose checksum holds but whose contents do not decode was written whole by
/// something that is not this code: damage, reported, never cut as a torn tail.
fn decode_all(bytes: &[u8]) -> Result<(Vec<Frame>, usize)> {
    let mut frames = Vec::new();
    let mut at = 0;
    while bytes.len() - at >= FRAME_HDR {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let crc = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap());
        let Some(payload) = bytes.get(at + FRAME_HDR..at + FRAME_HDR + len) else {
            break;
        };
        if crc32c::crc32c(payload) != crc {
            break;
        }
        let f = crate::state::bincode_opts(len)
            .deserialize::<Frame>(payload)
            .map_err(|e| Error::Corrupt {
                page: None,
                detail: format!("the replication log's frame at byte {at} does not decode: {e}"),
            })?;
        frames.push(f);
        at += FRAME_HDR + len;
    }
    Ok((frames, at))
}

impl LogStore {
    /// Opens the log in directory `dir` (created if missing), replaying its file.
    pub fn open(dir: &Path) -> Result<LogStore> {
        std::fs::create_dir_all(dir).map_err(|e| io(format!("creating {}", dir.display()), e))?;
        let path = dir.join("log");
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(|e| io(format!("opening {}", path.display()), e))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| io(format!("reading {}", path.display()), e))?;
        let (frames, whole) = decode_all(&bytes)?;
        if whole < bytes.len() {
            // A torn tail: the write never completed, so nothing in it was acknowledged.
            file.set_len(whole as u64)
                .and_then(|()| file.sync_data())
                .map_err(|e| io(format!("cutting the torn tail of {}", path.display()), e))?;
        }
        let mut state = State::default();
        for f in frames {
            state.replay(f);
        }
        let flusher = Arc::new(Flusher::default());
        let f = flusher.clone();
        std::thread::Builder::new()
            .name("beechdb-repl-flush".into())
            .spawn(move || f.run())
            .map_err(|e| io("starting the log flusher".into(), e))?;
        let mut inner = Inner {
            dir: dir.to_path_buf(),
            file: Arc::new(file),
            flusher,
            len: whole as u64,
            live: 0,
            state,
        };
        inner.live = inner.frames_len();
        Ok(LogStore {
            inner: Arc::new(Mutex::new(inner)),
        })
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The flusher completes what is queued, then ends.
        self.flusher.queue.lock().closed = true;
        self.flusher.wake.notify_one();
    }
}

impl Inner {
    fn frames_len(&self) -> u64 {
        let mut buf = Vec::new();
        for f in self.state.frames() {
            encode(&f, &mut buf);
        }
        buf.len() as u64
    }

    /// Appends frames (already applied to the state), reaching disk if `sync`.
    fn write(&mut self, frames: &[Frame], sync: bool) -> std::io::Result<()> {
        let mut buf = Vec::new();
        for f in frames {
            encode(f, &mut buf);
        }
        (&*self.file).write_all(&buf)?;
        if sync {
            self.file.sync_data()?;
        }
        self.len += buf.len() as u64;
        self.live += buf.len() as u64;
        Ok(())
    }

    /// Rewrites the file with only its live frames, when it has grown far past them.
    fn maybe_rewrite(&mut self) -> std::io::Result<()> {
        if self.len < self.live + REWRITE_SLACK {
            return Ok(());
        }
        let mut buf = Vec::new();
        for f in self.state.frames() {
            encode(&f, &mut buf);
        }
        let (tmp, path) = (self.dir.join("log.rewrite"), self.dir.join("log"));
        let mut f = File::create(&tmp)?;
        f.write_all(&buf)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        File::open(&self.dir)?.sync_all()?;
        self.file = Arc::new(OpenOptions::new().append(true).read(true).open(&path)?);
        self.len = buf.len() as u64;
        self.live = self.len;
        Ok(())
    }
}

fn write_err(e: std::io::Error) -> StorageError<NodeId> {
    StorageIOError::write_logs(AnyError::new(&e)).into()
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> std::result::Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        let inner = self.inner.lock();
        Ok(inner
            .state
            .entries
            .range(range)
            .map(|(_, e)| e.clone())
            .collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(
        &mut self,
    ) -> std::result::Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let inner = self.inner.lock();
        let last_purged = inner.state.last_purged;
        let last = inner.state.entries.values().next_back().map(|e| e.log_id);
        Ok(LogState {
            last_purged_log_id: last_purged,
            last_log_id: last.or(last_purged),
        })
    }

    async fn get_log_reader(&mut self) -> LogStore {
        self.clone()
    }

    async fn save_vote(
        &mut self,
        vote: &Vote<NodeId>,
    ) -> std::result::Result<(), StorageError<NodeId>> {
        let mut inner = self.inner.lock();
        inner.state.vote = Some(*vote);
        inner
            .write(&[Frame::Vote(*vote)], true)
            .map_err(|e| StorageIOError::write_vote(AnyError::new(&e)).into())
    }

    async fn read_vote(
        &mut self,
    ) -> std::result::Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(self.inner.lock().state.vote)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> std::result::Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
    {
        let mut inner = self.inner.lock();
        let mut frames = Vec::new();
        let mut sync = false;
        for e in entries {
            sync |= match &e.payload {
                EntryPayload::Normal(r) => r.sync,
                EntryPayload::Blank | EntryPayload::Membership(_) => true,
            };
            inner.state.entries.insert(e.log_id.index, e.clone());
            frames.push(Frame::Entry(e));
        }
        if let Err(e) = inner.write(&frames, false) {
            callback.log_io_completed(Err(std::io::Error::new(e.kind(), e.to_string())));
            return Err(write_err(e));
        }
        let mut q = inner.flusher.queue.lock();
        if !sync && q.waiting.is_empty() && !q.busy {
            // Nothing to wait for, nothing ahead of it: stored already.
            callback.log_io_completed(Ok(()));
            return Ok(());
        }
        q.waiting.push(Waiting {
            done: callback,
            sync,
            file: inner.file.clone(),
        });
        drop(q);
        inner.flusher.wake.notify_one();
        Ok(())
    }

    async fn truncate(
        &mut self,
        log_id: LogId<NodeId>,
    ) -> std::result::Result<(), StorageError<NodeId>> {
        let mut inner = self.inner.lock();
        inner.state.replay(Frame::Truncate(log_id.index));
        inner
            .write(&[Frame::Truncate(log_id.index)], true)
            .map_err(write_err)
    }

    async fn purge(
        &mut self,
        log_id: LogId<NodeId>,
    ) -> std::result::Result<(), StorageError<NodeId>> {
        let mut inner = self.inner.lock();
        inner.state.replay(Frame::Purge(log_id));
        // Not synced: entries found again after a crash are only kept longer.
        inner
            .write(&[Frame::Purge(log_id)], false)
            .map_err(write_err)?;
        inner.live = inner.frames_len();
        inner.maybe_rewrite().map_err(write_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;

    fn entry(term: u64, index: u64) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
            payload: EntryPayload::Normal(crate::Request {
                commits: vec![vec![index as u8; 10]],
                sync: true,
            }),
        }
    }

    #[test]
    fn frames_replay_and_a_torn_tail_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let mut buf = Vec::new();
        for i in 1..=5 {
            encode(&Frame::Entry(entry(1, i)), &mut buf);
        }
        encode(&Frame::Truncate(4), &mut buf);
        encode(&Frame::Purge(entry(1, 1).log_id), &mut buf);
        let whole = buf.len();
        encode(&Frame::Entry(entry(2, 4)), &mut buf);
        std::fs::create_dir_all(dir.path()).unwrap();
        // The last frame torn in the middle.
        std::fs::write(dir.path().join("log"), &buf[..buf.len() - 3]).unwrap();
        let store = LogStore::open(dir.path()).unwrap();
        let inner = store.inner.lock();
        assert_eq!(
            inner.state.entries.keys().copied().collect::<Vec<_>>(),
            vec![2, 3]
        );
        assert_eq!(inner.state.last_purged.map(|l| l.index), Some(1));
        assert_eq!(
            std::fs::metadata(dir.path().join("log")).unwrap().len(),
            whole as u64
        );
    }

    #[test]
    fn a_damaged_frame_ends_the_log() {
        let mut buf = Vec::new();
        encode(&Frame::Entry(entry(1, 1)), &mut buf);
        let first = buf.len();
        encode(&Frame::Entry(entry(1, 2)), &mut buf);
        buf[first + FRAME_HDR + 2] ^= 0x40;
        let (frames, whole) = decode_all(&buf).unwrap();
        assert_eq!((frames.len(), whole), (1, first));
        // Garbage of every length decodes to nothing, never a panic.
        for n in 0..64 {
            let junk: Vec<u8> = (0..n).map(|i| (i * 37 + 11) as u8).collect();
            assert!(decode_all(&junk).unwrap().0.is_empty());
        }
    }
}
