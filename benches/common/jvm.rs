//! Redisson in a JVM of its own, for `benches/redisson.rs`: the interop suite's Java driver
//! (`interop/redisson/`, built here when its jar is missing or older than its sources) run
//! through its benchmark entry point, `Bench.java`, which warms the JIT and runs W1–W3 one
//! request at a time over stdin, answering each with one JSON line on stdout.
//!
//! Started from the client's pinned thread, the JVM inherits its CPU, as the crate's
//! runtimes do. Every answer is awaited within a bound; the JVM is killed on drop, and it
//! exits by itself when its stdin closes.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, SystemTime};

use serde_json::Value;

/// How long the JVM may take to start and connect Redisson on a loaded 2-core machine (the
/// interop suite's bound).
const START_LIMIT: Duration = Duration::from_secs(90);

/// Added to what a request should take, for a machine busy with other work.
const SLACK: Duration = Duration::from_secs(120);

/// `interop/redisson/`: the driver's Maven project.
fn project() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("interop/redisson")
}

/// The Redisson release to measure: `REDISSON_VERSION`, else the one `pom.xml` pins.
pub fn redisson_version() -> String {
    if let Ok(version) = std::env::var("REDISSON_VERSION") {
        return version;
    }
    let pom = std::fs::read_to_string(project().join("pom.xml")).expect("interop/redisson/pom.xml");
    pom.split_once("<redisson.version>")
        .and_then(|(_, rest)| rest.split_once("</redisson.version>"))
        .map(|(version, _)| version.trim().to_string())
        .expect("a <redisson.version> in interop/redisson/pom.xml")
}

/// The newest modification time of `path` and, for a folder, of everything under it.
fn newest(path: &Path) -> SystemTime {
    let own = modified(path);
    match std::fs::read_dir(path) {
        Ok(entries) => entries
            .flatten()
            .map(|entry| newest(&entry.path()))
            .fold(own, SystemTime::max),
        Err(_) => own,
    }
}

fn modified(path: &Path) -> SystemTime {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// The driver jar for [`redisson_version`], built with Maven (`mvn -q -B package`, as
/// `interop/redisson/run` builds it, which downloads nothing once `~/.m2` holds Redisson)
/// when it is missing, built for another Redisson release, or older than the sources.
///
/// # Panics
///
/// When Maven is missing or the build fails, saying what to install or run.
pub fn driver_jar() -> PathBuf {
    let project = project();
    let jar = project.join("target/redisson-driver.jar");
    let version = redisson_version();
    // The run script's stamp: the Redisson release the jar and target/lib were built for.
    let stamp = project.join("target/redisson.version");
    let built_for = std::fs::read_to_string(&stamp).unwrap_or_default();
    let sources = newest(&project.join("src")).max(modified(&project.join("pom.xml")));
    let fresh = jar.is_file() && built_for.trim() == version && modified(&jar) >= sources;
    if fresh {
        return jar;
    }
    eprintln!(
        "building the Redisson driver (Redisson {version}) in {}",
        project.display()
    );
    // Another release's jar would keep its class path in target/lib: start clean, as the
    // run script does.
    let goals: &[&str] = if built_for.trim() == version {
        &["package"]
    } else {
        &["clean", "package"]
    };
    let status = Command::new("mvn")
        .args(["-q", "-B", &format!("-Dredisson.version={version}")])
        .args(goals)
        .current_dir(&project)
        .status()
        .unwrap_or_else(|e| {
            panic!(
                "the Redisson driver {} is missing or out of date, and Maven could not run ({e}): \
                 install Java 17+ and Maven 3.6+ (apt-get install openjdk-17-jdk-headless maven), \
                 or build it with `interop/redisson/run`",
                jar.display()
            )
        });
    assert!(
        status.success() && jar.is_file(),
        "the Redisson driver did not build (`mvn -q -B package` in {}: {status})",
        project.display()
    );
    std::fs::write(&stamp, format!("{version}\n")).expect("write target/redisson.version");
    jar
}

/// One JVM running `Bench.java --serve`.
pub struct Jvm {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    /// The JVM's first line: Redisson's and Java's versions, CPUs, GC, Redisson's pools.
    pub ready: Value,
}

impl Jvm {
    /// Starts the JVM on `jar` against the Redis at `url`: the JIT is warm once compilation
    /// has been quiet for `quiet` (or after `warmup_max` in all). Checks it runs
    /// [`redisson_version`].
    ///
    /// # Panics
    ///
    /// When Java is missing, or the JVM does not come up.
    pub fn start(jar: &Path, url: &str, quiet: Duration, warmup_max: Duration) -> Jvm {
        let mut child = Command::new("java")
            // Redisson's start-up messages off; its warnings still on stderr.
            .arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
            .arg("-cp")
            .arg(jar)
            .args(["redisrlock.interop.Bench", "--url", url, "--serve"])
            .args(["--quiet-s", &quiet.as_secs_f64().to_string()])
            .args(["--warmup-max-s", &warmup_max.as_secs_f64().to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "java could not start ({e}): the Redisson side needs Java 17 or later on PATH"
                )
            });
        let stdin = child.stdin.take().expect("the JVM's stdin");
        let stdout = child.stdout.take().expect("the JVM's stdout");
        let (send, lines) = mpsc::channel();
        // Only JSON lines are answers; the reader ends with the JVM.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.starts_with('{') && send.send(line).is_err() {
                    break;
                }
            }
        });
        let mut jvm = Jvm {
            child,
            stdin,
            lines,
            ready: Value::Null,
        };
        jvm.ready = jvm.answer("ready", START_LIMIT);
        let version = redisson_version();
        assert_eq!(
            jvm.ready["redisson"].as_str(),
            Some(version.as_str()),
            "the driver jar runs another Redisson release than {version}: {}",
            jvm.ready
        );
        jvm
    }

    /// The next answer, which must be the event `event`.
    fn answer(&mut self, event: &str, limit: Duration) -> Value {
        let line = match self.lines.recv_timeout(limit) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => panic!("the JVM did not answer within {limit:?}"),
            Err(RecvTimeoutError::Disconnected) => {
                panic!("the JVM exited: {:?}", self.child.wait())
            }
        };
        let answer: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert_eq!(answer["event"], event, "the JVM answered {answer}");
        answer
    }

    fn request(&mut self, request: &str, event: &str, limit: Duration) -> Value {
        writeln!(self.stdin, "{request}")
            .and_then(|()| self.stdin.flush())
            .expect("the JVM's stdin");
        self.answer(event, limit + SLACK)
    }

    /// Warms the JIT on `workload` (`w1`, `w2`, `w3`), `apis` in turns, until compilation
    /// is quiet; the warm-up's figures.
    pub fn warm(&mut self, workload: &str, apis: &[&str], warmup_max: Duration) -> Value {
        let request = format!("warm {workload} {}", apis.join(","));
        self.request(&request, "warmed", warmup_max)
    }

    /// One run of `api` on `workload`: W1 `amount` pairs, W2 and W3 `amount` ms.
    pub fn run(&mut self, workload: &str, api: &str, amount: u64) -> Value {
        let limit = Duration::from_millis(amount);
        self.request(&format!("run {workload} {api} {amount}"), "ran", limit)
    }

    /// The result line of `api`'s runs of `workload` so far.
    pub fn report(&mut self, workload: &str, api: &str) -> Value {
        self.request(
            &format!("report {workload} {api}"),
            "result",
            Duration::ZERO,
        )
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
