//! Statistics for `beech stat` and for programs: environment-wide counters and per-database
//! tree shape. Plain structs, printable as text (`Display`) or JSON (`serde`).

use crate::btree::node::{self, LeafValue};
use crate::engine::Engine;
use crate::error::Result;
use serde::Serialize;
use std::fmt;
use std::sync::atomic::Ordering::Relaxed;

/// Environment statistics.
#[derive(Debug, Clone, Serialize)]
pub struct EnvStat {
    /// Page size in bytes.
    pub page_size: usize,
    /// Cache budget in bytes.
    pub cache_capacity_bytes: u64,
    /// Pages in the cache now.
    pub cache_resident_pages: u64,
    /// Page lookups served from the cache.
    pub cache_hits: u64,
    /// Pages read from the file: by readers with no lock held, and by writers (under the
    /// exclusive lock).
    pub cache_misses: u64,
    /// Of those, pages read by readers with no lock held.
    pub cache_loads_unlocked: u64,
    /// Reads that loaded pages under the exclusive lock, after repeated conflicts with
    /// writers.
    pub cache_reads_locked: u64,
    /// Times readers took the exclusive lock to evict clean pages (no I/O) because the pages
    /// they loaded overfilled the cache.
    pub cache_reader_evictions: u64,
    /// Pages evicted.
    pub cache_evictions: u64,
    /// Dirty pages written out by eviction.
    pub cache_dirty_evictions: u64,
    /// Pages written (eviction, checkpoints, overflow values).
    pub pages_written: u64,
    /// Checkpoints completed since open.
    pub checkpoints: u64,
    /// Generation of the durable checkpoint.
    pub generation: u64,
    /// Pages in the page file.
    pub page_count: u64,
    /// Size of the page file.
    pub file_bytes: u64,
    /// Pages free for reuse now.
    pub free_pages: u64,
    /// Pages freed since the last checkpoint, reusable after the next.
    pub pending_free_pages: u64,
    /// Number of databases.
    pub databases: u64,
    /// Set after an I/O failure: why writes are refused.
    pub poisoned: Option<String>,
    /// Problems with the meta pages found at open.
    pub meta_warnings: Vec<String>,
    /// Transactions and log, in a transactional environment.
    pub txn: Option<TxnStat>,
}

/// Transaction, lock and log statistics of a transactional environment.
#[derive(Debug, Clone, Serialize, Default)]
pub struct TxnStat {
    /// Transactions begun (explicit ones; auto-committed operations are counted as commits).
    pub begun: u64,
    /// Commits, explicit and auto-committed.
    pub commits: u64,
    /// Aborts, explicit or by drop.
    pub aborts: u64,
    /// Write conflicts reported (`Error::Conflict`).
    pub conflicts: u64,
    /// Deadlocks broken (`Error::Deadlock`).
    pub deadlocks: u64,
    /// Lock waits that timed out (`Error::LockTimeout`).
    pub lock_timeouts: u64,
    /// Lock requests that had to wait.
    pub lock_waits: u64,
    /// Commits replayed by recovery at open.
    pub recovered_commits: u64,
    /// Log bytes appended since open.
    pub log_bytes: u64,
    /// Log records appended since open.
    pub log_records: u64,
    /// Writes of the log buffer.
    pub log_writes: u64,
    /// fsyncs of the log.
    pub log_fsyncs: u64,
    /// Commits made durable by group-commit flushes; divided by `log_fsyncs`, the average batch.
    pub group_commit_commits: u64,
    /// The largest number of commits one fsync made durable.
    pub group_commit_max: u64,
    /// Microseconds spent writing and syncing the log (by group-commit leaders).
    pub log_flush_micros: u64,
    /// Microseconds group-commit leaders waited for announced committers before flushing.
    pub group_commit_gather_micros: u64,
    /// Log segments switched to that were prepared in the background.
    pub log_segments_prepared: u64,
    /// Log segments the commit filling the previous one had to create (and zero-fill).
    pub log_segments_created_inline: u64,
}

