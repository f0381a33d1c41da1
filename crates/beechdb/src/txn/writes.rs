//! A transaction's write set: the latest write of each key, in layers (one per live
//! savepoint), held in memory up to a budget and spilled to the log beyond it.
//!
//! Owns: [`WriteSet`]. May call: `wal` (appending `txn-data` records, reading them back).
//! Invariants:
//! - layer `i + 1` holds the writes made since savepoint `i`; within a layer, parts are in
//!   the order they were written, and a later part's write of a key overrides an earlier
//!   one's, as a later layer's overrides an earlier layer's;
//! - layers come in two kinds. *Real* layers hold parts. Savepoints taken while the top
//!   real layer ends in an in-memory part (the live map) are *undo* layers, above every
//!   real one: their writes go into the live map, and each keeps what its first write of
//!   a key replaced (SQL takes a savepoint per statement, so releasing one must not cost a
//!   merge of its writes into the map below). Each live-map entry carries the `start` of
//!   the undo layer that last wrote it (0: none), so an undo layer records a key once;
//!   undo layers become real layers before anything spills;
//! - a spilled part is a run: `txn-data` records in the log, sorted by scoped key, each
//!   indexed here by its LSN and first key; its records are appended as one unit and written
//!   to the segment files before the run is read, and the log keeps them (a hold) until the
//!   transaction ends or a checkpoint covers its commit;
//! - memory counted in `mem_bytes` is that of the in-memory parts only.

use super::filter::KeyFilter;
use crate::error::Result;
use crate::stats::TxnCounters;
use crate::wal::reader::{LogReader, LogRecord, RunMerge};
use crate::wal::{Op, OpsBuilder, Record, Wal};
use smallvec::{smallvec, SmallVec};
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
    Mem(BTreeMap<Sk, Written>),
    Run(Run),
}

/// A scoped key in a write map. Ordered as its bytes are, but compared a word at a time:
/// a write or a read of the map compares its key with 30 to 40 others, and those
/// comparisons, a call to `memcmp` each, were a fifth of a bulk load's instructions.
/// Short keys (a rowid's, most index entries') are held inline: a write allocated its key
/// twice, for the map and for the statement's undo record, which was an eighth of an SQL
/// row's insert.
#[derive(PartialEq, Eq, Default)]
pub(crate) struct Sk(pub(crate) SmallVec<[u8; INLINE_KEY]>);

impl Clone for Sk {
    /// One copy of the bytes (`SmallVec`'s own clone copies them one at a time).
    fn clone(&self) -> Sk {
        Sk(SmallVec::from_slice(&self.0))
    }

    fn clone_from(&mut self, source: &Sk) {
        self.0.clear();
        self.0.extend_from_slice(&source.0);
    }
}

/// Bytes of a scoped key held inline in an [`Sk`]: an SQL index entry on a number takes
/// 29 (its database, the number's 17 bytes, the rowid's 8).
const INLINE_KEY: usize = 32;

impl Sk {
    /// Database `db`'s `key`, scoped.
    pub(crate) fn scoped(db: u32, key: &[u8]) -> Sk {
        let len = 4 + key.len();
        if len > INLINE_KEY {
            return Sk(SmallVec::from_vec(super::scoped_key(db, key)));
        }
        let mut buf = [0u8; INLINE_KEY];
        buf[..4].copy_from_slice(&db.to_be_bytes());
        buf[4..len].copy_from_slice(key);
        Sk(SmallVec::from_buf_and_len(buf, len))
    }

    /// The key's bytes as a vector (`SmallVec::into_vec` copies an inline one a byte at a
    /// time).
    pub(crate) fn into_vec(self) -> Vec<u8> {
        match self.0.spilled() {
            true => self.0.into_vec(),
            false => self.0.to_vec(),
        }
    }
}

/// A borrowed scoped key, ordered as [`Sk`]: what the maps are searched with.
#[derive(PartialEq, Eq)]
#[repr(transparent)]
pub(crate) struct KeyRef([u8]);

impl KeyRef {
    pub(crate) fn new(key: &[u8]) -> &KeyRef {
        // SAFETY: `KeyRef` is a transparent wrapper of `[u8]`, so the two references have
        // the same layout and metadata.
        unsafe { &*(key as *const [u8] as *const KeyRef) }
    }
}

