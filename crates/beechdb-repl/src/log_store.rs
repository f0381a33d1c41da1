//! A member's replicated log on disk: entries, the vote, the commit point and the marks of
//! truncation and purging, appended to one file as checksummed frames and replayed at
//! start.
//!
//! Owns: [`LogStore`] and its file (`raft/log` in a member's directory, `raft.log` on a
//! member's own storage); which appended entries create or remove databases and are not
//! yet applied ([`Pending`]); the notices to committers waiting for their entry to be
//! stored (ack policy NONE). May call: the engine's storage traits, so that the simulated
//! storage's power cuts and faults reach the log as they reach the environment. Invariants: a
//! frame is `[length u32][crc32c u32][payload]`, payload a bincode [`Frame`]; replay stops
//! at the first frame cut short, failing its checksum or of length zero (a region left
//! zeroed), and cuts the file there (a torn tail is a write that never completed, never
//! acknowledged); the vote, every membership entry and every entry whose commit asked this
//! member for SYNC reach disk (fsync) before openraft is told they are stored, so a vote is
//! never forgotten and an acknowledged durable commit survives power loss; after a sync of
//! the log fails, every later one fails (a failed fsync drops what any thread wrote before
//! it); a new log file's name is made durable (directory
//! sync) before anything is stored in it. A log that has grown well past what it keeps is
//! rewritten to a new file, synced, and renamed into place.
//!
//! Entries are kept in memory, but those whose frame is larger than [`KEEP_WHOLE_UP_TO`]:
//! of those only where the frame is in the file, read back (checksum and entry id checked)
//! when asked for, with the mutex released, so memory does not grow with the large
//! transactions the log holds and appends do not wait for those reads. The file is only
//! ever appended to (a rewrite makes a new one), so the bytes at a place read under the
//! mutex stay what they were in the file taken with it.
//!
//! Appends are group-committed: an append is written at once, and its completion (which
//! tells openraft the entries are stored) is handed to the flusher thread, which fsyncs
//! once for every append waiting and then completes them in order, so openraft goes on
//! appending while a sync is in flight and many commits share one fsync.
//!
//! This log is the member's own, beside the environment's write-ahead log (see
//! docs/architecture.md, Replication, for why they are not one).

