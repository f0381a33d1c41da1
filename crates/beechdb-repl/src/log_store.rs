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
//! at the first frame cut short or failing its checksum and cuts the file there (a torn
//! tail is a write that never completed, never acknowledged); the vote, every membership
//! entry and every entry whose commit asked this member for SYNC reach disk (fsync) before
//! openraft is told they are stored, so a vote is never forgotten and an acknowledged
//! durable commit survives power loss; a new log file's name is made durable (directory
//! sync) before anything is stored in it. A log that has grown well past what it keeps is
//! rewritten to a new file, synced, and renamed into place.
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

#[derive(Default)]
struct State {
    entries: BTreeMap<u64, Entry>,
    vote: Option<Vote>,
    last_purged: Option<LogId>,
    committed: Option<LogId>,
    history: Option<u64>,
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
            Frame::Committed(c) => self.committed = Some(c),
            Frame::History(h) => self.history = Some(h),
        }
    }

    /// The frames that rebuild this state.
    fn frames(&self) -> Vec<Frame> {
        let mut out = Vec::with_capacity(self.entries.len() + 3);
        out.extend(self.vote.map(Frame::Vote));
        out.extend(self.last_purged.map(Frame::Purge));
        out.extend(self.committed.map(Frame::Committed));
        out.extend(self.history.map(Frame::History));
        out.extend(self.entries.values().cloned().map(Frame::Entry));
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
            let mut synced: Vec<*const ()> = Vec::new();
            let mut outcome: std::io::Result<()> = Ok(());
            for w in batch.iter().filter(|w| w.sync) {
                let f = Arc::as_ptr(&w.file) as *const ();
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
        let mut bytes = vec![0u8; len as usize];
        file.read_at(&mut bytes, 0)
            .map_err(|e| io(format!("reading {at}"), e))?;
        let (frames, whole) = decode_all(&bytes)?;
        if whole < bytes.len() {
            // A torn tail: the write never completed, so nothing in it was acknowledged.
            file.set_len(whole as u64)
                .and_then(|()| file.sync_all())
                .map_err(|e| io(format!("cutting the torn tail of {at}"), e))?;
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
        let pending = Pending::default();
        pending.ddl.lock().extend(
            state
                .entries
                .values()
                .filter(|e| creates_or_removes(e))
                .map(|e| e.log_id.index),
        );
        let mut inner = Inner {
            id,
            committed_unwritten: false,
            storage,
            name: name.to_string(),
            file,
            flusher,
            len: whole as u64,
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
    let bytes = std::fs::read(path).map_err(|e| io(format!("reading {}", path.display()), e))?;
    let mut state = State::default();
    for f in decode_all(&bytes)?.0 {
        state.replay(f);
    }
    let vote = state.vote;
    Ok(LogSummary {
        vote_term: vote.map_or(0, |v| v.leader_id.term),
        voted_for: vote.map(|v| v.leader_id.voted_for),
        vote_committed: vote.is_some_and(|v| v.committed),
        last: state
            .entries
            .values()
            .next_back()
            .map(|e| (e.log_id.leader_id.term, e.log_id.index)),
        committed: state.committed.map(|c| c.index),
        purged: state.last_purged.map(|p| p.index),
        entries: state.entries.len(),
        file_bytes: bytes.len() as u64,
        history: state.history,
    })
}

/// Whether entry `e` holds a commit that creates or removes databases.
fn creates_or_removes(e: &Entry) -> bool {
    matches!(&e.payload, EntryPayload::Normal(r) if crate::commit::has_ddl(&r.commit))
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
        if std::mem::take(&mut self.committed_unwritten) {
            if let Some(c) = self.state.committed {
                encode(&Frame::Committed(c), &mut buf);
            }
        }
        for f in frames {
            encode(f, &mut buf);
        }
        self.file.write_at(&buf, self.len)?;
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
        let tmp = format!("{}.rewrite", self.name);
        let f = self.storage.open(&tmp, true)?;
        f.set_len(0)?;
        f.write_at(&buf, 0)?;
        f.sync_all()?;
        drop(f);
        self.storage.rename(&tmp, &self.name)?;
        self.storage.sync_dir()?;
        self.file = self.storage.open(&self.name, false)?.into();
        self.len = buf.len() as u64;
        self.live = self.len;
        Ok(())
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> std::io::Result<Vec<Entry>> {
        let inner = self.inner.lock();
        Ok(inner
            .state
            .entries
            .range(range)
            .map(|(_, e)| e.clone())
            .collect())
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
        let last = inner.state.entries.values().next_back().map(|e| e.log_id);
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
        inner.write(&[Frame::Vote(*vote)], true)
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
            inner.state.entries.insert(index, e.clone());
            frames.push(Frame::Entry(e));
        }
        if let Err(e) = inner.write(&frames, false) {
            callback.io_completed(Err(std::io::Error::new(e.kind(), e.to_string())));
            return Err(e);
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
        inner.state.replay(Frame::Truncate(from));
        drop(self.pending.ddl.lock().split_off(&from));
        inner.write(&[Frame::Truncate(from)], true)
    }

    async fn purge(&mut self, log_id: LogId) -> std::io::Result<()> {
        let mut inner = self.inner.lock();
        inner.state.replay(Frame::Purge(log_id));
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
        assert_eq!((frames.len(), whole), (1, first));
        // Garbage of every length decodes to nothing, never a panic.
        for n in 0..64 {
            let junk: Vec<u8> = (0..n).map(|i| (i * 37 + 11) as u8).collect();
            assert!(decode_all(&junk).unwrap().0.is_empty());
        }
    }
}
