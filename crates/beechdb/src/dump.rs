//! Berkeley DB's `db_dump` text format, written by `beech dump` and read by `beech load`, so
//! that data moves between Berkeley DB (`db5.3_dump`, `db5.3_load`) and BeechDB byte for byte.
//!
//! Owns: the format's encoding and decoding, nothing else (callers store what it reads).
//! A section is a header (`VERSION=3`, `format=bytevalue|print`, optionally
//! `database=NAME`, `type=btree|hash|recno`, flags such as `duplicates=1`, `db_pagesize=N`,
//! `HEADER=END`), then data lines each starting with one space (key, value, key, value...;
//! for recno without `keys=1`, values only), then `DATA=END`. A stream may hold several
//! sections. Lines are bytes, not text: a printable dump may hold raw non-ASCII bytes.
//!
//! Escaping is Berkeley DB's (`__db_prdbt`): `bytevalue` lines are lowercase hex; `print`
//! lines keep bytes 0x20..=0x7e, double the backslash (`\\`) and write other bytes as
//! `\xx`. The database name on the `database=` line is escaped as in `print`, whatever the
//! format, so that any name (one holding a newline, say) survives.

use crate::error::{Error, Result};
use std::io::{BufRead, Write};

/// The access method a section was dumped from. BeechDB writes `btree` and loads all three:
/// `hash` into a B+tree (same keys and values, in key order), `recno` with each record
/// number as a 4-byte big-endian key so that records keep their order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DumpKind {
    /// `type=btree`.
    #[default]
    Btree,
    /// `type=hash`.
    Hash,
    /// `type=recno`.
    Recno,
}

/// The header of one dumped database.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DumpHeader {
    /// `database=`: the database name, when the dump names one.
    pub database: Option<String>,
    /// `format=print` rather than `bytevalue`.
    pub printable: bool,
    /// `type=`.
    pub kind: DumpKind,
    /// `duplicates=1`: the database may hold several values per key.
    pub duplicates: bool,
    /// `dupsort=1`: its duplicates are sorted.
    pub dupsort: bool,
    /// `keys=1` in a recno dump: each value is preceded by its record number.
    pub keys: bool,
    /// `db_pagesize=`, if given.
    pub page_size: Option<usize>,
}

fn bad(line: usize, what: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("line {line}: {what}"))
}

