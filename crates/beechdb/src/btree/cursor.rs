//! Cursors and range iterators.
//!
//! A cursor copies a run of consecutive entries from one leaf while holding the shared lock
//! briefly, then steps through the copy without locking. The copy stays valid while the
//! environment's data version is unchanged; after any write the cursor re-seeks from its
//! current key, so it always sees the database as it is now (as Berkeley DB cursors do).
//! `visit_leaf` lends a leaf's entries to a closure under the lock instead, copying nothing
//! (a transaction's lookups, `Txn::visit_from`).

use super::node::{self, LeafValue};
use super::tree::{Position, Seek};
use crate::config::Duplicates;
use crate::dups;
use crate::engine::{Engine, NeedResult};
use crate::env::Db;
use crate::error::{Error, Result};
use std::ops::{
    Bound, Range, RangeBounds, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive,
};

/// Bytes copied per refill, at least one entry.
pub(crate) const RUN_BYTES: usize = 64 * 1024;

/// A position in one database. Created by [`Db::cursor`]. In a database with duplicates
/// it stands on one key/value pair.
pub struct Cursor {
    db: Db,
    data: Vec<u8>,
    /// (key start, key len, value start, value len) into `data`, in key order.
    spans: Vec<(usize, usize, usize, usize)>,
    pos: usize,
    version: u64,
    valid: bool,
    /// With duplicates: the user's key and value of the entry the cursor stands on.
    pair: Option<(Vec<u8>, Vec<u8>)>,
}

// `next` and `prev` are Berkeley DB's DB_NEXT and DB_PREV: they move the cursor and report
// whether it is positioned. Iteration is `Iter`'s job.
#[allow(clippy::should_implement_trait)]
impl Cursor {
    pub(crate) fn new(db: Db) -> Cursor {
        Cursor {
            db,
            data: Vec::new(),
            spans: Vec::new(),
            pos: 0,
            version: 0,
            valid: false,
            pair: None,
        }
    }

    /// Moves to the first entry; false if the database is empty.
    pub fn first(&mut self) -> Result<bool> {
        let r = self.fill(Seek::First);
        self.decoded(r)
    }
    /// Moves to the last entry; false if the database is empty.
    pub fn last(&mut self) -> Result<bool> {
        let r = self.fill(Seek::Last);
        self.decoded(r)
    }
    /// Moves to the first entry whose key is `>= key` (with duplicates: to its first pair);
    /// false if there is none.
    pub fn seek(&mut self, key: &[u8]) -> Result<bool> {
        let r = if self.db.duplicates() == Duplicates::None {
            self.fill(Seek::Ge(key))
        } else {
            self.fill(Seek::Ge(&dups::prefix(key)))
        };
        self.decoded(r)
    }

    /// Moves to the next entry; false (and unpositioned) at the end. An unpositioned
    /// cursor moves to the first entry.
    pub fn next(&mut self) -> Result<bool> {
        let r = self.step(true);
        self.decoded(r)
    }

    /// Moves to the previous entry; false (and unpositioned) at the start. An unpositioned
    /// cursor moves to the last entry.
    pub fn prev(&mut self) -> Result<bool> {
        let r = self.step(false);
        self.decoded(r)
    }

    /// Moves to the next pair of the same key (Berkeley DB's `DB_NEXT_DUP`); false, and
    /// not moved, when the key has no more.
    pub fn next_dup(&mut self) -> Result<bool> {
        let (Some(key), Some(here)) = (
            self.key().map(<[u8]>::to_vec),
            self.entry_key().map(<[u8]>::to_vec),
        ) else {
            return Ok(false);
        };
        if self.next()? && self.key() == Some(&key[..]) {
            return Ok(true);
        }
        // Not moved: back onto the entry it stood on.
        let r = self.fill(Seek::Ge(&here));
        self.decoded(r)?;
        Ok(false)
    }

    /// Moves to the first pair of the next key (Berkeley DB's `DB_NEXT_NODUP`); false (and
    /// unpositioned) at the end.
    pub fn next_nodup(&mut self) -> Result<bool> {
        let Some(key) = self.key().map(<[u8]>::to_vec) else {
            return self.first();
        };
        if self.db.duplicates() == Duplicates::None {
            return self.next();
        }
        let r = self.fill(Seek::Ge(&dups::pairs_of(&key).1));
        self.decoded(r)
    }

