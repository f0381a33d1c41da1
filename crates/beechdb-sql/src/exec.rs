//! Query execution: expressions evaluated with SQLite's semantics, and SELECT (joins with
//! predicate pushdown, aggregates, DISTINCT, ORDER BY, LIMIT, compound selects, subqueries,
//! views and common table expressions) over the rows of an engine transaction.
//!
//! Owns: [`Exec`], the per-statement execution context, name resolution (scopes), the
//! evaluation of expressions, and plans (`CorePlan`, `JoinPlan`: sources, join order,
//! access paths, expressions bound to row slots) kept in a prepared statement's
//! `PlanCache`. May call: `schema`, `record`, `func`, `value`, and the engine through the
//! statement's transaction. Invariants: every read goes through the statement's
//! transaction, so a statement sees one snapshot plus its transaction's own writes; a kept
//! plan is used only with the schema it was made for.

use crate::ast::*;
use crate::error::{Error, Result};
use crate::func::{self, Acc};
use crate::functions::UserFunction;
use crate::record::{decode_key_part, rowid_key, rowid_of_key, KeyPart};
use crate::schema::{lc, Index, Schema, Table};
use crate::value::{arith, Affinity, ArithOp, Collation, Value};
use beechdb::{Db, Env, Txn};
use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::SmallVec;
use std::cmp::Ordering;
use std::collections::{HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

/// A row of values.
pub type Row = Vec<Value>;
/// Steps a recursive common table expression may take (SQLite's would run until memory
/// ends; a query that needs more says so with a LIMIT).
const RECURSION_LIMIT: u64 = 1_000_000;
/// Rows computed once (a common table expression): column names and rows.
pub type Materialized = (Vec<String>, Vec<Row>);
/// Rows of a core: each with its ORDER BY key.
type Keyed = Vec<(Row, Row)>;

/// What a query returns: column names, declared types, rows. The names and types are
/// shared with the statement's plan (a run copies none).
#[derive(Debug, Clone, Default)]
pub struct QueryResult {
    pub columns: Arc<[String]>,
    pub decl_types: Arc<[Option<String>]>,
    pub rows: Vec<Row>,
}

impl QueryResult {
    /// No rows yet, columns of these names (no declared types).
    pub fn named(names: &[&str]) -> QueryResult {
        QueryResult {
            columns: names.iter().map(|n| n.to_string()).collect(),
            decl_types: names.iter().map(|_| None).collect(),
            rows: Vec::new(),
        }
    }
}

/// A core's result columns: as sources (for ORDER BY, compounds, subqueries), and the
/// result's names and declared types, made once per plan.
pub(crate) struct Meta {
    cols: Vec<SrcCol>,
    names: Arc<[String]>,
    types: Arc<[Option<String>]>,
}

impl Meta {
    fn new(cols: Vec<SrcCol>) -> Arc<Meta> {
        Arc::new(Meta {
            names: cols.iter().map(|c| c.name.clone()).collect(),
            types: cols.iter().map(|c| c.decl_type.clone()).collect(),
            cols,
        })
    }

    /// Each column's collation (what DISTINCT compares by).
    fn collations(&self) -> Vec<Collation> {
        self.cols.iter().map(|c| c.coll).collect()
    }
}

impl std::ops::Deref for Meta {
    type Target = [SrcCol];
    fn deref(&self) -> &[SrcCol] {
        &self.cols
    }
}

/// One column of a source in a FROM clause.
#[derive(Debug, Clone)]
pub struct SrcCol {
    pub name: String,
    pub affinity: Option<Affinity>,
    pub coll: Collation,
    pub decl_type: Option<String>,
    /// Left out of `*` (the right side's copy of a USING or NATURAL join column).
    pub hidden: bool,
    /// The left side's copy of a USING or NATURAL column of a RIGHT or FULL join: the slot
    /// of the merged value (the left's, else the right's) that `*` and an unqualified name
    /// read, as SQLite merges them; a qualified name reads the column itself.
    pub merged: Option<usize>,
}

/// One table (or subquery) of a FROM clause, its columns at `start..` of the joined row.
#[derive(Debug, Clone)]
pub struct Source {
    pub name: String,
    pub columns: Vec<SrcCol>,
    pub start: usize,
    /// Slot of the rowid, for tables.
    pub rowid: Option<usize>,
}

/// The sources of a FROM clause and the width of a joined row.
#[derive(Debug, Clone, Default)]
pub struct Frame {
    pub sources: Vec<Source>,
    pub width: usize,
}

impl Frame {
    pub fn push(&mut self, name: &str, mut columns: Vec<SrcCol>, rowid: bool) {
        // A merged slot is of the frame that set it (see `Exec::hide_join_columns`).
        columns.iter_mut().for_each(|c| c.merged = None);
        let start = self.width;
        self.width += columns.len() + rowid as usize;
        self.sources.push(Source {
            name: lc(name),
            rowid: rowid.then_some(start + columns.len()),
            columns,
            start,
        });
    }

    /// The column description of slot `i` (`Some(None)` for a rowid), if the frame has it.
    fn slot(&self, i: usize) -> Option<Option<&SrcCol>> {
        let s = self.sources.iter().rev().find(|s| s.start <= i)?;
        match i - s.start {
            c if c < s.columns.len() => Some(Some(&s.columns[c])),
            c if c == s.columns.len() && s.rowid.is_some() => Some(None),
            _ => None,
        }
    }

    /// Resolves the column references of `e` that name this frame's columns to their slots
    /// (not inside subqueries, whose own sources come first).
    fn bind(&self, e: &mut Expr) {
        e.walk_mut(&mut |x| {
            if let Expr::Column { table, name } = x {
                if let Ok(Some((slot, _))) = self.resolve(table.as_deref(), name) {
                    *x = Expr::Slot(slot);
                }
            }
        });
    }

    /// The slot (and column description) of a column reference, if this frame has it.
    fn resolve(&self, table: Option<&str>, name: &str) -> Result<Option<(usize, Option<&SrcCol>)>> {
        let mut found: Option<(usize, Option<&SrcCol>)> = None;
        for s in &self.sources {
            if table.is_some_and(|t| !s.name.eq_ignore_ascii_case(t)) {
                continue;
            }
            let hit = s
                .columns
                .iter()
                .position(|c| c.name.eq_ignore_ascii_case(name))
                .map(|i| {
                    let c = &s.columns[i];
                    let merged = c.merged.filter(|_| table.is_none());
                    (merged.unwrap_or(s.start + i), Some(c))
                })
                .or_else(|| {
                    let is_rowid = ["rowid", "oid", "_rowid_"]
                        .iter()
                        .any(|r| r.eq_ignore_ascii_case(name));
                    s.rowid.filter(|_| is_rowid).map(|slot| (slot, None))
                });
            if let Some(h) = hit {
                if found.is_some() {
                    if table.is_none() && h.1.is_some_and(|c| c.hidden) {
                        continue;
                    }
                    if found.is_some_and(|f| f.1.is_some_and(|c| c.hidden)) {
                        found = Some(h);
                        continue;
                    }
                    return Err(Error::Sql(format!("ambiguous column name: {name}")));
                }
                found = Some(h);
            }
        }
        Ok(found)
    }
}

/// Rows of equal width in one array (a window call's sort keys or arguments for each row).
struct Strided {
    width: usize,
    values: Vec<Value>,
}

impl Strided {
    fn new(width: usize, rows: usize) -> Strided {
        Strided {
            width,
            values: Vec::with_capacity(width * rows),
        }
    }
}

impl std::ops::Index<usize> for Strided {
    type Output = [Value];
    fn index(&self, row: usize) -> &[Value] {
        &self.values[row * self.width..(row + 1) * self.width]
    }
}

/// Values of the aggregates (or window calls) of the group or row being output, by the
/// address of their call: a few each, kept inline, as one is kept for every row a window
/// call runs over.
#[derive(Default, Clone)]
struct AggValues(SmallVec<[(usize, Value); 2]>);

impl AggValues {
    fn get(&self, call: &usize) -> Option<&Value> {
        self.0.iter().find(|(c, _)| c == call).map(|(_, v)| v)
    }

    fn insert(&mut self, call: usize, v: Value) {
        match self.0.iter_mut().find(|(c, _)| *c == call) {
            Some((_, held)) => *held = v,
            None => self.0.push((call, v)),
        }
    }
}

/// Where names resolve: a frame and the current row, inside an outer scope.
#[derive(Clone, Copy)]
pub struct Scope<'a> {
    pub frame: &'a Frame,
    pub row: &'a [Value],
    pub outer: Option<&'a Scope<'a>>,
    agg: Option<&'a AggValues>,
}

impl<'a> Scope<'a> {
    pub fn new(frame: &'a Frame, row: &'a [Value], outer: Option<&'a Scope<'a>>) -> Scope<'a> {
        Scope {
            frame,
            row,
            outer,
            agg: None,
        }
    }
}

static EMPTY_FRAME: Frame = Frame {
    sources: Vec::new(),
    width: 0,
};

/// The context a statement runs in.
pub struct Exec<'a> {
    pub env: &'a Env,
    pub txn: &'a Txn,
    pub schema: &'a mut Arc<Schema>,
    pub params: &'a [Value],
    pub last_rowid: &'a mut i64,
    pub changes: u64,
    /// What `changes()` and `total_changes()` answer: the connection's counts before this
    /// statement.
    pub connection_changes: (u64, u64),
    /// Depth of nested trigger programs.
    pub trigger_depth: usize,
    /// Rows the statement's trigger programs changed.
    pub trigger_changes: u64,
    /// Database handles by engine database name, kept by the connection for its
    /// transaction (databases it created are not visible by name before it commits).
    pub dbs: &'a mut FxHashMap<String, Db>,
    /// Rows a RETURNING clause produced.
    pub returned: QueryResult,
    /// The next rowid of each table (by engine database), shared by the connections.
    pub rowids: &'a parking_lot::Mutex<FxHashMap<String, i64>>,
    /// The rowids this statement took from `rowids`, per table, to give back if it fails.
    pub taken_rowids: Vec<TakenRowids>,
    /// The largest rowid of each table (by engine database) the transaction sees, where
    /// known (`None`: no row): kept by the rows' writes and deletes from the first insert
    /// that looked it up, so an insert does not look it up again.
    pub max_rowids: FxHashMap<String, Option<i64>>,
    /// `PRAGMA foreign_keys`: foreign keys are enforced.
    pub foreign_keys: bool,
    /// Under EXPLAIN QUERY PLAN: the plan's lines, and nothing is read or changed.
    pub plan: Option<Vec<String>>,
    /// Names the statement wrote double-quoted (see `parse::Parsed::quoted`).
    pub quoted: &'a [String],
    /// The views whose columns are being worked out, outermost first: one met again is
    /// defined in a cycle (views dropped and made again can name each other).
    pub expanding: std::cell::RefCell<Vec<String>>,
    /// The columns of common table expressions of a SELECT whose columns are being worked
    /// out before it runs (a subquery in FROM with a WITH of its own), innermost last.
    pub planned_ctes: std::cell::RefCell<Vec<(String, Vec<SrcCol>)>>,
    /// Common table expressions in scope, innermost last: name -> (columns, rows).
    pub ctes: Vec<FxHashMap<String, Arc<Materialized>>>,
    /// Set from another thread to stop the statement (see `Interrupter`).
    pub interrupted: &'a std::sync::atomic::AtomicBool,
    /// The running statement's plans, kept between its runs.
    pub plans: Option<&'a PlanCache>,
    /// Results of subqueries that read nothing of the rows around them (see
    /// `Exec::subquery`).
    pub subqueries: KeptSubqueries,
    /// Plans made where common table expressions were in scope, for this run (see
    /// `Exec::cached_plan`).
    pub scoped_plans: std::cell::RefCell<FxHashMap<(PlanId, u64), ScopedPlan>>,
    /// The bar of the top-N sort being read, if any (see `TopGate`).
    pub top_gate: Option<TopGate>,
    /// The tables correlated subqueries read, kept (see `Exec::kept_scan`).
    pub kept_scans: KeptScans,
}

/// The bar a sort for a LIMIT sets for the rows it reads (see `Exec::core`): once it has
/// kept the first N, a row whose ORDER BY key does not sort before the last of them is
/// dropped before the columns only its result reads are decoded.
pub struct TopGate {
    /// The address of the plan whose rows it bars (a subquery's rows are not its).
    plan: usize,
    keys: Vec<Expr>,
    specs: Vec<OrderSpec>,
    /// The key of the last row kept, once N are.
    worst: Option<Row>,
}

/// A plan made where common table expressions were in scope: their names and columns per
/// scope, and the plan.
pub type ScopedPlan = (Vec<Vec<(String, Vec<String>)>>, Arc<CorePlan>);

/// A table's rows kept for a correlated subquery, and their hash on one column.
type KeptRows = (Arc<Vec<Row>>, Arc<HashProbe>);

/// The tables correlated subqueries read, kept for one run of a statement (see
/// `Exec::kept_scan`), by the join's plan and the run.
#[derive(Default)]
pub struct KeptScans(FxHashMap<(usize, u64), KeptScan>);

#[derive(Default)]
struct KeptScan {
    /// What the rows were read under: the transaction's changes to the table, the table,
    /// the column hashed and the expression probing it (its debug form).
    changes: u64,
    table: String,
    column: usize,
    probe: String,
    /// Runs of the subquery under these.
    runs: u32,
    built: Option<KeptRows>,
    /// The table is too large to keep, or the hash would group few of its rows.
    unhelpful: bool,
}

/// The subqueries one statement keeps: SQLite runs a subquery that reads nothing of the
/// rows around it once per run of the statement that holds it, the statement's own writes
/// notwithstanding; each run of a trigger's statement is a run of its own.
pub struct KeptSubqueries {
    /// By the subquery (see `KeptSubqueries::key`) and the run (of the statement, of a
    /// trigger's statement or of a row's RETURNING) it was kept in.
    kept: FxHashMap<(PlanId, u64), KeptSubquery>,
    /// This statement run's number, unique in the process (what a list's sorted values are
    /// kept by: `Exec::list_probe`).
    id: u64,
    /// The current run, and the runs so far.
    run: u64,
    runs: u64,
    /// The outermost scope (by `depth`) a column name resolved in since this was last
    /// reset: how `Exec::subquery` tells a correlated subquery.
    shallowest: std::cell::Cell<usize>,
}

impl Default for KeptSubqueries {
    fn default() -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        KeptSubqueries {
            kept: FxHashMap::default(),
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            run: 0,
            runs: 0,
            shallowest: std::cell::Cell::new(usize::MAX),
        }
    }
}

impl KeptSubqueries {
    /// Starts a run of a trigger's statement or of a row's RETURNING; returns the run to go
    /// back to after it.
    pub fn begin_run(&mut self) -> u64 {
        self.runs += 1;
        std::mem::replace(&mut self.run, self.runs)
    }

    pub fn end_run(&mut self, back_to: u64) {
        self.run = back_to;
    }

    /// What subquery `sel` is kept by in this run: its first core's plan id, the same in
    /// the statement's tree and in every copy a plan makes of it (an address is not: a
    /// copy dropped leaves its address to another); `None` for a tree built while running.
    fn key(&self, sel: &Select) -> Option<(PlanId, u64)> {
        match &sel.first {
            Core::Select { plan, .. } if *plan != PlanId::NONE => Some((*plan, self.run)),
            _ => None,
        }
    }

    /// Forgets them all: a common table expression's scope changed under them.
    fn forget(&mut self) {
        self.kept.clear();
    }
}

/// A subquery's rows kept for the rest of its statement's run (see `KeptSubqueries`).
pub struct KeptSubquery {
    result: Arc<QueryResult>,
    /// For `x IN (subquery)`: its values as the comparison sees them, sorted (see
    /// `InProbe`).
    probe: Option<Arc<InProbe>>,
}

/// `x IN (subquery)`, or a list of at least this many constants, is answered by a binary
/// search (see `InProbe`).
const SORTED_LIST: usize = 8;

/// `x IN (subquery)` (or a long list of constants) answered by a binary search: the values
/// with the affinity the comparison gives them, sorted in the comparison's collation, and
/// whether one was NULL.
#[derive(Debug)]
pub struct InProbe {
    values: Vec<Value>,
    saw_null: bool,
    /// The affinity the comparison gives the left side, and its collation.
    left: Option<Affinity>,
    coll: Collation,
}

impl InProbe {
    /// The probe for values `values` compared with a left side of affinity `left` (the
    /// values' own affinity `right`) in collation `coll`.
    fn build(
        values: impl Iterator<Item = Value>,
        left: Option<Affinity>,
        right: Option<Affinity>,
        coll: Collation,
    ) -> InProbe {
        let (to_left, to_right) = comparison_affinities(left, right);
        let mut saw_null = false;
        let mut kept: Vec<Value> = Vec::new();
        for v in values {
            match v {
                Value::Null => saw_null = true,
                v => kept.push(to_right.map_or(v.clone(), |a| a.apply(v))),
            }
        }
        kept.sort_by(|a, b| a.cmp_with(b, coll));
        InProbe {
            values: kept,
            saw_null,
            left: to_left,
            coll,
        }
    }

    /// `x [NOT] IN (subquery)` for `x`, with SQL's NULL rules.
    fn answer(&self, x: Value, not: bool) -> Value {
        if self.values.is_empty() && !self.saw_null {
            return Value::Integer(not as i64);
        }
        if x.is_null() {
            return Value::Null;
        }
        let x = match self.left {
            Some(a) => a.apply(x),
            None => x,
        };
        let found = (self.values)
            .binary_search_by(|v| v.cmp_with(&x, self.coll))
            .is_ok();
        match (found, self.saw_null) {
            (true, _) => Value::Integer(!not as i64),
            (false, true) => Value::Null,
            (false, false) => Value::Integer(not as i64),
        }
    }
}

/// How many scopes `sc` and those around it make.
fn depth(sc: &Scope) -> usize {
    std::iter::successors(Some(sc), |s| s.outer).count()
}

/// The affinities a comparison applies to its two sides (SQLite's rules: a numeric side
/// makes a text or untyped other side numeric, a TEXT side makes an untyped one text), for
/// operands of affinity `left` and `right`.
fn comparison_affinities(
    left: Option<Affinity>,
    right: Option<Affinity>,
) -> (Option<Affinity>, Option<Affinity>) {
    let numeric = |x: Option<Affinity>| x.is_some_and(Affinity::is_numeric);
    let textish =
        |x: Option<Affinity>| matches!(x, None | Some(Affinity::Text) | Some(Affinity::Blob));
    if numeric(left) && textish(right) {
        (None, Some(Affinity::Numeric))
    } else if numeric(right) && textish(left) {
        (Some(Affinity::Numeric), None)
    } else if left == Some(Affinity::Text) && right.is_none() {
        (None, Some(Affinity::Text))
    } else if right == Some(Affinity::Text) && left.is_none() {
        (Some(Affinity::Text), None)
    } else {
        (None, None)
    }
}

fn key_of(e: &Expr) -> usize {
    e as *const Expr as usize
}

/// Whether `x` is a node whose columns are known only when it runs: a subquery or a window
/// call, which may read any.
fn opaque(x: &Expr) -> bool {
    matches!(
        x,
        Expr::Exists(_) | Expr::Subquery(_) | Expr::InSelect { .. } | Expr::Window(_)
    )
}

/// Whether `e` reads a column other than in an aggregate call's arguments (a bare column
/// of an aggregate query); also when it holds a subquery or window call, which may.
fn reads_bare_columns(e: &Expr) -> bool {
    // Column references, and subqueries or window calls (which may read any).
    let count = |e: &Expr| {
        let (mut columns, mut hidden) = (0, 0);
        e.walk(&mut |x| match x {
            Expr::Column { .. } | Expr::Slot(_) => columns += 1,
            _ if opaque(x) => hidden += 1,
            _ => {}
        });
        (columns, hidden)
    };
    let mut calls = Vec::new();
    collect_aggregates(e, &mut calls);
    let inside = calls
        .iter()
        .map(|c| count(c))
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    count(e) != inside
}

/// Whether `e` calls an aggregate function (outside subqueries).
pub fn has_aggregate(e: &Expr) -> bool {
    let mut found = false;
    e.walk(&mut |x| {
        found |= is_aggregate_call(x);
    });
    found
}

fn is_aggregate_call(e: &Expr) -> bool {
    match e {
        Expr::Function { user: Some(u), .. } => matches!(u, UserFunction::Aggregate(_)),
        Expr::Function {
            name, args, star, ..
        } => *star || func::is_aggregate(name, args.len()),
        _ => false,
    }
}

/// Whether `e` is a call of the aggregate min() or max() (one argument; a user's function
/// of that name is not), whose rows the bare columns of its query follow.
fn is_extreme_call(e: &Expr) -> bool {
    matches!(e, Expr::Function { name, args, user: None, .. }
        if args.len() == 1 && (name == "min" || name == "max"))
}

fn collect_aggregates<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    collect_matching(e, &is_aggregate_call, out)
}

/// The sub-expressions of `e` that `pick` chooses (not looking inside them, nor inside
/// subqueries).
fn collect_matching<'e>(e: &'e Expr, pick: &dyn Fn(&Expr) -> bool, out: &mut Vec<&'e Expr>) {
    match e {
        e if pick(e) => out.push(e),
        _ => {
            let mut children: Vec<&'e Expr> = Vec::new();
            match e {
                Expr::Unary(_, a) | Expr::IsNull(a, _) | Expr::Cast(a, _) | Expr::Collate(a, _) => {
                    children.push(a)
                }
                Expr::Binary(_, a, b) | Expr::Compare(_, a, b, _) => children.extend([&**a, &**b]),
                Expr::Between {
                    expr, low, high, ..
                } => children.extend([&**expr, &**low, &**high]),
                Expr::InList { expr, list, .. } => {
                    children.push(expr);
                    children.extend(list.iter());
                }
                Expr::InSelect { expr, .. } => children.push(expr),
                Expr::Like {
                    expr,
                    pattern,
                    escape,
                    ..
                } => {
                    children.extend([&**expr, &**pattern]);
                    if let Some(x) = escape {
                        children.push(x);
                    }
                }
                Expr::Case { base, whens, else_ } => {
                    if let Some(b) = base {
                        children.push(b);
                    }
                    for (w, t) in whens {
                        children.extend([w, t]);
                    }
                    if let Some(x) = else_ {
                        children.push(x);
                    }
                }
                Expr::Function { args, .. } | Expr::Row(args) => children.extend(args.iter()),
                // (An aggregate query's window calls read its aggregates.)
                Expr::Window(w) => {
                    children.extend(w.args.iter().chain(&w.partition));
                    children.extend(w.order.iter().map(|o| &o.expr));
                }
                _ => {}
            }
            for c in children {
                collect_matching(c, pick, out);
            }
        }
    }
}

/// The conjuncts of an AND chain.
pub fn conjuncts(e: &Expr) -> Vec<&Expr> {
    match e {
        Expr::Binary(BinOp::And, a, b) => {
            let mut v = conjuncts(a);
            v.extend(conjuncts(b));
            v
        }
        other => vec![other],
    }
}

/// The rowids a statement (or a transaction, or its part since a savepoint) took from the
/// shared counter of one table: the first, the last and how many. If what took them is
/// undone they are given back when they are all of `first..=last` (no other connection
/// took one in between) and none was taken since, so that a failed or rolled-back insert
/// leaves no gap, as in SQLite (whose next rowid is one past the largest).
#[derive(Clone)]
pub struct TakenRowids {
    table: String,
    first: i64,
    last: i64,
    count: i64,
}

impl TakenRowids {
    /// Counts `rowid`, just taken from `table`'s counter, into `taken`.
    pub(crate) fn note(taken: &mut Vec<TakenRowids>, table: &str, rowid: i64) {
        match taken.iter_mut().find(|t| t.table == table) {
            Some(t) => (t.last, t.count) = (rowid, t.count + 1),
            None => taken.push(TakenRowids {
                table: table.to_string(),
                first: rowid,
                last: rowid,
                count: 1,
            }),
        }
    }

    /// Adds what a statement took to what its transaction took. Taken out of order (not
    /// following on), the ranges are no longer whole, and are not given back.
    pub(crate) fn fold(into: &mut Vec<TakenRowids>, taken: Vec<TakenRowids>) {
        for t in taken {
            match into.iter_mut().find(|i| i.table == t.table) {
                Some(i) => (i.last, i.count) = (t.last, i.count + t.count),
                None => into.push(t),
            }
        }
    }

    /// What was taken in `now` since `then` (an earlier state of the same transaction's).
    pub(crate) fn since(now: &[TakenRowids], then: &[TakenRowids]) -> Vec<TakenRowids> {
        now.iter()
            .filter_map(|n| match then.iter().find(|t| t.table == n.table) {
                None => Some(n.clone()),
                Some(t) if t.count == n.count => None,
                Some(t) => Some(TakenRowids {
                    table: n.table.clone(),
                    first: t.last + 1,
                    last: n.last,
                    count: n.count - t.count,
                }),
            })
            .collect()
    }

    /// Gives back what an undone statement or transaction took, where it can.
    pub(crate) fn give_back(taken: &[TakenRowids], counters: &mut FxHashMap<String, i64>) {
        for t in taken {
            let whole = t.last - t.first + 1 == t.count;
            if let Some(next) = counters
                .get_mut(&t.table)
                .filter(|n| whole && **n == t.last + 1)
            {
                *next = t.first;
            }
        }
    }
}

/// A select core's plan: what running it needs that depends only on the statement and
/// the schema, worked out at its first run and kept in the statement's `PlanCache` (the
/// part of SQLite's compiled program this interpreter has).
pub(crate) struct CorePlan {
    pub(crate) frame: Frame,
    /// The result columns with `*` expanded: expression and name.
    exprs: Vec<(Expr, String)>,
    meta: Arc<Meta>,
    /// The ORDER BY terms, result-column references resolved.
    order_exprs: Vec<Expr>,
    /// The GROUP BY terms (result-column ordinals resolved) and HAVING.
    group_terms: Vec<Expr>,
    having: Option<Expr>,
    aggregate: bool,
    /// An aggregate query reads columns outside aggregate calls: each group keeps a row
    /// for them (the one SQLite would: see the aggregation in `Exec::core`).
    bare: bool,
    windows: bool,
    /// `SELECT min(c)` or `max(c)` of one table, alone, read at one end of its rowid or an
    /// index on `c` (SQLite's min/max optimization); or `count(*)`, the table's count.
    min_max: Option<MinMax>,
    /// How the FROM clause is read, if there is one.
    pub(crate) join: Option<JoinPlan>,
    /// The one table is read in the order of the ORDER BY (see `Exec::order_path`): rows
    /// come out sorted, and the select stops at its LIMIT.
    in_order: bool,
    /// A sort for a LIMIT may drop a row on its key alone, before its result columns are
    /// evaluated: neither they nor the keys call into the application or read other
    /// tables, so evaluating them less often (or the keys twice) cannot be seen. A table
    /// read alone then decodes the keys' columns before the rest (see `TopGate`).
    sort_skips: bool,
    /// The WHERE clause with result columns' aliases in it replaced (see
    /// [`Exec::with_aliases`]), when it names any.
    where_: Option<Expr>,
}

/// See `CorePlan::min_max`.
struct MinMax {
    table: Arc<Table>,
    /// The index read (`None`: the rowid, for the rowid or its alias).
    index: Option<Arc<crate::schema::Index>>,
    /// The column whose value is the answer (`None`: the rowid).
    column: Option<usize>,
    end: End,
}

#[derive(Clone, Copy, PartialEq)]
enum End {
    Min,
    Max,
    /// Not an end: the number of rows (`Txn::len`, from the tree's count).
    Count,
}

/// How the sources of a FROM clause are read and joined.
pub(crate) struct JoinPlan {
    items: Vec<ItemPlan>,
    /// The first slot of each item in the joined row.
    bound: Vec<usize>,
    /// The conditions checked once each item's row is joined.
    at_level: Vec<Vec<Expr>>,
    /// Per item, `at_level` without the conditions its access path makes true of every row
    /// it reads (a rowid equality, and an index equality with a constant or a parameter,
    /// always; a rowid range's bounds when they are integers); `None` when there are none.
    residual: Vec<Option<Vec<Expr>>>,
    /// A LEFT JOIN's ON conditions, which decide whether its row matched.
    on_level: Vec<Vec<Expr>>,
    /// For a streamed first item (see `streams`): which columns are decoded when; `None`:
    /// every column at once.
    lazy: Option<LazyColumns>,
    /// Per item read through an access path (see `join_lookups`): a mask of the columns the
    /// statement reads of it, cut after the last (see `Table::read_into`); `None`: all.
    wanted: Vec<Option<Vec<bool>>>,
    /// One streamed table, and nothing the statement evaluates per row calls into the
    /// engine or into the application (no subquery, registered function or collation): so
    /// its rows can be lent by the engine (`Txn::visit_from`), whose lock is held meanwhile.
    lent: bool,
    /// The streamed table is read from its last rowid down (ORDER BY rowid DESC).
    reverse: bool,
    /// The arguments of the table-valued functions among the items: what they read of
    /// earlier items must be decoded before they are called.
    function_args: Vec<Expr>,
}

/// What a streamed first item decodes when, each a mask of its columns that ends at its
/// last column read (see `Table::read_into`).
struct LazyColumns {
    /// The columns its own conditions read, decoded before them.
    filter: Vec<bool>,
    /// The other columns later items' conditions and access paths read (alone, all the
    /// others the statement reads), decoded for rows that pass its conditions.
    joins: Vec<bool>,
    /// The other columns the statement reads, decoded only for joined rows that pass every
    /// condition (once however many rows it joins with).
    rest: Vec<bool>,
}

impl JoinPlan {
    /// Resolves the plan's column references to slots of `frame` (see `Frame::bind`).
    fn bind(&mut self, ex: &Exec, frame: &Frame) {
        let residual = self.residual.iter_mut().flatten();
        let conditions = self
            .at_level
            .iter_mut()
            .chain(&mut self.on_level)
            .chain(residual);
        for e in conditions.flatten().chain(&mut self.function_args) {
            ex.bind(e, frame);
        }
        for it in &mut self.items {
            match &mut it.access {
                Access::Scan => {}
                Access::Rowid(e) | Access::Index(_, e, _) => ex.bind(e, frame),
                Access::RowidIn(InValues::List(list))
                | Access::IndexIn(_, InValues::List(list)) => {
                    list.iter_mut().for_each(|e| ex.bind(e, frame))
                }
                Access::RowidIn(InValues::Query(_)) | Access::IndexIn(_, InValues::Query(_)) => {}
                Access::RowidRange(lo, hi)
                | Access::IndexRange(_, lo, hi)
                | Access::IndexOrder(_, _, lo, hi) => {
                    lo.iter_mut().chain(hi).for_each(|e| ex.bind(e, frame))
                }
            }
        }
    }

