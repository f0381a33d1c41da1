//! A transaction's write set: the latest write of each key, in layers (one per live
//! savepoint), held in memory up to a budget and spilled to the log beyond it.
//!
//! Owns: [`WriteSet`]. May call: `wal` (appending `txn-data` records, reading them back).
//! Invariants:
//! - layer `i + 1` holds the writes made since savepoint `i`; within a layer, parts are in
//!   the order they were written, and a later part's write of a key overrides an earlier
//!   one's, as a later layer's overrides an earlier layer's;
//! - a spilled part is a run: `txn-data` records in the log, sorted by scoped key, each
//!   indexed here by its LSN and first key; its records are appended as one unit and written
//!   to the segment files before the run is read, and the log keeps them (a hold) until the
//!   transaction ends or a checkpoint covers its commit;
//! - memory counted in `mem_bytes` is that of the in-memory parts only.

use crate::error::Result;
use crate::stats::TxnCounters;
use crate::wal::reader::{LogReader, LogRecord, RunMerge};
use crate::wal::{Op, OpsBuilder, Record, Wal};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// Bytes of operations per `txn-data` record of a run.
const RECORD_BYTES: usize = 64 << 10;
/// Records a run appends between writes of the log buffer.
const FLUSH_EVERY: usize = 16;
/// What an entry of an in-memory part costs beyond its key and value (map node, vectors).
const ENTRY_OVERHEAD: usize = 64;
/// What an encoded operation takes beyond its scoped key and value (its kind and lengths).
const OP_HEADER: usize = 9;

/// A write: `Some(value)` puts, `None` deletes.
pub(crate) type Write = Option<Vec<u8>>;
/// Keys with writes (or values before a commit), in order.
pub(crate) type Entries = Vec<(Vec<u8>, Write)>;
/// The answer of a read capped in size: its entries, and the key it is exact up to
/// (included) when the source had more.
pub(crate) type Capped = (Entries, Option<Vec<u8>>);

enum Part {
    Mem(BTreeMap<Vec<u8>, Write>),
    Run(Run),
}

/// A spilled part: its records' LSNs and first keys, in key order, and its level: 0 when
/// spilled from memory, one more than theirs when merged from [`FAN_IN`] runs.
struct Run {
    records: Vec<(u64, Vec<u8>)>,
    level: u32,
}

/// Runs of one level a layer gathers before they are merged into one.
const FAN_IN: usize = 16;

/// The log behind the runs of a transaction that spilled.
struct Spill {
    /// The log its runs are in (kept: with the log in memory, a scratch log the
    /// environment may have replaced for later spills since).
    wal: Arc<Wal>,
    reader: LogReader,
    /// The log's hold on the runs (see [`Wal::retain`]), from the first run's first record.
    hold: u64,
    first: u64,
    /// LSN of the transaction's last record.
    prev: u64,
    /// The record last read, kept for nearby reads.
    last: Option<LogRecord>,
}

pub(crate) struct WriteSet {
    layers: Vec<Vec<Part>>,
    mem_bytes: usize,
    spill: Option<Spill>,
}

fn entry_size(key: &[u8], w: &Write) -> usize {
    key.len() + w.as_ref().map_or(0, Vec::len) + ENTRY_OVERHEAD
}

/// Calls `f` with each operation in the `txn-data` record `rec`, as (scoped key, write).
fn for_each_in(rec: &LogRecord, mut f: impl FnMut(Vec<u8>, Op) -> bool) {
    if let Record::TxnData { ops, .. } = rec.record() {
        for op in ops.iter() {
            if !f(super::scoped_key(op.db(), op.key()), op) {
                return;
            }
        }
    }
}

fn write_of(op: Op) -> Write {
    op.value().map(<[u8]>::to_vec)
}

impl Default for WriteSet {
    fn default() -> WriteSet {
        WriteSet {
            layers: vec![Vec::new()],
            mem_bytes: 0,
            spill: None,
        }
    }
}

impl WriteSet {
    pub(crate) fn is_empty(&self) -> bool {
        self.layers.iter().all(Vec::is_empty)
    }

    pub(crate) fn spilled(&self) -> bool {
        self.spill.is_some()
    }

    pub(crate) fn mem_bytes(&self) -> usize {
        self.mem_bytes
    }

