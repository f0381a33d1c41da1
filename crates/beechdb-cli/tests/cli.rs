//! The `beech` command end to end: load, dump (round trip), stat, verify, and errors.

use std::io::Write;
use std::process::{Command, Stdio};

fn beech(args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_beech"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(input) = stdin {
        // A command that fails early stops reading: a broken pipe here is no failure.
        let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn load_dump_stat_verify_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    // What db5.3_dump prints for a plain btree file (no database= line).
    let mut dump =
        String::from("VERSION=3\nformat=bytevalue\ntype=btree\ndb_pagesize=4096\nHEADER=END\n");
    for i in 0..500u32 {
        dump.push_str(&format!(
            " {}\n {}\n",
            hex(&i.to_be_bytes()),
            hex(format!("value {i}").as_bytes())
        ));
    }
    dump.push_str("DATA=END\n");
    let (code, _, err) = beech(&["load", d, "imported"], Some(&dump));
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = beech(&["dump", d, "imported"], None);
    assert_eq!(code, 0);
    assert!(out.contains("database=imported"));
    let body = |s: &str| s.split("HEADER=END\n").nth(1).unwrap().to_string();
    assert_eq!(
        body(&out),
        body(&dump),
        "dump must reproduce the loaded data exactly"
    );
    let (code, out, _) = beech(&["stat", d], None);
    assert_eq!(code, 0);
    assert!(
        out.contains("500\tEntries") && out.contains("Tree depth") && out.contains("Cache hits"),
        "{out}"
    );
    let (code, out, _) = beech(&["stat", d, "--json"], None);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["databases"][0]["entries"], 500);
    let (code, out, _) = beech(&["verify", d, "--json"], None);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["entries"], 500);
    assert_eq!(v["problems"].as_array().unwrap().len(), 0);
}

#[test]
fn verify_reports_damage_and_errors_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let dump =
        "VERSION=3\nformat=print\ntype=btree\ndatabase=x\nHEADER=END\n hello\n world\nDATA=END\n";
    assert_eq!(beech(&["load", d], Some(dump)).0, 0);
    let path = dir.path().join("beech.db");
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 100;
    bytes[last] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let (code, out, _) = beech(&["verify", d], None);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("checksum mismatch") && out.contains("PROBLEMS FOUND"),
        "{out}"
    );
    let (code, _, err) = beech(
        &["dump", dir.path().join("missing").to_str().unwrap()],
        None,
    );
    assert_eq!(code, 2);
    assert!(err.contains("no environment"), "{err}");
    let (code, _, err) = beech(&["stat", d], None);
    assert_eq!(code, 2);
    assert!(
        err.contains("corrupt data in page"),
        "opening damaged data is refused: {err}"
    );
    let fresh = tempfile::tempdir().unwrap();
    let f = fresh.path().to_str().unwrap();
    let (code, _, err) = beech(&["load", f, "y"], Some("VERSION=3\nHEADER=END\n zz\n"));
    assert_eq!(code, 2);
    assert!(err.contains("line 3"), "{err}");
}

#[test]
fn recover_checkpoint_archive() {
    let live = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    {
        // Commits that only the log holds when the process "crashes" (no close).
        let cfg = beechdb::Config::new()
            .transactional(true)
            .keep_logs(true)
            .log_segment_size(64 << 10);
        let env = beechdb::Env::open(live.path(), cfg).unwrap();
        let db = env.create_db("t").unwrap();
        for i in 0..3000u32 {
            db.put(&i.to_be_bytes(), &[1u8; 100]).unwrap();
        }
        env.sync().unwrap(); // checkpoint: earlier segments become archivable
        for i in 0..50u32 {
            db.put(&(10_000 + i).to_be_bytes(), b"after the checkpoint")
                .unwrap();
        }
        // The process dies here: what it leaves on disk is copied while it still holds the
        // environment's lock.
        for entry in std::fs::read_dir(live.path()).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
        }
        std::mem::forget(db);
        std::mem::forget(env);
    }
    let (code, out, err) = beech(&["recover", d], None);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("replayed 50 commits"), "{out}");
    let (code, out, _) = beech(&["archive", d], None);
    assert_eq!(code, 0);
    assert!(
        out.lines().count() >= 2 && out.lines().all(|l| l.starts_with("log.")),
        "{out}"
    );
    let (code, out, _) = beech(&["archive", d, "--remove"], None);
    assert_eq!(code, 0);
    for name in out.lines() {
        assert!(!dir.path().join(name).exists());
    }
    let (code, _, _) = beech(&["checkpoint", d], None);
    assert_eq!(code, 0);
    let (code, out, _) = beech(&["stat", d], None);
    assert_eq!(code, 0);
    assert!(out.contains("3050\tEntries"), "{out}");
    assert_eq!(beech(&["verify", d], None).0, 0);
}