impl EnvStat {
    pub(crate) fn collect(e: &Engine, txn: Option<TxnStat>) -> EnvStat {
        let ps = e.layout.page_size as u64;
        EnvStat {
            page_size: e.layout.page_size,
            cache_capacity_bytes: e.cache.capacity() as u64 * ps,
            cache_resident_pages: e.cache.len() as u64,
            cache_hits: e.cache.hits(),
            cache_misses: e.cache.misses + e.cache.shared_loads.load(Relaxed),
            cache_loads_unlocked: e.cache.shared_loads.load(Relaxed),
            cache_reads_locked: e.cache.reads_locked.load(Relaxed),
            cache_reader_evictions: e.cache.reader_evictions.load(Relaxed),
            cache_evictions: e.cache.evictions,
            cache_dirty_evictions: e.cache.dirty_evictions,
            pages_written: e.pages_written,
            checkpoints: e.checkpoints,
            generation: e.generation,
            page_count: e.space.page_count(),
            file_bytes: e.file.len().unwrap_or(0),
            free_pages: e.space.free_count() as u64,
            pending_free_pages: e.space.pending_count() as u64,
            databases: e.names.len() as u64,
            poisoned: e.poisoned.clone(),
            meta_warnings: e.meta_warnings.clone(),
            txn,
        }
    }
}

impl fmt::Display for EnvStat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows: [(&str, String); 18] = [
            ("Page size", self.page_size.to_string()),
            (
                "Cache capacity (bytes)",
                self.cache_capacity_bytes.to_string(),
            ),
            (
                "Cache resident pages",
                self.cache_resident_pages.to_string(),
            ),
            ("Cache hits", self.cache_hits.to_string()),
            ("Cache misses", self.cache_misses.to_string()),
            (
                "Cache misses loaded by readers with no lock",
                self.cache_loads_unlocked.to_string(),
            ),
            (
                "Reads that loaded under the exclusive lock",
                self.cache_reads_locked.to_string(),
            ),
            (
                "Clean evictions by readers (no I/O)",
                self.cache_reader_evictions.to_string(),
            ),
            ("Cache evictions", self.cache_evictions.to_string()),
            (
                "Dirty pages written by eviction",
                self.cache_dirty_evictions.to_string(),
            ),
            ("Pages written", self.pages_written.to_string()),
            ("Checkpoints this session", self.checkpoints.to_string()),
            ("Checkpoint generation", self.generation.to_string()),
            ("Pages in file", self.page_count.to_string()),
            ("File size (bytes)", self.file_bytes.to_string()),
            ("Free pages", self.free_pages.to_string()),
            (
                "Pages freed, reusable after the next checkpoint",
                self.pending_free_pages.to_string(),
            ),
            ("Databases", self.databases.to_string()),
        ];
        write_rows(f, &rows)?;
        if let Some(p) = &self.poisoned {
            writeln!(f, "POISONED\t{p}")?;
        }
        for w in &self.meta_warnings {
            writeln!(f, "WARNING\t{w}")?;
        }
        if let Some(t) = &self.txn {
            let avg = if t.log_fsyncs == 0 {
                0.0
            } else {
                t.group_commit_commits as f64 / t.log_fsyncs as f64
            };
            let rows: [(&str, String); 19] = [
                ("Transactions begun", t.begun.to_string()),
                ("Commits", t.commits.to_string()),
                ("Aborts", t.aborts.to_string()),
                ("Write conflicts", t.conflicts.to_string()),
                ("Deadlocks", t.deadlocks.to_string()),
                ("Lock wait timeouts", t.lock_timeouts.to_string()),
                ("Lock requests that waited", t.lock_waits.to_string()),
                (
                    "Commits replayed by recovery",
                    t.recovered_commits.to_string(),
                ),
                ("Log bytes written", t.log_bytes.to_string()),
                ("Log records", t.log_records.to_string()),
                ("Log buffer writes", t.log_writes.to_string()),
                ("Log fsyncs", t.log_fsyncs.to_string()),
                (
                    "Commits made durable by group commit",
                    t.group_commit_commits.to_string(),
                ),
                ("Average commits per fsync", format!("{avg:.2}")),
                ("Largest group commit", t.group_commit_max.to_string()),
                (
                    "Log write and sync time (us)",
                    t.log_flush_micros.to_string(),
                ),
                (
                    "Group-commit gather wait (us)",
                    t.group_commit_gather_micros.to_string(),
                ),
                (
                    "Log segments prepared ahead",
                    t.log_segments_prepared.to_string(),
                ),
                (
                    "Log segments created by a commit",
                    t.log_segments_created_inline.to_string(),
                ),
            ];
            writeln!(f, "Transactions and log:")?;
            write_rows(f, &rows)?;
        }
        Ok(())
    }
}

