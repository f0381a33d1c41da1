//! Application functions and collations registered from C: scalar
//! (`sqlite3_create_function_v2`), aggregate and window (`sqlite3_create_window_function`),
//! collations (`sqlite3_create_collation_v2`), bridged to `beechdb-sql`'s registry.
//!
//! Owns: the C callbacks and their user data; a registration's destructor runs when the
//! last statement prepared with it is gone. May call: `conn`, `value`.
//!
//! Window functions: with `xValue` and `xInverse`, as in SQLite, one aggregate context slides
//! over a partition (rows stepped in, inverted out, the value read per row, `xFinal` once
//! at the end, its result unused); without them each row's frame is stepped afresh and
//! finalized.

use crate::conn::{sqlite3, Failure};
use crate::consts::*;
use crate::value::{arg_str, sqlite3_context, sqlite3_value};
use beechdb_sql::{AggregateFunction, AggregateState, UserFunction, Value};
use std::cmp::Ordering;
use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

type XFunc = unsafe extern "C" fn(*mut sqlite3_context, c_int, *mut *mut sqlite3_value);
type XFinal = unsafe extern "C" fn(*mut sqlite3_context);
type XDestroy = unsafe extern "C" fn(*mut c_void);
type XCompare =
    unsafe extern "C" fn(*mut c_void, c_int, *const c_void, c_int, *const c_void) -> c_int;

/// One registration: its callbacks and the application's data.
pub(crate) struct FuncDef {
    pub db: *mut sqlite3,
    pub user_data: *mut c_void,
    func: Option<XFunc>,
    step: Option<XFunc>,
    fin: Option<XFinal>,
    /// A window function's `xValue` and `xInverse`.
    value: Option<XFinal>,
    inverse: Option<XFunc>,
    destroy: Option<XDestroy>,
}

// The application promises its callbacks may run on any thread (serialized mode).
unsafe impl Send for FuncDef {}
unsafe impl Sync for FuncDef {}

impl Drop for FuncDef {
    fn drop(&mut self) {
        if let Some(d) = self.destroy {
            unsafe { d(self.user_data) }
        }
    }
}

impl FuncDef {
    /// Calls `f` with `args`; `agg` is the aggregate's memory slot (null for scalars).
    unsafe fn call(
        &self,
        f: XFunc,
        agg: *mut *mut c_void,
        args: &[Value],
    ) -> beechdb_sql::Result<Value> {
        let vals: Vec<sqlite3_value> = args.iter().cloned().map(sqlite3_value::new).collect();
        let mut ptrs: Vec<*mut sqlite3_value> =
            vals.iter().map(|v| v as *const _ as *mut _).collect();
        let mut ctx = sqlite3_context::new(self, agg);
        f(&mut ctx, ptrs.len() as c_int, ptrs.as_mut_ptr());
        ctx.outcome()
    }
}

struct CAggregate(Arc<FuncDef>);

impl AggregateFunction for CAggregate {
    fn start(&self) -> Box<dyn AggregateState> {
        Box::new(CAggState {
            def: self.0.clone(),
            mem: std::ptr::null_mut(),
            finished: false,
        })
    }

    fn slides(&self) -> bool {
        self.0.value.is_some() && self.0.inverse.is_some()
    }
}

/// One group's (or frame's) aggregate: its memory from `sqlite3_aggregate_context`.
struct CAggState {
    def: Arc<FuncDef>,
    mem: *mut c_void,
    finished: bool,
}

unsafe impl Send for CAggState {}

impl CAggState {
    unsafe fn finalize(&mut self) -> beechdb_sql::Result<Value> {
        self.finished = true;
        let mut ctx = sqlite3_context::new(&self.def, &mut self.mem);
        if let Some(f) = self.def.fin {
            f(&mut ctx);
        }
        libc::free(self.mem);
        self.mem = std::ptr::null_mut();
        ctx.outcome()
    }
}

impl AggregateState for CAggState {
    fn step(&mut self, args: &[Value]) -> beechdb_sql::Result<()> {
        let step = self.def.step.expect("aggregates have a step");
        unsafe { self.def.call(step, &mut self.mem, args).map(drop) }
    }

    fn finish(&mut self) -> beechdb_sql::Result<Value> {
        unsafe { self.finalize() }
    }

    fn inverse(&mut self, args: &[Value]) -> beechdb_sql::Result<()> {
        let inverse = self.def.inverse.expect("a sliding window has an inverse");
        unsafe { self.def.call(inverse, &mut self.mem, args).map(drop) }
    }

    fn value(&mut self) -> beechdb_sql::Result<Value> {
        let value = self
            .def
            .value
            .expect("a sliding window has a value function");
        let mut ctx = sqlite3_context::new(&self.def, &mut self.mem);
        unsafe { value(&mut ctx) };
        ctx.outcome()
    }
}

