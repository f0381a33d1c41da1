//! Replication hooks: how a replication layer (the `beechdb-repl` crate) takes over the
//! commits of an environment and applies the commits of others.
//!
//! Owns: [`Replicator`], the encoding of a replicated commit, [`Env::set_replicator`],
//! [`Env::apply_replicated`] and [`Env::apply_staged`] (a commit that came in parts; the
//! parts themselves are `txn::parts`). May call: the commit pipeline (`txn::commit`). Invariants:
//! with a replicator installed, no commit reaches the trees except through
//! [`Env::apply_replicated`], so every member applies the same commits in the same order;
//! the transaction that made a commit keeps its locks until its commit is applied, so the
//! writes it checked cannot be overtaken; a replicated commit names databases by the ids the
//! master gave them, which every member shares because only the master creates databases.

use crate::config::{Duplicates, Durability, GroupDurability};
use crate::env::{Db, Env, Shared};
use crate::error::{Error, Result};
use crate::txn::Ddl;
use crate::wal::{Op, Ops, OpsBuilder};
use std::sync::Arc;

/// Takes over the commits of an environment: each transaction's commit is handed to
/// [`Replicator::replicate`] instead of being logged and applied locally. The replicator
/// makes it durable on the members its policy asks for and applies it everywhere, this
/// environment included, with [`Env::apply_replicated`].
pub trait Replicator: Send + Sync {
    /// Replicates one commit (an encoded write set) with durability `d` on this member, or
    /// `group` when the transaction set one; returns the commit's position in the
    /// replicated log (the commit token that replicas can wait for), once the group's
    /// acknowledgements the policy asks for are in. An error says whether the commit may
    /// yet be applied ([`Error::Replication`]) or was refused ([`Error::NotMaster`]).
    ///
    /// `locks` are the transaction's locks: the replicator drops them once the commit is
    /// applied here (or surely never will be), so that no other transaction writes its
    /// keys in between, even when it returns earlier (ack policy
    /// [`AckPolicy::None`](crate::AckPolicy::None)).
    ///
    /// `staged` names the parts that went ahead of a commit too large for one piece (see
    /// [`Replicator::stage`]); `commit` then holds the writes after them.
    fn replicate(
        &self,
        commit: &[u8],
        staged: Option<Staged>,
        d: Durability,
        group: Option<GroupDurability>,
        locks: HeldLocks,
    ) -> Result<u64>;

    /// The bytes of encoded writes beyond which a commit is sent in parts: a transaction
    /// whose write set is larger (or that spilled to the log) stages its writes with
    /// [`Replicator::stage`], in parts of about this size, before its commit.
    fn part_bytes(&self) -> usize;

    /// Stages one part of a large commit on the group (writes encoded as a commit is, with
    /// no catalog changes), returning once this member has stored it: every member keeps
    /// the parts, applying nothing, until the commit that names them is applied
    /// ([`Env::apply_staged`]). `staged` is `None` for a commit's first part; the
    /// replicator fills it in and counts each part, and the commit passes it on. A part may
    /// be far longer than [`Replicator::part_bytes`] (one long write): the replicator may
    /// then send it in pieces, and its apply yields it whole. A part is made durable as
    /// the commit it goes ahead of will be (`d` and `group`, as [`Replicator::replicate`]
    /// takes them): a member that acknowledged it keeps it through what that commit
    /// survives, so no member's log loses an entry it acknowledged.
    fn stage(
        &self,
        part: &[u8],
        staged: &mut Option<Staged>,
        d: Durability,
        group: Option<GroupDurability>,
    ) -> Result<()>;

    /// Gives up the parts `staged` names: their transaction failed before its commit was
    /// made, or its commit failed (a commit already in the group's log comes before this,
    /// so is applied first). Best effort: the replicator drops them later if it cannot now.
    fn abandon(&self, staged: Staged);

    /// Returns once this member has applied every commit the group made before now, or
    /// fails if it is not the master ([`Error::NotMaster`](crate::Error::NotMaster)) or no
    /// majority answers it ([`Error::InsufficientReplicas`](crate::Error::InsufficientReplicas)).
    /// Called before a commit that creates databases: the
    /// ids it took must not be taken by a commit of an earlier master still to be applied.
    fn catch_up(&self) -> Result<()>;

