//! JSON functions (json1.html): `json`, `json_valid`, `json_array`, `json_object`,
//! `json_extract`, `json_type`, `json_array_length`, `json_set`, `json_insert`,
//! `json_replace`, `json_remove`, `json_patch`, `json_quote`, `json_pretty`, the aggregates
//! `json_group_array` and `json_group_object` (their state: [`JsonAgg`]), and the `->` /
//! `->>` operators, over JSON held as text, and the table functions `json_each` and
//! `json_tree`.
//!
//! Owns: paths (parsed into [`Step`]s, looked up and edited), the conversions between JSON
//! and SQL values, and each thread's last documents (parsed, or read by a path through their
//! text while they are read by few paths: [`read_by_path`]). May call: `tree` (the parsed
//! document), `value`, `printf`, `ast` (which expressions make JSON). Arguments that are
//! themselves JSON (the result of a JSON function) are embedded as JSON, not as strings:
//! the caller says which (SQLite's subtype; see [`Made`]).

use crate::ast::Expr;
use crate::error::{Error, Result};
use crate::printf::sqlite_atof;
use crate::value::Value;
use compact_str::ToCompactString;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use tree::{Node, Num, Text};

mod tree;

/// How the expression that gave an argument makes its value: plain SQL, JSON (a JSON
/// function's result, embedded as JSON), or `json_extract`'s result (JSON when it is an
/// array or object).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Made {
    Sql,
    Json,
    Extracted,
}

impl Made {
    pub fn by(e: &Expr) -> Made {
        match e {
            Expr::Function { name, .. } if returns_json(name) => Made::Json,
            Expr::Function { name, .. } if name == "json_extract" || name == "->>" => {
                Made::Extracted
            }
            // A scalar subquery's value keeps its subtype, as in SQLite.
            Expr::Subquery(sel) if sel.compounds.is_empty() => match &sel.first {
                crate::ast::Core::Select { columns, .. } => match columns.as_slice() {
                    [crate::ast::ResultColumn::Expr(e, _)] => Made::by(e),
                    _ => Made::Sql,
                },
                crate::ast::Core::Values(_) => Made::Sql,
            },
            _ => Made::Sql,
        }
    }

    /// Whether `v`, made this way, is embedded as JSON.
    pub fn is_json(self, v: &Value) -> bool {
        match self {
            Made::Sql => false,
            Made::Json => true,
            Made::Extracted => matches!(v, Value::Text(t) if t.starts_with(['[', '{'])),
        }
    }
}

/// The running state of `json_group_array` (values) or `json_group_object` (pairs).
pub enum JsonAgg {
    Array(Vec<Node>, Made),
    Object(Vec<(Text, Node)>, Made),
}

impl JsonAgg {
    pub fn new(name: &str, args: &[Expr]) -> JsonAgg {
        match name {
            "json_group_object" => {
                JsonAgg::Object(Vec::new(), args.get(1).map_or(Made::Sql, Made::by))
            }
            _ => JsonAgg::Array(Vec::new(), args.first().map_or(Made::Sql, Made::by)),
        }
    }

    pub fn step(&mut self, args: &[Value]) -> Result<()> {
        let a = |i: usize| args.get(i).cloned().unwrap_or(Value::Null);
        match self {
            JsonAgg::Array(items, made) => items.push(to_json(&a(0), made.is_json(&a(0)))?),
            // A NULL label adds nothing, as in SQLite.
            JsonAgg::Object(_, _) if a(0).is_null() => {}
            JsonAgg::Object(members, made) => {
                members.push((
                    Text::raw(&a(0).to_text()),
                    to_json(&a(1), made.is_json(&a(1)))?,
                ));
            }
        }
        Ok(())
    }

    pub fn finish(&mut self) -> Value {
        Value::from(match self {
            JsonAgg::Array(items, _) => Node::Array(std::mem::take(items)).to_json(),
            JsonAgg::Object(members, _) => Node::Object(std::mem::take(members)).to_json(),
        })
    }
}

/// One step of a JSON path.
#[derive(Debug, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
    /// `[#-n]`: the element `n` from the end.
    FromEnd(usize),
    /// `[#]`: one past the last element (where an edit appends).
    Append,
}

