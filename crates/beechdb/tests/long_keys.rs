//! Long keys (longer than a quarter page, up to `MAX_KEY_LEN`): the tree keeps their first
//! bytes and the rest in overflow pages. Random operations against a model, with keys that
//! share long prefixes (so that the rest decides comparisons), on small pages so that long
//! keys are everywhere: in leaves, as branch separators, moved by splits and merges.
//! Checked after every phase by `verify` (no page leaked or used twice) and after reopening.

use beechdb::{Config, Env, Error};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

fn key(rng: &mut impl Rng) -> Vec<u8> {
    // A few long shared prefixes, then a distinguishing tail at a random depth.
    let base = rng.gen_range(0..3u8);
    let len = match rng.gen_range(0..10) {
        0..=3 => rng.gen_range(1..40),
        4..=6 => rng.gen_range(1000..1100),
        7 | 8 => rng.gen_range(2000..5000),
        _ => rng.gen_range(60_000..110_000),
    };
    let mut k = vec![b'a' + base; len];
    let at = rng.gen_range(0..len);
    k[at] = rng.gen();
    k
}

fn check(env: &Env, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let db = env.open_db("t").unwrap();
    assert_eq!(db.len().unwrap(), model.len() as u64);
    let got: Vec<_> = db.iter().map(|kv| kv.unwrap()).collect();
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert!(got == want, "iteration differs from the model");
    let back: Vec<_> = db.range_rev(..).map(|kv| kv.unwrap().0).collect();
    assert!(back.iter().rev().eq(model.keys()));
    for (k, v) in model.iter().step_by(7) {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
        let from: Vec<_> = db.range(&k[..]..).take(3).map(|kv| kv.unwrap().0).collect();
        let want: Vec<_> = model
            .range(k.clone()..)
            .take(3)
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(from, want);
    }
}

fn run(cfg: Config, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut model = BTreeMap::new();
    let env = Env::open(dir.path(), cfg.clone()).unwrap();
    let db = env.create_db("t").unwrap();
    for round in 0..3 {
        for _ in 0..300 {
            let k = key(&mut rng);
            match rng.gen_range(0..10) {
                0..=5 => {
                    let v = vec![rng.gen::<u8>(); rng.gen_range(0..300)];
                    db.put(&k, &v).unwrap();
                    model.insert(k, v);
                }
                6 | 7 => {
                    // Delete an existing key (found through the model) or a missing one.
                    let k = model
                        .keys()
                        .nth(rng.gen_range(0..model.len().max(1)))
                        .cloned()
                        .unwrap_or(k);
                    assert_eq!(db.delete(&k).unwrap(), model.remove(&k).is_some());
                }
                8 => {
                    let r = db.insert(&k, b"insert");
                    match model.entry(k) {
                        std::collections::btree_map::Entry::Occupied(_) => {
                            assert!(matches!(r, Err(Error::KeyExists)))
                        }
                        std::collections::btree_map::Entry::Vacant(slot) => {
                            r.unwrap();
                            slot.insert(b"insert".to_vec());
                        }
                    }
                }
                _ => assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned()),
            }
        }
        check(&env, &model);
        env.sync().unwrap();
        // Long separators make a deep tree of small pages.
        assert!(db.stat().unwrap().depth >= 3);
        let report = env.verify().unwrap();
        assert!(report.is_clean(), "round {round}: {:?}", report.problems);
    }
    env.close().unwrap();
    let env = Env::open(dir.path(), cfg.clone()).unwrap();
    check(&env, &model);
    // Removing everything gives every page back.
    let db = env.open_db("t").unwrap();
    for k in model.keys() {
        assert!(db.delete(k).unwrap());
    }
    env.sync().unwrap();
    assert!(env.verify().unwrap().is_clean());
    env.remove_db("t").unwrap();
    env.sync().unwrap();
    assert!(env.verify().unwrap().is_clean());
    env.close().unwrap();
}

#[test]
fn long_keys_against_a_model_data_store() {
    for seed in 0..3 {
        run(Config::new().page_size(4096).cache_size(256 << 10), seed);
    }
}

#[test]
fn long_keys_against_a_model_transactional() {
    run(
        Config::new()
            .page_size(4096)
            .cache_size(256 << 10)
            .transactional(true)
            .durability(beechdb::Durability::NoSync),
        7,
    );
}

#[test]
fn the_limit_is_sixteen_mebibytes_and_keys_that_long_work() {
    let env = Env::open_with_storage(
        std::sync::Arc::new(beechdb::storage::MemStorage::new()),
        Config::new(),
    )
    .unwrap();
    assert_eq!(env.max_key_len(), beechdb::MAX_KEY_LEN);
    let db = env.create_db("t").unwrap();
    let big = vec![7u8; beechdb::MAX_KEY_LEN];
    db.put(&big, b"v").unwrap();
    assert_eq!(db.get(&big).unwrap().unwrap(), b"v");
    let mut over = big.clone();
    over.push(0);
    assert!(matches!(
        db.put(&over, b"v"),
        Err(Error::KeyTooLarge { .. })
    ));
    assert_eq!(
        db.iter().next().unwrap().unwrap().0.len(),
        beechdb::MAX_KEY_LEN
    );
    assert!(db.delete(&big).unwrap());
    env.sync().unwrap();
    assert!(env.verify().unwrap().is_clean());
}
