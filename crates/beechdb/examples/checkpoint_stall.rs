//! Shows how much a checkpoint stalls commits: dirties RECORDS records' worth of pages, then
//! checkpoints on one thread while another commits (NOSYNC) and reads; prints how long the
//! checkpoint took, how many commits and reads finished meanwhile, and the longest single
//! commit. `cargo run --release --example checkpoint_stall -- 300000`
use beechdb::{Config, Durability, Env};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let records: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(300_000);
    let dir = tempfile::tempdir()?;
    let cfg = Config::new()
        .transactional(true)
        .durability(Durability::NoSync)
        .cache_size(512 << 20)
        .checkpoint_interval(Duration::from_secs(3600));
    let env = Env::open(dir.path(), cfg)?;
    let db = env.create_db("d")?;
    let value = [7u8; 100];
    for i in 0..records {
        db.put(&(i * 2).to_be_bytes(), &value)?;
    }
    let (checkpointing, done) = (AtomicBool::new(false), AtomicBool::new(false));
    let (took, (commits, reads, longest)) = std::thread::scope(|s| {
        let worker = s.spawn(|| {
            let (mut commits, mut reads, mut longest) = (0u64, 0u64, Duration::ZERO);
            let mut i = 0u64;
            while !done.load(Ordering::Acquire) {
                let started = Instant::now();
                db.put(&(i * 2 + 1).to_be_bytes(), &value).unwrap();
                longest = longest.max(started.elapsed());
                let found = db.get(&((i * 7919) % records * 2).to_be_bytes()).unwrap();
                if checkpointing.load(Ordering::Acquire) {
                    commits += 1;
                    reads += found.is_some() as u64;
                }
                i += 1;
            }
            (commits, reads, longest)
        });
        // Let the worker start before the checkpoint does.
        std::thread::sleep(Duration::from_millis(20));
        let started = Instant::now();
        checkpointing.store(true, Ordering::Release);
        env.sync().unwrap();
        let took = started.elapsed();
        done.store(true, Ordering::Release);
        (took, worker.join().unwrap())
    });
    println!(
        "checkpoint of {records} records' pages: {:.0} ms; meanwhile {commits} commits and \
         {reads} reads; longest commit {:.1} ms",
        took.as_secs_f64() * 1e3,
        longest.as_secs_f64() * 1e3
    );
    Ok(())
}
