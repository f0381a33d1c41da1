//! Overflow chains: values too large to sit in a leaf, stored in linked pages.
//!
//! Page layout: the common header (kind 3), link = next page (0 ends the chain), bytes 32..36
//! = bytes of value data in this page, data from byte 40. Chains are written once to fresh
//! pages, never through the cache: handed to `engine/writeback.rs`, which writes them once
//! the exclusive lock is released. They are freed whole when their value is replaced.

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::storage::page::{self, rd32, wr32, HDR, KIND_OVERFLOW};

impl Engine {
    fn overflow_capacity(&self) -> usize {
        self.pager.layout.page_size - HDR
    }

    /// Writes `value` to a new chain and returns its first page. The pages are handed to
    /// [`WriteBack`](crate::engine::WriteBack), written once the exclusive lock is released.
    pub(crate) fn write_overflow(&mut self, value: &[u8]) -> Result<u64> {
        let cap = self.overflow_capacity();
        let pids: Vec<u64> = (0..value.len().div_ceil(cap))
            .map(|_| self.pager.space.allocate())
            .collect();
        for (i, chunk) in value.chunks(cap).enumerate() {
            let mut buf = vec![0u8; self.pager.layout.page_size].into_boxed_slice();
            page::init(&mut buf, KIND_OVERFLOW);
            page::set_link(&mut buf, pids.get(i + 1).copied().unwrap_or(0));
            wr32(&mut buf, 32, chunk.len() as u32);
            buf[HDR..HDR + chunk.len()].copy_from_slice(chunk);
            page::seal(&mut buf, pids[i], self.pager.generation + 1);
            self.pager.writeback.add(pids[i], buf);
        }
        self.pager.changed = true;
        Ok(pids[0])
    }

    /// Reads the chain starting at `first`, which must hold exactly `len` bytes, into `out`.
    pub(crate) fn read_overflow(&self, first: u64, len: u32, out: &mut Vec<u8>) -> Result<()> {
        let mut buf = vec![0u8; self.pager.layout.page_size];
        let start = out.len();
        let mut pid = first;
        out.reserve(len as usize);
        for _ in 0..(len as usize).div_ceil(self.overflow_capacity()) {
            self.read_overflow_page(pid, &mut buf)?;
            let used = rd32(&buf, 32) as usize;
            if used > self.overflow_capacity() || out.len() - start + used > len as usize {
                return Err(Error::corrupt(
                    pid,
                    format!("overflow page holds {used} bytes, more than its value"),
                ));
            }
            out.extend_from_slice(&buf[HDR..HDR + used]);
            pid = page::link(&buf);
            if pid == 0 {
                break;
            }
        }
        if out.len() - start != len as usize || pid != 0 {
            return Err(Error::corrupt(
                first,
                format!("overflow chain does not hold the {len} bytes its leaf names"),
            ));
        }
        Ok(())
    }

    fn read_overflow_page(&self, pid: u64, buf: &mut [u8]) -> Result<()> {
        self.pager
            .writeback
            .read_page(
                pid,
                buf,
                self.pager.space.page_count(),
                self.pager.max_page_generation(),
                Some(KIND_OVERFLOW),
            )
            .map_err(|e| self.pager.explain_read_error(e))
    }

    /// The pages of the chain starting at `first` (for freeing it).
    pub(crate) fn overflow_pages(&self, first: u64, len: u32) -> Result<Vec<u64>> {
        self.chain_reader().pages(first, len)
    }

    /// What reading chains needs, to read them with no lock held (see [`ChainReader`]).
    pub(crate) fn chain_reader(&self) -> ChainReader {
        ChainReader {
            writeback: self.pager.writeback.clone(),
            page_size: self.pager.layout.page_size,
            page_count: self.pager.space.page_count(),
            max_gen: self.pager.max_page_generation(),
        }
    }
}

/// Reads overflow chains with no lock held: for chains nobody changes while
/// it reads (written once, and freed only by whoever reads them to free them).
pub(crate) struct ChainReader {
    writeback: std::sync::Arc<crate::engine::WriteBack>,
    page_size: usize,
    page_count: u64,
    max_gen: u64,
}

impl ChainReader {
    /// The pages of the chain starting at `first`, which holds `len` bytes.
    pub(crate) fn pages(&self, first: u64, len: u32) -> Result<Vec<u64>> {
        let mut buf = vec![0u8; self.page_size];
        let n = (len as usize).div_ceil(self.page_size - HDR);
        let mut pids = Vec::with_capacity(n);
        let mut pid = first;
        while pid != 0 {
            if pids.len() == n {
                return Err(Error::corrupt(
                    first,
                    "overflow chain is longer than its value",
                ));
            }
            self.writeback.read_page(
                pid,
                &mut buf,
                self.page_count,
                self.max_gen,
                Some(KIND_OVERFLOW),
            )?;
            pids.push(pid);
            pid = page::link(&buf);
        }
        Ok(pids)
    }
}
