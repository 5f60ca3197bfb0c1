//! Replica sync: a lock write counts only once a replica has it (Redisson's
//! `checkLockSyncedSlaves`), so that a failover to that replica keeps the lock.
//!
//! After an acquire that took the lock, and after each renewal batch, the same connection
//! sends `WAIT <replicas> <timeout>`. `WAIT` blocks that connection until the replicas
//! acknowledged every write it made, so these writes go out on pooled connections of their
//! own, never on the connection every lock call shares: a lagging replica then slows only
//! the writes that wait for it.
//!
//! Replication is asynchronous in Redis; `WAIT` does not make it synchronous, it only
//! tells how many replicas have the write. What counts as failure follows Redisson: no
//! replica acknowledged while replicas are connected. Fewer than asked is accepted (the
//! write is on at least one replica); no replica connected at all is accepted too (there is
//! nothing to wait for, and a master without replicas cannot fail over to one).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crate::transport::conn::Conn;

use crate::error::{Error, Result};

/// How long a reading of the number of connected replicas is trusted: `WAIT` for replicas
/// that are not there would block for the whole timeout on every write.
const REPLICAS_READ_EVERY: Duration = Duration::from_secs(1);

/// What `WAIT` waits for, and the last reading of the master's connected replicas.
#[derive(Debug)]
pub(crate) struct ReplicaSync {
    replicas: usize,
    timeout: Duration,
    /// `connected_slaves` of `INFO replication`, as last read.
    connected: AtomicUsize,
    /// When it was read, in ms since the origin of [`to_nanos`](crate::util::time::to_nanos) (0: never).
    read_at_ms: AtomicU64,
}

impl ReplicaSync {
    pub(crate) fn new(replicas: usize, timeout: Duration) -> Self {
        ReplicaSync {
            replicas,
            timeout,
            connected: AtomicUsize::new(0),
            read_at_ms: AtomicU64::new(0),
        }
    }

    /// Waits until the writes made so far on `conn` reached a replica, when replicas are
    /// connected.
    ///
    /// # Errors
    /// [`Error::NotReplicated`] when replicas are connected and none acknowledged within
    /// the timeout; a connection error when `WAIT` itself failed.
    pub(crate) async fn wait(&self, conn: &mut Conn) -> Result<()> {
        let connected = self.connected_replicas(conn, false).await?;
        if connected == 0 {
            return Ok(());
        }
        let wanted = self.replicas.min(connected);
        let timeout_ms = crate::util::time::millis(self.timeout);
        let acked: usize = redis::cmd("WAIT")
            .arg(wanted)
            .arg(timeout_ms)
            .query_async(conn)
            .await?;
        if acked > 0 {
            if acked < wanted {
                tracing::debug!(
                    acked,
                    wanted,
                    "a lock write reached fewer replicas than asked"
                );
            }
            return Ok(());
        }
        // None acknowledged: failing only counts if replicas are still there.
        let connected = self.connected_replicas(conn, true).await?;
        if connected == 0 {
            return Ok(());
        }
        tracing::warn!(connected, timeout = ?self.timeout, "no replica acknowledged a lock write");
        Err(Error::NotReplicated {
            connected,
            timeout: self.timeout,
        })
    }

    /// The master's connected replicas: the last reading, or a new one when it is older
    /// than [`REPLICAS_READ_EVERY`] or `fresh` is asked for.
    async fn connected_replicas(&self, conn: &mut Conn, fresh: bool) -> Result<usize> {
        let now_ms = crate::util::time::to_nanos(tokio::time::Instant::now()) / 1_000_000;
        let read_at = self.read_at_ms.load(Ordering::Acquire);
        let every = crate::util::time::millis(REPLICAS_READ_EVERY);
        if !fresh && read_at != 0 && now_ms.saturating_sub(read_at) < every {
            return Ok(self.connected.load(Ordering::Acquire));
        }
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(conn)
            .await?;
        let connected = parse_connected_replicas(&info);
        self.connected.store(connected, Ordering::Release);
        self.read_at_ms.store(now_ms.max(1), Ordering::Release);
        Ok(connected)
    }
}

/// `connected_slaves:<n>` of `INFO replication` (0 when absent, as on a replica).
fn parse_connected_replicas(info: &str) -> usize {
    info.lines()
        .find_map(|line| line.strip_prefix("connected_slaves:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connected_replicas_are_read_from_info() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\nslave0:ip=127.0.0.1\r\n";
        assert_eq!(parse_connected_replicas(info), 2);
        assert_eq!(
            parse_connected_replicas("# Replication\r\nrole:slave\r\n"),
            0
        );
    }
}
