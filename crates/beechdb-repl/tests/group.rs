//! A replication group in one process, over the network the test controls: elections,
//! writes on the master only, replicas converging, failover, a member rejoining, a replica
//! rebuilt from a copy, partitions, and the bank invariant read on every member.

use beechdb::storage::MemStorage;
use beechdb::{AckPolicy, Durability, Env, Error, GroupDurability};
use beechdb_repl::net::Network;
use beechdb_repl::{Member, MemberConfig, NodeId, Transport};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(20);

fn config(dir: &Path, id: NodeId) -> MemberConfig {
    MemberConfig::new(id, dir.join(format!("m{id}")))
}

/// Starts members `ids` in `dir` on `net`, each configured by `tweak`, and forms a group.
fn group_with(
    dir: &Path,
    net: &Network,
    ids: &[NodeId],
    tweak: impl Fn(MemberConfig) -> MemberConfig,
) -> BTreeMap<NodeId, Member> {
    let members: BTreeMap<NodeId, Member> = ids
        .iter()
        .map(|&id| {
            let c = tweak(config(dir, id));
            (id, Member::start(c, Transport::Local(net)).unwrap())
        })
        .collect();
    let nodes: Vec<(NodeId, &str)> = ids.iter().map(|&id| (id, "")).collect();
    members[&ids[0]].initialize(&nodes).unwrap();
    members
}

fn group(dir: &Path, net: &Network, ids: &[NodeId]) -> BTreeMap<NodeId, Member> {
    group_with(dir, net, ids, |c| c)
}

/// Checks that every member holds what `master` holds; returns it.
fn converged(members: &BTreeMap<NodeId, Member>, master: NodeId) -> Contents {
    let want = contents(&members[&master].env());
    for m in members.values() {
        assert_eq!(contents(&m.env()), want, "member {}", m.id());
    }
    want
}

fn stop_members(members: BTreeMap<NodeId, Member>) {
    for (_, m) in members {
        m.shutdown().unwrap();
    }
}

