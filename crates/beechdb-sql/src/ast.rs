//! The SQL layer's own syntax tree: what the parser's tree is converted into, so that the
//! parser crate can be swapped without touching planning or execution.
//!
//! Owns: the statement and expression types. May call: `value`. Names are stored unquoted;
//! identifiers compare case-insensitively (done where they are resolved).

use crate::functions::UserFunction;
use crate::value::{Affinity, Collation, Value};

/// A long IN list's values sorted for a binary search, with the run of a statement they
/// were evaluated in (parameters change between runs); shared by the copies of the
/// expression a plan makes.
#[derive(Debug, Clone, Default)]
pub struct ListProbe(pub(crate) std::sync::Arc<parking_lot::Mutex<Option<SortedList>>>);

/// A list's sorted values ([`crate::exec::InProbe`]), the run they were made in (see
/// `exec::KeptSubqueries`), and the left side's affinity they were converted for.
pub(crate) type SortedList = (
    (u64, u64),
    Option<Affinity>,
    std::sync::Arc<crate::exec::InProbe>,
);

/// Names a part of a parsed statement whose plan may be kept between runs (see
/// `exec::PlanCache`): unique in the process, given by the parser. `PlanId::NONE` marks a
/// tree built while running (never cached: its address and content are not stable).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PlanId(u64);

impl PlanId {
    pub const NONE: PlanId = PlanId(0);