/// Each file of `dir` with its size and a hash of its bytes.
fn files(dir: &std::path::Path) -> Vec<(String, usize, u64)> {
    use std::hash::{Hash, Hasher};
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let b = std::fs::read(e.path()).unwrap_or_default();
            let mut h = std::collections::hash_map::DefaultHasher::new();
            b.hash(&mut h);
            (
                e.file_name().to_string_lossy().into_owned(),
                b.len(),
                h.finish(),
            )
        })
        .collect();
    v.sort();
    v
}

/// A transactional environment in `dir` as a killed process leaves it: `n` commits over
/// 64 KiB log segments, the last one SYNC, none checkpointed.
fn killed_transactional(dir: &std::path::Path, n: u32) {
    let live = tempfile::tempdir().unwrap();
    let cfg = beechdb::Config::new()
        .transactional(true)
        .log_segment_size(64 << 10)
        .durability(beechdb::Durability::NoSync);
    let env = beechdb::Env::open(live.path(), cfg).unwrap();
    let db = env.create_db("t").unwrap();
    for i in 0..n {
        let t = env.begin_txn().unwrap();
        t.put(&db, &i.to_be_bytes(), b"v").unwrap();
        let d = if i + 1 == n {
            beechdb::Durability::Sync
        } else {
            beechdb::Durability::NoSync
        };
        t.commit_with(d).unwrap();
    }
    // Copied while the "dead" process still holds the lock.
    for entry in std::fs::read_dir(live.path()).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    std::mem::forget(db);
    std::mem::forget(env);
}

#[test]
fn recover_leaves_a_log_damaged_in_the_middle_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    killed_transactional(dir.path(), 20_001);
    let middle = dir.path().join("log.0000000004");
    let mut bytes = std::fs::read(&middle).unwrap();
    bytes[9000..9004].copy_from_slice(b"XXXX");
    std::fs::write(&middle, bytes).unwrap();
    let before = files(dir.path());
    let (code, out, err) = beech(&["recover", dir.path().to_str().unwrap()], None);
    assert_eq!(code, 2, "{out}");
    assert!(
        err.contains("log damaged") && err.contains("log.0000000004"),
        "{err}"
    );
    let mut after = files(dir.path());
    after.retain(|f| f.0 != "beech.lock");
    let mut before = before;
    before.retain(|f| f.0 != "beech.lock");
    assert_eq!(after, before, "recovery changed files");
}

#[test]
fn a_damaged_meta_page_is_loud_and_not_made_permanent() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let mut dump = String::from("VERSION=3\nformat=print\ntype=btree\nHEADER=END\n");
    for i in 0..2000 {
        dump.push_str(&format!(" key{i:05}\n value\n"));
    }
    dump.push_str("DATA=END\n");
    assert_eq!(beech(&["load", d, "x"], Some(&dump)).0, 0);
    // The newest meta page: each checkpoint writes the slot its generation names.
    let path = dir.path().join("beech.db");
    let mut bytes = std::fs::read(&path).unwrap();
    let (gen0, gen1) = (
        u64::from_le_bytes(bytes[24..32].try_into().unwrap()),
        u64::from_le_bytes(bytes[16384 + 24..16384 + 32].try_into().unwrap()),
    );
    let newest = if gen0 > gen1 { 0 } else { 16384 };
    bytes[newest..newest + 16384].fill(0);
    std::fs::write(&path, &bytes).unwrap();
    let before = files(dir.path());
    for cmd in [
        &["dump", d][..],
        &["stat", d],
        &["recover", d],
        &["checkpoint", d],
    ] {
        let (code, out, err) = beech(cmd, None);
        assert_eq!(code, 2, "{cmd:?}: {out}");
        assert!(err.contains("--accept-fallback"), "{cmd:?}: {err}");
        assert!(out.is_empty(), "{cmd:?} printed data: {out}");
    }
    assert_eq!(files(dir.path()), before, "a refusal changed files");
    // Accepted: loud on standard error, and stat says so in its exit status.
    let (code, out, err) = beech(&["--accept-fallback", "stat", d], None);
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains("WARNING") && err.contains("meta page"),
        "{err}"
    );
    let (code, _, err) = beech(&["dump", "--accept-fallback", d], None);
    assert_eq!(code, 0);
    assert!(err.contains("WARNING"), "{err}");
}