/// The id of the member all running members agree is master, once they do.
fn master_of(members: &BTreeMap<NodeId, Member>) -> NodeId {
    let deadline = Instant::now() + WAIT;
    loop {
        let masters: Vec<NodeId> = members
            .values()
            .filter(|m| m.is_master())
            .map(Member::id)
            .collect();
        if let [m] = masters[..] {
            if members.values().all(|x| x.status().master == Some(m)) {
                return m;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no agreed master: {:?}",
            statuses(members)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn statuses(members: &BTreeMap<NodeId, Member>) -> Vec<beechdb_repl::Status> {
    members.values().map(Member::status).collect()
}

/// Every database but the marker, with every key and value.
type Contents = BTreeMap<String, Vec<(Vec<u8>, Vec<u8>)>>;

fn contents(env: &Env) -> Contents {
    let txn = env.begin_txn().unwrap();
    let mut out = BTreeMap::new();
    for name in env.db_names().unwrap() {
        if name == beechdb_repl::MARKER_DB {
            continue;
        }
        let db = env.open_db(&name).unwrap();
        out.insert(name, txn.iter(&db).map(Result::unwrap).collect());
    }
    txn.abort();
    out
}

/// Commits `key = value` in `db` on `m`, creating the database if needed; the token.
fn put(m: &Member, db: &str, key: &str, value: &str) -> beechdb::Result<u64> {
    let env = m.env();
    let db = env.open_or_create_db(db)?;
    let t = env.begin_txn()?;
    t.put(&db, key.as_bytes(), value.as_bytes())?;
    t.commit()
}

fn wait_all(members: &BTreeMap<NodeId, Member>, token: u64) {
    for m in members.values() {
        if let Err(e) = m.wait_applied(token, WAIT) {
            let statuses: Vec<_> = members.values().map(|m| m.status()).collect();
            panic!("{e}\nthe members: {statuses:#?}");
        }
    }
}

#[test]
fn a_group_elects_a_master_replicates_and_refuses_writes_on_replicas() {
    let dir = tempfile::tempdir().unwrap();
    let net = Network::new();
    let members = group(dir.path(), &net, &[1, 2, 3]);
    let master = master_of(&members);
    let mut token = 0;
    for i in 0..50 {
        token = put(
            &members[&master],
            "kv",
            &format!("k{i:03}"),
            &format!("v{i}"),
        )
        .unwrap();
    }
    wait_all(&members, token);
    let want = converged(&members, master);
    assert_eq!(want["kv"].len(), 50);
    let replica = members.keys().copied().find(|&id| id != master).unwrap();
    match put(&members[&replica], "kv", "x", "y") {
        Err(Error::NotMaster { master: Some(m) }) => assert_eq!(m, master),
        other => panic!("a write on a replica gave {other:?}"),
    }
    // Creating a database is a write too (it first asks to catch up, which a replica
    // cannot).
    match members[&replica].env().create_db("elsewhere").map(drop) {
        Err(Error::NotMaster { master: Some(m) }) => assert_eq!(m, master),
        other => panic!("creating a database on a replica gave {other:?}"),
    }
    // A database created on the master exists everywhere, under the same name.
    let token = put(&members[&master], "other", "a", "b").unwrap();
    wait_all(&members, token);
    for m in members.values() {
        assert_eq!(
            m.env()
                .open_db("other")
                .unwrap()
                .get(b"a")
                .unwrap()
                .unwrap(),
            b"b"
        );
    }
    stop_members(members);
}

#[test]
fn failover_keeps_every_acknowledged_commit_and_the_old_master_rejoins() {
    let dir = tempfile::tempdir().unwrap();
    let net = Network::new();
    let mut members = group(dir.path(), &net, &[1, 2, 3]);
    let first = master_of(&members);
    let mut acked = Vec::new();
    for i in 0..30 {
        put(&members[&first], "kv", &format!("a{i}"), "1").unwrap();
        acked.push(format!("a{i}"));
    }
    members.remove(&first).unwrap().shutdown().unwrap();
    let started = Instant::now();
    let second = master_of(&members);
    let failover = started.elapsed();
    assert_ne!(first, second);
    for i in 0..30 {
        put(&members[&second], "kv", &format!("b{i}"), "2").unwrap();
        acked.push(format!("b{i}"));
    }
    // The old master comes back as a replica and catches up.
    members.insert(
        first,
        Member::start(config(dir.path(), first), Transport::Local(&net)).unwrap(),
    );
    let token = put(&members[&second], "kv", "last", "3").unwrap();
    acked.push("last".into());
    wait_all(&members, token);
    assert_eq!(master_of(&members), second);
    let want = converged(&members, second);
    for key in &acked {
        assert!(
            want["kv"].iter().any(|(k, _)| k == key.as_bytes()),
            "{key} lost"
        );
    }
    eprintln!("failover after a clean stop of the master: {failover:?}");
    stop_members(members);
}

#[test]
fn an_isolated_master_steps_aside_and_its_unacknowledged_write_fails() {
    let dir = tempfile::tempdir().unwrap();
    let net = Network::new();
    let members = group_with(dir.path(), &net, &[1, 2, 3], |c| MemberConfig {
        ack_timeout: Duration::from_secs(1),
        ..c
    });
    let first = master_of(&members);
    put(&members[&first], "kv", "before", "1").unwrap();
    net.isolate(first);
    // Cut off from the majority, the old master cannot commit: a typed error, not a hang.
    match put(&members[&first], "kv", "cut-off", "x") {
        Err(Error::Replication(msg)) => assert!(msg.contains("may still be"), "{msg}"),
        Err(Error::NotMaster { .. }) => {}
        other => panic!("a write on an isolated master gave {other:?}"),
    }
    // The others elect a master of their own and take writes.
    let others: BTreeMap<NodeId, &Member> = members
        .iter()
        .filter(|(&id, _)| id != first)
        .map(|(&id, m)| (id, m))
        .collect();
    let deadline = Instant::now() + WAIT;
    let second = loop {
        if let Some(m) = others.values().find(|m| m.is_master()) {
            break m.id();
        }
        assert!(Instant::now() < deadline, "no new master");
        std::thread::sleep(Duration::from_millis(10));
    };
    let token = put(&members[&second], "kv", "during", "2").unwrap();
    net.heal();
    wait_all(&members, token);
    assert_eq!(master_of(&members), second);
    let want = converged(&members, second);
    // The write the old master could not commit was never applied anywhere.
    assert!(!want["kv"].iter().any(|(k, _)| k == b"cut-off"));
    assert_eq!(want["kv"].len(), 2);
    stop_members(members);
}

#[test]
fn a_member_added_after_the_log_was_removed_is_rebuilt_from_a_copy() {
    let dir = tempfile::tempdir().unwrap();
    let net = Network::new();
    let small = |id| MemberConfig {
        snapshot_every: 20,
        ..config(dir.path(), id)
    };
    let mut members = group_with(dir.path(), &net, &[1, 2, 3], |c| MemberConfig {
        snapshot_every: 20,
        ..c
    });
    let master = master_of(&members);
    for i in 0..1500 {
        put(
            &members[&master],
            "kv",
            &format!("k{i:05}"),
            &"x".repeat(i % 50),
        )
        .unwrap();
    }
    // Snapshots are taken in the background: wait until one has let the log be purged.
    let deadline = Instant::now() + WAIT;
    while members[&master].status().purged.unwrap_or(0) <= 1 {
        assert!(Instant::now() < deadline, "the log was never purged");
        std::thread::sleep(Duration::from_millis(10));
    }
    let newcomer = Member::start(small(4), Transport::Local(&net)).unwrap();
    members[&master].add_member(4, "", false).unwrap();
    members.insert(4, newcomer);
    let token = put(&members[&master], "kv", "after", "y").unwrap();
    wait_all(&members, token);
    let want = converged(&members, master);
    assert_eq!(want["kv"].len(), 1501);
    let (master_status, newcomer) = (members[&master].status(), members[&4].status());
    assert_eq!(newcomer.state, "learner");
    // The log it needed was gone: it was rebuilt from a copy of the master's environment.
    assert!(master_status.purged.unwrap_or(0) > 1, "{master_status:?}");
    assert!(newcomer.snapshot.is_some(), "{newcomer:?}");
    stop_members(members);
}

#[test]
fn a_member_without_runtime_threads_or_with_parts_out_of_range_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let net = Network::new();
    let refused = |c: MemberConfig, what: &str| match Member::start(c, Transport::Local(&net)) {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains(what), "{msg}"),
        Err(e) => panic!("gave {e}, not one about {what:?}"),
        Ok(_) => panic!("was accepted, with {what:?} out of range"),
    };
    let base = || config(dir.path(), 1);
    refused(
        MemberConfig {
            runtime_threads: 0,
            ..base()
        },
        "at least 1 thread",
    );
    for part_bytes in [0, (16 << 20) + 1] {
        refused(
            MemberConfig {
                part_bytes,
                ..base()
            },
            "part_bytes",
        );
    }
}

#[test]
fn a_member_refuses_an_environment_that_was_never_a_members() {
    let dir = tempfile::tempdir().unwrap();
    let env_dir = dir.path().join("m1/env");
    let env = Env::open(&env_dir, beechdb::Config::default().transactional(true)).unwrap();
    env.create_db("mine").unwrap().put(b"k", b"v").unwrap();
    env.close().unwrap();
    match Member::start(config(dir.path(), 1), Transport::Local(&Network::new())) {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("never a group member"), "{msg}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("an environment with data became a member"),
    }
}

/// Three members in `dir`, over TCP on loopback as group `g`, formed; their addresses.
fn tcp_group(dir: &Path) -> (Vec<String>, BTreeMap<NodeId, Member>) {
    let addrs: Vec<String> = (0..3).map(|_| free_port()).collect();
    let members: BTreeMap<NodeId, Member> = (1..=3u64)
        .map(|id| {
            let listen = &addrs[id as usize - 1];
            let t = Transport::Tcp { listen, group: "g" };
            (id, Member::start(config(dir, id), t).unwrap())
        })
        .collect();
    let nodes: Vec<(NodeId, &str)> = (1..=3u64)
        .map(|id| (id, addrs[id as usize - 1].as_str()))
        .collect();
    members[&1].initialize(&nodes).unwrap();
    (addrs, members)
}

fn free_port() -> String {
    beechdb_repl::tcp::spare_loopback_addr().unwrap()
}

#[test]
fn members_over_tcp_serve_clients_and_refuse_strangers_and_garbage() {
    use beechdb_repl::tcp::Client;
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let (addrs, members) = tcp_group(dir.path());
    let master = master_of(&members);
    // A client that starts at any member finds the master.
    let mut client = Client::new("g", &addrs).unwrap();
    let mut token = 0;
    for i in 0..20u32 {
        token = client
            .put("kv", &i.to_be_bytes(), b"v", Duration::from_secs(10))
            .unwrap();
    }
    for addr in &addrs {
        assert_eq!(
            client
                .get(addr, "kv", &7u32.to_be_bytes(), token)
                .unwrap()
                .as_deref(),
            Some(&b"v"[..])
        );
        assert!(client.status(addr).unwrap().applied >= token);
    }
    assert_eq!(
        client.status(&addrs[master as usize - 1]).unwrap().state,
        "master"
    );
    // A member (or client) of another group is refused at Hello.
    let stranger = Client::new("other", &addrs).unwrap();
    match stranger.status(&addrs[0]) {
        Err(Error::Replication(msg)) => assert!(msg.contains("of group"), "{msg}"),
        other => panic!("another group's client got {other:?}"),
    }
    // A member of the same group's name that formed a group of its own is not added.
    let loner_addr = free_port();
    let t = Transport::Tcp {
        listen: &loner_addr,
        group: "g",
    };
    let loner = Member::start(config(dir.path(), 9), t).unwrap();
    loner.initialize(&[(9, &loner_addr)]).unwrap();
    match client.add_member(9, &loner_addr, false, Duration::from_secs(1)) {
        Err(Error::Replication(msg)) => assert!(msg.contains("another group's history"), "{msg}"),
        other => panic!("a member of another history was added over TCP: {other:?}"),
    }
    loner.shutdown().unwrap();
    // Garbage and cut frames close their connection and nothing else.
    for junk in [
        &b"\x05\x00\x00\x00\x00\x00\x00\x00hello"[..],
        &[0xff; 64][..],
        &[1, 2, 3][..],
    ] {
        let mut s = std::net::TcpStream::connect(&addrs[0]).unwrap();
        s.write_all(junk).unwrap();
        drop(s);
    }
    let token = client
        .put("kv", b"after", b"junk", Duration::from_secs(10))
        .unwrap();
    wait_all(&members, token);
    let want = converged(&members, master);
    assert_eq!(want["kv"].len(), 21);
    stop_members(members);
}

#[test]
fn ack_all_waits_for_every_member_and_says_when_one_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let net = Network::new();
    let members = group_with(dir.path(), &net, &[1, 2, 3], |c| MemberConfig {
        ack: beechdb_repl::AckPolicy::All,
        ack_timeout: Duration::from_secs(1),
        ..c
    });
    let master = master_of(&members);
    // With everyone up, a commit returns once every member holds it.
    put(&members[&master], "kv", "a", "1").unwrap();
    let replica = members.keys().copied().find(|&id| id != master).unwrap();
    net.cut(master, replica);
    match put(&members[&master], "kv", "b", "2") {
        Err(Error::InsufficientAcks {
            acked: 2,
            needed: 3,
            ..
        }) => {}
        other => panic!("ack ALL with a member cut off gave {other:?}"),
    }
    // Committed on the majority all the same, and visible on the master.
    let env = members[&master].env();
    assert_eq!(
        env.open_db("kv").unwrap().get(b"b").unwrap().as_deref(),
        Some(&b"2"[..])
    );
    // Once the master has not heard from it for an election timeout, a transaction that
    // asks for every member's acknowledgement is refused when it begins; one that asks for
    // a majority's is not.
    std::thread::sleep(Duration::from_millis(400));
    let all = GroupDurability {
        master: Durability::NoSync,
        replicas: Durability::NoSync,
        ack: AckPolicy::All,
    };
    match members[&master].begin_txn(Some(all)).map(drop) {
        Err(Error::InsufficientReplicas { live: 2, needed: 3 }) => {}
        other => panic!("ack ALL with a member gone began with {other:?}"),
    }
    // The environment's own handle checks the member's default policy (ALL here) too.
    match env.begin_replicated_txn(None).map(drop) {
        Err(Error::InsufficientReplicas { live: 2, needed: 3 }) => {}
        other => panic!("Env::begin_replicated_txn with a member gone gave {other:?}"),
    }
    let majority = GroupDurability {
        ack: AckPolicy::SimpleMajority,
        ..all
    };
    let t = members[&master].begin_txn(Some(majority)).unwrap();
    t.put(&env.open_db("kv").unwrap(), b"c", b"3").unwrap();
    t.commit().unwrap();
    net.heal();
    stop_members(members);
}

#[test]
fn a_master_cut_off_from_every_member_refuses_to_create_a_database_with_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let net = Network::new();
    let members = group(dir.path(), &net, &[1, 2, 3]);
    let master = master_of(&members);
    put(&members[&master], "kv", "a", "1").unwrap();
    for &other in members.keys().filter(|&&id| id != master) {
        net.cut(master, other);
        net.cut(other, master);
    }
    // Creating a database first asks a majority whether this member is still the master
    // (a read index): nobody answers, so nothing is proposed. It is refused as a member
    // without its replicas (or, once it has stepped down, as a replica).
    let env = members[&master].env();
    match env.create_db("new").map(drop) {
        Err(Error::InsufficientReplicas { live: 1, needed: 2 } | Error::NotMaster { .. }) => {}
        other => panic!("a master cut off created a database: {other:?}"),
    }
    net.heal();
    let master = master_of(&members);
    members[&master].env().create_db("new").unwrap();
    stop_members(members);
}

