//! BeechDB's key/value engine from C: the functions `include/beechdb.h` declares, built as
//! `libbeechdb_c.so` and `libbeechdb_c.a`.
//!
//! Owns: the C handles ([`beech_env`], [`beech_db`], [`beech_txn`], [`beech_cursor`]), the
//! mapping of [`Error`] onto return codes (Berkeley DB's numbers, from [`Error::code`]) and
//! each thread's last error message. May call: `beechdb`'s public API only.
//!
//! Invariants:
//! - No Rust panic crosses into C: every call runs in [`guard`], which reports one as
//!   `BEECH_RUNRECOVERY` with its message.
//! - A null handle or pointer where one is required is `EINVAL`, never a crash; a handle is
//!   freed only by its own close call (a transaction's by commit or abort).
//! - Buffers handed to the caller come from `malloc`, so `beech_free` (or `free`) frees them.
// The header's names, and safety contracts stated once in the header and the module doc:
// every pointer argument is null or valid for the length given, every handle is live.
#![allow(non_camel_case_types, clippy::missing_safety_doc)]

use beechdb::{Config, Cursor, Db, Durability, Env, Error, Isolation, Txn};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ops::Bound;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::Arc;

/// An environment handle.
pub struct beech_env(Env);
/// A database handle.
pub struct beech_db(Db);
/// A transaction handle, shared with the cursors opened in it (which then fail with
/// `EINVAL` once it has ended, rather than reach freed memory).
pub struct beech_txn(Arc<Txn>);
/// A cursor handle: the engine's cursor outside a transaction; inside one, the pair it is
/// on, each move a search from there through the transaction (which sees its own writes).
pub struct beech_cursor(CursorKind);

enum CursorKind {
    Plain(Cursor),
    InTxn {
        txn: Arc<Txn>,
        db: Db,
        at: Option<Pair>,
    },
}

/// A key and its value.
type Pair = (Vec<u8>, Vec<u8>);

const BEECH_TRANSACTIONAL: u32 = 0x01;
const BEECH_READ_ONLY: u32 = 0x02;
const BEECH_IN_MEMORY_LOG: u32 = 0x04;
const BEECH_WRITE_NOSYNC: u32 = 0x08;
const BEECH_NOSYNC: u32 = 0x10;
const BEECH_CREATE: u32 = 0x01;
const BEECH_NOOVERWRITE: u32 = 0x01;
const BEECH_READ_COMMITTED: u32 = 0x01;
const BEECH_FIRST: c_int = 1;
const BEECH_LAST: c_int = 2;
const BEECH_NEXT: c_int = 3;
const BEECH_PREV: c_int = 4;
const BEECH_SET_RANGE: c_int = 5;
const BEECH_CURRENT: c_int = 6;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// A call's failure: a return code and its message.
struct Failure(c_int, String);

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure(e.code().0, e.to_string())
    }
}

fn invalid(what: impl Into<String>) -> Failure {
    Failure(libc::EINVAL, what.into())
}

/// Runs a call: its failure (or panic) becomes a return code and the thread's last error.
fn guard(call: impl FnOnce() -> Result<(), Failure>) -> c_int {
    let failure = match catch_unwind(AssertUnwindSafe(call)) {
        Ok(Ok(())) => return 0,
        Ok(Err(f)) => f,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Failure(
                beechdb::codes::DB_RUNRECOVERY,
                format!("internal error: {what}"),
            )
        }
    };
    let message = CString::new(failure.1.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|l| *l.borrow_mut() = message);
    failure.0
}

/// `p` as a reference, or `EINVAL` naming it when null.
unsafe fn handle<'a, T>(p: *mut T, what: &str) -> Result<&'a T, Failure> {
    // SAFETY: the caller passes a live handle or null (module invariants).
    unsafe { p.as_ref() }.ok_or_else(|| invalid(format!("{what} is NULL")))
}

