//! Environment configuration.

use crate::error::{Error, Result};

/// Smallest page size accepted.
pub const MIN_PAGE_SIZE: usize = 4096;
/// Largest page size accepted.
pub const MAX_PAGE_SIZE: usize = 65536;
/// Page size of a new environment unless configured otherwise.
pub const DEFAULT_PAGE_SIZE: usize = 16384;
/// Cache size unless configured otherwise: 64 MiB.
pub const DEFAULT_CACHE_SIZE: usize = 64 << 20;
/// The cache never holds fewer pages than this, whatever its configured size: an operation
/// needs a root-to-leaf path and a few siblings resident at once.
pub const MIN_CACHE_PAGES: usize = 16;

pub(crate) fn valid_page_size(s: usize) -> bool {
    s.is_power_of_two() && (MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&s)
}

/// How durable a commit is when `commit` returns (Berkeley DB's commit flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// On stable storage: the log is fsynced (with group commit) before commit returns.
    Sync,
    /// Handed to the operating system (`write`) before commit returns: survives a crash of
    /// the process, not of the machine (`DB_TXN_WRITE_NOSYNC`).
    WriteNoSync,
    /// Left in the log buffer: a crash may lose the last commits, never atomicity or order
    /// (`DB_TXN_NOSYNC`).
    NoSync,
}

/// Which members of a replication group must hold a commit before it returns on the
/// master (Berkeley DB JE's `ReplicaAckPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckPolicy {
    /// Every voting member.
    All,
    /// A majority of the voting members, the master included: the group has committed it.
    SimpleMajority,
    /// The master alone: the commit returns once the master's log holds it, before any
    /// replica does. It becomes visible, and survives the master's loss, only once a
    /// majority holds it.
    None,
}

/// How a commit in a replication group is made durable and acknowledged (Berkeley DB JE's
/// `Durability`): how the master's log and the replicas' logs are written, and whose
/// acknowledgements the commit waits for. Set per transaction with
/// [`crate::Txn::set_group_durability`]; a replication member has a default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupDurability {
    /// How the master's log is written before the commit returns.
    pub master: Durability,
    /// How each replica's log is written before it acknowledges the commit.
    pub replicas: Durability,
    /// Whose acknowledgements the commit waits for.
    pub ack: AckPolicy,
}

/// What a transaction's reads see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// The database as of the transaction's start, plus its own writes (the default).
    Snapshot,
    /// The latest committed data at each read.
    ReadCommitted,
}

/// How an environment keeps its changes, fixed when it is created. Opening it in another
/// mode is refused (see [`Config::adopt_mode`]), because each mode's files mean something
/// different: a Data Store environment has no log, a transactional one needs its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Mode {
    /// Data Store: no transactions and no log; changes are durable at each checkpoint.
    DataStore,
    /// Transactional Data Store with its write-ahead log on disk.
    Transactional,
    /// Transactional Data Store with the log in memory only: commits are durable at the
    /// next checkpoint.
    TransactionalInMemoryLog,
}

impl Mode {
    pub(crate) fn code(self) -> u32 {
        match self {
            Mode::DataStore => 0,
            Mode::Transactional => 1,
            Mode::TransactionalInMemoryLog => 2,
        }
    }

    pub(crate) fn from_code(code: u32) -> Mode {
        match code {
            0 => Mode::DataStore,
            1 => Mode::Transactional,
            _ => Mode::TransactionalInMemoryLog,
        }
    }

    /// Whether the mode keeps a log on disk.
    pub(crate) fn has_log_files(self) -> bool {
        self == Mode::Transactional
    }

    /// How to ask for this mode in a [`Config`], for messages.
    pub(crate) fn config_words(self) -> &'static str {
        match self {
            Mode::DataStore => "Data Store mode (the default Config)",
            Mode::Transactional => "transactional mode (Config::transactional(true))",
            Mode::TransactionalInMemoryLog => {
                "transactional mode with an in-memory log (Config::in_memory_log(true))"
            }
        }
    }
}

/// Whether a database holds several values per key (Berkeley DB's `DB_DUP` and
/// `DB_DUPSORT`), chosen when it is created ([`crate::Env::create_db_with`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub enum Duplicates {
    /// One value per key: a put replaces it (the default).
    #[default]
    None,
    /// Several values per key, kept sorted (bytewise, as keys are): `DB_DUPSORT`.
    Sorted,
    /// Several values per key, in the order they were put: `DB_DUP`.
    Unsorted,
}

