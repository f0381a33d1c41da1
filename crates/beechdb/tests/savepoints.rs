//! Savepoints and partial rollback against a model: random puts (one at a time and in
//! sorted batches, `Txn::put_sorted`), deletes, savepoints, rollbacks and releases (databases created and removed among them), every read of the
//! transaction (gets and scans in both directions) checked against the model at each step,
//! then the commit checked against the model too (with a cache of 16 pages, a commit of
//! more than 8 writes goes in batches); the same with a memory budget so small that the
//! writes spill to the log. Also: writes while iterating, and a transaction shared
//! between threads.

use beechdb::storage::MemStorage;
use beechdb::{Config, Db, Env, Error, Savepoint, Txn};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;

type Data = BTreeMap<Vec<u8>, Vec<u8>>;

/// What the transaction should see: each database's contents, `None` when removed.
#[derive(Clone, PartialEq, Debug)]
struct View {
    main: Data,
    extra: Option<Data>,
}

fn config() -> Config {
    Config::new()
        .page_size(4096)
        .cache_size(64 << 10)
        .transactional(true)
        .log_segment_size(64 << 10)
}

fn check(t: &Txn, main: &Db, extra: Option<&Db>, view: &View, rng: &mut impl Rng, at: &str) {
    let all: Data = t.iter(main).map(|kv| kv.unwrap()).collect();
    assert_eq!(all, view.main, "{at}: scan");
    let rev: Vec<_> = t.range_rev(main, ..).map(|kv| kv.unwrap().0).collect();
    assert!(rev.iter().rev().eq(view.main.keys()), "{at}: reverse scan");
    let lo = key(rng.gen_range(0..60));
    let part: Data = t.range(main, &lo[..]..).map(|kv| kv.unwrap()).collect();
    assert_eq!(
        part,
        view.main
            .range(lo..)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        "{at}"
    );
    let k = key(rng.gen_range(0..60));
    assert_eq!(
        t.get(main, &k).unwrap().as_ref(),
        view.main.get(&k),
        "{at}: get"
    );
    match (extra, &view.extra) {
        (Some(db), Some(data)) => {
            let got: Data = t.iter(db).map(|kv| kv.unwrap()).collect();
            assert_eq!(&got, data, "{at}: extra");
        }
        (Some(db), None) => assert!(matches!(t.get(db, b"x"), Err(Error::DbRemoved)), "{at}"),
        (None, _) => {}
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:03}").into_bytes()
}

#[test]
fn savepoints_match_a_model() {
    let (spills, _, large) = model_run(config(), 40, 120, 300);
    assert_eq!(spills, 0, "nothing spills in memory");
    // The cache holds 16 pages: commits of more than 8 writes go in batches from memory.
    assert!(large > 50, "{large} commits in batches");
}

/// With writes past the memory budget spilled to the log: reads of the transaction's own
/// writes, rollbacks past spills and scans merge the spilled runs, and the commit is applied
/// from them.
#[test]
fn savepoints_match_a_model_when_writes_spill() {
    let (spills, merges, _) = model_run(config().txn_memory(16 << 10), 4000, 800, 100);
    assert!(spills > 300, "writes spilled {spills} times");
    eprintln!("{spills} spills, {merges} merges");
    assert!(merges > 10, "runs merged {merges} times");
}

/// The same with the log in memory: writes spill to scratch files instead.
#[test]
fn savepoints_match_a_model_when_writes_spill_with_the_log_in_memory() {
    let config = config().in_memory_log(true).txn_memory(16 << 10);
    let (spills, merges, _) = model_run(config, 4000, 800, 40);
    assert!(spills > 100, "writes spilled {spills} times");
    assert!(merges > 3, "runs merged {merges} times");
}

