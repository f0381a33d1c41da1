//! The end of a large transaction leaves no freed memory unmerged in the allocator. glibc
//! keeps small freed blocks in "fast bins" until the next large allocation merges them all
//! at once: after a 100,000-row load, the first statement after the commit paid 20-35 ms
//! for it. One test in its own process, so that no other test's allocations are counted.
//! (Only the commit was seen to leave its blocks unmerged: an abort or a drop frees the
//! write set whole, and a large block among them makes glibc merge the rest at once. Their
//! checks hold either way, and would catch an end that stopped freeing.)

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn a_large_transaction_s_end_merges_what_it_freed() {
    use beechdb::{Config, Durability, Env};
    let dir = tempfile::tempdir().unwrap();
    let config = Config::new()
        .transactional(true)
        .durability(Durability::NoSync);
    let env = Env::open(dir.path(), config).unwrap();
    let db = env.create_db("d").unwrap();
    // Bytes in freed blocks the allocator has not merged yet.
    // SAFETY: mallinfo2 only reads the allocator's counters.
    let unmerged = || unsafe { libc::mallinfo2() }.fsmblks;
    let load = |from: u32| {
        let t = env.begin_txn().unwrap();
        for i in from..from + 100_000 {
            t.put(&db, format!("key{i:012}").as_bytes(), &[7u8; 32])
                .unwrap();
        }
        t
    };
    load(0).commit().unwrap();
    assert!(unmerged() < 1 << 20, "after a commit: {} bytes", unmerged());
    load(200_000).abort();
    assert!(unmerged() < 1 << 20, "after an abort: {} bytes", unmerged());
    drop(load(400_000));
    assert!(unmerged() < 1 << 20, "after a drop: {} bytes", unmerged());
    assert_eq!(db.len().unwrap(), 100_000);
    env.close().unwrap();
}
