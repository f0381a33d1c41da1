//! JSON functions (json1.html): `json`, `json_valid`, `json_array`, `json_object`,
//! `json_extract`, `json_type`, `json_array_length`, and the `->` / `->>` operators, over
//! JSON held as text.
//!
//! Owns: path evaluation and the conversions between JSON and SQL values. May call:
//! `value`. Arguments that are themselves JSON (the result of a JSON function) are embedded
//! as JSON, not as strings: the caller says which (SQLite's subtype).

use crate::error::{Error, Result};
use crate::value::Value;
use serde_json::Value as J;

fn parse(v: &Value) -> Result<J> {
    serde_json::from_str(&v.to_text()).map_err(|_| Error::Sql("malformed JSON".into()))
}

/// An SQL value as JSON: numbers as numbers, NULL as null, text as a string unless
/// `is_json` (then parsed), blobs refused.
pub fn to_json(v: &Value, is_json: bool) -> Result<J> {
    Ok(match v {
        Value::Null => J::Null,
        Value::Integer(i) => J::from(*i),
        Value::Real(r) => serde_json::Number::from_f64(*r).map_or(J::Null, J::Number),
        Value::Text(t) if is_json => parse(&Value::Text(t.clone()))?,
        Value::Text(t) => J::String(t.to_string()),
        Value::Blob(_) => return Err(Error::Sql("JSON cannot hold BLOB values".into())),
    })
}

/// A JSON value as SQL: strings as TEXT, numbers as INTEGER or REAL, true and false as 1
/// and 0, null as NULL, arrays and objects as their JSON text.
fn to_sql(j: &J) -> Value {
    match j {
        J::Null => Value::Null,
        J::Bool(b) => Value::Integer(*b as i64),
        J::Number(n) => match n.as_i64() {
            Some(i) => Value::Integer(i),
            None => Value::Real(n.as_f64().unwrap_or(0.0)),
        },
        J::String(s) => Value::from(s.as_str()),
        other => Value::from(other.to_string()),
    }
}

/// The element of `root` at path `path` (`$`, `.key`, `."key"`, `[n]`, `[#-n]`).
fn at<'a>(root: &'a J, path: &str) -> Result<Option<&'a J>> {
    let bad = || Error::Sql(format!("bad JSON path: {path:?}"));
    let mut rest = path.strip_prefix('$').ok_or_else(bad)?;
    let mut cur = root;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let (key, after) = if let Some(q) = r.strip_prefix('"') {
                let end = q.find('"').ok_or_else(bad)?;
                (&q[..end], &q[end + 1..])
            } else {
                let end = r.find(['.', '[']).unwrap_or(r.len());
                (&r[..end], &r[end..])
            };
            match cur.get(key) {
                Some(v) => cur = v,
                None => return Ok(None),
            }
            rest = after;
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']').ok_or_else(bad)?;
            let idx = r[..end].trim();
            let arr = match cur.as_array() {
                Some(a) => a,
                None => return Ok(None),
            };
            let i = match idx.strip_prefix("#-") {
                Some(back) => {
                    let b: usize = back.parse().map_err(|_| bad())?;
                    match arr.len().checked_sub(b) {
                        Some(i) => i,
                        None => return Ok(None),
                    }
                }
                None => idx.parse().map_err(|_| bad())?,
            };
            match arr.get(i) {
                Some(v) => cur = v,
                None => return Ok(None),
            }
            rest = &r[end + 1..];
        } else {
            return Err(bad());
        }
    }
    Ok(Some(cur))
}

