//! Synchronisation the engine builds itself: a read-mostly lock, a broadcast wake-up, and a
//! bounded poll for short waits.
//!
//! A read-mostly lock: readers mark only their own cache line, so reads on different cores
//! do not bounce a shared lock word (the cost that kept a reader-writer lock from scaling
//! reads across cores); a writer raises a flag and waits for every reader slot to drain.
//!
//! Owns: [`ReadMostlyLock`], [`Broadcast`], [`poll_until`]. May call: nothing of the
//! engine. Invariant of the lock (Dekker): a reader increments its slot, then checks the
//! writer flag; a writer sets the flag, then checks the slots; all four accesses are SeqCst,
//! so in their single total order either the reader sees the flag and backs off, or the
//! writer sees the reader and waits: they never both proceed. (SeqCst read-modify-writes are
//! full barriers on x86, so no separate fence instruction is needed.) Writers exclude each
//! other with a mutex, which readers also use to wait out a writer; writers that back off
//! rather than queue on it pass a gate first, so that one of them at a time backs off. The
//! engine's locking keeps its `unsafe` here: handing out `&T` / `&mut T` from the cell under
//! those guarantees.
//!
//! [`Broadcast`] wakes every sleeper with one futex call on Linux (the other `unsafe`); its
//! invariant is the futex's: a sleeper sleeps only while the sequence still holds the value
//! it read, so a wake-up between reading and sleeping is never lost.

use parking_lot::{Mutex, MutexGuard};
use std::cell::{Cell, UnsafeCell};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// Words of the bitmask of slots in use: slots `0..64 * WORDS` belong to one live thread
/// each (the SQL benchmarks run 100 threads); the slot after them is shared by any threads
/// beyond that.
const WORDS: usize = 4;
const SHARED_SLOT: usize = 64 * WORDS;
const SLOTS: usize = SHARED_SLOT + 1;

/// How often the standby of [`ReadMostlyLock::write_backing_off`] backs off before it
/// queues, and for how long: the first sleep, doubled each time up to the longest (about
/// 6 ms in all; a sleep lasts longer than asked: the timer's slack, 50 us by default).
const BACKOFFS: usize = 16;
const BACKOFF: Duration = Duration::from_micros(20);
const LONGEST_BACKOFF: Duration = Duration::from_micros(500);

/// How long a writer that backs off may keep taking the lock while the standby waits,
/// before it steps aside: long enough that the lock's data changes CPUs rarely (a turn is
/// thousands of auto-commits), short enough that the last of 16 writers at the gate waits
/// about 30 ms (with 1 ms, 15-25 ms, but the 99.9th percentile rose from tens of
/// microseconds to milliseconds and NOSYNC lost 14%; with 4 ms, 33-44 ms; with no end to a
/// turn, 50-64 ms: docs/benchmarks.md, "A standby").
const TURN: Duration = Duration::from_millis(2);

/// Whose turn it is among the writers that back off, kept under the writers' mutex.
struct Turn {
    /// The slot of the thread whose turn it is.
    holder: usize,
    /// Its holds since the turn began.
    holds: u32,
    began: Instant,
}

impl Default for Turn {
    fn default() -> Self {
        Turn {
            holder: usize::MAX,
            holds: 0,
            began: Instant::now(),
        }
    }
}

impl Turn {
    fn begin(&mut self, slot: usize) {
        *self = Turn {
            holder: slot,
            holds: 0,
            began: Instant::now(),
        };
    }

    /// Whether the writer in `slot`, holding the lock, may keep it: a new holder begins its
    /// turn; the holder's turn ends once it has lasted [`TURN`] and another writer waits
    /// (`waiting`). The clock is read once every 64 holds only.
    fn continues(&mut self, slot: usize, waiting: impl FnOnce() -> bool) -> bool {
        if self.holder != slot {
            self.begin(slot);
            return true;
        }
        self.holds = self.holds.wrapping_add(1);
        !(self.holds.is_multiple_of(64) && waiting() && self.began.elapsed() >= TURN)
    }
}

/// Which of the per-thread slots a live thread holds. A writer scans only those (and the
/// shared one).
static IN_USE: [AtomicU64; WORDS] = [const { AtomicU64::new(0) }; WORDS];

