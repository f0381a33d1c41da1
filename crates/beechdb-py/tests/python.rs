//! The `beechdb` Python module as programs meet it: the built extension, under the name
//! Python imports, runs `tests/python/test_beechdb.py` in a `python3` from `PATH`.
//!
//! Without a `python3` the test says so and passes, unless `BEECH_REQUIRE_PYTHON=1`.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn python_programs_use_the_module() {
    if Command::new("python3").arg("--version").output().is_err() {
        assert!(
            std::env::var("BEECH_REQUIRE_PYTHON").is_err(),
            "no python3 on PATH"
        );
        eprintln!("no python3 on PATH: the Python binding is not tested");
        return;
    }
    // Tests run from target/<profile>/deps, where `cargo test` builds the extension.
    let deps = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let lib = deps.join("libbeechdb_py.so");
    assert!(lib.exists(), "{} is not built", lib.display());
    let scratch = tempfile::tempdir().unwrap();
    let module_dir = scratch.path().join("site");
    std::fs::create_dir(&module_dir).unwrap();
    std::fs::copy(&lib, module_dir.join("beechdb.abi3.so")).unwrap();
    let work = scratch.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/test_beechdb.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&work)
        .env("PYTHONPATH", &module_dir)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{report}");
    assert!(report.contains("OK"), "{report}");
}
