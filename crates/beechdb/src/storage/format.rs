//! Reading the page file's formats: the meta slots, the free-list chain, and pages checked
//! on every read (checksum, header, generation).
//!
//! Owns: nothing but these readers, shared by the engine, `verify`, pinned checkpoints and
//! overflow chains. May call: the rest of `storage`. Invariant: a page is handed out only
//! after its header and checksum check; a short file is corruption, not an I/O error.

use super::meta::{Meta, META_LEN};
use super::page::{self, rd32, rd64, HDR, KIND_FREELIST};
use super::StorageFile;
use crate::error::{Error, Result};
use std::io;

pub(crate) fn io_err(what: &str) -> impl FnOnce(io::Error) -> Error + '_ {
    move |e| Error::io(what, e)
}

/// Reads the meta slots of `file`: the chosen meta, the slot it was read from, and warnings
/// about the other slot.
pub(crate) fn read_metas(file: &dyn StorageFile) -> Result<(Meta, u64, Vec<String>)> {
    let len = file.len().map_err(io_err("reading the file size"))?;
    let mut buf = [0u8; META_LEN];
    let mut slot0 = Err("file too short".to_string());
    if len >= META_LEN as u64 {
        file.read_at(&mut buf, 0)
            .map_err(io_err("reading meta page 0"))?;
        slot0 = Meta::decode(&buf).map_err(|p| p.to_string());
    }
    // Slot 1 sits one page in; without slot 0 the page size is unknown, so try each.
    let sizes: Vec<u64> = match &slot0 {
        Ok(m) => vec![m.page_size as u64],
        Err(_) => (12..=16).map(|s| 1u64 << s).collect(),
    };
    let mut slot1 = Err("file too short".to_string());
    for ps in sizes {
        if len >= ps + META_LEN as u64 {
            file.read_at(&mut buf, ps)
                .map_err(io_err("reading meta page 1"))?;
            slot1 = match Meta::decode(&buf) {
                Ok(m) if m.page_size as u64 == ps => Ok(m),
                Ok(m) => Err(format!(
                    "page size {} does not match its position",
                    m.page_size
                )),
                Err(p) => Err(p.to_string()),
            };
            if slot1.is_ok() {
                break;
            }
        }
    }
    let mut warnings = Vec::new();
    let chosen = match (slot0, slot1) {
        (Ok(a), Ok(b)) => {
            if a.page_size != b.page_size || a.env_id != b.env_id {
                warnings.push("meta pages disagree on the page size or the environment".into());
            }
            if a.generation >= b.generation {
                (a, 0)
            } else {
                (b, 1)
            }
        }
        (Ok(a), Err(e)) => {
            warnings.push(format!(
                "meta page 1 unusable ({e}); opened checkpoint {} from meta page 0, which may \
                 be older than the last one taken",
                a.generation
            ));
            (a, 0)
        }
        (Err(e), Ok(b)) => {
            warnings.push(format!(
                "meta page 0 unusable ({e}); opened checkpoint {} from meta page 1, which may \
                 be older than the last one taken",
                b.generation
            ));
            (b, 1)
        }
        (Err(a), Err(b)) => {
            return Err(Error::Corrupt {
                page: Some(0),
                detail: format!("no usable meta page (page 0: {a}; page 1: {b})"),
            })
        }
    };
    Ok((chosen.0, chosen.1, warnings))
}

/// Reads and checks the free-list chain of `meta`.
pub(crate) fn read_free_list(file: &dyn StorageFile, meta: &Meta) -> Result<(Vec<u64>, Vec<u64>)> {
    let ps = meta.page_size as usize;
    let mut pages = Vec::new();
    let mut free = Vec::new();
    let mut pid = meta.freelist_head;
    let mut buf = vec![0u8; ps];
    while pid != 0 {
        if pages.len() as u64 >= meta.freelist_pages {
            return Err(Error::corrupt(
                pid,
                "free-list chain is longer than the meta page says",
            ));
        }
        read_checked(
            file,
            pid,
            &mut buf,
            meta.page_count,
            meta.generation,
            Some(KIND_FREELIST),
        )?;
        let n = rd32(&buf, 32) as usize;
        if n > (ps - HDR) / 8 {
            return Err(Error::corrupt(
                pid,
                format!("free-list page claims {n} entries"),
            ));
        }
        for i in 0..n {
            let f = rd64(&buf, HDR + 8 * i);
            if f < 2 || f >= meta.page_count {
                return Err(Error::corrupt(
                    pid,
                    format!("free-list entry {f} lies outside the file"),
                ));
            }
            free.push(f);
        }
        pages.push(pid);
        pid = page::link(&buf);
    }
    if pages.len() as u64 != meta.freelist_pages {
        return Err(Error::corrupt(
            meta.freelist_head,
            "free-list chain is shorter than the meta page says",
        ));
    }
    Ok((free, pages))
}

/// Reads page `pid` into `buf` and checks its header; a short file is corruption.
pub(crate) fn read_checked(
    file: &dyn StorageFile,
    pid: u64,
    buf: &mut [u8],
    page_count: u64,
    max_gen: u64,
    kind: Option<u8>,
) -> Result<u8> {
    if pid < 2 || pid >= page_count {
        return Err(Error::corrupt(
            pid,
            format!("page number outside the file of {page_count} pages"),
        ));
    }
    match file.read_at(buf, pid * buf.len() as u64) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            return Err(Error::corrupt(pid, "page lies beyond the end of the file"))
        }
        Err(e) => return Err(Error::io(format!("reading page {pid}"), e)),
    }
    page::check(buf, pid, max_gen, kind)
}
