//! Transactions larger than their memory: writes spilled to the log ahead of the commit, the
//! commit applied in batches, locks escalated.
//!
//! - Readers of every kind (auto-commit gets, snapshots, read-committed scans, cursors)
//!   running while a spilled commit is applied see it all or not at all.
//! - After a process kill or a power cut at any I/O call of a spilled transaction (its
//!   spills, checkpoints meanwhile, its batched commit), the environment holds it whole if
//!   its commit was acknowledged, and whole or not at all otherwise; it verifies clean.
//! - Checkpoints taken while it runs keep the log segments its runs are in.
//! - A transaction holding many keys of a database trades them for the database's lock.
//! - Ten million rows in one transaction in bounded memory (a child process reports its
//!   peak resident memory), and kills of such a load at random moments
//!   (`BEECH_BIG_ROWS`, `BEECH_BIG_KILLS` change the sizes).

mod common;

use beechdb::storage::MemStorage;
use beechdb::{Config, Db, Durability, Env, Error, Isolation};
use common::{count_from_env, Acks};
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn config() -> Config {
    Config::new()
        .page_size(4096)
        .cache_size(256 << 10)
        .transactional(true)
        .log_segment_size(256 << 10)
        .txn_memory(64 << 10)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:07}").into_bytes()
}

/// Every entry of `db`, read through a cursor.
fn contents(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.iter().map(|kv| kv.unwrap()).collect()
}

/// Loads `n` keys with value `old`, then, in one transaction that spills, rewrites them all
/// to `new` (deleting every seventh, adding `n / 10` more).
fn big_rewrite(env: &Env, db: &Db, n: u32) -> beechdb::Txn {
    let t = env.begin_txn().unwrap();
    for i in 0..n + n / 10 {
        if i % 7 == 3 && i < n {
            t.delete(db, &key(i)).unwrap();
        } else {
            t.put(db, &key(i), b"new").unwrap();
        }
    }
    t
}

fn expected_after(n: u32) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..n + n / 10)
        .filter(|i| !(i % 7 == 3 && *i < n))
        .map(|i| (key(i), b"new".to_vec()))
        .collect()
}

fn expected_before(n: u32) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..n).map(|i| (key(i), b"old".to_vec())).collect()
}

fn load(env: &Env, n: u32) -> Db {
    let db = env.create_db("d").unwrap();
    let t = env.begin_txn().unwrap();
    for i in 0..n {
        t.put(&db, &key(i), b"old").unwrap();
    }
    t.commit().unwrap();
    db
}

/// Which of the two states `seen` is: `Some(false)` before, `Some(true)` after, `None`
/// neither (a partial commit).
fn which(seen: &[(Vec<u8>, Vec<u8>)], n: u32) -> Option<bool> {
    if seen == expected_before(n) {
        Some(false)
    } else if seen == expected_after(n) {
        Some(true)
    } else {
        None
    }
}

/// Whether a scan that reads the latest data as it goes saw the state before the commit up to
/// some key and the state after it from there on (a commit is one instant).
fn switches_once(seen: &[(Vec<u8>, Vec<u8>)], n: u32) -> bool {
    let before = expected_before(n);
    let old = seen.iter().zip(&before).take_while(|(a, b)| a == b).count();
    let after: Vec<_> = expected_after(n)
        .into_iter()
        .filter(|(k, _)| old == 0 || *k > seen[old - 1].0)
        .collect();
    seen[old..] == after[..] || (old == seen.len() && old == before.len())
}

