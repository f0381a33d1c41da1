//! The in-process network between the members of a group, with faults a test controls:
//! links cut one way or both, delayed (by a random time between two bounds, so messages
//! pass each other) or lossy, members isolated or paused (as under SIGSTOP), healed again.
//!
//! Owns: [`Network`] and openraft's network traits over it. May call: the members' Raft
//! nodes and state machines (a snapshot is written straight into the receiver's directory,
//! chunk by chunk, each chunk crossing the link). Invariants: a message crosses a link only while the link is up in its direction;
//! a reply crosses back only while the reverse link is up (a request delivered whose reply
//! is lost, as on a real network); a member that left is unreachable; nothing reaches or
//! leaves a paused member until it is resumed.

use crate::commit_only::{CommitOnly, Nudge, Sent};
use crate::log_store::LogStore;
use crate::snapshot::{read_chunk, Receiver, Shape};
use crate::state::{SnapshotData, StateMachine};
use crate::{Heard, NodeId, Raft, TypeConfig, Vote};
use openraft::error::{NetworkError, RPCError, RaftError, ReplicationClosed, StreamingError};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, TransferLeaderRequest,
    TransferLeaderResponse, VoteRequest, VoteResponse,
};
use openraft::{BasicNode, RaftNetworkFactory, RaftNetworkV2, Snapshot};
use parking_lot::RwLock;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// What the network reaches of a member.
#[derive(Clone)]
struct Peer {
    raft: Raft,
    heard: Arc<Heard>,
    sm: Arc<StateMachine>,
    log: LogStore,
}

#[derive(Default)]
struct Links {
    members: HashMap<NodeId, Peer>,
    /// Directed links that are down: (from, to).
    down: HashSet<(NodeId, NodeId)>,
    /// Directed links' least and largest delays, and the share of messages they lose.
    delay: HashMap<(NodeId, NodeId), (std::time::Duration, std::time::Duration)>,
    loss: HashMap<(NodeId, NodeId), f64>,
    paused: HashSet<NodeId>,
}

/// The members of one or more groups in this process, and the links between them.
#[derive(Clone, Default)]
pub struct Network {
    links: Arc<RwLock<Links>>,
    resumed: Arc<tokio::sync::Notify>,
    dice: Arc<std::sync::atomic::AtomicU64>,
}

impl Network {
    pub fn new() -> Network {
        Network::default()
    }

    pub(crate) fn register(
        &self,
        id: NodeId,
        raft: Raft,
        heard: Arc<Heard>,
        sm: Arc<StateMachine>,
        log: LogStore,
    ) {
        let peer = Peer {
            raft,
            heard,
            sm,
            log,
        };
        self.links.write().members.insert(id, peer);
    }

    /// The history of member `id`'s log (`None` when it is not running).
    pub(crate) fn history(&self, id: NodeId) -> Option<Option<u64>> {
        self.links.read().members.get(&id).map(|p| p.log.history())
    }

    pub(crate) fn leave(&self, id: NodeId) {
        self.links.write().members.remove(&id);
    }

    pub(crate) fn endpoint(&self, id: NodeId, nudge: Arc<Nudge>) -> Endpoint {
        Endpoint {
            net: self.clone(),
            from: id,
            nudge,
        }
    }

    /// Takes the link from `from` to `to` down (one way).
    pub fn cut(&self, from: NodeId, to: NodeId) {
        self.links.write().down.insert((from, to));
    }

    /// Cuts member `id` off from every other member, both ways.
    pub fn isolate(&self, id: NodeId) {
        let mut l = self.links.write();
        let others: Vec<NodeId> = l.members.keys().copied().filter(|&o| o != id).collect();
        for o in others {
            l.down.insert((id, o));
            l.down.insert((o, id));
        }
    }

    /// Delays every message from `from` to `to` by a random time up to `most`.
    pub fn delay(&self, from: NodeId, to: NodeId, most: std::time::Duration) {
        self.delay_between(from, to, std::time::Duration::ZERO, most);
    }

    /// Delays every message from `from` to `to` by a random time from `least` to `most`.
    pub fn delay_between(
        &self,
        from: NodeId,
        to: NodeId,
        least: std::time::Duration,
        most: std::time::Duration,
    ) {
        self.links.write().delay.insert((from, to), (least, most));
    }

    /// Loses the share `p` (0 to 1) of the messages from `from` to `to`.
    pub fn lose(&self, from: NodeId, to: NodeId, p: f64) {
        self.links.write().loss.insert((from, to), p);
    }

