//! Test harness: every integration test starts its own throw-away `redis-server`
//! processes on free loopback ports, so tests can run in parallel and can kill,
//! freeze or restart "their" server without disturbing anyone else.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub mod acl;
/// `rediss://`: a test PKI and a redis-server with a TLS port next to its plain one.
#[cfg(feature = "tls")]
pub mod tls;

/// How long a freshly spawned server may take to answer `PING`.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How many times to try a new port (or the same port, on restart) before giving up.
const MAX_TRIES: usize = 5;

/// A `redis-server` child process bound to `127.0.0.1` with persistence disabled.
/// Dropping it kills the process and removes its temporary directory.
pub struct RedisServer {
    port: u16,
    dir: PathBuf,
    extra: Vec<String>,
    /// Behind a mutex so `is_running`/`pid` work through `&self` (e.g. via `Arc`).
    child: Mutex<Option<Child>>,
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
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener
        .local_addr()
        .expect("local addr of ephemeral listener")
        .port()
}

/// Spawns redis-server and waits until *this* process answers on `port`.
/// Returns `Err` if it exited early (e.g. port in use); panics if it is missing or hangs.
fn launch(port: u16, dir: &PathBuf, extra: &[String]) -> Result<Child, String> {
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

/// A client of `server` with the given watchdog timeout and short retry pauses, so that
/// failure tests finish quickly.
pub async fn client_with_watchdog(server: &RedisServer, watchdog: Duration) -> redis_rlock::Client {
    redis_rlock::Client::builder(server.url())
        .watchdog_timeout(watchdog)
        .retry_delay(Duration::from_millis(20))
        .build()
        .await
        .expect("connect to the test redis-server")
}

/// A client of `server` with default settings.
pub async fn client(server: &RedisServer) -> redis_rlock::Client {
    client_with_watchdog(server, Duration::from_secs(30)).await
}

/// The hash of lock `key` as raw Redis sees it: field -> count.
pub async fn lock_hash(
    conn: &mut redis::aio::MultiplexedConnection,
    key: &str,
) -> std::collections::HashMap<String, i64> {
    redis::cmd("HGETALL")
        .arg(key)
        .query_async(conn)
        .await
        .expect("HGETALL")
}

/// PTTL of `key` in milliseconds (-2 absent, -1 no expiry).
pub async fn pttl(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query_async(conn)
        .await
        .expect("PTTL")
}

/// Waits until `condition` holds, checking every 5 ms, for at most `limit`; panics with
/// `what` otherwise. For local state with no event to await (a waiter reaching its wait).
pub async fn eventually(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Reads `read` every 10 ms until it returns `expected`, for at most `limit`, and returns
/// the last value read: for Redis state that background work (a release from `Drop`, a
/// latch flush) settles shortly after the call under test returns.
pub async fn settles_to<T, F, Fut>(expected: T, limit: Duration, mut read: F) -> T
where
    T: PartialEq,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let deadline = Instant::now() + limit;
    loop {
        let value = read().await;
        if value == expected || Instant::now() >= deadline {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// One number from `INFO <section>`: the line `name:value`, or with `sub`, the `sub=value`
/// inside a line such as `cmdstat_evalsha:calls=12,usec=...`. 0 when absent.
pub fn info_field(server: &RedisServer, section: &str, name: &str, sub: &str) -> i64 {
    let info = server.cli(&["INFO", section]);
    let Some(value) = info
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
    else {
        return 0;
    };
    let value = if sub.is_empty() {
        value
    } else {
        match value
            .split(',')
            .find_map(|part| part.strip_prefix(sub)?.strip_prefix('='))
        {
            Some(v) => v,
            None => return 0,
        }
    };
    value.trim().parse::<f64>().map(|v| v as i64).unwrap_or(0)
}

/// A client of `server` whose fair-lock waiters keep their places for `waiter_timeout`
/// without a heartbeat, with short retry pauses.
pub async fn fair_client(server: &RedisServer, waiter_timeout: Duration) -> redis_rlock::Client {
    redis_rlock::Client::builder(server.url())
        .fair_waiter_timeout(waiter_timeout)
        .retry_delay(Duration::from_millis(20))
        .build()
        .await
        .expect("connect to the test redis-server")
}

/// The waiting queue of fair lock `name` as raw Redis sees it, head first.
pub async fn fair_queue(conn: &mut redis::aio::MultiplexedConnection, name: &str) -> Vec<String> {
    redis::cmd("LRANGE")
        .arg(format!("redisson_lock_queue:{{{name}}}"))
        .arg(0)
        .arg(-1)
        .query_async(conn)
        .await
        .expect("LRANGE")
}

/// The deadline (ms on the server clock) of `owner` in fair lock `name`'s queue.
pub async fn fair_deadline(
    conn: &mut redis::aio::MultiplexedConnection,
    name: &str,
    owner: &str,
) -> Option<i64> {
    redis::cmd("ZSCORE")
        .arg(format!("redisson_lock_timeout:{{{name}}}"))
        .arg(owner)
        .query_async::<Option<f64>>(conn)
        .await
        .expect("ZSCORE")
        .map(|score| score as i64)
}

/// The Redis server's clock in milliseconds.
pub async fn server_millis(conn: &mut redis::aio::MultiplexedConnection) -> i64 {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(conn).await.expect("TIME");
    secs * 1000 + micros / 1000
}

/// Waits until fair lock `name`'s queue reads `expected`, for at most `limit`; panics with
/// what it last read otherwise.
pub async fn queue_becomes(
    conn: &redis::aio::MultiplexedConnection,
    name: &str,
    expected: &[&str],
    limit: Duration,
) {
    let expected: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    let last = settles_to(expected.clone(), limit, || {
        let mut conn = conn.clone();
        async move { fair_queue(&mut conn, name).await }
    })
    .await;
    assert_eq!(last, expected, "queue of `{name}`");
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

/// How long one call of [`every_acquire`] or [`every_read`] may take before the test fails.
const CALL_LIMIT: Duration = Duration::from_secs(5);

/// Awaits `call`, failing the test if it takes longer than [`CALL_LIMIT`].
pub async fn bounded<T>(what: &str, call: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(CALL_LIMIT, call).await {
        Ok(value) => value,
        Err(_) => panic!("{what}: did not return within {CALL_LIMIT:?}"),
    }
}

/// Every acquire method of `lock`, each called once (waiting up to `wait` where the method
/// waits, with `lease` where it takes one), and what it returned, guards dropped: for
/// promises every entry point keeps (refused input, permissions, a full Redis).
pub async fn every_acquire(
    lock: &impl redis_rlock::DistributedLock<Guard = redis_rlock::LockGuard>,
    wait: Duration,
    lease: Duration,
) -> Vec<(&'static str, redis_rlock::Result<()>)> {
    vec![
        ("lock()", bounded("lock()", lock.lock()).await.map(drop)),
        (
            "lock_with_lease()",
            bounded("lock_with_lease()", lock.lock_with_lease(lease))
                .await
                .map(drop),
        ),
        (
            "try_lock()",
            bounded("try_lock()", lock.try_lock()).await.map(drop),
        ),
        (
            "try_lock_for()",
            bounded("try_lock_for()", lock.try_lock_for(wait))
                .await
                .map(drop),
        ),
        (
            "try_lock_with()",
            bounded("try_lock_with()", lock.try_lock_with(wait, lease))
                .await
                .map(drop),
        ),
    ]
}

/// Every read method of `lock` and `force_unlock`, each called once, and what it
/// returned, values dropped.
pub async fn every_read<K: redis_rlock::LockKind>(
    lock: &redis_rlock::Lock<K>,
) -> Vec<(&'static str, redis_rlock::Result<()>)> {
    vec![
        (
            "force_unlock()",
            bounded("force_unlock()", lock.force_unlock())
                .await
                .map(drop),
        ),
        (
            "is_locked()",
            bounded("is_locked()", lock.is_locked()).await.map(drop),
        ),
        (
            "is_held_by_current_task()",
            bounded("is_held_by_current_task()", lock.is_held_by_current_task())
                .await
                .map(drop),
        ),
        (
            "hold_count()",
            bounded("hold_count()", lock.hold_count()).await.map(drop),
        ),
        (
            "remaining_ttl()",
            bounded("remaining_ttl()", lock.remaining_ttl())
                .await
                .map(drop),
        ),
    ]
}

/// Whether `key` exists, read on `conn`.
pub async fn key_exists(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> bool {
    let n: i64 = redis::cmd("EXISTS")
        .arg(key)
        .query_async(conn)
        .await
        .expect("EXISTS");
    n == 1
}