/// Parses a path (`$`, then `.key`, `."key"`, `[n]`, `[#-n]`, `[#]`), with SQLite's error.
fn steps(path: &str) -> Result<Vec<Step>> {
    let near = |_: &str| Error::Sql(format!("bad JSON path: '{path}'"));
    let mut rest = path.strip_prefix('$').ok_or_else(|| near(path))?;
    let mut out = Vec::new();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let (key, after) = if let Some(q) = r.strip_prefix('"') {
                let end = q.find('"').ok_or_else(|| near(rest))?;
                (&q[..end], &q[end + 1..])
            } else {
                let end = r.find(['.', '[']).unwrap_or(r.len());
                if end == 0 {
                    return Err(near(rest));
                }
                (&r[..end], &r[end..])
            };
            out.push(Step::Key(key.to_string()));
            rest = after;
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']').ok_or_else(|| near(rest))?;
            let idx = r[..end].trim();
            out.push(match idx.strip_prefix('#') {
                Some("") => Step::Append,
                Some(back) => match back.strip_prefix('-').map(str::parse) {
                    Some(Ok(n)) => Step::FromEnd(n),
                    _ => return Err(near(rest)),
                },
                None => Step::Index(idx.parse().map_err(|_| near(rest))?),
            });
            rest = &r[end + 1..];
        } else {
            return Err(near(rest));
        }
    }
    Ok(out)
}

/// Where `step` leads in `arr`: an element's index, or `len` for one past the end.
fn array_index(arr: &[Node], step: &Step) -> Option<usize> {
    match step {
        Step::Index(i) => Some(*i),
        Step::FromEnd(n) => arr.len().checked_sub(*n),
        Step::Append => Some(arr.len()),
        Step::Key(_) => None,
    }
}

/// Where `key` is among `members`: the first member of that name, as in SQLite.
fn member(members: &[(Text, Node)], key: &Text) -> Option<usize> {
    members.iter().position(|(label, _)| label.same(key))
}

/// A path's key as a label: what it says, its escapes read as JSON's.
fn path_key(k: &str) -> Text {
    match k.contains('\\') {
        true => Text {
            text: k.into(),
            esc: tree::Esc::Json5,
        },
        false => Text::raw(k),
    }
}

fn child<'a>(cur: &'a Node, step: &Step) -> Option<&'a Node> {
    match (cur, step) {
        (Node::Object(m), Step::Key(k)) => Some(&m[member(m, &path_key(k))?].1),
        (Node::Array(a), s) => a.get(array_index(a, s)?),
        _ => None,
    }
}

fn child_mut<'a>(cur: &'a mut Node, step: &Step) -> Option<&'a mut Node> {
    match (cur, step) {
        (Node::Object(m), Step::Key(k)) => {
            let i = member(m, &path_key(k))?;
            Some(&mut m[i].1)
        }
        (Node::Array(a), s) => {
            let i = array_index(a, s)?;
            a.get_mut(i)
        }
        _ => None,
    }
}

/// What an edit does where its path leads: replace what is there, add what is not, or both.
#[derive(Clone, Copy, PartialEq)]
enum Edit {
    Insert,
    Replace,
    Set,
}

/// The value a missing path `rest` (not empty) leads to: objects and arrays made on the way.
fn substructure(rest: &[Step], value: Node) -> Option<Node> {
    let Some((first, more)) = rest.split_first() else {
        return Some(value);
    };
    let inner = substructure(more, value)?;
    match first {
        Step::Key(k) => Some(Node::Object(vec![(path_key(k), inner)])),
        Step::Index(0) | Step::Append => Some(Node::Array(vec![inner])),
        _ => None,
    }
}

/// Applies `edit` of `value` at `path` in `root`; a path whose parent is missing is made
/// (objects for keys, an array for `[0]` or `[#]`) by an insert or a set.
fn edit_at(root: &mut Node, path: &[Step], edit: Edit, value: Node) {
    let Some((last, parents)) = path.split_last() else {
        if edit != Edit::Insert {
            *root = value;
        }
        return;
    };
    let mut cur = root;
    for (k, step) in parents.iter().enumerate() {
        if child(cur, step).is_none() {
            if edit == Edit::Replace {
                return;
            }
            if let Some(made) = substructure(&path[k + 1..], value) {
                add(cur, step, made);
            }
            return;
        }
        cur = child_mut(cur, step).expect("present");
    }
    match child_mut(cur, last) {
        Some(there) if edit != Edit::Insert => *there = value,
        Some(_) => {}
        None if edit != Edit::Replace => add(cur, last, value),
        None => {}
    }
}

