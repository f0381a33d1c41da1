//! The header every non-meta page starts with, and its checksum.
//!
//! Owns: the 40-byte common header layout, page kinds, sealing (checksum) and checking.
//! Invariant: a page image handed to the tree has passed [`check`], so its header can be
//! trusted; structural checks of the body belong to each page kind's module.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | crc32c of bytes 4..page_size |
//! | 4 | 1 | kind: 1 leaf, 2 branch, 3 overflow, 4 free list |
//! | 5 | 1 | flags: bit 0 = may hold long keys (leaf, branch; see `btree::node`) |
//! | 6 | 2 | number of slots (leaf, branch) |
//! | 8 | 8 | this page's own number (catches misdirected writes) |
//! | 16 | 8 | checkpoint generation the page was written for (catches stale reuse) |
//! | 24 | 8 | link: leftmost child (branch), next page (overflow, free list) |
//! | 32 | 4 | content start (leaf, branch), bytes used (overflow), entries (free list) |
//! | 36 | 4 | fragmented bytes (leaf, branch) |

use crate::error::{Error, Result};

pub(crate) const HDR: usize = 40;

pub(crate) const KIND_LEAF: u8 = 1;
pub(crate) const KIND_BRANCH: u8 = 2;
pub(crate) const KIND_OVERFLOW: u8 = 3;
pub(crate) const KIND_FREELIST: u8 = 4;

pub(crate) fn kind_name(kind: u8) -> &'static str {
    match kind {
        KIND_LEAF => "leaf",
        KIND_BRANCH => "branch",
        KIND_OVERFLOW => "overflow",
        KIND_FREELIST => "free list",
        _ => "unknown",
    }
}

#[inline]
pub(crate) fn rd16(b: &[u8], o: usize) -> usize {
    u16::from_le_bytes([b[o], b[o + 1]]) as usize
}
#[inline]
pub(crate) fn rd32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
#[inline]
pub(crate) fn rd64(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}
#[inline]
pub(crate) fn wr16(b: &mut [u8], o: usize, v: usize) {
    b[o..o + 2].copy_from_slice(&(v as u16).to_le_bytes());
}
#[inline]
pub(crate) fn wr32(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_le_bytes());
}
#[inline]
pub(crate) fn wr64(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn kind(p: &[u8]) -> u8 {
    p[4]
}
pub(crate) fn link(p: &[u8]) -> u64 {
    rd64(p, 24)
}
pub(crate) fn set_link(p: &mut [u8], v: u64) {
    wr64(p, 24, v)
}

/// Clears `p` and gives it a fresh header of `kind`.
pub(crate) fn init(p: &mut [u8], kind: u8) {
    p[..HDR].fill(0);
    p[4] = kind;
}

/// Stamps the page number and generation and computes the checksum, just before a write.
pub(crate) fn seal(p: &mut [u8], pid: u64, gen: u64) {
    wr64(p, 8, pid);
    wr64(p, 16, gen);
    let crc = crc32c::crc32c(&p[4..]);
    wr32(p, 0, crc);
}

/// What kind of page a reader expects.
pub(crate) const ANY_KIND: u8 = u8::MAX;

/// Checks a page image read from page `pid`: checksum, own number, generation no newer than
/// `max_gen`, and the expected kind (any node kind when `want` is `None`, any kind at all
/// when it is [`ANY_KIND`]). Returns the kind.
pub(crate) fn check(p: &[u8], pid: u64, max_gen: u64, want: Option<u8>) -> Result<u8> {
    let stored = rd32(p, 0);
    if crc32c::crc32c(&p[4..]) != stored {
        return Err(Error::corrupt(pid, "checksum mismatch"));
    }
    let own = rd64(p, 8);
    if own != pid {
        return Err(Error::corrupt(
            pid,
            format!("page header names page {own} (misdirected write)"),
        ));
    }
    let gen = rd64(p, 16);
    if gen > max_gen {
        return Err(Error::corrupt(
            pid,
            format!("page written for generation {gen}, newer than checkpoint {max_gen} (stale reference)"),
        ));
    }
    let k = kind(p);
    match want {
        Some(ANY_KIND) if (KIND_LEAF..=KIND_FREELIST).contains(&k) => Ok(k),
        Some(ANY_KIND) => Err(Error::corrupt(pid, format!("unknown page kind {k}"))),
        Some(w) if w != k => Err(Error::corrupt(
            pid,
            format!(
                "expected a {} page, found kind {} ({})",
                kind_name(w),
                k,
                kind_name(k)
            ),
        )),
        None if k != KIND_LEAF && k != KIND_BRANCH => Err(Error::corrupt(
            pid,
            format!("expected a tree page, found kind {k} ({})", kind_name(k)),
        )),
        _ => Ok(k),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_single_byte_flip_is_caught() {
        let mut p = vec![0u8; 4096];
        init(&mut p, KIND_LEAF);
        p[100] = 7;
        seal(&mut p, 9, 3);
        assert_eq!(check(&p, 9, 3, None).unwrap(), KIND_LEAF);
        for i in 0..p.len() {
            let mut q = p.clone();
            q[i] ^= 0x40;
            assert!(check(&q, 9, 3, None).is_err(), "flip at {i} undetected");
        }
        assert!(check(&p, 10, 3, None).is_err());
        assert!(check(&p, 9, 2, None).is_err());
        assert!(check(&p, 9, 3, Some(KIND_BRANCH)).is_err());
    }
}
