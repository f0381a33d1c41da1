//! SQLite's C API over BeechDB: built as a shared library with the soname
//! `libsqlite3.so.0`, it replaces SQLite for existing programs (Python's `sqlite3` module
//! included) through `LD_LIBRARY_PATH`, with no rebuild.
//!
//! Owns: the C handles (`sqlite3`, `sqlite3_stmt`, `sqlite3_value`, `sqlite3_context`,
//! `sqlite3_blob`, `sqlite3_backup`) and the translation between SQLite's calling
//! conventions and `beechdb-sql`. May call: `beechdb-sql`, `beechdb` (for the environment).
//!
//! Modules: `conn` (open, close, errors, exec, hooks), `stmt` (prepare, bind, step,
//! columns), `value` (values and function contexts), `udf` (application functions and
//! collations), `blob` (incremental blob I/O), `backup` (the backup API), `image`
//! (`sqlite3_serialize` and `sqlite3_deserialize`, in BeechDB's own image format), `util`
//! (memory, version, `sqlite3_complete`, strings).
//!
//! Invariants:
//! - Serialized threading, as SQLite's default: every call on a connection or one of its
//!   statements holds the connection's (reentrant) lock, so a handle may be used from any
//!   thread. A callback (function, collation, trace, authorizer) runs under that lock; a
//!   callback that runs SQL on its own connection gets SQLITE_MISUSE, not a deadlock.
//! - No Rust panic crosses into C: calls that run SQL catch one and report SQLITE_INTERNAL.
//! - A database path names a BeechDB environment directory, shared by every connection of
//!   the process that opens it; `:memory:` and `""` are private temporary databases.
//!
//! What cannot be honoured (SQLite's file format, VFSs, bytecode) is listed in
//! docs/sql-compat.md; those calls return SQLite's error code with a message saying so.
// The C API's own names, and safety contracts that are SQLite's documented ones.
#![allow(non_camel_case_types, clippy::missing_safety_doc)]

mod backup;
mod blob;
mod conn;
mod image;
mod stmt;
mod udf;
mod util;
mod value;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub use backup::sqlite3_backup;
pub use blob::sqlite3_blob;
pub use conn::sqlite3;
pub use image::check_image;
pub use stmt::sqlite3_stmt;
pub use value::{sqlite3_context, sqlite3_value};

/// SQLite's result codes and other constants used by this library.
pub mod consts {
    pub use beechdb_sql::codes::*;
    pub const SQLITE_OK: i32 = 0;
    pub const SQLITE_PERM: i32 = 3;
    pub const SQLITE_NOMEM: i32 = 7;
    pub const SQLITE_READONLY: i32 = 8;
    pub const SQLITE_NOTFOUND: i32 = 12;
    pub const SQLITE_SCHEMA: i32 = 17;
    pub const SQLITE_AUTH: i32 = 23;
    pub const SQLITE_NOTADB: i32 = 26;
    pub const SQLITE_ROW: i32 = 100;
    pub const SQLITE_DONE: i32 = 101;

    pub const SQLITE_INTEGER: i32 = 1;
    pub const SQLITE_FLOAT: i32 = 2;
    pub const SQLITE_TEXT: i32 = 3;
    pub const SQLITE_BLOB: i32 = 4;
    pub const SQLITE_NULL: i32 = 5;

    pub const SQLITE_OPEN_READONLY: i32 = 0x1;
    pub const SQLITE_OPEN_READWRITE: i32 = 0x2;
    pub const SQLITE_OPEN_CREATE: i32 = 0x4;
    pub const SQLITE_OPEN_URI: i32 = 0x40;
    pub const SQLITE_OPEN_MEMORY: i32 = 0x80;

    pub const SQLITE_DENY: i32 = 1;
    pub const SQLITE_IGNORE: i32 = 2;
    pub const SQLITE_TRACE_STMT: u32 = 0x01;
    pub const SQLITE_TRACE_CLOSE: u32 = 0x08;
}

/// The version of SQLite whose API and SQL dialect this library follows.
pub const SQLITE_VERSION: &std::ffi::CStr = c"3.46.0";
pub const SQLITE_VERSION_NUMBER: i32 = 3_046_000;
