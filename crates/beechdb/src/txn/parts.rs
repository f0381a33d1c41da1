//! A commit in a replication group too large for one entry of the group's log: on the
//! master, its writes go ahead in parts that every member stages, then a commit that names
//! them; on every member, that commit's apply reads the staged parts back and commits them
//! locally in bounded memory, as a transaction that spilled to the log commits.
//!
//! Owns: [`Shared::commit_in_parts`] (the master's side) and [`Shared::apply_parts`]
//! (every member's). May call: the replicator, the write set (`writes`, which spills), the
//! commit paths (`commit`, `bulk`). Invariants:
//! - the transaction's locks go with its last piece, as any replicated commit's do, so no
//!   other transaction writes its keys until the whole commit is applied;
//! - a part holds about the replicator's `part_bytes` of encoded writes (more only by its
//!   last write, and then the replicator sends it in pieces), none of them catalog
//!   changes: a transaction that changes the catalog and is too large for one entry is
//!   refused before anything is sent; the commit carries less than `part_bytes` of writes;
//! - applying takes no key locks (the master's transaction holds them, and a replica has no
//!   other writers) and keeps no more writes in memory than the transaction budget.

use super::handle::State;
use crate::config::Durability;
use crate::env::Shared;
use crate::error::{Error, Result};
use crate::replica::{decode_commit, encode_commit, own_op, OwnWrites};
use crate::wal::reader::RunMerge;
use crate::wal::{Op, OpsBuilder};
use crate::{HeldLocks, Replicator, Staged};

impl Shared {
    /// Commits transaction `txn` through replicator `r` in parts (see the module comment);
    /// returns the replicator's commit token.
    pub(super) fn commit_in_parts(
        &self,
        r: &dyn Replicator,
        txn: u64,
        st: &mut State,
        d: Durability,
        locks: HeldLocks,
    ) -> Result<u64> {
        self.live()?;
        if !st.ddl.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "in a replication group, a transaction that creates or removes databases \
                 cannot also write more than one entry of the group's log holds ({} bytes): \
                 create or remove them in a transaction of their own",
                r.part_bytes()
            )));
        }
        let mut staged: Option<Staged> = None;
        let result = self
            .send_parts(r, txn, st, d, &mut staged)
            .and_then(|last| {
                r.replicate(&encode_commit(&[], last.ops()), staged, d, st.group, locks)
            });
        if let (Err(_), Some(s)) = (&result, staged) {
            r.abandon(s);
        }
        result
    }

    /// Stages the writes of transaction `txn` but the last part's, which it returns; the
    /// parts as durable as its commit with durability `d` will be.
    fn send_parts(
        &self,
        r: &dyn Replicator,
        txn: u64,
        st: &mut State,
        d: Durability,
        staged: &mut Option<Staged>,
    ) -> Result<OpsBuilder> {
        let tx = self.tx()?;
        let limit = r.part_bytes().max(1);
        let group = st.group;
        let mut part = OpsBuilder::default();
        let mut add = |op: Op, part: &mut OpsBuilder| -> Result<()> {
            part.push(op);
            if part.byte_len() >= limit {
                r.stage(&encode_commit(&[], part.ops()), staged, d, group)?;
                part.clear();
            }
            Ok(())
        };
        if st.writes.spilled() {
            let (runs, reader) = st.writes.runs(txn, &tx.txns.stats)?;
            let mut merge = RunMerge::new(reader, txn, runs.iter().copied());
            while let Some(op) = merge.next()? {
                add(op, &mut part)?;
            }
        } else {
            let ops = st.commit_ops();
            for op in ops.ops().iter() {
                add(op, &mut part)?;
            }
        }
        Ok(part)
    }

    /// Commits here the writes of `parts` (encoded commits with no catalog changes, yielded
    /// one at a time) and then `own`, as one local commit with durability `d`, in bounded
    /// memory (see [`Env::apply_staged`](crate::Env::apply_staged)); returns its LSN.
    pub(crate) fn apply_parts(
        &self,
        parts: &mut dyn FnMut() -> Result<Option<Vec<u8>>>,
        own: OwnWrites,
        d: Durability,
    ) -> Result<u64> {
        self.live()?;
        let tx = self.tx()?;
        let txn = tx.txns.new_id();
        let mut st = State::applying(d);
        let result = (|| {
            let write = |st: &mut State, op: Op| -> Result<()> {
                st.write(op.db(), op.key(), op.value().map(<[u8]>::to_vec));
                self.spill_if_over(txn, st)
            };
            while let Some(part) = parts()? {
                let (ddl, ops) = decode_commit(&part)?;
                if !ddl.is_empty() {
                    return Err(Error::Corrupt {
                        page: None,
                        detail: "a staged part of a replicated commit changes the catalog".into(),
                    });
                }
                for op in ops.iter() {
                    write(&mut st, op)?;
                }
            }
            let (db, writes) = own;
            for &(key, value) in writes {
                write(&mut st, own_op(db, key, value))?;
            }
            if st.writes.spilled() || self.commits_in_batches(st.writes.mem_writes(), &[]) {
                self.commit_in_batches(txn, &mut st, d)
            } else {
                let ops = st.commit_ops();
                self.commit_local(txn, &[], ops.ops(), &st.dbs, d)
            }
        })();
        st.writes.end_hold(result.as_ref().ok().copied());
        result
    }
}
