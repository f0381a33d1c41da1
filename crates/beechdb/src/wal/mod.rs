//! The write-ahead log: segment files of checksummed redo records, a log buffer, and group
//! commit.
//!
//! Owns: log segments (`log.NNNNNNNNNN`), record framing, the buffer, durability waits, and
//! the recovery scan; and scratch logs ([`Wal::scratch`]: the same segments, never synced
//! nor recovered, where transactions spill when the environment keeps its log in memory).
//! May call: `storage`. Invariants:
//! - LSNs are byte positions in one continuous log stream; a record's header repeats its own
//!   LSN, so a stale record (from a reused file position) never passes for a live one;
//! - the buffer is written in LSN order, so whatever is durable is a prefix of the log;
//! - each record carries the durable LSN at the moment it was appended ("synced"): a valid
//!   record after an unreadable one that claims the unreadable one was already durable proves
//!   damage in the middle of the log, not a torn tail;
//! - after a failed write or sync the log is poisoned: nothing more is acknowledged; syncs
//!   are serialised, so no sync can succeed between a failed one and the poison;
//! - a segment is made durable before anything is written into the next one, so a log damaged
//!   in one segment with anything written in a later one is damage, never a torn tail;
//! - records carry the environment's id (a salt of their checksum) and the checksum of the
//!   record before them (a chain), so a segment of another environment, or of a copy of
//!   this one that has since diverged, is refused instead of replayed.
//!
//! Segment header (64 bytes): `magic "BeechLog" | version u32 (2) | flags u32 | segment
//! number u64 | start LSN u64 | capacity u64 | environment id u64 | crc32c of bytes 0..48 u32
//! | zero`. A segment is a zero-filled file, or a released segment's file reused
//! ([`RECYCLED`]): then the bytes past its records are the earlier segment's, whose headers
//! name LSNs older than this segment's start, so they never pass for its own records.
//! Records follow at byte 64; the record at LSN `l` sits at byte `64 + l - start`.
//! Records start 8-byte aligned (their framing and kinds: `record.rs`); a record's `crc` is
//! crc32c of bytes 4..len seeded with the crc32c of the environment id, and its `prev` the
//! `crc` of the record before it in the log (the chain; the meta page keeps the chain value
//! at the checkpoint's position). A new log begins at LSN [`FIRST_LSN`], so that no record
//! starts at 0 and a record's `prev` LSN field (its transaction's previous record) can use
//! 0 for "none".

pub(crate) mod reader;
pub(crate) mod record;
mod scan;

use reader::LogReader;
pub(crate) use record::{align8, Op, Ops, OpsBuilder, Record, RunsBuilder, REC_HDR};
pub(crate) use scan::{recover, LogStart};

use crate::config::Durability;
use crate::error::{Error, Result};
use crate::storage::page::{wr32, wr64};
use crate::storage::{MappedFile, Storage, StorageFile};
use crate::sync::{poll_until, Broadcast};
use parking_lot::Mutex;
use std::sync::atomic::{
    AtomicBool, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) const SEG_HDR: usize = 64;
/// The LSN at which a new environment's log begins.
pub(crate) const FIRST_LSN: u64 = 8;
const MAGIC: &[u8; 8] = b"BeechLog";
const VERSION: u32 = 2;
/// Segment header flag: the file was a released segment's, so the bytes after this
/// segment's records are not zeros but older records (see `scan.rs` for how recovery tells
/// them apart).
pub(crate) const RECYCLED: u32 = 1;
/// Flushes up to this size are copied into the segment's mapping (see `Segment::write_at`).
const MAPPED_WRITE_MAX: usize = 64 << 10;
/// A NOSYNC commit leaves its record in the buffer until this much has gathered.
const BUFFER_LIMIT: usize = 1 << 20;
/// Leaders gather followers only when an fsync takes at least this long.
const MIN_GATHER_FSYNC: Duration = Duration::from_micros(40);
/// Longest a group-commit leader waits for announced committers.
const GATHER_LIMIT: Duration = Duration::from_micros(200);
/// A committer waiting for a flush polls (yielding the CPU) for up to two average flushes
/// before it sleeps, when that is at most this long. Sleeping costs a context switch and a
/// wake-up, which on a virtual machine takes 10-30 us across CPUs: a large share of a fast
/// fsync, and paid once per waiter. Beside a slower wait it is negligible, and polling through
/// a long wait would only burn CPU.
const POLL_LIMIT: Duration = Duration::from_micros(400);

/// A committer's announcement (see [`Wal::arrive`]).
pub(crate) struct Arrival<'a> {
    wal: &'a Wal,
    appended: bool,
}

impl Drop for Arrival<'_> {
    fn drop(&mut self) {
        if !self.appended {
            self.wal.arriving.fetch_sub(1, Release);
        }
    }
}

/// A scratch log's files go with it: the last transaction that could read them let go of
/// it (best effort: the next open removes any left).
impl Drop for Wal {
    fn drop(&mut self) {
        if self.scratch {
            for name in self.storage.list().unwrap_or_default() {
                let _ = self.storage.remove(&name);
            }
        }
    }
}

pub(crate) fn segment_name(no: u64) -> String {
    format!("log.{no:010}")
}

/// A log segment. A segment the log has switched to is installed (its file created, or the
/// spare taken, given its header and name durably) by the first flush that reaches it, never
/// by the commit that switched: that commit holds the engine's lock.
pub(crate) struct Segment {
    pub no: u64,
    pub start: u64,
    pub cap: u64,
    file: std::sync::OnceLock<Box<dyn StorageFile>>,
    /// The file mapped for writing, made by the first write (`None`: the storage cannot,
    /// and writes go through the file).
    map: std::sync::OnceLock<Option<Box<dyn MappedFile>>>,
}

impl Segment {
    pub(crate) fn installed(no: u64, start: u64, cap: u64, file: Box<dyn StorageFile>) -> Segment {
        Segment {
            no,
            start,
            cap,
            file: file.into(),
            map: std::sync::OnceLock::new(),
        }
    }

    fn pending(no: u64, start: u64, cap: u64) -> Segment {
        Segment {
            no,
            start,
            cap,
            file: std::sync::OnceLock::new(),
            map: std::sync::OnceLock::new(),
        }
    }

