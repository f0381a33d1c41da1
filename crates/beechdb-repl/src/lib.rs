//! BeechDB high availability: a replication group of environments, one of them the master,
//! on the openraft consensus library.
//!
//! Owns: [`Member`] (one environment of a group: its Raft node, its replicated log, its
//! state machine), the group's vocabulary ([`MemberConfig`], [`Status`]) and the mapping of
//! openraft's outcomes onto the engine's errors. May call: the engine (`beechdb`), openraft,
//! tokio. Invariants: a commit reaches the trees of any member, the master included, only
//! once the group has committed it (visibility equals Raft commit), and every member
//! applies the same commits in the same order; a member's environment records, in the same
//! local commit as the data, the last log position it applied, so a restart resumes from
//! exactly there.
//!
//! Layout of a member's directory: `env/` is the environment, `raft/` the replicated log
//! (see [`log_store`]); `env.incoming/` exists only while a copy from the master is being
//! installed (see [`state`]).

// openraft's error types are large by its design; its traits fix the signatures.
#![allow(clippy::result_large_err)]

mod log_store;
pub mod net;
mod state;
pub mod tcp;

pub use state::{digest, MARKER_DB};

/// Entry points for fuzzing the decoders of what replication reads from outside: each
/// returns a typed error or succeeds, and never panics.
pub mod fuzzing {
    use std::path::Path;

    /// A member's log file holding `bytes`, opened from directory `dir`.
    pub fn open_log(dir: &Path, bytes: &[u8]) -> beechdb::Result<()> {
        std::fs::write(dir.join("log"), bytes).map_err(|e| beechdb::Error::Io {
            context: "writing the log".into(),
            source: e,
        })?;
        crate::log_store::LogStore::open(dir).map(drop)
    }

    /// A received copy of an environment, unpacked into the new directory `dir`.
    pub fn unpack_copy(bytes: &[u8], dir: &Path) -> beechdb::Result<()> {
        crate::state::unpack(bytes, dir)
    }

    /// A frame arriving on a member's connection.
    pub fn read_frame(bytes: &[u8]) -> std::io::Result<()> {
        crate::tcp::check_frame(bytes)
    }
}

use beechdb::{Durability, Env, Error, Result};
use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, RaftMetrics, ServerState};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Cursor;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A member's id in its group.
pub type NodeId = u64;

/// One entry of the replicated log: the commits of transactions that reached the master
/// together (group commit), each as the engine encoded it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Request {
    /// The encoded write sets (see `beechdb::Replicator`), in the order they are applied.
    pub commits: Vec<Vec<u8>>,
    /// Whether the log must reach disk (fsync) before a member acknowledges it: some
    /// commit's durability was [`Durability::Sync`].
    pub sync: bool,
}

/// What applying an entry gave: the LSN of the local commit on the member that applied it,
/// and for each of its commits why it was refused, if it was (every member refuses alike).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Response {
    pub lsn: u64,
    pub refused: Vec<Option<Refusal>>,
}

/// Why every member refused a committed entry's writes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum Refusal {
    /// It writes a database that an earlier entry removed.
    DbRemoved,
    /// It creates a database whose name an earlier entry took.
    DbExists(String),
    /// It creates a database with an id an earlier entry took.
    Conflict,
}

impl Refusal {
    pub(crate) fn of(e: &Error) -> Option<Refusal> {
        match e {
            Error::DbRemoved => Some(Refusal::DbRemoved),
            Error::DbExists(n) => Some(Refusal::DbExists(n.clone())),
            Error::Conflict => Some(Refusal::Conflict),
            _ => None,
        }
    }

    fn error(self) -> Error {
        match self {
            Refusal::DbRemoved => Error::DbRemoved,
            Refusal::DbExists(n) => Error::DbExists(n),
            Refusal::Conflict => Error::Conflict,
        }
    }
}

openraft::declare_raft_types!(
    /// The group's types: entries are engine commits; snapshots are copies of an
    /// environment's durable checkpoint.
    pub(crate) TypeConfig:
        D = Request,
        R = Response,
        NodeId = NodeId,
        Node = BasicNode,
);

/// The openraft node of a member.
pub(crate) type Raft = openraft::Raft<TypeConfig>;

