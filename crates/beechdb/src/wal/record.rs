//! Log records: every kind declared once (code, name, fields), and the one framing used to
//! write and to read them.
//!
//! Owns: the record header, payload encodings, the record kinds and their printed form.
//! May call: nothing but `error`. Invariants: a framed record's `len` is exact and fits the
//! header's 32 bits (a larger one is refused with [`Error::RecordTooLarge`] before anything
//! is written); a payload decodes only if every field is whole and nothing is left over, so
//! a record that passes its checksum but not its decoder is damage, never a partial replay.
//!
//! Header (32 bytes): `crc u32 | len u32 | lsn u64 | synced u64 | kind u8 | 3 zero | prev
//! u32`, then the payload, padded with zeros to a multiple of 8 (see `wal/mod.rs` for what
//! `crc`, `synced` and `prev` mean). Payload fields are little-endian integers, names as
//! `len u16 | UTF-8 bytes`, and operation lists as `count u32` then per operation `db u32 |
//! op u8 (1 put, 2 delete) | klen u32 | vlen u32 | key | value`.

use crate::error::{Error, Result};
use crate::storage::page::{rd32, rd64, wr32, wr64};
use std::fmt;

pub(crate) const REC_HDR: usize = 32;
/// The longest record the 32-bit length field can describe.
pub(crate) const MAX_RECORD: usize = u32::MAX as usize;

pub(crate) fn align8(n: usize) -> usize {
    (n + 7) & !7
}

/// One write of a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op<'a> {
    Put {
        db: u32,
        key: &'a [u8],
        value: &'a [u8],
    },
    Delete {
        db: u32,
        key: &'a [u8],
    },
}

impl<'a> Op<'a> {
    pub(crate) fn db(&self) -> u32 {
        match *self {
            Op::Put { db, .. } | Op::Delete { db, .. } => db,
        }
    }

    pub(crate) fn key(&self) -> &'a [u8] {
        match *self {
            Op::Put { key, .. } | Op::Delete { key, .. } => key,
        }
    }

    /// The value a put writes; `None` for a delete.
    pub(crate) fn value(&self) -> Option<&'a [u8]> {
        match *self {
            Op::Put { value, .. } => Some(value),
            Op::Delete { .. } => None,
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.db().to_le_bytes());
        out.push(if self.value().is_some() { 1 } else { 2 });
        out.extend_from_slice(&(self.key().len() as u32).to_le_bytes());
        out.extend_from_slice(&(self.value().map_or(0, <[u8]>::len) as u32).to_le_bytes());
        out.extend_from_slice(self.key());
        if let Some(v) = self.value() {
            out.extend_from_slice(v);
        }
    }

    /// Reads one operation from the front of `buf`.
    pub(crate) fn take(buf: &mut &'a [u8]) -> Option<Op<'a>> {
        let db = take_u32(buf)?;
        let op = *buf.first()?;
        *buf = &buf[1..];
        let (kl, vl) = (take_u32(buf)? as usize, take_u32(buf)? as usize);
        let key = take_bytes(buf, kl)?;
        match op {
            1 => Some(Op::Put {
                db,
                key,
                value: take_bytes(buf, vl)?,
            }),
            2 if vl == 0 => Some(Op::Delete { db, key }),
            _ => None,
        }
    }
}

/// A list of operations, read in place; built only by decoding (which checks every
/// operation) or by [`OpsBuilder`].
#[derive(Clone, Copy)]
pub(crate) struct Ops<'a> {
    count: u32,
    bytes: &'a [u8],
}

impl<'a> Ops<'a> {
    pub(crate) fn iter(&self) -> impl Iterator<Item = Op<'a>> + 'a {
        let mut rest = self.bytes;
        (0..self.count).map(move |_| Op::take(&mut rest).expect("checked when decoded"))
    }

    pub(crate) fn len(&self) -> usize {
        self.count as usize
    }

    /// The encoded operations, without their count.
    pub(crate) fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.count.to_le_bytes());
        out.extend_from_slice(self.bytes);
    }

    pub(crate) fn take(buf: &mut &'a [u8]) -> Option<Ops<'a>> {
        let count = take_u32(buf)?;
        let start = *buf;
        for _ in 0..count {
            Op::take(buf)?;
        }
        let used = start.len() - buf.len();
        Some(Ops {
            count,
            bytes: &start[..used],
        })
    }
}

