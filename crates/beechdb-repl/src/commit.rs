//! The commit path of a member: how a transaction's commit on the master becomes an entry of
//! the replicated log, and when `commit` returns.
//!
//! Owns: [`CommitPath`] (the engine's `Replicator` for a member), [`Reply`] (openraft's
//! responder for an entry, which carries the transaction's locks), and the ack policies'
//! waits. May call: the member's Raft node, its log store (for the ack policy NONE), the
//! engine. Invariants:
//! - a committer proposes its entry itself (no hop through a task), and entries are
//!   pipelined: many may be in flight, and openraft appends, replicates and applies them in
//!   batches;
//! - a transaction's locks are released only when its entry is applied on this member (or
//!   surely never will be), whatever its ack policy, so no later transaction writes its
//!   keys against a state that lacks it;
//! - an ack-NONE commit returns once this member's log holds its entry, except when it
//!   could still be refused at apply (a database removal ahead of it not yet applied, DDL
//!   of its own, or parts sent ahead of it): then it waits for the apply, so an `Ok` is
//!   never taken back;
//! - a transaction too large for one entry sends its parts one at a time, each once the
//!   one before is applied here, and gives them up (a `Drop` entry) if it fails after;
//! - a committer polls for its outcome only while no other committer waits, and the
//!   runtime is kept from sleeping only while one polls (see [`Waits`]).

use crate::log_store::{LogStore, Stored};
use crate::{
    nanos, raft_error, write_error, MemberConfig, NodeId, Raft, Request, Stage, TypeConfig,
};
use beechdb::{
    AckPolicy, Durability, Error, GroupDurability, HeldLocks, Replicator, Result, Staged,
};
use openraft::async_runtime::WatchReceiver as _;
use openraft::error::{ClientWriteError, ForwardReason};
use openraft::raft::responder::Responder;
use openraft::raft::ClientWriteResponse;
use openraft::ServerState;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The largest encoded commit a member proposes: one entry must fit a frame of the TCP
/// transport with room to spare (see [`crate::tcp::MAX_FRAME`]).
pub(crate) const MAX_COMMIT: usize = 32 << 20;

/// What a committer waits for: its entry stored in this member's log (ack NONE), or its
/// outcome once applied (or refused before).
pub(crate) enum Event {
    Stored(u64),
    Done(std::result::Result<ClientWriteResponse<TypeConfig>, Error>),
    /// Refused before it was appended; try again with these locks.
    Again(HeldLocks),
}

/// openraft's responder for one entry: hands the outcome and the transaction's locks to
/// the committer's closure, which releases the locks (before it tells the committer, so a
/// committer that goes on never waits for its own locks) or gives them back for another
/// attempt. A reply dropped without an outcome releases them.
pub(crate) struct Reply<T> {
    send: Option<Box<dyn FnOnce(T, HeldLocks) + Send>>,
    locks: Option<HeldLocks>,
}

impl<T: 'static> Reply<T> {
    fn new(send: impl FnOnce(T, HeldLocks) + Send + 'static, locks: HeldLocks) -> Reply<T> {
        Reply {
            send: Some(Box::new(send)),
            locks: Some(locks),
        }
    }
}

impl<T: openraft::OptionalSend + 'static> Responder<TypeConfig, T> for Reply<T> {
    fn on_complete(mut self, result: T) {
        if let (Some(send), Some(locks)) = (self.send.take(), self.locks.take()) {
            send(result, locks);
        }
    }
}

/// Milliseconds since openraft's `at`.
pub(crate) fn since<I: std::ops::Deref<Target = openraft::TokioInstant>>(at: &I) -> u64 {
    use openraft::Instant as _;
    at.elapsed().as_millis() as u64
}

/// Takes over the environment's commits on a member (see the module comment).
pub(crate) struct CommitPath {
    raft: Raft,
    runtime: tokio::runtime::Handle,
    log: LogStore,
    id: NodeId,
    ack_timeout: Duration,
    ack: AckPolicy,
    replicas: Option<Durability>,
    /// How recently a member must have acknowledged the master to count as in contact.
    contact: Duration,
    /// Numbers for ack-NONE entries, which the log store reports back.
    next_notify: AtomicU64,
    /// Held while an ack-NONE commit decides whether it may return early and proposes, and
    /// while a commit with DDL proposes, so that the decision sees every DDL entry ahead.
    ordering: Mutex<()>,
    /// This member's DDL commits proposed and not yet applied.
    own_ddl: AtomicU64,
    /// Writes beyond which a commit goes in parts, and the last number given to one.
    part_bytes: usize,
    last_staged: AtomicU64,
    waits: Waits,
}

