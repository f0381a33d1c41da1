//! A member's state machine: its environment, to which committed entries are applied, and
//! the copies of it (snapshots) that rebuild a replica too far behind.
//!
//! Owns: [`StateMachine`], the environment's directory `env/`, the marker database
//! `__beechdb_repl` and the installation of a copy. May call: the engine, the file system.
//! Invariants:
//! - each entry is applied as one local commit that also writes the marker (the entry's
//!   log id and the group's membership), so the environment always says exactly which
//!   entries it holds, whatever a crash cut; local commits are not synced, since the log
//!   is the durable record and is kept until a snapshot, which syncs, covers it;
//! - an entry that every member refuses alike (it writes a database an earlier entry
//!   removed) is skipped everywhere, its marker written, and its proposer told why; any
//!   other failure to apply stops the member (openraft's storage error);
//! - a snapshot is a copy of the environment's durable checkpoint together with the marker
//!   read from that copy, so its log id describes exactly its contents;
//! - a copy is installed by building `env.incoming/` completely, then closing the
//!   environment and renaming directories; at start, a leftover `env.incoming/` is either
//!   finished (the environment was already moved aside) or discarded.

use crate::{NodeId, Refusal, Response, TypeConfig};
use beechdb::{Config, Db, Durability, Env, Error, Replicator, Result};
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    AnyError, BasicNode, Entry, EntryPayload, LogId, RaftSnapshotBuilder, SnapshotMeta,
    StorageError, StorageIOError, StoredMembership,
};
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The database holding the marker, in every member's environment.
pub const MARKER_DB: &str = "__beechdb_repl";
const APPLIED: &[u8] = b"applied";

/// What the environment holds of the log: the last entry applied, and the membership.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Marker {
    last: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, BasicNode>,
}

/// A snapshot kept to be sent: its description and its bytes.
struct Stored {
    meta: SnapshotMeta<NodeId, BasicNode>,
    data: Vec<u8>,
}

/// The environment a member applies entries to.
pub(crate) struct StateMachine {
    dir: PathBuf,
    config: Config,
    open: RwLock<Option<(Env, Db)>>,
    replicator: Mutex<Option<Arc<dyn Replicator>>>,
    current: Mutex<Option<Stored>>,
    /// Snapshots built, for their ids.
    built: std::sync::atomic::AtomicU64,
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { context, source }
}

fn sm_err(e: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageIOError::write_state_machine(AnyError::error(e.to_string())).into()
}

/// The bincode encoding openraft's types get here: fixed-width integers, and a size limit
/// on decoding so that damaged bytes cannot ask for a huge allocation.
pub(crate) fn bincode_opts(limit: usize) -> impl bincode::Options {
    use bincode::Options;
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_limit(limit as u64)
}

fn decode_marker(bytes: &[u8]) -> Result<Marker> {
    use bincode::Options;
    bincode_opts(bytes.len())
        .deserialize(bytes)
        .map_err(|e| Error::Corrupt {
            page: None,
            detail: format!("the replication marker is unreadable: {e}"),
        })
}

fn read_marker(env: &Env, db: &Db) -> Result<Marker> {
    let _ = env;
    match db.get(APPLIED)? {
        Some(bytes) => decode_marker(&bytes),
        None => Ok(Marker::default()),
    }
}

/// Opens a member's environment in `dir`, making a fresh one a member's.
fn open_env(dir: &Path, config: &Config) -> Result<(Env, Db)> {
    let env = Env::open(dir, config.clone())?;
    match env.open_db(MARKER_DB) {
        Ok(db) => Ok((env, db)),
        Err(Error::DbNotFound(_)) => {
            let names = env.db_names()?;
            if !names.is_empty() {
                return Err(Error::InvalidArgument(format!(
                    "{} holds databases ({}) but was never a group member's: a member starts \
                     from an empty environment and receives the group's data",
                    dir.display(),
                    names.join(", ")
                )));
            }
            // Local, before any replicator: every member makes it the same way.
            let db = env.create_db(MARKER_DB)?;
            Ok((env, db))
        }
        Err(e) => Err(e),
    }
}

impl StateMachine {
    /// Opens the state machine of the member in `dir`, finishing or discarding a copy
    /// whose installation a crash interrupted.
    pub fn open(dir: &Path, config: Config) -> Result<StateMachine> {
        let config = config.transactional(true).create(true);
        let (env_dir, incoming, replaced) = (
            dir.join("env"),
            dir.join("env.incoming"),
            dir.join("env.replaced"),
        );
        if incoming.exists() {
            if env_dir.exists() {
                std::fs::remove_dir_all(&incoming)
                    .map_err(io(format!("removing {}", incoming.display())))?;
            } else {
                std::fs::rename(&incoming, &env_dir)
                    .map_err(io(format!("moving {} into place", incoming.display())))?;
            }
        }
        if replaced.exists() {
            std::fs::remove_dir_all(&replaced)
                .map_err(io(format!("removing {}", replaced.display())))?;
        }
        let open = open_env(&env_dir, &config)?;
        Ok(StateMachine {
            dir: dir.to_path_buf(),
            config,
            open: RwLock::new(Some(open)),
            replicator: Mutex::new(None),
            current: Mutex::new(None),
            built: Default::default(),
        })
    }

