//! The table columns a statement reads, as SQLite's authorizer is asked about them
//! (`SQLITE_READ`, table and column): each column named in a query, a condition, a SET or
//! upsert value or a RETURNING clause, resolved through the FROM clauses in scope
//! (subqueries see the queries around them), every column for `*`, the tables under a view
//! for the view, and what the triggers a change may fire read.
//!
//! Owns: the resolution of names for that purpose only (the planner resolves them for
//! running). May call: `ast`, `schema`. Invariant: it may name a column the statement does
//! not end up reading, never miss one it reads from a table (an authorizer denies by it).

use crate::ast::{Expr, From, ResultColumn, Select, Stmt, TableRef};
use crate::schema::Schema;
use std::collections::BTreeSet;

/// One FROM source in scope: the name a query calls it, and for a table its name and
/// columns (a subquery's or common table expression's columns are read where it is made).
#[derive(Clone)]
struct Source {
    label: String,
    table: Option<(String, Vec<String>)>,
}

struct Reads<'a> {
    schema: &'a Schema,
    /// Common table expressions in scope, by name.
    ctes: Vec<String>,
    /// Views being expanded (a view that names itself is not walked again).
    views: Vec<String>,
    /// Triggers walked (a trigger fired again down the chain is not walked again).
    triggers: Vec<String>,
    out: BTreeSet<(String, String)>,
}

/// The (table, column) pairs `stmt` reads, for the authorizer: its own, and those of the
/// triggers it may fire.
pub(crate) fn column_reads(stmt: &Stmt, schema: &Schema) -> Vec<(String, String)> {
    let mut r = Reads {
        schema,
        ctes: Vec::new(),
        views: Vec::new(),
        triggers: Vec::new(),
        out: BTreeSet::new(),
    };
    r.stmt(stmt, &[]);
    r.out.into_iter().collect()
}

