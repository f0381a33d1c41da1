//! Reads that an index answers alone (SQLite's covering index): an ORDER BY an index's
//! columns with a LIMIT, when the statement reads nothing else of the table, takes the
//! values from the index entries instead of the rows. Checked against SQLite (rusqlite,
//! bundled) on values that test the way back from a key to a value: integers at the ends
//! of their range, reals in INTEGER and REAL columns, text with NULs, blobs, NULLs,
//! descending parts, and columns an entry cannot give back (BLOB affinity, NOCASE), which
//! are read from the row.

mod common;

#[test]
fn covering_reads_match_sqlite() {
    let mut setup = String::from(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, i INTEGER, n NUMERIC, r REAL, s TEXT, b BLOB, x, c TEXT COLLATE NOCASE);
         CREATE INDEX t_i ON t(i);
         CREATE INDEX t_nr ON t(n DESC, r);
         CREATE INDEX t_s ON t(s DESC);
         CREATE INDEX t_x ON t(x);
         CREATE INDEX t_c ON t(c);
         CREATE INDEX t_b ON t(b);",
    );
    let values = [
        "NULL",
        "0",
        "-1",
        "9223372036854775807",
        "9223372036854775806",
        "-9223372036854775808",
        "9007199254740993",
        "2.5",
        "-0.75",
        "3.0",
        "1e300",
        "-1e19",
        "'12'",
        "'x'",
        "'a' || char(0) || 'b'",
        "x'00ff'",
        "'Abc'",
        "9223372036854775808.0",
    ];
    for (k, v) in values.iter().enumerate() {
        let w = values[(k * 7) % values.len()];
        setup += &format!(
            "INSERT INTO t(i, n, r, s, b, x, c) VALUES ({v}, {v}, {w}, {v}, {v}, {v}, {v});"
        );
    }
    let (_db, mut ours, lite) = common::both(&setup);
    let queries = [
        "SELECT id, i FROM t ORDER BY i LIMIT 100",
        "SELECT i, typeof(i) FROM t ORDER BY i DESC LIMIT 100",
        "SELECT id, n, r, typeof(n), typeof(r) FROM t ORDER BY n DESC, r LIMIT 100",
        "SELECT s, hex(s), typeof(s) FROM t ORDER BY s DESC LIMIT 100",
        "SELECT x, typeof(x) FROM t ORDER BY x LIMIT 100",
        "SELECT c FROM t ORDER BY c LIMIT 100",
        "SELECT hex(b), typeof(b) FROM t ORDER BY b LIMIT 100",
        "SELECT id, i FROM t WHERE i < 5 ORDER BY i DESC LIMIT 3",
        "SELECT id, i FROM t WHERE i > 0 AND i < 100 ORDER BY i LIMIT 5",
        "SELECT i FROM t ORDER BY i LIMIT 3 OFFSET 2",
    ];
    for q in queries {
        common::same_rows(&mut ours, &lite, q, false);
    }
    // Read inside a transaction, from entries it wrote itself.
    for sql in [
        "BEGIN",
        "INSERT INTO t(i, s) VALUES (-5, 'zz'), (7, 'zy')",
        "DELETE FROM t WHERE i = 0",
        "SELECT id, i FROM t ORDER BY i LIMIT 4",
        "SELECT s, id FROM t ORDER BY s DESC LIMIT 4",
        "COMMIT",
    ] {
        common::same_rows(&mut ours, &lite, sql, false);
    }
    for (q, covered) in [
        ("SELECT id, i FROM t ORDER BY i LIMIT 5", true),
        (
            "SELECT id, s FROM t WHERE s < 'm' ORDER BY s DESC LIMIT 5",
            true,
        ),
        ("SELECT id, i, s FROM t ORDER BY i LIMIT 5", false),
        ("SELECT c FROM t ORDER BY c LIMIT 5", false),
    ] {
        let plan = common::plan_of(&mut ours, q).join("\n");
        assert_eq!(plan.contains("COVERING INDEX"), covered, "{q}: {plan}");
    }
}
