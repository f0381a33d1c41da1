//! Reading the log: records in order from a record boundary, the record at any LSN, and
//! committed transactions with their operations in the order they were made.
//!
//! Owns: [`LogReader`]. May call: `storage`, `wal::record`. Invariants: a record is handed
//! out only if it is whole (framing and checksum) and its payload decodes; read in order,
//! each record must name the checksum of the one before it, except the first, whose
//! predecessor may be unknown. A transaction's operations come from its records, which
//! are found by following the `prev` LSNs back from its commit record, so memory holds
//! one record at a time, never a whole transaction.
//!
//! Bytes come from the segment files, and, for a live log, from a copy of the tail not yet
//! written ([`LogReader::with_tail`]).
//!
//! A transaction that spilled its writes ahead of its commit (`txn-data` records, in sorted
//! runs) is read by merging its runs ([`RunMerge`]): one record per run in memory, each run
//! read forward from its first record.

use super::record::{unframe, Framed, Kind, Op, Record, Runs, REC_HDR};
use super::{salt, segment_name, Segment, SEG_HDR};
use crate::config::Duplicates;
use crate::error::{Error, Result};
use crate::storage::{Storage, StorageFile};
use std::collections::BTreeMap;
use std::sync::Arc;

fn corrupt(detail: String) -> Error {
    Error::Corrupt { page: None, detail }
}

/// One segment file: its number, capacity and handle.
struct SegFile {
    no: u64,
    cap: u64,
    file: Box<dyn StorageFile>,
}

/// A record read from the log, its bytes owned.
pub(crate) struct LogRecord {
    /// Where it starts, and where the record after it starts.
    pub lsn: u64,
    pub end: u64,
    pub kind: Kind,
    pub prev_crc: u32,
    pub crc: u32,
    payload: Vec<u8>,
}

impl LogRecord {
    fn new(lsn: u64, f: &Framed) -> LogRecord {
        LogRecord {
            lsn,
            end: lsn + f.size(),
            kind: f.kind,
            prev_crc: f.prev_crc,
            crc: f.crc,
            payload: f.payload.to_vec(),
        }
    }

    /// The decoded record; checked when it was read.
    pub(crate) fn record(&self) -> Record<'_> {
        Record::decode(self.kind, &self.payload).expect("decoded when read")
    }

    /// For a `txn-data` record: its transaction, and its operations as `(count, offset of
    /// the first in the payload)`.
    fn txn_data(&self) -> Option<(u64, u32, usize)> {
        match self.record() {
            Record::TxnData { txn, ops, .. } => {
                let at = ops.bytes().as_ptr() as usize - self.payload.as_ptr() as usize;
                Some((txn, ops.len() as u32, at))
            }
            _ => None,
        }
    }
}

/// An operation of a committed transaction.
#[derive(Debug, Clone, Copy)]
pub(crate) enum TxnOp<'a> {
    Write(Op<'a>),
    CreateDb {
        db: u32,
        name: &'a str,
        dups: Duplicates,
    },
    RemoveDb {
        db: u32,
        name: &'a str,
    },
}

/// The operation of a database-creating record.
fn create_op<'a>(rec: &Record<'a>, lsn: u64) -> Result<TxnOp<'a>> {
    Ok(match *rec {
        Record::CreateDb { db, name, .. } => TxnOp::CreateDb {
            db,
            name,
            dups: Duplicates::None,
        },
        Record::CreateDbWithDups { db, name, dups, .. } => TxnOp::CreateDb {
            db,
            name,
            dups: u8::try_from(dups)
                .ok()
                .and_then(Duplicates::from_code)
                .ok_or_else(|| {
                    corrupt(format!("log record at LSN {lsn} names duplicates {dups}"))
                })?,
        },
        _ => unreachable!("called for database creations only"),
    })
}

