//! Crash test, power loss: a workload runs on `MemStorage` until the power is cut at a
//! random mutating I/O call (possibly inside a checkpoint); the disk image after the cut
//! (unsynced writes lost, torn or reordered) is reopened and must equal the state of the
//! last completed sync, or of the sync in flight, and verify clean.
//!
//! `BEECH_POWER_SEEDS` sets the number of seeds (default 1000), `BEECH_FIRST_SEED` the first.

mod common;

use beechdb::storage::MemStorage;
use beechdb::{Config, Env};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn config() -> Config {
    Config::new().page_size(4096).cache_size(64 << 10)
}

/// Runs the workload of `seed`; returns the states after each sync (index 0: empty).
fn workload(storage: &MemStorage, seed: u64) -> (Vec<Model>, bool) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut synced = vec![Model::new()];
    let mut model = Model::new();
    let Ok(env) = Env::open_with_storage(Arc::new(storage.clone()), config()) else {
        return (synced, false);
    };
    let Ok(db) = env.open_or_create_db("d") else {
        return (synced, false);
    };
    let rounds = rng.gen_range(1..6);
    for _ in 0..rounds {
        for _ in 0..rng.gen_range(1..300) {
            let k = format!("key{:05}", rng.gen_range(0..3000)).into_bytes();
            if rng.gen_ratio(1, 4) {
                if db.delete(&k).is_err() {
                    return (synced, false);
                }
                model.remove(&k);
            } else {
                let len = if rng.gen_ratio(1, 30) {
                    rng.gen_range(2000..9000)
                } else {
                    rng.gen_range(1..120)
                };
                let v: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                if db.put(&k, &v).is_err() {
                    return (synced, false);
                }
                model.insert(k, v);
            }
        }
        // The sync in flight: its state counts as acceptable too.
        synced.push(model.clone());
        if env.sync().is_err() {
            return (synced, false);
        }
    }
    common::kill(storage, env); // the machine dies: no clean close
    (synced, true)
}

fn read_all(env: &Env) -> Model {
    match env.open_db("d") {
        Ok(db) => db.iter().map(|kv| kv.unwrap()).collect(),
        Err(beechdb::Error::DbNotFound(_)) => Model::new(),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn power_cut_at_random_points_leaves_a_synced_state() {
    let range = common::seeds_from_env("BEECH_POWER_SEEDS", 1000);
    let seeds = range.end - range.start;
    let mut cut_inside = 0;
    let (mut got_previous, mut got_in_flight) = (0, 0);
    for seed in range {
        // First learn how many mutating calls the whole workload makes, then cut inside it.
        let probe = MemStorage::new();
        workload(&probe, seed);
        let total = probe.mutation_count();
        let storage = MemStorage::new();
        let cut = rand::rngs::StdRng::seed_from_u64(seed ^ 0xC0FFEE).gen_range(1..=total + 1);
        storage.cut_power_after(cut);
        let (synced, finished) = workload(&storage, seed);
        if !finished {
            cut_inside += 1;
        }
        let image = storage.crash_image(seed);
        // Creating the environment itself may have been cut short: then nothing exists yet.
        let env = match Env::open_with_storage(Arc::new(image), config().create(false)) {
            Ok(env) => env,
            Err(beechdb::Error::InvalidArgument(_)) => {
                assert!(
                    synced.len() <= 2,
                    "seed {seed}: environment lost after a completed sync"
                );
                continue;
            }
            Err(e) => panic!("seed {seed}: reopen failed: {e}"),
        };
        let state = read_all(&env);
        let last = synced.len() - 1;
        // Accept the last completed sync or the one in flight when the power went.
        let candidates = if finished {
            &synced[last..]
        } else {
            &synced[last.saturating_sub(1)..]
        };
        assert!(
            candidates.contains(&state),
            "seed {seed} (cut at call {cut}): recovered {} entries, matching no synced state of {:?}",
            state.len(),
            candidates.iter().map(|m| m.len()).collect::<Vec<_>>()
        );
        if !finished && synced.len() >= 2 {
            if state == synced[last] {
                got_in_flight += 1;
            } else {
                got_previous += 1;
            }
        }
        let report = env.verify().unwrap();
        assert!(report.is_clean(), "seed {seed}: {:?}", report.problems);
        // The environment keeps working after recovery.
        let db = env.open_or_create_db("d").unwrap();
        db.put(b"after", b"crash").unwrap();
        env.sync().unwrap();
    }
    eprintln!("{seeds} seeds: {cut_inside} cut inside; recovered the previous sync {got_previous} times, the in-flight one {got_in_flight} times");
    if seeds >= 100 {
        assert!(
            got_previous > 0 && got_in_flight > 0,
            "both outcomes must occur"
        );
    }
    assert!(
        cut_inside * 2 > seeds,
        "most cuts must land inside the workload ({cut_inside}/{seeds})"
    );
}
