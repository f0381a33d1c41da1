//! A cache-miss storm with a writer running: readers of a database far larger than the
//! cache load the pages they miss with no lock held (counted in `EnvStat`), and see every
//! value right, while the writer rewrites another part of the tree and evicts; and an
//! evicted dirty page's write, held stuck in storage, stops neither readers nor writers.

use beechdb::storage::{HookStorage, MemStorage};
use beechdb::{Config, Durability, Env};
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn value(k: u32) -> Vec<u8> {
    format!("value of {k:08} ").repeat(8).into_bytes()
}

/// A NOSYNC environment of 4 KiB pages with a cache of `cache` bytes and a database of
/// `records` records (about 28 to a page), synced.
fn nosync_env(cache: usize, records: u32) -> (Env, beechdb::Db) {
    env_of(nosync_config(cache), records)
}

fn nosync_config(cache: usize) -> Config {
    Config::new()
        .page_size(4096)
        .cache_size(cache)
        .transactional(true)
        .durability(Durability::NoSync)
}

/// An environment of configuration `cfg` with a database of `records` records, synced.
fn env_of(cfg: Config, records: u32) -> (Env, beechdb::Db) {
    let env = Env::open_with_storage(Arc::new(MemStorage::new()), cfg).unwrap();
    let db = env.create_db("d").unwrap();
    for k in 0..records {
        db.put(&k.to_be_bytes(), &value(k)).unwrap();
    }
    env.sync().unwrap();
    (env, db)
}

/// A 64-page cache and a database of 40,000 records (about 1,600 pages).
fn far_larger_than_the_cache() -> (Env, beechdb::Db) {
    nosync_env(256 << 10, 40_000)
}

/// Every key of `written` reads back its value.
fn assert_reads_back(db: &beechdb::Db, written: std::collections::BTreeMap<u32, Vec<u8>>) {
    for (k, v) in written {
        assert_eq!(db.get(&k.to_be_bytes()).unwrap(), Some(v), "key {k}");
    }
}

/// Pages loaded between two statistics: by readers with no lock, and under the exclusive
/// lock (every miss no reader loaded unlocked); printed.
fn loads_between(before: &beechdb::EnvStat, after: &beechdb::EnvStat) -> (u64, u64) {
    let unlocked = after.cache_loads_unlocked - before.cache_loads_unlocked;
    let locked = (after.cache_misses - after.cache_loads_unlocked)
        - (before.cache_misses - before.cache_loads_unlocked);
    eprintln!("{unlocked} pages loaded with no lock, {locked} under the exclusive lock");
    (unlocked, locked)
}

#[test]
fn readers_load_misses_without_the_exclusive_lock() {
    let (env, db) = far_larger_than_the_cache();
    let before = env.stat().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut round = 0u32;
            while !stop.load(Ordering::Relaxed) {
                for k in 40_000..42_000u32 {
                    db.put(&k.to_be_bytes(), &[round as u8; 300]).unwrap();
                }
                round += 1;
            }
            round
        })
    };
    let readers: Vec<_> = (0..3u64)
        .map(|r| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(r);
                for _ in 0..20_000 {
                    let k = rng.gen_range(0..40_000u32);
                    assert_eq!(db.get(&k.to_be_bytes()).unwrap(), Some(value(k)));
                }
            })
        })
        .collect();
    for r in readers {
        r.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = writer.join().unwrap();
    let after = env.stat().unwrap();
    let unlocked = after.cache_loads_unlocked - before.cache_loads_unlocked;
    let locked = after.cache_reads_locked - before.cache_reads_locked;
    let evictions = after.cache_reader_evictions - before.cache_reader_evictions;
    eprintln!(
        "{unlocked} pages loaded by readers with no lock, {locked} loaded under the exclusive \
         lock, {evictions} clean evictions by readers, {rounds} writer rounds"
    );
    assert!(rounds >= 1);
    assert!(
        unlocked > 20_000,
        "most of 60,000 random reads miss a 64-page cache"
    );
    assert!(
        locked * 1000 < unlocked,
        "readers almost never load under the exclusive lock"
    );
    assert!(
        evictions * 40 < unlocked,
        "and take it seldom, without I/O, to evict"
    );
    assert!(env.verify().unwrap().is_clean());
}

