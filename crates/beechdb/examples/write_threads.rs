//! Auto-committed puts from several threads at one durability, to profile the write path:
//! `cargo run --release --example write_threads -- THREADS [OPS_PER_THREAD] [nosync|write-nosync|sync|in-memory]`.
//! Each thread writes its own batches of 100 sequential keys, as the key/value benchmark
//! does; prints the rate of the timed part (not the open or the close) and the statistics
//! (with `sync`, the log's: commits per fsync shows group commit at work), and the latency
//! of every 16th put (median, 99th and 99.9th percentiles, the longest).
use beechdb::{Config, Durability, Env};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let threads: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2);
    let per_thread: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(500_000);
    let mode = args.next();
    let durability = match mode.as_deref() {
        Some("sync") => Durability::Sync,
        Some("write-nosync") => Durability::WriteNoSync,
        _ => Durability::NoSync,
    };
    let dir = tempfile::tempdir()?;
    let cfg = Config::new()
        .transactional(true)
        .durability(durability)
        .cache_size(512 << 20)
        .in_memory_log(mode.as_deref() == Some("in-memory"));
    let env = Env::open(dir.path(), cfg)?;
    let db = env.create_db("d")?;
    let start = Instant::now();
    let mut latencies: Vec<u32> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let db = db.clone();
                s.spawn(move || {
                    let mut sampled = Vec::with_capacity(per_thread as usize / 16 + 1);
                    for i in 0..per_thread {
                        let (batch, at) = (i / 100, i % 100);
                        let key = ((batch * threads + t) * 100 + at).to_be_bytes();
                        if i % 16 == 0 {
                            let began = Instant::now();
                            db.put(&key, &[0x5a; 64]).unwrap();
                            sampled.push(began.elapsed().as_nanos().min(u32::MAX as u128) as u32);
                        } else {
                            db.put(&key, &[0x5a; 64]).unwrap();
                        }
                    }
                    sampled
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    let secs = start.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize] as f64 / 1000.0;
    println!(
        "{threads} threads, {durability:?}: {:.0} puts/s; latency us p50 {:.1} p99 {:.1} p99.9 {:.1} max {:.1}",
        (threads * per_thread) as f64 / secs,
        at(0.5),
        at(0.99),
        at(0.999),
        at(1.0)
    );
    print!("{}", env.stat()?);
    env.close()?;
    Ok(())
}
