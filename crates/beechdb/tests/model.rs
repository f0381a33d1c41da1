//! Property test: random operations against a `BTreeMap` model, with 4 KiB pages and the
//! smallest cache, so that splits, merges, overflow values and eviction all happen.

use beechdb::storage::MemStorage;
use beechdb::{Config, Db, Env};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

#[derive(Debug, Clone)]
enum Op {
    Put(u16, usize),
    Insert(u16, usize),
    Get(u16),
    Delete(u16),
    DeleteRun(u16, u16),
    Scan(u16, u16, bool),
    CursorWalk(u16, u8, bool),
    Sync,
    Reopen,
}

/// Key `i`: a deterministic byte string whose length varies with `i` (some are long).
/// Every 13th is a long key (more than a quarter page) behind a 1,500-byte prefix they all
/// share, so that comparing two of them needs the rest kept outside the tree's pages; one
/// in 250 is 70 KB long.
fn key(i: u16) -> Vec<u8> {
    if i % 13 == 12 {
        let len = if i % 250 == 12 {
            70_000
        } else {
            1500 + (i as usize * 37) % 4000
        };
        let mut k = vec![0xEE; len];
        k[1500..1502].copy_from_slice(&i.to_be_bytes());
        return k;
    }
    let len = match i % 13 {
        0 => 300 + (i as usize % 700),
        1..=3 => 1,
        _ => 2 + (i as usize % 40),
    };
    let mut k = i.to_be_bytes().to_vec();
    k.extend((0..len.saturating_sub(2)).map(|j| (i as usize * 31 + j) as u8));
    k.truncate(len.max(2));
    k
}

fn value(i: u16, size: usize, salt: usize) -> Vec<u8> {
    (0..size)
        .map(|j| (i as usize + j * 7 + salt) as u8)
        .collect()
}

fn op() -> impl Strategy<Value = Op> {
    let size = prop_oneof![8 => 0usize..64, 2 => 64usize..1500, 1 => 1500usize..20000];
    let k = 0u16..2500;
    prop_oneof![
        30 => (k.clone(), size.clone()).prop_map(|(k, s)| Op::Put(k, s)),
        5 => (k.clone(), size).prop_map(|(k, s)| Op::Insert(k, s)),
        10 => k.clone().prop_map(Op::Get),
        15 => k.clone().prop_map(Op::Delete),
        3 => (k.clone(), 1u16..80).prop_map(|(k, n)| Op::DeleteRun(k, n)),
        4 => (k.clone(), k.clone(), any::<bool>()).prop_map(|(a, b, r)| Op::Scan(a, b, r)),
        4 => (k, 1u8..60, any::<bool>()).prop_map(|(k, n, f)| Op::CursorWalk(k, n, f)),
        2 => Just(Op::Sync),
        1 => Just(Op::Reopen),
    ]
}

struct Harness {
    storage: MemStorage,
    env: Option<Env>,
    db: Option<Db>,
    model: BTreeMap<Vec<u8>, Vec<u8>>,
    salt: usize,
}

impl Harness {
    fn new() -> Harness {
        let storage = MemStorage::new();
        let mut h = Harness {
            storage,
            env: None,
            db: None,
            model: BTreeMap::new(),
            salt: 0,
        };
        h.open();
        h
    }

    fn open(&mut self) {
        let cfg = Config::new().page_size(4096).cache_size(64 << 10);
        let env = Env::open_with_storage(Arc::new(self.storage.clone()), cfg).unwrap();
        self.db = Some(env.open_or_create_db("t").unwrap());
        self.env = Some(env);
    }

    fn db(&self) -> &Db {
        self.db.as_ref().unwrap()
    }

