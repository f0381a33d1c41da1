//! The schema: tables, indexes, views and triggers, as `sqlite_schema` describes them.
//!
//! Owns: [`Schema`] and its objects, and their storage in the engine database
//! `sqlite_schema` (one entry per object: key the lower-cased name, value a record `type |
//! name | tbl_name | engine database | sql | creation order`), read back by parsing the SQL
//! again, as SQLite does. The creation order (absent from entries written before it was
//! kept: 0) orders `sqlite_schema`'s rows as SQLite's rowids do, so a dump recreates
//! objects after those they name. May call: `ast`, `parse`, `record`, `value`.
//! Invariant: a table's rows live in the engine database named in its entry, keyed by
//! rowid; each index in its own.

use crate::ast::{self, Expr, Stmt};
use crate::error::{Error, Result};
use crate::value::{Affinity, Collation, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

pub const SCHEMA_DB: &str = "sqlite_schema";

#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub decl_type: Option<String>,
    pub affinity: Affinity,
    pub not_null: bool,
    pub default: Option<Expr>,
    pub collation: Collation,
    /// A generated column's expression (of the row's other columns), and whether it is
    /// STORED. BeechDB stores a VIRTUAL one's value too, computed on each write as a STORED
    /// one's is: the values read are the same.
    pub generated: Option<(Expr, bool)>,
}

#[derive(Debug, Clone)]
pub struct Table {
    pub name: String,
    pub columns: Vec<Column>,
    /// The INTEGER PRIMARY KEY column, an alias of the rowid.
    pub rowid_alias: Option<usize>,
    /// AUTOINCREMENT: a rowid is never used twice (see `Exec::sequence_mark`).
    pub autoincrement: bool,
    /// CHECK constraints, each with what its error message calls it.
    pub checks: Vec<(Expr, String)>,
    /// Foreign keys: this table's columns and what they reference.
    pub foreign_keys: Vec<(Vec<usize>, ast::ForeignKeyDef)>,
    /// The generated columns in the order they are computed: each after those it reads.
    pub generated: Vec<usize>,
    pub db: String,
    pub sql: String,
}

/// An index's columns: position in the table (or `EXPR_PART + k` for its expression
/// `k`), descending, collation.
pub type IndexColumns = Vec<(usize, bool, Collation)>;

/// An index part that is an expression, not a column, has position `EXPR_PART + k` for its
/// expression `Index::exprs[k]`: past any column (and unmoved when columns are added).
pub const EXPR_PART: usize = 1 << 30;

#[derive(Debug, Clone)]
pub struct Index {
    pub name: String,
    pub table: String,
    pub columns: IndexColumns,
    /// The expressions its expression parts index (see `EXPR_PART`).
    pub exprs: Vec<Expr>,
    pub unique: bool,
    /// Made for a PRIMARY KEY or UNIQUE constraint (no SQL of its own).
    pub auto: bool,
    /// Made for the PRIMARY KEY (of a table whose key is not the rowid).
    pub primary: bool,
    /// A partial index's condition: only rows where it is true have an entry. Such an
    /// index is kept and enforces its uniqueness, but queries do not read through it.
    pub where_: Option<Expr>,
    pub db: String,
    pub sql: Option<String>,
}

#[derive(Debug, Clone)]
pub struct View {
    pub name: String,
    pub columns: Option<Vec<String>>,
    pub select: ast::Select,
    pub sql: String,
}

#[derive(Debug, Clone)]
pub struct Trigger {
    pub name: String,
    pub def: ast::CreateTrigger,
}

/// Every object, by lower-cased name.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    pub tables: BTreeMap<String, Arc<Table>>,
    pub indexes: BTreeMap<String, Arc<Index>>,
    pub views: BTreeMap<String, Arc<View>>,
    pub triggers: BTreeMap<String, Arc<Trigger>>,
    /// The next engine database number.
    pub next_db: u64,
    /// Each object's place in the order of creation, by lower-cased name.
    pub created: BTreeMap<String, u64>,
    /// `sqlite_schema`'s rows, made at the first query that reads them (programs look
    /// their tables up there again and again); emptied by every change (`dml.rs`,
    /// `schema_mut`).
    pub listing: std::sync::OnceLock<Vec<crate::exec::Row>>,
    /// How deep the most deeply nested object's SQL nests (`parse::Parsed::depth`): a
    /// statement that may run its expressions is given the stack for them (see
    /// `crate::with_stack_for`).
    pub deepest: usize,
}

