//! Transaction range scans stream a leaf at a time while other transactions commit between
//! the items, `first` / `last` read a range's first entry alone, and `visit_from` /
//! `get_with` lend what they read: checked against a model of what the transaction must see.

use beechdb::storage::MemStorage;
use beechdb::{Config, Db, Env, Error, Isolation, TxnIter};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

fn env() -> Env {
    let cfg = Config::new()
        .page_size(4096)
        .cache_size(1 << 20)
        .transactional(true)
        .log_segment_size(256 << 10);
    Env::open_with_storage(Arc::new(MemStorage::new()), cfg).unwrap()
}

fn bound(rng: &mut StdRng) -> Bound<Vec<u8>> {
    match rng.gen_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(key(rng.gen_range(0..2200))),
        _ => Bound::Excluded(key(rng.gen_range(0..2200))),
    }
}

/// Every even key below 2,000, committed with a value of `len(i)` bytes; what was written.
fn filled(env: &Env, db: &Db, len: impl Fn(u32) -> usize) -> Model {
    let mut model = Model::new();
    let fill = env.begin_txn().unwrap();
    for i in (0..2000).step_by(2) {
        let v = vec![(i % 251) as u8; len(i)];
        fill.put(db, &key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    fill.commit().unwrap();
    model
}

/// A commit by another transaction: a few puts and deletes anywhere in the key space, but
/// for the keys the scanning transaction holds locks on (`owned`).
fn commit_elsewhere(env: &Env, db: &Db, rng: &mut StdRng, latest: &mut Model, owned: &Model) {
    let t = env.begin_txn().unwrap();
    for _ in 0..rng.gen_range(1..6) {
        let k = key(rng.gen_range(0..2200));
        if owned.contains_key(&k) {
            continue;
        }
        if rng.gen_bool(0.4) {
            t.delete(db, &k).unwrap();
            latest.remove(&k);
        } else {
            let v = vec![rng.gen::<u8>(); rng.gen_range(1..200)];
            t.put(db, &k, &v).unwrap();
            latest.insert(k, v);
        }
    }
    t.commit().unwrap();
}

/// Runs `scan` to its end, committing elsewhere between items; returns what it saw.
fn scan_while_committing(
    env: &Env,
    db: &Db,
    scan: TxnIter,
    rng: &mut StdRng,
    latest: &mut Model,
    owned: &Model,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut seen = Vec::new();
    for entry in scan {
        seen.push(entry.unwrap());
        if rng.gen_bool(0.05) {
            commit_elsewhere(env, db, rng, latest, owned);
        }
    }
    seen
}

#[test]
fn snapshot_scans_see_the_snapshot_and_own_writes_whatever_commits_meanwhile() {
    let env = env();
    let db = env.create_db("d").unwrap();
    let mut latest = filled(&env, &db, |i| 1 + (i as usize * 7) % 150);
    for seed in 0..40u64 {
        let rng = &mut StdRng::seed_from_u64(seed);
        let txn = env.begin_txn().unwrap();
        let mut view = latest.clone();
        let mut owned = Model::new();
        // Own writes, some inside and some outside the range.
        for _ in 0..rng.gen_range(0..20) {
            let k = key(rng.gen_range(0..2200));
            owned.insert(k.clone(), Vec::new());
            if rng.gen_bool(0.3) {
                txn.delete(&db, &k).unwrap();
                view.remove(&k);
            } else {
                txn.put(&db, &k, b"own").unwrap();
                view.insert(k, b"own".to_vec());
            }
        }
        let range = (bound(rng), bound(rng));
        let reverse = rng.gen_bool(0.5);
        // (Not `BTreeMap::range`, which panics on an inverted range; the scan yields nothing.)
        let mut want: Vec<_> = view
            .iter()
            .filter(|(k, _)| range.contains(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if reverse {
            want.reverse();
        }
        // `first` / `last`: the scan's first entry, read alone.
        let edge = if reverse {
            txn.last(&db, range.clone())
        } else {
            txn.first(&db, range.clone())
        };
        assert_eq!(
            edge.unwrap(),
            want.first().cloned(),
            "seed {seed}: first entry"
        );
        let scan = if reverse {
            txn.range_rev(&db, range)
        } else {
            txn.range(&db, range)
        };
        let got = scan_while_committing(&env, &db, scan, rng, &mut latest, &owned);
        assert_eq!(got.len(), want.len(), "seed {seed}: entry count");
        assert!(got == want, "seed {seed}: scan differs from the snapshot");
        txn.abort();
    }
}

#[test]
fn read_committed_scans_are_ordered_and_see_each_leaf_as_committed() {
    let env = env();
    let db = env.create_db("d").unwrap();
    let mut latest = Model::new();
    for i in 0..1500 {
        db.put(&key(i), &[1u8; 100]).unwrap();
        latest.insert(key(i), vec![1u8; 100]);
    }
    let rng = &mut StdRng::seed_from_u64(7);
    let txn = env.begin_txn_with(Isolation::ReadCommitted).unwrap();
    let scan = txn.range(&db, ..);
    let got = scan_while_committing(&env, &db, scan, rng, &mut latest, &Model::new());
    assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "keys ascend");
    // Every key seen was present at some moment with that value; keys never touched
    // after the start are all there.
    assert!(got
        .iter()
        .all(|(k, v)| k.starts_with(b"k") && !v.is_empty()));
    let scan_after = txn.range(&db, ..).collect::<Result<Vec<_>, _>>().unwrap();
    let now: Vec<_> = latest.into_iter().collect();
    assert!(
        scan_after == now,
        "a scan with no commits meanwhile is the latest state"
    );
}

#[test]
fn scans_of_finished_or_foreign_transactions_fail_cleanly() {
    let env = env();
    let other = self::env();
    let db = env.create_db("d").unwrap();
    let foreign = other.create_db("d").unwrap();
    let txn = env.begin_txn().unwrap();
    let mut it = txn.range(&foreign, ..);
    assert!(matches!(it.next(), Some(Err(Error::InvalidArgument(_)))));
    assert!(it.next().is_none());
    assert_eq!(txn.range(&db, ..).count(), 0);
}

#[test]
fn lent_visits_and_gets_see_the_snapshot_and_own_writes() {
    let env = env();
    let db = env.create_db("d").unwrap();
    // Some values too long for a page: read from their overflow chains.
    let mut latest = filled(&env, &db, |i| match i % 97 {
        0 => 9000,
        _ => 1 + (i as usize * 7) % 150,
    });
    for seed in 0..60u64 {
        let rng = &mut StdRng::seed_from_u64(seed);
        let txn = env.begin_txn().unwrap();
        let mut view = latest.clone();
        // Own writes in a third of the runs, newer commits in another: both are merged.
        let mut owned = Model::new();
        if seed % 3 == 1 {
            for _ in 0..rng.gen_range(1..20) {
                let k = key(rng.gen_range(0..2200));
                owned.insert(k.clone(), Vec::new());
                txn.put(&db, &k, b"own").unwrap();
                view.insert(k, b"own".to_vec());
            }
        }
        if seed % 3 == 2 {
            commit_elsewhere(&env, &db, rng, &mut latest, &owned);
        }
        for _ in 0..10 {
            let from = key(rng.gen_range(0..2200));
            let take = rng.gen_range(1..400);
            let want: Vec<_> = view
                .range(from.clone()..)
                .take(take)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let mut got = Vec::new();
            txn.visit_from(&db, &from, |k, v| {
                got.push((k.to_vec(), v.to_vec()));
                got.len() < take
            })
            .unwrap();
            assert!(got == want, "seed {seed}: visit from {from:?} differs");
            let k = key(rng.gen_range(0..2200));
            let len = txn.get_with(&db, &k, |v| v.len()).unwrap();
            assert_eq!(len, view.get(&k).map(Vec::len), "seed {seed}: get {k:?}");
        }
        txn.abort();
    }
    let done = env.begin_txn().unwrap();
    done.commit().unwrap();
    assert!(matches!(
        done.visit_from(&db, b"", |_, _| true),
        Err(Error::TxnFinished)
    ));
    assert!(matches!(
        done.get_with(&db, b"k", |_| ()),
        Err(Error::TxnFinished)
    ));
}

/// Whole walks lend leaf after leaf: past long keys and overflow values anywhere in a leaf,
/// and while other threads commit (a walk then goes on through the merging scan from the
/// last key it lent), each sees exactly its snapshot.
#[test]
fn lent_walks_cross_leaves_long_keys_and_concurrent_commits() {
    let env = Arc::new(env());
    let db = env.create_db("d").unwrap();
    // Every 37th key long (kept in overflow pages), every 53rd value too.
    let long_key = |i: u32| {
        let mut k = key(i);
        if i.is_multiple_of(37) {
            k.extend(std::iter::repeat_n(b'x', 3000));
        }
        k
    };
    let fill = env.begin_txn().unwrap();
    for i in (0..2000).step_by(2) {
        let len = if i % 53 == 0 {
            7000
        } else {
            1 + (i as usize * 13) % 120
        };
        fill.put(&db, &long_key(i), &vec![(i % 251) as u8; len])
            .unwrap();
    }
    fill.commit().unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (env, db, stop) = (env.clone(), db.clone(), stop.clone());
        std::thread::spawn(move || {
            let rng = &mut StdRng::seed_from_u64(7);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let t = env.begin_txn().unwrap();
                for _ in 0..4 {
                    let k = long_key(rng.gen_range(0..2200));
                    match rng.gen_bool(0.3) {
                        true => drop(t.delete(&db, &k)),
                        false => drop(t.put(&db, &k, &vec![9; rng.gen_range(1..9000)])),
                    }
                }
                let _ = t.commit();
            }
        })
    };
    for round in 0..40 {
        let txn = env.begin_txn().unwrap();
        // The snapshot, read through the merging scan.
        let want: Vec<(Vec<u8>, Vec<u8>)> = txn.iter(&db).map(|kv| kv.unwrap()).collect();
        let mut got = Vec::new();
        txn.visit_from(&db, b"", |k, v| {
            got.push((k.to_vec(), v.to_vec()));
            true
        })
        .unwrap();
        assert!(
            got == want,
            "round {round}: a whole walk differs from the scan"
        );
        txn.abort();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
}

/// `Txn::len` counts what the transaction sees: its snapshot (other commits made after it
/// began are not counted) and its own writes, few or many, with savepoints rolled back;
/// under read-committed the latest commits; in a database it creates, and with duplicates.
#[test]
fn len_counts_the_entries_the_transaction_sees() {
    let env = env();
    let db = env.create_db("d").unwrap();
    let mut latest = filled(&env, &db, |_| 8);
    for seed in 0..30u64 {
        let rng = &mut StdRng::seed_from_u64(seed);
        let read_committed = seed % 3 == 2;
        let txn = match read_committed {
            true => env.begin_txn_with(Isolation::ReadCommitted).unwrap(),
            false => env.begin_txn().unwrap(),
        };
        let mut view = latest.clone();
        let mut owned = Model::new();
        // Between none and well past the writes checked one by one.
        for _ in 0..[0, 5, 40, 150][seed as usize % 4] {
            let k = key(rng.gen_range(0..2200));
            owned.insert(k.clone(), Vec::new());
            if rng.gen_bool(0.4) {
                txn.delete(&db, &k).unwrap();
                view.remove(&k);
            } else {
                txn.put(&db, &k, b"own").unwrap();
                view.insert(k, b"own".to_vec());
            }
        }
        let sp = txn.savepoint().unwrap();
        for i in 0..3 {
            txn.put(&db, &key(2300 + i), b"undone").unwrap();
        }
        txn.rollback_to(&sp).unwrap();
        if rng.gen_bool(0.5) {
            // Commits after the snapshot: counted only under read-committed.
            let before = latest.clone();
            commit_elsewhere(&env, &db, rng, &mut latest, &owned);
            if read_committed {
                for (k, _) in before.iter().filter(|(k, _)| !latest.contains_key(*k)) {
                    view.remove(k);
                }
                for (k, v) in latest.iter().filter(|(k, _)| !before.contains_key(*k)) {
                    view.insert(k.clone(), v.clone());
                }
            }
        }
        assert_eq!(txn.len(&db).unwrap(), view.len() as u64, "seed {seed}");
        txn.abort();
    }
    // A database the transaction creates, and one with duplicates (pairs are counted).
    let txn = env.begin_txn().unwrap();
    let made = txn.create_db("made").unwrap();
    for i in 0..100 {
        txn.put(&made, &key(i), b"v").unwrap();
    }
    assert_eq!(txn.len(&made).unwrap(), 100);
    let dups = txn
        .create_db_with("dups", beechdb::Duplicates::Sorted)
        .unwrap();
    for v in [&b"a"[..], b"b", b"c"] {
        txn.put(&dups, b"k", v).unwrap();
    }
    txn.commit().unwrap();
    let txn = env.begin_txn().unwrap();
    assert_eq!(txn.len(&made).unwrap(), 100);
    assert_eq!(txn.len(&dups).unwrap(), 3);
    txn.delete(&dups, b"k").unwrap();
    assert_eq!(txn.len(&dups).unwrap(), 0);
    assert_eq!(txn.len(&db).unwrap(), latest.len() as u64);
    txn.abort();
    // A finished transaction, and a database removed in the transaction, are errors.
    assert!(matches!(txn.len(&db), Err(Error::TxnFinished)));
    let txn = env.begin_txn().unwrap();
    txn.remove_db("made").unwrap();
    assert!(matches!(txn.len(&made), Err(Error::DbRemoved)));
    assert_eq!(txn.len(&db).unwrap(), latest.len() as u64);
    txn.abort();
}
