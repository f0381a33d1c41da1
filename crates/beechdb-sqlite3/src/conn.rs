//! The connection handle: open and close, the error state, `sqlite3_exec`, and the hooks
//! an application sets on a connection (busy timeout, progress, authorizer, trace, limits).
//!
//! Owns: `sqlite3`, what a filename names (a one-file environment, as SQLite's file) and
//! the process's table of open environments (one `Database` per database, shared by every
//! connection to it). May call: `stmt` (for `sqlite3_exec`),
//! `util`.

use crate::consts::*;
use crate::util::{c_str, errstr, strdup_sqlite};
use beechdb_sql::{Connection, Database, Interrupter};
use parking_lot::{Mutex, ReentrantMutex};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering::Relaxed};
use std::sync::LazyLock;
use std::time::Duration;

pub(crate) type TraceFn =
    unsafe extern "C" fn(c_uint, *mut c_void, *mut c_void, *mut c_void) -> c_int;
pub(crate) type ProgressFn = unsafe extern "C" fn(*mut c_void) -> c_int;
pub(crate) type BusyFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;
pub(crate) type AuthorizerFn = unsafe extern "C" fn(
    *mut c_void,
    c_int,
    *const c_char,
    *const c_char,
    *const c_char,
    *const c_char,
) -> c_int;
type ExecCallback =
    unsafe extern "C" fn(*mut c_void, c_int, *mut *mut c_char, *mut *mut c_char) -> c_int;

/// A database connection (`sqlite3*`).
pub struct sqlite3 {
    pub(crate) inner: ReentrantMutex<RefCell<Inner>>,
    err: Mutex<ErrState>,
    interrupter: Option<Interrupter>,
    filename: CString,
    /// `sqlite3_limit`'s values, beside the lock rather than under it, so that a callback
    /// running inside a step (where the connection is borrowed) reads them too:
    /// `sqlite3_expanded_sql` in a trace callback.
    limits: [AtomicI32; LIMITS.len()],
}

/// What a connection's lock guards.
pub(crate) struct Inner {
    /// `None` when the open failed (the handle then only reports why).
    pub conn: Option<Connection>,
    /// The entry of `DATABASES` this connection holds (none for private databases).
    db_key: Option<PathBuf>,
    /// Statements, blobs and backups not yet finalized.
    pub live: usize,
    /// `sqlite3_close_v2` was called while `live > 0`: freed by the last finalize.
    zombie: bool,
    pub readonly: bool,
    pub extended_codes: bool,
    pub trace: Option<(c_uint, TraceFn, *mut c_void)>,
    pub progress: Option<(ProgressFn, *mut c_void)>,
    pub authorizer: Option<(AuthorizerFn, *mut c_void)>,
    /// `sqlite3_busy_handler`'s callback (it replaces the busy timeout, and the reverse).
    pub busy: Option<(BusyFn, *mut c_void)>,
    /// How many functions and collations were registered or removed: a statement prepared
    /// before the last is prepared again before it runs, as SQLite expires it.
    pub registrations: u64,
    /// The file database this connection names, and its open flags (`None`: a private
    /// one).
    source: Option<(Target, c_int)>,
    /// The database is another process's for now (it had it open when this connection
    /// opened, or this process handed it over, see `hand_over`): until it can be opened
    /// here (`Inner::conn` tries, within the busy timeout), the connection holds a private
    /// placeholder for its settings, functions and collations, and every statement gets
    /// SQLITE_BUSY, "database is locked", as SQLite's does while another process holds the
    /// lock.
    waiting: bool,
    /// This connection's handle, as `DATABASES` lists it.
    me: *const sqlite3,
}

// The raw pointers are the application's callback contexts, used under the lock only.
unsafe impl Send for Inner {}

struct ErrState {
    /// The extended result code of the last failed call (SQLITE_OK after a success).
    code: c_int,
    msg: CString,
}

/// SQLite's default (and here: highest) limits, by `SQLITE_LIMIT_*` number.
pub(crate) const LIMITS: [c_int; 12] = [
    1_000_000_000, // LENGTH
    1_000_000_000, // SQL_LENGTH
    2000,          // COLUMN
    1000,          // EXPR_DEPTH
    500,           // COMPOUND_SELECT
    250_000_000,   // VDBE_OP
    127,           // FUNCTION_ARG
    10,            // ATTACHED
    50_000,        // LIKE_PATTERN_LENGTH
    32_766,        // VARIABLE_NUMBER
    1000,          // TRIGGER_DEPTH
    0,             // WORKER_THREADS
];
pub(crate) const LIMIT_LENGTH: usize = 0;
pub(crate) const LIMIT_SQL_LENGTH: usize = 1;
pub(crate) const LIMIT_FUNCTION_ARG: usize = 6;
pub(crate) const LIMIT_VARIABLE_NUMBER: usize = 9;

/// A database this process has open, shared by its connections.
struct Open {
    db: Database,
    /// Connections counted as using it.
    users: usize,
    /// Their handles (a connection opening or closing is counted but not listed, and then
    /// the database is not handed over).
    handles: Vec<Handle>,
    /// When this process opened it.
    since: std::time::Instant,
    /// Its want file (see `hand_over`), once there; and when it was last looked for.
    want: Option<std::fs::File>,
    want_looked: Option<std::time::Instant>,
}

/// A connection handle in `DATABASES` (touched only under its lock).
struct Handle(*const sqlite3);
unsafe impl Send for Handle {}