#[test]
fn stat_of_a_large_tree_walks_within_the_cache_beside_a_writer() {
    let cfg = Config::new().page_size(4096).cache_size(256 << 10);
    let env = Env::open_with_storage(Arc::new(MemStorage::new()), cfg).unwrap();
    let db = env.create_db("d").unwrap();
    for k in 0..40_000u32 {
        db.put(&k.to_be_bytes(), &value(k)).unwrap();
    }
    env.sync().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for k in 40_000..40_500u32 {
                    db.put(&k.to_be_bytes(), b"w").unwrap();
                }
            }
        })
    };
    let mut peak = 0;
    for _ in 0..3 {
        let st = db.stat().unwrap();
        assert!(st.leaf_pages > 500 && st.depth >= 3, "{st:?}");
        peak = peak.max(env.stat().unwrap().cache_resident_pages);
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    // 64 pages of budget; loaded pages may overshoot by a quarter and 64 before eviction.
    assert!(
        peak <= 64 + 16 + 64 + 8,
        "{peak} pages resident while walking"
    );
}

#[test]
fn writers_load_misses_before_taking_the_exclusive_lock() {
    let (env, db) = far_larger_than_the_cache();
    let before = env.stat().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let mut written = std::collections::BTreeMap::new();
    for i in 0..5_000u32 {
        let k = rng.gen_range(0..40_000u32);
        let v = format!("rewritten {i}").into_bytes();
        if i % 2 == 0 {
            db.put(&k.to_be_bytes(), &v).unwrap();
        } else {
            // An explicit transaction commits through the same path.
            let txn = env.begin_txn().unwrap();
            txn.put(&db, &k.to_be_bytes(), &v).unwrap();
            txn.commit().unwrap();
        }
        written.insert(k, v);
    }
    let (unlocked, locked) = loads_between(&before, &env.stat().unwrap());
    assert!(
        unlocked > 2_000,
        "most of 5,000 random writes miss a 64-page cache"
    );
    assert!(
        locked * 50 < unlocked,
        "a commit loads the pages it writes before it takes the exclusive lock"
    );
    assert_reads_back(&db, written);
}

/// A transaction of hundreds of writes on a database far larger than the cache (2,048
/// pages) loads the pages of all of them with no lock before its commit takes the exclusive
/// lock, as long as they fill at most half the cache.
#[test]
fn large_commits_load_their_pages_before_taking_the_exclusive_lock() {
    let (env, db) = nosync_env(8 << 20, 240_000);
    let before = env.stat().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let mut written = std::collections::BTreeMap::new();
    for round in 0..4 {
        let txn = env.begin_txn().unwrap();
        for _ in 0..600 {
            let k = rng.gen_range(0..240_000u32);
            let v = format!("round {round}").into_bytes();
            txn.put(&db, &k.to_be_bytes(), &v).unwrap();
            written.insert(k, v);
        }
        txn.commit().unwrap();
    }
    let (unlocked, locked) = loads_between(&before, &env.stat().unwrap());
    assert!(unlocked > 1_000, "2,400 random writes miss the cache");
    assert!(
        locked * 20 < unlocked,
        "writes past the first 256 of a commit are loaded before it takes the lock"
    );
    assert_reads_back(&db, written);
}

/// A transaction with more writes than a commit can load before taking the lock (half the
/// cache's pages) commits in batches, each loaded first, though it never outgrew its memory
/// budget: no page is read under the exclusive lock, and a reader sees it all or not at all.
#[test]
fn commits_larger_than_the_cache_apply_in_batches_loaded_before_the_lock() {
    commit_larger_than_the_cache(nosync_config(1 << 20));
}

/// As above with the log in memory.
#[test]
fn commits_larger_than_the_cache_apply_in_batches_with_the_log_in_memory() {
    commit_larger_than_the_cache(nosync_config(1 << 20).in_memory_log(true));
}