    /// Called when a transaction begins on this member, whose commit will ask for the
    /// acknowledgements of `ack` (the member's default when `None`): on the master, fails
    /// with [`Error::InsufficientReplicas`](crate::Error::InsufficientReplicas) when fewer
    /// members than that are in contact (JE checks this when a transaction begins).
    fn check_begin(&self, ack: Option<crate::AckPolicy>) -> Result<()>;
}

/// The parts a replicator staged ahead of one commit (see [`Replicator::stage`]): the
/// replicator's names for them (`epoch`, `id`) and how many there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Staged {
    /// The replicator's period the parts belong to (a replication group's term).
    pub epoch: u64,
    /// The commit's number within its epoch.
    pub id: u64,
    /// How many parts went ahead.
    pub parts: u32,
}

/// The locks of a transaction whose commit a [`Replicator`] took: released when dropped.
pub struct HeldLocks {
    shared: Arc<Shared>,
    txn: u64,
    keys: Vec<Vec<u8>>,
    dbs: Vec<u32>,
}

impl HeldLocks {
    pub(crate) fn new(shared: Arc<Shared>, txn: u64, keys: Vec<Vec<u8>>, dbs: Vec<u32>) -> Self {
        HeldLocks {
            shared,
            txn,
            keys,
            dbs,
        }
    }
}

impl Drop for HeldLocks {
    fn drop(&mut self) {
        if let Ok(tx) = self.shared.tx() {
            tx.txns.locks.release(self.txn, self.keys.drain(..));
            tx.txns.locks.release_databases(self.txn, &self.dbs);
        }
    }
}

const DDL_CREATE: u8 = 1;
const DDL_REMOVE: u8 = 2;
/// A database with duplicates: the kind byte is followed by [`Duplicates::code`].
const DDL_CREATE_WITH_DUPS: u8 = 3;

/// Encodes a commit: its databases created or removed, in order, then its writes.
pub(crate) fn encode_commit(ddl: &[Ddl], ops: Ops) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + ops.bytes().len());
    out.extend_from_slice(&(ddl.len() as u32).to_le_bytes());
    for d in ddl {
        let (kind, db, name) = match d {
            Ddl::Create {
                db,
                name,
                dups: Duplicates::None,
            } => (DDL_CREATE, db, name),
            Ddl::Create { db, name, dups } => {
                out.push(DDL_CREATE_WITH_DUPS);
                (dups.code(), db, name)
            }
            Ddl::Remove { db, name } => (DDL_REMOVE, db, name),
        };
        out.push(kind);
        out.extend_from_slice(&db.to_le_bytes());
        out.extend_from_slice(&(name.len() as u32).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
    }
    ops.encode(&mut out);
    out
}

/// Decodes [`encode_commit`]'s bytes; a typed error for anything cut short, malformed or
/// followed by stray bytes.
pub(crate) fn decode_commit(bytes: &[u8]) -> Result<(Vec<Ddl>, Ops<'_>)> {
    let bad = || Error::Corrupt {
        page: None,
        detail: "a replicated commit is malformed".into(),
    };
    let buf = &mut &bytes[..];
    let take_u32 = |buf: &mut &[u8]| -> Option<u32> {
        let (head, rest) = buf.split_first_chunk::<4>()?;
        *buf = rest;
        Some(u32::from_le_bytes(*head))
    };
    let count = take_u32(buf).ok_or_else(bad)?;
    let mut ddl = Vec::new();
    for _ in 0..count {
        let (&kind, rest) = buf.split_first().ok_or_else(bad)?;
        *buf = rest;
        let dups = if kind == DDL_CREATE_WITH_DUPS {
            let (&code, rest) = buf.split_first().ok_or_else(bad)?;
            *buf = rest;
            Duplicates::from_code(code)
                .filter(|&d| d != Duplicates::None)
                .ok_or_else(bad)?
        } else {
            Duplicates::None
        };
        let db = take_u32(buf).ok_or_else(bad)?;
        let len = take_u32(buf).ok_or_else(bad)? as usize;
        if buf.len() < len {
            return Err(bad());
        }
        let (name, rest) = buf.split_at(len);
        *buf = rest;
        let name = std::str::from_utf8(name).map_err(|_| bad())?.to_string();
        ddl.push(match kind {
            DDL_CREATE | DDL_CREATE_WITH_DUPS => Ddl::Create { db, name, dups },
            DDL_REMOVE => Ddl::Remove { db, name },
            _ => return Err(bad()),
        });
    }
    let ops = Ops::take(buf).ok_or_else(bad)?;
    if !buf.is_empty() {
        return Err(bad());
    }
    Ok((ddl, ops))
}

