//! The date and time functions give SQLite's answers (rusqlite, bundled): fixed cases over
//! every input form, modifier and strftime conversion, and random times under random
//! modifiers (`BEECH_DATE_SEEDS` sets how many; 3,000 by default). `now` is left out: the
//! two engines read the clock at different moments.

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[test]
fn fixed_cases_match_sqlite() {
    let (_db, mut ours, lite) = common::both("CREATE TABLE t(a);");
    for sql in [
        "SELECT date('2024-02-29 12:34:56.789', 'subsec'), datetime('2024-02-29 12:34:56.789', 'subsec')",
        "SELECT strftime('%e|%F|%T|%k|%l|%p|%P|%I|%u|%G|%g|%V|%U|%R', '2024-03-05 07:08:09')",
        "SELECT datetime('2024-01-31', '+1 month'), date('2024-01-31', '-1 month'), date('2024-02-29', '+1 year')",
        "SELECT datetime('2024-01-01 10:00', '+02:30'), datetime('2024-01-01', '+1 00:00:01'), datetime('2024-01-01', '-0001-02-03 04:05:06')",
        "SELECT date('2024-01-15', 'start of month', '+1 month', '-1 day'), date('2024-01-15', 'weekday 0'), date('2024-01-14', 'weekday 0')",
        "SELECT datetime(1700000000, 'unixepoch'), datetime(1700000000.5, 'unixepoch', 'subsec'), datetime(2460000.5), datetime(2460000.5, 'auto'), datetime(1700000000, 'auto')",
        "SELECT julianday('2024-01-01'), julianday('2024-01-01 12:00:00.5'), unixepoch('2024-01-01 00:00:00.999'), unixepoch('2024-01-01', 'subsec')",
        "SELECT datetime('2024-01-01T10:20:30Z'), datetime('2024-01-01T10:20:30+02:00'), datetime('2024-01-01 10:20:30.123456-05:30'), datetime('2024-01-01 10:20')",
        "SELECT time('10:20'), time('10:20:30.5'), time('25:00'), date('2024-13-01'), date('2024-02-30'), date('2023-02-29'), datetime('2024-01-01 24:00:00')",
        "SELECT timediff('2024-03-01', '2024-01-01'), timediff('2024-01-01', '2024-03-01 12:00:00.5'), timediff('2024-01-31', '2023-02-28 23:59:59')",
        "SELECT datetime('2024-06-15 12:00', 'ceiling'), datetime('2024-01-31', '+1 month', 'floor'), date('2024-01-31', '+1 month', 'ceiling')",
        "SELECT strftime('%s', '2024-01-01'), strftime('%f', '2024-01-01 00:00:01.5'), strftime('%J', '2024-01-01'), strftime('%w %W %j', '2024-12-31')",
        "SELECT date('2024-01-01', '+1.5 days'), datetime('2024-01-01', '+1.5 months'), datetime('2024-01-01', '+0.5 years'), datetime('2024-01-01', '-1.25 hours')",
        "SELECT date(' 2024-01-01 '), date('2024-1-1'), date('24-01-01'), date('+2024-01-01'), date('2024-01-01x'), date('12345-01-01')",
        "SELECT datetime('2024-01-01 10:20:30', 'start of day'), datetime('2024-05-05', 'start of year', '+100 days'), date(NULL), date('2024-01-01', NULL), date('2024-01-01', 'bogus')",
        "SELECT strftime('%Y-%m-%d', 2460000), strftime('%H:%M', 0.25), strftime('%d', '2024-01-05', '+ 3 days'), date('2024-01-01', '+3  days')",
        "SELECT date('2024-01-01','+3 DAYS'), date('2024-01-01','  +3 days  '), date('2024-01-01', '3 days'), date('2024-01-01', '+3day')",
        "SELECT datetime(-1.0), datetime(0), datetime('0'), datetime(''), datetime(x'00'), date(20240101), date('2024-01-01 ', 'utc')",
        "SELECT strftime('%Q', '2024-01-01'), strftime('%', '2024-01-01'), strftime('abc', '2024-01-01'), strftime(NULL, '2024-01-01'), strftime('', '2024-01-01')",
        "SELECT date('2000-01-01', '+1e9 days'), date('2000-01-01', '+3000000 days'), date('2000-01-01', '+2914000 days'), date('2000-01-01', '-730000 days')",
        "SELECT strftime('%Y', '2000-01-01', '+99999999999 days'), date('2000-01-01', '+10000 years'), date('2000-01-01', '+7999 years')",
        "SELECT date('2000-01-01', '-2000 years'), date('2000-01-01', '-2001 years'), date('2000-01-01', '+95988 months'), strftime('%Y|%F', '2000-01-01', '-2001 years')",
        "SELECT datetime(1e20, 'unixepoch'), date(5373484.5), date(5373484.4), date(-1), datetime('2000-01-01', '+1e15 seconds')",
        "SELECT datetime('2000-01-01', '-1e12 minutes'), datetime('2000-01-01', '+9e18 seconds'), julianday('2000-01-01', '+1e300 days')",
        "SELECT unixepoch('2000-01-01', '+1e9 hours'), time('12:00', '+1e17 seconds'), datetime(1700000000, 'localtime'), datetime('2024-01-01', 'localtime', 'utc')",
        "SELECT date('2024-03-10', 'weekday 7'), date('2024-03-10', 'weekday 1.5'), date('2024-03-10', 'weekday -1'), datetime(2460000.5, 'julianday'), datetime('2460000.5', 'julianday')",
        "SELECT datetime(2460000.5, '+1 day', 'julianday'), datetime(1700000000, '+1 day', 'unixepoch'), datetime(1e6, 'unixepoch', 'auto'), datetime(-1e10, 'auto')",
    ] {
        common::same_outcome(&mut ours, &lite, sql);
    }
}

