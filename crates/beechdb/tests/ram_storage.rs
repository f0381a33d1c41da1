//! Environments on `RamStorage` (no files at all): Data Store, and Transactional Data Store
//! with its log in memory and with log segments kept in the storage. Checked: writes well
//! past the cache (so pages are evicted into the storage and loaded back) read back, the
//! environment verifies clean, a closed environment reopens from the same storage with
//! every commit, and a second open while one is open is refused.

use beechdb::storage::{RamStorage, Storage};
use beechdb::{Config, Env, Error};
use std::sync::Arc;

fn value(i: u32) -> Vec<u8> {
    vec![(i % 251) as u8; 200 + (i % 7) as usize * 100]
}

fn fill_and_check(config: Config, transactional: bool) {
    let storage = Arc::new(RamStorage::new());
    let env = Env::open_with_storage(storage.clone(), config.clone()).unwrap();
    let db = env.open_or_create_db("d").unwrap();
    for chunk in (0..20_000u32).collect::<Vec<_>>().chunks(1000) {
        match transactional {
            true => {
                let t = env.begin_txn().unwrap();
                for &i in chunk {
                    t.put(&db, &i.to_be_bytes(), &value(i)).unwrap();
                }
                t.commit().unwrap();
            }
            false => {
                for &i in chunk {
                    db.put(&i.to_be_bytes(), &value(i)).unwrap();
                }
            }
        }
    }
    for i in (0..20_000u32).step_by(97) {
        assert_eq!(db.get(&i.to_be_bytes()).unwrap(), Some(value(i)));
    }
    assert!(env.verify().unwrap().is_clean());
    drop(db);
    env.sync().unwrap();
    let pages = storage.open_read_only("beech.db").unwrap().len().unwrap();
    assert!(
        pages > 4 << 20,
        "the pages went to the storage: {pages} bytes"
    );
    assert!(matches!(
        Env::open_with_storage(storage.clone(), config.clone()),
        Err(Error::Locked { .. })
    ));
    env.close().unwrap();

    let env = Env::open_with_storage(storage, config).unwrap();
    let db = env.open_db("d").unwrap();
    assert_eq!(db.iter().count(), 20_000);
    for i in (0..20_000u32).step_by(89) {
        assert_eq!(db.get(&i.to_be_bytes()).unwrap(), Some(value(i)));
    }
    assert!(env.verify().unwrap().is_clean());
}

fn small() -> Config {
    Config::new().page_size(4096).cache_size(256 << 10)
}

#[test]
fn a_data_store_in_memory() {
    fill_and_check(small(), false);
}

#[test]
fn a_transactional_store_with_its_log_in_memory() {
    fill_and_check(small().transactional(true).in_memory_log(true), true);
}

#[test]
fn a_transactional_store_with_log_segments_in_memory() {
    fill_and_check(
        small()
            .transactional(true)
            .log_segment_size(1 << 20)
            .checkpoint_log_bytes(2 << 20),
        true,
    );
}
