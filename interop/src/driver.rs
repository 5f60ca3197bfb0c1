//! The Java side: a handle on one Redisson client running in a child JVM (the driver in
//! `interop/redisson/`), scripted one request at a time over its stdin and stdout.
//!
//! Requests go out as `<id> <thread> <words…>` lines; replies come back as JSON lines
//! carrying the same id, in the order they complete, so a test can start a Java `lock()`
//! that blocks, act on the Rust side, and await the Java reply later. The protocol is
//! documented in `Driver.java`.
//!
//! Everything is bounded: the JVM's start ([`START_LIMIT`]) and every reply
//! ([`REPLY_LIMIT`], or the limit a test gives). The JVM is killed when its handle drops,
//! and it exits by itself when its stdin closes, so a test that panics leaves no JVM behind.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::oneshot;

/// How long a JVM may take to start and connect its Redisson client: a few seconds
/// usually, far more on a loaded 2-core machine building something else.
pub const START_LIMIT: Duration = Duration::from_secs(90);

/// How long a reply to a request that should not block may take.
pub const REPLY_LIMIT: Duration = Duration::from_secs(15);

/// The environment variable naming the driver jar; by default
/// `interop/redisson/target/redisson-driver.jar`, which `interop/redisson/run` builds.
pub const JAR_ENV: &str = "REDISSON_DRIVER_JAR";

/// The environment variable naming the Redisson version the driver must report (set by
/// `interop/redisson/run`, so that the version its summary line names is the one tested).
pub const VERSION_ENV: &str = "REDISSON_EXPECTED_VERSION";

/// How much of the JVM's stderr is kept to show in a failure (its tail).
const STDERR_KEPT: usize = 32 * 1024;

/// The driver jar, which must exist: the suite fails, it never skips, when Java's side is
/// missing.
///
/// # Panics
///
/// When the jar is not there, with the command that builds it.
pub fn driver_jar() -> PathBuf {
    let jar = std::env::var_os(JAR_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("redisson/target/redisson-driver.jar")
        });
    assert!(
        jar.is_file(),
        "the Redisson driver {} is missing: build it and run the suite with \
         `interop/redisson/run` (needs Java 17 and Maven)",
        jar.display()
    );
    jar
}

/// The lock kinds the driver knows, each a Redisson object of the same Redis layout as one
/// of this crate's kinds. The driver's command set takes the next kinds (read-write lock,
/// semaphores, latch) as new words beside these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `RLock` (`getLock`): this crate's `RLock`.
    Lock,
    /// `RFairLock` (`getFairLock`): this crate's `FairLock`.
    Fair,
    /// `RFencedLock` (`getFencedLock`): this crate's `FencedLock`.
    Fenced,
    /// `getReadWriteLock(name).readLock()`: this crate's `ReadLock`.
    Read,
    /// `getReadWriteLock(name).writeLock()`: this crate's `WriteLock`.
    Write,
}

impl Kind {
    /// The kind's word in a request.
    pub fn word(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::Fair => "fair",
            Kind::Fenced => "fenced",
            Kind::Read => "read",
            Kind::Write => "write",
        }
    }
}

/// Settings of one Redisson client (Redisson's defaults for everything not set).
#[derive(Debug, Clone)]
#[must_use]
pub struct RedissonOptions {
    target: Target,
    watchdog: Option<Duration>,
    fair_wait: Option<Duration>,
}

/// What a Redisson client connects to.
#[derive(Debug, Clone)]
enum Target {
    /// One Redis: `useSingleServer`.
    Single(String),
    /// A Redis Cluster through these seeds: `useClusterServers`, with sharded pub/sub on or
    /// off (`shardedSubscriptionMode` ON / OFF).
    Cluster { seeds: Vec<String>, sharded: bool },
}

impl RedissonOptions {
    /// A client of the Redis at `url` (`redis://127.0.0.1:PORT`).
    pub fn new(url: impl Into<String>) -> Self {
        RedissonOptions {
            target: Target::Single(url.into()),
            watchdog: None,
            fair_wait: None,
        }
    }

    /// A client of the Redis Cluster reached through `seeds`, its pub/sub sharded (Redisson's
    /// `shardedSubscriptionMode` ON) or classic (OFF).
    pub fn cluster(seeds: Vec<String>, sharded: bool) -> Self {
        RedissonOptions {
            target: Target::Cluster { seeds, sharded },
            watchdog: None,
            fair_wait: None,
        }
    }

