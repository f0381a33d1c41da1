//! Members over TCP: framed, checksummed messages on persistent connections, with
//! deadlines; the Raft messages between members, snapshots streamed on a connection of
//! their own, and a small client protocol (write, read, add a member, hand over the master's
//! role, status) for programs outside the member's process.
//!
//! Owns: the wire format ([`Message`], [`Reply`], frames), the server loop of a member, the
//! connections a member opens to the others, and [`Client`]. May call: the member's Raft
//! node and environment, [`crate::snapshot`]. Invariants: a frame is
//! `[length u32][crc32c u32][bincode]`, at most [`MAX_FRAME`] bytes; a frame that is too
//! long, fails its checksum or does not decode closes its connection (nothing else
//! happens); a connection starts with a `Hello` naming the group, and one from another
//! group is refused; a request that misses its deadline drops its connection, so a late
//! reply can never be taken for the next request's; a snapshot's pages go over a new
//! connection, one chunk a request, and a receiver whose connection ends before the last
//! chunk removes what it wrote.

use crate::commit_only::{CommitOnly, Nudge, Sent};
use crate::log_store::LogStore;
use crate::snapshot::{read_chunk, Receiver, Shape};
use crate::state::{bincode_opts, SnapshotData, StateMachine};
use crate::{NodeId, Raft, SnapshotMeta, TypeConfig, Vote};
use beechdb::Error;
use bincode::Options;
use openraft::async_runtime::WatchReceiver as _;
use openraft::error::{NetworkError, RPCError, ReplicationClosed, StreamingError};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, TransferLeaderRequest,
    TransferLeaderResponse, VoteRequest, VoteResponse,
};
use openraft::{BasicNode, RaftNetworkFactory, RaftNetworkV2, Snapshot};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The largest frame accepted: a batch of entries or a snapshot chunk is far smaller.
pub const MAX_FRAME: usize = 64 << 20;

/// The commits an append request carries at most, in bytes (a single larger entry, up to
/// a commit's limit, goes alone).
const APPEND_BYTES: usize = 8 << 20;

/// The rate an append's deadline allows for its bytes beyond openraft's own deadline (a
/// follower decodes, checks and writes each byte): 32 bytes a microsecond, about 30 MB/s.
const BYTES_PER_US: u64 = 32;

/// A request on a connection.
#[derive(Serialize, Deserialize)]
pub(crate) enum Message {
    /// The first message of every connection: the group it is for, the history of the
    /// asking member's log (none for a client or a new member), and who asks (0: a client).
    Hello {
        group: String,
        history: Option<u64>,
        from: NodeId,
    },
    Append(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<TypeConfig>),
    PreVote(VoteRequest<TypeConfig>),
    TransferLeader(TransferLeaderRequest<TypeConfig>),
    /// The first request of a snapshot's connection: what is coming.
    SnapshotBegin {
        vote: Vote,
        meta: SnapshotMeta,
        shape: Shape,
    },
    /// The next pages of the snapshot.
    SnapshotChunk(#[serde(with = "serde_bytes")] Vec<u8>),
    /// Every page is sent: install the copy.
    SnapshotEnd,
    /// Client: commit `key = value` in database `db` (created if missing) on the master.
    Put {
        db: String,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    /// Client: read `key` of `db` once this member has applied commit `token`.
    Get {
        db: String,
        key: Vec<u8>,
        token: u64,
    },
    /// Client: add member `id` at `addr` to the group, as a voter or not.
    AddMember {
        id: NodeId,
        addr: String,
        voter: bool,
    },
    /// Client: hand the master's role to member `to`.
    TransferMaster {
        to: NodeId,
    },
    /// Client: the member's status.
    Status,
    /// Client: pin a consistent copy of the member's environment, once it has applied
    /// commit `after`, for this connection to read (hot backup).
    BackupBegin {
        after: u64,
    },
    /// Client: the copy's pages from `first`, as many as a chunk holds.
    BackupChunk {
        first: u64,
    },
    /// Client: a digest of every database's contents here (the marker left out), with
    /// the position applied when it was read; equal on members at the same position.
    Digest,
}

/// Why a client request failed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ClientError {
    /// This member is not the master; the master, if known, and its address.
    NotMaster(Option<(NodeId, String)>),
    /// Anything else, in words.
    Failed(String),
}

/// The answer to a [`Message`], of the same kind.
#[derive(Serialize, Deserialize)]
pub(crate) enum Reply {
    Hello(Result<(), String>),
    /// A Raft request's answer, or why the member could not answer it.
    Append(Result<AppendEntriesResponse<TypeConfig>, String>),
    Vote(Result<VoteResponse<TypeConfig>, String>),
    TransferLeader(Result<TransferLeaderResponse<TypeConfig>, String>),
    /// A snapshot's chunk written (`None`), or the copy installed.
    Snapshot(Result<Option<SnapshotResponse<TypeConfig>>, String>),
    Put(Result<u64, ClientError>),
    Get(Result<Option<Vec<u8>>, ClientError>),
    AddMember(Result<(), ClientError>),
    TransferMaster(Result<(), ClientError>),
    Status(WireStatus),
    Digest(Result<(u64, u64), ClientError>),
    /// The pinned copy's shape and the position it holds, or a chunk of its pages.
    BackupBegin(Result<(Shape, u64), ClientError>),
    BackupChunk(Result<Vec<u8>, ClientError>),
}

/// [`crate::Status`] on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireStatus {
    pub id: NodeId,
    pub state: String,
    pub master: Option<NodeId>,
    pub term: u64,
    pub last_log: u64,
    pub committed: u64,
    pub applied: u64,
    pub heard_ms_ago: Option<u64>,
    pub acked: std::collections::BTreeMap<NodeId, u64>,
    pub acked_ms_ago: std::collections::BTreeMap<NodeId, u64>,
    pub stopped: Option<String>,
    /// The history of the member's log (see `Member::add_member`).
    pub history: Option<u64>,
}

