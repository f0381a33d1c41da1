//! `beech sql DIR`: a shell like `sqlite3` over BeechDB's SQL layer. Interactive with line
//! editing and history, multi-line statements (a statement runs once it ends with `;`
//! outside quotes and comments, or `END;` for a trigger), dot commands (`.help` lists them),
//! output modes list / column / box / csv / json. One-shot with SQL on the command line, or
//! reading standard input: then the first error ends it with exit status 1.

use beechdb_sql::{Connection, Database, QueryResult, Value};
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    List,
    Column,
    Boxed,
    Csv,
    Json,
}

struct Shell {
    conn: Connection,
    mode: Mode,
    headers: bool,
    timer: bool,
    out: Box<dyn Write>,
}

const HELP: &str = "\
.dump ?TABLE?          SQL text that rebuilds the database (readable by sqlite3)
.exit, .quit           leave the shell
.headers on|off        show column names
.help                  this text
.import FILE TABLE     insert the rows of CSV file FILE into TABLE (created from the
                       header row if missing)
.indexes ?TABLE?       list indexes
.mode MODE             list | column | box | csv | json
.read FILE             run the SQL and dot commands in FILE
.schema ?PATTERN?      show CREATE statements
.tables ?PATTERN?      list tables and views
.timer on|off          show how long each statement took";

/// Whether `sql` holds at least one whole statement: it ends with `;` outside any string,
/// quoted name or comment (and, for CREATE TRIGGER, after its END).
pub fn is_complete(sql: &str) -> bool {
    let b = sql.as_bytes();
    let mut i = 0;
    let mut ended = false;
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let flush = |word: &mut String, words: &mut Vec<String>| {
        if !word.is_empty() {
            words.push(std::mem::take(word).to_ascii_uppercase());
        }
    };
    while i < b.len() {
        let c = b[i];
        match c {
            b'\'' | b'"' | b'`' | b'[' => {
                flush(&mut word, &mut words);
                let close = if c == b'[' { b']' } else { c };
                i += 1;
                while i < b.len() && b[i] != close {
                    i += 1;
                }
                if i >= b.len() {
                    return false;
                }
                ended = false;
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                if i + 1 >= b.len() {
                    return false;
                }
                i += 1;
            }
            b';' => {
                flush(&mut word, &mut words);
                let trigger = words.len() >= 2
                    && words[0] == "CREATE"
                    && words[1..words.len().min(4)].iter().any(|w| w == "TRIGGER");
                if !trigger || words.last().is_some_and(|w| w == "END") {
                    ended = true;
                    words.clear();
                } else {
                    ended = false;
                }
            }
            c if c.is_ascii_alphanumeric() || c == b'_' => {
                word.push(c as char);
                ended = false;
            }
            c if c.is_ascii_whitespace() => flush(&mut word, &mut words),
            _ => {
                flush(&mut word, &mut words);
                ended = false;
            }
        }
        i += 1;
    }
    ended
}

fn show(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        other => other.to_text(),
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn json_value(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Integer(i) => i.to_string(),
        Value::Real(r) if !r.is_finite() => "null".into(),
        Value::Real(_) => v.to_text(),
        Value::Text(_) | Value::Blob(_) => serde_json::to_string(&v.to_text()).unwrap_or_default(),
    }
}

/// A value as SQL text (for `.dump`).
fn sql_literal(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Integer(i) => i.to_string(),
        Value::Real(_) => v.to_text(),
        Value::Text(s) => format!("'{}'", s.replace('\'', "''")),
        Value::Blob(b) => format!(
            "X'{}'",
            b.iter().map(|x| format!("{x:02X}")).collect::<String>()
        ),
    }
}