/// Which members must have an entry before its commit returns on the master (JE's
/// `ReplicaAckPolicy`). JE's `NONE` is not offered: here a commit becomes visible only
/// once a majority holds it (there is no unreplicated state to roll back after a
/// failover), so returning earlier would let the next transaction read data older than a
/// commit that already returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckPolicy {
    /// A majority of the voting members, the master included: Raft's commit.
    SimpleMajority,
    /// Every voting member. A commit that a majority holds but some member does not
    /// acknowledge in time fails with [`Error::Replication`] saying it is committed.
    All,
}

/// What a read on a member must see (JE's `ReplicaConsistencyPolicy`), waited for by
/// [`Member::await_consistency`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consistency {
    /// Whatever the member has applied (JE: NoConsistencyRequiredPolicy).
    Any,
    /// At least the commit with this token (what a commit on the master returned; JE:
    /// CommitPointConsistencyPolicy).
    Commit(u64),
    /// No further behind the master than this (JE: TimeConsistencyPolicy): the member has
    /// heard from the master within it and applied everything the master had committed
    /// then. Always met on the master.
    TimeLag(Duration),
    /// Everything committed anywhere before the wait began: on the master only, through a
    /// round of heartbeats confirming it is still master (a read index).
    Linearizable,
}

/// When a member last heard from a master that accepted it, and the commit index that
/// master had then (for [`Consistency::TimeLag`]).
#[derive(Default)]
pub(crate) struct Heard {
    /// Nanoseconds since [`Heard::epoch`]; 0: never.
    at: std::sync::atomic::AtomicU64,
    commit: std::sync::atomic::AtomicU64,
}

impl Heard {
    fn epoch() -> Instant {
        static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        *EPOCH.get_or_init(Instant::now)
    }

    /// Records an append from the master that the member accepted.
    pub(crate) fn record(&self, leader_commit: Option<openraft::LogId<NodeId>>) {
        use std::sync::atomic::Ordering::Relaxed;
        let now = Heard::epoch().elapsed().as_nanos() as u64;
        self.commit
            .fetch_max(leader_commit.map_or(0, |l| l.index), Relaxed);
        self.at.fetch_max(now.max(1), Relaxed);
    }

    /// How long ago the master was heard from, and its commit index then.
    fn last(&self) -> Option<(Duration, u64)> {
        use std::sync::atomic::Ordering::Relaxed;
        let at = self.at.load(Relaxed);
        (at > 0).then(|| {
            let ago = Heard::epoch()
                .elapsed()
                .saturating_sub(Duration::from_nanos(at));
            (ago, self.commit.load(Relaxed))
        })
    }
}

/// How one member runs.
#[derive(Debug, Clone)]
pub struct MemberConfig {
    /// This member's id, unique in the group.
    pub id: NodeId,
    /// The member's directory (created if missing): its environment and its log.
    pub dir: PathBuf,
    /// The environment's configuration (transactional; its durability setting is not used:
    /// a commit's durability is decided by the log, see [`Request::sync`]).
    pub env: beechdb::Config,
    /// Heartbeats from the master, and the range of election timeouts of the others.
    pub heartbeat: Duration,
    pub election_timeout: (Duration, Duration),
    /// A copy of the environment (a snapshot) is taken after this many log entries, and
    /// the log before it is removed: a replica further behind is rebuilt from a copy.
    pub snapshot_every: u64,
    /// How long a commit on the master waits for the group to commit it before failing
    /// with [`Error::Replication`] (the commit may still be applied later).
    pub ack_timeout: Duration,
    /// The acknowledgements a commit on this member, when master, waits for.
    pub ack: AckPolicy,
}

impl MemberConfig {
    /// A configuration with defaults suited to a local network: heartbeats every 50 ms,
    /// elections after 150-300 ms of silence, a snapshot every 50,000 entries.
    pub fn new(id: NodeId, dir: impl Into<PathBuf>) -> MemberConfig {
        MemberConfig {
            id,
            dir: dir.into(),
            env: beechdb::Config::default(),
            heartbeat: Duration::from_millis(50),
            election_timeout: (Duration::from_millis(150), Duration::from_millis(300)),
            snapshot_every: 50_000,
            ack_timeout: Duration::from_secs(10),
            ack: AckPolicy::SimpleMajority,
        }
    }
}

