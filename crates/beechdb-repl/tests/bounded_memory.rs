//! A replicated transaction far larger than its members' memory budgets runs in bounded
//! memory: the master's write set spills (to a scratch log, its environment's log being in
//! memory), each member's apply of it spills too, and the parts stay on file in every
//! member's replicated log. Alone in its test binary, so that the process's peak resident
//! memory is this test's.

use beechdb_repl::net::Network;
use beechdb_repl::{Member, MemberConfig, Transport};
use std::time::{Duration, Instant};

/// The process's peak resident memory in kB.
fn peak_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let peak = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .unwrap();
    peak.trim().trim_end_matches(" kB").parse().unwrap()
}

#[test]
fn a_large_replicated_transaction_runs_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let net = Network::new();
    let members: Vec<Member> = (1..=3)
        .map(|id| {
            let config = MemberConfig {
                env: beechdb::Config::default()
                    .cache_size(4 << 20)
                    .txn_memory(4 << 20),
                part_bytes: 1 << 20,
                ack_timeout: Duration::from_secs(60),
                ..MemberConfig::new(id, dir.path().join(format!("m{id}")))
            };
            Member::start(config, Transport::Local(&net)).unwrap()
        })
        .collect();
    members[0].initialize(&[(1, ""), (2, ""), (3, "")]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let master = loop {
        if let Some(m) = members.iter().find(|m| m.is_master()) {
            break m;
        }
        assert!(Instant::now() < deadline, "no master elected");
        std::thread::sleep(Duration::from_millis(5));
    };
    let env = master.env();
    let db = env.open_or_create_db("big").unwrap();
    let before = peak_kb();
    // 440,000 records of 110 bytes: 48 MB of data, its write set in memory about 3 times
    // that, held on three members.
    let records = 440_000u32;
    let t = env.begin_txn().unwrap();
    for k in 0..records {
        t.put(&db, &k.to_be_bytes(), &[(k % 251) as u8; 106])
            .unwrap();
    }
    let token = t.commit().unwrap();
    for m in &members {
        m.wait_applied(token, Duration::from_secs(120)).unwrap();
    }
    let grown = peak_kb().saturating_sub(before);
    for m in &members {
        let db = m.env().open_db("big").unwrap();
        assert_eq!(db.len().unwrap(), records as u64, "member {}", m.id());
        let v = db.get(&12_345u32.to_be_bytes()).unwrap().unwrap();
        assert_eq!(v, [(12_345 % 251) as u8; 106]);
    }
    eprintln!("48 MB in one transaction on three members: peak memory grew by {grown} kB");
    // Budgets: three caches and three transaction budgets of 4 MiB, parts of 1 MiB in
    // flight; held in memory, the write sets, parts and values before took over 300 MB.
    assert!(grown < 120_000, "peak resident memory grew by {grown} kB");
    for m in members {
        m.shutdown().unwrap();
    }
}