#[test]
fn readers_see_a_spilled_commit_all_or_nothing() {
    let n = 40_000;
    let env = Env::open_with_storage(Arc::new(MemStorage::new()), config()).unwrap();
    let db = load(&env, n);
    let t = big_rewrite(&env, &db, n);
    let stat = env.stat().unwrap().txn.unwrap();
    assert!(stat.txns.spills > 10, "{:?}", stat.txns);
    assert!(stat.txns.run_merges > 0, "{:?}", stat.txns);
    assert!(stat.locks.escalations >= 1, "{:?}", stat.locks);

    let done = Arc::new(AtomicBool::new(false));
    let (first, last) = (key(0), key(n - 1));
    let readers: Vec<_> = (0..5)
        .map(|r| {
            let (env, db, done) = (env.clone(), db.clone(), done.clone());
            let (first, last) = (first.clone(), last.clone());
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while !done.load(Ordering::Acquire) {
                    reads += 1;
                    match r {
                        // Auto-commit reads: once the last key is new, so is the first.
                        0 => {
                            let l = db.get(&last).unwrap().unwrap();
                            let f = db.get(&first).unwrap().unwrap();
                            assert!(l == b"old" || f == b"new", "read a half-applied commit");
                        }
                        // A snapshot sees both keys from one side.
                        1 => {
                            let s = env.begin_txn().unwrap();
                            let l = s.get(&db, &last).unwrap();
                            let f = s.get(&db, &first).unwrap();
                            assert_eq!(l, f, "a snapshot saw a half-applied commit");
                        }
                        // A snapshot's scan of the whole database sees one state.
                        2 => {
                            let s = env.begin_txn().unwrap();
                            let seen: Vec<_> = s.iter(&db).map(|kv| kv.unwrap()).collect();
                            assert!(which(&seen, n).is_some(), "a scan saw a partial commit");
                        }
                        // A cursor, and a read-committed scan, see the latest data as they
                        // go: the state before, then at most once the state after.
                        3 => assert!(switches_once(&contents(&db), n), "a cursor"),
                        _ => {
                            let s = env.begin_txn_with(Isolation::ReadCommitted).unwrap();
                            let seen: Vec<_> = s.iter(&db).map(|kv| kv.unwrap()).collect();
                            assert!(switches_once(&seen, n), "a read-committed scan");
                        }
                    }
                }
                reads
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(20));
    let started = std::time::Instant::now();
    t.commit().unwrap();
    eprintln!("commit applied in {:?}", started.elapsed());
    done.store(true, Ordering::Release);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    assert_eq!(contents(&db), expected_after(n));
    let stat = env.stat().unwrap().txn.unwrap();
    assert_eq!(stat.txns.spilled_commits, 2, "the load and the rewrite");
    env.sync().unwrap();
    assert!(env.verify().unwrap().is_clean());
}

#[test]
fn snapshots_older_than_a_spilled_commit_keep_their_view() {
    let n = 5_000;
    let env = Env::open_with_storage(Arc::new(MemStorage::new()), config()).unwrap();
    let db = load(&env, n);
    let old = env.begin_txn().unwrap();
    let t = big_rewrite(&env, &db, n);
    t.commit().unwrap();
    // The old snapshot still reads every key as it was, by point reads and by scans.
    assert_eq!(old.get(&db, &key(3)).unwrap(), Some(b"old".to_vec()));
    assert_eq!(old.get(&db, &key(n + 1)).unwrap(), None);
    let seen: Vec<_> = old.iter(&db).map(|kv| kv.unwrap()).collect();
    assert_eq!(seen, expected_before(n));
    let back: Vec<_> = old.range_rev(&db, ..).map(|kv| kv.unwrap()).collect();
    assert!(back.iter().rev().eq(expected_before(n).iter()));
    // Writing a key the commit wrote is a conflict for it (first committer wins).
    assert!(matches!(old.put(&db, &key(5), b"x"), Err(Error::Conflict)));
    drop(old);
    let fresh = env.begin_txn().unwrap();
    assert_eq!(fresh.iter(&db).count(), expected_after(n).len());
}

/// A database created by a commit applied in batches (spilled, or from memory but too large
/// for one hold) is empty to snapshots older than the commit, by point reads, scans both
/// ways, counts and walks; writing a key the commit wrote is a conflict for them (also once
/// a later commit deleted it), a key it did not write is not; newer snapshots see every key.
#[test]
fn snapshots_older_than_a_batched_commit_see_the_databases_it_creates_empty() {
    for (txn_memory, spilled) in [(64 << 10, true), (8 << 20, false)] {
        let env =
            Env::open_with_storage(Arc::new(MemStorage::new()), config().txn_memory(txn_memory))
                .unwrap();
        let n = 6_000;
        let before = env.stat().unwrap().txn.unwrap().txns;
        let (old, old_too) = (env.begin_txn().unwrap(), env.begin_txn().unwrap());
        let old_three = env.begin_txn().unwrap();
        let t = env.begin_txn().unwrap();
        let made = t.create_db("made").unwrap();
        for i in (0..n).filter(|i| i % 3 != 1) {
            t.put(&made, &key(i), b"v").unwrap();
        }
        t.commit().unwrap();
        let after = env.stat().unwrap().txn.unwrap().txns;
        match spilled {
            true => assert!(after.spilled_commits > before.spilled_commits),
            false => assert!(after.large_commits > before.large_commits),
        }
        let made = env.open_db("made").unwrap();
        assert_eq!(old.get(&made, &key(0)).unwrap(), None, "spilled {spilled}");
        assert_eq!(old.iter(&made).count(), 0);
        assert_eq!(old.range_rev(&made, ..).count(), 0);
        assert_eq!(old.range(&made, key(10)..key(20)).count(), 0);
        assert_eq!(old.len(&made).unwrap(), 0);
        let mut walked = 0;
        old.visit_from(&made, b"", |_, _| {
            walked += 1;
            true
        })
        .unwrap();
        assert_eq!(walked, 0);
        assert!(matches!(
            old.put(&made, &key(3), b"x"),
            Err(Error::Conflict)
        ));
        drop(old);
        // Other pages fill the cache: the leaf of a key the commit did not write is read
        // back for the conflict check, not taken for one holding it.
        let filler = env.create_db("filler").unwrap();
        for i in 0..20_000 {
            filler.put(&key(i), &[7; 100]).unwrap();
        }
        assert_eq!(filler.iter().count(), 20_000);
        let misses = env.stat().unwrap().cache_misses;
        old_too.put(&made, &key(1), b"x").unwrap();
        assert!(
            env.stat().unwrap().cache_misses > misses,
            "the leaf was read back"
        );
        old_too.commit().unwrap();
        let fresh = env.begin_txn().unwrap();
        let written = u64::from(n - n / 3) + 1;
        assert_eq!(fresh.len(&made).unwrap(), written);
        assert_eq!(fresh.get(&made, &key(3)).unwrap(), Some(b"v".to_vec()));
        assert_eq!(fresh.get(&made, &key(1)).unwrap(), Some(b"x".to_vec()));
        assert_eq!(fresh.iter(&made).count() as u64, written);
        drop(fresh);
        // A later commit, also in batches, deletes every key the first wrote.
        let t = env.begin_txn().unwrap();
        for i in (0..n).filter(|i| i % 3 != 1) {
            t.delete(&made, &key(i)).unwrap();
        }
        t.commit().unwrap();
        let batched = |c: &beechdb::TxnCounts| c.large_commits + c.spilled_commits;
        let later = env.stat().unwrap().txn.unwrap().txns;
        assert!(batched(&later) > batched(&after));
        assert_eq!(old_three.get(&made, &key(0)).unwrap(), None);
        assert!(matches!(
            old_three.put(&made, &key(0), b"x"),
            Err(Error::Conflict)
        ));
        drop(old_three);
        assert_eq!(env.begin_txn().unwrap().len(&made).unwrap(), 1);
        assert!(env.verify().unwrap().is_clean());
    }
}

#[test]
fn escalated_locks_cover_the_database_until_the_end() {
    let env = Env::open_with_storage(
        Arc::new(MemStorage::new()),
        config().lock_timeout(Duration::from_millis(50)),
    )
    .unwrap();
    let db = env.create_db("d").unwrap();
    let other = env.create_db("other").unwrap();
    let t = env.begin_txn().unwrap();
    for i in 0..2_000 {
        t.put(&db, &key(i), b"v").unwrap();
    }
    let stat = env.stat().unwrap().txn.unwrap();
    assert_eq!(stat.locks.escalations, 1);
    // A key the big transaction never wrote is covered too; other databases are not.
    assert!(matches!(
        db.put(&key(99_999), b"w"),
        Err(Error::LockTimeout)
    ));
    other.put(b"k", b"w").unwrap();
    t.commit().unwrap();
    db.put(&key(99_999), b"w").unwrap();
    assert_eq!(db.len().unwrap(), 2_001);
}

/// With a large memory budget a transaction still escalates at 4,096 key locks (the cap:
/// past it, a load would pay a key lock per write), and a commit that overwrites keys in
/// batches keeps each value before for a snapshot that began earlier.
#[test]
fn a_large_budget_escalates_at_the_cap_and_its_commit_keeps_values_before() {
    let env =
        Env::open_with_storage(Arc::new(MemStorage::new()), config().txn_memory(64 << 20)).unwrap();
    let db = env.create_db("d").unwrap();
    let escalations = |env: &Env| env.stat().unwrap().txn.unwrap().locks.escalations;
    let n = 6_000;
    let first = env.begin_txn().unwrap();
    for i in 0..n {
        first.put(&db, &key(i), b"old").unwrap();
        let expected = u64::from(i + 1 >= 4_096);
        assert_eq!(escalations(&env), expected, "after {} keys", i + 1);
    }
    first.commit().unwrap();
    let old = env.begin_txn().unwrap();
    let t = env.begin_txn().unwrap();
    for i in (0..n).step_by(2) {
        t.put(&db, &key(i), b"new").unwrap();
    }
    t.commit().unwrap();
    let value = |i: u32| {
        if i.is_multiple_of(2) {
            &b"new"[..]
        } else {
            b"old"
        }
    };
    for i in 0..n {
        assert_eq!(old.get(&db, &key(i)).unwrap().as_deref(), Some(&b"old"[..]));
        assert_eq!(db.get(&key(i)).unwrap().as_deref(), Some(value(i)));
    }
}

/// A transaction that spilled reads back every key it wrote, and looks for keys it did not
/// write (as a UNIQUE check of a new row does) through its runs' key filters: a few reads
/// of spilled records for thousands of lookups, not one per run each.
#[test]
fn a_spilled_transaction_reads_absent_keys_past_its_runs_filters() {
    // Filters may take a quarter of the budget: enough for every run here.
    let cfg = config().txn_memory(1 << 20);
    let env = Env::open_with_storage(Arc::new(MemStorage::new()), cfg).unwrap();
    let db = env.create_db("d").unwrap();
    let stats = |env: &Env| env.stat().unwrap().txn.unwrap().txns;
    let t = env.begin_txn().unwrap();
    let n = 100_000;
    for i in 0..n {
        t.put(&db, &key(2 * i), &i.to_le_bytes()).unwrap();
    }
    let spilled = stats(&env);
    assert!(spilled.spills >= 4, "{spilled:?}");
    for i in (0..n).step_by(7) {
        assert_eq!(
            t.get(&db, &key(2 * i)).unwrap(),
            Some(i.to_le_bytes().to_vec())
        );
    }
    let present = stats(&env).spilled_reads - spilled.spilled_reads;
    assert!(present > 0, "keys written are found in the runs");
    let lookups = 5_000u64;
    for i in 0..lookups as u32 {
        assert_eq!(t.get(&db, &key(2 * i + 1)).unwrap(), None);
    }
    let absent = stats(&env).spilled_reads - spilled.spilled_reads - present;
    // About 1% of lookups pass a filter they should not, per run.
    assert!(
        absent < lookups * spilled.spills / 20,
        "{absent} records read for {lookups} absent keys over {} spills",
        spilled.spills
    );
    t.commit().unwrap();
    assert_eq!(db.len().unwrap(), n as u64);
}

#[test]
fn databases_created_and_removed_by_a_spilled_transaction() {
    let storage = MemStorage::new();
    let env = Env::open_with_storage(Arc::new(storage.clone()), config()).unwrap();
    let gone = load(&env, 10);
    let t = env.begin_txn().unwrap();
    let fresh = t.create_db("fresh").unwrap();
    let brief = t.create_db("brief").unwrap();
    for i in 0..3_000 {
        t.put(&fresh, &key(i), b"v").unwrap();
        t.put(&brief, &key(i), b"v").unwrap();
    }
    t.remove_db("brief").unwrap();
    t.remove_db("d").unwrap();
    assert!(env.stat().unwrap().txn.unwrap().txns.spills > 0);
    assert!(matches!(env.open_db("fresh"), Err(Error::DbNotFound(_))));
    t.commit().unwrap();
    assert_eq!(env.db_names().unwrap(), vec!["fresh".to_string()]);
    assert!(matches!(gone.get(b"x"), Err(Error::DbRemoved)));
    assert_eq!(env.open_db("fresh").unwrap().len().unwrap(), 3_000);
    // Recovery replays the same.
    let storage = common::kill(&storage, env);
    let env = Env::open_with_storage(Arc::new(storage), config()).unwrap();
    assert_eq!(env.db_names().unwrap(), vec!["fresh".to_string()]);
    assert_eq!(env.open_db("fresh").unwrap().len().unwrap(), 3_000);
    assert!(env.verify().unwrap().is_clean());

    // A name cannot pass from a database to a new one in one spilled transaction.
    let t = env.begin_txn().unwrap();
    t.remove_db("fresh").unwrap();
    let again = t.create_db("fresh").unwrap();
    for i in 0..3_000 {
        t.put(&again, &key(i), b"w").unwrap();
    }
    assert!(matches!(t.commit(), Err(Error::InvalidArgument(_))));
    assert_eq!(env.open_db("fresh").unwrap().len().unwrap(), 3_000);

    // One that did not spill can (it commits in one hold, not in batches), and one that
    // did not spill but is too large for one hold commits in batches, its databases made
    // and removed at once.
    let env =
        Env::open_with_storage(Arc::new(MemStorage::new()), config().txn_memory(8 << 20)).unwrap();
    let old = load(&env, 10);
    for round in 0..2 {
        let t = env.begin_txn().unwrap();
        t.remove_db("d").unwrap();
        let d = t.create_db("d").unwrap();
        let other = t.create_db(&format!("other{round}")).unwrap();
        for i in 0..3_000 {
            t.put(&d, &key(i), b"w").unwrap();
            t.put(&other, &key(i), b"w").unwrap();
        }
        t.commit().unwrap();
    }
    let counts = env.stat().unwrap().txn.unwrap().txns;
    assert_eq!((counts.spills, counts.large_commits), (0, 0));
    assert!(matches!(old.get(b"x"), Err(Error::DbRemoved)));
    let t = env.begin_txn().unwrap();
    t.remove_db("other0").unwrap();
    let other = env.open_db("other1").unwrap();
    for i in 0..3_000 {
        t.put(&other, &key(i), b"x").unwrap();
    }
    t.commit().unwrap();
    let counts = env.stat().unwrap().txn.unwrap().txns;
    assert_eq!((counts.spills, counts.large_commits), (0, 1));
    assert_eq!(
        env.db_names().unwrap(),
        vec!["d".to_string(), "other1".to_string()]
    );
    assert_eq!(env.open_db("d").unwrap().len().unwrap(), 3_000);
    assert!(other.iter().all(|kv| kv.unwrap().1 == b"x"));
    assert!(env.verify().unwrap().is_clean());
}

/// A page write that fails while a large commit from memory is applied in batches (an
/// evicted dirty page's): the commit fails, the environment is poisoned with the cause,
/// readers still see every value from before the commit, and a reopen has none of it.
#[test]
fn a_write_failing_while_a_large_commit_is_applied_leaves_it_unseen_and_unlogged() {
    let storage = MemStorage::new();
    let cfg = config().txn_memory(8 << 20);
    let env = Env::open_with_storage(Arc::new(storage.clone()), cfg.clone()).unwrap();
    let n = 30_000;
    let db = load(&env, n);
    env.sync().unwrap();
    let large = |env: &Env| env.stat().unwrap().txn.unwrap().txns.large_commits;
    assert_eq!(large(&env), 1, "the load itself went in batches");
    let t = big_rewrite(&env, &db, n);
    storage.inject_fault(beechdb::storage::FaultKind::Write, 1, libc::EIO);
    let err = t.commit().unwrap_err();
    assert!(matches!(err, Error::Poisoned { .. }), "{err:?}");
    let stat = env.stat().unwrap();
    assert!(stat.poisoned.is_some_and(|c| c.contains("writing page")));
    assert_eq!(
        stat.txn.unwrap().txns.spills,
        0,
        "the write set stayed in memory"
    );
    for i in 0..n + n / 10 {
        let want = (i < n).then(|| b"old".to_vec());
        assert_eq!(db.get(&key(i)).unwrap(), want, "key {i}");
    }
    drop(db);
    storage.clear_faults();
    let storage = common::kill(&storage, env);
    let env = Env::open_with_storage(Arc::new(storage), cfg).unwrap();
    assert_eq!(contents(&env.open_db("d").unwrap()), expected_before(n));
    assert!(env.verify().unwrap().is_clean());
}

/// Kills and power cuts at random I/O calls of a run that loads, spills a rewrite across
/// checkpoints (small segments, so runs lie in segments a checkpoint would otherwise remove),
/// and commits it.
#[test]
fn spilled_transactions_survive_kills_and_power_cuts_whole_or_not_at_all() {
    large_commits_survive_kills_and_power_cuts(config(), true);
}

/// As above for a transaction of the same writes that stays in memory (a budget it does
/// not reach), committed in batches all the same: more writes than half the cache's pages.
#[test]
fn large_commits_from_memory_survive_kills_and_power_cuts_whole_or_not_at_all() {
    large_commits_survive_kills_and_power_cuts(config().txn_memory(8 << 20), false);
}

/// With the log in memory, acknowledged means committed and then checkpointed; the crash
/// points fall in the scratch files' I/O too, and none of them outlives its process.
#[test]
fn spilled_transactions_with_the_log_in_memory_survive_kills_and_power_cuts() {
    large_commits_survive_kills_and_power_cuts(config().in_memory_log(true), true);
}

fn large_commits_survive_kills_and_power_cuts(cfg: Config, spills: bool) {
    let in_memory_log = cfg.mode() == beechdb::Mode::TransactionalInMemoryLog;
    let n = 3_000;
    let cfg = cfg.checkpoint_log_bytes(1 << 40);
    for seed in common::seeds_from_env("BEECH_BIG_SEEDS", 60) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let storage = MemStorage::new();
        let env = Env::open_with_storage(Arc::new(storage.clone()), cfg.clone()).unwrap();
        let db = load(&env, n);
        env.sync().unwrap();
        let power = rng.gen_bool(0.5);
        let at = rng.gen_range(1..400);
        if power {
            storage.cut_power_after(at);
        } else {
            storage.end_process_after(at);
        }
        let acked = (|| -> beechdb::Result<()> {
            let t = env.begin_txn()?;
            for i in 0..n + n / 10 {
                if i % 7 == 3 && i < n {
                    t.delete(&db, &key(i))?;
                } else {
                    t.put(&db, &key(i), b"new")?;
                }
                if i % 1000 == 999 {
                    env.sync()?;
                }
            }
            t.commit_with(Durability::Sync)?;
            if in_memory_log {
                env.sync()?;
            }
            Ok(())
        })()
        .is_ok();
        if let (true, Ok(stat)) = (acked, env.stat()) {
            // The load's commit and the rewrite's, both in batches.
            let counts = stat.txn.unwrap().txns;
            assert_eq!(counts.spilled_commits, 2 * spills as u64, "seed {seed}");
            assert_eq!(counts.large_commits, 2 * !spills as u64, "seed {seed}");
        }
        drop(db);
        let next = if power {
            let image = storage.crash_image(seed);
            drop(env);
            image
        } else {
            common::kill(&storage, env)
        };
        let env_storage = next.clone();
        let env = Env::open_with_storage(Arc::new(next), cfg.clone()).unwrap();
        let seen = contents(&env.open_db("d").unwrap());
        match which(&seen, n) {
            Some(after) => assert!(after || !acked, "seed {seed}: an acknowledged commit lost"),
            None => panic!("seed {seed}: a partial commit ({} entries)", seen.len()),
        }
        let report = env.verify().unwrap();
        assert!(report.is_clean(), "seed {seed}: {report:?}");
        use beechdb::storage::Storage;
        let names = env_storage.list().unwrap();
        assert!(
            !names
                .iter()
                .any(|n| n.starts_with("undo.") || n.starts_with("spill.")),
            "seed {seed}: an undo store or a scratch file outlived its process: {names:?}"
        );
    }
}

