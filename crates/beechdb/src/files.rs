//! The names in an environment directory, and what each one is.
//!
//! Owns: classifying a directory listing (page file, log segments, files left behind by an
//! interrupted step, files of other programs) and the errors for directories that hold no
//! BeechDB environment; and removing what a removed one-file environment left beside it.
//! May call: `storage`, `wal` (segment names). Invariant: a name is a log segment only in the
//! exact form `log.` followed by ten digits; anything else is never read as log.

use crate::error::{Error, Result};
use crate::storage::{OsStorage, Storage};
use std::collections::BTreeSet;
use std::io;
use std::path::Path;

pub(crate) const DB_FILE: &str = crate::storage::PAGE_FILE;
pub(crate) const DB_FILE_TMP: &str = "beech.db.tmp";
/// The names of scratch files (`storage::scratch`): where transactions spill with the log
/// in memory.
pub(crate) const SCRATCH_PREFIX: &str = "spill.";

/// What a directory holds.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    pub page_file: bool,
    /// Numbers of the files named like log segments.
    pub segments: BTreeSet<u64>,
    /// Files an interrupted step leaves behind: a segment or page file being built
    /// (`*.tmp`), the next segment prepared ahead (`log.spare`), a large commit's undo store
    /// (`undo.N.tmp`). Never part of the state.
    pub leftovers: Vec<String>,
    /// Files of Berkeley DB (`__db.NNN` region files).
    pub berkeley_db: Vec<String>,
}

/// The storage of the existing environment at `path` (a directory, or a one-file
/// environment's file); creates nothing.
pub(crate) fn existing(path: &Path) -> Result<OsStorage> {
    OsStorage::existing(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Error::InvalidArgument(format!(
            "no environment at {}: no such directory or file, and creation is off",
            path.display()
        )),
        _ => Error::io(format!("opening {}", path.display()), e),
    })
}

/// Removes what a removed one-file environment left beside its file. With no page file
/// there is no environment (its page file is created before any other file of it, see
/// `engine::create_page_file`), so log segments and leftovers beside it belong to none, and
/// replaying them into a new environment would bring back data its user removed. For a
/// caller that found no page file; looked for again under the environment's lock, and
/// nothing done when another handle holds it.
pub(crate) fn remove_orphans(storage: &dyn Storage) -> Result<()> {
    let _lock = match storage.lock() {
        Ok(lock) => lock,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
        Err(e) => return Err(Error::io("taking the environment lock", e)),
    };
    let listing = Listing::read(storage)?;
    if listing.page_file {
        return Ok(());
    }
    let orphans = listing
        .segments
        .iter()
        .map(|&n| crate::wal::segment_name(n));
    for name in orphans.chain(listing.leftovers) {
        storage
            .remove(&name)
            .map_err(|e| Error::io(format!("removing {name}, left by a removed environment"), e))?;
    }
    storage
        .sync_dir()
        .map_err(|e| Error::io("syncing the directory", e))
}

/// The number of a log segment file name.
pub(crate) fn segment_number(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("log.")?;
    (digits.len() == 10 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

impl Listing {
    pub(crate) fn read(storage: &dyn Storage) -> Result<Listing> {
        let names = storage
            .list()
            .map_err(|e| Error::io("listing the environment directory", e))?;
        let mut l = Listing::default();
        for name in names {
            if name == DB_FILE {
                l.page_file = true;
            } else if let Some(n) = segment_number(&name) {
                l.segments.insert(n);
            } else if name == crate::wal::SPARE_SEGMENT
                || name.starts_with(crate::wal::REUSE_PREFIX)
                || name.starts_with(SCRATCH_PREFIX)
                || (name.ends_with(".tmp")
                    && (name.starts_with("log.")
                        || name.starts_with("undo.")
                        || name == DB_FILE_TMP))
            {
                l.leftovers.push(name);
            } else if name.starts_with("__db.") {
                l.berkeley_db.push(name);
            }
        }
        Ok(l)
    }

    /// The error for a directory without a page file, when opening it may not create one
    /// (`create` false), or when what it holds says it is not an empty place for a new one.
    /// `None`: a new environment may be created here.
    pub(crate) fn no_environment(&self, storage: &dyn Storage, create: bool) -> Option<Error> {
        let at = storage.describe();
        if !self.berkeley_db.is_empty() {
            return Some(Error::InvalidArgument(format!(
                "{at} holds Berkeley DB files ({}) and no BeechDB environment: BeechDB cannot \
                 open a Berkeley DB environment; move its data with `db5.3_dump FILE | beech \
                 load DIR`",
                self.berkeley_db.join(", ")
            )));
        }
        if let Some(&n) = self.segments.iter().next() {
            return Some(Error::Corrupt {
                page: None,
                detail: format!(
                    "{at} holds log segments ({} ...) but no {DB_FILE}: either it is a Berkeley \
                     DB environment's directory (its logs have the same names), or the page \
                     file of this environment was removed; nothing was changed",
                    crate::wal::segment_name(n)
                ),
            });
        }
        (!create)
            .then(|| Error::InvalidArgument(format!("no environment at {at} and creation is off")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_exact_segment_names_are_segments() {
        assert_eq!(segment_number("log.0000000001"), Some(1));
        assert_eq!(segment_number("log.0000000001.tmp"), None);
        assert_eq!(segment_number("log.000000001"), None);
        assert_eq!(segment_number("log.spare"), None);
        assert_eq!(segment_number("log.00000000x1"), None);
    }
}