/// Open databases by canonical path. Lock order: this table, then a connection's lock
/// (`hand_over` only tries the latter); a connection that needs the table while holding
/// its own lock never waits for another connection's. The standard library's mutex, not
/// parking_lot's: a thread waiting for the latter when the process forks stays queued in
/// the process-wide table of parking_lot's waiters, which the child inherits, and the
/// child's own waits there then meet it.
static DATABASES: LazyLock<std::sync::Mutex<HashMap<PathBuf, Open>>> =
    LazyLock::new(Default::default);

/// The table of open databases, locked (nothing panics holding it: a poisoned lock is
/// taken as is).
fn databases() -> std::sync::MutexGuard<'static, HashMap<PathBuf, Open>> {
    DATABASES.lock().unwrap_or_else(|e| e.into_inner())
}

/// An error as a code and message.
pub(crate) type Failure = (c_int, String);

impl sqlite3 {
    /// The current value of limit `id` (a `SQLITE_LIMIT_*` number).
    pub(crate) fn limit(&self, id: usize) -> usize {
        self.limits[id].load(Relaxed).max(0) as usize
    }

    /// Runs `f` on the connection under its lock; a nested call from a callback that would
    /// need the connection again is refused. A panic becomes SQLITE_INTERNAL.
    pub(crate) fn with<R>(
        &self,
        fail: R,
        f: impl FnOnce(&mut Inner) -> Result<R, Failure>,
    ) -> (R, c_int) {
        self.call(true, fail, f)
    }

    /// Like `with`, but a success leaves the error state alone (for `sqlite3_reset`, which
    /// reports the error of the step before it, and for reading column names).
    pub(crate) fn with_quiet<R>(
        &self,
        fail: R,
        f: impl FnOnce(&mut Inner) -> Result<R, Failure>,
    ) -> (R, c_int) {
        self.call(false, fail, f)
    }

    fn call<R>(
        &self,
        clear: bool,
        fail: R,
        f: impl FnOnce(&mut Inner) -> Result<R, Failure>,
    ) -> (R, c_int) {
        let guard = self.inner.lock();
        let Ok(mut inner) = guard.try_borrow_mut() else {
            return (
                fail,
                self.fail(
                    SQLITE_MISUSE,
                    "the connection is in use by the statement that called this callback",
                ),
            );
        };
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut inner))) {
            Ok(Ok(r)) => {
                if clear {
                    self.clear_error();
                }
                (r, SQLITE_OK)
            }
            Ok(Err((code, msg))) => {
                let extended = inner.extended_codes;
                let c = self.fail(code, &msg);
                (fail, if extended { code } else { c })
            }
            Err(_) => (
                fail,
                self.fail(
                    SQLITE_INTERNAL,
                    "internal error in BeechDB (a bug: please report it)",
                ),
            ),
        }
    }

    /// Like `with` for calls that return only a code.
    pub(crate) fn run(&self, f: impl FnOnce(&mut Inner) -> Result<(), Failure>) -> c_int {
        self.with((), f).1
    }

    /// Records an error; returns its primary code.
    pub(crate) fn fail(&self, code: c_int, msg: &str) -> c_int {
        let mut e = self.err.lock();
        e.code = code;
        e.msg = c_str(msg);
        code & 0xff
    }

    /// The primary code of the last error (SQLITE_OK after a success).
    pub(crate) fn err_code(&self) -> c_int {
        self.err.lock().code & 0xff
    }

    pub(crate) fn clear_error(&self) {
        let mut e = self.err.lock();
        if e.code != SQLITE_OK {
            e.code = SQLITE_OK;
            e.msg = c_str(errstr(SQLITE_OK));
        }
    }

    fn open(name: &[u8], flags: c_int) -> Box<sqlite3> {
        let target = parse_filename(name, flags);
        let mut inner = Inner {
            conn: None,
            db_key: None,
            live: 0,
            zombie: false,
            readonly: flags & SQLITE_OPEN_READWRITE == 0
                || target.as_ref().is_ok_and(|t| t.read_only),
            extended_codes: false,
            trace: None,
            progress: None,
            authorizer: None,
            busy: None,
            registrations: 0,
            source: None,
            waiting: false,
            me: std::ptr::null(),
        };
        let opened = target.and_then(|t| {
            if !t.memory {
                inner.source = Some((t.clone(), flags));
            }
            match open_database(t, flags) {
                Err((SQLITE_BUSY, _)) => {
                    inner.waiting = true;
                    Database::open_in_memory()
                        .map(|db| (db, None))
                        .map_err(failure)
                }
                r => r,
            }
        });
        let mut failure = None;
        match opened {
            Ok((db, key)) => {
                inner.conn = Some(db.connect());
                inner.db_key = key;
            }
            Err(f) => failure = Some(f),
        }
        let handle = Box::new(sqlite3 {
            interrupter: inner.conn.as_ref().map(Connection::interrupter),
            inner: ReentrantMutex::new(RefCell::new(inner)),
            err: Mutex::new(ErrState {
                code: SQLITE_OK,
                msg: c_str(errstr(SQLITE_OK)),
            }),
            filename: c_str(&String::from_utf8_lossy(name)),
            limits: LIMITS.map(AtomicI32::new),
        });
        if let Some((code, msg)) = failure {
            handle.fail(code, &msg);
        }
        let me: *const sqlite3 = &*handle;
        let key = {
            let guard = handle.inner.lock();
            let mut inner = guard.borrow_mut();
            inner.me = me;
            inner.db_key.clone()
        };
        if let Some(key) = key {
            listed(&key, me, true);
        }
        handle
    }

    /// Frees the handle: its connection, then its hold on the environment.
    unsafe fn free(p: *mut sqlite3) {
        // Off the table's list before the handle goes (still counted, so the database is
        // not handed over until the count follows).
        {
            let mut all = databases();
            let key = (*p).inner.lock().borrow().db_key.clone();
            if let Some(open) = key.and_then(|k| all.get_mut(&k)) {
                open.handles.retain(|x| x.0 != p);
            }
        }
        let handle = Box::from_raw(p);
        let mut inner = handle.inner.into_inner().into_inner();
        if let Some((cb, ctx)) = inner
            .trace
            .filter(|t| t.0 & SQLITE_TRACE_CLOSE != 0)
            .map(|t| (t.1, t.2))
        {
            cb(SQLITE_TRACE_CLOSE, ctx, p.cast(), std::ptr::null_mut());
        }
        drop(inner.conn.take());
        if let Some(key) = inner.db_key.take() {
            release_database(&key);
        }
    }

    /// One fewer statement (or blob, or backup) uses the connection; frees a closed one
    /// with none left.
    pub(crate) unsafe fn release(p: *mut sqlite3) {
        let free = {
            let guard = (*p).inner.lock();
            let mut inner = guard.borrow_mut();
            inner.live -= 1;
            inner.zombie && inner.live == 0
        };
        if free {
            sqlite3::free(p);
        }
    }
}

