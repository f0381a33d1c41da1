//! The library as programs meet it: built as `libsqlite3.so.0` in a directory of its own,
//! a C program compiled against `include/sqlite3.h` and linked with it, and Python's own
//! `sqlite3` module loading it through `LD_LIBRARY_PATH`.
//!
//! The Python test needs a Python whose `_sqlite3` module links libsqlite3 dynamically
//! (as distributions build it). If none is found the test says so and passes, unless
//! `BEECH_REQUIRE_PYTHON=1`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The directory holding the built library as `libsqlite3.so.0` (and `libsqlite3.so` for
/// the linker).
fn dropin_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(make_dropin_dir).clone()
}

fn make_dropin_dir() -> PathBuf {
    // Tests run from target/<profile>/deps, where `cargo test` builds the library (it
    // copies it up to target/<profile> only under `cargo build`).
    let deps = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let lib = deps.join("libbeechdb_sqlite3.so");
    assert!(lib.exists(), "{} is not built", lib.display());
    let dir = deps.parent().unwrap().join("sqlite3-dropin-test");
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["libsqlite3.so.0", "libsqlite3.so"] {
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&lib, &link).unwrap();
    }
    dir
}

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn c_program_runs_on_the_library() {
    let dir = dropin_dir();
    let scratch = tempfile::tempdir().unwrap();
    let exe = scratch.path().join("api_test");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-Wall", "-Wextra", "-Werror", "-O1", "-o"])
        .arg(&exe)
        .arg(crate_dir().join("tests/c/api_test.c"))
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg("-L")
        .arg(&dir)
        .args(["-lsqlite3", "-lpthread"])
        .output()
        .unwrap_or_else(|e| panic!("{cc}: {e}"));
    assert!(
        out.status.success(),
        "compiling api_test.c failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let data = scratch.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let out = Command::new(&exe)
        .arg(&data)
        .env("LD_LIBRARY_PATH", &dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.ends_with("ok\n"),
        "api_test failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // The program really used this library, not a system SQLite.
    let ldd = Command::new("ldd")
        .arg(&exe)
        .env("LD_LIBRARY_PATH", &dir)
        .output();
    if let Ok(ldd) = ldd {
        let text = String::from_utf8_lossy(&ldd.stdout);
        assert!(text.contains(&dir.display().to_string()), "{text}");
    }
}

/// A Python whose `sqlite3` module, given `LD_LIBRARY_PATH=dir`, loads this library.
fn python_on(dir: &Path) -> Option<String> {
    let probe = "import sqlite3, os; \
                 maps = open('/proc/self/maps').read().split(); \
                 print(any('beechdb_sqlite3' in os.path.realpath(p) for p in maps if 'sqlite3' in p))";
    ["python3", "/usr/bin/python3", "python"]
        .into_iter()
        .find_map(|py| {
            let out = Command::new(py)
                .args(["-c", probe])
                .env("LD_LIBRARY_PATH", dir)
                .output()
                .ok()?;
            (String::from_utf8_lossy(&out.stdout).trim() == "True").then(|| py.to_string())
        })
}

#[test]
fn python_sqlite3_module_runs_on_the_library() {
    let dir = dropin_dir();
    let Some(python) = python_on(&dir) else {
        let msg = "no Python whose sqlite3 module links libsqlite3.so.0 dynamically was found";
        assert!(std::env::var("BEECH_REQUIRE_PYTHON").is_err(), "{msg}");
        eprintln!("SKIPPED: {msg}");
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let out = Command::new(&python)
        .args(["-m", "unittest", "-v", "test_dbapi"])
        .current_dir(crate_dir().join("tests/python"))
        .env("LD_LIBRARY_PATH", &dir)
        .env("BEECH_DROPIN_DIR", scratch.path())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{python} -m unittest test_dbapi failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