/// A checkpoint taken while a transaction spills does not remove the segments its runs
/// are in, and a crash after its commit recovers it from them.
#[test]
fn checkpoints_keep_the_log_a_spilled_transaction_needs() {
    let storage = MemStorage::new();
    let cfg = config().log_segment_size(64 << 10);
    let env = Env::open_with_storage(Arc::new(storage.clone()), cfg.clone()).unwrap();
    let db = env.create_db("d").unwrap();
    let t = env.begin_txn().unwrap();
    for i in 0..20_000 {
        t.put(&db, &key(i), b"value").unwrap();
        if i % 2_000 == 0 {
            env.sync().unwrap();
        }
    }
    env.sync().unwrap();
    let segments = |s: &MemStorage| {
        use beechdb::storage::Storage;
        s.list()
            .unwrap()
            .iter()
            .filter(|n| n.starts_with("log.0"))
            .count()
    };
    assert!(segments(&storage) > 4, "the runs span segments");
    assert!(
        env.archive_logs().unwrap().is_empty(),
        "nothing is archivable yet"
    );
    t.commit_with(Durability::Sync).unwrap();
    let storage = common::kill(&storage, env);
    let env = Env::open_with_storage(Arc::new(storage.clone()), cfg.clone()).unwrap();
    assert_eq!(env.recovered_commits(), 1);
    assert_eq!(env.open_db("d").unwrap().len().unwrap(), 20_000);
    // The checkpoint after recovery no longer needs them.
    env.close().unwrap();
    let env = Env::open_with_storage(Arc::new(storage.clone()), cfg).unwrap();
    assert!(segments(&storage) <= 2);
    assert_eq!(env.open_db("d").unwrap().len().unwrap(), 20_000);
}

