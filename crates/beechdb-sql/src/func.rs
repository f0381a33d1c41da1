//! Built-in functions: scalar functions, aggregates, LIKE and GLOB matching, with SQLite's
//! semantics (lang_corefunc.html, lang_aggfunc.html, lang_datefunc.html).
//!
//! Owns: the function table. May call: `value`.

use crate::error::{Error, Result};
use crate::functions::{AggregateState, UserFunction};
use crate::value::{arith, ArithOp, Collation, Value};
use smallvec::SmallVec;
use std::sync::Arc;

/// Whether `name` is an aggregate function (with `n` arguments).
pub fn is_aggregate(name: &str, n: usize) -> bool {
    match name {
        "count" | "sum" | "total" | "avg" | "group_concat" | "string_agg" | "json_group_array"
        | "json_group_object" => true,
        "min" | "max" => n == 1,
        _ => false,
    }
}

/// Checks a call of built-in function `name` with `n` arguments as SQLite's prepare does:
/// the function exists and takes that many arguments.
pub fn check_call(name: &str, n: usize) -> Result<()> {
    const WINDOW_ONLY: [&str; 11] = [
        "row_number",
        "rank",
        "dense_rank",
        "percent_rank",
        "cume_dist",
        "ntile",
        "lag",
        "lead",
        "first_value",
        "last_value",
        "nth_value",
    ];
    if WINDOW_ONLY.contains(&name) {
        return Err(Error::Sql(format!("misuse of window function {name}()")));
    }
    // (Fewest, most) arguments; `usize::MAX`: any number.
    let any = usize::MAX;
    let (least, most) = match name {
        "random" | "sqlite_version" | "last_insert_rowid" | "changes" | "total_changes" => (0, 0),
        "abs" | "typeof" | "length" | "octet_length" | "upper" | "lower" | "hex" | "quote"
        | "randomblob" | "zeroblob" | "unicode" | "sign" | "likely" | "unlikely" | "sum"
        | "total" | "avg" | "json" | "json_quote" | "json_group_array" => (1, 1),
        "ifnull" | "nullif" | "instr" | "likelihood" | "string_agg" | "json_patch"
        | "json_group_object" => (2, 2),
        "iif" | "replace" => (3, 3),
        "substr" | "substring" => (2, 3),
        "trim" | "ltrim" | "rtrim" | "round" | "group_concat" | "json_type"
        | "json_array_length" | "json_pretty" | "json_valid" => (1, 2),
        "count" => (0, 1),
        "coalesce" => (2, any),
        "min" | "max" | "json_extract" | "json_set" | "json_insert" | "json_replace"
        | "json_remove" => (1, any),
        "char" | "printf" | "format" | "date" | "time" | "datetime" | "julianday" | "strftime"
        | "unixepoch" | "json_array" | "json_object" => (0, any),
        "sqlite_compileoption_used" | "sqlite_compileoption_get" => (1, 1),
        "timediff" => (2, 2),
        "concat" => (1, any),
        "unhex" => (1, 2),
        "concat_ws" => (2, any),
        // Operators the parser spells as calls.
        _ if name.starts_with("->") => (0, any),
        _ => match crate::math::arity(name) {
            Some(a) => a,
            None => return Err(Error::Sql(format!("no such function: {name}"))),
        },
    };
    match (least..=most).contains(&n) {
        true => Ok(()),
        false => Err(Error::Sql(format!(
            "wrong number of arguments to function {name}()"
        ))),
    }
}

/// Whether a built-in scalar function gives the same result for the same arguments (what
/// an index expression may call).
pub fn is_deterministic(name: &str) -> bool {
    !matches!(
        name,
        "random" | "randomblob" | "changes" | "total_changes" | "last_insert_rowid"
    )
}

/// The running state of one aggregate.
pub enum Acc {
    Count(i64),
    Sum(SumCtx),
    Total(SumCtx),
    Avg(SumCtx),
    /// min (the least so far, `Less`) or max (`Greater`).
    Extreme(Option<Value>, std::cmp::Ordering),
    Concat(Option<String>),
    Json(crate::json::JsonAgg),
    User(Box<dyn AggregateState>),
}

impl Acc {
    /// The state of a call of `name` with `args`, or of the registered aggregate it
    /// resolved to.
    pub fn new(name: &str, args: &[crate::ast::Expr], user: Option<&UserFunction>) -> Acc {
        if let Some(UserFunction::Aggregate(f)) = user {
            return Acc::User(f.start());
        }
        match name {
            "count" => Acc::Count(0),
            "sum" => Acc::Sum(SumCtx::default()),
            "total" => Acc::Total(SumCtx::default()),
            "avg" => Acc::Avg(SumCtx::default()),
            "min" => Acc::Extreme(None, std::cmp::Ordering::Less),
            "max" => Acc::Extreme(None, std::cmp::Ordering::Greater),
            "json_group_array" | "json_group_object" => {
                Acc::Json(crate::json::JsonAgg::new(name, args))
            }
            _ => Acc::Concat(None),
        }
    }

