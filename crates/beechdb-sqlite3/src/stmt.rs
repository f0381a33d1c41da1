//! Prepared statements: prepare, bind, step, reset, finalize, and the columns of the
//! current row.
//!
//! Owns: `sqlite3_stmt`: a parsed `beechdb_sql::Statement`, its bound parameters, and the
//! rows of its current execution. May call: `conn`, `value`, `util`.
//!
//! A statement runs whole at its first `sqlite3_step` (as a DML statement does in SQLite;
//! a query's rows are then handed out one per step); its effects and errors come with that
//! step. Column names and declared types are known before the first step for queries.

use crate::conn::{
    failure, sqlite3, Failure, LIMIT_LENGTH, LIMIT_SQL_LENGTH, LIMIT_VARIABLE_NUMBER,
};
use crate::consts::*;
use crate::util::{c_str, dispose, strdup_sqlite};
use crate::value::{blob_value, sqlite3_value, text_value};
use beechdb_sql::{QueryResult, Statement, Value};
use std::ffi::{c_char, c_int, c_void, CStr, CString};

/// A prepared statement (`sqlite3_stmt*`).
pub struct sqlite3_stmt {
    pub(crate) db: *mut sqlite3,
    sql: CString,
    stmt: Statement,
    params: Vec<Value>,
    param_names: Vec<Option<CString>>,
    /// Names and declared types of the result columns, once known.
    columns: Option<Vec<(CString, Option<CString>)>>,
    rows: std::vec::IntoIter<Vec<Value>>,
    row: Vec<sqlite3_value>,
    state: State,
    /// The result code of the last step that failed, for `reset` and `finalize`.
    failed: c_int,
    /// The connection's count of registrations when this was prepared.
    registrations: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not run since prepared or reset: parameters may be bound.
    Ready,
    /// Run; `row` is the current row.
    Rows,
    Done,
}

/// Prepares the first statement of `sql` (`n` bytes, or up to the NUL when negative) on
/// `db`; `*tail` is where the next one begins. No statement (only spaces and comments)
/// leaves `*pp` null.
unsafe fn prepare(
    db: *mut sqlite3,
    sql: *const c_char,
    n: c_int,
    pp: *mut *mut sqlite3_stmt,
    tail: *mut *const c_char,
) -> c_int {
    if pp.is_null() {
        return SQLITE_MISUSE;
    }
    *pp = std::ptr::null_mut();
    let Some(h) = db.as_ref() else {
        return SQLITE_MISUSE;
    };
    if sql.is_null() {
        return h.fail(SQLITE_MISUSE, "no SQL text");
    }
    let bytes = crate::util::bytes(sql.cast(), n as i64);
    let bytes = &bytes[..bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len())];
    let (stmt, rc) = h.with(None, |inner| {
        if bytes.len() > h.limit(LIMIT_SQL_LENGTH) {
            return Err((SQLITE_TOOBIG, "statement too long".into()));
        }
        let text = std::str::from_utf8(bytes)
            .map_err(|_| (SQLITE_ERROR, "the SQL text is not valid UTF-8".to_string()))?;
        let parsed = inner.conn()?.prepare_first(text).map_err(failure)?;
        let Some((stmt, used)) = parsed else {
            return Ok(Some((None, bytes.len())));
        };
        if stmt.parameter_count() > h.limit(LIMIT_VARIABLE_NUMBER) {
            return Err((SQLITE_ERROR, "too many SQL variables".into()));
        }
        if let Some((auth, ctx)) = inner.authorizer {
            let reads = inner.conn()?.column_reads(&stmt);
            authorize(&stmt, reads, auth, ctx)?;
        }
        // Unknown tables and columns are errors of the prepare, as in SQLite; a query's
        // columns are known from here on.
        let described = inner.conn()?.describe(&stmt).map_err(failure)?;
        // The text as given, up to where the statement ends (SQLite keeps it so).
        let mut s = sqlite3_stmt::new(db, &text[..used], stmt);
        s.registrations = inner.registrations;
        if !described.columns.is_empty() {
            s.set_columns(&described);
        }
        inner.live += 1;
        Ok(Some((Some(s), used)))
    });
    let Some((stmt, used)) = stmt else {
        return rc;
    };
    if !tail.is_null() {
        *tail = sql.add(used);
    }
    if let Some(s) = stmt {
        *pp = Box::into_raw(Box::new(s));
    }
    rc
}

