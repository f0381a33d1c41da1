//! The library-wide calls: memory, version, threading mode, `sqlite3_complete`, string
//! helpers, and the calls that need SQLite's file format (refused with a message).
//!
//! Owns: nothing stateful. May call: `conn` (to record an error).

use crate::consts::*;
use std::ffi::{c_char, c_int, c_void, CStr, CString};

/// `s` as a C string (an inner NUL ends it).
/// `n` quoted as an identifier for SQL this library writes. Backquotes, not double
/// quotes: a double-quoted name that names no column would be read as a string (SQLite's
/// fallback), so a missing column would not be an error.
pub(crate) fn quote_name(n: &str) -> String {
    format!("`{}`", n.replace('`', "``"))
}

pub(crate) fn c_str(s: &str) -> CString {
    let end = s.find('\0').unwrap_or(s.len());
    CString::new(&s[..end]).expect("no NUL before end")
}

/// A copy of `s` in memory from `sqlite3_malloc`, for the caller to `sqlite3_free`.
pub(crate) unsafe fn strdup_sqlite(s: &CStr) -> *mut c_char {
    let bytes = s.to_bytes_with_nul();
    let p = libc::malloc(bytes.len()) as *mut c_char;
    if !p.is_null() {
        std::ptr::copy_nonoverlapping(bytes.as_ptr() as *const c_char, p, bytes.len());
    }
    p
}

/// The bytes at `p`: `n` of them, or up to the NUL when `n` is negative.
pub(crate) unsafe fn bytes<'a>(p: *const c_void, n: i64) -> &'a [u8] {
    if p.is_null() {
        &[]
    } else if n < 0 {
        CStr::from_ptr(p as *const c_char).to_bytes()
    } else {
        std::slice::from_raw_parts(p as *const u8, n as usize)
    }
}

/// SQLite's destructor argument: `SQLITE_STATIC` (0), `SQLITE_TRANSIENT` (-1) or a
/// function to call once the library is done with the data. The data is always copied,
/// so a function is called at once.
pub(crate) unsafe fn dispose(destructor: isize, p: *mut c_void) {
    if destructor != 0 && destructor != -1 {
        let f: unsafe extern "C" fn(*mut c_void) = std::mem::transmute(destructor);
        f(p);
    }
}

pub(crate) fn errstr(code: c_int) -> &'static str {
    match code & 0xff {
        SQLITE_OK => "not an error",
        SQLITE_ERROR => "SQL logic error",
        SQLITE_PERM => "access permission denied",
        SQLITE_ABORT => "query aborted",
        SQLITE_BUSY => "database is locked",
        SQLITE_LOCKED => "database table is locked",
        SQLITE_NOMEM => "out of memory",
        SQLITE_READONLY => "attempt to write a readonly database",
        SQLITE_INTERRUPT => "interrupted",
        SQLITE_IOERR => "disk I/O error",
        SQLITE_CORRUPT => "database disk image is malformed",
        SQLITE_NOTFOUND => "unknown operation",
        SQLITE_FULL => "database or disk is full",
        SQLITE_CANTOPEN => "unable to open database file",
        SQLITE_SCHEMA => "database schema has changed",
        SQLITE_TOOBIG => "string or blob too big",
        SQLITE_CONSTRAINT => "constraint failed",
        SQLITE_MISMATCH => "datatype mismatch",
        SQLITE_MISUSE => "bad parameter or other API misuse",
        SQLITE_AUTH => "authorization denied",
        SQLITE_NOTADB => "file is not a database",
        SQLITE_RANGE => "column index out of range",
        SQLITE_ROW => "another row available",
        SQLITE_DONE => "no more rows available",
        _ => "unknown error",
    }
}