fn frame_error(why: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, why)
}

/// Writes one frame holding `value`.
pub(crate) async fn write_frame<T: Serialize>(s: &mut TcpStream, value: &T) -> std::io::Result<()> {
    let payload = bincode_opts(MAX_FRAME)
        .serialize(value)
        .map_err(|e| frame_error(format!("encoding a message: {e}")))?;
    let mut buf = Vec::with_capacity(8 + payload.len());
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
    buf.extend_from_slice(&payload);
    s.write_all(&buf).await
}

/// The payload length a frame header announces; an error past [`MAX_FRAME`].
fn frame_len(hdr: &[u8; 8]) -> std::io::Result<usize> {
    let len = u32::from_le_bytes(hdr[..4].try_into().unwrap()) as usize;
    match len > MAX_FRAME {
        true => Err(frame_error(format!(
            "a frame of {len} bytes is over the limit"
        ))),
        false => Ok(len),
    }
}

/// Checks a frame's payload against the checksum in its header and decodes it.
fn decode_payload<T: for<'de> Deserialize<'de>>(
    hdr: &[u8; 8],
    payload: &[u8],
) -> std::io::Result<T> {
    let crc = u32::from_le_bytes(hdr[4..].try_into().unwrap());
    if crc32c::crc32c(payload) != crc {
        return Err(frame_error("a frame failed its checksum".into()));
    }
    bincode_opts(payload.len())
        .deserialize(payload)
        .map_err(|e| frame_error(format!("a frame does not decode: {e}")))
}

/// A loopback address whose port nothing listens on now, for a member to be started on it
/// later: tests and benchmarks start members as processes that must know each other's
/// addresses before any of them runs. The port lies below the kernel's range for outgoing
/// connections' own ports (`ip_local_port_range`), so a connection made meanwhile cannot
/// take it, nor take it back while its member restarts; one process never gets the same
/// port twice. Where that range leaves no room, any free port.
pub fn spare_loopback_addr() -> std::io::Result<String> {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOWEST: u32 = 10_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768);
    let span = ephemeral_low.saturating_sub(LOWEST);
    if span > 0 {
        // Processes start at different points so that two at once rarely meet.
        let seed = std::process::id().wrapping_mul(7_919) % span + 1;
        let _ = NEXT.compare_exchange(0, seed, Ordering::Relaxed, Ordering::Relaxed);
        for _ in 0..span {
            let port = LOWEST + NEXT.fetch_add(1, Ordering::Relaxed) % span;
            if std::net::TcpListener::bind(("127.0.0.1", port as u16)).is_ok() {
                return Ok(format!("127.0.0.1:{port}"));
            }
        }
    }
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.to_string())
}

/// Decodes one whole frame (header and payload) holding a request, as a member does with
/// what arrives on a connection; an error for anything malformed.
pub fn check_frame(frame: &[u8]) -> std::io::Result<()> {
    let (hdr, payload) = frame
        .split_first_chunk::<8>()
        .ok_or_else(|| frame_error("a frame is cut short".into()))?;
    if payload.len() != frame_len(hdr)? {
        return Err(frame_error(
            "a frame's length does not match its header".into(),
        ));
    }
    decode_payload::<Message>(hdr, payload).map(drop)
}

/// Reads one frame and decodes it; an error for anything malformed.
pub(crate) async fn read_frame<T: for<'de> Deserialize<'de>>(
    s: &mut TcpStream,
) -> std::io::Result<T> {
    let mut hdr = [0u8; 8];
    s.read_exact(&mut hdr).await?;
    let mut payload = vec![0u8; frame_len(&hdr)?];
    s.read_exact(&mut payload).await?;
    decode_payload(&hdr, &payload)
}

/// What a member's server needs.
pub(crate) struct Server {
    pub group: String,
    pub raft: Raft,
    pub log: LogStore,
    pub peers: crate::Peers,
    pub sm: Arc<StateMachine>,
    pub ack_timeout: Duration,
    pub heard: Arc<crate::Heard>,
}

/// Accepts connections on `listener` and serves each until it closes or misbehaves.
pub(crate) async fn serve(listener: TcpListener, server: Arc<Server>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let server = server.clone();
        tokio::spawn(async move {
            let _ = server.connection(stream).await;
        });
    }
}