#[test]
fn ack_none_returns_before_the_replicas_hold_the_commit_and_keeps_its_locks_until_applied() {
    let dir = tempfile::tempdir().unwrap();
    let net = Network::new();
    // Elections slower than the delays below: the master stays master throughout (a new
    // one would not hold the commit, which ack NONE lets it lose).
    let members = group_with(dir.path(), &net, &[1, 2, 3], |mut c| {
        c.election_timeout = (Duration::from_secs(2), Duration::from_secs(3));
        c
    });
    let master = master_of(&members);
    let m = &members[&master];
    let term = m.status().term;
    let env = m.env();
    let db = env.open_or_create_db("kv").unwrap();
    let none = GroupDurability {
        master: Durability::NoSync,
        replicas: Durability::NoSync,
        ack: AckPolicy::None,
    };
    // With both replicas slow, an ack-NONE commit returns long before a majority holds it.
    // (At least 100 ms: the second transaction below must begin before the commit applies.)
    for r in members.keys().copied().filter(|&id| id != master) {
        net.delay_between(
            master,
            r,
            Duration::from_millis(100),
            Duration::from_millis(300),
        );
    }
    let t = m.begin_txn(Some(none)).unwrap();
    t.put(&db, b"k", b"1").unwrap();
    let started = Instant::now();
    let token = t.commit().unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(250),
        "an ack-NONE commit waited {:?}",
        started.elapsed()
    );
    // Its locks are still held: a writer of the same key waits for the apply. Its snapshot,
    // taken before, lacks the commit, so it gets a conflict (first committer wins), never a
    // write over a state without it; a retry sees the value.
    let t2 = m.begin_txn(None).unwrap();
    let seen = t2.get_for_update(&db, b"k").map(|v| v.is_some());
    assert!(matches!(seen, Err(Error::Conflict)), "{seen:?}");
    t2.abort();
    m.wait_applied(token, WAIT).unwrap();
    let t3 = m.begin_txn(None).unwrap();
    let seen = t3.get_for_update(&db, b"k").unwrap();
    assert_eq!(seen.as_deref(), Some(&b"1"[..]));
    t3.put(&db, b"k", b"2").unwrap();
    let last = t3.commit().unwrap();
    net.heal();
    wait_all(&members, last);
    let want = converged(&members, master);
    assert_eq!(want["kv"], vec![(b"k".to_vec(), b"2".to_vec())]);
    // Many ack-NONE commits in a row, each its own key: all applied everywhere in the end.
    let mut last = 0;
    for i in 0..200 {
        let t = m.begin_txn(Some(none)).unwrap();
        t.put(&db, format!("n{i:03}").as_bytes(), b"v").unwrap();
        last = t.commit().unwrap();
    }
    wait_all(&members, last);
    assert_eq!(converged(&members, master)["kv"].len(), 201);
    assert_eq!(m.status().term, term, "an election came in between");
    stop_members(members);
}

