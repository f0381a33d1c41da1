//! Moving data between Berkeley DB and BeechDB with the real `db5.3_dump` / `db5.3_load` /
//! `db5.3_verify` (package db5.3-util, installed by `.ci/run`): dumps round-trip byte for
//! byte both ways. Also the promises of `beech load` that need no Berkeley DB: a load is all
//! or nothing (truncated input, a bad line, a kill), `-n` skips and reports, and messages
//! name the line and the key.
//!
//! Without the Berkeley DB tools the round-trip tests say so and pass, unless
//! `BEECH_REQUIRE_BDB_TOOLS` is set (as CI sets it), when they fail.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn run(cmd: &mut Command, stdin: Option<&[u8]>) -> (i32, Vec<u8>, String) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(input) = stdin {
        let _ = child.stdin.take().unwrap().write_all(input);
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn beech(args: &[&str], stdin: Option<&[u8]>) -> (i32, Vec<u8>, String) {
    run(Command::new(env!("CARGO_BIN_EXE_beech")).args(args), stdin)
}

/// Runs `beech` and expects success; returns standard output.
fn beech_ok(args: &[&str]) -> Vec<u8> {
    let (code, out, err) = beech(args, None);
    assert_eq!(code, 0, "beech {args:?}: {err}");
    out
}

/// The Berkeley DB utility `name` (e.g. "db5.3_dump"), if installed.
fn bdb_tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("BEECH_REQUIRE_BDB_TOOLS").is_none(),
            "{name} is not installed (apt-get install db5.3-util)"
        );
        eprintln!("{name} not installed: Berkeley DB round trips skipped");
    }
    found
}

