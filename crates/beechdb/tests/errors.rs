//! Bad input and misuse get typed errors; I/O faults poison the environment without losing
//! what was synced.

mod common;

use beechdb::storage::{FaultKind, MemStorage};
use beechdb::{Config, Env, Error};
use std::collections::BTreeMap;
use std::sync::Arc;

fn mem_env(storage: &MemStorage) -> Env {
    Env::open_with_storage(
        Arc::new(storage.clone()),
        Config::new().page_size(4096).cache_size(64 << 10),
    )
    .unwrap()
}

#[test]
fn size_limits() {
    let storage = MemStorage::new();
    let env = mem_env(&storage);
    let db = env.create_db("d").unwrap();
    let max = env.max_key_len();
    assert_eq!(max, beechdb::MAX_KEY_LEN, "not bound to the page size");
    db.put(&vec![7u8; max], b"v").unwrap();
    assert!(db.delete(&vec![7u8; max]).unwrap());
    assert!(
        matches!(db.put(&vec![7u8; max + 1], b"v"), Err(Error::KeyTooLarge { len, max: m }) if len == max + 1 && m == max)
    );
    assert!(matches!(db.get(&vec![7u8; max + 1]), Ok(None)));
    db.put(b"", b"empty key").unwrap();
    assert_eq!(db.get(b"").unwrap().unwrap(), b"empty key");
    // A 64 MiB value lives on overflow pages and survives a reopen intact.
    let big: Vec<u8> = (0..64u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    db.put(b"big", &big).unwrap();
    assert!(db.get(b"big").unwrap().unwrap() == big);
    drop(db);
    env.close().unwrap();
    let env = mem_env(&storage);
    let db = env.open_db("d").unwrap();
    assert!(db.get(b"big").unwrap().unwrap() == big);
    db.delete(b"big").unwrap();
    env.sync().unwrap();
    assert!(env.verify().unwrap().is_clean());
}

#[test]
fn handle_misuse_and_names() {
    let storage = MemStorage::new();
    let env = mem_env(&storage);
    assert!(matches!(env.open_db("nope"), Err(Error::DbNotFound(_))));
    let a = env.create_db("a").unwrap();
    assert!(matches!(env.create_db("a"), Err(Error::DbExists(_))));
    assert!(matches!(env.create_db(""), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        env.create_db(&"x".repeat(256)),
        Err(Error::InvalidArgument(_))
    ));
    a.put(b"k", b"v").unwrap();
    assert!(matches!(a.insert(b"k", b"w"), Err(Error::KeyExists)));
    env.remove_db("a").unwrap();
    assert!(matches!(a.get(b"k"), Err(Error::DbRemoved)));
    assert!(matches!(a.put(b"k", b"v"), Err(Error::DbRemoved)));
    assert!(matches!(env.remove_db("a"), Err(Error::DbNotFound(_))));
    let b = env.create_db("b").unwrap();
    for i in 0..10u8 {
        b.put(&[i], b"v").unwrap();
    }
    // Iterators and cursors opened before the close, with entries already copied out.
    let mut iter = b.iter();
    assert!(iter.next().unwrap().is_ok());
    let mut cursor = b.cursor();
    assert!(cursor.first().unwrap());
    let env2 = env.clone();
    env.close().unwrap();
    assert!(matches!(iter.next(), Some(Err(Error::Closed))));
    assert!(matches!(cursor.next(), Err(Error::Closed)));
    assert!(matches!(cursor.prev(), Err(Error::Closed)));
    assert!(matches!(b.get(b"k"), Err(Error::Closed)));
    assert!(matches!(env2.sync(), Err(Error::Closed)));
    assert!(matches!(b.cursor().first(), Err(Error::Closed)));
    // Each error has Berkeley DB's code.
    assert_eq!(Error::Closed.code(), (libc::EINVAL, "EINVAL"));
    assert_eq!(Error::KeyExists.code().0, beechdb::codes::DB_KEYEXIST);
    assert_eq!(Error::Deadlock.code().1, "DB_LOCK_DEADLOCK");
    assert_eq!(Error::LockTimeout.code().0, -30992);
    // Closing released the lock: the environment opens again.
    let env = mem_env(&storage);
    assert_eq!(env.db_names().unwrap(), vec!["b".to_string()]);
}

#[test]
fn bad_configuration_is_rejected() {
    for ps in [0usize, 1000, 3000, 2048, 131072] {
        let r = Env::open_with_storage(Arc::new(MemStorage::new()), Config::new().page_size(ps));
        assert!(
            matches!(r, Err(Error::InvalidArgument(_))),
            "page size {ps}"
        );
    }
    let r = Env::open_with_storage(Arc::new(MemStorage::new()), Config::new().create(false));
    assert!(matches!(r, Err(Error::InvalidArgument(_))));
    // A cache that cannot hold 16 pages is refused, for a new environment and for an
    // existing one whose pages are larger than the configuration's.
    for cache in [0, 100, (16 << 14) - 1] {
        let r =
            Env::open_with_storage(Arc::new(MemStorage::new()), Config::new().cache_size(cache));
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "cache {cache}");
    }
    let storage = Arc::new(MemStorage::new());
    Env::open_with_storage(storage.clone(), Config::new().page_size(65536))
        .unwrap()
        .close()
        .unwrap();
    let r = Env::open_with_storage(storage, Config::new().page_size(4096).cache_size(64 << 10));
    assert!(matches!(r, Err(Error::InvalidArgument(m)) if m.contains("65536-byte pages")));
}

