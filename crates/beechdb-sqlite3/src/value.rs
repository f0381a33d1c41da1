//! Values as C sees them (`sqlite3_value`: column values, function arguments) and the
//! context an application function reports its result through (`sqlite3_context`).
//!
//! Owns: the text and blob forms handed to C, which live as long as the value (SQLite's
//! rule: until the value changes or is freed). May call: `util`.

use crate::consts::*;
use crate::udf::FuncDef;
use crate::util::{bytes, dispose};
use beechdb_sql::Value;
use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_int, c_void, CStr};

/// A value (`sqlite3_value*`), with its text form made on demand.
pub struct sqlite3_value {
    pub(crate) v: Value,
    /// The value as text followed by a NUL, when `has_text`: made once asked for, in a
    /// buffer a statement's column keeps from row to row (as SQLite's own values do).
    text: RefCell<Vec<u8>>,
    has_text: Cell<bool>,
}

impl sqlite3_value {
    pub(crate) fn new(v: Value) -> sqlite3_value {
        sqlite3_value {
            v,
            text: RefCell::default(),
            has_text: Cell::new(false),
        }
    }

    /// Makes the value `v`, keeping the text buffer (pointers into it are then stale, as
    /// SQLite's are once a statement steps).
    pub(crate) fn set(&mut self, v: Value) {
        self.v = v;
        self.has_text.set(false);
    }

    pub(crate) fn type_code(&self) -> c_int {
        match self.v {
            Value::Null => SQLITE_NULL,
            Value::Integer(_) => SQLITE_INTEGER,
            Value::Real(_) => SQLITE_FLOAT,
            Value::Text(_) => SQLITE_TEXT,
            Value::Blob(_) => SQLITE_BLOB,
        }
    }

    /// The value as NUL-terminated text; NULL for SQL NULL.
    pub(crate) fn text_ptr(&self) -> *const u8 {
        if self.v.is_null() {
            return std::ptr::null();
        }
        if !self.has_text.get() {
            let mut text = self.text.borrow_mut();
            text.clear();
            match &self.v {
                Value::Blob(b) => text.extend_from_slice(b),
                Value::Text(t) => text.extend_from_slice(t.as_bytes()),
                Value::Integer(i) => {
                    use std::io::Write;
                    write!(text, "{i}").expect("writes to memory");
                }
                other => text.extend_from_slice(other.to_text().as_bytes()),
            }
            text.push(0);
            self.has_text.set(true);
        }
        self.text.borrow().as_ptr()
    }

    /// The value's bytes as a blob (text as its UTF-8); NULL for SQL NULL and empty values.
    pub(crate) fn blob_ptr(&self) -> *const c_void {
        match &self.v {
            Value::Null => std::ptr::null(),
            Value::Blob(b) if b.is_empty() => std::ptr::null(),
            Value::Blob(b) => b.as_ptr().cast(),
            Value::Text(t) if t.is_empty() => std::ptr::null(),
            Value::Text(t) => t.as_ptr().cast(),
            _ => self.text_ptr().cast(),
        }
    }

    pub(crate) fn bytes(&self) -> c_int {
        match &self.v {
            Value::Null => 0,
            Value::Blob(b) => b.len() as c_int,
            Value::Text(t) => t.len() as c_int,
            other => other.to_text().len() as c_int,
        }
    }
}

/// The context of one call of an application function.
pub struct sqlite3_context {
    pub(crate) def: *const FuncDef,
    /// The aggregate's memory (`sqlite3_aggregate_context`); null for scalar functions.
    pub(crate) agg: *mut *mut c_void,
    pub(crate) result: Value,
    /// The error the function set: its result code and message.
    pub(crate) error: Option<(c_int, String)>,
}

impl sqlite3_context {
    pub(crate) fn new(def: &FuncDef, agg: *mut *mut c_void) -> sqlite3_context {
        sqlite3_context {
            def,
            agg,
            result: Value::Null,
            error: None,
        }
    }