/// How a member reaches the others.
pub enum Transport<'a> {
    /// Members of this process, on a network the caller controls (tests).
    Local(&'a net::Network),
    /// TCP: this member listens on `listen` (its address in the group) and belongs to the
    /// group named `group` (connections from other groups are refused).
    Tcp { listen: &'a str, group: &'a str },
}

/// A member's view of its group, from its last metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub id: NodeId,
    /// `master`, `replica`, `candidate`, `learner` (a non-voting replica) or `shutdown`.
    pub state: &'static str,
    /// The member this one believes to be master.
    pub master: Option<NodeId>,
    pub term: u64,
    /// The last log position this member has and has applied.
    pub last_log: u64,
    pub applied: u64,
    /// Voting members and non-voting replicas, as this member knows them.
    pub voters: BTreeSet<NodeId>,
    pub learners: BTreeSet<NodeId>,
    /// The last entry the member's latest copy of its environment covers, and the last
    /// entry removed from its log.
    pub snapshot: Option<u64>,
    pub purged: Option<u64>,
    /// On a replica: milliseconds since it last accepted an append (or heartbeat) from
    /// the master, its lag in time.
    pub heard_ms_ago: Option<u64>,
    /// On the master: each other member's log position as it last acknowledged it (its
    /// lag in commits is `last_log` minus this).
    pub acked: BTreeMap<NodeId, u64>,
}

/// One member of a replication group, running: an environment whose commits go through
/// the group. Writes succeed on the master only ([`Error::NotMaster`] elsewhere, naming the
/// master); reads work on every member.
pub struct Member {
    id: NodeId,
    /// The in-process network, which the member leaves when it stops.
    net: Option<net::Network>,
    raft: Raft,
    sm: Arc<state::StateMachine>,
    runtime: Arc<tokio::runtime::Runtime>,
    heard: Arc<Heard>,
}

/// Commits in an entry at most: a bound on an entry's size and on a batch's latency.
const BATCH_COMMITS: usize = 256;

/// A commit waiting to be proposed, and where its outcome goes.
struct Proposal {
    commit: Vec<u8>,
    sync: bool,
    reply: std::sync::mpsc::SyncSender<Result<u64>>,
}

/// Takes over the environment's commits: each goes to the proposer, which puts the commits
/// that arrive while the previous entry is being committed into one entry (group commit),
/// and returns once the group has committed and this member applied it.
struct CommitPath {
    raft: Raft,
    runtime: tokio::runtime::Handle,
    proposals: tokio::sync::mpsc::UnboundedSender<Proposal>,
    ack_timeout: Duration,
    ack: AckPolicy,
}

/// The proposer: one entry in flight at a time, holding every commit that queued meanwhile.
async fn propose(raft: Raft, mut queue: tokio::sync::mpsc::UnboundedReceiver<Proposal>) {
    while let Some(first) = queue.recv().await {
        let mut batch = vec![first];
        while batch.len() < BATCH_COMMITS {
            match queue.try_recv() {
                Ok(p) => batch.push(p),
                Err(_) => break,
            }
        }
        let request = Request {
            sync: batch.iter().any(|p| p.sync),
            commits: batch
                .iter_mut()
                .map(|p| std::mem::take(&mut p.commit))
                .collect(),
        };
        match raft.client_write(request).await {
            Ok(r) => {
                let index = r.log_id.index;
                for (p, refused) in batch.into_iter().zip(r.data.refused) {
                    let outcome = match refused {
                        None => Ok(index),
                        Some(refusal) => Err(refusal.error()),
                    };
                    let _ = p.reply.try_send(outcome);
                }
            }
            Err(e) => {
                for p in batch {
                    let _ = p.reply.try_send(Err(write_error(&e)));
                }
            }
        }
    }
}