#[no_mangle]
pub extern "C" fn sqlite3_errstr(code: c_int) -> *const c_char {
    // Static strings: one table of C strings built once.
    static TABLE: std::sync::LazyLock<Vec<(c_int, CString)>> =
        std::sync::LazyLock::new(|| (0..=101).map(|c| (c, c_str(errstr(c)))).collect());
    let c = if code == SQLITE_ROW || code == SQLITE_DONE {
        code
    } else {
        code & 0xff
    };
    TABLE
        .iter()
        .find(|(k, _)| *k == c)
        .map_or(c"unknown error".as_ptr(), |(_, s)| s.as_ptr())
}

/// `sqlite3_version[]`: the same text as `sqlite3_libversion()`.
#[no_mangle]
pub static sqlite3_version: [u8; 7] = *b"3.46.0\0";

#[no_mangle]
pub extern "C" fn sqlite3_libversion() -> *const c_char {
    crate::SQLITE_VERSION.as_ptr()
}

#[no_mangle]
pub extern "C" fn sqlite3_libversion_number() -> c_int {
    crate::SQLITE_VERSION_NUMBER
}

#[no_mangle]
pub extern "C" fn sqlite3_sourceid() -> *const c_char {
    concat!("BeechDB ", env!("CARGO_PKG_VERSION"), "\0").as_ptr() as *const c_char
}

/// Serialized: any handle may be used from any thread.
#[no_mangle]
pub extern "C" fn sqlite3_threadsafe() -> c_int {
    1
}

#[no_mangle]
pub extern "C" fn sqlite3_initialize() -> c_int {
    SQLITE_OK
}

#[no_mangle]
pub extern "C" fn sqlite3_shutdown() -> c_int {
    SQLITE_OK
}

/// Shared cache is SQLite's way for connections to share one page cache; BeechDB's
/// connections to one environment always do.
#[no_mangle]
pub extern "C" fn sqlite3_enable_shared_cache(_on: c_int) -> c_int {
    SQLITE_OK
}

/// Whether the library was built with option `name` (`beechdb_sql::COMPILE_OPTIONS`; the
/// math functions are the one programs ask about).
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_compileoption_used(name: *const c_char) -> c_int {
    if name.is_null() {
        return 0;
    }
    let name = std::ffi::CStr::from_ptr(name).to_string_lossy();
    beechdb_sql::compile_option_used(&name) as c_int
}

/// The `n`th option the library was built with, or NULL past the last.
#[no_mangle]
pub extern "C" fn sqlite3_compileoption_get(n: c_int) -> *const c_char {
    usize::try_from(n)
        .ok()
        .and_then(|n| beechdb_sql::COMPILE_OPTIONS.get(n))
        .map_or(std::ptr::null(), |o| o.as_ptr())
}