    pub(crate) fn is_installed(&self) -> bool {
        self.file.get().is_some()
    }

    /// The segment's file; only installed segments are written or synced.
    fn file(&self) -> &dyn StorageFile {
        self.file.get().expect("an installed segment").as_ref()
    }

    /// Writes `data` at file offset `offset`. A small write that is not about to be synced
    /// (WRITE_NOSYNC flushes each commit's few records) goes into the mapping when the
    /// storage gives one: a copy instead of a system call. Through the file go large writes
    /// (a NOSYNC buffer), which cost less than a mapping's first-write page faults, and
    /// writes about to be synced, since syncing pages written through a mapping costs more
    /// (they are write-protected again, on every CPU).
    fn write_at(&self, data: &[u8], offset: u64, syncing: bool) -> std::io::Result<()> {
        if !syncing && data.len() <= MAPPED_WRITE_MAX {
            let len = SEG_HDR as u64 + self.cap;
            let map = self
                .map
                .get_or_init(|| self.file().map_for_writing(len).ok().flatten());
            if let Some(m) = map {
                return m.write(data, offset);
            }
        }
        self.file().write_at(data, offset)
    }

    fn end(&self) -> u64 {
        self.start + self.cap
    }
    fn offset(&self, lsn: u64) -> u64 {
        SEG_HDR as u64 + (lsn - self.start)
    }

    pub(crate) fn encode_header(
        no: u64,
        start: u64,
        cap: u64,
        env_id: u64,
        flags: u32,
    ) -> [u8; SEG_HDR] {
        let mut h = [0u8; SEG_HDR];
        h[..8].copy_from_slice(MAGIC);
        wr32(&mut h, 8, VERSION);
        wr32(&mut h, 12, flags);
        wr64(&mut h, 16, no);
        wr64(&mut h, 24, start);
        wr64(&mut h, 32, cap);
        wr64(&mut h, 40, env_id);
        let crc = crc32c::crc32c(&h[..48]);
        wr32(&mut h, 48, crc);
        h
    }

    /// A valid header's fields (unknown flags make it invalid).
    pub(crate) fn decode_header(h: &[u8]) -> Option<SegmentHeader> {
        use crate::storage::page::{rd32, rd64};
        if h.len() < SEG_HDR
            || &h[..8] != MAGIC
            || rd32(h, 8) != VERSION
            || rd32(h, 12) & !RECYCLED != 0
            || crc32c::crc32c(&h[..48]) != rd32(h, 48)
        {
            return None;
        }
        Some(SegmentHeader {
            no: rd64(h, 16),
            start: rd64(h, 24),
            cap: rd64(h, 32),
            env_id: rd64(h, 40),
            recycled: rd32(h, 12) & RECYCLED != 0,
        })
    }

    /// Creates, zero-fills (so later syncs change no file size or allocation) and makes
    /// durable a new segment. It is built under a temporary name and renamed into place, so
    /// a segment file that exists always has a valid header. Without `fill` (a scratch
    /// log's) the file is only given its length.
    pub(crate) fn create(
        storage: &dyn Storage,
        (no, start, cap, env_id): (u64, u64, u64, u64),
        fill: bool,
    ) -> Result<Segment> {
        let tmp = format!("{}.tmp", segment_name(no));
        let file = sized(storage, &tmp, cap, fill)
            .map_err(|e| Error::io(format!("creating log segment {}", segment_name(no)), e))?;
        Segment::install(storage, file, &tmp, (no, start, cap, env_id), 0)
    }

    /// Gives a synced file named `from`, zero-filled or (`flags` [`RECYCLED`]) a released
    /// segment's, its header `(number, start, capacity, environment id)` and its segment
    /// name, durably (the directory is synced).
    fn install(
        storage: &dyn Storage,
        file: Box<dyn StorageFile>,
        from: &str,
        (no, start, cap, env_id): (u64, u64, u64, u64),
        flags: u32,
    ) -> Result<Segment> {
        let name = segment_name(no);
        let io = |e| Error::io(format!("creating log segment {name}"), e);
        file.write_at(&Segment::encode_header(no, start, cap, env_id, flags), 0)
            .map_err(io)?;
        file.sync_data().map_err(io)?;
        storage.rename(from, &name).map_err(io)?;
        storage.sync_dir().map_err(io)?;
        Ok(Segment::installed(no, start, cap, file))
    }
}

/// A segment header's fields.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SegmentHeader {
    pub no: u64,
    pub start: u64,
    pub cap: u64,
    pub env_id: u64,
    /// The bytes after the segment's records are an earlier segment's ([`RECYCLED`]).
    pub recycled: bool,
}

/// A file `name` of a segment's size (header and `cap` bytes), zero-filled (with `fill`)
/// and synced.
fn sized(
    storage: &dyn Storage,
    name: &str,
    cap: u64,
    fill: bool,
) -> std::io::Result<Box<dyn StorageFile>> {
    let file = storage.open(name, true)?;
    file.set_len(0)?;
    let total = SEG_HDR as u64 + cap;
    if !fill {
        file.set_len(total)?;
        return Ok(file);
    }
    let zeros = vec![0u8; 1 << 20];
    let mut at = 0;
    while at < total {
        let n = (total - at).min(zeros.len() as u64) as usize;
        file.write_at(&zeros[..n], at)?;
        at += n as u64;
    }
    file.sync_all()?;
    Ok(file)
}