impl Reads<'_> {
    fn stmt(&mut self, stmt: &Stmt, outer: &[Vec<Source>]) {
        // An UPDATE's or DELETE's WITH clause: in scope for the whole statement.
        let ctes_before = match stmt {
            Stmt::Update(u) => self.with(&u.with, outer),
            Stmt::Delete { with, .. } => self.with(with, outer),
            _ => self.ctes.len(),
        };
        self.stmt_body(stmt, outer);
        self.ctes.truncate(ctes_before);
    }

    fn stmt_body(&mut self, stmt: &Stmt, outer: &[Vec<Source>]) {
        let target = match stmt {
            Stmt::Select(s) => {
                self.select(s, outer);
                return;
            }
            Stmt::Insert(i) => {
                if let Some(s) = &i.source {
                    self.select(s, outer);
                }
                let target = self.table_source(&i.table, None);
                let mut excluded = target.clone();
                excluded.label = "excluded".into();
                let mut levels = outer.to_vec();
                levels.push(vec![target.clone(), excluded]);
                for (sets, where_) in i.upsert.iter().filter_map(|u| u.update.as_ref()) {
                    for e in sets.iter().map(|(_, e)| e).chain(where_) {
                        self.expr(e, &levels);
                    }
                }
                self.result_columns(&i.returning, std::slice::from_ref(&target), outer);
                &i.table
            }
            Stmt::Update(u) => {
                let mut scope = vec![self.table_source(&u.table, None)];
                if let Some(f) = &u.from {
                    self.from(f, outer, &mut scope);
                }
                let mut levels = outer.to_vec();
                levels.push(scope);
                for e in u.sets.iter().map(|(_, e)| e).chain(&u.where_) {
                    self.expr(e, &levels);
                }
                let scope = levels.pop().expect("pushed");
                self.result_columns(&u.returning, &scope, outer);
                &u.table
            }
            Stmt::Delete {
                table,
                where_,
                returning,
                ..
            } => {
                let scope = vec![self.table_source(table, None)];
                let mut levels = outer.to_vec();
                levels.push(scope.clone());
                if let Some(w) = where_ {
                    self.expr(w, &levels);
                }
                self.result_columns(returning, &scope, outer);
                table
            }
            _ => return,
        };
        // What the target's triggers read, with NEW and OLD its rows.
        let triggers: Vec<_> = self.schema.triggers_of(target).cloned().collect();
        for t in triggers {
            if self.triggers.contains(&t.name) {
                continue;
            }
            self.triggers.push(t.name.clone());
            let table = self.table_source(target, None).table;
            let row = |label: &str| Source {
                label: label.into(),
                table: table.clone(),
            };
            let levels = vec![vec![row("new"), row("old")]];
            if let Some(w) = &t.def.when {
                self.expr(w, &levels);
            }
            for s in &t.def.body {
                self.stmt(s, &levels);
            }
        }
    }

    fn table_source(&self, name: &str, alias: Option<&str>) -> Source {
        let label = alias.unwrap_or(name).to_string();
        let table = match self.schema.tables.get(&name.to_ascii_lowercase()) {
            Some(t) if !self.ctes.iter().any(|c| c.eq_ignore_ascii_case(name)) => Some((
                t.name.clone(),
                t.columns.iter().map(|c| c.name.clone()).collect(),
            )),
            _ => None,
        };
        Source { label, table }
    }

    /// Walks the tables of a WITH clause, whose names are then in scope (until the
    /// returned count of earlier ones is restored).
    fn with(&mut self, with: &[crate::ast::Cte], outer: &[Vec<Source>]) -> usize {
        let before = self.ctes.len();
        for cte in with {
            // A recursive one names itself: in scope for its own body.
            self.ctes.push(cte.name.clone());
            self.select(&cte.select, outer);
        }
        before
    }

    /// Walks `sel`, whose names may also resolve in `outer` (innermost last).
    fn select(&mut self, sel: &Select, outer: &[Vec<Source>]) {
        let ctes_before = self.with(&sel.with, outer);
        for core in sel.cores() {
            match core {
                crate::ast::Core::Values(rows) => {
                    for e in rows.iter().flatten() {
                        self.expr(e, outer);
                    }
                }
                crate::ast::Core::Select {
                    columns,
                    from,
                    where_,
                    group_by,
                    having,
                    ..
                } => {
                    let mut scope = Vec::new();
                    if let Some(f) = from {
                        self.from(f, outer, &mut scope);
                    }
                    self.result_columns(columns, &scope, outer);
                    let mut levels = outer.to_vec();
                    levels.push(scope);
                    for e in where_.iter().chain(group_by).chain(having) {
                        self.expr(e, &levels);
                    }
                    for o in &sel.order_by {
                        self.expr(&o.expr, &levels);
                    }
                }
            }
        }
        for e in sel.limit.iter().chain(&sel.offset) {
            self.expr(e, outer);
        }
        self.ctes.truncate(ctes_before);
    }

    /// The sources of `f` into `scope`, walking its subqueries, views and ON conditions.
    fn from(&mut self, f: &From, outer: &[Vec<Source>], scope: &mut Vec<Source>) {
        self.table_ref(&f.first, outer, scope);
        for j in &f.joins {
            self.table_ref(&j.table, outer, scope);
            for name in &j.using {
                for s in scope.iter() {
                    self.record(s, name);
                }
            }
            if let Some(on) = &j.on {
                let mut levels = outer.to_vec();
                levels.push(scope.clone());
                self.expr(on, &levels);
            }
        }
    }

    fn table_ref(&mut self, t: &TableRef, outer: &[Vec<Source>], scope: &mut Vec<Source>) {
        match t {
            TableRef::Table { name, alias } => {
                let lc = name.to_ascii_lowercase();
                let is_cte = self.ctes.iter().any(|c| c.eq_ignore_ascii_case(name));
                if let (Some(v), false) = (self.schema.views.get(&lc), is_cte) {
                    if !self.views.contains(&lc) {
                        // What a view reads, its user reads (SQLite asks about the tables
                        // under it).
                        self.views.push(lc);
                        let v = v.clone();
                        self.select(&v.select, &[]);
                        self.views.pop();
                    }
                }
                scope.push(self.table_source(name, alias.as_deref()));
            }
            TableRef::Subquery { select, alias } => {
                self.select(select, outer);
                scope.push(Source {
                    label: alias.clone().unwrap_or_default(),
                    table: None,
                });
            }
            TableRef::Nested(f) => self.from(f, outer, scope),
            TableRef::Function { args, alias, name } => {
                // Its arguments may name the sources before it.
                let mut levels = outer.to_vec();
                levels.push(scope.clone());
                for a in args {
                    self.expr(a, &levels);
                }
                scope.push(Source {
                    label: alias.clone().unwrap_or_else(|| name.clone()),
                    table: None,
                });
            }
        }
    }

    fn result_columns(&mut self, cols: &[ResultColumn], scope: &[Source], outer: &[Vec<Source>]) {
        let mut levels = outer.to_vec();
        levels.push(scope.to_vec());
        for c in cols {
            match c {
                ResultColumn::Star => {
                    for s in scope {
                        self.all_columns(s);
                    }
                }
                ResultColumn::TableStar(t) => {
                    for s in scope.iter().filter(|s| s.label.eq_ignore_ascii_case(t)) {
                        self.all_columns(s);
                    }
                }
                ResultColumn::Expr(e, _) => self.expr(e, &levels),
            }
        }
    }

    fn all_columns(&mut self, s: &Source) {
        if let Some((table, cols)) = &s.table {
            for c in cols {
                self.out.insert((table.clone(), c.clone()));
            }
        }
    }

    /// Records column `name` of source `s`, if it is a table's column.
    fn record(&mut self, s: &Source, name: &str) -> bool {
        let Some((table, cols)) = &s.table else {
            return false;
        };
        match cols.iter().find(|c| c.eq_ignore_ascii_case(name)) {
            Some(c) => {
                self.out.insert((table.clone(), c.clone()));
                true
            }
            None => false,
        }
    }

    /// Walks `e`, its names resolved in `levels` (innermost last), into subqueries too.
    fn expr(&mut self, e: &Expr, levels: &[Vec<Source>]) {
        // Cloned out of the walk, whose callback cannot lend what it sees.
        let mut nested: Vec<Select> = Vec::new();
        let mut windows = Vec::new();
        e.walk(&mut |x| match x {
            Expr::Column { table, name } => {
                'levels: for level in levels.iter().rev() {
                    for s in level {
                        if table
                            .as_deref()
                            .is_some_and(|t| !s.label.eq_ignore_ascii_case(t))
                        {
                            continue;
                        }
                        if self.record(s, name) {
                            break 'levels;
                        }
                    }
                }
            }
            Expr::Subquery(s) | Expr::Exists(s) | Expr::InSelect { select: s, .. } => {
                nested.push((**s).clone())
            }
            Expr::Window(w) => windows.push((**w).clone()),
            _ => {}
        });
        for w in windows {
            for a in w.args.iter().chain(&w.partition) {
                self.expr(a, levels);
            }
            for o in &w.order {
                self.expr(&o.expr, levels);
            }
        }
        for s in &nested {
            self.select(s, levels);
        }
    }
}
