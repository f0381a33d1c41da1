//! Seed 000's key/value workload (Tables 3-5), exactly: 64-byte integer keys in an
//! order-preserving encoding (big-endian), 64-byte data; batches of ten sequential keys
//! from a random start. Populate 57,600 batches (576,000 records, untimed), then time
//! FETCH of 57,600 random batches, UPDATE of 57,600 random batches, DELETE of every record
//! in batches, and re-INSERT of every batch; ops/s counts records.
//!
//! Batch `b` covers keys `10b .. 10b+9`, so "a random start" is a random batch: populate,
//! delete and insert visit the batches in a random permutation (every record exactly once);
//! fetch and update draw batches uniformly with replacement. Each fetched value is checked
//! against the key it was stored under, and every phase checks its counts, so a run that
//! did not do the work fails instead of reporting a figure.

use crate::engines::{self, BenchResult, Engine, KvEngine, Setup};
use crate::report::{cell, Record, Summary};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::time::Instant;

pub const PAPER_BATCHES: u64 = 57_600;
pub const BATCH: u64 = 10;
pub const OPS: [&str; 4] = ["insert", "fetch", "delete", "update"];

/// Seed 000 Table 3 (Berkeley DB 11gR2 DS, 2010): (ops/s, stddev) for insert, fetch, delete, update.
pub const PAPER_DS: [(f64, f64); 4] = [
    (208_139.0, 329.0),
    (264_665.0, 229.0),
    (158_506.0, 236.0),
    (250_297.0, 870.0),
];

pub fn key(i: u64) -> [u8; 64] {
    let mut k = [0u8; 64];
    k[..8].copy_from_slice(&i.to_be_bytes());
    k
}

pub fn value(i: u64, generation: u64) -> [u8; 64] {
    let mut v = [0x5au8; 64];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v[8..16].copy_from_slice(&generation.to_le_bytes());
    v
}

/// Ops/s of each timed phase of one run, in `OPS` order.
pub type RunResult = [f64; 4];

fn check(cond: bool, what: impl FnOnce() -> String) -> BenchResult<()> {
    if cond {
        Ok(())
    } else {
        Err(what().into())
    }
}

fn timed(records: u64, f: impl FnOnce() -> BenchResult<()>) -> BenchResult<f64> {
    let t = Instant::now();
    f()?;
    Ok(records as f64 / t.elapsed().as_secs_f64())
}

/// One run of the workload on a freshly opened engine.
pub fn run_once(e: &mut dyn KvEngine, batches: u64, seed: u64) -> BenchResult<RunResult> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let records = batches * BATCH;
    let mut perm: Vec<u64> = (0..batches).collect();
    let write_batch = |e: &mut dyn KvEngine, b: u64, generation: u64| -> BenchResult<()> {
        e.begin_batch(true)?;
        for i in b * BATCH..(b + 1) * BATCH {
            e.put(&key(i), &value(i, generation))?;
        }
        e.end_batch()
    };
    perm.shuffle(&mut rng);
    for &b in &perm {
        write_batch(e, b, 0)?;
    }
    let random: Vec<u64> = (0..batches).map(|_| rng.gen_range(0..batches)).collect();
    let mut buf = Vec::with_capacity(256);
    let fetch = timed(records, || {
        let mut found = 0u64;
        for &b in &random {
            e.begin_batch(false)?;
            for i in b * BATCH..(b + 1) * BATCH {
                if e.get(&key(i), &mut buf)? && buf.len() == 64 && buf[..8] == i.to_le_bytes() {
                    found += 1;
                }
            }
            e.end_batch()?;
        }
        check(found == records, || {
            format!("fetch found {found} of {records} records intact")
        })
    })?;
    let random: Vec<u64> = (0..batches).map(|_| rng.gen_range(0..batches)).collect();
    let update = timed(records, || {
        for &b in &random {
            e.begin_batch(true)?;
            for i in b * BATCH..(b + 1) * BATCH {
                e.update(&key(i), &value(i, 1))?;
            }
            e.end_batch()?;
        }
        Ok(())
    })?;
    // Updates really landed: a sample of updated keys carries the new generation.
    for &b in random.iter().step_by(97) {
        check(
            e.get(&key(b * BATCH), &mut buf)? && buf[8..16] == 1u64.to_le_bytes(),
            || format!("update of batch {b} lost"),
        )?;
    }
    perm.shuffle(&mut rng);
    let delete = timed(records, || {
        let mut deleted = 0u64;
        for &b in &perm {
            e.begin_batch(true)?;
            for i in b * BATCH..(b + 1) * BATCH {
                deleted += e.delete(&key(i))? as u64;
            }
            e.end_batch()?;
        }
        check(deleted == records, || {
            format!("delete removed {deleted} of {records} records")
        })
    })?;
    check(!e.get(&key(0), &mut buf)?, || {
        "a deleted record is still there".into()
    })?;
    perm.shuffle(&mut rng);
    let insert = timed(records, || {
        for &b in &perm {
            write_batch(e, b, 2)?;
        }
        Ok(())
    })?;
    for &b in perm.iter().step_by(97) {
        check(
            e.get(&key(b * BATCH + 9), &mut buf)? && buf[8..16] == 2u64.to_le_bytes(),
            || format!("insert of batch {b} lost"),
        )?;
    }
    Ok([insert, fetch, delete, update])
}

