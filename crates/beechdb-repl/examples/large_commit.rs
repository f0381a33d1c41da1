//! Measuring aid: one transaction of N records (10-byte keys, 100-byte values) committed on
//! the master of an in-process group of 3 members, sent in parts of P KiB; prints the time
//! to commit, the time until every member applied it, the entries it took, the process's
//! peak memory (all three members live in this process) and the elections meanwhile.
//! `cargo run --release -p beechdb-repl --example large_commit -- 1000000 16384`

use beechdb_repl::net::Network;
use beechdb_repl::{Member, MemberConfig, Transport};
use std::time::{Duration, Instant};

fn peak_rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

fn main() {
    let arg = |i: usize, default: usize| {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(default)
    };
    let (records, part_kib) = (arg(1, 1_000_000), arg(2, 16384));
    let dir = tempfile::tempdir().unwrap();
    let net = Network::new();
    let members: Vec<Member> = (1..=3)
        .map(|id| {
            let config = MemberConfig {
                part_bytes: part_kib << 10,
                ack_timeout: Duration::from_secs(120),
                ..MemberConfig::new(id, dir.path().join(format!("m{id}")))
            };
            Member::start(config, Transport::Local(&net)).unwrap()
        })
        .collect();
    members[0].initialize(&[(1, ""), (2, ""), (3, "")]).unwrap();
    let master = loop {
        if let Some(m) = members.iter().find(|m| m.is_master()) {
            break m;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let env = master.env();
    let db = env.open_or_create_db("big").unwrap();
    let before = peak_rss_mib();
    let (first, term) = (master.status().last_log, master.status().term);
    let started = Instant::now();
    let t = env.begin_txn().unwrap();
    for k in 0..records as u64 {
        t.put(&db, &format!("{k:010}").into_bytes(), &[0x5a; 100])
            .unwrap();
    }
    let written = started.elapsed();
    let token = t.commit().unwrap();
    let committed = started.elapsed();
    for m in &members {
        m.wait_applied(token, Duration::from_secs(300)).unwrap();
    }
    let everywhere = started.elapsed();
    let elections = members
        .iter()
        .map(|m| m.status().term)
        .max()
        .unwrap_or(term)
        - term;
    for m in &members {
        let n = m.env().open_db("big").unwrap().len().unwrap();
        assert_eq!(n, records as u64, "member {} holds {n} records", m.id());
    }
    println!(
        "{records} records ({:.0} MB) in parts of {part_kib} KiB: {} entries; written {:.2} s, \
         committed {:.2} s, applied everywhere {:.2} s; peak memory {} MiB (before {} MiB); \
         elections meanwhile: {elections}",
        records as f64 * 110.0 / 1e6,
        token - first,
        written.as_secs_f64(),
        committed.as_secs_f64(),
        everywhere.as_secs_f64(),
        peak_rss_mib(),
        before
    );
    for m in members {
        m.shutdown().unwrap();
    }
}