    /// Decides which columns of its tables the plan decodes when: for a streamed first item
    /// (see `LazyColumns`), in steps; for items read through an access path (`wanted`), only
    /// those read at all. `rest` are the plan's other expressions (the result columns and
    /// such); `whole_rows` says the rows it passes on are read whole (UPDATE and DELETE).
    /// Nothing is lazy unless the first item's conditions read its columns by slot only.
    /// `sort_keys` are a top-N sort's keys, read before the result's own columns (see
    /// `TopGate`).
    fn decode_lazily<'e>(
        &mut self,
        rest: impl Iterator<Item = &'e Expr>,
        whole_rows: bool,
        sort_keys: &[Expr],
    ) {
        let rest: Vec<&Expr> = rest.collect();
        let conditions = self.at_level.iter().chain(&self.on_level).flatten();
        self.lent = self.items.len() == 1
            && conditions
                .chain(rest.iter().copied())
                .all(is_self_contained);
        let accesses: Vec<&Expr> = self
            .items
            .iter()
            .flat_map(|it| match &it.access {
                Access::Scan => vec![],
                Access::Rowid(e) | Access::Index(_, e, _) => vec![e],
                Access::RowidIn(InValues::List(list))
                | Access::IndexIn(_, InValues::List(list)) => list.iter().collect(),
                Access::RowidIn(InValues::Query(_)) | Access::IndexIn(_, InValues::Query(_)) => {
                    vec![]
                }
                Access::RowidRange(lo, hi)
                | Access::IndexRange(_, lo, hi)
                | Access::IndexOrder(_, _, lo, hi) => lo.iter().chain(hi).collect(),
            })
            .chain(&self.function_args)
            .collect();
        for (i, it) in self.items.iter().enumerate() {
            let Some(t) = it.table.as_ref().filter(|_| !whole_rows) else {
                continue;
            };
            if matches!(it.access, Access::Scan) {
                continue;
            }
            // Its own conditions but those its index lookup makes true (see `residual`).
            let own = match (&it.access, &self.residual[i]) {
                (Access::Index(..) | Access::IndexIn(..) | Access::IndexRange(..), Some(r)) => r,
                _ => &self.at_level[i],
            };
            let others = self.at_level.iter().enumerate().filter(|&(j, _)| j != i);
            let conditions = others.map(|(_, c)| c).chain([own]).chain(&self.on_level);
            let all = conditions
                .flatten()
                .chain(accesses.iter().copied())
                .chain(rest.iter().copied());
            let slots = self.bound[i]..self.bound[i] + t.columns.len();
            self.wanted[i] = columns_read(all, slots).map(|mut m| {
                // The rowid alias is not stored: it is set from the key whatever the mask.
                if let Some(a) = t.rowid_alias {
                    m[a] = false;
                }
                trimmed(m)
            });
        }
        let Some(t) = self.items[0].table.as_ref().filter(|_| streams(self, 0)) else {
            return;
        };
        let n = t.columns.len();
        let slots = self.bound[0]..self.bound[0] + n;
        let filter = columns_read(self.at_level[0].iter(), slots.clone());
        let later = self.at_level[1..].iter().chain(&self.on_level).flatten();
        let before_rest = accesses.iter().copied().chain(sort_keys);
        let joins = columns_read(later.chain(before_rest), slots.clone());
        let rest = columns_read(rest.into_iter(), slots).filter(|_| !whole_rows);
        if let Some(filter) = filter {
            let read = |c: usize, m: &Option<Vec<bool>>| m.as_ref().is_none_or(|m| m[c]);
            let stored = |c: usize| Some(c) != t.rowid_alias;
            let mask = |pick: &dyn Fn(usize) -> bool| {
                trimmed((0..n).map(|c| stored(c) && pick(c)).collect())
            };
            // Alone, the item's rows go straight to the result: nothing to defer, but for a
            // top-N sort's bar.
            let defer = self.items.len() > 1 || !sort_keys.is_empty();
            let rest = |c| read(c, &rest) && !filter[c];
            self.lazy = Some(LazyColumns {
                joins: mask(&|c| (read(c, &joins) || !defer && rest(c)) && !filter[c]),
                rest: mask(&|c| defer && rest(c) && !read(c, &joins)),
                filter: mask(&|c| filter[c]),
            });
        }
    }
}

/// Whether `e` reads, of the joined row, only item `i`'s columns (outer queries' names it
/// may read; a subquery or window call, which could read anything, it may not hold).
fn reads_only(e: &Expr, plan: &JoinPlan, i: usize, frame: &Frame) -> bool {
    let slots = plan.bound[i]..plan.bound[i] + plan.items[i].width;
    let mut only = true;
    e.walk(&mut |x| match x {
        Expr::Slot(s) => only &= slots.contains(s),
        // Not bound (a plan run once): a name of this frame may be any item's.
        Expr::Column { .. } => only &= !names_frame_unbound(x, frame),
        _ if opaque(x) => only = false,
        _ => {}
    });
    only
}

/// Whether `e` names a column of `frame` by name rather than by slot (a plan that was not
/// bound: planned and run once).
fn names_frame_unbound(e: &Expr, frame: &Frame) -> bool {
    let mut named = false;
    e.walk(&mut |x| {
        if let Expr::Column { table, name } = x {
            named |= matches!(frame.resolve(table.as_deref(), name), Ok(Some(_)));
        }
    });
    named
}

/// Which of `slots` `exprs` read; `None` when they may read any (a subquery or a window
/// call names columns when it runs).
fn columns_read<'e>(
    exprs: impl Iterator<Item = &'e Expr>,
    slots: std::ops::Range<usize>,
) -> Option<Vec<bool>> {
    let mut used = vec![false; slots.len()];
    let mut any = false;
    for e in exprs {
        e.walk(&mut |x| match x {
            Expr::Slot(i) if slots.contains(i) => used[*i - slots.start] = true,
            _ if opaque(x) => any = true,
            _ => {}
        });
    }
    (!any).then_some(used)
}

/// The first and last rowid keys a scan reads, and whether all between them match.
type RowidBounds = ([u8; 8], [u8; 8], bool);

/// Whether an index on a column of affinity `column` finds every row where `column = other`
/// holds, `other` having affinity `other`: the comparison must convert none of the
/// column's stored values (SQLite's rule): with a TEXT column, unless the other side is
/// numeric (its values would be compared as numbers); with a column of no affinity,
/// only when the other side has none either.
fn index_affinity_ok(column: Affinity, other: Option<Affinity>) -> bool {
    match column {
        Affinity::Text => !other.is_some_and(Affinity::is_numeric),
        Affinity::Blob => matches!(other, None | Some(Affinity::Blob)),
        // The other side's value is converted to a number for the lookup.
        Affinity::Numeric | Affinity::Integer | Affinity::Real => true,
    }
}

/// The first key part of index `idx` (of table `t`) that `v`, of affinity `other`, is equal
/// to: `v` as the comparison meets the column's values (converted to a number for a
/// numeric column, to text for a TEXT one), and whether only values equal to it have that
/// key part (see `record::key_part_is_exact`); `None` for NULL, which nothing equals.
fn index_probe_key(
    t: &Table,
    idx: &crate::schema::Index,
    v: Value,
    other: Option<Affinity>,
) -> Option<(Vec<u8>, bool)> {
    if v.is_null() {
        return None;
    }
    let &(c, desc, coll) = &idx.columns[0];
    // (An expression has no affinity: its value is compared as it is.)
    let col_aff = t.columns.get(c).map(|c| c.affinity);
    let v = match (col_aff, other) {
        (Some(a), x) if a.is_numeric() && !x.is_some_and(Affinity::is_numeric) => {
            Affinity::Numeric.apply(v)
        }
        (Some(Affinity::Text), None | Some(Affinity::Blob)) => Affinity::Text.apply(v),
        _ => v,
    };
    let mut prefix = Vec::with_capacity(32);
    crate::record::encode_key_part(&mut prefix, &v, coll, desc);
    Some((prefix, crate::record::key_part_is_exact(&v)))
}

/// Whether evaluating `e` stays within the SQL layer: no subquery (which reads the engine),
/// no registered function or collation (the application's code), no RAISE.
fn is_self_contained(e: &Expr) -> bool {
    let mut contained = true;
    e.walk(&mut |x| {
        contained &= !matches!(
            x,
            Expr::Subquery(_)
                | Expr::Exists(_)
                | Expr::InSelect { .. }
                | Expr::Raise(..)
                | Expr::Window(_)
                | Expr::Function { user: Some(_), .. }
                | Expr::Collate(_, Collation::User(_))
        )
    });
    contained
}

/// A column mask cut after its last marked column (see `Table::read_into`: a decode stops
/// there).
fn trimmed(mut mask: Vec<bool>) -> Vec<bool> {
    mask.truncate(mask.iter().rposition(|&x| x).map_or(0, |p| p + 1));
    mask
}

/// One source of a join: a table read through an access path, or rows read in full.
struct ItemPlan {
    /// Its place in the FROM clause (items are in loop order).
    source: usize,
    table: Option<Arc<Table>>,
    access: Access,
    left: bool,
    width: usize,
}

/// The plans of one prepared statement's select cores, UPDATEs and DELETEs, by the
/// `PlanId` the parser gave them, for one schema: a change of schema (a new `Arc`; the
/// cache keeps the one it was built for alive, so its address is not reused and DDL
/// copies it rather than changing it in place) empties it.
#[derive(Default)]
pub struct PlanCache(parking_lot::Mutex<Plans>);

#[derive(Default)]
struct Plans {
    schema: Option<Arc<Schema>>,
    map: FxHashMap<PlanId, Arc<CorePlan>>,
}

impl std::fmt::Debug for PlanCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PlanCache({} plans)", self.0.lock().map.len())
    }
}

/// One source of a join being run: its plan and its rows.
struct JoinItem<'p> {
    plan: &'p ItemPlan,
    /// The rows, unless the item is a table read through an access path.
    rows: ItemRows,
    /// For an item scanned in full below the first, or a correlated subquery's first
    /// (`Exec::kept_scan`): its rows by the value of the column an equality joins on (see
    /// `HashProbe`).
    hash: Option<Arc<HashProbe>>,
    /// For a table read through an index equality: how many lookups it took, and the
    /// whole table hashed on that column once the lookups come to cost more than reading
    /// it (see `join_level`).
    probes: std::cell::Cell<usize>,
    hashed: std::cell::RefCell<Option<(Vec<Row>, HashProbe)>>,
    /// A table-valued function whose arguments name earlier sources: called again for
    /// each of their rows (its name and arguments).
    lateral: Option<(&'p str, &'p [Expr])>,
}

/// A join item's rows: its own, or a table's kept for a correlated subquery's runs.
enum ItemRows {
    Own(Vec<Row>),
    Kept(Arc<Vec<Row>>),
}

impl std::ops::Deref for ItemRows {
    type Target = [Row];
    fn deref(&self) -> &[Row] {
        match self {
            ItemRows::Own(rows) => rows,
            ItemRows::Kept(rows) => rows,
        }
    }
}

/// `"COVERING "` when item `i` of `plan` is read through an index equality for nothing but
/// its rowids (which the index entries hold: the table itself is not read), else `""`. (A
/// range's own conditions read the indexed column, so it never covers.)
/// Expression `e` over table `t` in a form that equals an index expression's exactly when
/// both compute the same: each column of `t` named alone in lower case (resolved through
/// `frame`, where `t`'s columns start at the given slot; by name in `t` without it),
/// function names in lower case. `None` when `e` reads anything but `t`'s columns.
fn table_expr_form(e: &Expr, t: &Table, frame: Option<(&Frame, usize)>) -> Option<String> {
    let mut e = e.clone();
    let mut only_t = true;
    e.walk_mut(&mut |x| match x {
        Expr::Column { table, name } => {
            let column = match frame {
                Some((f, start)) => match f.resolve(table.as_deref(), name) {
                    Ok(Some((slot, _))) if (start..start + t.columns.len()).contains(&slot) => {
                        Some(slot - start)
                    }
                    _ => None,
                },
                None => t.column_index(name),
            };
            match column {
                Some(c) => {
                    *table = None;
                    *name = lc(&t.columns[c].name);
                }
                None => only_t = false,
            }
        }
        Expr::Function { name, .. } => *name = lc(name),
        Expr::Param(_) | Expr::Subquery(_) | Expr::Exists(_) | Expr::InSelect { .. } => {
            only_t = false
        }
        _ => {}
    });
    only_t.then(|| format!("{e:?}"))
}

/// Whether a partial index with condition `cond` holds every row a statement over `t`
/// (its columns from `start` in `frame`) with conjuncts `exprs` can return: each term of
/// `cond` is one of the conjuncts (as `table_expr_form` writes them), or is `c IS NOT
/// NULL` beside a conjunct comparing `c` (`=`, `<`, `<=`, `>`, `>=`, `BETWEEN`, `IN`,
/// `LIKE`, not negated), which a NULL `c` never passes. A narrowing of SQLite's rule
/// (`sqlite3ExprImpliesExpr`): when in doubt the index is not used, never wrongly.
fn partial_index_applies(
    cond: &Expr,
    t: &Table,
    frame: &Frame,
    start: usize,
    exprs: &[&Expr],
) -> bool {
    let forms: Vec<String> = exprs
        .iter()
        .filter_map(|e| table_expr_form(e, t, Some((frame, start))))
        .collect();
    // The columns of `t` the conjuncts compare in a way a NULL never passes.
    let column = |e: &Expr| match e {
        Expr::Column { table, name } => match frame.resolve(table.as_deref(), name) {
            Ok(Some((slot, _))) if (start..start + t.columns.len()).contains(&slot) => {
                Some(slot - start)
            }
            _ => None,
        },
        _ => None,
    };
    let mut not_null = Vec::new();
    for e in exprs {
        match e {
            Expr::Binary(BinOp::Eq | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge, a, b) => {
                not_null.extend([column(a), column(b)].into_iter().flatten())
            }
            Expr::Between {
                expr, not: false, ..
            }
            | Expr::InList {
                expr, not: false, ..
            }
            | Expr::Like {
                expr, not: false, ..
            } => not_null.extend(column(expr)),
            _ => {}
        }
    }
    conjuncts(cond).into_iter().all(|term| {
        // `c IS NOT NULL`, `c NOTNULL`.
        let not_null_of = match term {
            Expr::IsNull(c, true) => Some(c),
            Expr::Binary(BinOp::IsNot, c, null) if matches!(**null, Expr::Literal(Value::Null)) => {
                Some(c)
            }
            _ => None,
        };
        if let Some(Expr::Column { name, .. }) = not_null_of.map(|c| &**c) {
            if t.column_index(name).is_some_and(|i| not_null.contains(&i)) {
                return true;
            }
        }
        table_expr_form(term, t, None).is_some_and(|f| forms.contains(&f))
    })
}

/// How EXPLAIN QUERY PLAN names an index's first part: its column, or `<expr>` (as SQLite).
fn first_part_name<'t>(t: &'t Table, idx: &crate::schema::Index) -> &'t str {
    t.columns
        .get(idx.columns[0].0)
        .map_or("<expr>", |c| &c.name)
}

fn covering(plan: &JoinPlan, i: usize) -> &'static str {
    let it = &plan.items[i];
    match (&it.access, &plan.wanted[i], &it.table) {
        (Access::Index(..) | Access::IndexIn(..) | Access::IndexRange(..), Some(columns), _)
            if columns.is_empty() =>
        {
            "COVERING "
        }
        (Access::IndexOrder(idx, ..), wanted, Some(t))
            if covered_parts(t, idx, wanted.as_deref()).is_some() =>
        {
            "COVERING "
        }
        _ => "",
    }
}

/// `c = x OR c = y OR ...` (each side of `=` either way round) as the column `c` and the
/// values it is compared with: the same as `c IN (x, y, ...)`, whose access path it takes.
fn equalities_of_one_column(e: &Expr) -> Option<(&Expr, Vec<&Expr>)> {
    let mut values = Vec::new();
    let mut column: Option<&Expr> = None;
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match e {
            Expr::Binary(BinOp::Or, a, b) => stack.extend([&**b, &**a]),
            Expr::Binary(BinOp::Eq, a, b) => {
                let (col, value) = match (&**a, &**b) {
                    (c @ Expr::Column { .. }, v) if !matches!(v, Expr::Column { .. }) => (c, v),
                    (v, c @ Expr::Column { .. }) if !matches!(v, Expr::Column { .. }) => (c, v),
                    _ => return None,
                };
                // The same name, qualified the same way (a column named two ways is left
                // to the conditions).
                let same = |seen: &Expr| match (seen, col) {
                    (
                        Expr::Column {
                            table: t1,
                            name: n1,
                        },
                        Expr::Column {
                            table: t2,
                            name: n2,
                        },
                    ) => {
                        n1.eq_ignore_ascii_case(n2)
                            && match (t1, t2) {
                                (None, None) => true,
                                (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
                                _ => false,
                            }
                    }
                    _ => false,
                };
                if column.is_some_and(|seen| !same(seen)) {
                    return None;
                }
                column = Some(col);
                values.push(value);
            }
            _ => return None,
        }
    }
    Some((column?, values))
}

/// When the columns a statement reads of `t` (`wanted`; `None`: all) are all parts of
/// index `idx`'s key that read back exactly, the column each part gives (`None` for a part
/// not read); else `None`. A part reads back exactly under BINARY collation, for a column
/// whose affinity decides a number's type (all but BLOB's; see `read_covered`).
fn covered_parts(
    t: &Table,
    idx: &crate::schema::Index,
    wanted: Option<&[bool]>,
) -> Option<Vec<Option<usize>>> {
    let mut parts = vec![None; idx.columns.len()];
    for (c, &w) in wanted?.iter().enumerate() {
        if !w || t.rowid_alias == Some(c) {
            continue;
        }
        let is_part =
            |&(col, _, coll): &(usize, bool, Collation)| col == c && coll == Collation::Binary;
        let p = idx.columns.iter().position(is_part)?;
        if t.columns[c].affinity == Affinity::Blob {
            return None;
        }
        parts[p] = Some(c);
    }
    Some(parts)
}

/// Reads row `r`'s columns that `parts` names (see `covered_parts`) from its entry `key` in
/// index `idx` into `at`, with its rowid; false when a value does not read back exactly
/// (the integer 2^63 - 1 and the real 2^63 share a key, and only a REAL column's numbers
/// are all reals): the row is read then.
fn read_covered(
    t: &Table,
    idx: &crate::schema::Index,
    parts: &[Option<usize>],
    key: &[u8],
    r: i64,
    at: &mut [Value],
) -> bool {
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    let mut pos = 0;
    for (p, &(_, desc, _)) in idx.columns.iter().enumerate() {
        let Some(part) = decode_key_part(key, &mut pos, desc) else {
            return false;
        };
        let Some(c) = parts[p] else { continue };
        // A number in an INTEGER or NUMERIC column is an integer whenever it can be one
        // (affinity made it so); a REAL column's are reals.
        at[c] = match (part, t.columns[c].affinity) {
            (KeyPart::Null, _) => Value::Null,
            (KeyPart::Text(s), _) => Value::from(s),
            (KeyPart::Blob(b), _) => Value::Blob(b.into()),
            (KeyPart::Number(f, 0), Affinity::Real) => Value::Real(f),
            (KeyPart::Number(f, tie), Affinity::Integer | Affinity::Numeric) => {
                if (-TWO_POW_63..TWO_POW_63).contains(&f) && f.fract() == 0.0 {
                    Value::Integer((f as i64).wrapping_add(tie))
                } else if f >= TWO_POW_63 && tie != 0 {
                    Value::Integer(i64::MAX.wrapping_add(tie))
                } else if f == TWO_POW_63 {
                    return false;
                } else {
                    Value::Real(f)
                }
            }
            _ => return false,
        };
    }
    t.set_rowid(r, at);
    true
}

/// What every level of one join's nested loops shares: its items and plan, the frame of
/// the joined row, and the enclosing query's scope.
#[derive(Clone, Copy)]
struct Loops<'a> {
    items: &'a [JoinItem<'a>],
    plan: &'a JoinPlan,
    frame: &'a Frame,
    outer: Option<&'a Scope<'a>>,
}

/// What an access path finds of a table (see `Exec::lookup`).
enum Found {
    /// Rows to read by rowid, in this order; with `true`, exactly those a rowid or index
    /// equality selects (else a superset: see `Exec::lookup`).
    Rowids(SmallVec<[i64; 4]>, bool),
    /// The rows of a rowid range, or of the whole table; with `true`, exactly those the
    /// range's conditions select.
    Scan(Box<beechdb::TxnIter>, bool),
    /// The entries of an index, in the order to read the rows they name.
    Entries(Box<beechdb::TxnIter>),
}

/// Whether item `i` of `plan` is read by streaming its table's rows (see `join_level`): the
/// outermost item, when it is a table read in rowid order (it is read once, so nothing is
/// gained by keeping its rows).
fn streams(plan: &JoinPlan, i: usize) -> bool {
    i == 0
        && plan.items[0].table.is_some()
        && matches!(plan.items[0].access, Access::Scan | Access::RowidRange(..))
}

/// The name of the source holding a RIGHT or FULL join's merged USING values: no name a
/// statement can write, so only `*` and unqualified names reach it (see `SrcCol::merged`).
const MERGED_SOURCE: &str = "\0merged";

/// The columns a USING or NATURAL join `j` matches on, its right side at `right` of `frame`
/// (NATURAL: the right side's columns whose names the left side has too).
fn join_names(frame: &Frame, j: &Join, right: std::ops::Range<usize>) -> Vec<String> {
    if !j.natural {
        return j.using.clone();
    }
    let has = |s: &Source, n: &str| s.columns.iter().any(|c| c.name.eq_ignore_ascii_case(n));
    let left = frame.sources.iter().filter(|s| s.start < right.start);
    let left: Vec<&Source> = left.collect();
    let right = frame.sources.iter().filter(|s| right.contains(&s.start));
    let mut names: Vec<String> = Vec::new();
    for c in right.flat_map(|s| &s.columns) {
        let new = !names.iter().any(|n| n.eq_ignore_ascii_case(&c.name));
        if new && left.iter().any(|s| has(s, &c.name)) {
            names.push(c.name.clone());
        }
    }
    names
}

/// One USING column of a join whose right side is at `right_start..right_end`: the left
/// side's copy (source and column index; unhidden first), the slot of the left side's value
/// merged by an earlier RIGHT or FULL join, if one did (a merged slot past the right side is
/// this join's own or a later one's), and the right copy's source and slot. (In a merged
/// value's own source, `SrcCol::merged` is the slot of the left value it merged.)
struct MergePair {
    source: usize,
    column: usize,
    merged: Option<usize>,
    right_source: usize,
    right: usize,
}

impl MergePair {
    /// The slot of the left side's value.
    fn left(&self, frame: &Frame) -> usize {
        self.merged
            .unwrap_or(frame.sources[self.source].start + self.column)
    }
}

/// The [`MergePair`] of each of `names` both sides have (one that is missing is the join's
/// error, reported where its condition is built).
fn merge_pairs(
    frame: &Frame,
    right_start: usize,
    right_end: usize,
    names: &[String],
) -> Vec<MergePair> {
    let find = |n: &str, range: std::ops::Range<usize>, unhidden: bool| {
        frame.sources.iter().enumerate().find_map(|(si, s)| {
            if !range.contains(&s.start) {
                return None;
            }
            let ci = s
                .columns
                .iter()
                .position(|c| c.name.eq_ignore_ascii_case(n) && !(unhidden && c.hidden))?;
            Some((si, ci))
        })
    };
    names
        .iter()
        .filter_map(|n| {
            let (source, column) =
                find(n, 0..right_start, true).or_else(|| find(n, 0..right_start, false))?;
            let (right_source, rc) = find(n, right_start..right_end, false)?;
            // Back along the merges made since this join's left side was whole: each merged
            // slot's column names the left value its join merged.
            let own = frame.sources[source].start + column;
            let mut merged = frame.sources[source].columns[column].merged;
            while let Some(m) = merged.filter(|&m| m >= right_start) {
                merged = frame.slot(m).flatten().and_then(|c| c.merged);
            }
            Some(MergePair {
                source,
                column,
                merged: merged.filter(|&m| m != own),
                right_source,
                right: frame.sources[right_source].start + rc,
            })
        })
        .collect()
}

/// An equality a `HashProbe` is built on: the column's index among its item's slots,
/// the expression it equals, and the comparison's collation when it is known before the
/// rows are (a compiled comparison), which lets text be hashed too.
struct Equality<'e> {
    column: usize,
    probe: &'e Expr,
    text: Option<Collation>,
    /// The comparison itself.
    eq: &'e Expr,
}

/// Of conditions `exprs`, an equality of a column at slots `range` of `frame` (by name or
/// by slot) with an expression that holds no subquery and that `known` says is bound
/// before those slots are. What a `HashProbe` is built on.
fn equality_probe<'e>(
    exprs: &'e [Expr],
    frame: &Frame,
    range: std::ops::Range<usize>,
    known: impl Fn(&Expr) -> bool,
) -> Option<Equality<'e>> {
    exprs.iter().find_map(|e| {
        let (a, b, text) = match e {
            Expr::Binary(BinOp::Eq, a, b) => (a, b, None),
            Expr::Compare(BinOp::Eq, a, b, info) => (a, b, Some(info.coll)),
            _ => return None,
        };
        [(a, b), (b, a)].into_iter().find_map(|(col, other)| {
            let slot = match &**col {
                Expr::Column { table, name } => frame.resolve(table.as_deref(), name).ok()??.0,
                Expr::Slot(slot) => *slot,
                _ => return None,
            };
            let mut subquery = false;
            other.walk(&mut |x| {
                subquery |= matches!(
                    x,
                    Expr::Exists(_) | Expr::Subquery(_) | Expr::InSelect { .. }
                )
            });
            (range.contains(&slot) && !subquery && known(other)).then(|| Equality {
                column: slot - range.start,
                probe: other,
                text,
                eq: e,
            })
        })
    })
}

/// The join level (index into `bound`) at which everything `e` names from `frame` is
/// bound; the last level if it holds a subquery.
fn level_of(e: &Expr, frame: &Frame, bound: &[usize]) -> usize {
    // The item holding a slot starts at the greatest first slot not past it (the items
    // tile the frame, in whatever order they are joined).
    let level_at = |slot: usize| {
        (0..bound.len())
            .filter(|&l| bound[l] <= slot)
            .max_by_key(|&l| bound[l])
            .unwrap_or(0)
    };
    let mut level = 0;
    let mut subquery = false;
    e.walk(&mut |x| match x {
        Expr::Column { table, name } => {
            if let Ok(Some((slot, _))) = frame.resolve(table.as_deref(), name) {
                level = level.max(level_at(slot));
            }
        }
        Expr::Slot(slot) => level = level.max(level_at(*slot)),
        Expr::Exists(_) | Expr::Subquery(_) | Expr::InSelect { .. } => subquery = true,
        _ => {}
    });
    if subquery {
        bound.len() - 1
    } else {
        level
    }
}

/// The rows of a scanned join item grouped by the value of one column, built once per
/// join: for an equality `column = expression of earlier items` with no index to use,
/// each outer row then reads only its candidates (SQLite's automatic index, in memory).
///
/// A superset is all it must give: every candidate still passes the join's conditions.
/// Numbers are grouped by value. Text is grouped by its form in the comparison's
/// collation when that is known and can be folded (BINARY, NOCASE, RTRIM), and then so is
/// each number by its text (affinity may make either side text), and text that reads as
/// a number by that number too (affinity may make it one); else text rows are candidates
/// for every probe, as are NULLs and blobs. A probe that is not a number or text (or text
/// without text groups) reads all rows.
struct HashProbe {
    probe: Expr,
    buckets: Buckets,
    /// Rows by their text folded in the collation, when text is grouped.
    texts: Option<(Collation, TextGroups)>,
    others: Vec<usize>,
}

/// Rows (their positions) by folded text.
type TextGroups = FxHashMap<Vec<u8>, Vec<usize>>;

/// Rows (their positions, ascending) by number: one array holding every group in turn, so
/// that building allocates per table, not per distinct value.
#[derive(Default)]
struct Buckets {
    /// Where each number's rows lie in `rows`.
    at: FxHashMap<NumKey, (u32, u32)>,
    rows: Vec<usize>,
}

impl Buckets {
    /// Groups `(number, row)` pairs, given in ascending row order.
    fn new(pairs: &[(NumKey, usize)]) -> Buckets {
        let mut at: FxHashMap<NumKey, (u32, u32)> = FxHashMap::default();
        for (k, _) in pairs {
            at.entry(*k).or_default().1 += 1;
        }
        // Each group's span: counted above in its second field, which from here on is
        // where its next row goes (its end once all are placed).
        let mut start = 0;
        for (from, next) in at.values_mut() {
            let len = *next;
            (*from, *next) = (start, start);
            start += len;
        }
        let mut rows = vec![0; pairs.len()];
        for &(k, i) in pairs {
            let next = &mut at.get_mut(&k).expect("counted above").1;
            rows[*next as usize] = i;
            *next += 1;
        }
        Buckets { at, rows }
    }

    fn get(&self, k: &NumKey) -> Option<&[usize]> {
        self.at
            .get(k)
            .map(|&(from, end)| &self.rows[from as usize..end as usize])
    }
}

#[derive(PartialEq, Eq, Hash, Clone, Copy)]
enum NumKey {
    Int(i64),
    Real(u64),
}

/// The key under which numbers that compare equal meet: an integral real in range is its
/// integer (SQLite compares integers and reals exactly).
fn num_key(v: &Value) -> Option<NumKey> {
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    match v {
        Value::Integer(i) => Some(NumKey::Int(*i)),
        Value::Real(r) if r.fract() == 0.0 && (-TWO_POW_63..TWO_POW_63).contains(r) => {
            Some(NumKey::Int(*r as i64))
        }
        Value::Real(r) if !r.is_nan() => Some(NumKey::Real(r.to_bits())),
        _ => None,
    }
}

/// Text as collation `coll` compares it, for grouping: `None` for a collation the
/// application registered (which cannot be folded here).
fn folded(t: &str, coll: Collation) -> Option<Vec<u8>> {
    match coll {
        Collation::Binary => Some(t.as_bytes().to_vec()),
        Collation::NoCase => Some(t.to_ascii_lowercase().into_bytes()),
        Collation::Rtrim => Some(t.trim_end_matches(' ').as_bytes().to_vec()),
        Collation::User(_) => None,
    }
}

impl HashProbe {
    /// Rows `rows` grouped by column `column`, for probes by `probe`; text too in
    /// collation `text`, when given.
    fn build(rows: &[Row], column: usize, probe: &Expr, text: Option<Collation>) -> HashProbe {
        let coll = text.filter(|c| !matches!(c, Collation::User(_)));
        let mut h = HashProbe {
            probe: probe.clone(),
            buckets: Buckets::default(),
            texts: coll.map(|c| (c, FxHashMap::default())),
            others: Vec::new(),
        };
        let mut numbers = Vec::with_capacity(rows.len());
        for (i, r) in rows.iter().enumerate() {
            let v = &r[column];
            let mut placed = false;
            if let Some(k) = num_key(v) {
                numbers.push((k, i));
                placed = true;
            }
            // An integer's text (digits, a sign) is not grouped: no other number's text
            // reads the same, and text equal to it once folded (RTRIM folds trailing
            // spaces, which `parse_number` trims; NOCASE leaves digits) reads as that
            // integer, so it and the integer find each other by number.
            if let (Some((c, texts)), Value::Real(_) | Value::Text(_)) = (&mut h.texts, v) {
                // (A real's text is the one TEXT affinity makes of it.)
                if let Some(f) = folded(&v.to_text(), *c) {
                    texts.entry(f).or_default().push(i);
                    placed = true;
                }
                if let Value::Text(_) = v {
                    if let Some(k) = num_key(&Affinity::Numeric.apply(v.clone())) {
                        numbers.push((k, i));
                    }
                }
            }
            if !placed {
                h.others.push(i);
            }
        }
        h.buckets = Buckets::new(&numbers);
        h
    }

    /// The rows (in scan order, each once) that can match `v`; `None`: all of them.
    fn candidates(&self, v: &Value) -> Option<std::borrow::Cow<'_, [usize]>> {
        let mut from: SmallVec<[&[usize]; 3]> = SmallVec::new();
        match (v, &self.texts) {
            // Text equal to an integer's text in the collation reads as the integer
            // (see `build`): an integer's rows are all found by number.
            (Value::Integer(_), _) | (Value::Real(_), None) => {}
            (Value::Real(_) | Value::Text(_), Some((c, texts))) => {
                if let Some(b) = texts.get(&folded(&v.to_text(), *c)?) {
                    from.push(b);
                }
            }
            _ => return None,
        }
        let number = match v {
            Value::Text(_) => num_key(&Affinity::Numeric.apply(v.clone())),
            _ => num_key(v),
        };
        if let Some(b) = number.and_then(|k| self.buckets.get(&k)) {
            from.push(b);
        }
        if !self.others.is_empty() {
            from.push(&self.others);
        }
        Some(match from.as_slice() {
            [] => std::borrow::Cow::Borrowed(&[][..]),
            [only] => std::borrow::Cow::Borrowed(*only),
            _ => {
                let mut c: Vec<usize> = from.concat();
                c.sort_unstable();
                c.dedup();
                std::borrow::Cow::Owned(c)
            }
        })
    }
}