impl Shell {
    fn print(&mut self, r: &QueryResult) -> std::io::Result<()> {
        if r.columns.is_empty() {
            return Ok(());
        }
        let cells: Vec<Vec<String>> = r
            .rows
            .iter()
            .map(|row| row.iter().map(show).collect())
            .collect();
        match self.mode {
            Mode::List => {
                if self.headers {
                    writeln!(self.out, "{}", r.columns.join("|"))?;
                }
                for row in &cells {
                    writeln!(self.out, "{}", row.join("|"))?;
                }
            }
            Mode::Csv => {
                if self.headers {
                    let h: Vec<String> = r.columns.iter().map(|c| csv_field(c)).collect();
                    writeln!(self.out, "{}", h.join(","))?;
                }
                for row in &r.rows {
                    let f: Vec<String> = row
                        .iter()
                        .map(|v| match v {
                            Value::Null => String::new(),
                            v => csv_field(&v.to_text()),
                        })
                        .collect();
                    writeln!(self.out, "{}", f.join(","))?;
                }
            }
            Mode::Json => {
                let rows: Vec<String> = r
                    .rows
                    .iter()
                    .map(|row| {
                        let fields: Vec<String> = r
                            .columns
                            .iter()
                            .zip(row)
                            .map(|(c, v)| {
                                format!(
                                    "{}:{}",
                                    serde_json::to_string(c).unwrap_or_default(),
                                    json_value(v)
                                )
                            })
                            .collect();
                        format!("{{{}}}", fields.join(","))
                    })
                    .collect();
                if !rows.is_empty() {
                    writeln!(self.out, "[{}]", rows.join(",\n"))?;
                }
            }
            Mode::Column | Mode::Boxed => {
                let mut widths: Vec<usize> = r.columns.iter().map(|c| c.chars().count()).collect();
                for row in &cells {
                    for (w, c) in widths.iter_mut().zip(row) {
                        *w = (*w).max(c.chars().count());
                    }
                }
                let line = |row: &[String], sep: &str, edge: bool| {
                    let parts: Vec<String> = row
                        .iter()
                        .zip(&widths)
                        .map(|(c, w)| format!("{c:<w$}"))
                        .collect();
                    if edge {
                        format!("{sep} {} {sep}", parts.join(&format!(" {sep} ")))
                    } else {
                        parts.join("  ")
                    }
                    .trim_end()
                    .to_string()
                };
                let boxed = self.mode == Mode::Boxed;
                let rule = |l: &str, m: &str, r: &str| {
                    let segs: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
                    format!("{l}{}{r}", segs.join(m))
                };
                if boxed {
                    writeln!(self.out, "{}", rule("┌", "┬", "┐"))?;
                }
                if self.headers || boxed {
                    writeln!(self.out, "{}", line(&r.columns, "│", boxed))?;
                    if boxed {
                        writeln!(self.out, "{}", rule("├", "┼", "┤"))?;
                    } else {
                        let dashes: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
                        writeln!(self.out, "{}", dashes.join("  "))?;
                    }
                }
                for row in &cells {
                    writeln!(self.out, "{}", line(row, "│", boxed))?;
                }
                if boxed {
                    writeln!(self.out, "{}", rule("└", "┴", "┘"))?;
                }
            }
        }
        Ok(())
    }

    /// Runs every statement of `sql`, printing results; stops at the first error.
    fn run_sql(&mut self, sql: &str) -> Res<()> {
        let mut rest = sql;
        while let Some((stmt, used)) = self.conn.prepare_first(rest)? {
            let started = Instant::now();
            let r = self.conn.run(&stmt, &[])?;
            self.print(&r)?;
            if self.timer {
                writeln!(
                    self.out,
                    "Run Time: real {:.3}",
                    started.elapsed().as_secs_f64()
                )?;
            }
            rest = &rest[used..];
        }
        Ok(())
    }

    fn query(&mut self, sql: &str) -> Res<QueryResult> {
        Ok(self.conn.query(sql, &[])?)
    }

    /// Runs a dot command; returns false to quit.
    fn dot(&mut self, line: &str) -> Res<bool> {
        let args: Vec<&str> = line.split_whitespace().collect();
        let arg = |i: usize| args.get(i).copied();
        let like = |p: Option<&str>| p.map_or("%".to_string(), |p| p.replace('\'', "''"));
        match args[0] {
            ".quit" | ".exit" => return Ok(false),
            ".help" => writeln!(self.out, "{HELP}")?,
            ".headers" => self.headers = matches!(arg(1), Some("on" | "1" | "yes")),
            ".timer" => self.timer = matches!(arg(1), Some("on" | "1" | "yes")),
            ".mode" => {
                self.mode = match arg(1) {
                    Some("list") => Mode::List,
                    Some("column") => Mode::Column,
                    Some("box") => Mode::Boxed,
                    Some("csv") => Mode::Csv,
                    Some("json") => Mode::Json,
                    other => {
                        return Err(format!(
                            "unknown mode {other:?}: list, column, box, csv or json"
                        )
                        .into())
                    }
                };
                if matches!(self.mode, Mode::Column | Mode::Boxed) {
                    self.headers = true;
                }
            }
            ".tables" => {
                let r = self.query(&format!(
                    "SELECT name FROM sqlite_schema WHERE type IN ('table','view') AND name LIKE '{}' ORDER BY 1",
                    like(arg(1))
                ))?;
                let names: Vec<String> = r.rows.iter().map(|row| show(&row[0])).collect();
                writeln!(self.out, "{}", names.join("  "))?;
            }
            ".indexes" | ".indices" => {
                let r = self.query(&format!(
                    "SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name LIKE '{}' ORDER BY 1",
                    like(arg(1))
                ))?;
                for row in &r.rows {
                    writeln!(self.out, "{}", show(&row[0]))?;
                }
            }
            ".schema" => {
                let r = self.query(&format!(
                    "SELECT sql FROM sqlite_schema WHERE sql IS NOT NULL AND name LIKE '{}' ORDER BY tbl_name, type DESC, name",
                    like(arg(1))
                ))?;
                for row in &r.rows {
                    writeln!(self.out, "{};", show(&row[0]))?;
                }
            }
            ".read" => {
                let file = arg(1).ok_or(".read needs a file")?;
                let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
                self.run_lines(text.lines().map(str::to_string), false)?;
            }
            ".import" => {
                let (Some(file), Some(table)) = (arg(1), arg(2)) else {
                    return Err(".import needs FILE and TABLE".into());
                };
                self.import(file, table)?;
            }
            ".dump" => self.dump(arg(1))?,
            other => return Err(format!("unknown command {other}: see .help").into()),
        }
        Ok(true)
    }

