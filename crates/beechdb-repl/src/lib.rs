//! BeechDB high availability: a replication group of environments, one of them the master,
//! on the openraft consensus library.
//!
//! Owns: [`Member`] (one environment of a group: its Raft node, its replicated log, its
//! state machine), the group's vocabulary ([`MemberConfig`], [`Status`], [`Consistency`])
//! and the openraft type configuration. May call: the engine (`beechdb`), openraft, tokio.
//! Invariants: a commit reaches the trees of any member, the master included, only once the
//! group has committed it (visibility equals Raft commit), and every member applies the
//! same commits in the same order; a member's environment records, in the same local
//! commit as the data, the last log position it applied, so a restart resumes from exactly
//! there. No openraft type appears in the public API.
//!
//! Layout of a member's directory: `env/` is the environment, `raft/` the replicated log
//! (see [`log_store`]); `env.incoming/` and `env.receiving-*/` exist only while a copy from
//! the master is being received or installed (see [`state`]).

// openraft's error types are large by its design; its traits fix the signatures.
#![allow(clippy::result_large_err)]

mod commit;
mod commit_only;
mod log_store;
pub mod net;
mod snapshot;
mod state;
pub mod tcp;

pub use beechdb::{AckPolicy, GroupDurability};
pub use log_store::{summarize as summarize_log, LogSummary};
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
        let storage = beechdb::storage::OsStorage::new(dir).map_err(|e| beechdb::Error::Io {
            context: "opening the directory".into(),
            source: e,
        })?;
        crate::log_store::LogStore::open(std::sync::Arc::new(storage), "log", 0).map(drop)
    }

    /// A frame arriving on a member's connection.
    pub fn read_frame(bytes: &[u8]) -> std::io::Result<()> {
        crate::tcp::check_frame(bytes)
    }

    /// A copy of an environment arriving from a master into the new directory `dir`:
    /// `bytes` is its page size (u32), its page count (u64) and its pages, which arrive in
    /// chunks of three pages; the copy is then opened as a member's state machine does.
    pub fn receive_copy(bytes: &[u8], dir: &Path) -> beechdb::Result<()> {
        let bad = || beechdb::Error::InvalidArgument("too short for a shape".into());
        let (size, rest) = bytes.split_first_chunk::<4>().ok_or_else(bad)?;
        let (count, pages) = rest.split_first_chunk::<8>().ok_or_else(bad)?;
        let shape = crate::snapshot::Shape {
            page_size: u32::from_le_bytes(*size),
            page_count: u64::from_le_bytes(*count),
        };
        let mut receiver = crate::snapshot::Receiver::begin(dir, shape)?;
        for chunk in pages.chunks((shape.page_size as usize).saturating_mul(3).max(1)) {
            receiver.chunk(chunk)?;
        }
        let received = receiver.finish()?;
        let config = beechdb::Config::default().transactional(true);
        beechdb::Env::open(&received, config)?.close()
    }
}

use beechdb::storage::{OsStorage, Storage};
use beechdb::{Durability, Env, Error, Result, Txn};
use openraft::async_runtime::WatchReceiver as _;
use openraft::error::{ClientWriteError, RaftError};
use openraft::raft::ReadPolicy;
use openraft::{BasicNode, ServerState};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A member's id in its group.
pub type NodeId = u64;

/// One entry of the replicated log: a transaction's commit, as the engine encoded it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Request {
    /// The encoded write set (see `beechdb::Replicator`), serialized as one run of bytes
    /// rather than byte by byte: the same encoding (a unit test checks it), and about a
    /// third of the time on the runtime's thread (docs/benchmarks.md, "Transactions larger
    /// than an entry").
    #[serde(with = "serde_bytes")]
    pub commit: Vec<u8>,
    /// Whether the master's log, and each replica's, must reach disk (fsync) before that
    /// member counts the entry as stored.
    pub master_sync: bool,
    pub replica_sync: bool,
    /// Nonzero when the proposer waits for its own log to hold the entry (ack policy
    /// NONE): the master's log store tells it under this number.
    pub notify: u64,
    /// The member that proposed it (the master of its term).
    pub proposer: NodeId,
    /// For a transaction replicated in parts: which part this is, or which parts this
    /// commit completes.
    pub staged: Option<Stage>,
}

