//! Fault injection through the storage seam in a transactional environment: EIO and ENOSPC
//! at every write and sync of the log, of segment creation and of checkpoints. Each must give
//! a clear error, refuse later commits, lose no acknowledged commit, and leave an environment
//! that recovers cleanly.

mod common;

use beechdb::storage::{FaultKind, MemStorage};
use beechdb::{Config, Durability, Env, Error};
use std::collections::BTreeMap;
use std::sync::Arc;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn config() -> Config {
    Config::new()
        .page_size(4096)
        .cache_size(64 << 10)
        .transactional(true)
        .log_segment_size(64 << 10)
        .checkpoint_log_bytes(48 << 10)
}

/// Commits until the first error. Returns the model after each commit and the error.
fn workload(storage: &MemStorage) -> (Vec<Model>, Option<Error>) {
    let mut models = vec![Model::new()];
    // Opening runs recovery, which writes (it cuts the log's tail): it may meet the fault too.
    let env = match Env::open_with_storage(Arc::new(storage.clone()), config()) {
        Ok(env) => env,
        Err(e) => return (models, Some(e)),
    };
    let db = env.open_db("d").unwrap();
    let mut model = Model::new();
    for i in 0..120u32 {
        let t = env.begin_txn().unwrap();
        for j in 0..3u32 {
            let k = format!("{:04}", (i * 37 + j * 101) % 500).into_bytes();
            let v = vec![
                i as u8;
                if j == 0 && i.is_multiple_of(25) {
                    5000
                } else {
                    80
                }
            ];
            t.put(&db, &k, &v).unwrap();
            model.insert(k, v);
        }
        match t.commit_with(Durability::Sync) {
            Ok(_) => models.push(model.clone()),
            Err(e) => {
                // Refuses further commits with a clear error, and stays readable.
                let again = env.begin_txn().unwrap();
                again.put(&db, b"after", b"failure").unwrap();
                let r = again.commit();
                assert!(
                    matches!(r, Err(Error::Poisoned { .. }) | Err(Error::Io { .. })),
                    "{r:?}"
                );
                // Still readable: each key as the acknowledged commits left it, or as the
                // failed commit wrote it (a fault in the fsync wait comes after the apply).
                let acked = models.last().unwrap();
                for k in model.keys().step_by(7) {
                    let got = db.get(k).unwrap();
                    assert!(
                        got.as_ref() == acked.get(k) || got.as_ref() == model.get(k),
                        "a read after the failure"
                    );
                }
                common::kill(storage, env);
                return (models, Some(e));
            }
        }
    }
    common::kill(storage, env);
    (models, None)
}

#[test]
fn io_faults_in_log_and_checkpoint_paths() {
    let mut hit = 0;
    for kind in [FaultKind::Write, FaultKind::Sync] {
        for errno in [libc::EIO, libc::ENOSPC] {
            for nth in 1..160u64 {
                let storage = MemStorage::new();
                let env = Env::open_with_storage(Arc::new(storage.clone()), config()).unwrap();
                env.create_db("d").unwrap();
                env.close().unwrap();
                storage.inject_fault(kind, nth, errno);
                let (models, err) = workload(&storage);
                let Some(err) = err else { continue };
                hit += 1;
                match &err {
                    Error::Io { source, .. } => {
                        assert_eq!(source.raw_os_error(), Some(errno), "{err}")
                    }
                    Error::Poisoned { cause } => assert!(!cause.is_empty()),
                    e => panic!("{kind:?} #{nth}: unexpected error {e}"),
                }
                // Every acknowledged commit survives a crash right after the failure.
                let image = storage.crash_image(nth);
                let env = Env::open_with_storage(Arc::new(image), config()).unwrap();
                let state: Model = env
                    .open_db("d")
                    .map(|db| db.iter().map(|kv| kv.unwrap()).collect())
                    .unwrap();
                let acked = models.len() - 1;
                let ok = models[acked..].contains(&state) || models.last() == Some(&state);
                // The commit that failed may or may not be there; nothing before it may be lost.
                let with_failed = {
                    let mut m = models[acked].clone();
                    let i = acked as u32;
                    for j in 0..3u32 {
                        m.insert(
                            format!("{:04}", (i * 37 + j * 101) % 500).into_bytes(),
                            vec![
                                i as u8;
                                if j == 0 && i.is_multiple_of(25) {
                                    5000
                                } else {
                                    80
                                }
                            ],
                        );
                    }
                    m
                };
                assert!(
                    ok || state == with_failed,
                    "{kind:?} #{nth} errno {errno}: recovered state lost acknowledged commits"
                );
                env.sync().unwrap();
                assert!(env.verify().unwrap().is_clean());
            }
        }
    }
    assert!(hit > 200, "only {hit} faults hit the workload");
}