/// An aborted spilled transaction leaves nothing, and releases the log it held.
#[test]
fn an_aborted_spill_leaves_nothing() {
    let storage = MemStorage::new();
    let env = Env::open_with_storage(Arc::new(storage.clone()), config()).unwrap();
    let db = load(&env, 100);
    let t = big_rewrite(&env, &db, 5_000);
    assert!(env.stat().unwrap().txn.unwrap().txns.spills > 0);
    t.abort();
    assert_eq!(contents(&db), expected_before(100));
    env.sync().unwrap();
    let storage = common::kill(&storage, env);
    let env = Env::open_with_storage(Arc::new(storage), config()).unwrap();
    assert_eq!(contents(&env.open_db("d").unwrap()), expected_before(100));
}

/// Names of the scratch files in `storage`.
fn scratch_files(storage: &MemStorage) -> Vec<String> {
    let names = beechdb::storage::Storage::list(storage).unwrap();
    names
        .into_iter()
        .filter(|n| n.starts_with("spill."))
        .collect()
}

/// With the log in memory, a transaction past its budget spills to scratch files: it
/// commits whole (readers see it all or nothing), an abort leaves nothing, the files go as
/// soon as no transaction holds them and at close, and a reopen removes any left behind.
#[test]
fn with_the_log_in_memory_writes_spill_to_scratch_files() {
    let storage = MemStorage::new();
    let cfg = config().in_memory_log(true);
    let env = Env::open_with_storage(Arc::new(storage.clone()), cfg.clone()).unwrap();
    let db = load(&env, 100);
    assert!(
        scratch_files(&storage).is_empty(),
        "made at the first spill"
    );
    let t = big_rewrite(&env, &db, 20_000);
    let stat = env.stat().unwrap().txn.unwrap();
    assert!(stat.txns.spills > 10, "{:?}", stat.txns);
    assert!(!scratch_files(&storage).is_empty());
    assert_eq!(
        contents(&db),
        expected_before(100),
        "nothing seen before the commit"
    );
    let reader = {
        let (db, first, last) = (db.clone(), key(0), key(20_000 - 1));
        std::thread::spawn(move || {
            for _ in 0..2_000 {
                let l = db.get(&last).unwrap();
                let f = db.get(&first).unwrap().unwrap();
                assert!(l.is_none() || f == b"new", "read a half-applied commit");
            }
        })
    };
    t.commit().unwrap();
    reader.join().unwrap();
    assert_eq!(contents(&db), expected_after(20_000));
    let stat = env.stat().unwrap().txn.unwrap();
    assert_eq!(stat.txns.spilled_commits, 1);
    // The runs' segments went with the commit: one (the one being appended to) is left.
    assert!(
        scratch_files(&storage).len() <= 1,
        "{:?}",
        scratch_files(&storage)
    );

    let t = big_rewrite(&env, &db, 30_000);
    assert!(
        scratch_files(&storage).len() > 1,
        "a spill past one scratch segment"
    );
    t.abort();
    assert_eq!(contents(&db), expected_after(20_000));
    assert!(scratch_files(&storage).len() <= 1);
    env.close().unwrap();
    assert!(scratch_files(&storage).is_empty(), "removed at close");

    // A process killed while a transaction spills: its files are removed at the next open,
    // and the environment holds its last checkpoint.
    let env = Env::open_with_storage(Arc::new(storage.clone()), cfg.clone()).unwrap();
    let db = env.open_db("d").unwrap();
    let t = big_rewrite(&env, &db, 5_000);
    assert!(!scratch_files(&storage).is_empty());
    drop(t);
    let storage = common::kill(&storage, env);
    assert!(!scratch_files(&storage).is_empty());
    let env = Env::open_with_storage(Arc::new(storage.clone()), cfg).unwrap();
    assert!(scratch_files(&storage).is_empty(), "removed at open");
    assert_eq!(contents(&env.open_db("d").unwrap()), expected_after(20_000));
    assert!(env.verify().unwrap().is_clean());
}