/// The statement schema text `sql` holds, and how deep it nests.
fn parsed(sql: &str) -> Result<(Stmt, usize)> {
    let p = crate::parse::parse_one(sql)?.ok_or_else(|| corrupt(sql))?;
    Ok((p.stmt, p.depth))
}

/// A `sqlite_schema` record holding a number rather than an object (the database counter,
/// `PRAGMA user_version`, an AUTOINCREMENT mark): kind, name and the value, in the
/// columns an object's record has (the value where an object names its engine database).
pub fn value_entry(kind: &str, name: &str, value: i64) -> Vec<u8> {
    crate::record::encode_row(&[kind.into(), name.into(), "".into(), value.into(), "".into()])
}

/// The number a `value_entry` record holds.
pub fn entry_value(rec: &[u8]) -> Result<i64> {
    Ok(crate::record::decode_row(rec, 5)?
        .get(3)
        .map_or(0, Value::as_i64))
}

pub fn lc(name: &str) -> String {
    name.to_ascii_lowercase()
}

impl Table {
    /// Row `rowid` from its stored record: columns added after it was written take their
    /// default, and the INTEGER PRIMARY KEY (not stored) is the rowid.
    pub fn row_from(&self, rowid: i64, stored: &[u8]) -> Result<Vec<Value>> {
        let mut row = crate::record::decode_row(stored, self.columns.len())?;
        self.complete(&mut row);
        if let Some(a) = self.rowid_alias {
            row[a] = Value::Integer(rowid);
        }
        Ok(row)
    }

    /// Decodes row `rowid` (as `row_from`) into `out`: the columns, then the rowid; with
    /// `wanted`, only the columns it marks (none past its end; the rowid always).
    pub fn read_into(
        &self,
        rowid: i64,
        stored: &[u8],
        out: &mut [Value],
        wanted: Option<&[bool]>,
    ) -> Result<()> {
        self.read_columns(stored, out, wanted)?;
        self.set_rowid(rowid, out);
        Ok(())
    }

    /// As `read_into`, leaving the rowid's slots as they are (set by an earlier read of the
    /// same row).
    #[inline]
    pub fn read_columns(
        &self,
        stored: &[u8],
        out: &mut [Value],
        wanted: Option<&[bool]>,
    ) -> Result<()> {
        let n = self.columns.len();
        // The values after the mask's end are not even walked.
        let end = wanted.map_or(n, |w| w.len().min(n));
        let got = crate::record::decode_into(stored, &mut out[..end], wanted)?;
        for (c, slot) in out[..end].iter_mut().enumerate().skip(got) {
            if wanted.is_none_or(|w| w[c]) {
                *slot = self.added_value(c);
            }
        }
        Ok(())
    }

    /// Puts `rowid` in a row's slots (`out` as in `read_into`): its alias column, if any,
    /// and the rowid after the columns.
    #[inline(always)]
    pub fn set_rowid(&self, rowid: i64, out: &mut [Value]) {
        // In place when the slot holds an integer already (the previous row's rowid): no
        // old value to drop.
        let put = |slot: &mut Value| match slot {
            Value::Integer(r) => *r = rowid,
            _ => *slot = Value::Integer(rowid),
        };
        if let Some(a) = self.rowid_alias {
            put(&mut out[a]);
        }
        put(&mut out[self.columns.len()]);
    }

    /// Completes a stored row: columns added after it was written take their default.
    pub fn complete(&self, row: &mut Vec<Value>) {
        row.truncate(self.columns.len());
        while row.len() < self.columns.len() {
            row.push(self.added_value(row.len()));
        }
    }

    /// What column `c` holds in a row stored before the column was added: its default.
    fn added_value(&self, c: usize) -> Value {
        match &self.columns[c].default {
            Some(Expr::Literal(v)) => self.columns[c].affinity.apply(v.clone()),
            _ => Value::Null,
        }
    }

    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
    }
}

/// The entry named `name` in any case. Keys are lower case: a name already so is looked up
/// once, without making a lower-case copy (every INSERT asks whether its table is a view).
fn named<'a, V>(map: &'a BTreeMap<String, V>, name: &str) -> Option<&'a V> {
    match map.get(name) {
        None if name.bytes().any(|b| b.is_ascii_uppercase()) => map.get(&lc(name)),
        found => found,
    }
}

impl Schema {
    pub fn table(&self, name: &str) -> Result<&Arc<Table>> {
        named(&self.tables, name).ok_or_else(|| Error::Sql(format!("no such table: {name}")))
    }