/// The values an `IN` access path looks up: a list's (which have no affinity), or the rows
/// of a subquery that reads nothing of the statement's rows (with its column's affinity).
#[derive(Clone)]
enum InValues {
    List(Vec<Expr>),
    Query(Box<Select>),
}

/// How a table of a join is read.
#[derive(Clone)]
enum Access {
    /// Every row.
    Scan,
    /// The rows whose rowid equals one of the values (`rowid IN (...)`; a superset for
    /// the conditions, which are checked on each row).
    RowidIn(InValues),
    /// The rows whose indexed first column equals one of the values (`c IN (...)`; a
    /// superset, as for `RowidIn`).
    IndexIn(Arc<crate::schema::Index>, InValues),
    /// The row whose rowid equals the expression (of earlier tables and outer queries).
    Rowid(Expr),
    /// The rows whose indexed first column equals the expression.
    Index(Arc<crate::schema::Index>, Expr, Option<Affinity>),
    /// The rows whose rowid lies between the bounds (a superset: the conditions are
    /// still evaluated on each row).
    RowidRange(Option<Expr>, Option<Expr>),
    /// The rows whose indexed first column (numeric affinity, ascending) lies between the
    /// bounds (a superset, as for `RowidRange`).
    IndexRange(Arc<crate::schema::Index>, Option<Expr>, Option<Expr>),
    /// Every row, in the index's order (with `true`, from its last entry back), or with
    /// bounds those `IndexRange` would find, in that order: an ORDER BY with a LIMIT that
    /// the index's order satisfies, its entries read until the LIMIT is reached.
    IndexOrder(Arc<crate::schema::Index>, bool, Option<Expr>, Option<Expr>),
}

impl<'a> Exec<'a> {
    pub fn db(&mut self, name: &str) -> Result<Db> {
        if let Some(d) = self.dbs.get(name) {
            return Ok(d.clone());
        }
        let d = self.env.open_db(name)?;
        self.dbs.insert(name.to_string(), d.clone());
        Ok(d)
    }

    /// Every row of `table` with its rowid last.
    pub fn table_rows(&mut self, table: &Table) -> Result<Vec<Row>> {
        let db = self.db(&table.db)?;
        rows_with_rowids(table, self.txn.iter(&db))
    }

    // ---- expressions ----

    /// The value of `e` in scope `sc`. Leaves are read here, inlined where called; the
    /// rest in `eval_node`, whose frame is large.
    #[inline]
    pub fn eval(&mut self, e: &Expr, sc: &Scope) -> Result<Value> {
        match e {
            Expr::Slot(i) => Ok(sc.row.get(*i).cloned().unwrap_or(Value::Null)),
            Expr::Literal(v) => Ok(v.clone()),
            Expr::Param(i) => Ok(self.params.get(i - 1).cloned().unwrap_or(Value::Null)),
            _ => self.eval_node(e, sc),
        }
    }

    #[inline(never)]
    fn eval_node(&mut self, e: &Expr, sc: &Scope) -> Result<Value> {
        Ok(match e {
            Expr::Literal(_) | Expr::Param(_) | Expr::Slot(_) => self.eval(e, sc)?,
            Expr::Column { table, name } => self.column(table.as_deref(), name, sc)?,
            Expr::Unary(op, a) => {
                let v = self.eval(a, sc)?;
                match op {
                    UnaryOp::Neg => func::negate(&v),
                    UnaryOp::Plus => v,
                    UnaryOp::Not => match v.truth() {
                        None => Value::Null,
                        Some(b) => Value::Integer(!b as i64),
                    },
                    UnaryOp::BitNot => match v {
                        Value::Null => Value::Null,
                        v => Value::Integer(!v.as_i64()),
                    },
                }
            }
            Expr::Binary(op, a, b) => self.binary(*op, a, b, sc)?,
            Expr::Compare(op, a, b, info) => self.compare_with(*op, a, b, *info, sc)?,
            Expr::Between {
                expr,
                not,
                low,
                high,
                known,
            } => {
                let [ge, le] = match known {
                    Some(k) => k.map(Some),
                    None => [None, None],
                };
                let ge = match ge {
                    Some(info) => self.compare_with(BinOp::Ge, expr, low, info, sc)?,
                    None => self.compare(BinOp::Ge, expr, low, sc)?,
                };
                let le = match le {
                    Some(info) => self.compare_with(BinOp::Le, expr, high, info, sc)?,
                    None => self.compare(BinOp::Le, expr, high, sc)?,
                };
                let both = and3(ge.truth(), le.truth());
                bool3(both.map(|b| b != *not))
            }
            Expr::IsNull(a, not) => Value::Integer((self.eval(a, sc)?.is_null() != *not) as i64),
            Expr::Cast(a, ty) => cast(self.eval(a, sc)?, ty.as_deref()),
            Expr::Collate(a, _) => self.eval(a, sc)?,
            _ => self.eval_rare(e, sc)?,
        })
    }

