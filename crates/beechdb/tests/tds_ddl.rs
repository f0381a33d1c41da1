//! Databases created and removed by transactions: visibility, atomicity with the writes of
//! the same transaction, conflicts on the name, and recovery from the log (no checkpoint is
//! forced by a create), through power cuts and process kills.

mod common;

use beechdb::storage::MemStorage;
use beechdb::{Config, Durability, Env, Error};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

fn tds() -> Config {
    Config::new()
        .page_size(4096)
        .cache_size(64 << 10)
        .transactional(true)
        .log_segment_size(64 << 10)
        .checkpoint_log_bytes(1 << 40)
        .checkpoint_interval(Duration::from_secs(3600))
        .lock_timeout(Duration::from_millis(200))
}

fn open(storage: &MemStorage, cfg: Config) -> Env {
    Env::open_with_storage(Arc::new(storage.clone()), cfg).unwrap()
}

#[test]
fn create_and_remove_in_a_transaction() {
    let storage = MemStorage::new();
    let env = open(&storage, tds());
    let checkpoints = env.stat().unwrap().checkpoints;
    let t = env.begin_txn().unwrap();
    let orders = t.create_db("orders").unwrap();
    t.put(&orders, b"o1", b"apple").unwrap();
    assert_eq!(t.get(&orders, b"o1").unwrap(), Some(b"apple".to_vec()));
    assert!(t
        .iter(&orders)
        .map(|kv| kv.unwrap())
        .eq([(b"o1".to_vec(), b"apple".to_vec())]));
    // Not visible outside before the commit.
    assert!(matches!(env.open_db("orders"), Err(Error::DbNotFound(_))));
    assert!(matches!(orders.get(b"o1"), Err(Error::DbRemoved)));
    // A second creator of the same name waits for the first, then finds it taken.
    let env2 = env.clone();
    let racer = std::thread::spawn(move || {
        let t2 = env2.begin_txn().unwrap();
        t2.create_db("orders").map(drop)
    });
    std::thread::sleep(Duration::from_millis(50));
    t.commit().unwrap();
    assert!(matches!(racer.join().unwrap(), Err(Error::DbExists(_))));
    assert_eq!(
        env.open_db("orders").unwrap().get(b"o1").unwrap(),
        Some(b"apple".to_vec())
    );
    assert_eq!(
        env.stat().unwrap().checkpoints,
        checkpoints,
        "no checkpoint per create"
    );
    // An aborted create leaves nothing, and its name free.
    let t = env.begin_txn().unwrap();
    t.create_db("scratch").unwrap();
    t.abort();
    assert!(matches!(env.open_db("scratch"), Err(Error::DbNotFound(_))));
    env.create_db("scratch").unwrap();
    // Remove in a transaction: the removing transaction's own writes go with it.
    let t = env.begin_txn().unwrap();
    let scratch = env.open_db("scratch").unwrap();
    t.put(&scratch, b"k", b"v").unwrap();
    t.remove_db("scratch").unwrap();
    assert!(matches!(t.put(&scratch, b"k", b"v"), Err(Error::DbRemoved)));
    assert!(matches!(t.remove_db("scratch"), Err(Error::DbNotFound(_))));
    t.commit().unwrap();
    assert!(matches!(scratch.get(b"k"), Err(Error::DbRemoved)));
    assert_eq!(env.db_names().unwrap(), vec!["orders".to_string()]);
    // Writes to a database another transaction removed fail at commit, cleanly.
    let orders = env.open_db("orders").unwrap();
    let writer = env.begin_txn().unwrap();
    writer.put(&orders, b"o2", b"pear").unwrap();
    env.remove_db("orders").unwrap();
    assert!(matches!(writer.commit(), Err(Error::DbRemoved)));
    // All of it comes back from the log alone.
    let t = env.begin_txn().unwrap();
    let recreated = {
        drop(t);
        let t = env.begin_txn().unwrap();
        let db = t.create_db("orders").unwrap();
        t.put(&db, b"o3", b"plum").unwrap();
        t.commit().unwrap();
        db
    };
    drop(recreated);
    let storage = common::kill(&storage, env);
    let env = open(&storage, tds());
    assert_eq!(env.recovered_commits(), 5);
    assert_eq!(env.db_names().unwrap(), vec!["orders".to_string()]);
    let orders = env.open_db("orders").unwrap();
    let all: Vec<_> = orders.iter().map(|kv| kv.unwrap()).collect();
    assert_eq!(all, vec![(b"o3".to_vec(), b"plum".to_vec())]);
    assert!(env.verify().unwrap().is_clean());
}

type Model = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

fn state(env: &Env) -> Model {
    env.db_names()
        .unwrap()
        .into_iter()
        .map(|n| {
            let db = env.open_db(&n).unwrap();
            (n, db.iter().map(|kv| kv.unwrap()).collect())
        })
        .collect()
}