/// Where an entry stands in a transaction replicated in parts (see
/// `beechdb::Replicator::stage`): parts are numbered within the commit `id` of the master's
/// term `epoch`, and stored by every member until the commit naming them is applied, or
/// the master gives them up (`Drop`: its transaction failed after sending some); parts of
/// an earlier term than an applied entry's are dropped too (that master's commit can no
/// longer follow them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Stage {
    Part { epoch: u64, id: u64, seq: u32 },
    Commit { epoch: u64, id: u64, parts: u32 },
    Drop { epoch: u64, id: u64 },
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "commit of {} bytes", self.commit.len())
    }
}

/// What applying an entry gave: the LSN of the local commit on the member that applied it,
/// and why every member refused the entry's commit, if it did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Response {
    pub lsn: u64,
    pub refused: Option<Refusal>,
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
    /// Its parts were dropped: its master lost its term while sending them.
    PartsLost,
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
            Refusal::PartsLost => Error::Replication(
                "the master changed while this transaction's parts were being replicated; \
                 it was not committed"
                    .into(),
            ),
        }
    }
}

/// The group's types: entries are engine commits; snapshots are durable checkpoints of an
/// environment, streamed page by page (see [`state::SnapshotData`]).
#[derive(Debug, Clone, Copy, Default, Eq, PartialEq, Ord, PartialOrd)]
pub(crate) struct TypeConfig;

/// Standard Raft leader ids: at most one master per term.
type LeaderId = openraft::impls::leader_id_std::LeaderId<u64, NodeId>;
/// What a log id names of its leader: the term.
pub(crate) type Term = <LeaderId as openraft::vote::RaftLeaderId>::Committed;

impl openraft::RaftTypeConfig for TypeConfig {
    type D = Request;
    type R = Response;
    type NodeId = NodeId;
    type Node = BasicNode;
    type Term = u64;
    type LeaderId = LeaderId;
    type Vote = openraft::impls::Vote<LeaderId>;
    type Payload = openraft::EntryPayload<Request, NodeId, BasicNode>;
    type Entry = openraft::Entry<Term, Self::Payload>;
    type AsyncRuntime = openraft::TokioRuntime;
    type Responder<T>
        = commit::Reply<T>
    where
        T: openraft::OptionalSend + 'static;
    type Batch<T>
        = openraft::impls::InlineBatch<T>
    where
        T: openraft::OptionalSend + 'static;
    type ErrorSource = openraft::impls::BoxedErrorSource;
}

pub(crate) type Entry = openraft::Entry<Term, openraft::EntryPayload<Request, NodeId, BasicNode>>;
pub(crate) type LogId = openraft::LogId<Term>;
pub(crate) type Vote = openraft::impls::Vote<LeaderId>;
pub(crate) type StoredMembership = openraft::StoredMembership<Term, NodeId, BasicNode>;
pub(crate) type SnapshotMeta = openraft::SnapshotMeta<Term, NodeId, BasicNode>;
pub(crate) type SnapshotOf = openraft::Snapshot<Term, NodeId, BasicNode, state::SnapshotData>;

/// The openraft node of a member.
pub(crate) type Raft = openraft::Raft<TypeConfig, Arc<state::StateMachine>>;

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
    /// Everything committed anywhere before the wait began: on the master only, confirmed
    /// by its lease (a majority acknowledged it recently enough that no other master can
    /// have been elected since), or else by a round of heartbeats (a read index).
    Linearizable,
}

/// Nanoseconds from the process's first call to `at` (0 for earlier instants): a time an
/// atomic can hold.
pub(crate) fn nanos(at: Instant) -> u64 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    at.saturating_duration_since(epoch).as_nanos() as u64
}

/// When a member last heard from a master that accepted it, and the commit index that
/// master had then (for [`Consistency::TimeLag`]).
#[derive(Default)]
pub(crate) struct Heard {
    /// As [`nanos`] gives it; 0: never.
    at: std::sync::atomic::AtomicU64,
    commit: std::sync::atomic::AtomicU64,
}