    /// The number of values of the current key (Berkeley DB's `DBcursor->count`).
    pub fn count(&self) -> Result<u64> {
        match self.key() {
            Some(k) => self.db.count(k),
            None => Err(Error::InvalidArgument(
                "count on a cursor not positioned".into(),
            )),
        }
    }

    fn step(&mut self, forward: bool) -> Result<bool> {
        self.db.live()?;
        if !self.valid {
            return self.fill(if forward { Seek::First } else { Seek::Last });
        }
        if self.fresh() {
            if forward && self.pos + 1 < self.spans.len() {
                self.pos += 1;
                return Ok(true);
            }
            if !forward && self.pos > 0 {
                self.pos -= 1;
                return Ok(true);
            }
        }
        let key = self.entry_key().unwrap().to_vec();
        self.fill(if forward {
            Seek::Gt(&key)
        } else {
            Seek::Lt(&key)
        })
    }

    /// Decodes the pair the cursor stands on, in a database with duplicates.
    fn decoded(&mut self, moved: Result<bool>) -> Result<bool> {
        let dups = self.db.duplicates();
        self.pair = None;
        if dups != Duplicates::None && moved.as_ref().is_ok_and(|&m| m) {
            let (k, v) = (self.entry_key().unwrap(), self.entry_value().unwrap());
            self.pair = Some(dups::decode(dups, k, v)?);
        }
        moved
    }

    /// The current key, if positioned.
    pub fn key(&self) -> Option<&[u8]> {
        match &self.pair {
            Some((k, _)) => Some(k),
            None => self.entry_key(),
        }
    }

    /// The current value, if positioned.
    pub fn value(&self) -> Option<&[u8]> {
        match &self.pair {
            Some((_, v)) => Some(v),
            None => self.entry_value(),
        }
    }

    /// The key of the tree entry the cursor stands on (a composite with duplicates).
    fn entry_key(&self) -> Option<&[u8]> {
        let &(k, kl, _, _) = self.spans.get(self.pos).filter(|_| self.valid)?;
        Some(&self.data[k..k + kl])
    }

    fn entry_value(&self) -> Option<&[u8]> {
        let &(_, _, v, vl) = self.spans.get(self.pos).filter(|_| self.valid)?;
        Some(&self.data[v..v + vl])
    }

    fn fresh(&self) -> bool {
        self.version == self.db.data_version()
    }

    fn fill(&mut self, to: Seek) -> Result<bool> {
        let forward = matches!(to, Seek::First | Seek::Ge(_) | Seek::Gt(_));
        let (data, spans) = (&mut self.data, &mut self.spans);
        let (found, version) = self.db.read_unless_applying(|e| {
            data.clear();
            spans.clear();
            match e.seek(self.db.id(), to)? {
                None => Ok(None),
                Some(pos) => copy_run(
                    e,
                    &pos,
                    forward,
                    data,
                    spans,
                    (&Bound::Unbounded, RUN_BYTES),
                )
                .map(Some),
            }
        })?;
        self.version = version;
        self.valid = found.is_some();
        self.pos = found.unwrap_or(0);
        Ok(self.valid)
    }
}

/// Runs `f` with the seek that finds the first entry within `from` going forward (or the
/// last going back), where `from` is the bound a range walk starts at.
pub(crate) fn seek_from<R>(from: &Bound<Vec<u8>>, forward: bool, f: impl FnOnce(Seek) -> R) -> R {
    match (from, forward) {
        (Bound::Unbounded, true) => f(Seek::First),
        (Bound::Unbounded, false) => f(Seek::Last),
        (Bound::Included(k), true) => f(Seek::Ge(k)),
        (Bound::Excluded(k), true) => f(Seek::Gt(k)),
        (Bound::Excluded(k), false) => f(Seek::Lt(k)),
        // The last key `<= k` is the last one `<` k's successor.
        (Bound::Included(k), false) => f(Seek::Lt(&[&k[..], &[0]].concat())),
    }
}