/// A committed transaction found by [`LogReader::next_commit`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Committed {
    pub txn: u64,
    /// Its commit record's LSN, and the end of that record (the commit's LSN).
    pub lsn: u64,
    pub end: u64,
}

pub(crate) struct LogReader {
    salt: u32,
    /// Segments by start LSN.
    segments: Arc<BTreeMap<u64, SegFile>>,
    /// Bytes of the log from `window.0`, read from one segment.
    window: (u64, Vec<u8>),
    /// The live log's tail not yet written, from `tail.0`.
    tail: Option<Arc<(u64, Vec<u8>)>>,
    /// Where the next record in order starts, and the checksum of the one before it.
    pos: u64,
    chain: Option<u32>,
    /// Reading in order stops here (exclusive).
    limit: u64,
    /// Bytes read at a time.
    window_size: usize,
}

/// Bytes read from a segment at a time when reading in order; by each run of a merge, which
/// may read hundreds at once, less.
const WINDOW: usize = 1 << 20;
const RUN_WINDOW: usize = 128 << 10;

impl LogReader {
    /// A reader of the log in `storage` whose segment files are numbered `segments`, reading
    /// in order from the record at `from` (whose predecessor's checksum is `chain`, if
    /// known) up to `limit`.
    pub(crate) fn new(
        storage: &dyn Storage,
        env_id: u64,
        segments: impl IntoIterator<Item = u64>,
        (from, chain): (u64, Option<u32>),
        limit: u64,
    ) -> Result<LogReader> {
        let mut map = BTreeMap::new();
        for no in segments {
            let name = segment_name(no);
            let file = storage
                .open_read_only(&name)
                .map_err(|e| Error::io(format!("opening {name}"), e))?;
            let mut h = [0u8; SEG_HDR];
            file.read_at(&mut h, 0)
                .map_err(|e| Error::io(format!("reading {name}"), e))?;
            match Segment::decode_header(&h) {
                Some(h) if h.no == no && h.env_id == env_id => {
                    let cap = h.cap;
                    map.insert(h.start, SegFile { no, cap, file });
                }
                _ => return Err(corrupt(format!("log segment {name} has a bad header"))),
            }
        }
        Ok(LogReader {
            salt: salt(env_id),
            segments: Arc::new(map),
            window: (0, Vec::new()),
            tail: None,
            pos: from,
            chain,
            limit,
            window_size: WINDOW,
        })
    }

    /// Adds the live log's tail not yet written: `bytes` from LSN `start`.
    pub(crate) fn with_tail(mut self, start: u64, bytes: Vec<u8>) -> LogReader {
        self.tail = Some(Arc::new((start, bytes)));
        self
    }

    /// Another reader of the same log (sharing its files), reading in order from the record
    /// at `from`, whose predecessor is not known, in small windows (one of many).
    pub(crate) fn fork_at(&self, from: u64) -> LogReader {
        LogReader {
            salt: self.salt,
            segments: self.segments.clone(),
            window: (0, Vec::new()),
            tail: self.tail.clone(),
            pos: from,
            chain: None,
            limit: self.limit,
            window_size: RUN_WINDOW,
        }
    }

    /// `len` bytes of the log at `lsn`, if the log holds them; `None` past its end.
    fn bytes(&mut self, lsn: u64, len: usize) -> Result<Option<&[u8]>> {
        if let Some(t) = &self.tail {
            let (start, tail) = &**t;
            if lsn >= *start {
                let at = (lsn - start) as usize;
                return Ok(tail.get(at..at + len));
            }
        }
        let (wstart, wbytes) = &self.window;
        if lsn >= *wstart && lsn + len as u64 <= wstart + wbytes.len() as u64 && !wbytes.is_empty()
        {
            let at = (lsn - wstart) as usize;
            return Ok(Some(&self.window.1[at..at + len]));
        }
        let Some((&start, seg)) = self.segments.range(..=lsn).next_back() else {
            return Ok(None);
        };
        let seg_end = start + seg.cap;
        if lsn + len as u64 > seg_end {
            return Ok(None);
        }
        let want = (len.max(self.window_size) as u64).min(seg_end - lsn) as usize;
        let mut buf = vec![0u8; want];
        let name = segment_name(seg.no);
        seg.file
            .read_at(&mut buf, SEG_HDR as u64 + (lsn - start))
            .map_err(|e| Error::io(format!("reading {name}"), e))?;
        self.window = (lsn, buf);
        Ok(Some(&self.window.1[..len]))
    }