/// The `len` bytes at `p` (null allowed for an empty slice).
unsafe fn bytes<'a>(p: *const c_void, len: usize, what: &str) -> Result<&'a [u8], Failure> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(invalid(format!("{what} is NULL with a length of {len}")));
    }
    // SAFETY: the caller's buffer holds `len` bytes (header contract).
    Ok(unsafe { std::slice::from_raw_parts(p as *const u8, len) })
}

unsafe fn text<'a>(p: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if p.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    // SAFETY: a NUL-terminated string (header contract).
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| invalid(format!("{what} is not UTF-8")))
}

/// Stores `value` through `out`, unless `out` is null.
unsafe fn set<T>(out: *mut T, value: T) {
    if let Some(o) = unsafe { out.as_mut() } {
        *o = value;
    }
}

/// Hands `bytes` to the caller in a `malloc`ed buffer through `data` and `len` (either may
/// be null: not wanted).
unsafe fn give(bytes: &[u8], data: *mut *mut c_void, len: *mut usize) -> Result<(), Failure> {
    if !data.is_null() {
        // One byte at least: malloc(0) may return NULL.
        let buf = unsafe { libc::malloc(bytes.len().max(1)) };
        if buf.is_null() {
            return Err(Failure(libc::ENOMEM, "out of memory".into()));
        }
        unsafe {
            ptr::copy_nonoverlapping(bytes.as_ptr(), buf as *mut u8, bytes.len());
            *data = buf;
        }
    }
    unsafe { set(len, bytes.len()) };
    Ok(())
}

/// Sets the caller's handle pointer `out` to NULL, so that a failure leaves it so; `EINVAL`
/// when `out` itself is null.
unsafe fn clear_out<T>(out: *mut *mut T, what: &str) -> Result<(), Failure> {
    if out.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    unsafe { *out = ptr::null_mut() };
    Ok(())
}

/// Moves a new handle to the caller through `out`.
unsafe fn hand_out<T>(out: *mut *mut T, value: T) {
    unsafe { *out = Box::into_raw(Box::new(value)) };
}

fn not_found() -> Failure {
    Failure(beechdb::codes::DB_NOTFOUND, "not found".into())
}

