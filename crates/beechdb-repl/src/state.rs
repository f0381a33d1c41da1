//! A member's state machine: its environment, to which committed entries are applied, and
//! the copies of it (snapshots) that rebuild a replica too far behind.
//!
//! Owns: [`StateMachine`], the environment's directory `env/`, the marker database
//! `__beechdb_repl`, and the receiving and installation of a copy. May call: the engine,
//! the file system, [`crate::snapshot`]. Invariants:
//! - the entries of each apply call are applied as one local commit that also writes the
//!   marker (the last entry's log id and the group's membership), so the environment always
//!   says exactly which entries it holds, whatever a crash cut; local commits are not
//!   synced, since the log is the durable record and is kept until a snapshot, which syncs,
//!   covers it;
//! - an entry that every member refuses alike (it writes a database an earlier entry
//!   removed) is skipped everywhere, its marker written, and its proposer told why; any
//!   other failure to apply stops the member (openraft's storage error);
//! - a snapshot is this member's durable checkpoint, pinned, taken while no entry is being
//!   applied, with the marker read at that moment: its log id describes exactly its
//!   contents, and it is streamed page by page from the pinned checkpoint;
//! - a copy is received into `env.receiving-N/` (removed if the transfer fails), moved to
//!   `env.incoming/`, checked, and installed by closing the environment and renaming
//!   directories; at start, a leftover `env.incoming/` is either finished (the environment
//!   was already moved aside) or discarded, and `env.receiving-*` are removed.

use crate::commit::piece_of;
use crate::log_store::Pending;
use crate::{Entry, LogId, Refusal, Response, SnapshotMeta, Stage, StoredMembership, TypeConfig};
use beechdb::storage::Storage;
use beechdb::{Config, Db, Durability, Env, Error, PinnedCheckpoint, Replicator, Result};
use futures_util::StreamExt;
use openraft::storage::{EntryResponder, RaftStateMachine, Snapshot};
use openraft::{EntryPayload, RaftSnapshotBuilder};
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// The database holding the marker, in every member's environment.
pub const MARKER_DB: &str = "__beechdb_repl";
const APPLIED: &[u8] = b"applied";
/// Keys of the stored parts of transactions replicated in parts, in the marker database:
/// this prefix, then the part's epoch, commit id and number, big-endian (a term's parts
/// sort together, in order).
const STAGED: &[u8] = b"staged/";

fn staged_key(epoch: u64, id: u64, seq: u32) -> Vec<u8> {
    let mut key = STAGED.to_vec();
    key.extend_from_slice(&epoch.to_be_bytes());
    key.extend_from_slice(&id.to_be_bytes());
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

/// Entries carrying more bytes than this, or the commit of a transaction replicated in
/// parts, are applied with the runtime's thread handed over to another meanwhile (tokio's
/// `block_in_place`), so that heartbeats, elections and the transport go on: a 110 MB
/// commit applied on the runtime's own thread held a master's heartbeats long enough for
/// an election. Smaller ones stay on it, which costs no hand-over.
const HEAVY_APPLY: usize = 1 << 20;

fn heavy(entries: &[Entry]) -> bool {
    let mut bytes = 0;
    entries.iter().any(|e| match &e.payload {
        EntryPayload::Normal(r) => {
            bytes += r.commit.len();
            bytes > HEAVY_APPLY || matches!(r.staged, Some(Stage::Commit { .. }))
        }
        _ => false,
    })
}

fn encode_marker(marker: &Marker) -> Vec<u8> {
    bincode::serialize(marker).expect("the marker always serializes")
}

/// Writes to the marker database as the engine takes them: `own`, then the marker's bytes.
fn own_writes<'a>(
    own: &'a [(Vec<u8>, Option<Vec<u8>>)],
    marker: &'a [u8],
) -> Vec<(&'a [u8], Option<&'a [u8]>)> {
    own.iter()
        .map(|(k, v)| (&k[..], v.as_deref()))
        .chain([(APPLIED, Some(marker))])
        .collect()
}

fn last_index(marker: &Marker) -> u64 {
    marker.last.map_or(0, |l| l.index)
}