    /// The record at `lsn`, if a whole one starts there; damage if it does not decode.
    pub(crate) fn record_at(&mut self, lsn: u64) -> Result<Option<LogRecord>> {
        let salt = self.salt;
        let Some(head) = self.bytes(lsn, REC_HDR)? else {
            return Ok(None);
        };
        let len = u32::from_le_bytes(head[4..8].try_into().unwrap()) as usize;
        if len < REC_HDR {
            return Ok(None);
        }
        let Some(bytes) = self.bytes(lsn, super::align8(len))? else {
            return Ok(None);
        };
        let Some(f) = unframe(bytes, 0, lsn, salt) else {
            return Ok(None);
        };
        if Record::decode(f.kind, f.payload).is_none() {
            return Err(corrupt(format!(
                "log record at LSN {lsn} is whole but its {} payload does not decode",
                f.kind.name()
            )));
        }
        Ok(Some(LogRecord::new(lsn, &f)))
    }

    /// The next record in order, following segment ends; `None` at the end of the log (or
    /// at the limit). A whole record that does not follow the one before it is damage.
    pub(crate) fn next_record(&mut self) -> Result<Option<LogRecord>> {
        loop {
            if self.pos >= self.limit {
                return Ok(None);
            }
            let Some(rec) = self.record_at(self.pos)? else {
                return Ok(None);
            };
            if self.chain.is_some_and(|c| c != rec.prev_crc) {
                return Err(corrupt(format!(
                    "log record at LSN {} does not follow the record before it: the log \
                     comes from a copy of this environment with another history",
                    rec.lsn
                )));
            }
            self.chain = Some(rec.crc);
            self.pos = rec.end;
            if rec.kind == Kind::SegmentEnd {
                // The next segment starts where this record ends.
                if !self.segments.contains_key(&self.pos)
                    && self.tail.as_ref().is_none_or(|t| t.0 > self.pos)
                {
                    return Err(corrupt(format!(
                        "no log segment starts at LSN {}, where the one before it ends",
                        self.pos
                    )));
                }
                continue;
            }
            return Ok(Some(rec));
        }
    }

    /// The next committed transaction in order; `None` at the end of the log.
    pub(crate) fn next_commit(&mut self) -> Result<Option<Committed>> {
        while let Some(rec) = self.next_record()? {
            if let Record::Commit { txn, .. } | Record::CommitRuns { txn, .. } = rec.record() {
                return Ok(Some(Committed {
                    txn,
                    lsn: rec.lsn,
                    end: rec.end,
                }));
            }
        }
        Ok(None)
    }