#[test]
fn txn_scans_fail_once_the_environment_is_closed() {
    let env = Env::open_with_storage(
        Arc::new(MemStorage::new()),
        Config::new().transactional(true),
    )
    .unwrap();
    let db = env.create_db("t").unwrap();
    for i in 0..10u8 {
        db.put(&[i], b"v").unwrap();
    }
    let t = env.begin_txn().unwrap();
    let mut scan = t.iter(&db);
    assert!(scan.next().unwrap().is_ok());
    // A whole range without naming a key type: `iter` is the spelling of `range(..)`.
    assert_eq!(t.iter(&db).count(), 10);
    env.clone().close().unwrap();
    assert!(matches!(scan.next(), Some(Err(Error::Closed))));
}

#[test]
fn second_open_in_process_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path(), Config::new()).unwrap();
    assert!(matches!(
        Env::open(dir.path(), Config::new()),
        Err(Error::Locked { .. })
    ));
    env.close().unwrap();
    Env::open(dir.path(), Config::new()).unwrap();
}

/// A process forked while an environment is open holds a copy of its lock file until it
/// execs or exits (here: it sleeps). Closing the environment releases the lock all the same,
/// so the directory can be opened again at once.
#[test]
fn a_close_releases_the_lock_a_forked_child_still_holds() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path(), Config::new()).unwrap();
    // SAFETY: the child only sleeps and exits, both async-signal-safe.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork failed");
    if child == 0 {
        unsafe {
            libc::sleep(2);
            libc::_exit(0);
        }
    }
    env.close().unwrap();
    let reopened = Env::open(dir.path(), Config::new());
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(child, &mut status, 0) };
    reopened.unwrap().close().unwrap();
}