    /// For min() and max(): whether a step with `args` keeps the value it has (a NULL, or
    /// no better value), which in SQLite leaves the bare columns of the query on the row
    /// they were read from. False before the first value, and for other aggregates.
    pub fn keeps_extreme(&self, args: &[Value], coll: Collation) -> bool {
        match (self, args.first()) {
            (Acc::Extreme(Some(m), want), Some(v)) => v.is_null() || v.cmp_with(m, coll) != *want,
            _ => false,
        }
    }

    /// Adds a row's arguments (`count(*)` passes none); the commonest steps (a count, an
    /// integer sum) inline.
    #[inline]
    pub fn step(&mut self, args: &[Value], coll: Collation) -> Result<()> {
        match (&mut *self, args.first()) {
            (Acc::Count(n), v) => {
                if v.is_none_or(|v| !v.is_null()) {
                    *n += 1
                }
                Ok(())
            }
            (Acc::Sum(c), Some(Value::Integer(i))) if !c.approx => {
                c.add_int(*i);
                Ok(())
            }
            _ => self.step_any(args, coll),
        }
    }

    fn step_any(&mut self, args: &[Value], coll: Collation) -> Result<()> {
        let v = args.first();
        match self {
            Acc::User(state) => return state.step(args),
            Acc::Json(j) => return j.step(args),
            Acc::Count(n) => {
                if v.is_none_or(|v| !v.is_null()) {
                    *n += 1
                }
            }
            Acc::Sum(c) | Acc::Total(c) | Acc::Avg(c) => {
                if let Some(v) = v.filter(|v| !v.is_null()) {
                    c.add(v);
                }
            }
            Acc::Extreme(m, want) => {
                if let Some(v) = v.filter(|v| !v.is_null()) {
                    // The first of equal values stays, as in SQLite.
                    if m.as_ref().is_none_or(|m| v.cmp_with(m, coll) == *want) {
                        *m = Some(v.clone());
                    }
                }
            }
            Acc::Concat(s) => {
                let Some(v) = v.filter(|v| !v.is_null()) else {
                    return Ok(());
                };
                let sep = match args.get(1) {
                    Some(sep) => sep.to_text(),
                    None => ",".to_string(),
                };
                let v = v.to_text();
                match s {
                    None => *s = Some(v),
                    Some(s) => {
                        fits(s.len() + sep.len() + v.len())?;
                        s.push_str(&sep);
                        s.push_str(&v);
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether the built-in aggregate `name` can take rows out again ([`Acc::inverse`]).
    pub fn has_inverse(name: &str) -> bool {
        matches!(name, "count" | "sum" | "total" | "avg")
    }

    /// Takes one row's arguments out again, as SQLite's `xInverse` does (for what
    /// [`Acc::has_inverse`] names).
    pub fn inverse(&mut self, args: &[Value]) -> Result<()> {
        let v = args.first();
        match self {
            Acc::Count(n) => {
                if v.is_none_or(|v| !v.is_null()) {
                    *n -= 1
                }
            }
            Acc::Sum(c) | Acc::Total(c) | Acc::Avg(c) => {
                if let Some(v) = v.filter(|v| !v.is_null()) {
                    c.remove(v);
                }
            }
            _ => return Err(Error::Misuse("this aggregate has no inverse".into())),
        }
        Ok(())
    }

    /// Whether [`Acc::finish`] of a call of `name` (resolved to `user`) leaves the state
    /// as it was, so that steps may follow it (a running total over frames that only
    /// grow): not for JSON's nor a registered aggregate's, which hand their state over.
    pub fn finish_keeps_state(name: &str, user: Option<&UserFunction>) -> bool {
        !matches!(user, Some(UserFunction::Aggregate(_)))
            && !matches!(name, "json_group_array" | "json_group_object")
    }

    pub fn finish(&mut self) -> Result<Value> {
        Ok(match self {
            Acc::User(state) => return state.finish(),
            Acc::Json(j) => j.finish(),
            Acc::Count(n) => Value::Integer(*n),
            Acc::Sum(c) if c.cnt == 0 => Value::Null,
            Acc::Sum(c) if c.ovrfl => return Err(Error::Sql("integer overflow".into())),
            Acc::Sum(c) if !c.approx => Value::Integer(c.i_sum),
            // A NaN (Inf plus -Inf) is NULL, as SQLite's sqlite3_result_double makes it.
            Acc::Sum(c) | Acc::Total(c) => real_or_null(c.real()),
            Acc::Avg(c) if c.cnt == 0 => Value::Null,
            Acc::Avg(c) => real_or_null(c.real() / c.cnt as f64),
            Acc::Extreme(m, _) => m.clone().unwrap_or(Value::Null),
            Acc::Concat(s) => s.clone().map_or(Value::Null, Value::from),
        })
    }
}

/// `r`, or NULL for a NaN (SQLite has no NaN values).
fn real_or_null(r: f64) -> Value {
    match r.is_nan() {
        true => Value::Null,
        false => Value::Real(r),
    }
}

/// The running sum of sum(), total() and avg(), as SQLite keeps it (`SumCtx` in its
/// func.c), so that results agree with SQLite's to the bit: exact in integers until a value
/// that is not one arrives or the sum overflows, then a Kahan-Babuska-Neumaier compensated
/// sum of reals (seeded with the integer sum so far).
#[derive(Default)]
pub struct SumCtx {
    r_sum: f64,
    r_err: f64,
    i_sum: i64,
    cnt: i64,
    /// Reals are summed (a value that is not an integer came, or the integers overflowed).
    approx: bool,
    /// The integers overflowed and no value that is not an integer came after: sum() fails.
    ovrfl: bool,
}

/// Integers of this size or more are added to the compensated sum in two parts, each
/// exact as a real.
const KBN_SPLIT: i64 = 1 << 52;

impl SumCtx {
    /// Adds a value that is not NULL: text that is wholly an integer counts as one (SQLite's
    /// `sqlite3_value_numeric_type`), anything else as a real.
    fn add(&mut self, v: &Value) {
        match integer_of(v) {
            Some(i) => self.add_int(i),
            None => {
                self.cnt += 1;
                if self.approx {
                    self.ovrfl = false;
                } else {
                    self.start_reals();
                }
                self.kbn(v.as_f64());
            }
        }
    }

    #[inline]
    fn add_int(&mut self, i: i64) {
        self.cnt += 1;
        if !self.approx && self.exact(self.i_sum.checked_add(i)) {
            return;
        }
        self.kbn_int(i);
    }

    /// Keeps `sum` as the exact integer sum (`true`), or, when it overflowed (`None`),
    /// goes over to summing reals, sum() failing unless a real comes after.
    fn exact(&mut self, sum: Option<i64>) -> bool {
        match sum {
            Some(s) => self.i_sum = s,
            None => {
                self.ovrfl = true;
                self.start_reals();
            }
        }
        sum.is_some()
    }

    /// Takes a value that is not NULL out again (SQLite's `sumInverse`).
    fn remove(&mut self, v: &Value) {
        let as_int = integer_of(v);
        self.cnt -= 1;
        // (While the sum is exact, every value added was an integer.)
        let i = as_int.unwrap_or_else(|| v.as_i64());
        if !self.approx && self.exact(self.i_sum.checked_sub(i)) {
            return;
        }
        match as_int {
            Some(i64::MIN) => {
                self.kbn_int(i64::MAX);
                self.kbn_int(1);
            }
            Some(i) => self.kbn_int(-i),
            None => self.kbn(-v.as_f64()),
        }
    }

    /// Adds an integer to the compensated sum, in two parts when it is large.
    fn kbn_int(&mut self, i: i64) {
        let (big, small) = split_int(i);
        self.kbn(big);
        if small != 0.0 {
            self.kbn(small);
        }
    }

    fn start_reals(&mut self) {
        (self.r_sum, self.r_err) = split_int(self.i_sum);
        self.approx = true;
    }

    /// One Kahan-Babuska-Neumaier step.
    fn kbn(&mut self, r: f64) {
        let s = self.r_sum;
        let t = s + r;
        if s.abs() > r.abs() {
            self.r_err += (s - t) + r;
        } else {
            self.r_err += (r - t) + s;
        }
        self.r_sum = t;
    }

    /// The sum as a real: the compensation added unless it overflowed.
    fn real(&self) -> f64 {
        match self.approx {
            false => self.i_sum as f64,
            true if self.r_err.is_finite() => self.r_sum + self.r_err,
            true => self.r_sum,
        }
    }
}

/// `v` as the integer SQLite's `sqlite3_value_numeric_type` makes of it: an integer, or
/// text that is wholly one.
fn integer_of(v: &Value) -> Option<i64> {
    match v {
        Value::Integer(i) => Some(*i),
        Value::Text(t) => match crate::value::parse_number(t) {
            Some(Value::Integer(i)) => Some(i),
            _ => None,
        },
        _ => None,
    }
}

/// `i` as a real that holds it to a multiple of 16384 and the real of the rest, when it is
/// 2^52 or more in size (each part exact); a smaller one as itself and 0.
fn split_int(i: i64) -> (f64, f64) {
    if i <= -KBN_SPLIT || i >= KBN_SPLIT {
        let small = i % 16384;
        ((i - small) as f64, small as f64)
    } else {
        (i as f64, 0.0)
    }
}

fn arg_count(name: &str, args: &[Value], ok: impl Fn(usize) -> bool) -> Result<()> {
    if ok(args.len()) {
        Ok(())
    } else {
        Err(Error::Sql(format!(
            "wrong number of arguments to function {name}()"
        )))
    }
}

/// Calls scalar function `name`.
pub fn call(name: &str, args: &[Value]) -> Result<Value> {
    let a = |i: usize| args.get(i).cloned().unwrap_or(Value::Null);
    Ok(match name {
        "abs" => {
            arg_count(name, args, |n| n == 1)?;
            match a(0) {
                Value::Null => Value::Null,
                Value::Integer(i) => Value::Integer(
                    i.checked_abs()
                        .ok_or_else(|| Error::Sql("integer overflow".into()))?,
                ),
                v => {
                    let r = v.as_f64();
                    Value::Real(if r < 0.0 { -r } else { r })
                }
            }
        }
        "coalesce" | "ifnull" => {
            arg_count(
                name,
                args,
                |n| if name == "ifnull" { n == 2 } else { n >= 2 },
            )?;
            args.iter()
                .find(|v| !v.is_null())
                .cloned()
                .unwrap_or(Value::Null)
        }
        "nullif" => {
            arg_count(name, args, |n| n == 2)?;
            if a(0) == a(1) {
                Value::Null
            } else {
                a(0)
            }
        }
        "iif" => {
            arg_count(name, args, |n| n == 3)?;
            if a(0).truth() == Some(true) {
                a(1)
            } else {
                a(2)
            }
        }
        "typeof" => Value::text(a(0).type_name()),
        "length" => match a(0) {
            Value::Null => Value::Null,
            Value::Blob(b) => Value::Integer(b.len() as i64),
            // Characters before the first zero byte, as SQLite counts them.
            v => Value::Integer(v.to_text().chars().take_while(|&c| c != '\0').count() as i64),
        },
        "upper" | "lower" => match a(0) {
            Value::Null => Value::Null,
            v => {
                let t = v.to_text();
                Value::from(if name == "upper" {
                    t.to_ascii_uppercase()
                } else {
                    t.to_ascii_lowercase()
                })
            }
        },
        "substr" | "substring" => {
            arg_count(name, args, |n| n == 2 || n == 3)?;
            if a(0).is_null() || a(1).is_null() || (args.len() == 3 && a(2).is_null()) {
                return Ok(Value::Null);
            }
            substr(&a(0), a(1).as_i64(), args.get(2).map(Value::as_i64))
        }
        "instr" => {
            if a(0).is_null() || a(1).is_null() {
                return Ok(Value::Null);
            }
            let (h, n) = (a(0).to_text(), a(1).to_text());
            Value::Integer(h.find(&n).map_or(0, |i| h[..i].chars().count() as i64 + 1))
        }
        "trim" | "ltrim" | "rtrim" => {
            if a(0).is_null() || args.get(1).is_some_and(Value::is_null) {
                return Ok(Value::Null);
            }
            let s = a(0).to_text();
            let set: Vec<char> = match args.get(1) {
                // The set is read as a C string, to its first zero byte.
                Some(v) => to_nul(&v.to_text()).chars().collect(),
                None => vec![' '],
            };
            let r = match name {
                "trim" => s.trim_matches(|c| set.contains(&c)),
                "ltrim" => s.trim_start_matches(|c| set.contains(&c)),
                _ => s.trim_end_matches(|c| set.contains(&c)),
            };
            Value::text(r)
        }
        "replace" => {
            // In SQLite's order: an empty pattern gives the text back before the
            // replacement is looked at.
            if a(0).is_null() || a(1).is_null() {
                return Ok(Value::Null);
            }
            let pat = a(1).to_text();
            if pat.is_empty() || pat.starts_with('\0') {
                return Ok(Value::from(a(0).to_text()));
            }
            if a(2).is_null() {
                return Ok(Value::Null);
            }
            let (text, with) = (a(0).to_text(), a(2).to_text());
            if with.len() > pat.len() {
                let grows = text.matches(&*pat).count() * (with.len() - pat.len());
                fits(text.len() + grows)?;
            }
            Value::from(text.replace(&pat, &with))
        }
        // SQLite's roundFunc: halves away from zero through an integer, or through its
        // printf's decimal digits and back.
        "round" => {
            if a(0).is_null() || args.get(1).is_some_and(Value::is_null) {
                return Ok(Value::Null);
            }
            let digits = args.get(1).map_or(0, Value::as_i64).clamp(0, 30);
            let r = a(0).as_f64();
            Value::Real(
                if !(-4_503_599_627_370_496.0..=4_503_599_627_370_496.0).contains(&r) {
                    r
                } else if digits == 0 {
                    (r + if r < 0.0 { -0.5 } else { 0.5 }) as i64 as f64
                } else {
                    let text = crate::printf::printf(&[
                        Value::text("%!.*f"),
                        Value::Integer(digits),
                        Value::Real(r),
                    ]);
                    crate::printf::sqlite_atof(&text.to_text())
                },
            )
        }
        "hex" => {
            let b = a(0).to_blob();
            fits(2 * b.len())?;
            Value::from(b.iter().map(|b| format!("{b:02X}")).collect::<String>())
        }
        "quote" => Value::from(quote(&a(0))),
        "random" => Value::Integer(rand_i64()),
        "randomblob" | "zeroblob" => {
            fits(a(0).as_i64().max(0) as usize)?;
            let n = a(0).as_i64().max(1) as usize;
            let b: Vec<u8> = if name == "zeroblob" {
                vec![0; a(0).as_i64().max(0) as usize]
            } else {
                (0..n).map(|_| rand_i64() as u8).collect()
            };
            Value::Blob(b.into())
        }
        "min" | "max" => {
            if args.iter().any(Value::is_null) {
                return Ok(Value::Null);
            }
            let mut best = a(0);
            for v in &args[1..] {
                // Of equal values (1 and 1.0) min() keeps the last, max() the first, as
                // SQLite's minmaxFunc does.
                let o = v.cmp_with(&best, Collation::Binary);
                if (name == "min" && o.is_le()) || (name == "max" && o.is_gt()) {
                    best = v.clone();
                }
            }
            best
        }
        "octet_length" => match a(0) {
            Value::Null => Value::Null,
            Value::Blob(b) => Value::Integer(b.len() as i64),
            Value::Text(t) => Value::Integer(t.len() as i64),
            v => Value::Integer(v.to_text().len() as i64),
        },
        "unhex" => match (a(0), args.get(1)) {
            (Value::Null, _) | (_, Some(Value::Null)) => Value::Null,
            (x, pass) => unhex(&x.to_text(), &pass.map(Value::to_text).unwrap_or_default()),
        },
        // NULL arguments are left out, separator and all.
        "concat" => concat_texts("", args)?,
        "concat_ws" => match a(0) {
            Value::Null => Value::Null,
            sep => concat_texts(&sep.to_text(), &args[1..])?,
        },
        // Past Unicode's range U+FFFD, as in SQLite (which writes a surrogate's bytes as
        // they are: text here cannot hold them, so U+FFFD again).
        "char" => Value::from(
            args.iter()
                .map(|v| {
                    u32::try_from(v.as_i64())
                        .ok()
                        .and_then(char::from_u32)
                        .unwrap_or('\u{fffd}')
                })
                .collect::<String>(),
        ),
        "unicode" => match a(0) {
            Value::Null => Value::Null,
            v => v
                .to_text()
                .chars()
                .next()
                .filter(|&c| c != '\0')
                .map_or(Value::Null, |c| Value::Integer(c as i64)),
        },
        // Only a number, or text that is wholly one (`sqlite3_value_numeric_type`), has a
        // sign: other text and blobs give NULL.
        "sign" => match crate::value::Affinity::Numeric.apply(a(0)) {
            Value::Null | Value::Text(_) | Value::Blob(_) => Value::Null,
            n => {
                let f = n.as_f64();
                Value::Integer(if f > 0.0 {
                    1
                } else if f < 0.0 {
                    -1
                } else {
                    0
                })
            }
        },
        "likely" | "unlikely" => a(0),
        "likelihood" => a(0),
        "printf" | "format" => crate::printf::printf(args),
        "date" | "time" | "datetime" | "julianday" | "strftime" | "unixepoch" | "timediff" => {
            crate::date::call(name, args)?
        }
        "sqlite_version" => Value::text(crate::SQLITE_VERSION),
        "sqlite_compileoption_used" => match a(0) {
            Value::Null => Value::Null,
            v => Value::Integer(crate::math::compile_option_used(&v.to_text()) as i64),
        },
        "sqlite_compileoption_get" => match usize::try_from(a(0).as_i64()) {
            Ok(i) if !a(0).is_null() => crate::math::COMPILE_OPTIONS
                .get(i)
                .map_or(Value::Null, |o| Value::text(&o.to_string_lossy())),
            _ => Value::Null,
        },
        _ if crate::math::arity(name).is_some() => crate::math::call(name, args)?,
        "last_insert_rowid" | "changes" | "total_changes" => {
            return Err(Error::Sql(format!(
                "{name}() is answered by the connection"
            )))
        }
        _ => return Err(Error::Sql(format!("no such function: {name}"))),
    })
}

fn substr(v: &Value, start: i64, len: Option<i64>) -> Value {
    // SQLite's substrFunc: positions in characters of text (to its first zero byte), in
    // bytes of a blob; an empty blob has no bytes to point at, and gives NULL.
    let owned;
    let (bytes, blob): (&[u8], bool) = match v {
        Value::Blob(b) if b.is_empty() => return Value::Null,
        Value::Blob(b) => (b, true),
        Value::Text(t) => (t.as_bytes(), false),
        other => {
            owned = other.to_text();
            (owned.as_bytes(), false)
        }
    };
    let text = match blob {
        true => "",
        false => {
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            std::str::from_utf8(&bytes[..end]).unwrap_or_default()
        }
    };
    let (mut p1, mut p2) = (start, len.unwrap_or(MAX_LENGTH as i64));
    let count = match blob {
        true => bytes.len() as i64,
        false if p1 < 0 => text.chars().count() as i64,
        false => 0,
    };
    if p1 < 0 {
        p1 += count;
        if p1 < 0 {
            p2 = if p2 < 0 { 0 } else { p2 + p1 };
            p1 = 0;
        }
    } else if p1 > 0 {
        p1 -= 1;
    } else if p2 > 0 {
        p2 -= 1;
    }
    if p2 < 0 {
        p2 = if p2 < -p1 { p1 } else { -p2 };
        p1 -= p2;
    }
    if blob {
        let n = bytes.len() as i64;
        if p1 >= n {
            (p1, p2) = (0, 0);
        } else if p2 > n - p1 {
            p2 = n - p1;
        }
        return Value::Blob(bytes[p1 as usize..(p1 + p2) as usize].to_vec().into());
    }
    let at = |s: &str, chars: i64| {
        usize::try_from(chars)
            .ok()
            .and_then(|c| s.char_indices().nth(c))
            .map_or(s.len(), |(i, _)| i)
    };
    let rest = &text[at(text, p1)..];
    Value::from(rest[..at(rest, p2)].to_string())
}

pub fn quote(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Integer(i) => i.to_string(),
        Value::Real(r) => crate::printf::real_quoted(*r),
        // As SQLite's `%Q`: the text up to its first zero byte.
        Value::Text(s) => format!(
            "'{}'",
            s.split('\0').next().unwrap_or("").replace('\'', "''")
        ),
        Value::Blob(b) => format!(
            "X'{}'",
            b.iter().map(|x| format!("{x:02X}")).collect::<String>()
        ),
    }
}

fn rand_i64() -> i64 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0x9e37_79b9, |d| d.as_nanos() as u64)
                | 1,
        );
    }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        x as i64
    })
}

