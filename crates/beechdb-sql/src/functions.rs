//! Functions and collations an application registers on a connection (SQLite's
//! `sqlite3_create_function_v2`, `sqlite3_create_window_function`,
//! `sqlite3_create_collation_v2`).
//!
//! Owns: each connection's registry, and the process-wide table of user collations.
//! Resolution happens when a statement is prepared, as in SQLite: a statement keeps the
//! function it was prepared with. A registered function of the same name and argument count
//! hides a built-in one. May call: `value`.
//!
//! Invariant: a user collation's index in `COLLATIONS` never changes (collations are
//! `Copy` values that name it by index), so entries are only ever added. The table holds
//! them weakly: a collation lives while a connection's registry holds it, and a statement
//! prepared with one that has since gone compares as BINARY.

use crate::error::{Error, Result};
use crate::value::{Collation, Value};
use parking_lot::RwLock;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Weak};

/// A scalar function: the arguments' values to the result.
pub type ScalarFunction = dyn Fn(&[Value]) -> Result<Value> + Send + Sync;

/// A text comparison.
pub type CollationFunction = dyn Fn(&str, &str) -> Ordering + Send + Sync;

/// An aggregate (or aggregate window) function: makes the state of one group or frame.
pub trait AggregateFunction: Send + Sync {
    fn start(&self) -> Box<dyn AggregateState>;
    /// Whether its states can [`AggregateState::inverse`] and [`AggregateState::value`]
    /// (SQLite's `xInverse` and `xValue`): then, as a window function, one state slides
    /// over a partition's frames (rows stepped in as they enter, inverted as they leave,
    /// the value read for each row, `finish` once at the end, its result unused). Without
    /// them each row's frame is a fresh state stepped over it and finished.
    fn slides(&self) -> bool {
        false
    }
}

/// The running state of a user aggregate over one group or window frame.
pub trait AggregateState: Send {
    /// Adds one row's arguments.
    fn step(&mut self, args: &[Value]) -> Result<()>;
    /// The result; the state is not used again.
    fn finish(&mut self) -> Result<Value>;
    /// Removes one row's arguments (see [`AggregateFunction::slides`]).
    fn inverse(&mut self, _args: &[Value]) -> Result<()> {
        Err(Error::Misuse("this aggregate has no inverse".into()))
    }
    /// The current frame's result, the state going on (see [`AggregateFunction::slides`]).
    fn value(&mut self) -> Result<Value> {
        Err(Error::Misuse("this aggregate has no value function".into()))
    }
}

/// A function registered on a connection.
#[derive(Clone)]
pub enum UserFunction {
    Scalar(Arc<ScalarFunction>),
    Aggregate(Arc<dyn AggregateFunction>),
}

impl fmt::Debug for UserFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            UserFunction::Scalar(_) => "UserFunction::Scalar",
            UserFunction::Aggregate(_) => "UserFunction::Aggregate",
        })
    }
}

/// A connection's registered functions (by lower-case name and argument count, -1 for
/// any) and collations (by upper-case name).
#[derive(Clone, Default)]
pub(crate) struct Registry {
    functions: HashMap<(String, i32), UserFunction>,
    collations: HashMap<String, (Collation, Arc<CollationFunction>)>,
    /// The most arguments a call may have (SQLITE_LIMIT_FUNCTION_ARG), when limited.
    pub max_args: Option<usize>,
}

impl Registry {
    pub fn set_function(&mut self, name: &str, n_args: i32, f: Option<UserFunction>) {
        let key = (name.to_ascii_lowercase(), n_args.max(-1));
        match f {
            Some(f) => self.functions.insert(key, f),
            None => self.functions.remove(&key),
        };
    }

    /// The function a call of `name` with `n` arguments means, if a registered one.
    pub fn function(&self, name: &str, n: usize) -> Option<&UserFunction> {
        if self.functions.is_empty() {
            return None;
        }
        let name = name.to_ascii_lowercase();
        self.functions
            .get(&(name.clone(), n as i32))
            .or_else(|| self.functions.get(&(name, -1)))
    }

    pub fn set_collation(&mut self, name: &str, f: Option<Arc<CollationFunction>>) {
        let key = name.to_ascii_uppercase();
        match f {
            Some(f) => {
                let mut all = COLLATIONS.write();
                all.push(Arc::downgrade(&f));
                let c = Collation::User(all.len() as u32 - 1);
                self.collations.insert(key, (c, f));
            }
            None => {
                self.collations.remove(&key);
            }
        }
    }

    pub fn collation(&self, name: &str) -> Option<Collation> {
        self.collations
            .get(&name.to_ascii_uppercase())
            .map(|(c, _)| *c)
    }
}

/// Every user collation registered in this process, by index.
static COLLATIONS: RwLock<Vec<Weak<CollationFunction>>> = RwLock::new(Vec::new());

/// Compares with user collation number `index`.
pub(crate) fn user_compare(index: u32, a: &str, b: &str) -> Ordering {
    let f = COLLATIONS.read()[index as usize].upgrade();
    match f {
        Some(f) => f(a, b),
        None => a.as_bytes().cmp(b.as_bytes()),
    }
}