/// One connection fewer uses the shared database at `key` (its connection already
/// dropped or moved to another database).
fn release_database(key: &PathBuf) {
    let mut all = databases();
    if let Some(entry) = all.get_mut(key) {
        entry.users -= 1;
        if entry.users == 0 {
            // The last connection: the database is closed, its file left holding every
            // commit, as SQLite checkpoints its WAL at the last close. (Under the table's
            // lock, so that an open of the same path waits for it.) Should it fail, the
            // commits stay in the log beside the file.
            if let Some(open) = all.remove(key) {
                let _ = open.db.close();
            }
        }
    }
}

/// How long this process keeps a database it opened before handing it to another process
/// that waits (so that a handover, a close and an open, is paid for by some work).
const MIN_HOLD: Duration = Duration::from_millis(2);

/// How often a database's want file is looked for while it has none.
const MIN_LOOK: Duration = Duration::from_millis(50);

/// The file `name` of the database at `path`: `PATH-NAME` beside a database file, `NAME`
/// in an environment directory.
fn beside(path: &Path, name: &str) -> PathBuf {
    if path.is_dir() {
        path.join(name)
    } else {
        let mut beside = path.as_os_str().to_owned();
        beside.push("-");
        beside.push(name);
        PathBuf::from(beside)
    }
}

/// The file through which a process waiting for the database at `path` says so: it holds
/// a shared `flock` on it while it waits, and the process that has the database looks for
/// one by trying an exclusive one (`wanted`). `PATH-beech.want` beside a database file,
/// `beech.want` in an environment directory; made by the first process to wait (`create`).
fn want_file(path: &Path, create: bool) -> Option<std::fs::File> {
    let name = beside(path, "beech.want");
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .open(name)
        .ok()
}

/// Whether another process waits for the database `open` (at `key`).
fn wanted(key: &Path, open: &mut Open) -> bool {
    // Until a process has waited, there is no want file: looked for every 50 ms.
    if open.want.is_none() && open.want_looked.is_none_or(|t| t.elapsed() >= MIN_LOOK) {
        open.want = want_file(key, false);
        open.want_looked = Some(std::time::Instant::now());
    }
    let Some(fd) = open.want.as_ref().map(std::os::fd::AsRawFd::as_raw_fd) else {
        return false;
    };
    // Only a waiter's shared lock keeps an exclusive one from being had at once.
    if unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        unsafe { libc::flock(fd, libc::LOCK_UN) };
        return false;
    }
    std::io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK)
}

/// Starts (once per process) the thread that hands databases over to waiting processes:
/// every 2 ms it looks at each database this process has had for `MIN_HOLD`, and hands
/// over those another process waits for (`hand_over`).
fn start_handing_over() {
    static FORK_HANDLERS: std::sync::Once = std::sync::Once::new();
    FORK_HANDLERS.call_once(|| unsafe {
        libc::pthread_atfork(Some(before_fork), Some(after_fork), Some(forked_child));
    });
    if !HANDING_OVER.swap(true, Relaxed) {
        let _ = std::thread::Builder::new()
            .name("beechdb-handover".into())
            .spawn(|| {
                // Looks every 2 ms while this process has had a database in the last
                // second (it may open one again at once, after handing it over), else
                // every 50 ms.
                let mut last_had = std::time::Instant::now();
                loop {
                    let had = {
                        let mut all = databases();
                        let due: Vec<PathBuf> = all
                            .iter_mut()
                            .filter_map(|(key, open)| {
                                (open.since.elapsed() >= MIN_HOLD && wanted(key, open))
                                    .then(|| key.clone())
                            })
                            .collect();
                        let had = !all.is_empty();
                        for key in due {
                            hand_over(&mut all, &key);
                        }
                        had
                    };
                    if had {
                        last_had = std::time::Instant::now();
                    }
                    let idle = last_had.elapsed() > Duration::from_secs(1);
                    std::thread::sleep(Duration::from_millis(if idle { 50 } else { 2 }));
                }
            });
    }
}