/// The longest string or blob a function makes: SQLite's default `SQLITE_MAX_LENGTH`. A
/// longer one is SQLite's "string or blob too big" (SQLITE_TOOBIG) rather than an
/// allocation that could take all memory (`zeroblob(5e9)`, a string doubled by a recursive
/// query) and end the process.
pub const MAX_LENGTH: usize = 1_000_000_000;

/// Ok when a value of `len` bytes may be made (see [`MAX_LENGTH`]).
pub fn fits(len: usize) -> Result<()> {
    match len <= MAX_LENGTH {
        true => Ok(()),
        false => Err(Error::Function(
            crate::error::codes::SQLITE_TOOBIG,
            "string or blob too big".into(),
        )),
    }
}

/// `unhex(hex, pass)`: the bytes of pairs of hex digits, with characters of `pass` allowed
/// between pairs; NULL for anything else (SQLite's `unhexFunc`).
fn unhex(hex: &str, pass: &str) -> Value {
    let mut out = Vec::with_capacity(hex.len() / 2);
    // SQLite reads the text to its first zero byte.
    let mut chars = hex.chars().take_while(|&c| c != '\0');
    while let Some(c) = chars.next() {
        let Some(high) = c.to_digit(16) else {
            if pass.contains(c) {
                continue;
            }
            return Value::Null;
        };
        match chars.next().and_then(|d| d.to_digit(16)) {
            Some(low) => out.push((high << 4 | low) as u8),
            None => return Value::Null,
        }
    }
    Value::Blob(out.into())
}

