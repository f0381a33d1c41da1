//! SQLite's math functions (lang_mathfunc.html, built in as SQLite builds them with
//! SQLITE_ENABLE_MATH_FUNCTIONS, its default): `acos` ... `trunc`, `pi`, `pow`, `log`.
//!
//! Owns: their argument counts and results. May call: `value`. Invariants, as SQLite's
//! `func.c`: an argument that is NULL, or text or a blob that is not a number, gives NULL;
//! a result that is not a number (a domain error) is NULL; `ceil`, `floor` and `trunc`
//! give an integer back unchanged; `log(X)` is base 10, and a logarithm of zero or less
//! is NULL.

use crate::error::Result;
use crate::value::{Affinity, Value};

/// The compile-time options this library reports having (`sqlite_compileoption_used`,
/// `sqlite3_compileoption_get`), as SQLite names them without their `SQLITE_` prefix (C
/// strings: the C library hands them out as they are).
pub const COMPILE_OPTIONS: &[&std::ffi::CStr] = &[c"ENABLE_MATH_FUNCTIONS"];

/// Whether option `name` (with or without `SQLITE_`) is one of [`COMPILE_OPTIONS`].
pub fn compile_option_used(name: &str) -> bool {
    let bare = match name.get(..7) {
        Some(p) if p.eq_ignore_ascii_case("SQLITE_") => &name[7..],
        _ => name,
    };
    COMPILE_OPTIONS
        .iter()
        .any(|o| o.to_bytes().eq_ignore_ascii_case(bare.as_bytes()))
}

/// The fewest and most arguments of math function `name`; `None` if it is not one.
pub fn arity(name: &str) -> Option<(usize, usize)> {
    Some(match name {
        "pi" => (0, 0),
        "acos" | "acosh" | "asin" | "asinh" | "atan" | "atanh" | "ceil" | "ceiling" | "cos"
        | "cosh" | "degrees" | "exp" | "floor" | "ln" | "log10" | "log2" | "radians" | "sin"
        | "sinh" | "sqrt" | "tan" | "tanh" | "trunc" => (1, 1),
        "atan2" | "mod" | "pow" | "power" => (2, 2),
        "log" => (1, 2),
        _ => return None,
    })
}

/// A number from an argument, as SQLite's `sqlite3_value_numeric_type` reads it: `None`
/// for NULL and for text or blobs that are not numbers.
fn number(v: &Value) -> Option<Value> {
    match Affinity::Numeric.apply(v.clone()) {
        n @ (Value::Integer(_) | Value::Real(_)) => Some(n),
        _ => None,
    }
}

fn real(x: f64) -> Value {
    match x.is_nan() {
        true => Value::Null,
        false => Value::Real(x),
    }
}

/// Calls math function `name` (its argument count checked by the caller, see [`arity`]).
pub fn call(name: &str, args: &[Value]) -> Result<Value> {
    if name == "pi" {
        return Ok(Value::Real(std::f64::consts::PI));
    }
    let Some(nums) = args.iter().map(number).collect::<Option<Vec<Value>>>() else {
        return Ok(Value::Null);
    };
    let x = nums[0].as_f64();
    Ok(match name {
        "ceil" | "ceiling" | "floor" | "trunc" => match nums[0] {
            Value::Integer(i) => Value::Integer(i),
            _ => real(match name {
                "floor" => x.floor(),
                "trunc" => x.trunc(),
                _ => x.ceil(),
            }),
        },
        "ln" | "log10" | "log2" | "log" if nums.len() == 1 => match x > 0.0 {
            false => Value::Null,
            true => real(match name {
                "ln" => x.ln(),
                "log2" => x.ln() / std::f64::consts::LN_2,
                _ => x.ln() / std::f64::consts::LN_10,
            }),
        },
        "log" => {
            // log(B, X): X in base B.
            let (b, x) = (x, nums[1].as_f64());
            match b > 0.0 && b != 1.0 && x > 0.0 {
                false => Value::Null,
                true => real(x.ln() / b.ln()),
            }
        }
        "atan2" => real(x.atan2(nums[1].as_f64())),
        "mod" => real(x % nums[1].as_f64()),
        "pow" | "power" => real(x.powf(nums[1].as_f64())),
        "acos" => real(x.acos()),
        "acosh" => real(x.acosh()),
        "asin" => real(x.asin()),
        "asinh" => real(x.asinh()),
        "atan" => real(x.atan()),
        "atanh" => real(x.atanh()),
        "cos" => real(x.cos()),
        "cosh" => real(x.cosh()),
        "degrees" => real(x.to_degrees()),
        "radians" => real(x.to_radians()),
        "exp" => real(x.exp()),
        "sin" => real(x.sin()),
        "sinh" => real(x.sinh()),
        "sqrt" => real(x.sqrt()),
        "tan" => real(x.tan()),
        "tanh" => real(x.tanh()),
        _ => unreachable!("not a math function: {name}"),
    })
}
