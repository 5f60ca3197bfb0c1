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
//!
//! On a Redis Cluster the `WAIT` of an acquire goes to the master of the lock's slot, over
//! the node connection that carried the write; a renewal round, which wrote to many
//! masters, sends one `WAIT` to every master at once, and a master whose replicas did not
//! acknowledge voids only the renewals of its own slots (found with `CLUSTER SLOTS`).
//! `connected_slaves` is read per master.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use redis::{Cmd, Value};
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::protocol::conn::Conn;
use crate::protocol::slot_map::{cluster_slots, SlotMap};
use crate::util::metrics;
use crate::util::poison;

/// How long a reading of the number of connected replicas is trusted: `WAIT` for replicas
/// that are not there would block for the whole timeout on every write.
const REPLICAS_READ_EVERY: Duration = Duration::from_secs(1);

/// A reading of `connected_slaves` by node, and when it was taken.
type Reading = (HashMap<String, usize>, Instant);

/// What `WAIT` waits for, and the last readings of the masters' connected replicas.
#[derive(Debug)]
pub(crate) struct ReplicaSync {
    replicas: usize,
    timeout: Duration,
    /// `connected_slaves` by node address (as redis-rs names a cluster's nodes; `""` for
    /// the one Redis), and when it was read, by where the write was made (see [`ask`]).
    readings: Mutex<HashMap<Option<u16>, Reading>>,
}

impl ReplicaSync {
    pub(crate) fn new(replicas: usize, timeout: Duration) -> Self {
        ReplicaSync {
            replicas,
            timeout,
            readings: Mutex::new(HashMap::new()),
        }
    }

    /// Waits until the writes made so far on `conn` reached a replica, when replicas are
    /// connected. On a cluster, `slot` names the master that took the write.
    ///
    /// # Errors
    /// [`Error::NotReplicated`] when replicas are connected and none acknowledged within
    /// the timeout; a connection error when `WAIT` itself failed.
    pub(crate) async fn wait(&self, conn: &mut Conn, slot: Option<u16>) -> Result<()> {
        let slot = slot.filter(|_| conn.is_cluster());
        let waited = self.unacknowledged(conn, slot).await.and_then(|failed| {
            let Some(&(_, connected)) = failed.first() else {
                return Ok(());
            };
            tracing::warn!(connected, timeout = ?self.timeout, "no replica acknowledged a lock write");
            Err(Error::NotReplicated {
                connected,
                timeout: self.timeout,
            })
        });
        metrics::replica_sync(match &waited {
            Ok(()) => "acknowledged",
            Err(Error::NotReplicated { .. }) => "not_acknowledged",
            Err(_) => "failed",
        });
        waited
    }

    /// Waits for a renewal round's writes, which on a cluster went to many masters: which
    /// of them count. A master whose replicas do not acknowledge voids only the renewals
    /// of its own slots.
    pub(crate) async fn wait_round(&self, conn: &mut Conn) -> Replicated {
        let replicated = match self.unacknowledged(conn, None).await {
            Ok(failed) if failed.is_empty() => Replicated::All,
            Ok(failed) => {
                tracing::warn!(masters = ?failed, timeout = ?self.timeout, "no replica acknowledged lock renewals");
                let nodes: Vec<String> = failed.into_iter().map(|(node, _)| node).collect();
                if conn.is_cluster() {
                    let void = slots_of(conn, &nodes).await;
                    void.map_or(Replicated::Nothing, Replicated::Except)
                } else {
                    Replicated::Nothing
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "lock renewals not replicated");
                Replicated::Nothing
            }
        };
        metrics::replica_sync(match replicated {
            Replicated::All => "acknowledged",
            _ => "not_acknowledged",
        });
        replicated
    }