/// Prints every readable record of the log in `storage`, from the start of its oldest
/// segment, one per line (`LSN <tab> kind and fields`), as Berkeley DB's `db_printlog`
/// does. Reads only: works beside a process that has the environment open. Returns the
/// number of records printed; damage stops it with an error after what could be read.
pub fn print_log(storage: &dyn Storage, out: &mut dyn std::io::Write) -> Result<u64> {
    let file = storage
        .open(crate::files::DB_FILE, false)
        .map_err(|e| Error::io("opening the page file", e))?;
    let (meta, _, _) = crate::storage::format::read_metas(file.as_ref())?;
    let listing = crate::files::Listing::read(storage)?;
    let Some(&first) = listing.segments.iter().next() else {
        return Ok(0);
    };
    let mut h = [0u8; SEG_HDR];
    let name = segment_name(first);
    storage
        .open(&name, false)
        .and_then(|f| f.read_at(&mut h, 0))
        .map_err(|e| Error::io(format!("reading {name}"), e))?;
    let Some(SegmentHeader { start, .. }) = Segment::decode_header(&h) else {
        return Err(Error::Corrupt {
            page: None,
            detail: format!("log segment {name} has a bad header"),
        });
    };
    let segments = listing.segments.iter().copied();
    let mut reader = LogReader::new(storage, meta.env_id, segments, (start, None), u64::MAX)?;
    let mut n = 0;
    while let Some(rec) = reader.next_record()? {
        writeln!(out, "{}\t{}", rec.lsn, rec.record())
            .map_err(|e| Error::io("writing the log listing", e))?;
        n += 1;
    }
    Ok(n)
}

/// The next segment's file: zero-filled ahead of time by the background thread, or a
/// released segment's, reused.
pub(crate) const SPARE_SEGMENT: &str = "log.spare";

/// Released segments' files kept for reuse are renamed `log.reuse.NNNNNNNNNN` (their
/// number), so that nothing takes them for live segments; any found at open are removed.
pub(crate) const REUSE_PREFIX: &str = "log.reuse.";

fn reuse_name(no: u64) -> String {
    format!("{REUSE_PREFIX}{no:010}")
}

/// The file prepared for the next segment (`log.spare`).
struct Spare {
    file: Box<dyn StorageFile>,
    /// A released segment's file, not zero-filled.
    recycled: bool,
}

/// The files for the segments to come.
#[derive(Default)]
struct Spares {
    /// The next segment's (`log.spare`).
    ready: Option<Spare>,
    /// Numbers of released segments' files kept for reuse after it, oldest first.
    reusable: std::collections::VecDeque<u64>,
    /// At most this many are kept: about as many as a checkpoint interval of log fills, so
    /// that in a steady stream of commits no new segment is zero-filled.
    keep: usize,
}

/// The checksum seed of an environment's records.
pub(crate) fn salt(env_id: u64) -> u32 {
    crc32c::crc32c(&env_id.to_le_bytes())
}

struct Inner {
    next_lsn: u64,
    /// Checksum of the last record appended (the chain value at `next_lsn`).
    chain: u32,
    /// Bytes of `[buf_lsn, next_lsn)`, not yet handed to the OS.
    buf: Vec<u8>,
    buf_lsn: u64,
    spare: Vec<u8>,
    /// Live segments in order; the last is being appended to.
    segments: Vec<Arc<Segment>>,
    leader: bool,
    /// Commits one fsync window saw last time (flushed, plus appended during the fsync): the
    /// batch a leader expects to gather.
    expected: u64,
    /// Moving averages of the time a flush takes, in nanoseconds: with an fsync, and without.
    fsync_nanos: u64,
    write_nanos: u64,
    poisoned: Option<String>,
    /// The current segment has asked for a spare (reset when a segment begins).
    spare_asked: bool,
    /// The durable end when a background sync was last asked for: asked once per value.
    sync_asked_at: u64,
}

impl Inner {
    /// How long a committer waiting for a flush polls before it sleeps (see [`POLL_LIMIT`]).
    fn poll_budget(&self, sync: bool) -> Duration {
        let flush = if sync {
            self.fsync_nanos
        } else {
            self.write_nanos
        };
        let wait = Duration::from_nanos(flush * 2);
        if wait <= POLL_LIMIT {
            wait
        } else {
            Duration::ZERO
        }
    }
}

pub(crate) struct Wal {
    storage: Arc<dyn Storage>,
    segment_size: u64,
    env_id: u64,
    salt: u32,
    inner: Mutex<Inner>,
    /// The log end handed to the OS and the end made durable: changed only by a flush
    /// leader under the mutex, read by waiting committers without it.
    written: AtomicU64,
    flushed: AtomicU64,
    /// `Inner::poisoned` is set, readable without the mutex.
    failed: AtomicBool,
    /// Held across every sync of a segment's written bytes ([`Wal::sync_segment`]).
    syncs: Mutex<()>,
    /// Followers wait here until a flush ends.
    flushed_wake: Broadcast,
    /// Committers between `arrive` and their append, and commits in the buffer (changed under
    /// the mutex): what a gathering leader polls for.
    arriving: AtomicU64,
    buf_commits: AtomicU64,
    /// A file of a segment's size for the next segment (`log.spare`), so that the flush
    /// that reaches a new segment only writes a header and renames: a released segment's
    /// file, or else a zero-filled one. Held while it is being prepared, recycled or
    /// installed.
    spare: Mutex<Spares>,
    /// Set when the log wants background work: the next segment's spare (the current one
    /// is half full), or a sync (over a quarter segment is not yet durable).
    background_request: AtomicBool,
    /// Set (under `spare`) when the environment closes: no spare is prepared after that.
    closing: AtomicBool,
    /// Log kept for transactions that spilled writes ahead of their commit.
    retained: Mutex<Retained>,
    /// A scratch log ([`Wal::scratch`]).
    scratch: bool,
    pub stats: crate::stats::LogCounters,
}

/// Log positions readers have asked the log to keep: by id, `(from, until)`, where `until`
/// is `None` while the transaction is going, and, once it committed, its commit's end: the
/// hold ends with the first checkpoint at or after it (recovery from an earlier checkpoint
/// replays the commit, and reads its runs from `from`).
#[derive(Default)]
struct Retained {
    next_id: u64,
    holds: Vec<(u64, u64, Option<u64>)>,
}

impl Retained {
    /// The oldest position a checkpoint at `lsn` still needs kept.
    fn needed_from(&self, lsn: u64) -> u64 {
        self.holds
            .iter()
            .filter(|(_, _, until)| until.is_none_or(|u| u > lsn))
            .map(|&(_, from, _)| from)
            .fold(lsn, u64::min)
    }
}

