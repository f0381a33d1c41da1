//! Date and time functions (lang_datefunc.html): `date`, `time`, `datetime`, `julianday`,
//! `unixepoch`, `strftime`, `timediff`, ported from SQLite's date.c so that every input,
//! modifier and conversion gives SQLite's answer: times as a Julian day number in
//! milliseconds (years 0000 to 9999 only: past them NULL), time-zone suffixes, the
//! `subsec`, `auto`, `julianday`, `unixepoch`, `ceiling`/`floor`, `weekday N`, `start of`
//! and `±YYYY-MM-DD HH:MM:SS` modifiers, and all of strftime's conversions.
//!
//! Owns: parsing of time values and modifiers, and formatting. May call: `value`, `printf`
//! (SQLite formats `%f` and `%J` with its printf). Local time is taken as UTC (listed in
//! docs/sql-compat.md): `localtime` and `utc` mark the time and move nothing.

use crate::error::Result;
use crate::value::{is_space, Value};

/// Milliseconds in a day.
const DAY_MS: i64 = 86_400_000;
/// The Julian day of the Unix epoch, in milliseconds.
const UNIX_EPOCH_MS: i64 = 210_866_760_000_000;
/// The last millisecond SQLite can hold: 9999-12-31 23:59:59.999.
const LAST_MS: i64 = 464_269_060_799_999;

/// SQLite's `DateTime`: a time as any of its forms that are known so far.
#[derive(Clone, Default)]
struct DateTime {
    jd: i64,
    year: i32,
    month: i32,
    day: i32,
    hour: i32,
    minute: i32,
    /// Time-zone offset in minutes.
    tz: i32,
    seconds: f64,
    valid_jd: bool,
    valid_ymd: bool,
    valid_hms: bool,
    /// Days that `floor` takes back after a month or year moved past a month's end.
    n_floor: i32,
    /// `seconds` holds the raw number the time was given as.
    raw: bool,
    error: bool,
    subsec: bool,
    utc: bool,
    local: bool,
}

/// Byte `i` of `z`, or 0 past its end (C's terminator).
fn at(z: &[u8], i: usize) -> u8 {
    z.get(i).copied().unwrap_or(0)
}

/// A field of [`get_digits`]: this many digits, in this range, then this byte (0: last).
type Field = (usize, i32, i32, u8);

/// SQLite's `getDigits`: the fields read in order from the start of `z`, stopping at the
/// first that does not fit.
fn get_digits(z: &[u8], fields: &[Field]) -> Vec<i32> {
    let mut got = Vec::with_capacity(fields.len());
    let mut i = 0;
    for &(n, min, max, next) in fields {
        let mut v = 0;
        for _ in 0..n {
            let c = at(z, i);
            if !c.is_ascii_digit() {
                return got;
            }
            v = v * 10 + i32::from(c - b'0');
            i += 1;
        }
        if v < min || v > max || (next != 0 && next != at(z, i)) {
            return got;
        }
        got.push(v);
        i += 1;
        if next == 0 {
            break;
        }
    }
    got
}

const HOUR_MINUTE: [Field; 2] = [(2, 0, 24, b':'), (2, 0, 59, 0)];
const TZ_HOUR_MINUTE: [Field; 2] = [(2, 0, 14, b':'), (2, 0, 59, 0)];

/// A time-zone suffix (`Z`, `+HH:MM`, `-HH:MM`) and nothing after it but spaces; true on
/// an error.
fn parse_timezone(z: &[u8], p: &mut DateTime) -> bool {
    let mut i = z.iter().take_while(|&&c| is_space(c)).count();
    p.tz = 0;
    let sign = match at(z, i) {
        b'-' => -1,
        b'+' => 1,
        b'Z' | b'z' => {
            i += 1;
            p.local = false;
            p.utc = true;
            0
        }
        c => return c != 0,
    };
    if sign != 0 {
        i += 1;
        let hm = get_digits(&z[i.min(z.len())..], &TZ_HOUR_MINUTE);
        if hm.len() != 2 {
            return true;
        }
        i += 5;
        p.tz = sign * (hm[1] + hm[0] * 60);
    }
    while is_space(at(z, i)) {
        i += 1;
    }
    at(z, i) != 0
}

