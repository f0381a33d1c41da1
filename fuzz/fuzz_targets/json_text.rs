//! Any text as a JSON document (JSON5 included) through the parser, the writers, the path
//! lookups and the table functions: a value or "malformed JSON", never a panic or a hang;
//! a path read through the text and in the parsed tree agree.
#![no_main]

use beechdb_sql::{Connection, Database, Value};
use libfuzzer_sys::fuzz_target;
use std::cell::RefCell;

thread_local! {
    static CONN: RefCell<(Database, Connection)> = RefCell::new({
        let db = Database::open_in_memory().unwrap();
        let c = db.connect();
        (db, c)
    });
}

fuzz_target!(|data: &[u8]| {
    let Ok(doc) = std::str::from_utf8(data) else { return };
    CONN.with(|c| {
        let c = &mut c.borrow_mut().1;
        // A path read through the document's text and looked up in its parsed tree find
        // the same value, or the same refusal.
        for path in ["$.a", "$.a[1].b", "$[0]", "$[1].a[0]"] {
            if let Err(e) = beechdb_sql::check_path_read(doc, path) {
                panic!("{e}");
            }
        }
        let doc = Value::from(doc);
        for sql in [
            "SELECT json(?1), json_valid(?1, 3), json_pretty(?1), json_type(?1)",
            "SELECT json_extract(?1, '$.a[0]'), ?1 ->> '$[#-1]', json_set(?1, '$.b', 1)",
            "SELECT count(*), max(fullkey) FROM json_tree(?1)",
        ] {
            let _ = c.query(sql, std::slice::from_ref(&doc));
        }
    });
});
