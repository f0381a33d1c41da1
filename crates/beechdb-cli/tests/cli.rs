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
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
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

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
