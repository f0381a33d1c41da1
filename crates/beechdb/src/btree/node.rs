//! Leaf and branch pages: a slotted layout that the tree searches and edits in place.
//!
//! Owns: cell formats, binary search, insertion, removal, compaction and the structural
//! check of a loaded node. May call: `storage::page` for the header. Invariants: slots are
//! sorted by key, strictly ascending; every cell lies inside `[content_start, page_size)`;
//! `content_start >= HDR + 2 * nslots`; a cell is never larger than [`Layout::max_cell`], so
//! any three cells fit in one page and every split can succeed.
//!
//! After the 40-byte header comes the slot array (`u16` cell offsets, in key order); cells
//! grow down from the end of the page.
//! Leaf cell: `klen u16 | vlen u32 | key | value` where a `vlen` with bit 31 set marks an
//! overflow value and the value part is `first_page u64 | total_len u32`.
//! Branch cell: `klen u16 | child u64 | key`; the leftmost child is in the header's link.
//! Long keys (longer than [`Layout::max_key`]): `klen` has bit 15 set, its low bits give the
//! [`Layout::long_prefix`] bytes kept in the page, and the key part is those bytes then
//! `first_page u64 | rest_len u32`, an overflow chain holding the rest of the key. A page
//! holding one has bit 0 of header byte 5 set; searching it may need a long key's rest,
//! which only the engine can read ([`search_long`]): plain [`search`] is for pages without.
//! A branch with cells `(k1,c1)..(kn,cn)` sends keys `< k1` to the leftmost child and keys
//! `>= ki` (and `< k(i+1)`) to `ci`.

use crate::error::{Error, Result};
use crate::storage::page::{self, rd16, rd32, rd64, wr16, wr32, wr64, HDR, KIND_BRANCH, KIND_LEAF};
use std::cmp::Ordering;

pub(crate) const OVERFLOW_FLAG: u32 = 1 << 31;
/// Bit 15 of `klen`: a long key, its rest in an overflow chain.
pub(crate) const LONG_KEY: usize = 1 << 15;
/// Header byte 5, bit 0: the page may hold long keys.
const FLAGS: usize = 5;
const HAS_LONG_KEYS: u8 = 1;
pub(crate) const LEAF_CELL_HDR: usize = 6;
pub(crate) const BRANCH_CELL_HDR: usize = 10;
pub(crate) const OVERFLOW_REF: usize = 12;

/// Size limits that follow from the page size.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    pub page_size: usize,
    /// Largest cell, including its slot, so that three always fit in a page.
    pub max_cell: usize,
    /// Longest key kept whole in a page; a longer one is a long key.
    pub max_key: usize,
    /// Bytes of a long key kept in the page, before the reference to its rest.
    pub long_prefix: usize,
}

impl Layout {
    pub fn new(page_size: usize) -> Layout {
        let max_cell = (page_size - HDR) / 3;
        let max_key = page_size / 4;
        Layout {
            page_size,
            max_cell,
            max_key,
            long_prefix: max_key - OVERFLOW_REF,
        }
    }
    /// Whether a leaf cell with this key and an inline value of `vlen` bytes fits the limit.
    pub fn fits_inline(&self, klen: usize, vlen: usize) -> bool {
        LEAF_CELL_HDR + klen + vlen + 2 <= self.max_cell
    }
    /// Bytes of an empty node available for cells and slots.
    pub fn capacity(&self) -> usize {
        self.page_size - HDR
    }
}

/// A value as stored in a leaf.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeafValue<'a> {
    Inline(&'a [u8]),
    Overflow { first: u64, len: u32 },
}

#[inline]
pub(crate) fn nslots(p: &[u8]) -> usize {
    rd16(p, 6)
}
#[inline]
fn set_nslots(p: &mut [u8], n: usize) {
    wr16(p, 6, n)
}
#[inline]
fn content_start(p: &[u8]) -> usize {
    rd32(p, 32) as usize
}
#[inline]
fn set_content_start(p: &mut [u8], v: usize) {
    wr32(p, 32, v as u32)
}
#[inline]
fn frag(p: &[u8]) -> usize {
    rd32(p, 36) as usize
}
#[inline]
fn set_frag(p: &mut [u8], v: usize) {
    wr32(p, 36, v as u32)
}
#[inline]
fn slot(p: &[u8], i: usize) -> usize {
    rd16(p, HDR + 2 * i)
}
#[inline]
pub(crate) fn is_leaf(p: &[u8]) -> bool {
    page::kind(p) == KIND_LEAF
}