#[test]
fn inspecting_tools_create_and_convert_nothing() {
    // A Data Store environment: recover and archive have no log to work on.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let dump = "VERSION=3\nformat=print\ntype=btree\nHEADER=END\n a\n b\nDATA=END\n";
    assert_eq!(beech(&["load", d, "x"], Some(dump)).0, 0);
    for cmd in ["recover", "archive"] {
        let (code, _, err) = beech(&[cmd, d], None);
        assert_eq!(code, 2);
        assert!(err.contains("Data Store"), "{cmd}: {err}");
    }
    assert_eq!(beech(&["checkpoint", d], None).0, 0);
    assert_eq!(beech(&["stat", d], None).0, 0);
    assert!(
        files(dir.path()).iter().all(|f| !f.0.starts_with("log.")),
        "{:?}",
        files(dir.path())
    );
    // A missing directory, and an empty one: nothing is created in either.
    let parent = tempfile::tempdir().unwrap();
    let missing = parent.path().join("missing");
    let empty = parent.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    for target in [&missing, &empty] {
        for cmd in ["stat", "verify", "dump", "recover", "archive", "checkpoint"] {
            let (code, _, err) = beech(&[cmd, target.to_str().unwrap()], None);
            assert_eq!(code, 2, "{cmd}");
            assert!(err.contains("no environment"), "{cmd}: {err}");
        }
    }
    assert!(!missing.exists());
    assert!(files(&empty).is_empty(), "{:?}", files(&empty));
    // A Berkeley DB environment's directory: a clear error, nothing created.
    let bdb = tempfile::tempdir().unwrap();
    std::fs::write(bdb.path().join("log.0000000001"), b"Berkeley DB log").unwrap();
    std::fs::write(bdb.path().join("__db.001"), b"region").unwrap();
    std::fs::write(bdb.path().join("data.db"), b"btree").unwrap();
    let before = files(bdb.path());
    let b = bdb.path().to_str().unwrap();
    for cmd in [
        &["stat", b][..],
        &["verify", b],
        &["dump", b],
        &["recover", b],
        &["load", b, "x"],
    ] {
        let (code, _, err) = beech(cmd, Some(dump));
        assert_eq!(code, 2, "{cmd:?}");
        assert!(err.contains("Berkeley DB"), "{cmd:?}: {err}");
    }
    assert_eq!(files(bdb.path()), before);
}

#[test]
fn backup_makes_an_environment_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    killed_transactional(dir.path(), 500);
    let dest = dir.path().join("copy");
    let (code, out, err) = beech(
        &[
            "backup",
            dir.path().to_str().unwrap(),
            dest.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("copied"), "{out}");
    let (code, out, _) = beech(&["stat", dest.to_str().unwrap()], None);
    assert_eq!(code, 0);
    assert!(out.contains("500\tEntries"), "{out}");
    assert_eq!(beech(&["verify", dest.to_str().unwrap()], None).0, 0);
}

#[test]
fn printlog_lists_every_record() {
    let dir = tempfile::tempdir().unwrap();
    killed_transactional(dir.path(), 3000);
    let (code, out, err) = beech(&["printlog", dir.path().to_str().unwrap()], None);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    // The database's creation, then one commit per transaction.
    assert!(
        lines[0].contains("create-db") && lines[0].contains("name=\"t\""),
        "{}",
        lines[0]
    );
    let commits = lines.iter().filter(|l| l.contains("\tcommit ")).count();
    assert_eq!(commits, 3001, "{}", lines[..3].join("\n"));
    assert!(
        lines[1].contains("commit") && lines[1].contains("ops=0"),
        "{}",
        lines[1]
    );
    assert!(lines[2].contains("ops=1 ops | put"), "{}", lines[2]);
    let lsns: Vec<u64> = lines
        .iter()
        .map(|l| l.split('\t').next().unwrap().parse().unwrap())
        .collect();
    assert!(lsns.windows(2).all(|w| w[0] < w[1]));
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn sql_shell_one_shot_and_batch() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db = db.to_str().unwrap();
    let (code, out, err) = beech(
        &[
            "sql",
            db,
            "CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);\nINSERT INTO t(b) VALUES ('x'), ('y, z');\n.mode csv\n.headers on\nSELECT a, b FROM t;",
        ],
        None,
    );
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(out, "a,b\n1,x\n2,\"y, z\"\n");
    // A new database is a file, as sqlite3 makes one.
    assert!(std::path::Path::new(db).is_file());
    // Standard input: multi-line statements, dot commands, and an error ends it with 1.
    let script =
        "SELECT count(*)\n  FROM t;\n.tables\n.dump\nSELECT nope FROM t;\nSELECT 'not reached';\n";
    let (code, out, err) = beech(&["sql", db], Some(script));
    assert_eq!(code, 1);
    assert!(
        out.starts_with("2\nt\nPRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;\n"),
        "{out}"
    );
    assert!(
        out.contains("INSERT INTO \"t\" VALUES(2,'y, z');\nCOMMIT;\n"),
        "{out}"
    );
    assert!(!out.contains("not reached"));
    assert_eq!(err, "Error: no such column: nope\n");
    // .import creates the table from the CSV header.
    let csv = dir.path().join("in.csv");
    std::fs::write(&csv, "name,qty\napple,3\n\"pear, green\",5\n").unwrap();
    let (code, out, _) = beech(
        &[
            "sql",
            db,
            &format!(
                ".import {} fruit\nSELECT sum(qty), max(name) FROM fruit;",
                csv.display()
            ),
        ],
        None,
    );
    assert_eq!((code, out.as_str()), (0, "8|pear, green\n"));
}