    /// The nodes `eval_node` leaves out: lists, subqueries, patterns, CASE, calls (kept
    /// apart so that the common nodes' frame stays small).
    #[inline(never)]
    fn eval_rare(&mut self, e: &Expr, sc: &Scope) -> Result<Value> {
        Ok(match e {
            Expr::InList {
                expr,
                not,
                list,
                sorted,
            } => {
                let lhs = self.eval(expr, sc)?;
                if list.is_empty() {
                    return Ok(Value::Integer(*not as i64));
                }
                if lhs.is_null() {
                    return Ok(Value::Null);
                }
                let aff = self.affinity(expr, sc);
                let coll = self.collation(expr, sc);
                if list.len() >= SORTED_LIST
                    && list
                        .iter()
                        .all(|e| matches!(e, Expr::Literal(_) | Expr::Param(_)))
                {
                    let probe = self.list_probe(sorted, list, aff, coll, sc)?;
                    return Ok(probe.answer(lhs, *not));
                }
                let mut saw_null = false;
                // `a IN (x, y)` is `a = +x OR a = +y`: the list's values have no affinity.
                for item in list {
                    let v = self.eval(item, sc)?;
                    match compare_values(&lhs, aff, &v, None, coll) {
                        None => saw_null = true,
                        Some(Ordering::Equal) => return Ok(Value::Integer(!*not as i64)),
                        Some(_) => {}
                    }
                }
                if saw_null {
                    Value::Null
                } else {
                    Value::Integer(*not as i64)
                }
            }
            Expr::InSelect { expr, not, select } => {
                let lhs = self.eval(expr, sc)?;
                let kept = self
                    .subqueries
                    .key(select)
                    .and_then(|k| self.subqueries.kept.get(&k));
                if let Some(p) = kept.and_then(|k| k.probe.clone()) {
                    return Ok(p.answer(lhs, *not));
                }
                let result = self.subquery(select, sc)?;
                if result.columns.len() != 1 {
                    return Err(Error::Sql(format!(
                        "sub-select returns {} columns - expected 1",
                        result.columns.len()
                    )));
                }
                if result.rows.is_empty() {
                    return Ok(Value::Integer(*not as i64));
                }
                if lhs.is_null() {
                    return Ok(Value::Null);
                }
                let aff = self.affinity(expr, sc);
                let sub_aff = self.select_affinity(select, Some(sc));
                let coll = self.collation(expr, sc);
                if let Some(probe) = self.in_probe(select, aff, sub_aff, coll) {
                    return Ok(probe.answer(lhs, *not));
                }
                let mut saw_null = false;
                for r in &result.rows {
                    match compare_values(&lhs, aff, &r[0], sub_aff, coll) {
                        None => saw_null = true,
                        Some(Ordering::Equal) => return Ok(Value::Integer(!*not as i64)),
                        Some(_) => {}
                    }
                }
                if saw_null {
                    Value::Null
                } else {
                    Value::Integer(*not as i64)
                }
            }
            Expr::Like {
                expr,
                not,
                glob,
                pattern,
                escape,
            } => {
                // Columns, constants and parameters are matched where they are.
                let params = self.params;
                let (v_made, p_made);
                let v = match leaf_ref(expr, sc, params) {
                    Some(v) => v,
                    None => {
                        v_made = self.eval(expr, sc)?;
                        &v_made
                    }
                };
                let p = match leaf_ref(pattern, sc, params) {
                    Some(p) => p,
                    None => {
                        p_made = self.eval(pattern, sc)?;
                        &p_made
                    }
                };
                // SQLite's SQLITE_LIMIT_LIKE_PATTERN_LENGTH, checked first as in likeFunc.
                let pattern_bytes = match p {
                    Value::Null => 0,
                    Value::Text(t) => t.len(),
                    Value::Blob(b) => b.len(),
                    other => other.to_text().len(),
                };
                if pattern_bytes > 50_000 {
                    return Err(Error::Sql("LIKE or GLOB pattern too complex".into()));
                }
                let esc = match escape {
                    Some(x) => {
                        let x = self.eval(x, sc)?;
                        if x.is_null() {
                            return Ok(Value::Null);
                        }
                        let t = x.to_text();
                        if t.chars().count() != 1 {
                            return Err(Error::Sql(
                                "ESCAPE expression must be a single character".into(),
                            ));
                        }
                        t.chars().next()
                    }
                    None => None,
                };
                if v.is_null() || p.is_null() {
                    return Ok(Value::Null);
                }
                // Text is matched in place; other values as their text.
                fn text(x: &Value) -> std::borrow::Cow<'_, str> {
                    match x {
                        Value::Text(t) => std::borrow::Cow::Borrowed(&**t),
                        other => std::borrow::Cow::Owned(other.to_text()),
                    }
                }
                let m = if *glob {
                    func::glob(&text(v), &text(p))
                } else {
                    func::like(&text(v), &text(p), esc)
                };
                Value::Integer((m != *not) as i64)
            }
            Expr::Case { base, whens, else_ } => {
                let base_v = match base {
                    Some(b) => Some(self.eval(b, sc)?),
                    None => None,
                };
                for (w, t) in whens {
                    let hit = match &base_v {
                        Some(bv) => {
                            let wv = self.eval(w, sc)?;
                            let coll = self.collation(base.as_ref().unwrap(), sc);
                            let (ba, wa) = (
                                self.affinity(base.as_ref().unwrap(), sc),
                                self.affinity(w, sc),
                            );
                            compare_values(bv, ba, &wv, wa, coll) == Some(Ordering::Equal)
                        }
                        None => self.eval(w, sc)?.truth() == Some(true),
                    };
                    if hit {
                        return self.eval(t, sc);
                    }
                }
                match else_ {
                    Some(x) => self.eval(x, sc)?,
                    None => Value::Null,
                }
            }
            Expr::Function {
                name, args, user, ..
            } => {
                if is_aggregate_call(e) {
                    return match sc.agg.and_then(|a| a.get(&key_of(e))) {
                        Some(v) => Ok(v.clone()),
                        None => Err(Error::Sql(format!("misuse of aggregate function {name}()"))),
                    };
                }
                match name.as_str() {
                    _ if user.is_some() => {}
                    "last_insert_rowid" => return Ok(Value::Integer(*self.last_rowid)),
                    "changes" => return Ok(Value::Integer(self.connection_changes.0 as i64)),
                    "total_changes" => return Ok(Value::Integer(self.connection_changes.1 as i64)),
                    "coalesce" | "ifnull" | "iif" => {
                        // Lazily: later arguments may be errors that must not run.
                        if name == "iif" && args.len() == 3 {
                            let c = self.eval(&args[0], sc)?;
                            return self
                                .eval(&args[if c.truth() == Some(true) { 1 } else { 2 }], sc);
                        }
                        if args.len() < 2 {
                            return Err(Error::Sql(format!(
                                "wrong number of arguments to function {name}()"
                            )));
                        }
                        for a in args {
                            let v = self.eval(a, sc)?;
                            if !v.is_null() {
                                return Ok(v);
                            }
                        }
                        return Ok(Value::Null);
                    }
                    _ => {}
                }
                let vals = self.eval_all(args.iter(), sc)?;
                if let Some(UserFunction::Scalar(f)) = user {
                    return f(&vals);
                }
                if crate::json::is_json_function(name) || name.starts_with("->") {
                    // An argument that a JSON function made is embedded as JSON.
                    let is_json: Vec<bool> = args
                        .iter()
                        .zip(&vals)
                        .map(|(a, v)| crate::json::Made::by(a).is_json(v))
                        .collect();
                    return crate::json::call(name, &vals, &is_json);
                }
                func::call(name, &vals)?
            }
            Expr::Exists(sel) => {
                let r = self.subquery(sel, sc)?;
                Value::Integer(!r.rows.is_empty() as i64)
            }
            Expr::Subquery(sel) => {
                let r = self.subquery(sel, sc)?;
                r.rows
                    .first()
                    .and_then(|r| r.first().cloned())
                    .unwrap_or(Value::Null)
            }
            Expr::Row(_) => return Err(Error::Sql("row value misused".into())),
            Expr::Window(w) => {
                return match sc.agg.and_then(|a| a.get(&key_of(e))) {
                    Some(v) => Ok(v.clone()),
                    None => Err(Error::Sql(format!(
                        "misuse of window function {}()",
                        w.name
                    ))),
                }
            }
            Expr::Raise(kind, msg) => {
                if self.trigger_depth == 0 {
                    return Err(Error::Sql(
                        "RAISE() may only be used within a trigger-program".into(),
                    ));
                }
                return Err(match kind {
                    RaiseKind::Ignore => Error::Raise("\u{0}ignore".into()),
                    _ => Error::Raise(msg.clone().unwrap_or_default()),
                });
            }
            Expr::Literal(_)
            | Expr::Param(_)
            | Expr::Slot(_)
            | Expr::Column { .. }
            | Expr::Unary(..)
            | Expr::Binary(..)
            | Expr::Compare(..)
            | Expr::Between { .. }
            | Expr::IsNull(..)
            | Expr::Cast(..)
            | Expr::Collate(..) => self.eval_node(e, sc)?,
        })
    }

    /// Whether `table.name`, naming no column, is a string: SQLite's fallback (on by
    /// default, and counted on: Django writes `WHERE tbl_name = "t"`) for a double-quoted
    /// name.
    fn quoted_string(&self, table: Option<&str>, name: &str) -> bool {
        table.is_none() && self.quoted.iter().any(|q| q == name)
    }

    /// What a name naming no column stands for instead: a double-quoted string, or `TRUE`
    /// and `FALSE` written bare (1 and 0, as in SQLite).
    fn fallback(&self, table: Option<&str>, name: &str) -> Option<Value> {
        if self.quoted_string(table, name) {
            return Some(Value::text(name));
        }
        match table {
            None if name.eq_ignore_ascii_case("true") => Some(Value::Integer(1)),
            None if name.eq_ignore_ascii_case("false") => Some(Value::Integer(0)),
            _ => None,
        }
    }

    /// An error for the first column `e` names (outside its subqueries) that neither
    /// `frame` nor an enclosing query has, unless it is a double-quoted string.
    fn check_names(&self, e: &Expr, frame: &Frame, outer: Option<&Scope>) -> Result<()> {
        let mut problem = None;
        e.walk(&mut |x| {
            let Expr::Column { table, name } = x else {
                return;
            };
            if problem.is_some() {
                return;
            }
            let mut frames = std::iter::once(frame)
                .chain(std::iter::successors(outer, |s| s.outer).map(|s| s.frame));
            // An ambiguous name (several sources have it) is the planner's to report.
            if frames.any(|f| {
                f.resolve(table.as_deref(), name)
                    .map_or(true, |r| r.is_some())
            }) {
                return;
            }
            if self.fallback(table.as_deref(), name).is_none() {
                problem = Some(no_such_column(table.as_deref(), name));
            }
        });
        problem.map_or(Ok(()), Err)
    }

    fn column(&self, table: Option<&str>, name: &str, sc: &Scope) -> Result<Value> {
        let mut s = Some(sc);
        while let Some(scope) = s {
            if let Some((slot, _)) = scope.frame.resolve(table, name)? {
                let shallowest = &self.subqueries.shallowest;
                shallowest.set(shallowest.get().min(depth(scope)));
                return Ok(scope.row.get(slot).cloned().unwrap_or(Value::Null));
            }
            s = scope.outer;
        }
        self.fallback(table, name)
            .ok_or_else(|| no_such_column(table, name))
    }

    fn src_col<'s>(&self, e: &Expr, sc: &'s Scope<'s>) -> Option<&'s SrcCol> {
        let (table, name) = match e {
            Expr::Column { table, name } => (table, name),
            Expr::Slot(i) => return sc.frame.slot(*i)?,
            _ => return None,
        };
        let mut s = Some(sc);
        while let Some(scope) = s {
            if let Ok(Some((_, col))) = scope.frame.resolve(table.as_deref(), name) {
                return col;
            }
            s = scope.outer;
        }
        None
    }

    /// The affinity of an expression: a column's, a CAST's, else none.
    pub fn affinity(&self, e: &Expr, sc: &Scope) -> Option<Affinity> {
        match e {
            Expr::Column { table, name } => {
                let mut s = Some(sc);
                while let Some(scope) = s {
                    if let Ok(Some((_, col))) = scope.frame.resolve(table.as_deref(), name) {
                        // The rowid has INTEGER affinity.
                        return col.map_or(Some(Affinity::Integer), |c| c.affinity);
                    }
                    s = scope.outer;
                }
                None
            }
            // The rowid has INTEGER affinity.
            Expr::Slot(i) => sc
                .frame
                .slot(*i)
                .and_then(|c| c.map_or(Some(Affinity::Integer), |c| c.affinity)),
            Expr::Cast(_, ty) => Some(Affinity::of_declared(ty.as_deref())),
            Expr::Collate(a, _) => self.affinity(a, sc),
            Expr::Subquery(sel) => self.select_affinity(sel, Some(sc)),
            _ => None,
        }
    }

    /// The affinity of a subquery's first result column (its names may reach `outer`).
    fn select_affinity(&self, sel: &Select, outer: Option<&Scope>) -> Option<Affinity> {
        let Core::Select { columns, from, .. } = &sel.first else {
            return None;
        };
        let Some(ResultColumn::Expr(e, _)) = columns.first() else {
            return None;
        };
        let frame = self.frame_of(from.as_ref()).ok()?;
        let row = vec![Value::Null; frame.width];
        self.affinity(e, &Scope::new(&frame, &row, outer))
    }

    /// The collation of an expression: an explicit COLLATE, else a column's.
    pub fn collation(&self, e: &Expr, sc: &Scope) -> Collation {
        if let Some(c) = self.explicit_collation(e) {
            return c;
        }
        match e {
            Expr::Column { .. } | Expr::Slot(_) => {
                self.src_col(e, sc).map_or(Collation::Binary, |c| c.coll)
            }
            // As SQLite's: a CAST keeps its operand's column's collation.
            Expr::Cast(inner, _) => self.collation(inner, sc),
            _ => Collation::Binary,
        }
    }

    /// The collation a COLLATE in `e` gives it, as SQLite finds one: a COLLATE on an
    /// operand carries up through operators, casts and function calls (the left operand's
    /// first), so `t || ' ' COLLATE RTRIM` compares in RTRIM.
    fn explicit_collation(&self, e: &Expr) -> Option<Collation> {
        match e {
            Expr::Collate(_, c) => Some(*c),
            Expr::Unary(_, a) | Expr::Cast(a, _) => self.explicit_collation(a),
            Expr::Binary(_, a, b) => self
                .explicit_collation(a)
                .or_else(|| self.explicit_collation(b)),
            Expr::Function { args, .. } => args.iter().find_map(|a| self.explicit_collation(a)),
            _ => None,
        }
    }

    fn compare(&mut self, op: BinOp, a: &Expr, b: &Expr, sc: &Scope) -> Result<Value> {
        if let (Expr::Row(x), Expr::Row(y)) = (a, b) {
            return self.compare_rows(op, x, y, sc);
        }
        let info = self.cmp_info(a, b, sc);
        self.compare_with(op, a, b, info, sc)
    }

    /// The affinities and collation comparing `a` with `b` takes.
    fn cmp_info(&self, a: &Expr, b: &Expr, sc: &Scope) -> CmpInfo {
        let coll = self
            .explicit_collation(a)
            .or_else(|| self.explicit_collation(b))
            .unwrap_or_else(|| {
                if matches!(a, Expr::Column { .. } | Expr::Slot(_)) {
                    self.collation(a, sc)
                } else {
                    self.collation(b, sc)
                }
            });
        CmpInfo {
            left: self.affinity(a, sc),
            right: self.affinity(b, sc),
            coll,
        }
    }

    /// Resolves `e` against `frame` once: column names to slots, comparisons compiled.
    fn bind(&self, e: &mut Expr, frame: &Frame) {
        frame.bind(e);
        self.compile_comparisons(e, frame);
    }

    /// A copy of `e` bound to `frame` (see [`Exec::bind`]).
    fn bound(&self, e: &Expr, frame: &Frame) -> Expr {
        let mut e = e.clone();
        self.bind(&mut e, frame);
        e
    }

    /// Turns the comparisons of `e` whose affinities and collation do not depend on the
    /// row or on outer queries (their operands name no column but by slot of `frame`, and
    /// hold no subquery at the top) into `Expr::Compare` or a `known` BETWEEN.
    fn compile_comparisons(&self, e: &mut Expr, frame: &Frame) {
        fn fixed(e: &Expr) -> bool {
            match e {
                Expr::Column { .. } | Expr::Subquery(_) | Expr::Row(_) => false,
                Expr::Collate(inner, _) => fixed(inner),
                _ => true,
            }
        }
        let empty = vec![Value::Null; frame.width];
        let sc = Scope::new(frame, &empty, None);
        e.walk_mut(&mut |x| match x {
            Expr::Binary(op, a, b) if op.is_comparison() && fixed(a) && fixed(b) => {
                let info = self.cmp_info(a, b, &sc);
                let placeholder = || Box::new(Expr::Literal(Value::Null));
                let (a, b) = (
                    std::mem::replace(a, placeholder()),
                    std::mem::replace(b, placeholder()),
                );
                *x = Expr::Compare(*op, a, b, info);
            }
            Expr::Between {
                expr,
                low,
                high,
                known,
                ..
            } if fixed(expr) && fixed(low) && fixed(high) => {
                *known = Some([
                    self.cmp_info(expr, low, &sc),
                    self.cmp_info(expr, high, &sc),
                ]);
            }
            _ => {}
        });
    }

    /// Compares `a` with `b` by `op`, with the affinities and collation `info` gives.
    fn compare_with(
        &mut self,
        op: BinOp,
        a: &Expr,
        b: &Expr,
        info: CmpInfo,
        sc: &Scope,
    ) -> Result<Value> {
        let CmpInfo {
            left: aa,
            right: ab,
            coll,
        } = info;
        if let Some(t) = self.int_compare(op, a, b, info, sc) {
            return Ok(Value::Integer(t as i64));
        }
        let (va, vb) = (self.eval(a, sc)?, self.eval(b, sc)?);
        if matches!(op, BinOp::Is | BinOp::IsNot) {
            let same = match (va.is_null(), vb.is_null()) {
                (true, true) => true,
                (false, false) => compare_values(&va, aa, &vb, ab, coll) == Some(Ordering::Equal),
                _ => false,
            };
            return Ok(Value::Integer((same == (op == BinOp::Is)) as i64));
        }
        Ok(match compare_values(&va, aa, &vb, ab, coll) {
            None => Value::Null,
            Some(o) => Value::Integer(compare_result(op, o) as i64),
        })
    }

    /// `a op b` when both are integer leaves (see `int_leaf`), compared in place (no value
    /// copied), unless TEXT affinity makes them text; `None` otherwise.
    #[inline]
    fn int_compare(
        &self,
        op: BinOp,
        a: &Expr,
        b: &Expr,
        info: CmpInfo,
        sc: &Scope,
    ) -> Option<bool> {
        if info.left == Some(Affinity::Text) || info.right == Some(Affinity::Text) {
            return None;
        }
        Some(compare_result(
            op,
            self.int_leaf(a, sc)?.cmp(&self.int_leaf(b, sc)?),
        ))
    }

    /// Whether condition `e` holds, when it is a comparison or a BETWEEN of integer leaves
    /// (a scan's usual filter): decided here, without the general evaluator's frame.
    #[inline]
    fn int_condition(&self, e: &Expr, sc: &Scope) -> Option<bool> {
        match e {
            Expr::Compare(op, a, b, info) => self.int_compare(*op, a, b, *info, sc),
            Expr::Between {
                expr,
                not,
                low,
                high,
                known: Some([ge, le]),
            } => {
                let ge = self.int_compare(BinOp::Ge, expr, low, *ge, sc)?;
                let le = self.int_compare(BinOp::Le, expr, high, *le, sc)?;
                Some((ge && le) != *not)
            }
            _ => None,
        }
    }

    /// The integer a leaf (a slot, literal or parameter) holds, read in place.
    #[inline]
    fn int_leaf(&self, e: &Expr, sc: &Scope) -> Option<i64> {
        match leaf_ref(e, sc, self.params) {
            Some(Value::Integer(x)) => Some(*x),
            _ => None,
        }
    }

    fn compare_rows(&mut self, op: BinOp, x: &[Expr], y: &[Expr], sc: &Scope) -> Result<Value> {
        if x.len() != y.len() {
            return Err(Error::Sql("row value misused".into()));
        }
        let mut result = Some(true);
        for (a, b) in x.iter().zip(y) {
            let eq = self.compare(BinOp::Eq, a, b, sc)?.truth();
            match op {
                BinOp::Eq | BinOp::Ne | BinOp::Is | BinOp::IsNot => result = and3(result, eq),
                _ => {
                    if eq != Some(true) {
                        return self.compare(op, a, b, sc);
                    }
                }
            }
        }
        Ok(match op {
            BinOp::Eq | BinOp::Is => bool3(result),
            BinOp::Ne | BinOp::IsNot => bool3(result.map(|r| !r)),
            BinOp::Le | BinOp::Ge => Value::Integer(1),
            _ => Value::Integer(0),
        })
    }

    fn binary(&mut self, op: BinOp, a: &Expr, b: &Expr, sc: &Scope) -> Result<Value> {
        Ok(match op {
            BinOp::And => {
                let x = self.eval(a, sc)?.truth();
                if x == Some(false) {
                    return Ok(Value::Integer(0));
                }
                bool3(and3(x, self.eval(b, sc)?.truth()))
            }
            BinOp::Or => {
                let x = self.eval(a, sc)?.truth();
                if x == Some(true) {
                    return Ok(Value::Integer(1));
                }
                let y = self.eval(b, sc)?.truth();
                bool3(match (x, y) {
                    (_, Some(true)) => Some(true),
                    (Some(false), Some(false)) => Some(false),
                    _ => None,
                })
            }
            op if op.is_comparison() => self.compare(op, a, b, sc)?,
            BinOp::Concat => func::concat(&self.eval(a, sc)?, &self.eval(b, sc)?)?,
            BinOp::BitAnd | BinOp::BitOr | BinOp::Shl | BinOp::Shr => {
                func::bitwise(op, &self.eval(a, sc)?, &self.eval(b, sc)?)
            }
            _ => {
                let aop = match op {
                    BinOp::Add => ArithOp::Add,
                    BinOp::Sub => ArithOp::Sub,
                    BinOp::Mul => ArithOp::Mul,
                    BinOp::Div => ArithOp::Div,
                    _ => ArithOp::Rem,
                };
                arith(aop, &self.eval(a, sc)?, &self.eval(b, sc)?)
            }
        })
    }

    // ---- SELECT ----

    /// The columns a FROM clause brings, without reading any row.
    pub(crate) fn frame_of(&self, from: Option<&From>) -> Result<Frame> {
        let mut frame = Frame::default();
        if let Some(f) = from {
            self.add_from_columns(f, &mut frame)?;
        }
        Ok(frame)
    }

    /// Hides the right side's copies of join `j`'s USING or NATURAL columns (its right side
    /// at `right_start..` of `frame`); for a RIGHT or FULL join, adds a source of their merged
    /// values after the right side's columns, which the left copies lead to (see
    /// `SrcCol::merged`; `Exec::outer_join` fills it).
    fn hide_join_columns(&self, frame: &mut Frame, j: &Join, right_start: usize) {
        let names = join_names(frame, j, right_start..frame.width);
        for s in frame.sources.iter_mut().filter(|s| s.start >= right_start) {
            for c in s.columns.iter_mut() {
                if names.iter().any(|n| n.eq_ignore_ascii_case(&c.name)) {
                    c.hidden = true;
                }
            }
        }
        if !j.right {
            return;
        }
        let pairs = merge_pairs(frame, right_start, frame.width, &names);
        if pairs.is_empty() {
            return;
        }
        let start = frame.width;
        let mut merged = Vec::with_capacity(pairs.len());
        for (k, p) in pairs.iter().enumerate() {
            let left = p.left(frame);
            let c = &mut frame.sources[p.source].columns[p.column];
            c.merged = Some(start + k);
            merged.push((c.clone(), left));
        }
        let (columns, lefts): (Vec<SrcCol>, Vec<usize>) = merged.into_iter().unzip();
        frame.push(MERGED_SOURCE, columns, false);
        let source = frame.sources.last_mut().expect("just pushed");
        for (c, left) in source.columns.iter_mut().zip(lefts) {
            c.hidden = true;
            c.merged = Some(left);
        }
    }

    fn add_ref_columns(&self, r: &TableRef, frame: &mut Frame) -> Result<()> {
        match r {
            TableRef::Table { name, alias } => {
                let label = alias.as_deref().unwrap_or(name);
                if let Some(cols) = self.cte_columns(name) {
                    frame.push(label, cols, false);
                } else if let Some(t) = self.schema.tables.get(&lc(name)) {
                    frame.push(label, table_columns(t), true);
                } else if let Some(v) = self.schema.view(name) {
                    if self.expanding.borrow().contains(&v.name) {
                        return Err(Error::Sql(format!("view {} is circularly defined", v.name)));
                    }
                    self.expanding.borrow_mut().push(v.name.clone());
                    let cols = self.select_columns(&v.select, v.columns.as_deref());
                    self.expanding.borrow_mut().pop();
                    frame.push(label, cols?, false);
                } else if is_schema_table(name) {
                    frame.push(label, schema_table_columns(), false);
                } else if name.eq_ignore_ascii_case("sqlite_sequence") {
                    frame.push(label, sequence_table_columns(), false);
                } else {
                    return Err(Error::Sql(format!("no such table: {name}")));
                }
            }
            TableRef::Subquery { select, alias } => {
                let cols = self.select_columns(select, None)?;
                frame.push(alias.as_deref().unwrap_or(""), cols, false);
            }
            TableRef::Nested(f) => self.add_from_columns(f, frame)?,
            TableRef::Function { name, alias, .. } => {
                let columns = crate::json::TABLE_COLUMNS.iter().enumerate();
                let columns = columns.map(|(i, n)| SrcCol {
                    name: n.to_string(),
                    affinity: None,
                    coll: Collation::Binary,
                    decl_type: None,
                    // `json` and `root` are hidden columns: not in `*`.
                    hidden: i >= 8,
                    merged: None,
                });
                frame.push(alias.as_deref().unwrap_or(name), columns.collect(), false);
            }
        }
        Ok(())
    }

    fn add_from_columns(&self, f: &From, frame: &mut Frame) -> Result<()> {
        self.add_ref_columns(&f.first, frame)?;
        for j in &f.joins {
            let before = frame.width;
            self.add_ref_columns(&j.table, frame)?;
            self.hide_join_columns(frame, j, before);
        }
        Ok(())
    }

    fn cte_columns(&self, name: &str) -> Option<Vec<SrcCol>> {
        let planned = self.planned_ctes.borrow();
        if let Some((_, cols)) = planned
            .iter()
            .rev()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            return Some(cols.clone());
        }
        self.ctes
            .iter()
            .rev()
            .find_map(|m| m.get(&lc(name)))
            .map(|c| cte_source_columns(&c.0))
    }

    /// The result columns of a select, as a source: names, affinities, collations. Its own
    /// common table expressions are in scope while they are worked out (not yet made: the
    /// select makes them when it runs).
    pub(crate) fn select_columns(
        &self,
        sel: &Select,
        names: Option<&[String]>,
    ) -> Result<Vec<SrcCol>> {
        if sel.with.is_empty() {
            return self.select_columns_in_scope(sel, names);
        }
        let mark = self.planned_ctes.borrow().len();
        let mut result = Ok(());
        for cte in &sel.with {
            // A recursive one's columns are its first core's, which cannot name it.
            match self.select_columns_in_scope(&cte.select, cte.columns.as_deref()) {
                Ok(cols) => self
                    .planned_ctes
                    .borrow_mut()
                    .push((cte.name.clone(), cols)),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        let cols = result.and_then(|()| self.select_columns_in_scope(sel, names));
        self.planned_ctes.borrow_mut().truncate(mark);
        cols
    }

    fn select_columns_in_scope(
        &self,
        sel: &Select,
        names: Option<&[String]>,
    ) -> Result<Vec<SrcCol>> {
        let Core::Select { columns, from, .. } = &sel.first else {
            let Core::Values(rows) = &sel.first else {
                unreachable!()
            };
            let n = rows.first().map_or(0, Vec::len);
            return Ok((0..n)
                .map(|i| SrcCol {
                    name: names
                        .and_then(|ns| ns.get(i).cloned())
                        .unwrap_or_else(|| format!("column{}", i + 1)),
                    affinity: None,
                    coll: Collation::Binary,
                    decl_type: None,
                    hidden: false,
                    merged: None,
                })
                .collect());
        };
        let frame = self.frame_of(from.as_ref())?;
        let row = vec![Value::Null; frame.width];
        let sc = Scope::new(&frame, &row, None);
        let mut out = Vec::new();
        for rc in columns {
            match rc {
                ResultColumn::Star => {
                    for s in &frame.sources {
                        out.extend(s.columns.iter().filter(|c| !c.hidden).cloned());
                    }
                }
                ResultColumn::TableStar(t) => {
                    let s = frame
                        .sources
                        .iter()
                        .find(|s| s.name.eq_ignore_ascii_case(t))
                        .ok_or_else(|| Error::Sql(format!("no such table: {t}")))?;
                    out.extend(s.columns.iter().cloned());
                }
                ResultColumn::Expr(e, alias) => out.push(SrcCol {
                    name: alias.clone().unwrap_or_else(|| expr_name(e)),
                    affinity: self.affinity(e, &sc),
                    coll: self.collation(e, &sc),
                    decl_type: self.src_col(e, &sc).and_then(|c| c.decl_type.clone()),
                    hidden: false,
                    merged: None,
                }),
            }
        }
        if let Some(ns) = names {
            if ns.len() != out.len() {
                return Err(Error::Sql(format!(
                    "expected {} columns but got {}",
                    ns.len(),
                    out.len()
                )));
            }
            for (c, n) in out.iter_mut().zip(ns) {
                c.name = n.clone();
            }
        }
        Ok(out)
    }

    /// The rows a table reference produces (joined row slices for nested joins).
    fn ref_rows(&mut self, r: &TableRef, outer: Option<&Scope>) -> Result<Vec<Row>> {
        match r {
            TableRef::Table { name, .. } => {
                if let Some(c) = self
                    .ctes
                    .iter()
                    .rev()
                    .find_map(|m| m.get(&lc(name)))
                    .cloned()
                {
                    return Ok(c.1.clone());
                }
                if let Some(t) = self.schema.tables.get(&lc(name)).cloned() {
                    return self.table_rows(&t);
                }
                if let Some(v) = self.schema.view(name).cloned() {
                    return Ok(self.select(&v.select, None)?.rows);
                }
                if is_schema_table(name) {
                    return Ok(self.schema_rows());
                }
                if name.eq_ignore_ascii_case("sqlite_sequence") {
                    return self.sequence_rows();
                }
                Err(Error::Sql(format!("no such table: {name}")))
            }
            TableRef::Subquery { select, .. } => Ok(self.select(select, outer)?.rows),
            TableRef::Function { name, args, .. } => {
                let none = Frame::default();
                self.function_rows(name, args, &Scope::new(&none, &[], outer))
            }
            TableRef::Nested(f) => {
                let frame = self.frame_of(Some(f))?;
                let mut rows = Vec::new();
                self.join(f, &frame, None, outer, &mut |_, r| {
                    rows.push(r.to_vec());
                    Ok(true)
                })?;
                Ok(rows)
            }
        }
    }

    /// The rows of table-valued function `name` called with `args` in scope `sc`.
    fn function_rows(&mut self, name: &str, args: &[Expr], sc: &Scope) -> Result<Vec<Row>> {
        let vals = self.eval_all(args.iter(), sc)?;
        crate::json::table_rows(name, &vals)
    }

    /// `sqlite_schema`'s rows: type, name, table, root page (always 0), SQL text.
    fn schema_rows(&self) -> Vec<Row> {
        let s = &self.schema;
        s.listing.get_or_init(|| Self::list_schema(s)).clone()
    }

    fn list_schema(s: &Schema) -> Vec<Row> {
        let created = |name: &str| s.created.get(&lc(name)).copied().unwrap_or(0);
        // Each row with its place in the order of creation, as SQLite's rowids have them.
        let row = |kind: &str, name: &str, table: &str, sql: Value| {
            let r: Row = vec![kind.into(), name.into(), table.into(), 0.into(), sql];
            ((created(name), false), r)
        };
        let tables = s
            .tables
            .values()
            .map(|t| row("table", &t.name, &t.name, t.sql.as_str().into()));
        let indexes = s.indexes.values().map(|i| {
            let sql = i.sql.as_deref().map_or(Value::Null, Value::from);
            row("index", &i.name, &i.table, sql)
        });
        let views = s
            .views
            .values()
            .map(|v| row("view", &v.name, &v.name, v.sql.as_str().into()));
        let triggers = s
            .triggers
            .values()
            .map(|t| row("trigger", &t.name, &t.def.table, t.def.sql.as_str().into()));
        // As SQLite, the table of AUTOINCREMENT's counters, made just after the first table
        // that needs it.
        let first_autoincrement = s
            .tables
            .values()
            .filter(|t| t.autoincrement)
            .map(|t| created(&t.name))
            .min();
        let sequence = first_autoincrement.map(|seq| {
            let (_, r) = row(
                "table",
                "sqlite_sequence",
                "sqlite_sequence",
                "CREATE TABLE sqlite_sequence(name,seq)".into(),
            );
            ((seq, true), r)
        });
        let mut rows: Vec<_> = tables
            .chain(indexes)
            .chain(views)
            .chain(triggers)
            .chain(sequence)
            .collect();
        rows.sort_by_key(|(place, _)| *place);
        rows.into_iter().map(|(_, r)| r).collect()
    }

    /// Runs the joins of `from`, calling `emit` with each joined row that passes the ON
    /// conditions and `filter` (pushed down to the first level where its columns are bound);
    /// `emit` returns false to stop.
    pub(crate) fn join(
        &mut self,
        from: &From,
        frame: &Frame,
        filter: Option<&Expr>,
        outer: Option<&Scope>,
        emit: &mut dyn FnMut(&mut Self, &mut [Value]) -> Result<bool>,
    ) -> Result<()> {
        if from.joins.first().is_some_and(|j| j.right) {
            return self.outer_join(from, frame, filter, outer, emit);
        }
        let plan = self.plan_join(from, frame, filter)?;
        self.run_join(from, &plan, frame, outer, emit)
    }

    /// A RIGHT or FULL join, the only join of `from` (see `parse::nest_outer_joins`): each
    /// left row with every right row its conditions hold for; a left row that met none
    /// (FULL), with NULLs on the right; then each right row that met no left row, with NULLs
    /// on the left (SQLite's order too). Both sides are read whole; an equality of a right
    /// column with the left's values picks each left row's candidates through a `HashProbe`,
    /// otherwise every pair is tried. Each row gets its merged USING values before `filter`
    /// sees it.
    fn outer_join(
        &mut self,
        from: &From,
        frame: &Frame,
        filter: Option<&Expr>,
        outer: Option<&Scope>,
        emit: &mut dyn FnMut(&mut Self, &mut [Value]) -> Result<bool>,
    ) -> Result<()> {
        let j = &from.joins[0];
        let right_start = self.ref_width(&from.first)?;
        let right_end = right_start + self.ref_width(&j.table)?;
        let (mut on, pairs) = self.join_conditions(j, frame, right_start)?;
        let mut filter = filter.cloned();
        for e in on.iter_mut().chain(filter.as_mut()) {
            self.bind(e, frame);
        }
        let merges: Vec<(usize, usize, usize)> = (pairs.iter().enumerate())
            .map(|(k, p)| (p.left(frame), p.right, right_end + k))
            .collect();
        let left = self.ref_rows(&from.first, outer)?;
        let right = self.ref_rows(&j.table, outer)?;
        // (Bound: what names the frame is a slot; a slot before the right side's is known.)
        let left_only = |o: &Expr| {
            let mut before = true;
            o.walk(&mut |x| before &= !matches!(x, Expr::Slot(s) if *s >= right_start));
            before
        };
        let hash = equality_probe(&on, frame, right_start..right_end, left_only)
            .filter(|_| right.len() >= 8)
            .map(|at| self.hash_probe(&right, at, frame, outer));
        let everything: Vec<usize> = (0..right.len()).collect();
        let mut matched = vec![false; right.len()];
        let mut row = vec![Value::Null; frame.width];
        // Completes a joined row and hands it on if it passes `filter`; false: stop.
        let mut pass = |me: &mut Self, row: &mut Vec<Value>| -> Result<bool> {
            for &(l, r, m) in &merges {
                row[m] = if row[l].is_null() {
                    row[r].clone()
                } else {
                    row[l].clone()
                };
            }
            if !me.row_passes(filter.iter(), frame, row, outer)? {
                return Ok(true);
            }
            emit(me, row)
        };
        for l in &left {
            row[..right_start].clone_from_slice(l);
            let mut met = false;
            let candidates = match &hash {
                Some(h) => h.candidates(&self.eval(&h.probe, &Scope::new(frame, &row, outer))?),
                None => None,
            };
            for &k in candidates.as_deref().unwrap_or(&everything) {
                let r = &right[k];
                row[right_start..right_end].clone_from_slice(r);
                if !self.row_passes(on.iter(), frame, &row, outer)? {
                    continue;
                }
                met = true;
                matched[k] = true;
                if !pass(self, &mut row)? {
                    return Ok(());
                }
            }
            if j.left && !met {
                row[right_start..right_end].fill(Value::Null);
                if !pass(self, &mut row)? {
                    return Ok(());
                }
            }
        }
        row[..right_start].fill(Value::Null);
        for (r, _) in right.iter().zip(&matched).filter(|(_, m)| !**m) {
            row[right_start..right_end].clone_from_slice(r);
            if !pass(self, &mut row)? {
                return Ok(());
            }
        }
        Ok(())
    }

    /// The conditions of join `j` whose right side begins at `right_start` of `frame`: its
    /// ON condition's conjuncts and an equality for each USING or NATURAL column (the left's
    /// value, merged if an earlier RIGHT or FULL join merged it, with the right's); and
    /// those columns' [`MergePair`]s.
    fn join_conditions(
        &self,
        j: &Join,
        frame: &Frame,
        right_start: usize,
    ) -> Result<(Vec<Expr>, Vec<MergePair>)> {
        let mut on: Vec<Expr> = j.on.iter().flat_map(conjuncts).cloned().collect();
        let right_end = right_start + self.ref_width(&j.table)?;
        let names = join_names(frame, j, right_start..right_end);
        let pairs = merge_pairs(frame, right_start, right_end, &names);
        if pairs.len() < names.len() {
            let missing = names.iter().find(|n| {
                !pairs.iter().any(|p| {
                    let c = &frame.sources[p.source].columns[p.column];
                    c.name.eq_ignore_ascii_case(n)
                })
            });
            return Err(Error::Sql(format!(
                "cannot join using column {} - column not present in both tables",
                missing.map_or("", |n| n.as_str())
            )));
        }
        for p in &pairs {
            // By name where it can be, as written conditions are, so that access paths
            // see them; a merged value has only its slot.
            let c = &frame.sources[p.source].columns[p.column];
            let column = |s: usize| Expr::Column {
                table: Some(frame.sources[s].name.clone()),
                name: c.name.clone(),
            };
            let left = match p.merged {
                Some(slot) => Expr::Slot(slot),
                None => column(p.source),
            };
            let right = column(p.right_source);
            on.push(Expr::Binary(BinOp::Eq, Box::new(left), Box::new(right)));
        }
        Ok((on, pairs))
    }

    /// How many slots source `r` takes in a joined row.
    fn ref_width(&self, r: &TableRef) -> Result<usize> {
        let mut f = Frame::default();
        self.add_ref_columns(r, &mut f)?;
        Ok(f.width)
    }

    /// How the sources of `from` are read and joined and where each condition of `filter`
    /// is checked: decided from the statement and the schema alone, so it is kept between
    /// runs (see `PlanCache`).
    fn plan_join(&self, from: &From, frame: &Frame, filter: Option<&Expr>) -> Result<JoinPlan> {
        let mut items: Vec<ItemPlan> = Vec::new();
        let mut on_level: Vec<Vec<Expr>> = Vec::new();
        let item = |me: &Self, r: &TableRef, left: bool| -> Result<ItemPlan> {
            let mut f = Frame::default();
            me.add_ref_columns(r, &mut f)?;
            let table = match r {
                TableRef::Table { name, .. } if me.cte_columns(name).is_none() => {
                    me.schema.tables.get(&lc(name)).cloned()
                }
                _ => None,
            };
            Ok(ItemPlan {
                source: 0,
                table,
                access: Access::Scan,
                left,
                width: f.width,
            })
        };
        items.push(item(self, &from.first, false)?);
        on_level.push(Vec::new());
        let mut bound: Vec<usize> = vec![0];
        for j in &from.joins {
            let right_start = *bound.last().unwrap() + items.last().unwrap().width;
            let (on, _) = self.join_conditions(j, frame, right_start)?;
            bound.push(right_start);
            items.push(item(self, &j.table, j.left)?);
            on_level.push(on);
        }
        for (i, it) in items.iter_mut().enumerate() {
            it.source = i;
        }
        let order = self.join_order(&items, &bound, &on_level, frame, filter);
        let mut items: Vec<ItemPlan> = {
            let mut slots: Vec<Option<ItemPlan>> = items.into_iter().map(Some).collect();
            order
                .iter()
                .map(|&i| slots[i].take().expect("a permutation"))
                .collect()
        };
        let bound: Vec<usize> = order.iter().map(|&i| bound[i]).collect();
        let mut on_level: Vec<Vec<Expr>> = order.iter().map(|&i| on_level[i].clone()).collect();
        // Each WHERE conjunct at the first item where everything it names is bound;
        // inner-join ON conditions are filters too, left joins' decide the match.
        let n = items.len();
        let mut at_level: Vec<Vec<Expr>> = vec![Vec::new(); n];
        for c in filter.map(conjuncts).unwrap_or_default() {
            at_level[level_of(c, frame, &bound)].push(c.clone());
        }
        for (i, it) in items.iter().enumerate() {
            if !it.left {
                for e in on_level[i].drain(..) {
                    at_level[level_of(&e, frame, &bound).max(i)].push(e);
                }
            }
        }
        // Access paths: an equality on a table's rowid or indexed column with a value known
        // before the table is read (earlier tables, outer queries, constants).
        let mut residual = vec![None; n];
        for i in 0..n {
            let Some(t) = items[i].table.clone() else {
                continue;
            };
            let exprs: Vec<&Expr> = at_level[i].iter().chain(on_level[i].iter()).collect();
            let implying_from = if items[i].left { at_level[i].len() } else { 0 };
            let (access, implied) = self.choose_access(&t, frame, &bound, i, &exprs, implying_from);
            items[i].access = access;
            if implied.iter().any(|&k| k < at_level[i].len()) {
                let left = at_level[i].iter().enumerate();
                let left = left.filter(|(k, _)| !implied.contains(k));
                residual[i] = Some(left.map(|(_, e)| e.clone()).collect());
            }
        }
        let function_args = from
            .refs()
            .flat_map(|r| match r {
                TableRef::Function { args, .. } => args.clone(),
                _ => Vec::new(),
            })
            .collect();
        Ok(JoinPlan {
            items,
            bound,
            at_level,
            residual,
            on_level,
            lazy: None,
            lent: false,
            reverse: false,
            wanted: vec![None; n],
            function_args,
        })
    }

    /// The rows (rowid last) of table `t`, item `i` of `plan`, that pass `conditions`
    /// (which read no other item's columns).
    fn scan_where(
        &mut self,
        t: &Table,
        plan: &JoinPlan,
        i: usize,
        conditions: &[&Expr],
        frame: &Frame,
        outer: Option<&Scope>,
    ) -> Result<Vec<Row>> {
        if conditions.is_empty() {
            return self.table_rows(t);
        }
        let slots = plan.bound[i]..plan.bound[i] + plan.items[i].width;
        // The columns the conditions read are decoded first, the rest for rows that pass;
        // unless a condition names this frame's columns unbound (a plan run once).
        let unbound = conditions.iter().any(|c| names_frame_unbound(c, frame));
        let filter = columns_read(conditions.iter().copied(), slots.clone())
            .filter(|_| !unbound)
            .map(trimmed);
        let mut row = vec![Value::Null; frame.width];
        let db = self.db(&t.db)?;
        let mut scan = self.txn.iter(&db);
        let mut out = Vec::new();
        while let Some(kv) = scan.next_ref() {
            let (k, v) = kv?;
            let rowid = rowid_of_key(k)?;
            t.read_into(rowid, v, &mut row[slots.clone()], filter.as_deref())?;
            if !self.row_passes(conditions.iter().copied(), frame, &row, outer)? {
                continue;
            }
            if filter.is_some() {
                t.read_into(rowid, v, &mut row[slots.clone()], None)?;
            }
            out.push(row[slots.clone()].to_vec());
        }
        Ok(out)
    }

    /// The order the items of a join (in FROM order) are looped in: FROM order, except
    /// that among inner joins of tables the one read best on its own (by rowid or index
    /// equality, then rowid or index range, with values known before the join starts)
    /// goes first, as SQLite's planner would start there (it weighs more than this); when
    /// none is, a table under half the first one's estimated size goes first if the first
    /// is then read by key. With one source that is not a table, it goes first when every
    /// table is then read by key.
    fn join_order(
        &self,
        items: &[ItemPlan],
        bound: &[usize],
        on_level: &[Vec<Expr>],
        frame: &Frame,
        filter: Option<&Expr>,
    ) -> Vec<usize> {
        let from_order: Vec<usize> = (0..items.len()).collect();
        if items.len() < 2 || items.iter().any(|it| it.left) {
            return from_order;
        }
        let conditions: Vec<&Expr> = filter
            .map(conjuncts)
            .unwrap_or_default()
            .into_iter()
            .chain(on_level.iter().flatten())
            .collect();
        // The conditions of item `item`, and its level and the items' first slots, when
        // `first` starts the loops.
        let placed = |first: usize, item: usize| {
            let order: Vec<usize> = std::iter::once(first)
                .chain(from_order.iter().copied().filter(|&i| i != first))
                .collect();
            let bound: Vec<usize> = order.iter().map(|&i| bound[i]).collect();
            let level = order.iter().position(|&i| i == item).expect("in the order");
            let own: Vec<&Expr> = conditions
                .iter()
                .copied()
                .filter(|c| level_of(c, frame, &bound) == level)
                .collect();
            (own, level, bound)
        };
        // How well item `item` is read when `first` starts the loops.
        let rank = |first: usize, item: usize| {
            let (own, level, bound) = placed(first, item);
            let t = items[item].table.as_ref().expect("tables only");
            match self.choose_access(t, frame, &bound, level, &own, 0).0 {
                Access::Rowid(_) => 4,
                Access::Index(..) | Access::RowidIn(_) | Access::IndexIn(..) => 3,
                Access::RowidRange(..) => 2,
                Access::IndexRange(..) => 1,
                Access::Scan | Access::IndexOrder(..) => 0,
            }
        };
        let starting = |first: usize| {
            std::iter::once(first)
                .chain(from_order.iter().copied().filter(|&i| i != first))
                .collect()
        };
        if items.iter().any(|it| it.table.is_none()) {
            // With a source that is not a table (a common table expression's rows, a
            // subquery's): it starts the loops when each table is then read by key from
            // it (a walk up a tree through a recursive CTE reads a row of the table per
            // step, not the whole table); else FROM order.
            let tables_keyed = |f: usize| {
                let mut later = from_order.iter().copied().filter(|&i| i != f);
                later.all(|i| items[i].table.is_some() && rank(f, i) >= 3)
            };
            let first = (0..items.len()).find(|&f| items[f].table.is_none() && tables_keyed(f));
            return first.map_or(from_order.clone(), starting);
        }
        let size = |i: usize| {
            let t = items[i].table.as_ref().expect("tables only");
            self.estimated_rows(t).unwrap_or(i64::MAX / 1024).max(1)
        };
        // Whether item `item`, scanned whole when `first` starts the loops, has an
        // equality of one of its columns with earlier items for a hash of its rows to
        // answer (see `hash_joins`).
        let probed = |first: usize, item: usize| {
            let (own, level, bound) = placed(first, item);
            let own: Vec<Expr> = own.into_iter().cloned().collect();
            let slots = bound[level]..bound[level] + items[item].width;
            let earlier =
                |o: &Expr| level_of(o, frame, &bound) < level || !refers_to_frame(o, frame);
            equality_probe(&own, frame, slots, earlier).is_some()
        };
        // Whether item `item` is read by key, or through a hash, when `first` starts.
        let keyed = |first: usize, item: usize| match rank(first, item) {
            0 => probed(first, item),
            r => r >= 3,
        };
        // The later items that, when `first` starts the loops, would be scanned whole for
        // each row before them: no access path, and no hash.
        let rescanned = |first: usize| -> Vec<usize> {
            let later = from_order.iter().copied().filter(|&i| i != first);
            later
                .filter(|&item| rank(first, item) == 0 && !probed(first, item))
                .collect()
        };
        let ranks: Vec<u8> = from_order.iter().map(|&i| rank(i, i)).collect();
        let best = (0..items.len()).max_by_key(|&i| (ranks[i], std::cmp::Reverse(i)));
        // A start that leaves a table scanned again for each of its rows costs their
        // product (an equality by key taken to find about ten, as SQLite guesses without
        // statistics): a start that reads every later table by key (or through a hash of
        // its rows, as for `a.x = b.x + 1` started at `b`) is taken instead when it costs
        // less, even though it scans its own table (a lookup taken as four rows).
        let keyed_instead = |best: usize| {
            let again = rescanned(best);
            if again.is_empty() {
                return None;
            }
            let outer_rows = if ranks[best] >= 3 { 10 } else { size(best) };
            let cost = again
                .iter()
                .map(|&i| size(i).saturating_mul(outer_rows))
                .fold(0i64, i64::saturating_add);
            let later = |f: usize| from_order.iter().copied().filter(move |&i| i != f);
            (0..items.len()).find(|&f| {
                f != best && later(f).all(|i| keyed(f, i)) && size(f).saturating_mul(4) < cost
            })
        };
        let first = match (best, best.and_then(keyed_instead)) {
            (_, Some(keyed)) => keyed,
            (Some(b), None) if ranks[b] > ranks[0] => b,
            (Some(_), None) if ranks.iter().all(|&r| r == 0) => {
                let sizes: Option<Vec<i64>> = items
                    .iter()
                    .map(|it| self.estimated_rows(it.table.as_ref()?))
                    .collect();
                // Only when the first table is then read by key: hashing a big inner
                // table costs more than hashing the small one.
                let smaller = sizes.and_then(|sizes| {
                    (0..items.len())
                        .min_by_key(|&i| (sizes[i], i))
                        .filter(|&i| sizes[i] * 2 < sizes[0])
                });
                smaller.filter(|&i| rank(i, 0) >= 3).unwrap_or(0)
            }
            _ => 0,
        };
        starting(first)
    }

    /// Runs a planned join: reads each source as planned and hands each joined row that
    /// passes the conditions to `emit`.
    fn run_join(
        &mut self,
        from: &From,
        plan: &JoinPlan,
        frame: &Frame,
        outer: Option<&Scope>,
        emit: &mut dyn FnMut(&mut Self, &mut [Value]) -> Result<bool>,
    ) -> Result<()> {
        let mut items: Vec<JoinItem> = Vec::with_capacity(plan.items.len());
        // Sources other than tables are read at once, tables when their path says so.
        for (i, p) in plan.items.iter().enumerate() {
            let source = match p.source {
                0 => &from.first,
                k => &from.joins[k - 1].table,
            };
            let lateral = match source {
                TableRef::Function { name, args, .. }
                    if args.iter().any(|a| refers_to_frame(a, frame)) =>
                {
                    Some((name.as_str(), args.as_slice()))
                }
                _ => None,
            };
            let rows = match (&p.table, &p.access) {
                (None, _) if lateral.is_some() => Vec::new(),
                (None, _) => self.ref_rows(source, outer)?,
                (Some(_), _) if streams(plan, i) => Vec::new(),
                (Some(t), Access::Scan) if self.plan.is_none() => {
                    // Kept for every outer row: only those passing its own conditions. A LEFT
                    // JOIN's are its ON conditions: a WHERE condition must see its NULL row
                    // when none of its rows match (`x IS NULL` holds there).
                    let own = match p.left {
                        true => &plan.on_level[i],
                        false => &plan.at_level[i],
                    };
                    let own = own.iter().filter(|e| reads_only(e, plan, i, frame));
                    self.scan_where(t, plan, i, &own.collect::<Vec<_>>(), frame, outer)?
                }
                _ => Vec::new(),
            };
            let kept = match (i, &p.table) {
                (0, Some(t)) if streams(plan, 0) && outer.is_some() && self.plan.is_none() => {
                    self.kept_scan(plan, t, frame, outer)?
                }
                _ => None,
            };
            let (rows, hash) = match kept {
                Some((rows, hash)) => (ItemRows::Kept(rows), Some(hash)),
                None => (ItemRows::Own(rows), None),
            };
            items.push(JoinItem {
                plan: p,
                rows,
                hash,
                probes: Default::default(),
                hashed: Default::default(),
                lateral,
            });
        }
        if let Some(lines) = &mut self.plan {
            // EXPLAIN QUERY PLAN: the access path of each source, in loop order.
            for (i, it) in plan.items.iter().enumerate() {
                let name = &frame
                    .sources
                    .iter()
                    .find(|s| s.start == plan.bound[i])
                    .map_or("?", |s| s.name.as_str())
                    .to_string();
                lines.push(match (&it.access, &it.table) {
                    (_, None) => format!("SCAN {name} (a subquery, view or CTE)"),
                    (Access::Scan, Some(_)) => format!("SCAN {name}"),
                    (Access::IndexOrder(idx, _, None, None), Some(_)) => {
                        format!("SCAN {name} USING {}INDEX {}", covering(plan, i), idx.name)
                    }
                    (Access::Rowid(_) | Access::RowidIn(_), Some(_)) => {
                        format!("SEARCH {name} USING INTEGER PRIMARY KEY (rowid=?)")
                    }
                    (Access::RowidRange(..), Some(_)) => {
                        format!("SEARCH {name} USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)")
                    }
                    (Access::Index(idx, ..) | Access::IndexIn(idx, _), Some(t)) => format!(
                        "SEARCH {name} USING {}INDEX {} ({}=?)",
                        covering(plan, i),
                        idx.name,
                        first_part_name(t, idx)
                    ),
                    (
                        Access::IndexRange(idx, lo, hi) | Access::IndexOrder(idx, _, lo, hi),
                        Some(t),
                    ) => {
                        let col = first_part_name(t, idx);
                        let terms: Vec<String> = [(lo, ">"), (hi, "<")]
                            .iter()
                            .filter(|(b, _)| b.is_some())
                            .map(|(_, op)| format!("{col}{op}?"))
                            .collect();
                        format!(
                            "SEARCH {name} USING {}INDEX {} ({})",
                            covering(plan, i),
                            idx.name,
                            terms.join(" AND ")
                        )
                    }
                });
            }
            return Ok(());
        }
        self.hash_joins(&mut items, frame, plan, outer);
        let mut row: SmallVec<[Value; 16]> = smallvec::smallvec![Value::Null; frame.width];
        let j = Loops {
            items: &items,
            plan,
            frame,
            outer,
        };
        self.join_level(j, 0, &mut row, emit)?;
        Ok(())
    }

    /// The rows of a FROM clause that pass `filter`, handed to `emit` (which says whether to
    /// go on; it gets each row mutably because the first item may finish decoding it, see
    /// `LazyColumns`); without a FROM clause, the one empty row if it passes. Only
    /// planning, nothing is evaluated.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn source_rows(
        &mut self,
        from: Option<&From>,
        join: Option<&JoinPlan>,
        frame: &Frame,
        filter: Option<&Expr>,
        outer: Option<&Scope>,
        emit: &mut dyn FnMut(&mut Self, &mut [Value]) -> Result<bool>,
    ) -> Result<()> {
        match (from, join) {
            (Some(f), Some(j)) => self.run_join(f, j, frame, outer, emit),
            (Some(f), None) => self.join(f, frame, filter, outer, emit),
            (None, _) if self.plan.is_some() => Ok(()),
            (None, _) => {
                let keep = match filter {
                    Some(w) => self.eval(w, &Scope::new(frame, &[], outer))?.truth() == Some(true),
                    None => true,
                };
                if keep {
                    emit(self, &mut [])?;
                }
                Ok(())
            }
        }
    }

    /// Counts a lookup of `t` through `idx` (an equality with `probe`); once the lookups
    /// reach a quarter of the table's rows (estimated by its largest rowid, checked at
    /// each power of two from 64), reads the whole table once into a `HashProbe` on the
    /// indexed column, which the remaining lookups use for numeric values. An index lookup
    /// (a tree descent for the entry and another for the row) costs about as much as
    /// reading four rows in order, and the lookups so far predict as many again: from a
    /// quarter on, one scan is cheaper (SQLite would start the join from the other table;
    /// this keeps the join order and changes how the inner table is read).
    fn consider_hashing(
        &mut self,
        it: &JoinItem,
        t: &Table,
        idx: &crate::schema::Index,
        probe: &Expr,
    ) -> Result<()> {
        let n = it.probes.get() + 1;
        it.probes.set(n);
        if n < 64 || !n.is_power_of_two() || it.hashed.borrow().is_some() {
            return Ok(());
        }
        let c = idx.columns[0].0;
        if t.columns.get(c).is_none_or(|c| !c.affinity.is_numeric()) {
            return Ok(());
        }
        if self.estimated_rows(t).is_none_or(|e| e > 4 * n as i64) {
            return Ok(());
        }
        let rows = self.table_rows(t)?;
        let h = HashProbe::build(&rows, c, probe, None);
        *it.hashed.borrow_mut() = Some((rows, h));
        Ok(())
    }

    /// For the first table of a subquery that reads the rows around it, scanned whole at
    /// each of its runs, with an equality of one of its columns with those rows (`b.x =
    /// a.x` in `EXISTS (SELECT 1 FROM b WHERE b.x = a.x)`): from its second run in this run
    /// of the statement on, its rows and a hash of them on that column, kept while this
    /// transaction leaves the table as it was (SQLite's automatic index, for a correlated
    /// subquery; without it each run reads the whole table again). `None`: read it as
    /// planned (the first run; a table too large to keep; a column whose values the hash
    /// mostly cannot group: NULLs, blobs, text in a collation the application registered).
    fn kept_scan(
        &mut self,
        plan: &JoinPlan,
        t: &Table,
        frame: &Frame,
        outer: Option<&Scope>,
    ) -> Result<Option<KeptRows>> {
        const MOST_ROWS: i64 = 1 << 20;
        let slots = plan.bound[0]..plan.bound[0] + plan.items[0].width;
        let outer_only = |o: &Expr| !refers_to_frame(o, frame);
        let Some(at) = equality_probe(&plan.at_level[0], frame, slots, outer_only) else {
            return Ok(None);
        };
        let (column, probe) = (at.column, at.probe);
        let changes = self.txn.changes_to(&self.db(&t.db)?)?;
        // (The address names the plan within this run; what is kept is checked to be of
        // the same table, column and probe all the same.)
        let key = (plan as *const JoinPlan as usize, self.subqueries.run);
        let probe_form = format!("{probe:?}");
        let same = |k: &KeptScan| {
            k.changes == changes && k.table == t.db && k.column == column && k.probe == probe_form
        };
        let kept = self.kept_scans.0.entry(key).or_default();
        if !same(kept) {
            *kept = KeptScan {
                changes,
                table: t.db.clone(),
                column,
                probe: probe_form,
                ..KeptScan::default()
            };
        }
        kept.runs += 1;
        if let Some(built) = &kept.built {
            return Ok(Some(built.clone()));
        }
        if kept.runs < 2 || kept.unhelpful {
            return Ok(None);
        }
        let rows = match self.estimated_rows(t) {
            Some(n) if n <= MOST_ROWS => self.table_rows(t)?,
            _ => Vec::new(),
        };
        let hash = self.hash_probe(&rows, at, frame, outer);
        let kept = self.kept_scans.0.get_mut(&key).expect("kept above");
        if rows.is_empty() || hash.others.len() * 2 > rows.len() {
            kept.unhelpful = true;
            return Ok(None);
        }
        let built = (Arc::new(rows), Arc::new(hash));
        kept.built = Some(built.clone());
        Ok(Some(built))
    }

    /// A `HashProbe` of `rows` on equality `at`, text grouped in the comparison's
    /// collation: known at planning for a compiled comparison, else found from the
    /// operands' declarations (not their values), as for one naming an enclosing query's
    /// column, which is not compiled.
    fn hash_probe(
        &self,
        rows: &[Row],
        at: Equality,
        frame: &Frame,
        outer: Option<&Scope>,
    ) -> HashProbe {
        let text = at.text.or_else(|| match at.eq {
            Expr::Binary(BinOp::Eq, a, b) => {
                let empty = vec![Value::Null; frame.width];
                Some(self.cmp_info(a, b, &Scope::new(frame, &empty, outer)).coll)
            }
            _ => None,
        });
        HashProbe::build(rows, at.column, at.probe, text)
    }

    /// About how many rows `t` holds: its rowid counter, or else its largest rowid (an
    /// upper bound unless rowids were given out of order or rows deleted); `None` when its
    /// database cannot be read here.
    fn estimated_rows(&self, t: &Table) -> Option<i64> {
        if let Some(&r) = self.rowids.lock().get(&t.db) {
            return Some(r);
        }
        let db = match self.dbs.get(&t.db) {
            Some(db) => db.clone(),
            None => self.env.open_db(&t.db).ok()?,
        };
        match self.txn.last(&db, ..).ok()? {
            Some((k, _)) => rowid_of_key(&k).ok(),
            None => Some(0),
        }
    }

    /// Gives each item scanned in full below the first a `HashProbe` on an equality with
    /// earlier items (for a LEFT JOIN, one of its ON conditions).
    fn hash_joins(
        &self,
        items: &mut [JoinItem],
        frame: &Frame,
        plan: &JoinPlan,
        outer: Option<&Scope>,
    ) {
        for (i, it) in items.iter_mut().enumerate().skip(1) {
            if !matches!(it.plan.access, Access::Scan) || it.rows.len() < 8 {
                continue;
            }
            let exprs = if it.plan.left {
                &plan.on_level[i]
            } else {
                &plan.at_level[i]
            };
            let slots = plan.bound[i]..plan.bound[i] + it.plan.width;
            let earlier =
                |o: &Expr| level_of(o, frame, &plan.bound) < i || !refers_to_frame(o, frame);
            if let Some(at) = equality_probe(exprs, frame, slots, earlier) {
                it.hash = Some(Arc::new(self.hash_probe(&it.rows, at, frame, outer)));
            }
        }
    }

    fn join_level(
        &mut self,
        j: Loops,
        level: usize,
        row: &mut [Value],
        emit: &mut dyn FnMut(&mut Self, &mut [Value]) -> Result<bool>,
    ) -> Result<bool> {
        let Loops {
            items,
            plan,
            frame,
            outer,
        } = j;
        if level == items.len() {
            return emit(self, row);
        }
        let it = &items[level];
        // This item's slots of the joined row (which is always the frame's width: the
        // slots of items not joined yet hold NULL).
        let slots = plan.bound[level]..plan.bound[level] + it.plan.width;
        let streamed = streams(plan, level) && it.hash.is_none();
        if let Some(t) = it.plan.table.as_ref().filter(|_| streamed) {
            // The outermost table read in rowid order: each row decoded straight into the
            // joined row as the engine yields it, none kept.
            let sc = Scope::new(frame, row, outer);
            let Some((from, to, exact)) = self.rowid_bounds(&it.plan.access, &sc)? else {
                return Ok(true);
            };
            let conditions = match &plan.residual[0] {
                Some(r) if exact => r,
                _ => &plan.at_level[0],
            };
            let db = self.db(&t.db)?;
            if plan.lent && !plan.reverse {
                // Nothing the rows go through calls into the engine: its leaves are lent.
                let txn = self.txn;
                let (mut failed, mut stopped) = (None, false);
                txn.visit_from(&db, &from, |k, v| {
                    if k > &to[..] {
                        return false;
                    }
                    match self.streamed_row(j, t, (k, v), conditions, row, emit) {
                        Ok(go_on) => {
                            stopped = !go_on;
                            go_on
                        }
                        Err(e) => {
                            failed = Some(e);
                            false
                        }
                    }
                })?;
                if let Some(e) = failed {
                    return Err(e);
                }
                row[slots].fill(Value::Null);
                return Ok(!stopped);
            }
            let mut scan = match (plan.reverse, &it.plan.access) {
                (true, _) => self.txn.range_rev(&db, from..=to),
                (false, Access::Scan) => self.txn.iter(&db),
                (false, _) => self.txn.range(&db, from..=to),
            };
            while let Some(kv) = scan.next_ref() {
                if !self.streamed_row(j, t, kv?, conditions, row, emit)? {
                    return Ok(false);
                }
            }
            row[slots].fill(Value::Null);
            return Ok(true);
        }
        // A table read through its access path, or through the hash it was read into for
        // the lookups (which answers for numbers only; see `HashProbe`).
        let mut looked_up: Vec<Row> = Vec::new();
        if let Some((name, args)) = it.lateral {
            looked_up = self.function_rows(name, args, &Scope::new(frame, row, outer))?;
        }
        if let (Some(t), false) = (&it.plan.table, matches!(it.plan.access, Access::Scan)) {
            if let Access::Index(idx, probe, _) = &it.plan.access {
                self.consider_hashing(it, t, idx, probe)?;
            }
            let hashed = it.hashed.borrow();
            let candidates = match &*hashed {
                Some((rows, h)) => h
                    .candidates(&self.eval(&h.probe, &Scope::new(frame, row, outer))?)
                    .map(|c| c.iter().map(|&k| rows[k].clone()).collect()),
                None => None,
            };
            drop(hashed);
            match candidates {
                Some(rows) => looked_up = rows,
                None => return self.join_lookups(j, level, row, emit, t),
            }
        }
        // Rows hashed for the lookups (copied out above), or shared ones (copied): all, or
        // those a hash probe `picks`.
        let mut picks = None;
        let shared: &[Row] = match &it.hash {
            Some(h) => {
                picks = h.candidates(&self.eval(&h.probe, &Scope::new(frame, row, outer))?);
                &it.rows[..]
            }
            None => &it.rows[..],
        };
        let mut looked_up = looked_up.into_iter();
        let (mut picked, mut all) = (picks.as_deref().map(|p| p.iter()), shared.iter());
        let mut next_shared = || match &mut picked {
            Some(p) => p.next().map(|&k| &shared[k]),
            None => all.next(),
        };
        let mut wrote = false;
        let mut matched = false;
        loop {
            let at = &mut row[slots.clone()];
            if let Some(r) = looked_up.next() {
                at.iter_mut().zip(r).for_each(|(s, v)| *s = v);
            } else if let Some(r) = next_shared() {
                at.iter_mut().zip(r).for_each(|(s, v)| s.clone_from(v));
            } else {
                break;
            }
            wrote = true;
            let conditions = &plan.at_level[level];
            if !self.joined_row(j, level, row, emit, conditions, &mut matched)? {
                return Ok(false);
            }
        }
        // Deeper levels have reset their own slots.
        if wrote {
            row[slots].fill(Value::Null);
        }
        self.left_unmatched(j, level, row, emit, matched)
    }

    /// One row (key and stored record) of the streamed first item, table `t`: decoded
    /// into `row` in steps (see `LazyColumns`), checked against `conditions`, and passed on
    /// to the next level. `Ok(false)` when the statement needs no more rows.
    fn streamed_row(
        &mut self,
        j: Loops,
        t: &Table,
        (k, v): (&[u8], &[u8]),
        conditions: &[Expr],
        row: &mut [Value],
        emit: &mut dyn FnMut(&mut Self, &mut [Value]) -> Result<bool>,
    ) -> Result<bool> {
        let (plan, items) = (j.plan, j.items);
        let slots = plan.bound[0]..plan.bound[0] + items[0].plan.width;
        let lazy = plan.lazy.as_ref();
        let rowid = rowid_of_key(k)?;
        match lazy.map(|l| &l.filter[..]) {
            // No condition reads a stored column: nothing to decode yet.
            Some([]) => t.set_rowid(rowid, &mut row[slots.clone()]),
            filter => t.read_into(rowid, v, &mut row[slots.clone()], filter)?,
        }
        if !self.row_passes(conditions.iter(), j.frame, row, j.outer)? {
            return Ok(true);
        }
        // (The rowid is in its slots from here on.)
        if let Some(l) = lazy.filter(|l| !l.joins.is_empty()) {
            t.read_columns(v, &mut row[slots.clone()], Some(&l.joins))?;
        }
        match lazy.filter(|l| !l.rest.is_empty()) {
            // Alone, its rows are the joined rows.
            None if items.len() == 1 => emit(self, row),
            None => self.join_level(j, 1, row, emit),
            Some(l) => {
                let mut decoded = false;
                let mut finish = |me: &mut Self, r: &mut [Value]| {
                    if !decoded {
                        if !me.top_admits(plan, r, j.frame, j.outer)? {
                            return Ok(true);
                        }
                        t.read_columns(v, &mut r[slots.clone()], Some(&l.rest))?;
                        decoded = true;
                    }
                    emit(me, r)
                };
                self.join_level(j, 1, row, &mut finish)
            }
        }
    }

    /// Item `level`'s rows (a table's) through its access path, each decoded into `row`
    /// (only the columns the statement reads) as it is read and passed on.
    fn join_lookups(
        &mut self,
        j: Loops,
        level: usize,
        row: &mut [Value],
        emit: &mut dyn FnMut(&mut Self, &mut [Value]) -> Result<bool>,
        t: &Table,
    ) -> Result<bool> {
        let Loops {
            items,
            plan,
            frame,
            outer,
        } = j;
        let access = &items[level].plan.access;
        let slots = plan.bound[level]..plan.bound[level] + items[level].plan.width;
        let wanted = plan.wanted[level].as_deref();
        // Rows a rowid or an index equality finds, or an exact rowid range reads, meet the
        // conditions the path makes true (see `JoinPlan::residual`).
        let conditions = |exact: bool| match &plan.residual[level] {
            Some(r) if exact => r,
            _ => &plan.at_level[level],
        };
        let mut matched = false;
        let mut found = self.lookup(t, access, &Scope::new(frame, row, outer))?;
        if let (Found::Rowids(rowids, _), true) = (&mut found, level == 0 && plan.reverse) {
            // Read back to front, in the order the ORDER BY asks (see `order_path`).
            rowids.reverse();
        }
        let go_on = match found {
            Found::Rowids(rowids, exact) => {
                let db = self.db(&t.db)?;
                let implied = exact
                    && matches!(
                        access,
                        Access::Rowid(_)
                            | Access::Index(..)
                            | Access::IndexIn(..)
                            | Access::IndexRange(..)
                    );
                let conditions = conditions(implied);
                // A lookup that is not exact checks every condition, on the whole row.
                let wanted = wanted.filter(|_| implied);
                let index_only = implied && !covering(plan, level).is_empty();
                let mut go_on = true;
                for r in rowids {
                    let at = &mut row[slots.clone()];
                    if index_only {
                        // Only the rowid is read, and the index entry has it.
                        t.set_rowid(r, at);
                    } else if !self.read_row_into(&db, t, r, at, wanted)? {
                        continue;
                    }
                    if !self.joined_row(j, level, row, emit, conditions, &mut matched)? {
                        go_on = false;
                        break;
                    }
                }
                go_on
            }
            Found::Scan(mut scan, exact) => loop {
                let Some(kv) = scan.next_ref() else {
                    break true;
                };
                let (k, v) = kv?;
                let r = rowid_of_key(k)?;
                t.read_into(r, v, &mut row[slots.clone()], wanted)?;
                if !self.joined_row(j, level, row, emit, conditions(exact), &mut matched)? {
                    break false;
                }
            },
            Found::Entries(mut entries) => {
                let db = self.db(&t.db)?;
                // The index alone, when it holds every column read (SQLite's covering index).
                let covered = match access {
                    Access::IndexOrder(idx, ..) => {
                        covered_parts(t, idx, wanted).map(|parts| (idx, parts))
                    }
                    _ => None,
                };
                loop {
                    let Some(kv) = entries.next_ref() else {
                        break true;
                    };
                    let (k, v) = kv?;
                    let r = index_rowid(k, v)?;
                    let at = &mut row[slots.clone()];
                    let from_index = covered
                        .as_ref()
                        .is_some_and(|(idx, parts)| read_covered(t, idx, parts, k, r, at));
                    if !from_index && !self.read_row_into(&db, t, r, at, wanted)? {
                        continue;
                    }
                    if !self.joined_row(j, level, row, emit, conditions(false), &mut matched)? {
                        break false;
                    }
                }
            }
        };
        if !go_on {
            return Ok(false);
        }
        row[slots].fill(Value::Null);
        self.left_unmatched(j, level, row, emit, matched)
    }

    /// Whether `row`, read by `plan`, passes the bar of the top-N sort reading it (see
    /// `TopGate`): true for any other plan's rows, and before the sort has N rows.
    fn top_admits(
        &mut self,
        plan: &JoinPlan,
        row: &[Value],
        frame: &Frame,
        outer: Option<&Scope>,
    ) -> Result<bool> {
        let ours = |g: &TopGate| g.plan == plan as *const JoinPlan as usize && g.worst.is_some();
        let Some(gate) = self.top_gate.take_if(|g| ours(g)) else {
            return Ok(true);
        };
        let key = self.eval_all(gate.keys.iter(), &Scope::new(frame, row, outer));
        let worst = gate.worst.as_deref().unwrap_or_default();
        let admits = key.map(|key| compare_keys(&key, worst, &gate.specs) == Ordering::Less);
        self.top_gate = Some(gate);
        admits
    }

    /// Reads row `r` of table `t` (engine database `db`) into `at`, only the `wanted`
    /// columns when given; false when the transaction sees no such row.
    fn read_row_into(
        &self,
        db: &Db,
        t: &Table,
        r: i64,
        at: &mut [Value],
        wanted: Option<&[bool]>,
    ) -> Result<bool> {
        match self
            .txn
            .get_with(db, &rowid_key(r), |v| t.read_into(r, v, at, wanted))?
        {
            None => Ok(false),
            Some(decoded) => decoded.map(|()| true),
        }
    }

    /// Passes on the row item `level` has just put in `row`: to the next level if it meets
    /// `conditions` (a LEFT JOIN's row its ON conditions first, which make it `matched`).
    /// False when the caller is to stop.
    fn joined_row(
        &mut self,
        j: Loops,
        level: usize,
        row: &mut [Value],
        emit: &mut dyn FnMut(&mut Self, &mut [Value]) -> Result<bool>,
        conditions: &[Expr],
        matched: &mut bool,
    ) -> Result<bool> {
        if j.items[level].plan.left {
            if !self.row_passes(j.plan.on_level[level].iter(), j.frame, row, j.outer)? {
                return Ok(true);
            }
            *matched = true;
        }
        if !self.row_passes(conditions.iter(), j.frame, row, j.outer)? {
            return Ok(true);
        }
        self.join_level(j, level + 1, row, emit)
    }

    /// After item `level`'s rows, with its slots NULL: for a LEFT JOIN none of whose rows
    /// `matched`, the outer row passed on alone. False when the caller is to stop.
    fn left_unmatched(
        &mut self,
        j: Loops,
        level: usize,
        row: &mut [Value],
        emit: &mut dyn FnMut(&mut Self, &mut [Value]) -> Result<bool>,
        matched: bool,
    ) -> Result<bool> {
        if j.items[level].plan.left
            && !matched
            && self.row_passes(j.plan.at_level[level].iter(), j.frame, row, j.outer)?
        {
            return self.join_level(j, level + 1, row, emit);
        }
        Ok(true)
    }

    /// `Error::Interrupted` once `sqlite3_interrupt` (or `Connection::interrupt`) was called.
    pub(crate) fn check_interrupt(&self) -> Result<()> {
        match self.interrupted.load(std::sync::atomic::Ordering::Relaxed) {
            true => Err(Error::Interrupted),
            false => Ok(()),
        }
    }

    /// Whether every condition holds for `row` (of `frame`, under `outer`); called once per
    /// row read, so it is also where a long scan notices `sqlite3_interrupt`.
    fn row_passes<'e>(
        &mut self,
        conditions: impl ExactSizeIterator<Item = &'e Expr>,
        frame: &Frame,
        row: &[Value],
        outer: Option<&Scope>,
    ) -> Result<bool> {
        self.check_interrupt()?;
        if conditions.len() == 0 {
            return Ok(true);
        }
        let sc = Scope::new(frame, row, outer);
        for e in conditions {
            let holds = match self.int_condition(e, &sc) {
                Some(holds) => holds,
                None => self.eval(e, &sc)?.truth() == Some(true),
            };
            if !holds {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The access path for table `t` (columns from `start` in `frame`, item `level`) given
    /// the conditions `exprs` on it, and which of them (indexes into `exprs`) hold for
    /// every row the path reads: a rowid equality; an index equality with a constant or a
    /// parameter, when its key is exact (checked when it runs); a rowid range's bounds,
    /// when they are integers (see `JoinPlan::residual`). A partial index is read when
    /// `exprs[implying_from..]` imply its condition: for a LEFT JOIN's table, only its ON
    /// terms, as a WHERE term may pass the row of NULLs the join makes up when the index
    /// finds no match (`t.c IS NULL`) where the table had one.
    fn choose_access(
        &self,
        t: &Arc<Table>,
        frame: &Frame,
        bound: &[usize],
        level: usize,
        exprs: &[&Expr],
        implying_from: usize,
    ) -> (Access, Vec<usize>) {
        let (start, ncols) = (bound[level], t.columns.len());
        let level_of = |e: &Expr| level_of(e, frame, bound);
        let mut best = Access::Scan;
        // Whether `other` is known before the table is read (and cheap to have again).
        let known_before = |other: &Expr| {
            let mut subquery = false;
            other.walk(&mut |x| {
                subquery |= matches!(
                    x,
                    Expr::Exists(_) | Expr::Subquery(_) | Expr::InSelect { .. } | Expr::Raise(..)
                )
            });
            !(subquery || level_of(other) >= level && refers_to_frame(other, frame))
        };
        // The column of this table `col` names (`ncols` for the rowid and its alias), if
        // `other` is known before the table is read.
        let bound_column = |col: &Expr, other: &Expr| -> Option<usize> {
            let Expr::Column { table, name } = col else {
                return None;
            };
            let (slot, _) = frame.resolve(table.as_deref(), name).ok()??;
            if slot < start || slot > start + ncols {
                return None;
            }
            let c = slot - start;
            let c = if t.rowid_alias == Some(c) { ncols } else { c };
            known_before(other).then_some(c)
        };
        // Range bounds by column: low, high, each with the conjunct it came from when the
        // comparison includes the bound (a range of keys from it holds the rows exactly).
        type Bound = Option<(Expr, Option<usize>)>;
        let mut ranges: HashMap<usize, (Bound, Bound)> = HashMap::new();
        for (k, e) in exprs.iter().enumerate() {
            match e {
                Expr::Between {
                    expr,
                    not: false,
                    low,
                    high,
                    ..
                } => {
                    if let (Some(c), Some(_)) = (bound_column(expr, low), bound_column(expr, high))
                    {
                        let r = ranges.entry(c).or_default();
                        r.0 = Some(((**low).clone(), Some(k)));
                        r.1 = Some(((**high).clone(), Some(k)));
                    }
                }
                Expr::Binary(op @ (BinOp::Gt | BinOp::Ge | BinOp::Lt | BinOp::Le), a, b) => {
                    let lower = matches!(op, BinOp::Gt | BinOp::Ge);
                    let inclusive = matches!(op, BinOp::Ge | BinOp::Le).then_some(k);
                    // `col op other`, or `other op col` (the direction reversed).
                    let (c, other, lower) = match (bound_column(a, b), bound_column(b, a)) {
                        (Some(c), _) => (c, b, lower),
                        (None, Some(c)) => (c, a, !lower),
                        _ => continue,
                    };
                    let r = ranges.entry(c).or_default();
                    let b = Some(((**other).clone(), inclusive));
                    if lower {
                        r.0 = b;
                    } else {
                        r.1 = b;
                    }
                }
                _ => {}
            }
        }
        let mut implied = Vec::new();
        let mut bound_expr = |b: Bound| {
            b.map(|(e, k)| {
                implied.extend(k.filter(|k| !implied.contains(k)));
                e
            })
        };
        let mut index_implied = None;
        // The indexes this plan may read: every full one, and each partial one whose
        // condition the statement's conjuncts imply.
        let usable: Vec<&Arc<Index>> = self
            .schema
            .indexes_of(&t.name)
            .filter(|i| {
                i.where_.as_ref().is_none_or(|w| {
                    partial_index_applies(w, t, frame, start, &exprs[implying_from..])
                })
            })
            .collect();
        let rowid_range = ranges.remove(&ncols);
        if let Some((lo, hi)) = rowid_range {
            best = Access::RowidRange(bound_expr(lo), bound_expr(hi));
        } else if !ranges.is_empty() {
            // A range on the first column of an ascending index over a numeric column.
            let ranged = usable.iter().find_map(|i| {
                let &(c, desc, _) = i.columns.first()?;
                let r = ranges.get(&c)?;
                (!desc && t.columns[c].affinity.is_numeric()).then(|| ((*i).clone(), r.clone()))
            });
            if let Some((idx, (lo, hi))) = ranged {
                best = Access::IndexRange(idx, bound_expr(lo), bound_expr(hi));
            }
        }
        for (k, e) in exprs.iter().enumerate() {
            let Expr::Binary(BinOp::Eq, a, b) = e else {
                continue;
            };
            for (col, other) in [(a, b), (b, a)] {
                let Expr::Column { table, name } = &**col else {
                    continue;
                };
                let Ok(Some((slot, _))) = frame.resolve(table.as_deref(), name) else {
                    continue;
                };
                if slot < start || slot > start + ncols || !known_before(other) {
                    continue;
                }
                let c = slot - start;
                if c == ncols || t.rowid_alias == Some(c) {
                    // The row found has the rowid the value converts to, so `=` holds.
                    return (Access::Rowid((**other).clone()), vec![k]);
                }
                if matches!(
                    best,
                    Access::Scan | Access::RowidRange(..) | Access::IndexRange(..)
                ) {
                    let coll = t.columns[c].collation;
                    let idx = usable.iter().find(|i| {
                        i.columns
                            .first()
                            .is_some_and(|&(ic, _, icoll)| ic == c && icoll == coll)
                    });
                    let other_aff = {
                        let row = vec![Value::Null; frame.width];
                        self.affinity(other, &Scope::new(frame, &row, None))
                    };
                    if let Some(idx) =
                        idx.filter(|_| index_affinity_ok(t.columns[c].affinity, other_aff))
                    {
                        best = Access::Index((*idx).clone(), (**other).clone(), other_aff);
                        // Against a constant or a parameter the comparison has the column's
                        // collation, the index's: its entries are exactly the equal values
                        // (their keys are equal exactly when the values are).
                        if matches!(**other, Expr::Literal(_) | Expr::Param(_)) {
                            index_implied = Some(k);
                        }
                    }
                }
            }
        }
        if matches!(
            best,
            Access::Scan | Access::RowidRange(..) | Access::IndexRange(..)
        ) {
            // `c IN (list)` of values known before the table is read, or `c = x OR c = y
            // ...` (the same): each one looked up.
            for (k, e) in exprs.iter().enumerate() {
                let (expr, values) = match e {
                    Expr::InList {
                        expr,
                        not: false,
                        list,
                        ..
                    } if !list.is_empty() && list.iter().all(known_before) => {
                        (&**expr, InValues::List(list.clone()))
                    }
                    Expr::InSelect {
                        expr,
                        not: false,
                        select,
                    } if self.reads_no_outer_row(select) => {
                        (&**expr, InValues::Query(select.clone()))
                    }
                    Expr::Binary(BinOp::Or, ..) => match equalities_of_one_column(e) {
                        Some((col, list)) if list.iter().all(|v| known_before(v)) => {
                            (col, InValues::List(list.into_iter().cloned().collect()))
                        }
                        _ => continue,
                    },
                    _ => continue,
                };
                let Expr::Column { table, name } = expr else {
                    continue;
                };
                let Ok(Some((slot, _))) = frame.resolve(table.as_deref(), name) else {
                    continue;
                };
                if slot < start || slot > start + ncols {
                    continue;
                }
                let c = slot - start;
                if c == ncols || t.rowid_alias == Some(c) {
                    best = Access::RowidIn(values);
                    break;
                }
                let coll = t.columns[c].collation;
                let idx = usable.iter().find(|i| {
                    i.columns
                        .first()
                        .is_some_and(|&(ic, _, icoll)| ic == c && icoll == coll)
                });
                let other = match &values {
                    InValues::List(_) => None,
                    InValues::Query(sel) => self.select_affinity(sel, None),
                };
                if let Some(idx) = idx.filter(|_| index_affinity_ok(t.columns[c].affinity, other)) {
                    // Constants and parameters, compared in the column's collation: its
                    // entries are exactly the rows where the conjunct holds (as for `=`).
                    let constants = matches!(&values, InValues::List(list)
                        if list.iter().all(|v| matches!(v, Expr::Literal(_) | Expr::Param(_))));
                    index_implied = constants.then_some(k);
                    best = Access::IndexIn((*idx).clone(), values);
                }
            }
        }
        if matches!(
            best,
            Access::Scan | Access::RowidRange(..) | Access::IndexRange(..)
        ) {
            // An equality of an indexed expression (its conjunct is checked again on each
            // row found, so the index need only find a superset).
            let null_row = vec![Value::Null; frame.width];
            let sc = Scope::new(frame, &null_row, None);
            let expression_indexes: Vec<_> = usable
                .iter()
                .filter(|i| i.columns[0].0 == crate::schema::EXPR_PART)
                .collect();
            'conjuncts: for e in exprs.iter().filter(|_| !expression_indexes.is_empty()) {
                let Expr::Binary(BinOp::Eq, a, b) = e else {
                    continue;
                };
                for (side, other) in [(a, b), (b, a)] {
                    // Compared as stored (no affinity on either side), in the index's
                    // collation.
                    if !known_before(other)
                        || self.affinity(side, &sc).is_some()
                        || self.affinity(other, &sc).is_some()
                        || self.explicit_collation(other).is_some()
                    {
                        continue;
                    }
                    let Some(form) = table_expr_form(side, t, Some((frame, start))) else {
                        continue;
                    };
                    let idx = expression_indexes.iter().find(|i| {
                        i.columns[0].2 == self.collation(side, &sc)
                            && table_expr_form(&i.exprs[0], t, None).as_ref() == Some(&form)
                    });
                    if let Some(idx) = idx {
                        best = Access::Index((**idx).clone(), (**other).clone(), None);
                        break 'conjuncts;
                    }
                }
            }
        }
        match best {
            Access::RowidRange(..) => {}
            // A numeric range of constants: every number between them, and the text and
            // blobs past a low bound alone (which compare greater than any number).
            Access::IndexRange(_, ref lo, ref hi)
                if lo
                    .iter()
                    .chain(hi)
                    .all(|b| matches!(b, Expr::Literal(_) | Expr::Param(_))) => {}
            Access::Index(ref idx, ..) | Access::IndexIn(ref idx, _) if idx.exprs.is_empty() => {
                implied = index_implied.into_iter().collect()
            }
            _ => implied.clear(),
        }
        (best, implied)
    }

    /// The engine scan of `t` in rowid order that `access` (a full scan or a rowid range)
    /// reads; `None` when the range is empty.
    fn rowid_scan(
        &mut self,
        t: &Table,
        access: &Access,
        sc: &Scope,
    ) -> Result<Option<(beechdb::TxnIter, bool)>> {
        let db = self.db(&t.db)?;
        Ok(match self.rowid_bounds(access, sc)? {
            None => None,
            Some(_) if matches!(access, Access::Scan) => Some((self.txn.iter(&db), false)),
            Some((from, to, exact)) => Some((self.txn.range(&db, from..=to), exact)),
        })
    }

    /// The first and last rowid keys a full scan or a rowid range reads, and whether every
    /// row between them matches the range's conditions; `None` when the range is empty.
    fn rowid_bounds(&mut self, access: &Access, sc: &Scope) -> Result<Option<RowidBounds>> {
        let Access::RowidRange(lo, hi) = access else {
            let (first, last) = (i64::MIN, i64::MAX);
            return Ok(Some((rowid_key(first), rowid_key(last), false)));
        };
        // Integer bounds around the values (a superset of the matching rowids; exactly
        // them when every bound is an integer).
        let mut exact = true;
        let mut bound =
            |me: &mut Self, e: &Option<Expr>, low: bool| -> Result<Option<Option<i64>>> {
                let Some(e) = e else { return Ok(Some(None)) };
                let v = Affinity::Numeric.apply(me.eval(e, sc)?);
                exact &= matches!(v, Value::Integer(_));
                Ok(match v {
                    Value::Null => None,
                    Value::Integer(i) => Some(Some(i)),
                    Value::Real(r) => Some(Some(if low { r.floor() } else { r.ceil() } as i64)),
                    // Text and blobs sort after every number.
                    _ if low => None,
                    _ => Some(None),
                })
            };
        let (Some(l), Some(h)) = (bound(self, lo, true)?, bound(self, hi, false)?) else {
            return Ok(None);
        };
        let from = rowid_key(l.unwrap_or(i64::MIN));
        let to = rowid_key(h.unwrap_or(i64::MAX));
        Ok((from <= to).then_some((from, to, exact)))
    }

    /// What `access` finds of `t`: the rows of a rowid range (or of the whole table), or
    /// the rowids a rowid or an index names.
    fn lookup(&mut self, t: &Table, access: &Access, sc: &Scope) -> Result<Found> {
        let nothing = Ok(Found::Rowids(SmallVec::new(), true));
        match access {
            Access::IndexOrder(idx, reverse, lo, hi) => {
                let (from, high) = match (lo, hi) {
                    (None, None) => (Vec::new(), None),
                    _ => match self.index_span(lo, hi, sc)? {
                        Some((from, high, _)) => (from, high),
                        None => return nothing,
                    },
                };
                // Keys that begin with `high` or less: those before its prefix's end.
                let to = high.map_or(Bound::Unbounded, |h| prefix_end(&h));
                let idb = self.db(&idx.db)?;
                let from = match from.is_empty() {
                    true => Bound::Unbounded,
                    false => Bound::Included(from),
                };
                let range = (from, to);
                let entries = match reverse {
                    true => self.txn.range_rev(&idb, range),
                    false => self.txn.range(&idb, range),
                };
                // Read for a LIMIT: few entries at first.
                Ok(Found::Entries(Box::new(entries.few_first())))
            }
            Access::Scan | Access::RowidRange(..) => match self.rowid_scan(t, access, sc)? {
                Some((scan, exact)) => Ok(Found::Scan(Box::new(scan), exact)),
                None => nothing,
            },
            Access::Rowid(e) => {
                let v = self.eval(e, sc)?;
                // The rowid is an integer: only a value equal to one finds a row.
                match Affinity::Integer.apply(v) {
                    Value::Integer(i) => Ok(Found::Rowids(smallvec::smallvec![i], true)),
                    _ => nothing,
                }
            }
            Access::RowidIn(values) => {
                let mut rowids = SmallVec::new();
                for (v, _) in self.in_values(values, sc)? {
                    if let Value::Integer(i) = Affinity::Integer.apply(v) {
                        rowids.push(i);
                    }
                }
                rowids.sort_unstable();
                rowids.dedup();
                Ok(Found::Rowids(rowids, false))
            }
            Access::IndexIn(idx, values) => {
                let mut rowids: SmallVec<[i64; 4]> = SmallVec::new();
                let mut exact = true;
                for (v, aff) in self.in_values(values, sc)? {
                    // None: NULL, or a value no entry can equal; it finds no row.
                    if let Some((prefix, exactly)) = index_probe_key(t, idx, v, aff) {
                        exact &= exactly;
                        rowids.extend(self.index_rowids(idx, &prefix, Some(&prefix))?);
                    }
                }
                rowids.sort_unstable();
                rowids.dedup();
                Ok(Found::Rowids(rowids, exact))
            }
            Access::IndexRange(idx, lo, hi) => match self.index_span(lo, hi, sc)? {
                Some((from, high, exact)) => {
                    let rowids = self.index_rowids(idx, &from, high.as_deref())?;
                    Ok(Found::Rowids(rowids, exact))
                }
                None => nothing,
            },
            Access::Index(idx, e, other_aff) => {
                let v = self.eval(e, sc)?;
                let Some((prefix, exact)) = index_probe_key(t, idx, v, *other_aff) else {
                    return nothing;
                };
                let rowids = self.index_rowids(idx, &prefix, Some(&prefix))?;
                Ok(Found::Rowids(rowids, exact))
            }
        }
    }

    /// The values an `IN` access path looks up, each with its affinity.
    fn in_values(
        &mut self,
        values: &InValues,
        sc: &Scope,
    ) -> Result<Vec<(Value, Option<Affinity>)>> {
        match values {
            InValues::List(list) => list.iter().map(|e| Ok((self.eval(e, sc)?, None))).collect(),
            InValues::Query(sel) => {
                let r = self.subquery(sel, sc)?;
                if r.columns.len() != 1 {
                    return Err(Error::Sql(format!(
                        "sub-select returns {} columns - expected 1",
                        r.columns.len()
                    )));
                }
                let aff = self.select_affinity(sel, None);
                Ok(r.rows.iter().map(|row| (row[0].clone(), aff)).collect())
            }
        }
    }

    /// Whether every name in `sel` names something of `sel` itself (its sources, or those
    /// of a query inside it): then it reads nothing of the rows around it, and gives the
    /// same rows wherever it runs. Conservative: a name it cannot place (a result column's
    /// alias, a double-quoted string, a common table expression's) says no.
    fn reads_no_outer_row(&self, sel: &Select) -> bool {
        sel.with.is_empty() && self.closed_select(sel, &mut Vec::new())
    }

    fn closed_select(&self, sel: &Select, scopes: &mut Vec<Frame>) -> bool {
        for core in sel.cores() {
            let closed = match core {
                Core::Values(rows) => rows.iter().flatten().all(|e| self.closed_expr(e, scopes)),
                Core::Select {
                    columns,
                    from,
                    where_,
                    group_by,
                    having,
                    ..
                } => {
                    let Ok(frame) = self.frame_of(from.as_ref()) else {
                        return false;
                    };
                    scopes.push(frame);
                    let sources_closed = from.iter().flat_map(From::refs).all(|r| match r {
                        TableRef::Subquery { select, .. } => self.closed_select(select, scopes),
                        TableRef::Nested(_) | TableRef::Function { .. } => false,
                        TableRef::Table { .. } => true,
                    });
                    let mut on = Vec::new();
                    if let Some(f) = from {
                        on_conditions(f, &mut on);
                    }
                    let exprs = columns
                        .iter()
                        .filter_map(|c| match c {
                            ResultColumn::Expr(e, _) => Some(e),
                            _ => None,
                        })
                        .chain(where_)
                        .chain(group_by)
                        .chain(having)
                        .chain(on);
                    let closed =
                        sources_closed && exprs.into_iter().all(|e| self.closed_expr(e, scopes));
                    scopes.pop();
                    closed
                }
            };
            if !closed {
                return false;
            }
        }
        sel.order_by.is_empty()
            && sel
                .limit
                .iter()
                .chain(&sel.offset)
                .all(|e| self.closed_expr(e, scopes))
    }

    fn closed_expr(&self, e: &Expr, scopes: &mut Vec<Frame>) -> bool {
        let mut closed = true;
        e.walk(&mut |x| match x {
            Expr::Column { table, name } => {
                closed &= scopes
                    .iter()
                    .any(|f| matches!(f.resolve(table.as_deref(), name), Ok(Some(_))));
            }
            Expr::Subquery(s) | Expr::Exists(s) | Expr::InSelect { select: s, .. } => {
                closed &= self.closed_select(s, scopes);
            }
            _ => {}
        });
        closed
    }

    /// The keys an index range on a numeric first column reads (see `Access::IndexRange`):
    /// from the first key to the last that begins with the second or less (the end with
    /// none), a superset of the matching entries; `None` when nothing matches (a NULL
    /// bound).
    fn index_span(
        &mut self,
        lo: &Option<Expr>,
        hi: &Option<Expr>,
        sc: &Scope,
    ) -> Result<Option<IndexSpan>> {
        // A bound as the key of a number: `None` when it is NULL (nothing matches);
        // `Some(None)` when it is not a number (text and blobs sort after every number, so
        // a high bound of text bounds nothing and a low one excludes every number: read the
        // whole index then).
        // Keys order numbers exactly, but for those of 2^63 and more (the largest integers
        // share a key with 2^63 as a real): a bound there reads a superset.
        let mut exact = true;
        let mut key = |me: &mut Self, e: &Option<Expr>| -> Result<Option<Option<Vec<u8>>>> {
            let Some(e) = e else { return Ok(Some(None)) };
            let v = Affinity::Numeric.apply(me.eval(e, sc)?);
            Ok(match v {
                Value::Null => None,
                Value::Integer(_) | Value::Real(_) => {
                    exact &= v.as_f64() < 9_223_372_036_854_775_808.0;
                    let mut k = Vec::new();
                    crate::record::encode_key_part(&mut k, &v, Collation::Binary, false);
                    Some(Some(k))
                }
                _ => Some(None),
            })
        };
        let (Some(l), Some(h)) = (key(self, lo)?, key(self, hi)?) else {
            return Ok(None);
        };
        if (lo.is_some() && l.is_none()) || (hi.is_some() && h.is_none()) {
            // The whole index, in its order (which an ORDER BY may rely on).
            return Ok(Some((Vec::new(), None, false)));
        }
        // From the low bound (or the first number, past the NULLs) to the high one (or the
        // end: text and blobs are greater than any number).
        Ok(Some((l.unwrap_or_else(|| vec![0x10]), h, exact)))
    }

    /// The rowids of the entries of `idx` from key `from` through the last key that begins
    /// with `high` or less (to the end without `high`), in index order.
    fn index_rowids(
        &mut self,
        idx: &crate::schema::Index,
        from: &[u8],
        high: Option<&[u8]>,
    ) -> Result<SmallVec<[i64; 4]>> {
        let idb = self.db(&idx.db)?;
        let mut rowids = SmallVec::new();
        let mut damaged = None;
        self.txn.visit_from(&idb, from, |k, v| {
            if high.is_some_and(|h| k[..h.len().min(k.len())] > *h) {
                return false;
            }
            match index_rowid(k, v) {
                Ok(r) => rowids.push(r),
                Err(e) => damaged = Some(e),
            }
            damaged.is_none()
        })?;
        damaged.map_or(Ok(rowids), Err)
    }

    /// Row `rowid` of `t` with its rowid last.
    pub fn row_by_rowid(&mut self, t: &Table, rowid: i64) -> Result<Option<Row>> {
        Ok(self.read_row(t, rowid)?.map(|mut row| {
            row.push(Value::Integer(rowid));
            row
        }))
    }

    /// The value of each window call for each row of `rows` (joined rows of `frame`).
    fn window_values<'c>(
        &mut self,
        calls: &[&'c Expr],
        frame: &Frame,
        (rows, aggs): (&[Row], Option<&[AggValues]>),
        outer: Option<&Scope>,
    ) -> Result<Vec<AggValues>> {
        let mut out: Vec<AggValues> = vec![AggValues::default(); rows.len()];
        let empty_row = vec![Value::Null; frame.width];
        for call in calls {
            let Expr::Window(w) = call else { continue };
            // Per row: its partition, its sort key, its arguments.
            let mut partitions: Vec<Vec<usize>> = Vec::new();
            let mut by_sig: FxHashMap<Vec<u8>, usize> = FxHashMap::default();
            let mut keys = Strided::new(w.order.len(), rows.len());
            let mut args = Strided::new(w.args.len(), rows.len());
            if w.partition.is_empty() && !rows.is_empty() {
                partitions.push((0..rows.len()).collect());
            }
            // Column names resolved to slots once, not for each row; not over an aggregate
            // query's groups, whose aggregate calls are found by their address.
            let (order, call_args): (
                Vec<std::borrow::Cow<'c, Expr>>,
                Vec<std::borrow::Cow<'c, Expr>>,
            ) = {
                let bound = |e: &'c Expr| match aggs {
                    Some(_) => std::borrow::Cow::Borrowed(e),
                    None => std::borrow::Cow::Owned(self.bound(e, frame)),
                };
                (
                    w.order.iter().map(|o| bound(&o.expr)).collect(),
                    w.args.iter().map(bound).collect(),
                )
            };
            for (i, r) in rows.iter().enumerate() {
                let mut sc = Scope::new(frame, r, outer);
                // Over an aggregate query's groups: each group's aggregates.
                sc.agg = aggs.map(|a| &a[i]);
                for e in &order {
                    keys.values.push(self.eval(e, &sc)?);
                }
                for e in &call_args {
                    args.values.push(self.eval(e, &sc)?);
                }
                if w.partition.is_empty() {
                    continue;
                }
                let part = self.eval_all(w.partition.iter(), &sc)?;
                let sig = group_signature(&part);
                let pi = *by_sig.entry(sig).or_insert_with(|| {
                    partitions.push(Vec::new());
                    partitions.len() - 1
                });
                partitions[pi].push(i);
            }
            let specs: Vec<(bool, Option<bool>, Collation)> = {
                let sc = Scope::new(frame, &empty_row, outer);
                w.order
                    .iter()
                    .map(|o| (o.desc, o.nulls_first, self.collation(&o.expr, &sc)))
                    .collect()
            };
            let cmp = |a: &[Value], b: &[Value]| {
                for (i, &(desc, nf, coll)) in specs.iter().enumerate() {
                    let o = order_values(&a[i], &b[i], coll, desc, nf);
                    if o != Ordering::Equal {
                        return o;
                    }
                }
                Ordering::Equal
            };
            // A frame offset: a non-negative integer (a number for RANGE).
            let offset = |me: &mut Self, e: &Expr, start: bool| -> Result<f64> {
                let v = me.eval(e, &Scope::new(&EMPTY_FRAME, &[], outer))?;
                let which = if start { "starting" } else { "ending" };
                match (v, w.units) {
                    (Value::Integer(i), _) if i >= 0 => Ok(i as f64),
                    (Value::Real(r), FrameUnits::Range) if r >= 0.0 => Ok(r),
                    (_, FrameUnits::Range) => Err(Error::Sql(format!(
                        "frame {which} offset must be a non-negative number"
                    ))),
                    _ => Err(Error::Sql(format!(
                        "frame {which} offset must be a non-negative integer"
                    ))),
                }
            };
            let desc = w.order.first().is_some_and(|o| o.desc);
            // The collation the first argument compares in (min, max).
            let arg_coll = {
                let sc = Scope::new(frame, &empty_row, outer);
                w.args
                    .first()
                    .map_or(Collation::Binary, |a| self.collation(a, &sc))
            };
            // One state slides over each partition's frames (frames without exclusions
            // only move forward), each row added once and taken out once: for a registered
            // aggregate with an inverse; for a built-in one whose state can be read and go
            // on, when every frame starts at the partition's first row, or when it can take
            // rows out too (count, sum, total and avg, whose results depend on it as
            // SQLite's do: a sum that met a real stays real). Frame by frame otherwise.
            let aggregate =
                w.user.is_some() || func::is_aggregate(&w.name, w.args.len()) || w.name == "count";
            let grows = matches!(w.start, FrameBound::UnboundedPreceding);
            let incremental = aggregate
                && w.exclude == FrameExclude::NoOthers
                && Acc::finish_keeps_state(&w.name, w.user.as_ref())
                && (grows || (Acc::has_inverse(&w.name) && w.args.len() <= 1));
            let fresh_slide = || match &w.user {
                Some(UserFunction::Aggregate(f))
                    if f.slides() && w.exclude == FrameExclude::NoOthers =>
                {
                    Some(Sliding::User(f.start()))
                }
                _ if incremental => {
                    Some(Sliding::Builtin(Acc::new(&w.name, &w.args, None), arg_coll))
                }
                _ => None,
            };
            // Built-in min and max over frames that move at both ends: a queue of
            // candidates slides with them (each row added and dropped once), where a frame
            // by frame reading took the frame's length for each row.
            let sliding_extreme = !incremental
                && w.user.is_none()
                && w.args.len() == 1
                && w.exclude == FrameExclude::NoOthers;
            for mut part in partitions {
                // The sliding state, and the positions it holds: [from, to).
                let mut slide = fresh_slide().map(|s| (s, 0usize, 0usize));
                // For min and max over frames that move: the positions [from, to) added,
                // as a queue of candidates whose values go from the extreme down.
                let mut extremes: (VecDeque<usize>, usize, usize) = (VecDeque::new(), 0, 0);
                part.sort_by(|&a, &b| cmp(&keys[a], &keys[b]));
                let n = part.len();
                // Peer groups: equal sort keys.
                let (mut peer_start, mut peer_end, mut group) =
                    (vec![0; n], vec![0; n], vec![0; n]);
                let mut group_first = Vec::new();
                let mut j = 0;
                while j < n {
                    let mut k = j;
                    while k + 1 < n && cmp(&keys[part[j]], &keys[part[k + 1]]) == Ordering::Equal {
                        k += 1;
                    }
                    for x in j..=k {
                        (peer_start[x], peer_end[x], group[x]) = (j, k, group_first.len());
                    }
                    group_first.push(j);
                    j = k + 1;
                }
                // The ORDER BY value of position `x` as a number, for RANGE offsets.
                let number = |x: usize| match keys[part[x]].first() {
                    Some(Value::Integer(i)) => Some(*i as f64),
                    Some(Value::Real(r)) => Some(*r),
                    _ => None,
                };
                // Where position `x` stands against an offset from a number: NULL below
                // every number and text above, as they sort (SQLite counts a NULL row in
                // the frame `UNBOUNDED PRECEDING AND 1 PRECEDING` of an ascending order).
                let place = |x: usize| match keys[part[x]].first() {
                    Some(Value::Null) | None => f64::NEG_INFINITY,
                    _ => number(x).unwrap_or(f64::INFINITY),
                };
                for j in 0..n {
                    // Where bound `b` puts the frame's first (`start`) or last position.
                    let at = |me: &mut Self, b: &FrameBound, start: bool| -> Result<i64> {
                        let (e, back) = match b {
                            FrameBound::UnboundedPreceding => {
                                return Ok(if start { 0 } else { -1 })
                            }
                            FrameBound::UnboundedFollowing => {
                                return Ok(if start { n as i64 } else { n as i64 - 1 })
                            }
                            FrameBound::CurrentRow => {
                                return Ok(match (w.units, start) {
                                    (FrameUnits::Rows, _) => j as i64,
                                    (_, true) => peer_start[j] as i64,
                                    (_, false) => peer_end[j] as i64,
                                })
                            }
                            FrameBound::Preceding(e) => (e, true),
                            FrameBound::Following(e) => (e, false),
                        };
                        let k = offset(me, e, start)?;
                        Ok(match w.units {
                            FrameUnits::Rows => {
                                j as i64 + if back { -(k as i64) } else { k as i64 }
                            }
                            FrameUnits::Groups => {
                                let g = group[j] as i64 + if back { -(k as i64) } else { k as i64 };
                                let groups = group_first.len() as i64;
                                match (start, g) {
                                    (true, g) if g < 0 => 0,
                                    (true, g) if g >= groups => n as i64,
                                    (true, g) => group_first[g as usize] as i64,
                                    (false, g) if g < 0 => -1,
                                    (false, g) if g + 1 >= groups => n as i64 - 1,
                                    (false, g) => group_first[g as usize + 1] as i64 - 1,
                                }
                            }
                            // By value: a row whose value is not a number has its peers.
                            FrameUnits::Range => match number(j) {
                                None if start => peer_start[j] as i64,
                                None => peer_end[j] as i64,
                                Some(v) => {
                                    let target = if back != desc { v - k } else { v + k };
                                    // Before the target in the order of the rows.
                                    let before =
                                        |x: f64| if desc { x > target } else { x < target };
                                    let after = |x: f64| if desc { x < target } else { x > target };
                                    match start {
                                        true => {
                                            (0..n).find(|&x| !before(place(x))).unwrap_or(n) as i64
                                        }
                                        false => (0..n)
                                            .rev()
                                            .find(|&x| !after(place(x)))
                                            .map_or(-1, |x| x as i64),
                                    }
                                }
                            },
                        })
                    };
                    // The frame, as positions [lo, hi] (empty when lo > hi).
                    let lo = at(self, &w.start, true)?.max(0);
                    let hi = at(self, &w.end, false)?.min(n as i64 - 1);
                    // The frame as positions [start, end) of the partition, for the states
                    // that slide (a frame past the partition's end is empty there).
                    let start = (lo as usize).min(n);
                    let end = ((hi + 1).max(0) as usize).clamp(start, n);
                    let (peers, me) = (peer_start[j]..=peer_end[j], j);
                    let left_out = move |x: usize| match w.exclude {
                        FrameExclude::NoOthers | FrameExclude::NoOthersWritten => false,
                        FrameExclude::CurrentRow => x == me,
                        FrameExclude::Group => peers.contains(&x),
                        FrameExclude::Ties => x != me && peers.contains(&x),
                    };
                    let in_frame = || {
                        (lo..=hi)
                            .map(|x| x as usize)
                            .filter(|&x| !left_out(x))
                            .map(|x| part[x])
                    };
                    let arg = |r: usize, i: usize| args[r].get(i).cloned().unwrap_or(Value::Null);
                    let v = match w.name.as_str() {
                        "row_number" => Value::Integer(j as i64 + 1),
                        "rank" => Value::Integer(peer_start[j] as i64 + 1),
                        "dense_rank" => Value::Integer(group[j] as i64 + 1),
                        "percent_rank" => Value::Real(if n <= 1 {
                            0.0
                        } else {
                            peer_start[j] as f64 / (n - 1) as f64
                        }),
                        "cume_dist" => Value::Real((peer_end[j] + 1) as f64 / n as f64),
                        "ntile" => {
                            let k = arg(part[j], 0).as_i64();
                            if k <= 0 {
                                return Err(Error::Sql(
                                    "argument of ntile must be a positive integer".into(),
                                ));
                            }
                            let k = k as usize;
                            let (size, extra) = (n / k, n % k);
                            let bucket = if j < extra * (size + 1) {
                                j / (size + 1)
                            } else {
                                extra + (j - extra * (size + 1)) / size.max(1)
                            };
                            Value::Integer(bucket as i64 + 1)
                        }
                        "lag" | "lead" => {
                            let off = if w.args.len() > 1 {
                                arg(part[j], 1).as_i64()
                            } else {
                                1
                            };
                            let at = if w.name == "lag" {
                                j as i64 - off
                            } else {
                                j as i64 + off
                            };
                            if (0..n as i64).contains(&at) {
                                arg(part[at as usize], 0)
                            } else {
                                arg(part[j], 2)
                            }
                        }
                        "min" | "max" if sliding_extreme => {
                            let want = match w.name.as_str() {
                                "max" => Ordering::Greater,
                                _ => Ordering::Less,
                            };
                            let coll = arg_coll;
                            let value = |x: usize| &args[part[x]][0];
                            let (queue, from, to) = &mut extremes;
                            if start < *from || end < *to {
                                // A frame that moved back: start it again.
                                queue.clear();
                                (*from, *to) = (start, start);
                            }
                            for x in *to..end {
                                // NULLs count for nothing; a value drops those before it
                                // that it beats or equals (of equal values the latest
                                // stands, as in SQLite's index of the frame's values).
                                if value(x).is_null() {
                                    continue;
                                }
                                while queue
                                    .back()
                                    .is_some_and(|&b| value(b).cmp_with(value(x), coll) != want)
                                {
                                    queue.pop_back();
                                }
                                queue.push_back(x);
                            }
                            (*from, *to) = (start.max(*from), end.max(*to));
                            while queue.front().is_some_and(|&f| f < *from) {
                                queue.pop_front();
                            }
                            queue.front().map_or(Value::Null, |&f| value(f).clone())
                        }
                        "first_value" => in_frame().next().map_or(Value::Null, |r| arg(r, 0)),
                        "last_value" => in_frame().next_back().map_or(Value::Null, |r| arg(r, 0)),
                        "nth_value" => {
                            let k = arg(part[j], 1).as_i64();
                            if k <= 0 {
                                return Err(Error::Sql(
                                    "second argument to nth_value must be a positive integer"
                                        .into(),
                                ));
                            }
                            in_frame()
                                .nth(k as usize - 1)
                                .map_or(Value::Null, |r| arg(r, 0))
                        }
                        _ if slide.is_some() => {
                            let (state, from, to) = slide.as_mut().expect("sliding");
                            if start < *from || end < *to {
                                // A frame that moved back: start it again.
                                state.end();
                                *state = fresh_slide().expect("sliding");
                                (*from, *to) = (start, start);
                            }
                            for x in *to..end {
                                state.step(&args[part[x]])?;
                            }
                            *to = (*to).max(end);
                            for x in *from..start.min(*to) {
                                state.inverse(&args[part[x]])?;
                            }
                            *from = (*from).max(start.min(*to));
                            state.value()?
                        }
                        name if aggregate => {
                            let mut acc = Acc::new(name, &w.args, w.user.as_ref());
                            for r in in_frame() {
                                acc.step(&args[r], arg_coll)?;
                            }
                            acc.finish()?
                        }
                        other => {
                            return Err(Error::Sql(format!("no such window function: {other}")))
                        }
                    };
                    out[part[j]].insert(key_of(call), v);
                }
                if let Some((mut state, _, _)) = slide {
                    state.end();
                }
            }
        }
        Ok(out)
    }

    /// Runs subquery `sel` in scope `sc`, or gives the rows kept from its first run in this
    /// run of its statement (see `KeptSubqueries`). A run of the subquery in which no name
    /// resolved in `sc` or a scope around it read nothing of the enclosing queries' rows, so
    /// it gives the same rows for every one of them: those are kept.
    fn subquery(&mut self, sel: &Select, sc: &Scope) -> Result<Arc<QueryResult>> {
        let key = self.subqueries.key(sel);
        if let Some(kept) = key.and_then(|k| self.subqueries.kept.get(&k)) {
            return Ok(kept.result.clone());
        }
        let before = self.subqueries.shallowest.replace(usize::MAX);
        let result = self.select(sel, Some(sc));
        // What the subquery reached is reached by what holds it too.
        let reached = self.subqueries.shallowest.get();
        self.subqueries.shallowest.set(before.min(reached));
        let result = Arc::new(result?);
        if let Some(key) = key.filter(|_| reached > depth(sc) && self.plan.is_none()) {
            let kept = KeptSubquery {
                result: result.clone(),
                probe: None,
            };
            self.subqueries.kept.insert(key, kept);
        }
        Ok(result)
    }

    /// The sorted values of kept subquery `sel` for `x IN (sel)`, with `x` of affinity
    /// `left`, the subquery's column of `right`, compared in `coll` (see `InProbe`);
    /// `None` when the subquery is not kept.
    fn in_probe(
        &mut self,
        sel: &Select,
        left: Option<Affinity>,
        right: Option<Affinity>,
        coll: Collation,
    ) -> Option<Arc<InProbe>> {
        let key = self.subqueries.key(sel)?;
        let kept = self.subqueries.kept.get_mut(&key)?;
        if let Some(p) = &kept.probe {
            return Some(p.clone());
        }
        let values = kept.result.rows.iter().map(|r| r[0].clone());
        let probe = Arc::new(InProbe::build(values, left, right, coll));
        kept.probe = Some(probe.clone());
        Some(probe)
    }

    /// The sorted values of list `list` (constants and parameters) for `x IN (list)`, with
    /// `x` of affinity `left` (the list's values have none), compared in `coll`: made once
    /// per run of the statement (a list of a thousand values was compared value by value
    /// for each row), kept in the expression.
    fn list_probe(
        &mut self,
        sorted: &ListProbe,
        list: &[Expr],
        left: Option<Affinity>,
        coll: Collation,
        sc: &Scope,
    ) -> Result<Arc<InProbe>> {
        let run = (self.subqueries.id, self.subqueries.run);
        if let Some((at, made_for, p)) = &*sorted.0.lock() {
            if *at == run && *made_for == left && p.coll == coll {
                return Ok(p.clone());
            }
        }
        let values = list
            .iter()
            .map(|e| self.eval(e, sc))
            .collect::<Result<Vec<_>>>()?;
        let probe = Arc::new(InProbe::build(values.into_iter(), left, None, coll));
        *sorted.0.lock() = Some((run, left, probe.clone()));
        Ok(probe)
    }

    /// Runs a SELECT; `outer` is the scope of the enclosing query, for correlated subqueries.
    pub fn select(&mut self, sel: &Select, outer: Option<&Scope>) -> Result<QueryResult> {
        self.with_ctes(&sel.with, outer, |me| me.select_body(sel, outer))
    }

    /// Runs `body` with the common table expressions of a WITH clause in scope.
    pub(crate) fn with_ctes<T>(
        &mut self,
        with: &[Cte],
        outer: Option<&Scope>,
        body: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        if with.is_empty() {
            return body(self);
        }
        self.subqueries.forget();
        self.ctes.push(FxHashMap::default());
        let mut made = Ok(());
        for cte in with {
            match self.cte(cte, outer) {
                Ok(r) => {
                    let scope = self.ctes.last_mut().expect("pushed");
                    scope.insert(lc(&cte.name), Arc::new(r));
                    self.subqueries.forget();
                }
                Err(e) => {
                    made = Err(e);
                    break;
                }
            }
        }
        let result = made.and_then(|()| body(self));
        self.ctes.pop();
        self.subqueries.forget();
        result
    }

    fn cte(&mut self, cte: &Cte, outer: Option<&Scope>) -> Result<Materialized> {
        let refers_to_self = {
            let mut hit = false;
            let mut check = |c: &Core| {
                if let Core::Select { from: Some(f), .. } = c {
                    hit |= f.refs().any(|r| matches!(r, TableRef::Table { name, .. } if name.eq_ignore_ascii_case(&cte.name)));
                }
            };
            for (_, c) in &cte.select.compounds {
                check(c);
            }
            hit
        };
        if !refers_to_self {
            let r = self.select(&cte.select, outer)?;
            let names = match &cte.columns {
                Some(n) => n.clone(),
                None => r.columns.to_vec(),
            };
            return Ok((names, r.rows));
        }
        // WITH RECURSIVE: the first core seeds, the rest run on the rows added last.
        let seed = Select {
            with: Vec::new(),
            first: cte.select.first.clone(),
            compounds: Vec::new(),
            order_by: Vec::new(),
            limit: None,
            offset: None,
        };
        let first = self.select(&seed, outer)?;
        let names = cte
            .columns
            .clone()
            .unwrap_or_else(|| first.columns.to_vec());
        let seed_width = first.columns.len();
        let union_all = cte
            .select
            .compounds
            .iter()
            .all(|(op, _)| *op == CompoundOp::UnionAll);
        let limit = match &cte.select.limit {
            Some(l) => Some(
                self.eval(l, &Scope::new(&EMPTY_FRAME, &[], outer))?
                    .as_i64(),
            ),
            None => None,
        };
        // Rows join `all` once the step that reads them is done; the queue and the names
        // are moved into the scope for each step and taken back after it, not copied.
        let mut all = Vec::new();
        let (mut names, mut queue) = (names, first.rows);
        // Under UNION, every row queued so far, by signature: a row already there (the
        // seed's own repeats included) is not queued again.
        let mut queued = (!union_all).then(Distinct::default);
        if let Some(q) = queued.as_mut() {
            queue.retain(|r| q.novel(r));
        }
        let key = lc(&cte.name);
        // Steps of the simplest shape run without the machinery of a select each.
        let simple: Option<Vec<SimpleStep>> = cte
            .select
            .compounds
            .iter()
            .map(|(_, core)| self.simple_step(core, &key, &names))
            .collect();
        self.ctes.push(FxHashMap::default());
        let scope = self.ctes.len() - 1;
        let mut guard = 0u64;
        let mut failed = None;
        while !queue.is_empty() {
            guard += 1;
            if guard > RECURSION_LIMIT {
                failed = Some(Error::Sql(format!(
                    "recursive query did not end after {RECURSION_LIMIT} steps (add a LIMIT)"
                )));
                break;
            }
            let mut next = Vec::new();
            if let Some(steps) = &simple {
                for step in steps {
                    match self.simple_rows(step, &queue, outer) {
                        Ok(rows) => next.extend(rows),
                        Err(e) => {
                            failed = Some(e);
                            break;
                        }
                    }
                }
            } else {
                self.ctes[scope].insert(key.clone(), Arc::new((names, queue)));
                // A subquery kept from the step before may have read the queue that was.
                self.subqueries.forget();
                for (op, core) in &cte.select.compounds {
                    match self.core(core, outer, &[], None) {
                        Ok(r) if r.0.len() != seed_width => {
                            failed = Some(compound_width_error(*op));
                            break;
                        }
                        Ok(r) => next.extend(r.1.into_iter().map(|(row, _)| row)),
                        Err(e) => {
                            failed = Some(e);
                            break;
                        }
                    }
                }
                let step = self.ctes[scope].remove(&key).expect("the step's rows");
                (names, queue) = Arc::try_unwrap(step).unwrap_or_else(|shared| (*shared).clone());
            }
            all.append(&mut queue);
            if failed.is_some() {
                break;
            }
            if let Some(q) = queued.as_mut() {
                next.retain(|r| q.novel(r));
            }
            queue = next;
            if limit.is_some_and(|l| l >= 0 && (all.len() + queue.len()) as i64 >= l) {
                all.append(&mut queue);
                break;
            }
        }
        self.ctes.pop();
        self.subqueries.forget();
        if let Some(e) = failed {
            return Err(e);
        }
        if let Some(l) = limit.filter(|&l| l >= 0) {
            all.truncate(l as usize);
        }
        Ok((names, all))
    }

    /// `core` as a [`SimpleStep`] over the rows of CTE `cte` (columns `names`), if it has
    /// that shape: no join, grouping, aggregate, window function, DISTINCT or subquery (a
    /// subquery could read the CTE, which only a planned step puts in scope), and as many
    /// columns as the CTE (else `Exec::core` reports it). `core` plans a step and joins its
    /// one source each time: about 7,000 instructions a step of one row, so counting to
    /// 100,000 took twice SQLite's time.
    fn simple_step(&self, core: &Core, cte: &str, names: &[String]) -> Option<SimpleStep> {
        let Core::Select {
            distinct: false,
            columns,
            from: Some(From { first, joins }),
            where_,
            group_by,
            having: None,
            ..
        } = core
        else {
            return None;
        };
        let TableRef::Table { name, alias } = first else {
            return None;
        };
        if !joins.is_empty() || !group_by.is_empty() || lc(name) != cte {
            return None;
        }
        let source = lc(alias.as_deref().unwrap_or(name));
        let plain = |e: &Expr| {
            let mut nested = false;
            e.walk(&mut |x| nested |= opaque(x));
            !nested && !has_aggregate(e)
        };
        let mut frame = Frame::default();
        frame.push(&source, cte_source_columns(names), false);
        let mut width = 0;
        let mut exprs = Vec::with_capacity(columns.len());
        for c in columns {
            let e = match c {
                ResultColumn::Expr(e, _) if plain(e) => Some(self.bound(e, &frame)),
                ResultColumn::Star => None,
                ResultColumn::TableStar(t) if lc(t) == source => None,
                _ => return None,
            };
            width += e.as_ref().map_or(names.len(), |_| 1);
            exprs.push(e);
        }
        if width != names.len() || !where_.as_ref().is_none_or(plain) {
            return None;
        }
        let where_ = where_.as_ref().map(|e| self.bound(e, &frame));
        Some(SimpleStep {
            frame,
            columns: exprs,
            where_,
        })
    }

    /// The rows `step` makes of the rows `queued` (see [`Exec::simple_step`]): each
    /// filtered and projected in turn.
    fn simple_rows(
        &mut self,
        step: &SimpleStep,
        queued: &[Row],
        outer: Option<&Scope>,
    ) -> Result<Vec<Row>> {
        let mut out = Vec::new();
        for row in queued {
            if !self.row_passes(step.where_.iter(), &step.frame, row, outer)? {
                continue;
            }
            let sc = Scope::new(&step.frame, row, outer);
            let mut next = Vec::with_capacity(row.len());
            for c in &step.columns {
                match c {
                    Some(e) => next.push(self.eval(e, &sc)?),
                    None => next.extend_from_slice(row),
                }
            }
            out.push(next);
        }
        Ok(out)
    }

    fn select_body(&mut self, sel: &Select, outer: Option<&Scope>) -> Result<QueryResult> {
        let order: &[OrderTerm] = if sel.compounds.is_empty() {
            &sel.order_by
        } else {
            &[]
        };
        let (offset, limit) = self.offset_and_limit(sel, outer)?;
        let wanted = match sel.compounds.is_empty() {
            true => Some(offset.saturating_add(limit)),
            false => None,
        };
        let (meta, mut rows) = self.core(&sel.first, outer, order, wanted)?;
        let mut result = QueryResult {
            columns: meta.names.clone(),
            decl_types: meta.types.clone(),
            rows: Vec::new(),
        };
        if !sel.compounds.is_empty() {
            let mut plain: Vec<Row> = rows.into_iter().map(|(r, _)| r).collect();
            for (op, core) in &sel.compounds {
                let (m, more) = self.core(core, outer, &[], None)?;
                if m.len() != meta.len() {
                    return Err(compound_width_error(*op));
                }
                let more: Vec<Row> = more.into_iter().map(|(r, _)| r).collect();
                // Of equal rows (3 and 3.0), which one stands for them: without an ORDER
                // BY, the last (SQLite's temporary index keeps it); with one, SQLite merges
                // the sorted sides, and the first does (for UNION, the right side's first
                // if it has one).
                let keep = match (sel.order_by.is_empty(), op) {
                    (true, _) => Keep::Last,
                    (false, CompoundOp::Union) => Keep::First { right: plain.len() },
                    (false, _) => Keep::First { right: usize::MAX },
                };
                plain = match op {
                    CompoundOp::UnionAll => {
                        plain.extend(more);
                        plain
                    }
                    // Rows come out in index order, as from SQLite's temporary index.
                    CompoundOp::Union => {
                        plain.extend(more);
                        dedupe_sorted(plain, keep)
                    }
                    // The right side's rows by signature: a probe per left row, not a
                    // comparison with every right row.
                    CompoundOp::Intersect | CompoundOp::Except => {
                        let right: FxHashSet<Vec<u8>> =
                            more.iter().map(|m| group_signature(m)).collect();
                        let keep_found = *op == CompoundOp::Intersect;
                        let mut kept = dedupe_sorted(plain, keep);
                        let mut sig = Vec::new();
                        kept.retain(|r| {
                            sig.clear();
                            group_signature_into(r, &mut sig);
                            right.contains(&sig) == keep_found
                        });
                        kept
                    }
                };
            }
            // ORDER BY of a compound names result columns (by ordinal, alias or expression).
            let mut keys: Vec<(usize, bool, Option<bool>, Collation)> = Vec::new();
            for t in &sel.order_by {
                let (inner, coll) = match &t.expr {
                    Expr::Collate(e, c) => (&**e, Some(*c)),
                    e => (e, None),
                };
                let idx = match inner {
                    Expr::Literal(Value::Integer(i)) if *i >= 1 && (*i as usize) <= meta.len() => {
                        *i as usize - 1
                    }
                    Expr::Literal(Value::Integer(i)) => {
                        return Err(Error::Sql(format!(
                            "1st ORDER BY term out of range - should be between 1 and {}",
                            meta.len().max(*i as usize)
                        )))
                    }
                    e => {
                        let name = expr_name(e);
                        meta.iter()
                            .position(|c| c.name.eq_ignore_ascii_case(&name))
                            .ok_or_else(|| {
                                Error::Sql(
                                    "1st ORDER BY term does not match any column in the result set"
                                        .into(),
                                )
                            })?
                    }
                };
                keys.push((idx, t.desc, t.nulls_first, coll.unwrap_or(meta[idx].coll)));
            }
            if !keys.is_empty() {
                plain.sort_by(|a, b| {
                    for &(i, desc, nulls_first, coll) in &keys {
                        let o = order_values(&a[i], &b[i], coll, desc, nulls_first);
                        if o != Ordering::Equal {
                            return o;
                        }
                    }
                    Ordering::Equal
                });
            }
            rows = plain.into_iter().map(|r| (r, Vec::new())).collect();
        }
        result.rows = rows
            .into_iter()
            .skip(offset)
            .take(limit)
            .map(|(r, _)| r)
            .collect();
        Ok(result)
    }

    /// A select's OFFSET (0 if none) and LIMIT (`usize::MAX` if none or negative).
    fn offset_and_limit(&mut self, sel: &Select, outer: Option<&Scope>) -> Result<(usize, usize)> {
        let sc = Scope::new(&EMPTY_FRAME, &[], outer);
        let offset = match &sel.offset {
            Some(o) => self.eval(o, &sc)?.as_i64().max(0) as usize,
            None => 0,
        };
        let limit = match &sel.limit {
            Some(l) => {
                let v = self.eval(l, &sc)?;
                if !matches!(v.to_numeric(), Value::Integer(_)) && !v.is_null() {
                    return Err(Error::Sql("datatype mismatch".into()));
                }
                let l = v.as_i64();
                if l < 0 {
                    usize::MAX
                } else {
                    l as usize
                }
            }
            None => usize::MAX,
        };
        Ok((offset, limit))
    }

    /// The plan kept under `id` for the current schema, else `build`'s (kept, unless `id` is
    /// `PlanId::NONE` or common table expressions are in scope: their names may hide
    /// tables, and their columns are known only while running).
    pub(crate) fn cached_plan(
        &self,
        id: PlanId,
        build: impl FnOnce(&Self) -> Result<CorePlan>,
    ) -> Result<Arc<CorePlan>> {
        let cache = match self.plans {
            Some(c) if id != PlanId::NONE && self.ctes.is_empty() => c,
            // Where common table expressions are in scope their names may hide tables: the
            // plan is kept for this run only, and by the names in scope too (a recursive
            // one's step is planned once, not at every step).
            Some(_) if id != PlanId::NONE => {
                let key = (id, self.cte_signature());
                if let Some((names, p)) = self.scoped_plans.borrow().get(&key) {
                    if self.same_ctes(names) {
                        return Ok(p.clone());
                    }
                }
                let plan = Arc::new(build(self)?);
                let names = self.ctes.iter().map(|scope| {
                    let entries = scope.iter().map(|(n, m)| (n.clone(), m.0.clone()));
                    entries.collect()
                });
                let kept = (names.collect(), plan.clone());
                self.scoped_plans.borrow_mut().insert(key, kept);
                return Ok(plan);
            }
            _ => return build(self).map(Arc::new),
        };
        let current = |p: &Plans| {
            p.schema
                .as_ref()
                .is_some_and(|s| Arc::ptr_eq(s, self.schema))
        };
        {
            let plans = cache.0.lock();
            if let Some(p) = plans.map.get(&id).filter(|_| current(&plans)) {
                return Ok(p.clone());
            }
        }
        let plan = Arc::new(build(self)?);
        let mut plans = cache.0.lock();
        if !current(&plans) {
            plans.map.clear();
            plans.schema = Some(self.schema.clone());
        }
        plans.map.insert(id, plan.clone());
        Ok(plan)
    }

    /// A hash of the common table expressions in scope (each scope's names and columns,
    /// in any order within it): what a plan made in their scope depends on besides the
    /// statement and the schema. `same_ctes` confirms a match.
    fn cte_signature(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut sig = 0u64;
        for (i, scope) in self.ctes.iter().enumerate() {
            for (name, m) in scope {
                let mut h = rustc_hash::FxHasher::default();
                (i, name, &m.0).hash(&mut h);
                sig = sig.wrapping_add(h.finish());
            }
        }
        sig
    }

    /// Whether the common table expressions in scope are `names` (per scope, each with its
    /// columns), as a kept plan records them.
    fn same_ctes(&self, names: &[Vec<(String, Vec<String>)>]) -> bool {
        names.len() == self.ctes.len()
            && names.iter().zip(&self.ctes).all(|(kept, scope)| {
                kept.len() == scope.len()
                    && kept
                        .iter()
                        .all(|(n, cols)| scope.get(n).is_some_and(|m| &m.0 == cols))
            })
    }

    /// Whether the one table of `j` can be read in the order `order` asks (its terms
    /// `order_exprs`, bound), so that nothing is sorted and the select stops at its LIMIT;
    /// if so, sets the reading up. The rowid (ascending or descending) is read in rowid
    /// order. With a LIMIT (`limited`), a plain index whose columns the terms follow, all
    /// in its direction or all against it, with the columns' collations and the default
    /// NULLs order: the whole index is read in its order (when no other path was chosen),
    /// or the rows its equality on its first column finds, or its range on that column.
    /// (Without a LIMIT, a scan and a sort cost less than a lookup per row.)
    fn order_path(
        &self,
        j: &mut JoinPlan,
        frame: &Frame,
        order_exprs: &[Expr],
        order: &[OrderTerm],
        limited: bool,
    ) -> bool {
        let (Some(t), Some(source)) = (j.items[0].table.clone(), frame.sources.first()) else {
            return false;
        };
        if j.items.len() != 1 {
            return false;
        }
        // The column of the table each term is, if each is one (the rowid: `ncols`).
        let ncols = t.columns.len();
        let columns: Option<Vec<usize>> = order_exprs
            .iter()
            .map(|e| match e {
                Expr::Slot(s) if source.rowid == Some(*s) => Some(ncols),
                Expr::Slot(s) if (source.start..source.start + ncols).contains(s) => {
                    let c = s - source.start;
                    Some(if t.rowid_alias == Some(c) { ncols } else { c })
                }
                _ => None,
            })
            .collect();
        let Some(columns) = columns else {
            return false;
        };
        if let ([c], [term]) = (&columns[..], order) {
            if *c == ncols && streams(j, 0) {
                j.reverse = term.desc;
                return true;
            }
        }
        // All terms in one direction, NULLs where that direction puts them by default.
        let desc = order[0].desc;
        let plain = |o: &OrderTerm| o.desc == desc && o.nulls_first.is_none_or(|f| f != o.desc);
        if !limited || !order.iter().all(plain) {
            return false;
        }
        // A last term of the rowid breaks ties as an index's entries do (its key ends with it).
        let (columns, by_rowid) = match columns.split_last() {
            Some((&last, rest)) if last == ncols => (rest, true),
            _ => (&columns[..], false),
        };
        if columns.contains(&ncols) {
            return false;
        }
        // Whether index `idx`'s columns from `skip` on are the terms', each in the
        // direction its entries are read (`Some(true)`: from the last entry back).
        let follows = |idx: &Index, skip: usize| -> Option<bool> {
            if idx.where_.is_some() || !idx.exprs.is_empty() {
                return None;
            }
            let parts = idx.columns.get(skip..skip + columns.len())?;
            // (The rowid ending a key is ascending.)
            let against = parts.first().map_or(desc, |&(_, d, _)| d != desc);
            let each = parts.iter().zip(columns).all(|(&(c, d, coll), &oc)| {
                c == oc && (d != desc) == against && coll == t.columns[c].collation
            });
            let rowid_next = skip + columns.len() == idx.columns.len() && against == desc;
            (each && (!by_rowid || rowid_next)).then_some(against)
        };
        let path = match &j.items[0].access {
            Access::Scan if !columns.is_empty() => self.schema.indexes_of(&t.name).find_map(|i| {
                let against = follows(i, 0)?;
                Some((Access::IndexOrder(i.clone(), against, None, None), false))
            }),
            Access::Index(i, ..) => {
                follows(i, 1).map(|against| (j.items[0].access.clone(), against))
            }
            // Its entries streamed in order (a range may hold most of the index).
            Access::IndexRange(i, lo, hi) if !columns.is_empty() => follows(i, 0).map(|against| {
                let access = Access::IndexOrder(i.clone(), against, lo.clone(), hi.clone());
                (access, false)
            }),
            _ => None,
        };
        let Some((access, reverse)) = path else {
            return false;
        };
        j.items[0].access = access;
        j.reverse = reverse;
        true
    }

    /// The min/max plan for result `e` over `source`, when `e` is `min(c)` or `max(c)` of a
    /// table's column with an ascending index of the column's collation first on it (or
    /// the rowid).
    fn min_max(&self, e: &Expr, source: &TableRef, frame: &Frame) -> Option<MinMax> {
        let Expr::Function {
            name,
            args,
            distinct: false,
            star: false,
            user: None,
        } = e
        else {
            return None;
        };
        let end = match name.as_str() {
            "min" => End::Min,
            "max" => End::Max,
            _ => return None,
        };
        let (TableRef::Table { name: t, .. }, [arg]) = (source, &args[..]) else {
            return None;
        };
        let table = self.plain_table(t)?;
        let slot = match arg {
            Expr::Slot(slot) => *slot,
            Expr::Column { table, name } => frame.resolve(table.as_deref(), name).ok()??.0,
            _ => return None,
        };
        let column =
            (slot < table.columns.len() && table.rowid_alias != Some(slot)).then_some(slot);
        let index = match column {
            None => None,
            Some(c) => Some(
                self.schema
                    .full_indexes_of(&table.name)
                    .find(|i| {
                        i.columns.first().is_some_and(|&(ic, desc, coll)| {
                            ic == c && !desc && coll == table.columns[c].collation
                        })
                    })?
                    .clone(),
            ),
        };
        Some(MinMax {
            table: table.clone(),
            index,
            column,
            end,
        })
    }

    /// `count(*)` of `source` alone, when it is a table: its count.
    fn count_rows(&self, e: &Expr, source: &TableRef) -> Option<MinMax> {
        let (
            Expr::Function {
                name,
                args,
                distinct: false,
                star: true,
                user: None,
            },
            TableRef::Table { name: t, .. },
        ) = (e, source)
        else {
            return None;
        };
        (name == "count" && args.is_empty()).then_some(())?;
        Some(MinMax {
            table: self.plain_table(t)?.clone(),
            index: None,
            column: None,
            end: End::Count,
        })
    }

    /// The table `name` names, unless a CTE of the statement does.
    fn plain_table(&self, name: &str) -> Option<&Arc<Table>> {
        self.schema
            .tables
            .get(&lc(name))
            .filter(|_| self.cte_columns(name).is_none())
    }

    /// The answer of a min/max plan: the value at one end of the rowid or index order
    /// (the first one past the NULLs, for min).
    fn read_min_max(&mut self, mm: &MinMax) -> Result<Value> {
        let t = &mm.table;
        if mm.end == End::Count {
            let db = self.db(&t.db)?;
            return Ok(Value::Integer(self.txn.len(&db)? as i64));
        }
        let rowid = match &mm.index {
            None => {
                let db = self.db(&t.db)?;
                let end = if mm.end == End::Max {
                    self.txn.last(&db, ..)?
                } else {
                    self.txn.first(&db, ..)?
                };
                return match end {
                    Some((k, _)) => Ok(Value::Integer(rowid_of_key(&k)?)),
                    None => Ok(Value::Null),
                };
            }
            Some(idx) => {
                let idb = self.db(&idx.db)?;
                // NULL keys (0x05) sort first; any other value's key is above 0x05.
                let end = if mm.end == End::Max {
                    self.txn.last(&idb, ..)?
                } else {
                    self.txn.first(&idb, vec![0x06]..)?
                };
                match end {
                    Some((k, v)) => index_rowid(&k, &v)?,
                    None => return Ok(Value::Null),
                }
            }
        };
        let row = self.read_row(t, rowid)?;
        Ok(match (row, mm.column) {
            (Some(mut row), Some(c)) => std::mem::take(&mut row[c]),
            _ => Value::Null,
        })
    }

    /// The plan of a FROM clause and WHERE condition alone (UPDATE and DELETE).
    pub(crate) fn plan_from(&self, from: &From, filter: Option<&Expr>) -> Result<CorePlan> {
        let frame = self.frame_of(Some(from))?;
        let mut join = self.plan_join(from, &frame, filter)?;
        join.bind(self, &frame);
        join.decode_lazily(std::iter::empty(), true, &[]);
        Ok(CorePlan {
            frame,
            exprs: Vec::new(),
            meta: Meta::new(Vec::new()),
            order_exprs: Vec::new(),
            group_terms: Vec::new(),
            having: None,
            bare: false,
            min_max: None,
            aggregate: false,
            windows: false,
            join: Some(join),
            in_order: false,
            sort_skips: false,
            where_: None,
        })
    }

    /// `e` (a WHERE, GROUP BY or HAVING term) with each name that no source has (here or
    /// in an enclosing query) but a result column's alias is replaced by that column's
    /// expression, as SQLite allows (`SELECT 1 AS a WHERE a = 1`, `SELECT a % 2 AS p ...
    /// GROUP BY p`, `SELECT count(*) AS n ... HAVING n > 1`); `None` when it names none. An
    /// alias of an aggregate is SQLite's error outside HAVING, of a window everywhere.
    fn with_aliases(
        &self,
        e: &Expr,
        clause: Clause,
        frame: &Frame,
        outer: Option<&Scope>,
        exprs: &[(Expr, String)],
    ) -> Result<Option<Expr>> {
        // A name some source has, or several (the planner reports the ambiguity).
        let known = |name: &str| {
            let mut frames = std::iter::once(frame)
                .chain(std::iter::successors(outer, |s| s.outer).map(|s| s.frame));
            frames.any(|f| f.resolve(None, name).map_or(true, |r| r.is_some()))
        };
        let mut changed = false;
        let mut misuse = None;
        let mut out = e.clone();
        out.replace_each(&mut |e| {
            let Expr::Column { table: None, name } = e else {
                return None;
            };
            if known(name) {
                return None;
            }
            let alias = exprs.iter().find(|(x, n)| {
                n.eq_ignore_ascii_case(name)
                    && !matches!(x, Expr::Column { table: None, name: c } if c.eq_ignore_ascii_case(name))
            });
            let (x, _) = alias?;
            let mut calls = Vec::new();
            collect_aggregates(x, &mut calls);
            match (calls.first(), clause) {
                (Some(Expr::Function { name, .. }), Clause::Where) => {
                    misuse.get_or_insert_with(|| format!("misuse of aggregate: {name}()"));
                }
                (Some(_), Clause::GroupBy) => {
                    misuse.get_or_insert_with(|| {
                        "aggregate functions are not allowed in the GROUP BY clause".to_string()
                    });
                }
                _ if matches!(x, Expr::Window(_)) => {
                    misuse.get_or_insert_with(|| format!("misuse of aliased window function {name}"));
                }
                _ => {}
            }
            changed = true;
            Some(x.clone())
        });
        match misuse {
            Some(m) => Err(Error::Sql(m)),
            None => Ok(changed.then_some(out)),
        }
    }

    /// The plan of a select core: its sources, result columns, ORDER BY terms and joins.
    #[allow(clippy::too_many_arguments)]
    fn plan_core(
        &self,
        columns: &[ResultColumn],
        from: Option<&From>,
        where_: Option<&Expr>,
        group_by: &[Expr],
        having: &Option<Expr>,
        outer: Option<&Scope>,
        order: &[OrderTerm],
        limited: bool,
    ) -> Result<CorePlan> {
        let frame = self.frame_of(from)?;
        // Expand the result columns.
        let mut exprs: Vec<(Expr, String)> = Vec::new();
        for rc in columns {
            match rc {
                ResultColumn::Star | ResultColumn::TableStar(_) => {
                    if frame.sources.is_empty() {
                        return Err(Error::Sql("no tables specified".into()));
                    }
                    let mut any = false;
                    for s in &frame.sources {
                        if let ResultColumn::TableStar(t) = rc {
                            if !s.name.eq_ignore_ascii_case(t) {
                                continue;
                            }
                        }
                        any = true;
                        let star = matches!(rc, ResultColumn::Star);
                        for c in &s.columns {
                            let e = match c.merged {
                                _ if c.hidden && star => continue,
                                // SQLite's `left.*` has the merged value too.
                                Some(slot) => Expr::Slot(slot),
                                _ => Expr::Column {
                                    table: Some(s.name.clone()),
                                    name: c.name.clone(),
                                },
                            };
                            exprs.push((e, c.name.clone()));
                        }
                    }
                    if !any {
                        if let ResultColumn::TableStar(t) = rc {
                            return Err(Error::Sql(format!("no such table: {t}")));
                        }
                    }
                }
                ResultColumn::Expr(e, alias) => {
                    exprs.push((e.clone(), alias.clone().unwrap_or_else(|| expr_name(e))))
                }
            }
        }
        let empty_row = vec![Value::Null; frame.width];
        let meta: Vec<SrcCol> = {
            let sc = Scope::new(&frame, &empty_row, outer);
            exprs
                .iter()
                .map(|(e, n)| SrcCol {
                    name: n.clone(),
                    affinity: self.affinity(e, &sc),
                    coll: self.collation(e, &sc),
                    decl_type: self.src_col(e, &sc).and_then(|c| c.decl_type.clone()),
                    hidden: false,
                    merged: None,
                })
                .collect()
        };
        let aliased = match where_ {
            Some(w) => self.with_aliases(w, Clause::Where, &frame, outer, &exprs)?,
            None => None,
        };
        let where_ = aliased.as_ref().or(where_);
        let having = match having.as_ref() {
            Some(h) => Some(
                self.with_aliases(h, Clause::Having, &frame, outer, &exprs)?
                    .unwrap_or_else(|| h.clone()),
            ),
            None => None,
        };
        let aggregate = !group_by.is_empty()
            || exprs.iter().any(|(e, _)| has_aggregate(e))
            || having.as_ref().is_some_and(has_aggregate)
            || order.iter().any(|o| has_aggregate(&o.expr));
        if where_.is_some_and(has_aggregate) {
            return Err(Error::Sql("misuse of aggregate function".into()));
        }
        let order_exprs: Vec<Expr> = order
            .iter()
            .map(|o| resolve_order_term(&o.expr, &exprs))
            .collect::<Result<_>>()?;
        let mut windows: Vec<&Expr> = Vec::new();
        for e in exprs.iter().map(|(e, _)| e).chain(order_exprs.iter()) {
            collect_matching(e, &|x| matches!(x, Expr::Window(_)), &mut windows);
        }
        let windows = !windows.is_empty();
        let mut join = match from {
            Some(f) => Some(self.plan_join(f, &frame, where_)?),
            None => None,
        };
        let mut group_terms: Vec<Expr> = group_by
            .iter()
            .map(|g| match resolve_group_term(g, &exprs)? {
                Some(term) => Ok(term),
                None => Ok(self
                    .with_aliases(g, Clause::GroupBy, &frame, outer, &exprs)?
                    .unwrap_or_else(|| g.clone())),
            })
            .collect::<Result<_>>()?;
        let mut having = having;
        // Every name must name something here, in an enclosing query, or be a double-quoted
        // string: an error of the plan, as of SQLite's prepare, not only once a row is read.
        let mut on = Vec::new();
        if let Some(f) = from {
            on_conditions(f, &mut on);
        }
        for e in exprs
            .iter()
            .map(|(e, _)| e)
            .chain(where_)
            .chain(on)
            .chain(&order_exprs)
            .chain(&group_terms)
            .chain(&having)
        {
            self.check_names(e, &frame, outer)?;
        }
        // Names resolved once: the plan's expressions read their columns by slot.
        let mut exprs = exprs;
        let mut order_exprs = order_exprs;
        let all = exprs.iter_mut().map(|(e, _)| e);
        for e in all
            .chain(&mut order_exprs)
            .chain(&mut group_terms)
            .chain(&mut having)
        {
            self.bind(e, &frame);
        }
        let in_order = match &mut join {
            Some(j) if !aggregate && !windows && !order.is_empty() => {
                self.order_path(j, &frame, &order_exprs, order, limited)
            }
            _ => false,
        };
        let sort_skips = limited
            && !aggregate
            && !windows
            && !in_order
            && exprs
                .iter()
                .map(|(e, _)| e)
                .chain(&order_exprs)
                .all(is_self_contained);
        if let Some(j) = &mut join {
            j.bind(self, &frame);
            let all = exprs.iter().map(|(e, _)| e);
            let rest = all.chain(&order_exprs).chain(&group_terms).chain(&having);
            let gated = sort_skips && j.items.len() == 1;
            j.decode_lazily(rest, false, if gated { &order_exprs } else { &[] });
        }
        let bare = {
            let all = exprs.iter().map(|(e, _)| e);
            all.chain(&order_exprs)
                .chain(&having)
                .any(reads_bare_columns)
        };
        let alone = where_.is_none() && group_by.is_empty() && having.is_none();
        let min_max = match (&exprs[..], from, alone) {
            ([(e, _)], Some(f), true) if f.joins.is_empty() => self
                .min_max(e, &f.first, &frame)
                .or_else(|| self.count_rows(e, &f.first)),
            _ => None,
        };
        Ok(CorePlan {
            in_order,
            sort_skips,
            where_: aliased,
            frame,
            exprs,
            meta: Meta::new(meta),
            order_exprs,
            group_terms,
            having,
            bare,
            min_max,
            aggregate,
            windows,
            join,
        })
    }

    /// A result row of `plan` in scope `sc`: its result columns and its ORDER BY key.
    fn project(&mut self, plan: &CorePlan, sc: &Scope) -> Result<(Row, Row)> {
        let vals = self.eval_all(plan.exprs.iter().map(|(e, _)| e), sc)?;
        // Rows read in the order asked for are not sorted: they need no sort key.
        let key = match plan.in_order {
            true => Vec::new(),
            false => self.eval_all(plan.order_exprs.iter(), sc)?,
        };
        Ok((vals, key))
    }

    /// The rows of a plain `VALUES` list (no WITH, compound, ORDER BY or LIMIT), with
    /// their width, as `select` would give them but without building a result: what an
    /// `INSERT ... VALUES` reads. `None` for any other select.
    pub(crate) fn plain_values(
        &mut self,
        sel: &Select,
        outer: Option<&Scope>,
    ) -> Option<Result<(usize, Vec<Row>)>> {
        let Core::Values(rows) = &sel.first else {
            return None;
        };
        let plain = sel.with.is_empty()
            && sel.compounds.is_empty()
            && sel.order_by.is_empty()
            && sel.limit.is_none()
            && sel.offset.is_none();
        if !plain {
            return None;
        }
        let n = rows.first().map_or(0, Vec::len);
        Some(self.values_rows(rows, outer).map(|out| (n, out)))
    }

    /// The rows of a `VALUES` list, evaluated.
    fn values_rows(&mut self, rows: &[Vec<Expr>], outer: Option<&Scope>) -> Result<Vec<Row>> {
        let sc = Scope::new(&EMPTY_FRAME, &[], outer);
        let n = rows.first().map_or(0, Vec::len);
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            if r.len() != n {
                return Err(Error::Sql(
                    "all VALUES must have the same number of terms".into(),
                ));
            }
            out.push(self.eval_all(r.iter(), &sc)?);
        }
        Ok(out)
    }

    /// The values of `exprs` in scope `sc`, in a row of their number (a collect from
    /// fallible evaluations would grow it step by step).
    fn eval_all<'e>(
        &mut self,
        exprs: impl ExactSizeIterator<Item = &'e Expr>,
        sc: &Scope,
    ) -> Result<Row> {
        let mut out = Vec::with_capacity(exprs.len());
        for e in exprs {
            out.push(self.eval(e, sc)?);
        }
        Ok(out)
    }

    /// Runs one core; rows are sorted by `order` (the select's ORDER BY, for a simple
    /// select). `wanted`: how many of its first rows the select keeps (its OFFSET and
    /// LIMIT), when the core is the whole select: a core read in the order asked for stops
    /// there.
    fn core(
        &mut self,
        core: &Core,
        outer: Option<&Scope>,
        order: &[OrderTerm],
        wanted: Option<usize>,
    ) -> Result<(Arc<Meta>, Keyed)> {
        let (distinct, columns, from, where_, group_by, having, plan_id) = match core {
            Core::Values(rows) => {
                let n = rows.first().map_or(0, Vec::len);
                let out = self.values_rows(rows, outer)?;
                let out = out.into_iter().map(|r| (r, Vec::new())).collect();
                let meta = (0..n)
                    .map(|i| SrcCol {
                        name: format!("column{}", i + 1),
                        affinity: None,
                        coll: Collation::Binary,
                        decl_type: None,
                        hidden: false,
                        merged: None,
                    })
                    .collect::<Vec<_>>();
                return Ok((Meta::new(meta), out));
            }
            Core::Select {
                distinct,
                columns,
                from,
                where_,
                group_by,
                having,
                plan,
            } => (*distinct, columns, from, where_, group_by, having, *plan),
        };
        // (Whether a LIMIT bounds the rows is the same at every run of the statement.)
        let limited = wanted.is_some_and(|w| w != usize::MAX);
        let plan = self.cached_plan(plan_id, |me| {
            me.plan_core(
                columns,
                from.as_ref(),
                where_.as_ref(),
                group_by,
                having,
                outer,
                order,
                limited,
            )
        })?;
        let (frame, exprs, order_exprs) = (&plan.frame, &plan.exprs, &plan.order_exprs);
        let join = plan.join.as_ref();
        let meta = plan.meta.clone();
        if let Some(mm) = &plan.min_max {
            if let Some(lines) = &mut self.plan {
                lines.push(match (&mm.index, mm.end) {
                    (_, End::Count) => format!("SCAN {}", mm.table.name),
                    (Some(i), _) => format!("SEARCH {} USING INDEX {}", mm.table.name, i.name),
                    (None, _) => format!("SEARCH {} USING INTEGER PRIMARY KEY", mm.table.name),
                });
                return Ok((meta, Vec::new()));
            }
            return Ok((meta, vec![(vec![self.read_min_max(mm)?], Vec::new())]));
        }
        let aggregate = plan.aggregate;
        let empty_row = vec![Value::Null; frame.width];
        // How the rows are sorted, unless they come in the order asked.
        let specs = (!order.is_empty() && !plan.in_order)
            .then(|| self.order_specs(order, order_exprs, frame, outer));
        // The core's joined rows that pass its WHERE, handed to `emit`.
        let filter = plan.where_.as_ref().or(where_.as_ref());
        let read =
            |me: &mut Self, emit: &mut dyn FnMut(&mut Self, &mut [Value]) -> Result<bool>| {
                me.source_rows(from.as_ref(), join, frame, filter, outer, emit)
            };
        // Rows from the joins, each with its sort key (as many as a LIMIT on rows read in
        // order will keep, room made at once).
        let first_rows = wanted.filter(|_| plan.in_order).map_or(0, |w| w.min(256));
        let mut out: Keyed = Vec::with_capacity(first_rows);
        if plan.windows && !aggregate {
            let mut windows: Vec<&Expr> = Vec::new();
            for e in exprs.iter().map(|(e, _)| e).chain(order_exprs.iter()) {
                collect_matching(e, &|x| matches!(x, Expr::Window(_)), &mut windows);
            }
            let mut rows: Vec<Row> = Vec::new();
            read(self, &mut |_, r| {
                rows.push(r.to_vec());
                Ok(true)
            })?;
            let values = self.window_values(&windows, frame, (&rows, None), outer)?;
            for (r, vals) in rows.iter().zip(&values) {
                let mut sc = Scope::new(frame, r, outer);
                sc.agg = Some(vals);
                out.push(self.project(&plan, &sc)?);
            }
        } else if !aggregate {
            // DISTINCT drops repeated result rows as they come, rather than keeping them.
            let mut seen = distinct.then(|| Distinct::with(plan.meta.collations()));
            // Rows read in the order asked for: the select needs no more than it keeps.
            let enough = wanted.filter(|_| plan.in_order).unwrap_or(usize::MAX);
            // Rows to be sorted for a LIMIT: only the first `wanted` in the order are kept,
            // the buffer cut back to them (a stable sort: ties keep the order they came in)
            // whenever it holds twice as many, so memory and sorting stay bounded.
            let top = match (&specs, wanted) {
                (Some(specs), Some(w)) if w <= MAX_TOP => Some((w, specs)),
                _ => None,
            };
            // Once the buffer has been cut back, the key of its last row: a row whose key
            // does not sort before it cannot be among the first `wanted` (it comes later,
            // so it sorts after that row even when equal), and its result columns are not
            // evaluated (see `CorePlan::sort_skips`).
            let mut worst: Option<Row> = None;
            let may_skip = plan.sort_skips;
            let gate_of = join.map_or(0, |j| j as *const JoinPlan as usize);
            // (Only a table read alone decodes the sort keys' columns before the rest: see
            // `decode_lazily` in `plan_core`.)
            let alone = join.filter(|j| j.items.len() == 1 && may_skip);
            let gate = match (&top, alone.and_then(|j| j.lazy.as_ref())) {
                (Some((_, specs)), Some(lazy)) if !lazy.rest.is_empty() => Some(TopGate {
                    plan: gate_of,
                    keys: order_exprs.clone(),
                    specs: specs.to_vec(),
                    worst: None,
                }),
                _ => None,
            };
            let outer_gate = std::mem::replace(&mut self.top_gate, gate);
            let mut produce = |me: &mut Self, r: &mut [Value]| -> Result<bool> {
                let sc = Scope::new(frame, r, outer);
                let (row, key) = match (&top, &worst) {
                    (Some((_, specs)), Some(worst)) if may_skip => {
                        let key = me.eval_all(plan.order_exprs.iter(), &sc)?;
                        if compare_keys(&key, worst, specs) != Ordering::Less {
                            return Ok(true);
                        }
                        (me.eval_all(plan.exprs.iter().map(|(e, _)| e), &sc)?, key)
                    }
                    _ => me.project(&plan, &sc)?,
                };
                if seen.as_mut().is_none_or(|s| s.novel(&row)) {
                    out.push((row, key));
                }
                if let Some((w, specs)) = &top {
                    if out.len() >= (2 * w).max(w + 64) {
                        sort_rows(&mut out, specs);
                        out.truncate(*w);
                        // (With LIMIT 0 nothing is kept, and there is no bar.)
                        worst = w
                            .checked_sub(1)
                            .and_then(|i| out.get(i))
                            .map(|(_, key)| key.clone());
                        if let Some(g) = me.top_gate.as_mut().filter(|g| g.plan == gate_of) {
                            g.worst.clone_from(&worst);
                        }
                    }
                }
                Ok(out.len() < enough)
            };
            let read_all = read(self, &mut produce);
            self.top_gate = outer_gate;
            read_all?;
        } else {
            // Aggregates: the calls in the result, ORDER BY and HAVING (SQLite's order, which
            // says which min() or max() picks the row of the bare columns, below).
            let mut calls: Vec<&Expr> = Vec::new();
            for (e, _) in exprs {
                collect_aggregates(e, &mut calls);
            }
            for e in order_exprs {
                collect_aggregates(e, &mut calls);
            }
            if let Some(h) = &plan.having {
                collect_aggregates(h, &mut calls);
            }
            struct Group {
                accs: Vec<Acc>,
                distinct_seen: Vec<FxHashSet<Vec<u8>>>,
                row: Row,
            }
            let mut groups: Vec<(Row, Group)> = Vec::new();
            let mut index: FxHashMap<Vec<u8>, usize> = FxHashMap::default();
            let colls: Vec<Collation> = {
                let sc = Scope::new(frame, &empty_row, outer);
                calls
                    .iter()
                    .map(|c| match c {
                        Expr::Function { args, .. } => args
                            .first()
                            .map_or(Collation::Binary, |a| self.collation(a, &sc)),
                        _ => Collation::Binary,
                    })
                    .collect()
            };
            let (group_terms, bare) = (&plan.group_terms, plan.bare);
            let key_colls: Vec<Collation> = {
                let sc = Scope::new(frame, &empty_row, outer);
                group_terms.iter().map(|g| self.collation(g, &sc)).collect()
            };
            // Buffers reused from row to row: the group key, its signature, arguments.
            let (mut key, mut sig, mut vals) = (Vec::new(), Vec::new(), Vec::new());
            // Argument counts are checked once, before any row (as SQLite does at prepare).
            for c in &calls {
                let Expr::Function {
                    args,
                    distinct,
                    star,
                    name,
                    ..
                } = c
                else {
                    unreachable!()
                };
                if (name == "count" && args.len() > 1) || (*star && name != "count") {
                    return Err(Error::Sql(format!(
                        "wrong number of arguments to function {name}()"
                    )));
                }
                if *distinct && args.len() != 1 {
                    return Err(Error::Sql(
                        "DISTINCT aggregates must have exactly one argument".into(),
                    ));
                }
            }
            // Per call, read once here rather than per row: its arguments, the slot of a
            // lone column argument, DISTINCT.
            let call_args: Vec<(&[Expr], Option<usize>, bool)> = calls
                .iter()
                .map(|c| match c {
                    Expr::Function { args, distinct, .. } => {
                        let slot = match &args[..] {
                            [Expr::Slot(i)] => Some(*i),
                            _ => None,
                        };
                        (&args[..], slot, *distinct)
                    }
                    _ => unreachable!(),
                })
                .collect();
            // Which row of a group the bare columns read, as SQLite picks it: with no min()
            // or max() call, the group's first row; with them, the row at which the last of
            // them (SQLite keeps one call of each text) took a new value, or the row before
            // when it did not. `extremes` lists those calls; `skips` is SQLite's register
            // of whether the last one run skipped the row, kept from row to row as it is.
            let extremes: Vec<usize> = match bare {
                true => {
                    let mut texts: Vec<String> = Vec::new();
                    let mut firsts = Vec::new();
                    for (ci, c) in calls.iter().enumerate() {
                        if !is_extreme_call(c) {
                            continue;
                        }
                        let text = format!("{c:?}");
                        if !texts.contains(&text) {
                            texts.push(text);
                            firsts.push(ci);
                        }
                    }
                    firsts
                }
                false => Vec::new(),
            };
            let mut skipped: Vec<Option<bool>> = vec![None; calls.len()];
            let mut skips = false;
            let mut step = |me: &mut Self, r: &mut [Value]| -> Result<bool> {
                let sc = Scope::new(frame, r, outer);
                // Without GROUP BY there is one group: no key to build or hash.
                let found = if group_terms.is_empty() && !groups.is_empty() {
                    Some(0)
                } else {
                    key.clear();
                    for g in group_terms {
                        key.push(me.eval(g, &sc)?);
                    }
                    sig.clear();
                    group_signature_with(&key, &key_colls, &mut sig);
                    index.get(&sig).copied()
                };
                let gi = match found {
                    Some(i) => i,
                    None => {
                        let key = std::mem::take(&mut key);
                        groups.push((
                            key,
                            Group {
                                accs: calls
                                    .iter()
                                    .map(|c| match c {
                                        Expr::Function {
                                            name, args, user, ..
                                        } => Acc::new(name, args, user.as_ref()),
                                        _ => unreachable!(),
                                    })
                                    .collect(),
                                distinct_seen: vec![FxHashSet::default(); calls.len()],
                                row: Vec::new(),
                            },
                        ));
                        index.insert(sig.clone(), groups.len() - 1);
                        groups.len() - 1
                    }
                };
                for (ci, &(args, slot, distinct)) in call_args.iter().enumerate() {
                    // A column argument is lent from the row, not copied.
                    let vals: &[Value] = match slot {
                        Some(i) if i < r.len() => std::slice::from_ref(&r[i]),
                        _ if args.is_empty() => &[],
                        _ => {
                            vals.clear();
                            for a in args {
                                vals.push(me.eval(a, &sc)?);
                            }
                            &vals
                        }
                    };
                    let g = &mut groups[gi].1;
                    if distinct {
                        if vals.first().is_some_and(Value::is_null) {
                            continue;
                        }
                        let mut seen = Vec::new();
                        group_signature_with(vals, &colls[ci..=ci], &mut seen);
                        if !g.distinct_seen[ci].insert(seen) {
                            continue;
                        }
                    }
                    if !extremes.is_empty() {
                        skipped[ci] = Some(g.accs[ci].keeps_extreme(vals, colls[ci]));
                    }
                    g.accs[ci].step(vals, colls[ci])?;
                }
                if bare {
                    let load = match extremes.is_empty() {
                        true => found.is_none(),
                        false => {
                            for &ci in &extremes {
                                if let Some(s) = skipped[ci].take() {
                                    skips = s;
                                }
                            }
                            !skips
                        }
                    };
                    if load {
                        let row = &mut groups[gi].1.row;
                        row.clear();
                        row.extend_from_slice(r);
                    }
                }
                Ok(true)
            };
            read(self, &mut step)?;
            // SQLite hands groups out in the order of their keys (it sorts, or reads an
            // index, to group them), and programs count on it: so do we, unless an ORDER
            // BY orders them anyway.
            if !group_terms.is_empty() && plan.order_exprs.is_empty() && groups.len() > 1 {
                groups.sort_by(|(a, _), (b, _)| {
                    a.iter()
                        .zip(b)
                        .zip(&key_colls)
                        .map(|((x, y), &c)| order_values(x, y, c, false, None))
                        .find(|o| o.is_ne())
                        .unwrap_or(Ordering::Equal)
                });
            }
            if groups.is_empty() && group_by.is_empty() && self.plan.is_none() {
                groups.push((
                    Vec::new(),
                    Group {
                        accs: calls
                            .iter()
                            .map(|c| match c {
                                Expr::Function {
                                    name, args, user, ..
                                } => Acc::new(name, args, user.as_ref()),
                                _ => unreachable!(),
                            })
                            .collect(),
                        distinct_seen: Vec::new(),
                        row: empty_row.clone(),
                    },
                ));
            }
            // Each group that HAVING keeps: its last row and its aggregates' values.
            let (mut kept, mut values_of) = (Vec::new(), Vec::new());
            for (_, g) in &mut groups {
                let mut values = AggValues::default();
                for (ci, c) in calls.iter().enumerate() {
                    values.insert(key_of(c), g.accs[ci].finish()?);
                }
                let mut sc = Scope::new(frame, &g.row, outer);
                sc.agg = Some(&values);
                if let Some(h) = &plan.having {
                    if self.eval(h, &sc)?.truth() != Some(true) {
                        continue;
                    }
                }
                kept.push(std::mem::take(&mut g.row));
                values_of.push(values);
            }
            if plan.windows {
                // Window calls run over the groups, after the aggregates.
                let mut windows: Vec<&Expr> = Vec::new();
                for e in exprs.iter().map(|(e, _)| e).chain(order_exprs.iter()) {
                    collect_matching(e, &|x| matches!(x, Expr::Window(_)), &mut windows);
                }
                let over = self.window_values(&windows, frame, (&kept, Some(&values_of)), outer)?;
                for (values, w) in values_of.iter_mut().zip(over) {
                    w.0.into_iter().for_each(|(call, v)| values.insert(call, v));
                }
            }
            for (row, values) in kept.iter().zip(&values_of) {
                let mut sc = Scope::new(frame, row, outer);
                sc.agg = Some(values);
                out.push(self.project(&plan, &sc)?);
            }
        }
        if distinct && (aggregate || plan.windows) {
            let mut seen = Distinct::with(plan.meta.collations());
            out.retain(|(r, _)| seen.novel(r));
        }
        if let Some(specs) = &specs {
            if let Some(lines) = &mut self.plan {
                lines.push("USE TEMP B-TREE FOR ORDER BY".into());
            }
            sort_rows(&mut out, specs);
        }
        Ok((meta, out))
    }

    /// How each ORDER BY term sorts: descending, NULLs first, collation.
    fn order_specs(
        &self,
        order: &[OrderTerm],
        order_exprs: &[Expr],
        frame: &Frame,
        outer: Option<&Scope>,
    ) -> Vec<OrderSpec> {
        let empty_row = vec![Value::Null; frame.width];
        let sc = Scope::new(frame, &empty_row, outer);
        order
            .iter()
            .zip(order_exprs)
            .map(|(o, e)| (o.desc, o.nulls_first, self.collation(e, &sc)))
            .collect()
    }
}

