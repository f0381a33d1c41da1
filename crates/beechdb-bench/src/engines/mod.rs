//! The engines a benchmark can drive, behind two small traits: a store (one environment)
//! hands out per-thread handles. Peers are compiled only with the `peers` feature.

#[cfg(feature = "peers")]
pub mod bdb;
pub mod beech;
#[cfg(feature = "peers")]
pub mod lmdb;
#[cfg(feature = "peers")]
pub mod sqlite;

pub type BenchResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// One thread's handle on a store, for the KV workload.
pub trait KvEngine: Send {
    /// Stores (inserts or replaces) a record.
    fn put(&mut self, key: &[u8], value: &[u8]) -> BenchResult<()>;
    /// Replaces an existing record's value (the UPDATE phase).
    fn update(&mut self, key: &[u8], value: &[u8]) -> BenchResult<()> {
        self.put(key, value)
    }
    /// Copies the value into `buf`; false if absent.
    fn get(&mut self, key: &[u8], buf: &mut Vec<u8>) -> BenchResult<bool>;
    /// Removes a record; false if absent.
    fn delete(&mut self, key: &[u8]) -> BenchResult<bool>;
    /// Brackets each batch of ten; in Data Store mode the always-transactional peers commit
    /// once per batch here. In TDS modes every operation is its own transaction.
    fn begin_batch(&mut self, _write: bool) -> BenchResult<()> {
        Ok(())
    }
    fn end_batch(&mut self) -> BenchResult<()> {
        Ok(())
    }
}

/// One open environment.
pub trait KvStore: Send + Sync {
    fn handle(&self) -> BenchResult<Box<dyn KvEngine + '_>>;
    /// Closes the store (untimed).
    fn close(self: Box<Self>) -> BenchResult<()>;
}

/// Engines the benchmark knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    Beechdb,
    Bdb,
    Lmdb,
    Sqlite,
}

/// The seeds' configurations (Tables 3 and 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Data Store: no log, no transactions.
    Ds,
    /// One transaction per operation, log synced at commit.
    TdsSync,
    /// Log written (not synced) at commit.
    TdsWriteNosync,
    /// Log buffered at commit.
    TdsNosync,
    /// Log in memory only.
    TdsInmem,
    /// As tds-sync, with database and log on a RAM disk (tmpfs).
    TdsTmpfsSync,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Ds => "ds",
            Mode::TdsSync => "tds-sync",
            Mode::TdsWriteNosync => "tds-write-nosync",
            Mode::TdsNosync => "tds-nosync",
            Mode::TdsInmem => "tds-inmem",
            Mode::TdsTmpfsSync => "tds-tmpfs-sync",
        }
    }
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Beechdb => "beechdb",
            Engine::Bdb => "bdb",
            Engine::Lmdb => "lmdb",
            Engine::Sqlite => "sqlite",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Engine::Beechdb => "BeechDB",
            Engine::Bdb => "Berkeley DB 5.3",
            Engine::Lmdb => "LMDB (heed)",
            Engine::Sqlite => "SQLite (rusqlite)",
        }
    }

    /// Engines compiled into this binary.
    pub fn available() -> Vec<Engine> {
        if cfg!(feature = "peers") {
            vec![Engine::Beechdb, Engine::Bdb, Engine::Lmdb, Engine::Sqlite]
        } else {
            vec![Engine::Beechdb]
        }
    }

    /// Whether this engine has a configuration for `mode` with `threads` threads. LMDB and
    /// SQLite are references for one thread; LMDB has no write-without-sync or in-memory
    /// mode, SQLite no in-memory log. Berkeley DB's Data Store has no locking: with two
    /// threads its trees break (`DB_PAGE_NOTFOUND`) or a thread spins forever.
    pub fn supports(self, mode: Mode, threads: usize) -> bool {
        match self {
            Engine::Beechdb => true,
            Engine::Bdb => threads == 1 || mode != Mode::Ds,
            Engine::Lmdb => {
                threads == 1
                    && matches!(
                        mode,
                        Mode::Ds | Mode::TdsSync | Mode::TdsNosync | Mode::TdsTmpfsSync
                    )
            }
            Engine::Sqlite => threads == 1 && mode != Mode::TdsInmem,
        }
    }
}

/// Settings every engine is opened with.
#[derive(Debug, Clone)]
pub struct Setup {
    pub cache_bytes: usize,
    pub page_size: usize,
    /// Berkeley DB's page size; 0 keeps its default. (Read only by the peers build.)
    #[cfg_attr(not(feature = "peers"), allow(dead_code))]
    pub bdb_page_size: usize,
    pub mode: Mode,
}

/// Opens `engine` in the empty directory `dir`.
pub fn open(engine: Engine, dir: &std::path::Path, setup: &Setup) -> BenchResult<Box<dyn KvStore>> {
    match engine {
        Engine::Beechdb => Ok(Box::new(beech::BeechStore::open(dir, setup)?)),
        #[cfg(feature = "peers")]
        Engine::Bdb => Ok(Box::new(bdb::BdbStore::open(dir, setup)?)),
        #[cfg(feature = "peers")]
        Engine::Lmdb => Ok(Box::new(lmdb::LmdbStore::open(dir, setup)?)),
        #[cfg(feature = "peers")]
        Engine::Sqlite => Ok(Box::new(sqlite::SqliteStore::open(dir, setup)?)),
        #[allow(unreachable_patterns)]
        other => Err(format!(
            "{} is not compiled in: build with --features peers",
            other.name()
        )
        .into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn berkeley_db_runs_its_data_store_on_one_thread_only() {
        assert!(Engine::Bdb.supports(Mode::Ds, 1));
        assert!(!Engine::Bdb.supports(Mode::Ds, 2));
        assert!(Engine::Bdb.supports(Mode::TdsNosync, 16));
        assert!(Engine::Beechdb.supports(Mode::Ds, 16));
    }
}
