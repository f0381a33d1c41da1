//! Crash recovery, power loss: transactions through the simulating storage, power cut at a
//! random I/O call (inside commits, log segment switches and checkpoints, which this
//! configuration makes frequent); on every third seed the power is cut again during
//! recovery. After recovery the state must equal the state after some prefix of the
//! commits that includes every commit acknowledged under SYNC; verify must be clean.
//!
//! A second run makes the log long beside its checkpoints, so that released segments are
//! reused as the next ones (recycled: their old records stay behind the new ones until
//! overwritten) and the cuts fall in segments holding an earlier segment's records.
//!
//! `BEECH_TDS_POWER_SEEDS` sets the number of seeds (default 1000; the recycling run takes
//! a fifth as many), `BEECH_FIRST_SEED` the first.

mod common;

use beechdb::storage::MemStorage;
use beechdb::{Config, Db, Durability, Env};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A run's configuration and its number of transactions (at most).
#[derive(Clone, Copy)]
struct Run {
    checkpoint_log_bytes: u64,
    txns: u32,
}

/// Frequent checkpoints and segment switches.
const FREQUENT: Run = Run {
    checkpoint_log_bytes: 96 << 10,
    txns: 150,
};

/// Long enough for several checkpoints, each releasing segments that come back recycled.
const RECYCLING: Run = Run {
    checkpoint_log_bytes: 128 << 10,
    txns: 1200,
};

fn config(run: Run) -> Config {
    Config::new()
        .page_size(4096)
        .cache_size(64 << 10)
        .transactional(true)
        .log_segment_size(64 << 10)
        .checkpoint_log_bytes(run.checkpoint_log_bytes)
}

/// What a workload did: the model after each commit (index 0: before any), per commit
/// whether it was acknowledged under SYNC, and how many log segments were recycled.
struct Outcome {
    models: Vec<Model>,
    synced: Vec<bool>,
    recycled: u64,
}

/// Runs seed's transactions until done or the power fails.
fn workload(storage: &MemStorage, seed: u64, run: Run) -> Outcome {
    let mut out = Outcome {
        models: vec![Model::new()],
        synced: Vec::new(),
        recycled: 0,
    };
    let Ok(env) = Env::open_with_storage(Arc::new(storage.clone()), config(run)) else {
        return out;
    };
    if let Ok(db) = env.open_or_create_db("d") {
        commits(&env, &db, seed, run, &mut out);
    }
    out.recycled = env
        .stat()
        .ok()
        .and_then(|s| s.txn?.log)
        .map_or(0, |l| l.segments_recycled);
    common::kill(storage, env);
    out
}

/// The transactions of [`workload`], recorded in `out` as they commit.
fn commits(env: &Env, db: &Db, seed: u64, run: Run, out: &mut Outcome) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut model = Model::new();
    'txns: for _ in 0..rng.gen_range(1..run.txns) {
        let Ok(t) = env.begin_txn() else { break };
        let mut next = model.clone();
        for _ in 0..rng.gen_range(1..6) {
            let k = format!("k{:04}", rng.gen_range(0..400)).into_bytes();
            let r = if rng.gen_ratio(1, 4) {
                next.remove(&k);
                t.delete(db, &k).map(drop)
            } else {
                let v = vec![
                    rng.gen::<u8>();
                    if rng.gen_ratio(1, 20) {
                        3000
                    } else {
                        rng.gen_range(1..200)
                    }
                ];
                next.insert(k.clone(), v.clone());
                t.put(db, &k, &v)
            };
            if r.is_err() {
                break 'txns;
            }
        }
        let d = [
            Durability::Sync,
            Durability::WriteNoSync,
            Durability::NoSync,
        ][rng.gen_range(0..3)];
        // The commit in flight counts as a possible outcome.
        out.models.push(next.clone());
        match t.commit_with(d) {
            Ok(_) => out.synced.push(d == Durability::Sync),
            Err(_) => break,
        }
        model = next;
    }
}

fn recover(image: MemStorage, run: Run) -> beechdb::Result<Env> {
    Env::open_with_storage(Arc::new(image), config(run).create(false))
}

#[test]
fn power_cuts_in_commits_checkpoints_and_recovery() {
    let seeds = common::seeds_from_env("BEECH_TDS_POWER_SEEDS", 1000);
    power_cuts(seeds, FREQUENT);
}

#[test]
fn power_cuts_in_recycled_log_segments() {
    let seeds = common::seeds_from_env("BEECH_TDS_POWER_SEEDS", 1000);
    let recycled = power_cuts(
        seeds.start..seeds.start + (seeds.end - seeds.start) / 5,
        RECYCLING,
    );
    assert!(recycled > 0, "no log segment was recycled");
}

/// Cuts the power in each seed's workload of `run` at a random I/O call, and sometimes
/// again in the recovery; checks what recovers. Returns the log segments the uncut
/// workloads recycled.
fn power_cuts(range: std::ops::Range<u64>, run: Run) -> u64 {
    let seeds = range.end - range.start;
    let (mut inside, mut during_recovery, mut recycled) = (0, 0, 0);
    for seed in range {
        let probe = MemStorage::new();
        recycled += workload(&probe, seed, run).recycled;
        let storage = MemStorage::new();
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0xBEEC);
        storage.cut_power_after(rng.gen_range(1..=probe.mutation_count() + 1));
        let Outcome { models, synced, .. } = workload(&storage, seed, run);
        inside += storage.is_power_off() as u64;
        let mut image = storage.crash_image(seed);
        if seed % 3 == 0 {
            // Cut again while recovery runs, then recover from that.
            let again = image.crash_image(seed);
            again.cut_power_after(rng.gen_range(1..40));
            if recover(again.clone(), run).is_err() || again.is_power_off() {
                during_recovery += 1;
            }
            image = again.crash_image(seed + 1);
        }
        let env = match recover(image, run) {
            Ok(env) => env,
            // The environment itself was never completely created.
            Err(beechdb::Error::InvalidArgument(_)) if synced.is_empty() => continue,
            Err(e) => panic!("seed {seed}: recovery failed: {e}"),
        };
        let state: Model = match env.open_db("d") {
            Ok(db) => db.iter().map(|kv| kv.unwrap()).collect(),
            Err(beechdb::Error::DbNotFound(_)) => Model::new(),
            Err(e) => panic!("seed {seed}: {e}"),
        };
        let prefix = models.iter().rposition(|m| *m == state);
        let Some(prefix) = prefix else {
            panic!(
                "seed {seed}: recovered state ({} keys) matches no prefix of the commits",
                state.len()
            );
        };
        if let Some(last_sync) = synced.iter().rposition(|&s| s) {
            assert!(
                prefix > last_sync,
                "seed {seed}: SYNC commit {last_sync} lost (recovered {prefix} commits)"
            );
        }
        env.sync().unwrap();
        let report = env.verify().unwrap();
        assert!(report.is_clean(), "seed {seed}: {:?}", report.problems);
    }
    eprintln!(
        "{seeds} seeds: {inside} cuts inside the workload, {during_recovery} during recovery, \
         {recycled} log segments recycled by the uncut workloads"
    );
    assert!(inside * 2 > seeds);
    recycled
}