/// A value on a cache line of its own, so that writes to it do not take the line from
/// threads reading its neighbours (false sharing), nor the other way round.
#[repr(align(64))]
#[derive(Default)]
pub(crate) struct OwnLine<T>(pub T);

impl<T> Deref for OwnLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

type Slot = OwnLine<AtomicUsize>;

pub(crate) struct ReadMostlyLock<T> {
    writer: AtomicBool,
    writers: Mutex<Turn>,
    /// Held by the one writer backing off in [`ReadMostlyLock::write_backing_off`]; taken
    /// before `writers`, never while holding it.
    standby: Mutex<()>,
    /// The standby's thread, to wake when the holder steps aside (a leaf: held for a read
    /// or a write of the handle only).
    standby_thread: Mutex<Option<Thread>>,
    slots: Box<[Slot]>,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` follows the reader-writer discipline described above, so sharing
// the lock between threads is as safe as sharing a `RwLock<T>`, which needs `T: Send + Sync`.
unsafe impl<T: Send + Sync> Sync for ReadMostlyLock<T> {}
unsafe impl<T: Send> Send for ReadMostlyLock<T> {}

/// A thread's claim on a slot, given back when the thread exits.
struct Claim(Cell<usize>);

impl Drop for Claim {
    fn drop(&mut self) {
        let s = self.0.get();
        if s < SHARED_SLOT {
            IN_USE[s / 64].fetch_and(!(1u64 << (s % 64)), Ordering::Release);
        }
    }
}

thread_local! {
    static SLOT: Claim = const { Claim(Cell::new(usize::MAX)) };
}

/// Claims a free per-thread slot, or the shared one when all are taken.
fn claim_slot() -> usize {
    for (w, word) in IN_USE.iter().enumerate() {
        let mut m = word.load(Ordering::Relaxed);
        while m != u64::MAX {
            let bit = (!m).trailing_zeros() as usize;
            match word.compare_exchange_weak(m, m | 1 << bit, Ordering::SeqCst, Ordering::Relaxed) {
                Ok(_) => return w * 64 + bit,
                Err(now) => m = now,
            }
        }
    }
    SHARED_SLOT
}

fn my_slot() -> usize {
    SLOT.with(|c| {
        if c.0.get() == usize::MAX {
            c.0.set(claim_slot());
        }
        c.0.get()
    })
}

impl<T> ReadMostlyLock<T> {
    pub(crate) fn new(value: T) -> Self {
        ReadMostlyLock {
            writer: AtomicBool::new(false),
            writers: Mutex::new(Turn::default()),
            standby: Mutex::new(()),
            standby_thread: Mutex::new(None),
            slots: (0..SLOTS).map(|_| Slot::default()).collect(),
            value: UnsafeCell::new(value),
        }
    }

    pub(crate) fn read(&self) -> ReadGuard<'_, T> {
        let slot = &self.slots[my_slot()].0;
        loop {
            slot.fetch_add(1, Ordering::SeqCst);
            if !self.writer.load(Ordering::SeqCst) {
                return ReadGuard { lock: self, slot };
            }
            slot.fetch_sub(1, Ordering::Release);
            // Wait for the writer to finish (it holds `writers` while it runs).
            drop(self.writers.lock());
        }
    }

    pub(crate) fn write(&self) -> WriteGuard<'_, T> {
        self.enter(self.writers.lock())
    }

    /// As [`ReadMostlyLock::write`], but a writer that finds another inside backs off: it
    /// sleeps a moment and tries again, each sleep twice the last up to a limit, before it
    /// queues. Each hand-over of the lock between threads on different CPUs moves the
    /// guarded data's cache lines with it, and queued writers are handed the lock one after
    /// the other, the holder paying a wake-up at each release; backing off lets the holder's
    /// CPU run many holds in a row with the data in its cache. Writers that would otherwise
    /// alternate on every hold (auto-commits from several threads) then run at about one
    /// thread's rate, not a fraction of it (docs/benchmarks.md).
    ///
    /// Only one writer backs off at a time, the standby; the others wait in turn, asleep,
    /// for the standby gate, which passes to the next of them (first come, first served)
    /// when the standby has the lock. With every waiter backing off, 16 writers on 2 CPUs
    /// spent the CPUs on their sleeps' wake-ups (35,000-72,000 for 2M writes) and took the
    /// lock from the holder about ten times as often (docs/benchmarks.md, "A standby"). A
    /// writer keeps taking the lock for a turn ([`TURN`]) while the standby waits, then
    /// steps aside: it wakes the standby and queues at the gate.
    ///
    /// The price is latency: a writer that backs off waits a sleep at least, and behind the
    /// gate a writer waits for each writer ahead of it to have its turn, about 30 ms at the
    /// longest with 16 writers on 2 CPUs; and a queue of writers that are then to wait
    /// together (SYNC commits gathering into one fsync) loses by backing off, so they call
    /// [`ReadMostlyLock::write`].
    pub(crate) fn write_backing_off(&self) -> WriteGuard<'_, T> {
        let me = my_slot();
        if let Some(mut held) = self.writers.try_lock() {
            if held.continues(me, || self.standby.is_locked()) {
                return self.enter(held);
            }
            // This writer's turn is over and the standby waits: let it in, and queue behind
            // it at the gate.
            drop(held);
            if let Some(standby) = &*self.standby_thread.lock() {
                standby.unpark();
            }
        }
        let gate = self.standby.lock();
        *self.standby_thread.lock() = Some(std::thread::current());
        let mut held = self.writers.try_lock();
        let mut sleep = BACKOFF;
        for _ in 0..BACKOFFS {
            if held.is_some() {
                break;
            }
            // Woken early by a holder stepping aside (or spuriously: it tries again).
            std::thread::park_timeout(sleep);
            sleep = (sleep * 2).min(LONGEST_BACKOFF);
            held = self.writers.try_lock();
        }
        let mut held = held.unwrap_or_else(|| self.writers.lock());
        self.standby_thread.lock().take();
        held.begin(me);
        // Handed straight to the longest waiter: a writer that has just lost the lock and
        // comes back to the gate must not overtake the writers already asleep there.
        MutexGuard::unlock_fair(gate);
        self.enter(held)
    }

    /// Raises the writer flag and waits for the readers to drain, `held` excluding writers.
    fn enter<'a>(&'a self, held: MutexGuard<'a, Turn>) -> WriteGuard<'a, T> {
        self.writer.swap(true, Ordering::SeqCst);
        // A reader that claimed its slot after this load (its claim is SeqCst too) checks
        // the flag after this swap, so it sees the flag and backs off: skipping it is safe.
        let live = IN_USE.iter().enumerate().flat_map(|(w, word)| {
            let mut bits = word.load(Ordering::SeqCst);
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                Some(w * 64 + i)
            })
        });
        let shared = std::iter::once(SHARED_SLOT);
        for slot in live.chain(shared).map(|i| &self.slots[i]) {
            let mut spins = 0u32;
            while slot.0.load(Ordering::SeqCst) != 0 {
                spins += 1;
                if spins < 64 {
                    std::hint::spin_loop();
                } else if spins < 1024 {
                    std::thread::yield_now();
                } else {
                    // A long reader (a scan doing I/O): stop burning a core.
                    std::thread::sleep(std::time::Duration::from_micros(20));
                }
            }
        }
        WriteGuard {
            lock: self,
            _held: held,
        }
    }
}

pub(crate) struct ReadGuard<'a, T> {
    lock: &'a ReadMostlyLock<T>,
    slot: &'a AtomicUsize,
}

impl<T> Deref for ReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this reader's slot is non-zero and no writer passed the flag check, so no
        // `&mut T` exists until the guard drops (a writer waits for the slot to drain).
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> Drop for ReadGuard<'_, T> {
    fn drop(&mut self) {
        self.slot.fetch_sub(1, Ordering::Release);
    }
}

pub(crate) struct WriteGuard<'a, T> {
    lock: &'a ReadMostlyLock<T>,
    _held: MutexGuard<'a, Turn>,
}

impl<T> Deref for WriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the writer flag is set and every reader slot drained; other writers wait
        // on `writers`, which this guard holds.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for WriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`: this guard is the only access.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for WriteGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.writer.store(false, Ordering::Release);
    }
}

