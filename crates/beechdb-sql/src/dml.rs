//! Changing data and schema: INSERT, UPDATE, DELETE with constraints (NOT NULL, CHECK,
//! UNIQUE and PRIMARY KEY through their indexes, conflict resolution) and triggers; CREATE
//! and DROP of tables, indexes, views and triggers; REINDEX and ALTER TABLE.
//!
//! Owns: keeping a table's indexes in step with its rows, and the schema entries. May call:
//! `exec` (expressions, queries), `schema`, `record`, and the engine through the
//! statement's transaction. Invariants: every index of a table holds exactly one entry per
//! row (a unique index's key is its columns alone unless one is NULL, with the rowid in the
//! value); a row and its index entries change in the same transaction.

use crate::alter;
use crate::ast::*;
use crate::error::{ConstraintKind, Error, Result};
use crate::exec::{table_columns, CorePlan, Exec, Frame, Row, Scope};
use crate::record::{encode_key_part, encode_row, encode_row_except, rowid_key, rowid_of_key};
use crate::schema::{index_columns, lc, Index, Schema, Table, Trigger, View, EXPR_PART, SCHEMA_DB};
use crate::value::{Affinity, Value};
use std::ops::Bound;
use std::sync::Arc;

/// The key of `row`'s entry in `index`, and its value (the rowid for a unique index).
fn fk_error() -> Error {
    Error::Constraint(
        ConstraintKind::ForeignKey,
        "FOREIGN KEY constraint failed".into(),
    )
}

/// Row `rowid`'s entry in `index`: key and value. `exprs` holds the values of the index's
/// expressions for the row (`Exec::index_exprs`).
fn index_entry(index: &Index, row: &[Value], exprs: &[Value], rowid: i64) -> (Vec<u8>, Vec<u8>) {
    // Room for a number's part and the rowid without growing (a growth is a `realloc`).
    let mut key = Vec::with_capacity(32);
    let mut any_null = false;
    for &(c, desc, coll) in &index.columns {
        let v = match c.checked_sub(EXPR_PART) {
            Some(k) => &exprs[k],
            None => &row[c],
        };
        any_null |= v.is_null();
        encode_key_part(&mut key, v, coll, desc);
    }
    if index.unique && !any_null {
        (key, rowid_key(rowid).to_vec())
    } else {
        key.extend_from_slice(&rowid_key(rowid));
        (key, Vec::new())
    }
}

/// A trigger's view of the row: `old` and `new` as sources.
fn trigger_frame(t: &Table) -> Frame {
    let mut f = Frame::default();
    f.push("old", table_columns(t), true);
    f.push("new", table_columns(t), true);
    f
}

/// Where AUTOINCREMENT's mark for `t` is kept in `sqlite_schema` (by engine database, which
/// a rename keeps).
pub(crate) fn sequence_key(t: &Table) -> Vec<u8> {
    format!("\0sequence:{}", t.db).into_bytes()
}

fn is_sequence_table(name: &str) -> bool {
    name.eq_ignore_ascii_case("sqlite_sequence")
}

/// The CREATE text of a table made by CREATE TABLE ... AS SELECT, as SQLite writes it
/// (`createTableStmt`): names quoted where SQL needs it, each column's type from its
/// affinity, and a column a line once the names are long.
fn select_table_text(name: &str, columns: &[ColumnDef]) -> String {
    // SQLite's `identLength`: the name quoted, whether or not it will be.
    let length = |n: &str| n.len() + n.matches('"').count() + 2;
    let long = columns.iter().map(|c| length(&c.name) + 5).sum::<usize>() + length(name) >= 50;
    let (first, between, end) = match long {
        false => ("", ",", ")"),
        true => ("\n  ", ",\n  ", "\n)"),
    };
    let q = crate::alter::quoted;
    let mut sql = format!("CREATE TABLE {}(", q(name));
    for (i, c) in columns.iter().enumerate() {
        sql.push_str(if i == 0 { first } else { between });
        sql.push_str(&q(&c.name));
        if let Some(t) = c.decl_type.as_deref().filter(|t| !t.is_empty()) {
            sql.push(' ');
            sql.push_str(t);
        }
    }
    sql.push_str(end);
    sql
}

/// Table `t`'s entry in `sqlite_schema`, with its definition `sql`, `seq` in the order of
/// creation.
fn table_entry(t: &Table, sql: &str, seq: i64) -> Vec<u8> {
    schema_entry("table", &t.name, &t.name, &t.db, sql, seq)
}

fn schema_entry(kind: &str, name: &str, table: &str, db: &str, sql: &str, seq: i64) -> Vec<u8> {
    encode_row(&[
        kind.into(),
        name.into(),
        table.into(),
        db.into(),
        sql.into(),
        seq.into(),
    ])
}

