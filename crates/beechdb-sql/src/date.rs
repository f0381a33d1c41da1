//! Date and time functions (lang_datefunc.html): `date`, `time`, `datetime`, `julianday`,
//! `unixepoch`, `strftime`, over time values in UTC held as a Julian day number in
//! milliseconds, as SQLite does.
//!
//! Owns: parsing of time values and modifiers, and formatting. May call: `value`. Local
//! time is taken as UTC (listed in docs/sql-compat.md).

use crate::error::Result;
use crate::value::Value;

/// Milliseconds since the Julian epoch.
type Jd = i64;

const MS_PER_DAY: i64 = 86_400_000;

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Julian day of the Unix epoch, in milliseconds.
const UNIX_EPOCH_JD: i64 = 210_866_760_000_000;

fn from_ymd_hms(y: i64, mo: i64, d: i64, h: i64, mi: i64, s: f64) -> Jd {
    let days = days_from_civil(y, mo, d);
    UNIX_EPOCH_JD + days * MS_PER_DAY + h * 3_600_000 + mi * 60_000 + (s * 1000.0).round() as i64
}

fn parts(jd: Jd) -> (i64, i64, i64, i64, i64, f64) {
    let ms = jd - UNIX_EPOCH_JD;
    let days = ms.div_euclid(MS_PER_DAY);
    let rem = ms.rem_euclid(MS_PER_DAY);
    let (y, m, d) = civil_from_days(days);
    (
        y,
        m,
        d,
        rem / 3_600_000,
        rem / 60_000 % 60,
        (rem % 60_000) as f64 / 1000.0,
    )
}

fn now() -> Jd {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    UNIX_EPOCH_JD + ms
}

fn num(s: &str) -> Option<i64> {
    s.parse().ok()
}

fn parse_time_value(v: &Value) -> Option<Jd> {
    match v {
        Value::Integer(i) => Some((*i as f64 * MS_PER_DAY as f64) as i64),
        Value::Real(r) => Some((r * MS_PER_DAY as f64).round() as i64),
        Value::Text(s) => parse_text(s.trim()),
        _ => None,
    }
}

fn parse_hms(t: &str) -> Option<(i64, i64, f64)> {
    let mut it = t.split(':');
    let h = num(it.next()?)?;
    let m = num(it.next()?)?;
    let s: f64 = match it.next() {
        Some(s) => s.parse().ok()?,
        None => 0.0,
    };
    if it.next().is_some() || !(0..24).contains(&h) || !(0..60).contains(&m) || s >= 60.0 {
        return None;
    }
    Some((h, m, s))
}

fn parse_text(s: &str) -> Option<Jd> {
    if s.eq_ignore_ascii_case("now") {
        return Some(now());
    }
    if let Ok(r) = s.parse::<f64>() {
        return Some((r * MS_PER_DAY as f64).round() as i64);
    }
    let (date, time) = match s.find([' ', 'T']) {
        Some(i) if s.len() > 10 => (&s[..i], Some(s[i + 1..].trim_end_matches('Z'))),
        _ if s.contains(':') => ("2000-01-01", Some(s)),
        _ => (s, None),
    };
    let mut it = date.split('-');
    let (y, m, d) = (num(it.next()?)?, num(it.next()?)?, num(it.next()?)?);
    if it.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let (h, mi, sec) = match time {
        Some(t) => parse_hms(t)?,
        None => (0, 0, 0.0),
    };
    Some(from_ymd_hms(y, m, d, h, mi, sec))
}