impl Server {
    async fn connection(&self, mut s: TcpStream) -> std::io::Result<()> {
        let Message::Hello {
            group,
            history,
            from,
        } = read_frame::<Message>(&mut s).await?
        else {
            return Err(frame_error("a connection must start with Hello".into()));
        };
        let refused = match (history, self.log.history()) {
            _ if group != self.group => Some(format!(
                "member {from} is of group {group:?}, this one of group {:?}",
                self.group
            )),
            (Some(theirs), Some(ours)) if theirs != ours => Some(format!(
                "member {from} has a log of another group's history ({theirs:016x}; this \
                 member's is {ours:016x})"
            )),
            _ => None,
        };
        if let Some(why) = refused {
            write_frame(&mut s, &Reply::Hello(Err(why))).await?;
            return Ok(());
        }
        write_frame(&mut s, &Reply::Hello(Ok(()))).await?;
        // A snapshot arriving on this connection: its receiver, vote and description.
        let mut incoming: Option<(Receiver, Vote, SnapshotMeta)> = None;
        // A hot backup read on this connection: the pinned checkpoint, released when the
        // connection ends.
        let mut backup: Option<Arc<beechdb::PinnedCheckpoint>> = None;
        loop {
            let m: Message = read_frame(&mut s).await?;
            // A new member's log joins the history of the master that first sends it entries.
            if let (Message::Append(_) | Message::SnapshotBegin { .. }, Some(h)) = (&m, history) {
                if let Err(e) = self.log.adopt_history(h) {
                    return Err(frame_error(e.to_string()));
                }
            }
            let reply = match m {
                Message::SnapshotBegin { .. }
                | Message::SnapshotChunk(_)
                | Message::SnapshotEnd => Reply::Snapshot(self.snapshot(m, &mut incoming).await),
                Message::BackupBegin { after } => match self.pin_for_backup(after).await {
                    Ok((pin, applied)) => {
                        let shape = Shape::of(&pin);
                        backup = Some(pin);
                        Reply::BackupBegin(Ok((shape, applied)))
                    }
                    Err(e) => Reply::BackupBegin(Err(self.client_error(e))),
                },
                Message::BackupChunk { first } => Reply::BackupChunk(match backup.clone() {
                    None => Err(ClientError::Failed(
                        "a backup chunk before its beginning".into(),
                    )),
                    Some(pin) => tokio::task::spawn_blocking(move || read_chunk(&pin, first))
                        .await
                        .unwrap_or_else(|e| Err(Error::Replication(e.to_string())))
                        .map_err(|e| self.client_error(e)),
                }),
                m => self.answer(m).await,
            };
            write_frame(&mut s, &reply).await?;
        }
    }

    /// A consistent copy of this member's environment for a hot backup, once it has applied
    /// commit `after`: pinned as a snapshot is, with the position it holds.
    async fn pin_for_backup(
        &self,
        after: u64,
    ) -> beechdb::Result<(Arc<beechdb::PinnedCheckpoint>, u64)> {
        self.raft
            .wait(Some(self.ack_timeout))
            .applied_index_at_least(Some(after), "a backup's position")
            .await
            .map_err(|e| {
                Error::Replication(format!("commit {after} not applied here in time: {e}"))
            })?;
        let sm = self.sm.clone();
        let made = tokio::task::spawn_blocking(move || sm.snapshot())
            .await
            .map_err(|e| Error::Replication(format!("the backup task failed: {e}")))??;
        let applied = made.meta.last_log_id.map_or(0, |l| l.index);
        match made.snapshot {
            SnapshotData::Pinned(pin) => Ok((pin, applied)),
            SnapshotData::Received(_) => Err(Error::Replication("not a pinned checkpoint".into())),
        }
    }