impl Shared {
    pub(crate) fn replicator(&self) -> Option<Arc<dyn Replicator>> {
        if !self.replicated.load(std::sync::atomic::Ordering::Acquire) {
            return None;
        }
        self.replicator.read().clone()
    }

    /// Hands a commit (its catalog changes `ddl`, then its writes `ops`) to the replicator
    /// `r`, with durability `d` or `group`, and the transaction's `locks`.
    pub(crate) fn commit_replicated(
        &self,
        r: &dyn Replicator,
        ddl: &[Ddl],
        ops: Ops,
        d: Durability,
        group: Option<GroupDurability>,
        locks: HeldLocks,
    ) -> Result<u64> {
        self.live()?;
        if ddl.iter().any(|d| matches!(d, Ddl::Create { .. })) {
            r.catch_up()?;
            let e = self.engine.read();
            for d in ddl {
                if let Ddl::Create { db, name, .. } = d {
                    if e.names.contains_key(name) {
                        return Err(Error::DbExists(name.clone()));
                    }
                    if e.db(*db).is_ok() {
                        // An earlier master's database took the id: a retry takes another.
                        return Err(Error::Conflict);
                    }
                }
            }
        }
        r.replicate(&encode_commit(ddl, ops), None, d, group, locks)
    }
}

impl Env {
    /// Installs (or with `None` removes) the replicator that takes over this environment's
    /// commits. Transactional environments only.
    pub fn set_replicator(&self, replicator: Option<Arc<dyn Replicator>>) -> Result<()> {
        self.shared.tx()?;
        let on = replicator.is_some();
        *self.shared.replicator.write() = replicator;
        self.shared
            .replicated
            .store(on, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Applies commits that a [`Replicator`] was given (here or on another member), in
    /// order, as one local commit with durability `d`, together with `own`, writes of the
    /// replication layer's own in a database of its own (its applied position, parts it
    /// stages or drops; `None` values delete) that become durable atomically with them.
    /// Takes no locks: the master's transactions that made the commits still hold theirs,
    /// and a replica has no other writers.
    ///
    /// A commit that writes a database that does not exist by then (removed by an earlier
    /// commit, of this batch or before), or creates a name or id already taken, is left
    /// out, and its error returned in its place: every member decides alike. Returns the
    /// local commit's LSN and, per commit, `None` or the error that left it out.
    pub fn apply_replicated(
        &self,
        commits: &[&[u8]],
        own: Option<OwnWrites>,
        d: Durability,
    ) -> Result<(u64, Vec<Option<Error>>)> {
        let shared = &self.shared;
        let tx = shared.tx()?;
        let decoded: Vec<(Vec<Ddl>, Ops)> = commits
            .iter()
            .map(|c| decode_commit(c))
            .collect::<Result<_>>()?;
        let mut ddl: Vec<Ddl> = Vec::new();
        let mut all = OpsBuilder::default();
        let mut dbs: Vec<u32> = Vec::new();
        let mut outcome = Vec::with_capacity(decoded.len());
        let mut accepted: Vec<Ops> = Vec::new();
        {
            // Only this call writes the environment now, so what it checks here holds
            // when it commits.
            let e = shared.engine.read();
            let mut removed: Vec<u32> = Vec::new();
            let mut created: Vec<(u32, &str)> = Vec::new();
            let exists = |db: u32, removed: &[u32], created: &[(u32, &str)]| {
                !removed.contains(&db) && (e.db(db).is_ok() || created.iter().any(|c| c.0 == db))
            };
            for (cddl, ops) in &decoded {
                let mut own: Vec<(u32, &str)> = Vec::new();
                let mut refused = None;
                for d in cddl {
                    match d {
                        Ddl::Create { db, name, .. } => {
                            let taken_name = (e.names.contains_key(name.as_str())
                                && !removed.contains(&e.names[name.as_str()]))
                                || created.iter().any(|c| c.1 == name);
                            if taken_name {
                                refused = Some(Error::DbExists(name.clone()));
                            } else if exists(*db, &removed, &created) {
                                refused = Some(Error::Conflict);
                            }
                            own.push((*db, name));
                        }
                        Ddl::Remove { db, .. } => {
                            if !exists(*db, &removed, &created) && !own.iter().any(|c| c.0 == *db) {
                                refused = Some(Error::DbRemoved);
                            }
                        }
                    }
                }
                let mut visible = created.clone();
                visible.extend(own.iter().copied());
                if refused.is_none() && ops.iter().any(|op| !exists(op.db(), &removed, &visible)) {
                    refused = Some(Error::DbRemoved);
                }
                if refused.is_none() {
                    for d in cddl {
                        match d {
                            Ddl::Create { db, name, .. } => created.push((*db, name)),
                            Ddl::Remove { db, .. } => removed.push(*db),
                        }
                        ddl.push(d.clone());
                    }
                    accepted.push(*ops);
                }
                outcome.push(refused);
            }
            // The batch's DDL is applied before its writes: writes to a database that a
            // later commit of the batch removes are dropped, as the removal would drop them.
            for op in accepted.iter().flat_map(|ops| ops.iter()) {
                if removed.contains(&op.db()) {
                    continue;
                }
                if !dbs.contains(&op.db()) {
                    dbs.push(op.db());
                }
                all.push(op);
            }
        }
        if let Some((db, writes)) = own {
            if !dbs.contains(&db.id()) {
                dbs.push(db.id());
            }
            for &(key, value) in writes {
                all.push(own_op(db, key, value));
            }
        }
        let id = tx.txns.new_id();
        let lsn = shared.commit_local(id, &ddl, all.ops(), &dbs, d)?;
        Ok((lsn, outcome))
    }

    /// Applies a commit that came in parts ([`Replicator::stage`]): `parts` yields its
    /// staged parts in order, then the commit the replicator was given, each as the
    /// replicator was given it. They are committed here as one local commit with durability
    /// `d`, together with `own` (as in [`Env::apply_replicated`]), holding no more writes in
    /// memory than the transaction budget ([`Config::txn_memory`](crate::Config::txn_memory)):
    /// beyond it they spill to the log, as a transaction's do. Takes no locks. A part that
    /// writes a database that does not exist fails the whole commit with
    /// [`Error::DbRemoved`], nothing applied, as [`Env::apply_replicated`] refuses one.
    pub fn apply_staged(
        &self,
        parts: &mut dyn FnMut() -> Result<Option<Vec<u8>>>,
        own: OwnWrites,
        d: Durability,
    ) -> Result<u64> {
        self.shared.apply_parts(parts, own, d)
    }
}

/// Writes of a replication layer's own, in one database of its own: `(key, Some(value))`
/// puts, `(key, None)` deletes.
pub type OwnWrites<'a> = (&'a Db, &'a [(&'a [u8], Option<&'a [u8]>)]);

pub(crate) fn own_op<'a>(db: &Db, key: &'a [u8], value: Option<&'a [u8]>) -> Op<'a> {
    match value {
        Some(value) => Op::Put {
            db: db.id(),
            key,
            value,
        },
        None => Op::Delete { db: db.id(), key },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_round_trips_and_damage_is_refused() {
        let ddl = vec![
            Ddl::Create {
                db: 7,
                name: "accounts".into(),
                dups: Duplicates::None,
            },
            Ddl::Create {
                db: 8,
                name: "pairs".into(),
                dups: Duplicates::Sorted,
            },
            Ddl::Remove {
                db: 3,
                name: "old".into(),
            },
        ];
        let mut ops = OpsBuilder::default();
        ops.push(Op::Put {
            db: 7,
            key: b"k",
            value: b"v",
        });
        ops.push(Op::Delete {
            db: 2,
            key: b"gone",
        });
        let bytes = encode_commit(&ddl, ops.ops());
        let (ddl2, ops2) = decode_commit(&bytes).unwrap();
        assert_eq!(format!("{ddl:?}"), format!("{ddl2:?}"));
        assert_eq!(
            ops2.iter().collect::<Vec<_>>(),
            ops.ops().iter().collect::<Vec<_>>()
        );
        for cut in 0..bytes.len() {
            assert!(decode_commit(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_commit(&longer).is_err());
        let mut bad_kind = bytes;
        bad_kind[4] = 9;
        assert!(decode_commit(&bad_kind).is_err());
    }

    #[test]
    fn a_batch_applies_in_order_and_refuses_alike() {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::open(dir.path(), crate::Config::default().transactional(true)).unwrap();
        let a = env.create_db("a").unwrap();
        let marker = env.create_db("marker").unwrap();
        let put = |db: u32, key: &'static [u8]| {
            let mut b = OpsBuilder::default();
            b.push(Op::Put {
                db,
                key,
                value: b"v",
            });
            b
        };
        let none = OpsBuilder::default();
        let (ida, idb) = (a.id(), 50);
        let remove_a = [Ddl::Remove {
            db: ida,
            name: "a".into(),
        }];
        let create_b = [Ddl::Create {
            db: idb,
            name: "b".into(),
            dups: Duplicates::None,
        }];
        let create_b_again = [Ddl::Create {
            db: idb + 1,
            name: "b".into(),
            dups: Duplicates::None,
        }];
        let commits = [
            encode_commit(&[], put(ida, b"k1").ops()),
            encode_commit(&remove_a, none.ops()),
            encode_commit(&[], put(ida, b"k2").ops()),
            encode_commit(&create_b, put(idb, b"x").ops()),
            encode_commit(&create_b_again, none.ops()),
        ];
        let slices: Vec<&[u8]> = commits.iter().map(Vec::as_slice).collect();
        let (_, outcome) = env
            .apply_replicated(
                &slices,
                Some((&marker, &[(&b"m"[..], Some(&b"1"[..]))])),
                Durability::NoSync,
            )
            .unwrap();
        let kinds: Vec<String> = outcome.iter().map(|o| format!("{o:?}")).collect();
        assert_eq!(kinds[..2], ["None", "None"]);
        assert!(matches!(outcome[2], Some(Error::DbRemoved)), "{kinds:?}");
        assert!(outcome[3].is_none(), "{kinds:?}");
        assert!(matches!(outcome[4], Some(Error::DbExists(_))), "{kinds:?}");
        assert!(matches!(env.open_db("a"), Err(Error::DbNotFound(_))));
        assert_eq!(
            env.open_db("b").unwrap().get(b"x").unwrap().as_deref(),
            Some(&b"v"[..])
        );
        assert_eq!(marker.get(b"m").unwrap().as_deref(), Some(&b"1"[..]));
        env.close().unwrap();
    }

    /// A commit in parts applies whole, spilling past the transaction budget, with the
    /// replication layer's writes; one that writes a missing database applies nothing.
    #[test]
    fn parts_apply_as_one_commit_spilling_past_the_budget() {
        for in_memory_log in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let config = crate::Config::default()
                .transactional(true)
                .in_memory_log(in_memory_log)
                .txn_memory(64 << 10);
            let env = Env::open(dir.path(), config).unwrap();
            let a = env.create_db("a").unwrap();
            let marker = env.create_db("marker").unwrap();
            a.put(b"gone", b"x").unwrap();
            let part = |from: u32| {
                let mut b = OpsBuilder::default();
                let keys: Vec<[u8; 4]> = (from..from + 1000).map(u32::to_be_bytes).collect();
                for k in &keys {
                    b.push(Op::Put {
                        db: a.id(),
                        key: k,
                        value: &[5u8; 100],
                    });
                }
                b.push(Op::Delete {
                    db: a.id(),
                    key: b"gone",
                });
                encode_commit(&[], b.ops())
            };
            let mut parts = (0..10).map(|i| part(i * 1000));
            let own = [(&b"m"[..], Some(&b"1"[..])), (&b"staged"[..], None)];
            env.apply_staged(
                &mut || Ok(parts.next()),
                (&marker, &own),
                Durability::NoSync,
            )
            .unwrap();
            assert_eq!(a.len().unwrap(), 10_000, "in-memory log: {in_memory_log}");
            assert_eq!(marker.get(b"m").unwrap().as_deref(), Some(&b"1"[..]));
            // With the log in memory, to scratch files.
            assert!(env.stat().unwrap().txn.unwrap().txns.spilled_commits > 0);
            // A part naming a database that does not exist: nothing of the commit applies.
            let mut b = OpsBuilder::default();
            b.push(Op::Put {
                db: 99,
                key: b"k",
                value: b"v",
            });
            let mut parts = [part(20_000), encode_commit(&[], b.ops())].into_iter();
            let own = [(&b"m"[..], Some(&b"2"[..]))];
            let refused = env.apply_staged(
                &mut || Ok(parts.next()),
                (&marker, &own),
                Durability::NoSync,
            );
            assert!(matches!(refused, Err(Error::DbRemoved)), "{refused:?}");
            assert_eq!(a.len().unwrap(), 10_000);
            assert_eq!(marker.get(b"m").unwrap().as_deref(), Some(&b"1"[..]));
            env.close().unwrap();
        }
    }
}