    /// Holds every message to or from member `id` until [`Network::resume`].
    pub fn pause(&self, id: NodeId) {
        self.links.write().paused.insert(id);
    }

    pub fn resume(&self, id: NodeId) {
        self.links.write().paused.remove(&id);
        self.resumed.notify_waiters();
    }

    /// Brings every link up again, without delay or loss, and resumes every member.
    pub fn heal(&self) {
        let mut l = self.links.write();
        l.down.clear();
        l.delay.clear();
        l.loss.clear();
        l.paused.clear();
        drop(l);
        self.resumed.notify_waiters();
    }

    /// A number in [0, 1) (xorshift: no seed to manage, no dependency).
    fn roll(&self) -> f64 {
        use std::sync::atomic::Ordering::Relaxed;
        let mut x = self.dice.fetch_add(0x9e37_79b9_7f4a_7c15, Relaxed) | 1;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Carries a message from `from` to `to` across the link's faults: waits while either
    /// end is paused, loses it or delays it as the link says.
    async fn transit(&self, from: NodeId, to: NodeId) -> Result<(), NetworkError<TypeConfig>> {
        loop {
            let resumed = self.resumed.notified();
            {
                let l = self.links.read();
                if !l.paused.contains(&from) && !l.paused.contains(&to) {
                    break;
                }
            }
            resumed.await;
        }
        let (delay, loss) = {
            let l = self.links.read();
            (
                l.delay.get(&(from, to)).copied(),
                l.loss.get(&(from, to)).copied(),
            )
        };
        if loss.is_some_and(|p| self.roll() < p) {
            return Err(unreachable(format!(
                "a message from {from} to {to} was lost"
            )));
        }
        if let Some((least, most)) = delay {
            tokio::time::sleep(least + most.saturating_sub(least).mul_f64(self.roll())).await;
        }
        Ok(())
    }

    /// The Raft node at `to` if a message from `from` can reach it.
    fn reach(&self, from: NodeId, to: NodeId) -> Result<Peer, NetworkError<TypeConfig>> {
        let l = self.links.read();
        if l.down.contains(&(from, to)) {
            return Err(unreachable(format!("the link from {from} to {to} is down")));
        }
        l.members
            .get(&to)
            .cloned()
            .ok_or_else(|| unreachable(format!("member {to} is not running")))
    }

    /// Whether a reply from `to` can get back to `from`.
    fn reply(&self, from: NodeId, to: NodeId) -> Result<(), NetworkError<TypeConfig>> {
        match self.links.read().down.contains(&(to, from)) {
            true => Err(unreachable(format!(
                "the link from {to} back to {from} is down"
            ))),
            false => Ok(()),
        }
    }
}

fn unreachable(why: String) -> NetworkError<TypeConfig> {
    NetworkError::new(&std::io::Error::new(std::io::ErrorKind::NotConnected, why))
}

/// One member's side of the network.
pub(crate) struct Endpoint {
    net: Network,
    from: NodeId,
    nudge: Arc<Nudge>,
}

impl RaftNetworkFactory<TypeConfig> for Endpoint {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, _node: &BasicNode) -> Connection {
        Connection {
            net: self.net.clone(),
            from: self.from,
            to: target,
            commit_only: CommitOnly::new(Some(self.nudge.clone())),
        }
    }

    async fn new_heartbeat_client(&mut self, target: NodeId, node: &BasicNode) -> Connection {
        Connection {
            commit_only: CommitOnly::new(None),
            ..self.new_client(target, node).await
        }
    }
}

pub(crate) struct Connection {
    net: Network,
    from: NodeId,
    to: NodeId,
    commit_only: CommitOnly,
}

impl Connection {
    /// Carries a request across the link to its member: that member, refused when its log
    /// belongs to another group's history (as a TCP member refuses one at `Hello`).
    async fn deliver(&self) -> Result<Peer, NetworkError<TypeConfig>> {
        self.net.transit(self.from, self.to).await?;
        let peer = self.net.reach(self.from, self.to)?;
        let ours = self.net.history(self.from).flatten();
        match (ours, peer.log.history()) {
            (Some(a), Some(b)) if a != b => Err(unreachable(format!(
                "member {} has a log of another group's history",
                self.to
            ))),
            _ => Ok(peer),
        }
    }