/// Clears `p` into an empty node of `kind`.
pub(crate) fn init(p: &mut [u8], kind: u8) {
    page::init(p, kind);
    let len = p.len();
    set_content_start(p, len);
}

/// Bytes of the key part of a cell whose `klen` field is `field`.
#[inline]
fn key_part_len(field: usize) -> usize {
    if field & LONG_KEY != 0 {
        (field & !LONG_KEY) + OVERFLOW_REF
    } else {
        field
    }
}

fn leaf_cell_len_at(p: &[u8], off: usize) -> usize {
    let vraw = rd32(p, off + 2);
    let vpart = if vraw & OVERFLOW_FLAG != 0 {
        OVERFLOW_REF
    } else {
        vraw as usize
    };
    LEAF_CELL_HDR + key_part_len(rd16(p, off)) + vpart
}

fn cell_len_at(p: &[u8], off: usize) -> usize {
    if is_leaf(p) {
        leaf_cell_len_at(p, off)
    } else {
        BRANCH_CELL_HDR + key_part_len(rd16(p, off))
    }
}

#[inline]
fn cell_hdr(p: &[u8]) -> usize {
    if is_leaf(p) {
        LEAF_CELL_HDR
    } else {
        BRANCH_CELL_HDR
    }
}

/// Whether the page may hold long keys.
#[inline]
pub(crate) fn has_long_keys(p: &[u8]) -> bool {
    p[FLAGS] & HAS_LONG_KEYS != 0
}

/// Key of cell `i` (leaf or branch) as the page holds it: the whole key, or a long key's
/// first [`Layout::long_prefix`] bytes.
#[inline]
pub(crate) fn key(p: &[u8], i: usize) -> &[u8] {
    let off = slot(p, i);
    let klen = rd16(p, off) & !LONG_KEY;
    let start = off + cell_hdr(p);
    &p[start..start + klen]
}

/// Where the rest of cell `i`'s key lies (first page, bytes) if it is a long key.
#[inline]
pub(crate) fn long_key(p: &[u8], i: usize) -> Option<(u64, u32)> {
    let (field, part) = key_part(p, i);
    key_part_rest(field, part)
}

/// The `klen` field and key part of cell `i`, as a new cell of either kind repeats them.
#[inline]
pub(crate) fn key_part(p: &[u8], i: usize) -> (usize, &[u8]) {
    cell_key_part(&p[slot(p, i)..], is_leaf(p))
}

/// The key part of a raw cell (see [`cell`]) of a leaf or branch.
#[inline]
pub(crate) fn cell_key_part(c: &[u8], leaf: bool) -> (usize, &[u8]) {
    let field = rd16(c, 0);
    let start = if leaf { LEAF_CELL_HDR } else { BRANCH_CELL_HDR };
    (field, &c[start..start + key_part_len(field)])
}

/// Where the rest of a key part's long key lies, if it is one.
#[inline]
pub(crate) fn key_part_rest(field: usize, part: &[u8]) -> Option<(u64, u32)> {
    (field & LONG_KEY != 0).then(|| {
        let r = field & !LONG_KEY;
        (rd64(part, r), rd32(part, r + 8))
    })
}

/// Value of leaf cell `i`.
/// Leaf cell `i`'s key and value bytes, which lie side by side, and the key's length;
/// `None` for a long key or an overflow value.
pub(crate) fn inline_entry(p: &[u8], i: usize) -> Option<(&[u8], usize)> {
    let off = slot(p, i);
    let klen = rd16(p, off);
    let vraw = rd32(p, off + 2);
    if klen & LONG_KEY != 0 || vraw & OVERFLOW_FLAG != 0 {
        return None;
    }
    let start = off + LEAF_CELL_HDR;
    Some((&p[start..start + klen + vraw as usize], klen))
}

#[inline]
pub(crate) fn leaf_value(p: &[u8], i: usize) -> LeafValue<'_> {
    let off = slot(p, i);
    let klen = key_part_len(rd16(p, off));
    let vraw = rd32(p, off + 2);
    let v = off + LEAF_CELL_HDR + klen;
    if vraw & OVERFLOW_FLAG != 0 {
        LeafValue::Overflow {
            first: rd64(p, v),
            len: rd32(p, v + 8),
        }
    } else {
        LeafValue::Inline(&p[v..v + vraw as usize])
    }
}