/// Adds `value` to `cur` at a `step` that is not there: a key of an object, or the end of
/// an array.
fn add(cur: &mut Node, step: &Step, value: Node) {
    match (cur, step) {
        (Node::Object(m), Step::Key(k)) => m.push((path_key(k), value)),
        (Node::Array(a), s) if array_index(a, s) == Some(a.len()) => a.push(value),
        _ => {}
    }
}

/// Removes what `path` leads to; false when the path is `$` (nothing is left).
fn remove_at(root: &mut Node, path: &[Step]) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    let mut cur = root;
    for step in parents {
        match child_mut(cur, step) {
            Some(c) => cur = c,
            None => return true,
        }
    }
    match (cur, last) {
        (Node::Object(m), Step::Key(k)) => {
            if let Some(i) = member(m, &path_key(k)) {
                m.remove(i);
            }
        }
        (Node::Array(a), s) => {
            if let Some(i) = array_index(a, s).filter(|&i| i < a.len()) {
                a.remove(i);
            }
        }
        _ => {}
    }
    true
}

/// RFC 7396's merge patch, as `json_patch` applies it.
/// (Of a key the target repeats, the first is patched.)
fn merge_patch(target: &mut Node, patch: Node) {
    let Node::Object(patch) = patch else {
        *target = patch;
        return;
    };
    if !matches!(target, Node::Object(_)) {
        *target = Node::Object(Vec::new());
    }
    let Node::Object(t) = target else {
        unreachable!()
    };
    for (k, v) in patch {
        match (member(t, &k), v) {
            (Some(i), Node::Null) => drop(t.remove(i)),
            (None, Node::Null) => {}
            (Some(i), v) => merge_patch(&mut t[i].1, v),
            (None, v) => {
                let mut added = Node::Null;
                merge_patch(&mut added, v);
                t.push((k, added));
            }
        }
    }
}

fn malformed() -> Error {
    Error::Sql("malformed JSON".into())
}

/// A document this thread keeps, by its text: its tree once parsed, and how many times a
/// path was read in it ([`read_by_path`]).
struct Kept {
    text: Arc<str>,
    tree: Option<Rc<Node>>,
    path_reads: u32,
}

/// The documents this thread read last, and how often the last one to go was read by paths.
#[derive(Default)]
struct Documents {
    /// The most recently read first.
    kept: Vec<Kept>,
    /// The path reads of the last document dropped from `kept`: a statement reads each
    /// row's document about as often as the row before's.
    reads_lately: u32,
}

impl Documents {
    /// The kept document of this text, moved to the front.
    fn find(&mut self, text: &Arc<str>) -> Option<&mut Kept> {
        let i = self
            .kept
            .iter()
            .position(|k| Arc::ptr_eq(&k.text, text) || *k.text == **text)?;
        let hit = self.kept.remove(i);
        self.kept.insert(0, hit);
        self.kept.first_mut()
    }

    fn keep(&mut self, kept: Kept) {
        self.kept.insert(0, kept);
        if self.kept.len() > PARSED_KEPT {
            self.reads_lately = self.kept.pop().map_or(0, |gone| gone.path_reads);
        }
    }
}

thread_local! {
    static DOCUMENTS: RefCell<Documents> = RefCell::new(Documents::default());
}

/// How many documents a thread keeps, and the longest kept.
const PARSED_KEPT: usize = 4;
const PARSED_LONGEST: usize = 64 << 10;
/// How many times a path may be followed through a document's text before it is parsed
/// whole and kept. Following one costs about a third of parsing the document and dropping
/// its tree (a 600-byte document: 11,000 instructions against 30,000), and a lookup in a
/// kept tree next to nothing: so a document read by one or two paths is read through, one
/// read by more is parsed.
const PATH_READS: u32 = 2;

