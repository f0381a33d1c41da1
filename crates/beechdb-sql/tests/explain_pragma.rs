//! EXPLAIN QUERY PLAN shows the access path chosen for each table (and changes nothing);
//! PRAGMA table_info, index_list, index_info and table_list describe the schema.

use beechdb_sql::{Database, Value};

fn details(c: &mut beechdb_sql::Connection, sql: &str) -> Vec<String> {
    c.query(&format!("EXPLAIN QUERY PLAN {sql}"), &[])
        .unwrap()
        .rows
        .iter()
        .map(|r| r[3].to_text())
        .collect()
}

#[test]
fn query_plans_name_their_access_paths() {
    let db = Database::open_in_memory().unwrap();
    let mut c = db.connect();
    c.execute_batch(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, k INT, v TEXT); CREATE INDEX t_k ON t(k);
         CREATE TABLE u(id INTEGER PRIMARY KEY, t_id INT); INSERT INTO t VALUES(1, 2, 'x');",
    )
    .unwrap();
    assert_eq!(
        details(&mut c, "SELECT * FROM t WHERE id = ?"),
        ["SEARCH t USING INTEGER PRIMARY KEY (rowid=?)"]
    );
    assert_eq!(
        details(&mut c, "SELECT * FROM t WHERE k = 5 ORDER BY v"),
        [
            "SEARCH t USING INDEX t_k (k=?)",
            "USE TEMP B-TREE FOR ORDER BY"
        ]
    );
    assert_eq!(
        details(
            &mut c,
            "SELECT * FROM u JOIN t ON t.id = u.t_id WHERE u.id BETWEEN 1 AND 9"
        ),
        [
            "SEARCH u USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)",
            "SEARCH t USING INTEGER PRIMARY KEY (rowid=?)"
        ]
    );
    assert_eq!(details(&mut c, "SELECT * FROM t WHERE v = 'x'"), ["SCAN t"]);
    assert_eq!(
        details(&mut c, "UPDATE t SET v = 'y' WHERE k = 2"),
        ["SEARCH t USING INDEX t_k (k=?)"]
    );
    assert_eq!(details(&mut c, "DELETE FROM t"), ["SCAN t"]);
    let v = c.query("SELECT v FROM t", &[]).unwrap();
    assert_eq!(
        v.rows,
        vec![vec![Value::from("x")]],
        "EXPLAIN changed nothing"
    );
}

#[test]
fn pragmas_describe_the_schema() {
    let db = Database::open_in_memory().unwrap();
    let mut c = db.connect();
    c.execute_batch(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE, k INT);
         CREATE INDEX t_k ON t(k DESC); CREATE VIEW v AS SELECT id FROM t;",
    )
    .unwrap();
    let info = c.query("PRAGMA table_info(t)", &[]).unwrap();
    assert_eq!(info.rows[1][1], Value::from("email"));
    assert_eq!(info.rows[1][3], Value::Integer(1));
    assert_eq!(info.rows[0][5], Value::Integer(1));
    let list = c.query("PRAGMA index_list(t)", &[]).unwrap();
    assert_eq!(
        *list.columns,
        ["seq", "name", "unique", "origin", "partial"]
    );
    let names: Vec<(String, i64, String)> = list
        .rows
        .iter()
        .map(|r| (r[1].to_text(), r[2].as_i64(), r[3].to_text()))
        .collect();
    assert!(names.contains(&("t_k".into(), 0, "c".into())));
    assert!(names.contains(&("sqlite_autoindex_t_1".into(), 1, "u".into())));
    let cols = c.query("PRAGMA index_info(t_k)", &[]).unwrap();
    assert_eq!(
        cols.rows,
        vec![vec![Value::Integer(0), Value::Integer(2), Value::from("k")]]
    );
    let tables = c.query("PRAGMA table_list", &[]).unwrap();
    let kinds: Vec<(String, String)> = tables
        .rows
        .iter()
        .map(|r| (r[1].to_text(), r[2].to_text()))
        .collect();
    assert!(kinds.contains(&("t".into(), "table".into())));
    assert!(kinds.contains(&("v".into(), "view".into())));
}

#[test]
fn user_version_is_kept_and_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Database::open(dir.path()).unwrap();
        let mut c = db.connect();
        let v = c.query("PRAGMA user_version", &[]).unwrap();
        assert_eq!(v.rows, vec![vec![Value::Integer(0)]]);
        c.execute("PRAGMA user_version = 7", &[]).unwrap();
        c.execute_batch("BEGIN; PRAGMA user_version = 8; ROLLBACK;")
            .unwrap();
        let v = c.query("PRAGMA user_version", &[]).unwrap();
        assert_eq!(
            v.rows,
            vec![vec![Value::Integer(7)]],
            "rolled back with its transaction"
        );
        db.env().clone().close().unwrap();
    }
    let db = Database::open(dir.path()).unwrap();
    let v = db.connect().query("PRAGMA user_version", &[]).unwrap();
    assert_eq!(v.rows, vec![vec![Value::Integer(7)]]);
}

#[test]
fn synchronous_sets_each_connections_commit_durability() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path()).unwrap();
    let mut c = db.connect();
    let level = |c: &mut beechdb_sql::Connection| {
        c.query("PRAGMA synchronous", &[]).unwrap().rows[0][0].as_i64()
    };
    let fsyncs = || db.env().stat().unwrap().txn.unwrap().log.unwrap().fsyncs;
    // The environment's default durability (SYNC) reads as FULL.
    assert_eq!(level(&mut c), 2);
    c.execute("CREATE TABLE t(x)", &[]).unwrap();
    // Ten commits at each level: FULL and EXTRA fsync each (one writer, so no group
    // shares an fsync); NORMAL (write, no sync) and OFF never do.
    for (set, read, synced) in [
        ("OFF", 0, false),
        ("normal", 1, false),
        ("2", 2, true),
        ("extra", 3, true),
        ("0", 0, false),
        ("bogus", 1, false),
    ] {
        c.execute(&format!("PRAGMA synchronous = {set}"), &[])
            .unwrap();
        assert_eq!(level(&mut c), read, "{set}");
        let before = fsyncs();
        for i in 0..10 {
            c.execute("INSERT INTO t VALUES(?)", &[Value::Integer(i)])
                .unwrap();
        }
        let syncs = fsyncs() - before;
        match synced {
            true => assert!(syncs >= 10, "{set}: {syncs} fsyncs"),
            false => assert_eq!(syncs, 0, "{set}"),
        }
    }
    // Another connection keeps the default; a transaction cannot change the level.
    assert_eq!(level(&mut db.connect()), 2);
    c.execute("BEGIN", &[]).unwrap();
    assert_eq!(
        c.execute("PRAGMA synchronous = FULL", &[])
            .unwrap_err()
            .to_string(),
        "Safety level may not be changed inside a transaction"
    );
}
