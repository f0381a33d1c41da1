//! Checkpoints that run while other threads commit: the checkpoint writes the pages it
//! captured while commits relocate, free and evict them. Writers on several threads (each
//! in its own key space), a thread checkpointing in a loop, and a cache small enough that
//! captured pages are evicted mid-checkpoint; the power is cut at a random I/O call. After
//! recovery every acknowledged SYNC commit is present, nothing partial is, and verify is
//! clean; without a crash the final state is exactly the model.
//!
//! `BEECH_CKPT_SEEDS` sets the number of power-cut seeds (default 60).

mod common;

use beechdb::storage::MemStorage;
use beechdb::{Config, Db, Env};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const WRITERS: u64 = 3;

fn config() -> Config {
    Config::new()
        .page_size(4096)
        .cache_size(96 << 10)
        .transactional(true)
        .log_segment_size(128 << 10)
}

/// One writer's history: the model after each of its commits (index 0: before any), the
/// last entry possibly the commit in flight when the power failed; and how many of them
/// were acknowledged.
struct History {
    models: Vec<Model>,
    acked: usize,
}

/// Checkpoints completed so far, and whether the checkpointing thread has stopped: writers
/// wait for a new checkpoint every `PACE` commits, so checkpoints interleave with commits
/// however the scheduler treats the threads (a loaded machine once ran only 5 checkpoints
/// during 1,200 commits).
#[derive(Default)]
struct Checkpoints {
    done: AtomicU64,
    stopped: AtomicBool,
}

const PACE: usize = 40;

impl Checkpoints {
    fn wait_for_next(&self, seen: &mut u64) {
        while self.done.load(Ordering::Acquire) == *seen && !self.stopped.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        *seen = self.done.load(Ordering::Acquire);
    }
}

fn writer(
    env: &Env,
    db: &Db,
    thread: u64,
    seed: u64,
    commits: usize,
    checkpoints: &Checkpoints,
) -> History {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed * 31 + thread);
    let mut h = History {
        models: vec![Model::new()],
        acked: 0,
    };
    let mut seen = 0;
    for i in 0..commits {
        if i % PACE == PACE - 1 {
            checkpoints.wait_for_next(&mut seen);
        }
        let Ok(t) = env.begin_txn() else { break };
        let mut next = h.models[h.acked].clone();
        for _ in 0..rng.gen_range(1..5) {
            let k = format!("t{thread}-{:04}", rng.gen_range(0..300)).into_bytes();
            let r = if rng.gen_ratio(1, 3) {
                next.remove(&k);
                t.delete(db, &k).map(drop)
            } else {
                let len = if rng.gen_ratio(1, 30) {
                    5000
                } else {
                    rng.gen_range(1..300)
                };
                let v = vec![rng.gen::<u8>(); len];
                next.insert(k.clone(), v.clone());
                t.put(db, &k, &v)
            };
            if r.is_err() {
                return h;
            }
        }
        h.models.push(next);
        if t.commit().is_err() {
            return h;
        }
        h.acked += 1;
    }
    h
}

/// Writers and a checkpointing thread until the writers finish (or the power fails).
fn run(env: &Env, db: &Db, seed: u64, commits: usize) -> Vec<History> {
    let done = AtomicBool::new(false);
    let checkpoints = Checkpoints::default();
    std::thread::scope(|s| {
        let checkpointer = s.spawn(|| {
            while !done.load(Ordering::Relaxed) && env.sync().is_ok() {
                checkpoints.done.fetch_add(1, Ordering::Release);
            }
            checkpoints.stopped.store(true, Ordering::Release);
        });
        let checkpoints = &checkpoints;
        let writers: Vec<_> = (0..WRITERS)
            .map(|t| s.spawn(move || writer(env, db, t, seed, commits, checkpoints)))
            .collect();
        let histories = writers.into_iter().map(|w| w.join().unwrap()).collect();
        done.store(true, Ordering::Relaxed);
        checkpointer.join().unwrap();
        histories
    })
}

fn state_of(db: &Db, thread: u64) -> Model {
    let prefix = format!("t{thread}-").into_bytes();
    db.iter()
        .map(|r| r.unwrap())
        .filter(|(k, _)| k.starts_with(&prefix))
        .collect()
}

#[test]
fn commits_during_checkpoints_recover_after_power_loss() {
    for seed in common::seeds_from_env("BEECH_CKPT_SEEDS", 60) {
        let storage = MemStorage::new();
        {
            let env = Env::open_with_storage(Arc::new(storage.clone()), config()).unwrap();
            env.create_db("d").unwrap();
        }
        let env = Env::open_with_storage(Arc::new(storage.clone()), config()).unwrap();
        let db = env.open_db("d").unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        storage.cut_power_after(rng.gen_range(50..3000));
        let histories = run(&env, &db, seed, 200);
        drop(db);
        common::kill(&storage, env);
        let image = storage.crash_image(seed);
        let env = Env::open_with_storage(Arc::new(image), config())
            .unwrap_or_else(|e| panic!("seed {seed}: recovery failed: {e}"));
        let report = env.verify().unwrap();
        assert!(report.is_clean(), "seed {seed}: {report:?}");
        let db = env.open_db("d").unwrap();
        for (t, h) in histories.iter().enumerate() {
            let got = state_of(&db, t as u64);
            let acked = &h.models[h.acked];
            let in_flight = h.models.get(h.acked + 1);
            assert!(
                got == *acked || Some(&got) == in_flight,
                "seed {seed}, writer {t}: state is neither its last acknowledged commit ({}) \
                 nor the one in flight",
                h.acked
            );
        }
        // The recovered environment keeps working.
        db.put(b"after", b"recovery").unwrap();
        env.sync().unwrap();
    }
}

#[test]
fn commits_during_checkpoints_end_in_exactly_the_model() {
    let storage = MemStorage::new();
    let env = Env::open_with_storage(Arc::new(storage.clone()), config()).unwrap();
    let db = env.create_db("d").unwrap();
    let histories = run(&env, &db, 7, 400);
    let stat = env.stat().unwrap();
    assert!(
        stat.checkpoints > 5,
        "checkpoints ran meanwhile: {}",
        stat.checkpoints
    );
    // Writers evicted dirty pages, handed over and written after their exclusive hold.
    assert!(stat.cache_dirty_evictions > 0, "{stat:?}");
    drop(db);
    env.close().unwrap();
    let env = Env::open_with_storage(Arc::new(storage), config()).unwrap();
    assert!(env.verify().unwrap().is_clean());
    let db = env.open_db("d").unwrap();
    for (t, h) in histories.iter().enumerate() {
        assert_eq!(h.acked, 400);
        assert!(state_of(&db, t as u64) == h.models[400], "writer {t}");
    }
}