    /// The environment (see [`crate::Member::env`]).
    pub fn env(&self) -> Env {
        self.handles()
            .expect("the environment is open while the member runs")
            .0
    }

    fn handles(&self) -> Result<(Env, Db)> {
        self.open.read().clone().ok_or(Error::Closed)
    }

    pub(crate) fn set_replicator(&self, r: Option<Arc<dyn Replicator>>) -> Result<()> {
        *self.replicator.lock() = r.clone();
        self.handles()?.0.set_replicator(r)
    }

    /// Closes the environment, everything applied made durable.
    pub(crate) fn close(&self) -> Result<()> {
        match self.open.write().take() {
            Some((env, _)) => env.close(),
            None => Ok(()),
        }
    }

    /// Applies one entry: its commits as one local commit with the marker.
    fn apply_one(&self, entry: Entry<TypeConfig>, marker: &mut Marker) -> Result<Response> {
        let (env, db) = self.handles()?;
        marker.last = Some(entry.log_id);
        let commits = match entry.payload {
            EntryPayload::Normal(r) => r.commits,
            EntryPayload::Membership(m) => {
                marker.membership = StoredMembership::new(Some(entry.log_id), m);
                Vec::new()
            }
            EntryPayload::Blank => Vec::new(),
        };
        let bytes = bincode::serialize(&*marker).expect("the marker always serializes");
        let mark = Some((&db, APPLIED, &bytes[..]));
        let slices: Vec<&[u8]> = commits.iter().map(Vec::as_slice).collect();
        let (lsn, outcome) = env.apply_replicated(&slices, mark, Durability::NoSync)?;
        Ok(Response {
            lsn,
            refused: outcome
                .iter()
                .map(|o| o.as_ref().and_then(Refusal::of))
                .collect(),
        })
    }

    /// Installs a copy of an environment: see the module comment.
    fn install(&self, data: &[u8]) -> Result<()> {
        let (env_dir, incoming, replaced) = (
            self.dir.join("env"),
            self.dir.join("env.incoming"),
            self.dir.join("env.replaced"),
        );
        if incoming.exists() {
            std::fs::remove_dir_all(&incoming)
                .map_err(io(format!("removing {}", incoming.display())))?;
        }
        unpack(data, &incoming)?;
        // The copy must open, and be a member's, before the environment is replaced.
        drop(open_env(&incoming, &self.config)?);
        let mut open = self.open.write();
        if let Some((env, _)) = open.take() {
            env.close()?;
        }
        std::fs::rename(&env_dir, &replaced)
            .and_then(|()| std::fs::rename(&incoming, &env_dir))
            .and_then(|()| std::fs::File::open(&self.dir)?.sync_all())
            .map_err(io(format!("moving the copy into {}", env_dir.display())))?;
        std::fs::remove_dir_all(&replaced)
            .map_err(io(format!("removing {}", replaced.display())))?;
        let (env, db) = open_env(&env_dir, &self.config)?;
        env.set_replicator(self.replicator.lock().clone())?;
        *open = Some((env, db));
        Ok(())
    }

    /// Builds a snapshot: a copy of the durable checkpoint and the marker it holds.
    fn build(&self) -> Result<Stored> {
        let (env, _) = self.handles()?;
        let tmp = self.dir.join("snapshot.build");
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(io(format!("removing {}", tmp.display())))?;
        }
        env.backup(&tmp)?;
        let marker = {
            let copy = Env::open(&tmp, self.config.clone())?;
            let marker = read_marker(&copy, &copy.open_db(MARKER_DB)?)?;
            copy.close()?;
            marker
        };
        let data = pack(&tmp)?;
        std::fs::remove_dir_all(&tmp).map_err(io(format!("removing {}", tmp.display())))?;
        let n = self
            .built
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let snapshot_id = match marker.last {
            Some(l) => format!("{}-{}-{n}", l.leader_id, l.index),
            None => format!("--{n}"),
        };
        Ok(Stored {
            meta: SnapshotMeta {
                last_log_id: marker.last,
                last_membership: marker.membership,
                snapshot_id,
            },
            data,
        })
    }
}

/// A 64-bit FNV-1a digest of every database but the marker, as `txn` reads them: names,
/// keys and values, each with its length.
pub fn digest(env: &Env, txn: &beechdb::Txn) -> Result<u64> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in (bytes.len() as u64).to_le_bytes().iter().chain(bytes) {
            h = (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    };
    for name in env.db_names()? {
        if name == MARKER_DB {
            continue;
        }
        eat(name.as_bytes());
        for kv in txn.iter(&env.open_db(&name)?) {
            let (k, v) = kv?;
            eat(&k);
            eat(&v);
        }
    }
    Ok(h)
}