/// Polls `done` for up to `limit`, yielding the CPU between polls to any other runnable
/// thread; returns whether it became true. For waits shorter than a sleep and a wake-up.
pub(crate) fn poll_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    if limit.is_zero() {
        return done();
    }
    let started = Instant::now();
    for polls in 1u32.. {
        if done() {
            return true;
        }
        if polls.is_multiple_of(8) && started.elapsed() >= limit {
            break;
        }
        std::thread::yield_now();
    }
    false
}

/// A wake-up for many sleepers at once: each waits until the sequence number moves on from
/// the value it saw, and one `wake_all` wakes them all. On Linux that is one futex system
/// call whatever the number of sleepers, where per-thread wake-ups cost one call (and on a
/// virtual machine often one cross-CPU interrupt) each, a cost paid one after another by the
/// waker. Callers re-check their own condition after waking: wake-ups may be spurious.
pub(crate) struct Broadcast {
    seq: AtomicU32,
    sleepers: AtomicU32,
    #[cfg(not(target_os = "linux"))]
    fallback: (Mutex<()>, parking_lot::Condvar),
}

impl Broadcast {
    pub(crate) fn new() -> Self {
        Broadcast {
            seq: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
            #[cfg(not(target_os = "linux"))]
            fallback: Default::default(),
        }
    }

