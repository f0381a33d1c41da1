//! Errors of the SQL layer, each with SQLite's result code (and extended code for
//! constraints and busy conditions) and a message in SQLite's words.

use std::fmt;

/// SQLite's primary result codes used here.
pub mod codes {
    pub const SQLITE_ERROR: i32 = 1;
    pub const SQLITE_INTERNAL: i32 = 2;
    pub const SQLITE_ABORT: i32 = 4;
    pub const SQLITE_BUSY: i32 = 5;
    pub const SQLITE_LOCKED: i32 = 6;
    pub const SQLITE_INTERRUPT: i32 = 9;
    pub const SQLITE_IOERR: i32 = 10;
    pub const SQLITE_CORRUPT: i32 = 11;
    pub const SQLITE_FULL: i32 = 13;
    pub const SQLITE_CANTOPEN: i32 = 14;
    pub const SQLITE_TOOBIG: i32 = 18;
    pub const SQLITE_CONSTRAINT: i32 = 19;
    pub const SQLITE_MISMATCH: i32 = 20;
    pub const SQLITE_MISUSE: i32 = 21;
    pub const SQLITE_RANGE: i32 = 25;
    pub const SQLITE_BUSY_SNAPSHOT: i32 = SQLITE_BUSY | (2 << 8);
    pub const SQLITE_CONSTRAINT_CHECK: i32 = SQLITE_CONSTRAINT | (1 << 8);
    pub const SQLITE_CONSTRAINT_FOREIGNKEY: i32 = SQLITE_CONSTRAINT | (3 << 8);
    pub const SQLITE_CONSTRAINT_NOTNULL: i32 = SQLITE_CONSTRAINT | (5 << 8);
    pub const SQLITE_CONSTRAINT_PRIMARYKEY: i32 = SQLITE_CONSTRAINT | (6 << 8);
    pub const SQLITE_CONSTRAINT_TRIGGER: i32 = SQLITE_CONSTRAINT | (7 << 8);
    pub const SQLITE_CONSTRAINT_UNIQUE: i32 = SQLITE_CONSTRAINT | (8 << 8);
    pub const SQLITE_CONSTRAINT_ROWID: i32 = SQLITE_CONSTRAINT | (10 << 8);
}

/// Which constraint failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConstraintKind {
    NotNull,
    Unique,
    PrimaryKey,
    Check,
    Trigger,
    RowId,
    ForeignKey,
}

#[derive(Debug)]
pub enum Error {
    /// A syntax error: "near X: syntax error" and the like.
    Syntax(String),
    /// Any other error in the statement (unknown table or column, wrong number of values...).
    Sql(String),
    /// Valid SQL this layer does not implement (listed in docs/sql-compat.md).
    Unsupported(String),
    Constraint(ConstraintKind, String),
    /// A write-write conflict with a transaction that committed after this one's snapshot:
    /// roll back and retry (SQLITE_BUSY_SNAPSHOT).
    BusySnapshot,
    /// A lock wait that timed out, or a deadlock victim: roll back and retry (SQLITE_BUSY).
    Busy,
    /// Misuse of the API: a bad parameter index, a finished statement.
    Misuse(String),
    Range(String),
    /// A RAISE(ABORT / FAIL / ROLLBACK) in a trigger.
    Raise(String),
    /// The statement was interrupted (`Interrupter::interrupt`).
    Interrupted,
    /// An application-defined function failed, with the result code it gave (as
    /// `sqlite3_result_error_code` sets it: SQLITE_NOMEM, SQLITE_TOOBIG, ...).
    Function(i32, String),
    /// The storage engine failed.
    Engine(beechdb::Error),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn syntax(msg: impl Into<String>) -> Error {
        Error::Syntax(msg.into())
    }

    /// SQLite's (extended) result code.
    pub fn code(&self) -> i32 {
        use codes::*;
        match self {
            Error::Syntax(_) | Error::Sql(_) | Error::Unsupported(_) => SQLITE_ERROR,
            Error::Constraint(k, _) => match k {
                ConstraintKind::NotNull => SQLITE_CONSTRAINT_NOTNULL,
                ConstraintKind::Unique => SQLITE_CONSTRAINT_UNIQUE,
                ConstraintKind::PrimaryKey => SQLITE_CONSTRAINT_PRIMARYKEY,
                ConstraintKind::Check => SQLITE_CONSTRAINT_CHECK,
                ConstraintKind::Trigger => SQLITE_CONSTRAINT_TRIGGER,
                ConstraintKind::RowId => SQLITE_CONSTRAINT_ROWID,
                ConstraintKind::ForeignKey => SQLITE_CONSTRAINT_FOREIGNKEY,
            },
            Error::BusySnapshot => SQLITE_BUSY_SNAPSHOT,
            Error::Busy => SQLITE_BUSY,
            Error::Interrupted => SQLITE_INTERRUPT,
            Error::Function(code, _) => *code,
            Error::Misuse(_) => SQLITE_MISUSE,
            Error::Range(_) => SQLITE_RANGE,
            Error::Raise(_) => SQLITE_CONSTRAINT_TRIGGER,
            Error::Engine(e) => match e {
                beechdb::Error::Deadlock | beechdb::Error::LockTimeout => SQLITE_BUSY,
                beechdb::Error::Conflict => SQLITE_BUSY_SNAPSHOT,
                beechdb::Error::Corrupt { .. } => SQLITE_CORRUPT,
                beechdb::Error::KeyTooLarge { .. } | beechdb::Error::ValueTooLarge { .. } => {
                    SQLITE_TOOBIG
                }
                beechdb::Error::Io { .. } => SQLITE_IOERR,
                _ => SQLITE_ERROR,
            },
        }
    }

    /// Whether the transaction should be rolled back and retried (SQLITE_BUSY family).
    pub fn is_busy(&self) -> bool {
        self.code() & 0xff == codes::SQLITE_BUSY
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Syntax(m)
            | Error::Sql(m)
            | Error::Misuse(m)
            | Error::Range(m)
            | Error::Raise(m)
            | Error::Function(_, m) => {
                write!(f, "{m}")
            }
            Error::Unsupported(m) => write!(f, "not supported by BeechDB: {m}"),
            Error::Constraint(_, m) => write!(f, "{m}"),
            Error::Busy | Error::BusySnapshot => write!(f, "database is locked"),
            Error::Interrupted => write!(f, "interrupted"),
            Error::Engine(e) => match e {
                beechdb::Error::Deadlock
                | beechdb::Error::LockTimeout
                | beechdb::Error::Conflict => {
                    write!(f, "database is locked")
                }
                other => write!(f, "{other}"),
            },
        }
    }
}

impl std::error::Error for Error {}

impl From<beechdb::Error> for Error {
    fn from(e: beechdb::Error) -> Error {
        Error::Engine(e)
    }
}
