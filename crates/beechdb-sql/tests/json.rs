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

/// The functions that edit JSON, quote it, print it, and the two aggregates: checked against
/// SQLite, errors included.
#[test]
fn json_edits_and_aggregates_match_sqlite() {
    let setup = "CREATE TABLE kv(g, k, v);
        INSERT INTO kv VALUES (1, 'a', 1), (1, 'b', 'two'), (1, 'c', NULL), (2, 'x', 2.5),
                              (2, 'y', '[1]'), (3, 'z', 0);";
    let (_db, mut b, s) = common::both(setup);
    for sql in [
        r#"SELECT json_set('{"a":1}', '$.b', 2), json_set('{}', '$.a.b', 1), json_insert('{}', '$.a[0]', 1)"#,
        r#"SELECT json_set('[1,2]', '$[1]', 9, '$[#]', 3, '$[5]', 7), json_insert('[1,2]', '$[0]', 9, '$[#]', 3)"#,
        r#"SELECT json_replace('{"a":1}', '$.a', 'x', '$.b', 2), json_set('{"a":1}', '$.a', json('[1,2]'))"#,
        r#"SELECT json_set('{"a":1}', '$.a', '[1,2]'), json_set('{"a":1}', '$.a', json_array(1, 'x'))"#,
        r#"SELECT json_insert('{"a":{"b":1}}', '$.a.c.d', 5), json_set('{"a":5}', '$.a.b', 1), json_set('[]', '$.a', 1)"#,
        r#"SELECT json_set('{}', '$[0]', 1), json_set(NULL, '$.a', 1), json_set('{}', NULL, 1), json_set('{"a":1}', '$."x y"', 2)"#,
        r#"SELECT json_set('{"a":[1]}', '$.a[#-1]', 7), json_set('{"a":1}', '$.a', 1.5), json_replace('[1,2,3]', '$[#-1]', 'z')"#,
        r#"SELECT json_insert('[1,2]', '$[2]', 3), json_set('{"a":[]}', '$.a[0]', 1), json_set('{"a":{}}', '$.a[0]', 1)"#,
        r#"SELECT json_insert('{}', '$.a[1]', 1), json_set('{}', '$.a[#]', 1), json_replace('{"a":[1]}', '$.a[#]', 2)"#,
        r#"SELECT json_set('{"a":1,"b":2}', '$.a', NULL), json_insert('{"a":{"b":[1,{"c":2}]}}', '$.a.b[1].d', 'e')"#,
        r#"SELECT json_remove('{"a":1,"b":[1,2,3]}', '$.b[1]', '$.a'), json_remove('[1,2,3]', '$[#-1]', '$[0]')"#,
        r#"SELECT json_remove('{}', '$'), json_remove('{"a":1}'), json_remove('[1,2]', '$[5]'), json_remove(NULL, '$.a')"#,
        r#"SELECT json_patch('{"a":1,"b":{"c":2}}', '{"b":{"c":null,"d":3},"e":[1]}'), json_patch('[1]', '{"a":1}'), json_patch('{"a":1}', '[2]')"#,
        r#"SELECT json_quote('x"y'), json_quote(1.5), json_quote(NULL), json_quote(json('[1]')), json_quote(3)"#,
        r#"SELECT json_object('k', json_set('{}', '$.a', 1)), json_array(json_remove('[1,2]', '$[0]'))"#,
        "SELECT g, json_group_array(v) FROM kv GROUP BY g ORDER BY g",
        "SELECT g, json_group_object(k, v) FROM kv GROUP BY g ORDER BY g",
        "SELECT json_group_array(json_object('k', k)) FROM kv WHERE g = 1",
        "SELECT json_group_array(json_extract('{\"a\":[1,2]}', '$.a')) FROM kv WHERE g = 3",
        "SELECT json_group_array(v) FROM kv WHERE g > 9",
        "SELECT json_group_object(k, v) FROM kv WHERE g > 9",
        "SELECT json_group_object(NULL, 1), json_group_object(k, g) FROM (SELECT NULL AS k, 1 AS g UNION ALL SELECT 'a', 2)",
        "SELECT json_object('all', (SELECT json_group_array(k) FROM kv))",
        "SELECT k, json_group_array(k) OVER (ORDER BY k ROWS 1 PRECEDING) FROM kv ORDER BY k",
        r#"SELECT json_pretty('{"a":[1,2,{}],"b":{"c":"d"},"e":[]}'), json_pretty('[1,{"x":null}]', '  ')"#,
        "UPDATE kv SET v = json_set(coalesce(v, '{}'), '$.seen', 1) WHERE v IS NULL RETURNING v",
    ] {
        common::same_rows(&mut b, &s, sql, false);
    }
    for bad in [
        r#"SELECT json_set('{"a":1}', '$.a')"#,
        "SELECT json_set('x', '$.a', 1)",
        "SELECT json_set('{}', 'a', 1)",
        "SELECT json_remove('{}', '$.')",
        "SELECT json_insert('[]', '$[x]', 1)",
        "SELECT json_patch('{', '{}')",
        "SELECT json_group_array()",
        "SELECT json_group_object('a')",
    ] {
        common::same_outcome(&mut b, &s, bad);
    }
}

