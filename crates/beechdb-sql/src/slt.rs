//! A sqllogictest runner (the format of SQLite's SQL conformance corpus), following the
//! original C runner's rules exactly: result formatting by column type (`I` as a 64-bit
//! integer, `R` as `%.3f` rounded as SQLite's printf rounds, `T` with `(empty)` and
//! unprintable bytes as `@`), `nosort` / `rowsort` / `valuesort`, results above the hash
//! threshold compared as the MD5 of the values each followed by a newline, `skipif` /
//! `onlyif` for the `sqlite` engine, and `halt`.
//!
//! Owns: parsing records and judging them. May call: the crate's public API.

use crate::{Connection, Database, Value};
use md5::{Digest, Md5};

/// The outcome of one file.
#[derive(Debug, Default, Clone)]
pub struct FileResult {
    pub passed: u64,
    pub failed: u64,
    /// The first failures: line, SQL, what went wrong.
    pub failures: Vec<(usize, String, String)>,
}

/// A value as the C runner prints it for column type `ty`.
fn format_value(v: &Value, ty: char) -> String {
    if v.is_null() {
        return "NULL".into();
    }
    match ty {
        'I' => v.as_i64().to_string(),
        'R' => format_3f(v.as_f64()),
        _ => {
            let t = v.to_text();
            if t.is_empty() {
                return "(empty)".into();
            }
            t.chars()
                .map(|c| if (' '..='~').contains(&c) { c } else { '@' })
                .collect()
        }
    }
}

/// Adds one at the last of the first `upto` decimal digits, carrying.
fn round_up(digits: &mut Vec<u8>, upto: usize) {
    let mut i = upto;
    loop {
        if i == 0 {
            digits.insert(0, b'1');
            return;
        }
        i -= 1;
        if digits[i] == b'9' {
            digits[i] = b'0';
        } else {
            digits[i] += 1;
            return;
        }
    }
}

/// `%.3f` as SQLite's printf does it: the exact decimal value rounded half away from zero.
pub fn format_3f(r: f64) -> String {
    if !r.is_finite() {
        return if r.is_nan() {
            "NaN".into()
        } else if r > 0.0 {
            "Inf".into()
        } else {
            "-Inf".into()
        };
    }
    let exact = format!("{:.60}", r.abs());
    let (int, frac) = exact.split_once('.').expect("a decimal point");
    let mut digits: Vec<u8> = int.bytes().chain(frac.bytes().take(3)).collect();
    if frac.as_bytes()[3] >= b'5' {
        let n = digits.len();
        round_up(&mut digits, n);
    }
    // As SQLite's printf: at most 16 significant digits, the rest zeros.
    let first = digits
        .iter()
        .position(|&d| d != b'0')
        .unwrap_or(digits.len());
    if digits.len() - first > 16 {
        let cut = first + 16;
        let up = digits[cut] >= b'5';
        for d in &mut digits[cut..] {
            *d = b'0';
        }
        if up {
            round_up(&mut digits, cut);
        }
    }
    let n = digits.len();
    let s = format!(
        "{}.{}",
        std::str::from_utf8(&digits[..n - 3]).unwrap(),
        std::str::from_utf8(&digits[n - 3..]).unwrap()
    );
    if r < 0.0 && s.bytes().any(|b| b.is_ascii_digit() && b != b'0') {
        format!("-{s}")
    } else {
        s
    }
}

