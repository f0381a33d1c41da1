//! The JSON functions on random documents and paths give SQLite's answers (rusqlite,
//! bundled): extraction (`json_extract`, `->`, `->>`, `json_type`, `json_array_length`),
//! edits (`json_set`, `json_insert`, `json_replace`, `json_remove`, `json_patch`),
//! construction from SQL values (`json_array`, `json_object`, `json_quote`), `json`,
//! `json_valid` and the table functions `json_each` / `json_tree` (`BEECH_JSON_SEEDS` sets how
//! many cases; 2,000 by default). Documents are RFC 8259 JSON with distinct keys in each
//! object: JSON5 input and duplicate keys are documented differences (docs/sql-compat.md).

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Number texts, as a document may write them: SQLite keeps each as written. (Exponents are
/// written with a lower-case `e` and a sign: BeechDB writes `1E5` as `1e+5`, see
/// docs/sql-compat.md.)
const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "1",
    "-17",
    "1.0",
    "32.40",
    "2e-2",
    "1e+5",
    "-1.5e+3",
    "0.1",
    "123456789012",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "99999999999999999999",
    "1e+400",
    "-1e-400",
    "3.141592653589793238",
];

const KEYS: &[&str] = &["a", "b", "c", "x1", "key with space", "é", "k.dot", ""];

/// Strings, with the escapes BeechDB writes back as they were written (SQLite keeps every
/// escape as written; BeechDB writes `\/` as `/` and `\u00e9` as `é`: docs/sql-compat.md).
const STRINGS: &[&str] = &[
    r#""""#,
    r#""abc""#,
    r#""a\"q""#,
    r#""tab\tnl\n""#,
    r#""\u0001ctl""#,
    r#""日本""#,
    r#""[1,2]""#,
];

fn document(rng: &mut StdRng, depth: u32) -> String {
    let leaf = depth == 0 || rng.gen_bool(0.3);
    match rng.gen_range(0..if leaf { 4 } else { 6 }) {
        0 => ["null", "true", "false"][rng.gen_range(0..3)].into(),
        1 | 2 => NUMBERS[rng.gen_range(0..NUMBERS.len())].into(),
        3 => STRINGS[rng.gen_range(0..STRINGS.len())].into(),
        4 => {
            let n = rng.gen_range(0..4);
            let items: Vec<String> = (0..n).map(|_| document(rng, depth - 1)).collect();
            format!("[{}]", items.join(","))
        }
        _ => {
            let mut keys: Vec<&str> = KEYS.to_vec();
            let n = rng.gen_range(0..4);
            let members: Vec<String> = (0..n)
                .map(|_| {
                    let k = keys.remove(rng.gen_range(0..keys.len()));
                    format!("\"{k}\":{}", document(rng, depth - 1))
                })
                .collect();
            format!("{{{}}}", members.join(","))
        }
    }
}

fn path(rng: &mut StdRng) -> String {
    let mut p = String::from("$");
    for _ in 0..rng.gen_range(0..3) {
        match rng.gen_range(0..5) {
            0 | 1 => {
                let k = KEYS[rng.gen_range(0..KEYS.len())];
                if k.chars().all(|c| c.is_ascii_alphanumeric()) && !k.is_empty() {
                    p.push('.');
                    p.push_str(k);
                } else {
                    p.push_str(&format!(".\"{k}\""));
                }
            }
            2 | 3 => p.push_str(&format!("[{}]", rng.gen_range(0..4))),
            _ => p.push_str(["[#]", "[#-1]", "[#-2]"][rng.gen_range(0..3)]),
        }
    }
    format!("'{p}'")
}

/// An SQL value for a JSON function to embed.
fn sql_value(rng: &mut StdRng) -> String {
    match rng.gen_range(0..8) {
        0 => "NULL".into(),
        1 => rng.gen_range(-100..100).to_string(),
        // (Not an infinity: `json_set` writes it `9e999`, which BeechDB writes `9e+999`.)
        2 => [
            "0.1",
            "1.0",
            "-0.0",
            "1e300",
            "0.1 + 0.2",
            "123.456",
            "-7.5",
            "2.5e-7",
        ][rng.gen_range(0..8)]
        .into(),
        3 => [
            "'x'",
            "'a\"b'",
            "'back\\slash'",
            "'é'",
            "''",
            "char(9, 10, 1)",
        ][rng.gen_range(0..6)]
        .into(),
        4 => format!("json('{}')", document(rng, 2)),
        5 => format!("json_array({}, 2)", rng.gen_range(0..9)),
        6 => format!("'{}'", document(rng, 1)),
        _ => "9223372036854775807".into(),
    }
}

fn call(rng: &mut StdRng) -> String {
    let doc = format!("'{}'", document(rng, 3));
    match rng.gen_range(0..14) {
        0 => format!("json_extract({doc}, {})", path(rng)),
        1 => format!("json_extract({doc}, {}, {})", path(rng), path(rng)),
        2 => format!("{doc} -> {}", path(rng)),
        3 => format!("{doc} ->> {}", path(rng)),
        4 => format!("json_type({doc}, {})", path(rng)),
        5 => format!("json_array_length({doc}, {})", path(rng)),
        6 => {
            let f = ["json_set", "json_insert", "json_replace"][rng.gen_range(0..3)];
            format!("{f}({doc}, {}, {})", path(rng), sql_value(rng))
        }
        7 => format!("json_remove({doc}, {})", path(rng)),
        8 => format!("json_patch({doc}, '{}')", document(rng, 2)),
        9 => format!("json_array({}, {})", sql_value(rng), sql_value(rng)),
        10 => format!(
            "json_object('k', {}, 'l', {})",
            sql_value(rng),
            sql_value(rng)
        ),
        11 => format!("json_quote({})", sql_value(rng)),
        12 => format!("json({doc})"),
        _ => format!("json_valid({doc})"),
    }
}

#[test]
fn random_json_matches_sqlite() {
    let seeds: u64 = common::env_count("BEECH_JSON_SEEDS", 2_000);
    let (_db, mut ours, lite) = common::both("CREATE TABLE t(a);");
    for seed in 0..seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        let calls: Vec<String> = (0..3).map(|_| call(&mut rng)).collect();
        common::same_outcome(&mut ours, &lite, &format!("SELECT {}", calls.join(", ")));
        let doc = document(&mut rng, 3);
        let table = ["json_each", "json_tree"][rng.gen_range(0..2)];
        common::same_outcome(
            &mut ours,
            &lite,
            &format!(
                "SELECT key, value, type, atom, fullkey, path FROM {table}('{doc}', {})",
                path(&mut rng)
            ),
        );
    }
}
