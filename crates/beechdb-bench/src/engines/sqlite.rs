//! SQLite through rusqlite (bundled), for reference: a WITHOUT ROWID table, prepared
//! statements, one transaction per batch of ten; in Data Store mode WAL with synchronous=OFF.

use super::{BenchResult, KvEngine, Setup};
use rusqlite::{params, Connection, OptionalExtension};

pub struct Sqlite {
    conn: Connection,
}

impl Sqlite {
    pub fn open(dir: &std::path::Path, s: &Setup) -> BenchResult<Sqlite> {
        let conn = Connection::open(dir.join("bench.sqlite"))?;
        conn.execute_batch(&format!(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF; PRAGMA cache_size=-{};
             CREATE TABLE kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID;",
            s.cache_bytes / 1024
        ))?;
        Ok(Sqlite { conn })
    }
}

impl KvEngine for Sqlite {
    fn begin_batch(&mut self, write: bool) -> BenchResult<()> {
        if write {
            self.conn.prepare_cached("BEGIN")?.execute([])?;
        }
        Ok(())
    }
    fn end_batch(&mut self) -> BenchResult<()> {
        if !self.conn.is_autocommit() {
            self.conn.prepare_cached("COMMIT")?.execute([])?;
        }
        Ok(())
    }
    fn put(&mut self, key: &[u8], value: &[u8]) -> BenchResult<()> {
        self.conn
            .prepare_cached("INSERT OR REPLACE INTO kv (k, v) VALUES (?1, ?2)")?
            .execute(params![key, value])?;
        Ok(())
    }
    fn update(&mut self, key: &[u8], value: &[u8]) -> BenchResult<()> {
        self.conn
            .prepare_cached("UPDATE kv SET v = ?2 WHERE k = ?1")?
            .execute(params![key, value])?;
        Ok(())
    }
    fn get(&mut self, key: &[u8], buf: &mut Vec<u8>) -> BenchResult<bool> {
        let mut stmt = self.conn.prepare_cached("SELECT v FROM kv WHERE k = ?1")?;
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
            .conn
            .prepare_cached("DELETE FROM kv WHERE k = ?1")?
            .execute(params![key])?
            == 1)
    }
    fn close(self: Box<Self>) -> BenchResult<()> {
        self.conn.close().map_err(|(_, e)| e)?;
        Ok(())
    }
}
