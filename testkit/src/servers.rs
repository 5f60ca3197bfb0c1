//! Throw-away `redis-server` processes: started on free loopback ports with persistence
//! off, killed, frozen, thawed and restarted on demand, several independent masters at
//! once, and a replica of one. Cluster nodes and sentinels are `RedisServer`s too
//! (see [`crate::cluster`] and [`crate::sentinel`]).

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
    /// The text of the config file passed before the other arguments, if any (a sentinel
    /// needs one). It is written to `dir` and rewritten only when `dir` lost it (`restart`),
    /// so what the server itself saved there (a sentinel rewrites it) survives
    /// `restart_keeping_data`.
    pub(crate) config: Option<String>,
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
            match Self::try_start(extra.clone(), None) {
                Ok(server) => return server,
                Err(e) => last_err = e,
            }
        }
        panic!("redis-server failed to start after {MAX_TRIES} attempts: {last_err}");
    }

    /// Starts a server whose first argument is a config file holding `config`, followed by
    /// the usual arguments and `extra`: `redis-server <dir>/redis.conf --port P ... extra`.
    /// For processes that need a writable config file, such as a sentinel
    /// (`extra = ["--sentinel"]`, see [`crate::sentinel`]); command-line arguments override
    /// the file. A new port is tried if the chosen one turns out to be taken.
    pub fn start_with_config(config: &str, extra: &[&str]) -> RedisServer {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let mut last_err = String::new();
        for _ in 0..MAX_TRIES {
            match Self::try_start(extra.clone(), Some(config.to_string())) {
                Ok(server) => return server,
                Err(e) => last_err = e,
            }
        }
        panic!("redis-server failed to start after {MAX_TRIES} attempts: {last_err}");
    }

    /// One attempt: a free port, a fresh temporary directory, and `launch_with_config`. The directory
    /// is removed again if the process exits early (e.g. the port was taken meanwhile), so
    /// that callers choosing more ports of their own (a cluster bus port) can simply retry.
    pub(crate) fn try_start(
        extra: Vec<String>,
        config: Option<String>,
    ) -> Result<RedisServer, String> {
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("redis-rlock-test-{port}-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("create redis temp dir");
        match launch_with_config(port, &dir, config.as_deref(), &extra) {
            Ok(child) => Ok(RedisServer {
                port,
                dir,
                extra,
                config,
                child: Mutex::new(Some(child)),
            }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                Err(e)
            }
        }
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

    /// Runs one command on a fresh blocking connection and returns its reply: admin
    /// commands without `redis-cli`, from sync code such as the cluster and sentinel
    /// set-up. Bounded: connecting may take 1 s and the reply 1 s, so a frozen or dead
    /// server gives an error rather than a hang.
    ///
    /// # Errors
    ///
    /// The connection's or the command's error (a timeout for a frozen server).
    pub fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> redis::RedisResult<T> {
        query_port(self.port, cmd, QUERY_TIMEOUT)
    }

    /// Kills the server (SIGKILL, like a crash) and starts it again on the SAME port with the
    /// same directory and arguments, so that what it persisted (with `--appendonly yes`) is
    /// loaded again. Returns once the new process answers `PING` (after loading its data).
    pub fn restart_keeping_data(&mut self) {
        self.kill();
        let mut last_err = String::new();
        for _ in 0..MAX_TRIES {
            match launch_with_config(self.port, &self.dir, self.config.as_deref(), &self.extra) {
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
/// before redis binds it; `launch_with_config` detects that and the caller retries.
pub(crate) fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener
        .local_addr()
        .expect("local addr of ephemeral listener")
        .port()
}

/// How long [`RedisServer::query`] waits to connect, and then for the reply.
pub(crate) const QUERY_TIMEOUT: Duration = Duration::from_secs(1);

/// One command on a fresh blocking connection to `127.0.0.1:port`, connecting and reading
/// each within `timeout`. A fresh connection per call keeps callers free of connection
/// state (a restarted node, a frozen one) at the price of a loopback handshake.
pub(crate) fn query_port<T: redis::FromRedisValue>(
    port: u16,
    cmd: &redis::Cmd,
    timeout: Duration,
) -> redis::RedisResult<T> {
    cmd.query(&mut connect(port, timeout)?)
}

/// A blocking connection to `127.0.0.1:port` that connects, writes and reads each within
/// `timeout`.
pub(crate) fn connect(port: u16, timeout: Duration) -> redis::RedisResult<redis::Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}"))?;
    let conn = client.get_connection_with_timeout(timeout)?;
    conn.set_read_timeout(Some(timeout))?;
    conn.set_write_timeout(Some(timeout))?;
    Ok(conn)
}

/// Spawns redis-server and waits until *this* process answers on `port`, with a config
/// file holding `config` as the first argument when given. Returns `Err` if it exited
/// early (e.g. port in use); panics if it is missing or hangs. The file is written only if
/// `dir` does not hold it yet, so a restart keeping data keeps what the server rewrote
/// there.
pub(crate) fn launch_with_config(
    port: u16,
    dir: &PathBuf,
    config: Option<&str>,
    extra: &[String],
) -> Result<Child, String> {
    let log = dir.join("redis.log");
    let mut command = Command::new("redis-server");
    if let Some(config) = config {
        let file = dir.join("redis.conf");
        if !file.exists() {
            std::fs::write(&file, config).expect("write the redis config file");
        }
        command.arg(file);
    }
    let mut child = command
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
