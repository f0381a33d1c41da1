//! The in-process network between the members of a group, with faults a test controls:
//! links cut one way or both, members isolated, healed again.
//!
//! Owns: [`Network`] and openraft's network traits over it. May call: the members' Raft
//! nodes. Invariants: a message crosses a link only while the link is up in its direction;
//! a reply crosses back only while the reverse link is up (a request delivered whose reply
//! is lost, as on a real network); a member that left is unreachable.

use crate::{Heard, NodeId, Raft, TypeConfig};
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, RaftNetwork, RaftNetworkFactory};
use parking_lot::RwLock;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

#[derive(Default)]
struct Links {
    members: HashMap<NodeId, (Raft, Arc<Heard>)>,
    /// Directed links that are down: (from, to).
    down: HashSet<(NodeId, NodeId)>,
}

/// The members of one or more groups in this process, and the links between them.
#[derive(Clone, Default)]
pub struct Network {
    links: Arc<RwLock<Links>>,
}

impl Network {
    pub fn new() -> Network {
        Network::default()
    }

    pub(crate) fn register(&self, id: NodeId, raft: Raft, heard: Arc<Heard>) {
        self.links.write().members.insert(id, (raft, heard));
    }

    pub(crate) fn leave(&self, id: NodeId) {
        self.links.write().members.remove(&id);
    }

    pub(crate) fn endpoint(&self, id: NodeId) -> Endpoint {
        Endpoint {
            net: self.clone(),
            from: id,
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

    /// Brings every link up again.
    pub fn heal(&self) {
        self.links.write().down.clear();
    }

    /// The Raft node at `to` if a message from `from` can reach it.
    fn reach(&self, from: NodeId, to: NodeId) -> Result<(Raft, Arc<Heard>), NetworkError> {
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
    fn reply(&self, from: NodeId, to: NodeId) -> Result<(), NetworkError> {
        match self.links.read().down.contains(&(to, from)) {
            true => Err(unreachable(format!(
                "the link from {to} back to {from} is down"
            ))),
            false => Ok(()),
        }
    }
}

fn unreachable(why: String) -> NetworkError {
    NetworkError::new(&std::io::Error::new(std::io::ErrorKind::NotConnected, why))
}

/// One member's side of the network.
pub(crate) struct Endpoint {
    net: Network,
    from: NodeId,
}

impl RaftNetworkFactory<TypeConfig> for Endpoint {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, _node: &BasicNode) -> Connection {
        Connection {
            net: self.net.clone(),
            from: self.from,
            to: target,
        }
    }
}

pub(crate) struct Connection {
    net: Network,
    from: NodeId,
    to: NodeId,
}

impl Connection {
    /// Delivers a request and carries its reply back, each over its own link.
    fn finish<T, E: std::error::Error>(
        &self,
        answer: Result<T, RaftError<NodeId, E>>,
    ) -> Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>> {
        self.net
            .reply(self.from, self.to)
            .map_err(RPCError::Network)?;
        answer.map_err(|e| RPCError::RemoteError(RemoteError::new(self.to, e)))
    }
}

type Rpc<T, E = openraft::error::Infallible> =
    Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Rpc<AppendEntriesResponse<NodeId>> {
        let (raft, heard) = self
            .net
            .reach(self.from, self.to)
            .map_err(RPCError::Network)?;
        let commit = rpc.leader_commit;
        let answer = raft.append_entries(rpc).await;
        if matches!(answer, Ok(AppendEntriesResponse::Success)) {
            heard.record(commit);
        }
        self.finish(answer)
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Rpc<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        let (raft, _) = self
            .net
            .reach(self.from, self.to)
            .map_err(RPCError::Network)?;
        let answer = raft.install_snapshot(rpc).await;
        self.finish(answer)
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> Rpc<VoteResponse<NodeId>> {
        let (raft, _) = self
            .net
            .reach(self.from, self.to)
            .map_err(RPCError::Network)?;
        let answer = raft.vote(rpc).await;
        self.finish(answer)
    }
}