fn commit_larger_than_the_cache(cfg: Config) {
    let (env, db) = env_of(cfg, 240_000);
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let keys: std::collections::BTreeSet<u32> =
        (0..3_000).map(|_| rng.gen_range(0..240_000u32)).collect();
    let before = env.stat().unwrap();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut snapshots = 0;
            while !done.load(Ordering::Relaxed) {
                let t = env.begin_txn().unwrap();
                let seen: std::collections::BTreeSet<Vec<u8>> = keys
                    .iter()
                    .map(|k| t.get(&db, &k.to_be_bytes()).unwrap().unwrap())
                    .filter(|v| v.starts_with(b"round"))
                    .collect();
                assert!(seen.len() <= 1, "a snapshot saw parts of two commits");
                snapshots += 1;
            }
            snapshots
        });
        for round in 0..4 {
            let txn = env.begin_txn().unwrap();
            for k in &keys {
                txn.put(&db, &k.to_be_bytes(), format!("round {round}").as_bytes())
                    .unwrap();
            }
            txn.commit().unwrap();
        }
        done.store(true, Ordering::Relaxed);
        eprintln!("{} snapshots read", reader.join().unwrap());
    });
    let after = env.stat().unwrap();
    let counts = after.txn.as_ref().unwrap().txns;
    assert_eq!(
        counts.large_commits - before.txn.as_ref().unwrap().txns.large_commits,
        4,
        "every commit went in batches"
    );
    let (unlocked, locked) = loads_between(&before, &after);
    assert!(
        unlocked > 1_000,
        "the commits' random writes miss the cache"
    );
    // Each batch is loaded before the lock, and a hold whose first write's pages went
    // meanwhile loads them again with no lock (10-46 loads under it before it did); a
    // reader that loses 64 races in a row with writers may still load under it.
    assert!(
        locked <= 4,
        "{locked} loads under the exclusive lock ({unlocked} without)"
    );
    for k in &keys {
        assert_eq!(db.get(&k.to_be_bytes()).unwrap().unwrap(), b"round 3");
    }
    assert!(env.verify().unwrap().is_clean());
}

/// Deletes that empty leaves of a database far larger than the cache merge them with
/// siblings: a commit loads those siblings too before it takes the exclusive lock.
#[test]
fn deletes_load_the_siblings_they_merge_with_before_taking_the_exclusive_lock() {
    let (env, db) = nosync_env(2 << 20, 240_000);
    // Leaves (of about 28 records) left about a third full, just above where they merge.
    let kept = |k: &u32| k % 28 < 9;
    for chunk in (0..240_000u32).step_by(4_000) {
        let txn = env.begin_txn().unwrap();
        for k in (chunk..chunk + 4_000).filter(|k| !kept(k)) {
            txn.delete(&db, &k.to_be_bytes()).unwrap();
        }
        txn.commit().unwrap();
    }
    env.sync().unwrap();
    let leaves = db.stat().unwrap().leaf_pages;
    let before = env.stat().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(4);
    let mut left: std::collections::BTreeSet<u32> = (0..240_000).filter(kept).collect();
    for _ in 0..25 {
        let txn = env.begin_txn().unwrap();
        for _ in 0..200 {
            let k = rng.gen_range(0..240_000u32);
            if left.remove(&k) {
                txn.delete(&db, &k.to_be_bytes()).unwrap();
            }
        }
        txn.commit().unwrap();
    }
    let (unlocked, locked) = loads_between(&before, &env.stat().unwrap());
    let merged = leaves - db.stat().unwrap().leaf_pages;
    eprintln!("{merged} leaves merged");
    assert!(
        merged > 100,
        "random deletes merged leaves with their siblings"
    );
    assert!(unlocked > 1_000, "random deletes miss the cache");
    assert!(
        locked * 50 < unlocked,
        "merged siblings are loaded before the lock"
    );
    assert_eq!(db.iter().count(), left.len());
    assert!(env.verify().unwrap().is_clean());
}

/// Deletes of nearly every key of a database far larger than the cache, in random order:
/// leaves merge, and so do the branches above them, which lose a child at each merge. A
/// commit loads the sibling each level would merge with before it takes the exclusive
/// lock, whatever the level.
#[test]
fn deletes_load_the_siblings_branches_merge_with_before_taking_the_exclusive_lock() {
    let (env, db) = nosync_env(512 << 10, 120_000);
    let branches = |db: &beechdb::Db| db.stat().unwrap().branch_pages;
    let before_branches = branches(&db);
    let mut doomed: Vec<u32> = (0..120_000).filter(|k| k % 64 != 0).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(6);
    for i in (1..doomed.len()).rev() {
        doomed.swap(i, rng.gen_range(0..=i));
    }
    let before = env.stat().unwrap();
    for chunk in doomed.chunks(500) {
        let txn = env.begin_txn().unwrap();
        for k in chunk {
            txn.delete(&db, &k.to_be_bytes()).unwrap();
        }
        txn.commit().unwrap();
    }
    let (unlocked, locked) = loads_between(&before, &env.stat().unwrap());
    let after_branches = branches(&db);
    eprintln!("branch pages {before_branches} -> {after_branches}");
    assert!(
        after_branches * 4 < before_branches,
        "branches merged as their leaves did"
    );
    assert!(unlocked > 10_000, "random deletes miss the cache");
    // 174 loads under the lock before a hold that found its first write's pages gone
    // loaded them again with none held; none since.
    assert!(
        locked <= 4,
        "{locked} loads under the exclusive lock ({unlocked} without): the siblings of \
         merging leaves and branches are loaded before the lock"
    );
    assert_eq!(db.iter().count(), 120_000 / 64);
    assert!(env.verify().unwrap().is_clean());
}