fn bdb(tool: &Path, args: &[&str]) -> Vec<u8> {
    let (code, out, err) = run(Command::new(tool).args(args), None);
    assert_eq!(code, 0, "{} {args:?}: {err}", tool.display());
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A deterministic pseudo-random byte generator.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// A hex dump section named `name` holding `pairs`, with 16 KiB pages.
fn section(name: &str, pairs: &[(Vec<u8>, Vec<u8>)]) -> String {
    section_with(name, "", pairs)
}

/// [`section`] with header lines `flags` (such as "duplicates=1\n").
fn section_with(name: &str, flags: &str, pairs: &[(Vec<u8>, Vec<u8>)]) -> String {
    let mut s = format!(
        "VERSION=3\nformat=bytevalue\ndatabase={name}\ntype=btree\n{flags}db_pagesize=16384\nHEADER=END\n"
    );
    for (k, v) in pairs {
        s += &format!(" {}\n {}\n", hex(k), hex(v));
    }
    s + "DATA=END\n"
}

#[test]
fn berkeley_db_dumps_round_trip_byte_for_byte() {
    let (Some(dump), Some(load), Some(verify)) = (
        bdb_tool("db5.3_dump"),
        bdb_tool("db5.3_load"),
        bdb_tool("db5.3_verify"),
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let p = |n: &str| tmp.path().join(n).to_str().unwrap().to_string();
    let mut rng = Rng(7);
    let binary: Vec<_> = (0..400)
        .map(|i| {
            let klen = 1 + rng.next() as usize % 40;
            let vlen = if i % 7 == 0 {
                0
            } else {
                rng.next() as usize % 300
            };
            (rng.bytes(klen), rng.bytes(vlen))
        })
        .collect();
    let big_values: Vec<_> = (0..4u8).map(|i| (vec![i], rng.bytes(100_000))).collect();
    // 2,000-byte keys: longer than a quarter of a 4 KiB page.
    let long_keys: Vec<_> = (0..30u32)
        .map(|i| {
            let mut k = vec![b'k'; 2000];
            k[1990..1994].copy_from_slice(&i.to_be_bytes());
            (k, i.to_string().into_bytes())
        })
        .collect();
    // Several values per key: sorted (DB_DUPSORT, given sorted as db_dump writes them) and
    // in the order they were put (DB_DUP).
    let mut sorted_dups: Vec<_> = (0..300u32)
        .map(|i| {
            (
                (i % 7).to_be_bytes().to_vec(),
                rng.bytes(1 + (i as usize % 50)),
            )
        })
        .collect();
    sorted_dups.sort();
    sorted_dups.dedup();
    let unsorted_dups: Vec<_> = (0..300u32)
        .map(|i| (vec![b'k', (i % 5) as u8], rng.bytes(1 + (i as usize % 30))))
        .collect();
    let mut unsorted_dups = unsorted_dups;
    unsorted_dups.sort_by(|a, b| a.0.cmp(&b.0));
    // Keys of 100 KB sharing their first 99,990 bytes: only their ends tell them apart.
    let huge_keys: Vec<_> = (0..8u32)
        .map(|i| {
            let mut k = vec![b'h'; 100_000];
            k[99_990..99_994].copy_from_slice(&(7 - i).to_be_bytes());
            (k, rng.bytes(50))
        })
        .collect();
    let odd_name = vec![(b"key".to_vec(), b"value \\ with a backslash".to_vec())];
    // Several databases in one file, one with a name holding a newline, a backslash, a
    // space and a character that is not ASCII (escaped as db_dump escapes names).
    let source = section("binary", &binary)
        + &section("big values", &big_values)
        + &section("long keys", &long_keys)
        + &section("huge keys", &huge_keys)
        + &section_with("sorted dups", "duplicates=1\ndupsort=1\n", &sorted_dups)
        + &section_with("unsorted dups", "duplicates=1\n", &unsorted_dups)
        + &section("odd\\0aname\\\\ \\c3\\a9", &odd_name);
    std::fs::write(p("d0"), &source).unwrap();
    bdb(&load, &["-f", &p("d0"), &p("src.db")]);
    for printable in [false, true] {
        let flag: &[&str] = if printable { &["-p"] } else { &[] };
        let d1 = bdb(&dump, &[flag, &[&p("src.db")]].concat());
        let env = p(if printable { "env-p" } else { "env-x" });
        std::fs::write(p("d1"), &d1).unwrap();
        beech_ok(&["load", &env, "-f", &p("d1")]);
        let d2 = beech_ok(&[&["dump", &env][..], flag].concat());
        assert!(
            d2 == d1,
            "beech dump differs from db5.3_dump (printable: {printable})"
        );
        // And back: Berkeley DB loads BeechDB's dump into a file that dumps the same again.
        let back = p(if printable { "back-p.db" } else { "back-x.db" });
        std::fs::write(p("d2"), &d2).unwrap();
        bdb(&load, &["-f", &p("d2"), &back]);
        bdb(&verify, &[&back]);
        assert!(bdb(&dump, &[flag, &[&back]].concat()) == d1);
        beech_ok(&["verify", &env]);
    }

    // A file holding one database, with 4 KiB pages, dumped printable: `--plain` leaves out
    // the database= line as db_dump does; printable input may hold raw bytes that are
    // not ASCII, which both loaders take as they are.
    let mut plain =
        String::from("VERSION=3\nformat=print\ntype=btree\ndb_pagesize=4096\nHEADER=END\n");
    for i in 0..300 {
        plain += &format!(" caf\u{e9} {i:04}\\\\\\01\n v\u{e9}{i}\n");
    }
    // A key longer than a quarter of the 4 KiB page, which once capped keys at 1 KiB.
    plain += &format!(" {}\n long key\n", "z".repeat(3000));
    plain += " empty\n \nDATA=END\n";
    std::fs::write(p("plain.dump"), &plain).unwrap();
    bdb(&load, &["-f", &p("plain.dump"), &p("plain.db")]);
    let d1 = bdb(&dump, &["-p", &p("plain.db")]);
    let (code, _, err) = beech(
        &[
            "load",
            &p("env-plain"),
            "t",
            "--page-size",
            "4096",
            "-f",
            &p("plain.dump"),
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let d2 = beech_ok(&["dump", "-p", "--plain", &p("env-plain"), "t"]);
    assert!(
        d2 == d1,
        "{}\n---\n{}",
        String::from_utf8_lossy(&d1),
        String::from_utf8_lossy(&d2)
    );
}

#[test]
fn hash_and_recno_dumps_load_into_btrees() {
    let (Some(dump), Some(load)) = (bdb_tool("db5.3_dump"), bdb_tool("db5.3_load")) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let p = |n: &str| tmp.path().join(n).to_str().unwrap().to_string();
    let mut hash = String::from("VERSION=3\nformat=print\ntype=hash\nHEADER=END\n");
    let mut recno = String::from("VERSION=3\nformat=print\ntype=recno\nHEADER=END\n");
    for i in 0..200 {
        hash += &format!(" key{i}\n value{i}\n");
        recno += &format!(" record {i}\n");
    }
    hash += "DATA=END\n";
    recno += "DATA=END\n";
    for (name, text) in [("hash", &hash), ("recno", &recno)] {
        std::fs::write(p(name), text).unwrap();
        bdb(&load, &["-f", &p(name), &p(&format!("{name}.db"))]);
        let d1 = bdb(&dump, &["-p", &p(&format!("{name}.db"))]);
        let (code, _, err) = beech(&["load", &p("env"), name], Some(&d1));
        assert_eq!(code, 0, "{err}");
        assert!(err.contains(&format!("a {name} database")), "{err}");
    }
    let out = String::from_utf8(beech_ok(&["dump", "-p", &p("env"), "hash"])).unwrap();
    let mut want: Vec<String> = (0..200).map(|i| format!(" key{i}\n value{i}\n")).collect();
    want.sort();
    assert!(out.contains(&want.concat()), "{out}");
    let out = String::from_utf8(beech_ok(&["dump", &p("env"), "recno"])).unwrap();
    let want: String = (0..200u32)
        .map(|i| {
            format!(
                " {}\n {}\n",
                hex(&(i + 1).to_be_bytes()),
                hex(format!("record {i}").as_bytes())
            )
        })
        .collect();
    assert!(out.contains(&want), "{out}");
}

fn print_dump(name: Option<&str>, pairs: &[(&str, &str)], end: bool) -> Vec<u8> {
    let mut s = String::from("VERSION=3\nformat=print\n");
    if let Some(n) = name {
        s += &format!("database={n}\n");
    }
    s += "type=btree\nHEADER=END\n";
    for (k, v) in pairs {
        s += &format!(" {k}\n {v}\n");
    }
    if end {
        s += "DATA=END\n";
    }
    s.into_bytes()
}

#[test]
fn a_failed_load_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    for transactional in [false, true] {
        let dir = tmp.path().join(format!("env-{transactional}"));
        let d = dir.to_str().unwrap();
        {
            let cfg = beechdb::Config::new().transactional(transactional);
            let env = beechdb::Env::open(&dir, cfg).unwrap();
            env.create_db("t").unwrap().put(b"old", b"kept").unwrap();
            env.close().unwrap();
        }
        let before = beech_ok(&["dump", "-p", d]);
        let many: Vec<(String, String)> =
            (0..5000).map(|i| (format!("k{i}"), "v".into())).collect();
        let many: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mut bad_line = print_dump(Some("t"), &many, true);
        bad_line.extend_from_slice(&print_dump(Some("u"), &[("a", "\\zz")], true));
        let two_sections = [
            print_dump(Some("t"), &many, true),
            print_dump(Some("u"), &[("a", "b")], true),
        ]
        .concat();
        for (input, target, why) in [
            (
                print_dump(Some("t"), &many, false),
                None,
                "input ends before DATA=END",
            ),
            (bad_line, None, "line 10013: invalid escape"),
            (two_sections, Some("t"), "more than one database"),
        ] {
            let mut args = vec!["load", d];
            args.extend(target);
            let (code, _, err) = beech(&args, Some(&input));
            assert_eq!(code, 2, "{err}");
            assert!(
                err.contains(why) && err.contains("nothing was loaded"),
                "{err}"
            );
            assert!(
                beech_ok(&["dump", "-p", d]) == before,
                "a failed load changed {d}"
            );
        }
    }
    // A load that creates the environment and fails removes it again.
    let fresh = tmp.path().join("fresh");
    let (code, _, err) = beech(
        &["load", fresh.to_str().unwrap(), "t"],
        Some(b"VERSION=3\nHEADER=END\n 00\n"),
    );
    assert_eq!(code, 2);
    assert!(err.contains("standard input: line 4"), "{err}");
    assert!(!fresh.exists());
    // Messages name the file and what went wrong.
    let (code, _, err) = beech(
        &["load", fresh.to_str().unwrap(), "-f", "missing.dump"],
        None,
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("-f missing.dump: No such file or directory") && !err.contains("os error"),
        "{err}"
    );
}

#[test]
fn a_killed_load_leaves_nothing_and_no_bloated_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("env");
    let d = dir.to_str().unwrap();
    let (code, _, err) = beech(
        &["load", d, "t"],
        Some(&print_dump(None, &[("old", "kept")], true)),
    );
    assert_eq!(code, 0, "{err}");
    let before = beech_ok(&["dump", "-p", d]);
    let size_before = std::fs::metadata(dir.join("beech.db")).unwrap().len();
    let mut child = Command::new(env!("CARGO_BIN_EXE_beech"))
        .args(["load", d, "t"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input
        .write_all(b"VERSION=3\nformat=bytevalue\ntype=btree\nHEADER=END\n")
        .unwrap();
    let value = hex(&[7u8; 200]);
    for i in 0..400_000u32 {
        input
            .write_all(format!(" {}\n {value}\n", hex(&i.to_be_bytes())).as_bytes())
            .unwrap();
    }
    input.flush().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    drop(input);
    assert!(
        beech_ok(&["dump", "-p", d]) == before,
        "a killed load left records behind"
    );
    // The next open for writing (here `checkpoint`'s) cuts the pages the killed load wrote.
    beech_ok(&["checkpoint", d]);
    assert!(beech_ok(&["dump", "-p", d]) == before);
    let size_after = std::fs::metadata(dir.join("beech.db")).unwrap().len();
    assert!(size_after <= size_before, "{size_after} > {size_before}");
}

#[test]
fn repeated_and_existing_keys_are_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("env");
    let d = d.to_str().unwrap();
    let (code, _, err) = beech(
        &["load", d, "t"],
        Some(&print_dump(
            None,
            &[("a", "1"), ("b", "2"), ("a", "3"), ("b", "4")],
            true,
        )),
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("4 key/value pairs read, 2 records added, 2 replaced"),
        "{err}"
    );
    // -n: warn for each existing key, skip it, load the rest, exit 1.
    let (code, _, err) = beech(
        &["load", "-n", d, "t"],
        Some(&print_dump(None, &[("a", "x"), ("c", "5")], true)),
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("line 5: key \"a\" already exists; skipped"),
        "{err}"
    );
    assert!(err.contains("1 records added, 1 skipped"), "{err}");
    let out = String::from_utf8(beech_ok(&["dump", "-p", d, "t"])).unwrap();
    assert!(out.contains(" a\n 3\n b\n 4\n c\n 5\n"), "{out}");
    // Progress goes to standard error as lines when it is not a terminal.
    let pairs: Vec<(String, String)> = (0..200_000)
        .map(|i| (format!("key{i:07}"), "v".repeat(50)))
        .collect();
    let pairs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let (code, _, err) = run(
        Command::new(env!("CARGO_BIN_EXE_beech"))
            .args(["load", d, "big"])
            .env("BEECH_PROGRESS_INTERVAL_MS", "1"),
        Some(&print_dump(None, &pairs, true)),
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("beech: load standard input: ") && err.contains(" MB in "),
        "{err}"
    );
    let (code, _, err) = run(
        Command::new(env!("CARGO_BIN_EXE_beech"))
            .args(["verify", d])
            .env("BEECH_PROGRESS_INTERVAL_MS", "1"),
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("beech: verify ") && err.contains(" pages of "),
        "{err}"
    );
}

#[test]
fn migrate_moves_every_database_of_every_file_or_nothing() {
    let Some(load) = bdb_tool("db5.3_load") else {
        return;
    };
    bdb_tool("db5.3_dump").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let from = tmp.path().join("bdb");
    std::fs::create_dir(&from).unwrap();
    let p = |n: &str| from.join(n).to_str().unwrap().to_string();
    // A file with two databases (one of sorted duplicates), a file holding one unnamed
    // database, and Berkeley DB's own files, which are not migrated.
    let two = section("accounts", &[(b"a".to_vec(), b"1".to_vec())])
        + &section_with(
            "tags",
            "duplicates=1\ndupsort=1\n",
            &[
                (b"t".to_vec(), b"x".to_vec()),
                (b"t".to_vec(), b"y".to_vec()),
            ],
        );
    // Berkeley DB's own load writes each file from a dump.
    let bdb_file = |dump: &str, file: &str| {
        let text = tmp.path().join(format!("{file}.dump").replace('/', "_"));
        std::fs::write(&text, dump).unwrap();
        bdb(&load, &["-f", text.to_str().unwrap(), &p(file)]);
    };
    bdb_file(&two, "app.db");
    bdb_file(
        "VERSION=3\nformat=print\ntype=btree\nHEADER=END\n k\n v\nDATA=END\n",
        "single.db",
    );
    std::fs::write(p("__db.001"), b"region").unwrap();
    // A data directory named by DB_CONFIG holds one more file.
    std::fs::write(
        p("DB_CONFIG"),
        b"set_cachesize 0 1000000 1\nset_data_dir data\n",
    )
    .unwrap();
    std::fs::create_dir(from.join("data")).unwrap();
    bdb_file(
        "VERSION=3\nformat=print\ntype=btree\nHEADER=END\n far\n away\nDATA=END\n",
        "data/far.db",
    );
    let dest = tmp.path().join("beech");
    let d = dest.to_str().unwrap();
    let (code, _, err) = beech(&["migrate", from.to_str().unwrap(), d], None);
    assert_eq!(code, 0, "{err}");
    let out = String::from_utf8(beech_ok(&["dump", "-p", d])).unwrap();
    assert!(
        out.contains("database=accounts\n")
            && out.contains("database=single.db\n")
            && out.contains("database=far.db\n"),
        "{out}"
    );
    assert!(
        out.contains("database=tags\ntype=btree\nduplicates=1\ndupsort=1\n")
            && out.contains(" t\n x\n t\n y\n"),
        "{out}"
    );
    // Migrating again finds the names taken: refused, and nothing changes.
    let (code, _, err) = beech(&["migrate", from.to_str().unwrap(), d], None);
    assert_eq!(code, 2);
    assert!(
        err.contains("already in") && err.contains("nothing was loaded"),
        "{err}"
    );
    // A file that is no database stops the migration before anything is kept.
    std::fs::write(p("notes.txt"), b"not a database").unwrap();
    let fresh = tmp.path().join("fresh");
    let (code, _, err) = beech(
        &["migrate", from.to_str().unwrap(), fresh.to_str().unwrap()],
        None,
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("notes.txt") && !fresh.exists(), "{err}");
}