/// Keeps the member's runtime thread from sleeping while a lone committer polls: asleep, it
/// is woken by each commit's proposal (an eventfd write, then a switch back in). A task on
/// the runtime yields to the runtime's other work in a loop until no committer has polled
/// for [`AWAKE_FOR`], then sleeps until one polls again.
struct KeepAwake {
    /// When a committer last began to poll, as [`nanos`] gives it.
    last_poll: AtomicU64,
    /// The task is looping (not asleep on `wake`).
    looping: AtomicBool,
    wake: tokio::sync::Notify,
}

/// How long the runtime stays awake after a committer last polled.
const AWAKE_FOR: Duration = Duration::from_millis(1);

impl KeepAwake {
    fn new() -> KeepAwake {
        KeepAwake {
            last_poll: AtomicU64::new(0),
            looping: AtomicBool::new(false),
            wake: tokio::sync::Notify::new(),
        }
    }

    fn polled_lately(&self) -> bool {
        let now = nanos(Instant::now());
        now.saturating_sub(self.last_poll.load(SeqCst)) < AWAKE_FOR.as_nanos() as u64
    }

    /// A committer begins to poll.
    fn polling(&self) {
        self.last_poll.store(nanos(Instant::now()), SeqCst);
        if !self.looping.load(SeqCst) {
            self.wake.notify_one();
        }
    }

    /// The task: runs until the runtime stops.
    async fn run(self: Arc<Self>) {
        loop {
            self.looping.store(true, SeqCst);
            while self.polled_lately() {
                tokio::task::yield_now().await;
            }
            self.looping.store(false, SeqCst);
            // A committer that polled after the check above and saw `looping` still set
            // did not notify: look again before sleeping (both sides store, then load the
            // other's, all SeqCst, so one of them sees the other).
            if !self.polled_lately() {
                self.wake.notified().await;
            }
        }
    }
}

/// How committers wait for their outcomes. A committer asleep costs the member's runtime
/// thread a wake-up (a futex call, about a tenth of its time with one committer) and itself
/// a switch back in, which on loopback take as long as the rest of a commit. So a committer
/// that waits alone polls for its outcome (yielding its core between polls) for up to
/// `poll_for` before it sleeps, when waits have lately been shorter than that, and keeps the
/// runtime awake meanwhile (see [`KeepAwake`]). Committers that wait together get their
/// outcomes in batches and sleep: one that begins to wait while another does marks them
/// crowded for [`CROWDED_FOR`], and none polls meanwhile.
struct Waits {
    poll_for: Duration,
    runtime: Arc<KeepAwake>,
    waiting: AtomicUsize,
    /// A moving average of waits, in nanoseconds.
    lately: AtomicU64,
    /// Until when committers count as crowded, as [`nanos`] gives it.
    crowded_until: AtomicU64,
}

/// How long committers count as crowded after two waited at once.
const CROWDED_FOR: Duration = Duration::from_millis(10);

impl Waits {
    fn new(poll_for: Duration) -> Waits {
        Waits {
            poll_for,
            runtime: Arc::new(KeepAwake::new()),
            waiting: AtomicUsize::new(0),
            lately: AtomicU64::new(0),
            crowded_until: AtomicU64::new(0),
        }
    }

    /// Counts a committer in that begins to wait at `now`, and says whether it polls.
    fn begin(&self, now: Instant) -> bool {
        let now = nanos(now);
        if self.waiting.fetch_add(1, Relaxed) > 0 {
            let until = now + CROWDED_FOR.as_nanos() as u64;
            self.crowded_until.fetch_max(until, Relaxed);
            return false;
        }
        self.crowded_until.load(Relaxed) <= now
            && self.lately.load(Relaxed) < self.poll_for.as_nanos() as u64
    }

    /// Counts out a committer whose wait took `took`.
    fn end(&self, took: Duration) {
        self.waiting.fetch_sub(1, Relaxed);
        let took = took.as_nanos().min(u64::MAX as u128) as u64;
        let lately = self.lately.load(Relaxed);
        self.lately.store(lately - lately / 8 + took / 8, Relaxed);
    }

