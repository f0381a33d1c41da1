//! Recovery's reading of the log: from a checkpoint's position to the last whole record.
//!
//! Owns: telling a torn tail (writes after the last fsync, lost or reordered by a crash) from
//! damage, and cutting the former. May call: `storage`. Rules, each resting on an invariant
//! of the writer (`wal/mod.rs`):
//! - a segment that the log switched to exists with the next start LSN (it is installed
//!   durably before the switch is written): a missing one, or a gap, is damage;
//! - a segment is durable before anything is written into a later one: if the log stops in
//!   one segment while a later one holds anything, that is damage;
//! - a record after the stopping point that claims the stopping point was already durable
//!   proves damage;
//! - a whole record at the expected position that does not chain from the record before it,
//!   or a segment of another environment, is a foreign file;
//! - a whole record whose payload does not decode is damage;
//! - a log closed cleanly (`LogStart::closed_clean`: its checkpoint covers all of it) holds
//!   nothing after the checkpoint, so it is not read beyond the checkpoint's position
//!   (`clean_end`), and with no segment left it starts again there;
//! - what a segment holds ("anything", "nothing", where its writes end) is its nonzero
//!   bytes when it was zero-filled, and its record headers that name their own position
//!   when it is a reused file (`RECYCLED`), whose older records name older LSNs
//!   (`records_end`).
//!
//! On damage nothing is changed: every file stays as it was for inspection. Only a torn tail
//! is cut (zeroed and synced), and the segments after it that hold nothing removed. This pass judges
//! the log; applying what it holds is the log reader's (`reader.rs`).

use super::record::{align8, unframe, Framed, Kind, Record, REC_HDR};
use super::{salt, segment_name, Segment, SEG_HDR};
use crate::error::{Error, Result};
use crate::storage::page::{rd32, rd64};
use crate::storage::{Storage, StorageFile};
use std::collections::BTreeSet;
use std::io;

/// Where a log begins for recovery: a durable checkpoint's position.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LogStart {
    pub lsn: u64,
    /// The chain value (checksum of the record before `lsn`).
    pub chain: u32,
    /// The segment holding `lsn` (0: no segment created yet).
    pub segment: u64,
    /// The checkpoint was the last act of a clean close and covers the whole log: with no
    /// segment left at all, the log starts again at `lsn` (the page file was kept alone).
    pub closed_clean: bool,
}

pub(crate) struct Recovered {
    /// Where the log continues, and the chain value there.
    pub end: u64,
    pub chain: u32,
    /// The live segments, from the checkpoint's to the one holding `end`.
    pub segments: Vec<Segment>,
}

fn corrupt(detail: String) -> Error {
    Error::Corrupt { page: None, detail }
}

/// A segment file's bytes and its handle.
fn read_all(
    storage: &dyn Storage,
    no: u64,
    read_only: bool,
) -> Result<(Vec<u8>, Box<dyn StorageFile>)> {
    let (file, len) = open_segment(storage, no, read_only)?;
    let mut buf = vec![0u8; len as usize];
    file.read_at(&mut buf, 0)
        .map_err(|e| Error::io(format!("reading {}", segment_name(no)), e))?;
    Ok((buf, file))
}

/// A segment file's handle and length.
fn open_segment(
    storage: &dyn Storage,
    no: u64,
    read_only: bool,
) -> Result<(Box<dyn StorageFile>, u64)> {
    let name = segment_name(no);
    let file = if read_only {
        storage.open_read_only(&name)
    } else {
        storage.open(&name, false)
    };
    let file = file.map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            corrupt(format!("log segment {name} is missing"))
        } else {
            Error::io(format!("opening {name}"), e)
        }
    })?;
    let len = file
        .len()
        .map_err(|e| Error::io(format!("reading {name}"), e))?;
    Ok((file, len))
}

/// The log of an environment closed cleanly (`LogStart::closed_clean`), whose checkpoint's
/// segment is the last: it holds nothing after the checkpoint, so only the segment's header
/// and the bytes where a next record would begin are read, not the whole segment (64 MiB by
/// default, read at every open otherwise). `None` when those bytes are not all zero: then
/// the log is judged in full, as after any other stop.
fn clean_end(
    storage: &dyn Storage,
    env_id: u64,
    from: LogStart,
    read_only: bool,
) -> Result<Option<Recovered>> {
    let no = from.segment.max(1);
    let (file, len) = open_segment(storage, no, read_only)?;
    let read = |at: u64, n: u64| -> Result<Vec<u8>> {
        let mut buf = vec![0u8; n.min(len.saturating_sub(at)) as usize];
        file.read_at(&mut buf, at)
            .map_err(|e| Error::io(format!("reading {}", segment_name(no)), e))?;
        Ok(buf)
    };
    let (start, cap, recycled) = header(&read(0, SEG_HDR as u64)?, len, no, env_id)?;
    if from.lsn < start || from.lsn > start + cap {
        return Ok(None);
    }
    let next = read(SEG_HDR as u64 + (from.lsn - start), 4096)?;
    if records_end(&next, from.lsn, recycled) > 0 {
        return Ok(None);
    }
    Ok(Some(Recovered {
        end: from.lsn,
        chain: from.chain,
        segments: vec![Segment::installed(no, start, cap, file)],
    }))
}