/// `concat` and `concat_ws`: the texts of the arguments that are not NULL, `sep` between.
fn concat_texts(sep: &str, args: &[Value]) -> Result<Value> {
    let mut out = String::new();
    for v in args {
        let text = match v {
            Value::Null => continue,
            v => v.to_text(),
        };
        // The separator goes before any value once the output has bytes (an empty text
        // first adds none), as SQLite's concatFuncCore writes it.
        if !out.is_empty() {
            out.push_str(sep);
        }
        fits(out.len() + text.len())?;
        out.push_str(&text);
    }
    Ok(Value::from(out))
}

/// `s` up to its first zero byte, as C reads it.
fn to_nul(s: &str) -> &str {
    s.split('\0').next().unwrap_or(s)
}

/// `x LIKE pattern` (ASCII case-insensitive, `%` and `_`, optional escape).
pub fn like(s: &str, pattern: &str, escape: Option<char>) -> bool {
    // SQLite compares C strings: each ends at its first zero byte.
    let (s, pattern) = (to_nul(s), to_nul(pattern));
    // An ASCII pattern matches bytes as it matches characters, unless a `_` (one character)
    // meets a character of several bytes: no ASCII byte is part of another character.
    if pattern.is_ascii()
        && escape.is_none_or(|e| e.is_ascii())
        && (!pattern.contains('_') || s.is_ascii())
    {
        return like_units(s.as_bytes(), pattern.as_bytes(), escape.map(|e| e as u8));
    }
    let s: SmallVec<[char; 64]> = s.chars().collect();
    let p: SmallVec<[char; 32]> = pattern.chars().collect();
    like_units(&s, &p, escape)
}