    /// Waits on `events` until `deadline`, polling first when [`Waits::begin`] says so.
    fn wait(
        &self,
        events: &mpsc::Receiver<Event>,
        poll: bool,
        deadline: Instant,
    ) -> std::result::Result<Event, mpsc::RecvTimeoutError> {
        let started = Instant::now();
        let polled = if self.begin(started) && poll {
            self.runtime.polling();
            poll_until(events, deadline.min(started + self.poll_for))
        } else {
            None
        };
        let got = polled.unwrap_or_else(|| {
            events.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        });
        self.end(started.elapsed());
        got
    }
}

/// What `events` brings before `until`, polled, or `None`.
fn poll_until(
    events: &mpsc::Receiver<Event>,
    until: Instant,
) -> Option<std::result::Result<Event, mpsc::RecvTimeoutError>> {
    loop {
        match events.try_recv() {
            Ok(e) => return Some(Ok(e)),
            Err(mpsc::TryRecvError::Disconnected) => {
                return Some(Err(mpsc::RecvTimeoutError::Disconnected))
            }
            Err(mpsc::TryRecvError::Empty) if Instant::now() >= until => return None,
            Err(mpsc::TryRecvError::Empty) => std::thread::yield_now(),
        }
    }
}

impl CommitPath {
    /// The durability of a commit with durability `d` and, if given, `group`.
    fn policy(&self, d: Durability, group: Option<GroupDurability>) -> GroupDurability {
        group.unwrap_or(GroupDurability {
            master: d,
            replicas: self.replicas.unwrap_or(d),
            ack: self.ack,
        })
    }

    /// Proposes `mark` and `part` as the next part of `s`, returning once this member has
    /// stored it, as durably as `policy` makes the commit it goes ahead of: a part a
    /// member acknowledged must not vanish from its log in a power cut that commit
    /// survives (openraft counts it replicated, and a log that lost it would no longer
    /// match the master's).
    fn stage_one(
        &self,
        (mark, part): (&[u8], &[u8]),
        s: &mut Staged,
        policy: GroupDurability,
    ) -> Result<()> {
        let deadline = Instant::now() + self.ack_timeout;
        let stage = Stage::Part {
            epoch: s.epoch,
            id: s.id,
            seq: s.parts,
        };
        let not_committed =
            |why: &str| Error::Replication(format!("{why}; the transaction was not committed"));
        loop {
            let request = Request {
                // One copy per attempt: the request is consumed by it.
                commit: [mark, part].concat(),
                master_sync: policy.master == Durability::Sync,
                replica_sync: policy.replicas == Durability::Sync,
                notify: 0,
                proposer: self.id,
                staged: Some(stage),
            };
            let raft = self.raft.clone();
            let left = deadline.saturating_duration_since(Instant::now());
            let written = self.runtime.block_on(async move {
                tokio::time::timeout(left, raft.client_write(request)).await
            });
            match written {
                Ok(Ok(r)) if r.log_id.leader_id.term == s.epoch => {
                    s.parts += 1;
                    return Ok(());
                }
                Ok(Ok(_)) => return Err(not_committed("the master changed while sending it")),
                Ok(Err(openraft::error::RaftError::APIError(
                    ClientWriteError::ForwardToLeader(f),
                ))) if f.reason == ForwardReason::LeaseExpired && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                Ok(Err(e)) => return Err(raft_error(e)),
                Err(_) => {
                    return Err(not_committed(&format!(
                        "the group did not store a part of it within {:?}",
                        self.ack_timeout
                    )))
                }
            }
        }
    }

    pub(crate) fn new(
        raft: Raft,
        runtime: tokio::runtime::Handle,
        log: LogStore,
        config: &MemberConfig,
    ) -> CommitPath {
        let waits = Waits::new(config.commit_poll);
        if !config.commit_poll.is_zero() {
            runtime.spawn(waits.runtime.clone().run());
        }
        CommitPath {
            raft,
            runtime,
            log,
            id: config.id,
            ack_timeout: config.ack_timeout,
            ack: config.ack,
            replicas: config.replicas,
            contact: config.election_timeout.1,
            next_notify: AtomicU64::new(0),
            ordering: Mutex::new(()),
            own_ddl: AtomicU64::new(0),
            part_bytes: config.part_bytes,
            last_staged: AtomicU64::new(0),
            waits,
        }
    }