/// Calls JSON function `name`; `is_json[i]` says argument `i` is JSON (a JSON function's
/// result).
pub fn call(name: &str, args: &[Value], is_json: &[bool]) -> Result<Value> {
    let a = |i: usize| args.get(i).cloned().unwrap_or(Value::Null);
    Ok(match name {
        "json" => {
            if a(0).is_null() {
                return Ok(Value::Null);
            }
            Value::from(parse(&a(0))?.to_string())
        }
        "json_valid" => Value::Integer(
            (!a(0).is_null() && serde_json::from_str::<J>(&a(0).to_text()).is_ok()) as i64,
        ),
        "json_array" => {
            let items = args
                .iter()
                .zip(is_json)
                .map(|(v, &j)| to_json(v, j))
                .collect::<Result<Vec<J>>>()?;
            Value::from(J::Array(items).to_string())
        }
        "json_object" => {
            if !args.len().is_multiple_of(2) {
                return Err(Error::Sql(
                    "json_object() requires an even number of arguments".into(),
                ));
            }
            let mut m = serde_json::Map::new();
            for i in (0..args.len()).step_by(2) {
                let Value::Text(k) = &args[i] else {
                    return Err(Error::Sql("json_object() labels must be TEXT".into()));
                };
                m.insert(k.to_string(), to_json(&args[i + 1], is_json[i + 1])?);
            }
            Value::from(J::Object(m).to_string())
        }
        "json_extract" | "->>" | "->" => {
            if a(0).is_null() {
                return Ok(Value::Null);
            }
            let root = parse(&a(0))?;
            let paths: Vec<String> = args[1..]
                .iter()
                .map(|p| match p {
                    // `x -> 'key'` and `x -> 2` are shorthands for `$.key` and `$[2]`.
                    Value::Integer(i) if name != "json_extract" => format!("$[{i}]"),
                    Value::Text(t) if name != "json_extract" && !t.starts_with('$') => {
                        format!("$.{t}")
                    }
                    other => other.to_text(),
                })
                .collect();
            if paths.len() == 1 {
                match at(&root, &paths[0])? {
                    None => Value::Null,
                    Some(j) if name == "->" => Value::from(j.to_string()),
                    Some(j) => to_sql(j),
                }
            } else {
                let found = paths
                    .iter()
                    .map(|p| Ok(at(&root, p)?.cloned().unwrap_or(J::Null)))
                    .collect::<Result<Vec<J>>>()?;
                Value::from(J::Array(found).to_string())
            }
        }
        "json_type" | "json_array_length" => {
            if a(0).is_null() {
                return Ok(Value::Null);
            }
            let root = parse(&a(0))?;
            let path = if args.len() > 1 {
                a(1).to_text()
            } else {
                "$".into()
            };
            let Some(j) = at(&root, &path)? else {
                return Ok(Value::Null);
            };
            if name == "json_array_length" {
                return Ok(Value::Integer(j.as_array().map_or(0, Vec::len) as i64));
            }
            Value::from(match j {
                J::Null => "null",
                J::Bool(true) => "true",
                J::Bool(false) => "false",
                J::Number(n) if n.is_i64() || n.is_u64() => "integer",
                J::Number(_) => "real",
                J::String(_) => "text",
                J::Array(_) => "array",
                J::Object(_) => "object",
            })
        }
        _ => return Err(Error::Sql(format!("no such function: {name}"))),
    })
}

/// Whether `name` is a JSON function whose result is JSON (embedded as such by others).
pub fn returns_json(name: &str) -> bool {
    matches!(name, "json" | "json_array" | "json_object" | "->")
}

pub fn is_json_function(name: &str) -> bool {
    matches!(
        name,
        "json"
            | "json_valid"
            | "json_array"
            | "json_object"
            | "json_extract"
            | "json_type"
            | "json_array_length"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Value {
        Value::from(s)
    }

    #[test]
    fn extract_build_and_type() {
        let doc = t(r#"{"a":{"b":[1,2.5,"x",null,true]},"c":"d"}"#);
        let ex = |p: &str| call("json_extract", &[doc.clone(), t(p)], &[false, false]).unwrap();
        assert_eq!(ex("$.a.b[0]"), Value::Integer(1));
        assert_eq!(ex("$.a.b[1]"), Value::Real(2.5));
        assert_eq!(ex("$.a.b[#-1]"), Value::Integer(1));
        assert_eq!(ex("$.a.b[2]"), t("x"));
        assert!(ex("$.a.b[3]").is_null());
        assert!(ex("$.nope").is_null());
        assert_eq!(ex("$.a"), t(r#"{"b":[1,2.5,"x",null,true]}"#));
        assert_eq!(
            call("->", &[doc.clone(), t("c")], &[false, false]).unwrap(),
            t(r#""d""#)
        );
        assert_eq!(
            call("->>", &[doc.clone(), t("c")], &[false, false]).unwrap(),
            t("d")
        );
        let arr = call(
            "json_array",
            &[Value::Integer(1), t("x"), t("[2]")],
            &[false, false, true],
        )
        .unwrap();
        assert_eq!(arr, t(r#"[1,"x",[2]]"#));
        let obj = call("json_object", &[t("k"), Value::Null], &[false, false]).unwrap();
        assert_eq!(obj, t(r#"{"k":null}"#));
        assert_eq!(
            call("json_type", &[doc.clone(), t("$.a.b")], &[false, false]).unwrap(),
            t("array")
        );
        assert_eq!(
            call(
                "json_array_length",
                &[doc.clone(), t("$.a.b")],
                &[false, false]
            )
            .unwrap(),
            Value::Integer(5)
        );
        assert!(call("json", &[t("{bad")], &[false]).is_err());
        assert_eq!(
            call("json_valid", &[t("{bad")], &[false]).unwrap(),
            Value::Integer(0)
        );
    }
}