    /// Calls `f` with every operation of committed transaction `c`, in the order the
    /// transaction made them: its earlier records (found through the `prev` LSNs) first,
    /// then its commit record.
    pub(crate) fn for_each_op(
        &mut self,
        c: &Committed,
        mut f: impl FnMut(TxnOp) -> Result<()>,
    ) -> Result<()> {
        let missing = |lsn: u64| part_missing(c, lsn);
        let commit = self.record_at(c.lsn)?.ok_or_else(|| missing(c.lsn))?;
        if let Record::CommitRuns { ddl, runs, .. } = commit.record() {
            return self.for_each_spilled_op(c, ddl, runs, f);
        }
        // The chain, newest first: one LSN per record, never the records themselves.
        let mut chain = vec![c.lsn];
        let mut at = c.lsn;
        loop {
            let rec = self.record_at(at)?.ok_or_else(|| missing(at))?;
            let Some((txn, prev)) = rec.record().txn() else {
                return Err(missing(at));
            };
            if txn != c.txn || (prev != 0 && prev >= at) {
                return Err(missing(at));
            }
            if prev == 0 {
                break;
            }
            chain.push(prev);
            at = prev;
        }
        for &lsn in chain.iter().rev() {
            let rec = self.record_at(lsn)?.ok_or_else(|| missing(lsn))?;
            match rec.record() {
                Record::Commit { ops, .. } | Record::TxnData { ops, .. } => {
                    for op in ops.iter() {
                        f(TxnOp::Write(op))?;
                    }
                }
                Record::CreateDb { .. } | Record::CreateDbWithDups { .. } => {
                    f(create_op(&rec.record(), lsn)?)?
                }
                Record::RemoveDb { db, name, .. } => f(TxnOp::RemoveDb { db, name })?,
                Record::Abort { .. }
                | Record::SegmentEnd {}
                | Record::Checkpoint { .. }
                | Record::CommitRuns { .. } => return Err(missing(lsn)),
            }
        }
        Ok(())
    }

    /// [`LogReader::for_each_op`] for a transaction that spilled: the `ddl` records before
    /// its commit record, in order, then the merge of its `runs` (but for writes to the
    /// databases it removed).
    fn for_each_spilled_op(
        &mut self,
        c: &Committed,
        ddl: u32,
        runs: Runs,
        mut f: impl FnMut(TxnOp) -> Result<()>,
    ) -> Result<()> {
        let mut chain = Vec::with_capacity(ddl as usize);
        let mut at = c.lsn;
        for _ in 0..ddl {
            let rec = self.record_at(at)?.ok_or_else(|| part_missing(c, at))?;
            match rec.record().txn() {
                Some((txn, prev)) if txn == c.txn && prev != 0 && prev < at => at = prev,
                _ => return Err(part_missing(c, at)),
            }
            chain.push(at);
        }
        // Writes to a database the transaction removed went with it.
        let mut removed = Vec::new();
        for &lsn in chain.iter().rev() {
            let rec = self.record_at(lsn)?.ok_or_else(|| part_missing(c, lsn))?;
            match rec.record() {
                Record::CreateDb { .. } | Record::CreateDbWithDups { .. } => {
                    f(create_op(&rec.record(), lsn)?)?
                }
                Record::RemoveDb { db, name, .. } => {
                    removed.push(db);
                    f(TxnOp::RemoveDb { db, name })?
                }
                _ => return Err(part_missing(c, lsn)),
            }
        }
        let mut merge = RunMerge::new(self, c.txn, runs.iter());
        while let Some(op) = merge.next()? {
            if !removed.contains(&op.db()) {
                f(TxnOp::Write(op))?;
            }
        }
        Ok(())
    }
}

fn part_missing(c: &Committed, lsn: u64) -> Error {
    corrupt(format!(
        "log record at LSN {lsn}, part of transaction {} (committed at LSN {}), is missing \
         or damaged",
        c.txn, c.lsn
    ))
}

/// One run of a spilled transaction, read forward a record at a time.
struct RunCursor {
    reader: LogReader,
    txn: u64,
    first: u64,
    /// Records of the run not yet read.
    records_left: u32,
    /// The current record's payload, where its next operation starts, and how many are left.
    payload: Vec<u8>,
    at: usize,
    ops_left: u32,
}