/// The regular files of directory `dir` as one byte string: for each, its name's length
/// (u32) and name, its length (u64) and bytes.
fn pack(dir: &Path) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(io(format!("listing {}", dir.display())))?;
    let mut names: Vec<PathBuf> = entries
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()
        .map_err(io(format!("listing {}", dir.display())))?;
    names.sort();
    for path in names.iter().filter(|p| p.is_file()) {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(path).map_err(io(format!("reading {}", path.display())))?;
        out.extend_from_slice(&(name.len() as u32).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        out.extend_from_slice(&bytes);
    }
    Ok(out)
}

/// Writes [`pack`]'s files into the new directory `dir`, synced; a typed error for bytes
/// that are not such a string, or a name that is not a plain file name.
pub(crate) fn unpack(data: &[u8], dir: &Path) -> Result<()> {
    let bad = |why: &str| Error::Corrupt {
        page: None,
        detail: format!("a received copy of an environment is malformed: {why}"),
    };
    std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    let mut rest = data;
    while !rest.is_empty() {
        let (len, r) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| bad("cut short"))?;
        let len = u32::from_le_bytes(*len) as usize;
        if r.len() < len {
            return Err(bad("cut short"));
        }
        let (name, r) = r.split_at(len);
        let name = std::str::from_utf8(name).map_err(|_| bad("a file name is not UTF-8"))?;
        if name.is_empty() || name.contains(['/', '\\', '\0']) || name == "." || name == ".." {
            return Err(bad("a file name is not a plain name"));
        }
        let (size, r) = r.split_first_chunk::<8>().ok_or_else(|| bad("cut short"))?;
        let size = usize::try_from(u64::from_le_bytes(*size)).map_err(|_| bad("too large"))?;
        if r.len() < size {
            return Err(bad("cut short"));
        }
        let (bytes, r) = r.split_at(size);
        let path = dir.join(name);
        let f = std::fs::File::create(&path).map_err(io(format!("creating {}", path.display())))?;
        use std::io::Write;
        (&f).write_all(bytes)
            .and_then(|()| f.sync_all())
            .map_err(io(format!("writing {}", path.display())))?;
        rest = r;
    }
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(format!("syncing {}", dir.display())))
}

impl RaftSnapshotBuilder<TypeConfig> for Arc<StateMachine> {
    async fn build_snapshot(
        &mut self,
    ) -> std::result::Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let stored = self
            .build()
            .map_err(|e| StorageIOError::write_snapshot(None, AnyError::error(e.to_string())))?;
        let snapshot = Snapshot {
            meta: stored.meta.clone(),
            snapshot: Box::new(Cursor::new(stored.data.clone())),
        };
        *self.current.lock() = Some(stored);
        Ok(snapshot)
    }
}

impl RaftStateMachine<TypeConfig> for Arc<StateMachine> {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> std::result::Result<
        (Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>),
        StorageError<NodeId>,
    > {
        let (env, db) = self.handles().map_err(sm_err)?;
        let m = read_marker(&env, &db).map_err(sm_err)?;
        Ok((m.last, m.membership))
    }

    async fn apply<I>(
        &mut self,
        entries: I,
    ) -> std::result::Result<Vec<Response>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
    {
        let (env, db) = self.handles().map_err(sm_err)?;
        let mut marker = read_marker(&env, &db).map_err(sm_err)?;
        let mut out = Vec::new();
        for entry in entries {
            let id = entry.log_id;
            let r = self.apply_one(entry, &mut marker).map_err(|e| {
                StorageError::from(StorageIOError::apply(id, AnyError::error(e.to_string())))
            })?;
            out.push(r);
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> std::result::Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> std::result::Result<(), StorageError<NodeId>> {
        let data = snapshot.into_inner();
        self.install(&data).map_err(|e| {
            StorageIOError::write_snapshot(Some(meta.signature()), AnyError::error(e.to_string()))
        })?;
        *self.current.lock() = Some(Stored {
            meta: meta.clone(),
            data,
        });
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> std::result::Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        Ok(self.current.lock().as_ref().map(|s| Snapshot {
            meta: s.meta.clone(),
            snapshot: Box::new(Cursor::new(s.data.clone())),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_unpack_round_trip_and_bad_bytes_are_refused() {
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("a"), b"alpha").unwrap();
        std::fs::write(src.path().join("b.db"), vec![7u8; 10_000]).unwrap();
        let packed = pack(src.path()).unwrap();
        let dst = tempfile::tempdir().unwrap();
        unpack(&packed, &dst.path().join("x")).unwrap();
        assert_eq!(std::fs::read(dst.path().join("x/a")).unwrap(), b"alpha");
        assert_eq!(
            std::fs::read(dst.path().join("x/b.db")).unwrap().len(),
            10_000
        );
        for cut in [1, 4, 5, 10, packed.len() - 1] {
            let r = unpack(&packed[..cut], &dst.path().join(format!("cut{cut}")));
            assert!(matches!(r, Err(Error::Corrupt { .. })), "cut {cut}: {r:?}");
        }
        let mut evil = Vec::new();
        evil.extend_from_slice(&5u32.to_le_bytes());
        evil.extend_from_slice(b"../up");
        evil.extend_from_slice(&0u64.to_le_bytes());
        assert!(unpack(&evil, &dst.path().join("evil")).is_err());
    }
}
