//! Any text as SQL against a small schema: parse, plan and execute give rows or a typed
//! error; never a panic, a hang or a damaged database. Each input runs in a transaction
//! that is rolled back, so inputs do not pile up.
#![no_main]

use beechdb_sql::{Connection, Database};
use libfuzzer_sys::fuzz_target;
use std::cell::RefCell;

thread_local! {
    static CONN: RefCell<(Database, Connection)> = RefCell::new({
        let db = Database::open_in_memory().unwrap();
        let mut c = db.connect();
        c.execute_batch(
            "CREATE TABLE t1(a INTEGER PRIMARY KEY, b TEXT, c REAL);
             CREATE TABLE t2(x, y INTEGER UNIQUE, z TEXT COLLATE NOCASE);
             CREATE INDEX t1b ON t1(b);
             CREATE VIEW v AS SELECT a, b FROM t1 WHERE a > 1;
             INSERT INTO t1 VALUES(1,'a',1.5),(2,'b',NULL),(3,NULL,-2);
             INSERT INTO t2 VALUES('p',1,'Q'),(NULL,2,'r');",
        )
        .unwrap();
        (db, c)
    });
}

fuzz_target!(|data: &[u8]| {
    let Ok(sql) = std::str::from_utf8(data) else { return };
    if sql.len() > 2000 {
        return;
    }
    CONN.with(|c| {
        let c = &mut c.borrow_mut().1;
        if c.execute("BEGIN", &[]).is_err() {
            return;
        }
        let _ = c.execute_batch(sql);
        if !c.is_autocommit() {
            let _ = c.execute("ROLLBACK", &[]);
        }
    });
});
