//! Pinned checkpoints: read page by page while commits and checkpoints go on, a pinned
//! checkpoint is exactly the state at its generation, and a copy of it opens and verifies
//! clean; pins do not stop checkpoints, and pages held for a pin are reused after it.

use beechdb::storage::MemStorage;
use beechdb::{Config, Durability, Env, Error};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

type State = BTreeMap<Vec<u8>, Vec<u8>>;

fn config() -> Config {
    Config::new()
        .page_size(4096)
        .cache_size(256 << 10)
        .transactional(true)
        .durability(Durability::NoSync)
        .log_segment_size(256 << 10)
        .checkpoint_log_bytes(64 << 10)
}

fn state(env: &Env) -> State {
    let db = env.open_db("d").unwrap();
    db.iter().map(|kv| kv.unwrap()).collect()
}

#[test]
fn a_pinned_checkpoint_is_its_state_while_work_goes_on() {
    for mode in [
        config(),
        Config::new().page_size(4096).cache_size(256 << 10),
    ] {
        let storage = MemStorage::new();
        let env = Env::open_with_storage(Arc::new(storage.clone()), mode.clone()).unwrap();
        let db = env.create_db("d").unwrap();
        for i in 0..3000u32 {
            db.put(&i.to_be_bytes(), &vec![i as u8; 100 + i as usize % 300])
                .unwrap();
        }
        env.sync().unwrap();
        let expected = state(&env);
        let pinned = env.pin_checkpoint().unwrap();
        let checkpoints = env.stat().unwrap().checkpoints;
        // Writers rewrite and delete everything while checkpoints come and go.
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..2u32)
            .map(|w| {
                let (env, db, stop) = (env.clone(), db.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut round = 0u32;
                    while !stop.load(Ordering::Relaxed) {
                        for i in (w..3000).step_by(2) {
                            if (i + round).is_multiple_of(7) {
                                db.delete(&i.to_be_bytes()).unwrap();
                            } else {
                                db.put(&i.to_be_bytes(), &[round as u8; 200]).unwrap();
                            }
                        }
                        env.sync().unwrap();
                        round += 1;
                    }
                })
            })
            .collect();
        // Read it slowly, page by page, into a copy, while they write.
        let copy = Arc::new(MemStorage::new());
        let mut buf = vec![0u8; pinned.page_size()];
        let mut nonzero = 0;
        for pid in 0..pinned.page_count() {
            pinned.read_page(pid, &mut buf).unwrap();
            nonzero += buf.iter().any(|&b| b != 0) as u64;
            if pid % 8 == 0 {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
        assert!(nonzero > 10);
        pinned.copy_to(copy.clone()).unwrap();
        assert!(
            env.stat().unwrap().checkpoints > checkpoints + 3,
            "checkpoints go on while a checkpoint is pinned"
        );
        assert!(matches!(
            pinned.copy_to(copy.clone()),
            Err(Error::InvalidArgument(_))
        ));
        drop(pinned);
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            w.join().unwrap();
        }
        let restored = Env::open_with_storage(copy, mode.clone().create(false)).unwrap();
        assert_eq!(state(&restored), expected);
        assert!(restored.verify().unwrap().is_clean());
        // The copy is an environment of its own: it takes writes and reopens.
        restored.open_db("d").unwrap().put(b"new", b"x").unwrap();
        restored.close().unwrap();
        // Pages held for the pin are reused once it is gone: the file stops growing.
        let pages = env.stat().unwrap().page_count;
        for _ in 0..5 {
            for i in 0..3000u32 {
                db.put(&i.to_be_bytes(), &[1u8; 200]).unwrap();
            }
            env.sync().unwrap();
        }
        assert!(env.stat().unwrap().page_count <= pages + 50);
        assert!(env.verify().unwrap().is_clean());
    }
}

#[test]
fn hot_backup_while_writing() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path().join("live"), config()).unwrap();
    let db = env.create_db("d").unwrap();
    for i in 0..2000u32 {
        db.put(&i.to_be_bytes(), b"before").unwrap();
    }
    let (env2, db2) = (env.clone(), db.clone());
    let writer = std::thread::spawn(move || {
        for i in 0..2000u32 {
            db2.put(&(10_000 + i).to_be_bytes(), b"during").unwrap();
        }
        drop(env2);
    });
    env.backup(dir.path().join("copy")).unwrap();
    writer.join().unwrap();
    let copy = Env::open(dir.path().join("copy"), config().create(false)).unwrap();
    let got = state(&copy);
    assert!((0..2000u32).all(|i| got.get(&i.to_be_bytes()[..]) == Some(&b"before".to_vec())));
    assert!(copy.verify().unwrap().is_clean());
    assert!(matches!(
        env.backup(dir.path().join("copy")),
        Err(Error::InvalidArgument(_))
    ));
}
