//! `printf()` gives SQLite's bytes (rusqlite, bundled): fixed formats over every conversion,
//! flag and ending, then random formats with random arguments of every type
//! (`BEECH_PRINTF_SEEDS` sets how many; 3,000 by default).

mod common;

use beechdb_sql::{Connection, Value};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn ours(c: &mut Connection, format: &str, args: &[Value]) -> Option<String> {
    let marks = vec!["?"; args.len() + 1].join(", ");
    let mut params = vec![Value::text(format)];
    params.extend_from_slice(args);
    let r = c
        .query(&format!("SELECT printf({marks})"), &params)
        .unwrap_or_else(|e| panic!("printf({format:?}, {args:?}): {e}"));
    match &r.rows[0][0] {
        Value::Null => None,
        Value::Text(t) => Some(t.to_string()),
        other => panic!("printf gave {other:?}"),
    }
}

fn sqlite(c: &rusqlite::Connection, format: &str, args: &[Value]) -> Option<String> {
    use rusqlite::types::{ToSqlOutput, Value as L, ValueRef};
    let lite = |v: &Value| match v {
        Value::Null => L::Null,
        Value::Integer(i) => L::Integer(*i),
        Value::Real(r) => L::Real(*r),
        Value::Text(t) => L::Text(t.to_string()),
        Value::Blob(b) => L::Blob(b.to_vec()),
    };
    let marks = vec!["?"; args.len() + 1].join(", ");
    let mut params: Vec<ToSqlOutput> = vec![ToSqlOutput::Owned(L::Text(format.into()))];
    params.extend(args.iter().map(|a| ToSqlOutput::Owned(lite(a))));
    let mut stmt = c.prepare(&format!("SELECT printf({marks})")).unwrap();
    stmt.query_row(rusqlite::params_from_iter(params), |row| {
        Ok(match row.get_ref(0)? {
            ValueRef::Null => None,
            ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
            other => panic!("SQLite's printf gave {other:?}"),
        })
    })
    .unwrap()
}

fn check(ours_c: &mut Connection, lite: &rusqlite::Connection, format: &str, args: &[Value]) {
    assert_eq!(
        ours(ours_c, format, args),
        sqlite(lite, format, args),
        "printf({format:?}, {args:?})"
    );
}

fn connections() -> (beechdb_sql::Database, Connection, rusqlite::Connection) {
    let db = beechdb_sql::Database::open_in_memory().unwrap();
    let c = db.connect();
    (db, c, rusqlite::Connection::open_in_memory().unwrap())
}