    /// Redisson's `lockWatchdogTimeout` (default 30 s; renewal every third of it).
    pub fn watchdog(mut self, timeout: Duration) -> Self {
        self.watchdog = Some(timeout);
        self
    }

    /// Redisson's `fairLockWaitTimeout` (default 5 minutes).
    pub fn fair_wait(mut self, timeout: Duration) -> Self {
        self.fair_wait = Some(timeout);
        self
    }

    /// Starts the JVM and waits, up to [`START_LIMIT`], until its client is connected.
    ///
    /// # Panics
    ///
    /// When Java or the driver jar is missing, or the driver does not get ready in time,
    /// with what the JVM printed.
    pub async fn start(self) -> Redisson {
        Redisson::start(self).await
    }
}

/// What the driver says once its client is connected.
#[derive(Debug, Clone)]
pub struct Ready {
    /// Redisson's version, read from its jar.
    pub version: String,
    /// The client's id (`RedissonClient.getId()`): the first part of its owner fields.
    pub client_id: String,
    /// The JVM's process id.
    pub pid: u32,
}

/// One reply of the driver.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The request's id.
    pub id: u64,
    /// Whether the call returned (rather than threw).
    pub ok: bool,
    /// The Java thread id of the logical thread that ran it (Redisson's owner id).
    pub thread_id: u64,
    /// Wall-clock microseconds since the epoch just before the Redisson call.
    pub start_us: i64,
    /// Wall-clock microseconds since the epoch just after it returned or threw.
    pub end_us: i64,
    /// What it returned (null for `void`).
    pub value: Value,
    /// The exception's simple class name, when it threw.
    pub error: Option<String>,
    /// The exception's message, when it threw.
    pub message: Option<String>,
}

impl Reply {
    fn parse(line: &str) -> Option<Reply> {
        let v: Value = serde_json::from_str(line).ok()?;
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        Some(Reply {
            id: v.get("id")?.as_u64()?,
            ok: v.get("ok")?.as_bool()?,
            thread_id: v.get("thread_id").and_then(Value::as_u64).unwrap_or(0),
            start_us: v.get("start_us").and_then(Value::as_i64).unwrap_or(0),
            end_us: v.get("end_us").and_then(Value::as_i64).unwrap_or(0),
            value: v.get("value").cloned().unwrap_or(Value::Null),
            error: text("error"),
            message: text("message"),
        })
    }

    /// This reply, which must be a successful one.
    ///
    /// # Panics
    ///
    /// When the call threw, with the exception.
    #[track_caller]
    pub fn ok(self) -> Reply {
        assert!(
            self.ok,
            "Java call {} threw {}: {}",
            self.id,
            self.error.as_deref().unwrap_or("?"),
            self.message.as_deref().unwrap_or("")
        );
        self
    }

    /// The returned boolean.
    ///
    /// # Panics
    ///
    /// When the call threw or returned something else.
    #[track_caller]
    pub fn bool(self) -> bool {
        let value = self.ok().value;
        value
            .as_bool()
            .unwrap_or_else(|| panic!("not a boolean: {value}"))
    }

    /// The returned integer.
    ///
    /// # Panics
    ///
    /// When the call threw or returned something else.
    #[track_caller]
    pub fn int(self) -> i64 {
        let value = self.ok().value;
        value
            .as_i64()
            .unwrap_or_else(|| panic!("not an integer: {value}"))
    }

    /// The returned integer, or `None` for null (a fenced `tryLock` that failed).
    ///
    /// # Panics
    ///
    /// When the call threw or returned something else.
    #[track_caller]
    pub fn opt_int(self) -> Option<i64> {
        let value = self.ok().value;
        if value.is_null() {
            return None;
        }
        Some(
            value
                .as_i64()
                .unwrap_or_else(|| panic!("not an integer: {value}")),
        )
    }
}

/// What the reader tasks share with the handle.
#[derive(Default)]
struct Shared {
    /// Requests sent and not answered yet. Emptied (so every waiting [`Pending`] fails at
    /// once) when the driver's stdout closes.
    pending: Mutex<HashMap<u64, oneshot::Sender<Reply>>>,
    /// Whether stdout closed: requests sent afterwards fail at once.
    closed: Mutex<bool>,
    /// The tail of the JVM's stderr (Redisson's warnings, a stack trace).
    stderr: Mutex<String>,
}