/// The checked header of segment `no`: `(start LSN, capacity, recycled)`, from `buf` (at
/// least the header's bytes), checked against its number, its environment and the file's
/// length `len`.
fn header(buf: &[u8], len: u64, no: u64, env_id: u64) -> Result<(u64, u64, bool)> {
    let name = segment_name(no);
    match Segment::decode_header(buf) {
        Some(h) if h.no == no && len >= SEG_HDR as u64 + h.cap => {
            if h.env_id != env_id {
                let id = h.env_id;
                return Err(corrupt(format!(
                    "log segment {name} belongs to another environment (id {id:016x}, this \
                     environment's is {env_id:016x})"
                )));
            }
            Ok((h.start, h.cap, h.recycled))
        }
        _ => Err(corrupt(format!("log segment {name} has a bad header"))),
    }
}

/// How far into `bytes`, a segment's bytes from LSN `lsn` on, anything written as part of
/// that segment may reach; 0 when nothing was. In a zero-filled segment that is its last
/// nonzero byte. In a recycled one (flag `RECYCLED`) the bytes past its records are an
/// earlier segment's, so it is the end of the last record whose header names its own
/// position, whole or torn (an earlier segment's headers name older LSNs); the bytes of a
/// torn record whose header never reached the disk cannot pass for a record, and are left.
fn records_end(bytes: &[u8], lsn: u64, recycled: bool) -> usize {
    if !recycled {
        return nonzero_len(bytes);
    }
    let mut end = 0;
    for at in (0..bytes.len().saturating_sub(15)).step_by(8) {
        if rd64(bytes, at + 8) == lsn + at as u64 {
            let len = (rd32(bytes, at + 4) as usize).max(REC_HDR);
            end = bytes.len().min(at + align8(len));
        }
    }
    end
}

/// The length of `bytes` without its trailing zeros, compared a word at a time: most of a
/// zero-filled segment is usually zeros.
fn nonzero_len(bytes: &[u8]) -> usize {
    let whole = bytes.len() / 8 * 8;
    if let Some(i) = bytes[whole..].iter().rposition(|&b| b != 0) {
        return whole + i + 1;
    }
    let word = bytes[..whole]
        .chunks_exact(8)
        .rposition(|c| u64::from_ne_bytes(c.try_into().unwrap()) != 0);
    word.map_or(0, |w| {
        let last = bytes[w * 8..w * 8 + 8].iter().rposition(|&b| b != 0);
        w * 8 + last.expect("a nonzero word") + 1
    })
}

/// A whole record at file offset `off` of a segment starting at LSN `start`, checked on its
/// own (not against the record before it); damage if its payload does not decode.
fn record_at(buf: &[u8], start: u64, off: usize, salt: u32) -> Result<Option<Framed<'_>>> {
    let lsn = start + (off - SEG_HDR) as u64;
    let Some(f) = unframe(buf, off, lsn, salt) else {
        return Ok(None);
    };
    if Record::decode(f.kind, f.payload).is_none() {
        return Err(corrupt(format!(
            "log record at LSN {lsn} is whole but its {} payload does not decode",
            f.kind.name()
        )));
    }
    Ok(Some(f))
}