/// A storage whose writes to files named `prefix*` fail with ENOSPC while the flag is set:
/// the memory under it, the flag, and the storage.
fn disk_full_for(
    prefix: &'static str,
) -> (MemStorage, Arc<AtomicBool>, beechdb::storage::HookStorage) {
    let inner = MemStorage::new();
    let full = Arc::new(AtomicBool::new(false));
    let disk = full.clone();
    let storage = beechdb::storage::HookStorage {
        inner: inner.clone(),
        hook: Arc::new(move |name: &str, _, _| match disk.load(Ordering::SeqCst) {
            true if name.starts_with(prefix) => Err(std::io::Error::from_raw_os_error(28)),
            _ => Ok(()),
        }),
    };
    (inner, full, storage)
}

/// With the log in memory, a failed write of a scratch file (a full disk) fails the
/// transactions whose writes are in that scratch log, cleanly (nothing of them applied), and
/// only them: once the disk has room, the next transaction spills to a new scratch log and
/// commits, and the failed log's files go with the last transaction that spilled to it.
#[test]
fn a_failed_scratch_write_fails_only_the_transactions_that_spilled_there() {
    let (inner, full, storage) = disk_full_for("spill.");
    let env = Env::open_with_storage(Arc::new(storage), config().in_memory_log(true)).unwrap();
    let db = load(&env, 100);
    let other = env.create_db("e").unwrap();
    // One transaction spills before the disk fills, one (on another database) while it is.
    let before = big_rewrite(&env, &db, 5_000);
    assert!(!scratch_files(&inner).is_empty());
    full.store(true, Ordering::SeqCst);
    let during = env.begin_txn().unwrap();
    let err = (0..5_000)
        .find_map(|i| during.put(&other, &key(i), b"during").err())
        .expect("a spill fails on the full disk");
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    during.abort();
    full.store(false, Ordering::SeqCst);
    // The first one's writes are in the failed log: its commit fails and applies nothing.
    let err = before
        .commit()
        .expect_err("its remaining writes cannot spill there");
    assert!(matches!(err, Error::Poisoned { .. }), "{err:?}");
    assert_eq!(contents(&db), expected_before(100));
    assert!(
        scratch_files(&inner)
            .iter()
            .all(|n| n.starts_with("spill.0.")),
        "{:?}",
        scratch_files(&inner)
    );
    // The disk has room again: a new scratch log, and the failed one's files are gone.
    let after = big_rewrite(&env, &db, 5_000);
    let files = scratch_files(&inner);
    assert!(
        !files.is_empty() && files.iter().all(|n| n.starts_with("spill.1.")),
        "{files:?}"
    );
    after.commit().unwrap();
    assert_eq!(contents(&db), expected_after(5_000));
    env.close().unwrap();
    assert!(scratch_files(&inner).is_empty());
}