impl Duplicates {
    pub(crate) fn code(self) -> u8 {
        match self {
            Duplicates::None => 0,
            Duplicates::Sorted => 1,
            Duplicates::Unsorted => 2,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<Duplicates> {
        match code {
            0 => Some(Duplicates::None),
            1 => Some(Duplicates::Sorted),
            2 => Some(Duplicates::Unsorted),
            _ => None,
        }
    }
}

/// Default size of a log segment file: 64 MiB.
pub const DEFAULT_LOG_SEGMENT_SIZE: u64 = 64 << 20;

/// How to open an environment.
///
/// ```
/// let cfg = beechdb::Config::new().page_size(4096).cache_size(8 << 20);
/// assert_eq!(cfg.page_size_value(), 4096);
/// ```
#[derive(Debug, Clone)]
pub struct Config {
    page_size: usize,
    cache_size: usize,
    create: bool,
    pub(crate) transactional: bool,
    pub(crate) in_memory_log: bool,
    pub(crate) durability: Durability,
    pub(crate) isolation: Isolation,
    pub(crate) lock_timeout: std::time::Duration,
    pub(crate) log_segment_size: u64,
    pub(crate) checkpoint_log_bytes: u64,
    pub(crate) checkpoint_interval: std::time::Duration,
    pub(crate) keep_logs: bool,
    pub(crate) adopt_mode: bool,
    pub(crate) accept_meta_fallback: bool,
    pub(crate) txn_memory: usize,
    pub(crate) read_only: bool,
    pub(crate) recovery_progress: Option<RecoveryProgress>,
}

/// Called during recovery with the log bytes replayed so far and the bytes to replay.
#[derive(Clone)]
pub(crate) struct RecoveryProgress(pub(crate) std::sync::Arc<dyn Fn(u64, u64) + Send + Sync>);

impl std::fmt::Debug for RecoveryProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecoveryProgress")
    }
}

/// Memory a transaction's writes may take before they spill to the log, unless configured
/// otherwise: 64 MiB.
pub const DEFAULT_TXN_MEMORY: usize = 64 << 20;

impl Default for Config {
    fn default() -> Self {
        Config {
            page_size: DEFAULT_PAGE_SIZE,
            cache_size: DEFAULT_CACHE_SIZE,
            create: true,
            transactional: false,
            in_memory_log: false,
            durability: Durability::Sync,
            isolation: Isolation::Snapshot,
            lock_timeout: std::time::Duration::from_secs(10),
            log_segment_size: DEFAULT_LOG_SEGMENT_SIZE,
            checkpoint_log_bytes: 256 << 20,
            checkpoint_interval: std::time::Duration::from_secs(60),
            keep_logs: false,
            adopt_mode: false,
            accept_meta_fallback: false,
            txn_memory: DEFAULT_TXN_MEMORY,
            read_only: false,
            recovery_progress: None,
        }
    }
}

impl Config {
    /// The defaults: 16 KiB pages, a 64 MiB cache, create the environment if missing.
    pub fn new() -> Config {
        Config::default()
    }
    /// Page size for a new environment: a power of two from 4 KiB to 64 KiB. An existing
    /// environment keeps the page size it was created with.
    pub fn page_size(mut self, bytes: usize) -> Config {
        self.page_size = bytes;
        self
    }
    /// Cache budget in bytes (page images held in memory): at least [`MIN_CACHE_PAGES`]
    /// pages (64 KiB with 4 KiB pages, 256 KiB with the default 16 KiB ones); a smaller
    /// budget is refused when the environment opens.
    pub fn cache_size(mut self, bytes: usize) -> Config {
        self.cache_size = bytes;
        self
    }
    /// Whether opening a missing environment creates it (default true).
    pub fn create(mut self, create: bool) -> Config {
        self.create = create;
        self
    }
    /// Transactional Data Store: transactions, a write-ahead log, recovery (default off:
    /// Data Store mode).
    pub fn transactional(mut self, on: bool) -> Config {
        self.transactional = on;
        self
    }
    /// Keep the log in memory only: commits are atomic and isolated but durable only at
    /// the next checkpoint (Berkeley DB's `DB_LOG_IN_MEMORY`). Implies `transactional`.
    pub fn in_memory_log(mut self, on: bool) -> Config {
        self.in_memory_log = on;
        self.transactional |= on;
        self
    }
    /// Durability of a commit that does not say otherwise (default [`Durability::Sync`]).
    pub fn durability(mut self, d: Durability) -> Config {
        self.durability = d;
        self
    }
    /// Isolation of a transaction that does not say otherwise (default snapshot).
    pub fn isolation(mut self, i: Isolation) -> Config {
        self.isolation = i;
        self
    }
    /// How long a writer waits for a key another transaction holds (default 10 s).
    pub fn lock_timeout(mut self, t: std::time::Duration) -> Config {
        self.lock_timeout = t;
        self
    }
    /// Size of each log segment file (default 64 MiB; at least 64 KiB).
    pub fn log_segment_size(mut self, bytes: u64) -> Config {
        self.log_segment_size = bytes;
        self
    }
    /// Run a checkpoint after this many bytes of log (default 256 MiB).
    pub fn checkpoint_log_bytes(mut self, bytes: u64) -> Config {
        self.checkpoint_log_bytes = bytes;
        self
    }
    /// Run a checkpoint at least this often while commits happen (default 60 s).
    pub fn checkpoint_interval(mut self, every: std::time::Duration) -> Config {
        self.checkpoint_interval = every;
        self
    }
    /// Keep log segments that checkpoints no longer need, for archiving, instead of
    /// removing them ([`crate::Env::archive_logs`] lists them).
    pub fn keep_logs(mut self, on: bool) -> Config {
        self.keep_logs = on;
        self
    }
    /// Open an existing environment in the [`Mode`] it was created in, whatever this
    /// configuration asks for (a new environment is still created in the configured mode).
    /// Tools that inspect any environment use this; by default a mismatch is refused.
    pub fn adopt_mode(mut self, on: bool) -> Config {
        self.adopt_mode = on;
        self
    }
    /// Open an environment whose newest meta page is unusable from the other one, which
    /// names an older checkpoint (default off: such an open fails with [`crate::Error::Corrupt`]).
    ///
    /// A meta page is written within one disk sector, which a crash does not tear, so an
    /// unusable one means damage: the changes of the newest checkpoint are lost, and the next
    /// checkpoint, written over the damaged page, makes that permanent. Accept it knowingly;
    /// the loss is reported in [`crate::EnvStat::meta_warnings`] and by `verify`.
    pub fn accept_meta_fallback(mut self, on: bool) -> Config {
        self.accept_meta_fallback = on;
        self
    }
    /// Calls `f(replayed, total)` (log bytes) now and then while opening replays the log,
    /// for a progress display during a long recovery.
    pub fn recovery_progress(mut self, f: impl Fn(u64, u64) + Send + Sync + 'static) -> Config {
        self.recovery_progress = Some(RecoveryProgress(std::sync::Arc::new(f)));
        self
    }