    /// Waits until every voting member's log holds entry `index`, or the deadline; the
    /// members that acknowledged it and the members asked for.
    fn wait_for_all(
        &self,
        index: u64,
        deadline: Instant,
    ) -> std::result::Result<(), (usize, usize)> {
        let raft = self.raft.clone();
        let left = deadline.saturating_duration_since(Instant::now());
        let everyone = self.runtime.block_on(async move {
            raft.wait(Some(left))
                .metrics(
                    |m| acked_by(m, index).0 == acked_by(m, index).1,
                    "every acknowledgement",
                )
                .await
        });
        match everyone {
            Ok(_) => Ok(()),
            Err(_) => Err(acked_by(&self.raft.metrics().borrow_watched(), index)),
        }
    }
}

/// On the master's metrics: the voting members whose log holds entry `index` (the master
/// included), and the voting members.
fn acked_by(m: &openraft::RaftMetrics<TypeConfig>, index: u64) -> (usize, usize) {
    let voters: Vec<NodeId> = m.membership_config.membership().voter_ids().collect();
    let acked = voters
        .iter()
        .filter(|&&v| {
            v == m.id
                || m.replication
                    .as_ref()
                    .and_then(|r| r.get(&v).cloned().flatten())
                    .is_some_and(|l| l.index >= index)
        })
        .count();
    (acked, voters.len())
}

/// Whether an encoded commit creates or removes databases (its DDL count, first, is not 0).
pub(crate) fn has_ddl(commit: &[u8]) -> bool {
    commit.get(..4).is_some_and(|c| c != [0; 4])
}

/// The first bytes of a part that is a piece of a longer one (see [`pieces`]), more to
/// come or the last: a part proper begins with its count of catalog changes, always 0.
const PIECE: [u8; 4] = [0xff; 4];
const LAST_PIECE: [u8; 4] = [0xff, 0xff, 0xff, 0xfe];

/// A part longer than an entry should carry (one long write) cut into pieces of `size`
/// bytes, each with the mark it goes behind.
pub(crate) fn pieces(part: &[u8], size: usize) -> impl Iterator<Item = (&[u8], &[u8])> {
    let n = part.len().div_ceil(size);
    part.chunks(size).enumerate().map(move |(i, chunk)| {
        let mark: &[u8] = if i + 1 == n { &LAST_PIECE } else { &PIECE };
        (mark, chunk)
    })
}

/// What a stored part is: `None` a part proper, else a piece of one (whether more pieces
/// follow, and its bytes).
pub(crate) fn piece_of(part: &[u8]) -> Option<(bool, &[u8])> {
    match part.split_first_chunk::<4>() {
        Some((&PIECE, bytes)) => Some((true, bytes)),
        Some((&LAST_PIECE, bytes)) => Some((false, bytes)),
        _ => None,
    }
}

/// Refuses what one entry of the log cannot carry.
fn fits_an_entry(commit: &[u8]) -> Result<()> {
    match commit.len() > MAX_COMMIT {
        true => Err(Error::InvalidArgument(format!(
            "a replicated commit (or part of one) of {} bytes is larger than an entry of the \
             group's log may be ({MAX_COMMIT} bytes): one write is too large to replicate",
            commit.len()
        ))),
        false => Ok(()),
    }
}

/// The members, the master included, that must hold a commit under `ack` in a group of
/// `voters` voting members.
fn needed(ack: AckPolicy, voters: usize) -> usize {
    match ack {
        AckPolicy::All => voters,
        AckPolicy::SimpleMajority => voters / 2 + 1,
        AckPolicy::None => 1,
    }
}

impl Replicator for CommitPath {
    fn check_begin(&self, ack: Option<AckPolicy>) -> Result<()> {
        let needs = |voters: usize| needed(ack.unwrap_or(self.ack), voters);
        let metrics = self.raft.metrics();
        let m = metrics.borrow_watched();
        if m.state != ServerState::Leader {
            return Ok(());
        }
        let membership = m.membership_config.membership();
        let needed = needs(membership.voter_ids().count());
        let in_contact = |v: &NodeId| {
            *v == self.id
                || m.heartbeat
                    .as_ref()
                    .and_then(|h| h.get(v).cloned().flatten())
                    .is_some_and(|at| since(&at) <= self.contact.as_millis() as u64)
        };
        // Members in contact with the master, the master included.
        let live = membership.voter_ids().filter(in_contact).count();
        match live < needed {
            true => Err(Error::InsufficientReplicas { live, needed }),
            false => Ok(()),
        }
    }

