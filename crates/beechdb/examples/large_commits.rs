//! Measuring aid: transactions of many random writes committed while a reader thread reads
//! random keys, on a database larger than the cache (NOSYNC, default page and cache sizes).
//! Prints the writes committed per second and the reader's reads per second and its
//! slowest read, for an A/B of two builds of the commit path.
//! `cargo run --release -p beechdb --example large_commits -- 1000000 3000 40`
//! (records, writes per transaction, transactions).

use beechdb::{Config, Durability, Env};
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn main() {
    let arg = |i: usize, default: u64| {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(default)
    };
    let (records, writes, txns) = (arg(1, 1_000_000), arg(2, 3_000), arg(3, 40));
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config::new()
        .transactional(true)
        .durability(Durability::NoSync);
    let env = Env::open(dir.path(), cfg).unwrap();
    let db = env.create_db("d").unwrap();
    let value = [7u8; 100];
    for chunk in (0..records).step_by(10_000) {
        let t = env.begin_txn().unwrap();
        for k in chunk..(chunk + 10_000).min(records) {
            t.put(&db, &k.to_be_bytes(), &value).unwrap();
        }
        t.commit().unwrap();
    }
    env.sync().unwrap();
    let done = AtomicBool::new(false);
    let (elapsed, (reads, slowest, found)) = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut rng = rand::rngs::StdRng::seed_from_u64(2);
            let (mut reads, mut slowest, mut found) = (0u64, Duration::ZERO, 0u64);
            let started = Instant::now();
            while !done.load(Ordering::Relaxed) {
                let at = Instant::now();
                let k = rng.gen_range(0..records);
                found += db.get(&k.to_be_bytes()).unwrap().is_some() as u64;
                slowest = slowest.max(at.elapsed());
                reads += 1;
            }
            (
                reads as f64 / started.elapsed().as_secs_f64(),
                slowest,
                found,
            )
        });
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let started = Instant::now();
        for round in 0..txns {
            let t = env.begin_txn().unwrap();
            let v = [round as u8; 100];
            for _ in 0..writes {
                t.put(&db, &rng.gen_range(0..records).to_be_bytes(), &v)
                    .unwrap();
            }
            t.commit().unwrap();
        }
        let elapsed = started.elapsed();
        done.store(true, Ordering::Relaxed);
        (elapsed, reader.join().unwrap())
    });
    assert_eq!(db.iter().count() as u64, records, "every record is there");
    println!(
        "{:.0} writes/s committed ({} transactions of {}); reader {:.0} reads/s ({} found), \
         slowest read {:.2} ms",
        (writes * txns) as f64 / elapsed.as_secs_f64(),
        txns,
        writes,
        reads,
        found,
        slowest.as_secs_f64() * 1e3
    );
}
