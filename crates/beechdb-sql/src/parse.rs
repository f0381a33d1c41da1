//! Parsing: SQL text through `sqlite3-parser` (a port of SQLite's own Lemon grammar, so
//! precedence and syntax are SQLite's) into this crate's tree (`ast.rs`).
//!
//! Owns: the conversion, parameter numbering, and the errors for syntax this layer does
//! not support. May call: `ast`, `value`. Invariant: nothing of the parser crate's types
//! leaves this module.

use crate::ast::*;
use crate::error::{Error, Result};
use crate::functions::Registry;
use crate::value::{Collation, Value};
use sqlite3_parser::ast as p;
use sqlite3_parser::ast::fmt::ToTokens;
use sqlite3_parser::lexer::sql::Parser;
use sqlite3_parser::{Bump, FallibleIterator};

/// A parsed statement and the names of its parameters (`None` for `?` and `?NNN`).
pub struct Parsed {
    pub stmt: Stmt,
    pub params: Vec<Option<String>>,
    /// The names written double-quoted where a column may stand: one that names no column
    /// is read as a string, as SQLite reads it (see `Exec::column`).
    pub quoted: Vec<String>,
    /// Bytes of the input this statement took (to find where the next begins).
    pub consumed: usize,
    pub explain: bool,
    /// How deep its expressions and SELECTs nest (at most [`MAX_DEPTH`]).
    pub depth: usize,
}

/// Parses the first statement of `sql`; `Ok(None)` when there is none (only spaces,
/// comments, semicolons).
/// Calls are not checked: schema text is read back with it, and a view may name a
/// function that only exists when it runs (SQLite, too, checks a view's calls then).
pub fn parse_one(sql: &str) -> Result<Option<Parsed>> {
    parse_checked(sql, &Registry::default(), false)
}

/// Parses the first statement of `sql`, resolving calls and collations to those `registry`
/// holds before the built-in ones; a call of an unknown function, or with a wrong number
/// of arguments, is an error here, as in SQLite's prepare (not in the bodies of CREATE
/// statements, checked when they run).
pub fn parse_with(sql: &str, registry: &Registry) -> Result<Option<Parsed>> {
    parse_checked(sql, registry, true)
}

fn parse_checked(sql: &str, registry: &Registry, check_calls: bool) -> Result<Option<Parsed>> {
    let bump = Bump::new();
    let mut parser = Parser::new(&bump, sql.as_bytes());
    let cmd = match parser.next() {
        Ok(Some(cmd)) => cmd,
        Ok(None) => return Ok(None),
        Err(e) => {
            return match lexer_error(sql, &e) {
                // SQLite's tokenizer runs a comment left open to the end of the text.
                LexerError::OpenComment(at) => parse_checked(&sql[..at], registry, check_calls),
                LexerError::Bad(e) => Err(e),
            };
        }
    };
    let pos = parser.position();
    let consumed = offset_of(sql, pos.line, pos.column);
    let mut cx = Cx {
        params: Vec::new(),
        registry,
        windows: Vec::new(),
        check_calls,
        source: create_text(&sql[..consumed]),
        quoted: Vec::new(),
        text: &sql[..consumed],
        typed: None,
        depth: 0,
        deepest: 0,
    };
    let converted = match &cmd {
        p::Cmd::Stmt(s) => cx.stmt(s).map(|s| (s, false)),
        p::Cmd::Explain(s) | p::Cmd::ExplainQueryPlan(s) => cx.stmt(s).map(|s| (s, true)),
    };
    // The parser's tree lives in `bump`, which frees it whole; dropping it first would walk
    // it recursively, as deep as the input nests (past `MAX_DEPTH`: a stack overflow).
    std::mem::forget(cmd);
    let (stmt, explain) = converted?;
    Ok(Some(Parsed {
        stmt,
        params: cx.params,
        quoted: cx.quoted,
        consumed,
        explain,
        depth: cx.deepest,
    }))
}

/// What SQLite makes of text its tokenizer stops at.
enum LexerError {
    /// A comment, at this offset, left open.
    OpenComment(usize),
    Bad(Error),
}

/// A bad token is `unrecognized token: "TOKEN"`, with the token's extent as SQLite's
/// tokenizer finds it.
fn lexer_error(sql: &str, e: &sqlite3_parser::lexer::sql::Error) -> LexerError {
    use sqlite3_parser::lexer::sql::Error as E;
    let at = match e {
        E::UnrecognizedToken(Some(p))
        | E::UnterminatedLiteral(Some(p))
        | E::UnterminatedBracket(Some(p))
        | E::UnterminatedBlockComment(Some(p))
        | E::BadVariableName(Some(p))
        | E::BadNumber(Some(p))
        | E::ExpectedEqualsSign(Some(p))
        | E::MalformedBlobLiteral(Some(p))
        | E::MalformedHexInteger(Some(p)) => offset_of(sql, p.line, p.column),
        _ => return LexerError::Bad(Error::syntax(clean_error(&e.to_string()))),
    };
    match e {
        E::UnterminatedBlockComment(_) => LexerError::OpenComment(at),
        _ => LexerError::Bad(Error::syntax(format!(
            "unrecognized token: \"{}\"",
            illegal_token(&sql[at..])
        ))),
    }
}

/// The bad token at the start of `rest`, as far as SQLite's tokenizer takes it.
fn illegal_token(rest: &str) -> &str {
    let b = rest.as_bytes();
    let id_char = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80;
    let len = match b.first() {
        None => 0,
        // A blob literal: to its closing quote, or the end.
        Some(b'x' | b'X') if b.get(1) == Some(&b'\'') => {
            let end = b[2..]
                .iter()
                .position(|&c| c == b'\'')
                .map_or(b.len(), |i| i + 3);
            end.min(b.len())
        }
        // A quote or bracket never closed: the rest of the text.
        Some(b'\'' | b'"' | b'`' | b'[') => b.len(),
        Some(c) if c.is_ascii_digit() || *c == b'.' => {
            let mut i = b
                .iter()
                .take_while(|c| c.is_ascii_digit() || **c == b'.')
                .count();
            if matches!(b.get(i), Some(b'e' | b'E')) {
                let sign = usize::from(matches!(b.get(i + 1), Some(b'+' | b'-')));
                if b.get(i + 1 + sign).is_some_and(u8::is_ascii_digit) {
                    i += 1 + sign;
                    i += b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
                }
            }
            i + b[i..].iter().take_while(|&&c| id_char(c)).count()
        }
        Some(_) => rest.chars().next().map_or(0, char::len_utf8),
    };
    &rest[..len]
}

/// `TRUE` or `FALSE` written bare (SQLite reads them as 1 and 0 where no column has the
/// name; see `Exec::column`).
fn truth_literal(e: &p::Expr) -> Option<bool> {
    match e {
        p::Expr::Id(id) if id.0.eq_ignore_ascii_case("true") => Some(true),
        p::Expr::Id(id) if id.0.eq_ignore_ascii_case("false") => Some(false),
        _ => None,
    }
}

/// The byte offset of 1-based `line` and byte `column` in `s`.
fn offset_of(s: &str, line: usize, column: usize) -> usize {
    let start: usize = s.split_inclusive('\n').take(line - 1).map(str::len).sum();
    (start + column - 1).min(s.len())
}

/// The SQL text a parsed node prints as (`sqlite_schema.sql`, default column names).
fn render<T: ToTokens>(node: &T) -> String {
    struct Show<'a, T>(&'a T);
    impl<T: ToTokens> std::fmt::Display for Show<'_, T> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            self.0.to_fmt(f)
        }
    }
    Show(node).to_string()
}

