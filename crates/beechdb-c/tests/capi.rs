//! The C API as programs meet it: `tests/c/kv_test.c` compiled against `include/beechdb.h`,
//! linked with the built `libbeechdb_c.so`, and run.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn c_program_runs_on_the_library() {
    // Tests run from target/<profile>/deps, where `cargo test` builds the library.
    let deps = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    assert!(
        deps.join("libbeechdb_c.so").exists(),
        "libbeechdb_c.so is not built in {}",
        deps.display()
    );
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let scratch = tempfile::tempdir().unwrap();
    let exe = scratch.path().join("kv_test");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-o"])
        .arg(&exe)
        .arg(crate_dir.join("tests/c/kv_test.c"))
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg("-L")
        .arg(&deps)
        .args(["-lbeechdb_c", "-lpthread"])
        .output()
        .unwrap_or_else(|e| panic!("{cc}: {e}"));
    assert!(
        out.status.success(),
        "compiling: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let env_dir = scratch.path().join("env");
    let out = Command::new(&exe)
        .arg(&env_dir)
        .env("LD_LIBRARY_PATH", &deps)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kv_test: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");
}
