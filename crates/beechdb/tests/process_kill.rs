//! Crash test, process kill: a child process (this test binary, re-run as a writer) puts and
//! deletes and syncs in a loop, reporting each completed sync on a channel of its own; the parent
//! SIGKILLs it at a random moment, reopens, and checks that the state equals the last
//! reported sync or the one in flight, and that verify is clean.
//!
//! `BEECH_KILL_ITERS` sets the number of kills (default 50).

mod common;

use beechdb::{Config, Env};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::time::Duration;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const CHILD_DIR: &str = "BEECH_KILL_CHILD_DIR";
const CHILD_SEED: &str = "BEECH_KILL_CHILD_SEED";

fn config() -> Config {
    Config::new().page_size(4096).cache_size(256 << 10)
}

/// The operations of round `round`, applied to the model and (if given) the database.
fn round_ops(seed: u64, round: u64, model: &mut Model, db: Option<&beechdb::Db>) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed.wrapping_mul(1_000_003) ^ round);
    for _ in 0..rng.gen_range(1..400) {
        let k = format!("k{:06}", rng.gen_range(0..20_000)).into_bytes();
        if rng.gen_ratio(1, 3) {
            model.remove(&k);
            if let Some(db) = db {
                db.delete(&k).unwrap();
            }
        } else {
            let len = if rng.gen_ratio(1, 50) {
                rng.gen_range(3000..20_000)
            } else {
                rng.gen_range(1..200)
            };
            let v: Vec<u8> = (0..len).map(|i| (i as u64 ^ round) as u8).collect();
            if let Some(db) = db {
                db.put(&k, &v).unwrap();
            }
            model.insert(k, v);
        }
    }
}

/// The writer: runs only when re-executed by the parent.
#[test]
#[ignore = "a child process of kill_at_random_moments_leaves_a_synced_state"]
fn child_writer() {
    let (Some(mut acks), Ok(dir), Ok(seed)) = (
        common::Acks::open(),
        std::env::var(CHILD_DIR),
        std::env::var(CHILD_SEED),
    ) else {
        panic!("run only by kill_at_random_moments_leaves_a_synced_state");
    };
    let seed: u64 = seed.parse().unwrap();
    let env = Env::open(&dir, config()).unwrap();
    let db = env.open_or_create_db("d").unwrap();
    let mut model = Model::new();
    for round in 1.. {
        round_ops(seed, round, &mut model, Some(&db));
        env.sync().unwrap();
        acks.report(&format!("synced {round}"));
    }
}

#[test]
fn kill_at_random_moments_leaves_a_synced_state() {
    let iters = common::count_from_env("BEECH_KILL_ITERS", 50);
    let mut rng = rand::rngs::StdRng::seed_from_u64(99);
    let mut syncs_seen = Vec::new();
    for iter in 0..iters {
        let dir = tempfile::tempdir().unwrap();
        let ack_dir = tempfile::tempdir().unwrap();
        let acks = ack_dir.path().join("acks");
        let seed = rng.gen::<u64>();
        let mut child = common::spawn_self(
            "child_writer",
            &acks,
            &[
                (CHILD_DIR, dir.path().display().to_string()),
                (CHILD_SEED, seed.to_string()),
            ],
        );
        std::thread::sleep(Duration::from_millis(rng.gen_range(5..400)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let lines = common::Acks::read(&acks);
        let last = lines.last().map_or(0, |l| {
            l.strip_prefix("synced ").unwrap().parse::<u64>().unwrap()
        });
        assert!(
            lines
                .iter()
                .enumerate()
                .all(|(i, l)| *l == format!("synced {}", i + 1)),
            "iteration {iter}: every acknowledgement in order: {lines:?}"
        );
        syncs_seen.push(last);

        let env = match Env::open(dir.path(), config().create(false)) {
            Ok(env) => env,
            // Killed before the environment was even created.
            Err(beechdb::Error::InvalidArgument(_)) if last == 0 => continue,
            Err(e) => panic!("iteration {iter}: reopen failed: {e}"),
        };
        let state: Model = match env.open_db("d") {
            Ok(db) => db.iter().map(|kv| kv.unwrap()).collect(),
            Err(beechdb::Error::DbNotFound(_)) => Model::new(),
            Err(e) => panic!("{e}"),
        };
        let mut model = Model::new();
        for round in 1..=last {
            round_ops(seed, round, &mut model, None);
        }
        let mut in_flight = model.clone();
        round_ops(seed, last + 1, &mut in_flight, None);
        assert!(
            state == model || state == in_flight,
            "iteration {iter}: after sync {last}, recovered {} entries; expected {} or {}",
            state.len(),
            model.len(),
            in_flight.len()
        );
        let report = env.verify().unwrap();
        assert!(report.is_clean(), "iteration {iter}: {:?}", report.problems);
    }
    eprintln!("completed syncs at each kill: {syncs_seen:?}");
    let progressed = syncs_seen.iter().filter(|&&n| n >= 2).count() as u64;
    assert!(
        progressed * 2 >= iters,
        "most kills must land after some syncs completed"
    );
}