/// Removing a database far larger than the cache frees its tree a batch at a time: no page
/// of it is loaded under the exclusive lock, the cache stays within its budget, every page
/// comes back as free space, other databases are untouched, and the environment verifies
/// clean, after a reopen too.
#[test]
fn removing_a_database_far_larger_than_the_cache_walks_no_tree_under_the_exclusive_lock() {
    let (env, db) = far_larger_than_the_cache();
    let kept = env.create_db("kept").unwrap();
    for k in 0..500u32 {
        kept.put(&k.to_be_bytes(), &value(k)).unwrap();
    }
    // Long values: the removed tree has overflow chains too.
    for k in 0..50u32 {
        db.put(&(100_000 + k).to_be_bytes(), &vec![k as u8; 20_000])
            .unwrap();
    }
    let st = db.stat().unwrap();
    let pages = st.leaf_pages + st.branch_pages + st.overflow_pages;
    // The catalog's pages back in memory after the walk of `stat` (the removal's commit
    // writes them).
    assert_eq!(kept.get(&0u32.to_be_bytes()).unwrap(), Some(value(0)));
    env.sync().unwrap();
    let before = env.stat().unwrap();
    env.remove_db("d").unwrap();
    let after = env.stat().unwrap();
    let (unlocked, locked) = loads_between(&before, &after);
    assert!(unlocked > 1_000, "the tree's pages were read ({unlocked})");
    assert_eq!(locked, 0, "the walk loaded pages under the exclusive lock");
    // The walk keeps what it found across a read's attempts: it used to walk its batch
    // again for each page missed, and run out of attempts on a batch missing every page.
    assert!(
        unlocked <= pages,
        "{unlocked} loads for a tree of {pages} pages: each at most once"
    );
    assert_eq!(
        after.cache_reads_locked - before.cache_reads_locked,
        0,
        "a read of the walk ran out of attempts"
    );
    assert!(
        after.cache_resident_pages <= before.cache_resident_pages.max(64) + 64,
        "the cache grew past its budget: {} pages",
        after.cache_resident_pages
    );
    assert!(matches!(db.get(b"x"), Err(beechdb::Error::DbRemoved)));
    env.sync().unwrap();
    let freed = env.stat().unwrap();
    assert!(
        freed.free_pages >= before.free_pages + 1_500,
        "{} free pages before, {} after",
        before.free_pages,
        freed.free_pages
    );
    for k in 0..500u32 {
        assert_eq!(kept.get(&k.to_be_bytes()).unwrap(), Some(value(k)));
    }
    assert!(env.verify().unwrap().is_clean());
}

/// Whether page-file writes wait, and whether one has.
#[derive(Debug, Default)]
struct Gate {
    closed: AtomicBool,
    /// A write has waited at the gate.
    caught: AtomicBool,
}