    /// One step of a snapshot arriving on a connection (see the module comment).
    async fn snapshot(
        &self,
        m: Message,
        incoming: &mut Option<(Receiver, Vote, SnapshotMeta)>,
    ) -> Result<Option<SnapshotResponse<TypeConfig>>, String> {
        match m {
            Message::SnapshotBegin { vote, meta, shape } => {
                let dir = self.sm.receiving_dir();
                let receiver = tokio::task::spawn_blocking(move || Receiver::begin(&dir, shape))
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| e.to_string())?;
                *incoming = Some((receiver, vote, meta));
                Ok(None)
            }
            Message::SnapshotChunk(bytes) => {
                let (mut receiver, vote, meta) = incoming
                    .take()
                    .ok_or("a snapshot chunk before its beginning")?;
                let receiver =
                    tokio::task::spawn_blocking(move || receiver.chunk(&bytes).map(|()| receiver))
                        .await
                        .map_err(|e| e.to_string())?
                        .map_err(|e| e.to_string())?;
                *incoming = Some((receiver, vote, meta));
                Ok(None)
            }
            _ => {
                let (receiver, vote, meta) = incoming
                    .take()
                    .ok_or("a snapshot's end before its beginning")?;
                let dir = tokio::task::spawn_blocking(move || receiver.finish())
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| e.to_string())?;
                let received = Snapshot {
                    meta,
                    snapshot: SnapshotData::Received(dir),
                };
                let installed = self.raft.install_full_snapshot(vote, received).await;
                installed.map(Some).map_err(|e| e.to_string())
            }
        }
    }

    fn not_master(&self) -> ClientError {
        let m = self.raft.metrics().borrow_watched().clone();
        let master = m.current_leader.map(|id| {
            let addr = m
                .membership_config
                .membership()
                .get_node(&id)
                .map(|n| n.addr.clone())
                .unwrap_or_default();
            (id, addr)
        });
        ClientError::NotMaster(master)
    }

    fn client_error(&self, e: Error) -> ClientError {
        match e {
            Error::NotMaster { .. } => self.not_master(),
            e => ClientError::Failed(e.to_string()),
        }
    }

    async fn answer(&self, m: Message) -> Reply {
        match m {
            Message::Hello { .. } => Reply::Hello(Ok(())),
            Message::SnapshotBegin { .. } | Message::SnapshotChunk(_) | Message::SnapshotEnd => {
                Reply::Snapshot(Err("a snapshot goes on a connection of its own".into()))
            }
            Message::BackupBegin { .. } | Message::BackupChunk { .. } => Reply::BackupChunk(Err(
                ClientError::Failed("a backup is read on the connection that began it".into()),
            )),
            Message::Append(r) => {
                let commit = r.leader_commit;
                let answer = self.raft.append_entries(r).await;
                if matches!(answer, Ok(AppendEntriesResponse::Success)) {
                    self.heard.record(commit);
                }
                Reply::Append(answer.map_err(|e| e.to_string()))
            }
            Message::Vote(r) => Reply::Vote(self.raft.vote(r).await.map_err(|e| e.to_string())),
            Message::PreVote(r) => {
                Reply::Vote(self.raft.pre_vote(r).await.map_err(|e| e.to_string()))
            }
            Message::TransferLeader(r) => Reply::TransferLeader(
                self.raft
                    .handle_transfer_leader(r)
                    .await
                    .map_err(|e| e.to_string()),
            ),
            Message::TransferMaster { to } => {
                let raft = self.raft.clone();
                let timeout = self.ack_timeout;
                let moved = crate::transfer_master(&raft, to, timeout).await;
                Reply::TransferMaster(moved.map_err(|e| self.client_error(e)))
            }
            Message::Put { db, key, value } => {
                let env = self.sm.env();
                // A commit blocks until the group applies it: off the runtime's threads.
                let put = tokio::task::spawn_blocking(move || {
                    let db = env.open_or_create_db(&db)?;
                    let t = env.begin_txn()?;
                    t.put(&db, &key, &value)?;
                    t.commit()
                })
                .await
                .unwrap_or_else(|e| Err(Error::Replication(format!("the write task failed: {e}"))));
                Reply::Put(put.map_err(|e| self.client_error(e)))
            }
            Message::Get { db, key, token } => {
                let waited = self
                    .raft
                    .wait(Some(self.ack_timeout))
                    .applied_index_at_least(Some(token), "client read")
                    .await;
                if let Err(e) = waited {
                    return Reply::Get(Err(ClientError::Failed(format!(
                        "commit {token} not applied here in time: {e}"
                    ))));
                }
                let env = self.sm.env();
                let read = match env.open_db(&db) {
                    Ok(d) => d.get(&key),
                    Err(Error::DbNotFound(_)) => Ok(None),
                    Err(e) => Err(e),
                };
                Reply::Get(read.map_err(|e| self.client_error(e)))
            }
            Message::AddMember { id, addr, voter } => {
                let added =
                    crate::add_member(&self.raft, &self.peers, &self.log, id, addr, voter).await;
                Reply::AddMember(added.map_err(|e| self.client_error(e)))
            }
            Message::Digest => {
                let env = self.sm.env();
                let raft = self.raft.clone();
                let digest = tokio::task::spawn_blocking(move || {
                    let txn = env.begin_txn()?;
                    let applied = raft
                        .metrics()
                        .borrow_watched()
                        .last_applied
                        .as_ref()
                        .map_or(0, |l| l.index);
                    let d = crate::state::digest(&env, &txn)?;
                    txn.abort();
                    Ok((applied, d))
                })
                .await
                .unwrap_or_else(|e| {
                    Err(Error::Replication(format!("the digest task failed: {e}")))
                });
                Reply::Digest(digest.map_err(|e| self.client_error(e)))
            }
            Message::Status => {
                let s = crate::status_of(&self.raft, &self.heard);
                Reply::Status(WireStatus {
                    id: s.id,
                    state: s.state.to_string(),
                    master: s.master,
                    term: s.term,
                    last_log: s.last_log,
                    committed: s.committed,
                    applied: s.applied,
                    heard_ms_ago: s.heard_ms_ago,
                    acked: s.acked,
                    acked_ms_ago: s.acked_ms_ago,
                    stopped: s.stopped,
                    history: self.log.history(),
                })
            }
        }
    }
}