#[test]
fn fixed_formats_match_sqlite() {
    let (_db, mut c, lite) = connections();
    let i = Value::Integer;
    let r = Value::Real;
    let s = |t: &str| Value::text(t);
    let cases: Vec<(&str, Vec<Value>)> = vec![
        ("%5d|%-3s|%.2f", vec![i(42), s("ab"), r(2.71)]),
        (
            "%*d|%-*d|%.*f|%*.*f",
            vec![
                i(5),
                i(42),
                i(4),
                i(7),
                i(2),
                r(1.23456),
                i(-9),
                i(1),
                r(2.5),
            ],
        ),
        (
            "%.5d|%#x|%#o|%,d|%#X|%,u|%,d",
            vec![i(42), i(255), i(8), i(1234567), i(255), i(-1), i(i64::MIN)],
        ),
        (
            "%+.3d|% d|%05.1f|%-05d|%+05d|%#08x",
            vec![i(7), i(5), r(-2.25), i(3), i(-3), i(255)],
        ),
        (
            "%r %r %r %r %r %.5r %,r",
            vec![i(1), i(2), i(3), i(11), i(112), i(1), i(1234)],
        ),
        (
            "%p|%#p|%lld|%lu|%llx",
            vec![i(255), i(255), i(-7), i(-7), i(-7)],
        ),
        (
            "%g|%g|%g|%G|%g|%g",
            vec![r(1e20), r(0.0001), r(1e-5), r(1e-10), r(100000.0), r(1e6)],
        ),
        (
            "%.0f|%#.0f|%#g|%.3g|%.0g|%#.3g",
            vec![r(2.5), r(2.5), r(1.0), r(1.23456), r(0.5), r(1.0)],
        ),
        (
            "%.20f|%!.20g|%!.30f|%.17g|%!g|%!.15g",
            vec![r(0.1), r(0.1), r(1.0 / 3.0), r(0.1), r(1e100), r(123.0)],
        ),
        (
            "%f|%e|%,.1f|%,f|%,e",
            vec![r(-0.0), r(123456.0), r(1234567.25), r(1e21), r(12345.0)],
        ),
        (
            "%.2f|%.1f|%.3e|%E|%10.4f|%-10.2e|",
            vec![
                r(0.0001),
                r(9.96),
                r(9.9996),
                r(1e-300),
                r(-3.5),
                r(6.02e23),
            ],
        ),
        (
            "%f|%.15f|%.40f|%.320f",
            vec![r(1e308), r(5e-324), r(2.0f64.powi(-60)), r(1e-310)],
        ),
        (
            "%d|%d|%d|%f|%s|%s",
            vec![s("12x"), r(3.9), s("abc"), s("2.5e1"), r(1.0), r(1e300)],
        ),
        (
            "%.2s|%!.2s|%5s|%!5s|%-6s|%!-6s|",
            vec![s("héllo"), s("héllo"), s("é"), s("é"), s("日本"), s("日本")],
        ),
        (
            "%c|%5c|%.3c|%-3c|%!c|%c|%4.2c|",
            vec![s("abc"), s("x"), s("y"), s("é"), s("日本"), i(42), s("z")],
        ),
        (
            "%q|%Q|%Q|%w|%q|%w|%.3q|%!.2Q",
            vec![
                s("it's"),
                Value::Null,
                s("a"),
                s("a\"b"),
                Value::Null,
                Value::Null,
                s("a'b'c"),
                s("é'x"),
            ],
        ),
        (
            "%#Q|%#Q|%#q|%#q|%#w",
            vec![s("a\nb"), s("ab"), s("a\\b"), s("tab\there"), s("x\ny")],
        ),
        ("%s %s|%d|%f|%c|%q|", vec![i(1)]),
        ("%5.2%|%-5%|%n|%5n|", vec![]),
        ("%lld|%lli|%hd|%ld", vec![i(1), i(2), i(3), i(4)]),
        ("%y", vec![]),
        ("", vec![]),
        ("%s", vec![s("")]),
        ("%", vec![]),
        ("abc%", vec![]),
        ("%-", vec![]),
        ("%5", vec![]),
        ("%.", vec![]),
        ("%.3", vec![]),
        ("%*", vec![i(3)]),
        ("%l", vec![]),
        ("%T|%S", vec![]),
        (
            "%s|%s",
            vec![
                Value::Blob(b"ab\0cd".to_vec().into()),
                Value::Blob(vec![0xff, 0x41].into()),
            ],
        ),
        ("%.3s|%.0s|%.s|", vec![s("abcdef"), s("x"), s("y")]),
        // (SQLite binds a NaN as NULL, so none is compared here.)
        (
            "%f|%+f|%f|% f|%e|%010g",
            vec![
                r(f64::INFINITY),
                r(f64::INFINITY),
                r(f64::NEG_INFINITY),
                r(f64::INFINITY),
                r(f64::INFINITY),
                r(f64::NEG_INFINITY),
            ],
        ),
        ("%05f", vec![r(f64::INFINITY)]),
        ("%1000000000d|", vec![i(1)]),
        ("%.1000000000d|", vec![i(1)]),
        ("%.*c", vec![i(i32::MAX as i64), s("x")]),
        ("%.*f", vec![i(2_000_000_000), r(1.0)]),
        ("%*d", vec![i(i64::MIN), i(1)]),
        (
            "%*d|%.*d",
            vec![i(-2_147_483_648), i(1), i(-2_147_483_648), i(2)],
        ),
        (
            "%*d|%.*d",
            vec![i(4_294_967_298), i(1), i(-4_294_967_290), i(2)],
        ),
        ("%99999999999d|", vec![i(1)]),
    ];
    for (format, args) in &cases {
        check(&mut c, &lite, format, args);
    }
}