impl Drop for CAggState {
    /// An aggregate abandoned midway (the statement failed or was reset) still gets its
    /// final call, so the application can free what it holds, as in SQLite.
    fn drop(&mut self) {
        if !self.finished {
            let _ = unsafe { self.finalize() };
        }
    }
}

/// Registers (or removes) a function on the connection.
unsafe fn register(db: *mut sqlite3, name: *const c_char, n_args: c_int, def: FuncDef) -> c_int {
    let Some(h) = db.as_ref() else {
        return SQLITE_MISUSE;
    };
    h.run(|inner| -> Result<(), Failure> {
        let Some(name) = arg_str(name).filter(|n| !n.is_empty() && n.len() <= 255) else {
            return Err((SQLITE_MISUSE, "bad function name".into()));
        };
        if !(-1..=127).contains(&n_args) {
            return Err((
                SQLITE_MISUSE,
                format!("bad number of arguments for {name}: {n_args}"),
            ));
        }
        let f = match (def.func, def.step, def.fin) {
            (Some(_), None, None) => {
                let def = Arc::new(def);
                let func = def.func.expect("checked");
                Some(UserFunction::Scalar(Arc::new(
                    move |args: &[Value]| unsafe { def.call(func, std::ptr::null_mut(), args) },
                )))
            }
            (None, Some(_), Some(_)) => {
                Some(UserFunction::Aggregate(Arc::new(CAggregate(Arc::new(def)))))
            }
            (None, None, None) => None,
            _ => {
                return Err((
                    SQLITE_MISUSE,
                    format!(
                    "{name}: a function is either scalar (xFunc) or aggregate (xStep and xFinal)"
                ),
                ))
            }
        };
        inner.settings()?.create_function(name, n_args, f);
        inner.registrations += 1;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_create_function_v2(
    db: *mut sqlite3,
    name: *const c_char,
    n_args: c_int,
    _text_rep: c_int,
    user_data: *mut c_void,
    func: Option<XFunc>,
    step: Option<XFunc>,
    fin: Option<XFinal>,
    destroy: Option<XDestroy>,
) -> c_int {
    let def = FuncDef {
        db,
        user_data,
        func,
        step,
        fin,
        value: None,
        inverse: None,
        destroy,
    };
    register(db, name, n_args, def)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_create_function(
    db: *mut sqlite3,
    name: *const c_char,
    n_args: c_int,
    text_rep: c_int,
    user_data: *mut c_void,
    func: Option<XFunc>,
    step: Option<XFunc>,
    fin: Option<XFinal>,
) -> c_int {
    sqlite3_create_function_v2(db, name, n_args, text_rep, user_data, func, step, fin, None)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_create_window_function(
    db: *mut sqlite3,
    name: *const c_char,
    n_args: c_int,
    _text_rep: c_int,
    user_data: *mut c_void,
    step: Option<XFunc>,
    fin: Option<XFinal>,
    value: Option<XFinal>,
    inverse: Option<XFunc>,
    destroy: Option<XDestroy>,
) -> c_int {
    let def = FuncDef {
        db,
        user_data,
        func: None,
        step,
        fin,
        value,
        inverse,
        destroy,
    };
    register(db, name, n_args, def)
}

/// A C comparison and its data; the destructor runs when the collation is replaced or
/// its connection closes.
struct CCollation {
    arg: *mut c_void,
    compare: XCompare,
    destroy: Option<XDestroy>,
}

unsafe impl Send for CCollation {}
unsafe impl Sync for CCollation {}

impl CCollation {
    fn compare(&self, a: &str, b: &str) -> Ordering {
        let (na, nb) = (a.len() as c_int, b.len() as c_int);
        let r = unsafe { (self.compare)(self.arg, na, a.as_ptr().cast(), nb, b.as_ptr().cast()) };
        r.cmp(&0)
    }
}

impl Drop for CCollation {
    fn drop(&mut self) {
        if let Some(d) = self.destroy {
            unsafe { d(self.arg) }
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_create_collation_v2(
    db: *mut sqlite3,
    name: *const c_char,
    _text_rep: c_int,
    arg: *mut c_void,
    compare: Option<XCompare>,
    destroy: Option<XDestroy>,
) -> c_int {
    let Some(h) = db.as_ref() else {
        return SQLITE_MISUSE;
    };
    h.run(|inner| {
        let Some(name) = arg_str(name).filter(|n| !n.is_empty()) else {
            return Err((SQLITE_MISUSE, "bad collation name".into()));
        };
        let f = compare.map(|compare| {
            let c = CCollation {
                arg,
                compare,
                destroy,
            };
            Arc::new(move |a: &str, b: &str| c.compare(a, b)) as Arc<beechdb_sql::CollationFunction>
        });
        inner.settings()?.create_collation(name, f);
        inner.registrations += 1;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_create_collation(
    db: *mut sqlite3,
    name: *const c_char,
    text_rep: c_int,
    arg: *mut c_void,
    compare: Option<XCompare>,
) -> c_int {
    sqlite3_create_collation_v2(db, name, text_rep, arg, compare, None)
}
