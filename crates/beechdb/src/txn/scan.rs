//! A transaction's range scan, streamed a leaf at a time.
//!
//! Owns: [`TxnIter`]. May call: `btree::cursor::read_run`, the engine's version map and undo
//! stores, under the environment's shared lock, and the transaction's write set. Invariant:
//! each batch covers an interval of keys that continues exactly where the previous one
//! ended, and is read in one acquisition of the shared lock: the tree's entries in the
//! interval, then the values the reader must see otherwise (under snapshot isolation, those
//! that commits newer than the snapshot overwrote; for every reader, those a spilled
//! transaction's commit being applied replaced), which restore the reader's view of the whole
//! interval. Commits between batches change only later intervals, and those are restored the
//! same way when read; the transaction's own writes are merged last. Sources that may hold
//! many keys in one interval (undo stores, the write set) give at most [`BATCH_CAP`] each, and
//! the interval then ends at the last key they gave, so a batch's memory stays bounded; a
//! lookup's first batches (`one_at_a_time`) take only a few, so that its cost does not grow
//! with the transaction's writes.

use super::handle::TxnInner;
use super::scoped_range;
use crate::btree::cursor::{beyond, read_run, seek_from, Run};
use crate::config::Duplicates;
use crate::engine::{Engine, NeedResult};
use crate::env::Db;
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

/// Entries a batch takes at most from each source that may hold many in one interval.
const BATCH_CAP: usize = 1024;

/// The entries of a key range as a transaction sees them, in key order (or reverse).
/// Created by [`crate::Txn::range`], [`crate::Txn::range_rev`] and [`crate::Txn::iter`]; owns
/// what it needs (it keeps the transaction open), and holds no lock between items, so the
/// transaction may write while it iterates.
pub struct TxnIter {
    txn: Arc<TxnInner>,
    db: Db,
    /// Where the next batch starts: the lower bound going forward, the upper going back.
    from: Bound<Vec<u8>>,
    /// The range's far end.
    to: Bound<Vec<u8>>,
    reverse: bool,
    batch: Entries,
    /// The entry `next_ref` lends when it is not in a flat run (merged, or decoded).
    current: (Vec<u8>, Vec<u8>),
    /// Bytes the next batch copies from a leaf at most: for a range open at its far end,
    /// small at first (a lookup reads one or two entries), doubling up to a leaf's worth; for
    /// a bounded one, a leaf's worth at once (the copy stops at the bound anyway).
    batch_bytes: usize,
    /// Entries the next batch takes at most from the transaction's writes and from other
    /// transactions' versions: small at first for a lookup (`one_at_a_time`: `Txn::last`
    /// below a transaction's thousands of inserts took them all, at every call), doubling
    /// up to [`BATCH_CAP`].
    own_cap: usize,
    done: bool,
    /// Decode composite entries into pairs (a database with duplicates, walked for users).
    decode: Duplicates,
    /// A misuse found when the scan was created (a finished transaction, another
    /// environment's database): the first item.
    misuse: Option<Error>,
}

/// The first batch of a scan open at its far end, or asked to read few first.
const FEW_FIRST_BYTES: usize = 512;

impl TxnIter {
    pub(crate) fn new(
        txn: Arc<TxnInner>,
        db: Db,
        (lo, hi): (Bound<Vec<u8>>, Bound<Vec<u8>>),
        reverse: bool,
        misuse: Option<Error>,
        decode: Duplicates,
    ) -> Self {
        let empty = is_empty(&lo, &hi);
        let (from, to) = if reverse { (hi, lo) } else { (lo, hi) };
        let batch_bytes = match to {
            Bound::Unbounded => FEW_FIRST_BYTES,
            _ => crate::btree::cursor::RUN_BYTES,
        };
        TxnIter {
            txn,
            db,
            from,
            to,
            reverse,
            batch: Entries::Merged(Vec::new().into_iter()),
            current: Default::default(),
            batch_bytes,
            own_cap: BATCH_CAP,
            done: empty,
            misuse,
            decode,
        }
    }

    /// Reads one entry per batch at first, for a caller that wants only the first (the
    /// batches still grow if it reads on).
    pub(crate) fn one_at_a_time(mut self) -> Self {
        self.batch_bytes = 1;
        self.own_cap = 1;
        self
    }

    /// Reads a small batch first (about half a kilobyte of entries), whatever the range's
    /// end, for a caller that may stop after a few entries (a LIMIT); the batches double
    /// as it reads on. By default a range with an end is read in batches of up to 64 KiB
    /// from the start, which suits a caller that reads it all.
    pub fn few_first(mut self) -> Self {
        self.batch_bytes = self.batch_bytes.min(FEW_FIRST_BYTES);
        self
    }