/// A random format of literal text and conversions, each with random flags, widths and
/// precisions (some from arguments), with arguments of every type.
#[test]
fn random_formats_match_sqlite() {
    let seeds: u64 = common::env_count("BEECH_PRINTF_SEEDS", 3_000);
    let (_db, mut c, lite) = connections();
    for seed in 0..seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut format = String::new();
        let mut args = Vec::new();
        for _ in 0..rng.gen_range(1..5) {
            if rng.gen_bool(0.3) {
                format.push_str(["ab", "é", " ", "|", "x'y"][rng.gen_range(0..5)]);
            }
            format.push('%');
            for _ in 0..rng.gen_range(0..3) {
                format.push(b"-+ #0,!"[rng.gen_range(0..7)] as char);
            }
            match rng.gen_range(0..4) {
                0 => format.push_str(&rng.gen_range(1..40).to_string()),
                1 => {
                    format.push('*');
                    args.push(Value::Integer(rng.gen_range(-30..30)));
                }
                _ => {}
            }
            match rng.gen_range(0..4) {
                0 => format.push_str(&format!(".{}", rng.gen_range(0..30))),
                1 => {
                    format.push_str(".*");
                    args.push(Value::Integer(rng.gen_range(-30..30)));
                }
                _ => {}
            }
            if rng.gen_bool(0.1) {
                format.push_str(["l", "ll"][rng.gen_range(0..2)]);
            }
            let conversions = b"dsgzqQwcouxXfeEGinp%rdfgsdfgsy";
            let conversion = conversions[rng.gen_range(0..conversions.len())];
            format.push(conversion as char);
            // Arguments stay in step with what reads them: a `*` meeting a random real
            // can ask for a field of hundreds of megabytes (right, but slow).
            if !b"%ny".contains(&conversion) {
                args.push(random_value(&mut rng));
            }
        }
        if rng.gen_bool(0.1) {
            args.pop();
        }
        check(&mut c, &lite, &format, &args);
    }
}

fn random_value(rng: &mut StdRng) -> Value {
    match rng.gen_range(0..10) {
        0 => Value::Null,
        1 => Value::Integer(rng.gen_range(-1000..1000)),
        2 => Value::Integer(rng.gen()),
        3 => {
            // Halves and other exact decimals, where rounding shows.
            let units: i64 = rng.gen_range(-100_000..100_000);
            Value::Real(units as f64 / [2.0, 4.0, 8.0, 1000.0][rng.gen_range(0..4)])
        }
        4 => {
            let magnitude = 10f64.powi(rng.gen_range(-320..309));
            Value::Real(rng.gen_range(-10.0..10.0) * magnitude)
        }
        5 => Value::Real(f64::from_bits(
            rng.gen::<u64>() & !(0x7ff << 52) | (rng.gen_range(900..1150u64) << 52),
        )),
        6 => Value::text(
            [
                "",
                "héllo",
                "日本語",
                "it's",
                "a\"b",
                "x\\y\n",
                "12x",
                "-0",
                "  7",
            ][rng.gen_range(0..9)],
        ),
        7 => Value::text(&"abcdefghij"[..rng.gen_range(0..10)]),
        8 => Value::Blob(
            (0..rng.gen_range(0..6))
                .map(|_| rng.gen_range(0x20..0x7f))
                .collect::<Vec<u8>>()
                .into(),
        ),
        _ => Value::Real(rng.gen_range(-1e6..1e6)),
    }
}

/// A REAL's text (CAST, `||`) and its `quote()` (which falls back to 20 digits when 15 do not
/// read back) are SQLite's, over reals of every magnitude and bit pattern.
#[test]
fn reals_as_text_match_sqlite() {
    let (_db, mut c, lite) = connections();
    let mut rng = StdRng::seed_from_u64(7);
    let sql = "SELECT CAST(?1 AS TEXT), quote(?1), ?1 || ''";
    for n in 0..20_000 {
        let r = match n % 3 {
            0 => f64::from_bits(
                rng.gen::<u64>() & !(0x7ff << 52) | (rng.gen_range(1..0x7ff_u64) << 52),
            ),
            1 => rng.gen_range(-1e6..1e6),
            _ => {
                (rng.gen_range(-1_000_000i64..1_000_000) as f64) / 10f64.powi(rng.gen_range(0..12))
            }
        };
        let ours: Vec<String> = c.query(sql, &[Value::Real(r)]).unwrap().rows[0]
            .iter()
            .map(|v| v.to_text())
            .collect();
        let theirs: Vec<String> = lite
            .query_row(sql, [r], |row| {
                (0..3).map(|i| row.get::<_, String>(i)).collect()
            })
            .unwrap();
        assert_eq!(ours, theirs, "{r:e}");
    }
}