impl std::ops::Deref for Sk {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl std::borrow::Borrow<KeyRef> for Sk {
    #[inline]
    fn borrow(&self) -> &KeyRef {
        KeyRef::new(&self.0)
    }
}

impl Ord for KeyRef {
    #[inline]
    fn cmp(&self, other: &KeyRef) -> std::cmp::Ordering {
        byte_order(&self.0, &other.0)
    }
}

impl PartialOrd for KeyRef {
    fn partial_cmp(&self, other: &KeyRef) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Sk {
    #[inline]
    fn cmp(&self, other: &Sk) -> std::cmp::Ordering {
        byte_order(&self.0, &other.0)
    }
}

impl PartialOrd for Sk {
    fn partial_cmp(&self, other: &Sk) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// `a.cmp(b)` for byte strings, eight bytes at a time and without a call.
#[inline]
fn byte_order(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let word = |k: &[u8], at: usize| u64::from_be_bytes(k[at..at + 8].try_into().expect("8"));
    let n = a.len().min(b.len());
    if n >= 8 {
        let mut i = 0;
        while i + 8 <= n {
            let (x, y) = (word(a, i), word(b, i));
            if x != y {
                return x.cmp(&y);
            }
            i += 8;
        }
        // The last word of the common length, overlapping bytes already found equal.
        if i < n {
            let (x, y) = (word(a, n - 8), word(b, n - 8));
            if x != y {
                return x.cmp(&y);
            }
        }
    } else if let Some(i) = (0..n).find(|&i| a[i] != b[i]) {
        return a[i].cmp(&b[i]);
    }
    a.len().cmp(&b.len())
}

/// An in-memory write, and the `start` of the undo layer that made it (0: none).
#[derive(Clone)]
pub(crate) struct Written {
    pub(crate) w: Write,
    seq: u64,
}

/// A savepoint over the live map: its `start` (greater than any before it), and for each
/// key it wrote, the entry its first write replaced (`None`: there was none), in order.
struct UndoLayer {
    start: u64,
    undo: Vec<(Sk, Option<Written>)>,
}

/// A spilled part: its records' LSNs and first keys, in key order, and its level: 0 when
/// spilled from memory, one more than theirs when merged from [`FAN_IN`] runs.
struct Run {
    records: Vec<(u64, Vec<u8>)>,
    level: u32,
    /// Keys it holds, and a filter over them while the transaction's budget for filters
    /// allows (see [`WriteSet::spill`]).
    keys: usize,
    filter: Option<KeyFilter>,
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
    /// The real layers (see the module comment); the first inline, so that a transaction
    /// that never takes a savepoint allocates nothing for its layers.
    layers: SmallVec<[Vec<Part>; 1]>,
    /// The undo layers, above the real ones.
    undo: Vec<UndoLayer>,
    /// The last undo layer's `start` given out.
    last_start: u64,
    /// Bytes of the in-memory parts' entries, and of the undo layers' records.
    mem_bytes: usize,
    undo_bytes: usize,
    spill: Option<Spill>,
    /// Per database, writes of the live map still outside it (see [`Appends`]); empty,
    /// allocating nothing, in a transaction of fewer than [`FOLLOW_AFTER`] writes.
    appends: Vec<Appends>,
}

/// Writes of one database to the live map in ascending key order (a table's new rowids),
/// kept in a vector past the map rather than each inserted with a search from the map's
/// root, which for a load in one transaction was a third of a row's insert. `run` holds
/// keys above every key of the database in the live map, ascending; it joins the map
/// ([`WriteSet::fold_appends`]) before anything else reads or changes the map's layers, and
/// as soon as a write of its database comes below its last key. `last` and `streak` say
/// when to begin a run: after [`STREAK`] keys in a row each above the one before.
struct Appends {
    db: [u8; 4],
    last: Sk,
    streak: u32,
    run: Vec<(Sk, Written)>,
}

/// Ascending writes of a database in a row before they go to a run (random keys make a
/// streak this long rarely, so their writes seldom pay the check a run begins with).
const STREAK: u32 = 4;
/// Databases whose ascending writes are followed at once (the oldest is forgotten).
const APPENDING_DBS: usize = 4;
/// Writes in the live map before a transaction's ascending writes are followed.
const FOLLOW_AFTER: usize = 64;

fn entry_size(key: &[u8], w: &Write) -> usize {
    key.len() + w.as_ref().map_or(0, Vec::len) + ENTRY_OVERHEAD
}

/// What an undo record of `key` holding `old` takes: as much as the entry it restores.
fn record_size(key: &[u8], old: &Option<Written>) -> usize {
    entry_size(key, old.as_ref().map_or(&None, |o| &o.w))
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
            layers: smallvec![Vec::new()],
            undo: Vec::new(),
            last_start: 0,
            mem_bytes: 0,
            undo_bytes: 0,
            spill: None,
            appends: Vec::new(),
        }
    }
}

impl WriteSet {
    pub(crate) fn is_empty(&self) -> bool {
        let empty = |p: &Part| matches!(p, Part::Mem(m) if m.is_empty());
        self.layers.iter().flatten().all(empty) && self.appends.iter().all(|a| a.run.is_empty())
    }

