//! The log's file work, counted: what a flush syncs when it crosses segments, the background
//! syncs that keep a segment switch short, and commits written through the segment's mapping
//! (WRITE_NOSYNC) read back by a reopen and by a reader of the live log.

use beechdb::{Config, Durability, Env, LogCounts};
use std::time::{Duration, Instant};

const SEGMENT: u64 = 256 << 10;

fn config(d: Durability) -> Config {
    Config::new()
        .page_size(4096)
        .transactional(true)
        .durability(d)
        .log_segment_size(SEGMENT)
}

fn log_counts(env: &Env) -> LogCounts {
    env.stat().unwrap().txn.unwrap().log.unwrap()
}

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

#[test]
fn nosync_crossing_segments_syncs_each_old_segment_once() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path(), config(Durability::NoSync)).unwrap();
    let db = env.create_db("d").unwrap();
    // About 20 segments of log, written out a megabyte (four segments) at a time.
    for i in 0..40_000u64 {
        db.put(&key(i), &[7u8; 100]).unwrap();
    }
    let log = log_counts(&env);
    let segments = log.segments_prepared + log.segments_created_inline;
    assert!(segments >= 15, "{log:?}");
    // Each switch syncs the segment before it once; background syncs come on top. Before
    // this was counted, every flush synced, twice, every segment since the log was last
    // made durable, which in NOSYNC is never: well over a hundred here.
    assert!(
        log.fsyncs <= segments + log.background_syncs + 1,
        "{} fsyncs for {segments} segments: {log:?}",
        log.fsyncs
    );
    env.close().unwrap();
}

#[test]
fn a_quarter_segment_not_durable_brings_a_background_sync() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path(), config(Durability::WriteNoSync)).unwrap();
    let db = env.create_db("d").unwrap();
    for i in 0..(SEGMENT / 4 / 100 + 100) {
        db.put(&key(i), &[9u8; 100]).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while log_counts(&env).background_syncs == 0 {
        assert!(
            Instant::now() < deadline,
            "no background sync: {:?}",
            log_counts(&env)
        );
        // Each commit asks again once the durable end has moved; one more asks now.
        db.put(b"nudge", b"x").unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    env.close().unwrap();
}

#[test]
fn write_nosync_commits_are_in_the_log_files_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let n = 6_000u64;
    let env = Env::open(dir.path(), config(Durability::WriteNoSync)).unwrap();
    let db = env.create_db("d").unwrap();
    for i in 0..n {
        db.put(&key(i), &i.to_le_bytes()).unwrap();
    }
    // A reader of the files (as `beech printlog` beside a running process) finds every
    // commit: what went through a segment's mapping is in the file as a write puts it.
    let storage = beechdb::storage::OsStorage::existing(dir.path()).unwrap();
    let mut listing = Vec::new();
    beechdb::print_log(&storage, &mut listing).unwrap();
    let listing = String::from_utf8(listing).unwrap();
    let commits = listing.lines().filter(|l| l.contains("commit")).count() as u64;
    assert!(commits > n, "{commits} commits listed for {n} puts");
    env.close().unwrap();
    let env = Env::open(dir.path(), config(Durability::WriteNoSync).create(false)).unwrap();
    let db = env.open_db("d").unwrap();
    for i in 0..n {
        assert_eq!(
            db.get(&key(i)).unwrap(),
            Some(i.to_le_bytes().to_vec()),
            "key {i}"
        );
    }
    env.close().unwrap();
}

#[test]
fn a_failed_background_sync_stops_every_later_commit() {
    use beechdb::storage::{FaultKind, MemStorage};
    let storage = MemStorage::new();
    let env = Env::open_with_storage(
        std::sync::Arc::new(storage.clone()),
        config(Durability::WriteNoSync),
    )
    .unwrap();
    let db = env.create_db("d").unwrap();
    // The background thread's first work, once a quarter segment is written: the spare
    // segment (synced: the first sync from here), then the sync of the segment being
    // written (the second), which fails. WRITE_NOSYNC hands each commit to the OS, so
    // there is written log to sync.
    storage.inject_fault(FaultKind::Sync, 2, libc::EIO);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut i = 0u64;
    let err = loop {
        match db.put(&key(i), &[5u8; 100]) {
            Ok(()) => i += 1,
            Err(e) => break e,
        }
        // Pauses give the background thread its turn before the segment fills (a switch
        // would sync the segment itself).
        if i.is_multiple_of(50) {
            assert!(Instant::now() < deadline, "no commit failed after {i}");
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    assert!(
        matches!(&err, beechdb::Error::Poisoned { cause } if cause.contains("syncing log segment")),
        "after {i} commits: {err}"
    );
    assert!(log_counts(&env).background_syncs >= 1);
    // Every later commit is refused too.
    assert!(db.put(b"later", b"x").is_err());
    drop(env);
    // The next process recovers a prefix of what was committed.
    let env = Env::open_with_storage(
        std::sync::Arc::new(storage.restart_process()),
        config(Durability::WriteNoSync).create(false),
    )
    .unwrap();
    let db = env.open_db("d").unwrap();
    let n = db.len().unwrap();
    assert!(n <= i);
    for k in 0..n {
        assert!(
            db.get(&key(k)).unwrap().is_some(),
            "key {k} of a prefix of {n}"
        );
    }
}
