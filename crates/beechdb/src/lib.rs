//! BeechDB: an embedded key/value engine of named B+tree databases.
//!
//! An [`Env`] is a directory holding one page file with any number of named databases
//! ([`Db`]). Data Store mode: operations apply in memory and become durable at
//! [`Env::sync`] or [`Env::close`], through a copy-on-write checkpoint, so that a crash at
//! any instant leaves the environment exactly as of the last completed sync.
//!
//! Layout of the crate (one folder per subsystem): `storage` (the I/O seam, page headers,
//! meta pages, free space), `cache` (page images under a byte budget), `btree` (nodes, tree
//! algorithms, cursors), `engine` (the state behind the lock, checkpoints), `env` (public
//! handles), `verify`, `stats`, `dump` (Berkeley DB's dump format).
//!
//! ```
//! use beechdb::{Config, Env};
//! let dir = tempfile::tempdir()?;
//! let env = Env::open(dir.path(), Config::new().cache_size(16 << 20))?;
//! let db = env.open_or_create_db("accounts")?;
//! for i in 0u32..100 {
//!     db.put(&i.to_be_bytes(), format!("balance {i}").as_bytes())?;
//! }
//! let mut cursor = db.cursor();
//! assert!(cursor.seek(&42u32.to_be_bytes())?);
//! assert_eq!(cursor.value(), Some(&b"balance 42"[..]));
//! assert!(cursor.next()?);
//! assert_eq!(cursor.key(), Some(&43u32.to_be_bytes()[..]));
//! env.sync()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

mod btree;
mod cache;
mod config;
pub mod dump;
mod dups;
mod engine;
mod env;
mod error;
mod files;
mod pinned;
mod replica;
mod stats;
pub mod storage;
mod sync;
mod txn;
mod verify;
mod wal;

pub use btree::{Cursor, Iter, KeyRange};
pub use config::{
    AckPolicy, Config, Duplicates, Durability, GroupDurability, Isolation, Mode,
    DEFAULT_CACHE_SIZE, DEFAULT_LOG_SEGMENT_SIZE, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE,
    MIN_CACHE_PAGES, MIN_PAGE_SIZE,
};
pub use env::{Db, Env};
pub use error::{codes, Error, Result};
pub use pinned::{CheckpointCopy, PinnedCheckpoint};
pub use replica::{HeldLocks, OwnWrites, Replicator, Staged};
pub use stats::{DbStat, EnvStat, LockCounts, LogCounts, TxnCounts, TxnStat};
pub use txn::{Savepoint, Txn, TxnIter};
pub use verify::{
    salvage_path, verify_path, verify_path_with_progress, Problem, Salvaged, VerifyReport,
};
pub use wal::print_log;

/// Largest value accepted (4 GiB - 1); longer values get [`Error::ValueTooLarge`].
pub const MAX_VALUE_LEN: usize = btree::MAX_VALUE_LEN_USIZE;
/// Largest key accepted: 16 MiB.
pub const MAX_KEY_LEN: usize = btree::MAX_KEY_LEN;