/// Whether this process has its handing-over thread (a forked child has none).
static HANDING_OVER: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The table of open databases, held by the thread that forks while it forks.
    static FORKING: RefCell<Option<std::sync::MutexGuard<'static, HashMap<PathBuf, Open>>>> =
        const { RefCell::new(None) };
}

/// `fork` is about to copy the process: no thread may be changing the table of open
/// databases meanwhile.
extern "C" fn before_fork() {
    FORKING.with(|f| *f.borrow_mut() = Some(databases()));
}

extern "C" fn after_fork() {
    FORKING.with(|f| drop(f.borrow_mut().take()));
}

/// In a forked child: the databases in the table are the parent's, open in the parent,
/// and must never be written, nor closed, from here (the child's copy of an environment
/// would write the parent's log over the parent's own). So they are forgotten, never
/// dropped; the child's copies of their lock files are closed (else the lock would outlive
/// the parent's close); and connections the child inherited wait for the database as any
/// other process does, opening it anew when it is handed over. As SQLite's, a connection
/// in use by another thread at the fork, or inside a transaction, is not to be used in
/// the child.
extern "C" fn forked_child() {
    // Locked by `before_fork`, in the thread that forked, which this one continues.
    FORKING.with(|f| drop(f.borrow_mut().take()));
    HANDING_OVER.store(false, Relaxed);
    let opens = std::mem::take(&mut *databases());
    let mut locks = Vec::new();
    for (key, open) in opens {
        for h in &open.handles {
            // SAFETY: listed handles are alive (see `hand_over`).
            if let Some(g) = unsafe { &*h.0 }.inner.try_lock() {
                if let Ok(mut inner) = g.try_borrow_mut() {
                    inner.wait_again();
                }
            }
        }
        locks.push(beside(&key, "beech.lock"));
        std::mem::forget(open);
    }
    if locks.is_empty() {
        return;
    }
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    for fd in fds.flatten() {
        let target = std::fs::read_link(fd.path());
        let n = fd
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<c_int>().ok());
        if let (Ok(target), Some(n)) = (target, n) {
            if locks.contains(&target) {
                unsafe { libc::close(n) };
            }
        }
    }
}

/// Hands the database at `key` over to a process that waits for it, as SQLite's
/// processes take turns at its lock: when every connection of this process that uses it
/// is idle (in no call right now, no transaction open), each moves to a placeholder and
/// waits for the database again (`Inner::waiting`), and the database is closed (its file
/// then holds every commit, and its lock is free). Otherwise nothing happens, and the next
/// look tries again. The connections' locks are only tried, never waited for.
fn hand_over(all: &mut HashMap<PathBuf, Open>, key: &PathBuf) {
    let Some(open) = all.get(key) else {
        return;
    };
    if open.users != open.handles.len() {
        return; // a connection is opening or closing
    }
    let mut guards = Vec::with_capacity(open.handles.len());
    for h in &open.handles {
        // Listed handles are alive: a handle leaves the list, under the table's lock,
        // before it is freed.
        match unsafe { &*h.0 }.inner.try_lock() {
            Some(g) => guards.push(g),
            None => return,
        }
    }
    let idle = guards.iter().all(|g| {
        g.try_borrow()
            .is_ok_and(|i| i.conn.as_ref().is_none_or(Connection::is_autocommit))
    });
    if !idle {
        return;
    }
    let Ok(placeholder) = Database::open_in_memory() else {
        return;
    };
    for g in &guards {
        let mut inner = g.borrow_mut();
        if let Some(c) = inner.conn.as_mut() {
            // Outside a transaction, as just checked: cannot be refused.
            let _ = c.use_database(&placeholder);
        }
        inner.wait_again();
    }
    drop(guards);
    if let Some(open) = all.remove(key) {
        let _ = open.db.close();
    }
}

/// Lists handle `h` as using the database at `key` (`on`), or takes it off the list.
fn listed(key: &PathBuf, h: *const sqlite3, on: bool) {
    if let Some(open) = databases().get_mut(key) {
        open.handles.retain(|x| x.0 != h);
        if on {
            open.handles.push(Handle(h));
        }
    }
}

impl Inner {
    /// The connection, to run SQL on its database: one still waiting for a database that
    /// another process has open tries to open it first (`Inner::waiting`).
    pub(crate) fn conn(&mut self) -> Result<&mut Connection, Failure> {
        if self.waiting {
            self.open_waiting()?;
        }
        self.settings()
    }

    /// The connection, for its settings, functions and collations only (no database
    /// needed: one still waiting keeps them for when it has it).
    pub(crate) fn settings(&mut self) -> Result<&mut Connection, Failure> {
        self.conn.as_mut().ok_or_else(|| {
            (
                SQLITE_MISUSE,
                "the database connection failed to open".into(),
            )
        })
    }

