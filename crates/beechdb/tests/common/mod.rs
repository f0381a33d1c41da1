//! Helpers shared by the integration tests.

/// A count from environment variable `name` (for longer runs), else `default`.
pub fn count_from_env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}
