//! `beech node` (run one member of a replication group as a process), `beech members` (the
//! status of a group's members, from outside), `beech transfer` (hand over the master's
//! role) and `beech backup --member` (a hot backup of a running member).
//!
//! Owns: parsing member lists, forming or joining a group from the command line. May call:
//! `beechdb_repl`. Invariant: `node` prints one line once the member listens, then runs
//! until killed; a member never forms a group it was not told to.

use beechdb_repl::tcp::{Client, WireStatus};
use beechdb_repl::{Member, MemberConfig, NodeId, Transport};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// `ID=ADDR` pairs, comma-separated.
fn members(list: &str) -> Res<Vec<(NodeId, String)>> {
    list.split(',')
        .filter(|s| !s.is_empty())
        .map(|pair| {
            let (id, addr) = pair
                .split_once('=')
                .ok_or_else(|| format!("{pair:?} is not ID=ADDRESS"))?;
            let id: NodeId = id
                .parse()
                .map_err(|_| format!("{id:?} is not a member id"))?;
            Ok((id, addr.to_string()))
        })
        .collect()
}

/// Runs member `id` of group `group` in `dir`, listening on `listen`; forms the group of
/// `init` (on its smallest id) or asks the group at `join` to add it. A copy of the
/// environment is taken every `snapshot_every` entries.
#[allow(clippy::too_many_arguments)]
pub fn run(
    dir: PathBuf,
    id: NodeId,
    listen: String,
    group: String,
    init: Option<String>,
    join: Option<String>,
    replica: bool,
    snapshot_every: u64,
) -> Res<ExitCode> {
    let member = Member::start(
        MemberConfig {
            snapshot_every,
            ..MemberConfig::new(id, dir)
        },
        Transport::Tcp {
            listen: &listen,
            group: &group,
        },
    )?;
    if let Some(list) = init {
        let all = members(&list)?;
        if !all.iter().any(|(m, _)| *m == id) {
            return Err(format!("--init does not name this member ({id})").into());
        }
        if all.iter().map(|(m, _)| *m).min() == Some(id) {
            let nodes: Vec<(NodeId, &str)> = all.iter().map(|(m, a)| (*m, a.as_str())).collect();
            // Formed already (a restart): nothing to do.
            let _ = member.initialize(&nodes);
        }
    }
    println!("member {id} of group {group:?} listening on {listen}");
    if let Some(addrs) = join {
        let addrs: Vec<String> = addrs.split(',').map(str::to_string).collect();
        ask_to_join(&group, &addrs, id, &listen, !replica)?;
        println!("member {id} joined");
    }
    // Runs until killed, or until the member stops on its own (its disk failed or filled):
    // then it says why and exits, to be restarted once the cause is gone.
    loop {
        std::thread::sleep(Duration::from_millis(200));
        if let Some(why) = member.status().stopped {
            eprintln!("member {id} stopped: {why}");
            let _ = member.shutdown();
            return Ok(ExitCode::from(3));
        }
    }
}

/// Asks the group's master (found from `addrs`) to add this member; retries for a minute.
fn ask_to_join(group: &str, addrs: &[String], id: NodeId, listen: &str, voter: bool) -> Res<()> {
    let client = Client::new(group, addrs)?;
    Ok(client.add_member(id, listen, voter, Duration::from_secs(60))?)
}

/// Hands the master's role of the group at `addrs` to member `to`.
pub fn transfer(group: &str, addrs: &[String], to: NodeId) -> Res<ExitCode> {
    let client = Client::new(group, addrs)?.with_timeout(Duration::from_secs(10));
    client.transfer_master(to, Duration::from_secs(30))?;
    println!("member {to} is master");
    Ok(ExitCode::SUCCESS)
}

/// A hot backup of the running member at `addr` into `dest`, holding commit `after`.
pub fn backup(group: &str, addr: &str, after: u64, dest: &std::path::Path) -> Res<ExitCode> {
    let client = Client::new(group, &[addr.to_string()])?;
    let applied = client.backup(addr, after, dest)?;
    println!(
        "member at {addr}: position {applied} copied to {}",
        dest.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Prints the status of the members at `addrs` (text, or JSON lines): state, master, term
/// (one more at each election), log, commit and applied positions, and lag: in commits
/// (behind the master's log, as the master last heard) and in time (since the member last
/// heard from the master, and since the master last heard from it); why a member stopped.
pub fn status(group: &str, addrs: &[String], json: bool) -> Res<ExitCode> {
    let client = Client::new(group, addrs)?;
    let statuses: Vec<(String, beechdb::Result<WireStatus>)> = addrs
        .iter()
        .map(|a| (a.clone(), client.status(a)))
        .collect();
    // The master's view of each member's acknowledged position.
    let master = statuses
        .iter()
        .filter_map(|(_, s)| s.as_ref().ok())
        .find(|s| s.state == "master");
    let behind = |s: &WireStatus| -> Option<u64> {
        let m = master?;
        match m.id == s.id {
            true => Some(0),
            false => m.acked.get(&s.id).map(|a| m.last_log.saturating_sub(*a)),
        }
    };
    let acked_ms = |s: &WireStatus| master.and_then(|m| m.acked_ms_ago.get(&s.id).copied());
    if !json {
        println!(
            "{:<22} {:>4} {:<9} {:>6} {:>6} {:>10} {:>10} {:>10} {:>8} {:>9} {:>9}",
            "address",
            "id",
            "state",
            "master",
            "term",
            "last log",
            "committed",
            "applied",
            "behind",
            "heard ms",
            "acked ms"
        );
    }
    let mut failed = false;
    for (addr, s) in &statuses {
        let dash = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
        match s {
            Ok(s) if json => println!(
                "{}",
                serde_json::json!({"address": addr, "id": s.id, "state": s.state,
                    "master": s.master, "term": s.term, "last_log": s.last_log,
                    "committed": s.committed, "applied": s.applied, "behind": behind(s),
                    "heard_ms_ago": s.heard_ms_ago, "acked_ms_ago": acked_ms(s),
                    "stopped": s.stopped})
            ),
            Ok(s) => {
                println!(
                    "{addr:<22} {:>4} {:<9} {:>6} {:>6} {:>10} {:>10} {:>10} {:>8} {:>9} {:>9}",
                    s.id,
                    s.state,
                    dash(s.master),
                    s.term,
                    s.last_log,
                    s.committed,
                    s.applied,
                    dash(behind(s)),
                    dash(s.heard_ms_ago),
                    dash(acked_ms(s))
                );
                if let Some(why) = &s.stopped {
                    println!("{addr:<22} stopped: {why}");
                }
            }
            Err(e) => {
                failed = true;
                match json {
                    true => println!(
                        "{}",
                        serde_json::json!({"address": addr, "error": e.to_string()})
                    ),
                    false => println!("{addr:<22} unreachable: {e}"),
                }
            }
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn member_lists_parse_and_bad_ones_say_why() {
        let m = super::members("1=127.0.0.1:7001,2=h:7002").unwrap();
        assert_eq!(m, vec![(1, "127.0.0.1:7001".into()), (2, "h:7002".into())]);
        assert!(super::members("1:7001")
            .unwrap_err()
            .to_string()
            .contains("ID=ADDRESS"));
        assert!(super::members("x=a")
            .unwrap_err()
            .to_string()
            .contains("not a member id"));
    }
}
