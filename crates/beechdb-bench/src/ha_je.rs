//! The Berkeley DB JE HA peer of `ha`: the same ScaleTest workload in JE 18.3.12's
//! replicated environments, one JVM per member, run by `je/JeScale.java`.
//!
//! Owns: building the Java harness (Maven) and running its processes. May call: `mvn`,
//! `java`. Invariant: a JE point counts only commits that returned, and checks that the
//! database holds exactly that many records.

use crate::engines::BenchResult;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The harness, compiled: the classpath to run it with.
pub struct Je {
    classpath: String,
}

impl Je {
    /// Compiles the harness in `dir` (its pom.xml) with Maven.
    pub fn build(dir: &Path) -> BenchResult<Je> {
        let status = Command::new("mvn")
            .args([
                "-q",
                "compile",
                "dependency:build-classpath",
                "-Dmdep.outputFile=target/cp.txt",
            ])
            .current_dir(dir)
            .stdout(Stdio::null())
            .status()
            .map_err(|e| format!("running mvn (Maven is needed for --je): {e}"))?;
        if !status.success() {
            return Err(format!("building the JE harness in {} failed", dir.display()).into());
        }
        let deps = std::fs::read_to_string(dir.join("target/cp.txt"))?;
        Ok(Je {
            classpath: format!("{}:{}", dir.join("target/classes").display(), deps.trim()),
        })
    }

    fn java(&self, args: &[String]) -> BenchResult<Child> {
        Ok(Command::new("java")
            .args(["-Xmx1g", "-cp", &self.classpath, "beechdb.bench.JeScale"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("running java (Java 17 is needed for --je): {e}"))?)
    }
}

/// A JVM of the harness, its output lines arriving on a channel.
pub struct JeProc {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<(Instant, String)>,
}

impl JeProc {
    fn start(je: &Je, args: Vec<String>) -> BenchResult<JeProc> {
        let mut child = je.java(&args)?;
        let stdin = child.stdin.take();
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if tx.send((Instant::now(), line)).is_err() {
                    return;
                }
            }
        });
        let mut p = JeProc {
            child,
            stdin,
            lines,
        };
        p.expect("ready", Duration::from_secs(120))?;
        Ok(p)
    }

    /// Waits for a line starting with `prefix`; returns it and when it arrived.
    pub fn expect(&mut self, prefix: &str, within: Duration) -> BenchResult<(Instant, String)> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok((at, line)) if line.starts_with(prefix) => return Ok((at, line)),
                Ok(_) => continue,
                Err(_) => {
                    return Err(
                        format!("a JE process did not say {prefix:?} within {within:?}").into(),
                    )
                }
            }
        }
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: signalling our own child process by its pid.
        unsafe {
            libc::kill(self.child.id() as i32, sig);
        }
    }
}

impl Drop for JeProc {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A replica JVM named `n{id}` joining the group through `helper`.
pub fn node(
    je: &Je,
    dir: &Path,
    id: usize,
    addr: &str,
    group: &str,
    helper: &str,
) -> BenchResult<JeProc> {
    JeProc::start(
        je,
        vec![
            "node".into(),
            dir.join(format!("je{id}")).to_string_lossy().into_owned(),
            addr.into(),
            group.into(),
            format!("n{id}"),
            helper.into(),
        ],
    )
}

/// JE's sync and ack policies for one point.
pub struct Policies {
    pub master: &'static str,
    pub replica: &'static str,
    pub ack: &'static str,
}

/// One ScaleTest run on JE: `replicas` `None` for a plain environment; inserts/s.
pub fn run_point(
    je: &Je,
    base: &Path,
    replicas: Option<usize>,
    p: &Policies,
    threads: usize,
    secs: f64,
    ports: &mut dyn FnMut() -> BenchResult<String>,
) -> BenchResult<f64> {
    let dir = tempfile::tempdir_in(base)?;
    let group = format!("je{}", std::process::id());
    let addr = ports()?;
    let mut master = JeProc::start(
        je,
        vec![
            "master".into(),
            dir.path().join("je1").to_string_lossy().into_owned(),
            addr.clone(),
            group.clone(),
            replicas.map_or(-1, |r| r as i64).to_string(),
            threads.to_string(),
            secs.to_string(),
            p.master.into(),
            p.replica.into(),
            p.ack.into(),
        ],
    )?;
    let mut nodes = Vec::new();
    for i in 0..replicas.unwrap_or(0) {
        nodes.push(node(je, dir.path(), i + 2, &ports()?, &group, &addr)?);
    }
    if replicas.is_some_and(|r| r > 0) {
        let stdin = master.stdin.as_mut().ok_or("the JE master has no input")?;
        writeln!(stdin, "go")?;
        stdin.flush()?;
    }
    let (_, line) = master.expect("ops ", Duration::from_secs_f64(secs + 120.0))?;
    // "ops N seconds S records R errors E"
    let f: Vec<&str> = line.split_whitespace().collect();
    let (ops, seconds, records): (u64, f64, u64) = (f[1].parse()?, f[3].parse()?, f[5].parse()?);
    if records != ops {
        return Err(format!("JE: {ops} commits counted but {records} records held").into());
    }
    drop(nodes);
    Ok(ops as f64 / seconds)
}

/// Seconds from stopping JE's master (SIGKILL, or SIGSTOP when `freeze`) in a group of
/// three to another member reporting itself master.
pub fn failover(
    je: &Je,
    base: &Path,
    freeze: bool,
    ports: &mut dyn FnMut() -> BenchResult<String>,
) -> BenchResult<f64> {
    let dir = tempfile::tempdir_in(base)?;
    let group = format!("jef{}", std::process::id());
    let first = ports()?;
    let mut nodes = vec![node(je, dir.path(), 1, &first, &group, &first)?];
    nodes[0].expect("state MASTER", Duration::from_secs(60))?;
    for id in 2..=3 {
        nodes.push(node(je, dir.path(), id, &ports()?, &group, &first)?);
    }
    let struck = Instant::now();
    nodes[0].signal(if freeze { libc::SIGSTOP } else { libc::SIGKILL });
    let deadline = struck + Duration::from_secs(300);
    while Instant::now() < deadline {
        for n in &nodes[1..] {
            while let Ok((at, line)) = n.lines.try_recv() {
                if line.starts_with("state MASTER") {
                    return Ok(at.duration_since(struck).as_secs_f64());
                }
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Err("JE elected no new master within 300 s".into())
}
