//! The two meta pages (pages 0 and 1) that name the current checkpoint.
//!
//! Owns: the meta record's layout, encoding and checking. Invariant: a checkpoint is durable
//! exactly when a meta record naming it is durable; the two slots alternate, so writing one
//! never damages the other, and the valid record with the higher generation wins.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | crc32c of bytes 4..128 |
//! | 4 | 8 | magic `BeechDB\0` |
//! | 12 | 4 | format version (2) |
//! | 16 | 4 | page size |
//! | 20 | 4 | next database id |
//! | 24 | 8 | generation (checkpoint number, from 1) |
//! | 32 | 8 | catalog root page |
//! | 40 | 8 | first free-list page (0: none) |
//! | 48 | 8 | free-list page count |
//! | 56 | 8 | page count (file high-water mark) |
//! | 64 | 8 | log position the checkpoint covers (0 in Data Store mode) |
//! | 72 | 8 | log segment holding that position (0: none created yet) |
//! | 80 | 4 | mode the environment was created in: 0 Data Store, 1 transactional, 2 transactional with an in-memory log |
//! | 84 | 4 | log chain value at that position (checksum of the record before it) |
//! | 88 | 8 | environment id (random, fixed at creation) |
//! | 96 | 8 | oldest log segment recovery needs, when earlier than the one at offset 72 (a transaction that spilled writes ahead of its commit was going at the checkpoint); 0: the one at offset 72 |
//! | 104 | 4 | 1: the environment was closed with this checkpoint covering its whole log, so the page file alone holds it and recovery may start a new log here when no segment is left; 0 otherwise (every open that may write clears it before anything is committed) |
//! | 108..128 | | zero |

use super::page::{rd32, rd64, wr32, wr64};

pub(crate) const META_LEN: usize = 128;
const MAGIC: &[u8; 8] = b"BeechDB\0";

/// Whether `b`, a meta record's first bytes (at least 12), carries BeechDB's magic.
pub(crate) fn has_magic(b: &[u8]) -> bool {
    b.get(4..12) == Some(&MAGIC[..])
}
pub(crate) const FORMAT_VERSION: u32 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Meta {
    pub page_size: u32,
    pub next_db_id: u32,
    pub generation: u64,
    pub catalog_root: u64,
    pub freelist_head: u64,
    pub freelist_pages: u64,
    pub page_count: u64,
    pub log_lsn: u64,
    pub log_segment: u64,
    pub mode: u32,
    pub log_chain: u32,
    pub env_id: u64,
    pub keep_segment: u64,
    /// Closed cleanly at this checkpoint: the log holds nothing after it.
    pub closed_clean: bool,
}

/// Why a meta slot could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MetaProblem {
    Checksum,
    Magic,
    Version(u32),
    PageSize(u32),
    Mode(u32),
}

impl std::fmt::Display for MetaProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MetaProblem::Checksum => write!(f, "checksum mismatch"),
            MetaProblem::Magic => write!(f, "not a BeechDB meta page (bad magic)"),
            MetaProblem::Version(v) => write!(f, "unsupported format version {v}"),
            MetaProblem::PageSize(s) => write!(f, "invalid page size {s}"),
            MetaProblem::Mode(m) => write!(f, "unknown environment mode {m}"),
        }
    }
}

impl Meta {
    /// The oldest log segment recovery from this checkpoint needs.
    pub fn first_needed_segment(&self) -> u64 {
        match self.keep_segment {
            0 => self.log_segment,
            k => k.min(self.log_segment),
        }
    }

    pub fn encode(&self) -> [u8; META_LEN] {
        let mut b = [0u8; META_LEN];
        b[4..12].copy_from_slice(MAGIC);
        wr32(&mut b, 12, FORMAT_VERSION);
        wr32(&mut b, 16, self.page_size);
        wr32(&mut b, 20, self.next_db_id);
        wr64(&mut b, 24, self.generation);
        wr64(&mut b, 32, self.catalog_root);
        wr64(&mut b, 40, self.freelist_head);
        wr64(&mut b, 48, self.freelist_pages);
        wr64(&mut b, 56, self.page_count);
        wr64(&mut b, 64, self.log_lsn);
        wr64(&mut b, 72, self.log_segment);
        wr32(&mut b, 80, self.mode);
        wr32(&mut b, 84, self.log_chain);
        wr64(&mut b, 88, self.env_id);
        wr64(&mut b, 96, self.keep_segment);
        wr32(&mut b, 104, u32::from(self.closed_clean));
        let crc = crc32c::crc32c(&b[4..]);
        wr32(&mut b, 0, crc);
        b
    }

    pub fn decode(b: &[u8]) -> Result<Meta, MetaProblem> {
        if b.len() < META_LEN || crc32c::crc32c(&b[4..META_LEN]) != rd32(b, 0) {
            return Err(MetaProblem::Checksum);
        }
        if !has_magic(b) {
            return Err(MetaProblem::Magic);
        }
        let version = rd32(b, 12);
        if version != FORMAT_VERSION {
            return Err(MetaProblem::Version(version));
        }
        let page_size = rd32(b, 16);
        if !crate::config::valid_page_size(page_size as usize) {
            return Err(MetaProblem::PageSize(page_size));
        }
        let mode = rd32(b, 80);
        if mode > 2 {
            return Err(MetaProblem::Mode(mode));
        }
        Ok(Meta {
            page_size,
            next_db_id: rd32(b, 20),
            generation: rd64(b, 24),
            catalog_root: rd64(b, 32),
            freelist_head: rd64(b, 40),
            freelist_pages: rd64(b, 48),
            page_count: rd64(b, 56),
            log_lsn: rd64(b, 64),
            log_segment: rd64(b, 72),
            mode,
            log_chain: rd32(b, 84),
            env_id: rd64(b, 88),
            keep_segment: rd64(b, 96),
            closed_clean: rd32(b, 104) == 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_flips() {
        let m = Meta {
            page_size: 16384,
            next_db_id: 3,
            generation: 7,
            catalog_root: 2,
            freelist_head: 9,
            freelist_pages: 1,
            page_count: 10,
            log_lsn: 0,
            log_segment: 0,
            mode: 1,
            log_chain: 0xdead_beef,
            env_id: 0x0123_4567_89ab_cdef,
            keep_segment: 4,
            closed_clean: true,
        };
        let b = m.encode();
        assert_eq!(Meta::decode(&b).unwrap(), m);
        for i in 0..META_LEN {
            let mut c = b;
            c[i] ^= 1;
            assert!(Meta::decode(&c).is_err());
        }
    }
}