impl Wal {
    /// A log continuing at `end`, with chain value `chain` (from recovery), in `segments`
    /// (every live one, oldest first; the last holds `end`), known durable up to `durable`:
    /// the checkpoint's position, since what recovery read after it came through the page
    /// cache and may never have reached the disk. Records claim no more than that until an
    /// fsync of this process proves more.
    pub(crate) fn new(
        storage: Arc<dyn Storage>,
        segment_size: u64,
        env_id: u64,
        segments: Vec<Segment>,
        (end, chain): (u64, u32),
        durable: u64,
    ) -> Wal {
        Wal {
            storage,
            segment_size,
            env_id,
            salt: salt(env_id),
            inner: Mutex::new(Inner {
                next_lsn: end,
                chain,
                buf: Vec::new(),
                buf_lsn: end,
                spare: Vec::new(),
                segments: segments.into_iter().map(Arc::new).collect(),
                leader: false,
                expected: 1,
                fsync_nanos: 0,
                write_nanos: 0,
                poisoned: None,
                spare_asked: false,
                sync_asked_at: u64::MAX,
            }),
            written: AtomicU64::new(end),
            flushed: AtomicU64::new(durable),
            failed: AtomicBool::new(false),
            syncs: Mutex::new(()),
            flushed_wake: Broadcast::new(),
            arriving: AtomicU64::new(0),
            buf_commits: AtomicU64::new(0),
            spare: Mutex::default(),
            background_request: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            retained: Mutex::default(),
            scratch: false,
            stats: Default::default(),
        }
    }

    /// A log that holds only the runs of transactions that spill their writes in an
    /// environment whose log is in memory: in `storage`, a namespace of scratch files
    /// (`storage::scratch`, never synced), segments given their length but not zero-filled,
    /// each removed as soon as no transaction holds it (there is no checkpoint of this log,
    /// and nothing is ever recovered from it).
    pub(crate) fn scratch(
        storage: Arc<dyn Storage>,
        segment_size: u64,
        env_id: u64,
    ) -> Result<Wal> {
        let first = Segment::create(
            storage.as_ref(),
            (1, FIRST_LSN, segment_size, env_id),
            false,
        )?;
        let mut wal = Wal::new(
            storage,
            segment_size,
            env_id,
            vec![first],
            (FIRST_LSN, 0),
            FIRST_LSN,
        );
        wal.scratch = true;
        Ok(wal)
    }