/// How an ORDER BY term sorts: descending, NULLs first, collation.
type OrderSpec = (bool, Option<bool>, Collation);

/// The most rows a LIMIT (with its OFFSET) may ask for and still have the rows to sort
/// kept to twice that as they come (see `Exec::core`); past it, all are kept.
const MAX_TOP: usize = 1 << 16;

/// Sorts projected rows by their ORDER BY keys, stably.
fn sort_rows(rows: &mut [(Row, Row)], specs: &[OrderSpec]) {
    rows.sort_by(|a, b| compare_keys(&a.1, &b.1, specs));
}

/// The value a leaf (a slot, literal or parameter) holds, where it is.
fn leaf_ref<'v>(e: &'v Expr, sc: &'v Scope, params: &'v [Value]) -> Option<&'v Value> {
    match e {
        Expr::Slot(i) => sc.row.get(*i),
        Expr::Literal(v) => Some(v),
        Expr::Param(i) => params.get(i - 1),
        _ => None,
    }
}

/// The order of two rows' ORDER BY keys.
fn compare_keys(a: &[Value], b: &[Value], specs: &[OrderSpec]) -> Ordering {
    for (i, &(desc, nf, coll)) in specs.iter().enumerate() {
        let o = order_values(&a[i], &b[i], coll, desc, nf);
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// The rowid an index entry points at: a unique index keeps it as the value, others end
/// the key with it.
fn index_rowid(key: &[u8], value: &[u8]) -> Result<i64> {
    match value {
        [] => rowid_of_key(&key[key.len().saturating_sub(8)..]),
        v => rowid_of_key(v),
    }
}

/// The rows a scan of a table's engine database yields, each with its rowid last.
fn rows_with_rowids(t: &Table, scan: beechdb::TxnIter) -> Result<Vec<Row>> {
    let mut out = Vec::new();
    for kv in scan {
        let (k, v) = kv?;
        let rowid = rowid_of_key(&k)?;
        let mut row = t.row_from(rowid, &v)?;
        row.push(Value::Integer(rowid));
        out.push(row);
    }
    Ok(out)
}

/// Whether `e` names a column of `frame` (rather than only outer queries' and constants).
fn refers_to_frame(e: &Expr, frame: &Frame) -> bool {
    let mut found = false;
    e.walk(&mut |x| {
        if let Expr::Column { table, name } = x {
            found |= matches!(frame.resolve(table.as_deref(), name), Ok(Some(_)));
        }
        found |= matches!(x, Expr::Slot(_));
    });
    found
}

/// A window aggregate's state that rows enter and leave as the frames move (see
/// `Exec::window_values`): a registered aggregate's with an inverse, or a built-in one
/// (with the collation its argument compares in).
enum Sliding {
    User(Box<dyn crate::functions::AggregateState>),
    Builtin(Acc, Collation),
}

impl Sliding {
    fn step(&mut self, args: &[Value]) -> Result<()> {
        match self {
            Sliding::User(s) => s.step(args),
            Sliding::Builtin(acc, coll) => acc.step(args, *coll),
        }
    }

    fn inverse(&mut self, args: &[Value]) -> Result<()> {
        match self {
            Sliding::User(s) => s.inverse(args),
            Sliding::Builtin(acc, _) => acc.inverse(args),
        }
    }

    /// The current frame's result, the state going on.
    fn value(&mut self) -> Result<Value> {
        match self {
            Sliding::User(s) => s.value(),
            Sliding::Builtin(acc, _) => acc.finish(),
        }
    }

    /// Ends the state: as in SQLite, a registered aggregate's final call only ends it,
    /// its result and its errors going nowhere.
    fn end(&mut self) {
        if let Sliding::User(s) = self {
            let _ = s.finish();
        }
    }
}

/// Which of equal rows a compound select keeps: the last, or the first at or after
/// position `right` if there is one there, else the first.
#[derive(Clone, Copy)]
enum Keep {
    First { right: usize },
    Last,
}

/// Distinct rows, of equal ones the one `which` says, in ascending order.
fn dedupe_sorted(rows: Vec<Row>, which: Keep) -> Vec<Row> {
    let mut kept: FxHashMap<Vec<u8>, usize> = FxHashMap::default();
    for (i, r) in rows.iter().enumerate() {
        let at = kept.entry(group_signature(r)).or_insert(i);
        match which {
            Keep::Last => *at = i,
            Keep::First { right } if *at < right && i >= right => *at = i,
            Keep::First { .. } => {}
        }
    }
    let mut keep: Vec<usize> = kept.into_values().collect();
    keep.sort_unstable();
    let mut rows: Vec<Row> = keep.into_iter().map(|i| rows[i].clone()).collect();
    rows.sort_by(|a, b| {
        a.iter()
            .zip(b)
            .map(|(x, y)| x.cmp_with(y, Collation::Binary))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal)
    });
    rows
}

/// The rows seen so far, by signature (see `group_signature_with`), for DISTINCT.
#[derive(Default)]
struct Distinct {
    seen: FxHashSet<Vec<u8>>,
    /// Reused for each row's signature.
    sig: Vec<u8>,
    /// Each column's collation.
    colls: Vec<Collation>,
}

impl Distinct {
    fn with(colls: Vec<Collation>) -> Distinct {
        Distinct {
            colls,
            ..Distinct::default()
        }
    }

    /// Whether no row equal to `r` was seen before (which it now is).
    fn novel(&mut self, r: &[Value]) -> bool {
        self.sig.clear();
        group_signature_with(r, &self.colls, &mut self.sig);
        !self.seen.contains(&self.sig[..]) && self.seen.insert(self.sig.clone())
    }
}

/// Bytes equal for rows whose values compare equal (3 and 3.0 alike), for hashing.
fn group_signature(r: &[Value]) -> Vec<u8> {
    let mut s = Vec::new();
    group_signature_into(r, &mut s);
    s
}

/// Appends the grouping key of `r` to `out`: equal exactly for rows that group together
/// (an integral real as its integer).
fn group_signature_into(r: &[Value], out: &mut Vec<u8>) {
    group_signature_with(r, &[], out)
}

/// As [`group_signature_into`], text compared by `colls` (one per value, BINARY past its
/// end): NOCASE folds ASCII case, RTRIM drops trailing spaces, as SQLite's GROUP BY and
/// DISTINCT compare them. A registered collation groups as BINARY (docs/sql-compat.md).
fn group_signature_with(r: &[Value], colls: &[Collation], out: &mut Vec<u8>) {
    for (i, v) in r.iter().enumerate() {
        let folded;
        let (tag, bytes): (u8, &[u8]) = match v {
            Value::Null => (0, &[]),
            Value::Integer(i) => (1, &i.to_le_bytes()),
            // A whole real an integer can hold exactly (-2^63 included) is that integer.
            Value::Real(x)
                if x.fract() == 0.0
                    && (-crate::value::TWO_POW_63..crate::value::TWO_POW_63).contains(x) =>
            {
                (1, &(*x as i64).to_le_bytes())
            }
            Value::Real(x) => (2, &x.to_bits().to_le_bytes()),
            Value::Text(t) => match colls.get(i) {
                Some(Collation::NoCase) => {
                    folded = t.to_ascii_lowercase();
                    (3, folded.as_bytes())
                }
                Some(Collation::Rtrim) => (3, t.trim_end_matches(' ').as_bytes()),
                _ => (3, t.as_bytes()),
            },
            Value::Blob(b) => (4, b),
        };
        out.push(tag);
        out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        out.extend_from_slice(bytes);
    }
}

/// Whether comparison `op` holds for operands ordered `o`.
fn compare_result(op: BinOp, o: Ordering) -> bool {
    match op {
        BinOp::Eq | BinOp::Is => o == Ordering::Equal,
        BinOp::Ne | BinOp::IsNot => o != Ordering::Equal,
        BinOp::Lt => o == Ordering::Less,
        BinOp::Le => o != Ordering::Greater,
        BinOp::Gt => o == Ordering::Greater,
        BinOp::Ge => o != Ordering::Less,
        _ => unreachable!("comparison operators"),
    }
}

fn and3(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

fn bool3(b: Option<bool>) -> Value {
    match b {
        None => Value::Null,
        Some(b) => Value::Integer(b as i64),
    }
}

/// Compares two values as SQLite's comparison operators do: affinities applied across
/// (datatype3.html, 4.2), NULL gives `None`.
pub fn compare_values(
    a: &Value,
    aa: Option<Affinity>,
    b: &Value,
    ab: Option<Affinity>,
    coll: Collation,
) -> Option<Ordering> {
    use std::borrow::Cow;
    match (a, b) {
        (Value::Null, _) | (_, Value::Null) => return None,
        // Only TEXT affinity changes an integer.
        (Value::Integer(x), Value::Integer(y))
            if aa != Some(Affinity::Text) && ab != Some(Affinity::Text) =>
        {
            return Some(x.cmp(y))
        }
        _ => {}
    }
    fn converted(v: &Value, to: Option<Affinity>) -> Cow<'_, Value> {
        match to {
            Some(aff) => Cow::Owned(aff.apply(v.clone())),
            None => Cow::Borrowed(v),
        }
    }
    let (to_a, to_b) = comparison_affinities(aa, ab);
    Some(converted(a, to_a).cmp_with(&converted(b, to_b), coll))
}

fn order_values(
    a: &Value,
    b: &Value,
    coll: Collation,
    desc: bool,
    nulls_first: Option<bool>,
) -> Ordering {
    let nf = nulls_first.unwrap_or(!desc);
    match (a.is_null(), b.is_null()) {
        (true, true) => return Ordering::Equal,
        (true, false) => {
            return if nf {
                Ordering::Less
            } else {
                Ordering::Greater
            }
        }
        (false, true) => {
            return if nf {
                Ordering::Greater
            } else {
                Ordering::Less
            }
        }
        _ => {}
    }
    let o = a.cmp_with(b, coll);
    if desc {
        o.reverse()
    } else {
        o
    }
}

/// `CAST(v AS ty)`.
pub fn cast(v: Value, ty: Option<&str>) -> Value {
    if v.is_null() {
        return v;
    }
    match Affinity::of_declared(ty) {
        Affinity::Blob => Value::Blob(v.to_blob().into()),
        Affinity::Text => Value::from(v.to_text()),
        Affinity::Integer => Value::Integer(v.as_i64()),
        Affinity::Real => Value::Real(v.as_f64()),
        Affinity::Numeric => match v {
            Value::Integer(_) | Value::Real(_) => v,
            other => {
                let n = crate::value::number_prefix(&other.to_text()).0;
                match n {
                    Value::Real(r) if r.fract() == 0.0 && r.abs() < 9.2e18 => {
                        Value::Integer(r as i64)
                    }
                    n => n,
                }
            }
        },
    }
}

/// ORDER BY term: an ordinal or an alias of a result column names that column's expression.
fn resolve_order_term(e: &Expr, exprs: &[(Expr, String)]) -> Result<Expr> {
    match e {
        Expr::Literal(Value::Integer(i)) => {
            if *i < 1 || *i as usize > exprs.len() {
                return Err(Error::Sql(format!(
                    "1st ORDER BY term out of range - should be between 1 and {}",
                    exprs.len()
                )));
            }
            Ok(exprs[*i as usize - 1].0.clone())
        }
        // As in SQLite, a result column's name comes before a source's column of that name
        // (`SELECT a AS b, b AS a FROM t ORDER BY a` sorts by b).
        Expr::Column { table: None, name } => Ok(exprs
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(name))
            .map_or_else(|| e.clone(), |(x, _)| x.clone())),
        Expr::Collate(inner, c) => Ok(Expr::Collate(
            Box::new(resolve_order_term(inner, exprs)?),
            *c,
        )),
        other => Ok(other.clone()),
    }
}