impl RunCursor {
    /// The operation the cursor is on; `None` when the run is done.
    fn current(&self) -> Option<Op<'_>> {
        if self.ops_left == 0 {
            return None;
        }
        let mut rest = &self.payload[self.at..];
        Some(Op::take(&mut rest).expect("checked when read"))
    }

    /// Moves to the next operation, reading the run's next record when this one is done.
    fn advance(&mut self) -> Result<()> {
        if self.ops_left > 0 {
            let mut rest = &self.payload[self.at..];
            Op::take(&mut rest).expect("checked when read");
            self.at = self.payload.len() - rest.len();
            self.ops_left -= 1;
        }
        while self.ops_left == 0 && self.records_left > 0 {
            let rec = loop {
                let rec = self.reader.next_record()?.ok_or_else(|| self.missing())?;
                match rec.txn_data() {
                    Some((txn, ..)) if txn == self.txn => break rec,
                    _ => continue,
                }
            };
            let (_, n, at) = rec.txn_data().expect("a txn-data record");
            self.records_left -= 1;
            (self.ops_left, self.at, self.payload) = (n, at, rec.payload);
        }
        Ok(())
    }

    fn missing(&self) -> Error {
        corrupt(format!(
            "the log ends inside the run of transaction {} that begins at LSN {} ({} \
             records missing)",
            self.txn, self.first, self.records_left
        ))
    }
}

/// The writes of a spilled transaction's runs merged into one sequence sorted by database
/// and key; where runs write the same key, the latest run's write wins.
pub(crate) struct RunMerge {
    runs: Vec<RunCursor>,
    /// Cursors the last operation handed out came from: advanced before the next.
    consumed: Vec<usize>,
    started: bool,
}

impl RunMerge {
    /// A merge of `runs` (`(first record's LSN, record count)`, oldest first) of
    /// transaction `txn`, read through forks of `reader`.
    pub(crate) fn new(
        reader: &LogReader,
        txn: u64,
        runs: impl Iterator<Item = (u64, u32)>,
    ) -> RunMerge {
        let runs = runs
            .map(|(first, records)| RunCursor {
                reader: reader.fork_at(first),
                txn,
                first,
                records_left: records,
                payload: Vec::new(),
                at: 0,
                ops_left: 0,
            })
            .collect();
        RunMerge {
            runs,
            consumed: Vec::new(),
            started: false,
        }
    }

    /// The next write in order, `None` when every run is done.
    pub(crate) fn next(&mut self) -> Result<Option<Op<'_>>> {
        if !self.started {
            self.started = true;
            self.consumed = (0..self.runs.len()).collect();
        }
        for &i in &self.consumed {
            self.runs[i].advance()?;
        }
        let mut least: Option<(u32, &[u8])> = None;
        for op in self.runs.iter().filter_map(RunCursor::current) {
            let k = (op.db(), op.key());
            if least.is_none_or(|l| k < l) {
                least = Some(k);
            }
        }
        let Some(least) = least else {
            self.consumed.clear();
            return Ok(None);
        };
        let at: Vec<usize> = (0..self.runs.len())
            .filter(|&i| {
                self.runs[i]
                    .current()
                    .is_some_and(|op| (op.db(), op.key()) == least)
            })
            .collect();
        let winner = *at.last().expect("the least key is in a run");
        self.consumed = at;
        Ok(self.runs[winner].current())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemStorage;
    use crate::{Config, Durability, Env};
    use std::collections::BTreeMap;
    use std::sync::Arc;

    /// What a committed transaction did, in the order the log gives it: databases created
    /// or removed, then writes by (database id, key).
    #[derive(Debug, Default, Clone, PartialEq)]
    struct Done {
        ddl: Vec<(bool, u32, String)>,
        writes: BTreeMap<(u32, Vec<u8>), Option<Vec<u8>>>,
    }

    fn read_from(env: &Env, from: u64) -> Vec<(u64, Done)> {
        let tx = env.shared().tx.as_ref().unwrap();
        let mut reader = tx.wal.as_ref().unwrap().reader(from, None).unwrap();
        let mut out = Vec::new();
        while let Some(c) = reader.next_commit().unwrap() {
            let mut done = Done::default();
            reader
                .for_each_op(&c, |op| {
                    match op {
                        TxnOp::Write(op) => {
                            let v = op.value().map(<[u8]>::to_vec);
                            done.writes.insert((op.db(), op.key().to_vec()), v);
                        }
                        TxnOp::CreateDb { db, name, .. } => done.ddl.push((true, db, name.into())),
                        TxnOp::RemoveDb { db, name } => done.ddl.push((false, db, name.into())),
                    }
                    Ok(())
                })
                .unwrap();
            out.push((c.end, done));
        }
        out
    }

