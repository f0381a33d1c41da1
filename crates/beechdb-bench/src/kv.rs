//! Seed 000's key/value workload (Tables 3-5), exactly: 64-byte integer keys in an
//! order-preserving encoding (big-endian), 64-byte data; batches of ten sequential keys
//! from a random start. Populate 57,600 batches (576,000 records, untimed), then time
//! FETCH of 57,600 random batches, UPDATE of 57,600 random batches, DELETE of every record
//! in batches, and re-INSERT of every batch; ops/s counts records.
//!
//! Batch `b` covers keys `10b .. 10b+9`, so "a random start" is a random batch: populate,
//! delete and insert visit the batches in a random permutation (every record exactly once);
//! fetch and update draw batches uniformly with replacement. With several threads, thread
//! `t` owns the batches `b` with `b % threads == t` (each thread its own batches) and the
//! figure is all records over the wall-clock time of the phase. Each fetched value is
//! checked against its key, and every phase checks its counts, so a run that did not do the
//! work fails instead of reporting a figure.

use crate::engines::{self, BenchResult, Engine, KvEngine, KvStore, Mode, Setup};
use crate::report::{cell, Record, Summary};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Barrier;
use std::time::Instant;

pub const PAPER_BATCHES: u64 = 57_600;
pub const BATCH: u64 = 10;
pub const OPS: [&str; 4] = ["insert", "fetch", "delete", "update"];

type Paper = [(f64, f64); 4];

/// Seed 000 (Berkeley DB 11gR2, 2010 hardware), in `OPS` order: Table 3 and Table 4.
pub fn paper(mode: Mode, threads: usize) -> Option<Paper> {
    let t4 = match mode {
        Mode::Ds => [
            (208_139.0, 329.0),
            (264_665.0, 229.0),
            (158_506.0, 236.0),
            (250_297.0, 870.0),
        ],
        Mode::TdsSync => [
            (693.0, 10.0),
            (159_837.0, 895.0),
            (831.0, 23.0),
            (1_732.0, 18.0),
        ],
        Mode::TdsTmpfsSync => [
            (49_673.0, 912.0),
            (162_848.0, 1_588.0),
            (44_279.0, 277.0),
            (60_973.0, 291.0),
        ],
        Mode::TdsWriteNosync => [
            (37_664.0, 460.0),
            (160_307.0, 293.0),
            (36_110.0, 454.0),
            (52_922.0, 258.0),
        ],
        Mode::TdsNosync => [
            (53_199.0, 613.0),
            (159_980.0, 1_419.0),
            (49_340.0, 183.0),
            (86_960.0, 639.0),
        ],
        Mode::TdsInmem => [
            (66_435.0, 102.0),
            (163_229.0, 815.0),
            (58_845.0, 101.0),
            (97_602.0, 396.0),
        ],
    };
    if threads == 1 {
        return Some(t4);
    }
    // Table 5: TDS (synchronous commits) with several threads.
    let t5 = match threads {
        2 => [
            (647.0, 7.0),
            (106_196.0, 432.0),
            (767.0, 20.0),
            (1_634.0, 27.0),
        ],
        3 => [
            (690.0, 9.0),
            (126_762.0, 762.0),
            (863.0, 20.0),
            (1_909.0, 32.0),
        ],
        4 => [
            (721.0, 8.0),
            (134_581.0, 497.0),
            (882.0, 18.0),
            (2_085.0, 54.0),
        ],
        8 => [
            (859.0, 26.0),
            (128_928.0, 423.0),
            (967.0, 27.0),
            (2_497.0, 32.0),
        ],
        12 => [
            (930.0, 24.0),
            (112_735.0, 518.0),
            (1_013.0, 20.0),
            (2_658.0, 149.0),
        ],
        16 => [
            (968.0, 13.0),
            (99_860.0, 820.0),
            (1_085.0, 34.0),
            (2_837.0, 117.0),
        ],
        _ => return None,
    };
    (mode == Mode::TdsSync).then_some(t5)
}

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

fn write_batch(e: &mut dyn KvEngine, b: u64, generation: u64, update: bool) -> BenchResult<()> {
    e.begin_batch(true)?;
    for i in b * BATCH..(b + 1) * BATCH {
        if update {
            e.update(&key(i), &value(i, generation))?;
        } else {
            e.put(&key(i), &value(i, generation))?;
        }
    }
    e.end_batch()
}