/// The keys an index range reads: from the first through those that begin with the second
/// (or to the end).
/// The keys an index range reads (see `Exec::index_span`), and whether they are exactly
/// the entries its bounds' comparisons hold for.
type IndexSpan = (Vec<u8>, Option<Vec<u8>>, bool);

/// The end of the keys that begin with `prefix` or less: the first key past them (none
/// when the prefix is all 0xFF bytes).
fn prefix_end(prefix: &[u8]) -> Bound<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return Bound::Excluded(end);
        }
    }
    Bound::Unbounded
}

fn no_such_column(table: Option<&str>, name: &str) -> Error {
    Error::Sql(match table {
        Some(t) => format!("no such column: {t}.{name}"),
        None => format!("no such column: {name}"),
    })
}

/// The ON conditions of `from`'s joins, nested joins' included.
fn on_conditions<'f>(from: &'f From, out: &mut Vec<&'f Expr>) {
    for t in from.refs() {
        if let TableRef::Nested(inner) = t {
            on_conditions(inner, out);
        }
    }
    out.extend(from.joins.iter().filter_map(|j| j.on.as_ref()));
}

/// A GROUP BY term that is an ordinal: the result column it names (`None` for any other
/// term).
fn resolve_group_term(e: &Expr, exprs: &[(Expr, String)]) -> Result<Option<Expr>> {
    match e {
        Expr::Literal(Value::Integer(i)) => {
            if *i < 1 || *i as usize > exprs.len() {
                return Err(Error::Sql(format!(
                    "1st GROUP BY term out of range - should be between 1 and {}",
                    exprs.len()
                )));
            }
            Ok(Some(exprs[*i as usize - 1].0.clone()))
        }
        _ => Ok(None),
    }
}