    fn replicate(
        &self,
        commit: &[u8],
        staged: Option<Staged>,
        d: Durability,
        group: Option<GroupDurability>,
        locks: HeldLocks,
    ) -> Result<u64> {
        fits_an_entry(commit)?;
        let deadline = Instant::now() + self.ack_timeout;
        let policy = self.policy(d, group);
        let ddl = has_ddl(commit);
        if ddl {
            self.own_ddl.fetch_add(1, Relaxed);
        }
        let mut locks = locks;
        let outcome = loop {
            match self.propose(commit, staged, policy, ddl, locks, deadline) {
                Attempt::Done(r) => break r,
                // A master just elected, or just handed the role, whose lease a majority
                // has not yet confirmed refuses entries; nothing was appended.
                Attempt::Again(back) if Instant::now() < deadline => {
                    locks = back;
                    std::thread::sleep(Duration::from_millis(2));
                }
                Attempt::Again(_) => {
                    break Err(Error::NotMaster {
                        master: self.raft.metrics().borrow_watched().current_leader,
                    })
                }
            }
        };
        if ddl {
            self.own_ddl.fetch_sub(1, Relaxed);
        }
        outcome
    }

    fn part_bytes(&self) -> usize {
        self.part_bytes
    }

    fn stage(
        &self,
        part: &[u8],
        staged: &mut Option<Staged>,
        d: Durability,
        group: Option<GroupDurability>,
    ) -> Result<()> {
        let policy = self.policy(d, group);
        let s = match staged {
            Some(s) => s,
            None => {
                let metrics = self.raft.metrics();
                let m = metrics.borrow_watched();
                if m.state != ServerState::Leader {
                    return Err(Error::NotMaster {
                        master: m.current_leader,
                    });
                }
                staged.insert(Staged {
                    epoch: m.current_term,
                    id: self.last_staged.fetch_add(1, Relaxed) + 1,
                    parts: 0,
                })
            }
        };
        // The engine's parts pass `part_bytes` by their last write: one that passes it
        // twice over holds a long write, and goes in pieces.
        if part.len() <= 2 * self.part_bytes {
            return self.stage_one((&[], part), s, policy);
        }
        for piece in pieces(part, self.part_bytes) {
            self.stage_one(piece, s, policy)?;
        }
        Ok(())
    }

    fn abandon(&self, staged: Staged) {
        let request = Request {
            commit: Vec::new(),
            master_sync: false,
            replica_sync: false,
            notify: 0,
            proposer: self.id,
            staged: Some(Stage::Drop {
                epoch: staged.epoch,
                id: staged.id,
            }),
        };
        // Best effort: a master that cannot append it has lost its term, or will, and a
        // later term's first entry drops the parts as well.
        let raft = self.raft.clone();
        let _ = self
            .runtime
            .block_on(async move { raft.client_write_ff(request, None).await });
    }

    fn catch_up(&self) -> Result<()> {
        let raft = self.raft.clone();
        let read = self.runtime.block_on(async move {
            raft.ensure_linearizable(openraft::raft::ReadPolicy::ReadIndex)
                .await
        });
        read.map(drop).map_err(|e| match e {
            openraft::error::RaftError::APIError(
                openraft::error::LinearizableReadError::ForwardToLeader(f),
            ) => Error::NotMaster {
                master: f.leader_id,
            },
            // No majority answered the read index: nothing was proposed.
            openraft::error::RaftError::APIError(
                openraft::error::LinearizableReadError::QuorumNotEnough(q),
            ) => {
                let metrics = self.raft.metrics();
                let voters = metrics
                    .borrow_watched()
                    .membership_config
                    .membership()
                    .voter_ids()
                    .count();
                Error::InsufficientReplicas {
                    live: q.got.len(),
                    needed: needed(AckPolicy::SimpleMajority, voters),
                }
            }
            e => Error::Replication(format!("{e}; the commit was not made")),
        })
    }
}

