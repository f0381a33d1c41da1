//! Databases with duplicates (Berkeley DB's `DB_DUPSORT` and `DB_DUP`) on the tree, which
//! holds one value per key: every key/value pair is one entry of its own, under a composite
//! key that sorts the pairs as they must be walked.
//!
//! Owns: the composite keys and the translation of user keys, values and ranges to and from
//! them. Handles (`Db`, `Txn`, cursors, iterators) call it; below them, the tree, the log,
//! locks and recovery see ordinary entries. Invariant: the composites of a key's pairs are
//! exactly the keys of `[pairs_of(key).0, pairs_of(key).1)`, and composites of smaller user
//! keys sort before them, of larger ones after.
//!
//! Composite: the user key with each `0x00` byte written `0x00 0xff`, then `0x00 0x00`, then
//! for sorted duplicates the value (the entry's own value is empty), for unsorted ones an
//! 8-byte big-endian sequence number, one more than the key's last (the entry holds the
//! value). So pairs sort by key, then by value or by the order they were put.

use crate::config::Duplicates;
use crate::error::{Error, Result};
use std::ops::Bound;

/// The escaped key and its terminator: every composite of `key` starts with it.
pub(crate) fn prefix(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 10);
    for &b in key {
        out.push(b);
        if b == 0 {
            out.push(0xff);
        }
    }
    out.extend_from_slice(&[0, 0]);
    out
}

/// The bounds of `key`'s pairs: from its prefix (included) to the first composite past them
/// (excluded).
pub(crate) fn pairs_of(key: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let lo = prefix(key);
    let mut hi = lo.clone();
    *hi.last_mut().unwrap() = 1;
    (lo, hi)
}

/// The entry a sorted pair is stored as: composite key, empty value.
pub(crate) fn sorted_pair(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut c = prefix(key);
    c.extend_from_slice(value);
    c
}

/// The composite key of an unsorted pair with sequence number `seq`.
pub(crate) fn unsorted_pair(key: &[u8], seq: u64) -> Vec<u8> {
    let mut c = prefix(key);
    c.extend_from_slice(&seq.to_be_bytes());
    c
}

fn malformed() -> Error {
    Error::Corrupt {
        page: None,
        detail: "an entry of a database with duplicates has a malformed key".into(),
    }
}

/// Splits a composite into the user key and what follows the terminator.
fn split(composite: &[u8]) -> Result<(Vec<u8>, &[u8])> {
    let mut key = Vec::with_capacity(composite.len());
    let mut i = 0;
    loop {
        match (composite.get(i), composite.get(i + 1)) {
            (Some(0), Some(0)) => return Ok((key, &composite[i + 2..])),
            (Some(0), Some(0xff)) => {
                key.push(0);
                i += 2;
            }
            (Some(0), _) | (None, _) => return Err(malformed()),
            (Some(&b), _) => {
                key.push(b);
                i += 1;
            }
        }
    }
}

/// The sequence number of an unsorted pair's composite.
pub(crate) fn sequence(composite: &[u8]) -> Result<u64> {
    let (_, tail) = split(composite)?;
    Ok(u64::from_be_bytes(
        tail.try_into().map_err(|_| malformed())?,
    ))
}

/// The sequence number for a key's next unsorted pair, after its `last` entry (if any).
pub(crate) fn next_sequence(last: Option<&(Vec<u8>, Vec<u8>)>) -> Result<u64> {
    Ok(match last {
        Some((c, _)) => sequence(c)? + 1,
        None => 0,
    })
}

/// The user's key and value of a stored entry.
pub(crate) fn decode(
    dups: Duplicates,
    composite: &[u8],
    stored: &[u8],
) -> Result<(Vec<u8>, Vec<u8>)> {
    let (key, tail) = split(composite)?;
    Ok(match dups {
        Duplicates::Sorted => (key, tail.to_vec()),
        _ => (key, stored.to_vec()),
    })
}

/// The composite range holding the pairs whose user keys lie in `(lo, hi)`.
pub(crate) fn range(lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let lo = match lo {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included(k) => Bound::Included(pairs_of(&k).0),
        Bound::Excluded(k) => Bound::Included(pairs_of(&k).1),
    };
    let hi = match hi {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included(k) => Bound::Excluded(pairs_of(&k).1),
        Bound::Excluded(k) => Bound::Excluded(pairs_of(&k).0),
    };
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn composites_sort_as_pairs_and_decode_back() {
        let keys: Vec<&[u8]> = vec![
            b"",
            b"\x00",
            b"\x00\x00",
            b"\x00\x01",
            b"\x01",
            b"a",
            b"a\x00",
            b"ab",
        ];
        let values: Vec<&[u8]> = vec![b"", b"\x00", b"\xff", b"x"];
        let mut pairs = Vec::new();
        for k in &keys {
            for v in &values {
                pairs.push((k.to_vec(), v.to_vec()));
            }
        }
        pairs.sort();
        let composites: Vec<Vec<u8>> = pairs.iter().map(|(k, v)| sorted_pair(k, v)).collect();
        assert!(
            composites.windows(2).all(|w| w[0] < w[1]),
            "composites sort as the pairs do"
        );
        for ((k, v), c) in pairs.iter().zip(&composites) {
            assert_eq!(
                decode(Duplicates::Sorted, c, b"").unwrap(),
                (k.clone(), v.clone())
            );
            let (lo, hi) = pairs_of(k);
            for (k2, c2) in pairs.iter().map(|p| &p.0).zip(&composites) {
                assert_eq!(
                    lo <= *c2 && *c2 < hi,
                    k2 == k,
                    "bounds of {k:?} against {k2:?}"
                );
            }
        }
        let u = unsorted_pair(b"k\x00", 7);
        assert_eq!(sequence(&u).unwrap(), 7);
        assert_eq!(
            decode(Duplicates::Unsorted, &u, b"v").unwrap(),
            (b"k\x00".to_vec(), b"v".to_vec())
        );
        assert!(decode(Duplicates::Sorted, b"no terminator", b"").is_err());
        assert!(decode(Duplicates::Sorted, b"bad\x00\x05", b"").is_err());
    }
}
