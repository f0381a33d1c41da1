//! A replication group of three `beech node` processes on loopback, under faults: the
//! master killed (SIGKILL) or frozen (SIGSTOP, then SIGCONT), a replica killed, while a
//! client keeps writing. After each run: every write acknowledged to the client is on the
//! master, all members converge to the same contents, and the stopped member rejoins.
//!
//! Runs: `BEECH_HA_RUNS` (default 20; 200 for the long run). A second test kills a new
//! member while it is rebuilt from a copy of the master's environment, and starts it
//! again: it must converge (`BEECH_HA_RESTORE_RUNS`, default 2).

use beechdb_repl::tcp::Client;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PATIENCE: Duration = Duration::from_secs(20);

struct Node {
    child: Child,
    args: Vec<String>,
    /// Kept open: a member writes a line or two more (`joined`), and a closed pipe would
    /// end it.
    _out: BufReader<std::process::ChildStdout>,
}

impl Node {
    fn spawn(args: Vec<String>) -> Node {
        let mut child = Command::new(env!("CARGO_BIN_EXE_beech"))
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting beech node");
        let mut line = String::new();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        out.read_line(&mut line).unwrap();
        assert!(line.contains("listening"), "beech node said {line:?}");
        Node {
            child,
            args,
            _out: out,
        }
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

    fn restart(&mut self) {
        self.kill();
        *self = Node::spawn(self.args.clone());
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `beech node` arguments for member `i + 1` of `group` in `dir`, then `extra`.
fn node_args(dir: &Path, i: usize, addr: &str, group: &str, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "node".into(),
        dir.join(format!("m{}", i + 1))
            .to_string_lossy()
            .into_owned(),
        "--id".into(),
        (i + 1).to_string(),
        "--listen".into(),
        addr.into(),
        "--group".into(),
        group.into(),
    ];
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn free_port() -> String {
    beechdb_repl::tcp::spare_loopback_addr().unwrap()
}

/// `--init`'s value for three members reached at `addrs`: `1=ADDR,2=ADDR,3=ADDR`.
fn init_arg(addrs: &[String]) -> String {
    (0..3)
        .map(|i| format!("{}={}", i + 1, addrs[i]))
        .collect::<Vec<_>>()
        .join(",")
}

/// Starts a group of three members in `dir`, member `i` listening on `listen[i]` and known
/// to the others as `reached[i]` (the same, or a proxy in front of it).
fn start_three(dir: &Path, group: &str, listen: &[String], reached: &[String]) -> Vec<Node> {
    let init = init_arg(reached);
    (0..3)
        .map(|i| Node::spawn(node_args(dir, i, &listen[i], group, &["--init", &init])))
        .collect()
}

/// Index of the member that is master, once one is and a write goes through it.
fn master(client: &Client, addrs: &[String]) -> usize {
    let deadline = Instant::now() + PATIENCE;
    loop {
        for (i, a) in addrs.iter().enumerate() {
            if client.status(a).is_ok_and(|s| s.state == "master") {
                return i;
            }
        }
        assert!(Instant::now() < deadline, "no master");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    KillMaster,
    FreezeMaster,
    KillReplica,
}

/// One run: returns the fault and the time from it to the next acknowledged write.
fn run(dir: &Path, seed: u64) -> (Fault, Duration) {
    let mut rng = StdRng::seed_from_u64(seed);
    let group = format!("ha-{seed}");
    let addrs: Vec<String> = (0..3).map(|_| free_port()).collect();
    let mut nodes = start_three(dir, &group, &addrs, &addrs);
    let mut client = Client::new(&group, &addrs).unwrap();
    let fault = [Fault::KillMaster, Fault::FreezeMaster, Fault::KillReplica][rng.gen_range(0..3)];
    let before = rng.gen_range(10..120);
    let after = rng.gen_range(10..60);
    let mut acked: Vec<u32> = Vec::new();
    let write = |client: &mut Client, i: u32, acked: &mut Vec<u32>| {
        // An error leaves the write's fate unknown: it is neither counted nor required.
        if client
            .put("kv", &i.to_be_bytes(), &seed.to_le_bytes(), PATIENCE)
            .is_ok()
        {
            acked.push(i);
        }
    };
    for i in 0..before {
        write(&mut client, i, &mut acked);
    }
    let m = master(&client, &addrs);
    let victim = match fault {
        Fault::KillReplica => (m + 1 + rng.gen_range(0..2)) % 3,
        _ => m,
    };
    let struck = Instant::now();
    match fault {
        Fault::FreezeMaster => nodes[victim].signal(libc::SIGSTOP),
        _ => nodes[victim].kill(),
    }
    write(&mut client, before, &mut acked);
    let failover = struck.elapsed();
    for i in before + 1..before + after {
        write(&mut client, i, &mut acked);
    }
    // The stopped member comes back (a frozen one is thawed, a killed one restarted).
    match fault {
        Fault::FreezeMaster => nodes[victim].signal(libc::SIGCONT),
        _ => nodes[victim].restart(),
    }
    let token = client
        .put("kv", b"last", b"x", PATIENCE)
        .expect("a write after the member came back");
    // Every member applies everything, and holds the same contents.
    let deadline = Instant::now() + PATIENCE;
    let digests: Vec<(u64, u64)> = loop {
        let d: Vec<(u64, u64)> = addrs.iter().filter_map(|a| client.digest(a).ok()).collect();
        if d.len() == 3
            && d.iter()
                .all(|&(applied, h)| applied >= token && h == d[0].1)
        {
            break d;
        }
        assert!(
            Instant::now() < deadline,
            "seed {seed} ({fault:?}): members did not converge: {d:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let m = master(&client, &addrs);
    for i in &acked {
        let v = client
            .get(&addrs[m], "kv", &i.to_be_bytes(), token)
            .unwrap();
        assert_eq!(
            v.as_deref(),
            Some(&seed.to_le_bytes()[..]),
            "seed {seed} ({fault:?}): acknowledged write {i} lost"
        );
    }
    assert!(digests.len() == 3);
    // `beech members` reports one master, everyone's positions and lag.
    let out = Command::new(env!("CARGO_BIN_EXE_beech"))
        .args(["members", "--group", &group, "--json"])
        .args(&addrs)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let rows: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        rows.iter().filter(|r| r["state"] == "master").count(),
        1,
        "{rows:?}"
    );
    assert!(
        rows.iter().all(|r| r["applied"].as_u64() >= Some(token)),
        "{rows:?}"
    );
    // `beech transfer` hands the master's role to another member, and writes follow.
    let next = (m + 1) % 3;
    let out = Command::new(env!("CARGO_BIN_EXE_beech"))
        .args([
            "transfer",
            "--group",
            &group,
            "--to",
            &(next + 1).to_string(),
        ])
        .args(&addrs)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(master(&client, &addrs), next);
    client
        .put("kv", b"after-transfer", b"x", PATIENCE)
        .expect("a write after the transfer");
    // `beech stat` on a member's directory, beside the running member: its log and its
    // environment.
    let out = Command::new(env!("CARGO_BIN_EXE_beech"))
        .args(["stat", "--json"])
        .arg(dir.join("m1"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stat: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let log = &stat["replication_log"];
    assert!(log["entries"].as_u64() > Some(0), "{stat}");
    assert!(log["history"].as_u64().is_some(), "{stat}");
    assert!(
        stat["databases"].as_array().is_some_and(|d| !d.is_empty()),
        "{stat}"
    );
    drop(nodes);
    (fault, failover)
}

#[test]
fn acknowledged_writes_survive_killed_and_frozen_members() {
    let runs: u64 = std::env::var("BEECH_HA_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let mut outcomes = Vec::new();
    for seed in 0..runs {
        let dir = tempfile::tempdir().unwrap();
        outcomes.push(run(dir.path(), seed));
    }
    for (name, which) in [
        ("master killed", Fault::KillMaster),
        ("master frozen", Fault::FreezeMaster),
        ("replica killed", Fault::KillReplica),
    ] {
        let mut times: Vec<Duration> = outcomes
            .iter()
            .filter(|(f, _)| std::mem::discriminant(f) == std::mem::discriminant(&which))
            .map(|&(_, t)| t)
            .collect();
        times.sort();
        if let (Some(median), Some(max)) = (times.get(times.len() / 2), times.last()) {
            eprintln!(
                "{name}: {} runs, time to the next acknowledged write: median {median:?}, max {max:?}",
                times.len()
            );
        }
    }
}

#[test]
fn a_member_killed_while_it_is_rebuilt_from_a_copy_recovers() {
    let runs: u64 = std::env::var("BEECH_HA_RESTORE_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    for seed in 0..runs {
        let mut rng = StdRng::seed_from_u64(seed);
        let dir = tempfile::tempdir().unwrap();
        let group = format!("restore-{seed}");
        let addrs: Vec<String> = (0..4).map(|_| free_port()).collect();
        let init = init_arg(&addrs);
        let args = |i: usize, extra: &[&str]| -> Vec<String> {
            let mut a = node_args(
                dir.path(),
                i,
                &addrs[i],
                &group,
                &["--snapshot-every", "100"],
            );
            a.extend(extra.iter().map(|s| s.to_string()));
            a
        };
        let mut nodes: Vec<Node> = (0..3)
            .map(|i| Node::spawn(args(i, &["--init", &init])))
            .collect();
        let mut client = Client::new(&group, &addrs[..3]).unwrap();
        for i in 0..1500u32 {
            client.put("kv", &i.to_be_bytes(), b"v", PATIENCE).unwrap();
        }
        // A new member joins; the log it needs is gone, so it is sent a copy. It is killed
        // at a random moment of that, then started again.
        let join = addrs[..3].join(",");
        let mut newcomer = Node::spawn(args(3, &["--join", &join, "--replica"]));
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..400)));
        newcomer.restart();
        let token = client.put("kv", b"last", b"v", PATIENCE).unwrap();
        let deadline = Instant::now() + PATIENCE;
        loop {
            let d: Vec<(u64, u64)> = addrs.iter().filter_map(|a| client.digest(a).ok()).collect();
            if d.len() == 4
                && d.iter()
                    .all(|&(applied, h)| applied >= token && h == d[0].1)
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "seed {seed}: the rebuilt member did not converge: {d:?}; it says {:?}, {:?}",
                client.digest(&addrs[3]),
                client.status(&addrs[3])
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        nodes.push(newcomer);
    }
}

/// A TCP proxy in front of one member, which the test controls: every connection to the
/// member goes through it, and it learns who connects from the connection's first frame
/// (`Hello`: the group, then the member id, last in the payload). A link that is down, from
/// one member to another, refuses new connections and closes the ones it has; clients
/// (member id 0) always pass.
struct Proxy {
    addr: String,
    /// Raised when the proxy is dropped: it then stops accepting, and its listener closes.
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        // Wakes the accepting thread, which then sees the flag.
        let _ = std::net::TcpStream::connect(&self.addr);
    }
}

/// A connection through a proxy: its number, its link, and its two ends.
type OpenConnection = (u64, (u64, u64), [std::net::TcpStream; 2]);

#[derive(Default)]
struct Links {
    /// Directed links that are down: (from, to).
    down: std::sync::Mutex<std::collections::HashSet<(u64, u64)>>,
    /// Open connections: their number, their link and handles to close them (each
    /// connection's own, removed when it ends: a long run opens many thousands).
    open: std::sync::Mutex<Vec<OpenConnection>>,
    opened: std::sync::atomic::AtomicU64,
}

impl Links {
    fn is_down(&self, link: (u64, u64)) -> bool {
        self.down.lock().unwrap().contains(&link)
    }

    /// Takes link `from` -> `to` down, closing its connections.
    fn cut(&self, from: u64, to: u64) {
        self.down.lock().unwrap().insert((from, to));
        for (_, link, ends) in self.open.lock().unwrap().iter() {
            if *link == (from, to) {
                for s in ends {
                    let _ = s.shutdown(std::net::Shutdown::Both);
                }
            }
        }
    }

    /// Connection `n` has ended.
    fn closed(&self, n: u64) {
        self.open.lock().unwrap().retain(|(m, _, _)| *m != n);
    }

    fn heal(&self) {
        self.down.lock().unwrap().clear();
    }
}

impl Proxy {
    /// A proxy for member `to`, which listens on `target`, under the shared `links`.
    fn start(to: u64, target: String, links: std::sync::Arc<Links>) -> Proxy {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = stop.clone();
        std::thread::spawn(move || {
            for inbound in listener.incoming() {
                if stopping.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let Ok(mut inbound) = inbound else { continue };
                let (links, target) = (links.clone(), target.clone());
                std::thread::spawn(move || -> std::io::Result<()> {
                    let mut hdr = [0u8; 8];
                    inbound.read_exact(&mut hdr)?;
                    let len = u32::from_le_bytes(hdr[..4].try_into().unwrap()) as usize;
                    if !(8..=4096).contains(&len) {
                        return Ok(());
                    }
                    let mut hello = vec![0u8; len];
                    inbound.read_exact(&mut hello)?;
                    let from = u64::from_le_bytes(hello[len - 8..].try_into().unwrap());
                    if links.is_down((from, to)) {
                        return Ok(());
                    }
                    let mut outbound = std::net::TcpStream::connect(&target)?;
                    outbound.set_nodelay(true)?;
                    inbound.set_nodelay(true)?;
                    outbound.write_all(&hdr)?;
                    outbound.write_all(&hello)?;
                    let n = links
                        .opened
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let ends = [inbound.try_clone()?, outbound.try_clone()?];
                    links.open.lock().unwrap().push((n, (from, to), ends));
                    let (mut a, mut b) = (inbound.try_clone()?, outbound.try_clone()?);
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut a, &mut b);
                        let _ = b.shutdown(std::net::Shutdown::Both);
                    });
                    let _ = std::io::copy(&mut outbound, &mut inbound);
                    let _ = inbound.shutdown(std::net::Shutdown::Both);
                    links.closed(n);
                    Ok(())
                });
            }
        });
        Proxy { addr, stop }
    }
}

/// Members behind proxies: the master, or a replica, is cut off from the others (both ways,
/// or only its sending side) while a client keeps writing through any member it can reach;
/// then the links heal. No two members are master in one term, the others elect a new
/// master when the old one is cut off, it rejoins as a replica, every acknowledged write is
/// on every member, and the members converge.
#[test]
fn acknowledged_writes_survive_partitions_through_a_proxy() {
    let runs: u64 = std::env::var("BEECH_HA_PARTITION_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    for seed in 0..runs {
        let mut rng = StdRng::seed_from_u64(seed);
        let dir = tempfile::tempdir().unwrap();
        let group = format!("partition-{seed}");
        let links = std::sync::Arc::new(Links::default());
        let real: Vec<String> = (0..3).map(|_| free_port()).collect();
        let proxies: Vec<Proxy> = (0..3)
            .map(|i| Proxy::start(i as u64 + 1, real[i].clone(), links.clone()))
            .collect();
        let addrs: Vec<String> = proxies.iter().map(|p| p.addr.clone()).collect();
        let _nodes = start_three(dir.path(), &group, &real, &addrs);
        let mut client = Client::new(&group, &addrs)
            .unwrap()
            .with_timeout(Duration::from_millis(500));
        let mut acked: Vec<u32> = Vec::new();
        let mut masters: std::collections::BTreeMap<u64, std::collections::BTreeSet<u64>> =
            Default::default();
        let mut write = |client: &mut Client, i: u32, acked: &mut Vec<u32>| {
            if client
                .put("kv", &i.to_be_bytes(), b"v", Duration::from_secs(3))
                .is_ok()
            {
                acked.push(i);
            }
            for a in &addrs {
                if let Ok(s) = client.status(a) {
                    if s.state == "master" {
                        masters.entry(s.term).or_default().insert(s.id);
                    }
                }
            }
        };
        for i in 0..30 {
            write(&mut client, i, &mut acked);
        }
        let old = master(&client, &addrs) as u64 + 1;
        let (cut_off, both_ways) = match rng.gen_range(0..3) {
            0 => (old, true),
            1 => (old, false),
            _ => ((old % 3) + 1, true),
        };
        for other in (1..=3u64).filter(|&o| o != cut_off) {
            links.cut(cut_off, other);
            if both_ways {
                links.cut(other, cut_off);
            }
        }
        let struck = Instant::now();
        let mut new_master = None;
        for i in 30..80 {
            write(&mut client, i, &mut acked);
            if new_master.is_none() && cut_off == old {
                new_master = (1..=3u64)
                    .filter(|&m| m != old)
                    .find(|&m| {
                        client
                            .status(&addrs[m as usize - 1])
                            .is_ok_and(|s| s.state == "master")
                    })
                    .map(|m| (m, struck.elapsed()));
            }
        }
        if cut_off == old {
            let (m, after) = new_master.expect("the cut-off master was replaced");
            eprintln!(
                "seed {seed}: master {old} cut off ({}): member {m} master after {after:?}",
                if both_ways {
                    "both ways"
                } else {
                    "its sending side"
                }
            );
        }
        links.heal();
        let token = client
            .put("kv", b"last", b"x", PATIENCE)
            .expect("a write after healing");
        let deadline = Instant::now() + PATIENCE;
        loop {
            let d: Vec<(u64, u64)> = addrs.iter().filter_map(|a| client.digest(a).ok()).collect();
            if d.len() == 3
                && d.iter()
                    .all(|&(applied, h)| applied >= token && h == d[0].1)
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "seed {seed}: no convergence: {d:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let m = master(&client, &addrs);
        for i in &acked {
            let v = client
                .get(&addrs[m], "kv", &i.to_be_bytes(), token)
                .unwrap();
            assert!(v.is_some(), "seed {seed}: acknowledged write {i} lost");
        }
        assert!(
            acked.len() >= 40,
            "seed {seed}: only {} acknowledged",
            acked.len()
        );
        for (term, ids) in &masters {
            assert_eq!(ids.len(), 1, "seed {seed}: term {term} had masters {ids:?}");
        }
        drop(proxies);
    }
}

/// A member whose file system fills up (a small tmpfs, filled by another file) stops and
/// says why; the others go on, and once the space is freed it is started again and
/// converges. Needs to mount a tmpfs: SKIPPED where that is not allowed, unless
/// `BEECH_REQUIRE_MOUNT` is set.
#[test]
fn a_member_whose_disk_fills_stops_and_rejoins_once_freed() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("small");
    std::fs::create_dir_all(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=8m", "tmpfs"])
        .arg(&mnt)
        .output();
    if !mounted.as_ref().is_ok_and(|o| o.status.success()) {
        let msg = format!("cannot mount a tmpfs here: {mounted:?}");
        assert!(std::env::var_os("BEECH_REQUIRE_MOUNT").is_none(), "{msg}");
        eprintln!("SKIPPED: {msg}");
        return;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mnt.clone());
    let group = "full-disk";
    let addrs: Vec<String> = (0..3).map(|_| free_port()).collect();
    let init = init_arg(&addrs);
    // Member 3 lives on the small file system.
    let args = |i: usize| {
        let base = if i == 2 { mnt.as_path() } else { dir.path() };
        node_args(base, i, &addrs[i], group, &["--init", &init])
    };
    let mut nodes: Vec<Node> = (0..3).map(|i| Node::spawn(args(i))).collect();
    let mut client = Client::new(group, &addrs).unwrap();
    let mut acked = Vec::new();
    for i in 0..50u32 {
        client
            .put("kv", &i.to_be_bytes(), &[1; 1000], PATIENCE)
            .unwrap();
        acked.push(i);
    }
    // Fill the rest of its file system.
    let ballast = mnt.join("ballast");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&ballast).unwrap();
        while f.write_all(&[0u8; 64 << 10]).is_ok() {}
    }
    for i in 50..400u32 {
        if client
            .put("kv", &i.to_be_bytes(), &[1; 1000], PATIENCE)
            .is_ok()
        {
            acked.push(i);
        }
    }
    // Its process stopped on its own, saying why.
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = nodes[2].child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the member on the full disk did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(3), "{status:?}");
    std::fs::remove_file(&ballast).unwrap();
    nodes[2].restart();
    let token = client.put("kv", b"last", b"x", PATIENCE).unwrap();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let d: Vec<(u64, u64)> = addrs.iter().filter_map(|a| client.digest(a).ok()).collect();
        if d.len() == 3
            && d.iter()
                .all(|&(applied, h)| applied >= token && h == d[0].1)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no convergence after the disk was freed: {d:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for i in &acked {
        assert!(client
            .get(&addrs[2], "kv", &i.to_be_bytes(), token)
            .unwrap()
            .is_some());
    }
}

/// A hot backup of a running member (`beech backup --member`), taken from a replica while a
/// client keeps writing: the copy holds every write acknowledged before the backup began,
/// opens on its own and verifies clean.
#[test]
fn a_hot_backup_of_a_running_member_under_load_holds_every_acknowledged_write() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    let dir = tempfile::tempdir().unwrap();
    let group = "backup";
    let addrs: Vec<String> = (0..3).map(|_| free_port()).collect();
    let _nodes = start_three(dir.path(), group, &addrs, &addrs);
    let acked: Arc<Mutex<Vec<(u32, u64)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (acked, stop, addrs) = (acked.clone(), stop.clone(), addrs.clone());
        std::thread::spawn(move || {
            let mut client = Client::new(group, &addrs).unwrap();
            let mut i = 0u32;
            while !stop.load(Ordering::Relaxed) {
                if let Ok(token) = client.put("kv", &i.to_be_bytes(), &[7; 200], PATIENCE) {
                    acked.lock().unwrap().push((i, token));
                }
                i += 1;
            }
        })
    };
    let deadline = Instant::now() + PATIENCE;
    while acked.lock().unwrap().len() < 300 {
        assert!(Instant::now() < deadline, "too few writes acknowledged");
        std::thread::sleep(Duration::from_millis(10));
    }
    let before: Vec<(u32, u64)> = acked.lock().unwrap().clone();
    let after = before.iter().map(|&(_, t)| t).max().unwrap();
    let client = Client::new(group, &addrs).unwrap();
    let m = master(&client, &addrs);
    let replica = &addrs[(m + 1) % 3];
    let dest = dir.path().join("copy");
    let out = Command::new(env!("CARGO_BIN_EXE_beech"))
        .args([
            "backup",
            "--member",
            "--group",
            group,
            "--after",
            &after.to_string(),
        ])
        .arg(replica)
        .arg(&dest)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert!(
        acked.lock().unwrap().len() > before.len(),
        "writes went on meanwhile"
    );
    let config = beechdb::Config::default()
        .transactional(true)
        .adopt_mode(true)
        .create(false);
    let copy = beechdb::Env::open(&dest, config).unwrap();
    assert!(copy.verify().unwrap().is_clean());
    let kv = copy.open_db("kv").unwrap();
    for (i, _) in &before {
        assert!(
            kv.get(&i.to_be_bytes()).unwrap().is_some(),
            "write {i}, acknowledged before the backup began, is not in the copy"
        );
    }
    copy.close().unwrap();
}
