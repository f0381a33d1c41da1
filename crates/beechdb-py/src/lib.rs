//! BeechDB's key/value engine from Python: the `beechdb` extension module (pyo3, the stable
//! ABI, so one build imports into every CPython from 3.8).
//!
//! ```python
//! import beechdb
//! with beechdb.Env("mydb", transactional=True) as env:
//!     db = env.open_db("inventory")
//!     db[b"apple"] = b"12"
//!     with env.begin() as txn:          # commits at the end, aborts on an exception
//!         txn.put(db, b"banana", b"7")
//!     for key, value in db.items(start=b"a"):
//!         print(key, value)
//! ```
//!
//! Owns: the Python classes (`Env`, `Db`, `Txn`, `Savepoint`, `Items`) and the exception
//! hierarchy (`beechdb.Error` and one subclass per failure a caller acts on, each carrying
//! Berkeley DB's `code` and its `code_name`). May call: `beechdb`'s public API only.
//!
//! Invariants:
//! - every engine call that may wait (for I/O, a key lock, an fsync) runs with the GIL
//!   released, so Python threads write side by side;
//! - keys and values are `bytes` in and out; a closed environment, a finished transaction
//!   or a removed database gives `ClosedError`, never a crash;
//! - a handle holds what it needs (the engine's handles are reference-counted), so Python
//!   may drop them in any order.

// pyo3 0.22's `#[pymethods]` expansion converts each `PyResult` into itself.
#![allow(clippy::useless_conversion)]

use beechdb::{Config, Durability, Error as DbError, Isolation};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use std::ops::Bound as Edge;
use std::sync::Mutex;

create_exception!(
    beechdb,
    Error,
    PyException,
    "Any BeechDB failure; `code` is Berkeley DB's number for it (or an errno value)."
);

/// The subclasses of `beechdb.Error`, each declared once: the class, and its registration
/// in the module (`add_exceptions`).
macro_rules! exceptions {
    ($($name:ident: $doc:literal,)*) => {
        $(create_exception!(beechdb, $name, Error, $doc);)*

        fn add_exceptions(m: &Bound<'_, PyModule>) -> PyResult<()> {
            let py = m.py();
            m.add("Error", py.get_type_bound::<Error>())?;
            $(m.add(stringify!($name), py.get_type_bound::<$name>())?;)*
            Ok(())
        }
    };
}

exceptions! {
    KeyExistsError: "insert found the key there.",
    DeadlockError: "A deadlock, or a write conflict under snapshot isolation: abort and retry.",
    LockTimeoutError: "A key lock wait timed out.",
    NoSuchDatabaseError: "No database of that name.",
    DatabaseExistsError: "A database of that name exists.",
    CorruptError: "Stored data failed a check.",
    RunRecoveryError: "A write or sync failed: reopen the environment (it recovers).",
    ReadOnlyError: "A write where none is allowed.",
    ClosedError: "The environment is closed, the transaction finished, or the database removed.",
    LockedError: "Another handle holds the environment open.",
    InvalidArgumentError: "A bad argument.",
    IOError: "An I/O call failed.",
}

/// The Python exception for `e`, with `code` and `code_name` set.
fn to_py(e: DbError) -> PyErr {
    let (code, name) = e.code();
    let message = e.to_string();
    let err = match e {
        DbError::KeyExists => KeyExistsError::new_err(message),
        DbError::Conflict | DbError::Deadlock => DeadlockError::new_err(message),
        DbError::LockTimeout => LockTimeoutError::new_err(message),
        DbError::DbNotFound(_) => NoSuchDatabaseError::new_err(message),
        DbError::DbExists(_) => DatabaseExistsError::new_err(message),
        DbError::Corrupt { .. } => CorruptError::new_err(message),
        DbError::Poisoned { .. } => RunRecoveryError::new_err(message),
        DbError::ReadOnly => ReadOnlyError::new_err(message),
        DbError::Closed | DbError::TxnFinished | DbError::DbRemoved => {
            ClosedError::new_err(message)
        }
        DbError::Locked { .. } => LockedError::new_err(message),
        DbError::Io { .. } => IOError::new_err(message),
        DbError::InvalidArgument(_)
        | DbError::KeyTooLarge { .. }
        | DbError::ValueTooLarge { .. }
        | DbError::RecordTooLarge { .. } => InvalidArgumentError::new_err(message),
        _ => Error::new_err(message),
    };
    Python::with_gil(|py| {
        let value = err.value_bound(py);
        // Setting attributes on a fresh exception object cannot fail.
        let _ = value.setattr("code", code);
        let _ = value.setattr("code_name", name);
    });
    err
}

