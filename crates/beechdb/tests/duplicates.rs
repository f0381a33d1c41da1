//! Databases with duplicates (Berkeley DB's DB_DUPSORT and DB_DUP): random operations
//! against a model (a map from key to its list of values), in Data Store and transactional
//! mode, with keys that hold zero bytes and are prefixes of one another; cursors stepping
//! through duplicates; the flag surviving reopen and recovery.

use beechdb::{Config, Db, Duplicates, Env, Error};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

type Model = BTreeMap<Vec<u8>, Vec<Vec<u8>>>;

fn key(rng: &mut impl Rng) -> Vec<u8> {
    let pool: [&[u8]; 7] = [b"", b"\x00", b"\x00\x00", b"a", b"a\x00", b"ab", b"b"];
    let mut k = pool[rng.gen_range(0..pool.len())].to_vec();
    if rng.gen_bool(0.2) {
        k.extend(vec![b'z'; rng.gen_range(1..3000)]);
    }
    k
}

fn value(rng: &mut impl Rng) -> Vec<u8> {
    let pool: [&[u8]; 6] = [b"", b"\x00", b"v", b"v\x00", b"w", b"\xff"];
    let mut v = pool[rng.gen_range(0..pool.len())].to_vec();
    if rng.gen_bool(0.1) {
        v.extend(vec![7u8; rng.gen_range(1..5000)]);
    }
    v
}

fn pairs(model: &Model) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .flat_map(|(k, vs)| vs.iter().map(move |v| (k.clone(), v.clone())))
        .collect()
}

fn check(db: &Db, model: &Model) {
    let want = pairs(model);
    let got: Vec<_> = db.iter().map(|kv| kv.unwrap()).collect();
    assert_eq!(got, want, "iteration");
    assert_eq!(db.len().unwrap(), want.len() as u64);
    let back: Vec<_> = db.range_rev(..).map(|kv| kv.unwrap()).collect();
    assert!(back.iter().rev().eq(want.iter()), "reverse iteration");
    for (k, vs) in model {
        assert_eq!(&db.get_all(k).unwrap(), vs);
        assert_eq!(db.get(k).unwrap().as_ref(), vs.first());
        assert_eq!(db.count(k).unwrap(), vs.len() as u64);
        // A range from the key to itself holds exactly its pairs; one past it, none of them.
        let within: Vec<_> = db.range(&k[..]..=&k[..]).map(|kv| kv.unwrap().1).collect();
        assert_eq!(&within, vs);
        let after = db
            .range((
                std::ops::Bound::Excluded(&k[..]),
                std::ops::Bound::Unbounded,
            ))
            .next();
        let want_after = model
            .range::<Vec<u8>, _>((
                std::ops::Bound::Excluded(k.clone()),
                std::ops::Bound::Unbounded,
            ))
            .next();
        assert_eq!(
            after.map(|kv| kv.unwrap().0),
            want_after.map(|(k, _)| k.clone())
        );
    }
    // A cursor visits each key once with next_nodup, and each of its values with next_dup.
    let mut c = db.cursor();
    let mut seen = Vec::new();
    let mut more = c.first().unwrap();
    while more {
        let k = c.key().unwrap().to_vec();
        let mut vs = vec![c.value().unwrap().to_vec()];
        assert_eq!(c.count().unwrap(), model[&k].len() as u64);
        while c.next_dup().unwrap() {
            assert_eq!(c.key().unwrap(), &k[..]);
            vs.push(c.value().unwrap().to_vec());
        }
        // next_dup at the last duplicate stays put.
        assert_eq!(c.key().unwrap(), &k[..]);
        seen.push((k, vs));
        more = c.next_nodup().unwrap();
    }
    assert!(seen.into_iter().eq(model.clone()), "cursor walk by key");
}