/// Entries gathered for one local commit: their commits, each entry's commit among them
/// (`None` for an entry without one), and writes to the marker database.
#[derive(Default)]
struct Batch {
    commits: Vec<Vec<u8>>,
    of_entry: Vec<Option<usize>>,
    own: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// What the environment holds of the log: the last entry applied, and the membership.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Marker {
    last: Option<LogId>,
    membership: StoredMembership,
}

/// A snapshot's contents: on the member that made it, its durable checkpoint, pinned, to be
/// sent page by page; on the member that received it, the copy in a directory of its own.
pub(crate) enum SnapshotData {
    Pinned(Arc<PinnedCheckpoint>),
    Received(PathBuf),
}

/// The environment a member applies entries to.
pub(crate) struct StateMachine {
    dir: PathBuf,
    config: Config,
    /// The environment lives on a storage of its own, not in `dir/env`.
    on_storage: bool,
    open: RwLock<Option<(Env, Db)>>,
    replicator: Mutex<Option<Arc<dyn Replicator>>>,
    /// Held while entries are applied, and while a snapshot reads the marker and pins the
    /// checkpoint: a snapshot's marker is then exactly what its checkpoint holds.
    applying: Mutex<()>,
    /// The entries that create or remove databases, appended and not yet applied.
    pending: Arc<Pending>,
    /// Snapshots made and copies received, for their ids and directories.
    serial: AtomicU64,
    /// The term up to which stored parts of earlier terms are known to be dropped (0: not
    /// known since the environment was opened or installed).
    swept_term: AtomicU64,
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { context, source }
}

fn io_err(e: Error) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// The bincode encoding openraft's types get here: fixed-width integers, and a size limit
/// on decoding so that damaged bytes cannot ask for a huge allocation.
pub(crate) fn bincode_opts(limit: usize) -> impl bincode::Options {
    use bincode::Options;
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_limit(limit as u64)
}