    fn apply(&mut self, op: &Op) {
        self.salt += 1;
        match *op {
            Op::Put(k, s) => {
                let (k, v) = (key(k), value(k, s, self.salt));
                self.db().put(&k, &v).unwrap();
                self.model.insert(k, v);
            }
            Op::Insert(k, s) => {
                let (k, v) = (key(k), value(k, s, self.salt));
                let r = self.db().insert(&k, &v);
                match self.model.entry(k) {
                    std::collections::btree_map::Entry::Occupied(_) => {
                        assert!(matches!(r, Err(beechdb::Error::KeyExists)))
                    }
                    std::collections::btree_map::Entry::Vacant(slot) => {
                        r.unwrap();
                        slot.insert(v);
                    }
                }
            }
            Op::Get(k) => {
                let k = key(k);
                assert_eq!(self.db().get(&k).unwrap(), self.model.get(&k).cloned());
            }
            Op::Delete(k) => {
                let k = key(k);
                assert_eq!(
                    self.db().delete(&k).unwrap(),
                    self.model.remove(&k).is_some()
                );
            }
            Op::DeleteRun(k, n) => {
                let from = key(k);
                let victims: Vec<Vec<u8>> = self
                    .model
                    .range(from..)
                    .take(n as usize)
                    .map(|(k, _)| k.clone())
                    .collect();
                for v in victims {
                    assert!(self.db().delete(&v).unwrap());
                    self.model.remove(&v);
                }
            }
            Op::Scan(a, b, rev) => {
                // Which ends are included follows from the two numbers, so that every kind
                // of bound is walked both ways.
                let bound = |k: Vec<u8>, included: bool| match included {
                    true => Bound::Included(k),
                    false => Bound::Excluded(k),
                };
                let (lo_in, hi_in) = ((a ^ b) & 1 == 0, (a ^ b) & 2 != 0);
                let (a, b) = (key(a), key(b));
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let range = (bound(lo.clone(), lo_in), bound(hi.clone(), hi_in));
                // (A model range from a key to itself with an end excluded would panic.)
                let mut want: Vec<_> = match lo == hi && !(lo_in && hi_in) {
                    true => Vec::new(),
                    false => self
                        .model
                        .range(range.clone())
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                };
                let got: Vec<_> = if rev {
                    self.db().range_rev(range)
                } else {
                    self.db().range(range)
                }
                .collect::<Result<_, _>>()
                .unwrap();
                if rev {
                    want.reverse();
                }
                assert_eq!(got, want);
            }
            Op::CursorWalk(k, n, forward) => {
                let start = key(k);
                let mut c = self.db().cursor();
                let mut ok = c.seek(&start).unwrap();
                let mut want = self.model.range(start.clone()..);
                let first = want.next();
                assert_eq!(ok, first.is_some());
                if let Some((wk, wv)) = first {
                    assert_eq!((c.key().unwrap(), c.value().unwrap()), (&wk[..], &wv[..]));
                }
                if !ok {
                    return;
                }
                let here = c.key().unwrap().to_vec();
                let mut expect: Box<dyn Iterator<Item = (&Vec<u8>, &Vec<u8>)>> = if forward {
                    Box::new(self.model.range((Bound::Excluded(here), Bound::Unbounded)))
                } else {
                    Box::new(self.model.range(..here).rev())
                };
                for _ in 0..n {
                    ok = if forward {
                        c.next().unwrap()
                    } else {
                        c.prev().unwrap()
                    };
                    match expect.next() {
                        Some((wk, wv)) => {
                            assert!(ok);
                            assert_eq!((c.key().unwrap(), c.value().unwrap()), (&wk[..], &wv[..]));
                        }
                        None => {
                            assert!(!ok);
                            break;
                        }
                    }
                }
            }
            Op::Sync => self.env.as_ref().unwrap().sync().unwrap(),
            Op::Reopen => {
                self.db = None;
                self.env.take().unwrap().close().unwrap();
                self.open();
                self.check_all();
            }
        }
    }

    fn check_all(&self) {
        let got: Vec<_> = self.db().iter().collect::<Result<_, _>>().unwrap();
        let want: Vec<_> = self
            .model
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(got.len(), want.len());
        assert!(got == want, "full scan differs from the model");
        assert_eq!(self.db().len().unwrap(), self.model.len() as u64);
    }

