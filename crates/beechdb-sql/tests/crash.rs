//! Crash test: TPC-B-like transactions (SYNC commits) in a child process killed at random
//! moments, again and again on the same database: after each kill every acknowledged
//! commit is there, the branch, teller and account totals agree with the history, and the
//! integrity check is clean. `BEECH_SQL_KILLS` sets the number of kills (default 50).

use beechdb_sql::{Database, Value};
use rand::{Rng, SeedableRng};
use std::io::Write;
use std::time::Duration;

const DIR: &str = "BEECH_SQL_CRASH_DIR";
const ACKS: &str = "BEECH_SQL_CRASH_ACKS";

/// The child: runs transactions until killed, appending each acknowledged history id to
/// the acknowledgement file (one `write` per line).
#[test]
#[ignore = "run by the test below as a child process"]
fn child_tpcb() {
    let (Ok(dir), Ok(acks)) = (std::env::var(DIR), std::env::var(ACKS)) else {
        return;
    };
    let db = Database::open(&dir).unwrap();
    let mut c = db.connect();
    c.execute_batch(
        "CREATE TABLE IF NOT EXISTS branches(id INTEGER PRIMARY KEY, bal INTEGER);
         CREATE TABLE IF NOT EXISTS tellers(id INTEGER PRIMARY KEY, branch INTEGER, bal INTEGER);
         CREATE TABLE IF NOT EXISTS accounts(id INTEGER PRIMARY KEY, branch INTEGER, bal INTEGER);
         CREATE TABLE IF NOT EXISTS history(id INTEGER PRIMARY KEY, account INTEGER, teller INTEGER, delta INTEGER);",
    )
    .unwrap();
    if c.query("SELECT count(*) FROM branches", &[]).unwrap().rows[0][0] == Value::Integer(0) {
        c.execute("BEGIN", &[]).unwrap();
        for b in 0..2 {
            c.execute("INSERT INTO branches VALUES(?, 0)", &[b.into()])
                .unwrap();
        }
        for t in 0..6i64 {
            c.execute(
                "INSERT INTO tellers VALUES(?, ?, 0)",
                &[t.into(), (t % 2).into()],
            )
            .unwrap();
        }
        for a in 0..40i64 {
            c.execute(
                "INSERT INTO accounts VALUES(?, ?, 0)",
                &[a.into(), (a % 2).into()],
            )
            .unwrap();
        }
        c.execute("COMMIT", &[]).unwrap();
    }
    let mut acks = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(acks)
        .unwrap();
    let mut rng = rand::rngs::StdRng::from_entropy();
    loop {
        let (a, t, d): (i64, i64, i64) = (
            rng.gen_range(0..40),
            rng.gen_range(0..6),
            rng.gen_range(-99..100),
        );
        c.execute("BEGIN", &[]).unwrap();
        c.execute(
            "UPDATE accounts SET bal = bal + ? WHERE id = ?",
            &[d.into(), a.into()],
        )
        .unwrap();
        c.execute(
            "UPDATE tellers SET bal = bal + ? WHERE id = ?",
            &[d.into(), t.into()],
        )
        .unwrap();
        c.execute(
            "UPDATE branches SET bal = bal + ? WHERE id = ?",
            &[d.into(), (a % 2).into()],
        )
        .unwrap();
        c.execute(
            "INSERT INTO history(account, teller, delta) VALUES(?, ?, ?)",
            &[a.into(), t.into(), d.into()],
        )
        .unwrap();
        let id = c.last_insert_rowid();
        c.execute("COMMIT", &[]).unwrap();
        let line = format!("{id}\n");
        assert_eq!(acks.write(line.as_bytes()).unwrap(), line.len());
    }
}

fn one(c: &mut beechdb_sql::Connection, sql: &str) -> Value {
    c.query(sql, &[]).unwrap().rows[0][0].clone()
}

#[test]
fn kills_lose_no_acknowledged_commit() {
    let kills: u64 = std::env::var("BEECH_SQL_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    let dir = tempfile::tempdir().unwrap();
    let envdir = dir.path().join("db");
    let acks = dir.path().join("acks");
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let mut checked = 0;
    for k in 0..kills {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "child_tpcb",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(DIR, &envdir)
            .env(ACKS, &acks)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.gen_range(20..250)));
        let _ = child.kill();
        child.wait().unwrap();
        let text = std::fs::read_to_string(&acks).unwrap_or_default();
        let whole = text.rfind('\n').map_or("", |e| &text[..e]);
        let acked: Vec<i64> = whole.lines().map(|l| l.parse().unwrap()).collect();
        let db = match Database::open(&envdir) {
            Ok(db) => db,
            Err(e) => panic!("kill {k}: reopening failed: {e}"),
        };
        let mut c = db.connect();
        let tables = one(
            &mut c,
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table'",
        );
        if tables != Value::Integer(4) {
            assert!(acked.is_empty(), "kill {k}: tables lost after commits");
            continue;
        }
        let history = one(&mut c, "SELECT coalesce(sum(delta), 0) FROM history");
        for t in ["branches", "tellers", "accounts"] {
            let s = one(&mut c, &format!("SELECT coalesce(sum(bal), 0) FROM {t}"));
            assert_eq!(s, history, "kill {k}: {t} total disagrees with the history");
        }
        let count = one(&mut c, "SELECT count(*) FROM history").as_i64();
        assert!(
            count >= acked.len() as i64,
            "kill {k}: {count} rows, {} acknowledged",
            acked.len()
        );
        for id in acked.iter().rev().take(20) {
            let there = one(
                &mut c,
                &format!("SELECT count(*) FROM history WHERE id = {id}"),
            );
            assert_eq!(
                there,
                Value::Integer(1),
                "kill {k}: acknowledged commit {id} lost"
            );
        }
        let ok = one(&mut c, "PRAGMA integrity_check");
        assert_eq!(ok, Value::from("ok"), "kill {k}");
        checked += 1;
    }
    assert!(
        checked * 2 > kills,
        "only {checked} of {kills} kills found work to check"
    );
    let acked = std::fs::read_to_string(&acks)
        .unwrap_or_default()
        .lines()
        .count();
    println!("{kills} kills, {acked} acknowledged commits, all present");
    assert!(
        acked as u64 > kills,
        "the children acknowledged only {acked} commits"
    );
}