/// A transaction still spilled when its environment closes changes no file after the close:
/// dropped later, it leaves alone the scratch files of the next opener of the directory
/// (which are named as its own were).
#[test]
fn a_spilled_transaction_outliving_its_environment_leaves_the_next_opener_alone() {
    let storage = MemStorage::new();
    let cfg = config().in_memory_log(true);
    let env = Env::open_with_storage(Arc::new(storage.clone()), cfg.clone()).unwrap();
    let db = load(&env, 100);
    let stale = big_rewrite(&env, &db, 5_000);
    env.close().unwrap();
    assert!(scratch_files(&storage).is_empty(), "removed at close");
    let env = Env::open_with_storage(Arc::new(storage.clone()), cfg).unwrap();
    let db = env.open_db("d").unwrap();
    let t = big_rewrite(&env, &db, 5_000);
    let files = scratch_files(&storage);
    assert!(!files.is_empty());
    drop(stale);
    assert_eq!(scratch_files(&storage), files);
    t.commit().unwrap();
    assert_eq!(contents(&db), expected_after(5_000));
}

/// A spilled commit that cannot make the file for its values before (a full disk) fails
/// before anything is applied: nothing of it is seen, no file is left, and the environment
/// goes on taking commits, large ones too once the disk has room.
#[test]
fn a_spilled_commit_that_cannot_make_its_undo_file_fails_cleanly() {
    let (inner, full, storage) = disk_full_for("undo.");
    let env = Env::open_with_storage(Arc::new(storage), config()).unwrap();
    let db = load(&env, 100);
    let t = big_rewrite(&env, &db, 5_000);
    full.store(true, Ordering::SeqCst);
    let err = t.commit().expect_err("no room for its undo file");
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    assert_eq!(contents(&db), expected_before(100));
    let names = beechdb::storage::Storage::list(&inner).unwrap();
    assert!(!names.iter().any(|n| n.starts_with("undo.")), "{names:?}");
    let small = env.begin_txn().unwrap();
    small.put(&db, &key(0), b"small").unwrap();
    small.commit().unwrap();
    full.store(false, Ordering::SeqCst);
    big_rewrite(&env, &db, 5_000).commit().unwrap();
    assert_eq!(contents(&db), expected_after(5_000));
    assert!(env.verify().unwrap().is_clean());
}