    /// The interval from `from` to `upto`, as (low, high) bounds.
    fn interval<'a>(
        &'a self,
        upto: &'a Bound<Vec<u8>>,
    ) -> (&'a Bound<Vec<u8>>, &'a Bound<Vec<u8>>) {
        if self.reverse {
            (upto, &self.from)
        } else {
            (&self.from, upto)
        }
    }

    /// Reads the next batch into `run` (the previous batch's, reused); everything in it
    /// comes from one acquisition of the shared lock.
    fn read_batch(&self, e: &Engine, mut run: Run) -> NeedResult<Batch> {
        let forward = !self.reverse;
        let db = self.db.id();
        if e.unseen_db(db, self.txn.snapshot) {
            run.truncate(0);
            return Ok(Batch {
                run,
                overrides: Vec::new(),
                upto: self.to.clone(),
                last: true,
            });
        }
        let limit = (&self.to, self.batch_bytes);
        seek_from(&self.from, forward, |seek| {
            read_run(e, db, seek, forward, limit, &mut run)
        })?;
        // The run is in the order of travel, so the keys beyond the range's end are a
        // suffix of it: found by a binary search (the run read on past the end by at most
        // the entry that shows it).
        let (mut keep, mut past) = (0, run.len());
        while keep < past {
            let mid = keep + (past - keep) / 2;
            match beyond(&self.to, run.key(mid), self.reverse) {
                true => past = mid,
                false => keep = mid + 1,
            }
        }
        let cut = (keep < run.len()).then_some(keep);
        let last = run.len() == 0 || cut.is_some();
        if let Some(i) = cut {
            run.truncate(i);
        }
        let upto = match (last, run.len().checked_sub(1)) {
            (false, Some(i)) => Bound::Included(run.key(i).to_vec()),
            _ => self.to.clone(),
        };
        let interval = self.interval(&upto);
        let (overrides, cut) =
            e.overrides(db, interval, self.txn.snapshot, self.reverse, self.own_cap)?;
        let mut batch = Batch {
            run,
            overrides,
            upto,
            last,
        };
        batch.end_at(cut, self.reverse);
        Ok(batch)
    }

    /// Reads the next batch into `self.batch`.
    fn refill(&mut self) -> Result<()> {
        let created = self.txn.open_state()?.created(self.db.id());
        let mut batch = if created {
            // Created by this transaction: only its own writes are there.
            Batch {
                run: Run::default(),
                overrides: Vec::new(),
                upto: self.to.clone(),
                last: true,
            }
        } else {
            // The previous flat batch's buffers, kept for this one.
            let spare =
                match std::mem::replace(&mut self.batch, Entries::Merged(Vec::new().into_iter())) {
                    Entries::Flat(run, _) => run,
                    Entries::Merged(_) => Run::default(),
                };
            let mut spare = Some(spare);
            self.db
                .read(|e| self.read_batch(e, spare.take().unwrap_or_default()))?
                .0
        };
        // The transaction's writes as they are now (the engine's lock is not held here).
        let (own, cut) = {
            let mut st = self.txn.open_state()?;
            if st.removed(self.db.id()) {
                return Err(crate::error::Error::DbRemoved);
            }
            if st.writes.is_empty() {
                (Vec::new(), None)
            } else {
                let (lo, hi) = self.interval(&batch.upto);
                let (lo, hi) = scoped_range(self.db.id(), lo, hi);
                let (own, cut) = st.writes.range(&lo, &hi, self.reverse, self.own_cap)?;
                (own, cut.map(|c| c[4..].to_vec()))
            }
        };
        batch.end_at(cut, self.reverse);
        // The transaction's own writes, unscoped.
        let own = own.into_iter().map(|(mut k, w)| {
            k.drain(..4);
            (k, w)
        });
        self.batch = if batch.overrides.is_empty() && own.len() == 0 {
            // The tree's entries are the view (already in the direction of travel).
            Entries::Flat(batch.run, 0)
        } else if batch.overrides.is_empty() && batch.run.len() == 0 {
            // The transaction's writes are the view (in the direction of travel too).
            let upto = &batch.upto;
            let entries = own
                .filter(|(k, _)| !beyond(upto, k, self.reverse))
                .filter_map(|(k, w)| Some((k, w?)));
            Entries::Merged(entries.collect::<Vec<_>>().into_iter())
        } else {
            let mut view: BTreeMap<Vec<u8>, Vec<u8>> = batch.run.into_pairs().collect();
            for (k, w) in batch.overrides.into_iter().chain(own) {
                let upto = &batch.upto;
                if beyond(upto, &k, self.reverse) {
                    continue;
                }
                match w {
                    Some(v) => view.insert(k, v),
                    None => view.remove(&k),
                };
            }
            let mut entries: Vec<_> = view.into_iter().collect();
            if self.reverse {
                entries.reverse();
            }
            Entries::Merged(entries.into_iter())
        };
        self.batch_bytes = (self.batch_bytes * 2).min(crate::btree::cursor::RUN_BYTES);
        self.own_cap = (self.own_cap * 2).min(BATCH_CAP);
        self.done = batch.last;
        self.from = match batch.upto {
            Bound::Included(k) => Bound::Excluded(k),
            _ => Bound::Unbounded,
        };
        Ok(())
    }
}

