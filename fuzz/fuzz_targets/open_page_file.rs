//! Any bytes as a page file: opening, reading every entry and verifying must end in data or
//! a typed error, never a panic or a hang. Exercises every page decoder (meta, node,
//! overflow, free list, catalog records) through the public API.
#![no_main]

use beechdb::storage::{MemStorage, Storage};
use beechdb::{Config, Env};
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;

fuzz_target!(|data: &[u8]| {
    let storage = MemStorage::new();
    let f = storage.open("beech.db", true).unwrap();
    f.write_at(data, 0).unwrap();
    f.sync_data().unwrap();
    storage.sync_dir().unwrap();
    if let Ok(env) = Env::open_with_storage(Arc::new(storage), Config::new().cache_size(256 << 10).create(false).adopt_mode(true).accept_meta_fallback(true)) {
        for name in env.db_names().unwrap_or_default() {
            if let Ok(db) = env.open_db(&name) {
                for kv in db.iter().take(10_000) {
                    if kv.is_err() {
                        break;
                    }
                }
                let _ = db.get(b"probe");
                let _ = db.put(b"probe", b"value");
                let _ = db.delete(b"probe");
            }
        }
        let _ = env.verify();
        let _ = env.sync();
    }
});