fn text_of(v: &Value) -> Arc<str> {
    match v {
        Value::Text(t) => t.clone(),
        other => other.to_text().into(),
    }
}

/// `v` parsed. The last few documents parsed on this thread are kept by their text, so that
/// a statement that reads one document several times (several paths, or one document for
/// every row) parses it once, as SQLite's JSON cache does.
fn parsed(v: &Value) -> Result<Rc<Node>> {
    let text = text_of(v);
    let parse =
        || -> Result<Rc<Node>> { Ok(Rc::new(tree::parse(&text).ok_or_else(malformed)?.node)) };
    DOCUMENTS.with(|docs| {
        let mut docs = docs.borrow_mut();
        match docs.find(&text) {
            Some(Kept {
                tree: Some(tree), ..
            }) => Ok(tree.clone()),
            Some(kept) => Ok(kept.tree.insert(parse()?).clone()),
            None => {
                let tree = parse()?;
                if text.len() <= PARSED_LONGEST {
                    docs.keep(Kept {
                        text: text.clone(),
                        tree: Some(tree.clone()),
                        path_reads: 0,
                    });
                }
                Ok(tree)
            }
        }
    })
}

/// Whether to follow a path through `text` rather than look it up in its parsed tree
/// (counting the read): while the document has been read by no more than [`PATH_READS`]
/// paths, unless the documents before it were read by more (then it is parsed at once); and
/// always when it is too long to be kept.
fn read_by_path(text: &Arc<str>) -> bool {
    if text.len() > PARSED_LONGEST {
        return true;
    }
    DOCUMENTS.with(|docs| {
        let mut docs = docs.borrow_mut();
        let few = docs.reads_lately <= PATH_READS;
        match docs.find(text) {
            Some(kept) => {
                kept.path_reads += 1;
                kept.tree.is_none() && few && kept.path_reads <= PATH_READS
            }
            None => {
                docs.keep(Kept {
                    text: text.clone(),
                    tree: None,
                    path_reads: 1,
                });
                few
            }
        }
    })
}

/// Runs `f` on the value at `path` in document `v` (`None` when there is none): found by
/// following the path through the document's text, which builds that value alone (see
/// [`read_by_path`]), or in its kept tree.
fn with_value_at<R>(
    v: &Value,
    path: &str,
    f: impl FnOnce(Option<&Node>) -> Result<R>,
) -> Result<R> {
    let text = text_of(v);
    match read_by_path(&text).then(|| seek_steps(path)).flatten() {
        Some(seek) => f(tree::extract(&text, &seek).ok_or_else(malformed)?.as_ref()),
        None => f(at(&*parsed(v)?, path)?),
    }
}

/// `path` as steps [`tree::extract`] follows; `None` for the whole document (`$`), a path
/// with steps from an array's end, or a bad path (whose error comes after the document's):
/// those go through the tree.
fn seek_steps(path: &str) -> Option<Vec<tree::Seek>> {
    let steps = steps(path).ok().filter(|s| !s.is_empty())?;
    steps
        .into_iter()
        .map(|step| match step {
            Step::Key(k) => Some(tree::Seek::Key(path_key(&k))),
            Step::Index(i) => Some(tree::Seek::Index(i)),
            Step::FromEnd(_) | Step::Append => None,
        })
        .collect()
}

/// For the JSON fuzz target: whether the value at `path` in `doc` is the same read through
/// the text as looked up in the whole parse (and the document refused by both or neither),
/// whatever a thread's kept documents would choose; `Err` says how they differ. A path that
/// is not read through the text agrees.
#[doc(hidden)]
pub fn check_path_read(doc: &str, path: &str) -> std::result::Result<(), String> {
    let Some(seek) = seek_steps(path) else {
        return Ok(());
    };
    let through = tree::extract(doc, &seek).map(|found| found.map(|n| n.to_json()));
    let whole = tree::parse(doc).map(|p| at(&p.node, path).ok().flatten().map(Node::to_json));
    match through == whole {
        true => Ok(()),
        false => Err(format!(
            "{path} in {doc:?}: {through:?} through the text, {whole:?} in the tree"
        )),
    }
}