/// A character of LIKE's matching: a `char`, or a byte of ASCII text.
trait LikeUnit: Copy + PartialEq {
    const PERCENT: Self;
    const UNDERSCORE: Self;
    fn same_letter(self, other: Self) -> bool;
}

impl LikeUnit for char {
    const PERCENT: char = '%';
    const UNDERSCORE: char = '_';
    fn same_letter(self, other: char) -> bool {
        self.eq_ignore_ascii_case(&other)
    }
}

impl LikeUnit for u8 {
    const PERCENT: u8 = b'%';
    const UNDERSCORE: u8 = b'_';
    fn same_letter(self, other: u8) -> bool {
        self.eq_ignore_ascii_case(&other)
    }
}

fn like_units<U: LikeUnit>(s: &[U], p: &[U], escape: Option<U>) -> bool {
    // Left to right, going back only to just after the last `%` met (with one more
    // character under it) when the rest fails to match: linear in the common patterns,
    // never exponential.
    let (mut si, mut pi) = (0, 0);
    let mut last_percent: Option<(usize, usize)> = None;
    loop {
        if let Some(&c) = p.get(pi) {
            let (matches, width) = if Some(c) == escape {
                let Some(&lit) = p.get(pi + 1) else {
                    return false;
                };
                (s.get(si).is_some_and(|x| x.same_letter(lit)), 2)
            } else if c == U::PERCENT {
                last_percent = Some((pi + 1, si));
                pi += 1;
                continue;
            } else if c == U::UNDERSCORE {
                (si < s.len(), 1)
            } else {
                (s.get(si).is_some_and(|x| x.same_letter(c)), 1)
            };
            if matches {
                si += 1;
                pi += width;
                continue;
            }
        } else if si == s.len() {
            return true;
        }
        match last_percent {
            Some((after, from)) if from < s.len() => {
                last_percent = Some((after, from + 1));
                (pi, si) = (after, from + 1);
            }
            _ => return false,
        }
    }
}

