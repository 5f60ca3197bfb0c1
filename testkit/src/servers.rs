//! Throw-away `redis-server` processes: started on free loopback ports with persistence
//! off, killed, frozen, thawed and restarted on demand, several independent masters at
//! once, and a replica of one.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::inspect::info_field;
use crate::wait::settles_to;

/// How long a freshly spawned server may take to answer `PING`.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How many times to try a new port (or the same port, on restart) before giving up.
pub(crate) const MAX_TRIES: usize = 5;

/// A `redis-server` child process bound to `127.0.0.1` with persistence disabled.
/// Dropping it kills the process and removes its temporary directory.
pub struct RedisServer {
    pub(crate) port: u16,
    pub(crate) dir: PathBuf,
    pub(crate) extra: Vec<String>,
    /// Behind a mutex so `is_running`/`pid` work through `&self` (e.g. via `Arc`).
    pub(crate) child: Mutex<Option<Child>>,
}

impl RedisServer {
    /// Starts a server with the default configuration.
    pub fn start() -> RedisServer {
        Self::start_with_args(&[])
    }

    /// Starts a server with extra command-line config appended (e.g. `["--replicaof", ...]`).
    /// A new port is tried if the chosen one turns out to be taken.
    pub fn start_with_args(extra: &[&str]) -> RedisServer {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let mut last_err = String::new();
        for _ in 0..MAX_TRIES {
            let port = free_port();
            let dir = std::env::temp_dir()
                .join(format!("redis-rlock-test-{port}-{}", uuid::Uuid::new_v4()));
            std::fs::create_dir_all(&dir).expect("create redis temp dir");
            match launch(port, &dir, &extra) {
                Ok(child) => {
                    return RedisServer {
                        port,
                        dir,
                        extra,
                        child: Mutex::new(Some(child)),
                    }
                }
                Err(e) => {
                    last_err = e;
                    let _ = std::fs::remove_dir_all(&dir);
                }
            }
        }
        panic!("redis-server failed to start after {MAX_TRIES} attempts: {last_err}");
    }

    /// The TCP port the server listens on (stable across `restart`).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Connection URL, `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// OS process id of the current server process. Panics if it was killed.
    pub fn pid(&self) -> u32 {
        let child = self.child.lock().expect("child mutex poisoned");
        child.as_ref().expect("redis-server is not running").id()
    }