use crate::commit::Event;
use crate::{Entry, LogId, NodeId, TypeConfig, Vote};
use beechdb::storage::{Storage, StorageFile};
use beechdb::{Error, Result};
use bincode::Options;
use openraft::storage::{IOFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::EntryPayload;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::ops::RangeBounds;
use std::sync::Arc;

/// The log file is rewritten when it holds this many more bytes than its live frames.
const REWRITE_SLACK: u64 = 64 << 20;
const FRAME_HDR: usize = 8;

/// One frame of the log file.
#[derive(Serialize, Deserialize)]
enum Frame {
    Entry(Entry),
    /// Entries from this index on are gone (a new master's log replaced them).
    Truncate(u64),
    /// Entries up to this one are gone (a snapshot holds them).
    Purge(LogId),
    Vote(Vote),
    /// The group has committed entries up to this one (not synced: a later start may find
    /// an older mark, and learns the rest from the master).
    Committed(LogId),
    /// The history this log belongs to: the number its group drew when it was formed.
    History(u64),
}

/// Entries whose frame is larger than this are not kept in memory: the log keeps where
/// the frame is in its file and reads it back when asked (a large transaction's parts).
const KEEP_WHOLE_UP_TO: u64 = 64 << 10;

/// An entry as the log keeps it: whole, or where its frame is in the file (and whether it
/// creates or removes databases).
enum Kept {
    /// The entry, and the length of its frame.
    Whole(Entry, u64),
    OnFile {
        log_id: LogId,
        at: u64,
        len: u64,
        ddl: bool,
    },
}

impl Kept {
    /// Entry `e`, whose frame is at byte `at` of the file and takes `len` bytes there.
    fn new(e: Entry, at: u64, len: u64) -> Kept {
        match len <= KEEP_WHOLE_UP_TO {
            true => Kept::Whole(e, len),
            false => Kept::OnFile {
                log_id: e.log_id,
                at,
                len,
                ddl: creates_or_removes(&e),
            },
        }
    }

    fn log_id(&self) -> LogId {
        match self {
            Kept::Whole(e, _) => e.log_id,
            Kept::OnFile { log_id, .. } => *log_id,
        }
    }

    fn ddl(&self) -> bool {
        match self {
            Kept::Whole(e, _) => creates_or_removes(e),
            Kept::OnFile { ddl, .. } => *ddl,
        }
    }

    /// The length of its frame.
    fn len(&self) -> u64 {
        match self {
            Kept::Whole(_, len) | Kept::OnFile { len, .. } => *len,
        }
    }
}

#[derive(Default)]
struct State {
    entries: BTreeMap<u64, Kept>,
    vote: Option<Vote>,
    last_purged: Option<LogId>,
    committed: Option<LogId>,
    history: Option<u64>,
}

impl State {
    /// Applies frame `f`, found at byte `at` of the file, where it takes `len` bytes.
    fn replay(&mut self, f: Frame, at: u64, len: u64) {
        match f {
            Frame::Entry(e) => {
                self.entries.insert(e.log_id.index, Kept::new(e, at, len));
            }
            Frame::Truncate(from) => self.truncate(from),
            Frame::Purge(upto) => self.purge(upto),
            Frame::Vote(v) => self.vote = Some(v),
            Frame::Committed(c) => self.committed = Some(c),
            Frame::History(h) => self.history = Some(h),
        }
    }

    /// Entries from index `from` on are gone.
    fn truncate(&mut self, from: u64) {
        drop(self.entries.split_off(&from));
    }

    /// Entries up to `upto` are gone.
    fn purge(&mut self, upto: LogId) {
        self.entries = self.entries.split_off(&(upto.index + 1));
        self.last_purged = Some(upto);
    }

    /// The frames that rebuild this state but its entries'.
    fn marks(&self) -> Vec<Frame> {
        let mut out = Vec::with_capacity(4);
        out.extend(self.vote.map(Frame::Vote));
        out.extend(self.last_purged.map(Frame::Purge));
        out.extend(self.committed.map(Frame::Committed));
        out.extend(self.history.map(Frame::History));
        out
    }
}

/// An append waiting for the flusher: its completion, whether it needs an fsync, the file
/// it went to, and the committers to tell when it is stored.
struct Waiting {
    done: IOFlushed<TypeConfig>,
    sync: bool,
    file: Arc<dyn StorageFile>,
    notices: Vec<(Stored, u64)>,
}

/// Where to tell a committer that its entry (at the index given with it) is stored.
pub(crate) struct Stored(pub std::sync::mpsc::Sender<Event>);

/// Entries that create or remove databases, appended and not yet applied, by index: a
/// commit that writes a database might be refused when it is applied after one of them.
#[derive(Default)]
pub(crate) struct Pending {
    ddl: Mutex<std::collections::BTreeSet<u64>>,
}

impl Pending {
    /// Entries up to `index` are applied.
    pub(crate) fn applied(&self, index: u64) {
        let mut ddl = self.ddl.lock();
        *ddl = ddl.split_off(&(index + 1));
    }
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
    /// Held across every sync of the log; the first failure, once one has failed.
    sync_failed: parking_lot::Mutex<Option<String>>,
}

impl Flusher {
    /// Syncs `file`, the log's. Syncs are serialised, and once one fails every later one
    /// fails too: a failed fsync drops the pending writes of every thread (the core's votes
    /// and truncations, the flusher's appends), so a later sync that succeeds proves
    /// nothing about what was written before it, and must acknowledge nothing.
    fn sync(&self, file: &dyn StorageFile) -> std::io::Result<()> {
        let mut failed = self.sync_failed.lock();
        if let Some(cause) = &*failed {
            return Err(std::io::Error::other(format!(
                "an earlier sync of the log failed: {cause}"
            )));
        }
        file.sync_data()
            .inspect_err(|e| *failed = Some(e.to_string()))
    }

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
            let mut synced: Vec<*const ()> = Vec::new();
            let mut outcome: std::io::Result<()> = Ok(());
            for w in batch.iter().filter(|w| w.sync) {
                let f = Arc::as_ptr(&w.file) as *const ();
                if !synced.contains(&f) && outcome.is_ok() {
                    outcome = self.sync(w.file.as_ref());
                    synced.push(f);
                }
            }
            for w in batch {
                let r = match &outcome {
                    Ok(()) => Ok(()),
                    Err(e) => Err(std::io::Error::new(e.kind(), e.to_string())),
                };
                if r.is_ok() {
                    tell(w.notices);
                }
                w.done.io_completed(r);
            }
        }
    }
}

/// Tells committers their entries are stored.
fn tell(notices: Vec<(Stored, u64)>) {
    for (Stored(to), index) in notices {
        let _ = to.send(Event::Stored(index));
    }
}

