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
        let doc = Value::from(doc);
        // A path read through the document's text (its first two reads) and in its parsed
        // tree (the third) find the same value, or the same refusal.
        let thrice = "SELECT json_extract(?1, '$.a[1].b'), json_extract(?1, '$.a[1].b'), \
                      json_extract(?1, '$.a[1].b')";
        match c.query(thrice, std::slice::from_ref(&doc)) {
            Ok(r) => assert!(r.rows[0][0] == r.rows[0][1] && r.rows[0][1] == r.rows[0][2]),
            Err(e) => assert!(e.to_string().contains("malformed JSON"), "{e}"),
        }
        for sql in [
            "SELECT json(?1), json_valid(?1, 3), json_pretty(?1), json_type(?1)",
            "SELECT json_extract(?1, '$.a[0]'), ?1 ->> '$[#-1]', json_set(?1, '$.b', 1)",
            "SELECT count(*), max(fullkey) FROM json_tree(?1)",
        ] {
            let _ = c.query(sql, std::slice::from_ref(&doc));
        }
    });
});
