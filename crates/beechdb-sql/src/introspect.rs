//! The schema as SQLite's introspection pragmas show it: `table_info`, `table_xinfo`,
//! `index_list`, `index_info`, `index_xinfo` and `foreign_key_list` (what ORMs and schema
//! tools read a database's tables by).
//!
//! Owns: those pragmas' rows. May call: `schema`, `alter` (defaults as typed). Invariant:
//! a name that names nothing gives no rows, never an error, as in SQLite (programs probe
//! for a table this way before creating it).

use crate::ast::RefAction;
use crate::exec::QueryResult;
use crate::schema::{lc, Schema, Table, EXPR_PART};
use crate::value::{Collation, Value};

/// One column as `table_info` lists it: name, declared type, NOT NULL, default as typed,
/// place in the primary key (0 if none).
pub(crate) struct ColumnInfo {
    pub name: String,
    pub decl_type: String,
    pub not_null: bool,
    pub default: Option<String>,
    pub pk: i64,
    /// `table_xinfo`'s `hidden`: 0, or 2 for a VIRTUAL generated column, 3 for a STORED one
    /// (which `table_info` leaves out).
    pub hidden: i64,
}

/// The columns of table `t`.
pub(crate) fn table_columns(schema: &Schema, t: &Table) -> Vec<ColumnInfo> {
    let defaults = crate::alter::declared_defaults(&t.sql).unwrap_or_default();
    let primary = schema.indexes_of(&t.name).find(|i| i.primary);
    t.columns
        .iter()
        .enumerate()
        .map(|(i, c)| ColumnInfo {
            name: c.name.clone(),
            decl_type: c.decl_type.clone().unwrap_or_default(),
            not_null: c.not_null,
            default: defaults.get(i).cloned().flatten(),
            pk: match (t.rowid_alias, primary) {
                (Some(a), _) => (a == i) as i64,
                (None, Some(p)) => p
                    .columns
                    .iter()
                    .position(|&(c, _, _)| c == i)
                    .map_or(0, |k| k as i64 + 1),
                (None, None) => 0,
            },
            hidden: match &c.generated {
                None => 0,
                Some((_, false)) => 2,
                Some((_, true)) => 3,
            },
        })
        .collect()
}

/// `table_info` (or, `extended`, `table_xinfo`, with its `hidden` column) of `columns`.
pub(crate) fn table_info(columns: Vec<ColumnInfo>, extended: bool) -> QueryResult {
    let mut names = vec!["cid", "name", "type", "notnull", "dflt_value", "pk"];
    if extended {
        names.push("hidden");
    }
    let mut r = QueryResult::named(&names);
    let shown = columns.into_iter().filter(|c| extended || c.hidden == 0);
    for (i, c) in shown.enumerate() {
        let hidden = c.hidden;
        let mut row: Vec<Value> = vec![
            (i as i64).into(),
            c.name.into(),
            c.decl_type.into(),
            (c.not_null as i64).into(),
            c.default.map_or(Value::Null, Value::from),
            c.pk.into(),
        ];
        if extended {
            row.push(hidden.into());
        }
        r.rows.push(row);
    }
    r
}

/// `index_list` of table `name`: its indexes, the latest made first, as SQLite lists them.
pub(crate) fn index_list(schema: &Schema, name: &str) -> QueryResult {
    let mut r = QueryResult::named(&["seq", "name", "unique", "origin", "partial"]);
    let Ok(table) = schema.table(name) else {
        return r;
    };
    let mut indexes: Vec<_> = schema.indexes_of(&table.name).collect();
    let made = |n: &str| schema.created.get(&lc(n)).copied().unwrap_or(0);
    indexes.sort_by_key(|i| std::cmp::Reverse(made(&i.name)));
    for (i, idx) in indexes.into_iter().enumerate() {
        let origin = match (idx.auto, idx.primary) {
            (_, true) => "pk",
            (true, false) => "u",
            (false, _) => "c",
        };
        r.rows.push(vec![
            (i as i64).into(),
            idx.name.as_str().into(),
            (idx.unique as i64).into(),
            origin.into(),
            (idx.where_.is_some() as i64).into(),
        ]);
    }
    r
}

fn collation_name(c: Collation) -> &'static str {
    match c {
        Collation::Binary | Collation::User(_) => "BINARY",
        Collation::NoCase => "NOCASE",
        Collation::Rtrim => "RTRIM",
    }
}

/// `index_info` (or, `extended`, `index_xinfo`: order, collation, and the rowid after the
/// key columns) of index `name`.
pub(crate) fn index_info(schema: &Schema, name: &str, extended: bool) -> QueryResult {
    let mut r = QueryResult::named(match extended {
        false => &["seqno", "cid", "name"],
        true => &["seqno", "cid", "name", "desc", "coll", "key"],
    });
    let Some(idx) = schema.indexes.get(&lc(name)) else {
        return r;
    };
    let Ok(table) = schema.table(&idx.table) else {
        return r;
    };
    for (i, &(c, desc, coll)) in idx.columns.iter().enumerate() {
        // An expression: cid -2 and no name, as SQLite shows it.
        let (cid, name) = match table.columns.get(c).filter(|_| c < EXPR_PART) {
            Some(col) => (c as i64, Value::from(col.name.as_str())),
            None => (-2, Value::Null),
        };
        let mut row = vec![(i as i64).into(), cid.into(), name];
        if extended {
            row.extend([(desc as i64).into(), collation_name(coll).into(), 1.into()]);
        }
        r.rows.push(row);
    }
    if extended {
        let n = idx.columns.len() as i64;
        r.rows.push(vec![
            n.into(),
            (-1).into(),
            Value::Null,
            0.into(),
            "BINARY".into(),
            0.into(),
        ]);
    }
    r
}

fn action(a: RefAction) -> &'static str {
    match a {
        RefAction::NoAction => "NO ACTION",
        RefAction::Restrict => "RESTRICT",
        RefAction::Cascade => "CASCADE",
        RefAction::SetNull => "SET NULL",
        RefAction::SetDefault => "SET DEFAULT",
    }
}

/// `foreign_key_list` of table `name`: a row per column of each foreign key, the last
/// declared numbered 0, as SQLite numbers them.
pub(crate) fn foreign_key_list(schema: &Schema, name: &str) -> QueryResult {
    let mut r = QueryResult::named(&[
        "id",
        "seq",
        "table",
        "from",
        "to",
        "on_update",
        "on_delete",
        "match",
    ]);
    let Ok(table) = schema.table(name) else {
        return r;
    };
    for (id, (cols, fk)) in table.foreign_keys.iter().rev().enumerate() {
        for (seq, &c) in cols.iter().enumerate() {
            let to = fk
                .parent_columns
                .get(seq)
                .map_or(Value::Null, |p| p.as_str().into());
            r.rows.push(vec![
                (id as i64).into(),
                (seq as i64).into(),
                fk.parent.as_str().into(),
                table.columns[c].name.as_str().into(),
                to,
                action(fk.on_update).into(),
                action(fk.on_delete).into(),
                "NONE".into(),
            ]);
        }
    }
    r
}