fn run(cfg: Config, dups: Duplicates, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let env = Env::open(dir.path(), cfg.clone()).unwrap();
    let db = env.create_db_with("d", dups).unwrap();
    assert_eq!(db.duplicates(), dups);
    let mut model = Model::new();
    for round in 0..4 {
        for _ in 0..400 {
            let (k, v) = (key(&mut rng), value(&mut rng));
            match rng.gen_range(0..10) {
                0..=4 => {
                    let vs = model.entry(k.clone()).or_default();
                    let r = db.put(&k, &v);
                    if dups == Duplicates::Sorted && vs.contains(&v) {
                        assert!(matches!(r, Err(Error::KeyExists)));
                    } else {
                        r.unwrap();
                        vs.push(v);
                        if dups == Duplicates::Sorted {
                            vs.sort();
                        }
                    }
                }
                5 => {
                    let r = db.insert(&k, &v);
                    if model.get(&k).is_some_and(|vs| !vs.is_empty()) {
                        assert!(matches!(r, Err(Error::KeyExists)));
                    } else {
                        r.unwrap();
                        model.insert(k, vec![v]);
                    }
                }
                6 => {
                    let had = model.remove(&k).is_some_and(|vs| !vs.is_empty());
                    assert_eq!(db.delete(&k).unwrap(), had);
                }
                7 | 8 => {
                    // Delete one pair: often an existing one.
                    let (k, v) = match model.iter().nth(rng.gen_range(0..model.len().max(1))) {
                        Some((k, vs)) if !vs.is_empty() && rng.gen_bool(0.8) => {
                            (k.clone(), vs[rng.gen_range(0..vs.len())].clone())
                        }
                        _ => (k, v),
                    };
                    let vs = model.entry(k.clone()).or_default();
                    let at = vs.iter().position(|x| *x == v);
                    assert_eq!(db.delete_pair(&k, &v).unwrap(), at.is_some());
                    if let Some(i) = at {
                        vs.remove(i);
                    }
                }
                _ => assert_eq!(
                    db.get(&k).unwrap().as_ref(),
                    model.get(&k).and_then(|vs| vs.first())
                ),
            }
            model.retain(|_, vs| !vs.is_empty());
        }
        check(&db, &model);
        if round % 2 == 1 {
            env.sync().unwrap();
            assert!(env.verify().unwrap().is_clean());
        }
    }
    env.close().unwrap();
    let env = Env::open(dir.path(), cfg).unwrap();
    let db = env.open_db("d").unwrap();
    assert_eq!(db.duplicates(), dups, "the flag survives a reopen");
    check(&db, &model);
    env.close().unwrap();
}

#[test]
fn sorted_duplicates_against_a_model() {
    for seed in 0..2 {
        run(
            Config::new().page_size(4096).cache_size(256 << 10),
            Duplicates::Sorted,
            seed,
        );
    }
}

#[test]
fn unsorted_duplicates_against_a_model() {
    run(
        Config::new().page_size(4096).cache_size(256 << 10),
        Duplicates::Unsorted,
        5,
    );
}

#[test]
fn duplicates_in_transactions_and_after_recovery() {
    let cfg = Config::new()
        .transactional(true)
        .durability(beechdb::Durability::WriteNoSync);
    run(cfg.clone(), Duplicates::Sorted, 9);
    run(cfg.clone(), Duplicates::Unsorted, 10);
    // Created in a transaction; its pairs written in one; recovered from the log alone.
    let live = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    {
        let env = Env::open(live.path(), cfg.clone()).unwrap();
        let t = env.begin_txn().unwrap();
        let db = t.create_db_with("d", Duplicates::Unsorted).unwrap();
        for v in [b"3", b"1", b"2"] {
            t.put(&db, b"k", v).unwrap();
        }
        assert_eq!(t.get(&db, b"k").unwrap().unwrap(), b"3");
        t.commit().unwrap();
        let t = env.begin_txn().unwrap();
        let vals: Vec<_> = t.iter(&db).map(|kv| kv.unwrap().1).collect();
        assert_eq!(vals, vec![b"3".to_vec(), b"1".to_vec(), b"2".to_vec()]);
        assert!(t.delete(&db, b"k").unwrap());
        assert_eq!(t.iter(&db).count(), 0);
        t.abort();
        // The process dies: what is on disk is copied while it still holds the lock.
        for e in std::fs::read_dir(live.path()).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
        }
        std::mem::forget(db);
        std::mem::forget(env);
    }
    let env = Env::open(dir.path(), cfg).unwrap();
    assert!(env.recovered_commits() >= 1);
    let db = env.open_db("d").unwrap();
    assert_eq!(db.duplicates(), Duplicates::Unsorted);
    assert_eq!(
        db.get_all(b"k").unwrap(),
        vec![b"3".to_vec(), b"1".to_vec(), b"2".to_vec()]
    );
    // A plain database refuses the pair calls that only make sense with duplicates.
    let plain = env.create_db("plain").unwrap();
    assert!(matches!(
        plain.delete_pair(b"k", b"v"),
        Err(Error::InvalidArgument(_))
    ));
    env.close().unwrap();
}

/// Two threads appending to one key of an unsorted database at once, in a transactional
/// environment: every pair is kept (two writers never take the same entry).
#[test]
fn concurrent_appends_to_one_key_lose_no_pair() {
    let env = Env::open_with_storage(
        std::sync::Arc::new(beechdb::storage::MemStorage::new()),
        Config::new()
            .transactional(true)
            .durability(beechdb::Durability::NoSync),
    )
    .unwrap();
    let db = env.create_db_with("d", Duplicates::Unsorted).unwrap();
    std::thread::scope(|s| {
        for t in 0..2u8 {
            let db = &db;
            s.spawn(move || {
                for i in 0..300u32 {
                    loop {
                        match db.put(b"k", &[&[t][..], &i.to_be_bytes()].concat()) {
                            Err(e) if e.is_retryable() => continue,
                            r => break r.unwrap(),
                        }
                    }
                }
            });
        }
    });
    assert_eq!(db.count(b"k").unwrap(), 600);
    let mut values = db.get_all(b"k").unwrap();
    values.sort();
    values.dedup();
    assert_eq!(values.len(), 600);
}
