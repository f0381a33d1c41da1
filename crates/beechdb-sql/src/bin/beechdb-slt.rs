//! Runs the sqllogictest files named on the command line against BeechDB's SQL layer and
//! prints, per file, its counts (and its first failures with `-v`), then `N passed, N failed`.
//! Exits 1 if any record failed.

fn main() {
    let mut verbose = false;
    let (mut passed, mut failed) = (0u64, 0u64);
    for arg in std::env::args().skip(1) {
        if arg == "-v" {
            verbose = true;
            continue;
        }
        let text = match std::fs::read_to_string(&arg) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{arg}: {e}");
                failed += 1;
                continue;
            }
        };
        let r = beechdb_sql::slt::run_script(&text);
        println!("{arg}: {} passed, {} failed", r.passed, r.failed);
        if verbose {
            for (line, sql, why) in &r.failures {
                println!("  line {line}: {sql}\n    {why}");
            }
        }
        passed += r.passed;
        failed += r.failed;
    }
    println!("{passed} passed, {failed} failed");
    std::process::exit(i32::from(failed > 0));
}