    /// Opens the database this connection waits for, trying again (as SQLite's busy
    /// timeout or busy handler allows) while another process has it open.
    fn open_waiting(&mut self) -> Result<(), Failure> {
        let Some((target, flags)) = self.source.clone() else {
            return Ok(());
        };
        let patience = self.settings()?.busy_timeout();
        let started = std::time::Instant::now();
        let mut pause = Duration::from_millis(1);
        // Tells the process that has it that this one waits (see `hand_over`).
        let _want = want_file(&target.path, true).and_then(|f| {
            (unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&f), libc::LOCK_SH) } == 0)
                .then_some(f)
        });
        for calls in 0.. {
            match open_database(target.clone(), flags) {
                Ok((db, key)) => {
                    if let Err(f) = self.move_to(&db) {
                        key.inspect(release_database);
                        return Err(f);
                    }
                    if let Some(key) = &key {
                        listed(key, self.me, true);
                    }
                    self.db_key = key;
                    return Ok(());
                }
                Err((SQLITE_BUSY, msg)) => {
                    let again = match self.busy {
                        Some((busy, ctx)) => unsafe { busy(ctx, calls) != 0 },
                        None => started.elapsed() + pause <= patience,
                    };
                    if !again {
                        return Err((SQLITE_BUSY, msg));
                    }
                    std::thread::sleep(pause);
                    // Short: the process that has it hands it over within a few ms.
                    pause = (pause * 2).min(Duration::from_millis(2));
                }
                Err(f) => return Err(f),
            }
        }
        unreachable!("the loop returns")
    }

    /// The database was taken from under the connection (handed over, or left behind in a
    /// forked parent): it waits for it like a connection of any other process, and its
    /// statements are prepared again once it has it.
    fn wait_again(&mut self) {
        self.db_key = None;
        self.waiting = true;
        self.registrations += 1;
    }

    /// Moves the connection for good to `db`, a private database (`sqlite3_deserialize`):
    /// never handed to or taken from another process.
    pub(crate) fn move_to_private(&mut self, db: &Database) -> Result<(), Failure> {
        self.move_to(db)?;
        self.source = None;
        Ok(())
    }

    /// Moves the connection to `db`, letting go of the database it used; its statements
    /// are prepared again before they next run.
    fn move_to(&mut self, db: &Database) -> Result<(), Failure> {
        self.settings()?.use_database(db).map_err(failure)?;
        if let Some(key) = self.db_key.take() {
            listed(&key, self.me, false);
            release_database(&key);
        }
        self.waiting = false;
        self.registrations += 1;
        Ok(())
    }
}

/// Turns a `beechdb-sql` error into SQLite's code (extended) and message.
pub(crate) fn failure(e: beechdb_sql::Error) -> Failure {
    (e.code(), e.to_string())
}

/// The database a filename names, shared with the other connections of this process that
/// have it open; or a private temporary one. A path names a file, as in SQLite: the
/// database's pages, its log beside it (`PATH-log.0000000001`, see `Env::open_file`),
/// created when `SQLITE_OPEN_CREATE` allows. A directory holding a BeechDB environment (as
/// BeechDB's own tools make) opens too; any other directory is `SQLITE_CANTOPEN`, and a
/// file that is no BeechDB database `SQLITE_NOTADB`.
fn open_database(target: Target, flags: c_int) -> Result<(Database, Option<PathBuf>), Failure> {
    if target.memory {
        let db = Database::open_in_memory().map_err(failure)?;
        return Ok((db, None));
    }
    let path = target.path;
    let shown = path.display().to_string();
    let cant = |why: String| {
        (
            SQLITE_CANTOPEN,
            format!("unable to open database file: {why}"),
        )
    };
    // Another process has it open (SQLite's SQLITE_BUSY while another holds the lock).
    let locked = || {
        (
            SQLITE_BUSY,
            format!("database is locked: {shown} is open in another process"),
        )
    };
    let dir = path.is_dir();
    if !dir && !path.exists() && (flags & SQLITE_OPEN_CREATE == 0 || !target.create) {
        return Err(cant(format!("{shown} does not exist")));
    }
    // The same key for every spelling of the path, before the file exists too.
    let key = match (dir, path.file_name(), path.parent()) {
        (true, _, _) => std::fs::canonicalize(&path),
        (false, Some(file), Some(parent)) => {
            let parent = if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            };
            std::fs::canonicalize(parent).map(|p| p.join(file))
        }
        _ => Err(std::io::ErrorKind::InvalidInput.into()),
    }
    .map_err(|e| cant(format!("{shown}: {e}")))?;
    let mut all = databases();
    if let Some(open) = all.get_mut(&key) {
        open.users += 1;
        return Ok((open.db.clone(), Some(key)));
    }
    let opened = if dir {
        Database::open_with(&key, beechdb::Config::new().create(false)).map_err(|e| match e {
            beechdb_sql::Error::Engine(beechdb::Error::Locked { .. }) => locked(),
            e => cant(format!(
                "{shown} is a directory that holds no BeechDB environment ({e})"
            )),
        })
    } else {
        Database::open_file(&key).map_err(|e| match e {
            beechdb_sql::Error::Engine(beechdb::Error::Locked { .. }) => locked(),
            beechdb_sql::Error::Engine(beechdb::Error::Corrupt { .. })
                if !beechdb::storage::is_page_file(&key) =>
            {
                (
                    SQLITE_NOTADB,
                    format!("file is not a database: {shown}: {e}"),
                )
            }
            beechdb_sql::Error::Engine(beechdb::Error::Corrupt { .. }) => (
                SQLITE_CORRUPT,
                format!(
                    "database disk image is malformed: {shown}: {e} (until it is closed, a \
                     database's log sits beside its file, as PATH-log.N: copy or move it \
                     with the file)"
                ),
            ),
            e => cant(format!("{shown}: {e}")),
        })
    };
    let db = opened?;
    all.insert(
        key.clone(),
        Open {
            db: db.clone(),
            users: 1,
            handles: Vec::new(),
            since: std::time::Instant::now(),
            want: None,
            want_looked: None,
        },
    );
    start_handing_over();
    Ok((db, Some(key)))
}