#[test]
fn the_master_hands_over_on_demand_and_writes_follow() {
    let dir = tempfile::tempdir().unwrap();
    let net = Network::new();
    let members = group(dir.path(), &net, &[1, 2, 3]);
    let master = master_of(&members);
    let token = put(&members[&master], "kv", "before", "1").unwrap();
    wait_all(&members, token);
    let next = members.keys().copied().find(|&id| id != master).unwrap();
    members[&master]
        .transfer_master(next, Duration::from_secs(5))
        .unwrap();
    assert_eq!(master_of(&members), next);
    match put(&members[&master], "kv", "x", "y") {
        Err(Error::NotMaster { master: Some(m) }) => assert_eq!(m, next),
        other => panic!("a write on the old master gave {other:?}"),
    }
    let token = put(&members[&next], "kv", "after", "2").unwrap();
    wait_all(&members, token);
    assert_eq!(converged(&members, next)["kv"].len(), 2);
    // Only the master hands over, and only to a voter.
    assert!(matches!(
        members[&master].transfer_master(next, Duration::from_secs(1)),
        Err(Error::NotMaster { .. })
    ));
    assert!(matches!(
        members[&next].transfer_master(9, Duration::from_secs(1)),
        Err(Error::InvalidArgument(_))
    ));
    stop_members(members);
}

#[test]
fn read_consistency_policies_are_met_or_refused() {
    use beechdb_repl::Consistency;
    let dir = tempfile::tempdir().unwrap();
    let net = Network::new();
    let members = group(dir.path(), &net, &[1, 2, 3]);
    let master = master_of(&members);
    let replica = members.keys().copied().find(|&id| id != master).unwrap();
    let token = put(&members[&master], "kv", "k", "1").unwrap();
    let r = &members[&replica];
    let second = Duration::from_secs(5);
    // A commit token: the replica has applied it, and reads it.
    r.await_consistency(Consistency::Commit(token), second)
        .unwrap();
    assert_eq!(
        r.env().open_db("kv").unwrap().get(b"k").unwrap().as_deref(),
        Some(&b"1"[..])
    );
    // Heartbeats keep a connected replica within a second of the master.
    r.await_consistency(Consistency::TimeLag(Duration::from_secs(1)), second)
        .unwrap();
    members[&master]
        .await_consistency(Consistency::Linearizable, second)
        .unwrap();
    match r.await_consistency(Consistency::Linearizable, second) {
        Err(Error::NotMaster { master: Some(m) }) => assert_eq!(m, master),
        other => panic!("a linearizable read on a replica gave {other:?}"),
    }
    // Cut off, the replica falls behind the time lag, and says so.
    net.isolate(replica);
    std::thread::sleep(Duration::from_millis(300));
    let lag = r.await_consistency(
        Consistency::TimeLag(Duration::from_millis(100)),
        Duration::from_millis(200),
    );
    assert!(matches!(lag, Err(Error::Replication(_))), "{lag:?}");
    net.heal();
    r.await_consistency(Consistency::TimeLag(Duration::from_secs(1)), second)
        .unwrap();
    stop_members(members);
}

#[test]
fn five_members_keep_a_bank_total_through_membership_changes_under_load() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let net = Network::new();
    let mut members = group(dir.path(), &net, &[1, 2, 3, 4, 5]);
    let master = master_of(&members);
    // 10 accounts of 100 each; transfers keep the total at 1,000.
    let env = members[&master].env();
    let accounts = env.create_db("accounts").unwrap();
    let t = env.begin_txn().unwrap();
    for a in 0..10u8 {
        t.put(&accounts, &[a], &100u64.to_be_bytes()).unwrap();
    }
    let t_token = t.commit().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (env, accounts, stop) = (env.clone(), accounts.clone(), stop.clone());
        std::thread::spawn(move || {
            let (mut done, mut i) = (0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                let (from, to) = ((i % 10) as u8, ((i + 3) % 10) as u8);
                i += 1;
                let t = env.begin_txn().unwrap();
                let get = |k: u8| {
                    u64::from_be_bytes(t.get(&accounts, &[k]).unwrap().unwrap().try_into().unwrap())
                };
                let (a, b) = (get(from), get(to));
                if a == 0 {
                    t.abort();
                    continue;
                }
                t.put(&accounts, &[from], &(a - 1).to_be_bytes()).unwrap();
                t.put(&accounts, &[to], &(b + 1).to_be_bytes()).unwrap();
                if t.commit().is_ok() {
                    done += 1;
                }
            }
            done
        })
    };
    // Every member, read under each consistency policy while transfers go on, sees the
    // total in one snapshot.
    let token = t_token;
    let check_totals = |members: &BTreeMap<NodeId, Member>| {
        use beechdb_repl::Consistency;
        for m in members.values() {
            let policies = [
                Consistency::Any,
                Consistency::Commit(token),
                Consistency::TimeLag(Duration::from_secs(1)),
            ];
            for c in policies {
                m.await_consistency(c, WAIT).unwrap();
                let env = m.env();
                let Ok(db) = env.open_db("accounts") else {
                    assert_eq!(c, Consistency::Any, "member {} under {c:?}", m.id());
                    continue;
                };
                let t = env.begin_txn().unwrap();
                let total: u64 = t
                    .iter(&db)
                    .map(|kv| u64::from_be_bytes(kv.unwrap().1[..].try_into().unwrap()))
                    .sum();
                t.abort();
                // Under `Any` a replica may not have applied the deposits yet: some prefix
                // of the commits, each whole.
                let whole = total == 1000 || (c == Consistency::Any && total == 0);
                assert!(whole, "member {} under {c:?}: total {total}", m.id());
            }
        }
    };
    check_totals(&members);
    // Under load: a voter leaves, a non-voting replica joins, then becomes a voter.
    let leaving = members.keys().copied().find(|&id| id != master).unwrap();
    members[&master].remove_member(leaving).unwrap();
    members.remove(&leaving).unwrap().shutdown().unwrap();
    let newcomer = Member::start(config(dir.path(), 6), Transport::Local(&net)).unwrap();
    members[&master].add_member(6, "", false).unwrap();
    members.insert(6, newcomer);
    members[&master].add_member(6, "", true).unwrap();
    check_totals(&members);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let transfers = writer.join().unwrap();
    assert!(transfers > 0);
    let token = put(&members[&master], "kv", "end", "1").unwrap();
    wait_all(&members, token);
    let status = members[&master].status();
    assert_eq!(status.voters.len(), 5, "{status:?}");
    assert!(status.voters.contains(&6) && !status.voters.contains(&leaving));
    let want = converged(&members, master);
    let total: u64 = want["accounts"]
        .iter()
        .map(|(_, v)| u64::from_be_bytes(v[..].try_into().unwrap()))
        .sum();
    assert_eq!(total, 1000);
    stop_members(members);
}

