//! Recovery's reading of the log: from a checkpoint's position to the last whole record.

use super::{align8, segment_name, Segment, KIND_COMMIT, KIND_SEGMENT_END, REC_HDR, SEG_HDR};
use crate::error::{Error, Result};
use crate::storage::page::{rd32, rd64};
use crate::storage::Storage;
use std::io;

pub(crate) struct Recovered {
    /// Committed write sets after the checkpoint, in log order: (commit LSN, payload).
    pub commits: Vec<(u64, Vec<u8>)>,
    /// Where the log continues.
    pub end: u64,
    pub segment: Segment,
}

/// A segment file's bytes and its handle.
type SegmentFile = (Vec<u8>, Box<dyn crate::storage::StorageFile>);

fn read_all(storage: &dyn Storage, no: u64) -> Result<Option<SegmentFile>> {
    let name = segment_name(no);
    let file = match storage.open(&name, false) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(format!("opening {name}"), e)),
    };
    let len = file
        .len()
        .map_err(|e| Error::io(format!("reading {name}"), e))?;
    let mut buf = vec![0u8; len as usize];
    file.read_at(&mut buf, 0)
        .map_err(|e| Error::io(format!("reading {name}"), e))?;
    Ok(Some((buf, file)))
}

/// A whole record at file offset `off` of a segment starting at LSN `start`:
/// (kind, exact length, synced). It occupies `align8(length)` bytes.
fn record_at(buf: &[u8], start: u64, off: usize) -> Option<(u8, usize, u64)> {
    if off + REC_HDR > buf.len() {
        return None;
    }
    let len = rd32(buf, off + 4) as usize;
    let lsn = start + (off - SEG_HDR) as u64;
    if len < REC_HDR || off + align8(len) > buf.len() || rd64(buf, off + 8) != lsn {
        return None;
    }
    let kind = buf[off + 24];
    if (kind != KIND_COMMIT && kind != KIND_SEGMENT_END)
        || crc32c::crc32c(&buf[off + 4..off + len]) != rd32(buf, off)
    {
        return None;
    }
    Some((kind, len, rd64(buf, off + 16)))
}

/// Reads the log from `lsn` in segment `no` (0: the log's first segment, 1) to its end,
/// cuts a torn tail (zeroing it, removing later segments), and reports damage in the middle
/// as `Error::Corrupt`.
pub(crate) fn recover(
    storage: &dyn Storage,
    lsn: u64,
    no: u64,
    segment_size: u64,
) -> Result<Recovered> {
    let no_log_yet = no == 0;
    let mut no = no.max(1);
    let Some((mut buf, mut file)) = read_all(storage, no)? else {
        if no_log_yet {
            let segment = Segment::create(storage, 1, lsn, segment_size)?;
            return Ok(Recovered {
                commits: Vec::new(),
                end: lsn,
                segment,
            });
        }
        return Err(Error::Corrupt {
            page: None,
            detail: format!("log segment {} is missing", segment_name(no)),
        });
    };
    let header = |buf: &[u8], no: u64| -> Result<(u64, u64)> {
        match Segment::decode_header(buf) {
            Some((n, start, cap)) if n == no && buf.len() as u64 >= SEG_HDR as u64 + cap => {
                Ok((start, cap))
            }
            _ => Err(Error::Corrupt {
                page: None,
                detail: format!("log segment {} has a bad header", segment_name(no)),
            }),
        }
    };
    let (mut start, mut cap) = header(&buf, no)?;
    if lsn < start || lsn > start + cap {
        return Err(Error::Corrupt {
            page: None,
            detail: format!("checkpoint LSN {lsn} is not in {}", segment_name(no)),
        });
    }
    let mut commits = Vec::new();
    let mut pos = lsn;
    loop {
        let off = SEG_HDR + (pos - start) as usize;
        match record_at(&buf, start, off) {
            Some((KIND_COMMIT, len, _)) => {
                pos += align8(len) as u64;
                commits.push((pos, buf[off + REC_HDR..off + len].to_vec()));
            }
            Some((_, len, _)) => {
                // Segment end: continue in the next segment, if it was made durable.
                pos += align8(len) as u64;
                match read_all(storage, no + 1)? {
                    Some((nbuf, nfile))
                        if header(&nbuf, no + 1).ok().is_some_and(|(s, _)| s == pos) =>
                    {
                        (start, cap) = header(&nbuf, no + 1)?;
                        (buf, file, no) = (nbuf, nfile, no + 1);
                    }
                    _ => {
                        // The switch happened but the new segment did not survive: make it again.
                        let _ = storage.remove(&segment_name(no + 1));
                        let segment = Segment::create(storage, no + 1, pos, segment_size)?;
                        return Ok(Recovered {
                            commits,
                            end: pos,
                            segment,
                        });
                    }
                }
            }
            None => break,
        }
    }
    // `pos` is the first position without a whole record. Torn tail, or damage?
    let off = SEG_HDR + (pos - start) as usize;
    let claims_durable = |buf: &[u8], start: u64, from: usize| {
        (from..buf.len().saturating_sub(REC_HDR))
            .step_by(8)
            .any(|o| record_at(buf, start, o).is_some_and(|(_, _, synced)| synced > pos))
    };
    let mut later = no + 1;
    let mut damaged = claims_durable(&buf, start, off + 8);
    while !damaged {
        match read_all(storage, later)? {
            Some((b, _)) => {
                if let Some((_, s, _)) = Segment::decode_header(&b) {
                    damaged = claims_durable(&b, s, SEG_HDR);
                }
                later += 1;
            }
            None => break,
        }
    }
    if damaged {
        return Err(Error::Corrupt {
            page: None,
            detail: format!(
                "log damaged at LSN {pos} in {}: later records show it had been made durable",
                segment_name(no)
            ),
        });
    }
    let cut = buf[off..]
        .iter()
        .rposition(|&b| b != 0)
        .map_or(0, |p| p as u64 + 1);
    if cut > 0 {
        let zeros = vec![0u8; cut as usize];
        let io = |e| Error::io(format!("cutting the torn tail of {}", segment_name(no)), e);
        file.write_at(&zeros, off as u64).map_err(io)?;
        file.sync_data().map_err(io)?;
    }
    for n in no + 1..later {
        storage
            .remove(&segment_name(n))
            .map_err(|e| Error::io(format!("removing {}", segment_name(n)), e))?;
    }
    if later > no + 1 {
        storage
            .sync_dir()
            .map_err(|e| Error::io("syncing the environment directory", e))?;
    }
    Ok(Recovered {
        commits,
        end: pos,
        segment: Segment {
            no,
            start,
            cap,
            file,
        },
    })
}