const ROWS: &str = "BEECH_BIG_ROWS";
const DIR: &str = "BEECH_BIG_DIR";
/// Set: the load's environment keeps its log in memory.
const IN_MEMORY_LOG: &str = "BEECH_BIG_IN_MEMORY_LOG";

fn big_config(in_memory_log: bool) -> Config {
    Config::new()
        .transactional(true)
        .in_memory_log(in_memory_log)
}

/// The child of the tests below: loads `BEECH_BIG_ROWS` rows in one transaction into the
/// environment in `BEECH_BIG_DIR` (8 MiB of transaction memory, 8 MiB of cache), reporting
/// `committed` and then its peak resident memory in kB.
#[test]
#[ignore = "run by the tests below as a child process"]
fn child_big_load() {
    let Some(mut acks) = Acks::open() else { return };
    let rows = count_from_env(ROWS, 0) as u32;
    let dir = std::env::var(DIR).unwrap();
    let cfg = big_config(std::env::var(IN_MEMORY_LOG).is_ok())
        .cache_size(8 << 20)
        .txn_memory(count_from_env("BEECH_BIG_TXN_MEMORY", 8 << 20) as usize);
    let env = Env::open(&dir, cfg).unwrap();
    let db = env.open_or_create_db("rows").unwrap();
    let t = env.begin_txn().unwrap();
    for i in 0..rows {
        t.put(&db, &i.to_be_bytes(), &(i ^ 0x5a5a_5a5a).to_le_bytes())
            .unwrap();
    }
    acks.report("writes done");
    t.commit().unwrap();
    acks.report("committed");
    report_peak(&mut acks);
    env.close().unwrap();
}

/// Reports `peak N`: the process's peak resident memory in kB.
fn report_peak(acks: &mut Acks) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let peak = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .unwrap();
    acks.report(&format!("peak {}", peak.trim().trim_end_matches(" kB")));
}

/// The child of the test below: in the environment in `BEECH_BIG_DIR` (8 MiB of cache and
/// of transaction memory), stores 2,000 values of 100 KiB, then deletes them all in one
/// transaction, reporting `deleted` and then its peak resident memory in kB.
#[test]
#[ignore = "run by the test below as a child process"]
fn child_long_values() {
    let Some(mut acks) = Acks::open() else { return };
    let dir = std::env::var(DIR).unwrap();
    let cfg = big_config(false).cache_size(8 << 20).txn_memory(8 << 20);
    let env = Env::open(&dir, cfg).unwrap();
    let db = env.open_or_create_db("long").unwrap();
    let value = vec![0x5a; 100 << 10];
    for chunk in 0..20u32 {
        let t = env.begin_txn().unwrap();
        for i in chunk * 100..(chunk + 1) * 100 {
            t.put(&db, &i.to_be_bytes(), &value).unwrap();
        }
        t.commit().unwrap();
    }
    let t = env.begin_txn().unwrap();
    for i in 0..2000u32 {
        t.delete(&db, &i.to_be_bytes()).unwrap();
    }
    t.commit().unwrap();
    acks.report("deleted");
    report_peak(&mut acks);
    env.close().unwrap();
}

/// A commit that deletes 200 MB of long values keeps the values before (what readers see
/// until it is done) in memory only up to its budget: past it they go to a file, each hold
/// of the exclusive lock ending once it has a batch of them to write.
#[test]
fn deleting_long_values_in_one_commit_keeps_their_values_before_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let acks = dir.path().join("acks");
    let envdir = dir.path().join("env");
    let vars = [(DIR, envdir.display().to_string())];
    let mut child = common::spawn_self("child_long_values", &acks, &vars);
    assert!(child.wait().unwrap().success());
    let lines = Acks::read(&acks);
    assert_eq!(lines[0], "deleted");
    let peak_kb: u64 = lines[1].strip_prefix("peak ").unwrap().parse().unwrap();
    eprintln!("2,000 values of 100 KiB deleted in one commit: peak resident memory {peak_kb} kB");
    assert!(peak_kb < 64_000, "peak resident memory {peak_kb} kB");
    let env = Env::open(&envdir, big_config(false)).unwrap();
    assert_eq!(env.open_db("long").unwrap().len().unwrap(), 0);
    assert!(env.verify().unwrap().is_clean());
}

/// Counts the rows of the environment in `dir` (its log in memory with `in_memory_log`)
/// and checks each one.
fn check_rows(dir: &std::path::Path, rows: u32, in_memory_log: bool) -> u64 {
    let env = Env::open(dir, big_config(in_memory_log)).unwrap();
    let Ok(db) = env.open_db("rows") else {
        return 0;
    };
    let mut count = 0u64;
    for kv in db.iter() {
        let (k, v) = kv.unwrap();
        let i = u32::from_be_bytes(k[..].try_into().unwrap());
        assert_eq!(v, (i ^ 0x5a5a_5a5a).to_le_bytes(), "row {i}");
        assert_eq!(i as u64, count, "rows in order, none missing");
        count += 1;
    }
    assert!(
        count == 0 || count == rows as u64,
        "a partial load: {count} rows"
    );
    count
}