/// The masters each term had, as sampled from every member's status while a test runs: no
/// term may have two.
#[derive(Default)]
struct MastersSeen {
    by_term: std::sync::Mutex<BTreeMap<u64, std::collections::BTreeSet<NodeId>>>,
    done: std::sync::atomic::AtomicBool,
}

impl MastersSeen {
    /// Samples until [`MastersSeen::stop`].
    fn watch(&self, members: &BTreeMap<NodeId, Member>) {
        while !self.done.load(std::sync::atomic::Ordering::Relaxed) {
            for m in members.values() {
                let s = m.status();
                if s.state == "master" {
                    self.by_term
                        .lock()
                        .unwrap()
                        .entry(s.term)
                        .or_default()
                        .insert(s.id);
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn stop(&self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Stops the sampling when dropped: also when the test fails, which would otherwise
    /// wait for the sampler forever.
    fn stopping(&self) -> impl Drop + '_ {
        struct Stop<'a>(&'a MastersSeen);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.stop();
            }
        }
        Stop(self)
    }

    fn check(&self) {
        let by_term = self.by_term.lock().unwrap();
        assert!(!by_term.is_empty(), "no master was seen");
        for (term, ids) in by_term.iter() {
            assert_eq!(ids.len(), 1, "term {term} had masters {ids:?}");
        }
    }
}

/// Commits `key` on whichever member is master now, trying each; `Ok(true)` once a commit
/// is acknowledged, `Ok(false)` when its fate is unknown (not counted, not required).
fn put_anywhere(members: &BTreeMap<NodeId, Member>, key: &str) -> bool {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        for m in members.values() {
            match put(m, "kv", key, "v") {
                Ok(_) => return true,
                // Nothing was done: try again.
                Err(
                    Error::NotMaster { .. } | Error::Conflict | Error::InsufficientReplicas { .. },
                ) => {}
                Err(Error::Replication(msg)) if msg.contains("may still") => return false,
                Err(e) => panic!("{key}: {e}"),
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// The seeds a randomised test runs: `count` of them unless the variable `var` gives
/// another count, from 0 unless `BEECH_FIRST_SEED` gives another start (a soak runs seeds
/// no default run has; the engine's seeded tests read the same variable).
fn seeds(var: &str, count: u64) -> std::ops::Range<u64> {
    let number = |name: &str| std::env::var(name).ok().and_then(|s| s.parse::<u64>().ok());
    let first = number("BEECH_FIRST_SEED").unwrap_or(0);
    first..first + number(var).unwrap_or(count)
}

#[test]
fn random_link_faults_lose_no_acknowledged_write() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    for seed in seeds("BEECH_REPL_FAULT_SEEDS", 3) {
        let dir = tempfile::tempdir().unwrap();
        let net = Network::new();
        let ids = [1, 2, 3, 4, 5];
        // On the simulated storage, as the power-cut test below.
        let members = group_with(dir.path(), &net, &ids, |c| MemberConfig {
            ack_timeout: Duration::from_secs(2),
            storage: Some(std::sync::Arc::new(beechdb::storage::MemStorage::new())),
            ..c
        });
        master_of(&members);
        let mut rng = StdRng::seed_from_u64(seed);
        let mut acked = Vec::new();
        let masters = MastersSeen::default();
        std::thread::scope(|scope| {
            scope.spawn(|| masters.watch(&members));
            let _stop = masters.stopping();
            for i in 0..60 {
                // A fault every few writes: cut, delay or lossy links, paused members, heals.
                if i % 4 == 0 {
                    let (a, b) = (ids[rng.gen_range(0..5)], ids[rng.gen_range(0..5)]);
                    match rng.gen_range(0..6) {
                        0 => net.cut(a, b),
                        1 => net.delay(a, b, Duration::from_millis(rng.gen_range(1..30))),
                        2 => net.lose(a, b, 0.3),
                        3 => net.pause(a),
                        4 => net.resume(a),
                        _ => net.heal(),
                    }
                }
                let key = format!("s{seed}-{i:03}");
                if put_anywhere(&members, &key) {
                    acked.push(key);
                }
            }
        });
        masters.check();
        net.heal();
        let master = master_of(&members);
        let token = put(&members[&master], "kv", "end", "v")
            .unwrap_or_else(|e| panic!("seed {seed}: the last put, on member {master}: {e}"));
        wait_all(&members, token);
        let want = converged(&members, master);
        for key in &acked {
            assert!(
                want["kv"].iter().any(|(k, _)| k == key.as_bytes()),
                "seed {seed}: acknowledged {key} lost"
            );
        }
        assert!(
            acked.len() > 10,
            "seed {seed}: only {} writes acknowledged",
            acked.len()
        );
        stop_members(members);
    }
}

/// Parts of transactions replicated in parts still stored in `m`'s marker database.
fn staged_parts(m: &Member) -> usize {
    let env = m.env();
    let db = env.open_db(beechdb_repl::MARKER_DB).unwrap();
    db.range(&b"staged/"[..]..&b"staged0"[..]).count()
}

#[test]
fn transactions_larger_than_an_entry_replicate_in_parts() {
    let dir = tempfile::tempdir().unwrap();
    let net = Network::new();
    let members = group_with(dir.path(), &net, &[1, 2, 3], |c| MemberConfig {
        env: beechdb::Config::default().txn_memory(64 << 10),
        part_bytes: 64 << 10,
        ..c
    });
    let master = master_of(&members);
    let env = members[&master].env();
    let db = env.open_or_create_db("big").unwrap();
    // Twenty times an entry's part size: sent in parts, applied as one commit everywhere,
    // and the parts dropped once it is.
    let t = env.begin_txn().unwrap();
    for i in 0..6000u32 {
        t.put(&db, &i.to_be_bytes(), &[7u8; 200]).unwrap();
    }
    let before = members[&master].status().last_log;
    let token = t.commit().unwrap();
    assert!(
        token - before > 15,
        "a 1.2 MB transaction took {} entries of 64 KiB parts",
        token - before
    );
    wait_all(&members, token);
    let got = converged(&members, master);
    assert_eq!(got["big"].len(), 6000);
    assert!(got["big"].iter().all(|(_, v)| v[..] == [7u8; 200]));
    for m in members.values() {
        assert_eq!(staged_parts(m), 0, "member {}", m.id());
    }
    // Deletes and overwrites in parts, then small commits, in order.
    let t = env.begin_txn().unwrap();
    for i in 0..3000u32 {
        match i % 2 {
            0 => drop(t.delete(&db, &i.to_be_bytes()).unwrap()),
            _ => t.put(&db, &i.to_be_bytes(), &[8u8; 300]).unwrap(),
        }
    }
    t.commit().unwrap();
    let token = put(&members[&master], "big", "small", "1").unwrap();
    wait_all(&members, token);
    let got = converged(&members, master);
    assert_eq!(got["big"].len(), 6000 - 1500 + 1);
    assert_eq!(got["big"][0], (1u32.to_be_bytes().to_vec(), vec![8u8; 300]));
    // A large transaction that also creates a database is refused before anything is sent.
    let t = env.begin_txn().unwrap();
    let other = t.create_db("other").unwrap();
    for i in 0..1000u32 {
        t.put(&other, &i.to_be_bytes(), &[1u8; 200]).unwrap();
    }
    match t.commit() {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("creates or removes"), "{msg}"),
        other => panic!("a large transaction with a new database gave {other:?}"),
    }
    // Writes longer than a part, even than an entry may be (32 MiB), go in pieces: one in
    // the middle of the transaction, one at its end.
    let long = |n: usize, seed: u8| -> Vec<u8> { (0..n).map(|i| (i as u8) ^ seed).collect() };
    let t = env.begin_txn().unwrap();
    for i in 50_000..52_000u32 {
        t.put(&db, &i.to_be_bytes(), &[2u8; 200]).unwrap();
    }
    t.put(&db, &50_500u32.to_be_bytes(), &long(300_000, 1))
        .unwrap();
    t.put(&db, b"zz-huge", &long(33 << 20, 2)).unwrap();
    let token = t.commit().unwrap();
    wait_all(&members, token);
    let got = converged(&members, master);
    assert!(!got.contains_key("other"));
    let big = &got["big"];
    assert_eq!(big.len(), 6000 - 1500 + 1 + 2000 + 1);
    let value = |k: &[u8]| &big.iter().find(|(key, _)| key[..] == *k).unwrap().1;
    assert!(*value(&50_500u32.to_be_bytes()) == long(300_000, 1));
    assert!(*value(b"zz-huge") == long(33 << 20, 2));
    for m in members.values() {
        assert_eq!(staged_parts(m), 0, "member {}", m.id());
    }
    stop_members(members);
}

/// Over TCP, with the default part size: a transaction of about 40 MB (more than an entry
/// may carry) reaches every member whole.
#[test]
fn a_transaction_larger_than_an_entry_crosses_tcp_in_parts() {
    let dir = tempfile::tempdir().unwrap();
    let (_, members) = tcp_group(dir.path());
    let master = master_of(&members);
    let env = members[&master].env();
    let db = env.open_or_create_db("big").unwrap();
    let before = members[&master].status().last_log;
    let t = env.begin_txn().unwrap();
    for i in 0..40_000u32 {
        t.put(&db, &i.to_be_bytes(), &vec![(i % 251) as u8; 1000])
            .unwrap();
    }
    let token = t.commit().unwrap();
    assert!(token - before >= 3, "40 MB in {} entries", token - before);
    wait_all(&members, token);
    let got = converged(&members, master);
    assert_eq!(got["big"].len(), 40_000);
    assert!(got["big"].iter().all(|(k, v)| v[..]
        == vec![(u32::from_be_bytes(k[..].try_into().unwrap()) % 251) as u8; 1000][..]));
    for m in members.values() {
        assert_eq!(staged_parts(m), 0, "member {}", m.id());
    }
    stop_members(members);
}

/// Applying a large transaction takes longer than an election timeout (the 150-300 ms
/// default), yet no election follows: the apply hands the runtime's thread over, so the
/// master's heartbeats go on meanwhile.
#[test]
fn a_long_apply_does_not_hold_heartbeats() {
    let dir = tempfile::tempdir().unwrap();
    let net = Network::new();
    let members = group_with(dir.path(), &net, &[1, 2, 3], |c| MemberConfig {
        part_bytes: 1 << 20,
        ..c
    });
    let master = master_of(&members);
    let term = members[&master].status().term;
    let env = members[&master].env();
    let db = env.open_or_create_db("big").unwrap();
    let t = env.begin_txn().unwrap();
    for i in 0..300_000u32 {
        t.put(&db, &i.to_be_bytes(), &[9u8; 100]).unwrap();
    }
    let started = Instant::now();
    let token = t.commit().unwrap();
    wait_all(&members, token);
    let took = started.elapsed();
    assert!(
        took > Duration::from_millis(300),
        "the apply took {took:?}, no longer than an election timeout: the test shows nothing"
    );
    for m in members.values() {
        assert_eq!(
            m.status().term,
            term,
            "member {}: an election during {took:?}",
            m.id()
        );
    }
    assert_eq!(converged(&members, master)["big"].len(), 300_000);
    stop_members(members);
}

/// A master cut off while it sends a transaction's parts: the commit fails, the parts the
/// group stored are dropped once the next master's term begins, nothing of the transaction
/// is applied anywhere, and the group goes on.
#[test]
fn parts_of_a_master_that_lost_its_term_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let net = Network::new();
    let members = group_with(dir.path(), &net, &[1, 2, 3], |c| MemberConfig {
        part_bytes: 16 << 10,
        ack_timeout: Duration::from_secs(2),
        ..c
    });
    let first = master_of(&members);
    put(&members[&first], "kv", "before", "1").unwrap();
    let replica = *members.keys().find(|&&id| id != first).unwrap();
    let outcome = std::thread::scope(|s| {
        let committer = s.spawn(|| {
            let env = members[&first].env();
            let db = env.open_db("kv").unwrap();
            let t = env.begin_txn().unwrap();
            for i in 0..20_000u32 {
                t.put(&db, &i.to_be_bytes(), &[3u8; 100]).unwrap();
            }
            t.commit()
        });
        // Once a replica stores a part, the master is cut off from everyone.
        let deadline = Instant::now() + WAIT;
        while staged_parts(&members[&replica]) == 0 {
            assert!(
                Instant::now() < deadline,
                "no part reached member {replica}"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        net.isolate(first);
        committer.join().unwrap()
    });
    match outcome {
        Err(Error::Replication(_)) | Err(Error::NotMaster { .. }) => {}
        other => panic!("a transaction whose master was cut off gave {other:?}"),
    }
    let others: Vec<&Member> = members.values().filter(|m| m.id() != first).collect();
    let deadline = Instant::now() + WAIT;
    let second = loop {
        if let Some(m) = others.iter().find(|m| m.is_master()) {
            break m.id();
        }
        assert!(Instant::now() < deadline, "no new master");
        std::thread::sleep(Duration::from_millis(10));
    };
    let token = put(&members[&second], "kv", "after", "2").unwrap();
    net.heal();
    wait_all(&members, token);
    let got = converged(&members, master_of(&members));
    assert_eq!(
        got["kv"].len(),
        2,
        "nothing of the cut-off transaction is applied"
    );
    for m in members.values() {
        assert_eq!(staged_parts(m), 0, "member {} kept stale parts", m.id());
    }
    stop_members(members);
}

/// Members on simulated storage (their environment and log in one `MemStorage` each) lose
/// power at random points of a stream of SYNC commits: one member, or every member at a
/// different moment. Each comes back from what its disk held (`crash_image`: the durable
/// bytes plus any part of what was not yet synced). Every commit acknowledged under
/// SIMPLE_MAJORITY is then on every member, and the members converge.
#[test]
fn power_cuts_lose_no_commit_a_majority_acknowledged() {
    power_cuts_lose_nothing_acknowledged(false, 2);
}

/// The same with a transaction larger than an entry in every round: sent in parts (kept on
/// file in the members' logs), spilled to scratch files on the master and in each apply.
/// Every one acknowledged is on every member whole.
#[test]
fn power_cuts_lose_no_large_transaction_a_majority_acknowledged() {
    power_cuts_lose_nothing_acknowledged(true, 1);
}

/// Members 1, 2 and 3 of a group formed over an in-process network, each on a simulated
/// disk of its own (`MemStorage`), configured by `tune`; every entry stays in the log (a
/// member on its own storage cannot be rebuilt from a copy).
struct OnDisks<F: Fn(MemberConfig) -> MemberConfig> {
    dir: tempfile::TempDir,
    net: Network,
    tune: F,
    disks: BTreeMap<NodeId, MemStorage>,
    members: BTreeMap<NodeId, Member>,
}

impl<F: Fn(MemberConfig) -> MemberConfig> OnDisks<F> {
    /// The group, formed, once it has a master.
    fn form(tune: F) -> Self {
        let mut g = OnDisks {
            dir: tempfile::tempdir().unwrap(),
            net: Network::new(),
            tune,
            disks: BTreeMap::new(),
            members: BTreeMap::new(),
        };
        for id in 1..=3 {
            g.disks.insert(id, MemStorage::new());
            g.members.insert(id, g.start(id));
        }
        let nodes: Vec<(NodeId, &str)> = g.members.keys().map(|&id| (id, "")).collect();
        g.members[&1].initialize(&nodes).unwrap();
        master_of(&g.members);
        g
    }

    fn start(&self, id: NodeId) -> Member {
        let c = (self.tune)(MemberConfig {
            storage: Some(std::sync::Arc::new(self.disks[&id].clone())),
            snapshot_every: 1 << 40,
            ..config(self.dir.path(), id)
        });
        Member::start(c, Transport::Local(&self.net)).unwrap()
    }

    /// Stops member `id` and starts it again on the disk `next` makes of its disk.
    fn restart_on(&mut self, id: NodeId, next: impl FnOnce(&MemStorage) -> MemStorage) {
        let _ = self.members.remove(&id).unwrap().shutdown();
        let disk = next(&self.disks[&id]);
        self.disks.insert(id, disk);
        let m = self.start(id);
        self.members.insert(id, m);
    }

    /// Cuts member `id`'s power now and starts it again from crash image `seed` of its disk.
    fn cut_power(&mut self, id: NodeId, seed: u64) {
        self.disks[&id].cut_power_after(0);
        self.restart_on(id, |d| d.crash_image(seed));
    }
}

/// NOSYNC commits may be lost by a member in a power cut (that is what NOSYNC allows), but
/// the group heals: a replica whose log lost entries it had acknowledged is brought level
/// by the master again, not sent the same refused request forever.
#[test]
fn a_replica_whose_log_lost_acknowledged_nosync_entries_catches_up() {
    let mut g = OnDisks::form(|c| MemberConfig {
        env: beechdb::Config::default().durability(Durability::NoSync),
        ..c
    });
    let master = master_of(&g.members);
    let replica = (1..=3).find(|&id| id != master).unwrap();
    let mut reverted = 0;
    for round in 0..4u64 {
        let mut token = 0;
        for i in 0..40 {
            let key = format!("r{round}-{i:02}");
            token = put(&g.members[&master], "kv", &key, "v").unwrap();
        }
        wait_all(&g.members, token);
        let held = g.members[&replica].status().last_log;
        g.cut_power(replica, round);
        if g.members[&replica].status().last_log < held {
            reverted += 1;
        }
        let token = put(&g.members[&master], "kv", &format!("r{round}-end"), "v").unwrap();
        wait_all(&g.members, token);
        converged(&g.members, master);
    }
    assert!(
        reverted > 0,
        "no power cut took entries from the replica's log"
    );
    stop_members(g.members);
}

/// `count` runs unless `BEECH_REPL_POWER_SEEDS` says otherwise.
fn power_cuts_lose_nothing_acknowledged(large: bool, count: u64) {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    for seed in seeds("BEECH_REPL_POWER_SEEDS", count) {
        eprintln!("seed {seed}");
        let mut g = OnDisks::form(|c| MemberConfig {
            ack_timeout: Duration::from_secs(2),
            env: beechdb::Config::default()
                .durability(Durability::Sync)
                .txn_memory(64 << 10),
            part_bytes: 64 << 10,
            ..c
        });
        let ids = [1, 2, 3];
        let mut rng = StdRng::seed_from_u64(seed);
        let (mut acked, mut acked_large) = (Vec::new(), Vec::new());
        for round in 0..5 {
            let victims: Vec<NodeId> = match round % 3 {
                2 => ids.to_vec(),
                _ => vec![ids[rng.gen_range(0..3)]],
            };
            for v in &victims {
                g.disks[v].cut_power_after(rng.gen_range(0..60));
            }
            for i in 0..25 {
                let key = format!("s{seed}-r{round}-{i:02}");
                if large && i == 12 {
                    if put_large_on_any(&g.members, &key) {
                        acked_large.push(key);
                    }
                } else if put_on_any(&g.members, &key, Duration::from_secs(3)) {
                    acked.push(key);
                }
            }
            for v in victims {
                g.cut_power(v, seed * 1000 + round * 10 + v);
            }
        }
        let members = g.members;
        let master = master_of(&members);
        let token = put(&members[&master], "kv", "end", "v")
            .unwrap_or_else(|e| panic!("seed {seed}: the last put, on member {master}: {e}"));
        wait_all(&members, token);
        let want = converged(&members, master);
        for key in &acked {
            assert!(
                want["kv"].iter().any(|(k, _)| k == key.as_bytes()),
                "seed {seed}: acknowledged {key} lost"
            );
        }
        assert!(
            acked.len() > 20,
            "seed {seed}: only {} acknowledged",
            acked.len()
        );
        for prefix in &acked_large {
            let n = want["big"]
                .iter()
                .filter(|(k, _)| k.starts_with(prefix.as_bytes()))
                .count();
            assert_eq!(
                n, LARGE_RECORDS,
                "seed {seed}: acknowledged {prefix} not whole"
            );
        }
        assert!(
            !large || !acked_large.is_empty(),
            "seed {seed}: no large one acknowledged"
        );
        for m in members.values() {
            assert_eq!(
                staged_parts(m),
                0,
                "seed {seed}: member {} kept parts",
                m.id()
            );
        }
        stop_members(members);
    }
}

/// Records of the large transactions of the power-cut test: about 170 KB, three entries'
/// worth of parts of 64 KiB.
const LARGE_RECORDS: usize = 1500;

/// Commits one transaction of [`LARGE_RECORDS`] records under keys `prefix/N` of database
/// `big` on whichever member is master; whether it was acknowledged.
fn put_large_on_any(members: &BTreeMap<NodeId, Member>, prefix: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        for m in members.values().filter(|m| m.is_master()) {
            let env = m.env();
            let written = (|| {
                let db = env.open_or_create_db("big")?;
                let t = env.begin_txn()?;
                for i in 0..LARGE_RECORDS {
                    t.put(&db, format!("{prefix}/{i:04}").as_bytes(), &[9u8; 100])?;
                }
                t.commit()
            })();
            match written {
                Ok(_) => return true,
                Err(Error::NotMaster { .. }) | Err(Error::Conflict) => {}
                Err(_) => return false,
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// Commits `key` on whichever member is master, for at most `patience`; whether a commit
/// was acknowledged (a failure is counted as unknown: neither required nor ruled out).
fn put_on_any(members: &BTreeMap<NodeId, Member>, key: &str, patience: Duration) -> bool {
    let deadline = Instant::now() + patience;
    while Instant::now() < deadline {
        for m in members.values().filter(|m| m.is_master()) {
            match put(m, "kv", key, "v") {
                Ok(_) => return true,
                Err(Error::NotMaster { .. }) | Err(Error::Conflict) => {}
                Err(_) => return false,
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// A member whose disk is full (every write fails with ENOSPC, simulated) stops taking part
/// without harm: the others go on (electing a new master if it was the master), nothing
/// acknowledged is lost, and once space is free again it restarts and catches up.
#[test]
fn a_member_whose_disk_fills_stops_and_catches_up_once_freed() {
    use beechdb::storage::FaultKind;
    for full_master in [false, true] {
        let mut g = OnDisks::form(|c| MemberConfig {
            ack_timeout: Duration::from_secs(2),
            ..c
        });
        let master = master_of(&g.members);
        let full = match full_master {
            true => master,
            false => (1..=3).find(|&id| id != master).unwrap(),
        };
        let mut acked = Vec::new();
        for i in 0..20 {
            let key = format!("before-{i:02}");
            assert!(put_on_any(&g.members, &key, WAIT), "{key}");
            acked.push(key);
        }
        // From now on every write to its disk fails.
        for nth in 1..=100_000 {
            g.disks[&full].inject_fault(FaultKind::Write, nth, libc::ENOSPC);
        }
        for i in 0..40 {
            let key = format!("full-{i:02}");
            if put_on_any(&g.members, &key, Duration::from_secs(5)) {
                acked.push(key);
            }
        }
        assert!(
            acked.len() >= 50,
            "the others stopped too: {} acknowledged",
            acked.len()
        );
        let stopped = g.members[&full].status();
        assert_eq!(stopped.state, "shutdown", "{stopped:?}");
        let why = stopped.stopped.unwrap_or_default();
        assert!(why.contains("No space left"), "{why}");
        // Space is freed: the member starts again (a new process on the same disk).
        g.disks[&full].clear_faults();
        g.restart_on(full, MemStorage::restart_process);
        let members = g.members;
        let master = master_of(&members);
        let token = put(&members[&master], "kv", "end", "v").unwrap();
        wait_all(&members, token);
        let want = converged(&members, master);
        for key in &acked {
            assert!(
                want["kv"].iter().any(|(k, _)| k == key.as_bytes()),
                "acknowledged {key} lost (full master: {full_master})"
            );
        }
        stop_members(members);
    }
}

/// A member with a history of its own (it formed a group alone and committed there) that is
/// added to another group is refused with a typed error, and nothing of either history is
/// lost or mixed.
#[test]
fn a_member_with_a_diverged_log_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let net = Network::new();
    let members = group(dir.path(), &net, &[1, 2, 3]);
    let master = master_of(&members);
    let token = put(&members[&master], "kv", "a", "1").unwrap();
    wait_all(&members, token);
    // Member 4 forms a group of its own and commits there.
    let loner = Member::start(config(dir.path(), 4), Transport::Local(&net)).unwrap();
    loner.initialize(&[(4, "")]).unwrap();
    let deadline = Instant::now() + WAIT;
    while !loner.is_master() {
        assert!(Instant::now() < deadline, "the loner was never master");
        std::thread::sleep(Duration::from_millis(5));
    }
    put(&loner, "mine", "x", "y").unwrap();
    match members[&master].add_member(4, "", false) {
        Err(Error::InvalidArgument(msg)) => {
            assert!(msg.contains("another group's history"), "{msg}")
        }
        other => panic!("a member with another history was added: {other:?}"),
    }
    let token = put(&members[&master], "kv", "b", "2").unwrap();
    wait_all(&members, token);
    let want = converged(&members, master);
    assert_eq!(want["kv"].len(), 2);
    assert!(!want.contains_key("mine"));
    assert_eq!(contents(&loner.env())["mine"].len(), 1);
    loner.shutdown().unwrap();
    stop_members(members);
}

/// A master answers the entry-less appends that only carry a commit index itself
/// (`commit_only.rs`); the replicas must still learn the last commit at once, not at the
/// next heartbeat.
#[test]
fn replicas_learn_the_last_commit_without_waiting_for_a_heartbeat() {
    let dir = tempfile::tempdir().unwrap();
    let net = Network::new();
    let heartbeat = Duration::from_secs(2);
    let members = group_with(dir.path(), &net, &[1, 2, 3], |mut c| {
        c.heartbeat = heartbeat;
        c.election_timeout = (Duration::from_secs(4), Duration::from_secs(6));
        c
    });
    let master = master_of(&members);
    let m = &members[&master];
    for round in 0..3 {
        let mut token = 0;
        for i in 0..100 {
            token = put(m, "t", &format!("{round}-{i}"), "v").unwrap();
        }
        let committed = Instant::now();
        wait_all(&members, token);
        let learned = committed.elapsed();
        assert!(
            learned < heartbeat / 2,
            "round {round}: the replicas applied the last commit after {learned:?}"
        );
    }
    converged(&members, master);
    stop_members(members);
}

/// A member added the moment a new group's master is elected (its first membership still
/// being committed) joins: `add_member` waits for the membership to settle rather than
/// failing as a change already under way (seen once in CI, through the benchmark).
#[test]
fn members_added_the_moment_a_master_is_elected_join() {
    for round in 0..10 {
        let dir = tempfile::tempdir().unwrap();
        let net = Network::new();
        let members: BTreeMap<NodeId, Member> = [1, 2, 3]
            .into_iter()
            .map(|id| {
                let m = Member::start(config(dir.path(), id), Transport::Local(&net)).unwrap();
                (id, m)
            })
            .collect();
        members[&1].initialize(&[(1, "")]).unwrap();
        let deadline = Instant::now() + WAIT;
        while !members[&1].is_master() {
            assert!(Instant::now() < deadline, "round {round}: no master");
            std::thread::yield_now();
        }
        members[&1].add_member(2, "", true).unwrap();
        members[&1].add_member(3, "", false).unwrap();
        let token = put(&members[&1], "d", "k", "v").unwrap();
        wait_all(&members, token);
        converged(&members, 1);
        stop_members(members);
    }
}