#[no_mangle]
pub extern "C" fn sqlite3_sleep(ms: c_int) -> c_int {
    std::thread::sleep(std::time::Duration::from_millis(ms.max(0) as u64));
    ms
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_malloc(n: c_int) -> *mut c_void {
    if n <= 0 {
        std::ptr::null_mut()
    } else {
        libc::malloc(n as usize)
    }
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_malloc64(n: u64) -> *mut c_void {
    if n == 0 {
        std::ptr::null_mut()
    } else {
        libc::malloc(n as usize)
    }
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_realloc(p: *mut c_void, n: c_int) -> *mut c_void {
    sqlite3_realloc64(p, n.max(0) as u64)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_realloc64(p: *mut c_void, n: u64) -> *mut c_void {
    if n == 0 {
        libc::free(p);
        std::ptr::null_mut()
    } else {
        libc::realloc(p, n as usize)
    }
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_free(p: *mut c_void) {
    libc::free(p)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_stricmp(a: *const c_char, b: *const c_char) -> c_int {
    sqlite3_strnicmp(a, b, c_int::MAX)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_strnicmp(a: *const c_char, b: *const c_char, n: c_int) -> c_int {
    match (a.is_null(), b.is_null()) {
        (true, true) => return 0,
        (true, false) => return -1,
        (false, true) => return 1,
        _ => {}
    }
    for i in 0..n.max(0) as usize {
        let x = (*a.add(i) as u8).to_ascii_lowercase();
        let y = (*b.add(i) as u8).to_ascii_lowercase();
        if x != y || x == 0 {
            return x as c_int - y as c_int;
        }
    }
    0
}

/// Whether `sql` ends with a complete statement: a semicolon outside literals, comments
/// and identifiers, and for CREATE TRIGGER, after the body's END.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_complete(sql: *const c_char) -> c_int {
    if sql.is_null() {
        return 0;
    }
    is_complete(CStr::from_ptr(sql).to_bytes()) as c_int
}

pub(crate) fn is_complete(sql: &[u8]) -> bool {
    // Words of the statement so far (upper-cased), to recognise CREATE [TEMP] TRIGGER and
    // its END; whether the last token was a semicolon that ends a statement.
    let mut words: Vec<String> = Vec::new();
    let mut complete = false;
    let mut i = 0;
    while i < sql.len() {
        let c = sql[i];
        match c {
            b' ' | b'\t' | b'\n' | b'\r' | b'\x0c' => i += 1,
            b'-' if sql.get(i + 1) == Some(&b'-') => {
                while i < sql.len() && sql[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if sql.get(i + 1) == Some(&b'*') => {
                match sql[i + 2..].windows(2).position(|w| w == b"*/") {
                    Some(p) => i += p + 4,
                    None => return false,
                }
            }
            b'\'' | b'"' | b'`' | b'[' => {
                let close = if c == b'[' { b']' } else { c };
                match sql[i + 1..].iter().position(|&x| x == close) {
                    Some(p) => i += p + 2,
                    None => return false,
                }
                complete = false;
                words.push(String::new());
            }
            b';' => {
                i += 1;
                let trigger = matches!(
                    words.iter().take(3).map(String::as_str).collect::<Vec<_>>()[..],
                    ["CREATE", "TRIGGER", ..] | ["CREATE", "TEMP" | "TEMPORARY", "TRIGGER"]
                );
                if !trigger || words.last().is_some_and(|w| w == "END") {
                    complete = true;
                    words.clear();
                } else {
                    words.push(";".into());
                }
            }
            c if c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80 => {
                let start = i;
                while i < sql.len()
                    && (sql[i].is_ascii_alphanumeric() || sql[i] == b'_' || sql[i] >= 0x80)
                {
                    i += 1;
                }
                words.push(String::from_utf8_lossy(&sql[start..i]).to_ascii_uppercase());
                complete = false;
            }
            _ => {
                i += 1;
                complete = false;
                words.push(String::new());
            }
        }
    }
    complete
}

#[cfg(test)]
mod tests {
    use super::is_complete;

    #[test]
    fn one_version_everywhere() {
        let lib = crate::SQLITE_VERSION.to_str().unwrap();
        assert_eq!(lib, beechdb_sql::SQLITE_VERSION);
        assert_eq!(&super::sqlite3_version[..lib.len()], lib.as_bytes());
        let n = crate::SQLITE_VERSION_NUMBER;
        assert_eq!(
            format!("{}.{}.{}", n / 1_000_000, n / 1000 % 1000, n % 1000),
            lib
        );
    }

    #[test]
    fn complete_statements() {
        assert!(is_complete(b"SELECT 1;"));
        assert!(is_complete(b"SELECT 1; -- done\n"));
        assert!(!is_complete(b"SELECT 1"));
        assert!(!is_complete(b"SELECT ';"));
        assert!(!is_complete(b"SELECT 1 /* ; "));
        assert!(!is_complete(
            b"CREATE TRIGGER t AFTER INSERT ON x BEGIN SELECT 1;"
        ));
        assert!(is_complete(
            b"CREATE TRIGGER t AFTER INSERT ON x BEGIN SELECT 1; END;"
        ));
        assert!(is_complete(
            b"create temp trigger t after insert on x begin select 1; end ;"
        ));
    }
}