impl Shared {
    fn stderr_tail(&self) -> String {
        let stderr = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        if stderr.is_empty() {
            "(nothing on stderr)".to_owned()
        } else {
            stderr.clone()
        }
    }
}

/// One Redisson client in a child JVM. Dropping it kills the JVM.
pub struct Redisson {
    child: Child,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    shared: Arc<Shared>,
    next_id: AtomicU64,
    ready: Ready,
}

impl Redisson {
    async fn start(options: RedissonOptions) -> Redisson {
        let jar = driver_jar();
        let java = std::env::var_os("JAVA_HOME")
            .map(|home| PathBuf::from(home).join("bin/java"))
            .filter(|java| java.is_file())
            .unwrap_or_else(|| PathBuf::from("java"));
        let mut command = Command::new(&java);
        // A small, quick-starting JVM: the suite runs a few at once on a small machine, and
        // the driver does little work of its own.
        command.args([
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Xmx256m",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
        ]);
        command.arg("-jar").arg(&jar);
        match &options.target {
            Target::Single(url) => {
                command.args(["--url", url]);
            }
            Target::Cluster { seeds, sharded } => {
                command.args(["--cluster", &seeds.join(",")]);
                command.args(["--sharded", if *sharded { "on" } else { "off" }]);
            }
        }
        if let Some(watchdog) = options.watchdog {
            command.args(["--watchdog-ms", &watchdog.as_millis().to_string()]);
        }
        if let Some(wait) = options.fair_wait {
            command.args(["--fair-wait-ms", &wait.as_millis().to_string()]);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start `{}` (Java 17 is needed for the interop suite): {e}",
                    java.display()
                )
            });
        let shared = Arc::new(Shared::default());
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let (ready_tx, ready_rx) = oneshot::channel();
        tokio::spawn(read_replies(stdout, shared.clone(), ready_tx));
        tokio::spawn(keep_stderr(stderr, shared.clone()));

        let ready = match tokio::time::timeout(START_LIMIT, ready_rx).await {
            Ok(Ok(ready)) => ready,
            Ok(Err(_)) => {
                // stdout closed before `ready`: the JVM exited; its stderr says why.
                let status = child.wait().await;
                tokio::time::sleep(Duration::from_millis(100)).await; // the stderr reader's last lines
                panic!(
                    "the Redisson driver exited before it was ready ({status:?}):\n{}",
                    shared.stderr_tail()
                );
            }
            Err(_) => panic!(
                "the Redisson driver was not ready within {START_LIMIT:?}:\n{}",
                shared.stderr_tail()
            ),
        };
        if let Ok(expected) = std::env::var(VERSION_ENV) {
            assert_eq!(
                ready.version, expected,
                "the driver runs another Redisson than {VERSION_ENV} names"
            );
        }
        Redisson {
            stdin: tokio::sync::Mutex::new(child.stdin.take()),
            child,
            shared,
            next_id: AtomicU64::new(1),
            ready,
        }
    }

    /// A client of the Redis at `url` with Redisson's default settings.
    pub async fn start_default(url: impl Into<String>) -> Redisson {
        RedissonOptions::new(url).start().await
    }

    /// What the driver said when it got ready.
    pub fn ready(&self) -> &Ready {
        &self.ready
    }

    /// Redisson's version.
    pub fn version(&self) -> &str {
        &self.ready.version
    }

    /// The Redisson client's id: owner fields are `<client id>:<thread id>`.
    pub fn client_id(&self) -> &str {
        &self.ready.client_id
    }

    /// The logical Java thread `name` (created on first use): its requests run one after
    /// another on one platform thread, which owns the locks it takes.
    pub fn thread(&self, name: &str) -> JavaThread<'_> {
        JavaThread {
            driver: self,
            name: name.to_owned(),
        }
    }

    /// Kills the JVM (SIGKILL) and waits until it is gone: a crashed Java service, whose
    /// connections the OS closes. Requests still waiting fail.
    pub async fn kill(&mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(REPLY_LIMIT, self.child.wait()).await;
    }

    /// Sends one request on logical thread `thread`; the reply is awaited through the
    /// returned [`Pending`].
    ///
    /// # Panics
    ///
    /// When the driver is gone.
    pub async fn request(&self, thread: &str, words: &[&str]) -> Pending {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let closed = self.shared.closed.lock().unwrap_or_else(|e| e.into_inner());
            assert!(
                !*closed,
                "the Redisson driver is gone:\n{}",
                self.shared.stderr_tail()
            );
            let mut pending = self
                .shared
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            pending.insert(id, tx);
        }
        let line = format!("{id} {thread} {}\n", words.join(" "));
        let mut stdin = self.stdin.lock().await;
        let stdin = stdin.as_mut().expect("stdin open while the handle lives");
        let sent = tokio::time::timeout(REPLY_LIMIT, async {
            stdin.write_all(line.as_bytes()).await?;
            stdin.flush().await
        })
        .await;
        if !matches!(sent, Ok(Ok(()))) {
            panic!(
                "cannot send `{}` to the Redisson driver: {sent:?}\n{}",
                line.trim_end(),
                self.shared.stderr_tail()
            );
        }
        Pending {
            what: line.trim_end().to_owned(),
            rx,
            shared: self.shared.clone(),
        }
    }
}