struct Inner {
    id: NodeId,
    /// The commit point changed since it was last written.
    committed_unwritten: bool,
    storage: Arc<dyn Storage>,
    name: String,
    file: Arc<dyn StorageFile>,
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
    pending: Arc<Pending>,
    /// Committers waiting for their entry to be stored, by the number in its request.
    notify: Arc<Mutex<HashMap<u64, Stored>>>,
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

/// The frame whose payload is `payload`, found at byte `at` with checksum `crc`: `None`
/// when the checksum fails, an error when it holds but the payload does not decode.
fn checked_frame(payload: &[u8], crc: u32, at: u64) -> Result<Option<Frame>> {
    if crc32c::crc32c(payload) != crc {
        return Ok(None);
    }
    let f = crate::state::bincode_opts(payload.len())
        .deserialize::<Frame>(payload)
        .map_err(|e| Error::Corrupt {
            page: None,
            detail: format!("the replication log's frame at byte {at} does not decode: {e}"),
        })?;
    Ok(Some(f))
}

/// Bytes read at a time when frames are read back in order.
const READ_CHUNK: usize = 4 << 20;

/// Reads the frames of a file of `len` bytes from its start through `read_at`, a chunk at a
/// time, handing each whole one to `each` with where it is and the bytes it takes; returns
/// the length the whole frames take. Reading stops at the first frame cut short or failing
/// its checksum (a torn tail), or at a frame of length zero, which this code never writes:
/// a file system may leave a region that was never synced zeroed after a power cut (a later
/// write's data reached the disk, this one's did not), and a zeroed header's checksum
/// would hold (the CRC of no bytes is zero). A frame whose checksum holds but whose
/// contents do not decode was written whole by something that is not this code: damage,
/// reported, never cut as a torn tail.
fn read_frames(
    len: u64,
    read_at: impl FnMut(&mut [u8], u64) -> std::io::Result<()>,
    mut each: impl FnMut(Frame, u64, u64),
) -> Result<u64> {
    let mut file = Window {
        read_at,
        len,
        buf: Vec::new(),
        at: 0,
    };
    let mut at = 0u64;
    while len - at >= FRAME_HDR as u64 {
        let h = file.bytes(at, FRAME_HDR)?;
        let n = u32::from_le_bytes(h[..4].try_into().unwrap()) as usize;
        let crc = u32::from_le_bytes(h[4..8].try_into().unwrap());
        if n == 0 || len - at - (FRAME_HDR as u64) < n as u64 {
            break;
        }
        let frame = file.bytes(at, FRAME_HDR + n)?;
        let Some(f) = checked_frame(&frame[FRAME_HDR..], crc, at)? else {
            break;
        };
        each(f, at, (FRAME_HDR + n) as u64);
        at += (FRAME_HDR + n) as u64;
    }
    Ok(at)
}

/// A file of `len` bytes read through `read_at` a chunk at a time: holds its bytes from `at`.
struct Window<R> {
    read_at: R,
    len: u64,
    buf: Vec<u8>,
    at: u64,
}

impl<R: FnMut(&mut [u8], u64) -> std::io::Result<()>> Window<R> {
    /// The file's `n` bytes from `from` (within its length).
    fn bytes(&mut self, from: u64, n: usize) -> Result<&[u8]> {
        if from < self.at || from + n as u64 > self.at + self.buf.len() as u64 {
            let take = (n.max(READ_CHUNK) as u64).min(self.len - from) as usize;
            self.buf.resize(take, 0);
            (self.read_at)(&mut self.buf, from)
                .map_err(|e| io(format!("reading the log at byte {from}"), e))?;
            self.at = from;
        }
        let start = (from - self.at) as usize;
        Ok(&self.buf[start..start + n])
    }
}

impl LogStore {
    /// Opens the log of member `id`, the file `name` of `storage` (created if missing),
    /// replaying it.
    pub fn open(storage: Arc<dyn Storage>, name: &str, id: NodeId) -> Result<LogStore> {
        let at = format!("{} in {}", name, storage.describe());
        let existed = storage
            .exists(name)
            .map_err(|e| io(format!("looking for {at}"), e))?;
        let file: Arc<dyn StorageFile> = storage
            .open(name, true)
            .map_err(|e| io(format!("opening {at}"), e))?
            .into();
        if !existed {
            storage
                .sync_dir()
                .map_err(|e| io(format!("creating {at}"), e))?;
        }
        let len = file.len().map_err(|e| io(format!("reading {at}"), e))?;
        let mut state = State::default();
        let whole = read_frames(
            len,
            |buf, off| file.read_at(buf, off),
            |f, at, n| state.replay(f, at, n),
        )?;
        if whole < len {
            // A torn tail: the write never completed, so nothing in it was acknowledged.
            file.set_len(whole)
                .and_then(|()| file.sync_all())
                .map_err(|e| io(format!("cutting the torn tail of {at}"), e))?;
        }
        let flusher = Arc::new(Flusher::default());
        let f = flusher.clone();
        std::thread::Builder::new()
            .name("beechdb-repl-flush".into())
            .spawn(move || f.run())
            .map_err(|e| io("starting the log flusher".into(), e))?;
        let pending = Pending::default();
        pending.ddl.lock().extend(
            state
                .entries
                .iter()
                .filter(|(_, k)| k.ddl())
                .map(|(&i, _)| i),
        );
        let mut inner = Inner {
            id,
            committed_unwritten: false,
            storage,
            name: name.to_string(),
            file,
            flusher,
            len: whole,
            live: 0,
            state,
        };
        inner.live = inner.frames_len();
        Ok(LogStore {
            inner: Arc::new(Mutex::new(inner)),
            pending: Arc::new(pending),
            notify: Default::default(),
        })
    }

