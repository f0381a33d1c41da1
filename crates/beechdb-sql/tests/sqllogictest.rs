//! The sqllogictest corpus in `../shared/sqllogictest/` (select1-3 and evidence/), run in
//! full: at least 99.9% of its records must pass; the counts are printed.

use std::path::PathBuf;

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/sqllogictest")
}

#[test]
fn the_corpus_passes() {
    let dir = corpus();
    let mut files: Vec<PathBuf> = ["select1.test", "select2.test", "select3.test"]
        .iter()
        .map(|f| dir.join(f))
        .collect();
    let mut evidence: Vec<PathBuf> = std::fs::read_dir(dir.join("evidence"))
        .unwrap_or_else(|e| panic!("the corpus is expected at {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "test"))
        .collect();
    evidence.sort();
    files.extend(evidence);
    let (mut passed, mut failed) = (0u64, 0u64);
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let r = beechdb_sql::slt::run_script(&text);
        println!("{}: {} passed, {} failed", f.display(), r.passed, r.failed);
        for (line, sql, why) in &r.failures {
            println!("  line {line}: {sql}\n    {why}");
        }
        passed += r.passed;
        failed += r.failed;
    }
    println!("{passed} passed, {failed} failed");
    assert!(passed > 5_800, "only {passed} records ran");
    assert!(
        failed * 1000 <= passed + failed,
        "{failed} of {} records failed",
        passed + failed
    );
}
