//! Many threads at once: readers (cursors and gets, each with its own leaf hint) run while a
//! writer inserts, overwrites, deletes and syncs, with a cache small enough to evict. Every
//! value a reader sees must belong to its key, and scans must come back in order.

use beechdb::{Config, Env};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn value(k: u64, version: u64) -> Vec<u8> {
    let mut v = k.to_be_bytes().to_vec();
    v.extend_from_slice(&version.to_le_bytes());
    v.resize(if k.is_multiple_of(97) { 3000 } else { 48 }, k as u8);
    v
}

#[test]
fn readers_and_a_writer_share_an_environment() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(
        dir.path(),
        Config::new().page_size(4096).cache_size(256 << 10),
    )
    .unwrap();
    let db = env.create_db("shared").unwrap();
    for k in 0..20_000u64 {
        db.put(&k.to_be_bytes(), &value(k, 0)).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for t in 0..3u64 {
        let (db, stop) = (db.clone(), stop.clone());
        readers.push(std::thread::spawn(move || {
            let mut seen = 0u64;
            let mut x = t + 1;
            while !stop.load(Ordering::Relaxed) {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let start = (x >> 33) % 20_000;
                for k in start..start + 10 {
                    if let Some(v) = db.get(&k.to_be_bytes()).unwrap() {
                        assert_eq!(&v[..8], &k.to_be_bytes(), "value of another key returned");
                        seen += 1;
                    }
                }
                let mut c = db.cursor();
                let mut prev: Option<Vec<u8>> = None;
                if c.seek(&start.to_be_bytes()).unwrap() {
                    for _ in 0..50 {
                        let k = c.key().unwrap().to_vec();
                        assert_eq!(
                            &c.value().unwrap()[..8],
                            &k[..],
                            "cursor value of another key"
                        );
                        assert!(
                            prev.as_ref().is_none_or(|p| *p < k),
                            "cursor went backwards"
                        );
                        prev = Some(k);
                        if !c.next().unwrap() {
                            break;
                        }
                    }
                }
            }
            seen
        }));
    }
    for round in 1..=30u64 {
        for k in (0..20_000u64).step_by(7) {
            let k = (k + round * 13) % 20_000;
            if round.is_multiple_of(3) {
                db.delete(&k.to_be_bytes()).unwrap();
            } else {
                db.put(&k.to_be_bytes(), &value(k, round)).unwrap();
            }
        }
        if round.is_multiple_of(10) {
            env.sync().unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    env.sync().unwrap();
    assert!(env.verify().unwrap().is_clean());
    assert!(env.stat().unwrap().cache_evictions > 0);
}