    /// About the bytes the writes held in memory take encoded as a commit: each takes its
    /// scoped key, its value and [`OP_HEADER`] more (a key written in several layers is
    /// counted in each, so this is never less).
    pub(crate) fn commit_bytes(&self) -> usize {
        let per_write = ENTRY_OVERHEAD - OP_HEADER;
        self.mem_bytes
            .saturating_sub(self.mem_writes().saturating_mul(per_write))
    }

    /// Writes held in memory, a key counted once per layer that wrote it (so at least the
    /// number of keys the commit will write).
    pub(crate) fn mem_writes(&self) -> usize {
        let len = |p: &Part| match p {
            Part::Mem(map) => map.len(),
            Part::Run(_) => 0,
        };
        self.layers.iter().flatten().map(len).sum()
    }

    /// Records a write of scoped key `key` in the newest layer.
    pub(crate) fn insert(&mut self, key: Vec<u8>, w: Write) {
        let added = entry_size(&key, &w);
        let layer = self.layers.last_mut().expect("a base layer");
        if !matches!(layer.last(), Some(Part::Mem(_))) {
            layer.push(Part::Mem(BTreeMap::new()));
        }
        let Some(Part::Mem(map)) = layer.last_mut() else {
            unreachable!("pushed above")
        };
        let key_len = key.len();
        // One lookup: the entry replaced, if any, comes back from the insert.
        let replaced = map.insert(key, w).map_or(0, |old| {
            key_len + old.map_or(0, |v| v.len()) + ENTRY_OVERHEAD
        });
        self.mem_bytes = self.mem_bytes + added - replaced;
    }

    /// This transaction's latest write of scoped key `key`, if it wrote it.
    pub(crate) fn get(&mut self, key: &[u8]) -> Result<Option<Write>> {
        for li in (0..self.layers.len()).rev() {
            for pi in (0..self.layers[li].len()).rev() {
                let found = match &self.layers[li][pi] {
                    Part::Mem(map) => map.get(key).cloned(),
                    Part::Run(run) => {
                        let Some(lsn) = run.record_for(key) else {
                            continue;
                        };
                        let spill = self.spill.as_mut().expect("runs exist once spilled");
                        let rec = spill.read(lsn)?;
                        let mut found = None;
                        for_each_in(rec, |k, op| match k.as_slice().cmp(key) {
                            std::cmp::Ordering::Less => true,
                            std::cmp::Ordering::Equal => {
                                found = Some(write_of(op));
                                false
                            }
                            std::cmp::Ordering::Greater => false,
                        });
                        found
                    }
                };
                if found.is_some() {
                    return Ok(found);
                }
            }
        }
        Ok(None)
    }

    /// Starts a layer for a new savepoint.
    pub(crate) fn push_layer(&mut self) {
        self.layers.push(Vec::new());
    }

    /// Drops every write made since savepoint `mark` (layers after `mark + 1` go, layer
    /// `mark + 1` is emptied). Spilled runs dropped stay in the log, unreferenced.
    pub(crate) fn rollback_to(&mut self, mark: usize) {
        self.layers.truncate(mark + 2);
        let dropped = std::mem::take(&mut self.layers[mark + 1]);
        self.forget(dropped);
    }

    /// Merges layers after savepoint `mark` into the one before it (savepoint `mark` and the
    /// ones after it are released).
    pub(crate) fn release(&mut self, mark: usize) {
        for upper in self.layers.split_off(mark + 1) {
            for part in upper {
                self.append_part(mark, part);
            }
        }
    }

    /// Appends `part` to layer `li`, folding it into an in-memory part before it.
    fn append_part(&mut self, li: usize, part: Part) {
        let layer = &mut self.layers[li];
        match (layer.last_mut(), part) {
            (Some(Part::Mem(lower)), Part::Mem(upper)) => {
                for (k, w) in upper {
                    if let Some(old) = lower.get(&k) {
                        // Two entries of the key were counted; one is left.
                        self.mem_bytes -= entry_size(&k, old);
                    }
                    lower.insert(k, w);
                }
            }
            (_, part) => layer.push(part),
        }
    }

    fn forget(&mut self, parts: Vec<Part>) {
        for p in parts {
            if let Part::Mem(map) = p {
                self.mem_bytes -= map.iter().map(|(k, w)| entry_size(k, w)).sum::<usize>();
            }
        }
    }

