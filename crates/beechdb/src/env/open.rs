//! Opening an environment: the page file, recovery (the log replayed from the durable
//! checkpoint), the background thread.
//!
//! May call: `engine`, `wal`, `files`, `txn`.

use super::checkpointer::{checkpointer, CheckpointSignal};
use super::{Env, Shared, Tx};
use crate::config::{Config, Mode};
use crate::engine::{Engine, DB_FILE};
use crate::error::{Error, Result};
use crate::files::Listing;
use crate::storage::Storage;
use crate::sync::{OwnLine, ReadMostlyLock};
use crate::txn::TxnManager;
use crate::wal::reader::LogReader;
use crate::wal::{self, segment_name, Wal};
use parking_lot::Mutex;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

impl Env {
    pub(super) fn open_inner(storage: Arc<dyn Storage>, config: Config) -> Result<Env> {
        let read_only = config.read_only;
        let st = storage.as_ref();
        let exists = st
            .exists(DB_FILE)
            .map_err(|e| Error::io("looking for the page file", e))?;
        if !exists {
            // Checked before the lock is taken, so that a refusal creates nothing, not even
            // the lock file; checked again under the lock.
            let listing = Listing::read(st)?;
            if let Some(e) = listing.no_environment(st, config.create_value()) {
                return Err(e);
            }
        }
        let guard = match st.lock() {
            // A read-only environment takes no lock: it writes nothing, and may be opened
            // beside a process that holds the lock.
            _ if read_only => None,
            Ok(g) => Some(g),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(Error::Locked {
                    path: st.describe(),
                })
            }
            Err(e) => return Err(Error::io("taking the environment lock", e)),
        };
        let listing = Listing::read(st)?;
        if !listing.page_file {
            if let Some(e) = listing.no_environment(st, config.create_value()) {
                return Err(e);
            }
        }
        let mut engine = Engine::open(st, &config, !listing.page_file)?;
        let mut wal = None;
        let mut recovered_commits = 0;
        if engine.mode.has_log_files() {
            // Recovery: the checkpoint plus every commit logged after it. The log is judged
            // before anything is written: damage leaves every file as it was.
            let first_needed = engine.durable_meta.first_needed_segment().max(1);
            let from = wal::LogStart {
                lsn: engine.log_lsn,
                chain: engine.log_chain,
                segment: engine.log_segment,
                closed_clean: engine.durable_meta.closed_clean,
            };
            let present = listing
                .segments
                .range(engine.log_segment.max(1)..)
                .copied()
                .collect();
            let rec = wal::recover(
                st,
                engine.env_id,
                from,
                &present,
                config.log_segment_size,
                read_only,
            )?;
            if !read_only {
                engine.make_checkpoint_durable(rec.segments.first().map(|s| s.no))?;
            }
            if !config.keep_logs && !read_only {
                // No directory sync: a segment that comes back is removed at the next open.
                for name in listing
                    .segments
                    .range(..first_needed)
                    .map(|&n| segment_name(n))
                {
                    st.remove(&name)
                        .map_err(|e| Error::io(format!("removing {name}"), e))?;
                }
            }
            // Segments before the checkpoint's hold writes of transactions that spilled them
            // ahead and committed after it.
            let kept = listing
                .segments
                .range(first_needed..engine.log_segment.max(1));
            let live: Vec<u64> = kept
                .copied()
                .chain(rec.segments.iter().map(|s| s.no))
                .collect();
            let mut reader = LogReader::new(
                st,
                engine.env_id,
                live,
                (from.lsn, Some(from.chain)),
                rec.end,
            )?;
            let total = rec.end.saturating_sub(from.lsn);
            while let Some(c) = reader.next_commit()? {
                reader.for_each_op(&c, |op| engine.apply_op(op, c.end, false))?;
                engine.commit_lsn = c.end;
                engine.shrink_cache();
                engine
                    .pager
                    .writeback
                    .flush_all()
                    .map_err(|(context, e)| Error::io(context, e))?;
                recovered_commits += 1;
                if let Some(p) = &config.recovery_progress {
                    if recovered_commits % 1024 == 0 {
                        (p.0)(c.end.saturating_sub(from.lsn), total);
                    }
                }
            }
            engine.commit_lsn = rec.end;
            if !read_only {
                // Trees of databases the replayed commits removed.
                engine.free_doomed_now()?;
            }
            if !read_only {
                // A checkpoint interval of log fills this many segments, which the next
                // interval reuses.
                let reusable = config.checkpoint_log_bytes / config.log_segment_size + 1;
                let w = Wal::new(
                    storage.clone(),
                    config.log_segment_size,
                    engine.env_id,
                    rec.segments,
                    (rec.end, rec.chain),
                    from.lsn,
                )
                .keep_reusable(reusable.min(64) as usize);
                w.rewrite_recovered()?;
                wal = Some(Arc::new(w));
            }
        } else if let Some(&n) = listing.segments.iter().next() {
            return Err(Error::Corrupt {
                page: None,
                detail: format!(
                    "the environment at {} was created in {}, which keeps no log, yet it holds \
                     log segment {}; nothing was changed",
                    st.describe(),
                    engine.mode.config_words(),
                    segment_name(n)
                ),
            });
        } else if !read_only {
            engine.make_checkpoint_durable(None)?;
        }
        // Leftovers are harmless (each is rebuilt from nothing when next needed): removing
        // them is tidying, and a failure to remove one is ignored.
        for name in listing.leftovers.iter().filter(|_| !read_only) {
            let _ = st.remove(name);
        }
        let replayed = engine.commit_lsn != engine.log_lsn;
        let start_lsn = engine.commit_lsn;
        let tx = (engine.mode != Mode::DataStore).then(|| Tx {
            wal,
            scratch: Default::default(),
            log_segment_size: config.log_segment_size,
            txns: TxnManager::default(),
            durability: config.durability,
            isolation: config.isolation,
            lock_timeout: config.lock_timeout,
            txn_memory: config.txn_memory,
            keep_logs: config.keep_logs,
            checkpoint_log_bytes: config.checkpoint_log_bytes,
            inmem_lsn: OwnLine(AtomicU64::new(start_lsn)),
            last_checkpoint_lsn: AtomicU64::new(engine.log_lsn),
            pages_resident: OwnLine(AtomicBool::new(false)),
            checkpoint_signal: Arc::new(CheckpointSignal::default()),
            recovered_commits,
        });
        let env = Env {
            shared: Arc::new(Shared {
                writeback: engine.pager.writeback.clone(),
                engine: ReadMostlyLock::new(engine),
                data_version: OwnLine(AtomicU64::new(0)),
                closed: AtomicBool::new(false),
                storage: storage.clone(),
                lock: Mutex::new(guard),
                checkpoint_mutex: Mutex::new(()),
                freeing: Mutex::new(()),
                tx,
                bulk_done: crate::sync::Broadcast::new(),
                read_only,
                replicator: parking_lot::RwLock::new(None),
                replicated: AtomicBool::new(false),
            }),
        };
        if replayed && !read_only {
            // The replayed log was read through the page cache: it may never have been
            // durable. A checkpoint makes what was replayed durable before anything new is
            // logged after it.
            env.shared.checkpoint()?;
        }
        if let Some(tx) = env.shared.tx.as_ref().filter(|_| !read_only) {
            let (weak, signal) = (Arc::downgrade(&env.shared), tx.checkpoint_signal.clone());
            let interval = config.checkpoint_interval;
            std::thread::Builder::new()
                .name("beechdb-checkpointer".into())
                .spawn(move || checkpointer(weak, signal, interval))
                .map_err(|e| Error::io("starting the checkpoint thread", e))?;
        }
        Ok(env)
    }
}
