//! Tree algorithms as engine methods: reads that run under the shared lock (`&self`,
//! reporting a non-resident page as `Need::Page`), and writes under the exclusive lock.

use super::node::{self, LeafValue, BRANCH_CELL_HDR, LEAF_CELL_HDR, LONG_KEY, OVERFLOW_FLAG};
use crate::engine::{Engine, LeafHint, Need, NeedResult, CATALOG};
use crate::error::{Error, Result};
use crate::storage::page::{KIND_BRANCH, KIND_LEAF};
use std::borrow::Cow;
use std::cell::RefCell;

/// Largest value accepted: 4 GiB - 1 (lengths are stored in 32 bits).
pub(crate) const MAX_VALUE_LEN_USIZE: usize = u32::MAX as usize;

/// Inserts in a row, each one slot after the one before, that make a sorted load.
const SORTED_RUN: u32 = 32;

/// Largest key accepted: 16 MiB. Keys longer than a quarter page are long keys, their rest
/// in an overflow chain (see `node`); every copy of a key (locks, write sets, the log) is
/// held in memory, hence a bound far below the value's.
pub(crate) const MAX_KEY_LEN: usize = 16 << 20;

/// A key as a new cell holds it: the `klen` field and the key part (the key itself, or a
/// long key's first bytes and the reference to its rest).
pub(crate) struct KeyPart<'a> {
    field: usize,
    bytes: Cow<'a, [u8]>,
}

