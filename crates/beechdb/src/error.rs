//! The error vocabulary of the public API.
//!
//! Owns: [`Error`] and [`Result`]. Every variant names one failure a caller can act on; each
//! maps onto a Berkeley DB return code (see [`Error::code`]) so that the C API can report
//! it the way Berkeley DB programs expect.

use std::fmt;
use std::io;

/// Berkeley DB 5.3's error numbers (from its `db.h`), which [`Error::code`] returns.
pub mod codes {
    /// The key/data pair already exists.
    pub const DB_KEYEXIST: i32 = -30994;
    /// Deadlock (and, here, a write-write conflict under snapshot isolation).
    pub const DB_LOCK_DEADLOCK: i32 = -30993;
    /// Lock unavailable (a lock wait timed out).
    pub const DB_LOCK_NOTGRANTED: i32 = -30992;
    /// Key/data pair not found.
    pub const DB_NOTFOUND: i32 = -30988;
    /// The environment must be reopened (recovered).
    pub const DB_RUNRECOVERY: i32 = -30973;
    /// Verify failed; bad format.
    pub const DB_VERIFY_BAD: i32 = -30970;
    /// Replication: a commit was not acknowledged by the sites its policy asked for.
    pub const DB_REP_NOTPERM: i32 = -30976;
    /// Replication: sites the operation needs cannot currently be reached.
    pub const DB_REP_UNAVAIL: i32 = -30975;
}