impl Heard {
    /// Records an append from the master that the member accepted.
    pub(crate) fn record(&self, leader_commit: Option<LogId>) {
        use std::sync::atomic::Ordering::Relaxed;
        let now = nanos(Instant::now());
        self.commit
            .fetch_max(leader_commit.map_or(0, |l| l.index), Relaxed);
        self.at.fetch_max(now.max(1), Relaxed);
    }

    /// How long ago the master was heard from, and its commit index then.
    fn last(&self) -> Option<(Duration, u64)> {
        use std::sync::atomic::Ordering::Relaxed;
        let at = self.at.load(Relaxed);
        (at > 0).then(|| {
            let ago = Duration::from_nanos(nanos(Instant::now()).saturating_sub(at));
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
    /// The environment's configuration (transactional; its durability is the master's
    /// default, see [`MemberConfig::replicas`]).
    pub env: beechdb::Config,
    /// Heartbeats from the master, and the range of election timeouts of the others.
    pub heartbeat: Duration,
    pub election_timeout: (Duration, Duration),
    /// A copy of the environment (a snapshot) is taken after this many log entries, and
    /// the log before it is removed: a replica further behind is rebuilt from a copy.
    pub snapshot_every: u64,
    /// How long a commit on the master waits for the acknowledgements its policy asks for
    /// before failing with a typed error.
    pub ack_timeout: Duration,
    /// The acknowledgements a commit on this member, when master, waits for, unless its
    /// transaction set a [`GroupDurability`] of its own.
    pub ack: AckPolicy,
    /// How replicas write the log of a commit made on this member, unless its transaction
    /// set a [`GroupDurability`]: `None` writes it as the commit's own durability says (a
    /// SYNC commit is fsynced on every member).
    pub replicas: Option<Durability>,
    /// Keep the environment and the log on this storage (one namespace: the log is its
    /// file `raft.log`) instead of in `dir`: for simulated power loss and faults. Such a
    /// member cannot be rebuilt from a copy of the master's environment.
    pub storage: Option<Arc<dyn Storage>>,
    /// Threads of the member's runtime (openraft's tasks, the transport, the log's
    /// writes); at least 1 (0 is refused). One by default: a replicated commit then costs
    /// its members fewer wake-ups across threads (measured on two cores, one committing
    /// thread: 1.0-1.9x the commits of two threads with one or two replicas, but
    /// 0.57-0.88x in a group of one member; docs/benchmarks.md).
    pub runtime_threads: usize,
    /// A transaction whose writes take more bytes than this, or that spilled to its log,
    /// is replicated in parts of about this size, each an entry of the log, which every
    /// member stores until the commit naming them is applied; smaller ones are one entry
    /// each, which is faster (a 22 MB transaction in parts took about 1.4x as long to
    /// apply everywhere as in one entry). 4 MiB by default, from 1 byte to half the
    /// largest entry (16 MiB): a member's runtime thread encodes, checks and writes each
    /// entry whole, so larger entries hold it for longer stretches (docs/benchmarks.md).
    pub part_bytes: usize,
    /// How long a committer on this member, when master, that waits alone for its commit's
    /// outcome polls for it (yielding its core between polls) before it sleeps, when
    /// commits have lately taken less than this; meanwhile the member's runtime thread is
    /// kept from sleeping too. A sleeping committer and a sleeping runtime each cost a
    /// wake-up, as long as the rest of a commit on loopback (measured on two cores, one
    /// committing thread: polling gave 3.0-4.8x the commits of a group of one member and
    /// 1.4-1.8x with two replicas, the runtime kept awake another 2.6-2.8x and 1.3-1.6x;
    /// nothing changed with eight replicas; docs/benchmarks.md). It costs CPU:
    /// the committer's core while it polls, the runtime's while a lone committer commits.
    /// 200 us by default; zero never polls.
    pub commit_poll: Duration,
}

impl MemberConfig {
    /// A configuration with defaults suited to a local network: heartbeats every 50 ms,
    /// elections after 150-300 ms of silence, a snapshot every 50,000 entries, one
    /// runtime thread.
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
            replicas: None,
            storage: None,
            runtime_threads: 1,
            part_bytes: 4 << 20,
            commit_poll: Duration::from_micros(200),
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
    /// The last log position this member has, the last it knows committed, and the last
    /// it has applied.
    pub last_log: u64,
    pub committed: u64,
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
    /// lag in commits is `last_log` minus this), and milliseconds since it last did.
    pub acked: BTreeMap<NodeId, u64>,
    pub acked_ms_ago: BTreeMap<NodeId, u64>,
    /// Why this member stopped taking part (its log or environment failed: a full disk,
    /// an I/O error), if it did; it must be restarted once the cause is gone.
    pub stopped: Option<String>,
}

/// One member of a replication group, running: an environment whose commits go through
/// the group. Writes succeed on the master only ([`Error::NotMaster`] elsewhere, naming the
/// master); reads work on every member.
pub struct Member {
    id: NodeId,
    /// The in-process network, which the member leaves when it stops.
    net: Option<net::Network>,
    peers: Peers,
    log: log_store::LogStore,
    raft: Raft,
    sm: Arc<state::StateMachine>,
    runtime: Arc<tokio::runtime::Runtime>,
    heard: Arc<Heard>,
}

/// The engine's error for an openraft write failure.
pub(crate) fn write_error(e: &ClientWriteError<TypeConfig>) -> Error {
    match e {
        ClientWriteError::ForwardToLeader(f) | ClientWriteError::LogEntryDiscarded(f) => {
            Error::NotMaster {
                master: f.leader_id,
            }
        }
        ClientWriteError::ChangeMembershipError(c) => {
            Error::InvalidArgument(format!("membership change refused: {c}"))
        }
        e => Error::Replication(format!("{e}; the commit was not made")),
    }
}

/// The engine's error for a failed openraft management call.
pub(crate) fn raft_error(e: RaftError<TypeConfig, ClientWriteError<TypeConfig>>) -> Error {
    match e {
        RaftError::APIError(e) => write_error(&e),
        RaftError::Fatal(f) => Error::Replication(format!("this member stopped: {f}")),
    }
}

fn runtime_error(e: std::io::Error) -> Error {
    Error::Io {
        context: "starting the replication runtime".into(),
        source: e,
    }
}

impl Member {
    /// Starts a member: opens (or creates) its environment and log under
    /// `config.dir`, and joins the network. A new member knows no group until
    /// [`Member::initialize`] is called on one member, or a master adds it.
    pub fn start(config: MemberConfig, transport: Transport) -> Result<Member> {
        if config.runtime_threads == 0 {
            return Err(Error::InvalidArgument(
                "a member's runtime needs at least 1 thread (runtime_threads is 0)".into(),
            ));
        }
        if config.part_bytes == 0 || config.part_bytes > commit::MAX_COMMIT / 2 {
            return Err(Error::InvalidArgument(format!(
                "part_bytes is {}: it must be from 1 to {} bytes (half the largest entry)",
                config.part_bytes,
                commit::MAX_COMMIT / 2
            )));
        }
        let runtime = Arc::new(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(config.runtime_threads)
                .thread_name(format!("beechdb-repl-{}", config.id))
                .enable_all()
                .build()
                .map_err(runtime_error)?,
        );
        std::fs::create_dir_all(&config.dir).map_err(|e| Error::Io {
            context: format!("creating {}", config.dir.display()),
            source: e,
        })?;
        let log = match &config.storage {
            Some(s) => log_store::LogStore::open(s.clone(), "raft.log", config.id)?,
            None => {
                let raft = config.dir.join("raft");
                let storage = OsStorage::new(&raft).map_err(|e| Error::Io {
                    context: format!("creating {}", raft.display()),
                    source: e,
                })?;
                log_store::LogStore::open(Arc::new(storage), "log", config.id)?
            }
        };
        let sm = Arc::new(state::StateMachine::open(
            &config.dir,
            config.env.clone(),
            log.pending(),
            config.storage.clone(),
        )?);
        let raft_config = openraft::Config {
            cluster_name: "beechdb".into(),
            heartbeat_interval: config.heartbeat.as_millis() as u64,
            election_timeout_min: config.election_timeout.0.as_millis() as u64,
            election_timeout_max: config.election_timeout.1.as_millis() as u64,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(config.snapshot_every),
            max_in_snapshot_log_to_keep: 1000,
            // A member that was cut off asks before it raises the term, so its return does
            // not depose a master that the others still follow.
            enable_pre_vote: Some(true),
            // A restarted master must be elected again, in a new term: its log may have lost
            // entries it had not yet flushed, and entries it proposed afresh under the old
            // term would take the same log ids as ones other members may hold.
            enable_leader_restore: Some(false),
            // A member's log may lose entries it acknowledged when the commits asked it for
            // no fsync (NOSYNC, WRITE_NOSYNC) and its power is cut. The master then finds
            // that log shorter than what it acknowledged and searches again for where the
            // two agree, rather than sending the refused request forever. (Entries whose
            // commits asked that member for SYNC, parts of large commits included, reach
            // its disk before it acknowledges them: they are never lost this way.)
            allow_log_reversion: Some(true),
            ..Default::default()
        }
        .validate()
        .map_err(|e| Error::InvalidArgument(format!("replication settings: {e}")))?;
        let raft_config = Arc::new(raft_config);
        let heard = Arc::new(Heard::default());
        let nudge = Arc::new(commit_only::Nudge::default());
        let started = match &transport {
            Transport::Local(net) => {
                let endpoint = net.endpoint(config.id, nudge.clone());
                runtime.block_on(Raft::new(
                    config.id,
                    raft_config,
                    endpoint,
                    log.clone(),
                    sm.clone(),
                ))
            }
            Transport::Tcp { group, .. } => {
                let endpoint = tcp::TcpEndpoint {
                    caller: tcp::Caller {
                        group: group.to_string(),
                        from: config.id,
                        log: Some(log.clone()),
                    },
                    nudge: nudge.clone(),
                };
                runtime.block_on(Raft::new(
                    config.id,
                    raft_config,
                    endpoint,
                    log.clone(),
                    sm.clone(),
                ))
            }
        };
        let raft = started
            .map_err(|e| Error::Replication(format!("starting member {}: {e}", config.id)))?;
        runtime.spawn(nudge.run(raft.clone()));
        let peers = match &transport {
            Transport::Local(net) => Peers::Local((*net).clone()),
            Transport::Tcp { group, .. } => Peers::Tcp {
                group: group.to_string(),
            },
        };
        let net = match transport {
            Transport::Local(net) => {
                net.register(
                    config.id,
                    raft.clone(),
                    heard.clone(),
                    sm.clone(),
                    log.clone(),
                );
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
                    log: log.clone(),
                    peers: peers.clone(),
                    sm: sm.clone(),
                    ack_timeout: config.ack_timeout,
                    heard: heard.clone(),
                });
                runtime.spawn(tcp::serve(listener, server));
                None
            }
        };
        sm.set_replicator(Some(Arc::new(commit::CommitPath::new(
            raft.clone(),
            runtime.handle().clone(),
            log.clone(),
            &config,
        ))))?;
        Ok(Member {
            id: config.id,
            net,
            peers,
            log,
            raft,
            sm,
            runtime,
            heard,
        })
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

    /// Begins a transaction whose commit is made durable and acknowledged as `durability`
    /// says (the member's default when `None`). On the master, fails at once with
    /// [`Error::InsufficientReplicas`] when fewer members than its ack policy needs are
    /// in contact (JE checks this when a transaction begins, too).
    pub fn begin_txn(&self, durability: Option<GroupDurability>) -> Result<Txn> {
        self.env().begin_replicated_txn(durability)
    }

    /// Makes a new group of the voting members `members` (ids and addresses; addresses are
    /// not used on a local network), this one among them: call it once, on one member,
    /// when the group is first formed.
    pub fn initialize(&self, members: &[(NodeId, &str)]) -> Result<()> {
        let nodes: BTreeMap<NodeId, BasicNode> = members
            .iter()
            .map(|&(id, addr)| (id, BasicNode::new(addr)))
            .collect();
        if self.log.history().is_none() {
            // A number for the history of the group formed now.
            self.log.adopt_history(rand::random())?;
        }
        let raft = self.raft.clone();
        self.runtime
            .block_on(async move { raft.initialize(nodes).await })
            .map_err(|e| Error::InvalidArgument(format!("forming the group: {e}")))
    }

    /// Adds member `id` (already started, at `addr`) to the group, as a voter or as a
    /// non-voting replica; on the master only. Returns once it has caught up and the change
    /// is committed.
    pub fn add_member(&self, id: NodeId, addr: &str, voter: bool) -> Result<()> {
        let (raft, peers, log) = (self.raft.clone(), self.peers.clone(), self.log.clone());
        let addr = addr.to_string();
        self.runtime
            .block_on(async move { add_member(&raft, &peers, &log, id, addr, voter).await })
    }

    /// Removes member `id` from the group (voter or not); on the master only.
    pub fn remove_member(&self, id: NodeId) -> Result<()> {
        let raft = self.raft.clone();
        self.runtime.block_on(async move {
            membership_settled(&raft).await?;
            let m = raft.metrics().borrow_watched().membership_config.clone();
            if m.membership().voter_ids().any(|v| v == id) {
                let voters: BTreeSet<NodeId> =
                    m.membership().voter_ids().filter(|&v| v != id).collect();
                raft.change_membership(voters, false)
                    .await
                    .map_err(raft_error)?;
            }
            let gone: BTreeSet<NodeId> = [id].into();
            raft.change_membership(openraft::ChangeMembers::RemoveNodes(gone), false)
                .await
                .map_err(raft_error)
                .map(drop)
        })
    }

    /// Hands the master's role to member `to` (a voter that has caught up), on the master;
    /// returns once `to` is master, or a typed error after `timeout`. Writes in flight on
    /// this member fail with [`Error::NotMaster`] naming the new master.
    pub fn transfer_master(&self, to: NodeId, timeout: Duration) -> Result<()> {
        let raft = self.raft.clone();
        self.runtime
            .block_on(async move { transfer_master(&raft, to, timeout).await })
    }

    /// This member's view of the group.
    pub fn status(&self) -> Status {
        status_of(&self.raft, &self.heard)
    }

    /// Whether this member is the master now.
    pub fn is_master(&self) -> bool {
        self.raft.metrics().borrow_watched().state == ServerState::Leader
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
            Consistency::Linearizable => self.linearizable(timeout),
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

    /// A linearizable read point on the master: its lease when a majority acknowledged it
    /// recently, else a heartbeat round; then waits until it has applied that far.
    fn linearizable(&self, timeout: Duration) -> Result<()> {
        let raft = self.raft.clone();
        let read = self.runtime.block_on(async move {
            tokio::time::timeout(timeout, async {
                match raft.ensure_linearizable(ReadPolicy::LeaseRead).await {
                    Ok(_) => Ok(()),
                    Err(RaftError::APIError(
                        openraft::error::LinearizableReadError::ForwardToLeader(f),
                    )) => Err(Some(f.leader_id)),
                    // The lease is stale: confirm with a round of heartbeats instead.
                    Err(_) => match raft.ensure_linearizable(ReadPolicy::ReadIndex).await {
                        Ok(_) => Ok(()),
                        Err(RaftError::APIError(
                            openraft::error::LinearizableReadError::ForwardToLeader(f),
                        )) => Err(Some(f.leader_id)),
                        Err(_) => Err(None),
                    },
                }
            })
            .await
        });
        match read {
            Ok(Ok(())) => Ok(()),
            Ok(Err(Some(master))) => Err(Error::NotMaster { master }),
            Ok(Err(None)) | Err(_) => Err(Error::Replication(format!(
                "linearizable read: a majority did not confirm this master within {timeout:?}"
            ))),
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

/// Hands the master's role from `raft` to member `to` (see [`Member::transfer_master`]).
pub(crate) async fn transfer_master(raft: &Raft, to: NodeId, timeout: Duration) -> Result<()> {
    let m = raft.metrics().borrow_watched().clone();
    if m.state != ServerState::Leader {
        return Err(Error::NotMaster {
            master: m.current_leader,
        });
    }
    if !m
        .membership_config
        .membership()
        .voter_ids()
        .any(|v| v == to)
    {
        return Err(Error::InvalidArgument(format!(
            "member {to} is not a voting member of the group"
        )));
    }
    let failed = |e: String| {
        Error::Replication(format!(
            "member {to} did not take over as master within {timeout:?}: {e}"
        ))
    };
    raft.trigger()
        .transfer_leader(to)
        .await
        .map_err(|e| failed(e.to_string()))?;
    raft.wait(Some(timeout))
        .metrics(
            |m| m.current_leader == Some(to) && m.state != ServerState::Leader,
            "the new master",
        )
        .await
        .map(drop)
        .map_err(|e| failed(e.to_string()))
}

/// How a member reaches another before it is in the group: to learn its history.
#[derive(Clone)]
pub(crate) enum Peers {
    Local(net::Network),
    Tcp { group: String },
}

impl Peers {
    /// The history member `id` at `addr` belongs to, if any.
    async fn history(&self, id: NodeId, addr: &str) -> Result<Option<u64>> {
        match self {
            Peers::Local(net) => net
                .history(id)
                .ok_or_else(|| Error::Replication(format!("member {id} is not running"))),
            Peers::Tcp { group } => tcp::history(addr, group).await,
        }
    }
}

/// Adds member `id` at `addr` to the group of the master `raft`, whose log is `log`: refused
/// when that member's log belongs to another group's history.
pub(crate) async fn add_member(
    raft: &Raft,
    peers: &Peers,
    log: &log_store::LogStore,
    id: NodeId,
    addr: String,
    voter: bool,
) -> Result<()> {
    let theirs = peers.history(id, &addr).await?;
    if let (Some(theirs), Some(ours)) = (theirs, log.history()) {
        if theirs != ours {
            return Err(Error::InvalidArgument(format!(
                "member {id} has a log of another group's history ({theirs:016x}; this \
                 group's is {ours:016x}): a member joins a group from an empty directory"
            )));
        }
    }
    membership_settled(raft).await?;
    raft.add_learner(id, BasicNode::new(addr), true)
        .await
        .map_err(raft_error)?;
    if voter {
        let mut voters = raft
            .metrics()
            .borrow_watched()
            .membership_config
            .membership()
            .voter_ids()
            .collect::<BTreeSet<_>>();
        voters.insert(id);
        raft.change_membership(voters, true)
            .await
            .map_err(raft_error)?;
    }
    Ok(())
}

/// Waits (up to 10 s) until the group's membership is committed and applied: a master
/// elected a moment ago still has its first membership in flight (openraft refuses a
/// change then, as one already under way), and so does one that has just made a change.
async fn membership_settled(raft: &Raft) -> Result<()> {
    raft.wait(Some(Duration::from_secs(10)))
        .metrics(
            |m| m.membership_config.log_id().as_ref() <= m.last_applied.as_ref(),
            "the membership committed",
        )
        .await
        .map(drop)
        .map_err(|e| {
            Error::Replication(format!(
                "the group's membership did not settle, so it cannot change now: {e}"
            ))
        })
}

/// The status of the member whose node is `raft`.
pub(crate) fn status_of(raft: &Raft, heard: &Heard) -> Status {
    let m = raft.metrics().borrow_watched().clone();
    let membership = m.membership_config.membership();
    let index = |l: &Option<LogId>| l.as_ref().map_or(0, |l| l.index);
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
        committed: index(&m.local_committed),
        applied: index(&m.last_applied),
        voters: membership.voter_ids().collect(),
        learners: membership.learner_ids().collect(),
        snapshot: m.snapshot.as_ref().map(|l| l.index),
        purged: m.purged.as_ref().map(|l| l.index),
        heard_ms_ago: match m.state {
            ServerState::Leader => None,
            _ => heard.last().map(|(ago, _)| ago.as_millis() as u64),
        },
        acked: m
            .replication
            .iter()
            .flatten()
            .filter(|(&id, _)| id != m.id)
            .map(|(&id, l)| (id, index(l)))
            .collect(),
        acked_ms_ago: m
            .heartbeat
            .iter()
            .flatten()
            .filter(|(&id, _)| id != m.id)
            .filter_map(|(&id, at)| at.as_ref().map(|at| (id, commit::since(at))))
            .collect(),
        stopped: m.running_state.as_ref().err().map(|f| f.to_string()),
    }
}
