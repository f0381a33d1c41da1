//! SQL text read by tokens: ALTER TABLE's edits (renaming or dropping a column changes the
//! stored CREATE statements token by token, as SQLite does, so each keeps the text as typed
//! with only the column's names changed, or its definition cut out), the CHECK
//! constraints' text as typed, for their error messages, CREATE text as SQLite stores it,
//! and result columns as typed (an unaliased one is named by its text).
//!
//! Owns: finding, in a CREATE TABLE or CREATE INDEX, the tokens that name a column of a
//! given table, and the edits. May call: `parse` (unquoting), the parser crate's tokenizer.
//! Invariant: text outside the edited tokens is kept byte for byte.

use crate::error::{Error, Result};
use crate::parse::unquote;
use sqlite3_parser::dialect::TokenType as T;
use sqlite3_parser::lexer::sql::Tokenizer;
use sqlite3_parser::lexer::Scanner;
use std::ops::Range;

struct Tok {
    span: Range<usize>,
    kind: T,
}

fn tokens(sql: &str) -> Result<Vec<Tok>> {
    let mut scanner = Scanner::new(Tokenizer::new());
    let mut out = Vec::new();
    loop {
        match scanner.scan(sql.as_bytes()) {
            Ok((start, Some((_, kind)), end)) => out.push(Tok {
                span: start..end,
                kind,
            }),
            Ok((_, None, _)) => return Ok(out),
            Err(e) => return Err(Error::Sql(format!("malformed schema text: {e}"))),
        }
    }
}

/// A CREATE statement's text as SQLite keeps it in `sqlite_schema`: `CREATE TABLE`,
/// `CREATE [UNIQUE] INDEX`, `CREATE VIEW` or `CREATE TRIGGER` in capitals, then the text
/// as typed from the object's name on (TEMP and IF NOT EXISTS left out, as SQLite leaves
/// them). Text of another shape is kept as it is.
pub(crate) fn stored_create(sql: &str) -> String {
    let Ok(toks) = tokens(sql) else {
        return sql.to_string();
    };
    let mut kinds = toks.iter().map(|t| t.kind);
    if kinds.next() != Some(T::TK_CREATE) {
        return sql.to_string();
    }
    let mut at = 1;
    if toks.get(at).is_some_and(|t| t.kind == T::TK_TEMP) {
        at += 1;
    }
    let unique = toks.get(at).is_some_and(|t| t.kind == T::TK_UNIQUE);
    at += unique as usize;
    let kind = match toks.get(at).map(|t| t.kind) {
        Some(T::TK_TABLE) => "TABLE",
        Some(T::TK_INDEX) if unique => "UNIQUE INDEX",
        Some(T::TK_INDEX) => "INDEX",
        Some(T::TK_VIEW) => "VIEW",
        Some(T::TK_TRIGGER) => "TRIGGER",
        _ => return sql.to_string(),
    };
    at += 1;
    let if_not_exists = [T::TK_IF, T::TK_NOT, T::TK_EXISTS];
    if toks
        .get(at..at + 3)
        .is_some_and(|w| w.iter().map(|t| t.kind).eq(if_not_exists))
    {
        at += 3;
    }
    match toks.get(at) {
        Some(name) => format!("CREATE {kind} {}", &sql[name.span.start..]),
        None => sql.to_string(),
    }
}

/// The result columns of every SELECT and RETURNING list in `sql`, each as typed (from its
/// first token to its last, the spacing between them kept), in the order they appear:
/// SQLite names an unaliased result column by that text. Empty if `sql` does not scan.
pub(crate) fn typed_columns(sql: &str) -> Vec<String> {
    let Ok(toks) = tokens(sql) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        if !matches!(t.kind, T::TK_SELECT | T::TK_RETURNING) {
            continue;
        }
        let mut at = i + 1;
        if toks
            .get(at)
            .is_some_and(|t| matches!(t.kind, T::TK_DISTINCT | T::TK_ALL))
        {
            at += 1;
        }
        let (mut depth, mut first) = (0usize, None::<usize>);
        let mut last = 0;
        for t in &toks[at..] {
            let ends = depth == 0
                && matches!(
                    t.kind,
                    T::TK_FROM
                        | T::TK_WHERE
                        | T::TK_GROUP
                        | T::TK_HAVING
                        | T::TK_WINDOW
                        | T::TK_ORDER
                        | T::TK_LIMIT
                        | T::TK_UNION
                        | T::TK_EXCEPT
                        | T::TK_INTERSECT
                        | T::TK_SEMI
                        | T::TK_RP
                        | T::TK_COMMA
                );
            if ends {
                if let Some(f) = first.take() {
                    out.push(sql[f..last].to_string());
                }
                if t.kind != T::TK_COMMA {
                    break;
                }
                continue;
            }
            match t.kind {
                T::TK_LP => depth += 1,
                T::TK_RP => depth -= 1,
                _ => {}
            }
            first.get_or_insert(t.span.start);
            last = t.span.end;
        }
        if let Some(f) = first {
            out.push(sql[f..last].to_string());
        }
    }
    out
}