/// Whether no key lies in `(lo, hi)` by the bounds alone (an inverted range, say). Intervals
/// inside a range that is not empty are not empty either, which keeps `BTreeMap::range`
/// (which panics on inverted bounds) safe.
fn is_empty(lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            a >= b
        }
        _ => false,
    }
}

impl Batch {
    /// Ends the batch's interval at `cut` (included), where a capped source stopped, if it
    /// lies before the interval's end: what lies beyond is read by the next batch.
    fn end_at(&mut self, cut: Option<Vec<u8>>, reverse: bool) {
        let Some(c) = cut else { return };
        if beyond(&self.upto, &c, reverse) {
            return;
        }
        let end = Bound::Included(c);
        // The run is in the direction of travel: what lies beyond the cut is its tail.
        let n = self.run.len();
        let keep = (0..n).position(|i| beyond(&end, self.run.key(i), reverse));
        self.run.truncate(keep.unwrap_or(n));
        self.overrides.retain(|(k, _)| !beyond(&end, k, reverse));
        self.upto = end;
        self.last = false;
    }
}

/// One interval's worth of a scan (see the module comment).
struct Batch {
    /// The tree's entries, in the direction of travel.
    run: Run,
    /// Keys the snapshot saw differently, with the value it saw (`None`: absent).
    overrides: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// Where the interval ends (included), or the range's end for the last batch.
    upto: Bound<Vec<u8>>,
    last: bool,
}

#[cfg(test)]
impl TxnIter {
    /// How many entries the current batch still holds.
    pub(crate) fn batch_len(&self) -> usize {
        match &self.batch {
            Entries::Flat(run, next) => run.len() - next,
            Entries::Merged(entries) => entries.len(),
        }
    }
}

/// The entries of the current batch.
enum Entries {
    /// The tree's entries as they were copied (nothing overrides them), and the next one.
    Flat(Run, usize),
    /// The tree's entries merged with what the reader sees otherwise.
    Merged(std::vec::IntoIter<(Vec<u8>, Vec<u8>)>),
}

/// Where `TxnIter::step` found the next entry.
enum Next {
    /// Entry `i` of the flat run.
    Flat(usize),
    Owned((Vec<u8>, Vec<u8>)),
}

impl TxnIter {
    /// Finds the next entry, reading batches as needed.
    fn step(&mut self) -> Option<Result<Next>> {
        if let Some(e) = self.misuse.take() {
            self.done = true;
            return Some(Err(e));
        }
        if let Err(e) = self.db.live() {
            self.done = true;
            return Some(Err(e));
        }
        loop {
            let next = match &mut self.batch {
                Entries::Flat(run, i) if *i < run.len() => {
                    *i += 1;
                    match self.decode {
                        Duplicates::None => Some(Ok(Next::Flat(*i - 1))),
                        dups => Some(
                            crate::dups::decode(dups, run.key(*i - 1), run.value(*i - 1))
                                .map(Next::Owned),
                        ),
                    }
                }
                Entries::Flat(..) => None,
                Entries::Merged(it) => it.next().map(|(k, v)| match self.decode {
                    Duplicates::None => Ok(Next::Owned((k, v))),
                    dups => crate::dups::decode(dups, &k, &v).map(Next::Owned),
                }),
            };
            if next.is_some() {
                return next;
            }
            if self.done {
                return None;
            }
            if let Err(e) = self.refill() {
                self.done = true;
                return Some(Err(e));
            }
        }
    }

    /// The next entry, lent from the scan's buffer rather than copied: the same entries
    /// and errors as `next`, for a reader that only looks at each one.
    pub fn next_ref(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        // The common case first: the next entry of a flat batch, as `step` would give it.
        let plain = self.misuse.is_none() && matches!(self.decode, Duplicates::None);
        let flat_next = match &mut self.batch {
            Entries::Flat(run, i) if plain && *i < run.len() && self.db.live().is_ok() => {
                *i += 1;
                Some(*i - 1)
            }
            _ => None,
        };
        if let Some(i) = flat_next {
            let Entries::Flat(run, _) = &self.batch else {
                unreachable!("matched above")
            };
            return Some(Ok((run.key(i), run.value(i))));
        }
        Some(match self.step()? {
            Ok(Next::Flat(i)) => match &self.batch {
                Entries::Flat(run, _) => Ok((run.key(i), run.value(i))),
                Entries::Merged(_) => unreachable!("a flat entry comes from a flat batch"),
            },
            Ok(Next::Owned(kv)) => {
                self.current = kv;
                Ok((&self.current.0, &self.current.1))
            }
            Err(e) => Err(e),
        })
    }
}

impl Iterator for TxnIter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(match self.step()? {
            Ok(Next::Flat(i)) => match &self.batch {
                Entries::Flat(run, _) => Ok((run.key(i).to_vec(), run.value(i).to_vec())),
                Entries::Merged(_) => unreachable!("a flat entry comes from a flat batch"),
            },
            Ok(Next::Owned(kv)) => Ok(kv),
            Err(e) => Err(e),
        })
    }
}