#[test]
fn a_closed_pipe_ends_output_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let env_path = dir.path().join("env");
    {
        // Enough records that every command's output outgrows a pipe's buffer.
        let env = beechdb::Env::open(
            &env_path,
            beechdb::Config::new()
                .transactional(true)
                .durability(beechdb::Durability::NoSync),
        )
        .unwrap();
        for d in 0..300 {
            let db = env.create_db(&format!("db{d:03}")).unwrap();
            for i in 0..40u32 {
                db.put(&i.to_be_bytes(), b"value").unwrap();
            }
        }
        env.close().unwrap();
    }
    let env_s = env_path.to_str().unwrap();
    for cmd in ["stat --json", "stat", "printlog", "dump"] {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "{} {cmd} {env_s} | head -1",
                env!("CARGO_BIN_EXE_beech")
            ))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{cmd}: {err}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).lines().count(),
            1,
            "{cmd}"
        );
    }
}

#[test]
fn checkpoint_removes_the_log_it_no_longer_needs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    {
        let cfg = beechdb::Config::new()
            .transactional(true)
            .keep_logs(true)
            .log_segment_size(64 << 10);
        let env = beechdb::Env::open(dir.path(), cfg).unwrap();
        let db = env.create_db("t").unwrap();
        for i in 0..3000u32 {
            db.put(&i.to_be_bytes(), &[1u8; 100]).unwrap();
        }
        env.close().unwrap();
    }
    let segments = || {
        std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("log.")
            })
            .count()
    };
    let before = segments();
    assert!(before >= 3, "{before} segments");
    let (code, out, err) = beech(&["checkpoint", d], None);
    assert_eq!(code, 0, "{err}");
    assert!(
        segments() <= 2,
        "{} of {before} segments left: {out} {:?}",
        segments(),
        files(dir.path())
    );
    assert!(out.contains("removed"), "{out}");
    assert_eq!(beech(&["verify", d], None).0, 0);
}