/// `v` parsed, to be changed.
fn parse(v: &Value) -> Result<Node> {
    Ok(Node::clone(&*parsed(v)?))
}

/// An SQL value as JSON: numbers as numbers, NULL as null, text as a string unless
/// `is_json` (then parsed), blobs refused.
pub fn to_json(v: &Value, is_json: bool) -> Result<Node> {
    Ok(match v {
        Value::Null => Node::Null,
        Value::Integer(i) => Node::Num(Num::Int, i.to_compact_string()),
        // As SQLite writes it, `%!0.15g` (an infinity as 9.0e+999).
        Value::Real(r) => {
            let text = crate::printf::printf(&[Value::from("%!0.15g"), Value::Real(*r)]);
            Node::Num(Num::Real, text.to_text().into())
        }
        Value::Text(_) if is_json => parse(v)?,
        Value::Text(t) => Node::Str(Text::raw(t)),
        Value::Blob(_) => return Err(Error::Sql("JSON cannot hold BLOB values".into())),
    })
}

/// An SQL value as `json_set`, `json_insert` and `json_replace` store it (SQLite's
/// `jsonFunctionArgToBlob`): as [`to_json`], but an infinity is `9e999`.
fn edit_value(v: &Value, is_json: bool) -> Result<Node> {
    match v {
        Value::Real(r) if r.is_infinite() => {
            let text = if *r < 0.0 { "-9e999" } else { "9e999" };
            Ok(Node::Num(Num::Real, text.into()))
        }
        other => to_json(other, is_json),
    }
}

/// A JSON value as SQL: strings as TEXT, numbers as INTEGER or REAL, true and false as 1
/// and 0, null as NULL, arrays and objects as their JSON text.
fn to_sql(j: &Node) -> Result<Value> {
    Ok(match j {
        Node::Null => Value::Null,
        Node::True => Value::Integer(1),
        Node::False => Value::Integer(0),
        Node::Num(Num::Int | Num::Hex, text) => integer(text)?,
        Node::Num(Num::Real | Num::Real5, text) => Value::Real(sqlite_atof(text)),
        Node::Str(t) => Value::from(t.value()),
        other => Value::from(other.to_json()),
    })
}

/// An integer's text as SQLite reads it (`sqlite3DecOrHexToI64`): past 64 bits a decimal
/// is read as a real; a hexadecimal of more than 16 digits is malformed.
fn integer(text: &str) -> Result<Value> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        let hex = hex.trim_start_matches('0');
        if hex.len() > 16 {
            return Err(malformed());
        }
        let u = u64::from_str_radix(hex, 16).unwrap_or(0) as i64;
        return Ok(Value::Integer(if negative { u.wrapping_neg() } else { u }));
    }
    Ok(match digits.parse::<u64>() {
        Ok(u) if u <= i64::MAX as u64 => {
            Value::Integer(if negative { -(u as i64) } else { u as i64 })
        }
        Ok(u) if negative && u == 1 << 63 => Value::Integer(i64::MIN),
        _ => Value::Real(sqlite_atof(text)),
    })
}

