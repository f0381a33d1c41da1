//! Transactional Data Store: commit, abort, isolation, deadlocks, durability and recovery.

mod common;

use beechdb::storage::MemStorage;
use beechdb::{Config, Durability, Env, Error, Isolation};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn tds() -> Config {
    Config::new()
        .page_size(4096)
        .cache_size(1 << 20)
        .transactional(true)
        .log_segment_size(256 << 10)
}

fn mem_env(storage: &MemStorage, cfg: Config) -> Env {
    Env::open_with_storage(Arc::new(storage.clone()), cfg).unwrap()
}

#[test]
fn commit_abort_and_drop() {
    let storage = MemStorage::new();
    let env = mem_env(&storage, tds());
    let a = env.create_db("a").unwrap();
    let b = env.create_db("b").unwrap();
    let t = env.begin_txn().unwrap();
    t.put(&a, b"k", b"1").unwrap();
    t.put(&b, b"k", b"2").unwrap();
    assert_eq!(
        t.get(&a, b"k").unwrap(),
        Some(b"1".to_vec()),
        "a transaction reads its own writes"
    );
    assert_eq!(a.get(b"k").unwrap(), None, "no dirty read");
    let lsn1 = t.commit().unwrap();
    assert_eq!(
        (a.get(b"k").unwrap(), b.get(b"k").unwrap()),
        (Some(b"1".to_vec()), Some(b"2".to_vec()))
    );
    let t = env.begin_txn().unwrap();
    t.put(&a, b"k", b"x").unwrap();
    assert!(t.delete(&b, b"k").unwrap());
    t.abort();
    let t = env.begin_txn().unwrap();
    t.put(&a, b"k", b"y").unwrap();
    drop(t); // aborts
    assert_eq!(
        (a.get(b"k").unwrap(), b.get(b"k").unwrap()),
        (Some(b"1".to_vec()), Some(b"2".to_vec()))
    );
    let lsn2 = {
        let t = env.begin_txn().unwrap();
        t.delete(&a, b"k").unwrap();
        t.commit().unwrap()
    };
    assert!(lsn2 > lsn1, "commit LSNs follow commit order");
    a.put(b"auto", b"commit").unwrap();
    assert!(matches!(a.insert(b"auto", b"again"), Err(Error::KeyExists)));
    assert!(a.delete(b"auto").unwrap());
    assert!(!a.delete(b"auto").unwrap());
    env.close().unwrap();
    let env = mem_env(&storage, tds());
    let a = env.open_db("a").unwrap();
    assert_eq!(a.get(b"k").unwrap(), None);
    assert_eq!(
        env.open_db("b").unwrap().get(b"k").unwrap(),
        Some(b"2".to_vec())
    );
}

#[test]
fn snapshot_isolation() {
    let env = mem_env(&MemStorage::new(), tds());
    let db = env.create_db("d").unwrap();
    db.put(b"x", b"0").unwrap();
    db.put(b"y", b"0").unwrap();
    let reader = env.begin_txn().unwrap();
    let writer = env.begin_txn().unwrap();
    writer.put(&db, b"x", b"1").unwrap();
    writer.delete(&db, b"y").unwrap();
    writer.put(&db, b"z", b"new").unwrap();
    assert_eq!(
        reader.get(&db, b"x").unwrap(),
        Some(b"0".to_vec()),
        "no dirty read"
    );
    writer.commit().unwrap();
    // Repeatable, and unaffected by the later commit: the snapshot still sees the old state.
    assert_eq!(reader.get(&db, b"x").unwrap(), Some(b"0".to_vec()));
    assert_eq!(reader.get(&db, b"y").unwrap(), Some(b"0".to_vec()));
    assert_eq!(reader.get(&db, b"z").unwrap(), None);
    // Range scans see the same snapshot, plus the transaction's own writes.
    let all: Vec<Vec<u8>> = reader.range(&db, ..).map(|r| r.unwrap().0).collect();
    assert_eq!(all, vec![b"x".to_vec(), b"y".to_vec()]);
    let own = env.begin_txn().unwrap();
    own.put(&db, b"a", b"mine").unwrap();
    own.delete(&db, b"z").unwrap();
    let keys: Vec<Vec<u8>> = own
        .range(&db, &b"a"[..]..&b"zz"[..])
        .map(|r| r.unwrap().0)
        .collect();
    assert_eq!(keys, vec![b"a".to_vec(), b"x".to_vec()]);
    own.abort();
    let rc = env.begin_txn_with(Isolation::ReadCommitted).unwrap();
    assert_eq!(rc.get(&db, b"x").unwrap(), Some(b"1".to_vec()));
    drop(reader);
    let fresh = env.begin_txn().unwrap();
    assert_eq!(fresh.get(&db, b"y").unwrap(), None);
}