/// Child `idx` of a branch: 0 is the leftmost, `i > 0` is cell `i - 1`'s.
#[inline]
pub(crate) fn child(p: &[u8], idx: usize) -> u64 {
    if idx == 0 {
        page::link(p)
    } else {
        rd64(p, slot(p, idx - 1) + 2)
    }
}

pub(crate) fn set_child(p: &mut [u8], idx: usize, pid: u64) {
    if idx == 0 {
        page::set_link(p, pid)
    } else {
        let off = slot(p, idx - 1) + 2;
        wr64(p, off, pid)
    }
}

/// The first eight bytes of `k` as a big-endian number (zero-padded), so that most key
/// comparisons are one integer comparison rather than a `memcmp` call.
#[inline(always)]
fn prefix(k: &[u8]) -> u64 {
    if k.len() >= 8 {
        u64::from_be_bytes(k[..8].try_into().unwrap())
    } else {
        let mut b = [0u8; 8];
        b[..k.len()].copy_from_slice(k);
        u64::from_be_bytes(b)
    }
}

/// Orders two keys: by their 8-byte prefixes, then bytewise only when those tie.
#[inline(always)]
fn compare(a: &[u8], a_prefix: u64, b: &[u8]) -> Ordering {
    match a_prefix.cmp(&prefix(b)) {
        Ordering::Equal if a.len() > 8 && b.len() > 8 => a[8..].cmp(&b[8..]),
        Ordering::Equal => a.cmp(b),
        o => o,
    }
}

/// Leaf search: `Ok(i)` when cell `i` has the key, else `Err(i)` where it would go. For a
/// page without long keys ([`has_long_keys`]); [`search_long`] for the others.
#[inline]
pub(crate) fn search(p: &[u8], k: &[u8]) -> std::result::Result<usize, usize> {
    debug_assert!(!has_long_keys(p));
    let hdr = cell_hdr(p);
    let kp = prefix(k);
    let (mut lo, mut hi) = (0usize, nslots(p));
    while lo < hi {
        let mid = (lo + hi) / 2;
        let off = slot(p, mid);
        let cell_key = &p[off + hdr..off + hdr + rd16(p, off)];
        // Ordering of the probe relative to the searched key.
        match compare(k, kp, cell_key) {
            Ordering::Greater => lo = mid + 1,
            Ordering::Less => hi = mid,
            Ordering::Equal => return Ok(mid),
        }
    }
    Err(lo)
}

/// [`search`] for a key about to be written: a key after the node's last (a sorted load,
/// an index built, rowids in order) is placed with one comparison, and a key right after
/// cell `after` (the last insert: a sorted run filling a gap between larger keys, as
/// writers taking turns leave) with two, not a binary search.
pub(crate) fn search_for_insert(
    p: &[u8],
    k: &[u8],
    after: Option<usize>,
) -> std::result::Result<usize, usize> {
    let (n, hdr, kp) = (nslots(p), cell_hdr(p), prefix(k));
    let key_at = |i: usize| {
        let off = slot(p, i);
        &p[off + hdr..off + hdr + rd16(p, off)]
    };
    if n > 0 && compare(k, kp, key_at(n - 1)) == Ordering::Greater {
        return Err(n);
    }
    if let Some(i) = after.filter(|&i| i + 1 < n) {
        if compare(k, kp, key_at(i)) == Ordering::Greater
            && compare(k, kp, key_at(i + 1)) == Ordering::Less
        {
            return Err(i + 1);
        }
    }
    search(p, k)
}

/// Orders key `k` against a long key that starts with `held` (and is longer): decided by
/// `held` unless `k` begins with all of it, when `rest` (the long key's remaining bytes,
/// read on demand) decides.
pub(crate) fn compare_long(
    k: &[u8],
    held: &[u8],
    rest: impl FnOnce() -> Result<Vec<u8>>,
) -> Result<Ordering> {
    let n = k.len().min(held.len());
    Ok(match k[..n].cmp(&held[..n]) {
        Ordering::Equal if k.len() <= held.len() => Ordering::Less,
        Ordering::Equal => k[n..].cmp(&rest()?[..]),
        o => o,
    })
}

