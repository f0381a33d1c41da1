//! LMDB through heed, for reference. In Data Store mode one write transaction per batch of
//! ten with NO_SYNC; in TDS modes one transaction per operation, synced (default) or NO_SYNC.

use super::{BenchResult, KvEngine, KvStore, Mode, Setup};
use heed::types::Bytes;
use heed::{Database, EnvFlags, EnvOpenOptions, RwTxn};

pub struct LmdbStore {
    env: heed::Env,
    db: Database<Bytes, Bytes>,
    per_batch: bool,
}

impl LmdbStore {
    pub fn open(dir: &std::path::Path, s: &Setup) -> BenchResult<LmdbStore> {
        let mut opts = EnvOpenOptions::new();
        opts.map_size(8 << 30).max_dbs(1);
        let flags = match s.mode {
            Mode::Ds | Mode::TdsNosync => EnvFlags::NO_SYNC | EnvFlags::NO_META_SYNC,
            _ => EnvFlags::empty(),
        };
        // SAFETY: NO_SYNC only relaxes durability; the directory is fresh and ours alone.
        let env = unsafe {
            opts.flags(flags);
            opts.open(dir)?
        };
        let mut wtxn = env.write_txn()?;
        let db = env.create_database(&mut wtxn, None)?;
        wtxn.commit()?;
        Ok(LmdbStore {
            env,
            db,
            per_batch: s.mode == Mode::Ds,
        })
    }
}

impl KvStore for LmdbStore {
    fn handle(&self) -> BenchResult<Box<dyn KvEngine + '_>> {
        Ok(Box::new(Lmdb {
            store: self,
            wtxn: None,
        }))
    }
    fn close(self: Box<Self>) -> BenchResult<()> {
        Ok(())
    }
}

struct Lmdb<'a> {
    store: &'a LmdbStore,
    wtxn: Option<RwTxn<'a>>,
}

impl Lmdb<'_> {
    fn write(
        &mut self,
        f: impl FnOnce(&mut RwTxn, Database<Bytes, Bytes>) -> heed::Result<bool>,
    ) -> BenchResult<bool> {
        let db = self.store.db;
        match self.wtxn.as_mut() {
            Some(t) => Ok(f(t, db)?),
            None => {
                let mut t = self.store.env.write_txn()?;
                let r = f(&mut t, db)?;
                t.commit()?;
                Ok(r)
            }
        }
    }
}

impl KvEngine for Lmdb<'_> {
    fn begin_batch(&mut self, write: bool) -> BenchResult<()> {
        if write && self.store.per_batch {
            self.wtxn = Some(self.store.env.write_txn()?);
        }
        Ok(())
    }
    fn end_batch(&mut self) -> BenchResult<()> {
        if let Some(t) = self.wtxn.take() {
            t.commit()?;
        }
        Ok(())
    }
    fn put(&mut self, key: &[u8], value: &[u8]) -> BenchResult<()> {
        self.write(|t, db| db.put(t, key, value).map(|_| true))
            .map(drop)
    }
    fn get(&mut self, key: &[u8], buf: &mut Vec<u8>) -> BenchResult<bool> {
        let rtxn = self.store.env.read_txn()?;
        match self.store.db.get(&rtxn, key)? {
            Some(v) => {
                buf.clear();
                buf.extend_from_slice(v);
                Ok(true)
            }
            None => Ok(false),
        }
    }
    fn delete(&mut self, key: &[u8]) -> BenchResult<bool> {
        self.write(|t, db| db.delete(t, key))
    }
}