/// How one proposal of a commit ended.
enum Attempt {
    Done(Result<u64>),
    /// Refused before it was appended, by a master whose lease is not yet confirmed: the
    /// transaction's locks come back, for the next attempt.
    Again(HeldLocks),
}

impl CommitPath {
    /// Proposes a commit once and waits for what its ack policy asks for.
    fn propose(
        &self,
        commit: &[u8],
        staged: Option<Staged>,
        policy: GroupDurability,
        ddl: bool,
        locks: HeldLocks,
        deadline: Instant,
    ) -> Attempt {
        let (events, wait) = mpsc::channel();
        let done = events.clone();
        // Kept only while the log store may still send on it, so that a reply dropped
        // unsent ends the wait at once.
        let mut events = Some(events);
        let reply = Reply::new(
            move |r: openraft::raft::ClientWriteResult<TypeConfig>, locks| {
                let event = match r {
                    Err(ClientWriteError::ForwardToLeader(f))
                        if f.reason == ForwardReason::LeaseExpired =>
                    {
                        Event::Again(locks)
                    }
                    r => {
                        drop(locks);
                        Event::Done(r.map_err(|e| write_error(&e)))
                    }
                };
                let _ = done.send(event);
            },
            locks,
        );
        let mut request = Request {
            commit: commit.to_vec(),
            master_sync: policy.master == Durability::Sync,
            replica_sync: policy.replicas == Durability::Sync,
            notify: 0,
            proposer: self.id,
            staged: staged.map(|s| Stage::Commit {
                epoch: s.epoch,
                id: s.id,
                parts: s.parts,
            }),
        };
        let raft = self.raft.clone();
        let proposed = if ddl || policy.ack == AckPolicy::None {
            let _order = self.ordering.lock();
            // A commit made of parts may yet be refused at apply (its parts dropped): it
            // waits for the apply, as one with DDL does.
            let refusable = ddl || staged.is_some();
            if !refusable && self.own_ddl.load(Relaxed) == 0 && !self.log.ddl_pending() {
                request.notify = self.next_notify.fetch_add(1, Relaxed) + 1;
                let to = Stored(events.take().expect("not yet given"));
                self.log.await_stored(request.notify, to);
            }
            let notify = request.notify;
            (
                notify,
                self.runtime
                    .block_on(raft.client_write_ff(request, Some(reply))),
            )
        } else {
            (
                0,
                self.runtime
                    .block_on(raft.client_write_ff(request, Some(reply))),
            )
        };
        drop(events);
        let (notify, proposed) = proposed;
        let outcome = match proposed {
            Err(f) => Attempt::Done(Err(Error::Replication(format!(
                "this member stopped ({f}); the commit was not made"
            )))),
            Ok(()) => self.wait(&wait, policy.ack, deadline),
        };
        if notify != 0 {
            self.log.forget(notify);
        }
        outcome
    }