/// `HH:MM[:SS[.FFF]]` and a time-zone suffix; true on an error.
fn parse_hhmmss(z: &[u8], p: &mut DateTime) -> bool {
    let hm = get_digits(z, &HOUR_MINUTE);
    if hm.len() != 2 {
        return true;
    }
    let mut i = 5;
    let mut s = 0;
    let mut fraction = 0.0;
    if at(z, i) == b':' {
        i += 1;
        match get_digits(&z[i.min(z.len())..], &[(2, 0, 59, 0)])[..] {
            [sec] => s = sec,
            _ => return true,
        }
        i += 2;
        if at(z, i) == b'.' && at(z, i + 1).is_ascii_digit() {
            let mut scale = 1.0;
            i += 1;
            while at(z, i).is_ascii_digit() {
                fraction = fraction * 10.0 + f64::from(at(z, i) - b'0');
                scale *= 10.0;
                i += 1;
            }
            fraction /= scale;
            // Truncated to stay below the next second.
            if fraction > 0.999 {
                fraction = 0.999;
            }
        }
    }
    p.valid_jd = false;
    p.raw = false;
    p.valid_hms = true;
    p.hour = hm[0];
    p.minute = hm[1];
    p.seconds = f64::from(s) + fraction;
    parse_timezone(&z[i.min(z.len())..], p)
}

fn datetime_error(p: &mut DateTime) {
    *p = DateTime {
        error: true,
        ..DateTime::default()
    };
}

/// The Julian day from the year, month and day (2000-01-01 if unknown) and the time.
fn compute_jd(p: &mut DateTime) {
    if p.valid_jd {
        return;
    }
    let (mut y, mut m, d) = match p.valid_ymd {
        true => (i64::from(p.year), i64::from(p.month), i64::from(p.day)),
        false => (2000, 1, 1),
    };
    if !(-4713..=9999).contains(&y) || p.raw {
        datetime_error(p);
        return;
    }
    if m <= 2 {
        y -= 1;
        m += 12;
    }
    let a = (y + 4800) / 100;
    let b = 38 - a + a / 4;
    let x1 = 36525 * (y + 4716) / 100;
    let x2 = 306_001 * (m + 1) / 10_000;
    p.jd = (((x1 + x2 + d + b) as f64 - 1524.5) * 86_400_000.0) as i64;
    p.valid_jd = true;
    if p.valid_hms {
        p.jd += i64::from(p.hour) * 3_600_000
            + i64::from(p.minute) * 60_000
            + (p.seconds * 1000.0 + 0.5) as i64;
        if p.tz != 0 {
            p.jd -= i64::from(p.tz) * 60_000;
            p.valid_ymd = false;
            p.valid_hms = false;
            p.tz = 0;
            p.utc = true;
            p.local = false;
        }
    }
}

/// Days that `floor` takes back: a day past the end of its month.
fn compute_floor(p: &mut DateTime) {
    let leap = p.year % 4 == 0 && (p.year % 100 != 0 || p.year % 400 == 0);
    p.n_floor = if p.day <= 28 || (1 << p.month) & 0x15aa != 0 {
        0
    } else if p.month != 2 {
        i32::from(p.day == 31)
    } else if !leap {
        p.day - 28
    } else {
        p.day - 29
    };
}

/// `[-]YYYY-MM-DD` and an optional time; true on an error.
fn parse_yyyymmdd(z: &[u8], p: &mut DateTime) -> bool {
    let negative = at(z, 0) == b'-';
    let z = &z[usize::from(negative)..];
    let ymd = get_digits(z, &[(4, 0, 14712, b'-'), (2, 1, 12, b'-'), (2, 1, 31, 0)]);
    if ymd.len() != 3 {
        return true;
    }
    let mut i = 10;
    while is_space(at(z, i)) || at(z, i) == b'T' {
        i += 1;
    }
    let rest = &z[i.min(z.len())..];
    if !parse_hhmmss(rest, p) {
        // With a time.
    } else if rest.is_empty() {
        p.valid_hms = false;
    } else {
        return true;
    }
    p.valid_jd = false;
    p.valid_ymd = true;
    p.year = if negative { -ymd[0] } else { ymd[0] };
    p.month = ymd[1];
    p.day = ymd[2];
    compute_floor(p);
    if p.tz != 0 {
        compute_jd(p);
    }
    false
}