/// The clause a name is resolved in (see [`Exec::with_aliases`]).
#[derive(Clone, Copy)]
enum Clause {
    Where,
    GroupBy,
    Having,
}

/// The name SQLite gives an unaliased result column (the column's name for a column).
pub fn expr_name(e: &Expr) -> String {
    match e {
        Expr::Column { name, .. } => name.clone(),
        Expr::Literal(v) => match v {
            Value::Text(s) => format!("'{s}'"),
            other => other.to_string(),
        },
        Expr::Function {
            name, args, star, ..
        } => {
            if *star {
                format!("{name}(*)")
            } else {
                format!(
                    "{name}({})",
                    args.iter().map(expr_name).collect::<Vec<_>>().join(", ")
                )
            }
        }
        _ => "?".into(),
    }
}

/// SQLite's error for the selects of a compound (joined by `op`) of different widths.
fn compound_width_error(op: CompoundOp) -> Error {
    let op = match op {
        CompoundOp::Union => "UNION",
        CompoundOp::UnionAll => "UNION ALL",
        CompoundOp::Intersect => "INTERSECT",
        CompoundOp::Except => "EXCEPT",
    };
    Error::Sql(format!(
        "SELECTs to the left and right of {op} do not have the same number of result columns"
    ))
}

/// A recursive step of the simplest shape, `SELECT ... FROM cte [AS a] [WHERE ...]`, its
/// expressions bound to the CTE's columns (`None`: `*`).
struct SimpleStep {
    frame: Frame,
    columns: Vec<Option<Expr>>,
    where_: Option<Expr>,
}