/// Asks the application's authorizer about each of the statement's actions, then about each
/// table column it reads (`SQLITE_READ`). Where SQLite reads a column its authorizer
/// answered `SQLITE_IGNORE` for as NULL, BeechDB refuses the statement: it never hands out
/// a value the application asked to hide.
unsafe fn authorize(
    stmt: &Statement,
    reads: Vec<(String, String)>,
    auth: crate::conn::AuthorizerFn,
    ctx: *mut c_void,
) -> Result<(), Failure> {
    const SQLITE_READ: c_int = 20;
    let reads = reads
        .into_iter()
        .map(|(t, c)| (SQLITE_READ, Some(t), Some(c)));
    for (code, a, b) in stmt.authorizer_actions().into_iter().chain(reads) {
        let (ca, cb) = (a.as_deref().map(c_str), b.as_deref().map(c_str));
        let ptr = |s: &Option<CString>| s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
        let main = if matches!(code, 22 | 32) {
            std::ptr::null()
        } else {
            c"main".as_ptr()
        };
        let read = || {
            format!(
                "{}.{}",
                a.as_deref().unwrap_or(""),
                b.as_deref().unwrap_or("")
            )
        };
        match auth(ctx, code, ptr(&ca), ptr(&cb), main, std::ptr::null()) {
            SQLITE_OK => {}
            SQLITE_IGNORE if code != SQLITE_READ => {}
            SQLITE_IGNORE => {
                return Err((
                    SQLITE_AUTH,
                    format!(
                        "access to {} is prohibited (BeechDB refuses a statement reading a \
                         column its authorizer ignores, where SQLite would read it as NULL)",
                        read()
                    ),
                ))
            }
            SQLITE_DENY if code == SQLITE_READ => {
                return Err((SQLITE_AUTH, format!("access to {} is prohibited", read())))
            }
            SQLITE_DENY => return Err((SQLITE_AUTH, "not authorized".into())),
            _ => return Err((SQLITE_ERROR, "authorizer malfunction".into())),
        }
    }
    Ok(())
}

impl sqlite3_stmt {
    fn new(db: *mut sqlite3, sql: &str, stmt: Statement) -> sqlite3_stmt {
        let n = stmt.parameter_count();
        let param_names = (1..=n).map(|i| stmt.parameter_name(i).map(c_str)).collect();
        sqlite3_stmt {
            db,
            sql: c_str(sql),
            stmt,
            params: vec![Value::Null; n],
            param_names,
            columns: None,
            rows: Vec::new().into_iter(),
            row: Vec::new(),
            state: State::Ready,
            failed: SQLITE_OK,
            registrations: 0,
        }
    }

    fn set_columns(&mut self, r: &QueryResult) {
        self.columns = Some(
            r.columns
                .iter()
                .zip(r.decl_types.iter())
                .map(|(n, t)| (c_str(n), t.as_deref().map(c_str)))
                .collect(),
        );
    }

    fn column(&self, i: c_int) -> Option<&sqlite3_value> {
        if self.state != State::Rows || i < 0 {
            return None;
        }
        self.row.get(i as usize)
    }

    fn reset(&mut self) {
        self.state = State::Ready;
        self.rows = Vec::new().into_iter();
        self.row.clear();
    }