/// Runs `seeds` random transactions of up to `steps` steps, with values up to `max_value`
/// bytes; returns how many times writes spilled to the log, runs were merged, and
/// transactions that did not spill committed in batches.
fn model_run(config: Config, max_value: usize, steps: usize, seeds: u64) -> (u64, u64, u64) {
    let (mut spills, mut merges, mut large) = (0, 0, 0);
    for seed in 0..seeds {
        let config = || config.clone();
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let storage = MemStorage::new();
        let env = Env::open_with_storage(Arc::new(storage.clone()), config()).unwrap();
        let main = env.create_db("main").unwrap();
        let mut committed = View {
            main: Data::new(),
            extra: None,
        };
        for i in 0..40 {
            main.put(&key(i * 3), b"base").unwrap();
            committed.main.insert(key(i * 3), b"base".to_vec());
        }
        let t = env.begin_txn().unwrap();
        let mut view = committed.clone();
        let mut extra: Option<Db> = None;
        // Live savepoints with the view each was taken at.
        let mut marks: Vec<(Savepoint, View, Option<Db>)> = Vec::new();
        for step in 0..rng.gen_range(10..steps) {
            let at = format!("seed {seed} step {step}");
            match rng.gen_range(0..20) {
                0..=7 => {
                    let k = key(rng.gen_range(0..60));
                    let v = vec![rng.gen::<u8>(); rng.gen_range(0..max_value)];
                    t.put(&main, &k, &v).unwrap();
                    view.main.insert(k, v);
                }
                8..=10 => {
                    let k = key(rng.gen_range(0..60));
                    let existed = t.delete(&main, &k).unwrap();
                    assert_eq!(existed, view.main.remove(&k).is_some(), "{at}: delete");
                }
                11..=12 => marks.push((t.savepoint().unwrap(), view.clone(), extra.clone())),
                13..=14 if !marks.is_empty() => {
                    let i = rng.gen_range(0..marks.len());
                    t.rollback_to(&marks[i].0).unwrap();
                    view = marks[i].1.clone();
                    extra = marks[i].2.clone();
                    marks.truncate(i + 1);
                }
                15 if !marks.is_empty() => {
                    let i = rng.gen_range(0..marks.len());
                    let gone = marks.split_off(i);
                    let (sp, _, _) = gone.into_iter().next().unwrap();
                    t.release(sp).unwrap();
                }
                16 => match &view.extra {
                    None => {
                        let db = t.create_db("extra").unwrap();
                        t.put(&db, b"x", b"1").unwrap();
                        view.extra = Some([(b"x".to_vec(), b"1".to_vec())].into());
                        extra = Some(db);
                    }
                    Some(_) => {
                        t.remove_db("extra").unwrap();
                        view.extra = None;
                    }
                },
                17 => {
                    if let (Some(db), Some(data)) = (&extra, &mut view.extra) {
                        let k = key(rng.gen_range(0..10));
                        t.put(db, &k, b"e").unwrap();
                        data.insert(k, b"e".to_vec());
                    }
                }
                18 => {
                    // Mostly ascending (written in one step when none was written before),
                    // sometimes not (written one at a time, the last of a key winning).
                    let mut batch: Vec<(Vec<u8>, Vec<u8>)> = (0..rng.gen_range(1..12))
                        .map(|_| {
                            let v = vec![rng.gen::<u8>(); rng.gen_range(0..max_value)];
                            (key(rng.gen_range(0..60)), v)
                        })
                        .collect();
                    if rng.gen_bool(0.7) {
                        batch.sort();
                        batch.dedup_by(|a, b| a.0 == b.0);
                    }
                    t.put_sorted(&main, batch.clone()).unwrap();
                    view.main.extend(batch);
                }
                _ => {}
            }
            // A handle from a rolled-back create is closed when its database is gone.
            let extra_now = extra.as_ref().filter(|_| view.extra.is_some());
            check(&t, &main, extra_now, &view, &mut rng, &at);
        }
        if rng.gen_ratio(1, 4) {
            t.abort();
            view = committed;
        } else {
            t.commit().unwrap();
        }
        let after: Data = main.iter().map(|kv| kv.unwrap()).collect();
        assert_eq!(after, view.main, "seed {seed}: committed");
        match (env.open_db("extra"), &view.extra) {
            (Ok(db), Some(data)) => {
                assert_eq!(&db.iter().map(|kv| kv.unwrap()).collect::<Data>(), data)
            }
            (Err(Error::DbNotFound(_)), None) => {}
            (r, v) => panic!("seed {seed}: extra {:?} vs {v:?}", r.map(|_| ())),
        }
        let counts = env.stat().unwrap().txn.unwrap().txns;
        (spills, merges) = (spills + counts.spills, merges + counts.run_merges);
        large += counts.large_commits;
        // And the log says the same (a log in memory: the checkpoint).
        if config().mode() == beechdb::Mode::TransactionalInMemoryLog {
            env.sync().unwrap();
        }
        drop(main);
        let storage = beechdb::storage::MemStorage::restart_process(&storage);
        drop(env);
        let env = Env::open_with_storage(Arc::new(storage), config()).unwrap();
        let main = env.open_db("main").unwrap();
        let after: Data = main.iter().map(|kv| kv.unwrap()).collect();
        assert_eq!(after, view.main, "seed {seed}: recovered");
    }
    (spills, merges, large)
}