/// The name a token spells, if it can name something: an identifier (quoted or not), or a
/// keyword that SQLite lets stand as one.
fn word(sql: &str, t: &Tok) -> Option<String> {
    let text = &sql[t.span.clone()];
    match t.kind {
        T::TK_ID | T::TK_STRING => Some(unquote(text)),
        _ if text.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') =>
        {
            Some(text.to_string())
        }
        _ => None,
    }
}

fn names(sql: &str, t: &Tok, name: &str) -> bool {
    word(sql, t).is_some_and(|w| w.eq_ignore_ascii_case(name))
}

/// `name` as it may be written in SQL: bare if it is a plain identifier, else quoted.
pub fn quoted(name: &str) -> String {
    let plain = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && tokens(name).is_ok_and(|t| t.len() == 1 && t[0].kind == T::TK_ID);
    match plain {
        true => name.to_string(),
        false => format!("\"{}\"", name.replace('"', "\"\"")),
    }
}

/// Whether the parenthesized group opening at `toks[open]` holds names of `target`'s
/// columns, in a CREATE TABLE of `this` table: a key list, a CHECK, a generated column's
/// expression (`AS (...)`), or the column list of a REFERENCES to `target`.
fn group_names_columns(sql: &str, toks: &[Tok], open: usize, this: &str, target: &str) -> bool {
    let before = |back: usize| open.checked_sub(back).map(|i| &toks[i]);
    match before(1).map(|t| t.kind) {
        Some(T::TK_KEY | T::TK_UNIQUE | T::TK_CHECK | T::TK_AS) => {
            this.eq_ignore_ascii_case(target)
        }
        _ => {
            before(2).is_some_and(|r| r.kind == T::TK_REFERENCES)
                && before(1).is_some_and(|t| names(sql, t, target))
        }
    }
}

/// Whether `toks[i]`, inside a group of column names or expressions over `this` table's
/// columns, names its column `column`: not a function's name, a qualifier, a collation,
/// or a sort order, and when qualified, qualified by `this`.
fn is_column_ref(sql: &str, toks: &[Tok], i: usize, this: &str, column: &str) -> bool {
    let t = &toks[i];
    if t.kind == T::TK_STRING || matches!(t.kind, T::TK_ASC | T::TK_DESC) || !names(sql, t, column)
    {
        return false;
    }
    let next = toks.get(i + 1).map(|t| t.kind);
    if matches!(next, Some(T::TK_LP | T::TK_DOT)) {
        return false;
    }
    match i.checked_sub(1).map(|p| &toks[p]) {
        Some(p) if p.kind == T::TK_COLLATE => false,
        Some(p) if p.kind == T::TK_DOT => i >= 2 && names(sql, &toks[i - 2], this),
        _ => true,
    }
}

/// The spans of a CREATE TABLE of table `this` that name column `column` of table
/// `target`: its definition (when `this` is `target`), its names in key lists and CHECKs,
/// and in the column lists of REFERENCES to `target`.
fn table_refs(sql: &str, this: &str, target: &str, column: &str) -> Result<Vec<Range<usize>>> {
    let toks = tokens(sql)?;
    let mut out = Vec::new();
    let Some(body) = toks.iter().position(|t| t.kind == T::TK_LP) else {
        return Ok(out);
    };
    let own = this.eq_ignore_ascii_case(target);
    // Per open parenthesis: whether the group names columns.
    let mut groups: Vec<bool> = Vec::new();
    let mut element_start = true;
    for i in body..toks.len() {
        let t = &toks[i];
        match t.kind {
            T::TK_LP => {
                let inherited = groups.len() > 1 && groups[groups.len() - 1];
                let names_columns = groups.len() == 1
                    && group_names_columns(sql, &toks, i, this, target)
                    || inherited;
                groups.push(names_columns);
                element_start = groups.len() == 1;
                continue;
            }
            T::TK_RP => {
                groups.pop();
            }
            T::TK_COMMA if groups.len() == 1 => {
                element_start = true;
                continue;
            }
            // A column's definition (the body's own group never names columns).
            _ if groups.len() == 1
                && element_start
                && own
                && !is_table_constraint(t)
                && names(sql, t, column) =>
            {
                out.push(t.span.clone());
            }
            _ if groups.last() == Some(&true) && is_column_ref(sql, &toks, i, this, column) => {
                out.push(t.span.clone());
            }
            _ => {}
        }
        element_start = false;
    }
    Ok(out)
}

