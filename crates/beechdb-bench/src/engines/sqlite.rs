//! SQLite through rusqlite (bundled), for reference: WAL, a WITHOUT ROWID table, prepared
//! statements. Data Store mode: synchronous=OFF, one transaction per batch of ten. TDS
//! modes: one transaction per operation with synchronous FULL (sync), NORMAL (write
//! without sync: in WAL mode NORMAL syncs only at checkpoints) or OFF (no sync).

use super::{BenchResult, KvEngine, KvStore, Mode, Setup};
use rusqlite::{params, Connection, OptionalExtension};

pub struct SqliteStore {
    conn: std::sync::Mutex<Option<Connection>>,
    per_batch: bool,
}

impl SqliteStore {
    pub fn open(dir: &std::path::Path, s: &Setup) -> BenchResult<SqliteStore> {
        let conn = Connection::open(dir.join("bench.sqlite"))?;
        let sync = match s.mode {
            Mode::TdsSync | Mode::TdsTmpfsSync => "FULL",
            Mode::TdsWriteNosync => "NORMAL",
            _ => "OFF",
        };
        conn.execute_batch(&format!(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous={sync}; PRAGMA cache_size=-{};
             CREATE TABLE kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID;",
            s.cache_bytes / 1024
        ))?;
        Ok(SqliteStore {
            conn: std::sync::Mutex::new(Some(conn)),
            per_batch: s.mode == Mode::Ds,
        })
    }
}

impl KvStore for SqliteStore {
    fn handle(&self) -> BenchResult<Box<dyn KvEngine + '_>> {
        let conn = self
            .conn
            .lock()
            .unwrap()
            .take()
            .ok_or("SQLite is measured with one thread")?;
        Ok(Box::new(Sqlite {
            store: self,
            conn: Some(conn),
        }))
    }
    fn close(self: Box<Self>) -> BenchResult<()> {
        if let Some(c) = self.conn.lock().unwrap().take() {
            c.close().map_err(|(_, e)| e)?;
        }
        Ok(())
    }
}

struct Sqlite<'a> {
    store: &'a SqliteStore,
    conn: Option<Connection>,
}

impl Drop for Sqlite<'_> {
    fn drop(&mut self) {
        *self.store.conn.lock().unwrap() = self.conn.take();
    }
}

impl Sqlite<'_> {
    fn c(&self) -> &Connection {
        self.conn.as_ref().unwrap()
    }
}

impl KvEngine for Sqlite<'_> {
    fn begin_batch(&mut self, write: bool) -> BenchResult<()> {
        if write && self.store.per_batch {
            self.c().prepare_cached("BEGIN")?.execute([])?;
        }
        Ok(())
    }
    fn end_batch(&mut self) -> BenchResult<()> {
        if !self.c().is_autocommit() {
            self.c().prepare_cached("COMMIT")?.execute([])?;
        }
        Ok(())
    }
    fn put(&mut self, key: &[u8], value: &[u8]) -> BenchResult<()> {
        self.c()
            .prepare_cached("INSERT OR REPLACE INTO kv (k, v) VALUES (?1, ?2)")?
            .execute(params![key, value])?;
        Ok(())
    }
    fn update(&mut self, key: &[u8], value: &[u8]) -> BenchResult<()> {
        self.c()
            .prepare_cached("UPDATE kv SET v = ?2 WHERE k = ?1")?
            .execute(params![key, value])?;
        Ok(())
    }
    fn get(&mut self, key: &[u8], buf: &mut Vec<u8>) -> BenchResult<bool> {
        let mut stmt = self.c().prepare_cached("SELECT v FROM kv WHERE k = ?1")?;
        let found = stmt
            .query_row(params![key], |row| {
                let v = row.get_ref(0)?.as_blob()?;
                buf.clear();
                buf.extend_from_slice(v);
                Ok(())
            })
            .optional()?;
        Ok(found.is_some())
    }
    fn delete(&mut self, key: &[u8]) -> BenchResult<bool> {
        Ok(self
            .c()
            .prepare_cached("DELETE FROM kv WHERE k = ?1")?
            .execute(params![key])?
            == 1)
    }
}
