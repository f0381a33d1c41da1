//! JSON functions and operators, checked against SQLite (rusqlite, bundled).

mod common;

use beechdb_sql::Database;

#[test]
fn json_functions_match_sqlite() {
    let db = Database::open_in_memory().unwrap();
    let mut b = db.connect();
    let s = rusqlite::Connection::open_in_memory().unwrap();
    let setup = "CREATE TABLE docs(id INTEGER PRIMARY KEY, body TEXT);
        INSERT INTO docs(body) VALUES('{\"name\":\"ann\",\"tags\":[\"a\",\"b\"],\"age\":31,\"score\":2.5,\"ok\":true}'),
                                    ('{\"name\":\"bob\",\"tags\":[],\"age\":null}');";
    b.execute_batch(setup).unwrap();
    s.execute_batch(setup).unwrap();
    for sql in [
        "SELECT json_extract(body, '$.name'), json_extract(body, '$.tags[1]'), json_extract(body, '$.age') FROM docs ORDER BY id",
        "SELECT body -> 'name', body ->> 'name', body -> '$.tags', body ->> '$.score', body ->> 'ok' FROM docs ORDER BY id",
        "SELECT json_array_length(body, '$.tags'), json_type(body, '$.age'), json_type(body, '$.tags') FROM docs ORDER BY id",
        "SELECT json_object('id', id, 'tags', json_extract(body, '$.tags')) FROM docs ORDER BY id",
        "SELECT json_array(1, 'two', 3.5, NULL, json_object('k', 'v'), json('[1, 2]'))",
        "SELECT json(' { \"a\" : [ 1 , 2 ] } '), json_valid('{'), json_valid('[]'), json_extract('[1,[2,3]]', '$[1][0]', '$[0]')",
        "SELECT id FROM docs WHERE body ->> 'age' > 30",
    ] {
        common::same_rows(&mut b, &s, sql, false);
    }
    assert!(b.query("SELECT json('{bad')", &[]).is_err());
}