/// The element of `root` at path `path`.
fn at<'a>(root: &'a Node, path: &str) -> Result<Option<&'a Node>> {
    let mut cur = root;
    for step in steps(path)? {
        match child(cur, &step) {
            Some(c) => cur = c,
            None => return Ok(None),
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
            Value::from(parsed(&a(0))?.to_json())
        }
        "json_valid" => {
            // Flags (SQLite's): 1 RFC 8259 JSON, 2 JSON5, 4 and 8 JSONB (never valid here).
            let flags = match args.get(1) {
                None => 1,
                Some(f) => match f.as_i64() {
                    f @ 1..=15 => f,
                    _ => {
                        return Err(Error::Sql(
                            "FLAGS parameter to json_valid() must be between 1 and 15".into(),
                        ))
                    }
                },
            };
            if a(0).is_null() {
                return Ok(Value::Null);
            }
            let valid = match tree::parse(&a(0).to_text()) {
                Some(p) => flags & 2 != 0 || (flags & 1 != 0 && !p.nonstandard),
                None => false,
            };
            Value::Integer(valid as i64)
        }
        "json_array" => {
            let items = args
                .iter()
                .zip(is_json)
                .map(|(v, &j)| to_json(v, j))
                .collect::<Result<Vec<Node>>>()?;
            Value::from(Node::Array(items).to_json())
        }
        "json_object" => {
            if !args.len().is_multiple_of(2) {
                return Err(Error::Sql(
                    "json_object() requires an even number of arguments".into(),
                ));
            }
            let mut members = Vec::new();
            for i in (0..args.len()).step_by(2) {
                let Value::Text(k) = &args[i] else {
                    return Err(Error::Sql("json_object() labels must be TEXT".into()));
                };
                members.push((Text::raw(k), to_json(&args[i + 1], is_json[i + 1])?));
            }
            Value::from(Node::Object(members).to_json())
        }
        "json_extract" | "->>" | "->" => {
            if a(0).is_null() {
                return Ok(Value::Null);
            }
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
                with_value_at(&a(0), &paths[0], |found| match found {
                    None => Ok(Value::Null),
                    Some(j) if name == "->" => Ok(Value::from(j.to_json())),
                    Some(j) => to_sql(j),
                })?
            } else {
                let root = parsed(&a(0))?;
                let found = paths
                    .iter()
                    .map(|p| Ok(at(&root, p)?.cloned().unwrap_or(Node::Null)))
                    .collect::<Result<Vec<Node>>>()?;
                Value::from(Node::Array(found).to_json())
            }
        }
        "json_type" | "json_array_length" => {
            if a(0).is_null() {
                return Ok(Value::Null);
            }
            let path = if args.len() > 1 {
                a(1).to_text()
            } else {
                "$".into()
            };
            with_value_at(&a(0), &path, |found| {
                Ok(match (found, name) {
                    (None, _) => Value::Null,
                    (Some(Node::Array(items)), "json_array_length") => {
                        Value::Integer(items.len() as i64)
                    }
                    (Some(_), "json_array_length") => Value::Integer(0),
                    (Some(j), _) => Value::from(type_name(j)),
                })
            })?
        }
        "json_set" | "json_insert" | "json_replace" => {
            if args.len().is_multiple_of(2) {
                return Err(Error::Sql(format!(
                    "{name}() needs an odd number of arguments"
                )));
            }
            if a(0).is_null() {
                return Ok(Value::Null);
            }
            let edit = match name {
                "json_set" => Edit::Set,
                "json_insert" => Edit::Insert,
                _ => Edit::Replace,
            };
            let mut root = parse(&a(0))?;
            for i in (1..args.len()).step_by(2) {
                if args[i].is_null() {
                    continue;
                }
                let path = steps(&args[i].to_text())?;
                edit_at(
                    &mut root,
                    &path,
                    edit,
                    edit_value(&args[i + 1], is_json[i + 1])?,
                );
            }
            Value::from(root.to_json())
        }
        "json_remove" => {
            if a(0).is_null() {
                return Ok(Value::Null);
            }
            let mut root = parse(&a(0))?;
            for p in &args[1..] {
                if p.is_null() {
                    continue;
                }
                if !remove_at(&mut root, &steps(&p.to_text())?) {
                    return Ok(Value::Null);
                }
            }
            Value::from(root.to_json())
        }
        "json_patch" => {
            if a(0).is_null() || a(1).is_null() {
                return Ok(Value::Null);
            }
            let mut target = parse(&a(0))?;
            merge_patch(&mut target, parse(&a(1))?);
            Value::from(target.to_json())
        }
        "json_quote" => Value::from(to_json(&a(0), is_json.first() == Some(&true))?.to_json()),
        "json_pretty" => {
            if a(0).is_null() {
                return Ok(Value::Null);
            }
            let indent = match args.get(1) {
                None | Some(Value::Null) => "    ".to_string(),
                Some(v) => v.to_text(),
            };
            let mut out = String::new();
            parsed(&a(0))?.write_pretty(&indent, 0, &mut out);
            Value::from(out)
        }
        _ => return Err(Error::Sql(format!("no such function: {name}"))),
    })
}

/// Whether `name` is a table-valued function.
pub fn is_table_function(name: &str) -> bool {
    matches!(name, "json_each" | "json_tree")
}

