//! Foreign keys with `PRAGMA foreign_keys = ON`, checked against SQLite (rusqlite, bundled):
//! each statement succeeds or fails on both, and the tables end the same.

use beechdb_sql::{Database, Value};

fn dump(
    c: &mut beechdb_sql::Connection,
    s: &rusqlite::Connection,
    table: &str,
) -> (Vec<String>, Vec<String>) {
    let sql = format!("SELECT * FROM {table} ORDER BY 1, 2");
    let ours = c
        .query(&sql, &[])
        .unwrap()
        .rows
        .iter()
        .map(|r| r.iter().map(Value::to_string).collect::<Vec<_>>().join("|"))
        .collect();
    let mut st = s.prepare(&sql).unwrap();
    let n = st.column_count();
    let theirs = st
        .query_map([], |r| {
            Ok((0..n)
                .map(|i| match r.get_ref(i).unwrap() {
                    rusqlite::types::ValueRef::Null => "NULL".to_string(),
                    rusqlite::types::ValueRef::Integer(x) => x.to_string(),
                    rusqlite::types::ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                    other => format!("{other:?}"),
                })
                .collect::<Vec<_>>()
                .join("|"))
        })
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    (ours, theirs)
}

#[test]
fn foreign_keys_match_sqlite() {
    let db = Database::open_in_memory().unwrap();
    let mut b = db.connect();
    let s = rusqlite::Connection::open_in_memory().unwrap();
    let script = [
        "PRAGMA foreign_keys = ON",
        "CREATE TABLE artist(id INTEGER PRIMARY KEY, name TEXT)",
        "CREATE TABLE album(id INTEGER PRIMARY KEY, artist INTEGER REFERENCES artist(id) ON DELETE CASCADE ON UPDATE CASCADE, title TEXT)",
        "CREATE TABLE review(album INTEGER, stars INTEGER, FOREIGN KEY(album) REFERENCES album(id) ON DELETE SET NULL)",
        "CREATE TABLE label(code TEXT PRIMARY KEY, name TEXT)",
        "CREATE TABLE signing(artist INTEGER REFERENCES artist, label TEXT REFERENCES label(code))",
        "INSERT INTO artist VALUES(1, 'a'), (2, 'b')",
        "INSERT INTO album VALUES(10, 1, 'x'), (11, 1, 'y'), (12, 2, 'z')",
        "INSERT INTO album VALUES(13, 9, 'orphan')",
        "INSERT INTO album VALUES(14, NULL, 'no artist')",
        "INSERT INTO review VALUES(10, 5), (11, 3), (12, 4)",
        "INSERT INTO review VALUES(99, 1)",
        "INSERT INTO label VALUES('L1', 'one')",
        "INSERT INTO signing VALUES(1, 'L1')",
        "INSERT INTO signing VALUES(2, 'L2')",
        "UPDATE album SET artist = 7 WHERE id = 12",
        "DELETE FROM label WHERE code = 'L1'",
        "UPDATE artist SET id = 5 WHERE id = 1",
        "DELETE FROM signing",
        "DELETE FROM artist WHERE id = 5",
        "DELETE FROM album WHERE id = 12",
    ];
    for sql in script {
        let (a, t) = (b.execute(sql, &[]), s.execute(sql, []));
        assert_eq!(a.is_ok(), t.is_ok(), "{sql}: {a:?} vs {t:?}");
        if let Err(e) = a {
            if !sql.starts_with("PRAGMA") {
                assert_eq!(
                    e.code(),
                    beechdb_sql::codes::SQLITE_CONSTRAINT_FOREIGNKEY,
                    "{sql}"
                );
            }
        }
    }
    for t in ["artist", "album", "review", "label", "signing"] {
        let (ours, theirs) = dump(&mut b, &s, t);
        assert_eq!(ours, theirs, "{t}");
    }
    // Off by default: a new connection does not check.
    let mut other = db.connect();
    other
        .execute("INSERT INTO album VALUES(20, 1000, 'unchecked')", &[])
        .unwrap();
}