    /// The entries that create or remove databases and are not yet applied.
    pub(crate) fn pending(&self) -> Arc<Pending> {
        self.pending.clone()
    }

    /// Whether some appended entry not yet applied creates or removes databases.
    pub(crate) fn ddl_pending(&self) -> bool {
        !self.pending.ddl.lock().is_empty()
    }

    /// Tells `to` when the entry whose request carries `notify` is stored here.
    pub(crate) fn await_stored(&self, notify: u64, to: Stored) {
        self.notify.lock().insert(notify, to);
    }

    /// The history this log belongs to, once it has one (see [`LogStore::adopt_history`]).
    pub(crate) fn history(&self) -> Option<u64> {
        self.inner.lock().state.history
    }

    /// Makes this log part of history `h` (durably), when it has none yet; an error if it
    /// has another: entries of two histories must never meet in one log.
    pub(crate) fn adopt_history(&self, h: u64) -> Result<()> {
        let mut inner = self.inner.lock();
        match inner.state.history {
            Some(mine) if mine == h => Ok(()),
            Some(mine) => Err(Error::InvalidArgument(format!(
                "this member's log belongs to the history of another group (formed as {mine:016x}, \
                 not {h:016x}): a member joins a group from an empty directory"
            ))),
            None => {
                inner.state.history = Some(h);
                inner
                    .write(&[Frame::History(h)], true)
                    .map(drop)
                    .map_err(|e| io("recording the group's history".into(), e))
            }
        }
    }

    /// Forgets the committer waiting under `notify`, if it is still waiting.
    pub(crate) fn forget(&self, notify: u64) {
        self.notify.lock().remove(&notify);
    }
}

/// What a member's log holds, read without changing it (for `beech stat` on a member's
/// directory, beside the running member or after it stopped).
#[derive(Debug, Clone, Serialize)]
pub struct LogSummary {
    /// The term of the member's vote, the member it voted for, and whether that vote was
    /// granted by a majority (a master's).
    pub vote_term: u64,
    pub voted_for: Option<NodeId>,
    pub vote_committed: bool,
    /// The last entry (term, index), the last entry known committed, the last removed.
    pub last: Option<(u64, u64)>,
    pub committed: Option<u64>,
    pub purged: Option<u64>,
    /// Entries kept, and the bytes of the file (its torn tail included, if any).
    pub entries: usize,
    pub file_bytes: u64,
    /// The history of the group the log belongs to.
    pub history: Option<u64>,
}

/// Reads the log file `path` without changing it.
pub fn summarize(path: &std::path::Path) -> Result<LogSummary> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path);
    let (file, len) = file
        .and_then(|f| f.metadata().map(|m| (f, m.len())))
        .map_err(|e| io(format!("reading {}", path.display()), e))?;
    let mut state = State::default();
    read_frames(
        len,
        |buf, off| file.read_exact_at(buf, off),
        |f, at, n| state.replay(f, at, n),
    )?;
    let vote = state.vote;
    Ok(LogSummary {
        vote_term: vote.map_or(0, |v| v.leader_id.term),
        voted_for: vote.map(|v| v.leader_id.voted_for),
        vote_committed: vote.is_some_and(|v| v.committed),
        last: state
            .entries
            .values()
            .next_back()
            .map(|k| (k.log_id().leader_id.term, k.log_id().index)),
        committed: state.committed.map(|c| c.index),
        purged: state.last_purged.map(|p| p.index),
        entries: state.entries.len(),
        file_bytes: len,
        history: state.history,
    })
}