/// Runs `work` on every thread's handle at once; returns the seconds from the first
/// thread's start to the last thread's end (timed inside the threads: on a small machine the
/// coordinating thread may not run until the workers are done), and the sum of what the
/// threads return.
fn phase(
    handles: &mut [Box<dyn KvEngine + '_>],
    seed: u64,
    work: impl Fn(usize, &mut dyn KvEngine, &mut rand::rngs::StdRng) -> BenchResult<u64> + Sync,
) -> BenchResult<(f64, u64)> {
    let barrier = Barrier::new(handles.len());
    std::thread::scope(|s| {
        let running: Vec<_> = handles
            .iter_mut()
            .enumerate()
            .map(|(t, h)| {
                let (barrier, work) = (&barrier, &work);
                s.spawn(move || {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(
                        seed ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9),
                    );
                    barrier.wait();
                    let start = Instant::now();
                    let r = work(t, h.as_mut(), &mut rng);
                    (start, Instant::now(), r)
                })
            })
            .collect();
        let (mut first, mut last, mut sum, mut first_err) =
            (None::<Instant>, None::<Instant>, 0, None);
        for r in running {
            let (start, end, r) = r.join().map_err(|_| "a benchmark thread panicked")?;
            first = Some(first.map_or(start, |f| f.min(start)));
            last = Some(last.map_or(end, |l| l.max(end)));
            match r {
                Ok(n) => sum += n,
                Err(e) => first_err = first_err.or(Some(e)),
            }
        }
        match (first_err, first, last) {
            (Some(e), _, _) => Err(e),
            (None, Some(f), Some(l)) => Ok(((l - f).as_secs_f64(), sum)),
            _ => Err("no threads".into()),
        }
    })
}

/// One run of the workload on a freshly opened store with `threads` threads.
pub fn run_once(
    store: &dyn KvStore,
    batches: u64,
    threads: usize,
    seed: u64,
) -> BenchResult<RunResult> {
    let records = batches * BATCH;
    let parts: Vec<Vec<u64>> = (0..threads)
        .map(|t| {
            (0..batches)
                .filter(|b| b % threads as u64 == t as u64)
                .collect()
        })
        .collect();
    let mut handles = (0..threads)
        .map(|_| store.handle())
        .collect::<BenchResult<Vec<_>>>()?;
    let permuted = |t: usize, rng: &mut rand::rngs::StdRng| {
        let mut p = parts[t].clone();
        p.shuffle(rng);
        p
    };
    let drawn = |t: usize, rng: &mut rand::rngs::StdRng| -> Vec<u64> {
        (0..parts[t].len())
            .map(|_| parts[t][rng.gen_range(0..parts[t].len())])
            .collect()
    };
    phase(&mut handles, seed, |t, e, rng| {
        for b in permuted(t, rng) {
            write_batch(e, b, 0, false)?;
        }
        Ok(0)
    })?;
    let (secs, found) = phase(&mut handles, seed + 1, |t, e, rng| {
        let mut buf = Vec::with_capacity(256);
        let mut found = 0;
        for b in drawn(t, rng) {
            e.begin_batch(false)?;
            for i in b * BATCH..(b + 1) * BATCH {
                if e.get(&key(i), &mut buf)? && buf.len() == 64 && buf[..8] == i.to_le_bytes() {
                    found += 1;
                }
            }
            e.end_batch()?;
        }
        Ok(found)
    })?;
    check(found == records, || {
        format!("fetch found {found} of {records} records intact")
    })?;
    let fetch = records as f64 / secs;
    let (secs, _) = phase(&mut handles, seed + 2, |t, e, rng| {
        for b in drawn(t, rng) {
            write_batch(e, b, 1, true)?;
        }
        Ok(0)
    })?;
    let update = records as f64 / secs;
    let mut buf = Vec::new();
    let sample: Vec<u64> = (0..batches).step_by(97).collect();
    let updated = sample
        .iter()
        .filter(|&&b| {
            handles[0].get(&key(b * BATCH), &mut buf).unwrap_or(false)
                && buf[8..16] != 0u64.to_le_bytes()
        })
        .count();
    check(updated > 0, || "no sampled record carries an update".into())?;
    let (secs, deleted) = phase(&mut handles, seed + 3, |t, e, rng| {
        let mut deleted = 0;
        for b in permuted(t, rng) {
            e.begin_batch(true)?;
            for i in b * BATCH..(b + 1) * BATCH {
                deleted += e.delete(&key(i))? as u64;
            }
            e.end_batch()?;
        }
        Ok(deleted)
    })?;
    check(deleted == records, || {
        format!("delete removed {deleted} of {records} records")
    })?;
    let delete = records as f64 / secs;
    check(!handles[0].get(&key(0), &mut buf)?, || {
        "a deleted record is still there".into()
    })?;
    let (secs, _) = phase(&mut handles, seed + 4, |t, e, rng| {
        for b in permuted(t, rng) {
            write_batch(e, b, 2, false)?;
        }
        Ok(0)
    })?;
    let insert = records as f64 / secs;
    for &b in &sample {
        check(
            handles[0].get(&key(b * BATCH + 9), &mut buf)? && buf[8..16] == 2u64.to_le_bytes(),
            || format!("insert of batch {b} lost"),
        )?;
    }
    Ok([insert, fetch, delete, update])
}

pub struct KvOptions {
    pub engines: Vec<Engine>,
    pub modes: Vec<Mode>,
    pub threads: Vec<usize>,
    pub batches: u64,
    pub runs: usize,
    pub setup: Setup,
    pub dir: Option<std::path::PathBuf>,
    pub tmpfs_dir: std::path::PathBuf,
}

/// (mode, threads, engine, op) -> ops/s of each run.
pub type Samples = BTreeMap<(usize, usize, usize, usize), Vec<f64>>;