/// A random time value: dates with and without times, fractions and zones, numbers.
fn time_value(rng: &mut StdRng) -> String {
    let (y, m, d) = (
        rng.gen_range(0..10_000),
        rng.gen_range(0..14),
        rng.gen_range(0..33),
    );
    let (h, mi, s) = (
        rng.gen_range(0..26),
        rng.gen_range(0..61),
        rng.gen_range(0..61),
    );
    match rng.gen_range(0..9) {
        0 => format!("'{y:04}-{m:02}-{d:02}'"),
        1 => format!("'{y:04}-{m:02}-{d:02} {h:02}:{mi:02}:{s:02}'"),
        2 => format!(
            "'{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{}'",
            rng.gen_range(0..10_000)
        ),
        3 => format!(
            "'{y:04}-{m:02}-{d:02} {h:02}:{mi:02}{}{:02}:{:02}'",
            ["+", "-"][rng.gen_range(0..2)],
            rng.gen_range(0..16),
            rng.gen_range(0..60)
        ),
        4 => format!("'{h:02}:{mi:02}'"),
        5 => format!("{}", rng.gen_range(-100.0..5_400_000.0)),
        6 => format!("{}", rng.gen_range(-2_000_000_000i64..4_000_000_000)),
        7 => format!("'{}'", rng.gen_range(0.0..5_400_000.0)),
        _ => format!("'{y:04}-{m:02}-{d:02} {h:02}:{mi:02}Z'"),
    }
}

/// A random modifier, of every kind SQLite knows and a few it does not.
fn modifier(rng: &mut StdRng) -> String {
    let sign = ["+", "-", ""][rng.gen_range(0..3)];
    let units = [
        "days",
        "day",
        "hours",
        "minutes",
        "seconds",
        "months",
        "years",
        "fortnights",
    ];
    let m = match rng.gen_range(0..14) {
        0 => format!(
            "{sign}{} {}",
            rng.gen_range(0..1000),
            units[rng.gen_range(0..units.len())]
        ),
        1 => format!(
            "{sign}{:.3} {}",
            rng.gen_range(0.0..100.0),
            units[rng.gen_range(0..units.len())]
        ),
        2 => ["start of day", "start of month", "start of year"][rng.gen_range(0..3)].to_string(),
        3 => format!("weekday {}", rng.gen_range(0..8)),
        4 => [
            "unixepoch",
            "auto",
            "julianday",
            "subsec",
            "localtime",
            "utc",
        ][rng.gen_range(0..6)]
        .to_string(),
        5 => ["ceiling", "floor"][rng.gen_range(0..2)].to_string(),
        6 => format!(
            "{sign}{:02}:{:02}",
            rng.gen_range(0..30),
            rng.gen_range(0..70)
        ),
        7 => format!(
            "{sign}{:02}:{:02}:{:02}.{}",
            rng.gen_range(0..25),
            rng.gen_range(0..60),
            rng.gen_range(0..60),
            rng.gen_range(0..1000)
        ),
        8 => format!(
            "{sign}{:04}-{:02}-{:02}",
            rng.gen_range(0..20),
            rng.gen_range(0..13),
            rng.gen_range(0..32)
        ),
        9 => format!(
            "{sign}{:04}-{:02}-{:02} {:02}:{:02}",
            rng.gen_range(0..3),
            rng.gen_range(0..12),
            rng.gen_range(0..31),
            rng.gen_range(0..24),
            rng.gen_range(0..60)
        ),
        10 => format!("{sign}{} months", rng.gen_range(-30..30)),
        11 => format!("{sign}{} years", rng.gen_range(0..30)),
        12 => "bogus".to_string(),
        _ => format!("{sign}{:e} seconds", rng.gen_range(0.0..1e12)),
    };
    format!("'{m}'")
}

#[test]
fn random_times_under_random_modifiers_match_sqlite() {
    let seeds: u64 = common::env_count("BEECH_DATE_SEEDS", 3_000);
    let (_db, mut ours, lite) = common::both("CREATE TABLE t(a);");
    let conversions =
        "%d %e %f %F %G %g %H %I %j %J %k %l %m %M %p %P %R %s %S %T %u %U %V %w %W %Y %%";
    for seed in 0..seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut args = vec![time_value(&mut rng)];
        for _ in 0..rng.gen_range(0..4) {
            args.push(modifier(&mut rng));
        }
        let args = args.join(", ");
        let other = time_value(&mut rng);
        let sql = format!(
            "SELECT date({args}), time({args}), datetime({args}), julianday({args}), \
             unixepoch({args}), strftime('{conversions}', {args}), timediff({args_first}, {other})",
            args_first = args.split(", ").next().unwrap_or("NULL"),
        );
        common::same_outcome(&mut ours, &lite, &sql);
    }
}