/// Whether entry `e` holds a commit that creates or removes databases.
fn creates_or_removes(e: &Entry) -> bool {
    matches!(&e.payload, EntryPayload::Normal(r)
        if !matches!(r.staged, Some(crate::Stage::Part { .. })) && crate::commit::has_ddl(&r.commit))
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The flusher completes what is queued, then ends.
        self.flusher.queue.lock().closed = true;
        self.flusher.wake.notify_one();
    }
}

impl Inner {
    /// The bytes the live frames would take rewritten.
    fn frames_len(&self) -> u64 {
        let mut buf = Vec::new();
        for f in self.state.marks() {
            encode(&f, &mut buf);
        }
        buf.len() as u64 + self.state.entries.values().map(Kept::len).sum::<u64>()
    }

    /// Appends frames, reaching disk if `sync`; returns where each went and its length.
    fn write(&mut self, frames: &[Frame], sync: bool) -> std::io::Result<Vec<(u64, u64)>> {
        let mut buf = Vec::new();
        if std::mem::take(&mut self.committed_unwritten) {
            if let Some(c) = self.state.committed {
                encode(&Frame::Committed(c), &mut buf);
            }
        }
        let mut placed = Vec::with_capacity(frames.len());
        for f in frames {
            let start = buf.len();
            encode(f, &mut buf);
            placed.push((self.len + start as u64, (buf.len() - start) as u64));
        }
        self.file.write_at(&buf, self.len)?;
        if sync {
            self.flusher.sync(self.file.as_ref())?;
        }
        self.len += buf.len() as u64;
        self.live += buf.len() as u64;
        Ok(placed)
    }

    /// What reading the entries `range` keeps takes: those kept whole, cloned now; the
    /// places of those kept on file, read by [`Reads::read`] with the mutex released. (The
    /// file is only ever appended to; a rewrite makes a new one, so the bytes at a place
    /// taken here stay as they are in the file taken with it.)
    fn reads(&self, range: impl RangeBounds<u64>) -> Reads {
        let entries = self.state.entries.range(range).map(|(_, k)| match k {
            Kept::Whole(e, _) => ToRead::Whole(e.clone()),
            &Kept::OnFile {
                log_id, at, len, ..
            } => ToRead::OnFile(log_id, at, len),
        });
        Reads {
            entries: entries.collect(),
            file: self.file.clone(),
        }
    }

    /// Rewrites the file with only its live frames, when it has grown far past them.
    fn maybe_rewrite(&mut self) -> std::io::Result<()> {
        match self.len < self.live + REWRITE_SLACK {
            true => Ok(()),
            false => self.rewrite(),
        }
    }

    /// Rewrites the file with only its live frames, in chunks, entries kept on file copied
    /// from the old one.
    fn rewrite(&mut self) -> std::io::Result<()> {
        let tmp = format!("{}.rewrite", self.name);
        let f = self.storage.open(&tmp, true)?;
        f.set_len(0)?;
        let mut buf = Vec::new();
        for m in self.state.marks() {
            encode(&m, &mut buf);
        }
        // Where each entry kept on file goes; entries kept whole stay as they are.
        let (mut written, mut moved) = (0u64, Vec::new());
        for (&index, k) in &self.state.entries {
            match k {
                Kept::Whole(e, _) => encode(&Frame::Entry(e.clone()), &mut buf),
                &Kept::OnFile { at, len, .. } => {
                    moved.push((index, written + buf.len() as u64));
                    let start = buf.len();
                    buf.resize(start + len as usize, 0);
                    self.file.read_at(&mut buf[start..], at)?;
                }
            }
            if buf.len() >= READ_CHUNK {
                f.write_at(&buf, written)?;
                written += buf.len() as u64;
                buf.clear();
            }
        }
        f.write_at(&buf, written)?;
        written += buf.len() as u64;
        f.sync_all()?;
        drop(f);
        self.storage.rename(&tmp, &self.name)?;
        self.storage.sync_dir()?;
        self.file = self.storage.open(&self.name, false)?.into();
        for (index, to) in moved {
            if let Some(Kept::OnFile { at, .. }) = self.state.entries.get_mut(&index) {
                *at = to;
            }
        }
        self.len = written;
        self.live = written;
        Ok(())
    }
}

/// An entry to read: kept whole, or its frame's place in the file (entry id, byte, length).
enum ToRead {
    Whole(Entry),
    OnFile(LogId, u64, u64),
}

