//! The semaphores and the latch on both sides: the driver's kinds `semaphore`
//! (`RSemaphore`), `pes` (`RPermitExpirableSemaphore`) and `latch` (`RCountDownLatch`)
//! with their ops (`Synchronizers.java` documents them), and their Redis names as Redisson
//! derives them.

use std::time::Duration;

use crate::driver::{JavaThread, Pending, Reply, REPLY_LIMIT};

/// The driver's synchronizer kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncKind {
    /// `RSemaphore` (`getSemaphore`): this crate's `Semaphore`.
    Semaphore,
    /// `RPermitExpirableSemaphore` (`getPermitExpirableSemaphore`): this crate's
    /// `PermitExpirableSemaphore`.
    Expirable,
    /// `RCountDownLatch` (`getCountDownLatch`): this crate's `CountDownLatch`.
    Latch,
}

impl SyncKind {
    /// The kind's word in a request.
    pub fn word(self) -> &'static str {
        match self {
            SyncKind::Semaphore => "semaphore",
            SyncKind::Expirable => "pes",
            SyncKind::Latch => "latch",
        }
    }
}

/// Starts `<kind> <op> <name> [args]` on `thread`, which may block (an `acquire`, an
/// `await`); the reply comes when it returns.
pub async fn start(
    thread: &JavaThread<'_>,
    kind: SyncKind,
    op: &str,
    name: &str,
    args: &[&str],
) -> Pending {
    let mut words = vec![kind.word(), op, name];
    words.extend_from_slice(args);
    thread.request(&words).await
}

/// `<kind> <op> <name> [args]` on `thread`, answered within [`REPLY_LIMIT`] plus `wait`.
pub async fn call_waiting(
    thread: &JavaThread<'_>,
    kind: SyncKind,
    op: &str,
    name: &str,
    args: &[&str],
    wait: Duration,
) -> Reply {
    start(thread, kind, op, name, args)
        .await
        .wait_for(REPLY_LIMIT + wait)
        .await
}

/// `<kind> <op> <name> [args]` on `thread`, answered within [`REPLY_LIMIT`].
pub async fn call(
    thread: &JavaThread<'_>,
    kind: SyncKind,
    op: &str,
    name: &str,
    args: &[&str],
) -> Reply {
    call_waiting(thread, kind, op, name, args, Duration::ZERO).await
}

/// The taken permits of an expirable semaphore as raw commands see them (at `{name}:timeout`,
/// the 3.52 layout): each member's 16 bytes in lowercase hex, and its expiry in ms since the
/// epoch.
pub async fn taken_permits(
    conn: &mut redis::aio::MultiplexedConnection,
    name: &str,
) -> Vec<(String, i64)> {
    let members: Vec<(Vec<u8>, f64)> = redis::cmd("ZRANGE")
        .arg(redis_rlock::protocol::layout::permit_timeouts(name))
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(conn)
        .await
        .expect("ZRANGE");
    members
        .into_iter()
        .map(|(id, expiry)| {
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            (hex, expiry as i64)
        })
        .collect()
}

/// The count at `name` as raw commands see it (`GET`).
pub async fn raw_count(conn: &mut redis::aio::MultiplexedConnection, name: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(name)
        .query_async(conn)
        .await
        .expect("GET")
}