/// The name of an unaliased result column: the expression's text, function calls written
/// as `name(args)` as they usually are.
fn column_name(e: &p::Expr) -> String {
    match e {
        p::Expr::FunctionCallStar {
            name,
            filter_over: None,
        } => format!("{}(*)", name.0),
        p::Expr::FunctionCall {
            name,
            args,
            distinctness: None,
            order_by: None,
            filter_over: None,
        } => format!(
            "{}({})",
            name.0,
            args.iter()
                .flat_map(|a| a.iter())
                .map(column_name)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => render(other),
    }
}

/// The parser's message without its position suffix, as SQLite words it.
fn clean_error(e: &str) -> String {
    let cut = [" at (", " at line"].iter().filter_map(|p| e.find(p)).min();
    match cut {
        Some(i) => e[..i].to_string(),
        None => e.to_string(),
    }
}

/// An identifier without its quotes (`"x"`, `[x]`, `` `x` ``, `'x'`).
pub fn unquote(s: &str) -> String {
    let b = s.as_bytes();
    if b.len() >= 2 {
        let (open, close) = (b[0], b[b.len() - 1]);
        let pair = matches!(
            (open, close),
            (b'"', b'"') | (b'`', b'`') | (b'\'', b'\'') | (b'[', b']')
        );
        if pair {
            let inner = &s[1..s.len() - 1];
            return match open {
                b'[' => inner.to_string(),
                q => {
                    let q = q as char;
                    inner.replace(&format!("{q}{q}"), &q.to_string())
                }
            };
        }
    }
    s.to_string()
}

/// Joins associate to the left, and a RIGHT or FULL join keeps the rows of its whole left
/// side: so everything before such a join becomes one nested source, and the join with it
/// the only join of a nested FROM, which the executor runs on its own
/// (`Exec::outer_join`). `a JOIN b RIGHT JOIN c JOIN d` becomes
/// `((a JOIN b) RIGHT JOIN c) JOIN d`; the row's slots stay in the written order.
fn nest_outer_joins(first: TableRef, joins: Vec<Join>) -> From {
    let mut from = From {
        first,
        joins: Vec::new(),
    };
    for j in joins {
        if !j.right {
            from.joins.push(j);
            continue;
        }
        let left = match from.joins.is_empty() {
            true => from.first,
            false => TableRef::Nested(Box::new(from)),
        };
        let outer = From {
            first: left,
            joins: vec![j],
        };
        from = From {
            first: TableRef::Nested(Box::new(outer)),
            joins: Vec::new(),
        };
    }
    from
}

fn unsupported(what: &str) -> Error {
    Error::Unsupported(what.to_string())
}

struct Cx<'r> {
    params: Vec<Option<String>>,
    registry: &'r Registry,
    /// The WINDOW clauses' definitions of the SELECTs being converted, innermost last.
    windows: Vec<(String, WindowSpec)>,
    /// Whether a call of a built-in function is checked (see `parse_with`).
    check_calls: bool,
    /// The text of a CREATE statement as written, kept in `sqlite_schema` as SQLite does.
    source: Option<String>,
    /// See [`Parsed::quoted`].
    quoted: Vec<String>,
    /// The statement's text, and its result columns as typed (`alter::typed_columns`, read
    /// at the first unaliased expression column): each whitespace-free and lower-cased, as
    /// typed, and whether a column was named by it.
    text: &'r str,
    typed: Option<Vec<(String, String, bool)>>,
    /// Expressions and SELECTs being converted, one inside the next (see [`MAX_DEPTH`]),
    /// and the most there have been.
    depth: usize,
    deepest: usize,
}

/// How deep expressions and SELECTs may nest, one in another: SQLite's limit on an
/// expression tree (`SQLITE_MAX_EXPR_DEPTH`), with its error. Deeper input (a thousand
/// parentheses, a sum of twenty thousand terms) would overflow the stack of the recursive
/// steps that convert, plan and evaluate it, and end the process.
pub const MAX_DEPTH: usize = 1000;

/// A window definition before its frame's defaults are decided (they depend on whether,
/// once built on its base, it has an ORDER BY).
#[derive(Clone, Default)]
struct WindowSpec {
    partition: Vec<Expr>,
    order: Vec<OrderTerm>,
    /// Units, start, end, exclusion; `None`: the default.
    frame: Option<(FrameUnits, FrameBound, FrameBound, FrameExclude)>,
}

/// `stmt` from its CREATE keyword to its last token (no comments before, no semicolon
/// after), as SQLite stores it (`alter::stored_create`); `None` if it is not a CREATE
/// statement.
fn create_text(stmt: &str) -> Option<String> {
    let mut rest = stmt;
    loop {
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix("--") {
            rest = r.split_once('\n').map_or("", |(_, after)| after);
        } else if let Some(r) = rest.strip_prefix("/*") {
            rest = r.split_once("*/").map_or("", |(_, after)| after);
        } else {
            break;
        }
    }
    if !rest
        .get(..6)
        .is_some_and(|w| w.eq_ignore_ascii_case("CREATE"))
    {
        return None;
    }
    Some(crate::alter::stored_create(
        rest.trim_end_matches(|c: char| c == ';' || c.is_whitespace()),
    ))
}

fn name(n: &p::Name) -> String {
    unquote(n.0)
}

fn qname(q: &p::QualifiedName) -> Result<String> {
    if let Some(db) = &q.db_name {
        let db = name(db);
        if !db.eq_ignore_ascii_case("main") && !db.eq_ignore_ascii_case("temp") {
            return Err(Error::Sql(format!("unknown database {db}")));
        }
    }
    Ok(name(&q.name))
}

fn conflict(r: Option<p::ResolveType>) -> Conflict {
    match r {
        None | Some(p::ResolveType::Abort) => Conflict::Abort,
        Some(p::ResolveType::Rollback) => Conflict::Rollback,
        Some(p::ResolveType::Fail) => Conflict::Fail,
        Some(p::ResolveType::Ignore) => Conflict::Ignore,
        Some(p::ResolveType::Replace) => Conflict::Replace,
    }
}

fn collation(n: &str) -> Result<Collation> {
    let n = unquote(n);
    Collation::from_name(&n).ok_or_else(|| Error::Sql(format!("no such collation sequence: {n}")))
}