    /// The view named `name`, in any case.
    pub fn view(&self, name: &str) -> Option<&Arc<View>> {
        named(&self.views, name)
    }

    pub fn indexes_of<'a>(&'a self, table: &'a str) -> impl Iterator<Item = &'a Arc<Index>> + 'a {
        self.indexes
            .values()
            .filter(move |i| i.table.eq_ignore_ascii_case(table))
    }

    /// The indexes of `table` that hold every row (not partial): those a query may read
    /// through.
    pub fn full_indexes_of<'a>(
        &'a self,
        table: &'a str,
    ) -> impl Iterator<Item = &'a Arc<Index>> + 'a {
        self.indexes_of(table).filter(|i| i.where_.is_none())
    }

    pub fn triggers_of<'a>(
        &'a self,
        table: &'a str,
    ) -> impl Iterator<Item = &'a Arc<Trigger>> + 'a {
        self.triggers
            .values()
            .filter(move |t| t.def.table.eq_ignore_ascii_case(table))
    }

    /// Whether any object other than a trigger has this name.
    pub fn name_taken(&self, name: &str) -> Option<&'static str> {
        let n = lc(name);
        if self.tables.contains_key(&n) {
            Some("table")
        } else if self.views.contains_key(&n) {
            Some("view")
        } else if self.indexes.contains_key(&n) {
            Some("index")
        } else {
            None
        }
    }

    pub fn new_db(&mut self, prefix: &str) -> String {
        self.next_db += 1;
        format!("{prefix}{}", self.next_db)
    }

    /// The table a CREATE TABLE describes, and the indexes its constraints need.
    pub fn build_table(&mut self, ct: &ast::CreateTable) -> Result<(Table, Vec<Index>)> {
        let mut columns = Vec::new();
        // The types as typed (the parser's tree respells them).
        let typed = crate::alter::declared_types(&ct.sql)?;
        for (i, c) in ct.columns.iter().enumerate() {
            if columns
                .iter()
                .any(|x: &Column| x.name.eq_ignore_ascii_case(&c.name))
            {
                return Err(Error::Sql(format!("duplicate column name: {}", c.name)));
            }
            let decl_type = match typed.len() == ct.columns.len() {
                true => typed[i].clone(),
                false => c.decl_type.clone(),
            };
            columns.push(Column {
                name: c.name.clone(),
                affinity: Affinity::of_declared(decl_type.as_deref()),
                decl_type,
                not_null: c.not_null,
                default: c.default.clone(),
                collation: c.collation.unwrap_or_default(),
                generated: c.generated.clone(),
            });
        }
        let generated = generated_order(&ct.columns, &columns)?;
        let mut pk: Option<Vec<(usize, bool, Collation)>> = None;
        let mut uniques: Vec<Vec<(usize, bool, Collation)>> = Vec::new();
        let mut checks = Vec::new();
        let mut autoincrement = false;
        let mut foreign_keys = Vec::new();
        let col_of = |e: &Expr| -> Result<usize> {
            match e {
                Expr::Column { table: None, name } => columns
                    .iter()
                    .position(|c| c.name.eq_ignore_ascii_case(name))
                    .ok_or_else(|| Error::Sql(format!("no such column: {name}"))),
                _ => Err(Error::Unsupported(
                    "expressions in a table constraint".into(),
                )),
            }
        };
        for (i, c) in ct.columns.iter().enumerate() {
            if c.generated.is_some() && c.primary_key.is_some() {
                return Err(Error::Sql(
                    "generated columns cannot be part of the PRIMARY KEY".into(),
                ));
            }
            if let Some(desc) = c.primary_key {
                if pk.is_some() {
                    return Err(Error::Sql(format!(
                        "table \"{}\" has more than one primary key",
                        ct.name
                    )));
                }
                pk = Some(vec![(i, desc, columns[i].collation)]);
                autoincrement |= c.autoincrement;
            }
            if c.unique {
                uniques.push(vec![(i, false, columns[i].collation)]);
            }
            checks.extend(c.checks.iter().cloned());
            if let Some(fk) = &c.references {
                foreign_keys.push((vec![i], fk.clone()));
            }
        }
        for tc in &ct.constraints {
            match tc {
                ast::TableConstraint::PrimaryKey(cols) => {
                    if pk.is_some() {
                        return Err(Error::Sql(format!(
                            "table \"{}\" has more than one primary key",
                            ct.name
                        )));
                    }
                    let mut v = Vec::new();
                    for c in cols {
                        let i = col_of(&c.expr)?;
                        if columns[i].generated.is_some() {
                            return Err(Error::Sql(
                                "generated columns cannot be part of the PRIMARY KEY".into(),
                            ));
                        }
                        v.push((i, c.desc, c.collation.unwrap_or(columns[i].collation)));
                    }
                    pk = Some(v);
                }
                ast::TableConstraint::Unique(cols) => {
                    let mut v = Vec::new();
                    for c in cols {
                        let i = col_of(&c.expr)?;
                        v.push((i, c.desc, c.collation.unwrap_or(columns[i].collation)));
                    }
                    uniques.push(v);
                }
                ast::TableConstraint::Check(e) => checks.push(e.clone()),
                ast::TableConstraint::ForeignKey(cols, fk) => {
                    let cols = cols
                        .iter()
                        .map(|n| {
                            columns
                                .iter()
                                .position(|c| c.name.eq_ignore_ascii_case(n))
                                .ok_or_else(|| {
                                    Error::Sql(format!(
                                        "unknown column \"{n}\" in foreign key definition"
                                    ))
                                })
                        })
                        .collect::<Result<Vec<_>>>()?;
                    foreign_keys.push((cols, fk.clone()));
                }
            }
        }
        // INTEGER PRIMARY KEY (exactly that type name, ascending) aliases the rowid.
        let mut rowid_alias = None;
        if let Some(p) = &pk {
            if p.len() == 1 && !p[0].1 {
                let c = &columns[p[0].0];
                if c.decl_type
                    .as_deref()
                    .is_some_and(|t| t.eq_ignore_ascii_case("INTEGER"))
                {
                    rowid_alias = Some(p[0].0);
                }
            }
        }
        if autoincrement && rowid_alias.is_none() {
            return Err(Error::Sql(
                "AUTOINCREMENT is only allowed on an INTEGER PRIMARY KEY".into(),
            ));
        }
        let db = self.new_db("t");
        let mut indexes = Vec::new();
        // A PRIMARY KEY column of a rowid table may hold NULL in SQLite (a legacy quirk): kept.
        let mut constraint_indexes: Vec<(IndexColumns, bool)> = Vec::new();
        if let (Some(p), None) = (&pk, rowid_alias) {
            constraint_indexes.push((p.clone(), true));
        }
        constraint_indexes.extend(uniques.into_iter().map(|u| (u, false)));
        for (n, (cols, primary)) in constraint_indexes.into_iter().enumerate() {
            indexes.push(Index {
                name: format!("sqlite_autoindex_{}_{}", ct.name, n + 1),
                table: ct.name.clone(),
                columns: cols,
                exprs: Vec::new(),
                unique: true,
                auto: true,
                primary,
                db: self.new_db("i"),
                sql: None,
                where_: None,
            });
        }
        let labels = crate::alter::check_labels(&ct.sql)?;
        let checks = checks
            .into_iter()
            .enumerate()
            .map(|(i, e)| (e, labels.get(i).cloned().unwrap_or_default()))
            .collect();
        Ok((
            Table {
                name: ct.name.clone(),
                columns,
                rowid_alias,
                autoincrement,
                checks,
                foreign_keys,
                generated,
                db,
                sql: ct.sql.clone(),
            },
            indexes,
        ))
    }

    /// The table that schema text `sql` defines, its rows in engine database `db`, and
    /// its constraints' indexes (their databases not yet named).
    pub fn defined_by(sql: &str, db: &str) -> Result<(Table, Vec<Index>)> {
        Schema::defined_with_depth(sql, db).map(|(t, i, _)| (t, i))
    }

    /// As [`Schema::defined_by`], with how deep the definition nests.
    fn defined_with_depth(sql: &str, db: &str) -> Result<(Table, Vec<Index>, usize)> {
        let (stmt, depth) = parsed(sql)?;
        let Stmt::CreateTable(ct) = stmt else {
            return Err(corrupt(sql));
        };
        let (mut t, indexes) = Schema::default().build_table(&ct)?;
        t.db = db.to_string();
        Ok((t, indexes, depth))
    }

    /// The schema as `txn` sees it in `sqlite_schema` (database `db`).
    pub fn read(txn: &beechdb::Txn, db: &beechdb::Db) -> Result<Schema> {
        let mut entries = Vec::new();
        for kv in txn.iter(db) {
            let (_, v) = kv?;
            entries.push(crate::record::decode_row(&v, 5)?);
        }
        Schema::load(entries)
    }

    /// Loads the schema stored in `entries` (the records of `sqlite_schema`).
    pub fn load(entries: Vec<Vec<Value>>) -> Result<Schema> {
        let mut s = Schema::default();
        let mut later: Vec<Vec<Value>> = Vec::new();
        for e in entries {
            if let (Some(name), Some(Value::Integer(seq))) = (e.get(1), e.get(5)) {
                s.created.insert(lc(&name.to_text()), *seq as u64);
            }
            let kind = e.first().map(Value::to_text).unwrap_or_default();
            match kind.as_str() {
                "meta" => s.next_db = e[3].as_i64() as u64,
                // PRAGMA user_version's value and AUTOINCREMENT's marks: not schema objects.
                "user_version" | "sequence" => {}
                "table" => {
                    let (t, _, depth) =
                        Schema::defined_with_depth(&e[4].to_text(), &e[3].to_text())?;
                    s.deepest = s.deepest.max(depth);
                    s.tables.insert(lc(&t.name), Arc::new(t));
                }
                _ => later.push(e),
            }
        }
        for e in later {
            let kind = e[0].to_text();
            let name = e[1].to_text();
            let sql = e[4].to_text();
            match kind.as_str() {
                "index" => {
                    let table = e[2].to_text();
                    let t = s.table(&table)?.clone();
                    let index = if sql.is_empty() {
                        // A constraint's index: rebuilt from the table's definition.
                        let (_, idx) = Schema::defined_by(&t.sql, &t.db)?;
                        let mut i = idx
                            .into_iter()
                            .find(|i| i.name.eq_ignore_ascii_case(&name))
                            .ok_or_else(|| corrupt(&name))?;
                        i.db = e[3].to_text();
                        i
                    } else {
                        let (
                            Stmt::CreateIndex {
                                name,
                                unique,
                                columns,
                                where_,
                                ..
                            },
                            depth,
                        ) = parsed(&sql)?
                        else {
                            return Err(corrupt(&sql));
                        };
                        s.deepest = s.deepest.max(depth);
                        let (columns, exprs) = index_columns(&t, &columns)?;
                        Index {
                            name,
                            table: t.name.clone(),
                            columns,
                            exprs,
                            unique,
                            auto: false,
                            primary: false,
                            where_,
                            db: e[3].to_text(),
                            sql: Some(sql.clone()),
                        }
                    };
                    s.indexes.insert(lc(&index.name), Arc::new(index));
                }
                "view" => {
                    let (
                        Stmt::CreateView {
                            columns, select, ..
                        },
                        depth,
                    ) = parsed(&sql)?
                    else {
                        return Err(corrupt(&sql));
                    };
                    s.deepest = s.deepest.max(depth);
                    s.views.insert(
                        lc(&name),
                        Arc::new(View {
                            name: name.clone(),
                            columns,
                            select: *select,
                            sql: sql.clone(),
                        }),
                    );
                }
                "trigger" => {
                    let (Stmt::CreateTrigger(def), depth) = parsed(&sql)? else {
                        return Err(corrupt(&sql));
                    };
                    s.deepest = s.deepest.max(depth);
                    s.triggers.insert(
                        lc(&name),
                        Arc::new(Trigger {
                            name: name.clone(),
                            def: *def,
                        }),
                    );
                }
                other => return Err(corrupt(other)),
            }
        }
        Ok(s)
    }
}