#[no_mangle]
pub unsafe extern "C" fn beech_env_open(
    path: *const c_char,
    flags: u32,
    cache_bytes: u64,
    envp: *mut *mut beech_env,
) -> c_int {
    guard(|| {
        unsafe { clear_out(envp, "envp") }?;
        let path = unsafe { text(path, "path") }?;
        let known = BEECH_TRANSACTIONAL
            | BEECH_READ_ONLY
            | BEECH_IN_MEMORY_LOG
            | BEECH_WRITE_NOSYNC
            | BEECH_NOSYNC;
        if flags & !known != 0 || flags & BEECH_WRITE_NOSYNC != 0 && flags & BEECH_NOSYNC != 0 {
            return Err(invalid(format!("beech_env_open: flags {flags:#x}")));
        }
        let durability = match flags {
            f if f & BEECH_NOSYNC != 0 => Durability::NoSync,
            f if f & BEECH_WRITE_NOSYNC != 0 => Durability::WriteNoSync,
            _ => Durability::Sync,
        };
        let mut config = Config::new()
            .transactional(flags & BEECH_TRANSACTIONAL != 0)
            .read_only(flags & BEECH_READ_ONLY != 0)
            .in_memory_log(flags & BEECH_IN_MEMORY_LOG != 0)
            .durability(durability);
        if cache_bytes != 0 {
            let bytes = usize::try_from(cache_bytes)
                .map_err(|_| invalid(format!("a cache of {cache_bytes} bytes")))?;
            config = config.cache_size(bytes);
        }
        let env = Env::open(path, config)?;
        unsafe { hand_out(envp, beech_env(env)) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn beech_env_sync(env: *mut beech_env) -> c_int {
    guard(|| Ok(unsafe { handle(env, "env") }?.0.sync()?))
}

#[no_mangle]
pub unsafe extern "C" fn beech_env_close(env: *mut beech_env) -> c_int {
    guard(|| {
        if env.is_null() {
            return Err(invalid("env is NULL"));
        }
        // SAFETY: a live handle from beech_env_open, freed only here.
        Ok(unsafe { Box::from_raw(env) }.0.close()?)
    })
}

#[no_mangle]
pub unsafe extern "C" fn beech_db_open(
    env: *mut beech_env,
    name: *const c_char,
    flags: u32,
    dbp: *mut *mut beech_db,
) -> c_int {
    guard(|| {
        unsafe { clear_out(dbp, "dbp") }?;
        let env = &unsafe { handle(env, "env") }?.0;
        let name = unsafe { text(name, "name") }?;
        let db = match flags {
            0 => env.open_db(name)?,
            BEECH_CREATE => env.open_or_create_db(name)?,
            _ => return Err(invalid(format!("beech_db_open: flags {flags:#x}"))),
        };
        unsafe { hand_out(dbp, beech_db(db)) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn beech_db_remove(env: *mut beech_env, name: *const c_char) -> c_int {
    guard(|| {
        let env = &unsafe { handle(env, "env") }?.0;
        let name = unsafe { text(name, "name") }?;
        Ok(env.remove_db(name)?)
    })
}

#[no_mangle]
pub unsafe extern "C" fn beech_db_close(db: *mut beech_db) {
    if !db.is_null() {
        // SAFETY: a live handle from beech_db_open, freed only here.
        drop(unsafe { Box::from_raw(db) });
    }
}

/// The transaction `txn` names, if not null.
unsafe fn in_txn<'a>(txn: *mut beech_txn) -> Option<&'a Arc<Txn>> {
    unsafe { txn.as_ref() }.map(|t| &t.0)
}

#[no_mangle]
pub unsafe extern "C" fn beech_put(
    db: *mut beech_db,
    txn: *mut beech_txn,
    key: *const c_void,
    key_len: usize,
    data: *const c_void,
    data_len: usize,
    flags: u32,
) -> c_int {
    guard(|| {
        let db = &unsafe { handle(db, "db") }?.0;
        let key = unsafe { bytes(key, key_len, "key") }?;
        let data = unsafe { bytes(data, data_len, "data") }?;
        if flags & !BEECH_NOOVERWRITE != 0 {
            return Err(invalid(format!("beech_put: flags {flags:#x}")));
        }
        let no_overwrite = flags & BEECH_NOOVERWRITE != 0;
        match unsafe { in_txn(txn) } {
            None if no_overwrite => db.insert(key, data)?,
            None => db.put(key, data)?,
            Some(t) => {
                if no_overwrite && t.get_for_update(db, key)?.is_some() {
                    return Err(Error::KeyExists.into());
                }
                t.put(db, key, data)?
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn beech_get(
    db: *mut beech_db,
    txn: *mut beech_txn,
    key: *const c_void,
    key_len: usize,
    data: *mut *mut c_void,
    data_len: *mut usize,
) -> c_int {
    guard(|| {
        let db = &unsafe { handle(db, "db") }?.0;
        let key = unsafe { bytes(key, key_len, "key") }?;
        let value = match unsafe { in_txn(txn) } {
            None => db.get(key)?,
            Some(t) => t.get(db, key)?,
        };
        unsafe { give(&value.ok_or_else(not_found)?, data, data_len) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn beech_del(
    db: *mut beech_db,
    txn: *mut beech_txn,
    key: *const c_void,
    key_len: usize,
) -> c_int {
    guard(|| {
        let db = &unsafe { handle(db, "db") }?.0;
        let key = unsafe { bytes(key, key_len, "key") }?;
        let found = match unsafe { in_txn(txn) } {
            None => db.delete(key)?,
            Some(t) => t.delete(db, key)?,
        };
        found.then_some(()).ok_or_else(not_found)
    })
}

#[no_mangle]
pub unsafe extern "C" fn beech_txn_begin(
    env: *mut beech_env,
    flags: u32,
    txnp: *mut *mut beech_txn,
) -> c_int {
    guard(|| {
        unsafe { clear_out(txnp, "txnp") }?;
        let env = &unsafe { handle(env, "env") }?.0;
        let txn = match flags {
            0 => env.begin_txn()?,
            BEECH_READ_COMMITTED => env.begin_txn_with(Isolation::ReadCommitted)?,
            _ => return Err(invalid(format!("beech_txn_begin: flags {flags:#x}"))),
        };
        unsafe { hand_out(txnp, beech_txn(Arc::new(txn))) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn beech_txn_commit(txn: *mut beech_txn) -> c_int {
    guard(|| {
        if txn.is_null() {
            return Err(invalid("txn is NULL"));
        }
        // SAFETY: a live handle from beech_txn_begin, freed only here or by abort.
        let txn = unsafe { Box::from_raw(txn) };
        txn.0.commit()?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn beech_txn_abort(txn: *mut beech_txn) {
    if !txn.is_null() {
        // SAFETY: as in beech_txn_commit.
        let txn = unsafe { Box::from_raw(txn) };
        txn.0.abort();
    }
}

#[no_mangle]
pub unsafe extern "C" fn beech_cursor_open(
    db: *mut beech_db,
    txn: *mut beech_txn,
    cursorp: *mut *mut beech_cursor,
) -> c_int {
    guard(|| {
        unsafe { clear_out(cursorp, "cursorp") }?;
        let db = &unsafe { handle(db, "db") }?.0;
        let kind = match unsafe { in_txn(txn) } {
            None => CursorKind::Plain(db.cursor()),
            Some(t) => CursorKind::InTxn {
                txn: t.clone(),
                db: db.clone(),
                at: None,
            },
        };
        unsafe { hand_out(cursorp, beech_cursor(kind)) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn beech_cursor_get(
    cursor: *mut beech_cursor,
    op: c_int,
    key: *mut *mut c_void,
    key_len: *mut usize,
    data: *mut *mut c_void,
    data_len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: a live cursor, used by one call at a time (header contract).
        let cursor = unsafe { cursor.as_mut() }.ok_or_else(|| invalid("cursor is NULL"))?;
        let sought = match op {
            BEECH_SET_RANGE => {
                if key.is_null() || key_len.is_null() {
                    return Err(invalid("BEECH_SET_RANGE needs key and key_len"));
                }
                let k = unsafe { bytes(*key, *key_len, "*key") }?;
                Some(k.to_vec())
            }
            _ => None,
        };
        let (k, v) = cursor
            .0
            .step(op, sought.as_deref())?
            .ok_or_else(not_found)?;
        unsafe {
            give(&k, key, key_len)?;
            give(&v, data, data_len)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn beech_cursor_close(cursor: *mut beech_cursor) {
    if !cursor.is_null() {
        // SAFETY: a live handle from beech_cursor_open, freed only here.
        drop(unsafe { Box::from_raw(cursor) });
    }
}

impl CursorKind {
    /// Moves as `op` says; the pair reached, `None` past an end.
    fn step(&mut self, op: c_int, sought: Option<&[u8]>) -> Result<Option<Pair>, Failure> {
        match self {
            CursorKind::Plain(c) => {
                let moved = match (op, sought) {
                    (BEECH_FIRST, _) => c.first()?,
                    (BEECH_LAST, _) => c.last()?,
                    (BEECH_NEXT, _) if c.key().is_none() => c.first()?,
                    (BEECH_NEXT, _) => c.next()?,
                    (BEECH_PREV, _) if c.key().is_none() => c.last()?,
                    (BEECH_PREV, _) => c.prev()?,
                    (BEECH_SET_RANGE, Some(k)) => c.seek(k)?,
                    (BEECH_CURRENT, _) => c.key().is_some(),
                    _ => return Err(invalid(format!("beech_cursor_get: op {op}"))),
                };
                Ok(moved.then(|| {
                    let k = c.key().unwrap_or_default().to_vec();
                    (k, c.value().unwrap_or_default().to_vec())
                }))
            }
            CursorKind::InTxn { txn, db, at } => {
                let here = at.as_ref().map(|(k, _)| k.clone());
                let found = match (op, sought, here) {
                    (BEECH_FIRST, ..) | (BEECH_NEXT, _, None) => txn.first(db, ..)?,
                    (BEECH_LAST, ..) | (BEECH_PREV, _, None) => txn.last(db, ..)?,
                    (BEECH_NEXT, _, Some(k)) => {
                        txn.first(db, (Bound::Excluded(k), Bound::Unbounded))?
                    }
                    (BEECH_PREV, _, Some(k)) => {
                        txn.last(db, (Bound::Unbounded, Bound::Excluded(k)))?
                    }
                    (BEECH_SET_RANGE, Some(k), _) => txn.first(db, k..)?,
                    (BEECH_CURRENT, _, Some(k)) => txn.get(db, &k)?.map(|v| (k, v)),
                    (BEECH_CURRENT, _, None) => None,
                    _ => return Err(invalid(format!("beech_cursor_get: op {op}"))),
                };
                // A move past an end leaves the cursor where it was, as the engine's does.
                if found.is_some() {
                    *at = found.clone();
                }
                Ok(found)
            }
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn beech_free(p: *mut c_void) {
    // SAFETY: a buffer this library allocated with malloc, or null.
    unsafe { libc::free(p) }
}

#[no_mangle]
pub extern "C" fn beech_strerror(code: c_int) -> *const c_char {
    let text: &'static CStr = match code {
        0 => c"success",
        beechdb::codes::DB_KEYEXIST => c"DB_KEYEXIST: the key already exists",
        beechdb::codes::DB_LOCK_DEADLOCK => {
            c"DB_LOCK_DEADLOCK: a deadlock or a write conflict; abort and retry"
        }
        beechdb::codes::DB_LOCK_NOTGRANTED => c"DB_LOCK_NOTGRANTED: a lock wait timed out",
        beechdb::codes::DB_NOTFOUND => c"DB_NOTFOUND: no such key",
        beechdb::codes::DB_RUNRECOVERY => c"DB_RUNRECOVERY: the environment must be reopened",
        beechdb::codes::DB_VERIFY_BAD => c"DB_VERIFY_BAD: stored data failed a check",
        beechdb::codes::DB_REP_NOTPERM => c"DB_REP_NOTPERM: a commit lacked its acknowledgements",
        beechdb::codes::DB_REP_UNAVAIL => c"DB_REP_UNAVAIL: not enough members reachable",
        libc::EINVAL => c"EINVAL: invalid argument or misuse",
        libc::EIO => c"EIO: an I/O error",
        libc::ENOSPC => c"ENOSPC: no space left on the device",
        libc::ENOMEM => c"ENOMEM: out of memory",
        libc::EBUSY => c"EBUSY: the environment is held open by another handle",
        libc::ENOENT => c"ENOENT: no such database",
        libc::EEXIST => c"EEXIST: the database exists",
        libc::EACCES => c"EACCES: not writable here (read-only, or not the master)",
        libc::EAGAIN => c"EAGAIN: replication unavailable; try again",
        _ => c"unknown return code",
    };
    text.as_ptr()
}

#[no_mangle]
pub extern "C" fn beech_last_error() -> *const c_char {
    // The thread's string stays put until its next failure replaces it.
    LAST_ERROR.with(|l| l.borrow().as_ptr())
}
