//! Seed 001's ScaleTest on a BeechDB replication group: inserts of 10-byte keys and
//! 100-byte values, one record per transaction, on the master, with every other member a
//! process of its own on loopback; the scenarios of seed 001's Table 2 and the replica
//! series of Tables 8-9; failover after SIGKILL and SIGSTOP of the master; catch-up and
//! network-restore rates; and, in the same run, the loopback round-trip and fsync ceilings.
//!
//! Owns: the `ha` and `ha-node` subcommands. May call: `beechdb`, `beechdb_repl`. Every
//! throughput point checks its work: the master holds exactly one record per commit
//! counted, and every replica, once it has applied the last commit, holds the same
//! contents (digests compared).

use crate::engines::BenchResult;
use crate::report::{thousands, Summary};
use beechdb::{Config, Durability, Env};
use beechdb_repl::tcp::Client;
use beechdb_repl::{AckPolicy, Member, MemberConfig, NodeId, Transport};
use serde::Serialize;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Options {
    /// Seconds each throughput run lasts.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Runs of each point (mean, standard deviation, median and range are reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Inserting threads, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,8")]
    pub threads: Vec<usize>,
    /// Replica counts of the replica series (seed 001 Tables 8-9).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,5,8")]
    pub replicas: Vec<usize>,
    /// Parts to run: scenarios (Table 2), series (replica counts), failover, recovery
    /// (catch-up and network restore); comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "scenarios,series,failover,recovery"
    )]
    pub parts: Vec<String>,
    /// Run only the scenarios (and series points) whose name contains this text, e.g.
    /// "NOSYNC, 2 replicas".
    #[arg(long)]
    pub only: Option<String>,
    /// Failover measurements per kind (SIGKILL, SIGSTOP of the master).
    #[arg(long, default_value_t = 3)]
    pub failovers: usize,
    /// Records written while a replica is down (catch-up) or before a new member joins
    /// (network restore).
    #[arg(long, default_value_t = 20_000)]
    pub backlog: u64,
    /// Directory for the members (default: the system's temporary directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Also write the results as JSON records to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Run Berkeley DB JE HA 18.3.12 on the same workload, interleaved (needs Java 17 and
    /// Maven; the harness is built from this directory's pom.xml).
    #[arg(long)]
    pub je: bool,
    /// Where the JE harness lives.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/je"))]
    pub je_dir: PathBuf,
}

/// One member process: `beechdb-bench ha-node`.
#[derive(clap::Args)]
pub struct NodeOptions {
    dir: PathBuf,
    #[arg(long)]
    id: NodeId,
    #[arg(long)]
    listen: String,
    #[arg(long)]
    group: String,
    /// Form a group of these voters (ID=ADDRESS,...); the smallest id forms it.
    #[arg(long)]
    init: Option<String>,
}

