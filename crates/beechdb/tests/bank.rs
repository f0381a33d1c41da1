//! Bank invariant: writers move money between accounts in transactions (retrying on
//! conflict and deadlock); snapshot readers must always see the same total; the total holds
//! after the run, after a clean reopen, and after a power cut in the middle of the run.

mod common;

use beechdb::storage::MemStorage;
use beechdb::{Config, Db, Durability, Env};
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

const ACCOUNTS: u64 = 50;
const INITIAL: u64 = 1000;

fn config() -> Config {
    Config::new()
        .page_size(4096)
        .cache_size(256 << 10)
        .transactional(true)
        .log_segment_size(128 << 10)
        .checkpoint_log_bytes(256 << 10)
}

fn balance(v: Option<Vec<u8>>) -> u64 {
    u64::from_le_bytes(v.expect("account exists").try_into().unwrap())
}

fn total(env: &Env, db: &Db) -> beechdb::Result<u64> {
    let txn = env.begin_txn()?;
    let mut sum = 0;
    for a in 0..ACCOUNTS {
        sum += balance(txn.get(db, &a.to_be_bytes())?);
    }
    Ok(sum)
}

/// One transfer; retryable errors are retried. Returns false when the environment failed.
fn transfer(env: &Env, db: &Db, rng: &mut impl Rng, retries: &AtomicU64) -> bool {
    loop {
        let (a, b) = (rng.gen_range(0..ACCOUNTS), rng.gen_range(0..ACCOUNTS));
        if a == b {
            continue;
        }
        let attempt = (|| -> beechdb::Result<u64> {
            let t = env.begin_txn()?;
            let from = balance(t.get_for_update(db, &a.to_be_bytes())?);
            let to = balance(t.get_for_update(db, &b.to_be_bytes())?);
            let amount = rng.gen_range(0..=from.min(100));
            t.put(db, &a.to_be_bytes(), &(from - amount).to_le_bytes())?;
            t.put(db, &b.to_be_bytes(), &(to + amount).to_le_bytes())?;
            let d = if amount % 2 == 0 {
                Durability::Sync
            } else {
                Durability::NoSync
            };
            t.commit_with(d)
        })();
        match attempt {
            Ok(_) => return true,
            Err(e) if e.is_retryable() => {
                retries.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => return false,
        }
    }
}

fn setup(env: &Env) -> Db {
    let db = env.open_or_create_db("accounts").unwrap();
    let t = env.begin_txn().unwrap();
    for a in 0..ACCOUNTS {
        t.put(&db, &a.to_be_bytes(), &INITIAL.to_le_bytes())
            .unwrap();
    }
    t.commit().unwrap();
    db
}

fn run(env: &Env, db: &Db, transfers_per_writer: usize) -> (u64, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let retries = Arc::new(AtomicU64::new(0));
    let checks = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (env, db, stop, checks) = (env.clone(), db.clone(), stop.clone(), checks.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match total(&env, &db) {
                        Ok(sum) => assert_eq!(
                            sum,
                            ACCOUNTS * INITIAL,
                            "a snapshot saw money appear or vanish"
                        ),
                        Err(_) => return,
                    }
                    checks.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let writers: Vec<_> = (0..4u64)
        .map(|w| {
            let (env, db, retries) = (env.clone(), db.clone(), retries.clone());
            std::thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(w);
                for _ in 0..transfers_per_writer {
                    if !transfer(&env, &db, &mut rng, &retries) {
                        return;
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    (
        retries.load(Ordering::Relaxed),
        checks.load(Ordering::Relaxed),
    )
}

#[test]
fn transfers_keep_the_total() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path(), config()).unwrap();
    let db = setup(&env);
    let (retries, checks) = run(&env, &db, 400);
    eprintln!("{retries} retries, {checks} consistent snapshot totals");
    assert!(checks > 0);
    assert_eq!(total(&env, &db).unwrap(), ACCOUNTS * INITIAL);
    drop(db);
    env.close().unwrap();
    let env = Env::open(dir.path(), config()).unwrap();
    let db = env.open_db("accounts").unwrap();
    assert_eq!(total(&env, &db).unwrap(), ACCOUNTS * INITIAL);
    env.sync().unwrap();
    assert!(env.verify().unwrap().is_clean());
}

#[test]
fn power_cut_in_the_middle_keeps_the_total() {
    for seed in 0..12u64 {
        let storage = MemStorage::new();
        let env = Env::open_with_storage(Arc::new(storage.clone()), config()).unwrap();
        let db = setup(&env);
        storage.cut_power_after(rand::rngs::StdRng::seed_from_u64(seed).gen_range(20..400));
        run(&env, &db, 200);
        assert!(
            storage.is_power_off(),
            "seed {seed}: the cut should land inside the run"
        );
        drop(db);
        common::kill(&storage, env);
        let image = storage.crash_image(seed);
        let env = match Env::open_with_storage(Arc::new(image), config()) {
            Ok(env) => env,
            Err(e) => panic!("seed {seed}: recovery failed: {e}"),
        };
        let db = env.open_db("accounts").unwrap();
        assert_eq!(total(&env, &db).unwrap(), ACCOUNTS * INITIAL, "seed {seed}");
        let (_, _) = run(&env, &db, 20);
        assert_eq!(
            total(&env, &db).unwrap(),
            ACCOUNTS * INITIAL,
            "seed {seed}: after recovery"
        );
        env.sync().unwrap();
        assert!(env.verify().unwrap().is_clean());
    }
}