impl Cx<'_> {
    /// The statement's text as written, or rendered from `node`.
    fn source_or<T: ToTokens>(&self, node: &T) -> String {
        self.source.clone().unwrap_or_else(|| render(node))
    }

    fn stmt(&mut self, s: &p::Stmt) -> Result<Stmt> {
        // The bodies of CREATE statements are checked when they run (see `parse_with`).
        if matches!(
            s,
            p::Stmt::CreateTable { .. }
                | p::Stmt::CreateIndex { .. }
                | p::Stmt::CreateView { .. }
                | p::Stmt::CreateTrigger { .. }
        ) {
            self.check_calls = false;
        }
        Ok(match s {
            p::Stmt::Select(sel) => Stmt::Select(Box::new(self.select(sel)?)),
            p::Stmt::Insert {
                with,
                or_conflict,
                tbl_name,
                columns,
                body,
                returning,
            } => {
                let mut clauses = Vec::new();
                let source = match body {
                    p::InsertBody::Select(sel, upsert) => {
                        let mut next = *upsert;
                        while let Some(u) = next {
                            clauses.push(self.upsert(u)?);
                            next = u.next;
                        }
                        let mut sel = self.select(sel)?;
                        // The statement's WITH is in scope in its SELECT (before the
                        // SELECT's own).
                        if let Some(w) = with {
                            let mut ctes = self.with_clause(w)?;
                            ctes.append(&mut sel.with);
                            sel.with = ctes;
                        }
                        Some(Box::new(sel))
                    }
                    p::InsertBody::DefaultValues => None,
                };
                Stmt::Insert(Box::new(Insert {
                    table: qname(tbl_name)?,
                    columns: columns.as_ref().map(|c| c.iter().map(name).collect()),
                    source,
                    conflict: conflict(*or_conflict),
                    upsert: clauses,
                    returning: self.returning(*returning)?,
                }))
            }
            p::Stmt::Update {
                with,
                or_conflict,
                tbl_name,
                sets,
                from,
                where_clause,
                returning,
                order_by,
                limit,
                ..
            } => {
                if order_by.is_some() || limit.is_some() {
                    return Err(unsupported("ORDER BY or LIMIT on UPDATE"));
                }
                let with = match with {
                    Some(w) => self.with_clause(w)?,
                    None => Vec::new(),
                };
                let sets = self.assignments(sets)?;
                let table = qname(tbl_name)?;
                Stmt::Update(Box::new(Update {
                    with,
                    from: self.update_from(&table, from.as_ref())?,
                    table,
                    sets,
                    where_: self.opt(where_clause.as_ref())?,
                    conflict: conflict(*or_conflict),
                    returning: self.returning(*returning)?,
                    plan: PlanId::fresh(),
                }))
            }
            p::Stmt::Delete {
                with,
                tbl_name,
                where_clause,
                returning,
                order_by,
                limit,
                ..
            } => {
                if order_by.is_some() || limit.is_some() {
                    return Err(unsupported("ORDER BY or LIMIT on DELETE"));
                }
                Stmt::Delete {
                    with: match with {
                        Some(w) => self.with_clause(w)?,
                        None => Vec::new(),
                    },
                    table: qname(tbl_name)?,
                    where_: self.opt(where_clause.as_ref())?,
                    returning: self.returning(*returning)?,
                    plan: PlanId::fresh(),
                }
            }
            p::Stmt::CreateTable {
                if_not_exists,
                tbl_name,
                body,
                ..
            } => Stmt::CreateTable(Box::new(self.create_table(
                qname(tbl_name)?,
                *if_not_exists,
                body,
                s,
            )?)),
            p::Stmt::CreateIndex {
                unique,
                if_not_exists,
                idx_name,
                tbl_name,
                columns,
                where_clause,
            } => {
                let where_ = where_clause.as_ref().map(|w| self.expr(w)).transpose()?;
                Stmt::CreateIndex {
                    where_,
                    name: qname(idx_name)?,
                    table: name(tbl_name),
                    unique: *unique,
                    if_not_exists: *if_not_exists,
                    columns: columns
                        .iter()
                        .map(|c| self.sorted_column(c))
                        .collect::<Result<_>>()?,
                    sql: self.source_or(s),
                }
            }
            p::Stmt::CreateView {
                if_not_exists,
                view_name,
                columns,
                select,
                ..
            } => Stmt::CreateView {
                name: qname(view_name)?,
                if_not_exists: *if_not_exists,
                columns: columns.map(|cs| cs.iter().map(|c| name(&c.col_name)).collect()),
                select: Box::new(self.select(select)?),
                sql: self.source_or(s),
            },
            p::Stmt::CreateTrigger {
                if_not_exists,
                trigger_name,
                time,
                event,
                tbl_name,
                when_clause,
                commands,
                ..
            } => {
                let body = commands
                    .iter()
                    .map(|c| self.trigger_cmd(c))
                    .collect::<Result<_>>()?;
                Stmt::CreateTrigger(Box::new(CreateTrigger {
                    name: qname(trigger_name)?,
                    if_not_exists: *if_not_exists,
                    table: qname(tbl_name)?,
                    time: match time {
                        None | Some(p::TriggerTime::Before) => TriggerTime::Before,
                        Some(p::TriggerTime::After) => TriggerTime::After,
                        Some(p::TriggerTime::InsteadOf) => TriggerTime::InsteadOf,
                    },
                    event: match event {
                        p::TriggerEvent::Insert => TriggerEvent::Insert,
                        p::TriggerEvent::Delete => TriggerEvent::Delete,
                        p::TriggerEvent::Update => TriggerEvent::Update(None),
                        p::TriggerEvent::UpdateOf(cols) => {
                            TriggerEvent::Update(Some(cols.iter().map(name).collect()))
                        }
                    },
                    when: self.opt(when_clause.as_ref())?,
                    body,
                    sql: self.source_or(s),
                }))
            }
            p::Stmt::DropTable {
                if_exists,
                tbl_name,
            } => drop(ObjectKind::Table, tbl_name, *if_exists)?,
            p::Stmt::DropIndex {
                if_exists,
                idx_name,
            } => drop(ObjectKind::Index, idx_name, *if_exists)?,
            p::Stmt::DropView {
                if_exists,
                view_name,
            } => drop(ObjectKind::View, view_name, *if_exists)?,
            p::Stmt::DropTrigger {
                if_exists,
                trigger_name,
            } => drop(ObjectKind::Trigger, trigger_name, *if_exists)?,
            p::Stmt::Reindex { obj_name } => {
                Stmt::Reindex(obj_name.as_ref().map(qname).transpose()?)
            }
            p::Stmt::Begin(kind, _) => Stmt::Begin(match kind {
                None | Some(p::TransactionType::Deferred) => BeginKind::Deferred,
                Some(p::TransactionType::Immediate) => BeginKind::Immediate,
                Some(p::TransactionType::Exclusive) => BeginKind::Exclusive,
            }),
            p::Stmt::Commit(_) => Stmt::Commit,
            p::Stmt::Rollback { savepoint_name, .. } => {
                Stmt::Rollback(savepoint_name.as_ref().map(name))
            }
            p::Stmt::Savepoint(n) => Stmt::Savepoint(name(n)),
            p::Stmt::Release(n) => Stmt::Release(name(n)),
            p::Stmt::Pragma(n, body) => Stmt::Pragma {
                name: qname(n)?.to_ascii_lowercase(),
                value: match body {
                    None => None,
                    Some(p::PragmaBody::Equals(v) | p::PragmaBody::Call(v)) => {
                        Some(self.pragma_value(v)?)
                    }
                },
            },
            p::Stmt::AlterTable(t, body) => Stmt::AlterTable {
                table: qname(t)?,
                action: match body {
                    p::AlterTableBody::RenameTo(n) => AlterAction::RenameTo(name(n)),
                    p::AlterTableBody::AddColumn(c) => {
                        AlterAction::AddColumn(Box::new(self.column(c)?), render(c))
                    }
                    p::AlterTableBody::RenameColumn { old, new } => AlterAction::RenameColumn {
                        old: name(old),
                        new: name(new),
                    },
                    p::AlterTableBody::DropColumn(c) => AlterAction::DropColumn(name(c)),
                    _ => return Err(unsupported("this ALTER TABLE form")),
                },
            },
            p::Stmt::Analyze(_) | p::Stmt::Vacuum(..) => Stmt::Pragma {
                name: "noop".into(),
                value: None,
            },
            p::Stmt::Attach { .. } | p::Stmt::Detach(_) => {
                return Err(unsupported("ATTACH and DETACH"))
            }
            p::Stmt::CreateVirtualTable { .. } => return Err(unsupported("virtual tables")),
        })
    }

    fn pragma_value(&mut self, v: &p::Expr) -> Result<Expr> {
        match v {
            p::Expr::Id(id) => Ok(Expr::Literal(Value::text(&unquote(id.0)))),
            p::Expr::Name(n) => Ok(Expr::Literal(Value::text(&name(n)))),
            p::Expr::Literal(p::Literal::Keyword(k)) => Ok(Expr::Literal(Value::text(k))),
            other => self.expr(other),
        }
    }

    fn trigger_cmd(&mut self, c: &p::TriggerCmd) -> Result<Stmt> {
        Ok(match c {
            p::TriggerCmd::Update {
                or_conflict,
                tbl_name,
                sets,
                from,
                where_clause,
            } => {
                let sets = self.assignments(sets)?;
                let table = qname(tbl_name)?;
                Stmt::Update(Box::new(Update {
                    with: Vec::new(),
                    from: self.update_from(&table, from.as_ref())?,
                    table,
                    sets,
                    where_: self.opt(where_clause.as_ref())?,
                    conflict: conflict(*or_conflict),
                    returning: Vec::new(),
                    plan: PlanId::fresh(),
                }))
            }
            p::TriggerCmd::Insert {
                or_conflict,
                tbl_name,
                col_names,
                select,
                upsert,
            } => {
                let mut clauses = Vec::new();
                let mut next = *upsert;
                while let Some(u) = next {
                    clauses.push(self.upsert(u)?);
                    next = u.next;
                }
                Stmt::Insert(Box::new(Insert {
                    table: qname(tbl_name)?,
                    columns: col_names.as_ref().map(|c| c.iter().map(name).collect()),
                    source: Some(Box::new(self.select(select)?)),
                    conflict: conflict(*or_conflict),
                    upsert: clauses,
                    returning: Vec::new(),
                }))
            }
            p::TriggerCmd::Delete {
                tbl_name,
                where_clause,
            } => Stmt::Delete {
                with: Vec::new(),
                table: qname(tbl_name)?,
                where_: self.opt(where_clause.as_ref())?,
                returning: Vec::new(),
                plan: PlanId::fresh(),
            },
            p::TriggerCmd::Select(sel) => Stmt::Select(Box::new(self.select(sel)?)),
        })
    }

    /// A call with a FILTER or OVER clause: an aggregate whose arguments FILTER limits (see
    /// `filtered`), a window function.
    fn window(
        &mut self,
        name: String,
        args: Vec<Expr>,
        (star, distinct): (bool, bool),
        tail: &p::FunctionTail,
    ) -> Result<Expr> {
        let user = self.registry.function(&name, args.len()).cloned();
        if distinct && tail.over_clause.is_some() {
            return Err(Error::Sql(
                "DISTINCT is not supported for window functions".into(),
            ));
        }
        let aggregate = crate::func::is_aggregate(&name, args.len()) || star;
        let args = match tail.filter_clause {
            None => args,
            Some(_) if user.is_some() => {
                return Err(unsupported("FILTER on a registered aggregate"))
            }
            Some(_) if !aggregate && tail.over_clause.is_some() => {
                return Err(Error::Sql(
                    "FILTER clause may only be used with aggregate window functions".into(),
                ))
            }
            Some(_) if !aggregate => {
                return Err(Error::Sql(format!(
                    "FILTER may not be used with non-aggregate {name}()"
                )))
            }
            Some(f) => self.filtered(args, f)?,
        };
        let spec = match tail.over_clause {
            // An aggregate with FILTER alone.
            None => {
                return Ok(Expr::Function {
                    user,
                    name,
                    distinct,
                    args,
                    star: false,
                })
            }
            Some(p::Over::Name(n)) => self.named_window(&unquote(n.0))?,
            Some(p::Over::Window(w)) => self.window_spec(w)?,
        };
        let (units, start, end, exclude) = spec.frame.unwrap_or((
            FrameUnits::Range,
            FrameBound::UnboundedPreceding,
            FrameBound::CurrentRow,
            FrameExclude::NoOthers,
        ));
        let offset =
            |b: &FrameBound| matches!(b, FrameBound::Preceding(_) | FrameBound::Following(_));
        if units == FrameUnits::Range && (offset(&start) || offset(&end)) && spec.order.len() != 1 {
            return Err(Error::Sql(
                "RANGE with offset PRECEDING/FOLLOWING requires one ORDER BY expression".into(),
            ));
        }
        Ok(Expr::Window(Box::new(WindowCall {
            user,
            name,
            args,
            partition: spec.partition,
            order: spec.order,
            units,
            start,
            end,
            exclude,
        })))
    }

    /// An aggregate's arguments under `FILTER (WHERE cond)`: the first becomes `CASE WHEN
    /// cond THEN arg END` (`1` for `count(*)`), so the rows the filter drops give NULL, which
    /// every built-in aggregate skips.
    fn filtered(&mut self, mut args: Vec<Expr>, cond: &p::Expr) -> Result<Vec<Expr>> {
        let cond = self.expr(cond)?;
        let first = match args.is_empty() {
            true => Expr::Literal(Value::Integer(1)),
            false => args.remove(0),
        };
        args.insert(
            0,
            Expr::Case {
                base: None,
                whens: vec![(cond, first)],
                else_: None,
            },
        );
        Ok(args)
    }

    /// A window definition, on top of the named window it names as its base, if any
    /// (SQLite's rules: the base's PARTITION BY, and its ORDER BY unless it has none; a
    /// base with a frame cannot be built on).
    fn window_spec(&mut self, w: &p::Window) -> Result<WindowSpec> {
        let mut spec = match &w.base {
            None => WindowSpec::default(),
            Some(b) => {
                let b = name(b);
                let base = self.named_window(&b)?;
                if w.partition_by.is_some() {
                    return Err(Error::Sql(format!(
                        "cannot override PARTITION clause of window: {b}"
                    )));
                }
                if w.order_by.is_some() && !base.order.is_empty() {
                    return Err(Error::Sql(format!(
                        "cannot override ORDER BY clause of window: {b}"
                    )));
                }
                if base.frame.is_some() {
                    return Err(Error::Sql(format!(
                        "cannot override frame specification of window: {b}"
                    )));
                }
                base
            }
        };
        for e in w.partition_by.iter().flat_map(|p| p.iter()) {
            spec.partition.push(self.expr(e)?);
        }
        for o in w.order_by.iter().flat_map(|o| o.iter()) {
            spec.order.push(OrderTerm {
                expr: self.expr(&o.expr)?,
                desc: matches!(o.order, Some(p::SortOrder::Desc)),
                nulls_first: o.nulls.map(|n| matches!(n, p::NullsOrder::First)),
            });
        }
        let Some(f) = &w.frame_clause else {
            return Ok(spec);
        };
        let exclude = match f.exclude {
            None => FrameExclude::NoOthers,
            Some(p::FrameExclude::NoOthers) => FrameExclude::NoOthersWritten,
            Some(p::FrameExclude::CurrentRow) => FrameExclude::CurrentRow,
            Some(p::FrameExclude::Group) => FrameExclude::Group,
            Some(p::FrameExclude::Ties) => FrameExclude::Ties,
        };
        let units = match f.mode {
            p::FrameMode::Rows => FrameUnits::Rows,
            p::FrameMode::Range => FrameUnits::Range,
            p::FrameMode::Groups => FrameUnits::Groups,
        };
        let start = self.frame_bound(&f.start)?;
        let end = match &f.end {
            Some(e) => self.frame_bound(e)?,
            None => FrameBound::CurrentRow,
        };
        // SQLite's rule: the frame may not start at a kind of bound after its end's kind.
        let backwards = matches!(
            (&start, &end),
            (FrameBound::CurrentRow, FrameBound::Preceding(_))
                | (
                    FrameBound::Following(_),
                    FrameBound::Preceding(_) | FrameBound::CurrentRow
                )
        );
        if backwards {
            return Err(Error::Sql("unsupported frame specification".into()));
        }
        spec.frame = Some((units, start, end, exclude));
        Ok(spec)
    }

    fn frame_bound(&mut self, b: &p::FrameBound) -> Result<FrameBound> {
        Ok(match b {
            p::FrameBound::UnboundedPreceding => FrameBound::UnboundedPreceding,
            p::FrameBound::Preceding(e) => FrameBound::Preceding(self.expr(e)?),
            p::FrameBound::CurrentRow => FrameBound::CurrentRow,
            p::FrameBound::Following(e) => FrameBound::Following(self.expr(e)?),
            p::FrameBound::UnboundedFollowing => FrameBound::UnboundedFollowing,
        })
    }

    /// The window a WINDOW clause of an enclosing SELECT names (the innermost first).
    fn named_window(&self, n: &str) -> Result<WindowSpec> {
        self.windows
            .iter()
            .rev()
            .find(|(name, _)| name.eq_ignore_ascii_case(n))
            .map(|(_, spec)| spec.clone())
            .ok_or_else(|| Error::Sql(format!("no such window: {n}")))
    }

    /// SET's assignments; a row value assigned to a list of columns, `(a, b) = (x, y)`, is
    /// one assignment per column (its values are all computed from the row as it was).
    fn assignments(&mut self, sets: &[p::Set]) -> Result<Vec<Assignment>> {
        let mut out = Vec::new();
        for s in sets {
            let names: Vec<String> = s.col_names.iter().map(name).collect();
            match self.expr(&s.expr)? {
                Expr::Row(values) if names.len() > 1 && values.len() == names.len() => {
                    out.extend(names.into_iter().map(|n| vec![n]).zip(values));
                }
                e @ Expr::Subquery(_) => out.push((names, e)),
                e => {
                    let values = match &e {
                        Expr::Row(values) => values.len(),
                        _ => 1,
                    };
                    if values != names.len() {
                        return Err(Error::Sql(format!(
                            "{} columns assigned {values} values",
                            names.len()
                        )));
                    }
                    out.push((names, e));
                }
            }
        }
        Ok(out)
    }

    fn upsert(&mut self, u: &p::Upsert) -> Result<Upsert> {
        let target = match &u.index {
            None => None,
            Some(ix) => {
                if ix.where_clause.is_some() {
                    return Err(unsupported("a WHERE on an ON CONFLICT target"));
                }
                let mut cols = Vec::new();
                for c in ix.targets {
                    match self.sorted_column(c)?.expr {
                        Expr::Column { name, .. } => cols.push(name),
                        _ => return Err(unsupported("expressions in an ON CONFLICT target")),
                    }
                }
                Some(cols)
            }
        };
        let update = match &u.do_clause {
            p::UpsertDo::Nothing => None,
            p::UpsertDo::Set { sets, where_clause } => {
                Some((self.assignments(sets)?, self.opt(where_clause.as_ref())?))
            }
        };
        Ok(Upsert { target, update })
    }

    /// A result column's name when it is not a column reference: its alias, or unaliased
    /// its text as typed, as SQLite names it (a column reference, in parentheses or not, is
    /// named by the column's name, found later).
    fn result_alias(&mut self, e: &p::Expr, alias: Option<&p::As>) -> Option<String> {
        let mut bare = e;
        while let p::Expr::Parenthesized(inner) = bare {
            match &inner[..] {
                [one] => bare = one,
                _ => break,
            }
        }
        match alias {
            Some(p::As::As(n) | p::As::Elided(n)) => Some(name(n)),
            None if matches!(
                bare,
                p::Expr::Id(_)
                    | p::Expr::Name(_)
                    | p::Expr::Qualified(..)
                    | p::Expr::DoublyQualified(..)
            ) =>
            {
                None
            }
            None => Some(self.typed_text(e)),
        }
    }

    /// The text an expression was typed as: the first result column not yet taken whose
    /// text is its rendering but for spacing and case; its rendering if none is.
    fn typed_text(&mut self, e: &p::Expr) -> String {
        // Rendering recurses as deep as `e` nests, which was converted just now: at most
        // `deepest` levels.
        let rendered = crate::with_stack_for(self.deepest, || column_name(e));
        let squeeze = |s: &str| -> String {
            s.chars()
                .filter(|c| !c.is_whitespace())
                .map(|c| c.to_ascii_lowercase())
                .collect()
        };
        let want = squeeze(&rendered);
        let text = self.text;
        let typed = self.typed.get_or_insert_with(|| {
            crate::alter::typed_columns(text)
                .into_iter()
                .map(|t| (squeeze(&t), t, false))
                .collect()
        });
        match typed.iter_mut().find(|(s, _, used)| !used && *s == want) {
            Some((_, t, used)) => {
                *used = true;
                t.clone()
            }
            None => rendered,
        }
    }

    fn returning(&mut self, r: Option<&[p::ResultColumn]>) -> Result<Vec<ResultColumn>> {
        let mut out = Vec::new();
        for rc in r.into_iter().flatten() {
            out.push(match rc {
                p::ResultColumn::Star => ResultColumn::Star,
                p::ResultColumn::TableStar(n) => ResultColumn::TableStar(name(n)),
                p::ResultColumn::Expr(e, alias) => {
                    // Converted first: past `MAX_DEPTH` it is refused before it is rendered.
                    let x = self.expr(e)?;
                    ResultColumn::Expr(x, self.result_alias(e, alias.as_ref()))
                }
            });
        }
        Ok(out)
    }

    fn create_table(
        &mut self,
        tname: String,
        if_not_exists: bool,
        body: &p::CreateTableBody,
        whole: &p::Stmt,
    ) -> Result<CreateTable> {
        let mut t = CreateTable {
            name: tname,
            if_not_exists,
            columns: Vec::new(),
            constraints: Vec::new(),
            without_rowid: false,
            as_select: None,
            sql: self.source_or(whole),
        };
        match body {
            p::CreateTableBody::AsSelect(sel) => t.as_select = Some(Box::new(self.select(sel)?)),
            p::CreateTableBody::ColumnsAndConstraints {
                columns,
                constraints,
                flags,
            } => {
                t.without_rowid = flags.contains(p::TabFlags::WithoutRowid);
                for c in columns.iter() {
                    t.columns.push(self.column(c)?);
                }
                for c in constraints.iter().flat_map(|cs| cs.iter()) {
                    t.constraints.push(match &c.constraint {
                        p::TableConstraint::PrimaryKey { columns, .. } => {
                            TableConstraint::PrimaryKey(
                                columns
                                    .iter()
                                    .map(|c| self.sorted_column(c))
                                    .collect::<Result<_>>()?,
                            )
                        }
                        p::TableConstraint::Unique { columns, .. } => TableConstraint::Unique(
                            columns
                                .iter()
                                .map(|c| self.sorted_column(c))
                                .collect::<Result<_>>()?,
                        ),
                        p::TableConstraint::Check(e, _) => TableConstraint::Check(self.expr(e)?),
                        p::TableConstraint::ForeignKey {
                            columns, clause, ..
                        } => TableConstraint::ForeignKey(
                            columns.iter().map(|c| name(&c.col_name)).collect(),
                            foreign_key(clause),
                        ),
                    });
                }
            }
        }
        Ok(t)
    }

    fn column(&mut self, c: &p::ColumnDefinition) -> Result<ColumnDef> {
        let decl_type = c.col_type.as_ref().map(|t| match &t.size {
            None => unquote(t.name),
            Some(_) => render(t),
        });
        let mut col = ColumnDef::plain(name(&c.col_name), decl_type);
        for nc in c.constraints {
            match &nc.constraint {
                p::ColumnConstraint::PrimaryKey {
                    order,
                    auto_increment,
                    ..
                } => {
                    col.primary_key = Some(matches!(order, Some(p::SortOrder::Desc)));
                    col.autoincrement = *auto_increment;
                }
                p::ColumnConstraint::NotNull { nullable, .. } => col.not_null = !nullable,
                p::ColumnConstraint::Unique(_) => col.unique = true,
                p::ColumnConstraint::Check(e) => col.checks.push(self.expr(e)?),
                p::ColumnConstraint::Default(e) => col.default = Some(self.default_expr(e)?),
                p::ColumnConstraint::Collate { collation_name } => {
                    col.collation = Some(collation(collation_name.0)?)
                }
                p::ColumnConstraint::ForeignKey { clause, .. } => {
                    col.references = Some(foreign_key(clause))
                }
                p::ColumnConstraint::Defer(_) => {}
                p::ColumnConstraint::Generated { expr, typ } => {
                    let stored = match typ.as_ref().map(|t| unquote(t.0)) {
                        None => false,
                        Some(t) if t.eq_ignore_ascii_case("VIRTUAL") => false,
                        Some(t) if t.eq_ignore_ascii_case("STORED") => true,
                        Some(_) => {
                            return Err(Error::Sql(format!(
                                "error in generated column \"{}\"",
                                col.name
                            )))
                        }
                    };
                    col.generated = Some((self.expr(expr)?, stored));
                }
            }
        }
        Ok(col)
    }

    fn default_expr(&mut self, e: &p::Expr) -> Result<Expr> {
        match e {
            p::Expr::Id(id) => Ok(Expr::Literal(Value::text(&unquote(id.0)))),
            other => self.expr(other),
        }
    }

    fn sorted_column(&mut self, c: &p::SortedColumn) -> Result<IndexedColumn> {
        let (expr, coll) = match &c.expr {
            p::Expr::Collate(e, n) => (self.expr(e)?, Some(collation(n)?)),
            e => (self.expr(e)?, None),
        };
        Ok(IndexedColumn {
            expr,
            desc: matches!(c.order, Some(p::SortOrder::Desc)),
            collation: coll,
        })
    }

    fn opt(&mut self, e: Option<&p::Expr>) -> Result<Option<Expr>> {
        e.map(|e| self.expr(e)).transpose()
    }

    fn boxed(&mut self, e: &p::Expr) -> Result<Box<Expr>> {
        Ok(Box::new(self.expr(e)?))
    }

    fn with_clause(&mut self, w: &p::With) -> Result<Vec<Cte>> {
        w.ctes
            .iter()
            .map(|cte| {
                Ok(Cte {
                    name: name(&cte.tbl_name),
                    columns: cte
                        .columns
                        .map(|cs| cs.iter().map(|c| name(&c.col_name)).collect()),
                    select: Box::new(self.select(cte.select)?),
                })
            })
            .collect()
    }

    fn select(&mut self, s: &p::Select) -> Result<Select> {
        self.nested(|cx| cx.select_at_depth(s))
    }

    /// Runs `f` one level deeper, refusing input past [`MAX_DEPTH`].
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        if self.depth >= MAX_DEPTH {
            return Err(Error::Sql(format!(
                "Expression tree is too large (maximum depth {MAX_DEPTH})"
            )));
        }
        self.depth += 1;
        self.deepest = self.deepest.max(self.depth);
        let r = crate::deep(|| f(self));
        self.depth -= 1;
        r
    }

    fn select_at_depth(&mut self, s: &p::Select) -> Result<Select> {
        let with = match &s.with {
            Some(w) => self.with_clause(w)?,
            None => Vec::new(),
        };
        let first = self.core(&s.body.select)?;
        let mut compounds = Vec::new();
        for c in s.body.compounds.iter().flat_map(|v| v.iter()) {
            let op = match c.operator {
                p::CompoundOperator::Union => CompoundOp::Union,
                p::CompoundOperator::UnionAll => CompoundOp::UnionAll,
                p::CompoundOperator::Intersect => CompoundOp::Intersect,
                p::CompoundOperator::Except => CompoundOp::Except,
            };
            compounds.push((op, self.core(&c.select)?));
        }
        let mut order_by = Vec::new();
        for o in s.order_by.iter().flat_map(|o| o.iter()) {
            order_by.push(OrderTerm {
                expr: self.expr(&o.expr)?,
                desc: matches!(o.order, Some(p::SortOrder::Desc)),
                nulls_first: o.nulls.map(|n| matches!(n, p::NullsOrder::First)),
            });
        }
        let (limit, offset) = match s.limit {
            None => (None, None),
            Some(l) => (Some(self.expr(&l.expr)?), self.opt(l.offset.as_ref())?),
        };
        Ok(Select {
            with,
            first,
            compounds,
            order_by,
            limit,
            offset,
        })
    }

    fn core(&mut self, c: &p::OneSelect) -> Result<Core> {
        // A SELECT's named windows are in scope for its expressions (one may build on
        // another defined before it).
        let outer_windows = self.windows.len();
        if let p::OneSelect::Select {
            window_clause: Some(defs),
            ..
        } = c
        {
            for d in defs.iter() {
                let spec = self.window_spec(&d.window)?;
                self.windows.push((name(&d.name), spec));
            }
        }
        let core = self.core_body(c);
        self.windows.truncate(outer_windows);
        core
    }

    fn core_body(&mut self, c: &p::OneSelect) -> Result<Core> {
        match c {
            p::OneSelect::Values(rows) => Ok(Core::Values(
                rows.iter()
                    .map(|r| r.iter().map(|e| self.expr(e)).collect::<Result<_>>())
                    .collect::<Result<_>>()?,
            )),
            p::OneSelect::Select {
                distinctness,
                columns,
                from,
                where_clause,
                group_by,
                having,
                window_clause: _,
            } => {
                let mut cols = Vec::new();
                for rc in columns.iter() {
                    cols.push(match rc {
                        p::ResultColumn::Star => ResultColumn::Star,
                        p::ResultColumn::TableStar(n) => ResultColumn::TableStar(name(n)),
                        p::ResultColumn::Expr(e, alias) => {
                            // Converted first: past `MAX_DEPTH` it is refused before it is rendered.
                            let x = self.expr(e)?;
                            ResultColumn::Expr(x, self.result_alias(e, alias.as_ref()))
                        }
                    });
                }
                Ok(Core::Select {
                    distinct: matches!(distinctness, Some(p::Distinctness::Distinct)),
                    columns: cols,
                    from: from.as_ref().map(|f| self.from(f)).transpose()?,
                    where_: self.opt(*where_clause)?,
                    group_by: group_by
                        .iter()
                        .flat_map(|g| g.iter())
                        .map(|e| self.expr(e))
                        .collect::<Result<_>>()?,
                    having: self.opt(*having)?,
                    plan: PlanId::fresh(),
                })
            }
        }
    }

    /// An UPDATE's FROM clause as one join: the target table first, then FROM's items.
    fn update_from(&mut self, table: &str, f: Option<&p::FromClause>) -> Result<Option<From>> {
        let Some(f) = f else { return Ok(None) };
        let items = self.from(f)?;
        let mut joins = vec![Join {
            natural: false,
            left: false,
            right: false,
            table: items.first,
            on: None,
            using: Vec::new(),
        }];
        joins.extend(items.joins);
        Ok(Some(From {
            joins,
            ..From::table(table)
        }))
    }

    fn from(&mut self, f: &p::FromClause) -> Result<From> {
        let first = self.table_ref(f.select.ok_or_else(|| Error::syntax("empty FROM"))?)?;
        let mut joins = Vec::new();
        for j in f.joins.iter().flat_map(|j| j.iter()) {
            let (natural, left, right) = match j.operator {
                p::JoinOperator::Comma => (false, false, false),
                p::JoinOperator::TypedJoin(None) => (false, false, false),
                p::JoinOperator::TypedJoin(Some(t)) => (
                    t.contains(p::JoinType::NATURAL),
                    t.contains(p::JoinType::LEFT),
                    t.contains(p::JoinType::RIGHT),
                ),
            };
            let (on, using) = match &j.constraint {
                None => (None, Vec::new()),
                Some(p::JoinConstraint::On(e)) => (Some(self.expr(e)?), Vec::new()),
                Some(p::JoinConstraint::Using(names)) => (None, names.iter().map(name).collect()),
            };
            joins.push(Join {
                natural,
                left,
                right,
                table: self.table_ref(&j.table)?,
                on,
                using,
            });
        }
        Ok(nest_outer_joins(first, joins))
    }

    fn table_ref(&mut self, t: &p::SelectTable) -> Result<TableRef> {
        let alias = |a: &Option<p::As>| {
            a.as_ref().map(|a| match a {
                p::As::As(n) | p::As::Elided(n) => name(n),
            })
        };
        Ok(match t {
            p::SelectTable::Table(q, a, _) => TableRef::Table {
                name: qname(q)?,
                alias: alias(a).or_else(|| q.alias.as_ref().map(name)),
            },
            p::SelectTable::Select(sel, a) => TableRef::Subquery {
                select: Box::new(self.select(sel)?),
                alias: alias(a),
            },
            p::SelectTable::Sub(f, a) => {
                if a.is_some() {
                    return Err(unsupported("an alias on a parenthesized join"));
                }
                TableRef::Nested(Box::new(self.from(f)?))
            }
            p::SelectTable::TableCall(q, args, a) => {
                let fname = qname(q)?.to_ascii_lowercase();
                if !crate::json::is_table_function(&fname) {
                    return Err(Error::Sql(format!("no such table: {fname}")));
                }
                let args = args.iter().flat_map(|a| a.iter());
                TableRef::Function {
                    args: args.map(|e| self.expr(e)).collect::<Result<_>>()?,
                    name: fname,
                    alias: alias(a),
                }
            }
        })
    }

    fn param(&mut self, v: &str) -> Result<Expr> {
        if v.is_empty() {
            self.params.push(None);
            return Ok(Expr::Param(self.params.len()));
        }
        if let Ok(n) = v.parse::<usize>() {
            if n == 0 || n > 32766 {
                return Err(Error::Sql(
                    "variable number must be between ?1 and ?32766".into(),
                ));
            }
            if self.params.len() < n {
                self.params.resize(n, None);
            }
            return Ok(Expr::Param(n));
        }
        let full = v.to_string();
        if let Some(i) = self.params.iter().position(|p| p.as_deref() == Some(&full)) {
            return Ok(Expr::Param(i + 1));
        }
        self.params.push(Some(full));
        Ok(Expr::Param(self.params.len()))
    }

    fn expr(&mut self, e: &p::Expr) -> Result<Expr> {
        self.nested(|cx| cx.expr_at_depth(e))
    }

    fn expr_at_depth(&mut self, e: &p::Expr) -> Result<Expr> {
        Ok(match e {
            p::Expr::Literal(l) => Expr::Literal(literal(l)?),
            p::Expr::Id(id) => {
                let name = unquote(id.0);
                if id.0.starts_with('"') {
                    // A double-quoted name that names no column is a string (`Exec::column`).
                    self.quoted.push(name.clone());
                }
                Expr::Column { table: None, name }
            }
            p::Expr::Name(n) => Expr::Column {
                table: None,
                name: name(n),
            },
            p::Expr::Qualified(t, c) => Expr::Column {
                table: Some(name(t)),
                name: name(c),
            },
            p::Expr::DoublyQualified(_, t, c) => Expr::Column {
                table: Some(name(t)),
                name: name(c),
            },
            p::Expr::Variable(v) => {
                let v = *v;
                let (sigil, rest) = v.split_at(v.len().min(1));
                match sigil {
                    "?" => self.param(rest)?,
                    _ => self.param(v)?,
                }
            }
            p::Expr::Unary(op, e) => {
                let op = match op {
                    p::UnaryOperator::Negative => UnaryOp::Neg,
                    p::UnaryOperator::Positive => UnaryOp::Plus,
                    p::UnaryOperator::Not => UnaryOp::Not,
                    p::UnaryOperator::BitwiseNot => UnaryOp::BitNot,
                };
                // A negative number literal, including -9223372036854775808 and -0.0.
                if op == UnaryOp::Neg {
                    if let p::Expr::Literal(l @ p::Literal::Numeric(n)) = e {
                        if let Ok(i) = format!("-{n}").parse::<i64>() {
                            return Ok(Expr::Literal(Value::Integer(i)));
                        }
                        if let Value::Real(r) = literal(l)? {
                            return Ok(Expr::Literal(Value::Real(-r)));
                        }
                    }
                }
                Expr::Unary(op, self.boxed(e)?)
            }
            p::Expr::Binary(a, op @ (p::Operator::Is | p::Operator::IsNot), b)
                if truth_literal(b).is_some() =>
            {
                // `x IS [NOT] TRUE|FALSE` tests x's truth (2 IS TRUE), as SQLite's TK_TRUTH.
                let want = truth_literal(b) == Some(true);
                let holds = match want {
                    true => self.expr(a)?,
                    false => Expr::Unary(UnaryOp::Not, self.boxed(a)?),
                };
                let yes = i64::from(matches!(op, p::Operator::Is));
                Expr::Case {
                    base: None,
                    whens: vec![(holds, Expr::Literal(Value::Integer(yes)))],
                    else_: Some(Box::new(Expr::Literal(Value::Integer(1 - yes)))),
                }
            }
            p::Expr::Binary(a, op, b) => {
                let op = match op {
                    p::Operator::Add => BinOp::Add,
                    p::Operator::Subtract => BinOp::Sub,
                    p::Operator::Multiply => BinOp::Mul,
                    p::Operator::Divide => BinOp::Div,
                    p::Operator::Modulus => BinOp::Rem,
                    p::Operator::Concat => BinOp::Concat,
                    p::Operator::Equals => BinOp::Eq,
                    p::Operator::NotEquals => BinOp::Ne,
                    p::Operator::Less => BinOp::Lt,
                    p::Operator::LessEquals => BinOp::Le,
                    p::Operator::Greater => BinOp::Gt,
                    p::Operator::GreaterEquals => BinOp::Ge,
                    p::Operator::Is => BinOp::Is,
                    p::Operator::IsNot => BinOp::IsNot,
                    p::Operator::And => BinOp::And,
                    p::Operator::Or => BinOp::Or,
                    p::Operator::BitwiseAnd => BinOp::BitAnd,
                    p::Operator::BitwiseOr => BinOp::BitOr,
                    p::Operator::LeftShift => BinOp::Shl,
                    p::Operator::RightShift => BinOp::Shr,
                    p::Operator::ArrowRight | p::Operator::ArrowRightShift => {
                        let name = if matches!(op, p::Operator::ArrowRight) {
                            "->"
                        } else {
                            "->>"
                        };
                        return Ok(Expr::Function {
                            name: name.into(),
                            distinct: false,
                            args: vec![self.expr(a)?, self.expr(b)?],
                            star: false,
                            user: None,
                        });
                    }
                };
                Expr::Binary(op, self.boxed(a)?, self.boxed(b)?)
            }
            p::Expr::Between {
                lhs,
                not,
                start,
                end,
            } => Expr::Between {
                expr: self.boxed(lhs)?,
                not: *not,
                low: self.boxed(start)?,
                high: self.boxed(end)?,
                known: None,
            },
            p::Expr::Case {
                base,
                when_then_pairs,
                else_expr,
            } => Expr::Case {
                base: base.map(|b| self.boxed(b)).transpose()?,
                whens: when_then_pairs
                    .iter()
                    .map(|(w, t)| Ok((self.expr(w)?, self.expr(t)?)))
                    .collect::<Result<_>>()?,
                else_: else_expr.map(|e| self.boxed(e)).transpose()?,
            },
            p::Expr::Cast { expr, type_name } => Expr::Cast(
                self.boxed(expr)?,
                type_name.as_ref().map(|t| unquote(t.name)),
            ),
            p::Expr::Collate(e, n) => {
                let coll = match self.registry.collation(&unquote(n)) {
                    Some(c) => c,
                    None => collation(n)?,
                };
                Expr::Collate(self.boxed(e)?, coll)
            }
            p::Expr::Exists(sel) => Expr::Exists(Box::new(self.select(sel)?)),
            p::Expr::Subquery(sel) => Expr::Subquery(Box::new(self.select(sel)?)),
            p::Expr::FunctionCall {
                name: fname,
                distinctness,
                args,
                order_by,
                filter_over,
            } => {
                let args: Vec<Expr> = args
                    .iter()
                    .flat_map(|a| a.iter())
                    .map(|a| self.expr(a))
                    .collect::<Result<_>>()?;
                if order_by.is_some() {
                    return Err(unsupported("ORDER BY inside a function call"));
                }
                if let Some(tail) = filter_over {
                    let distinct = matches!(distinctness, Some(p::Distinctness::Distinct));
                    let name = unquote(fname.0).to_ascii_lowercase();
                    return self.window(name, args, (false, distinct), tail);
                }
                let name = unquote(fname.0).to_ascii_lowercase();
                if self.check_calls && self.registry.max_args.is_some_and(|m| args.len() > m) {
                    return Err(Error::Sql(format!("too many arguments on function {name}")));
                }
                let user = self.registry.function(&name, args.len()).cloned();
                if user.is_none() && self.check_calls {
                    crate::func::check_call(&name, args.len())?;
                }
                Expr::Function {
                    user,
                    name,
                    distinct: matches!(distinctness, Some(p::Distinctness::Distinct)),
                    args,
                    star: false,
                }
            }
            p::Expr::FunctionCallStar {
                name: fname,
                filter_over,
            } => {
                if let Some(tail) = filter_over {
                    let name = unquote(fname.0).to_ascii_lowercase();
                    return self.window(name, Vec::new(), (true, false), tail);
                }
                Expr::Function {
                    name: unquote(fname.0).to_ascii_lowercase(),
                    distinct: false,
                    args: Vec::new(),
                    star: true,
                    user: None,
                }
            }
            p::Expr::InList { lhs, not, rhs } => Expr::InList {
                expr: self.boxed(lhs)?,
                not: *not,
                list: rhs
                    .iter()
                    .flat_map(|r| r.iter())
                    .map(|e| self.expr(e))
                    .collect::<Result<_>>()?,
                sorted: Default::default(),
            },
            p::Expr::InSelect { lhs, not, rhs } => Expr::InSelect {
                expr: self.boxed(lhs)?,
                not: *not,
                select: Box::new(self.select(rhs)?),
            },
            p::Expr::InTable {
                lhs,
                not,
                rhs,
                args,
            } => {
                if args.is_some() {
                    return Err(unsupported("table-valued functions"));
                }
                // `x IN t` is `x IN (SELECT * FROM t)`.
                let select = Select {
                    with: Vec::new(),
                    first: Core::Select {
                        distinct: false,
                        columns: vec![ResultColumn::Star],
                        from: Some(From {
                            first: TableRef::Table {
                                name: qname(rhs)?,
                                alias: None,
                            },
                            joins: Vec::new(),
                        }),
                        where_: None,
                        group_by: Vec::new(),
                        having: None,
                        plan: PlanId::fresh(),
                    },
                    compounds: Vec::new(),
                    order_by: Vec::new(),
                    limit: None,
                    offset: None,
                };
                Expr::InSelect {
                    expr: self.boxed(lhs)?,
                    not: *not,
                    select: Box::new(select),
                }
            }
            p::Expr::IsNull(e) => Expr::IsNull(self.boxed(e)?, false),
            p::Expr::NotNull(e) => Expr::IsNull(self.boxed(e)?, true),
            p::Expr::Like {
                lhs,
                not,
                op,
                rhs,
                escape,
            } => {
                let glob = match op {
                    p::LikeOperator::Like => false,
                    p::LikeOperator::Glob => true,
                    p::LikeOperator::Match | p::LikeOperator::Regexp => {
                        return Err(unsupported("MATCH and REGEXP"))
                    }
                };
                Expr::Like {
                    expr: self.boxed(lhs)?,
                    not: *not,
                    glob,
                    pattern: self.boxed(rhs)?,
                    escape: escape.map(|e| self.boxed(e)).transpose()?,
                }
            }
            p::Expr::Parenthesized(list) => {
                if list.len() == 1 {
                    self.expr(&list[0])?
                } else {
                    Expr::Row(list.iter().map(|e| self.expr(e)).collect::<Result<_>>()?)
                }
            }
            p::Expr::Raise(kind, msg) => {
                let kind = match kind {
                    p::ResolveType::Ignore => RaiseKind::Ignore,
                    p::ResolveType::Rollback => RaiseKind::Rollback,
                    p::ResolveType::Fail => RaiseKind::Fail,
                    _ => RaiseKind::Abort,
                };
                let msg = match msg {
                    Some(p::Expr::Literal(l)) => Some(literal(l)?.to_text()),
                    Some(_) => return Err(Error::syntax("RAISE takes a string")),
                    None => None,
                };
                Expr::Raise(kind, msg)
            }
        })
    }
}

