//! BeechDB: Data Store mode, or Transactional Data Store with one transaction per operation.

use super::{BenchResult, KvEngine, KvStore, Mode, Setup};
use beechdb::{Config, Db, Durability, Env};

pub struct BeechStore {
    env: Env,
    db: Db,
}

impl BeechStore {
    pub fn open(dir: &std::path::Path, s: &Setup) -> BenchResult<BeechStore> {
        let mut cfg = Config::new()
            .page_size(s.page_size)
            .cache_size(s.cache_bytes);
        cfg = match s.mode {
            Mode::Ds => cfg,
            Mode::TdsSync | Mode::TdsTmpfsSync => {
                cfg.transactional(true).durability(Durability::Sync)
            }
            Mode::TdsWriteNosync => cfg.transactional(true).durability(Durability::WriteNoSync),
            Mode::TdsNosync => cfg.transactional(true).durability(Durability::NoSync),
            Mode::TdsInmem => cfg.in_memory_log(true),
        };
        let env = Env::open(dir, cfg)?;
        let db = env.create_db("bench")?;
        Ok(BeechStore { env, db })
    }
}

impl KvStore for BeechStore {
    fn handle(&self) -> BenchResult<Box<dyn KvEngine + '_>> {
        Ok(Box::new(Beech {
            db: self.db.clone(),
        }))
    }
    fn close(self: Box<Self>) -> BenchResult<()> {
        drop(self.db);
        Ok(self.env.close()?)
    }
}

struct Beech {
    db: Db,
}

impl KvEngine for Beech {
    fn put(&mut self, key: &[u8], value: &[u8]) -> BenchResult<()> {
        Ok(self.db.put(key, value)?)
    }
    fn get(&mut self, key: &[u8], buf: &mut Vec<u8>) -> BenchResult<bool> {
        Ok(self
            .db
            .get_with(key, |v| {
                buf.clear();
                buf.extend_from_slice(v)
            })?
            .is_some())
    }
    fn delete(&mut self, key: &[u8]) -> BenchResult<bool> {
        Ok(self.db.delete(key)?)
    }
}