fn set_to_now(p: &mut DateTime) {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    p.jd = UNIX_EPOCH_MS + ms;
    p.valid_jd = true;
    p.utc = true;
    p.local = false;
    clear_ymd_hms_tz(p);
}

/// A number given as the time: a Julian day if it can be one; kept raw for `unixepoch`
/// and `auto`.
fn set_raw_number(p: &mut DateTime, r: f64) {
    p.seconds = r;
    p.raw = true;
    if (0.0..5_373_484.5).contains(&r) {
        p.jd = (r * 86_400_000.0 + 0.5) as i64;
        p.valid_jd = true;
    }
}

/// The whole of `text` as a number (spaces around it allowed), as SQLite's
/// `sqlite3AtoF` accepts and converts one.
fn whole_number(text: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(text).ok()?;
    crate::value::parse_number(text).map(|n| n.as_f64())
}

/// A time value given as text; true on an error.
fn parse_date_or_time(z: &[u8], p: &mut DateTime) -> bool {
    if !parse_yyyymmdd(z, p) || !parse_hhmmss(z, p) {
        return false;
    }
    if z.eq_ignore_ascii_case(b"now") {
        set_to_now(p);
        return false;
    }
    if let Some(r) = whole_number(z) {
        set_raw_number(p, r);
        return false;
    }
    if z.eq_ignore_ascii_case(b"subsec") || z.eq_ignore_ascii_case(b"subsecond") {
        p.subsec = true;
        set_to_now(p);
        return false;
    }
    true
}

fn valid_julian_day(jd: i64) -> bool {
    (0..=LAST_MS).contains(&jd)
}

/// Year, month and day from the Julian day (2000-01-01 without one).
fn compute_ymd(p: &mut DateTime) {
    if p.valid_ymd {
        return;
    }
    if !p.valid_jd {
        p.year = 2000;
        p.month = 1;
        p.day = 1;
    } else if !valid_julian_day(p.jd) {
        datetime_error(p);
        return;
    } else {
        let z = ((p.jd + 43_200_000) / DAY_MS) as i32;
        let alpha = ((f64::from(z) + 32044.75) / 36524.25) as i32 - 52;
        let a = z + 1 + alpha - ((alpha + 100) / 4) + 25;
        let b = a + 1524;
        let c = ((f64::from(b) - 122.1) / 365.25) as i32;
        let d = (36525 * (c & 32767)) / 100;
        let e = (f64::from(b - d) / 30.6001) as i32;
        let x1 = (30.6001 * f64::from(e)) as i32;
        p.day = b - d - x1;
        p.month = if e < 14 { e - 1 } else { e - 13 };
        p.year = if p.month > 2 { c - 4716 } else { c - 4715 };
    }
    p.valid_ymd = true;
}

/// Hour, minute and seconds from the Julian day.
fn compute_hms(p: &mut DateTime) {
    if p.valid_hms {
        return;
    }
    compute_jd(p);
    let day_ms = ((p.jd + 43_200_000) % DAY_MS) as i32;
    p.seconds = f64::from(day_ms % 60_000) / 1000.0;
    let day_min = day_ms / 60_000;
    p.minute = day_min % 60;
    p.hour = day_min / 60;
    p.raw = false;
    p.valid_hms = true;
}

fn compute_ymd_hms(p: &mut DateTime) {
    compute_ymd(p);
    compute_hms(p);
}

fn clear_ymd_hms_tz(p: &mut DateTime) {
    p.valid_ymd = false;
    p.valid_hms = false;
    p.tz = 0;
}

/// SQLite's `toLocaltime` with local time taken as UTC: the time broken into its fields
/// (outside 1970 to 2038 through a year of the same leap cycle near 2000, as SQLite does
/// for the C library's sake, which shows when the fields did not come from the day number).
fn to_localtime(p: &mut DateTime) {
    compute_jd(p);
    let (year_diff, instant) = if !(210_866_760_000_000..=213_014_145_600_000).contains(&p.jd) {
        let mut x = p.clone();
        compute_ymd_hms(&mut x);
        let year_diff = (2000 + x.year % 4) - x.year;
        x.year += year_diff;
        x.valid_jd = false;
        compute_jd(&mut x);
        (year_diff, x.jd)
    } else {
        (0, p.jd)
    };
    let mut local = DateTime {
        jd: instant / 1000 * 1000,
        valid_jd: true,
        ..DateTime::default()
    };
    compute_ymd_hms(&mut local);
    p.year = local.year - year_diff;
    p.month = local.month;
    p.day = local.day;
    p.hour = local.hour;
    p.minute = local.minute;
    p.seconds = f64::from(local.seconds as i32) + (p.jd % 1000) as f64 * 0.001;
    p.valid_ymd = true;
    p.valid_hms = true;
    p.valid_jd = false;
    p.raw = false;
    p.tz = 0;
    p.error = false;
}