/// Runs the sqllogictest script `text` on a fresh database.
pub fn run_script(text: &str) -> FileResult {
    let db = match Database::open_in_memory() {
        Ok(d) => d,
        Err(e) => {
            return FileResult {
                failed: 1,
                failures: vec![(0, String::new(), e.to_string())],
                ..Default::default()
            }
        }
    };
    let mut conn = db.connect();
    let lines: Vec<&str> = text.lines().collect();
    let mut res = FileResult::default();
    let mut hash_threshold = 0usize;
    let mut i = 0;
    let mut skip_next = false;
    while i < lines.len() {
        let line = lines[i].trim_end();
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() || line.starts_with('#') {
            i += 1;
            continue;
        }
        let start = i + 1;
        match words[0] {
            "skipif" => {
                if words.get(1) == Some(&"sqlite") {
                    skip_next = true;
                }
                i += 1;
                continue;
            }
            "onlyif" => {
                if words.get(1) != Some(&"sqlite") {
                    skip_next = true;
                }
                i += 1;
                continue;
            }
            "halt" => {
                if std::mem::take(&mut skip_next) {
                    i += 1;
                    continue;
                }
                break;
            }
            "hash-threshold" => {
                hash_threshold = words.get(1).and_then(|w| w.parse().ok()).unwrap_or(0);
                i += 1;
                continue;
            }
            "statement" | "query" => {}
            _ => {
                i += 1;
                continue;
            }
        }
        // The SQL: lines up to a blank line or `----`.
        i += 1;
        let mut sql = String::new();
        while i < lines.len() && !lines[i].trim().is_empty() && lines[i].trim_end() != "----" {
            sql.push_str(lines[i]);
            sql.push('\n');
            i += 1;
        }
        let mut expected: Vec<String> = Vec::new();
        if i < lines.len() && lines[i].trim_end() == "----" {
            i += 1;
            while i < lines.len() && !lines[i].trim().is_empty() {
                expected.push(lines[i].trim_end().to_string());
                i += 1;
            }
        }
        if std::mem::take(&mut skip_next) {
            continue;
        }
        let verdict = if words[0] == "statement" {
            let want_ok = words.get(1) == Some(&"ok");
            match (conn.execute_batch(&sql), want_ok) {
                (Ok(()), true) | (Err(_), false) => Ok(()),
                (Ok(()), false) => Err("succeeded, but an error was expected".to_string()),
                (Err(e), true) => Err(format!("failed: {e}")),
            }
        } else {
            let types: Vec<char> = words.get(1).map_or(Vec::new(), |t| t.chars().collect());
            let sort = words.get(2).copied().unwrap_or("nosort");
            judge_query(&mut conn, &sql, &types, sort, &expected, hash_threshold)
        };
        match verdict {
            Ok(()) => res.passed += 1,
            Err(why) => {
                res.failed += 1;
                if res.failures.len() < 20 {
                    res.failures.push((start, sql.trim().to_string(), why));
                }
            }
        }
    }
    res
}

fn judge_query(
    conn: &mut Connection,
    sql: &str,
    types: &[char],
    sort: &str,
    expected: &[String],
    hash_threshold: usize,
) -> Result<(), String> {
    let result = conn.query(sql, &[]).map_err(|e| format!("failed: {e}"))?;
    let ncol = result.columns.len();
    if ncol != types.len() {
        return Err(format!("{ncol} columns, {} expected", types.len()));
    }
    let mut rows: Vec<Vec<String>> = result
        .rows
        .iter()
        .map(|r| {
            r.iter()
                .zip(types)
                .map(|(v, &t)| format_value(v, t))
                .collect()
        })
        .collect();
    let mut values: Vec<String> = match sort {
        "rowsort" => {
            rows.sort();
            rows.into_iter().flatten().collect()
        }
        "valuesort" => {
            let mut v: Vec<String> = rows.into_iter().flatten().collect();
            v.sort();
            v
        }
        _ => rows.into_iter().flatten().collect(),
    };
    let hashed = expected.len() == 1 && expected[0].contains("values hashing to");
    let over = hash_threshold > 0 && values.len() > hash_threshold;
    if hashed || (over && expected.len() != values.len()) {
        let mut h = Md5::new();
        for v in &values {
            h.update(v.as_bytes());
            h.update(b"\n");
        }
        let got = format!("{} values hashing to {:x}", values.len(), h.finalize());
        return if expected.first() == Some(&got) {
            Ok(())
        } else {
            Err(format!(
                "got {got}, expected {}",
                expected.first().map_or("nothing", |s| s)
            ))
        };
    }
    // One value per line; some files put a row on a line.
    let mut want: Vec<String> = expected.to_vec();
    if want.len() != values.len() {
        want = expected
            .iter()
            .flat_map(|l| l.split_whitespace().map(String::from))
            .collect();
        values = values
            .iter()
            .flat_map(|v| v.split_whitespace().map(String::from))
            .collect();
    }
    if want == values {
        Ok(())
    } else {
        Err(format!("got {values:?}, expected {want:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_decimals_round_half_away_from_zero() {
        assert_eq!(format_3f(0.0625), "0.063");
        assert_eq!(format_3f(-0.0625), "-0.063");
        assert_eq!(format_3f(2.5), "2.500");
        assert_eq!(format_3f(9.9996), "10.000");
        assert_eq!(format_3f(-0.0001), "0.000");
        assert_eq!(format_3f(1234.0), "1234.000");
        assert_eq!(
            format_3f(-9223372036854775808.0),
            "-9223372036854776000.000"
        );
        assert_eq!(
            format_3f(-18446744073709551616.0),
            "-18446744073709550000.000"
        );
    }
}