    fn import(&mut self, file: &str, table: &str) -> Res<()> {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
        let mut records = parse_csv(&text);
        if records.is_empty() {
            return Ok(());
        }
        let exists = !self
            .query(&format!(
                "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = '{}'",
                table.replace('\'', "''")
            ))?
            .rows
            .is_empty();
        let quoted = format!("\"{}\"", table.replace('"', "\"\""));
        if !exists {
            let header = records.remove(0);
            let cols: Vec<String> = header
                .iter()
                .map(|c| format!("\"{}\" TEXT", c.replace('"', "\"\"")))
                .collect();
            self.conn
                .execute(&format!("CREATE TABLE {quoted}({})", cols.join(", ")), &[])?;
        }
        let Some(n) = records.first().map(Vec::len) else {
            return Ok(());
        };
        let marks = vec!["?"; n].join(", ");
        let stmt = self
            .conn
            .prepare(&format!("INSERT INTO {quoted} VALUES({marks})"))?;
        self.conn.execute("BEGIN", &[])?;
        for (i, rec) in records.iter().enumerate() {
            if rec.len() != n {
                self.conn.execute("ROLLBACK", &[])?;
                return Err(format!(
                    "{file}: line {}: expected {n} fields, found {}",
                    i + 2,
                    rec.len()
                )
                .into());
            }
            let vals: Vec<Value> = rec.iter().map(|f| Value::from(f.as_str())).collect();
            if let Err(e) = self.conn.run(&stmt, &vals) {
                self.conn.execute("ROLLBACK", &[])?;
                return Err(format!("{file}: record {}: {e}", i + 1).into());
            }
        }
        self.conn.execute("COMMIT", &[])?;
        Ok(())
    }

    fn dump(&mut self, only: Option<&str>) -> Res<()> {
        writeln!(self.out, "PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;")?;
        let filter = only.map_or(String::new(), |t| {
            format!(" AND tbl_name = '{}'", t.replace('\'', "''"))
        });
        let tables = self.query(&format!(
            "SELECT name, sql FROM sqlite_schema WHERE type = 'table'{filter} ORDER BY name"
        ))?;
        for t in &tables.rows {
            let name = show(&t[0]);
            writeln!(self.out, "{};", show(&t[1]))?;
            let quoted = format!("\"{}\"", name.replace('"', "\"\""));
            let rows = self.query(&format!("SELECT * FROM {quoted}"))?;
            for row in &rows.rows {
                let vals: Vec<String> = row.iter().map(sql_literal).collect();
                writeln!(self.out, "INSERT INTO {quoted} VALUES({});", vals.join(","))?;
            }
        }
        let rest = self.query(&format!(
            "SELECT sql FROM sqlite_schema WHERE type IN ('index','view','trigger') AND sql IS NOT NULL{filter} ORDER BY type, name"
        ))?;
        for r in &rest.rows {
            writeln!(self.out, "{};", show(&r[0]))?;
        }
        writeln!(self.out, "COMMIT;")?;
        Ok(())
    }

