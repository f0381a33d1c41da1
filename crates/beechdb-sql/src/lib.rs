//! BeechDB's SQL layer: SQLite's dialect and semantics over BeechDB's transactional engine,
//! with many connections writing at once.
//!
//! A [`Database`] is an environment (in memory only for `:memory:`); each
//! [`Connection`] runs statements in engine transactions: autocommit statements each in
//! their own, `BEGIN ... COMMIT` in one. Statement-level atomicity inside a transaction is a
//! savepoint per statement. Write-write conflicts are [`Error::BusySnapshot`] or
//! [`Error::Busy`] (SQLite's SQLITE_BUSY family): roll back and retry; autocommit
//! statements retry themselves within the busy timeout.
//!
//! ```
//! use beechdb_sql::{Database, Value};
//! let db = Database::open_in_memory()?;
//! let mut conn = db.connect();
//! conn.execute_batch("CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT); INSERT INTO t(b) VALUES ('x'), ('y');")?;
//! let rows = conn.query("SELECT a, b FROM t WHERE b = ?", &[Value::from("y")])?;
//! assert_eq!(rows.rows, vec![vec![Value::Integer(2), Value::from("y")]]);
//! # Ok::<(), beechdb_sql::Error>(())
//! ```
//!
//! Modules: `parse` (SQL text to `ast`), `schema` (the catalog), `record` (row and key
//! encodings), `exec` (queries), `dml` (changes), `func` and `date` (built-in functions),
//! `value` (SQLite's type system).

mod alter;
mod ast;

/// Runs `f`, moving first to a new stack segment when less than [`RED_ZONE`] of the
/// current one is left. The steps that recurse once per level of nested SQL (converting a
/// parsed statement, planning it, evaluating its expressions) call it, so that a
/// statement nested as deep as allowed (`parse::MAX_DEPTH`) runs on a thread of any stack
/// size; a level costs a comparison of the stack pointer while the stack lasts.
pub(crate) fn deep<T>(f: impl FnOnce() -> T) -> T {
    stacker::maybe_grow(RED_ZONE, STACK_SEGMENT, f)
}

/// Runs `f`, which recurses up to `levels` deep over nested SQL outside [`deep`]'s care
/// (rendering a parsed expression, planning and running a statement), on a stack with
/// room for that many levels: the current one when they are few, else a new one.
pub(crate) fn with_stack_for<T>(levels: usize, f: impl FnOnce() -> T) -> T {
    if levels <= SHALLOW_LEVELS {
        return f();
    }
    stacker::grow(levels * STACK_PER_LEVEL + RED_ZONE, f)
}

/// Levels of nesting any thread's stack has room for (statements this deep or shallower,
/// all but machine-made ones, run where they are).
const SHALLOW_LEVELS: usize = 64;
/// Stack one level of nesting may take, its conversion, planning and evaluation together.
const STACK_PER_LEVEL: usize = 16 << 10;

/// Stack left below which [`deep`] moves to a new segment: more than the deepest
/// single level's frames take.
const RED_ZONE: usize = 128 << 10;
/// The size of a segment [`deep`] adds.
const STACK_SEGMENT: usize = 2 << 20;
mod date;
mod dml;
mod error;
mod exec;
mod func;
pub mod functions;
mod introspect;
mod json;
mod math;
mod parse;
mod printf;
mod reads;
mod record;
mod schema;
pub mod slt;
mod value;

pub use error::{codes, ConstraintKind, Error, Result};
pub use math::{compile_option_used, COMPILE_OPTIONS};

/// The version of SQLite whose dialect this layer follows (`sqlite_version()`).
pub const SQLITE_VERSION: &str = "3.46.0";
pub use exec::QueryResult;
pub use functions::{
    AggregateFunction, AggregateState, CollationFunction, ScalarFunction, UserFunction,
};
#[doc(hidden)]
pub use json::check_path_read;
pub use value::Value;

use ast::{BeginKind, Stmt};
use beechdb::{Config, Db, Durability, Env, Txn};
use functions::Registry;
use parking_lot::RwLock;
use schema::{Schema, SCHEMA_DB};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Shared {
    env: Env,
    /// The committed schema; connections take a copy per transaction.
    schema: RwLock<Arc<Schema>>,
    /// The next rowid of each table (see `dml.rs`, `new_rowid`).
    rowids: parking_lot::Mutex<rustc_hash::FxHashMap<String, i64>>,
}

/// A SQL database: an environment (a directory, a file, or memory), shared by any number
/// of connections.
#[derive(Clone)]
pub struct Database {
    shared: Arc<Shared>,
}