/// Runs one member until killed.
pub fn node(o: NodeOptions) -> BenchResult<()> {
    let member = Member::start(
        MemberConfig::new(o.id, o.dir),
        Transport::Tcp {
            listen: &o.listen,
            group: &o.group,
        },
    )?;
    if let Some(list) = o.init {
        let nodes: Vec<(NodeId, String)> = list
            .split(',')
            .map(|p| {
                let (id, addr) = p.split_once('=').expect("ID=ADDRESS");
                (id.parse().expect("a member id"), addr.to_string())
            })
            .collect();
        if nodes.iter().map(|n| n.0).min() == Some(o.id) {
            let nodes: Vec<(NodeId, &str)> = nodes.iter().map(|(i, a)| (*i, a.as_str())).collect();
            let _ = member.initialize(&nodes);
        }
    }
    println!("ready");
    std::io::stdout().flush()?;
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// A member process of the benchmark.
struct Proc {
    child: Child,
    args: Vec<String>,
}

impl Proc {
    fn spawn(args: Vec<String>) -> BenchResult<Proc> {
        let mut child = Command::new(std::env::current_exe()?)
            .arg("ha-node")
            .args(&args)
            .stdout(Stdio::piped())
            .spawn()?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line)?;
        if line.trim() != "ready" {
            return Err(format!("a member process said {line:?}").into());
        }
        Ok(Proc { child, args })
    }

    fn member(
        dir: &Path,
        id: NodeId,
        addr: &str,
        group: &str,
        init: Option<&str>,
    ) -> BenchResult<Proc> {
        let mut args = vec![
            dir.join(format!("m{id}")).to_string_lossy().into_owned(),
            "--id".into(),
            id.to_string(),
            "--listen".into(),
            addr.into(),
            "--group".into(),
            group.into(),
        ];
        if let Some(i) = init {
            args.extend(["--init".to_string(), i.to_string()]);
        }
        Proc::spawn(args)
    }

    fn signal(&self, sig: i32) {
        // SAFETY: signalling our own child process by its pid.
        unsafe {
            libc::kill(self.child.id() as i32, sig);
        }
    }

    fn kill(&mut self) {
        self.signal(libc::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn restart(&mut self) -> BenchResult<()> {
        self.kill();
        let fresh = Proc::spawn(self.args.clone())?;
        *self = fresh;
        Ok(())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> BenchResult<String> {
    Ok(beechdb_repl::tcp::spare_loopback_addr()?)
}

fn group_name() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "scale-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A master in this process and `replicas` member processes, all voters.
struct Group {
    master: Member,
    replicas: Vec<(String, Proc)>,
    group: String,
}

impl Group {
    fn start(
        dir: &Path,
        replicas: usize,
        ack: AckPolicy,
        snapshot_every: u64,
    ) -> BenchResult<Group> {
        let group = group_name();
        let addr = free_port()?;
        let mut procs = Vec::new();
        for i in 0..replicas {
            let a = free_port()?;
            let p = Proc::member(dir, i as NodeId + 2, &a, &group, None)?;
            procs.push((a, p));
        }
        let config = MemberConfig {
            ack,
            snapshot_every,
            ..MemberConfig::new(1, dir.join("m1"))
        };
        let master = Member::start(
            config,
            Transport::Tcp {
                listen: &addr,
                group: &group,
            },
        )?;
        master.initialize(&[(1, &addr)])?;
        let deadline = Instant::now() + Duration::from_secs(20);
        while !master.is_master() {
            if Instant::now() > deadline {
                return Err("the master of a one-member group was not elected".into());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        for (i, (a, _)) in procs.iter().enumerate() {
            master.add_member(i as NodeId + 2, a, true)?;
        }
        Ok(Group {
            master,
            replicas: procs,
            group,
        })
    }

    /// Checks that every replica applies `token` and then holds what the master holds.
    fn verify(&self, token: u64) -> BenchResult<()> {
        let env = self.master.env();
        let txn = env.begin_txn()?;
        let want = beechdb_repl::digest(&env, &txn)?;
        txn.abort();
        let addrs: Vec<String> = self.replicas.iter().map(|(a, _)| a.clone()).collect();
        let client = Client::new(&self.group, &addrs)?.with_timeout(Duration::from_secs(10));
        for a in &addrs {
            let deadline = Instant::now() + Duration::from_secs(120);
            loop {
                let (applied, digest) = client.digest(a)?;
                if applied >= token {
                    if digest != want {
                        return Err(format!(
                            "replica {a} differs from the master after commit {token}"
                        )
                        .into());
                    }
                    break;
                }
                if Instant::now() > deadline {
                    return Err(format!("replica {a} did not apply commit {token}").into());
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        Ok(())
    }

    fn stop(self) -> BenchResult<()> {
        drop(self.replicas);
        Ok(self.master.shutdown()?)
    }
}

/// Inserts from `threads` threads into `env` for `secs`, one record per transaction with
/// durability `d`; returns the commits and the largest commit token (see [`check_held`]).
fn insert_load(env: &Env, threads: usize, secs: f64, d: Durability) -> BenchResult<(u64, u64)> {
    let db = env.open_or_create_db("scale")?;
    let stop = Arc::new(AtomicBool::new(false));
    let (commits, last) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (env, db, stop, commits, last) = (
                env.clone(),
                db.clone(),
                stop.clone(),
                commits.clone(),
                last.clone(),
            );
            std::thread::spawn(move || -> beechdb::Result<()> {
                let value = [0x5au8; 100];
                let mut n: u64 = 0;
                while !stop.load(Ordering::Relaxed) {
                    let mut key = [0u8; 10];
                    key[..2].copy_from_slice(&(t as u16).to_be_bytes());
                    key[2..].copy_from_slice(&n.to_be_bytes());
                    let txn = env.begin_txn()?;
                    txn.put(&db, &key, &value)?;
                    let token = txn.commit_with(d)?;
                    last.fetch_max(token, Ordering::Relaxed);
                    commits.fetch_add(1, Ordering::Relaxed);
                    n += 1;
                }
                Ok(())
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().map_err(|_| "an inserting thread panicked")??;
    }
    Ok((
        commits.load(Ordering::Relaxed),
        last.load(Ordering::Relaxed),
    ))
}

/// Checks that `env` holds exactly `n` records of the load.
fn check_held(env: &Env, n: u64) -> BenchResult<()> {
    let held = env.open_db("scale")?.len()?;
    match held == n {
        true => Ok(()),
        false => Err(format!("{n} commits counted but {held} records held").into()),
    }
}

/// One scenario of Table 2 (or a point of the replica series).
#[derive(Clone, Copy)]
struct Scenario {
    name: &'static str,
    /// `None`: a plain environment, no replication.
    replicas: Option<usize>,
    /// The master's and the replicas' log durability.
    durability: Durability,
    ack: AckPolicy,
    /// JE's master and replica sync policies and ack policy for the same scenario.
    je: (&'static str, &'static str, &'static str),
}

/// Ops/s of one run of `s` with `threads` threads.
fn run_point(base: &Path, s: Scenario, threads: usize, secs: f64) -> BenchResult<f64> {
    let dir = tempfile::tempdir_in(base)?;
    match s.replicas {
        None => {
            let env = Env::open(dir.path(), Config::default().transactional(true))?;
            let started = Instant::now();
            let (n, _) = insert_load(&env, threads, secs, s.durability)?;
            let rate = n as f64 / started.elapsed().as_secs_f64();
            check_held(&env, n)?;
            env.close()?;
            Ok(rate)
        }
        Some(r) => {
            let g = Group::start(dir.path(), r, s.ack, 50_000)?;
            let started = Instant::now();
            let (n, token) = insert_load(&g.master.env(), threads, secs, s.durability)?;
            let rate = n as f64 / started.elapsed().as_secs_f64();
            // An ack-NONE commit returns before it is applied: count once all are.
            g.master.wait_applied(token, Duration::from_secs(120))?;
            check_held(&g.master.env(), n)?;
            g.verify(token)?;
            g.stop()?;
            Ok(rate)
        }
    }
}

#[derive(Serialize)]
struct Record {
    engine: &'static str,
    mode: String,
    op: &'static str,
    threads: usize,
    replicas: usize,
    ops_per_sec: f64,
    stddev: f64,
    median: f64,
    min: f64,
    max: f64,
    runs: Vec<f64>,
}

/// The fsync ceiling: 128-byte writes at one offset, each followed by fdatasync, for a
/// second; per second.
fn fsync_ceiling(dir: &Path) -> BenchResult<f64> {
    use std::os::unix::fs::FileExt;
    let path = dir.join("fsync-ceiling");
    let f = std::fs::File::create(&path)?;
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed() < Duration::from_secs(1) {
        f.write_all_at(&[0xa5; 128], 0)?;
        f.sync_data()?;
        n += 1;
    }
    let rate = n as f64 / started.elapsed().as_secs_f64();
    std::fs::remove_file(path)?;
    Ok(rate)
}

/// The loopback round-trip ceiling: 16-byte messages echoed over one TCP connection for a
/// second; round trips per second.
fn loopback_ceiling() -> BenchResult<f64> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        let mut buf = [0u8; 16];
        loop {
            s.read_exact(&mut buf)?;
            s.write_all(&buf)?;
        }
    });
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    let mut buf = [7u8; 16];
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed() < Duration::from_secs(1) {
        s.write_all(&buf)?;
        s.read_exact(&mut buf)?;
        n += 1;
    }
    Ok(n as f64 / started.elapsed().as_secs_f64())
}

/// Seconds from stopping the master of a three-process group (SIGKILL, or SIGSTOP when
/// `freeze`) to the next write a client gets acknowledged by the group.
fn failover(base: &Path, freeze: bool) -> BenchResult<f64> {
    let dir = tempfile::tempdir_in(base)?;
    let group = group_name();
    let addrs: Vec<String> = (0..3).map(|_| free_port()).collect::<BenchResult<_>>()?;
    let init: String = addrs
        .iter()
        .enumerate()
        .map(|(i, a)| format!("{}={a}", i + 1))
        .collect::<Vec<_>>()
        .join(",");
    let mut procs: Vec<Proc> = addrs
        .iter()
        .enumerate()
        .map(|(i, a)| Proc::member(dir.path(), i as NodeId + 1, a, &group, Some(&init)))
        .collect::<BenchResult<_>>()?;
    // Short answers: a frozen master must not hold the client for long.
    let mut client = Client::new(&group, &addrs)?.with_timeout(Duration::from_millis(100));
    let patience = Duration::from_secs(30);
    for i in 0..50u32 {
        client.put("kv", &i.to_be_bytes(), b"v", patience)?;
    }
    let master = (0..3)
        .find(|&i| client.status(&addrs[i]).is_ok_and(|s| s.state == "master"))
        .ok_or("no master")?;
    let struck = Instant::now();
    if freeze {
        procs[master].signal(libc::SIGSTOP);
    } else {
        procs[master].kill();
    }
    loop {
        match client.put("kv", b"after", b"v", patience) {
            Ok(_) => break,
            Err(_) if struck.elapsed() < patience => continue,
            Err(e) => return Err(e.into()),
        }
    }
    let secs = struck.elapsed().as_secs_f64();
    procs[master].kill();
    Ok(secs)
}

/// Inserts records `from..from + n` into `env` one per transaction (NOSYNC); the last
/// commit's token.
fn insert_range(env: &Env, from: u64, n: u64) -> BenchResult<u64> {
    let db = env.open_or_create_db("scale")?;
    let mut token = 0;
    for i in from..from + n {
        let txn = env.begin_txn()?;
        txn.put(&db, &i.to_be_bytes()[..], &[0x5a; 100])?;
        token = txn.commit_with(Durability::NoSync)?;
    }
    Ok(token)
}

/// Waits until the member at `addr` of `group` has applied `token`.
fn await_applied(group: &str, addr: &str, token: u64) -> BenchResult<()> {
    let client = Client::new(group, &[addr.to_string()])?;
    let deadline = Instant::now() + Duration::from_secs(600);
    while !client.status(addr).is_ok_and(|s| s.applied >= token) {
        if Instant::now() > deadline {
            return Err(format!("{addr} did not apply commit {token}").into());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(())
}

/// Records per second that a replica `backlog` records behind applies from the log when it
/// comes back (no snapshot: the log is kept).
fn catch_up(base: &Path, backlog: u64) -> BenchResult<f64> {
    let dir = tempfile::tempdir_in(base)?;
    let mut g = Group::start(dir.path(), 2, AckPolicy::SimpleMajority, 100 * backlog)?;
    let env = g.master.env();
    insert_range(&env, 0, 100)?;
    g.replicas[1].1.kill();
    let token = insert_range(&env, 100, backlog)?;
    let started = Instant::now();
    g.replicas[1].1.restart()?;
    await_applied(&g.group, &g.replicas[1].0, token)?;
    let rate = backlog as f64 / started.elapsed().as_secs_f64();
    if g.master.status().purged.is_some() {
        return Err("the log was purged: the catch-up was not from the log".into());
    }
    g.verify(token)?;
    g.stop()?;
    Ok(rate)
}

/// Records per second that a new member, whose log the group has purged, receives as a
/// copy of the master's environment (network restore); the copy's size in bytes; and the
/// records it holds.
fn network_restore(base: &Path, records: u64) -> BenchResult<(f64, u64, u64)> {
    let dir = tempfile::tempdir_in(base)?;
    let mut g = Group::start(dir.path(), 2, AckPolicy::SimpleMajority, records / 4)?;
    let env = g.master.env();
    insert_range(&env, 0, records)?;
    // openraft considers a snapshot as entries are applied, one at a time: write on until
    // one has let the log be purged, so that the new member needs a copy.
    let mut written = records;
    let deadline = Instant::now() + Duration::from_secs(120);
    while g.master.status().purged.is_none_or(|p| p < 100) {
        if Instant::now() > deadline {
            return Err("the log was never purged: no copy would be needed".into());
        }
        insert_range(&env, written, 100)?;
        written += 100;
    }
    let addr = free_port()?;
    let newcomer = Proc::member(dir.path(), 9, &addr, &g.group, None)?;
    let started = Instant::now();
    g.master.add_member(9, &addr, false)?;
    let token = insert_range(&env, written, 1)?;
    await_applied(&g.group, &addr, token)?;
    let rate = (written + 1) as f64 / started.elapsed().as_secs_f64();
    let copy = std::fs::metadata(dir.path().join("m9/env/beech.db"))?.len();
    g.replicas.push((addr, newcomer));
    g.verify(token)?;
    g.stop()?;
    Ok((rate, copy, written + 1))
}

pub fn run(o: Options) -> BenchResult<()> {
    let base = o.dir.clone().unwrap_or_else(std::env::temp_dir);
    let mut records = Vec::new();
    println!(
        "ha (seed 001 ScaleTest): 10-byte keys, 100-byte values, one insert per transaction, \
         {} s per run, {} runs; every replica a process on loopback",
        o.seconds, o.runs
    );
    let fsync = Summary::of(
        &(0..3)
            .map(|_| fsync_ceiling(&base))
            .collect::<BenchResult<Vec<_>>>()?,
    );
    let rtt = Summary::of(
        &(0..3)
            .map(|_| loopback_ceiling())
            .collect::<BenchResult<Vec<_>>>()?,
    );
    println!(
        "ceilings in this run: fsync {} /s (med, {}-{}); loopback round trips {} /s (med, {}-{})",
        thousands(fsync.median),
        thousands(fsync.min),
        thousands(fsync.max),
        thousands(rtt.median),
        thousands(rtt.min),
        thousands(rtt.max)
    );
    let je = match o.je {
        true => Some(crate::ha_je::Je::build(&o.je_dir)?),
        false => None,
    };
    let mut ports = free_port;
    let ms = AckPolicy::SimpleMajority;
    let (sync, nosync) = (Durability::Sync, Durability::NoSync);
    let scenario = |name, replicas, durability, ack, je| Scenario {
        name,
        replicas,
        durability,
        ack,
        je,
    };
    let je_sync = ("SYNC", "SYNC", "SIMPLE_MAJORITY");
    let je_nosync = ("NO_SYNC", "NO_SYNC", "SIMPLE_MAJORITY");
    let table2 = [
        scenario("SYNC, non-replicated", None, sync, ms, je_sync),
        scenario("NOSYNC, non-replicated", None, nosync, ms, je_nosync),
        scenario("SYNC, master-only group", Some(0), sync, ms, je_sync),
        scenario("NOSYNC, master-only group", Some(0), nosync, ms, je_nosync),
        scenario("NOSYNC, 1 replica", Some(1), nosync, ms, je_nosync),
        scenario("NOSYNC, 2 replicas", Some(2), nosync, ms, je_nosync),
        scenario(
            "SYNC, 2 replicas (replicas SYNC)",
            Some(2),
            sync,
            ms,
            je_sync,
        ),
        scenario(
            "NOSYNC, 2 replicas, ack ALL",
            Some(2),
            nosync,
            AckPolicy::All,
            ("NO_SYNC", "NO_SYNC", "ALL"),
        ),
        scenario(
            "NOSYNC, 2 replicas, ack NONE",
            Some(2),
            nosync,
            AckPolicy::None,
            ("NO_SYNC", "NO_SYNC", "NONE"),
        ),
    ];
    let part = |p: &str| o.parts.iter().any(|x| x == p);
    for p in &o.parts {
        if !["scenarios", "series", "failover", "recovery"].contains(&p.as_str()) {
            return Err(format!("unknown part {p:?}").into());
        }
    }
    let mut points: Vec<(Scenario, usize)> = Vec::new();
    for s in table2.into_iter().filter(|_| part("scenarios")) {
        for &t in &o.threads {
            points.push((s, t));
        }
    }
    for &t in o.threads.iter().filter(|_| part("series")) {
        for &r in &o.replicas {
            let s = scenario("replica series, NOSYNC", Some(r), nosync, ms, je_nosync);
            points.push((s, t));
        }
    }
    if let Some(only) = &o.only {
        points.retain(|(s, _)| s.name.contains(only.as_str()));
    }
    if !points.is_empty() {
        println!("| scenario | threads | replicas | BeechDB inserts/s: mean ± sd (median, min-max) | JE HA inserts/s | BeechDB / JE (medians) |");
        println!("|---|---|---|---|---|---|");
    }
    for (s, t) in points {
        let replicas = s.replicas.unwrap_or(0);
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..o.runs {
            ours.push(run_point(&base, s, t, o.seconds)?);
            if let Some(je) = &je {
                let p = crate::ha_je::Policies {
                    master: s.je.0,
                    replica: s.je.1,
                    ack: s.je.2,
                };
                theirs.push(crate::ha_je::run_point(
                    je, &base, s.replicas, &p, t, o.seconds, &mut ports,
                )?);
            }
        }
        let show = |runs: &[f64]| match runs.is_empty() {
            true => "-".to_string(),
            false => crate::report::cell(&Summary::of(runs)),
        };
        let ratio = match (ours.is_empty(), theirs.is_empty()) {
            (false, false) => format!(
                "{:.2}x",
                Summary::of(&ours).median / Summary::of(&theirs).median
            ),
            _ => "-".into(),
        };
        println!(
            "| {} | {t} | {replicas} | {} | {} | {ratio} |",
            s.name,
            show(&ours),
            show(&theirs)
        );
        for (engine, runs) in [("beechdb", ours), ("je", theirs)] {
            if runs.is_empty() {
                continue;
            }
            let sum = Summary::of(&runs);
            records.push(Record {
                engine,
                mode: s.name.to_string(),
                op: "insert",
                threads: t,
                replicas,
                ops_per_sec: sum.mean,
                stddev: sum.stddev,
                median: sum.median,
                min: sum.min,
                max: sum.max,
                runs,
            });
        }
    }
    let failovers = [
        ("failover after SIGKILL of the master", false),
        ("failover after SIGSTOP of the master", true),
    ];
    for (name, freeze) in failovers.into_iter().filter(|_| part("failover")) {
        let secs: Vec<f64> = (0..o.failovers)
            .map(|_| failover(&base, freeze))
            .collect::<BenchResult<_>>()?;
        let sum = Summary::of(&secs);
        println!(
            "{name}: BeechDB median {:.3} s ({:.3}-{:.3}) to the next write acknowledged",
            sum.median, sum.min, sum.max
        );
        let mut all = vec![("beechdb", secs)];
        if let Some(je) = &je {
            let secs: Vec<f64> = (0..o.failovers)
                .map(|_| crate::ha_je::failover(je, &base, freeze, &mut ports))
                .collect::<BenchResult<_>>()?;
            let sum = Summary::of(&secs);
            println!(
                "{name}: JE HA median {:.3} s ({:.3}-{:.3}) to a new master elected",
                sum.median, sum.min, sum.max
            );
            all.push(("je", secs));
        }
        for (engine, secs) in all {
            let sum = Summary::of(&secs);
            records.push(Record {
                engine,
                mode: name.to_string(),
                op: "failover_seconds",
                threads: 1,
                replicas: 2,
                ops_per_sec: sum.mean,
                stddev: sum.stddev,
                median: sum.median,
                min: sum.min,
                max: sum.max,
                runs: secs,
            });
        }
    }
    if !part("recovery") {
        return write_json(&o, &records);
    }
    let catch_up = catch_up(&base, o.backlog)?;
    let (restore, copy, held) = network_restore(&base, o.backlog)?;
    println!(
        "catch-up from the log of a replica {} records behind: {} records/s; network restore \
         of a new member (a {:.1} MiB copy of {} records): {} records/s",
        o.backlog,
        thousands(catch_up),
        copy as f64 / (1 << 20) as f64,
        thousands(held as f64),
        thousands(restore)
    );
    for (op, rate) in [("catch_up", catch_up), ("network_restore", restore)] {
        records.push(Record {
            engine: "beechdb",
            mode: format!("{} records behind", o.backlog),
            op,
            threads: 1,
            replicas: 2,
            ops_per_sec: rate,
            stddev: 0.0,
            median: rate,
            min: rate,
            max: rate,
            runs: vec![rate],
        });
    }
    write_json(&o, &records)
}

fn write_json(o: &Options, records: &[Record]) -> BenchResult<()> {
    if let Some(path) = &o.json {
        std::fs::write(path, serde_json::to_string_pretty(records)?)?;
    }
    Ok(())
}