    /// Runs lines of input: dot commands, and SQL gathered until complete. With `stop`,
    /// the first error is returned; otherwise errors are printed and the input goes on.
    fn run_lines(&mut self, lines: impl Iterator<Item = String>, stop: bool) -> Res<bool> {
        let mut pending = String::new();
        for line in lines {
            if pending.trim().is_empty() && line.trim_start().starts_with('.') {
                match self.dot(line.trim()) {
                    Ok(true) => continue,
                    Ok(false) => return Ok(false),
                    Err(e) if stop => return Err(e),
                    Err(e) => eprintln!("Error: {e}"),
                }
                continue;
            }
            pending.push_str(&line);
            pending.push('\n');
            if is_complete(&pending) {
                let sql = std::mem::take(&mut pending);
                if let Err(e) = self.run_sql(&sql) {
                    if stop {
                        return Err(e);
                    }
                    eprintln!("Error: {e}");
                }
            }
        }
        if !pending.trim().is_empty() {
            self.run_sql(&pending)?;
        }
        Ok(true)
    }
}

/// Records of CSV text (RFC 4180: quoted fields may hold commas, quotes and newlines).
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut records = Vec::new();
    let mut rec = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', true) => quoted = false,
            ('"', false) if field.is_empty() => quoted = true,
            (',', false) => rec.push(std::mem::take(&mut field)),
            ('\r', false) => {}
            ('\n', false) => {
                rec.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut rec));
            }
            (c, _) => field.push(c),
        }
    }
    if !field.is_empty() || !rec.is_empty() {
        rec.push(field);
        records.push(rec);
    }
    records
}

/// Runs the shell on the database at `path`: an existing file or environment directory, or
/// a new file, as sqlite3 makes one (and as BeechDB's libsqlite3 does).
pub fn run(path: &Path, sql: Option<String>) -> Res<ExitCode> {
    let db = match path.exists() {
        true => Database::open(path)?,
        false => Database::open_file(path)?,
    };
    let mut shell = Shell {
        conn: db.connect(),
        mode: Mode::List,
        headers: false,
        timer: false,
        out: Box::new(std::io::BufWriter::new(std::io::stdout())),
    };
    let stdin = std::io::stdin();
    let result = if let Some(sql) = sql {
        shell
            .run_lines(sql.lines().map(str::to_string), true)
            .map(drop)
    } else if !stdin.is_terminal() {
        let lines = stdin.lock().lines().map_while(Result::ok);
        shell.run_lines(lines, true).map(drop)
    } else {
        interactive(&mut shell)
    };
    let _ = shell.out.flush();
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => {
            eprintln!("Error: {e}");
            Ok(ExitCode::from(1))
        }
    }
}

fn interactive(shell: &mut Shell) -> Res<()> {
    use rustyline::error::ReadlineError;
    let mut editor = rustyline::DefaultEditor::new()?;
    let history = std::env::var_os("HOME").map(|h| Path::new(&h).join(".beech_history"));
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    writeln!(
        shell.out,
        "BeechDB SQL shell. Enter \".help\" for usage hints."
    )?;
    shell.out.flush()?;
    let mut pending = String::new();
    loop {
        let prompt = if pending.is_empty() {
            "beech> "
        } else {
            "   ...> "
        };
        match editor.readline(prompt) {
            Ok(line) => {
                let _ = editor.add_history_entry(line.as_str());
                if pending.is_empty() && line.trim_start().starts_with('.') {
                    match shell.dot(line.trim()) {
                        Ok(true) => {}
                        Ok(false) => break,
                        Err(e) => eprintln!("Error: {e}"),
                    }
                } else {
                    pending.push_str(&line);
                    pending.push('\n');
                    if is_complete(&pending) {
                        let sql = std::mem::take(&mut pending);
                        if let Err(e) = shell.run_sql(&sql) {
                            eprintln!("Error: {e}");
                        }
                    }
                }
                shell.out.flush()?;
            }
            Err(ReadlineError::Interrupted) => pending.clear(),
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(h) = &history {
        let _ = editor.save_history(h);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_end_with_a_semicolon_outside_quotes_comments_and_triggers() {
        assert!(is_complete("SELECT 1;"));
        assert!(!is_complete("SELECT ';"));
        assert!(!is_complete("SELECT 1 -- ;"));
        assert!(is_complete("SELECT 1 /* ; */ ;"));
        assert!(!is_complete(
            "CREATE TRIGGER t AFTER INSERT ON x BEGIN SELECT 1;"
        ));
        assert!(is_complete(
            "CREATE TRIGGER t AFTER INSERT ON x BEGIN SELECT 1; END;"
        ));
        assert_eq!(
            parse_csv("a,\"b,c\"\n\"x\"\"y\",2\n"),
            vec![vec!["a", "b,c"], vec!["x\"y", "2"]]
        );
    }
}