/// Where a cursor should land.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Seek<'a> {
    First,
    Last,
    /// First key `>=`.
    Ge(&'a [u8]),
    /// First key `>`.
    Gt(&'a [u8]),
    /// Last key `<`.
    Lt(&'a [u8]),
}

/// The branch pages a descent passed and the child it took in each: on the stack for any
/// tree of up to 8 levels (a seek allocates nothing).
type Path = smallvec::SmallVec<[(u64, usize); 8]>;

/// A position: leaf page and slot.
pub(crate) struct Position {
    pub leaf: u64,
    pub idx: usize,
}

impl Engine {
    /// Binary search of any node: `Ok(i)` when cell `i` has the key, else `Err(i)` where it
    /// would go. Reads a long key's rest only when its first bytes do not decide.
    #[inline(always)]
    pub(crate) fn search(&self, p: &[u8], k: &[u8]) -> Result<std::result::Result<usize, usize>> {
        if !node::has_long_keys(p) {
            return Ok(node::search(p, k));
        }
        self.search_long(p, k)
    }

    /// [`Engine::search`] for a key about to be written into `leaf` (see
    /// `node::search_for_insert`; the last insert, when into `leaf`, is where the key may
    /// follow).
    #[inline(always)]
    fn search_for_insert(&self, leaf: u64, k: &[u8]) -> Result<std::result::Result<usize, usize>> {
        let p = self.pager.node(leaf);
        if !node::has_long_keys(p) {
            let after = match self.last_insert {
                Some((pid, i)) if pid == leaf => Some(i),
                _ => None,
            };
            return Ok(node::search_for_insert(p, k, after));
        }
        self.search_long(p, k)
    }

    #[cold]
    #[inline(never)]
    fn search_long(&self, p: &[u8], k: &[u8]) -> Result<std::result::Result<usize, usize>> {
        node::search_long(p, k, &|first, len| self.long_key_rest(first, len))
    }

    /// The index of the child of branch `p` whose range holds `k`.
    #[inline(always)]
    pub(crate) fn child_index(&self, p: &[u8], k: &[u8]) -> Result<usize> {
        Ok(match self.search(p, k)? {
            Ok(i) => i + 1,
            Err(i) => i,
        })
    }

    fn long_key_rest(&self, first: u64, len: u32) -> Result<Vec<u8>> {
        let mut rest = Vec::new();
        self.read_overflow(first, len, &mut rest)?;
        Ok(rest)
    }

    /// The whole key of cell `i` of node `p`.
    #[inline]
    pub(crate) fn full_key<'p>(&self, p: &'p [u8], i: usize) -> Result<Cow<'p, [u8]>> {
        match node::long_key(p, i) {
            None => Ok(Cow::Borrowed(node::key(p, i))),
            Some(_) => self.cell_key(node::cell(p, i), node::is_leaf(p)),
        }
    }

    /// The whole key of a raw cell of a leaf or branch.
    fn cell_key<'c>(&self, c: &'c [u8], leaf: bool) -> Result<Cow<'c, [u8]>> {
        let (field, part) = node::cell_key_part(c, leaf);
        Ok(match node::key_part_rest(field, part) {
            None => Cow::Borrowed(part),
            Some((first, len)) => {
                let mut k = part[..field & !LONG_KEY].to_vec();
                self.read_overflow(first, len, &mut k)?;
                Cow::Owned(k)
            }
        })
    }

    /// `key` as a new cell holds it: itself, or, when longer than a page takes whole, its
    /// first bytes and a new overflow chain with the rest.
    #[inline(always)]
    fn encode_key<'k>(&mut self, key: &'k [u8]) -> Result<KeyPart<'k>> {
        if key.len() <= self.pager.layout.max_key {
            return Ok(KeyPart {
                field: key.len(),
                bytes: Cow::Borrowed(key),
            });
        }
        self.encode_long_key(key)
    }

    #[cold]
    #[inline(never)]
    fn encode_long_key<'k>(&mut self, key: &'k [u8]) -> Result<KeyPart<'k>> {
        let held = self.pager.layout.long_prefix;
        let first = self.write_overflow(&key[held..])?;
        let mut bytes = key[..held].to_vec();
        bytes.extend_from_slice(&node::overflow_ref(first, (key.len() - held) as u32));
        Ok(KeyPart {
            field: held | LONG_KEY,
            bytes: Cow::Owned(bytes),
        })
    }

    #[inline]
    pub(crate) fn root(&self, db: u32) -> Result<u64> {
        Ok(self.db(db)?.root)
    }

    /// For a delete of `key` about to be applied: makes resident (through `Need::Page`) the
    /// path to its leaf and, for each node on it from the leaf up that is near a quarter
    /// full (the delete may make it merge, and its parent lose an entry), the sibling
    /// [`Engine::rebalance`] would merge it with. So that a commit loads them before it
    /// takes the exclusive lock.
    pub(crate) fn locate_for_delete(&self, db: u32, key: &[u8]) -> NeedResult<()> {
        let mut path = Path::new();
        let mut pid = self.descend(self.root(db)?, Seek::Ge(key), &mut path)?;
        // Under a quarter full it merges; an eighth more covers the entry this removes (and
        // others of the same commit).
        let capacity = self.pager.layout.capacity();
        while let Some((parent, ci)) = path.pop() {
            if node::used(self.pager.page(pid)?) >= capacity / 4 + capacity / 8 {
                break;
            }
            let p = self.pager.page(parent)?;
            if node::nslots(p) == 0 {
                break;
            }
            let sibling = if ci > 0 { ci - 1 } else { 1 };
            self.pager.page(node::child(p, sibling))?;
            pid = parent;
        }
        Ok(())
    }

    /// Finds `key`: the leaf and slot holding it, if present. Each thread keeps a hint of the
    /// last leaf it read and that leaf's key range; a read inside the range, in the same
    /// epoch, skips the descent.
    #[inline]
    pub(crate) fn locate(&self, db: u32, key: &[u8]) -> NeedResult<Option<(u64, usize)>> {
        thread_local! {
            static READ_HINT: RefCell<LeafHint> = RefCell::new(LeafHint::default());
        }
        READ_HINT.with(|cell| {
            let mut h = cell.borrow_mut();
            if h.valid
                && h.instance == self.instance
                && h.db == db
                && h.epoch == self.pager.epoch
                && h.lo.as_deref().is_none_or(|lo| key >= lo)
                && h.hi.as_deref().is_none_or(|hi| key < hi)
            {
                if let Some(p) = self.pager.cache.get(h.leaf) {
                    self.pager.cache.count_hits(1);
                    return Ok(self.search(p, key)?.ok().map(|i| (h.leaf, i)));
                }
            }
            h.valid = false;
            let (mut lo, mut hi): (Option<&[u8]>, Option<&[u8]>) = (None, None);
            let mut exact = true;
            let mut pid = self.root(db)?;
            let mut visited = 1;
            loop {
                let p = self.pager.page(pid)?;
                if node::is_leaf(p) {
                    self.pager.cache.count_hits(visited);
                    set_bound(&mut h.lo, lo);
                    set_bound(&mut h.hi, hi);
                    (h.valid, h.instance, h.db, h.epoch, h.leaf) =
                        (exact, self.instance, db, self.pager.epoch, pid);
                    return Ok(self.search(p, key)?.ok().map(|i| (pid, i)));
                }
                let idx = self.child_index(p, key)?;
                exact &= bounds(p, idx, &mut lo, &mut hi);
                pid = node::child(p, idx);
                visited += 1;
            }
        })
    }

    /// Calls `f` with the value in slot `idx` of resident leaf `leaf`.
    pub(crate) fn with_value<R>(
        &self,
        leaf: u64,
        idx: usize,
        f: impl FnOnce(&[u8]) -> R,
    ) -> NeedResult<R> {
        match node::leaf_value(self.pager.page(leaf)?, idx) {
            LeafValue::Inline(v) => Ok(f(v)),
            LeafValue::Overflow { first, len } => {
                let mut v = Vec::new();
                self.read_overflow(first, len, &mut v)?;
                Ok(f(&v))
            }
        }
    }

    /// Descends from `root` towards `key` (or the leftmost/rightmost edge), recording the path.
    fn descend(&self, root: u64, to: Seek, path: &mut Path) -> NeedResult<u64> {
        path.clear();
        let mut pid = root;
        loop {
            let p = self.pager.page(pid)?;
            if node::is_leaf(p) {
                return Ok(pid);
            }
            let idx = match to {
                Seek::First => 0,
                Seek::Last => node::nslots(p),
                Seek::Ge(k) | Seek::Gt(k) | Seek::Lt(k) => self.child_index(p, k)?,
            };
            path.push((pid, idx));
            pid = node::child(p, idx);
        }
    }

    /// Moves to the next (or previous) leaf along `path`; `None` at the end of the tree.
    fn step_leaf(&self, path: &mut Path, forward: bool) -> NeedResult<Option<u64>> {
        loop {
            let Some(&(pid, idx)) = path.last() else {
                return Ok(None);
            };
            let n = node::nslots(self.pager.page(pid)?);
            if (forward && idx < n) || (!forward && idx > 0) {
                let idx = if forward { idx + 1 } else { idx - 1 };
                path.last_mut().unwrap().1 = idx;
                let mut child = node::child(self.pager.page(pid)?, idx);
                loop {
                    let p = self.pager.page(child)?;
                    if node::is_leaf(p) {
                        return Ok(Some(child));
                    }
                    let i = if forward { 0 } else { node::nslots(p) };
                    path.push((child, i));
                    child = node::child(p, i);
                }
            }
            path.pop();
        }
    }

    /// Positions on the entry `to` names, skipping empty leaves; `None` if there is none.
    pub(crate) fn seek(&self, db: u32, to: Seek) -> NeedResult<Option<Position>> {
        let mut path = Path::new();
        let mut leaf = self.descend(self.root(db)?, to, &mut path)?;
        let p = self.pager.page(leaf)?;
        let n = node::nslots(p) as isize;
        let forward = matches!(to, Seek::First | Seek::Ge(_) | Seek::Gt(_));
        let mut idx: isize = match to {
            Seek::First => 0,
            Seek::Last => n - 1,
            Seek::Ge(k) => self.search(p, k)?.unwrap_or_else(|i| i) as isize,
            Seek::Gt(k) => self.search(p, k)?.map(|i| i + 1).unwrap_or_else(|i| i) as isize,
            Seek::Lt(k) => self.search(p, k)?.unwrap_or_else(|i| i) as isize - 1,
        };
        loop {
            let n = node::nslots(self.pager.page(leaf)?) as isize;
            if idx >= 0 && idx < n {
                return Ok(Some(Position {
                    leaf,
                    idx: idx as usize,
                }));
            }
            match self.step_leaf(&mut path, forward)? {
                None => return Ok(None),
                Some(l) => {
                    leaf = l;
                    idx = if forward {
                        0
                    } else {
                        node::nslots(self.pager.page(l)?) as isize - 1
                    };
                }
            }
        }
    }

    /// Every entry of a database, in order (used for the catalog at open).
    pub(crate) fn scan_all(&mut self, db: u32) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let pos = loop {
                let to = after.as_deref().map_or(Seek::First, Seek::Gt);
                match self.seek(db, to) {
                    Ok(p) => break p,
                    Err(Need::Page(pid)) => self.pager.load(pid)?,
                    Err(Need::Fail(e)) => return Err(e),
                }
            };
            let Some(pos) = pos else { return Ok(out) };
            let p = self.pager.node(pos.leaf);
            for i in pos.idx..node::nslots(p) {
                let v = match node::leaf_value(p, i) {
                    LeafValue::Inline(v) => v.to_vec(),
                    LeafValue::Overflow { first, len } => {
                        let mut v = Vec::new();
                        self.read_overflow(first, len, &mut v)?;
                        v
                    }
                };
                out.push((self.full_key(p, i)?.into_owned(), v));
            }
            after = Some(out.last().unwrap().0.clone());
        }
    }

    /// Loads the root-to-leaf path for `key` and returns the leaf. Uses the leaf hint when
    /// the key lies in the range of the last leaf written and no tree changed shape since.
    fn descend_mut(&mut self, db: u32, key: &[u8], path: &mut Vec<(u64, usize)>) -> Result<u64> {
        match self.descend_mut_with(db, key, path, true) {
            Ok(leaf) => Ok(leaf),
            Err(Need::Fail(e)) => Err(e),
            Err(Need::Page(_)) => unreachable!("a descent that loads needs no page"),
        }
    }

    /// [`Engine::descend_mut`], which with `load` false fails with [`Need::Page`] at a page
    /// not in the cache rather than load it.
    fn descend_mut_with(
        &mut self,
        db: u32,
        key: &[u8],
        path: &mut Vec<(u64, usize)>,
        load: bool,
    ) -> NeedResult<u64> {
        let h = &self.hint;
        if h.valid
            && h.db == db
            && h.epoch == self.pager.epoch
            && h.lo.as_deref().is_none_or(|lo| key >= lo)
            && h.hi.as_deref().is_none_or(|hi| key < hi)
        {
            path.clone_from(&h.path);
            self.pager.cache.count_hits(1);
            return Ok(h.leaf);
        }
        path.clear();
        let (mut lo, mut hi): (Option<&[u8]>, Option<&[u8]>) = (None, None);
        let mut exact = true;
        let mut pid = self.root(db)?;
        loop {
            let Some(p) = self.pager.cache.get(pid) else {
                if !load {
                    return Err(Need::Page(pid));
                }
                self.pager.load(pid)?;
                // Loading may evict nothing here (eviction runs after the operation), but
                // the bounds borrowed from pages must be re-read: start again.
                path.clear();
                (lo, hi, exact) = (None, None, true);
                pid = self.root(db)?;
                continue;
            };
            if node::is_leaf(p) {
                self.pager.cache.count_hits(path.len() as u64 + 1);
                let h = &mut self.hint;
                set_bound(&mut h.lo, lo);
                set_bound(&mut h.hi, hi);
                (h.valid, h.db, h.epoch, h.leaf) = (exact, db, self.pager.epoch, pid);
                h.path.clone_from(path);
                return Ok(pid);
            }
            let idx = self.child_index(p, key)?;
            exact &= bounds(p, idx, &mut lo, &mut hi);
            path.push((pid, idx));
            pid = node::child(p, idx);
        }
    }

    /// Relocates `pid` off the durable checkpoint if needed; returns its writable number.
    fn relocate(&mut self, pid: u64) -> u64 {
        if self.pager.space.is_fresh(pid) {
            return pid;
        }
        self.pager.epoch += 1;
        let new = self.pager.space.allocate();
        if self.pager.retire_frame(pid) {
            // The old image stays for the checkpoint in flight; the copy moves on.
            let mut copy = self.pager.cache.buffer();
            copy.copy_from_slice(self.pager.cache.get(pid).expect("a resident page"));
            self.pager.cache.insert(new, copy, true);
        } else {
            self.pager.cache.rekey(pid, new);
        }
        self.pager.space.release(pid);
        new
    }

    /// Makes the path and the leaf writable (copy-on-write), fixing parent pointers and the
    /// root. Updates `path` in place and returns the leaf's writable number.
    fn make_writable(&mut self, db: u32, path: &mut [(u64, usize)], leaf: u64) -> u64 {
        if self.pager.space.is_fresh(leaf) {
            // Ancestors of a fresh page are fresh: nothing moves.
            self.pager.node_mut(leaf);
            return leaf;
        }
        let mut parent: Option<(u64, usize)> = None;
        for level in 0..=path.len() {
            let old = if level < path.len() {
                path[level].0
            } else {
                leaf
            };
            let new = self.relocate(old);
            self.pager.node_mut(new);
            if new != old {
                match parent {
                    Some((pp, idx)) => node::set_child(self.pager.node_mut(pp), idx, new),
                    None => self.set_root(db, new),
                }
            }
            if level < path.len() {
                path[level].0 = new;
                parent = Some((new, path[level].1));
            } else {
                return new;
            }
        }
        unreachable!()
    }

    fn set_root(&mut self, db: u32, root: u64) {
        let d = self.db_mut(db);
        d.root = root;
        d.catalog_dirty = db != CATALOG;
    }

    fn add_entries(&mut self, db: u32, delta: i64) {
        let d = self.db_mut(db);
        d.entries = d.entries.wrapping_add_signed(delta);
        d.catalog_dirty = db != CATALOG;
    }

    /// Runs `f` with the engine's path buffer (kept between calls, so a descent allocates
    /// nothing).
    fn with_path<R>(&mut self, f: impl FnOnce(&mut Self, &mut Vec<(u64, usize)>) -> R) -> R {
        let mut path = std::mem::take(&mut self.path_buf);
        let r = f(self, &mut path);
        self.path_buf = path;
        r
    }

    /// Stores `value` under `key`; with `no_overwrite` an existing key is `KeyExists`.
    /// Returns whether the key existed.
    pub(crate) fn put(
        &mut self,
        db: u32,
        key: &[u8],
        value: &[u8],
        no_overwrite: bool,
    ) -> Result<bool> {
        check_sizes(key, value)?;
        self.with_path(|e, path| {
            let leaf = e.descend_mut(db, key, path)?;
            let found = e.search_for_insert(leaf, key)?;
            e.put_found(db, key, value, no_overwrite, path, leaf, found)
        })
    }

    /// As [`Engine::put`] (no overwrite check), for a commit applied in batches under the
    /// exclusive lock: it loads no page, failing with [`Need::Page`] before it changes
    /// anything when one it needs is not resident, and sets `before` to the value it
    /// replaces (for readers of older snapshots) from the same descent.
    pub(crate) fn put_resident(
        &mut self,
        db: u32,
        key: &[u8],
        value: &[u8],
        before: &mut Option<Vec<u8>>,
    ) -> NeedResult<()> {
        check_sizes(key, value)?;
        self.with_path(|e, path| {
            let leaf = e.descend_mut_with(db, key, path, false)?;
            let found = e.search_for_insert(leaf, key)?;
            *before = match found {
                // Reads a long value's pages, so the put finds them resident.
                Ok(i) => Some(e.with_value(leaf, i, <[u8]>::to_vec)?),
                Err(_) => None,
            };
            e.put_found(db, key, value, false, path, leaf, found)?;
            Ok(())
        })
    }

    /// The put of `key` into `leaf`, where `found` says where it is (or goes).
    #[allow(clippy::too_many_arguments)]
    fn put_found(
        &mut self,
        db: u32,
        key: &[u8],
        value: &[u8],
        no_overwrite: bool,
        path: &mut Vec<(u64, usize)>,
        leaf: u64,
        found: std::result::Result<usize, usize>,
    ) -> Result<bool> {
        let key_len = if key.len() > self.pager.layout.max_key {
            self.pager.layout.long_prefix + node::OVERFLOW_REF
        } else {
            key.len()
        };
        let inline = self.pager.layout.fits_inline(key_len, value.len());
        let mut old_chain = None;
        if let Ok(i) = found {
            if no_overwrite {
                return Err(Error::KeyExists);
            }
            match node::leaf_value(self.pager.node(leaf), i) {
                LeafValue::Inline(old) if inline && old.len() == value.len() => {
                    let leaf = self.make_writable(db, path, leaf);
                    node::overwrite_inline_value(self.pager.node_mut(leaf), i, value);
                    return Ok(true);
                }
                LeafValue::Overflow { first, len } => {
                    old_chain = Some(self.overflow_pages(first, len)?)
                }
                LeafValue::Inline(_) => {}
            }
        }
        // A replaced long key keeps its key part (its rest stays where it is).
        let kpart = match found {
            Ok(i) if node::long_key(self.pager.node(leaf), i).is_some() => {
                let (field, bytes) = node::key_part(self.pager.node(leaf), i);
                KeyPart {
                    field,
                    bytes: Cow::Owned(bytes.to_vec()),
                }
            }
            _ => self.encode_key(key)?,
        };
        let ovf = if inline {
            None
        } else {
            Some(self.write_overflow(value)?)
        };
        let leaf = self.make_writable(db, path, leaf);
        let idx = match found {
            Ok(i) => {
                node::remove(self.pager.node_mut(leaf), i);
                i
            }
            Err(i) => {
                self.add_entries(db, 1);
                i
            }
        };
        for pid in old_chain.into_iter().flatten() {
            self.pager.space.release(pid);
        }
        let ovf_ref;
        let (vfield, vbytes): (u32, &[u8]) = match ovf {
            None => (value.len() as u32, value),
            Some(first) => {
                ovf_ref = node::overflow_ref(first, value.len() as u32);
                (OVERFLOW_FLAG, &ovf_ref)
            }
        };
        let hdr = node::leaf_cell_header(kpart.field, vfield);
        let kbytes = &kpart.bytes[..];
        let follows = idx > 0 && self.last_insert == Some((leaf, idx - 1));
        self.insert_run = if follows {
            self.insert_run.saturating_add(1)
        } else {
            0
        };
        if node::insert(self.pager.node_mut(leaf), idx, &[&hdr, kbytes, vbytes]) {
            self.last_insert = found.is_err().then_some((leaf, idx));
        } else {
            let mut cell = Vec::with_capacity(LEAF_CELL_HDR + kbytes.len() + vbytes.len());
            cell.extend_from_slice(&hdr);
            cell.extend_from_slice(kbytes);
            cell.extend_from_slice(vbytes);
            self.split(db, path, leaf, idx, &cell)?;
        }
        Ok(found.is_ok())
    }

    /// Splits full node `pid` while inserting `cell` at slot `idx`, then inserts the
    /// separator into the parent (splitting upwards as needed).
    fn split(
        &mut self,
        db: u32,
        path: &mut Vec<(u64, usize)>,
        pid: u64,
        idx: usize,
        cell: &[u8],
    ) -> Result<()> {
        let (leaf, n) = {
            let p = self.pager.node(pid);
            (node::is_leaf(p), node::nslots(p))
        };
        let sorted_run =
            self.insert_run >= SORTED_RUN && idx > 0 && self.last_insert == Some((pid, idx - 1));
        let rightmost = || {
            path.iter()
                .all(|&(p, i)| i == node::nslots(self.pager.node(p)))
        };
        if leaf && idx == n && (sorted_run || rightmost()) {
            // Appending past a full leaf's last entry, at the right edge of the tree or in a
            // sorted run (a load, also below larger keys): the leaf stays as it is, full,
            // and the entry starts the next one, with nothing copied.
            let last = node::cell(self.pager.node(pid), n - 1).to_vec();
            let sep = self.leaf_separator(&last, cell)?;
            let right = self.pager.new_node(KIND_LEAF);
            let fits = node::insert(self.pager.node_mut(right), 0, &[cell]);
            debug_assert!(fits, "a cell fits an empty leaf");
            self.last_insert = Some((right, 0));
            return self.insert_separator(db, path, pid, sep, right);
        }
        let scratch = self.pager.node(pid).to_vec();
        let mut cells: Vec<&[u8]> = (0..n).map(|i| node::cell(&scratch, i)).collect();
        cells.insert(idx, cell);
        let sep = if leaf {
            // Inside a sorted run (an append past the last entry went above): split where
            // the insert goes, leaving the left page full.
            let fits = |part: &[&[u8]]| {
                part.iter().map(|c| c.len() + 2).sum::<usize>() <= self.pager.layout.capacity()
            };
            let sequential = sorted_run && fits(&cells[idx..]);
            let at = if sequential {
                idx
            } else {
                balanced_split(&cells)
            };
            let sep = self.leaf_separator(cells[at - 1], cells[at])?;
            let right = self.pager.new_node(KIND_LEAF);
            node::rebuild(self.pager.node_mut(pid), &cells[..at]);
            node::rebuild(self.pager.node_mut(right), &cells[at..]);
            self.last_insert = sequential.then_some((right, 0));
            (sep, right)
        } else {
            // The middle cell moves up (a long key's rest with it); its child becomes the
            // right node's leftmost.
            let at = balanced_split(&cells).clamp(1, cells.len() - 2);
            let mid = cells[at];
            let mid_child = crate::storage::page::rd64(mid, 2);
            let (field, bytes) = node::cell_key_part(mid, false);
            let sep = KeyPart {
                field,
                bytes: Cow::Owned(bytes.to_vec()),
            };
            let right = self.pager.new_node(KIND_BRANCH);
            node::rebuild(self.pager.node_mut(pid), &cells[..at]);
            let r = self.pager.node_mut(right);
            crate::storage::page::set_link(r, mid_child);
            node::rebuild(r, &cells[at + 1..]);
            (sep, right)
        };
        let (sep, right) = sep;
        self.insert_separator(db, path, pid, sep, right)
    }

    /// The separator a branch keeps between adjacent leaf cells `left` and `right`: the
    /// shortest prefix of `right`'s key above `left`'s.
    fn leaf_separator(&mut self, left: &[u8], right: &[u8]) -> Result<KeyPart<'static>> {
        let sep = separator(&self.cell_key(left, true)?, &self.cell_key(right, true)?);
        let sep = self.encode_key(&sep)?;
        Ok(KeyPart {
            field: sep.field,
            bytes: Cow::Owned(sep.bytes.into_owned()),
        })
    }

    /// Inserts into the parent of `pid` (the end of `path`; a new root when `path` is empty)
    /// the separator `sep` before `pid`'s new right sibling `right`, splitting upwards as
    /// needed.
    fn insert_separator(
        &mut self,
        db: u32,
        path: &mut Vec<(u64, usize)>,
        pid: u64,
        sep: KeyPart,
        right: u64,
    ) -> Result<()> {
        let hdr = node::branch_cell_header(sep.field, right);
        match path.pop() {
            None => {
                let root = self.pager.new_node(KIND_BRANCH);
                let r = self.pager.node_mut(root);
                crate::storage::page::set_link(r, pid);
                let ok = node::insert(r, 0, &[&hdr, &sep.bytes]);
                debug_assert!(ok);
                self.set_root(db, root);
                Ok(())
            }
            Some((parent, ci)) => {
                if node::insert(self.pager.node_mut(parent), ci, &[&hdr, &sep.bytes]) {
                    return Ok(());
                }
                let mut bcell = hdr.to_vec();
                bcell.extend_from_slice(&sep.bytes);
                self.split(db, path, parent, ci, &bcell)
            }
        }
    }

    /// Removes `key`; returns whether it was present.
    pub(crate) fn delete(&mut self, db: u32, key: &[u8]) -> Result<bool> {
        self.with_path(|e, path| e.delete_inner(db, key, path))
    }

    fn delete_inner(&mut self, db: u32, key: &[u8], path: &mut Vec<(u64, usize)>) -> Result<bool> {
        let leaf = self.descend_mut(db, key, path)?;
        let Ok(i) = self.search(self.pager.node(leaf), key)? else {
            return Ok(false);
        };
        let mut chain = match node::leaf_value(self.pager.node(leaf), i) {
            LeafValue::Overflow { first, len } => self.overflow_pages(first, len)?,
            LeafValue::Inline(_) => Vec::new(),
        };
        if let Some((first, len)) = node::long_key(self.pager.node(leaf), i) {
            chain.extend(self.overflow_pages(first, len)?);
        }
        let leaf = self.make_writable(db, path, leaf);
        node::remove(self.pager.node_mut(leaf), i);
        for pid in chain {
            self.pager.space.release(pid);
        }
        self.add_entries(db, -1);
        self.rebalance(db, path, leaf)?;
        Ok(true)
    }

    /// After a removal from writable node `pid`: merge it with a sibling when it is less
    /// than a quarter full and the two fit in one page; collapse a root with one child.
    fn rebalance(&mut self, db: u32, path: &mut Vec<(u64, usize)>, pid: u64) -> Result<()> {
        let p = self.pager.node(pid);
        let Some(&(parent, ci)) = path.last() else {
            if !node::is_leaf(p) && node::nslots(p) == 0 {
                let child = node::child(p, 0);
                self.set_root(db, child);
                self.pager.free_page(pid);
            }
            return Ok(());
        };
        if node::used(p) >= self.pager.layout.capacity() / 4 {
            return Ok(());
        }
        let leaf = node::is_leaf(p);
        if node::nslots(self.pager.node(parent)) == 0 {
            return Ok(());
        }
        // Merge the right one of the pair into the left one.
        let (li, ri) = if ci > 0 { (ci - 1, ci) } else { (0, 1) };
        let (lpid, rpid) = (
            node::child(self.pager.node(parent), li),
            node::child(self.pager.node(parent), ri),
        );
        self.pager.ensure(lpid)?;
        self.pager.ensure(rpid)?;
        let (sep_field, sep) = node::key_part(self.pager.node(parent), ri - 1);
        let sep = sep.to_vec();
        let extra = if leaf {
            0
        } else {
            BRANCH_CELL_HDR + sep.len() + 2
        };
        if node::used(self.pager.node(lpid)) + node::used(self.pager.node(rpid)) + extra
            > self.pager.layout.capacity()
        {
            return Ok(());
        }
        let lw = self.relocate(lpid);
        if lw != lpid {
            node::set_child(self.pager.node_mut(parent), li, lw);
        }
        let right = self.pager.node(rpid).to_vec();
        let left = self.pager.node_mut(lw);
        let mut at = node::nslots(left);
        if !leaf {
            // The separator comes down (a long key's rest with it).
            let hdr = node::branch_cell_header(sep_field, crate::storage::page::link(&right));
            let ok = node::insert(left, at, &[&hdr, &sep]);
            debug_assert!(ok);
            at += 1;
        }
        for i in 0..node::nslots(&right) {
            let ok = node::insert(left, at + i, &[node::cell(&right, i)]);
            debug_assert!(ok);
        }
        node::remove(self.pager.node_mut(parent), ri - 1);
        if leaf {
            // The separator is dropped: so is a long one's rest.
            if let Some((first, len)) = node::key_part_rest(sep_field, &sep) {
                for pid in self.overflow_pages(first, len)? {
                    self.pager.space.release(pid);
                }
            }
        }
        self.pager.free_page(rpid);
        path.pop();
        self.rebalance(db, path, parent)
    }
}

