//! Berkeley DB's `db_dump` text format, written by `beech dump` and read by `beech load`, so
//! that data moves between Berkeley DB (`db5.3_dump`, `db5.3_load`) and BeechDB.
//!
//! A section is a header (`VERSION=3`, `format=bytevalue|print`, `type=btree`, optionally
//! `database=NAME`, `db_pagesize=N`, ..., `HEADER=END`), then alternating key and value lines
//! each starting with one space, then `DATA=END`. A stream may hold several sections.
//! `bytevalue` lines are hex; `print` lines keep printable ASCII and write other bytes (and
//! the backslash) as `\xx`.

use crate::error::{Error, Result};
use std::io::{BufRead, Write};

/// The header of one dumped database.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DumpHeader {
    /// `database=`: the database name, when the dump names one.
    pub database: Option<String>,
    /// `format=print` rather than `bytevalue`.
    pub printable: bool,
    /// `db_pagesize=`, if given.
    pub page_size: Option<usize>,
}

fn bad(line: usize, what: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("dump input line {line}: {what}"))
}

/// Writes one section holding `entries`. Returns the number of entries written.
pub fn write_section<W: Write>(
    out: &mut W,
    header: &DumpHeader,
    entries: impl IntoIterator<Item = Result<(Vec<u8>, Vec<u8>)>>,
) -> Result<u64> {
    let io = |e| Error::io("writing the dump", e);
    writeln!(out, "VERSION=3").map_err(io)?;
    writeln!(
        out,
        "format={}",
        if header.printable {
            "print"
        } else {
            "bytevalue"
        }
    )
    .map_err(io)?;
    writeln!(out, "type=btree").map_err(io)?;
    if let Some(name) = &header.database {
        writeln!(out, "database={name}").map_err(io)?;
    }
    if let Some(ps) = header.page_size {
        writeln!(out, "db_pagesize={ps}").map_err(io)?;
    }
    writeln!(out, "HEADER=END").map_err(io)?;
    let mut n = 0;
    let mut line = String::new();
    for kv in entries {
        let (k, v) = kv?;
        for item in [&k, &v] {
            line.clear();
            line.push(' ');
            encode(item, header.printable, &mut line);
            writeln!(out, "{line}").map_err(io)?;
        }
        n += 1;
    }
    writeln!(out, "DATA=END").map_err(io)?;
    Ok(n)
}

fn encode(bytes: &[u8], printable: bool, out: &mut String) {
    use std::fmt::Write as _;
    for &b in bytes {
        if printable && b.is_ascii_graphic() && b != b'\\' || printable && b == b' ' {
            out.push(b as char);
        } else if printable {
            let _ = write!(out, "\\{b:02x}");
        } else {
            let _ = write!(out, "{b:02x}");
        }
    }
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

fn decode(text: &str, printable: bool, line: usize) -> Result<Vec<u8>> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len() / 2);
    let mut i = 0;
    while i < b.len() {
        if printable && b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let start = if printable { i + 1 } else { i };
        if printable && b.get(start) == Some(&b'\\') {
            out.push(b'\\');
            i = start + 1;
            continue;
        }
        match (
            b.get(start).copied().and_then(hex),
            b.get(start + 1).copied().and_then(hex),
        ) {
            (Some(h), Some(l)) => out.push(h << 4 | l),
            _ => return Err(bad(line, "invalid hex escape")),
        }
        i = start + 2;
    }
    Ok(out)
}

/// Reads dump sections one after another.
pub struct DumpReader<R> {
    input: R,
    line_no: usize,
    line: String,
    header: Option<DumpHeader>,
}

impl<R: BufRead> DumpReader<R> {
    /// A reader over `input`.
    pub fn new(input: R) -> DumpReader<R> {
        DumpReader {
            input,
            line_no: 0,
            line: String::new(),
            header: None,
        }
    }

    fn read_line(&mut self) -> Result<bool> {
        self.line.clear();
        let n = self
            .input
            .read_line(&mut self.line)
            .map_err(|e| Error::io("reading the dump", e))?;
        self.line_no += 1;
        while self.line.ends_with('\n') || self.line.ends_with('\r') {
            self.line.pop();
        }
        Ok(n > 0)
    }

