//! Aggregate functions over random tables of every type give SQLite's answers (rusqlite,
//! bundled): random columns, groups, DISTINCT, FILTER and HAVING (`BEECH_AGG_SEEDS` sets
//! how many cases; 1,000 by default).

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn value(rng: &mut StdRng) -> String {
    match rng.gen_range(0..10) {
        0 | 1 => "NULL".into(),
        2 | 3 => rng.gen_range(-5..5).to_string(),
        4 => [
            "9223372036854775807",
            "-9223372036854775808",
            "4611686018427387904",
        ][rng.gen_range(0..3)]
        .into(),
        5 => format!("{:.2}", rng.gen_range(-10.0..10.0)),
        6 => ["0.1", "1e308", "-1e308", "2.5", "-0.0"][rng.gen_range(0..5)].into(),
        7 => ["'a'", "'b'", "'10'", "''", "' 3'", "'x,y'"][rng.gen_range(0..6)].into(),
        8 => ["x'00'", "x'41'", "x''"][rng.gen_range(0..3)].into(),
        _ => rng.gen_range(0..3).to_string(),
    }
}

fn aggregate(rng: &mut StdRng) -> String {
    let col = ["a", "b", "c", "a + b", "a || c"][rng.gen_range(0..5)];
    let distinct = if rng.gen_bool(0.25) { "DISTINCT " } else { "" };
    let call = match rng.gen_range(0..11) {
        0 => format!("count({distinct}{col})"),
        1 => "count(*)".to_string(),
        2 => format!("sum({distinct}{col})"),
        3 => format!("total({distinct}{col})"),
        4 => format!("avg({distinct}{col})"),
        5 => format!("min({col})"),
        6 => format!("max({col})"),
        7 => format!("group_concat({distinct}{col})"),
        8 => format!(
            "group_concat({col}, '{}')",
            ["-", "", ", "][rng.gen_range(0..3)]
        ),
        9 => format!("string_agg({col}, ';')"),
        _ => format!("typeof(sum({col}))"),
    };
    match rng.gen_range(0..5) {
        0 => format!(
            "{call} FILTER (WHERE {} > 0)",
            ["a", "b", "c"][rng.gen_range(0..3)]
        ),
        _ => call,
    }
}

#[test]
fn random_aggregates_match_sqlite() {
    let seeds: u64 = common::env_count("BEECH_AGG_SEEDS", 1_000);
    for seed in 0..seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        let rows: Vec<String> = (0..rng.gen_range(0..12))
            .map(|_| {
                format!(
                    "({}, {}, {}, {})",
                    rng.gen_range(0..3),
                    value(&mut rng),
                    value(&mut rng),
                    value(&mut rng)
                )
            })
            .collect();
        let setup = common::with_rows("CREATE TABLE t(g, a, b, c);", "INSERT INTO t VALUES", &rows);
        let (_db, mut ours, lite) = common::both(&setup);
        let calls: Vec<String> = (0..3).map(|_| aggregate(&mut rng)).collect();
        let sql = match rng.gen_range(0..3) {
            0 => format!("SELECT {} FROM t", calls.join(", ")),
            1 => format!(
                "SELECT g, {} FROM t GROUP BY g ORDER BY g",
                calls.join(", ")
            ),
            _ => format!(
                "SELECT g, {} FROM t GROUP BY g HAVING {} ORDER BY g",
                calls.join(", "),
                ["count(*) > 1", "sum(a) IS NOT NULL", "max(b) > 0"][rng.gen_range(0..3)]
            ),
        };
        common::same_outcome(&mut ours, &lite, &sql);
    }
}