    /// Moves to the next row of the current execution.
    fn advance(&mut self) -> c_int {
        match self.rows.next() {
            Some(r) if r.len() == self.row.len() => {
                // The values of the previous row are reused, with their text buffers.
                self.row.iter_mut().zip(r).for_each(|(at, v)| at.set(v));
                SQLITE_ROW
            }
            Some(r) => {
                self.row = r.into_iter().map(sqlite3_value::new).collect();
                SQLITE_ROW
            }
            None => {
                self.row.clear();
                self.state = State::Done;
                SQLITE_DONE
            }
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_prepare_v2(
    db: *mut sqlite3,
    sql: *const c_char,
    n: c_int,
    pp: *mut *mut sqlite3_stmt,
    tail: *mut *const c_char,
) -> c_int {
    prepare(db, sql, n, pp, tail)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_prepare(
    db: *mut sqlite3,
    sql: *const c_char,
    n: c_int,
    pp: *mut *mut sqlite3_stmt,
    tail: *mut *const c_char,
) -> c_int {
    prepare(db, sql, n, pp, tail)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_prepare_v3(
    db: *mut sqlite3,
    sql: *const c_char,
    n: c_int,
    _flags: u32,
    pp: *mut *mut sqlite3_stmt,
    tail: *mut *const c_char,
) -> c_int {
    prepare(db, sql, n, pp, tail)
}

/// Runs `f` on a statement under its connection's lock.
unsafe fn with_stmt<R>(
    p: *mut sqlite3_stmt,
    fail: R,
    f: impl FnOnce(&mut sqlite3_stmt, &mut crate::conn::Inner) -> Result<R, Failure>,
) -> (R, c_int) {
    let Some(s) = p.as_mut() else {
        return (fail, SQLITE_MISUSE);
    };
    let h = &*s.db;
    h.with(fail, |inner| f(s, inner))
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_step(p: *mut sqlite3_stmt) -> c_int {
    let Some(s) = p.as_mut() else {
        return SQLITE_MISUSE;
    };
    let h = &*s.db;
    let (rc, err) = h.with(SQLITE_ERROR, |inner| {
        if s.state == State::Rows {
            return Ok(s.advance());
        }
        if s.state == State::Done {
            s.reset();
        }
        if s.registrations != inner.registrations {
            // Functions or collations changed since the prepare: resolved again, as SQLite
            // prepares an expired statement again (the bound values stay).
            let text = s.sql.to_string_lossy().into_owned();
            match inner.conn()?.prepare_first(&text) {
                Ok(Some((stmt, _))) => s.stmt = stmt,
                Ok(None) => {}
                Err(e) => {
                    s.state = State::Done;
                    return Err(failure(e));
                }
            }
            s.registrations = inner.registrations;
        }
        if let Some((mask, cb, ctx)) = inner.trace {
            if mask & SQLITE_TRACE_STMT != 0 {
                cb(
                    SQLITE_TRACE_STMT,
                    ctx,
                    p.cast(),
                    s.sql.as_ptr() as *mut c_void,
                );
            }
        }
        if let Some((cb, ctx)) = inner.progress {
            if cb(ctx) != 0 {
                s.state = State::Done;
                return Err((SQLITE_INTERRUPT, "interrupted".into()));
            }
        }
        if inner.readonly && !s.stmt.readonly() {
            s.state = State::Done;
            return Err((
                SQLITE_READONLY,
                "attempt to write a readonly database".into(),
            ));
        }
        // An auto-commit statement that lost a conflict left nothing behind: the
        // application's busy handler decides whether it runs again. (In a transaction, the
        // conflict has rolled the transaction back.)
        let autocommit = inner.conn()?.is_autocommit();
        let mut r = inner.conn()?.run(&s.stmt, &s.params);
        let mut calls = 0;
        while let (Some((busy, ctx)), Err(e)) = (inner.busy, &r) {
            if !autocommit || !e.is_busy() || busy(ctx, calls) == 0 {
                break;
            }
            calls += 1;
            r = inner.conn()?.run(&s.stmt, &s.params);
        }
        s.state = State::Rows;
        match r {
            Ok(result) => {
                // Names handed out before stay valid: replaced only if they were unknown.
                let known = s.columns.as_ref().map_or(0, Vec::len);
                if known != result.columns.len() {
                    s.set_columns(&result);
                }
                s.rows = result.rows.into_iter();
                Ok(s.advance())
            }
            Err(e) => {
                s.state = State::Done;
                Err(failure(e))
            }
        }
    });
    s.failed = if err == SQLITE_OK { SQLITE_OK } else { err };
    if err != SQLITE_OK {
        err
    } else {
        rc
    }
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_reset(p: *mut sqlite3_stmt) -> c_int {
    let Some(s) = p.as_mut() else {
        return SQLITE_OK;
    };
    let failed = std::mem::replace(&mut s.failed, SQLITE_OK);
    (*s.db).with_quiet((), |_| {
        s.reset();
        Ok(())
    });
    failed
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_finalize(p: *mut sqlite3_stmt) -> c_int {
    if p.is_null() {
        return SQLITE_OK;
    }
    let s = Box::from_raw(p);
    let db = s.db;
    let failed = s.failed;
    {
        // Dropped under the lock: the statement may hold application functions.
        let guard = (*db).inner.lock();
        drop(s);
        drop(guard);
    }
    sqlite3::release(db);
    failed
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_clear_bindings(p: *mut sqlite3_stmt) -> c_int {
    with_stmt(p, (), |s, _| {
        s.params.iter_mut().for_each(|v| *v = Value::Null);
        Ok(())
    })
    .1
}

/// Binds parameter `i` (1-based).
unsafe fn bind(p: *mut sqlite3_stmt, i: c_int, v: Value) -> c_int {
    with_stmt(p, (), |s, _| {
        if s.state != State::Ready {
            return Err((
                SQLITE_MISUSE,
                "bind on a statement that is running: call sqlite3_reset first".into(),
            ));
        }
        if i < 1 || i as usize > s.params.len() {
            return Err((SQLITE_RANGE, "column index out of range".into()));
        }
        let len = match &v {
            Value::Text(t) => t.len(),
            Value::Blob(b) => b.len(),
            _ => 0,
        };
        if len > (*s.db).limit(LIMIT_LENGTH) {
            return Err((SQLITE_TOOBIG, "string or blob too big".into()));
        }
        s.params[i as usize - 1] = v;
        Ok(())
    })
    .1
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_bind_null(p: *mut sqlite3_stmt, i: c_int) -> c_int {
    bind(p, i, Value::Null)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_bind_int(p: *mut sqlite3_stmt, i: c_int, v: c_int) -> c_int {
    bind(p, i, Value::Integer(v as i64))
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_bind_int64(p: *mut sqlite3_stmt, i: c_int, v: i64) -> c_int {
    bind(p, i, Value::Integer(v))
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_bind_double(p: *mut sqlite3_stmt, i: c_int, v: f64) -> c_int {
    bind(
        p,
        i,
        if v.is_nan() {
            Value::Null
        } else {
            Value::Real(v)
        },
    )
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_bind_text(
    p: *mut sqlite3_stmt,
    i: c_int,
    text: *const c_char,
    n: c_int,
    destructor: isize,
) -> c_int {
    let rc = bind(p, i, text_value(text, n as i64));
    dispose(destructor, text as *mut c_void);
    rc
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_bind_text64(
    p: *mut sqlite3_stmt,
    i: c_int,
    text: *const c_char,
    n: u64,
    destructor: isize,
    _encoding: u8,
) -> c_int {
    let rc = bind(p, i, text_value(text, n as i64));
    dispose(destructor, text as *mut c_void);
    rc
}

/// Binds `n` bytes at `data` as a blob (NULL for a null pointer). A length past what
/// memory can hold, or past the LENGTH limit, is refused (SQLITE_TOOBIG), never cut.
unsafe fn bind_blob(
    p: *mut sqlite3_stmt,
    i: c_int,
    data: *const c_void,
    n: u64,
    destructor: isize,
) -> c_int {
    let rc = if data.is_null() {
        bind(p, i, Value::Null)
    } else if n > isize::MAX as u64 {
        SQLITE_TOOBIG
    } else {
        bind(p, i, blob_value(data, n as i64))
    };
    dispose(destructor, data as *mut c_void);
    rc
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_bind_blob(
    p: *mut sqlite3_stmt,
    i: c_int,
    data: *const c_void,
    n: c_int,
    destructor: isize,
) -> c_int {
    bind_blob(p, i, data, n.max(0) as u64, destructor)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_bind_blob64(
    p: *mut sqlite3_stmt,
    i: c_int,
    data: *const c_void,
    n: u64,
    destructor: isize,
) -> c_int {
    bind_blob(p, i, data, n, destructor)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_bind_zeroblob(p: *mut sqlite3_stmt, i: c_int, n: c_int) -> c_int {
    bind(p, i, Value::from(vec![0u8; n.max(0) as usize]))
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_bind_zeroblob64(p: *mut sqlite3_stmt, i: c_int, n: u64) -> c_int {
    if n > c_int::MAX as u64 {
        return SQLITE_TOOBIG;
    }
    sqlite3_bind_zeroblob(p, i, n as c_int)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_bind_value(
    p: *mut sqlite3_stmt,
    i: c_int,
    v: *const sqlite3_value,
) -> c_int {
    bind(p, i, v.as_ref().map_or(Value::Null, |v| v.v.clone()))
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_bind_parameter_count(p: *mut sqlite3_stmt) -> c_int {
    p.as_ref().map_or(0, |s| s.params.len() as c_int)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_bind_parameter_name(
    p: *mut sqlite3_stmt,
    i: c_int,
) -> *const c_char {
    p.as_ref()
        .and_then(|s| s.param_names.get((i as usize).wrapping_sub(1)))
        .and_then(|n| n.as_ref())
        .map_or(std::ptr::null(), |n| n.as_ptr())
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_bind_parameter_index(
    p: *mut sqlite3_stmt,
    name: *const c_char,
) -> c_int {
    match (p.as_ref(), crate::value::arg_str(name)) {
        (Some(s), Some(n)) => s.stmt.parameter_index(n).map_or(0, |i| i as c_int),
        _ => 0,
    }
}

/// The result columns, finding them without running the statement if it has not run.
unsafe fn columns<'a>(p: *mut sqlite3_stmt) -> &'a [(CString, Option<CString>)] {
    let Some(s) = p.as_mut() else {
        return &[];
    };
    if s.columns.is_none() {
        let h = &*s.db;
        let (described, _) = h.with_quiet(None, |inner| Ok(inner.conn()?.describe(&s.stmt).ok()));
        match described {
            Some(r) => s.set_columns(&r),
            None => s.columns = Some(Vec::new()),
        }
    }
    s.columns.as_deref().unwrap_or(&[])
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_column_count(p: *mut sqlite3_stmt) -> c_int {
    columns(p).len() as c_int
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_data_count(p: *mut sqlite3_stmt) -> c_int {
    p.as_ref()
        .filter(|s| s.state == State::Rows)
        .map_or(0, |s| s.row.len() as c_int)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_column_name(p: *mut sqlite3_stmt, i: c_int) -> *const c_char {
    columns(p)
        .get(i as usize)
        .map_or(std::ptr::null(), |(n, _)| n.as_ptr())
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_column_decltype(p: *mut sqlite3_stmt, i: c_int) -> *const c_char {
    columns(p)
        .get(i as usize)
        .and_then(|(_, t)| t.as_ref())
        .map_or(std::ptr::null(), |t| t.as_ptr())
}

/// `f` of column `i` of the current row (`default` without one), under the connection's
/// lock: the value's text form is made on first use, and another thread may ask too.
unsafe fn column<R>(
    p: *mut sqlite3_stmt,
    i: c_int,
    default: R,
    f: impl FnOnce(&sqlite3_value) -> R,
) -> R {
    let Some(s) = p.as_ref() else {
        return default;
    };
    let _guard = (*s.db).inner.lock();
    s.column(i).map_or(default, f)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_column_type(p: *mut sqlite3_stmt, i: c_int) -> c_int {
    column(p, i, SQLITE_NULL, sqlite3_value::type_code)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_column_int64(p: *mut sqlite3_stmt, i: c_int) -> i64 {
    column(p, i, 0, |v| v.v.as_i64())
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_column_int(p: *mut sqlite3_stmt, i: c_int) -> c_int {
    sqlite3_column_int64(p, i) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_column_double(p: *mut sqlite3_stmt, i: c_int) -> f64 {
    column(p, i, 0.0, |v| v.v.as_f64())
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_column_text(p: *mut sqlite3_stmt, i: c_int) -> *const u8 {
    column(p, i, std::ptr::null(), sqlite3_value::text_ptr)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_column_blob(p: *mut sqlite3_stmt, i: c_int) -> *const c_void {
    column(p, i, std::ptr::null(), sqlite3_value::blob_ptr)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_column_bytes(p: *mut sqlite3_stmt, i: c_int) -> c_int {
    column(p, i, 0, sqlite3_value::bytes)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_column_value(
    p: *mut sqlite3_stmt,
    i: c_int,
) -> *mut sqlite3_value {
    column(p, i, std::ptr::null_mut(), |v| v as *const _ as *mut _)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_sql(p: *mut sqlite3_stmt) -> *const c_char {
    p.as_ref().map_or(std::ptr::null(), |s| s.sql.as_ptr())
}

/// The statement's text with its bound parameters written in as literals, in memory from
/// `sqlite3_malloc`.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_expanded_sql(p: *mut sqlite3_stmt) -> *mut c_char {
    let Some(s) = p.as_ref() else {
        return std::ptr::null_mut();
    };
    let text = s.sql.to_string_lossy();
    let expanded = expand(&text, |name, positional| {
        let i = match name {
            Some(n) => s.stmt.parameter_index(n)?,
            None => positional,
        };
        s.params.get(i.wrapping_sub(1)).map(Value::to_sql_literal)
    });
    // Longer than SQLITE_LIMIT_LENGTH: none, as in SQLite.
    if expanded.len() > (*s.db).limit(LIMIT_LENGTH) {
        return std::ptr::null_mut();
    }
    strdup_sqlite(&c_str(&expanded))
}

/// `sql` with each parameter replaced by what `value` gives for it (its name, or for `?`
/// its position), skipping literals, quoted names and comments.
fn expand(sql: &str, value: impl Fn(Option<&str>, usize) -> Option<String>) -> String {
    let b = sql.as_bytes();
    let mut out = String::with_capacity(sql.len());
    let (mut i, mut last) = (0, 0);
    let mut highest = 0usize;
    while i < b.len() {
        let c = b[i];
        let skip_to = |from: usize, end: &[u8]| {
            b[from..]
                .windows(end.len())
                .position(|w| w == end)
                .map_or(b.len(), |p| from + p + end.len())
        };
        match c {
            b'\'' | b'"' | b'`' => i = skip_to(i + 1, &[c]),
            b'[' => i = skip_to(i + 1, b"]"),
            b'-' if b.get(i + 1) == Some(&b'-') => i = skip_to(i, b"\n"),
            b'/' if b.get(i + 1) == Some(&b'*') => i = skip_to(i + 2, b"*/"),
            b'?' | b':' | b'@' | b'$' => {
                let start = i;
                i += 1;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] >= 0x80)
                {
                    i += 1;
                }
                let token = &sql[start..i];
                let replaced = if c == b'?' {
                    let n = match token[1..].parse::<usize>() {
                        Ok(n) => n,
                        Err(_) => highest + 1,
                    };
                    highest = highest.max(n);
                    value(None, n)
                } else if token.len() > 1 {
                    value(Some(token), 0)
                } else {
                    None
                };
                if let Some(r) = replaced {
                    out.push_str(&sql[last..start]);
                    out.push_str(&r);
                    last = i;
                }
            }
            _ => i += 1,
        }
    }
    out.push_str(&sql[last.min(sql.len())..]);
    out
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_stmt_readonly(p: *mut sqlite3_stmt) -> c_int {
    p.as_ref().is_some_and(|s| s.stmt.readonly()) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_stmt_busy(p: *mut sqlite3_stmt) -> c_int {
    p.as_ref().is_some_and(|s| s.state == State::Rows) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_db_handle(p: *mut sqlite3_stmt) -> *mut sqlite3 {
    p.as_ref().map_or(std::ptr::null_mut(), |s| s.db)
}

/// The text of the connection's last error, for callers holding only a statement.
pub(crate) unsafe fn last_error(db: *mut sqlite3) -> String {
    CStr::from_ptr(crate::conn::sqlite3_errmsg(db))
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::expand;

    #[test]
    fn expands_parameters_outside_literals() {
        let v = |name: Option<&str>, i: usize| Some(format!("<{}{}>", name.unwrap_or(""), i));
        assert_eq!(
            expand("SELECT ?, '?', ?5, ?", v),
            "SELECT <1>, '?', <5>, <6>"
        );
        assert_eq!(expand("x = :a -- :b\n", v), "x = <:a0> -- :b\n");
    }
}