    pub(crate) fn spilled(&self) -> bool {
        self.spill.is_some()
    }

    pub(crate) fn mem_bytes(&self) -> usize {
        self.mem_bytes + self.undo_bytes
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
        let appended: usize = self.appends.iter().map(|a| a.run.len()).sum();
        self.layers.iter().flatten().map(len).sum::<usize>() + appended
    }

    /// Moves every run of [`Appends`] into the live map: done first by whatever reads or
    /// changes the layers other than [`WriteSet::insert`] and [`WriteSet::get`], so that
    /// the runs always belong to the live map they were written to.
    fn fold_appends(&mut self) {
        for i in 0..self.appends.len() {
            self.fold_run(i);
        }
    }

    /// Moves the run of `self.appends[i]` into the live map: merged in one pass when it is
    /// large beside the map (its keys are sorted), else inserted one by one.
    fn fold_run(&mut self, i: usize) {
        let run = std::mem::take(&mut self.appends[i].run);
        if run.is_empty() {
            return;
        }
        let map = self.live();
        if run.len() >= map.len() / 8 {
            let mut run: BTreeMap<Sk, Written> = run.into_iter().collect();
            map.append(&mut run);
        } else {
            map.extend(run);
        }
    }

    /// Adds `key` to the run of its database when it extends one (or begins one: see
    /// [`Appends`]); gives `written` back otherwise, having moved a run the key falls
    /// inside into the live map.
    fn append(&mut self, key: &Sk, written: Written) -> Option<Written> {
        let Some(db) = key.get(..4).map(|d| <[u8; 4]>::try_from(d).expect("four")) else {
            return Some(written);
        };
        let i = match self.appends.iter().position(|a| a.db == db) {
            Some(i) => i,
            None => {
                if self.appends.len() == APPENDING_DBS {
                    let oldest = 0;
                    self.fold_run(oldest);
                    self.appends.remove(oldest);
                }
                self.appends.push(Appends {
                    db,
                    last: key.clone(),
                    streak: 0,
                    run: Vec::new(),
                });
                return Some(written);
            }
        };
        let a = &mut self.appends[i];
        if let Some((last, _)) = a.run.last() {
            if key > last {
                a.run.push((key.clone(), written));
                return None;
            }
            self.fold_run(i);
            let a = &mut self.appends[i];
            a.streak = 0;
            a.last = key.clone();
            return Some(written);
        }
        a.streak = if *key > a.last { a.streak + 1 } else { 0 };
        a.last.clone_from(key);
        if a.streak < STREAK {
            return Some(written);
        }
        // Nothing of the database in the live map at or above the key: a run begins.
        let above = self
            .live()
            .range::<KeyRef, _>((Bound::Included(KeyRef::new(key)), Bound::Unbounded))
            .next()
            .is_some_and(|(k, _)| k[..4] == db);
        if above {
            self.appends[i].streak = 0;
            return Some(written);
        }
        self.appends[i].run.push((key.clone(), written));
        None
    }

    /// The live map: the top real layer's last part, made in-memory first if it is not.
    fn live(&mut self) -> &mut BTreeMap<Sk, Written> {
        let layer = self.layers.last_mut().expect("a base layer");
        if !matches!(layer.last(), Some(Part::Mem(_))) {
            debug_assert!(self.undo.is_empty(), "undo layers sit on a live map");
            layer.push(Part::Mem(BTreeMap::new()));
        }
        match layer.last_mut() {
            Some(Part::Mem(map)) => map,
            _ => unreachable!("pushed above"),
        }
    }

    /// Records a write of scoped key `key` in the newest layer.
    pub(crate) fn insert(&mut self, key: Sk, w: Write) {
        use std::collections::btree_map::Entry;
        let added = entry_size(&key, &w);
        let seq = self.undo.last().map_or(0, |u| u.start);
        let mut written = Written { w, seq };
        // Small transactions (most) are not followed: their few searches are cheap.
        if !self.appends.is_empty() || self.live().len() >= FOLLOW_AFTER {
            match self.append(&key, written) {
                Some(w) => written = w,
                None => {
                    // A new key: nothing replaced.
                    self.mem_bytes += added;
                    if seq > 0 {
                        self.keep_undo(key, None);
                    }
                    return;
                }
            }
        }
        let map = self.live();
        // The entry replaced, and whether the newest undo layer must keep it.
        let (replaced, record) = match map.entry(key) {
            Entry::Occupied(mut o) => {
                let old = std::mem::replace(o.get_mut(), written);
                let size = entry_size(o.key(), &old.w);
                let keep = (old.seq < seq).then(|| (o.key().clone(), Some(old)));
                (size, keep)
            }
            Entry::Vacant(v) => {
                let keep = (seq > 0).then(|| (v.key().clone(), None));
                v.insert(written);
                (0, keep)
            }
        };
        self.mem_bytes = self.mem_bytes + added - replaced;
        if let Some((k, old)) = record {
            self.keep_undo(k, old);
        }
    }