/// The result type of every fallible BeechDB call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in a BeechDB call.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// `insert` found the key already present (Berkeley DB: `DB_KEYEXIST`).
    KeyExists,
    /// A key is longer than the environment's page size allows.
    KeyTooLarge {
        /// Length given.
        len: usize,
        /// Largest accepted.
        max: usize,
    },
    /// A write through an environment opened with [`crate::Config::read_only`].
    ReadOnly,
    /// A value is longer than [`crate::MAX_VALUE_LEN`].
    ValueTooLarge {
        /// Length given.
        len: usize,
        /// Largest accepted.
        max: usize,
    },
    /// Stored data failed a check: a checksum, a page header, or the tree's structure.
    /// `page` is the page number where the damage was found, when there is one
    /// (Berkeley DB: `DB_VERIFY_BAD`).
    Corrupt {
        /// The damaged page, if known.
        page: Option<u64>,
        /// What check failed.
        detail: String,
    },
    /// An I/O call failed; `context` says what BeechDB was doing.
    Io {
        /// What BeechDB was doing.
        context: String,
        /// The operating system's error.
        source: io::Error,
    },
    /// A write or fsync failed earlier, so the environment refuses further writes until it is
    /// reopened: after a failed fsync the kernel may have dropped the data, and retrying
    /// would only pretend (Berkeley DB: `DB_RUNRECOVERY`).
    Poisoned {
        /// The failure that poisoned the environment.
        cause: String,
    },
    /// Another handle (in this or another process) holds the environment open.
    Locked {
        /// The environment's location.
        path: String,
    },
    /// A log record would be longer than the log's 32-bit length field can describe (a
    /// value close to 4 GiB in a transactional environment). Nothing was written.
    RecordTooLarge {
        /// Bytes the record would take.
        len: usize,
        /// Largest possible.
        max: usize,
    },
    /// The configuration or an argument is not acceptable; the message says why.
    InvalidArgument(String),
    /// No database of that name exists in the environment (Berkeley DB: `ENOENT`).
    DbNotFound(String),
    /// A database of that name already exists.
    DbExists(String),
    /// The handle was used after its environment was closed.
    Closed,
    /// The database handle was used after its database was removed.
    DbRemoved,
    /// The transaction was used after it committed or aborted.
    TxnFinished,
    /// Another transaction committed a change to a key this transaction writes, after this
    /// transaction's snapshot was taken (first committer wins). Abort and retry.
    Conflict,
    /// This transaction was chosen to break a cycle of lock waits (Berkeley DB:
    /// `DB_LOCK_DEADLOCK`). Abort and retry.
    Deadlock,
    /// A lock wait exceeded the configured timeout (Berkeley DB: `DB_LOCK_NOTGRANTED`).
    /// Abort and retry.
    LockTimeout,
    /// A write on a member of a replication group that is not its master. `master` is the
    /// member believed to be master, if one is known: send the write there (JE:
    /// `ReplicaWriteException`).
    NotMaster {
        /// The current master's node id, if known.
        master: Option<u64>,
    },
    /// Replication could not complete a commit; the message says what happened and whether
    /// the commit may still be applied.
    Replication(String),
    /// A commit in a replication group is committed (a majority holds it, and the master
    /// applied it) but fewer members than its ack policy asks for acknowledged it in time
    /// (JE: `InsufficientAcksException`; Berkeley DB: `DB_REP_NOTPERM`).
    InsufficientAcks {
        /// The commit's token.
        token: u64,
        /// Members that acknowledged it, the master included, and members asked for.
        acked: usize,
        /// Members the policy asked for.
        needed: usize,
    },
    /// A transaction in a replication group began while fewer members than its ack policy
    /// needs were in contact with the master, or a commit that creates databases found fewer
    /// than a majority answering the master; nothing was done (JE:
    /// `InsufficientReplicasException`; Berkeley DB: `DB_REP_UNAVAIL`).
    InsufficientReplicas {
        /// Members in contact, the master included.
        live: usize,
        /// Members the policy needs.
        needed: usize,
    },
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn corrupt(page: u64, detail: impl Into<String>) -> Error {
        Error::Corrupt {
            page: Some(page),
            detail: detail.into(),
        }
    }

    /// The Berkeley DB error this error corresponds to: its numeric code (Berkeley DB
    /// 5.3's, or an errno) and its name. Stable: the C API returns these numbers.
    pub fn code(&self) -> (i32, &'static str) {
        match self {
            Error::KeyExists => (codes::DB_KEYEXIST, "DB_KEYEXIST"),
            Error::Corrupt { .. } => (codes::DB_VERIFY_BAD, "DB_VERIFY_BAD"),
            Error::Poisoned { .. } => (codes::DB_RUNRECOVERY, "DB_RUNRECOVERY"),
            Error::Io { source, .. } => match source.raw_os_error() {
                Some(libc::ENOSPC) => (libc::ENOSPC, "ENOSPC"),
                _ => (libc::EIO, "EIO"),
            },
            Error::Locked { .. } => (libc::EBUSY, "EBUSY"),
            Error::DbNotFound(_) => (libc::ENOENT, "ENOENT"),
            Error::DbExists(_) => (libc::EEXIST, "EEXIST"),
            Error::KeyTooLarge { .. }
            | Error::ValueTooLarge { .. }
            | Error::RecordTooLarge { .. }
            | Error::InvalidArgument(_)
            | Error::Closed
            | Error::DbRemoved
            | Error::TxnFinished => (libc::EINVAL, "EINVAL"),
            Error::Conflict | Error::Deadlock => (codes::DB_LOCK_DEADLOCK, "DB_LOCK_DEADLOCK"),
            Error::LockTimeout => (codes::DB_LOCK_NOTGRANTED, "DB_LOCK_NOTGRANTED"),
            // Berkeley DB answers a write on a replication client with EACCES.
            Error::NotMaster { .. } | Error::ReadOnly => (libc::EACCES, "EACCES"),
            Error::Replication(_) => (libc::EAGAIN, "EAGAIN"),
            Error::InsufficientAcks { .. } => (codes::DB_REP_NOTPERM, "DB_REP_NOTPERM"),
            Error::InsufficientReplicas { .. } => (codes::DB_REP_UNAVAIL, "DB_REP_UNAVAIL"),
        }
    }

    /// The name of [`Error::code`].
    pub fn bdb_code_name(&self) -> &'static str {
        self.code().1
    }

    /// True for the errors that only mean "abort this transaction and run it again":
    /// [`Error::Conflict`], [`Error::Deadlock`], [`Error::LockTimeout`].
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Conflict | Error::Deadlock | Error::LockTimeout)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::KeyExists => write!(f, "key already exists"),
            Error::KeyTooLarge { len, max } => {
                write!(f, "key of {len} bytes is longer than the maximum of {max} bytes")
            }
            Error::ValueTooLarge { len, max } => {
                write!(f, "value of {len} bytes is longer than the maximum of {max} bytes")
            }
            Error::RecordTooLarge { len, max } => write!(
                f,
                "a log record of {len} bytes is longer than the maximum of {max} bytes"
            ),
            Error::Corrupt { page: Some(p), detail } => write!(f, "corrupt data in page {p}: {detail}"),
            Error::Corrupt { page: None, detail } => write!(f, "corrupt data: {detail}"),
            Error::Io { context, source } => write!(f, "I/O error while {context}: {source}"),
            Error::Poisoned { cause } => write!(
                f,
                "environment refuses writes after an earlier I/O failure ({cause}); reopen it to recover"
            ),
            Error::Locked { path } => {
                write!(f, "environment {path} is already open in another handle or process")
            }
            Error::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Error::DbNotFound(n) => write!(f, "no database named {n:?}"),
            Error::DbExists(n) => write!(f, "a database named {n:?} already exists"),
            Error::Closed => write!(f, "handle used after its environment was closed"),
            Error::DbRemoved => write!(f, "database handle used after its database was removed"),
            Error::TxnFinished => write!(f, "transaction used after it committed or aborted"),
            Error::Conflict => write!(
                f,
                "write conflict: another transaction committed this key after this transaction began; abort and retry"
            ),
            Error::Deadlock => write!(f, "deadlock: this transaction was chosen as the victim; abort and retry"),
            Error::LockTimeout => write!(f, "lock wait timed out; abort and retry"),
            Error::NotMaster { master: Some(m) } => write!(
                f,
                "this member is a replica: writes go to the master, node {m}"
            ),
            Error::NotMaster { master: None } => write!(
                f,
                "this member is a replica and no master is known: retry when one is elected"
            ),
            Error::Replication(detail) => write!(f, "replication: {detail}"),
            Error::InsufficientAcks {
                token,
                acked,
                needed,
            } => write!(
                f,
                "replication: commit {token} is committed, but only {acked} of the {needed} \
                 members its ack policy asks for acknowledged it in time"
            ),
            Error::InsufficientReplicas { live, needed } => write!(
                f,
                "replication: {live} members are in contact with the master, fewer than the \
                 {needed} this transaction's ack policy needs; nothing was done"
            ),
            Error::ReadOnly => write!(f, "the environment is open read-only: writes are refused"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
