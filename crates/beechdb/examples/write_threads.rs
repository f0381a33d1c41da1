//! Auto-committed puts from several threads at one durability, to profile the write path:
//! `cargo run --release --example write_threads -- THREADS [OPS_PER_THREAD] [nosync|write-nosync|sync]`.
//! Each thread writes its own batches of 100 sequential keys, as the key/value benchmark
//! does; prints the rate of the timed part (not the open or the close) and the statistics
//! (with `sync`, the log's: commits per fsync shows group commit at work).
use beechdb::{Config, Durability, Env};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let threads: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2);
    let per_thread: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(500_000);
    let durability = match args.next().as_deref() {
        Some("sync") => Durability::Sync,
        Some("write-nosync") => Durability::WriteNoSync,
        _ => Durability::NoSync,
    };
    let dir = tempfile::tempdir()?;
    let cfg = Config::new()
        .transactional(true)
        .durability(durability)
        .cache_size(512 << 20);
    let env = Env::open(dir.path(), cfg)?;
    let db = env.create_db("d")?;
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let db = db.clone();
            s.spawn(move || {
                for i in 0..per_thread {
                    let (batch, at) = (i / 100, i % 100);
                    let key = ((batch * threads + t) * 100 + at).to_be_bytes();
                    db.put(&key, &[0x5a; 64]).unwrap();
                }
            });
        }
    });
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{threads} threads, {durability:?}: {:.0} puts/s",
        (threads * per_thread) as f64 / secs
    );
    print!("{}", env.stat()?);
    env.close()?;
    Ok(())
}
