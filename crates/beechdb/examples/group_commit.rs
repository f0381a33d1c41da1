//! Shows group commit at work: THREADS threads auto-commit SYNC puts; prints the rate and
//! the log statistics (commits per fsync). `cargo run --release --example group_commit -- 16`
use beechdb::{Config, Env};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let threads: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2);
    let dir = tempfile::tempdir()?;
    let env = Env::open(dir.path(), Config::new().transactional(true))?;
    let db = env.create_db("d")?;
    let per_thread: u64 = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(8000 / threads.max(1));
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let db = db.clone();
            s.spawn(move || {
                for i in 0..per_thread {
                    db.put(&(t << 32 | i).to_be_bytes(), &[7u8; 64]).unwrap();
                }
            });
        }
    });
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{threads} threads: {:.0} SYNC commits/s",
        (threads * per_thread) as f64 / secs
    );
    print!("{}", env.stat()?);
    Ok(())
}