/// Entries to read, in order, and the file those kept there are in (see [`Inner::reads`]).
struct Reads {
    entries: Vec<ToRead>,
    file: Arc<dyn StorageFile>,
}

impl Reads {
    fn read(self) -> std::io::Result<Vec<Entry>> {
        let file = self.file;
        let from_file = |log_id: LogId, at: u64, len: u64| {
            let mut buf = vec![0u8; len as usize];
            file.read_at(&mut buf, at)?;
            let crc = u32::from_le_bytes(buf[4..8].try_into().expect("a frame has a header"));
            match checked_frame(&buf[FRAME_HDR..], crc, at) {
                Ok(Some(Frame::Entry(e))) if e.log_id == log_id => Ok(e),
                _ => Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "entry {} of the replication log, at byte {at}, is damaged",
                        log_id.index
                    ),
                )),
            }
        };
        let entries = self.entries.into_iter().map(|r| match r {
            ToRead::Whole(e) => Ok(e),
            ToRead::OnFile(log_id, at, len) => from_file(log_id, at, len),
        });
        entries.collect()
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> std::io::Result<Vec<Entry>> {
        // Entries kept on file (up to an entry's 32 MiB) are read with the mutex released:
        // appends and the core's other calls do not wait for them.
        let reads = self.inner.lock().reads(range);
        reads.read()
    }

    async fn read_vote(&mut self) -> std::io::Result<Option<Vote>> {
        Ok(self.inner.lock().state.vote)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> std::io::Result<LogState<TypeConfig>> {
        let inner = self.inner.lock();
        let last_purged = inner.state.last_purged;
        let last = inner.state.entries.values().next_back().map(Kept::log_id);
        Ok(LogState {
            last_purged_log_id: last_purged,
            last_log_id: last.or(last_purged),
        })
    }

    async fn get_log_reader(&mut self) -> LogStore {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> std::io::Result<()> {
        let mut inner = self.inner.lock();
        inner.state.vote = Some(*vote);
        inner.write(&[Frame::Vote(*vote)], true).map(drop)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> std::io::Result<()> {
        // Written with the next frames, not on its own: a mark older than the truth only
        // makes a restart wait for the master to say the rest.
        let mut inner = self.inner.lock();
        if committed.is_some() && inner.state.committed != committed {
            inner.state.committed = committed;
            inner.committed_unwritten = true;
        }
        Ok(())
    }

    async fn read_committed(&mut self) -> std::io::Result<Option<LogId>> {
        Ok(self.inner.lock().state.committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: IOFlushed<TypeConfig>,
    ) -> std::io::Result<()>
    where
        I: IntoIterator<Item = Entry> + Send,
    {
        let mut inner = self.inner.lock();
        let mut frames = Vec::new();
        let mut sync = false;
        let mut notices = Vec::new();
        for e in entries {
            let index = e.log_id.index;
            sync |= match &e.payload {
                EntryPayload::Normal(r) => {
                    if r.notify != 0 {
                        if let Some(to) = self.notify.lock().remove(&r.notify) {
                            notices.push((to, index));
                        }
                    }
                    match r.proposer == inner.id {
                        true => r.master_sync,
                        false => r.replica_sync,
                    }
                }
                EntryPayload::Blank | EntryPayload::Membership(_) => true,
            };
            if creates_or_removes(&e) {
                self.pending.ddl.lock().insert(index);
            }
            frames.push(Frame::Entry(e));
        }
        let placed = match inner.write(&frames, false) {
            Ok(placed) => placed,
            Err(e) => {
                callback.io_completed(Err(std::io::Error::new(e.kind(), e.to_string())));
                return Err(e);
            }
        };
        for (f, (at, len)) in frames.into_iter().zip(placed) {
            inner.state.replay(f, at, len);
        }
        let mut q = inner.flusher.queue.lock();
        if !sync && q.waiting.is_empty() && !q.busy {
            // Nothing to wait for, nothing ahead of it: stored already.
            drop(q);
            tell(notices);
            callback.io_completed(Ok(()));
            return Ok(());
        }
        q.waiting.push(Waiting {
            done: callback,
            sync,
            file: inner.file.clone(),
            notices,
        });
        drop(q);
        inner.flusher.wake.notify_one();
        Ok(())
    }

    async fn truncate_after(&mut self, last: Option<LogId>) -> std::io::Result<()> {
        let from = last.map_or(0, |l| l.index + 1);
        let mut inner = self.inner.lock();
        inner.state.truncate(from);
        drop(self.pending.ddl.lock().split_off(&from));
        inner.write(&[Frame::Truncate(from)], true).map(drop)
    }

    async fn purge(&mut self, log_id: LogId) -> std::io::Result<()> {
        let mut inner = self.inner.lock();
        inner.state.purge(log_id);
        // Not synced: entries found again after a crash are only kept longer.
        inner.write(&[Frame::Purge(log_id)], false)?;
        inner.live = inner.frames_len();
        inner.maybe_rewrite()
    }
}

#[cfg(test)]
mod tests {
    /// A commit serialized as one run of bytes (`serde_bytes`) is the very encoding it had
    /// byte by byte, in the log's options and the transport's: logs written before read
    /// alike.
    #[test]
    fn a_commit_is_encoded_as_it_was_byte_by_byte() {
        use bincode::Options;
        let commit: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        assert_eq!(
            bincode::serialize(serde_bytes::Bytes::new(&commit)).unwrap(),
            bincode::serialize(&commit).unwrap()
        );
        let opts = || crate::state::bincode_opts(1 << 20);
        assert_eq!(
            opts().serialize(serde_bytes::Bytes::new(&commit)).unwrap(),
            opts().serialize(&commit).unwrap()
        );
        let e = entry(3, 9);
        let bytes = bincode::serialize(&Frame::Entry(e.clone())).unwrap();
        let Frame::Entry(back) = bincode::deserialize(&bytes).unwrap() else {
            panic!("not an entry")
        };
        assert_eq!(format!("{back:?}"), format!("{e:?}"));
    }

    use super::*;

    /// A failed fsync drops what was written before it, so no later sync may succeed: the
    /// vote or entries it would then claim durable could be gone after a power cut.
    #[test]
    fn after_a_failed_sync_no_later_sync_of_the_log_succeeds() {
        use beechdb::storage::{FaultKind, MemStorage};
        let storage = MemStorage::new();
        let log = LogStore::open(Arc::new(storage.clone()), "raft.log", 1).unwrap();
        let mut inner = log.inner.lock();
        inner.write(&[Frame::Entry(entry(1, 1))], false).unwrap();
        storage.inject_fault(FaultKind::Sync, 1, 5);
        assert!(inner.write(&[Frame::Truncate(2)], true).is_err());
        let later = inner.write(&[Frame::Truncate(3)], true);
        assert!(later.is_err(), "a sync after a failed one succeeded");
        let flusher = inner.flusher.clone();
        drop(inner);
        let file = log.inner.lock().file.clone();
        assert!(flusher.sync(file.as_ref()).is_err(), "the flusher's too");
    }

    fn entry(term: u64, index: u64) -> Entry {
        Entry {
            log_id: LogId::new(crate::Term::new(term), index),
            payload: EntryPayload::Normal(crate::Request {
                commit: vec![index as u8; 10],
                master_sync: true,
                replica_sync: true,
                notify: 0,
                proposer: 1,
                staged: None,
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
        // The last frame torn in the middle.
        std::fs::write(dir.path().join("log"), &buf[..buf.len() - 3]).unwrap();
        let storage = Arc::new(beechdb::storage::OsStorage::new(dir.path()).unwrap());
        let store = LogStore::open(storage, "log", 1).unwrap();
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
        assert_eq!((frames.len(), whole), (1, first as u64));
        // A region a power cut left zeroed ends the log too, and what follows it: its
        // header's checksum holds (the CRC of no bytes is zero), its length is zero.
        let mut holed = buf[..first].to_vec();
        holed.extend_from_slice(&[0u8; 4096]);
        encode(&Frame::Entry(entry(1, 3)), &mut holed);
        let (frames, whole) = decode_all(&holed).unwrap();
        assert_eq!((frames.len(), whole), (1, first as u64));
        // Garbage of every length decodes to nothing, never a panic.
        for n in 0..64 {
            let junk: Vec<u8> = (0..n).map(|i| (i * 37 + 11) as u8).collect();
            assert!(decode_all(&junk).unwrap().0.is_empty());
        }
    }

    /// The frames of `bytes`, and the length the whole ones take.
    fn decode_all(bytes: &[u8]) -> Result<(Vec<Frame>, u64)> {
        let mut frames = Vec::new();
        let read = |buf: &mut [u8], at: u64| {
            buf.copy_from_slice(&bytes[at as usize..at as usize + buf.len()]);
            Ok(())
        };
        let whole = read_frames(bytes.len() as u64, read, |f, _, _| frames.push(f))?;
        Ok((frames, whole))
    }

    fn entry_of(term: u64, index: u64, bytes: usize) -> Entry {
        let mut e = entry(term, index);
        if let EntryPayload::Normal(r) = &mut e.payload {
            r.commit = (0..bytes).map(|i| (i as u64 * 31 + index) as u8).collect();
        }
        e
    }

    /// Appends `entries` as `append` does, without its completion.
    fn add(store: &LogStore, entries: Vec<Entry>) {
        let mut inner = store.inner.lock();
        let frames: Vec<Frame> = entries.into_iter().map(Frame::Entry).collect();
        let placed = inner.write(&frames, false).unwrap();
        for (f, (at, len)) in frames.into_iter().zip(placed) {
            inner.state.replay(f, at, len);
        }
    }

    /// Every entry `store` keeps, read back, as text; and how many it keeps on file only.
    fn read_back(store: &LogStore) -> (Vec<String>, usize) {
        let inner = store.inner.lock();
        let all = inner.reads(..).read().unwrap();
        let text = all.iter().map(|e| format!("{e:?}")).collect();
        let on_file = inner.state.entries.values();
        let on_file = on_file.filter(|k| matches!(k, Kept::OnFile { .. })).count();
        (text, on_file)
    }

    /// Entries larger than [`KEEP_WHOLE_UP_TO`] stay on file only and read back as they were
    /// appended, after a reopen, a truncation, a purge and a rewrite; one damaged on file is
    /// an error to its reader, never another entry.
    #[test]
    fn large_entries_stay_on_file_and_read_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(beechdb::storage::OsStorage::new(dir.path()).unwrap());
        let open = || LogStore::open(storage.clone(), "log", 1).unwrap();
        let store = open();
        let entries: Vec<Entry> = (1..=12)
            .map(|i| entry_of(1, i, if i % 3 == 0 { 300_000 } else { 100 }))
            .collect();
        let want: Vec<String> = entries.iter().map(|e| format!("{e:?}")).collect();
        add(&store, entries);
        assert_eq!(read_back(&store), (want.clone(), 4));
        drop(store);
        let store = open();
        assert_eq!(read_back(&store), (want.clone(), 4), "reopened");
        {
            let mut inner = store.inner.lock();
            inner.state.truncate(10);
            inner.write(&[Frame::Truncate(10)], false).unwrap();
            let upto = entry(1, 3).log_id;
            inner.state.purge(upto);
            inner.write(&[Frame::Purge(upto)], false).unwrap();
            let before = inner.len;
            inner.rewrite().unwrap();
            assert!(
                inner.len < before,
                "rewritten smaller: {} of {before}",
                inner.len
            );
        }
        let kept = want[3..9].to_vec();
        assert_eq!(read_back(&store), (kept.clone(), 2), "rewritten");
        drop(store);
        let store = open();
        assert_eq!(read_back(&store), (kept, 2), "rewritten and reopened");
        let inner = store.inner.lock();
        let Kept::OnFile { at, .. } = inner.state.entries[&6] else {
            panic!("entry 6 is large")
        };
        inner.file.write_at(&[0xff], at + 1000).unwrap();
        let err = inner.reads(6..=6).read().unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{err}");
    }

    /// Entries kept on file are read with the mutex released, from the places and the file
    /// taken under it: a rewrite (a new file, entries at new places) and appends in between
    /// change nothing of what is read.
    #[test]
    fn entries_read_after_the_mutex_is_released_are_those_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(beechdb::storage::OsStorage::new(dir.path()).unwrap());
        let store = LogStore::open(storage, "log", 1).unwrap();
        let entries: Vec<Entry> = (1..=8)
            .map(|i| entry_of(1, i, if i % 2 == 0 { 200_000 } else { 100 }))
            .collect();
        let want: Vec<String> = entries[2..].iter().map(|e| format!("{e:?}")).collect();
        add(&store, entries);
        let reads = store.inner.lock().reads(3..);
        {
            let mut inner = store.inner.lock();
            let upto = entry(1, 2).log_id;
            inner.state.purge(upto);
            inner.write(&[Frame::Purge(upto)], false).unwrap();
            inner.rewrite().unwrap();
        }
        add(&store, vec![entry_of(1, 9, 300_000)]);
        let read: Vec<String> = reads
            .read()
            .unwrap()
            .iter()
            .map(|e| format!("{e:?}"))
            .collect();
        assert_eq!(read, want);
        assert_eq!(read_back(&store).0[..6], want[..]);
    }
}
