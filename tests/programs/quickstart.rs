//! `cargo run --example quickstart` on a machine with no Redis at 127.0.0.1:6379: it starts
//! and stops a throwaway `redis-server` when one is on PATH, explains how to install Redis
//! when none is, and never starts anything when `REDIS_URL` is set.
//!
//! The tests run the example binary that `cargo test` builds next to the test binaries.
#![cfg(unix)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

/// The demo takes well under a second; this leaves room for a loaded machine.
const RUN_LIMIT: Duration = Duration::from_secs(60);
/// The example's own probe timeout: a slower answer does not count for it either.
const PROBE_TIMEOUT: Duration = Duration::from_millis(300);
const DEFAULT_PORT: u16 = 6379;
const THROWAWAY_ANNOUNCEMENT: &str = "started a throwaway redis-server on 127.0.0.1:";

#[test]
fn without_redis_url_it_runs_the_demo_against_a_local_redis() {
    let default_answers = redis_answers(DEFAULT_PORT);
    assert!(
        default_answers || redis_server_on_path(),
        "this test needs `redis-server` on PATH (or a Redis at 127.0.0.1:6379)"
    );
    let run = run_quickstart(|_| {});
    assert!(run.status.success(), "quickstart failed:\n{}", run.output());
    assert_demo_ran(&run);
    if default_answers {
        assert!(
            !run.output().contains(THROWAWAY_ANNOUNCEMENT),
            "a Redis answers at 6379, yet quickstart started its own:\n{}",
            run.output()
        );
    } else {
        assert_started_and_stopped_one_throwaway_server(&run);
    }
}

#[test]
fn without_redis_server_on_path_it_explains_how_to_get_redis() {
    if redis_answers(DEFAULT_PORT) {
        eprintln!("skipped: a Redis answers at 127.0.0.1:6379, so quickstart would use it");
        return;
    }
    let empty_path = TempDir::new("empty-path");
    let run = run_quickstart(|command| {
        command.env("PATH", &empty_path.0);
    });
    let output = run.output();
    assert!(!run.status.success(), "expected a failure:\n{output}");
    for hint in [
        "sudo apt-get install redis-server",
        "brew install redis",
        "redis-server --port 6379",
        "REDIS_URL",
    ] {
        assert!(output.contains(hint), "no `{hint}` in:\n{output}");
    }
    assert_no_panic(&run);
    assert!(!output.contains(THROWAWAY_ANNOUNCEMENT), "{output}");
    assert_no_temp_dir_left(&run);
}

#[test]
fn with_redis_url_of_nothing_it_fails_clearly_and_starts_nothing() {
    let url = format!("redis://127.0.0.1:{}", unused_port());
    let run = run_quickstart(|command| {
        command.env("REDIS_URL", &url);
    });
    let output = run.output();
    assert!(!run.status.success(), "expected a failure:\n{output}");
    assert!(
        output.contains(&format!("not reachable at {url}")),
        "the message does not name {url}:\n{output}"
    );
    assert!(output.contains("REDIS_URL"), "{output}");
    assert!(!output.contains(THROWAWAY_ANNOUNCEMENT), "{output}");
    assert_no_panic(&run);
    assert_no_temp_dir_left(&run);
}

#[test]
fn a_listener_on_6379_that_does_not_answer_pong_is_not_taken_for_redis() {
    if !redis_server_on_path() {
        eprintln!("skipped: no `redis-server` on PATH");
        return;
    }
    let Some(_silent) = SilentListener::bind(DEFAULT_PORT) else {
        eprintln!("skipped: 127.0.0.1:6379 is taken");
        return;
    };
    let run = run_quickstart(|_| {});
    assert!(run.status.success(), "quickstart failed:\n{}", run.output());
    assert_demo_ran(&run);
    assert_started_and_stopped_one_throwaway_server(&run);
}

fn assert_demo_ran(run: &Run) {
    for step in [
        "alice holds `quickstart:order:1001`",
        "bob's try_lock: busy",
        "alice released it",
        "bob got it",
        "bob released it; locked now: false",
    ] {
        assert!(
            run.stdout.contains(step),
            "no `{step}` in:\n{}",
            run.output()
        );
    }
}

fn assert_started_and_stopped_one_throwaway_server(run: &Run) {
    let output = run.output();
    assert_eq!(
        output.matches(THROWAWAY_ANNOUNCEMENT).count(),
        1,
        "expected exactly one announcement of a throwaway server:\n{output}"
    );
    let port = announced_port(&output);
    assert!(
        !accepts_connections(port),
        "something still listens on the throwaway port {port} after quickstart exited"
    );
    assert!(
        redis_server_processes_on(port).is_empty(),
        "redis-server processes left on port {port}: {:?}",
        redis_server_processes_on(port)
    );
    assert_no_temp_dir_left(run);
}

fn assert_no_panic(run: &Run) {
    assert!(!run.output().contains("panicked"), "{}", run.output());
}

/// The example names its temporary directory after its process id.
fn assert_no_temp_dir_left(run: &Run) {
    let prefix = format!("redis-rlock-quickstart-{}-", run.pid);
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .expect("read the temporary directory")
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(&prefix))
        .map(|entry| entry.path())
        .collect();
    assert!(left.is_empty(), "temporary directories left: {left:?}");
}

fn announced_port(output: &str) -> u16 {
    let after = output
        .split(THROWAWAY_ANNOUNCEMENT)
        .nth(1)
        .unwrap_or_else(|| panic!("no throwaway server announced in:\n{output}"));
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no port after the announcement in:\n{output}"))
}

