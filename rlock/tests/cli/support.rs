//! Running the built `rlock` binary from tests: bounded, stdin closed (not a terminal),
//! its output captured, and JSON read back; or with a pseudo-terminal as stdin, to answer
//! `unlock`'s question.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

/// How long one run of the binary may take: each takes well under a second here.
const RUN_LIMIT: Duration = Duration::from_secs(30);

/// What one run printed, and its exit code.
#[derive(Debug)]
pub struct Run {
    /// The exit code.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    /// Standard output as JSON; panics with both streams when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }

    /// Both streams, for checks that something is printed nowhere.
    pub fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

/// Runs `rlock args…` with no `REDIS_URL` from the caller's environment.
pub async fn rlock(args: &[&str]) -> Run {
    rlock_env(args, &[]).await
}

/// Runs `rlock args…` with these environment variables set.
pub async fn rlock_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    run(
        tokio::process::Command::new(env!("CARGO_BIN_EXE_rlock")),
        args,
        env,
    )
    .await
}

/// Runs `rlock args…` in at most `data_mb` MB of data memory (`ulimit -d`: the heap and
/// every private writable mapping): past it, allocation fails and the run aborts.
pub async fn rlock_in_memory(data_mb: u64, args: &[&str]) -> Run {
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(format!(
            "ulimit -d {} && exec \"$0\" \"$@\"",
            data_mb * 1024
        ))
        .arg(env!("CARGO_BIN_EXE_rlock"));
    run(command, args, &[]).await
}

/// Runs `command` with `args`, stdin closed and no `REDIS_URL` from the caller's
/// environment, bounded in time.
async fn run(mut command: tokio::process::Command, args: &[&str], env: &[(&str, &str)]) -> Run {
    command
        .args(args)
        .env_remove("REDIS_URL")
        .env_remove("RLOCK_KEY_PREFIX")
        .env_remove("RLOCK_MASTER_PASSWORD")
        .env_remove("RLOCK_MASTER_USER")
        .env_remove("RLOCK_SENTINEL_MASTER")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (name, value) in env {
        command.env(name, value);
    }
    let output = tokio::time::timeout(RUN_LIMIT, command.output())
        .await
        .unwrap_or_else(|_| panic!("rlock {args:?} did not finish within {RUN_LIMIT:?}"))
        .expect("run the rlock binary");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// The lock named `name` in a `list --json` output; panics when it is missing.
pub fn lock<'a>(listing: &'a Value, name: &str) -> &'a Value {
    listing["locks"]
        .as_array()
        .expect("a locks array")
        .iter()
        .find(|lock| lock["name"] == name)
        .unwrap_or_else(|| panic!("`{name}` is not listed: {listing:#}"))
}

/// Whether `list --json` lists `name`.
pub fn listed(listing: &Value, name: &str) -> bool {
    listing["locks"]
        .as_array()
        .expect("a locks array")
        .iter()
        .any(|lock| lock["name"] == name)
}

/// A Redisson client id, as a Java client writes it into the hash field.
pub const JAVA_CLIENT: &str = "6c1f3a52-93d4-4b0e-8f1e-2a9d5b7c0e41";

/// Writes a lock as Redisson leaves it: `HSET name <uuid>:<thread> count` and, when
/// `pttl_ms` is given, `PEXPIRE`.
pub async fn java_lock<C: redis::aio::ConnectionLike>(
    conn: &mut C,
    name: &str,
    thread: u64,
    count: i64,
    pttl_ms: Option<u64>,
) {
    let _: () = redis::cmd("HSET")
        .arg(name)
        .arg(format!("{JAVA_CLIENT}:{thread}"))
        .arg(count)
        .query_async(conn)
        .await
        .unwrap();
    if let Some(ms) = pttl_ms {
        let _: () = redis::cmd("PEXPIRE")
            .arg(name)
            .arg(ms)
            .query_async(conn)
            .await
            .unwrap();
    }
}

/// A run of `rlock` whose stdin is a terminal (a pseudo-terminal the test types into), so
/// that `unlock` asks its question; stdout and stderr are captured.
pub struct OnTerminal {
    child: tokio::process::Child,
    /// The terminal's other side: what is written here, the binary reads on stdin.
    keyboard: std::fs::File,
    /// Standard error so far, as it arrives.
    stderr: tokio::sync::watch::Receiver<String>,
    reader: tokio::task::JoinHandle<()>,
}

/// Starts `rlock args…` with a pseudo-terminal as stdin.
pub fn rlock_on_terminal(args: &[&str]) -> OnTerminal {
    use std::os::fd::{FromRawFd, OwnedFd};
    use tokio::io::AsyncReadExt;

    let (mut keyboard, mut terminal) = (-1, -1);
    // SAFETY: openpty writes two new file descriptors into the integers given, and reads
    // nothing else (null name, settings and size); each is owned once, below.
    let opened = unsafe {
        libc::openpty(
            &mut keyboard,
            &mut terminal,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    assert_eq!(opened, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened for this process and nothing else owns them.
    let (keyboard, terminal) = unsafe {
        (
            OwnedFd::from_raw_fd(keyboard),
            OwnedFd::from_raw_fd(terminal),
        )
    };
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_rlock"))
        .args(args)
        .env_remove("REDIS_URL")
        .env_remove("RLOCK_KEY_PREFIX")
        .stdin(Stdio::from(terminal))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run the rlock binary");
    let mut pipe = child.stderr.take().expect("stderr piped");
    let (tell, stderr) = tokio::sync::watch::channel(String::new());
    let reader = tokio::spawn(async move {
        let mut buffer = [0u8; 1024];
        while let Ok(n @ 1..) = pipe.read(&mut buffer).await {
            let text = String::from_utf8_lossy(&buffer[..n]).into_owned();
            tell.send_modify(|so_far| so_far.push_str(&text));
        }
    });
    OnTerminal {
        child,
        keyboard: std::fs::File::from(keyboard),
        stderr,
        reader,
    }
}

impl OnTerminal {
    /// Waits (bounded) until the binary asks its `[y/N]` question, and returns what it
    /// printed on stderr so far.
    pub async fn question(&mut self) -> String {
        let mut stderr = self.stderr.clone();
        let asked = tokio::time::timeout(
            RUN_LIMIT,
            stderr.wait_for(|so_far| so_far.contains("[y/N]")),
        )
        .await;
        match asked {
            Ok(Ok(so_far)) => so_far.clone(),
            _ => panic!(
                "no question within {RUN_LIMIT:?}: {:?}",
                self.stderr.borrow()
            ),
        }
    }

    /// Types `line` and Enter.
    pub fn answer(&mut self, line: &str) {
        use std::io::Write;
        writeln!(self.keyboard, "{line}").expect("type on the terminal");
    }

    /// Waits (bounded) for the binary to exit.
    pub async fn finish(mut self) -> Run {
        use tokio::io::AsyncReadExt;
        let mut stdout = String::new();
        let mut pipe = self.child.stdout.take().expect("stdout piped");
        let status = tokio::time::timeout(RUN_LIMIT, async {
            pipe.read_to_string(&mut stdout).await.expect("read stdout");
            self.child.wait().await.expect("wait for rlock")
        })
        .await
        .unwrap_or_else(|_| panic!("rlock did not finish within {RUN_LIMIT:?}"));
        tokio::time::timeout(RUN_LIMIT, self.reader)
            .await
            .expect("stderr closed")
            .expect("stderr reader");
        let stderr = self.stderr.borrow().clone();
        Run {
            code: status.code().unwrap_or(-1),
            stdout,
            stderr,
        }
    }
}