/// Writes one section holding `entries` (a `btree` one; `header.kind` is not consulted).
/// Returns the number of entries written.
pub fn write_section<W: Write>(
    out: &mut W,
    header: &DumpHeader,
    entries: impl IntoIterator<Item = Result<(Vec<u8>, Vec<u8>)>>,
) -> Result<u64> {
    let io = |e| Error::io("writing the dump", e);
    let mut head = Vec::with_capacity(128);
    head.extend_from_slice(b"VERSION=3\n");
    head.extend_from_slice(if header.printable {
        b"format=print\n"
    } else {
        b"format=bytevalue\n"
    });
    if let Some(name) = &header.database {
        head.extend_from_slice(b"database=");
        encode(name.as_bytes(), true, &mut head);
        head.push(b'\n');
    }
    head.extend_from_slice(b"type=btree\n");
    if header.duplicates {
        head.extend_from_slice(b"duplicates=1\n");
    }
    if header.dupsort {
        head.extend_from_slice(b"dupsort=1\n");
    }
    if let Some(ps) = header.page_size {
        head.extend_from_slice(format!("db_pagesize={ps}\n").as_bytes());
    }
    head.extend_from_slice(b"HEADER=END\n");
    out.write_all(&head).map_err(io)?;
    let mut n = 0;
    let mut line = Vec::new();
    for kv in entries {
        let (k, v) = kv?;
        line.clear();
        for item in [&k, &v] {
            line.push(b' ');
            encode(item, header.printable, &mut line);
            line.push(b'\n');
        }
        out.write_all(&line).map_err(io)?;
        n += 1;
    }
    out.write_all(b"DATA=END\n").map_err(io)?;
    Ok(n)
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn encode(bytes: &[u8], printable: bool, out: &mut Vec<u8>) {
    for &b in bytes {
        match b {
            b'\\' if printable => out.extend_from_slice(b"\\\\"),
            0x20..=0x7e if printable => out.push(b),
            _ => {
                if printable {
                    out.push(b'\\');
                }
                out.extend_from_slice(&[HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
            }
        }
    }
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

fn decode(b: &[u8], printable: bool, line: usize) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(if printable { b.len() } else { b.len() / 2 });
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
            _ if printable => return Err(bad(line, format!("invalid escape at byte {}", i + 1))),
            _ => {
                return Err(bad(
                    line,
                    format!("invalid hex digit at byte {}", start + 1),
                ))
            }
        }
        i = start + 2;
    }
    Ok(out)
}

/// Reads dump sections one after another.
pub struct DumpReader<R> {
    input: R,
    line_no: usize,
    line: Vec<u8>,
    header: Option<DumpHeader>,
    /// The last record number of a recno section dumped without `keys=1`.
    recno: u32,
}

impl<R: BufRead> DumpReader<R> {
    /// A reader over `input`.
    pub fn new(input: R) -> DumpReader<R> {
        DumpReader {
            input,
            line_no: 0,
            line: Vec::new(),
            header: None,
            recno: 0,
        }
    }

    /// The number of the line read last (1-based), for messages.
    pub fn line_number(&self) -> usize {
        self.line_no
    }

    /// Reads one line without its newline; false at the end of the input. A last line
    /// without a newline is still a line.
    fn read_line(&mut self) -> Result<bool> {
        self.line.clear();
        let n = self
            .input
            .read_until(b'\n', &mut self.line)
            .map_err(|e| Error::io("reading the dump", e))?;
        self.line_no += 1;
        if self.line.last() == Some(&b'\n') {
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
            // Header lines are ASCII; a CR from a file edited elsewhere is not part of them.
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
            if self.line.is_empty() && !any {
                continue;
            }
            any = true;
            if self.line == b"HEADER=END" {
                if h.kind != DumpKind::Recno {
                    h.keys = true;
                }
                self.header = Some(h.clone());
                self.recno = 0;
                return Ok(Some(h));
            }
            let line_no = self.line_no;
            let Some(eq) = self.line.iter().position(|&c| c == b'=') else {
                return Err(bad(
                    line_no,
                    format!(
                        "expected key=value in the header, found {:?}",
                        String::from_utf8_lossy(&self.line)
                    ),
                ));
            };
            let (k, v) = (&self.line[..eq], &self.line[eq + 1..]);
            let text = || String::from_utf8_lossy(v).into_owned();
            let flag = || v == b"1";
            match k {
                b"VERSION" if v != b"3" => {
                    return Err(bad(
                        line_no,
                        format!("dump version {} is not supported (only 3)", text()),
                    ))
                }
                b"format" => {
                    h.printable = match v {
                        b"print" => true,
                        b"bytevalue" => false,
                        _ => return Err(bad(line_no, format!("unknown format {:?}", text()))),
                    }
                }
                b"type" => {
                    h.kind = match v {
                        b"btree" => DumpKind::Btree,
                        b"hash" => DumpKind::Hash,
                        b"recno" => DumpKind::Recno,
                        _ => {
                            return Err(bad(
                                line_no,
                                format!(
                                "database type {:?} is not supported (btree, hash and recno are)",
                                text()
                            ),
                            ))
                        }
                    }
                }
                b"database" | b"subdatabase" => {
                    let name = decode(v, true, line_no)?;
                    h.database = Some(String::from_utf8(name).map_err(|_| {
                        bad(
                            line_no,
                            "the database name is not UTF-8, which BeechDB names must be; \
                             give a name as an argument",
                        )
                    })?)
                }
                b"duplicates" => h.duplicates = flag(),
                b"dupsort" => h.dupsort = flag(),
                b"keys" => h.keys = flag(),
                b"db_pagesize" => {
                    h.page_size = Some(
                        std::str::from_utf8(v)
                            .ok()
                            .and_then(|s| s.parse().ok())
                            .ok_or_else(|| {
                                bad(line_no, format!("db_pagesize {:?} is not a number", text()))
                            })?,
                    )
                }
                // Tuning and layout settings of Berkeley DB's access methods: nothing to
                // carry over into a B+tree.
                _ => {}
            }
        }
    }

    /// Reads the next key/value pair of the current section; `None` at `DATA=END`. Recno
    /// keys come back as 4-byte big-endian record numbers.
    pub fn next_pair(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let Some(h) = &self.header else {
            return Ok(None);
        };
        let (printable, kind, keys) = (h.printable, h.kind, h.keys);
        let mut key = None;
        loop {
            if !self.read_line()? {
                return Err(bad(self.line_no, "input ends before DATA=END"));
            }
            if self.line == b"DATA=END" {
                if key.is_some() {
                    return Err(bad(self.line_no, "a key without a value"));
                }
                self.header = None;
                return Ok(None);
            }
            let Some(text) = self.line.strip_prefix(b" ") else {
                return Err(bad(self.line_no, "data lines must start with a space"));
            };
            let item = decode(text, printable, self.line_no)?;
            if kind == DumpKind::Recno && !keys {
                self.recno = self.recno.checked_add(1).ok_or_else(|| {
                    bad(
                        self.line_no,
                        "more than 2^32 - 1 records in a recno section",
                    )
                })?;
                return Ok(Some((self.recno.to_be_bytes().to_vec(), item)));
            }
            match key.take() {
                None if kind == DumpKind::Recno => {
                    let n = std::str::from_utf8(&item)
                        .ok()
                        .and_then(|s| s.parse::<u32>().ok())
                        .filter(|&n| n > 0)
                        .ok_or_else(|| bad(self.line_no, "a recno key must be a record number"))?;
                    key = Some(n.to_be_bytes().to_vec());
                }
                None => key = Some(item),
                Some(k) => return Ok(Some((k, item))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

    fn read_all(input: &[u8]) -> Result<Vec<(DumpHeader, Pairs)>> {
        let mut r = DumpReader::new(input);
        let mut sections = Vec::new();
        while let Some(h) = r.next_section()? {
            let mut pairs = Vec::new();
            while let Some(kv) = r.next_pair()? {
                pairs.push(kv);
            }
            sections.push((h, pairs));
        }
        Ok(sections)
    }

    #[test]
    fn round_trip_both_formats() {
        let entries = vec![
            (b"k\\1 ".to_vec(), vec![0u8, 255, b'a', b'\n']),
            (Vec::new(), b"empty key".to_vec()),
            (b"empty value".to_vec(), Vec::new()),
        ];
        for printable in [false, true] {
            let h = DumpHeader {
                database: Some("odd\nname\\ \u{e9}".into()),
                printable,
                keys: true,
                page_size: Some(4096),
                ..Default::default()
            };
            let mut out = Vec::new();
            write_section(&mut out, &h, entries.iter().cloned().map(Ok)).unwrap();
            assert_eq!(read_all(&out).unwrap(), vec![(h, entries.clone())]);
        }
    }

    #[test]
    fn escapes_as_berkeley_db_does() {
        let h = DumpHeader {
            database: Some("a\\b\nc".into()),
            printable: true,
            ..Default::default()
        };
        let mut out = Vec::new();
        write_section(
            &mut out,
            &h,
            [Ok((b"k\\ ~\x7f".to_vec(), b"\x00".to_vec()))],
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "VERSION=3\nformat=print\ndatabase=a\\\\b\\0ac\ntype=btree\nHEADER=END\n k\\\\ ~\\7f\n \\00\nDATA=END\n"
        );
        // Raw bytes that are not ASCII are taken as they are, as db_load takes them.
        let raw = b"VERSION=3\nformat=print\ntype=btree\nHEADER=END\n \xc3\xa9\xff\n v\nDATA=END\n";
        assert_eq!(
            read_all(raw).unwrap()[0].1,
            vec![(b"\xc3\xa9\xff".to_vec(), b"v".to_vec())]
        );
    }

    #[test]
    fn reads_hash_and_recno_sections() {
        let dump = b"VERSION=3\nformat=print\ntype=recno\nHEADER=END\n one\n two\nDATA=END\n\
VERSION=3\nformat=bytevalue\ntype=recno\nkeys=1\nHEADER=END\n 3132\n 78\nDATA=END\n\
VERSION=3\nformat=print\ntype=hash\nh_nelem=10\nHEADER=END\n k\n v\nDATA=END\n";
        let s = read_all(dump).unwrap();
        assert_eq!(
            s[0].1,
            vec![
                (1u32.to_be_bytes().to_vec(), b"one".to_vec()),
                (2u32.to_be_bytes().to_vec(), b"two".to_vec())
            ]
        );
        assert_eq!(s[1].1, vec![(12u32.to_be_bytes().to_vec(), b"x".to_vec())]);
        assert_eq!(s[2].0.kind, DumpKind::Hash);
        assert_eq!(s[2].1, vec![(b"k".to_vec(), b"v".to_vec())]);
    }

    #[test]
    fn reads_berkeley_db_output_and_rejects_garbage() {
        let bdb = b"VERSION=3\nformat=bytevalue\ntype=btree\nduplicates=1\ndb_pagesize=4096\nHEADER=END\n 6b6579\n 76616c7565\nDATA=END\n";
        let s = read_all(bdb).unwrap();
        assert!(s[0].0.duplicates && s[0].0.page_size == Some(4096));
        assert_eq!(s[0].1, vec![(b"key".to_vec(), b"value".to_vec())]);
        for bad in [
            &b"VERSION=3\nHEADER=END\n 6g\n 00\nDATA=END\n"[..],
            b"VERSION=3\ntype=queue\nHEADER=END\n",
            b"junk\n",
            b"VERSION=3\nHEADER=END\n 00\nDATA=END\n",
            b"VERSION=3\nformat=print\nHEADER=END\n \\4\n v\nDATA=END\n",
            b"VERSION=3\ntype=recno\nkeys=1\nformat=print\nHEADER=END\n x\n v\nDATA=END\n",
            b"VERSION=3\nHEADER=END\n 00\n 00\n",
            b"VERSION=3\ndatabase=\\ff\nHEADER=END\nDATA=END\n",
        ] {
            assert!(
                read_all(bad).is_err(),
                "{:?} accepted",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