    /// Writes every in-memory part to the log as a run of transaction `txn`, leaving none
    /// in memory, then merges runs where a layer has gathered [`FAN_IN`] of one size (so a
    /// commit's merge reads few runs at once: about `FAN_IN` per size, sizes growing by
    /// `FAN_IN` each). The records are written to the segment files (not synced) before this
    /// returns, so that reading them back needs no copy of the log's buffer. The first
    /// spill writes to the log `log` gives; later ones to the same log.
    pub(crate) fn spill(
        &mut self,
        log: impl FnOnce() -> Result<Arc<Wal>>,
        txn: u64,
        stats: &TxnCounters,
    ) -> Result<()> {
        self.mem_bytes = 0;
        let has_mem = |p: &Part| matches!(p, Part::Mem(m) if !m.is_empty());
        if !self.layers.iter().flatten().any(has_mem) {
            return Ok(());
        }
        stats.spills.fetch_add(1, Relaxed);
        let log = match &self.spill {
            Some(s) => s.wal.clone(),
            None => log()?,
        };
        let wal = log.as_ref();
        if self.spill.is_none() {
            // Held before anything is appended, so that no checkpoint releases it first.
            let (hold, first) = wal.retain_from_end();
            let reader = wal
                .reader(first, None)
                .inspect_err(|_| wal.unretain(hold))?;
            self.spill = Some(Spill {
                wal: log.clone(),
                reader,
                hold,
                first,
                prev: 0,
                last: None,
            });
        }
        let spill = self.spill.as_mut().expect("set above");
        for layer in &mut self.layers {
            for part in layer.iter_mut() {
                let Part::Mem(map) = part else { continue };
                if map.is_empty() {
                    continue;
                }
                let mut w = RunWriter::new(wal, txn, spill.prev);
                for (k, v) in map.iter() {
                    w.push(k, v.as_deref())?;
                }
                let run = w.finish(0)?;
                spill.prev = run.last();
                *part = Part::Run(run);
            }
            layer.retain(|p| !matches!(p, Part::Mem(m) if m.is_empty()));
        }
        self.settle(wal)?;
        for li in 0..self.layers.len() {
            while let Some(level) = self.mergeable(li) {
                let layer = &mut self.layers[li];
                let group: Vec<(u64, u32)> = layer
                    .drain(layer.len() - FAN_IN..)
                    .map(|p| match p {
                        Part::Run(r) => (r.records[0].0, r.records.len() as u32),
                        Part::Mem(_) => unreachable!("checked by mergeable"),
                    })
                    .collect();
                let spill = self.spill.as_mut().expect("spilled");
                let mut merge = RunMerge::new(&spill.reader, txn, group.into_iter());
                let mut w = RunWriter::new(wal, txn, spill.prev);
                while let Some(op) = merge.next()? {
                    w.push(&super::scoped_key(op.db(), op.key()), op.value())?;
                }
                let run = w.finish(level + 1)?;
                stats.run_merges.fetch_add(1, Relaxed);
                spill.prev = run.last();
                self.layers[li].push(Part::Run(run));
                self.settle(wal)?;
            }
        }
        Ok(())
    }

    /// The level of the last [`FAN_IN`] parts of layer `li`, if they are runs of one level.
    fn mergeable(&self, li: usize) -> Option<u32> {
        let layer = &self.layers[li];
        let tail = layer.get(layer.len().checked_sub(FAN_IN)?..)?;
        let level = |p: &Part| match p {
            Part::Run(r) => Some(r.level),
            Part::Mem(_) => None,
        };
        let first = level(&tail[0])?;
        tail.iter()
            .all(|p| level(p) == Some(first))
            .then_some(first)
    }

    /// Writes what was appended to the segment files and reopens the reader on them.
    fn settle(&mut self, wal: &Wal) -> Result<()> {
        wal.flush_to(wal.end())?;
        let spill = self.spill.as_mut().expect("spilled");
        spill.reader = wal.reader(spill.first, None)?;
        spill.last = None;
        Ok(())
    }

    /// The LSN of the transaction's last `txn-data` record (0: none).
    pub(crate) fn last_lsn(&self) -> u64 {
        self.spill.as_ref().map_or(0, |s| s.prev)
    }