fn apply_modifier(jd: Jd, m: &str, first: &Value) -> Option<Jd> {
    let m = m.trim().to_ascii_lowercase();
    match m.as_str() {
        "localtime" | "utc" => return Some(jd),
        "unixepoch" => {
            let secs = first.as_f64();
            return Some(UNIX_EPOCH_JD + (secs * 1000.0).round() as i64);
        }
        "start of day" => return Some(jd - (jd - UNIX_EPOCH_JD).rem_euclid(MS_PER_DAY)),
        "start of month" | "start of year" => {
            let (y, mo, _, _, _, _) = parts(jd);
            let mo = if m == "start of year" { 1 } else { mo };
            return Some(from_ymd_hms(y, mo, 1, 0, 0, 0.0));
        }
        _ => {}
    }
    if let Some(n) = m.strip_prefix("weekday ") {
        let want: i64 = n.trim().parse().ok()?;
        let days = (jd - UNIX_EPOCH_JD).div_euclid(MS_PER_DAY);
        let wd = (days + 4).rem_euclid(7);
        return Some(jd + ((want - wd).rem_euclid(7)) * MS_PER_DAY);
    }
    let (amount, unit) = m.split_once(' ')?;
    let amount: f64 = amount.trim().parse().ok()?;
    let unit = unit.trim().trim_end_matches('s');
    let ms = match unit {
        "day" => amount * MS_PER_DAY as f64,
        "hour" => amount * 3_600_000.0,
        "minute" => amount * 60_000.0,
        "second" => amount * 1000.0,
        "month" | "year" => {
            let (y, mo, d, h, mi, s) = parts(jd);
            let months = if unit == "year" {
                amount * 12.0
            } else {
                amount
            } as i64;
            let total = y * 12 + (mo - 1) + months;
            let (ny, nm) = (total.div_euclid(12), total.rem_euclid(12) + 1);
            return Some(from_ymd_hms(ny, nm, d, h, mi, s));
        }
        _ => return None,
    };
    Some(jd + ms.round() as i64)
}

/// Calls date function `name`.
pub fn call(name: &str, args: &[Value]) -> Result<Value> {
    let (fmt, rest) = if name == "strftime" {
        match args.split_first() {
            Some((f, rest)) if !f.is_null() => (Some(f.to_text()), rest),
            _ => return Ok(Value::Null),
        }
    } else {
        (None, args)
    };
    let first = rest.first().cloned().unwrap_or(Value::text("now"));
    let Some(mut jd) = parse_time_value(&first) else {
        return Ok(Value::Null);
    };
    for m in rest.iter().skip(1) {
        if m.is_null() {
            return Ok(Value::Null);
        }
        match apply_modifier(jd, &m.to_text(), &first) {
            Some(j) => jd = j,
            None => return Ok(Value::Null),
        }
    }
    let (y, mo, d, h, mi, s) = parts(jd);
    Ok(match name {
        "date" => Value::from(format!("{y:04}-{mo:02}-{d:02}")),
        "time" => Value::from(format!("{h:02}:{mi:02}:{:02}", s as i64)),
        "datetime" => Value::from(format!(
            "{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{:02}",
            s as i64
        )),
        "julianday" => Value::Real(jd as f64 / MS_PER_DAY as f64),
        "unixepoch" => Value::Integer((jd - UNIX_EPOCH_JD).div_euclid(1000)),
        _ => {
            let f = fmt.unwrap_or_default();
            let mut out = String::new();
            let mut it = f.chars();
            while let Some(c) = it.next() {
                if c != '%' {
                    out.push(c);
                    continue;
                }
                let days = (jd - UNIX_EPOCH_JD).div_euclid(MS_PER_DAY);
                let doy = days - days_from_civil(y, 1, 1) + 1;
                match it.next() {
                    Some('d') => out.push_str(&format!("{d:02}")),
                    Some('f') => out.push_str(&format!("{s:06.3}")),
                    Some('H') => out.push_str(&format!("{h:02}")),
                    Some('j') => out.push_str(&format!("{doy:03}")),
                    Some('J') => {
                        out.push_str(&crate::value::format_real(jd as f64 / MS_PER_DAY as f64))
                    }
                    Some('m') => out.push_str(&format!("{mo:02}")),
                    Some('M') => out.push_str(&format!("{mi:02}")),
                    Some('s') => out.push_str(&(jd - UNIX_EPOCH_JD).div_euclid(1000).to_string()),
                    Some('S') => out.push_str(&format!("{:02}", s as i64)),
                    Some('w') => out.push_str(&(days + 4).rem_euclid(7).to_string()),
                    Some('W') => {
                        let wd = (days + 3).rem_euclid(7);
                        out.push_str(&format!("{:02}", (doy - 1 - wd + 7) / 7))
                    }
                    Some('Y') => out.push_str(&format!("{y:04}")),
                    Some('%') => out.push('%'),
                    _ => return Ok(Value::Null),
                }
            }
            Value::from(out)
        }
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
    }
}