/// How a CREATE TABLE's CHECK constraints are named in their error messages, in the order
/// they appear: the constraint's name, or else its expression as typed (SQLite's words).
pub fn check_labels(sql: &str) -> Result<Vec<String>> {
    let toks = tokens(sql)?;
    let mut out = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        if t.kind != T::TK_CHECK || toks.get(i + 1).is_none_or(|n| n.kind != T::TK_LP) {
            continue;
        }
        if i >= 2 && toks[i - 2].kind == T::TK_CONSTRAINT {
            out.push(word(sql, &toks[i - 1]).unwrap_or_default());
            continue;
        }
        let mut depth = 0;
        let close = toks[i + 1..].iter().position(|t| {
            match t.kind {
                T::TK_LP => depth += 1,
                T::TK_RP => depth -= 1,
                _ => {}
            }
            depth == 0
        });
        let end = close.map_or(sql.len(), |c| toks[i + 1 + c].span.start);
        out.push(sql[toks[i + 1].span.end..end].trim().to_string());
    }
    Ok(out)
}

/// The spans of a CREATE INDEX on table `this` that name its column `column`.
fn index_refs(sql: &str, this: &str, column: &str) -> Result<Vec<Range<usize>>> {
    let toks = tokens(sql)?;
    let Some(on) = toks.iter().position(|t| t.kind == T::TK_ON) else {
        return Ok(Vec::new());
    };
    Ok((on + 2..toks.len())
        .filter(|&i| is_column_ref(sql, &toks, i, this, column))
        .map(|i| toks[i].span.clone())
        .collect())
}

fn replace_spans(sql: &str, spans: &[Range<usize>], with: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut at = 0;
    for s in spans {
        out.push_str(&sql[at..s.start]);
        out.push_str(with);
        at = s.end;
    }
    out.push_str(&sql[at..]);
    out
}

/// A CREATE TABLE of table `this` with column `old` of table `target` renamed `new`;
/// `None` when it does not name that column.
pub fn rename_in_table(
    sql: &str,
    this: &str,
    target: &str,
    old: &str,
    new: &str,
) -> Result<Option<String>> {
    let spans = table_refs(sql, this, target, old)?;
    Ok((!spans.is_empty()).then(|| replace_spans(sql, &spans, &quoted(new))))
}

/// A CREATE INDEX on table `this` with its column `old` renamed `new`; `None` when it
/// does not name it.
pub fn rename_in_index(sql: &str, this: &str, old: &str, new: &str) -> Result<Option<String>> {
    let spans = index_refs(sql, this, old)?;
    Ok((!spans.is_empty()).then(|| replace_spans(sql, &spans, &quoted(new))))
}

/// Whether a CREATE INDEX on table `this` names its column `column`.
pub fn index_names(sql: &str, this: &str, column: &str) -> Result<bool> {
    Ok(!index_refs(sql, this, column)?.is_empty())
}

/// Whether a CREATE TABLE of `this` names column `column` of table `target` anywhere but
/// in that column's own definition (a CHECK, a key or a REFERENCES list).
pub fn table_names_elsewhere(
    sql: &str,
    this: &str,
    target: &str,
    column: &str,
    definition: Option<&Range<usize>>,
) -> Result<bool> {
    Ok(table_refs(sql, this, target, column)?
        .iter()
        .any(|s| definition.is_none_or(|d| s.start < d.start || s.end > d.end)))
}

