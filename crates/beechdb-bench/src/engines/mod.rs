//! The engines a benchmark can drive, behind one small trait. Peers are compiled only with
//! the `peers` feature.

#[cfg(feature = "peers")]
pub mod bdb;
pub mod beech;
#[cfg(feature = "peers")]
pub mod lmdb;
#[cfg(feature = "peers")]
pub mod sqlite;

pub type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// One engine holding one key/value table for the KV workload.
pub trait KvEngine {
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
    /// Brackets each batch of ten (engines that are always transactional commit here).
    fn begin_batch(&mut self, _write: bool) -> BenchResult<()> {
        Ok(())
    }
    fn end_batch(&mut self) -> BenchResult<()> {
        Ok(())
    }
    /// Closes the engine (untimed).
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
}

/// Settings every engine is opened with.
#[derive(Debug, Clone)]
pub struct Setup {
    pub cache_bytes: usize,
    pub page_size: usize,
    /// Berkeley DB's page size; 0 keeps its default.
    pub bdb_page_size: usize,
}

/// Opens `engine` in the empty directory `dir`.
pub fn open(
    engine: Engine,
    dir: &std::path::Path,
    setup: &Setup,
) -> BenchResult<Box<dyn KvEngine>> {
    match engine {
        Engine::Beechdb => Ok(Box::new(beech::Beech::open(dir, setup)?)),
        #[cfg(feature = "peers")]
        Engine::Bdb => Ok(Box::new(bdb::Bdb::open(dir, setup)?)),
        #[cfg(feature = "peers")]
        Engine::Lmdb => Ok(Box::new(lmdb::Lmdb::open(dir, setup)?)),
        #[cfg(feature = "peers")]
        Engine::Sqlite => Ok(Box::new(sqlite::Sqlite::open(dir, setup)?)),
        #[allow(unreachable_patterns)]
        other => Err(format!(
            "{} is not compiled in: build with --features peers",
            other.name()
        )
        .into()),
    }
}