impl beechdb::Replicator for CommitPath {
    fn replicate(&self, commit: &[u8], d: Durability) -> Result<u64> {
        let started = Instant::now();
        let (reply, outcome) = std::sync::mpsc::sync_channel(1);
        let p = Proposal {
            commit: commit.to_vec(),
            sync: d == Durability::Sync,
            reply,
        };
        self.proposals
            .send(p)
            .map_err(|_| Error::Replication("this member has stopped".into()))?;
        let wait = self.ack_timeout;
        let index = outcome.recv_timeout(wait).map_err(|_| {
            Error::Replication(format!(
                "the group did not commit this transaction within {wait:?} (no majority \
                 reachable?); it may still be committed and applied later"
            ))
        })??;
        if self.ack == AckPolicy::All {
            let left = wait.saturating_sub(started.elapsed());
            let raft = self.raft.clone();
            let everyone = self.runtime.block_on(async move {
                raft.wait(Some(left))
                    .metrics(|m| acked_by_all(m, index), "every member's acknowledgement")
                    .await
            });
            if everyone.is_err() {
                return Err(Error::Replication(format!(
                    "commit {index} is committed and applied on a majority, but not every \
                     member acknowledged it within {wait:?} (JE: InsufficientAcksException)"
                )));
            }
        }
        Ok(index)
    }

    fn catch_up(&self) -> Result<()> {
        let raft = self.raft.clone();
        let read = self
            .runtime
            .block_on(async move { raft.ensure_linearizable().await });
        read.map(drop).map_err(|e| match e {
            RaftError::APIError(openraft::error::CheckIsLeaderError::ForwardToLeader(f)) => {
                Error::NotMaster {
                    master: f.leader_id,
                }
            }
            e => Error::Replication(format!("{e}; the commit was not made")),
        })
    }
}

/// Whether every voting member's log holds entry `index` (on the master's metrics).
fn acked_by_all(m: &RaftMetrics<NodeId, BasicNode>, index: u64) -> bool {
    let Some(matched) = &m.replication else {
        return false;
    };
    m.membership_config.membership().voter_ids().all(|v| {
        v == m.id
            || matched
                .get(&v)
                .copied()
                .flatten()
                .is_some_and(|l| l.index >= index)
    })
}

/// The engine's error for an openraft write failure.
fn write_error(e: &RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>) -> Error {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => Error::NotMaster {
            master: f.leader_id,
        },
        RaftError::APIError(ClientWriteError::ChangeMembershipError(c)) => {
            Error::InvalidArgument(format!("membership change refused: {c}"))
        }
        RaftError::Fatal(f) => Error::Replication(format!(
            "this member stopped ({f}); the commit may yet be applied by the group"
        )),
    }
}

impl Member {
    /// Starts a member: opens (or creates) its environment and log under
    /// `config.dir`, and joins the network. A new member knows no group until
    /// [`Member::initialize`] is called on one member, or a master adds it.
    pub fn start(config: MemberConfig, transport: Transport) -> Result<Member> {
        let runtime = Arc::new(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name(format!("beechdb-repl-{}", config.id))
                .enable_all()
                .build()
                .map_err(|e| Error::Io {
                    context: "starting the replication runtime".into(),
                    source: e,
                })?,
        );
        std::fs::create_dir_all(&config.dir).map_err(|e| Error::Io {
            context: format!("creating {}", config.dir.display()),
            source: e,
        })?;
        let log = log_store::LogStore::open(&config.dir.join("raft"))?;
        let sm = Arc::new(state::StateMachine::open(&config.dir, config.env.clone())?);
        let raft_config = openraft::Config {
            cluster_name: "beechdb".into(),
            heartbeat_interval: config.heartbeat.as_millis() as u64,
            election_timeout_min: config.election_timeout.0.as_millis() as u64,
            election_timeout_max: config.election_timeout.1.as_millis() as u64,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(config.snapshot_every),
            max_in_snapshot_log_to_keep: 1000,
            ..Default::default()
        }
        .validate()
        .map_err(|e| Error::InvalidArgument(format!("replication settings: {e}")))?;
        let raft_config = Arc::new(raft_config);
        let heard = Arc::new(Heard::default());
        let started = match &transport {
            Transport::Local(net) => {
                let endpoint = net.endpoint(config.id);
                runtime.block_on(Raft::new(config.id, raft_config, endpoint, log, sm.clone()))
            }
            Transport::Tcp { group, .. } => {
                let endpoint = tcp::TcpEndpoint {
                    group: group.to_string(),
                    from: config.id,
                };
                runtime.block_on(Raft::new(config.id, raft_config, endpoint, log, sm.clone()))
            }
        };
        let raft = started
            .map_err(|e| Error::Replication(format!("starting member {}: {e}", config.id)))?;
        let net = match transport {
            Transport::Local(net) => {
                net.register(config.id, raft.clone(), heard.clone());
                Some(net.clone())
            }
            Transport::Tcp { listen, group } => {
                let listener = runtime
                    .block_on(tokio::net::TcpListener::bind(listen))
                    .map_err(|e| Error::Io {
                        context: format!("listening on {listen}"),
                        source: e,
                    })?;
                let server = Arc::new(tcp::Server {
                    group: group.to_string(),
                    raft: raft.clone(),
                    sm: sm.clone(),
                    ack_timeout: config.ack_timeout,
                    heard: heard.clone(),
                });
                runtime.spawn(tcp::serve(listener, server));
                None
            }
        };
        let member = Member {
            id: config.id,
            net,
            raft,
            sm,
            runtime,
            heard,
        };
        let (proposals, queue) = tokio::sync::mpsc::unbounded_channel();
        member.runtime.spawn(propose(member.raft.clone(), queue));
        member.sm.set_replicator(Some(Arc::new(CommitPath {
            raft: member.raft.clone(),
            runtime: member.runtime.handle().clone(),
            proposals,
            ack_timeout: config.ack_timeout,
            ack: config.ack,
        })))?;
        Ok(member)
    }