/// Whether `key` lies beyond `end`, the far end of a range walked forward or, with
/// `reverse`, backward.
pub(crate) fn beyond(end: &Bound<Vec<u8>>, key: &[u8], reverse: bool) -> bool {
    match (end, reverse) {
        (Bound::Unbounded, _) => false,
        (Bound::Included(b), false) => key > &b[..],
        (Bound::Excluded(b), false) => key >= &b[..],
        (Bound::Included(b), true) => key < &b[..],
        (Bound::Excluded(b), true) => key <= &b[..],
    }
}

/// Entries copied out of a leaf: their bytes in one buffer, and where each key and value
/// lies in it, in the order they were read.
#[derive(Default)]
pub(crate) struct Run {
    data: Vec<u8>,
    spans: Vec<(usize, usize, usize, usize)>,
}

impl Run {
    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    pub(crate) fn key(&self, i: usize) -> &[u8] {
        let (k, kl, _, _) = self.spans[i];
        &self.data[k..k + kl]
    }

    pub(crate) fn value(&self, i: usize) -> &[u8] {
        let (_, _, v, vl) = self.spans[i];
        &self.data[v..v + vl]
    }

    /// Keeps the first `n` entries.
    pub(crate) fn truncate(&mut self, n: usize) {
        self.spans.truncate(n);
    }

    /// The entries as owned pairs.
    pub(crate) fn into_pairs(self) -> impl Iterator<Item = (Vec<u8>, Vec<u8>)> {
        (0..self.len()).map(move |i| (self.key(i).to_vec(), self.value(i).to_vec()))
    }
}

/// Calls `f` with the entries of `db` from the first `from` finds to the end of that
/// entry's leaf, until `f` returns `false`. Returns `None` when the walk is over (`f` ended
/// it, or no entry is left), else the last key lent, after which a walk that goes on
/// resumes (the leaf's last, or the key before an entry whose key or value lies on other
/// pages). Only the descent and the first entry may need a page: once `f` has been
/// called, nothing is retried.
pub(crate) fn visit_leaf(
    e: &Engine,
    db: u32,
    from: Seek,
    mut f: impl FnMut(&[u8], &[u8]) -> bool,
) -> NeedResult<Option<Vec<u8>>> {
    let Some(pos) = e.seek(db, from)? else {
        return Ok(None);
    };
    let p = e.pager.page(pos.leaf)?;
    let n = node::nslots(p);
    let mut overflow = Vec::new();
    for i in pos.idx..n {
        if let Some((entry, klen)) = node::inline_entry(p, i) {
            if !f(&entry[..klen], &entry[klen..]) {
                return Ok(None);
            }
            continue;
        }
        if i > pos.idx {
            // Reading it may need a page: the walk resumes before it instead.
            return Ok(Some(e.full_key(p, i - 1)?.into_owned()));
        }
        let key = e.full_key(p, i)?;
        let go_on = match node::leaf_value(p, i) {
            LeafValue::Inline(v) => f(&key, v),
            LeafValue::Overflow { first, len } => {
                e.read_overflow(first, len, &mut overflow)?;
                f(&key, &overflow)
            }
        };
        if !go_on {
            return Ok(None);
        }
    }
    Ok(Some(e.full_key(p, n - 1)?.into_owned()))
}

/// Up to one leaf's run of entries (at most `max_bytes` and up to the first key beyond
/// `end`, at least one) from the position `to` finds, in the direction of travel: ascending
/// from it when `forward`, else descending. Read into `run` (emptied first), whose buffers
/// a scan reuses from batch to batch.
pub(crate) fn read_run(
    e: &Engine,
    db: u32,
    to: Seek,
    forward: bool,
    (end, max_bytes): (&Bound<Vec<u8>>, usize),
    run: &mut Run,
) -> NeedResult<()> {
    run.data.clear();
    run.spans.clear();
    let Some(pos) = e.seek(db, to)? else {
        return Ok(());
    };
    let at = copy_run(
        e,
        &pos,
        forward,
        &mut run.data,
        &mut run.spans,
        (end, max_bytes),
    )?;
    if !forward {
        run.spans.truncate(at + 1);
        run.spans.reverse();
    }
    Ok(())
}