impl fmt::Debug for Ops<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Encoded operations, appended one at a time (a transaction's write set).
#[derive(Default, Clone)]
pub(crate) struct OpsBuilder {
    count: u32,
    bytes: Vec<u8>,
}

impl OpsBuilder {
    pub(crate) fn with_capacity(bytes: usize) -> OpsBuilder {
        OpsBuilder {
            count: 0,
            bytes: Vec::with_capacity(bytes),
        }
    }

    pub(crate) fn push(&mut self, op: Op) {
        op.encode(&mut self.bytes);
        self.count += 1;
    }

    pub(crate) fn clear(&mut self) {
        self.count = 0;
        self.bytes.clear();
    }

    /// Bytes encoded so far.
    pub(crate) fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    pub(crate) fn ops(&self) -> Ops<'_> {
        Ops {
            count: self.count,
            bytes: &self.bytes,
        }
    }
}

/// The runs of a spilled transaction named by its commit record, oldest first: each the
/// LSN of the run's first `txn-data` record and how many records it has (the next ones of
/// the transaction in log order, other transactions' records coming between). Read in
/// place, checked when decoded.
#[derive(Clone, Copy)]
pub(crate) struct Runs<'a> {
    count: u32,
    bytes: &'a [u8],
}

/// Bytes one run takes in a [`Runs`] list.
const RUN_LEN: usize = 12;

impl<'a> Runs<'a> {
    /// `(first record's LSN, record count)` of each run, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u32)> + 'a {
        self.bytes.chunks_exact(RUN_LEN).map(|c| {
            (
                u64::from_le_bytes(c[..8].try_into().unwrap()),
                u32::from_le_bytes(c[8..].try_into().unwrap()),
            )
        })
    }
}

/// Encoded runs, appended one at a time.
#[derive(Default, Clone)]
pub(crate) struct RunsBuilder {
    count: u32,
    bytes: Vec<u8>,
}

impl RunsBuilder {
    pub(crate) fn push(&mut self, first: u64, records: u32) {
        self.bytes.extend_from_slice(&first.to_le_bytes());
        self.bytes.extend_from_slice(&records.to_le_bytes());
        self.count += 1;
    }

    pub(crate) fn runs(&self) -> Runs<'_> {
        Runs {
            count: self.count,
            bytes: &self.bytes,
        }
    }
}

impl fmt::Debug for Runs<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Bytes as text for printing: printable ASCII as is, anything else as `\xx`.
fn printable(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_graphic() && b != b'\\' {
            s.push(b as char);
        } else {
            s.push_str(&format!("\\{b:02x}"));
        }
    }
    s
}

fn take_bytes<'a>(buf: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if buf.len() < n {
        return None;
    }
    let (head, tail) = buf.split_at(n);
    *buf = tail;
    Some(head)
}

fn take_u32(buf: &mut &[u8]) -> Option<u32> {
    take_bytes(buf, 4).map(|b| u32::from_le_bytes(b.try_into().unwrap()))
}

fn take_u64(buf: &mut &[u8]) -> Option<u64> {
    take_bytes(buf, 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()))
}

/// A payload field: how it is written, read back and printed.
trait Field<'a>: Sized {
    fn len(&self) -> usize;
    fn put(&self, out: &mut Vec<u8>);
    fn take(buf: &mut &'a [u8]) -> Option<Self>;
    fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

impl<'a> Field<'a> for u64 {
    fn len(&self) -> usize {
        8
    }
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn take(buf: &mut &'a [u8]) -> Option<Self> {
        take_u64(buf)
    }
    fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl<'a> Field<'a> for u32 {
    fn len(&self) -> usize {
        4
    }
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn take(buf: &mut &'a [u8]) -> Option<Self> {
        take_u32(buf)
    }
    fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl<'a> Field<'a> for &'a str {
    fn len(&self) -> usize {
        2 + str::len(self)
    }
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(str::len(self) as u16).to_le_bytes());
        out.extend_from_slice(self.as_bytes());
    }
    fn take(buf: &mut &'a [u8]) -> Option<Self> {
        let n = take_bytes(buf, 2).map(|b| u16::from_le_bytes([b[0], b[1]]))? as usize;
        std::str::from_utf8(take_bytes(buf, n)?).ok()
    }
    fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

impl<'a> Field<'a> for Ops<'a> {
    fn len(&self) -> usize {
        4 + self.bytes.len()
    }
    fn put(&self, out: &mut Vec<u8>) {
        self.encode(out);
    }
    fn take(buf: &mut &'a [u8]) -> Option<Self> {
        Ops::take(buf)
    }
    fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ops", self.count)?;
        for op in self.iter().take(8) {
            let key = printable(op.key());
            match op {
                Op::Put { db, value, .. } => {
                    write!(f, " | put {db}/{key} ({} bytes)", value.len())?
                }
                Op::Delete { db, .. } => write!(f, " | delete {db}/{key}")?,
            }
        }
        if self.count > 8 {
            write!(f, " | ...")?;
        }
        Ok(())
    }
}