/// Transactions that create, fill, and remove databases at random until the power fails.
/// Returns the model after each commit (the one in flight included) and whether each was
/// acknowledged under SYNC.
fn workload(storage: &MemStorage, seed: u64) -> (Vec<Model>, Vec<bool>) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut models = vec![Model::new()];
    let mut synced = Vec::new();
    let Ok(env) = Env::open_with_storage(Arc::new(storage.clone()), tds()) else {
        return (models, synced);
    };
    let mut model = Model::new();
    for _ in 0..rng.gen_range(1..80) {
        let mut next = model.clone();
        let t = env.begin_txn().unwrap();
        let mut wrote = false;
        let result = (|| {
            for _ in 0..rng.gen_range(1..4) {
                let name = format!("db{}", rng.gen_range(0..5));
                match rng.gen_range(0..10) {
                    0 if next.contains_key(&name) => {
                        t.remove_db(&name)?;
                        next.remove(&name);
                        wrote = true;
                    }
                    1 | 2 if !next.contains_key(&name) => {
                        let db = t.create_db(&name)?;
                        next.insert(name.clone(), BTreeMap::new());
                        let (k, v) = (b"first".to_vec(), vec![7u8; 30]);
                        t.put(&db, &k, &v)?;
                        next.get_mut(&name).unwrap().insert(k, v);
                        wrote = true;
                    }
                    _ if next.contains_key(&name) && model.contains_key(&name) => {
                        let db = env.open_db(&name)?;
                        let k = format!("k{}", rng.gen_range(0..50)).into_bytes();
                        let v = vec![rng.gen::<u8>(); rng.gen_range(1..300)];
                        t.put(&db, &k, &v)?;
                        next.get_mut(&name).unwrap().insert(k, v);
                        wrote = true;
                    }
                    _ => {}
                }
            }
            Ok::<_, Error>(())
        })();
        if result.is_err() {
            break;
        }
        let d = if rng.gen() {
            Durability::Sync
        } else {
            Durability::NoSync
        };
        models.push(next.clone());
        match t.commit_with(d) {
            // A transaction that wrote nothing logs nothing, and syncs nothing.
            Ok(_) => synced.push(wrote && d == Durability::Sync),
            Err(_) => break,
        }
        model = next;
        if rng.gen_ratio(1, 15) && env.sync().is_err() {
            break;
        }
    }
    common::kill(storage, env);
    (models, synced)
}

#[test]
fn create_and_remove_survive_power_cuts() {
    for seed in common::seeds_from_env("BEECH_DDL_POWER_SEEDS", 300) {
        let probe = MemStorage::new();
        workload(&probe, seed);
        let storage = MemStorage::new();
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0xD0);
        storage.cut_power_after(rng.gen_range(1..=probe.mutation_count() + 1));
        let (models, synced) = workload(&storage, seed);
        let image = storage.crash_image(seed);
        let env = match Env::open_with_storage(Arc::new(image), tds().create(false)) {
            Ok(env) => env,
            Err(Error::InvalidArgument(_)) if synced.is_empty() => continue,
            Err(e) => panic!("seed {seed}: recovery failed: {e}"),
        };
        let s = state(&env);
        let Some(prefix) = models.iter().rposition(|m| *m == s) else {
            panic!("seed {seed}: recovered {s:?}, which is no prefix of the commits");
        };
        if let Some(last_sync) = synced.iter().rposition(|&s| s) {
            assert!(
                prefix > last_sync,
                "seed {seed}: SYNC commit {last_sync} lost"
            );
        }
        assert!(env.verify().unwrap().is_clean(), "seed {seed}");
    }
}

/// A database a transaction creates is out of every other transaction's reach until the
/// commit, so writing it takes no key locks: loading it never escalates (with a budget that
/// makes loading an existing database escalate at 64 keys), and what was written commits
/// whole.
#[test]
fn writes_to_a_database_being_created_take_no_key_locks() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path(), tds().txn_memory(64 << 10)).unwrap();
    let escalations = |env: &Env| env.stat().unwrap().txn.unwrap().locks.escalations;
    let old = env.create_db("old").unwrap();
    let t = env.begin_txn().unwrap();
    for i in 0..1000u32 {
        t.put(&old, &i.to_be_bytes(), b"v").unwrap();
    }
    t.commit().unwrap();
    let before = escalations(&env);
    assert!(before > 0, "the control load escalates");
    let t = env.begin_txn().unwrap();
    let new = t.create_db("new").unwrap();
    for i in 0..1000u32 {
        t.put(&new, &i.to_be_bytes(), b"w").unwrap();
    }
    // No other transaction sees the database before the commit.
    assert!(matches!(env.open_db("new"), Err(Error::DbNotFound(_))));
    t.commit().unwrap();
    assert_eq!(escalations(&env), before, "no key locks to trade");
    let new = env.open_db("new").unwrap();
    assert_eq!(env.begin_txn().unwrap().iter(&new).count(), 1000);
}
