//! The catalog: the tree (database id 0) that maps database names to their records, and
//! the in-memory table of databases it is loaded into.
//!
//! Owns: the catalog record's format, loading it at open, creating and removing databases
//! (ids, names, roots). May call: `btree` (the catalog is a tree), the pager. Invariants:
//! database ids only grow (`next_db_id`, kept in the meta page and raised by every create
//! recovery replays), so no id of a database the checkpoint or the log knows is given out
//! again; a name maps to one live id; a database created by a spilled transaction being applied
//! stays nameless to everyone else until it is done (`hidden`).

use super::{DbState, Engine};
use crate::config::Duplicates;
use crate::error::{Error, Result};
use crate::storage::page::{rd32, rd64, wr32, wr64, KIND_LEAF};

/// Database id of the catalog tree (names -> database records).
pub(crate) const CATALOG: u32 = 0;
pub(crate) const CATALOG_RECORD_LEN: usize = 20;

/// A catalog record: `id u32 | root u64 | entries u64`, then `duplicates u8` for a database
/// with duplicates only (so the records of other databases keep their first format).
pub(crate) fn encode_catalog_record(id: u32, root: u64, entries: u64, dups: Duplicates) -> Vec<u8> {
    let mut r = vec![0u8; CATALOG_RECORD_LEN];
    wr32(&mut r, 0, id);
    wr64(&mut r, 4, root);
    wr64(&mut r, 12, entries);
    if dups != Duplicates::None {
        r.push(dups.code());
    }
    r
}

pub(crate) fn decode_catalog_record(v: &[u8]) -> Option<(u32, u64, u64, Duplicates)> {
    let dups = match v.len() {
        CATALOG_RECORD_LEN => Duplicates::None,
        n if n == CATALOG_RECORD_LEN + 1 => {
            Duplicates::from_code(v[CATALOG_RECORD_LEN]).filter(|&d| d != Duplicates::None)?
        }
        _ => return None,
    };
    Some((rd32(v, 0), rd64(v, 4), rd64(v, 12), dups))
}

impl Engine {
    pub(super) fn load_catalog(&mut self) -> Result<()> {
        let records = self.scan_all(CATALOG)?;
        for (k, v) in records {
            let name = String::from_utf8(k).map_err(|_| Error::Corrupt {
                page: None,
                detail: "catalog holds a database name that is not UTF-8".into(),
            })?;
            let (id, root, entries, dups) =
                decode_catalog_record(&v).ok_or_else(|| Error::Corrupt {
                    page: None,
                    detail: format!("catalog record of {name:?} has {} bytes", v.len()),
                })?;
            if id == CATALOG
                || id >= self.next_db_id
                || root < 2
                || root >= self.pager.space.page_count()
            {
                return Err(Error::Corrupt {
                    page: None,
                    detail: format!(
                        "catalog record of {name:?} is inconsistent (id {id}, root {root})"
                    ),
                });
            }
            let slot = id as usize;
            if self.dbs.len() <= slot {
                self.dbs.resize(slot + 1, None);
            }
            if self.dbs[slot].is_some() {
                return Err(Error::Corrupt {
                    page: None,
                    detail: format!("database id {id} appears twice"),
                });
            }
            self.dbs[slot] = Some(DbState {
                name: name.clone(),
                root,
                entries,
                dups,
                catalog_dirty: false,
            });
            self.names.insert(name, id);
        }
        Ok(())
    }

    /// The id of database `name`, unless a commit being applied created it.
    pub fn visible_db(&self, name: &str) -> Option<u32> {
        self.names
            .get(name)
            .copied()
            .filter(|id| !self.hidden.contains(id))
    }

    #[inline]
    pub fn db(&self, id: u32) -> Result<&DbState> {
        self.dbs
            .get(id as usize)
            .and_then(|d| d.as_ref())
            .ok_or(Error::DbRemoved)
    }

    #[inline]
    pub fn db_mut(&mut self, id: u32) -> &mut DbState {
        self.dbs[id as usize]
            .as_mut()
            .expect("database id checked by the caller")
    }

