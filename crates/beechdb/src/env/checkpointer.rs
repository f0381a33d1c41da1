//! The background thread: checkpoints (by log volume, or after an interval with commits)
//! and the log's background work (its next segment, syncs).
//!
//! Owns: [`CheckpointSignal`] and the thread's loop. May call: `Shared::checkpoint`, the
//! log. Invariants: the thread holds only the signal and a weak reference while it waits,
//! so it never keeps an environment (or its directory lock) alive; it waits on the
//! standard library's condition variable, not parking_lot's, whose waiters are queued in
//! one table for the whole process: a thread waiting there when the process forks would
//! stay queued in the child's copy of the table, where the child's own waits meet it (and
//! hang: a pre-forking server opens databases in its children).

use super::{Shared, Tx};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// How committers and `close` reach the background checkpointer.
#[derive(Default)]
pub(crate) struct CheckpointSignal {
    state: Mutex<BackgroundWork>,
    wake: Condvar,
}

#[derive(Default)]
pub(super) struct BackgroundWork {
    pub(super) checkpoint: bool,
    /// The log wants background work (its next segment, a sync).
    pub(super) log_work: bool,
    pub(super) stop: bool,
}

impl CheckpointSignal {
    /// The work asked for (no code panics holding it, so a poisoned lock is taken as is).
    fn state(&self) -> MutexGuard<'_, BackgroundWork> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks the thread to stop.
    pub(super) fn stop(&self) {
        self.state().stop = true;
        self.wake.notify_all();
    }

    fn request(&self, what: impl FnOnce(&mut BackgroundWork) -> &mut bool) {
        let mut st = self.state();
        let flag = what(&mut st);
        if !*flag {
            *flag = true;
            self.wake.notify_one();
        }
    }
}

/// The background checkpointer: runs a checkpoint when asked (log volume) or when
/// `interval` has passed with commits since the last one, and does the log's background
/// work (its next segment, syncs) when asked. While it waits it holds only the signal and a weak reference, so it
/// never keeps an environment (or its lock) alive; `close` and drop stop it.
pub(super) fn checkpointer(
    shared: std::sync::Weak<Shared>,
    signal: Arc<CheckpointSignal>,
    interval: std::time::Duration,
) {
    loop {
        let (log_work, log_only) = {
            let mut st = signal.state();
            if !st.checkpoint && !st.log_work && !st.stop {
                st = match signal.wake.wait_timeout(st, interval) {
                    Ok((st, _)) => st,
                    Err(e) => e.into_inner().0,
                };
            }
            if st.stop {
                return;
            }
            let wanted = (st.log_work, st.log_work && !st.checkpoint);
            (st.checkpoint, st.log_work) = (false, false);
            wanted
        };
        let Some(s) = shared.upgrade() else { return };
        let Some(tx) = &s.tx else { return };
        if let (true, Some(w)) = (log_work, &tx.wal) {
            // Without a spare the commit that fills the segment creates the next one itself;
            // a failed sync poisons the log, and the next commit reports it.
            let _ = w.background_work();
        }
        if log_only {
            continue;
        }
        let behind = s.engine.read().commit_lsn > tx.last_checkpoint_lsn.load(Ordering::Relaxed);
        if behind && !s.closed.load(Ordering::Acquire) {
            // Errors poison the environment and surface on the next write.
            let _ = s.checkpoint();
        }
    }
}

impl Tx {
    pub(crate) fn request_checkpoint(&self) {
        self.checkpoint_signal.request(|w| &mut w.checkpoint);
    }

    pub(crate) fn request_log_work(&self) {
        self.checkpoint_signal.request(|w| &mut w.log_work);
    }
}