    /// For a transaction that spilled: every part spilled (see [`WriteSet::spill`]), then
    /// its runs as `(first record's LSN, record count)`, oldest first, and a reader of the
    /// log holding them.
    pub(crate) fn runs(
        &mut self,
        txn: u64,
        stats: &TxnCounters,
    ) -> Result<(Vec<(u64, u32)>, &LogReader)> {
        let wal = self
            .spill
            .as_ref()
            .expect("runs of a transaction that spilled")
            .wal
            .clone();
        self.spill(|| Ok(wal), txn, stats)?;
        let runs = self
            .layers
            .iter()
            .flatten()
            .map(|p| match p {
                Part::Run(run) => (run.records[0].0, run.records.len() as u32),
                Part::Mem(_) => unreachable!("spilled above"),
            })
            .collect();
        let spill = self.spill.as_ref().expect("spilled");
        Ok((runs, &spill.reader))
    }

    /// For a transaction that never spilled: every write, the latest of each key, in
    /// scoped-key order.
    pub(crate) fn merged(&mut self) -> BTreeMap<Vec<u8>, Write> {
        debug_assert!(self.spill.is_none());
        let mut all = BTreeMap::new();
        for part in std::mem::take(&mut self.layers).into_iter().flatten() {
            if let Part::Mem(map) = part {
                if all.is_empty() {
                    all = map;
                } else {
                    all.extend(map);
                }
            }
        }
        self.layers = vec![Vec::new()];
        self.mem_bytes = 0;
        all
    }

    /// The writes with scoped keys in `(lo, hi)`, merged, in key order (descending with
    /// `reverse`), at most about `cap` read from each part. Returns them and, when a part had
    /// more, the key the answer is exact up to (included) in the direction of travel: the
    /// caller takes the interval as ending there.
    pub(crate) fn range(
        &mut self,
        lo: &Bound<Vec<u8>>,
        hi: &Bound<Vec<u8>>,
        reverse: bool,
        cap: usize,
    ) -> Result<Capped> {
        let mut merged: BTreeMap<Vec<u8>, Write> = BTreeMap::new();
        let mut cut: Option<Vec<u8>> = None;
        let within = |k: &[u8]| super::in_bounds(k, lo, hi);
        for li in 0..self.layers.len() {
            for pi in 0..self.layers[li].len() {
                let mut got: Vec<(Vec<u8>, Write)> = Vec::new();
                let more = match &self.layers[li][pi] {
                    Part::Mem(map) => {
                        let r = map.range::<Vec<u8>, _>((lo.as_ref(), hi.as_ref()));
                        let mut it: Box<dyn Iterator<Item = _>> = if reverse {
                            Box::new(r.rev())
                        } else {
                            Box::new(r)
                        };
                        for (k, w) in it.by_ref().take(cap) {
                            got.push((k.clone(), w.clone()));
                        }
                        it.next().is_some()
                    }
                    Part::Run(run) => {
                        let lsns = run.records_in(lo, hi, reverse);
                        let spill = self.spill.as_mut().expect("runs exist once spilled");
                        let mut more = false;
                        for lsn in lsns {
                            if got.len() >= cap {
                                more = true;
                                break;
                            }
                            let mut part: Vec<(Vec<u8>, Write)> = Vec::new();
                            for_each_in(spill.read(lsn)?, |k, op| {
                                if within(&k) {
                                    part.push((k, write_of(op)));
                                }
                                true
                            });
                            if reverse {
                                part.reverse();
                            }
                            got.extend(part);
                        }
                        more
                    }
                };
                if more {
                    if let Some((k, _)) = got.last() {
                        let tighter = match &cut {
                            None => true,
                            Some(c) => (k < c) != reverse,
                        };
                        if tighter {
                            cut = Some(k.clone());
                        }
                    }
                }
                merged.extend(got);
            }
        }
        let mut out: Vec<(Vec<u8>, Write)> = match &cut {
            None => merged.into_iter().collect(),
            Some(c) if reverse => merged.range(c.clone()..).map(clone_entry).collect(),
            Some(c) => merged.range(..=c.clone()).map(clone_entry).collect(),
        };
        if reverse {
            out.reverse();
        }
        Ok((out, cut))
    }