#[test]
fn stat_dump_and_verify_read_beside_a_writer_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    // A writer process: the SQL shell, holding the environment open, its commits only in
    // the log (no checkpoint yet).
    let mut writer = Command::new(env!("CARGO_BIN_EXE_beech"))
        .args(["sql", d])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut sql = writer.stdin.take().unwrap();
    sql.write_all(
        b"CREATE TABLE t(x INTEGER PRIMARY KEY, y TEXT);\nINSERT INTO t(y) VALUES ('a'),('b'),('c');\n",
    )
    .unwrap();
    sql.flush().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let out = loop {
        let (code, out, err) = beech(&["stat", d], None);
        if code == 0 && out.contains("3\tEntries") {
            break out;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "stat never saw the writer's rows: {code} {out} {err}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(!out.contains("already open"), "{out}");
    let before = files(dir.path());
    let (code, out, err) = beech(&["verify", d], None);
    assert_eq!(code, 0, "{out} {err}");
    assert!(
        out.contains("commits after checkpoint") && out.contains("verify: OK"),
        "{out}"
    );
    let (code, out, err) = beech(&["dump", "-p", d], None);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("database=sqlite_schema") && out.contains(" \\00\\03\\01c\n"),
        "{out}"
    );
    let (code, _, err) = beech(&["stat", "--json", d], None);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        files(dir.path()),
        before,
        "inspecting tools wrote to the environment"
    );
    // A tool that writes still refuses, naming the reason.
    let (code, _, err) = beech(&["checkpoint", d], None);
    assert_eq!(code, 2);
    assert!(err.contains("already open"), "{err}");
    // While the writer commits row after row: every inspection succeeds, and what each dump
    // sees only grows.
    let feeder = std::thread::spawn(move || {
        for i in 0..3000 {
            if sql
                .write_all(format!("INSERT INTO t(y) VALUES ('row {i}');\n").as_bytes())
                .is_err()
            {
                break;
            }
        }
        sql
    });
    let mut seen = 0;
    for round in 0..12 {
        let (code, out, err) = beech(&["dump", "-p", d, "t1"], None);
        assert_eq!(code, 0, "round {round}: {err}");
        let rows = out.lines().filter(|l| l.starts_with(' ')).count() / 2;
        assert!(rows >= seen, "round {round}: {rows} rows after {seen}");
        seen = rows;
        let (code, out, err) = beech(&["verify", d], None);
        assert_eq!(code, 0, "round {round}: {out} {err}");
        assert_eq!(beech(&["stat", d], None).0, 0);
    }
    let sql = feeder.join().unwrap();
    drop(sql);
    assert!(writer.wait().unwrap().success());
    let (_, out, _) = beech(&["stat", d, "t1"], None);
    assert!(out.contains("3003\tEntries"), "{out}");
}

#[test]
fn salvage_recovers_every_readable_record_of_a_damaged_environment() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    {
        let env = beechdb::Env::open(dir.path(), beechdb::Config::new()).unwrap();
        let db = env.create_db("t").unwrap();
        for i in 0..20_000u32 {
            db.put(&i.to_be_bytes(), format!("value {i:>30}").as_bytes())
                .unwrap();
        }
        env.close().unwrap();
    }
    // One flipped byte in a leaf in the middle of the tree.
    let path = dir.path().join("beech.db");
    let mut bytes = std::fs::read(&path).unwrap();
    let ps = 16384;
    let leaves: Vec<usize> = (2..bytes.len() / ps)
        .filter(|&p| bytes[p * ps + 4] == 1)
        .collect();
    let victim = leaves[leaves.len() / 2];
    bytes[victim * ps + 9000] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let (code, _, err) = beech(&["dump", d], None);
    assert_eq!(code, 2);
    assert!(err.contains("--salvage"), "{err}");
    let (code, out, err) = beech(&["dump", "--salvage", d], None);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(&format!("\"page\":{victim}")), "{err}");
    let records = out.lines().filter(|l| l.starts_with(' ')).count() / 2;
    // Every record but those of the damaged leaf (a few hundred) comes back.
    assert!(
        records < 20_000 && records > 19_000,
        "{records} records salvaged: {err}"
    );
    // What was salvaged loads into a new environment and verifies clean.
    let fresh = tempfile::tempdir().unwrap();
    let f = fresh.path().join("env");
    let (code, _, err) = beech(&["load", f.to_str().unwrap()], Some(&out));
    assert_eq!(code, 0, "{err}");
    assert_eq!(beech(&["verify", f.to_str().unwrap()], None).0, 0);
}

#[test]
fn recover_shows_progress() {
    let dir = tempfile::tempdir().unwrap();
    killed_transactional(dir.path(), 5000);
    let out = Command::new(env!("CARGO_BIN_EXE_beech"))
        .args(["recover", dir.path().to_str().unwrap()])
        .env("BEECH_PROGRESS_INTERVAL_MS", "0")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("replayed 5001 commits"), "{stdout}");
    assert!(
        stderr.contains("beech: recover ") && stderr.contains(" MB of "),
        "{stderr}"
    );
}

#[test]
fn checkpoint_after_a_crash_removes_the_replayed_log() {
    let dir = tempfile::tempdir().unwrap();
    killed_transactional(dir.path(), 3000);
    let segments = || {
        std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                let name = name.to_string_lossy();
                name.starts_with("log.") && name[4..].bytes().all(|b| b.is_ascii_digit())
            })
            .count()
    };
    let before = segments();
    assert!(before >= 3, "{before} segments");
    let (code, out, err) = beech(&["checkpoint", dir.path().to_str().unwrap()], None);
    assert_eq!(code, 0, "{err}");
    assert!(
        segments() <= 2,
        "{} of {before} segments left: {out}",
        segments()
    );
}