/// Prints `value<TAB>name` lines, as Berkeley DB's db_stat does.
fn write_rows(f: &mut fmt::Formatter<'_>, rows: &[(&str, String)]) -> fmt::Result {
    rows.iter()
        .try_for_each(|(name, value)| writeln!(f, "{value}\t{name}"))
}

/// Statistics of one database, gathered by walking its tree.
#[derive(Debug, Clone, Serialize)]
pub struct DbStat {
    /// Database name.
    pub name: String,
    /// Number of entries.
    pub entries: u64,
    /// Levels from root to leaf.
    pub depth: u32,
    /// Leaf pages.
    pub leaf_pages: u64,
    /// Branch pages.
    pub branch_pages: u64,
    /// Overflow pages (large values).
    pub overflow_pages: u64,
    /// Bytes of cells and slots in tree pages.
    pub bytes_used: u64,
    /// `bytes_used` as a percentage of the tree pages' capacity.
    pub fill_percent: f64,
}

impl DbStat {
    pub(crate) fn collect(e: &mut Engine, id: u32) -> Result<DbStat> {
        let d = e.db(id)?.clone();
        let mut st = DbStat {
            name: d.name,
            entries: d.entries,
            depth: 0,
            leaf_pages: 0,
            branch_pages: 0,
            overflow_pages: 0,
            bytes_used: 0,
            fill_percent: 0.0,
        };
        let mut level = vec![d.root];
        while !level.is_empty() {
            st.depth += 1;
            let mut next = Vec::new();
            for pid in level {
                e.ensure(pid)?;
                let p = e.node(pid);
                st.bytes_used += node::used(p) as u64;
                let n = node::nslots(p);
                if node::is_leaf(p) {
                    st.leaf_pages += 1;
                    for i in 0..n {
                        if let LeafValue::Overflow { len, .. } = node::leaf_value(p, i) {
                            st.overflow_pages += (len as u64).div_ceil(e.layout.capacity() as u64);
                        }
                    }
                } else {
                    st.branch_pages += 1;
                    next.extend((0..=n).map(|i| node::child(p, i)));
                }
            }
            level = next;
        }
        let cap = (st.leaf_pages + st.branch_pages) * e.layout.capacity() as u64;
        st.fill_percent = if cap == 0 {
            0.0
        } else {
            100.0 * st.bytes_used as f64 / cap as f64
        };
        Ok(st)
    }
}

impl fmt::Display for DbStat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Database {:?}", self.name)?;
        writeln!(f, "{}\tEntries", self.entries)?;
        writeln!(f, "{}\tTree depth", self.depth)?;
        writeln!(f, "{}\tLeaf pages", self.leaf_pages)?;
        writeln!(f, "{}\tBranch pages", self.branch_pages)?;
        writeln!(f, "{}\tOverflow pages", self.overflow_pages)?;
        writeln!(f, "{:.1}%\tTree page fill", self.fill_percent)
    }
}