/// Whether a view's or trigger's text could name `name` (a table or a column): a word
/// spelling it. (Knowing what each name refers to would take name resolution; ALTER TABLE
/// refuses rather than guess.)
pub fn may_name(sql: &str, name: &str) -> Result<bool> {
    let toks = tokens(sql)?;
    Ok(toks
        .iter()
        .any(|t| t.kind != T::TK_STRING && names(sql, t, name)))
}

/// A CREATE TABLE or CREATE INDEX with table `old` renamed `new` where it names it: the
/// table's own name, a REFERENCES target, an index's table, and a qualifier of a column
/// (`old.x`); `None` when it names none. The new name is quoted, as SQLite writes it.
pub fn rename_table(sql: &str, old: &str, new: &str) -> Result<Option<String>> {
    let toks = tokens(sql)?;
    let names_table = |i: usize| {
        // After the keyword (skipping a schema name: `main.t`).
        let before = match i.checked_sub(2).map(|d| toks[d + 1].kind) {
            Some(T::TK_DOT) if i >= 3 => i - 3,
            _ => i.wrapping_sub(1),
        };
        let keyword = toks.get(before).map(|t| t.kind);
        matches!(
            keyword,
            Some(T::TK_TABLE | T::TK_EXISTS | T::TK_REFERENCES | T::TK_ON)
        ) || toks.get(i + 1).is_some_and(|n| n.kind == T::TK_DOT)
    };
    let spans: Vec<_> = (0..toks.len())
        .filter(|&i| toks[i].kind != T::TK_STRING && names(sql, &toks[i], old) && names_table(i))
        .map(|i| toks[i].span.clone())
        .collect();
    let quoted = format!("\"{}\"", new.replace('"', "\"\""));
    Ok((!spans.is_empty()).then(|| replace_spans(sql, &spans, &quoted)))
}

/// The elements of a CREATE TABLE's parenthesized body (column definitions and table
/// constraints), each as its first and last token and the comma after it.
fn elements(toks: &[Tok]) -> Vec<(usize, usize, Option<usize>)> {
    let mut elements = Vec::new();
    let Some(body) = toks.iter().position(|t| t.kind == T::TK_LP) else {
        return elements;
    };
    let mut depth = 0;
    let mut start = None;
    for (i, t) in toks.iter().enumerate().skip(body) {
        match t.kind {
            T::TK_LP => {
                depth += 1;
                if depth == 1 {
                    continue;
                }
            }
            T::TK_RP => {
                depth -= 1;
                if depth == 0 {
                    if let Some(s) = start.take() {
                        elements.push((s, i - 1, None));
                    }
                    break;
                }
            }
            T::TK_COMMA if depth == 1 => {
                if let Some(s) = start.take() {
                    elements.push((s, i - 1, Some(i)));
                }
                continue;
            }
            _ => {}
        }
        start.get_or_insert(i);
    }
    elements
}

fn is_table_constraint(t: &Tok) -> bool {
    matches!(
        t.kind,
        T::TK_CONSTRAINT | T::TK_PRIMARY | T::TK_UNIQUE | T::TK_CHECK | T::TK_FOREIGN
    )
}

/// Each column's declared type in a CREATE TABLE, as SQLite keeps it: the text as typed,
/// from the type's first token to its last, with the standard names (INT, INTEGER, REAL,
/// TEXT, BLOB, ANY) in capitals.
pub fn declared_types(sql: &str) -> Result<Vec<Option<String>>> {
    let toks = tokens(sql)?;
    let ends_type = |t: &Tok| {
        matches!(
            t.kind,
            T::TK_CONSTRAINT
                | T::TK_PRIMARY
                | T::TK_NOT
                | T::TK_NULL
                | T::TK_UNIQUE
                | T::TK_CHECK
                | T::TK_DEFAULT
                | T::TK_COLLATE
                | T::TK_REFERENCES
                | T::TK_GENERATED
                | T::TK_AS
        )
    };
    Ok(elements(&toks)
        .into_iter()
        .take_while(|&(first, _, _)| !is_table_constraint(&toks[first]))
        .map(|(first, last, _)| {
            let mut end = first;
            let mut depth = 0;
            for (i, t) in toks.iter().enumerate().take(last + 1).skip(first + 1) {
                match t.kind {
                    T::TK_LP => depth += 1,
                    T::TK_RP => depth -= 1,
                    _ if depth == 0 && ends_type(t) => break,
                    _ => {}
                }
                end = i;
            }
            (end > first).then(|| {
                let text = &sql[toks[first + 1].span.start..toks[end].span.end];
                match ["INT", "INTEGER", "REAL", "TEXT", "BLOB", "ANY"]
                    .iter()
                    .find(|s| s.eq_ignore_ascii_case(text))
                {
                    Some(std) => std.to_string(),
                    None => text.to_string(),
                }
            })
        })
        .collect())
}

