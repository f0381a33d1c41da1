//! The names in an environment directory, and what each one is.
//!
//! Owns: classifying a directory listing (page file, log segments, files left behind by an
//! interrupted step, files of other programs) and the errors for directories that hold no
//! BeechDB environment. May call: `storage`. Invariant: a name is a log segment only in the
//! exact form `log.` followed by ten digits; anything else is never read as log.

use crate::error::{Error, Result};
use crate::storage::{OsStorage, Storage};
use std::collections::BTreeSet;
use std::io;
use std::path::Path;

pub(crate) const DB_FILE: &str = "beech.db";
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

/// The storage of the existing directory `path`; creates nothing.
pub(crate) fn existing_dir(path: &Path) -> Result<OsStorage> {
    OsStorage::existing(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Error::InvalidArgument(format!(
            "no environment at {}: no such directory, and creation is off",
            path.display()
        )),
        _ => Error::io(format!("opening directory {}", path.display()), e),
    })
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