    /// Creates database `name`, returning its id.
    pub fn create_db(&mut self, name: &str, dups: Duplicates) -> Result<u32> {
        self.check_writable()?;
        if self.names.contains_key(name) {
            return Err(Error::DbExists(name.to_string()));
        }
        let id = self.alloc_db_id();
        self.create_db_with_id(id, name, dups)?;
        Ok(id)
    }

    /// A database id no database has had.
    pub fn alloc_db_id(&mut self) -> u32 {
        let id = self.next_db_id;
        self.next_db_id += 1;
        id
    }

    /// Creates database `name` with id `id` (allocated earlier, or read from the log).
    pub fn create_db_with_id(&mut self, id: u32, name: &str, dups: Duplicates) -> Result<()> {
        if self.names.contains_key(name) || self.dbs.get(id as usize).is_some_and(Option::is_some) {
            return Err(Error::Corrupt {
                page: None,
                detail: format!("database {name:?} (id {id}) is created twice"),
            });
        }
        let root = self.pager.new_node(KIND_LEAF);
        self.next_db_id = self.next_db_id.max(id + 1);
        if self.dbs.len() <= id as usize {
            self.dbs.resize(id as usize + 1, None);
        }
        self.dbs[id as usize] = Some(DbState {
            name: name.to_string(),
            root,
            entries: 0,
            dups,
            catalog_dirty: false,
        });
        self.names.insert(name.to_string(), id);
        self.put(
            CATALOG,
            name.as_bytes(),
            &encode_catalog_record(id, root, 0, dups),
            false,
        )?;
        Ok(())
    }

    /// Removes database `name` and frees all its pages.
    pub fn remove_db(&mut self, name: &str) -> Result<()> {
        self.check_writable()?;
        let id = *self
            .names
            .get(name)
            .ok_or_else(|| Error::DbNotFound(name.to_string()))?;
        self.remove_db_with_id(id, name)
    }

    /// Removes database `name`, whose id must be `id`: it is gone at once; its tree's
    /// pages are freed later, a batch at a time (`Shared::free_doomed`), and at the latest
    /// before the next checkpoint ([`Engine::free_doomed_now`]), so that no checkpoint holds
    /// a tree that is neither reachable nor free.
    pub fn remove_db_with_id(&mut self, id: u32, name: &str) -> Result<()> {
        if self.names.get(name) != Some(&id) {
            return Err(Error::Corrupt {
                page: None,
                detail: format!("database {name:?} (id {id}) is removed but does not exist"),
            });
        }
        let root = self.db(id)?.root;
        self.delete(CATALOG, name.as_bytes())?;
        self.doomed.push_back(root);
        self.names.remove(name);
        self.dbs[id as usize] = None;
        Ok(())
    }

    /// Frees every page of removed databases' trees now (see [`Engine::remove_db_with_id`]).
    pub fn free_doomed_now(&mut self) -> Result<()> {
        while let Some(&pid) = self.doomed.front() {
            self.pager.ensure(pid)?;
            let (children, chains) = tree_refs(self.pager.node(pid));
            let mut pages = vec![pid];
            for (first, len) in chains {
                pages.extend(self.overflow_pages(first, len)?);
            }
            self.doomed.pop_front();
            self.doomed.extend(children);
            for p in pages {
                self.pager.free_page(p);
            }
            self.shrink_cache();
        }
        Ok(())
    }
}

/// What tree page `p` references: its children (a branch), and the overflow chains of its
/// long keys and values, as `(first page, length)`.
pub(crate) fn tree_refs(p: &[u8]) -> (Vec<u64>, Vec<(u64, u32)>) {
    use crate::btree::node::{self, LeafValue};
    let n = node::nslots(p);
    let mut chains: Vec<(u64, u32)> = (0..n).filter_map(|i| node::long_key(p, i)).collect();
    let mut children = Vec::new();
    if node::is_leaf(p) {
        chains.extend((0..n).filter_map(|i| match node::leaf_value(p, i) {
            LeafValue::Overflow { first, len } => Some((first, len)),
            LeafValue::Inline(_) => None,
        }));
    } else {
        children.extend((0..=n).map(|i| node::child(p, i)));
    }
    (children, chains)
}