    pub fn fresh() -> PlanId {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        PlanId(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}

/// What comparing two operands takes besides their values: the affinity each brings and
/// the collation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmpInfo {
    pub left: Option<Affinity>,
    pub right: Option<Affinity>,
    pub coll: Collation,
}

#[derive(Debug, Clone)]
pub enum Stmt {
    Select(Box<Select>),
    Insert(Box<Insert>),
    Update(Box<Update>),
    Delete {
        /// The statement's WITH clause.
        with: Vec<Cte>,
        table: String,
        where_: Option<Expr>,
        returning: Vec<ResultColumn>,
        plan: PlanId,
    },
    CreateTable(Box<CreateTable>),
    CreateIndex {
        name: String,
        table: String,
        unique: bool,
        if_not_exists: bool,
        columns: Vec<IndexedColumn>,
        /// A partial index's condition: only rows where it is true are in the index.
        where_: Option<Expr>,
        sql: String,
    },
    CreateView {
        name: String,
        if_not_exists: bool,
        columns: Option<Vec<String>>,
        select: Box<Select>,
        sql: String,
    },
    CreateTrigger(Box<CreateTrigger>),
    Drop {
        kind: ObjectKind,
        name: String,
        if_exists: bool,
    },
    Reindex(Option<String>),
    Begin(BeginKind),
    Commit,
    Rollback(Option<String>),
    Savepoint(String),
    Release(String),
    Pragma {
        name: String,
        value: Option<Expr>,
    },
    AlterTable {
        table: String,
        action: AlterAction,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    Table,
    Index,
    View,
    Trigger,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BeginKind {
    Deferred,
    Immediate,
    Exclusive,
}

#[derive(Debug, Clone)]
pub enum AlterAction {
    RenameTo(String),
    /// The column, and its definition's SQL text.
    AddColumn(Box<ColumnDef>, String),
    RenameColumn {
        old: String,
        new: String,
    },
    DropColumn(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Conflict {
    #[default]
    Abort,
    Rollback,
    Fail,
    Ignore,
    Replace,
}

#[derive(Debug, Clone)]
pub struct Insert {
    pub table: String,
    pub columns: Option<Vec<String>>,
    /// `None`: DEFAULT VALUES.
    pub source: Option<Box<Select>>,
    pub conflict: Conflict,
    /// `ON CONFLICT` clauses, in order.
    pub upsert: Vec<Upsert>,
    pub returning: Vec<ResultColumn>,
}

/// `ON CONFLICT [(columns)] DO NOTHING | DO UPDATE SET ... [WHERE ...]`.
#[derive(Debug, Clone)]
pub struct Upsert {
    /// The conflict target's columns (`None`: any uniqueness conflict).
    pub target: Option<Vec<String>>,
    /// `None`: DO NOTHING.
    pub update: Option<(Vec<Assignment>, Option<Expr>)>,
}

/// `SET a = expr` (or `(a, b) = ...`): the columns and the value.
pub type Assignment = (Vec<String>, Expr);

#[derive(Debug, Clone)]
pub struct Update {
    /// The statement's WITH clause.
    pub with: Vec<Cte>,
    pub table: String,
    pub sets: Vec<(Vec<String>, Expr)>,
    /// `UPDATE ... FROM`: the target table joined with the FROM clause's items.
    pub from: Option<From>,
    pub where_: Option<Expr>,
    pub conflict: Conflict,
    pub returning: Vec<ResultColumn>,
    pub plan: PlanId,
}

#[derive(Debug, Clone)]
pub struct CreateTable {
    pub name: String,
    pub if_not_exists: bool,
    pub columns: Vec<ColumnDef>,
    pub constraints: Vec<TableConstraint>,
    pub without_rowid: bool,
    pub as_select: Option<Box<Select>>,
    pub sql: String,
}

#[derive(Debug, Clone)]
pub struct ColumnDef {
    pub name: String,
    pub decl_type: Option<String>,
    pub primary_key: Option<bool>, // Some(desc)
    pub autoincrement: bool,
    pub not_null: bool,
    pub unique: bool,
    pub default: Option<Expr>,
    pub collation: Option<Collation>,
    pub checks: Vec<Expr>,
    /// `REFERENCES parent(...)` on this column.
    pub references: Option<ForeignKeyDef>,
    /// `GENERATED ALWAYS AS (expr) [VIRTUAL | STORED]`: the expression, and whether STORED.
    pub generated: Option<(Expr, bool)>,
}

impl ColumnDef {
    /// A column with no constraints.
    pub fn plain(name: String, decl_type: Option<String>) -> ColumnDef {
        ColumnDef {
            name,
            decl_type,
            primary_key: None,
            autoincrement: false,
            not_null: false,
            unique: false,
            default: None,
            collation: None,
            checks: Vec::new(),
            references: None,
            generated: None,
        }
    }
}

#[derive(Debug, Clone)]
pub enum TableConstraint {
    PrimaryKey(Vec<IndexedColumn>),
    Unique(Vec<IndexedColumn>),
    Check(Expr),
    /// `FOREIGN KEY (columns) REFERENCES ...`.
    ForeignKey(Vec<String>, ForeignKeyDef),
}

/// What a foreign key references, and what a change of the parent does.
#[derive(Debug, Clone)]
pub struct ForeignKeyDef {
    pub parent: String,
    /// Empty: the parent's primary key.
    pub parent_columns: Vec<String>,
    pub on_delete: RefAction,
    pub on_update: RefAction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefAction {
    NoAction,
    Restrict,
    Cascade,
    SetNull,
    SetDefault,
}

#[derive(Debug, Clone)]
pub struct IndexedColumn {
    pub expr: Expr,
    pub desc: bool,
    pub collation: Option<Collation>,
}

#[derive(Debug, Clone)]
pub struct CreateTrigger {
    pub name: String,
    pub if_not_exists: bool,
    pub table: String,
    pub time: TriggerTime,
    pub event: TriggerEvent,
    pub when: Option<Expr>,
    pub body: Vec<Stmt>,
    pub sql: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerTime {
    Before,
    After,
    InsteadOf,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TriggerEvent {
    Insert,
    Delete,
    Update(Option<Vec<String>>),
}

#[derive(Debug, Clone)]
pub struct Select {
    pub with: Vec<Cte>,
    pub first: Core,
    pub compounds: Vec<(CompoundOp, Core)>,
    pub order_by: Vec<OrderTerm>,
    pub limit: Option<Expr>,
    pub offset: Option<Expr>,
}

impl Select {
    /// Its select cores: the first, then each compound's.
    pub fn cores(&self) -> impl Iterator<Item = &Core> {
        std::iter::once(&self.first).chain(self.compounds.iter().map(|(_, c)| c))
    }
}

#[derive(Debug, Clone)]
pub struct Cte {
    pub name: String,
    pub columns: Option<Vec<String>>,
    pub select: Box<Select>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompoundOp {
    Union,
    UnionAll,
    Intersect,
    Except,
}

#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // one per select core: not worth a box
pub enum Core {
    Select {
        distinct: bool,
        columns: Vec<ResultColumn>,
        from: Option<From>,
        where_: Option<Expr>,
        group_by: Vec<Expr>,
        having: Option<Expr>,
        plan: PlanId,
    },
    Values(Vec<Vec<Expr>>),
}

#[derive(Debug, Clone)]
pub enum ResultColumn {
    Expr(Expr, Option<String>),
    Star,
    TableStar(String),
}

#[derive(Debug, Clone)]
pub struct From {
    pub first: TableRef,
    pub joins: Vec<Join>,
}

impl From {
    /// Its sources, in the order written: the first, then each join's.
    pub fn refs(&self) -> impl Iterator<Item = &TableRef> {
        std::iter::once(&self.first).chain(self.joins.iter().map(|j| &j.table))
    }

    /// A FROM of one table.
    pub fn table(name: &str) -> From {
        From {
            first: TableRef::Table {
                name: name.to_string(),
                alias: None,
            },
            joins: Vec::new(),
        }
    }
}

#[derive(Debug, Clone)]
pub enum TableRef {
    Table {
        name: String,
        alias: Option<String>,
    },
    Subquery {
        select: Box<Select>,
        alias: Option<String>,
    },
    Nested(Box<From>),
    /// A table-valued function (`json_each`, `json_tree`) and its arguments, which may
    /// name the columns of the sources before it.
    Function {
        name: String,
        args: Vec<Expr>,
        alias: Option<String>,
    },
}

#[derive(Debug, Clone)]
pub struct Join {
    pub natural: bool,
    /// The left side's rows are kept when nothing joins them (LEFT or FULL).
    pub left: bool,
    /// The right side's rows are kept when nothing joins them (RIGHT or FULL). Such a join
    /// is always the only join of a nested FROM (see `parse::nest_outer_joins`).
    pub right: bool,
    pub table: TableRef,
    pub on: Option<Expr>,
    pub using: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct OrderTerm {
    pub expr: Expr,
    pub desc: bool,
    /// `Some(true)`: NULLS FIRST.
    pub nulls_first: Option<bool>,
}

#[derive(Debug, Clone)]
pub enum Expr {
    Literal(Value),
    Column {
        table: Option<String>,
        name: String,
    },
    /// A column reference resolved when the statement was planned: its slot in the rows of
    /// the select core it belongs to (see `exec::CorePlan`).
    Slot(usize),
    /// A parameter: its 1-based index.
    Param(usize),
    Unary(UnaryOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// A comparison (`=`, `<`, `IS`, ...) whose affinities and collation were worked out
    /// when the statement was planned (see `exec::Exec::compile_comparisons`).
    Compare(BinOp, Box<Expr>, Box<Expr>, CmpInfo),
    Between {
        expr: Box<Expr>,
        not: bool,
        low: Box<Expr>,
        high: Box<Expr>,
        /// The two comparisons' affinities and collation, when known at planning.
        known: Option<[CmpInfo; 2]>,
    },
    InList {
        expr: Box<Expr>,
        not: bool,
        list: Vec<Expr>,
        /// The list's values sorted, when they are constants (see `Exec::list_probe`).
        sorted: ListProbe,
    },
    InSelect {
        expr: Box<Expr>,
        not: bool,
        select: Box<Select>,
    },
    Like {
        expr: Box<Expr>,
        not: bool,
        glob: bool,
        pattern: Box<Expr>,
        escape: Option<Box<Expr>>,
    },
    IsNull(Box<Expr>, bool),
    Case {
        base: Option<Box<Expr>>,
        whens: Vec<(Expr, Expr)>,
        else_: Option<Box<Expr>>,
    },
    Cast(Box<Expr>, Option<String>),
    Collate(Box<Expr>, Collation),
    Function {
        name: String,
        distinct: bool,
        args: Vec<Expr>,
        star: bool,
        /// The registered function the call resolved to when prepared, if any.
        user: Option<UserFunction>,
    },
    Exists(Box<Select>),
    Subquery(Box<Select>),
    /// A row value `(a, b, ...)` (only as an operand of comparisons and IN).
    Row(Vec<Expr>),
    /// A window function call: `func(args) OVER (PARTITION BY ... ORDER BY ... frame)`.
    Window(Box<WindowCall>),
    Raise(RaiseKind, Option<String>),
}

#[derive(Debug, Clone)]
pub struct WindowCall {
    pub name: String,
    /// The registered aggregate the call resolved to when prepared, if any.
    pub user: Option<UserFunction>,
    pub args: Vec<Expr>,
    pub partition: Vec<Expr>,
    pub order: Vec<OrderTerm>,
    /// The frame: its units, bounds, and what it leaves out.
    pub units: FrameUnits,
    pub start: FrameBound,
    pub end: FrameBound,
    pub exclude: FrameExclude,
}

/// What a window frame's offsets count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameUnits {
    Rows,
    /// The ORDER BY value's distance (peers, without an offset).
    Range,
    /// Peer groups.
    Groups,
}

/// The rows a window frame leaves out of itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FrameExclude {
    #[default]
    NoOthers,
    /// `EXCLUDE NO OTHERS` written out: nothing is left out, but SQLite then computes
    /// each frame afresh rather than sliding one, which shows (a sum over a frame that
    /// held a real is real while sliding, an integer afresh); so is it here.
    NoOthersWritten,
    CurrentRow,
    /// The current row and its peers.
    Group,
    /// The current row's peers, not itself.
    Ties,
}

#[derive(Debug, Clone)]
pub enum FrameBound {
    UnboundedPreceding,
    Preceding(Expr),
    CurrentRow,
    Following(Expr),
    UnboundedFollowing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RaiseKind {
    Ignore,
    Rollback,
    Abort,
    Fail,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    Neg,
    Plus,
    Not,
    BitNot,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Concat,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Is,
    IsNot,
    And,
    Or,
    BitAnd,
    BitOr,
    Shl,
    Shr,
}

impl BinOp {
    /// `=`, `<>`, `<`, `<=`, `>`, `>=`, `IS`, `IS NOT`.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Eq
                | BinOp::Ne
                | BinOp::Lt
                | BinOp::Le
                | BinOp::Gt
                | BinOp::Ge
                | BinOp::Is
                | BinOp::IsNot
        )
    }
}

/// Runs `$body` with `$c` bound to each direct sub-expression of `$e` (a `&Expr` or a
/// `&mut Expr`), not entering subqueries or window calls: `walk` and `walk_mut` share it.
macro_rules! each_child {
    ($e:expr, |$c:ident| $body:expr) => {
        match $e {
            Expr::Unary(_, $c) | Expr::IsNull($c, _) | Expr::Cast($c, _) | Expr::Collate($c, _) => {
                $body
            }
            Expr::Binary(_, a, b) | Expr::Compare(_, a, b, _) => {
                for $c in [a, b] {
                    $body
                }
            }
            Expr::Between {
                expr, low, high, ..
            } => {
                for $c in [expr, low, high] {
                    $body
                }
            }
            Expr::InList { expr, list, .. } => {
                let $c = expr;
                $body;
                for $c in list {
                    $body
                }
            }
            Expr::InSelect { expr: $c, .. } => $body,
            Expr::Like {
                expr,
                pattern,
                escape,
                ..
            } => {
                for $c in [expr, pattern] {
                    $body
                }
                if let Some($c) = escape {
                    $body
                }
            }
            Expr::Case { base, whens, else_ } => {
                if let Some($c) = base {
                    $body
                }
                for (w, t) in whens {
                    let $c = w;
                    $body;
                    let $c = t;
                    $body
                }
                if let Some($c) = else_ {
                    $body
                }
            }
            Expr::Function { args, .. } | Expr::Row(args) => {
                for $c in args {
                    $body
                }
            }
            // Computed over the whole result, like a subquery: not entered.
            Expr::Window(_) => {}
            Expr::Literal(_)
            | Expr::Column { .. }
            | Expr::Slot(_)
            | Expr::Param(_)
            | Expr::Exists(_)
            | Expr::Subquery(_)
            | Expr::Raise(..) => {}
        }
    };
}

impl Expr {
    /// Calls `f` with every sub-expression, this one first; not descending into subqueries.
    pub fn walk(&self, f: &mut impl FnMut(&Expr)) {
        f(self);
        each_child!(self, |c| c.walk(f));
    }

    /// As `walk`, with each sub-expression changeable.
    pub fn walk_mut(&mut self, f: &mut impl FnMut(&mut Expr)) {
        f(self);
        each_child!(self, |c| c.walk_mut(f));
    }

    /// Replaces each sub-expression that `f` gives a replacement for, this one first; not
    /// descending into a replacement (which may hold what it replaced: an alias's
    /// expression naming a column of the alias's name), nor into subqueries.
    pub fn replace_each(&mut self, f: &mut impl FnMut(&Expr) -> Option<Expr>) {
        match f(self) {
            Some(x) => *self = x,
            None => each_child!(self, |c| c.replace_each(f)),
        }
    }
}