/// Checks a table's generated columns as SQLite's CREATE TABLE does (no DEFAULT, at least
/// one ordinary column, an expression of this row's columns only: no rowid, subquery,
/// parameter, aggregate or non-deterministic function) and orders them so that each is
/// computed after the generated columns it reads; a loop is an error naming the column
/// whose expression reads a column still being computed, as SQLite names it.
fn generated_order(defs: &[ast::ColumnDef], columns: &[Column]) -> Result<Vec<usize>> {
    if defs.iter().all(|d| d.generated.is_none()) {
        return Ok(Vec::new());
    }
    if defs.iter().all(|d| d.generated.is_some()) {
        return Err(Error::Sql(
            "must have at least one non-generated column".into(),
        ));
    }
    let probe = Table {
        name: String::new(),
        columns: columns.to_vec(),
        rowid_alias: None,
        autoincrement: false,
        checks: Vec::new(),
        foreign_keys: Vec::new(),
        generated: Vec::new(),
        db: String::new(),
        sql: String::new(),
    };
    // The generated columns each one's expression reads.
    let mut reads: Vec<Vec<usize>> = vec![Vec::new(); columns.len()];
    for (i, d) in defs.iter().enumerate() {
        let Some((e, _)) = &d.generated else { continue };
        if d.default.is_some() {
            return Err(Error::Sql(
                "cannot use DEFAULT on a generated column".into(),
            ));
        }
        check_index_expr(&probe, e, "generated columns")?;
        e.walk(&mut |x| {
            if let Expr::Column { name, .. } = x {
                if let Some(c) = probe.column_index(name) {
                    if columns[c].generated.is_some() && !reads[i].contains(&c) {
                        reads[i].push(c);
                    }
                }
            }
        });
    }
    // Depth first, in column order, as SQLite computes them.
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Pending,
        Busy,
        Done,
    }
    fn visit(
        c: usize,
        reads: &[Vec<usize>],
        marks: &mut [Mark],
        order: &mut Vec<usize>,
    ) -> std::result::Result<(), usize> {
        marks[c] = Mark::Busy;
        for &r in &reads[c] {
            match marks[r] {
                Mark::Busy => return Err(c),
                Mark::Pending => visit(r, reads, marks, order)?,
                Mark::Done => {}
            }
        }
        marks[c] = Mark::Done;
        order.push(c);
        Ok(())
    }
    let mut marks = vec![Mark::Pending; columns.len()];
    let mut order = Vec::new();
    for (c, col) in columns.iter().enumerate() {
        if col.generated.is_some() && marks[c] == Mark::Pending {
            if let Err(at) = visit(c, &reads, &mut marks, &mut order) {
                let name = &columns[at].name;
                return Err(Error::Sql(format!("generated column loop on \"{name}\"")));
            }
        }
    }
    Ok(order)
}