/// Who opens a connection: its group, the member (0: a client) and, for a member, its log
/// (whose history it names).
#[derive(Clone)]
pub(crate) struct Caller {
    pub group: String,
    pub from: NodeId,
    pub log: Option<LogStore>,
}

impl Caller {
    fn client(group: &str) -> Caller {
        Caller {
            group: group.to_string(),
            from: 0,
            log: None,
        }
    }
}

/// Connecting to a loopback port nothing listens on can land on the very port the kernel
/// gave the connection, connecting the socket to itself (TCP's simultaneous open): it would
/// read its own frames back as the member's answers. Refused as nothing listening.
fn refuse_self_connection(s: &TcpStream, addr: &str) -> std::io::Result<()> {
    if s.local_addr()? == s.peer_addr()? {
        return Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            format!("nothing listens at {addr} (the connection met itself)"),
        ));
    }
    Ok(())
}

/// Opens a connection to `addr` and says hello.
pub(crate) async fn connect(addr: &str, caller: &Caller) -> std::io::Result<TcpStream> {
    let mut s = TcpStream::connect(addr).await?;
    refuse_self_connection(&s, addr)?;
    s.set_nodelay(true)?;
    let hello = Message::Hello {
        group: caller.group.clone(),
        history: caller.log.as_ref().and_then(LogStore::history),
        from: caller.from,
    };
    write_frame(&mut s, &hello).await?;
    match read_frame::<Reply>(&mut s).await? {
        Reply::Hello(Ok(())) => Ok(s),
        Reply::Hello(Err(why)) => Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            why,
        )),
        _ => Err(frame_error("the answer to Hello was not Hello".into())),
    }
}

/// The history of the member at `addr` of group `group` (asked as a client).
pub(crate) async fn history(addr: &str, group: &str) -> beechdb::Result<Option<u64>> {
    let mut stream = None;
    let asked = call(
        &mut stream,
        addr,
        &Caller::client(group),
        &Message::Status,
        Duration::from_secs(5),
    )
    .await;
    match asked {
        Ok(Reply::Status(s)) => Ok(s.history),
        Ok(_) => Err(Error::Replication(format!(
            "{addr} answered with the wrong kind of reply"
        ))),
        Err(e) => Err(client_io(e)),
    }
}

/// One request and its reply on `stream` (connected first if needed), within `deadline`;
/// any failure drops the connection.
async fn call(
    stream: &mut Option<TcpStream>,
    addr: &str,
    caller: &Caller,
    m: &Message,
    deadline: Duration,
) -> std::io::Result<Reply> {
    let exchange = async {
        if stream.is_none() {
            *stream = Some(connect(addr, caller).await?);
        }
        let s = stream.as_mut().unwrap();
        write_frame(s, m).await?;
        read_frame::<Reply>(s).await
    };
    let result = match tokio::time::timeout(deadline, exchange).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no reply from {addr} within {deadline:?}"),
        )),
    };
    if result.is_err() {
        *stream = None;
    }
    result
}

/// The connections one member opens to the others.
pub(crate) struct TcpEndpoint {
    pub caller: Caller,
    pub nudge: Arc<Nudge>,
}

impl RaftNetworkFactory<TypeConfig> for TcpEndpoint {
    type Network = TcpConnection;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> TcpConnection {
        TcpConnection {
            caller: self.caller.clone(),
            to: target,
            addr: node.addr.clone(),
            stream: None,
            commit_only: CommitOnly::new(Some(self.nudge.clone())),
        }
    }

    async fn new_heartbeat_client(&mut self, target: NodeId, node: &BasicNode) -> TcpConnection {
        TcpConnection {
            commit_only: CommitOnly::new(None),
            ..self.new_client(target, node).await
        }
    }
}

pub(crate) struct TcpConnection {
    caller: Caller,
    to: NodeId,
    addr: String,
    stream: Option<TcpStream>,
    commit_only: CommitOnly,
}

type Rpc<T> = Result<T, RPCError<TypeConfig>>;

fn network(e: impl ToString) -> NetworkError<TypeConfig> {
    NetworkError::from_string(e)
}

/// How long each step of a snapshot transfer may take.
const SNAPSHOT_STEP: Duration = Duration::from_secs(30);

impl TcpConnection {
    async fn rpc(
        &mut self,
        m: Message,
        option: &RPCOption,
    ) -> Result<Reply, NetworkError<TypeConfig>> {
        self.call(m, option.hard_ttl()).await
    }

    async fn call(
        &mut self,
        m: Message,
        deadline: Duration,
    ) -> Result<Reply, NetworkError<TypeConfig>> {
        call(&mut self.stream, &self.addr, &self.caller, &m, deadline)
            .await
            .map_err(|e| NetworkError::new(&e))
    }

    fn unexpected<T>(&self) -> Rpc<T> {
        Err(RPCError::Network(network(format!(
            "member {} answered with the wrong kind of reply",
            self.to
        ))))
    }

