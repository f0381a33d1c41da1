//! SQLite's introspection pragmas (`table_info`, `table_xinfo`, `index_list`, `index_info`,
//! `index_xinfo`, `foreign_key_list`), which ORMs and schema tools read a database by,
//! checked against SQLite (rusqlite, bundled): defaults as typed, primary key places,
//! views, indexes latest first, foreign keys last declared first, and a name that names
//! nothing giving no rows rather than an error.

mod common;

#[test]
fn introspection_pragmas_match_sqlite() {
    let (_db, mut ours, lite) = common::both(
        "CREATE TABLE t(a int default 5, b text default 'x y', c default (1 + 2),
             d default -3, e default CURRENT_TIMESTAMP, f text primary key, g default null,
             h NOT NULL default \"q\", i default +4.5);
         CREATE TABLE p(x, y, z, primary key (y, x));
         CREATE TABLE r(id INTEGER PRIMARY KEY, u UNIQUE, v);
         CREATE INDEX ix ON p(z DESC, x);
         CREATE INDEX rv ON r(v) WHERE v > 0;
         CREATE INDEX re ON r(v + 1);
         CREATE VIEW w AS SELECT a, b || 1 AS bb, 3 FROM t;
         CREATE TABLE ch(id integer primary key, pid references t(f) on delete cascade,
             q, s, k references r, foreign key (q, s) references p(y, x) on update set null);",
    );
    for sql in [
        "PRAGMA table_info(t)",
        "PRAGMA table_info(p)",
        "PRAGMA table_info(r)",
        "PRAGMA table_xinfo(p)",
        "PRAGMA main.table_info(\"ch\")",
        "PRAGMA table_info(w)",
        "PRAGMA index_list(p)",
        "PRAGMA index_list(r)",
        "PRAGMA index_info(ix)",
        "PRAGMA index_xinfo(ix)",
        "PRAGMA index_info(re)",
        "PRAGMA foreign_key_list(ch)",
        "PRAGMA foreign_key_list(t)",
        "PRAGMA table_info(nosuch)",
        "PRAGMA table_xinfo(nosuch)",
        "PRAGMA index_list(nosuch)",
        "PRAGMA index_info(nosuch)",
        "PRAGMA index_xinfo(nosuch)",
        "PRAGMA foreign_key_list(nosuch)",
    ] {
        common::same_rows(&mut ours, &lite, sql, false);
    }
}