/// Copies entries of `pos.leaf` into `data`/`spans`: from `pos.idx` on when moving forward,
/// up to `pos.idx` when moving back. Returns the index of `pos.idx`'s entry in `spans`.
fn copy_run(
    e: &Engine,
    pos: &Position,
    forward: bool,
    data: &mut Vec<u8>,
    spans: &mut Vec<(usize, usize, usize, usize)>,
    (end, max_bytes): (&Bound<Vec<u8>>, usize),
) -> NeedResult<usize> {
    let p = e.pager.page(pos.leaf)?;
    let n = node::nslots(p);
    if forward {
        // One pass: each entry is copied, then decides whether the run goes on. Entries
        // with a long key or an overflow value end it unless first (so that a huge run is
        // never copied); a page without long keys needs no check of its keys.
        let plain = !node::has_long_keys(p);
        // On a page without long keys, the first entry beyond `end` is found once (by a
        // search) rather than by comparing every key copied.
        let (stop, checked) = match end {
            Bound::Included(b) | Bound::Excluded(b) if plain => {
                let first_beyond = match (node::search(p, b), end) {
                    (Ok(i), Bound::Included(_)) => i + 1,
                    (Ok(i) | Err(i), _) => i,
                };
                ((first_beyond + 1).min(n), false)
            }
            _ => (n, true),
        };
        reserve(data, max_bytes.min(p.len()));
        reserve(spans, stop.saturating_sub(pos.idx));
        let mut bytes = 0;
        for i in pos.idx..stop {
            let ks = data.len();
            match node::inline_entry(p, i) {
                // The common entry (a short key, an inline value) in one copy.
                Some((entry, klen)) => push_inline(data, spans, entry, klen),
                None if i > pos.idx => break,
                None => copy_whole(e, p, i, data, spans)?,
            }
            bytes += data.len() - ks;
            let klen = spans[spans.len() - 1].1;
            // One entry past the end is enough to show the run reached it.
            if bytes >= max_bytes || (checked && beyond(end, &data[ks..ks + klen], false)) {
                break;
            }
        }
        return Ok(0);
    }
    // Backward: pick the slot range first, then copy it in ascending order. Entries with a
    // long key or an overflow value end the run unless first.
    let (mut lo, hi) = (pos.idx, pos.idx + 1);
    let mut bytes = node::cell(p, pos.idx).len();
    if !node::has_long_keys(p) {
        // The lowest entry to copy (one past `end`, if the leaf holds one) is found once, by
        // a search, rather than by comparing every key.
        let floor = match end {
            Bound::Included(b) | Bound::Excluded(b) => {
                let first_within = match (node::search(p, b), end) {
                    (Ok(i), Bound::Excluded(_)) => i + 1,
                    (Ok(i) | Err(i), _) => i,
                };
                first_within.saturating_sub(1)
            }
            Bound::Unbounded => 0,
        };
        while lo > floor && bytes < max_bytes {
            let Some((entry, _)) = node::inline_entry(p, lo - 1) else {
                break;
            };
            bytes += entry.len();
            lo -= 1;
        }
    } else {
        while let Some(i) = lo.checked_sub(1).filter(|_| bytes < max_bytes) {
            if beyond(end, &e.full_key(p, lo)?, true) || node::inline_entry(p, i).is_none() {
                break;
            }
            bytes += node::cell(p, i).len();
            lo -= 1;
        }
    }
    reserve(data, bytes);
    reserve(spans, hi - lo);
    for i in lo..hi {
        match node::inline_entry(p, i) {
            Some((entry, klen)) => push_inline(data, spans, entry, klen),
            None => copy_whole(e, p, i, data, spans)?,
        }
    }
    Ok(pos.idx - lo)
}

/// `v.reserve(n)`, but an empty `v` too small is replaced rather than grown: a run's
/// buffers are cleared between batches, and growing them would copy the old allocation
/// (`realloc` knows its size, not what of it is in use).
fn reserve<T>(v: &mut Vec<T>, n: usize) {
    if v.is_empty() && v.capacity() < n {
        *v = Vec::with_capacity(n);
    } else {
        v.reserve(n);
    }
}

/// Copies an entry [`node::inline_entry`] gave (a short key, an inline value) in one piece.
fn push_inline(
    data: &mut Vec<u8>,
    spans: &mut Vec<(usize, usize, usize, usize)>,
    entry: &[u8],
    klen: usize,
) {
    let ks = data.len();
    data.extend_from_slice(entry);
    spans.push((ks, klen, ks + klen, entry.len() - klen));
}