    /// Sends the pinned checkpoint of `snapshot` over a new connection, chunk by chunk,
    /// and asks the receiver to install it.
    async fn stream(
        &self,
        vote: Vote,
        snapshot: crate::SnapshotOf,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let SnapshotData::Pinned(pin) = snapshot.snapshot else {
            return Err(StreamingError::Network(network(
                "only a pinned checkpoint can be sent",
            )));
        };
        let shape = Shape::of(&pin);
        let mut stream = None;
        let mut step = async |m: Message| -> Result<
            Option<SnapshotResponse<TypeConfig>>,
            StreamingError<TypeConfig>,
        > {
            let reply = call(&mut stream, &self.addr, &self.caller, &m, SNAPSHOT_STEP)
                .await
                .map_err(|e| StreamingError::Network(NetworkError::new(&e)))?;
            match reply {
                Reply::Snapshot(r) => r.map_err(|e| StreamingError::Network(network(e))),
                _ => Err(StreamingError::Network(network(
                    "the wrong kind of reply to a snapshot",
                ))),
            }
        };
        step(Message::SnapshotBegin {
            vote,
            meta: snapshot.meta,
            shape,
        })
        .await?;
        for first in shape.chunks() {
            let pin = pin.clone();
            let chunk = tokio::task::spawn_blocking(move || read_chunk(&pin, first))
                .await
                .map_err(|e| StreamingError::Network(network(e)))?
                .map_err(|e| StreamingError::Network(network(e)))?;
            step(Message::SnapshotChunk(chunk)).await?;
        }
        step(Message::SnapshotEnd)
            .await?
            .ok_or_else(|| StreamingError::Network(network("no answer to a snapshot's end")))
    }
}

impl RaftNetworkV2<TypeConfig> for TcpConnection {
    type SnapshotData = SnapshotData;

    async fn append_entries(
        &mut self,
        mut rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Rpc<AppendEntriesResponse<TypeConfig>> {
        if self.commit_only.skip(&rpc) {
            return Ok(AppendEntriesResponse::Success);
        }
        // A request is cut to what a frame holds (every entry fits one alone): the member
        // then has the first entries, and says so.
        let mut bytes = 0;
        let fits = rpc
            .entries
            .iter()
            .take_while(|e| {
                bytes += match &e.payload {
                    openraft::EntryPayload::Normal(r) => r.commit.len() + 64,
                    _ => 1024,
                };
                bytes <= APPEND_BYTES
            })
            .count()
            .max(1);
        let cut = (fits < rpc.entries.len()).then(|| {
            rpc.entries.truncate(fits);
            rpc.entries.last().map(|e| e.log_id)
        });
        let sent = Sent::of(&rpc);
        // openraft gives every append a heartbeat's interval; a large one is granted the
        // time to carry its bytes too, or it would miss its deadline on every attempt.
        let deadline = option.hard_ttl() + Duration::from_micros(bytes as u64 / BYTES_PER_US);
        let answer = self.call(Message::Append(rpc), deadline).await;
        let accepted = matches!(
            answer,
            Ok(Reply::Append(Ok(AppendEntriesResponse::Success)))
        );
        self.commit_only.answered(sent, accepted);
        match answer {
            Ok(Reply::Append(Ok(AppendEntriesResponse::Success))) if cut.is_some() => {
                Ok(AppendEntriesResponse::PartialSuccess(cut.flatten()))
            }
            Ok(Reply::Append(r)) => r.map_err(|e| RPCError::Network(network(e))),
            Ok(_) => self.unexpected(),
            Err(e) => Err(RPCError::Network(e)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Rpc<VoteResponse<TypeConfig>> {
        match self.rpc(Message::Vote(rpc), &option).await {
            Ok(Reply::Vote(r)) => r.map_err(|e| RPCError::Network(network(e))),
            Ok(_) => self.unexpected(),
            Err(e) => Err(RPCError::Network(e)),
        }
    }

    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Rpc<VoteResponse<TypeConfig>> {
        match self.rpc(Message::PreVote(rpc), &option).await {
            Ok(Reply::Vote(r)) => r.map_err(|e| RPCError::Network(network(e))),
            Ok(_) => self.unexpected(),
            Err(e) => Err(RPCError::Network(e)),
        }
    }

    async fn transfer_leader(
        &mut self,
        req: TransferLeaderRequest<TypeConfig>,
        option: RPCOption,
    ) -> Rpc<TransferLeaderResponse<TypeConfig>> {
        match self.rpc(Message::TransferLeader(req), &option).await {
            Ok(Reply::TransferLeader(r)) => r.map_err(|e| RPCError::Network(network(e))),
            Ok(_) => self.unexpected(),
            Err(e) => Err(RPCError::Network(e)),
        }
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: crate::SnapshotOf,
        cancel: impl std::future::Future<Output = ReplicationClosed> + Send + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        tokio::select! {
            closed = cancel => Err(StreamingError::Closed(closed)),
            r = self.stream(vote, snapshot) => r,
        }
    }
}

/// A program's handle on a group it is not a member of: writes go to the master (found by
/// asking, and following the answers), reads to any member.
pub struct Client {
    group: String,
    addrs: Vec<String>,
    runtime: tokio::runtime::Runtime,
    master: Option<String>,
    timeout: Duration,
}

fn client_io(e: std::io::Error) -> Error {
    Error::Replication(format!("network: {e}"))
}

impl Client {
    /// A client of group `group`, whose members are (some of) `addrs`.
    pub fn new(group: &str, addrs: &[String]) -> beechdb::Result<Client> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::Io {
                context: "starting the client runtime".into(),
                source: e,
            })?;
        Ok(Client {
            group: group.to_string(),
            addrs: addrs.to_vec(),
            runtime,
            master: None,
            timeout: Duration::from_secs(1),
        })
    }

    /// Waits at most `timeout` for each answer (default 1 s).
    pub fn with_timeout(mut self, timeout: Duration) -> Client {
        self.timeout = timeout;
        self
    }

    /// Sends `m` to `addr` on a new connection, within the client's timeout.
    pub(crate) fn send(&self, addr: &str, m: &Message) -> beechdb::Result<Reply> {
        self.exchange(addr, m).map_err(|(_, e)| client_io(e))
    }

    /// Like [`Client::send`], and on failure whether the request was surely not delivered
    /// (`true`: no connection was made, so it can go elsewhere).
    fn exchange(&self, addr: &str, m: &Message) -> Result<Reply, (bool, std::io::Error)> {
        let t = self.timeout;
        self.runtime.block_on(async {
            let caller = Caller::client(&self.group);
            let connected = tokio::time::timeout(t, connect(addr, &caller)).await;
            let mut s = match connected {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return Err((true, e)),
                Err(_) => {
                    let e = std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("{addr} did not answer within {t:?}"),
                    );
                    return Err((true, e));
                }
            };
            let asked = async {
                write_frame(&mut s, m).await?;
                read_frame::<Reply>(&mut s).await
            };
            match tokio::time::timeout(t, asked).await {
                Ok(r) => r.map_err(|e| (false, e)),
                Err(_) => Err((
                    false,
                    std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("no answer from {addr} within {t:?}"),
                    ),
                )),
            }
        })
    }

