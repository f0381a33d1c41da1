//! Profiling aid: C threads (default 1) committing transactions (NOSYNC unless told) for 5 s
//! on the master of an in-process group of N members (default 3), each with T runtime
//! threads (default 1), no TCP: the replication path's own cost. A third argument `sync`
//! commits SYNC instead (`nosync` keeps NOSYNC).
//! `cargo run --release -p beechdb-repl --example commit_rate -- N T [sync|nosync] [C]`
//! (this machine, 2026-11-24: 3 members about 11,000 commits/s, 1 member about 52,000;
//! `perf` shows the time mostly in the kernel's task switching between openraft's tasks.
//! 2026-11-27: 1 member 25,003-26,591/s with 1 runtime thread, 33,253-34,089/s with 2; the
//! runtime's thread is busy three quarters of the time, a tenth of it in openraft's watch
//! channels' notifications. Later that day, committers polling for their outcome when alone:
//! 1 member 34,325-46,815/s against 11,434-12,592/s sleeping, 3 members 9,804-16,269/s
//! against 6,283-6,989/s; 8 committing threads on 3 members within noise).

use beechdb::Durability;
use beechdb_repl::net::Network;
use beechdb_repl::{Member, MemberConfig, Transport};
use std::time::{Duration, Instant};

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let net = Network::new();
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3);
    let members: Vec<Member> = (1..=n as u64)
        .map(|id| {
            Member::start(
                MemberConfig {
                    runtime_threads: std::env::args()
                        .nth(2)
                        .and_then(|a| a.parse().ok())
                        .unwrap_or(1),
                    ..MemberConfig::new(id, dir.path().join(format!("m{id}")))
                },
                Transport::Local(&net),
            )
            .unwrap()
        })
        .collect();
    let nodes: Vec<(u64, &str)> = (1..=n as u64).map(|id| (id, "")).collect();
    members[0].initialize(&nodes).unwrap();
    let m = loop {
        if let Some(m) = members.iter().find(|m| m.is_master()) {
            break m;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let env = m.env();
    let db = env.open_or_create_db("x").unwrap();
    let durability = match std::env::args().nth(3).as_deref() {
        Some("sync") => Durability::Sync,
        _ => Durability::NoSync,
    };
    let threads: u64 = std::env::args()
        .nth(4)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1);
    let started = Instant::now();
    let commits: u64 = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|w| {
                let (env, db) = (&env, &db);
                s.spawn(move || {
                    let mut k = 0u64;
                    while started.elapsed() < Duration::from_secs(5) {
                        let t = env.begin_txn().unwrap();
                        let key = (w << 48 | k).to_be_bytes();
                        t.put(db, &key, &[0u8; 100]).unwrap();
                        t.commit_with(durability).unwrap();
                        k += 1;
                    }
                    k
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    println!(
        "{} members, {:?}, {} committing threads: {:.0} commits/s",
        n,
        durability,
        threads,
        commits as f64 / started.elapsed().as_secs_f64()
    );
}