/// Runs `f` with the GIL released; its error as a Python exception.
fn unlocked<T: Send>(py: Python<'_>, f: impl Send + FnOnce() -> beechdb::Result<T>) -> PyResult<T> {
    py.allow_threads(f).map_err(to_py)
}

fn bytes(py: Python<'_>, b: &[u8]) -> PyObject {
    PyBytes::new_bound(py, b).into_any().unbind()
}

/// An environment: a directory of named databases.
#[pyclass(module = "beechdb")]
struct Env {
    /// `None` once closed.
    inner: Option<beechdb::Env>,
}

impl Env {
    fn env(&self) -> PyResult<&beechdb::Env> {
        self.inner.as_ref().ok_or_else(|| to_py(DbError::Closed))
    }
}

#[pymethods]
impl Env {
    /// Opens (creating unless `create=False`) the environment in directory `path`.
    /// `durability` ("sync", "write_nosync" or "nosync") is what a commit waits for in a
    /// transactional environment; `lock_timeout` (seconds) how long a transaction waits
    /// for a key another holds before `LockTimeoutError`.
    #[new]
    #[pyo3(signature = (path, *, transactional=false, durability="sync", cache_size=None,
                        in_memory_log=false, read_only=false, create=true, lock_timeout=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        transactional: bool,
        durability: &str,
        cache_size: Option<usize>,
        in_memory_log: bool,
        read_only: bool,
        create: bool,
        lock_timeout: Option<f64>,
    ) -> PyResult<Env> {
        let durability = match durability {
            "sync" => Durability::Sync,
            "write_nosync" => Durability::WriteNoSync,
            "nosync" => Durability::NoSync,
            other => {
                return Err(PyValueError::new_err(format!(
                    "durability {other:?}: \"sync\", \"write_nosync\" or \"nosync\""
                )))
            }
        };
        let mut config = Config::new()
            .transactional(transactional)
            .durability(durability)
            .in_memory_log(in_memory_log)
            .read_only(read_only)
            .create(create);
        if let Some(bytes) = cache_size {
            config = config.cache_size(bytes);
        }
        if let Some(secs) = lock_timeout {
            let t = std::time::Duration::try_from_secs_f64(secs).map_err(|_| {
                PyValueError::new_err(format!("lock_timeout {secs}: seconds, 0 or more"))
            })?;
            config = config.lock_timeout(t);
        }
        let env = unlocked(py, || beechdb::Env::open(&path, config))?;
        Ok(Env { inner: Some(env) })
    }

    /// The database `name`; created if absent unless `create=False`
    /// (`NoSuchDatabaseError` then).
    #[pyo3(signature = (name, create=true))]
    fn open_db(&self, py: Python<'_>, name: &str, create: bool) -> PyResult<Db> {
        let env = self.env()?;
        let db = match create {
            true => unlocked(py, || env.open_or_create_db(name))?,
            false => unlocked(py, || env.open_db(name))?,
        };
        Ok(Db { inner: db })
    }

    /// Removes database `name` and everything in it.
    fn remove_db(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        let env = self.env()?;
        unlocked(py, || env.remove_db(name))
    }

    /// The names of the databases.
    fn db_names(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let env = self.env()?;
        unlocked(py, || env.db_names())
    }

    /// Begins a transaction (a snapshot, or each read the latest commit with
    /// `read_committed=True`). As a context manager it commits at the end of the block and
    /// aborts if the block raises.
    #[pyo3(signature = (read_committed=false))]
    fn begin(&self, py: Python<'_>, read_committed: bool) -> PyResult<Txn> {
        let env = self.env()?;
        let txn = match read_committed {
            true => unlocked(py, || env.begin_txn_with(Isolation::ReadCommitted))?,
            false => unlocked(py, || env.begin_txn())?,
        };
        Ok(Txn { inner: txn })
    }

    /// Makes every change so far durable (a checkpoint).
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        let env = self.env()?;
        unlocked(py, || env.sync())
    }

    /// The environment's statistics, as `beech stat` prints them.
    fn stat(&self, py: Python<'_>) -> PyResult<String> {
        let env = self.env()?;
        unlocked(py, || env.stat()).map(|s| s.to_string())
    }

    /// Makes everything durable and closes; every handle of the environment raises
    /// `ClosedError` afterwards. Closing a closed environment does nothing.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        match self.inner.take() {
            Some(env) => unlocked(py, || env.close()),
            None => Ok(()),
        }
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_none()
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&mut self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }
}

