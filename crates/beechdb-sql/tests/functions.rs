//! Scalar functions and operators on random arguments of every type give SQLite's answers
//! (rusqlite, bundled): each case is one SELECT of several random calls, nested up to two
//! deep (`BEECH_FUNC_SEEDS` sets how many cases; 3,000 by default). Math functions are left
//! out: rusqlite's SQLite is built without them (tests/quirks.rs checks them).

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Functions with their least and most argument counts.
const FUNCTIONS: &[(&str, usize, usize)] = &[
    ("abs", 1, 1),
    ("coalesce", 2, 4),
    ("ifnull", 2, 2),
    ("nullif", 2, 2),
    ("iif", 3, 3),
    ("typeof", 1, 1),
    ("length", 1, 1),
    ("octet_length", 1, 1),
    ("upper", 1, 1),
    ("lower", 1, 1),
    ("substr", 2, 3),
    ("substring", 2, 3),
    ("instr", 2, 2),
    ("trim", 1, 2),
    ("ltrim", 1, 2),
    ("rtrim", 1, 2),
    ("replace", 3, 3),
    ("round", 1, 2),
    ("hex", 1, 1),
    ("unhex", 1, 2),
    ("quote", 1, 1),
    ("min", 2, 4),
    ("max", 2, 4),
    ("char", 0, 4),
    ("unicode", 1, 1),
    ("sign", 1, 1),
    ("zeroblob", 1, 1),
    ("concat", 1, 4),
    ("concat_ws", 2, 4),
    ("likely", 1, 1),
    ("unlikely", 1, 1),
    ("format", 1, 3),
];

/// Binary operators, written between their operands.
const OPERATORS: &[&str] = &[
    "+", "-", "*", "/", "%", "||", "=", "<>", "<", ">=", "IS", "IS NOT", "AND", "OR", "&", "|",
    "<<", ">>", "LIKE", "GLOB", "NOT LIKE",
];

fn literal(rng: &mut StdRng) -> String {
    match rng.gen_range(0..16) {
        0 => "NULL".into(),
        1 => rng.gen_range(-10..10).to_string(),
        2 => rng.gen_range(-1_000_000i64..1_000_000).to_string(),
        3 => [
            "9223372036854775807",
            "-9223372036854775808",
            "4294967296",
            "0",
        ][rng.gen_range(0..4)]
        .into(),
        4 => format!("{:.3}", rng.gen_range(-100.0..100.0)),
        5 => [
            "0.5",
            "-0.5",
            "2.5",
            "1e300",
            "-0.0",
            "1.5e-7",
            "12345.6789",
            "9.0",
        ][rng.gen_range(0..8)]
        .into(),
        6 => [
            "''",
            "'abc'",
            "'ABC def'",
            "'héllo'",
            "'日本語'",
            "' 12 '",
            "'12x'",
            "'-3.5e2'",
        ][rng.gen_range(0..8)]
        .into(),
        7 => [
            "'a%'",
            "'%b_'",
            "'*c?'",
            "'[a-c]*'",
            "'x''y'",
            "'  pad  '",
            "'0x1F'",
            "'1e5'",
        ][rng.gen_range(0..8)]
        .into(),
        // (Blobs that are not UTF-8 are left out: SQLite keeps their bytes in text, which
        // BeechDB's text cannot hold.)
        8 => [
            "x''",
            "x'00'",
            "x'414243'",
            "x'c3a9'",
            "x'e697a5'",
            "x'0041'",
        ][rng.gen_range(0..6)]
        .into(),
        9 => ["'Ax'", "'xA'", "'tab\there'", "'ǅ'", "'ß'", "'İ'"][rng.gen_range(0..6)].into(),
        10 => rng.gen_range(-3..12).to_string(),
        11 => ["'abcabc'", "'bc'", "'a'", "'c'"][rng.gen_range(0..4)].into(),
        12 => ["'414243'", "'4g'", "'41 42'", "'-'", "'41-42'"][rng.gen_range(0..5)].into(),
        13 => format!("{}", rng.gen_range(-3.0..3.0f64)),
        14 => {
            ["true", "false", "CAST(1 AS REAL)", "CAST('7' AS NUMERIC)"][rng.gen_range(0..4)].into()
        }
        _ => ["'%'", "'_'", "'\\'", "' '"][rng.gen_range(0..4)].into(),
    }
}

fn expr(rng: &mut StdRng, depth: u32) -> String {
    if depth == 0 || rng.gen_bool(0.35) {
        return literal(rng);
    }
    match rng.gen_range(0..10) {
        0..=5 => {
            let (name, least, most) = FUNCTIONS[rng.gen_range(0..FUNCTIONS.len())];
            if name == "unhex" {
                // Hex of UTF-8 only: the bytes may reach text (see `literal`).
                let hex = [
                    "'414243'",
                    "'4g'",
                    "'41 42'",
                    "'c3a9'",
                    "'e6-97-a5'",
                    "''",
                    "NULL",
                ];
                let pass = ["", ", '-'", ", ' '", ", NULL", ", '- '"];
                return format!(
                    "unhex({}{})",
                    hex[rng.gen_range(0..hex.len())],
                    pass[rng.gen_range(0..pass.len())]
                );
            }
            let n = rng.gen_range(least..=most);
            let args: Vec<String> = (0..n).map(|_| expr(rng, depth - 1)).collect();
            format!("{name}({})", args.join(", "))
        }
        6..=7 => {
            let op = OPERATORS[rng.gen_range(0..OPERATORS.len())];
            format!("({} {op} {})", expr(rng, depth - 1), expr(rng, depth - 1))
        }
        8 => {
            let ty = [
                "INTEGER",
                "REAL",
                "TEXT",
                "BLOB",
                "NUMERIC",
                "INT",
                "VARCHAR(3)",
                "FLOAT",
            ][rng.gen_range(0..8)];
            format!("CAST({} AS {ty})", expr(rng, depth - 1))
        }
        _ => {
            let unary = ["-", "+", "~", "NOT "][rng.gen_range(0..4)];
            format!("{unary}({})", expr(rng, depth - 1))
        }
    }
}

#[test]
fn random_calls_match_sqlite() {
    let seeds: u64 = common::env_count("BEECH_FUNC_SEEDS", 3_000);
    let (_db, mut ours, lite) = common::both("CREATE TABLE t(a);");
    for seed in 0..seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        let calls: Vec<String> = (0..4).map(|_| expr(&mut rng, 2)).collect();
        common::same_outcome(&mut ours, &lite, &format!("SELECT {}", calls.join(", ")));
    }
}

/// The errors the comparisons above meet only now and then, each made to happen: SQLite's
/// message, or its answer, for every one.
#[test]
fn rare_errors_match_sqlite() {
    let (_db, mut ours, lite) = common::both("CREATE TABLE t(a);");
    for sql in [
        "SELECT 'a' LIKE zeroblob(50001), 'a' GLOB zeroblob(50001), NULL LIKE zeroblob(50001)",
        "SELECT 'a' LIKE zeroblob(50000)",
        "SELECT sum(a) OVER (ORDER BY a ROWS BETWEEN 1 FOLLOWING AND CURRENT ROW) FROM t",
        "SELECT sum(a) OVER (ORDER BY a ROWS BETWEEN CURRENT ROW AND 1 PRECEDING) FROM t",
        "SELECT concat()",
        "SELECT concat_ws(',')",
        "SELECT unhex('41', NULL), unhex('4'), unhex(' 41', ' '), timediff('2024-01-01')",
    ] {
        common::same_outcome(&mut ours, &lite, sql);
    }
}