#[test]
fn lost_update_is_prevented_and_waiters_follow_the_holder() {
    let env = mem_env(&MemStorage::new(), tds());
    let db = env.create_db("d").unwrap();
    db.put(b"counter", b"0").unwrap();
    // Both read, both write: the second writer must not overwrite blindly.
    let t1 = env.begin_txn().unwrap();
    let t2 = env.begin_txn().unwrap();
    t1.get_for_update(&db, b"counter").unwrap();
    let env2 = env.clone();
    let db2 = db.clone();
    let waiter = std::thread::spawn(move || {
        let _ = &env2;
        let r = t2.put(&db2, b"counter", b"2");
        (r, t2)
    });
    std::thread::sleep(Duration::from_millis(50));
    t1.put(&db, b"counter", b"1").unwrap();
    t1.commit().unwrap();
    let (r, t2) = waiter.join().unwrap();
    assert!(
        matches!(r, Err(Error::Conflict)),
        "the waiter gets Conflict when the holder commits: {r:?}"
    );
    assert!(matches!(&r, Err(e) if e.is_retryable()));
    t2.abort(); // as after any retryable error
                // If the holder aborts instead, the waiter proceeds.
    let t3 = env.begin_txn().unwrap();
    t3.put(&db, b"counter", b"3").unwrap();
    let db3 = db.clone();
    let t4 = env.begin_txn().unwrap();
    let waiter = std::thread::spawn(move || {
        t4.put(&db3, b"counter", b"4").unwrap();
        t4.commit().unwrap()
    });
    std::thread::sleep(Duration::from_millis(50));
    t3.abort();
    waiter.join().unwrap();
    assert_eq!(db.get(b"counter").unwrap(), Some(b"4".to_vec()));
}

#[test]
fn deadlock_is_detected_promptly() {
    let env = mem_env(
        &MemStorage::new(),
        tds().lock_timeout(Duration::from_secs(30)),
    );
    let db = env.create_db("d").unwrap();
    let t1 = env.begin_txn().unwrap();
    let t2 = env.begin_txn().unwrap();
    t1.put(&db, b"a", b"1").unwrap();
    t2.put(&db, b"b", b"2").unwrap();
    let db1 = db.clone();
    let start = Instant::now();
    let h = std::thread::spawn(move || {
        let r = t1.put(&db1, b"b", b"1");
        (r, t1)
    });
    std::thread::sleep(Duration::from_millis(100));
    let r2 = t2.put(&db, b"a", b"2");
    assert!(matches!(r2, Err(Error::Deadlock)), "{r2:?}");
    t2.abort();
    let (r1, t1) = h.join().unwrap();
    r1.unwrap();
    t1.commit().unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "detected in {:?}",
        start.elapsed()
    );
    assert_eq!(db.get(b"b").unwrap(), Some(b"1".to_vec()));
    let t5 = env.begin_txn().unwrap();
    t5.put(&db, b"c", b"5").unwrap();
    let env_short = mem_env(
        &MemStorage::new(),
        tds().lock_timeout(Duration::from_millis(30)),
    );
    let d2 = env_short.create_db("d").unwrap();
    let h1 = env_short.begin_txn().unwrap();
    h1.put(&d2, b"k", b"v").unwrap();
    let h2 = env_short.begin_txn().unwrap();
    assert!(matches!(h2.put(&d2, b"k", b"w"), Err(Error::LockTimeout)));
}

#[test]
fn background_checkpoints_by_time_and_volume() {
    let storage = MemStorage::new();
    let cfg = tds().checkpoint_interval(Duration::from_millis(50));
    let env = mem_env(&storage, cfg.clone());
    let db = env.create_db("d").unwrap();
    let before = env.stat().unwrap().checkpoints;
    db.put(b"k", b"v").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        env.stat().unwrap().checkpoints > before,
        "a checkpoint by time"
    );
    // By volume: 64 KiB of log with a long interval.
    let env2 = mem_env(
        &MemStorage::new(),
        tds()
            .checkpoint_interval(Duration::from_secs(3600))
            .checkpoint_log_bytes(64 << 10),
    );
    let d2 = env2.create_db("d").unwrap();
    let start = env2.stat().unwrap().checkpoints;
    for i in 0..2000u32 {
        d2.put(&i.to_be_bytes(), &[0u8; 100]).unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        env2.stat().unwrap().checkpoints > start,
        "a checkpoint by log volume"
    );
    // Dropping the last handle releases the environment at once (the checkpointer holds none).
    drop(db);
    drop(env);
    let again = Env::open_with_storage(Arc::new(storage), cfg).unwrap();
    assert_eq!(
        again.open_db("d").unwrap().get(b"k").unwrap(),
        Some(b"v".to_vec())
    );
}