    /// Whether the server process exists and has not exited (a frozen server counts as running).
    pub fn is_running(&self) -> bool {
        let mut child = self.child.lock().expect("child mutex poisoned");
        match child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Kills the server with SIGKILL (no graceful shutdown, like a crash) and reaps it.
    /// No-op if it is not running.
    pub fn kill(&mut self) {
        let mut child = self.child.lock().expect("child mutex poisoned");
        if let Some(mut c) = child.take() {
            // SIGKILL also terminates a SIGSTOPped process.
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kills the server if running and starts a fresh one on the SAME port with empty data,
    /// so clients configured with `url()` can reconnect to it.
    pub fn restart(&mut self) {
        self.kill();
        // Wipe the directory so nothing (e.g. a dump.rdb from an explicit SAVE) is reloaded.
        let _ = std::fs::remove_dir_all(&self.dir);
        std::fs::create_dir_all(&self.dir).expect("recreate redis temp dir");
        self.restart_keeping_data();
    }

    /// Suspends the process (SIGSTOP): connections stay open but nothing is answered,
    /// which simulates a hung server or a network partition.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Resumes a frozen process (SIGCONT).
    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([sig, &self.pid().to_string()])
            .status()
            .expect("failed to run `kill`");
        assert!(status.success(), "kill {sig} {} failed", self.pid());
    }

    /// A fresh multiplexed async connection for raw commands in tests.
    pub async fn raw(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url())
            .expect("valid redis url")
            .get_multiplexed_async_connection()
            .await
            .expect("connect to test redis-server")
    }

    /// Runs `redis-cli -h 127.0.0.1 -p PORT args...` and returns its trimmed stdout
    /// (handy for admin commands such as `CLIENT KILL TYPE pubsub` or `PUBSUB NUMSUB`).
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("failed to run redis-cli (is it on PATH?)");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Kills the server (SIGKILL, like a crash) and starts it again on the SAME port with the
    /// same directory and arguments, so that what it persisted (with `--appendonly yes`) is
    /// loaded again. Returns once the new process answers `PING` (after loading its data).
    pub fn restart_keeping_data(&mut self) {
        self.kill();
        let mut last_err = String::new();
        for _ in 0..MAX_TRIES {
            match launch(self.port, &self.dir, &self.extra) {
                Ok(c) => {
                    *self.child.lock().expect("child mutex poisoned") = Some(c);
                    return;
                }
                // The old socket may linger briefly; wait and try the same port again.
                Err(e) => {
                    last_err = e;
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
        panic!(
            "redis-server failed to restart on port {}: {last_err}",
            self.port
        );
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if self.is_running() {
            // Best effort: a panicking drop would abort, so ignore failures here.
            let _ = Command::new("kill")
                .args(["-CONT", &self.pid().to_string()])
                .status();
        }
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Several independent masters, for multi-master (RedLock-style) tests.
pub struct RedisGroup {
    pub servers: Vec<RedisServer>,
}

impl RedisGroup {
    /// Starts `n` independent servers (sequentially).
    pub fn start(n: usize) -> RedisGroup {
        RedisGroup {
            servers: (0..n).map(|_| RedisServer::start()).collect(),
        }
    }

    /// The URLs of all servers, in order.
    pub fn urls(&self) -> Vec<String> {
        self.servers.iter().map(RedisServer::url).collect()
    }
}

/// Asks the OS for a currently free loopback port. It can be grabbed by someone else
/// before redis binds it; `launch` detects that and the caller retries.
pub(crate) fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener
        .local_addr()
        .expect("local addr of ephemeral listener")
        .port()
}

/// Spawns redis-server and waits until *this* process answers on `port`.
/// Returns `Err` if it exited early (e.g. port in use); panics if it is missing or hangs.
pub(crate) fn launch(port: u16, dir: &PathBuf, extra: &[String]) -> Result<Child, String> {
    let log = dir.join("redis.log");
    let mut child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(["--appendonly", "no", "--daemonize", "no"])
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(&log)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("failed to spawn redis-server (is it on PATH?): {e}"));
    let log_tail = || std::fs::read_to_string(&log).unwrap_or_default();
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "exited with {status} on port {port}; log:\n{}",
                log_tail()
            ));
        }
        // Compare process ids: a PONG from some other server that owns the port doesn't count.
        if probe(port) == Some(child.id()) {
            return Ok(child);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "redis-server on port {port} not ready within {READY_TIMEOUT:?}; log:\n{}",
                log_tail()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends `PING` and `INFO server` over a plain socket; if the reply starts with `+PONG`,
/// returns the server's `process_id`.
fn probe(port: u16) -> Option<u32> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    s.write_all(b"PING\r\nINFO server\r\n").ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 || buf.len() > 64 * 1024 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if !buf.starts_with(b"+PONG") && buf.len() >= 5 {
            return None;
        }
        let text = String::from_utf8_lossy(&buf);
        if let Some(rest) = text.split("process_id:").nth(1) {
            if let Some((pid, _)) = rest.split_once("\r\n") {
                return pid.trim().parse().ok();
            }
        }
    }
}

/// A replica of `master` (`--replicaof`), returned once the master counts it as connected
/// and the replica has the master's data.
pub async fn start_replica_of(master: &RedisServer) -> RedisServer {
    // The master otherwise waits 5 s for more replicas before its first full sync.
    master.cli(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"]);
    let port = master.port().to_string();
    let replica = RedisServer::start_with_args(&["--replicaof", "127.0.0.1", &port]);
    let linked = settles_to(true, Duration::from_secs(10), || async {
        info_field(master, "replication", "connected_slaves", "") == 1
            && replica
                .cli(&["INFO", "replication"])
                .contains("master_link_status:up")
    })
    .await;
    assert!(linked, "the replica did not link to its master");
    // Linked is not yet acknowledging: wait until a write is acknowledged.
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(10_000)
        .query_async(&mut master.raw().await)
        .await
        .expect("WAIT");
    assert_eq!(acked, 1, "the replica does not acknowledge writes");
    replica
}