/// `NNN unit` modifiers: the unit's name, the largest NNN, and its seconds (SQLite keeps
/// both numbers as `float`).
const UNITS: [(&str, f32, f32); 6] = [
    ("second", 4.6427e14, 1.0),
    ("minute", 7.7379e12, 60.0),
    ("hour", 1.2897e11, 3600.0),
    ("day", 5_373_485.0, 86400.0),
    ("month", 176_546.0, 2_592_000.0),
    ("year", 14713.0, 31_536_000.0),
];

/// `auto`: a raw number read as a Julian day if it can be one, else as Unix seconds.
fn auto_adjust(p: &mut DateTime) {
    if !p.raw || p.valid_jd {
        p.raw = false;
    } else if p.seconds >= -210_866_760_000.0 && p.seconds <= 253_402_300_799.0 {
        let r = p.seconds * 1000.0 + 210_866_760_000_000.0;
        clear_ymd_hms_tz(p);
        p.jd = (r + 0.5) as i64;
        p.valid_jd = true;
        p.raw = false;
    }
}

/// Moves the months (`p.month` already changed) back into 1 to 12, carrying years.
fn carry_months(p: &mut DateTime) {
    let x = if p.month > 0 {
        (p.month - 1) / 12
    } else {
        (p.month - 12) / 12
    };
    p.year += x;
    p.month -= x * 12;
}

/// Applies modifier `z` (argument `idx`); true on an error.
fn parse_modifier(z: &[u8], p: &mut DateTime, idx: usize) -> bool {
    let eq = |a: &[u8], b: &str| a.eq_ignore_ascii_case(b.as_bytes());
    match at(z, 0).to_ascii_lowercase() {
        b'a' if eq(z, "auto") => {
            if idx > 1 {
                return true;
            }
            auto_adjust(p);
            false
        }
        b'c' if eq(z, "ceiling") => {
            compute_jd(p);
            clear_ymd_hms_tz(p);
            p.n_floor = 0;
            false
        }
        b'f' if eq(z, "floor") => {
            compute_jd(p);
            p.jd -= i64::from(p.n_floor) * DAY_MS;
            clear_ymd_hms_tz(p);
            false
        }
        b'j' if eq(z, "julianday") => {
            if idx > 1 || !(p.valid_jd && p.raw) {
                return true;
            }
            p.raw = false;
            false
        }
        b'l' if eq(z, "localtime") => {
            if !p.local {
                to_localtime(p);
            }
            p.utc = false;
            p.local = true;
            false
        }
        b'u' if eq(z, "unixepoch") && p.raw => {
            if idx > 1 {
                return true;
            }
            let r = p.seconds * 1000.0 + 210_866_760_000_000.0;
            if !(0.0..464_269_060_800_000.0).contains(&r) {
                return true;
            }
            clear_ymd_hms_tz(p);
            p.jd = (r + 0.5) as i64;
            p.valid_jd = true;
            p.raw = false;
            false
        }
        b'u' if eq(z, "utc") => {
            if !p.utc {
                // Local time is UTC: the time stays; only its fields are forgotten.
                compute_jd(p);
                let jd = p.jd;
                *p = DateTime {
                    jd,
                    valid_jd: true,
                    utc: true,
                    ..DateTime::default()
                };
            }
            false
        }
        b'w' if z.len() >= 8 && eq(&z[..8], "weekday ") => {
            let Some(r) = whole_number(&z[8..]) else {
                return true;
            };
            if !(0.0..7.0).contains(&r) || r.fract() != 0.0 {
                return true;
            }
            compute_ymd_hms(p);
            p.tz = 0;
            p.valid_jd = false;
            compute_jd(p);
            let n = r as i64;
            let mut day = ((p.jd + 129_600_000) / DAY_MS) % 7;
            if day > n {
                day -= 7;
            }
            p.jd += (n - day) * DAY_MS;
            clear_ymd_hms_tz(p);
            false
        }
        b's' => start_of(z, p),
        b'+' | b'-' | b'0'..=b'9' => shift(z, p),
        _ => true,
    }
}

