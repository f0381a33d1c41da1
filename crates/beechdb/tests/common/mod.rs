//! Helpers shared by the integration tests.

/// A count from environment variable `name` (for longer runs), else `default`.
#[allow(dead_code)] // each test binary uses a part of this module
pub fn count_from_env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Runs one test of this test binary again as a child process (a writer to be killed), with
/// environment variables `envs` and its stdout piped back.
#[allow(dead_code)] // each test binary uses a part of this module
pub fn spawn_self(test: &str, envs: &[(&str, String)]) -> std::process::Child {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--nocapture", "--test-threads=1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}
