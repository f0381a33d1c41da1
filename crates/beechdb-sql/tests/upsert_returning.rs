//! Upsert (`ON CONFLICT ... DO NOTHING / DO UPDATE`) and RETURNING, checked against SQLite
//! (rusqlite, bundled) statement by statement.

mod common;

use beechdb_sql::Database;

#[test]
fn upsert_and_returning_match_sqlite() {
    let db = Database::open_in_memory().unwrap();
    let mut b = db.connect();
    let s = rusqlite::Connection::open_in_memory().unwrap();
    let script = [
        "CREATE TABLE kv(k TEXT PRIMARY KEY, v INTEGER, n INTEGER DEFAULT 0)",
        "CREATE TABLE u(id INTEGER PRIMARY KEY, email TEXT UNIQUE, hits INTEGER)",
        "INSERT INTO kv(k, v) VALUES('a', 1), ('b', 2) RETURNING k, v * 10",
        "INSERT INTO kv(k, v) VALUES('a', 5) ON CONFLICT(k) DO UPDATE SET v = v + excluded.v, n = n + 1 RETURNING *",
        "INSERT INTO kv(k, v) VALUES('b', 7) ON CONFLICT DO NOTHING RETURNING k",
        "INSERT INTO kv(k, v) VALUES('c', 3) ON CONFLICT(k) DO UPDATE SET v = 0 RETURNING k, v",
        "INSERT INTO kv(k, v) VALUES('c', 9) ON CONFLICT(k) DO UPDATE SET v = excluded.v WHERE excluded.v > 100",
        "INSERT INTO u VALUES(1, 'x@y', 1), (2, 'z@y', 1)",
        "INSERT INTO u VALUES(3, 'x@y', 1) ON CONFLICT(email) DO UPDATE SET hits = hits + 1 RETURNING id, hits",
        "INSERT INTO u VALUES(2, 'new@y', 5) ON CONFLICT(id) DO UPDATE SET email = excluded.email RETURNING email",
        "UPDATE kv SET v = v * 2 WHERE k <> 'b' RETURNING k, v",
        "DELETE FROM u WHERE hits > 1 RETURNING id, email",
        "SELECT * FROM kv ORDER BY k",
        "SELECT * FROM u ORDER BY id",
    ];
    for sql in script {
        common::same_rows(&mut b, &s, sql, false);
    }
    // A conflict no clause names is still an error.
    let e = b
        .execute(
            "INSERT INTO u VALUES(9, 'new@y', 0) ON CONFLICT(id) DO NOTHING",
            &[],
        )
        .unwrap_err();
    assert_eq!(e.code(), beechdb_sql::codes::SQLITE_CONSTRAINT_UNIQUE);
    assert_eq!(e.to_string(), "UNIQUE constraint failed: u.email");
}

/// RETURNING's columns are named as a SELECT's: an alias, a column's name, or else the
/// expression's text as typed.
#[test]
fn returning_columns_are_named_as_in_sqlite() {
    let setup = "CREATE TABLE kv(k TEXT PRIMARY KEY, v INTEGER)";
    let (_db, mut ours, lite) = common::both(setup);
    for sql in [
        "INSERT INTO kv VALUES('a', 1) RETURNING k, v * 2, v+1 AS w, kv.v, *, upper( k ), (v), ((v)+1)",
        "UPDATE kv SET v = v + 1 RETURNING v - 1, 'x'",
        "DELETE FROM kv RETURNING length(k)",
    ] {
        common::same_names(&mut ours, &lite, sql);
        lite.execute_batch(sql).unwrap();
    }
}