/// `subsec`, `subsecond`, `start of day|month|year`; true on an error.
fn start_of(z: &[u8], p: &mut DateTime) -> bool {
    let eq = |a: &[u8], b: &str| a.eq_ignore_ascii_case(b.as_bytes());
    if z.len() < 9 || !eq(&z[..9], "start of ") {
        if eq(z, "subsec") || eq(z, "subsecond") {
            p.subsec = true;
            return false;
        }
        return true;
    }
    if !p.valid_jd && !p.valid_ymd && !p.valid_hms {
        return true;
    }
    let unit = &z[9..];
    compute_ymd(p);
    p.valid_hms = true;
    p.hour = 0;
    p.minute = 0;
    p.seconds = 0.0;
    p.raw = false;
    p.tz = 0;
    p.valid_jd = false;
    if eq(unit, "month") {
        p.day = 1;
        false
    } else if eq(unit, "year") {
        p.month = 1;
        p.day = 1;
        false
    } else {
        !eq(unit, "day")
    }
}

/// `±NNN unit`, `±HH:MM[:SS.FFF]` and `±YYYY-MM-DD[ HH:MM[:SS.FFF]]`; true on an error.
fn shift(z: &[u8], p: &mut DateTime) -> bool {
    let first = at(z, 0);
    let mut n = 1;
    while at(z, n) != 0 {
        let c = at(z, n);
        if c == b':' || is_space(c) {
            break;
        }
        if c == b'-'
            && ((n == 5 && get_digits(&z[1..], &[(4, 0, 14712, 0)]).len() == 1)
                || (n == 6 && get_digits(&z[1..], &[(5, 0, 14712, 0)]).len() == 1))
        {
            break;
        }
        n += 1;
    }
    let Some(mut r) = whole_number(&z[..n]) else {
        return true;
    };
    let mut z = z;
    // Where an `HH:MM` part begins, with `n` its offset of the `:`.
    let mut time_at = 0;
    if at(z, n) == b'-' {
        // ±YYYY-MM-DD: years, months and days added with no normalizing in between.
        if first != b'+' && first != b'-' {
            return true;
        }
        let year_digits = if n == 5 { 4 } else { 5 };
        let ymd = get_digits(
            &z[1..],
            &[
                (year_digits, 0, 14712, b'-'),
                (2, 0, 12, b'-'),
                (2, 0, 31, 0),
            ],
        );
        if ymd.len() != 3 {
            return true;
        }
        if n != 5 {
            z = &z[1..];
        }
        let (y, m, mut d) = (ymd[0], ymd[1], ymd[2]);
        if m >= 12 || d >= 31 {
            return true;
        }
        compute_ymd_hms(p);
        p.valid_jd = false;
        if first == b'-' {
            p.year -= y;
            p.month -= m;
            d = -d;
        } else {
            p.year += y;
            p.month += m;
        }
        carry_months(p);
        compute_floor(p);
        compute_jd(p);
        p.valid_hms = false;
        p.valid_ymd = false;
        p.jd += i64::from(d) * DAY_MS;
        if at(z, 11) == 0 {
            return false;
        }
        if is_space(at(z, 11)) && get_digits(&z[12.min(z.len())..], &HOUR_MINUTE).len() == 2 {
            time_at = 12;
            n = 2;
        } else {
            return true;
        }
    }
    if at(z, time_at + n) == b':' {
        // ±HH:MM[:SS.FFF]: a time of day added.
        let mut t = &z[time_at..];
        if !at(t, 0).is_ascii_digit() {
            t = &t[1..];
        }
        let mut tx = DateTime::default();
        if parse_hhmmss(t, &mut tx) {
            return true;
        }
        compute_jd(&mut tx);
        tx.jd -= 43_200_000;
        let day = tx.jd / DAY_MS;
        tx.jd -= day * DAY_MS;
        if first == b'-' {
            tx.jd = -tx.jd;
        }
        compute_jd(p);
        clear_ymd_hms_tz(p);
        p.jd += tx.jd;
        return false;
    }
    // NNN unit.
    let mut unit = &z[n..];
    while unit.first().copied().is_some_and(is_space) {
        unit = &unit[1..];
    }
    let mut len = unit.len();
    if !(3..=10).contains(&len) {
        return true;
    }
    if unit[len - 1].eq_ignore_ascii_case(&b's') {
        len -= 1;
    }
    let unit = &unit[..len];
    compute_jd(p);
    let rounder = if r < 0.0 { -0.5 } else { 0.5 };
    p.n_floor = 0;
    let mut failed = true;
    for (i, &(name, limit, seconds)) in UNITS.iter().enumerate() {
        let limit = f64::from(limit);
        if !unit.eq_ignore_ascii_case(name.as_bytes()) || r <= -limit || r >= limit {
            continue;
        }
        if i == 4 {
            compute_ymd_hms(p);
            p.month += r as i32;
            carry_months(p);
            compute_floor(p);
            p.valid_jd = false;
            r -= f64::from(r as i32);
        } else if i == 5 {
            compute_ymd_hms(p);
            p.year += r as i32;
            compute_floor(p);
            p.valid_jd = false;
            r -= f64::from(r as i32);
        }
        compute_jd(p);
        p.jd += (r * 1000.0 * f64::from(seconds) + rounder) as i64;
        failed = false;
        break;
    }
    clear_ymd_hms_tz(p);
    failed
}