#[test]
fn ten_million_rows_in_one_transaction_in_bounded_memory() {
    big_load_in_bounded_memory(count_from_env(ROWS, 10_000_000) as u32, false);
}

/// With the log in memory the writes spill to scratch files (fewer rows: the same path).
#[test]
fn a_big_load_with_the_log_in_memory_runs_in_bounded_memory() {
    big_load_in_bounded_memory(
        count_from_env("BEECH_BIG_IN_MEMORY_ROWS", 3_000_000) as u32,
        true,
    );
}

fn big_load_in_bounded_memory(rows: u32, in_memory_log: bool) {
    let dir = tempfile::tempdir().unwrap();
    let acks = dir.path().join("acks");
    let envdir = dir.path().join("env");
    let mut vars = vec![
        (ROWS, rows.to_string()),
        (DIR, envdir.display().to_string()),
    ];
    if in_memory_log {
        vars.push((IN_MEMORY_LOG, "1".to_string()));
    }
    let mut child = common::spawn_self("child_big_load", &acks, &vars);
    assert!(child.wait().unwrap().success());
    let lines = Acks::read(&acks);
    assert_eq!(lines[..2], ["writes done", "committed"]);
    let peak_kb: u64 = lines[2].strip_prefix("peak ").unwrap().parse().unwrap();
    // Ten million rows take 80 MB as keys and values alone, and their write set in memory
    // about 800 MB; the process stays within its budgets (8 MiB each) plus a fixed
    // allowance.
    eprintln!("{rows} rows in one transaction (log in memory: {in_memory_log}): peak resident memory {peak_kb} kB");
    assert!(peak_kb < 48_000, "peak resident memory {peak_kb} kB");
    assert_eq!(check_rows(&envdir, rows, in_memory_log), rows as u64);
}

#[test]
fn a_big_load_killed_at_random_moments_is_all_or_nothing() {
    let rows = count_from_env("BEECH_BIG_KILL_ROWS", 300_000) as u32;
    let kills = count_from_env("BEECH_BIG_KILLS", 6);
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let (mut whole, mut none) = (0, 0);
    for k in 0..kills {
        let dir = tempfile::tempdir().unwrap();
        let acks = dir.path().join("acks");
        let envdir = dir.path().join("env");
        let mut child = common::spawn_self(
            "child_big_load",
            &acks,
            &[
                (ROWS, rows.to_string()),
                (DIR, envdir.display().to_string()),
            ],
        );
        // Kill during the writes, or during the commit's apply.
        let wait_for = if k % 2 == 0 { "" } else { "writes done" };
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while !wait_for.is_empty()
            && !Acks::read(&acks).iter().any(|l| l == wait_for)
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..300)));
        let _ = child.kill();
        child.wait().unwrap();
        let committed = Acks::read(&acks).iter().any(|l| l == "committed");
        let count = check_rows(&envdir, rows, false);
        assert!(
            count == rows as u64 || !committed,
            "kill {k}: committed load lost"
        );
        if count > 0 {
            whole += 1;
        } else {
            none += 1;
        }
    }
    eprintln!("{kills} kills: {whole} found the load whole, {none} found nothing");
}

/// Checkpoints asked for while a spilled commit is being applied wait for it: a process
/// killed during the apply, with checkpoints attempted all along, reopens with the
/// transaction whole or absent (a checkpoint that captured part of the apply would leave
/// part of an unlogged commit).
#[test]
fn checkpoints_wait_for_a_spilled_commit_being_applied() {
    let n = 3_000;
    let cfg = config().checkpoint_log_bytes(1 << 40);
    // A dry run counts the I/O calls of the commit, to aim the kills inside it.
    let commit_calls = {
        let storage = MemStorage::new();
        let env = Env::open_with_storage(Arc::new(storage.clone()), cfg.clone()).unwrap();
        let db = load(&env, n);
        env.sync().unwrap();
        let t = big_rewrite(&env, &db, n);
        let before = storage.mutation_count();
        t.commit().unwrap();
        storage.mutation_count() - before
    };
    assert!(
        commit_calls > 10,
        "the commit made {commit_calls} I/O calls"
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(99);
    let mut outcomes = [0u32; 2];
    for seed in common::seeds_from_env("BEECH_BIG_SEEDS", 60) {
        let storage = MemStorage::new();
        let env = Env::open_with_storage(Arc::new(storage.clone()), cfg.clone()).unwrap();
        let db = load(&env, n);
        env.sync().unwrap();
        let t = big_rewrite(&env, &db, n);
        let stop = Arc::new(AtomicBool::new(false));
        let checkpointer = {
            let (env, stop) = (env.clone(), stop.clone());
            std::thread::spawn(
                move || {
                    while !stop.load(Ordering::Acquire) && env.sync().is_ok() {}
                },
            )
        };
        storage.end_process_after(rng.gen_range(1..commit_calls * 2));
        let acked = t.commit_with(Durability::Sync).is_ok();
        stop.store(true, Ordering::Release);
        checkpointer.join().unwrap();
        drop((t, db));
        let next = common::kill(&storage, env);
        let env = Env::open_with_storage(Arc::new(next), cfg.clone()).unwrap();
        let seen = contents(&env.open_db("d").unwrap());
        match which(&seen, n) {
            Some(after) => {
                assert!(after || !acked, "seed {seed}: an acknowledged commit lost");
                outcomes[after as usize] += 1;
            }
            None => panic!("seed {seed}: a partial commit ({} entries)", seen.len()),
        }
        assert!(env.verify().unwrap().is_clean(), "seed {seed}");
    }
    assert!(
        outcomes[0] > 0 && outcomes[1] > 0,
        "both outcomes seen: {outcomes:?}"
    );
}
