//! What a cluster client knows of its cluster: noticing that it changed its topology (the
//! cluster's current epoch, read from any node, rises with every failover and every slot
//! handed to another master), and which nodes it is made of ([`node_ids`]).
//!
//! A cluster client's connection is never replaced (redis-rs repairs its node sockets and
//! re-reads the slot map on a redirection by itself), so nothing in the client's own
//! traffic says "a replica was just promoted": a lock the promoted replica never got would
//! be found gone only at the watchdog's next round (a third of the lease later: 10 s with
//! the default 30 s watchdog), and a fixed-lease lock not at all. Redisson polls
//! `CLUSTER NODES` for the same reason (`scanInterval`). Here the lease check reads the
//! epoch every [`EPOCH_POLL`] while the client holds a lock, and a rise starts a renewal
//! round and a check of fixed-lease holds at once (see
//! [`lease_check`](super::lease_check)).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::protocol::conn::Conn;
use crate::protocol::slot_map::SlotMap;

/// How often a cluster client holding locks reads the cluster's epoch: a lock lost to a
/// failover is reported about this long after the replica's promotion at the latest.
pub(crate) const EPOCH_POLL: Duration = Duration::from_secs(1);

/// The highest current epoch seen of one cluster.
#[derive(Debug, Default)]
pub(crate) struct EpochWatch {
    /// 0 until the first read: the first read is a baseline, not a change.
    highest: AtomicU64,
}

impl EpochWatch {
    /// Reads the current epoch from any node; true when it rose above the highest seen
    /// before. The highest is kept, not the last: nodes learn a new epoch by gossip, one
    /// after the other, and a node that has not yet must not make the next read look like a
    /// change again.
    ///
    /// # Errors
    /// The node's error: that node may be the one that failed, and the next poll asks
    /// another.
    pub(crate) async fn changed(&self, conn: &Conn) -> redis::RedisResult<bool> {
        if !conn.is_cluster() {
            return Ok(false);
        }
        let mut info = redis::cmd("CLUSTER");
        info.arg("INFO");
        let reply = conn.clone().query_one_node(&info).await?;
        let text = match redis::from_redis_value::<String>(reply) {
            Ok(text) => text,
            Err(e) => {
                tracing::debug!(error = %e, "unexpected CLUSTER INFO reply");
                return Ok(false);
            }
        };
        let Some(epoch) = current_epoch(&text) else {
            return Ok(false);
        };
        let before = self.highest.fetch_max(epoch, Ordering::AcqRel);
        Ok(before != 0 && epoch > before)
    }
}

/// The ids of every node a cluster client's cluster lists (masters and replicas, from
/// `CLUSTER SLOTS` on any node): two clients of one cluster share some, two clusters none.
/// `None` for a connection to one Redis.
///
/// # Errors
/// The node's error, or an unexpected reply.
pub(crate) async fn node_ids(conn: &Conn) -> redis::RedisResult<Option<BTreeSet<String>>> {
    if !conn.is_cluster() {
        return Ok(None);
    }
    Ok(Some(SlotMap::read(conn).await?.ids))
}

/// `cluster_current_epoch` of a `CLUSTER INFO` reply.
fn current_epoch(info: &str) -> Option<u64> {
    info.lines()
        .find_map(|line| line.strip_prefix("cluster_current_epoch:"))
        .and_then(|value| value.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::current_epoch;

    #[test]
    fn reads_the_current_epoch() {
        let info = "cluster_state:ok\r\ncluster_current_epoch:7\r\ncluster_my_epoch:2\r\n";
        assert_eq!(current_epoch(info), Some(7));
        assert_eq!(current_epoch("cluster_state:ok\r\n"), None);
    }
}
