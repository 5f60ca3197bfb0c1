//! Running the built `rlock` binary from tests: bounded, stdin closed (not a terminal),
//! its output captured, and JSON read back.

#![allow(dead_code)]

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
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_rlock"));
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