/// Storage whose page-file writes (not its changes of length) wait while the gate is
/// closed, saying when one did: to catch an eviction's write in the act.
fn gated(inner: MemStorage, gate: Arc<Gate>) -> HookStorage {
    HookStorage {
        inner,
        hook: Arc::new(move |name: &str, _, len| {
            // The page file is created under a temporary name, then renamed.
            if name.starts_with("beech.db") && len > 0 {
                while gate.closed.load(Ordering::Acquire) {
                    gate.caught.store(true, Ordering::Release);
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            Ok(())
        }),
    }
}

/// A writer whose eviction writes a dirty page, or a long value's overflow chain, does so
/// after its exclusive hold: while that write is stuck, readers (missing the cache) and
/// another writer go on, and everything reads right once it lands.
#[test]
fn evicted_dirty_pages_and_long_values_are_written_after_the_exclusive_hold() {
    let gate = Arc::new(Gate::default());
    let mem = MemStorage::new();
    let storage = gated(mem.clone(), gate.clone());
    let cfg = Config::new().page_size(4096).cache_size(256 << 10);
    let env = Env::open_with_storage(Arc::new(storage), cfg.clone()).unwrap();
    let db = env.create_db("d").unwrap();
    for k in 0..20_000u32 {
        db.put(&k.to_be_bytes(), &value(k)).unwrap();
    }
    env.sync().unwrap();
    let long = vec![7u8; 20_000];
    gate.closed.store(true, Ordering::Release);
    // Rewrites until one of its writes is caught at the gate: an evicted dirty page, or
    // the long value's chain.
    let stuck = {
        let (db, gate, long) = (db.clone(), gate.clone(), long.clone());
        std::thread::spawn(move || {
            db.put(b"long", &long).unwrap();
            let mut k = 0u32;
            while !gate.caught.load(Ordering::Acquire) {
                db.put(&k.to_be_bytes(), b"rewritten").unwrap();
                k = (k + 7919) % 20_000;
            }
        })
    };
    while !gate.caught.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    // The write is stuck; no engine lock may be held by it. Reads that miss the cache, and
    // another writer, finish; a deadline turns a hang into a failure.
    let (done, finished) = std::sync::mpsc::channel();
    {
        let (db, long) = (db.clone(), long.clone());
        std::thread::spawn(move || {
            let mut rng = rand::rngs::StdRng::seed_from_u64(5);
            for _ in 0..2_000 {
                let k = rng.gen_range(0..20_000u32);
                let got = db.get(&k.to_be_bytes()).unwrap().unwrap();
                assert!(got == value(k) || got == b"rewritten", "key {k}");
            }
            assert_eq!(db.get(b"long").unwrap(), Some(long));
            db.put(b"other writer", b"went on").unwrap();
            done.send(()).unwrap();
        });
    }
    let went_on = finished.recv_timeout(std::time::Duration::from_secs(60));
    gate.closed.store(false, Ordering::Release);
    went_on.expect("reads and a write finish while an eviction's write is stuck");
    stuck.join().unwrap();
    let stat = env.stat().unwrap();
    assert!(stat.cache_dirty_evictions > 0, "{stat:?}");
    drop(db);
    env.close().unwrap();
    let env = Env::open_with_storage(Arc::new(mem), cfg).unwrap();
    assert!(env.verify().unwrap().is_clean());
    let db = env.open_db("d").unwrap();
    assert_eq!(db.get(b"long").unwrap(), Some(long));
    assert_eq!(
        db.get(b"other writer").unwrap().as_deref(),
        Some(&b"went on"[..])
    );
    assert_eq!(db.iter().count(), 20_002);
}

/// A page write the write-back makes after the exclusive hold fails (EIO): the engine is
/// poisoned, so the next write is refused with the cause; every value written before reads
/// right meanwhile (the unwritten images stay in memory); a reopen comes back to the last
/// sync, verified clean.
#[test]
fn a_failed_write_back_poisons_the_engine_and_loses_nothing_it_acknowledged_in_memory() {
    let storage = MemStorage::new();
    let cfg = Config::new().page_size(4096).cache_size(256 << 10);
    let env = Env::open_with_storage(Arc::new(storage.clone()), cfg.clone()).unwrap();
    let db = env.create_db("d").unwrap();
    for k in 0..20_000u32 {
        db.put(&k.to_be_bytes(), &value(k)).unwrap();
    }
    env.sync().unwrap();
    // A Data Store environment writes nothing between syncs but evicted pages.
    storage.inject_fault(beechdb::storage::FaultKind::Write, 1, libc::EIO);
    let mut rewritten = 0u32;
    let refused = loop {
        match db.put(&rewritten.to_be_bytes(), b"rewritten") {
            Ok(()) => rewritten += 1,
            Err(e) => break e,
        }
        assert!(rewritten < 20_000, "no eviction wrote a page");
    };
    match &refused {
        beechdb::Error::Poisoned { cause } => assert!(cause.contains("writing page"), "{cause}"),
        other => panic!("a write after the failed write-back gave {other:?}"),
    }
    assert!(rewritten > 0);
    for k in 0..20_000u32 {
        let want = if k < rewritten {
            b"rewritten".to_vec()
        } else {
            value(k)
        };
        assert_eq!(db.get(&k.to_be_bytes()).unwrap(), Some(want), "key {k}");
    }
    drop(db);
    drop(env);
    storage.clear_faults();
    let env = Env::open_with_storage(Arc::new(storage), cfg).unwrap();
    assert!(env.verify().unwrap().is_clean());
    let db = env.open_db("d").unwrap();
    for k in (0..20_000u32).step_by(97) {
        assert_eq!(db.get(&k.to_be_bytes()).unwrap(), Some(value(k)), "key {k}");
    }
}