    /// The sequence number to pass to [`Broadcast::wait`]: read it while the condition
    /// being waited for is known to be false (under the lock that guards it).
    pub(crate) fn seq(&self) -> u32 {
        self.seq.load(Ordering::SeqCst)
    }

    /// Waits until a `wake_all` after `seen` was read (or returns at once if one came):
    /// first for up to `poll`, polling and yielding the CPU to any other runnable thread,
    /// then asleep.
    pub(crate) fn wait(&self, seen: u32, poll: Duration) {
        if poll_until(poll, || self.seq.load(Ordering::Acquire) != seen) {
            return;
        }
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        #[cfg(target_os = "linux")]
        // SAFETY: FUTEX_WAIT only reads the aligned u32 behind the pointer, which lives as
        // long as `self`; it sleeps only while that word still equals `seen`.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.seq.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                seen,
                std::ptr::null::<libc::timespec>(),
            );
        }
        #[cfg(not(target_os = "linux"))]
        {
            let mut g = self.fallback.0.lock();
            if self.seq.load(Ordering::SeqCst) == seen {
                self.fallback.1.wait(&mut g);
            }
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    /// Moves the sequence on and wakes every sleeper.
    pub(crate) fn wake_all(&self) {
        self.seq.fetch_add(1, Ordering::SeqCst);
        // A sleeper counted itself before checking the word, so after the increment either
        // it is counted here or its futex check sees the new word and does not sleep.
        if self.sleepers.load(Ordering::SeqCst) == 0 {
            return;
        }
        #[cfg(target_os = "linux")]
        // SAFETY: FUTEX_WAKE touches no memory; the address only names the wait queue.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.seq.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                i32::MAX,
            );
        }
        #[cfg(not(target_os = "linux"))]
        {
            drop(self.fallback.0.lock());
            self.fallback.1.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn readers_never_see_a_half_done_write() {
        // Miri interprets every step (it checks the unsafe code here for undefined
        // behaviour): fewer rounds there.
        half_done_writes_unseen(4, if cfg!(miri) { 200 } else { 20_000 });
    }

    /// More threads than per-thread slots: the rest share one slot, and each thread that
    /// ends gives its slot back.
    #[test]
    #[cfg_attr(miri, ignore = "hundreds of threads are too slow under Miri")]
    fn more_threads_than_slots() {
        half_done_writes_unseen(SHARED_SLOT as u64 + 40, 500);
        let slot = std::thread::spawn(my_slot).join().unwrap();
        assert!(slot < SHARED_SLOT, "slots of ended threads are free again");
    }

    fn half_done_writes_unseen(threads: u64, rounds: u64) {
        let lock = Arc::new(ReadMostlyLock::new((0u64, 0u64)));
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for i in 0..rounds {
                        if (i + t) % 5 == 0 {
                            // Half the threads back off, half queue: both exclude readers.
                            let mut w = if t % 2 == 0 {
                                lock.write()
                            } else {
                                lock.write_backing_off()
                            };
                            w.0 += 1;
                            std::hint::spin_loop();
                            w.1 += 1;
                        } else {
                            let r = lock.read();
                            assert_eq!(r.0, r.1, "a reader saw a writer's half-done update");
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let r = lock.read();
        let writes = (0..threads)
            .map(|t| (0..rounds).filter(|i| (i + t) % 5 == 0).count() as u64)
            .sum::<u64>();
        assert_eq!((r.0, r.1), (writes, writes));
    }

    /// Writers backing off while one thread takes the lock again and again (holding it
    /// most of the time, as a stream of auto-commits does) each get it in turn: the
    /// standby's backoff ends by queueing, and the gate serves the others in order.
    #[test]
    #[cfg_attr(miri, ignore = "timed sleeps are too slow under Miri")]
    fn writers_backing_off_are_not_starved_by_a_busy_writer() {
        let lock = Arc::new(ReadMostlyLock::new(0u64));
        let stop = Arc::new(AtomicBool::new(false));
        let busy = {
            let (lock, stop) = (lock.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let mut w = lock.write_backing_off();
                    let until = Instant::now() + Duration::from_micros(50);
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                    *w += 1;
                }
            })
        };
        let waiters: Vec<_> = (0..4)
            .map(|_| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for _ in 0..20 {
                        *lock.write_backing_off() += 1_000_000;
                    }
                })
            })
            .collect();
        for w in waiters {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        busy.join().unwrap();
        assert_eq!(
            *lock.read() / 1_000_000,
            80,
            "every waiter's writes went in"
        );
    }

    /// A writer's turn goes on while no one waits, or until it has lasted [`TURN`]; then it
    /// ends at the next of its checks (one hold in 64), and a new holder starts a turn.
    #[test]
    fn a_turn_ends_only_when_it_is_over_and_another_writer_waits() {
        let mut turn = Turn::default();
        assert!(turn.continues(1, || unreachable!("a new holder checks nothing")));
        // Began in the future: however slowly the test runs (Miri), the turn is fresh.
        turn.began += Duration::from_secs(3600);
        for _ in 0..200 {
            assert!(turn.continues(1, || true), "a fresh turn goes on");
        }
        turn.began = Instant::now() - TURN;
        let holds = (0..64).filter(|_| turn.continues(1, || false)).count();
        assert_eq!(holds, 64, "no one waits: the turn goes on");
        let ended = (1..=64).find(|_| !turn.continues(1, || true));
        assert!(
            ended.is_some(),
            "over and someone waits: ends within 64 holds"
        );
        assert!(turn.continues(2, || true), "the next holder's turn begins");
        assert_eq!(turn.holder, 2);
    }

    /// Every round, each sleeper (asleep or polling) sees the round's value once woken: none
    /// misses a wake-up and sleeps on, which would hang the test.
    #[test]
    fn one_wake_all_releases_every_sleeper() {
        const ROUNDS: u64 = if cfg!(miri) { 10 } else { 200 };
        let wake = Arc::new(Broadcast::new());
        let round = Arc::new(AtomicU64::new(0));
        let sleepers: Vec<_> = (0..6u64)
            .map(|t| {
                let (wake, round) = (wake.clone(), round.clone());
                std::thread::spawn(move || {
                    let poll = Duration::from_micros(if t % 2 == 0 { 0 } else { 50 });
                    for r in 1..=ROUNDS {
                        loop {
                            let seen = wake.seq();
                            if round.load(Ordering::SeqCst) >= r {
                                break;
                            }
                            wake.wait(seen, poll);
                        }
                    }
                })
            })
            .collect();
        for r in 1..=ROUNDS {
            std::thread::sleep(Duration::from_micros(100));
            round.store(r, Ordering::SeqCst);
            wake.wake_all();
        }
        for s in sleepers {
            s.join().unwrap();
        }
        // A sequence that has already moved on does not wait at all.
        let before = wake.seq();
        wake.wake_all();
        wake.wait(before, Duration::ZERO);
    }
}