/// `x GLOB pattern` (case-sensitive, `*`, `?`, `[...]`). Left to right, going back only
/// to just after the last `*` met, as LIKE does (`like_units`): a `*` per character tried
/// at every split had made `'aaa...' GLOB '*a*a*a...b'` run for minutes, and recursed once
/// per character of the text.
pub fn glob(s: &str, pattern: &str) -> bool {
    let (s, pattern) = (to_nul(s), to_nul(pattern));
    let s: SmallVec<[char; 64]> = s.chars().collect();
    let p: SmallVec<[char; 32]> = pattern.chars().collect();
    let (mut si, mut pi) = (0, 0);
    let mut last_star: Option<(usize, usize)> = None;
    loop {
        if let Some(&c) = p.get(pi) {
            let width = match c {
                '*' => {
                    last_star = Some((pi + 1, si));
                    pi += 1;
                    continue;
                }
                '?' => (si < s.len()).then_some(1),
                '[' => {
                    let Some(&x) = s.get(si) else {
                        return false;
                    };
                    // A class with no end matches nothing, wherever a `*` puts it.
                    let (matched, width) = match glob_class(&p[pi + 1..], x) {
                        Some(m) => m,
                        None => return false,
                    };
                    matched.then_some(width + 1)
                }
                _ => (s.get(si) == Some(&c)).then_some(1),
            };
            if let Some(width) = width {
                si += 1;
                pi += width;
                continue;
            }
        } else if si == s.len() {
            return true;
        }
        match last_star {
            Some((after, from)) if from < s.len() => {
                last_star = Some((after, from + 1));
                (pi, si) = (after, from + 1);
            }
            _ => return false,
        }
    }
}