/// The columns of `json_each` and `json_tree`: the last two are hidden (not in `*`).
pub const TABLE_COLUMNS: [&str; 10] = [
    "key", "value", "type", "atom", "id", "parent", "fullkey", "path", "json", "root",
];

fn type_name(j: &Node) -> &'static str {
    match j {
        Node::Null => "null",
        Node::True => "true",
        Node::False => "false",
        Node::Num(Num::Int | Num::Hex, _) => "integer",
        Node::Num(..) => "real",
        Node::Str(_) => "text",
        Node::Array(_) => "array",
        Node::Object(_) => "object",
    }
}

/// `.key` as SQLite writes it in a full key: quoted unless a letter then letters and digits.
fn key_step(k: &str) -> String {
    let mut chars = k.chars();
    let plain = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric());
    match plain {
        true => format!(".{k}"),
        false => format!(".\"{k}\""),
    }
}

/// The rows of `json_each` (the children of the element at the path; the element itself
/// when it is not an array or object) or `json_tree` (the element and everything under it,
/// parents first) of `args` (the JSON, and a path, `$` when absent), in
/// [`TABLE_COLUMNS`]' order. `id` numbers the elements in document order from 1 (SQLite's
/// are positions in its own encoding).
pub fn table_rows(name: &str, args: &[Value]) -> Result<Vec<Vec<Value>>> {
    if args.len() > 2 {
        return Err(Error::Sql(format!(
            "too many arguments on {name}() - max 2"
        )));
    }
    let (Some(doc), root) = (args.first().filter(|v| !v.is_null()), args.get(1)) else {
        return Ok(Vec::new());
    };
    let root = match root {
        None => "$".to_string(),
        Some(Value::Null) => return Ok(Vec::new()),
        Some(p) => p.to_text(),
    };
    let document = parsed(doc)?;
    let Some(top) = at(&document, &root)? else {
        return Ok(Vec::new());
    };
    let mut rows = Rows {
        rows: Vec::new(),
        doc,
        root: &root,
    };
    if name == "json_each" {
        if !matches!(top, Node::Array(_) | Node::Object(_)) {
            rows.push(Value::Null, top, Value::Null, &root, &root)?;
        }
        for (key, c, fullkey) in children(top, &root) {
            rows.push(key, c, Value::Null, &fullkey, &root)?;
        }
        return Ok(rows.rows);
    }
    // json_tree: the element itself, then what is under it. Its path and key are cut from
    // the path as SQLite cuts them: at the last `.` or `[` where what is left leads to an
    // array or object whose first element this is, else after the `$`; the key is what
    // follows the cut, as written (`[#-1]` reads as the number 0).
    let cut = (1..root.len())
        .rev()
        .filter(|&n| matches!(root.as_bytes()[n], b'.' | b'['))
        .find(|&n| {
            let first = match at(&document, &root[..n]) {
                Ok(Some(Node::Array(a))) => a.first(),
                Ok(Some(Node::Object(m))) => m.first().map(|(_, v)| v),
                _ => None,
            };
            first.is_some_and(|f| std::ptr::eq(f, top))
        })
        .unwrap_or(root.len().min(1));
    let (parent_path, step) = root.split_at(cut);
    let key = match step.as_bytes() {
        [] => Value::Null,
        [b'[', index @ ..] => Value::Integer(crate::value::integer_prefix(index)),
        [_, b'"', quoted @ ..] => Value::from(
            String::from_utf8_lossy(&quoted[..quoted.len().saturating_sub(1)]).into_owned(),
        ),
        [_, name @ ..] => Value::from(String::from_utf8_lossy(name).into_owned()),
    };
    rows.tree(key, top, Value::Null, &root, parent_path)?;
    Ok(rows.rows)
}

/// The rows `table_rows` makes, and what each repeats.
struct Rows<'a> {
    rows: Vec<Vec<Value>>,
    doc: &'a Value,
    root: &'a str,
}