fn corrupt(what: &str) -> Error {
    Error::Engine(beechdb::Error::Corrupt {
        page: None,
        detail: format!("malformed schema entry: {what}"),
    })
}

/// The parts of an index: its columns' positions and its expressions (SQLite's rules for
/// those: only this table's columns, built-in deterministic functions, no subqueries,
/// parameters or aggregates).
pub fn index_columns(t: &Table, cols: &[ast::IndexedColumn]) -> Result<(IndexColumns, Vec<Expr>)> {
    let mut parts = Vec::new();
    let mut exprs = Vec::new();
    for c in cols {
        if let Expr::Column { name, .. } = &c.expr {
            let i = t
                .column_index(name)
                .ok_or_else(|| Error::Sql(format!("no such column: {name}")))?;
            parts.push((i, c.desc, c.collation.unwrap_or(t.columns[i].collation)));
            continue;
        }
        check_index_expr(t, &c.expr, "index expressions")?;
        parts.push((
            EXPR_PART + exprs.len(),
            c.desc,
            c.collation.unwrap_or_default(),
        ));
        exprs.push(c.expr.clone());
    }
    Ok((parts, exprs))
}

/// SQLite's rules for an expression an index keeps (`what`: "index expressions", or
/// "partial index WHERE clauses" for a partial index's condition): only this table's
/// columns, built-in deterministic functions, no subqueries, parameters or aggregates.
pub fn check_index_expr(t: &Table, e: &Expr, what: &str) -> Result<()> {
    let mut problem = None;
    e.walk(&mut |x| {
        let sql = |m: &str| Some(Error::Sql(m.to_string()));
        let found = match x {
            Expr::Column { name, .. } if t.column_index(name).is_none() => {
                sql(&format!("no such column: {name}"))
            }
            Expr::Subquery(_) | Expr::Exists(_) | Expr::InSelect { .. } => {
                sql(&format!("subqueries prohibited in {what}"))
            }
            Expr::Param(_) => sql(&format!("parameters prohibited in {what}")),
            Expr::Window(_) => sql("misuse of window function"),
            Expr::Function { user: Some(_), .. } => Some(Error::Unsupported(format!(
                "a registered function in {what} (the index would outlive it)"
            ))),
            Expr::Function {
                name, args, star, ..
            } => {
                if *star || crate::func::is_aggregate(name, args.len()) {
                    sql(&format!("misuse of aggregate function {name}()"))
                } else if !crate::func::is_deterministic(name) {
                    sql(&format!("non-deterministic functions prohibited in {what}"))
                } else {
                    None
                }
            }
            _ => None,
        };
        problem = problem.take().or(found);
    });
    problem.map_or(Ok(()), Err)
}