impl Database {
    /// Opens (creating if missing) the database in directory `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Database> {
        Database::open_with(path, Config::new())
    }

    /// Opens with an engine configuration (made transactional).
    pub fn open_with(path: impl AsRef<Path>, config: Config) -> Result<Database> {
        let env = Env::open(path, config.transactional(true))?;
        Database::from_env(env)
    }

    /// Opens (creating if missing or empty) the database kept in the file `path`, with its
    /// log beside it (`PATH-log.0000000001`, ...), as SQLite keeps a database; see
    /// [`Env::open_file`].
    pub fn open_file(path: impl AsRef<Path>) -> Result<Database> {
        // Segments of 8 MiB, not 64: a small database is a small file and a small log.
        let env = Env::open_file(
            path,
            Config::new().transactional(true).log_segment_size(8 << 20),
        )?;
        Database::from_env(env)
    }

    /// A database in this process's memory, gone when the last handle goes (SQLite's
    /// `:memory:`): no file, no fsync.
    pub fn open_in_memory() -> Result<Database> {
        let env = Env::open_with_storage(
            Arc::new(beechdb::storage::RamStorage::new()),
            Config::new()
                .in_memory_log(true)
                .durability(Durability::NoSync)
                .cache_size(16 << 20),
        )?;
        Database::from_env(env)
    }

    fn from_env(env: Env) -> Result<Database> {
        let db = match env.open_db(SCHEMA_DB) {
            Ok(db) => db,
            Err(beechdb::Error::DbNotFound(_)) => env.open_or_create_db(SCHEMA_DB)?,
            Err(e) => return Err(e.into()),
        };
        let schema = load_schema(&env, &db)?;
        Ok(Database {
            shared: Arc::new(Shared {
                env,
                schema: RwLock::new(Arc::new(schema)),
                rowids: Default::default(),
            }),
        })
    }

    /// Closes the database: its environment checkpointed, so that its file holds every
    /// commit, and released (see `beechdb::Env::close`). Fails with [`Error::Misuse`], and
    /// closes nothing, while another handle or connection to it is open.
    pub fn close(self) -> Result<()> {
        match Arc::try_unwrap(self.shared) {
            Ok(shared) => Ok(shared.env.close()?),
            Err(_) => Err(Error::Misuse(
                "the database has other handles or connections open".into(),
            )),
        }
    }

    /// A new connection.
    pub fn connect(&self) -> Connection {
        Connection {
            shared: self.shared.clone(),
            txn: None,
            schema: self.shared.schema.read().clone(),
            savepoints: Vec::new(),
            txn_rowids: Vec::new(),
            txn_max_rowids: Default::default(),
            dbs: Default::default(),
            dbs_schema: Default::default(),
            last_rowid: 0,
            changes: 0,
            total_changes: 0,
            busy_timeout: Duration::from_secs(5),
            schema_changed: false,
            foreign_keys: false,
            synchronous: None,
            registry: Registry::default(),
            interrupted: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The engine environment underneath.
    pub fn env(&self) -> &Env {
        &self.shared.env
    }
}

fn load_schema(env: &Env, db: &Db) -> Result<Schema> {
    Schema::read(&env.begin_txn()?, db)
}

/// A connection: runs statements, one transaction at a time. May be moved between
/// threads; use one per thread for concurrency.
pub struct Connection {
    shared: Arc<Shared>,
    /// The explicit transaction (`BEGIN`), if one is open.
    txn: Option<Txn>,
    schema: Arc<Schema>,
    savepoints: Vec<NamedSavepoint>,
    /// The rowids the open transaction took (given back if it rolls back).
    txn_rowids: Vec<exec::TakenRowids>,
    /// The transaction's known largest rowids (see `exec::Exec::max_rowids`).
    txn_max_rowids: rustc_hash::FxHashMap<String, Option<i64>>,
    dbs: rustc_hash::FxHashMap<String, Db>,
    /// The schema `dbs` was filled under, between auto-commit statements.
    dbs_schema: Arc<Schema>,
    last_rowid: i64,
    changes: u64,
    total_changes: u64,
    busy_timeout: Duration,
    schema_changed: bool,
    /// `PRAGMA foreign_keys` (off by default, as in SQLite).
    foreign_keys: bool,
    /// `PRAGMA synchronous`'s level (0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA), once set: the
    /// durability of this connection's commits (`synchronous_durability`).
    synchronous: Option<u8>,
    /// Functions and collations the application registered.
    registry: Registry,
    /// Set by an [`Interrupter`]: the running statement stops with [`Error::Interrupted`].
    interrupted: Arc<AtomicBool>,
}

/// A savepoint by name (`SAVEPOINT name`), and what `ROLLBACK TO name` puts back.
struct NamedSavepoint {
    name: String,
    mark: beechdb::Savepoint,
    /// Whether it began the transaction (its RELEASE commits).
    began: bool,
    schema: Arc<Schema>,
    rowids: Vec<exec::TakenRowids>,
}

/// Stops whatever statement a connection is running, from any thread (SQLite's
/// `sqlite3_interrupt`).
#[derive(Clone)]
pub struct Interrupter(Arc<AtomicBool>);

impl Interrupter {
    pub fn interrupt(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A prepared statement: parsed once, run many times with parameters.
#[derive(Debug, Clone)]
pub struct Statement {
    stmt: Stmt,
    params: Vec<Option<String>>,
    explain: bool,
    /// How deep it nests (see `parse::Parsed::depth`).
    depth: usize,
    /// See `parse::Parsed::quoted`.
    quoted: Arc<[String]>,
    /// Plans kept between runs (shared by clones: they name the same `PlanId`s).
    plans: Arc<exec::PlanCache>,
}

impl From<parse::Parsed> for Statement {
    fn from(p: parse::Parsed) -> Statement {
        Statement {
            stmt: p.stmt,
            params: p.params,
            explain: p.explain,
            depth: p.depth,
            quoted: p.quoted.into(),
            plans: Default::default(),
        }
    }
}

impl Statement {
    /// Number of parameters (the largest index).
    pub fn parameter_count(&self) -> usize {
        self.params.len()
    }

    /// The name of parameter `i` (1-based) with its sigil; `None` for `?` and out of range.
    pub fn parameter_name(&self, i: usize) -> Option<&str> {
        self.params.get(i.checked_sub(1)?)?.as_deref()
    }

    /// The index (1-based) of the named parameter `name` (with its sigil: `:x`, `@x`, `$x`).
    pub fn parameter_index(&self, name: &str) -> Option<usize> {
        self.params
            .iter()
            .position(|p| p.as_deref() == Some(name))
            .map(|i| i + 1)
    }

    /// What the statement does, as SQLite's authorizer sees it: `(action code, first
    /// argument, second argument)` with SQLite's `SQLITE_*` action numbers, at the level of
    /// the statement (its kind, the table it changes, the columns it sets); reads of
    /// single columns are not reported.
    pub fn authorizer_actions(&self) -> Vec<(i32, Option<String>, Option<String>)> {
        use ast::ObjectKind as K;
        let s = |x: &str| Some(x.to_string());
        match &self.stmt {
            Stmt::Select(_) => vec![(21, None, None)],
            Stmt::Insert(i) => vec![(18, s(&i.table), None)],
            Stmt::Update(u) => u
                .sets
                .iter()
                .flat_map(|(cols, _)| cols.iter().map(|c| (23, s(&u.table), s(c))))
                .collect(),
            Stmt::Delete { table, .. } => vec![(9, s(table), None)],
            Stmt::CreateTable(t) => vec![(2, s(&t.name), None)],
            Stmt::CreateIndex { name, table, .. } => vec![(1, s(name), s(table))],
            Stmt::CreateView { name, .. } => vec![(8, s(name), None)],
            Stmt::CreateTrigger(t) => vec![(7, s(&t.name), s(&t.table))],
            Stmt::Drop { kind, name, .. } => {
                let code = match kind {
                    K::Table => 11,
                    K::Index => 10,
                    K::View => 17,
                    K::Trigger => 16,
                };
                vec![(code, s(name), None)]
            }
            Stmt::Reindex(name) => vec![(27, name.clone(), None)],
            Stmt::Begin(_) => vec![(22, s("BEGIN"), None)],
            Stmt::Commit => vec![(22, s("COMMIT"), None)],
            Stmt::Rollback(None) => vec![(22, s("ROLLBACK"), None)],
            Stmt::Rollback(Some(n)) => vec![(32, s("ROLLBACK"), s(n))],
            Stmt::Savepoint(n) => vec![(32, s("BEGIN"), s(n))],
            Stmt::Release(n) => vec![(32, s("RELEASE"), s(n))],
            Stmt::Pragma { name, value } => {
                let arg = match value {
                    Some(ast::Expr::Literal(v)) => Some(v.to_text()),
                    _ => None,
                };
                vec![(19, s(name), arg)]
            }
            Stmt::AlterTable { table, .. } => vec![(26, s("main"), s(table))],
        }
    }

    /// Whether the statement changes nothing stored (as SQLite counts: queries, and the
    /// transaction control statements).
    pub fn readonly(&self) -> bool {
        self.explain
            || matches!(
                self.stmt,
                Stmt::Select(_)
                    | Stmt::Begin(_)
                    | Stmt::Commit
                    | Stmt::Rollback(_)
                    | Stmt::Savepoint(_)
                    | Stmt::Release(_)
            )
    }
}

impl Connection {
    /// Parses the first statement of `sql`.
    pub fn prepare(&self, sql: &str) -> Result<Statement> {
        match parse::parse_with(sql, &self.registry)? {
            Some(p) => Ok(Statement::from(p)),
            None => Err(Error::Misuse("no SQL statement".into())),
        }
    }

    /// Parses the first statement of `sql`; returns it and the bytes it took (`None` when
    /// only spaces, comments and semicolons remain).
    pub fn prepare_first(&self, sql: &str) -> Result<Option<(Statement, usize)>> {
        Ok(parse::parse_with(sql, &self.registry)?.map(|p| {
            let consumed = p.consumed;
            (Statement::from(p), consumed)
        }))
    }

    /// Runs every statement of `sql` in order, stopping at the first error.
    pub fn execute_batch(&mut self, sql: &str) -> Result<()> {
        let mut rest = sql;
        while let Some(p) = parse::parse_with(rest, &self.registry)? {
            rest = &rest[p.consumed..];
            self.run(&Statement::from(p), &[])?;
        }
        Ok(())
    }

    /// Runs one statement; returns the rows it changed.
    pub fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64> {
        let stmt = self.prepare(sql)?;
        self.run(&stmt, params)?;
        Ok(self.changes)
    }

    /// Runs one query; returns its rows.
    pub fn query(&mut self, sql: &str, params: &[Value]) -> Result<QueryResult> {
        let stmt = self.prepare(sql)?;
        self.run(&stmt, params)
    }

    pub fn changes(&self) -> u64 {
        self.changes
    }

    pub fn total_changes(&self) -> u64 {
        self.total_changes
    }

    pub fn last_insert_rowid(&self) -> i64 {
        self.last_rowid
    }

    /// Whether no explicit transaction is open.
    pub fn is_autocommit(&self) -> bool {
        self.txn.is_none()
    }

    /// The commit the open transaction reads from (an LSN: a later commit to the database
    /// makes it larger), or `None` outside a transaction. Two transactions that report the
    /// same value read the same data, which is how a backup taken in steps notices a change.
    pub fn snapshot_lsn(&self) -> Option<u64> {
        self.txn.as_ref().and_then(Txn::snapshot_lsn)
    }

    /// Moves the connection to database `db`, keeping its settings, functions and
    /// collations (how `sqlite3_deserialize` reopens a connection on a new image).
    /// Statements prepared before are planned again against `db`'s schema. Refused with
    /// [`Error::Misuse`] inside a transaction.
    pub fn use_database(&mut self, db: &Database) -> Result<()> {
        if self.txn.is_some() {
            return Err(Error::Misuse(
                "cannot move a connection to another database inside a transaction".into(),
            ));
        }
        self.shared = db.shared.clone();
        self.dbs.clear();
        self.take_schema();
        self.schema_changed = false;
        Ok(())
    }

    /// Registers (or with `None` removes) function `name` taking `n_args` arguments (-1:
    /// any number). Statements prepared afterwards call it instead of a built-in function
    /// of the same name.
    pub fn create_function(&mut self, name: &str, n_args: i32, f: Option<UserFunction>) {
        self.registry.set_function(name, n_args, f);
    }

    /// The table columns `stmt` reads (table, column), as SQLite's authorizer is asked
    /// about them (`SQLITE_READ`): resolved in the schema this connection sees (the latest
    /// committed one outside a transaction). It may name a column the statement does not
    /// end up reading, never misses one it reads.
    pub fn column_reads(&mut self, stmt: &Statement) -> Vec<(String, String)> {
        if self.txn.is_none() {
            self.take_schema();
        }
        reads::column_reads(&stmt.stmt, &self.schema)
    }

    /// Limits the arguments a function call may have in statements prepared from now on
    /// (`None`: no limit), as SQLite's `SQLITE_LIMIT_FUNCTION_ARG`.
    pub fn set_function_arg_limit(&mut self, max: Option<usize>) {
        self.registry.max_args = max;
    }

    /// Registers (or with `None` removes) collation `name`, usable in `COLLATE` clauses of
    /// expressions and ORDER BY (not in table or index definitions).
    pub fn create_collation(&mut self, name: &str, f: Option<Arc<CollationFunction>>) {
        self.registry.set_collation(name, f);
    }

    /// A handle that interrupts this connection's running statement from another thread.
    pub fn interrupter(&self) -> Interrupter {
        Interrupter(self.interrupted.clone())
    }

    /// How long an autocommit statement retries after a write conflict (default 5 s).
    pub fn set_busy_timeout(&mut self, t: Duration) {
        self.busy_timeout = t;
    }

    /// How long a statement waits out a conflict (`set_busy_timeout`; 5 s by default).
    pub fn busy_timeout(&self) -> Duration {
        self.busy_timeout
    }

    /// Runs a prepared statement with `params` (1-based positions); returns its rows (none
    /// for statements that return none).
    pub fn run(&mut self, stmt: &Statement, params: &[Value]) -> Result<QueryResult> {
        let levels = stmt.depth.max(self.schema.deepest);
        with_stack_for(levels, || self.run_here(stmt, params))
    }

    fn run_here(&mut self, stmt: &Statement, params: &[Value]) -> Result<QueryResult> {
        self.interrupted.store(false, Ordering::Relaxed);
        if stmt.explain {
            return self.explain(stmt, params);
        }
        match &stmt.stmt {
            Stmt::Begin(kind) => return self.begin(*kind),
            Stmt::Commit => return self.commit().map(|()| QueryResult::default()),
            Stmt::Rollback(None) => return self.rollback().map(|()| QueryResult::default()),
            Stmt::Rollback(Some(name)) => return self.rollback_to(name),
            Stmt::Savepoint(name) => return self.savepoint(name),
            Stmt::Release(name) => return self.release(name),
            Stmt::Pragma { name, value } => return self.pragma(name, value.as_ref()),
            _ => {}
        }
        if self.txn.is_some() {
            // Inside a transaction: the statement's own effects undone if it fails.
            let txn = self.txn.take().expect("checked");
            let sp = txn.savepoint()?;
            let schema = self.schema.clone();
            let r = self.exec(&txn, stmt, params);
            match &r {
                Ok(_) => txn.release(sp)?,
                Err(e) if e.is_busy() => {}
                Err(_) => {
                    txn.rollback_to(&sp)?;
                    self.schema = schema;
                }
            }
            self.txn = Some(txn);
            if let Err(e) = &r {
                let conflict = match &stmt.stmt {
                    Stmt::Insert(i) => i.conflict,
                    Stmt::Update(u) => u.conflict,
                    _ => ast::Conflict::Abort,
                };
                let or_rollback =
                    conflict == ast::Conflict::Rollback && matches!(e, Error::Constraint(..));
                // After a conflict the transaction can only roll back; OR ROLLBACK rolls it
                // back at a constraint.
                if e.is_busy() || or_rollback {
                    self.rollback()?;
                }
            }
            return r;
        }
        // Autocommit: a transaction of its own, retried on conflicts within the timeout.
        let started = Instant::now();
        let mut backoff = Duration::from_micros(50);
        loop {
            self.take_schema();
            let txn = self.shared.env.begin_txn()?;
            let r = self.exec(&txn, stmt, params).and_then(|res| {
                self.commit_txn(&txn)?;
                Ok(res)
            });
            let taken = self.end_txn_rowids();
            let r = match r {
                Ok(res) => {
                    self.publish_schema()?;
                    Ok(res)
                }
                Err(e) => {
                    txn.abort();
                    self.give_back_rowids(&taken);
                    self.dbs.clear();
                    self.schema = self.shared.schema.read().clone();
                    self.schema_changed = false;
                    Err(e)
                }
            };
            match r {
                Err(e) if e.is_busy() && started.elapsed() < self.busy_timeout => {
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_millis(20));
                }
                r => {
                    // A committed statement's handles stay valid while the schema does.
                    if r.is_err() || !Arc::ptr_eq(&self.schema, &self.dbs_schema) {
                        self.dbs.clear();
                    }
                    return r;
                }
            }
        }
    }

    /// EXPLAIN QUERY PLAN (and EXPLAIN): the access path of each table, read and changing
    /// nothing.
    fn explain(&mut self, stmt: &Statement, params: &[Value]) -> Result<QueryResult> {
        let mut result = QueryResult {
            rows: Vec::new(),
            ..QueryResult::named(&["id", "parent", "notused", "detail"])
        };
        let (lines, _) = self.dry_run(stmt, params)?;
        for (i, l) in lines.into_iter().enumerate() {
            result
                .rows
                .push(vec![(i as i64 + 2).into(), 0.into(), 0.into(), l.into()]);
        }
        Ok(result)
    }

    /// The names and declared types of the columns a statement returns, known without
    /// running it (SQLite's `sqlite3_column_count` / `_name` / `_decltype` before the first
    /// step). Empty for statements that return no rows or whose rows depend on running
    /// them (RETURNING, PRAGMA).
    pub fn describe(&mut self, stmt: &Statement) -> Result<QueryResult> {
        if stmt.explain {
            return self.explain(stmt, &[]).map(|mut r| {
                r.rows.clear();
                r
            });
        }
        let params = vec![Value::Null; stmt.parameter_count()];
        Ok(self.dry_run(stmt, &params)?.1.unwrap_or_default())
    }

    /// Plans `stmt` without reading or changing anything: the plan's lines, and for a
    /// SELECT its (empty) result with the column names.
    fn dry_run(
        &mut self,
        stmt: &Statement,
        params: &[Value],
    ) -> Result<(Vec<String>, Option<QueryResult>)> {
        if !matches!(
            stmt.stmt,
            Stmt::Select(_) | Stmt::Update(_) | Stmt::Delete { .. } | Stmt::Insert(_)
        ) {
            return Ok((Vec::new(), None));
        }
        let own = match &self.txn {
            Some(_) => None,
            None => {
                // Outside a transaction, the schema other connections have committed since.
                self.take_schema();
                Some(self.shared.env.begin_txn()?)
            }
        };
        let txn = own.as_ref().or(self.txn.as_ref()).expect("a transaction");
        let mut last_rowid = self.last_rowid;
        let mut schema = self.schema.clone();
        let mut dbs = std::mem::take(&mut self.dbs);
        let mut ex = exec::Exec {
            env: &self.shared.env,
            txn,
            schema: &mut schema,
            params,
            last_rowid: &mut last_rowid,
            changes: 0,
            connection_changes: (self.changes, self.total_changes),
            trigger_depth: 0,
            trigger_changes: 0,
            dbs: &mut dbs,
            returned: QueryResult::default(),
            rowids: &self.shared.rowids,
            taken_rowids: Vec::new(),
            max_rowids: Default::default(),
            foreign_keys: self.foreign_keys,
            plan: Some(Vec::new()),
            ctes: Vec::new(),
            interrupted: &self.interrupted,
            plans: Some(&stmt.plans),
            subqueries: Default::default(),
            scoped_plans: Default::default(),
            top_gate: None,
            kept_scans: Default::default(),
            quoted: &stmt.quoted,
            expanding: Default::default(),
            planned_ctes: Default::default(),
        };
        let mut described = None;
        let r = match &stmt.stmt {
            Stmt::Select(s) => ex.select(s, None).map(|r| described = Some(r)),
            Stmt::Update(u) => ex.update(u, None).map(drop),
            Stmt::Delete {
                with,
                table,
                where_,
                plan,
                ..
            } => ex
                .with_ctes(with, None, |ex| {
                    ex.delete(table, where_.as_ref(), &[], None, *plan)
                })
                .map(drop),
            Stmt::Insert(i) => ex.insert(i, None).map(drop),
            _ => Ok(()),
        };
        let lines = ex.plan.take().unwrap_or_default();
        self.dbs = dbs;
        if let Some(t) = own {
            t.abort();
            self.dbs.clear();
        }
        r?;
        Ok((lines, described))
    }

    fn exec(&mut self, txn: &Txn, stmt: &Statement, params: &[Value]) -> Result<QueryResult> {
        let schema_before = Arc::as_ptr(&self.schema);
        let mut ex = exec::Exec {
            env: &self.shared.env,
            txn,
            schema: &mut self.schema,
            params,
            last_rowid: &mut self.last_rowid,
            changes: 0,
            connection_changes: (self.changes, self.total_changes),
            trigger_depth: 0,
            trigger_changes: 0,
            dbs: &mut self.dbs,
            returned: QueryResult::default(),
            rowids: &self.shared.rowids,
            taken_rowids: Vec::new(),
            max_rowids: std::mem::take(&mut self.txn_max_rowids),
            foreign_keys: self.foreign_keys,
            plan: None,
            ctes: Vec::new(),
            interrupted: &self.interrupted,
            plans: Some(&stmt.plans),
            subqueries: Default::default(),
            scoped_plans: Default::default(),
            top_gate: None,
            kept_scans: Default::default(),
            quoted: &stmt.quoted,
            expanding: Default::default(),
            planned_ctes: Default::default(),
        };
        let res = match &stmt.stmt {
            Stmt::Select(s) => ex.select(s, None),
            Stmt::Insert(i) => ex.insert(i, None).map(|_| std::mem::take(&mut ex.returned)),
            Stmt::Update(u) => ex.update(u, None).map(|_| std::mem::take(&mut ex.returned)),
            Stmt::Delete {
                with,
                table,
                where_,
                returning,
                plan,
            } => ex
                .with_ctes(with, None, |ex| {
                    ex.delete(table, where_.as_ref(), returning, None, *plan)
                })
                .map(|_| std::mem::take(&mut ex.returned)),
            Stmt::CreateTable(ct) => ex.create_table(ct).map(|()| QueryResult::default()),
            s @ Stmt::CreateIndex { .. } => ex.create_index(s).map(|()| QueryResult::default()),
            s @ Stmt::CreateView { .. } => ex.create_view(s).map(|()| QueryResult::default()),
            Stmt::CreateTrigger(ct) => ex.create_trigger(ct).map(|()| QueryResult::default()),
            Stmt::Drop {
                kind,
                name,
                if_exists,
            } => ex
                .drop_object(*kind, name, *if_exists)
                .map(|()| QueryResult::default()),
            Stmt::Reindex(name) => ex.reindex(name.as_deref()).map(|()| QueryResult::default()),
            Stmt::AlterTable { table, action } => ex
                .alter_table(table, action)
                .map(|()| QueryResult::default()),
            _ => unreachable!("handled by the connection"),
        };
        match res.is_ok() {
            true => {
                exec::TakenRowids::fold(&mut self.txn_rowids, std::mem::take(&mut ex.taken_rowids))
            }
            false => exec::TakenRowids::give_back(&ex.taken_rowids, &mut self.shared.rowids.lock()),
        }
        // Known largest rowids outlive a statement that succeeded, unless it changed the
        // schema (which may give a table's database to another); a failed one's writes are
        // undone.
        let rows_only = matches!(
            stmt.stmt,
            Stmt::Select(_) | Stmt::Insert(_) | Stmt::Update(_) | Stmt::Delete { .. }
        );
        if res.is_ok() && rows_only {
            self.txn_max_rowids = std::mem::take(&mut ex.max_rowids);
        }
        let changes = ex.changes;
        if matches!(
            stmt.stmt,
            Stmt::Insert(_) | Stmt::Update(_) | Stmt::Delete { .. }
        ) {
            self.changes = changes;
            if res.is_ok() {
                self.total_changes += changes + ex.trigger_changes;
            }
        }
        if !std::ptr::eq(schema_before, Arc::as_ptr(&self.schema)) {
            self.schema_changed = true;
            if stmt.depth > self.schema.deepest {
                // Until the commit reads the schema back: what this statement made.
                Arc::make_mut(&mut self.schema).deepest = stmt.depth;
            }
        }
        res
    }

    /// After a commit that changed the schema: the committed schema, read back from the
    /// engine (other connections may have changed it too), becomes everyone's.
    fn publish_schema(&mut self) -> Result<()> {
        if std::mem::take(&mut self.schema_changed) {
            let db = self.shared.env.open_db(SCHEMA_DB)?;
            let s = Arc::new(load_schema(&self.shared.env, &db)?);
            *self.shared.schema.write() = s.clone();
            self.schema = s;
        }
        Ok(())
    }

    fn begin(&mut self, _kind: BeginKind) -> Result<QueryResult> {
        if self.txn.is_some() {
            return Err(Error::Sql(
                "cannot start a transaction within a transaction".into(),
            ));
        }
        self.take_schema();
        self.txn = Some(self.shared.env.begin_txn()?);
        Ok(QueryResult::default())
    }

    /// Takes the committed schema for a new transaction, dropping the database handles
    /// kept from earlier statements if it changed (they may name databases dropped since).
    fn take_schema(&mut self) {
        self.schema = self.shared.schema.read().clone();
        if !Arc::ptr_eq(&self.schema, &self.dbs_schema) {
            self.dbs.clear();
            self.dbs_schema = self.schema.clone();
        }
    }

    fn commit(&mut self) -> Result<()> {
        let Some(txn) = self.txn.take() else {
            return Err(Error::Sql(
                "cannot commit - no transaction is active".into(),
            ));
        };
        self.savepoints.clear();
        let r = self.commit_txn(&txn);
        self.dbs.clear();
        let taken = self.end_txn_rowids();
        match r {
            Ok(_) => self.publish_schema(),
            Err(e) => {
                self.give_back_rowids(&taken);
                self.schema = self.shared.schema.read().clone();
                self.schema_changed = false;
                Err(e.into())
            }
        }
    }

    fn rollback(&mut self) -> Result<()> {
        let Some(txn) = self.txn.take() else {
            return Err(Error::Sql(
                "cannot rollback - no transaction is active".into(),
            ));
        };
        txn.abort();
        self.savepoints.clear();
        self.dbs.clear();
        let taken = self.end_txn_rowids();
        self.give_back_rowids(&taken);
        self.schema = self.shared.schema.read().clone();
        self.schema_changed = false;
        Ok(())
    }

    /// Ends a transaction's rowid bookkeeping: returns the rowids it took (to give back
    /// if it did not commit) and forgets its known largest rowids.
    fn end_txn_rowids(&mut self) -> Vec<exec::TakenRowids> {
        self.txn_max_rowids.clear();
        std::mem::take(&mut self.txn_rowids)
    }

    /// Gives back the rowids an undone transaction (or part of one) took, where no other
    /// connection has taken one since (see `exec::TakenRowids`).
    fn give_back_rowids(&self, taken: &[exec::TakenRowids]) {
        exec::TakenRowids::give_back(taken, &mut self.shared.rowids.lock());
    }

    fn savepoint(&mut self, name: &str) -> Result<QueryResult> {
        let began = self.txn.is_none();
        if began {
            self.begin(BeginKind::Deferred)?;
        }
        let mark = self.txn.as_ref().expect("begun").savepoint()?;
        self.savepoints.push(NamedSavepoint {
            name: name.to_string(),
            mark,
            began,
            schema: self.schema.clone(),
            rowids: self.txn_rowids.clone(),
        });
        Ok(QueryResult::default())
    }

    fn find_savepoint(&self, name: &str) -> Result<usize> {
        self.savepoints
            .iter()
            .rposition(|s| s.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| Error::Sql(format!("no such savepoint: {name}")))
    }

    fn release(&mut self, name: &str) -> Result<QueryResult> {
        let i = self.find_savepoint(name)?;
        let mut gone = self.savepoints.split_off(i);
        let sp = gone.remove(0);
        if sp.began {
            self.commit()?;
        } else {
            self.txn
                .as_ref()
                .expect("a savepoint is in a transaction")
                .release(sp.mark)?;
        }
        Ok(QueryResult::default())
    }

    fn rollback_to(&mut self, name: &str) -> Result<QueryResult> {
        let i = self.find_savepoint(name)?;
        self.savepoints.truncate(i + 1);
        let txn = self.txn.as_ref().expect("a savepoint is in a transaction");
        let sp = &self.savepoints[i];
        txn.rollback_to(&sp.mark)?;
        // The schema as it stood there: objects made since are gone, dropped ones are
        // back. The database handles kept stay: those of databases this transaction made
        // before the savepoint are the only way to them until it commits, and a name the
        // rollback freed is taken again by the next object made, whose handle replaces
        // the old one.
        self.schema = sp.schema.clone();
        let since = exec::TakenRowids::since(&self.txn_rowids, &sp.rowids);
        self.txn_rowids = sp.rowids.clone();
        self.txn_max_rowids.clear();
        self.give_back_rowids(&since);
        Ok(QueryResult::default())
    }

    /// Commits `txn` with `PRAGMA synchronous`'s durability, if set, else the
    /// environment's.
    fn commit_txn(&self, txn: &Txn) -> beechdb::Result<u64> {
        match self.synchronous {
            None => txn.commit(),
            Some(0) => txn.commit_with(Durability::NoSync),
            Some(1) => txn.commit_with(Durability::WriteNoSync),
            Some(_) => txn.commit_with(Durability::Sync),
        }
    }

    fn pragma(&mut self, name: &str, value: Option<&ast::Expr>) -> Result<QueryResult> {
        let one = |col: &str, v: Value| QueryResult {
            rows: vec![vec![v]],
            ..QueryResult::named(&[col])
        };
        let arg = value.map(|e| match e {
            ast::Expr::Literal(v) => v.clone(),
            ast::Expr::Column { name, .. } => Value::from(name.as_str()),
            _ => Value::Null,
        });
        Ok(match name {
            "table_info" | "table_xinfo" => {
                let table = arg.unwrap_or_default().to_text();
                let columns = match self.schema.table(&table) {
                    Ok(t) => introspect::table_columns(&self.schema, &t.clone()),
                    Err(_) if self.schema.views.contains_key(&schema::lc(&table)) => {
                        let view = format!("SELECT * FROM {}", alter::quoted(&table));
                        let described = self.describe(&self.prepare(&view)?)?;
                        described
                            .columns
                            .iter()
                            .zip(described.decl_types.iter())
                            .map(|(n, t)| introspect::ColumnInfo {
                                name: n.clone(),
                                decl_type: t.clone().unwrap_or_default(),
                                not_null: false,
                                default: None,
                                pk: 0,
                                hidden: 0,
                            })
                            .collect()
                    }
                    Err(_) => Vec::new(),
                };
                introspect::table_info(columns, name == "table_xinfo")
            }
            "index_list" => {
                introspect::index_list(&self.schema, &arg.unwrap_or_default().to_text())
            }
            "index_info" | "index_xinfo" => introspect::index_info(
                &self.schema,
                &arg.unwrap_or_default().to_text(),
                name == "index_xinfo",
            ),
            "foreign_key_list" => {
                introspect::foreign_key_list(&self.schema, &arg.unwrap_or_default().to_text())
            }
            "table_list" => {
                let mut rows: Vec<Vec<Value>> = Vec::new();
                for t in self.schema.tables.values() {
                    rows.push(vec![
                        "main".into(),
                        t.name.as_str().into(),
                        "table".into(),
                        (t.columns.len() as i64).into(),
                        0.into(),
                        0.into(),
                    ]);
                }
                for v in self.schema.views.values() {
                    rows.push(vec![
                        "main".into(),
                        v.name.as_str().into(),
                        "view".into(),
                        0.into(),
                        0.into(),
                        0.into(),
                    ]);
                }
                QueryResult {
                    rows,
                    ..QueryResult::named(&["schema", "name", "type", "ncol", "wr", "strict"])
                }
            }
            "busy_timeout" => {
                if let Some(v) = arg {
                    self.busy_timeout = Duration::from_millis(v.as_i64().max(0) as u64);
                }
                one("timeout", (self.busy_timeout.as_millis() as i64).into())
            }
            "journal_mode" => one("journal_mode", "wal".into()),
            "user_version" => {
                let own = match &self.txn {
                    Some(_) => None,
                    None => Some(self.shared.env.begin_txn()?),
                };
                let txn = own.as_ref().or(self.txn.as_ref()).expect("a transaction");
                let db = match self.dbs.get(SCHEMA_DB) {
                    Some(d) => d.clone(),
                    None => self.shared.env.open_db(SCHEMA_DB)?,
                };
                const KEY: &[u8] = b"\0user_version";
                let result = match arg {
                    Some(v) => {
                        let rec = schema::value_entry("user_version", "", v.as_i64());
                        txn.put(&db, KEY, &rec)?;
                        QueryResult::default()
                    }
                    None => {
                        let v = match txn.get(&db, KEY)? {
                            Some(rec) => schema::entry_value(&rec)?,
                            None => 0,
                        };
                        one("user_version", v.into())
                    }
                };
                if let Some(t) = own {
                    self.commit_txn(&t)?;
                }
                result
            }
            "foreign_keys" => match arg {
                Some(v) => {
                    let on = match v {
                        Value::Text(t) => {
                            matches!(t.to_ascii_lowercase().as_str(), "on" | "yes" | "true" | "1")
                        }
                        other => other.as_i64() != 0,
                    };
                    // As in SQLite, a no-op inside a transaction.
                    if self.txn.is_none() {
                        self.foreign_keys = on;
                    }
                    QueryResult::default()
                }
                None => one("foreign_keys", (self.foreign_keys as i64).into()),
            },
            "synchronous" => match arg {
                Some(v) => {
                    if self.txn.is_some() {
                        return Err(Error::Sql(
                            "Safety level may not be changed inside a transaction".into(),
                        ));
                    }
                    self.synchronous = Some(synchronous_level(&v));
                    QueryResult::default()
                }
                None => {
                    let level = self
                        .synchronous
                        .unwrap_or(match self.shared.env.durability() {
                            Some(Durability::Sync) => 2,
                            Some(Durability::WriteNoSync) => 1,
                            Some(Durability::NoSync) | None => 0,
                        });
                    one("synchronous", (level as i64).into())
                }
            },
            "cache_size" | "noop" => QueryResult::default(),
            "page_size" => one("page_size", (self.shared.env.page_size() as i64).into()),
            "integrity_check" => {
                let report = self.shared.env.verify()?;
                one(
                    "integrity_check",
                    if report.is_clean() {
                        "ok".into()
                    } else {
                        format!("{report:?}").into()
                    },
                )
            }
            _ => QueryResult::default(),
        })
    }
}

/// The level a `PRAGMA synchronous = v` sets, in SQLite's reading: a name (OFF, NORMAL,
/// FULL, EXTRA, or a boolean word) or a number 0-3; anything else is NORMAL, as in SQLite.
fn synchronous_level(v: &Value) -> u8 {
    match v {
        Value::Text(t) => match t.to_ascii_lowercase().as_str() {
            "off" | "no" | "false" => 0,
            "full" | "yes" | "true" | "on" => 2,
            "extra" => 3,
            n => n
                .parse::<i64>()
                .ok()
                .and_then(|n| u8::try_from(n).ok())
                .filter(|&n| n <= 3)
                .unwrap_or(1),
        },
        Value::Integer(n @ 0..=3) => *n as u8,
        _ => 1,
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(t) = self.txn.take() {
            t.abort();
        }
    }
}

/// The README's examples (the engine's and the SQL layer's), compiled and run as doctests
/// so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