impl Rows<'_> {
    /// Adds the row of element `j`; returns its id.
    fn push(
        &mut self,
        key: Value,
        j: &Node,
        parent: Value,
        fullkey: &str,
        path: &str,
    ) -> Result<i64> {
        let id = self.rows.len() as i64 + 1;
        let (value, atom) = match j {
            Node::Array(_) | Node::Object(_) => (Value::from(j.to_json()), Value::Null),
            other => {
                let v = to_sql(other)?;
                (v.clone(), v)
            }
        };
        self.rows.push(vec![
            key,
            value,
            Value::from(type_name(j)),
            atom,
            Value::Integer(id),
            parent,
            Value::from(fullkey),
            Value::from(path),
            self.doc.clone(),
            Value::from(self.root),
        ]);
        Ok(id)
    }

    /// Adds the rows of `j` and of everything under it, depth first.
    fn tree(
        &mut self,
        key: Value,
        j: &Node,
        parent: Value,
        fullkey: &str,
        path: &str,
    ) -> Result<()> {
        let id = self.push(key, j, parent, fullkey, path)?;
        for (key, c, child_key) in children(j, fullkey) {
            self.tree(key, c, Value::Integer(id), &child_key, fullkey)?;
        }
        Ok(())
    }
}

/// The children of `j` at `fullkey`, each with its key and full key.
fn children<'j>(j: &'j Node, fullkey: &str) -> Vec<(Value, &'j Node, String)> {
    match j {
        Node::Array(a) => (a.iter().enumerate())
            .map(|(i, c)| (Value::Integer(i as i64), c, format!("{fullkey}[{i}]")))
            .collect(),
        Node::Object(m) => (m.iter())
            .map(|(k, c)| {
                (
                    Value::from(k.value()),
                    c,
                    format!("{fullkey}{}", key_step(&k.text)),
                )
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The scalar JSON functions [`call`] runs, each with whether its result is JSON (embedded
/// as such by others).
const SCALARS: [(&str, bool); 14] = [
    ("json", true),
    ("json_valid", false),
    ("json_array", true),
    ("json_object", true),
    ("json_extract", false),
    ("json_type", false),
    ("json_array_length", false),
    ("json_set", true),
    ("json_insert", true),
    ("json_replace", true),
    ("json_remove", true),
    ("json_patch", true),
    ("json_quote", true),
    ("json_pretty", false),
];

/// Whether `name` is a JSON function (or operator, or aggregate) whose result is JSON.
pub fn returns_json(name: &str) -> bool {
    matches!(name, "->" | "json_group_array" | "json_group_object")
        || SCALARS.iter().any(|&(n, json)| json && n == name)
}

pub fn is_json_function(name: &str) -> bool {
    SCALARS.iter().any(|&(n, _)| n == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Value {
        Value::from(s)
    }

    /// Documents read by one or two paths each are read through their text; once one is
    /// read by more, the next ones are parsed at their first read (and give the same values).
    #[test]
    fn documents_read_by_many_paths_are_parsed_at_once() {
        let doc = |i: usize| t(&format!(r#"{{"a":{i},"b":[{i}]}}"#));
        let read = |d: &Value, p: &str| call("json_extract", &[d.clone(), t(p)], &[false, false]);
        let fresh = |d: &Value| read_by_path(&text_of(d));
        for i in 0..10 {
            assert_eq!(read(&doc(i), "$.a").unwrap(), Value::Integer(i as i64));
        }
        assert!(
            fresh(&doc(100)),
            "a document read by one path is read through"
        );
        for i in 10..20 {
            for _ in 0..3 {
                assert_eq!(read(&doc(i), "$.b[0]").unwrap(), Value::Integer(i as i64));
            }
        }
        assert!(
            !fresh(&doc(200)),
            "documents read by three paths are parsed"
        );
        assert_eq!(read(&doc(200), "$.a").unwrap(), Value::Integer(200));
    }

    #[test]
    fn a_path_read_through_the_text_agrees_with_the_tree() {
        for doc in [
            r#"{"a":[1,{"b":"x"}]}"#,
            r#"{a:[1,{b:'x'}],}"#,
            r#"{"a":[1,"#,
            "[0,1]",
        ] {
            for path in ["$.a", "$.a[1].b", "$[0]", "$.a[#-1]", "bad"] {
                assert_eq!(check_path_read(doc, path), Ok(()), "{doc} {path}");
            }
        }
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