/// Whether `x` is in the GLOB class whose text (after its `[`) begins `p`, and how many
/// characters of `p` the class takes with its `]`; `None` when it has no `]`.
fn glob_class(p: &[char], x: char) -> Option<(bool, usize)> {
    let negate = p.first() == Some(&'^');
    let mut i = usize::from(negate);
    let (mut matched, mut first) = (false, true);
    while i < p.len() && (p[i] != ']' || first) {
        if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
            matched |= p[i] <= x && x <= p[i + 2];
            i += 3;
        } else {
            matched |= p[i] == x;
            i += 1;
        }
        first = false;
    }
    (i < p.len()).then_some((matched != negate, i + 1))
}

/// The value of CURRENT_DATE / CURRENT_TIME / CURRENT_TIMESTAMP.
pub fn current(what: &str) -> Value {
    crate::date::call(what, &[Value::text("now")]).unwrap_or(Value::Null)
}

/// Integer arithmetic helpers for the bitwise operators.
pub fn bitwise(op: crate::ast::BinOp, a: &Value, b: &Value) -> Value {
    use crate::ast::BinOp;
    if a.is_null() || b.is_null() {
        return Value::Null;
    }
    let (x, y) = (a.as_i64(), b.as_i64());
    Value::Integer(match op {
        BinOp::BitAnd => x & y,
        BinOp::BitOr => x | y,
        BinOp::Shl => shift(x, y),
        BinOp::Shr => shift(x, y.saturating_neg()),
        _ => unreachable!("bitwise operators only"),
    })
}

fn shift(x: i64, by: i64) -> i64 {
    if by >= 64 {
        0
    } else if by >= 0 {
        x << by
    } else if by <= -64 {
        if x < 0 {
            -1
        } else {
            0
        }
    } else {
        x >> (-by)
    }
}

/// `a || b`.
pub fn concat(a: &Value, b: &Value) -> Result<Value> {
    if a.is_null() || b.is_null() {
        return Ok(Value::Null);
    }
    let (a, b) = (a.to_text(), b.to_text());
    fits(a.len() + b.len())?;
    Ok(Value::Text(Arc::from(format!("{a}{b}"))))
}