/// What a filename names.
#[derive(Clone)]
struct Target {
    path: PathBuf,
    /// A private in-memory database.
    memory: bool,
    /// May be created (not a URI's `mode=ro` or `mode=rw`).
    create: bool,
    /// Opened for reading only (a URI's `mode=ro`).
    read_only: bool,
}

/// What a filename names: `:memory:` and `""` (and with `SQLITE_OPEN_MEMORY`) private
/// in-memory databases; with `SQLITE_OPEN_URI`, the URI forms `file:path?mode=ro|rw|rwc|memory`
/// and `file::memory:`; anything else a path, taken byte for byte.
fn parse_filename(name: &[u8], flags: c_int) -> Result<Target, Failure> {
    use std::os::unix::ffi::OsStrExt;
    let mut target = Target {
        path: PathBuf::new(),
        memory: false,
        create: true,
        read_only: false,
    };
    if name.is_empty() || name == b":memory:" || flags & SQLITE_OPEN_MEMORY != 0 {
        target.memory = true;
        return Ok(target);
    }
    let Some(uri) = name
        .strip_prefix(b"file:")
        .filter(|_| flags & SQLITE_OPEN_URI != 0)
    else {
        target.path = PathBuf::from(std::ffi::OsStr::from_bytes(name));
        return Ok(target);
    };
    let (path, query) = match uri.iter().position(|&b| b == b'?') {
        Some(q) => (&uri[..q], &uri[q + 1..]),
        None => (uri, &b""[..]),
    };
    let path = match path.strip_prefix(b"//") {
        Some(rest) => match rest.iter().position(|&b| b == b'/') {
            Some(0) => rest,
            Some(i) if &rest[..i] == b"localhost" => &rest[i..],
            i => {
                return Err((
                    SQLITE_ERROR,
                    format!(
                        "invalid uri authority: {}",
                        String::from_utf8_lossy(&rest[..i.unwrap_or(rest.len())])
                    ),
                ))
            }
        },
        None => path,
    };
    for kv in query.split(|&b| b == b'&') {
        match kv {
            b"mode=memory" => target.memory = true,
            b"mode=ro" => (target.read_only, target.create) = (true, false),
            b"mode=rw" => target.create = false,
            b"mode=rwc" => {}
            m if m.starts_with(b"mode=") => {
                return Err((
                    SQLITE_ERROR,
                    format!("no such access mode: {}", String::from_utf8_lossy(&m[5..])),
                ))
            }
            _ => {}
        }
    }
    let path = percent_decode(path);
    target.memory |= path == b":memory:";
    target.path = PathBuf::from(std::ffi::OsStr::from_bytes(&path));
    Ok(target)
}