/// A database: sorted `bytes` keys to `bytes` values. Each write outside a transaction is
/// a transaction of its own (in a transactional environment).
#[pyclass(module = "beechdb")]
struct Db {
    inner: beechdb::Db,
}

#[pymethods]
impl Db {
    #[getter]
    fn name(&self) -> String {
        self.inner.name().to_string()
    }

    /// The value under `key`, or `None`.
    fn get(&self, py: Python<'_>, key: &[u8]) -> PyResult<Option<PyObject>> {
        let v = unlocked(py, || self.inner.get(key))?;
        Ok(v.map(|v| bytes(py, &v)))
    }

    /// Stores `value` under `key`, replacing what was there.
    fn put(&self, py: Python<'_>, key: &[u8], value: &[u8]) -> PyResult<()> {
        unlocked(py, || self.inner.put(key, value))
    }

    /// Stores `value` under `key` only if the key is absent (`KeyExistsError` otherwise).
    fn insert(&self, py: Python<'_>, key: &[u8], value: &[u8]) -> PyResult<()> {
        unlocked(py, || self.inner.insert(key, value))
    }

    /// Removes `key`; returns whether it was there.
    fn delete(&self, py: Python<'_>, key: &[u8]) -> PyResult<bool> {
        unlocked(py, || self.inner.delete(key))
    }

    /// The pairs from `start` (included) to `stop` (excluded), in key order, or in reverse.
    #[pyo3(signature = (start=None, stop=None, reverse=false))]
    fn items(&self, start: Option<Vec<u8>>, stop: Option<Vec<u8>>, reverse: bool) -> Items {
        self.scan(start, stop, reverse, false)
    }

    /// The keys from `start` to `stop`, as `items` orders them.
    #[pyo3(signature = (start=None, stop=None, reverse=false))]
    fn keys(&self, start: Option<Vec<u8>>, stop: Option<Vec<u8>>, reverse: bool) -> Items {
        self.scan(start, stop, reverse, true)
    }

    fn __getitem__(&self, py: Python<'_>, key: &[u8]) -> PyResult<PyObject> {
        self.get(py, key)?
            .ok_or_else(|| PyKeyError::new_err(bytes(py, key)))
    }

    fn __setitem__(&self, py: Python<'_>, key: &[u8], value: &[u8]) -> PyResult<()> {
        self.put(py, key, value)
    }

    fn __delitem__(&self, py: Python<'_>, key: &[u8]) -> PyResult<()> {
        match self.delete(py, key)? {
            true => Ok(()),
            false => Err(PyKeyError::new_err(bytes(py, key))),
        }
    }

    fn __contains__(&self, py: Python<'_>, key: &[u8]) -> PyResult<bool> {
        unlocked(py, || self.inner.contains(key))
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        let n = unlocked(py, || self.inner.len())?;
        Ok(n as usize)
    }

    fn __iter__(&self) -> Items {
        self.scan(None, None, false, true)
    }
}

impl Db {
    fn scan(
        &self,
        start: Option<Vec<u8>>,
        stop: Option<Vec<u8>>,
        reverse: bool,
        keys_only: bool,
    ) -> Items {
        let range = bounds(start, stop);
        let it = match reverse {
            false => self.inner.range(range),
            true => self.inner.range_rev(range),
        };
        Items::new(Scan::Db(it), keys_only)
    }
}

/// A key range from optional ends: `start` included, `stop` excluded.
fn bounds(start: Option<Vec<u8>>, stop: Option<Vec<u8>>) -> (Edge<Vec<u8>>, Edge<Vec<u8>>) {
    (
        start.map_or(Edge::Unbounded, Edge::Included),
        stop.map_or(Edge::Unbounded, Edge::Excluded),
    )
}

/// A transaction. Writes are its own until `commit`; reads see a snapshot plus its writes.
#[pyclass(module = "beechdb")]
struct Txn {
    inner: beechdb::Txn,
}

#[pymethods]
impl Txn {
    /// The value under `key` in `db` as this transaction sees it, or `None`.
    fn get(&self, py: Python<'_>, db: PyRef<'_, Db>, key: &[u8]) -> PyResult<Option<PyObject>> {
        let db = &db.inner;
        let v = unlocked(py, || self.inner.get(db, key))?;
        Ok(v.map(|v| bytes(py, &v)))
    }

    /// As `get`, locking the key first, so no other transaction writes it before this one
    /// ends.
    fn get_for_update(
        &self,
        py: Python<'_>,
        db: PyRef<'_, Db>,
        key: &[u8],
    ) -> PyResult<Option<PyObject>> {
        let db = &db.inner;
        let v = unlocked(py, || self.inner.get_for_update(db, key))?;
        Ok(v.map(|v| bytes(py, &v)))
    }

