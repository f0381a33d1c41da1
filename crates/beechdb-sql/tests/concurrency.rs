//! Many connections at once: transfers between accounts (overlapping rows) retried on
//! SQLITE_BUSY keep the bank's total; readers see a consistent total in every snapshot;
//! concurrent increments lose no update; writers of different rows never conflict.

use beechdb_sql::{Connection, Database, Error, Value};
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

const ACCOUNTS: i64 = 20;

fn setup() -> (Database, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path()).unwrap();
    let mut c = db.connect();
    c.execute_batch(
        "CREATE TABLE accounts(id INTEGER PRIMARY KEY, bal INTEGER NOT NULL);
         CREATE TABLE counter(id INTEGER PRIMARY KEY, n INTEGER);
         INSERT INTO counter VALUES(1, 0);",
    )
    .unwrap();
    for i in 0..ACCOUNTS {
        c.execute("INSERT INTO accounts VALUES(?, 1000)", &[Value::Integer(i)])
            .unwrap();
    }
    (db, dir)
}

/// Runs `body` in a transaction until it commits; returns the retries it took.
fn retry(c: &mut Connection, mut body: impl FnMut(&mut Connection) -> Result<(), Error>) -> u64 {
    let mut retries = 0;
    loop {
        let r = c
            .execute("BEGIN", &[])
            .and_then(|_| body(c))
            .and_then(|()| c.execute("COMMIT", &[]).map(drop));
        match r {
            Ok(()) => return retries,
            Err(e) if e.is_busy() => {
                assert_eq!(e.to_string(), "database is locked");
                retries += 1;
                if !c.is_autocommit() {
                    c.execute("ROLLBACK", &[]).unwrap();
                }
            }
            Err(e) => panic!("transfer failed: {e}"),
        }
    }
}

fn total(c: &mut Connection) -> i64 {
    match c.query("SELECT sum(bal) FROM accounts", &[]).unwrap().rows[0][0] {
        Value::Integer(i) => i,
        ref other => panic!("sum is {other:?}"),
    }
}

#[test]
fn transfers_keep_the_total_and_readers_see_consistent_snapshots() {
    let (db, _dir) = setup();
    let done = Arc::new(AtomicBool::new(false));
    let retries = Arc::new(AtomicU64::new(0));
    let reader = {
        let (db, done) = (db.clone(), done.clone());
        std::thread::spawn(move || {
            let mut c = db.connect();
            let mut reads = 0;
            while !done.load(Ordering::Acquire) {
                c.execute("BEGIN", &[]).unwrap();
                assert_eq!(
                    total(&mut c),
                    ACCOUNTS * 1000,
                    "a snapshot saw a partial transfer"
                );
                c.execute("COMMIT", &[]).unwrap();
                reads += 1;
            }
            reads
        })
    };
    let writers: Vec<_> = (0..4u64)
        .map(|w| {
            let (db, retries) = (db.clone(), retries.clone());
            std::thread::spawn(move || {
                let mut c = db.connect();
                let mut rng = rand::rngs::StdRng::seed_from_u64(w);
                for _ in 0..150 {
                    let a = rng.gen_range(0..ACCOUNTS);
                    let b = (a + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
                    let amount = rng.gen_range(1..50);
                    let r = retry(&mut c, |c| {
                        let bal = c.query("SELECT bal FROM accounts WHERE id = ?", &[a.into()])?;
                        assert_eq!(bal.rows.len(), 1);
                        c.execute(
                            "UPDATE accounts SET bal = bal - ? WHERE id = ?",
                            &[amount.into(), a.into()],
                        )?;
                        c.execute(
                            "UPDATE accounts SET bal = bal + ? WHERE id = ?",
                            &[amount.into(), b.into()],
                        )?;
                        Ok(())
                    });
                    retries.fetch_add(r, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Release);
    assert!(reader.join().unwrap() > 0);
    let mut c = db.connect();
    assert_eq!(total(&mut c), ACCOUNTS * 1000);
    println!("retries: {}", retries.load(Ordering::Relaxed));
}

#[test]
fn concurrent_increments_lose_no_update() {
    let (db, _dir) = setup();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut c = db.connect();
                for _ in 0..100 {
                    // Autocommit statements retry themselves on conflicts.
                    c.execute("UPDATE counter SET n = n + 1 WHERE id = 1", &[])
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut c = db.connect();
    let n = c.query("SELECT n FROM counter", &[]).unwrap().rows[0][0].clone();
    assert_eq!(n, Value::Integer(400));
}

/// Four writers, each running `txns` transactions of one statement (`sql` with the
/// parameter `param(writer, i)`); returns how many met SQLITE_BUSY.
fn conflicts(db: &Database, txns: i64, sql: &'static str, param: fn(i64, i64) -> i64) -> u64 {
    let busy = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..4i64)
        .map(|w| {
            let (db, busy) = (db.clone(), busy.clone());
            std::thread::spawn(move || {
                let mut c = db.connect();
                for i in 0..txns {
                    c.execute("BEGIN", &[]).unwrap();
                    match c.execute(sql, &[param(w, i).into()]) {
                        Ok(_) => c.execute("COMMIT", &[]).map(drop).unwrap(),
                        Err(e) if e.is_busy() => {
                            busy.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    busy.load(Ordering::Relaxed)
}

#[test]
fn writers_of_different_rows_never_conflict() {
    let (db, _dir) = setup();
    let sql = "UPDATE accounts SET bal = bal + 1 WHERE id = ?";
    assert_eq!(conflicts(&db, 100, sql, |w, i| w * 5 + i % 5), 0);
    let mut c = db.connect();
    assert_eq!(total(&mut c), ACCOUNTS * 1000 + 400);
}

#[test]
fn a_conflict_is_sqlite_busy_and_the_transaction_can_only_roll_back() {
    let (db, _dir) = setup();
    let (mut a, mut b) = (db.connect(), db.connect());
    a.execute("BEGIN", &[]).unwrap();
    b.execute("BEGIN", &[]).unwrap();
    a.execute("UPDATE accounts SET bal = 1 WHERE id = 3", &[])
        .unwrap();
    b.query("SELECT * FROM accounts", &[]).unwrap();
    a.execute("COMMIT", &[]).unwrap();
    let e = b
        .execute("UPDATE accounts SET bal = 2 WHERE id = 3", &[])
        .unwrap_err();
    assert_eq!(e.code(), beechdb_sql::codes::SQLITE_BUSY_SNAPSHOT);
    assert!(b.is_autocommit(), "the transaction was rolled back");
    assert_eq!(
        b.query("SELECT bal FROM accounts WHERE id = 3", &[])
            .unwrap()
            .rows[0][0],
        Value::Integer(1)
    );
}

#[test]
fn inserters_into_one_table_take_different_rowids() {
    let (db, _dir) = setup();
    db.connect()
        .execute("CREATE TABLE log(id INTEGER PRIMARY KEY, who INTEGER)", &[])
        .unwrap();
    let sql = "INSERT INTO log(who) VALUES(?)";
    assert_eq!(conflicts(&db, 200, sql, |w, _| w), 0, "inserts conflicted");
    let mut c = db.connect();
    let r = c
        .query("SELECT count(*), count(DISTINCT id) FROM log", &[])
        .unwrap();
    assert_eq!(r.rows[0], vec![Value::Integer(800), Value::Integer(800)]);
}
