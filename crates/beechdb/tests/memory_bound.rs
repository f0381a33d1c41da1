//! The process's memory stays near the cache's budget however many pages readers load: a
//! reader's load takes a kept buffer, and the buffers of pages evicted are kept up to a
//! bound (they once all stayed allocated: 307 MB beside a 1 MiB cache). One test in its own
//! binary, so that the process's resident memory is this test's.
#![cfg(target_os = "linux")]

use beechdb::{Config, Durability, Env};
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};

/// This process's resident memory, in bytes.
fn resident() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib << 10
}

#[test]
fn reads_missing_a_small_cache_beside_a_writer_hold_no_memory_past_a_bound() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config::new()
        .page_size(4096)
        .cache_size(256 << 10)
        .transactional(true)
        .durability(Durability::NoSync);
    let env = Env::open(dir.path(), cfg).unwrap();
    let db = env.create_db("d").unwrap();
    let records = 60_000u32;
    for chunk in (0..records).step_by(1_000) {
        let t = env.begin_txn().unwrap();
        for k in chunk..chunk + 1_000 {
            t.put(&db, &k.to_be_bytes(), &[k as u8; 100]).unwrap();
        }
        t.commit().unwrap();
    }
    env.sync().unwrap();
    let read = |n: u32, seed: u64| {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        for _ in 0..n {
            let k = rng.gen_range(0..records);
            assert_eq!(db.get(&k.to_be_bytes()).unwrap().unwrap()[0], k as u8);
        }
    };
    read(50_000, 1);
    let before = resident();
    let misses_before = env.stat().unwrap().cache_misses;
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        // Commits evict dirty pages and take kept buffers for their own loads meanwhile.
        s.spawn(|| {
            let mut rng = rand::rngs::StdRng::seed_from_u64(2);
            while !done.load(Ordering::Relaxed) {
                let k: u32 = rng.gen_range(0..records);
                db.put(&k.to_be_bytes(), &[k as u8; 100]).unwrap();
            }
        });
        read(300_000, 3);
        done.store(true, Ordering::Relaxed);
    });
    let loaded = env.stat().unwrap().cache_misses - misses_before;
    let grown = resident().saturating_sub(before);
    eprintln!(
        "{loaded} pages loaded, resident memory grew {} KiB",
        grown >> 10
    );
    assert!(loaded > 100_000, "the reads miss a 64-page cache");
    assert!(
        grown < 16 << 20,
        "{loaded} pages of 4 KiB loaded, memory grew {} KiB",
        grown >> 10
    );
}