fn percent_decode(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

unsafe fn handle<'a>(db: *mut sqlite3) -> Option<&'a sqlite3> {
    db.as_ref()
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_open_v2(
    filename: *const c_char,
    pp: *mut *mut sqlite3,
    flags: c_int,
    _vfs: *const c_char,
) -> c_int {
    if pp.is_null() {
        return SQLITE_MISUSE;
    }
    let name = if filename.is_null() {
        &b""[..]
    } else {
        CStr::from_ptr(filename).to_bytes()
    };
    let handle = sqlite3::open(name, flags);
    let code = handle.err.lock().code & 0xff;
    *pp = Box::into_raw(handle);
    code
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_open(filename: *const c_char, pp: *mut *mut sqlite3) -> c_int {
    sqlite3_open_v2(
        filename,
        pp,
        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
        std::ptr::null(),
    )
}

/// Closes, or with statements still open: `SQLITE_BUSY` (v1) or closes when the last one
/// is finalized (v2).
unsafe fn close(db: *mut sqlite3, deferred: bool) -> c_int {
    let Some(h) = handle(db) else {
        return SQLITE_OK;
    };
    {
        let guard = h.inner.lock();
        let Ok(mut inner) = guard.try_borrow_mut() else {
            return h.fail(
                SQLITE_MISUSE,
                "cannot close a connection from its own callback",
            );
        };
        if inner.live > 0 {
            if !deferred {
                return h.fail(
                    SQLITE_BUSY,
                    "unable to close due to unfinalized statements or unfinished backups",
                );
            }
            inner.zombie = true;
            // An open transaction ends now, as in SQLite.
            if let Some(c) = inner.conn.as_mut() {
                if !c.is_autocommit() {
                    let _ = c.execute("ROLLBACK", &[]);
                }
            }
            return SQLITE_OK;
        }
    }
    sqlite3::free(db);
    SQLITE_OK
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_close(db: *mut sqlite3) -> c_int {
    close(db, false)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_close_v2(db: *mut sqlite3) -> c_int {
    close(db, true)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_errcode(db: *mut sqlite3) -> c_int {
    handle(db).map_or(SQLITE_NOMEM, |h| h.err.lock().code & 0xff)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_extended_errcode(db: *mut sqlite3) -> c_int {
    handle(db).map_or(SQLITE_NOMEM, |h| h.err.lock().code)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_errmsg(db: *mut sqlite3) -> *const c_char {
    match handle(db) {
        // The message lives until the next call that changes the error state.
        Some(h) => h.err.lock().msg.as_ptr(),
        None => c"out of memory".as_ptr(),
    }
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_extended_result_codes(db: *mut sqlite3, on: c_int) -> c_int {
    match handle(db) {
        Some(h) => h.run(|i| {
            i.extended_codes = on != 0;
            Ok(())
        }),
        None => SQLITE_MISUSE,
    }
}

/// Reads from the connection: `default` for a null handle, one that failed to open, or a
/// call from inside one of its own callbacks.
unsafe fn read<R>(db: *mut sqlite3, default: R, f: impl FnOnce(&mut Connection) -> R) -> R {
    let Some(h) = handle(db) else {
        return default;
    };
    let guard = h.inner.lock();
    let Ok(mut inner) = guard.try_borrow_mut() else {
        return default;
    };
    inner.conn.as_mut().map_or(default, f)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_changes(db: *mut sqlite3) -> c_int {
    read(db, 0, |c| c.changes() as c_int)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_changes64(db: *mut sqlite3) -> i64 {
    read(db, 0, |c| c.changes() as i64)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_total_changes(db: *mut sqlite3) -> c_int {
    read(db, 0, |c| c.total_changes() as c_int)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_total_changes64(db: *mut sqlite3) -> i64 {
    read(db, 0, |c| c.total_changes() as i64)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_last_insert_rowid(db: *mut sqlite3) -> i64 {
    read(db, 0, |c| c.last_insert_rowid())
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_get_autocommit(db: *mut sqlite3) -> c_int {
    read(db, 1, |c| c.is_autocommit() as c_int)
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_busy_timeout(db: *mut sqlite3, ms: c_int) -> c_int {
    match handle(db) {
        Some(h) => h.run(|i| {
            i.busy = None;
            i.settings()?
                .set_busy_timeout(Duration::from_millis(ms.max(0) as u64));
            Ok(())
        }),
        None => SQLITE_MISUSE,
    }
}

/// Sets (or with `None` clears) the busy handler. When an auto-commit statement meets a
/// write conflict, the handler is called with the number of times it was called before for
/// that statement: nonzero runs the statement again, zero gives SQLITE_BUSY. (Inside an
/// explicit transaction a conflict has already rolled the transaction back, so SQLITE_BUSY
/// comes at once.) It replaces `sqlite3_busy_timeout`'s waiting, as in SQLite.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_busy_handler(
    db: *mut sqlite3,
    cb: Option<BusyFn>,
    ctx: *mut c_void,
) -> c_int {
    match handle(db) {
        Some(h) => h.run(|i| {
            i.busy = cb.map(|cb| (cb, ctx));
            i.settings()?.set_busy_timeout(Duration::ZERO);
            Ok(())
        }),
        None => SQLITE_MISUSE,
    }
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_interrupt(db: *mut sqlite3) {
    if let Some(i) = handle(db).and_then(|h| h.interrupter.as_ref()) {
        i.interrupt();
    }
}

/// Sets the progress handler. BeechDB calls it once per `sqlite3_step` rather than every
/// `n` virtual machine instructions (it has no virtual machine); a nonzero return
/// interrupts the statement.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_progress_handler(
    db: *mut sqlite3,
    n: c_int,
    cb: Option<ProgressFn>,
    ctx: *mut c_void,
) {
    if let Some(h) = handle(db) {
        h.run(|i| {
            i.progress = cb.filter(|_| n > 0).map(|cb| (cb, ctx));
            Ok(())
        });
    }
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_set_authorizer(
    db: *mut sqlite3,
    cb: Option<AuthorizerFn>,
    ctx: *mut c_void,
) -> c_int {
    match handle(db) {
        Some(h) => h.run(|i| {
            i.authorizer = cb.map(|cb| (cb, ctx));
            Ok(())
        }),
        None => SQLITE_MISUSE,
    }
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_trace_v2(
    db: *mut sqlite3,
    mask: c_uint,
    cb: Option<TraceFn>,
    ctx: *mut c_void,
) -> c_int {
    match handle(db) {
        Some(h) => h.run(|i| {
            i.trace = cb.filter(|_| mask != 0).map(|cb| (mask, cb, ctx));
            Ok(())
        }),
        None => SQLITE_MISUSE,
    }
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_limit(db: *mut sqlite3, id: c_int, new: c_int) -> c_int {
    let Some(h) = handle(db) else {
        return -1;
    };
    if !(0..LIMITS.len() as c_int).contains(&id) {
        return -1;
    }
    let id = id as usize;
    if new < 0 {
        return h.limits[id].load(Relaxed);
    }
    let old = h.limits[id].swap(new.min(LIMITS[id]), Relaxed);
    if id == LIMIT_FUNCTION_ARG {
        // Quietly: setting a limit leaves the connection's last error as it was.
        h.with_quiet((), |i| {
            let max = h.limit(LIMIT_FUNCTION_ARG);
            i.settings().map(|c| c.set_function_arg_limit(Some(max)))
        });
    }
    old
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_db_filename(
    db: *mut sqlite3,
    _name: *const c_char,
) -> *const c_char {
    handle(db).map_or(std::ptr::null(), |h| h.filename.as_ptr())
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_db_readonly(db: *mut sqlite3, _name: *const c_char) -> c_int {
    match handle(db) {
        Some(h) => h.with(-1, |i| Ok(i.readonly as c_int)).0,
        None => -1,
    }
}

/// Runs every statement of `sql`, calling `cb` for each row.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_exec(
    db: *mut sqlite3,
    sql: *const c_char,
    cb: Option<ExecCallback>,
    arg: *mut c_void,
    errmsg: *mut *mut c_char,
) -> c_int {
    use crate::stmt::*;
    if !errmsg.is_null() {
        *errmsg = std::ptr::null_mut();
    }
    let Some(h) = handle(db) else {
        return SQLITE_MISUSE;
    };
    if sql.is_null() {
        return SQLITE_OK;
    }
    let report = |rc: c_int| {
        if rc != SQLITE_OK && !errmsg.is_null() {
            *errmsg = strdup_sqlite(CStr::from_ptr(sqlite3_errmsg(db)));
        }
        rc
    };
    let mut rest = sql;
    while *rest != 0 {
        let mut stmt = std::ptr::null_mut();
        let mut tail = std::ptr::null();
        let rc = sqlite3_prepare_v2(db, rest, -1, &mut stmt, &mut tail);
        if rc != SQLITE_OK {
            return report(rc);
        }
        rest = tail;
        if stmt.is_null() {
            continue;
        }
        let n = sqlite3_column_count(stmt);
        let mut names: Vec<*mut c_char> = (0..n)
            .map(|i| sqlite3_column_name(stmt, i) as *mut c_char)
            .collect();
        loop {
            match sqlite3_step(stmt) {
                SQLITE_ROW => {
                    let Some(cb) = cb else { continue };
                    let mut values: Vec<*mut c_char> = (0..n)
                        .map(|i| sqlite3_column_text(stmt, i) as *mut c_char)
                        .collect();
                    if cb(arg, n, values.as_mut_ptr(), names.as_mut_ptr()) != 0 {
                        sqlite3_finalize(stmt);
                        return report(h.fail(SQLITE_ABORT, "query aborted"));
                    }
                }
                SQLITE_DONE => break,
                rc => {
                    let msg = CStr::from_ptr(sqlite3_errmsg(db)).to_owned();
                    let code = sqlite3_extended_errcode(db);
                    sqlite3_finalize(stmt);
                    h.fail(code, &msg.to_string_lossy());
                    return report(rc);
                }
            }
        }
        sqlite3_finalize(stmt);
    }
    h.clear_error();
    SQLITE_OK
}

/// Runs `sql` and returns every row as strings (SQLite's legacy `sqlite3_get_table`): the
/// first `ncol` entries are the column names, then `nrow` rows of `ncol` values (NULL for
/// SQL NULL). Free the result with `sqlite3_free_table`.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_get_table(
    db: *mut sqlite3,
    sql: *const c_char,
    result: *mut *mut *mut c_char,
    nrow: *mut c_int,
    ncol: *mut c_int,
    errmsg: *mut *mut c_char,
) -> c_int {
    use crate::stmt::*;
    if !errmsg.is_null() {
        *errmsg = std::ptr::null_mut();
    }
    if result.is_null() {
        return SQLITE_MISUSE;
    }
    *result = std::ptr::null_mut();
    let Some(h) = handle(db) else {
        return SQLITE_MISUSE;
    };
    let copy = |p: *const c_char| {
        if p.is_null() {
            std::ptr::null_mut()
        } else {
            strdup_sqlite(CStr::from_ptr(p))
        }
    };
    // Slot 0 keeps the number of entries for sqlite3_free_table, as SQLite does.
    let mut cells: Vec<*mut c_char> = vec![std::ptr::null_mut()];
    let (mut rows, mut cols) = (0, 0);
    let mut rest = sql;
    let mut rc = SQLITE_OK;
    while rc == SQLITE_OK && !rest.is_null() && *rest != 0 {
        let mut stmt = std::ptr::null_mut();
        rc = sqlite3_prepare_v2(db, rest, -1, &mut stmt, &mut rest);
        if rc != SQLITE_OK || stmt.is_null() {
            continue;
        }
        loop {
            match sqlite3_step(stmt) {
                SQLITE_ROW => {
                    let n = sqlite3_column_count(stmt);
                    if cols == 0 {
                        cols = n;
                        cells.extend((0..n).map(|i| copy(sqlite3_column_name(stmt, i))));
                    } else if n != cols {
                        rc = h.fail(
                            SQLITE_ERROR,
                            "sqlite3_get_table() called with two or more incompatible queries",
                        );
                        break;
                    }
                    cells.extend((0..n).map(|i| copy(sqlite3_column_text(stmt, i).cast())));
                    rows += 1;
                }
                SQLITE_DONE => break,
                other => {
                    rc = other;
                    break;
                }
            }
        }
        // Finalizing leaves the step's error, if any, in place.
        sqlite3_finalize(stmt);
    }
    let total = cells.len();
    cells[0] = total as *mut c_char;
    let table = libc::malloc(total * std::mem::size_of::<*mut c_char>()) as *mut *mut c_char;
    if table.is_null() {
        return SQLITE_NOMEM;
    }
    std::ptr::copy_nonoverlapping(cells.as_ptr(), table, total);
    let table = table.add(1);
    if rc != SQLITE_OK {
        if !errmsg.is_null() {
            *errmsg = strdup_sqlite(CStr::from_ptr(sqlite3_errmsg(db)));
        }
        sqlite3_free_table(table);
        return rc;
    }
    *result = table;
    if !nrow.is_null() {
        *nrow = rows;
    }
    if !ncol.is_null() {
        *ncol = cols;
    }
    h.clear_error();
    SQLITE_OK
}

#[no_mangle]
pub unsafe extern "C" fn sqlite3_free_table(table: *mut *mut c_char) {
    if table.is_null() {
        return;
    }
    let base = table.sub(1);
    let total = *base as usize;
    for i in 1..total {
        libc::free(*base.add(i) as *mut c_void);
    }
    libc::free(base as *mut c_void);
}