    /// Waits for what the commit's ack policy asks for.
    fn wait(&self, events: &mpsc::Receiver<Event>, ack: AckPolicy, deadline: Instant) -> Attempt {
        // An ack-NONE commit waits for this member's append alone: polling gained nothing
        // there, and took a core from the runtime that replicates it (docs/benchmarks.md).
        let index = match self.waits.wait(events, ack != AckPolicy::None, deadline) {
            Ok(Event::Stored(index)) => return Attempt::Done(Ok(index)),
            Ok(Event::Again(locks)) => return Attempt::Again(locks),
            Ok(Event::Done(Ok(r))) => match r.data.refused {
                Some(refusal) => return Attempt::Done(Err(refusal.error())),
                None => r.log_id.index,
            },
            Ok(Event::Done(Err(e))) => return Attempt::Done(Err(e)),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Attempt::Done(Err(Error::Replication(
                    "this member stopped before the commit's outcome was known; it may still \
                     be committed and applied later"
                        .into(),
                )))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let master = self.raft.metrics().borrow_watched().state == ServerState::Leader;
                return Attempt::Done(Err(Error::Replication(format!(
                    "the group did not commit this transaction within {:?} ({}); it may \
                     still be committed and applied later",
                    self.ack_timeout,
                    match master {
                        true => "no majority reachable?",
                        false => "this member is no longer master",
                    }
                ))));
            }
        };
        if ack == AckPolicy::All {
            if let Err((acked, needed)) = self.wait_for_all(index, deadline) {
                return Attempt::Done(Err(Error::InsufficientAcks {
                    token: index,
                    acked,
                    needed,
                }));
            }
        }
        Attempt::Done(Ok(index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_committer_polls_until_others_wait_beside_it() {
        let waits = Waits::new(Duration::from_micros(200));
        let t0 = Instant::now() + Duration::from_secs(1);
        assert!(waits.begin(t0));
        assert!(!waits.begin(t0), "a second waiter sleeps");
        waits.end(Duration::from_micros(10));
        waits.end(Duration::from_micros(10));
        assert!(!waits.begin(t0), "crowded for a while after");
        waits.end(Duration::from_micros(10));
        assert!(waits.begin(t0 + CROWDED_FOR + Duration::from_millis(1)));
        waits.end(Duration::from_micros(10));
    }

    #[test]
    fn committers_poll_only_while_waits_are_short() {
        let waits = Waits::new(Duration::from_micros(200));
        let t0 = Instant::now();
        assert!(waits.begin(t0));
        waits.end(Duration::from_millis(1));
        for _ in 0..20 {
            waits.begin(t0);
            waits.end(Duration::from_millis(1));
        }
        assert!(!waits.begin(t0), "waits of 1 ms are not polled for");
        waits.end(Duration::from_millis(1));
        for _ in 0..40 {
            waits.begin(t0);
            waits.end(Duration::from_micros(20));
        }
        assert!(waits.begin(t0), "short waits again: polled for again");
        waits.end(Duration::from_micros(20));
        let never = Waits::new(Duration::ZERO);
        assert!(!never.begin(t0));
    }

    /// The runtime loops while committers poll, and sleeps again once they stop.
    #[test]
    fn the_runtime_stays_awake_only_while_committers_poll() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let awake = Arc::new(KeepAwake::new());
        runtime.spawn(awake.clone().run());
        // Waits until the task loops (`want`, committers polling all along, as they do
        // while they commit) or sleeps (no committer polling).
        let until = |want: bool| {
            let deadline = Instant::now() + Duration::from_secs(10);
            while awake.looping.load(SeqCst) != want {
                assert!(Instant::now() < deadline, "never {want}");
                if want {
                    awake.polling();
                }
                std::thread::sleep(Duration::from_micros(100));
            }
        };
        until(false);
        until(true);
        // Other tasks still run on the one thread meanwhile.
        awake.polling();
        assert_eq!(runtime.block_on(runtime.spawn(async { 7 })).unwrap(), 7);
        until(false);
        until(true);
    }

    #[test]
    fn a_polling_committer_gets_its_outcome_or_its_deadline() {
        let waits = Waits::new(Duration::from_millis(50));
        let (send, events) = mpsc::channel();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(5));
            send.send(Event::Stored(7)).unwrap();
            send
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        assert!(matches!(
            waits.wait(&events, true, deadline),
            Ok(Event::Stored(7))
        ));
        let send = sender.join().unwrap();
        let short = Instant::now() + Duration::from_millis(5);
        assert!(matches!(
            waits.wait(&events, true, short),
            Err(mpsc::RecvTimeoutError::Timeout)
        ));
        drop(send);
        assert!(matches!(
            waits.wait(&events, true, deadline),
            Err(mpsc::RecvTimeoutError::Disconnected)
        ));
        assert_eq!(waits.waiting.load(Relaxed), 0);
    }

    /// A long part cut into pieces is whole again put back together, and told apart from a
    /// part proper (which begins with a count of catalog changes of 0).
    #[test]
    fn pieces_put_back_together_make_the_part() {
        let part: Vec<u8> = (0..25u8).collect();
        let cut: Vec<Vec<u8>> = pieces(&part, 10).map(|(m, c)| [m, c].concat()).collect();
        assert_eq!(cut.len(), 3);
        let mut whole = Vec::new();
        for (i, p) in cut.iter().enumerate() {
            let (more, bytes) = piece_of(p).unwrap();
            assert_eq!(more, i < 2);
            whole.extend_from_slice(bytes);
        }
        assert_eq!(whole, part);
        assert_eq!(piece_of(&[0, 0, 0, 0, 7, 7]), None);
        assert_eq!(piece_of(&[0xff, 0xff]), None);
    }
}