pub struct KvOptions {
    pub engines: Vec<Engine>,
    pub batches: u64,
    pub runs: usize,
    pub setup: Setup,
    pub dir: Option<std::path::PathBuf>,
    pub mode: String,
}

/// Runs every engine `runs` times, interleaved (run 1 of each engine, then run 2, ...) so
/// that slow drifts of a shared machine fall on all engines alike.
pub fn run(opts: &KvOptions) -> BenchResult<BTreeMap<(usize, usize), Vec<f64>>> {
    let mut samples: BTreeMap<(usize, usize), Vec<f64>> = BTreeMap::new();
    for run in 0..opts.runs {
        for (ei, &engine) in opts.engines.iter().enumerate() {
            let base = match &opts.dir {
                Some(d) => tempfile::tempdir_in(d)?,
                None => tempfile::tempdir()?,
            };
            let mut e = engines::open(engine, base.path(), &opts.setup)?;
            let r = run_once(e.as_mut(), opts.batches, 1000 + run as u64)
                .map_err(|err| format!("{} run {}: {err}", engine.name(), run + 1))?;
            e.close()?;
            eprintln!(
                "run {}/{} {:<8} insert {:>10.0}  fetch {:>10.0}  delete {:>10.0}  update {:>10.0} ops/s",
                run + 1,
                opts.runs,
                engine.name(),
                r[0],
                r[1],
                r[2],
                r[3]
            );
            for (oi, x) in r.iter().enumerate() {
                samples.entry((ei, oi)).or_default().push(*x);
            }
        }
    }
    Ok(samples)
}

/// The results table (markdown) and JSON records.
pub fn report(
    opts: &KvOptions,
    samples: &BTreeMap<(usize, usize), Vec<f64>>,
) -> (String, Vec<Record>) {
    let mut table = String::new();
    table.push_str(&format!(
        "Seed 000 Table 3 workload, mode {}: {} batches of {} ({} records), {} runs; ops/s as mean ± sd (median, min–max)\n\n",
        opts.mode,
        opts.batches,
        BATCH,
        opts.batches * BATCH,
        opts.runs
    ));
    table.push_str("| engine | insert | fetch | delete | update |\n|---|---|---|---|---|\n");
    let mut records = Vec::new();
    let mut summaries: BTreeMap<(usize, usize), Summary> = BTreeMap::new();
    for (ei, engine) in opts.engines.iter().enumerate() {
        let mut row = format!("| {} |", engine.label());
        for (oi, op) in OPS.iter().enumerate() {
            let runs = &samples[&(ei, oi)];
            let s = Summary::of(runs);
            row.push_str(&format!(" {} |", cell(&s)));
            records.push(Record {
                engine: engine.name().into(),
                mode: opts.mode.clone(),
                op: op.to_string(),
                threads: 1,
                ops_per_sec: s.mean,
                stddev: s.stddev,
                median: s.median,
                min: s.min,
                max: s.max,
                runs: runs.clone(),
                records_per_run: opts.batches * BATCH,
            });
            summaries.insert((ei, oi), s);
        }
        table.push_str(&row);
        table.push('\n');
    }
    table.push_str("| paper, BDB 11gR2 DS (2010 hardware) |");
    for (m, sd) in PAPER_DS {
        table.push_str(&format!(
            " {} ± {} |",
            crate::report::thousands(m),
            crate::report::thousands(sd)
        ));
    }
    table.push('\n');
    let beech = opts.engines.iter().position(|&e| e == Engine::Beechdb);
    let bdb = opts.engines.iter().position(|&e| e == Engine::Bdb);
    if let (Some(b), Some(d)) = (beech, bdb) {
        table.push_str("| **BeechDB / Berkeley DB** (mean; median) |");
        for oi in 0..4 {
            let (x, y) = (&summaries[&(b, oi)], &summaries[&(d, oi)]);
            table.push_str(&format!(
                " **{:.2}x**; {:.2}x |",
                x.mean / y.mean,
                x.median / y.median
            ));
        }
        table.push('\n');
    }
    (table, records)
}