/// [`search`] for any page: a long key whose rest decides is read with `rest(first, len)`.
pub(crate) fn search_long(
    p: &[u8],
    k: &[u8],
    rest: &dyn Fn(u64, u32) -> Result<Vec<u8>>,
) -> Result<std::result::Result<usize, usize>> {
    let (mut lo, mut hi) = (0usize, nslots(p));
    while lo < hi {
        let mid = (lo + hi) / 2;
        let held = key(p, mid);
        let ord = match long_key(p, mid) {
            None => k.cmp(held),
            Some((first, len)) => compare_long(k, held, || rest(first, len))?,
        };
        match ord {
            Ordering::Greater => lo = mid + 1,
            Ordering::Less => hi = mid,
            Ordering::Equal => return Ok(Ok(mid)),
        }
    }
    Ok(Err(lo))
}

/// Branch search: the index of the child whose range holds `k`.
#[cfg(test)]
pub(crate) fn child_index(p: &[u8], k: &[u8]) -> usize {
    match search(p, k) {
        Ok(i) => i + 1,
        Err(i) => i,
    }
}

/// Bytes used by cells and slots.
pub(crate) fn used(p: &[u8]) -> usize {
    p.len() - content_start(p) - frag(p) + 2 * nslots(p)
}

/// Raw bytes of cell `i`.
pub(crate) fn cell(p: &[u8], i: usize) -> &[u8] {
    let off = slot(p, i);
    &p[off..off + cell_len_at(p, off)]
}