impl Drop for Redisson {
    fn drop(&mut self) {
        // kill_on_drop sends the SIGKILL; closing stdin first is the driver's own way out.
        if let Ok(mut stdin) = self.stdin.try_lock() {
            stdin.take();
        }
        let _ = self.child.start_kill();
    }
}

/// A request sent and not yet answered.
pub struct Pending {
    what: String,
    rx: oneshot::Receiver<Reply>,
    shared: Arc<Shared>,
}

impl Pending {
    /// The reply, within [`REPLY_LIMIT`].
    ///
    /// # Panics
    ///
    /// When it does not come in time, or the driver exits first.
    pub async fn wait(self) -> Reply {
        self.wait_for(REPLY_LIMIT).await
    }

    /// The reply, within `limit`.
    ///
    /// # Panics
    ///
    /// When it does not come in time, or the driver exits first.
    pub async fn wait_for(self, limit: Duration) -> Reply {
        match tokio::time::timeout(limit, self.rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => panic!(
                "the Redisson driver exited before answering `{}`:\n{}",
                self.what,
                self.shared.stderr_tail()
            ),
            Err(_) => panic!(
                "the Redisson driver did not answer `{}` within {limit:?}:\n{}",
                self.what,
                self.shared.stderr_tail()
            ),
        }
    }

    /// The reply if it came already: `None` while the call is still running (a `lock()`
    /// still waiting).
    ///
    /// # Panics
    ///
    /// When the driver exited without answering.
    pub fn try_now(&mut self) -> Option<Reply> {
        match self.rx.try_recv() {
            Ok(reply) => Some(reply),
            Err(oneshot::error::TryRecvError::Empty) => None,
            Err(oneshot::error::TryRecvError::Closed) => panic!(
                "the Redisson driver exited before answering `{}`:\n{}",
                self.what,
                self.shared.stderr_tail()
            ),
        }
    }
}

/// A logical Java thread of one driver: the unit of lock ownership on the Java side.
pub struct JavaThread<'a> {
    driver: &'a Redisson,
    name: String,
}