    /// Makes the receiver's log part of this member's history, when it has none yet (its
    /// first entries or copy come from this group).
    fn share_history(&self, peer: &Peer) -> Result<(), NetworkError<TypeConfig>> {
        match self.net.history(self.from).flatten() {
            Some(h) => peer
                .log
                .adopt_history(h)
                .map_err(|e| unreachable(e.to_string())),
            None => Ok(()),
        }
    }

    async fn send_append(
        &self,
        rpc: AppendEntriesRequest<TypeConfig>,
    ) -> Rpc<AppendEntriesResponse<TypeConfig>> {
        let peer = self.deliver().await.map_err(RPCError::Network)?;
        self.share_history(&peer).map_err(RPCError::Network)?;
        let commit = rpc.leader_commit;
        let answer = peer.raft.append_entries(rpc).await;
        if matches!(answer, Ok(AppendEntriesResponse::Success)) {
            peer.heard.record(commit);
        }
        self.finish(answer).await
    }

    /// Delivers a request and carries its reply back, each over its own link.
    async fn finish<T>(&self, answer: Result<T, RaftError<TypeConfig>>) -> Rpc<T> {
        self.net
            .transit(self.to, self.from)
            .await
            .map_err(RPCError::Network)?;
        self.net
            .reply(self.from, self.to)
            .map_err(RPCError::Network)?;
        answer.map_err(|e| RPCError::Network(NetworkError::new(&e)))
    }

    /// Copies the pinned checkpoint into a directory of the receiver, each chunk crossing
    /// the link; the receiver then installs it.
    async fn stream(
        &self,
        vote: Vote,
        snapshot: crate::SnapshotOf,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let SnapshotData::Pinned(pin) = snapshot.snapshot else {
            return Err(StreamingError::Network(NetworkError::from_string(
                "only a pinned checkpoint can be sent",
            )));
        };
        let peer = self.deliver().await?;
        self.share_history(&peer)?;
        let shape = Shape::of(&pin);
        let storage_error =
            |e: beechdb::Error| StreamingError::Network(NetworkError::from_string(e));
        let mut receiver =
            Receiver::begin(&peer.sm.receiving_dir(), shape).map_err(storage_error)?;
        for first in shape.chunks() {
            self.net.transit(self.from, self.to).await?;
            self.net.reach(self.from, self.to)?;
            let pin = pin.clone();
            let chunk = tokio::task::spawn_blocking(move || read_chunk(&pin, first))
                .await
                .map_err(|e| StreamingError::Network(NetworkError::from_string(e)))?
                .map_err(storage_error)?;
            receiver.chunk(&chunk).map_err(storage_error)?;
        }
        let dir = receiver.finish().map_err(storage_error)?;
        let received = Snapshot {
            meta: snapshot.meta,
            snapshot: SnapshotData::Received(dir),
        };
        let answer = peer.raft.install_full_snapshot(vote, received).await;
        self.net.transit(self.to, self.from).await?;
        self.net.reply(self.from, self.to)?;
        answer.map_err(|e| StreamingError::Network(NetworkError::new(&e)))
    }
}

type Rpc<T> = Result<T, RPCError<TypeConfig>>;

impl RaftNetworkV2<TypeConfig> for Connection {
    type SnapshotData = SnapshotData;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Rpc<AppendEntriesResponse<TypeConfig>> {
        if self.commit_only.skip(&rpc) {
            return Ok(AppendEntriesResponse::Success);
        }
        let sent = Sent::of(&rpc);
        let answer = self.send_append(rpc).await;
        let accepted = matches!(answer, Ok(AppendEntriesResponse::Success));
        self.commit_only.answered(sent, accepted);
        answer
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Rpc<VoteResponse<TypeConfig>> {
        let peer = self.deliver().await.map_err(RPCError::Network)?;
        let answer = peer.raft.vote(rpc).await;
        self.finish(answer).await
    }

    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Rpc<VoteResponse<TypeConfig>> {
        let peer = self.deliver().await.map_err(RPCError::Network)?;
        let answer = peer.raft.pre_vote(rpc).await;
        self.finish(answer).await
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

    async fn transfer_leader(
        &mut self,
        req: TransferLeaderRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Rpc<TransferLeaderResponse<TypeConfig>> {
        let peer = self.deliver().await.map_err(RPCError::Network)?;
        let answer = peer
            .raft
            .handle_transfer_leader(req)
            .await
            .map_err(RaftError::Fatal);
        self.finish(answer).await
    }
}