    fn put(&self, py: Python<'_>, db: PyRef<'_, Db>, key: &[u8], value: &[u8]) -> PyResult<()> {
        let db = &db.inner;
        unlocked(py, || self.inner.put(db, key, value))
    }

    /// Removes `key` from `db`; returns whether it was there.
    fn delete(&self, py: Python<'_>, db: PyRef<'_, Db>, key: &[u8]) -> PyResult<bool> {
        let db = &db.inner;
        unlocked(py, || self.inner.delete(db, key))
    }

    /// The pairs of `db` from `start` to `stop` as this transaction sees them (its own writes
    /// included, also those made while iterating).
    #[pyo3(signature = (db, start=None, stop=None, reverse=false))]
    fn items(
        &self,
        db: PyRef<'_, Db>,
        start: Option<Vec<u8>>,
        stop: Option<Vec<u8>>,
        reverse: bool,
    ) -> Items {
        let range = bounds(start, stop);
        let it = match reverse {
            false => self.inner.range(&db.inner, range),
            true => self.inner.range_rev(&db.inner, range),
        };
        Items::new(Scan::Txn(it), false)
    }

    /// A point to roll back to without ending the transaction.
    fn savepoint(&self, py: Python<'_>) -> PyResult<Savepoint> {
        let sp = unlocked(py, || self.inner.savepoint())?;
        Ok(Savepoint {
            inner: Mutex::new(Some(sp)),
        })
    }

    /// Undoes the writes made since `savepoint` (which stays usable).
    fn rollback_to(&self, py: Python<'_>, savepoint: PyRef<'_, Savepoint>) -> PyResult<()> {
        let sp = savepoint.inner.lock().unwrap_or_else(|p| p.into_inner());
        let sp = sp.as_ref().ok_or_else(|| to_py(DbError::TxnFinished))?;
        unlocked(py, || self.inner.rollback_to(sp))
    }

    /// Forgets `savepoint`, keeping the writes made since.
    fn release(&self, py: Python<'_>, savepoint: PyRef<'_, Savepoint>) -> PyResult<()> {
        let sp = savepoint
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let sp = sp.ok_or_else(|| to_py(DbError::TxnFinished))?;
        unlocked(py, || self.inner.release(sp))
    }

    /// Commits with the environment's durability; returns the commit's log position.
    fn commit(&self, py: Python<'_>) -> PyResult<u64> {
        unlocked(py, || self.inner.commit())
    }

    /// Rolls back. Aborting a finished transaction does nothing.
    fn abort(&self) {
        self.inner.abort();
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (exc_type, _exc_value, _traceback))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc_value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        match exc_type {
            Some(t) if !t.is_none() => self.abort(),
            // Committed (or aborted) in the block already: nothing is left to do.
            _ => match py.allow_threads(|| self.inner.commit()) {
                Ok(_) | Err(DbError::TxnFinished) => {}
                Err(e) => return Err(to_py(e)),
            },
        }
        Ok(false)
    }
}

/// A savepoint of a transaction.
#[pyclass(module = "beechdb")]
struct Savepoint {
    /// `None` once released.
    inner: Mutex<Option<beechdb::Savepoint>>,
}

enum Scan {
    Db(beechdb::Iter),
    Txn(beechdb::TxnIter),
}

/// An iterator over pairs (or keys) of a database.
#[pyclass(module = "beechdb")]
struct Items {
    scan: Scan,
    keys_only: bool,
}

impl Items {
    fn new(scan: Scan, keys_only: bool) -> Items {
        Items { scan, keys_only }
    }
}

#[pymethods]
impl Items {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        let scan = &mut self.scan;
        let next = py.allow_threads(|| match scan {
            Scan::Db(it) => it.next(),
            Scan::Txn(it) => it.next(),
        });
        let Some(pair) = next else {
            return Ok(None);
        };
        let (k, v) = pair.map_err(to_py)?;
        Ok(Some(match self.keys_only {
            true => bytes(py, &k),
            false => (bytes(py, &k), bytes(py, &v)).into_py(py),
        }))
    }
}

#[pymodule]
#[pyo3(name = "beechdb")]
fn beechdb_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<Env>()?;
    m.add_class::<Db>()?;
    m.add_class::<Txn>()?;
    m.add_class::<Savepoint>()?;
    m.add_class::<Items>()?;
    add_exceptions(m)?;
    Ok(())
}
