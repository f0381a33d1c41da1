//! Appends that carry nothing but a commit index, and when a transport need not send one.
//!
//! Owns: [`CommitOnly`] (what one replication connection knows its follower has accepted)
//! and [`Nudge`] (a heartbeat round that carries a commit index no request carried). May
//! call: the member's Raft node, to trigger heartbeats. Used by both transports.
//!
//! openraft follows each commit with an append of no entries to every follower, only to tell
//! it the new commit index. With one committer that is a second request per commit per
//! follower (two `sendto` per entry where the follower writes once), and the next entry's
//! request carries the commit index anyway. So a replication connection answers such a request
//! itself when:
//! - it carries no entries and its previous log id is the last entry this connection sent
//!   and had accepted, under the same vote (the follower holds it: it said so);
//! - that entry was sent less than [`WINDOW`] ago. openraft counts the answer as the
//!   follower's acknowledgement at the time it made the request (for the master's lease
//!   and read index), so the answer never claims a contact more than `WINDOW` later than a
//!   real one, against election timeouts of 150 ms and more.
//!
//! A commit index left unsent reaches the followers with the next entry or with a round of
//! heartbeats the [`Nudge`] triggers [`NUDGE_AFTER`] later, whichever comes first; under a
//! steady stream of skips that is at most one round per `NUDGE_AFTER`. Heartbeat connections
//! never skip (they carry no entries, so they never know an accepted one).

use crate::{LogId, Raft, TypeConfig, Vote};
use openraft::raft::AppendEntriesRequest;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How recent the acceptance a skipped request rests on must be.
const WINDOW: Duration = Duration::from_millis(1);

/// How long after a skip the followers hear the commit index from a heartbeat round.
const NUDGE_AFTER: Duration = Duration::from_millis(2);

/// Triggers a heartbeat round some time after commit indexes were left unsent.
#[derive(Default)]
pub(crate) struct Nudge {
    wanted: tokio::sync::Notify,
}

impl Nudge {
    fn skipped(&self) {
        // One stored permit at most: skips while a round is pending ask for one more round.
        self.wanted.notify_one();
    }

    /// Runs until the member's Raft node stops.
    pub(crate) async fn run(self: Arc<Self>, raft: Raft) {
        loop {
            self.wanted.notified().await;
            tokio::time::sleep(NUDGE_AFTER).await;
            if raft.trigger().heartbeat().await.is_err() {
                return;
            }
        }
    }
}

/// One replication connection's view of its follower (see the module comment).
pub(crate) struct CommitOnly {
    /// `None` on a connection that must send everything (heartbeats).
    nudge: Option<Arc<Nudge>>,
    /// The last entry sent on this connection and accepted: its vote, id, and when it left.
    accepted: Option<(Vote, LogId, Instant)>,
}

impl CommitOnly {
    /// A connection for replication (skips what it can) or, without a nudge, one that sends
    /// every request.
    pub(crate) fn new(nudge: Option<Arc<Nudge>>) -> CommitOnly {
        CommitOnly {
            nudge,
            accepted: None,
        }
    }

    /// Whether `rpc` may be answered without sending it; asks for a heartbeat round if so.
    pub(crate) fn skip(&self, rpc: &AppendEntriesRequest<TypeConfig>) -> bool {
        let (Some(nudge), Some((vote, last, sent))) = (&self.nudge, &self.accepted) else {
            return false;
        };
        let skips = rpc.entries.is_empty()
            && rpc.vote == *vote
            && rpc.prev_log_id.as_ref() == Some(last)
            && sent.elapsed() < WINDOW;
        if skips {
            nudge.skipped();
        }
        skips
    }

    /// Notes the answer to request `sent`: accepted or not (refused, failed, unanswered).
    pub(crate) fn answered(&mut self, sent: Sent, accepted: bool) {
        self.accepted = match (accepted, sent.last) {
            (true, Some(last)) => Some((sent.vote, last, sent.at)),
            (true, None) => self.accepted.take(),
            (false, _) => None,
        };
    }
}

/// What [`CommitOnly::answered`] needs of a request, taken as it leaves (as sent: a
/// transport that cuts a request takes this after the cut).
pub(crate) struct Sent {
    vote: Vote,
    /// Its last entry (`None`: it had none).
    last: Option<LogId>,
    at: Instant,
}

impl Sent {
    pub(crate) fn of(rpc: &AppendEntriesRequest<TypeConfig>) -> Sent {
        Sent {
            vote: rpc.vote,
            last: rpc.entries.last().map(|e| e.log_id),
            at: Instant::now(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_id(term: u64, index: u64) -> LogId {
        LogId::new(crate::Term::new(term), index)
    }

    fn vote(term: u64) -> Vote {
        Vote::new_committed(term, 1)
    }

    fn sent(v: Vote, last: Option<LogId>, at: Instant) -> Sent {
        Sent { vote: v, last, at }
    }

    fn commit_only(v: Vote, prev: LogId) -> AppendEntriesRequest<TypeConfig> {
        AppendEntriesRequest {
            vote: v,
            prev_log_id: Some(prev),
            leader_commit: Some(prev),
            entries: vec![],
        }
    }

    #[test]
    fn only_a_commit_index_on_a_recently_accepted_entry_is_skipped() {
        let mut c = CommitOnly::new(Some(Arc::new(Nudge::default())));
        let (v, at5) = (vote(2), log_id(2, 5));
        assert!(!c.skip(&commit_only(v, at5)), "nothing accepted yet");
        c.answered(sent(v, Some(at5), Instant::now()), true);
        assert!(c.skip(&commit_only(v, at5)));
        assert!(!c.skip(&commit_only(v, log_id(2, 4))), "another position");
        assert!(!c.skip(&commit_only(vote(3), at5)), "another vote");
        // An accepted request without entries keeps what the connection knew.
        c.answered(sent(v, None, Instant::now()), true);
        assert!(c.skip(&commit_only(v, at5)));
        // A failure forgets it: the follower may have restarted without it.
        c.answered(sent(v, Some(log_id(2, 6)), Instant::now()), false);
        assert!(!c.skip(&commit_only(v, at5)));
        assert!(!c.skip(&commit_only(v, log_id(2, 6))));
    }

    #[test]
    fn an_old_acceptance_or_a_heartbeat_connection_never_skips() {
        let (v, at5) = (vote(2), log_id(2, 5));
        let mut c = CommitOnly::new(Some(Arc::new(Nudge::default())));
        c.answered(sent(v, Some(at5), Instant::now() - WINDOW), true);
        assert!(!c.skip(&commit_only(v, at5)));
        let mut heartbeats = CommitOnly::new(None);
        heartbeats.answered(sent(v, Some(at5), Instant::now()), true);
        assert!(!heartbeats.skip(&commit_only(v, at5)));
    }
}