impl JavaThread<'_> {
    /// Sends a request on this thread; await the reply through the [`Pending`].
    pub async fn request(&self, words: &[&str]) -> Pending {
        self.driver.request(&self.name, words).await
    }

    /// Sends a request on this thread and awaits its reply, within [`REPLY_LIMIT`].
    pub async fn call(&self, words: &[&str]) -> Reply {
        self.request(words).await.wait().await
    }

    /// The Java thread id behind this logical thread.
    pub async fn thread_id(&self) -> u64 {
        self.call(&["ping"]).await.ok().thread_id
    }

    /// The hash field Redisson writes for this thread: `<client id>:<thread id>`.
    pub async fn owner(&self) -> String {
        format!("{}:{}", self.driver.client_id(), self.thread_id().await)
    }

    /// Starts `lock()` (a fenced lock: `lockAndGetToken()`), which may block; the reply
    /// comes when it returns.
    pub async fn start_lock(&self, kind: Kind, name: &str) -> Pending {
        self.request(&[kind.word(), "lock", name]).await
    }

    /// `lock()` (a fenced lock: `lockAndGetToken()`, the token as the value), which must
    /// return within [`REPLY_LIMIT`] and not throw.
    pub async fn lock(&self, kind: Kind, name: &str) -> Reply {
        self.start_lock(kind, name).await.wait().await.ok()
    }

    /// `tryLock(wait, -1)` (a fenced lock: `tryLockAndGetToken`): whether it got the lock
    /// (a token or null for a fenced lock).
    pub async fn try_lock(&self, kind: Kind, name: &str, wait: Duration) -> Reply {
        let wait = wait.as_millis().to_string();
        self.request(&[kind.word(), "trylock", name, &wait])
            .await
            .wait_for(REPLY_LIMIT + Duration::from_millis(wait.parse().unwrap_or(0)))
            .await
            .ok()
    }

    /// `unlock()`; the reply says whether it threw (`IllegalMonitorStateException` when
    /// this thread does not hold the lock).
    pub async fn unlock(&self, kind: Kind, name: &str) -> Reply {
        self.call(&[kind.word(), "unlock", name]).await
    }

    /// `forceUnlock()`: whether a lock was deleted.
    pub async fn force_unlock(&self, kind: Kind, name: &str) -> bool {
        self.call(&[kind.word(), "forceunlock", name]).await.bool()
    }

    /// `getHoldCount()`: this thread's count.
    pub async fn hold_count(&self, kind: Kind, name: &str) -> i64 {
        self.call(&[kind.word(), "holdcount", name]).await.int()
    }

    /// `isHeldByCurrentThread()`.
    pub async fn is_held(&self, kind: Kind, name: &str) -> bool {
        self.call(&[kind.word(), "held", name]).await.bool()
    }

    /// `isLocked()`.
    pub async fn is_locked(&self, kind: Kind, name: &str) -> bool {
        self.call(&[kind.word(), "locked", name]).await.bool()
    }

    /// `remainTimeToLive()` in milliseconds (-2 no lock, -1 no expiry).
    pub async fn ttl(&self, kind: Kind, name: &str) -> i64 {
        self.call(&[kind.word(), "ttl", name]).await.int()
    }

    /// `getToken()` of a fenced lock: the last token drawn, `None` before the first.
    pub async fn token(&self, name: &str) -> Option<i64> {
        self.call(&[Kind::Fenced.word(), "token", name])
            .await
            .opt_int()
    }
}

/// Reads the driver's stdout: the `ready` line first, then replies, each handed to the
/// request waiting for it. When stdout closes, every waiting request fails.
async fn read_replies(
    stdout: tokio::process::ChildStdout,
    shared: Arc<Shared>,
    ready_tx: oneshot::Sender<Ready>,
) {
    let mut lines = BufReader::new(stdout).lines();
    let mut ready_tx = Some(ready_tx);
    while let Ok(Some(line)) = lines.next_line().await {
        if let Some(tx) = ready_tx.take() {
            match parse_ready(&line) {
                Some(ready) => {
                    let _ = tx.send(ready);
                }
                None => {
                    note_stray(&shared, &line);
                    ready_tx = Some(tx);
                }
            }
            continue;
        }
        match Reply::parse(&line) {
            Some(reply) => {
                let waiter = shared
                    .pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&reply.id);
                if let Some(waiter) = waiter {
                    let _ = waiter.send(reply);
                }
            }
            None => note_stray(&shared, &line),
        }
    }
    *shared.closed.lock().unwrap_or_else(|e| e.into_inner()) = true;
    shared
        .pending
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clear();
}

fn parse_ready(line: &str) -> Option<Ready> {
    let v: Value = serde_json::from_str(line).ok()?;
    if v.get("event")?.as_str()? != "ready" {
        return None;
    }
    Some(Ready {
        version: v.get("redisson")?.as_str()?.to_owned(),
        client_id: v.get("client_id")?.as_str()?.to_owned(),
        pid: u32::try_from(v.get("pid")?.as_u64()?).ok()?,
    })
}

/// A stdout line that is not the protocol's (a library printing): kept with stderr.
fn note_stray(shared: &Shared, line: &str) {
    append(shared, &format!("[stdout] {line}\n"));
}

async fn keep_stderr(stderr: tokio::process::ChildStderr, shared: Arc<Shared>) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        append(&shared, &format!("{line}\n"));
    }
}

fn append(shared: &Shared, text: &str) {
    let mut kept = shared.stderr.lock().unwrap_or_else(|e| e.into_inner());
    kept.push_str(text);
    if kept.len() > STDERR_KEPT {
        let mut cut = kept.len() - STDERR_KEPT;
        while !kept.is_char_boundary(cut) {
            cut += 1;
        }
        kept.drain(..cut);
    }
}