/// The size limits every write checks: keys up to [`MAX_KEY_LEN`], values up to
/// [`MAX_VALUE_LEN_USIZE`].
pub(crate) fn check_sizes(key: &[u8], value: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY_LEN {
        return Err(Error::KeyTooLarge {
            len: key.len(),
            max: MAX_KEY_LEN,
        });
    }
    if value.len() > MAX_VALUE_LEN_USIZE {
        return Err(Error::ValueTooLarge {
            len: value.len(),
            max: MAX_VALUE_LEN_USIZE,
        });
    }
    Ok(())
}

/// Takes the separators around child `idx` of branch `p` as the bounds of the range below
/// it; false when one is a long key, whose bytes in the page are not the whole bound.
#[inline(always)]
fn bounds<'p>(
    p: &'p [u8],
    idx: usize,
    lo: &mut Option<&'p [u8]>,
    hi: &mut Option<&'p [u8]>,
) -> bool {
    let n = node::nslots(p);
    if idx > 0 {
        *lo = Some(node::key(p, idx - 1));
    }
    if idx < n {
        *hi = Some(node::key(p, idx));
    }
    !node::has_long_keys(p)
        || (idx == 0 || node::long_key(p, idx - 1).is_none())
            && (idx == n || node::long_key(p, idx).is_none())
}

