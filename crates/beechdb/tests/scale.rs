//! Scale test: a million records through a 4 MiB cache (the data set is many times the
//! cache), inserted in random order, then read back, scanned, synced, verified and reopened.
//! `BEECH_SCALE_RECORDS` changes the count.

mod common;

use beechdb::{Config, Env};
use rand::seq::SliceRandom;
use rand::SeedableRng;

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.to_be_bytes());
    k[8..].copy_from_slice(&(i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_le_bytes());
    k
}

fn value(i: u64) -> [u8; 32] {
    let mut v = [0u8; 32];
    for (j, b) in v.iter_mut().enumerate() {
        *b = (i >> (j % 8)) as u8 ^ j as u8;
    }
    v
}

#[test]
fn million_records_in_a_small_cache() {
    let n = common::count_from_env("BEECH_SCALE_RECORDS", 1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config::new().cache_size(4 << 20);
    let env = Env::open(dir.path(), cfg.clone()).unwrap();
    let db = env.create_db("big").unwrap();
    let mut order: Vec<u64> = (0..n).collect();
    order.shuffle(&mut rand::rngs::StdRng::seed_from_u64(1));
    for &i in &order {
        db.put(&key(i), &value(i)).unwrap();
    }
    let st = env.stat().unwrap();
    assert!(
        st.cache_resident_pages * st.page_size as u64 <= 4 << 20,
        "cache over budget: {st:?}"
    );
    assert!(st.cache_evictions > 10_000, "{st:?}");
    for &i in order.iter().step_by(97) {
        assert_eq!(db.get(&key(i)).unwrap().as_deref(), Some(&value(i)[..]));
    }
    env.sync().unwrap();
    drop(db);
    env.close().unwrap();

    let env = Env::open(dir.path(), cfg).unwrap();
    let db = env.open_db("big").unwrap();
    assert_eq!(db.len().unwrap(), n);
    let mut count = 0u64;
    for (expect, kv) in db.iter().enumerate() {
        let (k, v) = kv.unwrap();
        assert_eq!(k, key(expect as u64));
        assert_eq!(v, value(expect as u64));
        count += 1;
    }
    assert_eq!(count, n);
    // Delete everything and insert it again: freed pages are reused, the file stays put.
    for i in 0..n {
        assert!(db.delete(&key(i)).unwrap());
    }
    env.sync().unwrap();
    let pages_before = env.stat().unwrap().page_count;
    for &i in &order {
        db.put(&key(i), &value(i)).unwrap();
    }
    env.sync().unwrap();
    let pages_after = env.stat().unwrap().page_count;
    assert!(
        pages_after <= pages_before + pages_before / 10,
        "file grew from {pages_before} to {pages_after} pages"
    );
    let report = env.verify().unwrap();
    assert!(
        report.is_clean(),
        "{:?}",
        &report.problems[..report.problems.len().min(5)]
    );
    assert_eq!(report.entries, n);
    let st = db.stat().unwrap();
    eprintln!("{st}{}", env.stat().unwrap());
}

/// Sorted keys loaded below a larger key already there (a load into a database that holds
/// data) fill pages as an append at the right edge does, instead of leaving them half full.
#[test]
fn sorted_loads_below_existing_keys_fill_pages() {
    let env = Env::open_with_storage(
        std::sync::Arc::new(beechdb::storage::MemStorage::new()),
        Config::new(),
    )
    .unwrap();
    let db = env.create_db("t").unwrap();
    db.put(b"\xff\xff", b"the largest key, there first")
        .unwrap();
    for i in 0..100_000u64 {
        db.put(&key(i), &value(i)).unwrap();
    }
    let stat = db.stat().unwrap();
    assert!(stat.fill_percent > 85.0, "{stat}");
    // Random inserts still split evenly: nothing changes for them.
    assert_eq!(db.len().unwrap(), 100_001);
}