    /// `WAIT` where the writes to `slot` went (see [`ask`]): the masters that have
    /// replicas connected and none of which acknowledged, with how many are connected. A
    /// master the writes did not go to answers at once.
    async fn unacknowledged(
        &self,
        conn: &mut Conn,
        slot: Option<u16>,
    ) -> Result<Vec<(String, usize)>> {
        let connected = self.connected(conn, slot, false).await?;
        let wanted = self
            .replicas
            .min(connected.values().copied().max().unwrap_or(0));
        if wanted == 0 {
            return Ok(Vec::new());
        }
        let mut wait = redis::cmd("WAIT");
        wait.arg(wanted)
            .arg(crate::util::time::millis(self.timeout));
        let unacknowledged: Vec<String> = ask(conn, slot, wait)
            .await?
            .into_iter()
            .filter_map(|(node, reply)| match reply {
                Value::Int(acked) if acked > 0 => {
                    if (acked as usize) < wanted {
                        tracing::debug!(
                            acked,
                            wanted,
                            "a lock write reached fewer replicas than asked"
                        );
                    }
                    None
                }
                _ => Some(node),
            })
            .collect();
        if unacknowledged.is_empty() {
            return Ok(Vec::new());
        }
        // Failing only counts where replicas are still there.
        let connected = self.connected(conn, slot, true).await?;
        Ok(unacknowledged
            .into_iter()
            .filter_map(|node| Some((node.clone(), *connected.get(&node).filter(|n| **n > 0)?)))
            .collect())
    }

    /// The connected replicas of the masters the writes to `slot` went to, by address: the
    /// last reading, or a new one when it is older than [`REPLICAS_READ_EVERY`] or `fresh`
    /// is asked for. A master that did not answer has no reading: its writes failed anyway.
    async fn connected(
        &self,
        conn: &mut Conn,
        slot: Option<u16>,
        fresh: bool,
    ) -> Result<HashMap<String, usize>> {
        if let Some((connected, at)) = poison::locked(&self.readings).get(&slot) {
            if !fresh && at.elapsed() < REPLICAS_READ_EVERY {
                return Ok(connected.clone());
            }
        }
        let mut info = redis::cmd("INFO");
        info.arg("replication");
        let connected: HashMap<String, usize> = ask(conn, slot, info)
            .await?
            .into_iter()
            .filter_map(|(node, reply)| {
                let info = redis::from_redis_value::<String>(reply).ok()?;
                Some((node, parse_connected_replicas(&info)))
            })
            .collect();
        let reading = (connected.clone(), Instant::now());
        poison::locked(&self.readings).insert(slot, reading);
        Ok(connected)
    }
}

/// Which writes of a renewal round reached a replica.
#[derive(Debug)]
pub(crate) enum Replicated {
    All,
    Nothing,
    /// All but those of these slot ranges (inclusive), whose masters' replicas did not
    /// acknowledge.
    Except(Vec<(u16, u16)>),
}

impl Replicated {
    /// Whether a renewal of a lock in `slot` (ignored unless [`Replicated::Except`]) counts.
    pub(crate) fn counts(&self, slot: impl FnOnce() -> u16) -> bool {
        match self {
            Replicated::All => true,
            Replicated::Nothing => false,
            Replicated::Except(void) => {
                let slot = slot();
                !void.iter().any(|&(from, to)| (from..=to).contains(&slot))
            }
        }
    }
}

/// The slot ranges the masters at `nodes` serve, from `CLUSTER SLOTS` (whose addresses are
/// the ones redis-rs names nodes by). Asked of the masters, the first answer taken: a
/// command without a key may go to any node, and the one that fails to answer `WAIT`
/// may be a frozen replica's master, or the replica itself.
async fn slots_of(conn: &mut Conn, nodes: &[String]) -> Result<Vec<(u16, u16)>> {
    let replies = conn.on_every_master(cluster_slots()).await?;
    // Hosts as announced: redis-rs names a node by the address `CLUSTER SLOTS` gives.
    let map = replies
        .iter()
        .find_map(|(_, reply)| SlotMap::parse(reply, "").ok());
    map.map(|map| map.ranges_of(nodes))
        .ok_or_else(|| Error::pool("no master answered CLUSTER SLOTS"))
}

/// Sends `cmd` where the writes to `slot` went: on a cluster, to the master of `slot`;
/// with no slot, to every master (the one Redis elsewhere). Each node's reply, by address
/// (`""` for the master of a slot and for the one Redis).
async fn ask(conn: &mut Conn, slot: Option<u16>, cmd: Cmd) -> Result<Vec<(String, Value)>> {
    Ok(match slot {
        Some(slot) => vec![(String::new(), conn.on_slot_master(cmd, slot).await?)],
        None => conn.on_every_master(cmd).await?,
    })
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
