//! One Redisson client in a child JVM: started, scripted one request at a time, killed.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::oneshot;

use super::options::Target;
use super::output::{keep_stderr, read_replies, Shared};
use super::{driver_jar, JavaThread, Pending, Ready, RedissonOptions};
use super::{REPLY_LIMIT, START_LIMIT, VERSION_ENV};

/// One Redisson client in a child JVM. Dropping it kills the JVM.
pub struct Redisson {
    child: Child,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    shared: Arc<Shared>,
    next_id: AtomicU64,
    ready: Ready,
}

impl Redisson {
    /// Starts the JVM with `options` (see [`RedissonOptions::start`]).
    pub(super) async fn start(options: RedissonOptions) -> Redisson {
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