#[test]
fn misused_savepoints_are_refused() {
    let env = Env::open_with_storage(Arc::new(MemStorage::new()), config()).unwrap();
    let db = env.create_db("d").unwrap();
    let (a, b) = (env.begin_txn().unwrap(), env.begin_txn().unwrap());
    let sp_a = a.savepoint().unwrap();
    assert!(matches!(
        b.rollback_to(&sp_a),
        Err(Error::InvalidArgument(_))
    ));
    let inner = a.savepoint().unwrap();
    a.put(&db, b"k", b"v").unwrap();
    a.rollback_to(&sp_a).unwrap();
    assert!(
        matches!(a.rollback_to(&inner), Err(Error::InvalidArgument(_))),
        "rolled back past"
    );
    a.release(sp_a).unwrap();
    a.commit().unwrap();
    assert!(matches!(a.savepoint(), Err(Error::TxnFinished)));
    assert_eq!(db.get(b"k").unwrap(), None);
}

#[test]
fn a_transaction_writes_while_it_iterates() {
    let env = Env::open_with_storage(Arc::new(MemStorage::new()), config()).unwrap();
    let db = env.create_db("d").unwrap();
    for i in 0..2000u32 {
        db.put(&i.to_be_bytes(), b"old").unwrap();
    }
    let t = env.begin_txn().unwrap();
    // Rewrite every entry while scanning, and add one far ahead that the scan must meet.
    let mut seen = 0u32;
    for kv in t.iter(&db) {
        let (k, v) = kv.unwrap();
        if k == 5000u32.to_be_bytes() {
            assert_eq!(v, b"added");
        } else {
            assert_eq!(v, b"old", "an entry not yet rewritten");
            t.put(&db, &k, b"new").unwrap();
        }
        if seen == 10 {
            t.put(&db, &5000u32.to_be_bytes(), b"added").unwrap();
        }
        seen += 1;
    }
    assert_eq!(seen, 2001);
    // The iterator is owned: it outlives the borrow of the transaction handle.
    let iter = t.range(&db, &1990u32.to_be_bytes()[..]..);
    let tail: Vec<_> = iter.map(|kv| kv.unwrap().1).collect();
    assert_eq!(tail.len(), 11);
    assert!(tail[..10].iter().all(|v| v == b"new"));
    t.commit().unwrap();
    assert_eq!(db.get(&7u32.to_be_bytes()).unwrap(), Some(b"new".to_vec()));
}