pub fn negate(v: &Value) -> Value {
    match v {
        Value::Null => Value::Null,
        Value::Integer(i) => match i.checked_neg() {
            Some(n) => Value::Integer(n),
            None => Value::Real(-(*i as f64)),
        },
        // `-x` is `0 - x` in SQLite, so no negative zero comes of it (a literal `-0.0` is
        // folded when parsed).
        Value::Real(r) => Value::Real(0.0 - r),
        other => arith(ArithOp::Sub, &Value::Integer(0), &other.to_numeric()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_and_glob() {
        assert!(like("Hello", "h%O", None));
        assert!(like("a_c", "a\\_c", Some('\\')));
        assert!(!like("abc", "a\\_c", Some('\\')));
        assert!(glob("abc", "a*"));
        assert!(!glob("Abc", "a*"));
        assert!(glob("b", "[a-c]"));
        assert!(glob("d", "[^a-c]"));
    }

    /// The matcher LIKE had: a direct reading of the rules, tried on every split at a `%`.
    fn like_reference(s: &[char], p: &[char], esc: Option<char>) -> bool {
        let Some((&c, rest)) = p.split_first() else {
            return s.is_empty();
        };
        if Some(c) == esc {
            let Some((&lit, rest)) = rest.split_first() else {
                return false;
            };
            return s.first().is_some_and(|&x| x.eq_ignore_ascii_case(&lit))
                && like_reference(&s[1..], rest, esc);
        }
        match c {
            '%' => (0..=s.len()).any(|i| like_reference(&s[i..], rest, esc)),
            '_' => !s.is_empty() && like_reference(&s[1..], rest, esc),
            _ => {
                s.first().is_some_and(|&x| x.eq_ignore_ascii_case(&c))
                    && like_reference(&s[1..], rest, esc)
            }
        }
    }

    #[test]
    fn like_agrees_with_the_rules_and_stays_linear() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let pick = |rng: &mut rand::rngs::StdRng, from: &[char], n: usize| -> String {
            (0..rng.gen_range(0..n))
                .map(|_| from[rng.gen_range(0..from.len())])
                .collect()
        };
        for _ in 0..20_000 {
            // Characters of one to four bytes: an ASCII pattern is matched on bytes.
            let s = pick(&mut rng, &['a', 'A', 'b', '%', '_', 'é', '€', '😀'], 8);
            let p = pick(&mut rng, &['a', 'b', 'B', '%', '_', '\\', 'é'], 7);
            let esc = rng.gen_bool(0.5).then_some('\\');
            let (sc, pc): (Vec<char>, Vec<char>) = (s.chars().collect(), p.chars().collect());
            assert_eq!(
                like(&s, &p, esc),
                like_reference(&sc, &pc, esc),
                "{s:?} LIKE {p:?} ESCAPE {esc:?}"
            );
        }
        // Many `%` against a long string that almost matches: the reference (trying every
        // split) would not end; this goes back to the last `%` only.
        let long = "a".repeat(5000);
        assert!(!like(&long, "%a%a%a%a%a%a%a%a%a%a%b", None));
    }

    /// The matcher GLOB had: each `*` tried at every split, recursively.
    fn glob_reference(s: &[char], p: &[char]) -> bool {
        let Some((&c, rest)) = p.split_first() else {
            return s.is_empty();
        };
        match c {
            '*' => (0..=s.len()).any(|i| glob_reference(&s[i..], rest)),
            '?' => !s.is_empty() && glob_reference(&s[1..], rest),
            '[' => {
                let Some(&x) = s.first() else { return false };
                match glob_class(rest, x) {
                    Some((true, width)) => glob_reference(&s[1..], &rest[width..]),
                    _ => false,
                }
            }
            _ => s.first() == Some(&c) && glob_reference(&s[1..], rest),
        }
    }

    #[test]
    fn glob_agrees_with_the_rules_and_stays_linear() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let pick = |rng: &mut rand::rngs::StdRng, from: &[char], n: usize| -> String {
            (0..rng.gen_range(0..n))
                .map(|_| from[rng.gen_range(0..from.len())])
                .collect()
        };
        for _ in 0..20_000 {
            let s = pick(&mut rng, &['a', 'b', 'c', '*', ']', '-', 'é'], 8);
            let p = pick(
                &mut rng,
                &['a', 'b', '*', '?', '[', ']', '^', '-', 'c', 'é'],
                8,
            );
            let (sc, pc): (Vec<char>, Vec<char>) = (s.chars().collect(), p.chars().collect());
            assert_eq!(glob(&s, &p), glob_reference(&sc, &pc), "{s:?} GLOB {p:?}");
        }
        // The reference would run for minutes on the first two, and recurse once per
        // character of the text (a million deep) on the last.
        let long = "a".repeat(5000);
        assert!(!glob(&long, &format!("{}b", "*a".repeat(30))));
        assert!(!glob(&long, &format!("{}?b", "*a*[a-c]".repeat(15))));
        assert!(glob(&long, &"*a*[a-c]".repeat(15)));
        assert!(glob(&"x".repeat(1_000_000), "*x?x"));
    }

    #[test]
    fn substr_follows_sqlite() {
        let s = Value::text("hello");
        assert_eq!(substr(&s, 2, Some(3)), Value::text("ell"));
        assert_eq!(substr(&s, -3, None), Value::text("llo"));
        assert_eq!(substr(&s, 0, Some(2)), Value::text("h"));
        assert_eq!(substr(&s, 3, Some(-2)), Value::text("he"));
    }
}
