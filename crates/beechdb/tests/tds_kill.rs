//! Crash recovery, process kill: a child process runs transactions on several threads over
//! two databases and reports each acknowledged commit (thread, sequence, LSN, durability) on
//! a channel of its own; the parent SIGKILLs it at a random moment and checks, after reopening:
//! every commit acknowledged under SYNC or WRITE_NOSYNC is present in full; no transaction
//! is partly present; the recovered commits are a prefix of the commit (LSN) order; a second
//! recovery gives the same state; verify is clean; the environment keeps working.
//!
//! `BEECH_TDS_KILL_ITERS` sets the number of kills (default 100).

mod common;

use beechdb::{Config, Durability, Env};
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const DIR: &str = "BEECH_TDS_KILL_DIR";
const THREADS: u64 = 3;

fn config() -> Config {
    Config::new()
        .page_size(4096)
        .cache_size(512 << 10)
        .transactional(true)
        .log_segment_size(256 << 10)
        .checkpoint_log_bytes(512 << 10)
}

fn key(thread: u64, seq: u64) -> Vec<u8> {
    format!("t{thread}-{seq:08}").into_bytes()
}

#[test]
#[ignore = "a child process of kill_during_transactions_recovers_every_acknowledged_commit"]
fn child_transactions() {
    let (Some(acks), Ok(dir)) = (common::Acks::open(), std::env::var(DIR)) else {
        panic!("run only by kill_during_transactions_recovers_every_acknowledged_commit");
    };
    let env = Env::open(&dir, config()).unwrap();
    let a = env.open_or_create_db("a").unwrap();
    let b = env.open_or_create_db("b").unwrap();
    let out = Arc::new(Mutex::new(acks));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (env, a, b, out) = (env.clone(), a.clone(), b.clone(), out.clone());
            std::thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(t);
                for seq in 0.. {
                    let d = match rng.gen_range(0..4) {
                        0 => Durability::WriteNoSync,
                        1 => Durability::NoSync,
                        _ => Durability::Sync,
                    };
                    let txn = env.begin_txn().unwrap();
                    let value = vec![seq as u8; rng.gen_range(1..300)];
                    txn.put(&a, &key(t, seq), &value).unwrap();
                    txn.put(&b, &key(t, seq), &value).unwrap();
                    txn.put(&a, format!("counter-{t}").as_bytes(), &seq.to_le_bytes())
                        .unwrap();
                    let lsn = txn.commit_with(d).unwrap();
                    let durable = if d == Durability::NoSync { 0 } else { 1 };
                    out.lock()
                        .unwrap()
                        .report(&format!("C {t} {seq} {lsn} {durable}"));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

type State = BTreeMap<(String, Vec<u8>), Vec<u8>>;

fn read_state(env: &Env) -> State {
    let mut s = State::new();
    for name in ["a", "b"] {
        if let Ok(db) = env.open_db(name) {
            for kv in db.iter() {
                let (k, v) = kv.unwrap();
                s.insert((name.to_string(), k), v);
            }
        }
    }
    s
}

#[test]
fn kill_during_transactions_recovers_every_acknowledged_commit() {
    let iters = common::count_from_env("BEECH_TDS_KILL_ITERS", 100);
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let mut acked_total = 0;
    for iter in 0..iters {
        let dir = tempfile::tempdir().unwrap();
        let ack_dir = tempfile::tempdir().unwrap();
        let ack_file = ack_dir.path().join("acks");
        let mut child = common::spawn_self(
            "child_transactions",
            &ack_file,
            &[(DIR, dir.path().display().to_string())],
        );
        std::thread::sleep(Duration::from_millis(rng.gen_range(30..400)));
        child.kill().unwrap();
        child.wait().unwrap();
        let acks: Vec<(u64, u64, u64, bool)> = common::Acks::read(&ack_file)
            .iter()
            .map(|line| {
                let f: Vec<u64> = line
                    .strip_prefix("C ")
                    .unwrap_or_else(|| panic!("iteration {iter}: a stray line {line:?}"))
                    .split(' ')
                    .map(|x| x.parse().unwrap())
                    .collect();
                assert_eq!(f.len(), 4, "iteration {iter}: {line:?}");
                (f[0], f[1], f[2], f[3] == 1)
            })
            .collect();
        // Each thread's acknowledgements arrive in its order, from 0: none was missed.
        for t in 0..THREADS {
            let seqs: Vec<u64> = acks.iter().filter(|a| a.0 == t).map(|a| a.1).collect();
            assert!(
                seqs.iter().enumerate().all(|(i, &s)| s == i as u64),
                "iteration {iter}: thread {t} acknowledgements {seqs:?}"
            );
        }
        acked_total += acks.len();

        let env = match Env::open(dir.path(), config().create(false)) {
            Ok(env) => env,
            Err(beechdb::Error::InvalidArgument(_)) if acks.is_empty() => continue,
            Err(e) => panic!("iteration {iter}: recovery failed: {e}"),
        };
        let state = read_state(&env);
        // Per thread, the recovered sequence numbers, checking atomicity on the way.
        let mut recovered: HashMap<u64, Vec<u64>> = HashMap::new();
        for ((db, k), v) in &state {
            let k = String::from_utf8_lossy(k).into_owned();
            if db != "a" || !k.starts_with('t') {
                continue;
            }
            let (t, seq) = k[1..].split_once('-').unwrap();
            let (t, seq): (u64, u64) = (t.parse().unwrap(), seq.parse().unwrap());
            assert_eq!(
                state.get(&("b".into(), k.clone().into_bytes())),
                Some(v),
                "iteration {iter}: transaction {k} partly present"
            );
            recovered.entry(t).or_default().push(seq);
        }
        for t in 0..THREADS {
            let seqs = recovered.remove(&t).unwrap_or_default();
            // Each thread commits in sequence: what survives is 0..n.
            assert!(
                seqs.iter().enumerate().all(|(i, &s)| i as u64 == s),
                "iteration {iter}: thread {t} has a gap"
            );
            let counter = state.get(&("a".into(), format!("counter-{t}").into_bytes()));
            assert_eq!(
                counter.map(|c| u64::from_le_bytes(c[..8].try_into().unwrap())),
                seqs.last().copied(),
                "iteration {iter}: counter of thread {t} disagrees with its transactions"
            );
        }
        let present = |t: u64, seq: u64| state.contains_key(&("a".to_string(), key(t, seq)));
        let mut by_lsn = acks.clone();
        by_lsn.sort_by_key(|a| a.2);
        let mut missing_seen = false;
        for &(t, seq, lsn, durable) in &by_lsn {
            let p = present(t, seq);
            if durable {
                assert!(
                    p,
                    "iteration {iter}: acknowledged durable commit t{t}-{seq} (LSN {lsn}) lost"
                );
            }
            assert!(
                !(p && missing_seen),
                "iteration {iter}: recovered commits are not a prefix of the LSN order"
            );
            missing_seen |= !p;
        }
        assert!(env.verify().unwrap().is_clean());
        drop(env);
        let again = Env::open(dir.path(), config().create(false)).unwrap();
        assert!(
            read_state(&again) == state,
            "iteration {iter}: a second recovery differs"
        );
        // (A kill before the child created its databases leaves none.)
        let a = again.open_or_create_db("a").unwrap();
        a.put(b"after", b"recovery").unwrap();
        again.close().unwrap();
    }
    eprintln!("{iters} kills, {acked_total} acknowledged commits checked");
    assert!(
        acked_total as u64 > iters * 10,
        "the child should commit a good deal before each kill"
    );
}
