//! Statistics for `beech stat` and for programs: environment-wide counters and per-database
//! tree shape. Plain structs, printable as text (`Display`) or JSON (`serde`).

use crate::btree::node::{self, LeafValue};
use crate::engine::Engine;
use crate::error::Result;
use serde::Serialize;
use std::fmt;
use std::sync::atomic::Ordering::Relaxed;

/// Declares a group of counters once: each one's name and printed label. Yields the atomic
/// counters the engine bumps (`$atomics`), the public snapshot of them (`$snapshot`), the
/// snapshot's taking, and its printed rows.
macro_rules! counters {
    ($(#[$doc:meta])* $atomics:ident => $snapshot:ident {
        $($(#[$fdoc:meta])* $field:ident: $label:literal,)*
    }) => {
        /// The atomic counters behind
        #[doc = concat!("[`", stringify!($snapshot), "`].")]
        #[derive(Default)]
        pub(crate) struct $atomics {
            $(pub $field: std::sync::atomic::AtomicU64,)*
        }

        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
        pub struct $snapshot {
            $($(#[$fdoc])* pub $field: u64,)*
        }

        impl $atomics {
            pub(crate) fn snapshot(&self) -> $snapshot {
                $snapshot {
                    $($field: self.$field.load(Relaxed),)*
                }
            }
        }

        impl $snapshot {
            /// `(label, value)` for each counter, in declaration order.
            pub fn rows(&self) -> Vec<(&'static str, String)> {
                vec![$(($label, self.$field.to_string()),)*]
            }
        }
    };
}

counters! {
    /// Transactions since open.
    TxnCounters => TxnCounts {
        /// Transactions begun (explicit ones; auto-committed operations count as commits).
        begun: "Transactions begun",
        /// Commits, explicit and auto-committed.
        commits: "Commits",
        /// Aborts, explicit or by drop.
        aborts: "Aborts",
        /// Write conflicts reported (`Error::Conflict`).
        conflicts: "Write conflicts",
        /// Times a transaction's writes outgrew `Config::txn_memory` and spilled to the log.
        spills: "Transaction spills to the log",
        /// Merges of a spilled transaction's runs into a larger one.
        run_merges: "Spilled runs merged",
        /// Records of spilled runs read back to find a key a transaction reads (a run's key
        /// filter skips most runs that do not hold it).
        spilled_reads: "Spilled records read back for a key",
        /// Commits of spilled transactions, applied in batches.
        spilled_commits: "Commits of spilled transactions",
        /// Commits of transactions that did not spill but wrote more than one hold of the
        /// exclusive lock applies, applied in batches from memory.
        large_commits: "Large commits applied in batches",
    }
}

counters! {
    /// Key locks since open.
    LockCounters => LockCounts {
        /// Lock requests that had to wait.
        waits: "Lock requests that waited",
        /// Deadlocks broken (`Error::Deadlock`).
        deadlocks: "Deadlocks",
        /// Lock waits that timed out (`Error::LockTimeout`).
        timeouts: "Lock wait timeouts",
        /// Key locks of one database traded for a lock on the whole database.
        escalations: "Lock escalations",
    }
}

counters! {
    /// The log since open.
    LogCounters => LogCounts {
        /// Bytes appended.
        bytes: "Log bytes written",
        /// Records appended.
        records: "Log records",
        /// Writes of the log buffer.
        writes: "Log buffer writes",
        /// fsyncs of log segments (all of them, including the background ones).
        fsyncs: "Log fsyncs",
        /// Of those, syncs by the background thread, which keeps the log not yet durable
        /// under a quarter segment so that a segment switch has little left to sync.
        background_syncs: "Log syncs in the background",
        /// Commits made durable by group-commit flushes; divided by `fsyncs`, the batch.
        group_commits: "Commits made durable by group commit",
        /// The largest number of commits one flush made durable.
        max_group: "Largest group commit",
        /// Nanoseconds spent writing and syncing the log (by group-commit leaders).
        flush_nanos: "Log write and sync time (ns)",
        /// Nanoseconds leaders waited for announced committers before flushing.
        gather_nanos: "Group-commit gather wait (ns)",
        /// Segments installed from the spare prepared in the background.
        segments_prepared: "Log segments prepared ahead",
        /// Segments a flush had to create (and zero-fill) itself.
        segments_created_inline: "Log segments created by a flush",
        /// Released segments whose files were kept as the next spare, not zero-filled anew.
        segments_recycled: "Log segments recycled",
    }
}

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
    /// Dirty pages evicted: written once the exclusive hold that evicted them ends.
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
    /// Transactions.
    pub txns: TxnCounts,
    /// Key locks.
    pub locks: LockCounts,
    /// The log (`None` with an in-memory log).
    pub log: Option<LogCounts>,
    /// Commits replayed by recovery at open.
    pub recovered_commits: u64,
}

impl EnvStat {
    pub(crate) fn collect(e: &Engine, txn: Option<TxnStat>) -> EnvStat {
        let ps = e.pager.layout.page_size as u64;
        EnvStat {
            page_size: e.pager.layout.page_size,
            cache_capacity_bytes: e.pager.cache.capacity() as u64 * ps,
            cache_resident_pages: e.pager.cache.len() as u64,
            cache_hits: e.pager.cache.hits(),
            cache_misses: e.pager.cache.misses + e.pager.cache.shared_loads.load(Relaxed),
            cache_loads_unlocked: e.pager.cache.shared_loads.load(Relaxed),
            cache_reads_locked: e.pager.cache.reads_locked.load(Relaxed),
            cache_reader_evictions: e.pager.cache.reader_evictions.load(Relaxed),
            cache_evictions: e.pager.cache.evictions,
            cache_dirty_evictions: e.pager.cache.dirty_evictions,
            pages_written: e.pages_written + e.pager.writeback.written(),
            checkpoints: e.checkpoints,
            generation: e.pager.generation,
            page_count: e.pager.space.page_count(),
            file_bytes: e.pager.file.len().unwrap_or(0),
            free_pages: e.pager.space.free_count() as u64,
            pending_free_pages: e.pager.space.pending_count() as u64,
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
                "Dirty pages evicted (written after the exclusive hold)",
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
            let mut rows = t.txns.rows();
            rows.extend(t.locks.rows());
            rows.push((
                "Commits replayed by recovery",
                t.recovered_commits.to_string(),
            ));
            if let Some(log) = &t.log {
                rows.extend(log.rows());
                let avg = log.group_commits as f64 / log.fsyncs.max(1) as f64;
                rows.push(("Average commits per fsync", format!("{avg:.2}")));
            }
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
    /// Number of entries (key/value pairs, with duplicates).
    pub entries: u64,
    /// Whether, and how, the database holds several values per key.
    pub duplicates: crate::Duplicates,
    /// Levels from root to leaf.
    pub depth: u32,
    /// Leaf pages.
    pub leaf_pages: u64,
    /// Branch pages.
    pub branch_pages: u64,
    /// Overflow pages (large values, and the rest of long keys).
    pub overflow_pages: u64,
    /// Bytes of cells and slots in tree pages.
    pub bytes_used: u64,
    /// `bytes_used` as a percentage of the tree pages' capacity.
    pub fill_percent: f64,
}

/// What a tree walk needs of one node.
pub(crate) struct NodeSummary {
    used: u64,
    leaf: bool,
    overflow_pages: u64,
    children: Vec<u64>,
}

impl NodeSummary {
    pub(crate) fn of(p: &[u8], capacity: usize) -> NodeSummary {
        let n = node::nslots(p);
        let leaf = node::is_leaf(p);
        let pages = |len: u32| (len as u64).div_ceil(capacity as u64);
        let values: u64 = if leaf {
            (0..n)
                .filter_map(|i| match node::leaf_value(p, i) {
                    LeafValue::Overflow { len, .. } => Some(pages(len)),
                    _ => None,
                })
                .sum()
        } else {
            0
        };
        let keys: u64 = (0..n)
            .filter_map(|i| node::long_key(p, i).map(|(_, len)| pages(len)))
            .sum();
        let overflow_pages = values + keys;
        NodeSummary {
            used: node::used(p) as u64,
            leaf,
            overflow_pages,
            children: if leaf {
                Vec::new()
            } else {
                (0..=n).map(|i| node::child(p, i)).collect()
            },
        }
    }
}

impl DbStat {
    /// Walks the tree from `root` level by level, reading each node through `read` (one at
    /// a time, so that no lock is held for the whole walk).
    pub(crate) fn walk(
        name: String,
        entries: u64,
        root: u64,
        capacity: usize,
        mut read: impl FnMut(u64) -> Result<NodeSummary>,
    ) -> Result<DbStat> {
        let mut st = DbStat {
            name,
            entries,
            duplicates: crate::Duplicates::None,
            depth: 0,
            leaf_pages: 0,
            branch_pages: 0,
            overflow_pages: 0,
            bytes_used: 0,
            fill_percent: 0.0,
        };
        let mut level = vec![root];
        while !level.is_empty() {
            st.depth += 1;
            let mut next = Vec::new();
            for pid in level {
                let n = read(pid)?;
                st.bytes_used += n.used;
                st.overflow_pages += n.overflow_pages;
                if n.leaf {
                    st.leaf_pages += 1;
                } else {
                    st.branch_pages += 1;
                }
                next.extend(n.children);
            }
            level = next;
        }
        let cap = (st.leaf_pages + st.branch_pages) * capacity as u64;
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
        let dups = match self.duplicates {
            crate::Duplicates::None => "no",
            crate::Duplicates::Sorted => "sorted",
            crate::Duplicates::Unsorted => "unsorted",
        };
        writeln!(f, "{dups}\tDuplicates")?;
        writeln!(f, "{}\tTree depth", self.depth)?;
        writeln!(f, "{}\tLeaf pages", self.leaf_pages)?;
        writeln!(f, "{}\tBranch pages", self.branch_pages)?;
        writeln!(f, "{}\tOverflow pages", self.overflow_pages)?;
        writeln!(f, "{:.1}%\tTree page fill", self.fill_percent)
    }
}