/// Each column's DEFAULT as typed in a CREATE TABLE, as `PRAGMA table_info` shows it: the
/// value's token (a sign with it), or the text inside the parentheses of `DEFAULT (expr)`.
pub fn declared_defaults(sql: &str) -> Result<Vec<Option<String>>> {
    let toks = tokens(sql)?;
    Ok(elements(&toks)
        .into_iter()
        .take_while(|&(first, _, _)| !is_table_constraint(&toks[first]))
        .map(|(first, last, _)| {
            let mut depth = 0;
            let at = (first + 1..=last).find(|&i| {
                match toks[i].kind {
                    T::TK_LP => depth += 1,
                    T::TK_RP => depth -= 1,
                    T::TK_DEFAULT if depth == 0 => return true,
                    _ => {}
                }
                false
            })?;
            let value = toks.get(at + 1).filter(|_| at < last)?;
            let span = match value.kind {
                T::TK_LP => {
                    let mut depth = 0;
                    let close = (at + 1..=last).find(|&i| {
                        match toks[i].kind {
                            T::TK_LP => depth += 1,
                            T::TK_RP => depth -= 1,
                            _ => {}
                        }
                        depth == 0
                    })?;
                    if close < at + 3 {
                        return None;
                    }
                    toks[at + 2].span.start..toks[close - 1].span.end
                }
                T::TK_MINUS | T::TK_PLUS if at + 2 <= last => {
                    value.span.start..toks[at + 2].span.end
                }
                _ => value.span.clone(),
            };
            Some(sql[span].to_string())
        })
        .collect())
}

/// Where a new column's definition goes in a CREATE TABLE: after the last column's (the
/// table constraints follow the columns).
pub fn columns_end(sql: &str) -> Result<usize> {
    let toks = tokens(sql)?;
    elements(&toks)
        .iter()
        .take_while(|&&(first, _, _)| !is_table_constraint(&toks[first]))
        .last()
        .map(|&(_, last, _)| toks[last].span.end)
        .ok_or_else(|| Error::Sql("malformed table definition".into()))
}

