//! Any bytes where replication reads them: a replicated commit applied to an environment,
//! a frame arriving on a member's connection, a member's log file, a received copy of an
//! environment. Each gives a typed error or a result; never a panic.
#![no_main]

use beechdb::storage::MemStorage;
use beechdb::{Config, Durability, Env};
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 4 {
        0 => {
            let storage = Arc::new(MemStorage::new());
            let env = Env::open_with_storage(storage, Config::default().transactional(true)).unwrap();
            let _ = env.create_db("a");
            let _ = env.apply_replicated(&[rest], None, Durability::NoSync);
        }
        1 => {
            let _ = beechdb_repl::fuzzing::read_frame(rest);
        }
        2 => {
            let dir = tempfile::tempdir().unwrap();
            let _ = beechdb_repl::fuzzing::open_log(dir.path(), rest);
        }
        _ => {
            let dir = tempfile::tempdir().unwrap();
            let _ = beechdb_repl::fuzzing::receive_copy(rest, &dir.path().join("copy"));
        }
    }
});