    /// Opens an existing environment for reading only, beside a process that may have it
    /// open for writing (as Berkeley DB's db_stat and db_dump do): no lock is taken and no
    /// file is written. It reads the last durable checkpoint plus the commits logged after
    /// it (replayed in memory), as they were when it opened; every write fails with
    /// [`crate::Error::ReadOnly`]. A writer reuses pages a checkpoint has freed, so a
    /// read-only environment held across the writer's checkpoints may meet a page that
    /// changed under it: that read fails with [`crate::Error::Corrupt`] naming the cause,
    /// and opening again reads the newer checkpoint. Implies `create(false)`.
    pub fn read_only(mut self, on: bool) -> Config {
        self.read_only = on;
        if on {
            self.create = false;
        }
        self
    }
    /// Memory one transaction's writes may take (default 64 MiB, at least 16 KiB). Past it
    /// they spill to the log as sorted runs ahead of the commit, so a transaction of any size
    /// runs in bounded memory. A transaction holding `bytes / 1024` key locks (at least 64,
    /// at most 4,096) trades those of the database it is writing for one lock on the
    /// database (lock escalation). With the log in memory they
    /// spill to scratch files in the environment's directory (`spill.*`, never synced,
    /// removed once no transaction needs them).
    pub fn txn_memory(mut self, bytes: usize) -> Config {
        self.txn_memory = bytes;
        self
    }
    /// The mode this configuration asks for.
    pub fn mode(&self) -> Mode {
        match (self.transactional, self.in_memory_log) {
            (false, _) => Mode::DataStore,
            (true, false) => Mode::Transactional,
            (true, true) => Mode::TransactionalInMemoryLog,
        }
    }
    /// The configured page size.
    pub fn page_size_value(&self) -> usize {
        self.page_size
    }
    pub(crate) fn cache_size_value(&self) -> usize {
        self.cache_size
    }
    pub(crate) fn create_value(&self) -> bool {
        self.create
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if !valid_page_size(self.page_size) {
            return Err(Error::InvalidArgument(format!(
                "page size {} is not a power of two between {MIN_PAGE_SIZE} and {MAX_PAGE_SIZE}",
                self.page_size
            )));
        }
        if self.txn_memory < 16 << 10 {
            return Err(Error::InvalidArgument(format!(
                "transaction memory {} is below the minimum of 16 KiB",
                self.txn_memory
            )));
        }
        if self.log_segment_size < 64 << 10 {
            return Err(Error::InvalidArgument(format!(
                "log segment size {} is below the minimum of 64 KiB",
                self.log_segment_size
            )));
        }
        Ok(())
    }
}

/// A cache must hold [`MIN_CACHE_PAGES`] pages of `page_size` bytes.
pub(crate) fn check_cache_size(cache: usize, page_size: usize) -> Result<()> {
    let min = MIN_CACHE_PAGES * page_size;
    if cache < min {
        return Err(Error::InvalidArgument(format!(
            "cache size {cache} bytes is below the minimum of {MIN_CACHE_PAGES} pages \
             ({min} bytes with {page_size}-byte pages)"
        )));
    }
    Ok(())
}