fn foreign_key(c: &p::ForeignKeyClause) -> ForeignKeyDef {
    let act = |a: &p::RefAct| match a {
        p::RefAct::SetNull => RefAction::SetNull,
        p::RefAct::SetDefault => RefAction::SetDefault,
        p::RefAct::Cascade => RefAction::Cascade,
        p::RefAct::Restrict => RefAction::Restrict,
        p::RefAct::NoAction => RefAction::NoAction,
    };
    let (mut on_delete, mut on_update) = (RefAction::NoAction, RefAction::NoAction);
    for a in c.args {
        match a {
            p::RefArg::OnDelete(x) => on_delete = act(x),
            p::RefArg::OnUpdate(x) => on_update = act(x),
            _ => {}
        }
    }
    ForeignKeyDef {
        parent: name(&c.tbl_name),
        parent_columns: c
            .columns
            .iter()
            .flat_map(|cs| cs.iter())
            .map(|c| name(&c.col_name))
            .collect(),
        on_delete,
        on_update,
    }
}

fn drop(kind: ObjectKind, n: &p::QualifiedName, if_exists: bool) -> Result<Stmt> {
    Ok(Stmt::Drop {
        kind,
        name: qname(n)?,
        if_exists,
    })
}

fn literal(l: &p::Literal) -> Result<Value> {
    Ok(match l {
        p::Literal::Numeric(n) => numeric_literal(n)?,
        p::Literal::String(s) => Value::text(&unquote(s)),
        p::Literal::Blob(hex) => {
            let hex = hex.trim_start_matches(['x', 'X']).trim_matches('\'');
            if hex.len() % 2 != 0 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(Error::syntax(format!("malformed blob literal X'{hex}'")));
            }
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex digits"))
                .collect::<Vec<u8>>();
            Value::Blob(bytes.into())
        }
        p::Literal::Keyword(k) => Value::text(k),
        p::Literal::Null => Value::Null,
        p::Literal::CurrentDate => crate::func::current("date"),
        p::Literal::CurrentTime => crate::func::current("time"),
        p::Literal::CurrentTimestamp => crate::func::current("datetime"),
    })
}

fn numeric_literal(n: &str) -> Result<Value> {
    let n = n.replace('_', "");
    if let Some(hex) = n.strip_prefix("0x").or_else(|| n.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16)
            .map(|v| Value::Integer(v as i64))
            .map_err(|_| Error::Sql(format!("hex literal too big: {n}")));
    }
    if let Ok(i) = n.parse::<i64>() {
        return Ok(Value::Integer(i));
    }
    // Checked as Rust reads numbers, converted as SQLite's sqlite3AtoF converts them (its
    // double-double arithmetic is off the nearest double by a unit now and then).
    n.parse::<f64>()
        .map(|_| Value::Real(crate::printf::sqlite_atof(&n)))
        .map_err(|_| Error::syntax(format!("malformed number {n}")))
}