/// Copies a separator into a hint's bound, reusing the bound's buffer.
fn set_bound(slot: &mut Option<Vec<u8>>, bound: Option<&[u8]>) {
    match bound {
        None => *slot = None,
        Some(b) => {
            let v = slot.get_or_insert_with(Vec::new);
            v.clear();
            v.extend_from_slice(b);
        }
    }
}

/// The index that splits `cells` into two halves of about equal bytes, both non-empty.
fn balanced_split(cells: &[&[u8]]) -> usize {
    let total: usize = cells.iter().map(|c| c.len() + 2).sum();
    let mut acc = 0;
    for (i, c) in cells.iter().enumerate() {
        acc += c.len() + 2;
        if acc * 2 >= total {
            return (i + 1).clamp(1, cells.len() - 1);
        }
    }
    cells.len() - 1
}

/// The shortest prefix of `right` that sorts after `left` (suffix truncation).
fn separator(left: &[u8], right: &[u8]) -> Vec<u8> {
    let common = left.iter().zip(right).take_while(|(a, b)| a == b).count();
    right[..(common + 1).min(right.len())].to_vec()
}

#[cfg(test)]
mod tests {
    use super::separator;

    #[test]
    fn separators_are_short_and_between() {
        for (l, r) in [
            (&b"abc"[..], &b"abd"[..]),
            (b"ab", b"abc"),
            (b"a", b"b"),
            (b"", b"x"),
            (b"az", b"b"),
        ] {
            let s = separator(l, r);
            assert!(l < &s[..] && &s[..] <= r, "{l:?} {s:?} {r:?}");
        }
        assert_eq!(separator(b"apple", b"banana"), b"b");
    }
}