/// A CTE's columns as a source: its names, no affinity, binary collation.
fn cte_source_columns(names: &[String]) -> Vec<SrcCol> {
    names
        .iter()
        .map(|n| SrcCol {
            name: n.clone(),
            affinity: None,
            coll: Collation::Binary,
            decl_type: None,
            hidden: false,
            merged: None,
        })
        .collect()
}

pub fn table_columns(t: &Table) -> Vec<SrcCol> {
    t.columns
        .iter()
        .map(|c| SrcCol {
            name: c.name.clone(),
            affinity: Some(c.affinity),
            coll: c.collation,
            decl_type: c.decl_type.clone(),
            hidden: false,
            merged: None,
        })
        .collect()
}

fn is_schema_table(name: &str) -> bool {
    ["sqlite_schema", "sqlite_master"]
        .iter()
        .any(|n| n.eq_ignore_ascii_case(name))
}

/// `sqlite_sequence`'s columns, as SQLite declares them: `name` and `seq`, no types.
pub(crate) fn sequence_table_columns() -> Vec<SrcCol> {
    ["name", "seq"]
        .iter()
        .map(|n| SrcCol {
            name: n.to_string(),
            affinity: Some(Affinity::Blob),
            coll: Collation::Binary,
            decl_type: None,
            hidden: false,
            merged: None,
        })
        .collect()
}

fn schema_table_columns() -> Vec<SrcCol> {
    ["type", "name", "tbl_name", "rootpage", "sql"]
        .iter()
        .map(|n| SrcCol {
            name: n.to_string(),
            affinity: Some(if *n == "rootpage" {
                Affinity::Integer
            } else {
                Affinity::Text
            }),
            coll: Collation::Binary,
            decl_type: Some(if *n == "rootpage" { "int" } else { "text" }.into()),
            hidden: false,
            merged: None,
        })
        .collect()
}
