//! BeechDB in Data Store mode.

use super::{BenchResult, KvEngine, Setup};
use beechdb::{Config, Db, Env};

pub struct Beech {
    env: Env,
    db: Db,
}

impl Beech {
    pub fn open(dir: &std::path::Path, s: &Setup) -> BenchResult<Beech> {
        let env = Env::open(
            dir,
            Config::new()
                .page_size(s.page_size)
                .cache_size(s.cache_bytes),
        )?;
        let db = env.create_db("bench")?;
        Ok(Beech { env, db })
    }
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
    fn close(self: Box<Self>) -> BenchResult<()> {
        drop(self.db);
        Ok(self.env.close()?)
    }
}
