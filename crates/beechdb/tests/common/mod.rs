//! Helpers shared by the integration tests.

/// A count from environment variable `name` (for longer runs), else `default`.
#[allow(dead_code)] // each test binary uses a part of this module
pub fn count_from_env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
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

/// Storage that calls a hook before every write, with the file's name, the offset and the
/// length, so that a test can act at an exact point of the engine's work.
#[allow(dead_code)] // each test binary uses a part of this module
pub mod hook {
    use beechdb::storage::{MemStorage, Storage, StorageFile};
    use std::any::Any;
    use std::io;
    use std::sync::Arc;

    /// Called before every write with the file's name, the offset and the length (a
    /// change of length: the new length and 0); an error fails the write.
    pub type Hook = Arc<dyn Fn(&str, u64, usize) -> io::Result<()> + Send + Sync>;

    #[derive(Clone)]
    pub struct HookStorage {
        pub inner: MemStorage,
        pub hook: Hook,
    }

    impl std::fmt::Debug for HookStorage {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "HookStorage")
        }
    }

    impl Storage for HookStorage {
        fn open(&self, name: &str, create: bool) -> io::Result<Box<dyn StorageFile>> {
            let file = self.inner.open(name, create)?;
            Ok(Box::new(HookFile {
                name: name.to_string(),
                file,
                hook: self.hook.clone(),
            }))
        }
        fn exists(&self, name: &str) -> io::Result<bool> {
            self.inner.exists(name)
        }
        fn list(&self) -> io::Result<Vec<String>> {
            self.inner.list()
        }
        fn remove(&self, name: &str) -> io::Result<()> {
            self.inner.remove(name)
        }
        fn rename(&self, from: &str, to: &str) -> io::Result<()> {
            self.inner.rename(from, to)
        }
        fn sync_dir(&self) -> io::Result<()> {
            self.inner.sync_dir()
        }
        fn lock(&self) -> io::Result<Box<dyn Any + Send + Sync>> {
            self.inner.lock()
        }
        fn describe(&self) -> String {
            self.inner.describe()
        }
    }

    struct HookFile {
        name: String,
        file: Box<dyn StorageFile>,
        hook: Hook,
    }

    impl StorageFile for HookFile {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            self.file.read_at(buf, offset)
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
            (self.hook)(&self.name, offset, buf.len())?;
            self.file.write_at(buf, offset)
        }
        fn len(&self) -> io::Result<u64> {
            self.file.len()
        }
        fn set_len(&self, len: u64) -> io::Result<()> {
            (self.hook)(&self.name, len, 0)?;
            self.file.set_len(len)
        }
        fn sync_data(&self) -> io::Result<()> {
            self.file.sync_data()
        }
        fn sync_all(&self) -> io::Result<()> {
            self.file.sync_all()
        }
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