/// Copies entry `i` of leaf `p` whole: its long key's rest and its overflow value read.
fn copy_whole(
    e: &Engine,
    p: &[u8],
    i: usize,
    data: &mut Vec<u8>,
    spans: &mut Vec<(usize, usize, usize, usize)>,
) -> NeedResult<()> {
    let ks = data.len();
    data.extend_from_slice(&e.full_key(p, i)?);
    let vs = data.len();
    match node::leaf_value(p, i) {
        LeafValue::Inline(v) => data.extend_from_slice(v),
        LeafValue::Overflow { first, len } => e.read_overflow(first, len, data)?,
    }
    spans.push((ks, vs - ks, vs, data.len() - vs));
    Ok(())
}

/// An iterator over a key range, forward or backward. Created by [`Db::range`],
/// [`Db::range_rev`] and [`Db::iter`]. In a database with duplicates it yields every pair.
pub struct Iter {
    cursor: Cursor,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    reverse: bool,
    started: bool,
    done: bool,
    /// Decode composite entries into pairs (a database with duplicates, walked for users).
    decode: Duplicates,
}

/// A range of keys, as the scans of [`Db`] and [`crate::Txn`] take it: `..`, `a..b`,
/// `a..=b`, `a..`, `..b`, `..=b`, or a pair of [`Bound`]s, where the keys are anything that
/// is bytes (`&[u8]`, `Vec<u8>`, `&str`, ...). `..` needs no key type, unlike
/// [`RangeBounds`], whose full range cannot say what its keys are.
pub trait KeyRange {
    /// The range's start and end.
    fn bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>);
}

fn owned<K: AsRef<[u8]>>(b: Bound<&K>) -> Bound<Vec<u8>> {
    b.map(|k| k.as_ref().to_vec())
}

impl KeyRange for RangeFull {
    fn bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        (Bound::Unbounded, Bound::Unbounded)
    }
}

macro_rules! key_range {
    ($($t:ty),*) => {$(
        impl<K: AsRef<[u8]>> KeyRange for $t {
            fn bounds(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
                (owned(self.start_bound()), owned(self.end_bound()))
            }
        }
    )*};
}
key_range!(
    Range<K>,
    RangeInclusive<K>,
    RangeFrom<K>,
    RangeTo<K>,
    RangeToInclusive<K>,
    (Bound<K>, Bound<K>)
);

impl Iter {
    pub(crate) fn new(db: Db, range: impl KeyRange, reverse: bool) -> Iter {
        let (start, end) = range.bounds();
        let decode = db.duplicates();
        let (start, end) = match decode {
            Duplicates::None => (start, end),
            _ => dups::range(start, end),
        };
        Iter::over(db, (start, end), reverse, decode)
    }

    /// The tree's entries as they are (composites, in a database with duplicates).
    pub(crate) fn entries(db: Db, bounds: (Bound<Vec<u8>>, Bound<Vec<u8>>), reverse: bool) -> Iter {
        Iter::over(db, bounds, reverse, Duplicates::None)
    }

    fn over(
        db: Db,
        (start, end): (Bound<Vec<u8>>, Bound<Vec<u8>>),
        reverse: bool,
        decode: Duplicates,
    ) -> Iter {
        Iter {
            cursor: Cursor::new(db),
            start,
            end,
            reverse,
            started: false,
            done: false,
            decode,
        }
    }

    fn position(&mut self) -> Result<bool> {
        if self.started {
            return self.cursor.step(!self.reverse);
        }
        self.started = true;
        let from = if self.reverse { &self.end } else { &self.start };
        let cursor = &mut self.cursor;
        seek_from(from, !self.reverse, |seek| cursor.fill(seek))
    }

    fn in_range(&self, key: &[u8]) -> bool {
        let end = if self.reverse { &self.start } else { &self.end };
        !beyond(end, key, self.reverse)
    }
}

impl Iterator for Iter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.position() {
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
            Ok(false) => {
                self.done = true;
                None
            }
            Ok(true) => {
                let key = self.cursor.entry_key().unwrap();
                if !self.in_range(key) {
                    self.done = true;
                    return None;
                }
                let value = self.cursor.entry_value().unwrap();
                Some(match self.decode {
                    Duplicates::None => Ok((key.to_vec(), value.to_vec())),
                    dups => dups::decode(dups, key, value),
                })
            }
        }
    }
}