    /// This member's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The environment: reads here, writes through it on the master. After this member is
    /// rebuilt from a copy of the master's environment, handles taken before fail with
    /// [`Error::Closed`]: take new ones here.
    pub fn env(&self) -> Env {
        self.sm.env()
    }

    /// Makes a new group of the voting members `members` (ids and addresses; addresses are
    /// not used on a local network), this one among them: call it once, on one member,
    /// when the group is first formed.
    pub fn initialize(&self, members: &[(NodeId, &str)]) -> Result<()> {
        let nodes: BTreeMap<NodeId, BasicNode> = members
            .iter()
            .map(|&(id, addr)| (id, BasicNode::new(addr)))
            .collect();
        let raft = self.raft.clone();
        self.runtime
            .block_on(async move { raft.initialize(nodes).await })
            .map_err(|e| Error::InvalidArgument(format!("forming the group: {e}")))
    }

    /// Adds member `id` (already started, at `addr`) to the group, as a voter or as a
    /// non-voting replica; on the master only. Returns once it has caught up and the change
    /// is committed.
    pub fn add_member(&self, id: NodeId, addr: &str, voter: bool) -> Result<()> {
        let raft = self.raft.clone();
        let addr = addr.to_string();
        self.runtime
            .block_on(async move { add_member(&raft, id, addr, voter).await })
    }

    /// Removes member `id` from the group (voter or not); on the master only.
    pub fn remove_member(&self, id: NodeId) -> Result<()> {
        let raft = self.raft.clone();
        self.runtime.block_on(async move {
            let m = raft.metrics().borrow().membership_config.clone();
            let voters: BTreeSet<NodeId> =
                m.membership().voter_ids().filter(|&v| v != id).collect();
            raft.change_membership(voters, false)
                .await
                .map_err(|e| write_error(&e))?;
            let learners: BTreeSet<NodeId> = [id].into();
            raft.change_membership(openraft::ChangeMembers::RemoveNodes(learners), false)
                .await
                .map_err(|e| write_error(&e))
                .map(drop)
        })
    }

    fn metrics(&self) -> RaftMetrics<NodeId, BasicNode> {
        self.raft.metrics().borrow().clone()
    }

    /// This member's view of the group.
    pub fn status(&self) -> Status {
        status_of(&self.raft, &self.heard)
    }

    /// Whether this member is the master now.
    pub fn is_master(&self) -> bool {
        self.metrics().state == ServerState::Leader
    }