/// One finished run of the example.
struct Run {
    pid: u32,
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Run {
    fn output(&self) -> String {
        format!("--- stdout\n{}--- stderr\n{}", self.stdout, self.stderr)
    }
}

/// Runs the example with `REDIS_URL` removed (unless `configure` sets it), killing it and
/// whatever it started if it runs longer than [`RUN_LIMIT`].
fn run_quickstart(configure: impl FnOnce(&mut Command)) -> Run {
    let mut command = Command::new(quickstart_binary());
    command
        .env_remove("REDIS_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that a timeout can kill a server it started too.
        .process_group(0);
    configure(&mut command);
    let mut child = command.spawn().expect("run the quickstart example");
    let pid = child.id();
    let stdout = read_to_end_in_background(child.stdout.take().expect("piped stdout"));
    let stderr = read_to_end_in_background(child.stderr.take().expect("piped stderr"));
    let deadline = Instant::now() + RUN_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("poll the quickstart example") {
            break status;
        }
        if Instant::now() >= deadline {
            kill_process_group(pid);
            let _ = child.wait();
            panic!(
                "quickstart did not finish within {RUN_LIMIT:?}\n--- stdout\n{}--- stderr\n{}",
                stdout.join().unwrap_or_default(),
                stderr.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        pid,
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

/// Kills the group that `leader` leads: the example and any redis-server it started.
fn kill_process_group(leader: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{leader}")])
        .status();
}

fn read_to_end_in_background(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// `target/<profile>/examples/quickstart`, next to this test's `target/<profile>/deps/`.
fn quickstart_binary() -> PathBuf {
    let test_binary = std::env::current_exe().expect("path of the test binary");
    let profile_dir = test_binary
        .parent()
        .and_then(Path::parent)
        .expect("the test binary lives in target/<profile>/deps");
    let binary = profile_dir
        .join("examples")
        .join(format!("quickstart{}", std::env::consts::EXE_SUFFIX));
    assert!(
        binary.is_file(),
        "no example binary at {}: build it with `cargo build --example quickstart` (plain \
         `cargo test` builds it too, `cargo test --test programs` does not)",
        binary.display()
    );
    assert_binary_is_not_older_than_sources(&binary);
    binary
}

/// Guards against testing an old build, which `cargo test --test programs` would not
/// refresh.
fn assert_binary_is_not_older_than_sources(binary: &Path) {
    let built = modified(binary);
    let sources = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/quickstart");
    for entry in std::fs::read_dir(&sources).expect("read examples/quickstart") {
        let source = entry.expect("list examples/quickstart").path();
        assert!(
            modified(&source) <= built,
            "{} is newer than {}: rebuild it with `cargo build --example quickstart`",
            source.display(),
            binary.display()
        );
    }
}

fn modified(path: &Path) -> SystemTime {
    std::fs::metadata(path)
        .and_then(|metadata| metadata.modified())
        .unwrap_or_else(|e| panic!("modification time of {}: {e}", path.display()))
}

/// Whether a Redis answers `PING` on this loopback port, judged as the example judges it.
fn redis_answers(port: u16) -> bool {
    let exchange = || -> std::io::Result<bool> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let mut stream = TcpStream::connect_timeout(&addr, PROBE_TIMEOUT)?;
        stream.set_read_timeout(Some(PROBE_TIMEOUT))?;
        stream.write_all(b"PING\r\n")?;
        let mut reply = [0u8; 7];
        stream.read_exact(&mut reply)?;
        Ok(&reply == b"+PONG\r\n")
    };
    exchange().unwrap_or(false)
}

fn accepts_connections(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok()
}

fn redis_server_on_path() -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| dir.join("redis-server").is_file())
    })
}

/// Process ids of redis-server processes serving `port`, judged by their command line
/// (Redis rewrites it to `redis-server 127.0.0.1:PORT`). Empty where there is no `/proc`.
fn redis_server_processes_on(port: u16) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let listen_addr = format!("127.0.0.1:{port}");
    let port = port.to_string();
    entries
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).into_owned();
            let words: Vec<&str> = cmdline
                .split(['\0', ' '])
                .filter(|w| !w.is_empty())
                .collect();
            let is_redis = words.first()?.ends_with("redis-server");
            let serves_port = words.contains(&listen_addr.as_str())
                || words
                    .windows(2)
                    .any(|pair| pair == ["--port", port.as_str()]);
            (is_redis && serves_port).then_some(pid)
        })
        .collect()
}

/// A port that nothing listened on a moment ago.
fn unused_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .expect("bind an ephemeral loopback port")
        .port()
}

/// Something on a port that accepts connections and never says a word, until dropped.
struct SilentListener {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SilentListener {
    fn bind(port: u16) -> Option<SilentListener> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).ok()?;
        // Non-blocking, so that the thread notices `stop` between connections.
        listener.set_nonblocking(true).ok()?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::spawn({
            let stop = stop.clone();
            move || {
                // Kept open, so that a probe waits for a reply that never comes.
                let mut connections = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => connections.push(stream),
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            }
        });
        Some(SilentListener {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for SilentListener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// An empty directory under the system's temporary directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(purpose: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "redis-rlock-quickstart-test-{purpose}-{}-{}",
            std::process::id(),
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |since_epoch| since_epoch.as_nanos())
        ));
        std::fs::create_dir(&dir).expect("create a temporary directory");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