/// The time that `args` (a time value and modifiers) name, or `None` (SQLite's `isDate`).
fn is_date(args: &[Value]) -> Option<DateTime> {
    let mut p = DateTime::default();
    let Some(first) = args.first() else {
        set_to_now(&mut p);
        return Some(p);
    };
    match first {
        Value::Integer(_) | Value::Real(_) => set_raw_number(&mut p, first.as_f64()),
        Value::Null => return None,
        other => {
            if parse_date_or_time(&text_of(other), &mut p) {
                return None;
            }
        }
    }
    for (i, m) in args.iter().enumerate().skip(1) {
        if m.is_null() || parse_modifier(&text_of(m), &mut p, i) {
            return None;
        }
    }
    compute_jd(&mut p);
    if p.error || !valid_julian_day(p.jd) {
        return None;
    }
    if args.len() == 1 && p.valid_ymd && p.day > 28 {
        // A day past its month's end (2024-02-30) is normalized.
        p.valid_ymd = false;
    }
    Some(p)
}

/// A non-NULL argument's bytes as SQLite's C reads them (see [`crate::printf::text_arg`]).
fn text_of(v: &Value) -> Vec<u8> {
    crate::printf::text_arg(v)
        .map(|t| t.into_owned())
        .unwrap_or_default()
}

/// `v` through SQLite's printf with `format` (one conversion of a real).
fn printf_real(format: &str, v: f64) -> String {
    crate::printf::printf(&[Value::text(format), Value::Real(v)]).to_text()
}

/// `YYYY-MM-DD` (a year BC as `-YYYY`).
fn ymd_text(p: &DateTime) -> String {
    let sign = if p.year < 0 { "-" } else { "" };
    format!(
        "{sign}{:04}-{:02}-{:02}",
        p.year.unsigned_abs() % 10_000,
        p.month,
        p.day
    )
}

/// `HH:MM:SS`, or `HH:MM:SS.SSS` under `subsec`.
fn hms_text(p: &DateTime) -> String {
    // Digit by digit as SQLite writes them: a negative fraction (a millisecond count
    // below zero reaching `localtime`) gives the same odd characters.
    let digit = |v: i32| char::from((i32::from(b'0') + v % 10) as u8);
    let mut out: String = [p.hour / 10, p.hour, -1, p.minute / 10, p.minute, -1]
        .iter()
        .map(|&v| if v < 0 { ':' } else { digit(v) })
        .collect();
    match p.subsec {
        true => {
            let s = (1000.0 * p.seconds + 0.5) as i32;
            out.extend([digit(s / 10000), digit(s / 1000), '.']);
            out.extend([digit(s / 100), digit(s / 10), digit(s)]);
        }
        false => {
            let s = p.seconds as i32;
            out.extend([digit(s / 10), digit(s)]);
        }
    }
    out
}