/// Inserts a cell made of `parts` as cell `idx`; false when it does not fit even after
/// compaction (the caller splits).
pub(crate) fn insert(p: &mut [u8], idx: usize, parts: &[&[u8]]) -> bool {
    let len: usize = parts.iter().map(|x| x.len()).sum();
    if rd16(parts[0], 0) & LONG_KEY != 0 {
        p[FLAGS] |= HAS_LONG_KEYS;
    }
    let n = nslots(p);
    let slots_end = HDR + 2 * (n + 1);
    if content_start(p) < slots_end + len {
        if content_start(p) + frag(p) < slots_end + len {
            return false;
        }
        compact(p);
    }
    let mut at = content_start(p) - len;
    set_content_start(p, at);
    for part in parts {
        p[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    let s = HDR + 2 * idx;
    p.copy_within(s..HDR + 2 * n, s + 2);
    wr16(p, s, content_start(p));
    set_nslots(p, n + 1);
    true
}

/// Removes cell `idx`, leaving its bytes as fragmentation.
pub(crate) fn remove(p: &mut [u8], idx: usize) {
    let n = nslots(p);
    let off = slot(p, idx);
    let len = cell_len_at(p, off);
    if off == content_start(p) {
        set_content_start(p, off + len);
    } else {
        set_frag(p, frag(p) + len);
    }
    let s = HDR + 2 * idx;
    p.copy_within(s + 2..HDR + 2 * n, s);
    set_nslots(p, n - 1);
}

/// Overwrites leaf cell `idx`'s inline value with one of the same length.
pub(crate) fn overwrite_inline_value(p: &mut [u8], idx: usize, v: &[u8]) {
    let off = slot(p, idx);
    let start = off + LEAF_CELL_HDR + key_part_len(rd16(p, off));
    p[start..start + v.len()].copy_from_slice(v);
}

/// Packs all cells against the end of the page, removing fragmentation.
pub(crate) fn compact(p: &mut [u8]) {
    thread_local! {
        static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    SCRATCH.with(|scratch| {
        let mut tmp = scratch.borrow_mut();
        tmp.clear();
        tmp.extend_from_slice(p);
        let n = nslots(p);
        let mut at = p.len();
        for i in 0..n {
            let c = cell(&tmp, i);
            at -= c.len();
            p[at..at + c.len()].copy_from_slice(c);
            wr16(p, HDR + 2 * i, at);
        }
        set_content_start(p, at);
        set_frag(p, 0);
    })
}

/// Rebuilds `p` as a node of its own kind holding `cells` (raw cell bytes, in order).
pub(crate) fn rebuild(p: &mut [u8], cells: &[&[u8]]) {
    let kind = page::kind(p);
    let link = page::link(p);
    init(p, kind);
    page::set_link(p, link);
    for (i, c) in cells.iter().enumerate() {
        let ok = insert(p, i, &[c]);
        debug_assert!(ok, "rebuild overflowed a page");
    }
}

pub(crate) fn leaf_cell_header(klen: usize, vfield: u32) -> [u8; LEAF_CELL_HDR] {
    let mut h = [0u8; LEAF_CELL_HDR];
    wr16(&mut h, 0, klen);
    wr32(&mut h, 2, vfield);
    h
}

pub(crate) fn branch_cell_header(klen: usize, child: u64) -> [u8; BRANCH_CELL_HDR] {
    let mut h = [0u8; BRANCH_CELL_HDR];
    wr16(&mut h, 0, klen);
    wr64(&mut h, 2, child);
    h
}

pub(crate) fn overflow_ref(first: u64, len: u32) -> [u8; OVERFLOW_REF] {
    let mut r = [0u8; OVERFLOW_REF];
    wr64(&mut r, 0, first);
    wr32(&mut r, 8, len);
    r
}

/// Whether cell `a`'s key sorts before cell `b`'s, as far as the bytes in the page show
/// (two long keys with the same first bytes are told apart by `verify`, which reads them).
fn in_order(p: &[u8], a: usize, b: usize) -> bool {
    let (ka, kb) = (key(p, a), key(p, b));
    match (long_key(p, a).is_some(), long_key(p, b).is_some()) {
        (false, false) => ka < kb,
        // `b` is longer than the bytes shown: `a` equal to them still sorts first.
        (false, true) => ka <= kb || ka.starts_with(kb),
        (true, false) => ka < kb,
        (true, true) => ka <= kb,
    }
}

/// Checks a node's structure after its header passed `page::check`: slot array and cells
/// within bounds, keys strictly ascending and within the size limit, children of a branch
/// inside the file (`page_count` pages).
pub(crate) fn validate(p: &[u8], pid: u64, layout: &Layout, page_count: u64) -> Result<()> {
    let bad = |d: String| Err(Error::corrupt(pid, d));
    let n = nslots(p);
    let cs = content_start(p);
    if cs > p.len() || HDR + 2 * n > cs {
        return bad(format!(
            "slot array of {n} entries overlaps content starting at {cs}"
        ));
    }
    let leaf = is_leaf(p);
    debug_assert!(leaf || page::kind(p) == KIND_BRANCH);
    let mut total = 0usize;
    for i in 0..n {
        let off = slot(p, i);
        let hdr = if leaf { LEAF_CELL_HDR } else { BRANCH_CELL_HDR };
        if off < cs || off + hdr > p.len() {
            return bad(format!(
                "cell {i} at offset {off} lies outside the content area"
            ));
        }
        let field = rd16(p, off);
        let klen = field & !LONG_KEY;
        if field & LONG_KEY != 0 && (klen != layout.long_prefix || !has_long_keys(p)) {
            return bad(format!(
                "cell {i} holds a long key with {klen} bytes in the page, not {}",
                layout.long_prefix
            ));
        }
        if klen > layout.max_key {
            return bad(format!(
                "cell {i} has a key of {klen} bytes, over the limit"
            ));
        }
        let len = cell_len_at(p, off);
        if off + len > p.len() || len + 2 > layout.max_cell {
            return bad(format!(
                "cell {i} at offset {off} of {len} bytes runs past the page or the cell limit"
            ));
        }
        total += len;
        if i > 0 && !in_order(p, i - 1, i) {
            return bad(format!("keys of cells {} and {i} are out of order", i - 1));
        }
    }
    if !leaf {
        for idx in 0..=n {
            let c = child(p, idx);
            if c < 2 || c >= page_count {
                return bad(format!(
                    "child {idx} points at page {c}, outside the file of {page_count} pages"
                ));
            }
        }
    }
    if total + frag(p) != p.len() - cs {
        return bad(format!(
            "cells ({total} bytes) and fragmentation ({}) do not fill the content area",
            frag(p)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(ps: usize) -> Vec<u8> {
        let mut p = vec![0u8; ps];
        init(&mut p, KIND_LEAF);
        p
    }

    fn put(p: &mut [u8], k: &[u8], v: &[u8]) -> bool {
        let idx = search(p, k).unwrap_err();
        insert(p, idx, &[&leaf_cell_header(k.len(), v.len() as u32), k, v])
    }

    /// A search for an insert places every key as the binary search does: before, among,
    /// equal to and after the keys held (short and long, prefixes of each other).
    #[test]
    fn a_search_for_an_insert_agrees_with_the_search() {
        let mut p = leaf(4096);
        let held: Vec<Vec<u8>> = (0..40u8)
            .map(|i| vec![b'k'; 1 + usize::from(i % 12)])
            .collect();
        let mut held: Vec<Vec<u8>> = held
            .into_iter()
            .enumerate()
            .map(|(i, mut k)| {
                k.push(i as u8 * 5);
                k
            })
            .collect();
        held.sort();
        held.dedup();
        for k in &held {
            assert!(put(&mut p, k, b"v"));
        }
        let mut probes = held.clone();
        probes.extend([
            vec![],
            vec![0],
            vec![b'k'; 20],
            vec![0xff; 3],
            b"k".to_vec(),
        ]);
        probes.extend(held.iter().map(|k| [&k[..], &[0]].concat()));
        // Whatever cell the last insert was, or none: the hint only ever saves comparisons.
        let n = nslots(&p);
        for k in &probes {
            for after in [
                None,
                Some(0),
                Some(n / 2),
                Some(n - 2),
                Some(n - 1),
                Some(n + 3),
            ] {
                assert_eq!(
                    search_for_insert(&p, k, after),
                    search(&p, k),
                    "{k:?} {after:?}"
                );
            }
        }
        assert_eq!(search_for_insert(&leaf(4096), b"a", None), Err(0));
        assert_eq!(search_for_insert(&leaf(4096), b"a", Some(0)), Err(0));
    }

    #[test]
    fn insert_search_remove_compact() {
        let mut p = leaf(4096);
        for i in (0..50u32).rev() {
            assert!(put(&mut p, &i.to_be_bytes(), &[i as u8; 20]));
        }
        assert_eq!(nslots(&p), 50);
        let layout = Layout::new(4096);
        validate(&p, 0, &layout, 1 << 40).unwrap();
        for i in 0..50u32 {
            let idx = search(&p, &i.to_be_bytes()).unwrap();
            assert_eq!(leaf_value(&p, idx), LeafValue::Inline(&[i as u8; 20]));
        }
        let before = used(&p);
        remove(&mut p, 10);
        assert_eq!(used(&p), before - 30 - 2);
        validate(&p, 0, &layout, 1 << 40).unwrap();
        compact(&mut p);
        validate(&p, 0, &layout, 1 << 40).unwrap();
        assert!(search(&p, &10u32.to_be_bytes()).is_err());
        let mut n = 0;
        while put(&mut p, &(1000 + n as u32).to_be_bytes(), &[1; 20]) {
            n += 1;
        }
        assert!(used(&p) > 4096 - HDR - 40);
        validate(&p, 0, &layout, 1 << 40).unwrap();
    }

    #[test]
    fn branch_routes_keys() {
        let mut p = vec![0u8; 4096];
        init(&mut p, KIND_BRANCH);
        page::set_link(&mut p, 100);
        for (i, k) in [b"d", b"m", b"t"].iter().enumerate() {
            assert!(insert(
                &mut p,
                i,
                &[&branch_cell_header(1, 101 + i as u64), *k]
            ));
        }
        let route = |k: &[u8]| child(&p, child_index(&p, k));
        assert_eq!(route(b"a"), 100);
        assert_eq!(route(b"d"), 101);
        assert_eq!(route(b"e"), 101);
        assert_eq!(route(b"m"), 102);
        assert_eq!(route(b"z"), 103);
    }

    #[test]
    fn validate_rejects_garbage_without_panicking() {
        let layout = Layout::new(4096);
        let mut seed = 1u64;
        for _ in 0..2000 {
            let mut p = leaf(4096);
            for _ in 0..20 {
                put(&mut p, &seed.to_be_bytes(), b"value");
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            let at = (seed >> 33) as usize % 4096;
            p[at] ^= (seed >> 20) as u8 | 1;
            if page::kind(&p) == KIND_LEAF || page::kind(&p) == KIND_BRANCH {
                let _ = validate(&p, 0, &layout, 1 << 40);
            }
        }
    }
}