    /// Records in the newest undo layer that its first write of `key` replaced `old`.
    fn keep_undo(&mut self, key: Sk, old: Option<Written>) {
        self.undo_bytes += record_size(&key, &old);
        self.undo
            .last_mut()
            .expect("an undo layer")
            .undo
            .push((key, old));
    }

    /// Records writes of `entries` in the newest layer, as [`WriteSet::insert`] of each
    /// would. Keys strictly ascending, none written before by this transaction (as an
    /// index build writes them into its new database) are added to the live map in one
    /// merge (`BTreeMap::append`: a bulk build, where an insert searches from the root);
    /// others one at a time.
    pub(crate) fn insert_sorted(&mut self, entries: Vec<(Sk, Write)>) {
        self.fold_appends();
        let ascending = entries.windows(2).all(|w| w[0].0 < w[1].0);
        let fresh = match (entries.first(), entries.last()) {
            (Some((first, _)), Some((last, _))) if ascending => {
                let map = self.live();
                map.range(first.clone()..=last.clone()).next().is_none()
            }
            _ => false,
        };
        if !fresh {
            for (k, w) in entries {
                self.insert(k, w);
            }
            return;
        }
        let seq = self.undo.last().map_or(0, |u| u.start);
        for (k, w) in &entries {
            self.mem_bytes += entry_size(k, w);
            if seq > 0 {
                // What a rollback to the savepoint needs: none of these was there.
                self.keep_undo(k.clone(), None);
            }
        }
        let mut added: BTreeMap<Sk, Written> = entries
            .into_iter()
            .map(|(k, w)| (k, Written { w, seq }))
            .collect();
        self.live().append(&mut added);
    }