/// Runs every configuration `runs` times, interleaving engines (run 1 of each engine, then
/// run 2, ...) so that slow drifts of a shared machine fall on all engines alike.
pub fn run(
    opts: &KvOptions,
    before_run: &mut dyn FnMut(Mode, usize) -> BenchResult<()>,
) -> BenchResult<Samples> {
    let mut samples = Samples::new();
    for (mi, &mode) in opts.modes.iter().enumerate() {
        for (ti, &threads) in opts.threads.iter().enumerate() {
            for run in 0..opts.runs {
                before_run(mode, threads)?;
                for (ei, &engine) in opts.engines.iter().enumerate() {
                    if !engine.supports(mode, threads) {
                        continue;
                    }
                    let base = if mode == Mode::TdsTmpfsSync {
                        Some(opts.tmpfs_dir.clone())
                    } else {
                        opts.dir.clone()
                    };
                    let dir = match base {
                        Some(d) => tempfile::tempdir_in(d)?,
                        None => tempfile::tempdir()?,
                    };
                    let setup = Setup {
                        mode,
                        ..opts.setup.clone()
                    };
                    let store = engines::open(engine, dir.path(), &setup)?;
                    let r = run_once(store.as_ref(), opts.batches, threads, 1000 + run as u64)
                        .map_err(|err| {
                            format!(
                                "{} {} x{threads} run {}: {err}",
                                engine.name(),
                                mode.name(),
                                run + 1
                            )
                        })?;
                    store.close()?;
                    eprintln!(
                        "{:<16} x{:<2} run {}/{} {:<8} insert {:>10.0}  fetch {:>10.0}  delete {:>10.0}  update {:>10.0} ops/s",
                        mode.name(),
                        threads,
                        run + 1,
                        opts.runs,
                        engine.name(),
                        r[0],
                        r[1],
                        r[2],
                        r[3]
                    );
                    for (oi, x) in r.iter().enumerate() {
                        samples.entry((mi, ti, ei, oi)).or_default().push(*x);
                    }
                }
            }
        }
    }
    Ok(samples)
}

fn thousands(x: f64) -> String {
    crate::report::thousands(x)
}

/// The results tables (markdown) and JSON records.
pub fn report(opts: &KvOptions, samples: &Samples) -> (String, Vec<Record>) {
    let mut out = format!(
        "Seed 000 key/value workload: {} batches of {} ({} records) per phase, {} runs; ops/s as mean ± sd (median, min–max)\n",
        opts.batches,
        BATCH,
        opts.batches * BATCH,
        opts.runs
    );
    let mut records = Vec::new();
    let mean = |k| samples.get(&k).map(|v: &Vec<f64>| Summary::of(v));
    for (mi, &mode) in opts.modes.iter().enumerate() {
        for (ti, &threads) in opts.threads.iter().enumerate() {
            out.push_str(&format!(
                "\n#### mode {}, {} thread{}\n\n",
                mode.name(),
                threads,
                if threads == 1 { "" } else { "s" }
            ));
            out.push_str("| engine | insert | fetch | delete | update |\n|---|---|---|---|---|\n");
            for (ei, engine) in opts.engines.iter().enumerate() {
                if !samples.contains_key(&(mi, ti, ei, 0)) {
                    continue;
                }
                let mut row = format!("| {} |", engine.label());
                for (oi, op) in OPS.iter().enumerate() {
                    let runs = &samples[&(mi, ti, ei, oi)];
                    let s = Summary::of(runs);
                    row.push_str(&format!(" {} |", cell(&s)));
                    records.push(Record {
                        engine: engine.name().into(),
                        mode: mode.name().into(),
                        op: op.to_string(),
                        threads,
                        ops_per_sec: s.mean,
                        stddev: s.stddev,
                        median: s.median,
                        min: s.min,
                        max: s.max,
                        runs: runs.clone(),
                        records_per_run: opts.batches * BATCH,
                    });
                }
                out.push_str(&row);
                out.push('\n');
            }
            if let Some(p) = paper(mode, threads) {
                out.push_str("| paper, BDB 11gR2 (2010 hardware) |");
                for (m, sd) in p {
                    out.push_str(&format!(" {} ± {} |", thousands(m), thousands(sd)));
                }
                out.push('\n');
            }
            let beech = opts.engines.iter().position(|&e| e == Engine::Beechdb);
            let bdb = opts.engines.iter().position(|&e| e == Engine::Bdb);
            if let (Some(b), Some(d)) = (beech, bdb) {
                if let (Some(_), Some(_)) = (mean((mi, ti, b, 0)), mean((mi, ti, d, 0))) {
                    out.push_str("| **BeechDB / Berkeley DB** (mean; median) |");
                    for oi in 0..4 {
                        let (x, y) = (
                            mean((mi, ti, b, oi)).unwrap(),
                            mean((mi, ti, d, oi)).unwrap(),
                        );
                        out.push_str(&format!(
                            " **{:.2}x**; {:.2}x |",
                            x.mean / y.mean,
                            x.median / y.median
                        ));
                    }
                    out.push('\n');
                }
            }
        }
    }
    (out, records)
}