impl Exec<'_> {
    fn schema_db(&mut self) -> Result<beechdb::Db> {
        self.db(SCHEMA_DB)
    }

    fn save_meta(&mut self) -> Result<()> {
        let next = self.schema.next_db;
        let db = self.schema_db()?;
        let rec = crate::schema::value_entry("meta", "", next as i64);
        self.txn.put(&db, b"\0meta", &rec)?;
        Ok(())
    }

    fn put_entry(&mut self, name: &str, rec: Vec<u8>) -> Result<()> {
        // Every open reads the schema back from these texts: one that does not parse would
        // leave a database that no longer opens, so it is refused before it is written.
        let sql = crate::record::decode_row(&rec, 5)?[4].to_text();
        if !sql.is_empty() {
            if let Err(e) = crate::parse::parse_one(&sql) {
                return Err(Error::Sql(format!(
                    "the schema text made for {name} does not read back ({e}): {sql}"
                )));
            }
        }
        let db = self.schema_db()?;
        self.txn.put(&db, lc(name).as_bytes(), &rec)?;
        Ok(())
    }

    fn remove_entry(&mut self, name: &str) -> Result<()> {
        let db = self.schema_db()?;
        self.txn.delete(&db, lc(name).as_bytes())?;
        Ok(())
    }

    fn schema_mut(&mut self) -> &mut Schema {
        let s = Arc::make_mut(self.schema);
        s.listing.take();
        s
    }

    /// Where the existing object `name` stands in the order of creation.
    fn seq_of(&self, name: &str) -> i64 {
        self.schema.created.get(&lc(name)).map_or(0, |&s| s as i64)
    }

    /// Places the new object `name` last in the order of creation (or `name` taking the
    /// place of `was`, renamed).
    fn place(&mut self, name: &str, was: Option<&str>) -> i64 {
        let seq = match was {
            Some(was) => self.seq_of(was) as u64,
            None => self.schema.created.values().max().map_or(1, |m| m + 1),
        };
        let s = self.schema_mut();
        if let Some(was) = was {
            s.created.remove(&lc(was));
        }
        s.created.insert(lc(name), seq);
        seq as i64
    }

    // ---- rows ----

    /// A new rowid: past the largest this transaction sees, and past every rowid handed
    /// out by the database's counter for the table (kept outside transactions, so that
    /// concurrent inserts into one table take different rowids instead of conflicting).
    /// What a failed statement or a rolled-back transaction took goes back to the counter
    /// when no other connection took one since (`exec::TakenRowids`), so the next insert
    /// takes it again, as in SQLite; a deleted largest rowid is not taken again.
    fn new_rowid(&mut self, t: &Table) -> Result<i64> {
        let mut seen = match self.max_rowids.get(&t.db) {
            Some(&known) => known,
            None => {
                let db = self.db(&t.db)?;
                let known = match self.txn.last(&db, ..)? {
                    None => None,
                    Some((k, _)) => Some(rowid_of_key(&k)?),
                };
                self.max_rowids.insert(t.db.clone(), known);
                known
            }
        };
        // AUTOINCREMENT: never a rowid used before, deleted rows' included (the counter
        // covers this process's; the mark, those before it).
        if t.autoincrement && !self.rowids.lock().contains_key(&t.db) {
            seen = seen.max(self.sequence_mark(t)?);
        }
        if seen == Some(i64::MAX) {
            return Err(Error::Sql("database or disk is full".into()));
        }
        let mut counters = self.rowids.lock();
        let r = match (counters.get(&t.db), seen) {
            (None, None) => 1,
            (None, Some(s)) => s + 1,
            (Some(&c), None) => c,
            (Some(&c), Some(s)) => c.max(s + 1),
        };
        if r == i64::MAX {
            return Err(Error::Sql("database or disk is full".into()));
        }
        match counters.get_mut(&t.db) {
            Some(next) => *next = r + 1,
            None => {
                counters.insert(t.db.clone(), r + 1);
            }
        }
        crate::exec::TakenRowids::note(&mut self.taken_rowids, &t.db, r);
        Ok(r)
    }

    pub(crate) fn read_row(&mut self, t: &Table, rowid: i64) -> Result<Option<Row>> {
        let db = self.db(&t.db)?;
        match self.txn.get(&db, &rowid_key(rowid))? {
            None => Ok(None),
            Some(v) => t.row_from(rowid, &v).map(Some),
        }
    }

    /// The `i`th matched row (`matched`, its rowid last) as it is now, alone and with its
    /// rowid: read again after the first, since changes made for an earlier row (triggers,
    /// cascades, REPLACE) may have changed or removed it.
    fn current_row(&mut self, t: &Table, i: usize, matched: Row) -> Result<Option<(Row, Row)>> {
        let rowid = matched[t.columns.len()].as_i64();
        let full = match i {
            0 => Some(matched),
            _ => self.row_by_rowid(t, rowid)?,
        };
        Ok(full.map(|full| (full[..t.columns.len()].to_vec(), full)))
    }

    /// Puts row `rowid`'s record (the rowid alias column is not stored: it is the key).
    fn put_record(&mut self, t: &Table, rowid: i64, row: &[Value]) -> Result<()> {
        let db = self.db(&t.db)?;
        if let Some(known) = self.max_rowids.get_mut(&t.db) {
            *known = (*known).max(Some(rowid));
        }
        let record = encode_row_except(row, t.rowid_alias);
        Ok(self.txn.put(&db, &rowid_key(rowid), &record)?)
    }

    /// Row `rowid`'s entry in `index` (of table `t`): key and value; `None` when the index
    /// is partial and its condition is not true for the row.
    fn index_entry(
        &mut self,
        t: &Table,
        index: &Index,
        row: &[Value],
        rowid: i64,
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if index.exprs.is_empty() && index.where_.is_none() {
            return Ok(Some(index_entry(index, row, &[], rowid)));
        }
        let mut frame = Frame::default();
        frame.push(&t.name, table_columns(t), true);
        let n = t.columns.len();
        let mut full = Vec::with_capacity(n + 1);
        full.extend_from_slice(&row[..n]);
        full.push(Value::Integer(rowid));
        let sc = Scope::new(&frame, &full, None);
        if let Some(w) = &index.where_ {
            if self.eval(w, &sc)?.truth() != Some(true) {
                return Ok(None);
            }
        }
        let exprs = index
            .exprs
            .iter()
            .map(|e| self.eval(e, &sc))
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(index_entry(index, row, &exprs, rowid)))
    }

    fn write_row(&mut self, t: &Table, rowid: i64, row: &[Value]) -> Result<()> {
        self.put_record(t, rowid, row)?;
        for idx in self.schema.indexes_of(&t.name).cloned().collect::<Vec<_>>() {
            if let Some((k, v)) = self.index_entry(t, &idx, row, rowid)? {
                let idb = self.db(&idx.db)?;
                self.txn.put(&idb, &k, &v)?;
            }
        }
        Ok(())
    }

    /// Replaces row `rowid` (now `old`) with `new` under the same rowid: the row is
    /// overwritten, and only the index entries that differ are changed.
    fn replace_row(&mut self, t: &Table, rowid: i64, old: &[Value], new: &[Value]) -> Result<()> {
        self.put_record(t, rowid, new)?;
        for idx in self.schema.indexes_of(&t.name).cloned().collect::<Vec<_>>() {
            let before = self.index_entry(t, &idx, old, rowid)?;
            let after = self.index_entry(t, &idx, new, rowid)?;
            if before == after {
                continue;
            }
            let idb = self.db(&idx.db)?;
            if let Some(before) = &before {
                if after.as_ref().is_none_or(|a| a.0 != before.0) {
                    self.txn.delete(&idb, &before.0)?;
                }
            }
            if let Some((k, v)) = &after {
                self.txn.put(&idb, k, v)?;
            }
        }
        Ok(())
    }

    /// AUTOINCREMENT's mark for `t`: the largest rowid deleted (or moved) from it, kept in
    /// `sqlite_schema` and written only when a deletion passes it, so that inserts never
    /// write a shared row (concurrent inserts would conflict on it).
    pub(crate) fn sequence_mark(&mut self, t: &Table) -> Result<Option<i64>> {
        let db = self.schema_db()?;
        match self.txn.get(&db, &sequence_key(t))? {
            Some(rec) => crate::schema::entry_value(&rec).map(Some),
            None => Ok(None),
        }
    }

    /// `sqlite_sequence`'s rows: per AUTOINCREMENT table that has had a row, its name and
    /// the largest rowid it has used (committed ones, as this transaction sees them).
    pub(crate) fn sequence_rows(&mut self) -> Result<Vec<Row>> {
        let tables: Vec<Arc<Table>> = self
            .schema
            .tables
            .values()
            .filter(|t| t.autoincrement)
            .cloned()
            .collect();
        let mut rows = Vec::new();
        for t in tables {
            let db = self.db(&t.db)?;
            let last = match self.txn.last(&db, ..)? {
                Some((k, _)) => Some(rowid_of_key(&k)?),
                None => None,
            };
            if let Some(seq) = last.max(self.sequence_mark(&t)?) {
                rows.push(vec![t.name.as_str().into(), seq.into()]);
            }
        }
        Ok(rows)
    }

    /// Sets (or with `None`, removes) the AUTOINCREMENT mark of the table named `name`, as
    /// a write of its `sqlite_sequence` row does. The process's counter for the table is
    /// dropped, so its next rowid is one past the larger of the mark and its largest rowid,
    /// as in SQLite.
    fn set_sequence(&mut self, name: &str, seq: Option<i64>) -> Result<()> {
        let t = match self.schema.tables.get(&lc(name)) {
            Some(t) if t.autoincrement => t.clone(),
            _ => {
                return Err(Error::Unsupported(format!(
                    "a sqlite_sequence row for {name}, which is no AUTOINCREMENT table"
                )))
            }
        };
        let db = self.schema_db()?;
        match seq {
            Some(seq) => {
                let mark = crate::schema::value_entry("sequence", &t.db, seq);
                self.txn.put(&db, &sequence_key(&t), &mark)?;
            }
            None => {
                self.txn.delete(&db, &sequence_key(&t))?;
            }
        }
        self.rowids.lock().remove(&t.db);
        Ok(())
    }

    /// `INSERT INTO sqlite_sequence`: each row (name, seq) sets a table's mark.
    fn insert_sequence(&mut self, ins: &Insert, outer: Option<&Scope>) -> Result<u64> {
        let columns: Vec<String> = ins
            .columns
            .clone()
            .unwrap_or_else(|| vec!["name".into(), "seq".into()]);
        let at = |c: &str| columns.iter().position(|x| x.eq_ignore_ascii_case(c));
        let (Some(name_at), seq_at) = (at("name"), at("seq")) else {
            return Err(Error::Sql(
                "an insert into sqlite_sequence needs a name".into(),
            ));
        };
        let Some(sel) = &ins.source else {
            return Ok(0);
        };
        let rows = self.select(sel, outer)?.rows;
        for r in &rows {
            if r.len() != columns.len() {
                return Err(Error::Sql(format!(
                    "{} values for {} columns",
                    r.len(),
                    columns.len()
                )));
            }
            let seq = seq_at.map_or(0, |i| r[i].as_i64());
            self.set_sequence(&r[name_at].to_text(), Some(seq))?;
        }
        self.changes += rows.len() as u64;
        Ok(rows.len() as u64)
    }

    /// `DELETE FROM sqlite_sequence` (`seq` `None`) or `UPDATE sqlite_sequence SET seq =
    /// seq`, on the rows `where_` takes.
    fn change_sequence(
        &mut self,
        where_: Option<&Expr>,
        seq: Option<&Expr>,
        outer: Option<&Scope>,
    ) -> Result<u64> {
        let mut frame = Frame::default();
        frame.push(
            "sqlite_sequence",
            crate::exec::sequence_table_columns(),
            false,
        );
        let mut count = 0;
        for row in self.sequence_rows()? {
            let scope = Scope::new(&frame, &row, outer);
            if let Some(w) = where_ {
                if self.eval(w, &scope)?.truth() != Some(true) {
                    continue;
                }
            }
            let new = match seq {
                Some(e) => Some(self.eval(e, &scope)?.as_i64()),
                None => None,
            };
            self.set_sequence(&row[0].to_text(), new)?;
            count += 1;
        }
        self.changes += count;
        Ok(count)
    }

    fn delete_row(&mut self, t: &Table, rowid: i64, row: &[Value]) -> Result<()> {
        if t.autoincrement && self.sequence_mark(t)?.is_none_or(|m| rowid > m) {
            let mark = crate::schema::value_entry("sequence", &t.db, rowid);
            let db = self.schema_db()?;
            self.txn.put(&db, &sequence_key(t), &mark)?;
            // The process's counter passes it too (kept even if this rolls back: a gap).
            let mut counters = self.rowids.lock();
            let next = counters.entry(t.db.clone()).or_insert(rowid);
            *next = (*next).max(rowid.saturating_add(1));
        }
        self.remove_row(t, rowid, row)
    }

    /// Removes row `rowid` and its index entries (an UPDATE moving it to another rowid:
    /// as in SQLite, that leaves AUTOINCREMENT's mark alone).
    fn remove_row(&mut self, t: &Table, rowid: i64, row: &[Value]) -> Result<()> {
        let db = self.db(&t.db)?;
        if self.max_rowids.get(&t.db) == Some(&Some(rowid)) {
            self.max_rowids.remove(&t.db);
        }
        self.txn.delete(&db, &rowid_key(rowid))?;
        for idx in self.schema.indexes_of(&t.name).cloned().collect::<Vec<_>>() {
            if let Some((k, _)) = self.index_entry(t, &idx, row, rowid)? {
                let idb = self.db(&idx.db)?;
                self.txn.delete(&idb, &k)?;
            }
        }
        Ok(())
    }

    /// The rowid of a row other than `rowid` that `row` would duplicate in a unique index,
    /// with that index.
    fn unique_conflict(
        &mut self,
        t: &Table,
        row: &[Value],
        rowid: i64,
    ) -> Result<Option<(i64, Arc<Index>)>> {
        // Collected (the checks borrow `self`), and only the unique ones: for a table
        // without any, nothing is allocated.
        let unique: Vec<Arc<Index>> = self
            .schema
            .indexes_of(&t.name)
            .filter(|i| i.unique)
            .cloned()
            .collect();
        for idx in unique {
            let Some((k, v)) = self.index_entry(t, &idx, row, rowid)? else {
                continue; // not in this partial index
            };
            if v.is_empty() {
                continue; // a NULL in the key: never a duplicate
            }
            let idb = self.db(&idx.db)?;
            if let Some(other) = self.txn.get(&idb, &k)? {
                let other = rowid_of_key(&other)?;
                if other != rowid {
                    return Ok(Some((other, idx)));
                }
            }
        }
        Ok(None)
    }

    fn unique_error(&self, t: &Table, idx: &Index) -> Error {
        let cols: Vec<String> = match idx.exprs.is_empty() {
            true => idx
                .columns
                .iter()
                .map(|&(c, _, _)| format!("{}.{}", t.name, t.columns[c].name))
                .collect(),
            // SQLite names an index with expressions, not its parts.
            false => vec![format!("index '{}'", idx.name)],
        };
        Error::Constraint(
            if idx.primary {
                ConstraintKind::PrimaryKey
            } else {
                ConstraintKind::Unique
            },
            format!("UNIQUE constraint failed: {}", cols.join(", ")),
        )
    }

    /// NOT NULL and CHECK constraints of `row`; `Ok(false)` when the row is to be skipped
    /// (OR IGNORE).
    /// Computes the generated columns of `row` (row `rowid` of `t`), each after those it
    /// reads, with its column's affinity.
    fn fill_generated(&mut self, t: &Table, row: &mut [Value], rowid: i64) -> Result<()> {
        if t.generated.is_empty() {
            return Ok(());
        }
        let mut frame = Frame::default();
        frame.push(&t.name, table_columns(t), true);
        let mut full = row.to_vec();
        full.push(Value::Integer(rowid));
        for &c in &t.generated {
            let (e, _) = t.columns[c].generated.as_ref().expect("a generated column");
            let v = self.eval(e, &Scope::new(&frame, &full, None))?;
            full[c] = t.columns[c].affinity.apply(v);
        }
        row.clone_from_slice(&full[..row.len()]);
        Ok(())
    }

    fn check_row(
        &mut self,
        t: &Table,
        row: &mut [Value],
        rowid: i64,
        conflict: Conflict,
    ) -> Result<bool> {
        for (i, c) in t.columns.iter().enumerate() {
            if c.not_null && row[i].is_null() && Some(i) != t.rowid_alias {
                match conflict {
                    Conflict::Ignore => return Ok(false),
                    Conflict::Replace if c.default.is_some() => {
                        let sc = Scope::new(&EMPTY, &[], None);
                        row[i] = c
                            .affinity
                            .apply(self.eval(c.default.as_ref().unwrap(), &sc)?);
                    }
                    _ => {
                        return Err(Error::Constraint(
                            ConstraintKind::NotNull,
                            format!("NOT NULL constraint failed: {}.{}", t.name, c.name),
                        ))
                    }
                }
            }
        }
        if !t.checks.is_empty() {
            let mut frame = Frame::default();
            frame.push(&t.name, table_columns(t), true);
            let mut full = row.to_vec();
            full.push(Value::Integer(rowid));
            let sc = Scope::new(&frame, &full, None);
            for (chk, label) in &t.checks {
                if self.eval(chk, &sc)?.truth() == Some(false) {
                    if conflict == Conflict::Ignore {
                        return Ok(false);
                    }
                    return Err(Error::Constraint(
                        ConstraintKind::Check,
                        format!("CHECK constraint failed: {label}"),
                    ));
                }
            }
        }
        Ok(true)
    }

    /// Runs the triggers on `t` for `event` at `time` with `old` and `new` rows (with their
    /// rowids last); `Ok(false)` if one raised IGNORE.
    fn fire(
        &mut self,
        t: &Table,
        time: TriggerTime,
        event: &TriggerEvent,
        old: Option<&[Value]>,
        new: Option<&[Value]>,
        changed: &[usize],
    ) -> Result<bool> {
        let triggers: Vec<Arc<Trigger>> = self
            .schema
            .triggers_of(&t.name)
            .filter(|tr| tr.def.time == time)
            .filter(|tr| match (&tr.def.event, event) {
                (TriggerEvent::Insert, TriggerEvent::Insert)
                | (TriggerEvent::Delete, TriggerEvent::Delete) => true,
                (TriggerEvent::Update(cols), TriggerEvent::Update(_)) => match cols {
                    None => true,
                    Some(cols) => cols
                        .iter()
                        .any(|c| t.column_index(c).is_some_and(|i| changed.contains(&i))),
                },
                _ => false,
            })
            .cloned()
            .collect();
        if triggers.is_empty() {
            return Ok(true);
        }
        // SQLite's limit (SQLITE_MAX_TRIGGER_DEPTH); each level's statements run on a
        // stack with room for them (`crate::deep`).
        if self.trigger_depth >= 1000 {
            return Err(Error::Sql("too many levels of trigger recursion".into()));
        }
        let frame = trigger_frame(t);
        let width = t.columns.len() + 1;
        let mut row = Vec::with_capacity(2 * width);
        row.extend(old.map_or_else(|| vec![Value::Null; width], <[Value]>::to_vec));
        row.extend(new.map_or_else(|| vec![Value::Null; width], <[Value]>::to_vec));
        for tr in triggers {
            let sc = Scope::new(&frame, &row, None);
            if let Some(w) = &tr.def.when {
                if self.eval(w, &sc)?.truth() != Some(true) {
                    continue;
                }
            }
            self.trigger_depth += 1;
            let mut result = Ok(true);
            for stmt in &tr.def.body {
                let r = crate::deep(|| self.run_in_trigger(stmt, &frame, &row));
                match r {
                    Err(Error::Raise(m)) if m == "\u{0}ignore" => {
                        result = Ok(false);
                        break;
                    }
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                    Ok(()) => {}
                }
            }
            self.trigger_depth -= 1;
            if !result? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn run_in_trigger(&mut self, stmt: &Stmt, frame: &Frame, row: &[Value]) -> Result<()> {
        // A run of its own: its subqueries run again (see `KeptSubqueries`).
        let back_to = self.subqueries.begin_run();
        let r = self.run_trigger_statement(stmt, frame, row);
        self.subqueries.end_run(back_to);
        r
    }

    fn run_trigger_statement(&mut self, stmt: &Stmt, frame: &Frame, row: &[Value]) -> Result<()> {
        let sc = Scope::new(frame, row, None);
        let changed = match stmt {
            Stmt::Insert(i) => self.insert(i, Some(&sc))?,
            Stmt::Update(u) => self.update(u, Some(&sc))?,
            Stmt::Delete {
                table,
                where_,
                plan,
                ..
            } => self.delete(table, where_.as_ref(), &[], Some(&sc), *plan)?,
            Stmt::Select(s) => self.select(s, Some(&sc)).map(|_| 0)?,
            _ => return Err(Error::Sql("statement not allowed in a trigger".into())),
        };
        // Counted by total_changes() (not by changes()), as in SQLite.
        self.trigger_changes += changed;
        Ok(())
    }

    // ---- foreign keys ----

    /// The parent table of `fk` and the columns it references (its primary key when the
    /// foreign key names none).
    fn parent_key(&self, fk: &ForeignKeyDef) -> Result<(Arc<Table>, Vec<usize>)> {
        let mismatch = || {
            Error::Sql(format!(
                "foreign key mismatch - referencing \"{}\"",
                fk.parent
            ))
        };
        let parent = self
            .schema
            .tables
            .get(&lc(&fk.parent))
            .cloned()
            .ok_or_else(mismatch)?;
        let cols = if fk.parent_columns.is_empty() {
            match parent.rowid_alias {
                Some(a) => vec![a],
                None => self
                    .schema
                    .indexes_of(&parent.name)
                    .find(|i| i.primary)
                    .map(|i| i.columns.iter().map(|c| c.0).collect())
                    .ok_or_else(mismatch)?,
            }
        } else {
            fk.parent_columns
                .iter()
                .map(|n| parent.column_index(n).ok_or_else(mismatch))
                .collect::<Result<_>>()?
        };
        Ok((parent, cols))
    }

    /// `t.c1 = v1 AND t.c2 = v2 ...`.
    fn key_filter(t: &Table, cols: &[usize], vals: &[Value]) -> Expr {
        cols.iter()
            .zip(vals)
            .map(|(&c, v)| {
                Expr::Binary(
                    BinOp::Eq,
                    Box::new(Expr::Column {
                        table: Some(t.name.clone()),
                        name: t.columns[c].name.clone(),
                    }),
                    Box::new(Expr::Literal(v.clone())),
                )
            })
            .reduce(|a, b| Expr::Binary(BinOp::And, Box::new(a), Box::new(b)))
            .expect("a key has a column")
    }

    /// Every foreign key of `row` (of `t`) must find its parent row.
    fn check_parents(&mut self, t: &Table, row: &[Value]) -> Result<()> {
        if !self.foreign_keys {
            return Ok(());
        }
        for (cols, fk) in &t.foreign_keys {
            let vals: Vec<Value> = cols.iter().map(|&c| row[c].clone()).collect();
            if vals.iter().any(Value::is_null) {
                continue;
            }
            let (parent, pcols) = self.parent_key(fk)?;
            let filter = Self::key_filter(&parent, &pcols, &vals);
            if self
                .matching_rows(&parent, Some(&filter), None, PlanId::NONE)?
                .is_empty()
            {
                return Err(fk_error());
            }
        }
        Ok(())
    }

    /// The rows of other tables that reference row `old` of `t` (being deleted, or its key
    /// changed to `new`) get their foreign keys' actions.
    fn act_on_children(&mut self, t: &Table, old: &[Value], new: Option<&[Value]>) -> Result<()> {
        if !self.foreign_keys {
            return Ok(());
        }
        let children: Vec<(Arc<Table>, Vec<usize>, ForeignKeyDef)> = self
            .schema
            .tables
            .values()
            .flat_map(|c| {
                c.foreign_keys
                    .iter()
                    .filter(|(_, fk)| fk.parent.eq_ignore_ascii_case(&t.name))
                    .map(move |(cols, fk)| (c.clone(), cols.clone(), fk.clone()))
            })
            .collect();
        for (child, cols, fk) in children {
            let (_, pcols) = self.parent_key(&fk)?;
            let old_key: Vec<Value> = pcols.iter().map(|&c| old[c].clone()).collect();
            if old_key.iter().any(Value::is_null) {
                continue;
            }
            let new_key: Option<Vec<Value>> =
                new.map(|n| pcols.iter().map(|&c| n[c].clone()).collect());
            if let Some(nk) = &new_key {
                if nk
                    .iter()
                    .zip(&old_key)
                    .all(|(a, b)| a == b && a.type_name() == b.type_name())
                {
                    continue; // the key did not change
                }
            }
            let filter = Self::key_filter(&child, &cols, &old_key);
            if self
                .matching_rows(&child, Some(&filter), None, PlanId::NONE)?
                .is_empty()
            {
                continue;
            }
            let action = if new.is_some() {
                fk.on_update
            } else {
                fk.on_delete
            };
            let set_to = |vals: Vec<Expr>| -> Vec<Assignment> {
                cols.iter()
                    .zip(vals)
                    .map(|(&c, e)| (vec![child.columns[c].name.clone()], e))
                    .collect()
            };
            let sets = match (action, &new_key) {
                (RefAction::NoAction | RefAction::Restrict, _) => return Err(fk_error()),
                (RefAction::Cascade, None) => {
                    self.delete(&child.name, Some(&filter), &[], None, PlanId::NONE)?;
                    continue;
                }
                (RefAction::Cascade, Some(nk)) => {
                    set_to(nk.iter().cloned().map(Expr::Literal).collect())
                }
                (RefAction::SetNull, _) => set_to(vec![Expr::Literal(Value::Null); cols.len()]),
                (RefAction::SetDefault, _) => set_to(
                    cols.iter()
                        .map(|&c| {
                            child.columns[c]
                                .default
                                .clone()
                                .unwrap_or(Expr::Literal(Value::Null))
                        })
                        .collect(),
                ),
            };
            let update = Update {
                with: Vec::new(),
                table: child.name.clone(),
                sets,
                from: None,
                where_: Some(filter),
                conflict: Conflict::Abort,
                returning: Vec::new(),
                plan: PlanId::NONE,
            };
            self.update(&update, None)?;
        }
        Ok(())
    }

    // ---- INSERT ----

    pub fn insert(&mut self, ins: &Insert, outer: Option<&Scope>) -> Result<u64> {
        if let Some(v) = self.schema.view(&ins.table).cloned() {
            return self.insert_into_view(&v, ins, outer);
        }
        if is_sequence_table(&ins.table) {
            return self.insert_sequence(ins, outer);
        }
        let t = self.schema.table(&ins.table)?.clone();
        let targets: Vec<usize> = match &ins.columns {
            // A generated column takes no value: `VALUES` lists the others.
            None => (0..t.columns.len())
                .filter(|&c| t.columns[c].generated.is_none())
                .collect(),
            Some(cols) => cols
                .iter()
                .map(|c| match t.column_index(c) {
                    Some(i) if t.columns[i].generated.is_some() => Err(Error::Sql(format!(
                        "cannot INSERT into generated column \"{}\"",
                        t.columns[i].name
                    ))),
                    Some(i) => Ok(i),
                    None if ["rowid", "oid", "_rowid_"]
                        .iter()
                        .any(|r| r.eq_ignore_ascii_case(c)) =>
                    {
                        Ok(usize::MAX)
                    }
                    None => Err(Error::Sql(format!(
                        "table {} has no column named {c}",
                        t.name
                    ))),
                })
                .collect::<Result<_>>()?,
        };
        let source_rows: Vec<Row> = match &ins.source {
            None => vec![Vec::new()],
            Some(sel) => {
                let (n, rows) = match self.plain_values(sel, outer) {
                    Some(values) => values?,
                    None => {
                        let r = self.select(sel, outer)?;
                        (r.columns.len(), r.rows)
                    }
                };
                if n != targets.len() {
                    return Err(Error::Sql(match &ins.columns {
                        None => format!(
                            "table {} has {} columns but {} values were supplied",
                            t.name,
                            targets.len(),
                            n
                        ),
                        Some(_) => format!("{} values for {} columns", n, targets.len()),
                    }));
                }
                rows
            }
        };
        if self.plan.is_some() {
            return Ok(0);
        }
        let mut given = vec![false; t.columns.len()];
        for &c in targets.iter().filter(|&&c| c != usize::MAX) {
            given[c] = true;
        }
        // The row with its rowid, for triggers and RETURNING: made only when one reads it.
        let wants_full =
            !ins.returning.is_empty() || self.schema.triggers_of(&t.name).next().is_some();
        let mut count = 0;
        for src in source_rows {
            let mut row = vec![Value::Null; t.columns.len()];
            let mut explicit_rowid: Option<Value> = None;
            for (v, &c) in src.into_iter().zip(&targets) {
                if c == usize::MAX {
                    explicit_rowid = Some(v);
                } else {
                    row[c] = v;
                }
            }
            let empty = Frame::default();
            let sc = Scope::new(&empty, &[], None);
            for (i, c) in t.columns.iter().enumerate() {
                if !given[i] {
                    if let Some(d) = &c.default {
                        row[i] = self.eval(d, &sc)?;
                    }
                }
                row[i] = c.affinity.apply(std::mem::take(&mut row[i]));
            }
            let rowid_value = match t.rowid_alias {
                Some(a) if !row[a].is_null() => Some(row[a].clone()),
                _ => explicit_rowid.filter(|v| !v.is_null()),
            };
            // A rowid past every one this transaction sees cannot be taken already.
            let fresh = rowid_value.is_none();
            let rowid = match rowid_value {
                Some(Value::Integer(i)) => i,
                Some(other) => match Affinity::Integer.apply(other) {
                    Value::Integer(i) => i,
                    _ => {
                        return Err(Error::Sql("datatype mismatch".into()));
                    }
                },
                None => self.new_rowid(&t)?,
            };
            if let Some(a) = t.rowid_alias {
                row[a] = Value::Integer(rowid);
            }
            self.fill_generated(&t, &mut row, rowid)?;
            let mut new_full = Vec::new();
            if wants_full {
                new_full.reserve_exact(row.len() + 1);
                new_full.extend_from_slice(&row);
                new_full.push(Value::Integer(rowid));
            }
            if wants_full
                && !self.fire(
                    &t,
                    TriggerTime::Before,
                    &TriggerEvent::Insert,
                    None,
                    Some(&new_full),
                    &[],
                )?
            {
                continue;
            }
            if !self.check_row(&t, &mut row, rowid, ins.conflict)? {
                continue;
            }
            // The rowid and the unique indexes: an ON CONFLICT clause, or the statement's
            // conflict resolution.
            let mut skip = false;
            loop {
                let taken = !fresh && self.read_row(&t, rowid)?.is_some();
                let found = match taken {
                    true => Some((rowid, None)),
                    false => self
                        .unique_conflict(&t, &row, rowid)?
                        .map(|(o, i)| (o, Some(i))),
                };
                let Some((other, idx)) = found else { break };
                if let Some(u) = ins
                    .upsert
                    .iter()
                    .find(|u| Self::upsert_matches(&t, u, idx.as_deref()))
                {
                    if let Some((sets, where_)) = &u.update {
                        let up = (&sets[..], where_.as_ref());
                        if self.upsert_update(&t, other, &row, up, &ins.returning)? {
                            count += 1;
                        }
                    }
                    skip = true;
                    break;
                }
                match ins.conflict {
                    Conflict::Replace => {
                        let old = self.read_row(&t, other)?.unwrap_or_default();
                        self.delete_row(&t, other, &old)?;
                    }
                    Conflict::Ignore => {
                        skip = true;
                        break;
                    }
                    _ => {
                        return Err(match idx {
                            Some(idx) => self.unique_error(&t, &idx),
                            None => Error::Constraint(
                                if t.rowid_alias.is_some() {
                                    ConstraintKind::PrimaryKey
                                } else {
                                    ConstraintKind::RowId
                                },
                                match t.rowid_alias {
                                    Some(a) => format!(
                                        "UNIQUE constraint failed: {}.{}",
                                        t.name, t.columns[a].name
                                    ),
                                    None => format!("UNIQUE constraint failed: {}.rowid", t.name),
                                },
                            ),
                        })
                    }
                }
            }
            if skip {
                continue;
            }
            self.write_row(&t, rowid, &row)?;
            self.check_parents(&t, &row)?;
            *self.last_rowid = rowid;
            count += 1;
            if wants_full {
                self.emit_returning(&t, &ins.returning, &new_full)?;
                self.fire(
                    &t,
                    TriggerTime::After,
                    &TriggerEvent::Insert,
                    None,
                    Some(&new_full),
                    &[],
                )?;
            }
        }
        self.changes = count;
        Ok(count)
    }

    fn insert_into_view(&mut self, v: &View, ins: &Insert, outer: Option<&Scope>) -> Result<u64> {
        let triggers: Vec<Arc<Trigger>> = self
            .schema
            .triggers_of(&v.name)
            .filter(|t| t.def.time == TriggerTime::InsteadOf && t.def.event == TriggerEvent::Insert)
            .cloned()
            .collect();
        if triggers.is_empty() {
            return Err(Error::Sql(format!(
                "cannot modify {} because it is a view",
                v.name
            )));
        }
        let cols = self.view_columns(v)?;
        let rows = match &ins.source {
            Some(sel) => self.select(sel, outer)?.rows,
            None => vec![vec![Value::Null; cols.len()]],
        };
        let mut frame = Frame::default();
        frame.push("old", cols.clone(), false);
        frame.push("new", cols.clone(), false);
        let mut n = 0;
        for r in rows {
            let mut new_row = vec![Value::Null; cols.len()];
            match &ins.columns {
                None => new_row = r,
                Some(names) => {
                    for (val, name) in r.into_iter().zip(names) {
                        let i = cols
                            .iter()
                            .position(|c| c.name.eq_ignore_ascii_case(name))
                            .ok_or_else(|| {
                                Error::Sql(format!("table {} has no column named {name}", v.name))
                            })?;
                        new_row[i] = val;
                    }
                }
            }
            let mut row = vec![Value::Null; cols.len()];
            row.extend(new_row);
            for tr in &triggers {
                self.trigger_depth += 1;
                let mut res = Ok(());
                for stmt in &tr.def.body {
                    res = self.run_in_trigger(stmt, &frame, &row);
                    if res.is_err() {
                        break;
                    }
                }
                self.trigger_depth -= 1;
                res?;
            }
            n += 1;
        }
        self.changes = n;
        Ok(n)
    }

    fn view_columns(&self, v: &View) -> Result<Vec<crate::exec::SrcCol>> {
        self.view_select_columns(v)
    }

    // ---- UPDATE and DELETE ----

    /// The rows of `t` matching `where_` (with their rowids last).
    fn matching_rows(
        &mut self,
        t: &Table,
        where_: Option<&Expr>,
        outer: Option<&Scope>,
        plan: PlanId,
    ) -> Result<Vec<Row>> {
        Ok(self
            .joined_rows(&From::table(&t.name), None, where_, outer, plan)?
            .1)
    }

    /// The rows of `from` satisfying `where_`, and the plan (with the frame) that read
    /// them. With `target_width` (an UPDATE FROM's: `from` joins the target table, first,
    /// with the FROM items), only the first joined row of each target row: SQLite, too,
    /// uses one of them, which one unspecified.
    fn joined_rows(
        &mut self,
        from: &From,
        target_width: Option<usize>,
        where_: Option<&Expr>,
        outer: Option<&Scope>,
        plan: PlanId,
    ) -> Result<(Arc<CorePlan>, Vec<Row>)> {
        let plan = self.cached_plan(plan, |me| me.plan_from(from, where_))?;
        let mut seen = rustc_hash::FxHashSet::default();
        let mut out = Vec::new();
        self.source_rows(
            Some(from),
            plan.join.as_ref(),
            &plan.frame,
            where_,
            outer,
            &mut |_, r| {
                if target_width.is_none_or(|n| seen.insert(r[n].as_i64())) {
                    out.push(r.to_vec());
                }
                Ok(true)
            },
        )?;
        Ok((plan, out))
    }

    /// Replaces row `old_rowid` (now `current`) of `t` with `new_row` at `new_rowid`:
    /// triggers, constraints, conflicts by `conflict`. Returns the new row with its rowid,
    /// or `None` when it was skipped (OR IGNORE, a trigger's RAISE(IGNORE)).
    #[allow(clippy::too_many_arguments)]
    fn apply_update(
        &mut self,
        t: &Table,
        old_rowid: i64,
        current: Row,
        mut new_row: Row,
        new_rowid: i64,
        changed: &[usize],
        conflict: Conflict,
    ) -> Result<Option<Row>> {
        self.fill_generated(t, &mut new_row, new_rowid)?;
        let mut cur_full = current.clone();
        cur_full.push(Value::Integer(old_rowid));
        let mut new_full = new_row.clone();
        new_full.push(Value::Integer(new_rowid));
        let event = TriggerEvent::Update(None);
        if !self.fire(
            t,
            TriggerTime::Before,
            &event,
            Some(&cur_full),
            Some(&new_full),
            changed,
        )? {
            return Ok(None);
        }
        if !self.check_row(t, &mut new_row, new_rowid, conflict)? {
            return Ok(None);
        }
        if new_rowid != old_rowid {
            if let Some(existing) = self.read_row(t, new_rowid)? {
                match conflict {
                    Conflict::Replace => self.delete_row(t, new_rowid, &existing)?,
                    Conflict::Ignore => return Ok(None),
                    _ => {
                        return Err(Error::Constraint(
                            ConstraintKind::PrimaryKey,
                            format!("UNIQUE constraint failed: {}.rowid", t.name),
                        ))
                    }
                }
            }
        }
        loop {
            match self.unique_conflict(t, &new_row, new_rowid)? {
                Some((other, _)) if other == old_rowid => break,
                None => break,
                Some((other, idx)) => match conflict {
                    Conflict::Replace => {
                        let o = self.read_row(t, other)?.unwrap_or_default();
                        self.delete_row(t, other, &o)?;
                    }
                    Conflict::Ignore => return Ok(None),
                    _ => return Err(self.unique_error(t, &idx)),
                },
            }
        }
        self.act_on_children(t, &current, Some(&new_row))?;
        if new_rowid == old_rowid {
            self.replace_row(t, old_rowid, &current, &new_row)?;
        } else {
            self.remove_row(t, old_rowid, &current)?;
            self.write_row(t, new_rowid, &new_row)?;
        }
        self.check_parents(t, &new_row)?;
        let new_full = {
            let mut f = new_row;
            f.push(Value::Integer(new_rowid));
            f
        };
        self.fire(
            t,
            TriggerTime::After,
            &event,
            Some(&cur_full),
            Some(&new_full),
            changed,
        )?;
        Ok(Some(new_full))
    }

    /// Evaluates RETURNING's columns over `full` (a row of `t` with its rowid last) and keeps
    /// them in `self.returned`.
    fn emit_returning(&mut self, t: &Table, cols: &[ResultColumn], full: &[Value]) -> Result<()> {
        if cols.is_empty() {
            return Ok(());
        }
        // Each row's RETURNING is a run of its own, as a trigger's statement is (SQLite
        // runs its subqueries again for each row).
        let back_to = self.subqueries.begin_run();
        let r = self.returning_row(t, cols, full);
        self.subqueries.end_run(back_to);
        r
    }

    fn returning_row(&mut self, t: &Table, cols: &[ResultColumn], full: &[Value]) -> Result<()> {
        let mut frame = Frame::default();
        frame.push(&t.name, table_columns(t), true);
        let sc = Scope::new(&frame, full, None);
        let (mut names, mut row) = (Vec::new(), Vec::new());
        for rc in cols {
            match rc {
                ResultColumn::Star | ResultColumn::TableStar(_) => {
                    for (i, c) in t.columns.iter().enumerate() {
                        names.push(c.name.clone());
                        row.push(full[i].clone());
                    }
                }
                ResultColumn::Expr(e, alias) => {
                    names.push(alias.clone().unwrap_or_else(|| crate::exec::expr_name(e)));
                    row.push(self.eval(e, &sc)?);
                }
            }
        }
        self.returned.columns = names.into();
        self.returned.decl_types = vec![None; row.len()].into();
        self.returned.rows.push(row);
        Ok(())
    }

    /// Whether ON CONFLICT clause `u` names the conflict on `idx` (`None`: the rowid).
    fn upsert_matches(t: &Table, u: &Upsert, idx: Option<&Index>) -> bool {
        let Some(target) = &u.target else { return true };
        let mut want: Vec<String> = target.iter().map(|c| lc(c)).collect();
        want.sort();
        let mut have: Vec<String> = match idx {
            None => match t.rowid_alias {
                Some(a) => vec![lc(&t.columns[a].name)],
                None => vec!["rowid".into()],
            },
            // A conflict target names columns, never an index's expressions.
            Some(i) if !i.exprs.is_empty() => return false,
            Some(i) => i
                .columns
                .iter()
                .map(|&(c, _, _)| lc(&t.columns[c].name))
                .collect(),
        };
        have.sort();
        want == have
    }

    /// `DO UPDATE SET ... [WHERE ...]` on row `rowid` of `t`, with `excluded` the row that
    /// was to be inserted.
    fn upsert_update(
        &mut self,
        t: &Table,
        rowid: i64,
        excluded: &[Value],
        (sets, where_): (&[(Vec<String>, Expr)], Option<&Expr>),
        returning: &[ResultColumn],
    ) -> Result<bool> {
        let Some(current) = self.read_row(t, rowid)? else {
            return Ok(false);
        };
        let mut frame = Frame::default();
        frame.push(&t.name, table_columns(t), true);
        // Unqualified names are the table's; `excluded.x` the row that was to be inserted.
        let excluded_cols = table_columns(t)
            .into_iter()
            .map(|c| crate::exec::SrcCol { hidden: true, ..c })
            .collect();
        frame.push("excluded", excluded_cols, true);
        let mut row = current.clone();
        row.push(Value::Integer(rowid));
        row.extend(excluded.iter().cloned());
        row.push(Value::Null);
        let sc = Scope::new(&frame, &row, None);
        if let Some(w) = where_ {
            if self.eval(w, &sc)?.truth() != Some(true) {
                return Ok(false);
            }
        }
        let mut new_row = current.clone();
        let mut changed = Vec::new();
        for (i, v) in self.assigned_values(&assigned_columns(t, sets)?, &sc)? {
            if i == usize::MAX {
                return Err(Error::Unsupported("setting the rowid in an upsert".into()));
            }
            new_row[i] = t.columns[i].affinity.apply(v);
            changed.push(i);
        }
        let new_rowid = match t.rowid_alias {
            Some(a) => match &new_row[a] {
                Value::Integer(r) => *r,
                _ => return Err(Error::Sql("datatype mismatch".into())),
            },
            None => rowid,
        };
        match self.apply_update(
            t,
            rowid,
            current,
            new_row,
            new_rowid,
            &changed,
            Conflict::Abort,
        )? {
            Some(full) => {
                self.emit_returning(t, returning, &full)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// The values SET's assignments (resolved by `assigned_columns`) give, in scope `sc`.
    fn assigned_values(
        &mut self,
        sets: &[(Vec<usize>, &Expr)],
        sc: &Scope,
    ) -> Result<Vec<(usize, Value)>> {
        let mut values = Vec::with_capacity(sets.len());
        for (columns, e) in sets {
            match (&columns[..], e) {
                ([i], _) => values.push((*i, self.eval(e, sc)?)),
                (_, Expr::Subquery(sel)) => {
                    let r = self.select(sel, Some(sc))?;
                    if r.columns.len() != columns.len() {
                        return Err(Error::Sql(format!(
                            "sub-select returns {} columns - expected {}",
                            r.columns.len(),
                            columns.len()
                        )));
                    }
                    let row = r.rows.into_iter().next();
                    let row = row.unwrap_or_else(|| vec![Value::Null; columns.len()]);
                    values.extend(columns.iter().copied().zip(row));
                }
                _ => unreachable!("parsing splits a row value into single assignments"),
            }
        }
        Ok(values)
    }

    pub fn update(&mut self, u: &Update, outer: Option<&Scope>) -> Result<u64> {
        self.with_ctes(&u.with, outer, |me| me.update_rows(u, outer))
    }

    fn update_rows(&mut self, u: &Update, outer: Option<&Scope>) -> Result<u64> {
        if self.schema.views.contains_key(&lc(&u.table)) {
            return Err(Error::Sql(format!(
                "cannot modify {} because it is a view",
                u.table
            )));
        }
        if is_sequence_table(&u.table) {
            let seq = match u.sets.as_slice() {
                [(cols, e)] if matches!(cols.as_slice(), [c] if c.eq_ignore_ascii_case("seq")) => e,
                _ => {
                    return Err(Error::Unsupported(
                        "an UPDATE of sqlite_sequence other than SET seq = ...".into(),
                    ))
                }
            };
            return self.change_sequence(u.where_.as_ref(), Some(seq), outer);
        }
        let t = self.schema.table(&u.table)?.clone();
        let sets = assigned_columns(&t, &u.sets)?;
        let changed: Vec<usize> = sets.iter().flat_map(|(c, _)| c.iter().copied()).collect();
        let n = t.columns.len();
        // The rows to change; with FROM, each in the first joined row that matched it (the
        // target's columns and rowid first), where its new values are computed.
        let single;
        let from = match &u.from {
            Some(f) => f,
            None => {
                single = From::table(&t.name);
                &single
            }
        };
        let target_width = u.from.as_ref().map(|_| n);
        let (plan, rows) =
            self.joined_rows(from, target_width, u.where_.as_ref(), outer, u.plan)?;
        let mut count = 0;
        for (i, mut joined) in rows.into_iter().enumerate() {
            let old_rowid = joined[n].as_i64();
            let old_full = match target_width {
                Some(_) => joined[..=n].to_vec(),
                None => std::mem::take(&mut joined),
            };
            let Some((current, cur_full)) = self.current_row(&t, i, old_full)? else {
                continue;
            };
            let mut new_row = current.clone();
            let mut new_rowid = old_rowid;
            {
                let row = match target_width {
                    Some(_) => {
                        joined[..=n].clone_from_slice(&cur_full);
                        &joined
                    }
                    None => &cur_full,
                };
                let sc = Scope::new(&plan.frame, row, outer);
                for (i, v) in self.assigned_values(&sets, &sc)? {
                    if i == usize::MAX {
                        new_rowid = match Affinity::Integer.apply(v) {
                            Value::Integer(r) => r,
                            _ => return Err(Error::Sql("datatype mismatch".into())),
                        };
                    } else {
                        new_row[i] = t.columns[i].affinity.apply(v);
                    }
                }
            }
            if let Some(a) = t.rowid_alias {
                match &new_row[a] {
                    Value::Integer(r) => new_rowid = *r,
                    Value::Null => new_row[a] = Value::Integer(new_rowid),
                    _ => return Err(Error::Sql("datatype mismatch".into())),
                }
            }
            if let Some(new_full) = self.apply_update(
                &t, old_rowid, current, new_row, new_rowid, &changed, u.conflict,
            )? {
                count += 1;
                self.emit_returning(&t, &u.returning, &new_full)?;
            }
        }
        self.changes = count;
        Ok(count)
    }

    pub fn delete(
        &mut self,
        table: &str,
        where_: Option<&Expr>,
        returning: &[ResultColumn],
        outer: Option<&Scope>,
        plan: PlanId,
    ) -> Result<u64> {
        if self.schema.views.contains_key(&lc(table)) {
            return Err(Error::Sql(format!(
                "cannot modify {table} because it is a view"
            )));
        }
        if is_sequence_table(table) {
            return self.change_sequence(where_, None, outer);
        }
        let t = self.schema.table(table)?.clone();
        let rows = self.matching_rows(&t, where_, outer, plan)?;
        let n = t.columns.len();
        let mut count = 0;
        for (i, full) in rows.into_iter().enumerate() {
            let rowid = full[n].as_i64();
            let Some((current, cur_full)) = self.current_row(&t, i, full)? else {
                continue;
            };
            if !self.fire(
                &t,
                TriggerTime::Before,
                &TriggerEvent::Delete,
                Some(&cur_full),
                None,
                &[],
            )? {
                continue;
            }
            if self.read_row(&t, rowid)?.is_none() {
                continue;
            }
            self.act_on_children(&t, &current, None)?;
            self.delete_row(&t, rowid, &current)?;
            count += 1;
            self.emit_returning(&t, returning, &cur_full)?;
            self.fire(
                &t,
                TriggerTime::After,
                &TriggerEvent::Delete,
                Some(&cur_full),
                None,
                &[],
            )?;
        }
        self.changes = count;
        Ok(count)
    }

    // ---- DDL ----

    /// Whether `name` is free for a new object: `Ok(false)` when it is taken and `IF NOT
    /// EXISTS` was given (nothing to do), an error when it is taken otherwise.
    fn name_free(&self, name: &str, if_not_exists: bool) -> Result<bool> {
        match self.schema.name_taken(name) {
            None => Ok(true),
            Some(_) if if_not_exists => Ok(false),
            Some(kind) => Err(Error::Sql(format!("{kind} {name} already exists"))),
        }
    }

    pub fn create_table(&mut self, ct: &CreateTable) -> Result<()> {
        if !self.name_free(&ct.name, ct.if_not_exists)? {
            return Ok(());
        }
        if ct.name.to_ascii_lowercase().starts_with("sqlite_") {
            return Err(Error::Sql(format!(
                "object name reserved for internal use: {}",
                ct.name
            )));
        }
        let mut def = ct.clone();
        let rows = match &ct.as_select {
            Some(sel) => {
                let r = self.select(sel, None)?;
                def.columns = r
                    .columns
                    .iter()
                    .zip(r.decl_types.iter())
                    .map(|(n, d)| {
                        let decl = d.as_ref().map(|d| match Affinity::of_declared(Some(d)) {
                            Affinity::Integer => "INT".into(),
                            Affinity::Text => "TEXT".into(),
                            Affinity::Real => "REAL".into(),
                            Affinity::Numeric => "NUM".into(),
                            Affinity::Blob => "".into(),
                        });
                        ColumnDef::plain(n.clone(), decl)
                    })
                    .collect();
                def.sql = select_table_text(&ct.name, &def.columns);
                Some(r.rows)
            }
            None => None,
        };
        let (table, indexes) = self.schema_mut().build_table(&def)?;
        let handle = self.txn.create_db(&table.db)?;
        self.dbs.insert(table.db.clone(), handle);
        let seq = self.place(&table.name, None);
        self.put_entry(&table.name, table_entry(&table, &table.sql, seq))?;
        for i in &indexes {
            let handle = self.txn.create_db(&i.db)?;
            self.dbs.insert(i.db.clone(), handle);
            let seq = self.place(&i.name, None);
            self.put_entry(
                &i.name,
                schema_entry("index", &i.name, &table.name, &i.db, "", seq),
            )?;
        }
        self.save_meta()?;
        let table = Arc::new(table);
        {
            let s = self.schema_mut();
            s.tables.insert(lc(&table.name), table.clone());
            for i in indexes {
                s.indexes.insert(lc(&i.name), Arc::new(i));
            }
        }
        if let Some(rows) = rows {
            for (n, r) in rows.into_iter().enumerate() {
                let row: Row = r
                    .into_iter()
                    .zip(&table.columns)
                    .map(|(v, c)| c.affinity.apply(v))
                    .collect();
                self.write_row(&table, n as i64 + 1, &row)?;
            }
        }
        Ok(())
    }

    pub fn create_index(&mut self, stmt: &Stmt) -> Result<()> {
        let Stmt::CreateIndex {
            name,
            table,
            unique,
            if_not_exists,
            columns,
            where_,
            sql,
        } = stmt
        else {
            unreachable!()
        };
        if !self.name_free(name, *if_not_exists)? {
            return Ok(());
        }
        let t = self.schema.table(table)?.clone();
        let (cols, exprs) = index_columns(&t, columns)?;
        if let Some(w) = where_ {
            crate::schema::check_index_expr(&t, w, "partial index WHERE clauses")?;
        }
        let db = self.schema_mut().new_db("i");
        let index = Index {
            name: name.clone(),
            table: t.name.clone(),
            columns: cols,
            exprs,
            unique: *unique,
            auto: false,
            primary: false,
            db: db.clone(),
            sql: Some(sql.clone()),
            where_: where_.clone(),
        };
        let handle = self.txn.create_db(&db)?;
        self.dbs.insert(db.clone(), handle);
        let seq = self.place(name, None);
        self.put_entry(name, schema_entry("index", name, &t.name, &db, sql, seq))?;
        self.save_meta()?;
        self.fill_index(&t, &index)?;
        self.schema_mut().indexes.insert(lc(name), Arc::new(index));
        Ok(())
    }

    /// Writes `index`'s entries for every row of `t`, into an index database with no
    /// entries (made, or emptied by REINDEX, in this transaction). The table is read a row
    /// at a time, decoding only the columns a plain index holds; entries are written in
    /// key order, a batch at a time, in one step each (`Txn::put_sorted`; a UNIQUE index's
    /// duplicates within a batch are neighbours, found before any is written).
    fn fill_index(&mut self, t: &Table, index: &Index) -> Result<()> {
        const BATCH: usize = 1 << 18;
        let idb = self.db(&index.db)?;
        let tdb = self.db(&t.db)?;
        let n = t.columns.len();
        let plain = index.exprs.is_empty() && index.where_.is_none();
        let wanted: Option<Vec<bool>> = plain.then(|| {
            let mut w = vec![false; n];
            for &(c, ..) in &index.columns {
                w[c] = true;
            }
            w
        });
        let mut row = vec![Value::Null; n + 1];
        let mut batch: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        // The first batch meets an index with no entries.
        let mut first = true;
        let mut rows = self.txn.iter(&tdb);
        loop {
            let done = match rows.next_ref() {
                Some(kv) => {
                    let (k, v) = kv?;
                    let rowid = rowid_of_key(k)?;
                    t.read_into(rowid, v, &mut row, wanted.as_deref())?;
                    if let Some(entry) = self.index_entry(t, index, &row, rowid)? {
                        batch.push(entry);
                    }
                    false
                }
                None => true,
            };
            if batch.len() < BATCH && !done {
                continue;
            }
            batch.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            // Neighbours with the same key, the second a UNIQUE key (no NULL in it).
            let repeated = |w: &[(Vec<u8>, Vec<u8>)]| !w[1].1.is_empty() && w[0].0 == w[1].0;
            if batch.windows(2).any(repeated) {
                return Err(self.unique_error(t, index));
            }
            if !first {
                for (k, v) in &batch {
                    // A UNIQUE key may repeat one of an earlier batch.
                    if !v.is_empty() && self.txn.get(&idb, k)?.is_some() {
                        return Err(self.unique_error(t, index));
                    }
                }
            }
            first = false;
            self.txn.put_sorted(&idb, std::mem::take(&mut batch))?;
            if done {
                return Ok(());
            }
        }
    }

    pub fn create_view(&mut self, stmt: &Stmt) -> Result<()> {
        let Stmt::CreateView {
            name,
            if_not_exists,
            columns,
            select,
            sql,
        } = stmt
        else {
            unreachable!()
        };
        if !self.name_free(name, *if_not_exists)? {
            return Ok(());
        }
        let view = View {
            name: name.clone(),
            columns: columns.clone(),
            select: (**select).clone(),
            sql: sql.clone(),
        };
        // The view must name existing tables and columns.
        self.schema_mut()
            .views
            .insert(lc(name), Arc::new(view.clone()));
        if let Err(e) = self.view_select_columns(&view) {
            self.schema_mut().views.remove(&lc(name));
            return Err(e);
        }
        let seq = self.place(name, None);
        self.put_entry(name, schema_entry("view", name, name, "", sql, seq))
    }

    pub fn view_select_columns(&self, v: &View) -> Result<Vec<crate::exec::SrcCol>> {
        self.select_columns(&v.select, v.columns.as_deref())
    }

    pub fn create_trigger(&mut self, ct: &CreateTrigger) -> Result<()> {
        if self.schema.triggers.contains_key(&lc(&ct.name)) {
            if ct.if_not_exists {
                return Ok(());
            }
            return Err(Error::Sql(format!("trigger {} already exists", ct.name)));
        }
        let on_view = self.schema.views.contains_key(&lc(&ct.table));
        if !on_view {
            self.schema.table(&ct.table)?;
        }
        if on_view && ct.time != TriggerTime::InsteadOf {
            return Err(Error::Sql(format!(
                "cannot create {} trigger on view: {}",
                if ct.time == TriggerTime::Before {
                    "BEFORE"
                } else {
                    "AFTER"
                },
                ct.table
            )));
        }
        if !on_view && ct.time == TriggerTime::InsteadOf {
            return Err(Error::Sql(format!(
                "cannot create INSTEAD OF trigger on table: {}",
                ct.table
            )));
        }
        let seq = self.place(&ct.name, None);
        self.put_entry(
            &ct.name,
            schema_entry("trigger", &ct.name, &ct.table, "", &ct.sql, seq),
        )?;
        self.schema_mut().triggers.insert(
            lc(&ct.name),
            Arc::new(Trigger {
                name: ct.name.clone(),
                def: ct.clone(),
            }),
        );
        Ok(())
    }

    pub fn drop_object(&mut self, kind: ObjectKind, name: &str, if_exists: bool) -> Result<()> {
        let key = lc(name);
        let exists = match kind {
            ObjectKind::Table => self.schema.tables.contains_key(&key),
            ObjectKind::Index => self.schema.indexes.contains_key(&key),
            ObjectKind::View => self.schema.views.contains_key(&key),
            ObjectKind::Trigger => self.schema.triggers.contains_key(&key),
        };
        if !exists {
            if if_exists {
                return Ok(());
            }
            let what = match kind {
                ObjectKind::Table => "table",
                ObjectKind::Index => "index",
                ObjectKind::View => "view",
                ObjectKind::Trigger => "trigger",
            };
            return Err(Error::Sql(format!("no such {what}: {name}")));
        }
        match kind {
            ObjectKind::Table => {
                let t = self.schema.tables[&key].clone();
                if name.to_ascii_lowercase().starts_with("sqlite_") {
                    return Err(Error::Sql(format!("table {name} may not be dropped")));
                }
                for i in self.schema.indexes_of(&t.name).cloned().collect::<Vec<_>>() {
                    self.txn.remove_db(&i.db)?;
                    self.remove_entry(&i.name)?;
                    self.schema_mut().indexes.remove(&lc(&i.name));
                }
                for tr in self
                    .schema
                    .triggers_of(&t.name)
                    .cloned()
                    .collect::<Vec<_>>()
                {
                    self.remove_entry(&tr.name)?;
                    self.schema_mut().triggers.remove(&lc(&tr.name));
                }
                self.txn.remove_db(&t.db)?;
                self.remove_entry(&t.name)?;
                let db = self.schema_db()?;
                self.txn.delete(&db, &sequence_key(&t))?;
                self.schema_mut().tables.remove(&key);
            }
            ObjectKind::Index => {
                let i = self.schema.indexes[&key].clone();
                if i.auto {
                    return Err(Error::Sql(
                        "index associated with UNIQUE or PRIMARY KEY constraint cannot be dropped"
                            .into(),
                    ));
                }
                self.txn.remove_db(&i.db)?;
                self.remove_entry(name)?;
                self.schema_mut().indexes.remove(&key);
            }
            ObjectKind::View => {
                for tr in self.schema.triggers_of(name).cloned().collect::<Vec<_>>() {
                    self.remove_entry(&tr.name)?;
                    self.schema_mut().triggers.remove(&lc(&tr.name));
                }
                self.remove_entry(name)?;
                self.schema_mut().views.remove(&key);
            }
            ObjectKind::Trigger => {
                self.remove_entry(name)?;
                self.schema_mut().triggers.remove(&key);
            }
        }
        Ok(())
    }

    pub fn alter_table(&mut self, table: &str, action: &AlterAction) -> Result<()> {
        if lc(table).starts_with("sqlite_") {
            let name = match lc(table).as_str() {
                "sqlite_schema" | "sqlite_master" => "sqlite_master",
                _ => table,
            };
            return Err(Error::Sql(format!("table {name} may not be altered")));
        }
        let t = self.schema.table(table)?.clone();
        match action {
            AlterAction::RenameTo(new) => {
                if self.schema.name_taken(new).is_some() {
                    return Err(Error::Sql(format!(
                        "there is already another table or index with this name: {new}"
                    )));
                }
                if let Some((kind, name)) = self.view_or_trigger_naming(&t, None)? {
                    return Err(Error::Unsupported(format!(
                        "renaming table {}, which {kind} {name} may name (drop the {kind}, \
                         rename, and create it again)",
                        t.name
                    )));
                }
                let mut edits = Vec::new();
                self.remove_entry(&t.name)?;
                let seq = self.place(new, Some(&t.name));
                for other in self.schema.tables.values() {
                    let sql = alter::rename_table(&other.sql, &t.name, new)?;
                    if Arc::ptr_eq(other, &t) {
                        let sql = sql.unwrap_or_else(|| t.sql.clone());
                        edits.push(schema_entry("table", new, new, &t.db, &sql, seq));
                    } else if let Some(sql) = sql {
                        edits.push(table_entry(other, &sql, self.seq_of(&other.name)));
                    }
                }
                for i in self.schema.indexes_of(&t.name).cloned().collect::<Vec<_>>() {
                    self.remove_entry(&i.name)?;
                    let (name, sql) = match &i.sql {
                        // A constraint's index is named after its table.
                        None => (
                            i.name.replacen(
                                &format!("sqlite_autoindex_{}_", t.name),
                                &format!("sqlite_autoindex_{new}_"),
                                1,
                            ),
                            String::new(),
                        ),
                        Some(sql) => (
                            i.name.clone(),
                            alter::rename_table(sql, &t.name, new)?.unwrap_or_else(|| sql.clone()),
                        ),
                    };
                    let seq = self.place(&name, Some(&i.name));
                    edits.push(schema_entry("index", &name, new, &i.db, &sql, seq));
                }
                self.replace_entries(edits)?;
            }
            AlterAction::AddColumn(col, text) => {
                if t.column_index(&col.name).is_some() {
                    return Err(Error::Sql(format!("duplicate column name: {}", col.name)));
                }
                if col.primary_key.is_some() || col.unique {
                    return Err(Error::Sql(
                        "Cannot add a PRIMARY KEY or UNIQUE column".into(),
                    ));
                }
                match &col.generated {
                    Some((_, true)) => {
                        return Err(Error::Sql("cannot add a STORED column".into()));
                    }
                    // Its value is computed for every row below, and checked.
                    Some((_, false)) => {}
                    None if col.not_null && col.default.is_none() => {
                        return Err(Error::Sql(
                            "Cannot add a NOT NULL column with default value NULL".into(),
                        ));
                    }
                    None => {}
                }
                let end = alter::columns_end(&t.sql)?;
                let sql = format!("{}, {text}{}", &t.sql[..end], &t.sql[end..]);
                let (table, _) = Schema::defined_by(&sql, &t.db).map_err(|e| match e {
                    Error::Sql(m) => {
                        Error::Sql(format!("error in table {} after add column: {m}", t.name))
                    }
                    e => e,
                })?;
                let table = Arc::new(table);
                if col.generated.is_some() {
                    // SQLite computes a VIRTUAL column when it is read; BeechDB stores it.
                    self.rewrite_rows(&table, |me, rowid, stored| {
                        let mut row = table.row_from(rowid, stored)?;
                        me.fill_generated(&table, &mut row, rowid)?;
                        me.check_row(&table, &mut row, rowid, Conflict::Abort)?;
                        me.put_record(&table, rowid, &row)
                    })?;
                }
                self.put_entry(&t.name, table_entry(&t, &sql, self.seq_of(&t.name)))?;
                self.schema_mut().tables.insert(lc(&t.name), table);
            }
            AlterAction::RenameColumn { old, new } => self.rename_column(&t, old, new)?,
            AlterAction::DropColumn(column) => self.drop_column(&t, column)?,
        }
        Ok(())
    }

    /// Renames a column in the schema's text: the table's definition, its indexes', and
    /// other tables' references to it (the rows need no change: a row's values are by
    /// position).
    fn rename_column(&mut self, t: &Table, old: &str, new: &str) -> Result<()> {
        let Some(c) = t.column_index(old) else {
            return Err(Error::Sql(format!("no such column: \"{old}\"")));
        };
        if t.column_index(new).is_some_and(|o| o != c) {
            return Err(Error::Sql(format!(
                "error in table {} after rename: duplicate column name: {new}",
                t.name
            )));
        }
        if let Some((kind, name)) = self.view_or_trigger_naming(t, Some(old))? {
            return Err(Error::Unsupported(format!(
                "renaming column {old} of {}, which {kind} {name} may name (drop the {kind}, \
                 rename, and create it again)",
                t.name
            )));
        }
        let mut edits = Vec::new();
        for other in self.schema.tables.values() {
            if let Some(sql) = alter::rename_in_table(&other.sql, &other.name, &t.name, old, new)? {
                edits.push(table_entry(other, &sql, self.seq_of(&other.name)));
            }
        }
        for i in self.schema.indexes_of(&t.name) {
            if let Some(sql) = i.sql.as_deref() {
                if let Some(sql) = alter::rename_in_index(sql, &t.name, old, new)? {
                    let seq = self.seq_of(&i.name);
                    edits.push(schema_entry("index", &i.name, &t.name, &i.db, &sql, seq));
                }
            }
        }
        self.replace_entries(edits)
    }

    /// Drops a column: refused, in SQLite's words, while anything but its own definition
    /// names it; else its definition is cut from the table's text and its value from every
    /// row.
    fn drop_column(&mut self, t: &Table, column: &str) -> Result<()> {
        let Some(c) = t.column_index(column) else {
            return Err(Error::Sql(format!("no such column: \"{column}\"")));
        };
        let in_constraint = |primary: bool| {
            self.schema
                .indexes_of(&t.name)
                .any(|i| i.auto && i.primary == primary && i.columns.iter().any(|k| k.0 == c))
        };
        if t.rowid_alias == Some(c) || in_constraint(true) {
            return Err(Error::Sql(format!(
                "cannot drop PRIMARY KEY column: \"{column}\""
            )));
        }
        if in_constraint(false) {
            return Err(Error::Sql(format!(
                "cannot drop UNIQUE column: \"{column}\""
            )));
        }
        if t.columns.len() == 1 {
            return Err(Error::Sql(format!(
                "cannot drop column \"{column}\": no other columns exist"
            )));
        }
        let (definition, cut) = alter::column_definition(&t.sql, column)?
            .ok_or_else(|| Error::Sql(format!("malformed schema of table {}", t.name)))?;
        let named_by = |kind: &str, name: &str| {
            Error::Sql(format!(
                "error in {kind} {name} after drop column: no such column: {column}"
            ))
        };
        let sql = format!("{}{}", &t.sql[..cut.start], &t.sql[cut.end..]);
        // Key and foreign key lists are checked as the text is read again; CHECKs, by name.
        Schema::defined_by(&sql, &t.db)
            .map_err(|e| Error::Sql(format!("error in table {} after drop column: {e}", t.name)))?;
        if alter::table_names_elsewhere(&t.sql, &t.name, &t.name, column, Some(&definition))? {
            return Err(named_by("table", &t.name));
        }
        for i in self.schema.indexes_of(&t.name) {
            if let Some(sql) = i.sql.as_deref() {
                if alter::index_names(sql, &t.name, column)? {
                    return Err(named_by("index", &i.name));
                }
            }
        }
        if let Some((kind, name)) = self.view_or_trigger_naming(t, Some(column))? {
            return Err(named_by(kind, &name));
        }
        let db = self.db(&t.db)?;
        self.rewrite_rows(t, |me, rowid, stored| {
            let mut values = crate::record::decode_row(stored, t.columns.len())?;
            if c < values.len() {
                values.remove(c);
                me.txn.put(&db, &rowid_key(rowid), &encode_row(&values))?;
            }
            Ok(())
        })?;
        self.replace_entries(vec![table_entry(t, &sql, self.seq_of(&t.name))])
    }

    /// Calls `edit` with each row of `t` (its rowid and stored record), in batches, so a
    /// large table is rewritten in bounded memory.
    fn rewrite_rows(
        &mut self,
        t: &Table,
        mut edit: impl FnMut(&mut Self, i64, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let db = self.db(&t.db)?;
        let mut from = Bound::Unbounded;
        loop {
            let batch = self
                .txn
                .range(&db, (from, Bound::Unbounded))
                .take(1024)
                .collect::<beechdb::Result<Vec<_>>>()?;
            let Some((last, _)) = batch.last() else {
                return Ok(());
            };
            from = Bound::Excluded(last.clone());
            for (key, stored) in batch {
                self.check_interrupt()?;
                edit(self, rowid_of_key(&key)?, &stored)?;
            }
        }
    }

    /// A view or trigger whose text may name table `t` (with `column`: that column of it):
    /// one naming the table (and the column), or a trigger on `t` naming the column.
    fn view_or_trigger_naming(
        &self,
        t: &Table,
        column: Option<&str>,
    ) -> Result<Option<(&'static str, String)>> {
        let names = |sql: &str, on_table: bool| -> Result<bool> {
            Ok(column.map_or(Ok(true), |c| alter::may_name(sql, c))?
                && (on_table || alter::may_name(sql, &t.name)?))
        };
        for v in self.schema.views.values() {
            if names(&v.sql, false)? {
                return Ok(Some(("view", v.name.clone())));
            }
        }
        for tr in self.schema.triggers.values() {
            if names(&tr.def.sql, tr.def.table.eq_ignore_ascii_case(&t.name))? {
                return Ok(Some(("trigger", tr.name.clone())));
            }
        }
        Ok(None)
    }

    /// Writes schema entries (records made by `schema_entry`) over the ones of the same
    /// names, then reads the whole schema back from them, so that everything derived
    /// from the text (column positions, constraint indexes, foreign keys) follows it.
    fn replace_entries(&mut self, entries: Vec<Vec<u8>>) -> Result<()> {
        for rec in entries {
            let name = crate::record::decode_row(&rec, 5)?[1].to_text();
            self.put_entry(&name, rec)?;
        }
        let db = self.schema_db()?;
        *self.schema = Arc::new(Schema::read(self.txn, &db)?);
        Ok(())
    }

    pub fn reindex(&mut self, name: Option<&str>) -> Result<()> {
        let indexes: Vec<Arc<Index>> = self
            .schema
            .indexes
            .values()
            .filter(|i| match name {
                None => true,
                Some(n) => i.name.eq_ignore_ascii_case(n) || i.table.eq_ignore_ascii_case(n),
            })
            .cloned()
            .collect();
        if let Some(n) = name {
            if indexes.is_empty() && crate::value::Collation::from_name(n).is_none() {
                return Err(Error::Sql(
                    "unable to identify the object to be reindexed".into(),
                ));
            }
        }
        for i in indexes {
            let t = self.schema.table(&i.table)?.clone();
            let idb = self.db(&i.db)?;
            let keys: Vec<Vec<u8>> = self
                .txn
                .iter(&idb)
                .map(|kv| kv.map(|(k, _)| k))
                .collect::<beechdb::Result<_>>()?;
            for k in keys {
                self.txn.delete(&idb, &k)?;
            }
            self.fill_index(&t, &i)?;
        }
        Ok(())
    }
}

/// SET's assignments with their columns found in `t`: each one column (usize::MAX for
/// the rowid), or several taking a subquery's row.
fn assigned_columns<'e>(t: &Table, sets: &'e [Assignment]) -> Result<Vec<(Vec<usize>, &'e Expr)>> {
    sets.iter()
        .map(|(names, e)| {
            let columns = names
                .iter()
                .map(|name| match t.column_index(name) {
                    Some(i) if t.columns[i].generated.is_some() => Err(Error::Sql(format!(
                        "cannot UPDATE generated column \"{}\"",
                        t.columns[i].name
                    ))),
                    Some(i) => Ok(i),
                    None if ["rowid", "oid", "_rowid_"]
                        .iter()
                        .any(|r| r.eq_ignore_ascii_case(name)) =>
                    {
                        Ok(usize::MAX)
                    }
                    None => Err(Error::Sql(format!("no such column: {name}"))),
                })
                .collect::<Result<_>>()?;
            Ok((columns, e))
        })
        .collect()
}

static EMPTY: Frame = Frame {
    sources: Vec::new(),
    width: 0,
};