    /// A write or sync failed: nothing more is appended or acknowledged.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.failed.load(Acquire)
    }

    fn poisoned(cause: &str) -> Error {
        Error::Poisoned {
            cause: cause.to_string(),
        }
    }

    /// Announces a committer on its way to [`Wal::append`]: a flush leader waits a moment
    /// for announced committers so that one write and one fsync cover them all. The returned
    /// guard withdraws the announcement if the commit fails before appending.
    pub(crate) fn arrive(&self) -> Arrival<'_> {
        self.arriving.fetch_add(1, Release);
        Arrival {
            wal: self,
            appended: false,
        }
    }

    /// Appends `records` as one unit (no other record comes between them). Each record of
    /// a transaction after the first gets as `prev` the LSN of the one before it; the first
    /// keeps its own. Returns the end of the log after the last (a commit's LSN). A record
    /// too large for the log is refused before anything is appended.
    pub(crate) fn append(&self, arrival: &mut Arrival, records: &[Record]) -> Result<u64> {
        if records.len() > 1 {
            for r in records {
                record::framed_size(r)?;
            }
        }
        let mut g = self.inner.lock();
        if let Some(p) = &g.poisoned {
            return Err(Wal::poisoned(p));
        }
        // Written into each record: the durable end when it was appended (see the module doc).
        let synced = self.flushed.load(Relaxed);
        let mut last = 0;
        for (i, rec) in records.iter().enumerate() {
            let rec = if i == 0 { *rec } else { rec.with_prev(last) };
            last = self.push(&mut g, &rec, synced)?;
        }
        // Counted in the buffer before it stops being counted as arriving, so a gathering
        // leader never sees neither.
        self.buf_commits.fetch_add(1, Release);
        if !std::mem::replace(&mut arrival.appended, true) {
            self.arriving.fetch_sub(1, Release);
        }
        Ok(g.next_lsn)
    }

    /// Appends `records` of a transaction that logs ahead of its commit (`txn-data`), as one
    /// unit, the first keeping its `prev` and each later one naming the one before it.
    /// Returns the LSN of each. They count as no commit.
    pub(crate) fn append_ahead(&self, records: &[Record]) -> Result<Vec<u64>> {
        for r in records {
            record::framed_size(r)?;
        }
        let mut g = self.inner.lock();
        if let Some(p) = &g.poisoned {
            return Err(Wal::poisoned(p));
        }
        let synced = self.flushed.load(Relaxed);
        let mut lsns: Vec<u64> = Vec::with_capacity(records.len());
        for rec in records {
            let rec = match lsns.last() {
                Some(&prev) => rec.with_prev(prev),
                None => *rec,
            };
            lsns.push(self.push(&mut g, &rec, synced)?);
        }
        Ok(lsns)
    }

    /// Keeps the log from its end on (segments holding it are not released) until
    /// [`Wal::retain_until`] or [`Wal::unretain`]; returns the hold's id and where it
    /// begins. (The end is read under the holds' lock, so no release in between can take
    /// the segment it is in.)
    pub(crate) fn retain_from_end(&self) -> (u64, u64) {
        let mut r = self.retained.lock();
        let from = self.end();
        r.next_id += 1;
        let id = r.next_id;
        r.holds.push((id, from, None));
        (id, from)
    }

    /// Ends hold `id` at the first checkpoint at or after `lsn` (a scratch log's: now).
    pub(crate) fn retain_until(&self, id: u64, lsn: u64) {
        if self.scratch {
            return self.unretain(id);
        }
        let mut r = self.retained.lock();
        if let Some(h) = r.holds.iter_mut().find(|h| h.0 == id) {
            h.2 = Some(lsn);
        }
    }

    /// Ends hold `id` now. A scratch log then removes the segments no hold needs (a
    /// failure to is left to the next open, which removes every scratch file).
    pub(crate) fn unretain(&self, id: u64) {
        self.retained.lock().holds.retain(|h| h.0 != id);
        if self.scratch {
            let _ = self.release_before(self.end(), false);
        }
    }

    /// The segment a checkpoint at `lsn` needs kept from (its own, or an earlier one that
    /// a spilled transaction's writes are in).
    pub(crate) fn needed_segment(&self, lsn: u64) -> u64 {
        let from = self.retained.lock().needed_from(lsn);
        let g = self.inner.lock();
        g.segments
            .iter()
            .rev()
            .find(|s| s.start <= from)
            .or(g.segments.first())
            .expect("a log always has a segment")
            .no
    }

    /// Frames one record into the buffer, switching to the next segment first when it does
    /// not fit with room left for a segment end. Returns its LSN.
    fn push(&self, g: &mut Inner, rec: &Record, synced: u64) -> Result<u64> {
        let size = record::framed_size(rec)?;
        let cur = g
            .segments
            .last()
            .expect("a log always has a segment")
            .clone();
        if g.next_lsn + (size + REC_HDR) as u64 > cur.end() {
            let end_rec = g.next_lsn;
            self.frame(g, &Record::SegmentEnd {}, end_rec, synced)?;
            let start = g.next_lsn;
            let cap = self.segment_size.max((size + REC_HDR) as u64);
            // Installed by the flush that reaches it, outside the engine's lock.
            g.segments
                .push(Arc::new(Segment::pending(cur.no + 1, start, cap)));
            g.spare_asked = false;
        }
        let lsn = g.next_lsn;
        self.frame(g, rec, lsn, synced)?;
        let cur = g.segments.last().expect("a log always has a segment");
        // Once per segment, at half full (or at once after a switch): ask for the next.
        if !g.spare_asked && (g.next_lsn - cur.start) * 2 > cur.cap {
            g.spare_asked = true;
            self.background_request.store(true, Relaxed);
        }
        // Once per durable end, when over a quarter segment is not durable: ask for a sync,
        // so that the flush that switches segments (which must sync the old one first) is
        // not the one to write it all to disk.
        let durable = self.flushed.load(Relaxed);
        if g.next_lsn.saturating_sub(durable) > self.segment_size / 4 && g.sync_asked_at != durable
        {
            g.sync_asked_at = durable;
            self.background_request.store(true, Relaxed);
        }
        self.stats.records.fetch_add(1, Relaxed);
        self.stats.bytes.fetch_add(size as u64, Relaxed);
        Ok(lsn)
    }

    fn frame(&self, g: &mut Inner, rec: &Record, lsn: u64, synced: u64) -> Result<()> {
        let before = g.buf.len();
        g.chain = record::frame(&mut g.buf, rec, lsn, synced, g.chain, self.salt)?;
        g.next_lsn += (g.buf.len() - before) as u64;
        Ok(())
    }

    /// Waits until the commit ending at `end` is as durable as `mode` asks.
    pub(crate) fn wait(&self, end: u64, mode: Durability) -> Result<()> {
        match mode {
            Durability::Sync => self.flush(end, true),
            Durability::WriteNoSync => self.flush(end, false),
            Durability::NoSync => {
                let full = self.inner.lock().buf.len() >= BUFFER_LIMIT;
                if full {
                    self.flush(end, false)?;
                }
                Ok(())
            }
        }
    }

    /// The end of the log: where the next record goes.
    pub(crate) fn end(&self) -> u64 {
        self.inner.lock().next_lsn
    }

    /// Where a checkpoint taken now begins its log: `(end LSN, chain value there, segment
    /// holding it)`. The caller writes the log up to there ([`Wal::flush_to`]) before the
    /// checkpoint's meta page, outside the engine's lock (it may install a segment).
    pub(crate) fn position(&self) -> (u64, u32, u64) {
        let g = self.inner.lock();
        let seg = g.segments.last().expect("a log always has a segment").no;
        (g.next_lsn, g.chain, seg)
    }

    /// Writes the log up to `end` (no sync), installing the segments it reaches.
    pub(crate) fn flush_to(&self, end: u64) -> Result<()> {
        self.flush(end, false)
    }

    /// Writes everything appended so far (no sync).
    #[cfg(test)]
    pub(crate) fn flush_all(&self) -> Result<()> {
        let end = self.end();
        self.flush(end, false)
    }

    /// A reader of this log from the record at `from` (its predecessor's checksum `chain`,
    /// if known) to everything appended so far: the segments, and a copy of the tail not yet
    /// handed to the operating system. While a flush is writing, it reads what was handed
    /// over before it.
    pub(crate) fn reader(&self, from: u64, chain: Option<u32>) -> Result<LogReader> {
        let (segments, tail, limit) = {
            let g = self.inner.lock();
            let segments: Vec<u64> = g
                .segments
                .iter()
                .filter(|s| s.is_installed())
                .map(|s| s.no)
                .collect();
            let written = self.written.load(Acquire);
            if written == g.buf_lsn {
                (segments, Some((g.buf_lsn, g.buf.clone())), g.next_lsn)
            } else {
                (segments, None, written)
            }
        };
        let reader = LogReader::new(
            self.storage.as_ref(),
            self.env_id,
            segments,
            (from, chain),
            limit,
        )?;
        Ok(match tail {
            Some((start, bytes)) => reader.with_tail(start, bytes),
            None => reader,
        })
    }

    /// Segments wholly before `lsn` (a durable checkpoint's) are no longer needed by
    /// recovery, unless a spilled transaction's writes are in them (see [`Wal::retain`]):
    /// they are removed, or with `keep` left in place for archiving; up to a checkpoint
    /// interval's are kept for reuse instead ([`Wal::recycle`]), which spares the background
    /// thread the zero-filling of new files and their syncs. Neither needs a directory
    /// sync: a segment that comes back after a crash is removed again at open, and so is a
    /// file kept for reuse.
    pub(crate) fn release_before(&self, lsn: u64, keep: bool) -> Result<()> {
        let lsn = {
            let mut r = self.retained.lock();
            r.holds.retain(|h| h.2.is_none_or(|until| until > lsn));
            r.needed_from(lsn)
        };
        let released: Vec<Arc<Segment>> = {
            let mut g = self.inner.lock();
            let n = g
                .segments
                .iter()
                .skip(1)
                .take_while(|s| s.start <= lsn)
                .count();
            g.segments.drain(..n).collect()
        };
        for seg in released.iter().filter(|s| !keep && s.is_installed()) {
            if !self.recycle(seg) {
                let name = segment_name(seg.no);
                (self.storage.remove(&name))
                    .map_err(|e| Error::io(format!("removing {name}"), e))?;
            }
        }
        Ok(())
    }

    /// Keeps at most `n` released segments' files for reuse (see [`Wal::recycle`]).
    pub(crate) fn keep_reusable(self, n: usize) -> Wal {
        self.spare.lock().keep = n;
        self
    }

    /// Keeps released segment `seg`'s file for reuse, when it has a segment's size and
    /// fewer than the most kept are; says whether it did. Its records stay in it until
    /// overwritten: each names its own LSN, older than any a later segment's records will
    /// have, so none of them passes for one of the new segment's (whose header says the
    /// file is reused).
    fn recycle(&self, seg: &Segment) -> bool {
        let mut spares = self.spare.lock();
        let kept = spares.reusable.len() < spares.keep
            && !self.scratch
            && seg.cap == self.segment_size
            && !self.closing.load(Relaxed)
            // Else the segment stays where it was, to be removed.
            && (self.storage)
                .rename(&segment_name(seg.no), &reuse_name(seg.no))
                .is_ok();
        if kept {
            spares.reusable.push_back(seg.no);
            self.stats.segments_recycled.fetch_add(1, Relaxed);
        }
        kept
    }

    /// The oldest released segment's file kept for reuse, renamed `log.spare`, if any. One
    /// that cannot be renamed or opened is given up (removed, or else left for the next
    /// open to remove), and the next one tried.
    fn reuse(&self, spares: &mut Spares) -> Option<Spare> {
        while let Some(no) = spares.reusable.pop_front() {
            if self.storage.rename(&reuse_name(no), SPARE_SEGMENT).is_err() {
                let _ = self.storage.remove(&reuse_name(no));
                continue;
            }
            let Ok(file) = self.storage.open(SPARE_SEGMENT, false) else {
                let _ = self.storage.remove(SPARE_SEGMENT);
                continue;
            };
            // Written into soon: what has left the cache is read back ahead of the writes.
            file.will_need(SEG_HDR as u64, self.segment_size);
            return Some(Spare {
                file,
                recycled: true,
            });
        }
        None
    }

    /// Removes the released segments' files kept for reuse (at close: the directory keeps
    /// only what the environment needs).
    pub(crate) fn remove_reusable(&self) {
        let mut spares = self.spare.lock();
        for no in std::mem::take(&mut spares.reusable) {
            // Left behind, it is removed at the next open.
            let _ = self.storage.remove(&reuse_name(no));
        }
    }

    /// Waits for a spare being prepared, and prevents any more.
    pub(crate) fn stop_preparing(&self) {
        let _spare = self.spare.lock();
        self.closing.store(true, Relaxed);
    }

    /// Whether the log has asked for background work ([`Wal::background_work`]) since the
    /// last call.
    pub(crate) fn take_background_request(&self) -> bool {
        self.background_request.load(Relaxed) && self.background_request.swap(false, Relaxed)
    }

    /// Work kept off the commit path, run by the background thread when the log asks: the
    /// next segment's file, and a sync of the log written so far.
    pub(crate) fn background_work(&self) -> Result<()> {
        self.prepare_spare()?;
        self.sync_written()
    }

    /// Syncs the segment holding the log's written end, when every segment before it is
    /// durable, and records the log durable up to that end.
    fn sync_written(&self) -> Result<()> {
        let (seg, written) = {
            let g = self.inner.lock();
            let written = self.written.load(Acquire);
            // The segment holding `written` (or ending there) is installed: a flush installs
            // a segment before writing into it.
            let seg = g
                .segments
                .iter()
                .rev()
                .find(|s| s.start <= written && s.is_installed());
            match seg {
                Some(s) if self.flushed.load(Acquire) >= s.start => (s.clone(), written),
                _ => return Ok(()),
            }
        };
        if self.flushed.load(Acquire) >= written {
            return Ok(());
        }
        self.stats.background_syncs.fetch_add(1, Relaxed);
        if let Err(e) = self.sync_segment(&seg) {
            self.flushed_wake.wake_all();
            return Err(e);
        }
        self.flushed.fetch_max(written, Release);
        Ok(())
    }

    /// Makes the log durable to its end as recovery left it. The records after the durable
    /// checkpoint were read through the page cache, and a sync of this process proves
    /// nothing of them: an earlier process's failed fsync may have dropped them from the
    /// writes the disk will get, leaving them visible and never written. So each byte is
    /// written again, then synced, before anything is appended (into a later segment
    /// above all, which would otherwise reach the disk without them and make the log look
    /// damaged in the middle, where it is only torn at the end).
    pub(crate) fn rewrite_recovered(&self) -> Result<()> {
        const CHUNK: u64 = 1 << 20;
        let (segs, end) = {
            let g = self.inner.lock();
            (g.segments.clone(), g.next_lsn)
        };
        let from = self.flushed.load(Acquire);
        for (i, s) in segs.iter().enumerate() {
            // A segment's records end where the next begins (its capacity may reach past).
            let stop = segs.get(i + 1).map_or(s.end(), |n| n.start).min(end);
            let mut at = from.max(s.start);
            if at >= stop {
                continue;
            }
            let fail = |e| {
                Error::io(
                    format!("rewriting the recovered log in {}", segment_name(s.no)),
                    e,
                )
            };
            let mut buf = Vec::new();
            while at < stop {
                buf.resize((stop - at).min(CHUNK) as usize, 0);
                s.file().read_at(&mut buf, s.offset(at)).map_err(fail)?;
                s.file().write_at(&buf, s.offset(at)).map_err(fail)?;
                at += buf.len() as u64;
            }
            self.sync_segment(s)?;
        }
        self.flushed.fetch_max(end, Release);
        Ok(())
    }

    /// Syncs the bytes written into segment `s`. Syncs of the log are serialised, and one
    /// that fails poisons the log before the next begins: a failed fsync drops the pending
    /// writes of every thread (Linux marks the dirty pages clean), so a sync that succeeds
    /// after it says nothing of bytes written before the failure, and must acknowledge
    /// nothing. (The background sync failing while a SYNC commit's flush had written its
    /// bytes and not yet synced them lost that acknowledged commit in a power cut.)
    fn sync_segment(&self, s: &Segment) -> Result<()> {
        let _one = self.syncs.lock();
        if self.failed.load(Acquire) {
            let g = self.inner.lock();
            return Err(Wal::poisoned(
                g.poisoned.as_deref().unwrap_or("a sync failed"),
            ));
        }
        self.stats.fsyncs.fetch_add(1, Relaxed);
        s.file().sync_data().map_err(|e| {
            let e = Error::io(format!("syncing log segment {}", segment_name(s.no)), e);
            // What was written may never become durable.
            self.inner
                .lock()
                .poisoned
                .get_or_insert_with(|| e.to_string());
            self.failed.store(true, Release);
            e
        })
    }

    /// Prepares the next segment's file, unless one is ready (run off the commit path): a
    /// released segment's file kept for reuse, else a zero-filled one.
    fn prepare_spare(&self) -> Result<()> {
        let mut spares = self.spare.lock();
        if spares.ready.is_none() && !self.closing.load(Relaxed) {
            spares.ready = match self.reuse(&mut spares) {
                Some(spare) => Some(spare),
                None => Some(Spare {
                    file: sized(
                        self.storage.as_ref(),
                        SPARE_SEGMENT,
                        self.segment_size,
                        true,
                    )
                    .map_err(|e| Error::io("preparing the next log segment", e))?,
                    recycled: false,
                }),
            };
        }
        Ok(())
    }

    /// Installs `seg`: when the size fits, the prepared spare (waiting for one in
    /// preparation) or else a released segment's file kept for reuse; else a new file.
    fn install(&self, seg: &Segment) -> Result<()> {
        let header = (seg.no, seg.start, seg.cap, self.env_id);
        // Held until the spare is renamed: until then its name is `log.spare`, which the
        // background thread would otherwise open to prepare the next one.
        let mut slot = (seg.cap == self.segment_size && !self.scratch).then(|| self.spare.lock());
        let spare = match slot.as_mut() {
            Some(s) if s.ready.is_some() => s.ready.take(),
            Some(s) => self.reuse(s),
            None => None,
        };
        let installed = match spare {
            Some(Spare { file, recycled }) => {
                self.stats.segments_prepared.fetch_add(1, Relaxed);
                let flags = if recycled { RECYCLED } else { 0 };
                Segment::install(self.storage.as_ref(), file, SPARE_SEGMENT, header, flags)?
            }
            None => {
                self.stats.segments_created_inline.fetch_add(1, Relaxed);
                Segment::create(
                    self.storage.as_ref(),
                    (seg.no, seg.start, seg.cap, self.env_id),
                    !self.scratch,
                )?
            }
        };
        drop(slot);
        let file = installed.file.into_inner().expect("installed");
        assert!(seg.file.set(file).is_ok(), "installed by one flush leader");
        Ok(())
    }

    /// Leader/follower flush: the first waiter writes (and syncs) everything buffered for
    /// all waiters; the rest wait for it (polling briefly, then asleep on `flushed_wake`).
    fn flush(&self, end: u64, sync: bool) -> Result<()> {
        let mut g = self.inner.lock();
        loop {
            if let Some(p) = &g.poisoned {
                return Err(Wal::poisoned(p));
            }
            let covered = if sync { &self.flushed } else { &self.written };
            if covered.load(Acquire) >= end {
                return Ok(());
            }
            if g.leader {
                let seen = self.flushed_wake.seq();
                let poll = g.poll_budget(sync);
                drop(g);
                self.flushed_wake.wait(seen, poll);
                // Most wake-ups find their commit covered: return without the mutex.
                if covered.load(Acquire) >= end && !self.failed.load(Acquire) {
                    return Ok(());
                }
                g = self.inner.lock();
                continue;
            }
            g.leader = true;
            // Only worth it when an fsync is slow: a timed wait shorter than the kernel's
            // timer slack (50 us) would sleep far longer than the fsync it tries to share.
            let worth_waiting = g.fsync_nanos >= MIN_GATHER_FSYNC.as_nanos() as u64;
            let expected = g.expected;
            let gathered =
                || self.arriving.load(Acquire) == 0 && self.buf_commits.load(Acquire) >= expected;
            if sync && worth_waiting && !gathered() {
                // Let the committers the last window saw join this fsync. Waiting at most
                // half an fsync costs less than the extra fsync they would otherwise need.
                // The wait is short, so poll (see `POLL_LIMIT`), yielding to the committers.
                let limit = Duration::from_nanos(g.fsync_nanos / 2).min(GATHER_LIMIT);
                drop(g);
                let started = Instant::now();
                poll_until(limit, gathered);
                let waited = started.elapsed().as_nanos() as u64;
                self.stats.gather_nanos.fetch_add(waited, Relaxed);
                g = self.inner.lock();
            }
            let (from, to) = (g.buf_lsn, g.next_lsn);
            let spare = std::mem::take(&mut g.spare);
            let data = std::mem::replace(&mut g.buf, spare);
            g.buf_lsn = to;
            let commits = self.buf_commits.swap(0, Relaxed);
            let sync_from = self.flushed.load(Relaxed);
            let segs: Vec<Arc<Segment>> = g
                .segments
                .iter()
                .filter(|s| s.end() > from.min(sync_from) && s.start < to.max(from + 1))
                .cloned()
                .collect();
            // Every segment the log has reached, including one that only a segment end in
            // this flush leads to, exists durably before those bytes are written.
            let to_install: Vec<Arc<Segment>> = g
                .segments
                .iter()
                .filter(|s| s.start <= to && !s.is_installed())
                .cloned()
                .collect();
            drop(g);
            let started = Instant::now();
            let res = to_install
                .iter()
                .try_for_each(|s| self.install(s))
                .and_then(|()| self.write_out(&segs, (from, to), &data, sync_from, sync));
            if let Ok(durable) = res {
                // Stored before `written`, which a background sync reads as its limit.
                self.flushed.fetch_max(durable, Release);
            }
            let took = started.elapsed().as_nanos() as u64;
            self.stats.flush_nanos.fetch_add(took, Relaxed);
            g = self.inner.lock();
            g.leader = false;
            if res.is_ok() {
                let average = |avg: u64| if avg == 0 { took } else { (avg * 7 + took) / 8 };
                if sync {
                    g.fsync_nanos = average(g.fsync_nanos);
                    g.expected = (commits + self.buf_commits.load(Relaxed)).clamp(1, 256);
                } else {
                    g.write_nanos = average(g.write_nanos);
                }
            }
            let mut data = data;
            data.clear();
            g.spare = data;
            let res = match res {
                Ok(_) => {
                    self.written.store(to, Release);
                    if sync {
                        self.stats.group_commits.fetch_add(commits, Relaxed);
                        self.stats.max_group.fetch_max(commits, Relaxed);
                    }
                    Ok(())
                }
                Err(e) => {
                    g.poisoned = Some(e.to_string());
                    self.failed.store(true, Release);
                    Err(e)
                }
            };
            // Every follower wakes: those this flush covered return, and the first of the
            // rest to take the mutex leads the next flush.
            drop(g);
            self.flushed_wake.wake_all();
            // The leader appended its own commit before leading, so its flush covered it.
            return res;
        }
    }

    /// Writes `data` (the log from `from` to `to`) into the segments `segs` cover, all of
    /// them from the one holding `durable` (the log is durable before it), and syncs when
    /// `sync`. A segment is synced before anything is written into a later one. Returns
    /// where the log is durable up to now: `to` when `sync`, else the start of the last
    /// segment whose predecessors it synced (or `durable`).
    fn write_out(
        &self,
        segs: &[Arc<Segment>],
        (from, to): (u64, u64),
        data: &[u8],
        mut durable: u64,
        sync: bool,
    ) -> Result<u64> {
        let fail = |what: &str, no: u64, e| {
            Error::io(format!("{what} log segment {}", segment_name(no)), e)
        };
        if !data.is_empty() {
            self.stats.writes.fetch_add(1, Relaxed);
        }
        // `segs[..synced]` are durable: a segment whose successor starts at or before
        // `durable` (its capacity may reach past its segment-end record).
        let mut synced = segs
            .windows(2)
            .take_while(|w| w[1].start <= durable)
            .count();
        for (i, s) in segs.iter().enumerate() {
            let lo = from.max(s.start);
            let hi = to.min(s.end());
            if lo >= hi {
                continue;
            }
            if durable < s.start {
                segs[synced..i]
                    .iter()
                    .try_for_each(|e| self.sync_segment(e))?;
                synced = i;
                durable = s.start;
            }
            let part = &data[(lo - from) as usize..(hi - from) as usize];
            s.write_at(part, s.offset(lo), sync)
                .map_err(|e| fail("writing", s.no, e))?;
        }
        if sync {
            segs[synced..]
                .iter()
                .filter(|s| s.start < to)
                .try_for_each(|s| self.sync_segment(s))?;
            durable = to;
        }
        Ok(durable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_keeps_its_recycled_flag_and_unknown_flags_make_it_bad() {
        let decode = |flags| Segment::decode_header(&Segment::encode_header(3, 80, 64, 9, flags));
        assert!(!decode(0).unwrap().recycled);
        let h = decode(RECYCLED).unwrap();
        assert!(h.recycled && (h.no, h.start, h.cap, h.env_id) == (3, 80, 64, 9));
        assert!(decode(2).is_none() && decode(RECYCLED | 4).is_none());
    }
    use crate::storage::{FaultKind, HookStorage, MemStorage};

    /// The background sync fails between a SYNC flush's write and its own sync: the failed
    /// fsync drops the pending bytes, that flush's bytes among them, so its own sync, which
    /// then succeeds, must not acknowledge the commit. (Found by the crash checker, seed
    /// 39107, about one run in forty: an acknowledged SYNC commit lost in a power cut.)
    #[test]
    fn a_sync_after_another_thread_s_failed_sync_acknowledges_nothing() {
        // Set once the flush leader is about to write: the background sync then runs, and
        // fails, before that write; the leader's own sync comes after it.
        type Step = Box<dyn FnOnce() + Send>;
        let before_write: Arc<Mutex<Option<Step>>> = Default::default();
        let inner = MemStorage::new();
        let storage = HookStorage {
            inner: inner.clone(),
            hook: Arc::new({
                let before_write = before_write.clone();
                move |_: &str, _, _| {
                    if let Some(step) = before_write.lock().take() {
                        step();
                    }
                    Ok(())
                }
            }),
        };
        let first = Segment::create(&storage, (1, FIRST_LSN, 64 << 10, 7), true).unwrap();
        let wal = Arc::new(Wal::new(
            Arc::new(storage),
            64 << 10,
            7,
            vec![first],
            (FIRST_LSN, 0),
            FIRST_LSN,
        ));
        let append = |txn| {
            let mut arrival = wal.arrive();
            wal.append(&mut arrival, &[Record::Abort { txn, prev: 0 }])
                .unwrap()
        };
        // Written to the OS, not synced: the background sync has work to do.
        let written = append(1);
        wal.wait(written, Durability::WriteNoSync).unwrap();
        let end = append(2);
        let background = Arc::downgrade(&wal);
        *before_write.lock() = Some(Box::new(move || {
            inner.inject_fault(FaultKind::Sync, 1, libc::EIO);
            let wal = background.upgrade().unwrap();
            assert!(wal.sync_written().is_err(), "the injected fault");
        }));
        let acknowledged = wal.wait(end, Durability::Sync);
        assert!(
            matches!(acknowledged, Err(Error::Poisoned { .. })),
            "a SYNC commit whose bytes a failed fsync dropped was acknowledged: {acknowledged:?}"
        );
        assert!(before_write.lock().is_none(), "the hook ran");
    }
}