    /// Waits until this member has applied the commit with token `token` (what a commit
    /// returned on the master), so that reads here see it; a typed error after `timeout`.
    pub fn wait_applied(&self, token: u64, timeout: Duration) -> Result<()> {
        let raft = self.raft.clone();
        self.runtime
            .block_on(async move {
                raft.wait(Some(timeout))
                    .applied_index_at_least(Some(token), "read consistency")
                    .await
            })
            .map(drop)
            .map_err(|e| {
                Error::Replication(format!(
                    "member {} has not applied commit {token} within {timeout:?}: {e}",
                    self.id
                ))
            })
    }

    /// Waits until reads on this member meet `c`, for at most `timeout`; a typed error
    /// otherwise ([`Error::NotMaster`] for a linearizable read on a replica).
    pub fn await_consistency(&self, c: Consistency, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        match c {
            Consistency::Any => Ok(()),
            Consistency::Commit(token) => self.wait_applied(token, timeout),
            Consistency::Linearizable => {
                let raft = self.raft.clone();
                let read = self.runtime.block_on(async move {
                    tokio::time::timeout(timeout, raft.ensure_linearizable()).await
                });
                match read {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(RaftError::APIError(
                        openraft::error::CheckIsLeaderError::ForwardToLeader(f),
                    ))) => Err(Error::NotMaster {
                        master: f.leader_id,
                    }),
                    Ok(Err(e)) => Err(Error::Replication(format!("linearizable read: {e}"))),
                    Err(_) => Err(Error::Replication(format!(
                        "linearizable read: a majority did not confirm this master within \
                         {timeout:?}"
                    ))),
                }
            }
            Consistency::TimeLag(lag) => loop {
                if self.is_master() {
                    return Ok(());
                }
                if let Some((ago, commit)) = self.heard.last() {
                    if ago <= lag && self.status().applied >= commit {
                        return Ok(());
                    }
                }
                if Instant::now() >= deadline {
                    return Err(Error::Replication(format!(
                        "member {} is not within {lag:?} of the master after {timeout:?}",
                        self.id
                    )));
                }
                std::thread::sleep(Duration::from_millis(1));
            },
        }
    }

    /// Stops this member: it leaves the network (others see it as unreachable) and its
    /// environment is closed, everything applied made durable.
    pub fn shutdown(self) -> Result<()> {
        if let Some(net) = &self.net {
            net.leave(self.id);
        }
        let raft = self.raft.clone();
        let _ = self.runtime.block_on(async move { raft.shutdown().await });
        self.sm.close()
    }
}

/// Adds member `id` at `addr` to the group of the master `raft`.
pub(crate) async fn add_member(raft: &Raft, id: NodeId, addr: String, voter: bool) -> Result<()> {
    raft.add_learner(id, BasicNode::new(addr), true)
        .await
        .map_err(|e| write_error(&e))?;
    if voter {
        let mut voters = raft
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .voter_ids()
            .collect::<BTreeSet<_>>();
        voters.insert(id);
        raft.change_membership(voters, true)
            .await
            .map_err(|e| write_error(&e))?;
    }
    Ok(())
}

/// The status of the member whose node is `raft`.
pub(crate) fn status_of(raft: &Raft, heard: &Heard) -> Status {
    let m = raft.metrics().borrow().clone();
    let membership = m.membership_config.membership();
    Status {
        id: m.id,
        state: match m.state {
            ServerState::Leader => "master",
            ServerState::Follower => "replica",
            ServerState::Candidate => "candidate",
            ServerState::Learner => "learner",
            ServerState::Shutdown => "shutdown",
        },
        master: m.current_leader,
        term: m.current_term,
        last_log: m.last_log_index.unwrap_or(0),
        applied: m.last_applied.map_or(0, |l| l.index),
        voters: membership.voter_ids().collect(),
        learners: membership.learner_ids().collect(),
        snapshot: m.snapshot.map(|l| l.index),
        purged: m.purged.map(|l| l.index),
        heard_ms_ago: match m.state {
            ServerState::Leader => None,
            _ => heard.last().map(|(ago, _)| ago.as_millis() as u64),
        },
        acked: m
            .replication
            .iter()
            .flatten()
            .filter(|(&id, _)| id != m.id)
            .map(|(&id, l)| (id, l.map_or(0, |l| l.index)))
            .collect(),
    }
}