/// The next of the `parts` parts of commit (`epoch`, `id`) stored in the marker database
/// `db`, from number `*seq` on, a long one's pieces put together (see
/// `commit::pieces`); `None` past the last. A missing part sets `lost` and is an
/// `Error::Replication`; pieces that stop before their last are damage.
fn next_part(
    db: &Db,
    (epoch, id, parts): (u64, u64, u32),
    seq: &mut u32,
    lost: &mut bool,
) -> Result<Option<Vec<u8>>> {
    let unfinished = || Error::Corrupt {
        page: None,
        detail: "a replicated commit's parts end inside a long part's pieces".into(),
    };
    let mut whole: Option<Vec<u8>> = None;
    while *seq < parts {
        let Some(part) = db.get(&staged_key(epoch, id, *seq))? else {
            *lost = true;
            return Err(Error::Replication("parts lost".into()));
        };
        *seq += 1;
        match (piece_of(&part), &mut whole) {
            (None, None) => return Ok(Some(part)),
            (None, Some(_)) => return Err(unfinished()),
            (Some((more, bytes)), w) => {
                w.get_or_insert_with(Vec::new).extend_from_slice(bytes);
                if !more {
                    return Ok(whole);
                }
            }
        }
    }
    match whole {
        Some(_) => Err(unfinished()),
        None => Ok(None),
    }
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

fn read_marker(db: &Db) -> Result<Marker> {
    match db.get(APPLIED)? {
        Some(bytes) => decode_marker(&bytes),
        None => Ok(Marker::default()),
    }
}

/// Opens a member's environment in `dir`, making a fresh one a member's.
fn open_env(dir: &Path, config: &Config) -> Result<(Env, Db)> {
    member_env(Env::open(dir, config.clone())?, &dir.display().to_string())
}

/// The environment `env` (at `at`, for messages) as a member's: with its marker database,
/// made if the environment is new.
fn member_env(env: Env, at: &str) -> Result<(Env, Db)> {
    match env.open_db(MARKER_DB) {
        Ok(db) => Ok((env, db)),
        Err(Error::DbNotFound(_)) => {
            let names = env.db_names()?;
            if !names.is_empty() {
                return Err(Error::InvalidArgument(format!(
                    "{at} holds databases ({}) but was never a group member's: a member starts \
                     from an empty environment and receives the group's data",
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

fn remove_dir(dir: &Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(io(format!("removing {}", dir.display()))(e))
        }
        _ => Ok(()),
    }
}

impl StateMachine {
    /// Opens the state machine of the member in `dir`, finishing or discarding a copy
    /// whose installation a crash interrupted; or, with `storage`, of the member whose
    /// environment lives there (which cannot install copies).
    ///
    /// The environment keeps no log of its own (its log is in memory, its trees durable at
    /// each checkpoint): the member's replicated log is its only durable log, and after a
    /// crash the entries after the last checkpoint's marker are applied again from it.
    pub fn open(
        dir: &Path,
        config: Config,
        pending: Arc<Pending>,
        storage: Option<Arc<dyn Storage>>,
    ) -> Result<StateMachine> {
        // An environment made by an earlier version, with a log of its own, is kept as it is.
        let config = config
            .transactional(true)
            .in_memory_log(true)
            .adopt_mode(true)
            .create(true);
        let open = match &storage {
            Some(s) => member_env(
                Env::open_with_storage(s.clone(), config.clone())?,
                &s.describe(),
            )?,
            None => {
                let (env_dir, incoming, replaced) = (
                    dir.join("env"),
                    dir.join("env.incoming"),
                    dir.join("env.replaced"),
                );
                if incoming.exists() {
                    if env_dir.exists() {
                        remove_dir(&incoming)?;
                    } else {
                        std::fs::rename(&incoming, &env_dir)
                            .map_err(io(format!("moving {} into place", incoming.display())))?;
                    }
                }
                remove_dir(&replaced)?;
                let listing =
                    std::fs::read_dir(dir).map_err(io(format!("listing {}", dir.display())))?;
                for entry in listing.flatten() {
                    if entry
                        .file_name()
                        .to_string_lossy()
                        .starts_with("env.receiving-")
                    {
                        remove_dir(&entry.path())?;
                    }
                }
                open_env(&env_dir, &config)?
            }
        };
        Ok(StateMachine {
            dir: dir.to_path_buf(),
            config,
            on_storage: storage.is_some(),
            open: RwLock::new(Some(open)),
            replicator: Mutex::new(None),
            applying: Mutex::new(()),
            pending,
            serial: AtomicU64::new(0),
            swept_term: AtomicU64::new(0),
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

    /// A new directory for a copy arriving from the master.
    pub(crate) fn receiving_dir(&self) -> PathBuf {
        let n = self.serial.fetch_add(1, Relaxed);
        self.dir.join(format!("env.receiving-{n}"))
    }

    /// Applies entries, as few local commits as can be, each with the marker of its last
    /// entry; the response for each. Entries of a transaction replicated in parts are
    /// applied one to a commit: a part is stored in the marker database, and the commit
    /// naming them applies them all (see [`Stage`]).
    fn apply_all(&self, entries: Vec<Entry>) -> Result<Vec<Response>> {
        let _applying = self.applying.lock();
        let (env, db) = self.handles()?;
        let mut marker = read_marker(&db)?;
        let mut responses = Vec::with_capacity(entries.len());
        let mut batch = Batch::default();
        for entry in entries {
            let staged = match &entry.payload {
                EntryPayload::Normal(r) => r.staged,
                _ => None,
            };
            if let Some(Stage::Commit { .. }) = staged {
                self.commit_batch(&env, &db, &marker, &mut batch, &mut responses)?;
            }
            marker.last = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Normal(r) => match r.staged {
                    None => {
                        batch.of_entry.push(Some(batch.commits.len()));
                        batch.commits.push(r.commit);
                    }
                    Some(Stage::Part { epoch, id, seq }) => {
                        // One of an earlier term than its entry's is dropped already.
                        if epoch == entry.log_id.leader_id.term {
                            batch.own.push((staged_key(epoch, id, seq), Some(r.commit)));
                        }
                        batch.of_entry.push(None);
                        // A part is large: it goes alone.
                        self.commit_batch(&env, &db, &marker, &mut batch, &mut responses)?;
                    }
                    Some(Stage::Commit { epoch, id, parts }) => {
                        let done = self.apply_parts(&env, &db, &marker, (epoch, id, parts), r);
                        responses.push(done?);
                    }
                    Some(Stage::Drop { epoch, id }) => {
                        let prefix = &staged_key(epoch, id, 0)[..STAGED.len() + 16];
                        for kv in db.range(prefix.to_vec()..staged_key(epoch, id, u32::MAX)) {
                            batch.own.push((kv?.0, None));
                        }
                        batch.of_entry.push(None);
                    }
                },
                EntryPayload::Membership(m) => {
                    marker.membership = StoredMembership::new(Some(entry.log_id), m);
                    batch.of_entry.push(None);
                }
                EntryPayload::Blank => batch.of_entry.push(None),
            }
        }
        self.commit_batch(&env, &db, &marker, &mut batch, &mut responses)?;
        Ok(responses)
    }

    /// Applies the entries gathered in `batch` (the last of them `marker.last`) as one
    /// local commit, and empties it; their responses go to `responses`.
    fn commit_batch(
        &self,
        env: &Env,
        db: &Db,
        marker: &Marker,
        batch: &mut Batch,
        responses: &mut Vec<Response>,
    ) -> Result<()> {
        if batch.of_entry.is_empty() {
            return Ok(());
        }
        self.drop_stale_parts(db, marker, &mut batch.own)?;
        let bytes = encode_marker(marker);
        let own = own_writes(&batch.own, &bytes);
        let slices: Vec<&[u8]> = batch.commits.iter().map(Vec::as_slice).collect();
        let (lsn, outcome) = env.apply_replicated(&slices, Some((db, &own)), Durability::NoSync)?;
        responses.extend(batch.of_entry.drain(..).map(|c| Response {
            lsn,
            refused: c.and_then(|c| outcome[c].as_ref().and_then(Refusal::of)),
        }));
        batch.commits.clear();
        batch.own.clear();
        self.pending.applied(last_index(marker));
        Ok(())
    }

    /// Applies the commit `r` (entry `marker.last`) of a transaction replicated in parts:
    /// its parts, stored by earlier entries, then its own writes, as one local commit that
    /// also drops the parts. Refused alike on every member when a part is missing (its
    /// master lost its term while sending them, and the parts were dropped, see
    /// [`Stage`]) or a database it writes is gone.
    fn apply_parts(
        &self,
        env: &Env,
        db: &Db,
        marker: &Marker,
        (epoch, id, parts): (u64, u64, u32),
        r: crate::Request,
    ) -> Result<Response> {
        let term = marker.last.map_or(0, |l| l.leader_id.term);
        let mut own: Vec<(Vec<u8>, Option<Vec<u8>>)> = (0..parts)
            .map(|seq| (staged_key(epoch, id, seq), None))
            .collect();
        self.drop_stale_parts(db, marker, &mut own)?;
        let bytes = encode_marker(marker);
        let writes = own_writes(&own, &bytes);
        let mut lost = epoch != term;
        let applied = match lost {
            true => Err(Error::Replication("parts lost".into())),
            false => {
                let (mut seq, mut last) = (0, Some(r.commit));
                let mut next = || match next_part(db, (epoch, id, parts), &mut seq, &mut lost)? {
                    None => Ok(last.take()),
                    part => Ok(part),
                };
                env.apply_staged(&mut next, (db, &writes), Durability::NoSync)
            }
        };
        let response = match applied {
            Ok(lsn) => Response { lsn, refused: None },
            // Refused: only the parts go, and the marker moves on.
            Err(e) => {
                let refusal = match lost {
                    true => Refusal::PartsLost,
                    false => Refusal::of(&e).ok_or(e)?,
                };
                let (lsn, _) =
                    env.apply_replicated(&[], Some((db, &writes)), Durability::NoSync)?;
                Response {
                    lsn,
                    refused: Some(refusal),
                }
            }
        };
        self.pending.applied(last_index(marker));
        Ok(response)
    }

    /// Adds to `own` the deletion of every stored part of an earlier term than entry
    /// `marker.last`'s: the master that sent them can no longer commit them. Looks once
    /// per term: every part stored later is of that term or a later one.
    fn drop_stale_parts(
        &self,
        db: &Db,
        marker: &Marker,
        own: &mut Vec<(Vec<u8>, Option<Vec<u8>>)>,
    ) -> Result<()> {
        let term = marker.last.map_or(0, |l| l.leader_id.term);
        if term <= self.swept_term.load(Relaxed) {
            return Ok(());
        }
        for kv in db.range(STAGED.to_vec()..staged_key(term, 0, 0)) {
            let (key, _) = kv?;
            if !own.iter().any(|(k, _)| *k == key) {
                own.push((key, None));
            }
        }
        self.swept_term.store(term, Relaxed);
        Ok(())
    }

    /// Installs the copy received in `received`: see the module comment.
    fn install(&self, received: &Path) -> Result<()> {
        if self.on_storage {
            return Err(Error::InvalidArgument(
                "a member whose environment is on a storage of its own cannot install a copy \
                 from the master"
                    .into(),
            ));
        }
        let (env_dir, incoming, replaced) = (
            self.dir.join("env"),
            self.dir.join("env.incoming"),
            self.dir.join("env.replaced"),
        );
        remove_dir(&incoming)?;
        std::fs::rename(received, &incoming).map_err(io(format!(
            "moving {} to {}",
            received.display(),
            incoming.display()
        )))?;
        // The copy must open, and be a member's, before the environment is replaced.
        drop(open_env(&incoming, &self.config)?);
        let _applying = self.applying.lock();
        let mut open = self.open.write();
        if let Some((env, _)) = open.take() {
            env.close()?;
        }
        std::fs::rename(&env_dir, &replaced)
            .and_then(|()| std::fs::rename(&incoming, &env_dir))
            .and_then(|()| std::fs::File::open(&self.dir)?.sync_all())
            .map_err(io(format!("moving the copy into {}", env_dir.display())))?;
        remove_dir(&replaced)?;
        let (env, db) = open_env(&env_dir, &self.config)?;
        env.set_replicator(self.replicator.lock().clone())?;
        *open = Some((env, db));
        self.swept_term.store(0, Relaxed);
        Ok(())
    }

    /// A snapshot: the durable checkpoint, made and pinned while no entry is applied, with
    /// the marker it holds.
    pub(crate) fn snapshot(&self) -> Result<crate::SnapshotOf> {
        let (env, db, marker, pin) = {
            let _applying = self.applying.lock();
            let (env, db) = self.handles()?;
            let marker = read_marker(&db)?;
            env.sync()?;
            let pin = env.pin_checkpoint()?;
            (env, db, marker, pin)
        };
        drop((env, db));
        Ok(Snapshot {
            meta: SnapshotMeta {
                last_log_id: marker.last,
                last_membership: marker.membership,
            },
            snapshot: SnapshotData::Pinned(Arc::new(pin)),
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

impl RaftSnapshotBuilder<TypeConfig> for Arc<StateMachine> {
    type SnapshotData = SnapshotData;

    async fn build_snapshot(&mut self) -> std::io::Result<crate::SnapshotOf> {
        let sm = self.clone();
        tokio::task::spawn_blocking(move || sm.snapshot())
            .await
            .map_err(std::io::Error::other)?
            .map_err(io_err)
    }
}

impl RaftStateMachine<TypeConfig> for Arc<StateMachine> {
    type SnapshotData = SnapshotData;
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> std::io::Result<(Option<LogId>, StoredMembership)> {
        let (_, db) = self.handles().map_err(io_err)?;
        let m = read_marker(&db).map_err(io_err)?;
        Ok((m.last, m.membership))
    }

    async fn apply<S>(&mut self, entries: S) -> std::io::Result<()>
    where
        S: futures_util::Stream<Item = std::io::Result<EntryResponder<TypeConfig>>> + Unpin + Send,
    {
        let mut all: Vec<EntryResponder<TypeConfig>> = Vec::new();
        let mut entries = entries;
        while let Some(e) = entries.next().await {
            all.push(e?);
        }
        let (entries, responders): (Vec<Entry>, Vec<_>) = all.into_iter().unzip();
        let responses = match heavy(&entries) {
            true => tokio::task::block_in_place(|| self.apply_all(entries)),
            false => self.apply_all(entries),
        }
        .map_err(io_err)?;
        for (responder, response) in responders.into_iter().zip(responses) {
            if let Some(r) = responder {
                r.send(response);
            }
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self {
        self.clone()
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: SnapshotData,
    ) -> std::io::Result<()> {
        let SnapshotData::Received(dir) = snapshot else {
            return Err(std::io::Error::other(format!(
                "the snapshot of {meta} to install is not a received copy"
            )));
        };
        let sm = self.clone();
        tokio::task::spawn_blocking(move || sm.install(&dir))
            .await
            .map_err(std::io::Error::other)?
            .map_err(io_err)?;
        if let Some(last) = meta.last_log_id {
            self.pending.applied(last.index);
        }
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> std::io::Result<Option<crate::SnapshotOf>> {
        // Made when asked, so that a member rebuilt from it gets the latest state.
        let sm = self.clone();
        let made = tokio::task::spawn_blocking(move || sm.snapshot())
            .await
            .map_err(std::io::Error::other)?
            .map_err(io_err)?;
        Ok(Some(made))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Request;
    use beechdb::{AckPolicy, GroupDurability, HeldLocks, Staged};
    use openraft::EntryPayload;

    /// Takes an environment's commits as the engine hands them over, in parts of 256
    /// bytes, keeping the parts and the last piece.
    #[derive(Default)]
    struct Capture {
        parts: Mutex<Vec<Vec<u8>>>,
        last: Mutex<Vec<u8>>,
        /// Refuse the part of this number, and what was given up then.
        refuse: Option<usize>,
        abandoned: Mutex<Option<Staged>>,
    }

    impl Replicator for Capture {
        fn replicate(
            &self,
            commit: &[u8],
            _: Option<Staged>,
            _: Durability,
            _: Option<GroupDurability>,
            _: HeldLocks,
        ) -> Result<u64> {
            *self.last.lock() = commit.to_vec();
            Ok(1)
        }
        fn part_bytes(&self) -> usize {
            256
        }
        fn stage(
            &self,
            part: &[u8],
            staged: &mut Option<Staged>,
            _: Durability,
            _: Option<GroupDurability>,
        ) -> Result<()> {
            let s = staged.get_or_insert(Staged {
                epoch: 0,
                id: 0,
                parts: 0,
            });
            if self.refuse == Some(s.parts as usize) {
                return Err(Error::Replication("refused".into()));
            }
            s.parts += 1;
            self.parts.lock().push(part.to_vec());
            Ok(())
        }
        fn abandon(&self, staged: Staged) {
            *self.abandoned.lock() = Some(staged);
        }
        fn catch_up(&self) -> Result<()> {
            Ok(())
        }
        fn check_begin(&self, _: Option<AckPolicy>) -> Result<()> {
            Ok(())
        }
    }

    /// The parts and last piece of a transaction writing `n` keys of database `t` (made
    /// second, after the marker database, as on a member), as a master's engine sends them.
    fn pieces(n: u32) -> (Vec<Vec<u8>>, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::open(dir.path(), Config::default().transactional(true)).unwrap();
        env.create_db(MARKER_DB).unwrap();
        let t = env.create_db("t").unwrap();
        let capture = Arc::new(Capture::default());
        env.set_replicator(Some(capture.clone())).unwrap();
        let txn = env.begin_txn().unwrap();
        for k in 0..n {
            txn.put(&t, &k.to_be_bytes(), &[7u8; 40]).unwrap();
        }
        txn.commit().unwrap();
        let parts = std::mem::take(&mut *capture.parts.lock());
        let last = std::mem::take(&mut *capture.last.lock());
        (parts, last)
    }

    /// A transaction whose third part is refused fails, commits nothing, and gives up the
    /// two parts it sent.
    #[test]
    fn a_transaction_refused_after_its_first_parts_gives_them_up() {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::open(dir.path(), Config::default().transactional(true)).unwrap();
        let t = env.create_db("t").unwrap();
        let capture = Arc::new(Capture {
            refuse: Some(2),
            ..Capture::default()
        });
        env.set_replicator(Some(capture.clone())).unwrap();
        let txn = env.begin_txn().unwrap();
        for k in 0..40u32 {
            txn.put(&t, &k.to_be_bytes(), &[7u8; 40]).unwrap();
        }
        let refused = txn.commit();
        assert!(matches!(refused, Err(Error::Replication(_))), "{refused:?}");
        let abandoned = *capture.abandoned.lock();
        assert_eq!(abandoned.map(|s| s.parts), Some(2));
        assert!(capture.last.lock().is_empty(), "no commit was sent");
        assert_eq!(t.len().unwrap(), 0);
    }

    fn entry(term: u64, index: u64, commit: Vec<u8>, staged: Option<Stage>) -> Entry {
        Entry {
            log_id: LogId::new(crate::Term::new(term), index),
            payload: EntryPayload::Normal(Request {
                commit,
                master_sync: false,
                replica_sync: false,
                notify: 0,
                proposer: 1,
                staged,
            }),
        }
    }

    fn blank(term: u64, index: u64) -> Entry {
        Entry {
            log_id: LogId::new(crate::Term::new(term), index),
            payload: EntryPayload::Blank,
        }
    }

    /// The entries sending `parts` as commit `id` of term `epoch`, from log index `first`,
    /// in entries of term `term`.
    fn sent(parts: &[Vec<u8>], (epoch, id): (u64, u64), term: u64, first: u64) -> Vec<Entry> {
        let part = |seq: usize| {
            Some(Stage::Part {
                epoch,
                id,
                seq: seq as u32,
            })
        };
        let at = |seq: usize| first + seq as u64;
        parts
            .iter()
            .enumerate()
            .map(|(seq, p)| entry(term, at(seq), p.clone(), part(seq)))
            .collect()
    }

    fn staged(sm: &StateMachine) -> usize {
        let (_, db) = sm.handles().unwrap();
        db.range(STAGED.to_vec()..staged_key(u64::MAX, 0, 0))
            .count()
    }

    /// The rules of parts at apply, entry by entry: a commit applies its parts whole and
    /// drops them; a later term's entry drops an earlier term's parts, and their commit is
    /// then refused with nothing applied; a part of an earlier term than its entry's is not
    /// kept; a `Drop` entry drops its commit's parts.
    #[test]
    fn parts_apply_with_their_commit_or_are_dropped_alike() {
        let dir = tempfile::tempdir().unwrap();
        let pending = Arc::new(Pending::default());
        let sm = StateMachine::open(dir.path(), Config::default(), pending, None).unwrap();
        let t = sm.env().create_db("t").unwrap();
        let (parts, last) = pieces(40);
        assert!(parts.len() >= 4, "{} parts", parts.len());
        let n = parts.len() as u32;
        let commit = |term, index, id| {
            let stage = Stage::Commit {
                epoch: 1,
                id,
                parts: n,
            };
            entry(term, index, last.clone(), Some(stage))
        };

        // Term 1: the parts, then their commit.
        let mut entries = sent(&parts, (1, 1), 1, 1);
        let at = entries.len() as u64 + 1;
        entries.push(commit(1, at, 1));
        let responses = sm.apply_all(entries).unwrap();
        assert!(responses.iter().all(|r| r.refused.is_none()));
        assert_eq!(t.len().unwrap(), 40);
        assert_eq!(staged(&sm), 0, "applied parts are dropped");

        // Parts of term 1 whose commit comes in term 2: dropped at term 2's first entry,
        // and the commit refused.
        let mut index = at + 1;
        let entries = sent(&parts, (1, 2), 1, index);
        index += entries.len() as u64;
        sm.apply_all(entries).unwrap();
        assert_eq!(staged(&sm), parts.len());
        sm.apply_all(vec![blank(2, index)]).unwrap();
        assert_eq!(staged(&sm), 0, "an earlier term's parts are dropped");
        let refused = sm.apply_all(vec![commit(2, index + 1, 2)]).unwrap();
        assert!(
            matches!(refused[0].refused, Some(Refusal::PartsLost)),
            "{:?}",
            refused[0]
        );
        assert_eq!(t.len().unwrap(), 40);
        index += 2;

        // A part of term 1 in an entry of term 2 is not kept; a Drop entry drops parts.
        sm.apply_all(sent(&parts[..1], (1, 3), 2, index)).unwrap();
        assert_eq!(staged(&sm), 0, "a part of an earlier term than its entry's");
        index += 1;
        let entries = sent(&parts, (2, 4), 2, index);
        index += entries.len() as u64;
        sm.apply_all(entries).unwrap();
        assert_eq!(staged(&sm), parts.len());
        let drop = entry(2, index, Vec::new(), Some(Stage::Drop { epoch: 2, id: 4 }));
        sm.apply_all(vec![drop]).unwrap();
        assert_eq!(staged(&sm), 0, "a Drop entry drops its commit's parts");
        assert_eq!(t.len().unwrap(), 40);
        assert_eq!(
            read_marker(&sm.handles().unwrap().1)
                .unwrap()
                .last
                .unwrap()
                .index,
            index
        );
        sm.close().unwrap();
    }

    /// A long part sent in pieces applies whole; pieces that stop before their last, at
    /// the end of the parts or interrupted by a part proper, are damage: the apply fails
    /// with `Error::Corrupt` and applies nothing.
    #[test]
    fn pieces_apply_whole_and_unfinished_ones_are_damage() {
        let (parts, last) = pieces(40);
        let cut = |p: &[u8]| -> Vec<Vec<u8>> {
            let pieces = crate::commit::pieces(p, 50);
            pieces.map(|(m, c)| [m, c].concat()).collect()
        };
        let (first, rest) = parts.split_first().unwrap();
        let (final_part, middle) = rest.split_last().unwrap();
        let whole: Vec<Vec<u8>> = cut(first).into_iter().chain(rest.iter().cloned()).collect();
        let mut head = cut(first);
        head.pop();
        let interrupted: Vec<Vec<u8>> = head.into_iter().chain(rest.iter().cloned()).collect();
        let mut tail = cut(final_part);
        tail.pop();
        let unfinished: Vec<Vec<u8>> = std::iter::once(first.clone())
            .chain(middle.iter().cloned())
            .chain(tail)
            .collect();
        for (sent_parts, ok) in [(whole, true), (interrupted, false), (unfinished, false)] {
            let dir = tempfile::tempdir().unwrap();
            let pending = Arc::new(Pending::default());
            let sm = StateMachine::open(dir.path(), Config::default(), pending, None).unwrap();
            let t = sm.env().create_db("t").unwrap();
            let mut entries = sent(&sent_parts, (1, 1), 1, 1);
            let stage = Stage::Commit {
                epoch: 1,
                id: 1,
                parts: sent_parts.len() as u32,
            };
            entries.push(entry(
                1,
                entries.len() as u64 + 1,
                last.clone(),
                Some(stage),
            ));
            let applied = sm.apply_all(entries);
            match ok {
                true => assert_eq!((applied.is_ok(), t.len().unwrap()), (true, 40)),
                false => {
                    assert!(matches!(applied, Err(Error::Corrupt { .. })), "{applied:?}");
                    assert_eq!(t.len().unwrap(), 0);
                }
            }
        }
    }

    /// A member that stops without closing (a crash) comes back at its last checkpoint and
    /// applies the entries after its marker again: parts it stored before the checkpoint
    /// are still there, those after are stored again, and the commit applies whole.
    #[test]
    fn parts_survive_a_crash_between_them() {
        let dir = tempfile::tempdir().unwrap();
        let open = || {
            let pending = Arc::new(Pending::default());
            StateMachine::open(dir.path(), Config::default(), pending, None).unwrap()
        };
        let (parts, last) = pieces(40);
        let n = parts.len();
        let mut entries = sent(&parts, (1, 1), 1, 1);
        let stage = Stage::Commit {
            epoch: 1,
            id: 1,
            parts: n as u32,
        };
        entries.push(entry(1, n as u64 + 1, last, Some(stage)));
        let half = n / 2;
        {
            let sm = open();
            sm.env().create_db("t").unwrap();
            sm.env().sync().unwrap();
            sm.apply_all(entries[..half].to_vec()).unwrap();
            sm.env().sync().unwrap();
            sm.apply_all(entries[half..n].to_vec()).unwrap();
            // Dropped unclosed: what was applied after the checkpoint is gone.
        }
        let sm = open();
        let marker = read_marker(&sm.handles().unwrap().1).unwrap();
        assert_eq!(marker.last.map(|l| l.index), Some(half as u64));
        assert_eq!(staged(&sm), half, "the parts of the checkpoint");
        sm.apply_all(entries[half..].to_vec()).unwrap();
        assert_eq!(sm.env().open_db("t").unwrap().len().unwrap(), 40);
        assert_eq!(staged(&sm), 0);
        sm.close().unwrap();
    }
}