    pub(crate) fn outcome(self) -> beechdb_sql::Result<Value> {
        match self.error {
            Some((code, e)) => Err(beechdb_sql::Error::Function(code, e)),
            None => Ok(self.result),
        }
    }
}

unsafe fn value<'a>(v: *mut sqlite3_value) -> Option<&'a sqlite3_value> {
    v.as_ref()
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_value_type(v: *mut sqlite3_value) -> c_int {
    value(v).map_or(SQLITE_NULL, sqlite3_value::type_code)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_value_numeric_type(v: *mut sqlite3_value) -> c_int {
    match value(v) {
        Some(x) => match &x.v {
            Value::Text(_) => match x.v.to_numeric() {
                Value::Integer(_) => SQLITE_INTEGER,
                Value::Real(_) => SQLITE_FLOAT,
                _ => SQLITE_TEXT,
            },
            _ => x.type_code(),
        },
        None => SQLITE_NULL,
    }
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_value_int64(v: *mut sqlite3_value) -> i64 {
    value(v).map_or(0, |x| x.v.as_i64())
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_value_int(v: *mut sqlite3_value) -> c_int {
    sqlite3_value_int64(v) as c_int
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_value_double(v: *mut sqlite3_value) -> f64 {
    value(v).map_or(0.0, |x| x.v.as_f64())
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_value_text(v: *mut sqlite3_value) -> *const u8 {
    value(v).map_or(std::ptr::null(), sqlite3_value::text_ptr)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_value_blob(v: *mut sqlite3_value) -> *const c_void {
    value(v).map_or(std::ptr::null(), sqlite3_value::blob_ptr)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_value_bytes(v: *mut sqlite3_value) -> c_int {
    value(v).map_or(0, sqlite3_value::bytes)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_value_dup(v: *const sqlite3_value) -> *mut sqlite3_value {
    match v.as_ref() {
        Some(x) => Box::into_raw(Box::new(sqlite3_value::new(x.v.clone()))),
        None => std::ptr::null_mut(),
    }
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_value_free(v: *mut sqlite3_value) {
    if !v.is_null() {
        drop(Box::from_raw(v));
    }
}

unsafe fn context<'a>(ctx: *mut sqlite3_context) -> Option<&'a mut sqlite3_context> {
    ctx.as_mut()
}

/// Sets a function's result.
unsafe fn result(ctx: *mut sqlite3_context, v: Value) {
    if let Some(c) = context(ctx) {
        c.result = v;
    }
}

/// Text from C (`n` bytes, or up to the NUL when negative), invalid UTF-8 replaced.
pub(crate) unsafe fn text_value(p: *const c_char, n: i64) -> Value {
    if p.is_null() {
        return Value::Null;
    }
    // With a length, every byte of it, NULs included (SQLite keeps them too); without
    // one, up to the first NUL.
    // Valid text (the usual case) goes straight into the value's one allocation.
    match String::from_utf8_lossy(bytes(p.cast(), n)) {
        std::borrow::Cow::Borrowed(s) => Value::Text(s.into()),
        std::borrow::Cow::Owned(s) => Value::from(s),
    }
}

pub(crate) unsafe fn blob_value(p: *const c_void, n: i64) -> Value {
    Value::from(bytes(p, n.max(0)).to_vec())
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_result_null(ctx: *mut sqlite3_context) {
    result(ctx, Value::Null)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_result_int(ctx: *mut sqlite3_context, v: c_int) {
    result(ctx, Value::Integer(v as i64))
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_result_int64(ctx: *mut sqlite3_context, v: i64) {
    result(ctx, Value::Integer(v))
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_result_double(ctx: *mut sqlite3_context, v: f64) {
    result(
        ctx,
        if v.is_nan() {
            Value::Null
        } else {
            Value::Real(v)
        },
    )
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_result_text(
    ctx: *mut sqlite3_context,
    p: *const c_char,
    n: c_int,
    destructor: isize,
) {
    result(ctx, text_value(p, n as i64));
    dispose(destructor, p as *mut c_void);
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_result_text64(
    ctx: *mut sqlite3_context,
    p: *const c_char,
    n: u64,
    destructor: isize,
    _encoding: u8,
) {
    result(ctx, text_value(p, n as i64));
    dispose(destructor, p as *mut c_void);
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_result_blob(
    ctx: *mut sqlite3_context,
    p: *const c_void,
    n: c_int,
    destructor: isize,
) {
    result(ctx, blob_value(p, n as i64));
    dispose(destructor, p as *mut c_void);
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_result_blob64(
    ctx: *mut sqlite3_context,
    p: *const c_void,
    n: u64,
    destructor: isize,
) {
    result(ctx, blob_value(p, n as i64));
    dispose(destructor, p as *mut c_void);
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_result_zeroblob(ctx: *mut sqlite3_context, n: c_int) {
    result(ctx, Value::from(vec![0u8; n.max(0) as usize]))
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_result_value(ctx: *mut sqlite3_context, v: *mut sqlite3_value) {
    result(ctx, value(v).map_or(Value::Null, |x| x.v.clone()))
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_result_error(
    ctx: *mut sqlite3_context,
    msg: *const c_char,
    n: c_int,
) {
    if let Some(c) = context(ctx) {
        let msg = match text_value(msg, n as i64) {
            Value::Text(t) => t.to_string(),
            _ => String::new(),
        };
        c.error = Some((SQLITE_ERROR, msg));
    }
}

/// Sets the error's code, keeping a message already set (else SQLite's for the code).
#[no_mangle]
pub unsafe extern "C" fn sqlite3_result_error_code(ctx: *mut sqlite3_context, code: c_int) {
    if let Some(c) = context(ctx) {
        let msg = match c.error.take() {
            Some((_, msg)) => msg,
            None => crate::util::errstr(code).to_string(),
        };
        c.error = Some((code, msg));
    }
}

/// Sets the error `code` with SQLite's message for it.
unsafe fn result_error_of(ctx: *mut sqlite3_context, code: c_int) {
    if let Some(c) = context(ctx) {
        c.error = Some((code, crate::util::errstr(code).to_string()));
    }
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_result_error_nomem(ctx: *mut sqlite3_context) {
    result_error_of(ctx, SQLITE_NOMEM)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_result_error_toobig(ctx: *mut sqlite3_context) {
    result_error_of(ctx, SQLITE_TOOBIG)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_user_data(ctx: *mut sqlite3_context) -> *mut c_void {
    context(ctx).map_or(std::ptr::null_mut(), |c| (*c.def).user_data)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_context_db_handle(
    ctx: *mut sqlite3_context,
) -> *mut crate::sqlite3 {
    context(ctx).map_or(std::ptr::null_mut(), |c| (*c.def).db)
}

/// The aggregate's memory: `n` zeroed bytes the first time it is asked for with `n > 0`,
/// the same memory after; null for a scalar function or before any is asked for with
/// `n <= 0`.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_aggregate_context(
    ctx: *mut sqlite3_context,
    n: c_int,
) -> *mut c_void {
    let Some(c) = context(ctx) else {
        return std::ptr::null_mut();
    };
    if c.agg.is_null() {
        return std::ptr::null_mut();
    }
    if (*c.agg).is_null() && n > 0 {
        *c.agg = libc::calloc(1, n as usize);
    }
    *c.agg
}

/// The text of a C string argument, if any.
/// Whether a schema name argument names `main` (NULL does, as in SQLite).
pub(crate) unsafe fn names_main(p: *const c_char) -> bool {
    arg_str(p).is_none_or(|n| n.eq_ignore_ascii_case("main"))
}

pub(crate) unsafe fn arg_str<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        None
    } else {
        CStr::from_ptr(p).to_str().ok()
    }
}