    /// Reads the next section's header; `None` at the end of the input.
    pub fn next_section(&mut self) -> Result<Option<DumpHeader>> {
        if self.header.is_some() {
            return Err(bad(self.line_no, "previous section not read to DATA=END"));
        }
        let mut h = DumpHeader::default();
        let mut any = false;
        loop {
            if !self.read_line()? {
                return if any {
                    Err(bad(self.line_no, "input ends inside a header"))
                } else {
                    Ok(None)
                };
            }
            if self.line.is_empty() && !any {
                continue;
            }
            any = true;
            if self.line == "HEADER=END" {
                self.header = Some(h.clone());
                return Ok(Some(h));
            }
            let Some((k, v)) = self.line.split_once('=') else {
                return Err(bad(
                    self.line_no,
                    format!("expected key=value in the header, found {:?}", self.line),
                ));
            };
            match k {
                "format" => {
                    h.printable = match v {
                        "print" => true,
                        "bytevalue" => false,
                        _ => return Err(bad(self.line_no, format!("unknown format {v:?}"))),
                    }
                }
                "type" if v != "btree" => {
                    return Err(bad(
                        self.line_no,
                        format!("database type {v:?} is not supported (only btree)"),
                    ))
                }
                "duplicates" | "dupsort" if v == "1" => {
                    return Err(bad(
                        self.line_no,
                        "databases with duplicate keys are not supported",
                    ))
                }
                "database" => h.database = Some(v.to_string()),
                "db_pagesize" => h.page_size = v.parse().ok(),
                "VERSION" if v != "3" => {
                    return Err(bad(
                        self.line_no,
                        format!("dump version {v} is not supported"),
                    ))
                }
                _ => {}
            }
        }
    }

    /// Reads the next key/value pair of the current section; `None` at `DATA=END`.
    pub fn next_pair(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let Some(h) = self.header.clone() else {
            return Ok(None);
        };
        let mut items = Vec::with_capacity(2);
        while items.len() < 2 {
            if !self.read_line()? {
                return Err(bad(self.line_no, "input ends before DATA=END"));
            }
            if self.line == "DATA=END" {
                if !items.is_empty() {
                    return Err(bad(self.line_no, "a key without a value"));
                }
                self.header = None;
                return Ok(None);
            }
            let Some(text) = self.line.strip_prefix(' ') else {
                return Err(bad(self.line_no, "data lines must start with a space"));
            };
            items.push(decode(text, h.printable, self.line_no)?);
        }
        let v = items.pop().unwrap();
        Ok(Some((items.pop().unwrap(), v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_both_formats() {
        let entries = vec![
            (b"k\\1 ".to_vec(), vec![0u8, 255, b'a']),
            (Vec::new(), b"empty key".to_vec()),
        ];
        for printable in [false, true] {
            let h = DumpHeader {
                database: Some("db".into()),
                printable,
                page_size: Some(4096),
            };
            let mut out = Vec::new();
            write_section(&mut out, &h, entries.iter().cloned().map(Ok)).unwrap();
            let mut r = DumpReader::new(&out[..]);
            assert_eq!(r.next_section().unwrap(), Some(h));
            let mut got = Vec::new();
            while let Some(kv) = r.next_pair().unwrap() {
                got.push(kv);
            }
            assert_eq!(got, entries);
            assert_eq!(r.next_section().unwrap(), None);
        }
    }

    #[test]
    fn reads_berkeley_db_output_and_rejects_garbage() {
        let bdb = "VERSION=3\nformat=bytevalue\ntype=btree\ndb_pagesize=4096\nHEADER=END\n 6b6579\n 76616c7565\nDATA=END\n";
        let mut r = DumpReader::new(bdb.as_bytes());
        assert!(r.next_section().unwrap().is_some());
        assert_eq!(
            r.next_pair().unwrap(),
            Some((b"key".to_vec(), b"value".to_vec()))
        );
        assert_eq!(r.next_pair().unwrap(), None);
        for bad in [
            "VERSION=3\nHEADER=END\n 6g\n 00\nDATA=END\n",
            "VERSION=3\ntype=hash\nHEADER=END\n",
            "junk\n",
            "VERSION=3\nHEADER=END\n 00\nDATA=END\n",
        ] {
            let mut r = DumpReader::new(bad.as_bytes());
            let res = r.next_section().and_then(|_| loop {
                if r.next_pair()?.is_none() {
                    break Ok(());
                }
            });
            assert!(res.is_err(), "{bad:?} accepted");
        }
    }
}