    #[test]
    fn reading_from_any_commit_gives_the_commits_after_it() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let storage = MemStorage::new();
        let cfg = Config::new()
            .page_size(4096)
            .cache_size(64 << 10)
            .transactional(true)
            .log_segment_size(64 << 10)
            .checkpoint_log_bytes(1 << 40);
        let env = Env::open_with_storage(Arc::new(storage.clone()), cfg.clone()).unwrap();
        let start = env
            .shared()
            .tx
            .as_ref()
            .unwrap()
            .wal
            .as_ref()
            .unwrap()
            .end();
        let mut commits: Vec<(u64, Done)> = Vec::new();
        for i in 0..400u32 {
            let t = env.begin_txn().unwrap();
            let mut done = Done::default();
            let name = format!("db{}", i % 3);
            let db = match env.open_db(&name) {
                Ok(db) if rng.gen_ratio(1, 30) => {
                    t.remove_db(&name).unwrap();
                    done.ddl.push((false, db.id(), name.clone()));
                    None
                }
                Ok(db) => Some(db),
                Err(_) => {
                    let db = t.create_db(&name).unwrap();
                    done.ddl.push((true, db.id(), name.clone()));
                    Some(db)
                }
            };
            if let Some(db) = db {
                for _ in 0..rng.gen_range(1..6) {
                    let k = format!("k{}", rng.gen_range(0..40)).into_bytes();
                    if rng.gen_ratio(1, 4) {
                        t.delete(&db, &k).unwrap();
                        done.writes.insert((db.id(), k), None);
                    } else {
                        let v = vec![rng.gen::<u8>(); rng.gen_range(0..900)];
                        t.put(&db, &k, &v).unwrap();
                        done.writes.insert((db.id(), k), Some(v));
                    }
                }
            }
            let d = [
                Durability::Sync,
                Durability::WriteNoSync,
                Durability::NoSync,
            ][rng.gen_range(0..3)];
            let lsn = t.commit_with(d).unwrap();
            commits.push((lsn, done));
        }
        // From the start, and from the end of any commit (where the next record begins),
        // the reader gives exactly the commits after it: NOSYNC ones from the buffer.
        assert_eq!(read_from(&env, start), commits);
        for _ in 0..40 {
            let i = rng.gen_range(0..commits.len());
            assert_eq!(read_from(&env, commits[i].0), commits[i + 1..].to_vec());
        }
        // Recovery applies the same: every commit since the last checkpoint.
        env.shared()
            .tx
            .as_ref()
            .unwrap()
            .wal
            .as_ref()
            .unwrap()
            .flush_all()
            .unwrap();
        type Contents = Vec<(String, Vec<(Vec<u8>, Vec<u8>)>)>;
        let expected: Contents = env
            .db_names()
            .unwrap()
            .into_iter()
            .map(|n| {
                let db = env.open_db(&n).unwrap();
                (n, db.iter().map(|kv| kv.unwrap()).collect())
            })
            .collect();
        let storage = storage.restart_process();
        drop(env);
        let env = Env::open_with_storage(Arc::new(storage), cfg).unwrap();
        assert_eq!(env.recovered_commits(), commits.len() as u64);
        let got: Vec<_> = env
            .db_names()
            .unwrap()
            .into_iter()
            .map(|n| {
                let db = env.open_db(&n).unwrap();
                (n, db.iter().map(|kv| kv.unwrap()).collect())
            })
            .collect();
        assert_eq!(got, expected);
    }
}
