//! Helpers shared by the integration tests.

/// A count from environment variable `name` (for longer runs), else `default`.
#[allow(dead_code)] // each test binary uses a part of this module
pub fn count_from_env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The seeds a randomised test runs: `count` of them unless the variable `name` gives
/// another count, from 0 unless `BEECH_FIRST_SEED` gives another start (a soak over seeds
/// no default run has).
#[allow(dead_code)] // each test binary uses a part of this module
pub fn seeds_from_env(name: &str, count: u64) -> std::ops::Range<u64> {
    let first = count_from_env("BEECH_FIRST_SEED", 0);
    first..first + count_from_env(name, count)
}

/// Where a child writer reports its acknowledgements: a file of its own, named by this
/// variable, so that nothing else (the test harness writes its own lines to standard output)
/// can mix into them.
pub const ACKS: &str = "BEECH_TEST_ACKS";

/// Runs one test of this test binary again as a child process (a writer to be killed), with
/// environment variables `envs`; the child is an `#[ignore]`d test, so that a plain test run
/// does not count it as passed. It reports acknowledgements with [`Acks::report`] into
/// `acks`.
#[allow(dead_code)] // each test binary uses a part of this module
pub fn spawn_self(
    test: &str,
    acks: &std::path::Path,
    envs: &[(&str, String)],
) -> std::process::Child {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        test,
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(ACKS, acks)
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// A child's acknowledgement channel.
#[allow(dead_code)] // each test binary uses a part of this module
pub struct Acks(std::fs::File);

#[allow(dead_code)] // each test binary uses a part of this module
impl Acks {
    /// The channel named by [`ACKS`]; `None` when not running as a child.
    pub fn open() -> Option<Acks> {
        let path = std::env::var(ACKS).ok()?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        Some(Acks(file))
    }

    /// Reports one acknowledgement: a line, written with one `write` call, so that a kill
    /// leaves it whole or absent.
    pub fn report(&mut self, line: &str) {
        use std::io::Write;
        let line = format!("{line}\n");
        let n = self.0.write(line.as_bytes()).unwrap();
        assert_eq!(n, line.len(), "an acknowledgement written in one call");
    }

    /// The whole lines a killed child reported.
    pub fn read(path: &std::path::Path) -> Vec<String> {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let whole = text.rfind('\n').map_or("", |end| &text[..end]);
        whole.lines().map(str::to_string).collect()
    }
}

/// The process using `storage` dies, as a kill would: every handle it holds, `env` among
/// them, fails from now on, and `env` is dropped without writing anything (its background
/// thread stops). Returns a handle for the next process, which sees the page cache.
#[allow(dead_code)] // each test binary uses a part of this module
pub fn kill(
    storage: &beechdb::storage::MemStorage,
    env: beechdb::Env,
) -> beechdb::storage::MemStorage {
    let next = storage.restart_process();
    drop(env);
    next
}