/// Column `column`'s definition in a CREATE TABLE: its span, from its name to its last
/// token, and the span to cut to remove it (with one of the commas around it).
pub fn column_definition(sql: &str, column: &str) -> Result<Option<(Range<usize>, Range<usize>)>> {
    let toks = tokens(sql)?;
    let elements = elements(&toks);
    let Some(e) = elements
        .iter()
        .position(|&(s, _, _)| !is_table_constraint(&toks[s]) && names(sql, &toks[s], column))
    else {
        return Ok(None);
    };
    let (first, last, comma) = elements[e];
    let definition = toks[first].span.start..toks[last].span.end;
    let cut = match (e, comma) {
        // Not the first: from the comma before it.
        (1.., _) => toks[elements[e - 1].2.expect("a comma")].span.start..definition.end,
        // The first, with more after it: up to the next element.
        (0, Some(_)) => definition.start..toks[elements[1].0].span.start,
        (0, None) => definition.clone(),
    };
    Ok(Some((definition, cut)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_a_column_where_the_table_names_it_and_nowhere_else() {
        let sql = "CREATE TABLE t(a integer primary key, b text unique, \"c\" a, d check(d>0 and c<>abs(c)), \
                   e references t(c), CHECK (t.c<>e), foreign key(c) references t(b), \
                   UNIQUE(c COLLATE c DESC))";
        let renamed = rename_in_table(sql, "t", "t", "c", "new name")
            .unwrap()
            .unwrap();
        assert_eq!(
            renamed,
            "CREATE TABLE t(a integer primary key, b text unique, \"new name\" a, \
             d check(d>0 and \"new name\"<>abs(\"new name\")), e references t(\"new name\"), \
             CHECK (t.\"new name\"<>e), foreign key(\"new name\") references t(b), \
             UNIQUE(\"new name\" COLLATE c DESC))"
        );
        assert_eq!(rename_in_table(sql, "t", "t", "zz", "y").unwrap(), None);
        // The type name `a` is not column a.
        let renamed = rename_in_table(sql, "t", "t", "a", "x").unwrap().unwrap();
        assert!(renamed.starts_with("CREATE TABLE t(x integer") && renamed.contains("\"c\" a,"));
    }

    #[test]
    fn renames_references_from_other_tables_only_to_the_renamed_table() {
        let sql = "CREATE TABLE c(x references p(k), y references q(k), foreign key(y) references \"p\"(k, v))";
        assert_eq!(
            rename_in_table(sql, "c", "p", "k", "kk").unwrap().unwrap(),
            "CREATE TABLE c(x references p(kk), y references q(k), foreign key(y) references \"p\"(kk, v))"
        );
        assert_eq!(rename_in_table(sql, "c", "p", "x", "z").unwrap(), None);
    }

    #[test]
    fn renames_index_columns() {
        let sql = "CREATE INDEX i ON t(c, b COLLATE c, c DESC)";
        assert_eq!(
            rename_in_index(sql, "t", "c", "k").unwrap().unwrap(),
            "CREATE INDEX i ON t(k, b COLLATE c, k DESC)"
        );
        assert!(!index_names(sql, "t", "t").unwrap());
    }

    #[test]
    fn finds_a_definition_and_what_to_cut() {
        let sql = "CREATE TABLE t(a, b varchar(10) check(b > 1), c)";
        let (def, cut) = column_definition(sql, "b").unwrap().unwrap();
        assert_eq!(&sql[def.clone()], "b varchar(10) check(b > 1)");
        assert_eq!(
            format!("{}{}", &sql[..cut.start], &sql[cut.end..]),
            "CREATE TABLE t(a, c)"
        );
        let (_, cut) = column_definition(sql, "a").unwrap().unwrap();
        assert_eq!(
            format!("{}{}", &sql[..cut.start], &sql[cut.end..]),
            "CREATE TABLE t(b varchar(10) check(b > 1), c)"
        );
        assert!(!table_names_elsewhere(sql, "t", "t", "b", Some(&def)).unwrap());
        assert!(
            table_names_elsewhere("CREATE TABLE t(a, b, check(b>a))", "t", "t", "b", None).unwrap()
        );
    }

    #[test]
    fn labels_checks_by_name_or_text() {
        let sql = "CREATE TABLE t(a check( a >0 ), b constraint pos check(b>0), c, \
                   check (abs(c)  <> 5), constraint \"x y\" check(c<>6))";
        assert_eq!(
            check_labels(sql).unwrap(),
            ["a >0", "pos", "abs(c)  <> 5", "x y"]
        );
    }

    #[test]
    fn keeps_declared_types_as_typed() {
        let sql = "CREATE TABLE t(a integer primary key, b, c unsigned  big int not null, \
                   d decimal(10, 5) DEFAULT 1, e Text, PRIMARY KEY(a))";
        assert_eq!(
            declared_types(sql).unwrap(),
            [
                Some("INTEGER".into()),
                None,
                Some("unsigned  big int".into()),
                Some("decimal(10, 5)".into()),
                Some("TEXT".into())
            ]
        );
    }

    #[test]
    fn renames_a_table_where_it_is_named_as_one() {
        let sql = "CREATE TABLE IF NOT EXISTS main.t ( a primary key, t, check(t.a > t), \
                   foreign key(t) references \"t\"(a))";
        assert_eq!(
            rename_table(sql, "t", "t 2").unwrap().unwrap(),
            "CREATE TABLE IF NOT EXISTS main.\"t 2\" ( a primary key, t, check(\"t 2\".a > t), \
             foreign key(t) references \"t 2\"(a))"
        );
        assert_eq!(
            rename_table("CREATE INDEX t ON t(t)", "t", "u")
                .unwrap()
                .unwrap(),
            "CREATE INDEX t ON \"u\"(t)"
        );
        assert_eq!(
            rename_table("CREATE TABLE c(x references p)", "t", "u").unwrap(),
            None
        );
    }

    #[test]
    fn quotes_only_what_needs_it() {
        assert_eq!(quoted("abc_1"), "abc_1");
        assert_eq!(quoted("select"), "\"select\"");
        assert_eq!(quoted("a\"b"), "\"a\"\"b\"");
    }
}