/// Reads the log from `from` to its end, given the numbers of the segment files present.
/// Cuts a torn tail (zeroing it, removing the empty segments after it) and reports damage or
/// a foreign file as `Error::Corrupt`, changing nothing. `read_only` (reading beside a
/// writer) changes nothing in any case: a tail being written is where its reading ends.
pub(crate) fn recover(
    storage: &dyn Storage,
    env_id: u64,
    from: LogStart,
    present: &BTreeSet<u64>,
    segment_size: u64,
    read_only: bool,
) -> Result<Recovered> {
    let salt = salt(env_id);
    // A log that begins at the checkpoint, in segment `no` (made unless read-only).
    let fresh_log = |no: u64| -> Result<Recovered> {
        let segments = if read_only {
            Vec::new()
        } else {
            vec![Segment::create(
                storage,
                (no, from.lsn, segment_size, env_id),
                true,
            )?]
        };
        Ok(Recovered {
            end: from.lsn,
            chain: from.chain,
            segments,
        })
    };
    if from.closed_clean && present.is_empty() {
        // The page file holds everything: the log begins again where it ended, in the
        // segment the checkpoint names.
        return fresh_log(from.segment.max(1));
    }
    if from.closed_clean && present.range(from.segment.max(1) + 1..).next().is_none() {
        if let Some(r) = clean_end(storage, env_id, from, read_only)? {
            return Ok(r);
        }
    }
    if from.segment == 0 && !present.contains(&1) {
        // No log yet: the first segment was never made. Nothing may follow it.
        if let Some(&no) = present.iter().next() {
            return Err(corrupt(format!(
                "log segment {} is missing before {}",
                segment_name(1),
                segment_name(no)
            )));
        }
        return fresh_log(1);
    }
    let mut no = from.segment.max(1);
    let (mut buf, mut file) = read_all(storage, no, read_only)?;
    let (mut start, mut cap, mut recycled) = header(&buf, buf.len() as u64, no, env_id)?;
    if from.lsn < start || from.lsn > start + cap {
        return Err(corrupt(format!(
            "checkpoint LSN {} is not in {}",
            from.lsn,
            segment_name(no)
        )));
    }
    let mut segments = Vec::new();
    let (mut pos, mut chain) = (from.lsn, from.chain);
    loop {
        let off = SEG_HDR + (pos - start) as usize;
        let Some(f) = record_at(&buf, start, off, salt)? else {
            break;
        };
        if f.prev_crc != chain {
            return Err(corrupt(format!(
                "log record at LSN {pos} in {} does not follow the record before it: the \
                 segment comes from a copy of this environment with another history",
                segment_name(no)
            )));
        }
        chain = f.crc;
        pos += f.size();
        if f.kind != Kind::SegmentEnd {
            continue;
        }
        // Segment end: the log continues at the start of the next segment.
        let next = no + 1;
        if !present.contains(&next) {
            return Err(corrupt(format!(
                "log segment {} is missing: {} ends with a switch to it at LSN {pos}",
                segment_name(next),
                segment_name(no)
            )));
        }
        let (nbuf, nfile) = read_all(storage, next, read_only)?;
        let (nstart, ncap, nrecycled) = header(&nbuf, nbuf.len() as u64, next, env_id)?;
        if nstart != pos {
            return Err(corrupt(format!(
                "log segment {} starts at LSN {nstart}, but {} ends at LSN {pos}",
                segment_name(next),
                segment_name(no)
            )));
        }
        segments.push(Segment::installed(no, start, cap, file));
        (buf, file, no, start, cap, recycled) = (nbuf, nfile, next, nstart, ncap, nrecycled);
    }
    // `pos` is the first position without a whole record: a torn tail, or damage?
    let off = SEG_HDR + (pos - start) as usize;
    let here = segment_name(no);
    let damaged = |why: String| {
        corrupt(format!(
            "log damaged at LSN {pos} in {here}: {why}; every file is left as it was"
        ))
    };
    // Bytes past what this segment wrote hold no record of it: the scans stop there.
    let data_end = off + records_end(&buf[off..], pos, recycled);
    let claims_durable = (off + 8..data_end.min(buf.len().saturating_sub(REC_HDR)))
        .step_by(8)
        .any(|o| {
            let lsn = start + (o - SEG_HDR) as u64;
            unframe(&buf, o, lsn, salt).is_some_and(|f| f.synced > pos)
        });
    if claims_durable {
        return Err(damaged(
            "later records show it had been made durable".to_string(),
        ));
    }
    let later: Vec<u64> = present.range(no + 1..).copied().collect();
    for (i, &n) in later.iter().enumerate() {
        if n != no + 1 + i as u64 {
            return Err(damaged(format!(
                "{} follows it but {} is missing",
                segment_name(n),
                segment_name(n - 1)
            )));
        }
        let (b, _) = read_all(storage, n, read_only)?;
        let (nstart, _, nrecycled) = header(&b, b.len() as u64, n, env_id)?;
        if records_end(&b[SEG_HDR..], nstart, nrecycled) > 0 {
            return Err(damaged(format!(
                "{} after it holds log records",
                segment_name(n)
            )));
        }
    }
    if read_only {
        segments.push(Segment::installed(no, start, cap, file));
        return Ok(Recovered {
            end: pos,
            chain,
            segments,
        });
    }
    let cut = (data_end - off) as u64;
    if cut > 0 {
        let zeros = vec![0u8; cut as usize];
        let io = |e| Error::io(format!("cutting the torn tail of {here}"), e);
        file.write_at(&zeros, off as u64).map_err(io)?;
        file.sync_data().map_err(io)?;
    }
    for &n in &later {
        storage
            .remove(&segment_name(n))
            .map_err(|e| Error::io(format!("removing {}", segment_name(n)), e))?;
    }
    if !later.is_empty() {
        storage
            .sync_dir()
            .map_err(|e| Error::io("syncing the environment directory", e))?;
    }
    segments.push(Segment::installed(no, start, cap, file));
    Ok(Recovered {
        end: pos,
        chain,
        segments,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn nonzero_len_finds_the_last_nonzero_byte() {
        for len in 0..40 {
            for last in 0..=len {
                let mut b = vec![0u8; len];
                if last > 0 {
                    b[last - 1] = 7;
                }
                assert_eq!(super::nonzero_len(&b), last, "len {len}");
            }
        }
    }
}