    /// Commits `key = value` in `db` on the master, wherever it is now; the commit token.
    /// Tries the members until one is master or `patience` runs out. A request that
    /// reached a member and got no answer fails at once with [`Error::Replication`]: it
    /// may or may not be committed, and sending it again could commit it twice.
    pub fn put(
        &mut self,
        db: &str,
        key: &[u8],
        value: &[u8],
        patience: Duration,
    ) -> beechdb::Result<u64> {
        let deadline = std::time::Instant::now() + patience;
        let m = Message::Put {
            db: db.to_string(),
            key: key.to_vec(),
            value: value.to_vec(),
        };
        let mut next = 0;
        loop {
            let addr = match self.master.clone() {
                Some(a) => a,
                None => {
                    next += 1;
                    self.addrs[next % self.addrs.len()].clone()
                }
            };
            let last_error = match self.exchange(&addr, &m) {
                Ok(Reply::Put(Ok(token))) => {
                    self.master = Some(addr);
                    return Ok(token);
                }
                Ok(Reply::Put(Err(ClientError::NotMaster(Some((_, a)))))) if !a.is_empty() => {
                    self.master = Some(a);
                    continue;
                }
                Ok(Reply::Put(Err(ClientError::Failed(why)))) => {
                    self.master = None;
                    return Err(Error::Replication(why));
                }
                Ok(_) => Error::Replication(format!("{addr} knows no master")),
                Err((true, e)) => client_io(e),
                Err((false, e)) => {
                    self.master = None;
                    return Err(Error::Replication(format!(
                        "{e}: the write may or may not be committed"
                    )));
                }
            };
            self.master = None;
            if std::time::Instant::now() >= deadline {
                return Err(last_error);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Asks the group's master (found from the known members) to add member `id` at
    /// `addr`, as a voter or not; retries until `patience` runs out.
    pub fn add_member(
        &self,
        id: NodeId,
        addr: &str,
        voter: bool,
        patience: Duration,
    ) -> beechdb::Result<()> {
        let m = Message::AddMember {
            id,
            addr: addr.to_string(),
            voter,
        };
        self.at_master(&m, patience, |r| match r {
            Reply::AddMember(r) => Some(r),
            _ => None,
        })
    }

    /// Asks the group's master to hand its role to member `to`; retries until `patience`
    /// runs out.
    pub fn transfer_master(&self, to: NodeId, patience: Duration) -> beechdb::Result<()> {
        self.at_master(&Message::TransferMaster { to }, patience, |r| match r {
            Reply::TransferMaster(r) => Some(r),
            _ => None,
        })
    }

    /// Sends `m` to the master, found from the known members and their answers, until it
    /// succeeds or `patience` runs out; `outcome` reads the master's reply.
    fn at_master(
        &self,
        m: &Message,
        patience: Duration,
        outcome: impl Fn(Reply) -> Option<Result<(), ClientError>>,
    ) -> beechdb::Result<()> {
        let deadline = std::time::Instant::now() + patience;
        let mut at = self.addrs.first().cloned().ok_or_else(|| {
            Error::InvalidArgument("a client needs at least one member address".into())
        })?;
        let mut next = 0;
        loop {
            let failure = match self.send(&at, m).map(&outcome) {
                Ok(Some(Ok(()))) => return Ok(()),
                Ok(Some(Err(ClientError::NotMaster(Some((_, a)))))) if !a.is_empty() && a != at => {
                    at = a;
                    continue;
                }
                Ok(Some(Err(e))) => Error::Replication(format!("{e:?}")),
                Ok(None) => {
                    Error::Replication(format!("{at} answered with the wrong kind of reply"))
                }
                Err(e) => e,
            };
            if std::time::Instant::now() >= deadline {
                return Err(failure);
            }
            next += 1;
            at = self.addrs[next % self.addrs.len()].clone();
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Reads `key` of `db` at member `addr` once it has applied commit `token`.
    pub fn get(
        &self,
        addr: &str,
        db: &str,
        key: &[u8],
        token: u64,
    ) -> beechdb::Result<Option<Vec<u8>>> {
        let m = Message::Get {
            db: db.to_string(),
            key: key.to_vec(),
            token,
        };
        match self.send(addr, &m)? {
            Reply::Get(Ok(v)) => Ok(v),
            Reply::Get(Err(e)) => Err(Error::Replication(format!("{e:?}"))),
            _ => Err(Error::Replication(format!(
                "{addr} answered with the wrong kind of reply"
            ))),
        }
    }

    /// A digest of the contents of the member at `addr`, and the position it had applied.
    pub fn digest(&self, addr: &str) -> beechdb::Result<(u64, u64)> {
        match self.send(addr, &Message::Digest)? {
            Reply::Digest(Ok(d)) => Ok(d),
            Reply::Digest(Err(e)) => Err(Error::Replication(format!("{e:?}"))),
            _ => Err(Error::Replication(format!(
                "{addr} answered with the wrong kind of reply"
            ))),
        }
    }

    /// A hot backup of the running member at `addr` into the new directory `dest`: a
    /// consistent copy of its environment, taken once it has applied commit `after` (0: at
    /// once), streamed page by page while the group goes on; the copy opens on its own as a
    /// plain environment. Returns the position the copy holds.
    pub fn backup(&self, addr: &str, after: u64, dest: &std::path::Path) -> beechdb::Result<u64> {
        let caller = Caller::client(&self.group);
        let step = self.timeout.max(Duration::from_secs(30));
        self.runtime.block_on(async {
            let mut stream = None;
            let asked = call(
                &mut stream,
                addr,
                &caller,
                &Message::BackupBegin { after },
                step,
            )
            .await;
            let (shape, applied) = match asked.map_err(client_io)? {
                Reply::BackupBegin(r) => r.map_err(|e| Error::Replication(format!("{e:?}")))?,
                _ => {
                    return Err(Error::Replication(format!(
                        "{addr} answered with the wrong kind of reply"
                    )))
                }
            };
            let mut receiver = Receiver::begin(dest, shape)?;
            for first in shape.chunks() {
                let m = Message::BackupChunk { first };
                let chunk = match call(&mut stream, addr, &caller, &m, step)
                    .await
                    .map_err(client_io)?
                {
                    Reply::BackupChunk(r) => r.map_err(|e| Error::Replication(format!("{e:?}")))?,
                    _ => {
                        return Err(Error::Replication(format!(
                            "{addr} answered with the wrong kind of reply"
                        )))
                    }
                };
                receiver.chunk(&chunk)?;
            }
            receiver.finish()?;
            Ok(applied)
        })
    }

    /// The status of the member at `addr`.
    pub fn status(&self, addr: &str) -> beechdb::Result<WireStatus> {
        match self.send(addr, &Message::Status)? {
            Reply::Status(s) => Ok(s),
            _ => Err(Error::Replication(format!(
                "{addr} answered with the wrong kind of reply"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_connection_that_meets_itself_is_refused() {
        let port = spare_loopback_addr().unwrap();
        let addr: std::net::SocketAddr = port.parse().unwrap();
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(addr).unwrap();
        // Bound to the port it connects to, with nothing listening: it meets itself.
        let s = socket.connect(addr).await.unwrap();
        let err = refuse_self_connection(&s, &port).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
        assert!(err.to_string().contains("met itself"), "{err}");
        let other = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let to = other.local_addr().unwrap().to_string();
        let s = TcpStream::connect(&to).await.unwrap();
        refuse_self_connection(&s, &to).unwrap();
    }

    #[test]
    fn spare_addresses_are_free_below_the_ephemeral_range_and_never_repeat() {
        let addrs: Vec<String> = (0..20).map(|_| spare_loopback_addr().unwrap()).collect();
        let ports: std::collections::HashSet<u16> = addrs
            .iter()
            .map(|a| a.parse::<std::net::SocketAddr>().unwrap().port())
            .collect();
        assert_eq!(ports.len(), addrs.len(), "{addrs:?}");
        for a in &addrs {
            std::net::TcpListener::bind(a).unwrap();
        }
    }
}