#[test]
fn second_process_is_locked() {
    if let Ok(dir) = std::env::var("BEECH_LOCK_CHILD_DIR") {
        // The child: report what opening gives.
        match Env::open(&dir, Config::new()) {
            Err(Error::Locked { .. }) => println!("LOCKED"),
            Err(e) => println!("ERROR {e}"),
            Ok(_) => println!("OPENED"),
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path(), Config::new()).unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "second_process_is_locked", "--nocapture"])
        .env("BEECH_LOCK_CHILD_DIR", dir.path())
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("LOCKED"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    drop(env);
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Puts and syncs until the first error; returns the synced states and that error.
fn faulty_workload(storage: &MemStorage) -> (Vec<Model>, Option<Error>) {
    let mut synced = vec![Model::new()];
    // Opening writes too (it makes its checkpoint durable): it may meet the fault.
    let config = Config::new().page_size(4096).cache_size(64 << 10);
    let env = match Env::open_with_storage(Arc::new(storage.clone()), config) {
        Ok(env) => env,
        Err(e) => return (synced, Some(e)),
    };
    let db = env.open_or_create_db("d").unwrap();
    let mut model = Model::new();
    for round in 0..6u32 {
        for i in 0..150u32 {
            let k = format!("{:05}", (i * 7919 + round * 13) % 1000).into_bytes();
            let v = vec![round as u8; if i % 40 == 0 { 6000 } else { 50 }];
            if let Err(e) = db.put(&k, &v) {
                return (synced, Some(e));
            }
            model.insert(k, v);
        }
        synced.push(model.clone());
        if let Err(e) = env.sync() {
            // Refuses writes from now on, with a clear error.
            assert!(matches!(db.put(b"x", b"y"), Err(Error::Poisoned { .. })));
            assert!(matches!(env.sync(), Err(Error::Poisoned { .. })));
            // ... and still serves reads, from memory, with the data as written.
            for (k, v) in model.iter().step_by(37) {
                assert_eq!(
                    db.get(k).unwrap().as_ref(),
                    Some(v),
                    "a read after the failure"
                );
            }
            common::kill(storage, env);
            return (synced, Some(e));
        }
    }
    common::kill(storage, env);
    (synced, None)
}

#[test]
fn io_faults_at_every_point_poison_and_lose_nothing_synced() {
    let probe = MemStorage::new();
    faulty_workload(&probe);
    let mut faults = 0;
    for kind in [FaultKind::Write, FaultKind::Sync] {
        for errno in [libc::EIO, libc::ENOSPC] {
            for nth in 1..200u64 {
                let storage = MemStorage::new();
                // Fault the nth call of this kind after the environment exists.
                let env = mem_env(&storage);
                drop(env);
                storage.inject_fault(kind, nth, errno);
                let (synced, err) = faulty_workload(&storage);
                let Some(err) = err else { continue };
                faults += 1;
                match &err {
                    Error::Io { source, .. } => assert_eq!(source.raw_os_error(), Some(errno)),
                    Error::Poisoned { .. } => {}
                    e => panic!("unexpected error {e}"),
                }
                let image = storage.crash_image(nth);
                let env = mem_env(&image);
                let state: Model = env
                    .open_db("d")
                    .map(|db| db.iter().map(|kv| kv.unwrap()).collect())
                    .unwrap_or_default();
                let last = synced.len() - 1;
                assert!(
                    state == synced[last] || state == synced[last.saturating_sub(1)],
                    "{kind:?} fault #{nth} (errno {errno}): recovered {} entries",
                    state.len()
                );
                env.sync().unwrap();
                assert!(env.verify().unwrap().is_clean());
            }
        }
    }
    assert!(faults > 100, "only {faults} faults hit the workload");
}

#[test]
fn an_autocommit_write_behind_this_threads_own_transaction_is_a_deadlock_at_once() {
    let env = Env::open_with_storage(
        Arc::new(MemStorage::new()),
        Config::new().transactional(true),
    )
    .unwrap();
    let db = env.create_db("t").unwrap();
    let t = env.begin_txn().unwrap();
    t.put(&db, b"k", b"in the transaction").unwrap();
    let started = std::time::Instant::now();
    assert!(matches!(db.put(b"k", b"auto-commit"), Err(Error::Deadlock)));
    assert!(matches!(db.delete(b"k"), Err(Error::Deadlock)));
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    // Another thread's auto-commit waits for the transaction, then goes ahead.
    std::thread::scope(|s| {
        let other = s.spawn(|| db.put(b"k", b"from another thread"));
        std::thread::sleep(std::time::Duration::from_millis(100));
        t.commit().unwrap();
        other.join().unwrap().unwrap();
    });
    assert_eq!(db.get(b"k").unwrap().unwrap(), b"from another thread");
}