fn days_after_jan01(p: &DateTime) -> i64 {
    let mut jan01 = p.clone();
    jan01.valid_jd = false;
    jan01.month = 1;
    jan01.day = 1;
    compute_jd(&mut jan01);
    (p.jd - jan01.jd + 43_200_000) / DAY_MS
}

fn days_after_monday(p: &DateTime) -> i64 {
    ((p.jd + 43_200_000) / DAY_MS) % 7
}

fn days_after_sunday(p: &DateTime) -> i64 {
    ((p.jd + 129_600_000) / DAY_MS) % 7
}

/// The Thursday of `p`'s ISO week, its fields computed.
fn iso_thursday(p: &DateTime) -> DateTime {
    let mut y = p.clone();
    y.jd += (3 - days_after_monday(p)) * DAY_MS;
    y.valid_ymd = false;
    compute_ymd(&mut y);
    y
}

/// `strftime(format, ...)` for time `x`; `None` for a conversion SQLite does not know.
fn strftime(format: &[u8], x: &mut DateTime) -> Option<String> {
    compute_jd(x);
    compute_ymd_hms(x);
    let mut out: Vec<u8> = Vec::new();
    let mut i = 0;
    while i < format.len() {
        let c = format[i];
        if c != b'%' {
            out.push(c);
            i += 1;
            continue;
        }
        let cf = at(format, i + 1);
        i += 2;
        let piece = match cf {
            b'd' => format!("{:02}", x.day),
            b'e' => format!("{:2}", x.day),
            b'f' => printf_real("%06.3f", x.seconds.min(59.999)),
            b'F' => format!("{:04}-{:02}-{:02}", x.year, x.month, x.day),
            b'G' => format!("{:04}", iso_thursday(x).year),
            b'g' => format!("{:02}", iso_thursday(x).year % 100),
            b'H' => format!("{:02}", x.hour),
            b'k' => format!("{:2}", x.hour),
            b'I' | b'l' => {
                let h = match x.hour {
                    0 => 12,
                    h if h > 12 => h - 12,
                    h => h,
                };
                match cf {
                    b'I' => format!("{h:02}"),
                    _ => format!("{h:2}"),
                }
            }
            b'j' => format!("{:03}", days_after_jan01(x) + 1),
            b'J' => printf_real("%.16g", x.jd as f64 / 86_400_000.0),
            b'm' => format!("{:02}", x.month),
            b'M' => format!("{:02}", x.minute),
            b'p' => (if x.hour >= 12 { "PM" } else { "AM" }).to_string(),
            b'P' => (if x.hour >= 12 { "pm" } else { "am" }).to_string(),
            b'R' => format!("{:02}:{:02}", x.hour, x.minute),
            b's' => match x.subsec {
                true => printf_real("%.3f", (x.jd - UNIX_EPOCH_MS) as f64 / 1000.0),
                false => (x.jd / 1000 - UNIX_EPOCH_MS / 1000).to_string(),
            },
            b'S' => format!("{:02}", x.seconds as i32),
            b'T' => format!("{:02}:{:02}:{:02}", x.hour, x.minute, x.seconds as i32),
            b'u' => match days_after_sunday(x) {
                0 => "7".to_string(),
                d => d.to_string(),
            },
            b'w' => days_after_sunday(x).to_string(),
            b'U' => format!(
                "{:02}",
                (days_after_jan01(x) - days_after_sunday(x) + 7) / 7
            ),
            b'V' => {
                let y = iso_thursday(x);
                format!("{:02}", days_after_jan01(&y) / 7 + 1)
            }
            b'W' => format!(
                "{:02}",
                (days_after_jan01(x) - days_after_monday(x) + 7) / 7
            ),
            b'Y' => format!("{:04}", x.year),
            b'%' => "%".to_string(),
            _ => return None,
        };
        out.extend_from_slice(piece.as_bytes());
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// `timediff(a, b)`: `±YYYY-MM-DD HH:MM:SS.SSS` from `b` to `a`, months and years counted
/// as the calendar has them.
fn timediff(a: &Value, b: &Value) -> Option<String> {
    let mut d1 = is_date(std::slice::from_ref(a))?;
    let mut d2 = is_date(std::slice::from_ref(b))?;
    compute_ymd_hms(&mut d1);
    compute_ymd_hms(&mut d2);
    // SQLite's two mirrored branches as one: `dir` is 1 when a is at or after b, else -1;
    // d2 is moved to d1's year and month, then back (or on) a month at a time while it
    // has passed d1, and what is left is a time span.
    let dir = if d1.jd >= d2.jd { 1 } else { -1 };
    let recompute = |d2: &mut DateTime| {
        d2.valid_jd = false;
        compute_jd(d2);
    };
    let mut y = dir * (d1.year - d2.year);
    if y != 0 {
        d2.year = d1.year;
        recompute(&mut d2);
    }
    let mut m = dir * (d1.month - d2.month);
    if m < 0 {
        y -= 1;
        m += 12;
    }
    if m != 0 {
        d2.month = d1.month;
        recompute(&mut d2);
    }
    while (d1.jd - d2.jd) * i64::from(dir) < 0 {
        m -= 1;
        if m < 0 {
            m = 11;
            y -= 1;
        }
        d2.month -= dir;
        if d2.month < 1 {
            d2.month = 12;
            d2.year -= 1;
        } else if d2.month > 12 {
            d2.month = 1;
            d2.year += 1;
        }
        recompute(&mut d2);
    }
    d1.jd = (d1.jd - d2.jd) * i64::from(dir);
    let sign = if dir > 0 { '+' } else { '-' };
    d1.jd += 148_699_540_800_000;
    clear_ymd_hms_tz(&mut d1);
    compute_ymd_hms(&mut d1);
    Some(format!(
        "{sign}{y:04}-{m:02}-{:02} {:02}:{:02}:{}",
        d1.day - 1,
        d1.hour,
        d1.minute,
        printf_real("%06.3f", d1.seconds)
    ))
}

/// Calls date function `name`.
pub fn call(name: &str, args: &[Value]) -> Result<Value> {
    if name == "timediff" {
        return Ok(match args {
            [a, b] => timediff(a, b).map_or(Value::Null, Value::from),
            _ => Value::Null,
        });
    }
    let (format, args) = match name {
        "strftime" => match args.split_first() {
            Some((f, rest)) if !f.is_null() => (Some(text_of(f)), rest),
            _ => return Ok(Value::Null),
        },
        _ => (None, args),
    };
    let Some(mut x) = is_date(args) else {
        return Ok(Value::Null);
    };
    Ok(match name {
        "julianday" => {
            compute_jd(&mut x);
            Value::Real(x.jd as f64 / 86_400_000.0)
        }
        "unixepoch" => {
            compute_jd(&mut x);
            match x.subsec {
                true => Value::Real((x.jd - UNIX_EPOCH_MS) as f64 / 1000.0),
                false => Value::Integer(x.jd / 1000 - UNIX_EPOCH_MS / 1000),
            }
        }
        "date" => {
            compute_ymd(&mut x);
            Value::from(ymd_text(&x))
        }
        "time" => {
            compute_hms(&mut x);
            Value::from(hms_text(&x))
        }
        "datetime" => {
            compute_ymd_hms(&mut x);
            Value::from(format!("{} {}", ymd_text(&x), hms_text(&x)))
        }
        _ => match strftime(&format.unwrap_or_default(), &mut x) {
            Some(s) => Value::from(s),
            None => Value::Null,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, args: &[&str]) -> String {
        let args: Vec<Value> = args.iter().map(|a| Value::text(a)).collect();
        call(name, &args).unwrap().to_text()
    }

    #[test]
    fn dates_and_modifiers() {
        assert_eq!(t("date", &["2024-02-28", "+1 day"]), "2024-02-29");
        assert_eq!(
            t("datetime", &["2024-01-31 10:00:00", "+1 month"]),
            "2024-03-02 10:00:00"
        );
        assert_eq!(t("date", &["2024-05-17", "start of month"]), "2024-05-01");
        assert_eq!(t("strftime", &["%Y/%j", "2024-12-31"]), "2024/366");
        assert_eq!(t("julianday", &["2000-01-01 12:00:00"]), "2451545.0");
        assert_eq!(t("time", &["12:34:56"]), "12:34:56");
        assert_eq!(t("date", &["not a date"]), "");
        assert_eq!(
            t("datetime", &["1700000000", "unixepoch"]),
            "2023-11-14 22:13:20"
        );
        assert_eq!(
            t("timediff", &["2024-03-01", "2024-01-01"]),
            "+0000-02-00 00:00:00.000"
        );
    }
}