/// `json_each` and `json_tree` in FROM: alone, joined to a table whose column they read
/// (called again for each of its rows), in a LEFT JOIN, in subqueries, with conditions on
/// their columns; every column but `id` and `parent` (SQLite's are offsets in its own
/// encoding), against SQLite.
#[test]
fn json_table_functions_match_sqlite() {
    let setup = r#"CREATE TABLE docs(id INTEGER PRIMARY KEY, body TEXT);
        INSERT INTO docs(body) VALUES
          ('{"name":"ann","tags":["a","b"],"n":{"x":1,"y":[true,null,2.5]},"odd key":0}'),
          ('{"name":"bob","tags":[]}'),
          ('[1,"two",{"three":3}]'),
          ('7'),
          (NULL);"#;
    let (_db, mut b, s) = common::both(setup);
    let cols = "key, value, type, atom, fullkey, path";
    for sql in [
        format!("SELECT {cols} FROM json_each('[1,2,{{\"a\":[3]}}]')"),
        format!("SELECT {cols} FROM json_each('{{\"a\":1,\"b c\":[2],\"_d\":null}}')"),
        format!("SELECT {cols} FROM json_each('5')"),
        format!("SELECT {cols} FROM json_each('{{\"a\":{{\"b\":[1,2]}}}}', '$.a.b')"),
        format!("SELECT {cols} FROM json_each('{{\"a\":1}}', '$.nope')"),
        format!("SELECT {cols} FROM json_each(NULL)"),
        format!("SELECT {cols} FROM json_tree('{{\"a\":{{\"b\":[1,{{\"c\":2}}]}},\"d\":true}}')"),
        format!("SELECT {cols} FROM json_tree('{{\"a\":{{\"b\":[1,{{\"c\":2}}]}}}}', '$.a')"),
        format!("SELECT {cols} FROM json_tree('[[1],[2,[3]]]', '$[1]')"),
        format!("SELECT docs.id, {cols} FROM docs, json_each(docs.body) ORDER BY docs.id"),
        format!("SELECT docs.id, {cols} FROM docs, json_tree(docs.body) ORDER BY docs.id"),
        "SELECT d.id, t.value FROM docs AS d JOIN json_each(d.body, '$.tags') AS t ORDER BY d.id".into(),
        "SELECT d.id, t.value FROM docs AS d LEFT JOIN json_each(d.body, '$.tags') AS t ORDER BY d.id, t.key".into(),
        "SELECT id FROM docs WHERE EXISTS (SELECT 1 FROM json_each(docs.body, '$.tags') WHERE value = 'b')".into(),
        "SELECT id, (SELECT count(*) FROM json_tree(docs.body) WHERE type = 'integer') FROM docs ORDER BY id".into(),
        "SELECT value, count(*) FROM docs, json_each(docs.body, '$.tags') GROUP BY value ORDER BY value".into(),
        "SELECT key FROM json_each('{\"a\":1,\"b\":2,\"c\":3}') WHERE value >= 2 ORDER BY key DESC".into(),
        "SELECT key, value FROM json_each('[10,20]') AS e WHERE e.type = 'integer'".into(),
        "SELECT json_group_array(value) FROM json_each('[3,1,2]')".into(),
        "SELECT e.value, f.value FROM json_each('[1,2]') AS e, json_each('[\"x\",\"y\"]') AS f ORDER BY 1, 2".into(),
        "SELECT j.value FROM json_each('[1,2,3]') AS j WHERE j.value IN (SELECT id FROM docs)".into(),
        "SELECT json, root FROM json_each('[1]', '$')".into(),
    ] {
        common::same_rows(&mut b, &s, &sql, false);
    }
    common::same_names(&mut b, &s, "SELECT * FROM json_each('[1]')");
    common::same_names(&mut b, &s, "SELECT * FROM json_tree('[1]') AS t");
    for bad in [
        "SELECT * FROM json_each('[1')",
        "SELECT * FROM json_each('[1]', 'x')",
        "SELECT * FROM json_each('[1]', '$', 3)",
        "SELECT * FROM no_such_function(1)",
    ] {
        common::same_outcome(&mut b, &s, bad);
    }
}