#[test]
fn log_segments_are_prepared_ahead_and_recover_like_any_other() {
    let storage = MemStorage::new();
    let cfg = tds().log_segment_size(64 << 10).keep_logs(true);
    let env = mem_env(&storage, cfg.clone());
    let db = env.create_db("d").unwrap();
    for i in 0..3000u32 {
        db.put(&i.to_be_bytes(), &[i as u8; 100]).unwrap();
        if i % 100 == 0 {
            // Time for the background thread, as commits on other threads would give it.
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let t = env.stat().unwrap().txn.unwrap().log.unwrap();
    assert!(t.segments_prepared >= 3, "segments prepared ahead: {t:?}");
    assert!(t.flush_nanos > 0, "flush time is counted: {t:?}");
    drop(db);
    // The log as a crash leaves it (no checkpoint since the start) replays in full.
    let image = storage.crash_image(1);
    drop(env);
    let again = mem_env(&image, cfg);
    let db = again.open_db("d").unwrap();
    for i in (0..3000u32).step_by(7) {
        assert_eq!(db.get(&i.to_be_bytes()).unwrap(), Some(vec![i as u8; 100]));
    }
    assert!(again.verify().unwrap().is_clean());
}

/// Segments of 8 MiB, and NOSYNC commits (each test commit is 1 MiB of log).
fn disk_log_config() -> Config {
    tds()
        .log_segment_size(8 << 20)
        .durability(Durability::NoSync)
}

#[test]
fn a_spare_that_cannot_be_prepared_leaves_commits_to_create_segments() {
    let dir = tempfile::tempdir().unwrap();
    // A directory where the spare file would go: preparing it fails every time.
    std::fs::create_dir(dir.path().join("log.spare")).unwrap();
    let env = Env::open(dir.path(), disk_log_config()).unwrap();
    let db = env.create_db("d").unwrap();
    let value = vec![5u8; 1 << 20];
    for i in 0..20u32 {
        db.put(&i.to_be_bytes(), &value).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    let t = env.stat().unwrap().txn.unwrap().log.unwrap();
    assert_eq!(t.segments_prepared, 0);
    assert!(t.segments_created_inline >= 2, "{t:?}");
    drop(db);
    env.close().unwrap();
    let env = Env::open(dir.path(), disk_log_config()).unwrap();
    let db = env.open_db("d").unwrap();
    assert_eq!(db.get(&19u32.to_be_bytes()).unwrap(), Some(value));
}

#[test]
fn close_waits_for_a_spare_being_prepared() {
    // 64 MiB segments: zero-filling the spare takes longer than the small checkpoint of
    // close, which therefore has to wait for it.
    let cfg = disk_log_config().log_segment_size(64 << 20);
    for round in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::open(dir.path(), cfg.clone()).unwrap();
        let db = env.create_db("d").unwrap();
        // Past half of the first segment with one key rewritten (a lot of log, a small
        // tree): the background thread starts on the spare.
        for _ in 0..33 {
            db.put(b"k", &vec![1u8; 1 << 20]).unwrap();
        }
        drop(db);
        env.close().unwrap();
        // Once closed, no file of the environment changes: a spare is whole or absent.
        let spare = dir.path().join("log.spare");
        let len = std::fs::metadata(&spare).map(|m| m.len()).ok();
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(
            std::fs::metadata(&spare).map(|m| m.len()).ok(),
            len,
            "round {round}: the spare changed after close"
        );
        assert!(
            len.is_none_or(|l| l == 64 + (64 << 20)),
            "round {round}: {len:?}"
        );
    }
}

#[test]
fn sync_commits_survive_power_loss() {
    for seed in 0..20u64 {
        let storage = MemStorage::new();
        let env = mem_env(&storage, tds());
        let db = env.create_db("d").unwrap();
        let mut acked = Vec::new();
        for i in 0..200u64 {
            let t = env.begin_txn().unwrap();
            t.put(&db, &i.to_be_bytes(), &[seed as u8; 100]).unwrap();
            t.put(&db, &(i + 1_000_000).to_be_bytes(), b"pair").unwrap();
            let d = match i % 3 {
                0 => Durability::Sync,
                1 => Durability::WriteNoSync,
                _ => Durability::NoSync,
            };
            t.commit_with(d).unwrap();
            acked.push((i, d));
        }
        common::kill(&storage, env);
        let image = storage.crash_image(seed);
        let env = mem_env(&image, tds());
        let db = env.open_db("d").unwrap();
        let last_sync = acked
            .iter()
            .rev()
            .find(|(_, d)| *d == Durability::Sync)
            .unwrap()
            .0;
        let mut prefix_ended = false;
        for i in 0..200u64 {
            let present = db.get(&i.to_be_bytes()).unwrap().is_some();
            let pair = db.get(&(i + 1_000_000).to_be_bytes()).unwrap().is_some();
            assert_eq!(
                present, pair,
                "seed {seed}: transaction {i} is partly present"
            );
            if i <= last_sync {
                assert!(
                    present,
                    "seed {seed}: commit {i} acknowledged before a SYNC commit is lost"
                );
            }
            assert!(
                !(present && prefix_ended),
                "seed {seed}: recovered commits are not a prefix"
            );
            prefix_ended |= !present;
        }
        env.sync().unwrap();
        assert!(env.verify().unwrap().is_clean());
    }
}

/// Auto-committed writes take no key lock: they check, log and apply within one hold of
/// the exclusive lock. They must still wait for a transaction holding the key, make a
/// later snapshot writer of the key conflict, and decide "present?" atomically with the
/// write: of racing inserts of a key exactly one succeeds, of racing deletes exactly one
/// finds it.
#[test]
fn auto_commits_wait_for_transactions_and_decide_presence_atomically() {
    let env = mem_env(&MemStorage::new(), tds());
    let db = env.create_db("d").unwrap();

    // Behind a transaction's key lock: the auto-commit lands after the holder.
    let t = env.begin_txn().unwrap();
    t.put(&db, b"held", b"txn").unwrap();
    let db2 = db.clone();
    let auto = std::thread::spawn(move || db2.put(b"held", b"auto"));
    let lock_waits = || env.stat().unwrap().txn.unwrap().locks.waits;
    let began = Instant::now();
    while lock_waits() == 0 {
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "the auto-commit never waited"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(!auto.is_finished(), "the auto-commit waits for the holder");
    t.commit().unwrap();
    auto.join().unwrap().unwrap();
    assert_eq!(db.get(b"held").unwrap(), Some(b"auto".to_vec()));

    // After a snapshot: a transaction writing a key an auto-commit changed conflicts.
    let snap = env.begin_txn().unwrap();
    assert_eq!(snap.get(&db, b"held").unwrap(), Some(b"auto".to_vec()));
    db.put(b"held", b"auto again").unwrap();
    assert!(matches!(
        snap.put(&db, b"held", b"stale"),
        Err(Error::Conflict)
    ));
    snap.abort();

    let threads = 4;
    let keys = 300u32;
    let race = |delete: bool| -> Vec<u32> {
        let wins: Vec<Vec<u32>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|_| {
                    let db = db.clone();
                    s.spawn(move || {
                        (0..keys)
                            .filter(|k| {
                                let key = format!("race{k:05}");
                                if delete {
                                    db.delete(key.as_bytes()).unwrap()
                                } else {
                                    match db.insert(key.as_bytes(), b"v") {
                                        Ok(()) => true,
                                        Err(Error::KeyExists) => false,
                                        Err(e) => panic!("{e}"),
                                    }
                                }
                            })
                            .collect()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all: Vec<u32> = wins.concat();
        all.sort_unstable();
        all
    };
    assert_eq!(
        race(false),
        (0..keys).collect::<Vec<_>>(),
        "one insert per key won"
    );
    assert_eq!(
        race(true),
        (0..keys).collect::<Vec<_>>(),
        "one delete per key found it"
    );
    assert_eq!(db.len().unwrap(), 1);
    let txn = env.stat().unwrap().txn.unwrap();
    assert_eq!(
        txn.locks.waits, 1,
        "only the wait behind the transaction: {txn:?}"
    );
}
