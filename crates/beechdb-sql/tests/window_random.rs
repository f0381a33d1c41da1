//! Window functions over random tables and frames give SQLite's answers (rusqlite,
//! bundled): partitions, orders with ties and NULLs, ROWS, GROUPS and RANGE frames with
//! every kind of bound and EXCLUDE (`BEECH_WINDOW_SEEDS` sets how many cases; 1,000 by
//! default).

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn bound(rng: &mut StdRng, start: bool) -> String {
    match rng.gen_range(0..5) {
        0 if start => "UNBOUNDED PRECEDING".into(),
        0 => "UNBOUNDED FOLLOWING".into(),
        1 => format!("{} PRECEDING", rng.gen_range(0..3)),
        2 => "CURRENT ROW".into(),
        _ => format!("{} FOLLOWING", rng.gen_range(0..3)),
    }
}

#[test]
fn random_windows_match_sqlite() {
    let seeds: u64 = common::env_count("BEECH_WINDOW_SEEDS", 1_000);
    for seed in 0..seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        let rows: Vec<String> = (0..rng.gen_range(0..12))
            .map(|_| {
                let o = match rng.gen_range(0..5) {
                    0 => "NULL".to_string(),
                    _ => rng.gen_range(0..5).to_string(),
                };
                let v = match rng.gen_range(0..6) {
                    0 => "NULL".to_string(),
                    1 => format!("{:.1}", rng.gen_range(-5.0..5.0)),
                    2 => "'t'".to_string(),
                    _ => rng.gen_range(-5..5).to_string(),
                };
                format!("({}, {o}, {v})", rng.gen_range(0..3))
            })
            .collect();
        let setup = common::with_rows(
            "CREATE TABLE t(id INTEGER PRIMARY KEY, g, o, v);",
            "INSERT INTO t(g, o, v) VALUES",
            &rows,
        );
        let (_db, mut ours, lite) = common::both(&setup);
        let partition = if rng.gen_bool(0.5) {
            "PARTITION BY g "
        } else {
            ""
        };
        // RANGE with an offset takes one ORDER BY term; ties are then in no fixed order,
        // so only functions blind to the order within a frame are used with it.
        let units = ["ROWS", "GROUPS", "RANGE"][rng.gen_range(0..3)];
        let (start, end) = (bound(&mut rng, true), bound(&mut rng, false));
        let offset_range = units == "RANGE"
            && (start.contains("ING") && !start.contains("UNB")
                || end.contains("ING") && !end.contains("UNB"));
        let order = match (offset_range, rng.gen_range(0..3)) {
            (true, 0) => "ORDER BY o DESC",
            (true, _) => "ORDER BY o",
            (false, 0) => "ORDER BY o DESC, id",
            (false, _) => "ORDER BY o, id",
        };
        let exclude = [
            "",
            " EXCLUDE CURRENT ROW",
            " EXCLUDE GROUP",
            " EXCLUDE TIES",
            " EXCLUDE NO OTHERS",
        ][rng.gen_range(0..5)];
        let frame = match rng.gen_range(0..4) {
            0 => String::new(),
            _ => format!(" {units} BETWEEN {start} AND {end}{exclude}"),
        };
        let over = format!("OVER ({partition}{order}{frame})");
        let blind = [
            "sum(v)", "count(*)", "count(v)", "avg(v)", "min(v)", "max(v)", "total(v)",
        ];
        let ordered = [
            "row_number()",
            "rank()",
            "dense_rank()",
            "percent_rank()",
            "cume_dist()",
            "ntile(3)",
            "lag(v)",
            "lead(v, 2, 'd')",
            "first_value(v)",
            "last_value(v)",
            "nth_value(v, 2)",
            "group_concat(v)",
        ];
        let calls: Vec<String> = (0..3)
            .map(|_| {
                let f = match !offset_range && rng.gen_bool(0.5) {
                    true => ordered[rng.gen_range(0..ordered.len())],
                    false => blind[rng.gen_range(0..blind.len())],
                };
                format!("{f} {over}")
            })
            .collect();
        let sql = format!("SELECT id, {} FROM t ORDER BY id", calls.join(", "));
        common::same_outcome(&mut ours, &lite, &sql);
    }
}
