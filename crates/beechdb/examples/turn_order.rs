//! One thread writing keys in the order two writers taking turns produce, against the plain
//! order: `cargo run --release --example turn_order -- [plain|turns] [PUTS] [TURN_PUTS]`.
//! Each simulated writer writes its own batches of 100 sequential keys, as `write_threads`
//! does; with `turns`, one writer's next `TURN_PUTS` puts go in before the other's.
use beechdb::{Config, Durability, Env};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let order = args.next().unwrap_or_else(|| "plain".into());
    let puts: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(3_000_000);
    let turn: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2_400);
    let dir = tempfile::tempdir()?;
    let cfg = Config::new()
        .transactional(true)
        .durability(Durability::NoSync)
        .cache_size(512 << 20);
    let env = Env::open(dir.path(), cfg)?;
    let db = env.create_db("d")?;
    let key = |t: u64, i: u64| ((i / 100 * 2 + t) * 100 + i % 100).to_be_bytes();
    let keys: Vec<[u8; 8]> = match order.as_str() {
        "turns" => {
            let per = puts / 2;
            let mut v = Vec::with_capacity(puts as usize);
            let mut next = [0u64; 2];
            let mut t = 0;
            while next[0] < per || next[1] < per {
                let end = (next[t] + turn).min(per);
                v.extend((next[t]..end).map(|i| key(t as u64, i)));
                next[t] = end;
                t = 1 - t;
            }
            v
        }
        _ => (0..puts).map(|i| i.to_be_bytes()).collect(),
    };
    let started = Instant::now();
    timed(&db, &keys)?;
    let secs = started.elapsed().as_secs_f64();
    println!("{order}: {:.0} puts/s", puts as f64 / secs);
    print!("{}", db.stat()?);
    env.close()?;
    Ok(())
}

#[inline(never)]
fn timed(db: &beechdb::Db, keys: &[[u8; 8]]) -> beechdb::Result<()> {
    for k in keys {
        db.put(k, &[0x5a; 64])?;
    }
    Ok(())
}
