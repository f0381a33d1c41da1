//! Any bytes in a log segment: recovery must replay, cut a torn tail, or refuse with a typed
//! error, never panic, hang or replay a record that is not whole. The first byte picks how
//! the input lands: as the whole segment file, or written over a valid segment after its
//! header (so that the record decoder, the chain and the damage rules see it). The same
//! bytes go through `print_log`, which decodes every record kind it finds.
#![no_main]

use beechdb::storage::MemStorage;
use beechdb::{Config, Durability, Env};
use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};

fn config() -> Config {
    Config::new()
        .page_size(4096)
        .cache_size(256 << 10)
        .transactional(true)
        .log_segment_size(64 << 10)
}

/// An environment whose 20 SYNC commits only the log holds (its process was killed).
fn base() -> &'static MemStorage {
    static BASE: OnceLock<MemStorage> = OnceLock::new();
    BASE.get_or_init(|| {
        let storage = MemStorage::new();
        let env = Env::open_with_storage(Arc::new(storage.clone()), config()).unwrap();
        let db = env.create_db("d").unwrap();
        for i in 0..20u32 {
            let t = env.begin_txn().unwrap();
            t.put(&db, &i.to_be_bytes(), &[i as u8; 40]).unwrap();
            t.commit_with(Durability::Sync).unwrap();
        }
        std::mem::forget(env);
        storage.restart_process()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&how, bytes)) = data.split_first() else {
        return;
    };
    // Everything in the base is durable: its crash image is an exact copy.
    let storage = base().crash_image(0);
    storage
        .edit_file("log.0000000001", |file| {
            if how % 2 == 0 {
                *file = bytes.to_vec();
            } else {
                let at = 64 + (how as usize / 2) * 8;
                if file.len() < at + bytes.len() {
                    file.resize(at + bytes.len(), 0);
                }
                file[at..at + bytes.len()].copy_from_slice(bytes);
            }
        })
        .unwrap();
    let _ = beechdb::print_log(&storage, &mut std::io::sink());
    if let Ok(env) = Env::open_with_storage(Arc::new(storage), config().create(false)) {
        if let Ok(db) = env.open_db("d") {
            for kv in db.iter() {
                if kv.is_err() {
                    break;
                }
            }
        }
        let _ = env.verify();
    }
});