    fn finish(mut self) {
        self.check_all();
        let env = self.env.take().unwrap();
        env.sync().unwrap();
        let report = env.verify().unwrap();
        assert!(report.is_clean(), "{:?}", report.problems);
        assert_eq!(report.entries, self.model.len() as u64);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn matches_btreemap_model(ops in prop::collection::vec(op(), 1..500)) {
        let mut h = Harness::new();
        for op in &ops {
            h.apply(op);
        }
        h.finish();
    }
}

/// A long deterministic run: deep trees, many merges, much eviction.
#[test]
fn long_random_run_matches_model() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut h = Harness::new();
    for step in 0..60_000u32 {
        let k = rng.gen_range(0..3000u16);
        let op = match rng.gen_range(0..100) {
            0..=44 => Op::Put(
                k,
                if rng.gen_ratio(1, 20) {
                    rng.gen_range(1500..9000)
                } else {
                    rng.gen_range(0..100)
                },
            ),
            45..=79 => Op::Delete(k),
            80..=89 => Op::Get(k),
            90..=94 => Op::CursorWalk(k, 30, rng.gen()),
            95..=97 => Op::Scan(k, rng.gen_range(0..3000), rng.gen()),
            98 => Op::Sync,
            _ => {
                if step % 7 == 0 {
                    Op::Reopen
                } else {
                    Op::DeleteRun(k, 40)
                }
            }
        };
        h.apply(&op);
    }
    h.finish();
}

#[test]
fn model_runs_exercise_the_tree() {
    let mut h = Harness::new();
    for i in 0..6000u16 {
        h.apply(&Op::Put(i % 3000, if i % 17 == 0 { 5000 } else { 50 }));
    }
    let st = h.db().stat().unwrap();
    let env_st = h.env.as_ref().unwrap().stat().unwrap();
    eprintln!("{st}\n{env_st}");
    assert!(st.depth >= 2 && st.overflow_pages > 0, "{st:?}");
    assert!(
        env_st.cache_evictions > 0 && env_st.cache_misses > 0,
        "{env_st:?}"
    );
    for i in 0..3000u16 {
        h.apply(&Op::Delete(i));
    }
    assert_eq!(
        h.db().stat().unwrap().depth,
        1,
        "merges collapse the tree when it empties"
    );
    h.finish();
}

/// Batches of ten sequential keys (the benchmark's pattern), which reuse the leaf hints of
/// reads and writes, interleaved over two databases, with splits, merges, eviction, syncs
/// and reopens invalidating the hints.
#[test]
fn sequential_batches_with_leaf_hints_match_model() {
    use rand::{Rng, SeedableRng};
    let storage = MemStorage::new();
    let cfg = || Config::new().page_size(4096).cache_size(64 << 10);
    let mut env = Env::open_with_storage(Arc::new(storage.clone()), cfg()).unwrap();
    let mut models = [BTreeMap::new(), BTreeMap::new()];
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    for round in 0..3000u32 {
        let which = rng.gen_range(0..2usize);
        let db = env.open_or_create_db(["a", "b"][which]).unwrap();
        let model = &mut models[which];
        let start = rng.gen_range(0..5000u64) * 10;
        let action = rng.gen_range(0..10);
        for i in start..start + 10 {
            let k = i.to_be_bytes().to_vec();
            match action {
                0..=4 => {
                    let v = vec![
                        (i + round as u64) as u8;
                        if i.is_multiple_of(50) { 2000 } else { 40 }
                    ];
                    db.put(&k, &v).unwrap();
                    model.insert(k, v);
                }
                5..=7 => assert_eq!(db.delete(&k).unwrap(), model.remove(&k).is_some()),
                _ => assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned(), "round {round}"),
            }
        }
        if round % 500 == 499 {
            env.sync().unwrap();
        }
        if round % 1000 == 999 {
            drop(db);
            env.close().unwrap();
            env = Env::open_with_storage(Arc::new(storage.clone()), cfg()).unwrap();
        }
    }
    for (name, model) in ["a", "b"].iter().zip(&models) {
        let db = env.open_db(name).unwrap();
        let got: BTreeMap<Vec<u8>, Vec<u8>> = db.iter().map(|kv| kv.unwrap()).collect();
        assert!(&got == model, "database {name} differs from its model");
    }
    env.sync().unwrap();
    assert!(env.verify().unwrap().is_clean());
}