#[test]
fn a_transaction_shared_between_threads() {
    let env = Env::open_with_storage(Arc::new(MemStorage::new()), config()).unwrap();
    let db = env.create_db("d").unwrap();
    let t = Arc::new(env.begin_txn().unwrap());
    let workers: Vec<_> = (0..4u32)
        .map(|w| {
            let (t, db) = (t.clone(), db.clone());
            std::thread::spawn(move || {
                for i in 0..250u32 {
                    t.put(&db, &(w * 1000 + i).to_be_bytes(), b"v").unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(t.iter(&db).count(), 1000);
    t.commit().unwrap();
    assert_eq!(db.len().unwrap(), 1000);
    assert!(matches!(t.put(&db, b"late", b"v"), Err(Error::TxnFinished)));
}

/// `Txn::changes_to` grows with each write to its database (a put, a delete, even of a
/// key that is absent) and with every rollback to a savepoint, and stays put for reads,
/// releases and writes to other databases: what lets a reader keep what it read of a
/// database while the number is unchanged.
#[test]
fn changes_to_a_database_count_the_transactions_own_changes() {
    let env = Env::open_with_storage(Arc::new(MemStorage::new()), config()).unwrap();
    let (a, b) = (env.create_db("a").unwrap(), env.create_db("b").unwrap());
    a.put(b"k", b"committed").unwrap();
    let t = env.begin_txn().unwrap();
    assert_eq!(
        (t.changes_to(&a).unwrap(), t.changes_to(&b).unwrap()),
        (0, 0)
    );
    t.put(&a, b"x", b"1").unwrap();
    let after_put = t.changes_to(&a).unwrap();
    assert!(after_put > 0);
    assert_eq!(t.changes_to(&b).unwrap(), 0, "a write to another database");
    t.get(&a, b"x").unwrap();
    t.iter(&a).for_each(drop);
    assert_eq!(t.changes_to(&a).unwrap(), after_put, "reads change nothing");
    t.put(&b, b"y", b"2").unwrap();
    assert_eq!(t.changes_to(&a).unwrap(), after_put, "a write to b");
    t.delete(&a, b"absent").unwrap();
    let after_delete = t.changes_to(&a).unwrap();
    assert!(after_delete > after_put);
    let sp = t.savepoint().unwrap();
    t.release(sp).unwrap();
    assert_eq!(t.changes_to(&a).unwrap(), after_delete, "a release");
    let sp = t.savepoint().unwrap();
    t.rollback_to(&sp).unwrap();
    let after_rollback = t.changes_to(&a).unwrap();
    assert!(after_rollback > after_delete, "a rollback, even of nothing");
    assert_eq!(
        t.changes_to(&b).unwrap(),
        after_rollback,
        "a rollback counts everywhere"
    );
    t.commit().unwrap();
    assert!(matches!(t.changes_to(&a), Err(Error::TxnFinished)));
}

/// `put_sorted` refuses a database with duplicates, and a batch holding a key too large,
/// writing none of it.
#[test]
fn put_sorted_refuses_what_put_would() {
    let env = Env::open_with_storage(Arc::new(MemStorage::new()), config()).unwrap();
    let dups = env
        .create_db_with("d", beechdb::Duplicates::Sorted)
        .unwrap();
    let plain = env.create_db("p").unwrap();
    let t = env.begin_txn().unwrap();
    let entries = vec![(b"a".to_vec(), b"1".to_vec())];
    assert!(matches!(
        t.put_sorted(&dups, entries),
        Err(Error::InvalidArgument(_))
    ));
    let too_long = vec![b'z'; beechdb::MAX_KEY_LEN + 1];
    let entries = vec![(b"a".to_vec(), b"1".to_vec()), (too_long, b"2".to_vec())];
    assert!(matches!(
        t.put_sorted(&plain, entries),
        Err(Error::KeyTooLarge { .. })
    ));
    t.commit().unwrap();
    assert_eq!(dups.len().unwrap(), 0);
    assert_eq!(plain.len().unwrap(), 0);
}
