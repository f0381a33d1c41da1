//! Released log segments reused as the next ones (recycled): their files keep an earlier
//! segment's records behind the new ones, and recovery must neither replay those nor take
//! them for damage. The power cut at the riskiest moment (a recycled segment installed, the
//! segment before it not yet durable to its end), and recycling on real files, through
//! checkpoints, reopen and the log listing.

use beechdb::storage::{HookStorage, MemStorage};
use beechdb::{Config, Durability, Env};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

fn config() -> Config {
    Config::new()
        .page_size(4096)
        .transactional(true)
        .log_segment_size(64 << 10)
        .checkpoint_log_bytes(128 << 10)
        .durability(Durability::Sync)
}

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

fn value(i: u64) -> Vec<u8> {
    vec![i as u8; 700]
}

fn names(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// What the hook saw: a spare given its header without being zero-filled first is a
/// recycled one; the image is taken just before the next write after its installation
/// (mostly the flush that ends the segment before it, at times a checkpoint's page).
#[derive(Default)]
struct Watch {
    filled: AtomicBool,
    installed_recycled: AtomicBool,
    acked: AtomicU64,
    image: Mutex<Option<(MemStorage, u64)>>,
}

#[test]
fn a_power_cut_after_a_recycled_segment_is_installed_loses_no_sync_commit() {
    let mut kept_at_crash = 0;
    for seed in 0..12u64 {
        let inner = MemStorage::new();
        let watch = Arc::new(Watch::default());
        let (w, mem) = (watch.clone(), inner.clone());
        let hook: beechdb::storage::Hook = Arc::new(move |name: &str, offset, len| {
            if name == "log.spare" && offset == 0 && len > 64 {
                w.filled.store(true, SeqCst);
            } else if name == "log.spare" && offset == 0 && len == 64 {
                let recycled = !w.filled.swap(false, SeqCst);
                w.installed_recycled.store(recycled, SeqCst);
            } else if w.installed_recycled.swap(false, SeqCst) {
                let mut image = w.image.lock().unwrap();
                if image.is_none() {
                    // The count first: this hook may run on a background thread (a
                    // checkpoint's page), and a commit acknowledged between the image and
                    // the count would be counted without being in the image.
                    let acked = w.acked.load(SeqCst);
                    *image = Some((mem.crash_image(seed), acked));
                }
            }
            Ok(())
        });
        let storage = HookStorage { inner, hook };
        let env = Env::open_with_storage(Arc::new(storage), config()).unwrap();
        let db = env.create_db("d").unwrap();
        let mut i = 0;
        while watch.image.lock().unwrap().is_none() {
            assert!(i < 20_000, "seed {seed}: no recycled segment was installed");
            db.put(&key(i), &value(i)).unwrap();
            i += 1;
            watch.acked.store(i, SeqCst);
        }
        drop(db);
        drop(env);
        let (image, acked) = watch.image.lock().unwrap().take().unwrap();
        let kept_in = |s: &MemStorage| -> Vec<String> {
            let names = beechdb::storage::Storage::list(s).unwrap();
            names
                .into_iter()
                .filter(|n| n.starts_with("log.reuse."))
                .collect()
        };
        let left = kept_in(&image);
        kept_at_crash += left.len();
        let env = Env::open_with_storage(Arc::new(image.clone()), config().create(false))
            .unwrap_or_else(|e| panic!("seed {seed}: recovery failed after {acked} commits: {e}"));
        let db = env.open_db("d").unwrap();
        for k in 0..acked {
            assert_eq!(
                db.get(&key(k)).unwrap(),
                Some(value(k)),
                "seed {seed}: SYNC commit {k} of {acked} lost"
            );
        }
        assert!(env.verify().unwrap().is_clean(), "seed {seed}");
        // Files kept for reuse that the crash left are not part of the log: the open
        // removed them (those there now were kept since, from segments it released).
        let now = kept_in(&image);
        assert!(
            !left.iter().any(|n| now.contains(n)),
            "seed {seed}: {left:?} {now:?}"
        );
    }
    assert!(
        kept_at_crash > 0,
        "no crash image held a file kept for reuse"
    );
}

#[test]
fn segments_are_recycled_on_disk_and_the_log_reads_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config().durability(Durability::WriteNoSync);
    let env = Env::open(dir.path(), cfg.clone()).unwrap();
    let db = env.create_db("d").unwrap();
    let n = 4_000u64;
    for i in 0..n {
        db.put(&key(i), &value(i)).unwrap();
        if i % 200 == 0 {
            // Time for the background thread, as commits on other threads would give it.
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
    let log = env.stat().unwrap().txn.unwrap().log.unwrap();
    assert!(log.segments_recycled >= 3, "{log:?}");
    // At most a checkpoint interval's files are kept for reuse (three here).
    let kept = names(dir.path())
        .iter()
        .filter(|n| n.starts_with("log.reuse."))
        .count();
    assert!(kept <= 3, "{kept} files kept for reuse");
    // The listing reads the live segments, recycled ones among them, in LSN order, and
    // no more records than were appended.
    let mut listing = Vec::new();
    let storage = beechdb::storage::OsStorage::new(dir.path()).unwrap();
    let records = beechdb::print_log(&storage, &mut listing).unwrap();
    let lsns: Vec<u64> = String::from_utf8(listing)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').next().unwrap().parse().unwrap())
        .collect();
    assert!(
        records > 0 && records <= log.records + 64,
        "{records} records"
    );
    assert!(lsns.windows(2).all(|w| w[0] < w[1]));
    drop(db);
    env.close().unwrap();
    let names = names(dir.path());
    assert!(
        !names.iter().any(|n| n.starts_with("log.reuse.")),
        "close leaves the files kept for reuse: {names:?}"
    );
    for _ in 0..2 {
        let env = Env::open(dir.path(), cfg.clone()).unwrap();
        let db = env.open_db("d").unwrap();
        for i in (0..n).step_by(13).chain([n - 1]) {
            assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)));
        }
        db.put(&key(n), &value(n)).unwrap();
        drop(db);
        env.close().unwrap();
    }
}

/// A kept file that cannot become the spare (a directory named `log.spare` is in the way,
/// so neither reuse nor zero-filling can make it) is given up and removed: flushes create
/// their segments themselves, no commit fails, and kept files do not pile up.
#[test]
fn a_kept_file_that_cannot_be_reused_is_given_up_and_commits_go_on() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("log.spare")).unwrap();
    let cfg = config().durability(Durability::WriteNoSync);
    let env = Env::open(dir.path(), cfg.clone()).unwrap();
    let db = env.create_db("d").unwrap();
    let n = 3_000u64;
    for i in 0..n {
        db.put(&key(i), &value(i)).unwrap();
        if i % 200 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
    let log = env.stat().unwrap().txn.unwrap().log.unwrap();
    assert!(log.segments_recycled >= 3, "{log:?}");
    assert_eq!(log.segments_prepared, 0, "{log:?}");
    let kept = names(dir.path())
        .iter()
        .filter(|n| n.starts_with("log.reuse."))
        .count();
    assert!(kept <= 3, "{kept} files kept for reuse");
    drop(db);
    env.close().unwrap();
    let env = Env::open(dir.path(), cfg).unwrap();
    let db = env.open_db("d").unwrap();
    assert_eq!(db.get(&key(n - 1)).unwrap(), Some(value(n - 1)));
}
