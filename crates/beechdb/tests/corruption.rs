//! Corruption test: flip bytes in pages of every kind (meta, branch, leaf, overflow, free
//! list). Every flip must be reported (by open, a read, or verify) and no read may return
//! wrong data; nothing may panic. A damaged meta page is indistinguishable from a meta write
//! torn by a crash, so the environment opens the previous checkpoint from the other meta
//! page, as crash recovery would, and reports the damage: there the previous synced state,
//! whole and unmixed, is the right answer.

use beechdb::storage::MemStorage;
use beechdb::{Config, Env, Error};
use std::collections::BTreeMap;
use std::sync::Arc;

const PS: usize = 4096;

fn config() -> Config {
    Config::new().page_size(PS).cache_size(64 << 10)
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Builds an environment with branch, leaf, overflow and free-list pages, synced twice.
/// Returns the final state and the state of the first sync.
fn build() -> (MemStorage, Model, Model) {
    let storage = MemStorage::new();
    let env = Env::open_with_storage(Arc::new(storage.clone()), config()).unwrap();
    let db = env.open_or_create_db("d").unwrap();
    let mut model = BTreeMap::new();
    for i in 0..2000u32 {
        let k = format!("key{i:06}").into_bytes();
        let v = if i % 100 == 0 {
            vec![i as u8; 9000]
        } else {
            format!("value{i}").into_bytes()
        };
        db.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    env.sync().unwrap();
    let first = model.clone();
    for i in (0..2000u32).step_by(3) {
        let k = format!("key{i:06}").into_bytes();
        db.delete(&k).unwrap();
        model.remove(&k);
    }
    env.close().unwrap();
    (storage, model, first)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Pages listed free by the newest meta page, read per docs/file-format.md: free pages keep
/// stale images, and damage there rightly goes unnoticed.
fn free_pages(bytes: &[u8]) -> Vec<usize> {
    let meta = (0..2)
        .map(|s| &bytes[s * PS..s * PS + 128])
        .max_by_key(|m| u64_at(m, 24))
        .unwrap();
    let (mut pid, mut free) = (u64_at(meta, 40) as usize, Vec::new());
    while pid != 0 {
        let page = &bytes[pid * PS..(pid + 1) * PS];
        let n = u32::from_le_bytes(page[32..36].try_into().unwrap()) as usize;
        free.extend((0..n).map(|i| u64_at(page, 40 + 8 * i) as usize));
        pid = u64_at(page, 24) as usize;
    }
    free
}

fn page_kind(bytes: &[u8], pid: usize) -> u8 {
    if pid < 2 {
        return 0; // meta
    }
    bytes[pid * PS + 4]
}

/// Opens, reads everything, verifies: returns whether damage was reported; panics on wrong
/// data. Every value read must come from `model`.
fn check(storage: MemStorage, model: &Model, what: &str) -> bool {
    let env = match Env::open_with_storage(Arc::new(storage), config()) {
        Ok(env) => env,
        Err(Error::Corrupt { .. }) => return true,
        Err(e) => panic!("{what}: open failed with a non-corruption error: {e}"),
    };
    let mut reported = false;
    match env.open_db("d") {
        Ok(db) => {
            for (k, v) in model {
                match db.get(k) {
                    Ok(Some(got)) => assert_eq!(&got, v, "{what}: wrong value for {k:?}"),
                    Ok(None) => panic!("{what}: key {k:?} silently missing"),
                    Err(Error::Corrupt { .. }) => reported = true,
                    Err(e) => panic!("{what}: unexpected error {e}"),
                }
            }
            for kv in db.iter() {
                match kv {
                    Ok((k, v)) => {
                        assert_eq!(model.get(&k), Some(&v), "{what}: scan returned wrong data")
                    }
                    Err(Error::Corrupt { .. }) => {
                        reported = true;
                        break;
                    }
                    Err(e) => panic!("{what}: unexpected error {e}"),
                }
            }
        }
        Err(Error::DbNotFound(_)) => reported = true,
        Err(e) => panic!("{what}: {e}"),
    }
    let report = env.verify().unwrap();
    reported || !report.is_clean()
}

#[test]
fn every_flip_in_every_page_kind_is_reported() {
    let (storage, model, first) = build();
    let bytes = storage.file_bytes("beech.db").unwrap();
    let pages = bytes.len() / PS;
    let mut by_kind: BTreeMap<u8, Vec<usize>> = BTreeMap::new();
    let free = free_pages(&bytes);
    assert!(free.len() > 10, "the build should leave free pages");
    for pid in (0..pages).filter(|p| !free.contains(p)) {
        by_kind.entry(page_kind(&bytes, pid)).or_default().push(pid);
    }
    // Meta (0), leaf (1), branch (2), overflow (3), free list (4) must all be present.
    for kind in 0..=4u8 {
        assert!(
            by_kind.contains_key(&kind),
            "no page of kind {kind} to damage: {:?}",
            by_kind.keys()
        );
    }
    let mut flips = 0;
    for (kind, pids) in &by_kind {
        for (n, &pid) in pids
            .iter()
            .enumerate()
            .filter(|(n, _)| n.is_multiple_of(3) || *kind == 0)
        {
            for offset in [0usize, 5, 13, 33, 41, 200, 1000, 2047, PS - 1] {
                if pid < 2 && offset >= 128 {
                    continue; // the meta record is the first 128 bytes; the rest is unused
                }
                let damaged = storage.crash_image(0);
                damaged
                    .edit_file("beech.db", |b| {
                        b[pid * PS + offset] ^= 1 << ((n + offset) % 8)
                    })
                    .unwrap();
                let what = format!("kind {kind} page {pid} offset {offset}");
                // Meta slot 1 holds the newest checkpoint (generation 3 of create, sync, close).
                let expect = if *kind == 0 && pid == 1 {
                    &first
                } else {
                    &model
                };
                assert!(
                    check(damaged, expect, &what),
                    "{what}: damage went unreported"
                );
                flips += 1;
            }
        }
    }
    assert!(flips > 100, "only {flips} flips tried");
}

#[test]
fn a_damaged_meta_is_refused_unless_the_fallback_is_accepted() {
    let (storage, _, _) = build();
    let damaged = storage.crash_image(0);
    // The newest meta: generation 3 (create=1, sync=2, close=3) sits in slot 3 % 2 = 1.
    damaged
        .edit_file("beech.db", |b| b[PS + 30] ^= 0xff)
        .unwrap();
    // Refused unless accepted, and nothing is changed by the refusal.
    let before = damaged.file_bytes("beech.db").unwrap();
    let refused = Env::open_with_storage(Arc::new(damaged.clone()), config());
    assert!(
        matches!(&refused, Err(beechdb::Error::Corrupt { detail, .. }) if detail.contains("accept_meta_fallback")),
        "{:?}",
        refused.err()
    );
    assert_eq!(damaged.file_bytes("beech.db").unwrap(), before);
    let env =
        Env::open_with_storage(Arc::new(damaged), config().accept_meta_fallback(true)).unwrap();
    let stat = env.stat().unwrap();
    assert_eq!(stat.generation, 2);
    assert_eq!(stat.meta_warnings.len(), 1, "{:?}", stat.meta_warnings);
    let report = env.verify().unwrap();
    assert!(
        report.problems.iter().any(|p| p.kind == "meta"),
        "{:?}",
        report.problems
    );
}

/// Salvage past a damaged branch: its leaves are no longer reached from the root, but are
/// read as orphans, so every record comes back exactly.
#[test]
fn salvage_reads_the_leaves_of_a_damaged_branch_as_orphans() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::new();
    {
        let env = Env::open(dir.path(), config()).unwrap();
        let db = env.create_db("d").unwrap();
        for i in 0..6000u32 {
            let (k, v) = (
                format!("key{i:06}").into_bytes(),
                format!("v{i}").into_bytes(),
            );
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        assert!(db.stat().unwrap().depth >= 2);
        env.close().unwrap();
    }
    let path = dir.path().join("beech.db");
    let mut bytes = std::fs::read(&path).unwrap();
    let branches: Vec<usize> = (2..bytes.len() / PS)
        .filter(|&p| bytes[p * PS + 4] == 2)
        .collect();
    // A branch (the root, in a tree of two levels): a byte of its cells flipped.
    let victim = branches[branches.len() / 2];
    bytes[victim * PS + PS - 10] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let mut got = Model::new();
    let mut orphans = 0;
    let report = beechdb::salvage_path(dir.path(), |s| {
        if s.database.is_none() {
            orphans += s.entries.len();
        }
        got.extend(s.pairs());
        Ok(())
    })
    .unwrap();
    assert!(!report.is_clean());
    assert!(orphans > 0, "the damaged branch's leaves are orphans");
    assert!(
        got == model,
        "salvage recovered {} of {} records",
        got.len(),
        model.len()
    );
}