    /// This transaction's latest write of scoped key `key`, if it wrote it.
    pub(crate) fn get(&mut self, key: &[u8], stats: &TxnCounters) -> Result<Option<Write>> {
        // The runs are the newest writes, with the live map.
        for a in &self.appends {
            if a.run.last().is_some_and(|(last, _)| &last[..] >= key) {
                let k = KeyRef::new(key);
                if let Ok(i) = a.run.binary_search_by(|(s, _)| KeyRef::new(s).cmp(k)) {
                    return Ok(Some(a.run[i].1.w.clone()));
                }
            }
        }
        for li in (0..self.layers.len()).rev() {
            for pi in (0..self.layers[li].len()).rev() {
                let found = match &self.layers[li][pi] {
                    Part::Mem(map) => map.get(KeyRef::new(key)).map(|e| e.w.clone()),
                    Part::Run(run) => {
                        if run.filter.as_ref().is_some_and(|f| !f.may_hold(key)) {
                            continue;
                        }
                        let Some(lsn) = run.record_for(key) else {
                            continue;
                        };
                        let spill = self.spill.as_mut().expect("runs exist once spilled");
                        stats.spilled_reads.fetch_add(1, Relaxed);
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

    /// Starts a layer for a new savepoint: an undo layer over the live map.
    pub(crate) fn push_layer(&mut self) {
        self.live();
        self.last_start += 1;
        self.undo.push(UndoLayer {
            start: self.last_start,
            undo: Vec::new(),
        });
    }

    /// Drops every write made since savepoint `mark` (layers after `mark + 1` go, layer
    /// `mark + 1` is emptied). Spilled runs dropped stay in the log, unreferenced.
    pub(crate) fn rollback_to(&mut self, mark: usize) {
        self.fold_appends();
        let real = self.layers.len();
        if let Some(u) = (mark + 1).checked_sub(real) {
            // Undo layer `u` stays, emptied; the ones after it go.
            let mut start = 0;
            while self.undo.len() > u {
                let layer = self.undo.pop().expect("counted");
                start = layer.start;
                self.restore(layer.undo);
            }
            self.undo.push(UndoLayer {
                start,
                undo: Vec::new(),
            });
            return;
        }
        // The live map is in a layer that is emptied or dropped, undo layers' writes with it.
        self.drop_undo();
        let dropped: Vec<Part> = self.layers.drain(mark + 1..).flatten().collect();
        self.layers.push(Vec::new());
        self.forget(dropped);
    }

    /// Merges layers after savepoint `mark` into the one before it (savepoint `mark` and the
    /// ones after it are released).
    pub(crate) fn release(&mut self, mark: usize) {
        let real = self.layers.len();
        if let Some(u) = mark.checked_sub(real) {
            // Into an undo layer: it keeps the records of keys it had not written itself.
            let start = self.undo[u].start;
            let released: Vec<UndoLayer> = self.undo.drain(u + 1..).collect();
            for (k, old) in released.into_iter().flat_map(|l| l.undo) {
                if old.as_ref().is_none_or(|o| o.seq < start) {
                    self.undo[u].undo.push((k, old));
                } else {
                    self.undo_bytes -= record_size(&k, &old);
                }
            }
            return;
        }
        // Into a real layer: the undo layers' writes are in the live map already (which
        // moves into layer `mark` when it was in a layer after it).
        if self.layers.len() > mark + 1 {
            self.fold_appends();
        }
        self.drop_undo();
        let uppers: Vec<Vec<Part>> = self.layers.drain(mark + 1..).collect();
        for upper in uppers {
            for part in upper {
                self.append_part(mark, part);
            }
        }
    }

    /// Puts back, newest first, the entries undo records hold.
    fn restore(&mut self, records: Vec<(Sk, Option<Written>)>) {
        for (k, old) in records.into_iter().rev() {
            self.undo_bytes -= record_size(&k, &old);
            let restored = old.as_ref().map_or(0, |o| entry_size(&k, &o.w));
            let map = self.live();
            let now = match old {
                Some(o) => map.insert(k.clone(), o),
                None => map.remove(&k),
            };
            let now = now.expect("an undo record's key is in the live map");
            self.mem_bytes = self.mem_bytes + restored - entry_size(&k, &now.w);
        }
    }

    /// Forgets the undo layers (their writes stay in the live map).
    fn drop_undo(&mut self) {
        self.undo.clear();
        self.undo_bytes = 0;
    }

    /// Turns the undo layers into real layers, so that every layer's writes are parts of
    /// its own (as spilling needs): innermost first, each takes the live-map entries it
    /// wrote, and the entries they replaced go back.
    fn materialize(&mut self) {
        self.fold_appends();
        let mut uppers = Vec::new();
        while let Some(layer) = self.undo.pop() {
            let start = layer.start;
            let all = std::mem::take(self.live());
            let (mine, rest): (BTreeMap<_, _>, _) =
                all.into_iter().partition(|(_, e)| e.seq >= start);
            *self.live() = rest;
            // The records' keys are all in `mine` now: put back what they replaced.
            for (k, old) in layer.undo {
                self.undo_bytes -= record_size(&k, &old);
                if let Some(o) = old {
                    self.mem_bytes += entry_size(&k, &o.w);
                    self.live().insert(k, o);
                }
            }
            uppers.push(mine);
        }
        for mine in uppers.into_iter().rev() {
            self.layers.push(match mine.is_empty() {
                true => Vec::new(),
                false => vec![Part::Mem(mine)],
            });
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
                        self.mem_bytes -= entry_size(&k, &old.w);
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
                self.mem_bytes -= map.iter().map(|(k, e)| entry_size(k, &e.w)).sum::<usize>();
            }
        }
    }

    /// Writes every in-memory part to the log as a run of transaction `txn`, leaving none
    /// in memory, then merges runs where a layer has gathered [`FAN_IN`] of one size (so a
    /// commit's merge reads few runs at once: about `FAN_IN` per size, sizes growing by
    /// `FAN_IN` each). The records are written to the segment files (not synced) before this
    /// returns, so that reading them back needs no copy of the log's buffer. The first
    /// spill writes to the log `log` gives; later ones to the same log. Each run gets a
    /// filter over its keys while all the runs' filters take at most `filter_budget` bytes
    /// (a run past it has none, and a read of a key looks into it).
    pub(crate) fn spill(
        &mut self,
        log: impl FnOnce() -> Result<Arc<Wal>>,
        txn: u64,
        stats: &TxnCounters,
        filter_budget: usize,
    ) -> Result<()> {
        self.materialize();
        self.mem_bytes = 0;
        for layer in &mut self.layers {
            layer.retain(|p| !matches!(p, Part::Mem(m) if m.is_empty()));
        }
        if !self
            .layers
            .iter()
            .flatten()
            .any(|p| matches!(p, Part::Mem(_)))
        {
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
        let mut filters = self.filter_bytes();
        let spill = self.spill.as_mut().expect("set above");
        for layer in &mut self.layers {
            for part in layer.iter_mut() {
                let Part::Mem(map) = part else { continue };
                let filter = filter_within(map.len(), &mut filters, filter_budget);
                let mut w = RunWriter::new(wal, txn, spill.prev, filter);
                for (k, e) in map.iter() {
                    w.push(k, e.w.as_deref())?;
                }
                let run = w.finish(0)?;
                spill.prev = run.last();
                *part = Part::Run(run);
            }
        }
        self.settle(wal)?;
        for li in 0..self.layers.len() {
            while let Some(level) = self.mergeable(li) {
                let layer = &mut self.layers[li];
                let mut keys = 0;
                let group: Vec<(u64, u32)> = layer
                    .drain(layer.len() - FAN_IN..)
                    .map(|p| match p {
                        Part::Run(r) => {
                            keys += r.keys;
                            (r.records[0].0, r.records.len() as u32)
                        }
                        Part::Mem(_) => unreachable!("checked by mergeable"),
                    })
                    .collect();
                let mut filters = self.filter_bytes();
                let filter = filter_within(keys, &mut filters, filter_budget);
                let spill = self.spill.as_mut().expect("spilled");
                let mut merge = RunMerge::new(&spill.reader, txn, group.into_iter());
                let mut w = RunWriter::new(wal, txn, spill.prev, filter);
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

    /// Bytes the runs' filters take.
    fn filter_bytes(&self) -> usize {
        let bytes = |p: &Part| match p {
            Part::Run(Run {
                filter: Some(f), ..
            }) => f.bytes(),
            _ => 0,
        };
        self.layers.iter().flatten().map(bytes).sum()
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
        // A commit merges its runs from here on; filters only spare reads (one after a
        // refused commit still finds every key, through the records), so none are built.
        self.spill(|| Ok(wal), txn, stats, 0)?;
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
    pub(crate) fn merged(&mut self) -> Merged {
        debug_assert!(self.spill.is_none());
        self.drop_undo();
        let mut map = BTreeMap::new();
        for part in std::mem::take(&mut self.layers).into_iter().flatten() {
            if let Part::Mem(m) = part {
                if map.is_empty() {
                    map = m;
                } else {
                    map.extend(m);
                }
            }
        }
        // The runs stay as they are, merged in as the writes are read: each is one
        // database's, so in database order they are one ascending sequence.
        let mut runs: Vec<Vec<(Sk, Written)>> = self
            .appends
            .drain(..)
            .map(|a| a.run)
            .filter(|r| !r.is_empty())
            .collect();
        runs.sort_by(|a, b| a[0].0.cmp(&b[0].0));
        self.layers = smallvec![Vec::new()];
        self.mem_bytes = 0;
        Merged { map, runs }
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
        self.fold_appends();
        // Entries of the one part holding writes, if only one does (then they are the
        // answer as they are: in order and one per key).
        let mut holding = self.layers.iter().flatten().filter(|p| match p {
            Part::Mem(m) => !m.is_empty(),
            Part::Run(_) => true,
        });
        if let (Some(Part::Mem(map)), None) = (holding.next(), holding.next()) {
            let mut got = Vec::new();
            let more = take_range(map, lo, hi, reverse, cap, &mut got);
            let cut = more.then(|| got.last().map(|(k, _)| k.clone())).flatten();
            return Ok((got, cut));
        }
        let mut merged: BTreeMap<Vec<u8>, Write> = BTreeMap::new();
        let mut cut: Option<Vec<u8>> = None;
        let within = |k: &[u8]| super::in_bounds(k, lo, hi);
        for li in 0..self.layers.len() {
            for pi in 0..self.layers[li].len() {
                let mut got: Vec<(Vec<u8>, Write)> = Vec::new();
                let more = match &self.layers[li][pi] {
                    Part::Mem(map) => take_range(map, lo, hi, reverse, cap, &mut got),
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

/// Every write of a transaction that never spilled, the latest of each key (see
/// [`WriteSet::merged`]): its map, and the runs of [`Appends`], newer than the map.
pub(crate) struct Merged {
    map: BTreeMap<Sk, Written>,
    runs: Vec<Vec<(Sk, Written)>>,
}

impl Merged {
    /// The writes, in scoped-key order, to `f`.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&Sk, &Written)) {
        match self.runs.is_empty() {
            true => self.map.iter().for_each(|(k, w)| f(k, w)),
            false => {
                let appended = self.runs.iter().flatten().map(|(k, w)| (k, w));
                merge_newer(self.map.iter(), appended, |e| e.0).for_each(|(k, w)| f(k, w))
            }
        }
    }

    /// The writes, in scoped-key order, taken.
    pub(crate) fn into_iter(self) -> Box<dyn Iterator<Item = (Sk, Written)> + Send> {
        match self.runs.is_empty() {
            true => Box::new(self.map.into_iter()),
            false => Box::new(merge_newer(
                self.map.into_iter(),
                self.runs.into_iter().flatten(),
                |e| &e.0,
            )),
        }
    }
}

/// The entries of two iterators ascending by `key`, in order; of two with one key, the one
/// from `newer`.
fn merge_newer<T, K: Ord + ?Sized>(
    older: impl Iterator<Item = T>,
    newer: impl Iterator<Item = T>,
    key: impl Fn(&T) -> &K,
) -> impl Iterator<Item = T> {
    let (mut older, mut newer) = (older.peekable(), newer.peekable());
    std::iter::from_fn(move || {
        let order = match (older.peek(), newer.peek()) {
            (Some(o), Some(n)) => key(o).cmp(key(n)),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, _) => std::cmp::Ordering::Greater,
        };
        match order {
            std::cmp::Ordering::Less => older.next(),
            std::cmp::Ordering::Equal => {
                older.next();
                newer.next()
            }
            std::cmp::Ordering::Greater => newer.next(),
        }
    })
}

/// Copies up to `cap` entries of `map` with keys in `(lo, hi)` into `got`, in the direction
/// of travel; returns whether there were more. (Only the near bound is searched for: the
/// far one is checked entry by entry, as a lookup takes few.)
fn take_range(
    map: &BTreeMap<Sk, Written>,
    lo: &Bound<Vec<u8>>,
    hi: &Bound<Vec<u8>>,
    reverse: bool,
    cap: usize,
    got: &mut Entries,
) -> bool {
    fn key(b: &Bound<Vec<u8>>) -> Bound<&KeyRef> {
        b.as_ref().map(|k| KeyRef::new(k))
    }
    match reverse {
        true => {
            let r = map.range::<KeyRef, _>((Bound::Unbounded, key(hi))).rev();
            take_entries(
                r.take_while(|(k, _)| super::in_bounds(k, lo, &Bound::Unbounded)),
                cap,
                got,
            )
        }
        false => {
            let r = map.range::<KeyRef, _>((key(lo), Bound::Unbounded));
            take_entries(
                r.take_while(|(k, _)| super::in_bounds(k, &Bound::Unbounded, hi)),
                cap,
                got,
            )
        }
    }
}

/// Copies up to `cap` entries of `it` into `got`; returns whether it had more.
fn take_entries<'a>(
    mut it: impl Iterator<Item = (&'a Sk, &'a Written)>,
    cap: usize,
    got: &mut Entries,
) -> bool {
    for (k, e) in it.by_ref().take(cap) {
        got.push((k.to_vec(), e.w.clone()));
    }
    it.next().is_some()
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

/// A filter for a run of `keys` keys, if it fits in `budget` with the `used` bytes
/// (counted in).
fn filter_within(keys: usize, used: &mut usize, budget: usize) -> Option<KeyFilter> {
    let bytes = KeyFilter::bytes_for(keys);
    (*used + bytes <= budget).then(|| {
        *used += bytes;
        KeyFilter::new(keys)
    })
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
    keys: usize,
    filter: Option<KeyFilter>,
}

impl<'a> RunWriter<'a> {
    fn new(wal: &'a Wal, txn: u64, prev: u64, filter: Option<KeyFilter>) -> RunWriter<'a> {
        RunWriter {
            wal,
            txn,
            prev,
            records: Vec::new(),
            ops: OpsBuilder::default(),
            first: Vec::new(),
            keys: 0,
            filter,
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
        self.keys += 1;
        if let Some(f) = &mut self.filter {
            f.add(key);
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
            keys: self.keys,
            filter: self.filter,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    proptest::proptest! {
        /// Keys order as their bytes do: short and long, with common prefixes of every
        /// length around the eight-byte words.
        #[test]
        fn keys_order_as_bytes(
            prefix in proptest::collection::vec(0u8..4, 0..20),
            a in proptest::collection::vec(0u8..4, 0..20),
            b in proptest::collection::vec(0u8..4, 0..20),
        ) {
            let a = [prefix.clone(), a].concat();
            let b = [prefix, b].concat();
            proptest::prop_assert_eq!(Sk(a[..].into()).cmp(&Sk(b[..].into())), a.cmp(&b));
            proptest::prop_assert_eq!(KeyRef::new(&a).cmp(KeyRef::new(&b)), a.cmp(&b));
        }
    }

    /// What the in-memory parts and undo records take, counted from scratch.
    fn recount(ws: &WriteSet) -> usize {
        let parts: usize = ws
            .layers
            .iter()
            .flatten()
            .map(|p| match p {
                Part::Mem(m) => m.iter().map(|(k, e)| entry_size(k, &e.w)).sum(),
                Part::Run(_) => 0,
            })
            .sum::<usize>()
            + ws.appends
                .iter()
                .flat_map(|a| &a.run)
                .map(|(k, e)| entry_size(k, &e.w))
                .sum::<usize>();
        let records: usize = ws
            .undo
            .iter()
            .flat_map(|l| &l.undo)
            .map(|(k, old)| record_size(k, old))
            .sum();
        parts + records
    }

    /// A scoped key of database `db`: `k`, two bytes.
    fn scoped(db: u8, k: u16) -> Vec<u8> {
        [[0, 0, 0, db].as_slice(), &k.to_be_bytes()].concat()
    }

    /// Random writes, savepoints, releases and rollbacks (statement-like savepoints inside
    /// user ones), with no log: every key read back as a model says, the memory count
    /// exact, and each release into an outer savepoint keeping one record per key. Writes
    /// go to six databases (more than [`APPENDING_DBS`]), to random keys and in ascending
    /// streaks (so runs of [`Appends`] begin, grow, and meet every other operation).
    #[test]
    fn undo_layers_match_a_model() {
        for seed in 0..300 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut ws = WriteSet::default();
            let mut model: BTreeMap<Vec<u8>, Write> = BTreeMap::new();
            let mut marks: Vec<BTreeMap<Vec<u8>, Write>> = Vec::new();
            let mut next = [0u16; 6];
            for step in 0..rng.gen_range(1..300) {
                match rng.gen_range(0..12) {
                    0..=6 => {
                        let db = rng.gen_range(0..6u8);
                        let k = match rng.gen_bool(0.6) {
                            true => {
                                next[db as usize] += rng.gen_range(0..3);
                                scoped(db, next[db as usize])
                            }
                            false => scoped(db, rng.gen_range(0..40)),
                        };
                        let w = rng.gen_bool(0.8).then(|| vec![7; rng.gen_range(0..50)]);
                        ws.insert(Sk(k[..].into()), w.clone());
                        model.insert(k, w);
                    }
                    7..=8 => {
                        ws.push_layer();
                        marks.push(model.clone());
                    }
                    9 if !marks.is_empty() => {
                        let i = rng.gen_range(0..marks.len());
                        ws.rollback_to(i);
                        model = marks[i].clone();
                        marks.truncate(i + 1);
                    }
                    10 if !marks.is_empty() => {
                        let i = rng.gen_range(0..marks.len());
                        ws.release(i);
                        marks.truncate(i);
                    }
                    11 => {
                        // A read of a range (which moves the runs into the map).
                        let lo = Bound::Included(scoped(rng.gen_range(0..6), 0));
                        let got = ws.range(&lo, &Bound::Unbounded, false, 1000).unwrap().0;
                        let want: Vec<(Vec<u8>, Write)> = model
                            .range::<Vec<u8>, _>((lo, Bound::Unbounded))
                            .map(|(k, w)| (k.clone(), w.clone()))
                            .collect();
                        assert_eq!(got, want, "seed {seed} step {step}: range");
                    }
                    _ => {}
                }
                assert_eq!(ws.layers.len() + ws.undo.len(), marks.len() + 1);
                assert_eq!(ws.mem_bytes(), recount(&ws), "seed {seed} step {step}");
                for (li, l) in ws.undo.iter().enumerate() {
                    let mut keys: Vec<_> = l.undo.iter().map(|(k, _)| k).collect();
                    keys.sort();
                    keys.dedup();
                    assert_eq!(keys.len(), l.undo.len(), "seed {seed}: layer {li}");
                }
                let keys = (0..6u8).flat_map(|db| {
                    (0..40)
                        .chain(next[db as usize]..next[db as usize] + 2)
                        .map(move |k| scoped(db, k))
                });
                for k in keys {
                    let got = ws.get(&k, &TxnCounters::default()).unwrap();
                    assert_eq!(got.as_ref(), model.get(&k), "seed {seed} step {step}");
                }
            }
            // Turned into real layers (as before a spill), then rolled back: the same.
            ws.materialize();
            assert!(ws.undo.is_empty());
            assert_eq!(ws.mem_bytes(), recount(&ws), "seed {seed}: materialized");
            if !marks.is_empty() {
                let i = rng.gen_range(0..marks.len());
                ws.rollback_to(i);
                model = marks[i].clone();
            }
            assert_eq!(ws.mem_bytes(), recount(&ws), "seed {seed}: rolled back");
            let merged: BTreeMap<Vec<u8>, Write> = ws
                .merged()
                .into_iter()
                .map(|(k, e)| (k.to_vec(), e.w))
                .collect();
            assert_eq!(merged, model, "seed {seed}: merged");
        }
    }
}