    /// Ends the log's hold on this transaction's runs: at once (it aborted), or, once it
    /// committed at `committed`, with the first checkpoint after that.
    pub(crate) fn end_hold(&mut self, committed: Option<u64>) {
        if let Some(s) = self.spill.take() {
            match committed {
                Some(lsn) => s.wal.retain_until(s.hold, lsn),
                None => s.wal.unretain(s.hold),
            }
        }
    }
}

fn clone_entry((k, w): (&Vec<u8>, &Write)) -> (Vec<u8>, Write) {
    (k.clone(), w.clone())
}

impl Spill {
    fn read(&mut self, lsn: u64) -> Result<&LogRecord> {
        if self.last.as_ref().is_none_or(|r| r.lsn != lsn) {
            let rec = self
                .reader
                .record_at(lsn)?
                .ok_or_else(|| crate::error::Error::Corrupt {
                    page: None,
                    detail: format!("a transaction's spilled record at LSN {lsn} is unreadable"),
                })?;
            self.last = Some(rec);
        }
        Ok(self.last.as_ref().expect("read above"))
    }
}

impl Run {
    fn last(&self) -> u64 {
        self.records.last().expect("a run has a record").0
    }

    /// The LSN of the record that would hold scoped key `key`.
    fn record_for(&self, key: &[u8]) -> Option<u64> {
        let i = self.records.partition_point(|(_, first)| &first[..] <= key);
        i.checked_sub(1).map(|i| self.records[i].0)
    }

    /// LSNs of the records that may hold keys in `(lo, hi)`, in the direction of travel.
    fn records_in(&self, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>, reverse: bool) -> Vec<u64> {
        let start = match lo {
            Bound::Unbounded => 0,
            Bound::Included(k) | Bound::Excluded(k) => self
                .records
                .partition_point(|(_, first)| first <= k)
                .saturating_sub(1),
        };
        let end = match hi {
            Bound::Unbounded => self.records.len(),
            Bound::Included(k) => self.records.partition_point(|(_, first)| first <= k),
            Bound::Excluded(k) => self.records.partition_point(|(_, first)| first < k),
        };
        let lsns = self.records[start..end.max(start)].iter().map(|r| r.0);
        if reverse {
            lsns.rev().collect()
        } else {
            lsns.collect()
        }
    }
}

/// Appends a run of transaction `txn` to the log, a record at a time, from writes given in
/// key order.
struct RunWriter<'a> {
    wal: &'a Wal,
    txn: u64,
    /// LSN of the transaction's last record.
    prev: u64,
    records: Vec<(u64, Vec<u8>)>,
    ops: OpsBuilder,
    /// The first key of the record being built.
    first: Vec<u8>,
}

impl<'a> RunWriter<'a> {
    fn new(wal: &'a Wal, txn: u64, prev: u64) -> RunWriter<'a> {
        RunWriter {
            wal,
            txn,
            prev,
            records: Vec::new(),
            ops: OpsBuilder::default(),
            first: Vec::new(),
        }
    }

    /// Adds the write `value` (`None`: a delete) of scoped key `key`.
    fn push(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        if self.ops.byte_len() >= RECORD_BYTES {
            self.append()?;
        }
        if self.ops.byte_len() == 0 {
            self.first = key.to_vec();
        }
        let (db, key) = (u32::from_be_bytes(key[..4].try_into().unwrap()), &key[4..]);
        self.ops.push(match value {
            Some(value) => Op::Put { db, key, value },
            None => Op::Delete { db, key },
        });
        Ok(())
    }

    fn append(&mut self) -> Result<()> {
        let rec = Record::TxnData {
            txn: self.txn,
            prev: self.prev,
            ops: self.ops.ops(),
        };
        let lsn = self.wal.append_ahead(&[rec])?[0];
        self.records.push((lsn, std::mem::take(&mut self.first)));
        self.prev = lsn;
        self.ops.clear();
        if self.records.len().is_multiple_of(FLUSH_EVERY) {
            // Handed to the operating system as it goes: the log buffer stays small.
            self.wal.flush_to(self.wal.end())?;
        }
        Ok(())
    }

    /// The run written, of level `level`.
    fn finish(mut self, level: u32) -> Result<Run> {
        if self.ops.byte_len() > 0 || self.records.is_empty() {
            self.append()?;
        }
        Ok(Run {
            records: self.records,
            level,
        })
    }
}
