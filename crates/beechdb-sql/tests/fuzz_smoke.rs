//! A short, deterministic fuzz of the SQL front end in the default test run (the libFuzzer
//! target `fuzz/fuzz_targets/sql_frontend.rs` runs the same against coverage-guided input):
//! statements of the sqllogictest corpus, mutated at random (bytes deleted, duplicated,
//! swapped, spliced with other statements' text), run against a small schema. Every input
//! gives rows or a typed error, never a panic, and the database stays sound.
//! `BEECH_SQL_FUZZ` sets the number of inputs (default 5,000).

use beechdb_sql::Database;
use rand::{Rng, SeedableRng};

#[test]
fn mutated_statements_never_panic() {
    let n: usize = std::env::var("BEECH_SQL_FUZZ")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5_000);
    // The schema and rows of select1.test, and its queries as seeds.
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/sqllogictest/select1.test");
    let text =
        std::fs::read_to_string(&corpus).unwrap_or_else(|e| panic!("{}: {e}", corpus.display()));
    let (mut setup, mut seeds) = (Vec::new(), Vec::new());
    for rec in text.split("\n\n") {
        let mut lines = rec.lines().filter(|l| {
            !l.starts_with('#') && !l.starts_with("skipif") && !l.starts_with("onlyif")
        });
        let Some(head) = lines.next() else { continue };
        let sql = lines
            .take_while(|l| *l != "----")
            .collect::<Vec<_>>()
            .join("\n");
        if head.starts_with("statement ok") {
            setup.push(sql);
        } else if head.starts_with("query") {
            seeds.push(sql);
        }
    }
    seeds.extend(
        [
            "SELECT a, b, c FROM t1 WHERE a IN (SELECT b FROM t1) ORDER BY 2 DESC LIMIT 2 OFFSET 1",
            "SELECT count(*), group_concat(d, '-') FROM t1 LEFT JOIN t1 AS x ON x.a = t1.b GROUP BY t1.e HAVING count(*) > 0",
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r WHERE n < 5) SELECT sum(n) FROM r LIMIT 3",
            "INSERT OR REPLACE INTO t1 VALUES(1, 2, 3, 4, 5); UPDATE t1 SET b = b * 2 WHERE a BETWEEN 100 AND 120",
            "SELECT CAST(c AS TEXT), typeof(c), printf('%5.2f|%d', c, a), substr(b, -1) FROM t1",
            "CREATE VIEW v AS SELECT a, b FROM t1; SELECT * FROM v NATURAL JOIN t1 UNION SELECT 1, 2, 3, 4, 5, 6 EXCEPT SELECT 1, a, b, c, d, e FROM t1",
        ]
        .map(String::from),
    );
    let db = Database::open_in_memory().unwrap();
    let mut c = db.connect();
    for s in &setup {
        c.execute_batch(s).unwrap();
    }
    let rows = c.query("SELECT count(*) FROM t1", &[]).unwrap().rows[0][0].clone();
    let mut rng = rand::rngs::StdRng::seed_from_u64(17);
    let (mut ok, mut errors) = (0, 0);
    for i in 0..n {
        let mut s: Vec<u8> = seeds[rng.gen_range(0..seeds.len())].clone().into_bytes();
        for _ in 0..rng.gen_range(1..4) {
            if s.is_empty() {
                break;
            }
            let at = rng.gen_range(0..s.len());
            match rng.gen_range(0..5) {
                0 => {
                    s.remove(at);
                }
                1 => {
                    let b = s[at];
                    s.insert(at, b);
                }
                2 => {
                    let alphabet = b"();,'\"*+-=<>|0123456789abcxyz \n";
                    s[at] = alphabet[rng.gen_range(0..alphabet.len())];
                }
                3 => {
                    let other = seeds[rng.gen_range(0..seeds.len())].as_bytes();
                    let from = rng.gen_range(0..other.len().max(1));
                    let len = rng
                        .gen_range(0..20)
                        .min(other.len() - from.min(other.len()));
                    s.splice(at..at, other[from..from + len].iter().copied());
                }
                _ => {
                    let end = (at + rng.gen_range(1..10)).min(s.len());
                    s.drain(at..end);
                }
            }
        }
        let sql = String::from_utf8_lossy(&s).into_owned();
        c.execute("BEGIN", &[]).unwrap();
        let started = std::time::Instant::now();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.execute_batch(&sql)));
        match r {
            Ok(Ok(())) => ok += 1,
            Ok(Err(_)) => errors += 1,
            Err(_) => panic!("input {i} panicked: {sql:?}"),
        }
        if started.elapsed() > std::time::Duration::from_millis(200) {
            eprintln!("slow input {i} ({:?}): {sql:?}", started.elapsed());
        }
        if !c.is_autocommit() {
            c.execute("ROLLBACK", &[]).unwrap();
        }
    }
    println!("{n} inputs: {ok} ran, {errors} refused with an error");
    let r = c.query("SELECT count(*) FROM t1", &[]).unwrap();
    assert_eq!(r.rows[0][0], rows, "rolled back every time");
    assert!(ok > n / 50 && errors > n / 50);
}
