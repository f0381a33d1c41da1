//! LMDB through heed, for reference. LMDB is always transactional: one write transaction per
//! batch of ten, with NO_SYNC in Data Store mode (nothing forced to disk, as in BDB DS).

use super::{BenchResult, KvEngine, Setup};
use heed::types::Bytes;
use heed::{Database, EnvFlags, EnvOpenOptions, RwTxn};

pub struct Lmdb {
    env: heed::Env,
    db: Database<Bytes, Bytes>,
    wtxn: Option<RwTxn<'static>>,
}

impl Lmdb {
    pub fn open(dir: &std::path::Path, _s: &Setup) -> BenchResult<Lmdb> {
        let mut opts = EnvOpenOptions::new();
        opts.map_size(8 << 30).max_dbs(1);
        // SAFETY: NO_SYNC only relaxes durability; the directory is fresh and ours alone.
        let env = unsafe {
            opts.flags(EnvFlags::NO_SYNC | EnvFlags::NO_META_SYNC);
            opts.open(dir)?
        };
        let mut wtxn = env.write_txn()?;
        let db = env.create_database(&mut wtxn, None)?;
        wtxn.commit()?;
        Ok(Lmdb {
            env,
            db,
            wtxn: None,
        })
    }

    fn txn(&mut self) -> BenchResult<&mut RwTxn<'static>> {
        self.wtxn
            .as_mut()
            .ok_or_else(|| "write outside a batch".into())
    }
}

impl KvEngine for Lmdb {
    fn begin_batch(&mut self, write: bool) -> BenchResult<()> {
        if write {
            // SAFETY of the 'static: the transaction never outlives `self.env`, which `self`
            // owns; it is committed in `end_batch` before any other use of the environment.
            let txn: RwTxn<'_> = self.env.write_txn()?;
            self.wtxn = Some(unsafe { std::mem::transmute::<RwTxn<'_>, RwTxn<'static>>(txn) });
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
        let db = self.db;
        Ok(db.put(self.txn()?, key, value)?)
    }
    fn get(&mut self, key: &[u8], buf: &mut Vec<u8>) -> BenchResult<bool> {
        let rtxn = self.env.read_txn()?;
        match self.db.get(&rtxn, key)? {
            Some(v) => {
                buf.clear();
                buf.extend_from_slice(v);
                Ok(true)
            }
            None => Ok(false),
        }
    }
    fn delete(&mut self, key: &[u8]) -> BenchResult<bool> {
        let db = self.db;
        Ok(db.delete(self.txn()?, key)?)
    }
    fn close(mut self: Box<Self>) -> BenchResult<()> {
        self.end_batch()
    }
}