impl<'a> Field<'a> for Runs<'a> {
    fn len(&self) -> usize {
        4 + self.bytes.len()
    }
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.count.to_le_bytes());
        out.extend_from_slice(self.bytes);
    }
    fn take(buf: &mut &'a [u8]) -> Option<Self> {
        let count = take_u32(buf)?;
        let bytes = take_bytes(buf, (count as usize).checked_mul(RUN_LEN)?)?;
        let runs = Runs { count, bytes };
        // Each run has a record, at a position a record can start at.
        runs.iter()
            .all(|(lsn, n)| n > 0 && lsn > 0 && lsn % 8 == 0)
            .then_some(runs)
    }
    fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.count)?;
        for (lsn, n) in self.iter().take(8) {
            write!(f, " | {n} records from {lsn}")?;
        }
        if self.count > 8 {
            write!(f, " | ...")?;
        }
        Ok(())
    }
}

/// Declares every record kind once: its code, its printed name and its fields. Yields
/// [`Kind`], [`Record`], and their encoding, decoding and printing.
macro_rules! log_records {
    ($($(#[$doc:meta])* $code:literal $kind:ident $name:literal { $($field:ident : $ty:ty),* })*) => {
        /// The kind of a log record, as stored in its header.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Kind {
            $($(#[$doc])* $kind = $code,)*
        }

        impl Kind {
            pub(crate) fn from_code(code: u8) -> Option<Kind> {
                match code {
                    $($code => Some(Kind::$kind),)*
                    _ => None,
                }
            }

            pub(crate) fn name(self) -> &'static str {
                match self {
                    $(Kind::$kind => $name,)*
                }
            }
        }

        /// A log record, its payload read in place.
        #[derive(Debug, Clone, Copy)]
        pub(crate) enum Record<'a> {
            $($(#[$doc])* $kind { $($field: $ty),* },)*
        }

        impl<'a> Record<'a> {
            pub(crate) fn kind(&self) -> Kind {
                match self {
                    $(Record::$kind { .. } => Kind::$kind,)*
                }
            }

            fn payload_len(&self) -> usize {
                match self {
                    $(Record::$kind { $($field),* } => 0 $(+ Field::len($field))*,)*
                }
            }

            fn encode_payload(&self, out: &mut Vec<u8>) {
                match self {
                    $(Record::$kind { $($field),* } => { $(Field::put($field, out);)* })*
                }
            }

            /// The record of kind `kind` in `payload`; `None` if any field is cut short
            /// or bytes are left over.
            pub(crate) fn decode(kind: Kind, payload: &'a [u8]) -> Option<Record<'a>> {
                let buf = &mut &payload[..];
                let record = match kind {
                    $(Kind::$kind => Record::$kind { $($field: <$ty as Field>::take(buf)?),* },)*
                };
                buf.is_empty().then_some(record)
            }
        }

        impl fmt::Display for Record<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $(Record::$kind { $($field),* } => {
                        write!(f, "{}", $name)?;
                        $(
                            write!(f, " {}=", stringify!($field))?;
                            Field::show($field, f)?;
                        )*
                        Ok(())
                    })*
                }
            }
        }
    };
}

log_records! {
    /// A committed transaction: its last operations (all of them unless it logged records
    /// before), and `prev`, the LSN of its previous record (0: none).
    1 Commit "commit" { txn: u64, prev: u64, ops: Ops<'a> }
    /// The log continues at the start of the next segment.
    2 SegmentEnd "segment-end" {}
    /// Operations of a transaction not yet committed, logged ahead of its commit.
    3 TxnData "txn-data" { txn: u64, prev: u64, ops: Ops<'a> }
    /// A transaction that logged records ended without committing: they are void.
    4 Abort "abort" { txn: u64, prev: u64 }
    /// A transaction created database `name` with id `db`.
    5 CreateDb "create-db" { txn: u64, prev: u64, db: u32, name: &'a str }
    /// A transaction removed database `name` (id `db`).
    6 RemoveDb "remove-db" { txn: u64, prev: u64, db: u32, name: &'a str }
    /// A checkpoint of generation `generation` covers the log up to this record's end.
    7 Checkpoint "checkpoint" { generation: u64 }
    /// A committed transaction that spilled its writes ahead in `txn-data` records: the
    /// `ddl` records just before it in its chain are its databases created or removed, and
    /// its writes are the merge of `runs` (each sorted by database and key; a later run's
    /// write of a key overrides an earlier one's), but for writes to databases it removed.
    /// Runs it rolled back are not listed.
    8 CommitRuns "commit-runs" { txn: u64, prev: u64, ddl: u32, runs: Runs<'a> }
    /// A transaction created database `name` with id `db` holding duplicates (`dups`: 1
    /// sorted, 2 unsorted); `create-db` is a database without.
    9 CreateDbWithDups "create-db-dups" { txn: u64, prev: u64, db: u32, dups: u32, name: &'a str }
}

impl<'a> Record<'a> {
    /// The same record with `prev` set, for the kinds that belong to a transaction.
    pub(crate) fn with_prev(mut self, lsn: u64) -> Record<'a> {
        match &mut self {
            Record::Commit { prev, .. }
            | Record::CommitRuns { prev, .. }
            | Record::TxnData { prev, .. }
            | Record::Abort { prev, .. }
            | Record::CreateDb { prev, .. }
            | Record::CreateDbWithDups { prev, .. }
            | Record::RemoveDb { prev, .. } => *prev = lsn,
            Record::SegmentEnd {} | Record::Checkpoint { .. } => {}
        }
        self
    }

    /// The transaction a record belongs to and the LSN of that transaction's previous
    /// record, for the kinds that belong to one.
    pub(crate) fn txn(&self) -> Option<(u64, u64)> {
        match *self {
            Record::Commit { txn, prev, .. }
            | Record::CommitRuns { txn, prev, .. }
            | Record::TxnData { txn, prev, .. }
            | Record::Abort { txn, prev }
            | Record::CreateDb { txn, prev, .. }
            | Record::CreateDbWithDups { txn, prev, .. }
            | Record::RemoveDb { txn, prev, .. } => Some((txn, prev)),
            Record::SegmentEnd {} | Record::Checkpoint { .. } => None,
        }
    }
}

/// A record's header fields, as checked by [`unframe`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Framed<'a> {
    pub kind: Kind,
    /// Header and payload, unpadded; the record takes `align8(len)` bytes.
    pub len: usize,
    pub synced: u64,
    pub prev_crc: u32,
    pub crc: u32,
    pub payload: &'a [u8],
}

impl Framed<'_> {
    /// Bytes the record takes in the log.
    pub(crate) fn size(&self) -> u64 {
        align8(self.len) as u64
    }
}

/// Bytes `rec` takes in the log, or [`Error::RecordTooLarge`].
pub(crate) fn framed_size(rec: &Record) -> Result<usize> {
    check_size(REC_HDR + rec.payload_len()).map(align8)
}

fn check_size(len: usize) -> Result<usize> {
    if len > MAX_RECORD {
        return Err(Error::RecordTooLarge {
            len,
            max: MAX_RECORD,
        });
    }
    Ok(len)
}

/// Appends `rec` framed at LSN `lsn` to `out`: header, payload, padding. `chain` is the
/// checksum of the record before it, `salt` the environment's seed. Returns the record's
/// checksum (the next chain value). Nothing is appended if the record is too large.
pub(crate) fn frame(
    out: &mut Vec<u8>,
    rec: &Record,
    lsn: u64,
    synced: u64,
    chain: u32,
    salt: u32,
) -> Result<u32> {
    let len = check_size(REC_HDR + rec.payload_len())?;
    let at = out.len();
    out.reserve(align8(len));
    out.resize(at + REC_HDR, 0);
    rec.encode_payload(out);
    debug_assert_eq!(out.len() - at, len);
    out.resize(at + align8(len), 0);
    let r = &mut out[at..];
    wr32(r, 4, len as u32);
    wr64(r, 8, lsn);
    wr64(r, 16, synced);
    r[24] = rec.kind() as u8;
    wr32(r, 28, chain);
    let crc = crc32c::crc32c_append(salt, &r[4..len]);
    wr32(r, 0, crc);
    Ok(crc)
}

/// The record at `off` of `buf`, which holds the log from LSN `lsn - off`, if it is whole:
/// its length fits, it names its own LSN, its checksum matches and its kind is known. Its
/// payload is not decoded.
pub(crate) fn unframe(buf: &[u8], off: usize, lsn: u64, salt: u32) -> Option<Framed<'_>> {
    if off + REC_HDR > buf.len() {
        return None;
    }
    let len = rd32(buf, off + 4) as usize;
    if len < REC_HDR || off + align8(len) > buf.len() || rd64(buf, off + 8) != lsn {
        return None;
    }
    let kind = Kind::from_code(buf[off + 24])?;
    let crc = rd32(buf, off);
    if crc32c::crc32c_append(salt, &buf[off + 4..off + len]) != crc {
        return None;
    }
    Some(Framed {
        kind,
        len,
        synced: rd64(buf, off + 16),
        prev_crc: rd32(buf, off + 28),
        crc,
        payload: &buf[off + REC_HDR..off + len],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(list: &[Op]) -> OpsBuilder {
        let mut b = OpsBuilder::default();
        for op in list {
            b.push(*op);
        }
        b
    }

    #[test]
    fn every_kind_round_trips_and_any_cut_is_refused() {
        let b = ops(&[
            Op::Put {
                db: 1,
                key: b"k1",
                value: b"v1",
            },
            Op::Delete { db: 2, key: b"" },
            Op::Put {
                db: 1,
                key: b"k3",
                value: b"",
            },
        ]);
        let mut runs = RunsBuilder::default();
        runs.push(64, 3);
        runs.push(4096, 1);
        let records = [
            Record::Commit {
                txn: 7,
                prev: 0,
                ops: b.ops(),
            },
            Record::SegmentEnd {},
            Record::TxnData {
                txn: 7,
                prev: 64,
                ops: b.ops(),
            },
            Record::Abort { txn: 7, prev: 128 },
            Record::CreateDb {
                txn: 8,
                prev: 0,
                db: 3,
                name: "accounts",
            },
            Record::CreateDbWithDups {
                txn: 8,
                prev: 0,
                db: 4,
                dups: 1,
                name: "pairs",
            },
            Record::RemoveDb {
                txn: 9,
                prev: 0,
                db: 3,
                name: "accounts",
            },
            Record::Checkpoint { generation: 12 },
            Record::CommitRuns {
                txn: 9,
                prev: 512,
                ddl: 2,
                runs: runs.runs(),
            },
        ];
        for rec in records {
            let mut out = Vec::new();
            let crc = frame(&mut out, &rec, 4096, 100, 0xabcd, 0x1234).unwrap();
            assert_eq!(out.len() % 8, 0);
            assert_eq!(out.len(), framed_size(&rec).unwrap());
            let f = unframe(&out, 0, 4096, 0x1234).unwrap();
            assert_eq!(
                (f.kind, f.crc, f.prev_crc, f.synced),
                (rec.kind(), crc, 0xabcd, 100)
            );
            let back = Record::decode(f.kind, f.payload).unwrap_or_else(|| panic!("{rec}"));
            assert_eq!(back.to_string(), rec.to_string());
            if let (Record::Commit { ops: a, .. }, Record::Commit { ops: b, .. }) = (back, rec) {
                assert!(a.iter().eq(b.iter()));
            }
            if let (Record::CommitRuns { runs: a, .. }, Record::CommitRuns { runs: b, .. }) =
                (back, rec)
            {
                assert!(a.iter().eq(b.iter()));
            }
            assert!(unframe(&out, 0, 4096, 0x1235).is_none(), "another salt");
            assert!(unframe(&out, 0, 4104, 0x1234).is_none(), "another LSN");
            for cut in 0..f.payload.len() {
                assert!(Record::decode(f.kind, &f.payload[..cut]).is_none());
            }
            let mut longer = f.payload.to_vec();
            longer.push(0);
            assert!(Record::decode(f.kind, &longer).is_none(), "bytes left over");
        }
    }

    #[test]
    fn printed_form_names_kind_and_fields() {
        let b = ops(&[Op::Delete {
            db: 4,
            key: b"gone",
        }]);
        let rec = Record::Commit {
            txn: 3,
            prev: 0,
            ops: b.ops(),
        };
        assert_eq!(
            rec.to_string(),
            "commit txn=3 prev=0 ops=1 ops | delete 4/gone"
        );
    }
}
